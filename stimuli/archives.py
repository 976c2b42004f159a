"""Safe reading of uploaded archives and folders: one folder per category, audio files inside.

Nothing here trusts the archive. Names are checked before anything is read (no absolute paths, no
`..`, no links, no devices, no name given twice), the number of files and the declared and actual
expanded sizes are capped, and each member is read with a hard byte limit, so a zip bomb or a
lying header stops at the limit instead of filling memory or disk. Whatever a crafted archive
makes the zip reader raise becomes an ArchiveError (the archive as a whole) or a MemberError (one
file).
"""

from __future__ import annotations

import lzma
import os
import stat
import struct
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sandbox.source import RATIO_CHECK_MIN_BYTES, check_member_name

AUDIO_EXTENSIONS = {".wav", ".wave", ".flac", ".aif", ".aiff", ".ogg", ".mp3"}
# Metadata that desktop archivers add on their own; skipped with a note, never an error.
JUNK_NAMES = {".ds_store", "thumbs.db", "desktop.ini"}
JUNK_FOLDERS = {"__macosx"}
# The compression methods Python's zip reader can decompress.
READABLE_METHODS = {
    zipfile.ZIP_STORED: "stored",
    zipfile.ZIP_DEFLATED: "deflate",
    zipfile.ZIP_BZIP2: "bzip2",
    zipfile.ZIP_LZMA: "lzma",
}
# What the zip reader raises on a crafted central directory, beyond BadZipFile: bad UTF-8 in a
# name flagged as UTF-8, an unknown format version, offsets that point nowhere.
CORRUPT_DIRECTORY_ERRORS = (
    zipfile.LargeZipFile,
    EOFError,
    ValueError,
    IndexError,
    KeyError,
    OverflowError,
    NotImplementedError,
    struct.error,
)
# ... and on a member whose data is corrupt, or that it cannot decompress (zlib, bz2 and lzma
# errors; RuntimeError for an entry that turns out to be encrypted).
CORRUPT_MEMBER_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    lzma.LZMAError,
)


@dataclass(frozen=True)
class UploadLimits:
    max_files: int = 20_000
    max_expanded_bytes: int = 8 * 1024**3
    max_file_bytes: int = 64 * 1024**2
    max_ratio: int = 100

    @classmethod
    def from_settings(cls) -> UploadLimits:
        from django.conf import settings

        return cls(
            max_files=settings.FOLEY_UPLOAD_MAX_FILES,
            max_expanded_bytes=settings.FOLEY_UPLOAD_MAX_EXPANDED_BYTES,
            max_file_bytes=settings.FOLEY_UPLOAD_MAX_FILE_BYTES,
            max_ratio=settings.FOLEY_UPLOAD_MAX_RATIO,
        )


