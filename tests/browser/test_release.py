"""The data release on the results page, in a real headless Chromium at 1,366 px and on a 390 px
phone: the organizer makes it with one button and downloads the zip it links."""

from __future__ import annotations

import io
import zipfile

import pytest

from raters import enrolment, preparation, sessions
from scoring import services
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import answer_session, build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_organizer_makes_the_data_release_and_downloads_it(
    live_server, chromium_path, organizer, viewport, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    challenge = build_listening_challenge(slug="released", categories=2)
    scoring_settings = services.scoring_settings(challenge)
    scoring_settings.bootstrap_samples = 20
    scoring_settings.save()
    preparation.set_open(challenge, True)
    for n in range(3):
        rater = enrolment.invite(challenge)
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        while (step := sessions.next_session(rater)).session is not None:
            answer_session(rater, step.session, quality=4 + n, fit=5 + n)
    services.publish(challenge, organizer)
    with chromium_page(chromium_path, viewport=viewport) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/results/{challenge.slug}/1/")
        section = page.locator("#data-release")
        assert "No data release of these results yet." in section.inner_text()
        page.click("#make-release")
        link = page.wait_for_selector("#data-release .release-list a")
        assert link.inner_text() == "released-results-1-v1.0.0.zip"
        assert "version 1.0.0+snapshot.1" in page.inner_text("#data-release")
        assert "Data release 1.0.0+snapshot.1 is ready." in page.inner_text(".messages")
        assert_in_layout(page)
        page.locator("#data-release").scroll_into_view_if_needed()
        name = "data-release" + ("" if viewport is DESKTOP else "-phone") + ".png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name))
        response = page.request.get(live_server.url + link.get_attribute("href"))
        assert response.status == 200
        names = zipfile.ZipFile(io.BytesIO(response.body())).namelist()
        assert "released-results-1-v1.0.0/ratings.csv" in names
        assert "released-results-1-v1.0.0/datapackage.json" in names
