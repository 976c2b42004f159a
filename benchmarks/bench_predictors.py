"""Time the learned predictors as the objective stage runs them, beside their reference packages.

Audiobox Aesthetics (WavLM Base and its four heads) and PAM (MS-CLAP 2023's HTSAT-tiny and two
prompts) score the same DCASE clips (4 s at 22,050 Hz, mono, float32: chirps, tones and noise)
from the same untrained stand-in files, full size in the released layouts
(stimuli/objective/predictors/standins.py: the released files are not needed for speed):

- ours: `aesthetics.load` / `pam.load` and what the predictors step calls on each chunk of
  FOLEY_EMBED_BATCH (32) sounds, `aesthetics.predict_clips` (resampling to 16 kHz, 10 s windows
  rated 8 at a time) and `pam.scores` (resampling to 44.1 kHz, 7 s windows, the windows of the
  chunk's clips encoded `pam.BATCH` (8) at a time);
- Audiobox Aesthetics' own package: `AesPredictor.forward` on batches of 100 clips (the default
  of its `audio-aes` command), which resamples with torchaudio and rates a batch's windows in one
  pass;
- PAM's own code (soham97/PAM, not on PyPI): its `PAM.evaluate` on batches of 10 clips from its
  data loading (`dataset.py`: torchaudio's `Resample`, the 7 s windows), as its `run.py` runs it
  by default;
- for PAM also ours clip by clip (`pam.score` on each clip, one 7 s window per pass of the
  network, as the step called it before it scored a chunk's windows together; `--no-single`
  leaves this row out): what the batching changed, the same scores.

Each runs in a process of its own: ours in this interpreter, each reference in an environment of
its own that also sees the platform's packages, built as the cross-check scripts say
(scripts/crosscheck_reference_predictors.py and scripts/crosscheck_reference_predictors_pam.py,
whose stand-ins for torchaudio's compiled library are used here too: the resampling runs from
torchaudio's own source, pure torch, the code its compiled package runs). Both processes load
(one after the other), warm up on a few clips, and then take turns, one timed pass over all the
clips each, so that a busy spell of a shared machine slows both alike. The clips are made in
memory; reading files is left out of every row. Prints, per predictor, clips/s (the median of
the passes), the seconds one system's 700 clips would take (7 categories x 100), the first
call's time (loading and warm-up), the process's peak resident memory, on CUDA the peak GPU
memory, the load average at the first pass and after the last, and the largest difference
between ours and the reference's scores of the same clips (the same weights, the same work:
Audiobox Aesthetics resamples with julius here, torchaudio there).

On a GPU, `--device cuda` runs every row there (the reference packages take CUDA when they see
it: PAM with `use_cuda=True`, and `AesPredictor` by itself, which is why with `--device cpu` the
processes see no GPU). The reference environments use the platform's torch, so its CUDA build
serves every row.

    python benchmarks/bench_predictors.py [--device cpu|cuda] [--clips 32] [--repeats 3]
        [--predictors aesthetics,pam] [--aesthetics-python /tmp/aesref/bin/python]
        [--pam-python /tmp/pam_ref/bin/python] [--pam-source /tmp/pam] [--no-reference]
        [--no-single]

The reference environments' defaults can also be set with FOLEY_BENCH_AESTHETICS_PYTHON,
FOLEY_BENCH_PAM_PYTHON and FOLEY_BENCH_PAM_SOURCE.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
from bench_sounds import RATE, SECONDS, clips

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYSTEM_CLIPS = 700  # 7 categories x 100 clips
WARM_UP_CLIPS = 4
OUR_BATCH = 32  # FOLEY_EMBED_BATCH: the sounds the predictors step rates at once
REFERENCE_BATCH = {"aesthetics": 100, "pam": 10}  # audio-aes's --batch-size, run.py's
AESTHETICS_FILE = "audiobox-aesthetics/checkpoint.pt"
PREDICTORS = ("aesthetics", "pam")
SCORES = {"aesthetics": "ratings (4 axes)", "pam": "scores"}
IMPLEMENTATIONS = ("ours", "single", "reference")
MARK = "@bench"  # what starts a worker's lines to the parent


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# --- the timed runs, each in its own process ----------------------------------------------------


def ours(predictor: str, files: Path, device: str, single: bool = False):
    """Our predictor loaded from the stand-in files, and a call that scores clips as the
    predictors step does (stimuli/objective/predictor_scores.py: its `rate` on each chunk).
    `single` (PAM): clip by clip instead, the same scores."""
    from stimuli.objective.predictors import aesthetics, msclap, pam

    if predictor == "aesthetics":
        model = aesthetics.load(files / AESTHETICS_FILE, device=device)

        def rate(batch):
            rows = aesthetics.predict_clips(model, list(batch), RATE)
            return [row[axis] for row in rows for axis in aesthetics.AXES]

        return rate, model.net
    model = pam.load(files / msclap.WEIGHTS_FILE, files / "gpt2", device=device)

    def rate(batch):
        return pam.scores(model, list(batch), RATE)

    def rate_single(batch):
        return [pam.score(model, clip, RATE) for clip in batch]

    return rate_single if single else rate, model.audio


def reference_aesthetics(files: Path, device: str):
    """audiobox_aesthetics' `AesPredictor` on the same checkpoint, as its command rates a batch
    (it takes CUDA by itself when it sees a GPU)."""
    import torch

    sys.path.insert(0, str(ROOT / "scripts"))
    importlib.import_module("crosscheck_reference_predictors").stand_ins()
    from audiobox_aesthetics.infer import AesPredictor

    from stimuli.objective.predictors.aesthetics import AXES

    predictor = AesPredictor(checkpoint_pth=str(files / AESTHETICS_FILE))
    if predictor.device.type != device:
        raise SystemExit(f"audiobox_aesthetics chose {predictor.device}, not {device}")

    def rate(batch):
        items = [{"path": torch.from_numpy(clip[None]), "sample_rate": RATE} for clip in batch]
        return [row[axis] for row in predictor.forward(items) for axis in AXES]

    return rate, predictor.model


def reference_pam(files: Path, device: str, source: Path):
    """PAM's own `PAM` and data loading on the same MS-CLAP file, as its run.py runs them.

    GPT-2 and its tokenizer, which PAM fetches from the Hugging Face hub, are built from the
    stand-in files instead (as tests/stimuli/objective/test_pam.py does); they embed the two
    prompts once, when PAM loads. torchaudio's `load` hands PAM the clips from memory."""
    import torch
    from torch.utils.data import DataLoader

    from stimuli.objective.predictors import msclap, standins

    if not (source / "PAM" / "PAM.py").is_file():
        raise SystemExit(f"{source} is not a checkout of soham97/PAM")
    sys.path.insert(0, str(ROOT / "scripts"))
    importlib.import_module("crosscheck_reference_predictors_pam").stand_ins(str(source))
    import transformers

    code = importlib.import_module("PAM.PAM")
    config = transformers.GPT2Config(
        vocab_size=standins.VOCAB, n_positions=standins.POSITIONS, n_embd=standins.WIDTH,
        n_layer=standins.LAYERS, n_head=standins.WIDTH // 64, n_inner=standins.INNER,
    )  # fmt: skip
    words = files / "gpt2"
    importlib.import_module("PAM.models.clap").AutoModel = types.SimpleNamespace(
        from_pretrained=lambda name: transformers.GPT2Model(config)
    )
    code.AutoTokenizer = types.SimpleNamespace(
        from_pretrained=lambda name: transformers.GPT2TokenizerFast(
            str(words / "vocab.json"), str(words / "merges.txt")
        )
    )
    build = code.CLAP  # its config.yml gives GPT-2 small's width; the stand-in's is narrower
    code.CLAP = lambda **kw: build(**{**kw, "transformer_embed_dim": standins.WIDTH})
    spec = importlib.util.spec_from_file_location("pam_dataset", source / "dataset.py")
    dataset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dataset)
    model = code.PAM(model_fp=str(files / msclap.WEIGHTS_FILE), use_cuda=device == "cuda")
    if next(model.clap.parameters()).device.type != device:
        raise SystemExit(f"PAM's code did not run on {device}")
    memory: dict[str, np.ndarray] = {}
    sys.modules["torchaudio"].load = lambda name: (torch.from_numpy(memory[name][None]), RATE)

    def rate(batch):
        memory.clear()
        memory.update({f"clip{i}": clip for i, clip in enumerate(batch)})
        data = dataset.ExampleDatasetFiles(src=list(memory))
        loader = DataLoader(data, batch_size=len(memory), shuffle=False, collate_fn=data.collate)
        scores = []
        for _, audio, index in loader:
            scores += model.evaluate(audio, index)[0]
        return scores

    return rate, model.clap.audio_encoder


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def say(row: dict) -> None:
    print(f"{MARK} {json.dumps(row)}", flush=True)


