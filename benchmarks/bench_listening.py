"""Listening-test costs at DCASE 2023 Task 7 size (7 categories, 8 finalists, 20 sounds each: 172
trials per session): building a counterbalanced session, storing one answer, serving one sound.
Each is printed beside its floor measured in the same run (the bare inserts or file read it
cannot avoid).

    python benchmarks/bench_listening.py [--systems-per-track 4] [--sounds 20] [--sessions 20]

Runs on a throw-away SQLite database and media folder unless DATABASE_URL is set.
Figures are medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scratch_site import django_in_scratch  # noqa: E402  (beside this script)


def ms(values: list[float]) -> str:
    return f"{1000 * statistics.median(values):8.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems-per-track", type=int, default=4)
    parser.add_argument("--sounds", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--answers", type=int, default=400)
    args = parser.parse_args()

    django_in_scratch()
    from django.db import connection, transaction

    from raters import delivery, enrolment, listening, preparation, selectors, sessions
    from raters.models import Rating, Trial
    from stimuli import storage
    from tests.listening_setup import build_listening_challenge

    started = time.perf_counter()
    challenge = build_listening_challenge(
        slug=f"bench-{uuid.uuid4().hex[:8]}",
        categories=7,
        systems_per_track=args.systems_per_track,
        clips_per_system=args.sounds,
        dev_per_category=30,
        duration=4.0,
        sample_rate=22_050,
        target_ratings=1000,
    )
    setup_s = time.perf_counter() - started
    preparation.set_open(challenge, True)
    category = challenge.categories.first()

    build, floor_build, built = [], [], []
    for n in range(args.sessions):
        rater = enrolment.invite(challenge, label=f"bench {n}")
        t = time.perf_counter()
        session = sessions.build_session(rater, category, order=0)
        build.append(time.perf_counter() - t)
        built.append((rater, session))
        rows = [
            Trial(session=session, position=1000 + p, role=t.role, stimulus_id=t.stimulus_id,
                  anchor_id=t.anchor_id, audio_id=t.audio_id)
            for p, t in enumerate(session.trials.all())
        ]  # fmt: skip
        t = time.perf_counter()
        with transaction.atomic():
            Trial.objects.bulk_create(rows)
        floor_build.append(time.perf_counter() - t)
        Trial.objects.filter(session=session, position__gte=1000).delete()
    n_trials = built[0][1].trials.count()

    save, floor_save, serve, floor_serve, event, events = [], [], [], [], [], []
    test = selectors.listening_test(challenge)
    answered = 0
    for rater, session in built:
        sessions.complete_familiarization(session, require_heard=False)
        for trial in session.trials.order_by("position"):
            if answered >= args.answers:
                break
            t = time.perf_counter()
            sent = listening.serve_audio(rater, trial.token)
            b"".join(sent.streaming_content)  # sent to its end: the delivery is recorded
            serve.append(time.perf_counter() - t)
            t = time.perf_counter()
            storage.read_audio(delivery.delivered_audio(trial.audio, test).file)
            floor_serve.append(time.perf_counter() - t)
            # The events the page sends for a 4-s sound: play, a checkpoint at 2 s, ended.
            t = time.perf_counter()
            listening.player_event(rater, trial.token, "play", 0)
            event.append(time.perf_counter() - t)
            t = time.perf_counter()
            listening.player_event(rater, trial.token, "timeupdate", 0.01)
            listening.player_event(rater, trial.token, "ended", 0.02)
            events.append(time.perf_counter() - t + event[-1])
            t = time.perf_counter()
            sessions.save_rating(rater, trial.token, quality=5, fit=5, key=f"bench-{trial.pk:08d}")
            save.append(time.perf_counter() - t)
            answered += 1
    # Assignment judges every session by the rater-quality rules over every answer so far.
    need = []
    for _ in range(5):
        t = time.perf_counter()
        sessions.category_need(challenge)
        need.append(time.perf_counter() - t)
    # Floor: the bare insert of the same number of rows, each in its own transaction.
    spare = list(Trial.objects.filter(rating__isnull=True)[: len(save)])
    for trial in spare:
        t = time.perf_counter()
        with transaction.atomic():
            Rating.objects.create(
                trial=trial, quality=5, fit=5, idempotency_key=f"floor-{trial.pk}"
            )
        floor_save.append(time.perf_counter() - t)

    print(f"database: {connection.vendor}; setup of {challenge.stimuli.count()} stimuli "
          f"(clips, anchors, loudness alignment, diversity files): {setup_s:.1f} s")  # fmt: skip
    print(
        f"build one session of {n_trials} trials   ours {ms(build)}   bare inserts {ms(floor_build)}"
    )
    print(f"store one answer (save_rating)      ours {ms(save)}   bare insert  {ms(floor_save)}")
    print(f"serve one sound by its token        ours {ms(serve)}   file read    {ms(floor_serve)}")
    print(f"one player event (play)             ours {ms(event)}")
    print(f"a sound's 3 events (play, checkpoint, ended)   ours {ms(events)}")
    print(f"what each category needs, judging {answered} answers   ours {ms(need)}")


if __name__ == "__main__":
    main()
