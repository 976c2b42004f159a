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
- predictors (optional): `system, track, category, predictor, axis, clips, mean, low, high`, the
  learned predictors' means (scoring/predictors.py), beside FAD and KAD
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import numpy as np

# DCASE 2023 Task 7's anchor rule (DEFAULT_MISRATING) and the other rater-quality rules.
from raters import favouritism
from raters.rules import ANCHOR_ROLES, GOLD, add_panel_flags, assess, assess_panel

from .inputs import (
    DIVERSITY_COLUMNS,
    FAD_COLUMNS,
    FAD_INF_COLUMNS,
    METRICS,
    PREDICTOR_COLUMNS,
    RATING_COLUMNS,
    SCALE_MAX,
    TEAM_COLUMNS,
    TRIAL,
    Inputs,
    ScoringInputError,
    cell_number,
    cell_text,
    check_columns,
    has_fad_infinity,
    read_csv,
    scale_value,
)
from .intervals import JACKKNIFE_T, Jackknife, rater_and_sound_strata
from .league import (
    designated_model,
    fad_models,
    has_kad,
    is_designated,
    metric_league,
)
from .predictors import PredictorTable, predictor_table
from .rules import Rules
from .stages import (
    Aggregate,
    Analysis,
    Checked,
    Cleaned,
    Counts,
    FadTable,
    Ranking,
    Result,
    Uncertainty,
    code_version,
)
from .statistics import finite_mean, krippendorff_alpha_interval, pearson, rounded, spearman


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


def clean(inputs: Inputs, rules: Rules) -> Cleaned:
    """Check the columns, read the systems' teams and tracks, split trials from anchors and
    drop self-ratings."""
    check_columns(inputs.ratings, RATING_COLUMNS, "ratings")
    check_columns(inputs.diversity, DIVERSITY_COLUMNS, "diversity")
    check_columns(inputs.fad, FAD_COLUMNS, "fad")
    check_columns(inputs.teams, TEAM_COLUMNS, "teams")

    team_of: dict[str, str] = {}
    track_of: dict[str, str] = {}
    for line, row in enumerate(inputs.teams, start=1):
        system = cell_text(row["system"])
        if not system:
            raise ScoringInputError(f"teams row {line}: empty system")
        if system in team_of:
            raise ScoringInputError(f"teams row {line}: system {system!r} listed twice")
        team_of[system] = cell_text(row["team"])
        track_of[system] = cell_text(row["track"])

    trials: list[tuple] = []
    anchors: list[tuple] = []
    self_removed: dict[tuple[str, str], int] = defaultdict(int)
    for line, row in enumerate(inputs.ratings, start=1):
        role = cell_text(row["role"])
        rater, category = cell_text(row["rater"]), cell_text(row["category"])
        session = cell_text(row["session"])
        quality = scale_value(row["quality"], "ratings", "quality", line)
        fit = scale_value(row["fit"], "ratings", "fit", line)
        if not rater or not category:
            raise ScoringInputError(f"ratings row {line}: empty rater or category")
        if role == TRIAL:
            system = cell_text(row["system"])
            if not system:
                raise ScoringInputError(f"ratings row {line}: a trial without a system")
            track_of.setdefault(system, cell_text(row["track"]))
            rater_team = cell_text(row["rater_team"])
            owner = _owner(team_of, system, rater_team, rules, f"ratings row {line}")
            if rules.remove_self_ratings and rater_team and owner and rater_team == owner:
                self_removed[(rater, system)] += 1
                continue
            trials.append(
                (rater, session, category, system, cell_text(row["stimulus"]), quality, fit)
            )
        elif role in ANCHOR_ROLES:
            anchors.append((rater, session, category, role, quality, fit))
        elif role == GOLD:
            continue  # a trapping trial: assessed by the rater-quality rules, never scored
        else:
            raise ScoringInputError(f"ratings row {line}: unknown role {role!r}")

    diversity: list[tuple] = []
    for line, row in enumerate(inputs.diversity, start=1):
        rater, system = cell_text(row["rater"]), cell_text(row["system"])
        category = cell_text(row["category"])
        value = scale_value(row["diversity"], "diversity", "diversity", line)
        if not rater or not system or not category:
            raise ScoringInputError(f"diversity row {line}: empty rater, system or category")
        track_of.setdefault(system, cell_text(row["track"]))
        rater_team = cell_text(row["rater_team"])
        owner = _owner(team_of, system, rater_team, rules, f"diversity row {line}")
        if rules.remove_self_ratings and rater_team and owner and rater_team == owner:
            self_removed[(rater, system)] += 1
            continue
        diversity.append((rater, category, system, value))
    return Cleaned(team_of, track_of, trials, anchors, diversity, self_removed)


