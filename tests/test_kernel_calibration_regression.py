"""Squared kernel calibration error of Gaussian predictives (Widmann, Lindsten &
Zachariah 2021): the estimators against a numpy double loop of the pair function, the
closed-form expectations against numerical integration (scipy.integrate.quad), the
estimate's mean under calibration and overconfidence, the tests' sizes under the null
and power by simulation (fixed seeds), bucketing, jit/vmap, bad input."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal import regression as reg
from bayescal._src.host import disabled as host_disabled
from bayescal.regression import _kernel as K

X64 = bool(jax.config.jax_enable_x64)
# jax.enable_x64 is newer than the minimum JAX (0.4.38 has it in jax.experimental)
_enable_x64 = getattr(jax, "enable_x64", None)
if _enable_x64 is None:
    from jax.experimental import enable_x64 as _enable_x64
# float32: the pair function is a difference of four O(1) kernel values summed over
# O(N^2) pairs, so ~1e-7 relative rounding per term; 1e-4 relative with a 2e-5
# absolute floor (estimates near 0) is a few hundred ulps of the sum, as in the
# classification tests.
TOL = 1e-9 if X64 else 2e-5
RTOL = 1e-7 if X64 else 1e-4


def _dtype():
    return np.float64 if X64 else np.float32


# ----------------------------------------------------------------- numpy reference
def _ref_h(yi, mi, si, yj, mj, sj, nu, ell):
    """Widmann et al. (2021): k_P = exp(-W_2 / nu), W_2 of normals
    sqrt((mu - mu')^2 + (sigma - sigma')^2); k_Y Gaussian of length scale ell; h the
    kernel's calibration pair function with the Gaussian expectations written out."""
    kp = math.exp(-math.sqrt((mi - mj) ** 2 + (si - sj) ** 2) / nu)
    ky = math.exp(-((yi - yj) ** 2) / (2 * ell**2))

    def ez(m, s, y):  # E_{Z ~ N(m, s^2)} k_Y(Z, y)
        v = ell**2 + s**2
        return ell / math.sqrt(v) * math.exp(-((m - y) ** 2) / (2 * v))

    v2 = ell**2 + si**2 + sj**2
    ezz = ell / math.sqrt(v2) * math.exp(-((mi - mj) ** 2) / (2 * v2))
    return kp * (ky - ez(mi, si, yj) - ez(mj, sj, yi) + ezz)


