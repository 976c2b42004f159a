"""The worker's check of a submission, the feedback a team reads within minutes.

The check is the organizer path's, not a copy of it: the archive is unpacked by
`generators.services.prepared_source`, validated by `validate.validate_source` with the platform's
sandbox limits (`sandbox_limits`) and never trusted, and example clips come from the
same `job_sandbox` a generation job uses. On top of that: seconds per clip and the projected
time for the evaluation set against the challenge's compute budget, five example clips per
category, and FAD against the development set per category beside the baseline's.

A failure of the platform (the sandbox unavailable on this worker, a full disk, the worker
lost) is recorded as such: the submission does not count against the team's daily quota.
"""

from __future__ import annotations

import errno
import time
from contextlib import ExitStack

import numpy as np
from django.db import transaction

from sandbox.errors import SandboxError
from sandbox.process import cuda_visible
from stimuli.generators.limits import sandbox_limits

from .. import selectors as stimuli_selectors
from .. import storage
from ..audio import encode_wav, inspect_audio
from ..generators.contract import check_output, derive_seed, to_float
from ..generators.services import (
    BASELINE_MODULE,
    Heartbeat,
    job_sandbox,
    prepared_source,
    start_checked,
)
from ..generators.validate import validate_source
from ..jobs import Failed, JobProgress, ensure_still_mine, run_job
from ..models import Category, Clip, Generator, Job
from . import notifications
from .models import Submission, SubmissionClip

# Problems that are the platform's, not the team's: the submission costs no quota.
PLATFORM_CODES = {"isolation_unavailable"}
EXAMPLE_SEED = 0


class PlatformFailure(Exception):
    """The platform could not check the submission; the message says what failed."""


def _generator_of(submission: Submission, *, trusted: bool = False) -> Generator:
    # Unsaved: what prepared_source and the sandbox read of a generator, for this version.
    return Generator(
        system=submission.system,
        module=submission.module,
        archive=submission.archive,
        archive_name=submission.archive_name,
        archive_sha256=submission.archive_sha256,
        config=submission.config,
        trusted=trusted,
    )


def _set(submission: Submission, **fields) -> None:
    Submission.objects.filter(pk=submission.pk).update(**fields)
    for name, value in fields.items():
        setattr(submission, name, value)


def run_check(job_id: int) -> Job:
    """The body of the `check_submission` task."""

    def work(job: Job, progress: JobProgress) -> dict:
        submission = Submission.objects.select_related("system", "challenge", "team").get(
            pk=job.params["submission_id"]
        )
        _set(submission, state=Submission.State.CHECKING)
        try:
            outcome = check(submission, job, progress)
        except PlatformFailure as exc:
            return _platform_failed(submission, job, str(exc))
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                return _platform_failed(submission, job, f"the worker's disk is full ({exc})")
            raise
        return outcome

    return run_job(job_id, work)


def _platform_failed(submission: Submission, job: Job, why: str) -> Failed:
    with transaction.atomic():
        ensure_still_mine(job)
        _set(
            submission,
            state=Submission.State.PLATFORM_ERROR,
            counts_in_quota=False,
            report={"ok": False, "summary": f"The platform could not check this version: {why}"},
        )
        transaction.on_commit(lambda: notifications.check_finished(submission))
    JobProgress(job).log(f"platform failure: {why}")
    return Failed(f"[platform] {why}", {"platform_error": why})


