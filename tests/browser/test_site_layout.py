"""Every page inside the site's layout, in a real headless Chromium at 1,366 px and on a 390 px
phone: every public and organizer page of a published challenge, listed by URL, with no table
wider than its box and no page wider than the window (measured in the browser); the error pages,
the favicon."""

from __future__ import annotations

import pytest

from raters import preparation
from scoring import services as scoring
from stimuli.job_kinds import IMPORT
from stimuli.models import Job, System
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout, overflows
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
    # An upload's report with long paths and reasons, as a rejected archive's: its job page.
    files = [
        {"path": f"evaluation_set/dog_bark/recording-{n:03d}-microphone-array-left.wav",
         "category": "dog_bark", "status": "valid", "errors": [], "warnings": []}
        for n in range(3)
    ] + [
        {"path": "evaluation_set/helicopter_flyover_outdoor/heli-with-a-rather-long-name.wav",
         "category": None, "status": "rejected", "warnings": [],
         "errors": ["folder 'helicopter_flyover_outdoor' is not a category of this challenge "
                    "(dog_bark, footstep, gunshot, keyboard, moving_motor_vehicle, rain)"]},
    ]  # fmt: skip
    Job.objects.create(
        challenge=challenge, kind=IMPORT, state=Job.State.FAILED, created_by=organizer,
        error="Upload rejected: 1 of 4 files are invalid. Nothing was stored.",
        result={"summary": "Upload rejected: 1 of 4 files are invalid. Nothing was stored.",
                "files": files, "problems": []},
    )  # fmt: skip
    return challenge


# Every page of a published challenge, by URL: what a visitor reads, then what its organizers do.
PUBLIC_PAGES = [
    "/",
    "/results/",
    "/results/{slug}/1/",
    "/results/{slug}/1/track/A/",
    "/results/{slug}/1/track/B/",
    "/teams/{slug}/",
    "/teams/{slug}/register/",
    "/listen/{slug}/",
    "/accounts/login/",
    "/accounts/password-reset/",
]
ORGANIZER_PAGES = [
    "/organize/",
    "/organize/{slug}/",
    "/organize/{slug}/objective/",
    "/organize/{slug}/generators/",
    "/organize/{slug}/listen/",
    "/organize/{slug}/text-prompts/",
    "/organize/{slug}/submissions/",
    "/organize/{slug}/clips/",
    "/organize/{slug}/jobs/",
    "/organize/jobs/{job}/",
    "/results/{slug}/preview/",
    "/results/{slug}/publish/",
    "/results/{slug}/1/",
    "/results/{slug}/1/track/A/",
    "/results/{slug}/1/track/B/",
]


def test_every_page_of_a_published_challenge_fits_a_desktop_and_a_phone(
    live_server, chromium_path, published
):
    """At 1,366 and 390 px, in the site's layout: no table wider than its box (even a box that
    scrolls: every column shows) and no page wider than the window, measured in the browser."""
    slug = published.slug
    job = published.jobs.order_by("pk").last()
    pages = [(address, False) for address in PUBLIC_PAGES]
    pages += [(address, True) for address in ORGANIZER_PAGES]
    missing, problems = [], {}
    with chromium_page(chromium_path, viewport=DESKTOP) as page:
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        for viewport in (DESKTOP, PHONE):
            page.set_viewport_size(viewport)
            page.context.clear_cookies()
            logged_in = False
            for address, organizer_page in pages:
                if organizer_page and not logged_in:
                    log_in(page, live_server.url, "olivia", "organizer-pass-1")
                    logged_in = True
                url = address.format(slug=slug, job=job.pk if job else 0)
                response = page.goto(live_server.url + url)
                if response.status != 200:
                    problems[url] = [f"answered {response.status}"]
                    continue
                page.wait_for_load_state("networkidle")
                assert_in_layout(page)
                if found := overflows(page):
                    problems[f"{url} at {viewport['width']} px"] = found
            _organizer_shots(page, live_server.url, slug, viewport)
            # A rejected upload's report: every column of every file at both widths.
            page.goto(f"{live_server.url}/organize/jobs/{job.pk}/")
            suffix = "" if viewport is DESKTOP else "-phone"
            assert "is not a category" in page.inner_text("details table")
            page.screenshot(
                path=str(DOCS_SCREENSHOTS / f"upload-report{suffix}.png"), full_page=True
            )
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())
    assert missing == []  # the favicon included


def _organizer_shots(page, base: str, slug: str, viewport) -> None:
    suffix = "" if viewport is DESKTOP else "-phone"
    page.goto(f"{base}/organize/{slug}/listen/")  # with the rater-quality rules
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(DOCS_SCREENSHOTS / f"organizer-listening{suffix}.png"), full_page=True)
    page.goto(f"{base}/organize/{slug}/objective/")
    assert page.inner_text("h1") == "Objective stage"
    assert "Rank by FAD" in page.inner_text("main #objective")
    page.goto(f"{base}/organize/{slug}/generators/")
    assert page.inner_text("h1") == "Generators"
    assert "layout" in page.inner_text("main .crumbs")
    # Published: the forms that would be refused give way to the reason.
    page.goto(f"{base}/organize/{slug}/")
    page.wait_for_selector("#generators-frozen")
    assert "results of this challenge are published" in page.inner_text("#upload-closed")
    assert page.locator("#upload-form").count() == 0
    assert page.locator("#generators button:text-is('Generate')").count() == 0
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(DOCS_SCREENSHOTS / f"organizer-challenge{suffix}.png"), full_page=True)
    page.goto(f"{base}/results/{slug}/1/")
    board = page.locator("#table-leaderboard-A")
    assert "Rank without its most favourable 10% of raters" in board.inner_text()
    assert page.locator("#table-favouring-raters tbody tr").count() >= 4
    assert "lifts system" in page.inner_text("#table-favouring-raters")
    page.screenshot(path=str(DOCS_SCREENSHOTS / f"leaderboard{suffix}.png"), full_page=True)


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
