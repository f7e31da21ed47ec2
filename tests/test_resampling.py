"""The resampling engine, the bands and the regression uncertainty helpers.

References: numpy resampling with the engine's own index sets, scipy.stats.binom.ppf
for binomial quantiles, scipy.optimize.isotonic_regression on tie-aggregated data for
CORP refits, the Dirichlet(1, ..., 1) moments, and Monte Carlo tolerances derived from
the binomial standard deviation of simulated rates (each stated where used).
"""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from bayescal import core
from bayescal import regression as reg
from bayescal._src.bands import (
    _corp_refit,
    _tie_structure,
    cell_draws,
    ecdf_band_kernel,
    simulate_ecdf_counts,
)
from bayescal._src.binning import count_at_or_below
from tests import _kernels as kernels
from tests.conftest import X64

FLOAT = jnp.float64 if X64 else jnp.float32


def _mean(x):
    return jnp.mean(x)


def _weighted_mean(x, weights):
    return jnp.sum(weights * x) / jnp.sum(weights)


def _two_array_metric(x, y):
    # an array-valued metric of two arrays resampled together (x float, y int labels)
    return jnp.stack([jnp.mean(x * y), jnp.mean(x) - jnp.mean(y)])


@functools.partial(jax.jit, static_argnames=("num_levels",))
def _weighted_mace(u, weights, num_levels=100):
    """MACE with observation weights (for the Bayesian bootstrap through the engine)."""
    levels = jnp.linspace(0.0, 1.0, num_levels, dtype=u.dtype)
    observed = count_at_or_below(u, num_levels, weights) / jnp.sum(weights)
    return jnp.mean(jnp.abs(observed - levels))


# ------------------------------------------------------------------ the engine


def test_plain_bootstrap_reproduces_numpy_resampling(rng):
    n, b = 37, 64
    x = rng.normal(size=n).astype(np.float64 if X64 else np.float32)
    y = rng.integers(0, 2, n)
    key = jax.random.key(3)
    res = core.bootstrap(key, _two_array_metric, x, y, num_samples=b, level=0.9)
    idx = np.asarray(kernels.bootstrap_indices(key, n, b))
    assert idx.shape == (b, n) and idx.min() >= 0 and idx.max() < n
    ref = np.stack([[np.mean(x[i] * y[i]), np.mean(x[i]) - np.mean(y[i])] for i in idx])
    np.testing.assert_allclose(res.samples, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res.estimate, _two_array_metric(x, y), rtol=1e-6)
    # percentile interval = numpy's linear-interpolation quantiles of the replicates
    lo, hi = np.quantile(np.asarray(res.samples), [0.05, 0.95], axis=0)
    np.testing.assert_allclose(res.lower, lo, rtol=1e-5)
    np.testing.assert_allclose(res.upper, hi, rtol=1e-5)
    assert res.samples.dtype == FLOAT and res.lower.dtype == FLOAT


def test_bayesian_bootstrap_weights_are_dirichlet_and_sum_to_one():
    n, b = 5, 4000
    key = jax.random.key(4)
    w = np.asarray(kernels.bayesian_bootstrap_weights(key, n, b, dtype=FLOAT), np.float64)
    assert w.shape == (b, n) and (w >= 0).all()
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-6)
    # Dirichlet(1^n) marginals are Beta(1, n - 1): mean 1/n. KS at a fixed seed.
    assert scipy.stats.kstest(w[:, 0], scipy.stats.beta(1, n - 1).cdf).pvalue > 0.01
    np.testing.assert_allclose(w.mean(axis=0), 1 / n, atol=4 * np.sqrt(4 / 150 / b))
    # the engine calls metric(*arrays, weights=w_b) with exactly these weights
    x = jnp.arange(n, dtype=FLOAT)
    res = core.bootstrap(key, _weighted_mean, x, num_samples=b, method="bayesian")
    np.testing.assert_allclose(res.samples, w @ np.arange(n), rtol=1e-5)
    np.testing.assert_allclose(res.estimate, 2.0, rtol=1e-6)


def test_array_and_pytree_metrics_get_pointwise_bands(rng):
    u = jnp.asarray(rng.uniform(size=120), FLOAT)
    curve_fn = functools.partial(reg.calibration_curve, num_levels=11)
    res = core.bootstrap(jax.random.key(0), curve_fn, u, num_samples=64)
    assert isinstance(res.estimate, core.CalibrationCurve)
    assert res.samples.observed.shape == (64, 11)
    obs = res.estimate.observed
    assert bool(jnp.all(res.lower.observed <= obs) & jnp.all(obs <= res.upper.observed))

    # NaN replicates are left out of the percentiles, element by element
    def half_nan(x):
        return jnp.stack([jnp.mean(x), jnp.where(jnp.mean(x) > 0.5, jnp.nan, 1.0)])

    res = core.bootstrap(jax.random.key(1), half_nan, u, num_samples=64)
    assert np.isfinite(np.asarray(res.lower)).all() and float(res.upper[1]) == 1.0


