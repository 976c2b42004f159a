"""The organizers' monitoring view with 300 simulated raters in a real headless Chromium, at
1,366 px and on a 390 px phone: the pass rates above the table, one short row per rater, the
filter that narrows the table in place (htmx) and keeps narrowing it on each refresh, and the
reasons behind a disclosure."""

from __future__ import annotations

import pytest

from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge
from tests.raters.monitor_setup import add_raters

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_monitoring_view_reads_at_300_raters(live_server, chromium_path, organizer, viewport):
    challenge = build_listening_challenge(slug=f"monitor-{viewport['width']}", categories=2)
    counts = add_raters(challenge, 300)
    with chromium_page(chromium_path, viewport=viewport) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/listen/")
        assert page.locator("#rater-progress tbody tr").count() == 300
        assert_in_layout(page)
        assert "300 raters:" in page.inner_text("#rater-counts")
        rates = page.inner_text("#pass-rates")
        assert "HP" in rates and "TF" in rates
        # The table's head and first rows as an organizer sees them, the rates above.
        page.evaluate("() => document.getElementById('monitoring').scrollIntoView()")
        suffix = "-phone" if viewport is PHONE else ""
        page.screenshot(path=str(DOCS_SCREENSHOTS / f"monitoring-raters{suffix}.png"))
        # One row's reasons open in place.
        page.locator("#rater-progress td.reasons details summary").first.click()
        assert page.locator("#rater-progress td.reasons details[open] li").count() >= 1
        # Filter: the table narrows in place and stays narrowed when it refreshes itself.
        page.select_option("select[name=status]", "screened_out")
        page.wait_for_selector(f"#rater-counts:has-text('Showing {counts['screened_out']}.')")
        assert page.locator("#rater-progress tbody tr").count() == counts["screened_out"]
        assert (
            page.locator("#rater-progress tbody tr.status-screened_out").count()
            == (counts["screened_out"])
        )
        page.evaluate("() => htmx.trigger('#progress', 'every 15s')")
        page.select_option("select[name=sort]", "answered")
        page.wait_for_selector("#rater-counts:has-text('Showing')")
        assert page.locator("#rater-progress tbody tr").count() == counts["screened_out"]
        assert_in_layout(page)
