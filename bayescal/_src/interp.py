"""Piecewise-linear interpolation without ``jnp.interp``'s zero-width threshold.

``jnp.interp`` treats knot gaps below ~1e-14 as jumps, which breaks maps fitted on
PIT values packed into a far tail. Here only exactly equal knots are jumps, and the
interpolant is right-continuous there (like ``np.interp`` with sorted knots).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["interp"]


# One compiled program per shape (eagerly, it was a dozen single-operation programs).
@jax.jit
def interp(x: jax.Array, xp: jax.Array, fp: jax.Array) -> jax.Array:
    """Interpolate ``fp`` at ``x`` over nondecreasing knots ``xp``; clamp outside."""
    n = xp.shape[-1]
    i = jnp.clip(jnp.searchsorted(xp, x, side="right"), 1, n - 1)
    x0, x1 = xp[i - 1], xp[i]
    f0, f1 = fp[i - 1], fp[i]
    dx = x1 - x0
    t = jnp.where(dx > 0, (x - x0) / jnp.where(dx > 0, dx, 1), 1)
    out = f0 + jnp.clip(t, 0, 1) * (f1 - f0)
    out = jnp.where(x < xp[0], fp[0], out)
    return jnp.where(x >= xp[-1], fp[-1], out)
