"""Accounts no one can enumerate or hijack: the same answer whether a name or an address exists,
rate limits on every form that sends an e-mail, reset links that point at the site whatever Host
a request claims, invitations with a number of uses, an expiry and revocation, and team names
that cannot pass for another team's."""

from __future__ import annotations

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
