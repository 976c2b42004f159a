"""A crowd link no one can hog: a session holds a place only once its examples were heard, a
burst of throw-away participant ids is turned away without touching the places, and one network
brings a few ids only; a worker the server accepted no answer from gets no completion code. And
the cheapest strategy, 5 everywhere, is excluded by default."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from raters import enrolment, preparation, selectors, sessions
from raters.models import CategorySession, Rater
from tests.listening_setup import answer_session, build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _worker(
    browser_at, site, challenge, participant: str, *, instructions: bool = True, address: str = ""
):
    browser = browser_at(site, challenge.slug, address)
    test = selectors.listening_test(challenge)
    arrived = browser.crowd(test.crowd_key, participant)
    assert arrived.status_code == 302, arrived.text[:500]
    assert browser.http.get(browser.path("consent/")).status_code == 200  # the CSRF cookie
    assert browser.post("consent/", {"agree": "yes"}).status_code == 302
    if instructions:
        assert browser.post("instructions/", {}).status_code == 302
    return browser


def _farm_address(n: int) -> str:
    """A bot's source address, each in a network (/24) of its own."""
    return f"127.{1 + n // 200}.{n % 200}.7"


def test_sessions_that_heard_nothing_hold_no_place(site, browser_at):
    challenge = build_listening_challenge(
        slug="hogged", categories=2, clips_per_system=1, target_ratings=2, categories_min=1
    )
    preparation.set_open(challenge, True)
    # A genuine worker arrives while places are left, and reads the instructions...
    genuine = _worker(browser_at, site, challenge, "genuine", instructions=False)
    # ... while throw-away workers, each from a network of its own, open more sessions than
    # there are places and play nothing.
    for n in range(6):
        page = _worker(browser_at, site, challenge, f"hog{n}", address=_farm_address(n)).page()
        assert "Examples of" in page
    assert CategorySession.objects.count() == 6
    # Sessions that heard nothing hold nothing: the genuine worker still gets one.
    genuine.post("instructions/", {})
    assert "Examples of" in genuine.page()
    # Once its examples are heard, the genuine worker's session holds its place; the idle
    # ones still hold none.
    session = CategorySession.objects.get(rater__participant_id="genuine")
    sessions.complete_familiarization(session, require_heard=False)
    need = sessions.category_need(challenge)
    assert need[session.category_id] == 1 and sum(need.values()) == 3


def test_a_burst_of_throw_away_ids_is_turned_away_and_the_places_stay_free(site, browser_at):
    challenge = build_listening_challenge(
        slug="burst", categories=2, clips_per_system=1, target_ratings=2, categories_min=1
    )
    preparation.set_open(challenge, True)
    test = selectors.listening_test(challenge)
    free = sum(sessions.category_need(challenge).values())
    admitted, busy = 0, 0
    # 70 participant ids from 70 networks in one burst, none of them listening.
    for n in range(70):
        browser = browser_at(site, challenge.slug, _farm_address(n))
        response = browser.crowd(test.crowd_key, f"burst{n}")
        if response.status_code == 302:
            admitted += 1
        else:  # turned away by the admission, or by the proxy's limit on the link's rate
            assert (
                response.status_code == 409 and "starting this study right now" in response.text
            ) or response.status_code == 429, response.text[:300]
            assert "full" not in response.text
            busy += 1
    assert admitted == max(enrolment.ADMIT_AT_LEAST, enrolment.ADMIT_PER_PLACE * free) < 70
    assert busy == 70 - admitted
    assert Rater.objects.filter(challenge=challenge).count() == admitted
    # None of them holds a place, and when the window has passed a genuine worker is let in
    # and given a category.
    assert sum(sessions.category_need(challenge).values()) == free
    Rater.objects.filter(challenge=challenge).update(
        created_at=timezone.now() - enrolment.ADMISSION_WINDOW - timedelta(seconds=1)
    )
    assert "Examples of" in _worker(browser_at, site, challenge, "genuine").page()


def test_one_network_brings_a_few_participant_ids_only(site, browser_at, settings):
    challenge = build_listening_challenge(
        slug="one-network", categories=2, clips_per_system=1, target_ratings=20
    )
    preparation.set_open(challenge, True)
    test = selectors.listening_test(challenge)
    limit = settings.FOLEY_CROWD_IDS_PER_NETWORK
    for n in range(limit):  # five hosts of one /24
        _worker(browser_at, site, challenge, f"same-net{n}", address=f"127.0.9.{n + 1}")
    refused = browser_at(site, challenge.slug, "127.0.9.200").crowd(test.crowd_key, "one-more")
    assert refused.status_code == 409 and "from your network" in refused.text
    assert not Rater.objects.filter(participant_id="one-more").exists()
    # The next network is let in.
    assert (
        "Examples of"
        in _worker(browser_at, site, challenge, "elsewhere", address="127.0.10.1").page()
    )
    assert set(Rater.objects.filter(challenge=challenge).values_list("network", flat=True)) == {
        "127.0.9.0/24",
        "127.0.10.0/24",
    }


def test_a_worker_with_no_answer_accepted_gets_no_completion_code(site, browser_at):
    challenge = build_listening_challenge(
        slug="no-code", categories=1, clips_per_system=1, target_ratings=1, categories_min=1
    )
    preparation.set_open(challenge, True)
    test = selectors.listening_test(challenge)
    genuine = _worker(browser_at, site, challenge, "genuine", instructions=False)
    # An invited listener fills the only place: hears the examples and answers the session.
    listener = enrolment.invite(challenge)
    enrolment.record_consent(listener)
    enrolment.record_instructions(listener)
    answer_session(listener, sessions.next_session(listener).session)
    # The test is full: a new worker is refused at the link, before any row is made.
    refused = browser_at(site, challenge.slug, _farm_address(2)).crowd(
        test.crowd_key, "turned-away"
    )
    assert refused.status_code >= 400 and "full" in refused.text
    assert not Rater.objects.filter(participant_id="turned-away").exists()
    # The genuine worker is given nothing to rate: finishing gives no completion code, and the
    # study is to be returned instead.
    genuine.post("instructions/", {})
    assert "Examples of" not in genuine.page()
    end = genuine.post("finish/", {})
    page = genuine.page() if end.status_code in (302, 303) else end.text
    assert "completion-code" not in page and "Return submission" in page, page[:2000]


@pytest.mark.parametrize("kind", ["crowd", "invited"])
def test_five_everywhere_is_excluded_by_default(kind):
    challenge = build_listening_challenge(slug=f"five-{kind}", categories=2)
    preparation.set_open(challenge, True)
    if kind == "crowd":
        test = selectors.listening_test(challenge)
        rater = enrolment.enrol_crowd(challenge, test.crowd_key, participant_id="lazy")
    else:
        rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    while (trial := sessions.next_trial(session)) is not None:
        sessions.save_rating(rater, trial.token, quality=5, fit=5, key=f"k-{trial.token}")
    session.refresh_from_db()
    assert session.excluded
    # An honest rater in the same test is not.
    honest = enrolment.invite(challenge)
    enrolment.record_consent(honest)
    enrolment.record_instructions(honest)
    kept = sessions.next_session(honest).session
    answer_session(honest, kept)
    kept.refresh_from_db()
    assert not kept.excluded
