"""Reading the teams' side: who is in which team, the challenge's dates and phase, and what a
team may see of its submissions."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from django.db.models import Max, QuerySet
from django.utils import timezone

from ..models import Challenge, Team
from .models import (
    ChallengeSchedule,
    DeadlineExtension,
    Disqualification,
    Submission,
    TeamMembership,
    TeamRegistration,
)


def membership(user, challenge: Challenge) -> TeamMembership | None:
    """The user's membership in a team of this challenge, or None."""
    if not (user and user.is_authenticated and user.is_active):
        return None
    return (
        TeamMembership.objects.select_related("team").filter(challenge=challenge, user=user).first()
    )


def team_of(user, challenge: Challenge) -> Team | None:
    """Which team this person is in, in this challenge: the one membership decides."""
    found = membership(user, challenge)
    return found.team if found else None


def memberships_of(user) -> QuerySet[TeamMembership]:
    if not (user and user.is_authenticated):
        return TeamMembership.objects.none()
    return TeamMembership.objects.select_related("team", "challenge").filter(user=user)


def is_approved(team: Team) -> bool:
    registration = TeamRegistration.objects.filter(team=team).first()
    return registration is None or registration.state == TeamRegistration.State.APPROVED


def schedule(challenge: Challenge) -> ChallengeSchedule:
    """The challenge's dates and limits (the defaults, unsaved, where none were set)."""
    found = ChallengeSchedule.objects.filter(challenge=challenge).first()
    return found or ChallengeSchedule(challenge=challenge)


# The phases of the submission weeks, in order; each starts at its schedule field.
PHASES = (
    ("registration", "Registration", "registration_opens"),
    ("development", "Development", "development_opens"),
    ("review", "Review (code fixes only)", "submission_deadline"),
    ("evaluation", "Evaluation", "evaluation_opens"),
    ("listening", "Listening test", "listening_opens"),
    ("published", "Results published", "results_published"),
)


@dataclass(frozen=True)
class TimelineEntry:
    key: str
    label: str
    starts: dt.datetime | None
    current: bool


def local(schedule_: ChallengeSchedule, moment: dt.datetime | None) -> dt.datetime | None:
    """A stored (UTC) moment in the challenge's time zone."""
    return moment.astimezone(ZoneInfo(schedule_.time_zone)) if moment else None


def review_ends(deadline: dt.datetime | None, schedule_: ChallengeSchedule) -> dt.datetime | None:
    return deadline + dt.timedelta(days=schedule_.review_days) if deadline else None


def phase_at(schedule_: ChallengeSchedule, now: dt.datetime | None = None) -> str:
    """The phase the challenge is in at `now` (the server's clock by default): the latest
    phase whose date has passed; "closed" after the review window until evaluation opens."""
    now = now or timezone.now()
    current = "before"
    for key, _, field in PHASES:
        starts = getattr(schedule_, field)
        if starts is not None and starts <= now:
            current = key
    if current == "review":
        ends = review_ends(schedule_.submission_deadline, schedule_)
        if ends is not None and now >= ends:
            current = "closed"
    return current


def public_phase(challenge: Challenge) -> str:
    """The one phase word a visitor reads for the challenge, on every page: the teams'
    timeline while it has dates (Registration, Development, Review...), else the stage the
    organizers run (Setup, Objective stage, Listening test, Published)."""
    found = ChallengeSchedule.objects.filter(challenge=challenge).first()
    if found is not None and challenge.phase != Challenge.Phase.PUBLISHED:
        current = phase_at(found)
        if current == "closed":
            return "Submissions closed"
        labels = {key: label for key, label, _ in PHASES}
        if current in labels:
            return labels[current]
    return challenge.get_phase_display()


def timeline(schedule_: ChallengeSchedule, now: dt.datetime | None = None) -> list[TimelineEntry]:
    current = phase_at(schedule_, now)
    return [
        TimelineEntry(key, label, local(schedule_, getattr(schedule_, field)), key == current)
        for key, label, field in PHASES
    ]


def team_deadline(team: Team, schedule_: ChallengeSchedule) -> dt.datetime | None:
    """The team's submission deadline: the challenge's, or its latest extension."""
    extension = DeadlineExtension.objects.filter(team=team).order_by("-granted_at", "-pk").first()
    if extension is not None:
        return extension.deadline
    return schedule_.submission_deadline


def team_submissions(team: Team) -> QuerySet[Submission]:
    return Submission.objects.filter(team=team).select_related("system", "track", "job")


def team_submission(team: Team, pk: int) -> Submission | None:
    """One of the team's submissions; another team's does not exist for it."""
    return team_submissions(team).filter(pk=pk).first()


def next_version(system_id: int) -> int:
    last = Submission.objects.filter(system_id=system_id).aggregate(v=Max("version"))["v"]
    return (last or 0) + 1


def counting_version(system) -> Submission | None:
    """The version of a system that counts: the team's choice, else the latest valid one."""
    versions = Submission.objects.filter(system=system, disqualified_at__isnull=True)
    chosen = versions.filter(chosen=True).first()
    if chosen is not None:
        return chosen
    return versions.filter(state=Submission.State.VALID).order_by("-version").first()


EXPORT_COLUMNS = (
    "id", "team", "system", "track", "version", "created_at", "state", "in_review", "chosen",
    "archive_sha256", "external_data", "external_data_sources", "report_url", "licence",
    "description", "disqualified_reason",
)  # fmt: skip


def export_rows(challenge: Challenge) -> list[dict]:
    """Every submission's metadata, one row per version, for the organizers' CSV."""
    return [
        {
            "id": s.pk, "team": s.team.name, "system": s.system.name, "track": s.track.code,
            "version": s.version, "created_at": s.created_at.isoformat(), "state": s.state,
            "in_review": s.in_review, "chosen": s.chosen, "archive_sha256": s.archive_sha256,
            "external_data": s.external_data, "external_data_sources": s.external_data_sources,
            "report_url": s.report_url, "licence": s.licence, "description": s.description,
            "disqualified_reason": s.disqualified_reason,
        }
        for s in Submission.objects.filter(challenge=challenge).select_related(
            "team", "system", "track"
        )
    ]  # fmt: skip


def latest_frozen(team: Team) -> Submission | None:
    """The frozen version of the team's system submitted to last: what a review-window fix
    most likely starts from (the team's page fills its form from it)."""
    latest = (
        Submission.objects.filter(team=team, disqualified_at__isnull=True)
        .select_related("system")
        .order_by("-created_at")
        .first()
    )
    if latest is None:
        return None
    found = frozen_version(latest.system)
    return Submission.objects.select_related("system", "track").get(pk=found.pk) if found else None


def frozen_version(system) -> Submission | None:
    """The version a review-window fix is compared with: the one that counted when the window
    opened. While a fix counts, that fix's own frozen version, so fixes never drift from it."""
    counting = counting_version(system)
    if counting is None or counting.review_base_id is None:
        return counting
    return counting.review_base


def standing_disqualifications(team: Team) -> QuerySet[Disqualification]:
    """The team's disqualifications not lifted: what its submissions may not hold."""
    return Disqualification.objects.filter(team=team, lifted_at__isnull=True).select_related(
        "system", "submission"
    )
