"""The demo's exact Poisson-mixture quantiles (bayescal/_cli/demo.py), against scipy."""

import numpy as np
import pytest
from scipy import stats

from bayescal._cli import demo


@pytest.mark.parametrize("rate", [0.3, 4.0, 55.0, 150.0, 376.0])
def test_single_poisson_quantiles_equal_scipy_ppf(rate):
    # reference: scipy.stats.poisson.ppf, min{k: F(k) >= q}, for one draw (S = 1)
    levels = np.concatenate(
        [np.linspace(0.001, 0.999, 999), [1e-9, 1e-6, 0.99999, 1 - 1e-9]]
    )
    k_max = int(rate + 60 * np.sqrt(rate) + 60)
    cdf = demo._poisson_mixture_cdf(np.array([[rate]]), k_max)
    q = demo._quantiles_from_cdf(cdf, levels)
    np.testing.assert_array_equal(q[:, 0], stats.poisson.ppf(levels, rate))


def test_mixture_quantiles_equal_the_float64_mixture_cdf():
    # reference: the mixture CDF mean_s scipy.stats.poisson.cdf(k, lambda_s) in float64,
    # and its quantile min{k: F(k) >= level} read off by brute force over all k
    rng = np.random.default_rng(0)
    lam = rng.lognormal(np.log(rng.uniform(30, 300, 7)), 0.1, size=(200, 7))
    k_max = int(2 * lam.max())
    levels = np.concatenate([np.linspace(0.01, 0.99, 99), [0.999, 0.99999]])
    cdf = demo._poisson_mixture_cdf(lam, k_max)
    ks = np.arange(k_max + 1)
    ref_cdf = stats.poisson.cdf(ks[:, None, None], lam[None]).mean(axis=1)
    np.testing.assert_allclose(cdf, ref_cdf, rtol=0, atol=1e-12)
    ref_q = (ref_cdf[None] < levels[:, None, None]).sum(axis=1)
    np.testing.assert_array_equal(demo._quantiles_from_cdf(cdf, levels), ref_q)
    # property: a level above the table's last value gives the table's length
    assert demo._quantiles_from_cdf(cdf[:5], [0.999])[0].tolist() == [5] * 7


def test_mixture_cdf_rejects_bad_rates():
    with pytest.raises(ValueError, match="lam must be finite positive"):
        demo._poisson_mixture_cdf(np.array([[1.0, -2.0]]), 10)
    with pytest.raises(ValueError, match="shape"):
        demo._poisson_mixture_cdf(np.array([1.0, 2.0]), 10)
