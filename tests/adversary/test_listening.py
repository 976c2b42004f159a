"""Listening the server can vouch for, attacked by bots that know how it counts: checkpoints
posted faster than the sound plays, waits overlapped by playing preloaded sounds, plays fired
side by side. Each gets no answer stored; an honest player, playing each sound in real time,
gets every answer stored.

Bots pace themselves as fast as the server answers; an honest player's waiting is the sound's
duration (it is what is being verified), never a wait on the server."""

from __future__ import annotations

import threading

import pytest

from raters import listening, preparation
from raters.models import FamiliarizationClip, Rater, Rating
from tests.adversary.bots import rater_at_examples, rater_at_trial
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONG = 30.0  # the bots' sounds: no bot's requests take this long, however loaded the machine
SHORT = 1.5  # the honest player's


def _challenge(slug: str, duration: float, **settings):
    challenge = build_listening_challenge(
        slug=slug, categories=2, clips_per_system=1, duration=duration, **settings
    )
    preparation.set_open(challenge, True)
    return challenge


def test_checkpoint_flooding_and_overlapped_waits_store_nothing(site, browser_at):
    challenge = _challenge("flood", LONG)
    browser = browser_at(site, challenge.slug)
    _, form = rater_at_trial(challenge, browser)
    this, following = form["token"], form["next"]
    for token in (this, following):
        assert browser.sound(token).status_code == 200
    # Checkpoints a quarter second of media apart, as fast as the server takes them.
    browser.event(this, "play", 0.0)
    steps = [0.25 * (n + 1) for n in range(int(LONG / 0.25))]
    for t in steps:
        browser.event(this, "timeupdate", min(t, LONG))
    verdict = browser.event(this, "ended", LONG)
    assert not verdict["heard"] and verdict["heard_fraction"] < 0.5, verdict
    # Pause and play in quick bursts, alternating with the preloaded next sound, so that the
    # two would share one wait.
    for n in range(40):
        for token in (this, following):
            browser.event(token, "play", (n * 0.25) % LONG)
            browser.event(token, "pause", (n * 0.25 + 0.25) % LONG)
    for token in (this, following):
        verdict = browser.event(token, "ended", LONG)
        assert not verdict["heard"] and verdict["heard_fraction"] < 0.5, verdict
    response = browser.rate(form)
    assert response.status_code == 409 and "Only the time it really played" in response.text
    assert not Rating.objects.exists()


def test_plays_fired_side_by_side_count_as_one_sound(browser_at, site):
    challenge = _challenge("parallel", SHORT, familiarization_clips=6)
    browser = browser_at(site, challenge.slug)
    rater, session, tokens = rater_at_examples(challenge, browser)
    assert len(tokens) == 6
    for token in tokens:
        assert browser.sound(token).status_code == 200

    def together(kind: str, t: float) -> None:
        threads = [
            threading.Thread(target=browser.event, args=(token, kind, t)) for token in tokens
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    together("play", 0.0)
    # Real time for one of them to play to its end (the bot's own pace, not a wait on the
    # server), then every one reported ended at once.
    threading.Event().wait(SHORT + 0.2)
    together("ended", SHORT)
    heard = [
        listening.listened_now(Rater.objects.get(pk=rater.pk), token)[1].ok for token in tokens
    ]
    assert sum(heard) <= 1, heard
    assert browser.post("start/", {"session": session}).status_code == 409


def test_an_honest_real_time_player_gets_every_answer_stored(site, browser_at):
    challenge = _challenge("honest", SHORT, familiarization_clips=2)
    browser = browser_at(site, challenge.slug)
    rater, session, tokens = rater_at_examples(challenge, browser)
    for token in tokens:
        assert browser.listen(token, SHORT)["heard"]
    assert browser.post("start/", {"session": session}).status_code == 302
    for n in range(3):
        form = browser.trial()
        if form["next"]:  # the page preloads the next sound, as a browser does
            assert browser.sound(form["next"]).status_code == 200
        verdict = browser.listen(form["token"], SHORT)
        assert verdict["heard"], verdict
        assert browser.rate(form).status_code == 303
        assert Rating.objects.filter(trial__session__rater=rater).count() == n + 1
    assert not FamiliarizationClip.objects.filter(first_played_at__isnull=True).exists()