def _panel(cleaned: Cleaned, inputs: Inputs, rater_rules, verdicts) -> dict:
    """The panel rules over the whole panel (raters.rules; the favouritism rule,
    raters.favouritism): each rater named adds the rule's flag, with its words, to every session
    of theirs. The favouritism rule's findings, for the result: every rater named, and every
    system a cluster of raters lifts."""
    rows = [(t[0], t[3], t[4], t[5], t[6]) for t in cleaned.trials]
    crowd = {cell_text(r["rater"]) for r in inputs.ratings if r.get("rater_kind") == "crowd"}
    panels = assess_panel(rows, rater_rules, crowd=crowd, skip_off=True)
    add_panel_flags(panels, verdicts)
    if "favouritism" not in panels:
        every = {(x.rater, x.system): x.points for x in favouritism.lifts(rows)}
        return {"raters": [], "clusters": [], "lifts": every}
    flags, finding = panels["favouritism"].flags, panels["favouritism"].finding
    named = []
    for rater, flag in sorted(flags.items()):
        lift = finding.favouring[rater][0]
        named.append(
            {
                "rater": rater,
                "system": lift.system,
                "points": lift.points,
                "z": lift.z,
                "sounds": lift.sounds,
                "action": flag.action,
                "reason": flag.reason,
            }
        )
    clusters = [
        {"system": c.system, "raters": c.raters, "expected": c.expected, "p": c.p}
        for c in finding.clusters
    ]
    # Every rater's lift of every system: the robustness of the ranking drops the raters who
    # lift a system most.
    lifts = {(lift.rater, lift.system): lift.points for lift in finding.lifts}
    return {"raters": named, "clusters": clusters, "lifts": lifts}


def check(cleaned: Cleaned, inputs: Inputs, rules: Rules) -> Checked:
    """Judge every session by the rater-quality rules (raters.rules), on all its answers, and
    every rater by the favouritism rule over the panel; keep the rows of the sessions not
    excluded."""
    rater_rules = rules.for_raters()
    verdicts = assess(inputs.ratings, rater_rules)
    favoured = _panel(cleaned, inputs, rater_rules, verdicts)
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
        favouritism={k: v for k, v in favoured.items() if k != "lifts"},
        lifts=favoured["lifts"],
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
        {cell_text(r["category"]) for r in inputs.ratings}
        | {d[1] for d in diversity}
        | {cell_text(r["category"]) for r in inputs.fad}
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
        system, category = cell_text(row["system"]), cell_text(row["category"])
        track_of.setdefault(system, cell_text(row["track"]))
        values[(system, category)] = (
            cell_number(row["fad_dev"], "fad", line, optional=True),
            cell_number(row["fad_eval"], "fad", line, optional=True),
        )
        kad[(system, category)] = (
            cell_number(row.get("kad_dev"), "fad", line, optional=True),
            cell_number(row.get("kad_eval"), "fad", line, optional=True),
        )
        intervals[(system, category)] = _fad_intervals(row, line)
        infinity[(system, category)] = {
            name: value
            for name in FAD_INF_COLUMNS
            if math.isfinite(value := cell_number(row.get(name), "fad", line, optional=True))
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
    system: str,
    track: str,
    team: str,
    agg: Aggregate,
    unc: Uncertainty,
    fad: FadTable,
    pred: PredictorTable,
) -> dict:
    i = agg.sys_index[system]
    point = agg.point
    q, f, d, final = (point[k][i] for k in ("q", "f", "d", "final"))
    n_ratings, n_diversity = agg.counts(i)
    row = {
        "system": system,
        "team": team,
        "track": track,
        "quality": rounded(q),
        "quality_ci": unc.interval("q", (i,)),
        "fit": rounded(f),
        "fit_ci": unc.interval("f", (i,)),
        "diversity": rounded(d),
        "diversity_ci": unc.interval("d", (i,)),
        "final": rounded(final),
        "final_ci": unc.interval("final", (i,)),
        "quality_fit": rounded((q + f) / 2),
        "ci_withheld": unc.withheld((i,), ("q", "f", "d", "final")),
        **fad.summary(system),
        **pred.summary(system),
        "n_ratings": n_ratings,
        "n_diversity": n_diversity,
        "categories": {},
    }
    for c, category in enumerate(agg.categories):
        row["categories"][category] = {
            "quality": rounded(point["cq"][i, c]),
            "quality_ci": unc.interval("cq", (i, c)),
            "fit": rounded(point["cf"][i, c]),
            "fit_ci": unc.interval("cf", (i, c)),
            "diversity": rounded(point["cd"][i, c]),
            "diversity_ci": unc.interval("cd", (i, c)),
            "final": rounded(point["cfinal"][i, c]),
            "final_ci": unc.interval("cfinal", (i, c)),
            **fad.cell(system, category),
            **pred.cell(system, category),
            "ci_withheld": unc.withheld((i, c), ("cq", "cf", "cd", "cfinal")),
        }
    return row


