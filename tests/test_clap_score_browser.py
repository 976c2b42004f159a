"""The text-prompt study's organizer page in a real headless Chromium: its CLAP score card says
which files would enable the score, or offers to score the clips, in layout at 1,366 and 390 px."""

from __future__ import annotations

import pytest

from raters.models import TextPromptStudy
from stimuli.services import create_challenge
from tests.browser import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_study_page_says_which_files_enable_the_clap_score(
    live_server, chromium_path, organizer, settings, tmp_path
):
    challenge = create_challenge(name="Text prompts", slug="text-clap")
    TextPromptStudy.objects.create(challenge=challenge, judges=4)
    settings.FOLEY_MODEL_DIR = "/srv/foley/models"  # where a deployment keeps them; empty here
    url = f"{live_server.url}/organize/text-prompts/{challenge.slug}/"
    for viewport, name in ((DESKTOP, "text-prompt-study"), (PHONE, "text-prompt-study-phone")):
        with chromium_page(chromium_path, viewport=viewport) as page:
            log_in(page, live_server.url, "olivia", "organizer-pass-1")
            page.goto(url)
            state = page.inner_text("#clap-state")
            assert "Not configured." in state
            assert "/srv/foley/models/630k-audioset-best.pt" in state
            assert "Hugging Face, lukewys/laion_clap" in state and "merges.txt" in state
            assert page.locator("#clap-compute").count() == 0
            assert_in_layout(page)
            page.screenshot(path=str(DOCS_SCREENSHOTS / f"{name}.png"), full_page=True)

    checkpoint = tmp_path / "630k-audioset-best.pt"
    checkpoint.write_bytes(b"")
    (tmp_path / "roberta-base").mkdir()
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / "roberta-base" / name).write_text("")
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with chromium_page(chromium_path, viewport=PHONE) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(url)
        assert page.inner_text("#clap-state").startswith("0 of 0 generated clips scored")
        page.click("#clap-compute")
        page.wait_for_selector("text=0 clips queued for a CLAP score.")
        assert_in_layout(page)