def test_engine_jit_equals_eager_vmap_equals_loop_and_batching_is_invisible(rng):
    x = jnp.asarray(rng.normal(size=(3, 37)), FLOAT)
    keys = jax.random.split(jax.random.key(5), 3)
    run = lambda x, k: core.bootstrap(k, _mean, x, num_samples=64)  # noqa: E731
    eager = [run(x[i], keys[i]) for i in range(3)]
    jitted = jax.jit(run)(x[0], keys[0])
    np.testing.assert_allclose(jitted.samples, eager[0].samples, rtol=1e-6, atol=1e-7)
    vm = jax.vmap(run)(x, keys)
    for i in range(3):
        np.testing.assert_allclose(vm.samples[i], eager[i].samples, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(vm.lower[i], eager[i].lower, rtol=1e-6, atol=1e-7)
    # the batch size changes the memory use, not the replicates (same key per replicate)
    small = core.bootstrap(keys[0], _mean, x[0], num_samples=64, batch_size=5)
    np.testing.assert_allclose(small.samples, eager[0].samples, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_null_pvalue_formula_and_uniformity_under_the_null():
    sim = lambda k: jax.random.normal(k, (20,), FLOAT)  # noqa: E731
    res = core.null_pvalue(jax.random.key(6), _mean, 0.2, sim, num_samples=199)
    s = np.asarray(res.samples)
    assert res.pvalue == pytest.approx((1 + (s >= 0.2).sum()) / 200, rel=1e-6)
    # Under the null the p-value is uniform on {1/200, ..., 1}: KS against U(0, 1) at a
    # fixed seed (the grid step 1/200 is far below the KS tolerance at 400 p-values).
    data_keys = jax.random.split(jax.random.key(7), 400)
    observed = jax.vmap(lambda k: _mean(sim(k)))(data_keys)
    keys = jax.random.split(jax.random.key(8), 400)
    pv = jax.vmap(lambda o, k: core.null_pvalue(k, _mean, o, sim, num_samples=199).pvalue)(
        observed, keys
    )
    assert scipy.stats.kstest(np.asarray(pv), "uniform").pvalue > 0.01
    # vmap == loop
    for i in range(3):
        one = core.null_pvalue(keys[i], _mean, observed[i], sim, num_samples=199)
        np.testing.assert_allclose(pv[i], one.pvalue)


@pytest.mark.slow
def test_regression_null_tests_are_uniform_under_calibration_and_detect_miscalibration():
    n, r = 60, 300
    u = jax.random.uniform(jax.random.key(9), (r, n), FLOAT)
    # last row: a 3x too narrow predictive (PIT piled up at 0 and 1)
    narrow = scipy.stats.norm.cdf(3 * scipy.stats.norm.ppf(np.asarray(u[0], np.float64)))
    u = jnp.concatenate([u, jnp.asarray(narrow, FLOAT)[None]])
    keys = jax.random.split(jax.random.key(10), r + 1)
    tests = {
        "area": (
            lambda p, k: reg.miscalibration_area_test(k, p, num_samples=199),
            reg.miscalibration_area,
        ),
        "mace": (
            lambda p, k: reg.calibration_error_test(
                k, p, num_samples=199, kind="interval", num_levels=50
            ),
            lambda p: reg.calibration_error(p, kind="interval", num_levels=50),
        ),
        "ks": (
            lambda p, k: reg.pit_null_test(k, _ks_statistic, p, num_samples=199),
            _ks_statistic,
        ),
    }
    for name, (test, metric) in tests.items():
        res = jax.vmap(test)(u, keys)
        # KS of the p-values against U(0, 1), fixed seed
        pv = np.asarray(res.pvalue)
        assert scipy.stats.kstest(pv[:r], "uniform").pvalue > 0.01, name
        # the too-narrow model gets the smallest possible p-value
        assert pv[r] == pytest.approx(1 / 200), name
        # the observed statistic is the package's metric
        for i in (0, r):
            np.testing.assert_allclose(
                res.statistic[i], metric(u[i]), rtol=1e-5, err_msg=name
            )
    # the grid version of the area test
    grid = reg.miscalibration_area_test(keys[0], u[r], num_samples=19, num_levels=50)
    np.testing.assert_allclose(grid.statistic, reg.miscalibration_area(u[r], num_levels=50))
    assert float(grid.pvalue) == pytest.approx(1 / 20)


def _ks_statistic(p):
    s = jnp.sort(p)
    n = p.shape[0]
    i = jnp.arange(1, n + 1, dtype=p.dtype)
    return jnp.maximum(jnp.max(i / n - s), jnp.max(s - (i - 1) / n))


# ------------------------------------------------------------- binomial bands


def test_binomial_quantile_equals_scipy(rng):
    q = rng.uniform(size=500)
    q[:5] = [0.0, 1.0, 0.025, 0.975, 0.5]
    n = rng.integers(0, 3000, 500).astype(float)
    p = rng.uniform(size=500)
    p[5:10] = [0.0, 1.0, 0.0, 1.0, 1e-9]
    got = kernels.binomial_quantile(q, n, p.astype(np.float64 if X64 else np.float32))
    want = scipy.stats.binom.ppf(q.astype(got.dtype), n, np.asarray(p, got.dtype))
    np.testing.assert_array_equal(np.asarray(got), want)
    # under jit and vmap
    f = jax.jit(jax.vmap(lambda a, b, c: kernels.binomial_quantile(a, b, c)))
    np.testing.assert_array_equal(
        np.asarray(f(q[:50], n[:50], got[:50] * 0 + 0.3)),
        scipy.stats.binom.ppf(q[:50].astype(got.dtype), n[:50], np.asarray(0.3, got.dtype)),
    )


def test_host_binomial_ppf_edge_cases_equal_scipy():
    # The host function behind binomial_quantile, on the arguments the public function
    # rejects too: scipy.stats' rv_discrete.ppf rules (NaN, -1 at q = 0, n at q = 1).
    from bayescal._src.bands import _host_binom_ppf

    q = np.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.5, np.nan, 0.3, 1e-300, 1 - 1e-16, 0.5])
    n = np.array([5.0, -1.0, 7.0, 2.5, -3.0, 4.5, 10.0, 10.0, 0.0, 1e6, 1e6, 12.0])
    p = np.array([0.3, 0.3, 0.4, 0.4, 0.5, 0.5, 1.5, 0.5, 0.5, 0.5, 0.5, np.nan])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(
            _host_binom_ppf(q, n, p), scipy.stats.binom.ppf(q, n, p)
        )


