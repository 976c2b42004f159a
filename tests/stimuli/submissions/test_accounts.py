"""Accounts no one can enumerate or hijack: the same answer whether a name or an address exists,
rate limits on every form that sends an e-mail, reset links that point at the site whatever Host
a request claims, invitations with a number of uses, an expiry and revocation, and team names
that cannot pass for another team's."""

from __future__ import annotations

import re
from html import unescape
from types import SimpleNamespace

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

PASSWORD = "a-long-team-password-17"


@pytest.fixture
def frozen_window(monkeypatch):
    """Every request in the same rate window, whatever the machine's speed."""
    import django_ratelimit.core as core

    monkeypatch.setattr(core, "time", SimpleNamespace(time=lambda: 1_800_000_000.0))


def _links(message) -> list[str]:
    return [word for word in message.body.split() if "://" in word]


def test_reset_link_uses_the_configured_site_whatever_the_host(
    open_challenge, make_member, settings
):
    make_member("Barkers", "ann")
    settings.ALLOWED_HOSTS = ["*"]
    settings.FOLEY_SITE_URL = "https://foley.example.org"
    response = Client().post(
        reverse("password_reset"), {"email": "ann@example.org"}, HTTP_HOST="evil.example"
    )
    assert response.status_code == 302
    [message] = mail.outbox
    links = _links(message)
    assert any(link.startswith("https://foley.example.org/accounts/reset/") for link in links)
    assert all(link.startswith("https://foley.example.org") for link in links)
    assert "evil.example" not in message.body and "evil.example" not in message.subject


def test_reset_flooding_is_refused_per_address_and_per_client(
    open_challenge, make_member, rate_limits, frozen_window
):
    make_member("Barkers", "ann")
    url = reverse("password_reset")
    # From many clients, one mailbox gets three e-mails an hour at most.
    got = [
        Client(REMOTE_ADDR=f"10.1.0.{i}").post(url, {"email": "Ann@Example.org "}).status_code
        for i in range(30)
    ]
    assert got[:3] == [302] * 3 and set(got[3:]) == {429}
    assert len(mail.outbox) == 3
    refused = Client(REMOTE_ADDR="10.1.1.1").post(url, {"email": "ann@example.org"})
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    # One client cannot walk through addresses either; another client is not held back.
    one = Client(REMOTE_ADDR="10.2.0.1")
    got = [one.post(url, {"email": f"x{i}@example.org"}).status_code for i in range(11)]
    assert 429 not in got[:10] and got[-1] == 429
    assert Client(REMOTE_ADDR="10.2.0.2").post(url, {"email": "y@example.org"}).status_code == 302


@pytest.mark.parametrize(
    "look_alike",
    [
        "barkers",
        "  Barkers  ",
        "Bark ers",
        "B\u0430rkers",  # a Cyrillic a
        "Barkers\u200b",  # a zero-width space
        "\uff22\uff41\uff52\uff4b\uff45\uff52\uff53",  # full-width
        "B\u0391RKERS",  # Greek Alpha
        "Bárkers",
        "Bark-ers",
    ],
)
def test_look_alike_team_names_are_refused(open_challenge, look_alike):
    from stimuli.errors import Refused
    from stimuli.models import Team
    from stimuli.submissions import teams

    teams.create_team_with_invitation(open_challenge, name="Barkers")
    with pytest.raises(Refused, match="looks the same"):
        teams.create_team_with_invitation(open_challenge, name=look_alike)
    assert Team.objects.filter(challenge=open_challenge).count() == 1


def test_team_names_are_stored_normalised_and_the_database_refuses_look_alikes(open_challenge):
    from django.db import IntegrityError, transaction

    from stimuli.models import Team
    from stimuli.submissions import teams

    invitation = teams.create_team_with_invitation(open_challenge, name="  Rain\u00a0 \uff2dakers ")
    assert invitation.team.name == "Rain Makers"
    # The constraint holds however a team is stored, the admin and fixtures included.
    other = teams.create_team_with_invitation(open_challenge, name="Barkers").team
    with pytest.raises(IntegrityError), transaction.atomic():
        Team.objects.create(challenge=open_challenge, name="RAIN MAKERS")
    assert Team.objects.filter(challenge=open_challenge).count() == 2 and other.pk


def _join_page(invitation) -> tuple[int, str]:
    url = reverse("teams:join", args=[invitation.team.challenge.slug, invitation.token])
    response = Client().get(url)
    return response.status_code, response.content.decode()


