"""The squared kernel calibration error (SKCE) of Widmann, Lindsten & Zachariah (2019)
and its calibration test, for binary and multiclass probabilities.

With the matrix-valued kernel :math:`k(p, p') = \\kappa(p, p') I_C`,
:math:`\\kappa(p, p') = \\exp(-\\lVert p - p' \\rVert_2 / \\nu)`, the pair function is

.. math:: h_{ij} = \\kappa(p_i, p_j)\\,(e_{y_i} - p_i)^\\top (e_{y_j} - p_j),

the unbiased quadratic estimator is :math:`\\binom n2^{-1} \\sum_{i<j} h_{ij}` and the
linear one :math:`\\lfloor n/2 \\rfloor^{-1} \\sum_i h_{2i-1, 2i}`. The quadratic sum
is computed as :math:`\\sum_{a,b} K_{ab} R_a^\\top R_b - \\sum_a \\lVert R_a \\rVert^2`
in blocks of rows of :math:`K` (memory ``O(N * block)``), which also serves the
consistency resamples (all resamples of a batch in one product with each block).

A binary input (``y_prob`` of shape [N], the two classes :math:`(1 - p, p)`) is
computed exactly in ``O(N log N)``: :math:`\\lVert p_i - p_j \\rVert_2 = \\sqrt2
|p_i - p_j|` and :math:`(e_{y_i} - p_i)^\\top (e_{y_j} - p_j) = 2 r_i r_j` with
:math:`r = y - p`, so the sum is a 1-D Laplacian kernel sum: after sorting by
:math:`p`, :math:`c_i = \\sum_{j<i} K_{ij} r_j` follows the recurrence
:math:`c_i = e^{-\\sqrt2 (p_i - p_{i-1})/\\nu} (c_{i-1} + r_{i-1})` (factors at most
1: stable; ties exact) and the pair sum is :math:`4 \\sum_i r_i c_i`. The resamples
use the same sorted order (their points are copies of the observations).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import kernel_calibration as _kc
from bayescal._src import validation as _v
from bayescal._src import xla_options
from bayescal._src.host import (
    _F32,
    _bootstrap_on_host,
    _bucket_padded,
    _floats,
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
from bayescal.classification._host import _class_labels
from bayescal.classification._inputs import binary_inputs, multiclass_compiler_options

__all__ = ["KernelCalibrationTest", "kernel_calibration_error", "kernel_calibration_test"]

# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "y_prob": 0, "counts": 0}


class KernelCalibrationTest(NamedTuple):
    """The SKCE estimate, the p-value of the calibration test and the bandwidth.

    Attributes
    ----------
    statistic : Array, scalar
        The estimate of the squared kernel calibration error (``estimator``'s).
    p_value : Array, scalar
        One-sided p-value of "the model is calibrated" (large SKCE rejects).
    bandwidth : Array, scalar
        The kernel's length scale :math:`\\nu` used.
    """

    statistic: jax.Array
    p_value: jax.Array
    bandwidth: jax.Array


# --------------------------------------------------------------------------- inputs
def _inputs(y_true: Any, y_prob: Any) -> tuple[jax.Array, jax.Array, bool]:
    """Probabilities ``[N, C]``, residuals ``e_y - p`` ``[N, C]`` and whether the input
    was binary: ``[N]`` probabilities of class 1 become the two classes ``(1 - p, p)``."""
    p = _v.as_float_array(y_prob, "y_prob")
    if p.ndim == 1:
        y, p = binary_inputs(y_true, y_prob)
        return jnp.stack([1 - p, p], axis=1), jnp.stack([p - y, y - p], axis=1), True
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(
            f"y_prob must be [N] probabilities of class 1 or [N, C] class probabilities "
            f"with C >= 2; got shape {tuple(p.shape)}."
        )
    _v.check_nonempty(p, "y_prob")
    y = _v.check_class_labels(y_true, "y_true", p.shape[1])
    if y.ndim != 1 or y.shape[0] != p.shape[0]:
        raise ValueError(
            f"y_true has shape {tuple(y.shape)} but y_prob has shape {tuple(p.shape)}; "
            "pass one integer label per row of y_prob."
        )
    _v.check_in_unit_interval(p, "y_prob", "class probabilities")
    tol = 1e-4 if p.dtype == jnp.float32 else 1e-8
    _v.check_row_sums(p, "y_prob", tol * p.shape[1])
    return p, jax.nn.one_hot(y, p.shape[1], dtype=p.dtype) - p, False


# --------------------------------------------------------------------------- kernels
def _dist(a: jax.Array, b: jax.Array, xp: Any = jnp) -> jax.Array:
    return xp.sqrt(xp.sum((a - b) ** 2, axis=-1))


#: Up to this many classes the tiles' distances and residual products are sums of
#: ``[T, T]`` terms, one per class (one loop over the tile: 3x faster at C = 5 than
#: the ``[T, T, C]`` difference and the ``[T, C] @ [C, T]`` product, 0.054 vs 0.15 s
#: for the bootstrap's pairs at N = 10,240, 2-core CPU machine).
_UNROLL_CLASSES = 16


def _tile_terms(pr, pc, rr=None, rc=None):
    """``||p_a - p_b||_2`` ``[T, T]`` of two tiles of probabilities ``[T, C]`` and,
    with residuals, ``r_a . r_b`` ``[T, T]``."""
    c = pr.shape[1]
    if c > _UNROLL_CLASSES:
        dist = _dist(pr[:, None, :], pc[None, :, :])
        return dist if rr is None else (dist, rr @ rc.T)
    dist = jnp.sqrt(sum((pr[:, k, None] - pc[None, :, k]) ** 2 for k in range(c)))
    if rr is None:
        return dist
    return dist, sum(rr[:, k, None] * rc[None, :, k] for k in range(c))


def _h(a, b, nu, xp=jnp):
    """The pair function of (probabilities, residuals) pairs, broadcasting; ``xp``:
    ``jax.numpy`` (the kernel) or ``numpy`` (the host twin)."""
    (pa, ra), (pb, rb) = a, b
    return xp.exp(-_dist(pa, pb, xp) / nu) * xp.sum(ra * rb, axis=-1)


def _bandwidth(p, w, bandwidth):
    if bandwidth is not None:
        return jnp.asarray(bandwidth, p.dtype)
    return _kc.median_distance(p, _kc.real_count(w), _dist)


def _pair_tile(c: int) -> int:
    """Tiles of at most ``BLOCK_VALUES`` ``[T, T, C]`` distance terms."""
    return min(_kc.PAIR_TILE, math.isqrt(_kc.BLOCK_VALUES // c))


def _offdiag(p: jax.Array, r: jax.Array, nu: jax.Array) -> jax.Array:
    """``sum_{a != b} K_ab r_a . r_b`` for each of the ``B`` columns of ``r`` [N, C,
    B]: ``K`` is symmetric, so twice the sum over the tiles of the upper triangle
    (:func:`~bayescal._src.kernel_calibration.upper_tiles`, a ``[T, T] @ [T, C B]``
    product per tile)."""
    size, c, b = r.shape
    flat = r.reshape(size, c * b)

    def one(rows, cols, upper):
        (pr, fr), (pc, fc) = rows, cols
        k = jnp.where(upper, jnp.exp(-_tile_terms(pr, pc) / nu), 0)
        return jnp.sum((fr * (k @ fc)).reshape(-1, c, b), axis=(0, 1))

    return 2 * _kc.upper_tiles(one, (p, flat), _pair_tile(c))


def _quad(p: jax.Array, r: jax.Array, nu: jax.Array) -> jax.Array:
    """``sum_{a,b} K_ab r_a . r_b`` for each of the ``B`` columns of ``r`` [N, C, B]:
    :func:`_offdiag` plus ``sum_a ||r_a||^2`` (``K_aa = 1``)."""
    return _offdiag(p, r, nu) + jnp.sum(r * r, axis=(0, 1))


def _binary_cross(p, w, order, r1, nu):
    """``sum_{a != b} K_ab R_a . R_b`` of a binary input, exactly in ``O(N log N)``:
    for the two classes ``(1 - p, p)``, ``||p_a - p_b||_2 = sqrt(2) |p_a - p_b|`` and
    ``R_a . R_b = 2 r_a r_b`` (``r`` class 1's residuals, [N] or [N, B]), so the sum is
    twice a 1-D Laplacian kernel sum over the observations sorted by ``p``."""
    scale = jnp.sqrt(jnp.asarray(2.0, p.dtype)) / nu
    return 2 * _kc.laplace_cross(p[order, 1], w[order], r1[order], scale)


def _unbiased(p, r, w, nu, binary=False):
    n = _kc.real_count(w).astype(p.dtype)
    if binary:
        order = _kc.sort_order(p[:, 1], w)
        return _binary_cross(p, w, order, r[:, 1] * w, nu) / (n * (n - 1))
    return _offdiag(p, (r * w[:, None])[:, :, None], nu)[0] / (n * (n - 1))


def _error_pairs(x, nu):
    """The host path's program for the unbiased multiclass SKCE: ``sum_{a != b} K_ab
    R_a . R_b`` of the probabilities and the residuals ``x`` (zero for the padding;
    ``host.kernel_calibration_error_classification``)."""
    p, r = x
    return _offdiag(p, r[:, :, None], nu)[0]


def _bootstrap_pairs(x, v):
    """The host path's program for one pass of the bootstrap test:
    ``kernel_calibration.bootstrap_sums`` of the probabilities and residuals with the
    weights and counts ``v``, and the ``h_ii = ||r_i||^2``."""
    (p, r), nu = x
    sums = _kc.bootstrap_sums(_h_tile(nu), (p, r), v, tile=_pair_tile(p.shape[1]))
    return sums, jnp.sum(r * r, axis=1)


def _linear(p, r, w, nu):
    return _kc.linear_terms(functools.partial(_h, nu=nu), (p, r), w)


@functools.partial(jax.jit, static_argnames=("estimator", "binary"))
def _error_kernel(p, r, w, bandwidth, *, estimator, binary=False):
    w = jnp.ones(p.shape[:1], p.dtype) if w is None else w
    nu = _bandwidth(p, w, bandwidth)
    if estimator == "unbiased":
        return _unbiased(p, r, w, nu, binary).astype(p.dtype)
    return _kc.linear_estimate(*_linear(p, r, w, nu)).astype(p.dtype)


# Resamples drawn and summed per batch: ``N * C * batch`` values at most.
def _resample_batch(size: int, c: int, num_samples: int) -> int:
    return max(1, min(num_samples, _kc.BLOCK_VALUES // (size * c)))


def _consistency_samples(key, p, r, w, nu, num_samples, binary=False):
    """The unbiased SKCE of the data and then of ``num_samples`` consistency resamples
    (Broecker & Smith 2007; Widmann et al. 2019, section 5): predictions drawn with
    replacement from the real observations, labels drawn from them, so every resample
    is calibrated. ``[1 + num_samples]``, the data's estimate first: its residuals are
    one more column of the resamples' products, so each tile's kernel matrix is
    computed once for all of them (the data's own pair sum computed it again).

    A resample's points are copies of the observations, so its pair sum is
    ``sum_{a,b} K_ab R_a . R_b`` over the observations, ``R_a`` the sum of the
    residuals of ``a``'s copies, less the copies' own ``sum ||res||^2``; binary inputs
    compute it exactly in ``O(N log N)`` with the observations' one sorted order."""
    size, c = p.shape
    n = _kc.real_count(w)
    nf = n.astype(p.dtype)
    real = (w > 0).astype(p.dtype)
    total = num_samples + 1
    batch = _resample_batch(size, c, total)
    nbatches = -(-total // batch)
    data = r * w[:, None]

    def draw(b):
        # resample b's draws depend on (key, b) and the index of the observation only,
        # so a padded bucket gives the real observations the unpadded call's draws
        k1, k2 = jax.random.split(jax.random.fold_in(key, b - 1))
        u1 = jax.random.uniform(k1, (size,), p.dtype)
        u2 = jax.random.uniform(k2, (size,), p.dtype)
        idx = jnp.minimum(jnp.floor(u1 * nf).astype(jnp.int32), n - 1)
        q = p[idx]
        cum = jnp.cumsum(q, axis=1)
        label = jnp.minimum(jnp.sum(cum < (u2 * cum[:, -1])[:, None], axis=1), c - 1)
        res = (jax.nn.one_hot(label, c, dtype=p.dtype) - q) * real[:, None]
        agg = jnp.zeros((size, c), p.dtype).at[idx].add(res)
        agg, res = jnp.where(b == 0, data, agg), jnp.where(b == 0, data, res)
        return agg, jnp.sum(res * res)

    order = _kc.sort_order(p[:, 1], w) if binary else None

    def one(i):
        ids = i * batch + jnp.arange(batch)
        agg, diag = jax.vmap(draw)(ids)  # [batch, N, C], [batch]
        if binary:
            r1 = agg[:, :, 1].T  # [N, batch]
            same = 2 * jnp.sum(r1 * r1, axis=0) - diag  # pairs of copies of one point
            return (_binary_cross(p, w, order, r1, nu) + same) / (nf * (nf - 1))
        quad = _quad(p, jnp.moveaxis(agg, 0, -1), nu)
        return (quad - diag) / (nf * (nf - 1))

    return jax.lax.map(one, jnp.arange(nbatches)).reshape(-1)[:total]


def _h_tile(nu):
    """The ``[T, T]`` pair values of two tiles of (probabilities, residuals)."""

    def h(rows, cols):
        (pr, rr), (pc, rc) = rows, cols
        dist, dot = _tile_terms(pr, pc, rr, rc)
        return jnp.exp(-dist / nu) * dot

    return h


@functools.partial(
    jax.jit, static_argnames=("estimator", "num_samples", "binary", "method")
)
def _test_kernel(
    key, p, r, w, bandwidth, counts=None, *, estimator, num_samples, binary=False,
    method="consistency",
):
    w = jnp.ones(p.shape[:1], p.dtype) if w is None else w
    nu = _bandwidth(p, w, bandwidth)
    if estimator == "linear":
        stat, pv = _kc.linear_test(*_linear(p, r, w, nu))
    elif method == "bootstrap":
        diag = jnp.sum(r * r, axis=1)  # h_ii = kappa(p_i, p_i) ||r_i||^2, kappa = 1
        stat, pv = _kc.bootstrap_test(
            _h_tile(nu), (p, r), diag, w, key, num_samples, counts, tile=_pair_tile(p.shape[1])
        )
    else:
        both = _consistency_samples(key, p, r, w, nu, num_samples, binary)
        stat, samples = both[0], both[1:]
        pv = (1 + jnp.sum(samples >= stat)) / (1 + num_samples)
    return KernelCalibrationTest(stat.astype(p.dtype), pv.astype(p.dtype), nu)


# --------------------------------------------------------------------------- public
def _length(y_true: Any, y_prob: Any) -> int | None:
    """The number of rows of ``y_prob`` (for the minimum-length checks), after the
    masked-array refusal that the validated call would give."""
    _v.reject_masked(y_true, "y_true")
    _v.reject_masked(y_prob, "y_prob")
    shape = _kc.shape_of(y_prob)
    return int(shape[0]) if shape else None


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=multiclass_compiler_options)
def _kce(y_true, y_prob, *, estimator, bandwidth):
    p, r, binary = _inputs(y_true, y_prob)
    w = _v.mask_weights(None, p.shape[:1], p.dtype)
    return _error_kernel(p, r, w, bandwidth, estimator=estimator, binary=binary)


# --------------------------------------------------------------------------- host twins
_SKCE_MAX = 1 << 20  # probabilities: the host only converts them and takes the median
#: The linear test's terms on the host up to this many observations: binary, warm,
#: 2-core CPU machine (2026-11-29), host 8.5 / 16 / 69 ms against the kernel's 14 /
#: 7.3 / 14 ms at N = 1e5 / 2^18 / 1e6.
_LINEAR_MAX = 1 << 17


def _classification_skce_inputs(y_prob: Any, bandwidth: Any) -> tuple[np.ndarray, float] | None:
    """Checked probabilities (``[N]`` or ``[N, C]``, ``N >= 2``) and the bandwidth
    (the median heuristic where not given), or None."""
    p = _floats(y_prob, _SKCE_MAX)
    if p is None or p.ndim not in (1, 2) or p.shape[0] < 2:
        return None
    if p.ndim == 2 and p.shape[1] < 2:
        return None
    if not _normal(p, 0.0, 1.0):
        return None
    nu = _kernel_bandwidth(bandwidth)
    if nu is None and bandwidth is not None:
        return None
    if nu is None:
        nu = _median_heuristic(np.stack([1 - p, p], axis=1) if p.ndim == 1 else p)
    return p, nu


def _classification_pairs(y_true: Any, p: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The probabilities ``[N, C]`` and residuals ``e_y - p`` of checked
    probabilities ``p`` (binary ``[N]``: the two classes ``(1 - p, p)``), as the
    kernel's ``_inputs`` computes them, or None where the labels or the rows' sums
    fail the kernel's checks."""
    n = p.shape[0]
    if p.ndim == 1:
        y = _vector(y_true, _SKCE_MAX)  # as many as the probabilities
        if y is None or y.shape != p.shape or not ((y == 0) | (y == 1)).all():
            return None
        y = y.astype(p.dtype)
        return np.stack([1 - p, p], axis=1), np.stack([p - y, y - p], axis=1)
    c = p.shape[1]
    labels = _class_labels(y_true, n, c)
    tol = (1e-4 if p.dtype == _F32 else 1e-8) * c  # validation.check_row_sums's
    if labels is None or not _v._HOST_PREDICATES["row_sums"](p, tol):
        return None
    return p, np.eye(c, dtype=p.dtype)[labels] - p


def _classification_linear_terms(
    y_true: Any, y_prob: Any, bandwidth: Any, minimum: int
) -> tuple[np.ndarray, float, Any] | None:
    """The linear SKCE's terms ``h_{2i, 2i+1}`` (float64) of checked probabilities
    (at least ``minimum`` rows), the bandwidth and the dtype, or None."""

    if np.shape(y_prob)[:1] > (_LINEAR_MAX,):
        return None
    data = _classification_skce_inputs(y_prob, bandwidth)
    if data is None or data[0].shape[0] < minimum:
        return None
    p, nu = data
    pairs = _classification_pairs(y_true, p)
    if pairs is None:
        return None
    # the kernel's bandwidth rounded to the inputs' dtype, the kernel's formula
    terms = _linear_pairs(functools.partial(_h, nu=float(np.asarray(nu, p.dtype)), xp=np), pairs)
    return terms, nu, p.dtype


def _twin_kernel_calibration_error_classification(
    y_true: Any, y_prob: Any, *, estimator: Any = "unbiased", bandwidth: Any = None
) -> Any:
    """:func:`bayescal.classification.kernel_calibration_error`: the linear estimator
    on the host (O(N)); the unbiased estimator with the median heuristic computed
    here, and for multiclass inputs also the residuals, the pair sum alone compiled
    (``kernel_calibration.host_program``: no sort and no value checks in the
    program); binary inputs' O(N log N) sum in the validated program."""
    from bayescal.classification import _kernel as _ck

    if estimator == "linear":
        linear = _classification_linear_terms(y_true, y_prob, bandwidth, 2)
        return None if linear is None else _result(linear[0].mean(), linear[2])
    data = _classification_skce_inputs(y_prob, bandwidth) if estimator == "unbiased" else None
    if data is None:
        return None
    p, nu = data
    if p.ndim == 1:
        return _ck._error_program("unbiased", True)(
            y_true, p, estimator="unbiased", bandwidth=_scalar_array(nu, p.dtype)
        )
    pairs = _classification_pairs(y_true, p)
    if pairs is None:
        return None
    (pp, r), w = _bucket_padded(pairs, p.shape[0])
    args = ((pp, r * w[:, None]), p.dtype.type(nu))
    return _unbiased_on_host(_ck._error_pairs, args, p.shape[0], p.dtype, _ck._pair_sum_options)


def _twin_kernel_calibration_test_classification(
    y_true: Any,
    y_prob: Any,
    *,
    estimator: Any = "linear",
    bandwidth: Any = None,
    key: Any = None,
    num_samples: Any = 500,
    method: Any = "auto",
) -> Any:
    """:func:`bayescal.classification.kernel_calibration_test`: the linear test on
    the host (the normal approximation of ``kernel_calibration.linear_test``); the
    unbiased test with the median heuristic and the bootstrap's counts computed here,
    the rest in the kernel: the bootstrap's pair sums alone compiled
    (:func:`_bootstrap_on_host`) where the counts were drawn here, else the validated
    program (without sort and random bits, about half the compilation)."""
    from bayescal._src.kernel_calibration import METHODS
    from bayescal.classification import _kernel as _ck

    if method not in METHODS:
        return None  # the public function's check names it
    if estimator == "linear":
        linear = _classification_linear_terms(y_true, y_prob, bandwidth, 4)
        if linear is None:
            return None
        terms, nu, dtype = linear
        return _ck.KernelCalibrationTest(*(_result(v, dtype) for v in (*_linear_test(terms), nu)))
    data = _classification_skce_inputs(y_prob, bandwidth) if estimator == "unbiased" else None
    if data is None:
        return None
    p, nu = data
    classes = 0 if p.ndim == 1 else p.shape[1]
    first = p if p.ndim == 1 else p[:, 0]
    draws = _unbiased_draws(key, num_samples, method, _ck.AUTO_BUDGET, first, classes)
    if draws is None:
        return None
    k, how, counts = draws
    pairs = None if counts is None else _classification_pairs(y_true, p)
    if pairs is None or counts is None:
        return _ck._test_program("unbiased", how, p.ndim == 1)(
            y_true, p, k, counts, estimator="unbiased",
            bandwidth=_scalar_array(nu, p.dtype), num_samples=num_samples, method=how,
        )
    x, w = _bucket_padded(pairs, p.shape[0])
    uq, pv = _bootstrap_on_host(
        _ck._bootstrap_pairs, (x, p.dtype.type(nu)), w, counts, _ck._pair_sum_options
    )
    return _ck.KernelCalibrationTest(*(_result(v, p.dtype) for v in (uq, pv, nu)))


@host_first(_twin_kernel_calibration_error_classification)
def kernel_calibration_error(
    y_true: Any,
    y_prob: Any,
    *,
    estimator: str = "unbiased",
    bandwidth: float | None = None,
) -> jax.Array:
    r"""Squared kernel calibration error (SKCE) of Widmann, Lindsten & Zachariah (2019).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels 0/1 (with ``y_prob`` of shape [N]) or integer class labels in
        ``0 .. C-1`` (with ``y_prob`` of shape [N, C]).
    y_prob : array_like, shape [N] or [N, C]
        Predicted probabilities of class 1, or class probabilities (rows sum to 1).
    estimator : {"unbiased", "linear"}, default "unbiased"
        ``"unbiased"``: the quadratic U-statistic over all pairs (the paper's
        :math:`\widehat{\mathrm{SKCE}}_{uq}`; binary: exactly, in O(N log N) by
        sorting; multiclass: O(N^2) time, O(N) memory in blocks);
        ``"linear"``: the linear-time :math:`\widehat{\mathrm{SKCE}}_{ul}` over the
        disjoint pairs ``(0, 1), (2, 3), ...`` (unbiased too, with more variance;
        depends on the order of the observations).
    bandwidth : float > 0, optional
        The kernel's length scale :math:`\nu`. Default: the median heuristic, the
        median of :math:`\lVert p_i - p_j \rVert_2` over the pairs ``i < j`` (of at
        most 512 observations spread over the data, ``floor(k N / 512)``, when
        ``N > 512``); the mean distance when the median is 0.

    Returns
    -------
    Array, scalar
        The estimate in ``y_prob``'s dtype; it can be negative (it is unbiased), and
        its expectation is 0 exactly when the model is calibrated (the kernel is
        characteristic).

    See Also
    --------
    kernel_calibration_test : The calibration test on this estimate.

    Notes
    -----
    With the matrix-valued kernel :math:`k(p, p') = \exp(-\lVert p - p'\rVert_2 / \nu)
    I_C` (the paper's exponential kernel) and :math:`e_y` the one-hot label,

    .. math:: h_{ij} = \exp(-\lVert p_i - p_j\rVert_2 / \nu)\,
              (e_{y_i} - p_i)^\top (e_{y_j} - p_j),

    :math:`\widehat{\mathrm{SKCE}}_{uq} = \binom N2^{-1} \sum_{i<j} h_{ij}` and
    :math:`\widehat{\mathrm{SKCE}}_{ul} = \lfloor N/2\rfloor^{-1} \sum_{i}
    h_{2i, 2i+1}` (0-based; Widmann et al. 2019, eqs. in section 4 and Lemma 3). A
    binary ``y_prob`` is the two-class case :math:`(1 - p, p)`, so the value equals
    that of ``y_prob=[1 - p, p]`` with the same labels (to float rounding). For it,
    :math:`\lVert p_i - p_j\rVert_2 = \sqrt 2 |p_i - p_j|` and the residuals'
    product is :math:`2 (y_i - p_i)(y_j - p_j)`: the pair sum is a 1-D Laplacian
    kernel sum, computed exactly in O(N log N) by sorting ``y_prob`` and one linear
    recurrence (a scan) over the sorted values. ``jax.jit`` and ``jax.vmap`` work;
    there invalid values give NaN.

    References
    ----------
    Widmann, D., Lindsten, F. and Zachariah, D. (2019). Calibration tests in
    multi-class classification: a unifying framework. *NeurIPS* 32.

    Examples
    --------
    >>> from bayescal.classification import kernel_calibration_error
    >>> y, p = [0, 1, 1, 0, 1, 0], [0.1, 0.8, 0.6, 0.3, 0.9, 0.2]
    >>> round(float(kernel_calibration_error(y, p, bandwidth=0.5)), 4)
    0.0045
    >>> round(float(kernel_calibration_error(y, p, estimator="linear", bandwidth=0.5)), 4)
    -0.0379
    """
    est = _kc.check_estimator(estimator)
    bw = _kc.check_bandwidth(bandwidth)
    length = _length(y_true, y_prob)
    if length is not None:
        _kc.check_min_length(length, "y_prob", 2, "the kernel calibration error")
    if _pair_sums(est, _classes(y_prob) == 0):
        _kc.check_pair_budget(length, "y_prob", "the unbiased estimator of several classes")
    return _error_program(est, _classes(y_prob) == 0)(
        y_true, y_prob, estimator=est, bandwidth=bw
    )


def _pair_sum_options(size: int) -> dict[str, Any]:
    """The O(N^2) pair sums run 7x faster in XLA's optimised code
    (:func:`~bayescal._src.xla_options.pair_sum_options`; the multiclass programs at
    N = 10,240, C = 5, B = 20: bootstrap 0.062 vs 0.44 s warm for 0.19 vs 0.09 s of
    compilation, consistency 0.079 vs 0.57 s for 0.25 vs 0.11 s; 2-core CPU machine):
    quick compiles only for tiny inputs (at most 4,096 values)."""
    if size <= 1 << 12:
        return multiclass_compiler_options(size, large=True)
    return xla_options.pair_sum_options(size)


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=multiclass_compiler_options)
def _kct(y_true, y_prob, key, counts=None, *, estimator, bandwidth, num_samples, method):
    """``counts``: the bootstrap's resample counts [N, B] drawn by the caller (the host
    path), or None: drawn here from ``key``."""
    p, r, binary = _inputs(y_true, y_prob)
    w = _v.mask_weights(None, p.shape[:1], p.dtype)
    return _test_kernel(
        key, p, r, w, bandwidth, counts, estimator=estimator, num_samples=num_samples,
        binary=binary, method=method,
    )


#: The error's and the test's programs that sum O(N^2) pairs (other XLA options than
#: the linear-time ones': :func:`_pair_sums`).
_kce_pairs = _v.validated(
    _kce.__wrapped__,  # type: ignore[attr-defined]
    fuse=True, bucket=_BUCKET, compiler_options=_pair_sum_options
)
_kct_pairs = _v.validated(
    _kct.__wrapped__,  # type: ignore[attr-defined]
    fuse=True, bucket=_BUCKET, compiler_options=_pair_sum_options
)


def _pair_sums(estimator: str, binary: bool, bootstrap: bool = False) -> bool:
    """Whether a call sums O(N^2) pairs (the unbiased estimator of multiclass inputs,
    and the bootstrap test): then it runs the ``_pairs`` programs. Binary inputs'
    unbiased estimator and consistency test are O(N log N)."""
    return estimator == "unbiased" and (bootstrap or not binary)


def _error_program(estimator: str, binary: bool) -> Any:
    """The error's validated program."""
    return _kce_pairs if _pair_sums(estimator, binary) else _kce


def _test_program(estimator: str, method: str, binary: bool) -> Any:
    """The test's validated program for the resolved ``method``."""
    return _kct_pairs if _pair_sums(estimator, binary, method == "bootstrap") else _kct


#: ``method="auto"`` resamples multiclass inputs by consistency while ``num_samples
#: * C * N^2`` is at most this (~0.02 s warm on the 2-core CPU machines: 0.08 s for
#: 20 x 5 x 10^8 at N = 10,000, C = 5, where the bootstrap takes 0.06 s), and by the
#: bootstrap beyond (its program also compiles faster: 0.19 vs 0.25 s).
AUTO_BUDGET = 1 << 31


def _classes(y_prob: Any) -> int | None:
    """0 for binary probabilities [N], ``C`` for [N, C], None for another shape (the
    input checks report it)."""
    shape = _kc.shape_of(y_prob)
    if shape is None or len(shape) not in (1, 2):
        return None
    return 0 if len(shape) == 1 else int(shape[1])


@host_first(_twin_kernel_calibration_test_classification)
def kernel_calibration_test(
    y_true: Any,
    y_prob: Any,
    *,
    estimator: str = "linear",
    bandwidth: float | None = None,
    key: Any = None,
    num_samples: int = 500,
    method: str = "auto",
) -> KernelCalibrationTest:
    r"""Calibration test on the squared kernel calibration error (Widmann et al. 2019).

    Parameters
    ----------
    y_true, y_prob : array_like
        As in :func:`kernel_calibration_error` (binary [N] or multiclass [N, C]).
    estimator : {"linear", "unbiased"}, default "linear"
        ``"linear"``: the linear estimator with the p-value of its asymptotic normal
        distribution, O(N) time, no randomness. ``"unbiased"``: the quadratic
        estimator (more powerful) with a resampling p-value (``method``); needs
        ``key``.
    bandwidth : float > 0, optional
        The kernel's length scale; default the median heuristic (see
        :func:`kernel_calibration_error`).
    key : PRNG key or int, optional
        Randomness of the resamples (``estimator="unbiased"`` only).
    num_samples : int >= 1, default 500
        Number of resamples (``estimator="unbiased"`` only).
    method : {"auto", "bootstrap", "consistency"}, default "auto"
        The p-value of the unbiased test (``estimator="unbiased"`` only).
        ``"consistency"``: consistency resampling, which draws new labels for every
        resample: O(B N + N log N) for binary inputs, O(B C N^2) multiply-adds for
        ``C`` classes; the more powerful test at small N. ``"bootstrap"``: the
        asymptotic test of Widmann et al. (CalibrationTests.jl's
        ``AsymptoticSKCETest``), which resamples the data's own pair values, O((B +
        C) N^2). ``"auto"``: ``"consistency"`` for binary inputs, and for ``C``
        classes while ``num_samples * C * N^2 <= 2^31`` (e.g. N <= 926 with 500
        resamples and 5 classes), else ``"bootstrap"``.

    Returns
    -------
    KernelCalibrationTest
        ``(statistic, p_value, bandwidth)``, scalars in ``y_prob``'s dtype.

    See Also
    --------
    kernel_calibration_error : The estimates.
    spiegelhalter_z, hosmer_lemeshow, calibration_slope_intercept : Binary tests.

    Notes
    -----
    ``"linear"``: with :math:`m = \lfloor N/2\rfloor` terms
    :math:`h_{2i, 2i+1}` of mean :math:`\widehat{\mathrm{SKCE}}_{ul}` and sample
    standard deviation :math:`\hat s`, :math:`\sqrt m\,\widehat{\mathrm{SKCE}}_{ul} /
    \hat s` is asymptotically standard normal under calibration (Widmann et al. 2019,
    Lemma 3 and section 5); the p-value is one-sided, :math:`1 - \Phi(z)`. It needs
    N >= 4.

    ``"unbiased"`` with ``method="consistency"`` (Broecker & Smith 2007; Widmann et
    al. 2019, section 5): each resample draws N predictions with replacement from the
    data and a label from each drawn prediction, so it is calibrated by construction;
    the p-value is :math:`(1 + \#\{T_b \ge T\}) / (1 + B)` over the ``B``
    resamples' :math:`\widehat{\mathrm{SKCE}}_{uq}`. Cost O(B N^2) for multiclass
    inputs; binary inputs are computed exactly in O(B N + N log N) (one sort, shared
    by the resamples; see :func:`kernel_calibration_error`).

    ``"unbiased"`` with ``method="bootstrap"`` (Widmann et al. 2019, section 5;
    Arcones & Gine 1992): under calibration :math:`\widehat{\mathrm{SKCE}}_{uq}` is
    a degenerate U-statistic, whose distribution the bootstrap of the kernel centred
    at the empirical distribution estimates. With :math:`H_{ij} = h_{ij}` over all
    pairs (the diagonal included), :math:`\widehat{\mathrm{SKCE}}_b = \sum_{i,j}
    h_{ij} / N^2` and resample counts :math:`c` (N draws with replacement), the
    statistic :math:`N \widehat{\mathrm{SKCE}}_{uq} / (N - 1) -
    \widehat{\mathrm{SKCE}}_b` is compared with :math:`T_b = (c^\top H c - \sum_i
    c_i h_{ii}) / (N (N - 1)) - 2\, c^\top H 1 / N^2` (CalibrationTests.jl's form);
    the p-value is :math:`(1 + \#\{T_b \ge T\}) / (1 + B)`.

    The sizes of the tests at the 5% level are checked by simulation in the tests.
    ``jax.jit`` and ``jax.vmap`` work (``key`` must then be a key).

    References
    ----------
    Widmann, D., Lindsten, F. and Zachariah, D. (2019). Calibration tests in
    multi-class classification: a unifying framework. *NeurIPS* 32.

    Arcones, M. A. and Gine, E. (1992). On the bootstrap of U and V statistics.
    *The Annals of Statistics* 20, 655-674.

    Broecker, J. and Smith, L. A. (2007). Increasing the reliability of reliability
    diagrams. *Weather and Forecasting* 22, 651-661.

    Examples
    --------
    >>> from bayescal.classification import kernel_calibration_test
    >>> y, p = [0, 1, 1, 0, 1, 0, 0, 1], [0.1, 0.8, 0.6, 0.3, 0.9, 0.2, 0.4, 0.7]
    >>> t = kernel_calibration_test(y, p, bandwidth=0.5)
    >>> round(float(t.statistic), 4), round(float(t.p_value), 3)
    (-0.0541, 0.973)
    >>> t = kernel_calibration_test(y, p, estimator="unbiased", key=0, num_samples=99)
    >>> 0 < float(t.p_value) <= 1
    True
    """
    est = _kc.check_estimator(estimator)
    bw = _kc.check_bandwidth(bandwidth)
    how = _kc.check_method(method)
    length = _length(y_true, y_prob)
    k, num = _kc.test_draws(est, key, num_samples, length, "y_prob")
    classes = _classes(y_prob)
    if est == "linear":  # the linear test draws nothing: one program for every method
        how = "consistency"
    else:
        how = _kc.resolve_method(how, length, num, AUTO_BUDGET, classes)
    if _pair_sums(est, classes == 0, how == "bootstrap"):
        _kc.check_pair_budget(length, "y_prob", "the unbiased test")
    run = _test_program(est, how, classes == 0)
    return run(y_true, y_prob, k, estimator=est, bandwidth=bw, num_samples=num, method=how)
