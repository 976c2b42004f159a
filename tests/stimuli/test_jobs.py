"""Running a job: exactly one worker claims it; a second delivery leaves a live job alone, a job
whose worker died is taken over, and a worker that lost its job records nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from stimuli.jobs import claim, run_job
from stimuli.models import Job
from tests import ROOT_DIR

pytestmark = pytest.mark.django_db


def running_job(**fields) -> Job:
    return Job.objects.create(kind=Job.Kind.FAD, state=Job.State.RUNNING, attempts=1, **fields)


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
    queued = Job.objects.create(kind=Job.Kind.FAD)
    assert claim(queued.pk).attempts == 1
    assert claim(queued.pk) is None  # now running, with a fresh heartbeat
    for state in (Job.State.SUCCEEDED, Job.State.FAILED):
        finished = Job.objects.create(kind=Job.Kind.FAD, state=state)
        Job.objects.filter(pk=finished.pk).update(updated_at=timezone.now() - timedelta(hours=1))
        assert claim(finished.pk) is None


def test_a_worker_that_lost_its_job_does_not_overwrite_the_outcome(settings):
    job = Job.objects.create(kind=Job.Kind.FAD)
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
    job = Job.objects.create(kind=Job.Kind.FAD)
    final = run_job(job.pk, lambda job, progress: {"n": 1}, on_success=lambda j, r: "too late")
    assert final.state == Job.State.FAILED and final.error == "too late"
    assert final.result == {"n": 1}


def test_an_exception_fails_the_job_and_keeps_its_log():
    job = Job.objects.create(kind=Job.Kind.FAD)

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


# Every module that defines Celery tasks: each app's own, and each stage package's of stimuli.
TASK_MODULES = (
    "stimuli.uploads.tasks",
    "stimuli.objective.tasks",
    "stimuli.generators.tasks",
    "stimuli.submissions.tasks",
    "raters.tasks",
    "scoring.tasks",
)


def our_tasks() -> dict:
    import importlib

    from foley_platform.celery import app

    for module in TASK_MODULES:
        importlib.import_module(module)
    return {
        name: task
        for name, task in app.tasks.items()
        if name.split(".")[0] in ("stimuli", "raters", "scoring")
    }


def test_every_task_is_routed_by_its_exact_name():
    """A renamed or new task without a route fails here instead of drifting to another queue."""
    from django.conf import settings

    from foley_platform.celery import app

    ours = our_tasks()
    assert set(ours) == set(settings.CELERY_TASK_ROUTES)  # every routed name is a task, and back
    for name, task in ours.items():
        # An explicit name= (a task named by default would be named after its module's path,
        # and would change name whenever its module moved).
        assert task.name == name and task.__module__ in TASK_MODULES
        queue = app.amqp.router.route({}, name)["queue"].name
        assert queue == settings.CELERY_TASK_ROUTES[name]["queue"] in ("cpu", "gpu")
    gpu = {name for name, route in settings.CELERY_TASK_ROUTES.items() if route["queue"] == "gpu"}
    assert gpu == {
        "stimuli.tasks.generate_clips",
        "stimuli.tasks.generate_validation",
        "stimuli.tasks.generate_from_text",
        "stimuli.tasks.embed_clips",
        "stimuli.tasks.clap_prompt_scores",
        "stimuli.tasks.check_submission",
    }


def test_the_celery_app_finds_every_task_module():
    """What a worker imports at start (autodiscovery) holds every task, stage packages included.

    In a fresh process, so that nothing this test run imported already can stand in for it."""
    import json
    import subprocess
    import sys

    from django.conf import settings

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
    assert set(settings.CELERY_TASK_ROUTES) <= found


def test_every_kind_of_job_names_a_registered_task_and_every_task_a_kind():
    """The registry (each app's ready()) is how jobs find their tasks: enqueue and retry."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    from stimuli.job_kinds import KINDS

    ours = our_tasks()
    kinds = dict(KINDS)
    assert {k for k in Job.Kind.values} <= set(kinds)
    assert {"publish_results", "prepare_listening"} <= set(kinds)
    for kind in kinds.values():
        # Where the registry imports it from is a task carrying the registered, routed name.
        task = import_string(kind.where)
        assert task.name == kind.task and kind.task in settings.CELERY_TASK_ROUTES, kind
        assert kind.label and kind.label != kind.kind
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert set(ours) == {kind.task for kind in kinds.values()} | scheduled


def test_no_service_imports_a_task_module():
    """Services enqueue by kind; only the task modules (and the worker) import tasks."""
    import ast

    root = ROOT_DIR
    offenders = []
    for package in ("stimuli", "raters", "scoring"):
        for path in (root / package).rglob("*.py"):
            if path.name == "tasks.py" or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""] + [a.name for a in node.names]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                if any(n == "tasks" or n.endswith(".tasks") for n in names):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
