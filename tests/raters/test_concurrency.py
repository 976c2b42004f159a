"""Answers racing each other on PostgreSQL: the same request twice at once stores one rating;
two different answers to one trial at once store one and refuse the other. And the preparation
job on a real worker."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from raters import enrolment, preparation, selectors, sessions
from raters.errors import ListeningError
from raters.job_kinds import PREPARE_LISTENING
from raters.models import Rating
from stimuli.models import Job
from tests.conftest import wait_for_job
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _race(calls):
    barrier = threading.Barrier(len(calls))
    results, errors = [], []

    def run(call):
        try:
            barrier.wait()
            results.append(call())
        except ListeningError as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results, errors


@pytest.fixture
def trial_of_rater():
    challenge = build_listening_challenge(slug="race")
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    return rater, sessions.next_trial(session)


@pytest.mark.parametrize("round_", range(3))
def test_the_same_request_twice_at_once_stores_one_rating(trial_of_rater, round_):
    rater, trial = trial_of_rater

    def submit():
        return sessions.save_rating(rater, trial.token, quality=4, fit=6, key="same-key-1")

    results, errors = _race([submit] * 4)
    assert not errors, errors
    assert sorted(created for _, created in results) == [False, False, False, True]
    assert len({rating.pk for rating, _ in results}) == 1
    assert Rating.objects.count() == 1


def test_two_answers_to_one_trial_at_once_store_one(trial_of_rater):
    rater, trial = trial_of_rater
    calls = [
        lambda k=k: sessions.save_rating(rater, trial.token, quality=k, fit=k, key=f"key-{k:06d}")
        for k in range(3)
    ]
    results, errors = _race(calls)
    assert len(results) == 1 and len(errors) == 2
    assert {e.status for e in errors} == {409}
    assert Rating.objects.get().quality == results[0][0].quality


def test_a_save_whose_connection_is_killed_mid_way_stores_nothing_and_its_resend_once(
    trial_of_rater,
):
    """The database connection of a save is terminated while the save holds its locks and waits
    on its insert (as when a web worker is killed): nothing of it stays, the session's summary
    is untouched, and the browser's resend under the same key stores the answer once."""
    from django.db import connections
    from django.db.utils import DatabaseError

    from raters.models import CategorySession

    rater, trial = trial_of_rater
    outcome: dict = {}
    ready = threading.Event()

    def save():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                outcome["pid"] = cursor.fetchone()[0]
            ready.set()
            sessions.save_rating(rater, trial.token, quality=6, fit=3, key="killed-0001")
            outcome["result"] = "stored"
        except DatabaseError as exc:
            outcome["result"] = type(exc).__name__
        finally:
            connection.close()

    # Another transaction holds an uncommitted answer to the trial: the save gets its locks,
    # then waits on the trial's unique answer.
    blocker = connections.create_connection("default")
    blocker.set_autocommit(False)
    with blocker.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Rating._meta.db_table} (trial_id, quality, fit, idempotency_key, "
            "created_at) VALUES (%s, 1, 1, 'blocker-0001', now())",
            [trial.pk],
        )
    thread = threading.Thread(target=save)
    thread.start()
    assert ready.wait(60)
    with connection.cursor() as cursor:
        while True:  # until the save waits on the lock (a state, not a time)
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [outcome["pid"]]
            )
            row = cursor.fetchone()
            assert row is not None, outcome  # the save's connection is still there
            if row[0] == "Lock":
                break
            time.sleep(0.01)
        cursor.execute("SELECT pg_terminate_backend(%s)", [outcome["pid"]])
    thread.join(60)
    blocker.rollback()
    blocker.close()
    assert outcome["result"] != "stored"
    assert not Rating.objects.exists()
    session = CategorySession.objects.get(pk=trial.session_id)
    assert session.last_answer_at is None and session.assessed_with == ""
    # The browser resends the same request: stored once, and once only.
    first, created = sessions.save_rating(rater, trial.token, quality=6, fit=3, key="killed-0001")
    again, created_again = sessions.save_rating(
        rater, trial.token, quality=6, fit=3, key="killed-0001"
    )
    assert created and not created_again and first.pk == again.pk
    assert Rating.objects.count() == 1
    session.refresh_from_db()
    assert session.last_answer_at == first.created_at


