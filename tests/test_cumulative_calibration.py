"""cumulative_calibration_test: Kolmogorov-Smirnov and Kuiper on cumulative differences.

References: MAPIE 1.6 (``mapie.metrics.calibration``: ``kolmogorov_smirnov_*``,
``kuiper_*``, ``cumulative_differences``, ``length_scale``; Arrieta-Ibarra et al. 2022),
the distribution functions of Tygert (2021) that MAPIE evaluates, and the definitions:
integer weights equal repeated rows, tied probabilities have no order. Sizes under
calibration by simulation (fixed seeds, binomial tolerances).
"""

import math

import jax
import jax.numpy as jnp
import mapie.metrics.calibration as mapie  # the reference (test extras)
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayescal.classification import cumulative_calibration_test
from bayescal.classification._tests import brownian_p_values
from bayescal.core import host_path
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
RTOL = 1e-9 if X64 else 2e-5
# MAPIE jitters the scores by up to 1e-8 relative, in its differences too
MAPIE_RTOL = 1e-7 if X64 else 2e-5


@pytest.fixture(params=[True, False], ids=["host", "kernel"])
def path(request):
    with host_path(request.param):
        yield request.param


def _data(n, power=1.0, seed=0):
    r = np.random.default_rng(seed)
    p = r.uniform(0.02, 0.98, n)
    y = (r.uniform(size=n) < p**power).astype(int)
    return y, p.astype(DT)


@pytest.mark.parametrize("n, power, seed", [(300, 1.0, 0), (2000, 1.15, 1), (4000, 0.9, 2)])
def test_statistics_and_p_values_equal_mapie(n, power, seed, path):
    y, p = _data(n, power, seed)
    res = cumulative_calibration_test(y, p)
    p64 = p.astype(np.float64)  # distinct values: MAPIE's 1e-8 jitter keeps their order
    np.testing.assert_allclose(
        res.ks_statistic, mapie.kolmogorov_smirnov_statistic(y, p64), rtol=MAPIE_RTOL
    )
    # Kuiper's range with the path's start C_0 = 0 (MAPIE's range leaves it out; equal
    # where the cumulative differences cross 0)
    c = mapie.cumulative_differences(y, p64)
    rng = (max(c.max(), 0) - min(c.min(), 0)) / mapie.length_scale(p64)
    np.testing.assert_allclose(res.kuiper_statistic, rng, rtol=MAPIE_RTOL)
    if c.min() < 0 < c.max():
        np.testing.assert_allclose(res.kuiper_statistic, mapie.kuiper_statistic(y, p64), rtol=MAPIE_RTOL)
    # MAPIE's p-values are 1 - cdf: exact to ~1e-15 absolute, so compared where >= 1e-6
    ks, ku = float(res.ks_statistic), float(res.kuiper_statistic)
    for stat, got, cdf in ((ks, res.ks_p_value, mapie.kolmogorov_smirnov_cdf),
                           (ku, res.kuiper_p_value, mapie.kuiper_cdf)):
        want = 1 - cdf(stat)
        if want >= 1e-6:
            np.testing.assert_allclose(got, want, rtol=1e-4 if not X64 else 1e-7, atol=2e-13)


def test_p_values_are_the_brownian_tails_on_both_sides_of_one():
    # below x = 1 one minus MAPIE's theta series, from 1 on the erfc series: the same
    # function (1e-13 where both are accurate), and in the far tail the erfc series keeps
    # its relative accuracy where 1 - cdf cannot (checked against the leading terms:
    # 4 Q(x) for max |B|, 4 erfc(x / sqrt 2) - 8 erfc(sqrt 2 x) for the range)
    x = np.array([0.01, 0.3, 0.6, 0.9, 0.999, 1.0, 1.2, 1.7, 2.5, 3.2])
    ks, ku = brownian_p_values(x, x, np)
    want_ks = np.array([1 - mapie.kolmogorov_smirnov_cdf(v) for v in x])
    want_ku = np.array([1 - mapie.kuiper_cdf(v) for v in x])
    np.testing.assert_allclose(ks, want_ks, rtol=1e-12, atol=2e-13)  # 1 - cdf: absolute
    np.testing.assert_allclose(ku, want_ku, rtol=1e-12, atol=2e-13)
    far = np.array([6.0, 9.0, 12.0])
    ks, ku = brownian_p_values(far, far, np)
    q = np.array([math.erfc(v / math.sqrt(2)) / 2 for v in far])
    np.testing.assert_allclose(ks, 4 * q, rtol=1e-12)
    lead = np.array([4 * math.erfc(v / math.sqrt(2)) - 8 * math.erfc(math.sqrt(2) * v) for v in far])
    np.testing.assert_allclose(ku, lead, rtol=1e-12)
    # the kernel's float32 series: the same values to float32 rounding
    grid = np.linspace(0.0, 8.0, 161)
    got = brownian_p_values(jnp.asarray(grid, DT), jnp.asarray(grid, DT), jnp)
    ref = brownian_p_values(grid.astype(DT).astype(np.float64), grid.astype(DT).astype(np.float64), np)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=1e-5 if not X64 else 1e-12, atol=1e-30)
    assert all(np.all(np.diff(np.asarray(b)) <= 0) for b in ref)  # survival functions


