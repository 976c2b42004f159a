"""Read-only queries that pages and the API share."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from .models import Category, Challenge, Clip, Job, System


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
