"""Weighted isotonic regression (pool adjacent violators), jittable and vmappable.

The solver is scipy's C++ PAV (``scipy.optimize.isotonic_regression``) called through
``jax.pure_callback``; it ran at about 1.3x scipy on its own at n = 1e6, where a pure
XLA ``while_loop`` PAV ran 2.8-7.6x slower and is fragile. A custom JVP gives exact
O(n) derivatives: the fit is constant on blocks, each block value being the weighted
mean of its observations, so

    d fit_i = sum_{j in B(i)} (w_j dy_j + dw_j (y_j - fit_j)) / sum_{j in B(i)} w_j.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["isotonic_kernel"]


def _host_pav(y: np.ndarray, w: np.ndarray, increasing: bool) -> np.ndarray:
    # Imported here, not at module import: scipy.optimize costs ~0.2 s to import and
    # most users of bayescal.regression / classification never run PAV.
    from scipy.optimize import isotonic_regression as _scipy_isotonic

    y = np.asarray(y)
    w = np.broadcast_to(np.asarray(w), y.shape)
    if y.ndim == 1:
        res = _scipy_isotonic(y, weights=w, increasing=increasing).x
        return res.astype(y.dtype, copy=False)
    flat_y = y.reshape(-1, y.shape[-1])
    flat_w = w.reshape(-1, y.shape[-1])
    out = np.empty(flat_y.shape, dtype=y.dtype)
    for i in range(flat_y.shape[0]):
        out[i] = _scipy_isotonic(flat_y[i], weights=flat_w[i], increasing=increasing).x
    return out.reshape(y.shape)


# One callable per direction: a fresh functools.partial per call made every eager call
# a cache miss (a ~17 ms recompilation of the callback).
_HOST_PAV = {inc: functools.partial(_host_pav, increasing=inc) for inc in (True, False)}


def _pav_primal(y: jax.Array, w: jax.Array, increasing: bool) -> jax.Array:
    out = jax.ShapeDtypeStruct(y.shape, y.dtype)
    return jax.pure_callback(
        _HOST_PAV[increasing],
        out,
        y,
        w,
        vmap_method="expand_dims",
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def isotonic_kernel(y: jax.Array, w: jax.Array, increasing: bool = True) -> jax.Array:
    """PAV fit of ``y`` (last axis ordered) with positive weights ``w``."""
    return _pav_primal(y, w, increasing)


def _block_average(fit: jax.Array, w: jax.Array, num: jax.Array) -> jax.Array:
    """Weighted block mean of ``num / w`` over the constant blocks of ``fit`` (1-D)."""
    n = fit.shape[-1]
    starts = jnp.concatenate([jnp.ones((1,), bool), fit[1:] != fit[:-1]])
    block = jnp.cumsum(starts) - 1
    wsum = jax.ops.segment_sum(w, block, num_segments=n)
    nsum = jax.ops.segment_sum(num, block, num_segments=n)
    return (nsum / jnp.where(wsum == 0, 1, wsum))[block]


@isotonic_kernel.defjvp
def _isotonic_jvp(increasing, primals, tangents):
    y, w = primals
    dy, dw = tangents
    fit = isotonic_kernel(y, w, increasing)
    w_full = jnp.broadcast_to(w, y.shape)
    dw_full = jnp.broadcast_to(dw, y.shape)
    num = w_full * dy + dw_full * (y - fit)
    avg = _block_average
    for _ in range(y.ndim - 1):
        avg = jax.vmap(avg)
    return fit, avg(fit, w_full, num)
