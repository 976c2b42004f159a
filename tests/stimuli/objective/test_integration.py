"""The objective stage on real Celery worker processes, over Redis, with PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from stimuli.demo import write_set
from stimuli.generators import services as generators
from stimuli.job_kinds import RANK_BY_FAD, SELECT_MEDOIDS
from stimuli.models import Embedding, FadResult, Job, Medoid
from stimuli.objective import config, services
from stimuli.services import create_challenge
from tests.conftest import WorkerProcess, wait_for_job
from tests.objective_setup import small_challenge

pytestmark = pytest.mark.integration


def wait_for_pipeline(embed_job_id: int, timeout: float = 180) -> tuple[Job, Job]:
    """The embed job, then the job it queued after it (FAD or medoids)."""
    embed = wait_for_job(embed_job_id, timeout)
    assert embed.state == Job.State.SUCCEEDED, embed.error + embed.log
    return embed, wait_for_job(embed.result["next_job"], timeout)


def test_worker_evaluates_a_challenge_and_selects_medoids(celery_worker, tmp_path):
    challenge = small_challenge(tmp_path, slug="on-worker")
    embed, fad = wait_for_pipeline(services.start_rank_by_fad(challenge).pk)
    assert fad.kind == RANK_BY_FAD and fad.state == Job.State.SUCCEEDED, fad.error
    assert embed.result["computed"] == Embedding.objects.count() == 128
    assert FadResult.objects.filter(challenge=challenge).count() == 16
    assert fad.result["finalists"] == {"A": ["Close"], "B": ["Middle"]}
    # Started again, the pipeline computes nothing new and changes no result.
    values = dict(FadResult.objects.values_list("pk", "value"))
    embed, fad = wait_for_pipeline(services.start_rank_by_fad(challenge).pk)
    assert embed.result["computed"] == 0 and fad.state == Job.State.SUCCEEDED
    assert dict(FadResult.objects.values_list("pk", "value")) == values

    embed, medoids = wait_for_pipeline(services.start_select_medoids(challenge).pk)
    assert medoids.kind == SELECT_MEDOIDS and medoids.state == Job.State.SUCCEEDED
    assert Medoid.objects.filter(challenge=challenge).count() == 20
    assert "stimuli.tasks.embed_clips" in celery_worker.log()
    assert "stimuli.tasks.rank_by_fad" in celery_worker.log()


def test_killed_worker_leaves_the_job_to_another_which_finishes_it_once(celery_worker, tmp_path):
    challenge = small_challenge(tmp_path, slug="killed", system_clips=12)
    config.set_models(challenge, fad_model="tests.embedding_fixtures.slow")
    total = 4 * 2 * 12 + 2 * 2 * 8
    embed = services.start_rank_by_fad(challenge)

    deadline = time.monotonic() + 90
    while Embedding.objects.count() < 8:  # batches of 32 clips at 0.3 s each: a few in
        assert time.monotonic() < deadline, celery_worker.log()
        time.sleep(0.05)
    celery_worker.kill()
    stored = Embedding.objects.count()
    assert 8 <= stored < total
    assert Job.objects.get(pk=embed.pk).state == Job.State.RUNNING

    # This worker looks for abandoned messages every second, and takes a job over once its
    # heartbeat is a second old (300 s in production); a fresher one it would leave alone.
    env = {
        **celery_worker.env,
        "CELERY_RESTORE_INTERVAL": "1",
        "CELERY_RESTORE_THROTTLE": "1",
        "FOLEY_JOB_STALE_S": "1",
    }
    second = WorkerProcess(env, tmp_path / "second-worker.log")
    second.start()
    try:
        embed, fad = wait_for_pipeline(embed.pk)
    finally:
        second.stop()
    assert embed.attempts == 2
    assert embed.result["cached"] == stored and embed.result["computed"] == total - stored
    assert Embedding.objects.count() == total  # one row per clip, no duplicates
    assert fad.state == Job.State.SUCCEEDED, fad.error
    assert Job.objects.filter(kind=RANK_BY_FAD).count() == 1
    assert FadResult.objects.filter(challenge=challenge).count() == 16


def test_a_delivery_finding_its_job_held_comes_back_and_takes_it_over_once_stale(
    celery_worker, tmp_path
):
    # Celery redelivers a task the moment its worker dies, while the job's heartbeat still
    # looks alive: that delivery must come back later, not be dropped with the job left running.
    challenge = small_challenge(tmp_path, slug="held")
    config.set_models(challenge, fad_model="logmel")
    celery_worker.stop()
    embed = services.start_rank_by_fad(challenge)  # its message waits: no worker is up
    Job.objects.filter(pk=embed.pk).update(state=Job.State.RUNNING, attempts=1)
    env = {**celery_worker.env, "FOLEY_JOB_STALE_S": "3"}
    worker = WorkerProcess(env, tmp_path / "held-worker.log")
    # The job looks alive (its heartbeat kept fresh from here) until the worker has met it and
    # sent its task back, however long the worker takes to start; then it goes stale.
    met = threading.Event()

    def keep_alive() -> None:
        try:
            while not met.is_set():
                Job.objects.filter(pk=embed.pk).update(updated_at=timezone.now())
                met.wait(0.2)
        finally:
            connection.close()  # this thread's own connection

    alive = threading.Thread(target=keep_alive, daemon=True)
    alive.start()
    try:
        worker.start()
        deadline = time.monotonic() + 180
        while "comes back in" not in worker.log():
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.2)
        met.set()
        alive.join()
        embed, fad = wait_for_pipeline(embed.pk)
    finally:
        met.set()
        worker.stop()
    assert embed.state == Job.State.SUCCEEDED and embed.attempts == 2, embed.error
    assert fad.state == Job.State.SUCCEEDED, fad.error


def test_generate_with_the_baseline_evaluate_and_select_medoids(celery_worker, tmp_path):
    challenge = create_challenge(
        name="End to end",
        slug="end-to-end",
        categories=[("dog_bark", "Dog bark"), ("rain", "Rain")],
    )
    from stimuli.uploads.imports import import_clips

    for role, seed in (("development", 1), ("evaluation", 2)):
        root = write_set(tmp_path / role, challenge, 6, seed, 0.0)
        assert import_clips(challenge, root, role=role).created_clips == 12
    systems = generators.create_baseline_systems(challenge, track_code="A")
    jobs = [generators.start_generation(s, n_per_category=8, batch_size=4) for s in systems]
    for job in jobs:
        job = wait_for_job(job.pk, timeout=180)
        assert job.state == Job.State.SUCCEEDED, job.error + job.log
    assert all(s.clips.count() == 16 for s in systems)

    config.set_models(
        challenge, fad_model="logmel", medoid_model="logmel", finalists_per_track=2,
        medoids_per_category=4, kmeans_n_init=2,
    )  # fmt: skip
    _, fad = wait_for_pipeline(services.start_rank_by_fad(challenge).pk)
    assert fad.state == Job.State.SUCCEEDED, fad.error
    assert FadResult.objects.filter(challenge=challenge).count() == 3 * 2 * 2
    assert challenge.systems.filter(is_finalist=True).count() == 2
    _, medoids = wait_for_pipeline(services.start_select_medoids(challenge).pk)
    assert medoids.state == Job.State.SUCCEEDED, medoids.error
    chosen = Medoid.objects.filter(challenge=challenge)
    assert chosen.count() == 2 * 2 * 4
    assert all(m.clip.source_job is not None for m in chosen)  # generated clips
