"""Bin edges (uniform, quantile, Freedman-Diaconis) and weighted means per bin.

Companions of the fixed-shape binning engine in :mod:`bayescal._src.binning`: these
pick the edges and turn per-bin sums into per-bin means, keeping empty bins (weight 0,
a documented fill value) so that output shapes depend only on the number of bins.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.binning import bin_sums
from bayescal._src.sorting import sort_last_axis

__all__ = [
    "uniform_edges",
    "quantile_edges",
    "freedman_diaconis_edges",
    "bin_midpoints",
    "binned_means",
]


def uniform_edges(num_bins: int, dtype=None, low: float = 0.0, high: float = 1.0):
    """``num_bins + 1`` equally spaced edges from ``low`` to ``high`` (a JAX array).

    Edge ``k`` is ``(low (K - k) + high k) / K`` with one rounding, so on [0, 1] it is
    ``k / K`` correctly rounded in ``dtype``: a probability that is the nearest float
    to ``k / K`` (e.g. 0.3 for ``K = 10``) sits exactly on the edge and lands in bin
    ``k``, identically in float32 and float64 (``jnp.linspace`` rounds some edges up
    and put such values in the bin below).

    Examples
    --------
    >>> from bayescal._src.binned import uniform_edges
    >>> uniform_edges(4).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    dtype = jnp.zeros((), dtype=float).dtype if dtype is None else dtype
    # On the host with numpy: IEEE division, correctly rounded (XLA may multiply by a
    # rounded reciprocal instead). num_bins is static, so these are constants under jit.
    k = np.arange(num_bins + 1, dtype=np.float64)
    edges = (low * (num_bins - k) + high * k) / num_bins
    return jnp.asarray(edges.astype(np.dtype(dtype)))


def quantile_edges(x: jax.Array, num_bins: int, mask: jax.Array | None = None) -> jax.Array:
    """Edges at the ``k / num_bins`` sample quantiles of ``x`` (last axis), jittable.

    Quantiles use linear interpolation between order statistics, numpy's default
    (``np.quantile(x, q, method="linear")``): position ``q (n - 1)`` in the sorted
    values. The first edge is ``min(x)``, the last ``max(x)``. Tied data can repeat
    an edge; with the convention ``[e_k, e_{k+1})`` of :func:`bin_index` a repeated
    edge gives an empty bin and the tied values all land in the last bin that starts
    at their value, so no observation is lost or counted twice. The sort goes
    through :func:`sort_last_axis` (host sort on CPU). ``mask [N]`` (optional): only
    the masked-in values count (a padded bucket).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import quantile_edges
    >>> quantile_edges(jnp.array([0.0, 0.0, 0.0, 0.5, 1.0]), 4).tolist()
    [0.0, 0.0, 0.0, 0.5, 1.0]
    """
    if mask is None:
        n = x.shape[-1]
        xs = sort_last_axis(x)
    else:  # the padding as NaN sorts last: the first n sorted values are the data
        n = jnp.sum(mask, dtype=jnp.int32)
        xs = sort_last_axis(jnp.where(mask, x, jnp.asarray(jnp.nan, x.dtype)))
    q = jnp.arange(num_bins + 1, dtype=x.dtype) / jnp.asarray(num_bins, x.dtype)
    # Same arithmetic as numpy's "linear" method: virtual index q (n - 1).
    pos = q * jnp.asarray(n - 1, x.dtype)
    lo = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, n - 1)
    hi = jnp.clip(lo + 1, 0, n - 1)
    frac = pos - lo.astype(x.dtype)
    a = jnp.take(xs, lo, axis=-1)
    b = jnp.take(xs, hi, axis=-1)
    # numpy's _lerp: a + (b - a) * t, switched to b - (b - a) * (1 - t) for t >= 0.5.
    diff = b - a
    edges = jnp.where(frac >= 0.5, b - diff * (1 - frac), a + diff * frac)
    # Interpolation rounding must never make edges decrease.
    return jax.lax.cummax(edges, axis=edges.ndim - 1)


