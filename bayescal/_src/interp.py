"""Piecewise-linear interpolation without ``jnp.interp``'s zero-width threshold.

``jnp.interp`` treats knot gaps below ~1e-14 as jumps, which breaks maps fitted on
PIT values packed into a far tail. Here only exactly equal knots are jumps, and the
interpolant is right-continuous there (like ``np.interp`` with sorted knots).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["interp", "interpolate"]


def interpolate(x: Any, xp: Any, fp: Any, ns: Any = jnp) -> Any:
    """Interpolate ``fp`` at ``x`` over nondecreasing knots ``xp``; clamp outside.

    Written once for both paths: ``ns`` is the array namespace, ``jax.numpy`` in the
    kernels (:func:`interp`) or ``numpy`` in the host twins (the isotonic maps of
    ``bayescal._src.host``), operation for operation the same arithmetic.
    """
    n = xp.shape[-1]
    i = ns.clip(ns.searchsorted(xp, x, side="right"), 1, n - 1)
    x0, x1 = xp[i - 1], xp[i]
    f0, f1 = fp[i - 1], fp[i]
    dx = x1 - x0
    t = ns.where(dx > 0, (x - x0) / ns.where(dx > 0, dx, 1), 1).astype(x.dtype)
    out = f0 + ns.clip(t, 0, 1) * (f1 - f0)
    out = ns.where(x < xp[0], fp[0], out)
    return ns.where(x >= xp[-1], fp[-1], out)


# One compiled program per shape (eagerly, it was a dozen single-operation programs).
@jax.jit
def interp(x: jax.Array, xp: jax.Array, fp: jax.Array) -> jax.Array:
    """:func:`interpolate` in JAX: interpolate ``fp`` at ``x`` over nondecreasing
    knots ``xp``; clamp outside."""
    return interpolate(x, xp, fp, jnp)
