"""FAD against closed forms, the reference sqrtm formula and the published DCASE statistics."""

from __future__ import annotations

import numpy as np
import pytest

from stimuli.objective.fad import (
    GaussianStats,
    ReferenceFactor,
    fad,
    fad_bootstrap_interval,
    fad_infinity,
    fad_infinity_min_size,
    frechet_distance,
)
from tests.fad_reference import frechet_distance_eigh, frechet_distance_sqrtm


def random_psd(d: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    a = rng.normal(size=(d, rank))
    return a @ a.T / rank


def test_identical_sets_give_zero():
    x = np.random.default_rng(0).normal(size=(500, 16))
    assert fad(x, x) == pytest.approx(0.0, abs=1e-9)
    stats = GaussianStats.from_embeddings(x)
    assert frechet_distance(stats, stats) == pytest.approx(0.0, abs=1e-9)


def test_statistics_are_those_of_numpy_cov():
    clips = [np.random.default_rng(i).normal(size=(4, 8)) for i in range(10)]
    stats = GaussianStats.from_embeddings(clips)
    stacked = np.concatenate(clips)
    assert stats.count == 40
    np.testing.assert_allclose(stats.mu, stacked.mean(axis=0))
    np.testing.assert_allclose(stats.sigma, np.cov(stacked, rowvar=False))


def test_diagonal_gaussians_closed_form():
    # For commuting covariances the trace term is sum(sqrt(a_i b_i)): FAD is
    # |mu_a - mu_b|^2 + sum((sqrt(a_i) - sqrt(b_i))^2).
    mu_a, mu_b = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    var_a, var_b = np.array([1.0, 4.0, 9.0]), np.array([4.0, 1.0, 0.25])
    a = GaussianStats(mu_a, np.diag(var_a), 0)
    b = GaussianStats(mu_b, np.diag(var_b), 0)
    expected = 5.0 + ((np.sqrt(var_a) - np.sqrt(var_b)) ** 2).sum()
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-12)


def test_full_covariances_closed_form():
    # With S_a = c^2 I the trace term is c * tr(S_b^1/2), known from S_b's eigenvalues.
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    eig_b = np.array([0.5, 1.0, 2.0, 3.0, 5.0, 8.0])
    sigma_b = (q * eig_b) @ q.T
    a = GaussianStats(np.zeros(6), 4.0 * np.eye(6), 0)
    b = GaussianStats(np.ones(6), sigma_b, 0)
    expected = 6.0 + 24.0 + eig_b.sum() - 2 * 2.0 * np.sqrt(eig_b).sum()
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-10)


def test_symmetric():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(300, 10)), rng.normal(1.0, 2.0, size=(200, 10))
    assert fad(x, y) == pytest.approx(fad(y, x), rel=1e-10)


def test_singular_covariances_are_exact():
    # Rank 1 against rank 2 in 3 dimensions: sqrtm struggles, the closed form is known.
    a = GaussianStats(np.zeros(3), np.diag([1.0, 0.0, 0.0]), 0)
    b = GaussianStats(np.zeros(3), np.diag([4.0, 9.0, 0.0]), 0)
    assert frechet_distance(a, b) == pytest.approx(1.0 + 9.0, abs=1e-12)
    # Fewer clips than dimensions: a real, finite, non-negative value that matches sqrtm's.
    rng = np.random.default_rng(3)
    few, many = rng.normal(size=(20, 64)), rng.normal(size=(30, 64))
    value = fad(few, many)
    assert np.isfinite(value) and value > 0 and isinstance(value, float)
    reference = frechet_distance_sqrtm(
        GaussianStats.from_embeddings(few), GaussianStats.from_embeddings(many)
    )
    assert value == pytest.approx(reference, rel=1e-6)


def test_rejects_mismatched_sizes_and_bad_statistics(tmp_path):
    with pytest.raises(ValueError, match="sizes differ"):
        fad(np.zeros((5, 3)) + np.arange(3), np.random.default_rng(0).normal(size=(5, 4)))
    path = tmp_path / "bad.npz"
    np.savez(path, mu=np.zeros(3), sigma=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="sigma has shape"):
        GaussianStats.from_npz(path)
    np.savez(path, mu=np.zeros(3))
    with pytest.raises(ValueError, match="lacks sigma"):
        GaussianStats.from_npz(path)


def test_agrees_with_sqrtm_on_the_published_dcase_statistics(dcase_stats_dir):
    stats = {f.stem: GaussianStats.from_npz(f) for f in sorted(dcase_stats_dir.glob("*.npz"))}
    assert all(s.dim == 128 and s.count > 0 for s in stats.values())
    names = sorted(stats)
    for first, second in zip(names, names[1:] + names[:1], strict=True):
        ours = frechet_distance(stats[first], stats[second])
        theirs = frechet_distance_sqrtm(stats[first], stats[second])
        assert ours == pytest.approx(theirs, rel=1e-6), (first, second)
        assert ours > 1.0  # categories differ
    for s in stats.values():
        assert frechet_distance(s, s) == pytest.approx(0.0, abs=1e-6)


