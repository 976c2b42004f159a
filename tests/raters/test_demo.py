"""The demo's listening test: opened, rated by simulated raters through the real services, and
scored from the rows the listening test exports."""

from __future__ import annotations

from collections import Counter

import pytest

from raters import selectors
from raters.demo import open_listening_test, simulate_raters
from raters.models import CategorySession, Rater, Rating
from scoring.compute import score
from scoring.rules import Rules
from scoring.services import collect_inputs
from tests.listening_setup import build_listening_challenge

pytestmark = pytest.mark.django_db


def test_simulated_raters_give_scoring_real_results():
    # One category at least per rater, so nobody is given a category beyond its target to reach
    # a minimum.
    challenge = build_listening_challenge(slug="demo-sim", target_ratings=4, categories_min=1)
    open_listening_test(challenge)
    challenge.refresh_from_db()
    assert challenge.phase == "listening"
    counts = simulate_raters(challenge, n_raters=7, seed=3)
    # Crowd workers rate one category each (the run's default), so the simulation recruits more
    # of them, as a crowd run would, until every sound has its ratings.
    crowd = Rater.objects.filter(challenge=challenge, kind="crowd")
    assert counts["raters"] > 7 and counts["diversity_ratings"] == 2 * 6
    assert crowd.count() == counts["raters"] - 4
    assert all(rater.sessions.count() == 1 for rater in crowd)
    # Every stimulus reached the target in sessions that pass the checks; a failing session was
    # made up by another rater, and no category got more sessions than that.
    failing = set(selectors.excluded_sessions(challenge))
    member_team = Rater.objects.get(challenge=challenge, index=0).team_id
    assert failing
    sessions = CategorySession.objects.filter(rater__challenge=challenge)
    passing = sessions.exclude(pk__in=failing)
    outside = Counter(
        passing.exclude(rater__team_id=member_team).values_list("category_id", flat=True)
    )
    member = Counter(
        passing.filter(rater__team_id=member_team).values_list("category_id", flat=True)
    )
    # The team member's sessions count toward the other team's system only: every category
    # takes four sessions by outside raters besides the member's, whichever categories the
    # member was given (that depends on the order in which the careless sessions failed).
    assert sorted(outside.values()) == [4, 4, 4]
    assert member and max(member.values()) == 1
    assert sessions.count() == passing.count() + len(failing)
    progress = selectors.stimulus_progress(challenge)
    own = {row["usable"] for row in progress if row["stimulus"].system.team_id == member_team}
    assert own == {4} and all(row["reached"] for row in progress)
    assert Rating.objects.count() == counts["ratings"] == sessions.count() * 16

    result = score(collect_inputs(challenge), Rules(bootstrap=20))
    assert result["counts"]["sessions_excluded"] >= 1  # the careless raters
    assert result["counts"]["self_ratings_removed"] > 0  # the team member's own system
    assert result["counts"]["diversity_ratings_used"] == 12
    systems = {row["system"] for rows in result["tracks"].values() for row in rows}
    assert systems == {"A0", "B0"}
    assert all(row["final"] is not None for rows in result["tracks"].values() for row in rows)
    # A second call adds raters; the test stays open and consistent.
    again = simulate_raters(challenge, n_raters=2, seed=4)
    assert again["sessions"] == 0  # everything reached the target already
