"""Bin edges (uniform, quantile, Freedman-Diaconis) and weighted means per bin.

Companions of the fixed-shape binning engine in :mod:`bayescal._src.binning`: these
pick the edges and turn per-bin sums into per-bin means, keeping empty bins (weight 0,
a documented fill value) so that output shapes depend only on the number of bins.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.binning import bin_sums
from bayescal._src.sorting import by_platform, several_devices, sort_last_axis

__all__ = [
    "uniform_edges",
    "quantile_edges",
    "sorted_quantile_edges",
    "device_sorted_quantile_edges",
    "weighted_quantile_edges",
    "weighted_quantiles",
    "freedman_diaconis_edges",
    "bin_midpoints",
    "binned_means",
    "means_from_sums",
    "jeffreys_means",
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
    dtype = jax.dtypes.canonicalize_dtype(float) if dtype is None else dtype
    # On the host with numpy: IEEE division, correctly rounded (XLA may multiply by a
    # rounded reciprocal instead). num_bins is static, so these are constants under jit.
    k = np.arange(num_bins + 1, dtype=np.float64)
    edges = (low * (num_bins - k) + high * k) / num_bins
    return jnp.asarray(edges.astype(np.dtype(dtype)))


def quantile_edges(x: jax.Array, num_bins: int, mask: jax.Array | None = None) -> jax.Array:
    """Edges at the ``k / num_bins`` sample quantiles of ``x`` (last axis), jittable.

    Bit for bit ``np.quantile(x, q)`` (method ``"linear"``, numpy's default) with
    ``q = (np.arange(num_bins + 1) / num_bins).astype(x.dtype)``: the levels are
    ``k / K`` divided in float64 and rounded to ``x``'s dtype (not ``np.linspace(0, 1,
    K + 1)``, whose ``3 * 0.1`` is not ``0.3``); the virtual index ``(n - 1) q``, its
    floor and fraction, and numpy's ``_lerp`` (``a + (b - a) t``, or ``b - (b - a)(1 -
    t)`` where ``t >= 0.5``), each operation rounded once in ``x``'s dtype as numpy
    does, eager and under ``jit``, in float32 and float64. (With float64 ``q`` and
    float32 ``x`` numpy itself computes in float64 and returns float64 edges.) The
    first edge is ``min(x)``, the last ``max(x)``. When rounding makes numpy's
    quantiles decrease (two levels in one gap between order statistics, ``b - a``
    rounded), the running maximum is returned: edges never decrease.

    Tied data can repeat an edge; with the convention ``[e_k, e_{k+1})`` of
    :func:`bin_index` a repeated edge gives an empty bin and the tied values all land
    in the last bin that starts at their value, so no observation is lost or counted
    twice. On one CPU device the sort and the quantiles run on the host through a
    callback (:func:`sorted_quantile_edges`: ``np.quantile`` itself), so the host path
    of :mod:`bayescal._src.host` gives the same bits; elsewhere XLA sorts and
    interpolates (:func:`device_sorted_quantile_edges`, written so that XLA's fusion of
    a multiply and an add into one FMA cannot change the rounding). ``mask [N]``
    (optional): only the masked-in values count (a padded bucket); the padding
    changes nothing.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import quantile_edges
    >>> quantile_edges(jnp.array([0.0, 0.0, 0.0, 0.5, 1.0]), 4).tolist()
    [0.0, 0.0, 0.0, 0.5, 1.0]
    """
    n: int | jax.Array
    if mask is None:
        n = x.shape[-1]
    else:  # the padding as NaN sorts last: the first n sorted values are the data
        n = jnp.sum(mask, axis=-1, dtype=jnp.int32)
        x = jnp.where(mask, x, jnp.asarray(jnp.nan, x.dtype))

    def device(v: jax.Array, m) -> jax.Array:
        return device_sorted_quantile_edges(sort_last_axis(v), m, num_bins)

    if several_devices():
        return device(x, n)
    m = jnp.broadcast_to(jnp.asarray(n, jnp.int32), x.shape[:-1])
    return by_platform(
        x,
        m,
        cpu=lambda v, c: _host_quantile_edges(v, c, num_bins),
        default=lambda v, c: device(v, n if mask is None else c),
    )


def _host_quantile_edges(x: jax.Array, n: jax.Array, num_bins: int) -> jax.Array:
    def run(v: np.ndarray, m: np.ndarray) -> np.ndarray:
        v = np.asarray(v)
        m = np.broadcast_to(np.asarray(m), v.shape[:-1])
        out = np.empty(v.shape[:-1] + (num_bins + 1,), v.dtype)
        for i in np.ndindex(*v.shape[:-1]):
            out[i] = sorted_quantile_edges(np.sort(v[i]), int(m[i]), num_bins)
        return out

    shape = jax.ShapeDtypeStruct(x.shape[:-1] + (num_bins + 1,), x.dtype)
    return jax.pure_callback(run, shape, x, n, vmap_method="expand_dims")


@functools.lru_cache(maxsize=64)
def _quantile_levels(num_bins: int, dtype: np.dtype) -> np.ndarray:
    """``k / num_bins`` as numpy computes ``np.arange(K + 1) / K`` (float64 division),
    cast to ``dtype`` (read-only)."""
    q = (np.arange(num_bins + 1) / num_bins).astype(dtype)
    q.flags.writeable = False
    return q


def sorted_quantile_edges(xs: np.ndarray, n: int, num_bins: int) -> np.ndarray:
    """The edges of :func:`quantile_edges` from the sorted 1-D ``xs`` (its first ``n``
    values), on the host: ``np.quantile`` itself, made nondecreasing.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal._src.binned import sorted_quantile_edges
    >>> sorted_quantile_edges(np.array([0.0, 0.1, 0.1, 0.3, np.nan]), 4, 2).tolist()
    [0.0, 0.1, 0.3]
    """
    xs = np.asarray(xs)
    if n < 1:
        return np.full(num_bins + 1, np.nan, xs.dtype)
    q = _quantile_levels(num_bins, xs.dtype)
    edges = np.quantile(xs[:n], q)  # method="linear", in xs's dtype (q has it)
    return np.maximum.accumulate(edges)


def _host_positions(n: int, num_bins: int, dtype: np.dtype):
    """numpy's ``_quantile`` bookkeeping for ``n`` values: the indices of the two order
    statistics and the interpolation weight ``gamma`` of each level, exactly as
    ``_get_indexes`` and ``_get_gamma`` compute them (float ops in ``dtype``)."""
    q = _quantile_levels(num_bins, dtype)
    virtual = (n - 1) * q  # numpy's linear get_virtual_index (a Python int: weak)
    prev = np.floor(virtual)
    above = virtual >= n - 1  # the last value: both indices -1 (= n - 1)
    prev[above] = -1
    gamma = (virtual - prev).astype(dtype)
    lo = np.where(above, n - 1, prev).astype(np.int32)
    hi = np.where(above, n - 1, prev + 1).astype(np.int32)
    return lo, hi, gamma


def _device_positions(n: jax.Array, num_bins: int, dtype):
    """:func:`_host_positions` for a traced count ``n [...]`` (shapes ``[..., K + 1]``).

    ``q (n - 1) - floor(.)``: XLA may fuse the multiply into the subtraction (one FMA,
    a different rounding), so the product goes through a select on ``n > 0`` (a
    runtime value): a select between a multiply and an add blocks the fusion.
    """
    q = jnp.asarray(_quantile_levels(num_bins, np.dtype(dtype)))
    n = jnp.asarray(n, jnp.int32)[..., None]
    nm1 = (n - 1).astype(dtype)
    virtual = jnp.where(n > 0, q * nm1, 0)
    prev = jnp.floor(virtual)
    above = virtual >= nm1
    prev = jnp.where(above, -1, prev)
    gamma = jnp.where(above, virtual + 1, virtual - prev)
    top = jnp.maximum(n - 1, 0)
    lo = jnp.where(above, top, prev.astype(jnp.int32))
    hi = jnp.where(above, top, prev.astype(jnp.int32) + 1)
    return jnp.clip(lo, 0, top), jnp.clip(hi, 0, top), gamma


def device_sorted_quantile_edges(xs: jax.Array, n, num_bins: int) -> jax.Array:
    """:func:`sorted_quantile_edges` in XLA, for the sorted ``xs [..., N]`` (padding
    after the first ``n`` values; ``n`` an int or a traced count ``[...]``).

    numpy's arithmetic, operation by operation in ``xs``'s dtype: the indices and
    weights ``gamma`` (on the host when ``n`` is static, constants of the program),
    then ``_lerp``: ``a + fl((b - a) gamma)``, or ``b - fl((b - a)(1 - gamma))`` where
    ``gamma >= 0.5``. XLA contracts a multiply feeding an add into one FMA (rounded
    once, not twice: on CPU one interpolated edge in ten differed by an ulp); a select
    between the two keeps them apart. Its condition ``a == a`` is true for every
    number (a NaN ``a`` gives NaN either way) but is not known to the compiler.
    """
    dtype = xs.dtype
    if isinstance(n, int | np.integer):
        lo_np, hi_np, g_np = _host_positions(int(n), num_bins, np.dtype(dtype))
        lo, hi = jnp.asarray(lo_np), jnp.asarray(hi_np)
        gamma = jnp.asarray(g_np)
        a = jnp.take(xs, lo, axis=-1)
        b = jnp.take(xs, hi, axis=-1)
    else:
        lo, hi, gamma = _device_positions(n, num_bins, dtype)
        batch = xs.shape[:-1]
        lo = jnp.broadcast_to(lo, batch + lo.shape[-1:])
        hi = jnp.broadcast_to(hi, batch + hi.shape[-1:])
        a = jnp.take_along_axis(xs, lo, axis=-1)
        b = jnp.take_along_axis(xs, hi, axis=-1)
    return _lerp(a, b, gamma)


def _lerp(a: jax.Array, b: jax.Array, gamma: jax.Array) -> jax.Array:
    """numpy's ``_lerp`` with its two roundings kept under XLA, made nondecreasing."""
    diff = b - a
    keep = a == a
    low = a + jnp.where(keep, diff * gamma, 0)
    high = b - jnp.where(keep, diff * (1 - gamma), 0)
    edges = jnp.where(gamma >= 0.5, high, low)
    return jax.lax.cummax(edges, axis=edges.ndim - 1)


