"""A sound counts as delivered only for bytes that really left the server: a HEAD, a download
abandoned after a few bytes, or a list of tiny ranges is no delivery, through gunicorn alone
(which sends the sound and waits for the client's acknowledgement) and through nginx (which
sends it and hands back a receipt). An honest full download is a delivery on both."""

from __future__ import annotations

import pytest

from raters import preparation
from raters.models import Rating, Trial
from tests.adversary.bots import rater_at_trial
from tests.conftest import wait_until
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def challenge():
    # DCASE 2023 Task 7's sounds: 4 s at 22.05 kHz, 176,444 bytes each.
    challenge = build_listening_challenge(
        slug="delivery",
        categories=2,
        clips_per_system=1,
        duration=4.0,
        sample_rate=22_050,
        listened_fraction=0.0,
    )
    preparation.set_open(challenge, True)
    return challenge


def _delivered(token: str) -> bool:
    return Trial.objects.filter(token=token, delivered_at__isnull=False).exists()


def test_head_abandoned_and_multi_range_requests_deliver_nothing(challenge, stack, browser_at):
    browser = browser_at(stack, challenge.slug)
    _, form = rater_at_trial(challenge, browser)
    token = form["token"]
    assert browser.http.head(browser.path(f"audio/{token}/")).status_code == 405
    refused = browser.sound(token, Range="bytes=0-0,2-2")
    assert refused.status_code == 416 and not refused.content
    browser.abandon(token)
    # An honest download of the next sound, recorded once it left: by then the abandoned
    # one's end (if it had one) would have been recorded too.
    whole = browser.sound(form["next"])
    assert whole.status_code == 200 and len(whole.content) == 176_444
    wait_until(lambda: _delivered(form["next"]), "the whole download recorded")
    trial = Trial.objects.get(token=token)
    assert trial.delivered_at is None and trial.served_at is None, trial.delivered_ranges
    # An answer to the sound that never arrived is refused, and nothing is stored.
    response = browser.rate(form)
    assert response.status_code == 409 and "Please listen to the sound" in response.text
    assert not Rating.objects.exists()
    # The same sound fetched whole: delivered, and the answer is taken.
    assert len(browser.sound(token).content) == len(whole.content)
    wait_until(lambda: _delivered(token), "the sound recorded as delivered")
    assert browser.rate(form).status_code == 303
    assert Rating.objects.count() == 1
