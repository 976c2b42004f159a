"""The scoring of a challenge: rows in, one result out. No Django here.

The same function scores a challenge behind the publish button and from released CSV files on the
command line (`score_offline`), so both give the same numbers for the same rows and rules.

Inputs (lists of dicts, the listening test's export format and the FAD and teams formats):

- ratings: `rater, rater_team, session, category, system, track, stimulus, role, quality, fit`
- diversity: `rater, rater_team, category, system, track, diversity`
- fad: `system, track, category, fad_dev, fad_eval`; optional `fad_dev_low`, `fad_dev_high`,
  `fad_eval_low`, `fad_eval_high` (intervals), `fad_dev_inf`, `fad_eval_inf` (FAD-inf: with
  these columns the leaderboard shows FAD-inf, absent otherwise), `kad_dev`, `kad_eval` (KAD
  beside FAD, with `kad_dev_low`... intervals as FAD's) and `model`
- teams: `system, team, track`
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

# DCASE 2023 Task 7's anchor rule (DEFAULT_MISRATING) and the other rater-quality rules.
from raters.rules import (
    ANCHOR_ROLES,
    CONDITIONS,
    DEFAULT_MISRATING,
    GOLD,
    RaterRules,
    RuleError,
    Verdict,
    assess,
)
from stimuli.errors import Refused
from stimuli.exports import read_cell

from .intervals import JACKKNIFE_T, Jackknife, rater_and_sound_strata
from .intervals import METHODS as INTERVAL_METHODS
from .league import (
    SUBSET_SIZES,
    designated_model,
    fad_models,
    has_kad,
    is_designated,
    metric_league,
)

RATING_COLUMNS = (
    "rater",
    "rater_team",
    "session",
    "category",
    "system",
    "track",
    "stimulus",
    "role",
    "quality",
    "fit",
)
DIVERSITY_COLUMNS = ("rater", "rater_team", "category", "system", "track", "diversity")
FAD_COLUMNS = ("system", "track", "category", "fad_dev", "fad_eval")
# Optional FAD-inf columns: present when the objective settings compute FAD-inf.
FAD_INF_COLUMNS = ("fad_dev_inf", "fad_eval_inf")
# Optional KAD columns: KAD beside FAD against the same references (where they are audio).
KAD_COLUMNS = ("kad_dev", "kad_eval")
# The distances a FAD row may carry, each against the development and the evaluation reference.
METRICS = ("fad", "kad")
# Optional: each distance on one draw of 25, 50, 100 clips (the league's stability).
SUBSET_COLUMNS = tuple(
    f"{metric}_{ref}_{size}"
    for metric in METRICS
    for ref in ("dev", "eval")
    for size in SUBSET_SIZES
)
TEAM_COLUMNS = ("system", "team", "track")

TRIAL = "trial"
SCALES = ("quality", "fit", "diversity")
SCALE_MAX = 10  # every slider runs from 0 to 10


class ScoringInputError(Refused, ValueError):
    """Rows that cannot be scored; the message says which row or column and why."""


@dataclass(frozen=True)
class Rules:
    """Every rule of the scoring, with the DCASE 2023 Task 7 values as defaults."""

    low: float = 3.0  # a rating at or below this is "low"
    high: float = 7.0  # a rating at or above this is "high"
    misrating: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_MISRATING.items()}
    )
    exclude_at: int = 5  # a session with this many misrated anchors or more is excluded whole
    # Checks a complete session holds; a session left part-way is held to the same share of
    # misrated anchors (0: sessions have no anchors, and none is excluded for lacking them).
    anchors_per_session: int = 12
    remove_self_ratings: bool = True
    # The other rater-quality rules and the anchor rule's action (see raters.rules); the
    # anchor rule's parameters are the fields above.
    rater_rules: Mapping[str, Mapping] = field(default_factory=dict)
    weight_quality: float = 1.0
    weight_fit: float = 1.0
    weight_diversity: float = 0.5
    bootstrap: int = 1000  # replicates of the bootstrap method; 0: no intervals at all
    confidence: float = 0.95
    seed: int = 2023
    # "jackknife-t" holds its coverage with few raters (scoring/intervals.py); "bootstrap", the
    # percentile bootstrap over raters and sounds, covers too little with 4 raters.
    intervals: str = JACKKNIFE_T

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ScoringInputError(f"low threshold {self.low} must be below high {self.high}")
        if self.exclude_at < 1:
            raise ScoringInputError("exclude_at must be at least 1")
        if self.anchors_per_session < 0:
            raise ScoringInputError("anchors_per_session must be 0 or more")
        if min(self.weight_quality, self.weight_fit, self.weight_diversity) < 0 or not (
            self.weight_quality + self.weight_fit + self.weight_diversity > 0
        ):
            raise ScoringInputError("weights must be non-negative and not all zero")
        if self.bootstrap < 0:
            raise ScoringInputError("bootstrap must be 0 (no intervals) or more")
        if not 0 < self.confidence < 1:
            raise ScoringInputError("confidence must be between 0 and 1")
        if self.intervals not in INTERVAL_METHODS:
            raise ScoringInputError(f"intervals must be one of {', '.join(INTERVAL_METHODS)}")
        for role, conditions in self.misrating.items():
            if role not in ANCHOR_ROLES:
                raise ScoringInputError(f"unknown anchor type {role!r} in misrating rules")
            for condition in conditions:
                if condition not in CONDITIONS:
                    raise ScoringInputError(
                        f"unknown condition {condition!r} for {role}; use one of {CONDITIONS}"
                    )

        try:
            self.for_raters()
        except RuleError as exc:
            raise ScoringInputError(str(exc)) from None

    def for_raters(self) -> RaterRules:
        """The rater-quality rules these settings make (raters.rules assesses sessions)."""
        given = {name: dict(values) for name, values in dict(self.rater_rules or {}).items()}
        given["anchors"] = {
            **given.get("anchors", {}),
            "low": self.low,
            "high": self.high,
            "misrating": {k: list(v) for k, v in self.misrating.items()},
            "exclude_at": self.exclude_at,
            "anchors_per_session": self.anchors_per_session,
        }
        return RaterRules(given)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["misrating"] = {k: list(v) for k, v in self.misrating.items()}
        data["rater_rules"] = {k: dict(v) for k, v in dict(self.rater_rules or {}).items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping | None) -> Rules:
        data = dict(data or {})
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ScoringInputError(f"unknown scoring settings: {', '.join(sorted(unknown))}")
        return cls(**data)


@dataclass
class Inputs:
    ratings: list[dict]
    diversity: list[dict]
    fad: list[dict]
    teams: list[dict]
    # With a `model` column in the FAD rows: the model whose FAD the leaderboard shows (default:
    # the first named); every model enters the embedding league (scoring/league.py).
    fad_model: str = ""

    def hashes(self) -> dict[str, str]:
        """sha256 of each input table in a canonical form (row order does not matter)."""
        fad_columns = (*FAD_COLUMNS, "model") if fad_models(self.fad) else FAD_COLUMNS
        if has_fad_infinity(self.fad):
            fad_columns = (*fad_columns, *FAD_INF_COLUMNS)
        if has_kad(self.fad):
            fad_columns = (*fad_columns, *KAD_COLUMNS)
        if any(name in row for row in self.fad for name in SUBSET_COLUMNS):
            fad_columns = (*fad_columns, *SUBSET_COLUMNS)
        return {
            name: table_hash(rows, columns)
            for name, rows, columns in (
                ("ratings", self.ratings, RATING_COLUMNS),
                ("diversity", self.diversity, DIVERSITY_COLUMNS),
                ("fad", self.fad, fad_columns),
                ("teams", self.teams, TEAM_COLUMNS),
            )
        }


NUMERIC_COLUMNS = {
    "quality", "fit", "diversity", "fad_dev", "fad_eval", *FAD_INF_COLUMNS, *KAD_COLUMNS,
    *SUBSET_COLUMNS,
}  # fmt: skip


def has_fad_infinity(fad_rows: Iterable[Mapping]) -> bool:
    """Whether the FAD rows carry FAD-inf columns (values may still be empty where a set was
    too small for one)."""
    return any(name in row for row in fad_rows for name in FAD_INF_COLUMNS)


def _canonical(value, numeric: bool) -> str:
    if value is None:
        return ""
    if numeric:
        text = str(value).strip()
        try:
            # 7, "7" and 7.0 are the same rating whether read from a CSV file or the database.
            return repr(float(text)) if text else ""
        except ValueError:
            return text
    return str(value).strip()


def table_hash(rows: Iterable[Mapping], columns: Sequence[str]) -> str:
    """sha256 of a table in a canonical form: row order and number spelling do not matter."""
    numeric = [c in NUMERIC_COLUMNS for c in columns]
    lines = sorted(
        "\x1f".join(_canonical(row.get(c), n) for c, n in zip(columns, numeric, strict=True))
        for row in rows
    )
    digest = hashlib.sha256("\x1f".join(columns).encode())
    digest.update(b"\n")
    digest.update("\n".join(lines).encode())
    return digest.hexdigest()


def code_version() -> str:
    """Version of the scoring code: the package version and a hash of this module's source."""
    source = Path(__file__).read_bytes()
    return f"0.1.0+{hashlib.sha256(source).hexdigest()[:12]}"


