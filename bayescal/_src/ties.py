"""Isotonic regression of a response on a covariate, with tied covariate values pooled.

``isotonic_fit(x, y, w)`` sorts by ``x``, pools observations with equal ``x`` into one
weighted mean (the "secondary" approach to ties: tied covariates get equal fitted
values), and runs the core's weighted PAV on the pooled means. Everything has a fixed
shape (``n`` slots; slots past the number of distinct values are padding), so it works
under ``jax.jit`` and ``jax.vmap``. On CPU the sorting and pooling run on the host
(:func:`pool_ties`: numpy's argsort of 1e6 floats is ~15 ms, XLA's CPU sort ~50x
slower, and XLA's CPU scatter-adds and cumsum are slow too); elsewhere, and wherever
several devices are present (a host callback on a sharded input aborts a CPU mesh: see
:mod:`bayescal._src.isotonic`), XLA does them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.isotonic import isotonic_kernel
from bayescal._src.sorting import by_platform, gather_all, several_devices

__all__ = ["IsotonicFit", "PooledTies", "argsort_last_axis", "isotonic_fit", "pool_ties"]


def _host_argsort(x: np.ndarray) -> np.ndarray:
    # Unstable sort: ties are pooled afterwards, so their order never matters.
    return np.argsort(np.asarray(x), axis=-1).astype(np.int32)


def _cpu_argsort(x: jax.Array) -> jax.Array:
    out = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    return jax.pure_callback(_host_argsort, out, x, vmap_method="expand_dims")


def argsort_last_axis(x: jax.Array) -> jax.Array:
    """Indices that sort ``x`` along its last axis (int32; order of ties unspecified).

    On one CPU device the sort runs on the host through a callback (numpy); on
    accelerators and with several devices XLA sorts. Works under ``jit`` and ``vmap``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.ties import argsort_last_axis
    >>> argsort_last_axis(jnp.array([0.3, 0.1, 0.2])).tolist()
    [1, 2, 0]
    """
    if several_devices():
        return jnp.argsort(x, axis=-1).astype(jnp.int32)
    return by_platform(
        x,
        cpu=_cpu_argsort,
        default=lambda v: jnp.argsort(v, axis=-1).astype(jnp.int32),
    )


class PooledTies(NamedTuple):
    """Result of :func:`pool_ties` (numpy arrays; see there)."""

    thresholds: np.ndarray
    mean: np.ndarray
    weight: np.ndarray
    order: np.ndarray
    group: np.ndarray


def pool_ties(x, y, weights=None) -> PooledTies:
    """Sort by ``x`` and merge equal ``x`` into one weighted mean of ``y`` (numpy, eager).

    Parameters
    ----------
    x, y : array_like, shape [n]
        Covariate and response (1-D, finite; callers validate).
    weights : array_like, shape [n], optional
        Positive weights (default 1).

    Returns
    -------
    PooledTies
        ``thresholds`` (the ``m`` distinct ``x`` values, increasing), ``mean`` (weighted
        mean of ``y`` at each) and ``weight`` (total weight at each), in ``y``'s float
        dtype with float64 accumulation; ``order`` (the sorting permutation, int32)
        and ``group`` (the threshold index of each sorted observation, int32).

    Notes
    -----
    Runs on the host: numpy's argsort (~15 ms at 1e6 floats) and ``np.add.reduceat``.
    It is the CPU path of :func:`isotonic_fit` and the first step of eager isotonic
    fits.

    Examples
    --------
    >>> from bayescal._src.ties import pool_ties
    >>> pooled = pool_ties([0.3, 0.1, 0.3], [1.0, 0.0, 0.0])
    >>> pooled.thresholds.tolist(), pooled.mean.tolist(), pooled.weight.tolist()
    ([0.1, 0.3], [0.0, 0.5], [1.0, 2.0])
    """
    x, y = np.asarray(x), np.asarray(y)
    dtype = y.dtype if np.issubdtype(y.dtype, np.floating) else np.float64
    order = np.argsort(x)  # unstable: the order within ties never matters
    xs = x[order]
    is_start = np.empty(x.shape, bool)
    is_start[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=is_start[1:])
    starts = np.flatnonzero(is_start)
    ys = y[order]
    if weights is None:
        weight = np.diff(np.append(starts, x.size)).astype(np.float64)
        total = np.add.reduceat(ys, starts, dtype=np.float64)
    else:
        ws = np.asarray(weights, np.float64)[order]
        weight = np.add.reduceat(ws, starts)
        total = np.add.reduceat(ws * ys, starts)
    group = np.cumsum(is_start, dtype=np.int32)
    group -= 1
    return PooledTies(
        xs[starts],
        (total / weight).astype(dtype),
        weight.astype(dtype),
        order.astype(np.int32),
        group,
    )


def _host_pool_padded(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None):
    """:func:`pool_ties` padded to ``n`` slots (CPU branch of :func:`isotonic_fit`)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim > 1 or y.ndim > 1 or (w is not None and np.ndim(w) > 1):
        # Batched by vmap (expand_dims: unbatched operands have size-1 batch axes).
        shape = np.broadcast_shapes(x.shape, y.shape, () if w is None else np.shape(w))
        flat = [np.broadcast_to(a, shape).reshape(-1, shape[-1]) for a in (x, y)]
        flat_w: list[None] | np.ndarray = [None] * flat[0].shape[0]
        if w is not None:
            flat_w = np.broadcast_to(w, shape).reshape(-1, shape[-1])
        rows = [_host_pool_padded(*args) for args in zip(*flat, flat_w, strict=True)]
        return tuple(
            np.stack([r[i] for r in rows]).reshape(shape[:-1] + np.shape(rows[0][i]))
            for i in range(6)
        )
    pooled = pool_ties(x, y, w)
    m = pooled.thresholds.size
    pad = x.size - m
    thresholds = np.concatenate([pooled.thresholds, np.full(pad, pooled.thresholds[-1])])
    # Padding at the largest pooled mean (see _isotonic_fit_1d), reported weight 0.
    mean = np.concatenate([pooled.mean, np.full(pad, pooled.mean.max())])
    weight = np.concatenate([pooled.weight, np.zeros(pad, pooled.weight.dtype)])
    return pooled.order, pooled.group, thresholds, mean, weight, np.int32(m)


