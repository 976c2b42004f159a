"""Systems submitted as code: storing a generator, validating it, and generating its clips.

A generation job asks the system's generator, in the sandbox, for N clips of every category in
batches. Batch b of a category starts at clip index b * batch_size and gets the seed
`derive_seed(seed, category, index)`, so a job resumed after an interruption asks for exactly
the batches it lost and gets the same audio. Each batch is checked against the clip spec and
stored in one transaction (audio files plus clip rows, `source_job` set); resuming counts what
the job already stored. A generator that breaks a rule ends its own job failed, with the error
and the generator's log on the job; other jobs are not affected.

The clips of earlier generation jobs of the system stay until a new job succeeds: they are
deleted in the transaction that marks it succeeded, so a failed run never leaves a system with
fewer clips than before. Until then the new job's clips are told apart by their `source_job`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sandbox.errors import SandboxError
from sandbox.process import Limits, Sandbox, cuda_visible, enforcement
from sandbox.source import GeneratorSource, inspect_archive
from stimuli.job_kinds import GENERATE, VALIDATE_GENERATOR

from .. import selectors, storage
from ..audio import ClipSpec, encode_wav, inspect_audio
from ..errors import Refused
from ..jobs import (
    Failed,
    JobProgress,
    create_job,
    enqueue,
    ensure_still_mine,
    run_job,
    stale_after_s,
)
from ..models import Challenge, Clip, Generator, Job, System
from ..phases import PhaseError, check_clips_can_change
from ..selectors import clip_spec
from .contract import check_output, derive_seed, to_float
from .limits import archive_limits, sandbox_limits
from .validate import validate_source

DEFAULT_BATCH_SIZE = 10
NAME_PATTERN = re.compile(r"^generated/(?P<category>[^/]+)/(?P<index>\d+)\.wav$")


class GenerationError(Refused):
    """A generation request that cannot work, or output that breaks the clip spec."""


class GenerationConflict(GenerationError):
    """A request that is well formed but clashes with the state of the challenge or its jobs."""

    status = 409


def job_sandbox(
    generator: Generator, source: GeneratorSource, spec: ClipSpec, job: Job, *, use_gpu: bool
) -> Sandbox:
    """A job's sandbox for the submitted code (not started): the platform's limits, the
    generator's trust, the job's heartbeat while it waits."""
    return Sandbox(
        source,
        spec,
        sandbox_limits(),
        use_gpu=use_gpu,
        trusted=generator.trusted,
        on_wait=Heartbeat(job),
    )


def start_checked(sandbox: Sandbox, spec: ClipSpec, log: Callable[[str], None]) -> None:
    """Load the model in the sandbox and check its sample rate again, not only at validation:
    submitted code may report one rate when validated and another when it runs."""
    info = sandbox.start()
    log(f"loaded {sandbox.source.module} in {info['seconds']:.1f} s")
    if info.get("sample_rate") != spec.sample_rate:
        raise GenerationError(
            f"model.sample_rate is {info.get('sample_rate')}; the challenge needs "
            f"{spec.sample_rate} Hz"
        )


def clip_name(category_slug: str, index: int) -> str:
    return f"generated/{category_slug}/{index:04d}.wav"


# --- storing and validating generators --------------------------------------------------------


def check_archive(path: Path) -> str:
    """The module an archive holds; raises GenerationError with the reason when it holds none.

    The cheap part of the upload check, run inside the web request: the zip's central directory
    (names, sizes, compression) and the small manifest, nothing unpacked. Unpacking, loading and
    generating run on a worker as a validation job.
    """
    try:
        return inspect_archive(path, archive_limits()).module
    except SandboxError as exc:
        raise GenerationError(exc.message) from None


@transaction.atomic
def set_generator(
    system: System,
    *,
    module: str = "",
    archive: File | None = None,
    config: dict | None = None,
    user: AbstractBaseUser | None = None,
    validate: bool = True,
    trusted: bool = False,
) -> Generator:
    """Attach code to a system (replacing earlier code) and queue its validation.

    `trusted` is the organizer's word for this code; new code is never trusted by default.
    """
    if bool(module) == bool(archive):
        raise GenerationError("give either a module path or an archive")
    fields: dict = {"module": module, "archive": "", "archive_name": "", "archive_sha256": ""}
    if archive is not None:
        limit = settings.FOLEY_GENERATOR_MAX_BYTES
        if archive.size is not None and archive.size > limit:
            raise GenerationError(f"the archive is {archive.size:,} bytes; the limit is {limit:,}")
        with tempfile.TemporaryDirectory(prefix="foley-upload-") as tmp:
            local = Path(tmp) / "upload"
            digest = hashlib.sha256()
            with open(local, "wb") as handle:
                for chunk in archive.chunks():
                    digest.update(chunk)
                    handle.write(chunk)
            name = Path(getattr(archive, "name", "") or "generator.zip").name
            fields["module"] = check_archive(local)
            sha = digest.hexdigest()
            suffix = ".whl" if name.lower().endswith(".whl") else ".zip"
            stored = f"generators/{sha}{suffix}"
            if not default_storage.exists(stored):
                with open(local, "rb") as handle:
                    default_storage.save(stored, File(handle))
            fields.update(archive=stored, archive_name=name, archive_sha256=sha)
    elif not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", module):
        raise GenerationError(f"'{module}' is not a module path (like package.module)")
    previous = (
        Generator.objects.select_for_update(no_key=True)
        .filter(system=system)
        .values_list("archive", flat=True)
        .first()
    )
    generator, _ = Generator.objects.update_or_create(
        system=system,
        defaults={
            **fields,
            "config": config or {},
            "trusted": trusted,
            "state": Generator.State.PENDING,
            "report": {},
            "validated_at": None,
        },
    )
    if previous and previous != generator.archive:
        # After the commit only: were the transaction rolled back, the row would still name it.
        transaction.on_commit(lambda: delete_archive_if_unused(previous))
    if system.kind != System.Kind.GENERATOR:
        system.kind = System.Kind.GENERATOR
        system.save(update_fields=["kind"])
    if validate:
        start_validation(generator, user=user)
        generator.refresh_from_db()  # validated already when tasks run in-process
    return generator


@transaction.atomic
def set_trusted(generator: Generator, trusted: bool) -> Generator:
    """Mark a generator's code trusted (or not): trusted code may run without isolation where a
    worker cannot provide it. The code's validation is not redone."""
    Generator.objects.select_for_update(no_key=True).filter(pk=generator.pk).update(trusted=trusted)
    generator.refresh_from_db()
    return generator