def _reference(y, m, s, bandwidth=None, target_bandwidth=None):
    """SKCE_uq = binom(n, 2)^-1 sum_{i<j} h_ij and SKCE_ul over the pairs (2i, 2i+1),
    plain double loops in float64; the bandwidths the medians over i < j (np.median)."""
    y, m, s = (np.asarray(a, np.float64) for a in (y, m, s))
    n = len(y)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    nu = bandwidth
    if nu is None:
        nu = float(np.median([math.hypot(m[i] - m[j], s[i] - s[j]) for i, j in pairs]))
    ell = target_bandwidth
    if ell is None:
        ell = float(np.median([abs(y[i] - y[j]) for i, j in pairs]))

    def h(i, j):
        return _ref_h(y[i], m[i], s[i], y[j], m[j], s[j], nu, ell)

    uq = sum(h(i, j) for i, j in pairs) / len(pairs)
    terms = np.array([h(2 * i, 2 * i + 1) for i in range(n // 2)])
    return uq, terms.mean(), terms, nu, ell


def _data(n, seed, *, factor=1.0, reps=None):
    """Calibrated normal predictives (y ~ N(loc, scale^2)); ``factor`` multiplies the
    reported scale (0.5: overconfident)."""
    rng = np.random.default_rng(seed)
    shape = (n,) if reps is None else (reps, n)
    loc = rng.normal(0, 1.5, shape)
    scale = rng.uniform(0.3, 1.5, shape)
    y = rng.normal(loc, scale)
    dt = _dtype()
    return y.astype(dt), loc.astype(dt), (factor * scale).astype(dt)


@pytest.mark.parametrize("n", [2, 7, 60])
@pytest.mark.parametrize("bandwidths", [(None, None), (0.7, None), (0.5, 1.3)])
def test_estimators_equal_the_numpy_double_loop(n, bandwidths):
    y, m, s = _data(n, n, factor=0.7)
    bw, tbw = bandwidths
    uq, ul, _, _, _ = _reference(y, m, s, bw, tbw)
    kw = {"bandwidth": bw, "target_bandwidth": tbw}
    got_uq = reg.kernel_calibration_error(y, m, s, **kw)
    got_ul = reg.kernel_calibration_error(y, m, s, estimator="linear", **kw)
    np.testing.assert_allclose(float(got_uq), uq, rtol=RTOL, atol=TOL)
    np.testing.assert_allclose(float(got_ul), ul, rtol=RTOL, atol=TOL)


def test_scalar_scale_broadcasts():
    y, m, _ = _data(30, 1)
    uq, _, _, _, _ = _reference(y, m, np.full(30, 0.8))
    got = reg.kernel_calibration_error(y, m, 0.8)
    np.testing.assert_allclose(float(got), uq, rtol=RTOL, atol=TOL)


def test_median_heuristics_are_the_reference_medians_and_the_test_reports_them():
    y, m, s = _data(101, 3)  # 5050 pairs (even count: np.median's mean of two)
    _, ul, _, nu, ell = _reference(y, m, s)
    t = reg.kernel_calibration_test(y, m, s)
    np.testing.assert_allclose(float(t.bandwidth), nu, rtol=1e-5)
    np.testing.assert_allclose(float(t.target_bandwidth), ell, rtol=1e-5)
    np.testing.assert_allclose(float(t.statistic), ul, rtol=RTOL, atol=TOL)


def test_more_than_512_observations_are_blocked_and_match_the_reference():
    # the O(N^2) sum runs in blocks of rows; the reference here is the same pair
    # function vectorised over the upper triangle (the double loop is slow at N = 700)
    y, m, s = _data(700, 4, factor=0.8)
    nu, ell = 0.9, 1.1
    yd, md, sd = (np.asarray(a, np.float64) for a in (y, m, s))
    i, j = np.triu_indices(700, 1)
    kp = np.exp(-np.hypot(md[i] - md[j], sd[i] - sd[j]) / nu)
    ky = np.exp(-((yd[i] - yd[j]) ** 2) / (2 * ell**2))
    vi, vj, vij = ell**2 + sd[i] ** 2, ell**2 + sd[j] ** 2, ell**2 + sd[i] ** 2 + sd[j] ** 2
    ez1 = ell / np.sqrt(vi) * np.exp(-((md[i] - yd[j]) ** 2) / (2 * vi))
    ez2 = ell / np.sqrt(vj) * np.exp(-((md[j] - yd[i]) ** 2) / (2 * vj))
    ezz = ell / np.sqrt(vij) * np.exp(-((md[i] - md[j]) ** 2) / (2 * vij))
    uq = float(np.mean(kp * (ky - ez1 - ez2 + ezz)))
    got = reg.kernel_calibration_error(y, m, s, bandwidth=nu, target_bandwidth=ell)
    np.testing.assert_allclose(float(got), uq, rtol=1e-3, atol=TOL)
    # and h itself at a few pairs equals the scalar double-loop reference
    for a, b in [(0, 1), (5, 600), (698, 699)]:
        k = np.flatnonzero((i == a) & (j == b))[0]
        ref = _ref_h(yd[a], md[a], sd[a], yd[b], md[b], sd[b], nu, ell)
        np.testing.assert_allclose(kp[k] * (ky[k] - ez1[k] - ez2[k] + ezz[k]), ref, rtol=1e-12)


# ----------------------------------------------------------------- closed forms
def _pdf(z, m, s):
    return math.exp(-0.5 * ((z - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))


@pytest.mark.parametrize(
    "m,s,y,ell", [(0.0, 1.0, 0.5, 1.0), (1.3, 0.2, -0.4, 0.7), (-2.0, 3.0, 1.0, 0.3)]
)
def test_expected_target_kernel_equals_numerical_integration(m, s, y, ell):
    from scipy import integrate

    def f(z):
        return math.exp(-((z - y) ** 2) / (2 * ell**2)) * _pdf(z, m, s)

    ref, _ = integrate.quad(f, m - 12 * s, m + 12 * s, epsabs=1e-13, epsrel=1e-12, limit=200)
    with _enable_x64(True):
        # the kernel's expectation in units of ell, by its difference from 1
        got = 1 + float(K._less_one(jnp.float64((s / ell) ** 2), jnp.float64(((m - y) / ell) ** 2)))
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize(
    "m1,s1,m2,s2,ell",
    [(0.0, 1.0, 0.5, 0.5, 1.0), (1.3, 0.2, -0.4, 0.9, 0.7), (-2.0, 2.0, 1.0, 0.3, 0.4)],
)
def test_expected_pair_kernel_equals_numerical_integration(m1, s1, m2, s2, ell):
    # E_{Z, Z'} k_Y(Z, Z') as an iterated integral: quad over z of N(z; m1, s1) times
    # quad over z' of N(z'; m2, s2) k_Y(z, z')
    from scipy import integrate

    def inner(z):
        def g(zp):
            return math.exp(-((z - zp) ** 2) / (2 * ell**2)) * _pdf(zp, m2, s2)

        return integrate.quad(g, m2 - 12 * s2, m2 + 12 * s2, epsabs=1e-14, epsrel=1e-12, limit=200)[0]

    def outer(z):
        return inner(z) * _pdf(z, m1, s1)

    ref, _ = integrate.quad(outer, m1 - 12 * s1, m1 + 12 * s1, epsabs=1e-13, epsrel=1e-11, limit=200)
    var, dist2 = (s1**2 + s2**2) / ell**2, ((m1 - m2) / ell) ** 2
    with _enable_x64(True):
        got = 1 + float(K._less_one(jnp.float64(var), jnp.float64(dist2)))
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-12)


# ----------------------------------------------------------------- the estimate's mean
def _batched_error(y, m, s, estimator="unbiased"):
    fn = lambda a, b, c: reg.kernel_calibration_error(a, b, c, estimator=estimator)  # noqa: E731
    return np.asarray(jax.vmap(fn)(jnp.asarray(y), jnp.asarray(m), jnp.asarray(s)), np.float64)


def test_unbiased_estimate_is_zero_in_mean_when_calibrated_and_positive_when_overconfident():
    # the SKCE is 0 exactly under calibration (the estimator is unbiased: its mean over
    # seeds is within 3.5 standard errors of 0) and > 0 otherwise (scale halved: the
    # mean is many standard errors above 0, and above the calibrated mean)
    reps = 200
    cal = _batched_error(*_data(80, 11, reps=reps))
    se = cal.std(ddof=1) / math.sqrt(reps)
    assert abs(cal.mean()) < 3.5 * se, (cal.mean(), se)
    over = _batched_error(*_data(80, 11, reps=reps, factor=0.5))
    se_over = over.std(ddof=1) / math.sqrt(reps)
    assert over.mean() > 10 * se_over, (over.mean(), se_over)
    assert over.mean() > cal.mean() + 10 * se


# ----------------------------------------------------------------- tests
def test_linear_test_p_value_is_the_normal_tail_of_the_reference_terms():
    import scipy.stats

    y, m, s = _data(200, 6, factor=0.6)
    _, ul, terms, nu, ell = _reference(y, m, s)
    z = math.sqrt(len(terms)) * terms.mean() / terms.std(ddof=1)
    t = reg.kernel_calibration_test(y, m, s)
    np.testing.assert_allclose(float(t.statistic), ul, rtol=RTOL, atol=TOL)
    np.testing.assert_allclose(float(t.p_value), scipy.stats.norm.sf(z), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(float(t.bandwidth), nu, rtol=1e-5)
    np.testing.assert_allclose(float(t.target_bandwidth), ell, rtol=1e-5)


def test_unbiased_test_statistic_is_the_estimate_and_the_p_value_is_a_resampling_rank():
    y, m, s = _data(120, 7)
    t = reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=3, num_samples=99)
    np.testing.assert_allclose(
        float(t.statistic), float(reg.kernel_calibration_error(y, m, s)), rtol=1e-5, atol=TOL
    )
    k = float(t.p_value) * 100  # (1 + #{T_b >= T}) / (1 + B): a multiple of 1/100
    assert 1 <= round(k) <= 100 and abs(k - round(k)) < 1e-3
    again = reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=3, num_samples=99)
    assert float(again.p_value) == float(t.p_value)


@pytest.mark.parametrize("method", ["consistency", "bootstrap"])
def test_new_n_in_a_bucket_gives_the_unpadded_values(method):
    # 100 and its padded bucket of 256: the padding must change nothing (the jitted
    # call is not bucketed). The estimates' eager calls above are all padded (N < 256)
    # and equal the reference; here the resamples' draws of the padded call must be
    # the unpadded call's (prefix-stable draws per observation index).
    y, m, s = _data(100, 8, factor=0.8)
    yj, mj, sj = jnp.asarray(y), jnp.asarray(m), jnp.asarray(s)
    key = jax.random.key(1)
    opts = {"estimator": "unbiased", "num_samples": 19, "method": method}
    eager = reg.kernel_calibration_test(y, m, s, key=key, **opts)
    with host_disabled():  # the kernel's own draws, on the padded bucket
        kernel = reg.kernel_calibration_test(y, m, s, key=key, **opts)
    traced = jax.jit(
        lambda a, b, c, k: reg.kernel_calibration_test(a, b, c, key=k, **opts)
    )(yj, mj, sj, key)
    for a, b, c in zip(eager, traced, kernel, strict=True):
        np.testing.assert_allclose(float(a), float(b), rtol=1e-4, atol=10 * TOL)
        np.testing.assert_allclose(float(c), float(b), rtol=1e-4, atol=10 * TOL)
    # the vmap of the bootstrap test is the loop of its calls
    keys = jax.random.split(key, 3)
    yb, mb, sb = _data(50, 9, reps=3, factor=0.8)
    batched = jax.vmap(lambda a, b, c, k: reg.kernel_calibration_test(a, b, c, key=k, **opts))(
        jnp.asarray(yb), jnp.asarray(mb), jnp.asarray(sb), keys
    )
    for i in range(3):
        one = reg.kernel_calibration_test(yb[i], mb[i], sb[i], key=keys[i], **opts)
        for a, b in zip(one, batched, strict=True):
            np.testing.assert_allclose(float(a), float(b[i]), rtol=1e-4, atol=10 * TOL)


def test_vmap_equals_a_loop():
    y, m, s = _data(64, 20, reps=4, factor=0.7)
    for est in ("unbiased", "linear"):
        fn = lambda a, b, c, e=est: reg.kernel_calibration_error(a, b, c, estimator=e)  # noqa: E731
        batched = _batched_error(y, m, s, est)
        loop = [float(fn(*row)) for row in zip(y, m, s, strict=True)]
        np.testing.assert_allclose(batched, loop, rtol=1e-4, atol=10 * TOL)
    res = jax.vmap(lambda a, b, c: reg.kernel_calibration_test(a, b, c).p_value)(
        jnp.asarray(y), jnp.asarray(m), jnp.asarray(s)
    )
    loop = [float(reg.kernel_calibration_test(*row).p_value) for row in zip(y, m, s, strict=True)]
    np.testing.assert_allclose(np.asarray(res), loop, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------- bad input
def test_bad_input_names_the_argument():
    y, m, s = _data(50, 9)
    fn = reg.kernel_calibration_error
    with pytest.raises(ValueError, match="scale"):
        fn(y, m, np.where(np.arange(50) == 3, 0.0, s))
    with pytest.raises(ValueError, match="scale"):
        fn(y, m, -1.0)
    with pytest.raises(ValueError, match="y_true"):
        fn(np.where(np.arange(50) == 3, np.nan, y), m, s)
    with pytest.raises(ValueError, match="loc"):
        fn(y, np.where(np.arange(50) == 3, np.inf, m), s)
    with pytest.raises(ValueError, match="loc"):
        fn(y, m[:-1], s)
    with pytest.raises(ValueError, match="scale"):
        fn(y, m, s[:-1])
    with pytest.raises(ValueError, match="y_true"):
        fn(y.reshape(5, 10), m.reshape(5, 10), s.reshape(5, 10))
    with pytest.raises(ValueError, match="y_true"):
        fn(y[:1], m[:1], s[:1])
    with pytest.raises(ValueError, match="estimator"):
        fn(y, m, s, estimator="quadratic")
    with pytest.raises(ValueError, match="bandwidth"):
        fn(y, m, s, bandwidth=0.0)
    with pytest.raises(ValueError, match="target_bandwidth"):
        fn(y, m, s, target_bandwidth=-1.0)
    with pytest.raises(TypeError, match="target_bandwidth"):
        fn(y, m, s, target_bandwidth="median")
    with pytest.raises(TypeError, match="key"):
        reg.kernel_calibration_test(y, m, s, estimator="unbiased")
    with pytest.raises(ValueError, match="num_samples"):
        reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=0, num_samples=0)
    with pytest.raises(ValueError, match="y_true"):
        reg.kernel_calibration_test(y[:3], m[:3], s[:3])
    # under jit the failed check makes the result NaN instead of a plausible number
    out = jax.jit(fn)(jnp.asarray(y), jnp.asarray(m), jnp.asarray(np.where(np.arange(50) == 3, 0.0, s)))
    assert np.isnan(float(out))


# ----------------------------------------------------------------- size and power
def _band(reps):  # three binomial standard errors of a 5% rate
    return 3 * math.sqrt(0.05 * 0.95 / reps)


def _linear_p(y, m, s):
    return reg.kernel_calibration_test(y, m, s).p_value


def _unbiased_p(y, m, s, k, method="consistency"):
    return reg.kernel_calibration_test(
        y, m, s, estimator="unbiased", key=k, num_samples=99, method=method
    ).p_value


def _rates(y, m, s, estimator, seed=0):
    y, m, s = jnp.asarray(y), jnp.asarray(m), jnp.asarray(s)
    if estimator == "linear":
        pv = jax.vmap(_linear_p)(y, m, s)
    else:
        keys = jax.random.split(jax.random.key(seed), y.shape[0])
        method = "bootstrap" if estimator == "bootstrap" else "consistency"
        pv = jax.vmap(functools.partial(_unbiased_p, method=method))(y, m, s, keys)
    pv = np.asarray(pv)
    assert np.isfinite(pv).all()
    return float(np.mean(pv < 0.05))


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator,reps,n",
    [("linear", 800, 200), ("unbiased", 300, 100), ("bootstrap", 300, 100)],
)
def test_size_at_the_nominal_level(estimator, reps, n):
    y, m, s = _data(n, 31, reps=reps)
    rate = _rates(y, m, s, estimator)
    assert abs(rate - 0.05) < _band(reps), rate


@pytest.mark.slow
def test_power_of_the_unbiased_test_on_overconfident_predictions():
    y, m, s = _data(100, 32, reps=100, factor=0.5)  # scale halved
    assert _rates(y, m, s, "unbiased") > 0.8


@pytest.mark.slow
def test_power_of_the_bootstrap_test_on_overconfident_predictions():
    # the bootstrap's null is the data's own (wider under the alternative): at N = 100
    # it rejects ~77% where consistency resampling rejects ~95%; at N = 200, ~99%
    y, m, s = _data(200, 32, reps=100, factor=0.5)  # scale halved
    assert _rates(y, m, s, "bootstrap") > 0.8


@pytest.mark.slow
def test_power_of_the_linear_test_on_biased_means():
    # the linear test spends half its pairs' information: on the halved scales above
    # it rejects ~21% at N = 1000 (0.45 at N = 2000); means biased by one standard
    # deviation it rejects always
    y, m, s = _data(1000, 33, reps=100)
    assert _rates(y, m + s, s, "linear") > 0.8


def test_huge_locations_give_finite_results():
    # W2 distances above sqrt(float32 max) (1.8e19): by hypot, the median heuristic is
    # the float64 median of the distances (reference: numpy in float64), not inf, and
    # the estimates are finite (the sharded fuzz harness found NaN with loc * 1e30)
    r = np.random.default_rng(4)
    n = 16
    m = (r.normal(size=n) * 1e30).astype(_dtype())
    s = np.ones(n, _dtype())
    y = r.normal(size=n).astype(_dtype())
    iu, ju = np.triu_indices(n, 1)
    m64 = m.astype(np.float64)
    want = np.median(np.hypot(m64[iu] - m64[ju], 0.0))
    t = reg.kernel_calibration_test(y, m, s)
    e = reg.kernel_calibration_error(y, m, s)
    u = reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=0, num_samples=9)
    for value in (*t, e, *u):
        assert np.isfinite(float(value))
    np.testing.assert_allclose(float(t.bandwidth), want, rtol=1e-6)
    np.testing.assert_allclose(float(u.bandwidth), want, rtol=1e-6)


