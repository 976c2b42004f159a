"""A crowd link no one can hog: sessions opened through it and left unanswered stop holding
their places within minutes, so genuine workers get them; a worker the server accepted no answer
from gets no completion code. And the cheapest strategy, 5 everywhere, is excluded by default."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from raters import enrolment, preparation, selectors, sessions
from raters.models import CategorySession, Rater
from tests.listening_setup import answer_session, build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _worker(browser_at, site, challenge, participant: str, *, instructions: bool = True):
    browser = browser_at(site, challenge.slug)
    test = selectors.listening_test(challenge)
    assert browser.crowd(test.crowd_key, participant).status_code == 302
    assert browser.http.get(browser.path("consent/")).status_code == 200  # the CSRF cookie
    assert browser.post("consent/", {"agree": "yes"}).status_code == 302
    if instructions:
        assert browser.post("instructions/", {}).status_code == 302
    return browser


def test_unanswered_crowd_sessions_stop_holding_places(site, browser_at):
    challenge = build_listening_challenge(
        slug="hogged", categories=2, clips_per_system=1, target_ratings=2, categories_min=1
    )
    preparation.set_open(challenge, True)
    test = selectors.listening_test(challenge)
    # A genuine worker arrives while places are left, and reads the instructions...
    genuine = _worker(browser_at, site, challenge, "genuine", instructions=False)
    # ... while throw-away workers take every place and answer nothing.
    for n in range(4):
        assert "Examples of" in _worker(browser_at, site, challenge, f"hog{n}").page()
    assert CategorySession.objects.count() == 4
    # The test is full: a new worker is refused at the link, before any row is made.
    refused = browser_at(site, challenge.slug).crowd(test.crowd_key, "turned-away")
    assert refused.status_code >= 400 and "full" in refused.text
    assert not Rater.objects.filter(participant_id="turned-away").exists()
    # The genuine worker is given nothing to rate: finishing gives no completion code, and the
    # study is to be returned instead.
    genuine.post("instructions/", {})
    assert "Examples of" not in genuine.page()
    end = genuine.post("finish/", {})
    page = genuine.page() if end.status_code in (302, 303) else end.text
    assert "completion-code" not in page and "Return submission" in page, page[:2000]
    # Ten minutes without a first answer: the places are free again.
    CategorySession.objects.update(created_at=timezone.now() - timedelta(minutes=11))
    assert "Examples of" in _worker(browser_at, site, challenge, "late").page()


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
