"""Generation jobs: clips stored per batch, resumed after an interruption, reproducible."""

from __future__ import annotations

import pytest

from stimuli import jobs
from stimuli.errors import Refused
from stimuli.generators import services as generators
from stimuli.generators.services import (
    GenerationError,
    generate_now,
    run_generation,
    start_generation,
)
from stimuli.job_kinds import GENERATE
from stimuli.jobs import is_stale
from stimuli.models import Challenge, Clip, Generator, Job, Medoid
from stimuli.services import create_challenge, create_system, create_team

pytestmark = pytest.mark.sandbox


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
    generators.set_generator(system, module=module, config=config)
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
        generators.set_generator(system, module="not a module")
    team = small_challenge.teams.first()
    bare = create_system(team=team, track=small_challenge.tracks.first(), name="No code")
    with pytest.raises(GenerationError, match="no generator code"):
        start_generation(bare)


def test_second_start_returns_the_queued_job(small_challenge):
    system = make_system(small_challenge, "Once")
    first = start_generation(system, n_per_category=2, enqueue_task=False)
    assert start_generation(system, n_per_category=2, enqueue_task=False).pk == first.pk


def test_baseline_systems_for_the_demo(small_challenge):
    systems = generators.create_baseline_systems(small_challenge)
    assert [s.name for s in systems] == [name for name, _ in generators.BASELINE_VARIANTS]
    assert all(s.generator.state == Generator.State.VALID for s in systems)
    again = generators.create_baseline_systems(small_challenge)  # idempotent
    assert [s.pk for s in again] == [s.pk for s in systems]
    jobs = [
        generators.generate_now(system, 2, 0)
        for system in generators.create_baseline_systems(small_challenge)
    ]
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
    assert system.clips.count() == 0
    with pytest.raises(Refused, match="only a failed job"):
        jobs.retry(again)

    settings.FOLEY_JOB_STALE_S = 0  # now the heartbeat is older than the limit: worker lost
    assert is_stale(Job.objects.get(pk=job.pk))
    job = jobs.retry(Job.objects.get(pk=job.pk))  # organizers can restart it
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED and system.clips.count() == 8


# --- a new generation replaces the old clips only once it succeeded ------------------------------


def test_a_failed_regeneration_keeps_the_clips_of_the_last_good_one(db):
    challenge = create_challenge(
        name="Keep",
        slug="keep",
        clip_duration_s=1.0,
        categories=[("rain", "Rain"), ("gunshot", "Gunshot")],
    )
    system = make_system(challenge, "Kept")
    good = generate_now(system, 2, seed=1)
    assert good.state == Job.State.SUCCEEDED, good.error
    kept = audio_by_name(system)

    # New code: rain works, then gunshot raises part-way through the job.
    Generator.objects.filter(system=system).update(module="tests.generator_fixtures.flaky")
    failed = generate_now(system, 2, seed=2)
    assert failed.state == Job.State.FAILED and "gunshot decoder" in failed.error
    earlier = Clip.objects.filter(system=system, source_job=good)
    assert dict(earlier.values_list("original_name", "audio__sha256")) == kept
    assert Clip.objects.filter(system=system, source_job=failed).count() == 2  # rain, to resume

    # Fixed, the same job resumes; its success replaces the earlier clips in one step.
    Generator.objects.filter(system=system).update(module="stimuli.generators.baseline")
    job = jobs.retry(failed)
    job.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["replaced"] == 4
    assert set(system.clips.values_list("source_job", flat=True)) == {failed.pk}
    assert system.clips.count() == 4


def test_a_rerun_with_the_same_seed_takes_over_the_identical_clips(small_challenge):
    system = make_system(small_challenge, "Same seed")
    first = generate_now(system, 4, seed=1, batch_size=2)
    sounds = audio_by_name(system)
    clip = system.clips.get(original_name="generated/rain/0000.wav")
    Medoid.objects.create(
        challenge=small_challenge, system=system, category=clip.category, clip=clip, position=0
    )
    second = generate_now(system, 4, seed=1, batch_size=2)
    assert second.state == Job.State.SUCCEEDED, second.error
    assert audio_by_name(system) == sounds  # one clip per sound, no "identical" failure
    assert set(system.clips.values_list("source_job", flat=True)) == {second.pk}
    assert Medoid.objects.get().clip_id == clip.pk  # the same row: what refers to it stays
    assert not Clip.objects.filter(source_job=first).exists()


