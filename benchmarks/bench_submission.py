"""Time from a team's POST to the finished report, for the baseline generator, beside the
organizer path's validation of the same code (the reference: what a team's check adds is the
example clips, the timing and FAD-dev beside the baseline's).

The challenge is DCASE 2023 Task 7's shape (7 categories, 4 s clips at 22,050 Hz), with a
development set of `--development` clips per category and five example clips per category;
FAD-dev on the logmel model (VGGish needs its weights file). The check runs in-process (no
broker), so the POST answers with the finished report; with a worker add the queue's latency.

    python benchmarks/bench_submission.py [--repeats 3] [--development 20]

Runs on a throw-away SQLite database and media folder unless DATABASE_URL is set. Medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scratch_site import django_in_scratch  # noqa: E402  (beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--development", type=int, default=20)
    args = parser.parse_args()
    # The members' e-mails stay in memory instead of filling the console.
    os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
    django_in_scratch()

    from django.core.files.uploadedfile import SimpleUploadedFile
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from stimuli import services
    from stimuli.demo import write_set
    from stimuli.generators import services as generation
    from stimuli.objective.config import set_models
    from stimuli.submissions import schedule, teams
    from stimuli.submissions.baseline_archive import baseline_archive
    from stimuli.uploads.imports import import_clips

    challenge = services.create_challenge(name="bench", slug=f"bench-{int(time.time())}")
    schedule.set_schedule(challenge, submissions_per_day=100, examples_per_category=5)
    with tempfile.TemporaryDirectory() as tmp:
        root = write_set(Path(tmp) / "dev", challenge, args.development, 1, 0.0)
        import_clips(challenge, root, role="development")
    set_models(challenge, fad_model="logmel")
    invitation = teams.create_team_with_invitation(challenge, name="Bench")
    user = teams.sign_up(
        invitation.token, username="bench", email="b@example.org", password="bench-pass-12345"
    )
    client = APIClient(SERVER_NAME="localhost")  # a host ALLOWED_HOSTS names
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    data = baseline_archive()

    posts, reference = [], []
    for repeat in range(args.repeats):
        started = time.perf_counter()
        response = client.post(
            f"/api/challenges/{challenge.slug}/submissions/",
            {"system": "Baseline", "track": "A", "licence": "MIT",
             "archive": SimpleUploadedFile("b.zip", data), "description": str(repeat)},
            format="multipart",
            secure=True,  # production settings redirect plain http
        )  # fmt: skip
        posts.append(time.perf_counter() - started)
        body = response.json()
        assert response.status_code == 201 and body["state"] == "valid", body

        team = services.create_team(challenge, name=f"Organizers {repeat}")
        system = services.create_system(
            team=team, track=challenge.tracks.get(code="B"), name=f"Reference {repeat}"
        )
        started = time.perf_counter()
        generator = generation.set_generator(system, archive=SimpleUploadedFile("b.zip", data))
        reference.append(time.perf_counter() - started)
        assert generator.state == "valid", generator.report

    feedback = body["feedback"]
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"baseline generator, 7 categories x 4 s, {args.development} development clips per "
          f"category, {args.repeats} repeats (medians); {os.cpu_count()} cores, load {load}")  # fmt: skip
    print(f"  team POST to finished report      {statistics.median(posts):7.2f} s")
    print(f"  organizer validation (reference)  {statistics.median(reference):7.2f} s")
    print(f"  of which: model load {feedback['load_s']:.2f} s, "
          f"{feedback['seconds_per_clip']:.3f} s per example clip, "
          f"projected {feedback['projected_s']:.0f} s for the evaluation set")  # fmt: skip


if __name__ == "__main__":
    main()
