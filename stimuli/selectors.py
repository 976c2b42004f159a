"""Read-only queries that pages and the API share."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, QuerySet

from .archives import Listing
from .audio import ClipSpec
from .models import (
    Category,
    Challenge,
    Clip,
    FadResult,
    Job,
    Medoid,
    ObjectiveSettings,
    PredictorScore,
    System,
)
from .predictor_axes import AXES, AXIS_TITLES, UNTRAINED_MARK


def normalise_folder(name: str) -> str:
    """`DogBark`, `dog_bark`, `Dog bark` and `dog-bark` all name the same category."""
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def category_lookup(challenge: Challenge) -> dict[str, Category]:
    """The challenge's categories by their normalised slug and name, as folders may spell them."""
    lookup: dict[str, Category] = {}
    for category in challenge.categories.all():
        lookup[normalise_folder(category.slug)] = category
        lookup[normalise_folder(category.name)] = category
    return lookup


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
    medoids: bool = False,
) -> QuerySet[Clip]:
    """Clips by role, category and system; with `medoids`, the medoids alone, in their order."""
    qs = Clip.objects.filter(challenge=challenge).select_related("category", "system", "audio")
    if medoids:
        qs = qs.filter(medoid_of__isnull=False)
    if role:
        qs = qs.filter(role=role)
    if category:
        qs = qs.filter(category__slug=category)
    if system:
        qs = qs.filter(system__name=system)
    if medoids:
        return qs.order_by("system__name", "category__position", "medoid_of__position", "id")
    return qs.order_by("role", "category__position", "original_name", "id")


@dataclass(frozen=True)
class ClipValues:
    """The learned predictors' values of some clips: the axes any of them has (in the tables'
    order, each with its title), each clip's {axis: value}, and whether any value came from
    untrained stand-ins (the demo's), which mean nothing."""

    columns: list[dict[str, str]]
    values: dict[int, dict[str, float]]
    untrained: bool


def clip_values(clip_ids: Sequence[int]) -> ClipValues:
    """The predictors' values stored for these clips, for the organizer's clips page and its
    medoids (a clip keeps one row per predictor and axis, its latest files')."""
    rows = PredictorScore.objects.filter(clip_id__in=list(clip_ids)).values_list(
        "clip_id", "axis", "value", "model_id"
    )
    values: dict[int, dict[str, float]] = {}
    untrained = False
    for clip_id, axis, value, model_id in rows:
        values.setdefault(clip_id, {})[axis] = value
        untrained = untrained or UNTRAINED_MARK in model_id
    present = {axis for found in values.values() for axis in found}
    ordered = [a for a in AXES if a in present] + sorted(present - set(AXES))
    columns = [{"axis": a, "title": AXIS_TITLES.get(a, a)} for a in ordered]
    return ClipValues(columns, values, untrained)


