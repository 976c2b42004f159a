"""Publishing closes the listening test for good: answers after it are refused with the reason,
raters see a clear page, the test cannot reopen, and publishing again gives the same numbers."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from raters import enrolment, preparation, sessions
from raters.errors import ListeningError
from raters.models import ListeningTest, Rating
from scoring import services
from scoring.inputs import ScoringInputError
from stimuli.models import Challenge
from tests.listening_setup import answer_session, build_listening_challenge

pytestmark = pytest.mark.django_db


@pytest.fixture
def rated(db):
    challenge = build_listening_challenge(slug="closing", categories=2, target_ratings=5)
    preparation.set_open(challenge, True)
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    for n in range(4):
        rater = enrolment.invite(challenge, label=f"r{n}")
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        while (step := sessions.next_session(rater)).session is not None:
            answer_session(rater, step.session, quality=3 + n, fit=4 + n)
    # A rater in the middle of a session, in a browser.
    client = Client()
    late = enrolment.invite(challenge, label="late")
    client.get(f"/listen/{challenge.slug}/join/{late.access_key}/")
    client.post(f"/listen/{challenge.slug}/consent/", {"agree": "yes"})
    client.post(f"/listen/{challenge.slug}/instructions/")
    session = late.sessions.get()
    sessions.complete_familiarization(session, require_heard=False)
    return challenge, client, late


def test_publishing_closes_the_test_and_answers_after_it_are_refused(rated, organizer):
    challenge, client, late = rated
    page = client.get(f"/listen/{challenge.slug}/").content.decode()
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    key = re.search(r'name="key" value="([^"]+)"', page).group(1)

    services.publish(challenge, organizer)
    assert not ListeningTest.objects.get(challenge=challenge).is_open
    assert Challenge.objects.get(pk=challenge.pk).phase == Challenge.Phase.PUBLISHED

    # The rater's answer, sent from the page shown before, is refused with the reason.
    response = client.post(
        f"/listen/{challenge.slug}/rate/", {"token": token, "key": key, "quality": 5, "fit": 5}
    )
    assert response.status_code == 409
    assert "has ended and its results are published" in response.content.decode()
    with pytest.raises(ListeningError, match="results are published"):
        sessions.save_rating(late, token, quality=5, fit=5, key="after-publication")
    assert not Rating.objects.filter(trial__session__rater=late).exists()
    # The rater's page says so, with the way to the results; no trial is shown.
    page = client.get(f"/listen/{challenge.slug}/").content.decode()
    assert 'id="closed"' in page and "results are published" in page
    assert 'name="token"' not in page and f"/results/{challenge.slug}/" in page
    # The test cannot reopen, and the organizer's button says why before any click.
    with pytest.raises(ListeningError, match="stays closed"):
        preparation.set_open(challenge, True)
    organizer_client = Client()
    organizer_client.force_login(organizer)
    page = organizer_client.get(f"/organize/{challenge.slug}/listen/").content.decode()
    assert re.search(r'<button type="submit" id="open-test" disabled', page)
    assert "Results are published, so the listening test stays closed" in page
    response = organizer_client.post(f"/organize/{challenge.slug}/listen/open/", {"open": "1"})
    assert not ListeningTest.objects.get(challenge=challenge).is_open


def test_republishing_without_new_ratings_gives_the_same_numbers(rated, organizer):
    challenge, _, _ = rated
    first = services.publish(challenge, organizer)
    second = services.publish(challenge, organizer)
    assert second.number == first.number + 1
    assert second.input_hashes == first.input_hashes
    assert second.result == first.result


def test_a_refused_publication_leaves_the_test_open(organizer):
    challenge = build_listening_challenge(slug="refused", categories=2)
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    # Every check misrated: nothing can be ranked, so nothing is published.
    answer_session(rater, sessions.next_session(rater).session)
    from raters.models import Rating as R

    R.objects.exclude(trial__role="trial").update(quality=10, fit=10)
    with pytest.raises(
        ScoringInputError, match=r"^no system has ratings .*\(\d+ sessions? excluded"
    ):
        services.publish(challenge, organizer)
    assert ListeningTest.objects.get(challenge=challenge).is_open
    assert Challenge.objects.get(pk=challenge.pk).phase != Challenge.Phase.PUBLISHED
