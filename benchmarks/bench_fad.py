"""Time FAD for one system and category, beside the references on the same statistics:

- factored: ours as the objective stage runs it, the reference covariance factored once per
  category (Cholesky, or the eigenvector factor where it is singular) and one `eigvalsh` per
  system: of the d x d F^T S F, or where the system has fewer embeddings n than dimensions d,
  of the n x n (X F)(X F)^T / (n - 1) from its centred embeddings X (column "solve"; "d x d":
  the same system through the d x d solve, as before the n x n one); the factoring itself is
  timed apart (once per category, not per system);
- per call: ours factoring the reference on every call;
- eigh: the previous exact path (an eigendecomposition, then the product's eigenvalues);
- sqrtm: the reference formula (scipy.linalg.sqrtm of the covariance product, as in Google's
  FAD and fadtk), with the largest difference from ours.

Statistics: the official DCASE 2023 Task 7 evaluation-set VGGish statistics (128-d) against each
other, and random 512-d (OpenL3) and 2048-d statistics from embeddings: a system of 100
embeddings (a DCASE system's 100 clips of a category, one embedding each) and one of more
embeddings than dimensions, against a full-rank and a singular reference. Medians of several
runs; the load average is printed with them.

    python benchmarks/bench_fad.py [--repeats 7] [--threads 1] [--stats ../shared/data/dcase2023_task7_eval_vggish_stats]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stimuli.objective.fad import (
    GaussianStats,
    ReferenceFactor,
    frechet_distance,
)
from tests.fad_reference import frechet_distance_eigh, frechet_distance_sqrtm

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
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS threads (1: single-threaded, comparable across loads)",
    )
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(args.threads):
        run(args)


def run(args: argparse.Namespace) -> None:
    pairs: list[tuple[str, GaussianStats, GaussianStats]] = []
    files = sorted(Path(args.stats).glob("*.npz"))
    if len(files) >= 2:
        a, b = GaussianStats.from_npz(files[0]), GaussianStats.from_npz(files[1])
        pairs.append((f"DCASE VGGish 128-d ({files[0].stem} vs {files[1].stem})", a, b))
    else:
        print(f"(no DCASE statistics in {args.stats}; random ones only)")
    # (label, d, system embeddings, reference embeddings)
    shapes = (
        ("random 512-d, system of 100", 512, 100, 4000),
        ("random 512-d, system of 4000", 512, 4000, 4000),
        ("random 512-d, system of 100, singular reference of 300", 512, 100, 300),
        ("random 512-d, system of 4000, singular reference of 300", 512, 4000, 300),
        ("random 2048-d, system of 1000, singular reference of 1000", 2048, 1000, 1000),
    )
    for label, d, n_system, n_reference in shapes:
        pairs.append((label, random_stats(d, n_system, 0), random_stats(d, n_reference, 1)))

    print(f"FAD per system and category, median of {args.repeats} runs, ms, "
          f"{args.threads} BLAS thread(s)")  # fmt: skip
    print(f"{'statistics (system vs reference)':58} {'solve':>9} {'factored':>9} {'d x d':>7} {'factor':>7} "
          f"{'per call':>9} {'eigh':>7} {'sqrtm':>7} {'vs eigh':>8} {'|diff|':>9}")  # fmt: skip
    for label, a, b in pairs:
        factored = ReferenceFactor.of(b)
        ours = median_time(lambda a=a, f=factored: frechet_distance(a, f), args.repeats)
        # The same factored path without the system's embeddings: always the d x d solve.
        plain = GaussianStats(a.mu, a.sigma, a.count)
        square = median_time(lambda p=plain, f=factored: frechet_distance(p, f), args.repeats)
        factor = median_time(lambda b=b: ReferenceFactor.of(b), args.repeats)
        per_call = median_time(lambda a=a, b=b: frechet_distance(a, b), args.repeats)
        eigh = median_time(lambda a=a, b=b: frechet_distance_eigh(a, b), args.repeats)
        ref = median_time(lambda a=a, b=b: frechet_distance_sqrtm(a, b), args.repeats)
        diff = abs(frechet_distance(a, factored) - frechet_distance_sqrtm(a, b))
        kind = "" if factored.triangular else " [eig]"
        width = factored.factor.shape[1]
        n = a.count if a.centred is not None and a.count < width else width
        print(f"{label + kind:58} {f'{n}x{n}':>9} {ours * 1e3:9.2f} {square * 1e3:7.2f} "
              f"{factor * 1e3:7.2f} {per_call * 1e3:9.2f} {eigh * 1e3:7.2f} {ref * 1e3:7.2f} "
              f"{eigh / ours:7.1f}x {diff:9.2e}")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
