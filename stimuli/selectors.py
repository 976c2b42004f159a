"""Read-only queries that pages and the API share."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from .models import Category, Challenge, Clip, FadResult, Job, Medoid, System


def clip_counts(challenge: Challenge) -> list[dict]:
    """One row per category: its clip count per reference role and over all systems."""
    counts = (
        Clip.objects.filter(challenge=challenge)
        .values("category_id", "role")
        .annotate(n=Count("id"))
    )
    by_category: dict[int, dict[str, int]] = {}
    for row in counts:
        by_category.setdefault(row["category_id"], {})[row["role"]] = row["n"]
    return [
        {
            "category": category,
            **{role: by_category.get(category.pk, {}).get(role, 0) for role in Clip.Role.values},
        }
        for category in Category.objects.filter(challenge=challenge)
    ]


def systems_with_counts(challenge: Challenge) -> QuerySet[System]:
    return (
        System.objects.filter(challenge=challenge)
        .select_related("team", "track")
        .annotate(clip_count=Count("clips"))
        .order_by("track__code", "name")
    )


def recent_jobs(challenge: Challenge, limit: int = 20) -> QuerySet[Job]:
    return Job.objects.filter(challenge=challenge).order_by("-created_at")[:limit]


def clips(
    challenge: Challenge,
    *,
    role: str | None = None,
    category: str | None = None,
    system: str | None = None,
) -> QuerySet[Clip]:
    qs = Clip.objects.filter(challenge=challenge).select_related("category", "system", "audio")
    if role:
        qs = qs.filter(role=role)
    if category:
        qs = qs.filter(category__slug=category)
    if system:
        qs = qs.filter(system__name=system)
    return qs.order_by("role", "category__position", "original_name", "id")


def fad_rows(challenge: Challenge, model_id: str | None = None) -> list[dict]:
    """`system, track, category, fad_dev, fad_eval` per system and category (the FAD CSV format).

    With several embedding models on record, `model_id` picks one; by default the model most
    recently computed for this challenge.
    """
    results = FadResult.objects.filter(challenge=challenge)
    if model_id is None:
        latest = results.order_by("-computed_at").values_list("model_id", flat=True).first()
        if latest is None:
            return []
        model_id = latest
    rows: dict[tuple[int, int], dict] = {}
    for result in results.filter(model_id=model_id).select_related("system__track", "category"):
        row = rows.setdefault(
            (result.system_id, result.category_id),
            {
                "system": result.system.name,
                "track": result.system.track.code,
                "category": result.category.slug,
                "fad_dev": None,
                "fad_eval": None,
            },
        )
        key = "fad_eval" if result.reference == FadResult.Reference.EVALUATION else "fad_dev"
        row[key] = result.value
    return sorted(rows.values(), key=lambda r: (r["track"], r["system"], r["category"]))


def team_rows(challenge: Challenge) -> list[dict]:
    """`system, team, track` for every system (the teams CSV format)."""
    return [
        {"system": s.name, "team": s.team.name, "track": s.track.code}
        for s in System.objects.filter(challenge=challenge).select_related("team", "track")
    ]


def medoids(challenge: Challenge) -> QuerySet[Medoid]:
    return (
        Medoid.objects.filter(challenge=challenge)
        .select_related("system__track", "system__team", "category", "clip__audio")
        .order_by("system__name", "category__position", "position")
    )
