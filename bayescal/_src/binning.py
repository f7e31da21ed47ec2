"""Fixed-shape weighted binning: bin indices and per-bin sums.

Every bin is kept (empty bins get weight 0), so output shapes depend only on the
number of bins and the kernels work under ``jit`` and ``vmap``. Unweighted counts are
accumulated in integers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["bin_index", "bin_sums", "grid_index", "count_at_or_below"]


def bin_index(x: jax.Array, edges: jax.Array) -> jax.Array:
    """Index ``k`` of the bin ``[e_k, e_{k+1})`` holding each ``x`` (last bin closed).

    ``edges`` are ``K + 1`` nondecreasing values; values below ``e_0`` go to bin 0 and
    values above ``e_K`` to bin ``K - 1`` (callers validate ranges beforehand).
    Repeated edges give empty bins.
    """
    num_bins = edges.shape[-1] - 1
    # side="right": x == e_k lands in bin k; x == e_K lands in bin K -> clipped to K-1.
    idx = jnp.searchsorted(edges, x, side="right", method="compare_all") - 1
    return jnp.clip(idx, 0, num_bins - 1).astype(jnp.int32)


def grid_index(u: jax.Array, num_levels: int) -> jax.Array:
    """Smallest ``j`` with ``u <= levels[j]`` for ``levels = linspace(0, 1, m)``.

    No sort and no search: ``ceil(u * (m - 1))`` is corrected by one comparison with the
    actual float grid on each side, so the result agrees exactly with comparing
    against ``jnp.linspace(0, 1, num_levels, dtype=u.dtype)``. ``u`` must lie in
    [0, 1]; NaN maps to ``m`` (counted nowhere).
    """
    m = num_levels
    levels = jnp.linspace(0.0, 1.0, m, dtype=u.dtype)
    raw = jnp.ceil(u * (m - 1))
    idx = jnp.clip(jnp.nan_to_num(raw, nan=m - 1), 0, m - 1).astype(jnp.int32)
    prev = jnp.maximum(idx - 1, 0)
    idx = jnp.where((idx > 0) & (u <= levels[prev]), idx - 1, idx)
    idx = jnp.where(u > levels[idx], idx + 1, idx)
    return jnp.where(jnp.isnan(u), m, idx)


def bin_sums(
    idx: jax.Array,
    num_bins: int,
    values: tuple[jax.Array, ...] = (),
    weights: jax.Array | None = None,
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """Per-bin total weight and weighted sums of ``values``.

    Parameters
    ----------
    idx : int Array [N]
        Bin of each observation; indices outside ``[0, num_bins)`` are dropped.
    num_bins : int
        Static number of bins.
    values : tuple of Array [N]
        Quantities to sum per bin (weighted by ``weights`` when given).
    weights : Array [N], optional
        Observation weights. Without them the weight per bin is an int32 count.

    Returns
    -------
    (weight, sums) : total weight per bin ``[K]`` and one ``[K]`` sum per value.
    """
    if weights is None:
        count = jax.ops.segment_sum(
            jnp.ones(idx.shape, jnp.int32), idx, num_segments=num_bins
        )
        sums = tuple(jax.ops.segment_sum(v, idx, num_segments=num_bins) for v in values)
        return count, sums
    total = jax.ops.segment_sum(weights, idx, num_segments=num_bins)
    sums = tuple(
        jax.ops.segment_sum(v * weights, idx, num_segments=num_bins) for v in values
    )
    return total, sums


def count_at_or_below(
    u: jax.Array, num_levels: int, weights: jax.Array | None = None
) -> jax.Array:
    """``#{i: u_i <= levels[j]}`` for every level of ``linspace(0, 1, num_levels)``.

    Integer counts (or summed weights) by scatter-add and a cumulative sum: O(N + m),
    no sort. Returns shape ``[num_levels]``.
    """
    idx = grid_index(u, num_levels)
    per_level, _ = bin_sums(idx, num_levels, weights=weights)
    return jnp.cumsum(per_level)