def rank(
    cleaned: Cleaned,
    agg: Aggregate,
    unc: Uncertainty,
    fad: FadTable,
    rules: Rules,
    pred: PredictorTable | None = None,
) -> Ranking:
    """Leaderboards per track with ties and the probability of each neighbouring order; the
    systems not rated, or lacking what others have, apart."""
    team_of = cleaned.team_of
    pred = pred or PredictorTable(agg.categories)
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
                {"system": s, "team": team_of.get(s, ""), **fad.summary(s), **pred.summary(s)}
                for s in unrated_here
            ]
        if lacking := [s for s in members if s in missing]:
            incomplete[track] = [
                {
                    "system": s,
                    "team": team_of.get(s, ""),
                    "missing": "; ".join(missing[s]),
                    "quality": rounded(agg.point["q"][agg.sys_index[s]]),
                    "fit": rounded(agg.point["f"][agg.sys_index[s]]),
                    "diversity": rounded(agg.point["d"][agg.sys_index[s]]),
                    **fad.summary(s),
                    **pred.summary(s),
                }
                for s in lacking
            ]
            members = [s for s in members if s not in missing]
        rows = [
            _leaderboard_row(s, track, team_of.get(s, ""), agg, unc, fad, pred) for s in members
        ]
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


# The share of a system's raters, those who lift it most, that the robustness drops.
ROBUSTNESS_SHARE = 0.1


