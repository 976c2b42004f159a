"""The demo challenge is built through the same import path as real uploads."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from stimuli.demo import DEMO_PASSWORD, DEMO_USER, seed_demo
from stimuli.models import Clip
from stimuli.permissions import is_organizer

pytestmark = pytest.mark.django_db


def test_seed_demo_creates_reference_sets_systems_and_an_organizer(django_user_model):
    summary = seed_demo(per_category=2, system_clips=3)
    challenge = summary.challenge
    assert summary.created
    assert Clip.objects.filter(challenge=challenge, role="development").count() == 14
    assert Clip.objects.filter(challenge=challenge, role="evaluation").count() == 14
    assert Clip.objects.filter(challenge=challenge, role="system").count() == 3 * 7 * 3
    assert sorted(challenge.systems.values_list("track__code", flat=True)) == ["A", "A", "B"]
    user = django_user_model.objects.get(username=DEMO_USER)
    assert user.check_password(DEMO_PASSWORD) and is_organizer(user)
    again = seed_demo(per_category=2, system_clips=3)
    assert not again.created and again.challenge == challenge


def test_seed_demo_command_refuses_without_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG=1 only"):
        call_command("seed_demo")
