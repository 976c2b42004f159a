"""A browser that rates as one rater opens another rater's link: the page asks before it
switches, in the site's layout on a desktop and on a phone, under the site's CSP."""

from __future__ import annotations

import pytest

from raters import enrolment, preparation
from tests.chromium import chromium_page
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width, height", [(1366, 768), (390, 844)])
def test_another_raters_link_asks_before_switching(
    live_server, chromium_path, tmp_path, width, height
):
    challenge = build_listening_challenge(slug="switch", categories=1, listened_fraction=0.0)
    preparation.set_open(challenge, True)
    first, second = enrolment.invite(challenge), enrolment.invite(challenge)
    base = f"{live_server.url}/listen/{challenge.slug}"
    with chromium_page(chromium_path, viewport={"width": width, "height": height}) as page:
        page.goto(f"{base}/join/{first.access_key}/")
        page.wait_for_selector("form")  # the consent page: the browser is the first rater
        page.goto(f"{base}/join/{second.access_key}/")
        page.wait_for_selector("#switch")
        assert page.is_visible("button[type=submit]") and page.is_visible("header.site")
        box = page.locator("#switch").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width  # nothing clipped
        page.screenshot(path=str(tmp_path / f"switch-{width}.png"), full_page=True)
        # Keeping the current rater changes nothing; continuing makes the browser the second.
        with page.expect_navigation():
            page.click("button[type=submit]")
        page.goto(f"{base}/join/{second.access_key}/")
        assert page.locator("#switch").count() == 0
