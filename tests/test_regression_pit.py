"""PIT values: references are scipy.stats and direct numpy counting."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st

from bayescal import regression as reg
from tests.conftest import X64, compilations_during

RTOL = 1e-12 if X64 else 1e-5


def test_pit_normal_matches_scipy(rng):
    y, loc, scale = rng.normal(size=200), rng.normal(size=200), rng.uniform(0.1, 3, 200)
    got = reg.pit_normal(y, loc, scale)
    ref = scipy.stats.norm.cdf(y, loc, scale)  # scipy 1.17
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=1e-7 if not X64 else 0)


def test_pit_normal_tail_relative_precision():
    # ndtr keeps relative precision in the lower tail where 1 - Phi(-z) would round to 0
    z = np.array([-8.0, -12.0, -20.0])
    got = np.asarray(reg.pit_normal(jnp.asarray(z), 0.0, 1.0))
    ref = scipy.stats.norm.cdf(z)
    if X64:
        np.testing.assert_allclose(got, ref, rtol=1e-12)
    else:  # float32 underflows below ~1e-38 (z < -13), but is accurate where representable
        np.testing.assert_allclose(got[:1], ref[:1], rtol=1e-4)
        assert np.all(got >= 0)


def test_pit_draws_matches_numpy_fraction(rng):
    draws = rng.normal(size=(37, 50))  # S not a multiple of the scan block
    y = rng.normal(size=50)
    draws[3, :5] = y[:5]  # ties count as <= y
    got = reg.pit_draws(y, draws)
    np.testing.assert_allclose(got, (draws <= y).mean(0), rtol=1e-6)


def test_pit_draws_randomized_between_bounds(rng):
    draws = rng.integers(0, 5, size=(40, 300)).astype(float)
    y = rng.integers(0, 5, size=300).astype(float)
    lo, hi = (draws < y).mean(0), (draws <= y).mean(0)
    u = np.asarray(reg.pit_draws(y, draws, key=jax.random.key(1)))
    assert np.all(u >= lo - 1e-6) and np.all(u <= hi + 1e-6)
    assert np.any((u > lo + 1e-6) & (u < hi - 1e-6))  # really randomized inside the gap
    u2 = np.asarray(reg.pit_draws(y, draws, key=jax.random.key(1)))
    np.testing.assert_array_equal(u, u2)  # same key, same values


def test_randomized_pit_uniform_for_correct_discrete_model():
    # Poisson(3) data, predictive draws from the same Poisson: randomized PIT ~ U(0, 1).
    rng = np.random.default_rng(5)
    n, s = 4000, 400
    y = rng.poisson(3.0, size=n).astype(float)
    draws = rng.poisson(3.0, size=(s, n)).astype(float)
    u = np.asarray(reg.pit_draws(y, draws, key=jax.random.key(0)))
    # Plain PIT is far from uniform for discrete data; randomized PIT passes KS at 1%.
    assert scipy.stats.kstest(u, "uniform").pvalue > 0.01
    assert scipy.stats.kstest((draws <= y).mean(0), "uniform").pvalue < 1e-6


def test_pit_draws_transposed_hint(rng):
    with pytest.raises(ValueError, match="pass draws.T"):
        reg.pit_draws(np.zeros(5), np.zeros((5, 20)))


def test_pit_cdf_with_jax_and_numpyro_distributions(rng):
    import numpyro.distributions as dist

    y = rng.gamma(2.0, 1.5, size=100)
    got = reg.pit_cdf(jnp.asarray(y), dist.Gamma(2.0, 1 / 1.5).cdf)
    np.testing.assert_allclose(
        got, scipy.stats.gamma.cdf(y, 2.0, scale=1.5), rtol=1e-4, atol=1e-6
    )


def test_pit_cdf_bad_callable():
    with pytest.raises(TypeError, match="cdf must be a callable"):
        reg.pit_cdf([1.0], 3.0)
    with pytest.raises(ValueError, match="cdf\\(y_true\\) returned shape"):
        reg.pit_cdf(jnp.ones(3), lambda y: jnp.ones(2))
    with pytest.raises(ValueError, match="cdf\\(y_true\\) must lie in \\[0, 1\\]"):
        reg.pit_cdf(jnp.ones(3), lambda y: 2 * y)


def _normal_cdf_over(loc, scale):
    return lambda t: jax.scipy.stats.norm.cdf(t, loc, scale)


def test_pit_cdf_runs_a_traceable_callable_as_one_reused_program(rng):
    # A CDF closing over per-observation parameters cannot be padded to a bucket; it is
    # traced and compiled as one program, kept under its jaxpr's text: a new lambda of
    # the same form over new values of the same shape compiles nothing.
    n = 777
    y, loc, scale = rng.normal(size=n), rng.normal(size=n), rng.uniform(0.5, 2, n)
    got = reg.pit_cdf(y, _normal_cdf_over(loc, scale))
    np.testing.assert_allclose(  # scipy 1.17's normal CDF
        got, scipy.stats.norm.cdf(y, loc, scale), rtol=RTOL, atol=1e-7 if not X64 else 0
    )
    loc2, scale2 = rng.normal(size=n), rng.uniform(0.5, 2, n)
    again = []
    assert (
        compilations_during(
            lambda: again.append(
                jax.block_until_ready(reg.pit_cdf(y, _normal_cdf_over(loc2, scale2)))
            )
        )
        == 0
    )
    np.testing.assert_allclose(
        again[0],
        scipy.stats.norm.cdf(y, loc2, scale2),
        rtol=RTOL,
        atol=1e-7 if not X64 else 0,
    )
    # the same as the callable called on its own, eagerly, to an ulp: one fused program
    # and a chain of single operations may round differently (XLA's CPU code generation,
    # e.g. with its optimisations off, 8 of the 777 values)
    eps = np.finfo(again[0].dtype).eps
    np.testing.assert_allclose(
        again[0], _normal_cdf_over(loc2, scale2)(jnp.asarray(y)), rtol=2 * eps, atol=0
    )


def test_pit_cdf_callables_that_do_not_trace_are_called_as_they_are(rng):
    y = rng.normal(size=50)
    # NumPy code: scipy's frozen distribution
    got = reg.pit_cdf(y, scipy.stats.norm(0.5, 2.0).cdf)
    np.testing.assert_allclose(got, scipy.stats.norm.cdf(y, 0.5, 2.0), rtol=RTOL, atol=1e-7)

    # a Python branch on the values (not traceable), and a call count
    calls = []

    def branchy(t):
        calls.append(1)
        if float(jnp.max(t)) > 100:
            raise AssertionError("not reached")
        return jax.scipy.stats.norm.cdf(t)

    got = reg.pit_cdf(y, branchy)
    np.testing.assert_allclose(got, scipy.stats.norm.cdf(y), rtol=RTOL, atol=1e-7)
    assert 1 <= len(calls) <= 3  # traced (fails), then called on the values


def test_pit_cdf_programs_are_bounded(rng):
    from bayescal.regression import _pit

    for n in range(3, 3 + _pit._CDF_PROGRAMS_MAX + 5):
        y, loc = rng.normal(size=n), rng.normal(size=n)
        reg.pit_cdf(y, _normal_cdf_over(loc, 1.0 + 0 * loc))
    assert len(_pit._CDF_PROGRAMS) <= _pit._CDF_PROGRAMS_MAX


def test_pit_quantiles_reference_np_interp(rng):
    levels = np.linspace(0.05, 0.95, 19)
    loc, scale = rng.normal(size=80), rng.uniform(0.5, 2, 80)
    q = loc + scale * scipy.stats.norm.ppf(levels)[:, None]
    y = loc + scale * rng.normal(size=80)
    got = np.asarray(reg.pit_quantiles(y, q, levels))
    ref = np.array([np.interp(y[i], q[:, i], levels) for i in range(80)])  # clamps too
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # With many levels the interpolated PIT approaches the exact Normal PIT.
    fine = np.linspace(0.001, 0.999, 999)
    qf = loc + scale * scipy.stats.norm.ppf(fine)[:, None]
    inside = np.abs((y - loc) / scale) < 3
    approx = np.asarray(reg.pit_quantiles(y, qf, fine))[inside]
    np.testing.assert_allclose(
        approx, scipy.stats.norm.cdf(y, loc, scale)[inside], atol=1e-4
    )


def test_pit_quantiles_tails_and_ties():
    q = jnp.array([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [3.0, 3.0]])
    lv = jnp.array([0.1, 0.3, 0.5, 0.9])
    np.testing.assert_allclose(reg.pit_quantiles(jnp.array([-1.0, 5.0]), q, lv), [0.1, 0.9])
    lin = reg.pit_quantiles(jnp.array([-0.25, 4.0]), q, lv, tails="linear")
    np.testing.assert_allclose(lin, [0.05, 1.0], atol=1e-6)
    # y on a repeated quantile: right-continuous CDF, the highest tied level
    np.testing.assert_allclose(
        reg.pit_quantiles(jnp.array([1.0, 2.0]), q, lv), [0.5, 0.7], atol=1e-6
    )


def test_pit_quantiles_rejects_crossing_and_bad_levels():
    q = jnp.array([[1.0], [0.0]])
    with pytest.raises(ValueError, match="nondecreasing along the level axis"):
        reg.pit_quantiles(jnp.array([0.5]), q, jnp.array([0.2, 0.8]))
    with pytest.raises(ValueError, match="levels must be sorted"):
        reg.pit_quantiles(jnp.array([0.5]), jnp.zeros((2, 1)), jnp.array([0.8, 0.2]))
    with pytest.raises(ValueError, match="quantiles has shape"):
        reg.pit_quantiles(jnp.array([0.5]), jnp.zeros((3, 1)), jnp.array([0.2, 0.8]))
    with pytest.raises(ValueError, match="tails must be one of"):
        reg.pit_quantiles(
            jnp.array([0.5]), jnp.zeros((2, 1)), jnp.array([0.2, 0.8]), tails="x"
        )


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: reg.pit_normal([1.0, np.nan], 0.0, 1.0), "y_true contains 1 NaN"),
        (
            lambda: reg.pit_normal([1.0, 2.0], 0.0, [1.0, 0.0]),
            "scale must be strictly positive",
        ),
        (lambda: reg.pit_normal([1.0, 2.0], 0.0, -1.0), "scale must be strictly positive"),
        (lambda: reg.pit_normal([1.0, 2.0], [0.0, 1, 2], 1.0), "loc has shape"),
        (lambda: reg.pit_normal([], 0.0, 1.0), "y_true is empty"),
        (lambda: reg.pit_normal([1.0], np.inf, 1.0), "loc contains 0 NaN and 1 infinite"),
        (lambda: reg.pit_draws([1.0], [[np.nan]]), "draws contains 1 NaN"),
        (lambda: reg.pit_draws([1.0, 2.0], np.zeros((4, 3))), "draws has shape"),
        (lambda: reg.pit_draws([1.0], np.zeros(3)), "draws must be 2-D"),
    ],
)
def test_pit_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_pit_jit_equals_eager_and_vmap_equals_loop(rng):
    y = jnp.asarray(rng.normal(size=(4, 30)))
    loc = jnp.asarray(rng.normal(size=(4, 30)))
    scale = jnp.asarray(rng.uniform(0.5, 2, (4, 30)))
    draws = jnp.asarray(rng.normal(size=(4, 20, 30)))
    eager = reg.pit_normal(y[0], loc[0], scale[0])
    np.testing.assert_allclose(
        jax.jit(reg.pit_normal)(y[0], loc[0], scale[0]), eager, rtol=1e-6
    )
    loop = jnp.stack([reg.pit_normal(y[i], loc[i], scale[i]) for i in range(4)])
    np.testing.assert_allclose(jax.vmap(reg.pit_normal)(y, loc, scale), loop, rtol=1e-6)
    loop_d = jnp.stack([reg.pit_draws(y[i], draws[i]) for i in range(4)])
    np.testing.assert_allclose(jax.vmap(reg.pit_draws)(y, draws), loop_d)
    np.testing.assert_allclose(jax.jit(reg.pit_draws)(y[0], draws[0]), loop_d[0])
    qs = jnp.sort(draws[:, :5], axis=1)
    lv = jnp.linspace(0.1, 0.9, 5)
    loop_q = jnp.stack([reg.pit_quantiles(y[i], qs[i], lv) for i in range(4)])
    np.testing.assert_allclose(
        jax.vmap(lambda a, b: reg.pit_quantiles(a, b, lv))(y, qs), loop_q
    )


@given(st.integers(1, 40), st.integers(0, 10_000))
def test_pit_draws_property_monotone_in_y(shift, seed):
    r = np.random.default_rng(seed)
    draws = jnp.asarray(r.normal(size=(16, 8)))
    y = jnp.asarray(r.normal(size=8))
    u1 = reg.pit_draws(y, draws)
    u2 = reg.pit_draws(y + shift / 10, draws)
    assert bool(jnp.all(u2 >= u1)) and bool(jnp.all((u1 >= 0) & (u2 <= 1)))
