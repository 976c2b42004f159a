"""The text-prompt study's CLAP score in a real headless Chromium: the organizer page's card says
which files would enable the score, or offers to score the clips, and the published results show
each system's score beside the judges' answers; in layout at 1,366 and 390 px."""

from __future__ import annotations

import pytest

from raters.models import TextPromptStudy
from stimuli.services import create_challenge
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.stimuli.objective.test_prompt_scores import answer_the_study, write_clap_files

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_study_page_says_which_files_enable_the_clap_score(
    live_server, chromium_path, organizer, settings, tmp_path
):
    challenge = create_challenge(name="Text prompts", slug="text-clap")
    TextPromptStudy.objects.create(challenge=challenge, judges=4)
    settings.FOLEY_MODEL_DIR = "/srv/foley/models"  # where a deployment keeps them; empty here
    url = f"{live_server.url}/organize/{challenge.slug}/text-prompts/"
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


@pytest.mark.sandbox
def test_the_published_results_show_each_systems_clap_score(
    live_server, chromium_path, organizer, organizer_client, settings, tmp_path
):
    from scoring import services
    from tests.text_prompt_setup import build_text_study

    settings.FOLEY_MODEL_DIR = str(write_clap_files(tmp_path / "models"))
    challenge, study, system = build_text_study(tmp_path, slug="text-clap-browser")
    answer_the_study(study)
    organizer_client.post(f"/organize/{challenge.slug}/text-prompts/clap-scores/")
    snapshot = services.publish(challenge, organizer)
    url = f"{live_server.url}/results/{challenge.slug}/{snapshot.number}/"
    for viewport, name in ((DESKTOP, "text-prompt-clap"), (PHONE, "text-prompt-clap-phone")):
        with chromium_page(chromium_path, viewport=viewport) as page:
            page.goto(url)
            table = page.locator("#table-text-prompt-clap")
            assert system.name in table.inner_text()
            assert "2 of 2 answered prompt sets scored with clap-score:htsat-tiny@" in (
                page.inner_text("#note-text-prompt-clap")
            )
            assert_in_layout(page)
            table.screenshot(path=str(DOCS_SCREENSHOTS / f"{name}.png"))
