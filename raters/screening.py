"""The screening stage, between the instructions and the first category: a level calibration
page, the Huggins-pitch headphone check and, where the test asks for it, the digit-triplet
hearing check (see `raters.huggins`, `raters.hearing_check`).

Every sound is made on the server for its rater and trial from a secret seed, stored like any
delivered sound and heard through an opaque token (`raters.listening`), so neither the page nor
the sound's address nor its name says which interval holds the tone or which digits are
spoken; the answer stays in `ScreeningTrial.answer_key`. An answer counts only for a sound the
server vouches was heard, is stored once, and a retry draws everything afresh.

Whether a failed check screens a rater out is the rater-quality engine's word: the check's rule
(`headphones`, `hearing` in `raters.rules`) set to "exclude" screens out, once the attempts
allowed per participant id are used up; "flag" or "off" lets the rater go on, the result kept.
A screened-out crowd worker gets the run's screen-out code or URL, never the completion code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from . import delivery, gold, hearing_check, huggins, listening, selectors
from . import rules as engine
from .errors import ListeningError
from .models import (
    ListeningTest,
    Rater,
    Screening,
    ScreeningAttempt,
    ScreeningTrial,
    TextJudge,
    new_seed,
)
from .rules import RaterRules

STEP_NAMES = {"level": "Sound level", "headphones": "Headphone check", "hearing": "Hearing check"}
LEVEL_SECONDS = 6.0
TRIPLET_SECONDS = 3.2
NOISE_SECONDS = 3.8


@dataclass
class Stage:
    """Where a rater stands in the screening: the step to take (None: all done), its open
    attempt and next trial, or the failed attempt a retry may follow; `screened_out` when a
    check failed with no attempt left."""

    step: str | None = None
    attempt: ScreeningAttempt | None = None
    trial: ScreeningTrial | None = None
    failed: ScreeningAttempt | None = None
    screened_out: ScreeningAttempt | None = None
    attempts: list[ScreeningAttempt] = field(default_factory=list)

    limit: int = 0

    @property
    def attempts_left(self) -> int:
        if self.failed is None:
            return 0
        return min(self.failed.limit, self.limit) - self.failed.number


def settings_of(test: ListeningTest) -> Screening | None:
    """The test's screening settings; None when it has none (no screening)."""
    return Screening.objects.filter(test=test).first()


def _is_judge(rater: Rater) -> bool:
    try:
        return rater.text_judge is not None
    except TextJudge.DoesNotExist:
        return False


def applies(rater: Rater, screening: Screening | None) -> bool:
    """Whether this rater is screened: by the test's settings, never a diversity rater or a
    judge of the text-prompt study."""
    if screening is None or not screening.steps() or rater.diversity_role or _is_judge(rater):
        return False
    return screening.who == Screening.Who.EVERYONE or rater.kind == Rater.Kind.CROWD


def action_of(rules: RaterRules, step: str, rater: Rater) -> str:
    """What the engine does with a failed check: exclude, flag or off (the steps its screening
    rules judge; the level page has nothing to fail)."""
    if step not in {rule.code for rule in engine.registered(engine.SCREENING)}:
        return "off"
    return engine.action_of(rules[step], crowd=rater.kind == Rater.Kind.CROWD)


def stage(rater: Rater, screening: Screening | None = None) -> Stage:
    """Where the rater stands (all done when the screening does not apply)."""
    test = selectors.listening_test(rater.challenge)
    screening = screening if screening is not None else settings_of(test)
    if not applies(rater, screening):
        return Stage()
    rules = selectors.rater_rules(rater.challenge)
    attempts = list(rater.screening_attempts.order_by("step", "number"))
    for step in screening.steps():
        mine = [a for a in attempts if a.step == step]
        if any(a.state == ScreeningAttempt.State.PASSED for a in mine):
            continue
        open_ = next((a for a in mine if a.state == ScreeningAttempt.State.OPEN), None)
        if open_ is not None:
            return Stage(step, open_, _next_trial(open_, test), attempts=attempts)
        if not mine:
            return Stage(step, attempts=attempts)
        last = max(mine, key=lambda a: a.number)
        if action_of(rules, step, rater) != "exclude":
            continue  # failed, but the engine only flags (or ignores) it: the rater goes on
        # The limit the attempt began under, or a lower one the organizers set since.
        if last.number >= min(last.limit, screening.attempts):
            return Stage(step, screened_out=last, attempts=attempts)
        return Stage(step, failed=last, attempts=attempts, limit=screening.attempts)
    return Stage(attempts=attempts)


def pending(rater: Rater) -> bool:
    """Whether the rater has screening still to take (or was screened out): no category
    session is assigned until it is done."""
    return stage(rater).step is not None


def screened_out(rater: Rater) -> bool:
    return stage(rater).screened_out is not None


def require_cleared(rater: Rater) -> None:
    """Refuse what comes after the screening to a rater who has not cleared it."""
    if pending(rater):
        raise ListeningError("Please finish the checks before the listening test begins.", 403)


