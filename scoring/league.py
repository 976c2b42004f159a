"""The embedding league: which embedding model's FAD ranks systems as listeners do.

FAD rows may carry a `model` column (one row per model, system and category). The leaderboard
uses the challenge's designated model; every model is then set against the listening test, per
track and pooled over tracks:

- `spearman`: Spearman's rho between each system's mean FAD-Eval over categories (FAD-Dev where a
  system has no FAD-Eval) and its final score, signed so that +1 means "lower FAD, better
  listening score" (the same sign as the analyses' FAD correlation); `kendall`: Kendall's tau-b;
- `spearman_ci`: percentile bootstrap interval, drawing systems and categories with replacement
  (a category drawn twice weighs twice in each system's mean FAD);
- `loso_min`, `loso_max`: the lowest and highest rho with one system left out (how much one
  system carries the agreement);
- `quality`, `fit`, `diversity`: rho against each scale alone, with `quality_ci`, `fit_ci`,
  `diversity_ci` from the same bootstrap draws as `spearman_ci`.

Where the rows carry KAD (`kad_eval`, `kad_dev`), every model is ranked by its KAD the same way,
under `kad` (`tracks` and `pooled` there as for FAD): the same embeddings, another distance.

Where the challenge has learned predictor values (scoring/predictors.py), each predictor axis
(Audiobox Aesthetics' PQ, PC, CE, CU; PAM) is ranked the same way, under `predictors` (`axes`,
then `tracks` and `pooled` keyed by axis). A predictor's higher value is the better end, where a
distance's lower value is: each axis is ranked by its value with the sign turned, so that +1
means, for every metric, that the metric's better end goes with the better listening score.

`kendall_ci` is Kendall's tau's interval from the same draws as `spearman_ci`. `best`, per track
and for all tracks: the metric (or metrics, tied) whose Spearman's rho with the final score is
highest, the one this challenge's listeners agreed with most.

Stability, where the rows carry the metric on one draw of 25, 50 and 100 clips per system and
category (`fad_eval_25`, `kad_eval_50`...; a system with no more clips than that keeps its own
value; none where no system has more): `tau_25`, `tau_50`, `tau_100`, Kendall's tau-b between the
systems' ranking on that many clips and on all of them; `drift_25`... the mean change of the systems' metric from all clips to
that many, relative to its mean size (FAD's bias grows as clips fall; KAD has none); `unstable`
when the ranking on half of DCASE's 100 clips keeps less than `STABLE_TAU`: such a model may agree
with listeners on this test and reorder the systems on the next.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np
from scipy import stats


class Predictors(Protocol):
    """The predictors' values as the league reads them (scoring/predictors.py's PredictorTable):
    the axes, and each axis's [system, category] means, on all clips or on `size` of them."""

    axes: list[dict]
    has_subsets: bool

    def matrix(self, systems: Sequence[str], axis: str, size: int | None = None) -> np.ndarray: ...


LEAGUE_SCALES = ("quality", "fit", "diversity")
SUBSET_SIZES = (25, 50, 100)
# Kendall's tau with the full ranking below which a model's ranking on 50 clips is unstable.
STABLE_TAU = 0.8


def fad_models(rows: Sequence[Mapping]) -> list[str]:
    """The models FAD rows name, in order of first appearance ([] when none has a model)."""
    seen: dict[str, None] = {}
    for row in rows:
        model = str(row.get("model") or "").strip()
        if model:
            seen.setdefault(model, None)
    return list(seen)


def designated_model(rows: Sequence[Mapping], requested: str = "") -> str:
    """The model whose FAD goes on the leaderboard: `requested`, else the first one named."""
    models = fad_models(rows)
    if requested and models and requested not in models:
        raise ValueError(f"FAD model {requested!r} is not in the FAD table ({', '.join(models)})")
    return requested or (models[0] if models else "")