@given(st.integers(0, 2**31 - 1), st.integers(20, 200))
def test_ties_have_no_order_and_weights_are_repeats(seed, n):
    # tied probabilities (a coarse grid): any order of the rows gives the same result;
    # integer weights give the result of the repeated rows
    r = np.random.default_rng(seed)
    p = (r.integers(1, 10, n) / 10).astype(DT)
    y = (r.uniform(size=n) < p).astype(int)
    w = r.integers(0, 4, n)
    w[0] = 1
    base = cumulative_calibration_test(y, p, weights=w.astype(DT))
    perm = r.permutation(n)
    shuffled = cumulative_calibration_test(y[perm], p[perm], weights=w[perm].astype(DT))
    rep = cumulative_calibration_test(np.repeat(y, w), np.repeat(p, w))
    for a, b, c in zip(base, shuffled, rep, strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-7)
        np.testing.assert_allclose(a, c, rtol=RTOL, atol=1e-7)


def test_jit_equals_eager_and_vmap_equals_loop():
    ys, ps = zip(*(_data(500, 1.1, s) for s in range(4)), strict=True)
    y, p = np.stack(ys), np.stack(ps)
    eager = [cumulative_calibration_test(y[i], p[i]) for i in range(4)]
    jitted = jax.jit(cumulative_calibration_test)(y[0], p[0])
    mapped = jax.vmap(cumulative_calibration_test)(y, p)
    for k in range(4):
        np.testing.assert_allclose(jitted[k], eager[0][k], rtol=RTOL)
        np.testing.assert_allclose(mapped[k], [e[k] for e in eager], rtol=RTOL)


def test_size_under_calibration_and_power_under_miscalibration():
    # 2000 calibrated data sets of N = 500 (labels drawn from the probabilities): the
    # rejection rate at 5% within 3 binomial standard errors (0.0146) of 0.05 or below
    # (the discrete maxima make the asymptotic test slightly conservative)
    k1, k2 = jax.random.split(jax.random.key(20261129))
    p = jax.random.uniform(k1, (2000, 500), minval=0.01, maxval=0.99)
    y = (jax.random.uniform(k2, p.shape) < p).astype(p.dtype)
    res = jax.jit(jax.vmap(cumulative_calibration_test))(y, p)
    se = math.sqrt(0.05 * 0.95 / 2000)
    for pv in (res.ks_p_value, res.kuiper_p_value):
        rate = float(jnp.mean(pv < 0.05))
        assert 0.05 - 3 * se <= rate <= 0.05 + 3 * se, rate


def test_power_under_miscalibration():
    # labels drawn from p^1.3 (overconfident), N = 2000: both tests reject nearly always
    k1, k2 = jax.random.split(jax.random.key(7))
    p = jax.random.uniform(k1, (200, 2000), minval=0.01, maxval=0.99)
    y = (jax.random.uniform(k2, p.shape) < p**1.3).astype(p.dtype)
    res = jax.jit(jax.vmap(cumulative_calibration_test))(y, p)
    assert float(jnp.mean(res.ks_p_value < 0.05)) > 0.95
    assert float(jnp.mean(res.kuiper_p_value < 0.05)) > 0.95


def test_bad_input_names_the_argument(path):
    with pytest.raises(ValueError, match="y_prob must not all be 0 or 1"):
        cumulative_calibration_test([0, 1, 1], [0.0, 1.0, 1.0])
    assert np.isnan(float(jax.jit(cumulative_calibration_test)(
        jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0])).ks_statistic))
    with pytest.raises(ValueError, match="y_true"):
        cumulative_calibration_test([0, 2, 1], [0.2, 0.5, 0.7])
    with pytest.raises(ValueError, match="y_prob"):
        cumulative_calibration_test([0, 1, 1], [0.2, 1.5, 0.7])
    with pytest.raises(ValueError, match="weights"):
        cumulative_calibration_test([0, 1, 1], [0.2, 0.5, 0.7], weights=[1.0, -1.0, 1.0])