def test_acceptance_intervals_equal_binomial_quantiles_and_cover(rng):
    k = 40
    count = rng.integers(0, 400, k)
    count[:3] = [0, 1, 2]
    expected = rng.uniform(size=k).astype(np.float64 if X64 else np.float32)
    expected[3:6] = [0.0, 1.0, 0.5]
    expected[0] = np.nan  # an empty bin's mean is undefined: allowed, gives NaN
    for level in (0.95, 0.8):
        band = kernels.binomial_acceptance_intervals(expected, count, level=level)
        a = (1 - level) / 2
        lo = scipy.stats.binom.ppf(a, count[1:], expected[1:]) / count[1:]
        hi = scipy.stats.binom.ppf(1 - a, count[1:], expected[1:]) / count[1:]
        np.testing.assert_allclose(band.lower[1:], lo, rtol=1e-6)
        np.testing.assert_allclose(band.upper[1:], hi, rtol=1e-6)
        assert np.isnan(band.lower[0]) and np.isnan(band.upper[0])
        # exact coverage of each interval under calibration is at least `level`
        m = count[1:]
        cov = scipy.stats.binom.cdf(
            np.round(hi * m), m, expected[1:]
        ) - scipy.stats.binom.cdf(np.round(lo * m) - 1, m, expected[1:])
        assert (cov >= level - 1e-9).all()
    assert band.lower.dtype == FLOAT


def _corp_reference(x, y):
    """CORP fit of (x, y): PAV on unique forecasts with counts as weights."""
    ux, inv, cnt = np.unique(x, return_inverse=True, return_counts=True)
    ybar = np.bincount(inv, weights=y) / cnt
    fit = scipy.optimize.isotonic_regression(ybar, weights=cnt).x
    return fit[inv]


@pytest.mark.slow
def test_corp_resamples_pool_ties_and_band_is_their_quantiles(rng):
    n, b = 60, 40
    x = np.round(rng.uniform(0.05, 0.95, n), 1).astype(np.float64 if X64 else np.float32)
    key = jax.random.key(11)
    xs = jnp.sort(jnp.asarray(x))
    group, rank = _tie_structure(xs)
    keys = jax.random.split(key, b)
    fits = np.asarray(jax.vmap(lambda k: _corp_refit(k, xs, group, rank, None))(keys))
    # the same Bernoulli draws as the kernel, refitted by the reference
    ystar = np.asarray(
        jax.vmap(lambda k: jax.random.uniform(k, xs.shape, xs.dtype) < xs)(keys)
    )
    refs = [_corp_reference(np.asarray(xs), y.astype(float)) for y in ystar]
    np.testing.assert_allclose(fits, np.stack(refs), atol=1e-6)
    band = kernels.corp_consistency_band(key, x, num_samples=b, level=0.9)
    np.testing.assert_allclose(band.x, np.sort(x))
    lo, hi = np.quantile(np.stack(refs), [0.05, 0.95], axis=0)
    np.testing.assert_allclose(band.lower, lo, atol=1e-6)
    np.testing.assert_allclose(band.upper, hi, atol=1e-6)
    # evaluated on a grid: the step function of the same resamples
    grid = np.linspace(0, 1, 21)
    gband = kernels.corp_consistency_band(key, x, num_samples=b, level=0.9, grid=grid)
    i = np.clip(
        np.searchsorted(np.sort(x), grid.astype(x.dtype), side="right") - 1, 0, n - 1
    )
    np.testing.assert_allclose(gband.lower, lo[i], atol=1e-6)
    assert gband.lower.dtype == FLOAT


# ----------------------------------------------------------- the PIT ECDF band


def test_pit_ecdf_band_structure_and_adjusted_level():
    n, k = 200, 100
    band, q = ecdf_band_kernel(
        jax.random.key(1),
        jnp.asarray(0.95, FLOAT),
        n=n,
        num_points=k,
        num_samples=2000,
        dtype=FLOAT,
        batch_size=500,
    )
    x, lo, hi = (np.asarray(a) for a in band)
    np.testing.assert_allclose(x, np.linspace(0, 1, k), atol=1e-7)
    assert lo[0] == hi[0] == 0 and lo[-1] == hi[-1] == 1
    assert (lo <= x + 1e-7).all() and (x <= hi + 1e-7).all()
    assert (np.diff(lo) >= 0).all() and (np.diff(hi) >= 0).all()
    # simultaneous: each point is wider than a pointwise 95% interval (tail 0.025),
    # and narrower than Bonferroni's (tail 0.025 / 98)
    q = float(q)
    assert 0.025 / (k - 2) < q < 0.025
    # the band's counts are the binomial quantiles at the adjusted tail q (scipy)
    lo_c, hi_c, z = np.round(lo[1:-1] * n), np.round(hi[1:-1] * n), x[1:-1]
    binom = scipy.stats.binom(n, z.astype(np.float64))
    assert (binom.cdf(lo_c) >= q).all() and (binom.cdf(lo_c - 1) < q).all()
    assert (binom.sf(hi_c - 1) >= q).all() and (binom.sf(hi_c) < q).all()
    np.testing.assert_array_equal(lo_c, binom.ppf(q))


