"""The device-side (accelerator) quantiles and kernels equal the host ones on CPU.

On every platform but CPU, ``by_platform`` picks XLA versions of what runs on the host
on CPU: the binomial quantile (``bands._ppf_callback``), the Student-t quantile
(``families.quantile``), the PAV (``isotonic.device_isotonic``: see
tests/test_isotonic_device.py) and tie pooling (``ties._xla_pool``). Here the device
versions are called directly on CPU and compared with the host versions and scipy on
the same inputs, and public functions are lowered for CUDA (without running them) to
check that their programs hold no host callback.

References: ``scipy.stats.binom.cdf`` / ``ppf`` and ``scipy.special.stdtrit``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats

from bayescal._src import device_quantiles as dq
from bayescal._src import ties
from bayescal._src.bands import _host_binom_ppf
from bayescal._src.sorting import all_platform_branches, by_platform

X64 = bool(jax.config.read("jax_enable_x64"))
DTYPE = np.float64 if X64 else np.float32

_cdf = jax.jit(dq.binomial_cdf)
_ppf = jax.jit(dq.device_binomial_ppf)
_tq = jax.jit(dq.device_t_quantile)

# float32: the largest CDF error measured against scipy was 3e-6 at n = 1e3, 3e-5 at
# 1e4, 2e-4 at 1e5, 4e-4 at 1e6 (n p rounded in float32 and ~sqrt(n) continued
# fraction steps); x64: 2e-14 at 1e3, 5e-13 at 1e6
CDF_TOL = {10: 1e-6, 1000: 1e-5, 10**4: 1e-4, 10**5: 1e-3, 10**6: 2e-3}


def _near_mean(rng, n, size):
    p = rng.uniform(0.001, 0.999, size)
    sd = np.sqrt(n * p * (1 - p))
    k = np.floor(n * p + rng.normal(0, 2, size) * sd).clip(0, n - 1)
    return k, p.astype(DTYPE)


@pytest.mark.parametrize("n", sorted(CDF_TOL))
def test_binomial_cdf_matches_scipy(n):
    rng = np.random.default_rng(n)
    k, p = _near_mean(rng, n, 301)
    got = np.asarray(_cdf(k.astype(DTYPE), np.full(k.shape, n, DTYPE), p))
    ref = scipy.stats.binom.cdf(k, n, p.astype(np.float64))
    tol = 1e-12 if X64 else CDF_TOL[n]
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)


def test_binomial_cdf_edges():
    k = np.array([-1, 0, 3, 5, 6, 2, 2], DTYPE)
    n = np.array([5, 5, 5, 5, 5, 5, 5], DTYPE)
    p = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 1.0], DTYPE)
    got = np.asarray(_cdf(k, n, p))
    ref = scipy.stats.binom.cdf(k, n, p)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def _ppf_inputs(rng, n, size=397):  # an odd size
    p = rng.uniform(0, 1, size).astype(DTYPE)
    q = rng.uniform(0, 1, size).astype(DTYPE)
    p[:3] = [0, 1, 0.5]
    q[3:9] = [0, 1, 1e-7, 1 - 1e-7 if X64 else 0.9999999, 0.5, 0.025]
    return q, np.full(size, n, DTYPE), p


@pytest.mark.parametrize("n", [0, 1, 2, 7, 33, 100])
def test_device_binomial_ppf_equals_host(n):
    q, nn, p = _ppf_inputs(np.random.default_rng(n + 7), n)
    got = np.asarray(_ppf(q, nn, p))
    assert got.dtype == DTYPE
    np.testing.assert_array_equal(got, _host_binom_ppf(q, nn, p))


@pytest.mark.parametrize("n", [1000, 10**4, 10**5, 10**6])
def test_device_binomial_ppf_large_n(n):
    """x64: equal to scipy; float32: the CDF rule holds to the CDF's tolerance (the
    answer is the smallest whole k with scipy's cdf(k) >= q, up to CDF_TOL)."""
    q, nn, p = _ppf_inputs(np.random.default_rng(n), n)
    got = np.asarray(_ppf(q, nn, p))
    assert np.all(got == np.round(got))
    ref = _host_binom_ppf(q, nn, p)
    if X64:
        np.testing.assert_array_equal(got, ref)
    inside = (q > 0) & (q < 1) & (p > 0) & (p < 1)
    k, qq, pp = got[inside], q[inside].astype(np.float64), p[inside].astype(np.float64)
    tol = 0 if X64 else CDF_TOL[n]
    assert np.all(scipy.stats.binom.cdf(k, n, pp) >= qq - tol)
    assert np.all(scipy.stats.binom.cdf(k - 1, n, pp) < qq + tol)


def test_device_binomial_ppf_invalid_and_broadcast():
    half = np.full(4, 0.5, DTYPE)
    n = np.array([-1, 2.5, 4, 4], DTYPE)
    got = np.asarray(_ppf(half, n, np.array([0.5, 0.5, 1.5, np.nan], DTYPE)))
    assert np.isnan(got).all()
    q = np.array([[0.1], [0.9]], DTYPE)
    got = np.asarray(_ppf(q, np.array([5, 50], DTYPE), np.array(0.3, DTYPE)))
    assert got.shape == (2, 2)
    np.testing.assert_array_equal(got, scipy.stats.binom.ppf([[0.1], [0.9]], [5, 50], 0.3))


