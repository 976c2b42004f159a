"""The objective stage: embeddings, FAD per system and category, finalists, and medoids.

Two pipelines of jobs, each started by an organizer (page, API or command):

    evaluation:  embed (gpu queue, FAD model)    ->  fad (cpu queue): FAD-Eval, FAD-Dev, finalists
    medoids:     embed (gpu queue, medoid model) ->  select_medoids (cpu queue): k-means per
                                                     finalist system and category

An embed job that succeeds queues the job after it, once (guarded by a lock on its own row), so a
redelivered task never makes two. Every step is idempotent: embeddings are cached per clip and
model; FAD values are all computed before any is stored, then upserted on their unique key with
stale rows removed and finalists selected in one transaction; medoids are replaced in one
transaction. The
same functions run synchronously for the demo and the command line (`run_evaluation`,
`run_medoid_selection`).

torch and scikit-learn are imported inside the worker-side functions only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q

from .. import selectors
from ..errors import Refused
from ..jobs import (
    JobProgress,
    enqueue,
    ensure_still_mine,
    run_job,
)
from ..models import (
    AudioFile,
    Category,
    Challenge,
    Clip,
    FadResult,
    Job,
    Medoid,
    ObjectiveSettings,
    ReferenceStats,
    System,
)
from ..phases import phase_conflict
from .embeddings.base import ANY_WEIGHTS, make_model_id, model_id_matches, split_model_id
from .fad import (
    MAX_STATS_DIM,
    GaussianStats,
    ReferenceFactor,
    fad_bootstrap_interval,
    fad_infinity,
    frechet_distance,
)
from .kad import KadReference, kad_interval

Progress = Callable[[int, int, str], None]
PURPOSES = ("fad", "medoids")


class EvaluationError(Refused):
    """An objective-stage request that cannot work; the message says why and what to do."""


class EvaluationConflict(EvaluationError):
    """A request refused by the challenge's phase (the listening test open, results published)."""

    status = 409


# --- settings ---------------------------------------------------------------------------------


# VGGish as DCASE 2023 Task 7 ran it: published DCASE FADs, and FAD against the official
# statistics, are comparable only with this preset (see embeddings/vggish.py).
DCASE_FAD_OPTIONS = {"preset": "dcase2023"}
# OpenL3's environmental-sound weights (trained on AudioSet's non-music videos) for medoids of
# Foley sounds; its music weights are the package default.
MEDOID_OPTIONS = {"content_type": "env"}


def objective_settings(challenge: Challenge) -> ObjectiveSettings:
    obj, _ = ObjectiveSettings.objects.get_or_create(
        challenge=challenge,
        defaults={
            "fad_model_options": dict(DCASE_FAD_OPTIONS),
            "medoid_model_options": dict(MEDOID_OPTIONS),
        },
    )
    return obj


def set_models(challenge: Challenge, **values) -> ObjectiveSettings:
    """Change objective settings by field name (e.g. fad_model="logmel").

    Options belong to a model: naming another model without options clears them.
    """
    obj = objective_settings(challenge)
    fields = {f.name for f in ObjectiveSettings._meta.get_fields()} - {"id", "challenge"}
    unknown = set(values) - fields
    if unknown:
        raise EvaluationError(f"unknown objective settings: {', '.join(sorted(unknown))}")
    for model, options in (
        ("fad_model", "fad_model_options"),
        ("medoid_model", "medoid_model_options"),
    ):
        if model in values and values[model] != getattr(obj, model) and options not in values:
            values[options] = {}
    for key, value in values.items():
        setattr(obj, key, value)
    obj.full_clean()
    obj.save()
    return obj


@dataclass(frozen=True)
class ModelChoice:
    name: str
    options: dict
    weights: str

    def as_params(self) -> dict:
        return {"name": self.name, "options": self.options, "weights": self.weights}


def league_choices(challenge: Challenge) -> list[ModelChoice]:
    """The further models whose FAD enters the embedding league."""
    return [
        ModelChoice(e["name"], dict(e.get("options") or {}), e.get("weights", ""))
        for e in objective_settings(challenge).league_models or []
    ]


def model_choice(challenge: Challenge, purpose: str) -> ModelChoice:
    obj = objective_settings(challenge)
    if purpose == "fad":
        return ModelChoice(obj.fad_model, dict(obj.fad_model_options or {}), obj.fad_weights)
    return ModelChoice(obj.medoid_model, dict(obj.medoid_model_options or {}), obj.medoid_weights)


