"""Recalibration: Kuleshov's isotonic map and sigma-scaling.

References: Kuleshov et al. (2018) Algorithm 1 (isotonic regression of ECDF pairs, run
here with scikit-learn's IsotonicRegression and bayescal's PAV), scipy.stats
quantiles, scipy.optimize.minimize_scalar for the Student-t scale, the closed-form
Laplace MLE mean|z|, and binomial sampling tolerances for coverage.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.isotonic import IsotonicRegression

from bayescal import core
from bayescal import regression as reg
from tests.conftest import X64


def test_isotonic_on_ecdf_pairs_changes_nothing(rng):
    # Kuleshov's training pairs (u_t, P(u_t)) are already monotone: PAV returns them.
    u = np.round(rng.beta(2, 5, 300), 2)  # many ties
    order = np.argsort(u)
    ecdf = np.searchsorted(np.sort(u), u[order], side="right") / u.size
    np.testing.assert_allclose(core.isotonic_regression(ecdf), ecdf, atol=1e-7)
    sk = IsotonicRegression(out_of_bounds="clip").fit(u[order], ecdf)  # sklearn 1.9
    r = reg.fit_isotonic_recalibrator(u)
    grid = np.linspace(0, 1, 501)
    inside = (grid > u.min()) & (grid < u.max())
    np.testing.assert_allclose(r(grid)[inside], sk.predict(grid)[inside], atol=1e-6)


@given(
    hnp.arrays(np.float32, 40, elements=st.floats(0, 1, width=32, allow_subnormal=False)),
)
def test_recalibrator_monotone_onto_and_inverse_round_trip(u):
    # Knot spacings below ~1e-30 would make R^{-1}(t) subnormal, which XLA flushes to
    # zero in float32; such PIT values are set to exactly 0 (an atom the test handles).
    u = np.where(u < 1e-30, 0.0, u).astype(np.float32)
    if np.unique(u[(u > 0) & (u < 1)]).size < 2:  # degenerate: no map (item 13 below)
        with pytest.raises(ValueError, match="needs at least 2"):
            reg.fit_isotonic_recalibrator(jnp.asarray(u))
        return
    r = reg.fit_isotonic_recalibrator(jnp.asarray(u))
    p = jnp.linspace(0, 1, 257, dtype=r.raw.dtype)
    out = np.asarray(r(p))
    assert np.all(np.diff(out) >= -1e-7)
    assert out[0] == 0.0 and out[-1] == 1.0
    # R(R^{-1}(t)) = t for every level R reaches: R is continuous on (0, 1], with a
    # jump at 0 only when PIT values sit exactly at 0 (levels below that jump are
    # not reached; the generalized inverse sends them to 0).
    t = jnp.linspace(0.001, 0.999, 101, dtype=r.raw.dtype)
    reached = np.asarray(t) > np.mean(u == 0) + 1e-6
    # Rounding R^{-1}(t) to the dtype moves R(.) by up to eps * (steepest slope of R).
    raw, cal = np.asarray(r.raw, np.float64), np.asarray(r.calibrated, np.float64)
    gaps = np.diff(raw) > 0
    slope = np.max(np.diff(cal)[gaps] / np.diff(raw)[gaps]) if gaps.any() else 0.0
    tol = 2e-5 + 2 * np.finfo(np.asarray(r.raw).dtype).eps * slope
    np.testing.assert_allclose(
        np.asarray(r(r.inverse(t)))[reached], np.asarray(t)[reached], atol=tol
    )
    np.testing.assert_array_equal(np.asarray(r.inverse(t))[~reached], 0.0)


def test_recalibrated_pit_of_calibration_data_is_ecdf(rng):
    u = rng.beta(0.5, 0.5, 400)
    r = reg.fit_isotonic_recalibrator(u)
    np.testing.assert_allclose(
        r(u), np.searchsorted(np.sort(u), u, side="right") / u.size, atol=1e-6
    )


def _misspecified(rng, n, model_sd=0.5):
    # True y ~ skewed noise around loc; the model claims N(loc, model_sd^2): wrong
    # scale and shape.
    loc = rng.normal(size=n) * 2
    y = loc + rng.gamma(2.0, 1.0, n) - 2.0
    return y, loc, np.full(n, model_sd)


@pytest.mark.slow
@pytest.mark.parametrize("predictive", ["normal", "draws"])
def test_recalibration_restores_held_out_coverage(predictive):
    rng = np.random.default_rng(42)
    n_cal, n_test = 3000, 3000
    y_c, loc_c, sc_c = _misspecified(rng, n_cal)
    y_t, loc_t, sc_t = _misspecified(rng, n_test)
    levels = np.array([0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95])
    if predictive == "draws":
        # Draws cannot be recalibrated beyond their own range, so the model here is
        # less overconfident (sd 1.2 against a true 1.41) but still skewed the wrong way.
        y_c, loc_c, sc_c = _misspecified(np.random.default_rng(1), n_cal, 1.2)
        y_t, loc_t, sc_t = _misspecified(np.random.default_rng(2), n_test, 1.2)
    if predictive == "normal":
        r = reg.fit_isotonic_recalibrator(reg.pit_normal(y_c, loc_c, sc_c))
        q = reg.recalibrated_quantiles(r, levels, loc=loc_t, scale=sc_t)
        raw_cov = (y_t <= scipy.stats.norm.ppf(levels)[:, None] * sc_t + loc_t).mean(1)
    else:
        d_c = loc_c + sc_c * rng.normal(size=(400, n_cal))
        d_t = loc_t + sc_t * rng.normal(size=(400, n_test))
        r = reg.fit_isotonic_recalibrator(reg.pit_draws(y_c, d_c))
        q = reg.recalibrated_quantiles(r, levels, draws=d_t)
        raw_cov = (y_t <= np.quantile(d_t, levels, axis=0)).mean(1)
    cov = (y_t[None, :] <= np.asarray(q)).mean(1)
    # Coverage error = sampling noise of the test split plus estimation error of the
    # recalibrator on the calibration split: sd = sqrt(t (1 - t) (1/n_test + 1/n_cal)).
    # Tolerance 4 sd (+ a quantile-of-draws discretisation term for draws).
    sd = np.sqrt(levels * (1 - levels) * (1 / n_test + 1 / n_cal))
    tol = 4 * sd + (0.005 if predictive == "draws" else 0)
    np.testing.assert_array_less(np.abs(cov - levels), tol)
    assert np.max(np.abs(raw_cov - levels)) > 0.04  # it really was miscalibrated


@pytest.mark.slow
def test_recalibrated_interval_coverage(rng):
    y_c, loc_c, sc_c = _misspecified(rng, 4000)
    y_t, loc_t, sc_t = _misspecified(rng, 4000)
    r = reg.fit_isotonic_recalibrator(reg.pit_normal(y_c, loc_c, sc_c))
    lo, hi = reg.recalibrated_interval(r, 0.8, loc=loc_t, scale=sc_t)
    cov = np.mean((y_t >= lo) & (y_t <= hi))
    assert abs(cov - 0.8) < 4 * np.sqrt(0.8 * 0.2 * 2 / 4000)


def test_sigma_scaling_closed_form_not_abs_residuals(rng):
    loc = rng.normal(size=500)
    scale = rng.uniform(0.5, 1.5, 500)
    y = loc + 3 * scale * rng.standard_t(5, 500)
    z = (y - loc) / scale
    s = reg.fit_sigma_scaling(y, loc, scale)
    np.testing.assert_allclose(s.factor, np.sqrt(np.mean(z**2)), rtol=1e-5)
    assert abs(float(s.factor) - np.mean(np.abs(z))) > 0.1  # LaplaceRedux's |r| differs
    np.testing.assert_allclose(s(scale), scale * float(s.factor), rtol=1e-6)
    # Gaussian MLE: the NLL at the fitted factor is minimal
    nll = lambda c: -scipy.stats.norm.logpdf(y, loc, c * scale).sum()  # noqa: E731
    best = scipy.optimize.minimize_scalar(nll, bounds=(0.1, 20), method="bounded").x
    np.testing.assert_allclose(s.factor, best, rtol=1e-4)


def test_sigma_scaling_laplace_equals_closed_form_mle(rng):
    loc, scale = rng.normal(size=400), rng.uniform(0.5, 2, 400)
    y = loc + scale * rng.laplace(0, 2.5, 400)
    z = np.abs((y - loc) / scale)
    s = reg.fit_sigma_scaling(y, loc, scale, family="laplace")
    np.testing.assert_allclose(s.factor, z.mean(), rtol=1e-5)  # MLE of the Laplace scale


@pytest.mark.parametrize("df", [1.5, 4.0, 30.0])
def test_sigma_scaling_student_t_vs_scipy_optimize(rng, df):
    loc, scale = rng.normal(size=400), rng.uniform(0.5, 2, 400)
    y = loc + 1.7 * scale * rng.standard_t(df, 400)
    s = reg.fit_sigma_scaling(y, loc, scale, family="student_t", df=df)
    nll = lambda c: -scipy.stats.t.logpdf(y, df, loc, c * scale).sum()  # noqa: E731
    best = scipy.optimize.minimize_scalar(
        nll, bounds=(0.05, 50), method="bounded", options={"xatol": 1e-9}
    ).x
    np.testing.assert_allclose(s.factor, best, rtol=1e-4)
    # PIT under the rescaled t predictive equals scipy's t CDF
    np.testing.assert_allclose(
        s.pit(y, loc, scale),
        scipy.stats.t.cdf(y, df, loc, float(s.factor) * scale),
        atol=2e-5,
    )


@pytest.mark.parametrize("family", ["normal", "laplace", "student_t"])
def test_sigma_scaling_quantiles_vs_scipy(family):
    s = reg.SigmaScalingCalibrator(jnp.asarray(1.7), family, 3.0 if family == "student_t" else None)
    levels = np.array([0.01, 0.3, 0.5, 0.9])
    loc, scale = np.array([0.0, 2.0]), np.array([1.0, 0.5])
    q = np.asarray(reg.recalibrated_quantiles(s, levels, loc=loc, scale=scale))
    dist = {"normal": scipy.stats.norm, "laplace": scipy.stats.laplace}.get(family)
    if dist is None:
        ref = scipy.stats.t.ppf(levels[:, None], 3.0, loc, 1.7 * scale)
    else:
        ref = dist.ppf(levels[:, None], loc, 1.7 * scale)
    np.testing.assert_allclose(q, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_sigma_scaling_fixes_underdispersed_model():
    rng = np.random.default_rng(7)
    n = 5000
    loc = rng.normal(size=n)
    y = loc + 2.0 * rng.normal(size=n)
    s = reg.fit_sigma_scaling(y[:2500], loc[:2500], np.ones(2500))
    np.testing.assert_allclose(s.factor, 2.0, rtol=4 * np.sqrt(1 / (2 * 2500)))
    u = reg.pit_normal(y[2500:], loc[2500:], s(np.ones(2500)))
    bound = scipy.stats.kstwobign.ppf(0.999) / np.sqrt(2500) + 0.03  # + factor error
    assert float(reg.calibration_error(u, norm="max")) < bound


def test_recalibrators_are_pytrees_through_jit_and_vmap(rng):
    pits = jnp.asarray(rng.beta(2, 2, (3, 50)))
    r = reg.fit_isotonic_recalibrator(pits[0])
    p = jnp.linspace(0, 1, 11, dtype=pits.dtype)
    np.testing.assert_allclose(jax.jit(lambda rr, x: rr(x))(r, p), r(p), rtol=1e-6)
    batch = jax.vmap(reg.fit_isotonic_recalibrator)(pits)
    assert batch.raw.shape == (3, 52)
    loop = jnp.stack([reg.fit_isotonic_recalibrator(pits[i])(p) for i in range(3)])
    np.testing.assert_allclose(jax.vmap(lambda rr: rr(p))(batch), loop, rtol=1e-6)
    s = reg.fit_sigma_scaling(rng.normal(size=20), 0.0, 1.0)
    leaves, treedef = jax.tree_util.tree_flatten(s)
    assert len(leaves) == 1 and jax.tree_util.tree_unflatten(treedef, leaves) == s
    np.testing.assert_allclose(jax.jit(lambda ss: ss(jnp.ones(2)))(s), s(jnp.ones(2)))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: reg.fit_isotonic_recalibrator([0.5, 1.5]), "pit must lie in \\[0, 1\\]"),
        (lambda: reg.fit_isotonic_recalibrator([]), "pit is empty"),
        (
            lambda: reg.fit_sigma_scaling([1.0], [0.0], [0.0]),
            "scale must be strictly positive",
        ),
        (
            lambda: reg.fit_sigma_scaling([1.0], [0.0], [1.0], family="cauchy"),
            "family must be one of",
        ),
        (
            lambda: reg.fit_sigma_scaling([1.0], [0.0], [1.0], family="student_t"),
            "df must be a positive",
        ),
        (lambda: reg.fit_sigma_scaling([1.0], [0.0], [1.0], df=3), "df is only used"),
        (
            lambda: reg.fit_isotonic_recalibrator([0.2, 0.5])([2.0]),
            "levels must lie in \\[0, 1\\]",
        ),
        (
            lambda: reg.recalibrated_quantiles(reg.fit_isotonic_recalibrator([0.2, 0.5]), [0.5]),
            "pass loc and scale",
        ),
        (
            lambda: reg.recalibrated_quantiles("iso", [0.5], loc=[0.0], scale=[1.0]),
            "recalibrator must be an IsotonicLevelCalibrator",
        ),
        (
            lambda: reg.recalibrated_interval(
                reg.fit_isotonic_recalibrator([0.2, 0.5]), 1.2, loc=[0.0], scale=[1.0]
            ),
            "coverage must be a float in \\(0, 1\\)",
        ),
    ],
)
def test_recalibration_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_results_keep_dtype(rng):
    dt = jnp.float64 if X64 else jnp.float32
    u = jnp.asarray(rng.uniform(size=30), dtype=dt)
    r = reg.fit_isotonic_recalibrator(u)
    assert r.raw.dtype == dt and r(u).dtype == dt


def test_recalibrated_quantiles_with_quantile_fn_equals_loc_scale(rng):
    u = rng.beta(2, 2, 200)
    r = reg.fit_isotonic_recalibrator(u)
    loc, scale = rng.normal(size=5), rng.uniform(0.5, 2, 5)
    levels = np.array([0.1, 0.5, 0.9])
    via_fn = reg.recalibrated_quantiles(
        r,
        levels,
        quantile_fn=lambda p: scipy.stats.norm.ppf(np.asarray(p)[:, None], loc, scale),
    )
    direct = reg.recalibrated_quantiles(r, levels, loc=loc, scale=scale)
    np.testing.assert_allclose(via_fn, direct, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="quantile_fn\\(levels\\) returned shape"):
        reg.recalibrated_quantiles(r, levels, quantile_fn=lambda p: np.zeros(3))
    with pytest.raises(ValueError, match="pass quantile_fn alone"):
        reg.recalibrated_quantiles(r, levels, quantile_fn=lambda p: p, loc=loc, scale=scale)


# ------------------------------------ degenerate calibration PIT values (issue item 13)
# fit_isotonic_recalibrator(np.ones(50)) returned the identity map, while by the
# definition (Kuleshov et al. 2018: R(p) = fraction of calibration PIT values <= p) it is
# 0 below 1: with one distinct value the linear interpolation from (0, 0) is all there
# is. Such input now raises, naming pit (NaN under jit); elsewhere the map keeps
# Kuleshov's Algorithm 1 (scikit-learn's interpolation, test above) and equals the
# definition at every calibration value.
def _ecdf(u, p):
    return (np.asarray(u, np.float64)[None, :] <= np.asarray(p, np.float64)[:, None]).mean(1)


@pytest.mark.parametrize(
    "u",
    [
        np.round(np.random.default_rng(0).uniform(size=60), 1),  # heavy ties
        np.concatenate([np.full(30, 0.2), np.random.default_rng(1).uniform(size=10)]),
        np.concatenate([np.ones(10), np.random.default_rng(2).uniform(size=27)]),
    ],
)
def test_recalibrator_equals_the_definition_at_calibration_values(u):
    u = u.astype(np.float64 if X64 else np.float32)
    r = reg.fit_isotonic_recalibrator(u)
    values = np.unique(u[u > 0])
    np.testing.assert_allclose(
        np.asarray(r(values), np.float64), _ecdf(u, values), rtol=0, atol=1e-6
    )


@pytest.mark.parametrize(
    "u, shown",
    [
        (np.ones(50), r"1.0 \(50x\)"),
        (np.full(40, 0.5), r"0.5 \(40x\)"),
        (np.array([0.0, 1.0] * 10), r"0.0 \(10x\), 1.0 \(10x\)"),
        (np.array([0.3]), r"0.3"),
    ],
)
def test_degenerate_calibration_pit_raises_and_is_nan_traced(u, shown):
    with pytest.raises(ValueError, match=rf"pit has [01] distinct values strictly between 0 and 1.*{shown}.*needs at least 2"):
        reg.fit_isotonic_recalibrator(u)
    r = jax.jit(reg.fit_isotonic_recalibrator)(jnp.asarray(u))
    assert np.isnan(np.asarray(r.calibrated)).all()
    assert np.isnan(np.asarray(r(jnp.array([0.25, 0.5])))).all()