def worker(args: argparse.Namespace) -> None:
    """One implementation in this process: loaded and warmed up, then one timed pass over the
    clips for each "run" read from stdin, and the scores of the last pass on "end"."""
    import torch

    audio = clips(args.clips)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    if args.implementation in ("ours", "single"):
        rate, net = ours(args.worker, args.files, args.device, args.implementation == "single")
    elif args.worker == "aesthetics":
        rate, net = reference_aesthetics(args.files, args.device)
    else:
        rate, net = reference_pam(args.files, args.device, args.pam_source)
    rate(audio[:WARM_UP_CLIPS])
    sync(args.device)
    say({
        "first_s": time.perf_counter() - started,
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in net.parameters()),
    })  # fmt: skip
    scores: list[float] = []
    for line in sys.stdin:
        if line.strip() != "run":
            break
        started = time.perf_counter()
        scores = []
        for start in range(0, len(audio), args.batch):
            scores += [float(s) for s in rate(audio[start : start + args.batch])]
        sync(args.device)
        say({"seconds": time.perf_counter() - started})
    # The process's peak resident memory (Linux counts ru_maxrss in KiB).
    row: dict = {
        "scores": scores,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if args.device == "cuda":
        row["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    say(row)


# --- the comparison ------------------------------------------------------------------------------


class Worker:
    """A worker process and its figures; `error` says why it gave none."""

    def __init__(self, label: str, python: str, predictor: str, implementation: str, args, files):
        self.label, self.implementation, self.error, self.runs = label, implementation, "", []
        reference = implementation == "reference"
        self.batch = REFERENCE_BATCH[predictor] if reference else OUR_BATCH
        command = [
            python, __file__, "--worker", predictor, "--implementation", implementation,
            "--files", str(files), "--device", args.device, "--clips", str(args.clips),
            "--batch", str(self.batch), "--pam-source", str(args.pam_source),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if args.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        self.log = files / f"{predictor}-{implementation}.log"  # the worker's stderr
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                env=env,
            )  # fmt: skip
        self.ready = self.read()

    def read(self) -> dict:
        if self.error:
            return {}
        for line in self.process.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK) :])
        self.process.wait()
        reason = (self.log.read_text().strip().splitlines() or ["no output"])[-1]
        self.error = f"failed (exit {self.process.returncode}): {reason}"
        return {}

    def run(self) -> None:
        if not self.error:
            self.process.stdin.write("run\n")
            self.process.stdin.flush()
            self.runs.append(self.read().get("seconds"))

    def end(self) -> dict:
        if self.error:
            return {}
        self.process.stdin.write("end\n")
        self.process.stdin.close()
        last = self.read()
        self.process.wait()
        return last