def test_huge_targets_give_finite_results():
    # a target near float32's largest value: the median of |y_i - y_j| is 0, the mean
    # fallback summed without overflow (each distance divided first), and the target
    # kernel's terms in units of its length scale (no inf / inf)
    y = np.zeros(8, _dtype())
    y[0] = 3.3e38 if _dtype() == np.float32 else 1e300
    m, s = np.zeros(8, _dtype()), np.ones(8, _dtype())
    t = reg.kernel_calibration_test(y, m, s)
    e = reg.kernel_calibration_error(y, m, s)
    for value in (*t, e):
        assert np.isfinite(float(value))
    # the mean distance: 7 of the 28 pairs at y[0]
    np.testing.assert_allclose(float(t.target_bandwidth), float(y[0]) * 7 / 28, rtol=1e-6)


def test_tiny_targets_beside_unit_scales_give_the_reference():
    # targets scaled by 1e-30 beside scales of 1/8: s / l = 4e30, whose square is inf
    # in float32; capped, the estimates are finite and equal the float64 double loop
    # (the sharded fuzz harness's medium profile found NaN)
    y = np.array([0, 0, 0, 0, 0, 0, 0, 1], np.float64) / 8 * 1e-30
    m = np.array([0, 0, 0, 0, 0, 0, 0, 1], np.float64) / 8
    s = np.full(8, 1 / 8)
    # most distances are 0: the median heuristics fall back to the mean distances,
    # 7 of the 28 pairs at 1/8 (loc) and at 1e-30 / 8 (targets)
    kw = {"bandwidth": 7 / 8 / 28, "target_bandwidth": 7e-30 / 8 / 28}
    y32, m32, s32 = (a.astype(_dtype()) for a in (y, m, s))
    uq, ul, *_ = _reference(y32, m32, s32, **kw)
    y, m, s = y32, m32, s32
    with host_disabled():
        got_uq = float(reg.kernel_calibration_error(y, m, s, **kw))
        got_ul = float(reg.kernel_calibration_error(y, m, s, estimator="linear", **kw))
        test = reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=0, num_samples=9)
    np.testing.assert_allclose(float(test.target_bandwidth), kw["target_bandwidth"], rtol=1e-6)
    np.testing.assert_allclose(float(test.bandwidth), kw["bandwidth"], rtol=1e-6)
    np.testing.assert_allclose(got_uq, uq, rtol=RTOL, atol=TOL)
    np.testing.assert_allclose(got_ul, ul, rtol=RTOL, atol=TOL)
    assert all(np.isfinite(float(v)) for v in test)


