"""Split conformal predictive systems: a whole predictive CDF per test case.

Vovk, Shen, Manokhin & Xie (2017-2020): from the calibration residuals
``a_j = y_j - loc_j`` (or ``(y_j - loc_j) / scale_j``, normalized), the conformal
predictive distribution (CPD) of a test case with prediction ``loc`` (and ``scale``)
puts its steps at ``C_j = loc + scale * a_j`` and is

    Q(y, tau) = (#{j: C_j < y} + (#{j: C_j = y} + 1) tau) / (n + 1),

with ``tau`` uniform on [0, 1] (smoothed) or 1. Its smoothed value at the observed
``y`` is uniform on exchangeable data: a PIT value, so every regression metric of
bayescal applies to it. Mondrian systems (``groups``) use each group's residuals
alone. The same quantities as crepes' ``ConformalPredictiveSystem`` (Bostrom), with
the ranks of the percentiles taken exactly (crepes rounds ``(1 - 0.9) (n + 1)`` in
floats).

The arithmetic of every method is written once against an array namespace (``np``
for the host twins, ``jnp`` for the kernels).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis, paddable, random_prefix_stable
from bayescal._src.host import _device, _floats, _limits, _vector
from bayescal._src.host import first as host_first
from bayescal._src.options import coverage_and_alpha
from bayescal._src.pytree import pytree_dataclass
from bayescal._src.reduce import check_reduction, reduce_scores
from bayescal._src.resampling import check_key
from bayescal._src.validation import host_resident
from bayescal.regression._conformal import (
    _GROUPS,
    _ceil_mul_div,
    _check_call,
    _groups_and_count,
    _num_groups_needs_groups,
    _residual_inputs,
    _upper_fraction,
)

__all__ = [
    "ConformalPredictiveSystem",
    "ConformalPredictiveDistribution",
    "fit_conformal_predictive",
]


# --------------------------------------------------------------------------- arithmetic
def _sorted_by_group(residuals: Any, groups: Any, num_groups: int, xp: Any) -> tuple:
    """Residuals sorted by group, then value, and each group's count ([G], int32).

    Entries of group ``num_groups`` (a bucket's padding) sort last and are not counted.
    """
    if xp is np:
        order = np.lexsort((residuals, groups))
        counts = np.bincount(groups, minlength=num_groups + 1)[:num_groups]
    else:
        order = jnp.lexsort((residuals, groups))
        counts = jnp.zeros(num_groups + 1, jnp.int32).at[groups].add(1)[:num_groups]
    return xp.take(residuals, order, axis=-1), counts.astype(np.int32)


def _search(values, start, count, loc, scale, y, strict, xp):
    """Per test case, ``#{j < count: C_j < y}`` (``<=`` without ``strict``), ``C_j =
    loc + scale * values[start + j]``: a binary search in its group's sorted residuals.

    Compared as ``scale * a < y - loc``: two correctly rounded operations, the same in
    NumPy and XLA (which may fuse ``loc + scale * a`` into one multiply-add and round
    once), so the host twin counts what the kernel counts, ties included.
    """
    size = values.shape[-1]
    gap = y - loc

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        a = xp.take(values, xp.minimum(mid, size - 1), axis=-1)
        c = a if scale is None else scale * a
        go = (mid < hi) & ((c < gap) if strict else (c <= gap))
        return xp.where(go, mid + 1, lo), xp.where(go, hi, mid)

    bounds = (start, start + count)
    steps = max(size, 1).bit_length()
    if xp is np:
        for i in range(steps):
            bounds = halve(i, bounds)
    else:  # a loop in the program, not its steps unrolled (a smaller program to compile)
        bounds = jax.lax.fori_loop(0, steps, halve, bounds)
    return bounds[0] - start


def _starts(counts, xp):
    return xp.cumsum(counts) - counts


def _pit(values, counts, g, loc, scale, y, tau, xp):
    """``Q(y, tau)`` of each test case (``tau`` None: 1, the unsmoothed value)."""
    start, count = xp.take(_starts(counts, xp), g), xp.take(counts, g)
    dtype = xp.result_type(y, loc)
    at_most = _search(values, start, count, loc, scale, y, False, xp).astype(dtype)
    total = count.astype(dtype) + 1
    if tau is None:
        return (at_most + 1) / total
    below = _search(values, start, count, loc, scale, y, True, xp).astype(dtype)
    return (below + (at_most - below + 1) * tau) / total


def _order_value(values, start, count, rank, loc, scale, xp):
    """The ``rank``-th smallest CPD value (1-based): -inf below 1, +inf above count."""
    size = values.shape[-1]
    a = xp.take(values, xp.clip(start + rank - 1, 0, size - 1), axis=-1)
    c = loc + a if scale is None else loc + scale * a
    inf = xp.asarray(np.inf, c.dtype)
    return xp.where(rank < 1, -inf, xp.where(rank > count, inf, c))


def _quantile_rows(values, counts, g, loc, scale, levels, xp):
    """``[L, N]``: at each level ``p`` the ``ceil(p (n + 1))``-th smallest CPD value."""
    start, count = xp.take(_starts(counts, xp), g), xp.take(counts, g)
    size = values.shape[-1]
    rows = []
    for p in levels:
        rank = xp.take(_floor_and_ceil(p, counts, size, xp)[1], g)
        rows.append(_order_value(values, start, count, rank, loc, scale, xp))
    return xp.stack(rows)


def _interval_ends(values, counts, g, loc, scale, lower, upper, xp):
    """The ``floor(lower (n + 1))``-th and ``ceil(upper (n + 1))``-th smallest values."""
    start, count = xp.take(_starts(counts, xp), g), xp.take(counts, g)
    size = values.shape[-1]
    lo = xp.take(_floor_and_ceil(lower, counts, size, xp)[0], g)
    hi = xp.take(_floor_and_ceil(upper, counts, size, xp)[1], g)
    return (
        _order_value(values, start, count, lo, loc, scale, xp),
        _order_value(values, start, count, hi, loc, scale, xp),
    )


def _crps(values, counts, g, loc, scale, y, xp):
    """CRPS of each test case's empirical CPD (its ``n`` values ``C_j``, mass 1/n each,
    as crepes scores it): ``mean|C - y| - sum_ij |C_i - C_j| / (2 n^2)``, from prefix
    sums of the group's sorted residuals and a binary search."""
    starts = _starts(counts, xp)
    start, count = xp.take(starts, g), xp.take(counts, g)
    s = 1 if scale is None else scale
    t = (y - loc) / s
    k = _search(values, start, count, loc, scale, y, True, xp)  # C_j < y
    finite = xp.where(xp.isfinite(values), values, 0)
    prefix = xp.concatenate([xp.zeros(1, finite.dtype), xp.cumsum(finite)])
    below = xp.take(prefix, start + k) - xp.take(prefix, start)
    total = xp.take(prefix, start + count) - xp.take(prefix, start)
    n = count.astype(finite.dtype)
    kf = k.astype(finite.dtype)
    absolute = (kf * t - below) + (total - below) - (n - kf) * t
    # sum_ij |a_i - a_j| = 2 sum_j (2 r_j - n - 1) a_(j), r_j the rank within the group
    size = values.shape[-1]
    position = xp.arange(size)
    member = xp.searchsorted(xp.cumsum(counts), position, side="right")
    inside = member < counts.shape[0]
    member = xp.minimum(member, counts.shape[0] - 1)
    rank = (position - xp.take(starts, member) + 1).astype(finite.dtype)
    weight = 2 * rank - xp.take(counts, member).astype(finite.dtype) - 1
    terms = xp.where(inside, weight * finite, 0)
    if xp is np:
        pair = np.bincount(member, weights=terms, minlength=counts.shape[0])
    else:
        pair = jnp.zeros(counts.shape[0], terms.dtype).at[member].add(terms)
    pair = xp.take(pair.astype(finite.dtype), g)
    return (s * (absolute / n - pair / (n * n))).astype(xp.result_type(y, loc))