def delete_archive_if_unused(name: str) -> bool:
    """Delete a stored generator archive that no generator names any more; True if deleted.

    Archives are stored by content hash, so another system may share the same file.
    """
    if Generator.objects.filter(archive=name).exists():
        return False
    default_storage.delete(name)
    return True


class prepared_source:
    """A context manager giving a local GeneratorSource for a stored generator."""

    def __init__(self, generator: Generator):
        self.generator = generator
        self.tmp: str | None = None

    def __enter__(self) -> GeneratorSource:
        self.tmp = tempfile.mkdtemp(prefix="foley-generator-")
        root = Path(self.tmp)
        generator = self.generator
        if generator.archive:
            local = root / Path(generator.archive).name
            with default_storage.open(generator.archive, "rb") as src, open(local, "wb") as dst:
                shutil.copyfileobj(src, dst)
            source = GeneratorSource.from_archive(local, root / "code", archive_limits())
            local.unlink()
        else:
            source = GeneratorSource.from_module(generator.module)
        if generator.config:
            config = root / "config.json"
            config.write_text(json.dumps(generator.config))
            source.model_path = str(config)
        return source

    def __exit__(self, *exc) -> None:
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


def start_validation(generator: Generator, *, user: AbstractBaseUser | None = None) -> Job:
    job = create_job(
        VALIDATE_GENERATOR,
        challenge_id=generator.system.challenge_id,
        params={"system_id": generator.system_id},
        by=user,
    )
    enqueue(job)
    return job


