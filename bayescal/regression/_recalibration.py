"""Recalibration of regression predictives: Kuleshov's isotonic map and sigma-scaling."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri
from jax.typing import ArrayLike

from bayescal._src import families as _fam
from bayescal._src import newton
from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.host import (
    _BAD,
    _device,
    _floats,
    _interp,
    _knots,
    _limits,
    _normal,
    _observation_weights,
    _scalar,
    _vector,
)
from bayescal._src.host import first as host_first
from bayescal._src.interp import interp
from bayescal._src.options import coverage_and_alpha
from bayescal._src.pytree import pytree_dataclass
from bayescal._src.reduce import check_weights
from bayescal._src.sorting import column_quantiles, sort_last_axis
from bayescal._src.ties import argsort_last_axis
from bayescal.regression._host import _normal_predictive

__all__ = [
    "IsotonicLevelCalibrator",
    "SigmaScalingCalibrator",
    "fit_isotonic_recalibrator",
    "fit_sigma_scaling",
    "recalibrated_quantiles",
    "recalibrated_interval",
]


# --------------------------------------------------------------------------- host twins
def _twin_fit_isotonic_recalibrator(pit: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.regression.fit_isotonic_recalibrator` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted ECDF)

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


def _twin_map_levels(calibrator: Any, levels: Any, inverse: bool = False) -> Any:
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


def _twin_map_levels_inverse(calibrator: Any, levels: Any) -> Any:
    """``IsotonicLevelCalibrator.inverse`` on the host."""
    return _twin_map_levels(calibrator, levels, inverse=True)


def _twin_fit_sigma_scaling(
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


def _twin_sigma_apply(calibrator: Any, scale: Any) -> jax.Array | None:
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


# eq=True: fields compare like a tuple (a scalar array compares to a bool).
@pytree_dataclass(data=("raw", "calibrated"))
class IsotonicLevelCalibrator:
    r"""Kuleshov's recalibration map of CDF levels, fitted on calibration PIT values.

    ``R(p)`` is the piecewise-linear interpolation of the points
    :math:`(u_{(k)}, \hat G(u_{(k)}))`, with :math:`(0, 0)` and :math:`(1, 1)` added,
    where :math:`\hat G` is the ECDF of the calibration PIT values. It is
    nondecreasing and maps [0, 1] onto [0, 1]. Calling it maps raw levels (or PIT
    values of new data) to calibrated levels; :meth:`inverse` maps target levels back
    to the raw levels at which the original predictive must be evaluated.

    A frozen dataclass registered as a pytree: it passes through ``jax.jit`` and can be
    batched with ``jax.vmap``.

    Attributes
    ----------
    raw : Array, shape [n + 2]
        Knots on the raw-level axis: 0, the sorted calibration PIT values, 1.
    calibrated : Array, shape [n + 2]
        ECDF values at the knots.
    """

    raw: jax.Array
    calibrated: jax.Array

    @host_first(_twin_map_levels)
    def __call__(self, levels: ArrayLike) -> jax.Array:
        """Calibrated levels ``R(levels)``; ``levels`` in [0, 1], any shape."""
        return _map_levels(*_bucketed_knots(self.raw, self.calibrated), levels)

    @host_first(_twin_map_levels_inverse)
    def inverse(self, levels: ArrayLike) -> jax.Array:
        """Raw levels ``R^{-1}(levels)`` (generalized inverse).

        Parameters
        ----------
        levels : array_like
            Target (calibrated) levels in [0, 1].

        Returns
        -------
        Array
            The raw levels, same shape.
        """
        return _map_levels(*_bucketed_knots(self.calibrated, self.raw), levels)


def _bucketed_knots(xp: jax.Array, fp: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Knots in host memory padded to their bucket by repeating the last knot, (1, 1):
    the map is unchanged and one program serves calibrators of many sizes."""
    if not (_v.paddable(xp) and _v.paddable(fp) and xp.ndim == 1):
        return xp, fp
    size = bucket_size(xp.shape[0])
    return pad_axis(xp, size), pad_axis(fp, size)


