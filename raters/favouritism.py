"""Favouritism: raters who lift one system above what the other raters hear in the same sounds.

Anchors, gold trials and the listening check catch careless raters; they do not catch a team's
farm of raters who listen, answer every check as expected, and rate one system higher. What
gives such a rater away is in the ratings themselves: on the sounds of the favoured system the
rater's answers sit above the other raters' by more than on every other system.

For each rater and each system they rated:

1. The consensus of a sound is the median of the other raters' answers to it (quality and fit
   averaged): a median, so that a farm rating the same sounds does not carry the consensus with
   it. A sound fewer than `MIN_OTHERS` other raters answered has none.
2. The rater's own line through the other systems' sounds (answer against consensus, least
   squares, the slope held within [0.25, 2]) takes out the rater's leniency and use of the scale,
   so a harsh or a wide-ranging rater is not a favouring one.
3. The lift is the mean residual of the system's sounds from that line. Its standard error
   comes from the residuals around the line (at least `MIN_SPREAD`, as for a rater who gives
   one answer to everything else), widened by the line's own uncertainty where the system lies
   beyond the others along the consensus (the best system, the worst). A spread measured on a
   few sounds is often small by chance: it is moderated towards the panel's typical one, and
   the lift over its error is read through Student's t and put back on the normal scale, so
   that a lift over 2 sounds is no likelier to be named than one over 200.
4. Honest raters have tastes: a system one of them likes more than the others do. The lifts'
   spread beyond their standard errors is measured over every rater and system (robustly: the
   median absolute deviation, which a minority of favouring raters hardly moves), and each
   standardised lift is divided by it, so the score `z` is calibrated to the panel at hand.

A rater whose `z` for a system reaches the rule's `z` is named as favouring it. And a system
favoured by many raters at once is a cluster: more raters with `z` of at least `cluster_z` than
the panel's rate of such lifts on the other systems makes likely (a binomial tail under
`cluster_p`); each of them is named too, as one of the cluster.

Plain Python, numpy and scipy over rows of (rater, system, stimulus, quality, fit); `find` is the
`favouritism` rule's function in the rater-quality registry (`raters.rules`, a panel rule),
which the scoring and the monitoring table apply, naming each rater with the system and by how
much.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_OTHERS = 2  # other raters of a sound needed for its consensus
MIN_SPREAD = 0.5  # floor of a rater's residual spread (scale points)
SLOPE_RANGE = (0.25, 2.0)
MIN_OWN_LINE = 4  # sounds of the other systems needed to draw the rater's line
PRIOR_DOF = 4  # sounds' worth of the panel's typical spread in each rater's own
ROUNDS = 6  # of leaving the plainest favouring raters out of the consensus


@dataclass(frozen=True)
class Lift:
    """How far `rater` rates `system` above their own line through the other systems."""

    rater: str
    system: str
    points: float  # the mean lift, in scale points
    z: float  # standardised by its error and the panel's spread of tastes
    sounds: int


@dataclass(frozen=True)
class _Raw:
    """A lift before it is standardised against the panel."""

    rater: str
    system: str
    lift: float
    variance: float  # of the rater's answers around their line through the other systems
    dof: int
    reach: float  # the lift's error per unit of spread
    sounds: int


@dataclass(frozen=True)
class Cluster:
    """A system that more raters favour than the panel's rate of lifts makes likely."""

    system: str
    raters: int  # with z of at least cluster_z
    expected: float
    p: float


@dataclass(frozen=True)
class Finding:
    lifts: list[Lift]
    clusters: list[Cluster]
    favouring: dict[str, tuple[Lift, str]]  # rater -> their largest lift named, and why

    # What the rater-quality engine reads of a panel rule's finding (raters.rules.PanelFinding).
    @property
    def judged(self) -> set[str]:
        """Every rater with a lift measured."""
        return {lift.rater for lift in self.lifts}

    @property
    def named(self) -> dict[str, str]:
        """The raters named as favouring a system, with the words that name them."""
        return {rater: words for rater, (_, words) in self.favouring.items()}


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    p = min(max(p, 1e-12), 1 - 1e-12)
    return float(
        min(1.0, sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)))
    )


def _median_without_each(values: np.ndarray) -> np.ndarray:
    """For each element, the median of the others (values sorted ascending), in one pass."""
    n = len(values)
    m = n - 1
    rank = np.arange(n)
    k = m // 2

    def kth(j: int) -> np.ndarray:  # the j-th smallest of the others, for every element
        return np.where(j < rank, values[j], values[min(j + 1, n - 1)])

    return kth(k) if m % 2 else (kth(k - 1) + kth(k)) / 2