def fad_rows(
    challenge: Challenge, model_id: str | None = None, *, every_model: bool = False
) -> list[dict]:
    """`system, track, category, fad_dev, fad_eval` per system and category (the FAD CSV format),
    with intervals where computed and `fad_dev_inf`, `fad_eval_inf` where FAD-inf is enabled;
    `kad_dev`, `kad_eval` (with their intervals) in every row where any result has a KAD;
    `fad_eval_25`, `kad_eval_50`... the metric on one draw of that many clips, where the system
    has more (the embedding league's stability).

    With several embedding models on record, `model_id` picks one; by default the model most
    recently computed for this challenge. `every_model`: the rows of every model, each with a
    `model` column (the embedding league's input).
    """
    results = FadResult.objects.filter(challenge=challenge)
    # FAD-inf columns only where the objective settings ask for FAD-inf: the leaderboard shows
    # the column then (empty where a set was too small), and not at all otherwise.
    infinity = ObjectiveSettings.objects.filter(challenge=challenge, fad_infinity=True).exists()
    if not every_model:
        model_id = model_id or designated_fad_model(challenge)
        if model_id is None:
            return []
        results = results.filter(model_id=model_id)
    rows: dict[tuple, dict] = {}
    for result in results.select_related("system__track", "category"):
        key = (result.model_id, result.system_id, result.category_id)
        row = rows.setdefault(
            key if every_model else key[1:],
            {
                "system": result.system.name,
                "track": result.system.track.code,
                "category": result.category.slug,
                "fad_dev": None,
                "fad_eval": None,
                **({"model": result.model_id} if every_model else {}),
                **({"fad_dev_inf": None, "fad_eval_inf": None} if infinity else {}),
            },
        )
        key = "fad_eval" if result.reference == FadResult.Reference.EVALUATION else "fad_dev"
        row[key] = result.value
        if infinity:
            row[f"{key}_inf"] = (result.details or {}).get("fad_inf")
        if ci := (result.details or {}).get("ci95"):
            row[f"{key}_low"], row[f"{key}_high"] = ci
        if (kad := (result.details or {}).get("kad")) is not None:
            kad_key = "kad" + key.removeprefix("fad")
            row[kad_key] = kad
            if ci := result.details.get("kad_ci95"):
                row[f"{kad_key}_low"], row[f"{kad_key}_high"] = ci
        # One draw of 25, 50, 100 clips (where the system has more): the league's stability.
        for size, values in ((result.details or {}).get("subsets") or {}).items():
            for metric, value in values.items():
                row[f"{metric}{key.removeprefix('fad')}_{size}"] = value
    if any("kad_dev" in row or "kad_eval" in row for row in rows.values()):
        for row in rows.values():
            row.setdefault("kad_dev", None)
            row.setdefault("kad_eval", None)
    return sorted(
        rows.values(),
        key=lambda r: (r.get("model", ""), r["track"], r["system"], r["category"]),
    )


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


def designated_fad_model(challenge: Challenge) -> str | None:
    """The challenge's FAD model: the one whose FAD picked its finalists (league models' do not);
    before any ranking, that of its most recent FAD computation."""
    chosen = Challenge.objects.filter(pk=challenge.pk).values_list("fad_model_id", flat=True)
    if model_id := chosen.first():
        return model_id
    results = FadResult.objects.filter(challenge=challenge).order_by("-computed_at")
    return results.values_list("model_id", flat=True).first()


def fad_ranking(challenge: Challenge, model_id: str | None = None) -> dict[str, list[dict]]:
    """Systems per track ordered by mean FAD-Eval over categories (FAD-Dev where no Eval), with
    their mean KAD beside it where every category has one.

    A system is ranked only when it has a FAD for every category of the challenge.
    """
    results = FadResult.objects.filter(challenge=challenge)
    model_id = model_id or designated_fad_model(challenge)
    categories = list(Category.objects.filter(challenge=challenge).values_list("pk", flat=True))
    per: dict[int, dict[str, dict[int, float]]] = {}
    kad: dict[int, dict[str, dict[int, float]]] = {}
    for row in results.filter(model_id=model_id):
        per.setdefault(row.system_id, {}).setdefault(row.reference, {})[row.category_id] = row.value
        if (value := (row.details or {}).get("kad")) is not None:
            kad.setdefault(row.system_id, {}).setdefault(row.reference, {})[row.category_id] = value
    has_eval = any("evaluation" in v for v in per.values())
    key = "evaluation" if has_eval else "development"
    tracks: dict[str, list[dict]] = {}
    systems = System.objects.filter(challenge=challenge).select_related("track", "team")
    for system in systems.order_by("track__code", "name"):
        values = per.get(system.pk, {})
        complete = all(c in values.get(key, {}) for c in categories) and categories
        row = {
            "system": system,
            "fad_eval": _mean(values.get("evaluation", {}), categories),
            "fad_dev": _mean(values.get("development", {}), categories),
            "kad_eval": _mean(kad.get(system.pk, {}).get("evaluation", {}), categories),
            "kad_dev": _mean(kad.get(system.pk, {}).get("development", {}), categories),
            "ranked": bool(complete),
        }
        row["score"] = row["fad_eval"] if key == "evaluation" else row["fad_dev"]
        tracks.setdefault(system.track.code, []).append(row)
    for rows in tracks.values():
        rows.sort(
            key=lambda r: (
                not r["ranked"],
                r["score"] if r["score"] is not None else float("inf"),
                r["fad_dev"] if r["fad_dev"] is not None else float("inf"),
                r["system"].name,
            )
        )
        for position, row in enumerate(rows, start=1):
            row["rank"] = position if row["ranked"] else None
    return tracks


