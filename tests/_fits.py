"""A NumPyro fit on real data shared by the adapter tests (run once per session).

Data: scikit-learn's bundled diabetes data (Efron et al., 2004), two standardized
features (bmi and s5), standardized response; the first 250 rows train, the other
192 are held out. Model: Bayesian linear regression with a Normal likelihood, NUTS
with 1 chain, 300 warm-up and 300 kept draws.
"""

import functools

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
from sklearn.datasets import load_diabetes

__all__ = ["linear_model", "diabetes", "diabetes_mcmc"]


def linear_model(X, y=None):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("obs", dist.Normal(a + X @ b, sigma), obs=y)


@functools.cache
def diabetes():
    """``(X_train, y_train, X_test, y_test)`` in the dtype JAX computes in."""
    X, y = load_diabetes(return_X_y=True)
    X = X[:, [2, 8]]  # bmi and s5 (log serum triglycerides)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    X, y = X.astype(dtype), y.astype(dtype)
    return X[:250], y[:250], X[250:], y[250:]


@functools.cache
def diabetes_mcmc():
    """The fitted ``MCMC`` object (``get_samples()`` has 300 draws)."""
    X_train, y_train, _, _ = diabetes()
    mcmc = MCMC(NUTS(linear_model), num_warmup=300, num_samples=300, progress_bar=False)
    mcmc.run(jax.random.key(0), X_train, y_train)
    return mcmc