@functools.lru_cache(maxsize=4)
def _load_cached(name: str, options_json: str, weights: str):
    import json

    from .embeddings import load_embedding_model

    return load_embedding_model(name, json.loads(options_json), weights)


def load_model(choice: ModelChoice | dict):
    """The embedding model, loaded once per worker process and kept for the next job."""
    import json

    if isinstance(choice, dict):
        choice = ModelChoice(choice["name"], choice.get("options") or {}, choice.get("weights", ""))
    return _load_cached(choice.name, json.dumps(choice.options, sort_keys=True), choice.weights)


# --- what each step works on ----------------------------------------------------------------


def _published_stats(
    challenge: Challenge, model_id: str, reference: str
) -> dict[int, ReferenceStats]:
    """Per category, the published statistics for a FAD with the model `model_id`.

    Statistics are kept per model name; those of this name but of another configuration
    (options, weights) are refused, never used in its place and never silently replaced by
    the reference audio.
    """
    name = split_model_id(model_id)[0]
    rows = ReferenceStats.objects.filter(challenge=challenge, model=name, reference=reference)
    out = {}
    for row in rows.select_related("category").order_by("category__position", "pk"):
        if not model_id_matches(row.model_id, model_id):
            raise EvaluationError(_mismatch(row, model_id))
        out[row.category_id] = row
    return out


def _mismatch(row: ReferenceStats, model_id: str) -> str:
    made_with = (
        "an undeclared configuration (imported before statistics named theirs)"
        if split_model_id(row.model_id)[1] == UNDECLARED
        else row.model_id
    )
    hint = (
        ' (VGGish with options {"preset": "dcase2023"})' if row.model_id == DCASE2023_VGGISH else ""
    )
    return (
        f"the published {row.reference} statistics of {row.category.slug} were made with "
        f"{made_with}, but this evaluation embeds with {model_id}: import statistics of this "
        f"model configuration, or set the FAD model to theirs{hint}"
    )


def check_published_stats(challenge: Challenge, model_id: str, dim: int) -> None:
    """Refuse, before anything is embedded, published statistics the model cannot use."""
    for reference in FadResult.Reference.values:
        for row in _published_stats(challenge, model_id, reference).values():
            if row.dim != dim:
                raise EvaluationError(
                    f"the published {reference} statistics of {row.category.slug} are "
                    f"{row.dim}-d, but {model_id} gives {dim}-d embeddings"
                )


# A generation in progress (or failed) stores its clips batch by batch beside the system's
# current ones, which stay until it succeeds: the objective stage reads the current ones alone.
SETTLED = (
    Q(source_job__isnull=True)
    | ~Q(source_job__kind=Job.Kind.GENERATE)
    | Q(source_job__state=Job.State.SUCCEEDED)
)


def audio_to_embed(challenge: Challenge, purpose: str, model_id: str) -> list[AudioFile]:
    """The distinct audio of the clips a step needs embeddings of with the model `model_id`."""
    clips = Clip.objects.filter(SETTLED, challenge=challenge)
    if purpose == "fad":
        refs = [FadResult.Reference.EVALUATION]
        if objective_settings(challenge).fad_development:
            refs.append(FadResult.Reference.DEVELOPMENT)
        wanted = Q(role=Clip.Role.SYSTEM)
        for ref in refs:
            published = _published_stats(challenge, model_id, ref)
            role = Clip.Role.EVALUATION if ref == "evaluation" else Clip.Role.DEVELOPMENT
            wanted |= Q(role=role) & ~Q(category_id__in=list(published))
        clips = clips.filter(wanted)
    else:
        clips = clips.filter(role=Clip.Role.SYSTEM, system__is_finalist=True)
    ids = clips.values_list("audio_id", flat=True).distinct()
    return list(AudioFile.objects.filter(pk__in=ids).order_by("pk"))


# --- starting jobs ----------------------------------------------------------------------------


def _check_can_start(challenge: Challenge, purpose: str) -> None:
    fixed = "medoids cannot change" if purpose == "medoids" else None
    if conflict := phase_conflict(challenge, fixed_by_listening=fixed):
        raise EvaluationConflict(conflict)
    if not System.objects.filter(challenge=challenge).exists():
        raise EvaluationError("the challenge has no systems yet")
    if not Clip.objects.filter(challenge=challenge, role=Clip.Role.SYSTEM).exists():
        raise EvaluationError("no system has clips yet: upload or generate them first")
    if (
        purpose == "medoids"
        and not System.objects.filter(challenge=challenge, is_finalist=True).exists()
    ):
        raise EvaluationError("no finalists yet: run the objective evaluation first")


