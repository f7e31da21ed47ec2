"""Uncertainty of reliability curves. References: scipy.stats.binom.ppf (acceptance
intervals), scikit-learn's IsotonicRegression (the CORP curve), Dimitriadis, Gneiting &
Jordan (2021) for the consistency band's definition."""

import jax
import numpy as np
import pytest
import scipy.stats
from sklearn.isotonic import IsotonicRegression

from bayescal import classification as clf
from tests import _kernels as kernels


@pytest.fixture
def calibrated():
    rng = np.random.default_rng(3)
    p = rng.beta(2, 3, 600)
    y = (rng.uniform(size=600) < p).astype(int)
    return y, p


def test_acceptance_intervals_are_binomial_quantiles(calibrated):
    y, p = calibrated
    c = clf.acceptance_intervals(clf.reliability_curve(y, p, bins=8), level=0.9)
    n = np.asarray(c.weight)
    e = np.asarray(c.expected, np.float64)
    full = n > 0
    lo = scipy.stats.binom.ppf(0.05, n[full], e[full]) / n[full]  # scipy 1.17
    hi = scipy.stats.binom.ppf(0.95, n[full], e[full]) / n[full]
    np.testing.assert_allclose(np.asarray(c.lower)[full], lo, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c.upper)[full], hi, atol=1e-6)
    # a calibrated model's frequencies fall inside most of their intervals
    inside = (c.observed >= c.lower) & (c.observed <= c.upper)
    assert np.asarray(inside)[full].mean() >= 0.75


def test_corp_curve_equals_sklearn_isotonic_and_band_brackets_calibration(calibrated):
    y, p = calibrated
    p = np.round(p, 2)  # ties are pooled
    c = clf.corp_curve(y, p, key=jax.random.key(0), num_samples=300)
    ref = IsotonicRegression().fit(p, y).predict(np.sort(p))  # scikit-learn 1.9
    np.testing.assert_allclose(c.expected, np.sort(p), atol=1e-7)
    np.testing.assert_allclose(c.observed, ref, atol=1e-6)
    lower, upper = np.asarray(c.lower), np.asarray(c.upper)
    assert np.all(lower <= upper + 1e-7)
    # the band is what a calibrated model shows: it contains the diagonal almost everywhere
    x = np.asarray(c.expected)
    assert np.mean((lower <= x + 1e-6) & (x <= upper + 1e-6)) > 0.9


@pytest.mark.slow
def test_bootstrap_reliability_curve_brackets_observed(calibrated):
    y, p = calibrated
    for method in ("plain", "bayesian"):
        c = clf.bootstrap_reliability_curve(
            jax.random.key(1), y, p, bins=6, num_samples=300, method=method
        )
        base = clf.reliability_curve(y, p, bins=6)
        np.testing.assert_allclose(c.observed, base.observed)
        full = np.asarray(c.weight) > 20
        assert np.all(np.asarray(c.lower)[full] <= np.asarray(c.observed)[full] + 1e-6)
        assert np.all(np.asarray(c.observed)[full] <= np.asarray(c.upper)[full] + 1e-6)
        width = np.asarray(c.upper - c.lower)[full]
        # roughly 2 * 1.96 * binomial sd of each bin's frequency
        n = np.asarray(c.weight)[full]
        sd = np.sqrt(np.asarray(c.observed)[full] * (1 - np.asarray(c.observed)[full]) / n)
        assert np.all(width < 6 * sd + 0.05) and np.all(width > 1.5 * sd)


def test_uncertainty_bad_input(calibrated):
    y, p = calibrated
    with pytest.raises(TypeError, match="curve must be a CalibrationCurve"):
        clf.acceptance_intervals((1, 2, 3))
    with pytest.raises(ValueError, match="level"):
        clf.acceptance_intervals(clf.reliability_curve(y, p), level=1.5)
    with pytest.raises(ValueError, match="method must be one of"):
        clf.bootstrap_reliability_curve(jax.random.key(0), y, p, method="jackknife")
    with pytest.raises(ValueError, match="y_true"):
        clf.corp_curve(y + 1, p, key=0)


def test_reliability_curve_returns_the_edges_it_used(calibrated):
    y, p = calibrated

    curve, edges = clf.reliability_curve(
        y, p, bins=5, strategy="quantile", return_edges=True
    )
    # numpy's default (linear) quantiles at 0, 0.2, ..., 1 are the quantile-bin edges
    np.testing.assert_allclose(
        edges,
        np.quantile(p.astype(np.asarray(edges).dtype), np.linspace(0, 1, 6)),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(
        curve.weight, clf.reliability_curve(y, p, bins=5, strategy="quantile").weight
    )
    _, fd = clf.reliability_curve(y, p, bins="fd", return_edges=True)
    np.testing.assert_allclose(
        fd, kernels.freedman_diaconis_edges(np.asarray(p, np.asarray(fd).dtype)), rtol=1e-6
    )
    with pytest.raises(TypeError, match="return_edges must be a bool"):
        clf.reliability_curve(y, p, return_edges="yes")


@pytest.mark.parametrize("method", ["plain", "bayesian"])
def test_bootstrap_bands_per_cell_and_per_observation_match_a_numpy_bootstrap(method):
    # The replicates are drawn per observation (small n) or per (bin, label) cell
    # (multinomial counts / gamma weights, large n): both must give the bootstrap
    # distribution of each bin's frequency. Reference: the bootstrap done by hand in
    # NumPy (indices with replacement, or Dirichlet(1, ..., 1) weights), B = 4000.
    # The 2.5% and 97.5% percentiles of B draws have a standard error of about
    # sqrt(q (1 - q) / B) / density ~ 0.06 sd of the frequency (normal approximation);
    # two estimates differ by ~0.085 sd: 0.45 sd is over 5 standard errors, plus one
    # count's step 1 / n_bin (the frequencies are discrete).
    from bayescal._src.binning import bin_index
    from bayescal.classification._uncertainty import _bootstrap_bands

    rng = np.random.default_rng(5)
    n, bins, B = 3000, 5, 4000
    p = rng.beta(2, 3, n).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    edges = np.linspace(0, 1, bins + 1).astype(np.float32)
    b = np.asarray(bin_index(jax.numpy.asarray(p), jax.numpy.asarray(edges)))
    ref = np.empty((B, bins))
    for r in range(B):
        if method == "plain":
            w = np.bincount(rng.integers(0, n, n), minlength=n).astype(float)
        else:
            w = rng.exponential(size=n)
        ref[r] = np.bincount(b, w * y, bins) / np.bincount(b, w, bins)
    ref_lo, ref_hi = np.percentile(ref, [2.5, 97.5], axis=0)
    count = np.bincount(b, minlength=bins)
    freq = np.bincount(b, y, bins) / count
    tol = 0.45 * np.sqrt(freq * (1 - freq) / count) + 1 / count
    for per_cell in (True, False):
        lo, hi = _bootstrap_bands(
            jax.random.key(7), y, p, n, None, edges, 0.95, num_bins=bins,
            num_samples=B, method=method, batch_size=256, per_cell=per_cell,
        )
        np.testing.assert_array_less(np.abs(np.asarray(lo) - ref_lo), tol)
        np.testing.assert_array_less(np.abs(np.asarray(hi) - ref_hi), tol)
