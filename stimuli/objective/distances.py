"""FAD and KAD of every system and category against the development and evaluation references
(with FAD-inf, intervals and the league's subsets), stored as `FadResult` rows; the finalists."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db import transaction

from .. import selectors
from ..jobs import ensure_still_mine
from ..models import (
    Category,
    Challenge,
    Clip,
    FadResult,
    Job,
    System,
)
from ..phases import phase_conflict
from .config import SETTLED, ObjectiveError, Progress, objective_settings, published_stats
from .fad import (
    GaussianStats,
    ReferenceFactor,
    fad_bootstrap_interval,
    fad_infinity,
    frechet_distance,
)
from .kad import KadReference, kad_interval

# --- FAD and finalists --------------------------------------------------------------------------


def _clip_audio(challenge: Challenge, **filters) -> dict[int, list[int]]:
    """Audio ids per category id for the clips matching `filters`."""
    out: dict[int, list[int]] = {}
    rows = Clip.objects.filter(SETTLED, challenge=challenge, **filters).values_list(
        "category_id", "audio_id"
    )
    for category_id, audio_id in rows.order_by("category_id", "original_name", "pk"):
        out.setdefault(category_id, []).append(audio_id)
    return out


def _clips_of(model_id: str, audio_ids: list[int]) -> list[np.ndarray]:
    from .embeddings.store import load_many

    embeddings = load_many(model_id, audio_ids)
    return [embeddings[a] for a in audio_ids]


def _stats_of(model_id: str, audio_ids: list[int]) -> GaussianStats:
    return GaussianStats.from_embeddings(_clips_of(model_id, audio_ids))


# Each clip's own FAD (fadtk's per-song FAD: its frames against the reference) is kept for every
# clip of a system and category, the worst first, for organizers to open and listen to.


def _fad_extras(
    clips: list[np.ndarray], audio_ids: list[int], reference: ReferenceFactor, obj
) -> dict:
    """The interval, FAD-inf and worst clips of one FAD, as its details record them."""
    out: dict = {}
    if obj.fad_bootstrap:
        low, high = fad_bootstrap_interval(clips, reference, n_resamples=obj.fad_bootstrap)
        out["ci95"] = [low, high]
    if obj.fad_infinity:
        try:
            out["fad_inf"] = fad_infinity(clips, reference).value
        except ValueError as exc:  # too few embeddings: say so instead of a wrong value
            out["fad_inf_error"] = str(exc)
    per_clip = []
    for audio_id, frames in zip(audio_ids, clips, strict=True):
        if len(frames) >= 2:
            per_clip.append(
                [audio_id, frechet_distance(GaussianStats.from_embeddings(frames), reference)]
            )
    per_clip.sort(key=lambda pair: -pair[1])
    out["clip_fad"] = per_clip
    return out


def reference_stats(
    challenge: Challenge, model_id: str, reference: str
) -> dict[int, tuple[GaussianStats, int, str]]:
    """Per category: the reference's statistics, its size, and where they come from."""
    import io

    out: dict[int, tuple[GaussianStats, int, str]] = {}
    published = published_stats(challenge, model_id, reference)
    for category_id, row in published.items():
        stats = GaussianStats.from_npz(io.BytesIO(bytes(row.data)))
        out[category_id] = (stats, row.count, f"published statistics ({row.source})")
    role = Clip.Role.EVALUATION if reference == "evaluation" else Clip.Role.DEVELOPMENT
    for category_id, audio_ids in _clip_audio(challenge, role=role).items():
        if category_id not in out and len(audio_ids) >= 1:
            out[category_id] = (_stats_of(model_id, audio_ids), len(audio_ids), "audio")
    return out


def kad_references(
    challenge: Challenge, model_id: str, reference: str
) -> dict[int, KadReference | str]:
    """Per category: the reference prepared for KAD (its kernel's bandwidth and sum, made once
    for every system), or why there is none. KAD needs the reference's embeddings: published
    statistics (a mean and a covariance) cannot give it."""
    out: dict[int, KadReference | str] = {}
    for category_id in published_stats(challenge, model_id, reference):
        out[category_id] = "the reference is published statistics: KAD needs its audio"
    role = Clip.Role.EVALUATION if reference == "evaluation" else Clip.Role.DEVELOPMENT
    for category_id, audio_ids in _clip_audio(challenge, role=role).items():
        if category_id in out:
            continue
        try:
            out[category_id] = KadReference.of(_clips_of(model_id, audio_ids))
        except ValueError as exc:
            out[category_id] = f"no KAD reference: {exc}"
    return out


# The clip counts a metric's stability is measured at (the league's Kendall tau and drift):
# DCASE 2023 Task 7 had 100 clips per system and category.
SUBSET_SIZES = (25, 50, 100)


def _subset_details(
    clips: list[np.ndarray],
    factor: ReferenceFactor,
    kad_reference: KadReference | str | None,
    seed: int,
) -> dict:
    """FAD and KAD of one random draw of 25, 50 and 100 of the clips (only sizes below the
    clip count: at or above it the subset is every clip, the value itself)."""
    from .kad import kernel_distance

    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, float]] = {}
    for size in SUBSET_SIZES:
        if size >= len(clips):
            break
        picked = [clips[i] for i in np.sort(rng.choice(len(clips), size=size, replace=False))]
        stats = GaussianStats.from_embeddings(picked)
        entry = {"fad": frechet_distance(stats, factor)}
        if isinstance(kad_reference, KadReference):
            entry["kad"] = kernel_distance(picked, kad_reference)
        out[str(size)] = entry
    return {"subsets": out} if out else {}


