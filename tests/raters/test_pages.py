"""Listening test over HTTP: enrolment links, the rater's pages, blind audio delivery, refused
requests, the organizers' monitoring page, and the CSV export from the pages and the API."""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pytest
import soundfile as sf
from django.test import Client
from django.utils import timezone

from raters import diversity, enrolment, preparation, selectors, sessions
from raters.errors import ListeningError
from raters.job_kinds import PREPARE_LISTENING
from raters.models import CategorySession, ListeningTest, Rater, Rating, Stimulus, Trial
from stimuli.audio import integrated_loudness
from stimuli.models import Clip, Job
from tests.listening_setup import answer_session, build_listening_challenge, get_sound

pytestmark = pytest.mark.django_db


@pytest.fixture
def listening(db):
    # Listening itself is verified in test_listening_heard.py; here a full fetch is enough.
    challenge = build_listening_challenge(
        completion_url="https://example.org/done?cc=ABC", listened_fraction=0.0
    )
    preparation.set_open(challenge, True)
    return challenge


def _join(listening, client: Client | None = None) -> tuple[Client, Rater]:
    client = client or Client()
    rater = enrolment.invite(listening, label="web")
    response = client.get(f"/listen/{listening.slug}/join/{rater.access_key}/")
    assert response.status_code == 302
    return client, rater


def _through_consent(client: Client, slug: str) -> None:
    assert client.get(f"/listen/{slug}/").url.endswith("/consent/")
    assert client.post(f"/listen/{slug}/consent/", {}).status_code == 400
    assert client.post(f"/listen/{slug}/consent/", {"agree": "yes"}).status_code == 302
    assert client.post(f"/listen/{slug}/instructions/").status_code == 302


def _trial_form(page: str) -> dict:
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    key = re.search(r'name="key" value="([^"]+)"', page).group(1)
    return {"token": token, "key": key}


def test_a_rater_goes_from_invitation_to_the_end(listening):
    client, rater = _join(listening)
    _through_consent(client, listening.slug)
    page = client.get(f"/listen/{listening.slug}/").content.decode()
    assert "Examples of" in page
    session = rater.sessions.get()
    # Trials stay shut until every example was fetched.
    response = client.post(f"/listen/{listening.slug}/start/", {"session": session.pk})
    assert response.status_code == 409
    for clip in session.familiarization.all():
        assert get_sound(client, f"/listen/{listening.slug}/audio/{clip.token}/").status_code == 200
    client.post(f"/listen/{listening.slug}/start/", {"session": session.pk})

    answered = 0
    for categories in range(4):
        session = rater.sessions.get(state="open")
        if session.familiarized_at is None:
            for clip in session.familiarization.all():
                get_sound(client, f"/listen/{listening.slug}/audio/{clip.token}/")
            client.post(f"/listen/{listening.slug}/start/", {"session": session.pk})
        while True:
            page = client.get(f"/listen/{listening.slug}/").content.decode()
            if 'name="token"' not in page:
                break
            form = _trial_form(page)
            # A reload shows the same trial under a fresh key: nothing was answered yet.
            again = _trial_form(client.get(f"/listen/{listening.slug}/").content.decode())
            assert again["token"] == form["token"] and again["key"] != form["key"]
            if answered == 0:
                # The page refuses an answer to a sound the browser never fetched.
                response = client.post(
                    f"/listen/{listening.slug}/rate/", {**form, "quality": "7", "fit": "6"}
                )
                assert response.status_code == 409 and b"listen to the sound" in response.content
            get_sound(client, f"/listen/{listening.slug}/audio/{form['token']}/")
            response = client.post(
                f"/listen/{listening.slug}/rate/", {**form, "quality": "7", "fit": "6"}
            )
            assert response.status_code == 303
            # The same request again (a double click or a retry) changes nothing.
            client.post(f"/listen/{listening.slug}/rate/", {**form, "quality": "1", "fit": "1"})
            answered += 1
        assert "Category done" in page
        if categories < 2:
            assert "Finish" not in page  # fewer than the minimum of categories so far
            client.post(f"/listen/{listening.slug}/next/")
        else:
            break
    assert answered == 3 * 16
    assert Rating.objects.filter(trial__session__rater=rater).count() == 48
    assert set(Rating.objects.values_list("quality", "fit")) == {(7, 6)}
    # Three categories exist and the rater rated all of them: finishing ends the test.
    assert "Finish" in page
    response = client.post(f"/listen/{listening.slug}/finish/")
    assert response.status_code == 303
    page = client.get(f"/listen/{listening.slug}/").content.decode()
    assert "Your answers are saved" in page and "example.org" not in page  # not a crowd rater


