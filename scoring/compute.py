"""The scoring of a challenge: rows in, one result out. No Django here.

The same function scores a challenge behind the publish button and from released CSV files on the
command line (`score_offline`), so both give the same numbers for the same rows and rules.

Inputs (lists of dicts, the listening test's export format and the FAD and teams formats):

- ratings: `rater, rater_team, session, category, system, track, stimulus, role, quality, fit`
- diversity: `rater, rater_team, category, system, track, diversity`
- fad: `system, track, category, fad_dev, fad_eval`; optional `fad_dev_low`, `fad_dev_high`,
  `fad_eval_low`, `fad_eval_high` (intervals), `fad_dev_inf`, `fad_eval_inf` (FAD-inf: with
  these columns the leaderboard shows FAD-inf, absent otherwise) and `model`
- teams: `system, team, track`
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

# DCASE 2023 Task 7's check rule (DEFAULT_MISRATING) and the other rater-quality rules.
from raters.quality import (
    ANCHOR_ROLES,
    CONDITIONS,
    DEFAULT_MISRATING,
    QualityRuleError,
    QualityRules,
    judge,
)
from stimuli.errors import Refused

from .intervals import BOOTSTRAP_PERCENTILE, JACKKNIFE_T, Jackknife, rater_and_sound_strata
from .intervals import METHODS as INTERVAL_METHODS
from .league import designated_model, fad_models, is_designated, metric_league

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
    exclude_at: int = 5  # a session with this many misrated checks or more is excluded whole
    # Checks a complete session holds; a session left part-way is held to the same share of
    # misrated checks (0: sessions have no checks, and none is excluded for lacking them).
    checks_per_session: int = 12
    remove_self_ratings: bool = True
    # The other rater-quality rules and the anchor rule's action (see raters.quality); the
    # anchor rule's parameters are the fields above.
    quality: Mapping[str, Mapping] = field(default_factory=dict)
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
        if self.checks_per_session < 0:
            raise ScoringInputError("checks_per_session must be 0 or more")
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
            self.quality_rules()
        except QualityRuleError as exc:
            raise ScoringInputError(str(exc)) from None

    def quality_rules(self) -> QualityRules:
        """The rater-quality rules these settings make (raters.quality judges sessions)."""
        given = {name: dict(values) for name, values in dict(self.quality or {}).items()}
        given["anchors"] = {
            **given.get("anchors", {}),
            "low": self.low,
            "high": self.high,
            "misrating": {k: list(v) for k, v in self.misrating.items()},
            "exclude_at": self.exclude_at,
            "checks_per_session": self.checks_per_session,
        }
        return QualityRules(given)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["misrating"] = {k: list(v) for k, v in self.misrating.items()}
        data["quality"] = {k: dict(v) for k, v in dict(self.quality or {}).items()}
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
        return {
            name: table_hash(rows, columns)
            for name, rows, columns in (
                ("ratings", self.ratings, RATING_COLUMNS),
                ("diversity", self.diversity, DIVERSITY_COLUMNS),
                ("fad", self.fad, fad_columns),
                ("teams", self.teams, TEAM_COLUMNS),
            )
        }


NUMERIC_COLUMNS = {"quality", "fit", "diversity", "fad_dev", "fad_eval", *FAD_INF_COLUMNS}


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
            return [dict(row) for row in reader]
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
    """Why a session is excluded: its misrated checks (or that it has none answered) when the
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


