"""Listening verified on the server, over HTTP: a sound counts as heard only when all of it was
delivered, its duration (times the test's fraction) has passed since, and the player's reported
playing covers it; seeking ahead adds nothing. The clock is the test's, so nothing sleeps."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from raters import enrolment, listening, preparation, selectors, sessions
from raters.models import Rater, Rating, Trial
from stimuli.exports import to_csv
from tests.listening_setup import (
    Clock,
    add_closed_sessions,
    build_listening_challenge,
    deliver,
    get_sound,
    rater_at_trials,
)

pytestmark = pytest.mark.django_db

DURATION = 2.0


@pytest.fixture
def challenge(db):
    challenge = build_listening_challenge(
        slug="heard", categories=2, clips_per_system=1, familiarization_clips=2, duration=DURATION
    )
    preparation.set_open(challenge, True)
    return challenge


def _event(client: Client, slug: str, token: str, event: str, t: float, **extra) -> dict:
    response = client.post(
        f"/listen/{slug}/player/",
        json.dumps({"token": token, "event": event, "t": t, **extra}),
        content_type="application/json",
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def listen(client: Client, slug: str, token: str, clock: Clock) -> dict:
    """What a browser does for a sound played once to its end."""
    assert get_sound(client, f"/listen/{slug}/audio/{token}/").status_code == 200
    _event(client, slug, token, "play", 0)
    clock.advance(DURATION)
    return _event(client, slug, token, "ended", DURATION)


def _rater(challenge) -> tuple[Client, object]:
    client = Client()
    rater = enrolment.invite(challenge, label="heard")
    client.get(f"/listen/{challenge.slug}/join/{rater.access_key}/")
    client.post(f"/listen/{challenge.slug}/consent/", {"agree": "yes"})
    client.post(f"/listen/{challenge.slug}/instructions/")
    return client, rater


def _at_first_trial(challenge, clock) -> tuple[Client, object, dict]:
    client, rater = _rater(challenge)
    session = rater.sessions.get()
    for clip in session.familiarization.all():
        assert listen(client, challenge.slug, clip.token, clock)["heard"]
    assert (
        client.post(f"/listen/{challenge.slug}/start/", {"session": session.pk}).status_code == 302
    )
    return client, rater, _form(client, challenge.slug)


def _form(client: Client, slug: str) -> dict:
    page = client.get(f"/listen/{slug}/").content.decode()
    return {
        "token": re.search(r'name="token" value="([^"]+)"', page).group(1),
        "key": re.search(r'name="key" value="([^"]+)"', page).group(1),
        "quality": "6",
        "fit": "6",
    }


def _rate(client: Client, slug: str, form: dict):
    return client.post(f"/listen/{slug}/rate/", form)


def test_a_partial_range_fetch_is_not_a_listen(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    response = get_sound(
        client, f"/listen/{challenge.slug}/audio/{form['token']}/", HTTP_RANGE="bytes=0-0"
    )
    assert response.status_code == 206 and len(response.body) == 1
    _event(client, challenge.slug, form["token"], "play", 0)
    clock.advance(60)
    verdict = _event(client, challenge.slug, form["token"], "ended", DURATION)
    assert not verdict["heard"]
    response = _rate(client, challenge.slug, form)
    assert response.status_code == 409
    assert b"Only part of the sound reached your browser (1 bytes)" in response.content
    # The rest of the file, in two more ranges, completes the delivery.
    size = len(get_sound(client, f"/listen/{challenge.slug}/audio/{form['token']}/").body)
    trial = Trial.objects.get(token=form["token"])
    assert trial.delivered_ranges == [[0, size]] and trial.delivered_at is not None
    assert not Rating.objects.exists()


def test_ranges_that_together_cover_the_file_are_a_whole_delivery(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    url = f"/listen/{challenge.slug}/audio/{form['token']}/"
    size = int(get_sound(client, url, HTTP_RANGE="bytes=0-99")["Content-Range"].rsplit("/", 1)[1])
    trial = Trial.objects.get(token=form["token"])
    get_sound(client, url, HTTP_RANGE=f"bytes=200-{size - 1}")
    trial.refresh_from_db()
    assert trial.delivered_ranges == [[0, 100], [200, size]] and trial.delivered_at is None
    get_sound(client, url, HTTP_RANGE="bytes=100-199")
    trial.refresh_from_db()
    assert trial.delivered_ranges == [[0, size]] and trial.delivered_at is not None


def test_a_full_fetch_rated_too_soon_is_refused(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    assert get_sound(client, f"/listen/{challenge.slug}/audio/{form['token']}/").status_code == 200
    # The page reports playing right through, faster than real time and its allowance for
    # jitter allow: credited the time that passed and the allowance (1.45 + 0.25 s of 2 s).
    _event(client, challenge.slug, form["token"], "play", 0)
    clock.advance(1.45)
    verdict = _event(client, challenge.slug, form["token"], "ended", DURATION)
    assert not verdict["heard"] and "heard 1.7 s of the 2.0 s sound (85%)" in verdict["reason"]
    response = _rate(client, challenge.slug, form)
    assert response.status_code == 409
    assert b"heard 1.7 s of the 2.0 s sound" in response.content
    assert not Rating.objects.exists()


def test_seeking_to_the_end_is_not_listening(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    token = form["token"]
    assert get_sound(client, f"/listen/{challenge.slug}/audio/{token}/").status_code == 200
    clock.advance(30)  # plenty of time passes: the wall clock alone does not make it heard
    _event(client, challenge.slug, token, "play", 0)
    clock.advance(0.2)
    _event(client, challenge.slug, token, "seeking", DURATION, **{"from": 0.2})
    verdict = _event(client, challenge.slug, token, "ended", DURATION)
    assert not verdict["heard"] and verdict["seeks"] == 1
    assert verdict["heard_fraction"] < 0.25
    response = _rate(client, challenge.slug, form)
    assert response.status_code == 409
    assert b"skipping ahead, playing faster or playing two sounds at once" in response.content
    # A page claiming a minute of playing a second after it began gets a second's worth.
    _event(client, challenge.slug, token, "play", 0)
    clock.advance(1)
    verdict = _event(client, challenge.slug, token, "pause", DURATION)
    assert 1.0 <= verdict["heard_fraction"] * DURATION <= 1.0 + listening.SLACK_S + 1e-9
    assert _rate(client, challenge.slug, form).status_code == 409


def test_a_normal_listen_is_accepted_and_recorded(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    verdict = listen(client, challenge.slug, form["token"], clock)
    assert verdict == {
        "heard": True,
        "heard_fraction": 1.0,
        "plays": 1,
        "seeks": 0,
        "reason": "",
    }
    # Listening again, with a pause, is allowed and counted.
    _event(client, challenge.slug, form["token"], "seeking", 0, **{"from": DURATION})
    _event(client, challenge.slug, form["token"], "play", 0)
    clock.advance(0.5)
    _event(client, challenge.slug, form["token"], "pause", 0.5)
    clock.advance(3)
    assert _rate(client, challenge.slug, form).status_code == 303
    rating = Rating.objects.get()
    assert (rating.plays, rating.seeks, rating.heard_fraction) == (2, 0, 1.0)
    assert rating.answer_s == pytest.approx(DURATION + 3.5, abs=0.5)
    # The export carries it.
    [row] = selectors.rating_rows(challenge)
    assert (row["plays"], row["seeks"], row["heard_fraction"]) == (2, 0, 1.0)
    assert row["answer_s"] == rating.answer_s
    header = to_csv([row], selectors.RATING_COLUMNS).splitlines()[0]
    assert header.endswith("plays,seeks,heard_fraction,answer_s,platform,flags")


def test_familiarization_needs_every_example_heard(challenge, clock):
    client, rater = _rater(challenge)
    session = rater.sessions.get()
    first, second = session.familiarization.order_by("position")
    start = f"/listen/{challenge.slug}/start/"
    # A byte of each example.
    for clip in (first, second):
        get_sound(client, f"/listen/{challenge.slug}/audio/{clip.token}/", HTTP_RANGE="bytes=0-0")
    response = client.post(start, {"session": session.pk})
    assert (
        response.status_code == 409
        and b"Example 1 of 2: Only part of the example" in response.content
    )
    # The first heard; the second fetched whole but skipped to its end.
    listen(client, challenge.slug, first.token, clock)
    get_sound(client, f"/listen/{challenge.slug}/audio/{second.token}/")
    _event(client, challenge.slug, second.token, "play", 0)
    _event(client, challenge.slug, second.token, "seeking", DURATION, **{"from": 0})
    _event(client, challenge.slug, second.token, "ended", DURATION)
    clock.advance(10)
    response = client.post(start, {"session": session.pk})
    assert response.status_code == 409 and b"Example 2 of 2: You have heard" in response.content
    # Played through, but too soon after its play.
    _event(client, challenge.slug, second.token, "play", 0)
    clock.advance(1.45)
    _event(client, challenge.slug, second.token, "ended", DURATION)
    response = client.post(start, {"session": session.pk})
    assert (
        response.status_code == 409 and b"Example 2 of 2: You have heard 1.7 s" in response.content
    )
    session.refresh_from_db()
    assert session.familiarized_at is None
    # Heard properly: the trials open, and the page says so on a reload.
    _event(client, challenge.slug, second.token, "play", 0)
    clock.advance(DURATION)
    _event(client, challenge.slug, second.token, "ended", DURATION)
    page = client.get(f"/listen/{challenge.slug}/").content.decode()
    assert 'id="start" >' in page or 'id="start">' in page  # no longer disabled
    assert client.post(start, {"session": session.pk}).status_code == 302
    session.refresh_from_db()
    assert session.familiarized_at is not None


def test_a_reload_mid_trial_keeps_what_was_heard(challenge, clock):
    client, rater, form = _at_first_trial(challenge, clock)
    token = form["token"]
    get_sound(client, f"/listen/{challenge.slug}/audio/{token}/")
    _event(client, challenge.slug, token, "play", 0)
    clock.advance(1.0)
    assert _event(client, challenge.slug, token, "timeupdate", 1.0)["heard_fraction"] == 0.5
    clock.advance(0.5)  # played on past the last checkpoint, then the page reloads
    again = _form(client, challenge.slug)
    assert again["token"] == token
    trial = Trial.objects.get(token=token)
    assert trial.heard == [[0.0, 1.0]]
    assert Rater.objects.get(pk=rater.pk).playing_kind is None
    # The rater plays the rest after the reload: what was heard before still counts.
    _event(client, challenge.slug, token, "seeking", 1.0, **{"from": 0})
    _event(client, challenge.slug, token, "play", 1.0)
    clock.advance(1.0)
    verdict = _event(client, challenge.slug, token, "ended", DURATION)
    assert verdict["heard"] and verdict["plays"] == 2
    assert "data-heard" in client.get(f"/listen/{challenge.slug}/").content.decode()
    assert _rate(client, challenge.slug, {**form, "key": again["key"]}).status_code == 303


def test_player_events_are_checked(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    url = f"/listen/{challenge.slug}/player/"

    def post(body, **headers):
        return client.post(
            url, body, content_type="application/json", HTTP_ACCEPT="application/json"
        )

    assert post("not json").status_code == 400
    assert post(json.dumps([1])).status_code == 400
    body = {"token": form["token"], "event": "play", "t": 0}
    assert post(json.dumps({**body, "event": "jump"})).status_code == 400
    assert post(json.dumps({**body, "t": 999})).status_code == 400
    assert post(json.dumps({**body, "t": "NaN"})).status_code == 400
    assert post(json.dumps({**body, "token": "nope"})).status_code == 404
    other, _ = _rater(challenge)
    assert other.post(url, json.dumps(body), content_type="application/json").status_code == 404
    trial = Trial.objects.get(token=form["token"])
    assert trial.plays == 0 and trial.heard == []


def test_a_malformed_or_deeply_nested_event_is_refused_with_what_is_wrong(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    url = f"/listen/{challenge.slug}/player/"

    def post(body: str) -> tuple[int, str]:
        response = client.post(
            url, body, content_type="application/json", HTTP_ACCEPT="application/json"
        )
        return response.status_code, response.json()["detail"]

    # 400 KB of nested arrays: refused for its length before anything parses it.
    status, detail = post("[" * 200_000 + "]" * 200_000)
    assert status == 400 and "at most 2048 bytes" in detail
    # Nested deeper than the parser's recursion allows, in a short body: malformed, not a 500.
    for nested in ("[" * 1500, "[" * 1000 + "]" * 1000, "[" * 2048):
        status, detail = post(nested)
        assert (status, detail) == (400, 'The event must be a JSON object: {"token": ..., '
                                         '"event": ..., "t": ...}.')  # fmt: skip
    nested_field = {"token": form["token"], "event": "play", "t": [[[[0]]]]}
    assert post(json.dumps(nested_field))[0] == 400
    # Every field of the wrong shape, named at once.
    status, detail = post(json.dumps({"token": ["x"], "event": 3, "t": "0", "from": {}}))
    assert status == 400
    assert detail == (
        "The event is malformed: token must be text; event must be text; "
        "t must be a number of seconds; from must be a number of seconds."
    )
    assert post(json.dumps({"token": form["token"], "event": "play", "t": True}))[0] == 400
    trial = Trial.objects.get(token=form["token"])
    assert trial.plays == 0 and trial.heard == []
    # The page's own events still count.
    assert _event(client, challenge.slug, form["token"], "play", 0)["plays"] == 1


def test_two_sounds_played_at_once_count_as_one(challenge, clock):
    client, _, form = _at_first_trial(challenge, clock)
    page = client.get(f"/listen/{challenge.slug}/").content.decode()
    following = re.search(r'audio/([^/"]+)/" hidden', page).group(1)
    for token in (form["token"], following):
        get_sound(client, f"/listen/{challenge.slug}/audio/{token}/")
    # A script plays this sound and the preloaded next one side by side.
    _event(client, challenge.slug, form["token"], "play", 0)
    _event(client, challenge.slug, following, "play", 0)
    clock.advance(DURATION)
    assert _event(client, challenge.slug, following, "ended", DURATION)["heard"]
    verdict = _event(client, challenge.slug, form["token"], "ended", DURATION)
    assert not verdict["heard"] and verdict["heard_fraction"] < 0.2
    assert _rate(client, challenge.slug, form).status_code == 409


def test_a_sound_played_as_the_one_before_ends_leaves_both_heard(challenge, clock):
    """The examples played one after another, the second at the first's end: its play can reach
    the server before that end, and the first's play can have reached it late (a busy network).
    Both count as heard; the allowance the first is credited is taken from the second's time."""
    client, rater = _rater(challenge)
    first, second = rater.sessions.get().familiarization.order_by("position")
    for clip in (first, second):
        get_sound(client, f"/listen/{challenge.slug}/audio/{clip.token}/")
    late = 0.3  # the first play's post arrived this late
    _event(client, challenge.slug, first.token, "play", 0)
    clock.advance(DURATION - late)
    _event(client, challenge.slug, second.token, "play", 0)  # before the first's end
    assert _event(client, challenge.slug, first.token, "ended", DURATION)["heard"]
    clock.advance(DURATION)
    assert _event(client, challenge.slug, second.token, "ended", DURATION)["heard"]
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.heard == [[0.0, DURATION - late + listening.SLACK_S]]
    # The second's play began where the first's credit ended, and had its own allowance.
    assert second.heard == [[0.0, DURATION]]
    assert Rater.objects.get(pk=rater.pk).listened_until == clock() + timedelta(
        seconds=listening.SLACK_S
    )


