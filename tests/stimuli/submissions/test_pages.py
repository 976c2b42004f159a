"""The teams' pages and the organizer's: sign-up from the link, the timeline in the challenge's
time zone, submitting from the page, and the organizer's teams, diff and CSV."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from stimuli.models import Team
from stimuli.submissions import teams
from stimuli.submissions.models import Submission

from .conftest import PASSWORD, baseline_archive, confirm_from_mail, upload

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def test_timeline_is_public_in_the_challenges_time_zone(open_challenge, client):
    html = client.get(reverse("teams:timeline", args=["teams"])).content.decode()
    assert "Europe/Paris" in html and 'data-phase="development"' in html
    assert 'aria-current="step" class="current" data-phase="development"' in html


def test_sign_up_from_the_link_then_submit_from_the_page(open_challenge):
    invitation = teams.create_team_with_invitation(open_challenge, name="Barkers")
    client = Client()
    url = reverse("teams:join", args=["teams", invitation.token])
    assert "Sign up and join Barkers" in client.get(url).content.decode()
    response = client.post(
        url, {"username": "ann", "email": "ann@example.org", "password": PASSWORD}
    )
    assert response["Location"] == reverse("teams:sent", args=["teams"])
    response = confirm_from_mail(client, "ann@example.org")
    assert response.status_code == 302 and response["Location"] == reverse(
        "teams:team", args=["teams"]
    )
    page = client.get(response["Location"]).content.decode()
    assert "Team Barkers" in page and invitation.token in page
    response = client.post(
        reverse("teams:submit", args=["teams"]),
        {"system": "Barker", "track": "A", "licence": "MIT", "archive": upload(baseline_archive())},
    )
    submission = Submission.objects.get()
    assert response["Location"] == reverse("teams:submission", args=["teams", submission.pk])
    html = client.get(response["Location"]).content.decode()
    assert "Valid generator" in html and 'id="examples"' in html


def test_password_reset_goes_through_the_email_backend(open_challenge, make_member, client):
    make_member("Barkers", "ann")
    response = client.post(reverse("password_reset"), {"email": "ann@example.org"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1 and "ann" in mail.outbox[0].body
    link = next(line for line in mail.outbox[0].body.splitlines() if "/accounts/reset/" in line)
    path = link[link.index("/accounts/reset/") :].strip()
    form = client.get(path, follow=True)
    assert "Choose a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "another-long-password-9", "new_password2": "another-long-password-9"},
    )
    assert done.status_code == 302
    from django.contrib.auth import get_user_model

    assert get_user_model().objects.get(username="ann").check_password("another-long-password-9")


def test_organizer_sees_teams_versions_diff_and_csv(open_challenge, make_member, organizer_client):
    from stimuli.submissions.services import submit

    from .conftest import meta

    ann = make_member("Barkers", "ann")
    team = Team.objects.get(name="Barkers")
    submit(team, ann, meta(), upload(baseline_archive()))
    second = submit(team, ann, meta(), upload(baseline_archive(code_suffix="\nFIXED = True\n")))
    page = organizer_client.get(reverse("submissions_organize:index", args=["teams"]))
    assert page.status_code == 200 and "Barkers" in page.content.decode()
    diff = organizer_client.get(reverse("submissions_organize:diff", args=["teams", second.pk]))
    text = diff.content.decode()
    assert "+FIXED = True" in text and "byte-identical" in text
    csv = organizer_client.get(reverse("submissions_organize:export", args=["teams"]))
    assert csv.content.decode().count("Barker,A,") == 2
    response = organizer_client.post(
        reverse("submissions_organize:disqualify", args=["teams", second.pk]), {"reason": "Copied"}
    )
    assert response.status_code == 302
    assert Submission.objects.get(pk=second.pk).disqualified_reason == "Copied"
    assert "disqualified" in mail.outbox[-1].subject and "Copied" in mail.outbox[-1].body


def test_deadline_reminder_goes_once_a_day_ahead(open_challenge, make_member):
    import datetime as dt

    from django.utils import timezone

    from stimuli.submissions import schedule
    from stimuli.submissions.notifications import remind_deadlines

    make_member("Barkers", "ann")
    assert remind_deadlines() == 0  # a week ahead
    schedule.set_schedule(
        open_challenge, submission_deadline=timezone.now() + dt.timedelta(hours=20)
    )
    # The scheduler's task, as beat sends it: each team told once however often it runs.
    from stimuli.tasks import remind_deadlines as scheduled

    assert scheduled.delay().get() == 1 and remind_deadlines() == 0
    assert "less than a day" in mail.outbox[-1].subject and "CET" in mail.outbox[-1].body


def test_organizer_sets_dates_in_the_challenges_time_zone(open_challenge, organizer_client):
    from stimuli.submissions.selectors import schedule

    url = reverse("submissions_organize:schedule", args=["teams"])
    data = {
        "time_zone": "Europe/Paris", "registration_opens": "2026-03-01T09:00",
        "development_opens": "2026-03-02T09:00", "submission_deadline": "2026-01-01T12:00",
        "review_days": "4", "systems_per_track": "4", "submissions_per_day": "3",
        "archive_max_bytes": "1000000", "compute_budget_s": "3600",
        "evaluation_clips_per_category": "100", "examples_per_category": "5",
    }  # fmt: skip
    refused = organizer_client.post(url, data)
    assert refused.status_code == 400
    assert "submission_deadline: comes before development_opens" in refused.content.decode()
    data["submission_deadline"] = "2026-06-01T12:00"
    assert organizer_client.post(url, data).status_code == 302
    saved = schedule(open_challenge)
    # Noon in Paris (summer time) is 10:00 UTC.
    assert saved.submission_deadline.isoformat() == "2026-06-01T10:00:00+00:00"
    assert saved.archive_max_bytes == 1_000_000 and not saved.self_registration
