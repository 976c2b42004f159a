"""The demo's teams: two teams with member accounts in the development phase, one valid
submission and one failing, and the printed credentials open their team pages."""

from __future__ import annotations

import pytest
from django.test import Client

from stimuli.submissions.demo import MEMBER_PASSWORD, seed_teams_demo
from stimuli.submissions.models import Submission
from stimuli.submissions.selectors import phase_at, schedule

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def test_teams_demo_has_a_valid_and_a_failing_team(organizer):
    demo = seed_teams_demo(organizer)
    assert phase_at(schedule(demo.challenge)) == "development"
    states = {s.team.name: s for s in Submission.objects.select_related("team")}
    assert states["Procedural Sounds"].state == Submission.State.VALID
    failing = states["Broken Tape"]
    assert failing.state == Submission.State.INVALID
    assert "wrong" in failing.report["summary"] or "shape" in failing.report["summary"]
    again = seed_teams_demo(organizer)  # a second run resets the passwords, adds nothing
    assert Submission.objects.count() == 2 and len(again.members) == 2
    ada = again.challenge.memberships.get(user__username="ada").user
    assert ada.check_password(MEMBER_PASSWORD)
    client = Client()
    client.force_login(ada)
    page = client.get(f"/teams/{demo.challenge.slug}/team/").content.decode()
    assert "Procedural Sounds" in page and "Baseline" in page
