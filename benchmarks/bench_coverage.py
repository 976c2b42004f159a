"""Coverage of every interval the results report, simulated, before and after.

Rating intervals, under two models of a listening test whose true values are known:

- "platform": systems x categories with true quality, fit and diversity; raters of trials and
  organizers rating diversity, each with their own leniency (shared by everything they rate);
  sounds with their own effect (shared by every rater who hears them); noise per rating, clipped
  to the 0-10 scale;
- "independent": a harder model, built apart from the scoring: raters who compress the scale
  toward its middle (each by their own factor), rater x system effects, heavy-tailed sound
  effects (Student t, 3 df), integer answers clipped to 0-10, a system near the ceiling (S1) and
  one with 2 sounds per category (S4); the true values are the expected answers over the
  population of raters and sounds (Monte Carlo, 4,000 draws per cell).

Each run is scored with `scoring.compute.score` under both interval methods:

- before: the percentile bootstrap over raters and sounds (`intervals="bootstrap"`);
- after: the stratified jackknife with Student t intervals (`intervals="jackknife-t"`), cut to
  the scale, withheld by the design (raters and sounds behind a value) and where there is no
  spread.

Printed per model and number of raters (the same number rating trials and rating diversity): the
share of runs whose interval held the true value, for every reported value (system quality, fit,
diversity, final; the same per category), the share withheld, and how often `P(above next)` >=
0.95 was right; then, per method, how many shown intervals reached outside 0-10 or had zero
width. Nominal 0.95.

Then FAD and KAD intervals on simulated embeddings with a known population distance (see
`distance_coverage`).

    python benchmarks/bench_coverage.py [--runs 200] [--raters 4 8 24] [--bootstrap 1000]
        [--models platform independent] [--distance-runs 40] [--parts ratings distances]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring.compute import score
from scoring.inputs import Inputs
from scoring.rules import Rules

SYSTEMS = ("S1", "S2", "S3", "S4")
CATEGORIES = ("dog_bark", "footstep", "rain")
SOUNDS = 8
RATER_SD, SOUND_SD, NOISE_SD = 0.8, 0.6, 1.0
WEIGHTS = (1.0, 1.0, 0.5)
SCALES = ("quality", "fit", "diversity", "final")


def simulate(raters: int, rng: np.random.Generator) -> tuple[Inputs, dict]:
    n_s, n_c = len(SYSTEMS), len(CATEGORIES)
    mu = rng.uniform(3.5, 6.5, (3, n_s, n_c))  # quality, fit, diversity per system and category
    lenience = rng.normal(0, RATER_SD, raters)
    organizer = rng.normal(0, RATER_SD, raters)
    sound = rng.normal(0, SOUND_SD, (n_s, n_c, SOUNDS))
    ratings, diversity = [], []
    for r in range(raters):
        for c, category in enumerate(CATEGORIES):
            for s, system in enumerate(SYSTEMS):
                noise = rng.normal(0, NOISE_SD, (2, SOUNDS))
                q = np.clip(mu[0, s, c] + lenience[r] + sound[s, c] + noise[0], 0, 10)
                f = np.clip(mu[1, s, c] + lenience[r] + 0.5 * sound[s, c] + noise[1], 0, 10)
                for k in range(SOUNDS):
                    ratings.append({
                        "rater": f"r{r}", "rater_team": "", "session": f"r{r}-{category}",
                        "category": category, "system": system, "track": "A",
                        "stimulus": f"{system}-{category}-{k}", "role": "trial",
                        "quality": float(q[k]), "fit": float(f[k]),
                    })  # fmt: skip
                d = np.clip(mu[2, s, c] + organizer[r] + rng.normal(0, NOISE_SD), 0, 10)
                diversity.append({
                    "rater": f"org{r}", "rater_team": "", "category": category,
                    "system": system, "track": "A", "diversity": float(d),
                })  # fmt: skip
    return _test(ratings, diversity, mu)


def _test(ratings: list, diversity: list, cells: np.ndarray) -> tuple[Inputs, dict]:
    """The inputs of a simulated test and its true values, from the true cell means
    [quality, fit, diversity][system, category]."""
    teams = [{"system": s, "team": f"team-{s}", "track": "A"} for s in SYSTEMS]
    wq, wf, wd = WEIGHTS
    cell_final = (wq * cells[0] + wf * cells[1] + wd * cells[2]) / sum(WEIGHTS)
    truth = {
        "cells": {"quality": cells[0], "fit": cells[1], "diversity": cells[2], "final": cell_final},
        "systems": {
            "quality": cells[0].mean(1),
            "fit": cells[1].mean(1),
            "diversity": cells[2].mean(1),
            "final": cell_final.mean(1),
        },
    }
    return Inputs(ratings, diversity, [], teams), truth


def simulate_independent(raters: int, rng: np.random.Generator) -> tuple[Inputs, dict]:
    """The independent model (see the module's docstring); truth by Monte Carlo."""
    n_s, n_c = len(SYSTEMS), len(CATEGORIES)
    mu = rng.uniform(3.0, 7.0, (3, n_s, n_c))
    mu[:2, 0] = rng.uniform(8.8, 9.6, (2, n_c))  # S1 near the ceiling in quality and fit
    sounds = [SOUNDS, SOUNDS, SOUNDS, 2]  # S4: 2 sounds per category

    def answer(centre, compress, offset, noise):
        return np.clip(np.rint(5 + compress * (centre - 5) + offset + noise), 0, 10)

    def sound_effect(size):
        return 0.6 * rng.standard_t(3, size)

    compress = rng.uniform(0.5, 1.0, raters)
    lenience = rng.normal(0, RATER_SD, raters)
    by_system = rng.normal(0, 0.5, (raters, n_s))
    org_compress = rng.uniform(0.5, 1.0, raters)
    org_lenience = rng.normal(0, RATER_SD, raters)
    ratings, diversity = [], []
    effects = [[sound_effect(sounds[s]) for _ in range(n_c)] for s in range(n_s)]
    for r in range(raters):
        for c, category in enumerate(CATEGORIES):
            for s, system in enumerate(SYSTEMS):
                k = sounds[s]
                offset = lenience[r] + by_system[r, s] + effects[s][c]
                q = answer(mu[0, s, c], compress[r], offset, rng.normal(0, NOISE_SD, k))
                f = answer(mu[1, s, c], compress[r], offset * 0.75, rng.normal(0, NOISE_SD, k))
                for j in range(k):
                    ratings.append({
                        "rater": f"r{r}", "rater_team": "", "session": f"r{r}-{category}",
                        "category": category, "system": system, "track": "A",
                        "stimulus": f"{system}-{category}-{j}", "role": "trial",
                        "quality": float(q[j]), "fit": float(f[j]),
                    })  # fmt: skip
                d = answer(mu[2, s, c], org_compress[r], org_lenience[r], rng.normal(0, NOISE_SD))
                diversity.append({
                    "rater": f"org{r}", "rater_team": "", "category": category,
                    "system": system, "track": "A", "diversity": float(d),
                })  # fmt: skip
    draws = 4000
    cells = np.zeros((3, n_s, n_c))
    for s in range(n_s):
        for c in range(n_c):
            pop_c = rng.uniform(0.5, 1.0, draws)
            offset = rng.normal(0, RATER_SD, draws) + rng.normal(0, 0.5, draws)
            offset = offset + sound_effect(draws)
            noise = rng.normal(0, NOISE_SD, (3, draws))
            cells[0, s, c] = answer(mu[0, s, c], pop_c, offset, noise[0]).mean()
            cells[1, s, c] = answer(mu[1, s, c], pop_c, offset * 0.75, noise[1]).mean()
            org = rng.normal(0, RATER_SD, draws)
            cells[2, s, c] = answer(mu[2, s, c], rng.uniform(0.5, 1.0, draws), org, noise[2]).mean()
    return _test(ratings, diversity, cells)


MODELS = {"platform": simulate, "independent": simulate_independent}


def tally(result: dict, truth: dict, counts: dict) -> None:
    for row in result["tracks"]["A"]:
        s = SYSTEMS.index(row["system"])
        for scale in SCALES:
            _count(counts, scale, row[f"{scale}_ci"], truth["systems"][scale][s])
            for c, category in enumerate(CATEGORIES):
                cell = row["categories"][category]
                _count(counts, f"{scale} per category", cell[f"{scale}_ci"],
                       truth["cells"][scale][s, c])  # fmt: skip
    finals = {row["system"]: truth["systems"]["final"][SYSTEMS.index(row["system"])]
              for row in result["tracks"]["A"]}  # fmt: skip
    for pair in result["pairs"]["A"]:
        p = pair["probability"]
        if p is not None and p >= 0.95:
            counts["p_sure"][0] += finals[pair["upper"]] > finals[pair["lower"]]
            counts["p_sure"][1] += 1


def _count(counts: dict, key: str, ci, true_value: float) -> None:
    entry = counts[key]
    entry[1] += 1
    if ci is None:
        entry[2] += 1
        return
    entry[0] += ci[0] <= true_value <= ci[1]
    counts["shown"][0] += 1
    counts["shown"][1] += ci[0] < 0 or ci[1] > 10
    counts["shown"][2] += ci[1] <= ci[0]


def kad_truth(mu: np.ndarray, variances: np.ndarray, reference) -> float:
    """KAD of N(mu, diag(variances)) against a fixed reference sample, in closed form: the
    kernel's expectations over the system's distribution, the reference's own mean as is."""
    h2 = reference.bandwidth**2
    self_term = np.prod(np.sqrt(h2 / (h2 + 2 * variances)))
    y = reference.embeddings
    cross = np.prod(np.sqrt(h2 / (h2 + variances))) * np.exp(
        -(((y - mu) ** 2) / (2 * (h2 + variances))).sum(axis=1)
    )
    return 100 * (self_term + reference.kernel_mean - 2 * cross.mean())


# Simulated embeddings: a system's clips of frames from N(mu, diag(variances)); FAD against
# N(0, I) given as statistics, KAD against 1,000 draws of it (the reference, fixed per run).
# Each: label, d, clips, frames per clip, the mean's shift per dimension, the variances' range.
DISTANCE_SHAPES = (
    ("d=8, 40 clips x 4 frames", 8, 40, 4, 0.15, (0.6, 1.6)),
    ("d=32, 100 clips x 4", 32, 100, 4, 0.15, (0.6, 1.6)),
    ("d=32, 40 x 2, near ref", 32, 40, 2, 0.05, (0.8, 1.2)),
)


def distance_coverage(runs: int, resamples: int, seed: int) -> None:
    from stimuli.objective.fad import (
        FAD_INTERVAL_METHODS,
        GaussianStats,
        ReferenceFactor,
        fad_bootstrap_draws,
        interval_from_draws,
    )
    from stimuli.objective.kad import KadReference, kad_interval

    methods = (*FAD_INTERVAL_METHODS[1:], FAD_INTERVAL_METHODS[0])
    print(
        f"\nFAD and KAD intervals (nominal 0.95), {runs} simulated systems per row, {resamples} "
        "bootstrap resamples; before: FAD's basic bootstrap, KAD without interval; after: FAD's "
        "basic bootstrap truncated at 0 (the platform's), KAD's jackknife truncated at 0"
    )
    print(f"  {'shape':28}{'method':17}{'covered':>9}{'below 0':>9}{'zero width':>12}"
          f"{'mean width':>12}{'bias of estimate':>18}")  # fmt: skip
    for label, d, n_clips, frames, shift, spread in DISTANCE_SHAPES:
        rng = np.random.default_rng(seed + d)
        mu = np.full(d, shift)
        variances = np.linspace(*spread, d)
        fad_true = float(mu @ mu + ((np.sqrt(variances) - 1.0) ** 2).sum())
        stats = ReferenceFactor.of(GaussianStats(np.zeros(d), np.eye(d), 0))
        tallies = {m: [0, 0, 0, 0.0] for m in (*methods, "KAD jackknife")}
        fad_bias, kad_bias = [], []
        for run in range(runs):
            clips = [mu + rng.normal(size=(frames, d)) * np.sqrt(variances) for _ in range(n_clips)]
            estimate, draws = fad_bootstrap_draws(clips, stats, n_resamples=resamples, seed=run)
            fad_bias.append(estimate / fad_true - 1)
            for method in methods:
                _tally(
                    tallies[method], *interval_from_draws(estimate, draws, 0.95, method), fad_true
                )
            reference = KadReference.of(rng.normal(size=(1000, d)))
            kad_true = kad_truth(mu, variances, reference)
            found = kad_interval(clips, reference)
            kad_bias.append(found.value - kad_true)
            if found.low is not None:
                _tally(tallies["KAD jackknife"], found.low, found.high, kad_true)
        for method, (covered, below, zero, width) in tallies.items():
            bias = (f"{np.mean(fad_bias):+.1%} of FAD" if method != "KAD jackknife"
                    else f"{np.mean(kad_bias):+.4f}")  # fmt: skip
            print(f"  {label:28}{method:17}{covered / runs:>9.3f}{below:>9}{zero:>12}"
                  f"{width / runs:>12.3f}{bias:>18}")  # fmt: skip


def _tally(entry: list, low: float, high: float, truth: float) -> None:
    entry[0] += low <= truth <= high
    entry[1] += low < 0
    entry[2] += high <= low
    entry[3] += high - low


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--raters", type=int, nargs="+", default=[4, 8, 24])
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--distance-runs", type=int, default=40)
    parser.add_argument("--resamples", type=int, default=200, help="FAD bootstrap resamples")
    parser.add_argument(
        "--parts", nargs="+", choices=["ratings", "distances"], default=["ratings", "distances"]
    )
    args = parser.parse_args()
    if "ratings" in args.parts:
        for model in args.models:
            rating_coverage(model, args)
    if "distances" in args.parts:
        distance_coverage(args.distance_runs, args.resamples, args.seed)
    print(f"\nload average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


def rating_coverage(model: str, args) -> None:
    methods = {"before (bootstrap)": "bootstrap", "after (jackknife-t)": "jackknife-t"}
    print(
        f"\nModel {model!r}: coverage of nominal 95% intervals, {args.runs} simulated tests per "
        f"row: {len(SYSTEMS)} systems x {len(CATEGORIES)} categories x {SOUNDS} sounds; SD of "
        f"rater leniency {RATER_SD}, of sounds {SOUND_SD}, of ratings {NOISE_SD}; bootstrap "
        f"{args.bootstrap} replicates"
    )
    keys = [*SCALES, *(f"{s} per category" for s in SCALES)]
    for raters in args.raters:
        results = {}
        for label, method in methods.items():
            rng = np.random.default_rng(args.seed + raters)
            counts: dict = defaultdict(lambda: [0, 0, 0])
            started = time.perf_counter()
            for run in range(args.runs):
                inputs, truth = MODELS[model](raters, rng)
                rules = Rules(bootstrap=args.bootstrap, anchors_per_session=0, seed=run,
                              intervals=method)  # fmt: skip
                tally(score(inputs, rules), truth, counts)
            results[label] = (counts, time.perf_counter() - started)
        print(f"\n{raters} raters of trials, {raters} raters of diversity")
        print(f"  {'value':26}" + "".join(f"{label:>24}" for label in methods))
        for key in keys:
            cells = []
            for label in methods:
                covered, total, withheld = results[label][0][key]
                shown = total - withheld
                text = f"{covered / shown:.3f}" if shown else "-"
                if withheld:
                    text += f" ({withheld / total:.0%} withheld)"
                cells.append(f"{text:>24}")
            print(f"  {key:26}" + "".join(cells))
        cells = []
        for label in methods:
            right, n, _ = results[label][0]["p_sure"]
            cells.append(f"{(f'{right / n:.3f} of {n}' if n else '-'):>24}")
        print(f"  {'P(above next) >= 0.95 right':26}" + "".join(cells))
        for i, name in ((1, "shown outside 0-10"), (2, "shown of zero width")):
            cells = [f"{results[m][0]['shown'][i]} of {results[m][0]['shown'][0]}" for m in methods]
            print(f"  {name:26}" + "".join(f"{c:>24}" for c in cells))
        print(f"  {'seconds':26}" + "".join(f"{results[m][1]:>24.1f}" for m in methods))


if __name__ == "__main__":
    main()