def _active(challenge: Challenge, purpose: str) -> Job | None:
    kinds = [Job.Kind.EMBED, Job.Kind.FAD if purpose == "fad" else Job.Kind.SELECT_MEDOIDS]
    return (
        Job.objects.filter(
            challenge=challenge,
            kind__in=kinds,
            params__purpose=purpose,
            state__in=[Job.State.QUEUED, Job.State.RUNNING],
        )
        .order_by("-pk")
        .first()
    )


def _start(
    challenge: Challenge,
    purpose: str,
    user: AbstractBaseUser | None,
    enqueue_task: bool,
    league: ModelChoice | None = None,
) -> Job:
    """The embed job of a pipeline; with `league`, of that league model's FAD (which leaves the
    finalists alone and may run beside the FAD model's pipeline)."""
    _check_can_start(challenge, purpose)
    choice = league or model_choice(challenge, purpose)
    with transaction.atomic():
        Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)  # one start at a time
        running = None if league else _active(challenge, purpose)
        if running is not None:
            return running
        if purpose == "fad" and challenge.phase == Challenge.Phase.SETUP:
            Challenge.objects.filter(pk=challenge.pk).update(phase=Challenge.Phase.OBJECTIVE)
            challenge.phase = Challenge.Phase.OBJECTIVE
        job = Job.objects.create(
            challenge=challenge,
            kind=Job.Kind.EMBED,
            params={
                "challenge_id": challenge.pk,
                "purpose": purpose,
                "model": choice.as_params(),
                **({"league": True} if league else {}),
            },
            message=f"queued: {choice.name} embeddings for {'FAD' if purpose == 'fad' else 'medoids'}",
            created_by=user if user and user.is_authenticated else None,
        )
        if enqueue_task:
            enqueue(job)
    return job


def start_evaluation(
    challenge: Challenge, *, user: AbstractBaseUser | None = None, enqueue_task: bool = True
) -> Job:
    """Queue the FAD pipeline (the running one, if one is under way); returns its embed job."""
    return _start(challenge, "fad", user, enqueue_task)


def start_medoid_selection(
    challenge: Challenge, *, user: AbstractBaseUser | None = None, enqueue_task: bool = True
) -> Job:
    """Queue the medoid pipeline for the finalists; returns its embed job."""
    return _start(challenge, "medoids", user, enqueue_task)


def retry_guard(job: Job) -> None:
    """The objective stage's rule for a retry (jobs.retry calls it with the challenge locked):
    not once the phase has fixed what the job would change. Cached embeddings are reused."""
    medoids = job.kind == Job.Kind.SELECT_MEDOIDS or job.params.get("purpose") == "medoids"
    fixed = "medoids cannot change" if medoids else None
    challenge = Challenge.objects.get(pk=job.challenge_id)
    if conflict := phase_conflict(challenge, fixed_by_listening=fixed):
        raise EvaluationConflict(conflict)


# --- running jobs (the bodies of the Celery tasks) ----------------------------------------------


def run_embed(job_id: int, *, echo: Progress | None = None, chain: bool = True) -> Job:
    """Embed what the step needs, then create the step's next job (once) and, with `chain`,
    queue it. The next job exists before this one is marked succeeded, so whoever sees it
    succeed finds `next_job` in its result."""

    def work(job: Job, progress: JobProgress) -> dict:
        challenge = Challenge.objects.get(pk=job.params["challenge_id"])
        purpose = job.params["purpose"]
        report = _reporter(progress, echo)
        report(0, 0, "loading the embedding model")
        model = load_model(job.params["model"])
        progress.log(f"model {model.model_id} on {model.device}")
        if purpose == "fad":
            check_published_stats(challenge, model.model_id, model.timestamp_embedding_size)
        audio = audio_to_embed(challenge, purpose, model.model_id)
        counts = embed_audio(model, audio, report)
        progress.log(
            f"{counts['computed']} embeddings computed, {counts['cached']} taken from the cache"
        )
        nxt = _next_job(job, model.model_id, queue=chain)
        return {**counts, "model_id": model.model_id, "device": model.device, "next_job": nxt.pk}

    return run_job(job_id, work)


def embed_audio(model, audio: list[AudioFile], report: Progress) -> dict:
    from .embeddings.store import embed_audio as store_embed

    return store_embed(model, audio, batch_size=settings.FOLEY_EMBED_BATCH, progress=report)


