"""A/B trials attacked by the listening bots: both sides played at once so that they share one
wait, checkpoints posted faster than the sounds play, and a vote posted as soon as one side
ended. None gets a vote stored; an honest player, playing A and then B in real time, gets every
vote stored; and no vote stored comes sooner after its A/B trial's turn than both sides take to
play (times the test's share). And a team's farm that listens as the honest player does and
votes for its system is named by the favouritism rule and buys its system nothing.

Bots pace themselves as fast as the server answers; an honest player's waiting is the sounds'
duration (it is what is being verified), never a wait on the server."""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time

import numpy as np
import pytest

from raters import demo, enrolment, preparation, sessions
from raters.models import Vote
from scoring import services
from scoring.votes import score_votes
from stimuli.models import System
from tests.adversary.bots import Browser, is_own, rater_at_trial, run_farm
from tests.pairs_setup import build_pairs_challenge, vote_session

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONG = 30.0  # the bots' sounds: no bot's requests take this long, however loaded the machine
SHORT = 1.5  # the honest player's
SIDES = re.compile(r'<audio id="sound-[ab]"[^>]*data-token="([^"]+)"')


def _challenge(slug: str, duration: float):
    challenge = build_pairs_challenge(
        slug=slug, categories=1, clips_per_system=1, duration=duration, pairs_per_session=3
    )
    preparation.set_open(challenge, True)
    return challenge


def _pair(browser: Browser) -> dict:
    """The A/B trial page's form: its token, request key and each side's sound."""
    page = browser.page()
    a, b = SIDES.findall(page)
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    key = re.search(r'name="key" value="([^"]+)"', page).group(1)
    return {"token": token, "key": key, "a": a, "b": b}


def _vote(browser: Browser, form: dict):
    return browser.post(
        "vote/", {"token": form["token"], "key": form["key"], "quality": "left", "fit": "tie"}
    )


