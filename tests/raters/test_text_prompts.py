"""The text-prompt protocol's study, draws, generation and answers (services, PostgreSQL,
in-process tasks; one test on a real Celery worker)."""

from __future__ import annotations

import time

import pytest
from django.db import IntegrityError, transaction

from raters import text_prompts
from raters.errors import ListeningError
from raters.models import (
    DescriptionAnswer,
    PromptAnswer,
    PromptSet,
    RealismAnswer,
    TextPromptStudy,
    TextTrial,
)
from stimuli.generators import text_prompts as text_generation
from stimuli.models import DescribedClip, Job, TextClip, TextGeneration
from stimuli.services import create_challenge
from tests.listening_setup import deliver
from tests.text_prompt_setup import build_text_study, reference_folder, text_system

pytestmark = [pytest.mark.django_db, pytest.mark.sandbox]

KEYS = iter(f"key-{n:06d}" for n in range(10**6))


def key() -> str:
    return next(KEYS)


def _challenge(slug: str = "refs"):
    return create_challenge(
        name=slug,
        slug=slug,
        categories=[("dog_bark", "Dog bark"), ("rain", "Rain")],
        clip_duration_s=0.5,
        sample_rate=8000,
    )


def test_reference_set_is_stored_with_its_descriptions(tmp_path):
    challenge = _challenge()
    folder, csv_text = reference_folder(challenge, tmp_path / "ref", count=4)
    assert text_generation.import_described_clips(challenge, folder, csv_text) == 4
    texts = dict(DescribedClip.objects.values_list("name", "text"))
    assert texts["dog_bark/000.wav"] == "a dog barks twice (0)"
    assert len(texts) == 4


def test_a_csv_naming_a_missing_file_stores_nothing(tmp_path):
    challenge = _challenge()
    folder, csv_text = reference_folder(challenge, tmp_path / "ref", count=4)
    csv_text += "rain/999.wav,thunder\n"
    with pytest.raises(
        text_generation.TextPromptError, match=r"rain/999\.wav is not in the upload"
    ):
        text_generation.import_described_clips(challenge, folder, csv_text)
    assert not DescribedClip.objects.exists()
    long = csv_text.replace("(3)", "x" * 300)
    with pytest.raises(text_generation.TextPromptError, match="more than 300 characters"):
        text_generation.import_described_clips(challenge, folder, long)
    # A file without a description is refused the same way.
    lines = csv_text.splitlines()[:-2]
    with pytest.raises(text_generation.TextPromptError, match="no description in the CSV"):
        text_generation.import_described_clips(challenge, folder, "\n".join(lines))
    assert not DescribedClip.objects.exists()


def test_a_system_without_generate_from_text_cannot_join_a_study(tmp_path):
    challenge = _challenge()
    plain = text_system(challenge, "Tones", "tests.generator_fixtures.good")
    assert plain.generator.state == "valid"
    with pytest.raises(ListeningError, match="has no generate_from_text function"):
        text_prompts.create_study(challenge, [plain])
    assert not TextPromptStudy.objects.exists()


def test_study_counts_default_to_the_protocol_and_are_checked_by_the_database(tmp_path):
    _, study, _ = build_text_study(tmp_path, judges=10)
    fresh = TextPromptStudy(challenge=_challenge("other"))
    assert (fresh.judges, fresh.interpretability_clips, fresh.realism_clips) == (10, 10, 10)
    assert (fresh.prompts, fresh.clips_per_prompt) == (10, 5)
    with pytest.raises(IntegrityError), transaction.atomic():
        TextPromptStudy.objects.filter(pk=study.pk).update(clips_per_prompt=0)