def is_designated(row: Mapping, model: str) -> bool:
    """Whether a FAD row belongs on the leaderboard (rows without a model always do)."""
    named = str(row.get("model") or "").strip()
    return not model or not named or named == model


def _fad_matrix(
    rows, model, systems, categories, metric: str = "fad", suffix: str = ""
) -> np.ndarray:
    """[system, category] FAD-Eval, FAD-Dev where the system has no FAD-Eval; NaN if none
    (KAD's with `metric="kad"`; on a subset of clips with `suffix="_50"`)."""
    s_index = {s: i for i, s in enumerate(systems)}
    c_index = {c: j for j, c in enumerate(categories)}
    ev = np.full((len(systems), len(categories)), np.nan)
    dev = np.full_like(ev, np.nan)
    for row in rows:
        if str(row.get("model") or "").strip() != model:
            continue
        i, j = s_index.get(str(row["system"]).strip()), c_index.get(str(row["category"]).strip())
        if i is None or j is None:
            continue
        for target, key in ((ev, f"{metric}_eval{suffix}"), (dev, f"{metric}_dev{suffix}")):
            value = _float(row.get(key))
            if value is not None:
                target[i, j] = value
    use_dev = ~np.isfinite(ev).any(axis=1)
    ev[use_dev] = dev[use_dev]
    return ev


def _float(value) -> float | None:
    try:
        number = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _rho(fad: np.ndarray, score: np.ndarray) -> float | None:
    keep = np.isfinite(fad) & np.isfinite(score)
    if keep.sum() < 3 or np.ptp(fad[keep]) == 0 or np.ptp(score[keep]) == 0:
        return None
    return float(stats.spearmanr(fad[keep], -score[keep]).statistic)


def _tau(fad: np.ndarray, score: np.ndarray) -> float | None:
    keep = np.isfinite(fad) & np.isfinite(score)
    if keep.sum() < 3 or np.ptp(fad[keep]) == 0 or np.ptp(score[keep]) == 0:
        return None
    return float(stats.kendalltau(fad[keep], -score[keep]).statistic)


def _mean_rows(matrix: np.ndarray, weights: np.ndarray) -> np.ndarray:
    ok = np.isfinite(matrix)
    w = np.where(ok, weights[None, :], 0.0)
    total = np.where(ok, matrix, 0.0) @ weights
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w.sum(1) > 0, total / w.sum(1), np.nan)


def _entry(
    matrix: np.ndarray,
    scores: Mapping[str, np.ndarray],
    *,
    replicates: int,
    confidence: float,
    seed: int,
) -> dict:
    n_c = matrix.shape[1]
    fad = _mean_rows(matrix, np.ones(n_c))
    final = scores["final"]
    ranked = np.isfinite(fad) & np.isfinite(final)
    entry = {
        "spearman": _round(_rho(fad, final)),
        "spearman_ci": None,
        "kendall": _round(_tau(fad, final)),
        "kendall_ci": None,
        "n_systems": int(ranked.sum()),
        "loso_min": None,
        "loso_max": None,
    }
    for scale in LEAGUE_SCALES:
        entry[scale] = _round(_rho(fad, scores[scale]))
        entry[f"{scale}_ci"] = None
    if replicates:
        entry.update(_bootstrap(matrix, scores, replicates, confidence, seed))
    if entry["spearman"] is None:
        return entry
    left_out = [_rho(np.delete(fad, i), np.delete(final, i)) for i in np.flatnonzero(ranked)]
    left_out = [v for v in left_out if v is not None]
    if left_out:
        entry["loso_min"], entry["loso_max"] = _round(min(left_out)), _round(max(left_out))
    return entry


# The interval each coefficient gets, keyed as the entry's: the coefficient and the score it is
# taken against (Spearman's and Kendall's with the final score, Spearman's with each scale).
_CI_KEYS = {
    "spearman_ci": (_rho, "final"),
    "kendall_ci": (_tau, "final"),
    **{f"{scale}_ci": (_rho, scale) for scale in LEAGUE_SCALES},
}