def test_linear_terms_keep_their_precision_when_they_nearly_cancel():
    # y = loc = 0, scale = 1/8, l = nu = 1 (every distance 0): each term is
    # 1 - 2 (1 + 1/64)^(-1/2) + (1 + 2/64)^(-1/2) = 1.76e-4, four values near 1
    # that cancel; the kernel (host path off) keeps float32's relative precision of
    # the differences from 1 (it lost 6e-4 of the value before). Reference: the closed
    # form in Python floats.
    want = 1 - 2 / math.sqrt(1 + 1 / 64) + 1 / math.sqrt(1 + 2 / 64)
    y, m, s = np.zeros(8, _dtype()), np.zeros(8, _dtype()), np.full(8, 1 / 8, _dtype())
    with host_disabled():
        got = reg.kernel_calibration_test(y, m, s)
    assert float(got.bandwidth) == float(got.target_bandwidth) == 1.0
    # ~3 ulps of each of the three differences (<= 0.016) over the 1.76e-4 they leave
    np.testing.assert_allclose(float(got.statistic), want, rtol=1e-9 if X64 else 2e-5)
# --------------------------------------------------------------------------- host path
# Concrete CPU inputs of the linear estimator take a NumPy twin (bayescal._src.host):
# the kernel's median heuristic in the inputs' dtype, the terms in float64. Compared
# with the kernel path (host.disabled()) as tests/test_host_path.py compares twins.
def _host_data(n, seed):
    """Overdispersed normal predictives as numpy float64 (the host paths' inputs)."""
    r = np.random.default_rng(seed)
    m = r.normal(size=n)
    s = r.uniform(0.5, 2, size=n)
    return m + 1.3 * s * r.normal(size=n), m, s


