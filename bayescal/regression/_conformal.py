"""Split-conformal prediction intervals: the frequentist baseline.

Fitted on a calibration split, like the recalibrators, and returned as frozen pytrees
whose call gives ``(lower, upper)`` on new predictions:

* :func:`fit_conformal`: absolute residuals ``|y - loc|`` (Vovk et al.; Lei et al.,
  2018), or scale-normalized residuals ``|y - loc| / scale`` when a predictive scale is
  given;
* :func:`fit_conformalized_quantile`: conformalized quantile regression (CQR, Romano,
  Patterson & Candes, 2019) on predicted lower / upper quantiles.

Both use the finite-sample quantile: the ``k``-th smallest of the ``n`` calibration
scores with ``k = ceil((n + 1)(1 - alpha))``, which gives marginal coverage
``>= 1 - alpha`` on exchangeable data (and ``< 1 - alpha + 1 / (n + 1)`` without ties).
"""

from __future__ import annotations

import functools
import math
import numbers
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.host import _device, _floats, _limits, _normal, _vector
from bayescal._src.host import first as host_first
from bayescal._src.options import coverage_and_alpha
from bayescal._src.pytree import pytree_dataclass
from bayescal._src.reduce import check_weights
from bayescal._src.sorting import sort_last_axis
from bayescal._src.ties import argsort_last_axis
from bayescal._src.validation import host_resident

__all__ = [
    "ConformalCalibrator",
    "ConformalizedQuantileCalibrator",
    "fit_conformal",
    "fit_conformalized_quantile",
    "conformal_rank",
]


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool | np.bool_) or not isinstance(alpha, numbers.Real):
        raise TypeError(
            f"alpha must be a float in (0, 1), the miscoverage (0.1 for 90% "
            f"intervals); got {type(alpha).__name__} {alpha!r}."
        )
    if not 0 < float(alpha) < 1:
        raise ValueError(
            f"alpha must be a float in (0, 1), the miscoverage (0.1 for 90% intervals); "
            f"got {alpha!r}."
        )
    return float(alpha)


def conformal_rank(n: int, alpha: float) -> int:
    """The rank ``k = ceil((n + 1)(1 - alpha))`` of the conformal quantile.

    ``alpha`` is read as the shortest decimal that prints as it (``0.1`` is 1/10, not
    the binary float just above it), so that e.g. ``n = 19, alpha = 0.1`` gives
    ``k = 18`` exactly. Raises ``ValueError`` when ``k > n``: the calibration set is
    too small for that ``alpha``.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float in (0, 1)
        Miscoverage.

    Returns
    -------
    int
        The rank, in ``[1, n]``.

    Examples
    --------
    >>> from bayescal.regression import conformal_rank
    >>> conformal_rank(19, 0.1), conformal_rank(100, 0.1)
    (18, 91)
    """
    alpha = _check_alpha(alpha)
    k = math.ceil((n + 1) * (1 - Fraction(repr(alpha))))
    if k > n:
        need = math.ceil(Fraction(1) / Fraction(repr(alpha))) - 1
        raise ValueError(
            f"the calibration set has n={n} observations, too few for alpha={alpha}: "
            f"the conformal rank ceil((n + 1)(1 - alpha)) = {k} exceeds n, so the "
            f"interval would be infinite. Use at least {need} calibration observations "
            "or a larger alpha."
        )
    return max(k, 1)


@jax.jit
def _kth_smallest(
    scores: jax.Array, k: jax.Array, mask: jax.Array | None = None
) -> jax.Array:
    """The ``k``-th smallest score (``k`` an array: one program for every rank).

    ``mask``: the real scores of a padded bucket; the padding is set to +inf, so it
    sorts after every real score and the rank ``k <= n`` never reaches it.
    """
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.asarray(jnp.inf, scores.dtype))
    return jnp.take(sort_last_axis(scores), k - 1, axis=-1)


def _rank(n: int, alpha: float) -> np.ndarray:
    """:func:`conformal_rank` as an int32 array argument (traced, not static)."""
    return np.asarray(conformal_rank(n, alpha), np.int32)


# --------------------------------------------------------------------------- host twins
@functools.lru_cache(maxsize=256)
def _twin_rank(n: int, alpha: Any) -> int:

    return conformal_rank(n, alpha)  # raises for a bad alpha or too small an n


