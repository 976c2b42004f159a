"""Results of the text-prompt protocol, per system with per-judge breakdowns.

- Interpretability: the share of generated clips the judges recognised (their own mark once the
  true text showed) beside the share of real clips the same judges recognised.
- Realism: accuracy of telling real from generated, with a Wilson interval and a two-sided
  exact binomial test against 50 % (chance: the judges cannot tell them apart).
- Prompt test: the distribution of Yes / No / Maybe, and mean quality and diversity with
  percentile bootstrap intervals that resample judges (a judge's answers move together).
- CLAP score, where a CLAP checkpoint and its tokenizer are configured: per answered prompt set,
  the cosine between the prompt and its closest clip in LAION-CLAP's space (the judges were
  asked whether any clip matches); per system the mean over its sets, with the judges'
  interval, and Spearman's rho between the sets' scores and the judges' No < Maybe < Yes.

Plain functions of the rows `raters.selectors.text_prompt_rows` gives; published with the
DCASE results in the same snapshot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
MATCHES = ("yes", "no", "maybe")


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def proportion(k: int, n: int) -> dict:
    """k of n with a Wilson interval (None where n is 0)."""
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "ci": None}
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return {"k": k, "n": n, "rate": _r(k / n), "ci": [_r(ci.low), _r(ci.high)]}


def against_chance(k: int, n: int) -> float | None:
    """Two-sided exact binomial p-value of k correct of n against 50 %."""
    return None if n == 0 else _r(stats.binomtest(k, n, 0.5).pvalue, 6)


def judge_bootstrap(values_by_judge: Mapping[str, Sequence[float]], seed: int = BOOTSTRAP_SEED):
    """Mean of every value, with a percentile bootstrap interval over judges (None with fewer
    than two judges: one judge's answers say nothing of how another would answer)."""
    groups = [np.asarray(v, dtype=float) for v in values_by_judge.values() if len(v)]
    if not groups:
        return None, None
    mean = float(np.concatenate(groups).mean())
    if len(groups) < 2:
        return _r(mean), None
    rng = np.random.default_rng(seed)
    sums = np.array([g.sum() for g in groups])
    counts = np.array([len(g) for g in groups])
    picks = rng.integers(0, len(groups), size=(BOOTSTRAP_RESAMPLES, len(groups)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return _r(mean), [_r(low), _r(high)]


def score_text_prompts(rows: Mapping[str, list[dict]], clap: dict | None = None) -> dict:
    """Per-system results and per-judge breakdowns of the text-prompt study's answers; with
    `clap` (`{"sets": [...], "needs": ..., "model_id": ...}`) the CLAP scores beside them."""
    systems = sorted({row["system"] for table in rows.values() for row in table}, key=str.casefold)
    out = []
    for system in systems:
        interp = [r for r in rows.get("interpretability", []) if r["system"] == system]
        realism = [r for r in rows.get("realism", []) if r["system"] == system]
        prompts = [r for r in rows.get("prompts", []) if r["system"] == system]
        judges = sorted({r["judge"] for r in interp + realism + prompts})
        out.append(
            {
                "system": system,
                "judges": len(judges),
                **_summary(interp, realism, prompts),
                "per_judge": [
                    {
                        "judge": judge,
                        **_summary(
                            [r for r in interp if r["judge"] == judge],
                            [r for r in realism if r["judge"] == judge],
                            [r for r in prompts if r["judge"] == judge],
                        ),
                    }
                    for judge in judges
                ],
            }
        )
    study = {
        "systems": out,
        "settings": {
            "confidence": CONFIDENCE,
            "realism_interval": "wilson",
            "realism_test": "exact binomial, two-sided, p = 0.5",
            "bootstrap": f"percentile over judges, {BOOTSTRAP_RESAMPLES} resamples",
        },
    }
    if clap is not None:
        study["clap"] = clap_summary(clap, out)
    return study


MATCH_ORDER = {"no": 0, "maybe": 1, "yes": 2}


def _spearman(scores: Sequence[float], matches: Sequence[str]) -> tuple[float | None, int]:
    """Spearman's rho of scores against No < Maybe < Yes (None without two of each varying)."""
    if len(scores) < 3 or len(set(matches)) < 2 or len(set(scores)) < 2:
        return None, len(scores)
    rho = stats.spearmanr(scores, [MATCH_ORDER[m] for m in matches]).statistic
    return _r(rho), len(scores)


def clap_summary(clap: dict, systems: list[dict]) -> dict:
    """Adds each system's CLAP score (in place) and returns the study-wide CLAP summary.

    `clap["sets"]`: one row per answered prompt set (judge, system, match, `best`: the highest
    cosine among its clips, None where its clips have no score yet)."""
    sets = clap.get("sets", [])
    scored = [s for s in sets if s["best"] is not None]
    for entry in systems:
        mine = [s for s in scored if s["system"] == entry["system"]]
        by_judge: dict[str, list[float]] = defaultdict(list)
        for s in mine:
            by_judge[s["judge"]].append(s["best"])
        mean, ci = judge_bootstrap(by_judge)
        rho, n = _spearman([s["best"] for s in mine], [s["match"] for s in mine])
        entry["clap"] = {"score": mean, "ci": ci, "rho": rho, "n": n}
    rho, n = _spearman([s["best"] for s in scored], [s["match"] for s in scored])
    p = None
    if rho is not None:
        codes = [MATCH_ORDER[s["match"]] for s in scored]
        p = _r(stats.spearmanr([s["best"] for s in scored], codes).pvalue, 6)
    return {
        "enabled": not clap.get("needs"),
        "needs": clap.get("needs", ""),
        "model_id": clap.get("model_id", ""),
        "sets": len(sets),
        "scored_sets": len(scored),
        "rho": rho,
        "rho_p": p,
        "n": n,
    }


def _summary(interp: list[dict], realism: list[dict], prompts: list[dict]) -> dict:
    generated = [r for r in interp if not r["is_real"]]
    real = [r for r in interp if r["is_real"]]
    correct = sum(r["is_real"] == r["says_real"] for r in realism)
    counts = {m: sum(r["match"] == m for r in prompts) for m in MATCHES}
    by_judge: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r in prompts:
        by_judge["quality"][r["judge"]].append(r["quality"])
        by_judge["diversity"][r["judge"]].append(r["diversity"])
    quality, quality_ci = judge_bootstrap(by_judge["quality"])
    diversity, diversity_ci = judge_bootstrap(by_judge["diversity"])
    return {
        "recognised_generated": proportion(sum(r["correct"] for r in generated), len(generated)),
        "recognised_real": proportion(sum(r["correct"] for r in real), len(real)),
        "realism": {
            **proportion(correct, len(realism)),
            "p_vs_chance": against_chance(correct, len(realism)),
        },
        "match": {
            "counts": counts,
            "shares": {m: _r(c / len(prompts)) if prompts else None for m, c in counts.items()},
            "n": len(prompts),
        },
        "quality": {"mean": quality, "ci": quality_ci, "n": len(prompts)},
        "diversity": {"mean": diversity, "ci": diversity_ci, "n": len(prompts)},
    }


def flat_row(entry: dict) -> dict:
    """One system's (or judge's) results as the columns of the result tables."""
    return {
        "recognised_generated": entry["recognised_generated"]["rate"],
        "recognised_generated_ci": entry["recognised_generated"]["ci"],
        "recognised_real": entry["recognised_real"]["rate"],
        "recognised_real_ci": entry["recognised_real"]["ci"],
        "realism_accuracy": entry["realism"]["rate"],
        "realism_accuracy_ci": entry["realism"]["ci"],
        "realism_p": entry["realism"]["p_vs_chance"],
        "realism_n": entry["realism"]["n"],
        **{f"match_{m}": entry["match"]["shares"][m] for m in MATCHES},
        "prompts": entry["match"]["n"],
        "quality": entry["quality"]["mean"],
        "quality_ci": entry["quality"]["ci"],
        "diversity": entry["diversity"]["mean"],
        "diversity_ci": entry["diversity"]["ci"],
    }
