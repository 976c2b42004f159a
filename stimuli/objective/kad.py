"""Kernel Audio Distance: the unbiased MMD² between two sets of embeddings (Chung et al. 2025).

    KAD = 100 x ( mean_{i != j} k(x_i, x_j) + mean_{i != j} k(y_i, y_j) - 2 mean_{i, j} k(x_i, y_j) )
    k(a, b) = exp(-|a - b|² / (2 h²)),  h = the median pairwise distance of the reference Y

as kadtk defines it (its `calc_kernel_audio_distance`, scale factor 100). The reference fixes the
kernel's scale, so every system of a category is measured with one kernel. The estimate is
unbiased: for two samples of one distribution it scatters around 0 and may be slightly negative.
No Gaussian fit, so it settles with far fewer clips than FAD.

The median is the lower middle of the n (n - 1) / 2 distances, as `torch.median` in kadtk takes
it (numpy's median would average the two middles of an even count).

A reference is prepared once per category (`KadReference`): its bandwidth, squared norms and the
sum of its kernel matrix off the diagonal. Each system then costs its own kernel matrix and one
cross-kernel against the reference. Pure numpy, in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .fad import _stack

SCALE = 100.0
# Rows of a kernel matrix made at once: a 5,000-frame reference never needs its n x n matrix.
_CHUNK = 1024


def median_pairwise_distance(y: np.ndarray) -> float:
    """The lower median of the Euclidean distances between distinct rows of `y`."""
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    if n < 2:
        raise ValueError(f"a bandwidth needs at least 2 reference embeddings, got {n}")
    sqnorms = np.einsum("ij,ij->i", y, y)
    parts = []
    for start in range(0, n - 1, _CHUNK):
        stop = min(start + _CHUNK, n)
        d2 = sqnorms[start:stop, None] + sqnorms[None, :] - 2.0 * (y[start:stop] @ y.T)
        rows, cols = np.triu_indices(stop - start, k=1, m=n - start)
        parts.append(d2[:, start:][rows, cols])
    d2 = np.concatenate(parts)
    middle = (d2.size - 1) // 2
    return math.sqrt(max(float(np.partition(d2, middle)[middle]), 0.0))


def _kernel(
    x: np.ndarray, x_sq: np.ndarray, y: np.ndarray, y_sq: np.ndarray, gamma: float
) -> np.ndarray:
    d2 = x_sq[:, None] + y_sq[None, :] - 2.0 * (x @ y.T)
    np.maximum(d2, 0.0, out=d2)  # rounding can leave -1e-13 for a row against itself
    d2 *= -gamma
    return np.exp(d2, out=d2)


def _self_sum(x: np.ndarray, x_sq: np.ndarray, gamma: float) -> float:
    """Sum of k(x_i, x_j) over i != j (the diagonal is k(x, x) = 1 exactly)."""
    total = 0.0
    for start in range(0, x.shape[0], _CHUNK):
        block = _kernel(x[start : start + _CHUNK], x_sq[start : start + _CHUNK], x, x_sq, gamma)
        total += float(block.sum())
    return total - x.shape[0]


@dataclass(frozen=True)
class KadReference:
    """A reference set prepared for KAD: its kernel's bandwidth and its kernel sum, made once."""

    embeddings: np.ndarray = field(repr=False)
    sqnorms: np.ndarray = field(repr=False)
    bandwidth: float
    kernel_sum: float  # sum of k(y_i, y_j) over i != j

    @property
    def count(self) -> int:
        return int(self.embeddings.shape[0])

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def gamma(self) -> float:
        return 1.0 / (2.0 * self.bandwidth**2)

    @property
    def kernel_mean(self) -> float:
        n = self.count
        return self.kernel_sum / (n * (n - 1))

    @classmethod
    def of(
        cls, embeddings: np.ndarray | Sequence[np.ndarray], *, bandwidth: float | None = None
    ) -> KadReference:
        """A reference from its embeddings ([n, d], [clips, frames, d] or a list of clips);
        the bandwidth is their median pairwise distance unless given."""
        y = _stack(embeddings)
        if y.shape[0] < 2:
            raise ValueError(f"a KAD reference needs at least 2 embeddings, got {y.shape[0]}")
        if not np.all(np.isfinite(y)):
            raise ValueError("the reference embeddings contain NaN or infinite values")
        h = median_pairwise_distance(y) if bandwidth is None else float(bandwidth)
        if not h > 0:
            raise ValueError(
                "the reference's median pairwise distance is 0 (more than half its embeddings "
                "are the same): no kernel bandwidth"
            )
        sqnorms = np.einsum("ij,ij->i", y, y)
        reference = cls(y, sqnorms, h, 0.0)
        return cls(y, sqnorms, h, _self_sum(y, sqnorms, reference.gamma))

    def cross(self, x: np.ndarray, x_sq: np.ndarray) -> np.ndarray:
        """The kernel of each row of x against every reference row, [m, n]."""
        return _kernel(x, x_sq, self.embeddings, self.sqnorms, self.gamma)