@pytest.mark.parametrize("n", [4, 5, 300, 777, 5000])
@pytest.mark.parametrize("bandwidths", [{}, {"bandwidth": 0.7, "target_bandwidth": 2}])
def test_host_linear_equals_the_kernel(n, bandwidths):
    from tests.test_host_path import assert_same, assert_same_test, both

    y, m, s = _host_data(n, n)
    got, want, answered = both(lambda: reg.kernel_calibration_test(y, m, s, **bandwidths))
    assert answered == [True]
    assert_same_test(got, want)
    # the median heuristic in the kernel's arithmetic: the same bandwidths, up to the
    # last bit of a hypot that XLA may compute with an FMA or without
    ulp = 2 * np.finfo(got[0].bandwidth.dtype).eps
    np.testing.assert_allclose(float(got[0].bandwidth), float(want[0].bandwidth), rtol=ulp)
    assert float(got[0].target_bandwidth) == float(want[0].target_bandwidth)
    got, want, answered = both(
        lambda: reg.kernel_calibration_error(y, m, s, estimator="linear", **bandwidths)
    )
    assert answered == [True]
    assert_same(got, want)


def test_host_linear_leaves_the_rest_to_the_kernel():
    from tests.test_host_path import both

    y, m, s = [0.3, -1.2, 2.1, 0.4, -0.5], [0.0, -1.0, 1.5, 0.5, 0.0], [0.5] * 5
    bad = [
        ((y[:3], m[:3], s[:3]), {}),  # fewer than two pairs
        ((y, m, [0.5, 0.5, 0.0, 0.5, 0.5]), {}),
        (([0.3, np.nan, 2.1, 0.4, -0.5], m, s), {}),
        ((y, m[:4], s), {}),
        ((y, m, s), {"bandwidth": 0.0}),
        ((y, m, s), {"target_bandwidth": True}),
        ((y, m, s), {"estimator": "quadratic"}),
        ((y, m, s), {"method": "wild"}),  # the linear test draws nothing, yet checks it
    ]
    for args, kwargs in bad:
        got, want, answered = both(
            lambda args=args, kwargs=kwargs: reg.kernel_calibration_test(*args, **kwargs)
        )
        assert want[1] is not None, "not a bad input"
        assert got[1] == want[1]
        assert not any(answered)
    # bad options of the unbiased test: the public function's checks speak
    for kwargs in ({"method": "wild"}, {"num_samples": 0}, {"key": None}):
        opts = {"estimator": "unbiased", "key": 0, "num_samples": 9, **kwargs}
        got, want, answered = both(lambda o=opts: reg.kernel_calibration_test(y, m, s, **o))
        assert want[1] is not None and got[1] == want[1]
        assert not any(answered)


