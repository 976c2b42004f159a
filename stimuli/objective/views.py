"""Organizer pages of the objective stage: settings, the FAD and medoid pipelines and the learned
predictors with live progress, the ranking with finalists. htmx partials: every action answers
with the panel."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from stimuli.job_kinds import EMBED, PREDICTORS, RANK_BY_FAD, SELECT_MEDOIDS

from .. import jobs, selectors
from ..errors import Refused, page_status
from ..jobs import log_tail
from ..models import (
    Category,
    Challenge,
    Job,
    Medoid,
    ObjectiveSettings,
    PredictorScore,
    ReferenceStats,
    System,
)
from ..panels import render_panel
from ..permissions import challenge_organizer_required
from . import config, services

OBJECTIVE_KINDS = [EMBED, RANK_BY_FAD, SELECT_MEDOIDS, PREDICTORS]


class ObjectiveSettingsForm(forms.ModelForm):
    class Meta:
        model = ObjectiveSettings
        fields = [
            "fad_model", "fad_model_options", "fad_weights", "fad_development", "fad_bootstrap",
            "fad_infinity", "league_models",
            "medoid_model",
            "medoid_model_options", "medoid_weights", "finalists_per_track",
            "medoids_per_category", "kmeans_seed", "kmeans_n_init",
        ]  # fmt: skip


def _panel(request: HttpRequest, challenge: Challenge, error: str = "", status: int = 200):
    jobs = list(
        Job.objects.filter(challenge=challenge, kind__in=OBJECTIVE_KINDS).order_by("-pk")[:6]
    )
    for job in jobs:
        job.log_tail = log_tail(job)
    obj = config.objective_settings(challenge)
    context = {
        "challenge": challenge,
        "settings": obj,
        "settings_form": ObjectiveSettingsForm(instance=obj),
        "ranking": selectors.fad_ranking_table(challenge),
        "categories": list(Category.objects.filter(challenge=challenge)),
        "jobs": jobs,
        "medoid_count": Medoid.objects.filter(challenge=challenge).count(),
        "predictor_count": PredictorScore.objects.filter(clip__challenge=challenge).count(),
        "reference_stats": ReferenceStats.objects.filter(challenge=challenge).count(),
        "error": error,
    }
    return render_panel(
        request,
        "stimuli/objective_panel.html",
        context,
        title="Objective stage",
        panel_id="objective",
        status=status,
    )


@challenge_organizer_required
def panel(request: HttpRequest, slug: str) -> HttpResponse:
    return _panel(request, get_object_or_404(Challenge, slug=slug))


@challenge_organizer_required
def clip_fad(request: HttpRequest, slug: str, system_id: int, category: str) -> HttpResponse:
    """A system's clips of one category by their own FAD, the worst first, to listen to."""
    challenge = get_object_or_404(Challenge, slug=slug)
    system = get_object_or_404(System, pk=system_id, challenge=challenge)
    category = get_object_or_404(Category, challenge=challenge, slug=category)
    context = {
        "challenge": challenge,
        "system": system,
        "category": category,
        "categories": list(Category.objects.filter(challenge=challenge)),
        **selectors.clip_fad(system, category, request.GET.get("model") or None),
    }
    return render(request, "stimuli/objective_clip_fad.html", context)


@challenge_organizer_required
def job(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    job = get_object_or_404(Job, pk=job_id, challenge=challenge, kind__in=OBJECTIVE_KINDS)
    job.log_tail = log_tail(job)
    response = render_panel(
        request,
        "stimuli/objective_job.html",
        {"challenge": challenge, "job": job},
        title=f"{job.kind_label} #{job.pk}",
    )
    if job.is_finished:
        response["HX-Trigger"] = "objective-changed"  # the panel reloads: next job, ranking
    return response


@challenge_organizer_required
@require_POST
def start(request: HttpRequest, slug: str, step: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    begin = {
        "rank-by-fad": services.start_rank_by_fad,
        "select-medoids": services.start_select_medoids,
        "run-predictors": services.start_predictors,
    }.get(step)
    if begin is None:
        return _panel(request, challenge, f"unknown step {step!r}", 404)
    try:
        begin(challenge, user=request.user)
    except config.ObjectiveError as exc:
        return _panel(request, challenge, str(exc), page_status(request.htmx, exc))
    return _panel(request, challenge)


@challenge_organizer_required
@require_POST
def retry(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    job = get_object_or_404(Job, pk=job_id, challenge=challenge, kind__in=OBJECTIVE_KINDS)
    try:
        jobs.retry(job)
    except Refused as exc:
        return _panel(request, challenge, str(exc), page_status(request.htmx, exc))
    return _panel(request, challenge)


@challenge_organizer_required
@require_POST
def save_settings(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    form = ObjectiveSettingsForm(request.POST, instance=config.objective_settings(challenge))
    if not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        return _panel(request, challenge, errors, page_status(request.htmx))
    form.save()
    return _panel(request, challenge)