@pytest.mark.slow
@pytest.mark.parametrize("n, k", [(200, 100), (5000, 20)])
def test_pit_ecdf_band_false_alarm_rate_is_nominal(n, k):
    # Säilynoja, Bürkner & Vehtari (2022): a 95% simultaneous band should flag 5% of
    # calibrated data sets. With 10000 simulated data sets the binomial sd of the rate
    # is sqrt(.05 * .95 / 10000) = 0.22%, and the band's own Monte Carlo error (20000
    # simulations: 0.15%) adds to it, 0.26% in all: 4% - 6% is +-3.8 sd. (With 2000
    # sets the sd would be 0.49% and 4% - 6% only +-2 sd.) n = 5000 with 20 points
    # exercises the multinomial simulation of the counts.
    band = reg.pit_ecdf_band(jax.random.key(1), n, num_points=k, num_samples=20_000)

    def flagged(key):
        g = reg.calibration_curve(jax.random.uniform(key, (n,), FLOAT), num_levels=k)
        return jnp.any((g.observed < band.lower) | (g.observed > band.upper))

    keys = jax.random.split(jax.random.key(2), 10_000)
    batch = 10_000 // max(1, n // 40)  # divides 10000 (a remainder would compile twice)
    rate = float(jnp.mean(jax.lax.map(flagged, keys, batch_size=batch)))
    assert 0.04 <= rate <= 0.06, rate


@pytest.mark.slow
def test_multinomial_ecdf_counts_have_binomial_moments():
    # Large n: the counts at the points are drawn as multinomial cell counts. They must
    # still be #{u <= z_j} ~ Bin(n, z_j) with the ECDF's covariance
    # n (min(z_i, z_j) - z_i z_j); means and one covariance within 4 standard errors,
    # variances within 10% (2000 draws: the relative sd of a variance is 3%).
    n, k, b = 5000, 20, 2000
    sim = functools.partial(simulate_ecdf_counts, n=n, num_points=k, dtype=FLOAT)
    c = np.asarray(jax.vmap(sim)(jax.random.split(jax.random.key(12), b)), np.float64)
    z = np.linspace(0, 1, k)
    var = n * z * (1 - z)
    assert c[:, 0].max() == 0 and c[:, -1].min() == n
    np.testing.assert_allclose(c.mean(0), n * z, atol=4 * np.sqrt(var.max() / b))
    np.testing.assert_allclose(c.var(0)[1:-1] / var[1:-1], 1, atol=0.1)
    # sample covariance: standard error sqrt((var_i var_j + cov_ij^2) / b) (normal theory)
    cov, want = np.cov(c[:, 5], c[:, 12])[0, 1], n * (z[5] - z[5] * z[12])
    assert abs(cov - want) < 4 * np.sqrt((var[5] * var[12] + want**2) / b)


@pytest.mark.parametrize("kind", ["multinomial", "gamma", "hypergeometric"])
def test_cell_draws_exact_per_key_and_vmap_equals_loop(kind):
    # Counts sum to n exactly and leave empty cells empty (a hypergeometric draw takes
    # at most the items of a cell); gamma draws are 0 exactly where the weight is 0.
    # Each key's draws depend on that key alone: vmap, jit and a loop agree bit for
    # bit.
    weights = jnp.asarray([0.0, 3.0, 1.0, 0.0, 6.0], FLOAT)
    keys = jax.random.split(jax.random.key(3), 7)
    one = functools.partial(cell_draws, n=6.0, weights=weights, kind=kind)
    loop = np.stack([np.asarray(one(k)) for k in keys])
    np.testing.assert_array_equal(jax.vmap(one)(keys), loop)
    np.testing.assert_array_equal(jax.jit(jax.vmap(one))(keys), loop)
    assert loop.dtype == FLOAT
    assert (loop[:, [0, 3]] == 0).all() and (loop[:, [1, 2, 4]] > 0).any(axis=0).all()
    if kind != "gamma":
        assert (loop.sum(axis=1) == 6).all() and (loop == np.round(loop)).all()
    if kind == "hypergeometric":
        assert (loop <= np.asarray(weights)).all()
    assert not np.array_equal(loop[0], loop[1])  # different keys, different draws


