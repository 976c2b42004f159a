"""Public result pages, downloads and the organizers' publish action. Thin: selectors and
services do the work."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST, require_safe

from stimuli.errors import Refused
from stimuli.jobs import fail_if_stale
from stimuli.models import Challenge, Job
from stimuli.permissions import (
    check_challenge,
    is_organizer,
    is_write,
    may_read,
    may_write,
    readable_challenges,
)

from . import release as data_release
from . import selectors, services, tables
from .inputs import ScoringInputError
from .job_kinds import PUBLISH
from .models import DataRelease, Snapshot

# The rater-quality findings, shown under "Quality checks".
CHECK_TABLES = tuple(
    f"{design}{name}"
    for design in ("", "pairwise-")
    for name in ("excluded-sessions", "favouring-raters", "favouring-clusters")
)


def index(request: HttpRequest) -> HttpResponse:
    published = list(selectors.published_challenges())
    unpublished = []
    if is_organizer(request.user):
        unpublished = readable_challenges(request.user).exclude(pk__in=[c.pk for c in published])
    return render(
        request, "scoring/index.html", {"challenges": published, "unpublished": unpublished}
    )


def challenge_results(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    organizer = may_read(request.user, challenge)
    latest = selectors.latest_snapshot(challenge, organizer=organizer)
    if latest is not None:
        return redirect("scoring:snapshot", slug=slug, number=latest.number)
    if not organizer:
        # Nothing is public before publication, not even that results are being prepared.
        raise Http404("No published results.")
    return render(request, "scoring/unpublished.html", _publish_context(challenge))


def _publish_context(challenge: Challenge) -> dict:
    settings = services.scoring_settings(challenge)
    return {
        "challenge": challenge,
        "settings_url": reverse("admin:scoring_scoringsettings_change", args=[settings.pk]),
    }


PUBLISH_KINDS = ("interim", "final")


def publish(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: what each kind of publication closes and keeps, to choose and confirm; POST: publish."""
    challenge = get_object_or_404(Challenge, slug=slug)
    # Viewers read what publishing would do; only owners and organizers publish.
    check_challenge(request.user, challenge, write=is_write(request))
    kind = request.POST.get("kind")
    if request.method != "POST" or kind not in PUBLISH_KINDS:
        context = {**_publish_context(challenge), **selectors.publication_state(challenge)}
        return render(request, "scoring/publish.html", context)
    final = kind == "final"
    public = final or request.POST.get("visibility") != "organizers"
    job = services.request_publication(challenge, request.user, final=final, public=public)
    # Always through the job's page, whether the job has finished already (no broker) or not:
    # it shows each step while the job runs and opens the snapshot when it is done.
    return redirect("scoring:publishing", slug=slug, pk=job.pk)


