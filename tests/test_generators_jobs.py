"""Generation jobs: clips stored per batch, resumed after an interruption, reproducible."""

from __future__ import annotations

import pytest

from stimuli import generation
from stimuli.generation import GenerationError, generate_now, run_generation, start_generation
from stimuli.models import Clip, Generator, Job
from stimuli.services import create_challenge, create_system, create_team


class WorkerLost(BaseException):
    """Stands for the worker dying: not an Exception, so the job stays running."""


@pytest.fixture
def small_challenge(db):
    # One-second clips of two categories keep the jobs short.
    return create_challenge(
        name="Small",
        slug="small",
        clip_duration_s=1.0,
        categories=[("rain", "Rain"), ("dog_bark", "Dog bark")],
    )


def make_system(challenge, name, module="stimuli.generators.baseline", config=None):
    team = challenge.teams.first() or create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.first(), name=name)
    generation.set_generator(system, module=module, config=config)
    return system


def audio_by_name(system) -> dict[str, str]:
    return dict(system.clips.values_list("original_name", "audio__sha256"))


def test_generation_stores_clips_with_the_spec(small_challenge):
    system = make_system(small_challenge, "Baseline")
    assert system.generator.state == Generator.State.VALID
    job = generate_now(system, 12, seed=3, batch_size=5)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["clips"] == 24 and job.done == 24
    clips = Clip.objects.filter(system=system)
    assert clips.count() == 24
    assert set(clips.values_list("source_job", flat=True)) == {job.pk}
    assert set(clips.values_list("role", flat=True)) == {Clip.Role.SYSTEM}
    audio = clips.first().audio
    assert (audio.sample_rate, audio.frames, audio.channels) == (22_050, 22_050, 1)
    assert "rain: clips 11-12 stored" in job.log
    assert "sandbox network:" in job.log


def test_interrupted_job_resumes_at_61_with_identical_audio(small_challenge, settings):
    settings.FOLEY_JOB_STALE_S = 0  # the interrupted run's heartbeat counts as lost at once
    system = make_system(small_challenge, "Interrupted")
    job = start_generation(system, n_per_category=100, seed=7, batch_size=10, enqueue_task=False)

    def die_at_60(done, total, message):
        if done >= 60:
            raise WorkerLost()

    with pytest.raises(WorkerLost):
        run_generation(job.pk, echo=die_at_60)
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING  # as a dead worker leaves it; Celery redelivers
    assert system.clips.count() == 60
    assert system.clips.filter(category__slug="rain").count() == 60  # stored per batch

    job = run_generation(job.pk)  # the redelivered task
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.attempts == 2
    assert "resuming: 60 of 200 clips already stored" in job.log
    second_run = job.log.split("resuming:")[1]
    first_stored = next(line for line in second_run.splitlines() if "stored (seed" in line)
    assert "rain: clips 61-70 stored" in first_stored
    assert system.clips.count() == 200

    # The same generator and seed, uninterrupted, gives the same audio clip for clip.
    fresh = make_system(small_challenge, "Uninterrupted")
    assert generate_now(fresh, 100, seed=7, batch_size=10).state == Job.State.SUCCEEDED
    assert audio_by_name(fresh) == audio_by_name(system)


def test_seed_changes_the_audio_and_a_rerun_replaces_the_old_clips(small_challenge):
    system = make_system(small_challenge, "Seeded")
    generate_now(system, 4, seed=1, batch_size=2)
    first = audio_by_name(system)
    job = generate_now(system, 4, seed=2, batch_size=2)
    second = audio_by_name(system)
    assert len(second) == 8 and set(first) == set(second)
    assert not set(first.values()) & set(second.values())
    assert set(system.clips.values_list("source_job", flat=True)) == {job.pk}


def test_variants_differ(small_challenge):
    plain = make_system(small_challenge, "Plain")
    bright = make_system(small_challenge, "Bright", config={"brightness": 0.9, "density": 2.0})
    generate_now(plain, 2, seed=0)
    generate_now(bright, 2, seed=0)
    assert not set(audio_by_name(plain).values()) & set(audio_by_name(bright).values())