def _next_job(embed_job: Job, model_id: str, *, queue: bool) -> Job:
    """The FAD or medoid job after an embed job: created once, however often this runs."""
    purpose = embed_job.params["purpose"]
    with transaction.atomic():
        Job.objects.select_for_update(no_key=True).get(pk=embed_job.pk)
        existing = Job.objects.filter(params__embed_job=embed_job.pk).first()
        if existing is not None:
            return existing
        nxt = Job.objects.create(
            challenge_id=embed_job.challenge_id,
            kind=Job.Kind.FAD if purpose == "fad" else Job.Kind.SELECT_MEDOIDS,
            params={
                **embed_job.params,
                "model_id": model_id,
                "embed_job": embed_job.pk,
            },
            message="queued" if queue else "running in this process",
            created_by=embed_job.created_by,
        )
        if queue:
            enqueue(nxt)
    return nxt


def _reporter(progress: JobProgress, echo: Progress | None) -> Progress:
    def report(done: int, total: int, message: str) -> None:
        progress(done, total, message)
        if echo:
            echo(done, total, message)

    return report


def run_fad(job_id: int, *, echo: Progress | None = None, chain: bool = True) -> Job:
    """FAD of one model; after the FAD model's, with `chain`, the league models' pipelines are
    queued (their embeddings, like every model's, come from the cache when already made)."""

    def work(job: Job, progress: JobProgress) -> dict:
        from threadpoolctl import threadpool_limits

        challenge = Challenge.objects.get(pk=job.params["challenge_id"])
        league = bool(job.params.get("league"))
        # Thousands of small eigenvalue solves (bootstrap intervals, per-clip FAD): one BLAS
        # thread each is faster than splitting every one across cores (measured 13x at d = 128,
        # 2.3x at d = 512 on two cores), and the job is one of several a worker runs.
        with threadpool_limits(limits=1, user_api="blas"):
            result = compute_fad_results(
                challenge,
                model_id=job.params["model_id"],
                progress=_reporter(progress, echo),
                log=progress.log,
                owner=job,
                select=not league,
            )
        if chain and not league:
            result["league_jobs"] = []
            for choice in league_choices(challenge):
                try:
                    queued = _start(challenge, "fad", job.created_by, True, choice)
                except EvaluationError as exc:  # e.g. published meanwhile: FAD itself stands
                    progress.log(f"league model {choice.name} not started: {exc}")
                    continue
                result["league_jobs"].append(queued.pk)
        return result

    return run_job(job_id, work)


def run_medoids(job_id: int, *, echo: Progress | None = None) -> Job:
    def work(job: Job, progress: JobProgress) -> dict:
        challenge = Challenge.objects.get(pk=job.params["challenge_id"])
        return compute_medoids(
            challenge,
            model_id=job.params["model_id"],
            progress=_reporter(progress, echo),
            owner=job,
        )

    return run_job(job_id, work)


# --- synchronous runs (demo and command line) ------------------------------------------------


def run_evaluation(challenge: Challenge, *, progress: Progress | None = None) -> Job:
    """The FAD pipeline in this process, then each league model's; returns the FAD model's FAD
    job (or the first job that failed)."""
    embed = start_evaluation(challenge, enqueue_task=False)
    job = _run_pipeline(embed, functools.partial(run_fad, chain=False), progress)
    if job.state != Job.State.SUCCEEDED:
        return job
    for choice in league_choices(challenge):
        league = _start(challenge, "fad", None, False, choice)
        done = _run_pipeline(league, functools.partial(run_fad, chain=False), progress)
        if done.state != Job.State.SUCCEEDED:
            return done
    return job


def run_medoid_selection(challenge: Challenge, *, progress: Progress | None = None) -> Job:
    embed = start_medoid_selection(challenge, enqueue_task=False)
    return _run_pipeline(embed, run_medoids, progress)


def _run_pipeline(embed: Job, second: Callable, progress: Progress | None) -> Job:
    if embed.kind != Job.Kind.EMBED:  # a pipeline already past its embed step
        return second(embed.pk, echo=progress) if not embed.is_finished else embed
    embed = run_embed(embed.pk, echo=progress, chain=False)
    if embed.state != Job.State.SUCCEEDED:
        return embed
    return second(embed.result["next_job"], echo=progress)


# --- FAD and finalists --------------------------------------------------------------------------


