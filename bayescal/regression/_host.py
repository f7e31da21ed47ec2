"""NumPy twins of the regression functions and recalibrators (the host path).

Small concrete inputs on a CPU are answered here (see :mod:`bayescal._src.host` for
the rule, the switch and the shared array helpers); each twin returns None for
anything it is not sure about, and the kernel path then decides. Equal to the kernels
(tests/test_host_path.py).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import numpy as np

from bayescal._src.host import (
    _BAD,
    _NORMS,
    _REDUCTIONS,
    _bootstrap_on_host,
    _bucket_padded,
    _device,
    _floats,
    _flushed,
    _interp,
    _kernel_bandwidth,
    _knots,
    _levels,
    _limits,
    _linear_pairs,
    _linear_test,
    _median_heuristic,
    _normal,
    _observation_weights,
    _reduce,
    _result,
    _scalar,
    _scalar_array,
    _unbiased_draws,
    _unbiased_on_host,
    _vector,
)
from bayescal._src.validation import host_resident


# --------------------------------------------------------------------------- conformal
@functools.lru_cache(maxsize=256)
def _rank(n: int, alpha: Any) -> int:
    from bayescal.regression._conformal import conformal_rank

    return conformal_rank(n, alpha)  # raises for a bad alpha or too small an n


def _kth(scores: np.ndarray, k: int) -> np.ndarray | None:
    """The ``k``-th smallest score (0-d), or None if subnormal (the kernel has 0)."""
    q = np.partition(scores, k - 1)[k - 1]
    return None if 0 < abs(q) < _limits(q.dtype).tiny else np.asarray(q)


def fit_conformal(
    y_true: Any, loc: Any, scale: Any = None, *, alpha: Any = 0.1, weights: Any = None
) -> Any:
    """:func:`bayescal.regression.fit_conformal` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted quantile)
    from bayescal.regression._conformal import ConformalCalibrator

    y, mu = _vector(y_true), _vector(loc)
    if y is None or mu is None or y.shape != mu.shape:
        return None
    k = _rank(y.size, alpha)
    scores = np.abs(y - mu)  # NumPy promotes float32 and float64 as JAX does
    lim = _limits(scores.dtype)
    if not scores.max() <= lim.big:  # NaN or inf in an input
        return None
    # With one dtype and every score at least 2 safe, no difference is subnormal and
    # a subnormal input (0 for XLA) changes none. Else every value is checked.
    plain = y.dtype == mu.dtype and scores.min() >= 2 * lim.safe
    if not (plain or (_normal(y) and _normal(mu) and _normal(scores))):
        return None
    if scale is not None:
        s = _vector(scale)
        if s is None or s.shape != y.shape or not _normal(s, _limits(s.dtype).tiny):
            return None
        scores = scores / s
    q = _kth(scores, k)  # the k-th commutes with XLA's flush of subnormal scores
    if q is None:
        return None
    return ConformalCalibrator(_device(q), float(alpha), scale is not None)


def fit_conformalized_quantile(
    y_true: Any, lower: Any, upper: Any, *, alpha: Any = 0.1, weights: Any = None
) -> Any:
    """:func:`bayescal.regression.fit_conformalized_quantile` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted quantile)
    from bayescal.regression._conformal import ConformalizedQuantileCalibrator

    y, lo, hi = _vector(y_true), _vector(lower), _vector(upper)
    if y is None or lo is None or hi is None or not y.shape == lo.shape == hi.shape:
        return None
    if not (_normal(y) and _normal(lo) and _normal(hi)):
        return None
    # max(lo - y, y - hi): XLA flushes subnormal results to 0, a nondecreasing map
    # that the k-th smallest commutes with; only the k-th must not be subnormal.
    q = _kth(np.maximum(lo - y, y - hi), _rank(y.size, alpha))
    if q is None:
        return None
    return ConformalizedQuantileCalibrator(_device(q), float(alpha))


def _quantile(calibrator: Any) -> np.ndarray | None:
    """A fitted calibrator's quantile as a 0-d array: 0, or at least ``safe``."""
    q = calibrator.quantile
    if not (isinstance(q, jax.Array) and q.ndim == 0 and host_resident(q)):
        return None
    q = np.asarray(q)
    v = abs(q.item())
    lim = _limits(q.dtype)
    return q if v == 0 or lim.safe <= v <= lim.big else None