def weighted_quantile_edges(x: jax.Array, weights: jax.Array, num_bins: int) -> jax.Array:
    """:func:`quantile_edges` of the sample in which ``x_i`` is repeated ``w_i`` times.

    The linear quantile of numpy on that sample, generalised to real weights: with
    ``W = sum(w)`` the virtual index is ``(W - 1) q`` and the value at position ``j``
    of the repeated sample is the first sorted ``x_i`` whose cumulative weight exceeds
    ``j``; numpy's interpolation follows (:func:`device_sorted_quantile_edges`). For
    integer weights (exact sums) the edges equal ``np.quantile(np.repeat(x, w), q)``
    bit for bit; weight 0 leaves a value out (a bucket's padding included); unit
    weights give :func:`quantile_edges`. ``x [N]`` and ``weights [N]`` (1-D; batches
    through ``jax.vmap``), weights ``>= 0`` with a positive sum.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import weighted_quantile_edges
    >>> x, w = jnp.array([0.25, 0.5, 0.75]), jnp.array([2.0, 0.0, 1.0])
    >>> weighted_quantile_edges(x, w, 2).tolist()  # np.quantile([.25, .25, .75], q)
    [0.25, 0.25, 0.75]
    """
    q = jnp.asarray(_quantile_levels(num_bins, np.dtype(x.dtype)))
    return weighted_quantiles(x, weights, q, method="compare_all")


