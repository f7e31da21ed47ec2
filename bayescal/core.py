"""The contract shared by both branches of bayescal.

Every public module builds on these names and nothing else of the internals:

* result types: :class:`CalibrationCurve` (both branches return it, the plots take
  it), :class:`BootstrapResult`, :class:`NullTestResult`, :class:`Band`;
* fitted objects: the :class:`Calibrator` protocol, saved and loaded by one function
  pair, :func:`save_calibrator` / :func:`load_calibrator` (:class:`CalibratorFileError`
  for bad files);
* randomness: :func:`as_key` (a key or an int seed) and the rule "a function whose
  result is random takes ``key`` first";
* option types (``Literal``): :data:`Norm`, :data:`CurveKind`, :data:`Reduction`,
  :data:`BinStrategy`, :data:`BootstrapMethod`, and :data:`KeyLike`;
* the path switch: :func:`host_path` (``with host_path(False):`` runs the compiled
  kernels that accelerators run, also for small inputs on a CPU; the environment
  variable ``BAYESCAL_HOST_PATH=0`` does the same for a whole process);
* shared algorithms: :func:`isotonic_regression` (weighted PAV), :func:`curve_error`,
  :func:`curve_area`, and the resampling engine :func:`bootstrap` /
  :func:`null_pvalue`;
* building blocks for adapters and your own jitted code (bayescal's NumPyro and ArviZ
  adapters use these and nothing private): shape buckets (:func:`bucket_size`,
  :func:`pad_axis`, :func:`paddable`, :data:`BUCKET_MAX`,
  :func:`random_prefix_stable`: a new N in a used bucket compiles nothing) and the
  input conventions of every public function (:func:`reject_masked`,
  :func:`narrows`, :func:`warn`).

The kernels (binning, sorting, tie pooling, bands) stay private in ``bayescal._src``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.backend import host_path
from bayescal._src.bands import Band
from bayescal._src.bucketing import BUCKET_MAX as _BUCKET_MAX
from bayescal._src.bucketing import (
    bucket_size,
    pad_axis,
    paddable,
    random_prefix_stable,
)
from bayescal._src.calibrator_io import (
    CalibratorFileError,
    load_calibrator,
    save_calibrator,
)
from bayescal._src.curve import CalibrationCurve
from bayescal._src.functionals import area_between, curve_gap
from bayescal._src.host import _device, _normal, _vector
from bayescal._src.host import first as _host_first
from bayescal._src.isotonic import _host_pav, isotonic_kernel
from bayescal._src.options import (
    NORMS,
    BinStrategy,
    BootstrapMethod,
    CurveKind,
    KeyLike,
    Norm,
    Reduction,
)
from bayescal._src.resampling import (
    BootstrapResult,
    NullTestResult,
    as_key,
    bootstrap,
    null_pvalue,
)
from bayescal._src.selection import paired_interval
from bayescal._src.sorting import gather_all
from bayescal._src.validation import narrows, reject_masked
from bayescal._src.warn import warn

__all__ = [
    # result types
    "CalibrationCurve",
    "BootstrapResult",
    "NullTestResult",
    "Band",
    # fitted objects
    "Calibrator",
    "save_calibrator",
    "load_calibrator",
    "CalibratorFileError",
    # randomness and option types
    "as_key",
    "KeyLike",
    "Norm",
    "CurveKind",
    "Reduction",
    "BinStrategy",
    "BootstrapMethod",
    # which path a call takes (NumPy on the host, or the compiled kernels)
    "host_path",
    # shared algorithms
    "isotonic_regression",
    "curve_error",
    "curve_area",
    "bootstrap",
    "null_pvalue",
    "paired_interval",
    # building blocks for adapters and your own jitted code
    "bucket_size",
    "pad_axis",
    "paddable",
    "BUCKET_MAX",
    "random_prefix_stable",
    "reject_masked",
    "narrows",
    "warn",
]


#: Observation axes longer than this (2^24 values) are not padded to a bucket: a copy
#: of the data then costs more than the compilation it saves.
BUCKET_MAX: int = _BUCKET_MAX


@runtime_checkable
class Calibrator(Protocol):
    """What every fitted object of both branches is.

    A runtime-checkable :class:`~typing.Protocol`. Each fitted object is a frozen
    dataclass registered as a JAX pytree (arrays are leaves, options are static), so
    it passes through :func:`jax.jit` and stacks under :func:`jax.vmap`; callable
    on new predictions; comparable with ``==`` without raising (same class, options
    and bitwise-equal arrays); saved and loaded by :func:`save_calibrator` /
    :func:`load_calibrator`. Its repr is short at any size: scalar fields print as
    numbers, vectors of up to 6 values in full, longer arrays as their size, dtype and
    mean.

    Examples
    --------
    >>> from bayescal.core import Calibrator
    >>> from bayescal.regression import fit_isotonic_recalibrator
    >>> isinstance(fit_isotonic_recalibrator([0.1, 0.5, 0.7]), Calibrator)
    True
    >>> fit_isotonic_recalibrator([0.1, 0.5, 0.7])  # doctest: +NORMALIZE_WHITESPACE
    IsotonicLevelCalibrator(raw=[0. , 0.1, 0.5, 0.7, 1. ],
                            calibrated=[0. , 0.3333, 0.6667, 1. , 1. ])

    Saved and loaded back, equal:

    >>> import os, tempfile
    >>> from bayescal.core import load_calibrator, save_calibrator
    >>> from bayescal.classification import fit_platt
    >>> cal = fit_platt([1, 0, 0], [5.0, -4.0, 1.0], input="score")
    >>> path = os.path.join(tempfile.mkdtemp(), "platt.npz")
    >>> save_calibrator(cal, path)
    >>> load_calibrator(path) == cal
    True
    """

    _data_fields: tuple[str, ...]
    _meta_fields: tuple[str, ...]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Apply the fitted map to new predictions."""


