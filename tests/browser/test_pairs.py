"""A/B trials in a real headless Chromium at 1,366 px and on a 390 px phone: a crowd worker
through the screening, the examples and a category of A/B trials, each side played to its end;
a vote posted before both sides were heard is refused by the server, and the page resumes with
the side already heard still counted."""

from __future__ import annotations

import pytest

from raters import preparation, selectors
from raters.models import Rater, Screening, ScreeningTrial, Vote
from tests.chromium import chromium_page
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.pairs_setup import build_pairs_challenge, crowd_voting_a, voters_by_name

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAIRS = 2  # A/B trials in the worker's category

# Post the A/B trial's form as it stands, its questions opened and answered by hand: what a page
# whose script was bypassed would send.
FORCED_VOTE = """() => {
  const form = document.querySelector('form[data-pair]');
  form.querySelectorAll('fieldset').forEach(q => { q.disabled = false; });
  form.querySelector('#quality-left').checked = true;
  form.querySelector('#fit-tie').checked = true;
  form.submit();
}"""


def _challenge(slug: str):
    challenge = build_pairs_challenge(
        slug=slug,
        categories=1,
        duration=1.0,
        familiarization_clips=2,
        pairs_per_session=PAIRS,
        crowd_categories=1,
    )
    preparation.set_open(challenge, True)
    Screening.objects.create(test=selectors.listening_test(challenge), level_check=False)
    return challenge


def _link(challenge, participant: str) -> str:
    key = selectors.listening_test(challenge).crowd_key
    return f"/listen/{challenge.slug}/crowd/{key}/?PROLIFIC_PID={participant}&SESSION_ID=s-{participant}"


def _through_screening(page) -> None:
    """Consent, instructions, then each sound of the headphone check played to its end and
    answered right."""
    page.check("#agree")
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert "compare sounds two at a time" in page.inner_text("main")
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert page.url.endswith("/checks/")
    while page.locator("form#screening").count():
        token = page.get_attribute("input[name=token]", "value")
        page.locator("ol.examples audio").evaluate("a => a.play()")
        page.wait_for_selector("#start:not([disabled])")
        answer = ScreeningTrial.objects.get(token=token).answer_key
        page.check(f"input[name=answer][value='{answer}']")
        with page.expect_navigation():
            page.click("#start")


def _hear_the_examples(page) -> None:
    page.eval_on_selector_all(
        "ol.examples audio",
        "els => els.reduce((prev, a) => { prev.addEventListener('ended', () => a.play(),"
        " {once: true}); return a; })",
    )
    page.eval_on_selector("ol.examples audio", "a => a.play()")
    page.wait_for_selector("#start:not([disabled])")
    with page.expect_navigation():
        page.click("#start")


