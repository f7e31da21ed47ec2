"""Proper scoring rules for regression predictives."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.host import (
    _BAD,
    _REDUCTIONS,
    _device,
    _flushed,
    _observation_weights,
    _reduce,
)
from bayescal._src.host import first as host_first
from bayescal._src.options import Reduction, coverage_and_alpha
from bayescal._src.reduce import check_reduction, check_weights, reduce_scores
from bayescal._src.sorting import sort_last_axis
from bayescal.regression._host import _normal_predictive
from bayescal.regression._host import ndtr as _host_ndtr

__all__ = ["crps_normal", "crps_draws", "nll_normal", "interval_score", "pinball_loss"]


def _prep(y_true, reduction, **params):
    check_reduction(reduction)
    y = _v.as_float_array(y_true, "y_true")
    _v.check_nonempty(y, "y_true")
    arrays = {k: _v.as_float_array(p, k) for k, p in params.items()}
    dtype = _v.result_dtype(y, *arrays.values())
    y = y.astype(dtype)
    arrays = {k: a.astype(dtype) for k, a in arrays.items()}
    _v.check_broadcastable("y_true", tuple(y.shape), **arrays)
    _v.check_finite(y, "y_true")
    for k, a in arrays.items():
        _v.check_finite(a, k)
    return y, arrays


def _shape(y: jax.Array, params: dict[str, jax.Array]) -> tuple[int, ...]:
    """Shape of the per-observation scores (``y_true`` broadcast with the parameters)."""
    return jnp.broadcast_shapes(y.shape, *(a.shape for a in params.values()))


def _weights(weights: ArrayLike | None, y: jax.Array) -> jax.Array | None:
    """Per-observation weights for 1-D ``y`` (scores over a broadcast shape need [N])."""
    if weights is None:
        return None
    if y.ndim != 1:
        raise ValueError(
            f"weights need 1-D y_true (one weight per observation); got y_true of shape "
            f"{tuple(y.shape)}."
        )
    return check_weights(weights, y.shape[0], y.dtype)


@functools.partial(jax.jit, static_argnames="reduction")
def _crps_normal_kernel(y, loc, scale, w, reduction):
    return reduce_scores(scale * crps_standard_normal((y - loc) / scale, jnp), w, reduction)


def crps_standard_normal(t: Any, xp: Any = np) -> Any:
    """CRPS of N(0, 1) at ``t`` (Gneiting & Raftery 2007, closed form), for both paths:
    ``xp`` is ``jax.numpy`` in the kernels, ``numpy`` (float64) in the host twins."""
    cdf = ndtr(t) if xp is jnp else _host_ndtr(t)
    pdf = xp.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)
    return t * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi)


# --------------------------------------------------------------------------- host twins
def _twin_crps_normal(
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
    crps = s * crps_standard_normal(z.astype(np.float64))
    if reduction == "none":
        return _device(_flushed(crps.astype(y.dtype)))
    return _reduce(crps, w, reduction, y.dtype)


@host_first(_twin_crps_normal)
@_v.validated(fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1, "weights": -1}, per_observation=_v.unreduced)
def crps_normal(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""Continuous ranked probability score of Normal predictives (closed form).

    .. math:: \mathrm{CRPS}(N(\mu, \sigma^2), y) = \sigma\Big[z(2\Phi(z) - 1)
              + 2\varphi(z) - \tfrac{1}{\sqrt\pi}\Big],\quad z = (y - \mu)/\sigma

    (Gneiting & Raftery, 2007). Lower is better.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    loc, scale : array_like, shape [N] or broadcastable
        Mean and standard deviation (> 0) of the Normal predictives.
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}
        Average over observations (default), sum, or return per-observation scores.

    Returns
    -------
    Array
        Scalar, or ``[N]`` with ``reduction="none"``.

    See Also
    --------
    crps_draws : The same score from predictive draws.
    nll_normal : The logarithmic score of the same predictives.

    Examples
    --------
    >>> from bayescal.regression import crps_normal
    >>> round(float(crps_normal([0.0], 0.0, 1.0)), 4)
    0.2337
    """
    y, a = _prep(y_true, reduction, loc=loc, scale=scale)
    _v.check_positive(a["scale"], "scale")
    w = _v.mask_weights(_weights(weights, y), _shape(y, a), y.dtype)
    return _crps_normal_kernel(y, a["loc"], a["scale"], w, reduction)


