"""The definition file on the organizer's challenge page, in a real headless Chromium: the
organizer downloads the file, uploads a changed copy, reads the changes, applies them and sees
them on the page; a misspelt key is shown with its line and nothing changes. The same without
JavaScript. Screenshots of the page with the changes shown at 1,366 px and 390 px go to
docs/screenshots/."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scoring.models import ScoringSettings
from stimuli import definition
from stimuli.models import Challenge
from stimuli.services import create_challenge
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout, overflows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _changed(text: str) -> str:
    """The downloaded file as an organizer edits it: a new title, diversity weighted a quarter,
    one category fewer."""
    changed = (
        text.replace("name: Foley 2024\n", "name: Foley 2024 (second run)\n", 1)
        .replace("weight_diversity: 0.5", "weight_diversity: 0.25")
        .replace("  - slug: gunshot\n    name: Gunshot\n", "")
    )
    assert changed.count("\n") == text.count("\n") - 2
    return changed


def test_the_organizer_downloads_changes_and_applies_the_definition(
    live_server, chromium_path, organizer, tmp_path
):
    challenge = create_challenge(name="Foley 2024", slug="foley-2024")
    # Database work stays outside the browser's event loop.
    exported = definition.export(challenge)
    download_url = f"{live_server.url}/organize/{challenge.slug}/definition.yaml"
    with chromium_page(chromium_path, viewport=DESKTOP, accept_downloads=True) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/")
        assert_in_layout(page)
        shown = page.inner_text("#definition-text")
        with page.expect_download() as event:
            page.click("#definition-download")
        download = event.value
        assert download.suggested_filename == "foley-2024.yaml"
        text = Path(download.path()).read_text()
        assert text == exported
        assert shown.strip() == text.strip()
        assert page.inner_text("#definition-sha256") == hashlib.sha256(text.encode()).hexdigest()

        edited = tmp_path / "foley-2024.yaml"
        edited.write_text(_changed(text))
        page.set_input_files("#id_definition-file", str(edited))
        page.click("#definition-form button[type=submit]")
        diff = page.wait_for_selector("#definition-diff pre.diff")
        lines = diff.inner_text().splitlines()
        assert lines == [
            "~ name: 'Foley 2024' -> 'Foley 2024 (second run)'",
            "- categories[gunshot].slug: 'gunshot'",
            "- categories[gunshot].name: 'Gunshot'",
            "~ scoring.weight_diversity: 0.5 -> 0.25",
        ]
        assert "What applying foley-2024.yaml changes" in page.inner_text("#definition-diff")
        # Nothing is applied yet: the challenge's file is as it was.
        assert page.request.get(download_url).text() == exported
        for viewport, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(viewport)
            assert_in_layout(page)
            assert overflows(page) == [], viewport
            # The file and the changes scroll in their own boxes, inside the section.
            section = page.locator("section[aria-labelledby=definition-title]").bounding_box()
            for box in ("#definition-text", "#definition-diff pre.diff"):
                inner = page.locator(box).bounding_box()
                assert inner["x"] >= section["x"]
                assert inner["x"] + inner["width"] <= section["x"] + section["width"] + 1
            page.locator("#definition-title").scroll_into_view_if_needed()
            page.screenshot(
                path=str(DOCS_SCREENSHOTS / f"organizer-definition{suffix}.png"), full_page=True
            )
        page.set_viewport_size(DESKTOP)

        page.click("#definition-apply button[type=submit]")
        message = page.wait_for_selector("ul.messages li.success")
        assert message.inner_text().startswith("Applied foley-2024.yaml: 4 changes: ~ name:")
        assert page.inner_text("h1").startswith("Foley 2024 (second run)")
        assert "weight_diversity: 0.25" in page.inner_text("#definition-text")
        assert "gunshot" not in page.inner_text("#definition-text")
        assert page.locator("#definition-diff").count() == 0
        page.wait_for_load_state("networkidle")  # the page's own panels, loaded after it
    challenge.refresh_from_db()
    assert challenge.name == "Foley 2024 (second run)"
    assert not challenge.categories.filter(slug="gunshot").exists()
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 0.25


def test_a_misspelt_key_is_shown_with_its_line_and_nothing_changes(
    live_server, chromium_path, organizer
):
    challenge = create_challenge(name="Foley 2024", slug="foley-2024")
    text = definition.export(challenge)
    wrong = text.replace("name: Foley 2024\n", "name: Renamed\n", 1).replace(
        "  weight_diversity: 0.5", "  weight_diversty: 0.25"
    )
    line = wrong.splitlines().index("  weight_diversty: 0.25") + 1
    with chromium_page(chromium_path, viewport=PHONE) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/")
        page.fill("#id_definition-text", wrong)
        page.click("#definition-form button[type=submit]")
        panel = page.wait_for_selector("#definition-refused")
        report = panel.inner_text()
        assert "Refused; nothing was changed." in report
        assert "scoring.weight_diversty: unknown key; the keys here are: " in report
        assert f"(line {line}, column 3)" in report
        assert page.locator("#definition-apply").count() == 0
        assert_in_layout(page)
        assert overflows(page) == []
    assert Challenge.objects.get(pk=challenge.pk).name == "Foley 2024"


def test_without_javascript_the_changes_show_in_the_page_and_apply(
    live_server, chromium_path, organizer
):
    challenge = create_challenge(name="Foley 2024", slug="foley-2024")
    changed = _changed(definition.export(challenge))
    with chromium_page(chromium_path, viewport=DESKTOP, java_script_enabled=False) as page:
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        page.goto(f"{live_server.url}/organize/{challenge.slug}/")
        page.fill("#id_definition-text", changed)
        page.click("#definition-form button[type=submit]")
        page.wait_for_load_state()
        # The whole page again, the changes in its definition section.
        assert page.url.endswith(f"/organize/{challenge.slug}/definition/#definition-title")
        assert_in_layout(page)
        assert "~ scoring.weight_diversity: 0.5 -> 0.25" in page.inner_text(
            "section[aria-labelledby=definition-title] #definition-diff"
        )
        page.click("#definition-apply button[type=submit]")
        page.wait_for_load_state()
        assert page.url == f"{live_server.url}/organize/{challenge.slug}/"
        assert "Applied the pasted text: 4 changes" in page.inner_text("ul.messages")
    assert Challenge.objects.get(pk=challenge.pk).name == "Foley 2024 (second run)"
