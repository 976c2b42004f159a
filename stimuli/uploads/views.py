"""The upload page's action (organizers): a zip of clips becomes an import job the page polls."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from ..forms import UploadForm
from ..models import Challenge
from ..permissions import challenge_organizer_required
from ..views import job_response
from . import services
from .imports import ImportPhaseError, ImportRequestError


@challenge_organizer_required
@require_POST
def upload(request: HttpRequest, slug: str) -> HttpResponse:
    """Stage the zip and check its structure now; the audio checks run as a job the page polls."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = UploadForm(request.POST, request.FILES, challenge=challenge)
    errors: list[str] = []
    job = None
    status = 400
    if form.is_valid():
        data = form.cleaned_data
        try:
            job = services.start_import(
                challenge,
                data["file"],
                role=data["role"],
                system=data["system"],
                convert=data["convert"],
                strict=data["strict"],
                user=request.user,
            )
        except services.UploadRejected as exc:
            errors = exc.problems
        except ImportRequestError as exc:
            errors = [str(exc)]
            if isinstance(exc, ImportPhaseError):
                status = 409
    else:
        errors = [f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items()]
    if job is not None:
        job.refresh_from_db()
        return job_response(request, job)
    if request.htmx:
        status = 200  # htmx swaps in only successful responses
    return render(request, "stimuli/upload_errors.html", {"errors": errors}, status=status)
