"""Publishing in a real headless Chromium at 1,366 px and on a 390 px phone: the organizer's
confirmation says what closes and what stays, the publication's page shows its steps while the
job runs, and an interim snapshot is labelled as one while the listening test stays open."""

from __future__ import annotations

import pytest

from raters import preparation
from raters.models import ListeningTest
from scoring import services
from scoring.models import Snapshot
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_publishing_is_confirmed_and_an_interim_snapshot_is_labelled(
    live_server, chromium_path, organizer, viewport, settings, held_plots
):
    settings.FOLEY_TASKS_IN_BACKGROUND = True  # as in the demo: no broker, no waiting request
    drawing, release = held_plots
    challenge = build_listening_challenge(slug="publishing", categories=2)
    preparation.set_open(challenge, True)
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 20
    settings.save()
    with chromium_page(chromium_path, viewport=viewport) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/")
        page.click("text=Publish…")
        page.wait_for_selector("#publish-final")
        assert_in_layout(page)
        final = page.inner_text("#publish-final")
        assert "Closes for good: the listening test — open now" in final
        assert "Stays: every rating and every earlier snapshot" in final
        assert "Stays open: the listening test" in page.inner_text("#publish-interim")
        assert page.is_checked("#visibility-organizers")
        name = "publish-confirmation" + ("" if viewport is DESKTOP else "-phone") + ".png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
        assert Snapshot.objects.count() == 0  # nothing happened before the choice

        # The job runs apart, as on a worker: its page shows each step and the time taken
        # (held at the plots here, so that the page is seen while the job runs).
        page.click("#publish-interim button[type=submit]")
        assert drawing.wait(60), "the publication never reached the plots"
        step = page.wait_for_selector("#publishing .job-step:has-text('Step 3 of 4')")
        assert "drawing the plots" in step.inner_text() and "so far" in step.inner_text()
        assert page.locator("h1").inner_text() == "Publishing"
        assert_in_layout(page)
        name = "publishing" + ("" if viewport is DESKTOP else "-phone") + ".png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
        release.set()
        page.wait_for_selector("#interim-notice")
        assert "Published interim results #1." in page.inner_text("main")
        assert page.url.endswith(f"/results/{challenge.slug}/1/")
        assert "Only organizers see this snapshot." in page.inner_text("#interim-notice")
        assert page.inner_text("h1 .badge.warn") == "interim"
        assert_in_layout(page)

        # Every page, table, plot and download of the snapshot says "interim".
        page.click("text=Track A")
        page.wait_for_selector("figure.plot")
        assert "interim" in page.title()
        assert page.inner_text("h1 .badge.warn") == "interim"
        assert "these numbers will change" in page.inner_text("#interim-notice")
        titles = page.locator(".result-table h3")
        assert titles.count() >= 2
        for n in range(titles.count()):
            assert titles.nth(n).locator(".badge.warn").inner_text() == "interim"
        captions = page.locator("figure.plot figcaption")
        assert captions.count() == 3
        for n in range(captions.count()):
            assert "interim" in captions.nth(n).inner_text()
        assert_in_layout(page)
        name = "interim-track" + ("" if viewport is DESKTOP else "-phone") + ".png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
        # Nothing rated yet: the systems are listed in the table of those not in the test.
        href = page.get_attribute("#table-unrated-A >> text=CSV", "href")
        download = page.request.get(f"{live_server.url}{href}")
        assert "-interim-unrated-A.csv" in download.headers["content-disposition"]
        rows = download.text().splitlines()
        assert rows[0].endswith(",status") and rows[1].endswith(",interim")
        svg = page.request.get(
            live_server.url + page.get_attribute("figure.plot figcaption a >> nth=0", "href")
        ).text()
        assert "Interim: the listening test was still open" in svg
    assert ListeningTest.objects.get(challenge=challenge).is_open
    snap = Snapshot.objects.get()
    assert (snap.final, snap.public) == (False, False)
