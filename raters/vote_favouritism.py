"""Favouritism on A/B trials: raters whose votes lift one system above what the other raters'
votes on the same pairs of systems say.

The favouritism rule (`raters.favouritism`) reads slider answers; in the pairs design a farm
that listens, answers every hidden anchor as known and votes for its own system gives itself
away the same way: its votes on the system's A/B trials go its way more often than the other
raters' votes on the same pairs of systems do.

For each rater and each system they voted on:

1. A vote's consensus is the other raters' share of wins of the same side's system against the
   same other system (both questions, a tie half a win), drawn towards even by `PRIOR` votes
   each way so that a pair few others voted on says little. A pair no other rater voted on has
   none.
2. The lift is the mean over the rater's votes on the system of (the rater's answer, 1 for the
   system, 0 against it, a half for a tie) less the consensus; its standard error comes from
   the consensus's Bernoulli variance (at least `MIN_VARIANCE`), widened by the consensus's own
   uncertainty. A rater needs `MIN_VOTES` answers on a system for its lift to be measured.
3. Honest raters have tastes: the standardised lifts are divided by their robust spread over
   the panel (1.4826 x the median absolute deviation, never below 1), as the sliders' are.

The naming (alone at `z`, or as one of a cluster at `cluster_z`) and the rounds that take the
plainest raters named out of the next round's consensus are the sliders' (`favouritism`), with
the favouritism rule's parameters: one rule, read over whichever answers the design collects.

Plain Python and numpy over vote rows (`VoteRow`); `find` is the rule's function for votes
(`Rule.votes` in `raters.rules`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from .favouritism import ROUNDS, Finding, Lift, in_rounds

MIN_VOTES = 4  # a rater's answers on a system's A/B trials needed to measure the lift
PRIOR = 1.0  # votes each way drawing a pair's consensus towards even
MIN_VARIANCE = 0.05
MIN_RATERS = 5  # raters of a system whose lifts' median it is read against  # floor of an answer's variance around the consensus
SCORE = {"left": 1.0, "right": 0.0, "tie": 0.5}


@dataclass(frozen=True)
class VoteRow:
    """One answer on an A/B trial of two stimuli (self-votes left out): the left system's
    score, 1 when it won, 0 when it lost, a half for a tie."""

    rater: Hashable  # a rater's code, or id
    left: str
    right: str
    score: float


def lifts(rows: Iterable[VoteRow], *, not_heard: frozenset = frozenset()) -> list[Lift]:
    """Every (rater, system) lift over the vote rows; the raters in `not_heard` take no part in
    any pair's consensus."""
    rows = list(rows)
    # Per ordered pair of systems (the lower name first): the sum of the first's scores and the
    # count, over every rater in the consensus, and per rater.
    total: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    own: dict[tuple[str, tuple[str, str]], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        key, score = _ordered(row)
        mine = own[(row.rater, key)]
        mine[0] += score
        mine[1] += 1
        if row.rater not in not_heard:
            total[key][0] += score
            total[key][1] += 1
    # Per (rater, system): the sums of residuals and variances, and the answers.
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for row in rows:
        key, score = _ordered(row)
        wins, count = total[key]
        if row.rater not in not_heard:
            wins -= own[(row.rater, key)][0]
            count -= own[(row.rater, key)][1]
        if count <= 0:
            continue
        share = (wins + PRIOR) / (count + 2 * PRIOR)
        variance = max(share * (1 - share), MIN_VARIANCE) * (1 + 1 / count)
        for system, residual in ((key[0], score - share), (key[1], share - score)):
            entry = sums[(row.rater, system)]
            entry[0] += residual
            entry[1] += variance
            entry[2] += 1
    measured = [
        (rater, system, residual / n, residual / math.sqrt(variance), int(n))
        for (rater, system), (residual, variance, n) in sorted(sums.items())
        if n >= MIN_VOTES
    ]
    if not measured:
        return []
    standard = np.array([m[3] for m in measured])
    # A farm's votes are in the other raters' consensus too: they lift the favoured system's
    # consensus, and so push every honest rater's lift of it down alike. Each lift is read
    # against the median of the panel's lifts of the same system (a farm is a minority of the
    # system's raters), where the system has enough raters for a median.
    system_of = np.array([m[1] for m in measured])
    for system in set(system_of):
        mine = system_of == system
        if mine.sum() >= MIN_RATERS:
            standard[mine] -= np.median(standard[mine])
    # The panel's spread of tastes, without the raters named in an earlier round.
    free = np.array([m[0] not in not_heard for m in measured])
    sample = standard[free] if free.sum() >= 10 else standard
    taste = max(1.0, 1.4826 * float(np.median(np.abs(sample - np.median(sample)))))
    return [
        Lift(rater, system, round(lift, 3), round(z / taste, 3), n)
        for (rater, system, lift, _, n), z in zip(measured, standard, strict=True)
    ]


def _ordered(row: VoteRow) -> tuple[tuple[str, str], float]:
    """The pair of systems with the lower name first, and that system's score."""
    if row.left <= row.right:
        return (row.left, row.right), row.score
    return (row.right, row.left), 1.0 - row.score


def _amount(lift: Lift) -> str:
    return f"{100 * lift.points:+.0f} points of wins over {lift.sounds} answers"


def find(rows: Iterable[VoteRow], rule: Mapping[str, float]) -> Finding:
    """The raters whose votes favour a system, alone (`z`) or as one of a cluster.

    A farm's raters each stand in the others' consensus of the pairs they vote on, so together
    they hide one another: before the naming, every rater whose lift of a system reaches
    `cluster_z` leaves the consensus, in rounds until no one new does (`ROUNDS` at most). It
    takes them out of the consensus only; the naming still asks for `z`, or a cluster."""
    rows = list(rows)
    suspects: frozenset = frozenset()
    for _ in range(ROUNDS):
        found = lifts(rows, not_heard=suspects)
        more = suspects | {lift.rater for lift in found if lift.z >= rule["cluster_z"]}
        if more == suspects:
            break
        suspects = frozenset(more)

    def measure(rows: list[VoteRow], *, not_heard: frozenset) -> list[Lift]:
        return lifts(rows, not_heard=not_heard | suspects)

    return in_rounds(measure, rows, rule, _amount)


def vote_rows(rows: Iterable[Mapping]) -> list[VoteRow]:
    """The vote rows of export rows (one per vote and question) of A/B trials of two stimuli;
    the caller leaves out self-votes and hidden anchors' A/B trials."""
    return [
        VoteRow(
            str(r["rater"]).strip(),
            str(r["left_system"]).strip(),
            str(r["right_system"]).strip(),
            SCORE[str(r["winner"]).strip()],
        )
        for r in rows
        if str(r["winner"]).strip() in SCORE
    ]