def test_a_judge_draws_seeded_clips_and_gets_them_generated(tmp_path):
    _, study, system = build_text_study(tmp_path)
    judge = text_prompts.invite_judge(study)
    assert judge.system == system
    text_prompts.start(judge)
    text_prompts.start(judge)  # a second start draws nothing more
    interp = list(TextTrial.objects.filter(judge=judge, test="interpretability"))
    realism = list(TextTrial.objects.filter(judge=judge, test="realism"))
    assert [t.is_real for t in interp] == [True] * 3 + [False] * 3
    assert sorted(t.is_real for t in realism) == [False, False, True, True]
    described = set(DescribedClip.objects.values_list("text", flat=True))
    assert all(t.text in described for t in interp + realism)
    # Generated without a broker at once: every generated trial's request is done.
    assert set(
        TextGeneration.objects.filter(trials__judge=judge).values_list("state", flat=True)
    ) == {"done"}
    step = text_prompts.next_step(judge)
    assert step.test == "interpretability" and step.trial.position == 0 and not step.waiting
    # The draws are the judge's seed's: another judge with the same seed draws the same texts.
    other = text_prompts.invite_judge(study)
    other.seed = judge.seed
    other.save()
    text_prompts.start(other)
    assert [t.text for t in TextTrial.objects.filter(judge=other)] == [
        t.text for t in TextTrial.objects.filter(judge=judge)
    ]


def _take_first_two_tests(judge) -> None:
    while (step := text_prompts.next_step(judge)).test == "interpretability":
        text_prompts.save_description(judge, step.trial.token, text="a noise", key=key())
    assert step.test == "reveal"
    for trial in text_prompts.reveal_rows(judge):
        text_prompts.save_mark(judge, trial.token, correct="yes", key=key())
    text_prompts.submit_marks(judge)
    while (step := text_prompts.next_step(judge)).test == "realism":
        text_prompts.save_realism(judge, step.trial.token, says_real="real", key=key())


def test_answers_are_stored_once_and_in_order(tmp_path):
    _, study, _ = build_text_study(tmp_path)
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    first, second = TextTrial.objects.filter(judge=judge, test="interpretability")[:2]
    with pytest.raises(ListeningError, match="in the order"):
        text_prompts.save_description(judge, second.token, text="x", key=key())
    k = key()
    answer, created = text_prompts.save_description(judge, first.token, text="a dog", key=k)
    again, created_again = text_prompts.save_description(judge, first.token, text="a cat", key=k)
    assert created and not created_again and again.pk == answer.pk and again.text == "a dog"
    with pytest.raises(ListeningError, match="already described"):
        text_prompts.save_description(judge, first.token, text="a cat", key=key())
    with pytest.raises(ListeningError, match="another item"):
        text_prompts.save_description(judge, second.token, text="a cat", key=k)
    assert DescriptionAnswer.objects.filter(trial__judge=judge).count() == 1
    # The true texts show only once every sound is described.
    with pytest.raises(ListeningError, match="once every sound is described"):
        text_prompts.reveal_rows(judge)
    with pytest.raises(IntegrityError), transaction.atomic():
        DescriptionAnswer.objects.create(trial=first, text="twice", idempotency_key=key())


def test_prompts_make_sets_and_one_answer_each(tmp_path):
    _, study, _ = build_text_study(tmp_path)
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    with pytest.raises(ListeningError, match="after the first two tests"):
        text_prompts.submit_prompt(judge, "a dog", key=key())
    _take_first_two_tests(judge)
    assert RealismAnswer.objects.filter(trial__judge=judge).count() == 4
    k = key()
    prompt_set, created = text_prompts.submit_prompt(judge, "a dog barking in the rain", key=k)
    same, created_again = text_prompts.submit_prompt(judge, "a dog barking in the rain", key=k)
    assert created and not created_again and same.pk == prompt_set.pk
    step = text_prompts.next_step(judge)
    assert step.test == "prompt" and step.prompt_set == prompt_set and not step.waiting
    assert prompt_set.clips.count() == 3
    text_prompts.save_prompt_answer(
        judge, prompt_set.token, match="yes", quality="4", diversity="2", key=key()
    )
    with pytest.raises(ListeningError, match="already answered"):
        text_prompts.save_prompt_answer(
            judge, prompt_set.token, match="no", quality="1", diversity="1", key=key()
        )
    with pytest.raises(ListeningError, match="from 1 to 5"):
        text_prompts.save_prompt_answer(
            judge, prompt_set.token, match="no", quality="6", diversity="1", key=key()
        )
    text_prompts.submit_prompt(judge, "footsteps on gravel", key=key())
    with pytest.raises(ListeningError, match="your 2 prompts"):
        text_prompts.submit_prompt(judge, "one too many", key=key())


