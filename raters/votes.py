"""Votes on A/B trials (the pairs design): where a rater resumes a session, and every vote
stored exactly once, refused until the server heard both sides.

A vote answers each question of the test (audio quality; fit to the category) with left (A),
right (B) or tie. It is held to the same rules as a slider answer (`sessions.save_rating`): in
the session's order, once the examples were heard, while the test is open, and, from the pages,
only once each side was heard to the test's `listened_fraction` as the server verified it
(`raters.listening`: delivered whole, played in real time, one sound at a time). Since a rater
hears one sound at a time, no vote can come sooner than the two sides' durations together
(times that share) after the A/B trial's turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from . import delivery, listening, sessions, statements
from .errors import ListeningError
from .models import VOTE_CHOICES, CategorySession, ListeningTest, Pair, Rater, Trial, Vote

# The sides as the page names them: A on the left, B on the right.
SIDES = (("A", "left"), ("B", "right"))


@dataclass(frozen=True)
class PairResume:
    """Where a rater resumes a session of A/B trials: the first A/B trial without a vote (its
    sides read with it), the tokens of the next one's sides (the page preloads them) and the
    session's length."""

    pair: Pair
    following: tuple[str, ...]
    total: int


def resume(session: CategorySession) -> PairResume | None:
    """The A/B trial page's view of a session in one query; None when every A/B trial has its
    vote."""
    pairs = list(
        Pair.objects.filter(session=session)
        .select_related("left", "right")
        .annotate(voted=Exists(Vote.objects.filter(pair=OuterRef("pk"))))
        .order_by("position")
    )
    pending = [pair for pair in pairs if not pair.voted]
    if not pending:
        return None
    pair = pending[0]
    following = next(
        ((p.left.token, p.right.token) for p in pairs if p.position > pair.position), ()
    )
    return PairResume(pair, following, len(pairs))


def check_choice(name: str, value) -> str:
    if not isinstance(value, str) or value.strip() not in VOTE_CHOICES:
        raise ListeningError(f"{name} must be left (A), right (B) or tie; got {value!r}.")
    return value.strip()


def side_verdicts(
    rater: Rater, pair: Pair, test: ListeningTest
) -> list[tuple[str, listening.Listened]]:
    """The server's verdict on each side of the A/B trial, A first."""
    out = []
    for name, side in SIDES:
        trial: Trial = getattr(pair, side)
        duration = delivery.delivered_of(trial, test).duration_s
        out.append((name, listening.listened(trial, duration, test, rater=rater)))
    return out


def save_vote(
    rater: Rater, token: str, *, quality, fit, key: str, require_heard: bool = False
) -> tuple[Vote, bool]:
    """Store the vote on one A/B trial exactly once; returns the vote and whether it is new.

    The same key again (a double click, a retry, a resubmitted page) returns the stored vote
    unchanged. Bad choices, another rater's A/B trial, one out of order, a closed session or a
    closed test are refused with nothing changed. With `require_heard` (the pages), each side
    must have been heard to the test's share, as the server verified it.
    """
    quality = check_choice("Quality", quality)
    fit = check_choice("Fit", fit)
    key = sessions.check_key(key)
    with transaction.atomic():
        # The session's row is locked with the A/B trial's lookup, as a slider answer locks it:
        # votes of one session are stored one at a time, so the vote that completes the
        # session sees every other one.
        pair = (
            Pair.objects.select_related("session", "left", "right")
            .select_for_update(of=("session",), no_key=True)
            .filter(token=token)
            .first()
        )
        if pair is None:
            raise ListeningError("No such trial.", 404)
        session = pair.session
        if session.rater_id != rater.pk:
            raise ListeningError("This trial belongs to another rater.", 403)
        session.rater = rater
        # Read after the session's lock: a vote with this key stored meanwhile is seen.
        keyed = Vote.objects.filter(idempotency_key=key).first()
        if keyed is not None:
            if keyed.pair_id != pair.pk:
                raise ListeningError("This request key was already used for another trial.", 409)
            return keyed, False
        # The first two A/B trials without a vote: the one voted on must be first (order),
        # and whether a second exists says if this vote completes the session.
        pending = list(
            Pair.objects.filter(session=session, vote__isnull=True)
            .order_by("position")
            .values_list("pk", "position")[:2]
        )
        if pair.pk not in [pk for pk, _ in pending] and (
            not pending or pair.position < pending[0][1]
        ):
            raise ListeningError("This trial is already answered.", 409)
        if session.state != CategorySession.State.OPEN:
            raise ListeningError("This session is closed.", 409)
        # Held (FOR SHARE) until the vote commits: closing the test waits for votes under way.
        test = sessions.check_open(rater.challenge)
        if session.familiarized_at is None:
            raise ListeningError("The examples of this category come first.", 409)
        if pending[0][0] != pair.pk:
            raise ListeningError("Please rate the sounds in the order they are given.", 409)
        verdicts = side_verdicts(rater, pair, test)
        for name, verdict in verdicts:
            if require_heard and not verdict.ok:
                raise ListeningError(f"Sound {name}: {verdict.reason}", 409)
        moment = timezone.now()
        turn_began = session.last_answer_at or session.familiarized_at
        values = {
            "pair": pair.pk,
            "quality": quality,
            "fit": fit,
            "idempotency_key": key,
            "created_at": moment,
            "answer_s": round((listening.now() - turn_began).total_seconds(), 3),
        }
        for (_, side), (_, verdict) in zip(SIDES, verdicts, strict=True):
            values |= {
                f"{side}_plays": verdict.plays,
                f"{side}_seeks": verdict.seeks,
                f"{side}_heard_fraction": round(verdict.fraction, 4),
            }
        pk = statements.insert(Vote, values)
        vote = Vote(pk=pk, pair=pair, **{k: v for k, v in values.items() if k != "pair"})
        sessions.answered(rater.challenge, session, moment, closing=len(pending) == 1)
    return vote, True
