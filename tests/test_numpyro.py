"""NumPyro adapter.

References: the posterior predictive mixture CDF computed by hand with scipy.stats
(norm, t, lognorm, gamma, poisson; scipy 1.17) from the same posterior draws; the
empirical fraction ``(draws <= y).mean(0)`` in numpy; the law of total variance and
the mean of ``scipy.special.expit(logits)`` by hand. Real data: scikit-learn's bundled
diabetes data (Efron et al., 2004), ``sklearn.datasets.load_diabetes``, fitted once
per session in ``tests/_fits.py``.
"""

import pathlib
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.special
import scipy.stats
from numpyro.infer import SVI, Predictive, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal

from bayescal import numpyro as bn
from bayescal import regression as reg
from tests import _fits
from tests._fits import linear_model
from tests.conftest import X64

ATOL = 1e-9 if X64 else 2e-5  # float32 CDFs (erfc, betainc, gammainc) are good to ~1e-6


# --- models ------------------------------------------------------------------------------


def location_scale_model(x, family, y=None):
    """One observation per x; loc = m + x, scale and shape from the draws."""
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    s = numpyro.sample("s", dist.LogNormal(0.0, 0.3))
    df = numpyro.sample("df", dist.Uniform(2.0, 10.0))
    with numpyro.plate("data", x.shape[0]):
        if family == "studentt":
            d = dist.StudentT(df, m + x, s)
        elif family == "lognormal":
            d = dist.LogNormal(m + x, s)
        else:  # gamma: concentration df, rate s * exp(-x)
            d = dist.Gamma(df, s * jnp.exp(-x))
        numpyro.sample("obs", d, obs=y)


def poisson_model(x, y=None):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Poisson(jnp.exp(a + b * x)), obs=y)


def logistic_model(x, y=None):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Bernoulli(logits=a + b * x), obs=y)