@functools.partial(jax.jit, static_argnames=("reduction", "fair"))
def _crps_draws_kernel(y, draws, w, reduction, fair):
    s = draws.shape[0]
    term1 = jnp.mean(jnp.abs(draws - y), axis=0)
    # E|X - X'| from order statistics: (2 / S^2) sum_i (2i - S - 1) x_(i), i = 1..S
    xs = sort_last_axis(draws.T)  # [N, S]
    i = jnp.arange(1, s + 1, dtype=draws.dtype)
    pair = 2.0 * jnp.sum((2 * i - s - 1) * xs, axis=-1) / (s * s)
    if fair:
        pair = pair * s / (s - 1)  # s >= 2, checked by crps_draws
    return reduce_scores(term1 - 0.5 * pair, w, reduction)


@_v.validated(fuse=True, bucket={"y_true": -1, "draws": -1, "weights": -1}, per_observation=_v.unreduced)
def crps_draws(
    y_true: ArrayLike,
    draws: ArrayLike,
    *,
    fair: bool = False,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""CRPS of the empirical distribution of predictive draws.

    .. math:: \mathrm{CRPS} = \frac1S\sum_s |x_s - y| - \frac{1}{2 S^2}\sum_{s,t}|x_s - x_t|

    The pair term is computed in O(S log S) from sorted draws. ``fair=True`` divides
    the pair term by :math:`S(S-1)` instead of :math:`S^2`: the unbiased estimator of
    the CRPS of the distribution the draws come from (Ferro, 2014).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    draws : array_like, shape [S, N]
        Predictive draws, draw axis first (at least 2 with ``fair=True``).
    fair : bool, default False
        The unbiased ("fair") estimator instead of the CRPS of the empirical
        distribution.
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}
        Average over observations (default), sum, or return per-observation scores.

    Returns
    -------
    Array
        Scalar, or ``[N]`` with ``reduction="none"``.

    See Also
    --------
    crps_normal : The closed form for Normal predictives.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.regression import crps_draws
    >>> float(crps_draws(jnp.array([0.0]), jnp.array([[-1.0], [1.0]])))
    0.5
    """
    check_reduction(reduction)
    y = _v.as_float_array(y_true, "y_true")
    d = _v.as_float_array(draws, "draws")
    _v.check_ndim(y, "y_true", 1)
    _v.check_ndim(d, "draws", 2)
    _v.check_nonempty(d, "draws")
    if d.shape[1] != y.shape[0]:
        raise ValueError(
            f"draws has shape {tuple(d.shape)} but y_true has {y.shape[0]} values; draws "
            "must be [S, N] (draw axis first)."
        )
    dtype = _v.result_dtype(y, d)
    y, d = y.astype(dtype), d.astype(dtype)
    _v.check_finite(y, "y_true")
    _v.check_finite(d, "draws")
    fair = _v.check_bool(fair, "fair")
    if fair and d.shape[0] < 2:
        raise ValueError(
            f"fair=True needs at least 2 draws per observation (it divides the pair term by "
            f"S(S - 1)); got draws of shape {tuple(d.shape)}. Pass more draws or fair=False."
        )
    w = _v.mask_weights(check_weights(weights, y.shape[0], y.dtype), y.shape, y.dtype)
    return _crps_draws_kernel(y, d, w, reduction, fair)


@functools.partial(jax.jit, static_argnames="reduction")
def _nll_normal_kernel(y, loc, scale, w, reduction):
    z = (y - loc) / scale
    nll = 0.5 * z * z + jnp.log(scale) + 0.5 * math.log(2 * math.pi)
    return reduce_scores(nll, w, reduction)


@_v.validated(fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1, "weights": -1}, per_observation=_v.unreduced)
def nll_normal(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""Negative log-likelihood of Normal predictives.

    :math:`\tfrac12 \log(2\pi\sigma^2) + (y - \mu)^2 / (2\sigma^2)`.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    loc, scale : array_like, shape [N] or broadcastable
        Mean and standard deviation (> 0) of the Normal predictives.
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}
        Average over observations (default), sum, or return per-observation scores.

    Returns
    -------
    Array
        Scalar, or ``[N]`` with ``reduction="none"``.

    See Also
    --------
    crps_normal : The continuous ranked probability score of the same predictives.
    bayescal.classification.log_loss : The logarithmic score of binary predictions.

    Examples
    --------
    >>> from bayescal.regression import nll_normal
    >>> round(float(nll_normal([0.0], 0.0, 1.0)), 4)
    0.9189
    """
    y, a = _prep(y_true, reduction, loc=loc, scale=scale)
    _v.check_positive(a["scale"], "scale")
    w = _v.mask_weights(_weights(weights, y), _shape(y, a), y.dtype)
    return _nll_normal_kernel(y, a["loc"], a["scale"], w, reduction)


