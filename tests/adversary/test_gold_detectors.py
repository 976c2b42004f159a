"""Detectors a competitor's bot could run to spot a gold (trapping) trial before listening: the
time to the first byte of a sound (the trial page preloads the next sound: a gold sound rendered
on its first fetch would take longer to start than a stimulus). It may not beat chance by much.
"""

from __future__ import annotations

import random
import shutil
import time

import numpy as np
import pytest

from raters import preparation
from tests.adversary.bots import Browser
from tests.listening_setup import build_listening_challenge, rater_at_trials

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (scripts/lib.sh)"
    ),
]


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