@require_safe
def publishing(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """A publication under way: its step and the time it has taken, polled by htmx; once the
    job has succeeded, the snapshot it made."""
    challenge = get_object_or_404(Challenge, slug=slug)
    check_challenge(request.user, challenge, write=False)
    job = fail_if_stale(get_object_or_404(Job, pk=pk, challenge=challenge, kind=PUBLISH))
    if job.state == Job.State.SUCCEEDED:
        number = job.result["snapshot"]
        label = "final results" if job.params.get("final", True) else "interim results"
        messages.success(request, f"Published {label} #{number}.")
        url = reverse("scoring:snapshot", args=[slug, number])
        if getattr(request, "htmx", False):
            return HttpResponse(status=204, headers={"HX-Redirect": url})
        return redirect(url)
    context = {"challenge": challenge, "job": job}
    if getattr(request, "htmx", False):
        return render(request, "scoring/_publishing.html", context)
    return render(request, "scoring/publishing.html", context)


@require_safe
def preview(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    if not may_read(request.user, challenge):
        raise Http404("No published results.")
    try:
        result = services.preview(challenge, request.user)
    except ScoringInputError as exc:
        messages.error(request, f"Nothing to preview: {exc}")
        return redirect("scoring:challenge", slug=slug)
    all_tables = tables.tables(result)
    return render(
        request,
        "scoring/preview.html",
        {
            **_publish_context(challenge),
            "result": result,
            "tables": all_tables,
        },
    )


def _snapshot(request: HttpRequest, slug: str, number: int) -> Snapshot:
    """A snapshot the visitor may see: an interim one kept for organizers is 404 to others."""
    found = get_object_or_404(
        Snapshot.objects.select_related("challenge"), challenge__slug=slug, number=number
    )
    if not found.public and not may_read(request.user, found.challenge):
        raise Http404("No such results.")
    return found


def snapshot(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    snap = _snapshot(request, slug, number)
    result = snap.result
    all_tables = tables.tables(result)
    organizer = may_read(request.user, snap.challenge)
    others = list(
        selectors.snapshots(snap.challenge, organizer=organizer).only("number", "final", "public")
    )
    context = {
        "challenge": snap.challenge,
        "snapshot": snap,
        "newer": others[0] if others and others[0].number != snap.number else None,
        "others": sorted(others, key=lambda s: s.number),
        "tracks": list(result["tracks"]),
        "leaderboards": [t for t in all_tables if t.name.startswith("leaderboard-")],
        "checks": [t for t in all_tables if t.name in CHECK_TABLES],
        "analyses": [t for t in all_tables if t.track is None and t.name not in CHECK_TABLES],
        "counts": result["counts"],
        "pairwise": result.get("pairwise"),
        "votes_only": tables.votes_only(result),
        "settings": result["settings"],
        "settings_json": json.dumps(snap.settings, indent=2),
        "hashes_json": json.dumps(snap.input_hashes, indent=2),
    }
    if organizer:
        context.update(_publish_context(snap.challenge))
    context["releases"] = data_release.releases(snap)
    context["may_release"] = snap.public and may_write(request.user, snap.challenge)
    if context["may_release"]:
        context["release_jobs"] = data_release.release_jobs(snap)
        context["release_failed"] = (
            Job.objects.filter(
                challenge=snap.challenge, kind=data_release.RELEASE,
                params__snapshot=snap.number,
            )
            .order_by("-pk")
            .filter(state=Job.State.FAILED)
            .first()
        )  # fmt: skip
    return render(request, "scoring/snapshot.html", context)


@require_POST
def make_release(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """The "Make the data release" button: a job builds it (at once without a broker)."""
    # Who may write first: a viewer is refused as on every organizer action, whatever the
    # snapshot they name.
    check_challenge(request.user, get_object_or_404(Challenge, slug=slug), write=True)
    snap = _snapshot(request, slug, number)
    try:
        job = data_release.request_release(snap, request.user)
    except Refused as exc:
        messages.error(request, str(exc))
    else:
        if job.state == Job.State.SUCCEEDED:
            messages.success(request, f"Data release {job.result['version']} is ready.")
        elif job.state == Job.State.FAILED:
            messages.error(request, f"The data release failed: {job.error}")
    return redirect(reverse("scoring:snapshot", args=[slug, number]) + "#data-release")


@require_safe
def release_download(request: HttpRequest, slug: str, number: int, pk: int) -> HttpResponse:
    snap = _snapshot(request, slug, number)
    made = get_object_or_404(DataRelease, pk=pk, snapshot=snap)
    return FileResponse(
        data_release.open_archive(made), as_attachment=True, filename=made.file_name
    )


def track(request: HttpRequest, slug: str, number: int, code: str) -> HttpResponse:
    snap = _snapshot(request, slug, number)
    rows = snap.result["tracks"].get(code)
    if rows is None:
        raise Http404("No such track in these results.")
    plots = [
        # Drawn by matplotlib at publish time, which escapes every text it writes.
        {"track": p.track, "kind": p.kind, "svg": mark_safe(p.svg)}
        for p in snap.plots.filter(track__in=[code, "all"]).only("track", "kind", "svg")
    ]
    return render(
        request,
        "scoring/track.html",
        {
            "challenge": snap.challenge,
            "snapshot": snap,
            "track": code,
            "votes_only": tables.votes_only(snap.result),
            "track_tables": [t for t in tables.tables(snap.result) if t.track == code],
            "plots": plots,
            "plots_missing": [m for m in snap.plots_missing if m["track"] in (code, "all")],
        },
    )


def plot(
    request: HttpRequest, slug: str, number: int, code: str, kind: str, fmt: str
) -> HttpResponse:
    if fmt not in ("svg", "png"):
        raise Http404("Plots are SVG or PNG.")
    snap = _snapshot(request, slug, number)
    found = snap.plots.filter(track=code, kind=kind).first()
    if found is None:
        raise Http404("No such plot.")
    if fmt == "svg":
        return HttpResponse(found.svg, content_type="image/svg+xml")
    return HttpResponse(bytes(found.png), content_type="image/png")


def download(request: HttpRequest, slug: str, number: int, name: str, fmt: str) -> HttpResponse:
    if fmt not in ("csv", "json"):
        raise Http404("Downloads are CSV or JSON.")
    snap = _snapshot(request, slug, number)
    status = "final" if snap.final else "interim"
    stem = f"{slug}-results-{number}{'' if snap.final else '-interim'}-{name}"
    if name == "result":
        if fmt != "json":
            raise Http404("The whole result is JSON only.")
        response = JsonResponse(snap_payload(snap), json_dumps_params={"indent": 1})
    else:
        table = tables.table(snap.result, name)
        if table is None:
            raise Http404("No such table.")
        if fmt == "csv":
            response = HttpResponse(table.to_csv(status), content_type="text/csv; charset=utf-8")
        else:
            response = JsonResponse(
                {
                    "table": table.name,
                    "title": table.title,
                    "status": status,
                    "rows": table.flat_rows(),
                }
            )
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


@require_safe
def definition(request: HttpRequest, slug: str, number: int) -> HttpResponse:
    """The challenge's definition file as it was when the snapshot was published (apply it with
    `manage.py challenge apply`, rescore with `score_offline --challenge`)."""
    snap = _snapshot(request, slug, number)
    if not snap.definition:  # published before definitions were kept
        raise Http404("This publication has no definition file.")
    response = HttpResponse(snap.definition, content_type="application/yaml")
    response["Content-Disposition"] = content_disposition_header(
        True, f"{slug}-snapshot-{number}.yaml"
    )
    return response


def snap_payload(snap: Snapshot) -> dict:
    return {
        "challenge": snap.challenge.slug,
        "number": snap.number,
        "status": "final" if snap.final else "interim",
        "published_at": snap.published_at.isoformat(),
        "code_version": snap.code_version,
        "input_hashes": snap.input_hashes,
        "settings": snap.settings,
        # The challenge's definition file (challenge.yaml) it was published under; "" before
        # definitions were kept.
        "definition_sha256": snap.definition_sha256,
        "definition": snap.definition,
        "result": snap.result,
    }