def test_cell_draws_moments():
    # Means and variances of each cell's draws against the distributions' own: within
    # 4 standard errors, those of the mean from the variance, those of the sample
    # variance sqrt((m4 - s^4) / b) from the draws' fourth central moment.
    b, n, m = 4000, 200.0, 4.0
    counts = np.array([1.0, 2.0, 7.0])
    p = counts / counts.sum()
    keys = jax.random.split(jax.random.key(4), b)
    total = counts.sum()
    for kind, size, mean, var in [
        ("multinomial", n, n * p, n * p * (1 - p)),
        ("gamma", n, counts, counts),
        ("hypergeometric", m, m * p, m * p * (1 - p) * (total - m) / (total - 1)),
    ]:
        draws = np.asarray(
            jax.vmap(
                lambda k, kd=kind, s=size: cell_draws(
                    k, s, jnp.asarray(counts, FLOAT), kind=kd
                )
            )(keys),
            np.float64,
        )
        np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4 * np.sqrt(var / b))
        centred = draws - draws.mean(0)
        se_var = np.sqrt(((centred**4).mean(0) - draws.var(0) ** 2) / b)
        np.testing.assert_array_less(np.abs(draws.var(0) - var), 4 * se_var)


@pytest.mark.parametrize("xla", [False, True])
def test_resample_draws_are_bootstrap_multiplicities(xla):
    # kind="resample": how often each of the first n of `size` cells is drawn in n
    # uniform draws. Each count is Binomial(n, 1/n) (mean 1, variance 1 - 1/n), they
    # sum to n, the cells past n stay empty, and a padded array (size > n) gives the
    # first n cells the unpadded counts. Host draws (one device) and jax.random's (as
    # on a mesh, bands.xla_draws) alike; vmap == jit == loop.
    from bayescal._src.bands import xla_draws

    b, n = 3000, 12
    keys = jax.random.split(jax.random.key(9), b)
    jax.clear_caches()  # programs traced before keep their draws
    with xla_draws() if xla else contextlib.nullcontext():

        def draw(size):
            return jax.jit(jax.vmap(
                lambda k: cell_draws(k, n, jnp.ones((size,), FLOAT), kind="resample")
            ))(keys)

        exact, padded = np.asarray(draw(n)), np.asarray(draw(n + 5))
        loop = np.stack([np.asarray(cell_draws(k, n, jnp.ones((n,), FLOAT), kind="resample"))
                         for k in keys[:20]])
    jax.clear_caches()
    np.testing.assert_array_equal(exact[:20], loop)
    np.testing.assert_array_equal(padded[:, :n], exact)
    assert (padded[:, n:] == 0).all() and (exact.sum(axis=1) == n).all()
    assert (exact == np.round(exact)).all()
    var = 1 - 1 / n
    np.testing.assert_array_less(np.abs(exact.mean(0) - 1), 4 * np.sqrt(var / b))
    centred = exact - exact.mean(0)
    se_var = np.sqrt(((centred**4).mean(0) - exact.var(0) ** 2) / b)
    np.testing.assert_array_less(np.abs(exact.var(0) - var), 4 * se_var)


def test_multinomial_by_conditional_binomials_has_multinomial_moments():
    # JAX before 0.5 has no jax.random.multinomial: on a mesh, cell_draws draws the
    # counts as conditional binomials. They sum to n, leave empty cells empty, and have
    # the multinomial means n p and variances n p (1 - p), within 4 standard errors
    # (those of the sample variance from the fourth central moment).
    from bayescal._src.bands import _multinomial_by_binomials

    b, n = 4000, 50.0
    p = np.array([0.1, 0.0, 0.3, 0.6])
    keys = jax.random.split(jax.random.key(11), b)
    draws = np.asarray(jax.vmap(
        lambda k: _multinomial_by_binomials(k, n, jnp.asarray(p, FLOAT), FLOAT)
    )(keys), np.float64)
    assert (draws.sum(axis=1) == n).all() and (draws[:, 1] == 0).all()
    mean, var = n * p, n * p * (1 - p)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4 * np.sqrt(var / b) + 1e-9)
    centred = draws - draws.mean(0)
    se_var = np.sqrt(((centred**4).mean(0) - draws.var(0) ** 2) / b)
    np.testing.assert_array_less(np.abs(draws.var(0) - var), 4 * se_var + 1e-9)


# --------------------------------------------------- regression bootstrap helpers


def _shifted_pit(key, n, delta=0.3):
    # PIT of N(0, 1) predictives for data from N(delta, 1): G(p) = Phi(Phi^-1(p) - delta)
    return jax.scipy.stats.norm.cdf(jax.random.normal(key, (n,), FLOAT) + delta)


def _true_mace(delta=0.3, num_levels=100):
    p = np.linspace(0, 1, num_levels)
    return np.mean(np.abs(scipy.stats.norm.cdf(scipy.stats.norm.ppf(p) - delta) - p))


@pytest.mark.slow
def test_true_mace_from_a_very_large_sample():
    # the 'true value' of the coverage tests: the closed form agrees with 4e6 draws
    big = reg.calibration_error(_shifted_pit(jax.random.key(13), 4_000_000))
    assert abs(float(big) - _true_mace()) < 5e-4