def robustness(tracks: Mapping[str, list[dict]], checked: Checked, agg: Aggregate) -> None:
    """How much each rank rests on a few raters, added to the leaderboard rows: the rank each
    system would have without its most favourable tenth of raters (by their lift of it, see
    raters.favouritism), and, where the favouritism rule flagged raters it did not exclude,
    every rank without them."""
    if not agg.raters:
        return
    index = {rater: i for i, rater in enumerate(agg.raters)}
    units = np.ones(agg.n_units)
    n_c = max(len(agg.categories), 1)

    def ranks(weights: np.ndarray, rows: list[dict]) -> dict[str, int]:
        final = agg.estimate(weights, units)["final"]
        value = {r["system"]: float(final[agg.sys_index[r["system"]]]) for r in rows}
        order = sorted(value, key=lambda s: -value[s] if math.isfinite(value[s]) else math.inf)
        return {system: position for position, system in enumerate(order, start=1)}

    flagged = {
        r["rater"] for r in checked.favouritism.get("raters", []) if r["action"] == "flag"
    } & set(index)
    for rows in tracks.values():
        if flagged:
            weights = np.ones(len(agg.raters))
            weights[[index[r] for r in flagged]] = 0
            without = ranks(weights, rows)
            for row in rows:
                row["rank_without_flagged"] = without[row["system"]]
        for row in rows:
            i = agg.sys_index[row["system"]]
            raters = sorted({agg.raters[r] for r in agg.t_rater[agg.t_cell // n_c == i]})
            drop = math.ceil(ROBUSTNESS_SHARE * len(raters))
            favour = sorted(raters, key=lambda r: -checked.lifts.get((r, row["system"]), 0.0))
            weights = np.ones(len(agg.raters))
            weights[[index[r] for r in favour[:drop]]] = 0
            row["rank_without_favourable"] = ranks(weights, rows)[row["system"]]
            row["favourable_dropped"] = drop


def analyse(
    ranking: Ranking,
    checked: Checked,
    agg: Aggregate,
    fad: FadTable,
    inputs: Inputs,
    rules: Rules,
    pred: PredictorTable | None = None,
) -> Analysis:
    """The analyses of the ratings and, with models in the FAD rows or predictor values, the
    metric league."""
    analyses = _analyses(ranking.tracks, checked, agg)
    league = None
    if fad_models(inputs.fad) or (pred is not None and pred.axes):
        league = metric_league(
            inputs.fad, ranking.tracks, agg.categories, fad.model, replicates=rules.bootstrap,
            confidence=rules.confidence, seed=rules.seed, predictors=pred,
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
    pred = predictor_table(inputs.predictors, agg.categories)
    ranking = rank(cleaned, agg, unc, fad, rules, pred)
    robustness(ranking.tracks, checked, agg)
    analysis = analyse(ranking, checked, agg, fad, inputs, rules, pred)
    return Result(
        tracks=ranking.tracks,
        metric_league=analysis.metric_league,
        excluded_sessions=checked.excluded_sessions,
        flagged_sessions=checked.flagged_sessions,
        favouritism=checked.favouritism,
        pairs=ranking.pairs,
        unrated_systems=ranking.unrated,
        incomplete_systems=ranking.incomplete,
        categories=agg.categories,
        fad_infinity=fad.with_inf,
        kad=fad.with_kad,
        predictors=pred.axes,
        analyses=analysis.analyses,
        counts=Counts(
            ratings=len(inputs.ratings),
            self_ratings_removed=sum(cleaned.self_removed.values()),
            trial_ratings_used=len(checked.trials),
            trial_ratings_excluded=len(cleaned.trials) - len(checked.trials),
            diversity_ratings_used=len(checked.diversity),
            diversity_ratings_excluded=len(cleaned.diversity) - len(checked.diversity),
            anchor_ratings=len(cleaned.anchors),
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
        low = cell_number(row.get(f"{name}_low"), "fad", line, optional=True)
        high = cell_number(row.get(f"{name}_high"), "fad", line, optional=True)
        if math.isfinite(low) and math.isfinite(high):
            out[name] = (low, high)
    return out


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
            entry[name] = rounded(spearman(values, final_rank), 4)
        fad_spearman[track] = entry

    quality_fit = {}
    for category in categories:
        c = cat_index[category]
        here = [t for t in trials if t[2] == category]
        cq, cf = point["cq"][:, c], point["cf"][:, c]
        quality_fit[category] = {
            "trials": rounded(pearson([t[5] for t in here], [t[6] for t in here]), 4),
            "n_trials": len(here),
            "system_means": rounded(pearson(cq, cf), 4),
            "n_systems": int(np.sum(np.isfinite(cq) & np.isfinite(cf))),
        }

    cf, cd = point["cf"].ravel(), point["cd"].ravel()
    diversity_fit = {
        "system_category_means": rounded(pearson(cf, cd), 4),
        "n_system_categories": int(np.sum(np.isfinite(cf) & np.isfinite(cd))),
        "system_means": rounded(pearson(point["f"], point["d"]), 4),
        "n_systems": int(np.sum(np.isfinite(point["f"]) & np.isfinite(point["d"]))),
    }

    anchors = {}
    for role in ANCHOR_ROLES:
        here = [a for a in anchors_kept if a[3] == role]
        anchors[role] = {
            "quality": rounded(finite_mean(a[4] for a in here)),
            "fit": rounded(finite_mean(a[5] for a in here)),
            "n": len(here),
        }
    trial_mean = {
        "quality": rounded(finite_mean(t[5] for t in trials)),
        "fit": rounded(finite_mean(t[6] for t in trials)),
        "n": len(trials),
    }

    units = [f"{t[3]}|{t[2]}|{t[4]}" for t in trials]
    agreement = {
        "quality": rounded(krippendorff_alpha_interval(units, [t[5] for t in trials]), 4),
        "fit": rounded(krippendorff_alpha_interval(units, [t[6] for t in trials]), 4),
        "diversity": rounded(
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
    predictors: str | Path | None = None,
) -> dict:
    """Score a challenge from the four CSV files alone (and the predictors' summary, where
    given)."""
    inputs = Inputs(
        ratings=read_csv(ratings, RATING_COLUMNS),
        diversity=read_csv(diversity, DIVERSITY_COLUMNS),
        fad=read_csv(fad, FAD_COLUMNS),
        teams=read_csv(teams, TEAM_COLUMNS),
        fad_model=fad_model,
        predictors=read_csv(predictors, PREDICTOR_COLUMNS) if predictors else [],
    )
    return score(inputs, rules)
