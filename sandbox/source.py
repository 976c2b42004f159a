"""A generator's code: a module on this machine, or a submitted .zip or wheel, checked and unpacked.

Archives are checked from the zip's central directory alone (names, file count, compression
method and ratio, expanded size) before anything is unpacked; unpacking, on the worker, cuts
every member at its declared size.
"""

from __future__ import annotations

import contextlib
import json
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path, PurePosixPath

from .errors import SandboxError

# Small members cannot be bombs on their own (the total cap covers many of them).
RATIO_CHECK_MIN_BYTES = 1024 * 1024

MANIFEST = "foley-generator.json"
MAX_MANIFEST_BYTES = 64 * 1024
# Methods Python's zipfile can read; anything else would fail only when unpacked.
ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def check_member_name(name: str) -> str | None:
    """Why an archive member's name is refused (a NUL byte, an absolute path, a backslash, a
    '..'), or None."""
    if "\x00" in name:
        return "name contains a NUL byte"
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "absolute path is not allowed"
    if "\\" in name:
        return "backslash in path is not allowed"
    if any(part == ".." for part in PurePosixPath(name).parts):
        return "path traversal ('..') is not allowed"
    return None


def _zip_read_errors() -> tuple[type[BaseException], ...]:
    """What reading a corrupt or hostile zip member can raise, from zipfile and its codecs."""
    errors: list[type[BaseException]] = [
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        EOFError,
        NotImplementedError,
        RuntimeError,  # encrypted members
        ValueError,
        OSError,  # bz2 reports bad data as OSError
    ]
    with contextlib.suppress(ImportError):
        import lzma

        errors.append(lzma.LZMAError)
    return tuple(errors)


ZIP_READ_ERRORS = _zip_read_errors()


@dataclass(frozen=True)
class ArchiveLimits:
    """What a generator archive may hold; checked from its central directory, before unpacking."""

    max_files: int = 10_000
    max_expanded_bytes: int = 8 * 1024**3
    # Members over archives.RATIO_CHECK_MIN_BYTES may not expand more than this many times.
    max_ratio: int = 100


@dataclass(frozen=True)
class ArchiveContents:
    """A checked generator archive: its module, where `load_model` looks, and what to unpack."""

    module: str
    model_path: str | None
    members: tuple[zipfile.ZipInfo, ...]


@dataclass
class GeneratorSource:
    """Where a generator's code is: the module to import and the folders or files it needs.

    `code` lists (path on this machine, where it goes in the import folder: "" for the folder
    itself); the sandbox shows the generator these and nothing else of this machine.
    """

    module: str
    code: list[tuple[str, str]] = field(default_factory=list)
    model_path: str | None = None

    @classmethod
    def from_module(cls, name: str, model_path: str | None = None) -> GeneratorSource:
        """An importable module, e.g. `stimuli.generators.baseline` or an installed package.

        Only the folder holding the module is given (`stimuli/generators/` for the baseline; its
        parents become namespace packages), not the project around it.
        """
        try:
            spec = find_spec(name)
        except (ImportError, ValueError) as exc:
            raise SandboxError("import", f"cannot find module {name}: {exc}") from None
        if spec is None or not spec.origin:
            raise SandboxError("import", f"no module named {name}")
        origin = Path(spec.origin).resolve()
        parts = name.split(".")
        package = parts if origin.name == "__init__.py" else parts[:-1]
        if package:
            code = [(str(origin.parent), "/".join(package))]
        else:
            code = [(str(origin), origin.name)]
        return cls(module=name, code=code, model_path=model_path)

    @classmethod
    def from_archive(
        cls, archive: Path | str, dest: Path | str, limits: ArchiveLimits | None = None
    ) -> GeneratorSource:
        """Check a .zip or a wheel (`inspect_archive`), unpack it into `dest`, find its module.

        `load_model` gets the unpacked folder (where the weights are) unless the manifest names
        a path inside it.
        """
        contents = inspect_archive(archive, limits)
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        _unpack(Path(archive), contents.members, dest)
        model_path = str(dest)
        if contents.model_path:
            inner = (dest / contents.model_path).resolve()
            if not inner.is_relative_to(dest.resolve()):
                raise SandboxError("archive", "model_path points outside the archive")
            model_path = str(inner)
        return cls(module=contents.module, code=[(str(dest), "")], model_path=model_path)