def _clip_audio(challenge: Challenge, **filters) -> dict[int, list[int]]:
    """Audio ids per category id for the clips matching `filters`."""
    out: dict[int, list[int]] = {}
    rows = Clip.objects.filter(SETTLED, challenge=challenge, **filters).values_list(
        "category_id", "audio_id"
    )
    for category_id, audio_id in rows.order_by("category_id", "original_name", "pk"):
        out.setdefault(category_id, []).append(audio_id)
    return out


def _clips_of(model_id: str, audio_ids: list[int]) -> list[np.ndarray]:
    from .embeddings.store import load_many

    embeddings = load_many(model_id, audio_ids)
    return [embeddings[a] for a in audio_ids]


def _stats_of(model_id: str, audio_ids: list[int]) -> GaussianStats:
    return GaussianStats.from_embeddings(_clips_of(model_id, audio_ids))


# Each clip's own FAD (fadtk's per-song FAD: its frames against the reference) is kept for every
# clip of a system and category, the worst first, for organizers to open and listen to.


def _fad_extras(
    clips: list[np.ndarray], audio_ids: list[int], reference: ReferenceFactor, obj
) -> dict:
    """The interval, FAD-inf and worst clips of one FAD, as its details record them."""
    out: dict = {}
    if obj.fad_bootstrap:
        low, high = fad_bootstrap_interval(clips, reference, n_resamples=obj.fad_bootstrap)
        out["ci95"] = [low, high]
    if obj.fad_infinity:
        try:
            out["fad_inf"] = fad_infinity(clips, reference).value
        except ValueError as exc:  # too few embeddings: say so instead of a wrong value
            out["fad_inf_error"] = str(exc)
    per_clip = []
    for audio_id, frames in zip(audio_ids, clips, strict=True):
        if len(frames) >= 2:
            per_clip.append(
                [audio_id, frechet_distance(GaussianStats.from_embeddings(frames), reference)]
            )
    per_clip.sort(key=lambda pair: -pair[1])
    out["clip_fad"] = per_clip
    return out


def reference_stats(
    challenge: Challenge, model_id: str, reference: str
) -> dict[int, tuple[GaussianStats, int, str]]:
    """Per category: the reference's statistics, its size, and where they come from."""
    import io

    out: dict[int, tuple[GaussianStats, int, str]] = {}
    published = _published_stats(challenge, model_id, reference)
    for category_id, row in published.items():
        stats = GaussianStats.from_npz(io.BytesIO(bytes(row.data)))
        out[category_id] = (stats, row.count, f"published statistics ({row.source})")
    role = Clip.Role.EVALUATION if reference == "evaluation" else Clip.Role.DEVELOPMENT
    for category_id, audio_ids in _clip_audio(challenge, role=role).items():
        if category_id not in out and len(audio_ids) >= 1:
            out[category_id] = (_stats_of(model_id, audio_ids), len(audio_ids), "audio")
    return out


def kad_references(
    challenge: Challenge, model_id: str, reference: str
) -> dict[int, KadReference | str]:
    """Per category: the reference prepared for KAD (its kernel's bandwidth and sum, made once
    for every system), or why there is none. KAD needs the reference's embeddings: published
    statistics (a mean and a covariance) cannot give it."""
    out: dict[int, KadReference | str] = {}
    for category_id in _published_stats(challenge, model_id, reference):
        out[category_id] = "the reference is published statistics: KAD needs its audio"
    role = Clip.Role.EVALUATION if reference == "evaluation" else Clip.Role.DEVELOPMENT
    for category_id, audio_ids in _clip_audio(challenge, role=role).items():
        if category_id in out:
            continue
        try:
            out[category_id] = KadReference.of(_clips_of(model_id, audio_ids))
        except ValueError as exc:
            out[category_id] = f"no KAD reference: {exc}"
    return out


# The clip counts a metric's stability is measured at (the league's Kendall tau and drift):
# DCASE 2023 Task 7 had 100 clips per system and category.
SUBSET_SIZES = (25, 50, 100)


def _subset_details(
    clips: list[np.ndarray],
    factor: ReferenceFactor,
    kad_reference: KadReference | str | None,
    seed: int,
) -> dict:
    """FAD and KAD of one random draw of 25, 50 and 100 of the clips (only sizes below the
    clip count: at or above it the subset is every clip, the value itself)."""
    from .kad import kernel_distance

    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, float]] = {}
    for size in SUBSET_SIZES:
        if size >= len(clips):
            break
        picked = [clips[i] for i in np.sort(rng.choice(len(clips), size=size, replace=False))]
        stats = GaussianStats.from_embeddings(picked)
        entry = {"fad": frechet_distance(stats, factor)}
        if isinstance(kad_reference, KadReference):
            entry["kad"] = kernel_distance(picked, kad_reference)
        out[str(size)] = entry
    return {"subsets": out} if out else {}


