"""A small listening test built directly in the database: short noise clips, development clips
(the examples), evaluation clips (the private sources of the anchors), and finalist systems
whose clips form the stimulus set."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.db.models import Max
from django.utils import timezone

from raters import enrolment, listening, preparation, selectors, sessions
from raters.delivery import store_samples
from raters.models import CategorySession, Rater, Rating, Stimulus, Trial
from stimuli.models import Challenge, Clip
from stimuli.services import create_challenge, create_system, create_team


def _clip(challenge: Challenge, category, role: str, seed: int, system=None, gain: float = 0.1):
    rng = np.random.default_rng(seed)
    samples = gain * rng.standard_normal((challenge.clip_frames, 1))
    audio = store_samples(samples, challenge.sample_rate)
    return Clip.objects.create(
        challenge=challenge, category=category, role=role, system=system, audio=audio
    )


def build_listening_challenge(
    *,
    slug: str = "listen-test",
    categories: int = 3,
    systems_per_track: int = 1,
    clips_per_system: int = 2,
    dev_per_category: int = 9,
    eval_per_category: int = 12,
    duration: float = 0.5,
    sample_rate: int = 8000,
    prepared: bool = True,
    **settings,
) -> Challenge:
    """A challenge with stimuli, anchors, rendered audio and diversity files (unless not
    `prepared`), not yet open."""
    names = [(f"cat{n}", f"Category {n}") for n in range(categories)]
    challenge = create_challenge(
        name=slug,
        slug=slug,
        categories=names,
        clip_duration_s=duration,
        sample_rate=sample_rate,
    )
    seed = 0
    for category in challenge.categories.all():
        for _ in range(dev_per_category):
            seed += 1
            _clip(challenge, category, Clip.Role.DEVELOPMENT, seed)
        for _ in range(eval_per_category):
            seed += 1
            _clip(challenge, category, Clip.Role.EVALUATION, seed)
    for track in challenge.tracks.all():
        for n in range(systems_per_track):
            team = create_team(challenge, name=f"Team {track.code}{n}")
            system = create_system(team=team, track=track, name=f"{track.code}{n}")
            system.is_finalist = True
            system.save()
            for category in challenge.categories.all():
                for _ in range(clips_per_system):
                    seed += 1
                    # Systems differ in level, so loudness alignment has something to do.
                    _clip(challenge, category, Clip.Role.SYSTEM, seed, system, 0.02 + 0.1 * n)
    test = selectors.listening_test(challenge)
    for name, value in settings.items():
        setattr(test, name, value)
    test.save()
    preparation.pick_stimuli(challenge)
    if prepared:
        preparation.prepare(challenge, seed=0)
    return challenge


def rater_at_trials(challenge: Challenge) -> tuple[Rater, CategorySession]:
    """An invited rater past consent, instructions and its first category's examples."""
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    return rater, session


def answer_session(rater, session, quality: int = 7, fit: int = 7, value_of=None) -> None:
    """Answer every open trial of a session through the service, as a browser would: the
    anchors as expected, each trial `quality` and `fit`, or `value_of(stimulus)` on both."""
    sessions.complete_familiarization(session, require_heard=False)
    while (trial := sessions.next_trial(session)) is not None:
        q, f = quality, fit
        if value_of is not None and trial.role == "trial":
            q = f = value_of(trial.stimulus)
        elif trial.role == "anchor_hq_goodfit":
            q, f = 9, 9
        elif trial.role == "anchor_hq_poorfit":
            q, f = 9, 1
        elif trial.role == "anchor_lq_poorfit":
            q, f = 1, 1
        sessions.save_rating(rater, trial.token, quality=q, fit=f, key=f"k-{trial.token}")


def add_closed_sessions(challenge: Challenge, n: int) -> None:
    """`n` closed sessions of other raters, each with answered trials, made in a few queries."""
    start = Rater.objects.filter(challenge=challenge).count() + 10_000
    raters = Rater.objects.bulk_create(
        [Rater(challenge=challenge, kind=Rater.Kind.INVITED, index=start + i) for i in range(n)]
    )
    stimuli = list(Stimulus.objects.filter(challenge=challenge).select_related("clip"))
    categories = sorted({s.category_id for s in stimuli})
    base = (CategorySession.objects.aggregate(n=Max("ordinal"))["n"] or 0) + 1
    moment = timezone.now()
    made = CategorySession.objects.bulk_create(
        [
            CategorySession(
                rater=rater,
                category_id=categories[i % len(categories)],
                order=0,
                ordinal=base + i,
                state=CategorySession.State.CLOSED,
                closed_at=moment,
                familiarized_at=moment,
            )
            for i, rater in enumerate(raters)
        ]
    )
    trials = Trial.objects.bulk_create(
        [
            Trial(
                session=session,
                position=k,
                role="trial",
                stimulus=stimulus,
                audio_id=stimulus.clip.audio_id,
            )
            for session in made
            for k, stimulus in enumerate(
                [s for s in stimuli if s.category_id == session.category_id][:3]
            )
        ]
    )
    Rating.objects.bulk_create(
        [
            Rating(trial=trial, quality=5, fit=5, idempotency_key=f"bulk-{trial.pk}")
            for trial in trials
        ]
    )
    # What each answer keeps up to date, as the saves would have left it.
    CategorySession.objects.filter(pk__in=[s.pk for s in made]).update(last_answer_at=moment)


def get_sound(client, url: str, **extra):
    """A rater's sound fetched as a browser does: the whole answer read, so the server records
    the bytes as sent; the bytes are on `.body`."""
    response = client.get(url, **extra)
    if response.streaming:
        response.body = b"".join(response.streaming_content)
    else:
        response.body = response.content
    return response


def deliver(rater, token: str, range_header: str = ""):
    """One of the rater's sounds sent to its browser whole (the body read to its end, as a
    browser reads it), so the server records the bytes as sent."""
    response = listening.serve_audio(rater, token, range_header)
    if response.streaming:
        response.body = b"".join(response.streaming_content)
    return response


class Clock:
    """The listening clock of a test (`raters.listening.now`), moved by hand: nothing sleeps."""

    def __init__(self) -> None:
        self.moment = timezone.now()

    def __call__(self):
        return self.moment

    def advance(self, seconds: float) -> None:
        self.moment += timedelta(seconds=seconds)
