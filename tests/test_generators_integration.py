"""Generation on a real Celery worker process, PostgreSQL and Redis."""

from __future__ import annotations

import pytest

from stimuli import generation
from stimuli.models import Generator, Job
from stimuli.services import create_challenge, create_system, create_team
from tests.conftest import wait_for_job

pytestmark = pytest.mark.integration


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
    generation.set_generator(broken, module="tests.generator_fixtures.flaky", validate=False)
    generation.set_generator(good, module="stimuli.generators.baseline", validate=False)
    Generator.objects.update(state=Generator.State.VALID)

    broken_job = generation.start_generation(broken, n_per_category=6, batch_size=3)
    good_job = generation.start_generation(good, n_per_category=6, batch_size=3)
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
    generation.set_generator(system, module="tests.generator_fixtures.nan_output")
    job = Job.objects.get(kind=Job.Kind.VALIDATE_GENERATOR, params__system_id=system.pk)
    job = wait_for_job(job.pk)
    assert job.state == Job.State.FAILED
    generator = Generator.objects.get(system=system)
    assert generator.state == Generator.State.INVALID
    assert generator.report["problems"][0]["code"] == "not_finite"