# ---------------------------------------------------------------------------------------------
# Reading and checking rows


def read_csv(path: str | Path, columns: Sequence[str]) -> list[dict]:
    """Rows of a CSV file that has (at least) the given columns in its header."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ScoringInputError(
                    f"{path.name}: missing column(s) {', '.join(missing)}; "
                    f"expected {', '.join(columns)}"
                )
            # The platform's exports escape formula-like cells (stimuli/exports.py): read back
            # as written.
            return [
                {k: read_cell(v) if isinstance(v, str) else v for k, v in row.items()}
                for row in reader
            ]
    except OSError as exc:
        raise ScoringInputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def _text(value) -> str:
    return "" if value is None else str(value).strip()


def _number(value, what: str, line: int, *, optional: bool = False) -> float:
    text = _text(value)
    if text == "" and optional:
        return math.nan
    try:
        number = float(text)
    except ValueError:
        raise ScoringInputError(f"{what} row {line}: {text!r} is not a number") from None
    if not math.isfinite(number):
        raise ScoringInputError(f"{what} row {line}: {text!r} is not a finite number")
    return number


def _scale_value(value, what: str, column: str, line: int) -> float:
    number = _number(value, what, line)
    if not 0 <= number <= SCALE_MAX:
        raise ScoringInputError(
            f"{what} row {line}: {column} {number:g} is outside the scale (0 to {SCALE_MAX})"
        )
    return number


def _check_columns(rows: Sequence[Mapping], columns: Sequence[str], what: str) -> None:
    for line, row in enumerate(rows, start=1):
        missing = [c for c in columns if c not in row]
        if missing:
            raise ScoringInputError(f"{what} row {line}: missing {', '.join(missing)}")


# ---------------------------------------------------------------------------------------------
# Small statistics (kept here so that every number is computed one way)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks (ties share their mean rank)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return None
    return pearson(rankdata(x[keep]), rankdata(y[keep]))


def krippendorff_alpha_interval(units: Sequence, values: Sequence[float]) -> float | None:
    """Krippendorff's alpha (interval metric) from (unit, value) pairs, one pair per rating.

    Units with a single value are not pairable and are left out, as the coefficient defines.
    """
    values = np.asarray(values, float)
    if len(values) == 0:
        return None
    _, unit_idx = np.unique(np.asarray(units, dtype=object).astype(str), return_inverse=True)
    m = np.bincount(unit_idx)
    pairable = m[unit_idx] >= 2
    if pairable.sum() < 2:
        return None
    unit_idx, values = unit_idx[pairable], values[pairable]
    m = np.bincount(unit_idx)
    s1 = np.bincount(unit_idx, values)
    s2 = np.bincount(unit_idx, values * values)
    used = m >= 2
    n = float(values.size)
    # Sum over ordered pairs within a unit of (a - b)^2 is 2 (m S2 - S1^2).
    d_observed = np.sum(2 * (m[used] * s2[used] - s1[used] ** 2) / (m[used] - 1)) / n
    d_expected = 2 * (n * np.sum(values**2) - np.sum(values) ** 2) / (n * (n - 1))
    if d_expected <= 0:
        return None
    return float(1 - d_observed / d_expected)


def _mean(values: Iterable[float]) -> float | None:
    arr = np.asarray(list(values), float)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else None


def _r(value, digits: int = 6):
    if value is None:
        return None
    value = float(value)
    return round(value, digits) if math.isfinite(value) else None


# ---------------------------------------------------------------------------------------------
# Scoring


def _owner(team_of: Mapping[str, str], system: str, rater_team: str, rules: Rules, where: str):
    """The team of a rated system; a rating by a team member of a system missing from the teams
    table cannot be told apart from a self-rating, so it is refused rather than counted."""
    owner = team_of.get(system)
    if owner is None and rater_team and rules.remove_self_ratings:
        raise ScoringInputError(
            f"{where}: system {system!r} is not in the teams table, so ratings by its own team "
            "cannot be removed; add it there (or score with remove_self_ratings off)"
        )
    return owner


def _exclusion_reasons(verdict) -> list[str]:
    """Why a session is excluded: its misrated anchors (or that it has none answered) when the
    anchor rule excludes it, then each other rule that does, with its reason."""
    rules = {f.rule: f.reason for f in verdict.flags if f.action == "exclude"}
    reasons = []
    if "anchors" in rules:
        reasons = list(verdict.misratings) or [rules["anchors"]]
    return reasons + [f"{rule}: {reason}" for rule, reason in rules.items() if rule != "anchors"]


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


# ---------------------------------------------------------------------------------------------
# The stages of the scoring, in the order `score` runs them: each takes what the one before
# handed on and hands on one frozen record.


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
            return [_r(v) for v in found] if found else None
        if not self.boot:
            return None
        sample = self.boot[key][(slice(None), *index)]
        sample = sample[np.isfinite(sample)]
        if sample.size == 0:
            return None
        alpha = (1 - self.confidence) / 2
        lo, hi = np.quantile(sample, [alpha, 1 - alpha])
        return [_r(lo), _r(hi)]

    def p_above(self, upper: int, lower: int) -> float | None:
        """The probability that system `upper`'s final score is above system `lower`'s."""
        if self.jack is not None:
            return _r(self.jack.p_above("final", upper, lower), 4)
        if self.boot:
            a, b = self.boot["final"][:, upper], self.boot["final"][:, lower]
            ok = np.isfinite(a) & np.isfinite(b)
            if ok.any():
                return _r(np.mean((a[ok] > b[ok]) + 0.5 * (a[ok] == b[ok])), 4)
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
                out[name] = _r(value)
                out[f"{name}_ci"] = _ci(intervals.get(name))
        if self.with_inf:
            out.update(
                {n: _r(self.infinity.get((system, category), {}).get(n)) for n in FAD_INF_COLUMNS}
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
            out[name] = _r(arr.mean()) if arr.size else None
            out[f"{name}_min"] = _r(arr.min()) if arr.size else None
            out[f"{name}_max"] = _r(arr.max()) if arr.size else None
            out[f"{name}_sd"] = _r(arr.std()) if arr.size else None
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
                out[f"{name}_inf"] = _r(sum(inf) / len(inf)) if inf and None not in inf else None
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
    anchor_checks: int
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
    pairs: dict[str, list[dict]]
    unrated_systems: dict[str, list[dict]]
    incomplete_systems: dict[str, list[dict]]
    categories: list[str]
    fad_infinity: bool
    kad: bool
    analyses: dict
    counts: Counts
    self_ratings_removed: list[dict]
    settings: dict
    inputs: dict[str, str]
    code_version: str

    def to_dict(self) -> dict:
        league = {} if self.metric_league is None else {"metric_league": self.metric_league}
        return {
            "tracks": self.tracks,
            **league,
            "excluded_sessions": self.excluded_sessions,
            "flagged_sessions": self.flagged_sessions,
            "pairs": self.pairs,
            "unrated_systems": self.unrated_systems,
            "incomplete_systems": self.incomplete_systems,
            "categories": self.categories,
            "fad_infinity": self.fad_infinity,
            "kad": self.kad,
            "analyses": self.analyses,
            "counts": asdict(self.counts),
            "self_ratings_removed": self.self_ratings_removed,
            "settings": self.settings,
            "inputs": self.inputs,
            "code_version": self.code_version,
        }


def clean(inputs: Inputs, rules: Rules) -> Cleaned:
    """Check the columns, read the systems' teams and tracks, split trials from anchors and
    drop self-ratings."""
    _check_columns(inputs.ratings, RATING_COLUMNS, "ratings")
    _check_columns(inputs.diversity, DIVERSITY_COLUMNS, "diversity")
    _check_columns(inputs.fad, FAD_COLUMNS, "fad")
    _check_columns(inputs.teams, TEAM_COLUMNS, "teams")

    team_of: dict[str, str] = {}
    track_of: dict[str, str] = {}
    for line, row in enumerate(inputs.teams, start=1):
        system = _text(row["system"])
        if not system:
            raise ScoringInputError(f"teams row {line}: empty system")
        if system in team_of:
            raise ScoringInputError(f"teams row {line}: system {system!r} listed twice")
        team_of[system] = _text(row["team"])
        track_of[system] = _text(row["track"])

    trials: list[tuple] = []
    anchors: list[tuple] = []
    self_removed: dict[tuple[str, str], int] = defaultdict(int)
    for line, row in enumerate(inputs.ratings, start=1):
        role = _text(row["role"])
        rater, category = _text(row["rater"]), _text(row["category"])
        session = _text(row["session"])
        quality = _scale_value(row["quality"], "ratings", "quality", line)
        fit = _scale_value(row["fit"], "ratings", "fit", line)
        if not rater or not category:
            raise ScoringInputError(f"ratings row {line}: empty rater or category")
        if role == TRIAL:
            system = _text(row["system"])
            if not system:
                raise ScoringInputError(f"ratings row {line}: a trial without a system")
            track_of.setdefault(system, _text(row["track"]))
            rater_team = _text(row["rater_team"])
            owner = _owner(team_of, system, rater_team, rules, f"ratings row {line}")
            if rules.remove_self_ratings and rater_team and owner and rater_team == owner:
                self_removed[(rater, system)] += 1
                continue
            trials.append((rater, session, category, system, _text(row["stimulus"]), quality, fit))
        elif role in ANCHOR_ROLES:
            anchors.append((rater, session, category, role, quality, fit))
        elif role == GOLD:
            continue  # a trapping trial: judged by the rater-quality rules, never scored
        else:
            raise ScoringInputError(f"ratings row {line}: unknown role {role!r}")

    diversity: list[tuple] = []
    for line, row in enumerate(inputs.diversity, start=1):
        rater, system = _text(row["rater"]), _text(row["system"])
        category = _text(row["category"])
        value = _scale_value(row["diversity"], "diversity", "diversity", line)
        if not rater or not system or not category:
            raise ScoringInputError(f"diversity row {line}: empty rater, system or category")
        track_of.setdefault(system, _text(row["track"]))
        rater_team = _text(row["rater_team"])
        owner = _owner(team_of, system, rater_team, rules, f"diversity row {line}")
        if rules.remove_self_ratings and rater_team and owner and rater_team == owner:
            self_removed[(rater, system)] += 1
            continue
        diversity.append((rater, category, system, value))
    return Cleaned(team_of, track_of, trials, anchors, diversity, self_removed)


def check(cleaned: Cleaned, inputs: Inputs, rules: Rules) -> Checked:
    """Judge every session by the rater-quality rules (raters.rules), on all its answers,
    and keep the rows of the sessions not excluded."""
    verdicts = assess(inputs.ratings, rules.for_raters())
    # A session counts as checked when it holds checks or trials that count (not only its
    # team's own systems).
    with_trials = {(t[0], t[2], t[1]) for t in cleaned.trials}
    sessions = {key: v for key, v in verdicts.items() if v.anchors or key in with_trials}
    excluded_sessions = [
        {
            "rater": v.rater,
            "category": v.category,
            "session": v.session,
            "misrated": v.misrated,
            "checks": v.anchors,
            "reasons": _exclusion_reasons(v),
            "rules": {f.rule: f.reason for f in v.flags if f.action == "exclude"},
        }
        for v in sessions.values()
        if v.excluded
    ]
    flagged_sessions = [
        {
            "rater": v.rater,
            "category": v.category,
            "session": v.session,
            "flags": {f.rule: f.reason for f in v.flags},
        }
        for v in sessions.values()
        if v.flags and not v.excluded
    ]
    excluded_keys = {(e["rater"], e["category"], e["session"]) for e in excluded_sessions}
    # Diversity is asked once per category, so it goes with the rater's category session(s).
    excluded_pairs = {(e["rater"], e["category"]) for e in excluded_sessions}
    return Checked(
        sessions=sessions,
        excluded_sessions=excluded_sessions,
        flagged_sessions=flagged_sessions,
        trials=[t for t in cleaned.trials if (t[0], t[2], t[1]) not in excluded_keys],
        anchors=[a for a in cleaned.anchors if (a[0], a[2], a[1]) not in excluded_keys],
        diversity=[d for d in cleaned.diversity if (d[0], d[1]) not in excluded_pairs],
    )


def aggregate(checked: Checked, inputs: Inputs, rules: Rules) -> Aggregate:
    """Index the kept rows by system, category, rater and sound, and take the point estimate."""
    trials, diversity = checked.trials, checked.diversity
    rated_systems = sorted({t[3] for t in trials} | {d[2] for d in diversity})
    # Every category the test covered, even one whose ratings were all excluded.
    categories = sorted(
        {_text(r["category"]) for r in inputs.ratings}
        | {d[1] for d in diversity}
        | {_text(r["category"]) for r in inputs.fad}
    )
    sys_index = {s: i for i, s in enumerate(rated_systems)}
    cat_index = {c: i for i, c in enumerate(categories)}
    n_c = len(categories)
    n_cells = len(rated_systems) * n_c
    raters = sorted({t[0] for t in trials} | {d[0] for d in diversity})
    rater_index = {r: i for i, r in enumerate(raters)}

    t_cell = np.array([sys_index[t[3]] * n_c + cat_index[t[2]] for t in trials], dtype=np.int64)
    # Sounds are units within their cell: resampling sounds keeps every cell's size.
    unit_keys = [(int(c), t[4]) for c, t in zip(t_cell, trials, strict=True)]
    unit_list = sorted(set(unit_keys))
    unit_index = {u: i for i, u in enumerate(unit_list)}
    unit_cell = np.array([u[0] for u in unit_list], dtype=np.int64)
    cell_size = np.bincount(unit_cell, minlength=n_cells) if unit_list else np.zeros(n_cells, int)
    found = Aggregate(
        rules=rules,
        systems=rated_systems,
        categories=categories,
        raters=raters,
        sys_index=sys_index,
        cat_index=cat_index,
        n_units=len(unit_list),
        t_rater=np.array([rater_index[t[0]] for t in trials], dtype=np.int64),
        t_cell=t_cell,
        t_q=np.array([t[5] for t in trials], dtype=float),
        t_f=np.array([t[6] for t in trials], dtype=float),
        t_unit=np.array([unit_index[u] for u in unit_keys], dtype=np.int64),
        unit_cell=unit_cell,
        cell_size=cell_size,
        cell_start=np.concatenate([[0], np.cumsum(cell_size)[:-1]]).astype(np.int64),
        d_rater=np.array([rater_index[d[0]] for d in diversity], dtype=np.int64),
        d_cell=np.array(
            [sys_index[d[2]] * n_c + cat_index[d[1]] for d in diversity], dtype=np.int64
        ),
        d_v=np.array([d[3] for d in diversity], dtype=float),
    )
    return replace(found, point=found.estimate(np.ones(len(raters)), np.ones(len(unit_list))))


def bootstrap(
    agg: Aggregate, rules: Rules, progress: Callable[[int, int, str], None] | None = None
) -> Uncertainty:
    """The intervals' replicates: the jackknife-t (delete one rater or sound) or the
    percentile bootstrap over raters and sounds; none with `rules.bootstrap` 0."""
    n_raters, n_units = len(agg.raters), agg.n_units
    if not (rules.bootstrap and agg.systems):
        return Uncertainty(rules.confidence)
    if rules.intervals == JACKKNIFE_T:
        strata = rater_and_sound_strata(n_raters, agg.t_rater, agg.unit_cell)
        jack = Jackknife(
            agg.estimate, agg.point, strata, n_raters, n_units, bounds=(0.0, SCALE_MAX)
        )
        return Uncertainty(rules.confidence, jack=jack)
    # The percentile bootstrap (the other method Rules allows): a rating counts as often as its
    # rater and its sound were drawn. Raters of trials and raters of diversity alone (in DCASE,
    # a few organizers) are drawn apart, each group its own size, so every replicate holds both.
    rng = np.random.default_rng(rules.seed)
    draws = {k: [] for k in agg.point}
    rates_trials = np.zeros(n_raters, bool)
    rates_trials[agg.t_rater] = True
    strata = [np.flatnonzero(rates_trials), np.flatnonzero(~rates_trials)]
    for replicate in range(rules.bootstrap):
        if progress and replicate % 50 == 0:
            progress(replicate, rules.bootstrap, "Bootstrap")
        w_rater = np.zeros(n_raters)
        for stratum in strata:
            if stratum.size:
                drawn = stratum[rng.integers(0, stratum.size, stratum.size)]
                w_rater += np.bincount(drawn, minlength=n_raters)
        if n_units:
            size = agg.cell_size[agg.unit_cell]
            picks = agg.cell_start[agg.unit_cell] + np.floor(rng.random(n_units) * size).astype(
                np.int64
            )
            w_unit = np.bincount(picks, minlength=n_units).astype(float)
        else:
            w_unit = np.zeros(0)
        for key, value in agg.estimate(w_rater, w_unit, agg.point).items():
            draws[key].append(value)
    return Uncertainty(rules.confidence, boot={k: np.stack(v) for k, v in draws.items()})


def fad_table(inputs: Inputs, categories: list[str]) -> FadTable:
    """The designated model's FAD rows per system and category."""
    values: dict[tuple[str, str], tuple[float, float]] = {}
    kad: dict[tuple[str, str], tuple[float, float]] = {}
    intervals: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    infinity: dict[tuple[str, str], dict[str, float]] = {}
    track_of: dict[str, str] = {}
    try:
        model = designated_model(inputs.fad, inputs.fad_model)
    except ValueError as exc:
        raise ScoringInputError(str(exc)) from None
    for line, row in enumerate(inputs.fad, start=1):
        if not is_designated(row, model):
            continue
        system, category = _text(row["system"]), _text(row["category"])
        track_of.setdefault(system, _text(row["track"]))
        values[(system, category)] = (
            _number(row["fad_dev"], "fad", line, optional=True),
            _number(row["fad_eval"], "fad", line, optional=True),
        )
        kad[(system, category)] = (
            _number(row.get("kad_dev"), "fad", line, optional=True),
            _number(row.get("kad_eval"), "fad", line, optional=True),
        )
        intervals[(system, category)] = _fad_intervals(row, line)
        infinity[(system, category)] = {
            name: value
            for name in FAD_INF_COLUMNS
            if math.isfinite(value := _number(row.get(name), "fad", line, optional=True))
        }
    return FadTable(
        categories, model, has_fad_infinity(inputs.fad), values, intervals, infinity, track_of,
        kad, has_kad(r for r in inputs.fad if is_designated(r, model)),
    )  # fmt: skip