def _twin_isotonic_regression(
    y: Any, *, weights: Any = None, increasing: Any = True
) -> jax.Array | None:
    """:func:`isotonic_regression` of one concrete host row, without a program: the PAV
    of the kernel's host callback (``_src.isotonic._host_pav``: scipy's C++ PAV) on the
    inputs in the kernel's dtype, after the kernel's checks. Up to ``BUCKET_MAX`` values,
    not the host path's ``HOST_MAX``: the fit is the callback either way, and the
    program around it (padding, checks, transfers) made a weighted call at N = 1e6
    2.3x scipy's time (40 against 17 ms) where this takes 1.3x (21 against 16 ms;
    2-core CPU machine, 2026-11-29)."""
    if not isinstance(increasing, bool):
        return None
    v = _vector(y, _BUCKET_MAX)
    if v is None or not _normal(v):
        return None  # other shapes, bad or subnormal values (flushed by XLA): the kernel
    if weights is None:
        w = np.ones_like(v)
    else:
        w = _vector(weights, _BUCKET_MAX)
        if w is None or w.shape != v.shape:
            return None
        w = w.astype(v.dtype)
        if not (_normal(w, 0) and w.min() > 0):
            return None
    return _device(_host_pav(v, w, increasing))


@_host_first(_twin_isotonic_regression)
@_v.validated(fuse=True, bucket={"y": -1, "weights": -1}, per_observation=-1)
def isotonic_regression(
    y: ArrayLike, *, weights: ArrayLike | None = None, increasing: bool = True
) -> jax.Array:
    r"""Weighted isotonic regression of ordered data (pool adjacent violators).

    Solves :math:`\min_{f_1 \le \dots \le f_n} \sum_i w_i (y_i - f_i)^2`.

    Parameters
    ----------
    y : array_like, shape [..., n]
        Responses, already ordered by the covariate along the last axis. Leading axes
        are a batch (each row is fitted on its own).
    weights : array_like, shape [..., n], optional
        Positive observation weights (default 1).
    increasing : bool, default True
        Fit a nondecreasing (True) or nonincreasing (False) sequence.

    Returns
    -------
    Array, shape like ``y``
        The fitted values, in ``y``'s dtype.

    Notes
    -----
    Equal to :func:`scipy.optimize.isotonic_regression` (whose C++ PAV it calls on the
    host through :func:`jax.pure_callback`). Works under ``jit``, ``vmap`` and ``grad``:
    the derivative is the exact O(n) block-average rule.

    Examples
    --------
    >>> from bayescal.core import isotonic_regression
    >>> isotonic_regression([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    """
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y, weights = gather_all((y, weights), "Isotonic regression (PAV)", (-1, -1))
    y = _v.as_float_array(y, "y")
    _v.check_ndim(y, "y", range(1, 8))
    _v.check_nonempty(y, "y")
    _v.check_finite(y, "y")
    if weights is None:
        w = jnp.ones_like(y)
    else:
        w = _v.as_float_array(weights, "weights").astype(y.dtype)
        _v.check_broadcastable("y", tuple(y.shape), weights=w)
        _v.check_positive(w, "weights")
        w = jnp.broadcast_to(w, y.shape)
    if not isinstance(increasing, bool):
        raise TypeError(f"increasing must be a bool; got {increasing!r}.")
    mask = _v.observation_mask(y.shape[-1])
    if mask is not None:
        # A bucket's padding: the row's largest value (smallest when decreasing) with
        # weight 1. Every fitted value lies between the row's extremes, so the padding
        # adds no violation and never changes a real block; sliced off on the host.
        end = (
            jnp.max(y, axis=-1, keepdims=True)
            if increasing
            else jnp.min(y, axis=-1, keepdims=True)
        )
        y = jnp.where(mask, y, end)
        w = jnp.where(mask, w, jnp.ones((), w.dtype))
    return isotonic_kernel(y, w, increasing)


