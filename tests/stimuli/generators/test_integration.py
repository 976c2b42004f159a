"""Generation on a real Celery worker process, PostgreSQL and Redis."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from stimuli.generators import services as generators
from stimuli.job_kinds import RANK_BY_FAD, VALIDATE_GENERATOR
from stimuli.jobs import run_job
from stimuli.models import Generator, Job
from stimuli.services import create_challenge, create_system, create_team
from tests.conftest import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.sandbox]


def test_a_failing_system_does_not_affect_another(celery_worker):
    challenge = create_challenge(
        name="Two systems",
        slug="two-systems",
        clip_duration_s=1.0,
        categories=[("rain", "Rain"), ("gunshot", "Gunshot"), ("keyboard", "Keyboard")],
    )
    team = create_team(challenge, name="Team")
    track = challenge.tracks.first()
    broken = create_system(team=team, track=track, name="Broken")
    good = create_system(team=team, track=track, name="Baseline")
    # The broken one passes its first category, then raises on gunshot.
    generators.set_generator(broken, module="tests.generator_fixtures.flaky", validate=False)
    generators.set_generator(good, module="stimuli.generators.baseline", validate=False)
    Generator.objects.update(state=Generator.State.VALID)

    broken_job = generators.start_generation(broken, n_per_category=6, batch_size=3)
    good_job = generators.start_generation(good, n_per_category=6, batch_size=3)
    broken_job = wait_for_job(broken_job.pk)
    good_job = wait_for_job(good_job.pk)

    assert broken_job.state == Job.State.FAILED
    assert "the gunshot decoder is missing" in broken_job.error
    assert "flaky.py" in broken_job.log  # the generator's traceback, for the organizers
    assert broken.clips.count() == 6  # the rain batches it finished stay, ready to resume
    assert good_job.state == Job.State.SUCCEEDED, good_job.error
    assert good.clips.count() == 18
    assert good_job.result["device"] == "cpu"


def test_validation_job_on_the_worker(celery_worker):
    challenge = create_challenge(name="Validation", slug="validation", clip_duration_s=1.0)
    team = create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.first(), name="NaN")
    generators.set_generator(system, module="tests.generator_fixtures.nan_output")
    job = Job.objects.get(kind=VALIDATE_GENERATOR, params__system_id=system.pk)
    job = wait_for_job(job.pk)
    assert job.state == Job.State.FAILED
    generator = Generator.objects.get(system=system)
    assert generator.state == Generator.State.INVALID
    assert generator.report["problems"][0]["code"] == "not_finite"


def test_killed_worker_job_resumes_on_another_with_the_same_audio(celery_worker, tmp_path):
    from tests.conftest import WorkerProcess

    challenge = create_challenge(
        name="Resume", slug="resume", clip_duration_s=1.0, categories=[("rain", "Rain")]
    )
    team = create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.first(), name="Slow")
    generators.set_generator(system, module="tests.generator_fixtures.slow", validate=False)
    Generator.objects.update(state=Generator.State.VALID)
    job = generators.start_generation(system, n_per_category=20, batch_size=2)

    deadline = time.monotonic() + 60
    while system.clips.count() < 6:
        assert time.monotonic() < deadline, celery_worker.log()
        time.sleep(0.05)
    celery_worker.kill()  # SIGKILL, mid-job, as a lost machine
    stored = system.clips.count()
    assert 6 <= stored < 20
    assert Job.objects.get(pk=job.pk).state == Job.State.RUNNING

    # This worker looks for abandoned messages every second, not every 100.
    # and treats a heartbeat older than a second as a lost worker (300 s in production).
    env = {
        **celery_worker.env,
        "CELERY_RESTORE_INTERVAL": "1",
        "CELERY_RESTORE_THROTTLE": "1",
        "FOLEY_JOB_STALE_S": "1",
    }
    second = WorkerProcess(env, tmp_path / "second-worker.log")
    second.start()
    try:
        job = wait_for_job(job.pk, timeout=120)
    finally:
        second.stop()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.attempts == 2
    assert f"resuming: {stored} of 20 clips already stored" in job.log
    assert system.clips.count() == 20

    # The audio equals an uninterrupted run with the same seed.
    twin = create_system(team=team, track=challenge.tracks.first(), name="Twin")
    generators.set_generator(twin, module="tests.generator_fixtures.slow", validate=False)
    Generator.objects.update(state=Generator.State.VALID)
    assert generators.generate_now(twin, 20, 0, batch_size=2).state == Job.State.SUCCEEDED
    names = dict(system.clips.values_list("original_name", "audio__sha256"))
    assert names == dict(twin.clips.values_list("original_name", "audio__sha256"))


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_at_once_run_the_job_once():
    """Two workers get the same job at the same moment: one claims it, the other leaves it."""
    job = Job.objects.create(kind=RANK_BY_FAD)
    start = threading.Barrier(2)
    runs: list[tuple[str, int]] = []
    left = threading.Event()  # a delivery came back without running the job

    def work(job, progress):
        runs.append((threading.current_thread().name, job.attempts))
        # The job runs until the other delivery has come and gone: a state, not a time.
        assert left.wait(30), "the other delivery never returned"
        return {"by": threading.current_thread().name}

    def deliver():
        try:
            start.wait(10)
            run_job(job.pk, work)
            if threading.current_thread().name not in [name for name, _ in runs]:
                left.set()
        finally:
            connection.close()  # each thread has its own database connection

    threads = [threading.Thread(target=deliver, name=f"worker-{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    job.refresh_from_db()
    assert len(runs) == 1, runs
    assert job.state == Job.State.SUCCEEDED and job.attempts == 1
    assert job.result == {"by": runs[0][0]}