def test_fad_infinity_removes_the_small_sample_bias():
    rng = np.random.default_rng(4)
    d = 8
    reference = GaussianStats(np.zeros(d), np.eye(d), 0)
    sample = rng.normal(size=(2000, d))  # the same distribution: true FAD is 0
    result = fad_infinity(sample, reference, seed=0)
    plain = fad(sample[:200], reference)
    assert abs(result.value) < 0.02 < plain
    assert result.slope > 0 and result.r_squared > 0.8


def test_bootstrap_interval_contains_the_estimate_and_is_reproducible():
    rng = np.random.default_rng(5)
    clips = [rng.normal(0.5, 1.0, size=(4, 6)) for _ in range(60)]
    reference = GaussianStats.from_embeddings(rng.normal(size=(4000, 6)))
    low, high = fad_bootstrap_interval(clips, reference, n_resamples=200, seed=1)
    estimate = fad(clips, reference)
    assert low < estimate < high
    assert (low, high) == fad_bootstrap_interval(clips, reference, n_resamples=200, seed=1)


def gaussian_truth(mu: np.ndarray, variances: np.ndarray) -> float:
    """FAD of N(mu, diag(variances)) against N(0, I), in closed form."""
    return float(mu @ mu + ((np.sqrt(variances) - 1.0) ** 2).sum())


def test_fad_infinity_recovers_a_known_fad_with_fewer_embeddings_than_ten_times_d():
    # 64-d, 500 embeddings (125 clips x 4 frames): the plain FAD is about 40 % too high, and
    # extrapolating from subsets smaller than d landed about 20 % too low. From 2 d up the
    # intercept is within 6 % of the truth on average and 15 % in any one draw.
    d = 64
    variances = np.linspace(0.5, 2.0, d)
    mu = np.full(d, 0.2)
    truth = gaussian_truth(mu, variances)
    reference = GaussianStats(np.zeros(d), np.eye(d), 0)
    errors, plain = [], []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        clips = [mu + rng.normal(size=(4, d)) * np.sqrt(variances) for _ in range(125)]
        result = fad_infinity(clips, reference, seed=seed)
        assert result.sizes[0] == 2 * d and result.sizes[-1] == 500 and len(result.sizes) == 25
        errors.append(result.value / truth - 1)
        plain.append(fad(clips, reference) / truth - 1)
    assert min(plain) > 0.3  # the bias FAD-inf is there to remove
    assert abs(np.mean(errors)) < 0.06, errors
    assert max(abs(e) for e in errors) < 0.15, errors


def test_fad_infinity_refuses_too_few_embeddings_and_too_small_subsets():
    reference = GaussianStats(np.zeros(64), np.eye(64), 0)
    assert fad_infinity_min_size(64) == 128 and fad_infinity_min_size(8) == 100
    sample = np.random.default_rng(0).normal(size=(128, 64))
    with pytest.raises(ValueError, match="more than 128 embeddings of 64 dimensions"):
        fad_infinity(sample, reference)
    sample = np.random.default_rng(0).normal(size=(400, 64))
    with pytest.raises(ValueError, match="subsets of 64 embeddings are too small"):
        fad_infinity(sample, reference, min_size=64)
    assert fad_infinity(sample, reference, min_size=200).sizes[0] == 200


def test_bootstrap_interval_covers_the_truth_despite_the_resampling_bias():
    # FAD is biased upwards and resampling clips with replacement adds as much again, so a
    # percentile interval sits above the estimate: here it covered the true FAD 7 times in
    # 20. The basic interval reflects the shift back and covers it 20 times in 20.
    d, clips_per_set, frames = 8, 40, 4
    mu = np.full(d, 0.3)
    truth = gaussian_truth(mu, np.ones(d))
    reference = GaussianStats(np.zeros(d), np.eye(d), 0)
    rng = np.random.default_rng(0)
    covers_truth = covers_estimate = 0
    estimates = []
    for repetition in range(20):
        clips = [mu + rng.normal(size=(frames, d)) for _ in range(clips_per_set)]
        estimate = fad(clips, reference)
        estimates.append(estimate)
        low, high = fad_bootstrap_interval(clips, reference, n_resamples=200, seed=repetition)
        covers_truth += low <= truth <= high
        covers_estimate += low <= estimate <= high
    assert np.mean(estimates) > truth * 1.15  # the bias the interval has to allow for
    assert covers_truth >= 17, covers_truth
    assert covers_estimate >= 17, covers_estimate


def _stats(rng: np.random.Generator, n: int, d: int) -> GaussianStats:
    mixing = rng.normal(size=(d, d)) / np.sqrt(d)
    return GaussianStats.from_embeddings(rng.normal(size=(n, d)) @ mixing + rng.normal(size=d))


