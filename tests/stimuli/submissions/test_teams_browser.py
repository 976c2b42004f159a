"""A team's journey in a real headless Chromium, with a real worker checking the submission:
invitation link -> sign-up -> submit the baseline generator -> the report, the example clips and
FAD-dev appear on the team's page; a second member sees them; another team's member does not.
Screenshots of the new pages at 1,366 px and 390 px go to docs/screenshots/."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.urls import reverse
from django.utils import timezone

from stimuli.models import Team
from stimuli.submissions import schedule, teams
from stimuli.submissions.baseline_archive import baseline_archive
from stimuli.submissions.models import ChallengeSchedule, Submission
from stimuli.submissions.services import submit
from tests.chromium import chromium_page, log_in
from tests.conftest import join_job_threads, wait_for_job
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout

from .conftest import PASSWORD, mailed_link, meta, upload

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.sandbox]


def _sign_up(page, url: str, username: str, shots: bool = False) -> None:
    """The form, the answer that a link was sent, the e-mail's link, the account."""
    page.goto(url)
    page.fill("#id_username", username)
    page.fill("#id_email", f"{username}@example.org")
    page.fill("#id_password", PASSWORD)
    page.click("#join button[type=submit]")
    page.wait_for_selector("#sent")
    base = url[: url.index("/teams/")]
    if shots:
        _shots(page, page.url, "team-sent")
        _shots(page, base + mailed_link(f"{username}@example.org"), "team-confirm")
    page.goto(base + mailed_link(f"{username}@example.org"))
    page.fill("#confirm #id_password", PASSWORD)
    page.click("#confirm button[type=submit]")
    page.wait_for_selector("#team")


