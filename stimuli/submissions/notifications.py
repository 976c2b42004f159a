"""E-mails to a team's members: a version's check finished (or failed), a disqualification, the
deadline a day ahead. Through Django's e-mail backend (the console unless SMTP is configured);
a mail that cannot be sent is logged, never a reason for the check to fail."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..models import Team
from . import selectors
from .models import ChallengeSchedule, Disqualification, Submission, TeamNotice

logger = logging.getLogger(__name__)


def _send(team: Team, subject: str, body: str) -> bool:
    to = sorted({m.user.email for m in team.memberships.select_related("user") if m.user.email})
    if not to:
        return False
    try:
        # Blind copies: members of one team need not learn each other's addresses from a mail.
        EmailMessage(
            f"[{team.challenge.name}] {subject}", body, settings.DEFAULT_FROM_EMAIL, bcc=to
        ).send()
    except Exception:
        logger.exception("notification to team %s not sent: %s", team.pk, subject)
        return False
    return True


def check_finished(submission: Submission) -> bool:
    state = submission.get_state_display().lower()
    return _send(
        submission.team,
        f"{submission.system.name} v{submission.version}: {state}",
        f"The check of {submission.system.name} v{submission.version} finished: "
        f"{(submission.report or {}).get('summary', state)}\n\nThe report, example clips and "
        "FAD-dev are on your team's page.",
    )


def disqualified(submission: Submission) -> bool:
    return _send(
        submission.team,
        f"{submission.system.name} v{submission.version} disqualified",
        f"The organizers disqualified {submission.system.name} v{submission.version}: "
        f"{submission.disqualified_reason}",
    )


def lifted(disqualification: Disqualification) -> bool:
    submission = disqualification.submission
    return _send(
        disqualification.team,
        f"{submission.system.name} v{submission.version}: disqualification lifted",
        f"The organizers lifted the disqualification of {submission.system.name} "
        f"v{submission.version}: {disqualification.lifted_reason}",
    )


def remind_deadlines(now: dt.datetime | None = None) -> int:
    """Tell every team whose deadline falls within the next day, once per deadline; returns how
    many teams were told. The scheduler runs it hourly (`CELERY_BEAT_SCHEDULE`);
    `manage.py remind_deadlines` runs it at once."""
    now = now or timezone.now()
    told = 0
    for schedule in ChallengeSchedule.objects.exclude(submission_deadline=None).select_related(
        "challenge"
    ):
        for team in Team.objects.filter(challenge=schedule.challenge):
            deadline = selectors.team_deadline(team, schedule)
            if deadline is None or not now < deadline <= now + dt.timedelta(days=1):
                continue
            try:
                with transaction.atomic():
                    TeamNotice.objects.create(team=team, key=f"deadline:{deadline.isoformat()}")
            except IntegrityError:
                continue  # told already
            when = selectors.local(schedule, deadline)
            if _send(
                team,
                "The submission deadline is in less than a day",
                f"The submission deadline of {schedule.challenge.name} is "
                f"{when:%A %d %B %Y, %H:%M %Z}. The server's clock decides.",
            ):
                told += 1
    return told
