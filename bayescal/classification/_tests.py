"""Calibration tests and summaries for binary classifiers.

Cox's calibration slope and intercept with their likelihood-ratio test, Spiegelhalter's
z test, the Hosmer-Lemeshow test on deciles of risk, the Kolmogorov-Smirnov and Kuiper
tests on the cumulative differences (Tygert 2021; Arrieta-Ibarra et al. 2022), and the
ICI / E50 / E90 / Emax summaries of Austin & Steyerberg (2019) on the isotonic (CORP)
calibration curve.
Each is one compiled program per bucket of N (checks included), jittable and
vmappable (invalid values give NaN there).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfc, gammaincc

from bayescal._src import validation as _v
from bayescal._src.host import _device, _flushed, _result
from bayescal._src.host import erfc as host_erfc
from bayescal._src.host import first as host_first
from bayescal._src.sorting import gather_all
from bayescal._src.ties import argsort_last_axis, isotonic_fit
from bayescal._src.warn import warn
from bayescal.classification._calibrators import _logistic_fit, _logit, _no_infinite_logits
from bayescal.classification._host import (
    _MAX_BINS,
    _binary,
    _binary_logits,
    _binned,
    _eps_ok,
    _logistic_one,
)
from bayescal.classification._inputs import (
    binary_inputs,
    check_eps,
    observation_weights,
    quick_compiler_options,
)
from bayescal.classification._metrics import _reliability_kernel

__all__ = [
    "CalibrationSlope",
    "SpiegelhalterTest",
    "HosmerLemeshowTest",
    "CumulativeCalibrationTest",
    "IsotonicCalibrationIndex",
    "calibration_slope_intercept",
    "spiegelhalter_z",
    "hosmer_lemeshow",
    "cumulative_calibration_test",
    "isotonic_calibration_index",
]

# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "y_prob": 0, "weights": 0}


def _ones_or(w: jax.Array | None, like: jax.Array) -> jax.Array:
    return jnp.ones_like(like) if w is None else w


# --------------------------------------------------------------------------- Cox
class CalibrationSlope(NamedTuple):
    """Cox's calibration slope and intercept and their likelihood-ratio test.

    Attributes
    ----------
    slope, intercept : Array, scalar
        :math:`\\beta, \\alpha` of the logistic regression
        :math:`\\operatorname{logit} P(y = 1) = \\alpha + \\beta \\operatorname{logit} p`.
    statistic : Array, scalar
        Likelihood-ratio statistic for :math:`\\alpha = 0, \\beta = 1` jointly.
    p_value : Array, scalar
        Its p-value on :math:`\\chi^2_2`.
    """

    slope: jax.Array
    intercept: jax.Array
    statistic: jax.Array
    p_value: jax.Array


@functools.partial(jax.jit, static_argnames=("eps",))
def _slope_kernel(y, p, w, *, eps):
    """``w``: 0 in a bucket's padding (None: no padding)."""
    f = _logit(p, eps)
    # The shared Newton solver of fit_platt (hard labels): eta = theta[0] f + theta[1].
    theta, ok = _logistic_fit((f,), y, w, None, None, soft_labels=False)
    slope, intercept = theta[0], theta[1]
    ww = _ones_or(w, p)

    def nll(eta):  # per observation, without cancellation: softplus(-+eta)
        return jnp.where(y > 0.5, jax.nn.softplus(-eta), jax.nn.softplus(eta))

    # 2 (l(alpha, beta) - l(0, 1)), summed per observation; >= 0 at the optimum.
    stat = 2 * jnp.sum(ww * (nll(f) - nll(slope * f + intercept)))
    stat = jnp.maximum(stat, 0).astype(p.dtype)
    p_value = jnp.exp(-stat / 2)  # the chi-square survival function with 2 dof
    return CalibrationSlope(slope, intercept, stat, p_value.astype(p.dtype)), ok


@_v.validated(fuse=True, bucket=_BUCKET)
def _calibration_slope(y_true, y_prob, weights, *, eps):
    y, p = binary_inputs(y_true, y_prob)
    w = observation_weights(weights, p)
    _v.check_both_classes(y, "y_true")
    _no_infinite_logits(p, "y_prob", eps, "the calibration slope")
    return _slope_kernel(y, p, _v.mask_weights(w, p.shape, p.dtype), eps=eps)


