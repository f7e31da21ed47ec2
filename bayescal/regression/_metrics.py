"""Average calibration curves of PIT values and the errors derived from them."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.binning import count_at_or_below
from bayescal._src.curve import CalibrationCurve
from bayescal._src.functionals import NORMS, area_between, curve_gap, ecdf_area_to_diagonal
from bayescal._src.host import _NORMS, _device, _levels, _limits, _normal, _result, _vector
from bayescal._src.host import first as host_first
from bayescal._src.options import CurveKind, Norm
from bayescal._src.sorting import sort_last_axis

__all__ = ["calibration_curve", "calibration_error", "miscalibration_area", "sharpness"]

KINDS = ("quantile", "interval")


def _check_options(num_levels, kind):
    _v.check_choice(kind, "kind", KINDS)
    return _v.check_num_levels(num_levels)


def _statistic(u: jax.Array, kind: str) -> jax.Array:
    """The value whose ECDF is the curve: ``u`` (one-sided) or ``|2u - 1|`` (central)."""
    return u if kind == "quantile" else jnp.abs(2 * u - 1)


@functools.partial(jax.jit, static_argnames=("num_levels", "kind"))
def _curve_kernel(u, n, num_levels, kind):
    """The curve of ``u``; ``n`` real observations (NaN padding is counted nowhere)."""
    v = _statistic(u, kind)
    levels = jnp.linspace(0.0, 1.0, num_levels, dtype=u.dtype)
    counts = count_at_or_below(v, num_levels)
    # integer counts / int would divide in float32 even under x64: cast first
    observed = counts.astype(u.dtype) / jnp.asarray(n, u.dtype)
    return CalibrationCurve(levels, observed, jnp.ones_like(levels))


def _pit_observations(pit) -> tuple[jax.Array, jax.Array | int]:
    """Checked PIT values (NaN in a bucket's padding) and the number of observations."""
    u = _v.check_pit(pit)
    return _v.masked_nan(u), _v.observation_count(u)


_BUCKET = {"pit": -1}


# --------------------------------------------------------------------------- host twins
def _twin_sharpness(
    scale: Any = None, *, draws: Any = None, root: Any = False
) -> jax.Array | None:
    """:func:`bayescal.regression.sharpness` of scales on the host."""
    if draws is not None or scale is None or not isinstance(root, bool):
        return None
    s = _vector(scale)
    if s is None or not (_normal(s, 0) and s.min() > 0):
        return None
    s64 = s.astype(np.float64)
    top = s64.max()
    rms = math.sqrt(np.add.reduce((s64 / top) ** 2) / s.size) * top
    out = np.asarray(rms if root else rms * rms, s.dtype)
    if not (np.isfinite(out) and out >= _limits(s.dtype).tiny):
        return None  # the kernel flushes, or raises its overflow message
    return _device(out)


_KINDS = ("quantile", "interval")


_MAX_LEVELS = 10_000  # more levels: the kernel path (its own checks and limits)


def _pit(pit: Any, kind: Any) -> np.ndarray | None:
    """The values whose ECDF is the curve (``u`` or ``|2u - 1|``), sorted, or None."""
    u = _vector(pit)
    if u is None or kind not in _KINDS or not _normal(u, 0, 1):
        return None
    v = u if kind == "quantile" else np.abs(2 * u - 1)
    return np.sort(v)


def _observed(pit: Any, num_levels: Any, kind: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The levels and the curve's observed fractions ``#{v <= level} / n``."""
    if not isinstance(num_levels, int | np.integer) or isinstance(num_levels, bool):
        return None
    if not 2 <= num_levels <= _MAX_LEVELS:
        return None
    v = _pit(pit, kind)
    if v is None:
        return None
    levels = _levels(int(num_levels), v.dtype)
    counts = np.searchsorted(v, levels, side="right")
    # the kernel's counts / n: XLA multiplies by the reciprocal (an ulp from dividing)
    return levels, counts.astype(v.dtype) * (v.dtype.type(1) / v.dtype.type(v.size))


def _twin_calibration_curve(pit: Any, *, num_levels: Any = 100, kind: Any = "quantile") -> Any:
    """:func:`bayescal.regression.calibration_curve` on the host."""
    from bayescal._src.curve import CalibrationCurve

    data = _observed(pit, num_levels, kind)
    if data is None:
        return None
    levels, observed = data
    return CalibrationCurve(
        _device(levels), _device(observed), _device(np.ones_like(levels))
    )


def _twin_calibration_error(
    pit: Any, *, norm: Any = "l1", num_levels: Any = 100, kind: Any = "quantile"
) -> jax.Array | None:
    """:func:`bayescal.regression.calibration_error` on the host."""
    if norm not in _NORMS:
        return None
    data = _observed(pit, num_levels, kind)
    if data is None:
        return None
    levels, observed = data
    gap = np.abs(observed.astype(np.float64) - levels)
    if norm == "l1":
        return _result(gap.mean(), levels.dtype)
    if norm == "l2":
        return _result(math.sqrt(np.mean(gap * gap)), levels.dtype)
    return _result(gap.max(), levels.dtype)


def _twin_miscalibration_area(
    pit: Any, *, num_levels: Any = None, kind: Any = "quantile"
) -> jax.Array | None:
    """:func:`bayescal.regression.miscalibration_area` on the host."""
    if num_levels is None:  # the exact area of the ECDF (functionals.ecdf_area_to_diagonal)
        v = _pit(pit, kind)
        if v is None:
            return None
        n = v.size
        ends = np.concatenate([[0.0], v.astype(np.float64), [1.0]])
        k = np.arange(n + 1) / n

        def g(t: np.ndarray) -> np.ndarray:
            return t * np.abs(t)

        return _result(0.5 * np.sum(g(ends[1:] - k) - g(ends[:-1] - k)), v.dtype)
    data = _observed(pit, num_levels, kind)
    if data is None:
        return None
    levels, observed = data
    # functionals.area_between(levels, observed - levels): crossings exactly
    d = observed.astype(np.float64) - levels  # exact: both in the dtype
    h = np.diff(levels.astype(np.float64))
    d0, d1 = d[:-1], d[1:]
    total = np.abs(d0) + np.abs(d1)
    crossing = d0 * d1 < 0
    safe = np.where(total == 0, 1, total)
    seg = np.where(crossing, h * (d0 * d0 + d1 * d1) / (2 * safe), h * total / 2)
    return _result(seg.sum(), levels.dtype)


@host_first(_twin_calibration_curve)
@_v.validated(fuse=True, bucket=_BUCKET)
def calibration_curve(
    pit: ArrayLike, *, num_levels: int = 100, kind: CurveKind = "quantile"
) -> CalibrationCurve:
    r"""Average calibration curve of PIT values (Kuleshov et al., 2018).

    For levels :math:`p_j` = ``linspace(0, 1, num_levels)``:

    * ``kind="quantile"`` (one-sided): observed :math:`G_n(p) = \frac1n\#\{u_i \le p\}`,
      the fraction of observations at or below their predicted ``p``-quantile;
    * ``kind="interval"`` (central): :math:`\frac1n\#\{|2u_i - 1| \le p\}`, the fraction
      inside the central ``p``-interval.

    A calibrated model gives the diagonal. Computed without sorting: O(N + levels).

    Parameters
    ----------
    pit : array_like, shape [N]
        PIT values in [0, 1] (see :func:`pit_normal`, :func:`pit_draws`, ...).
    num_levels : int, default 100
        Number of levels, including 0 and 1.
    kind : {"quantile", "interval"}, default "quantile"
        One-sided (``u <= p``) or central-interval (``|2u - 1| <= p``) calibration.

    Returns
    -------
    CalibrationCurve
        ``expected`` = levels, ``observed`` = fractions, ``weight`` = ones.

    See Also
    --------
    calibration_error : Its gap to the diagonal.
    bayescal.classification.reliability_curve : The classification twin.
    bayescal.plot.calibration_curve : Draws it.

    References
    ----------
    Kuleshov, Fenner & Ermon (2018), "Accurate Uncertainties for Deep Learning Using
    Calibrated Regression", ICML.

    Examples
    --------
    >>> from bayescal.regression import calibration_curve
    >>> c = calibration_curve([0.1, 0.4, 0.8], num_levels=3)
    >>> c.expected.tolist(), [round(v, 3) for v in c.observed.tolist()]
    ([0.0, 0.5, 1.0], [0.0, 0.667, 1.0])
    """
    num_levels = _check_options(num_levels, kind)
    return _curve_kernel(*_pit_observations(pit), num_levels, kind)


@functools.partial(jax.jit, static_argnames=("num_levels", "kind", "norm"))
def _error_kernel(u, n, num_levels, kind, norm):
    c = _curve_kernel(u, n, num_levels, kind)
    return curve_gap(c.expected, c.observed, c.weight, norm)


@host_first(_twin_calibration_error)
@_v.validated(fuse=True, bucket=_BUCKET)
def calibration_error(
    pit: ArrayLike,
    *,
    norm: Norm = "l1",
    num_levels: int = 100,
    kind: CurveKind = "quantile",
) -> jax.Array:
    r"""Gap between the average calibration curve and the diagonal.

    ``norm="l1"``: mean absolute calibration error (MACE) over the levels;
    ``"l2"``: root mean squared calibration error (RMSCE); ``"max"``: the largest gap.
    Equal to uncertainty-toolbox's ``mean_absolute_calibration_error`` and
    ``root_mean_squared_calibration_error`` (``prop_type`` = ``kind``,
    ``num_bins`` = ``num_levels``) for Gaussian predictives.

    Parameters
    ----------
    pit : array_like, shape [N]
        PIT values in [0, 1].
    norm : {"l1", "l2", "max"}, default "l1"
        Mean absolute gap (MACE), root mean squared gap (RMSCE) or the largest gap.
    num_levels : int, default 100
        Number of levels, including 0 and 1.
    kind : {"quantile", "interval"}, default "quantile"
        One-sided or central-interval curve (see :func:`calibration_curve`).

    Returns
    -------
    Array, scalar
        In the dtype of ``pit``.

    See Also
    --------
    calibration_curve : The curve it summarises.
    miscalibration_area : The area between the curve and the diagonal.
    bayescal.classification.expected_calibration_error : The classification twin.

    Examples
    --------
    >>> from bayescal.regression import calibration_error
    >>> round(float(calibration_error([0.5, 0.5], num_levels=3)), 4)
    0.1667
    """
    num_levels = _check_options(num_levels, kind)
    _v.check_choice(norm, "norm", NORMS)
    return _error_kernel(*_pit_observations(pit), num_levels, kind, norm)


@functools.partial(jax.jit, static_argnames=("kind",))
def _exact_area_kernel(u, n, kind):
    # NaN padding sorts last; ecdf_area_to_diagonal uses the first n values
    return ecdf_area_to_diagonal(sort_last_axis(_statistic(u, kind)), n)


@functools.partial(jax.jit, static_argnames=("num_levels", "kind"))
def _grid_area_kernel(u, n, num_levels, kind):
    c = _curve_kernel(u, n, num_levels, kind)
    return area_between(c.expected, c.observed - c.expected)


@host_first(_twin_miscalibration_area)
@_v.validated(fuse=True, bucket=_BUCKET)
def miscalibration_area(
    pit: ArrayLike, *, num_levels: int | None = None, kind: CurveKind = "quantile"
) -> jax.Array:
    r"""Area between the average calibration curve and the diagonal.

    ``num_levels=None`` (default) gives the exact integral
    :math:`\int_0^1 |G_n(p) - p|\,dp` of the empirical curve, from the sorted values:
    with :math:`u_{(0)} = 0`, :math:`u_{(n+1)} = 1` and :math:`g(t) = t|t|`,

    .. math:: A = \tfrac12 \sum_{k=0}^{n} \big[g(u_{(k+1)} - k/n) - g(u_{(k)} - k/n)\big].

    An integer ``num_levels`` gives instead the area between the piecewise-linear curve
    on that grid and the diagonal, crossings handled exactly; this is what
    uncertainty-toolbox's ``miscalibration_area`` computes (``num_bins`` levels).

    Parameters
    ----------
    pit : array_like, shape [N]
    num_levels : int or None
    kind : {"quantile", "interval"}

    Returns
    -------
    Array, scalar

    See Also
    --------
    calibration_error : The gap at the levels.
    bayescal.core.curve_area : The area of any curve.

    Examples
    --------
    >>> from bayescal.regression import miscalibration_area
    >>> round(float(miscalibration_area([0.5])), 4)  # G jumps 0 -> 1 at 0.5
    0.25
    """
    _v.check_choice(kind, "kind", KINDS)
    u, n = _pit_observations(pit)
    if num_levels is None:
        return _exact_area_kernel(u, n, kind)
    num_levels = _v.check_num_levels(num_levels)
    return _grid_area_kernel(u, n, num_levels, kind)


@host_first(_twin_sharpness)
@_v.validated(fuse=True, bucket={"scale": -1, "draws": -1})
def sharpness(
    scale: ArrayLike | None = None,
    *,
    draws: ArrayLike | None = None,
    root: bool = False,
) -> jax.Array:
    r"""Sharpness: the mean predictive variance :math:`\frac1N\sum_i \sigma_i^2`.

    Kuleshov et al. (2018) define sharpness as the average predictive variance, in
    squared units of ``y``; ``root=True`` returns its square root (the RMS predictive
    standard deviation, in units of ``y``), which is uncertainty-toolbox's
    ``sharpness``. The command line's ``sharpness (mean variance)`` is this function's
    default. Smaller is sharper; compare models only when both are calibrated.

    Parameters
    ----------
    scale : array_like, shape [N], optional
        Predictive standard deviations.
    draws : array_like, shape [S, N], optional
        Predictive draws instead of ``scale``: the per-observation variance of the
        draws (``ddof=0``) is used.
    root : bool, default False
        Return :math:`\sqrt{\frac1N\sum_i \sigma_i^2}` (units of ``y``) instead of
        the mean variance (squared units of ``y``).

    Returns
    -------
    Array, scalar
        The mean predictive variance, or its square root with ``root=True``.

    Examples
    --------
    >>> from bayescal.regression import sharpness
    >>> s = [1.0, 3.0]
    >>> round(float(sharpness(s)), 4), round(float(sharpness(s, root=True)), 4)
    (5.0, 2.2361)
    """
    if (scale is None) == (draws is None):
        raise ValueError(
            "pass exactly one of scale (standard deviations) or draws ([S, N])."
        )
    if scale is not None:
        s = _v.as_float_array(scale, "scale")
        _v.check_ndim(s, "scale", 1)
        _v.check_nonempty(s, "scale")
        _v.check_positive(s, "scale")
        # Scaled by the largest scale so that the squares neither overflow nor underflow.
        top = jnp.max(s, axis=-1)  # the padding repeats a real scale
        safe = jnp.where(top > 0, top, 1)
        rms = jnp.sqrt(_mean_observations((s / safe) ** 2)) * safe
        if root:
            return rms
        var = rms * rms
        _v.check_less_equal(
            jnp.zeros((), var.dtype),
            jnp.where(jnp.isfinite(var) & (var > 0), 1, -1).astype(var.dtype),
            "scale",
            f"gives a mean variance outside the range of {var.dtype} (it overflows to "
            "inf or underflows to 0); pass root=True for the root mean variance, rescale "
            "the data, or enable float64 (JAX_ENABLE_X64=1)",
        )
        return var
    else:
        d = _v.as_float_array(draws, "draws")
        _v.check_ndim(d, "draws", 2)
        _v.check_nonempty(d, "draws")
        _v.check_finite(d, "draws")
        var = _mean_observations(jnp.var(d, axis=0))
    return jnp.sqrt(var) if root else var


def _mean_observations(x: jax.Array) -> jax.Array:
    """Mean over the last (observation) axis, leaving out a bucket's padding."""
    mask = _v.observation_mask(x.shape[-1])
    if mask is None:
        return jnp.mean(x, axis=-1)
    return jnp.sum(jnp.where(mask, x, 0), axis=-1) / _v.observation_count(x).astype(x.dtype)


# --------------------------------------------------------------------------- streaming
def calibration_accumulator(num_levels: int = 100, kind: CurveKind = "quantile"):
    r"""Streaming :func:`calibration_curve`: ``init / update / merge / finalize``.

    For data that come in chunks (larger than memory, read from files), live on
    several devices or hosts: the state holds integer counts per level, which merge
    by addition, so the result equals :func:`calibration_curve` on all the data at
    once, exactly, whatever the chunking.

    Parameters
    ----------
    num_levels : int, default 100
        Number of levels, including 0 and 1.
    kind : {"quantile", "interval"}, default "quantile"
        One-sided or central-interval curve (see :func:`calibration_curve`).

    Returns
    -------
    bayescal._src.accumulate.Accumulator
        A NamedTuple of pure functions: ``init() -> state``,
        ``update(state, pit) -> state`` (``pit``: a 1-D chunk of PIT values),
        ``merge(state, state) -> state`` and ``finalize(state) -> CalibrationCurve``.
        The state is a pytree of integer arrays (jit-, scan- and psum-friendly).

    See Also
    --------
    calibration_curve : The one-shot curve.
    bayescal.classification.reliability_accumulator : The classification twin.

    Notes
    -----
    ``update`` cannot raise on values (it is jitted): PIT values outside [0, 1] or
    NaN are counted as invalid and make ``finalize`` return a NaN curve, as does a
    state without data. Chunks are padded to power-of-two lengths internally (on
    the host for numpy and CPU arrays), so chunks of many sizes compile only a few
    times. Counts are kept as exact split pairs ``(high, low)`` of int32 (int64
    under x64), ``high * 2**20 + low``: a state counts up to ``2^51`` observations
    exactly in float32 mode, and ``merge`` stays exact.

    Examples
    --------
    >>> from bayescal.regression import calibration_accumulator, calibration_curve
    >>> acc = calibration_accumulator(num_levels=3)
    >>> state = acc.update(acc.init(), [0.1, 0.4])
    >>> state = acc.merge(state, acc.update(acc.init(), [0.8]))
    >>> [round(v, 3) for v in acc.finalize(state).observed.tolist()]
    [0.0, 0.667, 1.0]
    """
    from bayescal._src.accumulate import curve_accumulator

    num_levels = _check_options(num_levels, kind)
    return curve_accumulator(num_levels, kind)
