"""The text-prompt protocol's three tests in a real headless Chromium, each with a reload in the
middle, each ending with exactly one stored answer per item."""

from __future__ import annotations

import time

import pytest

from raters import text_prompts
from raters.errors import ListeningError
from raters.models import (
    DescriptionAnswer,
    DescriptionMark,
    PromptAnswer,
    PromptSet,
    RealismAnswer,
    TextTrial,
)
from stimuli.models import TextGeneration
from tests.chromium import chromium_page
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout
from tests.text_prompt_setup import build_text_study, take_study

pytestmark = [
    pytest.mark.browser,
    pytest.mark.sandbox,
    pytest.mark.django_db(transaction=True),
]


# Counts the page's requests still unanswered (`window.postsPending`).
COUNT_POSTS = """() => {
  const send = window.fetch;
  window.postsPending = 0;
  window.fetch = (...args) => {
    window.postsPending += 1;
    return send(...args).finally(() => { window.postsPending -= 1; });
  };
}"""


def _listen_to_every_sound(page) -> None:
    """Play the page's sounds one after another (a judge hears one at a time) until the
    server has counted each as heard and the form's button opens."""
    page.eval_on_selector_all(
        "form[data-familiarization] audio",
        "els => els.reduce((prev, a) => { prev.addEventListener('ended', () => a.play(),"
        " {once: true}); return a; })",
    )
    page.eval_on_selector("form[data-familiarization] audio", "a => a.play()")
    page.wait_for_selector("#start:not([disabled])")


def _study(tmp_path, slug: str):
    challenge, study, _ = build_text_study(tmp_path, slug=slug)
    return challenge, text_prompts.invite_judge(study)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_interpretability_with_the_reveal(live_server, chromium_path, tmp_path, viewport):
    challenge, judge = _study(tmp_path, "browser-interp")
    base = f"{live_server.url}/listen/{challenge.slug}"
    with chromium_page(chromium_path, viewport=viewport) as page:
        page.goto(f"{base}/join/{judge.rater.access_key}/")
        assert page.url.endswith("/text/")
        with page.expect_navigation():
            page.click("#begin")
        tokens = []
        for n in range(6):
            page.wait_for_selector("form[data-familiarization]")
            assert "What is it?" in page.inner_text("h1")
            token = page.get_attribute("input[name=token]", "value")
            assert page.is_disabled("#start")
            if n == 3:
                page.fill("#text", "typed before the reload")
                page.reload()  # resumes at the same, unanswered sound
                assert page.get_attribute("input[name=token]", "value") == token
            tokens.append(token)
            _listen_to_every_sound(page)
            page.fill("#text", f"my guess {n}")
            with page.expect_navigation():
                if n == 1:
                    page.dblclick("#start")  # a double click stores one answer
                else:
                    page.click("#start")
        page.wait_for_selector("text=What it was")
        assert_in_layout(page)
        # Each mark saves without a new page, and shows itself saved; one changes its mind.
        page.evaluate("window.samePage = true")
        for row in range(1, 7):
            assert f"my guess {row - 1}" in page.inner_text(f"#row-{row}")
            if row == 4:
                page.reload()  # the marks so far are kept
                assert page.inner_text("#row-3 .mark-state") == "saved: right"
                page.evaluate("window.samePage = true")
            right = row % 2 == 1
            page.click(f"#row-{row} button[value={'yes' if right else 'no'}]")
            saved = "saved: right" if right else "saved: not right"
            page.wait_for_selector(f"#row-{row} .mark-state:text-is('{saved}')")
        page.click("#row-1 button[value=no]")
        page.wait_for_selector("#row-1 .mark-state:text-is('saved: not right')")
        assert page.evaluate("window.samePage")
        assert page.get_attribute("#row-1 button[value=no]", "aria-pressed") == "true"
        if viewport is PHONE:
            page.screenshot(path=str(DOCS_SCREENSHOTS / "reveal-phone.png"), full_page=True)
        with page.expect_navigation():
            page.click("#submit-marks")
        page.wait_for_selector("text=Real or generated?")

    assert DescriptionAnswer.objects.filter(trial__judge=judge).count() == 6
    assert sorted(
        DescriptionAnswer.objects.filter(trial__judge=judge).values_list("trial__token", flat=True)
    ) == sorted(tokens)
    marks = DescriptionMark.objects.filter(trial__judge=judge)
    assert marks.count() == 6 and sorted(marks.values_list("correct", flat=True)) == [
        0,
        0,
        0,
        0,
        1,
        1,
    ]
    # Submitted, the marks no longer change.
    with pytest.raises(ListeningError, match="submitted"):
        text_prompts.save_mark(judge, marks.first().trial.token, correct="yes", key="late-000001")