def validate_generator(
    generator: Generator, limits: Limits | None = None, *, job: Job | None = None
) -> dict:
    """Run the validator on a stored generator and record its report and state; with `job`,
    its row gets a heartbeat while submitted code loads and runs."""
    challenge = generator.system.challenge
    categories = list(challenge.categories.values_list("slug", flat=True))
    try:
        with prepared_source(generator) as source:
            report = validate_source(
                source,
                clip_spec(challenge),
                limits=limits or sandbox_limits(),
                categories=categories,
                target=generator.label,
                on_wait=Heartbeat(job) if job is not None else None,
                trusted=generator.trusted,
            ).to_dict()
    except SandboxError as exc:
        report = {"ok": False, "summary": f"Invalid generator: {exc.message}", "problems": []}
        report["problems"].append({"code": exc.code, "message": exc.message, "detail": ""})
    with transaction.atomic():
        if job is not None:
            ensure_still_mine(job)  # a worker given up for dead records no verdict
        current = Generator.objects.select_for_update(no_key=True).filter(pk=generator.pk).first()
        if current is None or _code(current) != _code(generator):
            # New code was attached while this ran: the verdict is about code that is gone, and
            # the new code's own validation job decides its state.
            report["stale"] = True
            return report
        Generator.objects.filter(pk=generator.pk).update(
            state=Generator.State.VALID if report["ok"] else Generator.State.INVALID,
            report=report,
            validated_at=timezone.now(),
            updated_at=timezone.now(),
        )
    return report


def _code(generator: Generator) -> tuple:
    """What a validation verdict is about: the code and the settings it was loaded with."""
    return (generator.module, generator.archive, generator.archive_sha256, generator.config)


def retry_guard(job: Job) -> None:
    """Generation's rule for a retry (jobs.retry calls it with the challenge locked).

    A generation job is retried only while it is the system's latest: an older one, run again,
    would replace the clips of the newer job when it succeeds; and only while the phase lets
    clips change. A generation resumes where it stopped.
    """
    system = System.objects.filter(pk=job.params.get("system_id")).first()
    if system is None:
        raise GenerationError(f"the system of job #{job.pk} no longer exists")
    # The lock start_generation takes after the challenge's: no start slips in between.
    Generator.objects.select_for_update(no_key=True).filter(system=system).first()
    if job.kind != GENERATE:
        return
    _check_phase(system.challenge)
    other = (
        Job.objects.filter(kind=GENERATE, params__system_id=system.pk)
        .exclude(pk=job.pk)
        .filter(Q(pk__gt=job.pk) | Q(state__in=[Job.State.QUEUED, Job.State.RUNNING]))
        .order_by("-pk")
        .first()
    )
    if other is not None:
        raise GenerationConflict(
            f"generation job #{other.pk} of '{system}' is newer or still under way "
            f"({other.state}); only the system's latest generation can be retried "
            "(this one would replace its clips)"
        )


def _check_phase(challenge: Challenge) -> None:
    try:
        check_clips_can_change(challenge)
    except PhaseError as exc:
        raise GenerationConflict(str(exc)) from None


def run_validation(job_id: int) -> Job:
    def work(job: Job, progress: JobProgress) -> dict:
        generator = Generator.objects.select_related("system__challenge").get(
            system_id=job.params["system_id"]
        )
        progress(0, 1, f"validating {generator.label}")
        report = validate_generator(generator, job=job)
        for problem in report.get("problems", []):
            progress.log(f"[{problem['code']}] {problem['message']}")
        progress(1, 1, report["summary"])
        result = {"ok": report["ok"], "summary": report["summary"]}
        if report.get("stale"):
            result["stale"] = True
            progress.log("new code was attached while this ran: its verdict was not recorded")
        return result if report["ok"] else Failed(report["summary"], result)

    return run_job(job_id, work)


# --- generation jobs ---------------------------------------------------------------------------