@pytest.mark.slow
@pytest.mark.parametrize("method", ["plain", "bayesian"])
def test_bootstrap_mace_intervals_cover_at_the_nominal_rate(method):
    # 300 data sets of n = 300 from a shifted model (MACE ~ 0.083, well away from 0,
    # where the estimator's upward bias is negligible). With 300 replications the
    # binomial sd of the coverage is sqrt(.95 * .05 / 300) = 1.26%: accept
    # 0.95 +- 3 sd.
    r, n = 300, 300
    data = jax.vmap(lambda k: _shifted_pit(k, n))(jax.random.split(jax.random.key(14), r))
    keys = jax.random.split(jax.random.key(15), r)
    true = _true_mace()
    res = jax.lax.map(
        lambda a: reg.bootstrap_calibration_error(
            a[1], a[0], method=method, num_samples=500, interval="percentile"
        ),
        (data, keys),
    )
    cover = np.mean((np.asarray(res.lower) <= true) & (true <= np.asarray(res.upper)))
    assert 0.912 <= cover <= 0.988, cover
    # the default (projection) interval covers at least as often as its ball (>= 95%
    # asymptotically; conservative away from 0): only the lower bound applies
    res = jax.lax.map(
        lambda a: reg.bootstrap_calibration_error(
            a[1], a[0], method=method, num_samples=500
        ),
        (data, keys),
    )
    cover = np.mean((np.asarray(res.lower) <= true) & (true <= np.asarray(res.upper)))
    assert cover >= 0.912, cover
    # the generic engine with the public metric, resampling indices
    if method == "plain":
        res = jax.lax.map(
            lambda a: core.bootstrap(a[1], reg.calibration_error, a[0], num_samples=500),
            (data, keys),
        )
        cover = np.mean((np.asarray(res.lower) <= true) & (true <= np.asarray(res.upper)))
        assert 0.912 <= cover <= 0.988, cover


def _power_pit_error(a, num_levels):
    # U^a has CDF x^(1/a): the population MACE at the levels, exactly (a = 1: 0)
    z = np.linspace(0.0, 1.0, num_levels)
    return float(np.mean(np.abs(z ** (1.0 / a) - z)))


@pytest.mark.parametrize("a", [1.0, 1.1, 1.3])
def test_bootstrap_error_interval_covers_calibrated_and_miscalibrated(a):
    # Issue 37.7: the percentile interval of MACE lies above 0, so it covered the
    # population error of a calibrated model 0/200 times. The default interval (the
    # projection of the bootstrap ball, which reaches 0) must cover the population
    # MACE of PIT values U^a (CDF x^(1/a), exact) at the nominal 95% for a calibrated
    # model (a = 1) and miscalibrated ones alike. 120 data sets of n = 500 (numpy
    # seed 5): the count of covering intervals must reach the 0.1% quantile of
    # Binomial(120, 0.95) (scipy.stats.binom.ppf), i.e. a level-0.001 test of
    # coverage >= 95%. (benchmarks/sim_bootstrap_coverage.py: 200 x N = 2000.)
    reps, n, levels = 120, 500, 50
    data = (np.random.default_rng(5).uniform(size=(reps, n)) ** a).astype(FLOAT)
    keys = jax.random.split(jax.random.key(21), reps)
    true = _power_pit_error(a, levels)
    res = jax.lax.map(
        lambda x: reg.bootstrap_calibration_error(
            x[0], x[1], num_samples=250, num_levels=levels
        ),
        (keys, data),
    )
    lower, upper = np.asarray(res.lower, float), np.asarray(res.upper, float)
    covered = int(np.sum((lower <= true) & (true <= upper)))
    assert covered >= scipy.stats.binom.ppf(0.001, reps, 0.95), covered
    assert (lower >= 0).all() and (lower <= np.asarray(res.estimate)).all()
    if a == 1.0:
        # calibrated: the lower end is exactly 0 as often as the interval covers
        assert int(np.sum(lower == 0)) == covered
    if a == 1.3:
        # MACE 0.065, far beyond the noise (~0.02 at n = 500): the interval excludes 0
        assert (lower > 0).all()


def test_bootstrap_error_interval_choices_against_numpy():
    # Reference: numpy ECDFs of the engine's own resampled index sets (small n draws
    # per observation with bootstrap_indices of the same key), then numpy quantiles:
    # "percentile" = the (1 -+ level)/2 quantiles of the replicated errors,
    # "projection" = [max(0, est - c), est + c], c the level quantile of the
    # replicated curves' distance to the observed curve (same norm).
    n, b, levels_n = 300, 200, 20
    u = np.random.default_rng(7).uniform(size=n).astype(FLOAT)
    key = jax.random.key(3)
    levels = np.linspace(0, 1, levels_n)
    idx = np.asarray(kernels.bootstrap_indices(key, n, b))
    w = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
    curves = _numpy_curves(u.astype(float), levels, w)
    observed = (u.astype(float)[:, None] <= levels).mean(axis=0)
    for norm, f in [
        ("l1", lambda d: np.abs(d).mean(-1)),
        ("l2", lambda d: np.sqrt((d**2).mean(-1))),
        ("max", lambda d: np.abs(d).max(-1)),
    ]:
        est, errors, dist = f(observed - levels), f(curves - levels), f(curves - observed)
        for level in (0.95, 0.8):
            pct = reg.bootstrap_calibration_error(
                key,
                u,
                num_samples=b,
                num_levels=levels_n,
                norm=norm,
                level=level,
                interval="percentile",
            )
            proj = reg.bootstrap_calibration_error(
                key, u, num_samples=b, num_levels=levels_n, norm=norm, level=level
            )
            np.testing.assert_allclose(proj.samples, errors, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(pct.samples, proj.samples)
            lo, hi = np.quantile(errors, [(1 - level) / 2, (1 + level) / 2])
            np.testing.assert_allclose([pct.lower, pct.upper], [lo, hi], atol=1e-6)
            c = np.quantile(dist, level)
            np.testing.assert_allclose(
                [proj.lower, proj.upper], [max(0.0, est - c), est + c], atol=1e-6
            )
    with pytest.raises(ValueError, match="interval must be one of"):
        reg.bootstrap_calibration_error(key, u, interval="bca")


def _numpy_curves(u, levels, weights):
    """Weighted ECDFs of u at the levels, one row per weight vector (reference)."""
    below = u[None, :, None] <= levels[None, None, :]
    return np.einsum("bn,bnl->bl", weights, below) / weights.sum(axis=1, keepdims=True)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["plain", "bayesian"])
