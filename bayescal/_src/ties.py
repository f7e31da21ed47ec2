"""Isotonic regression of a response on a covariate, with tied covariate values pooled.

``isotonic_fit(x, y, w)`` sorts by ``x``, pools observations with equal ``x`` into one
weighted mean (the "secondary" approach to ties: tied covariates get equal fitted
values), and runs the core's weighted PAV on the pooled means. Everything has a fixed
shape (``n`` slots; slots past the number of distinct values are padding), so it works
under ``jax.jit`` and ``jax.vmap``. The argsort is done on the host on CPU (numpy's
argsort of 1e6 floats is ~15 ms, XLA's CPU sort is ~50x slower) and by XLA elsewhere.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.isotonic import isotonic_kernel

__all__ = ["IsotonicFit", "argsort_last_axis", "isotonic_fit", "sort_groups"]


def _host_argsort(x: np.ndarray) -> np.ndarray:
    # Unstable sort: ties are pooled afterwards, so their order never matters.
    return np.argsort(np.asarray(x), axis=-1).astype(np.int32)


def _cpu_argsort(x: jax.Array) -> jax.Array:
    out = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    return jax.pure_callback(_host_argsort, out, x, vmap_method="expand_dims")


def argsort_last_axis(x: jax.Array) -> jax.Array:
    """Indices that sort ``x`` along its last axis (int32; order of ties unspecified).

    On CPU the sort runs on the host through a callback (numpy); on accelerators XLA
    sorts. Works under ``jit`` and ``vmap``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.core import argsort_last_axis
    >>> argsort_last_axis(jnp.array([0.3, 0.1, 0.2])).tolist()
    [1, 2, 0]
    """
    return jax.lax.platform_dependent(
        x,
        cpu=_cpu_argsort,
        default=lambda v: jnp.argsort(v, axis=-1).astype(jnp.int32),
    )


def _host_sort_groups(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(x)
    if x.ndim > 1:
        rows = [_host_sort_groups(row) for row in x.reshape(-1, x.shape[-1])]
        return tuple(np.stack([r[i] for r in rows]).reshape(x.shape) for i in range(3))
    order = np.argsort(x)
    xs = x[order]
    starts = np.empty(x.shape, bool)
    starts[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=starts[1:])
    group = np.cumsum(starts, dtype=np.int32)
    group -= 1
    return order.astype(np.int32), group, xs


def _xla_sort_groups(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    order = jnp.argsort(x, axis=-1).astype(jnp.int32)
    xs = jnp.take_along_axis(x, order, axis=-1)
    starts = jnp.concatenate(
        [jnp.ones(x.shape[:-1] + (1,), bool), xs[..., 1:] != xs[..., :-1]], axis=-1
    )
    return order, jnp.cumsum(starts, axis=-1, dtype=jnp.int32) - 1, xs


def _cpu_sort_groups(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    index = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    out = (index, index, jax.ShapeDtypeStruct(x.shape, x.dtype))
    return jax.pure_callback(_host_sort_groups, out, x, vmap_method="expand_dims")


def sort_groups(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sorting permutation of ``x`` (last axis), tie group of each sorted value, sorted x.

    ``group[j]`` numbers the distinct values of ``xs = x[order]`` from 0 upwards (equal
    values share a group). On CPU all three come from one host callback (numpy argsort
    and cumsum; XLA's CPU sort and cumsum are slow), elsewhere from XLA.
    """
    return jax.lax.platform_dependent(x, cpu=_cpu_sort_groups, default=_xla_sort_groups)


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
    n = x.shape[-1]
    order, group, xs = sort_groups(x)
    num = group[-1] + 1
    slots = jnp.arange(n)
    valid = slots < num
    ws = jnp.ones_like(y) if w is None else w[order]
    wys = y[order] if w is None else ws * y[order]
    wsum = jax.ops.segment_sum(ws, group, num_segments=n, indices_are_sorted=True)
    ysum = jax.ops.segment_sum(wys, group, num_segments=n, indices_are_sorted=True)
    xu = jnp.zeros_like(xs).at[group].set(xs, indices_are_sorted=True)
    xu = jnp.where(valid, xu, xs[-1])
    mean = ysum / jnp.where(valid, wsum, 1)
    # Padding at the largest pooled mean with weight 1 cannot change the fit of the
    # real slots: their isotonic fit never exceeds that value, so appending it adds
    # no violation.
    top = jnp.max(jnp.where(valid, mean, -jnp.inf))
    fit = isotonic_kernel(jnp.where(valid, mean, top), jnp.where(valid, wsum, 1), True)
    fit = jnp.where(valid, fit, fit[num - 1])
    fitted = jnp.zeros_like(fit).at[order].set(fit[group], unique_indices=True)
    return IsotonicFit(xu, fit, jnp.where(valid, wsum, 0), num.astype(jnp.int32), fitted)


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
    >>> from bayescal.core import isotonic_fit
    >>> fit = isotonic_fit(jnp.array([0.2, 0.1, 0.2, 0.3]), jnp.array([0.0, 1.0, 1.0, 0.0]))
    >>> int(fit.num_thresholds), fit.fitted.tolist()
    (3, [0.5, 0.5, 0.5, 0.5])
    """
    fit = _isotonic_fit_1d
    for _ in range(x.ndim - 1):
        fit = jax.vmap(fit, in_axes=(0, 0, None if w is None else 0))
    return fit(x, y, w)
