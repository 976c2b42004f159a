"""Submitting a system: the checks of a submission, in the order a team meets them, and the
versions that count.

Everything that depends on the moment (the deadline, the review window, the day's quota, the
team's number of systems) is decided under the challenge lock with the server's clock read
after the lock is taken: ten requests racing the deadline or the quota are decided one after
another, each seeing the ones before it committed.
"""

from __future__ import annotations

import codecs
import hashlib
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.core.exceptions import ValidationError
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone

from stimuli.job_kinds import CHECK_SUBMISSION

from ..errors import Conflict, Refused
from ..jobs import create_job, enqueue, fail_if_stale
from ..models import Job, System, Team, Track
from ..services import create_system
from . import notifications, review, selectors
from .models import ChallengeSchedule, Disqualification, Submission, TeamRegistration
from .schedule import lock_challenge


class QuotaExceeded(Refused):
    status = 429


@dataclass
class Metadata:
    """What a team declares with a submission."""

    system: str
    track: str
    licence: str
    external_data: bool = False
    external_data_sources: str = ""
    report_url: str = ""
    description: str = ""
    config: dict = field(default_factory=dict)


def archive_manifest(archive: Path | BinaryIO) -> dict[str, dict]:
    """Every file of a checked archive with its sha256, its size and whether it is UTF-8 text
    (without NUL bytes): what the review window compares, by content, never by name."""
    manifest: dict[str, dict] = {}
    seen: dict[str, str] = {}
    repeated = []
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            # Two members unpacked to one file: the manifest would hash one, the worker run the
            # other.
            key = PurePosixPath(info.filename).as_posix()
            if key in seen:
                repeated.append(f"archive: {info.filename} is stored twice (as {seen[key]})")
                continue
            seen[key] = info.filename
            digest = hashlib.sha256()
            decoder = codecs.getincrementaldecoder("utf-8")()
            text = True
            with zf.open(info) as member:
                for chunk in iter(lambda: member.read(1024**2), b""):
                    digest.update(chunk)
                    if text:  # binary data fails at once; nothing more is decoded
                        try:
                            decoder.decode(chunk)
                            text = b"\0" not in chunk
                        except UnicodeDecodeError:
                            text = False
            if text:
                try:
                    decoder.decode(b"", final=True)
                except UnicodeDecodeError:
                    text = False
            manifest[info.filename] = {
                "sha256": digest.hexdigest(),
                "size": info.file_size,
                "text": text,
            }
    if repeated:
        raise Refused(repeated)
    return manifest


def frozen_manifest(submission: Submission) -> dict[str, dict]:
    """A version's manifest with each file's text flag; versions stored before the flag was
    kept have it read again from their archive."""
    manifest = submission.manifest or {}
    if all("text" in entry for entry in manifest.values()):
        return manifest
    with default_storage.open(submission.archive, "rb") as handle:
        return archive_manifest(handle)


def _check_metadata(
    team: Team, meta: Metadata, schedule: ChallengeSchedule, archive: File, audio: File | None
) -> tuple[Track | None, list[str]]:
    """Every problem of the declared metadata and the files' sizes, at once."""
    problems = []
    track = Track.objects.filter(challenge_id=team.challenge_id, code=meta.track).first()
    if track is None:
        codes = ", ".join(
            Track.objects.filter(challenge_id=team.challenge_id).values_list("code", flat=True)
        )
        problems.append(f"track: no track {meta.track!r} in this challenge (tracks: {codes})")
    elif meta.external_data and not track.external_data_allowed:
        problems.append(
            f"external_data: Track {track.code} forbids external data (its rule: "
            f"{track.description or 'no external data'}). Submit to a track that allows "
            "external data, or declare none."
        )
    if not meta.system.strip() or len(meta.system) > 120:
        problems.append("system: name the system (1 to 120 characters)")
    if not meta.licence.strip():
        problems.append("licence: name the licence of the code and weights (like MIT)")
    if meta.external_data and not meta.external_data_sources.strip():
        problems.append("external_data_sources: name the external data used")
    if meta.report_url:
        try:
            URLValidator(schemes=["http", "https"])(meta.report_url)
        except ValidationError:
            problems.append("report_url: give the technical report's http(s) address")
    if not isinstance(meta.config, dict):
        problems.append("config: the declared settings are a JSON object")
    if archive is None:
        problems.append("archive: attach the generator archive (.zip or .whl)")
    elif archive.size is not None and archive.size > schedule.archive_max_bytes:
        problems.append(
            f"archive: {archive.size:,} bytes; this challenge's limit is "
            f"{schedule.archive_max_bytes:,} bytes"
        )
    if audio is not None and not schedule.audio_allowed:
        problems.append("audio: this challenge takes generator code only, not audio")
    return track, problems


