"""Time OpenL3 embeddings: the built-in model against torchopenl3 on the same audio.

4 s clips at 22,050 Hz are written as WAV files; each timed run reads them, resamples to 48 kHz
and returns 512-d mel256 embeddings every 0.1 s (36 windows per clip) from random weights.
torchopenl3 runs with its default resampler (resampy, on the CPU) and with julius ("julian").
Prints clips/s (median of the repetitions) and, for the built-in model, the peak memory of two
batch sizes, each measured in a fresh process, to show that it is bounded by `batch_frames`
rather than by the number of clips.

    python benchmarks/bench_openl3.py [--device cpu|cuda] [--clips 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stimuli.embeddings import openl3

RATE = 22_050
SECONDS = 4.0
HOP = 0.1


def write_clips(folder: Path, count: int) -> list[Path]:
    """Different chirps, tones and noise per clip, as 16-bit WAV."""
    t = np.arange(int(SECONDS * RATE)) / RATE
    rng = np.random.default_rng(0)
    paths = []
    for index in range(count):
        clip = (
            0.3 * np.sin(2 * np.pi * ((50 + 30 * index) * t + 1200 * t**2))
            + 0.2 * np.sin(2 * np.pi * 220 * (1 + index % 5) * t)
            + 0.05 * rng.standard_normal(t.size)
        )
        path = folder / f"clip{index:04d}.wav"
        sf.write(path, clip.astype(np.float32), RATE, subtype="PCM_16")
        paths.append(path)
    return paths


def read_clips(paths: list[Path]) -> np.ndarray:
    return np.stack([sf.read(path, dtype="float32")[0] for path in paths])


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_seconds(runs: dict, repeats: int, device: str) -> dict[str, float]:
    """Median wall time per run; repetitions interleaved, so that a busy spell of a shared
    machine slows all of them alike."""
    for run in runs.values():
        run()  # warm-up: allocations, kernel selection, resampling filters
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(repeats):
        for label, run in runs.items():
            sync(device)
            start = time.perf_counter()
            run()
            sync(device)
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(values) for label, values in times.items()}


def ours(paths: list[Path], device: str, batch_frames: int | None):
    model = openl3.load_model(
        "random", device=device, input_repr="mel256", embedding_size=512, hop_size=HOP,
        batch_frames=batch_frames,
    )  # fmt: skip

    def run():
        return openl3.embed_batch(read_clips(paths), RATE, model)

    return run


def reference(paths: list[Path], device: str, sampler: str):
    import torchopenl3
    from torchopenl3.models import PytorchOpenl3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = PytorchOpenl3(input_repr="mel256", embedding_size=512, content_type="music")
    net = net.eval().to(device)

    def run():
        # A tensor on the wanted device: with a numpy array torchopenl3 picks CUDA by itself.
        audio = torch.from_numpy(read_clips(paths).astype(np.float64)).to(device)
        # torchopenl3 logs a warning per call with the resampy sampler.
        logging.disable(logging.WARNING)
        try:
            emb, _ = torchopenl3.get_audio_embedding(
                audio, RATE, model=net, hop_size=HOP, sampler=sampler, verbose=False
            )
        finally:
            logging.disable(logging.NOTSET)
        return emb.cpu().numpy()

    return run


def resident_mib(field: str) -> float:
    """A size from /proc/self/status (VmRSS now, VmHWM peak) in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_memory(clips: int, device: str, batch_frames: int | None) -> dict:
    """Embed `clips` clips in this (fresh) process; the peak memory above the loaded model."""
    with tempfile.TemporaryDirectory() as folder:
        paths = write_clips(Path(folder), clips)
        run = ours(paths, device, batch_frames)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        # Reset the peak resident size to the current one (Linux >= 4.0).
        Path("/proc/self/clear_refs").write_text("5")
        before = resident_mib("VmRSS")
        emb = run()
        result = {
            "clips": clips,
            "windows": int(emb.shape[0] * emb.shape[1]),
            "rss_before_mib": before,
            "peak_rss_mib": resident_mib("VmHWM"),
            "audio_mib": emb.shape[0] * SECONDS * openl3.SAMPLE_RATE * 4 / 2**20,
        }
        if device == "cuda":
            result["peak_cuda_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--clips", type=int, default=None, help="default: 2 on CPU, 32 on CUDA")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-frames", type=int, default=None)
    parser.add_argument("--memory-clips", default="", help="two clip counts, e.g. 1,4")
    parser.add_argument("--no-reference", action="store_true", help="skip torchopenl3")
    parser.add_argument("--memory-probe", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        print(json.dumps(peak_memory(args.memory_probe, args.device, args.batch_frames)))
        return
    clips = args.clips or (32 if args.device == "cuda" else 2)
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(
        f"{clips} clips of {SECONDS:g} s at {RATE} Hz from WAV, mel256 512-d, hop {HOP} s, "
        f"random weights; {args.device} ({name}), {torch.get_num_threads()} threads, "
        f"median of {args.repeats}"
    )
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        paths = write_clips(Path(folder), clips)
        runs = {"ours": ours(paths, args.device, args.batch_frames)}
        if not args.no_reference:
            runs["torchopenl3 (resampy)"] = reference(paths, args.device, "resampy")
            runs["torchopenl3 (julian)"] = reference(paths, args.device, "julian")
        for label, seconds in median_seconds(runs, args.repeats, args.device).items():
            results[label] = clips / seconds
            print(f"  {label:24s} {clips / seconds:8.3f} clips/s  ({seconds:.2f} s per run)")
    others = [v for k, v in results.items() if k != "ours"]
    if others:
        print(f"  ours / fastest torchopenl3: {results['ours'] / max(others):.2f}x")

    counts = [int(c) for c in args.memory_clips.split(",") if c] or (
        [8, 64] if args.device == "cuda" else [1, 4]
    )
    print("peak memory of the built-in model (fresh process each):")
    for count in counts:
        command = [sys.executable, __file__, "--memory-probe", str(count), "--device", args.device]
        if args.batch_frames:
            command += ["--batch-frames", str(args.batch_frames)]
        probe = json.loads(
            subprocess.run(command, capture_output=True, check=True, text=True).stdout
        )
        line = (
            f"  {probe['clips']:4d} clips ({probe['windows']:5d} windows): peak RSS "
            f"{probe['peak_rss_mib']:.0f} MiB, {probe['peak_rss_mib'] - probe['rss_before_mib']:.0f}"
            f" MiB above the loaded model (48 kHz audio: {probe['audio_mib']:.1f} MiB)"
        )
        if "peak_cuda_mib" in probe:
            line += f", peak CUDA {probe['peak_cuda_mib']:.0f} MiB"
        print(line)


if __name__ == "__main__":
    main()
