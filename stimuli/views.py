"""Organizer pages. Thin: forms in, services and selectors out."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.storage import default_storage
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from . import selectors, services
from .forms import ChallengeForm, SystemForm, TeamForm, UploadForm
from .models import AudioFile, Challenge, Clip, Job, Medoid
from .panels import render_panel
from .permissions import (
    challenge_organizer_required,
    check_challenge,
    is_organizer,
    is_site_staff,
    may_create_challenges,
    organizer_required,
    readable_challenges,
)
from .phases import phase_conflict
from .submissions.models import ChallengeSchedule
from .submissions.selectors import public_phase


def home(request: HttpRequest) -> HttpResponse:
    # Organizer links only to the challenges the user organizes or views.
    organized = (
        set(readable_challenges(request.user).values_list("pk", flat=True))
        if is_organizer(request.user)
        else set()
    )
    challenges = list(Challenge.objects.all())
    with_teams = set(
        ChallengeSchedule.objects.filter(challenge__in=challenges).values_list(
            "challenge_id", flat=True
        )
    )
    rows = [
        {
            "challenge": c,
            "phase": public_phase(c),
            "teams": c.pk in with_teams,
            "organized": c.pk in organized,
        }
        for c in challenges
    ]
    return render(request, "home.html", {"rows": rows})


@organizer_required
def challenges(request: HttpRequest) -> HttpResponse:
    form = ChallengeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            if not may_create_challenges(request.user):
                raise PermissionDenied("Only the organizers group can create challenges.")
            challenge = services.create_challenge(**form.cleaned_data, owner=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(
                request, f"Created {challenge.name} with the default categories and tracks."
            )
            return redirect("stimuli:challenge", slug=challenge.slug)
    return render(
        request,
        "stimuli/challenges.html",
        {"challenges": readable_challenges(request.user), "form": form},
    )


def _challenge_context(challenge: Challenge, **extra) -> dict:
    return {
        "challenge": challenge,
        "counts": selectors.clip_counts(challenge),
        "systems": selectors.systems_with_counts(challenge),
        "jobs": selectors.recent_jobs(challenge),
        "team_form": TeamForm(),
        "system_form": SystemForm(challenge=challenge),
        "upload_form": UploadForm(challenge=challenge),
        # The upload form is replaced by the reason while an upload would be refused anyway.
        "upload_closed": phase_conflict(challenge, fixed_by_listening="no clips can be added"),
        **extra,
    }


@challenge_organizer_required
def challenge_detail(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    return render(request, "stimuli/challenge.html", _challenge_context(challenge))


@challenge_organizer_required
@require_POST
def add_team(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    form = TeamForm(request.POST)
    if form.is_valid():
        try:
            services.create_team(challenge, **form.cleaned_data)
            form = TeamForm()
        except ValidationError as exc:
            form.add_error(None, exc)
    return render_panel(
        request,
        "stimuli/challenge_teams.html",
        _challenge_context(challenge, team_form=form),
        title="Teams and systems",
        panel_id="teams",
    )


@challenge_organizer_required
@require_POST
def add_system(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    form = SystemForm(request.POST, challenge=challenge)
    if form.is_valid():
        try:
            services.create_system(**form.cleaned_data)
            form = SystemForm(challenge=challenge)
        except ValidationError as exc:
            form.add_error(None, exc)
    return render_panel(
        request,
        "stimuli/challenge_teams.html",
        _challenge_context(challenge, system_form=form),
        title="Teams and systems",
        panel_id="teams",
    )


def job_response(request: HttpRequest, job: Job) -> HttpResponse:
    response = render_panel(
        request,
        "stimuli/job.html",
        {"job": job, "challenge": job.challenge},
        title=f"{job.kind_label} #{job.pk}",
    )
    if job.is_finished:
        # Parts of the page that show results (clip counts, job list) refresh on this event.
        response["HX-Trigger"] = "job-finished"
    return response


@organizer_required
def job_status(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(Job.objects.select_related("challenge"), pk=pk)
    if job.challenge is None:  # a job of no challenge (a command line's) is the site's
        if not is_site_staff(request.user):
            raise PermissionDenied("Only site staff see jobs of no challenge.")
    else:
        check_challenge(request.user, job.challenge, write=False)
    return job_response(request, job)


@challenge_organizer_required
def clip_counts(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    return render_panel(
        request,
        "stimuli/challenge_counts.html",
        {"challenge": challenge, "counts": selectors.clip_counts(challenge)},
        title="Clips per category",
    )


@challenge_organizer_required
def jobs(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    return render_panel(
        request,
        "stimuli/challenge_jobs.html",
        {"challenge": challenge, "jobs": selectors.recent_jobs(challenge)},
        title="Jobs",
    )


CLIPS_PER_PAGE = 100


@challenge_organizer_required
def clips(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    role = request.GET.get("role") or None
    category = request.GET.get("category") or None
    system = request.GET.get("system") or None
    medoids = request.GET.get("medoids") == "1"
    rows = selectors.clips(challenge, role=role, category=category, system=system, medoids=medoids)
    page = Paginator(rows, CLIPS_PER_PAGE).get_page(request.GET.get("page"))
    positions = dict(
        Medoid.objects.filter(clip__in=[c.pk for c in page]).values_list("clip_id", "position")
    )
    # Each clip's learned predictors' values where computed: beside a medoid, what the
    # listeners will hear as the predictors rate it.
    predicted = selectors.clip_values([c.pk for c in page])
    for clip in page:
        clip.medoid_position = positions.get(clip.pk)
        found = predicted.values.get(clip.pk, {})
        clip.predicted = [found.get(column["axis"]) for column in predicted.columns]
    return render(
        request,
        "stimuli/clips.html",
        {
            "challenge": challenge,
            "page": page,
            "predicted": predicted,
            "roles": Clip.Role.choices,
            "filters": {"role": role, "category": category, "system": system, "medoids": medoids},
        },
    )


@organizer_required
def audio(request: HttpRequest, sha256: str) -> FileResponse:
    audio_file = AudioFile.objects.filter(sha256=sha256).first()
    # A sound is shown to the organizers of a challenge that holds it as a clip.
    if (
        audio_file is not None
        and not is_site_staff(request.user)
        and not Clip.objects.filter(
            audio=audio_file, challenge__in=readable_challenges(request.user)
        ).exists()
    ):
        audio_file = None
    if audio_file is None or not default_storage.exists(audio_file.file):
        raise Http404("No such audio.")
    return FileResponse(default_storage.open(audio_file.file, "rb"), content_type="audio/wav")