def start_generation(
    system: System,
    *,
    n_per_category: int = 100,
    seed: int = 0,
    batch_size: int = DEFAULT_BATCH_SIZE,
    user: AbstractBaseUser | None = None,
    enqueue_task: bool = True,
) -> Job:
    """Queue a generation job for the system (the running one, if one is already under way).

    Refused (GenerationConflict) once the listening test has fixed the stimuli.
    """
    generator = Generator.objects.filter(system=system).first()
    if generator is None:
        raise GenerationError(f"system '{system}' has no generator code")
    if generator.state == Generator.State.INVALID:
        raise GenerationError(f"the generator of '{system}' failed validation; upload a fixed one")
    if not 1 <= n_per_category <= 10_000:
        raise GenerationError("clips per category must lie in 1..10000")
    if not 1 <= batch_size <= 1_000:
        raise GenerationError("the batch size must lie in 1..1000")
    if not 0 <= seed < 2**31:
        raise GenerationError("the seed must lie in 0..2147483647")
    with transaction.atomic():
        # Locked, then checked again: the listening test cannot open between check and start.
        _check_phase(Challenge.objects.select_for_update(no_key=True).get(pk=system.challenge_id))
        Generator.objects.select_for_update(no_key=True).get(pk=generator.pk)  # one start at a time
        running = Job.objects.filter(
            kind=GENERATE,
            params__system_id=system.pk,
            state__in=[Job.State.QUEUED, Job.State.RUNNING],
        ).first()
        if running is not None:
            return running
        categories = system.challenge.categories.count()
        job = create_job(
            GENERATE,
            challenge_id=system.challenge_id,
            params={
                "system_id": system.pk,
                "n_per_category": n_per_category,
                "seed": seed,
                "batch_size": batch_size,
            },
            total=n_per_category * categories,
            message=f"queued: {n_per_category} clips of {categories} categories",
            by=user,
        )
        if enqueue_task:
            enqueue(job)
    return job


def generate_now(
    system: System,
    n_per_category: int = 100,
    seed: int = 0,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int, int, str], None] | None = None,
) -> Job:
    """Generate in this process, without a broker (the demo and the command line)."""
    job = start_generation(
        system,
        n_per_category=n_per_category,
        seed=seed,
        batch_size=batch_size,
        enqueue_task=False,
    )
    return run_generation(job.pk, echo=progress)


class Heartbeat:
    """Touches the job row every few seconds while a worker is on it, even inside a long call."""

    def __init__(self, job: Job):
        self.job_id = job.pk
        self.every = min(30.0, stale_after_s() / 3)
        self._last = time.monotonic()

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            Job.objects.filter(pk=self.job_id).update(updated_at=timezone.now())


def run_generation(job_id: int, *, echo: Callable[[int, int, str], None] | None = None) -> Job:
    """The body of the `generate_clips` task: generate what the job has not stored yet.

    A second delivery of the task while a live worker is still on the job (the broker redelivers
    a message held longer than its visibility timeout) is dropped by `run_job`: the job's
    heartbeat is fresh. A job whose worker died has a stale heartbeat and is resumed. When the
    job succeeds, the clips of the system's earlier generations go in the same transaction.
    """

    def work(job: Job, progress: JobProgress) -> dict:
        def report(done: int, total: int, message: str) -> None:
            progress(done, total, message)
            if echo:
                echo(done, total, message)

        return generate_clips(job, report, progress.log)

    return run_job(job_id, work, on_success=replace_earlier_clips)


def replace_earlier_clips(job: Job, result: dict) -> str | None:
    """Delete the clips of the system's earlier generation jobs, now that `job` succeeded.

    Runs in the transaction that marks the job succeeded. Returns an error (and deletes nothing)
    when the listening test opened while the job ran.
    """
    system = System.objects.get(pk=job.params["system_id"])
    challenge = Challenge.objects.select_for_update(no_key=True).get(pk=system.challenge_id)
    try:
        check_clips_can_change(challenge)
    except PhaseError as exc:
        return f"[phase] {exc}; the earlier clips were kept"
    adopted = Job.objects.get(pk=job.pk).params.get("adopted", {})
    for pk, name in adopted.items():
        Clip.objects.filter(pk=int(pk), system=system).update(source_job=job, original_name=name)
    _, deleted = Clip.objects.filter(
        system=system, source_job__kind=GENERATE, source_job_id__lt=job.pk
    ).delete()
    replaced = deleted.get(Clip._meta.label, 0)
    if replaced:
        result["replaced"] = replaced
        JobProgress(job).log(f"removed {replaced} clips of earlier generations of this system")
    return None