def test_crowd_link_enrols_once_and_ends_at_the_completion_url(listening):
    test = selectors.listening_test(listening)
    client = Client()
    url = f"/listen/{listening.slug}/crowd/{test.crowd_key}/"
    assert client.get(url).status_code == 400  # no participant id
    assert (
        client.get(f"/listen/{listening.slug}/crowd/wrong-key/?PROLIFIC_PID=p1").status_code == 404
    )
    query = "?PROLIFIC_PID=5f1a2b&STUDY_ID=st1&SESSION_ID=se1"
    assert client.get(url + query).status_code == 302
    assert Client().get(url + query).status_code == 302  # the same participant, another browser
    rater = Rater.objects.get(challenge=listening, kind="crowd")
    assert (rater.participant_id, rater.study_id, rater.crowd_session_id) == (
        "5f1a2b",
        "st1",
        "se1",
    )
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    ListeningTest.objects.filter(challenge=listening).update(categories_min=1)
    answer_session(rater, sessions.next_session(rater).session)
    response = client.post(f"/listen/{listening.slug}/finish/")
    # The platform's own code in the URL is the run's code, kept and shown on the last page.
    assert response.status_code == 303 and response.url == f"/listen/{listening.slug}/"
    page = client.get(f"/listen/{listening.slug}/").content.decode()
    assert "https://example.org/done?cc=ABC" in page
    assert '<strong id="completion-code">ABC</strong>' in page
    # A URL without one gets the test's code.
    test = selectors.listening_test(listening)
    assert re.fullmatch(r"C[0-9A-F]{8}", test.completion_code)
    test.completion_url = "https://example.org/done?study=7"
    assert (
        enrolment.completion_link(test)
        == f"https://example.org/done?study=7&cc={test.completion_code}"
    )


def test_a_crowd_run_without_completion_url_warns_and_still_shows_the_code(
    listening, organizer_client
):
    ListeningTest.objects.filter(challenge=listening).update(
        completion_url="", completion_code="RUN-7", categories_min=1
    )
    page = organizer_client.get(f"/organize/{listening.slug}/listen/").content.decode()
    assert 'id="crowd-warning"' in page and "No completion URL is set" in page
    preparation.set_open(listening, False)
    response = organizer_client.post(
        f"/organize/{listening.slug}/listen/open/", {"open": "1"}, follow=True
    )
    assert "No completion URL is set" in response.content.decode()
    test = selectors.listening_test(listening)
    client = Client()
    client.get(f"/listen/{listening.slug}/crowd/{test.crowd_key}/?PROLIFIC_PID=w9&SESSION_ID=s9")
    rater = Rater.objects.get(challenge=listening, participant_id="w9")
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    answer_session(rater, sessions.next_session(rater).session)
    response = client.post(f"/listen/{listening.slug}/finish/")
    assert response.status_code == 303 and response.url == f"/listen/{listening.slug}/"
    page = client.get(response.url).content.decode()
    assert '<strong id="completion-code">RUN-7</strong>' in page
    assert "Enter it on the study" in page
    # Set, the warning goes.
    ListeningTest.objects.filter(challenge=listening).update(completion_url="https://x.org/c")
    page = organizer_client.get(f"/organize/{listening.slug}/listen/").content.decode()
    assert "crowd-warning" not in page


def test_strangers_see_nothing(listening):
    client = Client()
    assert f"/listen/{listening.slug}/" in client.get("/").content.decode()  # the open test
    # The home page's link leads the public to how to take part, not to a refusal.
    response = client.get(f"/listen/{listening.slug}/")
    assert response.status_code == 200 and b'id="how-to-join"' in response.content
    assert b"personal link" in response.content and b'name="token"' not in response.content
    assert client.post(f"/listen/{listening.slug}/rate/", {}).status_code == 403
    assert client.get(f"/listen/{listening.slug}/consent/").status_code == 403
    trial_token = Trial.objects.values_list("token", flat=True).first()
    assert trial_token is None  # no sessions yet; build one for someone else
    _, rater = _join(listening)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    token = session.trials.first().token
    assert get_sound(client, f"/listen/{listening.slug}/audio/{token}/").status_code == 403
    other, _ = _join(listening)
    assert get_sound(other, f"/listen/{listening.slug}/audio/{token}/").status_code == 404
    assert Client().get(f"/listen/{listening.slug}/join/nonsense/").status_code == 404