def _order(row: Mapping) -> tuple:
    """A leaderboard's order: higher final, then higher mean of quality and fit, then lower
    FAD-Eval."""

    def neg(v):
        return -v if v is not None else math.inf

    fad_eval = row["fad_eval"] if row["fad_eval"] is not None else math.inf
    return (neg(row["final"]), neg(row["quality_fit"]), fad_eval)


def _leaderboard_row(
    system: str, track: str, team: str, agg: Aggregate, unc: Uncertainty, fad: FadTable
) -> dict:
    i = agg.sys_index[system]
    point = agg.point
    q, f, d, final = (point[k][i] for k in ("q", "f", "d", "final"))
    n_ratings, n_diversity = agg.counts(i)
    row = {
        "system": system,
        "team": team,
        "track": track,
        "quality": _r(q),
        "quality_ci": unc.interval("q", (i,)),
        "fit": _r(f),
        "fit_ci": unc.interval("f", (i,)),
        "diversity": _r(d),
        "diversity_ci": unc.interval("d", (i,)),
        "final": _r(final),
        "final_ci": unc.interval("final", (i,)),
        "quality_fit": _r((q + f) / 2),
        "ci_withheld": unc.withheld((i,), ("q", "f", "d", "final")),
        **fad.summary(system),
        "n_ratings": n_ratings,
        "n_diversity": n_diversity,
        "categories": {},
    }
    for c, category in enumerate(agg.categories):
        row["categories"][category] = {
            "quality": _r(point["cq"][i, c]),
            "quality_ci": unc.interval("cq", (i, c)),
            "fit": _r(point["cf"][i, c]),
            "fit_ci": unc.interval("cf", (i, c)),
            "diversity": _r(point["cd"][i, c]),
            "diversity_ci": unc.interval("cd", (i, c)),
            "final": _r(point["cfinal"][i, c]),
            "final_ci": unc.interval("cfinal", (i, c)),
            **fad.cell(system, category),
            "ci_withheld": unc.withheld((i, c), ("cq", "cf", "cd", "cfinal")),
        }
    return row