@_v.validated(fuse=True, bucket={"levels": -1}, per_observation=-1)
def _map_levels(xp: jax.Array, fp: jax.Array, levels: ArrayLike) -> jax.Array:
    """Interpolate ``levels`` through the knots ``(xp, fp)``; 0 and 1 stay fixed."""
    p = _as_levels(levels, xp.dtype)
    out = interp(p, xp, fp)
    return jnp.where(p <= 0, 0.0, jnp.where(p >= 1, 1.0, out)).astype(p.dtype)


def _as_levels(levels, dtype):
    p = _v.as_float_array(levels, "levels").astype(dtype)
    _v.check_in_unit_interval(p, "levels", "levels")
    return p


@jax.jit
def _fit_isotonic_kernel(u, mask=None, weights=None):
    """The knots; ``mask``: the real values of a padded bucket (and, with
    ``weights``, of positive weight: a value of weight 0 is treated as padding).

    The padding is set above 1 so that it sorts last and counts in no real value's
    ECDF; its knots become (1, 1) after the real ones, so the first ``n + 2`` knots
    are exactly those of the unpadded fit (and the extra ones change no value).
    """
    dtype = u.dtype
    if mask is not None:
        u = jnp.where(mask, u, jnp.asarray(2, dtype))
    n = u.shape[-1] if mask is None else jnp.sum(mask, dtype=jnp.int32)
    if weights is None:
        s = sort_last_axis(u)
        ecdf = jnp.searchsorted(s, s, side="right").astype(dtype) / jnp.asarray(n, dtype)
    else:  # the weighted ECDF: the weight at or below each value over the total
        order = argsort_last_axis(u)
        s = jnp.take(u, order)
        cum = jnp.cumsum(jnp.take(weights.astype(dtype), order))
        at = jnp.searchsorted(s, s, side="right") - 1  # the last of each run of ties
        ecdf = jnp.take(cum, at) / cum[-1]
    zero = jnp.zeros((1,), dtype)
    one = jnp.ones((1,), dtype)
    raw = jnp.concatenate([zero, s, one])
    calibrated = jnp.concatenate([zero, ecdf, one])
    if mask is not None:
        tail = jnp.arange(raw.shape[0]) > n  # the padding's knots, after the real ones
        raw = jnp.where(tail, one, raw)
        calibrated = jnp.where(tail, one, calibrated)
    return IsotonicLevelCalibrator(raw, calibrated)


