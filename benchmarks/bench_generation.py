"""Generation throughput: baseline clips per second in-process, through a plain child process
(a process, pipes and .npy files: what a trusted generator gets where no isolation exists),
through the sandbox (bubblewrap, seccomp, a cgroup), and as a whole generation job (sandbox,
clip-spec checks, canonical WAV encoding, loudness, storage and database rows); and the start-up
cost of each.

    python benchmarks/bench_generation.py [--per-category 20] [--batch-size 10] [--repeats 5]
        [--generator neural_generator] [--no-job]

`--generator neural_generator` times a torch network the size of a HiFi-GAN vocoder instead of
the procedural baseline (`benchmarks/neural_generator.py`), on the GPU where one is visible, as a
worker runs a team's system (`FOLEY_DEVICE`); the whole job is the baseline's only.

The job runs on a throw-away SQLite database and media folder unless DATABASE_URL is set.
Figures are medians over the repeats.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scratch_site import django_in_scratch  # noqa: E402  (beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-category", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--generator", default="stimuli.generators.baseline")
    parser.add_argument("--no-job", action="store_true", help="skip the whole generation job")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))  # where neural_generator lies

    import importlib

    from sandbox.isolation import Isolation
    from sandbox.process import Sandbox, cuda_visible, enforcement
    from sandbox.source import GeneratorSource
    from stimuli.generators.contract import CATEGORIES, derive_seed

    n, batch = args.per_category, args.batch_size
    total = n * len(CATEGORIES)
    calls = [
        (category, start, min(batch, n - start))
        for category in CATEGORIES
        for start in range(0, n, batch)
    ]

    def run(generate) -> float:
        started = time.perf_counter()
        for category, start, size in calls:
            generate(category, size, derive_seed(0, category, start))
        return time.perf_counter() - started

    gpu = cuda_visible()
    # In-process, the generator sees what the sandbox would tell it.
    os.environ.setdefault("FOLEY_DEVICE", "cuda" if gpu else "cpu")
    generator = importlib.import_module(args.generator)
    model = generator.load_model(None)
    run(lambda c, k, s: generator.generate(model, c, k, s))  # warm-up (CUDA kernels, caches)
    in_process = [
        run(lambda c, k, s: generator.generate(model, c, k, s)) for _ in range(args.repeats)
    ]

    source = GeneratorSource.from_module(args.generator)
    none = Isolation(None, None, False, ("not used: the reference",))

    def through(**options) -> tuple[list[float], list[float]]:
        startups, runs = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            with Sandbox(source, **options) as sandbox:
                startups.append(time.perf_counter() - started)
                runs.append(run(sandbox.generate))
        return startups, runs

    plain_startups, plain = through(trusted=True, isolation=none)
    startups, sandboxed = through()
    baseline = args.generator == "stimuli.generators.baseline"
    jobs = whole_jobs(n, batch, args.repeats) if baseline and not args.no_job else []

    def rate(seconds: list[float]) -> float:
        return total / statistics.median(seconds)

    def times(seconds: list[float]) -> str:
        return f"{statistics.median(seconds) / statistics.median(in_process):.2f}x the time"

    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    where = "on the GPU" if gpu else "on the CPU"
    print(f"{args.generator} {where}, {len(CATEGORIES)} categories x {n} clips of 4 s, batches "
          f"of {batch}, {args.repeats} repeats (medians); {os.cpu_count()} cores, load {load}")  # fmt: skip
    print(f"  in-process generate()        {rate(in_process):8.1f} clips/s")
    print(f"  plain child process          {rate(plain):8.1f} clips/s ({times(plain)})")
    print(f"  through the sandbox          {rate(sandboxed):8.1f} clips/s ({times(sandboxed)})")
    print(f"  start + model load, plain    {statistics.median(plain_startups):8.2f} s")
    print(f"  start + model load, sandbox  {statistics.median(startups):8.2f} s")
    if jobs:
        print(
            f"  whole generation job         {rate(jobs):8.1f} clips/s "
            "(incl. start, checks, storage)"
        )
    print("sandbox here:")
    for rule, what in enforcement(gpu).items():
        print(f"  {rule}: {what}")


def whole_jobs(n: int, batch: int, repeats: int) -> list[float]:
    """Seconds of each whole generation job of the baseline system (n clips per category)."""
    django_in_scratch()

    from stimuli import services
    from stimuli.generators import services as generators

    challenge = services.create_challenge(name="bench", slug=f"bench-{int(time.time())}")
    system = generators.create_baseline_systems(challenge)[0]
    jobs = []
    for repeat in range(repeats):
        job = generators.generate_now(system, n, seed=repeat, batch_size=batch)
        assert job.state == "succeeded", job.error
        jobs.append(job.duration_s)
    return jobs


if __name__ == "__main__":
    main()