def _addable(x: np.ndarray, half: np.ndarray, zero: bool) -> bool:
    """Whether ``x -/+ half`` in NumPy is what XLA computes, for finite ``x``.

    ``half`` holds 0 (``zero``) or only values of at least ``safe``: then a
    subnormal ``x`` (0 for XLA) is lost in the rounding and no result is subnormal.
    Where the result is ``x`` itself (``zero``), or ``x`` is converted to another
    dtype first, ``x`` must have no subnormal value.
    """
    if zero or x.dtype.itemsize < half.dtype.itemsize:  # float32 x, float64 half
        return _normal(x.reshape(-1))
    return bool(np.abs(x).max() <= _limits(x.dtype).big)


def conformal_interval(calibrator: Any, loc: Any, scale: Any = None) -> Any:
    """``ConformalCalibrator.__call__`` on the host."""
    q = _quantile(calibrator)
    mu = _floats(loc)
    if q is None or mu is None or mu.size == 0:
        return None
    if calibrator.normalized:
        s = _floats(scale) if scale is not None else None
        if s is None or s.size == 0 or not _normal(s.reshape(-1), _limits(s.dtype).tiny):
            return None
        if np.broadcast_shapes(s.shape, mu.shape) != mu.shape:
            return None
        half = q * s
        m = np.abs(half)
        zero = not m.any()
        if not (zero or m.min() >= _limits(half.dtype).safe):
            return None
    elif scale is not None:
        return None
    else:
        half, zero = q, q.item() == 0
    if not _addable(mu, half, zero):
        return None
    return _device(mu - half), _device(mu + half)  # in the kernel's result dtype


def cqr_interval(calibrator: Any, lower: Any, upper: Any) -> Any:
    """``ConformalizedQuantileCalibrator.__call__`` on the host."""
    q = _quantile(calibrator)
    lo, hi = _floats(lower), _floats(upper)
    if q is None or lo is None or hi is None or lo.shape != hi.shape or lo.size == 0:
        return None
    zero = q.item() == 0
    if not (_addable(lo, q, zero) and _addable(hi, q, zero)):
        return None
    return _device(lo - q), _device(hi + q)


