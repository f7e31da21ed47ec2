"""RecalibratedDistribution: a NumPyro distribution with cdf R(F(y)).

References: ``scipy.stats.kstest`` (scipy 1.17) for samples; ``scipy.integrate.quad``
of ``exp(log_prob)`` for the normalization and the moments; ``jax.grad`` of the cdf
and a central difference for the density; the recalibrated PIT ``R(F(y))`` of
:mod:`bayescal.regression` (``pit_normal`` then the recalibrator).
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.integrate
import scipy.stats
from numpyro.infer import Predictive

from bayescal import numpyro as bn
from bayescal import regression as reg
from tests.conftest import X64

TOL = 1e-9 if X64 else 2e-5


@pytest.fixture(scope="module")
def recal():
    rng = np.random.default_rng(0)
    # PIT values of an overconfident Normal predictive for t(3) data
    u = scipy.stats.norm.cdf(rng.standard_t(3, size=30) * 0.7)
    return reg.fit_isotonic_recalibrator(u)


def test_pit_on_held_out_equals_recalibrated_pit(recal):
    rng = np.random.default_rng(1)
    loc, scale = rng.normal(size=50), np.exp(rng.normal(size=50) * 0.3)
    y = loc + scale * rng.standard_t(3, size=50)
    d = bn.RecalibratedDistribution(dist.Normal(jnp.asarray(loc), jnp.asarray(scale)), recal)
    ref = recal(reg.pit_normal(y, loc, scale))
    np.testing.assert_allclose(reg.pit_cdf(y, d.cdf), ref, atol=TOL)

    # as the site distribution of a model: the Rao-Blackwellized PIT of one draw
    def model(loc, scale, y=None):
        shift = numpyro.sample("shift", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", loc.shape[0]):
            numpyro.sample(
                "obs", bn.RecalibratedDistribution(dist.Normal(loc + shift, scale), recal), obs=y
            )

    u = bn.rao_blackwell_pit(model, {"shift": jnp.zeros(1)}, y, jnp.asarray(loc), jnp.asarray(scale))
    np.testing.assert_allclose(u, ref, atol=TOL)


@pytest.mark.slow
def test_samples_pass_ks_against_own_cdf(recal):
    d = bn.RecalibratedDistribution(dist.Normal(1.0, 2.0), recal)
    x = np.asarray(d.sample(jax.random.key(0), (4000,)))
    cdf = lambda t: np.asarray(d.cdf(jnp.asarray(t)))  # noqa: E731
    # p-value is U(0, 1) under the null: 1e-3 fails a correct sampler 0.1% of seeds
    assert scipy.stats.kstest(x, cdf).pvalue > 1e-3
    # power: the same samples are far from the base distribution
    assert scipy.stats.kstest(x, scipy.stats.norm(1.0, 2.0).cdf).pvalue < 1e-6


@pytest.mark.slow
def test_log_prob_integrates_to_one_and_is_the_cdf_derivative(recal):
    base = dist.Normal(0.5, 1.5)
    d = bn.RecalibratedDistribution(base, recal)
    log_prob = jax.jit(d.log_prob)  # quad calls it pointwise: compiled once, not eager
    dens = lambda t: float(jnp.exp(log_prob(t)))  # noqa: E731
    # the density jumps at the images of the knots: integrate piece by piece
    pts = sorted(float(base.icdf(r)) for r in np.asarray(recal.raw)[1:-1])
    edges = [0.5 - 15 * 1.5] + pts
    total = sum(scipy.integrate.quad(dens, a, b)[0] for a, b in zip(edges[:-1], edges[1:], strict=True))
    np.testing.assert_allclose(total, 1.0, atol=1e-4 if not X64 else 1e-7)
    # no mass above F^-1(max PIT value)
    assert float(d.log_prob(pts[-1] + 0.1)) == -np.inf
    assert float(d.cdf(pts[-1] + 0.1)) == 1.0
    # d/dy cdf: autodiff and central differences, away from the kinks
    y = jnp.asarray(np.linspace(-2.0, 1.0, 13))
    g = jax.vmap(jax.grad(d.cdf))(y)
    np.testing.assert_allclose(jnp.exp(d.log_prob(y)), g, rtol=TOL)
    h = 1e-3 if not X64 else 1e-6
    fd = (d.cdf(y + h) - d.cdf(y - h)) / (2 * h)
    near_kink = np.min(np.abs(np.asarray(y)[:, None] - np.asarray(pts)[None]), 1) < 2 * h
    np.testing.assert_allclose(
        np.asarray(fd)[~near_kink], np.asarray(g)[~near_kink], atol=2e-4 if not X64 else 1e-6
    )


@pytest.mark.slow
def test_mean_and_variance_equal_quad_of_density(recal):
    d = bn.RecalibratedDistribution(dist.Normal(jnp.array([0.0, 1.0]), jnp.array([1.0, 2.0])), recal)
    for i, (m, s) in enumerate([(0.0, 1.0), (1.0, 2.0)]):
        one = bn.RecalibratedDistribution(dist.Normal(m, s), recal)
        log_prob = jax.jit(one.log_prob)  # quad calls it pointwise: compiled once
        dens = lambda t: float(jnp.exp(log_prob(t)))  # noqa: E731, B023
        pts = sorted(float(one.base.icdf(r)) for r in np.asarray(recal.raw)[1:-1])
        edges = [m - 15 * s] + pts
        segs = list(zip(edges[:-1], edges[1:], strict=True))
        # quad's tolerance at the density's own precision (float32: ~1e-7 relative)
        tol = {"epsrel": 1e-6, "epsabs": 1e-9} if not X64 else {}
        mean = sum(scipy.integrate.quad(lambda t: t * dens(t), a, b, **tol)[0] for a, b in segs)  # noqa: B023
        var = sum(scipy.integrate.quad(lambda t: (t - mean) ** 2 * dens(t), a, b, **tol)[0] for a, b in segs)  # noqa: B023
        # float32: the density itself carries ~1e-6 relative error into quad
        np.testing.assert_allclose(d.mean[i], mean, atol=(2e-4 if not X64 else 1e-6) * s)
        np.testing.assert_allclose(d.variance[i], var, rtol=2e-4 if not X64 else 1e-6)


def test_identity_recalibrator_gives_the_base():
    class Identity:
        def __call__(self, p):
            return p

        def inverse(self, p):
            return p

    base = dist.Logistic(1.0, 2.0)
    d = bn.RecalibratedDistribution(base, Identity())
    y = jnp.linspace(-5.0, 5.0, 11)
    np.testing.assert_allclose(d.log_prob(y), base.log_prob(y), rtol=TOL)
    np.testing.assert_allclose(d.mean, 1.0, atol=1e-4)
    np.testing.assert_allclose(d.variance, np.pi**2 * 4.0 / 3.0, rtol=1e-4)


@pytest.mark.slow
def test_under_predictive(recal):
    def model(x, y=None):
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("obs", bn.RecalibratedDistribution(dist.Normal(x, 1.0), recal), obs=y)

    x = jnp.zeros(3)
    draws = Predictive(model, num_samples=3000)(jax.random.key(1), x)["obs"]
    assert draws.shape == (3000, 3)
    one = bn.RecalibratedDistribution(dist.Normal(0.0, 1.0), recal)
    cdf = lambda t: np.asarray(one.cdf(jnp.asarray(t)))  # noqa: E731
    assert scipy.stats.kstest(np.asarray(draws[:, 0]), cdf).pvalue > 1e-3


def test_jit_equals_eager(recal):
    d = bn.RecalibratedDistribution(dist.Normal(jnp.array([0.0, 1.0]), 1.0), recal)
    y = jnp.array([0.3, -0.2])
    for method in ("log_prob", "cdf"):
        eager = getattr(d, method)(y)
        jitted = jax.jit(lambda dd, t, m=method: getattr(dd, m)(t))(d, y)
        np.testing.assert_allclose(jitted, eager, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda dd: dd.mean)(d), d.mean, rtol=1e-6)
    np.testing.assert_allclose(
        jax.jit(lambda dd, q: dd.icdf(q))(d, jnp.array([0.3, 0.6])), d.icdf(jnp.array([0.3, 0.6])), rtol=1e-6
    )


def test_bad_input(recal):
    with pytest.raises(TypeError, match="base must be a numpyro.distributions.Distribution"):
        bn.RecalibratedDistribution("normal", recal)
    with pytest.raises(TypeError, match="discrete"):
        bn.RecalibratedDistribution(dist.Poisson(3.0), recal)
    with pytest.raises(ValueError, match="univariate"):
        bn.RecalibratedDistribution(dist.MultivariateNormal(jnp.zeros(2), jnp.eye(2)), recal)
    with pytest.raises(TypeError, match="has no cdf"):
        bn.RecalibratedDistribution(dist.Normal(0.0, 1.0).expand([3]), recal)
    scaling = reg.fit_sigma_scaling([2.0, -2.0], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(TypeError, match="SigmaScalingCalibrator"):
        bn.RecalibratedDistribution(dist.Normal(0.0, 1.0), scaling)


@pytest.mark.slow
def test_pit_values_rounded_to_one_give_finite_quantiles_and_samples():
    # an overconfident predictive (2.5x too narrow): in float32, Phi(z) rounds to exactly
    # 1 beyond z ~ 5.4, so the PIT values the recalibrator is fitted on hold exact 1s
    # and R^-1(q) reaches level 1 for q < 1, where the base's quantile is infinite
    # (found while writing tutorial 4: inf draws, mean inf, variance nan)
    rng = np.random.default_rng(0)
    z = rng.normal(size=300) * 2.5
    u = np.asarray(reg.pit_normal(z, 0.0, 1.0))
    ones = int((u == 1.0).sum()) if not X64 else 0
    recal = reg.fit_isotonic_recalibrator(u)
    d = bn.RecalibratedDistribution(dist.Normal(0.0, 1.0), recal)
    x = d.sample(jax.random.key(1), (100_000,))
    assert bool(jnp.isfinite(x).all())
    assert np.isfinite(float(d.mean)) and np.isfinite(float(d.variance))
    q = jnp.asarray([1e-7, 0.5, 1 - 1e-7])
    assert bool(jnp.isfinite(d.icdf(q)).all())
    # the largest finite quantile is the base's at the last level below 1
    top = float(dist.Normal(0.0, 1.0).icdf(1 - jnp.finfo(x.dtype).epsneg))
    assert float(x.max()) <= top
    # the support's ends stay where they are
    assert float(d.icdf(jnp.asarray(1.0))) == np.inf
    assert float(d.icdf(jnp.asarray(0.0))) == -np.inf
    if not X64:
        assert ones > 0  # the case the test is about does occur in float32