def _host_pool_weighted(x, y, w):
    return _host_pool_padded(x, y, w)


def _host_pool_unit(x, y):
    return _host_pool_padded(x, y)


def _cpu_pool(x: jax.Array, y: jax.Array, w: jax.Array | None):
    # Called on the 1-D problem (isotonic_fit vmaps _isotonic_fit_1d over batches).
    index = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    out = (
        index,
        index,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        jax.ShapeDtypeStruct(x.shape, y.dtype),
        jax.ShapeDtypeStruct(x.shape, y.dtype),
        jax.ShapeDtypeStruct((), jnp.int32),
    )
    if w is None:
        return jax.pure_callback(_host_pool_unit, out, x, y, vmap_method="expand_dims")
    return jax.pure_callback(_host_pool_weighted, out, x, y, w, vmap_method="expand_dims")


def _xla_pool(x: jax.Array, y: jax.Array, w: jax.Array | None):
    """The same pooling in XLA (1-D), for accelerators."""
    n = x.shape[-1]
    order = jnp.argsort(x).astype(jnp.int32)
    xs = x[order]
    is_start = jnp.concatenate([jnp.ones((1,), bool), xs[1:] != xs[:-1]])
    group = jnp.cumsum(is_start, dtype=jnp.int32) - 1
    num = group[-1] + 1
    valid = jnp.arange(n) < num
    ws = jnp.ones_like(y) if w is None else w[order]
    wsum = jax.ops.segment_sum(ws, group, num_segments=n, indices_are_sorted=True)
    ysum = jax.ops.segment_sum(
        ws * y[order], group, num_segments=n, indices_are_sorted=True
    )
    thresholds = jnp.zeros_like(xs).at[group].set(xs, indices_are_sorted=True)
    thresholds = jnp.where(valid, thresholds, xs[-1])
    mean = ysum / jnp.where(valid, wsum, 1)
    mean = jnp.where(valid, mean, jnp.max(jnp.where(valid, mean, -jnp.inf)))
    return order, group, thresholds, mean, jnp.where(valid, wsum, 0), num


class IsotonicFit(NamedTuple):
    """Result of :func:`isotonic_fit`.

    Attributes
    ----------
    thresholds : Array [n]
        Distinct covariate values in increasing order in the first ``num_thresholds``
        slots; the remaining slots repeat the largest value (padding).
    values : Array [n]
        Fitted (nondecreasing) value at each threshold; padding repeats the last one.
    weight : Array [n]
        Total weight pooled at each threshold (0 in the padding).
    num_thresholds : int32 scalar
        Number of distinct covariate values.
    fitted : Array [n]
        Fitted value for every observation, in the input order.
    """

    thresholds: jax.Array
    values: jax.Array
    weight: jax.Array
    num_thresholds: jax.Array
    fitted: jax.Array


def _isotonic_fit_1d(x: jax.Array, y: jax.Array, w: jax.Array | None) -> IsotonicFit:
    if several_devices():
        order, group, thresholds, mean, weight, num = _xla_pool(x, y, w)
    else:
        order, group, thresholds, mean, weight, num = by_platform(
            x, y, w, cpu=_cpu_pool, default=_xla_pool
        )
    valid = jnp.arange(x.shape[-1]) < num
    # The padding sits at the largest pooled mean with weight 1: the isotonic fit of
    # the real slots never exceeds that value, so the padding adds no violation and
    # cannot change their fit.
    fit = isotonic_kernel(mean, jnp.where(valid, weight, 1), True)
    fit = jnp.where(valid, fit, fit[num - 1])
    fitted = jnp.zeros_like(fit).at[order].set(fit[group], unique_indices=True)
    return IsotonicFit(thresholds, fit, weight, num, fitted)


@jax.jit
def isotonic_fit(x: jax.Array, y: jax.Array, w: jax.Array | None = None) -> IsotonicFit:
    """Nondecreasing least-squares fit of ``y`` on ``x`` with ties in ``x`` pooled.

    Solves :math:`\\min \\sum_i w_i (y_i - f(x_i))^2` over nondecreasing ``f``. Equal
    ``x`` values are first merged into their weighted mean ``y`` with their total
    weight (so they share one fitted value), then the pooled means are fitted by
    weighted PAV. ``x, y, w`` are 1-D of equal length ``n`` with ``w > 0`` (callers
    validate); ``w=None`` means unit weights. Leading batch dimensions go through
    ``jax.vmap``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.ties import isotonic_fit
    >>> fit = isotonic_fit(jnp.array([0.2, 0.1, 0.2, 0.3]), jnp.array([0.0, 1.0, 1.0, 0.0]))
    >>> int(fit.num_thresholds), fit.fitted.tolist()
    (3, [0.5, 0.5, 0.5, 0.5])
    """
    # Sharded over a mesh: sorted, pooled and fitted whole on every device (see
    # sorting.gather_whole), not with collectives inside every step.
    x, y, w = gather_all((x, y, w), "An isotonic fit", (-1, -1, -1))
    fit = _isotonic_fit_1d
    for _ in range(x.ndim - 1):
        fit = jax.vmap(fit, in_axes=(0, 0, None if w is None else 0))
    return fit(x, y, w)