# The quadratic estimator and the unbiased tests take the host's median heuristics
# (and the bootstrap's counts, drawn as the kernel draws them) and the kernel's pair
# sums: equal to the kernel path (host.disabled()).
@pytest.mark.parametrize("n", [2, 7, 300, 5000])
@pytest.mark.parametrize("bandwidths", [{}, {"bandwidth": 0.7, "target_bandwidth": 2}])
def test_host_unbiased_equals_the_kernel(n, bandwidths):
    from tests.test_host_path import assert_same, assert_same_rank, both

    y, m, s = _host_data(n, n + 1)
    got, want, answered = both(lambda: reg.kernel_calibration_error(y, m, s, **bandwidths))
    assert answered == [True]
    assert_same(got, want)
    for method in ("bootstrap", "consistency"):
        got, want, answered = both(
            lambda meth=method: reg.kernel_calibration_test(
                y, m, s, estimator="unbiased", key=3, num_samples=19, method=meth,
                **bandwidths,
            )
        )
        assert answered == [True]
        assert_same(got, want)
        # the same resamples: the same rank of the statistic among them
        assert_same_rank(got[0].p_value, want[0].p_value, 19)


def test_host_bootstrap_of_several_passes_equals_the_kernel():
    """600 resamples: two passes of the host program, as the kernel's two passes."""
    from tests.test_host_path import assert_same, assert_same_rank, both

    y, m, s = _host_data(300, 8)
    got, want, answered = both(
        lambda: reg.kernel_calibration_test(
            y, m, s, estimator="unbiased", key=6, num_samples=600, method="bootstrap"
        )
    )
    assert answered == [True]
    assert_same(got, want)
    assert_same_rank(got[0].p_value, want[0].p_value, 600)