@host_first(_twin_fit_isotonic_recalibrator)
@_v.validated(fuse=True, bucket={"pit": -1, "weights": -1}, per_observation=(-1, 2))
def fit_isotonic_recalibrator(
    pit: ArrayLike, *, weights: ArrayLike | None = None
) -> IsotonicLevelCalibrator:
    r"""Fit Kuleshov et al.'s isotonic recalibrator on calibration-split PIT values.

    Kuleshov et al. (2018) fit an isotonic regression of the empirical frequencies
    :math:`\hat P(u_t) = \frac1T \#\{s: u_s \le u_t\}` on the levels :math:`u_t`. Those
    pairs are already monotone, so the isotonic fit equals the ECDF itself; bayescal
    stores it exactly and interpolates linearly between knots (ties give equal
    knots, so no special case is needed). The map equals the ECDF at every
    calibration value; between them, the jump of a run of ``m`` tied values is
    spread over the gap below it (as scikit-learn's ``IsotonicRegression`` does), so
    it lies within ``m / T`` of the ECDF.

    At least two distinct PIT values strictly between 0 and 1 are needed: on values
    at a single point (``np.ones(50)``: every observation above its predictive) the
    map would be the interpolation's artifact (the identity), not the data's ECDF
    (0 below 1), so a ``ValueError`` names ``pit`` (NaN under ``jit``).

    Parameters
    ----------
    pit : array_like, shape [T]
        PIT values of the calibration split (never the test split).
    weights : array_like, shape [T], optional
        Observation weights: the map is the weighted ECDF
        :math:`\sum_{s: u_s \le u} w_s / \sum_s w_s`, so an integer weight equals
        repeating the value and a weight of 0 removes it (no knot). Finite,
        ``>= 0``, not all 0.

    Returns
    -------
    IsotonicLevelCalibrator

    References
    ----------
    Kuleshov, Fenner & Ermon (2018), "Accurate Uncertainties for Deep Learning Using
    Calibrated Regression", ICML, Algorithm 1.

    Examples
    --------
    >>> from bayescal.regression import fit_isotonic_recalibrator
    >>> r = fit_isotonic_recalibrator([0.1, 0.2, 0.3, 0.9])
    >>> [round(v, 3) for v in r([0.2, 0.5]).tolist()]
    [0.5, 0.833]
    >>> [round(v, 3) for v in r.inverse([0.5]).tolist()]
    [0.2]
    """
    u = _v.check_pit(pit)
    mask = _v.observation_mask(u.shape[-1])
    if weights is None:
        _v.record("two_inside", "pit", u, what="a recalibration map")
        return _fit_isotonic_kernel(u, mask)
    w = check_weights(weights, u.shape[-1], u.dtype)
    w = _v.mask_weights(w, u.shape, u.dtype)  # 0 in a bucket's padding
    keep = w > 0
    # the values that count: those of weight 0 replaced by one that counts (checks)
    _v.record("two_inside", "pit", jnp.where(keep, u, u[jnp.argmax(keep)]), what="a recalibration map")
    return _fit_isotonic_kernel(u, keep, w)


