"""Medoid selection: the clips that stand for a system's category in the listening test.

DCASE 2023 Task 7 ran k-means (k = 20) on each finalist system's clips of a category and took the
clip nearest each centroid. Here: scikit-learn's KMeans with a fixed seed and several
initialisations; clusters ordered by size (largest first, ties by the lowest clip index in them)
so the order means something and does not depend on k-means' arbitrary label numbers; for each
centroid in that order the nearest clip not yet taken (Euclidean), so the k clips are distinct.
Worker-side: scikit-learn is imported when called.
"""

from __future__ import annotations

import numpy as np
from django.db import transaction

from ..jobs import ensure_still_mine
from ..models import (
    Challenge,
    Clip,
    Job,
    Medoid,
    System,
)
from ..phases import phase_conflict
from .config import SETTLED, ObjectiveError, Progress, objective_settings


def select_medoids(
    embeddings: np.ndarray, k: int = 20, *, seed: int = 0, n_init: int = 10
) -> list[int]:
    """Row indices of `k` distinct medoids of `embeddings` [n, d], in cluster order."""
    from sklearn.cluster import KMeans

    x = np.asarray(embeddings, dtype=np.float64)
    n = x.shape[0]
    if n < k:
        raise ValueError(f"{k} medoids need at least {k} clips; there are {n}")
    if n == k:
        return list(range(n))
    kmeans = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(x)
    labels = kmeans.labels_
    sizes = np.bincount(labels, minlength=k)
    first_member = np.array(
        [np.flatnonzero(labels == c).min() if sizes[c] else n for c in range(k)]
    )
    order = sorted(range(k), key=lambda c: (-sizes[c], first_member[c]))
    distances = ((x[:, None, :] - kmeans.cluster_centers_[None, :, :]) ** 2).sum(axis=2)
    chosen: list[int] = []
    taken = np.zeros(n, dtype=bool)
    for cluster in order:
        # Stable argsort: equal distances fall to the lower clip index, for determinism.
        for index in np.argsort(distances[:, cluster], kind="stable"):
            if not taken[index]:
                taken[index] = True
                chosen.append(int(index))
                break
    return chosen


# --- medoids -------------------------------------------------------------------------------------


def compute_medoids(
    challenge: Challenge,
    *,
    model_id: str,
    progress: Progress | None = None,
    owner: Job | None = None,
) -> dict:
    """k-means medoids of every finalist system and category, replacing earlier ones at once
    (with `owner`, only while that job is still this worker's)."""
    from .embeddings.store import load_many
    from .medoids import select_medoids

    obj = objective_settings(challenge)
    finalists = list(System.objects.filter(challenge=challenge, is_finalist=True).order_by("pk"))
    chosen: list[Medoid] = []
    short: list[str] = []
    pairs = [
        (system, category_id, clip_ids)
        for system in finalists
        for category_id, clip_ids in _clip_ids(challenge, system).items()
    ]
    for done, (system, category_id, clip_ids) in enumerate(pairs, start=1):
        clips = list(Clip.objects.filter(pk__in=clip_ids).order_by("original_name", "pk"))
        k = obj.medoids_per_category
        if len(clips) < k:
            short.append(f"{system.name}/{category_id}: {len(clips)} clips < {k}")
            k = len(clips)
        embeddings = load_many(model_id, [c.audio_id for c in clips])
        scene = np.stack([embeddings[c.audio_id].mean(axis=0) for c in clips])
        # Two clips with the same audio would be the same medoid twice: cluster distinct audio.
        distinct = list({c.audio_id: i for i, c in reversed(list(enumerate(clips)))}.values())
        distinct.sort()
        k = min(k, len(distinct))
        picks = select_medoids(scene[distinct], k, seed=obj.kmeans_seed, n_init=obj.kmeans_n_init)
        for position, index in enumerate(picks):
            clip = clips[distinct[index]]
            chosen.append(
                Medoid(
                    challenge=challenge,
                    system=system,
                    category_id=category_id,
                    clip=clip,
                    position=position,
                )
            )
        if progress:
            progress(done, len(pairs), f"medoids of {system.name}")
    with transaction.atomic():
        if owner is not None:
            ensure_still_mine(owner)
        # The listening test may have opened while this job ran: its stimuli are fixed then.
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if conflict := phase_conflict(locked, fixed_by_listening="medoids cannot change"):
            raise ObjectiveError(conflict)
        Medoid.objects.filter(challenge=challenge).delete()
        Medoid.objects.bulk_create(chosen)
    return {"model_id": model_id, "medoids": len(chosen), "short": short}


def _clip_ids(challenge: Challenge, system: System) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    rows = Clip.objects.filter(SETTLED, challenge=challenge, system=system, role=Clip.Role.SYSTEM)
    for category_id, pk in rows.values_list("category_id", "pk").order_by("category_id", "pk"):
        out.setdefault(category_id, []).append(pk)
    return out