def test_a_factored_reference_agrees_with_both_exact_paths():
    rng = np.random.default_rng(11)
    reference = _stats(rng, 2000, 96)
    factored = ReferenceFactor.of(reference)
    assert factored.triangular  # positive definite: the Cholesky factor
    for _ in range(3):  # one factor serves many systems
        system = _stats(rng, 800, 96)
        ours = frechet_distance(system, factored)
        assert ours == pytest.approx(frechet_distance_eigh(system, reference), rel=1e-10)
        assert ours == pytest.approx(frechet_distance_sqrtm(system, reference), rel=1e-8)
        assert ours == frechet_distance(system, reference)  # the same path, factored per call


def test_a_singular_reference_takes_the_exact_eigenvector_factor():
    rng = np.random.default_rng(12)
    reference = _stats(rng, 40, 64)  # 40 embeddings in 64 dimensions: rank 39
    factored = ReferenceFactor.of(reference)
    assert not factored.triangular
    system = _stats(rng, 500, 64)
    ours = frechet_distance(system, factored)
    # The full eigen path also sums square roots of rounding-level eigenvalues (~sqrt(eps)).
    assert factored.factor.shape == (64, 39)  # the range alone
    assert ours == pytest.approx(frechet_distance_eigh(reference, system), rel=1e-8)
    assert ours == pytest.approx(frechet_distance_sqrtm(system, reference), rel=1e-6)
    # Rank 1 against rank 2, the reference singular: the closed form.
    a = GaussianStats(np.zeros(3), np.diag([4.0, 9.0, 0.0]), 0)
    b = ReferenceFactor.of(GaussianStats(np.zeros(3), np.diag([1.0, 0.0, 0.0]), 0))
    assert not b.triangular
    assert frechet_distance(a, b) == pytest.approx(1.0 + 9.0, abs=1e-12)


def test_factored_dcase_statistics_agree_with_the_exact_path(dcase_stats_dir):
    stats = [GaussianStats.from_npz(f) for f in sorted(dcase_stats_dir.glob("*.npz"))]
    factored = ReferenceFactor.of(stats[0])
    for other in stats[1:]:
        ours = frechet_distance(other, factored)
        assert ours == pytest.approx(frechet_distance_eigh(other, stats[0]), rel=1e-10)


def test_a_system_with_fewer_embeddings_than_dimensions_takes_the_small_solve():
    # 100 clips, one embedding each, in 512 dimensions (a DCASE system's category under OpenL3):
    # the trace term from a 100 x 100 solve, against a full-rank and a singular reference.
    rng = np.random.default_rng(13)
    system = _stats(rng, 100, 512)
    assert system.centred is not None and system.centred.shape == (100, 512)
    for reference in (_stats(rng, 2000, 512), _stats(rng, 300, 512)):
        factored = ReferenceFactor.of(reference)
        ours = frechet_distance(system, factored)
        # The exact trace term: the singular values of X F, whose squares are the eigenvalues.
        singular = np.linalg.svd(system.centred @ factored.factor, compute_uv=False)
        exact = float(
            (system.mu - reference.mu) @ (system.mu - reference.mu)
            + np.trace(system.sigma)
            + np.trace(reference.sigma)
            - 2.0 * singular.sum() / np.sqrt(system.count - 1)
        )
        assert ours == pytest.approx(exact, rel=1e-10)
        assert ours == pytest.approx(frechet_distance_eigh(system, reference), rel=1e-8)
        assert ours == pytest.approx(frechet_distance_sqrtm(system, reference), rel=1e-6)
        # The d x d solve of the same statistics (no embeddings kept) agrees too.
        plain = GaussianStats(system.mu, system.sigma, system.count)
        assert plain.centred is None
        assert ours == pytest.approx(frechet_distance(plain, factored), rel=1e-8)


def test_more_embeddings_than_dimensions_keep_the_full_solve():
    rng = np.random.default_rng(14)
    assert _stats(rng, 600, 512).centred is None  # d x d is the smaller solve
    system, reference = _stats(rng, 600, 64), _stats(rng, 1000, 64)
    assert system.centred is None
    assert frechet_distance(system, reference) == pytest.approx(
        frechet_distance_sqrtm(system, reference), rel=1e-8
    )


def test_bootstrap_interval_stays_at_or_above_zero_where_the_basic_one_falls_below():
    # A system close to its reference with few clips: FAD's bias outweighs the distance, and
    # the basic interval's lower end is negative, which no FAD can be. The platform's interval
    # is the basic one cut at 0: the same coverage, inside FAD's range, never of zero width.
    d = 32
    mu = np.full(d, 0.05)
    truth = gaussian_truth(mu, np.ones(d))
    reference = GaussianStats(np.zeros(d), np.eye(d), 0)
    rng = np.random.default_rng(3)
    covered = 0
    for repetition in range(8):
        clips = [mu + rng.normal(size=(2, d)) for _ in range(40)]
        basic = fad_bootstrap_interval(clips, reference, seed=repetition, method="basic")
        low, high = fad_bootstrap_interval(clips, reference, seed=repetition)
        assert basic[0] < 0 and low == 0.0 < high == basic[1]
        covered += low <= truth <= high
    assert covered == 8
    with pytest.raises(ValueError, match="interval method must be one of"):
        fad_bootstrap_interval(clips, reference, method="bca")