def clip_fad(system: System, category: Category, model_id: str | None = None) -> dict:
    """A system's clips of one category ordered by their own FAD (fadtk's per-clip FAD), the
    worst first: against the evaluation set where there is one, else the development set. Clips
    without one (fewer than 2 frames) come last."""
    model_id = model_id or designated_fad_model(system.challenge)
    per_reference = {
        result.reference: dict((result.details or {}).get("clip_fad", []))
        for result in FadResult.objects.filter(system=system, category=category, model_id=model_id)
    }
    evaluation = FadResult.Reference.EVALUATION
    order = evaluation if evaluation in per_reference else FadResult.Reference.DEVELOPMENT
    clips = Clip.objects.filter(system=system, category=category, role=Clip.Role.SYSTEM)
    rows = [
        {
            "clip": clip,
            "fad_eval": per_reference.get(evaluation, {}).get(clip.audio_id),
            "fad_dev": per_reference.get(FadResult.Reference.DEVELOPMENT, {}).get(clip.audio_id),
        }
        for clip in clips.select_related("audio").order_by("original_name", "pk")
    ]
    key = "fad_eval" if order == evaluation else "fad_dev"
    rows.sort(key=lambda row: (row[key] is None, -(row[key] or 0.0)))
    return {"model_id": model_id, "reference": order, "rows": rows}


def _mean(values: dict[int, float], categories: list[int]) -> float | None:
    if not categories or any(c not in values for c in categories):
        return None
    return statistics.fmean(values[c] for c in categories)


def fad_ranking_table(challenge: Challenge, model_id: str | None = None) -> dict:
    """The ranking as plain data, for the API and the command line."""
    model_id = model_id or designated_fad_model(challenge)
    tracks = fad_ranking(challenge, model_id) if model_id else {}
    return {
        "model_id": model_id,
        "tracks": {
            code: [
                {
                    "rank": row["rank"],
                    "system": row["system"].name,
                    "public_id": row["system"].public_id,
                    "system_id": row["system"].pk,
                    "team": row["system"].team.name,
                    "fad_eval": row["fad_eval"],
                    "fad_dev": row["fad_dev"],
                    "kad_eval": row["kad_eval"],
                    "kad_dev": row["kad_dev"],
                    "finalist": row["system"].is_finalist,
                }
                for row in rows
            ]
            for code, rows in tracks.items()
        },
    }


def clip_spec(challenge: Challenge) -> ClipSpec:
    """The clip spec every clip of the challenge must meet (uploads, generation, text prompts)."""
    return ClipSpec(
        sample_rate=challenge.sample_rate,
        channels=challenge.channels,
        duration_s=challenge.clip_duration_s,
        bit_depth=challenge.bit_depth,
    )


def listing_problems(challenge: Challenge, listing: Listing) -> list[str]:
    # A clip keeps its path in the upload as its original name, so a longer path cannot be stored.
    limit = Clip._meta.get_field("original_name").max_length
    too_long = [
        f"{m.path}: the path is {len(m.path):,} characters long; the limit is {limit}"
        for m in listing.members
        if len(m.path) > limit
    ]
    return too_long + folder_problems(challenge, {m.folder for m in listing.members})


def folder_problems(challenge: Challenge, folders: set[str]) -> list[str]:
    lookup = category_lookup(challenge)
    expected = ", ".join(c.slug for c in challenge.categories.all())
    return [
        f"{folder}/: unknown category folder; expected one of: {expected}"
        for folder in sorted(folders)
        if normalise_folder(folder) not in lookup
    ]
