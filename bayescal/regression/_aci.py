"""Adaptive conformal inference over a stream (Gibbs & Candes 2021).

Split conformal's guarantee needs exchangeable data; a stream with drift breaks it.
ACI keeps the long-run miscoverage at ``alpha`` anyway by moving the level it asks of
the conformal quantile: after each observation,

    alpha_{t+1} = alpha_t + gamma * (alpha - err_t),   err_t = 1[y_t outside C_t],

so a run of misses widens the next intervals and a run of hits narrows them. Whatever
the data, ``|mean(err) - alpha| <= (max(alpha_1, 1 - alpha_1) + gamma) / (gamma T)``
without clipping (Gibbs & Candes 2021, Prop. 4.1). The whole stream is one
``lax.scan``: one compiled program per call.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis, paddable
from bayescal._src.options import coverage_and_alpha

__all__ = ["AdaptiveConformalResult", "adaptive_conformal_intervals"]


class AdaptiveConformalResult(NamedTuple):
    """:func:`adaptive_conformal_intervals`' result, one entry per time step.

    Attributes
    ----------
    lower, upper : Array, shape [T]
        The interval given before ``y_t`` was seen (infinite where the level asked
        for more scores than there are; empty, ``lower > upper``, where ``alpha_t >= 1``).
    alpha : Array, shape [T]
        The miscoverage level ``alpha_t`` each interval was made for.
    covered : Array of bool, shape [T]
        Whether ``y_t`` fell in its interval (ends included).
    coverage : Array, shape [T]
        The running coverage ``mean(covered[:t + 1])``.
    """

    lower: jax.Array
    upper: jax.Array
    alpha: jax.Array
    covered: jax.Array
    coverage: jax.Array


def adaptive_conformal_intervals(
    y_true: ArrayLike,
    loc: ArrayLike,
    scores: ArrayLike,
    scale: ArrayLike | None = None,
    *,
    coverage: float | None = None,
    alpha: float | None = None,
    gamma: float = 0.005,
    window: bool = False,
    clip: bool = True,
) -> AdaptiveConformalResult:
    r"""Adaptive conformal inference (ACI) intervals over a time series.

    At step :math:`t` the interval is :math:`\mu_t \pm \sigma_t \hat q_t`, with
    :math:`\hat q_t` the :math:`\lceil (1 - \alpha_t)(n + 1) \rceil`-th smallest of the
    :math:`n` conformity scores (+inf beyond the :math:`n`-th; the empty set where
    :math:`\alpha_t \ge 1`); then :math:`y_t` is seen and
    :math:`\alpha_{t+1} = \alpha_t + \gamma(\alpha - \mathrm{err}_t)`
    (Gibbs & Candes 2021).

    Parameters
    ----------
    y_true : array_like, shape [T]
        The observations of the stream, in time order.
    loc : array_like, shape [T]
        The point predictions made for them (before each was seen).
    scores : array_like, shape [n]
        Conformity scores of a calibration split: ``|y - loc|`` (divided by ``scale``
        if ``scale`` is given here too).
    scale : array_like, shape [T], optional
        Predicted spreads (> 0) of the stream: normalized intervals.
    coverage, alpha : float in (0, 1), optional
        The target coverage or miscoverage (default ``alpha=0.1``).
    gamma : float, default 0.005
        The step size (>= 0; 0 is split conformal): larger adapts faster to drift,
        with more variable intervals. Gibbs & Candes use 0.005.
    window : bool, default False
        False: the calibration scores stay fixed (MAPIE's ``TimeSeriesRegressor`` with
        ``method="aci"``). True: each step's score replaces the oldest (a rolling
        window of the last ``n`` scores, the online setting of Gibbs & Candes; the
        calibration scores count as given in time order, the first the oldest).
    clip : bool, default True
        Keep ``alpha_t`` in [0, 1] (as MAPIE does); False is Gibbs & Candes'
        recursion, whose long-run bound above holds exactly.

    Returns
    -------
    AdaptiveConformalResult
        ``(lower, upper, alpha, covered, coverage)``, one entry per step.

    See Also
    --------
    fit_conformal : The split conformal interval (``gamma=0``).

    References
    ----------
    Gibbs & Candes (2021), "Adaptive conformal inference under distribution shift",
    NeurIPS 34. MAPIE's ``TimeSeriesRegressor.adapt_conformal_inference`` (the
    reference of the tests).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import adaptive_conformal_intervals
    >>> scores = np.arange(1.0, 10.0)  # |y - loc| of 9 calibration cases
    >>> out = adaptive_conformal_intervals([0.5, 20.0, 0.0], [0.0, 0.0, 0.0], scores,
    ...                                    alpha=0.2, gamma=0.1)
    >>> out.upper.tolist()  # the 8th smallest score, then wider after the miss
    [8.0, 8.0, 9.0]
    >>> out.covered.tolist(), [round(a, 2) for a in out.alpha.tolist()]
    ([True, False, True], [0.2, 0.22, 0.14])
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not (
        math.isfinite(gamma) and gamma >= 0
    ):
        raise ValueError(f"gamma must be a float >= 0 (the step size); got {gamma!r}.")
    window = _v.check_bool(window, "window")
    clip = _v.check_bool(clip, "clip")
    # the scores padded with +inf to their bucket on the host (their count is an
    # argument): a new number of scores in a used bucket compiles nothing
    count = np.asarray(np.shape(scores)[-1] if np.ndim(scores) else 0, np.int32)
    if paddable(scores) and np.ndim(scores) == 1 and np.size(scores):
        scores = pad_axis(np.asarray(scores), bucket_size(int(count)), fill=np.inf)
    return _aci(
        y_true, loc, scale, scores, count, alpha=a, gamma=float(gamma), window=window, clip=clip
    )


