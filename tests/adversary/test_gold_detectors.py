"""Detectors a competitor's bot could run to spot a gold (trapping) trial before listening, or to
answer one without listening:

- the time to the first byte of a sound (the trial page preloads the next sound: a gold sound
  rendered on its first fetch would take longer to start than a stimulus);
- templates: espeak-ng's rendering of every sentence a built-in gold sound may say, in the
  synthesiser's default voice and spoken word by word as the platform speaks it, matched against
  each served gold sound by MFCC distance, stretched or time-warped, to read the numbers it asks
  for (`tests/adversary/speech_templates.py`).

Neither may beat chance by much; an honest rater, who hears the words, passes the gold rule.
"""

from __future__ import annotations

import io
import itertools
import random
import shutil
import time

import numpy as np
import pytest
import soundfile
from django.test import Client

from raters import preparation, sessions
from raters.selectors import session_verdicts
from tests.adversary import speech_templates
from tests.adversary.bots import Browser
from tests.listening_setup import build_listening_challenge, get_sound, rater_at_trials

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (scripts/lib.sh)"
)


# --- Thresholds ----------------------------------------------------------------------------------


def balanced_accuracy(scores: np.ndarray, labels: np.ndarray, threshold: float, above: bool):
    said = scores > threshold if above else scores <= threshold
    return 0.5 * (np.mean(said[labels]) + np.mean(~said[~labels]))


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, bool]:
    """The threshold (either way round) with the best balanced accuracy on these scores: what an
    attacker who knew every label would pick. Returns (accuracy, threshold, above)."""
    best = (0.5, float(np.min(scores)) - 1.0, True)
    for threshold in np.unique(scores):
        for above in (True, False):
            accuracy = balanced_accuracy(scores, labels, threshold, above)
            if accuracy > best[0]:
                best = (float(accuracy), float(threshold), above)
    return best


# --- First byte ----------------------------------------------------------------------------------

TIMED_RATERS = 12
GOLD_PER_SESSION = 10


def first_byte_s(browser: Browser, token: str) -> float:
    """Seconds from asking for a sound to its first byte of audio, as a bot preloading it sees
    (it then hangs up: the rest would take the sound's sending time through nginx)."""
    began = time.perf_counter()
    with browser.http.stream("GET", browser.path(f"audio/{token}/")) as response:
        next(response.iter_raw())
        arrived = time.perf_counter() - began
        assert response.status_code == 200
    return arrived


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_first_byte_times_do_not_tell_gold_trials(stack, browser_at):
    """Gold sounds are rendered before any session needs them, as stimuli are: the first fetch of
    either reads a file already made. A threshold on the time to the first byte, fitted on every
    rater's fetches, tells gold from the other trials barely better than a coin."""
    challenge = build_listening_challenge(
        slug="gold-timing",
        categories=1,
        clips_per_system=6,
        duration=4.0,
        sample_rate=22_050,
        gold_per_session=GOLD_PER_SESSION,
        target_ratings=TIMED_RATERS,
        listened_fraction=0.0,
    )
    preparation.set_open(challenge, True)
    fetches = []
    for _ in range(TIMED_RATERS):
        rater, session = rater_at_trials(challenge)
        browser = browser_at(stack, challenge.slug)
        browser.join(rater.access_key)
        fetches += [(browser, t.token, t.role == "gold") for t in session.trials.all()]
    # Interleaved at random: a drift of the machine's load falls on both kinds alike.
    random.Random(7).shuffle(fetches)
    times = np.array([first_byte_s(browser, token) for browser, token, _ in fetches])
    labels = np.array([is_gold for _, _, is_gold in fetches])
    assert labels.sum() == TIMED_RATERS * GOLD_PER_SESSION
    accuracy, threshold, _ = best_threshold(times, labels)
    medians = (np.median(times[labels]) * 1000, np.median(times[~labels]) * 1000)
    print(
        f"first byte: gold median {medians[0]:.1f} ms, others {medians[1]:.1f} ms; best "
        f"threshold {threshold * 1000:.1f} ms, balanced accuracy {accuracy:.3f}"
    )
    assert accuracy <= 0.6, (accuracy, medians)


# --- Templates -----------------------------------------------------------------------------------

TEMPLATE_RATERS = 3  # ten gold trials each: thirty gold sounds
RATE = 16_000
DISTANCES = (speech_templates.stretched_distance, speech_templates.warped_distance)
READINGS = [
    f"{distance} on {rendering}"
    for distance in ("stretched", "time-warped")
    for rendering in ("whole sentences", "word by word")
]


@pytest.mark.django_db
def test_the_synthesisers_own_renderings_do_not_read_the_numbers():
    """A bot that has read `raters.gold` renders every sentence it may say, word by word in
    espeak-ng's default voice, and answers a gold trial with the nearest template's numbers.
    Each served trapping sound passes its words from voice to voice (accent, variant, pitch,
    speed, formants each word's own), in a room, behind noise and a babble of backward speech,
    in words and an order drawn for it: neither the plain MFCC distance nor dynamic time warping
    answers more than 3 of 30 right on both scales (chance is about 1: a ninth of the "both"
    sentences, a seventy-second of the others). An honest rater, who hears the words, passes
    the gold rule."""
    challenge = build_listening_challenge(
        slug="gold-templates",
        categories=1,
        duration=4.0,
        sample_rate=RATE,
        gold_per_session=10,
        target_ratings=TEMPLATE_RATERS,
        listened_fraction=0.0,
    )
    preparation.set_open(challenge, True)
    # Two sets: each sentence as the synthesiser says it whole, and word by word as served.
    sets = [speech_templates.templates(RATE, r) for r in speech_templates.RENDERINGS]
    asked, read = [], {name: [] for name in READINGS}
    for _ in range(TEMPLATE_RATERS):
        rater, session = rater_at_trials(challenge)
        client = Client()
        client.get(f"/listen/{challenge.slug}/join/{rater.access_key}/")
        for trial in session.trials.filter(role="gold").select_related("gold"):
            served = get_sound(client, f"/listen/{challenge.slug}/audio/{trial.token}/").body
            samples, rate = soundfile.read(io.BytesIO(served), always_2d=True)
            features = speech_templates.mfcc(samples[:, 0], rate)
            asked.append((trial.gold.quality_min, trial.gold.fit_min))
            for (distance, templates), answers in zip(
                itertools.product(DISTANCES, sets), read.values(), strict=True
            ):
                answers.append(speech_templates.nearest(features, templates, distance))
        # The honest rater answers what the words ask for; its other answers are its own.
        for trial in session.trials.select_related("gold").order_by("position"):
            quality, fit = (
                (6, 6) if trial.gold is None else (trial.gold.quality_min, trial.gold.fit_min)
            )
            if trial.role == "anchor_hq_goodfit":
                quality, fit = 9, 9
            elif trial.role == "anchor_hq_poorfit":
                quality, fit = 9, 1
            elif trial.role == "anchor_lq_poorfit":
                quality, fit = 1, 1
            sessions.save_rating(
                rater, trial.token, quality=quality, fit=fit, key=f"k-{trial.token}"
            )
        flags = session_verdicts(challenge)[session.pk].flags
        assert not [flag for flag in flags if flag.rule == "gold"], flags
    assert len(asked) == 30
    right = {
        name: sum(a == b for a, b in zip(asked, answers, strict=True))
        for name, answers in read.items()
    }
    print("templates, right of 30:", right)
    # As measured: stretched 1 and 1, time-warped 2 and 2 (7 when the speech was 10 to 20 dB
    # above the noise and the formants shifted by 12% at most).
    assert max(right.values()) <= 3, right
