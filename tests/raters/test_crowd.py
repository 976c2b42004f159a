"""Crowd runs that fit the crowd platforms: one category per crowd worker by default, the total
time before consent and on the organizer's page, a closed or full test refused at the link with
the platform's "return" instruction, and participant ids for organizers only (monitoring, the
ratings export, the progress API, the approve/reject CSV in Prolific's terms)."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from raters import enrolment, preparation, selectors, sessions
from raters.models import ListeningTest, Rater, Rating
from raters.workload import workload
from tests.listening_setup import answer_session, build_listening_challenge

pytestmark = pytest.mark.django_db

CROWD_HEADER = (
    "participant_id,submission_id,study_id,action,rejection_category,message,rater,"
    "categories_done,checks_misrated"
)


@pytest.fixture
def run(db):
    challenge = build_listening_challenge(
        slug="crowd-run",
        completion_url="https://example.org/done?cc=ABC",
        listened_fraction=0.0,
        anchors_per_session=3,
    )
    preparation.set_open(challenge, True)
    return challenge


def _link(challenge, participant: str, session: str = "") -> str:
    key = selectors.listening_test(challenge).crowd_key
    return f"/listen/{challenge.slug}/crowd/{key}/?PROLIFIC_PID={participant}&STUDY_ID=st-1&SESSION_ID={session or participant + '-s'}"


def _worker(challenge, participant: str) -> tuple[Client, Rater]:
    client = Client()
    assert client.get(_link(challenge, participant)).status_code == 302
    return client, Rater.objects.get(challenge=challenge, participant_id=participant)


def test_a_crowd_worker_rates_one_category_and_is_told_the_total_time_before_consent(run):
    client, rater = _worker(run, "PID0001aa")
    test = selectors.listening_test(run)
    expected = workload(run, test, 1)
    page = client.get(f"/listen/{run.slug}/consent/").content.decode()
    assert f"The study takes about {expected.total_minutes} minutes in all" in page
    assert "1 sound category of about" in page
    # No way off the page: neither the site's results nor its login.
    assert "/results/" not in page and "Log in" not in page
    client.post(f"/listen/{run.slug}/consent/", {"agree": "yes"})
    page = client.get(f"/listen/{run.slug}/instructions/").content.decode()
    assert "You will rate 1 category." in page
    client.post(f"/listen/{run.slug}/instructions/")
    # A refusal in the middle of the test is a rater's page too: no way off it.
    refused = client.post(f"/listen/{run.slug}/finish/")
    assert refused.status_code == 409 and b"finish the category" in refused.content
    assert b"/results/" not in refused.content and b"Log in" not in refused.content
    answer_session(rater, rater.sessions.get())
    # One category, then done: no second one is assigned, and finishing is allowed.
    assert sessions.next_session(rater).reason == "max"
    response = client.post(f"/listen/{run.slug}/finish/")
    # The end page on this site (the CSP's form-action forbids a form's redirect elsewhere),
    # which shows the code and leaves for the platform by a link and a refresh.
    assert response.status_code == 303 and response.url == f"/listen/{run.slug}/"
    page = client.get(response.url).content.decode()
    assert 'content="3;url=https://example.org/done?cc=ABC"' in page
    # An invited listener still rates the test's minimum.
    listener = enrolment.invite(run)
    assert sessions.categories_for(listener, test) == (test.categories_min, test.categories_max)


def test_the_organizer_sees_the_expected_time_to_enter_on_the_platform(run, organizer_client):
    ListeningTest.objects.filter(challenge=run).update(crowd_categories=2)
    test = selectors.listening_test(run)
    page = organizer_client.get(f"/organize/{run.slug}/listen/").content.decode()
    minutes = workload(run, test, 2).total_minutes
    assert f'<strong id="crowd-minutes">{minutes} minutes</strong>' in page
    assert "Each crowd worker rates 2 categories" in page
    # Two categories take longer than one, by one category's time.
    one, two = workload(run, test, 1), workload(run, test, 2)
    assert two.total_s - one.total_s == pytest.approx(one.per_category_s)


@pytest.mark.parametrize("why", ["closed", "full"])
def test_a_closed_or_full_test_refuses_at_the_crowd_link_with_the_return_instruction(run, why):
    if why == "closed":
        preparation.set_open(run, False)
    else:
        # One good session per category meets a target of one rating per sound.
        ListeningTest.objects.filter(challenge=run).update(target_ratings=1)
        for _ in range(run.categories.count()):
            listener = enrolment.invite(run)
            enrolment.record_consent(listener)
            enrolment.record_instructions(listener)
            answer_session(listener, sessions.next_session(listener).session)
        assert not any(sessions.category_need(run).values())
    response = Client().get(_link(run, "PIDlate01"))
    page = response.content.decode()
    assert response.status_code == 409
    assert ("This study is closed." if why == "closed" else "This study is full") in page
    assert "return your submission" in page and "not been enrolled" in page
    assert "Back to the listening test" not in page and "Log in" not in page
    assert not Rater.objects.filter(participant_id="PIDlate01").exists()


def test_a_worker_already_enrolled_comes_back_to_a_closed_test_without_a_refusal(run):
    client, _ = _worker(run, "PIDearly1")
    preparation.set_open(run, False)
    response = client.get(_link(run, "PIDearly1"))
    assert response.status_code == 302  # to their own page, which says the test is paused


def test_participant_ids_for_organizers_and_the_approve_reject_csv(
    run, organizer_client, api_client, rater_user
):
    ListeningTest.objects.filter(challenge=run).update(categories_min=1)
    good_client, good = _worker(run, "PIDgood001")
    _, careless = _worker(run, "PIDbad0002")
    _, unfinished = _worker(run, "PIDhalf003")
    for rater in (good, careless, unfinished):
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
    answer_session(good, sessions.next_session(good).session)
    # Answered at a person's pace (the test's own answers come within milliseconds, which the
    # rules take for a worker clicking through).
    Rating.objects.filter(trial__session__rater=good).update(answer_s=6.0)
    good_client.post(f"/listen/{run.slug}/finish/")
    answer_session(careless, sessions.next_session(careless).session)
    # Every hidden check of the careless worker misrated: the session is excluded.
    Rating.objects.filter(trial__session__rater=careless).exclude(trial__role="trial").update(
        quality=10, fit=10
    )
    sessions.next_session(unfinished)
    invited = enrolment.invite(run)

    monitor = organizer_client.get(f"/organize/{run.slug}/listen/").content.decode()
    assert all(pid in monitor for pid in ("PIDgood001", "PIDbad0002", "PIDhalf003"))
    ratings = organizer_client.get(f"/organize/{run.slug}/listen/ratings.csv")
    rows = list(csv.DictReader(io.StringIO(ratings.content.decode())))
    by_rater = {row["rater"]: row["participant_id"] for row in rows}
    assert by_rater[good.code] == "PIDgood001" and by_rater[careless.code] == "PIDbad0002"
    api_rows = api_client.get(f"/api/listen/challenges/{run.slug}/ratings/").json()
    assert {r["participant_id"] for r in api_rows} == {"PIDgood001", "PIDbad0002"}
    progress = api_client.get(f"/api/listen/challenges/{run.slug}/progress/").json()
    ids = {r["rater"]: r["participant_id"] for r in progress["raters"]}
    assert ids[good.code] == "PIDgood001" and ids[invited.code] == ""

    text = organizer_client.get(f"/organize/{run.slug}/listen/crowd.csv").content.decode()
    lines = text.splitlines()
    assert lines[0] == CROWD_HEADER
    decisions = {row["participant_id"]: row for row in csv.DictReader(io.StringIO(text))}
    assert set(decisions) == {"PIDgood001", "PIDbad0002", "PIDhalf003"}  # crowd workers only
    assert decisions["PIDgood001"]["action"] == "APPROVE"
    assert decisions["PIDgood001"]["submission_id"] == "PIDgood001-s"
    # Misrated hidden anchors are no ground Prolific accepts for a rejection: approved, the
    # answers left out, and the message says why.
    assert decisions["PIDbad0002"]["action"] == "APPROVE"
    assert decisions["PIDbad0002"]["rejection_category"] == ""
    assert decisions["PIDbad0002"]["message"].startswith(
        "Approve, though the answers are not used: 2 of 3 hidden anchors misrated, 1 of 1 "
        "category excluded. Prolific permits rejection only"
    )
    assert decisions["PIDhalf003"]["action"] == ""
    assert decisions["PIDhalf003"]["message"].startswith("Not finished")
    api = api_client.get(f"/api/listen/challenges/{run.slug}/crowd/?format=csv")
    assert api.status_code == 200 and api.content.decode().splitlines() == lines

    # A crowd worker (by their cookie), a participant account and the public: 403, and the
    # worker's own pages never show an id.
    logged_in = Client()
    logged_in.force_login(rater_user)
    for viewer in (good_client, logged_in, Client()):
        for url in (
            f"/organize/{run.slug}/listen/crowd.csv",
            f"/organize/{run.slug}/listen/ratings.csv",
            f"/api/listen/challenges/{run.slug}/crowd/",
            f"/api/listen/challenges/{run.slug}/ratings/",
            f"/api/listen/challenges/{run.slug}/progress/",
        ):
            response = viewer.get(url)
            assert response.status_code == 403, url
            assert b"PID" not in response.content
    page = good_client.get(f"/listen/{run.slug}/").content.decode()
    assert "PIDgood001" not in page