def test_sounds_cut_short_one_after_another_share_the_time_that_passed(challenge, clock):
    """Plays fired in a row, each cutting the one before short: each gets the allowance for
    jitter, and the next starts after it, so together they get no more than the time that passed
    and one allowance, however many plays there were."""
    client, rater = _rater(challenge)
    clips = list(rater.sessions.get().familiarization.order_by("position"))
    for clip in clips:
        get_sound(client, f"/listen/{challenge.slug}/audio/{clip.token}/")
    for _ in range(3):
        for clip in clips:
            _event(client, challenge.slug, clip.token, "play", 0)
            clock.advance(0.1)
    passed = 0.1 * 3 * len(clips)
    for clip in clips:
        _event(client, challenge.slug, clip.token, "ended", DURATION)
        clip.refresh_from_db()
    credited = sum(listening.covered(clip.heard) for clip in clips)
    assert 0 < credited <= passed + listening.SLACK_S + 1e-9


def test_an_event_applied_to_a_row_read_before_another_event_sees_that_event(challenge, clock):
    """An event is written in one statement only while its row is as the request read it; when
    another event landed in between, it is applied again, under the row's lock, to the row as
    it is (nothing of the other event is lost)."""
    rater, session = rater_at_trials(challenge)
    trial = session.trials.order_by("position").first()
    deliver(rater, trial.token)
    stale_rater = Rater.objects.get(pk=rater.pk)
    model, stale, audio = listening._sound(rater, trial.token)  # read before the play below
    listening.player_event(rater, trial.token, "play", 0.0)
    clock.advance(1.0)
    row = listening.record_event(stale_rater, model, stale, "timeupdate", 1.0, audio.duration_s)
    assert (row.plays, row.heard) == (1, [[0.0, 1.0]])
    trial.refresh_from_db()
    assert (trial.plays, trial.heard) == (1, [[0.0, 1.0]])
    fresh = Rater.objects.get(pk=rater.pk)
    assert (fresh.playing_id, fresh.playing_credited, fresh.listening_version) == (trial.pk, 1.0, 2)