def reference_label(predictor: str, python: str, source: Path) -> str:
    if predictor == "aesthetics":
        version = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('audiobox_aesthetics'))"],
            capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        return f"audiobox_aesthetics {version or '?'}"
    commit = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return f"PAM's code{f' ({commit})' if commit else ''}"


def compare(predictor: str, args, files: Path, python: str) -> None:
    """Ours and the reference loaded one after the other, then their passes interleaved, so
    that a busy spell of a shared machine slows both alike."""
    workers = [Worker("ours", sys.executable, predictor, "ours", args, files)]
    if predictor == "pam" and not args.no_single:
        label = "ours, clip by clip"
        workers.append(Worker(label, sys.executable, predictor, "single", args, files))
    if args.no_reference:
        pass
    elif not Path(python).is_file():
        print(f"{predictor:10} {'reference':34} not run: no interpreter {python} (see --help)")
    else:
        label = reference_label(predictor, python, args.pam_source)
        workers.append(Worker(label, python, predictor, "reference", args, files))
    load = load_average()
    for _ in range(args.repeats):
        for worker in workers:
            worker.run()
    ends = [worker.end() for worker in workers]
    timed = {}
    for worker, last in zip(workers, ends, strict=True):
        if worker.error or None in worker.runs:
            print(f"{predictor:10} {worker.label:34} {worker.error or 'failed'}")
            continue
        rate = args.clips / statistics.median(worker.runs)
        timed[worker.implementation] = (worker.label, rate, last["scores"])
        peak = f"{last['peak_mib']:5.0f} MiB" if "peak_mib" in last else ""
        print(
            f"{predictor:10} {worker.label:34} {worker.batch:5d} {rate:8.2f} "
            f"{SYSTEM_CLIPS / rate:9.0f}s {worker.ready['first_s']:9.1f}s "
            f"{last['rss_mib']:6.0f} MiB {peak:>9}  "
            f"{worker.ready['threads']} threads, {worker.ready['parameters'] / 1e6:.1f} M "
            "parameters",
            flush=True,
        )
    if "reference" in timed:
        _, their_rate, theirs = timed.pop("reference")
        for label, rate, scores in timed.values():
            worst = max(abs(a - b) for a, b in zip(scores, theirs, strict=True))
            print(
                f"{'':10} {label} / reference: {rate / their_rate:.2f}x the clips/s; largest "
                f"|difference| over the clips' {SCORES[predictor]}: {worst:.1e}"
            )
    print(f"{'':10} load {load} at the first pass, {load_average()} after the last")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--clips", type=int, default=32, help="clips per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--predictors", default=",".join(PREDICTORS))
    parser.add_argument(
        "--aesthetics-python",
        default=os.environ.get("FOLEY_BENCH_AESTHETICS_PYTHON", "/tmp/aesref/bin/python"),
        help="the interpreter of an environment with audiobox_aesthetics",
    )
    parser.add_argument(
        "--pam-python",
        default=os.environ.get("FOLEY_BENCH_PAM_PYTHON", "/tmp/pam_ref/bin/python"),
        help="the interpreter of an environment with PAM's requirements (transformers, ...)",
    )
    parser.add_argument(
        "--pam-source",
        type=Path,
        default=Path(os.environ.get("FOLEY_BENCH_PAM_SOURCE", "/tmp/pam")),
        help="a checkout of soham97/PAM",
    )
    parser.add_argument("--no-reference", action="store_true", help="time ours alone")
    parser.add_argument(
        "--no-single", action="store_true", help="leave out PAM's row of clips one by one"
    )
    parser.add_argument("--worker", choices=PREDICTORS, help=argparse.SUPPRESS)
    parser.add_argument("--implementation", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    parser.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=OUR_BATCH, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    import torch

    from stimuli.objective.predictors import standins

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(
        f"machine: {processor()}, {os.cpu_count()} cores, GPU: {gpu}; torch {torch.__version__}; "
        f"load {load_average()}"
    )
    print(
        f"{args.clips} clips of {SECONDS:g} s at {RATE} Hz (mono float32, in memory), untrained "
        f"full-size stand-in weights, on {args.device}; medians of {args.repeats} passes after a "
        f"warm-up call on {WARM_UP_CLIPS} clips, ours' and the reference's passes interleaved"
    )
    print(
        f"{'predictor':10} {'implementation':34} {'batch':>5} {'clips/s':>8} {'700 clips':>10} "
        f"{'first call':>10} {'peak RSS':>10} {'peak GPU':>9}"
    )
    pythons = {"aesthetics": args.aesthetics_python, "pam": args.pam_python}
    with tempfile.TemporaryDirectory() as folder:
        files = Path(folder)
        standins.write_aesthetics(files / AESTHETICS_FILE)
        standins.write_pam(files)
        for predictor in args.predictors.split(","):
            compare(predictor, args, files, pythons[predictor])


if __name__ == "__main__":
    main()
