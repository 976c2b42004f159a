"""FAD the ways the platform does not compute it, to check its own against and to benchmark:
an eigendecomposition of both covariances, and the reference formula with scipy's sqrtm."""

from __future__ import annotations

import numpy as np

from stimuli.objective.fad import GaussianStats, _eigen_factor


def frechet_distance_eigh(a: GaussianStats, b: GaussianStats) -> float:
    """FAD from an eigendecomposition of S_a and the eigenvalues of S_a^1/2 S_b S_a^1/2: the
    path before references were factored, kept for agreement tests and benchmarks."""
    root_a = _eigen_factor(np.asarray(a.sigma, dtype=np.float64))
    inner = root_a.T @ np.asarray(b.sigma, dtype=np.float64) @ root_a
    values = np.clip(np.linalg.eigvalsh((inner + inner.T) / 2), 0.0, None)
    diff = a.mu - b.mu
    trace = np.trace(a.sigma) + np.trace(b.sigma)
    return max(float(diff @ diff + trace - 2.0 * np.sqrt(values).sum()), 0.0)


def frechet_distance_sqrtm(a: GaussianStats, b: GaussianStats) -> float:
    """The reference FAD formula with scipy's sqrtm, for comparison and benchmarks only."""
    from scipy import linalg

    diff = a.mu - b.mu
    covmean = linalg.sqrtm(a.sigma.dot(b.sigma))
    if not np.isfinite(covmean).all():
        offset = np.eye(a.dim) * 1e-6
        covmean = linalg.sqrtm((a.sigma + offset).dot(b.sigma + offset))
    covmean = np.real(covmean)
    return float(diff.dot(diff) + np.trace(a.sigma) + np.trace(b.sigma) - 2 * np.trace(covmean))
