"""Publishing on PostgreSQL: a real worker runs the publish job, and concurrent publications
get consecutive numbers."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from django.db import connection

from scoring import services
from scoring.job_kinds import PUBLISH
from scoring.models import Snapshot
from stimuli.models import Job
from stimuli.services import create_challenge
from tests.conftest import wait_for_job
from tests.simulate import simulate

pytestmark = [pytest.mark.integration]


def test_a_worker_runs_the_publish_job(celery_worker, organizer):
    challenge = create_challenge(name="Publish", slug="publish")
    job = services.request_publication(challenge, organizer)
    job = wait_for_job(job.pk)
    assert job.kind == PUBLISH
    if importlib.util.find_spec("raters.selectors") is None:
        assert job.state == Job.State.FAILED, celery_worker.log()
        assert "raters.selectors is missing" in job.error
        assert not Snapshot.objects.exists()
    else:
        assert job.state == Job.State.SUCCEEDED, (job.error, celery_worker.log())
        assert Snapshot.objects.get(challenge=challenge).job_id == job.pk


@pytest.mark.django_db(transaction=True)
def test_concurrent_publications_get_consecutive_numbers(organizer):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks")
    challenge = create_challenge(name="Race", slug="race")
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 20
    settings.save()
    inputs = simulate(systems_per_track=2, categories=2, sounds=2, raters=3, seed=1).inputs
    barrier = threading.Barrier(3)
    errors: list[Exception] = []

    def run():
        try:
            barrier.wait()
            services.publish(challenge, organizer, inputs)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    numbers = sorted(Snapshot.objects.filter(challenge=challenge).values_list("number", flat=True))
    assert numbers == [1, 2, 3]