# float32: relative error of the t quantile against stdtrit, from the bisection on
# float32 betainc (measured <= 2.5e-5; the expansion in 1/df takes over at df >= 200)
T_RTOL = 1e-8 if X64 else 5e-5  # x64: 5e-9 measured at df = 1e7, 2e-13 below 1e3


@pytest.mark.parametrize("df", [0.5, 1.0, 2.5, 5.0, 30.0, 999.0, 1e3, 1e5, 1e7])
def test_device_t_quantile_matches_stdtrit(df):
    rng = np.random.default_rng(int(df * 10))
    tiny = 1e-30 if X64 else 1e-8  # float32: beyond 1e-8 t overflows at df = 0.5
    p = np.concatenate(
        [rng.uniform(0, 1, 201), [tiny, 1e-8, 1e-3, 0.5, 1 - 1e-3, 1 - 1e-7]]
    ).astype(DTYPE)
    got = np.asarray(_tq(p, df))
    ref = scipy.special.stdtrit(df, p.astype(np.float64))
    assert got.dtype == DTYPE
    np.testing.assert_allclose(got, ref, rtol=T_RTOL, atol=T_RTOL * 1e-2)


def test_device_t_quantile_edges():
    got = np.asarray(_tq(np.array([0, 1, 0.5, np.nan, -0.1], DTYPE), 3.0))
    np.testing.assert_array_equal(got[:3], [-np.inf, np.inf, 0.0])
    assert np.isnan(got[3:]).all()


@pytest.mark.parametrize("n", [1, 2, 9, 101, 1000])
def test_xla_tie_pooling_equals_host(n):
    rng = np.random.default_rng(n)
    x = np.round(rng.normal(size=n), 1).astype(DTYPE)  # ties
    y = rng.uniform(size=n).astype(DTYPE)
    w = rng.uniform(0.1, 2, n).astype(DTYPE)
    for weights in (None, w):
        dev = jax.jit(ties._xla_pool)(x, y, weights)
        host = ties._host_pool_padded(x, y, weights)
        m = int(host[5])
        assert int(dev[5]) == m
        np.testing.assert_array_equal(np.asarray(dev[2])[:m], host[2][:m])
        rtol = 1e-13 if X64 else 1e-6
        np.testing.assert_allclose(np.asarray(dev[3])[:m], host[3][:m], rtol=rtol)
        np.testing.assert_allclose(np.asarray(dev[4])[:m], host[4][:m], rtol=rtol)
        # each sorted observation's group is the threshold of its x value
        order, group = np.asarray(dev[0]), np.asarray(dev[1])
        np.testing.assert_array_equal(np.asarray(dev[2])[group], x[order])


def test_by_platform_traces_only_the_cpu_branch_on_cpu():
    # a CPU-only process traces the cpu branch alone; with an accelerator, both
    on_cpu = jax.default_backend() == "cpu"
    calls = []

    def default(v):
        calls.append("default")
        return v

    jax.jit(lambda v: by_platform(v, cpu=lambda u: u + 1, default=default))(jnp.ones(3))
    assert calls == ([] if on_cpu else ["default"])
    calls.clear()
    with all_platform_branches():
        jax.jit(lambda v: by_platform(v, cpu=lambda u: u + 2, default=default))(jnp.ones(3))
    assert calls == ["default"]


def _lowered_text(f, args, platform):
    # JAX >= 0.5 (the min tier, jax 0.4.38, deselects the test: its CUDA lowering from
    # a CPU-only process kept the host branch for some functions; see the Makefile)
    with all_platform_branches():
        traced = jax.jit(f).trace(*args)
    return traced.lower(lowering_platforms=(platform,)).as_text()


def _public_cases():
    from bayescal import classification, core, regression

    rng = np.random.default_rng(0)
    y = jnp.asarray(rng.integers(0, 2, 101), DTYPE)
    p = jnp.asarray(rng.uniform(0.01, 0.99, 101), DTYPE)
    loc = jnp.zeros(101, DTYPE)
    scale = jnp.ones(101, DTYPE)
    cal = regression.fit_sigma_scaling(
        jnp.asarray(rng.standard_t(5, 101), DTYPE), loc, scale, family="student_t", df=5.0
    )
    levels = jnp.asarray([0.05, 0.5, 0.95], DTYPE)
    return {
        "fit_isotonic": (lambda y, p: classification.fit_isotonic(y, p).values, (y, p)),
        "isotonic_regression": (lambda p: core.isotonic_regression(p), (p,)),
        "brier_decomposition": (classification.brier_decomposition, (y, p)),
        "acceptance_intervals": (
            lambda y, p: (
                classification.acceptance_intervals(
                    classification.reliability_curve(y, p)
                ).lower
            ),
            (y, p),
        ),
        "recalibrated_quantiles_t": (
            lambda lv: regression.recalibrated_quantiles(cal, lv, loc=loc, scale=scale),
            (levels,),
        ),
    }


@pytest.mark.parametrize("name", sorted(_public_cases()))
def test_public_functions_lowered_for_cuda_have_no_host_callback(name):
    """Lowered for CUDA (not run: no GPU here) the program holds no host callback;
    lowered for CPU from the same trace it keeps the host branch (the CPU path)."""
    f, args = _public_cases()[name]
    cuda = _lowered_text(f, args, "cuda")
    assert "callback" not in cuda
    assert "callback" in _lowered_text(f, args, "cpu")