@dataclass
class Received:
    """An upload copied to a local file, hashed, and the storage name it will have."""

    local: Path
    name: str
    sha: str
    stored: str
    tmp: tempfile.TemporaryDirectory


def _receive(upload: File, prefix: str) -> Received:
    """Copy an upload to a local file for the checks. Nothing reaches storage before the
    submission is accepted (under the challenge lock, `_put`), so a refused request never
    removes a file a request racing it is about to use."""
    tmp = tempfile.TemporaryDirectory(prefix="foley-submission-")
    local = Path(tmp.name) / "upload"
    digest = hashlib.sha256()
    with open(local, "wb") as handle:
        for chunk in upload.chunks():
            digest.update(chunk)
            handle.write(chunk)
    name = Path(getattr(upload, "name", "") or "archive.zip").name
    sha = digest.hexdigest()
    suffix = ".whl" if name.lower().endswith(".whl") else ".zip"
    return Received(local, name, sha, f"{prefix}/{sha}{suffix}", tmp)


def _put(received: Received | None, written: list[str]) -> str:
    """Store an accepted upload under its sha256 (once: the same content is one file)."""
    if received is None:
        return ""
    if not default_storage.exists(received.stored):
        with open(received.local, "rb") as handle:
            saved = default_storage.save(received.stored, File(handle))
        written.append(saved)
        if saved != received.stored:  # stored meanwhile by another challenge's submission
            default_storage.delete(saved)
    return received.stored


def submit(
    team: Team, user, meta: Metadata, archive: File, audio: File | None = None
) -> Submission:
    """A new version of one of the team's systems, queued for the worker's check.

    Refused, naming every problem, for bad metadata; refused under the challenge lock when the
    deadline has passed (outside the review window), when a review fix changes anything but
    code, when the team has used the day's submissions or its systems on the track.
    """
    from ..generators.services import GenerationError, check_archive

    schedule = selectors.schedule(team.challenge)
    if not selectors.is_approved(team):
        registration = TeamRegistration.objects.get(team=team)
        if registration.state == TeamRegistration.State.REFUSED:
            raise Conflict(
                f"The organizers refused your team's registration: {registration.reason}"
            )
        raise Conflict("Your team is waiting for the organizers' approval; it cannot submit yet.")
    track, problems = _check_metadata(team, meta, schedule, archive, audio)
    if problems:
        raise Refused(problems)
    received = _receive(archive, "submissions")
    audio_received = _receive(audio, "submissions/audio") if audio is not None else None
    try:
        try:
            module = check_archive(received.local)
        except GenerationError as exc:
            raise Refused(f"archive: {exc}") from None
        manifest = archive_manifest(received.local)
        return _record(
            team, user, meta, track, schedule,
            received=received, audio=audio_received, module=module, manifest=manifest,
        )  # fmt: skip
    finally:
        received.tmp.cleanup()
        if audio_received is not None:
            audio_received.tmp.cleanup()