def curve_error(curve: CalibrationCurve, *, norm: Norm = "l1") -> jax.Array:
    """Weighted gap between a curve's observed and expected values.

    ``norm="l1"``: :math:`\\sum_k w_k |o_k - e_k| / \\sum_k w_k`; ``"l2"``: the root of
    the weighted mean squared gap; ``"max"``: the largest gap over points of positive
    weight. For a regression curve (unit weights) these are MACE, RMSCE and the max
    calibration error; for a reliability curve (count weights) ECE, its L2 version and
    MCE.

    Parameters
    ----------
    curve : CalibrationCurve
        The curve, from either branch.
    norm : {"l1", "l2", "max"}
        Which functional of the gaps.

    Returns
    -------
    Array, scalar
        The weighted gap.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.core import CalibrationCurve, curve_error
    >>> c = CalibrationCurve(jnp.array([0.2, 0.8]), jnp.array([0.3, 0.6]), jnp.array([1, 3]))
    >>> round(float(curve_error(c)), 4)
    0.175
    """
    return _curve_error(curve.expected, curve.observed, curve.weight, norm=norm)


# A curve's points (levels, bins, sorted forecasts) are padded to a bucket like
# observations: curves of any length in one bucket share one program. Called inside
# another public function (e.g. the ECE's kernel), a curve is taken as it is: that
# function's bucket is of its observations, not of the curve's points.
_POINTS = {"expected": -1, "observed": -1, "weight": -1}


@_v.validated(fuse=True, bucket=_POINTS, nested_bucket=False)
def _curve_error(expected: Any, observed: Any, weight: Any, *, norm: str) -> jax.Array:
    _v.check_choice(norm, "norm", NORMS)
    expected, observed, weight = (jnp.asarray(a) for a in (expected, observed, weight))
    # weight 0 in a bucket's padding: left out of every norm
    weight = _v.mask_weights(weight, weight.shape, weight.dtype)
    return curve_gap(expected, observed, weight, norm)


def curve_area(curve: CalibrationCurve) -> jax.Array:
    """Area between the piecewise-linear curve and the diagonal, crossings exact.

    Parameters
    ----------
    curve : CalibrationCurve
        The curve; ``expected`` must be sorted.

    Returns
    -------
    Array, scalar
        The area.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.core import CalibrationCurve, curve_area
    >>> x = jnp.array([0.0, 1.0])
    >>> c = CalibrationCurve(x, jnp.array([0.5, 0.5]), jnp.ones(2))
    >>> float(curve_area(c))
    0.25
    """
    return _curve_area(curve.expected, curve.observed)


@_v.validated(fuse=True, bucket={"expected": -1, "observed": -1}, nested_bucket=False)
def _curve_area(expected: Any, observed: Any) -> jax.Array:
    expected, observed = jnp.asarray(expected), jnp.asarray(observed)
    # A bucket's padding repeats the last point: segments of width 0, which add 0 (the
    # gaps of a curve are finite), so no mask is needed.
    return area_between(expected, observed - expected)
