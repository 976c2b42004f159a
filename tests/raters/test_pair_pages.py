"""The A/B trial page over HTTP: two players named A and B (tokens only: no system, team or
anchor), a vote refused until the server heard both sides, stored once, and the page resumed
where the rater left it. The clock is the test's, so nothing sleeps."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from raters import enrolment, preparation, sessions
from raters.models import ListeningTest, Pair, Stimulus, Vote
from stimuli.models import System, Team
from tests.pairs_setup import build_pairs_challenge
from tests.raters.test_listening import listen

pytestmark = pytest.mark.django_db

DURATION = 2.0  # as `listen` plays it


@pytest.fixture
def pairs(db):
    challenge = build_pairs_challenge(
        slug="ab-pages", duration=DURATION, familiarization_clips=2, pairs_per_session=3
    )
    # Names long enough that finding one in a page means it is there.
    for system in System.objects.filter(challenge=challenge).select_related("team"):
        system.name = f"hidden-system-{system.pk}"
        system.save(update_fields=["name"])
        Team.objects.filter(pk=system.team_id).update(name=f"Hidden team {system.team_id}")
    preparation.set_open(challenge, True)
    return challenge


def _at_first_pair(challenge, clock) -> tuple[Client, object]:
    client = Client()
    rater = enrolment.invite(challenge, label="ab")
    slug = challenge.slug
    client.get(f"/listen/{slug}/join/{rater.access_key}/")
    client.post(f"/listen/{slug}/consent/", {"agree": "yes"})
    client.post(f"/listen/{slug}/instructions/")
    session = rater.sessions.get()
    for clip in session.familiarization.all():
        assert listen(client, slug, clip.token, clock)["heard"]
    assert client.post(f"/listen/{slug}/start/", {"session": session.pk}).status_code == 302
    return client, rater


def _form(page: str) -> dict:
    return {
        "token": re.search(r'name="token" value="([^"]+)"', page).group(1),
        "key": re.search(r'name="key" value="([^"]+)"', page).group(1),
        "sides": re.findall(r'<audio id="sound-[ab]"[^>]*data-token="([^"]+)"', page),
    }


def test_the_page_names_a_and_b_and_nothing_behind_them(pairs, clock):
    client, _ = _at_first_pair(pairs, clock)
    page = client.get(f"/listen/{pairs.slug}/").content.decode()
    form = _form(page)
    pair = Pair.objects.select_related("left", "right").get(token=form["token"])
    assert form["sides"] == [pair.left.token, pair.right.token]
    assert "Sound A" in page and "Sound B" in page and "Pair 1 of 3" in page
    for value in ("A is better", "Neither is better", "B is better"):
        assert value in page
    # Only tokens: no system, team or anchor a rater could look up.
    assert "hidden-system" not in page and "Hidden team" not in page and "anchor" not in page
    for stimulus in Stimulus.objects.select_related("system"):
        assert stimulus.system.public_id not in page and stimulus.code not in page
    # The next A/B trial's two sounds are preloaded, as the sliders' next sound is.
    following = Pair.objects.select_related("left", "right").get(session=pair.session, position=1)
    assert f"/audio/{following.left.token}/" in page and f"/audio/{following.right.token}/" in page


def test_a_vote_before_both_sides_were_heard_is_refused_then_stored_once(pairs, clock):
    client, _ = _at_first_pair(pairs, clock)
    slug = pairs.slug
    form = _form(client.get(f"/listen/{slug}/").content.decode())
    vote = {"token": form["token"], "key": form["key"], "quality": "right", "fit": "tie"}
    response = client.post(f"/listen/{slug}/vote/", vote)
    assert response.status_code == 409
    assert "Sound A: Please listen to the sound before rating it." in response.content.decode()
    listen(client, slug, form["sides"][0], clock)
    response = client.post(f"/listen/{slug}/vote/", vote, HTTP_ACCEPT="application/json")
    assert response.status_code == 409
    assert response.json()["detail"] == "Sound B: Please listen to the sound before rating it."
    # A reload resumes at the same A/B trial, A still counted as heard.
    page = client.get(f"/listen/{slug}/").content.decode()
    assert _form(page)["token"] == form["token"]
    assert re.search(r'<audio id="sound-a"[^>]*data-heard', page)
    assert not re.search(r'<audio id="sound-b"[^>]*data-heard', page)
    listen(client, slug, form["sides"][1], clock)
    response = client.post(f"/listen/{slug}/vote/", vote)
    assert response.status_code == 303
    again = client.post(f"/listen/{slug}/vote/", vote, HTTP_ACCEPT="application/json")
    assert again.json() == {"created": False, "quality": "right", "fit": "tie"}
    stored = Vote.objects.get()
    assert (stored.quality, stored.fit) == ("right", "tie")
    assert stored.pair.token == form["token"]
    page = client.get(f"/listen/{slug}/").content.decode()
    assert "Pair 2 of 3" in page and _form(page)["token"] != form["token"]


def test_a_slider_answer_to_a_side_is_refused(pairs, clock):
    client, _ = _at_first_pair(pairs, clock)
    form = _form(client.get(f"/listen/{pairs.slug}/").content.decode())
    listen(client, pairs.slug, form["sides"][0], clock)
    response = client.post(
        f"/listen/{pairs.slug}/rate/",
        {"token": form["sides"][0], "key": form["key"], "quality": "5", "fit": "5"},
    )
    assert response.status_code == 409 and "votes on A/B trials" in response.content.decode()


def test_the_organizer_chooses_the_design_until_raters_begin(organizer_client):
    challenge = build_pairs_challenge(slug="ab-settings", categories=1, design="sliders")
    url = f"/organize/{challenge.slug}/listen/"
    data = {
        "categories_min": 1, "categories_max": 4, "crowd_categories": 1, "target_ratings": 10,
        "anchors_per_session": 12, "familiarization_clips": 6, "loudness_alignment": "on",
        "target_lufs": -27, "diversity_gap_s": 0.5, "listened_fraction": 0.9,
        "completion_url": "", "completion_code": "RUN-1", "consent_text": "",
        "instructions_text": "",
    }  # fmt: skip
    page = organizer_client.get(url).content.decode()
    assert 'name="design"' in page and 'name="pairs_per_session"' in page
    # A form without the pairs design's settings keeps the test's own.
    assert organizer_client.post(url, data).status_code == 302
    test = ListeningTest.objects.get(challenge=challenge)
    assert (test.design, test.pairs_per_session) == ("sliders", 6)
    choice = {**data, "design": "pairs", "pairs_per_session": 4, "target_votes": 3}
    assert organizer_client.post(url, choice).status_code == 302
    test.refresh_from_db()
    assert (test.design, test.pairs_per_session, test.target_votes) == ("pairs", 4, 3)
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    sessions.next_session(rater)
    response = organizer_client.post(url, {**choice, "design": "sliders"})
    assert response.status_code == 400
    (error,) = re.findall(r"errorlist[^>]*><li>(.*?)</li>", response.content.decode())
    assert error.startswith("Design, ") and "cannot change once raters have begun" in error
