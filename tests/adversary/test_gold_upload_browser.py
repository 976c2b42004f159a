"""An organizer adds a gold sound on the listening test's page, in a real browser, on a desktop
screen and on a phone; a bad one is refused with every problem named."""

from __future__ import annotations

import pytest

from raters.models import GoldSound
from tests.chromium import chromium_page, log_in
from tests.factories import make_wav
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1366, 390])
def test_an_organizer_adds_a_gold_sound_in_the_browser(
    live_server, chromium_path, organizer, tmp_path, width
):
    challenge = build_listening_challenge(slug=f"gold-page-{width}", categories=2, duration=4.0)
    wav = tmp_path / "gold.wav"
    wav.write_bytes(make_wav(seconds=4.0, sample_rate=8000, seed=5))
    with chromium_page(chromium_path, viewport={"width": width, "height": 900}) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/listen/")
        section = page.locator("#gold")
        page.set_input_files("#gold input[type=file]", str(wav))
        page.fill("#gold input[name=quality_min]", "9")
        page.fill("#gold input[name=quality_max]", "2")
        with page.expect_navigation():
            page.click("#gold button[type=submit]")
        text = page.locator("#gold").inner_text()
        assert "exceeds the highest" in text and "(label)" in text
        page.fill("#gold input[name=label]", "a voice asking for nine and nine")
        page.fill("#gold input[name=quality_min]", "8")
        page.fill("#gold input[name=quality_max]", "10")
        page.fill("#gold input[name=fit_min]", "8")
        page.fill("#gold input[name=fit_max]", "10")
        page.set_input_files("#gold input[type=file]", str(wav))
        with page.expect_navigation():
            page.click("#gold button[type=submit]")
        section = page.locator("#gold")
        assert "a voice asking for nine and nine" in section.inner_text()
        box = section.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width  # nothing clipped
        section.screenshot(path=str(tmp_path / f"gold-{width}.png"))
        page.screenshot(path=str(tmp_path / f"organize-{width}.png"), full_page=True)
    gold = GoldSound.objects.get(challenge=challenge)
    assert (gold.quality_min, gold.quality_max, gold.fit_min, gold.fit_max) == (8, 10, 8, 10)
