"""Interim snapshots beside final results: an interim one leaves the listening test open, is
labelled interim, and may be kept for organizers, whom alone it then exists for (pages, plots,
downloads, the API); final results close the test, after which no interim snapshot is made."""

from __future__ import annotations

import pytest
from django.test import Client

from raters import preparation
from raters.models import ListeningTest
from scoring import services
from scoring.inputs import ScoringInputError
from scoring.models import Snapshot
from stimuli.models import Challenge
from tests.listening_setup import build_listening_challenge
from tests.simulate import simulate

pytestmark = pytest.mark.django_db


@pytest.fixture
def open_test(db):
    challenge = build_listening_challenge(slug="interim", categories=2)
    preparation.set_open(challenge, True)
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    return challenge, simulate(systems_per_track=3, categories=2, sounds=4, raters=6, seed=5)


def _is_open(challenge: Challenge) -> bool:
    return ListeningTest.objects.get(challenge=challenge).is_open


def snapshot_urls(slug: str, number: int) -> list[str]:
    return [
        f"/results/{slug}/{number}/",
        f"/results/{slug}/{number}/track/A/",
        f"/results/{slug}/{number}/track/A/scores.svg",
        f"/results/{slug}/{number}/download/result.json",
        f"/api/results/{slug}/snapshots/{number}/",
        f"/api/results/{slug}/snapshots/{number}/leaderboards/A/",
    ]


def test_an_interim_snapshot_for_organizers_leaves_the_test_open_and_exists_for_them_alone(
    open_test, organizer, rater_user
):
    challenge, sim = open_test
    snap = services.publish(challenge, organizer, sim.inputs, final=False, public=False)
    assert (snap.number, snap.final, snap.public) == (1, False, False)
    assert _is_open(challenge)
    assert Challenge.objects.get(pk=challenge.pk).phase != Challenge.Phase.PUBLISHED

    for user in (None, rater_user):
        viewer = Client()
        if user:
            viewer.force_login(user)
        assert viewer.get(f"/results/{challenge.slug}/").status_code == 404
        for url in snapshot_urls(challenge.slug, 1):
            assert viewer.get(url).status_code == 404, url
        assert challenge.name not in viewer.get("/results/").content.decode()
        assert viewer.get(f"/api/results/{challenge.slug}/snapshots/").status_code == 404

    organizer_client = Client()
    organizer_client.force_login(organizer)
    response = organizer_client.get(f"/results/{challenge.slug}/", follow=True)
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == f"/results/{challenge.slug}/1/"
    assert "interim results" in page and 'id="interim-notice"' in page
    assert "Only organizers see this snapshot." in page


def test_a_public_interim_snapshot_is_labelled_and_the_final_one_closes_the_test(
    open_test, organizer, client
):
    challenge, sim = open_test
    services.publish(challenge, organizer, sim.inputs, final=False, public=True)
    assert _is_open(challenge)
    page = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert 'id="interim-notice"' in page and "these numbers will change" in page
    assert "Only organizers" not in page
    listed = client.get(f"/api/results/{challenge.slug}/snapshots/").json()["results"]
    assert [(s["number"], s["final"]) for s in listed] == [(1, False)]

    final = services.publish(challenge, organizer, sim.inputs)
    assert (final.number, final.final, final.public) == (2, True, True)
    assert not _is_open(challenge)
    page = client.get(f"/results/{challenge.slug}/2/").content.decode()
    assert 'id="interim-notice"' not in page and "1</a> (interim)" in page
    with pytest.raises(ScoringInputError, match="results are final"):
        services.publish(challenge, organizer, sim.inputs, final=False)
    with pytest.raises(ScoringInputError, match="final results are public"):
        services.publish(challenge, organizer, sim.inputs, final=True, public=False)
    assert Snapshot.objects.count() == 2


def test_the_confirmation_says_what_closes_and_what_stays(open_test, organizer_client):
    challenge, _ = open_test
    page = organizer_client.get(f"/results/{challenge.slug}/publish/").content.decode()
    assert "Stays open:" in page and "Closes for good:" in page
    assert "0 sessions in progress" in page
    assert "Close the test and publish final results" in page
    assert Snapshot.objects.count() == 0