def _stored_indices(job: Job, system: System) -> dict[str, set[int]]:
    stored: dict[str, set[int]] = {}
    names = Clip.objects.filter(system=system, source_job=job).values_list(
        "category__slug", "original_name"
    )
    # Clips taken over from an earlier generation count as this job's (under their new names).
    adopted = Job.objects.get(pk=job.pk).params.get("adopted", {})
    slugs = dict(
        Clip.objects.filter(pk__in=[int(pk) for pk in adopted]).values_list("pk", "category__slug")
    )
    names = [*names, *((slugs[int(pk)], name) for pk, name in adopted.items() if int(pk) in slugs)]
    for slug, name in names:
        match = NAME_PATTERN.match(name)
        if match:
            stored.setdefault(slug, set()).add(int(match["index"]))
    return stored


def generate_clips(
    job: Job,
    progress: Callable[[int, int, str], None],
    log: Callable[[str], None],
) -> dict:
    params = job.params
    system = System.objects.select_related("challenge").get(pk=params["system_id"])
    challenge = system.challenge
    generator = Generator.objects.get(system=system)
    n, seed, batch_size = params["n_per_category"], params["seed"], params["batch_size"]
    categories = list(challenge.categories.all())
    total = n * len(categories)

    try:  # a job queued before the listening test opened must not run after
        check_clips_can_change(challenge)
    except PhaseError as exc:
        log(f"[phase] {exc}")
        return Failed(f"[phase] {exc}", {"clips": 0})
    stored = _stored_indices(job, system)
    done = sum(len(v) for v in stored.values())
    if done:
        log(f"resuming: {done} of {total} clips already stored")
    progress(done, total, "starting")
    if done >= total:
        return {"clips": done, "resumed_at": done}

    use_gpu = cuda_visible()
    spec = clip_spec(challenge)
    audio_spec = selectors.clip_spec(challenge)
    started = time.perf_counter()
    generated = 0
    with ExitStack() as stack:
        try:
            source = stack.enter_context(prepared_source(generator))
        except SandboxError as exc:  # the module is not installed here, or the archive is broken
            log(f"[{exc.code}] {exc.message}")
            return Failed(f"[{exc.code}] {exc.message}", {"clips": done})
        sandbox = job_sandbox(generator, source, spec, job, use_gpu=use_gpu)
        log(f"device: {'cuda' if use_gpu else 'cpu'}")
        for rule, what in enforcement(use_gpu, generator.trusted).items():
            log(f"sandbox {rule}: {what}")
        try:
            start_checked(sandbox, spec, log)
            for category in categories:
                have = stored.get(category.slug, set())
                for start in range(0, n, batch_size):
                    indices = list(range(start, min(n, start + batch_size)))
                    if all(i in have for i in indices):
                        continue
                    batch_seed = derive_seed(seed, category.slug, start)
                    array = sandbox.generate(category.slug, len(indices), batch_seed)
                    problems = check_output(array, len(indices), spec)
                    if problems:
                        raise GenerationError(
                            f"{category.slug} clips {start + 1}-{indices[-1] + 1}: "
                            + "; ".join(message for _, message in problems)
                        )
                    missing = [(k, i) for k, i in enumerate(indices) if i not in have]
                    _store_batch(job, system, category, array, missing, audio_spec)
                    have.update(i for _, i in missing)
                    done += len(missing)
                    generated += len(missing)
                    log(
                        f"{category.slug}: clips {start + 1}-{indices[-1] + 1} stored "
                        f"(seed {batch_seed})"
                    )
                    progress(done, total, f"{category.slug}: {len(have)}/{n}")
        except (SandboxError, GenerationError) as exc:
            detail = getattr(exc, "detail", "")
            if detail.strip():
                log("generator output:\n" + detail.rstrip())
            message = exc.message if isinstance(exc, SandboxError) else str(exc)
            code = exc.code if isinstance(exc, SandboxError) else "clip_spec"
            return Failed(f"[{code}] {message}", {"clips": done})
        finally:
            tail = sandbox.log_tail(2000).strip()
            sandbox.close()
            if tail:
                log("generator log (tail):\n" + tail)
    seconds = time.perf_counter() - started
    log(f"generated {generated} clips in {seconds:.1f} s")
    return {
        "clips": done,
        "generated": generated,
        "seconds": round(seconds, 3),
        "device": "cuda" if use_gpu else "cpu",
    }