def test_a_player_event_is_a_few_statements_whatever_the_test_holds(challenge, clock):
    client = Client()
    rater = enrolment.invite(challenge)
    slug = challenge.slug
    client.get(f"/listen/{slug}/join/{rater.access_key}/")
    client.post(f"/listen/{slug}/consent/", {"agree": "yes"})
    client.post(f"/listen/{slug}/instructions/")
    session = rater.sessions.get()
    sessions.complete_familiarization(session, require_heard=False)
    tokens = list(session.trials.order_by("position").values_list("token", flat=True))

    def events(token: str) -> dict[str, int]:
        counts = {}
        for event, t in (("play", 0.0), ("timeupdate", 1.0), ("ended", DURATION)):
            clock.advance(1.0)
            with CaptureQueriesContext(connection) as queries:
                _event(client, slug, token, event, t)
            counts[event] = len(queries)
        return counts

    events(tokens[0])  # statements prepared on this connection
    small = events(tokens[1])
    add_closed_sessions(challenge, 300)
    assert events(tokens[2]) == small
    # The rater with the sound it plays and the sound's trial (one statement), and the write:
    # one statement on PostgreSQL, elsewhere the rater's and the sound's rows within a savepoint.
    writes = 1 if connection.vendor == "postgresql" else 4
    assert small == {"play": 1 + writes, "timeupdate": 1 + writes, "ended": 1 + writes}, small