def _record(team, user, meta, track, schedule, **files) -> Submission:
    with transaction.atomic():
        challenge = lock_challenge(team.challenge_id)
        now = timezone.now()  # after the lock: the order of the lock is the order of time
        # Read again under the lock: dates changed while this request waited for it count.
        schedule = selectors.schedule(challenge)
        phase_problem, in_review = _deadline_check(team, schedule, now)
        if phase_problem:
            raise Conflict(phase_problem)
        system = System.objects.filter(challenge=challenge, team=team, name=meta.system).first()
        if system is not None and system.track_id != track.pk:
            raise Refused(
                f"track: system {system.name!r} is on Track {system.track.code}; a system "
                "stays on its track (submit a new system for another track)"
            )
        # Under the lock: a disqualification decided meanwhile refuses this request too.
        problems = disqualified_problems(team, files["received"].sha, files["manifest"])
        review_base = None
        if in_review:
            review_base = selectors.frozen_version(system) if system is not None else None
            if review_base is None:
                problems.append(
                    "The submission deadline has passed: in the review window only a fix of a "
                    "system submitted before the deadline is accepted."
                )
                raise Conflict(problems)
            audio = files["audio"].sha if files["audio"] is not None else ""
            problems += review_fix_problems(
                review_base, files["manifest"], meta.config, schedule, audio
            )
        if problems:
            raise Conflict(problems)
        day = timezone.localdate(now, timezone=_zone(schedule))
        used = Submission.objects.filter(team=team, day=day, counts_in_quota=True).count()
        if used >= schedule.submissions_per_day:
            raise QuotaExceeded(
                f"Your team has made {used} submissions today ({day.isoformat()}, "
                f"{schedule.time_zone}); the limit is {schedule.submissions_per_day} a day. "
                "Submissions that failed because of the platform do not count."
            )
        if system is None:
            systems = System.objects.filter(team=team, track=track).count()
            if systems >= schedule.systems_per_track:
                raise QuotaExceeded(
                    f"Your team has {systems} systems on Track {track.code}; the limit is "
                    f"{schedule.systems_per_track}. Submit a new version of one of them."
                )
            if System.objects.filter(challenge=challenge, name=meta.system).exists():
                raise Refused(f"system: the name {meta.system!r} is taken; choose another")
            system = create_system(
                team=team, track=track, name=meta.system, kind=System.Kind.GENERATOR
            )
        received = files["received"]
        written: list[str] = []
        try:
            submission = _create(challenge, team, track, system, user, day, review_base, meta,
                                 received, files, written)  # fmt: skip
        except BaseException:
            for name in written:  # the row is not there: nothing names what this call stored
                default_storage.delete(name)
            raise
    return submission


def _create(challenge, team, track, system, user, day, review_base, meta, received, files, written):
    """Store the accepted files and the version's row, and queue its check (under the lock)."""
    archive_name = _put(received, written)
    audio_name = _put(files["audio"], written)
    submission = Submission.objects.create(
        challenge=challenge,
        team=team,
        track=track,
        system=system,
        version=selectors.next_version(system.pk),
        submitted_by=user if user is not None and user.is_authenticated else None,
        day=day,
        in_review=review_base is not None,
        review_base=review_base,
        archive=archive_name,
        archive_name=received.name,
        archive_sha256=received.sha,
        archive_bytes=received.local.stat().st_size,
        audio_archive=audio_name,
        module=files["module"],
        config=meta.config,
        manifest=files["manifest"],
        external_data=meta.external_data,
        external_data_sources=meta.external_data_sources,
        report_url=meta.report_url,
        description=meta.description,
        licence=meta.licence,
    )
    start_check(submission, user)
    return submission


def _zone(schedule: ChallengeSchedule):
    from zoneinfo import ZoneInfo

    return ZoneInfo(schedule.time_zone)


def _deadline_check(team: Team, schedule: ChallengeSchedule, now) -> tuple[str, bool]:
    """Why the moment forbids submitting ("" when it allows), and whether it is the review
    window (only code fixes)."""
    opens = schedule.development_opens
    if opens is not None and now < opens:
        return (
            f"Submissions open at {selectors.local(schedule, opens):%Y-%m-%d %H:%M %Z}.",
            False,
        )
    deadline = selectors.team_deadline(team, schedule)
    if deadline is None or now < deadline:
        return "", False
    ends = selectors.review_ends(deadline, schedule)
    when = f"{selectors.local(schedule, deadline):%Y-%m-%d %H:%M %Z}"
    if schedule.review_days and now < ends:
        return "", True
    return (
        f"The submission deadline passed at {when} (server time); the review window closed at "
        f"{selectors.local(schedule, ends):%Y-%m-%d %H:%M %Z}. No more submissions are accepted.",
        False,
    )


def review_fix_problems(
    frozen: Submission,
    manifest: dict,
    config: dict,
    schedule: ChallengeSchedule,
    audio_sha256: str = "",
) -> list[str]:
    """What a review-window fix may not change (`review.fix_problems`): every file other than
    code, and every declared setting, that it adds, removes, renames or changes; and the
    generated audio, which is data too."""
    problems = review.fix_problems(
        frozen_manifest(frozen), manifest, review.CodeRule.of(schedule), frozen.config, config
    )
    # Stored under its sha256 (`_put`): the name is the content's.
    frozen_audio = PurePosixPath(frozen.audio_archive).stem if frozen.audio_archive else ""
    if audio_sha256 != frozen_audio:
        problems.append(
            review.PREFIX + "the generated audio differs from the frozen version's; attach the "
            "same audio zip (or none, where it had none)"
        )
    return problems


