"""Time FAD for one category: ours (symmetric eigendecompositions, float64) beside the reference
formula (scipy.linalg.sqrtm of the covariance product, as in Google's FAD and fadtk), on the
same statistics, with the largest difference between the two values.

Statistics: the official DCASE 2023 Task 7 evaluation-set VGGish statistics (128-d) against each
other, and random 512-d (OpenL3) and 2048-d statistics from embeddings. Medians of several runs.

    python benchmarks/bench_fad.py [--repeats 7] [--stats ../shared/data/dcase2023_task7_eval_vggish_stats]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stimuli.fad import GaussianStats, frechet_distance, frechet_distance_sqrtm

ROOT = Path(__file__).resolve().parents[1]


def median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def random_stats(d: int, n: int, seed: int) -> GaussianStats:
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d)) / np.sqrt(d)
    return GaussianStats.from_embeddings(rng.normal(size=(n, d)) @ mixing + rng.normal(size=d))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--stats", default=str(ROOT.parent / "shared/data/dcase2023_task7_eval_vggish_stats")
    )
    args = parser.parse_args()
    pairs: list[tuple[str, GaussianStats, GaussianStats]] = []
    files = sorted(Path(args.stats).glob("*.npz"))
    if len(files) >= 2:
        a, b = GaussianStats.from_npz(files[0]), GaussianStats.from_npz(files[1])
        pairs.append((f"DCASE VGGish 128-d ({files[0].stem} vs {files[1].stem})", a, b))
    else:
        print(f"(no DCASE statistics in {args.stats}; random ones only)")
    for d, n in ((512, 4000), (2048, 1000)):
        pairs.append((f"random {d}-d from {n} embeddings (rank {min(d, n - 1)})",
                      random_stats(d, n, 0), random_stats(d, n, 1)))  # fmt: skip

    print(f"FAD per category, median of {args.repeats} runs")
    print(f"{'statistics':58} {'ours ms':>9} {'sqrtm ms':>9} {'speed-up':>9} {'|diff|':>10}")
    for label, a, b in pairs:
        ours = median_time(lambda a=a, b=b: frechet_distance(a, b), args.repeats)
        ref = median_time(lambda a=a, b=b: frechet_distance_sqrtm(a, b), args.repeats)
        diff = abs(frechet_distance(a, b) - frechet_distance_sqrtm(a, b))
        print(f"{label:58} {ours * 1e3:9.2f} {ref * 1e3:9.2f} {ref / ours:8.1f}x {diff:10.2e}")


if __name__ == "__main__":
    main()