def test_a_failed_prompt_is_reported_and_loses_no_other_answer(tmp_path):
    _, study, _ = build_text_study(tmp_path, module="tests.generator_fixtures.text_fails")
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    _take_first_two_tests(judge)
    failed, _ = text_prompts.submit_prompt(judge, "make it explode", key=key())
    good, _ = text_prompts.submit_prompt(judge, "a dog barks", key=key())
    failed.generation.refresh_from_db()
    assert failed.generation.state == "failed"
    assert "cannot make that sound" in failed.generation.error
    # The judge is told, and the failed prompt does not count towards their number.
    assert text_prompts.next_step(judge).prompt_set == good
    assert good.clips.count() == 3
    assert text_prompts.failed_counts(judge)["prompt"] == 1
    assert text_prompts.prompts_counted(judge) == 1
    # The organizer sees which prompt failed, for which judge and why.
    [row] = text_prompts.failures(study)
    assert row["prompt"] == "make it explode" and row["judge"] == judge.rater.code
    assert "cannot make that sound" in row["error"]
    with pytest.raises(ListeningError, match="not ready"):
        text_prompts.save_prompt_answer(
            judge, failed.token, match="yes", quality="3", diversity="3", key=key()
        )
    # Everything answered before is still there.
    assert DescriptionAnswer.objects.filter(trial__judge=judge).count() == 6
    assert RealismAnswer.objects.filter(trial__judge=judge).count() == 4


@pytest.mark.parametrize("module", ["baseline", "text_fails"])
def test_pending_prompts_of_all_judges_are_served_in_one_call(tmp_path, module):
    from foley_platform.celery import app

    path = (
        "stimuli.generators.baseline"
        if module == "baseline"
        else f"tests.generator_fixtures.{module}"
    )
    _, _, system = build_text_study(tmp_path, module=path)
    prompts = ["a dog barks", "rain on a roof", "let it explode", "a car passes"]
    requests = [text_generation.new_generation(system, p, 5, n) for n, p in enumerate(prompts)]
    # With a broker the task is sent when the transaction commits, which a test never does: the
    # job stays queued, as it does while the worker is busy.
    app.conf.task_always_eager = False
    try:
        jobs = text_generation.dispatch([system.pk, system.pk])
    finally:
        app.conf.task_always_eager = True
    assert len(jobs) == 1 and jobs[0].state == Job.State.QUEUED
    job = text_generation.run_text_job(jobs[0].pk)
    served = TextGeneration.objects.filter(pk__in=[r.pk for r in requests]).order_by("pk")
    if module == "baseline":
        # One generator call for the prompts of every judge.
        assert job.result["calls"] == 1 and job.result["served"] == 4
        assert set(served.values_list("state", "job")) == {("done", job.pk)}
        # Each prompt's clips are the ones it gets alone (the same sounds, stored once).
        alone = text_generation.new_generation(system, "rain on a roof", 5, 1)
        text_generation.generate_now([system.pk])
        assert list(alone.clips.values_list("audio", flat=True)) == list(
            requests[1].clips.values_list("audio", flat=True)
        )
    else:
        # The failed call is tried prompt by prompt: only the prompt at fault fails.
        assert job.result["calls"] == 1 + 4 and job.result["failed"] == 1
        assert list(served.values_list("state", flat=True)) == ["done", "done", "failed", "done"]
    assert TextClip.objects.filter(generation__in=served).count() == (
        20 if module == "baseline" else 15
    )


