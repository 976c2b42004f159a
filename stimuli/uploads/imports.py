"""Importing a set of clips: the one code path behind the web upload, the API and the CLI.

An import is all or nothing. Every file is read and checked first; only when every file passes
are audio files written and rows created, in one transaction. If anything fails after a file was
written, the files this import created are removed before the transaction rolls back, while its
uncommitted rows still block any concurrent import of the same sound from claiming them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.db import IntegrityError, transaction
from django.template.defaultfilters import pluralize

from .. import selectors, storage
from ..archives import ArchiveError, Source, UploadLimits, iter_members
from ..audio import AudioCheck, inspect_audio
from ..errors import Refused
from ..models import AudioFile, Category, Challenge, Clip, Job, System
from ..phases import phase_conflict
from ..selectors import category_lookup, normalise_folder

Progress = Callable[[int, int, str], None]


class ImportRequestError(Refused, ValueError):
    """The import was asked for with arguments that cannot work (wrong role, foreign system)."""


class ImportPhaseError(ImportRequestError):
    """The challenge's phase forbids imports now: a conflict with its state (HTTP 409)."""

    status = 409


@dataclass
class FileReport:
    path: str
    category: str | None = None
    # valid (checked, not stored yet), stored, already present, duplicate, rejected
    status: str = "pending"
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sha256: str | None = None


