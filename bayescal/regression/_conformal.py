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
With ``groups`` (Mondrian conformal, Vovk et al. 2005; crepes' Mondrian categories)
each group gets its own quantile from its own scores and rank, so the coverage holds
within every group.
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


def _upper_fraction(p: Fraction, limit: int) -> Fraction:
    """The smallest fraction ``>= p`` whose denominator is at most ``limit``.

    For every ``m <= limit``, ``ceil(m * p) == ceil(m * c / d)`` with ``c / d`` this
    fraction: ``ceil(m p) / m`` is a fraction ``>= p`` with denominator ``m <= limit``,
    so it is ``>= c / d``, and ``c / d >= p``. Found by descending the Stern-Brocot tree
    between ``floor(p)`` and ``floor(p) + 1``, each run of equal turns in one step.
    """
    if p.denominator <= limit:
        return p
    num, den = p.numerator, p.denominator
    a, b = num // den, 1  # a / b < p < c / d, both denominators <= limit
    c, d = a + 1, 1
    while b + d <= limit:
        # the mediant (a + c) / (b + d) is never p: p's denominator exceeds limit
        if (a + c) * den < num * (b + d):  # below p: raise a / b by k steps of c / d
            k = min((num * b - a * den - 1) // (c * den - num * d), (limit - b) // d)
            a, b = a + k * c, b + k * d
        else:  # above p: lower c / d by k steps of a / b
            k = min((c * den - num * d - 1) // (num * b - a * den), (limit - d) // b)
            c, d = c + k * a, d + k * b
    return Fraction(c, d)


def _ceil_mul_div(m: jax.Array, c: int, d: int) -> jax.Array:
    """``ceil(m * c / d)`` exactly, for ``0 <= m < 2**31`` and ``0 <= c <= d < 2**31``.

    In 32-bit integers whatever the float width: the product in two 32-bit words
    (16-bit halves), then 64 steps of binary long division by ``d``.
    """
    u32 = jnp.uint32
    m = m.astype(u32)
    m0, m1 = m & 0xFFFF, m >> 16
    c0, c1 = u32(c & 0xFFFF), u32(c >> 16)
    low, cross_a, cross_b, high = m0 * c0, m0 * c1, m1 * c0, m1 * c1
    cross = cross_a + cross_b  # wraps: its carry is worth 2**48
    carry = (cross < cross_a).astype(u32)
    lo = low + (cross << 16)
    hi = high + (cross >> 16) + (carry << 16) + (lo < low).astype(u32)

    def step(i, state):
        rem, quot = state
        word = jnp.where(i < 32, hi, lo)
        bit = (word >> (31 - i % 32).astype(u32)) & 1
        rem = (rem << 1) | bit  # rem < d < 2**31: no overflow
        take = rem >= u32(d)
        return jnp.where(take, rem - u32(d), rem), (quot << 1) | take.astype(u32)

    zero = jnp.zeros_like(m)
    rem, quot = jax.lax.fori_loop(0, 64, step, (zero, zero))
    return (quot + (rem > 0).astype(u32)).astype(jnp.int32)


def _group_ranks(counts: jax.Array, alpha: float, size: int) -> jax.Array:
    """:func:`conformal_rank` of every group's count (traced), exactly; 0 for none.

    ``size``: the most scores a group can hold (the observation axis). A rank above its
    group's count means the group is too small for ``alpha``.
    """
    p = _upper_fraction(1 - Fraction(repr(alpha)), size + 1)
    return _ceil_mul_div(counts + 1, p.numerator, p.denominator)


def _group_kth(
    scores: jax.Array, groups: jax.Array, num_groups: int, alpha: float, mask: Any
) -> jax.Array:
    """Each group's conformal quantile of ``scores`` (``[num_groups]``; +inf when the
    group is too small for ``alpha``): its scores' ``k``-th smallest, ``k`` from its
    own count. Scores sorted by group, then by value; padding goes last."""
    size = scores.shape[-1]
    if mask is not None:
        groups = jnp.where(mask, groups, num_groups)
        scores = jnp.where(mask, scores, jnp.asarray(jnp.inf, scores.dtype))
    counts = jnp.zeros(num_groups + 1, jnp.int32).at[groups].add(1)[:num_groups]
    ordered = jnp.take(scores, jnp.lexsort((scores, groups)), axis=-1)
    starts = jnp.cumsum(counts) - counts
    k = _group_ranks(counts, alpha, size)
    q = jnp.take(ordered, jnp.clip(starts + k - 1, 0, size - 1), axis=-1)
    return jnp.where(k <= counts, q, jnp.asarray(jnp.inf, scores.dtype))


# --------------------------------------------------------------------------- host twins
@functools.lru_cache(maxsize=256)
def _twin_rank(n: int, alpha: Any) -> int:

    return conformal_rank(n, alpha)  # raises for a bad alpha or too small an n


def _kth(scores: np.ndarray, k: int) -> np.ndarray | None:
    """The ``k``-th smallest score (0-d), or None if subnormal (the kernel has 0)."""
    q = np.partition(scores, k - 1)[k - 1]
    return None if 0 < abs(q) < _limits(q.dtype).tiny else np.asarray(q)


def _twin_residual_scores(y_true: Any, loc: Any, scale: Any) -> np.ndarray | None:
    """``|y - loc|`` (``/ scale``) as the kernel computes them, or None."""
    y, mu = _vector(y_true), _vector(loc)
    if y is None or mu is None or y.shape != mu.shape:
        return None
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
    return scores  # their k-th smallest commutes with XLA's flush of subnormal scores


def _twin_cqr_scores(y_true: Any, lower: Any, upper: Any) -> np.ndarray | None:
    """``max(lower - y, y - upper)`` as the kernel's k-th smallest sees them, or None."""
    y, lo, hi = _vector(y_true), _vector(lower), _vector(upper)
    if y is None or lo is None or hi is None or not y.shape == lo.shape == hi.shape:
        return None
    if not (_normal(y) and _normal(lo) and _normal(hi)):
        return None
    # XLA flushes subnormal results to 0, a nondecreasing map that the k-th smallest
    # commutes with; only the k-th must not be subnormal.
    return np.maximum(lo - y, y - hi)


def _twin_group_kth(
    scores: np.ndarray | None, alpha: Any, groups: Any, num_groups: Any
) -> tuple[np.ndarray, int] | None:
    """Each group's conformal quantile (``[G]``) and ``G``, or None (the kernel path,
    which also raises for bad codes and groups too small for ``alpha``)."""
    g = groups if isinstance(groups, np.ndarray) else None
    if scores is None or g is None or g.shape != scores.shape or g.dtype.kind not in "iu":
        return None
    num = int(g.max()) + 1 if num_groups is None else num_groups
    if type(num) is not int or num < 1 or g.min() < 0 or g.max() >= num:
        return None
    order = np.argsort(g, kind="stable")
    counts = np.bincount(g, minlength=num)
    starts = np.cumsum(counts) - counts
    quantiles = []
    for j in range(num):
        if counts[j] == 0:
            return None
        k = _twin_rank(int(counts[j]), alpha)  # raises when the group is too small
        q = _kth(scores[order[starts[j] : starts[j] + counts[j]]], k)
        if q is None:
            return None
        quantiles.append(q)
    return np.stack(quantiles), num


def _twin_quantile(
    scores: np.ndarray | None, alpha: Any, groups: Any, num_groups: Any
) -> tuple[np.ndarray, int | None] | None:
    """The conformal quantile of ``scores`` (per group with ``groups``) and the number
    of groups (None without), or None: the kernel path."""
    if groups is not None:
        return _twin_group_kth(scores, alpha, groups, num_groups)
    q = None if scores is None else _kth(scores, _twin_rank(scores.size, alpha))
    return None if q is None else (q, None)


def _twin_fit_conformal(
    y_true: Any,
    loc: Any,
    scale: Any = None,
    *,
    alpha: Any = 0.1,
    weights: Any = None,
    groups: Any = None,
    num_groups: Any = None,
) -> Any:
    """:func:`bayescal.regression.fit_conformal` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted quantile)
    scores = _twin_residual_scores(y_true, loc, scale)
    found = _twin_quantile(scores, alpha, groups, num_groups)
    if found is None:
        return None
    return ConformalCalibrator(_device(found[0]), float(alpha), scale is not None, found[1])


def _twin_fit_conformalized_quantile(
    y_true: Any,
    lower: Any,
    upper: Any,
    *,
    alpha: Any = 0.1,
    weights: Any = None,
    groups: Any = None,
    num_groups: Any = None,
) -> Any:
    """:func:`bayescal.regression.fit_conformalized_quantile` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted quantile)
    found = _twin_quantile(_twin_cqr_scores(y_true, lower, upper), alpha, groups, num_groups)
    if found is None:
        return None
    return ConformalizedQuantileCalibrator(_device(found[0]), float(alpha), found[1])


def _quantile(calibrator: Any, groups: Any = None) -> np.ndarray | None:
    """A fitted calibrator's quantile as a 0-d array, or per group that of each of
    ``groups`` (host codes in range): all 0, or all at least ``safe`` (else None)."""
    q = calibrator.quantile
    ndim = 0 if calibrator.num_groups is None else 1
    if (groups is not None) != bool(ndim):  # the kernel path raises
        return None
    if not (isinstance(q, jax.Array) and q.ndim == ndim and host_resident(q)):
        return None
    q = np.asarray(q)
    if ndim:
        g = np.asarray(groups) if isinstance(groups, np.ndarray | list | tuple) else None
        if g is None or g.dtype.kind not in "iu" or g.size == 0:
            return None
        if g.min() < 0 or g.max() >= q.size:
            return None
        q = q[g]
    v = np.abs(q)
    lim = _limits(q.dtype)
    return q if not v.any() or lim.safe <= v.min() <= v.max() <= lim.big else None


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


def _twin_conformal_interval(
    calibrator: Any, loc: Any, scale: Any = None, *, groups: Any = None
) -> Any:
    """``ConformalCalibrator.__call__`` on the host."""
    q = _quantile(calibrator, groups)
    mu = _floats(loc)
    if q is None or mu is None or mu.size == 0:
        return None
    if np.broadcast_shapes(q.shape, mu.shape) != mu.shape:
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
        half, zero = q, not q.any()
    if not _addable(mu, half, zero):
        return None
    return _device(mu - half), _device(mu + half)  # in the kernel's result dtype


def _twin_cqr_interval(calibrator: Any, lower: Any, upper: Any, *, groups: Any = None) -> Any:
    """``ConformalizedQuantileCalibrator.__call__`` on the host."""
    q = _quantile(calibrator, groups)
    lo, hi = _floats(lower), _floats(upper)
    if q is None or lo is None or hi is None or lo.shape != hi.shape or lo.size == 0:
        return None
    if np.broadcast_shapes(q.shape, lo.shape) != lo.shape:
        return None
    zero = not q.any()
    if not (_addable(lo, q, zero) and _addable(hi, q, zero)):
        return None
    return _device(lo - q), _device(hi + q)


@pytree_dataclass(data=("quantile",), meta=("alpha", "normalized", "num_groups"))
class ConformalCalibrator:
    r"""Fitted split-conformal intervals: ``loc -/+ quantile`` (times ``scale``).

    Attributes
    ----------
    quantile : Array, scalar or shape [num_groups]
        The conformal quantile :math:`\hat q` of the calibration scores; fitted with
        ``groups`` (Mondrian), one per group.
    alpha : float
        The miscoverage it was fitted for.
    normalized : bool
        Scores were ``|y - loc| / scale``: the interval is ``loc -/+ q * scale``.
    num_groups : int or None
        The number of Mondrian groups (None: one quantile for all); then calls need
        the test points' ``groups``.
    """

    quantile: jax.Array
    alpha: float = 0.1
    normalized: bool = False
    num_groups: int | None = None

    @property
    def coverage(self) -> float:
        """The nominal coverage it was fitted for, ``1 - alpha``."""
        return coverage_and_alpha(None, self.alpha)[0]

    @host_first(_twin_conformal_interval)
    def __call__(
        self, loc: ArrayLike, scale: ArrayLike | None = None, *, groups: ArrayLike | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """The interval ``(lower, upper)`` for new predictive means (and scales);
        fitted per group, the test points' ``groups`` too (codes as in the fit)."""
        _check_call(self.normalized, scale, self.num_groups, groups, "fit_conformal")
        return _conformal_interval(self.quantile, loc, scale, groups, num_groups=self.num_groups)


@pytree_dataclass(data=("quantile",), meta=("alpha", "num_groups"))
class ConformalizedQuantileCalibrator:
    r"""Fitted CQR intervals: ``(lower - quantile, upper + quantile)``.

    Attributes
    ----------
    quantile : Array, scalar or shape [num_groups]
        The conformal quantile :math:`\hat q` of the CQR scores (negative when the
        predicted intervals were too wide: they shrink); fitted with ``groups``
        (Mondrian), one per group.
    alpha : float
        The miscoverage it was fitted for.
    num_groups : int or None
        The number of Mondrian groups (None: one quantile for all); then calls need
        the test points' ``groups``.
    """

    quantile: jax.Array
    alpha: float = 0.1
    num_groups: int | None = None

    @property
    def coverage(self) -> float:
        """The nominal coverage it was fitted for, ``1 - alpha``."""
        return coverage_and_alpha(None, self.alpha)[0]

    @host_first(_twin_cqr_interval)
    def __call__(
        self, lower: ArrayLike, upper: ArrayLike, *, groups: ArrayLike | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """The conformalized interval for new predicted lower / upper quantiles;
        fitted per group, the test points' ``groups`` too (codes as in the fit)."""
        _check_call(True, True, self.num_groups, groups, "fit_conformalized_quantile")
        return _cqr_interval(self.quantile, lower, upper, groups, num_groups=self.num_groups)


_GROUPS = "the Mondrian groups, coded 0..num_groups - 1 as in the fit"


def _check_call(
    normalized: bool, scale: Any, num_groups: int | None, groups: Any, fit: str
) -> None:
    """A fitted conformal object called with the arguments its fit had: a scale where
    it was normalized, groups where it was fitted per group (``fit``: its function)."""
    if normalized and scale is None:
        raise ValueError(
            f"this {fit} result was fitted on scale-normalized residuals; pass the test "
            "predictions' scale too: calibrator(loc, scale)."
        )
    if not normalized and scale is not None:
        raise ValueError(
            f"this {fit} result was fitted on absolute residuals (no scale); call it with "
            f"loc only, or refit with {fit}(y_true, loc, scale)."
        )
    if num_groups is None and groups is not None:
        raise ValueError(
            f"this {fit} result was fitted without groups (one for all); call it without "
            "groups, or refit with groups=... for Mondrian (per-group) results."
        )
    if num_groups is not None and groups is None:
        raise ValueError(
            f"this {fit} result was fitted per group ({num_groups} Mondrian groups); pass "
            "the test points' groups too: (..., groups=codes), coded as in the fit."
        )


def _group_half(quantile: jax.Array, groups: Any, num_groups: int | None, shape: tuple) -> Any:
    """The quantile of each test point's group (``quantile`` itself without groups)."""
    if num_groups is None:
        return quantile
    g = _v.check_class_labels(groups, "groups", num_groups, _GROUPS)
    _v.check_broadcastable("loc", shape, groups=g)
    return jnp.take(quantile, jnp.clip(g, 0, num_groups - 1), axis=-1)


# The intervals on new predictions: one program per bucket of their length.
@_v.validated(fuse=True, bucket={"loc": -1, "scale": -1, "groups": -1}, per_observation=-1)
def _conformal_interval(quantile, loc, scale, groups=None, *, num_groups=None):
    mu = _v.as_float_array(loc, "loc")
    _v.check_finite(mu, "loc")
    half = _group_half(quantile, groups, num_groups, tuple(mu.shape))
    if scale is not None:
        s = _v.as_float_array(scale, "scale")
        _v.check_broadcastable("loc", tuple(mu.shape), scale=s)
        _v.check_positive(s, "scale")
        half = half * s
    dtype = jnp.result_type(mu.dtype, jnp.asarray(half).dtype)
    return (mu - half).astype(dtype), (mu + half).astype(dtype)


@_v.validated(fuse=True, bucket={"lower": -1, "upper": -1, "groups": -1}, per_observation=-1)
def _cqr_interval(quantile, lower, upper, groups=None, *, num_groups=None):
    lo = _v.as_float_array(lower, "lower")
    hi = _v.as_float_array(upper, "upper")
    _v.check_same_shape(lower=lo, upper=hi)
    _v.check_finite(lo, "lower")
    _v.check_finite(hi, "upper")
    q = _group_half(quantile, groups, num_groups, tuple(lo.shape))
    return lo - q, hi + q


def _residual_inputs(y_true: Any, loc: Any, scale: Any) -> tuple:
    """``y_true``, ``loc`` (and ``scale``) as 1-D float arrays of one shape (values are
    checked in the fit's program)."""
    y = _one_d(y_true, "y_true")
    mu = _one_d(loc, "loc")
    _v.check_same_shape(y_true=y, loc=mu)
    s = None
    if scale is not None:
        s = _one_d(scale, "scale")
        _v.check_same_shape(y_true=y, scale=s)
    return y, mu, s


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
    groups: ArrayLike | None = None,
    num_groups: int | None = None,
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
    groups : array_like of int, shape [N], optional
        Mondrian categories (Vovk et al. 2005; crepes' ``bins``), coded
        ``0..num_groups - 1``: each group gets its own quantile, from its own scores
        and rank :math:`k_g = \\lceil (n_g + 1)(1 - \\alpha) \\rceil`, so the coverage
        :math:`\\ge 1 - \\alpha` holds within every group (given the group), not only
        on average. The calibrator then needs the test points' groups. Codes from
        anything else: ``np.unique(labels, return_inverse=True)``.
    num_groups : int, optional
        The number of groups; default ``max(groups) + 1``. Needed when ``groups`` is
        traced (under ``jit`` or ``vmap``).

    Returns
    -------
    ConformalCalibrator
        Call it on test ``loc`` (and ``scale``, and ``groups``) to get
        ``(lower, upper)``.

    Raises
    ------
    ValueError
        If ``N < ceil(1 / alpha) - 1`` (the interval would be infinite); with
        ``groups``, if a group holds fewer (naming the groups). Under ``jit`` such a
        group's quantile is +inf: its intervals are the whole line.

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

    Per group (Mondrian): each group's own quantile, and the test points' groups in
    the call.

    >>> y, mu = [0.0, 1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 40.0], [0.5] * 4 + [25.0] * 4
    >>> cal = fit_conformal(y, mu, alpha=0.2, groups=[0, 0, 0, 0, 1, 1, 1, 1])
    >>> cal.quantile.tolist()
    [2.5, 15.0]
    >>> [v.tolist() for v in cal([0.0, 0.0], groups=[0, 1])]
    [[-2.5, -15.0], [2.5, 15.0]]
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    _num_groups_needs_groups(groups, num_groups)
    return _fit_conformal_alpha(
        y_true, loc, scale, alpha=a, weights=weights, groups=groups, num_groups=num_groups
    )


@host_first(_twin_fit_conformal)
def _fit_conformal_alpha(
    y_true, loc, scale=None, *, alpha, weights=None, groups=None, num_groups=None
):
    """:func:`fit_conformal` for a resolved ``alpha`` (the host path tried first)."""
    # Shapes, alpha and the rank here (n is known); the values and the scores in one
    # program per bucket of n (the rank is an argument of it).
    y, mu, s = _residual_inputs(y_true, loc, scale)
    a = _check_alpha(alpha)
    if groups is not None or weights is not None:
        g, num = _groups_and_count(groups, num_groups, y)
        cal = _fit_conformal(
            y, mu, s, np.asarray(0, np.int32), weights, g, alpha=a, num_groups=num
        )
        _check_quantile(cal.quantile, a, groups, num, weights)
        return cal
    return _fit_conformal(y, mu, s, _rank(y.shape[-1], a), alpha=a)


@_v.validated(
    fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1, "weights": -1, "groups": -1}
)
def _fit_conformal(y_true, loc, scale, k, weights=None, groups=None, *, alpha, num_groups=None):
    for name, x in (("y_true", y_true), ("loc", loc), ("scale", scale)):
        if x is not None:
            _v.check_finite(x, name)
    scores = jnp.abs(y_true - loc)
    if scale is not None:
        _v.check_positive(scale, "scale")
        scores = scores / scale
    q = _quantile_of(scores, k, weights, groups, alpha, num_groups)
    return ConformalCalibrator(q, alpha, scale is not None, num_groups)


def _quantile_of(scores, k, weights, groups, alpha, num_groups):
    """The conformal quantile of ``scores``: the ``k``-th smallest, the weighted one,
    or each group's (``[num_groups]``)."""
    mask = _v.observation_mask(scores.shape[-1])
    g = None
    if groups is not None:
        g = _v.check_class_labels(groups, "groups", num_groups, _GROUPS)
    if weights is not None:
        return _weighted_conformal_quantile(scores, weights, alpha, g, num_groups or 0)
    if g is not None:
        return _group_kth(scores, g, num_groups, alpha, mask)
    return _kth_smallest(scores, k, mask)


def _num_groups_needs_groups(groups: Any, num_groups: Any) -> None:
    if groups is None and num_groups is not None:
        raise ValueError("num_groups is only used with groups; pass groups=... too.")


def _groups_and_count(groups: Any, num_groups: Any, y: jax.Array) -> tuple[Any, int | None]:
    """``groups`` (shape checked against ``y``) and their count: ``num_groups``, or
    ``max(groups) + 1`` from concrete codes."""
    if groups is None:
        return None, None
    _v.reject_masked(groups, "groups")
    shape = tuple(np.shape(groups))
    if shape != tuple(y.shape):
        raise ValueError(
            f"groups must hold one code per observation, shape {tuple(y.shape)}; got "
            f"shape {shape}."
        )
    if num_groups is not None:
        return groups, _v.check_positive_int(num_groups, "num_groups")
    if not _v.is_concrete(groups):
        raise ValueError(
            "groups is traced (under jit or vmap): pass num_groups=<the number of "
            "groups> too (the quantiles' shape must be known when tracing)."
        )
    codes = np.asarray(groups)
    if codes.dtype.kind not in "iufb":
        return groups, 1  # the labels' check names the dtype
    top = np.max(np.where(np.isfinite(codes), codes, 0)) if codes.dtype.kind == "f" else codes.max()
    return groups, max(int(top), 0) + 1


def _check_quantile(
    quantile: jax.Array, alpha: float, groups: Any, num_groups: int | None, weights: Any
) -> None:
    """Eagerly: an infinite quantile means too little calibration data (or weight)."""
    if not _v.is_concrete(quantile):
        return
    q = np.asarray(quantile).reshape(-1)
    bad = np.flatnonzero(np.isinf(q))
    if bad.size == 0:
        return
    need = math.ceil(Fraction(1) / Fraction(repr(alpha))) - 1
    if groups is None:
        raise ValueError(
            f"the calibration weights are too small for alpha={alpha}: the weighted "
            f"conformal quantile needs a total weight W with (W + 1)(1 - alpha) <= W, "
            f"i.e. W >= {float(Fraction(1) / Fraction(repr(alpha))) - 1:g}; the interval "
            "would be infinite. Use more calibration data (or weight), or a larger alpha."
        )
    codes = np.asarray(groups).reshape(-1).astype(np.int64)
    w = None if weights is None else np.asarray(weights, np.float64).reshape(-1)
    sizes = np.bincount(codes, weights=w, minlength=num_groups)
    what = "total weight" if weights is not None else "observations"
    listed = ", ".join(f"{j} ({sizes[j]:g})" for j in bad[:10])
    more = f" and {bad.size - 10} more" if bad.size > 10 else ""
    raise ValueError(
        f"groups too small for alpha={alpha}: in group(s) {listed}{more} (code "
        f"({what})) the conformal rank ceil((n + 1)(1 - alpha)) exceeds the group's "
        f"calibration {what} n, so their intervals would be infinite. Each group needs "
        f"at least {need} calibration observations (or that total weight): merge small "
        "groups, collect more data, or use a larger alpha."
    )


def fit_conformalized_quantile(
    y_true: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    *,
    coverage: float | None = None,
    alpha: float | None = None,
    weights: ArrayLike | None = None,
    groups: ArrayLike | None = None,
    num_groups: int | None = None,
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
    groups : array_like of int, shape [N], optional
        Mondrian categories, coded ``0..num_groups - 1``: each group gets its own
        quantile from its own scores and rank (as in :func:`fit_conformal`), so the
        coverage holds within every group. The calibrator then needs the test points'
        groups.
    num_groups : int, optional
        The number of groups; default ``max(groups) + 1``. Needed when ``groups`` is
        traced (under ``jit`` or ``vmap``).

    Returns
    -------
    ConformalizedQuantileCalibrator
        Call it on test ``(lower, upper)`` (and ``groups``) to get the conformalized
        interval.

    Raises
    ------
    ValueError
        If ``N < ceil(1 / alpha) - 1``; with ``groups``, if a group holds fewer
        (naming the groups; under ``jit`` their quantile is +inf).

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
    _num_groups_needs_groups(groups, num_groups)
    return _fit_cqr_alpha(
        y_true, lower, upper, alpha=a, weights=weights, groups=groups, num_groups=num_groups
    )


@host_first(_twin_fit_conformalized_quantile)
def _fit_cqr_alpha(y_true, lower, upper, *, alpha, weights=None, groups=None, num_groups=None):
    """:func:`fit_conformalized_quantile` for a resolved ``alpha`` (host path first)."""
    y = _one_d(y_true, "y_true")
    lo = _one_d(lower, "lower")
    hi = _one_d(upper, "upper")
    _v.check_same_shape(y_true=y, lower=lo, upper=hi)
    a = _check_alpha(alpha)
    if groups is not None or weights is not None:
        g, num = _groups_and_count(groups, num_groups, y)
        cal = _fit_cqr(y, lo, hi, np.asarray(0, np.int32), weights, g, alpha=a, num_groups=num)
        _check_quantile(cal.quantile, a, groups, num, weights)
        return cal
    return _fit_cqr(y, lo, hi, _rank(y.shape[-1], a), alpha=a)


@_v.validated(
    fuse=True, bucket={"y_true": -1, "lower": -1, "upper": -1, "weights": -1, "groups": -1}
)
def _fit_cqr(y_true, lower, upper, k, weights=None, groups=None, *, alpha, num_groups=None):
    for name, x in (("y_true", y_true), ("lower", lower), ("upper", upper)):
        _v.check_finite(x, name)
    scores = jnp.maximum(lower - y_true, y_true - upper)
    q = _quantile_of(scores, k, weights, groups, alpha, num_groups)
    return ConformalizedQuantileCalibrator(q, alpha, num_groups)


def _weighted_conformal_quantile(
    scores: jax.Array,
    weights: Any,
    alpha: float,
    groups: jax.Array | None = None,
    num_groups: int = 0,
) -> jax.Array:
    """The smallest score whose cumulative weight reaches ``(W + 1)(1 - alpha)``
    (+inf when none does: the calibration weight is too small for ``alpha``); with
    ``groups``, each group's (``[num_groups]``), from its scores and weights alone.

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
    w = jnp.take(w, order, axis=-1)

    def first_reaching(w):
        cum = jnp.cumsum(w, axis=-1)
        ok = den * cum >= num * (cum[..., -1:] + 1)
        q = jnp.take_along_axis(s, jnp.argmax(ok, axis=-1)[..., None], axis=-1)[..., 0]
        return jnp.where(jnp.any(ok, axis=-1), q, jnp.asarray(jnp.inf, s.dtype))

    if groups is None:
        return first_reaching(w)
    g = jnp.take(groups, order, axis=-1)
    return jax.vmap(lambda j: first_reaching(jnp.where(g == j, w, 0)))(
        jnp.arange(num_groups)
    )
