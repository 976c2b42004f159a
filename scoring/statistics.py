"""Small statistics, kept in one place so that every number is computed one way."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
from scipy.stats import rankdata


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks (ties share their mean rank)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return None
    return pearson(rankdata(x[keep]), rankdata(y[keep]))


def krippendorff_alpha_interval(units: Sequence, values: Sequence[float]) -> float | None:
    """Krippendorff's alpha (interval metric) from (unit, value) pairs, one pair per rating.

    Units with a single value are not pairable and are left out, as the coefficient defines.
    """
    values = np.asarray(values, float)
    if len(values) == 0:
        return None
    _, unit_idx = np.unique(np.asarray(units, dtype=object).astype(str), return_inverse=True)
    m = np.bincount(unit_idx)
    pairable = m[unit_idx] >= 2
    if pairable.sum() < 2:
        return None
    unit_idx, values = unit_idx[pairable], values[pairable]
    m = np.bincount(unit_idx)
    s1 = np.bincount(unit_idx, values)
    s2 = np.bincount(unit_idx, values * values)
    used = m >= 2
    n = float(values.size)
    # Sum over ordered pairs within a unit of (a - b)^2 is 2 (m S2 - S1^2).
    d_observed = np.sum(2 * (m[used] * s2[used] - s1[used] ** 2) / (m[used] - 1)) / n
    d_expected = 2 * (n * np.sum(values**2) - np.sum(values) ** 2) / (n * (n - 1))
    if d_expected <= 0:
        return None
    return float(1 - d_observed / d_expected)


def finite_mean(values: Iterable[float]) -> float | None:
    arr = np.asarray(list(values), float)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else None


def rounded(value, digits: int = 6):
    if value is None:
        return None
    value = float(value)
    return round(value, digits) if math.isfinite(value) else None