def test_bad_answers_get_a_clear_4xx_and_store_nothing(listening):
    client, rater = _join(listening)
    _through_consent(client, listening.slug)
    session = rater.sessions.get()
    sessions.complete_familiarization(session, require_heard=False)
    form = _trial_form(client.get(f"/listen/{listening.slug}/").content.decode())
    cases = [
        ({**form, "quality": "11", "fit": "5"}, 400, "Quality must be an integer from 0 to 10"),
        ({**form, "quality": "5", "fit": "-1"}, 400, "Fit must be an integer"),
        ({**form, "quality": "", "fit": "5"}, 400, "Quality"),
        ({**form, "quality": "5.5", "fit": "5"}, 400, "Quality"),
        ({**form, "key": "", "quality": "5", "fit": "5"}, 400, "request key"),
        ({**form, "token": "nope", "quality": "5", "fit": "5"}, 404, "No such trial"),
    ]
    for data, status, message in cases:
        response = client.post(f"/listen/{listening.slug}/rate/", data)
        assert response.status_code == status, data
        assert message in response.content.decode()
    other, _other_rater = _join(listening)
    response = other.post(
        f"/listen/{listening.slug}/rate/",
        {**form, "quality": "5", "fit": "5"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 403
    assert response.json() == {"detail": "This trial belongs to another rater."}
    CategorySession.objects.filter(pk=session.pk).update(state="closed", closed_at=timezone.now())
    response = client.post(f"/listen/{listening.slug}/rate/", {**form, "quality": "5", "fit": "5"})
    assert response.status_code == 409 and "closed" in response.content.decode()
    assert client.get(f"/listen/{listening.slug}/rate/").status_code == 405
    assert not Rating.objects.exists()


def test_audio_reveals_nothing_about_what_it_is(listening):
    client, rater = _join(listening)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    responses = {}
    for trial in session.trials.all():
        response = get_sound(client, f"/listen/{listening.slug}/audio/{trial.token}/")
        assert response.status_code == 200
        responses[trial.role + str(trial.pk)] = response
    header_sets = {
        tuple(sorted((k, v) for k, v in r.headers.items() if k != "Content-Length"))
        for r in responses.values()
    }
    assert len(header_sets) == 1  # the same headers for stimuli and anchors of every type
    headers = dict(next(iter(header_sets)))
    assert headers["Content-Type"] == "audio/wav"
    assert "Content-Disposition" not in headers and "ETag" not in headers
    assert "Last-Modified" not in headers
    assert {len(r.body) for r in responses.values()} == {44 + 2 * listening.clip_frames}
    loudness = []
    for response in responses.values():
        data = response.body
        assert data[:4] == b"RIFF" and b"LIST" not in data[:64]
        info = sf.info(io.BytesIO(data))
        assert (info.samplerate, info.channels, info.subtype) == (8000, 1, "PCM_16")
        samples, rate = sf.read(io.BytesIO(data), always_2d=True)
        loudness.append(integrated_loudness(samples, rate))
    # Loudness-aligned to the target (the systems' raw levels differ by about 14 dB).
    assert np.allclose(loudness, selectors.listening_test(listening).target_lufs, atol=0.5)
    # The token is random per rater: another rater hears the same sound under another name.
    _other, other_rater = _join(listening)
    enrolment.record_consent(other_rater)
    enrolment.record_instructions(other_rater)
    other_session = sessions.next_session(other_rater).session
    assert not set(other_session.trials.values_list("token", flat=True)) & set(
        session.trials.values_list("token", flat=True)
    )


def test_audio_is_served_in_byte_ranges(listening):
    client, rater = _join(listening)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    trial = sessions.next_session(rater).session.trials.first()
    url = f"/listen/{listening.slug}/audio/{trial.token}/"
    whole = get_sound(client, url).body
    size = len(whole)
    part = get_sound(client, url, HTTP_RANGE="bytes=0-1")
    assert part.status_code == 206 and part.body == whole[:2]
    assert part["Content-Range"] == f"bytes 0-1/{size}" and part["Accept-Ranges"] == "bytes"
    tail = get_sound(client, url, HTTP_RANGE="bytes=100-")
    assert tail.status_code == 206 and tail.body == whole[100:]
    suffix = get_sound(client, url, HTTP_RANGE="bytes=-10")
    assert suffix.body == whole[-10:]
    assert client.get(url, HTTP_RANGE=f"bytes={size}-").status_code == 416
    # Several ranges at once are refused, and a HEAD sends (and records) nothing.
    assert client.get(url, HTTP_RANGE="bytes=0-0,2-2").status_code == 416
    assert client.head(url).status_code == 405


def test_loudness_alignment_can_be_turned_off(listening):
    test = selectors.listening_test(listening)
    test.loudness_alignment = False
    test.save()
    client, rater = _join(listening)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    trial = session.trials.filter(role="trial").select_related("audio").first()
    data = get_sound(client, f"/listen/{listening.slug}/audio/{trial.token}/").body
    samples, rate = sf.read(io.BytesIO(data), always_2d=True)
    assert abs(integrated_loudness(samples, rate) - trial.audio.loudness_lufs) < 0.1


def test_organizer_monitors_and_exports(listening, organizer_client, api_client, rater_user):
    team = listening.teams.first()
    member = enrolment.create_participant_account(
        listening, username="member", password="member-pass-1", team=team
    )
    for rater in (member, enrolment.invite(listening)):
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        answer_session(rater, sessions.next_session(rater).session)
    page = organizer_client.get(f"/organize/{listening.slug}/listen/").content.decode()
    assert member.code in page and "Ratings (CSV)" in page
    assert organizer_client.get(f"/organize/{listening.slug}/listen/progress/").status_code == 200

    text = organizer_client.get(f"/organize/{listening.slug}/listen/ratings.csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert (
        text.splitlines()[0]
        == "rater,participant_id,rater_team,session,category,system,track,stimulus,role,quality,"
        "fit,rater_kind,expected_quality_min,expected_quality_max,expected_fit_min,"
        "expected_fit_max,plays,seeks,heard_fraction,answer_s,platform,flags"
    )
    assert len(rows) == 32
    assert {r["rater_team"] for r in rows} == {team.name, ""}
    api = api_client.get(f"/api/listen/challenges/{listening.slug}/ratings/?format=csv")
    assert api.status_code == 200 and api.content.decode() == text
    json_rows = api_client.get(f"/api/listen/challenges/{listening.slug}/ratings/").json()
    assert len(json_rows) == 32 and set(json_rows[0]) == set(rows[0])
    div = organizer_client.get(f"/organize/{listening.slug}/listen/diversity.csv").content.decode()
    assert div.splitlines() == [
        "rater,rater_team,category,system,track,diversity,plays,seeks,heard_fraction,answer_s"
    ]
    progress = api_client.get(f"/api/listen/challenges/{listening.slug}/progress/").json()
    assert sum(c["sessions"] for c in progress["categories"]) == 2

    stranger = Client()
    stranger.force_login(rater_user)
    assert stranger.get(f"/organize/{listening.slug}/listen/ratings.csv").status_code == 403
    assert stranger.get(f"/api/listen/challenges/{listening.slug}/ratings/").status_code == 403


def test_organizer_settings_invitations_and_accounts(listening, organizer_client):
    url = f"/organize/{listening.slug}/listen/"
    data = {
        "categories_min": 5, "categories_max": 4, "crowd_categories": 1, "target_ratings": 10,
        "anchors_per_session": 12,
        "familiarization_clips": 6, "loudness_alignment": "on", "target_lufs": -27,
        "diversity_gap_s": 0.5, "listened_fraction": 0.9, "completion_url": "",
        "completion_code": "RUN-1",
        "consent_text": "", "instructions_text": "",
    }  # fmt: skip
    assert organizer_client.post(url, data).status_code == 400  # min above max
    assert (
        organizer_client.post(
            url, {**data, "categories_min": 3, "anchors_per_session": 10}
        ).status_code
        == 400
    )
    assert organizer_client.post(url, {**data, "categories_min": 3}).status_code == 302
    assert selectors.listening_test(listening).categories_min == 3
    response = organizer_client.post(f"{url}invite/", {"label": "friend"}, follow=True)
    rater = Rater.objects.get(label="friend")
    assert rater.access_key in response.content.decode()
    team = listening.teams.first()
    organizer_client.post(
        f"{url}accounts/", {"username": "p1", "password": "long-password-1", "team": team.pk}
    )
    assert Rater.objects.get(user__username="p1").team == team
    assert (
        organizer_client.post(
            f"{url}accounts/", {"username": "p1", "password": "long-password-1"}
        ).status_code
        == 400
    )
    organizer_client.post(f"{url}open/", {"open": "0"})
    assert not selectors.listening_test(listening).is_open
    # Prepare runs as a job (in-process here, without a broker) and changes nothing twice.
    anchors = listening.anchors.count()
    organizer_client.post(f"{url}prepare/")
    job = Job.objects.get(challenge=listening, kind=PREPARE_LISTENING)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["anchors_added"] == 0 and listening.anchors.count() == anchors
    assert f"Preparation #{job.pk}" in organizer_client.get(url).content.decode()


def test_diversity_is_rated_by_organizers_who_rated_nothing_else(
    listening, organizer_client, organizer
):
    response = organizer_client.post(f"/organize/{listening.slug}/listen/diversity/")
    assert response.status_code == 302
    rater = Rater.objects.get(user=organizer)
    assert rater.diversity_role
    consent = organizer_client.get(f"/listen/{listening.slug}/consent/").content.decode()
    assert "how different the sounds of each series are" in consent
    assert "two scales" not in consent
    _through_consent(organizer_client, listening.slug)
    assert organizer_client.get(f"/listen/{listening.slug}/").url.endswith("/diversity/")
    page = organizer_client.get(f"/listen/{listening.slug}/diversity/").content.decode()
    form = _trial_form(page)
    trial = rater.diversity_trials.get(token=form["token"])
    # Labelled by the public id and the category only (tokens elsewhere are random text).
    heading = re.search(r"<h1>(.*?)</h1>", page).group(1)
    assert (
        heading == f"Diversity: system {trial.item.system.public_id} · {trial.item.category.name}"
    )
    assert "Team" not in page
    audio = get_sound(organizer_client, f"/listen/{listening.slug}/audio/{form['token']}/")
    frames = sf.info(io.BytesIO(audio.body)).frames
    assert frames == 2 * listening.clip_frames + round(0.5 * 8000)  # two sounds, one gap
    for value, status in (("11", 400), ("x", 400)):
        assert (
            organizer_client.post(
                f"/listen/{listening.slug}/diversity/rate/", {**form, "diversity": value}
            ).status_code
            == status
        )
    for _ in range(2):
        response = organizer_client.post(
            f"/listen/{listening.slug}/diversity/rate/", {**form, "diversity": "4"}
        )
        assert response.status_code == 303
    assert (
        trial.rating.diversity == 4
        and rater.diversity_trials.filter(rating__isnull=False).count() == 1
    )
    # Counterbalanced: a second diversity rater starts elsewhere in the order.
    from django.contrib.auth import get_user_model

    other = enrolment.enrol_organizer_for_diversity(
        listening, get_user_model().objects.create_user("org2")
    )
    first_items = [t.item_id for t in diversity.trials(rater)]
    second_items = [t.item_id for t in diversity.trials(other)]
    assert sorted(first_items) == sorted(second_items) and first_items != second_items
    # Someone who rated quality and fit cannot take the diversity role; raters cannot rate it.
    member = enrolment.invite(listening)
    enrolment.record_consent(member)
    enrolment.record_instructions(member)
    sessions.next_session(member)
    with pytest.raises(ListeningError):
        diversity.trials(member)


def test_organizers_pick_stimuli_by_hand_in_the_admin(admin_client):
    challenge = build_listening_challenge(slug="by-hand")
    clip = Clip.objects.filter(challenge=challenge, role="system").exclude(stimuli__isnull=False)
    clip = clip.first() or Clip.objects.filter(challenge=challenge, role="system").first()
    Stimulus.objects.filter(clip=clip).delete()
    response = admin_client.post("/admin/raters/stimulus/add/", {"clip": clip.pk, "position": 3})
    assert response.status_code == 302, response.content.decode()[:2000]
    stimulus = Stimulus.objects.get(clip=clip)
    assert (stimulus.challenge, stimulus.category, stimulus.system) == (
        challenge,
        clip.category,
        clip.system,
    )
    # A development clip is not a system's sound: the form refuses it.
    dev = Clip.objects.filter(challenge=challenge, role="development").first()
    response = admin_client.post("/admin/raters/stimulus/add/", {"clip": dev.pk, "position": 0})
    assert response.status_code == 200 and not Stimulus.objects.filter(clip=dev).exists()


def test_a_crowd_worker_cannot_finish_while_the_test_is_paused(listening):
    ListeningTest.objects.filter(challenge=listening).update(crowd_categories=2)
    test = selectors.listening_test(listening)
    client = Client()
    url = f"/listen/{listening.slug}/crowd/{test.crowd_key}/?PROLIFIC_PID=5f1a2c"
    assert client.get(url).status_code == 302
    _through_consent(client, listening.slug)
    rater = Rater.objects.get(challenge=listening, kind="crowd")
    answer_session(rater, rater.sessions.get())
    preparation.set_open(listening, False)
    response = client.post(f"/listen/{listening.slug}/finish/")
    assert response.status_code == 409 and "paused" in response.content.decode()
    rater.refresh_from_db()
    assert rater.finished_at is None
    preparation.set_open(listening, True)
    # Reopened, the worker is back at the break between categories, not at the end page.
    assert "Category done" in client.get(f"/listen/{listening.slug}/").content.decode()


@pytest.mark.parametrize("value", ["abc", "", "1.5", "-1"])
def test_a_forged_session_id_is_refused_with_400(listening, value):
    client, _ = _join(listening)
    _through_consent(client, listening.slug)
    response = client.post(f"/listen/{listening.slug}/start/", {"session": value})
    assert response.status_code == 400


def test_an_account_of_another_challenge_is_not_enrolled_here(listening, rater_user):
    client = Client()
    client.force_login(rater_user)  # a participant account made for no team of this challenge
    response = client.get(f"/listen/{listening.slug}/")
    assert response.status_code == 200 and b"how-to-join" in response.content
    assert client.get(f"/listen/{listening.slug}/consent/").status_code == 403
    assert not Rater.objects.filter(challenge=listening, user=rater_user).exists()


def test_a_crowd_worker_cannot_take_over_another_workers_session(listening):
    test = selectors.listening_test(listening)
    url = f"/listen/{listening.slug}/crowd/{test.crowd_key}/"
    worker = Client()
    assert worker.get(url + "?PROLIFIC_PID=5f1a2d&SESSION_ID=s-first").status_code == 302
    assert worker.get(url + "?PROLIFIC_PID=5f1a2d").status_code == 302  # the same browser
    # Someone else who learned the worker's id, without the platform's session id: refused.
    stranger = Client()
    for query in (
        "?PROLIFIC_PID=5f1a2d",
        "?participant=5f1a2d",
        "?PROLIFIC_PID=5f1a2d&SESSION_ID=x",
    ):
        assert stranger.get(url + query).status_code == 409
    assert b"how-to-join" in stranger.get(f"/listen/{listening.slug}/").content  # not the worker's
    # The worker, back from the recruiting platform in another browser: let in.
    again = Client()
    assert again.get(url + "?PROLIFIC_PID=5f1a2d&SESSION_ID=s-first").status_code == 302
    assert again.get(f"/listen/{listening.slug}/").status_code == 302  # to consent
    assert Rater.objects.filter(challenge=listening, kind="crowd").count() == 1


@pytest.mark.parametrize("url", ["ftp://example.org/done", "javascript:alert(1)"])
def test_the_completion_url_must_be_a_web_address(listening, url):
    from django.core.exceptions import ValidationError

    test = selectors.listening_test(listening)
    test.completion_url = url
    with pytest.raises(ValidationError):
        test.full_clean()


def test_a_long_category_offers_a_pause_every_forty_sounds(db):
    challenge = build_listening_challenge(
        slug="long-category", categories=1, systems_per_track=4, clips_per_system=5
    )
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    assert session.trials.count() > 41
    client = Client()
    client.get(f"/listen/{challenge.slug}/join/{rater.access_key}/")
    assert 'id="pause"' not in client.get(f"/listen/{challenge.slug}/").content.decode()
    for _ in range(40):
        trial = sessions.next_trial(session)
        sessions.save_rating(rater, trial.token, quality=6, fit=6, key=f"pause-key-{trial.pk}")
    page = client.get(f"/listen/{challenge.slug}/").content.decode()
    assert 'id="pause"' in page and "40 sounds rated in this category" in page
    assert "your place is kept for 15 minutes" in page
    trial = sessions.next_trial(session)
    sessions.save_rating(rater, trial.token, quality=6, fit=6, key=f"pause-key-{trial.pk}")
    assert 'id="pause"' not in client.get(f"/listen/{challenge.slug}/").content.decode()
