"""Time every built-in embedding model as the objective stage runs it, on the CPU and on CUDA.

Each model is loaded with its fixed random weights (the released files are not needed for
speed) through `load_embedding_model`, and embeds DCASE clips (4 s at 22,050 Hz, mono, float32)
in batches of FOLEY_EMBED_BATCH (32) through `EmbeddingModel.embed`, the call the stage makes:
resampling to the model's rate, the front end and the network, frames back as float32 numpy.
Prints, per model and device, clips/s (median of the repeats after one warm-up batch), the first
batch's time (load and warm-up), the frames and dimensions returned and, on CUDA, the peak GPU
memory. The CPU column is the reference in the same run; at DCASE size a category is 100 clips
per system and its evaluation set 100 clips, so the table also gives the seconds one
system's 700 clips take.

    python benchmarks/bench_embeddings.py [--devices cpu,cuda] [--models openl3,vggish,...]
        [--clips 64] [--cpu-clips 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_sounds import RATE, SECONDS, clips

from stimuli.objective.embeddings import BUILTIN_MODULES, load_embedding_model

SYSTEM_CLIPS = 700  # 7 categories x 100 clips


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(name: str, device: str, audio: np.ndarray, batch: int, repeats: int) -> dict:
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    model = load_embedding_model(name, weights="random", device=device)
    first = model.embed(audio[:batch], RATE)
    sync(device)
    first_s = time.perf_counter() - started
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        for start in range(0, len(audio), batch):
            model.embed(audio[start : start + batch], RATE)
        sync(device)
        runs.append(time.perf_counter() - started)
    row = {
        "clips_per_s": len(audio) / statistics.median(runs),
        "first_s": first_s,
        "shape": first.shape[1:],
    }
    if device == "cuda":
        row["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    del model
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_devices = "cpu,cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--devices", default=default_devices)
    parser.add_argument("--models", default=",".join(BUILTIN_MODULES))
    parser.add_argument("--clips", type=int, default=64, help="clips per repeat on CUDA")
    parser.add_argument("--cpu-clips", type=int, default=8, help="clips per repeat on the CPU")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    threads = torch.get_num_threads()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(
        f"torch {torch.__version__}, {os.cpu_count()} cores ({threads} torch threads), "
        f"GPU: {gpu}; load {load}; clips of {SECONDS:g} s at {RATE} Hz, batches of "
        f"{args.batch}, medians of {args.repeats}"
    )
    print(
        f"{'model':8} {'device':6} {'clips/s':>9} {'700 clips':>10} {'first batch':>12} "
        f"{'frames x d':>11} {'peak GPU':>9}"
    )
    for name in args.models.split(","):
        for device in args.devices.split(","):
            count = args.clips if device == "cuda" else args.cpu_clips
            try:
                row = measure(name, device, clips(count), min(args.batch, count), args.repeats)
            except Exception as exc:
                print(f"{name:8} {device:6} failed: {type(exc).__name__}: {exc}")
                continue
            frames, dim = row["shape"]
            peak = f"{row['peak_mib']:7.0f} MiB" if "peak_mib" in row else ""
            print(
                f"{name:8} {device:6} {row['clips_per_s']:9.1f} "
                f"{SYSTEM_CLIPS / row['clips_per_s']:9.1f}s {row['first_s']:11.2f}s "
                f"{f'{frames} x {dim}':>11} {peak:>9}",
                flush=True,
            )


if __name__ == "__main__":
    main()
