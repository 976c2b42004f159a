"""Votes the A/B pair schedule (raters/pair_schedule.py) saves: how many votes each way of choosing
pairs needs before the fitted ranking (scoring/pairwise.py) settles near the true one.

Each simulated test: 8 systems of one track with true log strengths evenly from -1 to 1 and
Davidson's tie parameter 0.5; raters with tastes of their own (the true strengths plus a normal
deviation per system, sd 0.3), 20 votes each, arriving in turn. Three ways of choosing the pairs,
on the same raters (the same tastes and the same random numbers behind their votes):

- random: every vote a pair drawn uniformly, its sides at random (an arena's way);
- balanced: the schedule without a fit (round after round of every pair);
- active: the schedule with the current fit's uncertainty: after every `--step` votes (from
  `--warmup` on) the strengths are refitted with a bootstrap over raters of `--replicates`
  replicates, and `order_uncertainty` of those replicates weights the next pairs (cap 2).

After every `--step` votes each way's ranking is fitted; a way "reaches" a target at the first
check from which Kendall's tau between its ranking and the true one stays at or above the target
to the end of the `--votes` budget. Per target, the median over `--tests` tests of the votes
needed (a test that never settles counts as beyond the budget), and the votes the active
schedule saves against the balanced one.

    python benchmarks/bench_pair_schedule.py [--tests 20] [--votes 2400] [--jobs 2]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raters.pair_schedule import next_pairs, order_uncertainty
from scoring.pairwise import Votes, bootstrap, fit

SYSTEMS = [f"S{k}" for k in range(8)]
TRUE = np.linspace(-1.0, 1.0, len(SYSTEMS))
TIE = 0.5
TASTE_SD = 0.3
VOTES_EACH = 20
WAYS = ("random", "balanced", "active")
TARGETS = (0.9, 1.0)  # tau 0.9: at most one of the 28 pairs out of order; 1.0: the true order


def kendall_tau(strength: np.ndarray) -> float:
    """Kendall's tau between the fitted and the true order (no ties among the true strengths)."""
    signs = [
        np.sign(strength[i] - strength[j]) * np.sign(TRUE[i] - TRUE[j])
        for i, j in itertools.combinations(range(len(TRUE)), 2)
    ]
    return float(np.mean(signs))


class Panel:
    """One way's votes so far, as scoring.pairwise reads them."""

    def __init__(self) -> None:
        self.first: list[int] = []
        self.second: list[int] = []
        self.tie: list[bool] = []
        self.rater: list[int] = []
        self.served: Counter = Counter()

    def cast(self, left: int, right: int, theta: np.ndarray, u: float, rater: int) -> None:
        a, b = np.exp(theta[left]), np.exp(theta[right])
        t = TIE * np.sqrt(a * b)
        x = u * (a + b + t)
        winner, loser = (left, right) if x < a else (right, left)
        self.first.append(winner)
        self.second.append(loser)
        self.tie.append(x >= a + b)
        self.rater.append(rater)
        self.served[(SYSTEMS[left], SYSTEMS[right])] += 1

    def votes(self) -> Votes:
        raters = max(self.rater) + 1
        return Votes(
            SYSTEMS,
            np.array(self.first),
            np.array(self.second),
            np.array(self.tie),
            np.array(self.rater),
            [f"r{r}" for r in range(raters)],
        )


def one_test(test: int, votes: int, step: int, warmup: int, replicates: int) -> dict:
    """Kendall's tau of each way's fit after every `step` votes."""
    index = {name: k for k, name in enumerate(SYSTEMS)}
    panels = {way: Panel() for way in WAYS}
    uncertainty = None
    taus: dict[str, list[float]] = {way: [] for way in WAYS}
    pair_rng = np.random.default_rng([test, 2])
    for rater in range(votes // VOTES_EACH):
        rng = np.random.default_rng([test, 1, rater])  # the rater: the same in every way
        theta = TRUE + rng.normal(0, TASTE_SD, len(SYSTEMS))
        chances = rng.random(VOTES_EACH)
        chosen = {
            "random": [
                tuple(pair_rng.choice(len(SYSTEMS), 2, replace=False)) for _ in range(VOTES_EACH)
            ],
            "balanced": next_pairs(SYSTEMS, panels["balanced"].served, None, VOTES_EACH, test),
            "active": next_pairs(SYSTEMS, panels["active"].served, uncertainty, VOTES_EACH, test),
        }
        for way, pairs in chosen.items():
            for (left, right), u in zip(pairs, chances, strict=True):
                if isinstance(left, str):
                    left, right = index[left], index[right]
                panels[way].cast(int(left), int(right), theta, u, rater)
        cast = (rater + 1) * VOTES_EACH
        if cast % step:
            continue
        for way in WAYS:
            taus[way].append(kendall_tau(fit(panels[way].votes()).strength))
        if cast >= warmup:
            draws = bootstrap(panels["active"].votes(), replicates, seed=test * 10_000 + cast)
            uncertainty = order_uncertainty(SYSTEMS, draws)
    return taus


def needed(taus: list[float], target: float, step: int) -> float:
    """The votes from which tau stays at or above the target; inf if it never settles."""
    below = np.flatnonzero(np.array(taus) < target - 1e-9)
    if len(below) == 0:
        return float(step)
    settles = below[-1] + 1  # the first check of the run that stays at the target
    return float((settles + 1) * step) if settles < len(taus) else np.inf


def show(value: float, budget: int) -> str:
    return f"> {budget:,}" if np.isinf(value) else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--votes", type=int, default=2400)
    parser.add_argument("--step", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--replicates", type=int, default=25)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    work = partial(
        one_test, votes=args.votes, step=args.step, warmup=args.warmup, replicates=args.replicates
    )
    with ProcessPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(work, range(args.tests)))
    checks = (np.arange(len(runs[0]["active"])) + 1) * args.step
    print(
        "| Votes | " + " | ".join(f"Mean tau, {way}" for way in WAYS) + " | Exact order, active |"
    )
    print("|---|" + "---|" * (len(WAYS) + 1))
    for n in range(len(checks)):
        if checks[n] % (5 * args.step) and n != len(checks) - 1:
            continue
        means = [np.mean([run[way][n] for run in runs]) for way in WAYS]
        exact = np.mean([run["active"][n] == 1.0 for run in runs])
        print(f"| {checks[n]:,} | " + " | ".join(f"{m:.3f}" for m in means) + f" | {exact:.2f} |")
    print()
    ways = " | ".join(f"Votes, {way}" for way in WAYS)
    print(f"| Kendall's tau from then on | {ways} | Saved against balanced |")
    print("|---|" + "---|" * (len(WAYS) + 1))
    for target in TARGETS:
        medians = {
            way: float(np.median([needed(run[way], target, args.step) for run in runs]))
            for way in WAYS
        }
        saved = 1 - medians["active"] / medians["balanced"]
        saved_text = "-" if not np.isfinite(saved) else f"{saved:.0%}"
        print(
            f"| >= {target} | "
            + " | ".join(show(medians[way], args.votes) for way in WAYS)
            + f" | {saved_text} |"
        )
    print(
        f"{args.tests} tests, medians; checks every {args.step} votes, {args.replicates} "
        f"replicates a refit from {args.warmup} votes; {time.monotonic() - started:.0f} s in all "
        f"({args.jobs} processes); load average at end: {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
