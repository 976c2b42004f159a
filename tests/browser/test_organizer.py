"""The organizer's upload page in a real headless Chromium: upload, watch the checks, read the report."""

from __future__ import annotations

import pytest

from stimuli.models import Clip
from stimuli.services import create_challenge
from tests.chromium import chromium_page, log_in
from tests.factories import make_wav, make_zip, reference_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_organizer_uploads_a_set_and_sees_the_report(
    live_server, chromium_path, organizer, tmp_path
):
    challenge = create_challenge(name="Browser", slug="browser")
    good = make_zip(tmp_path / "dev.zip", reference_set(["rain", "keyboard"], 2))
    bad = make_zip(
        tmp_path / "bad.zip",
        {"rain/a.wav": make_wav(seed=3), "rain/b.wav": make_wav(sample_rate=8000)},
    )
    with chromium_page(chromium_path) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/")
        page.select_option("#id_role", "development")
        page.set_input_files("#id_file", str(good))
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector("#upload-result .job[data-state=succeeded]")
        assert "Imported 4 new clips from 4 files." in page.inner_text("#upload-result")
        assert page.eval_on_selector("#upload-progress", "el => el.value") == 100

        page.set_input_files("#id_file", str(bad))
        page.click("#upload-form button[type=submit]")
        page.wait_for_selector("#upload-result .job[data-state=failed]")
        report = page.inner_text("#upload-result")
        assert "Upload rejected: 1 of 2 files are invalid. Nothing was stored." in report
        assert "sample rate is 8,000 Hz; expected 22,050 Hz" in report
        page.screenshot(path=str(tmp_path / "upload.png"), full_page=True)
    assert Clip.objects.filter(challenge=challenge).count() == 4


def test_the_objective_panel_shows_fad_and_kad_on_a_desktop_and_a_phone(
    live_server, chromium_path, organizer, tmp_path
):
    from stimuli.objective import services
    from tests.objective_setup import small_challenge

    challenge = small_challenge(tmp_path, slug="browser-objective")
    job = services.rank_by_fad_now(challenge)
    assert job.state == "succeeded", job.error
    for width, height, name in ((1366, 900, "desktop"), (390, 844, "phone")):
        with chromium_page(chromium_path, viewport={"width": width, "height": height}) as page:
            log_in(page, live_server.url, "olivia", "organizer-pass-1")
            page.goto(f"{live_server.url}/organize/{challenge.slug}/")
            ranking = page.locator("#objective table.ranking[data-track=A]")
            ranking.wait_for()
            header = ranking.locator("thead").inner_text()
            assert "KAD-Eval" in header and "KAD-Dev" in header
            row = ranking.locator("tbody tr").first.inner_text()
            assert row.count(".") >= 4  # FAD-Eval, FAD-Dev, KAD-Eval, KAD-Dev all shown
            # The ranking scrolls in its own box, inside the page's width.
            box = page.locator("#objective .table-wrap").first.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
            ranking.screenshot(path=str(tmp_path / f"objective-{name}.png"))
            page.screenshot(path=str(tmp_path / f"challenge-{name}.png"), full_page=True)