@_v.validated(fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1}, per_observation=-1)
def _aci(y_true, loc, scale, scores, count, *, alpha, gamma, window, clip):
    y = _v.as_float_array(y_true, "y_true")
    mu = _v.as_float_array(loc, "loc")
    s = _v.as_float_array(scores, "scores")
    for name, x in (("y_true", y), ("loc", mu), ("scores", s)):
        _v.check_ndim(x, name, 1)
        _v.check_nonempty(x, name)
    _v.check_same_shape(y_true=y, loc=mu)
    _v.check_finite(y, "y_true")
    _v.check_finite(mu, "loc")
    real = jnp.arange(s.shape[-1]) < count  # the scores, not their padding
    _v.check_nonnegative(jnp.where(real, s, 0), "scores", "conformity scores")
    dtype = jnp.result_type(y, mu, s)
    sd = jnp.ones_like(y, dtype)
    if scale is not None:
        sd = _v.as_float_array(scale, "scale")
        _v.check_same_shape(y_true=y, scale=sd)
        _v.check_positive(sd, "scale")
    n = count.astype(jnp.int32)
    size = s.shape[-1]
    inf = jnp.asarray(jnp.inf, dtype)
    given = jnp.where(real, s, inf).astype(dtype)  # in the given order: oldest first
    fixed = jnp.sort(given)

    def step(carry, obs):
        alpha_t, ring, oldest = carry
        yt, mt, st = obs
        ordered = jnp.sort(ring) if window else fixed
        k = jnp.ceil((1 - alpha_t) * (n + 1)).astype(jnp.int32)
        q = jnp.take(ordered, jnp.clip(k - 1, 0, size - 1))
        q = jnp.where(k > n, inf, jnp.where(k < 1, -inf, q))
        lo, hi = mt - st * q, mt + st * q
        hit = (lo <= yt) & (yt <= hi)
        nxt = alpha_t + gamma * (alpha - (1 - hit.astype(dtype)))
        if clip:
            nxt = jnp.clip(nxt, 0, 1)
        if window:
            ring = ring.at[oldest].set(jnp.abs(yt - mt) / st)
            oldest = (oldest + 1) % n
        return (nxt, ring, oldest), (lo, hi, alpha_t, hit)

    start = (jnp.asarray(alpha, dtype), given, jnp.zeros((), jnp.int32))
    _, (lo, hi, alphas, hit) = jax.lax.scan(
        step, start, (y.astype(dtype), mu.astype(dtype), sd.astype(dtype))
    )
    running = jnp.cumsum(hit.astype(dtype)) / jnp.arange(1, hit.shape[0] + 1, dtype=dtype)
    return AdaptiveConformalResult(lo, hi, alphas, hit, running)
