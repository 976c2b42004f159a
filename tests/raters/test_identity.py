"""A rater's browser is known by a signed cookie scoped to its challenge's pages: set by the
invitation link, refused when forged or brought to another challenge, and read together with
the challenge and the test's settings in one query (no server-side session on the hot pages)."""

from __future__ import annotations

import pytest
from django.core import signing
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from raters import delivery, enrolment, preparation, selectors, statements
from raters.models import Rater, Trial
from raters.views import RATER_COOKIE, RATER_SALT
from tests.listening_setup import build_listening_challenge, deliver, rater_at_trials

pytestmark = pytest.mark.django_db


@pytest.fixture
def listening(db):
    challenge = build_listening_challenge(slug="identity", listened_fraction=0.0)
    preparation.set_open(challenge, True)
    return challenge


def _joined(challenge, rater: Rater) -> Client:
    client = Client()
    assert client.get(f"/listen/{challenge.slug}/join/{rater.access_key}/").status_code == 302
    return client


def test_the_invitation_sets_a_signed_http_only_cookie_for_the_challenge_pages_only(listening):
    rater = enrolment.invite(listening)
    client = _joined(listening, rater)
    cookie = client.cookies[RATER_COOKIE.format(listening.slug)]
    assert cookie["path"] == f"/listen/{listening.slug}/"
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert cookie.value != rater.access_key  # signed, not the bare key
    assert "sessionid" not in client.cookies  # no server-side session was needed
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/listen/{listening.slug}/").status_code in (200, 302)
    assert not [q for q in queries.captured_queries if "django_session" in q["sql"]]


def test_a_forged_or_foreign_cookie_is_refused(listening):
    rater = enrolment.invite(listening)
    name = RATER_COOKIE.format(listening.slug)
    forged = Client()
    forged.cookies[name] = rater.access_key  # the key itself, unsigned
    assert forged.get(f"/listen/{listening.slug}/consent/").status_code == 403
    wrong_key = Client()
    wrong_key.cookies[name] = signing.get_cookie_signer(salt=name + "other").sign(rater.access_key)
    assert wrong_key.get(f"/listen/{listening.slug}/consent/").status_code == 403
    # A rater of another challenge, its key properly signed for this challenge's cookie: no
    # rater of this challenge has that key.
    other = build_listening_challenge(slug="identity-other", listened_fraction=0.0)
    stranger = enrolment.invite(other)
    moved = Client()
    moved.cookies[name] = signing.get_cookie_signer(salt=name + RATER_SALT).sign(
        stranger.access_key
    )
    assert moved.get(f"/listen/{listening.slug}/consent/").status_code == 403
    assert _joined(listening, rater).get(f"/listen/{listening.slug}/consent/").status_code == 200


def test_the_hand_written_statements_read_what_the_orm_reads(listening):
    rater, session = rater_at_trials(listening)
    trial = session.trials.order_by("position").first()
    deliver(rater, trial.token, "bytes=0-")

    found = statements.rater_by_key(rater.access_key, listening.slug)
    expected = Rater.objects.get(pk=rater.pk)
    fields = [f.attname for f in Rater._meta.concrete_fields]
    assert [getattr(found, f) for f in fields] == [getattr(expected, f) for f in fields]
    assert found.challenge.phase == listening.phase and found.challenge.slug == listening.slug
    test = selectors.listening_test(found.challenge)
    assert test.pk == selectors.listening_test(listening).pk  # as read with the rater
    assert statements.rater_by_key(rater.access_key, "another-slug") is None

    read = statements.trial_of(rater, trial.token, test)
    stored = Trial.objects.get(pk=trial.pk)
    fields = [f.attname for f in Trial._meta.concrete_fields]
    assert [getattr(read, f) for f in fields] == [getattr(stored, f) for f in fields]
    assert read.delivered_ranges == [[0, read.delivered.size_bytes]]  # JSON, decoded
    assert read.delivered == delivery.delivered_audio(stored.audio, test)
    assert read.delivered.file and read.delivered.duration_s == pytest.approx(
        listening.clip_duration_s, abs=0.01
    )
    other = enrolment.invite(listening)
    assert statements.trial_of(other, trial.token, test) is None  # another rater's trial
    answering, held = statements.trial_to_answer(trial.token, test)
    assert answering.session.pk == session.pk and answering.session.rater_id == rater.pk
    assert held.pk == test.pk and held.is_open == test.is_open


