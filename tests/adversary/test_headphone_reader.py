"""The headphone check read by a script: crowd bots that take each sound of the Huggins-pitch
check as their browser receives it and answer with the noise whose left-minus-right energy is
greatest (when the foils were the same in both ears, that named every target). The foils now
differ between the ears as much as the target does, so the reader is right about a third of the
time and every bot is screened out; an honest worker, who hears the tone, passes.

The reader is the point here, not the listening time: the test asks for none (listened fraction
0), so a bot's answers are taken as soon as its sound was delivered."""

from __future__ import annotations

import io
import itertools
import re

import numpy as np
import pytest
import soundfile

from raters import huggins, preparation, screening, selectors
from raters.models import Rater, Screening, ScreeningAttempt, ScreeningTrial
from stimuli.models import AudioFile
from tests.adversary.bots import Browser
from tests.conftest import wait_until
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TOKEN = re.compile(r'name="token" value="([^"]+)"')
BOTS = 4
TRIALS = 6


def left_minus_right(sound: bytes) -> list[float]:
    """Per noise of a check's sound (laid out as `huggins.trial` lays them), the energy of left
    minus right over the energy of both ears."""
    samples, rate = soundfile.read(io.BytesIO(sound), always_2d=True)
    noise, gap = round(huggins.NOISE_S * rate), round(huggins.GAP_S * rate)
    parts = [samples[k * (noise + gap) : k * (noise + gap) + noise] for k in range(3)]
    return [float(np.sum((p[:, 0] - p[:, 1]) ** 2) / np.sum(p**2)) for p in parts]


def _worker(browser_at, site, challenge, n: int) -> tuple[Browser, Rater]:
    # Each from a network of its own: the crowd link admits a few ids per network.
    browser = browser_at(site, challenge.slug, f"127.{1 + n // 200}.{n % 200}.9")
    key = selectors.listening_test(challenge).crowd_key
    assert browser.crowd(key, f"reader{n}").status_code == 302
    assert browser.http.get(browser.path("consent/")).status_code == 200  # the CSRF cookie
    assert browser.post("consent/", {"agree": "yes"}).status_code == 302
    assert browser.post("instructions/", {}).status_code == 302
    return browser, Rater.objects.get(participant_id=f"reader{n}")


def _take_check(browser: Browser, answer) -> tuple[str, int]:
    """Answer every trial of the check by `answer(trial token, the sound's bytes)`; returns the
    page the check ends on and how many answers matched the key."""
    right = 0
    while (page := browser.http.get(browser.path("checks/"))).status_code == 200:
        found = TOKEN.search(page.text)
        if found is None:
            return page.text, right
        token = found.group(1)
        stored = AudioFile.objects.count()
        sound = browser.sound(token)
        assert sound.status_code == 200
        # Made when the check opened: fetching it renders nothing, as for any stimulus.
        assert AudioFile.objects.count() == stored
        wait_until(
            lambda token=token: ScreeningTrial.objects.filter(
                token=token, delivered_at__isnull=False
            ).exists(),
            "the sound recorded as delivered",
        )
        given = answer(token, sound.content)
        right += given == ScreeningTrial.objects.get(token=token).answer_key
        response = browser.post("checks/answer/", {"token": token, "answer": given})
        assert response.status_code == 303, response.text[:500]
    return page.text, right


def test_left_minus_right_energy_does_not_pass_the_headphone_check(site, browser_at, monkeypatch):
    challenge = build_listening_challenge(
        slug="lr-reader", categories=1, familiarization_clips=2, listened_fraction=0.0
    )
    preparation.set_open(challenge, True)
    Screening.objects.create(
        test=selectors.listening_test(challenge),
        level_check=False,
        headphone_trials=TRIALS,
        attempts=1,
        screen_out_url="",
    )
    # The attempts' secret seeds fixed, so the draws (and the outcome) are the same every run.
    seeds = itertools.count(1_000)
    monkeypatch.setattr(screening, "new_seed", lambda: next(seeds))
    hits = 0
    for n in range(BOTS):
        browser, rater = _worker(browser_at, site, challenge, n)
        screening.begin(rater)  # the attempt opened here, with its seed drawn as above

        def read(token: str, sound: bytes) -> str:
            return str(1 + int(np.argmax(left_minus_right(sound))))

        page, right = _take_check(browser, read)
        hits += right
        assert 'id="screened-out"' in page, page[:800]
        attempt = ScreeningAttempt.objects.get(rater=rater, step="headphones")
        assert attempt.state == ScreeningAttempt.State.FAILED, attempt.summary
    # About a third right, as a guess would be (it was every one).
    print(f"left-minus-right reader: {hits} of {BOTS * TRIALS} right")
    assert hits <= 0.5 * BOTS * TRIALS, hits
    # A worker who hears the tone (here: answers what the sound holds) passes and goes on.
    browser, rater = _worker(browser_at, site, challenge, BOTS)
    page, right = _take_check(
        browser, lambda token, _: ScreeningTrial.objects.get(token=token).answer_key
    )
    assert right == TRIALS
    attempt = ScreeningAttempt.objects.get(rater=rater, step="headphones")
    assert attempt.state == ScreeningAttempt.State.PASSED
    assert not screening.pending(Rater.objects.get(pk=rater.pk))