# --------------------------------------------------------------------------- host twins
def _twin_calibration_slope_intercept(
    y_true: Any, y_prob: Any, *, weights: Any = None, eps: Any = None
) -> Any:
    """:func:`bayescal.classification.calibration_slope_intercept` on the host: Cox's
    logistic fit by :func:`logistic_rows` (hard labels, float64), the same optimum as
    the kernel's Newton solver (the loss is convex)."""
    if not _eps_ok(eps):
        return None

    data = _binary_logits(y_true, y_prob, weights, eps)
    if data is None:
        return None
    y, p, w, f = data
    theta = _logistic_one(f, y, w, False)
    if theta is None:
        return None
    slope, intercept = theta
    f64, y64 = f.astype(np.float64), y.astype(np.float64)
    w = np.ones(y.size) if w is None else w.astype(np.float64)

    def nll(eta: np.ndarray) -> np.ndarray:  # softplus(-+eta), per observation
        return np.logaddexp(0.0, np.where(y64 > 0.5, -eta, eta))

    stat = max(2 * float(np.sum(w * (nll(f64) - nll(slope * f64 + intercept)))), 0.0)
    dt = p.dtype
    # the kernel rounds the statistic to the dtype before exp(-stat / 2)
    stat_dt = dt.type(stat)
    return CalibrationSlope(
        _result(slope, dt),
        _result(intercept, dt),
        _result(stat_dt, dt),
        _device(_flushed(np.asarray(np.exp(-np.float64(stat_dt) / 2), dt))),
    )


