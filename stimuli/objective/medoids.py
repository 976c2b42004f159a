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