def lifts(
    rows: Iterable[tuple[str, str, str, float, float]], *, not_heard: frozenset[str] = frozenset()
) -> list[Lift]:
    """Every (rater, system) lift over trial rows (rater, system, stimulus, quality, fit); the
    raters in `not_heard` take no part in any sound's consensus."""
    by_sound: dict[str, list[tuple[str, float]]] = defaultdict(list)
    system_of: dict[str, str] = {}
    for rater, system, stimulus, quality, fit in rows:
        by_sound[stimulus].append((rater, (float(quality) + float(fit)) / 2))
        system_of[stimulus] = system
    # Per rater: (system, answer, consensus) of each sound that has a consensus.
    points: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for stimulus, answers in by_sound.items():
        system = system_of[stimulus]
        heard = sorted(value for rater, value in answers if rater not in not_heard)
        if len(heard) < MIN_OTHERS:
            continue
        values = np.array(heard)
        median_all = float(np.median(values))
        # A rater in the consensus is left out of their own sound's: the median of the others.
        without = _median_without_each(values) if len(heard) > MIN_OTHERS else None
        position = {}
        for index, value in enumerate(heard):
            position.setdefault(value, index)
        for rater, value in answers:
            if rater in not_heard:
                points[rater].append((system, value, median_all))
            elif without is not None:
                # Equal answers are interchangeable: leaving out any one of them is the same.
                points[rater].append((system, value, float(without[position[value]])))
    raw: list[_Raw] = []
    for rater, own in points.items():
        names = sorted({p[0] for p in own})
        code = {name: i for i, name in enumerate(names)}
        g = np.array([code[p[0]] for p in own])
        x = np.array([p[1] for p in own])
        c = np.array([p[2] for p in own])
        k = len(names)
        # Sums per system, and over every system: the line through the others is the totals
        # less the system's own.
        n_s = np.bincount(g, minlength=k).astype(float)
        sx, sc = np.bincount(g, x, k), np.bincount(g, c, k)
        sxx, scc, sxc = np.bincount(g, x * x, k), np.bincount(g, c * c, k), np.bincount(g, x * c, k)
        n_r = n_s.sum() - n_s
        rx, rc = sx.sum() - sx, sc.sum() - sc
        rxx, rcc, rxc = sxx.sum() - sxx, scc.sum() - scc, sxc.sum() - sxc
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_x, mean_c = rx / n_r, rc / n_r
            var_c = rcc / n_r - mean_c**2
            cov = rxc / n_r - mean_x * mean_c
            slope = np.where(var_c > 1e-9, cov / np.where(var_c > 1e-9, var_c, 1), 1.0)
            # How far the system's sounds lie from the others' along the consensus: the line's
            # slope is uncertain, and a system beyond the others' range (the best one, the
            # worst) is where that uncertainty tells most.
            reach = np.where(var_c > 1e-9, (sc / n_s - mean_c) ** 2 / (var_c * n_r), 0.0)
        slope = np.clip(slope, *SLOPE_RANGE)
        intercept = mean_x - slope * mean_c
        # Residual sum of squares of the others around their line, from the same sums.
        rss = (
            rxx
            - 2 * intercept * rx
            - 2 * slope * rxc
            + n_r * intercept**2
            + 2 * intercept * slope * rc
            + slope**2 * rcc
        )
        variance = np.maximum(rss, 0) / np.maximum(n_r - 2, 1)
        own_mean = (sx - intercept * n_s - slope * sc) / n_s
        for system, i in code.items():
            if n_r[i] < MIN_OWN_LINE:
                continue
            raw.append(
                _Raw(
                    rater,
                    system,
                    float(own_mean[i]),
                    float(variance[i]),
                    int(n_r[i]) - 2,
                    math.sqrt(1 / n_s[i] + 1 / n_r[i] + float(reach[i])),
                    int(n_s[i]),
                )
            )
    if not raw:
        return []
    # A rater's spread is measured on a few sounds: alone it is often too small by chance, and a
    # lift divided by it looks larger than it is. It is moderated towards the panel's typical
    # spread (as if measured on PRIOR_DOF sounds more), and the standardised lift is read through
    # Student's t with the degrees of freedom that leaves, then put back on the normal scale, so
    # that `z` means the same on 2 sounds as on 200.
    variance = np.array([row.variance for row in raw])
    dof = np.array([row.dof for row in raw], dtype=float)
    floored = variance < MIN_SPREAD**2
    typical = float(np.median(variance[~floored])) if (~floored).any() else MIN_SPREAD**2
    moderated = (PRIOR_DOF * typical + dof * variance) / (PRIOR_DOF + dof)
    error = np.sqrt(np.maximum(moderated, MIN_SPREAD**2)) * np.array([row.reach for row in raw])
    standard = np.array([row.lift for row in raw]) / error
    tail = stats.t.sf(np.abs(standard), PRIOR_DOF + dof)
    with np.errstate(divide="ignore"):
        normal = np.where(tail > 1e-300, stats.norm.isf(tail), np.abs(standard))
    standard = np.sign(standard) * normal
    # The panel's spread of tastes, beyond chance: a robust scale of the standardised lifts
    # (1.4826 x MAD estimates a normal's sigma), never below chance's own. Raters who answer
    # everything else alike (the floored spread: a crude farm's) would shrink it, and so make
    # every honest taste look larger: they are left out of it, and so are the raters named in
    # an earlier round (`not_heard`), whose lifts on the systems they do not favour are small.
    free = np.array(
        [not low and row.rater not in not_heard for row, low in zip(raw, floored, strict=True)]
    )
    sample = standard[free] if free.sum() >= 10 else standard
    taste = max(1.0, 1.4826 * float(np.median(np.abs(sample - np.median(sample)))))
    return [
        Lift(row.rater, row.system, round(row.lift, 3), round(float(u) / taste, 3), row.sounds)
        for row, u in zip(raw, standard, strict=True)
    ]


