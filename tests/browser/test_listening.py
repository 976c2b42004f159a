"""The listening test in a real headless Chromium: a rater completes a category session with a
reload and a double click in the middle, and an organizer rates diversity."""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raters import enrolment, preparation, selectors
from raters.models import DiversityRating, Rater, Rating
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _listen_to_the_end(page, shortcut: bool = False) -> None:
    """Press Play (keyboard) and wait for the scales to open, which needs the clip's end."""
    if shortcut:
        page.keyboard.press("p")
    else:
        page.focus("button.play")
        page.keyboard.press("Enter")
    page.wait_for_selector("input[data-scale]:not([disabled])")


def _hear_the_examples(page) -> None:
    """Play the examples one after another (played at once, only the last begun would count:
    a rater hears one sound at a time), then Start, which opens once each played to its end."""
    page.eval_on_selector_all(
        "ol.examples audio",
        "els => els.reduce((prev, a) => { prev.addEventListener('ended', () => a.play(),"
        " {once: true}); return a; })",
    )
    page.eval_on_selector("ol.examples audio", "a => a.play()")
    page.wait_for_selector("#start:not([disabled])")
    with page.expect_navigation():
        page.click("#start")


def test_a_rater_completes_a_category_session(live_server, chromium_path, tmp_path):
    challenge = build_listening_challenge(
        slug="browser-listen",
        categories=2,
        clips_per_system=1,
        anchors_per_session=3,
        familiarization_clips=2,
    )
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge, label="browser")
    slug = challenge.slug
    with chromium_page(chromium_path, viewport={"width": 390, "height": 844}) as page:
        page.goto(f"{live_server.url}/listen/{slug}/join/{rater.access_key}/")
        assert page.url.endswith("/consent/")
        page.check("#agree")
        with page.expect_navigation():
            page.click("button[type=submit]")
        with page.expect_navigation():
            page.click("button[type=submit]")  # instructions: Start

        # Familiarization: Start opens only once every example has played to its end.
        assert page.is_disabled("#start")
        _hear_the_examples(page)

        total = 2 + 3  # one sound of each track's system, one anchor of each type
        seen = []
        for n in range(total):
            page.wait_for_selector("form[data-listening]")
            text = page.inner_text("#progress-text")
            assert text.startswith(f"Sound {n + 1} of {total}")
            assert page.is_disabled("#quality-scale") and page.is_disabled("#next")
            token = page.get_attribute("input[name=token]", "value")
            if n == 2:
                # A reload in the middle resumes at the same, still unanswered trial.
                page.reload()
                assert page.get_attribute("input[name=token]", "value") == token
                assert page.inner_text("#progress-text").startswith(f"Sound {n + 1} of")
            seen.append(token)
            _listen_to_the_end(page, shortcut=n % 2 == 1)
            assert page.is_disabled("#next")  # no answer yet on either scale
            if n == 0:  # on a 390 px phone the scales take the width of the screen
                assert page.locator("#quality-scale").bounding_box()["width"] >= 0.7 * 390
                # One Tab from Play to the first scale (the native player's controls are left
                # out of the order; Play and the P key work it).
                page.focus("button.play")
                page.keyboard.press("Tab")
                assert page.evaluate("document.activeElement.id") == "quality-scale"
            # Keyboard only: the arrow keys set a scale. An untouched scale's first press
            # gives it the middle, shown; the next moves from there.
            page.focus("#quality-scale")
            page.keyboard.press("ArrowRight")
            assert page.input_value("input[name=quality]") == "5"
            assert page.inner_text("#quality-value") == "5"
            page.keyboard.press("ArrowRight")
            assert page.is_disabled("#next")
            page.focus("#fit-scale")
            page.keyboard.press("Home")
            for _ in range(n):
                page.keyboard.press("ArrowRight")
            assert page.input_value("input[name=quality]") == "6"
            with page.expect_navigation():
                if n == 3:
                    page.dblclick("#next")  # a double click stores one answer
                else:
                    page.focus("#next")
                    page.keyboard.press("Enter")
        page.wait_for_selector("#break")
        assert "Category done" in page.inner_text("h1")
        page.screenshot(path=str(tmp_path / "break.png"), full_page=True)

    # Database work stays outside the browser's event loop.
    session = Rater.objects.get(pk=rater.pk).sessions.get()
    assert session.trials.count() == total
    ratings = Rating.objects.filter(trial__session=session)
    assert ratings.count() == total
    assert sorted(ratings.values_list("trial__token", flat=True)) == sorted(seen)
    assert set(ratings.values_list("quality", flat=True)) == {6}
    assert sorted(ratings.values_list("fit", flat=True)) == list(range(total))
    session.refresh_from_db()
    assert session.state == "closed"


