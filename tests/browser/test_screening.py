"""The screening stage in a real headless Chromium at 1,366 px and on a 390 px phone: a crowd
worker who hears the tone passes the headphone check and reaches the examples; one who cannot
hear it (no headphones: every guess misses) is screened out with the run's screen-out code, and
the same participant id gets no further attempt, from the same browser or another."""

from __future__ import annotations

import pytest

from raters import preparation, selectors
from raters.models import Rater, Screening, ScreeningTrial
from tests.chromium import chromium_page
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _challenge(slug: str, **options):
    challenge = build_listening_challenge(slug=slug, categories=1, familiarization_clips=2)
    preparation.set_open(challenge, True)
    test = selectors.listening_test(challenge)
    Screening.objects.create(test=test, level_check=False, **options)
    return challenge


def _link(challenge, participant: str, session: str | None = None) -> str:
    key = selectors.listening_test(challenge).crowd_key
    session = session or f"s-{participant}"
    return f"/listen/{challenge.slug}/crowd/{key}/?PROLIFIC_PID={participant}&SESSION_ID={session}"


def _through_consent(page, url: str) -> None:
    page.goto(url)
    page.check("#agree")
    with page.expect_navigation():
        page.click("button[type=submit]")
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert page.url.endswith("/checks/")


def _take_check(page, choose, *, screenshot: str = "") -> None:
    """Each sound of the headphone check played to its end (the server says when it was heard),
    then answered by `choose` (given the trial the page shows)."""
    while page.locator("form#screening").count():
        token = page.get_attribute("input[name=token]", "value")
        page.locator("ol.examples audio").evaluate("a => a.play()")
        page.wait_for_selector("ol.examples .heard:text-is('heard')")
        page.wait_for_selector("#start:not([disabled])")
        if screenshot:
            assert_in_layout(page)
            page.screenshot(path=str(DOCS_SCREENSHOTS / screenshot), full_page=True)
            screenshot = ""
        trial = ScreeningTrial.objects.get(token=token)
        page.check(f"input[name=answer][value='{choose(trial)}']")
        with page.expect_navigation():
            page.click("#start")


def test_a_worker_who_hears_the_tone_passes_and_reaches_the_examples(live_server, chromium_path):
    challenge = _challenge("screen-pass")
    with chromium_page(chromium_path, viewport=DESKTOP) as page:
        _through_consent(page, live_server.url + _link(challenge, "PIDhears"))
        assert "sound 1 of 6" in page.inner_text("#screening-progress")
        html = page.content()
        trial = ScreeningTrial.objects.get(token=page.get_attribute("input[name=token]", "value"))
        assert f'value="{trial.answer_key}" required' in html  # every choice alike, no more
        _take_check(page, lambda t: t.answer_key, screenshot="screening-headphones.png")
        page.wait_for_selector("ol.examples button.play")
        assert "Examples of" in page.inner_text("main")
    rater = Rater.objects.get(participant_id="PIDhears")
    attempt = rater.screening_attempts.get()
    assert attempt.state == "passed" and attempt.summary == "6 of 6 right, pass at 5"
    assert rater.sessions.count() == 1


def test_a_worker_who_cannot_hear_the_tone_is_screened_out_for_good(live_server, chromium_path):
    # On a phone (the check's page mid-way and the end), then the end again at 1,366 px: the
    # check itself is the same at both widths, and hearing it through takes real time.
    challenge = _challenge(
        "screen-out",
        attempts=1,
        screen_out_url="https://app.prolific.com/submissions/complete",
    )
    pid = "PIDnohp"
    code = Screening.objects.get(test__challenge=challenge).screen_out_code
    with chromium_page(chromium_path, viewport=PHONE) as page:
        _through_consent(page, live_server.url + _link(challenge, pid))
        _take_check(
            page,
            lambda t: "2" if t.answer_key != "2" else "3",
            screenshot="screening-headphones-phone.png",
        )
        for viewport, name in ((PHONE, "screened-out-phone.png"), (DESKTOP, "screened-out.png")):
            page.set_viewport_size(viewport)
            page.reload()
            page.wait_for_selector("#screened-out")
            assert_in_layout(page)
            assert "did not pass (0 of 6 right, pass at 5)" in page.inner_text("#screened-out")
            assert page.inner_text("#screen-out-code") == code
            assert f"cc={code}" in page.get_attribute("#screen-out", "href")
            page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
        # The same worker again: through the link, or a retry posted by hand.
        page.goto(live_server.url + _link(challenge, pid))
        page.wait_for_selector("#screened-out")
        status = page.evaluate(
            "url => fetch(url, {method: 'POST', headers: {'X-CSRFToken': document.cookie"
            ".replace(/.*csrftoken=([^;]+).*/, '$1')}}).then(r => r.url)",
            f"{live_server.url}/listen/{challenge.slug}/checks/retry/",
        )
        assert status.endswith("/checks/")
        page.goto(live_server.url + f"/listen/{challenge.slug}/checks/")
        assert page.locator("#screened-out").count() == 1
    with chromium_page(chromium_path, viewport=DESKTOP) as page:  # another browser, same id
        response = page.goto(live_server.url + _link(challenge, pid, "another-submission"))
        assert response.status == 409
        assert "started the test already" in page.inner_text("#refusal")
    rater = Rater.objects.get(participant_id=pid)
    assert rater.screening_attempts.count() == 1
    assert not rater.sessions.exists()
