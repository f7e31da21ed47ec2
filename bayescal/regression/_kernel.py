"""The squared kernel calibration error (SKCE) of Widmann, Lindsten & Zachariah (2021)
and its calibration test, for Gaussian predictives of real targets.

With the tensor-product kernel :math:`k((P, y), (P', y')) = k_P(P, P')\\,k_Y(y, y')`,
:math:`k_P(P, P') = \\exp(-W_2(P, P') / \\nu)` (Laplacian on the 2-Wasserstein
distance, :math:`W_2 = \\sqrt{(\\mu - \\mu')^2 + (\\sigma - \\sigma')^2}` between normals)
and the Gaussian :math:`k_Y(y, y') = \\exp(-(y - y')^2 / (2 l^2))`, the pair function is

.. math:: h_{ij} = k_P(P_i, P_j) \\big[k_Y(y_i, y_j) - E_{Z \\sim P_i} k_Y(Z, y_j)
          - E_{Z' \\sim P_j} k_Y(y_i, Z') + E_{Z \\sim P_i, Z' \\sim P_j} k_Y(Z, Z')\\big],

whose expectations have closed forms for normal :math:`P`. The quadratic sum runs over
the tiles of the upper triangle (:func:`bayescal._src.kernel_calibration.pair_sum`,
``h_ij + h_ji`` per pair, memory ``O(tile^2)``); the consistency resamples of the test
run in batches of such sums.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import kernel_calibration as _kc
from bayescal._src import validation as _v
from bayescal._src import xla_options
from bayescal._src.host import (
    _bootstrap_on_host,
    _bucket_padded,
    _kernel_bandwidth,
    _linear_pairs,
    _linear_test,
    _median_heuristic,
    _normal,
    _result,
    _scalar_array,
    _unbiased_draws,
    _unbiased_on_host,
    _vector,
)
from bayescal._src.host import first as host_first

__all__ = ["KernelCalibrationTest", "kernel_calibration_error", "kernel_calibration_test"]

# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "loc": 0, "scale": 0, "counts": 0}


def _compiler_options(size: int) -> dict[str, Any]:
    """XLA's optimised CPU code at every N (``xla_options.pair_sum_options``): the
    O(N^2) pair sum of exponentials ran 2.5x faster than with the quick compile's
    unoptimised code at N = 1e4 (0.78 vs 1.95 s) and its first call was faster too (1.3
    vs 2.3 s, 2-core CPU machine)."""
    return xla_options.pair_sum_options(size)


#: ``method="auto"`` resamples by consistency while ``num_samples * N^2`` is at most
#: this (0.1 s of kernel values warm on the 2-core CPU machines: 1.3 s for 21 x 10^8
#: at N = 10,000), and by the bootstrap beyond.
AUTO_BUDGET = 1 << 27


class KernelCalibrationTest(NamedTuple):
    """The SKCE estimate, the p-value of the calibration test and the two bandwidths.

    The regression twin of :class:`bayescal.classification.KernelCalibrationTest`: the
    same first three fields, and the target kernel's length scale after them.

    Attributes
    ----------
    statistic : Array, scalar
        The estimate of the squared kernel calibration error (``estimator``'s).
    p_value : Array, scalar
        One-sided p-value of "the model is calibrated" (large SKCE rejects).
    bandwidth : Array, scalar
        The length scale :math:`\\nu` of the kernel on the predictives used.
    target_bandwidth : Array, scalar
        The length scale :math:`l` of the kernel on the targets used.
    """

    statistic: jax.Array
    p_value: jax.Array
    bandwidth: jax.Array
    target_bandwidth: jax.Array


# --------------------------------------------------------------------------- inputs
def _inputs(y_true: Any, loc: Any, scale: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Targets, means and standard deviations ``[N]`` in one dtype (``loc`` and
    ``scale`` may be scalars or broadcast to ``y_true``'s shape)."""
    y = _v.as_float_array(y_true, "y_true")
    m = _v.as_float_array(loc, "loc")
    s = _v.as_float_array(scale, "scale")
    _v.check_ndim(y, "y_true", 1)
    _v.check_nonempty(y, "y_true")
    _v.check_broadcastable("y_true", tuple(y.shape), loc=m, scale=s)
    dtype = _v.result_dtype(y, m, s)
    y = y.astype(dtype)
    m = jnp.broadcast_to(m.astype(dtype), y.shape)
    s = jnp.broadcast_to(s.astype(dtype), y.shape)
    _v.check_finite(y, "y_true")
    _v.check_finite(m, "loc")
    _v.check_positive(s, "scale")
    return y, m, s


# --------------------------------------------------------------------------- kernels
def _w2(a, b):
    """The 2-Wasserstein distance of normals ``(loc, scale)``, broadcasting; by
    ``hypot``, so that distances above the square root of the dtype's largest value
    (1.8e19 in float32) do not overflow: the median heuristic would be inf, and the
    kernel NaN."""
    (ma, sa), (mb, sb) = a, b
    return jnp.hypot(ma - mb, sa - sb)


def _absdiff(a, b):
    return jnp.abs(a - b)


#: Scales in units of the target kernel's length scale are capped here: beyond it the
#: expectations of the target kernel are below ``1 / _SCALE_CAP`` (so they are 0 to
#: float precision beside the kernel's other terms), and the squares of the capped
#: values stay finite in float32 (an infinite ``s^2`` made ``inf * 0``: NaN with
#: targets scaled by 1e-30 beside unit scales).
_SCALE_CAP = 1e18


def _units(s, ell, xp=jnp):
    """``s / l``, capped at :data:`_SCALE_CAP`."""
    return xp.minimum(s / ell, _SCALE_CAP)


def _less_one(var, dist2, xp=jnp):
    """``(1 + var)^(-1/2) exp(-dist2 / (2 (1 + var))) - 1``, accurate when it is small:
    by ``expm1`` and ``(1 + var)^(-1/2) - 1 = -var f / (1 + (1 + var) f)``.

    In units of ``l``, ``1 +`` this is the closed form of ``E exp(-(Z - y)^2 / 2)`` for
    ``Z ~ N(m, s^2)`` (``var = s^2``, ``dist2 = (m - y)^2``), and of ``E exp(-(Z -
    Z')^2 / 2)`` for independent ``Z ~ N(m1, s1^2)``, ``Z' ~ N(m2, s2^2)`` (``var =
    s1^2 + s2^2``, ``dist2 = (m1 - m2)^2``)."""
    v = 1 + var
    f = 1 / xp.sqrt(v)
    return f * xp.expm1(-dist2 / (2 * v)) - var * f / (1 + v * f)


def _h(a, b, nu, ell, xp=jnp):
    """The pair function of (target, loc, scale) observations, broadcasting; ``xp``:
    ``jax.numpy`` (the kernel) or ``numpy`` (the host twin, in float64).

    The bracket's four terms are each near 1 when the scales are small beside ``l``,
    and their sum is small: in float32 it lost up to 6e-4 of its value (``y = loc =
    0``, ``scale = 1/8``: 1.76e-4 from four terms near 1). Each term is written as
    its difference from 1 (the four 1s cancel exactly), which float32 keeps to its
    precision. Everything in units of ``l`` (no square of a value near ``l``
    overflows, e.g. targets near float32's largest value)."""
    (ya, ma, sa), (yb, mb, sb) = a, b
    kp = xp.exp(-xp.hypot(ma - mb, sa - sb) / nu)
    ya, ma, yb, mb = (v / ell for v in (ya, ma, yb, mb))
    va, vb = _units(sa, ell, xp) ** 2, _units(sb, ell, xp) ** 2
    return kp * (
        xp.expm1(-((ya - yb) ** 2) / 2)
        - _less_one(va, (ma - yb) ** 2, xp)
        - _less_one(vb, (mb - ya) ** 2, xp)
        + _less_one(va + vb, (ma - mb) ** 2, xp)
    )


def _h_rows(a, b):
    """``_h(a, b)`` (symmetric: ``= _h(b, a)``) on :func:`_rows`: ``k_P (k_Y - E_{Z ~
    P_a} k_Y(Z, y_b) - E_{Z ~ P_b} k_Y(Z, y_a) + E k_Y(Z, Z'))``, four exponentials per
    pair of observations (``k_P``'s exponent added to each term's: 9% faster than
    five at N = 10,240), no division by a bandwidth. (The plain terms, not ``_h``'s
    differences from 1: the quadratic sums are the hot loops, and their float32
    rounding averages over ``N^2`` pairs.)"""
    (ya, ma, sa, fa, ca, ua, ta), (yb, mb, sb, fb, cb, ub, tb) = a, b
    lp = -jnp.sqrt((ua - ub) ** 2 + (ta - tb) ** 2)
    ky = jnp.exp(lp - ((ya - yb) ** 2) / 2)
    cross = fa * jnp.exp(lp - ((ma - yb) ** 2) * ca) + fb * jnp.exp(lp - ((mb - ya) ** 2) * cb)
    v = 1 + sa * sa + sb * sb
    both = jax.lax.rsqrt(v) * jnp.exp(lp - ((ma - mb) ** 2) / (2 * v))
    return ky - cross + both


def _h_pair(a, b):
    """``_h(a, b) + _h(b, a)`` for :func:`~bayescal._src.kernel_calibration.pair_sum`."""
    return 2 * _h_rows(a, b)


def _h_tile(rows, cols):
    """``[T, T]`` pair values of two tiles of :func:`_rows` (``[T]`` leaves)."""
    return _h_rows(tuple(a[:, None] for a in rows), tuple(a[None, :] for a in cols))


def _rows(y, m, s, ell, nu, xp=jnp):
    """The observations for :func:`_h_pair`: target, loc and scale in units of ``l``
    (the scale capped: :data:`_SCALE_CAP`) with ``(1 + s^2)^(-1/2)`` and
    ``1 / (2 (1 + s^2))`` precomputed, and loc and scale in units of ``nu``. ``xp``:
    ``jax.numpy``, or ``numpy`` (the host path; ``ell`` and ``nu`` then scalars of
    the inputs' dtype)."""
    yl, ml, sl = y / ell, m / ell, _units(s, ell, xp)
    v = 1 + sl * sl
    f = jax.lax.rsqrt(v) if xp is jnp else 1 / xp.sqrt(v)
    return (yl, ml, sl, f, 1 / (2 * v), m / nu, s / nu)


def _error_pairs(rows, w):
    """The host path's program for the unbiased SKCE: ``sum_{i != j} w_i w_j h_ij``
    over :func:`_rows` (``host.kernel_calibration_error_regression``)."""
    return _kc.pair_sum(_h_pair, rows, w)


def _bootstrap_pairs(rows, v):
    """The host path's program for one pass of the bootstrap test:
    ``kernel_calibration.bootstrap_sums`` of :func:`_rows` with the weights and
    counts ``v``, and the ``h_ii``."""
    return _kc.bootstrap_sums(_h_tile, rows, v), _h_rows(rows, rows)


def _bandwidths(y, m, s, w, bandwidth, target_bandwidth):
    n = _kc.real_count(w)
    if bandwidth is None:
        nu = _kc.median_distance((m, s), n, _w2)
    else:
        nu = jnp.asarray(bandwidth, y.dtype)
    if target_bandwidth is None:
        ell = _kc.median_distance(y, n, _absdiff)
    else:
        ell = jnp.asarray(target_bandwidth, y.dtype)
    return nu, ell


def _unbiased(y, m, s, w, nu, ell):
    n = _kc.real_count(w).astype(y.dtype)
    total = _kc.pair_sum(_h_pair, _rows(y, m, s, ell, nu), w)
    return total / (n * (n - 1))


def _linear(y, m, s, w, nu, ell):
    return _kc.linear_terms(functools.partial(_h, nu=nu, ell=ell), (y, m, s), w)


@functools.partial(jax.jit, static_argnames=("estimator",))
def _error_kernel(y, m, s, w, bandwidth, target_bandwidth, *, estimator):
    w = jnp.ones(y.shape, y.dtype) if w is None else w
    nu, ell = _bandwidths(y, m, s, w, bandwidth, target_bandwidth)
    if estimator == "unbiased":
        return _unbiased(y, m, s, w, nu, ell).astype(y.dtype)
    return _kc.linear_estimate(*_linear(y, m, s, w, nu, ell)).astype(y.dtype)


def _resample_batch(size: int, num_samples: int) -> int:
    """Resamples summed together: ``[batch, N, N]`` pair values at most (one block)."""
    return max(1, min(num_samples, _kc.BLOCK_VALUES // (size * size)))


def _consistency_samples(key, y, m, s, w, nu, ell, num_samples):
    """The unbiased SKCE of the data and then of ``num_samples`` consistency resamples
    (Broecker & Smith 2007; Widmann et al. 2021, section 4): predictives drawn with
    replacement from the real observations and a target drawn from each, so every
    resample is calibrated. ``[1 + num_samples]``: the data's estimate first, by the
    same loop body (one copy of the pair sum in the program: its compilation took
    0.61 s with two)."""
    size = m.shape[0]
    n = _kc.real_count(w)
    total = num_samples + 1
    batch = _resample_batch(size, total)
    nbatches = -(-total // batch)
    nf = n.astype(m.dtype)

    def draw(b):
        # resample b's draws depend on (key, b) and the index of the observation only,
        # so a padded bucket gives the real observations the unpadded call's draws
        k1, k2 = jax.random.split(jax.random.fold_in(key, b - 1))
        u = jax.random.uniform(k1, (size,), m.dtype)
        z = jax.random.normal(k2, (size,), m.dtype)
        idx = jnp.minimum(jnp.floor(u * nf).astype(jnp.int32), n - 1)
        data = b == 0
        idx = jnp.where(data, jnp.arange(size), idx)
        mi, si = m[idx], s[idx]
        yi = jnp.where(data, y, mi + si * z)
        return _kc.pair_sum(_h_pair, _rows(yi, mi, si, ell, nu), w) / (nf * (nf - 1))

    def one(i):
        return jax.vmap(draw)(i * batch + jnp.arange(batch))

    return jax.lax.map(one, jnp.arange(nbatches)).reshape(-1)[:total]


@functools.partial(jax.jit, static_argnames=("estimator", "num_samples", "method"))
def _test_kernel(
    key, y, m, s, w, bandwidth, target_bandwidth, counts=None, *, estimator, num_samples,
    method="consistency",
):
    w = jnp.ones(y.shape, y.dtype) if w is None else w
    nu, ell = _bandwidths(y, m, s, w, bandwidth, target_bandwidth)
    if estimator == "linear":
        stat, pv = _kc.linear_test(*_linear(y, m, s, w, nu, ell))
    elif method == "bootstrap":
        rows = _rows(y, m, s, ell, nu)
        stat, pv = _kc.bootstrap_test(
            _h_tile, rows, _h_rows(rows, rows), w, key, num_samples, counts
        )
    else:
        both = _consistency_samples(key, y, m, s, w, nu, ell, num_samples)
        stat, samples = both[0], both[1:]
        pv = (1 + jnp.sum(samples >= stat)) / (1 + num_samples)
    dt = y.dtype
    return KernelCalibrationTest(stat.astype(dt), pv.astype(dt), nu.astype(dt), ell.astype(dt))


# --------------------------------------------------------------------------- public
def _length(y_true: Any, loc: Any, scale: Any) -> int | None:
    """The number of entries of ``y_true`` (for the minimum-length checks), after the
    masked-array refusal that the validated call would give."""
    for value, name in ((y_true, "y_true"), (loc, "loc"), (scale, "scale")):
        _v.reject_masked(value, name)
    shape = _kc.shape_of(y_true)
    return int(shape[0]) if shape else None


def _check_options(estimator, bandwidth, target_bandwidth):
    return (
        _kc.check_estimator(estimator),
        _kc.check_bandwidth(bandwidth),
        _kc.check_bandwidth(target_bandwidth, "target_bandwidth"),
    )


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=_compiler_options)
def _kce(y_true, loc, scale, *, estimator, bandwidth, target_bandwidth):
    y, m, s = _inputs(y_true, loc, scale)
    w = _v.mask_weights(None, y.shape, y.dtype)
    return _error_kernel(y, m, s, w, bandwidth, target_bandwidth, estimator=estimator)


# --------------------------------------------------------------------------- host twins
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

    # the kernel's bandwidths rounded to the inputs' dtype, the kernel's formula
    nu64, ell64 = float(np.asarray(nu, y.dtype)), float(np.asarray(ell, y.dtype))
    with np.errstate(over="ignore", under="ignore"):
        terms = _linear_pairs(functools.partial(_h, nu=nu64, ell=ell64, xp=np), (y, m, s))
    return terms, nu, ell, y.dtype


def _twin_kernel_calibration_error_regression(
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


def _twin_kernel_calibration_test_regression(
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


@host_first(_twin_kernel_calibration_error_regression)
def kernel_calibration_error(
    y_true: Any,
    loc: Any,
    scale: Any,
    *,
    estimator: str = "unbiased",
    bandwidth: float | None = None,
    target_bandwidth: float | None = None,
) -> jax.Array:
    r"""Squared kernel calibration error (SKCE) of Gaussian predictives (Widmann,
    Lindsten & Zachariah 2021).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed real targets.
    loc, scale : array_like, shape [N] or scalar
        Means and standard deviations (> 0) of the normal predictives
        :math:`P_i = N(\mu_i, \sigma_i^2)`.
    estimator : {"unbiased", "linear"}, default "unbiased"
        ``"unbiased"``: the quadratic U-statistic over all pairs
        (:math:`\widehat{\mathrm{SKCE}}_{uq}`, O(N^2) time, O(N) memory in blocks);
        ``"linear"``: the linear-time :math:`\widehat{\mathrm{SKCE}}_{ul}` over the
        disjoint pairs ``(0, 1), (2, 3), ...`` (unbiased too, with more variance;
        depends on the order of the observations).
    bandwidth : float > 0, optional
        The length scale :math:`\nu` of the kernel on the predictives. Default: the
        median heuristic, the median of :math:`W_2(P_i, P_j)` over the pairs ``i < j``
        (of at most 512 observations spread over the data when ``N > 512``); the mean
        distance when the median is 0.
    target_bandwidth : float > 0, optional
        The length scale :math:`l` of the kernel on the targets. Default: the median
        heuristic on :math:`|y_i - y_j|`, as for ``bandwidth``.

    Returns
    -------
    Array, scalar
        The estimate in the inputs' dtype; it can be negative (it is unbiased), and
        its expectation is 0 exactly when the predictives are calibrated (the kernel
        is characteristic).

    See Also
    --------
    kernel_calibration_test : The calibration test on this estimate.
    bayescal.classification.kernel_calibration_error : The classification version.

    Notes
    -----
    The kernel is :math:`k((P, y), (P', y')) = \exp(-W_2(P, P')/\nu)\,
    \exp(-(y - y')^2 / (2 l^2))`, with :math:`W_2(P, P') = \sqrt{(\mu - \mu')^2 +
    (\sigma - \sigma')^2}` the 2-Wasserstein distance of normals (the Laplacian kernel
    on :math:`W_2` of Widmann et al. 2021). With :math:`k_Y` the target kernel,

    .. math:: h_{ij} = k_P(P_i, P_j) \big[k_Y(y_i, y_j)
              - E_{Z \sim P_i} k_Y(Z, y_j) - E_{Z' \sim P_j} k_Y(y_i, Z')
              + E_{Z \sim P_i, Z' \sim P_j} k_Y(Z, Z')\big],

    where :math:`E_{Z \sim N(\mu, \sigma^2)} k_Y(Z, y) = l / \sqrt{l^2 + \sigma^2}\,
    \exp(-(\mu - y)^2 / (2 (l^2 + \sigma^2)))` and :math:`E\,k_Y(Z, Z') = l /
    \sqrt{l^2 + \sigma^2 + \sigma'^2}\, \exp(-(\mu - \mu')^2 / (2 (l^2 + \sigma^2 +
    \sigma'^2)))`. :math:`\widehat{\mathrm{SKCE}}_{uq} = \binom N2^{-1} \sum_{i<j}
    h_{ij}` and :math:`\widehat{\mathrm{SKCE}}_{ul} = \lfloor N/2\rfloor^{-1}
    \sum_{i} h_{2i, 2i+1}` (0-based). ``jax.jit`` and ``jax.vmap`` work; there invalid
    values give NaN.

    References
    ----------
    Widmann, D., Lindsten, F. and Zachariah, D. (2021). Calibration tests beyond
    classification. *ICLR*.

    Examples
    --------
    >>> from bayescal.regression import kernel_calibration_error
    >>> y = [0.3, -1.2, 2.1, 0.4, -0.5, 1.0]
    >>> loc, scale = [0.0, -1.0, 1.5, 0.5, 0.0, 0.8], 0.5
    >>> round(float(kernel_calibration_error(y, loc, scale, bandwidth=1.0)), 4)
    -0.0053
    """
    est, bw, tbw = _check_options(estimator, bandwidth, target_bandwidth)
    length = _length(y_true, loc, scale)
    if length is not None:
        _kc.check_min_length(length, "y_true", 2, "the kernel calibration error")
    if est == "unbiased":
        _kc.check_pair_budget(length, "y_true", "the unbiased estimator")
    return _kce(y_true, loc, scale, estimator=est, bandwidth=bw, target_bandwidth=tbw)


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=_compiler_options)
def _kct(
    y_true, loc, scale, key, counts=None, *, estimator, bandwidth, target_bandwidth,
    num_samples, method,
):
    """``counts``: the bootstrap's resample counts [N, B] drawn by the caller (the host
    path), or None: drawn here from ``key``."""
    y, m, s = _inputs(y_true, loc, scale)
    w = _v.mask_weights(None, y.shape, y.dtype)
    return _test_kernel(
        key, y, m, s, w, bandwidth, target_bandwidth, counts, estimator=estimator,
        num_samples=num_samples, method=method,
    )


@host_first(_twin_kernel_calibration_test_regression)
def kernel_calibration_test(
    y_true: Any,
    loc: Any,
    scale: Any,
    *,
    estimator: str = "linear",
    bandwidth: float | None = None,
    target_bandwidth: float | None = None,
    key: Any = None,
    num_samples: int = 500,
    method: str = "auto",
) -> KernelCalibrationTest:
    r"""Calibration test of Gaussian predictives on the squared kernel calibration
    error (Widmann, Lindsten & Zachariah 2021).

    Parameters
    ----------
    y_true, loc, scale : array_like
        As in :func:`kernel_calibration_error`.
    estimator : {"linear", "unbiased"}, default "linear"
        ``"linear"``: the linear estimator with the p-value of its asymptotic normal
        distribution, O(N) time, no randomness. ``"unbiased"``: the quadratic
        estimator (more powerful) with a resampling p-value (``method``); needs
        ``key``.
    bandwidth, target_bandwidth : float > 0, optional
        The kernels' length scales; default the median heuristics (see
        :func:`kernel_calibration_error`).
    key : PRNG key or int, optional
        Randomness of the resamples (``estimator="unbiased"`` only).
    num_samples : int >= 1, default 500
        Number of resamples (``estimator="unbiased"`` only).
    method : {"auto", "bootstrap", "consistency"}, default "auto"
        The p-value of the unbiased test (``estimator="unbiased"`` only).
        ``"consistency"``: consistency resampling, which draws new targets and
        evaluates the kernel again for every resample, O(B N^2) kernel values (B
        times the cost of :func:`kernel_calibration_error`); the more powerful test
        at small N. ``"bootstrap"``: the asymptotic test of Widmann et al.
        (CalibrationTests.jl's ``AsymptoticSKCETest``), which resamples the data's
        own pair values: the kernel is evaluated once per pair, and each resample
        adds O(N^2) multiply-adds (at N = 10,000 with 20 resamples, 0.08 s instead
        of 1.3 s on two CPU cores). ``"auto"``: ``"consistency"`` while
        ``num_samples * N^2 <= 2^27`` (e.g. N <= 518 with 500 resamples), else
        ``"bootstrap"``.

    Returns
    -------
    KernelCalibrationTest
        ``(statistic, p_value, bandwidth, target_bandwidth)``, scalars in the inputs'
        dtype (the regression twin of the classification result, with the target
        kernel's length scale added).

    See Also
    --------
    kernel_calibration_error : The estimates.
    pit_null_test, calibration_error_test : Tests on the PIT values.

    Notes
    -----
    ``"linear"``: with :math:`m = \lfloor N/2\rfloor` terms :math:`h_{2i, 2i+1}` of
    mean :math:`\widehat{\mathrm{SKCE}}_{ul}` and sample standard deviation
    :math:`\hat s`, :math:`\sqrt m\,\widehat{\mathrm{SKCE}}_{ul} / \hat s` is
    asymptotically standard normal under calibration; the p-value is one-sided,
    :math:`1 - \Phi(z)`. It needs N >= 4.

    ``"unbiased"`` with ``method="bootstrap"`` (Widmann, Lindsten & Zachariah 2019,
    section 5; Arcones & Gine 1992): under calibration :math:`\widehat{\mathrm{
    SKCE}}_{uq}` is a degenerate U-statistic, whose distribution the bootstrap of the
    kernel centred at the empirical distribution estimates. With :math:`H_{ij} =
    h_{ij}` over all pairs (the diagonal included), :math:`\widehat{\mathrm{SKCE}}_b
    = \sum_{i,j} h_{ij} / N^2` and resample counts :math:`c` (N draws with
    replacement), the statistic :math:`N \widehat{\mathrm{SKCE}}_{uq} / (N - 1) -
    \widehat{\mathrm{SKCE}}_b` is compared with :math:`T_b = (c^\top H c -
    \sum_i c_i h_{ii}) / (N (N - 1)) - 2\, c^\top H 1 / N^2` (CalibrationTests.jl's
    form); the p-value is :math:`(1 + \#\{T_b \ge T\}) / (1 + B)`.

    ``"unbiased"`` with ``method="consistency"`` (Broecker & Smith 2007; Widmann et
    al. 2021): each resample draws N predictives with replacement from the data and a
    target from each drawn predictive, so it is calibrated by construction; the
    p-value is :math:`(1 + \#\{T_b \ge T\}) / (1 + B)` over the ``B`` resamples'
    :math:`\widehat{\mathrm{SKCE}}_{uq}`. Cost O(B N^2) kernel values: fine up to N
    of a few thousand.

    The sizes of the tests at the 5% level are checked by simulation in the tests.
    ``jax.jit`` and ``jax.vmap`` work (``key`` must then be a key).

    References
    ----------
    Widmann, D., Lindsten, F. and Zachariah, D. (2021). Calibration tests beyond
    classification. *ICLR*.

    Widmann, D., Lindsten, F. and Zachariah, D. (2019). Calibration tests in
    multi-class classification: a unifying framework. *NeurIPS* 32.

    Arcones, M. A. and Gine, E. (1992). On the bootstrap of U and V statistics.
    *The Annals of Statistics* 20, 655-674.

    Broecker, J. and Smith, L. A. (2007). Increasing the reliability of reliability
    diagrams. *Weather and Forecasting* 22, 651-661.

    Examples
    --------
    >>> from bayescal.regression import kernel_calibration_test
    >>> y = [0.3, -1.2, 2.1, 0.4, -0.5, 1.0, 0.2, -0.9]
    >>> loc, scale = [0.0, -1.0, 1.5, 0.5, 0.0, 0.8, 0.1, -0.4], 0.5
    >>> t = kernel_calibration_test(y, loc, scale, bandwidth=1.0, target_bandwidth=1.0)
    >>> round(float(t.statistic), 4), round(float(t.p_value), 3)
    (-0.0287, 1.0)
    >>> t = kernel_calibration_test(y, loc, scale, estimator="unbiased", key=0, num_samples=99)
    >>> 0 < float(t.p_value) <= 1
    True
    """
    est, bw, tbw = _check_options(estimator, bandwidth, target_bandwidth)
    how = _kc.check_method(method)
    length = _length(y_true, loc, scale)
    if est == "unbiased":
        _kc.check_pair_budget(length, "y_true", "the unbiased test")
    k, num = _kc.test_draws(est, key, num_samples, length, "y_true")
    if est == "linear":  # the linear test draws nothing: one program for every method
        how = "consistency"
    else:
        how = _kc.resolve_method(how, length, num, AUTO_BUDGET)
    return _kct(
        y_true, loc, scale, k, estimator=est, bandwidth=bw, target_bandwidth=tbw,
        num_samples=num, method=how,
    )
