"""Intervals of the listening-test scores that keep their coverage with few raters.

A percentile bootstrap over raters covers too little when a scale rests on a handful of them
(DCASE 2023 Task 7 had 4 diversity raters): a resample of n raters has (n - 1)/n of the
sample's variance, and the spread of n draws says nothing of how heavy the tails of a mean of n
raters are. Simulated, its "95 %" interval of diversity held the truth in about 80 % of cases
(`benchmarks/bench_coverage.py`).

Here each reported value gets a stratified delete-one jackknife and a Student t interval:

- strata: the raters of trials, the raters of diversity alone (drawn apart, as the bootstrap
  did), and the sounds of each system and category; a value's members in a stratum are those
  who rated (or are) part of it (m of them), and the stratum's variance is
  (m - 1)/m * sum((value without one member - their mean)^2), unbiased for a mean;
- the variances add up; the degrees of freedom are Satterthwaite's,
  (sum V_h)^2 / sum(V_h^2 / (m_h - 1)), so a value resting on 4 raters gets about 3 and
  t(3) = 3.18 standard errors each side instead of 1.96;
- whether a value gets an interval is decided by its design, the raters and sounds behind it,
  never by how far they happened to agree: a value that cannot be estimated without one of its
  raters or sounds (a single rater in a cell), or any of whose strata has fewer than
  `MIN_DF` + 1 members (two raters, or two sounds of a cell, behind it), is withheld with the
  reason. (Satterthwaite's degrees of freedom are never below the smallest stratum's m - 1, so
  the t quantile still follows the realised spread; but deciding on them showed exactly the
  draws where two sounds happened to agree, and those intervals covered 0.88.) A standard error
  below `MIN_SE` (every rater gave the same integer) is no spread to build on: withheld too, never
  printed as a zero-width interval;
- an interval stays on the scale: cut to [0, 10] (`bounds`). The true mean of ratings on the
  scale is on it too, so the cut loses no coverage; without it a near-ceiling system's interval
  with 4 raters reached as far as 17.8.

The probability that a system is above the next one is t's distribution function of their
difference over its jackknife standard error, which cancels what the two share (the same raters'
leniency), as the bootstrap's share of replicates did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# Below 2 degrees of freedom (a value carried by 2 raters) t's tails are too heavy for the
# normality an interval of 2 values rests on: the interval is withheld instead.
MIN_DF = 2.0
# A standard error below this, on a 0-10 scale shown to two decimals, is not a spread but its
# absence (raters who all gave one integer): no interval can be built on it.
MIN_SE = 0.005
JACKKNIFE_T = "jackknife-t"
BOOTSTRAP_PERCENTILE = "bootstrap"
METHODS = (JACKKNIFE_T, BOOTSTRAP_PERCENTILE)

# estimate(rater weights, sound weights, reference): every value; with a reference, a value
# that lost a cell the reference has is NaN (another quantity), not re-weighted.
Estimate = Callable[..., Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class Stratum:
    """Members deleted one at a time: raters (`kind="rater"`) or sounds (`kind="sound"`)."""

    kind: str
    members: np.ndarray


def rater_and_sound_strata(
    n_raters: int, trial_rater: np.ndarray, unit_cell: np.ndarray
) -> list[Stratum]:
    """Raters of trials, raters of diversity alone, and the sounds of each cell."""
    rates_trials = np.zeros(n_raters, bool)
    rates_trials[trial_rater] = True
    strata = [
        Stratum("rater", np.flatnonzero(rates_trials)),
        Stratum("rater", np.flatnonzero(~rates_trials)),
    ]
    return strata + [Stratum("sound", np.flatnonzero(unit_cell == c)) for c in np.unique(unit_cell)]


@dataclass
class _Spread:
    variance: np.ndarray
    df: np.ndarray
    withheld: np.ndarray  # "" or the reason


class Jackknife:
    """Delete-one replicates per stratum, and the intervals and orderings they give."""

    def __init__(
        self,
        estimate: Estimate,
        point: Mapping[str, np.ndarray],
        strata: Sequence[Stratum],
        n_raters: int,
        n_units: int,
        bounds: tuple[float, float] | None = None,
    ) -> None:
        self.point = point
        self.bounds = bounds
        # Per stratum: the values without each member, and which values each member is in
        # (finite from that member alone): a rater of other cells, a sound of another system
        # says nothing of a value's spread, and members count by the design, not by chance.
        self.groups: list[tuple[Stratum, dict[str, np.ndarray], dict[str, np.ndarray]]] = []
        # Per group, the values the stratum is behind: those it cannot be estimated without (a
        # sound of another system is "in" a diversity value, but does not carry it).
        self.behind: list[dict[str, np.ndarray]] = []
        for stratum in strata:
            if stratum.members.size == 0:
                continue
            w_rater, w_unit = np.ones(n_raters), np.ones(n_units)
            (w_rater if stratum.kind == "rater" else w_unit)[stratum.members] = 0.0
            self.behind.append(
                {k: ~np.isfinite(v) for k, v in estimate(w_rater, w_unit, point).items()}
            )
            replicates: dict[str, list[np.ndarray]] = {k: [] for k in point}
            members: dict[str, list[np.ndarray]] = {k: [] for k in point}
            for member in stratum.members:
                w_rater, w_unit = np.ones(n_raters), np.ones(n_units)
                alone_rater, alone_unit = np.ones(n_raters), np.ones(n_units)
                if stratum.kind == "rater":
                    w_rater[member] = 0.0
                    alone_rater = np.zeros(n_raters)
                    alone_rater[member] = 1.0
                else:
                    w_unit[member] = 0.0
                    alone_unit = np.zeros(n_units)
                    alone_unit[member] = 1.0
                for key, value in estimate(w_rater, w_unit, point).items():
                    replicates[key].append(value)
                for key, value in estimate(alone_rater, alone_unit).items():
                    members[key].append(np.isfinite(value))
            self.groups.append(
                (
                    stratum,
                    {k: np.stack(v) for k, v in replicates.items()},
                    {k: np.stack(v) for k, v in members.items()},
                )
            )
        self._spreads: dict[str, _Spread] = {}

    def _spread(self, key: str) -> _Spread:
        if key not in self._spreads:
            self._spreads[key] = self._combine(
                self.point[key],
                [(g[key], m[key]) for _, g, m in self.groups],
                behind=[b[key] for b in self.behind],
            )
        return self._spreads[key]

    def _combine(
        self,
        point: np.ndarray,
        groups: Sequence[tuple[np.ndarray, np.ndarray]],
        *,
        behind: Sequence[np.ndarray] | None = None,
        for_interval: bool = True,
    ) -> _Spread:
        total = np.zeros(point.shape)
        df_den = np.zeros(point.shape)
        lost = np.zeros(point.shape, bool)
        raters = np.zeros(point.shape, int)
        # The design's degrees of freedom: the smallest stratum behind a value, less one.
        design = np.full(point.shape, np.inf)
        short = np.full(point.shape, "", dtype=object)
        for g, ((stratum, *_), (replicates, moved)) in enumerate(
            zip(self.groups, groups, strict=True)
        ):
            missing = ~np.isfinite(replicates) & np.isfinite(point)
            lost |= missing.any(axis=0)
            m = moved.sum(axis=0)
            if stratum.kind == "rater":
                raters += m
            carries = behind[g] if behind is not None else m > 0
            smaller = carries & (m > 0) & (m - 1 < design)
            design = np.where(smaller, m - 1, design)
            short = np.where(smaller, stratum.kind, short)
            filled = np.where(moved & ~missing, replicates, 0.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = filled.sum(axis=0) / np.maximum(m, 1)
                centred = np.where(moved & ~missing, filled - mean, 0.0)
                variance = np.where(m > 1, (m - 1) / np.maximum(m, 1), 0.0) * (centred**2).sum(0)
                df_den += np.where(m > 1, variance**2 / np.maximum(m - 1, 1), 0.0)
            total += variance
        with np.errstate(invalid="ignore", divide="ignore"):
            df = np.where(df_den > 0, total**2 / np.where(df_den > 0, df_den, 1.0), np.inf)
        withheld = np.full(point.shape, "", dtype=object)
        shown = np.isfinite(point) & ~lost
        if for_interval:
            for index in zip(*np.nonzero(shown & (np.sqrt(total) < MIN_SE)), strict=True):
                withheld[index] = "its raters and sounds all agree: no spread for an interval"
        else:  # an order's probability: a certain order (no spread) is a probability of 1
            design = np.where(shown, df, np.inf)
            short[...] = "rater"
        for index in zip(*np.nonzero(shown & (design < MIN_DF)), strict=True):
            if short[index] == "sound":
                withheld[index] = f"{int(design[index]) + 1} sounds: too few for an honest interval"
            else:
                withheld[index] = f"{int(design[index]) + 1} raters: too few for an honest interval"
        for index in zip(*np.nonzero(lost & np.isfinite(point)), strict=True):
            withheld[index] = "a cell rests on one rater or sound: no interval can be honest"
        return _Spread(total, df, withheld)

    def interval(self, key: str, index: tuple, confidence: float) -> list[float] | None:
        """[low, high] of a t interval, or None where it is withheld (see `withheld`)."""
        value = float(self.point[key][index])
        spread = self._spread(key)
        if not np.isfinite(value) or spread.withheld[index]:
            return None
        half = _t(confidence, spread.df[index]) * float(np.sqrt(spread.variance[index]))
        low, high = value - half, value + half
        if self.bounds is not None:
            low, high = max(low, self.bounds[0]), min(high, self.bounds[1])
        return [low, high]

    def withheld(self, key: str, index: tuple) -> str:
        """Why `key` at `index` has no interval ("" when it has one or no value)."""
        if not np.isfinite(self.point[key][index]):
            return ""
        return str(self._spread(key).withheld[index])

    def p_above(self, key: str, upper: int, lower: int) -> float | None:
        """P(value[upper] > value[lower]) from their difference's t distribution."""
        diff = float(self.point[key][upper] - self.point[key][lower])
        if not np.isfinite(diff):
            return None
        groups = [
            (
                g[key][:, upper : upper + 1] - g[key][:, lower : lower + 1],
                m[key][:, upper : upper + 1] | m[key][:, lower : lower + 1],
            )
            for _, g, m in self.groups
        ]
        spread = self._combine(np.array([diff]), groups, for_interval=False)
        if spread.withheld[0]:
            return None
        se = float(np.sqrt(spread.variance[0]))
        if se == 0:
            return 1.0 if diff > 0 else 0.0 if diff < 0 else 0.5
        return float(stats.t.cdf(diff / se, float(spread.df[0])))


def _t(confidence: float, df: float) -> float:
    upper = 1 - (1 - confidence) / 2
    return float(stats.norm.ppf(upper) if not np.isfinite(df) else stats.t.ppf(upper, df))