def screen_out_link(screening: Screening) -> str:
    """The screen-out URL with the run's screen-out code as `cc` when it carries none."""
    if not screening.screen_out_url:
        return ""
    parts = urlsplit(screening.screen_out_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "cc" for key, _ in query):
        return screening.screen_out_url
    query.append(("cc", screening.screen_out_code))
    return urlunsplit(parts._replace(query=urlencode(query)))


def screen_out_code(screening: Screening) -> str:
    """The screen-out code: the recruiting platform's own when its URL carries one."""
    given = dict(parse_qsl(urlsplit(screening.screen_out_url).query)).get("cc", "")
    return given or screening.screen_out_code


# --- Attempts ------------------------------------------------------------------------------------


def begin(rater: Rater, *, retry: bool = False) -> Stage:
    """Open an attempt at the rater's current step: the first one, or (`retry`) the next after a
    failed one while attempts are left. Under the rater's lock, so two tabs open one; the
    database's constraints hold the limit whatever happens."""
    with transaction.atomic():
        Rater.objects.select_for_update(no_key=True).get(pk=rater.pk)
        now = stage(rater)
        if now.step is None or now.attempt is not None or now.screened_out is not None:
            return now
        if now.failed is not None and not retry:
            return now  # a retry is the rater's own choice, by a POST
        test = selectors.listening_test(rater.challenge)
        screening = settings_of(test)
        number = 1 + max((a.number for a in now.attempts if a.step == now.step), default=0)
        try:
            with transaction.atomic():
                attempt = ScreeningAttempt.objects.create(
                    rater=rater,
                    step=now.step,
                    number=number,
                    limit=screening.attempts,
                    seed=new_seed(),
                )
        except IntegrityError:
            raise ListeningError("No attempt is left at this check.", 409) from None
        _make_trials(attempt, test, screening)
    return stage(rater)


def _rng(attempt: ScreeningAttempt, position: int) -> np.random.Generator:
    return np.random.default_rng([attempt.seed, position])


def _store(samples: np.ndarray, test: ListeningTest) -> object:
    """A screening sound at the test's loudness, stored like every delivered sound."""
    rate = test.challenge.sample_rate
    samples, _ = delivery.align(samples, rate, float(test.target_lufs))
    return delivery.store_samples(samples, rate)


def _make_trials(attempt: ScreeningAttempt, test: ListeningTest, screening: Screening) -> None:
    rate = test.challenge.sample_rate
    if attempt.step == "level":
        # Pink-ish noise, the same for every rater of the test: nothing to answer about it.
        rng = np.random.default_rng(test.pk)
        n = round(LEVEL_SECONDS * rate)
        spectrum = np.fft.rfft(rng.standard_normal(n))
        spectrum[1:] /= np.sqrt(np.arange(1, spectrum.size))
        noise = huggins.ramped(np.fft.irfft(spectrum, n)[:, None].repeat(2, axis=1), rate)
        ScreeningTrial.objects.create(attempt=attempt, position=0, audio=_store(noise, test))
    elif attempt.step == "headphones":
        for position in range(screening.headphone_trials):
            sound, target = huggins.trial(_rng(attempt, position), rate)
            ScreeningTrial.objects.create(
                attempt=attempt,
                position=position,
                audio=_store(sound, test),
                answer_key=str(target),
            )
    else:
        attempt.staircase = hearing_check.Staircase(screening.hearing_triplets).as_dict()
        attempt.save(update_fields=["staircase"])
        _next_triplet(attempt, test, 0)


def _next_triplet(attempt: ScreeningAttempt, test: ListeningTest, position: int) -> None:
    rate = test.challenge.sample_rate
    stairs = hearing_check.Staircase.from_dict(attempt.staircase)
    rng = _rng(attempt, position)
    triplet = hearing_check.digits(rng)
    speech = gold.speak(
        ", ".join(gold.NUMBERS[int(d)] for d in triplet),
        rate,
        round(TRIPLET_SECONDS * rate),
        random.Random(int(rng.integers(2**62))),
    )
    noise = hearing_check.speech_shaped_noise(speech, rng, round(NOISE_SECONDS * rate))
    lead = round(0.3 * rate)
    padded = np.zeros(noise.size)
    padded[lead : lead + speech.size] = speech[: noise.size - lead]
    snr = stairs.next_snr()
    sound = hearing_check.mix(padded, noise, snr)
    ScreeningTrial.objects.create(
        attempt=attempt,
        position=position,
        audio=_store(np.stack([sound, sound], axis=1), test),
        answer_key=triplet,
        snr_db=snr,
    )


def _next_trial(attempt: ScreeningAttempt, test: ListeningTest) -> ScreeningTrial | None:
    return attempt.trials.filter(answered_at__isnull=True).select_related("audio").first()