def disqualified_problems(team: Team, archive_sha256: str, manifest: dict) -> list[str]:
    """Why the team's standing disqualifications refuse this archive, one problem each: the
    disqualified archive itself, every file of it repacked, or any of its model data."""
    problems = []
    held: dict[str, str] = {}
    for name in sorted(manifest):
        held.setdefault(manifest[name]["sha256"], name)
    for found in selectors.standing_disqualifications(team).order_by("pk"):
        label = (
            f"{found.system.name} v{found.submission.version} was disqualified ({found.reason}); "
            "it stays refused until the organizers lift the disqualification"
        )
        if found.archive_sha256 == archive_sha256:
            problems.append(f"archive: this is the archive of {label}")
        elif found.files and set(found.files) <= held.keys():
            problems.append(f"archive: it holds every file of {label}")
        else:
            problems.extend(
                f"archive: {held[sha]} is {name} of {label}"
                for sha, name in sorted(found.model_data.items(), key=lambda item: item[1])
                if sha in held
            )
    return problems


def start_check(submission: Submission, user=None) -> Job:
    """Queue the worker's check of a submission (after the transaction commits)."""
    job = create_job(
        CHECK_SUBMISSION,
        challenge_id=submission.challenge_id,
        params={"submission_id": submission.pk},
        by=user,
    )
    Submission.objects.filter(pk=submission.pk).update(job=job, state=Submission.State.QUEUED)
    submission.job = job
    # After the commit: in-process tasks would otherwise run the check under the challenge lock.
    transaction.on_commit(lambda: enqueue(job))
    return job


def choose_version(submission: Submission, user) -> Submission:
    """The team picks the version of a system that counts (before its review window ends)."""
    schedule = selectors.schedule(submission.challenge)
    with transaction.atomic():
        lock_challenge(submission.challenge_id)
        problem, _ = _deadline_check(submission.team, schedule, timezone.now())
        if problem:
            raise Conflict(problem)
        current = Submission.objects.select_for_update(no_key=True).get(pk=submission.pk)
        if current.state != Submission.State.VALID or current.disqualified_at:
            raise Conflict("Only a valid version that is not disqualified can count.")
        Submission.objects.filter(system_id=current.system_id, chosen=True).update(chosen=False)
        current.chosen = True
        current.save(update_fields=["chosen"])
        sync_generator(current.system)
    return current


def rerun(submission: Submission, user) -> Job:
    """An organizer checks a version again (say, after a worker was fixed)."""
    with transaction.atomic():
        current = Submission.objects.select_for_update(no_key=True).get(pk=submission.pk)
        if current.state in (Submission.State.QUEUED, Submission.State.CHECKING):
            raise Conflict("This version's check is still under way.")
        current.clips.all().delete()
        Submission.objects.filter(pk=current.pk).update(report={}, feedback={})
        return start_check(current, user)


def disqualify(submission: Submission, *, reason: str, by) -> Disqualification:
    """Take a version out of the challenge, with a reason the team sees; until an organizer
    lifts it, the team's submissions of the same content are refused (`Disqualification`)."""
    if not reason.strip():
        raise Refused("reason: say why; the team sees the reason")
    with transaction.atomic():
        challenge = lock_challenge(submission.challenge_id)
        current = Submission.objects.select_for_update(no_key=True).get(pk=submission.pk)
        if current.disqualified_at is not None:
            raise Conflict(f"{current.system.name} v{current.version} is disqualified already.")
        manifest = frozen_manifest(current)
        found = Disqualification.objects.create(
            challenge=challenge,
            team=current.team,
            system=current.system,
            submission=current,
            reason=reason.strip(),
            archive_sha256=current.archive_sha256,
            files=sorted({e["sha256"] for e in manifest.values() if e["size"]}),
            model_data=_refused_model_data(current, manifest),
            disqualified_by=by if by is not None and by.is_authenticated else None,
        )
        Submission.objects.filter(pk=current.pk).update(
            disqualified_reason=found.reason, disqualified_at=found.disqualified_at, chosen=False
        )
        sync_generator(current.system)
    submission.refresh_from_db()
    notifications.disqualified(submission)
    return found


