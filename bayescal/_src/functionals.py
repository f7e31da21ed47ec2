"""Error functionals on calibration curves: L1 / L2 / max gaps and exact areas."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["NORMS", "curve_gap", "area_between", "ecdf_area_to_diagonal"]

from bayescal._src.options import NORMS  # noqa: E402  (one definition)


def curve_gap(
    expected: jax.Array, observed: jax.Array, weight: jax.Array, norm: str
) -> jax.Array:
    """Weighted gap between ``observed`` and ``expected`` along the last axis.

    ``l1``: sum w |d| / sum w; ``l2``: sqrt(sum w d^2 / sum w); ``max``: max |d| over
    points with positive weight. With every weight 0 the result is NaN.
    """
    gap = jnp.abs(observed - expected)
    w = weight.astype(gap.dtype)
    total = jnp.sum(w, axis=-1)
    if norm == "l1":
        return jnp.sum(w * gap, axis=-1) / total
    if norm == "l2":
        return jnp.sqrt(jnp.sum(w * gap**2, axis=-1) / total)
    if norm == "max":
        masked = jnp.where(w > 0, gap, -jnp.inf)
        out = jnp.max(masked, axis=-1)
        return jnp.where(jnp.isneginf(out), jnp.nan, out)
    raise ValueError(f"norm must be one of {NORMS}; got {norm!r}.")


def area_between(x: jax.Array, d: jax.Array) -> jax.Array:
    """Exact ``integral |d(t)| dt`` of the piecewise-linear ``d`` through ``(x_k, d_k)``.

    Sign changes inside a segment are handled exactly: a segment of width ``h`` whose
    ends ``d0, d1`` have opposite signs contributes ``h (d0^2 + d1^2) / (2 (|d0| + |d1|))``
    (two triangles meeting at the crossing); otherwise ``h (|d0| + |d1|) / 2``.
    For ``d = observed - expected`` with ``x = expected`` this is the area between a
    calibration curve and the diagonal.
    """
    h = x[..., 1:] - x[..., :-1]
    d0, d1 = d[..., :-1], d[..., 1:]
    a0, a1 = jnp.abs(d0), jnp.abs(d1)
    s = a0 + a1
    crossing = (d0 * d1) < 0
    safe = jnp.where(s == 0, 1, s)
    seg = jnp.where(crossing, h * (d0**2 + d1**2) / (2 * safe), h * s / 2)
    return jnp.sum(seg, axis=-1)


def ecdf_area_to_diagonal(sorted_u: jax.Array, n: jax.Array | int | None = None) -> jax.Array:
    """Exact ``integral_0^1 |G_n(p) - p| dp`` for the ECDF ``G_n`` of sorted values.

    With ``u_(0) = 0``, ``u_(n+1) = 1`` and ``G_n = k / n`` on ``[u_(k), u_(k+1))``, each
    piece integrates ``|k/n - t|`` over an interval. Written with the interval length
    ``u_(k+1) - u_(k)`` to avoid cancellation in float32. Ties need no special care
    (zero-length pieces add nothing).

    ``n`` (possibly traced): only the first ``n`` sorted values are observations (a
    padded bucket); the rest are replaced by 1, so their pieces have length 0.
    """
    size = sorted_u.shape[-1]
    dtype = sorted_u.dtype
    if n is None:
        n = size
    else:
        real = jnp.arange(size) < n
        sorted_u = jnp.where(real, sorted_u, jnp.ones((), dtype))
    zero = jnp.zeros(sorted_u.shape[:-1] + (1,), dtype)
    one = jnp.ones(sorted_u.shape[:-1] + (1,), dtype)
    knots = jnp.concatenate([zero, sorted_u, one], axis=-1)
    k_over_n = jnp.arange(size + 1, dtype=dtype) / jnp.asarray(n, dtype)
    b = knots[..., :-1] - k_over_n  # start of piece, relative to the ECDF level
    a = knots[..., 1:] - k_over_n  # end of piece
    length = knots[..., 1:] - knots[..., :-1]
    same_sign = (a >= 0) == (b >= 0)
    piece = jnp.where(
        same_sign, length * (jnp.abs(a) + jnp.abs(b)) / 2, (a * a + b * b) / 2
    )
    return jnp.sum(piece, axis=-1)
