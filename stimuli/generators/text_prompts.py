"""What is heard in the text-prompt protocol: the real reference set with its descriptions, and
clips that text-conditioned systems generate from prompts on GPU workers.

A reference set is uploaded like the development set (a zip or folder with one folder per
category) together with a CSV of `file, text`; every file needs a description and every row a
file, or nothing is stored.

Generation requests (`TextGeneration`, one prompt, n clips) are stored pending and served by one
job per system on the gpu queue: the job loads the system's generator once, in the sandbox (a
trusted generator may run as a plain process), and serves every pending request of the system,
those of all its judges, including requests that arrive while it runs. A request the generator
fails on is marked failed with the reason; the others go on.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path, PurePosixPath

from django.db import transaction
from django.utils import timezone

from sandbox.errors import SandboxError
from sandbox.process import Sandbox, cuda_visible
from stimuli.job_kinds import GENERATE_TEXT

from .. import selectors, storage
from ..archives import ArchiveError, Source, UploadLimits, iter_members
from ..audio import AudioCheck, encode_wav, inspect_audio
from ..errors import Refused
from ..jobs import Failed, JobLost, JobProgress, create_job, enqueue, ensure_still_mine, run_job
from ..models import (
    Challenge,
    DescribedClip,
    Generator,
    Job,
    System,
    TextClip,
    TextGeneration,
)
from ..selectors import category_lookup, clip_spec, normalise_folder
from .contract import check_output, to_float
from .services import job_sandbox, prepared_source, start_checked

MAX_PROMPT_CHARS = 300
# Prompts in one generator call: the call's time limit (FOLEY_SANDBOX_CALL_TIMEOUT_S) covers all.
MAX_BATCH_PROMPTS = 16


class TextPromptError(Refused):
    """A request of the text-prompt protocol that cannot be done; nothing was stored."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message, status=status)


# --- The reference set ---------------------------------------------------------------------------


def _csv_rows(data: bytes | str) -> list[tuple[int, str, str]]:
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    reader = csv.reader(io.StringIO(text))
    rows: list[tuple[int, str, str]] = []
    for line, row in enumerate(reader, 1):
        if not row or not any(cell.strip() for cell in row):
            continue
        if line == 1 and [c.strip().lower() for c in row[:2]] == ["file", "text"]:
            continue  # the header
        if len(row) != 2:
            raise TextPromptError(f"descriptions line {line}: expected two columns, file and text")
        rows.append((line, row[0].strip(), row[1].strip()))
    return rows


def _key(path: str) -> str:
    """A file as the CSV may name it: `category/file.wav`, letter case and wrapper folder aside."""
    parts = PurePosixPath(path.strip().replace("\\", "/")).parts
    return "/".join(parts[-2:]).casefold()


def import_described_clips(
    challenge: Challenge,
    path: Path | str,
    descriptions: bytes | str,
    *,
    limits: UploadLimits | None = None,
) -> int:
    """Check a reference set and its CSV of descriptions and store them all, or store nothing
    (TextPromptError lists every problem). Returns the number of clips stored."""
    rows = _csv_rows(descriptions)
    problems: list[str] = []
    texts: dict[str, tuple[int, str]] = {}
    for line, name, text in rows:
        if not text:
            problems.append(f"descriptions line {line}: {name} has no text")
        elif len(" ".join(text.split())) > MAX_PROMPT_CHARS:
            # Descriptions are the prompts of the generated clips judges hear.
            problems.append(
                f"descriptions line {line}: {name} has more than {MAX_PROMPT_CHARS} characters"
            )
        elif _key(name) in texts:
            problems.append(f"descriptions line {line}: {name} is described twice")
        else:
            texts[_key(name)] = (line, text)
    if not rows:
        problems.append("the descriptions CSV names no file")
    spec = selectors.clip_spec(challenge)
    staged: list[tuple[str, AudioCheck, str]] = []
    with Source(Path(path), limits or UploadLimits.from_settings()) as source:
        try:
            listing = source.list()
        except ArchiveError as exc:
            raise TextPromptError("; ".join(exc.problems)) from None
        problems += selectors.listing_problems(challenge, listing)
        lookup = category_lookup(challenge)
        seen = set()
        for member, data, read_error in iter_members(source, listing):
            if normalise_folder(member.folder) not in lookup:
                continue
            key = _key(member.path)
            seen.add(key)
            if key not in texts:
                problems.append(f"{member.path}: no description in the CSV")
                continue
            check = inspect_audio(data, spec) if data is not None else None
            if read_error or check is None or not check.ok:
                errors = check.errors if check is not None else [read_error or "unreadable"]
                problems.append(f"{member.path}: " + "; ".join(errors))
                continue
            staged.append((member.path, check, texts[key][1]))
    for key, (line, _) in texts.items():
        if key not in seen:
            problems.append(f"descriptions line {line}: {key} is not in the upload")
    if problems:
        raise TextPromptError("Nothing was stored: " + "; ".join(problems))
    written: list[str] = []
    try:
        with transaction.atomic():
            Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
            for name, check, text in staged:
                audio, created = storage.stored_audio(check)
                if created:
                    written.append(audio.sha256)
                DescribedClip.objects.update_or_create(
                    challenge=challenge, name=name, defaults={"audio": audio, "text": text}
                )
    except BaseException:
        for sha in written:
            storage.delete_audio(sha)
        raise
    return len(staged)