def _kad_details(clips: list[np.ndarray], reference: KadReference | str | None) -> dict:
    """KAD with its interval (or why either is missing), as a FAD row's details record it."""
    if reference is None:
        return {}
    if isinstance(reference, str):
        return {"kad_error": reference}
    try:
        found = kad_interval(clips, reference)
    except ValueError as exc:
        return {"kad_error": str(exc)}
    out: dict = {"kad": found.value}
    if found.low is not None:
        out["kad_ci95"] = [found.low, found.high]
    else:
        out["kad_ci_withheld"] = found.withheld
    return out


def compute_fad_results(
    challenge: Challenge,
    *,
    model_id: str,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
    owner: Job | None = None,
    select: bool = True,
) -> dict:
    """FAD-Eval and FAD-Dev, each with its KAD, of every system and category; then finalists
    per track (not for a league model: `select=False`). With `owner`, results are written only
    while that job is still this worker's."""
    obj = objective_settings(challenge)
    references = [FadResult.Reference.EVALUATION]
    if obj.fad_development:
        references.append(FadResult.Reference.DEVELOPMENT)
    refs = {r: reference_stats(challenge, model_id, r) for r in references}
    kad_refs = {r: kad_references(challenge, model_id, r) for r in references}
    # Each reference covariance is factored once per category, not once per system.
    factors: dict[tuple[str, int], ReferenceFactor] = {}
    if not refs[FadResult.Reference.EVALUATION] and log:
        log("no evaluation set (audio or statistics): finalists follow FAD-Dev")
    categories = {c.pk: c for c in Category.objects.filter(challenge=challenge)}
    systems = list(System.objects.filter(challenge=challenge).order_by("pk"))
    outputs = {s.pk: _clip_audio(challenge, role=Clip.Role.SYSTEM, system=s) for s in systems}
    total = sum(len(v) for v in outputs.values())
    done = 0
    # Every value first: a failure part-way (an embedding missing, a bad reference) must leave
    # the stored results and finalists as they were, never half old and half new.
    computed: list[tuple[System, int, str, dict]] = []
    for system in systems:
        for category_id, audio_ids in outputs[system.pk].items():
            done += 1
            if len(audio_ids) < 2:
                if log:
                    log(
                        f"{system.name} / {categories[category_id].slug}: fewer than 2 clips, no FAD"
                    )
                continue
            clips = _clips_of(model_id, audio_ids)
            stats = GaussianStats.from_embeddings(clips)
            for reference in references:
                ref = refs[reference].get(category_id)
                if ref is None:
                    continue
                ref_stats, n_reference, source = ref
                if ref_stats.dim != stats.dim:
                    raise EvaluationError(
                        f"the {reference} reference of {categories[category_id].slug} "
                        f"({source}) is {ref_stats.dim}-d, but {model_id} gives "
                        f"{stats.dim}-d embeddings"
                    )
                factor = factors.get((reference, category_id))
                if factor is None:
                    factor = factors[(reference, category_id)] = ReferenceFactor.of(ref_stats)
                values = {
                    "challenge": challenge,
                    "value": frechet_distance(stats, factor),
                    "n_clips": len(audio_ids),
                    "n_reference": n_reference,
                    "details": {
                        "frames": stats.count,
                        "reference_source": source,
                        **_fad_extras(clips, audio_ids, factor, obj),
                        **_kad_details(clips, kad_refs[reference].get(category_id)),
                        **_subset_details(
                            clips,
                            factor,
                            kad_refs[reference].get(category_id),
                            seed=system.pk * 1000 + category_id,
                        ),
                    },
                }
                computed.append((system, category_id, reference, values))
            if progress:
                progress(done, total, f"FAD of {system.name}, {categories[category_id].name}")
    kept = {(system.pk, category_id, reference) for system, category_id, reference, _ in computed}
    with transaction.atomic():
        if owner is not None:
            ensure_still_mine(owner)
        # One writer per challenge: a retried job and a new run never interleave their rows.
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if conflict := phase_conflict(locked):  # published while this job ran
            raise EvaluationError(conflict)
        for system, category_id, reference, values in computed:
            FadResult.objects.update_or_create(
                system=system,
                category_id=category_id,
                reference=reference,
                model_id=model_id,
                defaults=values,
            )
        # Rows of this model for clips that no longer exist (a regenerated system) are stale.
        stale = [
            r.pk
            for r in FadResult.objects.filter(challenge=challenge, model_id=model_id)
            if (r.system_id, r.category_id, r.reference) not in kept
        ]
        FadResult.objects.filter(pk__in=stale).delete()
        finalists = select_finalists(challenge, model_id) if select else {}
    return {
        "model_id": model_id,
        "results": len(kept),
        "finalists": {track: [s.name for s in systems] for track, systems in finalists.items()},
    }