def answer(rater: Rater, token: str, given: str) -> ScreeningTrial:
    """Store the answer to one of the rater's screening trials (heard first, by the server's
    record); the attempt ends with its last answer. A trial answered before keeps its first
    answer: a replayed form changes nothing, another answer is refused."""
    given = str(given or "").strip()[:16]
    test = selectors.listening_test(rater.challenge)
    screening = settings_of(test)
    with transaction.atomic():
        trial = (
            ScreeningTrial.objects.select_for_update(of=("self",))
            .select_related("attempt", "audio")
            .filter(token=token, attempt__rater=rater)
            .first()
        )
        if trial is None:
            raise ListeningError("No such check.", 404)
        attempt = ScreeningAttempt.objects.select_for_update().get(pk=trial.attempt_id)
        if trial.answered_at is not None:
            if trial.answer == given:
                return trial
            raise ListeningError("This check was answered already.", 409)
        if attempt.state != ScreeningAttempt.State.OPEN:
            raise ListeningError("This attempt is over.", 409)
        problem = _problem(trial, given)
        if problem:
            raise ListeningError(problem)
        verdict = listening.listened(trial, trial.audio.duration_s, test, rater=rater)
        if not verdict.ok:
            raise ListeningError(verdict.reason, 409)
        trial.answer = given
        trial.answered_at = timezone.now()
        if attempt.step == "headphones":
            trial.correct = given == trial.answer_key
        elif attempt.step == "hearing":
            trial.correct = hearing_check.heard_right(trial.answer_key, given)
        trial.save(update_fields=["answer", "answered_at", "correct"])
        _advance(attempt, trial, test, screening)
    return trial


def _problem(trial: ScreeningTrial, given: str) -> str:
    step = trial.attempt.step
    if step == "level" and given != "set":
        return "Please confirm that you set a comfortable level."
    if step == "headphones" and given not in ("1", "2", "3"):
        return "Please choose the noise, 1, 2 or 3, that held the tone."
    if step == "hearing" and len([c for c in given if c.isdigit()]) != 3:
        return "Please type the three digits you heard."
    return ""


def _finish(attempt: ScreeningAttempt, passed: bool, score: float | None, summary: str) -> None:
    attempt.state = ScreeningAttempt.State.PASSED if passed else ScreeningAttempt.State.FAILED
    attempt.score, attempt.summary = score, summary[:200]
    attempt.finished_at = timezone.now()
    attempt.save(update_fields=["state", "score", "summary", "finished_at", "staircase"])


def _advance(
    attempt: ScreeningAttempt, trial: ScreeningTrial, test: ListeningTest, screening: Screening
) -> None:
    if attempt.step == "level":
        _finish(attempt, True, None, "level set")
        return
    if attempt.step == "headphones":
        answers = list(attempt.trials.values_list("correct", flat=True))
        if any(c is None for c in answers):
            return
        right = sum(bool(c) for c in answers)
        _finish(
            attempt,
            right >= screening.headphone_pass,
            right,
            f"{right} of {len(answers)} right, pass at {screening.headphone_pass}",
        )
        return
    stairs = hearing_check.Staircase.from_dict(attempt.staircase)
    stairs.record(trial.snr_db, bool(trial.correct))
    attempt.staircase = stairs.as_dict()
    if not stairs.done:
        attempt.save(update_fields=["staircase"])
        _next_triplet(attempt, test, trial.position + 1)
        return
    srt = round(stairs.threshold(), 1)
    _finish(
        attempt,
        srt < screening.hearing_pass_db,
        srt,
        f"speech reception threshold {srt:g} dB SNR, pass below {screening.hearing_pass_db:g}",
    )


# --- What the engine, the exports and the monitoring read ----------------------------------------


def results(challenge) -> dict[str, dict[str, ScreeningAttempt]]:
    """Per rater code, per step, the rater's last finished attempt (or the open one)."""
    found: dict[str, dict[str, ScreeningAttempt]] = {}
    rows = ScreeningAttempt.objects.filter(rater__challenge=challenge).select_related("rater")
    for attempt in rows.order_by("rater_id", "step", "number"):
        found.setdefault(attempt.rater.code, {})[attempt.step] = attempt
    return found


EXPORT_COLUMNS = (
    "rater",
    "participant_id",
    "rater_kind",
    "step",
    "attempt",
    "attempts_allowed",
    "state",
    "score",
    "summary",
    "trials",
    "right",
    "started_at",
    "finished_at",
)


def export_rows(challenge) -> list[dict]:
    """Every attempt at every check, one row each, for the organizers' download."""
    rows = []
    attempts = (
        ScreeningAttempt.objects.filter(rater__challenge=challenge)
        .select_related("rater")
        .prefetch_related("trials")
        .order_by("rater__index", "step", "number")
    )
    for attempt in attempts:
        trials = [t for t in attempt.trials.all() if t.answered_at is not None]
        rows.append(
            {
                "rater": attempt.rater.code,
                "participant_id": attempt.rater.participant_id,
                "rater_kind": attempt.rater.kind,
                "step": attempt.step,
                "attempt": attempt.number,
                "attempts_allowed": attempt.limit,
                "state": attempt.state,
                "score": "" if attempt.score is None else attempt.score,
                "summary": attempt.summary,
                "trials": len(trials),
                "right": sum(bool(t.correct) for t in trials),
                "started_at": attempt.started_at.isoformat(),
                "finished_at": attempt.finished_at.isoformat() if attempt.finished_at else "",
            }
        )
    return rows