def _kth(scores: np.ndarray, k: int) -> np.ndarray | None:
    """The ``k``-th smallest score (0-d), or None if subnormal (the kernel has 0)."""
    q = np.partition(scores, k - 1)[k - 1]
    return None if 0 < abs(q) < _limits(q.dtype).tiny else np.asarray(q)


def _twin_fit_conformal(
    y_true: Any, loc: Any, scale: Any = None, *, alpha: Any = 0.1, weights: Any = None
) -> Any:
    """:func:`bayescal.regression.fit_conformal` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted quantile)

    y, mu = _vector(y_true), _vector(loc)
    if y is None or mu is None or y.shape != mu.shape:
        return None
    k = _twin_rank(y.size, alpha)
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


def _twin_fit_conformalized_quantile(
    y_true: Any, lower: Any, upper: Any, *, alpha: Any = 0.1, weights: Any = None
) -> Any:
    """:func:`bayescal.regression.fit_conformalized_quantile` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted quantile)

    y, lo, hi = _vector(y_true), _vector(lower), _vector(upper)
    if y is None or lo is None or hi is None or not y.shape == lo.shape == hi.shape:
        return None
    if not (_normal(y) and _normal(lo) and _normal(hi)):
        return None
    # max(lo - y, y - hi): XLA flushes subnormal results to 0, a nondecreasing map
    # that the k-th smallest commutes with; only the k-th must not be subnormal.
    q = _kth(np.maximum(lo - y, y - hi), _twin_rank(y.size, alpha))
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


def _twin_conformal_interval(calibrator: Any, loc: Any, scale: Any = None) -> Any:
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


def _twin_cqr_interval(calibrator: Any, lower: Any, upper: Any) -> Any:
    """``ConformalizedQuantileCalibrator.__call__`` on the host."""
    q = _quantile(calibrator)
    lo, hi = _floats(lower), _floats(upper)
    if q is None or lo is None or hi is None or lo.shape != hi.shape or lo.size == 0:
        return None
    zero = q.item() == 0
    if not (_addable(lo, q, zero) and _addable(hi, q, zero)):
        return None
    return _device(lo - q), _device(hi + q)


