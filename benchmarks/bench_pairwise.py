"""Coverage of the pairwise scoring's intervals (scoring/pairwise.py), on simulated A/B panels.

Each panel: 8 systems of one track with true log strengths evenly from -1 to 1 and Davidson's tie
parameter 0.5; every rater has tastes of their own (their strengths are the true ones plus a
normal deviation per system, sd 0.3, so one rater's votes are not independent), and the pairs are
sampled unequally (half the systems three times as often as the others, as an arena's popular
systems are). Each rater casts 20 votes. Per row, the share of true centred strengths that fall
inside their 95% intervals over `--panels` panels: the bootstrap over raters (the platform's)
beside a bootstrap over votes (which treats every vote as independent). The true strengths are
the population's: tastes flatten the win probabilities averaged over raters, so they are the fit
to one panel of 5,000 raters (100,000 votes), not the mean tastes themselves.

    python benchmarks/bench_pairwise.py [--panels 100] [--replicates 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring.pairwise import Votes, bootstrap, fit

SYSTEMS = 8
TRUE = np.linspace(-1.0, 1.0, SYSTEMS)
TIE = 0.5
TASTE_SD = 0.3
VOTES_EACH = 20


def panel(rng: np.random.Generator, raters: int) -> Votes:
    weight = np.where(np.arange(SYSTEMS) % 2 == 0, 3.0, 1.0)
    pairs = [(i, j) for i in range(SYSTEMS) for j in range(i + 1, SYSTEMS)]
    p = np.array([weight[i] * weight[j] for i, j in pairs])
    p /= p.sum()
    first, second, tie, who = [], [], [], []
    for r in range(raters):
        theta = TRUE + rng.normal(0, TASTE_SD, SYSTEMS)
        for k in rng.choice(len(pairs), VOTES_EACH, p=p):
            i, j = pairs[k]
            a, b = np.exp(theta[i]), np.exp(theta[j])
            t = TIE * np.sqrt(a * b)
            u = rng.random() * (a + b + t)
            winner, loser = (i, j) if u < a else (j, i)
            first.append(winner)
            second.append(loser)
            tie.append(u >= a + b)
            who.append(r)
    return Votes(
        [f"S{k}" for k in range(SYSTEMS)],
        np.array(first),
        np.array(second),
        np.array(tie),
        np.array(who),
        [f"r{r}" for r in range(raters)],
    )


def over_votes(votes: Votes, replicates: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(votes.first)
    return np.array([fit(votes.take(rng.integers(0, n, n))).strength for _ in range(replicates)])


def coverage(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    return (low <= truth) & (truth <= high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--panels", type=int, default=100)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--raters", type=int, nargs="*", default=[20, 50, 200])
    args = parser.parse_args()
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    truth = fit(panel(np.random.default_rng(7), 5_000)).strength
    print(f"population strengths: {np.round(truth, 3)} (mean tastes: {np.round(TRUE, 3)})")
    print("| Raters | Votes | Covered, bootstrap over raters | Covered, over votes | Mean width |")
    print("|---|---|---|---|---|")
    for raters in args.raters:
        by_rater, by_vote, widths = [], [], []
        for n in range(args.panels):
            rng = np.random.default_rng(1_000 * raters + n)
            votes = panel(rng, raters)
            draws = bootstrap(votes, args.replicates, seed=n)
            by_rater.append(coverage(draws, truth))
            by_vote.append(coverage(over_votes(votes, args.replicates, seed=n), truth))
            low, high = np.percentile(draws, [2.5, 97.5], axis=0)
            widths.append(np.mean(high - low))
        print(
            f"| {raters} | {raters * VOTES_EACH} | {np.mean(by_rater):.3f} | "
            f"{np.mean(by_vote):.3f} | {np.mean(widths):.2f} |"
        )
    print(
        f"{args.panels} panels a row, {args.replicates} replicates; "
        f"{time.monotonic() - started:.0f} s in all; load average at end: "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
