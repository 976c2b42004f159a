"""The records the stages of the scoring hand on, in the order `compute.score` runs them: each
stage takes what the one before handed on and hands on one frozen record."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from raters.rules import Verdict

from .inputs import FAD_INF_COLUMNS
from .intervals import Jackknife
from .rules import Rules
from .statistics import rounded

# The modules whose source decides a result's numbers.
SCORING_CODE = (
    "inputs", "rules", "statistics", "stages", "compute", "intervals", "league", "predictors",
)  # fmt: skip


def code_version() -> str:
    """Version of the scoring code: the package version and a hash of the source of the modules
    that compute a result (and of the rater-quality rules they apply)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for path in [here / f"{name}.py" for name in SCORING_CODE] + [
        here.parent / "raters" / "rules.py"
    ]:
        digest.update(path.read_bytes())
    return f"0.1.0+{digest.hexdigest()[:12]}"


def _combine(q, f, d, rules: Rules):
    """Final score: weighted mean of the three scales; a missing scale drops out of the weights."""
    parts = [(q, rules.weight_quality), (f, rules.weight_fit), (d, rules.weight_diversity)]
    num = 0.0
    den = 0.0
    for value, weight in parts:
        value = np.asarray(value, float)
        ok = np.isfinite(value)
        num = num + np.where(ok, value * weight, 0.0)
        den = den + np.where(ok, weight, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _cell_means(cell_idx, weights, values, n_cells):
    sums = np.bincount(cell_idx, weights * values, minlength=n_cells)
    counts = np.bincount(cell_idx, weights, minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan)


def _row_nanmean(matrix):
    ok = np.isfinite(matrix)
    total = np.where(ok, matrix, 0.0).sum(axis=-1)
    n = ok.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.where(n > 0, n, 1), np.nan)


@dataclass(frozen=True)
class Cleaned:
    """The rows that can count: systems with their teams and tracks, trials and anchors apart,
    diversity, with self-ratings removed (and counted per rater and system)."""

    team_of: Mapping[str, str]
    track_of: Mapping[str, str]
    trials: list[tuple]  # (rater, session, category, system, stimulus, quality, fit)
    anchors: list[tuple]  # (rater, session, category, role, quality, fit)
    diversity: list[tuple]  # (rater, category, system, diversity)
    self_removed: Mapping[tuple[str, str], int]


@dataclass(frozen=True)
class Checked:
    """The rater-quality verdicts of the sessions checked, and the rows of the sessions kept."""

    sessions: Mapping[tuple[str, str, str], Verdict]  # by (rater, category, session)
    excluded_sessions: list[dict]
    flagged_sessions: list[dict]
    favouritism: dict  # raters named by the favouritism rule, and the clusters found
    lifts: Mapping[tuple[str, str], float]  # every (rater, system) lift, in scale points
    trials: list[tuple]
    anchors: list[tuple]
    diversity: list[tuple]