def _floor_and_ceil(p: Fraction, counts: Any, limit: int, xp: Any) -> tuple:
    """``floor(p (n + 1))`` and ``ceil(p (n + 1))`` of each group's count ``n``, exactly.

    ``p`` is replaced by the nearest fractions above ``p`` and ``1 - p`` with
    denominators of at most ``limit + 1`` (the most ``n + 1`` can be), which give the
    same ceilings (:func:`~bayescal.regression._conformal._upper_fraction`), so the
    products fit 64 bits: in int64 on the host, in two 32-bit words in the kernels.
    """
    up, down = _upper_fraction(p, limit + 1), _upper_fraction(1 - p, limit + 1)
    m = counts + 1
    if xp is np:
        m = m.astype(np.int64)
        hi = -(-m * up.numerator // up.denominator)
        lo = m - (-(-m * down.numerator // down.denominator))
        return lo, hi
    hi = _ceil_mul_div(m, up.numerator, up.denominator)
    lo = m - _ceil_mul_div(m, down.numerator, down.denominator)
    return lo, hi


def _level(value: Any, name: str) -> Fraction:
    """A level in [0, 1] as the decimal it prints as (0.05 is 1/20)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise TypeError(f"{name} must be a float in [0, 1]; got {type(value).__name__}.")
    if not 0 <= float(value) <= 1:
        raise ValueError(f"{name} must be in [0, 1]; got {value!r}.")
    return Fraction(repr(float(value)))


# --------------------------------------------------------------------------- host twins
def _safe(a: np.ndarray) -> bool:
    """Finite, and every value 0 or at least ``safe``: sums and products with such
    values are what XLA computes (no subnormal result, which XLA would flush)."""
    lim = _limits(a.dtype)
    m = np.abs(a)
    return bool(m.max() <= lim.big and ((m == 0) | (m >= lim.safe)).all())


def _host_inputs(dist: Any, y_true: Any = None) -> tuple | None:
    """The arrays of a distribution's method on the host, as its kernel sees them
    (float dtype, int group codes), or None: the kernel path (which also raises)."""
    a, counts = dist.residuals, dist.counts
    if not all(isinstance(x, jax.Array) and host_resident(x) for x in (a, counts)):
        return None
    mu = _floats(dist.loc)
    if mu is None or mu.ndim != 1 or mu.size == 0 or not _safe(mu):
        return None
    y = None
    if y_true is not None:
        y = _floats(y_true)
        if y is None or y.shape != mu.shape or not _safe(y):
            return None
    dtype = mu.dtype if y is None else np.result_type(y, mu)
    a = np.asarray(a).astype(dtype)
    finite = a[np.isfinite(a)]
    if finite.size != a.size or not _safe(a):
        return None
    s = None
    if dist.scale is not None:
        s = _floats(dist.scale)
        if s is None or s.shape != mu.shape or not (s > 0).all() or not _safe(s):
            return None
        small = np.abs(a[a != 0])
        if small.size and small.min() * s.min() < _limits(dtype).safe:
            return None
        s = s.astype(dtype)
    if dist.groups is None:
        g = np.zeros(mu.shape, np.int64)
    else:
        g = dist.groups if isinstance(dist.groups, np.ndarray) else None
        if g is None or g.shape != mu.shape or g.dtype.kind not in "iu":
            return None
        if g.min() < 0 or g.max() >= dist.num_groups:
            return None
    return a, np.asarray(counts).astype(np.int64), mu.astype(dtype), s, g, y


def _twin_pit(dist: Any, y_true: Any, *, key: Any = None) -> Any:
    """``ConformalPredictiveDistribution.pit`` on the host (unsmoothed)."""
    found = None if key is not None else _host_inputs(dist, y_true)
    if found is None:
        return None  # a key draws in JAX: the kernel path
    a, counts, mu, s, g, y = found
    return _device(_pit(a, counts, g, mu, s, y, None, np))


def _twin_quantile(dist: Any, levels: Any) -> Any:
    """``ConformalPredictiveDistribution.quantile`` on the host."""
    found = _host_inputs(dist)
    if found is None:
        return None
    a, counts, mu, s, g, _ = found
    out = _quantile_rows(a, counts, g, mu, s, _levels_arg(levels), np).astype(mu.dtype)
    return _device(out[0] if np.ndim(levels) == 0 else out)


def _twin_interval(dist: Any, coverage: Any = None, *, alpha: Any = None) -> Any:
    """``ConformalPredictiveDistribution.interval`` on the host."""
    found = _host_inputs(dist)
    if found is None:
        return None
    a, counts, mu, s, g, _ = found
    lo, hi = _interval_ends(a, counts, g, mu, s, *_central(coverage, alpha), np)
    return _device(lo.astype(mu.dtype)), _device(hi.astype(mu.dtype))


def _twin_crps(dist: Any, y_true: Any, *, reduction: str = "mean") -> Any:
    """``ConformalPredictiveDistribution.crps`` on the host."""
    found = _host_inputs(dist, y_true) if reduction in ("mean", "sum", "none") else None
    if found is None:
        return None
    a, counts, mu, s, g, y = found
    scores = _crps(a.astype(np.float64), counts, g, mu.astype(np.float64),
                   None if s is None else s.astype(np.float64), y.astype(np.float64), np)
    out = reduce_scores(scores, None, reduction, np)
    return _device(np.asarray(out, y.dtype))


def _central(coverage: Any, alpha: Any) -> tuple[Fraction, Fraction]:
    """The levels of a central interval's ends, exactly: ``(1 -/+ coverage) / 2``."""
    cov, _ = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    c = Fraction(repr(float(cov)))
    return (1 - c) / 2, (1 + c) / 2


# --------------------------------------------------------------------------- the objects
@pytree_dataclass(data=("residuals", "counts"), meta=("normalized", "num_groups"))
class ConformalPredictiveSystem:
    r"""A fitted split conformal predictive system (:func:`fit_conformal_predictive`).

    Call it on test predictions to get their :class:`ConformalPredictiveDistribution`.

    Attributes
    ----------
    residuals : Array, shape [N]
        The calibration residuals ``y - loc`` (divided by ``scale`` when
        ``normalized``), sorted by group, then value.
    counts : Array of int32, shape [num_groups] (or [1])
        The number of residuals of each group.
    normalized : bool
        Fitted on ``(y - loc) / scale``: the CPD's steps are ``loc + scale * a``.
    num_groups : int or None
        The number of Mondrian groups (None: one for all).
    """

    residuals: jax.Array
    counts: jax.Array
    normalized: bool = False
    num_groups: int | None = None

    def __call__(
        self, loc: ArrayLike, scale: ArrayLike | None = None, *, groups: ArrayLike | None = None
    ) -> ConformalPredictiveDistribution:
        """The CPDs of test cases with predictions ``loc`` (and ``scale``, ``groups``).

        Nothing is computed here (shapes are checked); each method of the result is
        one compiled program, which checks the values.
        """
        _check_call(self.normalized, scale, self.num_groups, groups, "fit_conformal_predictive")
        loc, scale, groups = (_host_or_array(x) for x in (loc, scale, groups))
        shape = tuple(np.shape(loc))
        if len(shape) != 1 or shape[0] == 0:
            raise ValueError(f"loc must be a non-empty 1-D array; got shape {shape}.")
        for name, x in (("scale", scale), ("groups", groups)):
            if x is not None and tuple(np.shape(x)) != shape:
                raise ValueError(
                    f"{name} must have the shape of loc {shape}; got {tuple(np.shape(x))}."
                )
        return ConformalPredictiveDistribution(
            self.residuals, self.counts, loc, scale, groups, self.normalized, self.num_groups
        )


def _host_or_array(x: Any) -> Any:
    if x is None or isinstance(x, jax.Array | np.ndarray | jax.core.Tracer):
        return x
    _v.reject_masked(x, "loc")
    return np.asarray(x)


@pytree_dataclass(
    data=("residuals", "counts", "loc", "scale", "groups"), meta=("normalized", "num_groups")
)
class ConformalPredictiveDistribution:
    r"""The conformal predictive distributions (CPDs) of test cases.

    Made by calling a :class:`ConformalPredictiveSystem`. Case ``i`` has the CDF

    .. math:: Q_i(y, \tau) = \frac{\#\{j: C_{ij} < y\} + (\#\{j: C_{ij} = y\} + 1)\tau}
              {n_{g_i} + 1},\qquad C_{ij} = \mathrm{loc}_i + \mathrm{scale}_i\,a_j,

    over the residuals :math:`a_j` of its group (all of them without groups).

    Attributes
    ----------
    residuals, counts, normalized, num_groups
        Those of the system.
    loc, scale, groups : array, shape [N]
        The test cases' predictions (``scale`` None unless normalized; ``groups``
        None without groups).
    """

    residuals: jax.Array
    counts: jax.Array
    loc: Any
    scale: Any = None
    groups: Any = None
    normalized: bool = False
    num_groups: int | None = None

    def _arrays(self) -> tuple:
        return _padded(self.residuals), self.counts, self.loc, self.scale, self.groups

    @host_first(_twin_pit)
    def pit(self, y_true: ArrayLike, *, key: Any = None) -> jax.Array:
        r""":math:`Q_i(y_i, \tau_i)`: the PIT values of observations ``y_true``.

        With a ``key`` smoothed (:math:`\tau_i` uniform, drawn with
        :func:`jax.random.uniform`): uniform on [0, 1] on exchangeable data, the input of
        :func:`calibration_curve`, :func:`calibration_error` and the tests. Without
        one :math:`\tau = 1` (crepes' ``smoothing=False``): ``(#{C <= y} + 1) / (n + 1)``.

        Parameters
        ----------
        y_true : array_like, shape [N]
            Observed values of the test cases.
        key : jax.random.PRNGKey or int, optional
            Smoothing.

        Returns
        -------
        Array, shape [N]
        """
        if key is None or random_prefix_stable(key):
            return _pit_bucketed(*self._arrays(), y_true, key=key, num_groups=self.num_groups)
        return _pit_fused(*self._arrays(), y_true, key=key, num_groups=self.num_groups)

    @host_first(_twin_quantile)
    def quantile(self, levels: ArrayLike) -> jax.Array:
        r"""The CPDs' quantiles: at level :math:`p` the
        :math:`\lceil p (n + 1) \rceil`-th smallest :math:`C_{ij}` (crepes' "higher
        percentile"; +inf above the ``n``-th, -inf at ``p = 0``).

        Parameters
        ----------
        levels : float or array_like, shape [L]
            Levels in [0, 1].

        Returns
        -------
        Array, shape [N] (one level) or [L, N]
        """
        fracs = _levels_arg(levels)
        out = _quantile(*self._arrays(), levels=fracs, num_groups=self.num_groups)
        return out[0] if np.ndim(levels) == 0 else out

    @host_first(_twin_interval)
    def interval(
        self, coverage: float | None = None, *, alpha: float | None = None
    ) -> tuple[jax.Array, jax.Array]:
        r"""Central prediction intervals: from the
        :math:`\lfloor \tfrac{\alpha}{2}(n + 1) \rfloor`-th to the
        :math:`\lceil (1 - \tfrac{\alpha}{2})(n + 1) \rceil`-th smallest :math:`C_{ij}`
        (crepes' ``predict_int``), with coverage :math:`\ge 1 - \alpha` on
        exchangeable data; an end beyond the group's residuals is infinite.

        Parameters
        ----------
        coverage : float in (0, 1), optional
            Nominal coverage, e.g. 0.9.
        alpha : float in (0, 1), optional
            Or the miscoverage; neither means ``alpha=0.1``.

        Returns
        -------
        (lower, upper) : Arrays, shape [N]
        """
        lower, upper = _central(coverage, alpha)
        return _interval(*self._arrays(), lower=lower, upper=upper, num_groups=self.num_groups)

    @host_first(_twin_crps)
    def crps(self, y_true: ArrayLike, *, reduction: str = "mean") -> jax.Array:
        r"""CRPS of each case's CPD at ``y_true``: that of the empirical distribution of
        its ``n`` steps :math:`C_{ij}` (crepes' score; :func:`crps_draws` of them).

        Parameters
        ----------
        y_true : array_like, shape [N]
            Observed values.
        reduction : {"mean", "sum", "none"}
            Average over cases (default), sum, or one per case.

        Returns
        -------
        Array, scalar or [N]
        """
        check_reduction(reduction)
        return _crps_kernel(
            *self._arrays(), y_true, reduction=reduction, num_groups=self.num_groups
        )


def _padded(residuals: Any) -> Any:
    """The residuals padded with +inf to their bucket, on the host (no program per N)."""
    if isinstance(residuals, jax.core.Tracer) or not paddable(residuals):
        return residuals
    n = residuals.shape[-1]
    return pad_axis(np.asarray(residuals), bucket_size(n), fill=np.inf)


def _levels_arg(levels: Any) -> tuple[Fraction, ...]:
    arr = np.atleast_1d(np.asarray(levels, dtype=object))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("levels must be a level in [0, 1] or a 1-D array of them.")
    return tuple(_level(v, "levels") for v in arr.tolist())


# --------------------------------------------------------------------------- kernels
_TEST = {"y_true": -1, "loc": -1, "scale": -1, "groups": -1}


def _test_inputs(counts, loc, scale, groups, num_groups, y_true=None):
    """Checked float ``loc`` (``scale``, ``y``) and int32 group codes of the test cases."""
    mu = _v.as_float_array(loc, "loc")
    _v.check_finite(mu, "loc")
    s = None
    if scale is not None:
        s = _v.as_float_array(scale, "scale")
        _v.check_positive(s, "scale")
    if groups is None:
        g = jnp.zeros(mu.shape, jnp.int32)
    else:
        g = _v.check_class_labels(groups, "groups", num_groups, _GROUPS)
    if y_true is None:
        return mu, s, g, None
    y = _v.as_float_array(y_true, "y_true")
    _v.check_same_shape(y_true=y, loc=mu)
    _v.check_finite(y, "y_true")
    return mu, s, g, y


def _pit_impl(residuals, counts, loc, scale, groups, y_true, *, key=None, num_groups=None):
    mu, s, g, y = _test_inputs(counts, loc, scale, groups, num_groups, y_true)
    dtype = jnp.result_type(y, mu)
    tau = None if key is None else jax.random.uniform(check_key(key), y.shape, dtype=dtype)
    return _pit(residuals.astype(dtype), counts, g, mu, s, y, tau, jnp)


_pit_fused = _v.validated(fuse=True)(_pit_impl)
_pit_bucketed = _v.validated(fuse=True, bucket=_TEST, per_observation=-1)(_pit_impl)


@_v.validated(fuse=True, bucket=_TEST, per_observation=-1)
def _quantile(residuals, counts, loc, scale, groups, *, levels, num_groups=None):
    mu, s, g, _ = _test_inputs(counts, loc, scale, groups, num_groups)
    return _quantile_rows(residuals.astype(mu.dtype), counts, g, mu, s, levels, jnp)


@_v.validated(fuse=True, bucket=_TEST, per_observation=-1)
def _interval(residuals, counts, loc, scale, groups, *, lower, upper, num_groups=None):
    mu, s, g, _ = _test_inputs(counts, loc, scale, groups, num_groups)
    return _interval_ends(residuals.astype(mu.dtype), counts, g, mu, s, lower, upper, jnp)


@_v.validated(fuse=True, bucket=_TEST, per_observation=_v.unreduced)
def _crps_kernel(residuals, counts, loc, scale, groups, y_true, *, reduction, num_groups=None):
    mu, s, g, y = _test_inputs(counts, loc, scale, groups, num_groups, y_true)
    scores = _crps(residuals.astype(y.dtype), counts, g, mu, s, y, jnp)
    w = _v.mask_weights(None, scores.shape, scores.dtype)
    return reduce_scores(scores, w, reduction)


# --------------------------------------------------------------------------- host twins
def _twin_fit(
    y_true: Any, loc: Any, scale: Any = None, *, groups: Any = None, num_groups: Any = None
) -> Any:
    """:func:`fit_conformal_predictive` on the host."""
    y, mu = _vector(y_true), _vector(loc)
    if y is None or mu is None or y.shape != mu.shape or y.size == 0:
        return None
    if not (np.isfinite(y).all() and np.isfinite(mu).all()):
        return None
    r = y - mu
    if scale is not None:
        s = _vector(scale)
        if s is None or s.shape != y.shape or not (s > 0).all():
            return None
        r = r / s
    if groups is None:
        g, num = np.zeros(y.shape, np.int64), None
    else:
        g = groups if isinstance(groups, np.ndarray) else None
        if g is None or g.shape != y.shape or g.dtype.kind not in "iu":
            return None
        num = int(g.max()) + 1 if num_groups is None else num_groups
        if type(num) is not int or g.min() < 0 or g.max() >= num:
            return None
    values, counts = _sorted_by_group(r, g, num or 1, np)
    if not counts.all():
        return None  # the kernel path names the empty groups
    return ConformalPredictiveSystem(
        _device(values), jax.device_put(counts), scale is not None, num
    )


# --------------------------------------------------------------------------- the fit
@host_first(_twin_fit)
def _fit_cps(y_true, loc, scale=None, *, groups=None, num_groups=None):
    y, mu, s = _residual_inputs(y_true, loc, scale)
    g, num = _groups_and_count(groups, num_groups, y)
    out = _fit_kernel(y, mu, s, g, num_groups=num)
    n = y.shape[-1]
    if out.residuals.shape[-1] != n:  # a bucket's padding, sorted last: cut on the host
        out = ConformalPredictiveSystem(
            _v.slice_without_program(out.residuals, (slice(0, n),)),
            out.counts,
            out.normalized,
            out.num_groups,
        )
    if num is not None and _v.is_concrete(out.counts):
        counts = np.asarray(out.counts)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ValueError(
                f"groups {', '.join(map(str, empty[:10]))} have no calibration "
                f"observations (groups holds codes 0..{num - 1}): their distributions "
                "would be undefined. Recode the groups to those present "
                "(np.unique(codes, return_inverse=True)) or pass fewer num_groups."
            )
    return out


@_v.validated(fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1, "groups": -1})
def _fit_kernel(y_true, loc, scale, groups, *, num_groups=None):
    for name, x in (("y_true", y_true), ("loc", loc)):
        _v.check_finite(x, name)
    r = y_true - loc
    if scale is not None:
        _v.check_positive(scale, "scale")
        r = r / scale
    if groups is None:
        g = jnp.zeros(r.shape, jnp.int32)
    else:
        g = _v.check_class_labels(groups, "groups", num_groups, _GROUPS)
    mask = _v.observation_mask(r.shape[-1])
    if mask is not None:  # the padding sorts last, in no group
        g = jnp.where(mask, g, num_groups or 1)
        r = jnp.where(mask, r, jnp.asarray(jnp.inf, r.dtype))
    values, counts = _sorted_by_group(r, g, num_groups or 1, jnp)
    return ConformalPredictiveSystem(values, counts, scale is not None, num_groups)


def fit_conformal_predictive(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike | None = None,
    *,
    groups: ArrayLike | None = None,
    num_groups: int | None = None,
) -> ConformalPredictiveSystem:
    r"""A split conformal predictive system: a predictive CDF for every test case.

    From a calibration split's residuals :math:`a_j = y_j - \mu_j` (or
    :math:`(y_j - \mu_j)/\sigma_j`), the conformal predictive distribution (CPD) of a
    test case with prediction :math:`\mu` (and :math:`\sigma`) is the CDF

    .. math:: Q(y, \tau) = \frac{\#\{j: C_j < y\} + (\#\{j: C_j = y\} + 1)\,\tau}{n + 1},
              \qquad C_j = \mu + \sigma a_j

    (Vovk, Shen, Manokhin & Xie 2017). Its smoothed value at the outcome is uniform
    on exchangeable data, whatever the model: quantiles and intervals of the CPD
    have their nominal coverage, and its PIT values (``.pit``) feed every
    calibration metric and test of :mod:`bayescal.regression`. With ``groups``
    (Mondrian) each group's CPDs come from its own residuals.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values of the calibration split.
    loc : array_like, shape [N]
        Point predictions on it.
    scale : array_like, shape [N], optional
        Predicted spreads (> 0): normalized residuals, so the CPDs widen with it.
    groups : array_like of int, shape [N], optional
        Mondrian categories coded ``0..num_groups - 1`` (as in :func:`fit_conformal`);
        every group needs a calibration observation.
    num_groups : int, optional
        The number of groups; default ``max(groups) + 1``; needed under ``jit``.

    Returns
    -------
    ConformalPredictiveSystem
        Call it on test ``loc`` (and ``scale``, ``groups``) for their
        :class:`ConformalPredictiveDistribution`, whose ``pit``, ``quantile``,
        ``interval`` and ``crps`` are each one compiled program.

    See Also
    --------
    fit_conformal : Intervals only (the same quantiles of absolute residuals).
    pit_normal : PIT values of Gaussian predictives.

    References
    ----------
    Vovk, Shen, Manokhin & Xie (2017), "Nonparametric predictive distributions based
    on conformal prediction", COPA (PMLR 60); Vovk et al. (2020), "Computationally
    efficient versions of conformal predictive distributions", Neurocomputing 397.
    Bostrom et al., crepes (the reference of the tests).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import fit_conformal_predictive
    >>> cps = fit_conformal_predictive([1.0, 2.0, 3.0, 4.0], [1.5, 1.5, 3.5, 3.5])
    >>> cps.residuals.tolist()
    [-0.5, -0.5, 0.5, 0.5]
    >>> dist = cps(np.array([0.0, 10.0]))
    >>> u = dist.pit(np.array([0.0, 10.0]))  # (#{C <= y} + 1) / (n + 1)
    >>> [round(v, 3) for v in u.tolist()]
    [0.6, 0.6]
    >>> lo, hi = dist.interval(0.6)  # ranks floor(0.2 * 5) and ceil(0.8 * 5)
    >>> lo.tolist(), hi.tolist()
    ([-0.5, 9.5], [0.5, 10.5])
    """
    _num_groups_needs_groups(groups, num_groups)
    return _fit_cps(y_true, loc, scale, groups=groups, num_groups=num_groups)