def _shots(page, url: str, name: str) -> None:
    """The page at both widths, in the site's layout, into docs/screenshots/."""
    for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
        page.set_viewport_size(size)
        page.goto(url)
        assert_in_layout(page)
        page.screenshot(path=str(DOCS_SCREENSHOTS / f"{name}{suffix}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


def test_invitation_sign_up_submit_and_feedback_for_the_team_only(
    live_server, celery_worker, chromium_path, development_set, organizer, tmp_path
):
    challenge = development_set
    schedule.set_schedule(challenge, examples_per_category=5, self_registration=True)
    invitation = teams.create_team_with_invitation(challenge, name="Barkers")
    other = teams.create_team_with_invitation(challenge, name="Rainmakers")
    archive = tmp_path / "baseline.zip"
    archive.write_bytes(baseline_archive())
    join = live_server.url + reverse("teams:join", args=[challenge.slug, invitation.token])

    with chromium_page(chromium_path, viewport=DESKTOP) as page:
        _shots(page, join, "team-join")
        _sign_up(page, join, "ann", shots=True)
        page.fill("#id_system", "Barker")
        page.select_option("#id_track", "A")
        page.fill("#id_licence", "MIT")
        page.fill("#id_description", "The procedural baseline, as a team submits it.")
        page.set_input_files("#id_archive", str(archive))
        page.click("#submit button[type=submit]")
        # The worker's check: the feedback panel polls until the version is valid.
        page.wait_for_selector("#feedback[data-state=valid]", timeout=120_000)
        assert "Valid generator" in page.inner_text("#report-summary")
        assert page.locator("#examples audio").count() == 5 * 2
        assert page.locator("#fad-dev tbody tr").count() == 2
        assert "within a budget" in page.inner_text("#projection")
        # The example clips play: the browser fetches and decodes one.
        duration = page.eval_on_selector(
            "#examples audio",
            "a => new Promise(r => { a.onloadedmetadata = () => r(a.duration); a.load(); })",
        )
        assert duration == pytest.approx(challenge.clip_duration_s, abs=0.05)
        submission = Submission.objects.get()
        submission_url = live_server.url + reverse(
            "teams:submission", args=[challenge.slug, submission.pk]
        )
        team_url = live_server.url + reverse("teams:team", args=[challenge.slug])
        _shots(page, team_url, "team-page")
        _shots(page, submission_url, "team-submission")
        _shots(page, live_server.url + reverse("teams:timeline", args=[challenge.slug]), "timeline")

        # A second member of the team sees the same feedback.
        second = page.context.browser.new_context(viewport=DESKTOP)
        bob = second.new_page()
        _sign_up(bob, join, "bob")
        assert "Barker" in bob.inner_text("#submissions")
        bob.goto(submission_url)
        assert "Valid generator" in bob.inner_text("#report-summary")
        assert bob.locator("#examples audio").count() == 10
        assert bob.locator("#fad-dev tbody tr").count() == 2
        second.close()

        # A member of another team sees none of it.
        third = page.context.browser.new_context(viewport=DESKTOP)
        cy = third.new_page()
        _sign_up(
            cy, live_server.url + reverse("teams:join", args=[challenge.slug, other.token]), "cy"
        )
        assert "Barker" not in cy.inner_text("main")
        response = cy.goto(submission_url)
        assert response.status == 404 and "Valid generator" not in cy.content()
        clip = cy.goto(f"{submission_url}clips/{submission.clips.first().pk}.wav")
        assert clip.status == 404
        third.close()

        # The review window: the team's page states its rules and end, the form starts from
        # the version that counted at the deadline.
        before = ChallengeSchedule.objects.get(challenge=challenge)
        schedule.set_schedule(
            challenge, submission_deadline=timezone.now() - dt.timedelta(hours=1), review_days=4
        )
        _shots(page, team_url, "team-review")
        assert "code fixes only" in page.inner_text("#review-rules")
        schedule.set_schedule(
            challenge,
            submission_deadline=before.submission_deadline,
            review_days=before.review_days,
        )

        # Password resets start from the login page; teams may register themselves here.
        page.context.clear_cookies()
        _shots(page, live_server.url + reverse("password_reset"), "password-reset")
        _shots(
            page,
            live_server.url + reverse("teams:register", args=[challenge.slug]),
            "team-register",
        )
        # A link that no longer works says why.
        withdrawn = teams.create_invitation(Team.objects.get(name="Rainmakers"), uses=1)
        teams.revoke_invitation(withdrawn, by=None)
        _shots(
            page,
            live_server.url + reverse("teams:join", args=[challenge.slug, withdrawn.token]),
            "team-join-refused",
        )
        assert "withdrawn by the organizers" in page.inner_text("#join")
        # A code fix, for the organizer's diff between versions.
        ann = Team.objects.get(name="Barkers").memberships.get(user__username="ann").user
        fix = submit(
            Team.objects.get(name="Barkers"), ann, meta("Barker"),
            upload(baseline_archive(code_suffix="\n\ndef _fixed():\n    return True\n")),
        )  # fmt: skip
        # The organizer's view of the same weeks.
        log_in(page, live_server.url, "olivia", "organizer-pass-1")
        _shots(
            page,
            live_server.url + reverse("submissions_organize:index", args=[challenge.slug]),
            "organizer-submissions",
        )
        # The organizer revokes a team's link from the page.
        row = page.locator("article.team-row[data-team=Rainmakers]")
        assert row.locator(".invitations li[data-invitation]").count() == 1
        row.locator(".invitations button").click()
        page.wait_for_selector("article.team-row[data-team=Rainmakers] .invitations li.muted")
        other.refresh_from_db()
        assert other.revoked
        _shots(
            page,
            live_server.url + reverse("submissions_organize:diff", args=[challenge.slug, fix.pk]),
            "organizer-submission-diff",
        )
        assert "byte-identical" in page.inner_text("#diff")
    assert Team.objects.get(name="Barkers").memberships.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_submission_answers_at_once_and_its_page_shows_the_check_under_way(
    live_server, chromium_path, make_member, settings, monkeypatch, tmp_path
):
    """Without a broker (the demo), the check runs on a thread of the server: the Submit button
    opens the version's page at once, which shows the check's step and the time taken."""
    from stimuli.submissions import feedback

    settings.FOLEY_TASKS_IN_BACKGROUND = True
    loading, release = threading.Event(), threading.Event()
    real = feedback.start_checked

    def held(*args, **kwargs):
        loading.set()
        assert release.wait(60), "the test never let the examples be made"
        return real(*args, **kwargs)

    monkeypatch.setattr(feedback, "start_checked", held)
    make_member("Barkers", "ann")
    archive = tmp_path / "baseline.zip"
    archive.write_bytes(baseline_archive())
    try:
        with chromium_page(chromium_path, viewport=DESKTOP) as page:
            log_in(page, live_server.url, "ann", PASSWORD)
            page.goto(live_server.url + reverse("teams:team", args=["teams"]))
            page.fill("#id_system", "Barker")
            page.select_option("#id_track", "A")
            page.fill("#id_licence", "MIT")
            page.set_input_files("#id_archive", str(archive))
            page.click("#submit button[type=submit]")
            page.wait_for_selector("#feedback")
            assert loading.wait(60), "the check never reached the examples"
            step = page.wait_for_selector(
                "#feedback .job-step:has-text('making the example clips')"
            )
            assert "Valid generator" in step.inner_text() and "so far" in step.inner_text()
            _shots(page, page.url, "team-submission-checking")
            release.set()
            page.wait_for_selector("#feedback[data-state=valid]", timeout=120_000)
            assert page.locator("#feedback .job-step").count() == 0
    finally:
        release.set()
        join_job_threads()
    submission = Submission.objects.get()
    assert submission.state == Submission.State.VALID
    assert wait_for_job(submission.job_id, timeout=60).state == "succeeded"
