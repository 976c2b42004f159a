"""The listening test at crowd scale: the raters' hot paths (the trial page, a save, a sound
fetch) run as many queries with 1,000 sessions in the database as with 10, and the summary each
answer keeps on its session (latest answer, verdict) equals what a scan of every answer gives."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Max
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from raters import diversity, enrolment, preparation, selectors, sessions
from raters.errors import ListeningError
from raters.models import CategorySession, ListeningTest, Rater, Rating, Stimulus, Trial
from tests.listening_setup import (
    add_closed_sessions,
    answer_session,
    build_listening_challenge,
    deliver,
    get_sound,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def listening(db):
    # A long session (many stimuli per category), so the measured trials are mid-session.
    challenge = build_listening_challenge(
        slug="scale",
        clips_per_system=4,
        listened_fraction=0.0,
        anchors_per_session=3,
        exclude_at=3,
    )
    preparation.set_open(challenge, True)
    return challenge


def _queries(call) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as captured:
        result = call()
    return len(captured), result


def _form(page: str) -> dict:
    return {
        "token": re.search(r'name="token" value="([^"]+)"', page).group(1),
        "key": re.search(r'name="key" value="([^"]+)"', page).group(1),
    }


def _rater_at_trials(challenge) -> tuple[Client, Rater]:
    client = Client()
    rater = enrolment.invite(challenge, label="measured")
    slug = challenge.slug
    client.get(f"/listen/{slug}/join/{rater.access_key}/")
    client.post(f"/listen/{slug}/consent/", {"agree": "yes"})
    client.post(f"/listen/{slug}/instructions/")
    session = rater.sessions.get()
    for clip in session.familiarization.all():
        get_sound(client, f"/listen/{slug}/audio/{clip.token}/")
    assert client.post(f"/listen/{slug}/start/", {"session": session.pk}).status_code == 302
    return client, rater


def _cycle(client: Client, slug: str) -> dict[str, int]:
    """One rating cycle as a browser makes it; the queries of each request."""
    page_n, response = _queries(lambda: client.get(f"/listen/{slug}/"))
    assert response.status_code == 200
    form = _form(response.content.decode())
    sound_n, response = _queries(
        lambda: get_sound(client, f"/listen/{slug}/audio/{form['token']}/", HTTP_RANGE="bytes=0-")
    )
    assert response.status_code == 206
    save_n, response = _queries(
        lambda: client.post(f"/listen/{slug}/rate/", {**form, "quality": "6", "fit": "5"})
    )
    assert response.status_code == 303
    return {"page": page_n, "sound": sound_n, "save": save_n}


def test_page_save_and_sound_cost_as_many_queries_at_1000_sessions_as_at_10(listening):
    client, rater = _rater_at_trials(listening)
    slug = listening.slug
    _cycle(client, slug)  # the first trial's page differs (nothing answered yet)
    add_closed_sessions(listening, 10)
    small = _cycle(client, slug)
    add_closed_sessions(listening, 990)
    assert CategorySession.objects.count() == 1001
    large = _cycle(client, slug)
    assert large == small
    # A handful each, the rater and challenge included (one query: no server-side session; a
    # sound's trial read with them),
    # with the savepoints the test's own transaction adds around each atomic block. (A save
    # reads the test's row with its trial, on PostgreSQL FOR SHARE: publishing waits for it.
    # The rater-quality rules come with the test read with the rater: no query of their own.)
    assert small == {"page": 4, "sound": 2, "save": 8}, small
    assert rater.sessions.get().state == CategorySession.State.OPEN  # still mid-session


def test_a_sound_fetched_again_is_one_read_and_no_write(listening):
    """The page preloads the next sound and fetches it again on its turn: what was recorded as
    delivered already is not written again (ranges only grow)."""
    client, _ = _rater_at_trials(listening)
    slug = listening.slug
    page = client.get(f"/listen/{slug}/").content.decode()
    form = _form(page)
    following = re.search(r'<audio preload="auto" src="[^"]*/audio/([^/"]+)/" hidden', page)
    url = f"/listen/{slug}/audio/{form['token']}/"
    first, _ = _queries(lambda: get_sound(client, url, HTTP_RANGE="bytes=0-"))
    trial = Trial.objects.get(token=form["token"])
    with CaptureQueriesContext(connection) as again:
        assert get_sound(client, url, HTTP_RANGE="bytes=0-").status_code == 206
        assert get_sound(client, url, HTTP_RANGE="bytes=100-199").status_code == 206
    assert first > 1
    # One read a fetch (the rater with the trial; a prepared statement on PostgreSQL), no write.
    statements = [q["sql"] for q in again.captured_queries]
    assert len(statements) == 2, statements
    assert all(q.split()[0] in ("SELECT", "EXECUTE") for q in statements), statements
    writes = [
        q
        for q in statements
        if q.split()[0].upper() in ("UPDATE", "INSERT", "DELETE") or "foley_update" in q
    ]
    assert not writes, statements
    after = Trial.objects.get(token=form["token"])
    assert (after.served_at, after.delivered_at, after.delivered_ranges) == (
        trial.served_at,
        trial.delivered_at,
        trial.delivered_ranges,
    )
    # A range not yet delivered is recorded as before.
    get_sound(client, f"/listen/{slug}/audio/{following.group(1)}/", HTTP_RANGE="bytes=0-99")
    assert Trial.objects.get(token=following.group(1)).delivered_ranges == [[0, 100]]


def test_a_diversity_save_costs_as_many_queries_at_1000_sessions_as_at_10(listening, organizer):
    rater = enrolment.enrol_organizer_for_diversity(listening, organizer)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    trials = diversity.trials(rater)

    def save(n: int) -> int:
        deliver(rater, trials[n].token)
        count, (_, created) = _queries(
            lambda: diversity.save_rating(
                rater, trials[n].token, diversity=5, key=f"diversity-{n:04d}", require_heard=True
            )
        )
        assert created
        return count

    add_closed_sessions(listening, 10)
    small = save(0)
    add_closed_sessions(listening, 990)
    assert save(1) == small


def _need_by_scan(challenge) -> dict[int, int]:
    """`category_need` as it was computed before sessions carried their summary: from every
    rating of the challenge and every session's verdict by the rules."""
    test = selectors.listening_test(challenge)
    teams: dict[int, list] = {}
    for category_id, team_id in Stimulus.objects.filter(challenge=challenge).values_list(
        "category_id", "system__team_id"
    ):
        teams.setdefault(category_id, []).append(team_id)
    excluded = set(selectors.excluded_sessions(challenge))
    moment = timezone.now()
    counting: dict[int, list] = {}
    for session in CategorySession.objects.filter(rater__challenge=challenge).annotate(
        last=Max("trials__rating__created_at")
    ):
        if session.last is not None:
            active = session.last >= moment - sessions.ABANDONED_AFTER
        elif session.rater.kind == "crowd":  # held only once its examples were heard
            active = session.familiarized_at is not None and (
                session.familiarized_at >= moment - sessions.CROWD_FIRST_ANSWER_WITHIN
            )
        else:  # not answered yet: its place is held a short while only
            active = session.created_at >= moment - sessions.FIRST_ANSWER_WITHIN
        if session.pk in excluded or (session.state != "closed" and not active):
            continue
        counting.setdefault(session.category_id, []).append(session.rater.team_id)
    return {
        category_id: max(
            0,
            test.target_ratings
            - min(
                sum(1 for t in counting.get(category_id, []) if t is None or t != owner)
                for owner in owners
            ),
        )
        for category_id, owners in teams.items()
    }