def _bootstrap(
    matrix: np.ndarray,
    scores: Mapping[str, np.ndarray],
    replicates: int,
    confidence: float,
    seed: int,
) -> dict:
    """Percentile intervals of every coefficient, each replicate drawing systems and categories
    once for all of them (so the intervals of the final score and each scale are comparable)."""
    n_s, n_c = matrix.shape
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {key: [] for key in _CI_KEYS}
    for _ in range(replicates):
        systems = rng.integers(0, n_s, n_s)
        weights = np.bincount(rng.integers(0, n_c, n_c), minlength=n_c).astype(float)
        fad = _mean_rows(matrix[systems], weights)
        for key, values in draws.items():
            coefficient, score = _CI_KEYS[key]
            value = coefficient(fad, scores[score][systems])
            if value is not None:
                values.append(value)
    alpha = (1 - confidence) / 2
    out = {}
    whole = _mean_rows(matrix, np.ones(n_c))
    for key, values in draws.items():
        coefficient, score = _CI_KEYS[key]
        # No interval where the point value is undefined (fewer than 3 systems, a constant).
        if values and coefficient(whole, scores[score]) is not None:
            low, high = np.quantile(values, [alpha, 1 - alpha])
            out[key] = [_round(low), _round(high)]
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def metric_league(
    rows: Sequence[Mapping],
    tracks: Mapping[str, Sequence[Mapping]],
    categories: Sequence[str],
    designated: str,
    *,
    replicates: int = 1000,
    confidence: float = 0.95,
    seed: int = 2023,
    predictors: Predictors | None = None,
) -> dict:
    """Per track and pooled, per model: its FAD ranking (and its KAD ranking, under `kad`, where
    the rows carry KAD) against the listening test's; each predictor axis's, under `predictors`,
    where there are predictor values; and the metric the listeners agreed with most."""
    models = fad_models(rows)
    subsets = any(f"fad_eval_{size}" in row or f"fad_dev_{size}" in row
                  for row in rows for size in SUBSET_SIZES)  # fmt: skip
    bootstrap = {"replicates": replicates, "confidence": confidence, "seed": seed}

    def scores_of(members: Sequence[Mapping]) -> dict[str, np.ndarray]:
        return {
            key: np.array([np.nan if row[key] is None else row[key] for row in members], float)
            for key in ("final", *LEAGUE_SCALES)
        }

    def table(members: Sequence[Mapping], metric: str = "fad") -> dict:
        systems = [row["system"] for row in members]
        scores = scores_of(members)
        out = {}
        for model in models:
            matrix = _fad_matrix(rows, model, systems, categories, metric)
            out[model] = _entry(matrix, scores, **bootstrap)
            if subsets:
                parts = {
                    size: _fad_matrix(rows, model, systems, categories, metric, f"_{size}")
                    for size in SUBSET_SIZES
                }
                out[model].update(stability(matrix, parts))
        return out

    everyone = [row for ranked in tracks.values() for row in ranked]
    out = {
        "designated": designated,
        "models": models,
        "tracks": {track: table(ranked) for track, ranked in tracks.items()},
        "pooled": table(everyone),
    }
    if has_kad(rows):
        out["kad"] = {
            "tracks": {track: table(ranked, "kad") for track, ranked in tracks.items()},
            "pooled": table(everyone, "kad"),
        }
    if predictors is not None and predictors.axes:

        def by_predictor(members: Sequence[Mapping]) -> dict:
            systems, scores = [row["system"] for row in members], scores_of(members)
            entries = {}
            for axis in (a["axis"] for a in predictors.axes):
                values = predictors.matrix(systems, axis)
                # Higher is better for a predictor, lower for a distance: ranked with its sign
                # turned, +1 means the predictor's higher values go with the better scores.
                entries[axis] = _entry(-values, scores, **bootstrap)
                if predictors.has_subsets:  # on the values themselves: the drift keeps its sign
                    parts = {n: predictors.matrix(systems, axis, n) for n in SUBSET_SIZES}
                    entries[axis].update(stability(values, parts))
            return entries

        out["predictors"] = {
            "axes": predictors.axes,
            "direction": "higher is better",
            "tracks": {track: by_predictor(ranked) for track, ranked in tracks.items()},
            "pooled": by_predictor(everyone),
        }
    out["best"] = best_metrics(out)
    return out


