"""Conformal prediction under covariate shift (Tibshirani, Barber, Candes & Ramdas 2019).

References:
- ``fit_density_ratio``: scikit-learn's ``LogisticRegression(C=1/reg)`` (lbfgs, tight
  tolerance) on the stacked inputs labelled test / calibration; the ratio is its odds
  times ``n_cal / n_test`` (the paper's Sec. 2.2).
- ``weighted_conformal_interval``: the weighted quantile of Corollary 1 written out in
  NumPy float64, per test point, with the test point's mass at +inf.
- Coverage by simulation: calibration inputs N(0, 1), test inputs N(1, 1), noise that
  grows with x; 2,000 repetitions: the weighted intervals (true ratio) cover at least
  1 - alpha within 4 binomial standard errors, the unweighted ones do not.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from bayescal import core
from bayescal import regression as reg
from tests.conftest import X64

DT = np.float64 if X64 else np.float32


def _reference(y, loc, w, loc_test, w_test, alpha):
    s = np.abs(np.asarray(y, float) - np.asarray(loc, float))
    out = []
    for m, wt in zip(np.asarray(loc_test, float), np.asarray(w_test, float), strict=True):
        values = np.append(s, np.inf)
        p = np.append(np.asarray(w, float), wt) / (np.sum(w) + wt)
        order = np.argsort(values, kind="stable")
        cum = np.cumsum(p[order])
        q = values[order][np.searchsorted(cum, (1 - alpha) * (1 - 1e-9))]
        out.append((m - q, m + q))
    return np.array(out)


def test_density_ratio_equals_scikit_learn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    r = np.random.default_rng(0)
    a = r.normal(0, 1, (300, 2))
    b = r.normal([0.8, -0.3], 1, (200, 2))
    for penalty in (1.0, 10.0):
        ratio = reg.fit_density_ratio(a.astype(DT), b.astype(DT), reg=penalty)
        sk = LogisticRegression(C=1 / penalty, tol=1e-12, max_iter=10_000).fit(
            np.r_[a, b], np.r_[np.zeros(300), np.ones(200)]
        )
        np.testing.assert_allclose(np.asarray(ratio.coef), sk.coef_[0], rtol=1e-4, atol=1e-5)
        want = sk.intercept_[0] + math.log(300 / 200)
        assert abs(float(ratio.intercept) - want) < 1e-4
        x = r.normal(size=(5, 2))
        odds = sk.predict_proba(x)[:, 1] / sk.predict_proba(x)[:, 0] * 300 / 200
        np.testing.assert_allclose(np.asarray(ratio(x.astype(DT))), odds, rtol=2e-4)


def test_weighted_intervals_equal_the_reference():
    r = np.random.default_rng(1)
    y, loc = r.normal(size=80), r.normal(size=80) * 0.3
    w = r.uniform(0.2, 3.0, 80)
    loc_t, w_t = r.normal(size=30), np.r_[r.uniform(0, 3, 29), 500.0]  # the last: inf
    for alpha in (0.1, 0.25):
        lo, hi = reg.weighted_conformal_interval(
            y.astype(DT), loc.astype(DT), w.astype(DT), loc_t.astype(DT), w_t.astype(DT),
            alpha=alpha,
        )
        ref = _reference(y, loc, w, loc_t, w_t, alpha)
        assert np.isinf(ref[-1, 1]) and np.isinf(np.asarray(hi)[-1])
        np.testing.assert_allclose(np.asarray(lo), ref[:, 0], rtol=1e-5)
        np.testing.assert_allclose(np.asarray(hi), ref[:, 1], rtol=1e-5)
    # equal weights and test weight 1: split conformal
    ones = np.ones(80, DT)
    lo, hi = reg.weighted_conformal_interval(
        y.astype(DT), loc.astype(DT), ones, loc_t.astype(DT), np.ones(30, DT), alpha=0.1
    )
    cal = reg.fit_conformal(y.astype(DT), loc.astype(DT), alpha=0.1)
    np.testing.assert_allclose(np.asarray(hi - lo), 2 * float(cal.quantile), rtol=1e-6)


def test_coverage_under_covariate_shift():
    reps, n, alpha = 2000, 200, 0.1
    r = np.random.default_rng(2)
    x = r.normal(0, 1, (reps, n))
    xt = r.normal(1, 1, (reps, 1))

    def draw(x):
        return np.sin(x) + (0.3 + 0.7 * np.abs(x)) * r.normal(size=x.shape)

    y, yt = draw(x), draw(xt)
    mu, mut = np.sin(x), np.sin(xt)
    w, wt = np.exp(x - 0.5), np.exp(xt - 0.5)  # dN(1, 1) / dN(0, 1)

    def covered(y, mu, w, yt, mut, wt):
        lo, hi = reg.weighted_conformal_interval(y, mu, w, mut, wt, alpha=alpha)
        return (lo <= yt) & (yt <= hi)

    args = [a.astype(DT) for a in (y, mu, w, yt, mut, wt)]
    weighted = float(np.mean(np.asarray(jax.vmap(covered)(*args))))
    ones = [args[0], args[1], np.ones_like(args[2]), args[3], args[4], np.ones_like(args[5])]
    plain = float(np.mean(np.asarray(jax.vmap(covered)(*ones))))
    se = math.sqrt(alpha * (1 - alpha) / reps)
    assert weighted >= 1 - alpha - 4 * se, weighted
    assert plain < 1 - alpha - 4 * se, plain


def test_jit_equals_eager_vmap_equals_loop_and_save_load(tmp_path):
    r = np.random.default_rng(3)
    a, b = r.normal(size=(3, 100, 2)).astype(DT), (r.normal(size=(3, 60, 2)) + 0.5).astype(DT)
    eager = reg.fit_density_ratio(a[0], b[0])
    traced = jax.jit(reg.fit_density_ratio)(a[0], b[0])
    np.testing.assert_allclose(np.asarray(traced.coef), np.asarray(eager.coef), rtol=1e-5, atol=1e-6)
    batch = jax.vmap(reg.fit_density_ratio)(a, b)
    for i in range(3):
        one = reg.fit_density_ratio(a[i], b[i])
        np.testing.assert_allclose(np.asarray(batch.coef[i]), np.asarray(one.coef), rtol=1e-5, atol=1e-6)
    path = tmp_path / "ratio.npz"
    core.save_calibrator(eager, path)
    assert core.load_calibrator(path) == eager


def test_bad_input_raises_naming_the_argument():
    r = np.random.default_rng(4)
    a, b = r.normal(size=(50, 2)), r.normal(size=(40, 2))
    with pytest.raises(ValueError, match="reg"):
        reg.fit_density_ratio(a, b, reg=0.0)
    with pytest.raises(ValueError, match="columns"):
        reg.fit_density_ratio(a, b[:, :1])
    with pytest.raises(ValueError, match="X_test"):
        reg.fit_density_ratio(a, np.where(b > 0, np.nan, b))
    ratio = reg.fit_density_ratio(a, b)
    with pytest.raises(ValueError, match="columns"):
        ratio(np.zeros((3, 3)))
    y, loc, w = r.normal(size=20), np.zeros(20), np.ones(20)
    with pytest.raises(ValueError, match="weights"):
        reg.weighted_conformal_interval(y, loc, -w, np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="weights_test"):
        reg.weighted_conformal_interval(y, loc, w, np.zeros(3), -np.ones(3))
    with pytest.raises(ValueError, match="loc_test"):
        reg.weighted_conformal_interval(y, loc, w, np.zeros(3), np.ones(4))
    with pytest.raises(ValueError, match="scale_test"):
        reg.weighted_conformal_interval(y, loc, w, np.zeros(3), np.ones(3), scale=np.ones(20))