def _checked(x: np.ndarray | Sequence[np.ndarray], reference: KadReference) -> np.ndarray:
    x = _stack(x)
    if x.shape[0] < 2:
        raise ValueError(f"KAD needs at least 2 embeddings, got {x.shape[0]}")
    if x.shape[1] != reference.dim:
        raise ValueError(f"embedding sizes differ: {x.shape[1]} and {reference.dim}")
    if not np.all(np.isfinite(x)):
        raise ValueError("embeddings contain NaN or infinite values")
    return x


def kernel_distance(
    embeddings: np.ndarray | Sequence[np.ndarray],
    reference: KadReference | np.ndarray | Sequence[np.ndarray],
) -> float:
    """KAD of a set of embeddings against a reference (prepared, or its embeddings)."""
    reference = reference if isinstance(reference, KadReference) else KadReference.of(reference)
    x = _checked(embeddings, reference)
    m = x.shape[0]
    x_sq = np.einsum("ij,ij->i", x, x)
    k_xx = _self_sum(x, x_sq, reference.gamma) / (m * (m - 1))
    k_xy = float(reference.cross(x, x_sq).mean())
    return SCALE * (k_xx + reference.kernel_mean - 2.0 * k_xy)


@dataclass(frozen=True)
class KadInterval:
    """KAD with its interval over clips and the standard error behind it."""

    value: float
    low: float | None
    high: float | None
    standard_error: float | None
    withheld: str = ""


# Fewer clips than this give a jackknife standard error too unstable to show.
KAD_MIN_CLIPS = 5


def kad_interval(
    clips: Sequence[np.ndarray],
    reference: KadReference,
    *,
    confidence: float = 0.95,
) -> KadInterval:
    """KAD of a system's clips with a jackknife interval over clips, within KAD's range.

    KAD is unbiased, so no bias correction is needed: the jackknife (leave one clip out; frames
    stay with their clip) estimates its standard error, from per-clip kernel block sums made
    once. The population MMD² cannot be negative, so the interval is truncated at 0:
    [max(KAD - z se, 0), max(KAD, 0) + z se], never below 0 and never of zero width (a
    negative estimate says the sets are alike: its interval is the one-sided bound from 0).
    Withheld (None) with fewer than `KAD_MIN_CLIPS` clips or no spread between them.
    """
    from scipy.stats import norm

    per_clip = [np.asarray(c, dtype=np.float64).reshape(-1, np.asarray(c).shape[-1]) for c in clips]
    x = _checked(per_clip, reference)
    m = x.shape[0]
    sizes = np.array([c.shape[0] for c in per_clip])
    owner = np.repeat(np.arange(len(per_clip)), sizes)
    x_sq = np.einsum("ij,ij->i", x, x)
    k_xx = _kernel(x, x_sq, x, x_sq, reference.gamma)
    # blocks[a, b]: the kernel summed over clip a's frames against clip b's.
    c = len(per_clip)
    one_hot = np.zeros((m, c))
    one_hot[np.arange(m), owner] = 1.0
    blocks = one_hot.T @ k_xx @ one_hot
    cross = reference.cross(x, x_sq).sum(axis=1) @ one_hot  # per clip, against the reference
    n = reference.count
    self_total = float(blocks.sum()) - m
    value = SCALE * (
        self_total / (m * (m - 1)) + reference.kernel_mean - 2.0 * cross.sum() / (m * n)
    )
    if c < KAD_MIN_CLIPS:
        return KadInterval(value, None, None, None, f"fewer than {KAD_MIN_CLIPS} clips")
    rest = m - sizes
    if np.any(rest < 2):
        return KadInterval(value, None, None, None, "a clip holds nearly all embeddings")
    rows = blocks.sum(axis=1)
    left_self = self_total - 2.0 * rows + np.diag(blocks) + sizes
    left_out = SCALE * (
        left_self / (rest * (rest - 1)) + reference.kernel_mean
        - 2.0 * (cross.sum() - cross) / (rest * n)
    )  # fmt: skip
    se = math.sqrt((c - 1) / c * float(np.sum((left_out - left_out.mean()) ** 2)))
    if not se > 1e-12 * max(abs(value), 1e-12):
        return KadInterval(value, None, None, se, "no spread between the clips")
    z = float(norm.ppf(0.5 + confidence / 2))
    return KadInterval(value, max(value - z * se, 0.0), max(value, 0.0) + z * se, se)