class ArchiveError(Exception):
    """The archive as a whole cannot be read; `problems` holds one message per bad entry."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class Member:
    """One audio file of the upload: its category folder, its path inside the upload and size."""

    folder: str
    path: str
    size: int


@dataclass
class Listing:
    members: list[Member] = field(default_factory=list)
    # "path: why" of each file left out: archivers' metadata, and files that are not audio
    # unless the upload is strict.
    skipped: list[str] = field(default_factory=list)
    # Where files sit (a file outside a category folder, nested folders, a name twice, and in a
    # strict upload a file that is not audio): reported with the audio checks, in one pass.
    problems: list[str] = field(default_factory=list)


def _name_key(path: str) -> str:
    # Names that differ only in letter case or Unicode form (a precomposed "é" or "e" plus an
    # accent) land on the same file on macOS and Windows, and look the same in every report.
    return unicodedata.normalize("NFC", path).casefold()


def _repeated_names(paths: list[str], problems: list[str]) -> None:
    first: dict[str, str] = {}
    for path in paths:
        key = _name_key(path)
        if key not in first:
            first[key] = path
        elif first[key] == path:
            problems.append(f"{path}: the name appears more than once in the archive")
        else:
            problems.append(
                f"{path}: the same name as {first[key]} once letter case and Unicode form are "
                "ignored; rename one of them"
            )


def _split(paths: list[str], strict: bool) -> Listing:
    """Turn relative file paths into members: `category/file.wav`, under one optional wrapper.

    Files that are not audio are skipped with a note, or are problems when `strict`."""
    listing = Listing()
    problems = listing.problems
    kept: list[str] = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if parts and (parts[0].casefold() in JUNK_FOLDERS or parts[-1].casefold() in JUNK_NAMES):
            listing.skipped.append(f"{path}: archive metadata")
        else:
            kept.append(path)
    # A zip may hold one name twice; only one of those entries could ever be read by name.
    _repeated_names(kept, problems)
    # A zip of a folder puts everything under one top-level folder; look inside it.
    tops = {PurePosixPath(p).parts[0] for p in kept if len(PurePosixPath(p).parts) >= 3}
    strip = len(tops) == 1 and all(len(PurePosixPath(p).parts) >= 3 for p in kept)
    for path in kept:
        parts = PurePosixPath(path).parts[1:] if strip else PurePosixPath(path).parts
        suffix = PurePosixPath(parts[-1]).suffix.lower()
        if suffix not in AUDIO_EXTENSIONS:
            if strict:
                problems.append(
                    f"{path}: not an audio file (extension '{suffix or 'none'}'); expected .wav"
                )
            else:  # a README or notes beside the clips: no reason to reject the clips
                listing.skipped.append(f"{path}: not an audio file")
            continue
        if len(parts) == 1:
            problems.append(f"{path}: file is not inside a category folder")
            continue
        if len(parts) > 2:
            problems.append(f"{path}: nested folders are not allowed; expected <category>/<file>")
            continue
        listing.members.append(Member(folder=parts[0], path=path, size=0))
    return listing


class Source:
    """An upload to read: a zip file or a folder on disk."""

    def __init__(self, path: Path | str, limits: UploadLimits | None = None):
        self.path = Path(path)
        self.limits = limits or UploadLimits()
        self._zip: zipfile.ZipFile | None = None
        self._sizes: dict[str, int] = {}

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._zip is not None:
            self._zip.close()

    def list(self) -> Listing:
        """Check the structure and return the audio members; raise ArchiveError on any problem."""
        listing = self.survey(strict=True)
        if listing.problems:
            raise ArchiveError(listing.problems)
        return listing

    def survey(self, *, strict: bool = False) -> Listing:
        """The audio members and, in `listing.problems`, where files sit wrongly, so that they
        are reported together with the audio checks; raise ArchiveError only when the upload
        cannot be read safely (not a zip, hostile names or links, a bomb, the limits), with
        every problem found."""
        if self.path.is_dir():
            return self._list_folder(strict)
        return self._list_zip(strict)

    def _list_zip(self, strict: bool) -> Listing:
        try:
            self._zip = zipfile.ZipFile(self.path)
        except zipfile.BadZipFile:
            raise ArchiveError(
                ["the upload is not a readable zip archive (truncated or not a zip file)"]
            ) from None
        except UnicodeDecodeError:
            raise ArchiveError(
                [
                    "the upload is not a readable zip archive (a file name is marked as UTF-8 "
                    "but is not valid UTF-8)"
                ]
            ) from None
        except OSError as exc:
            raise ArchiveError([f"the upload cannot be opened: {exc.strerror}"]) from None
        except CORRUPT_DIRECTORY_ERRORS as exc:
            raise ArchiveError(
                [f"the upload is not a readable zip archive (corrupt directory: {exc})"]
            ) from None
        infos = self._zip.infolist()
        problems: list[str] = []
        files = [info for info in infos if not info.is_dir()]
        if len(files) > self.limits.max_files:
            raise ArchiveError(
                [f"the archive holds {len(files):,} files; the limit is {self.limits.max_files:,}"]
            )
        total = 0
        paths: list[str] = []
        for info in files:
            name = info.filename
            problem = check_member_name(name)
            mode = info.external_attr >> 16
            if problem is None and info.create_system == 3 and stat.S_ISLNK(mode):
                problem = "symbolic links are not allowed"
            elif (
                problem is None
                and info.create_system == 3
                and stat.S_IFMT(mode)
                and not stat.S_ISREG(mode)
            ):
                problem = "only regular files are allowed"
            if problem is None and info.flag_bits & 0x1:
                problem = "encrypted entries are not supported"
            if problem is None and info.compress_type not in READABLE_METHODS:
                problem = (
                    f"compression method {info.compress_type} is not supported; "
                    f"use {', '.join(READABLE_METHODS.values())}"
                )
            if (
                problem is None
                and info.file_size > RATIO_CHECK_MIN_BYTES
                and info.file_size > self.limits.max_ratio * max(info.compress_size, 1)
            ):
                ratio = info.file_size / max(info.compress_size, 1)
                problem = (
                    f"compression ratio {ratio:,.0f}:1 exceeds the limit of "
                    f"{self.limits.max_ratio}:1 (possible zip bomb)"
                )
            if problem is None and info.file_size > self.limits.max_file_bytes:
                problem = (
                    f"expands to {info.file_size:,} bytes; the limit per file is "
                    f"{self.limits.max_file_bytes:,}"
                )
            if problem:
                problems.append(f"{name}: {problem}")
                continue
            total += info.file_size
            self._sizes[name] = info.file_size
            paths.append(name)
        if total > self.limits.max_expanded_bytes:
            problems.append(
                f"the archive expands to {total:,} bytes; the limit is "
                f"{self.limits.max_expanded_bytes:,}"
            )
        return self._listing(paths, problems, strict)

    def _listing(self, paths: list[str], problems: list[str], strict: bool) -> Listing:
        listing = _split(paths, strict)
        if problems:
            raise ArchiveError(problems + listing.problems)
        listing.members = [Member(m.folder, m.path, self._sizes[m.path]) for m in listing.members]
        return listing

    def _list_folder(self, strict: bool) -> Listing:
        problems: list[str] = []
        paths: list[str] = []
        root = self.path
        total = 0
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in list(dirnames):
                full = Path(dirpath) / name
                if full.is_symlink():
                    problems.append(f"{full.relative_to(root)}: symbolic links are not allowed")
                    dirnames.remove(name)
            for name in filenames:
                full = Path(dirpath) / name
                rel = full.relative_to(root).as_posix()
                st = full.lstat()
                if stat.S_ISLNK(st.st_mode):
                    problems.append(f"{rel}: symbolic links are not allowed")
                    continue
                if not stat.S_ISREG(st.st_mode):
                    problems.append(f"{rel}: only regular files are allowed")
                    continue
                if st.st_size > self.limits.max_file_bytes:
                    problems.append(
                        f"{rel}: {st.st_size:,} bytes; the limit per file is "
                        f"{self.limits.max_file_bytes:,}"
                    )
                    continue
                total += st.st_size
                self._sizes[rel] = st.st_size
                paths.append(rel)
                if len(paths) > self.limits.max_files:
                    raise ArchiveError(
                        [f"the folder holds more than {self.limits.max_files:,} files"]
                    )
        if total > self.limits.max_expanded_bytes:
            problems.append(
                f"the folder holds {total:,} bytes; the limit is {self.limits.max_expanded_bytes:,}"
            )
        return self._listing(sorted(paths), problems, strict)

    def read(self, member: Member) -> bytes:
        """The member's bytes, never more than its declared size (a lying header stops here)."""
        limit = min(member.size, self.limits.max_file_bytes)
        if self._zip is None:
            with open(self.path / member.path, "rb") as handle:
                data = handle.read(limit + 1)
        else:
            try:
                with self._zip.open(member.path) as handle:
                    data = _read_bounded(handle, limit + 1)
            except CORRUPT_MEMBER_ERRORS as exc:
                raise MemberError(
                    f"corrupt archive entry ({str(exc) or type(exc).__name__})"
                ) from None
        if len(data) > limit:
            raise MemberError("expands beyond its declared size (corrupt or hostile archive)")
        return data


class MemberError(Exception):
    """One member cannot be read; the rest of the archive may still be fine."""


def _read_bounded(handle, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = handle.read(min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def iter_members(
    source: Source, listing: Listing
) -> Iterator[tuple[Member, bytes | None, str | None]]:
    """Each member with its bytes, or with the reason it could not be read."""
    for member in listing.members:
        try:
            yield member, source.read(member), None
        except MemberError as exc:
            yield member, None, str(exc)