def test_failing_generator_ends_failed_with_its_log(small_challenge):
    system = make_system(small_challenge, "Flaky", module="tests.generator_fixtures.raises")
    assert system.generator.state == Generator.State.INVALID
    with pytest.raises(GenerationError, match="failed validation"):
        start_generation(system)
    # Forced past validation, the job itself fails cleanly and stores nothing.
    Generator.objects.filter(system=system).update(state=Generator.State.PENDING)
    job = generate_now(system, 4, seed=0)
    assert job.state == Job.State.FAILED
    assert "[exception]" in job.error and "KeyError" in job.error
    assert "raises.py" in job.log  # the traceback's tail
    assert system.clips.count() == 0


def test_bad_requests_are_refused(small_challenge):
    system = make_system(small_challenge, "Refused")
    with pytest.raises(GenerationError, match="clips per category"):
        start_generation(system, n_per_category=0)
    with pytest.raises(GenerationError, match="not a module path"):
        generation.set_generator(system, module="not a module")
    team = small_challenge.teams.first()
    bare = create_system(team=team, track=small_challenge.tracks.first(), name="No code")
    with pytest.raises(GenerationError, match="no generator code"):
        start_generation(bare)


def test_second_start_returns_the_queued_job(small_challenge):
    system = make_system(small_challenge, "Once")
    first = start_generation(system, n_per_category=2, enqueue_task=False)
    assert start_generation(system, n_per_category=2, enqueue_task=False).pk == first.pk


def test_baseline_systems_for_the_demo(small_challenge):
    systems = generation.create_baseline_systems(small_challenge)
    assert [s.name for s in systems] == [name for name, _ in generation.BASELINE_VARIANTS]
    assert all(s.generator.state == Generator.State.VALID for s in systems)
    again = generation.create_baseline_systems(small_challenge)  # idempotent
    assert [s.pk for s in again] == [s.pk for s in systems]
    jobs = generation.generate_baseline_systems(small_challenge, 2, seed=0)
    assert [job.state for job in jobs] == [Job.State.SUCCEEDED] * 3
    sounds = [set(audio_by_name(s).values()) for s in systems]
    assert not sounds[0] & sounds[1] and not sounds[1] & sounds[2]


def test_identical_clips_fail_validation_and_generation(small_challenge):
    system = make_system(small_challenge, "Constant", module="tests.generator_fixtures.constant")
    report = Generator.objects.get(system=system).report
    assert [p["code"] for p in report["problems"]] == ["identical_clips"]
    Generator.objects.filter(system=system).update(state=Generator.State.PENDING)
    job = generate_now(system, 4, seed=0, batch_size=2)
    assert job.state == Job.State.FAILED
    assert "is identical to generated/rain/0000.wav" in job.error
    assert system.clips.count() == 0  # the batch is stored whole or not at all


def test_module_missing_on_the_worker_fails_the_job(small_challenge):
    system = make_system(small_challenge, "Gone")
    Generator.objects.filter(system=system).update(module="no_such_package.generator")
    job = generate_now(system, 2)
    assert job.state == Job.State.FAILED and "[import]" in job.error


def test_a_second_delivery_leaves_a_live_job_alone_and_a_stale_one_is_resumed(
    small_challenge, settings
):
    system = make_system(small_challenge, "Delivered twice")
    job = start_generation(system, n_per_category=4, batch_size=2, enqueue_task=False)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, attempts=1)
    again = run_generation(job.pk)  # a redelivery while the first worker's heartbeat is fresh
    assert again.state == Job.State.RUNNING and again.attempts == 1
    assert "second delivery" in again.log and system.clips.count() == 0
    with pytest.raises(GenerationError, match="only a failed job"):
        generation.retry(again)

    settings.FOLEY_JOB_STALE_S = 0  # now the heartbeat is older than the limit: worker lost
    assert generation.is_stale(Job.objects.get(pk=job.pk))
    job = generation.retry(Job.objects.get(pk=job.pk))  # organizers can restart it
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED and system.clips.count() == 8
