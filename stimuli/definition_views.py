"""The definition file on the organizer's challenge page: its download, a changed file checked
(its changes shown, or every problem), and the checked file applied.

The section itself is drawn by the `definition_section` tag (stimuli/templatetags/
definition_tags.py). A check or an application answers htmx with the section's result alone
(stimuli/definition_result.html, beside the page); a browser without JavaScript gets the whole
challenge page with the same result in its section.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from . import definition, definition_files
from .definition import Applied
from .errors import Conflict, Refused, page_status
from .forms import DefinitionApplyForm, DefinitionForm
from .models import Challenge
from .permissions import challenge_organizer_or_403, challenge_organizer_required
from .views import _challenge_context


@challenge_organizer_or_403
@require_GET
def download(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    response = HttpResponse(definition.export(challenge), content_type="application/yaml")
    response["Content-Disposition"] = content_disposition_header(True, f"{challenge.slug}.yaml")
    return response


def _answer(
    request: HttpRequest, challenge: Challenge, result: dict, *, status: int = 200, form=None
) -> HttpResponse:
    if request.htmx:
        context = {"challenge": challenge, **result}
        return render(request, "stimuli/definition_result.html", context)
    context = {**_challenge_context(challenge), **result}
    if form is not None:  # the file or text as sent, to be corrected
        context["definition_form"] = form
    return render(request, "stimuli/challenge.html", context, status=status)


def _refused(request: HttpRequest, challenge: Challenge, exc: Refused, form=None) -> HttpResponse:
    status = page_status(request.htmx, exc)
    return _answer(
        request, challenge, {"definition_problems": exc.problems}, status=status, form=form
    )


@challenge_organizer_required
@require_POST
def check(request: HttpRequest, slug: str) -> HttpResponse:
    """What the file would change (a dry run), with the button that applies it."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = DefinitionForm(request.POST, request.FILES, prefix="definition")
    try:
        if not form.is_valid():
            raise Refused([m for ms in form.errors.values() for m in ms])
        upload = form.cleaned_data["file"]
        text = definition_files.text_of(
            upload.read(definition_files.MAX_BYTES + 1) if upload else form.cleaned_data["text"]
        )
        applied = definition_files.apply_to(challenge, text, by=request.user, dry_run=True)
    except Refused as exc:
        return _refused(request, challenge, exc, form)
    kinds = {"+": "added", "-": "removed", "~": "changed"}
    result = {
        "checked": applied,
        "checked_name": form.cleaned_data["name"],
        "diff_lines": [(kinds[change.kind], str(change)) for change in applied.changes],
        "apply_form": DefinitionApplyForm(
            initial={
                "text": text,
                "sha256": definition.sha256(text),
                "base": definition.sha256(definition.export(challenge)),
                "name": form.cleaned_data["name"],
            }
        ),
    }
    return _answer(request, challenge, result, form=form)


@challenge_organizer_required
@require_POST
def apply(request: HttpRequest, slug: str) -> HttpResponse:
    """Apply the checked file: checked again as it is applied, and refused whole (every problem
    shown, nothing stored) if the challenge no longer takes it."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = DefinitionApplyForm(request.POST)
    try:
        if not form.is_valid():
            raise Refused("The checked file did not come back: check it again.")
        text = definition_files.text_of(form.cleaned_data["text"])
        if definition.sha256(text) != form.cleaned_data["sha256"]:
            raise Refused("The checked file did not come back whole: check it again.")
        if definition.sha256(definition.export(challenge)) != form.cleaned_data["base"]:
            raise Conflict(
                "The challenge changed since these changes were checked: check the file again "
                "to see what applying it changes now."
            )
        applied = definition_files.apply_to(challenge, text, by=request.user)
    except Refused as exc:
        return _refused(request, challenge, exc)
    messages.success(request, _applied_message(form.cleaned_data["name"], applied))
    page = reverse("stimuli:challenge", args=[challenge.slug])
    if request.htmx:  # the whole page again: every section shows what changed
        return HttpResponse(status=204, headers={"HX-Redirect": page})
    return redirect(page)


def _applied_message(name: str, applied: Applied) -> str:
    name = name or "the definition file"
    count = len(applied.changes)
    if not count:
        return f"Applied {name}: no changes."
    shown = "; ".join(str(change) for change in applied.changes[:5])
    more = f"; and {count - 5} more" if count > 5 else ""
    return f"Applied {name}: {count} change{'s' * (count != 1)}: {shown}{more}."