def grid_model(n_school, n_year, y=None):
    """A 2-D [school, year] observation through to_event (Independent(Expanded))."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0).expand([n_school, 1]).to_event(2))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    numpyro.sample(
        "obs", dist.Normal(mu, tau).expand([n_school, n_year]).to_event(2), obs=y
    )


# --- data and fits (module scope: one MCMC and one SVI run for the whole file) ---------


@pytest.fixture(scope="module")
def diabetes():
    return _fits.diabetes()


@pytest.fixture(scope="module")
def mcmc_samples():
    return _fits.diabetes_mcmc().get_samples()


def normal_mixture_cdf(samples, X, y):
    """Hand reference: mean over draws of scipy.stats.norm.cdf(y, mu_s, sigma_s)."""
    a, b, sigma = (np.asarray(samples[k], np.float64) for k in ("a", "b", "sigma"))
    mu = a[:, None] + b @ np.asarray(X, np.float64).T
    return scipy.stats.norm.cdf(y, mu, sigma[:, None]).mean(0), mu, sigma


# --- Rao-Blackwellized PIT ---------------------------------------------------------------


def test_rao_blackwell_pit_mcmc_equals_hand_mixture_cdf(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    u = bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test)
    ref, _, _ = normal_mixture_cdf(mcmc_samples, X_test, y_test)
    assert u.shape == y_test.shape and u.dtype == y_test.dtype
    np.testing.assert_allclose(u, ref, atol=ATOL)
    # the observation argument may also be passed: the site is conditioned on y_true
    u_obs = bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test, y=y_test)
    np.testing.assert_allclose(u_obs, u, atol=1e-7)
    # a continuous site has no atoms: a key changes nothing
    u_key = bn.rao_blackwell_pit(
        linear_model, mcmc_samples, y_test, X_test, key=jax.random.key(0)
    )
    np.testing.assert_array_equal(u_key, u)


def test_rao_blackwell_pit_independent_of_chunk_size(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    full = bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test, chunk_size=300)
    for chunk in (7, 1000, None):  # 7 does not divide 300 draws: padded last chunk
        got = bn.rao_blackwell_pit(
            linear_model, mcmc_samples, y_test, X_test, chunk_size=chunk
        )
        np.testing.assert_allclose(got, full, atol=1e-6 if not X64 else 1e-12)


@pytest.mark.parametrize("family", ["studentt", "lognormal", "gamma"])
def test_rao_blackwell_pit_other_likelihoods_equal_scipy_mixture(family):
    rng = np.random.default_rng(3)
    n, s = 40, 50
    samples = {
        "m": rng.normal(0.0, 0.3, s),
        "s": rng.lognormal(0.0, 0.3, s),
        "df": rng.uniform(2.0, 10.0, s),
    }
    x = rng.normal(size=n)
    m, sc, df = (samples[k][:, None] for k in ("m", "s", "df"))
    if family == "studentt":
        y = rng.standard_t(4, n) + x
        ref = scipy.stats.t.cdf(y, df, m + x, sc).mean(0)
    elif family == "lognormal":
        y = rng.lognormal(x, 1.0)
        ref = scipy.stats.lognorm.cdf(y, sc, scale=np.exp(m + x)).mean(0)
    else:
        y = rng.gamma(5.0, np.exp(x))
        ref = scipy.stats.gamma.cdf(y, df, scale=np.exp(x) / sc).mean(0)
    jsamples = {k: jnp.asarray(v) for k, v in samples.items()}
    u = bn.rao_blackwell_pit(
        location_scale_model, jsamples, jnp.asarray(y), jnp.asarray(x), family
    )
    np.testing.assert_allclose(u, ref, atol=5 * ATOL)


@pytest.mark.slow
def test_rao_blackwell_pit_svi_guide_equals_hand_mixture_cdf(diabetes):
    X_train, y_train, X_test, y_test = diabetes
    guide = AutoNormal(linear_model)
    svi = SVI(linear_model, guide, numpyro.optim.Adam(0.05), Trace_ELBO())
    result = svi.run(jax.random.key(1), 300, X_train, y_train, progress_bar=False)
    # 300 draws, as in the MCMC fit: the compiled kernel of those tests is reused
    draws = Predictive(guide, params=result.params, num_samples=300)(
        jax.random.key(2), X_train
    )
    assert set(draws) == {"a", "b", "sigma"}
    u = bn.rao_blackwell_pit(linear_model, draws, y_test, X_test)
    ref, _, _ = normal_mixture_cdf(draws, X_test, y_test)
    np.testing.assert_allclose(u, ref, atol=ATOL)
    # Predictive(model, guide=...) output also holds "obs" draws: they are ignored
    with_obs = {**draws, "obs": jnp.zeros((300, y_test.size))}
    np.testing.assert_array_equal(
        bn.rao_blackwell_pit(linear_model, with_obs, y_test, X_test), u
    )


def test_rao_blackwell_pit_two_dimensional_site_and_flat_y():
    rng = np.random.default_rng(4)
    n_school, n_year, s = 3, 4, 20
    samples = {
        "mu": jnp.asarray(rng.normal(size=(s, n_school, 1))),
        "tau": jnp.asarray(rng.uniform(0.5, 2.0, s)),
    }
    y = rng.normal(size=(n_school, n_year))
    ref = scipy.stats.norm.cdf(
        y, np.asarray(samples["mu"]), np.asarray(samples["tau"])[:, None, None]
    ).mean(0)
    u = bn.rao_blackwell_pit(grid_model, samples, jnp.asarray(y), n_school, n_year)
    assert u.shape == (n_school, n_year)
    np.testing.assert_allclose(u, ref, atol=ATOL)
    u_flat = bn.rao_blackwell_pit(grid_model, samples, jnp.asarray(y.ravel()), 3, 4)
    assert u_flat.shape == (12,)
    np.testing.assert_allclose(u_flat, ref.ravel(), atol=ATOL)


def test_recorded_deterministic_sites_are_recomputed(diabetes, mcmc_samples):
    # mcmc.get_samples() holds deterministic sites computed on the training inputs;
    # like Predictive, rao_blackwell_pit recomputes them on the held-out inputs.
    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0.0, 1.0))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        mu = numpyro.deterministic("mu", a + X @ b)
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("obs", dist.Normal(mu, sigma), obs=y)

    X_train, _, X_test, y_test = diabetes
    samples = dict(mcmc_samples)
    samples["mu"] = samples["a"][:, None] + samples["b"] @ X_train.T  # [S, N_train]
    u = bn.rao_blackwell_pit(model, samples, y_test, X_test)
    ref, _, _ = normal_mixture_cdf(mcmc_samples, X_test, y_test)
    np.testing.assert_allclose(u, ref, atol=ATOL)


def test_rao_blackwell_pit_masked_site():
    def model(x, mask, y=None):
        m = numpyro.sample("m", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", x.shape[0]), numpyro.handlers.mask(mask=mask):
            numpyro.sample("obs", dist.Normal(m + x, 1.0), obs=y)

    x = jnp.linspace(-1.0, 1.0, 6)
    mask = jnp.array([True, False] * 3)
    m = jnp.array([0.1, -0.4, 0.7])
    y = jnp.array([0.0, 1.0, -1.0, 0.5, 2.0, -0.3])
    u = bn.rao_blackwell_pit(model, {"m": m}, y, x, mask)
    ref = scipy.stats.norm.cdf(np.asarray(y), np.asarray(m)[:, None] + np.asarray(x)).mean(
        0
    )
    np.testing.assert_allclose(u, ref, atol=ATOL)


# --- discrete sites ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def poisson_data():
    # A known Poisson regression; its true parameters (repeated) are the "posterior".
    rng = np.random.default_rng(7)
    n, s = 2000, 8
    x = rng.normal(size=n)
    a, b = 0.5, 0.8
    y = rng.poisson(np.exp(a + b * x)).astype(float)
    samples = {"a": jnp.full((s,), a), "b": jnp.full((s,), b)}
    return jnp.asarray(x), jnp.asarray(y), samples


@pytest.mark.slow
def test_randomized_rao_blackwell_pit_uniform_for_correct_poisson_model(poisson_data):
    x, y, samples = poisson_data
    u = np.asarray(
        bn.rao_blackwell_pit(poisson_model, samples, y, x, key=jax.random.key(0))
    )
    assert scipy.stats.kstest(u, "uniform").pvalue > 0.01
    with pytest.warns(UserWarning, match="not uniform even for a correct model"):
        upper = np.asarray(bn.rao_blackwell_pit(poisson_model, samples, y, x))
    assert scipy.stats.kstest(upper, "uniform").pvalue < 1e-6


def test_randomized_rao_blackwell_pit_equals_hand_formula():
    rng = np.random.default_rng(8)
    x = rng.normal(size=30)
    y = rng.poisson(np.exp(0.3 + 0.5 * x)).astype(float)
    y[:3] = 0.0  # F(y - 1) = F(-1) = 0 at the lower end of the support
    a, b = rng.normal(0.3, 0.1, 25), rng.normal(0.5, 0.1, 25)
    rate = np.exp(a[:, None] + b[:, None] * x)
    hi = scipy.stats.poisson.cdf(y, rate).mean(0)
    lo = scipy.stats.poisson.cdf(y - 1, rate).mean(0)
    key = jax.random.key(5)
    u = bn.rao_blackwell_pit(
        poisson_model,
        {"a": jnp.asarray(a), "b": jnp.asarray(b)},
        jnp.asarray(y),
        jnp.asarray(x),
        key=key,
    )
    v = np.asarray(jax.random.uniform(key, (30,), dtype=u.dtype))
    np.testing.assert_allclose(u, lo + v * (hi - lo), atol=5 * ATOL)
    assert np.all(np.asarray(u) >= lo - 1e-5) and np.all(np.asarray(u) <= hi + 1e-5)


@pytest.mark.slow
def test_pit_from_predictive_poisson_randomized_uniform(poisson_data):
    x, y, _ = poisson_data
    samples = {"a": jnp.full((400,), 0.5), "b": jnp.full((400,), 0.8)}  # the truth
    draws = Predictive(poisson_model, samples)(jax.random.key(3), x)["obs"]
    # 400 predictive draws per observation: randomized PIT ~ U(0, 1) for a correct model
    u = np.asarray(bn.pit(y, {"obs": draws}, key=jax.random.key(4)))
    assert scipy.stats.kstest(u, "uniform").pvalue > 0.01
    assert scipy.stats.kstest(np.asarray(bn.pit(y, draws)), "uniform").pvalue < 1e-6


# --- PIT from Predictive draws -----------------------------------------------------------


def test_pit_from_predictive_equals_empirical_fraction(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    predictive = Predictive(linear_model, mcmc_samples)(jax.random.key(1), X_test)
    u = bn.pit(y_test, predictive)
    draws = np.asarray(predictive["obs"])
    np.testing.assert_allclose(u, (draws <= y_test).mean(0), rtol=1e-6)
    np.testing.assert_array_equal(bn.pit(y_test, draws), u)  # the array itself
    # numpy draws take the host-counting path: the same counts, divided by S in
    # another program (1 ulp apart where XLA CPU of jax 0.4 multiplies by 1 / S)
    ref = np.asarray(reg.pit_draws(y_test, draws))
    s = draws.shape[0]
    np.testing.assert_array_equal(np.rint(np.asarray(u) * s), np.rint(ref * s))
    np.testing.assert_array_max_ulp(np.asarray(u), ref, maxulp=1)
    # Rao-Blackwell and counting agree up to the Monte Carlo error of 300 draws
    rb = bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test)
    assert np.max(np.abs(np.asarray(rb) - np.asarray(u))) < 5 * np.sqrt(0.25 / 300)


def test_pit_two_dimensional_draws_keep_y_shape(rng):
    draws = rng.normal(size=(50, 3, 4))
    y = rng.normal(size=(3, 4))
    ref = (draws <= y).mean(0)
    u = bn.pit(y, {"obs": draws})
    assert u.shape == (3, 4)
    np.testing.assert_allclose(u, ref, atol=1e-7)
    np.testing.assert_allclose(bn.pit(y.ravel(), draws), ref.ravel(), atol=1e-7)


# --- moments and probabilities -----------------------------------------------------------


def test_predictive_moments_equal_law_of_total_variance(diabetes, mcmc_samples):
    _, _, X_test, _ = diabetes
    mean, var = bn.predictive_moments(linear_model, mcmc_samples, X_test)
    _, mu, sigma = normal_mixture_cdf(mcmc_samples, X_test, np.zeros(X_test.shape[0]))
    rtol = 1e-10 if X64 else 2e-5
    np.testing.assert_allclose(mean, mu.mean(0), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(var, (sigma**2).mean() + mu.var(0), rtol=rtol)
    mean7, var7 = bn.predictive_moments(linear_model, mcmc_samples, X_test, chunk_size=7)
    np.testing.assert_allclose(var7, var, rtol=rtol)
    np.testing.assert_allclose(mean7, mean, rtol=rtol, atol=rtol)
    # predictive scale for sharpness / sigma-scaling
    assert float(reg.sharpness(jnp.sqrt(var))) > 0


def test_predictive_moments_shifted_sum_avoids_cancellation():
    # means near 1e4 with spread 1e-1: E[mu^2] - E[mu]^2 would lose it all in float32
    def model(n, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", n):
            numpyro.sample("obs", dist.Normal(mu, 0.01), obs=y)

    mu = 1e4 + 0.1 * np.random.default_rng(0).normal(size=400)
    _, var = bn.predictive_moments(model, {"mu": jnp.asarray(mu)}, 2)
    np.testing.assert_allclose(var, np.full(2, 0.01**2 + mu.var()), rtol=1e-3)


def test_predictive_moments_fields_name_variance_and_scale():
    # Issue 21: the variance, unpacked as `var` and passed where a scale goes, gave
    # fit_sigma_scaling a factor of 4.07. The fields say which is which; .scale is the
    # standard deviation (numpy's sqrt of the variance) and a calibrated predictive's
    # sigma-scaling factor with it is 1 (Laves et al.: s = sqrt(mean(z^2)), E z^2 = 1).
    def model(n, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        with numpyro.plate("data", n):
            numpyro.sample("obs", dist.Normal(mu, 1.0), obs=y)

    n = 20000
    m = bn.predictive_moments(model, {"mu": jnp.array([-1.0, 1.0])}, n)
    assert isinstance(m, bn.PredictiveMoments) and m._fields == ("mean", "variance")
    mean, var = m  # still unpacks as a pair
    assert mean is m.mean and var is m.variance
    np.testing.assert_allclose(m.variance, np.full(n, 2.0), rtol=1e-6)
    np.testing.assert_allclose(m.scale, np.sqrt(np.asarray(m.variance)), rtol=1e-7)
    assert m.scale.dtype == m.variance.dtype
    rng = np.random.default_rng(3)
    y = rng.choice([-1.0, 1.0], size=n) + rng.normal(size=n)  # the predictive itself
    factor = float(reg.fit_sigma_scaling(y, m.mean, m.scale).factor)
    assert abs(factor - 1) < 0.03
    # jit: the same fields, scale traced
    jm = jax.jit(lambda: bn.predictive_moments(model, {"mu": jnp.array([-1.0, 1.0])}, 3))()
    np.testing.assert_allclose(jax.jit(lambda v: bn.PredictiveMoments(v, v).scale)(jm.variance),
                               np.sqrt(2.0), rtol=1e-6)


def test_predictive_moments_poisson(poisson_data):
    x, _, _ = poisson_data
    rng = np.random.default_rng(9)
    a, b = rng.normal(0.5, 0.1, 40), rng.normal(0.8, 0.1, 40)
    rate = np.exp(a[:, None] + b[:, None] * np.asarray(x[:20]))
    samples = {"a": jnp.asarray(a), "b": jnp.asarray(b)}
    mean, var = bn.predictive_moments(poisson_model, samples, x[:20])
    np.testing.assert_allclose(mean, rate.mean(0), rtol=1e-5)
    np.testing.assert_allclose(var, rate.mean(0) + rate.var(0), rtol=1e-5)


@pytest.mark.parametrize("parametrization", ["logits", "probs"])
def test_predictive_probs_equal_mean_sigmoid(parametrization):
    rng = np.random.default_rng(10)
    x = rng.normal(size=60)
    a, b = rng.normal(size=30), rng.normal(1.0, 0.5, 30)

    def model(x, y=None):
        a = numpyro.sample("a", dist.Normal(0.0, 1.0))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", x.shape[0]):
            if parametrization == "logits":
                d = dist.Bernoulli(logits=a + b * x)
            else:
                d = dist.Bernoulli(probs=jax.nn.sigmoid(a + b * x))
            numpyro.sample("obs", d, obs=y)

    p = bn.predictive_probs(
        model, {"a": jnp.asarray(a), "b": jnp.asarray(b)}, jnp.asarray(x)
    )
    ref = scipy.special.expit(a[:, None] + b[:, None] * x).mean(0)
    np.testing.assert_allclose(p, ref, atol=1e-6 if not X64 else 1e-12)
    assert p.shape == (60,)


# --- bad input ---------------------------------------------------------------------------


def test_unknown_site_lists_sites(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    with pytest.raises(ValueError, match=r"site 'y' is not in predictive.*\['obs'\]"):
        bn.pit(y_test, {"obs": np.zeros((3, y_test.size))}, site="y")
    with pytest.raises(ValueError, match=r"sample sites are \['a', 'b', 'sigma', 'obs'\]"):
        bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test, site="y")


def test_site_without_cdf_names_distribution():
    samples = {"a": jnp.zeros(3), "b": jnp.ones(3)}
    x = jnp.arange(4.0)
    with pytest.raises(
        TypeError, match=r"BernoulliLogits.*has no cdf.*bayescal.numpyro.pit"
    ):
        bn.rao_blackwell_pit(logistic_model, samples, jnp.array([0.0, 1.0, 1.0, 0.0]), x)


def test_shape_mismatch_with_y_true(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    with pytest.raises(ValueError, match=r"y_true has shape \(10,\) but site 'obs'"):
        bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test[:10], X_test)
    with pytest.raises(ValueError, match=r"y_true has shape \(5,\) but predictive"):
        bn.pit(y_test[:5], np.zeros((4, 6)))
    with pytest.raises(ValueError, match=r"draws first"):
        bn.pit(y_test[:5], np.zeros(5))


def test_empty_or_ragged_posterior_samples(diabetes):
    _, _, X_test, y_test = diabetes
    with pytest.raises(ValueError, match="posterior_samples is empty"):
        bn.rao_blackwell_pit(linear_model, {}, y_test, X_test)
    with pytest.raises(ValueError, match="posterior_samples is empty"):
        bn.rao_blackwell_pit(linear_model, {"obs": np.zeros((3, 5))}, y_test, X_test)
    zero = {"a": np.zeros(0), "b": np.zeros((0, 2)), "sigma": np.zeros(0)}
    with pytest.raises(ValueError, match="0 draws"):
        bn.rao_blackwell_pit(linear_model, zero, y_test, X_test)
    ragged = {"a": np.zeros(4), "b": np.zeros((3, 2)), "sigma": np.ones(4)}
    with pytest.raises(ValueError, match="same leading draw axis"):
        bn.rao_blackwell_pit(linear_model, ragged, y_test, X_test)
    with pytest.raises(TypeError, match="posterior_samples must be a dict"):
        bn.rao_blackwell_pit(linear_model, np.zeros((4, 3)), y_test, X_test)


def test_missing_latent_site_is_named(diabetes):
    _, _, X_test, y_test = diabetes
    partial = {"a": jnp.zeros(4), "b": jnp.zeros((4, 2))}
    with pytest.raises(ValueError, match=r"no draws for the latent sites \['sigma'\]"):
        bn.rao_blackwell_pit(linear_model, partial, y_test, X_test)


def test_discrete_site_needs_integer_y(poisson_data):
    x, _, samples = poisson_data
    with pytest.raises(ValueError, match="must be integer-valued.*Poisson"):
        bn.rao_blackwell_pit(poisson_model, samples, jnp.full(x.shape, 0.5), x)


def test_y_outside_support_is_an_error_not_nan():
    def model(n, y=None):
        c = numpyro.sample("c", dist.Gamma(2.0, 1.0))
        with numpyro.plate("data", n):
            numpyro.sample("obs", dist.Beta(c, 2.0), obs=y)

    with pytest.raises(ValueError, match=r"2 non-finite values.*support"):
        bn.rao_blackwell_pit(model, {"c": jnp.ones(3)}, jnp.array([0.5, 2.0, 3.0]), 3)


def test_predictive_probs_needs_bernoulli(diabetes, mcmc_samples):
    _, _, X_test, _ = diabetes
    with pytest.raises(TypeError, match="needs a Bernoulli site.*Normal"):
        bn.predictive_probs(linear_model, mcmc_samples, X_test)


def test_bad_options(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    with pytest.raises(ValueError, match="chunk_size must be an int >= 1"):
        bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test, chunk_size=0)
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test, key=3)
    with pytest.raises(TypeError, match="model must be a NumPyro model"):
        bn.rao_blackwell_pit("model", mcmc_samples, y_test, X_test)


def test_adapters_import_lazily_and_fail_loudly():
    # `import bayescal` (and its regression branch) imports neither numpyro nor arviz;
    # the adapters never import bayescal.plot or bayescal.cli; without numpyro the
    # adapter says how to install it.
    code = (
        "import sys, bayescal, bayescal.regression\n"
        "assert 'numpyro' not in sys.modules and 'arviz' not in sys.modules\n"
        "import bayescal.numpyro, bayescal.arviz\n"
        "assert 'bayescal.plot' not in sys.modules and 'bayescal.cli' not in sys.modules\n"
        "for m in [k for k in sys.modules if k == 'numpyro' or k.startswith('numpyro.')]:\n"
        "    del sys.modules[m]\n"
        "del sys.modules['bayescal.numpyro']\n"
        "sys.modules['numpyro'] = None\n"
        "try:\n"
        "    import bayescal.numpyro\n"
        "except ImportError as e:\n"
        "    assert 'pip install numpyro' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=pathlib.Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


# --- issue 8 (f): predictive_moments called like rao_blackwell_pit ------------------------


def test_predictive_moments_called_with_y_true_explains_the_call(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    # by analogy with rao_blackwell_pit(model, post, y, X): was a bare IndexError
    with pytest.raises(TypeError, match=r"takes no y_true.*predictive_moments\(model, posterior_samples, X_test\)"):
        bn.predictive_moments(linear_model, mcmc_samples, y_test, X_test)
    with pytest.raises(TypeError, match=r"predictive_probs.*takes no y_true"):
        bn.predictive_probs(linear_model, mcmc_samples, y_test, X_test)


# --- issue 9 item 9: matmul precision --------------------------------------------------


def test_model_is_evaluated_under_highest_matmul_precision(diabetes, mcmc_samples):
    _, _, X_test, y_test = diabetes
    seen = []

    def recording_model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0.0, 1.0))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        # the jaxpr of the model's own product shows the precision it runs with
        seen.append(str(jax.make_jaxpr(jnp.matmul)(X, b)))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("obs", dist.Normal(a + X @ b, sigma), obs=y)

    calls = [
        lambda **kw: bn.rao_blackwell_pit(recording_model, mcmc_samples, y_test, X_test, **kw),
        lambda **kw: bn.predictive_moments(recording_model, mcmc_samples, X_test, **kw),
        lambda **kw: bn.loo_pit(recording_model, mcmc_samples, y_test, X_test, **kw),
    ]
    for call in calls:
        seen.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Pareto k of held-out data
            call()
        assert seen and all("Precision.HIGHEST" in s for s in seen)
        seen.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            call(matmul_precision=None)  # JAX's default: no precision recorded
        assert seen and not any("Precision.HIGHEST" in s for s in seen)
    with pytest.raises(ValueError, match="matmul_precision must be one of"):
        bn.rao_blackwell_pit(linear_model, mcmc_samples, y_test, X_test, matmul_precision="max")