def test_count_bootstrap_small_n_reproduces_the_engine_draws(method):
    # For small n, bootstrap_calibration_error draws per observation with the engine's
    # own keys: replicate b uses bootstrap_indices / bayesian_bootstrap_weights of
    # split(key, B)[b]. Reference: numpy ECDFs of the resampled / weighted data.
    n, b = 300, 200
    u = _shifted_pit(jax.random.key(16), n)
    key = jax.random.key(17)
    fast = reg.bootstrap_calibration_error(key, u, method=method, num_samples=b)
    levels = np.asarray(reg.calibration_curve(u).expected)
    if method == "plain":
        idx = np.asarray(kernels.bootstrap_indices(key, n, b))
        w = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
    else:
        w = np.asarray(kernels.bayesian_bootstrap_weights(key, n, b, dtype=FLOAT), float)
    ref = np.abs(_numpy_curves(np.asarray(u), levels, w) - levels).mean(axis=1)
    np.testing.assert_allclose(fast.samples, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fast.estimate, reg.calibration_error(u), rtol=1e-6)
    curve = reg.bootstrap_calibration_curve(key, u, method=method, num_samples=b)
    np.testing.assert_allclose(curve.observed, reg.calibration_curve(u).observed)
    lo, hi = np.quantile(_numpy_curves(np.asarray(u), levels, w), [0.025, 0.975], axis=0)
    np.testing.assert_allclose(curve.lower, lo, atol=1e-6)
    np.testing.assert_allclose(curve.upper, hi, atol=1e-6)
    assert curve.lower.dtype == FLOAT and fast.samples.dtype == FLOAT


@pytest.mark.slow
@pytest.mark.parametrize("method", ["plain", "bayesian"])
def test_count_bootstrap_large_n_has_the_engine_distribution(method):
    # For n = 5000 > 40 * 100 levels, bootstrap_calibration_error draws per level cell
    # (multinomial or Dirichlet(counts) draws): the same distribution as the engine
    # resampling observations. Two-sample KS at a fixed seed, 500 replicates each.
    n, b = 5000, 500
    u = _shifted_pit(jax.random.key(16), n)
    fast = reg.bootstrap_calibration_error(
        jax.random.key(17), u, method=method, num_samples=b
    )
    metric = reg.calibration_error if method == "plain" else _weighted_mace
    ref = core.bootstrap(jax.random.key(18), metric, u, method=method, num_samples=b)
    np.testing.assert_allclose(fast.estimate, ref.estimate, rtol=1e-5)
    ks = scipy.stats.ks_2samp(np.asarray(fast.samples), np.asarray(ref.samples))
    assert ks.pvalue > 0.001, ks
    curve = reg.bootstrap_calibration_curve(
        jax.random.key(17), u, method=method, num_samples=b
    )
    np.testing.assert_allclose(curve.observed, reg.calibration_curve(u).observed)
    assert bool(jnp.all(curve.lower <= curve.upper))


# ------------------------------------------------------------------ bad input