# ----------------------------------------------------------------- bootstrap test
def _h_matrix(y, m, s, nu, ell):
    n = len(y)
    return np.array(
        [[_ref_h(y[i], m[i], s[i], y[j], m[j], s[j], nu, ell) for j in range(n)] for i in range(n)]
    )


@pytest.mark.parametrize("n,num_samples", [(2, 5), (13, 7), (40, 30), (40, 600)])
def test_bootstrap_statistics_equal_calibration_tests_jl_loops(n, num_samples):
    """The bootstrap of CalibrationTests.jl's ``AsymptoticSKCETest`` (Widmann et al.;
    ``estimate_statistic`` and ``bootstrap_ccdf`` in src/skce/asymptotic.jl, v0.6):
    the statistic ``n/(n-1) SKCE_uq - SKCE_b`` and, per resample of indices ``I``, the
    mean of ``h`` over its pairs ``a < b`` less twice the mean of ``h(x_Ia, x_k)`` over
    all ``a, k``; written out with the resampled indices in float64, against the
    kernel's matrix products on the counts of the same indices. 600 resamples: two
    passes of the pair values."""
    from bayescal._src import kernel_calibration as kc

    y, m, s = (a.astype(np.float64) for a in _data(n, 40 + n, factor=0.7))
    nu, ell = 0.8, 1.1
    H = _h_matrix(y, m, s, nu, ell)
    key = jax.random.key(5)
    dt = _dtype()
    args = tuple(jnp.asarray(a, dt) for a in (y, m, s))
    w = jnp.ones(n, dt)
    rows = K._rows(*args, jnp.asarray(ell, dt), jnp.asarray(nu, dt))
    uq, stat, straps, _ = jax.jit(
        lambda r, w: kc.bootstrap_statistics(
            K._h_tile, r, K._h_rows(r, r), w, key, num_samples
        )
    )(rows, w)
    # the counts the kernel drew, pass by pass, turned back into indices
    counts = np.asarray(kc.bootstrap_counts_of_passes(key, w, num_samples))
    assert (counts.sum(axis=0) == n).all()
    ref_uq = (H.sum() - np.trace(H)) / (n * (n - 1))
    ref_stat = n / (n - 1) * ref_uq - H.sum() / n**2
    ref = []
    for b in range(num_samples):
        idx = np.repeat(np.arange(n), counts[:, b].astype(int))
        sub = H[np.ix_(idx, idx)]
        meanij = (sub.sum() - np.trace(sub)) / (n * (n - 1))
        meanik = H[idx].mean()
        ref.append(meanij - 2 * meanik)
    scale = np.abs(H).mean()
    np.testing.assert_allclose(float(uq), ref_uq, rtol=RTOL, atol=TOL * scale)
    np.testing.assert_allclose(float(stat), ref_stat, rtol=RTOL, atol=TOL * scale)
    np.testing.assert_allclose(np.asarray(straps), ref, rtol=RTOL, atol=TOL * scale)
    t = K._test_kernel(
        key, *args, w, nu, ell, estimator="unbiased", num_samples=num_samples,
        method="bootstrap",
    )
    p_ref = (1 + np.sum(np.asarray(straps) >= float(stat))) / (1 + num_samples)
    assert float(t.p_value) == pytest.approx(p_ref, rel=1e-6)