def rank(
    cleaned: Cleaned, agg: Aggregate, unc: Uncertainty, fad: FadTable, rules: Rules
) -> Ranking:
    """Leaderboards per track with ties and the probability of each neighbouring order; the
    systems not rated, or lacking what others have, apart."""
    team_of = cleaned.team_of
    # A system's track from the teams table, else its first rating, else its first FAD row.
    track_of = {**fad.track_of, **cleaned.track_of}
    missing = _missing_cells(agg.point, agg.systems, agg.categories, rules)
    tracks: dict[str, list[dict]] = {}
    pairs: dict[str, list[dict]] = {}
    unrated: dict[str, list[dict]] = {}
    incomplete: dict[str, list[dict]] = {}
    all_systems = sorted(set(track_of) | set(agg.systems))
    for track in sorted({track_of.get(s, "") for s in all_systems}):
        members = [s for s in agg.systems if track_of.get(s, "") == track]
        unrated_here = [
            s for s in all_systems if track_of.get(s, "") == track and s not in agg.sys_index
        ]
        if unrated_here:
            # Not in the listening test (e.g. not a finalist): shown with their FAD only.
            unrated[track] = [
                {"system": s, "team": team_of.get(s, ""), **fad.summary(s)} for s in unrated_here
            ]
        if lacking := [s for s in members if s in missing]:
            incomplete[track] = [
                {
                    "system": s,
                    "team": team_of.get(s, ""),
                    "missing": "; ".join(missing[s]),
                    "quality": _r(agg.point["q"][agg.sys_index[s]]),
                    "fit": _r(agg.point["f"][agg.sys_index[s]]),
                    "diversity": _r(agg.point["d"][agg.sys_index[s]]),
                    **fad.summary(s),
                }
                for s in lacking
            ]
            members = [s for s in members if s not in missing]
        rows = [_leaderboard_row(s, track, team_of.get(s, ""), agg, unc, fad) for s in members]
        rows.sort(key=lambda r: (_order(r), r["system"]))
        for position, row in enumerate(rows, start=1):
            if position > 1 and _order(rows[position - 2]) == _order(row):
                row["rank"] = rows[position - 2]["rank"]  # a full tie shares the rank
            else:
                row["rank"] = position
        track_pairs = []
        for upper, lower in pairwise(rows):
            probability = unc.p_above(
                agg.sys_index[upper["system"]], agg.sys_index[lower["system"]]
            )
            upper["p_above_next"] = probability
            track_pairs.append(
                {"upper": upper["system"], "lower": lower["system"], "probability": probability}
            )
        if rows:
            rows[-1]["p_above_next"] = None
        tracks[track] = rows
        pairs[track] = track_pairs
    return Ranking(tracks, pairs, unrated, incomplete)


