"""Time KAD for one system and category at the DCASE shape, beside kadtk's own function.

A system's 100 clips of a category (one embedding per clip), against a reference of 1,000
embeddings, at d = 128 (VGGish) and 512 (OpenL3, CLAP); single thread. Columns:

- ours: `kernel_distance` against a `KadReference` prepared once per category (its bandwidth and
  kernel sum): per system, its own 100 x 100 kernel and one 100 x 1,000 cross-kernel;
- prepare: preparing the reference itself (once per category, not per system);
- interval: `kad_interval` (the value and its jackknife interval over clips);
- kadtk: `kadtk.kad.calc_kernel_audio_distance` on the same embeddings and the same bandwidth
  (the reference's median distance, passed in), in float32 as kadtk runs and in float64; it
  forms the reference's 1,000 x 1,000 kernel on every call (its disk cache keeps the squared
  distances, not the kernel sum, so it would still). kadtk is installed in the benchmark's own
  environment only (`pip install --no-deps kadtk hypy-utils` beside torch); its package imports
  torchaudio for audio loading, which the kernel function does not use, so the module is loaded
  on its own. Without kadtk, a plain implementation of the definition (scipy's cdist) stands
  in, and the table says so.

Medians of several runs; the load average is printed with them.

    python benchmarks/bench_kad.py [--repeats 21]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fad import median_time

from stimuli.objective.kad import KadReference, kad_interval, kernel_distance


def median_ms(fn, repeats: int) -> float:
    return median_time(fn, repeats) * 1000


def load_kadtk():
    """kadtk's kernel function, or None where kadtk is not installed."""
    spec = importlib.util.find_spec("kadtk")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    package = types.ModuleType("kadtk")
    package.__path__ = [str(folder)]
    sys.modules["kadtk"] = package
    for name, cls in (("emb_loader", "EmbeddingLoader"), ("model_loader", "ModelLoader")):
        stub = types.ModuleType(f"kadtk.{name}")
        setattr(stub, cls, object)
        sys.modules[f"kadtk.{name}"] = stub
    module_spec = importlib.util.spec_from_file_location("kadtk.kad", folder / "kad.py")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["kadtk.kad"] = module
    module_spec.loader.exec_module(module)
    return module.calc_kernel_audio_distance


def plain_kad(x: np.ndarray, y: np.ndarray, h: float) -> float:
    from scipy.spatial.distance import cdist

    k = [np.exp(-cdist(a, b, "sqeuclidean") / (2 * h * h)) for a, b in ((x, x), (y, y), (x, y))]
    m, n = len(x), len(y)
    xx = (k[0].sum() - m) / (m * (m - 1))
    yy = (k[1].sum() - n) / (n * (n - 1))
    return 100 * (xx + yy - 2 * k[2].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--clips", type=int, default=100)
    parser.add_argument("--reference", type=int, default=1000)
    args = parser.parse_args()

    from threadpoolctl import threadpool_limits

    calc = load_kadtk()
    torch = None
    if calc is not None:
        import torch

        torch.set_num_threads(1)
    other = "kadtk" if calc is not None else "plain definition (kadtk not installed)"
    print(f"load average {os.getloadavg()[0]:.2f}; single thread; beside: {other}")
    header = "| d | ours ms | prepare ms | interval ms | {0} f32 ms | {0} f64 ms | x f32 | x f64 | |diff| |"
    print(header.format("kadtk" if calc else "plain"))
    print("|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(2023)
    with threadpool_limits(limits=1):
        for d in (128, 512):
            print(row(d, rng, args, calc, torch))


def row(d: int, rng: np.random.Generator, args, calc, torch) -> str:
    y = rng.normal(size=(args.reference, d))
    x = rng.normal(0.05, 1.05, size=(args.clips, d))
    prepare = median_ms(lambda: KadReference.of(y), max(3, args.repeats // 4))
    reference = KadReference.of(y)
    ours = median_ms(lambda: kernel_distance(x, reference), args.repeats)
    clips = list(x[:, None, :])
    interval = median_ms(lambda: kad_interval(clips, reference), args.repeats)
    value = kernel_distance(x, reference)
    h = reference.bandwidth
    if calc is not None:
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)

        def theirs(precision):
            # kadtk's x is its baseline; its bandwidth comes from y unless given.
            return float(calc(yt, xt, (None, None), "cpu", bandwidth=h, precision=precision))

        f32 = median_ms(lambda: theirs(torch.float32), args.repeats)
        f64 = median_ms(lambda: theirs(torch.float64), args.repeats)
        diff = abs(theirs(torch.float64) - value)
    else:
        f32 = float("nan")  # the plain definition runs in float64 only
        f64 = median_ms(lambda: plain_kad(x, y, h), args.repeats)
        diff = abs(plain_kad(x, y, h) - value)
    return (
        f"| {d} | {ours:.2f} | {prepare:.1f} | {interval:.2f} | {f32:.2f} | {f64:.2f} | "
        f"{f32 / ours:.1f} | {f64 / ours:.1f} | {diff:.1e} |"
    )


if __name__ == "__main__":
    main()