@dataclass
class ImportReport:
    role: str
    system: str | None = None
    convert: bool = False
    accepted: bool = False
    problems: list[str] = field(default_factory=list)
    files: list[FileReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    created_clips: int = 0
    created_audio: int = 0

    @property
    def rejected_files(self) -> list[FileReport]:
        return [f for f in self.files if f.errors]

    def summary(self) -> str:
        if self.accepted:
            present = sum(f.status == "already present" for f in self.files)
            dupes = sum(f.status == "duplicate" for f in self.files)
            text = f"Imported {self.created_clips} new clips from {len(self.files)} files"
            extras = []
            if present:
                extras.append(f"{present} already present")
            if dupes:
                extras.append(f"{dupes} duplicates within the upload")
            return text + (f" ({', '.join(extras)})" if extras else "") + "."
        bad = len(self.rejected_files)
        if bad and self.problems:
            n = len(self.problems)
            return (
                f"Upload rejected: {n} problem{pluralize(n)} with the archive and {bad} of "
                f"{len(self.files)} files are invalid. Nothing was stored."
            )
        if bad:
            return f"Upload rejected: {bad} of {len(self.files)} files are invalid. Nothing was stored."
        return "Upload rejected: " + "; ".join(self.problems) + ". Nothing was stored."

    def to_dict(self) -> dict:
        data = asdict(self)
        data["summary"] = self.summary()
        return data


def check_request(challenge: Challenge, role: str, system: System | None) -> None:
    # New clips change what FAD, the finalists and the medoids (the listening test's stimuli)
    # were computed from.
    if conflict := phase_conflict(challenge, fixed_by_listening="no clips can be added"):
        raise ImportPhaseError(conflict)
    if role not in Clip.Role.values:
        raise ImportRequestError(
            f"unknown role '{role}'; expected one of {', '.join(Clip.Role.values)}"
        )
    if role == Clip.Role.SYSTEM and system is None:
        raise ImportRequestError("system output needs a system")
    if role != Clip.Role.SYSTEM and system is not None:
        raise ImportRequestError(f"a {role} set belongs to no system; leave the system empty")
    if system is not None and system.challenge_id != challenge.pk:
        raise ImportRequestError(f"system '{system}' belongs to another challenge")


def check_structure(
    challenge: Challenge, path: Path, limits: UploadLimits | None = None, *, strict: bool = False
) -> list[str]:
    """Cheap checks that read only names and sizes, safe to run inside a web request: whether
    the upload can be read safely at all, and holds audio. Where files sit (unknown folders,
    stray files) is reported by the import with the audio checks, all in one report."""
    with Source(path, limits or UploadLimits.from_settings()) as source:
        try:
            listing = source.survey(strict=strict)
        except ArchiveError as exc:
            return exc.problems
    if not listing.members and not listing.problems:
        return ["the upload holds no audio files"]
    return []


def import_clips(
    challenge: Challenge,
    path: Path | str,
    *,
    role: str,
    system: System | None = None,
    convert: bool = False,
    strict: bool = False,
    job: Job | None = None,
    progress: Progress | None = None,
    limits: UploadLimits | None = None,
) -> ImportReport:
    """Check every file of the zip or folder at `path` and store them all, or store nothing.

    Every problem is reported in one pass: where files sit (unknown folders, a file outside a
    category folder) beside each audio file's own. Files that are not audio are skipped with a
    note, or are problems when `strict`."""
    check_request(challenge, role, system)
    report = ImportReport(role=role, system=system.name if system else None, convert=convert)
    spec = selectors.clip_spec(challenge)
    lookup = category_lookup(challenge)

    with Source(Path(path), limits or UploadLimits.from_settings()) as source:
        try:
            listing = source.survey(strict=strict)
        except ArchiveError as exc:
            report.problems = exc.problems
            return report
        report.skipped = listing.skipped
        report.problems = listing.problems + selectors.listing_problems(challenge, listing)
        if not listing.members:
            report.problems = report.problems or ["the upload holds no audio files"]
            return report

        total = len(listing.members)
        with tempfile.TemporaryDirectory(prefix="foley-import-") as scratch:
            staged: dict[str, tuple[AudioCheck, Path]] = {}
            seen: dict[tuple[int, str], str] = {}
            for done, (member, data, read_error) in enumerate(iter_members(source, listing), 1):
                # A file of an unknown folder is checked too: its folder is one problem of the
                # archive's, its audio may have others.
                category = lookup.get(normalise_folder(member.folder))
                entry = FileReport(path=member.path, category=category.slug if category else None)
                report.files.append(entry)
                check = inspect_audio(data, spec, convert=convert) if data is not None else None
                if read_error or check is None:
                    entry.errors.append(read_error or "unreadable")
                elif not check.ok:
                    entry.errors.extend(check.errors)
                if category is None and not read_error:
                    # Sound audio in the wrong place is no valid clip: it cannot be stored.
                    where = f"its folder '{member.folder}'" if member.folder else "it"
                    entry.errors.append(f"{where} names no category of this challenge")
                if not entry.errors:
                    entry.status = "valid"
                    entry.sha256 = check.sha256
                    entry.warnings.extend(check.conversions + check.warnings)
                    key = (category.pk if category else member.folder, check.sha256)
                    if key in seen:
                        entry.status = "duplicate"
                        entry.warnings.append(f"same audio as {seen[key]}; stored once")
                    else:
                        seen[key] = member.path
                        if check.sha256 not in staged:
                            staged_path = Path(scratch) / f"{check.sha256}.wav"
                            staged_path.write_bytes(check.wav_bytes)
                            check.wav_bytes = None  # keep memory flat on large uploads
                            check.samples = None
                            staged[check.sha256] = (check, staged_path)
                if entry.errors:
                    entry.status = "rejected"
                if progress:
                    progress(done, total, f"checked {member.path}")

            if report.problems or report.rejected_files:
                return report
            _store(challenge, role, system, job, report, staged, lookup)
    report.accepted = True
    return report


def _store(
    challenge: Challenge,
    role: str,
    system: System | None,
    job: Job | None,
    report: ImportReport,
    staged: dict[str, tuple[AudioCheck, Path]],
    lookup: dict[str, Category],
) -> None:
    """Create the audio rows and files, then the clips, in one transaction.

    Set-based: one query finds the sounds already stored and one insert adds the rest. Should a
    concurrent import insert one of the same sounds first, the insert fails as a whole and the
    rows are taken one at a time instead.
    """
    written: list[str] = []
    by_slug = {c.slug: c for c in lookup.values()}
    with transaction.atomic():
        # Checked again under the challenge's lock, which opening the listening test takes too:
        # the test cannot open between this check and the clips' arrival.
        check_request(
            Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk), role, system
        )
        try:
            audio_rows = {
                row.sha256: row for row in AudioFile.objects.filter(sha256__in=list(staged))
            }
            missing = [sha for sha in staged if sha not in audio_rows]
            new_rows = [
                storage.audio_row(sha, staged[sha][0], staged[sha][1].stat().st_size)
                for sha in missing
            ]
            try:
                with transaction.atomic():
                    created = AudioFile.objects.bulk_create(new_rows)
            except IntegrityError:
                created = []
                for row in new_rows:
                    obj, was_created = storage.stored_row(row)
                    audio_rows[row.sha256] = obj
                    if was_created:
                        created.append(obj)
            created_shas = {row.sha256 for row in created}
            for row in created:
                audio_rows[row.sha256] = row
            if len(created) and created[0].pk is None:  # backends that return no ids
                audio_rows.update(
                    (row.sha256, row)
                    for row in AudioFile.objects.filter(sha256__in=list(created_shas))
                )
            for sha, (_, staged_path) in staged.items():
                if sha in created_shas:
                    storage.put_audio(sha, staged_path.read_bytes())
                    written.append(sha)
                elif not storage.default_storage.exists(audio_rows[sha].file):
                    storage.put_audio(sha, staged_path.read_bytes())  # heal a lost file
            report.created_audio = len(created_shas)

            existing = set(
                Clip.objects.filter(
                    challenge=challenge,
                    role=role,
                    system=system,
                    audio__sha256__in=list(staged),
                ).values_list("category_id", "audio__sha256")
            )
            new_clips = []
            for entry in report.files:
                if entry.status == "duplicate":
                    continue
                category = by_slug[entry.category]
                if (category.pk, entry.sha256) in existing:
                    entry.status = "already present"
                    continue
                entry.status = "stored"
                new_clips.append(
                    Clip(
                        challenge=challenge,
                        role=role,
                        system=system,
                        category=category,
                        audio=audio_rows[entry.sha256],
                        original_name=entry.path,
                        source_job=job,
                    )
                )
            # A clip added by a concurrent import of the same set meanwhile fails the import;
            # rerunning it then reports that clip as already present.
            Clip.objects.bulk_create(new_clips)
            report.created_clips = len(new_clips)
        except BaseException:
            for sha in written:
                storage.delete_audio(sha)
            raise