def _together(browser: Browser, tokens: list[str], kind: str, t: float) -> None:
    threads = [threading.Thread(target=browser.event, args=(token, kind, t)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _both_played_at_once(site, browser_at, slug: str, duration: float):
    """A bot at its first A/B trial that fetched both sides and played them at once: its
    browser, the trial's form and the sides' tokens."""
    challenge = _challenge(slug, duration)
    browser = browser_at(site, challenge.slug)
    rater_at_trial(challenge, browser)
    form = _pair(browser)
    sides = [form["a"], form["b"]]
    for token in sides:
        assert browser.sound(token).status_code == 200
    _together(browser, sides, "play", 0.0)
    return challenge, browser, form, sides


def test_sides_played_at_once_or_flooded_get_no_vote(site, browser_at):
    _, browser, form, sides = _both_played_at_once(site, browser_at, "ab-flood", LONG)
    # Both sides played at once, then checkpoints a quarter second of media apart on each, as
    # fast as the server takes them, and both reported ended.
    for n in range(int(LONG / 0.25)):
        for token in sides:
            browser.event(token, "timeupdate", min(0.25 * (n + 1), LONG))
    verdicts = [browser.event(token, "ended", LONG) for token in sides]
    assert not any(v["heard"] for v in verdicts), verdicts
    assert all(v["heard_fraction"] < 0.5 for v in verdicts), verdicts
    response = _vote(browser, form)
    assert response.status_code == 409 and "Sound A: You have heard" in response.text
    assert "Only the time it really played counts" in response.text
    assert not Vote.objects.exists()


def test_one_wait_for_two_sides_is_not_enough(site, browser_at):
    # A bot plays both sides at once and waits once: at most one side counts.
    challenge, browser, form, sides = _both_played_at_once(site, browser_at, "ab-one-wait", SHORT)
    # Real time for one side to play to its end (the bot's own pace), then both ended at once.
    threading.Event().wait(SHORT + 0.2)
    verdicts = []
    for token in sides:
        verdicts.append(browser.event(token, "ended", SHORT))
    assert sum(v["heard"] for v in verdicts) <= 1, verdicts
    response = _vote(browser, form)
    assert response.status_code == 409 and "Sound " in response.text
    # Another plays A in real time and votes as soon as it ends, B never played.
    other = browser_at(site, challenge.slug)
    rater_at_trial(challenge, other)
    form = _pair(other)
    assert other.sound(form["b"]).status_code == 200  # preloaded, as a page does
    assert other.listen(form["a"], SHORT)["heard"]
    response = _vote(other, form)
    assert response.status_code == 409
    assert "Sound B: Please play the sound before rating it." in response.text
    assert not Vote.objects.exists()


def test_an_honest_player_votes_and_no_vote_beats_real_time(site, browser_at):
    challenge = _challenge("ab-honest", SHORT)
    browser = browser_at(site, challenge.slug)
    rater_at_trial(challenge, browser)
    for n in range(3):
        form = _pair(browser)
        for side in ("a", "b"):
            verdict = browser.listen(form[side], SHORT)
            assert verdict["heard"], verdict
        assert _vote(browser, form).status_code == 303
        assert Vote.objects.count() == n + 1
    fraction = 0.9  # the test's listened_fraction
    for vote in Vote.objects.all():
        assert vote.answer_s >= 2 * fraction * SHORT, vote.answer_s
        assert min(vote.left_heard_fraction, vote.right_heard_fraction) >= fraction


FARM = 3
FARM_PAIRS = 16  # A/B trials in a session of the farm's test
# The too-fast rule's limit for these 1-s sounds (3 s for DCASE's 4-s ones): the farm votes no
# faster than a careful listener, so that only its favouritism gives it away.
TOO_FAST_S = 1.5


def _voting_bot(browser: Browser, key: str, participant: str, own: list, errors: list) -> None:
    """One farm worker, start to end of its session over HTTP: both sides heard in real time,
    its system's side voted better on both questions, a side at random where it is on neither."""
    rng = random.Random(participant)
    try:
        assert browser.crowd(key, participant).status_code == 302
        assert browser.http.get(browser.path("consent/")).status_code == 200
        assert browser.post("consent/", {"agree": "yes"}).status_code == 302
        assert browser.post("instructions/", {}).status_code == 302
        session, examples = browser.examples()
        for token in examples:
            assert browser.listen(token, 1.0)["heard"]
        assert browser.post("start/", {"session": session}).status_code == 302
        while SIDES.search(browser.page()):
            form = _pair(browser)
            mine = {side: is_own(browser.sound(form[side]).content, own) for side in "ab"}
            for side in "ab":
                assert browser.listen(form[side], 1.0)["heard"]
            if mine["a"] != mine["b"]:
                winner = "left" if mine["a"] else "right"
            else:
                winner = rng.choice(["left", "right"])
            response = browser.post(
                "vote/",
                {"token": form["token"], "key": form["key"], "quality": winner, "fit": winner},
            )
            assert response.status_code == 303, response.text[:300]
    except Exception as exc:  # reported by the test: a thread's failure is the test's
        errors.append(exc)


def _honest_panel(challenge, n: int) -> None:
    """Invited raters voting through the services by the systems' true scores (the demo's),
    each with a taste of their own and ties now and then."""
    rng = np.random.default_rng(3)
    for k in range(n):
        rater = enrolment.invite(challenge, label=f"honest {k}")
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        taste = {
            s.pk: sum(demo._true_scores(s.name)) + rng.normal(0, 0.5)
            for s in System.objects.filter(challenge=challenge)
        }

        def choose(pair, taste=taste):
            left = taste[pair.left.stimulus.system_id]
            right = taste[pair.right.stimulus.system_id]
            if rng.random() < 0.15:
                return "tie", "tie"
            winner = "left" if rng.random() < 1 / (1 + np.exp(right - left)) else "right"
            return winner, winner

        while (session := sessions.next_session(rater).session) is not None:
            vote_session(rater, session, choose)


def _strength(section: dict, system: str) -> float:
    entries = section["tracks"]["A"]["systems"]
    return next(e["strength"] for e in entries if e["system"] == system)


def test_a_farm_voting_over_http_is_named_and_buys_no_strength(site, browser_at):
    challenge = build_pairs_challenge(
        slug="ab-farm",
        categories=1,
        clips_per_system=1,
        duration=1.0,
        pairs_per_session=FARM_PAIRS,
        familiarization_clips=1,
        target_votes=200,  # a session for every rater
        prepared=False,
    )
    # One track: every A/B trial of a session is one of its three systems' pairs.
    System.objects.filter(challenge=challenge, track__code="B").delete()
    preparation.pick_stimuli(challenge)
    preparation.prepare(challenge, seed=0)
    preparation.set_open(challenge, True)
    began = time.monotonic()
    favoured, farm = run_farm(site, browser_at, challenge, _voting_bot, FARM)
    print(f"farm: {FARM} bots voted over HTTP in {time.monotonic() - began:.0f} s")
    assert Vote.objects.filter(pair__session__rater__code__in=farm).count() == FARM * FARM_PAIRS
    _honest_panel(challenge, 12)

    inputs = services.collect_inputs(challenge)
    rules = dataclasses.replace(
        services.rules_for(challenge),
        bootstrap=0,
        rater_rules={"too_fast": {"min_median_answer_s": TOO_FAST_S}},
    )
    result = score_votes(inputs.pairs, inputs.teams, rules)
    named = {row["rater"]: row for row in result["favouritism"]["raters"]}
    assert farm <= set(named), named
    for code in farm:
        assert named[code]["system"] == favoured.name and named[code]["action"] == "exclude"
    assert len(set(named) - farm) <= 1, named
    assert {e["rater"] for e in result["excluded_sessions"]} == farm
    honest = score_votes([r for r in inputs.pairs if r["rater"] not in farm], inputs.teams, rules)
    off = dataclasses.replace(
        rules,
        rater_rules={**rules.rater_rules, "favouritism": {"action": "off", "crowd_action": "off"}},
    )
    bought = score_votes(inputs.pairs, inputs.teams, off)
    print(
        f"farm: {favoured.name}'s strength {_strength(honest, favoured.name):+.2f} honestly, "
        f"{_strength(bought, favoured.name):+.2f} bought without the rule, "
        f"{_strength(result, favoured.name):+.2f} with it"
    )
    assert _strength(bought, favoured.name) > _strength(honest, favoured.name)
    assert result["tracks"] == honest["tracks"]
