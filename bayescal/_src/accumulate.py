"""Streaming accumulators of calibration curves (optax style): init / update / merge / finalize.

A curve depends on the data only through sufficient statistics that merge by addition:
integer counts per level or bin, and per-bin sums kept as compensated pairs ``(s, c)``
(see :func:`bayescal._src.binning.compensated_bin_sums`). Counts are split pairs
``(high, low)`` of the integer dtype, ``count = high * 2**20 + low`` with ``low < 2**20``
after every ``update`` and ``merge``: exact far beyond ``2**31`` observations in int32
(a plain int32 count wrapped to negative numbers after 33 chunks of ``2**26`` values),
and still a sum of leaves (``psum``, ``process_allgather(...).sum(0)``) for up to
``2**11`` states at once, which ``finalize`` and the next ``merge`` normalise. So the same four pure
functions serve one chunk, a stream of chunks (data larger than memory), a mesh of
devices (``merge`` is ``psum``-able addition) and several hosts. Every state is a
pytree of arrays: it passes through ``jax.jit``, ``jax.lax.scan`` and collectives.

Invalid values (PIT or probabilities outside [0, 1], NaN, labels not in {0, 1},
negative or non-finite weights) cannot raise inside ``jit``: they are counted in the
state's ``invalid`` field and ``finalize`` then returns NaN curves.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton
from bayescal._src import validation as _v
from bayescal._src.binned import bin_midpoints, uniform_edges
from bayescal._src.binning import (
    bin_counts,
    bin_index,
    compensated_bin_sums,
    count_at_or_below,
    two_sum,
)
from bayescal._src.bucketing import pad_to_bucket
from bayescal._src.curve import CalibrationCurve

__all__ = [
    "Accumulator",
    "CurveState",
    "ReliabilityState",
    "curve_accumulator",
    "reliability_accumulator",
    "merge_pairs",
    "split_count",
    "add_counts",
    "count_value",
    "exact_count",
]


class Accumulator(NamedTuple):
    """Four pure functions of a streaming statistic (like an ``optax.GradientTransformation``).

    Attributes
    ----------
    init : callable
        ``init() -> state``: the state of no data.
    update : callable
        ``update(state, *chunk) -> state``: add a chunk of observations.
    merge : callable
        ``merge(state_a, state_b) -> state``: the state of both data sets.
    finalize : callable
        ``finalize(state) -> CalibrationCurve``.
    """

    init: Callable[[], Any]
    update: Callable[..., Any]
    merge: Callable[[Any, Any], Any]
    finalize: Callable[[Any], CalibrationCurve]


def _int():
    return _v.default_int()


def _float():
    return _v.default_float()


def _zeros(shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Zeros put on the device from the host: ``jnp.zeros`` compiles a program per
    shape, and ``init`` is a user's first call."""
    return jax.device_put(np.zeros(shape, dtype))


#: Counts are split as ``high * 2**_LOW_BITS + low`` (see the module docstring).
_LOW_BITS = 20
_LOW_MASK = (1 << _LOW_BITS) - 1