def test_realism(live_server, chromium_path, tmp_path):
    challenge, judge = _study(tmp_path, "browser-realism")
    text_prompts.start(judge)
    take_study(judge, correct=lambda trial: "yes", until="realism")
    base = f"{live_server.url}/listen/{challenge.slug}"
    with chromium_page(chromium_path) as page:
        page.goto(f"{base}/join/{judge.rater.access_key}/")
        for n in range(4):
            page.wait_for_selector("form[data-familiarization]")
            assert "Real or generated?" in page.inner_text("h1")
            token = page.get_attribute("input[name=token]", "value")
            if n == 2:
                page.reload()
                assert page.get_attribute("input[name=token]", "value") == token
            _listen_to_every_sound(page)
            page.check("input[value=generated]" if n % 2 else "input[value=real]")
            with page.expect_navigation():
                page.click("#start")
        page.wait_for_selector("text=Your prompts")

    answers = RealismAnswer.objects.filter(trial__judge=judge)
    assert answers.count() == TextTrial.objects.filter(judge=judge, test="realism").count() == 4
    assert sorted(answers.values_list("says_real", flat=True)) == [0, 0, 1, 1]


@pytest.mark.integration  # a real Celery worker, which needs PostgreSQL and Redis
def test_prompts_generated_on_a_worker_while_the_judge_types(
    celery_worker, live_server, chromium_path, tmp_path
):
    challenge, judge = _study(tmp_path, "browser-prompts")
    text_prompts.start(judge)
    deadline = time.monotonic() + 120
    # The worker makes the first two tests' sounds: wait on their state.
    while TextGeneration.objects.filter(trials__judge=judge, state="pending").exists():
        assert time.monotonic() < deadline, celery_worker.log()
        time.sleep(0.2)
    take_study(judge, correct=lambda trial: "yes", until="prompt")
    base = f"{live_server.url}/listen/{challenge.slug}"
    with chromium_page(chromium_path) as page:
        page.goto(f"{base}/join/{judge.rater.access_key}/")
        page.wait_for_selector("#prompt-form")
        page.fill("#prompt", "a dog barking in the rain")
        # Sent without a new page: the count goes up and the field is empty for the next one.
        page.evaluate("window.samePage = true")
        page.click("#send")
        page.wait_for_selector("#prompt-count:has-text('1 of')")
        assert page.input_value("#prompt") == "" and page.evaluate("window.samePage")
        for n in range(2):
            # Wait on the progress the page polls: the set's link (or its form) appears.
            page.wait_for_selector("form[data-familiarization], #prompt-progress a")
            if page.locator("form[data-familiarization]").count() == 0:
                with page.expect_navigation():
                    page.click("#prompt-progress a")
            token = page.get_attribute("form[data-familiarization] input[name=token]", "value")
            if n == 0:
                page.reload()
                assert (
                    page.get_attribute("form[data-familiarization] input[name=token]", "value")
                    == token
                )
                # The second prompt is typed while a sound of the first plays: it plays on.
                page.eval_on_selector("form[data-familiarization] audio", "a => a.play()")
                page.eval_on_selector(
                    "form[data-familiarization] audio",
                    "a => new Promise(done => a.addEventListener('timeupdate', done, {once: true}))",
                )
                page.evaluate("window.samePage = true")
                page.fill("#prompt", "footsteps on a wooden floor")
                page.click("#send")
                page.wait_for_selector("#prompt-form", state="detached")  # both prompts typed
                assert page.evaluate("window.samePage")
                playing = "form[data-familiarization] audio"
                assert page.eval_on_selector(playing, "a => !a.paused || a.ended")
                page.evaluate(COUNT_POSTS)
                page.eval_on_selector(playing, "a => { a.pause(); a.currentTime = 0; }")
                # The page reports a sound's events one at a time: the pause and the seek are
                # answered before it plays again, as they would be before a person's next click
                # (a play queued behind them is stamped late, and these sounds last 0.5 s).
                page.wait_for_function("() => window.postsPending === 0")
            assert page.locator("form[data-familiarization] audio").count() == 3
            if n == 1:  # numbered players of one Tab stop each, named for a screen reader
                button = page.get_by_role("button", name="Play Sound 2 of 3")
                assert button.get_attribute("id") == "sound-2-button"
                for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
                    page.set_viewport_size(size)
                    assert_in_layout(page)
                    shot = DOCS_SCREENSHOTS / f"text-prompt-sounds{suffix}.png"
                    page.screenshot(path=str(shot), full_page=True)
                page.set_viewport_size(DESKTOP)
            _listen_to_every_sound(page)
            page.check("input[name=match][value=maybe]")
            page.check(f"input[name=quality][value='{n + 3}']")
            page.check("input[name=diversity][value='2']")
            with page.expect_navigation():
                page.click("#start")
        page.wait_for_selector("text=Thank you")

    sets = PromptSet.objects.filter(judge=judge)
    assert sets.count() == 2
    answers = PromptAnswer.objects.filter(prompt_set__judge=judge)
    assert answers.count() == 2
    assert sorted(answers.values_list("quality", flat=True)) == [3, 4]