def check(submission: Submission, job: Job, progress: JobProgress) -> dict:
    challenge = submission.challenge
    categories = list(Category.objects.filter(challenge=challenge))
    schedule = _schedule(challenge)
    spec = stimuli_selectors.clip_spec(challenge)
    generator = _generator_of(submission)
    steps = 2 + len(categories)
    progress(0, steps, f"validating {submission.archive_name} in the sandbox")
    try:
        with prepared_source(generator) as source:
            report = validate_source(
                source,
                spec,
                limits=sandbox_limits(),
                categories=[c.slug for c in categories],
                target=submission.archive_name,
                on_wait=Heartbeat(job),
                trusted=False,
            ).to_dict()
    except SandboxError as exc:
        report = {"ok": False, "summary": f"Invalid generator: {exc.message}", "problems": []}
        report["problems"].append({"code": exc.code, "message": exc.message, "detail": ""})
    platform = [p for p in report.get("problems", []) if p["code"] in PLATFORM_CODES]
    if platform:
        raise PlatformFailure(platform[0]["message"])
    for problem in report.get("problems", []):
        progress.log(f"[{problem['code']}] {problem['message']}")
    # What comes next, while it runs: the examples take most of the check.
    progress(1, steps, f"{report['summary'].rstrip('.')}; making the example clips" if report["ok"] else
             report["summary"], force=True)  # fmt: skip
    feedback: dict = {}
    if report["ok"]:
        try:
            feedback = _examples(submission, generator, categories, schedule, job, progress)
        except SandboxError as exc:
            # The code passed validation and then failed on the longer run: the team's failure.
            if exc.code in PLATFORM_CODES:
                raise PlatformFailure(exc.message) from None
            feedback = {"error": f"[{exc.code}] {exc.message}"}
        if feedback.get("error"):
            report["ok"] = False
            report.setdefault("problems", []).append(
                {"code": "examples", "message": f"making the example clips: {feedback['error']}",
                 "detail": ""}
            )  # fmt: skip
            report["summary"] = f"Invalid generator: making the example clips: {feedback['error']}"
        elif feedback.get("over_budget"):
            report["ok"] = False
            report.setdefault("problems", []).append(
                {"code": "over_budget", "message": feedback["over_budget"], "detail": ""}
            )
            report["summary"] = f"Invalid generator: {feedback['over_budget']}"
        else:
            progress(1 + len(categories), steps, "FAD against the development set")
            feedback["fad_dev"] = fad_dev(submission, categories, job)
    with transaction.atomic():
        ensure_still_mine(job)
        _set(
            submission,
            state=Submission.State.VALID if report["ok"] else Submission.State.INVALID,
            report=report,
            feedback=feedback,
        )
        if report["ok"]:
            from .services import sync_generator

            sync_generator(submission.system)
        transaction.on_commit(lambda: notifications.check_finished(submission))
    progress(steps, steps, report["summary"])
    result = {"ok": report["ok"], "summary": report["summary"]}
    return result if report["ok"] else Failed(report["summary"], result)


def _schedule(challenge):
    from .selectors import schedule

    return schedule(challenge)


def _examples(submission, generator, categories, schedule, job, progress) -> dict:
    """Example clips per category from the sandbox, timed; the projection for the evaluation
    set against the compute budget."""
    challenge = submission.challenge
    spec = stimuli_selectors.clip_spec(challenge)
    audio_spec = stimuli_selectors.clip_spec(challenge)
    n = schedule.examples_per_category
    use_gpu = cuda_visible()
    seconds = 0.0
    clips = 0
    with ExitStack() as stack:
        source = stack.enter_context(prepared_source(generator))
        sandbox = job_sandbox(generator, source, spec, job, use_gpu=use_gpu)
        stack.callback(sandbox.close)
        load_started = time.perf_counter()
        start_checked(sandbox, spec, progress.log)
        load_s = time.perf_counter() - load_started
        for position, category in enumerate(categories):
            started = time.perf_counter()
            array = sandbox.generate(category.slug, n, derive_seed(EXAMPLE_SEED, category.slug, 0))
            seconds += time.perf_counter() - started
            if problems := check_output(array, n, spec):
                return {"over_budget": "", "error": "; ".join(m for _, m in problems)}
            _store_examples(submission, category, array, audio_spec, job)
            clips += n
            progress(2 + position, 2 + len(categories), f"{category.slug}: {n} example clips")
    per_clip = seconds / clips if clips else 0.0
    total = schedule.evaluation_clips_per_category * len(categories)
    projected = load_s + per_clip * total
    feedback = {
        "device": "cuda" if use_gpu else "cpu",
        "load_s": round(load_s, 3),
        "seconds_per_clip": round(per_clip, 4),
        "evaluation_clips": total,
        "projected_s": round(projected, 1),
        "budget_s": schedule.compute_budget_s,
    }
    if projected > schedule.compute_budget_s:
        feedback["over_budget"] = (
            f"projected time for the evaluation set's {total:,} clips is {projected:,.0f} s "
            f"({per_clip:.3f} s per clip), over the challenge's compute budget of "
            f"{schedule.compute_budget_s:,.0f} s on the reference worker"
        )
    return feedback