def split_count(c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A nonnegative integer count as the pair ``(high, low)``, ``low < 2**20``."""
    c = c.astype(_int())
    return c >> _LOW_BITS, c & _LOW_MASK


def add_counts(a: tuple, b: tuple) -> tuple:
    """The exact sum of two split counts, normalised (``low < 2**20``).

    Either operand may be unnormalised (a sum of up to ``2**11`` states' leaves): the
    carries are taken before adding, so nothing exceeds the integer dtype.
    """
    low = (a[1] & _LOW_MASK) + (b[1] & _LOW_MASK)  # < 2**21
    high = a[0] + b[0] + (a[1] >> _LOW_BITS) + (b[1] >> _LOW_BITS) + (low >> _LOW_BITS)
    return high, low & _LOW_MASK


def count_value(pair: tuple, dtype: Any) -> jax.Array:
    """A split count as a ``dtype`` array (floats: rounded once, above ``2**24`` in float32)."""
    high, low = pair
    return high.astype(dtype) * (1 << _LOW_BITS) + low.astype(dtype)


def exact_count(pair: tuple) -> np.ndarray:
    """A (concrete) split count as exact int64 numbers, on the host."""
    high, low = (np.asarray(x, np.int64) for x in pair)
    return high * (1 << _LOW_BITS) + low


def _add_saturating(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a + b`` for nonnegative counts, stuck at the dtype's maximum instead of wrapping."""
    top = jnp.iinfo(a.dtype).max
    return jnp.where(a > top - b, top, a + b)


def merge_pairs(a: tuple, b: tuple) -> tuple:
    """Add two compensated sums ``(s, c)`` with TwoSum (error-free on ``s``)."""
    s, e = two_sum(a[0], b[0])
    return s, a[1] + b[1] + e


def _as_chunk(x: Any, name: str) -> jax.Array:
    arr = _v.as_float_array(x, name)
    _v.check_ndim(arr, name, 1)
    return arr.astype(_float())


# --------------------------------------------------------------------------- regression
class CurveState(NamedTuple):
    """State of a regression curve accumulator.

    Attributes
    ----------
    count : pair of int Arrays [L]
        Number of statistics at or below each level, split as ``(high, low)``:
        ``high * 2**20 + low`` (:func:`exact_count` reads it on the host).
    total : pair of int Arrays []
        Number of observations seen, split the same way.
    invalid : int Array []
        Number of values outside [0, 1] or NaN (the curve is NaN if any; it stops
        at the dtype's maximum rather than wrapping).
    """

    count: tuple[jax.Array, jax.Array]
    total: tuple[jax.Array, jax.Array]
    invalid: jax.Array


# One accumulator per set of options: its jitted update compiles once per bucket for the
# whole process, however many times the accumulator is asked for (one per file, say).
@functools.cache
def curve_accumulator(num_levels: int, kind: str) -> Accumulator:
    """Accumulator of ``calibration_curve(pit, num_levels=..., kind=...)`` (validated options)."""

    def init() -> CurveState:
        zero = _zeros((), _int())
        levels = _zeros((num_levels,), _int())
        return CurveState((levels, levels), (zero, zero), zero)

    @newton.fast_jit
    def _update(state: CurveState, u: jax.Array, mask: jax.Array) -> CurveState:
        ok = (u >= 0) & (u <= 1)
        v = u if kind == "quantile" else jnp.abs(2 * u - 1)
        v = jnp.where(mask & ok, v, jnp.nan)  # padding and invalid values count nowhere
        count = split_count(count_at_or_below(v, num_levels))
        total = split_count(jnp.sum(mask, dtype=_int()))
        invalid = jnp.sum(mask & ~ok, dtype=_int())
        return CurveState(
            add_counts(state.count, count),
            add_counts(state.total, total),
            _add_saturating(state.invalid, invalid),
        )

    def update(state: CurveState, pit: Any) -> CurveState:
        u = _as_chunk(pit, "pit")
        padded, mask = pad_to_bucket(u, 0.0)
        return _update(state, padded, mask)

    def merge(a: CurveState, b: CurveState) -> CurveState:
        return CurveState(
            add_counts(a.count, b.count),
            add_counts(a.total, b.total),
            _add_saturating(a.invalid, b.invalid),
        )

    def finalize(state: CurveState) -> CalibrationCurve:
        dtype = _float()
        levels = jnp.linspace(0.0, 1.0, num_levels, dtype=dtype)
        total = count_value(state.total, dtype)
        observed = count_value(state.count, dtype) / total
        bad = (state.invalid != 0) | (total == 0)  # != 0: even a wrapped sum of states
        observed = jnp.where(bad, jnp.nan, observed)
        return CalibrationCurve(levels, observed, jnp.ones_like(levels))

    return Accumulator(init, update, merge, finalize)


# --------------------------------------------------------------------------- classification
class ReliabilityState(NamedTuple):
    """State of a reliability curve accumulator (uniform bins).

    Attributes
    ----------
    count : pair of int Arrays [K]
        Observations per bin, split as ``(high, low)``: ``high * 2**20 + low``.
    weight, prob, label : tuple of two float Arrays [K]
        Compensated per-bin sums ``(s, c)`` of the weights, of ``w * y_prob`` and of
        ``w * y_true`` (``w = 1`` without weights).
    invalid : int Array []
        Number of invalid observations (the curve is NaN if any).
    """

    count: tuple[jax.Array, jax.Array]
    weight: tuple[jax.Array, jax.Array]
    prob: tuple[jax.Array, jax.Array]
    label: tuple[jax.Array, jax.Array]
    invalid: jax.Array


@functools.cache
def reliability_accumulator(num_bins: int, weighted: bool) -> Accumulator:
    """Accumulator of ``reliability_curve(y, p, bins=num_bins)`` (validated options)."""

    def init() -> ReliabilityState:
        z = _zeros((num_bins,), _float())
        zero = _zeros((), _int())
        counts = _zeros((num_bins,), _int())
        return ReliabilityState((counts, counts), (z, z), (z, z), (z, z), zero)

    @newton.fast_jit
    def _update(state, y, p, w, mask):
        w = jnp.ones_like(p) if w is None else w
        ok = (p >= 0) & (p <= 1) & ((y == 0) | (y == 1)) & (w >= 0) & jnp.isfinite(w)
        keep = mask & ok
        edges = uniform_edges(num_bins, p.dtype)
        idx = jnp.where(keep, bin_index(p, edges), num_bins)  # num_bins: dropped
        ww = jnp.where(keep, w, 0)
        pw, yw = jnp.where(keep, p, 0) * ww, jnp.where(keep, y, 0) * ww
        scale = None if weighted else 1.0
        sw, sp, sy = compensated_bin_sums(idx, num_bins, (ww, pw, yw), scale=scale)
        count = split_count(bin_counts(idx, num_bins))
        invalid = jnp.sum(mask & ~ok, dtype=_int())
        return ReliabilityState(
            add_counts(state.count, count),
            merge_pairs(state.weight, sw),
            merge_pairs(state.prob, sp),
            merge_pairs(state.label, sy),
            _add_saturating(state.invalid, invalid),
        )

    def update(state, y_true, y_prob, weights=None):
        y = _as_chunk(y_true, "y_true")
        p = _as_chunk(y_prob, "y_prob")
        _v.check_same_shape(y_prob=p, y_true=y)
        if weights is None:
            w = None
        else:
            if not weighted:
                raise TypeError(
                    "this accumulator was built with weighted=False; build it with "
                    "reliability_accumulator(..., weighted=True) to pass weights."
                )
            w = _as_chunk(weights, "weights")
            _v.check_same_shape(y_prob=p, weights=w)
        p, mask = pad_to_bucket(p, 0.0)
        y, _ = pad_to_bucket(y, 0.0)
        # unit weights are made in the program, at the bucketed length
        w = None if w is None else pad_to_bucket(w, 0.0)[0]
        return _update(state, y, p, w, mask)

    def merge(a: ReliabilityState, b: ReliabilityState) -> ReliabilityState:
        return ReliabilityState(
            add_counts(a.count, b.count),
            merge_pairs(a.weight, b.weight),
            merge_pairs(a.prob, b.prob),
            merge_pairs(a.label, b.label),
            _add_saturating(a.invalid, b.invalid),
        )

    def finalize(state: ReliabilityState) -> CalibrationCurve:
        dtype = _float()
        edges = uniform_edges(num_bins, dtype)
        mid = bin_midpoints(edges).astype(dtype)
        total = state.weight[0] + state.weight[1]
        count = count_value(state.count, dtype)  # float: int32 cannot hold 2**31
        wt = count if not weighted else total
        empty = wt == 0
        safe = jnp.where(empty, 1, wt)
        expected = jnp.where(empty, mid, (state.prob[0] + state.prob[1]) / safe)
        observed = jnp.where(empty, mid, (state.label[0] + state.label[1]) / safe)
        bad = state.invalid != 0  # != 0: even a wrapped sum of states
        expected = jnp.where(bad, jnp.nan, expected).astype(dtype)
        observed = jnp.where(bad, jnp.nan, observed).astype(dtype)
        weight = total.astype(dtype) if weighted else count
        return CalibrationCurve(expected, observed, weight, edges=edges)

    return Accumulator(init, update, merge, finalize)
