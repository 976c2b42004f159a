"""Running a job: exactly one worker claims it; a second delivery leaves a live job alone, a job
whose worker died is taken over, and a worker that lost its job records nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from stimuli.errors import Refused
from stimuli.job_kinds import RANK_BY_FAD
from stimuli.jobs import claim, run_job
from stimuli.models import Job
from tests import ROOT_DIR

pytestmark = pytest.mark.django_db


def running_job(**fields) -> Job:
    return Job.objects.create(kind=RANK_BY_FAD, state=Job.State.RUNNING, attempts=1, **fields)


def test_a_second_delivery_of_a_running_job_is_dropped():
    job = running_job()  # its worker's heartbeat (updated_at) is fresh
    calls: list[int] = []
    again = run_job(job.pk, lambda job, progress: calls.append(job.attempts) or {"n": 1})
    assert calls == []
    assert again.state == Job.State.RUNNING and again.attempts == 1 and again.result == {}
    # Nothing is written: a write would renew the heartbeat of a worker that may be dead.
    assert again.updated_at == job.updated_at and again.log == ""


def test_a_job_left_running_by_a_dead_worker_is_taken_over_and_finished_once(settings):
    settings.FOLEY_JOB_STALE_S = 60
    job = running_job()
    Job.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    calls: list[int] = []
    done = run_job(job.pk, lambda job, progress: calls.append(job.attempts) or {"n": 1})
    assert calls == [2]
    assert done.state == Job.State.SUCCEEDED and done.attempts == 2 and done.result == {"n": 1}
    again = run_job(job.pk, lambda job, progress: calls.append(job.attempts))
    assert calls == [2] and again.attempts == 2  # a finished job is not run again


def test_only_queued_or_stale_jobs_can_be_claimed(settings):
    settings.FOLEY_JOB_STALE_S = 60
    queued = Job.objects.create(kind=RANK_BY_FAD)
    assert claim(queued.pk).attempts == 1
    assert claim(queued.pk) is None  # now running, with a fresh heartbeat
    for state in (Job.State.SUCCEEDED, Job.State.FAILED):
        finished = Job.objects.create(kind=RANK_BY_FAD, state=state)
        Job.objects.filter(pk=finished.pk).update(updated_at=timezone.now() - timedelta(hours=1))
        assert claim(finished.pk) is None


def test_a_worker_that_lost_its_job_does_not_overwrite_the_outcome(settings):
    job = Job.objects.create(kind=RANK_BY_FAD)
    committed: list[str] = []

    def on_success(job, result):
        committed.append(result["by"])

    def stalls(job, progress):
        # This worker hangs past the stale limit; a redelivery takes the job over and ends it.
        settings.FOLEY_JOB_STALE_S = 0
        Job.objects.filter(pk=job.pk).update(updated_at=timezone.now() - timedelta(seconds=1))
        other = run_job(job.pk, lambda job, progress: {"by": "second"}, on_success=on_success)
        assert other.state == Job.State.SUCCEEDED and other.attempts == 2
        return {"by": "first"}

    final = run_job(job.pk, stalls, on_success=on_success)
    assert final.result == {"by": "second"} and final.attempts == 2
    assert committed == ["second"]  # the first worker's success step never ran
    assert "its outcome was discarded" in final.log


def test_a_refusing_success_step_fails_the_job():
    job = Job.objects.create(kind=RANK_BY_FAD)
    final = run_job(job.pk, lambda job, progress: {"n": 1}, on_success=lambda j, r: "too late")
    assert final.state == Job.State.FAILED and final.error == "too late"
    assert final.result == {"n": 1}


def test_an_exception_fails_the_job_and_keeps_its_log():
    job = Job.objects.create(kind=RANK_BY_FAD)

    def breaks(job, progress):
        progress.log("half-way")
        raise RuntimeError("disk full")

    final = run_job(job.pk, breaks)
    assert final.state == Job.State.FAILED and final.error == "RuntimeError: disk full"
    assert "half-way" in final.log and "Traceback" in final.log


def test_only_a_stale_running_job_is_marked_failed_for_a_retry(settings):
    from stimuli.jobs import fail_if_stale

    settings.FOLEY_JOB_STALE_S = 60
    live = running_job()
    assert fail_if_stale(live).state == Job.State.RUNNING
    Job.objects.filter(pk=live.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    lost = fail_if_stale(live)
    assert lost.state == Job.State.FAILED and lost.error == "the worker was lost"


def our_tasks() -> dict:
    from foley_platform.celery import app

    app.loader.import_default_modules()
    return {
        name: task
        for name, task in app.tasks.items()
        if name.split(".")[0] in ("stimuli", "raters", "scoring")
    }


# What runs submitted code or loads a model waits for a GPU worker.
GPU_KINDS = {
    "generate", "validate_generator", "generate_text", "validate_submission", "embed",
    "clap_prompt_scores", "predictors",
}  # fmt: skip


def test_every_kind_is_one_declared_task_on_its_queue():
    """A kind's declaration (stimuli/job_kinds.py) makes its task, named and queued as declared:
    no routing table to keep in step, and every task of ours is a kind's or the scheduler's."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    from foley_platform.celery import app
    from stimuli.job_kinds import KINDS, task_of

    ours = our_tasks()
    kinds = dict(KINDS)
    assert {"import", "rank_by_fad", "publish_results", "prepare_listening"} <= set(kinds)
    for kind in kinds.values():
        task = task_of(kind.kind)
        assert ours[kind.task].name == task.name == kind.task, kind
        assert app.amqp.router.route({}, task.name)["queue"].name == kind.queue
        assert callable(import_string(kind.run)), kind  # the function the task calls exists
        if kind.retry_guard:
            assert callable(import_string(kind.retry_guard)), kind
        assert kind.label and kind.label != kind.kind
        assert kind.result.__annotations__, kind  # a declared result type, never magic keys
    assert {k for k, kind in kinds.items() if kind.queue == "gpu"} == GPU_KINDS
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert set(ours) == {kind.task for kind in kinds.values()} | scheduled
    assert app.amqp.router.route({}, "stimuli.tasks.remind_deadlines")["queue"].name == "cpu"


def test_the_celery_app_finds_every_task_module():
    """What a worker imports at start (Django's set-up and autodiscovery) holds every task.

    In a fresh process, so that nothing this test run imported already can stand in for it."""
    import json
    import subprocess
    import sys

    from stimuli.job_kinds import KINDS

    script = (
        "import django, json, sys; django.setup()\n"
        "from foley_platform.celery import app\n"
        "app.loader.import_default_modules()\n"
        "print(json.dumps(sorted(app.tasks)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT_DIR, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert {kind.task for kind in KINDS.values()} | {"stimuli.tasks.remind_deadlines"} <= found


def test_a_job_of_an_undeclared_kind_is_refused():
    from stimuli.jobs import create_job

    with pytest.raises(Refused):
        create_job("no_such_kind")


def test_tasks_are_made_only_by_the_declarations():
    """A job's task comes from its kind's declaration, so nothing else in the apps makes one:
    the one periodic task (stimuli/tasks.py) aside."""
    offenders = []
    for package in ("stimuli", "raters", "scoring", "foley_platform"):
        for path in (ROOT_DIR / package).rglob("*.py"):
            relative = str(path.relative_to(ROOT_DIR))
            if relative in ("stimuli/job_kinds.py", "stimuli/tasks.py"):
                continue
            text = path.read_text()
            if "shared_task" in text or "@app.task" in text:
                offenders.append(relative)
    assert offenders == []
