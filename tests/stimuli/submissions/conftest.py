"""Fixtures of the teams' side: a challenge in its development phase with two approved teams,
members made from invitation links, and the baseline generator as a team submits it."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from stimuli.services import create_challenge
from stimuli.submissions import schedule, teams
from stimuli.submissions.baseline_archive import baseline_archive
from stimuli.submissions.services import Metadata
from tests.stimuli.generators.test_sandbox_hostile import bystander, udp_listener  # noqa: F401  (fixtures)

PASSWORD = "a-long-team-password-17"


@pytest.fixture
def open_challenge(db):
    """Short clips of two categories; development open, the deadline a week ahead."""
    challenge = create_challenge(
        name="Teams",
        slug="teams",
        clip_duration_s=0.5,
        categories=[("dog_bark", "Dog bark"), ("rain", "Rain")],
    )
    now = timezone.now()
    schedule.set_schedule(
        challenge,
        time_zone="Europe/Paris",
        registration_opens=now - dt.timedelta(days=20),
        development_opens=now - dt.timedelta(days=10),
        submission_deadline=now + dt.timedelta(days=7),
        evaluation_opens=now + dt.timedelta(days=12),
        examples_per_category=2,
        evaluation_clips_per_category=10,
    )
    return challenge


@pytest.fixture
def make_member(open_challenge):
    """make_member("Team A", "ann"): signs up from the team's invitation (made on first use)."""

    def make(team_name: str, username: str, challenge=None):
        challenge = challenge or open_challenge
        from stimuli.models import Team

        team = Team.objects.filter(challenge=challenge, name=team_name).first()
        if team is None:
            invitation = teams.create_team_with_invitation(challenge, name=team_name)
        else:
            invitation = teams.create_invitation(team)
        return teams.sign_up(
            invitation.token, username=username, email=f"{username}@example.org", password=PASSWORD
        )

    return make


def mailed_link(address: str, marker: str = "/confirm/") -> str:
    """The path of the link in the last e-mail to `address` whose URL holds `marker`."""
    from urllib.parse import urlsplit

    from django.core import mail

    for message in reversed(mail.outbox):
        if address in message.to:
            for word in message.body.split():
                if "://" in word and marker in word:
                    return urlsplit(word).path
    raise AssertionError(f"no e-mail to {address} with a {marker} link")


def confirm_from_mail(client, address: str, **changes: str):
    """Follow the confirmation e-mail's link, type the password and press its button (with
    changed fields)."""
    path = mailed_link(address)
    assert client.get(path).status_code == 200
    return client.post(path, {"password": PASSWORD, **changes})


def upload(data: bytes, name: str = "system.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/zip")


def meta(system: str = "Barker", track: str = "A", **fields) -> Metadata:
    return Metadata(system=system, track=track, licence="MIT", **fields)


@pytest.fixture
def queued_only(settings):
    """Checks are queued on a broker no worker reads: tests of what is accepted, not checked."""
    from foley_platform.celery import app
    from tests.conftest import REDIS_URL, _redis_up, _reset_broker_connections

    if not _redis_up():
        pytest.skip("needs Redis for a broker no worker reads")
    prefix = f"foley-test-idle-{uuid.uuid4().hex[:8]}:"
    old = {k: app.conf[k] for k in ("broker_url", "task_always_eager", "broker_transport_options")}
    app.conf.update(
        broker_url=REDIS_URL,
        task_always_eager=False,
        broker_transport_options={"global_keyprefix": prefix},
    )
    _reset_broker_connections(app)
    yield
    app.conf.update(old)
    _reset_broker_connections(app)
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    if keys := list(client.scan_iter(f"{prefix}*")):
        client.delete(*keys)


__all__ = ["PASSWORD", "baseline_archive", "confirm_from_mail", "mailed_link", "meta", "upload"]


@pytest.fixture
def development_set(open_challenge, tmp_path):
    """Four development clips per category and logmel as the FAD model (no weights to fetch)."""
    from stimuli.demo import write_set
    from stimuli.objective.config import set_models
    from stimuli.uploads.imports import import_clips

    root = write_set(tmp_path / "development", open_challenge, 4, 1, 0.0)
    import_clips(open_challenge, root, role="development")
    set_models(open_challenge, fad_model="logmel")
    return open_challenge
