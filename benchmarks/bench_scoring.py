"""Time the scoring of a simulated listening test: a DCASE 2023 Task 7-sized one and one with
about 200,000 ratings. Prints medians of several runs.

The reference beside the numbers is a plain-Python scoring of the same rows (dictionaries, one
loop per replicate) for the means and a few bootstrap replicates, extrapolated to the same number
of replicates.

    python benchmarks/bench_scoring.py [--repeats 3] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scoring.compute import score
from scoring.rules import Rules
from tests.simulate import simulate


def reference_replicate(trials: list[tuple], rng: random.Random) -> dict:
    """Quality means per system and category with raters and sounds drawn with replacement."""
    raters = sorted({t[0] for t in trials})
    weight: dict = defaultdict(int)
    for _ in raters:
        weight[rng.choice(raters)] += 1
    sounds = defaultdict(set)
    for t in trials:
        sounds[(t[1], t[2])].add(t[3])
    sound_weight: dict = defaultdict(int)
    for cell, members in sounds.items():
        members = sorted(members)
        for _ in members:
            sound_weight[(cell, rng.choice(members))] += 1
    sums, counts = defaultdict(float), defaultdict(float)
    for rater, system, category, sound, quality in trials:
        w = weight[rater] * sound_weight[((system, category), sound)]
        sums[(system, category)] += w * quality
        counts[(system, category)] += w
    return {cell: sums[cell] / counts[cell] for cell in sums if counts[cell]}


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    sizes = {
        "DCASE-sized (8 systems x 7 categories x 20 sounds x 10 raters)": dict(raters=10),
        "200k ratings (8 x 7 x 20 sounds x 180 raters)": dict(
            raters=180, team_raters=10, careless=10
        ),
    }
    print(f"bootstrap replicates: {args.bootstrap}; medians of {args.repeats} runs\n")
    for label, params in sizes.items():
        sim = simulate(**params)
        n = len(sim.inputs.ratings) + len(sim.inputs.diversity)
        point = median_time(lambda sim=sim: score(sim.inputs, Rules(bootstrap=0)), args.repeats)
        full = median_time(
            lambda sim=sim: score(sim.inputs, Rules(bootstrap=args.bootstrap)), args.repeats
        )
        trials = [
            (r["rater"], r["system"], r["category"], r["stimulus"], float(r["quality"]))
            for r in sim.inputs.ratings
            if r["role"] == "trial"
        ]
        few = 5

        def reference(trials=trials, few=few):
            rng = random.Random(0)
            return [reference_replicate(trials, rng) for _ in range(few)]

        ref_rep = median_time(reference, 1) / few
        print(label)
        print(f"  ratings (incl. checks and diversity): {n:,}")
        print(f"  ours, point estimates and analyses:   {point:8.2f} s")
        print(f"  ours, with {args.bootstrap} replicates:          {full:8.2f} s")
        print(
            f"  ours, per replicate:                  {(full - point) / max(1, args.bootstrap) * 1000:8.2f} ms"
        )
        print(
            f"  reference (plain Python), per replicate (one scale only): {ref_rep * 1000:8.2f} ms"
        )
        print(
            f"  reference extrapolated to {args.bootstrap} replicates:    "
            f"{ref_rep * args.bootstrap:8.1f} s\n"
        )


if __name__ == "__main__":
    main()
