"""Proper scoring rules for regression predictives."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.sorting import sort_last_axis

__all__ = ["crps_normal", "crps_draws", "nll_normal", "interval_score", "pinball_loss"]

REDUCTIONS = ("mean", "sum", "none")


def _reduce(x: jax.Array, reduction: str) -> jax.Array:
    if reduction == "mean":
        return jnp.mean(x, axis=-1)
    if reduction == "sum":
        return jnp.sum(x, axis=-1)
    return x


def _prep(y_true, reduction, **params):
    _v.check_choice(reduction, "reduction", REDUCTIONS)
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


@functools.partial(jax.jit, static_argnames="reduction")
def _crps_normal_kernel(y, loc, scale, reduction):
    z = (y - loc) / scale
    pdf = jnp.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    crps = scale * (z * (2 * ndtr(z) - 1) + 2 * pdf - 1 / math.sqrt(math.pi))
    return _reduce(crps, reduction)


@_v.validated
def crps_normal(
    y_true: ArrayLike, loc: ArrayLike, scale: ArrayLike, *, reduction: str = "mean"
) -> jax.Array:
    r"""Continuous ranked probability score of Normal predictives (closed form).

    .. math:: \mathrm{CRPS}(N(\mu, \sigma^2), y) = \sigma\Big[z(2\Phi(z) - 1)
              + 2\varphi(z) - \tfrac{1}{\sqrt\pi}\Big],\quad z = (y - \mu)/\sigma

    (Gneiting & Raftery, 2007). Lower is better.

    Parameters
    ----------
    y_true, loc, scale : array_like, shape [N]
    reduction : {"mean", "sum", "none"}
        Average over observations (default), sum, or return per-observation scores.

    Examples
    --------
    >>> from bayescal.regression import crps_normal
    >>> round(float(crps_normal([0.0], 0.0, 1.0)), 4)
    0.2337
    """
    y, a = _prep(y_true, reduction, loc=loc, scale=scale)
    _v.check_positive(a["scale"], "scale")
    return _crps_normal_kernel(y, a["loc"], a["scale"], reduction)


@functools.partial(jax.jit, static_argnames=("reduction", "fair"))
def _crps_draws_kernel(y, draws, reduction, fair):
    s = draws.shape[0]
    term1 = jnp.mean(jnp.abs(draws - y), axis=0)
    # E|X - X'| from order statistics: (2 / S^2) sum_i (2i - S - 1) x_(i), i = 1..S
    xs = sort_last_axis(draws.T)  # [N, S]
    i = jnp.arange(1, s + 1, dtype=draws.dtype)
    pair = 2.0 * jnp.sum((2 * i - s - 1) * xs, axis=-1) / (s * s)
    if fair:
        pair = pair * s / jnp.maximum(s - 1, 1)
    return _reduce(term1 - 0.5 * pair, reduction)


@_v.validated
def crps_draws(
    y_true: ArrayLike, draws: ArrayLike, *, fair: bool = False, reduction: str = "mean"
) -> jax.Array:
    r"""CRPS of the empirical distribution of predictive draws.

    .. math:: \mathrm{CRPS} = \frac1S\sum_s |x_s - y| - \frac{1}{2 S^2}\sum_{s,t}|x_s - x_t|

    The pair term is computed in O(S log S) from sorted draws. ``fair=True`` divides
    the pair term by :math:`S(S-1)` instead of :math:`S^2`: the unbiased estimator of
    the CRPS of the distribution the draws come from (Ferro, 2014).

    Parameters
    ----------
    y_true : array_like, shape [N]
    draws : array_like, shape [S, N]
    fair : bool, default False
    reduction : {"mean", "sum", "none"}

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.regression import crps_draws
    >>> float(crps_draws(jnp.array([0.0]), jnp.array([[-1.0], [1.0]])))
    0.5
    """
    _v.check_choice(reduction, "reduction", REDUCTIONS)
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
    return _crps_draws_kernel(y, d, reduction, bool(fair))


@functools.partial(jax.jit, static_argnames="reduction")
def _nll_normal_kernel(y, loc, scale, reduction):
    z = (y - loc) / scale
    nll = 0.5 * z * z + jnp.log(scale) + 0.5 * math.log(2 * math.pi)
    return _reduce(nll, reduction)


@_v.validated
def nll_normal(
    y_true: ArrayLike, loc: ArrayLike, scale: ArrayLike, *, reduction: str = "mean"
) -> jax.Array:
    r"""Negative log-likelihood of Normal predictives.

    :math:`\tfrac12 \log(2\pi\sigma^2) + (y - \mu)^2 / (2\sigma^2)`.

    Examples
    --------
    >>> from bayescal.regression import nll_normal
    >>> round(float(nll_normal([0.0], 0.0, 1.0)), 4)
    0.9189
    """
    y, a = _prep(y_true, reduction, loc=loc, scale=scale)
    _v.check_positive(a["scale"], "scale")
    return _nll_normal_kernel(y, a["loc"], a["scale"], reduction)


@functools.partial(jax.jit, static_argnames="reduction")
def _interval_score_kernel(y, lower, upper, alpha, reduction):
    below = jnp.maximum(lower - y, 0)
    above = jnp.maximum(y - upper, 0)
    score = (upper - lower) + (2 / alpha) * (below + above)
    return _reduce(score, reduction)


@_v.validated
def interval_score(
    y_true: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    *,
    alpha: float,
    reduction: str = "mean",
) -> jax.Array:
    r"""Interval score of central ``(1 - alpha)`` prediction intervals.

    .. math:: S_\alpha(l, u; y) = (u - l) + \tfrac2\alpha (l - y)\,1\{y < l\}
              + \tfrac2\alpha (y - u)\,1\{y > u\}

    (Gneiting & Raftery, 2007, eq. 43). Lower is better.

    Parameters
    ----------
    y_true, lower, upper : array_like, shape [N]
    alpha : float in (0, 1)
        Miscoverage of the interval: a 90% interval has ``alpha=0.1``.
    reduction : {"mean", "sum", "none"}

    Examples
    --------
    >>> from bayescal.regression import interval_score
    >>> float(interval_score([3.0], [0.0], [2.0], alpha=0.5))
    6.0
    """
    y, a = _prep(y_true, reduction, lower=lower, upper=upper)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise ValueError(
            f"alpha must be a float in (0, 1) (e.g. 0.1 for a 90% interval); got {alpha!r}."
        )
    lo, up = a["lower"], a["upper"]
    _v.check_less_equal(
        lo, up, "lower", "must be <= upper for every observation; some intervals are reversed"
    )
    return _interval_score_kernel(y, lo, up, alpha, reduction)


@functools.partial(jax.jit, static_argnames="reduction")
def _pinball_kernel(y, q, levels, reduction):
    diff = y[None, :] - q
    tau = levels[:, None]
    loss = jnp.maximum(tau * diff, (tau - 1) * diff)  # [L, N]
    return _reduce(loss, reduction)


@_v.validated
def pinball_loss(
    y_true: ArrayLike, quantiles: ArrayLike, levels: ArrayLike, *, reduction: str = "mean"
) -> jax.Array:
    r"""Pinball (quantile) loss of predicted quantiles, one value per level.

    :math:`\rho_\tau(y - q) = \max(\tau (y - q), (\tau - 1)(y - q))`. Equal to
    scikit-learn's ``mean_pinball_loss(y, q, alpha=tau)`` for each level.

    Parameters
    ----------
    y_true : array_like, shape [N]
    quantiles : array_like, shape [L, N] (or [N] with a single level)
    levels : array_like, shape [L] (or scalar)
    reduction : {"mean", "sum", "none"}
        Over observations: returns ``[L]`` (``[L, N]`` for ``"none"``).

    Examples
    --------
    >>> from bayescal.regression import pinball_loss
    >>> pinball_loss([1.0, 2.0], [[0.0, 3.0]], [0.9]).tolist()
    [0.5]
    """
    _v.check_choice(reduction, "reduction", REDUCTIONS)
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
    return _pinball_kernel(y, q, lv, reduction)
