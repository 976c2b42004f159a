"""Every page inside the site's layout, in a real headless Chromium at 1,366 px and on a 390 px
phone: the stage pages opened as pages, the error pages, the favicon, and no table wider than
its box (measured in the browser)."""

from __future__ import annotations

import pytest

from raters import preparation
from scoring import services as scoring
from stimuli.models import System
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.listening_setup import build_listening_challenge
from tests.simulate import simulate_farm

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def published(organizer):
    challenge = build_listening_challenge(slug="layout", categories=3, systems_per_track=2)
    # Names as long as real ones: the tables must make room for them.
    for system in System.objects.filter(challenge=challenge).select_related("team"):
        system.name = f"{system.name}-procedural-baseline-brighter"
        system.save()
        system.team.name = f"{system.team.name} Audio Research Laboratory"
        system.team.save()
    settings = scoring.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    # A crowd run with a small farm in it: the favouritism tables and the ranks' robustness
    # have something to show.
    inputs, _, _ = simulate_farm(
        honest=14, farm=4, kind="crude", categories=3, categories_per_rater=2, seed=3
    )
    scoring.publish(challenge, organizer, inputs)
    return challenge


ORGANIZER_PAGES = [
    "/organize/{slug}/",
    "/organize/{slug}/objective/",
    "/organize/{slug}/generators/",
    "/organize/{slug}/listening/",
    "/organize/{slug}/clips/",
    "/organize/{slug}/jobs/",
    "/results/{slug}/preview/",
    "/results/{slug}/1/",
    "/results/{slug}/1/track/A/",
]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_every_organizer_page_is_inside_the_layout_and_no_table_overflows(
    live_server, chromium_path, published, viewport
):
    slug = published.slug
    missing = []
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        for address in ORGANIZER_PAGES:
            response = page.goto(live_server.url + address.format(slug=slug))
            assert response.status == 200, address
            page.wait_for_load_state("networkidle")
            assert_in_layout(page)
            if address.endswith("/listening/"):  # with the rater-quality rules
                suffix = "" if viewport is DESKTOP else "-phone"
                page.screenshot(
                    path=str(DOCS_SCREENSHOTS / f"organizer-listening{suffix}.png"), full_page=True
                )
        page.goto(f"{live_server.url}/organize/{slug}/objective/")
        assert page.inner_text("h1") == "Objective stage"
        assert "Rank by FAD" in page.inner_text("main #objective")
        page.goto(f"{live_server.url}/organize/{slug}/generators/")
        assert page.inner_text("h1") == "Generators"
        assert "layout" in page.inner_text("main .crumbs")
        # Published: the forms that would be refused give way to the reason.
        page.goto(f"{live_server.url}/organize/{slug}/")
        page.wait_for_selector("#generators-frozen")
        assert "results of this challenge are published" in page.inner_text("#upload-closed")
        assert page.locator("#upload-form").count() == 0
        assert page.locator("#generators button:text-is('Generate')").count() == 0
        if viewport is DESKTOP:
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(DOCS_SCREENSHOTS / "organizer-challenge.png"), full_page=True)
        page.goto(f"{live_server.url}/results/{slug}/1/")
        board = page.locator("#table-leaderboard-A")
        assert "Rank without its most favourable 10% of raters" in board.inner_text()
        assert page.locator("#table-favouring-raters tbody tr").count() >= 4
        assert "rates system" in page.inner_text("#table-favouring-raters")
        name = "leaderboard.png" if viewport is DESKTOP else "leaderboard-phone.png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
    assert missing == []  # the favicon included


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_error_pages_are_styled(live_server, chromium_path, organizer, viewport):
    with chromium_page(chromium_path, viewport=viewport) as page:
        response = page.goto(f"{live_server.url}/results/no-such-challenge/")
        assert response.status == 404
        assert_in_layout(page)
        assert "Page not found" in page.inner_text("h1")

        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        build = build_listening_challenge(slug="errors", categories=1)
        response = page.goto(f"{live_server.url}/organize/{build.slug}/upload/")
        assert response.status == 405
        assert response.headers["allow"] == "POST"
        assert_in_layout(page)
        assert "takes a form" in page.inner_text("h1")
        page.click("text=Back to the page")
        assert page.url.endswith(f"/organize/{build.slug}/")

        icon = page.request.get(f"{live_server.url}/favicon.ico")
        assert icon.ok and icon.headers["content-type"].startswith("image/svg")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_home_page_leads_a_visitor_to_each_challenges_pages(
    live_server, chromium_path, viewport
):
    from datetime import timedelta

    from django.utils import timezone

    from stimuli.services import create_challenge
    from stimuli.submissions.models import ChallengeSchedule

    weeks = create_challenge(name="Foley weeks", slug="foley-weeks")
    weeks.contact_email = "organizers@example.org"
    weeks.save()
    now = timezone.now()
    ChallengeSchedule.objects.create(
        challenge=weeks,
        registration_opens=now - timedelta(days=10),
        development_opens=now - timedelta(days=3),
        submission_deadline=now + timedelta(days=20),
        self_registration=True,
    )
    build_listening_challenge(slug="home-listening", categories=1)
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.goto(live_server.url + "/")
        assert_in_layout(page)
        item = page.locator("#challenges li", has_text="Foley weeks")
        # One phase word: the teams' timeline says Development, so does the home page.
        assert item.locator(".badge").inner_text() == "Development"
        assert item.locator("strong a").get_attribute("href") == "/teams/foley-weeks/"
        name = "home.png" if viewport is DESKTOP else "home-phone.png"
        page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
        with page.expect_navigation():
            item.locator("text=Register a team").click()
        assert page.url.endswith("/teams/foley-weeks/register/")
        assert_in_layout(page)
        page.go_back()
        with page.expect_navigation():
            page.locator("#challenges li", has_text="Foley weeks").locator(
                "text=Dates and rules"
            ).click()
        assert page.url.endswith("/teams/foley-weeks/")
        assert "Development" in page.inner_text("main")
    # A test by invitation names where to write.
    invited_only = build_listening_challenge(slug="home-contact", categories=1)
    invited_only.contact_email = "listen@example.org"
    invited_only.save()
    preparation.set_open(invited_only, True)
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.goto(f"{live_server.url}/listen/{invited_only.slug}/")
        assert "listen@example.org" in page.inner_text("#contact")
        assert_in_layout(page)