def select_finalists(challenge: Challenge, model_id: str) -> dict[str, list[System]]:
    """Mark the top K ranked systems of each track as finalists, and no others."""
    k = objective_settings(challenge).finalists_per_track
    chosen: dict[str, list[System]] = {}
    for track, rows in selectors.fad_ranking(challenge, model_id).items():
        chosen[track] = [r["system"] for r in rows if r["ranked"]][:k]
    ids = [s.pk for systems in chosen.values() for s in systems]
    with transaction.atomic():
        System.objects.filter(challenge=challenge).exclude(pk__in=ids).update(is_finalist=False)
        System.objects.filter(pk__in=ids).update(is_finalist=True)
    return chosen


# --- medoids -------------------------------------------------------------------------------------


def compute_medoids(
    challenge: Challenge,
    *,
    model_id: str,
    progress: Progress | None = None,
    owner: Job | None = None,
) -> dict:
    """k-means medoids of every finalist system and category, replacing earlier ones at once
    (with `owner`, only while that job is still this worker's)."""
    from .embeddings.store import load_many
    from .medoids import select_medoids

    obj = objective_settings(challenge)
    finalists = list(System.objects.filter(challenge=challenge, is_finalist=True).order_by("pk"))
    chosen: list[Medoid] = []
    short: list[str] = []
    pairs = [
        (system, category_id, clip_ids)
        for system in finalists
        for category_id, clip_ids in _clip_ids(challenge, system).items()
    ]
    for done, (system, category_id, clip_ids) in enumerate(pairs, start=1):
        clips = list(Clip.objects.filter(pk__in=clip_ids).order_by("original_name", "pk"))
        k = obj.medoids_per_category
        if len(clips) < k:
            short.append(f"{system.name}/{category_id}: {len(clips)} clips < {k}")
            k = len(clips)
        embeddings = load_many(model_id, [c.audio_id for c in clips])
        scene = np.stack([embeddings[c.audio_id].mean(axis=0) for c in clips])
        # Two clips with the same audio would be the same medoid twice: cluster distinct audio.
        distinct = list({c.audio_id: i for i, c in reversed(list(enumerate(clips)))}.values())
        distinct.sort()
        k = min(k, len(distinct))
        picks = select_medoids(scene[distinct], k, seed=obj.kmeans_seed, n_init=obj.kmeans_n_init)
        for position, index in enumerate(picks):
            clip = clips[distinct[index]]
            chosen.append(
                Medoid(
                    challenge=challenge,
                    system=system,
                    category_id=category_id,
                    clip=clip,
                    position=position,
                )
            )
        if progress:
            progress(done, len(pairs), f"medoids of {system.name}")
    with transaction.atomic():
        if owner is not None:
            ensure_still_mine(owner)
        # The listening test may have opened while this job ran: its stimuli are fixed then.
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if conflict := phase_conflict(locked, fixed_by_listening="medoids cannot change"):
            raise EvaluationError(conflict)
        Medoid.objects.filter(challenge=challenge).delete()
        Medoid.objects.bulk_create(chosen)
    return {"model_id": model_id, "medoids": len(chosen), "short": short}


def _clip_ids(challenge: Challenge, system: System) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    rows = Clip.objects.filter(SETTLED, challenge=challenge, system=system, role=Clip.Role.SYSTEM)
    for category_id, pk in rows.values_list("category_id", "pk").order_by("category_id", "pk"):
        out.setdefault(category_id, []).append(pk)
    return out


# --- published reference statistics ----------------------------------------------------------