@pytest.mark.django_db(transaction=True)
def test_the_statements_prepared_on_a_connection_outlive_a_rollback_and_come_back_after_a_new_one():
    challenge = build_listening_challenge(slug="prepared", listened_fraction=0.0)
    rater = enrolment.invite(challenge)

    def found() -> bool:
        return statements.rater_by_key(rater.access_key, challenge.slug).pk == rater.pk

    with pytest.raises(RuntimeError), transaction.atomic():
        assert found()  # prepared inside a transaction that is rolled back
        raise RuntimeError
    assert found()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM pg_prepared_statements")
            assert "foley_rater_by_key" in {name for (name,) in cursor.fetchall()}
    connection.close()  # a new connection has no prepared statements: prepared again
    assert found()


def _held(client: Client, challenge) -> str | None:
    """The access key the browser holds: the cookie's signature carries a timestamp, so a
    cookie set again a second later differs while holding the same rater."""
    cookie = client.cookies.get(RATER_COOKIE.format(challenge.slug))
    if cookie is None or not cookie.value:
        return None
    return cookie.value.rsplit(":", 2)[0]  # value:timestamp:signature


def test_another_raters_link_switches_the_browser_only_after_a_confirming_post(listening):
    first, second = enrolment.invite(listening), enrolment.invite(listening)
    browser = Client(enforce_csrf_checks=True)
    assert browser.get(f"/listen/{listening.slug}/join/{first.access_key}/").status_code == 302
    held = _held(browser, listening)
    # Another site sends the browser to the second rater's link: a page asks, nothing switches.
    url = f"/listen/{listening.slug}/join/{second.access_key}/"
    page = browser.get(url)
    assert page.status_code == 200 and "rates in this listening test as someone else" in (
        page.content.decode()
    )
    assert _held(browser, listening) == held
    # Its own link again: nothing to confirm.
    assert browser.get(f"/listen/{listening.slug}/join/{first.access_key}/").status_code == 302
    # A cross-site POST has no CSRF token: refused.
    assert browser.post(url).status_code == 403 and _held(browser, listening) == held
    # The person confirms on the page.
    token = browser.cookies["csrftoken"].value
    assert browser.post(url, {"csrfmiddlewaretoken": token}).status_code == 302
    assert _held(browser, listening) != held
    # Now the browser is the second rater: its link asks nothing, the first one's does.
    assert browser.get(url).status_code == 302
    assert browser.get(f"/listen/{listening.slug}/join/{first.access_key}/").status_code == 200


def test_a_crowd_link_enrols_another_rater_only_after_a_confirming_post(listening):
    test = selectors.listening_test(listening)
    url = f"/listen/{listening.slug}/crowd/{test.crowd_key}/"
    browser = Client()
    assert browser.get(url + "?PROLIFIC_PID=worker-1").status_code == 302
    held, count = _held(browser, listening), Rater.objects.count()
    # The same worker back through the link: no question.
    assert browser.get(url + "?PROLIFIC_PID=worker-1").status_code == 302
    # Another worker's link in this browser: asked first, nobody enrolled.
    page = browser.get(url + "?PROLIFIC_PID=worker-2")
    assert page.status_code == 200 and 'id="switch"' in page.content.decode()
    assert Rater.objects.count() == count and _held(browser, listening) == held
    assert browser.post(url + "?PROLIFIC_PID=worker-2").status_code == 302
    assert Rater.objects.count() == count + 1 and _held(browser, listening) != held
    assert Rater.objects.filter(participant_id="worker-2").exists()
