"""Coverage of every interval the results report, simulated, before and after.

Each run simulates a listening test whose true values are known: systems x categories with true
quality, fit and diversity; raters of trials and organizers rating diversity, each with their
own leniency (shared by everything they rate); sounds with their own effect (shared by every
rater who hears them); noise per rating, clipped to the 0-10 scale. It is scored with
`scoring.compute.score` under both interval methods:

- before: the percentile bootstrap over raters and sounds (`intervals="bootstrap"`);
- after: the stratified jackknife with Student t intervals (`intervals="jackknife-t"`).

Printed per number of raters (the same number rating trials and rating diversity): the share of
runs whose interval held the true value, for every reported value (system quality, fit,
diversity, final; the same per category), the share withheld as too small for an honest interval,
and how often `P(above next)` >= 0.95 was right. Nominal 0.95.

    python benchmarks/bench_coverage.py [--runs 200] [--raters 4 8 24] [--bootstrap 1000]
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

from scoring.compute import Inputs, Rules, score

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
    teams = [{"system": s, "team": f"team-{s}", "track": "A"} for s in SYSTEMS]
    wq, wf, wd = WEIGHTS
    cell_final = (wq * mu[0] + wf * mu[1] + wd * mu[2]) / sum(WEIGHTS)
    truth = {
        "cells": {"quality": mu[0], "fit": mu[1], "diversity": mu[2], "final": cell_final},
        "systems": {
            "quality": mu[0].mean(1),
            "fit": mu[1].mean(1),
            "diversity": mu[2].mean(1),
            "final": cell_final.mean(1),
        },
    }
    return Inputs(ratings, diversity, [], teams), truth


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
    elif ci[0] <= true_value <= ci[1]:
        entry[0] += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--raters", type=int, nargs="+", default=[4, 8, 24])
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    methods = {"before (bootstrap)": "bootstrap", "after (jackknife-t)": "jackknife-t"}
    print(
        f"Coverage of nominal 95% intervals, {args.runs} simulated tests per row: "
        f"{len(SYSTEMS)} systems x {len(CATEGORIES)} categories x {SOUNDS} sounds; SD of rater "
        f"leniency {RATER_SD}, of sounds {SOUND_SD}, of ratings {NOISE_SD}; bootstrap "
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
                inputs, truth = simulate(raters, rng)
                rules = Rules(bootstrap=args.bootstrap, checks_per_session=0, seed=run,
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
        print(f"  {'seconds':26}" + "".join(f"{results[m][1]:>24.1f}" for m in methods))
    print(f"\nload average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
