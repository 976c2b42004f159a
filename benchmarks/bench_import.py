"""Import throughput: clips per second for a zip of 7 categories, against the floor set by the
per-file checks alone (decode, spec checks, loudness, hashing) with no storage or database.

    python benchmarks/bench_import.py [--per-category 100] [--repeats 3]

Runs on a throw-away SQLite database and media folder unless DATABASE_URL is set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scratch_site import django_in_scratch  # noqa: E402  (beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-category", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    scratch = django_in_scratch()

    from stimuli import services
    from stimuli.audio import inspect_audio
    from stimuli.selectors import clip_spec
    from stimuli.uploads.imports import import_clips
    from tests.factories import make_wav

    categories = [
        c.slug for c in services.create_challenge(name="probe", slug="probe").categories.all()
    ]

    ours, floor = [], []
    for repeat in range(args.repeats):
        members = {
            f"{category}/{n}.wav": make_wav(seed=10_000 * repeat + 1000 * i + n)
            for i, category in enumerate(categories)
            for n in range(args.per_category)
        }
        path = scratch / f"set{repeat}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in members.items():
                archive.writestr(name, data)
        challenge = services.create_challenge(name=f"bench {repeat}", slug=f"bench-{repeat}")
        spec = clip_spec(challenge)

        start = time.perf_counter()
        for data in members.values():
            inspect_audio(data, spec)
        floor.append(len(members) / (time.perf_counter() - start))

        start = time.perf_counter()
        report = import_clips(challenge, path, role="evaluation")
        ours.append(len(members) / (time.perf_counter() - start))
        assert report.accepted and report.created_clips == len(members), report.summary()

    n = len(categories) * args.per_category
    print(f"import of {n} clips (4 s, 22,050 Hz, 16-bit), median of {args.repeats} runs")
    print(f"  checks alone (floor):      {statistics.median(floor):8.1f} clips/s")
    print(f"  import_clips (zip -> DB):  {statistics.median(ours):8.1f} clips/s")


if __name__ == "__main__":
    main()