def _assert_summary_equals_scan(challenge, monkeypatch) -> None:
    need = sessions.category_need(challenge)  # judges stale verdicts again first
    scanned_last = dict(
        CategorySession.objects.filter(rater__challenge=challenge)
        .annotate(last=Max("trials__rating__created_at"))
        .values_list("pk", "last")
    )
    stored = {
        pk: (last, excluded)
        for pk, last, excluded in CategorySession.objects.filter(
            rater__challenge=challenge
        ).values_list("pk", "last_answer_at", "excluded")
    }
    excluded = set(selectors.excluded_sessions(challenge))
    assert {pk: last for pk, (last, _) in stored.items()} == scanned_last
    assert {pk for pk, (_, flag) in stored.items() if flag} == excluded
    assert need == _need_by_scan(challenge)
    # With every open session abandoned (the cut-off in the future) they agree as well.
    monkeypatch.setattr(sessions, "ABANDONED_AFTER", timedelta(hours=-1))
    monkeypatch.setattr(sessions, "FIRST_ANSWER_WITHIN", timedelta(hours=-1))
    monkeypatch.setattr(sessions, "CROWD_FIRST_ANSWER_WITHIN", timedelta(hours=-1))
    assert sessions.category_need(challenge) == _need_by_scan(challenge)
    monkeypatch.undo()


def test_the_sessions_summary_equals_a_scan_after_a_mixed_history(listening, monkeypatch):
    raters = []
    for n in range(6):
        rater = enrolment.invite(listening, label=f"r{n}")
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        raters.append(rater)
    # A careful rater, and one who misrates every check (excluded by the anchors rule).
    answer_session(raters[0], sessions.next_session(raters[0]).session)
    bad = sessions.next_session(raters[1]).session
    sessions.complete_familiarization(bad, require_heard=False)
    while (trial := sessions.next_trial(bad)) is not None:
        sessions.save_rating(raters[1], trial.token, quality=1, fit=10, key=f"bad-{trial.token}")
    # A session left part-way, with a resubmitted answer (same key: stored once).
    part = sessions.next_session(raters[2]).session
    sessions.complete_familiarization(part, require_heard=False)
    trial = sessions.next_trial(part)
    for _ in range(2):
        sessions.save_rating(raters[2], trial.token, quality=3, fit=4, key="again-0001")
    # A session begun, then paused by the organizers (answers refused), then reopened.
    paused = sessions.next_session(raters[3]).session
    sessions.complete_familiarization(paused, require_heard=False)
    preparation.set_open(listening, False)
    with pytest.raises(ListeningError):
        sessions.save_rating(
            raters[3], sessions.next_trial(paused).token, quality=5, fit=5, key="paused-01"
        )
    preparation.set_open(listening, True)
    answer_session(raters[3], paused)
    # A session opened with no answer at all, and a second category for the careful rater.
    sessions.next_session(raters[4])
    answer_session(raters[0], sessions.next_session(raters[0]).session, quality=2, fit=9)
    assert Rating.objects.filter(idempotency_key="again-0001").count() == 1
    _assert_summary_equals_scan(listening, monkeypatch)
    assert CategorySession.objects.filter(excluded=True).count() == 1

    # The organizers make the anchors rule stricter: verdicts assessed by the old rules are
    # stale and assessed again before anything reads them.
    ListeningTest.objects.filter(challenge=listening).update(exclude_at=1)
    _assert_summary_equals_scan(listening, monkeypatch)
    # ... and lenient again.
    ListeningTest.objects.filter(challenge=listening).update(exclude_at=20)
    _assert_summary_equals_scan(listening, monkeypatch)
    assert not CategorySession.objects.filter(excluded=True).exists()