def _refused_model_data(submission: Submission, manifest: dict) -> dict[str, str]:
    """The version's model data refused on its own: every file that is not code under the
    challenge's rule, except empty ones and those a version of the team in good standing holds
    (its own earlier weights were not what was disqualified)."""
    rule = review.CodeRule.of(selectors.schedule(submission.challenge))
    kept: set[str] = set()
    others = Submission.objects.filter(team_id=submission.team_id, disqualified_at__isnull=True)
    for manifest_ in others.exclude(pk=submission.pk).values_list("manifest", flat=True):
        kept.update(e["sha256"] for e in (manifest_ or {}).values())
    refused: dict[str, str] = {}
    for name in sorted(manifest):
        entry = manifest[name]
        if entry["size"] and entry["sha256"] not in kept and rule.why_not_code(name, entry):
            refused.setdefault(entry["sha256"], name)
    return refused


def lift_disqualification(found: Disqualification, *, reason: str, by) -> Disqualification:
    """An organizer lifts a disqualification, with a reason that is recorded: the version may
    count again and its content is no longer refused."""
    if not reason.strip():
        raise Refused("reason: say why the disqualification is lifted; the reason is recorded")
    with transaction.atomic():
        lock_challenge(found.challenge_id)
        current = Disqualification.objects.select_for_update(no_key=True).get(pk=found.pk)
        if current.lifted_at is not None:
            raise Conflict("This disqualification was lifted already.")
        current.lifted_reason = reason.strip()
        current.lifted_by = by if by is not None and by.is_authenticated else None
        current.lifted_at = timezone.now()
        current.save(update_fields=["lifted_reason", "lifted_by", "lifted_at"])
        Submission.objects.filter(pk=current.submission_id).update(
            disqualified_reason="", disqualified_at=None
        )
        sync_generator(current.system)
    notifications.lifted(current)
    return current


def sync_generator(system: System) -> None:
    """Make the system's generator code its counting version, so the organizers' generation at
    evaluation runs what counts. The generator gets its own copy of the archive
    (generators/<sha256>), which the generators' stage may delete when code is replaced: a
    version's own file stays. When no version counts, the generator is marked invalid, so that
    generation refuses to run a disqualified version's code."""
    from ..models import Generator

    counting = selectors.counting_version(system)
    if counting is None:
        # Every valid version disqualified: nothing of this system may run at evaluation.
        if Submission.objects.filter(system=system).exists():
            Generator.objects.filter(system=system).update(
                state=Generator.State.INVALID,
                report={"ok": False, "summary": "No version of this system counts."},
            )
        return
    suffix = ".whl" if counting.archive.endswith(".whl") else ".zip"
    copy = f"generators/{counting.archive_sha256}{suffix}"
    if not default_storage.exists(copy):
        with default_storage.open(counting.archive, "rb") as handle:
            default_storage.save(copy, File(handle))
    Generator.objects.update_or_create(
        system=system,
        defaults={
            "module": counting.module,
            "archive": copy,
            "archive_name": counting.archive_name,
            "archive_sha256": counting.archive_sha256,
            "config": counting.config,
            "trusted": False,
            "state": Generator.State.VALID,
            "report": counting.report,
            "validated_at": timezone.now(),
        },
    )
    if system.kind != System.Kind.GENERATOR:
        System.objects.filter(pk=system.pk).update(kind=System.Kind.GENERATOR)


LOST = (
    "The platform could not check this version: {why}. It does not count against your quota; "
    "submit it again."
)


def settle(submission: Submission) -> Submission:
    """A version whose check can no longer finish (its worker lost for good, or the check
    itself broke) is the platform's failure: marked so, and free of the quota."""
    if submission.is_finished or submission.job_id is None:
        return submission
    job = fail_if_stale(submission.job)
    if job.state != Job.State.FAILED:
        return submission
    why = job.error or "the worker was lost"
    Submission.objects.filter(
        pk=submission.pk, state__in=[Submission.State.QUEUED, Submission.State.CHECKING]
    ).update(
        state=Submission.State.PLATFORM_ERROR,
        counts_in_quota=False,
        report={"ok": False, "summary": LOST.format(why=why)},
    )
    submission.refresh_from_db()
    return submission
