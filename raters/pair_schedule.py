"""Which pairs of systems an A/B trial serves next, for one category: pairs chosen where they
inform.

Two phases. Coverage first: every pair of systems is served once before any pair is served again,
in round-robin rounds (the circle method, over the systems in an order drawn from the seed), so
after each round every system has been heard equally often and a test cut short mid-round is
still near balanced. Then active sampling: each next pair is drawn with a weight equal to the
probability that the current fit has the two systems' order wrong, so votes go where the ranking
is still uncertain and not to pairs whose order is settled. A settled pair keeps a small weight
(`SETTLED`): a confident order drawn from few raters can still be wrong, and only votes on the
pair can show it.

A cap keeps any system from being starved or over-sampled while uncertainty concentrates: in the
active phase no system's share of the votes falls below 1/cap of the uniform share, nor rises above
cap times it (the uniform share: a system is in 2/k of the votes among k systems).

Sides are counterbalanced: a pair's next serving puts on the left the system that has been on its
left less often; when even, the one that has been on the left less often over all its pairs; then
the seed decides.

Pure functions of their arguments, numpy only: the current fit's uncertainty comes in as plain
data (`order_uncertainty` turns bootstrap replicates of the strengths into it), so the same
systems, votes served, uncertainty and seed give the same schedule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

SETTLED = 0.01  # the weight of a pair whose order no replicate disputes
UNKNOWN = 0.5  # the weight of a pair the uncertainty does not mention: a coin flip


def order_uncertainty(
    systems: Sequence[str], replicates: np.ndarray
) -> dict[tuple[str, str], float]:
    """Per pair of systems (in the order of `systems`), the probability that their order is
    wrong: the share of bootstrap replicates (rows; columns in the order of `systems`) that order
    the two against the majority, an equal strength counting half. From 0 (every replicate
    agrees) to 0.5 (the replicates are split)."""
    draws = np.asarray(replicates, dtype=float)
    if draws.ndim != 2 or draws.shape[1] != len(systems):
        raise ValueError(f"replicates must be (replicates, {len(systems)}), not {draws.shape}")
    out = {}
    for i in range(len(systems)):
        for j in range(i + 1, len(systems)):
            above = np.mean((draws[:, i] > draws[:, j]) + 0.5 * (draws[:, i] == draws[:, j]))
            out[(systems[i], systems[j])] = float(min(above, 1.0 - above))
    return out


def coverage_order(systems: Sequence[str], seed: int) -> list[tuple[int, int]]:
    """Every pair of systems once (indices into `systems`, lower first), as round-robin rounds:
    each round holds every system once (one sits out when their number is odd)."""
    rng = np.random.default_rng([seed, 0])
    seats: list[int | None] = [int(k) for k in rng.permutation(len(systems))]
    if len(seats) % 2:
        seats.append(None)  # the bye
    rounds = []
    for _ in range(len(seats) - 1):
        half = len(seats) // 2
        pairs = [
            (min(a, b), max(a, b))
            for a, b in zip(seats[:half], reversed(seats[half:]), strict=True)
            if a is not None and b is not None
        ]
        rounds.append([pairs[k] for k in rng.permutation(len(pairs))])
        seats = [seats[0], seats[-1], *seats[1:-1]]  # the circle turns round the first seat
    return [pair for k in rng.permutation(len(rounds)) for pair in rounds[k]]


def next_pairs(
    systems: Sequence[str],
    served: Mapping[tuple[str, str], int],
    uncertainty: Mapping[tuple[str, str], float] | None,
    count: int,
    seed: int,
    cap: float = 2.0,
) -> list[tuple[str, str]]:
    """The next `count` pairs to serve in one category, each as (left, right).

    `served`: votes served so far per (left, right) as served (a pair missing has none).
    `uncertainty`: per pair, in either order, the probability that the current fit orders it
    wrong (`order_uncertainty`); a pair missing counts as unknown (0.5). None: no fit yet, and
    the schedule keeps to coverage, round after round. `seed` (0 or above): the same seed and
    arguments give the same pairs. `cap` (above 1): the bound on a system's share of the votes in
    the active phase, as a factor of the uniform share.
    """
    if cap <= 1:
        raise ValueError(f"cap must be above 1, not {cap}")
    k = len(systems)
    if k < 2 or count <= 0:
        return []
    index = {name: n for n, name in enumerate(systems)}
    if len(index) != k:
        raise ValueError("systems must be distinct")
    sides = np.zeros((k, k), dtype=int)  # sides[i, j]: served with i on the left, j on the right
    for (left, right), n in served.items():
        if left in index and right in index and left != right:
            sides[index[left], index[right]] += n
    votes = sides + sides.T  # per pair, either side
    weight = _weights(systems, uncertainty)
    order = coverage_order(systems, seed)
    rng = np.random.default_rng([seed, 1, int(votes.sum())])
    chosen = []
    for _ in range(count):
        least = min(votes[i, j] for i, j in order)
        if uncertainty is None or least == 0:
            i, j = next((i, j) for i, j in order if votes[i, j] == least)
        else:
            i, j = _draw(votes, weight, cap, rng)
        left, right = _sides(i, j, sides, rng)
        sides[left, right] += 1
        votes[i, j] += 1
        votes[j, i] += 1
        chosen.append((systems[left], systems[right]))
    return chosen


def _weights(
    systems: Sequence[str], uncertainty: Mapping[tuple[str, str], float] | None
) -> np.ndarray:
    index = {name: n for n, name in enumerate(systems)}
    weight = np.full((len(systems), len(systems)), UNKNOWN)
    for (a, b), p in (uncertainty or {}).items():
        if a in index and b in index and a != b:
            i, j = index[a], index[b]
            weight[i, j] = weight[j, i] = min(max(float(p), 0.0), UNKNOWN)
    return np.maximum(weight, SETTLED)


def _draw(
    votes: np.ndarray, weight: np.ndarray, cap: float, rng: np.random.Generator
) -> tuple[int, int]:
    """One pair drawn by weight among those that keep every system within the cap, now and in
    the votes that follow."""
    k = len(votes)
    rows, cols = np.triu_indices(k, 1)
    total = votes.sum() // 2 + 1  # the votes once this one is served
    after = np.tile(votes.sum(axis=1), (len(rows), 1))  # per candidate, the votes each system is in
    after[np.arange(len(rows)), rows] += 1
    after[np.arange(len(rows)), cols] += 1
    under_ceiling = (after <= 2 * total * cap / k + 1e-9).all(axis=1)
    # The floor rises with every vote, so checking it now is too late when several systems near it
    # at once (one vote serves two). Per system, the votes it can still go without before it falls
    # under the floor; served two a vote, the soonest first, the j-th is reached after j // 2
    # votes, and must be able to wait that long.
    wait = np.sort(np.floor(after * k * cap / 2 + 1e-9) - total, axis=1)
    margin = (wait - np.arange(k) // 2).min(axis=1)
    allowed = under_ceiling & (margin >= 0)
    if not allowed.any():
        # Served from elsewhere beyond the cap: the pair that mends the floor the most.
        pool = np.flatnonzero(under_ceiling) if under_ceiling.any() else np.arange(len(rows))
        n = pool[np.argmax(margin[pool])]
        return int(rows[n]), int(cols[n])
    p = np.where(allowed, weight[rows, cols], 0.0)
    n = rng.choice(len(rows), p=p / p.sum())
    return int(rows[n]), int(cols[n])


def _sides(i: int, j: int, sides: np.ndarray, rng: np.random.Generator) -> tuple[int, int]:
    """(left, right) for the pair i, j: the side this pair has served less, then the system
    with fewer times on the left than on the right over all its pairs, then a coin."""
    if sides[i, j] != sides[j, i]:
        return (i, j) if sides[i, j] < sides[j, i] else (j, i)
    left_i, left_j = sides[i].sum() - sides[:, i].sum(), sides[j].sum() - sides[:, j].sum()
    if left_i != left_j:
        return (i, j) if left_i < left_j else (j, i)
    return (i, j) if rng.random() < 0.5 else (j, i)