@functools.partial(jax.jit, static_argnames="reduction")
def _interval_score_kernel(y, lower, upper, alpha, w, reduction):
    below = jnp.maximum(lower - y, 0)
    above = jnp.maximum(y - upper, 0)
    score = (upper - lower) + (2 / alpha) * (below + above)
    return reduce_scores(score, w, reduction)


@_v.validated(fuse=True, bucket={"y_true": -1, "lower": -1, "upper": -1, "weights": -1}, per_observation=_v.unreduced)
def interval_score(
    y_true: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    *,
    alpha: float | None = None,
    coverage: float | None = None,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""Interval score of central ``(1 - alpha)`` prediction intervals.

    .. math:: S_\alpha(l, u; y) = (u - l) + \tfrac2\alpha (l - y)\,1\{y < l\}
              + \tfrac2\alpha (y - u)\,1\{y > u\}

    (Gneiting & Raftery, 2007, eq. 43). Lower is better.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    lower, upper : array_like, shape [N]
        Interval ends, ``lower <= upper``.
    alpha : float in (0, 1), optional
        Miscoverage of the interval: a 90% interval has ``alpha=0.1``.
    coverage : float in (0, 1), optional
        Or its nominal coverage, ``1 - alpha`` (0.9). Give exactly one of the two.
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}
        Average over observations (default), sum, or return per-observation scores.

    Returns
    -------
    Array
        Scalar, or ``[N]`` with ``reduction="none"``.

    Examples
    --------
    >>> from bayescal.regression import interval_score
    >>> float(interval_score([3.0], [0.0], [2.0], alpha=0.5))
    6.0
    >>> float(interval_score([3.0], [0.0], [2.0], coverage=0.5))
    6.0
    """
    _, alpha = coverage_and_alpha(coverage, alpha)
    y, a = _prep(y_true, reduction, lower=lower, upper=upper)
    lo, up = a["lower"], a["upper"]
    _v.check_less_equal(
        lo,
        up,
        "lower",
        "must be <= upper for every observation; some intervals are reversed",
    )
    w = _v.mask_weights(_weights(weights, y), _shape(y, {"lo": lo, "up": up}), y.dtype)
    return _interval_score_kernel(y, lo, up, alpha, w, reduction)


@functools.partial(jax.jit, static_argnames="reduction")
def _pinball_kernel(y, q, levels, w, reduction):
    diff = y[None, :] - q
    tau = levels[:, None]
    loss = jnp.maximum(tau * diff, (tau - 1) * diff)  # [L, N]
    return reduce_scores(loss, w, reduction)


@_v.validated(fuse=True, bucket={"y_true": -1, "quantiles": -1, "weights": -1}, per_observation=_v.unreduced)
def pinball_loss(
    y_true: ArrayLike,
    quantiles: ArrayLike,
    levels: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""Pinball (quantile) loss of predicted quantiles, one value per level.

    :math:`\rho_\tau(y - q) = \max(\tau (y - q), (\tau - 1)(y - q))`. Equal to
    scikit-learn's ``mean_pinball_loss(y, q, alpha=tau)`` for each level.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    quantiles : array_like, shape [L, N] (or [N] with a single level)
        Predicted quantiles, level axis first.
    levels : array_like, shape [L] (or scalar)
        Their levels in [0, 1], nondecreasing.
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}
        Over observations: returns ``[L]`` (``[L, N]`` for ``"none"``).

    Returns
    -------
    Array
        ``[L]``, or ``[L, N]`` with ``reduction="none"``.

    Examples
    --------
    >>> from bayescal.regression import pinball_loss
    >>> pinball_loss([1.0, 2.0], [[0.0, 3.0]], [0.9]).tolist()
    [0.5]
    """
    check_reduction(reduction)
    y = _v.as_float_array(y_true, "y_true")
    q = _v.as_float_array(quantiles, "quantiles")
    lv = _v.as_float_array(levels, "levels")
    _v.check_ndim(y, "y_true", 1)
    _v.check_nonempty(y, "y_true")
    if lv.ndim == 0:
        lv = lv[None]
    if q.ndim == 1:
        q = q[None, :]
    _v.check_levels(lv, "levels", strict=False)
    if q.shape != (lv.shape[0], y.shape[0]):
        raise ValueError(
            f"quantiles has shape {tuple(q.shape)}; expected [L, N] = ({lv.shape[0]}, "
            f"{y.shape[0]}) from levels and y_true."
        )
    dtype = _v.result_dtype(y, q, lv)
    y, q, lv = y.astype(dtype), q.astype(dtype), lv.astype(dtype)
    _v.check_finite(y, "y_true")
    _v.check_finite(q, "quantiles")
    w = _v.mask_weights(check_weights(weights, y.shape[0], y.dtype), y.shape, y.dtype)
    return _pinball_kernel(y, q, lv, w, reduction)
