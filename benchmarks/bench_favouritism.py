"""The favouritism rule against a team's rater farm, on simulated crowd runs shaped like DCASE 2023
Task 7 (tests/simulate.py, `simulate_farm`): 48 honest raters with their own leniency and tastes,
each rating 2 of 7 categories with every system's 4 sounds, 6 systems a track.

- Honest panels (no farm): the share of honest raters the default rule names, over `--panels`
  panels; this is the rule's false-positive rate.
- Farms of 16 raters, crude (their system 10, every other 2) and sneaky (their system 3 points
  above an honest rater's answer), lifting the system of true rank 5 in track A: how many of the
  farm and of the honest raters are named, the favoured system's rank with the rule off and on,
  and whether the published ranking equals the one the honest raters alone give.

    python benchmarks/bench_favouritism.py [--panels 200] [--farms 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import django

django.setup()

from scoring.compute import score  # noqa: E402
from scoring.inputs import Inputs  # noqa: E402
from scoring.rules import Rules  # noqa: E402
from tests.simulate import simulate_farm  # noqa: E402

RULES = Rules(bootstrap=0)
OFF = Rules(bootstrap=0, rater_rules={"favouritism": {"action": "off", "crowd_action": "off"}})


def ranking(result: dict) -> dict[str, list[str]]:
    return {track: [row["system"] for row in rows] for track, rows in result["tracks"].items()}


def without(inputs: Inputs, raters: set[str]) -> Inputs:
    return Inputs(
        ratings=[r for r in inputs.ratings if r["rater"] not in raters],
        diversity=[d for d in inputs.diversity if d["rater"] not in raters],
        fad=inputs.fad,
        teams=inputs.teams,
    )


def honest_panels(panels: int) -> None:
    named, total = [], 0
    for seed in range(panels):
        inputs, _, _ = simulate_farm(farm=0, seed=10_000 + seed, systems_per_track=6)
        result = score(inputs, RULES)
        n = len(result["favouritism"]["raters"])
        named.append(n)
        total += 48
    rate = sum(named) / total
    print(
        f"honest panels: {panels}; honest raters named {sum(named)} of {total} "
        f"({100 * rate:.2f}%); panels with none named {sum(n == 0 for n in named)}; "
        f"most in one panel {max(named)}"
    )


def farms(kind: str, count: int) -> None:
    caught, wrongly, equal, off_rank, on_rank = [], [], 0, [], []
    for seed in range(count):
        inputs, favoured, farmers = simulate_farm(kind=kind, seed=seed, systems_per_track=6)
        result = score(inputs, RULES)
        named = {r["rater"] for r in result["favouritism"]["raters"]}
        caught.append(len(named & set(farmers)))
        wrongly.append(len(named - set(farmers)))
        honest = score(without(inputs, set(farmers)), RULES)
        equal += ranking(result) == ranking(honest)
        off = ranking(score(inputs, OFF))["A"]
        off_rank.append(off.index(favoured) + 1)
        on_rank.append(ranking(result)["A"].index(favoured) + 1)
    print(
        f"{kind} farms: {count}; farm raters named median {statistics.median(caught)} of 16 "
        f"(fewest {min(caught)}); honest named median {statistics.median(wrongly)} of 48 "
        f"(most {max(wrongly)}); ranking equal to the honest raters' alone in {equal} of {count}; "
        f"favoured system (true rank 5) ranked median {statistics.median(off_rank)} with the rule "
        f"off, {statistics.median(on_rank)} with it on"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panels", type=int, default=200)
    parser.add_argument("--farms", type=int, default=20)
    args = parser.parse_args()
    start = time.perf_counter()
    honest_panels(args.panels)
    for kind in ("crude", "sneaky"):
        farms(kind, args.farms)
    print(f"{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
