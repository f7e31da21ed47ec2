"""fit_spline (Lucena 2018, "Spline-based probability calibration", arXiv:1809.07751).

Reference: the same penalised fit written out in numpy (float64): the natural cubic
spline basis of Lucena's ``splinecalib`` 0.0.13 (``calib_utils.
_natural_cubic_spline_basis_expansion``, copied below), its objective ``pen_ll_fun``
(mean log-loss + lambda * ||beta||^2 / K), knots at ``np.quantile`` of the log-odds,
the documented stratified folds, the penalty with the lowest held-out log-loss over
all folds, solved by Newton's method to machine precision.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from bayescal import classification as clf
from bayescal import core
from bayescal.classification._spline import DEFAULT_PENALTIES
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
# float32: the cubic columns reach ~1e2 (log-odds up to ~5), so the normal equations
# lose ~4 digits; the probabilities still agree to 2e-3
PTOL = dict(rtol=1e-7, atol=1e-9) if X64 else dict(rtol=0, atol=2e-3)


def _data(seed, n=600):
    r = np.random.default_rng(seed)
    p = r.uniform(0.02, 0.98, n).astype(DT)
    y = (r.uniform(size=n) < p.astype(np.float64) ** 2).astype(np.int64)  # skewed
    return y, p


# ----------------------------------------------------------------- numpy reference
def _basis(xpts, knots):
    """splinecalib 0.0.13 calib_utils._natural_cubic_spline_basis_expansion."""
    num_knots = len(knots)
    out = np.zeros((len(xpts), num_knots))
    out[:, 0] = 1
    out[:, 1] = xpts

    def d(k):
        denom = knots[-1] - knots[k - 1]
        return (
            np.maximum(xpts - knots[k - 1], 0) ** 3 - np.maximum(xpts - knots[-1], 0) ** 3
        ) / denom

    for i in range(1, num_knots - 1):
        out[:, i + 1] = d(i) - d(num_knots - 1)
    return out


def _solve(X, y, w, lam):
    """argmin mean_w log-loss + lam ||b||^2 / K (splinecalib's pen_ll_fun), Newton."""
    k = X.shape[1]
    b = np.zeros(k)
    wn = w / w.sum()
    for _ in range(100):
        q = scipy.special.expit(X @ b)
        g = X.T @ (wn * (q - y)) + 2 * lam / k * b
        h = (X * (wn * q * (1 - q))[:, None]).T @ X + 2 * lam / k * np.eye(k)
        step = np.linalg.solve(h, g)
        b = b - step
        if np.max(np.abs(step)) < 1e-14:
            break
    return b


def _reference(y, p, num_knots=10, penalties=DEFAULT_PENALTIES, num_folds=5, w=None):
    w = np.ones(len(p)) if w is None else np.asarray(w, float)
    x = scipy.special.logit(p.astype(np.float64))
    knots = np.quantile(np.repeat(x, w.astype(int)), np.linspace(0, 1, num_knots))
    X = _basis(x, knots)
    fold = np.zeros(len(y), int)
    for c in (0, 1):
        rows = np.flatnonzero((y == c) & (w > 0))
        fold[rows] = np.arange(len(rows)) % num_folds
    scores = []
    for lam in penalties:
        total = 0.0
        for f in range(num_folds):
            train = np.where(fold == f, 0.0, w)
            b = _solve(X, y, train, lam)
            eta = X @ b
            held = (fold == f) & (w > 0)
            total += np.sum((w * (np.logaddexp(0, eta) - y * eta))[held])
        scores.append(total)
    best = int(np.argmin(scores))
    b = _solve(X, y, w, penalties[best])
    return (
        knots,
        b,
        best,
        lambda q: scipy.special.expit(
            _basis(scipy.special.logit(q.astype(np.float64)), knots) @ b
        ),
    )


# ----------------------------------------------------------------- the reference
@pytest.mark.parametrize("num_knots, penalties", [(10, None), (5, (1e-3, 1e-1, 10.0))])
def test_matches_the_penalised_fit_in_numpy(num_knots, penalties):
    y, p = _data(0)
    cal = clf.fit_spline(y, p, knots=num_knots, penalties=penalties)
    grid_lams = DEFAULT_PENALTIES if penalties is None else penalties
    knots, coef, best, apply = _reference(y, p, num_knots, grid_lams)
    np.testing.assert_allclose(
        np.asarray(cal.knots, np.float64), knots, rtol=1e-6 if not X64 else 1e-12
    )
    grid = np.linspace(0.01, 0.99, 99).astype(DT)
    np.testing.assert_allclose(np.asarray(cal(grid), np.float64), apply(grid), **PTOL)
    if X64:
        np.testing.assert_allclose(np.asarray(cal.coef), coef, rtol=1e-6, atol=1e-9)


def test_the_cross_validated_penalty_is_the_references():
    # a penalty grid far apart, so float32 picks the same one as float64
    y, p = _data(1, n=400)
    lams = (1e-4, 1e-1, 1e2)
    cal = clf.fit_spline(y, p, knots=6, penalties=lams)
    _, coef, best, apply = _reference(y, p, 6, lams)
    # the refit on all the data with the chosen penalty, and not with another one
    grid = np.linspace(0.01, 0.99, 99).astype(DT)
    np.testing.assert_allclose(np.asarray(cal(grid), np.float64), apply(grid), **PTOL)
    for k, lam in enumerate(lams):
        single = np.asarray(clf.fit_spline(y, p, knots=6, penalties=(lam,))(grid))
        gap = np.max(np.abs(single - np.asarray(cal(grid))))
        assert (gap < 1e-4) == (k == best), (k, best, gap)


def test_recovers_a_skewed_miscalibration_better_than_platt():
    # property: y ~ Bernoulli(p^2) is not a sigmoid of logit(p); the spline gets closer
    r = np.random.default_rng(2)
    p = r.uniform(0.02, 0.98, 4000).astype(DT)
    y = (r.uniform(size=4000) < p.astype(np.float64) ** 2).astype(int)
    grid = np.linspace(0.05, 0.95, 91).astype(DT)
    truth = grid.astype(np.float64) ** 2
    spline = np.abs(np.asarray(clf.fit_spline(y, p)(grid), np.float64) - truth).mean()
    platt = np.abs(np.asarray(clf.fit_platt(y, p)(grid), np.float64) - truth).mean()
    assert spline < 0.6 * platt  # 0.008 against 0.016 (float32)


# ----------------------------------------------------------------- weights
def test_integer_weights_equal_the_weighted_reference():
    y, p = _data(3, n=200)
    w = np.random.default_rng(3).integers(0, 4, 200)
    lams = (1e-3, 1.0)
    cal = clf.fit_spline(y, p, knots=5, penalties=lams, weights=w)
    knots, _, _, apply = _reference(y, p, 5, lams, w=w)
    np.testing.assert_allclose(
        np.asarray(cal.knots, np.float64), knots, rtol=1e-6 if not X64 else 1e-12
    )
    grid = np.linspace(0.02, 0.98, 49).astype(DT)
    np.testing.assert_allclose(np.asarray(cal(grid), np.float64), apply(grid), **PTOL)


# ----------------------------------------------------------------- JAX contract
def test_jit_equals_eager_and_vmap_equals_loop():
    sets = [_data(s, n=150) for s in (4, 5)]
    fit = lambda y, p: clf.fit_spline(y, p, knots=5, penalties=(1e-2, 1.0))  # noqa: E731
    ys = jnp.stack([jnp.asarray(y) for y, _ in sets])
    ps = jnp.stack([jnp.asarray(p) for _, p in sets])
    batched = jax.vmap(fit)(ys, ps)
    for i, (y, p) in enumerate(sets):
        eager = fit(y, p)
        jitted = jax.jit(fit)(jnp.asarray(y), jnp.asarray(p))
        for a, b, c in zip(
            jax.tree_util.tree_leaves(eager),
            jax.tree_util.tree_leaves(jitted),
            jax.tree_util.tree_leaves(batched),
            strict=True,
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(
                np.asarray(a), np.asarray(c[i]), rtol=1e-4, atol=1e-5
            )


def test_save_load_round_trip(tmp_path):
    y, p = _data(6, n=100)
    cal = clf.fit_spline(y, p, knots=4, penalties=(0.1,), eps=1e-6)
    path = os.path.join(tmp_path, "spline.npz")
    core.save_calibrator(cal, path)
    back = core.load_calibrator(path)
    assert back == cal and type(back) is clf.SplineCalibrator
    bad = clf.SplineCalibrator(cal.knots[::-1], cal.coef)
    with pytest.raises(ValueError, match="knots must be nondecreasing"):
        core.save_calibrator(bad, os.path.join(tmp_path, "bad.npz"))


# ----------------------------------------------------------------- bad input
Y, P = _data(7, n=60)


@pytest.mark.parametrize(
    "kwargs, args, error, match",
    [
        ({"knots": 2}, (Y, P), ValueError, "knots must be an int >= 3"),
        ({"knots": 4.5}, (Y, P), TypeError, "knots must be"),
        ({"folds": 1}, (Y, P), ValueError, "folds must be an int >= 2"),
        ({"folds": 59}, (Y, P), ValueError, r"folds \(59\) must not exceed"),
        ({"penalties": []}, (Y, P), ValueError, "penalties must be a nonempty"),
        ({"penalties": [0.1, -1.0]}, (Y, P), ValueError, "finite floats > 0"),
        ({"penalties": "auto"}, (Y, P), TypeError, "penalties must be a sequence"),
        ({"eps": 0.7}, (Y, P), ValueError, "eps"),
        ({}, (np.zeros(60), P), ValueError, "y_true"),
        ({}, (Y, np.r_[P[:-1], 1.0]), ValueError, "Pass eps"),
        ({}, (Y, np.r_[P[:-1], 1.5]), ValueError, "y_prob"),
        ({"weights": -np.ones(60)}, (Y, P), ValueError, "weights must be >= 0"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs, args, error, match):
    with pytest.raises(error, match=match):
        clf.fit_spline(*args, **kwargs)


def test_a_fit_too_large_is_refused_before_starting_with_the_way_out():
    # issue 37: at N = 4.2 million fit_spline ended in XLA's RESOURCE_EXHAUSTED
    # (69-252 GB asked); at N = 400,000 it takes ~2 minutes. Over the budget it is
    # refused at once, naming the subsample that fits.
    import time

    from bayescal.classification._spline import MAX_FIT_OBSERVATIONS

    n = MAX_FIT_OBSERVATIONS // (5 * 17) + 1
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, n)
    y = (rng.uniform(size=n) < p).astype(np.int32)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"^y_prob holds {n:,} observations: fit_spline "
                       r"solves 5 folds x 17 penalties .* subsample of at most 1,000,000"):
        clf.fit_spline(y, p)
    assert time.perf_counter() - t0 < 5
    # one penalty buys 17 times the observations (a broadcast array: no memory)
    big = np.broadcast_to(0.5, (17 * n,))
    with pytest.raises(ValueError, match=r"5 folds x 1 penalties .* at most 17,000,000"):
        clf.fit_spline(np.zeros(17 * n, np.int32), big, penalties=[1.0])


@pytest.mark.parametrize("penalty", [1e-4, 1.0, 1e3])
def test_objective_derivatives_equal_autodiff_of_its_value(penalty):
    # The kernel's gradient and Hessian (one product of the curvature weights with the
    # shared basis products, issue "One library") against JAX's derivatives of the
    # objective's value, at a random point with random observation weights.
    from bayescal.classification import _spline

    r = np.random.default_rng(int(penalty * 10))
    n = 300
    x = jnp.asarray(np.sort(r.normal(0, 2, n)), DT)
    y = jnp.asarray(r.uniform(size=n) < 0.4, DT)
    w = jnp.asarray(r.uniform(0, 2, n) * (r.uniform(size=n) < 0.8), DT)
    knots = jnp.quantile(x, jnp.linspace(0, 1, 6))
    basis = _spline.spline_basis(x, knots)
    objective = _spline._penalised_objective(
        basis, _spline._basis_products(basis), y, w, jnp.sum(w), penalty
    )
    beta = jnp.asarray(r.normal(0, 0.3, 6), DT)
    got = objective(beta)
    value = lambda b: objective(b).value  # noqa: E731
    tol = dict(rtol=1e-10, atol=1e-12) if X64 else dict(rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got.grad, jax.grad(value)(beta), **tol)
    np.testing.assert_allclose(got.hess, jax.hessian(value)(beta), **tol)
    np.testing.assert_allclose(got.hess, got.hess.T, rtol=0, atol=0)