@pytree_dataclass(data=("quantile",), meta=("alpha", "normalized"))
class ConformalCalibrator:
    r"""Fitted split-conformal intervals: ``loc -/+ quantile`` (times ``scale``).

    Attributes
    ----------
    quantile : Array, scalar
        The conformal quantile :math:`\hat q` of the calibration scores.
    alpha : float
        The miscoverage it was fitted for.
    normalized : bool
        Scores were ``|y - loc| / scale``: the interval is ``loc -/+ q * scale``.
    """

    quantile: jax.Array
    alpha: float = 0.1
    normalized: bool = False

    @property
    def coverage(self) -> float:
        """The nominal coverage it was fitted for, ``1 - alpha``."""
        return coverage_and_alpha(None, self.alpha)[0]

    @host_first(_twin_conformal_interval)
    def __call__(
        self, loc: ArrayLike, scale: ArrayLike | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """The interval ``(lower, upper)`` for new predictive means (and scales)."""
        if self.normalized and scale is None:
            raise ValueError(
                "this calibrator was fitted on scale-normalized residuals; pass the "
                "test predictions' scale too: calibrator(loc, scale)."
            )
        if not self.normalized and scale is not None:
            raise ValueError(
                "this calibrator was fitted on absolute residuals (no scale); call it "
                "with loc only, or refit with fit_conformal(y_true, loc, scale)."
            )
        return _conformal_interval(self.quantile, loc, scale)


@pytree_dataclass(data=("quantile",), meta=("alpha",))
class ConformalizedQuantileCalibrator:
    r"""Fitted CQR intervals: ``(lower - quantile, upper + quantile)``.

    Attributes
    ----------
    quantile : Array, scalar
        The conformal quantile :math:`\hat q` of the CQR scores (negative when the
        predicted intervals were too wide: they shrink).
    alpha : float
        The miscoverage it was fitted for.
    """

    quantile: jax.Array
    alpha: float = 0.1

    @property
    def coverage(self) -> float:
        """The nominal coverage it was fitted for, ``1 - alpha``."""
        return coverage_and_alpha(None, self.alpha)[0]

    @host_first(_twin_cqr_interval)
    def __call__(self, lower: ArrayLike, upper: ArrayLike) -> tuple[jax.Array, jax.Array]:
        """The conformalized interval for new predicted lower / upper quantiles."""
        return _cqr_interval(self.quantile, lower, upper)


# The intervals on new predictions: one program per bucket of their length.
@_v.validated(fuse=True, bucket={"loc": -1, "scale": -1}, per_observation=-1)
def _conformal_interval(quantile, loc, scale):
    mu = _v.as_float_array(loc, "loc")
    _v.check_finite(mu, "loc")
    if scale is not None:
        s = _v.as_float_array(scale, "scale")
        _v.check_broadcastable("loc", tuple(mu.shape), scale=s)
        _v.check_positive(s, "scale")
        half = quantile * s
    else:
        half = quantile
    dtype = jnp.result_type(mu.dtype, jnp.asarray(half).dtype)
    return (mu - half).astype(dtype), (mu + half).astype(dtype)


@_v.validated(fuse=True, bucket={"lower": -1, "upper": -1}, per_observation=-1)
def _cqr_interval(quantile, lower, upper):
    lo = _v.as_float_array(lower, "lower")
    hi = _v.as_float_array(upper, "upper")
    _v.check_same_shape(lower=lo, upper=hi)
    _v.check_finite(lo, "lower")
    _v.check_finite(hi, "upper")
    return lo - quantile, hi + quantile


def _one_d(x: Any, name: str) -> jax.Array:
    """A 1-D, non-empty float array (shapes only: the values are checked in the fit)."""
    a = _v.as_float_array(x, name)
    _v.check_ndim(a, name, 1)
    _v.check_nonempty(a, name)
    return a


def fit_conformal(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike | None = None,
    *,
    coverage: float | None = None,
    alpha: float | None = None,
    weights: ArrayLike | None = None,
) -> ConformalCalibrator:
    r"""Split-conformal intervals from a calibration split.

    Scores :math:`s_i = |y_i - \mu_i|` (or :math:`|y_i - \mu_i| / \sigma_i` with
    ``scale``); :math:`\hat q` is the :math:`k`-th smallest with
    :math:`k = \lceil (n + 1)(1 - \alpha) \rceil` (:func:`conformal_rank`). The
    interval on a new point is :math:`\mu \pm \hat q` (or :math:`\mu \pm \hat q\sigma`),
    with marginal coverage :math:`\ge 1 - \alpha` on exchangeable data whatever the
    model.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values of the calibration split.
    loc : array_like, shape [N]
        Point predictions (predictive means or medians) on it.
    scale : array_like, shape [N], optional
        Predictive standard deviations (> 0): normalized scores, so the intervals adapt
        to the predicted spread.
    coverage : float in (0, 1), optional
        Nominal coverage of the intervals, e.g. 0.9 (as
        :func:`recalibrated_interval` takes it).
    alpha : float in (0, 1), optional
        Or the miscoverage, ``1 - coverage``. Give at most one of the two; neither
        means ``alpha=0.1`` (90% intervals).
    weights : array_like, shape [N], optional
        Observation weights: the scores' weighted distribution with the test point
        at weight 1 (Tibshirani, Barber, Candes & Ramdas 2019, weighted conformal
        prediction): :math:`\hat q` is the smallest score whose cumulative weight
        reaches :math:`(W + 1)(1 - \alpha)`, :math:`W = \sum_i w_i`. An integer
        weight equals repeating the row, a weight of 0 removes it; a ``ValueError``
        when :math:`W` is too small for ``alpha``. Finite, ``>= 0``, not all 0.

    Returns
    -------
    ConformalCalibrator
        Call it on test ``loc`` (and ``scale``) to get ``(lower, upper)``.

    Raises
    ------
    ValueError
        If ``N < ceil(1 / alpha) - 1`` (the interval would be infinite).

    See Also
    --------
    fit_conformalized_quantile : Conformalized quantile regression.
    fit_sigma_scaling : The Bayesian recalibration baseline (rescaled ``scale``).
    recalibrated_interval : Intervals from an isotonic recalibrator.

    References
    ----------
    Lei, G'Sell, Rinaldo, Tibshirani & Wasserman (2018), "Distribution-Free Predictive
    Inference for Regression", JASA 113(523).

    Examples
    --------
    >>> from bayescal.regression import fit_conformal
    >>> cal = fit_conformal([1.0, 2.0, 3.0, 4.0], [1.5, 2.0, 2.0, 4.5], alpha=0.2)
    >>> float(cal.quantile)
    1.0
    >>> [v.tolist() for v in cal([0.0])]
    [[-1.0], [1.0]]
    >>> fit_conformal([1.0, 2.0, 3.0, 4.0], [1.5, 2.0, 2.0, 4.5], coverage=0.8) == cal
    True
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    return _fit_conformal_alpha(y_true, loc, scale, alpha=a, weights=weights)


@host_first(_twin_fit_conformal)
def _fit_conformal_alpha(y_true, loc, scale=None, *, alpha, weights=None):
    """:func:`fit_conformal` for a resolved ``alpha`` (the host path tried first)."""
    # Shapes, alpha and the rank here (n is known); the values and the scores in one
    # program per bucket of n (the rank is an argument of it).
    y = _one_d(y_true, "y_true")
    mu = _one_d(loc, "loc")
    _v.check_same_shape(y_true=y, loc=mu)
    s = None
    if scale is not None:
        s = _one_d(scale, "scale")
        _v.check_same_shape(y_true=y, scale=s)
    a = _check_alpha(alpha)
    if weights is not None:
        cal = _fit_conformal(y, mu, s, np.asarray(0, np.int32), weights=weights, alpha=a)
        _check_weighted_quantile(cal.quantile, a)
        return cal
    return _fit_conformal(y, mu, s, _rank(y.shape[-1], a), alpha=a)


@_v.validated(fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1, "weights": -1})
def _fit_conformal(y_true, loc, scale, k, weights=None, *, alpha):
    for name, x in (("y_true", y_true), ("loc", loc), ("scale", scale)):
        if x is not None:
            _v.check_finite(x, name)
    scores = jnp.abs(y_true - loc)
    if scale is not None:
        _v.check_positive(scale, "scale")
        scores = scores / scale
    mask = _v.observation_mask(scores.shape[-1])
    if weights is not None:
        q = _weighted_conformal_quantile(scores, weights, alpha)
        return ConformalCalibrator(q, alpha, scale is not None)
    return ConformalCalibrator(_kth_smallest(scores, k, mask), alpha, scale is not None)


def fit_conformalized_quantile(
    y_true: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    *,
    coverage: float | None = None,
    alpha: float | None = None,
    weights: ArrayLike | None = None,
) -> ConformalizedQuantileCalibrator:
    r"""Conformalized quantile regression (CQR) from a calibration split.

    From predicted lower / upper quantiles (e.g. at ``alpha / 2`` and
    ``1 - alpha / 2``, from draws or a quantile model), the scores are
    :math:`E_i = \max(l_i - y_i,\ y_i - u_i)` and :math:`\hat q` is their
    :math:`k`-th smallest, :math:`k = \lceil (n + 1)(1 - \alpha) \rceil`. The interval
    on a new point is :math:`[l - \hat q,\ u + \hat q]`, with marginal coverage
    :math:`\ge 1 - \alpha`.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values of the calibration split.
    lower, upper : array_like, shape [N]
        Predicted lower and upper quantiles on it.
    coverage : float in (0, 1), optional
        Nominal coverage of the intervals, e.g. 0.9.
    alpha : float in (0, 1), optional
        Or the miscoverage, ``1 - coverage``. Give at most one of the two; neither
        means ``alpha=0.1`` (90% intervals).
    weights : array_like, shape [N], optional
        Observation weights: the scores' weighted distribution with the test point
        at weight 1 (Tibshirani, Barber, Candes & Ramdas 2019, weighted conformal
        prediction): :math:`\hat q` is the smallest score whose cumulative weight
        reaches :math:`(W + 1)(1 - \alpha)`, :math:`W = \sum_i w_i`. An integer
        weight equals repeating the row, a weight of 0 removes it; a ``ValueError``
        when :math:`W` is too small for ``alpha``. Finite, ``>= 0``, not all 0.

    Returns
    -------
    ConformalizedQuantileCalibrator
        Call it on test ``(lower, upper)`` to get the conformalized interval.

    Raises
    ------
    ValueError
        If ``N < ceil(1 / alpha) - 1``.

    See Also
    --------
    fit_conformal : Split conformal on residuals.
    recalibrated_interval : Intervals from an isotonic recalibrator.

    References
    ----------
    Romano, Patterson & Candes (2019), "Conformalized Quantile Regression", NeurIPS.

    Examples
    --------
    >>> from bayescal.regression import fit_conformalized_quantile
    >>> cqr = fit_conformalized_quantile([0.0, 1.0, 5.0], [-1.0, 0.5, 0.0],
    ...                                  [1.0, 2.0, 3.0], alpha=0.25)
    >>> float(cqr.quantile)
    2.0
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    return _fit_cqr_alpha(y_true, lower, upper, alpha=a, weights=weights)


@host_first(_twin_fit_conformalized_quantile)
def _fit_cqr_alpha(y_true, lower, upper, *, alpha, weights=None):
    """:func:`fit_conformalized_quantile` for a resolved ``alpha`` (host path first)."""
    y = _one_d(y_true, "y_true")
    lo = _one_d(lower, "lower")
    hi = _one_d(upper, "upper")
    _v.check_same_shape(y_true=y, lower=lo, upper=hi)
    a = _check_alpha(alpha)
    if weights is not None:
        cal = _fit_cqr(y, lo, hi, np.asarray(0, np.int32), weights=weights, alpha=a)
        _check_weighted_quantile(cal.quantile, a)
        return cal
    return _fit_cqr(y, lo, hi, _rank(y.shape[-1], a), alpha=a)


@_v.validated(fuse=True, bucket={"y_true": -1, "lower": -1, "upper": -1, "weights": -1})
def _fit_cqr(y_true, lower, upper, k, weights=None, *, alpha):
    for name, x in (("y_true", y_true), ("lower", lower), ("upper", upper)):
        _v.check_finite(x, name)
    scores = jnp.maximum(lower - y_true, y_true - upper)
    mask = _v.observation_mask(scores.shape[-1])
    if weights is not None:
        return ConformalizedQuantileCalibrator(
            _weighted_conformal_quantile(scores, weights, alpha), alpha
        )
    return ConformalizedQuantileCalibrator(_kth_smallest(scores, k, mask), alpha)


def _weighted_conformal_quantile(scores: jax.Array, weights: Any, alpha: float) -> jax.Array:
    """The smallest score whose cumulative weight reaches ``(W + 1)(1 - alpha)``
    (+inf when none does: the calibration weight is too small for ``alpha``).

    ``1 - alpha = num / den`` exactly (``alpha`` read as its shortest decimal, as in
    :func:`conformal_rank`), compared as ``den * cum >= num * (W + 1)``: for integer
    weights the same rank as the unweighted fit on repeated rows.
    """
    w = check_weights(weights, scores.shape[-1], scores.dtype)
    w = _v.mask_weights(w, scores.shape, scores.dtype)  # 0 in a bucket's padding
    frac = 1 - Fraction(repr(alpha))
    num, den = frac.numerator, frac.denominator
    order = argsort_last_axis(scores)
    s = jnp.take(scores, order, axis=-1)
    cum = jnp.cumsum(jnp.take(w, order, axis=-1), axis=-1)
    total = cum[..., -1:]
    ok = den * cum >= num * (total + 1)
    first = jnp.argmax(ok, axis=-1)
    q = jnp.take_along_axis(s, first[..., None], axis=-1)[..., 0]
    return jnp.where(jnp.any(ok, axis=-1), q, jnp.asarray(jnp.inf, s.dtype))


def _check_weighted_quantile(quantile: jax.Array, alpha: float) -> None:
    """Eagerly: an infinite weighted quantile means too little calibration weight."""
    if _v.is_concrete(quantile) and bool(np.isinf(np.asarray(quantile))):
        raise ValueError(
            f"the calibration weights are too small for alpha={alpha}: the weighted "
            f"conformal quantile needs a total weight W with (W + 1)(1 - alpha) <= W, "
            f"i.e. W >= {float(Fraction(1) / Fraction(repr(alpha))) - 1:g}; the interval "
            "would be infinite. Use more calibration data (or weight), or a larger alpha."
        )
