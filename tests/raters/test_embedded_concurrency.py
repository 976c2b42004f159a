"""The embedded default under concurrent raters: several raters at once, each through the level
check, a category's examples and its trials, with player events, answers and the screening's
answer racing each other at Django's threaded server, the server `scripts/demo` runs. On SQLite
(the test command without PostgreSQL) as on PostgreSQL: no answer refused for a lock, no 500,
nothing lost or stored twice."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection

from raters import enrolment, preparation
from raters.models import (
    CategorySession,
    Rating,
    Screening,
    ScreeningAttempt,
    ScreeningTrial,
    Trial,
)
from raters.selectors import listening_test
from tests.adversary.bots import Browser
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RATERS = 5
DURATION = 0.5
TOKEN = re.compile(r'name="token" value="([^"]+)"')
ANSWERS = {"anchor_hq_goodfit": (9, 9), "anchor_hq_poorfit": (9, 1), "anchor_lq_poorfit": (1, 1)}


def _through_the_test(browser: Browser, access_key: str, errors: list[str]) -> None:
    """One honest rater, as the page's script would: every sound heard in real time."""
    try:
        browser.join(access_key)
        assert browser.http.get(browser.path("consent/")).status_code == 200  # the CSRF cookie
        assert browser.post("consent/", {"agree": "yes"}).status_code == 302
        assert browser.post("instructions/", {}).status_code == 302
        # The level check: its reference sound heard, then confirmed.
        page = browser.http.get(browser.path("checks/"))
        assert page.status_code == 200, page.text[:300]
        token = TOKEN.search(page.text).group(1)
        reference = ScreeningTrial.objects.select_related("audio").get(token=token)
        browser.listen(token, reference.audio.duration_s)
        done = browser.post("checks/answer/", {"token": token, "answer": "set"})
        assert done.status_code == 303, done.text[:300]
        assert browser.http.get(browser.path("checks/")).status_code == 302  # cleared
        # The examples, then Start.
        session, examples = browser.examples()
        for example in examples:  # one after another, each to its end
            browser.listen(example, DURATION)
        assert browser.post("start/", {"session": session}).status_code == 302
        # Every trial heard and answered; each answer sent twice, as a double click does.
        while True:
            page = browser.page()
            if "data-listening" not in page:
                break
            form = browser.trial()
            role = Trial.objects.get(token=form["token"]).role
            browser.listen(form["token"], DURATION)
            quality, fit = ANSWERS.get(role, (6, 5))
            first = browser.rate(form, quality, fit)
            again = browser.rate(form, quality, fit)
            assert first.status_code == 303 and again.status_code == 303, first.text[:300]
    except Exception as exc:
        errors.append(f"{access_key[:6]}: {exc!r}")
    finally:
        connection.close()


def test_raters_at_once_on_the_embedded_default_lose_nothing(live_server, settings):
    # Plain HTTP on loopback, as the demo serves: the cookies are not marked for HTTPS only.
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = False
    challenge = build_listening_challenge(
        slug="embedded",
        categories=2,
        clips_per_system=1,
        familiarization_clips=2,
        anchors_per_session=3,
        duration=DURATION,
        categories_min=1,
        categories_max=1,
    )
    Screening.objects.create(
        test=listening_test(challenge), who="everyone", level_check=True, headphone_check=False
    )
    preparation.set_open(challenge, True)
    raters = [enrolment.invite(challenge, label=f"r{n}") for n in range(RATERS)]
    statuses: list[int] = []
    browsers = []
    for _ in raters:
        # By address: a cookie jar keeps no cookie of a host named "localhost".
        browser = Browser(live_server.url.replace("localhost", "127.0.0.1"), challenge.slug)
        browser.http.event_hooks["response"].append(lambda r: statuses.append(r.status_code))
        browsers.append(browser)
    errors: list[str] = []
    threads = [
        threading.Thread(target=_through_the_test, args=(b, r.access_key, errors))
        for b, r in zip(browsers, raters, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    for browser in browsers:
        browser.close()
    assert not errors, errors
    assert statuses and not [s for s in statuses if s >= 500]
    # Every trial of every session answered once: nothing lost, nothing stored twice.
    sessions = CategorySession.objects.filter(rater__in=raters)
    assert sessions.count() == RATERS
    trials = Trial.objects.filter(session__in=sessions)
    assert Rating.objects.filter(trial__in=trials).count() == trials.count() > 0
    assert ScreeningAttempt.objects.filter(rater__in=raters, state="passed").count() == RATERS
