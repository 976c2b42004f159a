"""KAD against a plain implementation of its definition, its interval, and its edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist

from stimuli.objective.kad import (
    KadReference,
    kad_interval,
    kernel_distance,
    median_pairwise_distance,
)


def definition_kad(x: np.ndarray, y: np.ndarray) -> float:
    """100 x the unbiased MMD² with a Gaussian kernel whose bandwidth is the lower median of the
    reference's pairwise distances, written out from the definition with scipy's distances."""
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)
    y = y.reshape(-1, y.shape[-1]).astype(np.float64)
    distances = np.sort(pdist(y))
    h = distances[(distances.size - 1) // 2]
    m, n = len(x), len(y)
    k_xx = np.exp(-cdist(x, x, "sqeuclidean") / (2 * h * h))
    k_yy = np.exp(-cdist(y, y, "sqeuclidean") / (2 * h * h))
    k_xy = np.exp(-cdist(x, y, "sqeuclidean") / (2 * h * h))
    xx = (k_xx.sum() - np.trace(k_xx)) / (m * (m - 1))
    yy = (k_yy.sum() - np.trace(k_yy)) / (n * (n - 1))
    return 100 * (xx + yy - 2 * k_xy.mean())


def _cases():
    rng = np.random.default_rng(31)
    shifted = (rng.normal(0.3, 1.0, size=(100, 16)), rng.normal(size=(400, 16)))
    # Two samples of one distribution: an unbiased estimate below 0 (seed chosen so).
    alike = np.random.default_rng(4)
    same = (alike.normal(size=(60, 8)), alike.normal(size=(300, 8)))
    frames = (rng.normal(0.1, 1.2, size=(20, 7, 32)), rng.normal(size=(50, 7, 32)))
    wide = (rng.normal(size=(100, 512)) * 1.1, rng.normal(size=(1000, 512)))
    return {"shifted": shifted, "same": same, "frames": frames, "wide": wide}


@pytest.mark.parametrize("name", ["shifted", "same", "frames", "wide"])
def test_kad_equals_the_definition(name):
    x, y = _cases()[name]
    expected = definition_kad(x, y)
    reference = KadReference.of(y)
    assert kernel_distance(x, reference) == pytest.approx(expected, rel=1e-6)
    assert kad_interval(list(x) if x.ndim == 3 else list(x[:, None]), reference).value == (
        pytest.approx(expected, rel=1e-6)
    )
    if name == "same":
        assert expected < 0


def test_the_median_is_the_lower_middle_of_the_distances():
    y = np.array([[0.0], [1.0], [3.0], [7.0]])  # distances 1 2 3 4 6 7: lower middle 3
    assert median_pairwise_distance(y) == pytest.approx(3.0)


def test_a_prepared_reference_is_the_same_as_its_embeddings():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(30, 4)), rng.normal(size=(2500, 4))  # more rows than one chunk
    assert kernel_distance(x, KadReference.of(y)) == pytest.approx(definition_kad(x, y), rel=1e-9)
    assert kernel_distance(x, y) == kernel_distance(x, KadReference.of(y))


def test_jackknife_interval_matches_leaving_each_clip_out_and_stays_in_range():
    rng = np.random.default_rng(2)
    clips = [rng.normal(0.2, 1.0, size=(3, 6)) for _ in range(12)]
    reference = KadReference.of(rng.normal(size=(200, 6)))
    found = kad_interval(clips, reference)
    left_out = np.array(
        [kernel_distance(np.concatenate(clips[:i] + clips[i + 1 :]), reference) for i in range(12)]
    )
    se = np.sqrt(11 / 12 * np.sum((left_out - left_out.mean()) ** 2))
    assert found.standard_error == pytest.approx(se, rel=1e-9)
    assert 0 <= found.low < found.value < found.high

    # Two samples of one distribution: a negative KAD, an interval from 0 of positive width.
    x, y = _cases()["same"]
    alike = kad_interval(list(x[:, None]), KadReference.of(y))
    assert alike.value < 0
    assert alike.low == 0 and alike.high > 0


def test_too_few_clips_or_no_spread_withhold_the_interval():
    rng = np.random.default_rng(3)
    reference = KadReference.of(rng.normal(size=(50, 3)))
    few = kad_interval([rng.normal(size=(2, 3)) for _ in range(3)], reference)
    assert few.low is None and "fewer than" in few.withheld
    same = kad_interval([np.ones((2, 3))] * 6, reference)
    assert same.low is None and same.withheld


def test_bad_input_is_refused_with_reasons():
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="at least 2"):
        KadReference.of(rng.normal(size=(1, 3)))
    with pytest.raises(ValueError, match="median pairwise distance is 0"):
        KadReference.of(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="sizes differ"):
        kernel_distance(rng.normal(size=(5, 4)), KadReference.of(rng.normal(size=(5, 3))))
    with pytest.raises(ValueError, match="NaN"):
        kernel_distance(np.full((3, 3), np.nan), KadReference.of(rng.normal(size=(5, 3))))