def test_an_invitation_makes_as_many_members_as_it_was_for(open_challenge):
    from stimuli.errors import Refused
    from stimuli.submissions import teams

    invitation = teams.create_team_with_invitation(open_challenge, name="Barkers")
    two = teams.create_invitation(invitation.team, uses=2)
    for name in ("ann", "bob"):
        teams.sign_up(two.token, username=name, email=f"{name}@example.org", password=PASSWORD)
    with pytest.raises(Refused, match="used by the 2 people"):
        teams.sign_up(two.token, username="cy", email="cy@example.org", password=PASSWORD)
    status, html = _join_page(two)
    assert status == 410 and "used by the 2 people it was for" in html and "id_username" not in html
    two.refresh_from_db()
    assert two.uses == 2 and invitation.team.memberships.count() == 2
    # A refused sign-up takes no use: the other link still has all of its own.
    with pytest.raises(Refused):
        teams.sign_up(invitation.token, username="ann", email="x@example.org", password=PASSWORD)
    invitation.refresh_from_db()
    assert invitation.uses == 0


def test_an_invitation_is_refused_once_expired_and_the_database_holds_its_limit(open_challenge):
    import datetime as dt

    from django.db import IntegrityError, transaction
    from django.utils import timezone

    from stimuli.submissions import teams
    from stimuli.submissions.models import TeamInvitation

    invitation = teams.create_team_with_invitation(open_challenge, name="Late")
    TeamInvitation.objects.filter(pk=invitation.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    status, html = _join_page(invitation)
    assert status == 410 and "has expired" in html
    with pytest.raises(IntegrityError), transaction.atomic():
        TeamInvitation.objects.filter(pk=invitation.pk).update(uses=invitation.max_uses + 1)


def test_the_organizer_makes_and_revokes_links_on_the_page(open_challenge, organizer_client):
    from stimuli.submissions import teams
    from stimuli.submissions.models import TeamInvitation

    first = teams.create_team_with_invitation(open_challenge, name="Barkers")
    team = first.team
    index = reverse("submissions_organize:index", args=["teams"])
    invite = reverse("submissions_organize:invite", args=["teams", team.pk])
    # Bad numbers: every problem named at once, nothing made.
    response = organizer_client.post(invite, {"uses": "0", "days": "999"})
    html = response.content.decode()
    assert response.status_code == 400 and "uses:" in html and "days:" in html
    assert team.invitations.count() == 1
    assert organizer_client.post(invite, {"uses": "3", "days": "2"})["Location"] == index
    second = team.invitations.exclude(pk=first.pk).get()
    assert second.max_uses == 3
    page = organizer_client.get(index).content.decode()
    assert first.token in page and second.token in page and "used 0 of 3" in page

    revoke = reverse("submissions_organize:revoke_invitation", args=["teams", team.pk, first.pk])
    assert organizer_client.post(revoke)["Location"] == index
    first.refresh_from_db()
    assert first.revoked and first.revoked_at is not None
    page = organizer_client.get(index).content.decode()
    assert first.token not in page and second.token in page
    status, html = _join_page(first)
    assert status == 410 and "withdrawn by the organizers" in html
    assert _join_page(second)[0] == 200
    # A link of another team is not revoked through this team's address.
    other = teams.create_team_with_invitation(open_challenge, name="Rainers")
    wrong = reverse("submissions_organize:revoke_invitation", args=["teams", team.pk, other.pk])
    assert organizer_client.post(wrong).status_code == 404
    assert not TeamInvitation.objects.get(pk=other.pk).revoked
    # A team member cannot revoke.
    member = teams.sign_up(second.token, username="ann", email="a@example.org", password=PASSWORD)
    client = Client()
    client.force_login(member)
    revoke_second = reverse(
        "submissions_organize:revoke_invitation", args=["teams", team.pk, second.pk]
    )
    assert client.post(revoke_second).status_code in (302, 403)
    assert not TeamInvitation.objects.get(pk=second.pk).revoked


def _answers(url: str, forms: list[dict]) -> list[tuple[int, str, str]]:
    """Each form's answer, as a stranger sees it: status, where it leads, that page's text."""
    seen = []
    for data in forms:
        client = Client()
        response = client.post(url, data)
        location = response.get("Location", "")
        page = client.get(location).content.decode() if location else ""
        # The per-request secrets (CSRF token, script nonce) differ whatever was typed.
        page = re.sub(
            r'(X-CSRFToken": "|nonce="|name="csrfmiddlewaretoken" value=")[^"]+', "", page
        )
        seen.append((response.status_code, location, page))
    return seen


def test_sign_up_answers_the_same_whether_a_username_or_address_is_taken(
    open_challenge, make_member
):
    from django.contrib.auth import get_user_model

    from stimuli.submissions import teams

    from .conftest import confirm_from_mail, mailed_link

    make_member("Barkers", "organizer")  # an account an attacker would look for
    invitation = teams.create_team_with_invitation(open_challenge, name="Rainers")
    url = reverse("teams:join", args=["teams", invitation.token])
    free = {"username": "zed", "email": "zed@example.org", "password": PASSWORD}
    taken_name = {"username": "Organizer", "email": "new@example.org", "password": PASSWORD}
    taken_address = {"username": "yan", "email": "organizer@example.org", "password": PASSWORD}
    answers = _answers(url, [free, taken_name, taken_address])
    assert answers[0][:2] == (302, reverse("teams:sent", args=["teams"]))
    assert answers[0] == answers[1] == answers[2]
    users = get_user_model().objects
    assert users.count() == 1
    # The owner of the address learns it has an account; no link to make a second one.
    tried = [m for m in mail.outbox if m.to == ["organizer@example.org"]]
    assert len(tried) == 1 and "already has an account" in tried[0].body
    assert "/confirm/" not in tried[0].body and "/accounts/password-reset/" in tried[0].body
    # Only after the e-mail's link is a taken username told, with a field to choose another.
    client = Client()
    taken = confirm_from_mail(client, "new@example.org")
    assert taken.status_code == 400 and "'Organizer' is taken" in unescape(taken.content.decode())
    assert users.count() == 1
    link = mailed_link("new@example.org")
    # Without the form's password the link makes nothing: the owner of an address cannot be
    # given an account whose password someone else chose.
    wrong = client.post(link, {"username": "newton", "password": "not-the-one-chosen-1"})
    assert wrong.status_code == 400 and "type the password you chose" in wrong.content.decode()
    assert users.count() == 1
    chosen = client.post(link, {"username": "newton", "password": PASSWORD})
    assert chosen["Location"] == reverse("teams:team", args=["teams"])
    newton = users.get(username="newton")
    assert newton.email == "new@example.org" and newton.check_password(PASSWORD)
    assert teams.selectors.team_of(newton, open_challenge) == invitation.team
    invitation.refresh_from_db()
    assert invitation.uses == 1
    # The link works once.
    assert Client().get(mailed_link("new@example.org")).status_code == 410
    assert confirm_from_mail(Client(), "zed@example.org")["Location"].endswith("/team/")


def test_registration_answers_the_same_whether_a_username_or_address_is_taken(
    open_challenge, make_member
):
    from django.contrib.auth import get_user_model

    from stimuli.submissions import schedule, selectors

    from .conftest import confirm_from_mail

    schedule.set_schedule(open_challenge, self_registration=True)
    make_member("Barkers", "ann")
    url = reverse("teams:register", args=["teams"])
    team = {"team_name": "Solo", "affiliation": "Lab", "password": PASSWORD}
    answers = _answers(
        url,
        [
            {**team, "username": "sol", "email": "sol@example.org"},
            {**team, "username": "ANN", "email": "other@example.org"},
            {**team, "username": "sam", "email": "Ann@Example.org"},
        ],
    )
    assert answers[0][:2] == (302, reverse("teams:sent", args=["teams"]))
    assert answers[0] == answers[1] == answers[2]
    assert get_user_model().objects.count() == 1
    # What the form does say, it says whoever asks: every problem of what was typed, at once.
    response = Client().post(
        url, {**team, "team_name": "barkers", "username": "", "email": "x", "password": "1"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert all(word in html for word in ("team:", "username:", "e-mail:", "password:"))
    assert confirm_from_mail(Client(), "sol@example.org").status_code == 302
    sol = get_user_model().objects.get(username="sol")
    assert not selectors.is_approved(selectors.team_of(sol, open_challenge))


def test_sign_up_and_registration_are_limited_per_client_and_per_address(
    open_challenge, rate_limits, frozen_window
):
    from stimuli.submissions import schedule, teams

    schedule.set_schedule(open_challenge, self_registration=True)
    invitation = teams.create_team_with_invitation(open_challenge, name="Barkers")
    join = reverse("teams:join", args=["teams", invitation.token])
    register = reverse("teams:register", args=["teams"])
    form = {"username": "zed", "password": PASSWORD, "team_name": "Solo"}
    # One mailbox, many clients, both forms together: three e-mails an hour.
    got = [
        Client(REMOTE_ADDR=f"10.3.0.{i}")
        .post((join, register)[i % 2], {**form, "username": f"z{i}", "email": "zed@example.org"})
        .status_code
        for i in range(8)
    ]
    assert got[:3] == [302] * 3 and set(got[3:]) == {429}
    assert len(mail.outbox) == 3
    # One client, many addresses: ten tries a minute.
    one = Client(REMOTE_ADDR="10.4.0.1")
    got = [
        one.post(register, {**form, "username": f"r{i}", "email": f"r{i}@example.org"}).status_code
        for i in range(11)
    ]
    assert 429 not in got[:10] and got[-1] == 429


def test_a_username_that_would_pass_for_anothers_is_refused(open_challenge, make_member):
    from stimuli.errors import Refused
    from stimuli.submissions import teams

    make_member("Barkers", "organizer")
    invitation = teams.create_team_with_invitation(open_challenge, name="Rainers")
    for look_alike in ("0rganizer", "ORGANlZER", "organ1zer"):
        with pytest.raises(Refused, match="is taken"):
            teams.sign_up(
                invitation.token, username=look_alike, email="x@example.org", password=PASSWORD
            )
    with pytest.raises(Refused, match="username:"):  # another script's letters
        teams.sign_up(
            invitation.token, username="\u043erganizer", email="x@example.org", password=PASSWORD
        )
    assert invitation.team.memberships.count() == 0