# eq=True: fields compare like a tuple (a scalar array compares to a bool).
@pytree_dataclass(data=("factor",), meta=("family", "df"))
class SigmaScalingCalibrator:
    r"""A fitted scale multiplier: calling it on ``scale`` returns ``factor * scale``.

    Attributes
    ----------
    factor : Array, scalar
        The fitted multiplier :math:`s`.
    family : str
        ``"normal"``, ``"student_t"`` or ``"laplace"``.
    df : float or None
        Degrees of freedom of the Student-t family.
    """

    factor: jax.Array
    family: str = "normal"
    df: float | None = None

    @host_first(_twin_sigma_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, scale: ArrayLike) -> jax.Array:
        """The rescaled scales ``factor * scale``; ``scale`` must be positive, as in a fit."""
        s = _v.as_float_array(scale, "scale")
        _v.check_positive(s, "scale")
        return newton.apply_bucketed(_sigma_apply, self.factor, s)

    @_v.validated  # checks fold into NaN under jit/vmap
    def pit(self, y_true: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> jax.Array:
        """PIT values of the rescaled predictive (same family, scale multiplied).

        Parameters
        ----------
        y_true : array_like, shape [N]
            Observed values.
        loc, scale : array_like, shape [N]
            The uncalibrated predictive's location and scale.

        Returns
        -------
        Array, shape [N]
            PIT values under the rescaled predictive.
        """
        y, m, s = _prep_lss(y_true, loc, scale)
        return _fam.cdf((y - m) / (s * self.factor), self.family, self.df).astype(y.dtype)


def _prep_lss(y_true, loc, scale):
    y = _v.as_float_array(y_true, "y_true")
    m = _v.as_float_array(loc, "loc")
    s = _v.as_float_array(scale, "scale")
    _v.check_nonempty(y, "y_true")
    _v.check_broadcastable("y_true", tuple(y.shape), loc=m, scale=s)
    dtype = _v.result_dtype(y, m, s)
    y, m, s = y.astype(dtype), m.astype(dtype), s.astype(dtype)
    _v.check_finite(y, "y_true")
    _v.check_finite(m, "loc")
    _v.check_positive(s, "scale")
    return y, m, s


@newton.fast_jit
def _sigma_apply(factor, s):
    return (s * factor).astype(s.dtype)


def _sigma_objective(z, weights, family, df):
    r"""The family's NLL in theta = log s, with its derivatives written out.

    Per observation, with :math:`t = z e^{-\theta}` and :math:`\ell(t) = -\log f(t)`:
    loss :math:`\theta + \ell(t)`, derivative :math:`1 - t\ell'(t)`, second derivative
    :math:`t\ell'(t) + t^2\ell''(t)`: :math:`2t^2` (Normal), :math:`|t|` (Laplace,
    where :math:`\ell'' = 0` almost everywhere) and :math:`2\nu(\nu + 1)t^2 /
    (\nu + t^2)^2` (Student-t). Equal to forward-mode autodiff of the loss, with
    fewer operations to compile; the loss equals ``theta - log_density(t)`` of
    :mod:`bayescal._src.families`.
    """

    # -log f(0), the normalising constant, from the host's math library (df is a
    # static float): no log-gamma function in the compiled program.
    if family == "normal":
        const = 0.5 * math.log(2 * math.pi)
    elif family == "laplace":
        const = math.log(2.0)
    else:
        const = (
            math.lgamma(df / 2) - math.lgamma((df + 1) / 2) + 0.5 * math.log(df * math.pi)
        )

    def objective(x):
        theta = x[0]
        t = z * jnp.exp(-theta)
        t2 = t * t
        if family == "normal":
            loss = theta + const + 0.5 * t2
            tl, h = t2, 2 * t2
        elif family == "laplace":
            tl = jnp.abs(t)
            loss = theta + const + tl
            h = tl
        else:
            nu = jnp.asarray(df, z.dtype)
            loss = theta + const + (nu + 1) / 2 * jnp.log1p(t2 / nu)
            tl = (nu + 1) * t2 / (nu + t2)
            h = 2 * nu * (nu + 1) * t2 / ((nu + t2) * (nu + t2))
        loss, tl, h = jax.lax.optimization_barrier((loss * weights, tl, h * weights))
        value, g, hh, mag = (
            newton.accurate_sum(a) for a in (loss, (1 - tl) * weights, h, jnp.abs(loss))
        )
        return newton.Derivatives(value, g[None], hh[None, None], mag)

    return objective


@functools.partial(jax.jit, static_argnames=("family", "df"))
def _fit_log_factor(z, weights, family, df):
    """Minimise the family's NLL over theta = log s with the shared Newton solver.

    In theta the NLL of all three families is strictly convex (its second derivative
    is a sum of positive terms), so damped Newton from the Normal MLE converges.
    ``weights`` are 0 for padding.
    """
    n = jnp.sum(weights)
    theta0 = 0.5 * jnp.log(newton.accurate_sum(weights * z * z) / n)
    res = newton.minimize(_sigma_objective(z, weights, family, df), theta0[None])
    return res.x[0]


@host_first(_twin_fit_sigma_scaling)
def fit_sigma_scaling(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike,
    *,
    family: str = "normal",
    df: float | None = None,
    weights: ArrayLike | None = None,
) -> SigmaScalingCalibrator:
    r"""Fit one multiplier of the predictive scale on a calibration split.

    For Normal predictives the maximum-likelihood multiplier has the closed form

    .. math:: s = \sqrt{\tfrac1N \textstyle\sum_i ((y_i - \mu_i) / \sigma_i)^2}

    (Laves et al., 2020). Note that it is the *squared* standardized residual: the
    published LaplaceRedux implementation averages ``|r|``, which is the Laplace MLE,
    not the Gaussian one. For ``family="student_t"`` (with ``df``) and
    ``family="laplace"`` the multiplier minimises the negative log-likelihood by
    Newton's method on :math:`\log s` (the shared damped-Newton solver of
    ``bayescal._src.newton``). Jittable and vmappable. All residuals equal to 0
    (``y_true == loc``) raise a ``ValueError`` eagerly; under ``jax.jit`` they give a
    NaN factor.

    Parameters
    ----------
    y_true, loc, scale : array_like, shape [N]
        Calibration-split observations, predictive locations and scales.
    family : {"normal", "student_t", "laplace"}
    df : float, optional
        Degrees of freedom (> 0), required for ``"student_t"``.
    weights : array_like, shape [N], optional
        Observation weights: each multiplies its observation's term of the NLL
        (Normal: :math:`s^2 = \sum_i w_i z_i^2 / \sum_i w_i`), so an integer weight
        equals repeating the row and a weight of 0 removes it. Finite, ``>= 0``,
        not all 0.

    Returns
    -------
    SigmaScalingCalibrator

    References
    ----------
    Laves, Ihler, Fast, Kahrs & Ortmaier (2020), "Well-calibrated regression
    uncertainty in medical imaging with deep learning", MIDL.

    Examples
    --------
    >>> from bayescal.regression import fit_sigma_scaling
    >>> s = fit_sigma_scaling([2.0, -2.0], [0.0, 0.0], [1.0, 1.0])
    >>> float(s.factor), s([1.0]).tolist()
    (2.0, [2.0])
    """
    _v.check_choice(family, "family", _fam.FAMILIES)
    if family == "student_t":
        if isinstance(df, bool) or not isinstance(df, int | float) or not df > 0:
            raise ValueError(
                f"df must be a positive number for family='student_t'; got {df!r}."
            )
        df = float(df)
    elif df is not None:
        raise ValueError(f"df is only used with family='student_t'; got family={family!r}.")
    return newton.bucketed_fit(
        _fit_sigma_scaling, (y_true, loc, scale, weights), dict(family=family, df=df)
    )


def _fit_sigma_scaling(y_true, loc, scale, weights, n, *, family, df):
    y, m, s = _prep_lss(y_true, loc, scale)
    resid = jnp.broadcast_to(y - m, y.shape)
    z = resid / s
    # n real rows (the rest is padding from newton.bucketed_fit) or all of them, times
    # the user's weights (one per row)
    size = z.shape[0] if z.ndim else 1
    rows = newton.observation_weights(weights, n, size, z.dtype)
    if rows is None:
        weights = jnp.ones(z.size, z.dtype)
    else:
        rows = rows.reshape((-1,) + (1,) * (z.ndim - 1)) if z.ndim else rows.reshape(())
        weights = jnp.ravel(jnp.broadcast_to(rows, z.shape))
    _v.record(
        "less_equal",
        "y_true",
        jnp.all((jnp.ravel(resid) == 0) | (weights == 0)),
        False,
        what=(
            "equals loc for every observation: all residuals y_true - loc are 0, so "
            "the fitted scale factor would be 0 (a predictive of zero width). "
            "Sigma-scaling needs at least one nonzero residual; check that loc is not "
            "y_true itself and that the calibration split is held out"
        ),
    )
    z = jnp.ravel(z)
    if family == "normal":
        factor = jnp.sqrt(newton.accurate_sum(weights * z * z) / jnp.sum(weights))
    else:
        factor = jnp.exp(_fit_log_factor(z, weights, family, df))
    return SigmaScalingCalibrator(factor.astype(y.dtype), family, df)


def _structure(recalibrator, loc, scale, draws) -> None:
    """Which predictive was passed, and whether the recalibrator can use it."""
    if draws is not None and (loc is not None or scale is not None):
        raise ValueError("pass either draws or loc and scale, not both.")
    if draws is None and (loc is None or scale is None):
        raise ValueError("pass loc and scale (Normal predictives) or draws ([S, N]).")
    if isinstance(recalibrator, SigmaScalingCalibrator):
        if draws is not None:
            raise ValueError(
                "a SigmaScalingCalibrator recalibrator rescales loc/scale predictives; pass loc and "
                "scale, or use fit_isotonic_recalibrator for draws."
            )
    elif not isinstance(recalibrator, IsotonicLevelCalibrator):
        raise TypeError(
            "recalibrator must be an IsotonicLevelCalibrator or SigmaScalingCalibrator (from "
            f"fit_isotonic_recalibrator / fit_sigma_scaling); got {type(recalibrator).__name__}."
        )


def _prep_predictive(loc, scale, draws):
    if draws is not None:
        d = _v.as_float_array(draws, "draws")
        _v.check_ndim(d, "draws", 2)
        _v.check_nonempty(d, "draws")
        _v.check_finite(d, "draws")
        return None, None, d
    m = _v.as_float_array(loc, "loc")
    s = _v.as_float_array(scale, "scale")
    _v.check_finite(m, "loc")
    _v.check_positive(s, "scale")
    _v.check_broadcastable(
        "loc", tuple(jnp.broadcast_shapes(m.shape, s.shape)), loc=m, scale=s
    )
    return m, s, None


def _host(x):
    """A list or number as a NumPy array (hashable options aside, the fused call takes
    arrays); anything else unchanged (the checks report what it is)."""
    if isinstance(x, list | tuple | int | float) and not isinstance(x, bool):
        try:
            a = np.asarray(x)
        except Exception:
            return x
        return a if a.dtype.kind in "biuf" else x
    return x


def _recalibrated(
    recalibrator, levels, loc, scale, draws, *, interval: bool
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """The recalibrated quantiles ``[L, N]`` (or the interval's two rows).

    Two steps. The levels alone (``[L]``, a few values) give the quantiles of the
    standard family, or for draws the raw levels: computed on the host in NumPy
    when the levels and the recalibrator hold values (no program to compile: the
    interpolation, ``ndtri`` and the search through the knots were most of a first
    call's compilation, 0.5-0.7 s on a CPU), else traced. The predictive's ``N``
    columns then take ONE program per bucket of ``N``, with those ``L`` values as
    an argument.
    """
    _structure(recalibrator, loc, scale, draws)
    sigma = isinstance(recalibrator, SigmaScalingCalibrator)
    lv = _v.as_float_array(_host(levels), "levels")
    if lv.ndim == 0:
        lv = (
            lv.reshape(1)
            if not _v.paddable(lv)
            else jax.device_put(np.asarray(lv)[None])
        )
    _v.check_levels(lv, "levels", strict=False)
    data = (recalibrator.factor,) if sigma else (recalibrator.raw, recalibrator.calibrated)
    if sigma:
        family, df = recalibrator.family, recalibrator.df
        level_dtype = _v.result_dtype(lv, recalibrator.factor)
    else:
        level_dtype = recalibrator.raw.dtype
    if all(_v.is_concrete(a) for a in (lv, *data)):
        p = np.asarray(lv, np.float64)
        if sigma:
            z = _host_family_quantile(p, family, df)
        else:
            raw = _host_map_levels(*(np.asarray(a, np.float64) for a in data[::-1]), p)
            z = raw if draws is not None else _host_ndtri(raw)
    elif sigma:
        z = _fam.quantile(lv.astype(level_dtype), family, df)
    else:
        raw = recalibrator.inverse(lv)
        z = raw if draws is not None else ndtri(raw)
    return _recalibrated_kernel(
        z,
        _host(loc),
        _host(scale),
        _host(draws),
        recalibrator.factor if sigma else None,
        level_dtype=np.dtype(level_dtype).name,
        interval=interval,
    )


def _host_map_levels(xp: np.ndarray, fp: np.ndarray, p: np.ndarray) -> np.ndarray:
    """:func:`_map_levels` (:func:`bayescal._src.interp.interp` with 0 and 1 fixed) in
    NumPy: the same rule, right-continuous at equal knots, clamped outside."""
    n = xp.shape[-1]
    i = np.clip(np.searchsorted(xp, p, side="right"), 1, n - 1)
    x0, x1, f0, f1 = xp[i - 1], xp[i], fp[i - 1], fp[i]
    dx = x1 - x0
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(dx > 0, (p - x0) / np.where(dx > 0, dx, 1), 1)
    out = f0 + np.clip(t, 0, 1) * (f1 - f0)
    out = np.where(p < xp[0], fp[0], out)
    out = np.where(p >= xp[-1], fp[-1], out)
    return np.where(p <= 0, 0.0, np.where(p >= 1, 1.0, out))


def _host_ndtri(p: np.ndarray) -> np.ndarray:
    """The standard Normal quantile in float64 (``statistics.NormalDist``: Wichura's
    AS241, ~1e-16 relative); -inf at 0 and +inf at 1, like ``ndtri``."""
    inv = statistics.NormalDist().inv_cdf
    return np.array(
        [-np.inf if v <= 0 else np.inf if v >= 1 else inv(v) for v in p.ravel().tolist()],
        np.float64,
    ).reshape(p.shape)


def _host_family_quantile(p: np.ndarray, family: str, df: float | None) -> np.ndarray:
    """:func:`bayescal._src.families.quantile` in float64 on the host."""
    if family == "normal":
        return _host_ndtri(p)
    if family == "laplace":
        c = p - 0.5
        with np.errstate(divide="ignore"):
            return -np.sign(c) * np.log1p(-2 * np.abs(c))
    return _fam._host_t_quantile(p, np.full(p.shape, df, np.float64))


@_v.validated(fuse=True, bucket={"loc": -1, "scale": -1, "draws": -1}, per_observation=-1)
def _recalibrated_kernel(z, loc, scale, draws, factor, *, level_dtype, interval):
    """``loc + scale * z`` (times ``factor``), or the draws' empirical quantiles at the
    raw levels ``z``; ``level_dtype``: the dtype the levels computed in (promoted with
    the predictive's)."""
    m, s, d = _prep_predictive(loc, scale, draws)
    if d is not None:
        q = column_quantiles(d, z.astype(d.dtype))
    else:
        dtype = jnp.result_type(level_dtype, m.dtype, s.dtype)
        if factor is not None:
            s = factor * s
        # the L quantiles first, kept apart from the [L, N] products
        z = jax.lax.optimization_barrier(z.astype(dtype))
        q = m[None, ...] + s[None, ...] * z[:, None]
    return (q[0], q[1]) if interval else q


def recalibrated_quantiles(
    recalibrator: IsotonicLevelCalibrator | SigmaScalingCalibrator,
    levels: ArrayLike,
    *,
    loc: ArrayLike | None = None,
    scale: ArrayLike | None = None,
    draws: ArrayLike | None = None,
    quantile_fn: Callable[[jax.Array], ArrayLike] | None = None,
) -> jax.Array:
    r"""Quantiles of the recalibrated predictive at target ``levels``.

    With an :class:`IsotonicLevelCalibrator` ``R``, the recalibrated CDF is
    :math:`R \circ F`, so its :math:`\tau`-quantile is :math:`F^{-1}(R^{-1}(\tau))`:
    the original predictive (Normal ``loc``/``scale``, or the empirical quantile of
    ``draws``, or any predictive through ``quantile_fn``) evaluated at the raw level
    ``R.inverse(tau)``. With a :class:`SigmaScalingCalibrator` the quantile of the rescaled
    family is returned (``loc`` and ``scale`` required).

    Empirical quantiles of draws cannot go beyond the smallest and largest draw, so a
    strongly overconfident model recalibrated through its draws keeps too-narrow
    outer quantiles; pass ``quantile_fn`` (the exact quantile function of the
    predictive, e.g. of a posterior mixture) in that case.

    Parameters
    ----------
    recalibrator : IsotonicLevelCalibrator or SigmaScalingCalibrator
    levels : array_like, shape [L]
        Target levels in [0, 1] (0 and 1 give infinite Normal quantiles).
    loc, scale : array_like, shape [N], optional
    draws : array_like, shape [S, N], optional
    quantile_fn : callable, optional
        ``quantile_fn(raw_levels [L]) -> [L, N]``: the original predictive's quantiles.

    Returns
    -------
    Array, shape [L, N]

    Examples
    --------
    >>> from bayescal.regression import fit_isotonic_recalibrator, recalibrated_quantiles
    >>> r = fit_isotonic_recalibrator([0.25, 0.75])  # half the data below the raw 0.25 level
    >>> q = recalibrated_quantiles(r, [0.5], loc=[0.0], scale=[1.0])  # = Phi^-1(0.25)
    >>> round(float(q[0, 0]), 3)
    -0.674
    """
    if quantile_fn is not None:
        lv = _v.as_float_array(levels, "levels")
        if lv.ndim == 0:
            lv = lv[None]
        _v.check_levels(lv, "levels", strict=False)
        if not callable(quantile_fn):
            raise TypeError(
                f"quantile_fn must be callable; got {type(quantile_fn).__name__}."
            )
        if loc is not None or scale is not None or draws is not None:
            raise ValueError("pass quantile_fn alone, without loc, scale or draws.")
        if not isinstance(recalibrator, IsotonicLevelCalibrator):
            raise TypeError("quantile_fn works with an IsotonicLevelCalibrator only.")
        q = _v.as_float_array(quantile_fn(recalibrator.inverse(lv)), "quantile_fn(levels)")
        if q.ndim != 2 or q.shape[0] != lv.shape[0]:
            raise ValueError(
                f"quantile_fn(levels) returned shape {tuple(q.shape)}; expected [L, N] with "
                f"L = {lv.shape[0]} levels."
            )
        return q
    return _recalibrated(recalibrator, levels, loc, scale, draws, interval=False)


def recalibrated_interval(
    recalibrator: IsotonicLevelCalibrator | SigmaScalingCalibrator,
    coverage: float | None = None,
    *,
    alpha: float | None = None,
    loc: ArrayLike | None = None,
    scale: ArrayLike | None = None,
    draws: ArrayLike | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Central prediction interval of the recalibrated predictive.

    The bounds are the recalibrated quantiles at ``(1 - coverage) / 2`` and
    ``(1 + coverage) / 2``.

    Parameters
    ----------
    recalibrator : IsotonicLevelCalibrator or SigmaScalingCalibrator
        A fitted recalibrator.
    coverage : float in (0, 1), optional
        Nominal coverage of the interval, e.g. 0.9.
    alpha : float in (0, 1), optional
        Or its miscoverage, ``1 - coverage`` (0.1 for a 90% interval), as
        :func:`fit_conformal` takes it. Give exactly one of ``coverage`` and ``alpha``.
    loc, scale : array_like, shape [N], optional
        Normal predictives (exactly one of ``loc``/``scale`` or ``draws``).
    draws : array_like, shape [S, N], optional
        Predictive draws.

    Returns
    -------
    (lower, upper) : two arrays of shape [N]

    Examples
    --------
    >>> from bayescal.regression import fit_sigma_scaling, recalibrated_interval
    >>> s = fit_sigma_scaling([2.0, -2.0], [0.0, 0.0], [1.0, 1.0])
    >>> lo, hi = recalibrated_interval(s, 0.9, loc=[0.0], scale=[1.0])
    >>> round(float(hi[0]), 3)
    3.29
    >>> lo, hi = recalibrated_interval(s, alpha=0.1, loc=[0.0], scale=[1.0])  # the same
    >>> round(float(hi[0]), 3)
    3.29
    """
    coverage, _ = coverage_and_alpha(coverage, alpha)
    half = coverage / 2
    levels = np.asarray([0.5 - half, 0.5 + half])
    return _recalibrated(recalibrator, levels, loc, scale, draws, interval=True)
