"""``newton.minimize_host``: the host twins' NumPy solver, against scikit-learn, scipy
and the compiled :func:`newton.minimize` on the same objective."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize as scipy_minimize
from sklearn.linear_model import LogisticRegression

from bayescal._src import newton

X64 = bool(jax.config.jax_enable_x64)


def _data(seed: int = 0, n: int = 400):
    rng = np.random.default_rng(seed)
    f1, f2 = rng.normal(size=n), rng.normal(size=n)
    # the second feature's true coefficient is negative: with a >= 0 bound the
    # optimum sits on the bound
    eta = 1.3 * f1 - 0.8 * f2 + 0.2
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    w = rng.uniform(0.5, 2.0, size=n)
    return f1, f2, y, w


def _sklearn_unpenalised() -> LogisticRegression:
    # reference: scikit-learn's LogisticRegression without penalty (C=inf; penalty=None
    # is deprecated since 1.8), lbfgs to a tight tolerance
    return LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)


def _host_logistic(features, y, w):
    """Weighted logistic loss sum w (softplus(eta) - y eta) in float64, derivatives."""
    x = np.stack([*features, np.ones_like(y)])

    def objective(t):
        eta = t @ x
        q = 1 / (1 + np.exp(-eta))
        loss = w * (np.logaddexp(0, eta) - y * eta)
        grad = x @ (w * (q - y))
        hess = (x * (w * q * (1 - q))) @ x.T
        return newton.Derivatives(float(loss.sum()), grad, hess, float(loss.sum()))

    return objective


def test_minimize_host_matches_sklearn_unbounded():
    f1, f2, y, w = _data()
    res = newton.minimize_host(_host_logistic([f1, f2], y, w), np.zeros(3))
    assert bool(res.converged) and res.num_steps < 20
    # reference: scikit-learn's unpenalised weighted logistic regression (lbfgs, tight)
    ref = _sklearn_unpenalised()
    ref.fit(np.stack([f1, f2], axis=1), y, sample_weight=w)
    want = np.r_[ref.coef_[0], ref.intercept_]
    np.testing.assert_allclose(res.x, want, rtol=1e-6, atol=1e-7)
    assert np.max(np.abs(res.grad)) < 1e-8 * np.sum(w)


def test_minimize_host_active_lower_bound():
    f1, f2, y, w = _data()
    lower = np.array([0.0, 0.0, -np.inf])
    res = newton.minimize_host(_host_logistic([f1, f2], y, w), np.ones(3), lower=lower)
    assert bool(res.converged)
    assert res.x[1] == 0.0  # on the bound, exactly (projection)
    assert res.grad[1] > 0  # the KKT sign: the gradient pushes it out
    # reference 1: with the second coefficient at 0 the optimum is the unconstrained
    # fit on the first feature alone (scikit-learn)
    ref = _sklearn_unpenalised()
    ref.fit(f1[:, None], y, sample_weight=w)
    np.testing.assert_allclose(
        res.x[[0, 2]], [ref.coef_[0, 0], ref.intercept_[0]], rtol=1e-6, atol=1e-7
    )
    # reference 2: scipy's L-BFGS-B with the bounds, tight tolerances
    obj = _host_logistic([f1, f2], y, w)
    out = scipy_minimize(
        lambda t: (obj(t).value, obj(t).grad),
        np.ones(3),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, None), (0, None), (None, None)],
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
    )
    np.testing.assert_allclose(res.x, out.x, rtol=1e-5, atol=1e-6)
    assert res.value <= out.fun + 1e-12 * out.fun


def test_minimize_host_agrees_with_minimize():
    """Both solvers on the same objective (the kernel's ``logistic_objective`` in the
    JAX dtype, its float64 NumPy twin on the host) reach the same point:
    to float64 rounding under JAX_ENABLE_X64, else to the float32 floor of the kernel
    (module docstring: ~1e-6 relative, a few float32 ulps)."""
    f1, f2, y, w = _data(seed=3)
    dtype = jnp.float64 if X64 else jnp.float32
    lower = np.array([0.0, 0.0, -np.inf])
    kernel_obj = newton.logistic_objective(
        (jnp.asarray(f1, dtype), jnp.asarray(f2, dtype)),
        jnp.asarray(y, dtype),
        None,
        jnp.asarray(w, dtype),
    )
    got = newton.minimize(kernel_obj, jnp.ones(3, dtype), lower=jnp.asarray(lower, dtype))

    host = newton.minimize_host(_host_logistic([f1, f2], y, w), np.ones(3), lower=lower)
    assert bool(got.converged) and bool(host.converged)
    assert float(got.x[1]) == 0.0 and host.x[1] == 0.0
    tol = 1e-9 if X64 else 2e-5
    np.testing.assert_allclose(np.asarray(got.x, np.float64), host.x, rtol=tol, atol=tol)


def test_minimize_host_nonfinite_start_and_step_limit():
    def bad(t):
        return newton.Derivatives(np.nan, np.zeros(1), np.eye(1), 1.0)

    res = newton.minimize_host(bad, np.zeros(1))
    assert not res.converged and res.value == np.inf
    f1, f2, y, w = _data()
    res = newton.minimize_host(_host_logistic([f1, f2], y, w), np.zeros(3), max_steps=1)
    assert not res.converged and res.num_steps == 1


@pytest.mark.parametrize("p", [2, 6])
def test_minimize_host_singular_hessian_takes_ridge(p):
    """A constant zero column (singular Hessian): the ridge keeps the direction finite
    and the coefficient of that column stays at its start, as in ``minimize``."""
    rng = np.random.default_rng(1)
    f = [rng.normal(size=200) for _ in range(p - 2)] + [np.zeros(200)]
    y = (rng.uniform(size=200) < 0.4).astype(np.float64)
    res = newton.minimize_host(_host_logistic(f, y, np.ones(200)), np.zeros(p))
    assert bool(res.converged) and res.x[p - 2] == 0.0
    # reference: the intercept alone (and the other features) fit the log odds
    assert abs(res.grad[-1]) < 1e-8 * 200


def test_host_twins_use_minimize_host(monkeypatch):
    """One optimizer per fit (issue 33): the host twins of the parametric fits run
    ``minimize_host`` (not loops of their own), and answer (no deferral) on easy data."""
    from bayescal import classification as bc
    from bayescal import core

    calls = []
    original = newton.minimize_host

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(newton, "minimize_host", counting)
    rng = np.random.default_rng(0)
    n = 300
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p).astype(int)
    z = rng.normal(size=(n, 3))
    c = rng.integers(0, 3, n)
    z[np.arange(n), c] += 1.0
    fits = [
        lambda: bc.fit_platt(y, p),
        lambda: bc.fit_beta(y, p),
        lambda: bc.fit_temperature(c, z),
        lambda: bc.fit_vector_scaling(c, z),
        lambda: bc.fit_matrix_scaling(c, z),
        lambda: bc.fit_dirichlet(c, np.exp(z) / np.exp(z).sum(1, keepdims=True)),
    ]
    with core.host_path(True):
        for fit in fits:
            calls.clear()
            fit()
            assert calls, fit
