"""Location-scale families used by sigma-scaling: log-density, CDF and quantile.

Every function takes standardized values ``z = (y - loc) / scale``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc, gammaln, ndtr, ndtri

from bayescal._src.device_quantiles import device_t_quantile
from bayescal._src.sorting import by_platform

__all__ = ["FAMILIES", "log_density", "cdf", "quantile"]

FAMILIES = ("normal", "student_t", "laplace")


def log_density(z: jax.Array, family: str, df) -> jax.Array:
    """Log-density of the standard member of ``family`` at ``z``."""
    if family == "normal":
        return -0.5 * z * z - 0.5 * math.log(2 * math.pi)
    if family == "laplace":
        return -jnp.abs(z) - math.log(2.0)
    nu = df
    return (
        gammaln((nu + 1) / 2)
        - gammaln(nu / 2)
        - 0.5 * jnp.log(nu * math.pi)
        - (nu + 1) / 2 * jnp.log1p(z * z / nu)
    )


def cdf(z: jax.Array, family: str, df) -> jax.Array:
    """CDF of the standard member of ``family`` at ``z``."""
    if family == "normal":
        return ndtr(z)
    if family == "laplace":
        return jnp.where(z < 0, 0.5 * jnp.exp(z), 1 - 0.5 * jnp.exp(-z))
    nu = jnp.asarray(df, z.dtype)
    half = jnp.asarray(0.5, z.dtype)
    z2 = z * z
    # P(T > |z|) = I_x(nu/2, 1/2) / 2 with x = nu / (nu + z^2); near the centre x -> 1
    # loses precision, so use I_x(a, b) = 1 - I_{1-x}(b, a) there.
    far = 0.5 * betainc(nu / 2, half, nu / (nu + z2))
    near = 0.5 - 0.5 * betainc(half, nu / 2, z2 / (nu + z2))
    tail = jnp.where(z2 > nu, far, near)
    return jnp.where(z < 0, tail, 1 - tail)


def _host_t_quantile(p: np.ndarray, df: np.ndarray) -> np.ndarray:
    import scipy.special  # lazily: ~0.1 s to import, needed only for Student-t quantiles

    return scipy.special.stdtrit(
        np.asarray(df, np.float64), np.asarray(p, np.float64)
    ).astype(np.asarray(p).dtype)


def quantile(p: jax.Array, family: str, df) -> jax.Array:
    """Quantile function of the standard member of ``family`` (``p`` in [0, 1])."""
    if family == "normal":
        return ndtri(p)
    if family == "laplace":
        c = p - 0.5
        return -jnp.sign(c) * jnp.log1p(-2 * jnp.abs(c))
    df_arr = jnp.full(p.shape, df, p.dtype)
    out = jax.ShapeDtypeStruct(p.shape, p.dtype)

    def host(p, df):
        # scipy's stdtrit (Cephes) is the reference t quantile; called on the host.
        return jax.pure_callback(_host_t_quantile, out, p, df, vmap_method="broadcast_all")

    # on accelerators by bisection on betainc, without a host round trip
    return by_platform(p, df_arr, cpu=host, default=device_t_quantile)