def test_host_counts_equal_the_kernel_draws():
    """The host twins' bootstrap counts (bayescal._src.host.bootstrap_counts, drawn
    for the bucket of n) equal ``kernel_calibration.bootstrap_counts_of_passes`` of the
    same key on the unpadded weights, bit for bit: every resample has n draws of the
    n real observations, whatever the padding."""
    from bayescal._src import host
    from bayescal._src import kernel_calibration as kc
    from bayescal._src.bucketing import bucket_size

    dt = _dtype()
    key = jax.random.key(7)
    for n, b in ((10, 3), (1000, 600), (1025, 7)):
        got = host.bootstrap_counts(key, n, b, dt)
        assert got.shape == (n, b) and bucket_size(n) > n
        assert (got.sum(axis=0) == n).all()
        if jax.config.jax_threefry_partitionable:  # draws depend on the index only
            want = np.asarray(kc.bootstrap_counts_of_passes(key, jnp.ones(n, dt), b))
            np.testing.assert_array_equal(got, want)
    # the twin's draws are the kernel's, any key and PRNG configuration: equal p-values
    y, m, s = _data(300, 3)
    for k in (0, jax.random.key(11)):
        kw = dict(estimator="unbiased", key=k, num_samples=50, method="bootstrap")
        with host.disabled():
            want = reg.kernel_calibration_test(y, m, s, **kw)
        got = reg.kernel_calibration_test(y, m, s, **kw)
        assert float(got.p_value) == float(want.p_value)  # the same draws
        # a difference of float32 sums added in other orders: not the draws' concern
        np.testing.assert_allclose(float(got.statistic), float(want.statistic), rtol=1e-3)


def test_auto_method_is_consistency_while_cheap():
    y, m, s = _data(60, 12)
    auto = reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=1, num_samples=99)
    cons = reg.kernel_calibration_test(
        y, m, s, estimator="unbiased", key=1, num_samples=99, method="consistency"
    )
    assert float(auto.p_value) == float(cons.p_value)
    assert 99 * 60**2 <= K.AUTO_BUDGET
    y, m, s = _data(1200, 12)  # 99 * 1200^2 > 2^27
    auto = reg.kernel_calibration_test(y, m, s, estimator="unbiased", key=1, num_samples=99)
    boot = reg.kernel_calibration_test(
        y, m, s, estimator="unbiased", key=1, num_samples=99, method="bootstrap"
    )
    assert float(auto.p_value) == float(boot.p_value)
    assert 99 * 1200**2 > K.AUTO_BUDGET