def score(
    inputs: Inputs,
    rules: Rules | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict:
    """Score a challenge; returns a JSON-ready dict (see `score_offline` and the README)."""
    rules = rules or Rules()
    _check_columns(inputs.ratings, RATING_COLUMNS, "ratings")
    _check_columns(inputs.diversity, DIVERSITY_COLUMNS, "diversity")
    _check_columns(inputs.fad, FAD_COLUMNS, "fad")
    _check_columns(inputs.teams, TEAM_COLUMNS, "teams")

    # Systems, their teams and tracks.
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

    # Ratings: split trials and anchors; drop self-ratings.
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

    # Every session judged by the rater-quality rules (raters.quality), on all its answers.
    verdicts = judge(inputs.ratings, rules.quality_rules())
    # A session counts as checked when it holds checks or trials that count (not only its
    # team's own systems).
    with_trials = {(t[0], t[2], t[1]) for t in trials}
    sessions = {key: v for key, v in verdicts.items() if v.checks or key in with_trials}
    excluded_sessions = [
        {
            "rater": v.rater,
            "category": v.category,
            "session": v.session,
            "misrated": v.misrated,
            "checks": v.checks,
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
    n_trials_before = len(trials)
    trials = [t for t in trials if (t[0], t[2], t[1]) not in excluded_keys]
    anchors_kept = [a for a in anchors if (a[0], a[2], a[1]) not in excluded_keys]
    n_div_before = len(diversity)
    diversity = [d for d in diversity if (d[0], d[1]) not in excluded_pairs]

    # Index spaces.
    rated_systems = sorted({t[3] for t in trials} | {d[2] for d in diversity})
    # Every category the test covered, even one whose ratings were all excluded.
    categories = sorted(
        {_text(r["category"]) for r in inputs.ratings}
        | {d[1] for d in diversity}
        | {_text(r["category"]) for r in inputs.fad}
    )
    sys_index = {s: i for i, s in enumerate(rated_systems)}
    cat_index = {c: i for i, c in enumerate(categories)}
    n_s, n_c = len(rated_systems), len(categories)
    n_cells = n_s * n_c
    raters = sorted({t[0] for t in trials} | {d[0] for d in diversity})
    rater_index = {r: i for i, r in enumerate(raters)}

    t_rater = np.array([rater_index[t[0]] for t in trials], dtype=np.int64)
    t_cell = np.array([sys_index[t[3]] * n_c + cat_index[t[2]] for t in trials], dtype=np.int64)
    t_q = np.array([t[5] for t in trials], dtype=float)
    t_f = np.array([t[6] for t in trials], dtype=float)
    # Sounds are units within their cell: resampling sounds keeps every cell's size.
    unit_keys = [(int(c), t[4]) for c, t in zip(t_cell, trials, strict=True)]
    unit_list = sorted(set(unit_keys))
    unit_index = {u: i for i, u in enumerate(unit_list)}
    t_unit = np.array([unit_index[u] for u in unit_keys], dtype=np.int64)
    unit_cell = np.array([u[0] for u in unit_list], dtype=np.int64)
    cell_size = np.bincount(unit_cell, minlength=n_cells) if unit_list else np.zeros(n_cells, int)
    cell_start = np.concatenate([[0], np.cumsum(cell_size)[:-1]]).astype(np.int64)
    d_rater = np.array([rater_index[d[0]] for d in diversity], dtype=np.int64)
    d_cell = np.array([sys_index[d[2]] * n_c + cat_index[d[1]] for d in diversity], dtype=np.int64)
    d_v = np.array([d[3] for d in diversity], dtype=float)

    def estimate(w_rater, w_unit, reference=None):
        w_t = w_rater[t_rater] * w_unit[t_unit] if len(trials) else np.zeros(0)
        w_d = w_rater[d_rater] if len(diversity) else np.zeros(0)
        cq = _cell_means(t_cell, w_t, t_q, n_cells).reshape(n_s, n_c)
        cf = _cell_means(t_cell, w_t, t_f, n_cells).reshape(n_s, n_c)
        cd = _cell_means(d_cell, w_d, d_v, n_cells).reshape(n_s, n_c)
        sq, sf, sd = _row_nanmean(cq), _row_nanmean(cf), _row_nanmean(cd)
        out = {
            "cq": cq,
            "cf": cf,
            "cd": cd,
            "cfinal": _combine(cq, cf, cd, rules),
            "q": sq,
            "f": sf,
            "d": sd,
            "final": _combine(sq, sf, sd, rules),
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

    point = estimate(np.ones(len(raters)), np.ones(len(unit_list)))

    # Bootstrap over raters and sounds: a rating counts as often as its rater and its sound
    # were drawn. Raters of trials and raters of diversity alone (in DCASE, a few organizers)
    # are drawn apart, each group its own size, so every replicate holds both kinds.
    boot: dict[str, np.ndarray] = {}
    jack = None
    if rules.bootstrap and n_s and rules.intervals == JACKKNIFE_T:
        jack = Jackknife(
            estimate,
            point,
            rater_and_sound_strata(len(raters), t_rater, unit_cell),
            len(raters),
            len(unit_list),
        )
    if rules.bootstrap and n_s and rules.intervals == BOOTSTRAP_PERCENTILE:
        rng = np.random.default_rng(rules.seed)
        draws = {k: [] for k in point}
        n_units = len(unit_list)
        rates_trials = np.zeros(len(raters), bool)
        rates_trials[t_rater] = True
        strata = [np.flatnonzero(rates_trials), np.flatnonzero(~rates_trials)]
        for replicate in range(rules.bootstrap):
            if progress and replicate % 50 == 0:
                progress(replicate, rules.bootstrap, "Bootstrap")
            w_rater = np.zeros(len(raters))
            for stratum in strata:
                if stratum.size:
                    drawn = stratum[rng.integers(0, stratum.size, stratum.size)]
                    w_rater += np.bincount(drawn, minlength=len(raters))
            if n_units:
                size = cell_size[unit_cell]
                picks = cell_start[unit_cell] + np.floor(rng.random(n_units) * size).astype(
                    np.int64
                )
                w_unit = np.bincount(picks, minlength=n_units).astype(float)
            else:
                w_unit = np.zeros(0)
            for key, value in estimate(w_rater, w_unit, point).items():
                draws[key].append(value)
        boot = {k: np.stack(v) for k, v in draws.items()}
    alpha = (1 - rules.confidence) / 2

    def interval(key: str, index) -> list | None:
        if jack is not None:
            found = jack.interval(key, index, rules.confidence)
            return [_r(v) for v in found] if found else None
        if not boot:
            return None
        sample = boot[key][(slice(None), *index)]
        sample = sample[np.isfinite(sample)]
        if sample.size == 0:
            return None
        lo, hi = np.quantile(sample, [alpha, 1 - alpha])
        return [_r(lo), _r(hi)]

    # FAD per system and category.
    fad: dict[tuple[str, str], tuple[float, float]] = {}
    fad_ci: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    fad_inf: dict[tuple[str, str], dict[str, float]] = {}
    with_inf = has_fad_infinity(inputs.fad)
    try:
        fad_model = designated_model(inputs.fad, inputs.fad_model)
    except ValueError as exc:
        raise ScoringInputError(str(exc)) from None
    for line, row in enumerate(inputs.fad, start=1):
        if not is_designated(row, fad_model):
            continue
        system = _text(row["system"])
        track_of.setdefault(system, _text(row["track"]))
        fad[(system, _text(row["category"]))] = (
            _number(row["fad_dev"], "fad", line, optional=True),
            _number(row["fad_eval"], "fad", line, optional=True),
        )
        fad_ci[(system, _text(row["category"]))] = _fad_intervals(row, line)
        fad_inf[(system, _text(row["category"]))] = {
            name: value
            for name in FAD_INF_COLUMNS
            if math.isfinite(value := _number(row.get(name), "fad", line, optional=True))
        }

    def fad_summary(system: str) -> dict:
        values = [fad[(system, c)] for c in categories if (system, c) in fad]
        dev = np.array([v[0] for v in values], float)
        ev = np.array([v[1] for v in values], float)
        out = {}
        for name, arr in (("fad_dev", dev), ("fad_eval", ev)):
            arr = arr[np.isfinite(arr)]
            out[name] = _r(arr.mean()) if arr.size else None
            out[f"{name}_min"] = _r(arr.min()) if arr.size else None
            out[f"{name}_max"] = _r(arr.max()) if arr.size else None
            out[f"{name}_sd"] = _r(arr.std()) if arr.size else None
            out[f"{name}_ci"] = _mean_interval(
                [(fad[(system, c)], fad_ci[(system, c)].get(name)) for c in categories
                 if (system, c) in fad], 0 if name == "fad_dev" else 1
            )  # fmt: skip
            if with_inf:
                # Over the categories the FAD mean covers, and only when each has its FAD-inf:
                # a mean over fewer categories would be another quantity.
                index = 0 if name == "fad_dev" else 1
                inf = [
                    fad_inf[(system, c)].get(f"{name}_inf")
                    for c in categories
                    if (system, c) in fad and math.isfinite(fad[(system, c)][index])
                ]
                out[f"{name}_inf"] = _r(sum(inf) / len(inf)) if inf and None not in inf else None
        return out

    missing = _missing_cells(point, rated_systems, categories, rules)

    # Leaderboards per track.
    tracks: dict[str, list[dict]] = {}
    pairs: dict[str, list[dict]] = {}
    unrated: dict[str, list[dict]] = {}
    incomplete: dict[str, list[dict]] = {}
    all_systems = sorted(set(track_of) | set(rated_systems))
    for track in sorted({track_of.get(s, "") for s in all_systems}):
        members = [s for s in rated_systems if track_of.get(s, "") == track]
        unrated_here = [
            s for s in all_systems if track_of.get(s, "") == track and s not in sys_index
        ]
        if unrated_here:
            # Not in the listening test (e.g. not a finalist): shown with their FAD only.
            unrated[track] = [
                {"system": s, "team": team_of.get(s, ""), **fad_summary(s)} for s in unrated_here
            ]
        if lacking := [s for s in members if s in missing]:
            incomplete[track] = [
                {
                    "system": s,
                    "team": team_of.get(s, ""),
                    "missing": "; ".join(missing[s]),
                    "quality": _r(point["q"][sys_index[s]]),
                    "fit": _r(point["f"][sys_index[s]]),
                    "diversity": _r(point["d"][sys_index[s]]),
                    **fad_summary(s),
                }
                for s in lacking
            ]
            members = [s for s in members if s not in missing]
        rows = []
        for system in members:
            i = sys_index[system]
            q, f, d, final = (point[k][i] for k in ("q", "f", "d", "final"))
            fs = fad_summary(system)
            row = {
                "system": system,
                "team": team_of.get(system, ""),
                "track": track,
                "quality": _r(q),
                "quality_ci": interval("q", (i,)),
                "fit": _r(f),
                "fit_ci": interval("f", (i,)),
                "diversity": _r(d),
                "diversity_ci": interval("d", (i,)),
                "final": _r(final),
                "final_ci": interval("final", (i,)),
                "quality_fit": _r((q + f) / 2),
                "ci_withheld": _withheld(jack, (i,), ("q", "f", "d", "final")),
                **fs,
                "n_ratings": int(np.sum(t_cell // max(n_c, 1) == i)) if len(trials) else 0,
                "n_diversity": int(np.sum(d_cell // max(n_c, 1) == i)) if len(diversity) else 0,
                "categories": {},
            }
            for c, category in enumerate(categories):
                fd = fad.get((system, category), (math.nan, math.nan))
                row["categories"][category] = {
                    "quality": _r(point["cq"][i, c]),
                    "quality_ci": interval("cq", (i, c)),
                    "fit": _r(point["cf"][i, c]),
                    "fit_ci": interval("cf", (i, c)),
                    "diversity": _r(point["cd"][i, c]),
                    "diversity_ci": interval("cd", (i, c)),
                    "final": _r(point["cfinal"][i, c]),
                    "final_ci": interval("cfinal", (i, c)),
                    "fad_dev": _r(fd[0]),
                    "fad_dev_ci": _ci(fad_ci.get((system, category), {}).get("fad_dev")),
                    "fad_eval": _r(fd[1]),
                    "fad_eval_ci": _ci(fad_ci.get((system, category), {}).get("fad_eval")),
                    **(
                        {n: _r(fad_inf.get((system, category), {}).get(n)) for n in FAD_INF_COLUMNS}
                        if with_inf
                        else {}
                    ),
                    "ci_withheld": _withheld(jack, (i, c), ("cq", "cf", "cd", "cfinal")),
                }
            rows.append(row)

        def sort_key(row):
            # Higher final, then higher mean of quality and fit, then lower FAD-Eval.
            def neg(v):
                return -v if v is not None else math.inf

            fad_eval = row["fad_eval"] if row["fad_eval"] is not None else math.inf
            return (neg(row["final"]), neg(row["quality_fit"]), fad_eval)

        rows.sort(key=lambda r: (sort_key(r), r["system"]))
        for position, row in enumerate(rows, start=1):
            if position > 1 and sort_key(rows[position - 2]) == sort_key(row):
                row["rank"] = rows[position - 2]["rank"]  # a full tie shares the rank
            else:
                row["rank"] = position
        track_pairs = []
        for upper, lower in pairwise(rows):
            probability = None
            if jack is not None:
                found = jack.p_above(
                    "final", sys_index[upper["system"]], sys_index[lower["system"]]
                )
                probability = _r(found, 4)
            elif boot:
                a = boot["final"][:, sys_index[upper["system"]]]
                b = boot["final"][:, sys_index[lower["system"]]]
                ok = np.isfinite(a) & np.isfinite(b)
                if ok.any():
                    probability = _r(np.mean((a[ok] > b[ok]) + 0.5 * (a[ok] == b[ok])), 4)
            upper["p_above_next"] = probability
            track_pairs.append(
                {"upper": upper["system"], "lower": lower["system"], "probability": probability}
            )
        if rows:
            rows[-1]["p_above_next"] = None
        tracks[track] = rows
        pairs[track] = track_pairs

    analyses = _analyses(
        tracks, categories, trials, diversity, anchors_kept, point, sys_index, cat_index
    )
    league = {}
    if fad_models(inputs.fad):
        league["metric_league"] = metric_league(
            inputs.fad, tracks, categories, fad_model, replicates=rules.bootstrap,
            confidence=rules.confidence, seed=rules.seed,
        )  # fmt: skip
    return {
        "tracks": tracks,
        **league,
        "excluded_sessions": excluded_sessions,
        "flagged_sessions": flagged_sessions,
        "pairs": pairs,
        "unrated_systems": unrated,
        "incomplete_systems": incomplete,
        "categories": categories,
        "fad_infinity": with_inf,
        "analyses": analyses,
        "counts": {
            "ratings": len(inputs.ratings),
            "self_ratings_removed": sum(self_removed.values()),
            "trial_ratings_used": len(trials),
            "trial_ratings_excluded": n_trials_before - len(trials),
            "diversity_ratings_used": len(diversity),
            "diversity_ratings_excluded": n_div_before - len(diversity),
            "anchor_checks": len(anchors),
            "sessions_checked": len(sessions),
            "sessions_excluded": len(excluded_sessions),
            "raters": len(raters),
        },
        "self_ratings_removed": [
            {"rater": rater, "system": system, "ratings": n}
            for (rater, system), n in sorted(self_removed.items())
        ],
        "settings": rules.to_dict(),
        "inputs": inputs.hashes(),
        "code_version": code_version(),
    }


def _fad_intervals(row: Mapping, line: int) -> dict[str, tuple[float, float]]:
    """A FAD row's optional intervals (`fad_eval_low`, `fad_eval_high`, and of FAD-Dev)."""
    out = {}
    for name in ("fad_dev", "fad_eval"):
        low = _number(row.get(f"{name}_low"), "fad", line, optional=True)
        high = _number(row.get(f"{name}_high"), "fad", line, optional=True)
        if math.isfinite(low) and math.isfinite(high):
            out[name] = (low, high)
    return out


def _ci(pair) -> list | None:
    return [_r(pair[0]), _r(pair[1])] if pair else None


def _mean_interval(cells: Sequence[tuple], index: int) -> list | None:
    """An interval of the mean FAD over categories from each category's interval: categories
    hold different clips, so their errors are independent and add in quadrature (each side
    apart, since basic bootstrap intervals are not symmetric). None unless every category
    has one."""
    values = [(v[index], ci) for v, ci in cells if math.isfinite(v[index])]
    if not values or any(ci is None for _, ci in values):
        return None
    n = len(values)
    mean = sum(v for v, _ in values) / n
    below = math.sqrt(sum((v - ci[0]) ** 2 for v, ci in values)) / n
    above = math.sqrt(sum((ci[1] - v) ** 2 for v, ci in values)) / n
    return [_r(mean - below), _r(mean + above)]


def _withheld(jack: Jackknife | None, index: tuple, keys: Sequence[str]) -> dict[str, str]:
    """Per scale, why its interval at `index` is withheld (too few raters), where it is."""
    if jack is None:
        return {}
    names = zip(("quality", "fit", "diversity", "final"), keys, strict=True)
    return {name: why for name, key in names if (why := jack.withheld(key, index))}


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


def _analyses(tracks, categories, trials, diversity, anchors_kept, point, sys_index, cat_index):
    fad_spearman = {}
    for track, rows in tracks.items():
        final_rank = [r["rank"] for r in rows]
        entry = {"n": len(rows)}
        for name in ("fad_eval", "fad_dev"):
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