def weighted_quantiles(
    x: jax.Array, weights: jax.Array, levels: jax.Array, *, method: str = "scan"
) -> jax.Array:
    """The linear quantiles of :func:`weighted_quantile_edges` at any ``levels``.

    ``levels [..., L]`` in ``x``'s dtype (nondecreasing along the last axis; the
    result is made nondecreasing along it, as :func:`weighted_quantile_edges` does);
    ``x [N]``, ``weights [N]``. ``method``: that of ``jnp.searchsorted`` locating the
    positions in the cumulative weights (``"scan"``: ``O(L log N)``, for many levels;
    every method gives the same bits). Used for a table of edge rows at once (one
    row per number of bins, padded with level 1), e.g. by ``fit_bbq``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import weighted_quantiles
    >>> x, w = jnp.array([0.25, 0.5, 0.75]), jnp.array([2.0, 0.0, 1.0])
    >>> weighted_quantiles(x, w, jnp.array([[0.0, 0.5, 1.0], [0.0, 1.0, 1.0]])).tolist()
    [[0.25, 0.25, 0.75], [0.25, 0.75, 0.75]]
    """
    from bayescal._src.ties import argsort_last_axis

    dtype = x.dtype
    w = weights.astype(dtype)
    order = argsort_last_axis(x)
    xs = jnp.take(x, order)
    cum = jnp.cumsum(jnp.take(w, order))
    total = cum[-1]
    q = jnp.asarray(levels, dtype)
    last = total - 1
    virtual = jnp.where(total > 0, q * last, 0)  # the select: no FMA (see _lerp)
    prev = jnp.floor(virtual)
    above = virtual >= last
    gamma = jnp.where(above, virtual + 1, virtual - prev)
    prev = jnp.where(above, last, prev)
    nxt = jnp.where(above, last, prev + 1)
    size = x.shape[-1]

    def at(j: jax.Array) -> jax.Array:  # the value at position j of the repeated sample
        i = jnp.searchsorted(cum, j, side="right", method=method)
        return jnp.take(xs, jnp.clip(i, 0, size - 1))

    return _lerp(at(prev), at(nxt), gamma)


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
    return weight, means_from_sums(weight, sums, fill)


