"""The objective stage's services: starting its jobs and running them.

Two pipelines of jobs, each started by an organizer (page, API or command):

    distances:   embed (gpu queue, FAD model)    ->  fad (cpu queue): FAD-Eval, FAD-Dev, finalists
    medoids:     embed (gpu queue, medoid model) ->  select_medoids (cpu queue): k-means per
                                                     finalist system and category

and one step of its own, the learned predictors (predictors, gpu queue: each system clip's
values, predictor_scores.py).

An embed job that succeeds queues the job after it, once (guarded by a lock on its own row), so a
redelivered task never makes two. Every step is idempotent: embeddings are cached per clip and
model; FAD values are all computed before any is stored, then upserted on their unique key with
stale rows removed and finalists selected in one transaction; medoids are replaced in one
transaction; predictor values are upserted per clip and axis, a clip already scored by the same
files left. The same functions run synchronously for the demo and the command line
(`rank_by_fad_now`, `select_medoids_now`, `predictors_now`).

torch and scikit-learn are imported inside the worker-side functions only."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from stimuli.job_kinds import EMBED, PREDICTORS, RANK_BY_FAD, SELECT_MEDOIDS

from ..jobs import Failed, JobProgress, create_job, enqueue, run_job
from ..models import (
    AudioFile,
    Challenge,
    Clip,
    Job,
    System,
)
from ..phases import advance, phase_conflict
from .config import (
    ModelChoice,
    ObjectiveConflict,
    ObjectiveError,
    Progress,
    audio_to_embed,
    checkpublished_stats,
    league_choices,
    load_model,
    model_choice,
)
from .distances import compute_fad_results
from .embeddings.base import WeightsMissing
from .medoids import compute_medoids
from .predictor_scores import load_predictors, predictor_names, score_challenge

# --- starting jobs ----------------------------------------------------------------------------


def _check_can_start(challenge: Challenge, purpose: str) -> None:
    fixed = "medoids cannot change" if purpose == SELECT_MEDOIDS else None
    if conflict := phase_conflict(challenge, fixed_by_listening=fixed):
        raise ObjectiveConflict(conflict)
    if not System.objects.filter(challenge=challenge).exists():
        raise ObjectiveError("the challenge has no systems yet")
    if not Clip.objects.filter(challenge=challenge, role=Clip.Role.SYSTEM).exists():
        raise ObjectiveError("no system has clips yet: upload or generate them first")
    if (
        purpose == SELECT_MEDOIDS
        and not System.objects.filter(challenge=challenge, is_finalist=True).exists()
    ):
        raise ObjectiveError("no finalists yet: run the objective stage first")


def _active(challenge: Challenge, purpose: str) -> Job | None:
    kinds = [EMBED, purpose]
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
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        running = None if league else _active(challenge, purpose)  # one start at a time
        if running is not None:
            return running
        if purpose == RANK_BY_FAD and advance(locked, "start_objective"):
            challenge.refresh_from_db(fields=["phase"])
        job = create_job(
            EMBED,
            challenge=challenge,
            params={
                "challenge_id": challenge.pk,
                "purpose": purpose,
                "model": choice.as_params(),
                **({"league": True} if league else {}),
            },
            message=f"queued: {choice.name} embeddings for {'FAD' if purpose == RANK_BY_FAD else 'medoids'}",
            by=user,
        )
        if enqueue_task:
            enqueue(job)
    return job


def start_rank_by_fad(
    challenge: Challenge, *, user: AbstractBaseUser | None = None, enqueue_task: bool = True
) -> Job:
    """Queue the FAD pipeline (the running one, if one is under way); returns its embed job."""
    return _start(challenge, RANK_BY_FAD, user, enqueue_task)


def start_select_medoids(
    challenge: Challenge, *, user: AbstractBaseUser | None = None, enqueue_task: bool = True
) -> Job:
    """Queue the medoid pipeline for the finalists; returns its embed job."""
    return _start(challenge, SELECT_MEDOIDS, user, enqueue_task)


def start_predictors(
    challenge: Challenge,
    *,
    user: AbstractBaseUser | None = None,
    predictors: str | list[str] | None = None,
    model_dir: str | None = None,
    enqueue_task: bool = True,
) -> Job:
    """Queue the learned predictors' job over every system clip (all predictors by default);
    the one queued or running, if one is under way. The phase does not move. `model_dir`: a
    folder of the worker's holding the predictors' files under their default names, in place
    of where the settings say (the demo's stand-ins); recorded in the job's parameters."""
    names = predictor_names(predictors)
    _check_can_start(challenge, PREDICTORS)
    with transaction.atomic():
        Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        running = (
            Job.objects.filter(
                challenge=challenge,
                kind=PREDICTORS,
                state__in=[Job.State.QUEUED, Job.State.RUNNING],
            )
            .order_by("-pk")
            .first()
        )
        if running is not None:  # one at a time
            return running
        job = create_job(
            PREDICTORS,
            challenge=challenge,
            params={
                "challenge_id": challenge.pk,
                "predictors": names,
                **({"model_dir": str(model_dir)} if model_dir else {}),
            },
            message=f"queued: {', '.join(names)} on every system clip",
            by=user,
        )
        if enqueue_task:
            enqueue(job)
    return job


def retry_guard(job: Job) -> None:
    """The objective stage's rule for a retry (jobs.retry calls it with the challenge locked):
    not once the phase has fixed what the job would change. Cached embeddings are reused."""
    medoids = job.kind == SELECT_MEDOIDS or job.params.get("purpose") == SELECT_MEDOIDS
    fixed = "medoids cannot change" if medoids else None
    challenge = Challenge.objects.get(pk=job.challenge_id)
    if conflict := phase_conflict(challenge, fixed_by_listening=fixed):
        raise ObjectiveConflict(conflict)


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
        if purpose == RANK_BY_FAD:
            checkpublished_stats(challenge, model.model_id, model.timestamp_embedding_size)
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
        nxt = create_job(
            purpose,
            challenge_id=embed_job.challenge_id,
            params={
                **embed_job.params,
                "model_id": model_id,
                "embed_job": embed_job.pk,
            },
            message="queued" if queue else "running in this process",
            by=embed_job.created_by,
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


def run_rank_by_fad(job_id: int, *, echo: Progress | None = None, chain: bool = True) -> Job:
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
                    queued = _start(challenge, RANK_BY_FAD, job.created_by, True, choice)
                except ObjectiveError as exc:  # e.g. published meanwhile: FAD itself stands
                    progress.log(f"league model {choice.name} not started: {exc}")
                    continue
                result["league_jobs"].append(queued.pk)
        return result

    return run_job(job_id, work)


def run_select_medoids(job_id: int, *, echo: Progress | None = None) -> Job:
    def work(job: Job, progress: JobProgress) -> dict:
        challenge = Challenge.objects.get(pk=job.params["challenge_id"])
        return compute_medoids(
            challenge,
            model_id=job.params["model_id"],
            progress=_reporter(progress, echo),
            owner=job,
        )

    return run_job(job_id, work)


def run_predictors(job_id: int, *, echo: Progress | None = None) -> Job:
    """Every system clip's values of the job's predictors. A missing or foreign file fails the
    job with its error (which file, its setting, where it is published), before any audio."""

    def work(job: Job, progress: JobProgress) -> dict | Failed:
        challenge = Challenge.objects.get(pk=job.params["challenge_id"])
        report = _reporter(progress, echo)
        report(0, 0, "loading the predictors")
        folder = job.params.get("model_dir")
        try:
            loaded = load_predictors(
                job.params["predictors"], folder=Path(folder) if folder else None
            )
        except (WeightsMissing, ValueError) as exc:
            return Failed(str(exc), {"predictors": job.params["predictors"]})
        return score_challenge(challenge, loaded, progress=report, log=progress.log)

    return run_job(job_id, work)


# --- synchronous runs (demo and command line) ------------------------------------------------


def rank_by_fad_now(challenge: Challenge, *, progress: Progress | None = None) -> Job:
    """The FAD pipeline in this process, then each league model's; returns the FAD model's FAD
    job (or the first job that failed)."""
    embed = start_rank_by_fad(challenge, enqueue_task=False)
    job = _run_pipeline(embed, functools.partial(run_rank_by_fad, chain=False), progress)
    if job.state != Job.State.SUCCEEDED:
        return job
    for choice in league_choices(challenge):
        league = _start(challenge, RANK_BY_FAD, None, False, choice)
        done = _run_pipeline(league, functools.partial(run_rank_by_fad, chain=False), progress)
        if done.state != Job.State.SUCCEEDED:
            return done
    return job


def select_medoids_now(challenge: Challenge, *, progress: Progress | None = None) -> Job:
    embed = start_select_medoids(challenge, enqueue_task=False)
    return _run_pipeline(embed, run_select_medoids, progress)


def predictors_now(
    challenge: Challenge,
    *,
    predictors: str | list[str] | None = None,
    model_dir: str | None = None,
    progress: Progress | None = None,
) -> Job:
    """The predictors' job in this process (or the one already under way, as it stands)."""
    job = start_predictors(
        challenge, predictors=predictors, model_dir=model_dir, enqueue_task=False
    )
    if job.state != Job.State.QUEUED:
        return job
    return run_predictors(job.pk, echo=progress)


def _run_pipeline(embed: Job, second: Callable, progress: Progress | None) -> Job:
    if embed.kind != EMBED:  # a pipeline already past its embed step
        return second(embed.pk, echo=progress) if not embed.is_finished else embed
    embed = run_embed(embed.pk, echo=progress, chain=False)
    if embed.state != Job.State.SUCCEEDED:
        return embed
    return second(embed.result["next_job"], echo=progress)
