"""Published results in a real headless Chromium: the leaderboard, its plots and a download; the
embedding league; the learned predictors beside FAD (screenshots in docs/screenshots/)."""

from __future__ import annotations

import pytest

from scoring import services
from stimuli.services import create_challenge
from tests.chromium import chromium_page
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.simulate import simulate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_public_reads_a_published_leaderboard_with_plots(
    live_server, chromium_path, organizer, tmp_path
):
    challenge = create_challenge(name="Browser results", slug="browser-results")
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 100
    settings.save()
    sim = simulate(systems_per_track=4, categories=3, sounds=4, raters=6, seed=8)
    with chromium_page(chromium_path) as page:
        response = page.goto(f"{live_server.url}/results/{challenge.slug}/")
        assert response.status == 404

    # Database work stays outside the browser's event loop, whose connections outlive the test.
    snap = services.publish(challenge, organizer, sim.inputs)
    with chromium_page(chromium_path) as page:
        page.goto(f"{live_server.url}/results/{challenge.slug}/")
        assert page.url.endswith(f"/results/{challenge.slug}/1/")
        first = page.inner_text("#table-leaderboard-A tbody tr:first-child")
        assert snap.result["tracks"]["A"][0]["system"] in first

        page.click("text=Track A")
        page.wait_for_selector("figure.plot svg")
        assert page.locator("figure.plot").count() == 3
        # Every plot fits its figure: nothing of the canvas is cut off in the page.
        for n in range(3):
            box = page.locator("figure.plot svg").nth(n).bounding_box()
            frame = page.locator("figure.plot").nth(n).bounding_box()
            assert box["width"] > 200 and box["height"] > 100
            assert box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
        href = page.get_attribute("#table-leaderboard-A >> text=CSV", "href")
        csv_text = page.request.get(f"{live_server.url}{href}").text()
        header = csv_text.splitlines()[0]
        assert header.endswith(",status") and header.startswith(
            "rank,system,final,final_low,final_high,p_above_next,rank_without_favourable,quality,"
            "quality_low,quality_high,fit,fit_low,fit_high,diversity,diversity_low,diversity_high,"
            "team,fad_dev"
        )
        page.screenshot(path=str(tmp_path / "track.png"), full_page=True)
        page.goto(f"{live_server.url}/results/{challenge.slug}/1/")
        page.screenshot(path=str(tmp_path / "snapshot.png"), full_page=True)


def test_the_league_with_fad_kad_and_stability_reads_on_a_desktop_and_a_phone(
    live_server, chromium_path, organizer, tmp_path
):
    from tests.scoring.test_league import AGREES, league_inputs, with_kad

    challenge = create_challenge(name="Browser league", slug="browser-league")
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    inputs = with_kad(league_inputs())
    for row in inputs.fad:
        for size in (25, 50, 100):
            row[f"fad_eval_{size}"] = row["fad_eval"] * (1 + 10 / size)
            row[f"kad_eval_{size}"] = row["kad_eval"]
    services.publish(challenge, organizer, inputs)
    for width, height, name in ((1366, 900, "desktop"), (390, 844, "phone")):
        with chromium_page(chromium_path, viewport={"width": width, "height": height}) as page:
            page.goto(f"{live_server.url}/results/{challenge.slug}/1/")
            table = page.locator("#table-metric-league")
            assert "KAD" in table.inner_text() and AGREES in table.inner_text()
            stability = page.locator("#table-league-stability")
            stability.scroll_into_view_if_needed()
            row = page.locator("#table-league-stability tbody tr", has_text="KAD").first
            assert "1.000" in row.inner_text()  # KAD keeps its ranking on every subset
            # The page itself never scrolls sideways: a wide table scrolls in its own box.
            assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
            table.screenshot(path=str(tmp_path / f"league-{name}.png"))
            stability.screenshot(path=str(tmp_path / f"stability-{name}.png"))
            page.screenshot(path=str(tmp_path / f"results-{name}.png"), full_page=True)
    print(tmp_path)


def test_the_predictors_beside_fad_and_in_the_league_read_on_a_desktop_and_a_phone(
    live_server, chromium_path, organizer
):
    from tests.scoring.test_league import league_inputs
    from tests.scoring.test_predictors import predictor_rows

    challenge = create_challenge(name="Browser predictors", slug="browser-predictors")
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    inputs = league_inputs()
    inputs.predictors = predictor_rows(inputs)
    services.publish(challenge, organizer, inputs)
    for viewport in (DESKTOP, PHONE):
        with chromium_page(chromium_path, viewport=viewport) as page:
            page.goto(f"{live_server.url}/results/{challenge.slug}/1/track/A/")
            page.wait_for_load_state("networkidle")
            assert_in_layout(page)
            header = page.inner_text("#table-predictors-A thead")
            assert "Aesthetics PQ" in header and "PAM" in header
            suffix = "" if viewport is DESKTOP else "-phone"
            page.locator("#table-predictors-A").screenshot(
                path=str(DOCS_SCREENSHOTS / f"results-predictors-track{suffix}.png")
            )
            # The leaderboard keeps to a table at 1,366 px: the predictors have their own.
            if viewport is DESKTOP:
                assert page.locator("#table-leaderboard-A table.stacked").count() == 0
            page.goto(f"{live_server.url}/results/{challenge.slug}/1/")
            page.wait_for_load_state("networkidle")
            assert_in_layout(page)
            league = page.locator("#table-metric-league")
            assert "Audiobox Aesthetics" in league.inner_text()
            if viewport is DESKTOP:
                assert page.locator("#table-metric-league table.stacked").count() == 0
            assert "The listeners agreed most with" in page.inner_text("#note-metric-league")
            page.screenshot(
                path=str(DOCS_SCREENSHOTS / f"results-predictors{suffix}.png"), full_page=True
            )