def means_from_sums(
    weight: jax.Array,
    sums: tuple[jax.Array, ...],
    fill: jax.Array | tuple[jax.Array, ...] | None = None,
) -> tuple[jax.Array, ...]:
    """Per-bin means ``sum / weight``, ``fill`` (default 0) in empty bins.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.binned import means_from_sums
    >>> means_from_sums(jnp.array([2, 0]), (jnp.array([3.0, 0.0]),))[0].tolist()
    [1.5, 0.0]
    """
    fills: tuple[jax.Array | None, ...]
    if fill is None or not isinstance(fill, tuple):
        fills = (fill,) * len(sums)
    else:
        fills = fill
    means = []
    for s, f in zip(sums, fills, strict=True):
        w = weight.astype(s.dtype)
        empty = w == 0
        mean = s / jnp.where(empty, 1, w)
        means.append(jnp.where(empty, 0 if f is None else f, mean).astype(s.dtype))
    return tuple(means)


def jeffreys_means(observed, weight, xp=jnp):
    r"""Per-bin posterior means :math:`(k + 1/2) / (n + 1)` of a positive rate under
    Jeffreys' Beta(1/2, 1/2) prior, from the bin means ``observed`` :math:`= k / n`
    and the (weighted) counts ``weight`` :math:`= n`.

    Computed as :math:`\bar y + (1/2 - \bar y) / (n + 1)` in ``observed``'s dtype, so
    a large bin moves by a rounding-sized amount; the result lies strictly inside
    (0, 1) (at most the largest float below 1: in float32 a bin of more than ~10^7
    observations, all positive, would otherwise round to 1). Empty bins
    (:math:`n = 0`) keep ``observed`` (their fill value). ``xp`` is ``numpy`` (the
    host twins) or ``jax.numpy``: one arithmetic for both.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal._src.binned import jeffreys_means
    >>> jeffreys_means(np.array([1.0, 0.0, 0.5, 0.3]), np.array([4, 1, 6, 0]), np).tolist()
    [0.9, 0.25, 0.5, 0.3]
    """
    dtype = observed.dtype
    n = weight.astype(dtype)
    half = xp.asarray(0.5, dtype)
    shrunk = observed + (half - observed) / (n + xp.asarray(1, dtype))
    below_one = xp.nextafter(xp.asarray(1, dtype), xp.asarray(0, dtype))
    shrunk = xp.clip(shrunk, xp.asarray(xp.finfo(dtype).tiny, dtype), below_one)
    return xp.where(n > 0, shrunk, observed).astype(dtype)