# --- Text-conditioned systems --------------------------------------------------------------------


def text_capable(system: System) -> str | None:
    """Why `system` cannot generate from text, or None when it can."""
    generator = Generator.objects.filter(system=system).first()
    if generator is None:
        return f"system '{system.name}' has no generator code, so it cannot generate from text"
    if generator.state != Generator.State.VALID:
        return f"the generator of '{system.name}' is not validated yet (or failed validation)"
    if not generator.report.get("has_text"):
        return (
            f"the generator of '{system.name}' has no generate_from_text function; only "
            "text-conditioned systems can take part in a text-prompt study"
        )
    return None


def check_prompt(prompt: str) -> str:
    prompt = " ".join(str(prompt).split())
    if not prompt:
        raise TextPromptError("Please type a prompt.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise TextPromptError(f"A prompt has at most {MAX_PROMPT_CHARS} characters.")
    return prompt


def new_generation(system: System, prompt: str, n: int, seed: int) -> TextGeneration:
    """A pending request (inside the caller's transaction); `dispatch` sends it to a worker."""
    return TextGeneration.objects.create(
        system=system, prompt=check_prompt(prompt), n=n, seed=seed % 2**62
    )


def dispatch(system_ids: Iterable[int]) -> list[Job]:
    """Make sure a queued job serves the pending requests of each system.

    A job already queued for the system takes new requests along (that is how the prompts of
    concurrent judges share one model load); a running job serves what arrives while it runs,
    and a new queued job is made for whatever it may miss.
    """

    jobs = []
    for system_id in sorted(set(system_ids)):
        with transaction.atomic():
            Generator.objects.select_for_update(no_key=True).get(system_id=system_id)
            job = Job.objects.filter(
                kind=GENERATE_TEXT, params__system_id=system_id, state=Job.State.QUEUED
            ).first()
            if job is None:
                if not TextGeneration.objects.filter(
                    system_id=system_id, state=TextGeneration.State.PENDING
                ).exists():
                    continue
                system = System.objects.get(pk=system_id)
                job = create_job(
                    GENERATE_TEXT,
                    challenge_id=system.challenge_id,
                    params={"system_id": system_id},
                    message="queued",
                )
                enqueue(job)
        jobs.append(job)
    return jobs


def run_text_job(job_id: int) -> Job:
    """The body of the `generate_from_text` task."""

    def work(job: Job, progress: JobProgress) -> dict:
        return serve_pending(job, progress, progress.log)

    return run_job(job_id, work)


def _fail(generation: TextGeneration, job: Job | None, message: str) -> None:
    TextGeneration.objects.filter(pk=generation.pk, state=TextGeneration.State.PENDING).update(
        state=TextGeneration.State.FAILED,
        error=message[:2000],
        job=job,
        finished_at=timezone.now(),
    )


def serve_pending(job: Job, progress, log) -> dict:
    """Generate every pending request of the job's system: one generator load for all, and the
    prompts of all judges asking for the same number of clips in one call (up to
    `MAX_BATCH_PROMPTS`). A call that fails is tried again prompt by prompt, so that only the
    prompt at fault is marked failed."""
    system = System.objects.select_related("challenge").get(pk=job.params["system_id"])
    generator = Generator.objects.get(system=system)
    spec = clip_spec(system.challenge)
    audio_spec = selectors.clip_spec(system.challenge)
    counts = {"served": 0, "failed": 0, "calls": 0}
    started = time.perf_counter()

    def pending() -> list[TextGeneration]:
        return list(
            TextGeneration.objects.filter(system=system, state=TextGeneration.State.PENDING)
            .order_by("pk")
            .only("pk", "prompt", "n", "seed")
        )

    refusal = text_capable(system)
    if refusal:
        for generation in pending():
            _fail(generation, job, refusal)
        return Failed(refusal, {"served": 0})
    use_gpu = cuda_visible()
    with ExitStack() as stack:
        try:
            source = stack.enter_context(prepared_source(generator))
        except SandboxError as exc:
            message = f"[{exc.code}] {exc.message}"
            for generation in pending():
                _fail(generation, job, message)
            return Failed(message, {"served": 0})
        sandbox: Sandbox | None = None

        def serve(group: list[TextGeneration]) -> None:
            nonlocal sandbox
            n = group[0].n
            try:
                if sandbox is None:
                    fresh = job_sandbox(generator, source, spec, job, use_gpu=use_gpu)
                    try:
                        start_checked(fresh, spec, log)
                    except BaseException:  # not loaded, or loaded at another rate: not kept
                        log(fresh.log_tail(1000))
                        fresh.close()
                        raise
                    sandbox = fresh
                counts["calls"] += 1
                array = sandbox.generate_from_texts(
                    [g.prompt for g in group], n, [g.seed for g in group]
                )
                problems = check_output(array, n * len(group), spec)
                if problems:
                    raise TextPromptError("; ".join(message for _, message in problems))
                for k, generation in enumerate(group):
                    _store_generation(job, generation, array[k * n : (k + 1) * n], audio_spec)
                    counts["served"] += 1
            except JobLost:
                raise
            except Exception as exc:
                message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                if isinstance(exc, SandboxError):
                    message = f"[{exc.code}] {exc.message}"
                if sandbox is not None and not _alive(sandbox):
                    # Killed at a limit, or crashed: the next call gets a new one.
                    log(sandbox.log_tail(1000))
                    sandbox.close()
                    sandbox = None
                if len(group) > 1:
                    log(f"a call of {len(group)} prompts failed ({message}); one by one now")
                    left = TextGeneration.objects.filter(
                        pk__in=[g.pk for g in group], state=TextGeneration.State.PENDING
                    )
                    for generation in [g for g in group if g.pk in {x.pk for x in left}]:
                        serve([generation])
                    return
                # This prompt's failure, told to its judge and the organizers; the others go on.
                log(f"prompt {group[0].pk} failed: {message}")
                _fail(group[0], job, message)
                counts["failed"] += 1

        try:
            while batch := pending():
                done = counts["served"] + counts["failed"]
                progress(done, done + len(batch), "generating")
                by_n: dict[int, list[TextGeneration]] = {}
                for generation in batch:
                    by_n.setdefault(generation.n, []).append(generation)
                for group in by_n.values():
                    for first in range(0, len(group), MAX_BATCH_PROMPTS):
                        serve(group[first : first + MAX_BATCH_PROMPTS])
        finally:
            if sandbox is not None:
                sandbox.close()
    seconds = time.perf_counter() - started
    log(
        f"served {counts['served']} prompts ({counts['failed']} failed) in {counts['calls']} "
        f"calls, {seconds:.1f} s"
    )
    done = counts["served"] + counts["failed"]
    progress(done, done, f"{counts['served']} generated, {counts['failed']} failed")
    return {**counts, "seconds": round(seconds, 3)}


def _alive(sandbox: Sandbox) -> bool:
    return sandbox.proc is not None and sandbox.proc.poll() is None


def _store_generation(job: Job, generation: TextGeneration, array, audio_spec) -> None:
    """Check and store one request's clips and mark it done, all or none."""
    samples = to_float(array)
    checks = []
    for index in range(generation.n):
        clip = samples[index]
        frames = clip.T if clip.ndim == 2 else clip[:, None]
        check = inspect_audio(
            encode_wav(frames, audio_spec.sample_rate, audio_spec.bit_depth), audio_spec
        )
        if not check.ok:
            raise TextPromptError(f"clip {index + 1}: " + "; ".join(check.errors))
        checks.append(check)
    written: list[str] = []
    try:
        with transaction.atomic():
            ensure_still_mine(job)
            locked = TextGeneration.objects.select_for_update(no_key=True).get(pk=generation.pk)
            if locked.state != TextGeneration.State.PENDING:
                return  # served by another worker meanwhile
            for index, check in enumerate(checks):
                audio, created = storage.stored_audio(check)
                if created:
                    written.append(audio.sha256)
                TextClip.objects.create(generation=locked, index=index, audio=audio)
            TextGeneration.objects.filter(pk=generation.pk).update(
                state=TextGeneration.State.DONE, job=job, finished_at=timezone.now()
            )
    except BaseException:
        for sha in written:
            storage.delete_audio(sha)
        raise


def generate_now(system_ids: Iterable[int]) -> None:
    """Serve pending requests in this process, without a broker (the demo and benchmarks)."""
    for job in dispatch(system_ids):
        if not job.is_finished:
            run_text_job(job.pk)
