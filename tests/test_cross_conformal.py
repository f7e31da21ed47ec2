"""CV+, jackknife+ and jackknife-minmax (``fit_cross_conformal``).

References:
- MAPIE 1.6, ``CrossConformalRegressor(estimator, confidence_level, method, cv)``:
  ``fit_conformalize(X, y)`` then ``predict_interval(X_test)`` with the same
  ``KFold`` folds (and ``LeaveOneOut`` for the jackknife+), ``method="plus"`` and
  ``"minmax"``: equal intervals.
- Barber, Candes, Ramdas & Tibshirani (2021), Theorems 1-4: coverage at least
  ``1 - 2 alpha`` (plus) and ``1 - alpha`` (minmax); checked over 400 simulated data
  sets within 4 binomial standard errors of those bounds (and, for CV+, near
  ``1 - alpha``, as the paper's experiments find).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from bayescal import regression as reg
from tests.conftest import X64

RTOL = 1e-12 if X64 else 1e-5


def _ridge(alpha=1.0):
    def fit(X, y):
        A = np.c_[X, np.ones(len(X))]
        reg_ = alpha * np.eye(A.shape[1])
        reg_[-1, -1] = 0.0  # no penalty on the intercept (as scikit-learn's Ridge)
        return np.linalg.solve(A.T @ A + reg_, A.T @ y)

    def predict(w, X):
        return np.c_[X, np.ones(len(X))] @ w

    return fit, predict


def _data(seed=0, n=120, m=40):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n + m, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + (1 + np.abs(X[:, 0])) * r.standard_t(4, n + m)
    return X[:n], y[:n], X[n:], y[n:]


@pytest.mark.parametrize("method", ["plus", "minmax"])
@pytest.mark.parametrize("folds", [5, 7, "loo"])
def test_intervals_equal_mapie(method, folds):
    from mapie.regression import CrossConformalRegressor
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import KFold, LeaveOneOut

    X, y, Xt, _ = _data()
    cv = LeaveOneOut() if folds == "loo" else KFold(n_splits=folds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mapie = CrossConformalRegressor(
            Ridge(alpha=1.0), confidence_level=0.85, method=method, cv=cv
        ).fit_conformalize(X, y)
        _, ref = mapie.predict_interval(Xt)
    fit, predict = _ridge(1.0)
    ours = reg.fit_cross_conformal(fit, predict, X, y, folds=folds, method=method, coverage=0.85)
    lo, hi = ours.interval(Xt)
    np.testing.assert_allclose(np.asarray(lo), ref[:, 0, 0], rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(np.asarray(hi), ref[:, 1, 0], rtol=RTOL, atol=1e-5)


def test_coverage_by_simulation():
    reps, alpha = 400, 0.2
    fit, predict = _ridge(1.0)
    hits = {"plus": 0, "minmax": 0}
    for s in range(reps):
        X, y, Xt, yt = _data(seed=100 + s, n=40, m=1)
        for method in hits:
            cv = reg.fit_cross_conformal(fit, predict, X, y, folds=5, method=method, alpha=alpha)
            lo, hi = cv.interval(Xt)
            hits[method] += bool(lo[0] <= yt[0] <= hi[0])
    for method, bound in (("plus", 1 - 2 * alpha), ("minmax", 1 - alpha)):
        rate = hits[method] / reps
        se = math.sqrt(bound * (1 - bound) / reps)
        assert rate >= bound - 4 * se, (method, rate)
    assert abs(hits["plus"] / reps - (1 - alpha)) < 4 * math.sqrt(0.16 / reps)


def test_fold_ids_and_shapes():
    X, y, Xt, _ = _data(1, n=23)
    fit, predict = _ridge()
    five = reg.fit_cross_conformal(fit, predict, X, y, folds=5)
    assert np.bincount(np.asarray(five.folds)).tolist() == [5, 5, 5, 4, 4]  # KFold's
    assert len(five.models) == 5 and "models=5" in repr(five)
    own = reg.fit_cross_conformal(fit, predict, X, y, folds=np.asarray(five.folds))
    np.testing.assert_array_equal(np.asarray(own.residuals), np.asarray(five.residuals))
    lo, hi = five.interval(Xt)
    assert lo.shape == hi.shape == (Xt.shape[0],) and bool(np.all(lo <= hi))


def test_bad_input_raises_naming_the_argument():
    X, y, _, _ = _data(2, n=30)
    fit, predict = _ridge()
    with pytest.raises(ValueError, match="method"):
        reg.fit_cross_conformal(fit, predict, X, y, method="base")
    with pytest.raises(ValueError, match="folds"):
        reg.fit_cross_conformal(fit, predict, X, y, folds=1)
    with pytest.raises(ValueError, match="folds"):
        reg.fit_cross_conformal(fit, predict, X, y, folds=np.arange(30) % 3 + 1)
    with pytest.raises(ValueError, match="folds"):
        reg.fit_cross_conformal(fit, predict, X, y, folds="jackknife")
    with pytest.raises(ValueError, match="y must"):
        reg.fit_cross_conformal(fit, predict, X, np.where(y > 0, np.nan, y))
    with pytest.raises(ValueError, match="rows"):
        reg.fit_cross_conformal(fit, predict, X[:-1], y)
    with pytest.raises(ValueError, match="too few"):
        reg.fit_cross_conformal(fit, predict, X[:5], y[:5], folds=2, alpha=0.1)
    with pytest.raises(TypeError, match="callables"):
        reg.fit_cross_conformal(fit, None, X, y)
    with pytest.raises(ValueError, match="predict returned"):
        reg.fit_cross_conformal(fit, lambda w, X: np.zeros(1), X, y)


# --------------------------------------------------------------------------- J+aB
@pytest.mark.parametrize("method", ["plus", "minmax"])
def test_jackknife_after_bootstrap_equals_mapie_on_the_same_resamples(method):
    from mapie.regression import JackknifeAfterBootstrapRegressor
    from mapie.subsample import Subsample
    from sklearn.linear_model import Ridge

    X, y, Xt, _ = _data(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mapie = JackknifeAfterBootstrapRegressor(
            Ridge(alpha=1.0),
            confidence_level=0.85,
            method=method,
            resampling=Subsample(n_resamplings=20, random_state=3),
        ).fit_conformalize(X, y)
        _, ref = mapie.predict_interval(Xt)
    trains = np.array([t for t, _ in Subsample(n_resamplings=20, random_state=3).split(X)])
    fit, predict = _ridge(1.0)
    ours = reg.fit_jackknife_after_bootstrap(
        fit, predict, X, y, resamples=trains, method=method, coverage=0.85
    )
    assert ours.folds is None and len(ours.models) == 20
    lo, hi = ours.interval(Xt)
    np.testing.assert_allclose(np.asarray(lo), ref[:, 0, 0], rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(np.asarray(hi), ref[:, 1, 0], rtol=RTOL, atol=1e-5)


def test_jackknife_after_bootstrap_draws_and_leaves_out_the_always_sampled():
    X, y, Xt, _ = _data(4, n=50)
    fit, predict = _ridge()
    a = reg.fit_jackknife_after_bootstrap(fit, predict, X, y, key=7, num_resamples=25)
    b = reg.fit_jackknife_after_bootstrap(fit, predict, X, y, key=7, num_resamples=25)
    np.testing.assert_array_equal(np.asarray(a.residuals), np.asarray(b.residuals))
    # observation 0 in every training set: no out-of-bag model, so no residual
    r = np.random.default_rng(0)
    trains = r.integers(0, 50, size=(10, 50))
    trains[:, 0] = 0
    c = reg.fit_jackknife_after_bootstrap(fit, predict, X, y, resamples=trains)
    always = np.array([np.all([i in t for t in trains]) for i in range(50)])
    assert always[0] and c.residuals.shape == (50 - always.sum(),)
    lo, hi = c.interval(Xt)
    assert bool(np.all(lo <= hi))
    with pytest.raises(ValueError, match="key"):
        reg.fit_jackknife_after_bootstrap(fit, predict, X, y)
    with pytest.raises(ValueError, match="resamples"):
        reg.fit_jackknife_after_bootstrap(fit, predict, X, y, resamples=trains + 50)
    with pytest.raises(ValueError, match="resamples"):
        reg.fit_jackknife_after_bootstrap(fit, predict, X, y, resamples=trains[0])


def test_jackknife_after_bootstrap_coverage_by_simulation():
    # Kim, Xu & Barber (2020), Theorem 1: >= 1 - 2 alpha (in practice near 1 - alpha)
    reps, alpha, hits = 300, 0.2, 0
    fit, predict = _ridge(1.0)
    for s in range(reps):
        X, y, Xt, yt = _data(seed=1000 + s, n=40, m=1)
        jab = reg.fit_jackknife_after_bootstrap(fit, predict, X, y, key=s, alpha=alpha)
        lo, hi = jab.interval(Xt)
        hits += bool(lo[0] <= yt[0] <= hi[0])
    rate = hits / reps
    assert rate >= 1 - 2 * alpha - 4 * math.sqrt(0.24 / reps), rate
    assert abs(rate - (1 - alpha)) < 4 * math.sqrt(0.16 / reps), rate


@pytest.mark.parametrize("method", ["plus", "minmax"])
def test_new_points_in_blocks_equal_one_block(method, monkeypatch):
    # the [M, N] leave-out predictions are taken in blocks of new points (bounded
    # memory); forced small here, on the host path and on the kernel path
    from bayescal._src import host
    from bayescal.regression import _cross_conformal as cc

    X, y, Xt, _ = _data(5, n=90, m=77)
    fit, predict = _ridge()
    cv = reg.fit_cross_conformal(fit, predict, X, y, method=method)
    whole = cv.interval(Xt)
    monkeypatch.setattr(cc, "_CELLS", 1000)
    for run in (lambda: cv.interval(Xt), lambda: _kernel(cv, Xt, host)):
        blocked = run()
        for a, b in zip(blocked, whole, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _kernel(cv, Xt, host):
    with host.disabled():
        return cv.interval(Xt)
