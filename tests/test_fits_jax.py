"""Every fit_* of both branches in JAX: jit == eager, vmap == loop, float32 accuracy
against float64 references, and the defects of the fits (beta's negative shapes,
sigma-scaling of zero residuals, one-vs-rest with an absent class)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special
from hypothesis import given
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

from bayescal import classification as clf
from bayescal import regression as reg
from bayescal._src import newton
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
RTOL = 1e-9 if X64 else 2e-5


def _data(seed: int, n: int = 150):
    r = np.random.default_rng(seed)
    z = r.normal(0, 1.5, size=n)
    lab = (r.uniform(size=n) < scipy.special.expit(z)).astype(DT)
    lab[:2] = [0, 1]
    p = scipy.special.expit(2 * z + 0.3).astype(DT)  # overconfident, shifted
    logits3 = (r.normal(size=(n, 3)) * 2).astype(DT)
    probs3 = scipy.special.softmax(logits3 / 2, axis=1)
    cls = (r.uniform(size=(n, 1)) > np.cumsum(probs3, axis=1)).sum(axis=1).clip(0, 2)
    cls[:3] = [0, 1, 2]
    y = r.normal(size=n).astype(DT)
    loc = (y + r.standard_t(4, size=n) * 0.7).astype(DT)
    scale = r.uniform(0.5, 1.5, size=n).astype(DT)
    return dict(
        lab=lab, p=p, score=(2 * z).astype(DT), logits3=logits3, cls=cls,
        probs3=scipy.special.softmax(logits3, axis=1).astype(DT), y=y, loc=loc,
        scale=scale, pit=r.uniform(size=n).astype(DT),
    )  # fmt: skip


# name -> (fit, names of the batched array arguments, static keyword options)
FITS = {
    "platt": (clf.fit_platt, ("lab", "p"), {}),
    "platt_score_hard": (clf.fit_platt, ("lab", "score"), {"input": "score", "soft_labels": False}),
    "isotonic": (clf.fit_isotonic, ("lab", "p"), {}),
    "histogram": (clf.fit_histogram_binning, ("lab", "p"), {"bins": 7}),
    "beta": (clf.fit_beta, ("lab", "p"), {}),
    "scaling_binning": (clf.fit_scaling_binning, ("lab", "p"), {"bins": 5}),
    "scaling_binning_all": (clf.fit_scaling_binning, ("lab", "p"), {"split": None}),
    "bbq": (clf.fit_bbq, ("lab", "p"), {}),
    "bbq_posterior": (clf.fit_bbq, ("lab", "p"), {"estimate": "posterior"}),
    "spline": (clf.fit_spline, ("lab", "p"), {"knots": 5, "penalties": (0.01, 1.0)}),
    "temperature": (clf.fit_temperature, ("cls", "logits3"), {}),
    "temperature_binary": (clf.fit_temperature, ("lab", "score"), {}),
    "one_vs_rest_platt": (clf.fit_one_vs_rest, ("cls", "probs3"), {"method": "platt"}),
    "one_vs_rest_isotonic": (clf.fit_one_vs_rest, ("cls", "probs3"), {}),
    "vector_scaling": (clf.fit_vector_scaling, ("cls", "logits3"), {}),
    "matrix_scaling": (clf.fit_matrix_scaling, ("cls", "logits3"), {}),
    "matrix_scaling_odir": (
        clf.fit_matrix_scaling,
        ("cls", "logits3"),
        {"reg_lambda": 0.1, "reg_mu": 0.1},
    ),
    "dirichlet": (clf.fit_dirichlet, ("cls", "probs3"), {"reg_lambda": 0.01}),
    "top_label": (clf.fit_top_label, ("cls", "probs3"), {"bins": 5}),
    "dirichlet_l2": (
        clf.fit_dirichlet,
        ("cls", "probs3"),
        {"regularization": "l2", "reg_lambda": 0.1},
    ),
    "sigma_normal": (reg.fit_sigma_scaling, ("y", "loc", "scale"), {}),
    "sigma_student_t": (
        reg.fit_sigma_scaling,
        ("y", "loc", "scale"),
        {"family": "student_t", "df": 4.0},
    ),
    "sigma_laplace": (reg.fit_sigma_scaling, ("y", "loc", "scale"), {"family": "laplace"}),
    "isotonic_recalibrator": (reg.fit_isotonic_recalibrator, ("pit",), {}),
}  # fmt: skip


def _fit(name, data):
    fn, args, kw = FITS[name]
    return fn(*(data[a] for a in args), **kw)


# float32 only: Dirichlet calibration's off-diagonal coefficients on log-softmax
# probabilities are weakly identified (log p_k = z_k - logsumexp(z) nearly shares a
# column), so the padded and unpadded sums' rounding moves them by a few 1e-6.
# And the fits with a float64 host twin: eager calls on small NumPy inputs take the
# host path, jit and vmap the float32 kernel. Spline calibration's kernel solves normal
# equations on cubic columns of ~1e2 and loses ~4 digits: coefficients of ~0.5 agree to
# ~5e-5 (tests/test_spline.py). BBQ's kernel sums lgamma of counts in float32: its
# model weights move by ~1e-7 N ln N, 7.5e-5 at N = 150 (fit_bbq's docstring; 5e-5
# relative measured on jax 0.12).
ATOL = (
    {}
    if X64
    else {"dirichlet": 1e-5, "spline": 1e-4, "bbq": 1e-4, "bbq_posterior": 1e-4}
)


def _assert_same(a, b, atol=1e-6):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb  # same classes and options
    for u, v in zip(la, lb, strict=True):
        assert u.shape == v.shape
        np.testing.assert_allclose(
            np.asarray(u, np.float64), np.asarray(v, np.float64), rtol=RTOL, atol=atol
        )


@pytest.mark.parametrize("name", sorted(FITS))
def test_jit_equals_eager(name):
    data = _data(0)
    fn, args, kw = FITS[name]
    eager = _fit(name, data)
    jitted = jax.jit(lambda *a: fn(*a, **kw))(*(jnp.asarray(data[a]) for a in args))
    _assert_same(eager, jitted, ATOL.get(name, 1e-6))
    leaves = jax.tree_util.tree_leaves(jitted)
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves), name


@pytest.mark.parametrize("name", sorted(FITS))
def test_vmap_equals_loop(name):
    sets = [_data(s) for s in (1, 2, 3)]
    fn, args, kw = FITS[name]
    stacked = [jnp.stack([jnp.asarray(d[a]) for d in sets]) for a in args]
    batched = jax.vmap(lambda *a: fn(*a, **kw))(*stacked)
    for i, d in enumerate(sets):
        one = _fit(name, d)
        _assert_same(
            jax.tree_util.tree_map(lambda x, i=i: x[i], batched), one, ATOL.get(name, 1e-6)
        )


def test_jit_of_invalid_values_gives_nan_parameters():
    d = _data(4)
    bad_p = d["p"].copy()
    bad_p[0] = 1.5
    with pytest.raises(ValueError, match="y_prob must lie in"):
        clf.fit_beta(d["lab"], bad_p)
    for fn, args in [
        (clf.fit_platt, (d["lab"], bad_p)),
        (clf.fit_beta, (d["lab"], bad_p)),
        (clf.fit_isotonic, (d["lab"], np.where(d["p"] > 0.5, np.nan, d["p"]))),
        (clf.fit_temperature, (d["cls"], np.where(d["logits3"] > 3, np.inf, d["logits3"]))),
        (reg.fit_sigma_scaling, (d["y"], d["loc"], -d["scale"])),
    ]:
        out = jax.jit(fn)(*(jnp.asarray(a) for a in args))
        floats = [x for x in jax.tree_util.tree_leaves(out) if x.dtype.kind == "f"]
        assert floats and all(np.isnan(np.asarray(x)).all() for x in floats), fn


# ------------------------------------------------------------ float32 accuracy
@pytest.mark.slow
def test_platt_float32_within_1e4_of_float64_optimum_at_1e6():
    # Reference: scipy.optimize.minimize (trust-exact, float64, analytic gradient and
    # Hessian) of Platt's soft-label loss on the same (float32-rounded) logits.
    n = 1_000_000
    r = np.random.default_rng(11)
    z = r.normal(0, 1.5, size=n)
    y = (r.uniform(size=n) < scipy.special.expit(z)).astype(np.float32)
    p = scipy.special.expit(1.5 * z + 0.8).astype(np.float32)
    cal = clf.fit_platt(y, p)
    f = np.log(p.astype(np.float64)) - np.log1p(-p.astype(np.float64))
    f = f.astype(p.dtype if X64 else np.float32).astype(np.float64)
    n_pos = y.sum()
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n - n_pos + 2))

    def parts(ab):
        eta = -(ab[0] * f + ab[1])  # logit of P(y = 1) = -(A f + B)
        q = scipy.special.expit(eta)
        loss = np.sum(np.logaddexp(0, eta) - t * eta)
        g = -np.array([np.sum((q - t) * f), np.sum(q - t)])
        w = q * (1 - q)
        h = np.array([[np.sum(w * f * f), np.sum(w * f)], [np.sum(w * f), np.sum(w)]])
        return loss, g, h

    ref = scipy.optimize.minimize(
        lambda ab: parts(ab)[0],
        [0.0, 0.0],
        jac=lambda ab: parts(ab)[1],
        hess=lambda ab: parts(ab)[2],
        method="trust-exact",
        options={"gtol": 1e-8},
    ).x
    got = np.array([float(cal.a), float(cal.b)])
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    assert abs(ref[1]) > 0.3  # B is not near 0, so the relative test means something


def test_temperature_binary_matches_scipy():
    # reference: scipy.optimize.minimize_scalar (bounded, float64) of the mean NLL
    d = _data(5, n=400)
    cal = clf.fit_temperature(d["lab"], d["score"])
    z, y = d["score"].astype(np.float64), d["lab"].astype(np.float64)

    def nll(temp):
        return np.mean(np.logaddexp(0, z / temp) - y * z / temp)

    ref = scipy.optimize.minimize_scalar(
        nll, bounds=(0.05, 50), method="bounded", options={"xatol": 1e-10}
    ).x
    np.testing.assert_allclose(float(cal.temperature), ref, rtol=1e-5)


def test_platt_hard_labels_match_sklearn_unpenalised_logistic_regression():
    # reference: scikit-learn LogisticRegression(C=np.inf), unpenalised, on the logit feature
    d = _data(6, n=500)
    cal = clf.fit_platt(d["lab"], d["p"], soft_labels=False)
    f = scipy.special.logit(d["p"].astype(np.float64))[:, None]
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(f, d["lab"])
    np.testing.assert_allclose(
        [-float(cal.a), -float(cal.b)], [lr.coef_[0, 0], lr.intercept_[0]], rtol=1e-4
    )


def test_accurate_sum_keeps_growing_past_2_to_24_terms():
    # 0.95 * 3e7 needs more than float32's 24-bit sequential accumulator.
    x = jnp.full((30_000_000,), 0.95, jnp.float32)
    np.testing.assert_allclose(float(newton.accurate_sum(x)), 0.95 * 3e7, rtol=1e-6)


def test_solver_respects_bounds_and_finds_the_constrained_minimum():
    # min (x0 + 1)^2 + (x1 - 2)^2 + x0 x1 / 2 over x0 >= 0: x0 = 0, x1 = 2 (KKT by hand:
    # d/dx0 = 2 + 1 = 3 > 0 at (0, 2), d/dx1 = 0).
    def objective(x):
        v = (x[0] + 1) ** 2 + (x[1] - 2) ** 2 + x[0] * x[1] / 2
        g = jnp.stack([2 * (x[0] + 1) + x[1] / 2, 2 * (x[1] - 2) + x[0] / 2])
        h = jnp.array([[2.0, 0.5], [0.5, 2.0]])
        return newton.Derivatives(v, g, h, jnp.abs(v))

    res = newton.minimize(objective, jnp.array([3.0, -1.0]), lower=jnp.array([0.0, -jnp.inf]))
    np.testing.assert_allclose(res.x, [0.0, 2.0], atol=1e-6)
    assert bool(res.converged) and float(res.x[0]) == 0.0


# ------------------------------------------------------------------ the defects
def _betacal_reference(y, p):
    """The betacal (Kull et al. 2017) fitting logic with scikit-learn LogisticRegression."""
    x = np.column_stack([np.log(p), -np.log1p(-p)])

    def lr(features):
        m = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(features, y)
        return m.coef_[0], m.intercept_[0]

    coef, c = lr(x)
    if coef[0] < 0:
        (b,), c = lr(x[:, 1:])
        return 0.0, b, c
    if coef[1] < 0:
        (a,), c = lr(x[:, :1])
        return a, 0.0, c
    return coef[0], coef[1], c


def test_beta_shapes_are_never_negative_and_map_is_monotone():
    # Defect (b): with a decreasing relation between p and y the betacal logic (which
    # the old fit_beta followed) refits with a = 0 and still gets b < 0: a decreasing
    # map. The constrained fit is checked against scipy's L-BFGS-B (float64) with
    # bounds a, b >= 0.
    r = np.random.default_rng(7)
    p = r.uniform(0.02, 0.98, size=600)
    y = (r.uniform(size=600) < 1 - p).astype(float)
    a_ref, b_ref, _ = _betacal_reference(y, p)
    assert min(a_ref, b_ref) < 0  # the old logic gives a negative shape here
    cal = clf.fit_beta(y, p.astype(DT))
    assert float(cal.a) >= 0 and float(cal.b) >= 0
    x = np.column_stack([np.log(p), -np.log1p(-p), np.ones_like(p)])

    def nll(theta):
        eta = x @ theta
        return np.sum(np.logaddexp(0, eta) - y * eta), x.T @ (scipy.special.expit(eta) - y)

    ref = scipy.optimize.minimize(
        nll, [1.0, 1.0, 0.0], jac=True, method="L-BFGS-B",
        bounds=[(0, None), (0, None), (None, None)], options={"ftol": 1e-15, "gtol": 1e-10},
    ).x  # fmt: skip
    np.testing.assert_allclose([cal.a, cal.b, cal.c], ref, atol=2e-4)
    grid = np.linspace(0.01, 0.99, 99).astype(DT)
    assert np.all(np.diff(np.asarray(cal(grid))) >= 0)


def test_sigma_scaling_zero_residuals_raise_and_give_nan_under_jit():
    # Defect (d): factor 0 for zero residuals, then a division by zero downstream.
    y = np.array([1.0, 2.0, 3.0], DT)
    for family, df in [("normal", None), ("student_t", 3.0), ("laplace", None)]:
        with pytest.raises(ValueError, match=r"y_true equals loc .* residuals .* are 0"):
            reg.fit_sigma_scaling(y, y, np.ones(3, DT), family=family, df=df)
    out = jax.jit(reg.fit_sigma_scaling)(jnp.asarray(y), jnp.asarray(y), jnp.ones(3, DT))
    assert np.isnan(float(out.factor))


def test_one_vs_rest_with_an_absent_class_raises_and_gives_nan_under_jit():
    # Issue 12: a class absent from the labels was fitted silently (isotonic default).
    probs = np.full((6, 3), 1 / 3, DT)
    labels = np.array([0, 2, 0, 2, 0, 2])
    for method in ("isotonic", "platt", "histogram"):
        with pytest.raises(ValueError, match=r"class 1 does not occur in y_true"):
            clf.fit_one_vs_rest(labels, probs, method=method)
    out = jax.jit(clf.fit_one_vs_rest)(jnp.asarray(labels), jnp.asarray(probs))
    assert all(np.isnan(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(out))


# ------------------------------------------------------------------ properties
@given(
    # a few lengths (each new length is one more compilation, eager and jitted)
    st.sampled_from([2, 3, 11, 40]).flatmap(
        lambda n: st.lists(st.integers(0, 12), min_size=n, max_size=n)
    ),
    st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_isotonic_fit_is_monotone_and_jit_equals_eager(scores, labels):
    s = (np.array(scores) / 12).astype(DT)  # ties on purpose
    y = np.array(labels[: s.size], DT)
    eager = clf.fit_isotonic(y, s)
    jitted = jax.jit(clf.fit_isotonic)(jnp.asarray(y), jnp.asarray(s))
    _assert_same(eager, jitted)
    assert eager.thresholds.shape == (s.size,)
    assert np.all(np.diff(np.asarray(eager.thresholds)) >= 0)
    assert np.all(np.diff(np.asarray(eager.values)) >= 0)
    grid = np.linspace(-0.1, 1.1, 50).astype(DT)
    assert np.all(np.diff(np.asarray(eager(grid))) >= 0)
    # the padded knots leave the map unchanged: equal to the fit on distinct knots
    m = np.unique(s).size
    trimmed = clf.IsotonicCalibrator(eager.thresholds[:m], eager.values[:m])
    np.testing.assert_array_equal(trimmed(grid), eager(grid))
