"""A crowd worker's first pages in a real headless Chromium at 1,366 px and on a 390 px phone:
a closed test refused at the link, the expected time before consent, the examples' players
stopping each other with messages that name what happened, the P key, and a trial that names
the scale still to answer."""

from __future__ import annotations

import pytest

from raters import preparation, selectors, sessions
from raters.models import Rater
from tests.chromium import chromium_page
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _link(challenge, participant: str) -> str:
    key = selectors.listening_test(challenge).crowd_key
    return f"/listen/{challenge.slug}/crowd/{key}/?PROLIFIC_PID={participant}&SESSION_ID=s-{participant}"


# A player's own events to wait on (evaluate awaits the promise).
PLAYED_A_WHILE = (
    "a => new Promise(done => { const check = () => { if (a.currentTime > 0.2) done(); "
    "else a.addEventListener('timeupdate', check, {once: true}); }; check(); })"
)
PAUSED = (
    "a => a.paused || new Promise(done => a.addEventListener('pause', () => done(true), "
    "{once: true}))"
)
NEXT_EVENT = (
    "() => {{ window.nextEvent = new Promise(done => document.querySelectorAll("
    "'ol.examples audio').forEach(a => a.addEventListener('{event}', () => done(true), "
    "{{once: true}}))); }}"
)


def _no_site_navigation(page) -> None:
    nav = page.inner_text("header.site nav")
    assert "Results" not in nav and "Log in" not in nav and "Organize" not in nav


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_closed_test_refuses_at_the_crowd_link(live_server, chromium_path, viewport):
    challenge = build_listening_challenge(slug="crowd-closed", categories=1)
    with chromium_page(chromium_path, viewport=viewport) as page:
        response = page.goto(live_server.url + _link(challenge, "PIDclosed1"))
        assert response.status == 409
        assert_in_layout(page)
        _no_site_navigation(page)
        refusal = page.inner_text("#refusal")
        assert refusal.startswith("This study is closed.")
        assert "return your submission" in refusal
        assert page.locator("text=Back to the listening test").count() == 0
        if viewport is PHONE:
            page.screenshot(path=str(DOCS_SCREENSHOTS / "crowd-closed-phone.png"), full_page=True)
    assert not Rater.objects.filter(participant_id="PIDclosed1").exists()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_crowd_worker_hears_one_example_at_a_time_and_is_told_what_happened(
    live_server, chromium_path, viewport
):
    challenge = build_listening_challenge(
        slug="crowd-examples", categories=2, duration=3.0, familiarization_clips=3
    )
    preparation.set_open(challenge, True)
    slug = challenge.slug
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.goto(live_server.url + _link(challenge, "PIDexamples"))
        assert page.url.endswith("/consent/")
        assert_in_layout(page)
        _no_site_navigation(page)
        assert "The study takes about" in page.inner_text("#expected-time")
        page.check("#agree")
        with page.expect_navigation():
            page.click("button[type=submit]")
        assert "You will rate 1 category." in page.inner_text("main")
        with page.expect_navigation():
            page.click("button[type=submit]")
        page.wait_for_selector("ol.examples button.play")
        assert_in_layout(page)
        _no_site_navigation(page)

        # Two examples started one after the other: the first stops, and says why. (Waits are
        # on selectors or on the players' own events: the CSP allows no page-side predicates.)
        first, second, third = (page.locator("ol.examples li").nth(n) for n in range(3))
        first.locator("audio").evaluate("a => a.play()")
        first.locator("audio").evaluate(PLAYED_A_WHILE)
        second.locator("audio").evaluate("a => a.play()")
        assert first.locator("audio").evaluate(PAUSED)
        assert second.locator("audio").evaluate("a => !a.paused")
        page.wait_for_selector(
            "ol.examples li:nth-child(1) .heard:has-text('Stopped when Example 2 started')"
        )
        second.locator("audio").evaluate("a => a.pause()")

        # Played at double speed: the message names the speed, not a skip.
        third.locator("audio").evaluate("a => { a.playbackRate = 2; a.play(); }")
        page.wait_for_selector("ol.examples li:nth-child(3) .heard:has-text('2\u00d7 speed')")
        assert "Skipping" not in third.locator(".heard").inner_text()

        # Skipped ahead: the message says from where to where.
        first.locator("audio").evaluate(
            "a => { a.playbackRate = 1; a.currentTime = 0; a.play().then(() => "
            "setTimeout(() => { a.currentTime = 2.5; }, 300)); }"
        )
        page.wait_for_selector(
            "ol.examples li:nth-child(1) .heard:has-text('You skipped ahead from')"
        )
        first.locator("audio").evaluate(PAUSED)  # it played to its end

        # P plays the first example not yet heard, and P again pauses it.
        page.evaluate(NEXT_EVENT.format(event="play"))
        page.keyboard.press("p")
        page.evaluate("() => window.nextEvent")
        page.evaluate(NEXT_EVENT.format(event="pause"))
        page.keyboard.press("p")
        page.evaluate("() => window.nextEvent")
        assert page.eval_on_selector_all("ol.examples audio", "els => els.every(a => a.paused)")
        assert page.is_disabled("#start")

        # The trial: Next names the scales still to answer.
        rater = Rater.objects.get(participant_id="PIDexamples")
        sessions.complete_familiarization(rater.sessions.get(), require_heard=False)
        page.goto(f"{live_server.url}/listen/{slug}/")
        page.wait_for_selector("form[data-listening]")
        assert_in_layout(page)
        _no_site_navigation(page)
        assert (
            page.inner_text("#next-hint") == "Still to answer: Audio quality, Fit to the category."
        )
        name = "trial-phone.png" if viewport is PHONE else "trial.png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
