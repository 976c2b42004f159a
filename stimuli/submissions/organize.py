"""The organizer's pages of the submission weeks, under /organize/<challenge>/submissions/:
teams with their invitation links and registrations, every submission with its state, its
report and the diff between versions; re-run, disqualify and lift a disqualification, extend a
deadline, CSV."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from ..errors import Refused
from ..exports import to_csv
from ..models import Challenge, Team
from ..permissions import challenge_organizer_or_403, challenge_organizer_required
from . import diff, schedule, selectors, services, teams
from .models import Disqualification, Submission, TeamInvitation, TeamRegistration


def _page(request: HttpRequest, challenge: Challenge, problems=None, status=200, **extra):
    schedule_ = selectors.schedule(challenge)
    team_rows = []
    for team in Team.objects.filter(challenge=challenge).prefetch_related("memberships__user"):
        team_rows.append(
            {
                "team": team,
                "members": [m.user.get_username() for m in team.memberships.all()],
                "registration": TeamRegistration.objects.filter(team=team).first(),
                "deadline": selectors.local(schedule_, selectors.team_deadline(team, schedule_)),
                "extension": team.extensions.order_by("-granted_at").first(),
                "invitations": [
                    (invitation, teams.invitation_url(invitation))
                    for invitation in teams.live_invitations(team)
                ],
            }
        )
    zone = ZoneInfo(schedule_.time_zone)
    context = {
        "challenge": challenge,
        "schedule": schedule_,
        "dates": [
            (
                name,
                name.replace("_", " ").capitalize(),
                getattr(schedule_, name).astimezone(zone).strftime("%Y-%m-%dT%H:%M")
                if getattr(schedule_, name)
                else "",
            )
            for name in DATE_FIELDS
        ],
        "numbers": [
            (name, name.replace("_", " ").capitalize(), getattr(schedule_, name))
            for name in NUMBER_FIELDS
        ],
        "texts": [
            (name, name.replace("_", " ").capitalize(), getattr(schedule_, name))
            for name in TEXT_FIELDS
        ],
        "phase": selectors.phase_at(schedule_),
        "teams": team_rows,
        "submissions": Submission.objects.filter(challenge=challenge).select_related(
            "team", "system", "track"
        ),
        "disqualifications": Disqualification.objects.filter(challenge=challenge).select_related(
            "team", "system", "submission", "disqualified_by", "lifted_by"
        ),
        "problems": problems or [],
        "invitation_uses": teams.INVITATION_USES,
        "invitation_days": teams.INVITATION_DAYS,
        "max_invitation_uses": teams.MAX_INVITATION_USES,
        **extra,
    }
    return render(request, "submissions/organize.html", context, status=status)


@challenge_organizer_required
def index(request: HttpRequest, slug: str) -> HttpResponse:
    return _page(request, get_object_or_404(Challenge, slug=slug))


def _act(request: HttpRequest, slug: str, action) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    try:
        action(challenge)
    except Refused as refusal:
        return _page(request, challenge, refusal.problems, status=refusal.status)
    return redirect("submissions_organize:index", slug=slug)


@challenge_organizer_required
@require_POST
def add_team(request: HttpRequest, slug: str) -> HttpResponse:
    return _act(
        request,
        slug,
        lambda c: teams.create_team_with_invitation(
            c, name=request.POST.get("name", "").strip(), by=request.user
        ),
    )


def _team(challenge: Challenge, team_id: int) -> Team:
    return get_object_or_404(Team, pk=team_id, challenge=challenge)


def _number(request: HttpRequest, name: str, default: int, problems: list[str]) -> int:
    text = request.POST.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        problems.append(f"{name}: give a whole number")
        return default


@challenge_organizer_required
@require_POST
def invite(request: HttpRequest, slug: str, team_id: int) -> HttpResponse:
    """A new link for the team: for how many people, for how many days."""

    def action(challenge: Challenge) -> None:
        problems: list[str] = []
        uses = _number(request, "uses", teams.INVITATION_USES, problems)
        days = _number(request, "days", teams.INVITATION_DAYS, problems)
        if problems:
            raise Refused(problems)
        teams.create_invitation(_team(challenge, team_id), days=days, uses=uses, by=request.user)

    return _act(request, slug, action)


@challenge_organizer_required
@require_POST
def revoke(request: HttpRequest, slug: str, team_id: int, pk: int) -> HttpResponse:
    """Withdraw a link (one that leaked, say): it stops working at once."""
    return _act(
        request,
        slug,
        lambda c: teams.revoke_invitation(
            get_object_or_404(TeamInvitation, pk=pk, team=_team(c, team_id)), by=request.user
        ),
    )


@challenge_organizer_required
@require_POST
def decide(request: HttpRequest, slug: str, team_id: int) -> HttpResponse:
    return _act(
        request,
        slug,
        lambda c: teams.decide_registration(
            _team(c, team_id),
            approve=request.POST.get("approve") == "1",
            by=request.user,
            reason=request.POST.get("reason", ""),
        ),
    )


@challenge_organizer_required
@require_POST
def extend(request: HttpRequest, slug: str, team_id: int) -> HttpResponse:
    def action(challenge: Challenge) -> None:
        until = parse_datetime(request.POST.get("until", ""))
        if until is None:
            raise Refused("until: give the new deadline as YYYY-MM-DDTHH:MM")
        if until.tzinfo is None:  # typed in the challenge's time zone
            from zoneinfo import ZoneInfo

            until = until.replace(tzinfo=ZoneInfo(selectors.schedule(challenge).time_zone))
        schedule.extend_deadline(
            _team(challenge, team_id),
            until=until,
            reason=request.POST.get("reason", ""),
            by=request.user,
        )

    return _act(request, slug, action)


def _submission(challenge: Challenge, pk: int) -> Submission:
    found = Submission.objects.filter(challenge=challenge, pk=pk).select_related("system").first()
    if found is None:
        raise Http404("No such submission.")
    return found


@challenge_organizer_required
@require_POST
def rerun(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    return _act(request, slug, lambda c: services.rerun(_submission(c, pk), request.user))


@challenge_organizer_required
@require_POST
def disqualify(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    return _act(
        request,
        slug,
        lambda c: services.disqualify(
            _submission(c, pk), reason=request.POST.get("reason", ""), by=request.user
        ),
    )


@challenge_organizer_required
@require_POST
def lift(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    return _act(
        request,
        slug,
        lambda c: services.lift_disqualification(
            get_object_or_404(Disqualification, challenge=c, pk=pk),
            reason=request.POST.get("reason", ""),
            by=request.user,
        ),
    )


@challenge_organizer_required
def version_diff(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """What a version changed: a review-window fix against its frozen version (what the rule
    compared), any other version against the system's previous one."""
    challenge = get_object_or_404(Challenge, slug=slug)
    after = _submission(challenge, pk)
    before = after.review_base or (
        Submission.objects.filter(system=after.system, version__lt=after.version)
        .order_by("-version")
        .first()
    )
    context = {
        "challenge": challenge,
        "after": after,
        "before": before,
        "diff": diff.version_diff(before, after) if before else None,
    }
    return render(request, "submissions/diff.html", context)


