"""Organizer pages for generators: attach code to a system, see its validation report, start or
retry generation. htmx partials: every action answers with the refreshed panel."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST

from stimuli.job_kinds import GENERATE, VALIDATE_GENERATOR

from .. import jobs
from ..errors import Refused, page_status
from ..jobs import is_stale, log_tail
from ..models import Challenge, Generator, Job, System
from ..panels import render_panel
from ..parsers import read_json
from ..permissions import challenge_organizer_required
from ..phases import phase_conflict
from . import services


def _panel(request: HttpRequest, challenge: Challenge, errors=None, status=200) -> HttpResponse:
    systems = list(challenge.systems.select_related("team", "track").order_by("name"))
    generators = {g.system_id: g for g in Generator.objects.filter(system__challenge=challenge)}
    jobs: dict[tuple[int, str], Job] = {}
    for job in Job.objects.filter(
        challenge=challenge, kind__in=[GENERATE, VALIDATE_GENERATOR]
    ).order_by("-created_at"):
        jobs.setdefault((job.params.get("system_id"), job.kind), job)
    for found in jobs.values():
        found.log_tail = log_tail(found)
        found.stale = is_stale(found)  # its worker was lost: offer a retry
    rows = [
        {
            "system": system,
            "generator": generators.get(system.pk),
            "generation": jobs.get((system.pk, GENERATE)),
            "validation": jobs.get((system.pk, VALIDATE_GENERATOR)),
        }
        for system in systems
    ]
    return render_panel(
        request,
        "stimuli/generators_panel.html",
        {
            "challenge": challenge,
            "rows": rows,
            "errors": errors or {},
            # Code and generation forms give way to the reason while they would be refused.
            "frozen": phase_conflict(challenge, fixed_by_listening="system clips cannot change"),
        },
        title="Generators",
        panel_id="generators",
        status=status,
    )


@challenge_organizer_required
def job(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    """A generation or validation job with its latest log lines, polled while it runs."""
    challenge = get_object_or_404(Challenge, slug=slug)
    job = get_object_or_404(
        Job,
        pk=job_id,
        challenge=challenge,
        kind__in=[GENERATE, VALIDATE_GENERATOR],
    )
    response = render_panel(
        request,
        "stimuli/generation_job.html",
        {"challenge": challenge, "job": job, "log_tail": log_tail(job)},
        title=f"{job.kind_label} #{job.pk}",
    )
    if job.is_finished:
        response["HX-Trigger"] = "job-finished"  # the panel and the page's lists refresh
    return response


def _refused(
    request: HttpRequest,
    challenge: Challenge,
    system: System,
    message: str,
    refusal: Refused | None = None,
) -> HttpResponse:
    """The panel with one system's refusal: the refusal's status, or 400 for a bad form."""
    return _panel(request, challenge, {system.pk: message}, page_status(request.htmx, refusal))


@challenge_organizer_required
def panel(request: HttpRequest, slug: str) -> HttpResponse:
    return _panel(request, get_object_or_404(Challenge, slug=slug))


@challenge_organizer_required
@require_POST
def set_code(request: HttpRequest, slug: str, system_id: int) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    system = get_object_or_404(System, pk=system_id, challenge=challenge)
    archive = request.FILES.get("archive")
    module = request.POST.get("module", "").strip()
    config = None
    try:
        if request.POST.get("config", "").strip():
            config = read_json(request.POST["config"])
            if not isinstance(config, dict):
                raise services.GenerationError("settings must be a JSON object")
        services.set_generator(
            system, module="" if archive else module, archive=archive, config=config,
            user=request.user, trusted=request.POST.get("trusted") == "on",
        )  # fmt: skip
    except ValueError as exc:
        return _refused(request, challenge, system, f"settings are not JSON: {exc}")
    except services.GenerationError as exc:
        return _refused(request, challenge, system, str(exc), exc)
    return _panel(request, challenge)


@challenge_organizer_required
@require_POST
def trust(request: HttpRequest, slug: str, system_id: int) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    generator = get_object_or_404(Generator, system__pk=system_id, system__challenge=challenge)
    services.set_trusted(generator, request.POST.get("trusted") == "on")
    return _panel(request, challenge)


@challenge_organizer_required
@require_POST
def generate(request: HttpRequest, slug: str, system_id: int) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    system = get_object_or_404(System, pk=system_id, challenge=challenge)
    try:
        services.start_generation(
            system,
            n_per_category=int(request.POST.get("n_per_category") or 100),
            seed=int(request.POST.get("seed") or 0),
            batch_size=int(request.POST.get("batch_size") or services.DEFAULT_BATCH_SIZE),
            user=request.user,
        )
    except ValueError:
        return _refused(request, challenge, system, "clips, seed and batch size are whole numbers")
    except services.GenerationError as exc:
        return _refused(request, challenge, system, str(exc), exc)
    return _panel(request, challenge)


@challenge_organizer_required
@require_POST
def retry(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    job = get_object_or_404(Job, pk=job_id, challenge=challenge)
    try:
        jobs.retry(job)
    except Refused as exc:
        errors = {job.params.get("system_id"): str(exc)}
        return _panel(request, challenge, errors, page_status(request.htmx, exc))
    return _panel(request, challenge)