def test_an_older_failed_job_cannot_be_retried_over_a_newer_one(small_challenge):
    system = make_system(small_challenge, "Older")
    Generator.objects.filter(system=system).update(
        module="tests.generator_fixtures.raises", state=Generator.State.PENDING
    )
    old = generate_now(system, 2)
    assert old.state == Job.State.FAILED
    Generator.objects.filter(system=system).update(
        module="stimuli.generators.baseline", state=Generator.State.VALID
    )
    new = generate_now(system, 2, seed=5)
    assert new.state == Job.State.SUCCEEDED
    with pytest.raises(generators.GenerationConflict, match=f"job #{new.pk} .* newer"):
        jobs.retry(old)
    assert Job.objects.get(pk=old.pk).state == Job.State.FAILED
    assert set(system.clips.values_list("source_job", flat=True)) == {new.pk}


# --- the listening test fixes the stimuli ----------------------------------------------------


@pytest.mark.parametrize("phase", [Challenge.Phase.LISTENING, Challenge.Phase.PUBLISHED])
def test_generation_is_refused_once_the_stimuli_are_fixed(small_challenge, phase):
    system = make_system(small_challenge, "Finalist")
    done = generate_now(system, 2)
    clip = system.clips.first()
    Medoid.objects.create(
        challenge=small_challenge, system=system, category=clip.category, clip=clip, position=0
    )
    Challenge.objects.filter(pk=small_challenge.pk).update(phase=phase)
    with pytest.raises(generators.GenerationConflict, match=phase.value[:7]):
        start_generation(system, n_per_category=2)
    failed = Job.objects.create(
        challenge=small_challenge,
        kind=GENERATE,
        state=Job.State.FAILED,
        params={**done.params, "n_per_category": 2},
    )
    with pytest.raises(generators.GenerationConflict, match=phase.value[:7]):
        jobs.retry(failed)
    assert Job.objects.get(pk=failed.pk).state == Job.State.FAILED
    assert system.clips.count() == 4 and Medoid.objects.filter(clip=clip).exists()


def test_a_job_queued_before_the_listening_test_opened_changes_nothing(small_challenge):
    system = make_system(small_challenge, "Queued")
    generate_now(system, 2)
    clips = set(system.clips.values_list("pk", flat=True))
    job = start_generation(system, n_per_category=2, seed=9, enqueue_task=False)
    Challenge.objects.filter(pk=small_challenge.pk).update(phase=Challenge.Phase.LISTENING)
    job = run_generation(job.pk)
    assert job.state == Job.State.FAILED and "listening test is open" in job.error
    assert set(system.clips.values_list("pk", flat=True)) == clips


def test_a_listening_test_opened_during_the_job_keeps_the_earlier_clips(small_challenge):
    system = make_system(small_challenge, "Overtaken")
    generate_now(system, 2)
    clips = set(system.clips.values_list("pk", flat=True))
    job = start_generation(system, n_per_category=2, seed=9, batch_size=1, enqueue_task=False)

    def open_the_test(done, total, message):
        if done == 1:
            Challenge.objects.filter(pk=small_challenge.pk).update(phase="listening")

    job = run_generation(job.pk, echo=open_the_test)
    assert job.state == Job.State.FAILED and "the earlier clips were kept" in job.error
    assert clips <= set(system.clips.values_list("pk", flat=True))


# --- a validation result is about the code it validated ------------------------------------------


def test_a_stale_validation_does_not_judge_newer_code(small_challenge):
    team = create_team(small_challenge, name="Team")
    system = create_system(team=team, track=small_challenge.tracks.first(), name="Swapped")
    generators.set_generator(system, module="stimuli.generators.baseline", validate=False)
    being_validated = Generator.objects.get(system=system)  # what the validation job loaded
    # Meanwhile new, broken code is attached (its own validation is still to come) ...
    generators.set_generator(system, module="tests.generator_fixtures.raises", validate=False)
    # ... and then the old validation finishes: the old code was fine.
    report = generators.validate_generator(being_validated)
    assert report["ok"] is True and report["stale"] is True
    generator = Generator.objects.get(system=system)
    assert generator.module == "tests.generator_fixtures.raises"
    assert generator.state == Generator.State.PENDING and generator.validated_at is None

    # The same with only the settings changed: the verdict was about the old settings.
    generators.set_generator(system, module="stimuli.generators.baseline", validate=False)
    being_validated = Generator.objects.get(system=system)
    generators.set_generator(
        system, module="stimuli.generators.baseline", config={"brightness": 2}, validate=False
    )
    assert generators.validate_generator(being_validated)["stale"] is True
    assert Generator.objects.get(system=system).state == Generator.State.PENDING

    # A validation of the current code is recorded.
    current = Generator.objects.get(system=system)
    assert "stale" not in generators.validate_generator(current)
    assert Generator.objects.get(system=system).validated_at is not None
