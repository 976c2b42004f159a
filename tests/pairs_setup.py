"""A listening test of the pairs design built directly in the database (`listening_setup`'s
challenge with A/B trials), and a rater's votes stored through the service as a browser would."""

from __future__ import annotations

from raters import enrolment, selectors, sessions, votes
from raters.models import Rater, Stimulus
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


def voters_by_name(challenge: Challenge, voters: int = 4) -> None:
    """`voters` invited raters each vote on a session: the system named first wins on quality,
    and on fit for every other voter (the rest tie on fit)."""
    name = {s.system_id: s.system.name for s in Stimulus.objects.select_related("system")}
    for n in range(voters):
        rater = enrolment.invite(challenge, label=f"voter {n}")
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)

        def by_name(pair, n=n):
            left, right = name[pair.left.stimulus.system_id], name[pair.right.stimulus.system_id]
            winner = "left" if left < right else "right"
            return winner, winner if n % 2 else "tie"

        vote_session(rater, sessions.next_session(rater).session, by_name)


def crowd_voting_a(challenge: Challenge):
    """A crowd worker who answers A always, on a session of its own; the same-side rule set to
    judge it (from 8 answers), so that it is excluded."""
    crowd = enrolment.invite(challenge, label="crowd")
    Rater.objects.filter(pk=crowd.pk).update(kind="crowd", participant_id="PIDab")
    crowd.refresh_from_db()
    enrolment.record_consent(crowd)
    enrolment.record_instructions(crowd)
    test = selectors.listening_test(challenge)
    test.rater_rules = {"same_side": {"min_answers": 8}}
    test.save()
    vote_session(crowd, sessions.next_session(crowd).session)
    return crowd