def freedman_diaconis_edges(
    x, low: float = 0.0, high: float = 1.0, *, max_bins: int = 10_000
) -> np.ndarray:
    """Freedman-Diaconis edges over ``[low, high]``, computed eagerly with numpy.

    The bin width is ``h = 2 IQR(x) n^{-1/3}`` and the number of bins
    ``ceil((high - low) / h)``, exactly ``np.histogram_bin_edges(x, bins="fd",
    range=(low, high))``. When the IQR is 0 numpy falls back to one bin. The count
    is capped at ``max_bins``. ``x`` must be concrete (resolve the edges before
    ``jax.jit``).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal._src.binned import freedman_diaconis_edges
    >>> x = np.random.default_rng(0).uniform(size=1000)
    >>> edges = freedman_diaconis_edges(x)
    >>> len(edges) - 1, bool(edges[0] == 0.0 and edges[-1] == 1.0)
    (11, True)
    """
    arr = np.asarray(x, dtype=np.float64).ravel()
    edges = np.histogram_bin_edges(arr, bins="fd", range=(low, high))
    if edges.size - 1 > max_bins:
        edges = np.linspace(low, high, max_bins + 1)
    return edges


def bin_midpoints(edges: jax.Array) -> jax.Array:
    """Midpoint ``(e_k + e_{k+1}) / 2`` of every bin.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import bin_midpoints
    >>> bin_midpoints(jnp.array([0.0, 0.5, 1.0])).tolist()
    [0.25, 0.75]
    """
    return 0.5 * (edges[..., 1:] + edges[..., :-1])


def binned_means(
    idx: jax.Array,
    num_bins: int,
    values: tuple[jax.Array, ...],
    weights: jax.Array | None = None,
    fill: jax.Array | tuple[jax.Array, ...] | None = None,
    *,
    bounded: bool = True,
    variant: str | None = None,
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """Per-bin total weight and (weighted) mean of each of ``values``.

    Parameters
    ----------
    idx : int Array [N]
        Bin of each observation (see :func:`bin_index`).
    num_bins : int
        Static number of bins ``K``.
    values : tuple of Array [N]
        Quantities to average per bin.
    weights : Array [N], optional
        Observation weights; without them the weight per bin is an int32 count.
    fill : Array [K] or tuple of them, optional
        Value(s) reported for empty bins (one per entry of ``values`` when a tuple).
        Default 0.
    bounded : bool, default True
        The values lie in [-1, 1] (probabilities, labels), which makes the per-bin
        sums exact in blocks without a pass to find their scale (see
        :func:`~bayescal._src.binning.bin_sums`); pass False for other values.
    variant : {"scatter", "compare"}, optional
        Force a binning kernel (tests); by default chosen per backend.

    Returns
    -------
    (weight, means) : ``[K]`` total weight (int32 counts when unweighted) and one
    ``[K]`` mean per value, in the value's dtype. Empty bins get weight 0 and the
    fill value, never NaN.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import binned_means
    >>> count, (mean,) = binned_means(jnp.array([0, 0, 2]), 3, (jnp.array([1.0, 3.0, 5.0]),))
    >>> count.tolist(), mean.tolist()
    ([2, 0, 1], [2.0, 0.0, 5.0])
    """
    weight, sums = bin_sums(idx, num_bins, values, weights, bounded=bounded, variant=variant)
    fills: tuple[jax.Array | None, ...]
    if fill is None or not isinstance(fill, tuple):
        fills = (fill,) * len(values)
    else:
        fills = fill
    means = []
    for s, f in zip(sums, fills, strict=True):
        w = weight.astype(s.dtype)
        empty = w == 0
        mean = s / jnp.where(empty, 1, w)
        means.append(jnp.where(empty, 0 if f is None else f, mean).astype(s.dtype))
    return weight, tuple(means)