def find(rows: Iterable[tuple[str, str, str, float, float]], rule: Mapping[str, float]) -> Finding:
    """The raters favouring a system, alone (`z`) or as one of a cluster (`cluster_z`,
    `cluster_p`), each with their largest lift and the words that name it."""
    return in_rounds(lifts, list(rows), rule, _amount)


def _amount(lift: Lift) -> str:
    return f"{lift.points:+.1f} points over {lift.sounds} sounds"


def in_rounds(
    measure: Callable[..., list[Lift]],
    rows: list,
    rule: Mapping[str, float],
    amount: Callable[[Lift], str],
) -> Finding:
    """The finding over `rows` of the lifts `measure` gives (`measure(rows, not_heard=...)`),
    named in the words of `amount` (a lift's size and what it was measured over).

    In rounds: a farm answering the other systems low drags their consensus down, and so makes
    honest raters look as if they lifted them. After each round the plainest of the raters
    named (a lift at least half the largest) take no part in the consensus of the next, until
    no one new is that plain (`ROUNDS` at most); the last round's names stand."""
    named: frozenset[str] = frozenset()
    for _ in range(ROUNDS):
        finding = _find(measure(rows, not_heard=named), rule, amount)
        if not finding.favouring:
            break
        # Only the plainest leave the consensus: a farm drags the consensus of every sound it
        # answers low, so in the same round honest raters who hear those sounds as they are
        # seem to lift them, by far less than the farm lifts its own.
        top = max(lift.z for lift, _ in finding.favouring.values())
        plainest = {r for r, (lift, _) in finding.favouring.items() if lift.z >= top / 2}
        if plainest <= named:
            break
        named = named | plainest
    return finding


def _find(found: list[Lift], rule: Mapping[str, float], amount: Callable[[Lift], str]) -> Finding:
    by_system: dict[str, list[Lift]] = defaultdict(list)
    for lift in found:
        by_system[lift.system].append(lift)
    # The panel's rate of lifts at cluster_z, per system and over the others (a system's own
    # cluster must not raise the rate it is measured against).
    high = {s: sum(lift.z >= rule["cluster_z"] for lift in ls) for s, ls in by_system.items()}
    total_high, total = sum(high.values()), len(found)
    clusters: list[Cluster] = []
    in_cluster: set[str] = set()
    for system, ls in sorted(by_system.items()):
        others = total - len(ls)
        rate = (total_high - high[system] + 1) / (others + 2)  # a little prior: never zero
        p = _binomial_tail(high[system], len(ls), rate)
        if high[system] >= 2 and p < rule["cluster_p"]:
            clusters.append(Cluster(system, high[system], round(rate * len(ls), 2), p))
            in_cluster.add(system)
    favouring: dict[str, tuple[Lift, str]] = {}
    for lift in sorted(found, key=lambda lift: -lift.z):
        if lift.rater in favouring:
            continue
        if lift.z >= rule["z"]:
            words = (
                f"lifts system {lift.system} above the other raters by {amount(lift)} "
                f"(z {lift.z:.1f}, limit {rule['z']:g})"
            )
        elif lift.system in in_cluster and lift.z >= rule["cluster_z"] and lift.points > 0:
            cluster = next(c for c in clusters if c.system == lift.system)
            words = (
                f"one of {cluster.raters} raters lifting system {lift.system} (about "
                f"{cluster.expected:g} expected by chance): {amount(lift)} (z {lift.z:.1f})"
            )
        else:
            continue
        favouring[lift.rater] = (lift, words)
    return Finding(found, clusters, favouring)