def fit_isotonic_recalibrator(pit: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.regression.fit_isotonic_recalibrator` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted ECDF)
    from bayescal.regression._recalibration import IsotonicLevelCalibrator

    u = _vector(pit)
    if u is None or not _normal(u, 0, 1):
        return None
    s = np.sort(u)
    inside = s[(s > 0) & (s < 1)]
    if inside.size < 2 or inside[0] == inside[-1]:
        return None  # the kernel path raises its message
    dtype = s.dtype
    ecdf = np.searchsorted(s, s, side="right").astype(dtype) / dtype.type(s.size)
    zero, one = np.zeros(1, dtype), np.ones(1, dtype)
    raw = np.concatenate([zero, s, one])
    calibrated = np.concatenate([zero, ecdf, one])
    return IsotonicLevelCalibrator(_device(raw), _device(calibrated))


def map_levels(calibrator: Any, levels: Any, inverse: bool = False) -> Any:
    """``IsotonicLevelCalibrator.__call__`` (or ``inverse``) on the host."""
    knots = _knots(calibrator.raw, calibrator.calibrated)
    p = _floats(levels)
    if knots is None or p is None or p.size == 0:
        return None
    xp, fp = knots[::-1] if inverse else knots
    p = p.astype(xp.dtype)
    if not _normal(p.reshape(-1), 0, 1):
        return None
    out = _interp(p, xp, fp)
    return _device(np.where(p <= 0, 0, np.where(p >= 1, 1, out)).astype(p.dtype))


def map_levels_inverse(calibrator: Any, levels: Any) -> Any:
    """``IsotonicLevelCalibrator.inverse`` on the host."""
    return map_levels(calibrator, levels, inverse=True)


# --------------------------------------------------------------------------- regression
_ERFC = np.frompyfunc(math.erfc, 1, 1)  # scipy.special's import costs ~0.2 s; this ~0


def ndtr(z: Any) -> np.ndarray:
    """The standard normal CDF in float64, ``erfc(-z / sqrt 2) / 2`` (accurate tails)."""
    z = np.asarray(z, np.float64)
    return 0.5 * _ERFC(-z * math.sqrt(0.5)).astype(np.float64)


def crps_standard_normal(t: np.ndarray) -> np.ndarray:
    """CRPS of N(0, 1) at ``t``, in float64 (Gneiting & Raftery 2007, closed form)."""
    t = np.asarray(t, np.float64)
    pdf = np.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)
    return t * (2 * ndtr(t) - 1) + 2 * pdf - 1 / math.sqrt(math.pi)


def _normal_predictive(
    y_true: Any, loc: Any, scale: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``y``, ``scale`` and the standardized residual ``z`` in the kernels' arithmetic
    (``(y - loc) / scale`` in the common dtype), or None."""
    y, m, s = _vector(y_true), _vector(loc), _vector(scale)
    if y is None or m is None or s is None or not y.shape == m.shape == s.shape:
        return None
    if not y.dtype == m.dtype == s.dtype:
        return None  # the kernel's promotion decides
    if not (_normal(y) and _normal(m) and _normal(s, 0) and s.min() > 0):
        return None
    d = y - m
    if not _normal(d):
        return None
    z = d / s
    return (y, s, z) if _normal(z) else None


def pit_normal(y_true: Any, loc: Any, scale: Any) -> jax.Array | None:
    """:func:`bayescal.regression.pit_normal` on the host."""
    data = _normal_predictive(y_true, loc, scale)
    if data is None:
        return None
    _, _, z = data
    return _device(_flushed(ndtr(z).astype(z.dtype)))


def crps_normal(
    y_true: Any, loc: Any, scale: Any, *, weights: Any = None, reduction: str = "mean"
) -> jax.Array | None:
    """:func:`bayescal.regression.crps_normal` on the host."""
    if reduction not in _REDUCTIONS:
        return None
    data = _normal_predictive(y_true, loc, scale)
    if data is None:
        return None
    y, s, z = data
    w = _observation_weights(weights, y)
    if w is _BAD:
        return None
    crps = s * crps_standard_normal(z)
    if reduction == "none":
        return _device(_flushed(crps.astype(y.dtype)))
    return _reduce(crps, w, reduction, y.dtype)


def sharpness(
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


def calibration_curve(pit: Any, *, num_levels: Any = 100, kind: Any = "quantile") -> Any:
    """:func:`bayescal.regression.calibration_curve` on the host."""
    from bayescal._src.curve import CalibrationCurve

    data = _observed(pit, num_levels, kind)
    if data is None:
        return None
    levels, observed = data
    return CalibrationCurve(
        _device(levels), _device(observed), _device(np.ones_like(levels))
    )


def calibration_error(
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


def miscalibration_area(
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


def fit_sigma_scaling(
    y_true: Any,
    loc: Any,
    scale: Any,
    *,
    family: Any = "normal",
    df: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.regression.fit_sigma_scaling` (Normal family) on the host."""
    if family != "normal" or df is not None:
        return None
    from bayescal.regression._recalibration import SigmaScalingCalibrator

    data = _normal_predictive(y_true, loc, scale)
    if data is None:
        return None
    y, _, z = data
    if not np.abs(z).max() < 1e18:  # z * z overflows float32 in the kernel
        return None
    z2 = z.astype(np.float64) ** 2
    w = _observation_weights(weights, y)
    if w is _BAD:
        return None
    if w is None:
        total, wsum = np.add.reduce(z2), float(z.size)
    else:
        total, wsum = np.add.reduce(w * z2), np.add.reduce(w, dtype=np.float64)
    if not total > 0:
        return None  # every residual 0: the kernel raises its message
    factor = np.asarray(math.sqrt(total / wsum), y.dtype)
    if not _normal(factor.reshape(1), _limits(y.dtype).tiny):
        return None
    return SigmaScalingCalibrator(_device(factor), "normal", None)


def sigma_apply(calibrator: Any, scale: Any) -> jax.Array | None:
    """``SigmaScalingCalibrator.__call__`` on the host."""
    s = _floats(scale)
    factor = _scalar(calibrator.factor)
    if s is None or factor is None or s.size == 0:
        return None
    flat = s.reshape(-1)
    if not (_normal(flat, 0) and flat.min() > 0):
        return None
    out = (s * factor).astype(s.dtype)
    return _device(out) if _normal(out.reshape(-1), 0) else None


def _regression_skce_inputs(
    y_true: Any, loc: Any, scale: Any, bandwidth: Any, target_bandwidth: Any, minimum: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float] | None:
    """Checked targets, means and scales (one dtype, ``[N]``, at least ``minimum``)
    and the two bandwidths (the median heuristics where not given), or None."""
    y, m, s = _vector(y_true), _vector(loc), _vector(scale)
    if y is None or m is None or s is None or not y.shape == m.shape == s.shape:
        return None
    if not y.dtype == m.dtype == s.dtype or y.size < minimum:
        return None
    if not (_normal(y) and _normal(m) and _normal(s, 0) and s.min() > 0):
        return None
    nu, ell = _kernel_bandwidth(bandwidth), _kernel_bandwidth(target_bandwidth)
    if (nu is None and bandwidth is not None) or (ell is None and target_bandwidth is not None):
        return None
    nu = _median_heuristic(m, s) if nu is None else nu
    ell = _median_heuristic(y) if ell is None else ell
    return y, m, s, nu, ell


def _regression_linear_terms(
    y_true: Any, loc: Any, scale: Any, estimator: Any, bandwidth: Any, target_bandwidth: Any
) -> tuple[np.ndarray, float, float, Any] | None:
    """The linear SKCE's terms ``h_{2i, 2i+1}`` (float64) of Gaussian predictives, the
    two bandwidths and the dtype, or None."""
    if estimator != "linear":
        return None
    data = _regression_skce_inputs(y_true, loc, scale, bandwidth, target_bandwidth, 4)
    if data is None:
        return None
    y, m, s, nu, ell = data
    from bayescal.regression._kernel import _h

    # the kernel's bandwidths rounded to the inputs' dtype, the kernel's formula
    nu64, ell64 = float(np.asarray(nu, y.dtype)), float(np.asarray(ell, y.dtype))
    with np.errstate(over="ignore", under="ignore"):
        terms = _linear_pairs(functools.partial(_h, nu=nu64, ell=ell64, xp=np), (y, m, s))
    return terms, nu, ell, y.dtype


def kernel_calibration_error_regression(
    y_true: Any,
    loc: Any,
    scale: Any,
    *,
    estimator: Any = "unbiased",
    bandwidth: Any = None,
    target_bandwidth: Any = None,
) -> Any:
    """:func:`bayescal.regression.kernel_calibration_error` with ``estimator="linear"``
    on the host (O(N)); the quadratic estimator with the median heuristics and the
    observations' terms computed here and the pair sum alone compiled
    (``kernel_calibration.host_program``: half the compilation of the validated
    program, which also sorts for the median)."""
    if estimator == "unbiased":
        from bayescal.regression._kernel import _compiler_options, _error_pairs, _rows

        data = _regression_skce_inputs(y_true, loc, scale, bandwidth, target_bandwidth, 2)
        if data is None:
            return None
        y, m, s, nu, ell = data
        dt = y.dtype.type
        rows, w = _bucket_padded(_rows(y, m, s, dt(ell), dt(nu), xp=np), y.size)
        return _unbiased_on_host(_error_pairs, (rows, w), y.size, y.dtype, _compiler_options)
    data = _regression_linear_terms(y_true, loc, scale, estimator, bandwidth, target_bandwidth)
    if data is None:
        return None
    terms, _, _, dtype = data
    return _result(terms.mean(), dtype)


def kernel_calibration_test_regression(
    y_true: Any,
    loc: Any,
    scale: Any,
    *,
    estimator: Any = "linear",
    bandwidth: Any = None,
    target_bandwidth: Any = None,
    key: Any = None,
    num_samples: Any = 500,
    method: Any = "auto",
) -> Any:
    """:func:`bayescal.regression.kernel_calibration_test` with the linear estimator
    on the host: the normal approximation of ``kernel_calibration.linear_test``; the
    unbiased test with the median heuristics and the bootstrap's counts computed here
    (:func:`bootstrap_counts`), the pair values in the kernel: the bootstrap's pair
    sums alone compiled (:func:`_bootstrap_on_host`) where the counts were drawn
    here, else the validated program."""
    from bayescal._src.kernel_calibration import METHODS
    from bayescal.regression import _kernel as _rk

    if method not in METHODS:
        return None  # the public function's check names it
    if estimator == "unbiased":
        data = _regression_skce_inputs(y_true, loc, scale, bandwidth, target_bandwidth, 2)
        draws = _unbiased_draws(key, num_samples, method, _rk.AUTO_BUDGET, data and data[0])
        if data is None or draws is None:
            return None
        y, m, s, nu, ell = data
        k, how, counts = draws
        if counts is None:
            return _rk._kct(
                y, m, s, k, counts, estimator="unbiased",
                bandwidth=_scalar_array(nu, y.dtype),
                target_bandwidth=_scalar_array(ell, y.dtype), num_samples=num_samples,
                method=how,
            )
        dt = y.dtype.type
        rows, w = _bucket_padded(_rk._rows(y, m, s, dt(ell), dt(nu), xp=np), y.size)
        uq, pv = _bootstrap_on_host(_rk._bootstrap_pairs, rows, w, counts, _rk._compiler_options)
        return _rk.KernelCalibrationTest(*(_result(v, y.dtype) for v in (uq, pv, nu, ell)))
    data = _regression_linear_terms(y_true, loc, scale, estimator, bandwidth, target_bandwidth)
    if data is None:
        return None
    terms, nu, ell, dtype = data
    mean, p = _linear_test(terms)
    return _rk.KernelCalibrationTest(*(_result(v, dtype) for v in (mean, p, nu, ell)))
