"""A listening test of the pairs design built directly in the database (`listening_setup`'s
challenge with A/B trials), and a rater's votes stored through the service as a browser would."""

from __future__ import annotations

from raters import sessions, votes
from stimuli.models import Challenge
from tests.listening_setup import build_listening_challenge


def build_pairs_challenge(
    *, slug: str = "pairs-test", systems_per_track: int = 3, pairs_per_session: int = 6, **settings
) -> Challenge:
    """A challenge of the pairs design: every track with `systems_per_track` finalists, sessions
    of `pairs_per_session` A/B trials (and no hidden anchor's, unless asked for); not yet
    open."""
    settings.setdefault("anchor_pairs_per_session", 0)
    settings.setdefault("design", "pairs")
    settings.setdefault("categories", 2)
    settings.setdefault("clips_per_system", 2)
    return build_listening_challenge(
        slug=slug,
        systems_per_track=systems_per_track,
        pairs_per_session=pairs_per_session,
        **settings,
    )


def vote_session(rater, session, choose=None) -> None:
    """Vote on every A/B trial of a session through the service (the examples taken as heard):
    `choose(pair)` gives (quality, fit), A on both by default."""
    sessions.complete_familiarization(session, require_heard=False)
    while (point := votes.resume(session)) is not None:
        quality, fit = choose(point.pair) if choose else ("left", "left")
        votes.save_vote(
            rater, point.pair.token, quality=quality, fit=fit, key=f"k-{point.pair.token}"
        )
        session.refresh_from_db()