def analyse(
    ranking: Ranking, checked: Checked, agg: Aggregate, fad: FadTable, inputs: Inputs, rules: Rules
) -> Analysis:
    """The analyses of the ratings and, with models in the FAD rows, the metric league."""
    analyses = _analyses(ranking.tracks, checked, agg)
    league = None
    if fad_models(inputs.fad):
        league = metric_league(
            inputs.fad, ranking.tracks, agg.categories, fad.model, replicates=rules.bootstrap,
            confidence=rules.confidence, seed=rules.seed,
        )  # fmt: skip
    return Analysis(analyses, league)


def score_result(
    inputs: Inputs,
    rules: Rules | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Result:
    """Score a challenge through its stages; the typed form of `score`'s result."""
    rules = rules or Rules()
    cleaned = clean(inputs, rules)
    checked = check(cleaned, inputs, rules)
    agg = aggregate(checked, inputs, rules)
    unc = bootstrap(agg, rules, progress)
    fad = fad_table(inputs, agg.categories)
    ranking = rank(cleaned, agg, unc, fad, rules)
    analysis = analyse(ranking, checked, agg, fad, inputs, rules)
    return Result(
        tracks=ranking.tracks,
        metric_league=analysis.metric_league,
        excluded_sessions=checked.excluded_sessions,
        flagged_sessions=checked.flagged_sessions,
        pairs=ranking.pairs,
        unrated_systems=ranking.unrated,
        incomplete_systems=ranking.incomplete,
        categories=agg.categories,
        fad_infinity=fad.with_inf,
        kad=fad.with_kad,
        analyses=analysis.analyses,
        counts=Counts(
            ratings=len(inputs.ratings),
            self_ratings_removed=sum(cleaned.self_removed.values()),
            trial_ratings_used=len(checked.trials),
            trial_ratings_excluded=len(cleaned.trials) - len(checked.trials),
            diversity_ratings_used=len(checked.diversity),
            diversity_ratings_excluded=len(cleaned.diversity) - len(checked.diversity),
            anchor_checks=len(cleaned.anchors),
            sessions_checked=len(checked.sessions),
            sessions_excluded=len(checked.excluded_sessions),
            raters=len(agg.raters),
        ),
        self_ratings_removed=[
            {"rater": rater, "system": system, "ratings": n}
            for (rater, system), n in sorted(cleaned.self_removed.items())
        ],
        settings=rules.to_dict(),
        inputs=inputs.hashes(),
        code_version=code_version(),
    )


def score(
    inputs: Inputs,
    rules: Rules | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict:
    """Score a challenge; returns a JSON-ready dict (see `score_offline` and the README)."""
    return score_result(inputs, rules, progress).to_dict()


def _fad_intervals(row: Mapping, line: int) -> dict[str, tuple[float, float]]:
    """A FAD row's optional intervals (`fad_eval_low`, `fad_eval_high`, and of FAD-Dev, KAD-Eval
    and KAD-Dev)."""
    out = {}
    for name in (f"{metric}_{ref}" for metric in METRICS for ref in ("dev", "eval")):
        low = _number(row.get(f"{name}_low"), "fad", line, optional=True)
        high = _number(row.get(f"{name}_high"), "fad", line, optional=True)
        if math.isfinite(low) and math.isfinite(high):
            out[name] = (low, high)
    return out


def _ci(pair) -> list | None:
    return [_r(pair[0]), _r(pair[1])] if pair else None


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
    return [_r(max(mean - below, 0.0)), _r(max(mean + above, 0.0))]


def _missing_cells(
    point: Mapping[str, np.ndarray], systems: Sequence[str], categories: Sequence[str], rules: Rules
) -> dict[str, list[str]]:
    """What each rated system lacks that other systems have, scale by scale and category by
    category. Such a system is not ranked: its mean would be over fewer categories or scales
    than the others', another quantity. DCASE had every finalist rated in every category."""
    out: dict[str, list[str]] = {}
    for name, cells, weight in (
        ("quality and fit", point["cq"], rules.weight_quality + rules.weight_fit),
        ("diversity", point["cd"], rules.weight_diversity),
    ):
        if weight <= 0 or not len(systems):
            continue
        present = np.isfinite(cells)
        used = present.any(axis=0)
        for i, system in enumerate(systems):
            lacking = [categories[c] for c in np.flatnonzero(used & ~present[i])]
            if lacking:
                out.setdefault(system, []).append(f"{name} in {', '.join(lacking)}")
    return out


def _analyses(tracks: Mapping[str, list[dict]], checked: Checked, agg: Aggregate) -> dict:
    categories, cat_index, point = agg.categories, agg.cat_index, agg.point
    trials, diversity, anchors_kept = checked.trials, checked.diversity, checked.anchors
    fad_spearman = {}
    for track, rows in tracks.items():
        final_rank = [r["rank"] for r in rows]
        entry = {"n": len(rows)}
        kad = ("kad_eval", "kad_dev") if rows and "kad_eval" in rows[0] else ()
        for name in ("fad_eval", "fad_dev", *kad):
            values = [r[name] if r[name] is not None else math.nan for r in rows]
            # Lower FAD is better, so rank 1 is the lowest FAD, like final rank 1 is the best.
            entry[name] = _r(spearman(values, final_rank), 4)
        fad_spearman[track] = entry

    quality_fit = {}
    for category in categories:
        c = cat_index[category]
        here = [t for t in trials if t[2] == category]
        cq, cf = point["cq"][:, c], point["cf"][:, c]
        quality_fit[category] = {
            "trials": _r(pearson([t[5] for t in here], [t[6] for t in here]), 4),
            "n_trials": len(here),
            "system_means": _r(pearson(cq, cf), 4),
            "n_systems": int(np.sum(np.isfinite(cq) & np.isfinite(cf))),
        }

    cf, cd = point["cf"].ravel(), point["cd"].ravel()
    diversity_fit = {
        "system_category_means": _r(pearson(cf, cd), 4),
        "n_system_categories": int(np.sum(np.isfinite(cf) & np.isfinite(cd))),
        "system_means": _r(pearson(point["f"], point["d"]), 4),
        "n_systems": int(np.sum(np.isfinite(point["f"]) & np.isfinite(point["d"]))),
    }

    anchors = {}
    for role in ANCHOR_ROLES:
        here = [a for a in anchors_kept if a[3] == role]
        anchors[role] = {
            "quality": _r(_mean(a[4] for a in here)),
            "fit": _r(_mean(a[5] for a in here)),
            "n": len(here),
        }
    trial_mean = {
        "quality": _r(_mean(t[5] for t in trials)),
        "fit": _r(_mean(t[6] for t in trials)),
        "n": len(trials),
    }

    units = [f"{t[3]}|{t[2]}|{t[4]}" for t in trials]
    agreement = {
        "quality": _r(krippendorff_alpha_interval(units, [t[5] for t in trials]), 4),
        "fit": _r(krippendorff_alpha_interval(units, [t[6] for t in trials]), 4),
        "diversity": _r(
            krippendorff_alpha_interval(
                [f"{d[2]}|{d[1]}" for d in diversity], [d[3] for d in diversity]
            ),
            4,
        ),
        "metric": "interval",
    }
    return {
        "fad_spearman": fad_spearman,
        "quality_fit": quality_fit,
        "diversity_fit": diversity_fit,
        "anchors": anchors,
        "trials": trial_mean,
        "agreement": agreement,
    }


def score_files(
    ratings: str | Path,
    diversity: str | Path,
    fad: str | Path,
    teams: str | Path,
    rules: Rules | None = None,
    fad_model: str = "",
) -> dict:
    """Score a challenge from the four CSV files alone."""
    inputs = Inputs(
        ratings=read_csv(ratings, RATING_COLUMNS),
        diversity=read_csv(diversity, DIVERSITY_COLUMNS),
        fad=read_csv(fad, FAD_COLUMNS),
        teams=read_csv(teams, TEAM_COLUMNS),
        fad_model=fad_model,
    )
    return score(inputs, rules)
