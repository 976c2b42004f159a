"""The results of a challenge rated as the demo's is (`./scripts/demo --simulate-raters`), a
team's farm among the raters, in a real headless Chromium at 1,366 px and on a 390 px phone: the
farm named under the quality checks, excluded, and every rank beside the rank it would have
without its most favourable tenth of raters, on the page and in the download; the definition the
snapshot was computed under, its hash on the page and the file behind the link; and, as the demo
runs its objective stage (its definition file's log-mel FAD and league) and its learned
predictors (small untrained stand-ins), the league with each predictor axis beside FAD and KAD,
saying the predictors are stand-ins."""

from __future__ import annotations

import pytest
import yaml

from raters import demo, preparation
from scoring import services
from scoring.demo import run_standin_predictors
from stimuli.demo import DEMO_FILE
from stimuli.models import Job
from stimuli.objective import config
from stimuli.objective import services as objective
from tests.chromium import chromium_page
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FARM = 3


def test_the_demos_results_show_the_farm_and_how_robust_each_rank_is(
    live_server, chromium_path, organizer, tmp_path
):
    challenge = build_listening_challenge(
        slug="demo-farm", categories=2, systems_per_track=3, target_ratings=6, categories_min=1
    )
    # The demo's objective stage: its file's models and league (fewer resamples per interval),
    # then the learned predictors as the demo runs them.
    settings = yaml.safe_load(DEMO_FILE.read_text())["objective"]
    config.set_models(challenge, **{**settings, "fad_bootstrap": 20})
    job = objective.rank_by_fad_now(challenge)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert challenge.systems.filter(is_finalist=True).count() == 6
    run_standin_predictors(challenge, tmp_path / "demo-models", None)
    preparation.set_open(challenge, True)
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    demo.simulate_raters(challenge, n_raters=6, seed=2, farm=FARM)
    favoured = demo.favoured_system(challenge)
    # Database work stays outside the browser's event loop.
    snapshot = services.publish(challenge, organizer)
    named = snapshot.result["favouritism"]["raters"]
    farm = [r for r in named if r["system"] == favoured]
    assert len(farm) == FARM and all(r["action"] == "exclude" for r in farm)
    # A panel this small (each system has 2 sounds per rater) lets a chance lift name an honest
    # rater too: no more than 2, the bound the rule is held to beside 48 honest raters.
    assert len(named) - FARM <= 2
    for viewport in (DESKTOP, PHONE):
        with chromium_page(chromium_path, viewport=viewport) as page:
            page.goto(f"{live_server.url}/results/{challenge.slug}/{snapshot.number}/")
            page.wait_for_load_state("networkidle")
            assert_in_layout(page)
            for track in ("A", "B"):
                board = page.locator(f"#table-leaderboard-{track}")
                assert "Rank without its most favourable 10% of raters" in board.inner_text()
            # The league: each model's FAD and KAD, then each predictor axis, said to be the
            # demo's untrained stand-ins.
            league = page.locator("#table-metric-league")
            text = league.inner_text()
            for metric in ("FAD", "KAD", "PQ", "PC", "CE", "CU", "PAM"):
                assert metric in text, metric
            assert "Audiobox Aesthetics (untrained stand-in)" in text
            assert "ran on untrained stand-ins" in page.inner_text("#note-metric-league")
            if viewport is DESKTOP:  # a table at 1,366 px, stacked rows on a phone
                assert page.locator("#table-metric-league table.stacked").count() == 0
            suffix = "" if viewport is DESKTOP else "-phone"
            league.screenshot(path=str(DOCS_SCREENSHOTS / f"demo-league{suffix}.png"))
            rows = page.locator("#table-favouring-raters tbody tr")
            assert rows.count() == len(named)
            assert f"lifts system {favoured} above the other raters by +" in page.inner_text(
                "#table-favouring-raters"
            )
            href = page.get_attribute("#table-leaderboard-A >> text=CSV", "href")
            header = page.request.get(f"{live_server.url}{href}").text().splitlines()[0]
            assert "rank_without_favourable" in header.split(",")
            # The definition it was computed under: its hash, whole on hover, and the file.
            frozen = page.locator("#snapshot-definition")
            digest = frozen.locator("code")
            assert digest.inner_text() == f"sha256 {snapshot.definition_sha256[:12]}"
            assert digest.get_attribute("title") == f"sha256 {snapshot.definition_sha256}"
            box = frozen.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
            download = page.request.get(live_server.url + frozen.locator("a").get_attribute("href"))
            assert download.text() == snapshot.definition
            assert download.headers["content-disposition"] == (
                f'attachment; filename="{challenge.slug}-snapshot-{snapshot.number}.yaml"'
            )
            page.screenshot(
                path=str(DOCS_SCREENSHOTS / f"demo-results{suffix}.png"), full_page=True
            )
            # The whole hash, to copy, under the settings: inside the page at either width.
            page.locator("details:has(#definition-sha256) > summary").click()
            whole = page.locator("#definition-sha256")
            assert whole.inner_text() == snapshot.definition_sha256
            box = whole.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
            assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            page.locator("details:has(#definition-sha256)").screenshot(
                path=str(tmp_path / f"definition-sha256{suffix}.png")
            )