@pytest.mark.integration
def test_prompts_are_generated_on_the_gpu_queue_worker(celery_worker, tmp_path):
    _, study, _ = build_text_study(tmp_path, slug="text-worker")
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    deadline = time.monotonic() + 120
    while TextGeneration.objects.filter(trials__judge=judge, state="pending").exists():
        assert time.monotonic() < deadline, celery_worker.log()
        time.sleep(0.2)
    assert not TextGeneration.objects.filter(trials__judge=judge, state="failed").exists()
    assert TextTrial.objects.filter(judge=judge, audio__isnull=True).count() == 5
    text_prompts.collect(judge)
    assert not TextTrial.objects.filter(judge=judge, audio__isnull=True).exists()
    assert PromptSet.objects.count() == PromptAnswer.objects.count() == 0


def test_the_demo_study_runs_on_the_baselines_text_variant():
    from raters.demo import open_text_study
    from raters.models import Rater
    from stimuli.demo import seed_text_demo

    challenge, created = seed_text_demo(per_category=2)
    assert created and challenge.described_clips.count() == 14
    path = open_text_study(challenge)
    assert open_text_study(challenge) == path  # the same judge until they begin
    rater = Rater.objects.get(access_key=path.rstrip("/").rsplit("/", 1)[1])
    judge = rater.text_judge
    text_prompts.start(judge)
    assert not TextGeneration.objects.filter(trials__judge=judge).exclude(state="done").exists()
    assert text_prompts.next_step(judge).test == "interpretability"
    assert open_text_study(challenge) != path  # a started judge's link is not handed out again


def test_realism_waits_for_all_its_clips_so_waiting_tells_nothing(tmp_path):
    _, study, _ = build_text_study(tmp_path)
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    while (step := text_prompts.next_step(judge)).test == "interpretability":
        text_prompts.save_description(judge, step.trial.token, text="a noise", key=key())
    for trial in text_prompts.reveal_rows(judge):
        text_prompts.save_mark(judge, trial.token, correct="no", key=key())
    text_prompts.submit_marks(judge)
    # The last generated realism clip is still being made (as on a busy worker).
    late = TextTrial.objects.filter(judge=judge, test="realism", is_real=False).last()
    TextTrial.objects.filter(pk=late.pk).update(audio=None)
    TextGeneration.objects.filter(pk=late.generation_id).update(state="pending", finished_at=None)
    TextClip.objects.filter(generation_id=late.generation_id).delete()
    step = text_prompts.next_step(judge)
    assert step.test == "realism" and step.waiting
    with pytest.raises(ListeningError, match="No such audio"):
        deliver(judge.rater, late.token)
    text_generation.generate_now([judge.system_id])
    step = text_prompts.next_step(judge)
    assert step.test == "realism" and not step.waiting


def test_a_set_still_being_made_does_not_hold_up_a_later_one(tmp_path):
    _, study, _ = build_text_study(tmp_path)
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    _take_first_two_tests(judge)
    slow, _ = text_prompts.submit_prompt(judge, "a slow one", key=key())
    quick, _ = text_prompts.submit_prompt(judge, "a quick one", key=key())
    text_prompts.next_step(judge)
    # The first prompt's clips are still being made (as on a busy worker).
    slow.clips.all().delete()
    TextClip.objects.filter(generation_id=slow.generation_id).delete()
    TextGeneration.objects.filter(pk=slow.generation_id).update(state="pending", finished_at=None)
    step = text_prompts.next_step(judge)
    assert step.prompt_set == quick and not step.waiting
    text_prompts.save_prompt_answer(
        judge, quick.token, match="no", quality="2", diversity="2", key=key()
    )
    step = text_prompts.next_step(judge)
    assert step.prompt_set == slow and step.waiting