def _hear(page, side: str) -> None:
    """Play one side to its end with its button, and wait for the server's word that it was
    heard."""
    page.click(f"#sound-{side}-button")
    page.wait_for_selector(f"#sound-{side}[data-heard]", state="attached")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_crowd_worker_votes_on_a_b_trials_with_both_sides_heard(
    live_server, chromium_path, viewport
):
    challenge = _challenge(f"ab-{'phone' if viewport is PHONE else 'desktop'}")
    participant = f"PIDab{viewport['width']}"
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.goto(live_server.url + _link(challenge, participant))
        _through_screening(page)
        page.wait_for_selector("ol.examples button.play")
        _hear_the_examples(page)

        # The first A/B trial: two players named A and B, the questions closed.
        page.wait_for_selector("form[data-pair]")
        assert_in_layout(page)
        assert page.inner_text("#progress-text").startswith(f"Pair 1 of {PAIRS}")
        assert page.is_disabled("#quality-left") and page.is_disabled("#next")
        token = page.get_attribute("input[name=token]", "value")

        # A heard, B not: a vote posted anyway is refused by the server, naming B.
        _hear(page, "a")
        assert page.is_disabled("#quality-left")
        with page.expect_navigation():
            page.evaluate(FORCED_VOTE)
        refusal = page.inner_text("#refusal")
        # B was fetched with the page (the browser preloads it) but never played.
        assert refusal == "Sound B: Please play the sound before rating it."
        assert_in_layout(page)
        if viewport is PHONE:
            page.screenshot(path=str(DOCS_SCREENSHOTS / "ab-refused-phone.png"), full_page=True)
        assert not Vote.objects.exists()

        for n in range(PAIRS):
            page.goto(f"{live_server.url}/listen/{challenge.slug}/")
            page.wait_for_selector("form[data-pair]")
            if n == 0:
                # Resumed at the same A/B trial, A still counted as heard.
                assert page.get_attribute("input[name=token]", "value") == token
                assert page.inner_text(".clip-player:has(#sound-a) .heard") == "heard"
            else:
                _hear(page, "a")
            _hear(page, "b")
            page.wait_for_selector("fieldset[data-question='fit']:not([disabled])")
            hint = page.inner_text("#next-hint")
            assert hint == "Still to answer: Audio quality, Fit to the category."
            page.check("#quality-right" if n else "#quality-left")
            assert page.inner_text("#next-hint") == "Still to answer: Fit to the category."
            page.check("#fit-tie")
            assert not page.is_disabled("#next")
            if n == 0:
                assert_in_layout(page)
                name = "ab-trial-phone.png" if viewport is PHONE else "ab-trial.png"
                page.screenshot(path=str(DOCS_SCREENSHOTS / name), full_page=True)
            with page.expect_navigation():
                page.click("#next")
        page.wait_for_selector("#break")

    rater = Rater.objects.get(participant_id=participant)
    session = rater.sessions.get()
    assert session.state == "closed"
    stored = list(Vote.objects.filter(pair__session=session).order_by("pair__position"))
    assert [(v.quality, v.fit) for v in stored] == [("left", "tie"), ("right", "tie")]
    assert all(v.left_heard_fraction >= 0.9 and v.right_heard_fraction >= 0.9 for v in stored)
    assert stored[0].pair.token == token


def _published_pairs_challenge(organizer):
    """A pairs-design challenge whose four invited voters rank the systems by name and whose
    crowd worker answers A always (excluded), published."""
    from scoring import services
    from scoring.models import ScoringSettings

    challenge = build_pairs_challenge(slug="ab-results", categories=1, pairs_per_session=6)
    preparation.set_open(challenge, True)
    ScoringSettings.objects.get_or_create(challenge=challenge)
    ScoringSettings.objects.filter(challenge=challenge).update(bootstrap_samples=20)
    voters_by_name(challenge)
    crowd_voting_a(challenge)
    return challenge, services.publish(challenge, organizer)


def test_a_pairs_designs_results_read_on_a_desktop_and_a_phone(
    live_server, chromium_path, organizer
):
    # Database work stays outside the browser's event loop, whose connections outlive the test.
    challenge, snapshot = _published_pairs_challenge(organizer)
    first = min(challenge.systems.filter(track__code="A").values_list("name", flat=True))
    for viewport, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
        with chromium_page(chromium_path, viewport=viewport) as page:
            page.goto(f"{live_server.url}/results/{challenge.slug}/{snapshot.number}/")
            board = page.locator("#table-leaderboard-pairwise-A")
            assert first in board.locator("tbody tr").first.inner_text()
            # The votes' quality checks, and none of the sliders' empty tables.
            assert "1 session excluded" in page.inner_text("#pairwise-counts")
            excluded = page.inner_text("#table-pairwise-excluded-sessions")
            assert "same_side" in excluded
            # The public page names the crowd worker by its rater code, never its platform's id.
            assert "PIDab" not in page.content()
            assert page.locator("#table-leaderboard-A, #table-excluded-sessions").count() == 0
            assert_in_layout(page)
            page.screenshot(path=str(DOCS_SCREENSHOTS / f"ab-results{suffix}.png"), full_page=True)

            page.goto(f"{live_server.url}/results/{challenge.slug}/{snapshot.number}/track/A/")
            # The votes' plot alone: nothing drawn from the sliders' ratings there are none of.
            assert page.locator("figure.plot").count() == 1
            plot = page.locator("figure.plot:has(a[href*='/win-probability.'])")
            plot.scroll_into_view_if_needed()
            box, frame = plot.locator("svg").bounding_box(), plot.bounding_box()
            assert box["width"] > 200 and box["height"] > 100
            assert box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
            assert_in_layout(page)
            page.screenshot(path=str(DOCS_SCREENSHOTS / f"ab-track{suffix}.png"), full_page=True)
