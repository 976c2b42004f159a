"""Time OpenL3 embeddings: the built-in model against torchopenl3 on the same audio.

4 s clips at 22,050 Hz are written as WAV files; each timed run reads them, resamples to 48 kHz
and returns 512-d mel256 embeddings every 0.1 s (36 windows per clip) from random weights.
torchopenl3 runs with its default resampler (resampy, on the CPU) and with julius ("julian").
Prints clips/s (median of the repetitions) and, for the built-in model, the peak memory of two
batch sizes, each measured in a fresh process, to show that it is bounded by `batch_frames`
rather than by the number of clips.

Then the models alone on windows already cut (front end and network, one batch of windows):
windows/s for ours (fp16 and bf16 on CUDA; float32 and bf16 on the CPU) and for torchopenl3's
network (bf16 autocast on CUDA, float32 on the CPU), the convolutions' FLOP per window counted
from the layers, and the fraction of the device's matrix throughput that this is, measured in
the same run with a large matrix product (bf16 on CUDA, float32 on the CPU, so that a CPU's bf16
figure can exceed 100%).

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
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stimuli.objective.embeddings import openl3

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


def conv_flop_per_window(net: torch.nn.Module, windows: torch.Tensor) -> float:
    """FLOP (2 per multiply-add) of the convolutions for one window, counted by hooks."""
    total = 0.0

    def count(conv, inputs, output):
        nonlocal total
        kh, kw = conv.kernel_size
        per_output = 2 * conv.in_channels // conv.groups * kh * kw
        total += per_output * output[0].numel()

    hooks = [
        m.register_forward_hook(count) for m in net.modules() if isinstance(m, torch.nn.Conv2d)
    ]
    try:
        with torch.inference_mode():
            net(windows[:1])
    finally:
        for hook in hooks:
            hook.remove()
    return total


def matrix_flops(device: str, repeats: int) -> tuple[float, str]:
    """FLOP/s of a large matrix product (median): bf16 through cuBLAS on CUDA; on the CPU float32,
    the faster of BLAS (torch.mm) and oneDNN (a 1x1 convolution is a matrix product there) since
    some BLAS builds run far below the processor's peak on some processors."""
    if device == "cuda":
        size = 8192
        a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        seconds = median_seconds({"mm": lambda: [torch.mm(a, b) for _ in range(5)]}, 10, device)
        return 2 * size**3 * 5 / seconds["mm"], "bf16, cuBLAS"
    size, side = 1024, 64
    a = torch.randn(size * 2, size * 2)
    x = torch.randn(1, size, side, side).contiguous(memory_format=torch.channels_last)
    w = torch.randn(size, size, 1, 1).contiguous(memory_format=torch.channels_last)
    seconds = median_seconds(
        {"blas": lambda: torch.mm(a, a), "onednn": lambda: F.conv2d(x, w)}, max(repeats, 5), device
    )
    rates = {
        "BLAS": 2 * (size * 2) ** 3 / seconds["blas"],
        "oneDNN": 2 * size * size * side * side / seconds["onednn"],
    }
    best = max(rates, key=rates.get)
    others = ", ".join(f"{k} {v / 1e12:.2f}" for k, v in rates.items() if k != best)
    return rates[best], f"float32, {best}; {others} TFLOP/s"


def window_throughput(
    device: str, repeats: int, batch: int, reference: bool, end_to_end: float | None
) -> None:
    """Windows/s of the front end and network alone, ours beside torchopenl3's; `end_to_end`:
    our windows/s from WAV files, put beside the same matrix throughput."""
    windows = torch.randn(batch, openl3.WINDOW, device=device) * 0.1
    runs = {}
    models: dict[str, torch.nn.Module] = {}
    precisions = ["fp16", "bf16"] if device == "cuda" else ["fp32", "bf16"]
    for precision in precisions:
        model = openl3.load_model(
            "random", device=device, input_repr="mel256", embedding_size=512, hop_size=HOP,
            precision=precision,
        )  # fmt: skip
        models[f"ours ({precision})"] = model

        def run(model=model):
            with torch.inference_mode():
                return model.embed_windows(windows[None])

        runs[f"ours ({precision})"] = run
    if reference:
        from torchopenl3.models import PytorchOpenl3

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            net = PytorchOpenl3(input_repr="mel256", embedding_size=512, content_type="music")
        net = net.eval().to(device)
        label = "torchopenl3 (bf16)" if device == "cuda" else "torchopenl3 (fp32)"

        chunk = next(iter(models.values())).batch_frames

        def run_reference():
            # In ours' chunks: the whole batch at once does not fit an 80-GB GPU.
            cuda = device == "cuda"
            with torch.inference_mode(), torch.autocast(device, torch.bfloat16, enabled=cuda):
                return [net(part[:, None]) for part in windows.split(chunk)]

        runs[label] = run_reference
    ours_model = next(iter(models.values()))
    flop = conv_flop_per_window(ours_model.net, ours_model.frontend(windows[:1]))
    peak, peak_label = matrix_flops(device, repeats)
    print(
        f"front end + network on {batch} windows (in chunks of ours' default "
        f"{ours_model.batch_frames}), mel256 512-d: "
        f"{flop / 1e9:.1f} GFLOP of convolutions per window; "
        f"matrix product ({peak_label}): {peak / 1e12:.2f} TFLOP/s"
    )
    for label, seconds in median_seconds(runs, repeats, device).items():
        rate = batch / seconds
        print(
            f"  {label:24s} {rate:9.1f} windows/s  {rate * flop / 1e12:7.2f} TFLOP/s  "
            f"{rate * flop / peak:6.1%} of the matrix product"
        )
    if end_to_end:
        print(
            f"  {'ours, end to end':24s} {end_to_end:9.1f} windows/s  "
            f"{end_to_end * flop / 1e12:7.2f} TFLOP/s  {end_to_end * flop / peak:6.1%} of the "
            "matrix product (WAV reading and resampling included)"
        )


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
    parser.add_argument("--clips", type=int, default=None, help="default: 2 on CPU, 64 on CUDA")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-frames", type=int, default=None)
    parser.add_argument("--memory-clips", default="", help="two clip counts, e.g. 1,4")
    parser.add_argument("--no-reference", action="store_true", help="skip torchopenl3")
    parser.add_argument(
        "--windows", type=int, default=None, help="windows per batch, models alone; 0 skips"
    )
    parser.add_argument("--memory-probe", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        print(json.dumps(peak_memory(args.memory_probe, args.device, args.batch_frames)))
        return
    clips = args.clips or (64 if args.device == "cuda" else 2)
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

    windows = args.windows if args.windows is not None else (1024 if args.device == "cuda" else 16)
    if windows:
        per_clip = openl3.frame_count(
            int(SECONDS * openl3.SAMPLE_RATE), int(HOP * openl3.SAMPLE_RATE)
        )
        window_throughput(
            args.device, args.repeats, windows, not args.no_reference, results["ours"] * per_clip
        )

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