@challenge_organizer_or_403
def export(request: HttpRequest, slug: str) -> HttpResponse:
    """Every submission's metadata as CSV."""
    challenge = get_object_or_404(Challenge, slug=slug)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    stamp = dt.date.today().isoformat()
    response["Content-Disposition"] = (
        f'attachment; filename="{challenge.slug}-submissions-{stamp}.csv"'
    )
    # The one writer: team and system names, descriptions and URLs are the teams' own text.
    response.write(to_csv(selectors.export_rows(challenge), selectors.EXPORT_COLUMNS))
    return response


DATE_FIELDS = (
    "registration_opens", "development_opens", "submission_deadline", "evaluation_opens",
    "listening_opens", "results_published",
)  # fmt: skip
NUMBER_FIELDS = {
    "review_days": int, "systems_per_track": int, "submissions_per_day": int,
    "archive_max_bytes": int, "compute_budget_s": float, "evaluation_clips_per_category": int,
    "examples_per_category": int, "review_file_max_bytes": int, "review_fix_max_bytes": int,
}  # fmt: skip
TEXT_FIELDS = ("review_code_suffixes",)
FLAGS = ("self_registration", "audio_allowed")


@challenge_organizer_required
@require_POST
def set_schedule(request: HttpRequest, slug: str) -> HttpResponse:
    """The dates (typed in the challenge's time zone; empty: not set) and the limits."""

    def action(challenge: Challenge) -> None:
        fields: dict = {"time_zone": request.POST.get("time_zone", "UTC").strip()}
        problems = []
        for name in DATE_FIELDS:
            text = request.POST.get(name, "").strip()
            value = parse_datetime(text) if text else None
            if text and value is None:
                problems.append(f"{name}: give a date and time, like 2026-06-01T12:00")
            fields[name] = value
        for name, kind in NUMBER_FIELDS.items():
            if name not in request.POST:  # a form of an earlier page: the limit stays as it is
                continue
            try:
                fields[name] = kind(request.POST[name])
            except ValueError:
                problems.append(f"{name}: give a number")
        for name in TEXT_FIELDS:
            if name in request.POST:
                fields[name] = " ".join(request.POST[name].split())
        for name in FLAGS:
            fields[name] = request.POST.get(name) == "on"
        if problems:
            raise Refused(problems)
        schedule.set_schedule(challenge, **fields)

    return _act(request, slug, action)
