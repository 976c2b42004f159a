"""The A/B pair schedule (raters/pair_schedule.py): every pair once before any twice, then votes
where the order is uncertain, within the cap on each system's share, sides counterbalanced, and
the same schedule from the same seed."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from raters.pair_schedule import coverage_order, next_pairs, order_uncertainty

SYSTEMS = [f"S{k}" for k in range(8)]
ROUND = len(SYSTEMS) * (len(SYSTEMS) - 1) // 2  # 28 pairs


def schedule(systems, uncertainty, votes, seed=5, batch=20, cap=2.0) -> list[tuple[str, str]]:
    """`votes` pairs served batch by batch, as raters' sessions would ask for them."""
    served: Counter = Counter()
    out: list[tuple[str, str]] = []
    while len(out) < votes:
        pairs = next_pairs(systems, served, uncertainty, min(batch, votes - len(out)), seed, cap)
        served.update(pairs)
        out += pairs
    return out


def unordered(pair: tuple[str, str]) -> frozenset:
    return frozenset(pair)


def system_votes(pairs, systems) -> np.ndarray:
    counts = Counter(s for pair in pairs for s in pair)
    return np.array([counts[s] for s in systems])


@pytest.mark.parametrize("k", [2, 3, 7, 8])
def test_every_pair_is_served_once_before_any_pair_twice(k):
    systems = SYSTEMS[:k]
    uncertain = {pair: 0.0 for pair in itertools.combinations(systems, 2)}
    uncertain[(systems[0], systems[1])] = 0.5  # even a pair in doubt waits for the round
    pairs = schedule(systems, uncertain, k * (k - 1) // 2, batch=3)
    assert {unordered(p) for p in pairs} == {
        frozenset(p) for p in itertools.combinations(systems, 2)
    }
    assert all(left != right for left, right in pairs)


def test_coverage_comes_in_rounds_that_hear_every_system_equally():
    pairs = [tuple(p) for p in coverage_order(SYSTEMS, seed=3)]
    assert len(set(pairs)) == ROUND
    for end in range(4, ROUND + 1, 4):  # a round: 4 pairs, every system once
        counts = Counter(s for pair in pairs[:end] for s in pair)
        assert set(counts.values()) == {end // 4}


def test_without_a_fit_the_schedule_keeps_to_rounds():
    pairs = schedule(SYSTEMS, None, 3 * ROUND + 10)
    counts = Counter(unordered(p) for p in pairs)
    assert len(counts) == ROUND
    assert max(counts.values()) - min(counts.values()) <= 1


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    uncertain = {pair: 0.2 for pair in itertools.combinations(SYSTEMS, 2)}
    first = schedule(SYSTEMS, uncertain, 200, seed=11)
    assert schedule(SYSTEMS, uncertain, 200, seed=11) == first
    assert schedule(SYSTEMS, uncertain, 200, seed=12) != first
    # Both phases differ with the seed, not only the drawing.
    assert schedule(SYSTEMS, uncertain, ROUND, seed=12) != first[:ROUND]
    assert schedule(SYSTEMS, uncertain, 200, seed=12)[ROUND:] != first[ROUND:]


def test_active_votes_go_to_the_uncertain_pair_and_not_the_settled_one():
    uncertain = {pair: 0.0 for pair in itertools.combinations(SYSTEMS, 2)}
    uncertain[("S0", "S1")] = 0.45
    uncertain[("S3", "S2")] = 0.0  # either order of a pair is read
    pairs = schedule(SYSTEMS, uncertain, ROUND + 400)
    counts = Counter(unordered(p) for p in pairs[ROUND:])
    assert counts[frozenset(("S0", "S1"))] > 100
    assert counts[frozenset(("S2", "S3"))] < 10
    # A settled pair still gets a vote now and then: the fit may be wrong.
    assert sum(counts.values()) - counts[frozenset(("S0", "S1"))] > 20


def test_a_pair_the_uncertainty_does_not_mention_counts_as_unknown():
    pairs = schedule(SYSTEMS, {("S0", "S1"): 0.0}, ROUND + 400)
    counts = Counter(unordered(p) for p in pairs[ROUND:])
    assert counts[frozenset(("S0", "S1"))] < 5
    assert counts[frozenset(("S2", "S3"))] > 5


@pytest.mark.parametrize("cap", [1.5, 2.0, 3.0])
@pytest.mark.parametrize("doubt", ["one system", "half the systems"])
def test_the_cap_holds_when_uncertainty_concentrates(cap, doubt):
    if doubt == "one system":  # only S0's order is in doubt: without the cap it takes every vote
        uncertain = {p: 0.5 if "S0" in p else 0.0 for p in itertools.combinations(SYSTEMS, 2)}
    else:  # only S0..S3 are in doubt: without the cap S4..S7 would starve
        uncertain = {
            p: 0.5 if set(p) <= {"S0", "S1", "S2", "S3"} else 0.0
            for p in itertools.combinations(SYSTEMS, 2)
        }
    pairs = schedule(SYSTEMS, uncertain, ROUND + 600, cap=cap)
    uniform = 2 / len(SYSTEMS)
    for end in range(ROUND, len(pairs) + 1):  # after every vote of the active phase
        share = system_votes(pairs[:end], SYSTEMS) / end
        assert share.max() <= cap * uniform + 1e-12
        assert share.min() >= uniform / cap - 1e-12
    # The cap binds: the doubt pulls systems to its bounds, not to the middle.
    share = system_votes(pairs, SYSTEMS) / len(pairs)
    if doubt == "one system":
        assert share[0] > 0.9 * min(cap * uniform, 1.0)
    else:
        assert share[4:].min() < 1.2 * uniform / cap


def test_sides_are_counterbalanced():
    uncertain = {p: 0.3 if "S0" in p else 0.05 for p in itertools.combinations(SYSTEMS, 2)}
    pairs = schedule(SYSTEMS, uncertain, ROUND + 500, batch=7)
    sides = Counter(pairs)
    for a, b in itertools.combinations(SYSTEMS, 2):
        assert abs(sides[(a, b)] - sides[(b, a)]) <= 1
    lefts = Counter(left for left, _ in pairs)
    rights = Counter(right for _, right in pairs)
    assert all(abs(lefts[s] - rights[s]) <= 2 for s in SYSTEMS)


def test_sides_continue_from_what_was_served():
    served = {("S0", "S1"): 3, ("S1", "S0"): 1}
    pairs = next_pairs(["S0", "S1"], served, None, 2, seed=1)
    assert pairs == [("S1", "S0"), ("S1", "S0")]


def test_order_uncertainty_is_the_share_of_replicates_against_the_majority():
    rng = np.random.default_rng(0)
    draws = np.column_stack(
        [
            rng.normal(2.0, 0.1, 400),  # far above the others
            rng.normal(0.0, 1.0, 400),  # S1 and S2: a coin flip
            rng.normal(0.0, 1.0, 400),
            np.zeros(400),
        ]
    )
    draws[:, 3] = draws[:, 2]  # S2 and S3 always equal: half
    got = order_uncertainty(["S0", "S1", "S2", "S3"], draws)
    assert set(got) == set(itertools.combinations(["S0", "S1", "S2", "S3"], 2))
    assert got[("S0", "S1")] < 0.05
    assert got[("S1", "S2")] == pytest.approx(0.5, abs=0.06)
    assert got[("S2", "S3")] == 0.5
    assert all(0.0 <= p <= 0.5 for p in got.values())
    with pytest.raises(ValueError):
        order_uncertainty(["S0", "S1"], draws)


def test_nothing_to_schedule():
    assert next_pairs(["S0"], {}, None, 5, seed=1) == []
    assert next_pairs(SYSTEMS, {}, None, 0, seed=1) == []
    with pytest.raises(ValueError):
        next_pairs(SYSTEMS, {}, None, 5, seed=1, cap=1.0)