# The VGGish configuration the DCASE 2023 Task 7 statistics were made with: the task's own
# FAD pipeline (22,050 Hz clips read as 16 kHz, divided by their largest sample, 1 s windows
# every 0.5 s; raw 128-d embeddings), the vggish module's preset "dcase2023", whose model id is
# vggish:dcase2023-act0-raw@<weights>. Embeddings of the module's defaults (resampled audio,
# 0.96 s examples) are not comparable with them. Any weights file: torchvggish's port and
# Google's checkpoint hold the same network but hash differently, and the statistics name
# neither.
# (Spelt out: importing the module would load torch wherever evaluation is imported.)
DCASE2023_VGGISH = make_model_id("vggish", "dcase2023-act0-raw", ANY_WEIGHTS)
# The options that give a declared model id, where known: what `compute_fad` embeds audio with
# when it is compared with statistics and no options were given.
DECLARED_OPTIONS = {DCASE2023_VGGISH: DCASE_FAD_OPTIONS}
# What `import_reference_stats` accepts in place of a model id.
STATS_PRESETS = {"vggish": DCASE2023_VGGISH}
# Embedding sizes known without loading the model, so an import can check them at once;
# other models' sizes are checked when a FAD job has loaded the model.
EMBEDDING_SIZES = {"vggish": 128}
# The options part of statistics imported before they declared a configuration (migration).
UNDECLARED = "undeclared"


def declared_model(value: str) -> str:
    """The model id that imported statistics declare: a preset name or a full model id."""
    value = value.strip()
    if value in STATS_PRESETS:
        return STATS_PRESETS[value]
    try:
        _, options, _ = split_model_id(value)
    except ValueError:
        presets = ", ".join(f"{k} ({v})" for k, v in STATS_PRESETS.items())
        raise EvaluationError(
            f"model {value!r}: name the model the statistics were made with as a model id, "
            "name:options@weights as FAD results show it (weights * for any weights file), "
            f"or one of {presets}"
        ) from None
    if options == UNDECLARED or len(value) > ReferenceStats._meta.get_field("model_id").max_length:
        raise EvaluationError(f"model {value!r} is not a model id statistics can declare")
    return value


def import_reference_stats(
    challenge: Challenge,
    files: dict[str, object],
    *,
    model: str = "vggish",
    reference: str = FadResult.Reference.EVALUATION,
    source: str = "",
) -> list[ReferenceStats]:
    """Store published statistics per category, all or nothing.

    `files` maps a category (slug or name, any case, as for uploads) to an `.npz` path or file
    holding `mu` and `sigma` (and optionally `embedding_count`). `model` is the model they
    were made with: a model id (`name:options@weights`, weights `*` for any file) or a preset
    (`vggish`: DCASE 2023 Task 7's configuration). A FAD job refuses statistics of another
    configuration of its model. Every file is checked (shapes, finite, symmetric, the model's
    embedding size where known) before anything is stored.
    """
    import hashlib

    from ..selectors import category_lookup, normalise_folder

    if reference not in FadResult.Reference.values:
        raise EvaluationError(f"reference must be one of {', '.join(FadResult.Reference.values)}")
    model_id = declared_model(model)
    name = split_model_id(model_id)[0]
    size = EMBEDDING_SIZES.get(name)
    lookup = category_lookup(challenge)
    parsed = []
    errors = []
    for label, source_file in sorted(files.items()):
        category = lookup.get(normalise_folder(label))
        if category is None:
            errors.append(f"{label}: no category of this challenge matches")
            continue
        try:
            stats = GaussianStats.from_npz(source_file, max_dim=size or MAX_STATS_DIM)
        except ValueError as exc:
            errors.append(f"{label}: {exc}")
            continue
        if size is not None and stats.dim != size:
            errors.append(f"{label}: {stats.dim}-d statistics, but {name} embeddings are {size}-d")
            continue
        parsed.append((category, stats))
    dims = {s.dim for _, s in parsed}
    if len(dims) > 1:
        errors.append(f"the statistics disagree on the embedding size: {sorted(dims)}")
    if errors:
        raise EvaluationError("; ".join(errors))
    rows = []
    with transaction.atomic():
        for category, stats in parsed:
            data = stats.to_npz_bytes()
            row, _ = ReferenceStats.objects.update_or_create(
                category=category,
                reference=reference,
                model=name,
                defaults={
                    "challenge": challenge,
                    "model_id": model_id,
                    "dim": stats.dim,
                    "count": stats.count,
                    "data": data,
                    "source": source[:255],
                    "sha256": hashlib.sha256(data).hexdigest(),
                },
            )
            rows.append(row)
    return rows
