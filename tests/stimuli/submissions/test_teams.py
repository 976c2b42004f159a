"""Team accounts: invitation links, sign-up, self-registration and the one membership."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from raters import enrolment
from stimuli.errors import Refused
from stimuli.models import Team
from stimuli.submissions import schedule, selectors, teams
from stimuli.submissions.models import TeamInvitation, TeamRegistration

from .conftest import PASSWORD


def test_invitation_link_makes_a_member_of_its_team(open_challenge):
    invitation = teams.create_team_with_invitation(open_challenge, name="Barkers")
    user = teams.sign_up(
        invitation.token, username="ann", email="ann@example.org", password=PASSWORD
    )
    assert selectors.team_of(user, open_challenge) == invitation.team
    # The same link serves the team's second member.
    bob = teams.sign_up(
        invitation.token, username="bob", email="bob@example.org", password=PASSWORD
    )
    assert selectors.team_of(bob, open_challenge) == invitation.team


def test_sign_up_names_every_problem_and_stores_nothing(open_challenge, make_member):
    make_member("Barkers", "ann")
    invitation = teams.create_invitation(Team.objects.get(name="Barkers"))
    with pytest.raises(Refused) as refused:
        teams.sign_up(invitation.token, username="ann", email="not-an-address", password="123")
    text = " ".join(refused.value.problems)
    assert "'ann' is taken" in text and "e-mail" in text and "password" in text
    assert Team.objects.get(name="Barkers").memberships.count() == 1


def test_expired_or_revoked_invitation_is_refused(open_challenge):
    invitation = teams.create_team_with_invitation(open_challenge, name="Late")
    TeamInvitation.objects.filter(pk=invitation.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    with pytest.raises(Refused, match="expired"):
        teams.sign_up(invitation.token, username="cy", email="cy@example.org", password=PASSWORD)
    with pytest.raises(Refused, match="not valid"):
        teams.sign_up("no-such-token", username="cy", email="cy@example.org", password=PASSWORD)


def test_a_person_is_in_one_team_per_challenge(open_challenge, make_member):
    ann = make_member("Barkers", "ann")
    other = teams.create_team_with_invitation(open_challenge, name="Rainers")
    with pytest.raises(Refused, match="already a member of team Barkers"):
        teams.accept_invitation(other.token, ann)


def test_self_registration_waits_for_the_organizers_approval(open_challenge, organizer):
    with pytest.raises(Refused, match="registered by its organizers"):
        teams.register_team(
            open_challenge, team_name="Solo", affiliation="", username="sol",
            email="sol@example.org", password=PASSWORD,
        )  # fmt: skip
    schedule.set_schedule(open_challenge, self_registration=True)
    user = teams.register_team(
        open_challenge, team_name="Solo", affiliation="Lab", username="sol",
        email="sol@example.org", password=PASSWORD,
    )  # fmt: skip
    team = selectors.team_of(user, open_challenge)
    assert not selectors.is_approved(team)
    from stimuli.submissions.services import submit

    from .conftest import baseline_archive, meta, upload

    with pytest.raises(Refused, match="waiting for the organizers' approval"):
        submit(team, user, meta(), upload(baseline_archive()))
    teams.decide_registration(team, approve=True, by=organizer)
    assert selectors.is_approved(team)
    assert TeamRegistration.objects.get(team=team).decided_by == organizer


def test_participant_account_is_a_team_member(open_challenge, make_member):
    """The listening test's participant account and the team member are one membership."""
    ann = make_member("Barkers", "ann")
    rater = enrolment.enrol_user(open_challenge, ann)
    assert rater.team == selectors.team_of(ann, open_challenge)
    team = Team.objects.get(name="Barkers")
    made = enrolment.create_participant_account(
        open_challenge, username="pat", password=PASSWORD, team=team
    )
    assert selectors.team_of(made.user, open_challenge) == team