def _store_examples(submission, category, array, audio_spec, job) -> None:
    samples = to_float(array)
    checks = []
    for index, clip in enumerate(samples):
        frames = clip.T if clip.ndim == 2 else clip[:, None]
        check_ = inspect_audio(
            encode_wav(frames, audio_spec.sample_rate, audio_spec.bit_depth), audio_spec
        )
        if not check_.ok:
            raise SandboxError("clip_spec", "; ".join(check_.errors))
        checks.append((index, check_))
    with transaction.atomic():
        ensure_still_mine(job)
        for index, check_ in checks:
            audio, _ = storage.stored_audio(check_)
            SubmissionClip.objects.update_or_create(
                submission=submission, category=category, index=index, defaults={"audio": audio}
            )


def fad_dev(submission: Submission, categories, job: Job) -> dict:
    """FAD of the examples against the development set per category, beside the platform's
    baseline generator's examples (same seeds, same model); {"error": why} when it cannot."""
    from ..models import ObjectiveSettings
    from ..objective.embeddings.base import load_embedding_model
    from ..objective.embeddings.store import embed_audio, load_many
    from ..objective.fad import fad

    challenge = submission.challenge
    settings_ = ObjectiveSettings.objects.filter(challenge=challenge).first() or ObjectiveSettings()
    try:
        model = load_embedding_model(
            settings_.fad_model, settings_.fad_model_options, settings_.fad_weights
        )
    except (ValueError, FileNotFoundError) as exc:
        return {"error": f"FAD-dev is not available: {exc}"}
    baseline = _baseline_examples(submission, categories, job)
    values: dict = {"model": model.model_id, "categories": {}}
    for category in categories:
        development = [
            c.audio
            for c in Clip.objects.filter(
                challenge=challenge, category=category, role=Clip.Role.DEVELOPMENT
            ).select_related("audio")
        ]
        mine = [
            c.audio for c in SubmissionClip.objects.filter(submission=submission, category=category)
        ]
        if not development:
            values["categories"][category.slug] = {"error": "no development clips"}
            continue
        entry = {}
        for label, audios in (("system", mine), ("baseline", baseline.get(category.slug, []))):
            if not audios:
                continue
            embed_audio(model, [*development, *audios])
            loaded = load_many(model.model_id, [a.pk for a in [*development, *audios]])
            ref = [loaded[a.pk] for a in development]
            own = [loaded[a.pk] for a in audios]
            entry[label] = round(float(fad(own, ref)), 4)
        values["categories"][category.slug] = entry
    return values


def _baseline_examples(submission, categories, job) -> dict[str, list]:
    """The platform's baseline generator's example clips (its own code, trusted), generated
    with the same seeds, stored like any audio and not attached to any system."""
    challenge = submission.challenge
    spec = stimuli_selectors.clip_spec(challenge)
    audio_spec = stimuli_selectors.clip_spec(challenge)
    n = _schedule(challenge).examples_per_category
    baseline = Generator(system=submission.system, module=BASELINE_MODULE, trusted=True)
    out: dict[str, list] = {}
    with ExitStack() as stack:
        source = stack.enter_context(prepared_source(baseline))
        sandbox = job_sandbox(baseline, source, spec, job, use_gpu=False)
        stack.callback(sandbox.close)
        start_checked(sandbox, spec, lambda line: None)
        for category in categories:
            array = to_float(
                sandbox.generate(category.slug, n, derive_seed(EXAMPLE_SEED, category.slug, 0))
            )
            audios = []
            for clip in array:
                frames = clip.T if clip.ndim == 2 else clip[:, None]
                data = encode_wav(np.asarray(frames), audio_spec.sample_rate, audio_spec.bit_depth)
                check_ = inspect_audio(data, audio_spec)
                if check_.ok:
                    audios.append(storage.stored_audio(check_)[0])
            out[category.slug] = audios
    return out