def _store_batch(job, system, category, array, items, audio_spec: ClipSpec) -> None:
    """Check and store one batch's clips, all or none."""
    samples = to_float(array)
    checks = []
    for k, index in items:
        clip = samples[k]
        frames = clip.T if clip.ndim == 2 else clip[:, None]  # [frames, channels]
        data = encode_wav(frames, audio_spec.sample_rate, audio_spec.bit_depth)
        check = inspect_audio(data, audio_spec)
        if not check.ok:
            raise GenerationError(f"{clip_name(category.slug, index)}: " + "; ".join(check.errors))
        checks.append((index, check))
    written: list[str] = []
    try:
        with transaction.atomic():
            ensure_still_mine(job)  # a worker given up for dead stores no batch
            for index, check in checks:
                audio, created = storage.stored_audio(check)
                if created:
                    written.append(check.sha256)
                name = clip_name(category.slug, index)
                twin = (
                    Clip.objects.filter(system=system, category=category, audio=audio)
                    .select_related("source_job")
                    .first()
                )
                if twin is not None and _earlier_generation(twin, job) and not _adopted(job, twin):
                    # The same sound as a clip of an earlier generation (the same code and seed
                    # give the same audio): this job takes that clip over instead of storing it
                    # twice, and what refers to it (medoids) stays. It stays the earlier job's
                    # until this one succeeds, so a failure loses nothing.
                    _adopt(job, twin, name)
                    continue
                if twin is not None:
                    raise GenerationError(
                        f"{name} is identical to {twin.original_name}; a generator must give "
                        "different clips for different seeds"
                    )
                Clip.objects.create(
                    challenge_id=system.challenge_id,
                    category=category,
                    role=Clip.Role.SYSTEM,
                    system=system,
                    audio=audio,
                    original_name=name,
                    source_job=job,
                )
    except BaseException:
        for sha in written:
            storage.delete_audio(sha)
        raise


def _adopt(job: Job, clip: Clip, name: str) -> None:
    locked = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
    adopted = dict(locked.params.get("adopted", {}))
    adopted[str(clip.pk)] = name
    locked.params = {**locked.params, "adopted": adopted}
    locked.save(update_fields=["params", "updated_at"])
    job.params = locked.params


def _adopted(job: Job, clip: Clip) -> bool:
    return str(clip.pk) in job.params.get("adopted", {})


def _earlier_generation(clip: Clip, job: Job) -> bool:
    source = clip.source_job
    return source is not None and source.kind == GENERATE and source.pk < job.pk


# The baseline and two variants the demo runs: one module, three settings.
BASELINE_MODULE = "stimuli.generators.baseline"
BASELINE_VARIANTS = [
    ("Procedural baseline", {}),
    ("Baseline bright", {"brightness": 0.9, "density": 1.5}),
    ("Baseline dark", {"brightness": 0.15, "density": 0.7}),
]


def create_baseline_systems(
    challenge: Challenge, *, team_name: str = "Organizers", track_code: str = "B"
) -> list[System]:
    """The baseline and its two variants as generator systems of `challenge` (validated)."""
    from ..models import Team, Track
    from ..services import create_system, create_team

    team = Team.objects.filter(challenge=challenge, name=team_name).first() or create_team(
        challenge, name=team_name
    )
    track = Track.objects.get(challenge=challenge, code=track_code)
    systems = []
    for name, config in BASELINE_VARIANTS:
        system = System.objects.filter(challenge=challenge, name=name).first()
        if system is None:
            system = create_system(team=team, track=track, name=name, kind=System.Kind.GENERATOR)
        # The platform's own code, vouched for by the organizers who run it: on a machine without
        # bubblewrap (a first look at the demo) it runs as a plain process, and the log says so.
        set_generator(system, module=BASELINE_MODULE, config=config, trusted=True)
        systems.append(system)
    return systems