def league_entries(league: Mapping, scope: str) -> list[tuple[str, str, dict]]:
    """(model, metric, entry) of every metric of a league in one scope (a track, or "all
    tracks"): each model's FAD, then its KAD, then each predictor axis (model: the predictor's
    name, metric: the axis)."""

    def of(table: Mapping) -> Mapping:
        return table["pooled"] if scope == "all tracks" else table["tracks"].get(scope, {})

    out = []
    distances = [("FAD", league), *([("KAD", league["kad"])] if league.get("kad") else [])]
    for model in league["models"]:
        for metric, table in distances:
            if model in of(table):
                out.append((model, metric, of(table)[model]))
    if predictors := league.get("predictors"):
        for axis in predictors["axes"]:
            if axis["axis"] in of(predictors):
                out.append((axis["name"], axis["axis"], of(predictors)[axis["axis"]]))
    return out


def best_metrics(league: Mapping) -> dict[str, list[dict]]:
    """Per track and for all tracks: the metrics whose Spearman's rho with the final score is
    highest (all of them where tied), each {model, metric, spearman, spearman_ci}; none where no
    metric has a rho."""
    out = {}
    for scope in [*league["tracks"], "all tracks"]:
        ranked = [
            (m, k, e) for m, k, e in league_entries(league, scope) if e["spearman"] is not None
        ]
        top = max((e["spearman"] for _, _, e in ranked), default=None)
        out[scope] = [
            {"model": model, "metric": metric, "spearman": entry["spearman"],
             "spearman_ci": entry.get("spearman_ci")}
            for model, metric, entry in ranked
            if entry["spearman"] == top
        ]  # fmt: skip
    return out


def has_kad(rows: Iterable[Mapping]) -> bool:
    """Whether any FAD row carries a KAD value (the leaderboard then shows KAD beside FAD)."""
    return any(_float(row.get(key)) is not None for row in rows for key in ("kad_eval", "kad_dev"))


def stability(full: np.ndarray, parts: Mapping[int, np.ndarray]) -> dict:
    """Kendall's tau of the systems' ranking on 25, 50 and 100 clips with that on all clips,
    and the metric's relative drift; `parts[size]` is the [system, category] matrix on `size`
    clips (NaN where the system has no more clips than that: its own value stands)."""
    mean_full = _mean_rows(full, np.ones(full.shape[1]))
    out: dict = {}
    for size in SUBSET_SIZES:
        if not np.isfinite(parts[size]).any():  # no system has more clips: nothing to measure
            out[f"tau_{size}"] = out[f"drift_{size}"] = None
            continue
        part = np.where(np.isfinite(parts[size]), parts[size], full)
        mean_part = _mean_rows(part, np.ones(full.shape[1]))
        keep = np.isfinite(mean_full) & np.isfinite(mean_part)
        tau = None
        if keep.sum() >= 3 and np.ptp(mean_full[keep]) > 0:
            tau = float(stats.kendalltau(mean_full[keep], mean_part[keep]).statistic)
        out[f"tau_{size}"] = _round(tau)
        scale = float(np.mean(np.abs(mean_full[keep]))) if keep.any() else 0.0
        drift = float(np.mean(mean_part[keep] - mean_full[keep])) / scale if scale > 0 else None
        out[f"drift_{size}"] = _round(drift)
    half = out["tau_50"]
    out["unstable"] = half is not None and half < STABLE_TAU
    return out
