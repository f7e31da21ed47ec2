"""Proper scores. References: uncertainty-toolbox 0.1.1 (crps_gaussian, nll_gaussian),
scipy.integrate.quad of the CRPS integral, scipy.stats, scikit-learn's
mean_pinball_loss, a brute-force O(S^2) energy form, Gneiting & Raftery (2007)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.stats
import uncertainty_toolbox.metrics_scoring_rule as uts
from sklearn.metrics import mean_pinball_loss

from bayescal import regression as reg
from tests.conftest import X64

RTOL = 1e-10 if X64 else 2e-5


def test_crps_normal_vs_uncertainty_toolbox_and_quadrature(rng):
    mean, std = rng.normal(size=50), rng.uniform(0.3, 2, 50)
    y = mean + std * rng.normal(size=50) * 1.5
    np.testing.assert_allclose(
        reg.crps_normal(y, mean, std), uts.crps_gaussian(mean, std, y), rtol=RTOL
    )
    per = np.asarray(reg.crps_normal(y, mean, std, reduction="none"))
    for i in range(3):  # CRPS = int (F(x) - 1{x >= y})^2 dx
        f = scipy.stats.norm(mean[i], std[i]).cdf
        left = scipy.integrate.quad(lambda x, f=f: f(x) ** 2, -np.inf, y[i])[0]
        right = scipy.integrate.quad(lambda x, f=f: (1 - f(x)) ** 2, y[i], np.inf)[0]
        np.testing.assert_allclose(per[i], left + right, rtol=1e-4)
    np.testing.assert_allclose(
        reg.crps_normal(y, mean, std, reduction="sum"), per.sum(), rtol=1e-5
    )


def test_crps_draws_bruteforce_and_fair(rng):
    draws = rng.normal(size=(30, 20))
    y = rng.normal(size=20)
    pair = np.abs(draws[:, None, :] - draws[None, :, :]).sum((0, 1))
    term1 = np.abs(draws - y).mean(0)
    ref = term1 - pair / (2 * 30**2)
    ref_fair = term1 - pair / (2 * 30 * 29)
    np.testing.assert_allclose(
        reg.crps_draws(y, draws, reduction="none"), ref, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        reg.crps_draws(y, draws, fair=True), ref_fair.mean(), rtol=1e-5
    )


def test_crps_draws_converges_to_closed_form():
    # The fair estimator is unbiased for the CRPS of the sampling distribution; with
    # S = 2000 its standard error per observation is ~sigma / sqrt(S) ~ 0.02, so the
    # mean over 500 observations is within 0.005 with room to spare.
    rng = np.random.default_rng(3)
    n, s = 500, 2000
    mean, std = rng.normal(size=n), rng.uniform(0.5, 1.5, n)
    y = mean + std * rng.normal(size=n)
    draws = mean + std * rng.normal(size=(s, n))
    got = float(reg.crps_draws(y, draws, fair=True))
    want = float(reg.crps_normal(y, mean, std))
    assert abs(got - want) < 0.005


def test_nll_normal_vs_scipy_and_uncertainty_toolbox(rng):
    mean, std = rng.normal(size=40), rng.uniform(0.3, 2, 40)
    y = rng.normal(size=40)
    ref = -scipy.stats.norm.logpdf(y, mean, std)
    np.testing.assert_allclose(
        reg.nll_normal(y, mean, std, reduction="none"), ref, rtol=RTOL
    )
    np.testing.assert_allclose(
        reg.nll_normal(y, mean, std), uts.nll_gaussian(mean, std, y), rtol=RTOL
    )


def test_interval_score_definition():
    # Gneiting & Raftery (2007), eq. 43, by hand: width 2, misses by 1 above, alpha 0.2
    y = np.array([3.0, 1.0, -0.5])
    lo, up = np.array([0.0, 0.0, 0.0]), np.array([2.0, 2.0, 2.0])
    got = reg.interval_score(y, lo, up, alpha=0.2, reduction="none")
    np.testing.assert_allclose(got, [2 + 10 * 1.0, 2.0, 2 + 10 * 0.5])
    with pytest.raises(ValueError, match="alpha must be a float in \\(0, 1\\)"):
        reg.interval_score(y, lo, up, alpha=1.5)
    with pytest.raises(ValueError, match="lower must be <= upper"):
        reg.interval_score(y, up, lo, alpha=0.1)


def test_interval_score_minimised_by_true_quantiles():
    # Propriety: the true central 80% interval of N(0, 1) beats shrunk/inflated ones.
    rng = np.random.default_rng(0)
    y = rng.normal(size=200_000)
    z = scipy.stats.norm.ppf(0.9)
    scores = [
        float(reg.interval_score(y, -c * z, c * z, alpha=0.2)) for c in (0.8, 1.0, 1.25)
    ]
    assert scores[1] < scores[0] and scores[1] < scores[2]


def test_pinball_loss_vs_sklearn(rng):
    y = rng.normal(size=100)
    levels = np.array([0.1, 0.5, 0.9])
    q = scipy.stats.norm.ppf(levels)[:, None] + 0.2 * rng.normal(size=(3, 100))
    q = np.sort(q, axis=0)
    got = reg.pinball_loss(y, q, levels)
    ref = [mean_pinball_loss(y, q[i], alpha=t) for i, t in enumerate(levels)]  # sklearn 1.9
    np.testing.assert_allclose(got, ref, rtol=RTOL)
    assert reg.pinball_loss(y, q, levels, reduction="none").shape == (3, 100)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: reg.crps_normal([1.0], 0.0, 0.0), "scale must be strictly positive"),
        (
            lambda: reg.crps_normal([1.0], 0.0, 1.0, reduction="avg"),
            "reduction must be one of",
        ),
        (lambda: reg.nll_normal([np.nan], 0.0, 1.0), "y_true contains 1 NaN"),
        (lambda: reg.crps_draws([1.0, 2.0], np.zeros((3, 1))), "draws has shape"),
        (lambda: reg.pinball_loss([1.0], [[0.0]], [1.5]), "levels must lie in \\[0, 1\\]"),
        (lambda: reg.pinball_loss([1.0], [[0.0], [1.0]], [0.5]), "quantiles has shape"),
    ],
)
def test_scores_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_scores_jit_and_vmap(rng):
    y = jnp.asarray(rng.normal(size=(3, 25)))
    m = jnp.asarray(rng.normal(size=(3, 25)))
    s = jnp.asarray(rng.uniform(0.5, 2, (3, 25)))
    d = jnp.asarray(rng.normal(size=(3, 16, 25)))
    for fn in (reg.crps_normal, reg.nll_normal):
        loop = jnp.stack([fn(y[i], m[i], s[i]) for i in range(3)])
        np.testing.assert_allclose(jax.vmap(fn)(y, m, s), loop, rtol=1e-6)
        np.testing.assert_allclose(jax.jit(fn)(y[0], m[0], s[0]), loop[0], rtol=1e-6)
    loop = jnp.stack([reg.crps_draws(y[i], d[i]) for i in range(3)])
    np.testing.assert_allclose(jax.vmap(reg.crps_draws)(y, d), loop, rtol=1e-6)
