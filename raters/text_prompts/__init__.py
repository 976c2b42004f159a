"""The text-prompt protocol: a study of text-conditioned systems, its judges and their three
tests (interpretability, realism, the judges' own prompts), with answers stored exactly once.

A second kind of listening test beside the DCASE one: judges are raters of the challenge,
coming in through the same invitation links and rater cookies; their sounds are served by
token through `listening.serve_audio`, with the same listening checks; answers carry request keys
and unique constraints as ratings do, and a judge resumes at the first item without an answer.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from stimuli.generators import text_prompts as text_generation
from stimuli.models import Challenge, DescribedClip, System, TextGeneration

from .. import delivery, enrolment, listening, selectors, sessions
from ..errors import ListeningError
from ..models import (
    MATCH_ANSWERS,
    DescriptionAnswer,
    DescriptionMark,
    PromptAnswer,
    PromptClip,
    PromptSet,
    Rater,
    RealismAnswer,
    TextJudge,
    TextPromptStudy,
    TextTrial,
)

INTERPRETABILITY = TextTrial.Test.INTERPRETABILITY
REALISM = TextTrial.Test.REALISM
MAX_DESCRIPTION_CHARS = 500
# What a judge is told of a prompt the system failed on: the reason (which may name the system's
# code) is for organizers only.
FAILED_FOR_JUDGE = (
    "The sounds for this prompt could not be generated. It does not count: please type another."
)


# --- The study -----------------------------------------------------------------------------------


def study_of(challenge: Challenge) -> TextPromptStudy | None:
    return TextPromptStudy.objects.filter(challenge=challenge).first()


def _refuse_incapable(challenge: Challenge, systems: list[System]) -> None:
    for system in systems:
        if system.challenge_id != challenge.pk:
            raise ListeningError(f"System '{system.name}' belongs to another challenge.")
        reason = text_generation.text_capable(system)
        if reason:
            raise ListeningError(f"'{system.name}' cannot be added to the study: {reason}.")


def create_study(
    challenge: Challenge,
    systems: list[System],
    *,
    judges: int = 10,
    interpretability_clips: int = 10,
    realism_clips: int = 10,
    prompts: int = 10,
    clips_per_prompt: int = 5,
) -> TextPromptStudy:
    """A text-prompt study of `challenge` with its text-conditioned systems (a system whose
    generator has no `generate_from_text` is refused, and nothing is stored)."""
    if not systems:
        raise ListeningError("A text-prompt study needs at least one system.")
    _refuse_incapable(challenge, systems)
    with transaction.atomic():
        Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if TextPromptStudy.objects.filter(challenge=challenge).exists():
            raise ListeningError("This challenge has a text-prompt study already.", 409)
        study = TextPromptStudy(
            challenge=challenge,
            judges=judges,
            interpretability_clips=interpretability_clips,
            realism_clips=realism_clips,
            prompts=prompts,
            clips_per_prompt=clips_per_prompt,
        )
        try:
            with transaction.atomic():
                study.save()
        except IntegrityError:
            raise ListeningError(
                "Counts out of range: judges 1-1000, interpretability clips 1-50, realism clips "
                "2-50, prompts 1-50, clips per prompt 1-20."
            ) from None
        study.systems.set(systems)
    return study


def add_system(study: TextPromptStudy, system: System) -> None:
    _refuse_incapable(study.challenge, [system])
    study.systems.add(system)


def set_gold_clips(study: TextPromptStudy, names: list[str]) -> None:
    """The realism test's gold clips, by their file names: all named clips or none; fixed once
    a judge has begun (the judges' draws hold them)."""
    with transaction.atomic():
        TextPromptStudy.objects.select_for_update(no_key=True).get(pk=study.pk)
        if TextJudge.objects.filter(study=study, started_at__isnull=False).exists():
            raise ListeningError("Judges have begun: the gold clips can no longer change.", 409)
        clips = list(DescribedClip.objects.filter(challenge=study.challenge, name__in=names))
        missing = sorted(set(names) - {c.name for c in clips})
        if missing:
            raise ListeningError(f"No described clip named: {', '.join(missing)}.")
        study.gold_clips.set(clips)


def reference_needed(study: TextPromptStudy) -> int:
    """Described clips a judge draws: the real interpretability clips and about half the
    realism clips."""
    return study.interpretability_clips + study.realism_clips - study.realism_clips // 2


def set_open(study: TextPromptStudy, is_open: bool) -> TextPromptStudy:
    if (
        is_open
        and Challenge.objects.filter(
            pk=study.challenge_id, phase=Challenge.Phase.PUBLISHED
        ).exists()
    ):
        # As the listening test: every publication of a challenge is of the same answers.
        raise ListeningError(
            "Results are published, so the text-prompt study stays closed: every publication "
            "must be of the same answers. Run another study in a new challenge.",
            409,
        )
    if is_open:
        have = DescribedClip.objects.filter(challenge=study.challenge).count()
        if have < reference_needed(study):
            raise ListeningError(
                f"The reference set has {have} described clips; each judge draws "
                f"{reference_needed(study)}. Upload more, or lower the counts.",
                409,
            )
        if not study.systems.exists():
            raise ListeningError("The study has no system.", 409)
    TextPromptStudy.objects.filter(pk=study.pk).update(is_open=is_open)
    study.refresh_from_db()
    return study


def invite_judge(study: TextPromptStudy, *, label: str = "") -> TextJudge:
    """A judge: an invited rater of the challenge, given the study's systems in turn."""
    with transaction.atomic():
        TextPromptStudy.objects.select_for_update(no_key=True).get(pk=study.pk)
        count = TextJudge.objects.filter(study=study).count()
        if count >= study.judges:
            raise ListeningError(f"The study has its {study.judges} judges already.", 409)
        systems = list(study.systems.order_by("pk"))
        if not systems:
            raise ListeningError("The study has no system.", 409)
        rater = enrolment.invite(study.challenge, label=label or f"judge {count + 1}")
        return TextJudge.objects.create(
            study=study, rater=rater, system=systems[count % len(systems)]
        )


def judge_of(rater: Rater) -> TextJudge | None:
    return TextJudge.objects.filter(rater=rater).select_related("study", "system").first()


# --- A judge's draws -----------------------------------------------------------------------------


def _seed(judge: TextJudge, *parts) -> int:
    digest = hashlib.sha256(":".join(map(str, (judge.seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**62 - 1)


def start(judge: TextJudge) -> None:
    """Draw the judge's clips and ask for the generated ones (once; a second call does nothing).

    The rule, seeded per judge: real clips drawn from the reference set; generated clips made
    from descriptions drawn from the reference set too (as in training), each from its own text.
    """
    study = judge.study
    if not study.is_open:
        raise ListeningError("The text-prompt study is not open.", 409)
    with transaction.atomic():
        locked = TextJudge.objects.select_for_update(no_key=True).get(pk=judge.pk)
        if locked.started_at is not None:
            return
        pool = list(DescribedClip.objects.filter(challenge=study.challenge).order_by("pk"))
        # The gold clips are heard only as the realism test's gold item (`_with_gold`).
        gold = list(study.gold_clips.order_by("pk"))
        pool = [clip for clip in pool if clip not in gold]
        rng = random.Random(_seed(judge, "draw"))
        k, r = study.interpretability_clips, study.realism_clips
        real_n = r // 2
        if len(pool) < k + real_n:
            raise ListeningError("The reference set is too small for this study.", 409)
        drawn = rng.sample(pool, k + real_n)
        texts = [clip.text for clip in rng.sample(pool, min(len(pool), k + r - real_n))]
        while len(texts) < k + r - real_n:
            texts.append(rng.choice(pool).text)
        kinds = [True] * real_n + [False] * (r - real_n)
        rng.shuffle(kinds)
        drawn = _with_gold(judge, gold, drawn, k)
        rows = [_real(judge, INTERPRETABILITY, n, clip) for n, clip in enumerate(drawn[:k])]
        for n, text in enumerate(texts[:k]):
            rows.append(_generated(judge, INTERPRETABILITY, k + n, text))
        real_left, text_left = iter(drawn[k:]), iter(texts[k:])
        for n, is_real in enumerate(kinds):
            if is_real:
                rows.append(_real(judge, REALISM, n, next(real_left)))
            else:
                rows.append(_generated(judge, REALISM, n, next(text_left)))
        TextTrial.objects.bulk_create(rows)
        TextJudge.objects.filter(pk=judge.pk).update(started_at=timezone.now())
    judge.refresh_from_db()
    text_generation.dispatch([judge.system_id])


def _with_gold(
    judge: TextJudge, gold: list[DescribedClip], drawn: list[DescribedClip], k: int
) -> list[DescribedClip]:
    """The drawn clips with one of the study's gold clips as the realism test's first real clip
    (drawn apart, so a study without gold clips draws as before)."""
    if not gold or len(drawn) <= k:
        return drawn
    pick = random.Random(_seed(judge, "gold")).choice(gold)
    return [*drawn[:k], pick, *drawn[k + 1 :]]


def _real(judge: TextJudge, test: str, position: int, clip: DescribedClip) -> TextTrial:
    return TextTrial(
        judge=judge,
        test=test,
        position=position,
        is_real=True,
        described=clip,
        text=clip.text,
        audio=clip.audio,
    )


def _generated(judge: TextJudge, test: str, position: int, text: str) -> TextTrial:
    made = text_generation.new_generation(judge.system, text, 1, _seed(judge, test, position))
    return TextTrial(
        judge=judge, test=test, position=position, is_real=False, generation=made, text=text
    )


def collect(judge: TextJudge) -> None:
    """Take in what workers generated for the judge since the last look (idempotent)."""
    waiting = TextTrial.objects.filter(
        judge=judge, audio__isnull=True, generation__state=TextGeneration.State.DONE
    ).select_related("generation")
    for trial in waiting:
        clip = trial.generation.clips.order_by("index").first()
        TextTrial.objects.filter(pk=trial.pk, audio__isnull=True).update(audio=clip.audio)
    for prompt_set in PromptSet.objects.filter(
        judge=judge, generation__state=TextGeneration.State.DONE, clips__isnull=True
    ).select_related("generation"):
        with transaction.atomic():
            locked = PromptSet.objects.select_for_update(no_key=True).get(pk=prompt_set.pk)
            if locked.clips.exists():
                continue
            PromptClip.objects.bulk_create(
                PromptClip(prompt_set=locked, index=clip.index, audio=clip.audio)
                for clip in prompt_set.generation.clips.order_by("index")
            )


# --- Where a judge is ----------------------------------------------------------------------------


@dataclass
class Step:
    """What a judge does next: the test, and the item (None while a sound is being made)."""

    test: str
    trial: TextTrial | None = None
    prompt_set: PromptSet | None = None
    waiting: bool = False


def answerable(judge: TextJudge, test: str):
    """The test's trials a judge answers: those whose sound could be made."""
    return (
        TextTrial.objects.filter(judge=judge, test=test)
        .exclude(generation__state=TextGeneration.State.FAILED)
        .order_by("position")
    )


def next_step(judge: TextJudge) -> Step:
    collect(judge)
    trial = answerable(judge, INTERPRETABILITY).filter(description__isnull=True).first()
    if trial is not None:
        return Step(INTERPRETABILITY, trial, waiting=trial.audio_id is None)
    # The reveal lasts until every answer is marked and the marks are submitted: a mark may
    # change until then.
    described = answerable(judge, INTERPRETABILITY)
    if described.filter(mark__isnull=True).exists() or (
        judge.reveal_submitted_at is None and described.exists()
    ):
        if judge.revealed_at is None:
            TextJudge.objects.filter(pk=judge.pk, revealed_at__isnull=True).update(
                revealed_at=timezone.now()
            )
            judge.refresh_from_db()
        return Step("reveal")
    trial = answerable(judge, REALISM).filter(realism__isnull=True).first()
    if trial is not None:
        # Only generated clips are ever waited for: the realism test waits until all of its
        # clips are there, so that waiting says nothing of the clip that comes next.
        waiting = answerable(judge, REALISM).filter(audio__isnull=True).exists()
        return Step(REALISM, trial, waiting=waiting)
    unanswered = (
        PromptSet.objects.filter(judge=judge, answer__isnull=True)
        .exclude(generation__state=TextGeneration.State.FAILED)
        .order_by("position")
    )
    # The first set whose clips are made; a set still being made does not hold up a later one.
    ready = unanswered.filter(generation__state=TextGeneration.State.DONE).first()
    if ready is not None:
        return Step("prompt", prompt_set=ready)
    if (first := unanswered.first()) is not None:
        return Step("prompt", prompt_set=first, waiting=True)
    if prompts_counted(judge) < judge.study.prompts:
        return Step("prompt")
    return Step("done")


def prompts_counted(judge: TextJudge) -> int:
    """Prompts that count towards the judge's number: all but those the system failed on."""
    return (
        PromptSet.objects.filter(judge=judge)
        .exclude(generation__state=TextGeneration.State.FAILED)
        .count()
    )


def failed_counts(judge: TextJudge) -> dict[str, int]:
    """Items left out because the system could not make their sound, per test."""
    failed = TextGeneration.State.FAILED
    return {
        INTERPRETABILITY: TextTrial.objects.filter(
            judge=judge, test=INTERPRETABILITY, generation__state=failed
        ).count(),
        REALISM: TextTrial.objects.filter(
            judge=judge, test=REALISM, generation__state=failed
        ).count(),
        "prompt": PromptSet.objects.filter(judge=judge, generation__state=failed).count(),
    }


# --- Answers, each stored once -------------------------------------------------------------------


def _check_open(judge: TextJudge) -> None:
    if not TextPromptStudy.objects.filter(pk=judge.study_id, is_open=True).exists():
        raise ListeningError(
            "The text-prompt study is paused. Your answers are saved: come back through the "
            "same link when it reopens.",
            409,
        )


def _trial(judge: TextJudge, token: str, test: str) -> TextTrial:
    trial = TextTrial.objects.filter(token=token, test=test).first()
    if trial is None:
        raise ListeningError("No such item.", 404)
    if trial.judge_id != judge.pk:
        raise ListeningError("This item belongs to another judge.", 403)
    return trial


def _previous(model, key: str, item_field: str, item_id: int):
    """The answer stored under `key` (a double click, a retry, a reload resubmitting): the same
    answer again, or a conflict when the key was used for another item."""
    previous = model.objects.filter(idempotency_key=key).first()
    if previous is not None and getattr(previous, f"{item_field}_id") != item_id:
        raise ListeningError("This request key was already used for another item.", 409)
    return previous


def _heard(judge: TextJudge, row, what: str = "sound") -> listening.Listened:
    test = selectors.listening_test(judge.study.challenge)
    audio = delivery.delivered_audio(row.audio, test)
    return listening.listened(row, audio.duration_s, test, what=what, rater=judge.rater)


def _locked_judge(judge: TextJudge) -> TextJudge:
    # Answers of one judge are stored one at a time, so "the next item" is read consistently.
    return TextJudge.objects.select_for_update(no_key=True).get(pk=judge.pk)


def _save_in_order(
    judge: TextJudge,
    token: str,
    test: str,
    model: type,
    *,
    key: str,
    require_heard: bool,
    verb: str,
    already: str,
    values: dict,
    began,
) -> tuple:
    """One answer to one of the judge's sounds of `test`: in the order given, heard when asked,
    stored once (the same key again returns it). `began` is when the first answer's clock
    starts."""
    key = sessions.check_key(key)
    with transaction.atomic():
        _locked_judge(judge)
        trial = _trial(judge, token, test)
        previous = _previous(model, key, "trial", trial.pk)
        if previous is not None:
            return previous, False
        if model.objects.filter(trial=trial).exists():
            raise ListeningError(already, 409)
        _check_open(judge)
        step = next_step(judge)
        if step.trial is None or step.trial.pk != trial.pk:
            raise ListeningError(f"Please {verb} the sounds in the order they are given.", 409)
        verdict = _heard(judge, trial)
        if require_heard and not verdict.ok:
            raise ListeningError(verdict.reason, 409)
        last = sessions.last_answer_at(model.objects.filter(trial__judge=judge))
        answer = model.objects.create(
            trial=trial,
            idempotency_key=key,
            **values,
            **sessions.answer_record(verdict, last or began),
        )
    return answer, True


def save_description(
    judge: TextJudge, token: str, *, text: str, key: str, require_heard: bool = False
) -> tuple[DescriptionAnswer, bool]:
    text = " ".join(str(text).split())
    if not text:
        raise ListeningError("Please write what you think the sound is.")
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise ListeningError(f"A description has at most {MAX_DESCRIPTION_CHARS} characters.")
    return _save_in_order(
        judge, token, INTERPRETABILITY, DescriptionAnswer,
        key=key, require_heard=require_heard, verb="describe",
        already="This sound is already described.", values={"text": text},
        began=judge.started_at,
    )  # fmt: skip


def reveal_rows(judge: TextJudge) -> list[TextTrial]:
    """The judge's interpretability clips with their answers, for the reveal step only."""
    if answerable(judge, INTERPRETABILITY).filter(description__isnull=True).exists():
        raise ListeningError("The true texts show once every sound is described.", 409)
    return list(
        answerable(judge, INTERPRETABILITY).select_related("description").prefetch_related("mark")
    )


def save_mark(judge: TextJudge, token: str, *, correct, key: str) -> tuple[DescriptionMark, bool]:
    if str(correct) not in ("yes", "no", "True", "False", "1", "0"):
        raise ListeningError("Mark the answer correct or not.")
    value = str(correct) in ("yes", "True", "1")
    key = sessions.check_key(key)
    with transaction.atomic():
        locked = _locked_judge(judge)
        trial = _trial(judge, token, INTERPRETABILITY)
        previous = _previous(DescriptionMark, key, "trial", trial.pk)
        if previous is not None:
            return previous, False
        _check_open(judge)
        if not DescriptionAnswer.objects.filter(trial=trial).exists() or locked.revealed_at is None:
            raise ListeningError("The true texts show once every sound is described.", 409)
        existing = DescriptionMark.objects.filter(trial=trial).first()
        if existing is not None:
            # A judge may change their mind until the marks are submitted (a request of the
            # earlier key again returns the mark as it is now, above).
            if locked.reveal_submitted_at is not None:
                raise ListeningError("Your marks are submitted and can no longer change.", 409)
            if existing.correct != value:
                DescriptionMark.objects.filter(pk=existing.pk).update(correct=value)
                existing.correct = value
            return existing, False
        return DescriptionMark.objects.create(trial=trial, correct=value, idempotency_key=key), True


def submit_marks(judge: TextJudge) -> None:
    """The end of the reveal step: every answer marked, the marks fixed from now on."""
    with transaction.atomic():
        locked = _locked_judge(judge)
        if locked.reveal_submitted_at is not None:
            return
        if locked.revealed_at is None:
            raise ListeningError("The true texts show once every sound is described.", 409)
        missing = answerable(judge, INTERPRETABILITY).filter(mark__isnull=True).count()
        if missing:
            raise ListeningError(f"Please mark every answer first ({missing} still to mark).", 409)
        TextJudge.objects.filter(pk=judge.pk).update(reveal_submitted_at=timezone.now())
    judge.refresh_from_db()


def save_realism(
    judge: TextJudge, token: str, *, says_real, key: str, require_heard: bool = False
) -> tuple[RealismAnswer, bool]:
    if str(says_real) not in ("real", "generated"):
        raise ListeningError("Mark the sound real or generated.")
    return _save_in_order(
        judge, token, REALISM, RealismAnswer,
        key=key, require_heard=require_heard, verb="mark",
        already="This sound is already marked.", values={"says_real": str(says_real) == "real"},
        began=judge.revealed_at,
    )  # fmt: skip


def submit_prompt(judge: TextJudge, prompt: str, *, key: str) -> tuple[PromptSet, bool]:
    """A prompt the judge typed: its clips are asked for at once (the judge may type the next
    one while they are made). The same key again returns the same set."""
    key = sessions.check_key(key)
    try:
        prompt = text_generation.check_prompt(prompt)
    except text_generation.TextPromptError as exc:
        raise ListeningError(exc.message) from None
    with transaction.atomic():
        _locked_judge(judge)
        previous = PromptSet.objects.filter(idempotency_key=key).first()
        if previous is not None:
            if previous.judge_id != judge.pk:
                raise ListeningError("This request key was already used.", 409)
            return previous, False
        _check_open(judge)
        if (
            judge.started_at is None
            or answerable(judge, REALISM).filter(realism__isnull=True).exists()
        ):
            raise ListeningError("The prompt test comes after the first two tests.", 409)
        if prompts_counted(judge) >= judge.study.prompts:
            raise ListeningError(f"You have typed your {judge.study.prompts} prompts.", 409)
        last = PromptSet.objects.filter(judge=judge).aggregate(n=Max("position"))["n"]
        position = 0 if last is None else last + 1
        made = text_generation.new_generation(
            judge.system, prompt, judge.study.clips_per_prompt, _seed(judge, "prompt", position)
        )
        prompt_set = PromptSet.objects.create(
            judge=judge, position=position, prompt=prompt, generation=made, idempotency_key=key
        )
    text_generation.dispatch([judge.system_id])
    return prompt_set, True


def _check_level(name: str, value) -> int:
    text = str(value).strip()
    if text not in {"1", "2", "3", "4", "5"}:
        raise ListeningError(f"{name} must be a whole number from 1 to 5.")
    return int(text)


def save_prompt_answer(
    judge: TextJudge,
    token: str,
    *,
    match: str,
    quality,
    diversity,
    key: str,
    require_heard: bool = False,
) -> tuple[PromptAnswer, bool]:
    if match not in MATCH_ANSWERS:
        raise ListeningError("Answer whether any sound matches the prompt: yes, no or maybe.")
    quality = _check_level("Quality", quality)
    diversity = _check_level("Diversity", diversity)
    key = sessions.check_key(key)
    with transaction.atomic():
        _locked_judge(judge)
        prompt_set = PromptSet.objects.filter(token=token).first()
        if prompt_set is None:
            raise ListeningError("No such prompt.", 404)
        if prompt_set.judge_id != judge.pk:
            raise ListeningError("This prompt belongs to another judge.", 403)
        previous = _previous(PromptAnswer, key, "prompt_set", prompt_set.pk)
        if previous is not None:
            return previous, False
        if PromptAnswer.objects.filter(prompt_set=prompt_set).exists():
            raise ListeningError("This prompt is already answered.", 409)
        _check_open(judge)
        clips = list(prompt_set.clips.order_by("index"))
        if not clips:
            raise ListeningError("The sounds of this prompt are not ready yet.", 409)
        if require_heard:
            for clip in clips:
                verdict = _heard(judge, clip)
                if not verdict.ok:
                    raise ListeningError(f"Sound {clip.index + 1}: {verdict.reason}", 409)
        answer = PromptAnswer.objects.create(
            prompt_set=prompt_set,
            match=match,
            quality=quality,
            diversity=diversity,
            idempotency_key=key,
        )
    return answer, True


def failures(study: TextPromptStudy) -> list[dict]:
    """Every request a system failed on, with the judge, the test and the reason, for
    organizers."""
    rows = []
    failed = TextGeneration.State.FAILED
    for trial in TextTrial.objects.filter(
        judge__study=study, generation__state=failed
    ).select_related("generation__system", "judge__rater"):
        rows.append(_failure(trial.judge, trial.test, trial.generation))
    for prompt_set in PromptSet.objects.filter(
        judge__study=study, generation__state=failed
    ).select_related("generation__system", "judge__rater"):
        rows.append(_failure(prompt_set.judge, "prompt", prompt_set.generation))
    return rows


def _failure(judge: TextJudge, test: str, made: TextGeneration) -> dict:
    return {
        "judge": judge.rater.code,
        "test": test,
        "system": made.system.name,
        "prompt": made.prompt,
        "error": made.error,
    }


def answer_counts(judge: TextJudge) -> dict[str, int]:
    """How far a judge is, for organizers."""
    return {
        "described": DescriptionAnswer.objects.filter(trial__judge=judge).count(),
        "marked": DescriptionMark.objects.filter(trial__judge=judge).count(),
        "realism": RealismAnswer.objects.filter(trial__judge=judge).count(),
        "prompts": PromptAnswer.objects.filter(prompt_set__judge=judge).count(),
    }