def test_an_organizer_rates_diversity(live_server, chromium_path, organizer, tmp_path):
    challenge = build_listening_challenge(
        slug="browser-diversity", categories=2, clips_per_system=2
    )
    preparation.set_open(challenge, True)
    with chromium_page(chromium_path) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/listen/")
        with page.expect_navigation():
            page.click("text=Rate diversity myself")
        page.check("#agree")
        with page.expect_navigation():
            page.click("button[type=submit]")
        with page.expect_navigation():
            page.click("button[type=submit]")  # instructions: Start
        items = 0
        while page.query_selector("form[data-listening]"):
            # Labelled by the public id and the category only.
            assert re.fullmatch(
                r"Diversity: system S[0-9A-F]{8} · Category \d", page.inner_text("h1")
            )
            _listen_to_the_end(page)
            page.fill("#diversity-scale", str(3 + items))
            with page.expect_navigation():
                page.click("#next")
            items += 1
        assert "You rated all 4 diversity files" in page.inner_text("#done")
    rater = Rater.objects.get(user=organizer)
    assert items == 4
    assert DiversityRating.objects.filter(trial__rater=rater).count() == 4
    assert sorted(DiversityRating.objects.values_list("diversity", flat=True)) == [3, 4, 5, 6]


@contextmanager
def _crowd_platform():
    """A stand-in for the crowd platform on another origin: the completion URL's host, which
    records the paths it was asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            body = b"<!doctype html><title>Study completed</title><p>Completed.</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_crowd_worker_ends_at_the_completion_url_on_another_origin(
    live_server, chromium_path, viewport
):
    """The crowd platform is on another origin, as Prolific is: Finish shows the completion code
    on this site, then takes the worker there (the CSP's form-action forbids a form's redirect
    to it, and chromium_page fails the test on any violation)."""
    with _crowd_platform() as (platform, asked):
        slug = f"browser-crowd-{viewport['width']}"
        challenge = build_listening_challenge(
            slug=slug,
            categories=2,
            clips_per_system=1,
            anchors_per_session=3,
            familiarization_clips=1,
            categories_min=1,
            completion_url=f"{platform}/submissions/complete?cc=C0MPLETE",
        )
        preparation.set_open(challenge, True)
        key = selectors.listening_test(challenge).crowd_key
        link = f"{live_server.url}/listen/{challenge.slug}/crowd/{key}/"
        with chromium_page(chromium_path, viewport=viewport) as page:
            page.goto(f"{link}?PROLIFIC_PID=abc123&STUDY_ID=s1&SESSION_ID=x9")
            page.check("#agree")
            with page.expect_navigation():
                page.click("button[type=submit]")
            with page.expect_navigation():
                page.click("button[type=submit]")
            _hear_the_examples(page)
            while page.query_selector("form[data-listening]"):
                _listen_to_the_end(page)
                page.fill("#quality-scale", "5")
                page.fill("#fit-scale", "5")
                with page.expect_navigation():
                    page.click("#next")
            with page.expect_navigation():
                page.click("text=Finish")
            # The end page, on this site: the code to keep, and the way to the platform.
            assert page.url == f"{live_server.url}/listen/{slug}/"
            assert page.inner_text("#completion-code") == "C0MPLETE"
            assert_in_layout(page)
            assert page.get_attribute("#completion", "href") == (
                f"{platform}/submissions/complete?cc=C0MPLETE"
            )
            name = "crowd-end-phone.png" if viewport is PHONE else "crowd-end.png"
            page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
            # Then the platform, by the page's own refresh.
            page.wait_for_url(f"{platform}/submissions/complete?cc=C0MPLETE")
            assert "Completed." in page.inner_text("body")
        assert asked[0] == "/submissions/complete?cc=C0MPLETE"
    rater = Rater.objects.get(challenge=challenge, participant_id="abc123")
    assert (rater.study_id, rater.crowd_session_id) == ("s1", "x9")
    assert rater.finished_at is not None
    assert Rating.objects.filter(trial__session__rater=rater).count() == 5


def test_dragging_the_seek_bar_to_the_end_cannot_rate(live_server, chromium_path):
    challenge = build_listening_challenge(
        slug="browser-seek",
        categories=2,
        clips_per_system=1,
        anchors_per_session=3,
        familiarization_clips=1,
        duration=1.5,
    )
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge, label="seeker")
    slug = challenge.slug
    with chromium_page(chromium_path) as page:
        page.goto(f"{live_server.url}/listen/{slug}/join/{rater.access_key}/")
        page.check("#agree")
        with page.expect_navigation():
            page.click("button[type=submit]")
        with page.expect_navigation():
            page.click("button[type=submit]")

        # The example skipped to its end does not open the trials.
        page.eval_on_selector(
            "ol.examples audio",
            "a => { a.play(); a.addEventListener('playing', () => { a.currentTime = a.duration; },"
            " {once: true}); }",
        )
        page.wait_for_selector("ol.examples .heard:has-text('You skipped ahead from 0.0 s')")
        assert page.is_disabled("#start")
        page.eval_on_selector("ol.examples audio", "a => { a.currentTime = 0; a.play(); }")
        page.wait_for_selector("#start:not([disabled])")
        with page.expect_navigation():
            page.click("#start")

        # The seek bar dragged to the end while playing: the player says "ended", the server
        # says what was heard, and the scales stay shut.
        token = page.get_attribute("input[name=token]", "value")
        page.eval_on_selector(
            "#stimulus",
            "a => { a.play(); a.addEventListener('playing', () => { a.currentTime = a.duration; },"
            " {once: true}); }",
        )
        page.wait_for_selector(".status:has-text('You skipped ahead from 0.0 s')")
        assert page.is_disabled("#quality-scale") and page.is_disabled("#next")
        # Forcing the form open and sending an answer is refused by the server, with the reason.
        with page.expect_navigation():
            page.eval_on_selector(
                "form[data-listening]",
                "f => { f.quality.value = '5'; f.fit.value = '5'; f.submit(); }",
            )
        assert "Only the time it really played counts" in page.content()
        assert not Rating.objects.filter(trial__token=token).exists()

        # Listening through opens the scales and the answer is stored.
        page.goto(f"{live_server.url}/listen/{slug}/")
        assert page.get_attribute("input[name=token]", "value") == token
        assert page.is_disabled("#quality-scale")
        page.eval_on_selector("#stimulus", "a => { a.currentTime = 0; a.play(); }")
        page.wait_for_selector("input[data-scale]:not([disabled])")
        page.focus("#quality-scale")
        page.keyboard.press("ArrowRight")  # the middle first, then one up
        page.keyboard.press("ArrowRight")
        page.focus("#fit-scale")
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        with page.expect_navigation():
            page.click("#next")
    rating = Rating.objects.get(trial__token=token)
    assert (rating.quality, rating.fit) == (6, 4)
    assert rating.seeks >= 1 and rating.heard_fraction >= 0.9 and rating.plays >= 2


FOCUSED = "() => { const el = document.activeElement; return el.id || el.className || el.tagName; }"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_examples_page_by_keyboard_alone(live_server, chromium_path, viewport):
    """One Tab stop per example: its Play button, named "Example n of N: <category>", Space
    and Enter play and pause it, and the server still decides what was heard."""
    challenge = build_listening_challenge(
        slug="examples-keys", categories=1, duration=1.0, familiarization_clips=3
    )
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge, label="keys")
    category = challenge.categories.get().name
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.goto(f"{live_server.url}/listen/{challenge.slug}/join/{rater.access_key}/")
        page.check("#agree")
        with page.expect_navigation():
            page.click("button[type=submit]")
        with page.expect_navigation():
            page.click("button[type=submit]")
        page.wait_for_selector("ol.examples button.play")
        assert_in_layout(page)
        names = [page.get_attribute(f"#example-{n}-button", "aria-labelledby") for n in (1, 2, 3)]
        assert names == [f"example-{n}-button example-{n}-name" for n in (1, 2, 3)]
        button = page.get_by_role("button", name=f"Play Example 2 of 3: {category}")
        assert button.get_attribute("id") == "example-2-button"
        # No native player: nothing inside a player takes focus.
        assert page.locator("ol.examples audio[controls]").count() == 0

        stops = []
        for n in (1, 2, 3):
            page.keyboard.press("Tab")
            stops.append(page.evaluate(FOCUSED))
            while stops[-1] != f"example-{n}-button":
                assert len(stops) < 6, f"Tab stops before example {n}: {stops}"
                page.keyboard.press("Tab")
                stops.append(page.evaluate(FOCUSED))
            if n == 1:  # Space plays and pauses; the button says which it will do
                page.keyboard.press("Space")
                page.wait_for_selector("#example-1-button:text-is('Pause')")
                page.keyboard.press("Space")
                page.wait_for_selector("#example-1-button:text-is('Play')")
                page.keyboard.press("Home")  # back to the start: the whole clip is heard
            page.keyboard.press("Enter" if n == 2 else "Space")
            page.wait_for_selector(f"ol.examples li:nth-child({n}) .heard:text-is('heard')")
            assert page.inner_text(f"#example-{n}-button") == "Play again"
        page.wait_for_selector("#start:not([disabled])")
        page.keyboard.press("Tab")
        stops.append(page.evaluate(FOCUSED))
        # The skip link, three examples, Start: five stops (a native player takes about six).
        assert stops == [
            "skip",
            "example-1-button",
            "example-2-button",
            "example-3-button",
            "start",
        ]
        assert "1.0 s of 1.0 s" in page.inner_text("ol.examples li:nth-child(3) .clip-time")
        assert_in_layout(page)
        name = "examples" + ("" if viewport is DESKTOP else "-phone") + ".png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.wait_for_selector("form[data-listening]")