def _twin_hosmer_lemeshow(
    y_true: Any, y_prob: Any, bins: Any = 10, *, dof: Any = None, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.hosmer_lemeshow` on the host (unweighted)."""
    if weights is not None or type(bins) is not int or not 3 <= bins <= _MAX_BINS:
        return None
    if dof is not None and (type(dof) is not int or dof < 1):
        return None
    from scipy.special import gammaincc


    data = _binned(y_true, y_prob, None, bins, "quantile")
    if data is None or data[1].size < bins:  # too few observations: the kernel raises
        return None
    y, p, _, _, idx = data
    n_k = np.bincount(idx, minlength=bins).astype(np.float64)
    full = n_k > 0
    pbar = np.bincount(idx, p.astype(np.float64), bins)[full] / n_k[full]
    ybar = np.bincount(idx, y.astype(np.float64), bins)[full] / n_k[full]
    dt = p.dtype
    # the kernel's per-bin means are in the dtype: round them the same way
    pbar, ybar = pbar.astype(dt).astype(np.float64), ybar.astype(dt).astype(np.float64)
    denom = pbar * (1 - pbar)
    keep = denom > 0
    stat = dt.type(np.sum(n_k[full][keep] * (ybar[keep] - pbar[keep]) ** 2 / denom[keep]))
    if np.any(~keep & (ybar != pbar)):  # an event where every prediction was 0 (or 1)
        stat = dt.type(np.inf)
    if dof is None:
        dof = int(full.sum()) - 2
        if dof < 1:
            return None  # too few filled groups: the kernel raises
    p_value = gammaincc(dof / 2, np.float64(stat) / 2)
    return HosmerLemeshowTest(
        _result(stat, dt),
        _device(np.asarray(dof, np.int32)),
        _device(_flushed(np.asarray(p_value, dt))),
    )


def _twin_spiegelhalter_z(y_true: Any, y_prob: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.spiegelhalter_z` on the host (the p-value by
    ``math.erfc``: importing scipy.special took 0.3-0.56 s of a first call)."""

    data = _binary(y_true, y_prob, weights, True)
    if data is None:
        return None
    y, p, w = data
    p64 = p.astype(np.float64)
    ww = np.ones_like(p64) if w is None else w.astype(np.float64)
    c = 1 - 2 * p64
    num = np.sum(ww * (y - p64) * c)
    var = np.sum(ww * c * c * p64 * (1 - p64))
    if not var > 0:
        return None  # z is NaN or infinite: the kernel's value
    dt = p.dtype
    z = dt.type(num / np.sqrt(var))
    p_value = _flushed(np.asarray(math.erfc(abs(float(z)) / math.sqrt(2)), dt))
    return SpiegelhalterTest(_result(z, dt), _device(p_value))


@host_first(_twin_calibration_slope_intercept)
def calibration_slope_intercept(
    y_true: Any, y_prob: Any, *, weights: Any = None, eps: float | None = None
) -> CalibrationSlope:
    r"""Cox's calibration slope and intercept, with the likelihood-ratio test of both.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1 (both classes present).
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in (0, 1).
    weights : array_like, shape [N], optional
        Nonnegative frequency weights (not all 0): an integer weight counts its row
        that many times (the result equals that of the repeated rows).
    eps : float in (0, 0.5), optional
        Clip the probabilities to ``[eps, 1 - eps]`` before the logit. Without it,
        probabilities of exactly 0 or 1 raise an error (their logit is infinite).

    Returns
    -------
    CalibrationSlope
        ``(slope, intercept, statistic, p_value)``, scalars in ``y_prob``'s dtype.

    Notes
    -----
    The maximum-likelihood fit of
    :math:`\operatorname{logit} P(y = 1) = \alpha + \beta \operatorname{logit} p` (Cox
    1958) is exactly :func:`fit_platt` with ``input="prob", soft_labels=False``
    (:math:`\beta = -A`, :math:`\alpha = -B`) and runs on its Newton solver. A
    calibrated model has :math:`\beta = 1, \alpha = 0`; :math:`\beta < 1` means
    predictions too extreme (overfitting), :math:`\alpha \ne 0` predictions too high or
    too low on average. The statistic is :math:`2\,(\ell(\hat\alpha, \hat\beta) -
    \ell(0, 1))`, asymptotically :math:`\chi^2_2` when the probabilities are
    calibrated and were not fitted on these data (external validation); its p-value
    is :math:`e^{-\mathrm{statistic}/2}`. The size at the 5% level is checked by
    simulation in the tests. When the classes are separated by ``logit(p)`` the
    maximum-likelihood slope is infinite: eagerly a ``RuntimeWarning`` says so.
    ``jax.jit`` and ``jax.vmap`` work; there invalid values give NaN.

    References
    ----------
    Cox, D. R. (1958). Two further applications of a model for binary regression.
    *Biometrika* 45, 562-565.
    Steyerberg, E. W. (2019). *Clinical Prediction Models*, 2nd ed., ch. 15. Springer.

    Examples
    --------
    >>> from bayescal.classification import calibration_slope_intercept
    >>> r = calibration_slope_intercept([0, 0, 1, 0, 1, 1], [0.1, 0.3, 0.4, 0.6, 0.7, 0.9])
    >>> round(float(r.slope), 3), abs(float(r.intercept)) < 1e-6
    (1.505, True)
    >>> round(float(r.statistic), 3), round(float(r.p_value), 3)
    (0.207, 0.901)
    """
    eps = check_eps(eps)
    res, ok = _calibration_slope(y_true, y_prob, weights, eps=eps)
    if _v.is_concrete(ok) and not bool(ok):
        warn(
            "calibration_slope_intercept: the logistic fit did not converge; the "
            "classes are (nearly) separated by logit(y_prob), so the maximum-likelihood "
            "slope is infinite and the test is not meaningful.",
            RuntimeWarning,
        )
    return res


# --------------------------------------------------------------------------- Spiegelhalter
class SpiegelhalterTest(NamedTuple):
    """Spiegelhalter's z statistic and its two-sided p-value.

    Attributes
    ----------
    statistic : Array, scalar
        :math:`z`, standard normal under calibration.
    p_value : Array, scalar
        :math:`2\\,(1 - \\Phi(|z|))`.
    """

    statistic: jax.Array
    p_value: jax.Array


@jax.jit
def _spiegelhalter_kernel(y, p, w):
    ww = _ones_or(w, p)
    c = 1 - 2 * p
    num = jnp.sum(ww * (y - p) * c)
    var = jnp.sum(ww * c * c * p * (1 - p))
    z = (num / jnp.sqrt(var)).astype(p.dtype)
    return SpiegelhalterTest(z, erfc(jnp.abs(z) / jnp.sqrt(2.0).astype(p.dtype))), var


@host_first(_twin_spiegelhalter_z)
@_v.validated(fuse=True, bucket=_BUCKET)
def spiegelhalter_z(y_true: Any, y_prob: Any, *, weights: Any = None) -> SpiegelhalterTest:
    r"""Spiegelhalter's z test of calibration.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    weights : array_like, shape [N], optional
        Nonnegative frequency weights (not all 0): an integer weight counts its row
        that many times (the result equals that of the repeated rows).

    Returns
    -------
    SpiegelhalterTest
        ``(statistic, p_value)``, scalars in ``y_prob``'s dtype.

    Notes
    -----
    .. math:: z = \frac{\sum_i (y_i - p_i)(1 - 2 p_i)}
                       {\sqrt{\sum_i (1 - 2 p_i)^2 p_i (1 - p_i)}},

    the standardized difference between the Brier score and its expectation under
    calibration (Spiegelhalter 1986), asymptotically standard normal when
    :math:`y_i \sim \mathrm{Bernoulli}(p_i)` independently; the p-value is two-sided,
    :math:`\operatorname{erfc}(|z| / \sqrt 2)`. The size at the 5% level is checked by
    simulation in the tests. When every :math:`p_i` is 0, 1/2 or 1 the denominator is 0
    and :math:`z` undefined: a ``ValueError`` says so. ``jax.jit`` and ``jax.vmap``
    work; there invalid values (and that case) give NaN.

    References
    ----------
    Spiegelhalter, D. J. (1986). Probabilistic prediction in patient management and
    clinical trials. *Statistics in Medicine* 5, 421-433.

    Examples
    --------
    >>> from bayescal.classification import spiegelhalter_z
    >>> t = spiegelhalter_z([0, 0, 1, 0, 1, 1], [0.1, 0.3, 0.4, 0.6, 0.7, 0.9])
    >>> round(float(t.statistic), 3), round(float(t.p_value), 3)
    (-0.356, 0.722)
    """
    y, p = binary_inputs(y_true, y_prob)
    w = observation_weights(weights, p)
    test, var = _spiegelhalter_kernel(y, p, _v.mask_weights(w, p.shape, p.dtype))
    _v.check_less_equal(
        jnp.asarray(jnp.finfo(var.dtype).tiny, var.dtype),
        var,
        "y_prob",
        "must not all be 0, 1/2 or 1 (among the observations of weight > 0): the "
        "variance of the test, sum((1 - 2 p)^2 p (1 - p)), is then 0 and z undefined. "
        "With every probability 1/2 the Brier score does not depend on the labels; use "
        "hosmer_lemeshow or a reliability diagram instead",
    )
    return test


# --------------------------------------------------------------------------- cumulative
class CumulativeCalibrationTest(NamedTuple):
    r"""The Kolmogorov-Smirnov and Kuiper tests on the cumulative differences.

    Attributes
    ----------
    ks_statistic : Array, scalar
        :math:`\max_k |C_k| / \sigma` (ECCE-MAD over its standard deviation).
    ks_p_value : Array, scalar
        :math:`P(\max_{0 \le t \le 1} |B_t| \ge` ``ks_statistic``:math:`)`.
    kuiper_statistic : Array, scalar
        :math:`(\max_k C_k - \min_k C_k) / \sigma` with :math:`C_0 = 0` (ECCE-R).
    kuiper_p_value : Array, scalar
        :math:`P(\max_t B_t - \min_t B_t \ge` ``kuiper_statistic``:math:`)`.
    """

    ks_statistic: jax.Array
    ks_p_value: jax.Array
    kuiper_statistic: jax.Array
    kuiper_p_value: jax.Array


_SERIES = 12  # terms of each series below: enough for float64 on either side of x = 1


def brownian_p_values(ks: Any, kuiper: Any, xp: Any = jnp) -> tuple[Any, Any]:
    r"""Survival functions of :math:`\max_{[0,1]} |B|` at ``ks`` and of the range
    :math:`\max_{[0,1]} B - \min_{[0,1]} B` at ``kuiper`` for a standard Brownian
    motion ``B``, once for both paths (``xp``: ``jax.numpy`` or ``numpy``).

    Below 1 as one minus the theta series of the distribution functions (those of
    Tygert 2021, as MAPIE computes them), from 1 on by series of ``erfc`` that keep
    the tail's relative accuracy: :math:`2 \sum_{j \ge 0} (-1)^j
    \operatorname{erfc}((2j + 1) x / \sqrt 2)` (reflection principle) and
    :math:`4 \sum_{k \ge 1} (-1)^{k-1} k \operatorname{erfc}(k x / \sqrt 2)`
    (integrating Feller's 1951 density of the range).
    """
    erfc = jax.scipy.special.erfc if xp is jnp else host_erfc
    out = []
    pairs = ((ks, _ks_tail_terms, _ks_cdf), (kuiper, _range_tail_terms, _range_cdf))
    for x, tail_terms, cdf in pairs:
        small = x < 1
        near = xp.where(small, xp.maximum(x, 0.05), 1)  # the series' domain; below 0.05: 1
        far = xp.where(small, 1, x)
        k = xp.arange(_SERIES, dtype=xp.asarray(far).dtype)
        near, far = near[..., None], far[..., None]  # x of any shape, the terms last
        below = xp.where(x < 0.05, 1.0, 1 - xp.sum(cdf(near, k, xp), axis=-1))
        tail = xp.sum(tail_terms(far, k, erfc, xp), axis=-1)
        out.append(xp.where(small, below, xp.clip(tail, 0, 1)))
    return out[0], out[1]


def _ks_cdf(x, k, xp):  # the terms of the distribution functions' series
    h = k + 0.5
    return 2 / math.pi * (-1) ** k / h * xp.exp(-(h**2) * math.pi**2 / (2 * x**2))


def _range_cdf(x, k, xp):
    h = k + 0.5
    e = xp.exp(-2 * h**2 * math.pi**2 / x**2)
    return (8 / x**2 + 2 / (h**2 * math.pi**2)) * e


def _ks_tail_terms(x, k, erfc, xp):
    return 2 * (-1) ** k * erfc((2 * k + 1) * x / math.sqrt(2))


def _range_tail_terms(x, k, erfc, xp):
    j = k + 1
    return 4 * (-1) ** k * j * erfc(j * x / math.sqrt(2))


def _cumulative_statistics(c: Any, var: Any, xp: Any) -> tuple[Any, Any]:
    """``(ks, kuiper)`` of the cumulative sums ``c`` at the ends of the tie groups."""
    scale = xp.sqrt(var)
    top, bottom = xp.maximum(xp.max(c), 0), xp.minimum(xp.min(c), 0)  # C_0 = 0 counts
    return xp.maximum(top, -bottom) / scale, (top - bottom) / scale


@jax.jit
def _cumulative_kernel(y, p, w):
    ww = _ones_or(w, p)
    order = argsort_last_axis(p)
    ps = jnp.take(p, order)
    c = jnp.cumsum(jnp.take(ww * (y - p), order))
    end = jnp.concatenate([ps[1:] != ps[:-1], jnp.ones((1,), bool)])
    var = jnp.sum(ww * p * (1 - p))
    ks, kuiper = _cumulative_statistics(jnp.where(end, c, 0), var, jnp)
    ks, kuiper = ks.astype(p.dtype), kuiper.astype(p.dtype)
    p_ks, p_kuiper = (v.astype(p.dtype) for v in brownian_p_values(ks, kuiper, jnp))
    return CumulativeCalibrationTest(ks, p_ks, kuiper, p_kuiper), var


def _twin_cumulative_calibration_test(
    y_true: Any, y_prob: Any, *, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.cumulative_calibration_test` on the host."""
    data = _binary(y_true, y_prob, weights, True)
    if data is None:
        return None
    y, p, w = data
    p64 = p.astype(np.float64)
    ww = np.ones_like(p64) if w is None else w.astype(np.float64)
    order = np.argsort(p, kind="stable")
    ps = p[order]
    c = np.cumsum((ww * (y - p64))[order])
    var = np.sum(ww * p64 * (1 - p64))
    if not var > 0:
        return None  # the kernel path raises its message
    ks, kuiper = _cumulative_statistics(c[np.r_[ps[1:] != ps[:-1], True]], var, np)
    dt = p.dtype
    ks, kuiper = dt.type(ks), dt.type(kuiper)
    p_ks, p_kuiper = brownian_p_values(np.float64(ks), np.float64(kuiper), np)
    return CumulativeCalibrationTest(
        _result(ks, dt),
        _device(_flushed(np.asarray(p_ks, dt))),
        _result(kuiper, dt),
        _device(_flushed(np.asarray(p_kuiper, dt))),
    )


@host_first(_twin_cumulative_calibration_test)
@_v.validated(fuse=True, bucket=_BUCKET)
def cumulative_calibration_test(
    y_true: Any, y_prob: Any, *, weights: Any = None
) -> CumulativeCalibrationTest:
    r"""Kolmogorov-Smirnov and Kuiper tests of calibration on the cumulative differences.

    No bins and no bandwidth: the observations are sorted by their predicted
    probability and the differences between labels and probabilities are summed.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    weights : array_like, shape [N], optional
        Nonnegative frequency weights (not all 0): an integer weight counts its row
        that many times (the result equals that of the repeated rows).

    Returns
    -------
    CumulativeCalibrationTest
        ``(ks_statistic, ks_p_value, kuiper_statistic, kuiper_p_value)``, scalars in
        ``y_prob``'s dtype.

    Notes
    -----
    With the observations in increasing order of :math:`p`, the cumulative differences

    .. math:: C_k = \frac{1}{W} \sum_{i \le k} w_i (y_i - p_i), \qquad
              \sigma = \frac{1}{W} \sqrt{\sum_i w_i p_i (1 - p_i)}

    (:math:`W = \sum_i w_i`) behave under calibration, asymptotically, like a
    standard Brownian motion on :math:`[0, 1]` scaled by :math:`\sigma` (Tygert
    2021). The Kolmogorov-Smirnov statistic is :math:`\max_k |C_k| / \sigma`, Kuiper's
    :math:`(\max_k C_k - \min_k C_k) / \sigma` with :math:`C_0 = 0` (the path starts
    at 0; MAPIE leaves it out, which can only shrink the range); the p-values are the
    Brownian motion's exact survival functions of the maximum of :math:`|B|` and of
    the range (Arrieta-Ibarra et al. 2022), accurate in the tail. Kuiper's test is the
    more sensitive to a miscalibration that changes sign along :math:`p`.

    Tied probabilities have no order among themselves: :math:`C` is taken only after
    each group of ties (MAPIE instead breaks ties by random jitter, so that its
    statistic depends on the seed). That can only lower the statistics, so the tests
    stay valid (conservative) with ties. The sizes at the 5% level are checked by
    simulation in the tests. When every :math:`p_i` is 0 or 1, :math:`\sigma = 0` and a
    ``ValueError`` says so. ``jax.jit`` and ``jax.vmap`` work; there invalid values
    (and that case) give NaN.

    References
    ----------
    Tygert, M. (2021). Cumulative deviation of a subpopulation from the full
    population. *Journal of Big Data* 8, 117.

    Arrieta-Ibarra, I., Gujral, P., Tannen, J., Tygert, M. and Xu, C. (2022). Metrics
    of calibration for probabilistic predictions. *JMLR* 23(351), 1-54.

    Examples
    --------
    >>> from bayescal.classification import cumulative_calibration_test
    >>> t = cumulative_calibration_test([0, 0, 1, 0, 1, 1], [0.1, 0.3, 0.4, 0.6, 0.7, 0.9])
    >>> round(float(t.ks_statistic), 3), round(float(t.ks_p_value), 3)
    (0.385, 1.0)
    """
    y, p = binary_inputs(y_true, y_prob)
    w = observation_weights(weights, p)
    test, var = _cumulative_kernel(y, p, _v.mask_weights(w, p.shape, p.dtype))
    _v.check_less_equal(
        jnp.asarray(jnp.finfo(var.dtype).tiny, var.dtype),
        var,
        "y_prob",
        "must not all be 0 or 1 (among the observations of weight > 0): the standard "
        "deviation of the cumulative differences, sqrt(sum(p (1 - p))), is then 0 and "
        "the statistics undefined",
    )
    return test


# --------------------------------------------------------------------------- Hosmer-Lemeshow
class HosmerLemeshowTest(NamedTuple):
    """The Hosmer-Lemeshow statistic, its degrees of freedom and p-value.

    Attributes
    ----------
    statistic : Array, scalar
        :math:`\\hat C = \\sum_k (O_k - E_k)^2 / (E_k (1 - E_k / n_k))`.
    dof : Array, scalar (int32)
        The degrees of freedom of the reference :math:`\\chi^2`.
    p_value : Array, scalar
        The :math:`\\chi^2_{\\mathrm{dof}}` survival function at the statistic.
    """

    statistic: jax.Array
    dof: jax.Array
    p_value: jax.Array


def _weighted_quantile_edges(p, w, num_bins):
    """``np.quantile(np.repeat(p, w), k / num_bins)`` (linear) for frequency weights
    ``w`` (0 in a bucket's padding), without repeating: the order statistic ``j`` of
    the repeated data is the first sorted value whose cumulative weight exceeds ``j``;
    numpy's virtual index ``q (W - 1)`` and ``_lerp``; non-integer weights by the same
    rule. Edges never decrease (running maximum)."""
    order = jnp.argsort(p)
    xs, cw = p[order], jnp.cumsum(w[order])
    total = cw[-1]
    q = jnp.asarray(np.arange(num_bins + 1) / num_bins, p.dtype)
    h = q * (total - 1)
    lo = jnp.floor(h)
    t = h - lo
    last = p.shape[0] - 1
    a = xs[jnp.minimum(jnp.searchsorted(cw, lo, side="right"), last)]
    b = xs[jnp.minimum(jnp.searchsorted(cw, lo + 1, side="right"), last)]
    edges = jnp.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
    return jax.lax.cummax(edges)


@functools.partial(jax.jit, static_argnames=("num_bins", "dof"))
def _hl_kernel(y, p, mask, w, *, num_bins, dof):
    edges = None if w is None else _weighted_quantile_edges(p, w, num_bins)
    curve, _ = _reliability_kernel(
        y, p, w, edges, mask, num_bins=num_bins, strategy="quantile"
    )
    n_k = curve.weight.astype(p.dtype)
    pbar, ybar = curve.expected, curve.observed
    denom = pbar * (1 - pbar)
    full = n_k > 0
    keep = full & (denom > 0)
    # a group predicted 0 (or 1) throughout with an event (a non-event) in it: certain
    # miscalibration, an infinite term
    certain = full & (denom <= 0) & (ybar != pbar)
    term = jnp.where(keep, n_k * (ybar - pbar) ** 2 / jnp.where(keep, denom, 1), 0)
    term = jnp.where(certain, jnp.inf, term)
    stat = jnp.sum(term).astype(p.dtype)
    # by default the groups that hold observations (tied predictions leave some empty)
    df = jnp.sum(full).astype(jnp.int32) - 2 if dof is None else jnp.asarray(dof, jnp.int32)
    p_value = gammaincc((df / 2).astype(p.dtype), stat / 2).astype(p.dtype)
    return HosmerLemeshowTest(stat, df, p_value)


@host_first(_twin_hosmer_lemeshow)
@_v.validated(fuse=True, bucket=_BUCKET)
def hosmer_lemeshow(
    y_true: Any,
    y_prob: Any,
    bins: int = 10,
    *,
    dof: int | None = None,
    weights: Any = None,
) -> HosmerLemeshowTest:
    r"""The Hosmer-Lemeshow goodness-of-fit test on groups of equal size (deciles of risk).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    bins : int, default 10
        The number of groups :math:`g >= 3`, cut at the ``k / g`` quantiles of
        ``y_prob`` (the library's quantile binning, equal to ``np.quantile``; bins
        ``[e_k, e_{k+1})``, the last closed).
    dof : int, optional
        The degrees of freedom of the reference :math:`\chi^2`. Default: the number of
        groups that hold observations minus 2 (``bins - 2`` unless tied predictions
        leave groups empty), Hosmer & Lemeshow's for a logistic model **fitted on
        these data**. For
        probabilities from a model fitted elsewhere (external validation, or
        probabilities that are given) the statistic is asymptotically
        :math:`\chi^2_g`: pass ``dof=bins``; with ``bins - 2`` there the test rejects
        about 11% instead of 5% of calibrated models at ``bins=10`` (checked by
        simulation in the tests).
    weights : array_like, shape [N], optional
        Nonnegative frequency weights (not all 0): an integer weight counts its row
        that many times, in the groups' sums and in their quantile edges (the
        quantiles of the repeated rows; the result equals that of the repeated rows).

    Returns
    -------
    HosmerLemeshowTest
        ``(statistic, dof, p_value)``: statistic and p-value in ``y_prob``'s dtype,
        ``dof`` an int32 scalar.

    Notes
    -----
    With :math:`n_k` observations in group :math:`k`, :math:`O_k = \sum y_i` and
    :math:`E_k = \sum p_i` over the group,

    .. math:: \hat C = \sum_k \frac{(O_k - E_k)^2}{E_k (1 - E_k / n_k)}
                     = \sum_k \frac{n_k (\bar y_k - \bar p_k)^2}{\bar p_k (1 - \bar p_k)},

    empty groups (tied probabilities repeat an edge) contribute 0, and so do groups
    with :math:`\bar p_k \in \{0, 1\}` whose outcomes agree; one with an event where
    every prediction was 0 (or a non-event where it was 1) is certain
    miscalibration: the statistic is ``inf`` and the p-value 0. Tied predictions (trees,
    forests) fill fewer groups: the default ``dof`` counts only the groups that hold
    observations (with probabilities in {0, 0.2, 0.5, 0.8} it is 2, not 8, as
    probcal's). A ``ValueError`` is raised when fewer than 3 groups hold
    observations. The sizes of both conventions are
    checked by simulation in the tests (``bins - 2`` on in-sample logistic fits,
    ``bins`` on given probabilities). ``jax.jit`` and ``jax.vmap`` work; there invalid
    values give NaN.

    References
    ----------
    Hosmer, D. W. and Lemeshow, S. (1980). Goodness of fit tests for the multiple
    logistic regression model. *Communications in Statistics A* 9, 1043-1069.
    Hosmer, D. W., Lemeshow, S. and Sturdivant, R. X. (2013). *Applied Logistic
    Regression*, 3rd ed., sections 5.2.2 and 5.5. Wiley.

    Examples
    --------
    >>> from bayescal.classification import hosmer_lemeshow
    >>> t = hosmer_lemeshow([0, 0, 1, 0, 1, 1], [0.1, 0.3, 0.4, 0.6, 0.7, 0.9], bins=3)
    >>> round(float(t.statistic), 3), int(t.dof), round(float(t.p_value), 3)
    (1.0, 1, 0.317)
    """
    num_bins = _v.check_num_bins(bins, "bins")
    if num_bins < 3:
        raise ValueError(
            f"bins must be an int >= 3 (the test has bins - 2 degrees of freedom by "
            f"default); got {num_bins}."
        )
    if dof is not None:
        dof = _v.check_positive_int(dof, "dof")
    y, p = binary_inputs(y_true, y_prob)
    _v.check_less_equal(
        jnp.asarray(num_bins),
        jnp.asarray(_v.observation_count(p)),  # traced in a bucketed call
        "y_prob",
        f"must hold at least bins={num_bins} observations, one per group (empty groups "
        "leave the chi-square reference meaningless). Pass fewer bins: groups of ten or "
        "more observations each, for the chi-square approximation",
    )
    w = observation_weights(weights, p)
    mask = _v.observation_mask(p.shape[0])
    w = _v.mask_weights(w, p.shape, p.dtype)
    test = _hl_kernel(y, p, mask, w, num_bins=num_bins, dof=dof)
    if dof is None:
        _v.check_less_equal(
            jnp.asarray(1, jnp.int32),
            test.dof,
            "y_prob",
            "must fill at least 3 of the groups (tied predictions leave groups empty, "
            "and the default dof counts only the filled ones minus 2); the test needs "
            "more distinct predictions, or pass dof explicitly",
        )
    return test


# --------------------------------------------------------------------------- ICI
class IsotonicCalibrationIndex(NamedTuple):
    """Summaries of :math:`|p_i - \\hat r(p_i)|` with :math:`\\hat r` the isotonic curve.

    Attributes
    ----------
    ici : Array, scalar
        The mean absolute difference (integrated calibration index).
    e50, e90 : Array, scalar
        Its median and 90th percentile (``np.quantile``'s linear interpolation).
    emax : Array, scalar
        Its maximum.
    """

    ici: jax.Array
    e50: jax.Array
    e90: jax.Array
    emax: jax.Array


def _masked_quantile(sorted_d, n, q):
    """numpy's linear quantile of the first ``n`` entries of sorted ``sorted_d``."""
    dtype = sorted_d.dtype
    pos = jnp.asarray(q, dtype) * (n - 1).astype(dtype)
    lo = jnp.floor(pos)
    frac = pos - lo
    i = lo.astype(jnp.int32)
    j = jnp.minimum(i + 1, n - 1)
    a, b = sorted_d[i], sorted_d[j]
    return a + (b - a) * frac


@jax.jit
def _ici_kernel(y, p, w):
    """``w``: 1 for the real observations of a padded bucket, 0 for the padding."""
    # The padding repeats the last observation: pooled with its tie, weight 0 changes
    # no fitted value (as in the CORP decomposition).
    r = isotonic_fit(p, y, w).fitted
    d = jnp.abs(p - r)
    if w is None:
        real = jnp.ones(d.shape, bool)
    else:
        real = w > 0
    n = jnp.sum(real).astype(jnp.int32)
    ici = jnp.sum(jnp.where(real, d, 0)) / n.astype(d.dtype)
    s = jnp.sort(jnp.where(real, d, jnp.inf))
    e50 = _masked_quantile(s, n, 0.5)
    e90 = _masked_quantile(s, n, 0.9)
    emax = s[n - 1]
    return IsotonicCalibrationIndex(*(v.astype(p.dtype) for v in (ici, e50, e90, emax)))


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=quick_compiler_options)
def isotonic_calibration_index(y_true: Any, y_prob: Any) -> IsotonicCalibrationIndex:
    r"""ICI, E50, E90 and Emax (Austin & Steyerberg 2019) on the isotonic (CORP) curve.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].

    Returns
    -------
    IsotonicCalibrationIndex
        ``(ici, e50, e90, emax)``, scalars in ``y_prob``'s dtype, in [0, 1].

    Notes
    -----
    Austin & Steyerberg define the integrated calibration index as the mean of
    :math:`|p_i - \hat r(p_i)|`, with :math:`\hat r` a **loess** smooth of :math:`y` on
    :math:`p`, and E50, E90, Emax as the median, 90th percentile and maximum of the
    same differences. This function uses the same summaries with a different
    smoother: :math:`\hat r` is the isotonic (PAV) regression of :math:`y` on
    :math:`p`, ties pooled, i.e. the CORP reliability curve of Dimitriadis, Gneiting &
    Jordan (2021) (:func:`corp_curve`, :func:`brier_decomposition`). It has no span
    to choose and is computed exactly in O(N log N), but it is a step function that
    follows the data more closely than loess, so the values are **not** those of the
    paper's loess-based ICI (typically larger on small samples: on calibrated data the
    isotonic curve still deviates from the diagonal by its noise); compare them only
    with each other. Quantiles follow ``np.quantile`` (linear). ``jax.jit`` and
    ``jax.vmap`` work; there invalid values give NaN.

    References
    ----------
    Austin, P. C. and Steyerberg, E. W. (2019). The Integrated Calibration Index (ICI)
    and related metrics for quantifying the calibration of logistic regression models.
    *Statistics in Medicine* 38, 4051-4065.
    Dimitriadis, T., Gneiting, T. and Jordan, A. I. (2021). Stable reliability
    diagrams for probabilistic classifiers. *PNAS* 118(8), e2016191118.

    Examples
    --------
    >>> from bayescal.classification import isotonic_calibration_index
    >>> c = isotonic_calibration_index([0, 1, 0, 1], [0.2, 0.4, 0.6, 0.8])
    >>> [round(float(v), 4) for v in c]
    [0.15, 0.15, 0.2, 0.2]
    """
    # On a mesh: the whole data on every device, in ONE collective (as the CORP terms)
    y_true, y_prob = gather_all((y_true, y_prob), "The isotonic calibration index (PAV)")
    y, p = binary_inputs(y_true, y_prob)
    return _ici_kernel(y, p, _v.mask_weights(None, p.shape, p.dtype))
