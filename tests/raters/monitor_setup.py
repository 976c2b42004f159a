"""Many simulated raters for the monitoring view, written in a few bulk statements: crowd
workers and invited listeners who pass, fail or are still in the screening, and sessions whose
answers break the rater-quality rules in each way (misrated anchors, straight-lining, answering
too fast, not listening) or none."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Max
from django.utils import timezone

from raters.models import (
    Anchor,
    CategorySession,
    Rater,
    Rating,
    Screening,
    ScreeningAttempt,
    Stimulus,
    Trial,
)
from raters.selectors import listening_test

GOOD_ANCHOR = {"hq_goodfit": (9, 9), "hq_poorfit": (9, 1), "lq_poorfit": (1, 1)}
BAD_ANCHOR = {"hq_goodfit": (1, 1), "hq_poorfit": (1, 9), "lq_poorfit": (9, 9)}


def pattern(i: int) -> str:
    """What rater `i` does: mostly careful, with every kind of failure among them."""
    if i % 20 == 0:
        return "screened_out"
    if i % 20 == 1:
        return "screening"
    if i % 10 == 2:
        return "too_fast"
    if i % 10 == 3:
        return "not_listened"
    if i % 15 == 4:
        return "straight_lining"
    if i % 25 == 5:
        return "anchors"
    if i % 30 == 6:
        return "headphones_failed_once"
    return "careful"


def add_raters(challenge, n: int = 300) -> dict[str, int]:
    """`n` raters with screening results and one answered session each (but those screened
    out or still screening); returns how many follow each pattern."""
    test = listening_test(challenge)
    Screening.objects.get_or_create(test=test, defaults={"level_check": True})
    start = (Rater.objects.filter(challenge=challenge).aggregate(n=Max("index"))["n"] or 0) + 1
    raters = Rater.objects.bulk_create(
        [
            Rater(
                challenge=challenge,
                kind=Rater.Kind.INVITED if i % 7 == 6 else Rater.Kind.CROWD,
                index=start + i,
                participant_id="" if i % 7 == 6 else f"5f{i:022d}",
            )
            for i in range(n)
        ]
    )
    now = timezone.now()
    attempts = []
    for i, rater in enumerate(raters):
        kind = pattern(i)
        attempts.append(
            ScreeningAttempt(
                rater=rater,
                step="level",
                number=1,
                limit=2,
                seed=i,
                state="passed",
                summary="level set",
                finished_at=now,
            )
        )
        if kind == "screened_out":
            for number, right in ((1, 2), (2, 3)):
                attempts.append(
                    ScreeningAttempt(
                        rater=rater,
                        step="headphones",
                        number=number,
                        limit=2,
                        seed=i,
                        state="failed",
                        score=right,
                        summary=f"{right} of 6 right, pass at 5",
                        finished_at=now,
                    )
                )
        elif kind == "screening":
            attempts.append(
                ScreeningAttempt(rater=rater, step="headphones", number=1, limit=2, seed=i)
            )
        elif kind == "headphones_failed_once":
            attempts.append(
                ScreeningAttempt(
                    rater=rater,
                    step="headphones",
                    number=1,
                    limit=2,
                    seed=i,
                    state="failed",
                    score=4,
                    summary="4 of 6 right, pass at 5",
                    finished_at=now,
                )
            )
        else:
            right = 5 + i % 2
            attempts.append(
                ScreeningAttempt(
                    rater=rater,
                    step="headphones",
                    number=1,
                    limit=2,
                    seed=i,
                    state="passed",
                    score=right,
                    summary=f"{right} of 6 right, pass at 5",
                    finished_at=now,
                )
            )
    ScreeningAttempt.objects.bulk_create(attempts)

    rating = [r for i, r in enumerate(raters) if pattern(i) not in ("screened_out", "screening")]
    kinds = {r.pk: pattern(i) for i, r in enumerate(raters)}
    stimuli = list(Stimulus.objects.filter(challenge=challenge).select_related("clip"))
    anchors = list(Anchor.objects.filter(challenge=challenge))
    categories = sorted({s.category_id for s in stimuli})
    base = (CategorySession.objects.aggregate(n=Max("ordinal"))["n"] or 0) + 1
    sessions = CategorySession.objects.bulk_create(
        [
            CategorySession(
                rater=rater,
                category_id=categories[k % len(categories)],
                order=0,
                ordinal=base + k,
                state=CategorySession.State.CLOSED,
                closed_at=now,
                familiarized_at=now - timedelta(minutes=10),
            )
            for k, rater in enumerate(rating)
        ]
    )
    trials, answers = [], []
    for k, session in enumerate(sessions):
        own = [s for s in stimuli if s.category_id == session.category_id]
        checks = [a for a in anchors if a.category_id == session.category_id][:3]
        kind = kinds[session.rater_id]
        for position in range(8):
            stimulus = own[position % len(own)]
            trials.append(
                Trial(
                    session=session,
                    position=position,
                    role="trial",
                    stimulus=stimulus,
                    audio_id=stimulus.clip.audio_id,
                )
            )
            quality = 5 if kind == "straight_lining" else 2 + (position * 3 + k) % 8
            answers.append((quality, 5 if kind == "straight_lining" else 9 - quality % 7))
        for offset, anchor in enumerate(checks):
            trials.append(
                Trial(
                    session=session,
                    position=8 + offset,
                    role=f"anchor_{anchor.kind}",
                    anchor=anchor,
                    audio_id=anchor.audio_id,
                )
            )
            table = BAD_ANCHOR if kind == "anchors" else GOOD_ANCHOR
            answers.append((5, 5) if kind == "straight_lining" else table[anchor.kind])
    trials = Trial.objects.bulk_create(trials)
    rater_of = {s.pk: s.rater_id for s in sessions}
    ratings = []
    for trial, (quality, fit) in zip(trials, answers, strict=True):
        kind = kinds[rater_of[trial.session_id]]
        ratings.append(
            Rating(
                trial=trial,
                quality=quality,
                fit=fit,
                idempotency_key=f"sim-{trial.pk}",
                plays=1,
                seeks=0,
                heard_fraction=0.3 if kind == "not_listened" else 1.0,
                answer_s=1.0 if kind == "too_fast" else 6.0 + trial.position % 4,
            )
        )
    Rating.objects.bulk_create(ratings)
    CategorySession.objects.filter(pk__in=[s.pk for s in sessions]).update(last_answer_at=now)
    counts: dict[str, int] = {}
    for i in range(n):
        counts[pattern(i)] = counts.get(pattern(i), 0) + 1
    return counts