def test_the_moment_of_a_listening_request_is_its_arrival_at_the_proxy_when_one_says_so(settings):
    """Behind nginx a request's moment is when nginx received it (a busy queue in front of the
    workers does not shorten the wall time between a player's events); a browser cannot set it
    itself where nginx does not stand in front, and a stale or future stamp is held to the last
    30 s."""
    from django.test import RequestFactory

    from foley_platform.middleware import request_arrival

    seen = []

    def view(request):
        seen.append(listening.now())
        return HttpResponse()

    handler = request_arrival(view)
    moment = timezone.now()
    stamp = f"t={moment.timestamp() - 2:.3f}"
    request = RequestFactory().get("/", HTTP_X_REQUEST_START=stamp)
    settings.PROXY_REQUEST_START = False
    handler(request)
    assert seen[-1] >= moment  # no proxy: the browser's header is ignored
    settings.PROXY_REQUEST_START = True
    handler(request)
    assert abs((moment - seen[-1]).total_seconds() - 2) < 0.01
    for stale in ("t=0", f"t={moment.timestamp() + 60:.3f}", "t=nonsense"):
        handler(RequestFactory().get("/", HTTP_X_REQUEST_START=stale))
        assert timedelta(0) <= timezone.now() - seen[-1] <= timedelta(seconds=31)
    assert listening.now() >= moment  # nothing left behind after the request