KEY = jax.random.key(0)
U = np.linspace(0.01, 0.99, 20)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: core.bootstrap(KEY, _mean, U, level=1.5),
            ValueError,
            "level must lie strictly between 0 and 1",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, level=0.0),
            ValueError,
            "level must lie strictly",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, level="95%"),
            TypeError,
            "level must be a float",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, num_samples=0),
            ValueError,
            "num_samples must be an int >= 1",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, num_samples=10.0),
            TypeError,
            "num_samples must be an int",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, method="bca"),
            ValueError,
            "method must be one of 'plain', 'bayesian'",
        ),
        (lambda: core.bootstrap(None, _mean, U), TypeError, "key is required"),
        (lambda: core.bootstrap(0.5, _mean, U), TypeError, "key must be a PRNG key"),
        (
            lambda: core.bootstrap(jax.random.split(KEY, 3), _mean, U),
            TypeError,
            "single PRNG key",
        ),
        (
            lambda: core.bootstrap(KEY, "mean", U),
            TypeError,
            "metric must be a callable",
        ),
        (lambda: core.bootstrap(KEY, _mean), TypeError, "at least one data array"),
        (
            lambda: core.bootstrap(KEY, _mean, U, U[:5]),
            ValueError,
            "arrays\\[1\\] has 5 observations",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, 1.0),
            ValueError,
            "arrays\\[0\\] is a scalar",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, batch_size=0),
            ValueError,
            "batch_size must be an int >= 1",
        ),
        (
            lambda: core.bootstrap(KEY, _mean, U, method="bayesian"),
            TypeError,
            "does not take them",
        ),
        (
            lambda: kernels.bayesian_bootstrap_weights(KEY, 5, 3, dtype=jnp.int32),
            TypeError,
            "dtype must be a float",
        ),
        (lambda: kernels.bootstrap_indices(KEY, 0, 3), ValueError, "n must be an int >= 1"),
        (
            lambda: core.null_pvalue(KEY, _mean, 0.1, None),
            TypeError,
            "simulate must be a callable",
        ),
        (
            lambda: core.null_pvalue(KEY, _mean, np.nan, _mean),
            ValueError,
            "observed contains 1 NaN",
        ),
        (
            lambda: kernels.binomial_quantile(1.5, 10, 0.5),
            ValueError,
            "q must lie in \\[0, 1\\]",
        ),
        (
            lambda: kernels.binomial_quantile(0.5, 10.5, 0.5),
            ValueError,
            "n must hold nonnegative whole numbers",
        ),
        (
            lambda: kernels.binomial_quantile(0.5, 10, -0.1),
            ValueError,
            "p must lie in \\[0, 1\\]",
        ),
        (
            lambda: kernels.binomial_quantile([0.5, 0.6], 10, [0.1, 0.2, 0.3]),
            ValueError,
            "must broadcast together",
        ),
        (
            lambda: kernels.binomial_acceptance_intervals([0.2, 1.2], [3, 4]),
            ValueError,
            "expected must lie in \\[0, 1\\]",
        ),
        (
            lambda: kernels.binomial_acceptance_intervals([0.2, 0.5], [3]),
            ValueError,
            "count has shape",
        ),
        (
            lambda: kernels.binomial_acceptance_intervals([0.2, 0.5], [3, -1]),
            ValueError,
            "count must hold nonnegative",
        ),
        (
            lambda: kernels.binomial_acceptance_intervals([0.2], [3], level=1),
            ValueError,
            "level must lie strictly",
        ),
        (
            lambda: kernels.corp_consistency_band(KEY, [0.2, 1.1]),
            ValueError,
            "y_prob must lie in \\[0, 1\\]",
        ),
        (
            lambda: kernels.corp_consistency_band(KEY, [0.2, 0.5], grid=[0.5, 0.2]),
            ValueError,
            "grid must be sorted",
        ),
        (lambda: reg.pit_ecdf_band(0, 0), ValueError, "n must be an int >= 1"),
        (
            lambda: reg.pit_ecdf_band(0, 10, num_points=2),
            ValueError,
            "num_points must be an int >= 3",
        ),
        (lambda: reg.pit_ecdf_band(0, 10, level=95), ValueError, "level must lie strictly"),
        (lambda: reg.pit_ecdf_band("seed", 10), TypeError, "key must be a PRNG key"),
        (
            lambda: reg.bootstrap_calibration_error(KEY, U, norm="l3"),
            ValueError,
            "norm must be one of",
        ),
        (
            lambda: reg.bootstrap_calibration_error(KEY, U, method="wild"),
            ValueError,
            "method must be one of",
        ),
        (
            lambda: reg.bootstrap_calibration_curve(KEY, U + 1),
            ValueError,
            "pit must lie in \\[0, 1\\]",
        ),
        (
            lambda: reg.bootstrap_calibration_curve(KEY, U, num_samples=-3),
            ValueError,
            "num_samples must be an int >= 1",
        ),
        (
            lambda: reg.miscalibration_area_test(KEY, U, kind="two-sided"),
            ValueError,
            "kind must be one of",
        ),
        (
            lambda: reg.calibration_error_test(KEY, U, num_levels=1),
            ValueError,
            "num_levels must be an int >= 2",
        ),
        (
            lambda: reg.pit_null_test(KEY, None, U),
            TypeError,
            "statistic must be a callable",
        ),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_area_null_distribution_is_that_of_sorted_uniforms():
    # The exact-area test simulates sorted uniforms as normalised partial sums of
    # exponential spacings (Renyi; Devroye 1986, ch. V.2) instead of sorting. Two
    # references: the exact mean of the area, integral_0^1 E|G_n(x) - x| dx with
    # n G_n(x) ~ Binomial(n, x) (numerical quadrature of scipy's binomial pmf), and a
    # simulation by sorting NumPy uniforms (two-sample Kolmogorov-Smirnov test).
    from scipy import integrate, stats

    n, b = 40, 4000
    u = np.random.default_rng(0).uniform(size=n)
    res = reg.miscalibration_area_test(jax.random.key(3), u, num_samples=b)
    samples = np.asarray(res.samples, np.float64)
    k = np.arange(n + 1)
    exact_mean = integrate.quad(
        lambda x: np.sum(stats.binom.pmf(k, n, x) * np.abs(k / n - x)), 0, 1, limit=200
    )[0]
    se = samples.std(ddof=1) / np.sqrt(b)
    assert abs(samples.mean() - exact_mean) < 4 * se  # 4 se: fails by chance w.p. 6e-5
    srt = np.sort(np.random.default_rng(1).uniform(size=(b, n)), axis=1)
    knots = np.concatenate([np.zeros((b, 1)), srt, np.ones((b, 1))], axis=1)
    lev = np.arange(n + 1) / n
    lo, hi = knots[:, :-1] - lev, knots[:, 1:] - lev
    same = (lo >= 0) == (hi >= 0)
    ref = np.where(same, (hi - lo) * (np.abs(lo) + np.abs(hi)) / 2, (lo**2 + hi**2) / 2)
    assert stats.ks_2samp(samples, ref.sum(axis=1)).pvalue > 1e-3