def test_a_worker_prepares_the_listening_test(celery_worker, organizer):
    challenge = build_listening_challenge(slug="worker-prep")
    selectors.listening_test(challenge)
    # Start from nothing rendered: the worker builds the anchors and diversity files again.
    challenge.anchors.all().delete()
    challenge.diversity_items.all().delete()
    job = wait_for_job(preparation.request_preparation(challenge, organizer).pk)
    assert job.kind == PREPARE_LISTENING
    assert job.state == Job.State.SUCCEEDED, (job.error, celery_worker.log())
    assert job.result["stimuli"] == 12
    # Every private source (12 evaluation clips per category) is behind exactly one anchor.
    assert challenge.anchors.count() == 3 * 12
    assert challenge.diversity_items.filter(audio__isnull=False).count() == 6


def test_start_clicked_twice_at_once_opens_one_session():
    challenge = build_listening_challenge(slug="double-start")
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge)
    results, errors = _race([lambda: sessions.next_session(rater)] * 3)
    assert not errors and len(results) == 3
    assert len({step.session.pk for step in results}) == 1
    assert rater.sessions.count() == 1


def test_a_crowd_link_opened_twice_at_once_enrols_one_rater():
    challenge = build_listening_challenge(slug="double-crowd")
    preparation.set_open(challenge, True)  # a closed test refuses at the link
    key = selectors.listening_test(challenge).crowd_key

    def enrol():
        return enrolment.enrol_crowd(challenge, key, participant_id="5f00aa11", session_id="s1")

    results, errors = _race([enrol] * 4)
    assert not errors and len(results) == 4
    assert len({rater.pk for rater in results}) == 1
    assert challenge.raters.count() == 1


@pytest.mark.parametrize("round_", range(3))
def test_one_participant_id_in_two_browsers_at_once_gets_one_of_them_in(round_):
    """The same participant id from browsers with other session ids (or none), all at once:
    one is enrolled, every other is refused as a returning worker would be, never handed the
    same rater."""
    challenge = build_listening_challenge(slug=f"id-race-{round_}")
    preparation.set_open(challenge, True)
    key = selectors.listening_test(challenge).crowd_key

    def enrol(session_id: str):
        return lambda: enrolment.enrol_crowd(
            challenge, key, participant_id="5f00bb22", session_id=session_id
        )

    results, errors = _race([enrol("s1"), enrol("s2"), enrol(""), enrol("s3")])
    assert len(results) == 1 and len(errors) == 3
    assert {error.status for error in errors} == {409}
    assert challenge.raters.count() == 1
    winner = challenge.raters.get()
    assert winner.pk == results[0].pk and winner.crowd_session_id == results[0].crowd_session_id


def test_pausing_the_test_while_a_rater_enrols_does_not_deadlock(monkeypatch):
    # Enrolment locks the test's row, then inserts a rater that points at the challenge; pausing
    # locks the challenge's row, then updates the test's. With a plain FOR UPDATE on the
    # challenge the two would wait on each other (PostgreSQL key-share locks every referenced
    # row on insert); the challenge lock is FOR NO KEY UPDATE, which inserts do not wait for.
    from raters.models import Rater

    challenge = build_listening_challenge(slug="no-deadlock")
    preparation.set_open(challenge, True)
    holding = threading.Event()
    clean = Rater.full_clean

    def slow_clean(self, *args, **kwargs):
        holding.set()  # enrolment holds the test's row now
        # ... until the pause has taken the challenge's row and waits on the test's (a state,
        # not a time).
        with connection.cursor() as cursor:
            while True:
                # Inside a transaction the activity view is read once: read it anew each time.
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database() AND pid <> pg_backend_pid()"
                )
                if cursor.fetchone()[0]:
                    break
                time.sleep(0.01)
        return clean(self, *args, **kwargs)

    monkeypatch.setattr(Rater, "full_clean", slow_clean)

    def pause():
        holding.wait(10)
        return preparation.set_open(challenge, False)

    results, errors = _race([lambda: enrolment.invite(challenge), pause])
    assert not errors and len(results) == 2, results
    assert challenge.raters.count() == 1
    assert not selectors.listening_test(challenge).is_open
