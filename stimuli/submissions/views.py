"""The teams' pages: the public timeline, sign-up from an invitation, self-registration, and a
team's own pages (its submissions with the worker's feedback, polled while it runs)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth import login
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework.authtoken.models import Token

from ..errors import Refused, page_status
from ..models import Challenge
from . import selectors, services, sign_ups, teams
from .access import team_member_required
from .forms import RegisterTeamForm, SignUpForm, SubmissionForm
from .models import SubmissionClip

BACKEND = "django.contrib.auth.backends.ModelBackend"


def timeline(request: HttpRequest, slug: str) -> HttpResponse:
    """Public: the challenge's phases and dates in its time zone."""
    challenge = get_object_or_404(Challenge, slug=slug)
    schedule = selectors.schedule(challenge)
    return render(
        request,
        "submissions/timeline.html",
        {
            "challenge": challenge,
            "schedule": schedule,
            "entries": selectors.timeline(schedule),
            "deadline": selectors.local(schedule, schedule.submission_deadline),
            "review_ends": selectors.local(
                schedule, selectors.review_ends(schedule.submission_deadline, schedule)
            ),
            "team": selectors.team_of(request.user, challenge),
        },
    )


def join(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """Public: sign up from an invitation link (or, signed in, join its team)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    try:
        invitation = teams.open_invitation(token)
        if invitation.team.challenge_id != challenge.pk:
            raise Refused("This invitation link is for another challenge.")
    except Refused as refusal:
        return render(
            request,
            "submissions/join.html",
            {"challenge": challenge, "refusal": refusal},
            status=refusal.status,
        )
    form = SignUpForm(request.POST or None)
    problems: list[str] = []
    if request.method == "POST":
        try:
            if request.user.is_authenticated:
                teams.accept_invitation(token, request.user)
            elif form.is_valid():
                sign_ups.request_sign_up(token, **form.cleaned_data)
                return redirect("teams:sent", slug=slug)
            else:
                problems = [f"{k}: {m}" for k, ms in form.errors.items() for m in ms]
            if not problems:
                return redirect("teams:team", slug=slug)
        except Refused as refusal:
            problems = refusal.problems
    context = {"challenge": challenge, "invitation": invitation, "form": form, "problems": problems}
    return render(request, "submissions/join.html", context, status=400 if problems else 200)


def register(request: HttpRequest, slug: str) -> HttpResponse:
    """Public where the challenge allows it: a team registers itself for approval."""
    challenge = get_object_or_404(Challenge, slug=slug)
    open_ = selectors.schedule(challenge).self_registration
    form = RegisterTeamForm(request.POST or None)
    problems: list[str] = []
    if request.method == "POST" and open_:
        if form.is_valid():
            try:
                sign_ups.request_registration(challenge, **form.cleaned_data)
                return redirect("teams:sent", slug=slug)
            except Refused as refusal:
                problems = refusal.problems
        else:
            problems = [f"{k}: {m}" for k, ms in form.errors.items() for m in ms]
    context = {"challenge": challenge, "form": form, "problems": problems, "open": open_}
    return render(request, "submissions/register.html", context, status=400 if problems else 200)


def sent(request: HttpRequest, slug: str) -> HttpResponse:
    """Public: what every sign-up and registration form answers, whatever was typed."""
    challenge = get_object_or_404(Challenge, slug=slug)
    context = {"challenge": challenge, "hours": sign_ups.LINK_HOURS}
    return render(request, "submissions/sent.html", context)


def confirm(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    """Public: the e-mail's link. The account is made on the button (a POST), not on opening
    the link, which mail scanners do."""
    challenge = get_object_or_404(Challenge, slug=slug)
    try:
        pending = sign_ups.open_pending(slug, token)
    except Refused as refusal:
        context = {"challenge": challenge, "refusal": refusal}
        return render(request, "submissions/confirm.html", context, status=refusal.status)
    problems: list[str] = []
    if request.method == "POST":
        try:
            user = sign_ups.confirm(
                slug,
                token,
                password=request.POST.get("password", ""),
                username=request.POST.get("username", ""),
                team_name=request.POST.get("team_name", ""),
            )
            login(request, user, backend=BACKEND)
            return redirect("teams:team", slug=slug)
        except Refused as refusal:
            problems = refusal.problems
    context = {
        "challenge": challenge,
        "pending": pending,
        "username": request.POST.get("username", pending.username),
        "team_name": request.POST.get("team_name", pending.team_name),
        "problems": problems,
    }
    return render(request, "submissions/confirm.html", context, status=400 if problems else 200)


def _team_context(request: HttpRequest) -> dict:
    challenge, team = request.challenge, request.team
    schedule = selectors.schedule(challenge)
    invitation = teams.live_invitations(team).first()
    return {
        "challenge": challenge,
        "team": team,
        "schedule": schedule,
        "phase": selectors.phase_at(schedule),
        "review_ends": selectors.local(
            schedule,
            selectors.review_ends(selectors.team_deadline(team, schedule), schedule),
        ),
        "deadline": selectors.local(schedule, selectors.team_deadline(team, schedule)),
        "approved": selectors.is_approved(team),
        "members": team.memberships.select_related("user"),
        "submissions": selectors.team_submissions(team),
        "disqualifications": selectors.standing_disqualifications(team),
        "tracks": challenge.tracks.all(),
        "invitation": invitation,
        "invitation_url": teams.invitation_url(invitation) if invitation else "",
        "systems": team.systems.select_related("track").order_by("name"),
    }


@team_member_required
def team(request: HttpRequest, slug: str) -> HttpResponse:
    """The team's page: members, the submit form, every version with its state. In the review
    window the form starts from the frozen version's metadata and declared settings, which a
    code fix must keep (only the archive's code may change)."""
    initial = {"track": request.challenge.tracks.values_list("code", flat=True).first()}
    context = _team_context(request)
    if context["phase"] == "review" and (frozen := selectors.latest_frozen(request.team)):
        initial = {
            "system": frozen.system.name,
            "track": frozen.track.code,
            "licence": frozen.licence,
            "external_data": frozen.external_data,
            "external_data_sources": frozen.external_data_sources,
            "report_url": frozen.report_url,
            "description": frozen.description,
            "config": json.dumps(frozen.config) if frozen.config else "",
        }
        context["prefilled_from"] = frozen
    return render(
        request, "submissions/team.html", {**context, "form": SubmissionForm(initial=initial)}
    )


@team_member_required
@require_POST
def submit(request: HttpRequest, slug: str) -> HttpResponse:
    form = SubmissionForm(request.POST, request.FILES)
    problems: list[str] = []
    if form.is_valid():
        data = form.cleaned_data
        meta = services.Metadata(
            system=data["system"],
            track=data["track"],
            licence=data["licence"],
            external_data=data["external_data"],
            external_data_sources=data["external_data_sources"],
            report_url=data["report_url"],
            description=data["description"],
            config=data["config"],
        )
        try:
            submission = services.submit(
                request.team, request.user, meta, data["archive"], data["audio"]
            )
            return redirect("teams:submission", slug=slug, pk=submission.pk)
        except Refused as refusal:
            problems = refusal.problems
            status = page_status(False, refusal)
    else:
        problems = [f"{k}: {m}" for k, ms in form.errors.items() for m in ms]
        status = 400
    context = {**_team_context(request), "form": form, "problems": problems}
    return render(request, "submissions/team.html", context, status=status)


def _submission_context(request: HttpRequest, pk: int) -> dict:
    submission = selectors.team_submission(request.team, pk)
    if submission is None:  # another team's does not exist for this one
        raise Http404("No such submission.")
    submission = services.settle(submission)
    clips: dict = {}
    for clip in SubmissionClip.objects.filter(submission=submission).select_related("category"):
        clips.setdefault(clip.category, []).append(clip)
    fad = (submission.feedback or {}).get("fad_dev", {})
    return {
        "challenge": request.challenge,
        "team": request.team,
        "submission": submission,
        "config_json": json.dumps(submission.config, sort_keys=True),
        "job": submission.job,
        "clips": clips,
        "fad": fad.get("categories", {}),
        "fad_model": fad.get("model", ""),
        "fad_error": fad.get("error", ""),
        "counting": selectors.counting_version(submission.system),
        "schedule": selectors.schedule(request.challenge),
    }


@team_member_required
def submission(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """One version: the worker's report, progress while it runs, clips and FAD-dev."""
    return render(request, "submissions/submission.html", _submission_context(request, pk))


@team_member_required
def submission_status(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """The feedback panel, polled by htmx until the check finishes."""
    return render(request, "submissions/feedback.html", _submission_context(request, pk))


@team_member_required
@require_POST
def choose(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    submission = selectors.team_submission(request.team, pk)
    if submission is None:
        raise Http404("No such submission.")
    try:
        services.choose_version(submission, request.user)
    except Refused as refusal:
        context = {**_submission_context(request, pk), "problems": refusal.problems}
        return render(request, "submissions/submission.html", context, status=refusal.status)
    return redirect("teams:submission", slug=slug, pk=pk)


@team_member_required
def clip(request: HttpRequest, slug: str, pk: int, clip_id: int) -> FileResponse:
    """An example clip of one of the team's submissions."""
    found = (
        SubmissionClip.objects.select_related("audio")
        .filter(pk=clip_id, submission_id=pk, submission__team=request.team)
        .first()
    )
    if found is None or not default_storage.exists(found.audio.file):
        raise Http404("No such clip.")
    return FileResponse(default_storage.open(found.audio.file, "rb"), content_type="audio/wav")


@team_member_required
@require_POST
def release_audio(request: HttpRequest, slug: str) -> HttpResponse:
    """The team's choice of which systems' listening-test sounds go into the data release: the
    checked boxes release, the unchecked do not."""
    try:
        systems = teams.set_release_audio(request.team, request.POST.getlist("release"))
    except Refused as refusal:
        context = {
            **_team_context(request),
            "form": SubmissionForm(),
            "release_problems": refusal.problems,
        }
        return render(request, "submissions/team.html", context, status=refusal.status)
    released = sum(s.release_audio for s in systems)
    messages.success(
        request,
        f"Saved: {released} of {len(systems)} {'system' if len(systems) == 1 else 'systems'} "
        "release their sounds in the challenge's data release.",
    )
    return redirect("teams:team", slug=slug)


@team_member_required
@require_POST
def api_token(request: HttpRequest, slug: str) -> HttpResponse:
    """The member's own API token for the team's CI, made on first use and shown once more."""
    token, _ = Token.objects.get_or_create(user=request.user)
    context = {**_team_context(request), "form": SubmissionForm(), "api_token": token.key}
    return render(request, "submissions/team.html", context)