def _kad_details(clips: list[np.ndarray], reference: KadReference | str | None) -> dict:
    """KAD with its interval (or why either is missing), as a FAD row's details record it."""
    if reference is None:
        return {}
    if isinstance(reference, str):
        return {"kad_error": reference}
    try:
        found = kad_interval(clips, reference)
    except ValueError as exc:
        return {"kad_error": str(exc)}
    out: dict = {"kad": found.value}
    if found.low is not None:
        out["kad_ci95"] = [found.low, found.high]
    else:
        out["kad_ci_withheld"] = found.withheld
    return out


def compute_fad_results(
    challenge: Challenge,
    *,
    model_id: str,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
    owner: Job | None = None,
    select: bool = True,
) -> dict:
    """FAD-Eval and FAD-Dev, each with its KAD, of every system and category; then finalists
    per track (not for a league model: `select=False`). With `owner`, results are written only
    while that job is still this worker's."""
    obj = objective_settings(challenge)
    references = [FadResult.Reference.EVALUATION]
    if obj.fad_development:
        references.append(FadResult.Reference.DEVELOPMENT)
    refs = {r: reference_stats(challenge, model_id, r) for r in references}
    kad_refs = {r: kad_references(challenge, model_id, r) for r in references}
    # Each reference covariance is factored once per category, not once per system.
    factors: dict[tuple[str, int], ReferenceFactor] = {}
    if not refs[FadResult.Reference.EVALUATION] and log:
        log("no evaluation set (audio or statistics): finalists follow FAD-Dev")
    categories = {c.pk: c for c in Category.objects.filter(challenge=challenge)}
    systems = list(System.objects.filter(challenge=challenge).order_by("pk"))
    outputs = {s.pk: _clip_audio(challenge, role=Clip.Role.SYSTEM, system=s) for s in systems}
    total = sum(len(v) for v in outputs.values())
    done = 0
    # Every value first: a failure part-way (an embedding missing, a bad reference) must leave
    # the stored results and finalists as they were, never half old and half new.
    computed: list[tuple[System, int, str, dict]] = []
    for system in systems:
        for category_id, audio_ids in outputs[system.pk].items():
            done += 1
            if len(audio_ids) < 2:
                if log:
                    log(
                        f"{system.name} / {categories[category_id].slug}: fewer than 2 clips, no FAD"
                    )
                continue
            clips = _clips_of(model_id, audio_ids)
            stats = GaussianStats.from_embeddings(clips)
            for reference in references:
                ref = refs[reference].get(category_id)
                if ref is None:
                    continue
                ref_stats, n_reference, source = ref
                if ref_stats.dim != stats.dim:
                    raise ObjectiveError(
                        f"the {reference} reference of {categories[category_id].slug} "
                        f"({source}) is {ref_stats.dim}-d, but {model_id} gives "
                        f"{stats.dim}-d embeddings"
                    )
                factor = factors.get((reference, category_id))
                if factor is None:
                    factor = factors[(reference, category_id)] = ReferenceFactor.of(ref_stats)
                values = {
                    "challenge": challenge,
                    "value": frechet_distance(stats, factor),
                    "n_clips": len(audio_ids),
                    "n_reference": n_reference,
                    "details": {
                        "frames": stats.count,
                        "reference_source": source,
                        **_fad_extras(clips, audio_ids, factor, obj),
                        **_kad_details(clips, kad_refs[reference].get(category_id)),
                        **_subset_details(
                            clips,
                            factor,
                            kad_refs[reference].get(category_id),
                            seed=system.pk * 1000 + category_id,
                        ),
                    },
                }
                computed.append((system, category_id, reference, values))
            if progress:
                progress(done, total, f"FAD of {system.name}, {categories[category_id].name}")
    kept = {(system.pk, category_id, reference) for system, category_id, reference, _ in computed}
    with transaction.atomic():
        if owner is not None:
            ensure_still_mine(owner)
        # One writer per challenge: a retried job and a new run never interleave their rows.
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if conflict := phase_conflict(locked):  # published while this job ran
            raise ObjectiveError(conflict)
        for system, category_id, reference, values in computed:
            FadResult.objects.update_or_create(
                system=system,
                category_id=category_id,
                reference=reference,
                model_id=model_id,
                defaults=values,
            )
        # Rows of this model for clips that no longer exist (a regenerated system) are stale.
        stale = [
            r.pk
            for r in FadResult.objects.filter(challenge=challenge, model_id=model_id)
            if (r.system_id, r.category_id, r.reference) not in kept
        ]
        FadResult.objects.filter(pk__in=stale).delete()
        finalists = select_finalists(challenge, model_id) if select else {}
    return {
        "model_id": model_id,
        "results": len(kept),
        "finalists": {track: [s.name for s in systems] for track, systems in finalists.items()},
    }


def select_finalists(challenge: Challenge, model_id: str) -> dict[str, list[System]]:
    """Mark the top K ranked systems of each track as finalists, and no others."""
    k = objective_settings(challenge).finalists_per_track
    chosen: dict[str, list[System]] = {}
    for track, rows in selectors.fad_ranking(challenge, model_id).items():
        chosen[track] = [r["system"] for r in rows if r["ranked"]][:k]
    ids = [s.pk for systems in chosen.values() for s in systems]
    with transaction.atomic():
        System.objects.filter(challenge=challenge).exclude(pk__in=ids).update(is_finalist=False)
        System.objects.filter(pk__in=ids).update(is_finalist=True)
        # The model that picked them is the challenge's FAD model from now on.
        Challenge.objects.filter(pk=challenge.pk).update(fad_model_id=model_id)
    challenge.fad_model_id = model_id
    return chosen
