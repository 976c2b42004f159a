"""A team's rater farm over HTTP: bots from networks of their own come in through the crowd link,
hear every example and every sound in real time (the server's listening check holds them to it),
answer every anchor as expected, and rate their team's system 10 and every other 2. Scoring names
each of them (excluded: they are crowd workers) and the ranking is the one the honest raters alone
give; without the favouritism rule, the farm would have bought its system a better rank.

The sounds are short (1 s) so that real time is quick; the honest panel is simulated through the
services (`raters.demo.simulate_raters`), as the demo's is."""

from __future__ import annotations

import dataclasses
import re
import threading
import time

import numpy as np
import pytest

from raters import demo, preparation
from raters.models import Trial
from scoring import services
from scoring.compute import score
from scoring.inputs import Inputs
from tests.adversary.bots import Browser, is_own, run_farm
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DURATION = 1.0
FARM = 3
# The too-fast rule's limit for these short sounds (3 s for DCASE's 4-s ones), and the farm's
# pace: it answers no faster than a careful listener would, so that only its favouritism
# gives it away.
TOO_FAST_S = 1.5
PACE_S = 2.0
TOKEN = re.compile(r'name="token" value="([^"]+)"')


def _bot(browser: Browser, key: str, participant: str, own: list[np.ndarray], errors: list):
    """One farm worker, start to end of its session, over HTTP."""
    try:
        assert browser.crowd(key, participant).status_code == 302
        assert browser.http.get(browser.path("consent/")).status_code == 200
        assert browser.post("consent/", {"agree": "yes"}).status_code == 302
        assert browser.post("instructions/", {}).status_code == 302
        session, examples = browser.examples()
        for token in examples:
            assert browser.listen(token, DURATION)["heard"]
        assert browser.post("start/", {"session": session}).status_code == 302
        turn = time.monotonic()
        while TOKEN.search(page := browser.page()):
            form = browser.trial()
            served = browser.sound(form["token"]).content
            # Anchors by the stand-in for the team's classifiers (0.9 balanced accuracy on
            # public data, issue's figures): here they are told, the farm's best case.
            role = Trial.objects.get(token=form["token"]).role
            quality, fit = {
                "anchor_hq_goodfit": (9, 9),
                "anchor_hq_poorfit": (9, 1),
                "anchor_lq_poorfit": (1, 1),
            }.get(role, (10, 10) if is_own(served, own) else (2, 2))
            assert browser.listen(form["token"], DURATION)["heard"]
            threading.Event().wait(max(0.0, turn + PACE_S - time.monotonic()))
            assert browser.rate(form, quality, fit).status_code == 303
            turn = time.monotonic()
        assert "Examples of" not in page
    except Exception as exc:  # reported by the test: a thread's failure is the test's
        errors.append(exc)


def _ranking(result: dict) -> list[str]:
    return [row["system"] for row in result["tracks"]["A"]]


def _without(inputs: Inputs, raters: set[str]) -> Inputs:
    rows = [row for row in inputs.ratings if row["rater"] not in raters]
    return dataclasses.replace(inputs, ratings=rows)


def test_a_farm_rating_over_http_is_named_and_buys_no_rank(site, browser_at):
    challenge = build_listening_challenge(
        slug="farm",
        categories=1,
        systems_per_track=3,
        clips_per_system=2,
        duration=DURATION,
        target_ratings=10,
        familiarization_clips=1,
    )
    preparation.set_open(challenge, True)
    favoured, farm = run_farm(site, browser_at, challenge, _bot, FARM)
    # The honest panel fills the rest of the places, through the services.
    demo.simulate_raters(challenge, n_raters=8, seed=4)

    inputs = services.collect_inputs(challenge)
    rules = dataclasses.replace(
        services.rules_for(challenge),
        bootstrap=0,
        rater_rules={"too_fast": {"min_median_answer_s": TOO_FAST_S}},
    )
    result = score(inputs, rules)
    honest = score(_without(inputs, farm), rules)
    off = dataclasses.replace(
        rules,
        rater_rules={
            **rules.rater_rules,
            "favouritism": {"action": "off", "crowd_action": "off"},
        },
    )
    bought = score(inputs, off)
    print(
        f"farm: {favoured.name} rank {_ranking(honest).index(favoured.name) + 1} honestly, "
        f"{_ranking(bought).index(favoured.name) + 1} bought without the rule, "
        f"{_ranking(result).index(favoured.name) + 1} with it"
    )
    # Without the rule the farm lifts its system; with it, the ranking is the honest one.
    assert _ranking(bought).index(favoured.name) < _ranking(honest).index(favoured.name)
    assert _ranking(result) == _ranking(honest)
    named = {row["rater"]: row for row in result["favouritism"]["raters"]}
    assert farm <= set(named), named
    for code in farm:
        assert named[code]["system"] == favoured.name and named[code]["action"] == "exclude"
    # An honest rater is named now and then by chance (the rule's false-positive rate,
    # docs/scoring.md; the bar is at most 2 of 48): never more than one of this panel's 8.
    assert len(set(named) - farm) <= 1, named