@dataclass(frozen=True, eq=False)
class Aggregate:
    """The index spaces of the kept rows, their arrays, and the point estimate.

    `estimate` gives the cell and system means for weights on raters and sounds: all ones for
    the point estimate, a replicate's weights for the bootstrap and the jackknife."""

    rules: Rules
    systems: list[str]  # the rated systems
    categories: list[str]
    raters: list[str]
    sys_index: Mapping[str, int]
    cat_index: Mapping[str, int]
    n_units: int
    t_rater: np.ndarray
    t_cell: np.ndarray
    t_q: np.ndarray
    t_f: np.ndarray
    t_unit: np.ndarray
    unit_cell: np.ndarray
    cell_size: np.ndarray
    cell_start: np.ndarray
    d_rater: np.ndarray
    d_cell: np.ndarray
    d_v: np.ndarray
    point: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_cells(self) -> int:
        return len(self.systems) * len(self.categories)

    def estimate(self, w_rater, w_unit, reference=None) -> dict[str, np.ndarray]:
        n_s, n_c, n_cells = len(self.systems), len(self.categories), self.n_cells
        w_t = w_rater[self.t_rater] * w_unit[self.t_unit] if len(self.t_cell) else np.zeros(0)
        w_d = w_rater[self.d_rater] if len(self.d_cell) else np.zeros(0)
        cq = _cell_means(self.t_cell, w_t, self.t_q, n_cells).reshape(n_s, n_c)
        cf = _cell_means(self.t_cell, w_t, self.t_f, n_cells).reshape(n_s, n_c)
        cd = _cell_means(self.d_cell, w_d, self.d_v, n_cells).reshape(n_s, n_c)
        sq, sf, sd = _row_nanmean(cq), _row_nanmean(cf), _row_nanmean(cd)
        out = {
            "cq": cq,
            "cf": cf,
            "cd": cd,
            "cfinal": _combine(cq, cf, cd, self.rules),
            "q": sq,
            "f": sf,
            "d": sd,
            "final": _combine(sq, sf, sd, self.rules),
        }
        if reference is not None:
            # A replicate that drew none of a cell's raters estimates another quantity (a mean
            # over fewer categories or scales): it is left out, not re-weighted.
            lost = {k: np.isfinite(reference[k]) & ~np.isfinite(out[k]) for k in ("cq", "cf", "cd")}
            cell_lost = lost["cq"] | lost["cf"] | lost["cd"]
            out["cfinal"] = np.where(cell_lost, np.nan, out["cfinal"])
            for scale, cells in (("q", "cq"), ("f", "cf"), ("d", "cd")):
                out[scale] = np.where(lost[cells].any(axis=1), np.nan, out[scale])
            out["final"] = np.where(cell_lost.any(axis=1), np.nan, out["final"])
        return out

    def counts(self, i: int) -> tuple[int, int]:
        """How many trial and diversity ratings system `i` has kept."""
        n_c = max(len(self.categories), 1)
        n_ratings = int(np.sum(self.t_cell // n_c == i)) if len(self.t_cell) else 0
        n_diversity = int(np.sum(self.d_cell // n_c == i)) if len(self.d_cell) else 0
        return n_ratings, n_diversity


@dataclass(frozen=True, eq=False)
class Uncertainty:
    """The intervals of the estimates, by the jackknife-t or the percentile bootstrap (or
    none), behind one interface."""

    confidence: float
    jack: Jackknife | None = None
    boot: Mapping[str, np.ndarray] = field(default_factory=dict)

    def interval(self, key: str, index: tuple) -> list | None:
        if self.jack is not None:
            found = self.jack.interval(key, index, self.confidence)
            return [rounded(v) for v in found] if found else None
        if not self.boot:
            return None
        sample = self.boot[key][(slice(None), *index)]
        sample = sample[np.isfinite(sample)]
        if sample.size == 0:
            return None
        alpha = (1 - self.confidence) / 2
        lo, hi = np.quantile(sample, [alpha, 1 - alpha])
        return [rounded(lo), rounded(hi)]

    def p_above(self, upper: int, lower: int) -> float | None:
        """The probability that system `upper`'s final score is above system `lower`'s."""
        if self.jack is not None:
            return rounded(self.jack.p_above("final", upper, lower), 4)
        if self.boot:
            a, b = self.boot["final"][:, upper], self.boot["final"][:, lower]
            ok = np.isfinite(a) & np.isfinite(b)
            if ok.any():
                return rounded(np.mean((a[ok] > b[ok]) + 0.5 * (a[ok] == b[ok])), 4)
        return None

    def withheld(self, index: tuple, keys: Sequence[str]) -> dict[str, str]:
        """Per scale, why its interval at `index` is withheld (too few raters), where it is."""
        if self.jack is None:
            return {}
        names = zip(("quality", "fit", "diversity", "final"), keys, strict=True)
        return {name: why for name, key in names if (why := self.jack.withheld(key, index))}


@dataclass(frozen=True)
class FadTable:
    """The designated model's FAD (and KAD) per system and category, with their intervals and
    FAD-inf."""

    categories: list[str]
    model: str
    with_inf: bool
    values: Mapping[tuple[str, str], tuple[float, float]]  # (system, category) -> (dev, eval)
    intervals: Mapping[tuple[str, str], dict[str, tuple[float, float]]]
    infinity: Mapping[tuple[str, str], dict[str, float]]
    track_of: Mapping[str, str]  # the track of each system in the FAD rows
    # KAD as `values` holds FAD; shown only where some row has one (`with_kad`).
    kad: Mapping[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    with_kad: bool = False

    def _metrics(self) -> list[tuple[str, Mapping[tuple[str, str], tuple[float, float]]]]:
        return [("fad", self.values), *([("kad", self.kad)] if self.with_kad else [])]

    def cell(self, system: str, category: str) -> dict:
        """The FAD (and KAD) entries of one system's category in the leaderboard."""
        out = {}
        intervals = self.intervals.get((system, category), {})
        for metric, table in self._metrics():
            values = table.get((system, category), (math.nan, math.nan))
            for name, value in zip((f"{metric}_dev", f"{metric}_eval"), values, strict=True):
                out[name] = rounded(value)
                out[f"{name}_ci"] = _ci(intervals.get(name))
        if self.with_inf:
            out.update(
                {
                    n: rounded(self.infinity.get((system, category), {}).get(n))
                    for n in FAD_INF_COLUMNS
                }
            )
        return out

    def summary(self, system: str) -> dict:
        """A system's FAD (and KAD) over categories: mean, min, max, sd and interval of the
        mean."""
        out = {}
        for metric, table in self._metrics():
            out.update(self._summary(system, metric, table))
        return out

    def _summary(self, system: str, metric: str, table: Mapping) -> dict:
        fad, categories = table, self.categories
        values = [fad[(system, c)] for c in categories if (system, c) in fad]
        dev = np.array([v[0] for v in values], float)
        ev = np.array([v[1] for v in values], float)
        out = {}
        for name, arr in ((f"{metric}_dev", dev), (f"{metric}_eval", ev)):
            arr = arr[np.isfinite(arr)]
            out[name] = rounded(arr.mean()) if arr.size else None
            out[f"{name}_min"] = rounded(arr.min()) if arr.size else None
            out[f"{name}_max"] = rounded(arr.max()) if arr.size else None
            out[f"{name}_sd"] = rounded(arr.std()) if arr.size else None
            out[f"{name}_ci"] = _mean_interval(
                [(fad[(system, c)], self.intervals[(system, c)].get(name)) for c in categories
                 if (system, c) in fad], 0 if name.endswith("_dev") else 1
            )  # fmt: skip
            if self.with_inf and metric == "fad":
                # Over the categories the FAD mean covers, and only when each has its FAD-inf:
                # a mean over fewer categories would be another quantity.
                index = 0 if name == "fad_dev" else 1
                inf = [
                    self.infinity[(system, c)].get(f"{name}_inf")
                    for c in categories
                    if (system, c) in fad and math.isfinite(fad[(system, c)][index])
                ]
                out[f"{name}_inf"] = (
                    rounded(sum(inf) / len(inf)) if inf and None not in inf else None
                )
        return out


@dataclass(frozen=True)
class Ranking:
    """Per track: the leaderboard, the probability of each neighbouring pair's order, and the
    systems shown apart (not rated, or rated in fewer categories or scales than the others)."""

    tracks: dict[str, list[dict]]
    pairs: dict[str, list[dict]]
    unrated: dict[str, list[dict]]
    incomplete: dict[str, list[dict]]


@dataclass(frozen=True)
class Analysis:
    """The analyses of the ratings, and the metric league when the FAD rows name models."""

    analyses: dict
    metric_league: dict | None


@dataclass(frozen=True)
class Counts:
    ratings: int
    self_ratings_removed: int
    trial_ratings_used: int
    trial_ratings_excluded: int
    diversity_ratings_used: int
    diversity_ratings_excluded: int
    anchor_ratings: int  # ratings of hidden anchors, read by the anchor rule
    sessions_checked: int
    sessions_excluded: int
    raters: int


@dataclass(frozen=True)
class Result:
    """What the scoring concludes; `to_dict()` is the JSON-ready dict `score` returns."""

    tracks: dict[str, list[dict]]
    metric_league: dict | None
    excluded_sessions: list[dict]
    flagged_sessions: list[dict]
    favouritism: dict
    pairs: dict[str, list[dict]]
    unrated_systems: dict[str, list[dict]]
    incomplete_systems: dict[str, list[dict]]
    categories: list[str]
    fad_infinity: bool
    kad: bool
    predictors: list[dict]  # the predictor axes on the leaderboards ([]: none, and no key)
    analyses: dict
    counts: Counts
    self_ratings_removed: list[dict]
    settings: dict
    inputs: dict[str, str]
    code_version: str

    def to_dict(self) -> dict:
        league = {} if self.metric_league is None else {"metric_league": self.metric_league}
        predictors = {"predictors": self.predictors} if self.predictors else {}
        return {
            "tracks": self.tracks,
            **league,
            "excluded_sessions": self.excluded_sessions,
            "flagged_sessions": self.flagged_sessions,
            "favouritism": self.favouritism,
            "pairs": self.pairs,
            "unrated_systems": self.unrated_systems,
            "incomplete_systems": self.incomplete_systems,
            "categories": self.categories,
            "fad_infinity": self.fad_infinity,
            "kad": self.kad,
            **predictors,
            "analyses": self.analyses,
            "counts": asdict(self.counts),
            "self_ratings_removed": self.self_ratings_removed,
            "settings": self.settings,
            "inputs": self.inputs,
            "code_version": self.code_version,
        }


def _ci(pair) -> list | None:
    return [rounded(pair[0]), rounded(pair[1])] if pair else None


def _mean_interval(cells: Sequence[tuple], index: int) -> list | None:
    """An interval of the mean FAD (or KAD) over categories from each category's interval:
    categories hold different clips, so their errors are independent and add in quadrature
    (each side apart, since the intervals are not symmetric). Both distances are at least 0,
    and so is the interval (a KAD estimate may be below 0, its interval starts at 0). None
    unless every category has one."""
    values = [(v[index], ci) for v, ci in cells if math.isfinite(v[index])]
    if not values or any(ci is None for _, ci in values):
        return None
    n = len(values)
    mean = sum(v for v, _ in values) / n
    below = math.sqrt(sum(max(v - ci[0], 0.0) ** 2 for v, ci in values)) / n
    above = math.sqrt(sum(max(ci[1] - v, 0.0) ** 2 for v, ci in values)) / n
    return [rounded(max(mean - below, 0.0)), rounded(max(mean + above, 0.0))]
