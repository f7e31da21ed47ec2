"""Property tests (hypothesis) for the classification branch.

Shapes are fixed (N = 64) so that jitted kernels compile once per option set instead
of once per drawn length.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bayescal.classification import (
    brier_decomposition,
    brier_score,
    expected_calibration_error,
    fit_histogram_binning,
    fit_isotonic,
    reliability_curve,
)
from tests.conftest import X64

DTYPE = np.float64 if X64 else np.float32
N = 64
probs = hnp.arrays(DTYPE, N, elements=st.floats(0, 1, width=32, allow_subnormal=False))
grid_scores = hnp.arrays(DTYPE, N, elements=st.integers(-10, 30).map(lambda k: k / 20))
labels = hnp.arrays(DTYPE, N, elements=st.sampled_from([0.0, 1.0]))
NEW = np.linspace(-1.0, 2.0, 121).astype(DTYPE)


@given(grid_scores, labels)
def test_isotonic_calibrator_is_monotone_and_in_unit_interval(score, y):
    cal = fit_isotonic(y, score)
    out = np.asarray(cal(NEW))
    assert np.all(np.diff(out) >= 0)
    assert np.all((out >= 0) & (out <= 1))
    # pooled ties: equal scores, equal outputs; the fit reproduces the label mean
    fitted = np.asarray(cal(score))
    for s in np.unique(score):
        assert np.ptp(fitted[score == s]) == 0
    np.testing.assert_allclose(fitted.mean(), y.mean(), atol=1e-5)


@given(labels, probs, st.sampled_from([1, 4, 10]), st.sampled_from(["uniform", "quantile"]))
def test_reliability_weights_sum_to_n_and_values_stay_in_range(y, p, bins, strategy):
    c = reliability_curve(y, p, bins=bins, strategy=strategy)
    w = np.asarray(c.weight)
    assert w.shape == (bins,) and w.sum() == N and np.all(w >= 0)
    for field in (c.expected, c.observed):
        v = np.asarray(field)
        assert np.all(np.isfinite(v)) and np.all((v >= 0) & (v <= 1))
    ece = float(expected_calibration_error(y, p, bins=bins, strategy=strategy))
    assert 0 <= ece <= 1


@given(labels, probs)
def test_debiased_l2_never_exceeds_plugin(y, p):
    # true by construction: the subtracted variance terms are >= 0 and bins with
    # one point drop a nonnegative plug-in term
    plug = float(expected_calibration_error(y, p, bins=5, norm="l2"))
    deb = float(expected_calibration_error(y, p, bins=5, norm="l2", debias=True))
    assert 0 <= deb <= plug + 1e-6


@given(labels, grid_scores.map(lambda s: np.clip(s, 0, 1)))
def test_corp_terms_nonnegative_and_sum_to_brier(y, p):
    d = brier_decomposition(y, p)
    tol = 1e-12 if X64 else 2e-6
    assert float(d.miscalibration) >= -tol and float(d.discrimination) >= -tol
    np.testing.assert_allclose(
        float(d.miscalibration - d.discrimination + d.uncertainty),
        float(brier_score(y, p)),
        atol=tol,
    )


@given(labels, probs)
def test_histogram_calibrator_reproduces_reliability_observed(y, p):
    # the raw fraction (shrinkage=None) is the reliability curve's observed mean
    cal = fit_histogram_binning(y, p, bins=6, shrinkage=None)
    curve = reliability_curve(y, p, bins=6)
    np.testing.assert_array_equal(cal.values, curve.observed)
    np.testing.assert_allclose(
        np.asarray(cal(p)).mean(), y.mean(), atol=1e-5
    )  # binning preserves the event rate on its own data
    # the default (Jeffreys) moves each nonempty bin's mean toward 1/2, by at most
    # 1 / (2 (n + 1)), and strictly inside (0, 1); empty bins keep their midpoint
    shrunk = np.asarray(fit_histogram_binning(y, p, bins=6).values, np.float64)
    obs, n = np.asarray(curve.observed, np.float64), np.asarray(curve.weight, np.float64)
    full = n > 0
    slack = 4 * np.finfo(np.asarray(curve.observed).dtype).eps
    assert np.all((shrunk[full] > 0) & (shrunk[full] < 1))
    assert np.all(np.abs(shrunk - 0.5)[full] <= np.abs(obs - 0.5)[full] + slack)
    assert np.all(np.abs(shrunk - obs)[full] <= 0.5 / (n[full] + 1) + slack)
    np.testing.assert_array_equal(shrunk[~full], obs[~full])