def inspect_archive(archive: Path | str, limits: ArchiveLimits | None = None) -> ArchiveContents:
    """Check a generator archive from its central directory, unpacking nothing.

    Names, member kinds, the file count, every member's compression method and ratio and the
    total expanded size are checked; only the small manifest is read. The module is named by
    `foley-generator.json` ({"module": ..., "model_path": ...}) when the archive has one, else
    it is the archive's one top-level package or .py file. Any problem, a damaged archive
    included, is a SandboxError("archive", ...).
    """
    archive = Path(archive)
    limits = limits or ArchiveLimits()
    with _open_zip(archive) as zf:
        members = tuple(zf.infolist())
        _check_members(members, limits)
        manifest = next((m for m in members if m.filename == MANIFEST), None)
        data = None
        if manifest is not None:
            if manifest.file_size > MAX_MANIFEST_BYTES:
                raise SandboxError("archive", f"{MANIFEST} is over {MAX_MANIFEST_BYTES:,} bytes")
            data = _parse_manifest(b"".join(_member_chunks(zf, manifest)))
    if data is not None:
        module = data["module"]
        model_path = data.get("model_path") or None
        if model_path is not None and check_member_name(model_path):
            raise SandboxError("archive", "model_path points outside the archive")
        return ArchiveContents(module, model_path, members)
    candidates = set()
    for member in members:
        parts = PurePosixPath(member.filename).parts
        if len(parts) == 2 and parts[1] == "__init__.py":
            candidates.add(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py") and not member.is_dir():
            candidates.add(parts[0][: -len(".py")])
    if len(candidates) != 1:
        found = ", ".join(sorted(candidates)) or "none"
        raise SandboxError(
            "archive",
            "the archive must hold exactly one top-level module or package, or a "
            f"foley-generator.json naming it (found: {found})",
        )
    return ArchiveContents(candidates.pop(), None, members)


def _check_members(members: tuple[zipfile.ZipInfo, ...], limits: ArchiveLimits) -> None:
    files = [m for m in members if not m.is_dir()]
    if len(files) > limits.max_files:
        raise SandboxError(
            "archive", f"the archive holds {len(files):,} files; the limit is {limits.max_files:,}"
        )
    total = 0
    for member in members:
        name = member.filename
        problem = check_member_name(name)
        if problem:
            raise SandboxError("archive", f"{name}: a path outside the archive ({problem})")
        mode = member.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise SandboxError("archive", f"{name}: symbolic links are not allowed")
        if member.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise SandboxError("archive", f"{name}: only files and folders are allowed")
        if member.flag_bits & 0x1:
            raise SandboxError("archive", f"{name}: encrypted entries are not supported")
        if member.compress_type not in ZIP_METHODS:
            raise SandboxError(
                "archive",
                f"{name}: compression method {member.compress_type} is not supported "
                "(use deflate, or none)",
            )
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_CHECK_MIN_BYTES and ratio > limits.max_ratio:
            raise SandboxError(
                "archive",
                f"{name}: compression ratio {ratio:,.0f}:1 exceeds the limit of "
                f"{limits.max_ratio}:1 (possible zip bomb)",
            )
        total += member.file_size
    if total > limits.max_expanded_bytes:
        raise SandboxError(
            "archive",
            f"the archive expands to {total:,} bytes; the limit is {limits.max_expanded_bytes:,}",
        )


def _open_zip(archive: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except ZIP_READ_ERRORS as exc:
        raise SandboxError("archive", f"not a zip archive or a wheel ({exc})") from None


def _member_chunks(zf: zipfile.ZipFile, member: zipfile.ZipInfo) -> Iterator[bytes]:
    """A member's bytes, never more than its declared size; damage is a SandboxError."""
    size = 0
    try:
        with zf.open(member) as src:
            while chunk := src.read(1 << 20):
                size += len(chunk)
                if size > member.file_size:
                    raise SandboxError(
                        "archive", f"{member.filename}: expands beyond its declared size"
                    )
                yield chunk
    except ZIP_READ_ERRORS as exc:
        raise SandboxError("archive", f"{member.filename}: damaged ({exc})") from None


def _parse_manifest(raw: bytes) -> dict:
    """The manifest's settings: a module name and, optionally, a model path inside the archive."""
    try:
        data = json.loads(raw)
        if not isinstance(data["module"], str) or not isinstance(data.get("model_path") or "", str):
            raise TypeError("module and model_path must be strings")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: nested
        raise SandboxError("archive", f"{MANIFEST} is invalid: {exc}") from None
    return data


def _unpack(archive: Path, members: tuple[zipfile.ZipInfo, ...], dest: Path) -> None:
    """Unpack checked members; each stops at its declared size, so the total is capped too."""
    root = dest.resolve()
    with _open_zip(archive) as zf:
        for member in members:
            target = dest / member.filename
            if not target.resolve().is_relative_to(root):
                raise SandboxError("archive", f"{member.filename}: a path outside the archive")
            try:
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "xb") as dst:
                    for chunk in _member_chunks(zf, member):
                        dst.write(chunk)
            except (FileExistsError, NotADirectoryError) as exc:
                raise SandboxError(
                    "archive", f"{member.filename}: clashes with another name in the archive"
                ) from exc
