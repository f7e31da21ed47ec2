"""NumPy twins of the classification functions and calibrators (the host path).

Small concrete inputs on a CPU are answered here (see :mod:`bayescal._src.host` for
the rule, the switch and the shared array helpers); each twin returns None for
anything it is not sure about, and the kernel path then decides. Equal to the kernels
(tests/test_host_path.py).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import numpy as np

from bayescal._src import newton as _newton
from bayescal._src import validation as _v
from bayescal._src.host import (
    _BAD,
    _F32,
    _F64,
    _NORMS,
    _REDUCTIONS,
    HOST_MAX,
    _bootstrap_on_host,
    _bucket_padded,
    _device,
    _floats,
    _flushed,
    _interp,
    _kernel_bandwidth,
    _key_words,
    _knots,
    _limits,
    _linear_pairs,
    _linear_test,
    _median_heuristic,
    _normal,
    _observation_weights,
    _reduce,
    _result,
    _scalar,
    _scalar_array,
    _threefry2x32,
    _unbiased_draws,
    _unbiased_on_host,
    _vector,
)
from bayescal._src.validation import host_resident

#: At most this many bins on the host (a larger count may be refused by the kernel path).
_MAX_BINS = 1000


def _binary(
    y_true: Any, x: Any, weights: Any, probabilities: bool, limit: int = HOST_MAX
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Valid labels, predictions and weights, in the predictions' dtype, or None."""
    p, y = _vector(x, limit), _vector(y_true, limit)
    if p is None or y is None or y.shape != p.shape or not ((y == 0) | (y == 1)).all():
        return None
    if not (_normal(p, 0, 1) if probabilities else _normal(p)):
        return None
    w = _observation_weights(weights, p, limit)
    if w is _BAD:
        return None
    return y.astype(p.dtype), p, w


def brier_score(
    y_true: Any,
    y_prob: Any = None,
    *,
    logits: Any = None,
    weights: Any = None,
    reduction: str = "mean",
) -> jax.Array | None:
    """:func:`bayescal.classification.brier_score` on the host."""
    if (y_prob is None) == (logits is None) or reduction not in _REDUCTIONS:
        return None
    is_logit = logits is not None
    data = _binary(y_true, logits if is_logit else y_prob, weights, not is_logit)
    if data is None:
        return None
    y, p, w = data
    dtype = p.dtype
    if is_logit:
        p = 0.5 + 0.5 * np.tanh(0.5 * p.astype(np.float64))  # the sigmoid
    return _reduce((p - y) ** 2, w, reduction, dtype)


def log_loss(
    y_true: Any,
    y_prob: Any = None,
    *,
    logits: Any = None,
    eps: Any = None,
    weights: Any = None,
    reduction: str = "mean",
) -> jax.Array | None:
    """:func:`bayescal.classification.log_loss` on the host."""
    if (y_prob is None) == (logits is None) or reduction not in _REDUCTIONS:
        return None
    is_logit = logits is not None
    if eps is not None and (is_logit or type(eps) is not float or not 0 < eps < 0.5):
        return None
    data = _binary(y_true, logits if is_logit else y_prob, weights, not is_logit)
    if data is None:
        return None
    y, x, w = data
    dtype = x.dtype
    # In the input's dtype, as the kernel (the sums in float64, in _reduce).
    if is_logit:  # y softplus(-z) + (1 - y) softplus(z)
        loss = np.logaddexp(0.0, np.where(y == 1, -x, x))
    else:
        if eps is not None:  # reduce.clip_unit
            one = dtype.type(1)
            hi = min(dtype.type(1 - eps), np.nextafter(one, dtype.type(0)))
            x = np.clip(x, max(dtype.type(eps), np.finfo(dtype).tiny), hi)
        loss = -np.where(y == 1, np.log(x), np.log1p(-x))
    return _reduce(loss, w, reduction, dtype)


def _edges(bins: Any, strategy: Any, p: np.ndarray) -> np.ndarray | None:
    """``_inputs.resolve_bins`` and the kernel's edges, in ``p``'s dtype, or None."""
    if isinstance(bins, int | np.integer) and not isinstance(bins, bool | np.bool_):
        if not 1 <= bins <= _MAX_BINS:
            return None
        if strategy == "quantile":
            return _quantile_edges(p, int(bins))
        if strategy != "uniform":
            return None
        return _uniform_edges(int(bins), p.dtype)
    if strategy != "uniform":
        return None
    if isinstance(bins, str):
        if bins != "fd":
            return None
        from bayescal._src.binned import freedman_diaconis_edges

        edges = freedman_diaconis_edges(p).astype(p.dtype)
    else:
        edges = _floats(bins)
        if edges is None or edges.ndim != 1:
            return None
        edges = edges.astype(p.dtype)
    if not (2 <= edges.size <= _MAX_BINS + 1 and _normal(edges)):
        return None
    return edges if (edges[1:] >= edges[:-1]).all() else None


@functools.lru_cache(maxsize=64)
def _uniform_edges(k: int, dtype: np.dtype, last: float = 1.0) -> np.ndarray:
    """``binned.uniform_edges``: ``i / k`` correctly rounded in the dtype (read-only);
    ``last`` replaces the last one."""
    edges = (np.arange(k + 1, dtype=np.float64) / k).astype(dtype)
    edges[-1] = last
    edges.flags.writeable = False
    return edges


def _quantile_edges(p: np.ndarray, k: int) -> np.ndarray | None:
    """``binned.quantile_edges``: its CPU callback runs this same NumPy function."""
    from bayescal._src.binned import sorted_quantile_edges
    from bayescal._src.sorting import several_devices

    if several_devices():  # the kernel interpolates in XLA there
        return None
    edges = sorted_quantile_edges(np.sort(p), p.size, k)
    return edges if _normal(edges) else None  # a subnormal edge would compare as 0


def _bin_index(p: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``binning.bin_index``: bin ``k`` is ``[e_k, e_{k+1})``, the last one closed."""
    k = edges.size - 1
    if edges is not _uniform_edges(k, edges.dtype):
        # the number of inner edges at or below p (values outside: the end bins)
        return np.searchsorted(edges[1:-1], p, side="right")
    # Uniform edges: floor(p k), then one comparison each way with the rounded edges
    # (p k is off by less than one bin); 2-8x faster than the search from n = 1e4.
    idx = (p.astype(np.float64) * k).astype(np.intp)
    np.minimum(idx, k - 1, out=idx)  # p = 1: the last bin
    idx -= p < edges[idx]
    idx += p >= _uniform_edges(k, edges.dtype, np.inf)[idx + 1]  # the last bin is closed
    return idx


def _binned(
    y_true: Any, y_prob: Any, weights: Any, bins: Any, strategy: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray] | None:
    """Labels, probabilities, weights, the edges and each probability's bin, or None."""
    data = _binary(y_true, y_prob, weights, True)
    if data is None:
        return None
    y, p, w = data
    edges = _edges(bins, strategy, p)
    if edges is None:
        return None
    return y, p, w, edges, _bin_index(p, edges)


def expected_calibration_error(
    y_true: Any,
    y_prob: Any,
    *,
    bins: Any = 15,
    strategy: Any = "uniform",
    norm: Any = "l1",
    debias: Any = False,
    weights: Any = None,
    key: Any = None,
    num_samples: Any = 1000,
    method: Any = "bernoulli",
) -> jax.Array | None:
    """:func:`bayescal.classification.expected_calibration_error` (plug-in) on the host."""
    if (
        debias is not False
        or key is not None
        or norm not in _NORMS
        or method not in ("bernoulli", "normal")
        or type(num_samples) is not int
        or num_samples < 1
    ):
        return None
    data = _binned(y_true, y_prob, weights, bins, strategy)
    if data is None:
        return None
    y, p, w, edges, idx = data
    num = edges.size - 1
    # |ybar_k - pbar_k| n_k = |sum over bin k of (y - p)|, weighted: of w (y - p)
    resid = y.astype(np.float64) - p
    if w is None:
        weight = np.bincount(idx, minlength=num).astype(np.float64)
    else:
        weight = np.bincount(idx, w, num)
        resid *= w
    full = weight > 0
    weight = weight[full]
    gap = np.abs(np.bincount(idx, resid, num)[full]) / weight
    if norm == "max":
        return _result(gap.max(), p.dtype)
    share = weight / weight.sum()
    if norm == "l1":
        return _result(np.dot(share, gap), p.dtype)
    return _result(np.sqrt(np.dot(share, gap * gap)), p.dtype)


def fit_isotonic(
    y_true: Any, y_score: Any, *, weights: Any = None, prior: Any = None
) -> Any:
    """:func:`bayescal.classification.fit_isotonic` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted PAV)
    from bayescal._src.isotonic import _pav_row
    from bayescal._src.ties import pool_ties
    from bayescal.classification._calibrators import IsotonicCalibrator, _check_prior

    if prior is not None:
        a, b = _check_prior(prior)  # its ValueError: the kernel path raises it again

    data = _binary(y_true, y_score, None, probabilities=False)
    if data is None:
        return None
    y, s, _ = data
    pooled = pool_ties(s, y)
    fit = _pav_row(pooled.mean.astype(np.float64), pooled.weight.astype(np.float64))
    if prior is not None:  # Beta pseudo-counts on every level set, then PAV again
        weight = pooled.weight.astype(np.float64)
        block = np.cumsum(np.r_[True, fit[1:] != fit[:-1]]) - 1
        total = np.bincount(block, weight)
        mean = (np.bincount(block, weight * fit) + a) / (total + a + b)
        fit = _pav_row(mean, total + a + b)[block]
    pad = s.size - fit.size  # the kernel's fixed-size output repeats the last knot
    thresholds = np.concatenate([pooled.thresholds, np.repeat(pooled.thresholds[-1:], pad)])
    values = np.concatenate([fit, np.repeat(fit[-1:], pad)]).astype(s.dtype)
    return IsotonicCalibrator(_device(thresholds), _device(values))


def isotonic_apply(calibrator: Any, y_score: Any) -> Any:
    """``IsotonicCalibrator.__call__`` on the host."""
    s = _floats(y_score)
    if s is None or s.size == 0 or not _normal(s.reshape(-1)):
        return None
    knots = _knots(calibrator.thresholds, calibrator.values, dtype=s.dtype)
    if knots is None:
        return None
    return _device(_interp(s, *knots).astype(s.dtype))


# --------------------------------------------------------------------------- Venn-ABERS
# A lookup is a binary search per score (a few ms per 1e5 scores in NumPy): cheaper
# than compiling the kernel's searchsorted up to far larger inputs than HOST_MAX.
_VENN_MAX = 1 << 20


def _venn_tables(calibrator: Any, ndim: int) -> list[np.ndarray] | None:
    fields = (calibrator.thresholds, calibrator.p0_table, calibrator.p1_table)
    if not all(
        isinstance(a, jax.Array) and a.ndim == ndim and a.size and host_resident(a)
        for a in fields
    ):
        return None
    out = [np.asarray(a) for a in fields]
    if out[0].dtype not in (_F32, _F64) or any(a.dtype != out[0].dtype for a in out):
        return None
    return out


def venn_abers_apply(calibrator: Any, y_score: Any, output: str = "pair") -> Any:
    """``VennAbersCalibrator`` calls on the host (the kernel's searchsorted lookup)."""
    tables = _venn_tables(calibrator, 1)
    s = _floats(y_score, _VENN_MAX)
    if tables is None or s is None or s.size == 0 or not _normal(s.reshape(-1)):
        return None
    t, p0_table, p1_table = (a.astype(s.dtype) for a in tables)
    last = t.shape[-1] - 1  # XLA clamps the index past the end to the last slot
    p0 = p0_table[np.minimum(np.searchsorted(t, s, side="right"), last)]
    p1 = p1_table[np.minimum(np.searchsorted(t, s, side="left"), last)]
    if output == "probability":
        return _device((p1 / (1 - p0 + p1)).astype(s.dtype))
    if output == "interval":
        return _device(np.stack([p0, p1], axis=-1))
    return _device(p0), _device(p1)


def cross_venn_abers_apply(calibrator: Any, y_score: Any, output: str = "pair") -> Any:
    """``CrossVennAbersCalibrator`` calls on the host, for scores of shape [M, K]."""
    tables = _venn_tables(calibrator, 2)
    s = _floats(y_score, _VENN_MAX)
    if tables is None or s is None or s.size == 0 or s.ndim != 2:
        return None
    k = tables[0].shape[0]
    if s.shape[1] != k or not _normal(s.reshape(-1)):
        return None
    t, p0_table, p1_table = (a.astype(s.dtype) for a in tables)
    last = t.shape[-1] - 1  # XLA clamps the index past the end to the last slot

    def lookup(table: np.ndarray, side: str) -> np.ndarray:
        idx = [
            np.minimum(np.searchsorted(t[j], s[:, j], side=side), last) for j in range(k)
        ]
        return np.stack([table[j][i] for j, i in enumerate(idx)], axis=-1)

    p0, p1 = lookup(p0_table, "right"), lookup(p1_table, "left")
    if output == "probability":
        g1 = np.exp(np.mean(np.log(p1), axis=-1))
        g0 = np.exp(np.mean(np.log1p(-p0), axis=-1))
        return _device((g1 / (g0 + g1)).astype(s.dtype))
    if output == "interval":
        return _device(np.stack([p0.min(axis=-1), p1.max(axis=-1)], axis=-1))
    return _device(p0), _device(p1)


def venn_abers_probability(calibrator: Any, y_score: Any) -> Any:
    """``VennAbersCalibrator.probability`` on the host."""
    return venn_abers_apply(calibrator, y_score, "probability")


def venn_abers_interval(calibrator: Any, y_score: Any) -> Any:
    """``VennAbersCalibrator.interval`` on the host."""
    return venn_abers_apply(calibrator, y_score, "interval")


def cross_venn_abers_probability(calibrator: Any, y_score: Any) -> Any:
    """``CrossVennAbersCalibrator.probability`` on the host."""
    return cross_venn_abers_apply(calibrator, y_score, "probability")


def cross_venn_abers_interval(calibrator: Any, y_score: Any) -> Any:
    """``CrossVennAbersCalibrator.interval`` on the host."""
    return cross_venn_abers_apply(calibrator, y_score, "interval")


def fit_venn_abers(y_true: Any, y_score: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_venn_abers` on the host (its kernel's
    callback, called directly: no program to compile)."""
    from bayescal.classification._venn import VennAbersCalibrator, _host_venn_abers

    data = _binary(y_true, y_score, weights, probabilities=False)
    if data is None:
        return None
    y, s, w = data
    out = _host_venn_abers(s, y, np.ones_like(s) if w is None else w)
    return VennAbersCalibrator(*(_device(a) for a in out))


def fit_cross_venn_abers(
    y_true: Any, y_score: Any, folds: Any, *, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.fit_cross_venn_abers` on the host."""
    from bayescal.classification._venn import (
        CrossVennAbersCalibrator,
        _check_fold_ids,
        _host_venn_abers,
    )

    data = _binary(y_true, y_score, weights, probabilities=False)
    if data is None:
        return None
    y, s, w = data
    fold, num = _check_fold_ids(folds, s.size)  # its errors: the kernel path raises them
    w = np.ones_like(s) if w is None else w
    member = fold[None, :] == np.arange(num)[:, None]
    wk = np.where(member, w[None, :], np.zeros((), s.dtype))
    out = _host_venn_abers(np.broadcast_to(s, wk.shape), np.broadcast_to(y, wk.shape), wk)
    return CrossVennAbersCalibrator(*(_device(np.ascontiguousarray(a)) for a in out))


def fit_centered_isotonic(y_true: Any, y_score: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_centered_isotonic` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted PAV)
    from bayescal._src.isotonic import _pav_row
    from bayescal._src.ties import pool_ties
    from bayescal.classification._venn import CenteredIsotonicCalibrator

    data = _binary(y_true, y_score, None, probabilities=False)
    if data is None:
        return None
    y, s, _ = data
    pooled = pool_ties(s, y)
    weight = pooled.weight.astype(np.float64)
    fit = _pav_row(pooled.mean.astype(np.float64), weight)
    start = np.r_[True, fit[1:] != fit[:-1]]  # each level set: one point
    block = np.cumsum(start) - 1
    thr = pooled.thresholds.astype(np.float64)
    first = thr[start]  # the weighted mean score about the block's first score
    centers = first + np.bincount(block, weight * (thr - first[block])) / np.bincount(
        block, weight
    )
    level = fit[start]
    pad = s.size - centers.size  # the kernel's fixed-size output repeats the last point
    centers = np.concatenate([centers, np.repeat(centers[-1:], pad)]).astype(s.dtype)
    level = np.concatenate([level, np.repeat(level[-1:], pad)]).astype(s.dtype)
    return CenteredIsotonicCalibrator(_device(centers), _device(level))


# --------------------------------------------------------------------------- classification
def _bin_means(
    y: np.ndarray, p: np.ndarray, w: np.ndarray | None, edges: np.ndarray, idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per bin: the (weighted) count in the kernel's dtype, the mean ``p`` and the mean
    ``y`` (an empty bin: its midpoint for both), or None (a subnormal mean)."""
    num = edges.size - 1
    if w is None:
        count = np.bincount(idx, minlength=num)
        weight = count.astype(np.int64 if jax.config.jax_enable_x64 else np.int32)
        sum_p, sum_y = np.bincount(idx, p, num), np.bincount(idx, y, num)
    else:
        count = np.bincount(idx, w, num)
        weight = count.astype(p.dtype)
        sum_p, sum_y = np.bincount(idx, w * p, num), np.bincount(idx, w * y, num)
    mid = (edges.dtype.type(0.5) * (edges[1:] + edges[:-1])).astype(p.dtype)
    full = count > 0
    safe = np.where(full, count, 1)
    expected = np.where(full, sum_p / safe, mid).astype(p.dtype)
    observed = np.where(full, sum_y / safe, mid).astype(p.dtype)
    if not (_normal(expected) and _normal(observed)):
        return None
    return weight, expected, observed


def fit_histogram_binning(
    y_true: Any,
    y_prob: Any,
    *,
    bins: Any = 10,
    strategy: Any = "uniform",
    weights: Any = None,
    shrinkage: Any = "jeffreys",
) -> Any:
    """:func:`bayescal.classification.fit_histogram_binning` on the host: the edges of
    :func:`reliability_curve` (weighted quantiles with weights) and its observed means,
    shrunk by the kernel's own ``jeffreys_means`` (with NumPy)."""
    from bayescal._src.binned import jeffreys_means
    from bayescal.classification._calibrators import HistogramBinningCalibrator

    if not (shrinkage is None or (isinstance(shrinkage, str) and shrinkage == "jeffreys")):
        return None  # the kernel path raises its message
    data = _binary(y_true, y_prob, weights, True)
    if data is None:
        return None
    y, p, w = data
    whole = isinstance(bins, int | np.integer) and not isinstance(bins, bool | np.bool_)
    if w is not None and strategy == "quantile" and whole and 1 <= bins <= _MAX_BINS:
        from bayescal._src.binned import _quantile_levels

        # integer weights only: their running sums are exact in any order, so the
        # edges are the kernel's bit for bit (real weights: its cumsum's rounding)
        if not ((w == np.round(w)).all() and w.sum() < 2 ** np.finfo(p.dtype).nmant):
            return None
        edges = _weighted_quantiles(p, w, _quantile_levels(int(bins), p.dtype))
        if not _normal(edges):
            return None
    else:
        edges = _edges(bins, strategy, p)
        if edges is None:
            return None
    means = _bin_means(y, p, w, edges, _bin_index(p, edges))
    if means is None:
        return None
    weight, _, values = means
    if shrinkage is not None:
        values = jeffreys_means(values, weight, np)
    return HistogramBinningCalibrator(_device(edges), _device(values))


def histogram_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``HistogramBinningCalibrator.__call__`` on the host."""
    p = _floats(y_prob)
    edges, values = _vector(calibrator.edges), _vector(calibrator.values)
    if p is None or edges is None or values is None or p.size == 0:
        return None
    if edges.size != values.size + 1 or not (edges[1:] >= edges[:-1]).all():
        return None
    if not (_normal(p.reshape(-1), 0, 1) and _normal(edges) and _normal(values)):
        return None
    e = edges.astype(p.dtype)
    if not (e[1:] >= e[:-1]).all():
        return None
    k = np.clip(np.searchsorted(e, p, side="right") - 1, 0, values.size - 1)
    return _device(values.astype(p.dtype)[k])


def reliability_curve(
    y_true: Any,
    y_prob: Any,
    *,
    bins: Any = 15,
    strategy: Any = "uniform",
    weights: Any = None,
    return_edges: Any = False,
) -> Any:
    """:func:`bayescal.classification.reliability_curve` on the host."""
    from bayescal._src.curve import CalibrationCurve

    if not isinstance(return_edges, bool):
        return None
    data = _binned(y_true, y_prob, weights, bins, strategy)
    if data is None:
        return None
    y, p, w, edges, idx = data
    means = _bin_means(y, p, w, edges, idx)
    if means is None:
        return None
    weight, expected, observed = means
    e = _device(edges)
    curve = CalibrationCurve(_device(expected), _device(observed), _device(weight), edges=e)
    return (curve, e) if return_edges else curve


def _logit(p: np.ndarray, eps: float | None) -> np.ndarray | None:
    """``log(p) - log1p(-p)`` in ``p``'s dtype (clipped with ``eps``); None at 0 or 1."""
    if eps is not None:
        p = np.clip(p, p.dtype.type(eps), p.dtype.type(1 - eps))
    elif p.size and not (p.min() > 0 and p.max() < 1):
        return None
    return np.log(p) - np.log1p(-p)


def _binary_logits(
    y_true: Any, y_prob: Any, weights: Any, eps: Any, limit: int = HOST_MAX
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray] | None:
    """:func:`_binary`'s labels, probabilities and weights and the probabilities' logits
    (clipped with ``eps``), or None: probabilities of 0 or 1 without ``eps`` go to the
    kernel path, which raises its message."""
    data = _binary(y_true, y_prob, weights, True, limit)
    if data is None:
        return None
    f = _logit(data[1], eps)
    if f is None or not _normal(f):
        return None
    return (*data, f)


def _eps_ok(eps: Any) -> bool:
    """``eps`` as the kernels take it for clipping: None, or a float in (0, 0.5)."""
    return eps is None or (type(eps) is float and 0 < eps < 0.5)


def _logistic_one(
    f: np.ndarray, y: np.ndarray, w: np.ndarray | None, soft_labels: bool
) -> np.ndarray | None:
    """``theta = (slope, intercept)`` of the logistic regression of ``y`` on ``f``
    (float64, :func:`logistic_rows` from Platt's start), or None where the kernel path
    decides: one class of positive weight (its message), or no convergence (its
    warning: separable classes, or out of steps)."""
    w = np.ones(y.size) if w is None else w.astype(np.float64)
    if not (w[y == 1].sum() > 0 and w[y == 0].sum() > 0):
        return None
    theta, converged = logistic_rows(
        [f.astype(np.float64)],
        y.astype(np.float64),
        w[None],
        np.array([0.0, np.nan]),
        np.full(2, -np.inf),
        soft_labels=soft_labels,
    )
    return theta[0] if converged[0] else None


def _platt_map(a: np.ndarray, b: np.ndarray, f: np.ndarray, dtype: Any) -> np.ndarray:
    """``1 / (1 + exp(a f + b))`` in ``dtype`` (float64 inside), subnormals flushed."""
    eta = a.astype(np.float64) * f.astype(np.float64) + b.astype(np.float64)
    return _flushed((0.5 - 0.5 * np.tanh(0.5 * eta)).astype(dtype))


def fit_platt(
    y_true: Any,
    y_score: Any,
    *,
    input: Any = "prob",
    soft_labels: Any = True,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_platt` on the host: the same optimum (the loss
    is convex) by Newton's method with step halving in float64."""
    if input not in ("prob", "score") or not isinstance(soft_labels, bool):
        return None
    if not _eps_ok(eps) or (eps is not None and input != "prob"):
        return None
    from bayescal.classification._calibrators import PlattCalibrator

    data = _binary(y_true, y_score, weights, input == "prob")
    if data is None:
        return None
    y, s, w = data
    f = _logit(s, eps) if input == "prob" else s
    if f is None or not _normal(f):
        return None
    theta = _logistic_one(f, y, w, soft_labels)
    if theta is None:
        return None
    a, b = (np.asarray(-v, s.dtype) for v in theta)
    return PlattCalibrator(_device(a), _device(b), input, eps)


def logistic_rows(
    features: list[np.ndarray],
    y: np.ndarray,
    w_rows: np.ndarray,
    x0: np.ndarray,
    lower: np.ndarray,
    *,
    soft_labels: bool,
    max_steps: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted logistic regression of ``y`` on ``features`` (+ intercept), one fit
    per weight row, by the kernel's projected Newton solver
    (:func:`~bayescal._src.newton.minimize_host`, float64).

    The objective, the start and the bounds are ``_logistic_fit``'s of
    ``classification._calibrators`` (the soft targets of Platt, lower bounds held by
    projection, Bertsekas' projected Newton); a NaN intercept in ``x0`` starts from
    Platt's log odds. The host twin of ``fit_platt`` and the folds of
    ``select_calibrator`` fit with it. Returns ``theta [R, F + 1]`` and, per row,
    whether it converged: False when the steps ran out, or when the loss went to ~0
    (below 1e-6 per unit of weight: hard labels that the features separate, whose
    maximum-likelihood coefficients are infinite), as the kernel reports.
    """
    # no matrix products: numpy's BLAS may start threads for them, which costs far
    # more than these small sums on a busy machine (einsum runs its own loops)
    design = np.stack([*features, np.ones_like(features[0])])  # [P, n]
    positive = y > 0.5
    out = np.empty((w_rows.shape[0], design.shape[0]))
    converged = np.zeros(w_rows.shape[0], bool)
    # the fit on all the data (the last row) first: it starts the folds' fits, close
    # to their optima (the optimum is unique: the start changes only the steps)
    for r in range(w_rows.shape[0] - 1, -1, -1):
        w = w_rows[r]
        keep = w > 0
        x, wk, pos = design[:, keep], w[keep], positive[keep]
        n_pos = wk[pos].sum()
        n_neg = wk.sum() - n_pos
        target = pos.astype(np.float64)
        if soft_labels:
            target = np.where(pos, 1 - 1 / (n_pos + 2), 1 / (n_neg + 2))
        theta = np.array(x0, np.float64) if r == w_rows.shape[0] - 1 else out[-1].copy()
        if np.isnan(theta[-1]):  # Platt's start: the log odds of the (smoothed) labels
            theta[-1] = np.log((n_pos + 1) / (n_neg + 1))

        def objective(t, x=x, wk=wk, target=target):
            eta = np.einsum("p,pn->n", t, x)
            e = np.exp(-np.abs(eta))
            softplus = np.maximum(eta, 0) + np.log1p(e)
            q = np.where(eta >= 0, 1, e) / (1 + e)  # sigmoid(eta)
            value = float(np.sum(wk * (softplus - target * eta)))  # each term >= 0
            grad = np.einsum("pn,n->p", x, wk * (q - target))
            hess = np.einsum("pn,qn,n->pq", x, x, wk * q * (1 - q))
            return _newton.Derivatives(value, grad, hess, value)

        res = _newton.minimize_host(objective, theta, lower=lower, max_steps=max_steps)
        out[r] = res.x
        converged[r] = res.converged and res.value >= 1e-6 * wk.sum()
    return out, converged


def platt_apply(calibrator: Any, y_score: Any) -> jax.Array | None:
    """``PlattCalibrator.__call__`` on the host."""
    s = _floats(y_score)
    a, b = _scalar(calibrator.a), _scalar(calibrator.b)
    if s is None or a is None or b is None or s.size == 0:
        return None
    flat = s.reshape(-1)
    if calibrator.input == "prob":
        if not _normal(flat, 0, 1):
            return None
        f = _logit(s, calibrator.eps)
        if f is None:
            return None
    else:
        if not _normal(flat):
            return None
        f = s
    return _device(_platt_map(a, b, f, s.dtype))


# --------------------------------------------------------------------------- tests
def calibration_slope_intercept(
    y_true: Any, y_prob: Any, *, weights: Any = None, eps: Any = None
) -> Any:
    """:func:`bayescal.classification.calibration_slope_intercept` on the host: Cox's
    logistic fit by :func:`logistic_rows` (hard labels, float64), the same optimum as
    the kernel's Newton solver (the loss is convex)."""
    if not _eps_ok(eps):
        return None
    from bayescal.classification._tests import CalibrationSlope

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


def hosmer_lemeshow(
    y_true: Any, y_prob: Any, bins: Any = 10, *, dof: Any = None, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.hosmer_lemeshow` on the host (unweighted)."""
    if weights is not None or type(bins) is not int or not 3 <= bins <= _MAX_BINS:
        return None
    if dof is not None and (type(dof) is not int or dof < 1):
        return None
    from scipy.special import gammaincc

    from bayescal.classification._tests import HosmerLemeshowTest

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


def spiegelhalter_z(y_true: Any, y_prob: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.spiegelhalter_z` on the host (the p-value by
    ``math.erfc``: importing scipy.special took 0.3-0.56 s of a first call)."""
    from bayescal.classification._tests import SpiegelhalterTest

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


# --------------------------------------------------------------------------- scaling-binning
def fit_scaling_binning(
    y_true: Any,
    y_prob: Any,
    *,
    bins: Any = 10,
    split: Any = 0.5,
    soft_labels: Any = False,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_scaling_binning` on the host: the Platt step by
    :func:`logistic_rows` (float64), the equal-mass bins of ``_equal_mass_bins``."""
    if type(bins) is not int or not 1 <= bins <= _MAX_BINS:
        return None
    if split is not None and (type(split) is not float or not 0 < split < 1):
        return None
    if not isinstance(soft_labels, bool):
        return None
    if not _eps_ok(eps):
        return None
    from bayescal.classification._scaling_binning import ScalingBinningCalibrator

    data = _binary_logits(y_true, y_prob, weights, eps)
    if data is None:
        return None
    y, p, w, f = data
    dt = p.dtype
    n = p.size
    w = np.ones(n) if w is None else w.astype(np.float64)
    m = n if split is None else int(np.floor(dt.type(split) * dt.type(n)))
    first = np.arange(n) < m if split is not None else np.ones(n, bool)
    w1 = np.where(first, w, 0.0)
    w2 = w if split is None else np.where(first, 0.0, w)
    if (w2 > 0).sum() < bins:
        return None  # the kernel path raises its message
    theta = _logistic_one(f, y, w1, soft_labels)
    if theta is None:
        return None
    a, b = (np.asarray(-v, dt) for v in theta)
    g = _platt_map(a, b, f, dt)
    # Kumar et al.'s equal-mass groups of the weighted sample (as _equal_mass_bins)
    order = np.argsort(g, kind="stable")
    gs, cw = g[order], np.cumsum(w2.astype(dt)[order], dtype=dt)
    total = cw[-1]
    q = np.floor(total / dt.type(bins))
    r = total - q * dt.type(bins)
    k = np.arange(1, bins, dtype=dt)
    boundary = k * q + np.minimum(k, r)
    position = np.concatenate([boundary - 1, boundary])
    at = gs[np.minimum(np.searchsorted(cw, position, side="right"), n - 1)]
    inner = ((at[: bins - 1] + at[bins - 1 :]) / dt.type(2)).astype(dt)
    edges = np.concatenate([np.zeros(1, dt), inner, np.ones(1, dt)])
    idx = np.searchsorted(inner, g, side="left")  # the number of inner edges below g
    weight = np.bincount(idx, w2, bins)
    sums = np.bincount(idx, w2 * g.astype(np.float64), bins)
    midpoint = (edges[:-1].astype(np.float64) + edges[1:]) / 2
    values = np.where(weight > 0, sums / np.where(weight > 0, weight, 1), midpoint)
    values = np.clip(np.maximum.accumulate(values.astype(dt)), 0, 1).astype(dt)
    return ScalingBinningCalibrator(
        _device(a), _device(b), _device(edges), _device(values), eps
    )


def scaling_binning_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``ScalingBinningCalibrator.__call__`` on the host."""
    p = _floats(y_prob)
    a, b = _scalar(calibrator.a), _scalar(calibrator.b)
    edges, values = _vector(calibrator.edges), _vector(calibrator.values)
    if p is None or a is None or b is None or edges is None or values is None:
        return None
    if p.size == 0 or not _normal(p.reshape(-1), 0, 1):
        return None
    f = _logit(p, calibrator.eps)
    if f is None or not _normal(f):
        return None
    g = _platt_map(a, b, f, p.dtype)
    k = np.searchsorted(edges[1:-1].astype(p.dtype), g, side="left")
    return _device(values.astype(p.dtype)[k])


# --------------------------------------------------------------------------- spline
def _weighted_quantiles(x: np.ndarray, w: np.ndarray | None, q: np.ndarray) -> np.ndarray:
    """``binned.weighted_quantiles(x, w, q)`` (numpy's linear quantiles of the sample in
    which ``x_i`` is repeated ``w_i`` times) in ``x``'s dtype, operation by operation,
    made nondecreasing along the last axis; no weights: unit weights."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    cum = np.cumsum(w[order]) if w is not None else np.arange(1, x.size + 1)
    cum = cum.astype(x.dtype)
    last = cum[-1] - 1
    virtual = q * last
    prev = np.floor(virtual)
    above = virtual >= last
    gamma = np.where(above, virtual + 1, virtual - prev)
    prev = np.where(above, last, prev)
    nxt = np.where(above, last, prev + 1)
    lo = xs[np.minimum(np.searchsorted(cum, prev, side="right"), x.size - 1)]
    hi = xs[np.minimum(np.searchsorted(cum, nxt, side="right"), x.size - 1)]
    diff = hi - lo
    edges = np.where(gamma >= 0.5, hi - diff * (1 - gamma), lo + diff * gamma)
    return np.maximum.accumulate(edges.astype(x.dtype), axis=-1)


def _weighted_knots(x: np.ndarray, w: np.ndarray | None, k: int) -> np.ndarray | None:
    """``binned.weighted_quantile_edges(x, w, k)``, or None (a subnormal edge)."""
    if w is None:
        return _quantile_edges(x, k)
    from bayescal._src.binned import _quantile_levels

    edges = _weighted_quantiles(x, w, _quantile_levels(k, x.dtype))
    return edges if _normal(edges) else None


def _penalised_newton(
    basis: np.ndarray,
    y: np.ndarray,
    w_rows: np.ndarray,
    pen: np.ndarray,
    start: np.ndarray,
    max_steps: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """``argmin_b sum_i w_ri (softplus(eta_i) - y_i eta_i) / W_r + pen_r ||b||^2`` with
    ``eta = basis @ b``, for every row ``r`` of ``w_rows [R, N]`` at once (float64).

    Newton steps; a row whose Newton decrement ``g' H^-1 g`` exceeds 1/4 (far from its
    optimum, e.g. the first steps from 0) halves its step until the objective decreases
    (Armijo), closer rows take the full step (the objective is strictly convex, so the
    optimum is ``fit_spline``'s). A row has converged when its decrement (about twice
    the objective's distance to the optimum, a mean log-loss of order 0.1-1) is below
    1e-20. Returns ``b [R, K]`` and, per row, whether it converged."""
    # No BLAS (einsum runs its own loops): OpenBLAS' threads, spinning on a machine
    # whose cores are busy, made one fit 10-30x slower than this.
    rows, k = start.shape
    wn = w_rows / w_rows.sum(axis=1, keepdims=True)
    eye = np.eye(k)
    upper = np.triu_indices(k)
    outer = basis[:, upper[0]] * basis[:, upper[1]]  # [N, K(K+1)/2]
    basis_t = np.ascontiguousarray(basis.T)

    def linear(b: np.ndarray) -> np.ndarray:  # basis @ b per row: [R, N]
        return np.einsum("rk,kn->rn", b, basis_t)

    def value(b: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eta = linear(b)
        loss = np.logaddexp(0, eta) - y * eta
        return np.einsum("rn,rn->r", wn[r], loss) + pen[r] * np.einsum(
            "rk,rk->r", b, b
        ), eta

    beta = start.astype(np.float64).copy()
    live = np.arange(rows)
    eta = linear(beta)
    converged = np.zeros(rows, bool)
    for _ in range(max_steps):
        q = 0.5 + 0.5 * np.tanh(0.5 * eta)  # sigmoid(eta)
        grad = np.einsum("rn,kn->rk", wn[live] * (q - y), basis_t)
        grad += 2 * pen[live, None] * beta[live]
        hess = np.empty((live.size, k, k))
        hess[:, upper[0], upper[1]] = np.einsum("rn,nj->rj", wn[live] * q * (1 - q), outer)
        hess[:, upper[1], upper[0]] = hess[:, upper[0], upper[1]]
        hess += 2 * pen[live, None, None] * eye
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        decrease = np.einsum("rk,rk->r", grad, step)
        if not np.isfinite(decrease).all():
            return beta, converged
        done = decrease <= 1e-20
        converged[live[done]] = True
        keep = ~done
        live, step, decrease, eta = live[keep], step[keep], decrease[keep], eta[keep]
        if live.size == 0:
            break
        far = decrease > 0.25
        if far.any():  # Armijo backtracking for the rows far from their optimum
            rows_far = live[far]
            val, _ = value(beta[rows_far], rows_far)
            rate = np.ones(rows_far.size)
            for _ in range(60):
                trial = beta[rows_far] - rate[:, None] * step[far]
                v, _ = value(trial, rows_far)
                bad = ~(v <= val - 1e-4 * rate * decrease[far])
                if not bad.any():
                    break
                rate[bad] *= 0.5
            else:
                return beta, converged  # no decrease: left to the kernel path
            step[far] *= rate[:, None]
        beta[live] -= step
        eta = linear(beta[live])
    return beta, converged


#: fit_spline's host path up to this many observations (not HOST_MAX): its float64
#: Newton fits took 3.2 s at N = 1e5 where the compiled float32 program took 7.4 s
#: (2-core CPU machine, one process, default options).
_SPLINE_MAX = 1 << 18


def fit_spline(
    y_true: Any,
    y_prob: Any,
    *,
    knots: Any = 10,
    penalties: Any = None,
    folds: Any = 5,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_spline` on the host: the same knots, folds and
    strictly convex objectives, every fold x penalty solved by Newton in float64 (from
    the fit on all the data at that penalty, which is also the final fit)."""
    from bayescal.classification._spline import (
        DEFAULT_PENALTIES,
        SplineCalibrator,
        spline_basis,
    )

    def count(v: Any) -> int | None:
        ok = isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
        return int(v) if ok else None

    num_knots, num_folds = count(knots), count(folds)
    if num_knots is None or num_folds is None or num_knots < 3 or num_folds < 2:
        return None
    if not _eps_ok(eps):
        return None
    if penalties is None:
        lam = np.asarray(DEFAULT_PENALTIES)
    elif isinstance(penalties, list | tuple | np.ndarray):
        lam = np.asarray(penalties, dtype=np.float64).reshape(-1)
        if not (lam.size and np.isfinite(lam).all() and (lam > 0).all()):
            return None
    else:
        return None
    data = _binary_logits(y_true, y_prob, weights, eps, _SPLINE_MAX)
    if data is None:
        return None
    y, p, w, x = data
    weight = np.ones(y.size) if w is None else w.astype(np.float64)
    live, positive = weight > 0, y > 0.5
    if min((live & positive).sum(), (live & ~positive).sum()) < num_folds:
        return None  # one class, or too few of one for the folds: the kernel's message
    edges = _weighted_knots(x, w, num_knots - 1)
    if edges is None:
        return None
    basis = spline_basis(x.astype(np.float64), edges.astype(np.float64), np)
    y64 = y.astype(np.float64)
    rank = np.where(positive, np.cumsum(live & positive), np.cumsum(live & ~positive)) - 1
    fold = rank % num_folds
    # the fits on all the data, one per penalty; then every fold from its penalty's
    full, ok = _penalised_newton(
        basis,
        y64,
        np.broadcast_to(weight, (lam.size, y.size)),
        lam / num_knots,
        np.zeros((lam.size, num_knots)),
    )
    if not ok.all():
        return None
    train = np.where(fold[None, :] == np.arange(num_folds)[:, None], 0.0, weight)  # [F, N]
    pairs_w = np.repeat(train, lam.size, axis=0)  # fold-major, as the kernel
    pairs_lam = np.tile(lam, num_folds)
    beta, ok = _penalised_newton(
        basis, y64, pairs_w, pairs_lam / num_knots, np.tile(full, (num_folds, 1))
    )
    if not ok.all():
        return None
    eta = np.einsum("rk,nk->rn", beta, basis)  # no BLAS (see _penalised_newton)
    nll = np.maximum(eta, 0) + np.log1p(np.exp(-np.abs(eta))) - y64 * eta
    held = (pairs_w == 0) & live[None, :]
    scores = np.where(held, nll * weight, 0).sum(axis=1).reshape(num_folds, -1).sum(axis=0)
    best = int(np.argmin(scores))
    coef = full[best].astype(p.dtype)
    if not _normal(coef):
        return None
    return SplineCalibrator(_device(edges), _device(coef), eps)


def spline_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``SplineCalibrator.__call__`` on the host."""
    from bayescal.classification._spline import spline_basis

    p = _floats(y_prob)
    knots, coef = _vector(calibrator.knots), _vector(calibrator.coef)
    if p is None or knots is None or coef is None or p.size == 0:
        return None
    if knots.size < 3 or coef.shape != knots.shape or not _eps_ok(calibrator.eps):
        return None
    if not (_normal(p.reshape(-1), 0, 1) and _normal(knots) and _normal(coef)):
        return None
    x = _logit(p, calibrator.eps)
    if x is None or not _normal(x):
        return None
    cast = lambda a: a.astype(p.dtype).astype(np.float64)  # noqa: E731  (the kernel's dtype)
    eta = spline_basis(x.astype(np.float64), cast(knots), np) @ cast(coef)
    return _device(_flushed((0.5 - 0.5 * np.tanh(-0.5 * eta)).astype(p.dtype)))


# --------------------------------------------------------------------------- BBQ
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def lgamma(x: np.ndarray) -> np.ndarray:
    """``log(Gamma(x))`` for ``x > 0`` in float64, vectorized, to ~1e-15 absolute:
    Stirling's series (7 terms) at ``x + 8``, stepped down by the recurrence
    ``Gamma(x + 8) = x (x + 1) ... (x + 7) Gamma(x)`` (math.lgamma per value: ~50x
    slower; scipy.special's import: ~0.2 s)."""
    x = np.asarray(x, np.float64)
    small = x < 8
    z = np.where(small, x + 8, x)
    r = 1 / (z * z)
    series = (
        1 / 12
        - r
        * (
            1 / 360
            - r
            * (1 / 1260 - r * (1 / 1680 - r * (1 / 1188 - r * (691 / 360360 - r / 156))))
        )
    ) / z
    out = (z - 0.5) * np.log(z) - z + _HALF_LOG_2PI + series
    if small.any():
        xs = x[small]
        prod = (
            xs * (xs + 1) * (xs + 2) * (xs + 3) * (xs + 4) * (xs + 5) * (xs + 6) * (xs + 7)
        )
        out[small] -= np.log(prod)
    return out


def fit_bbq(
    y_true: Any,
    y_prob: Any,
    *,
    n_prime: Any = 2.0,
    c: Any = 10.0,
    estimate: Any = "frequency",
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_bbq` on the host: the same tables (``_fit_bbq``
    step by step: edges bit for bit, counts exactly, the BDeu scores in float64)."""
    from bayescal._src.bucketing import bucket_size
    from bayescal.classification._bbq import (
        BBQCalibrator,
        _check_options,
        _levels,
        _thresholds,
        model_range,
    )

    try:
        n_prime, c, estimate = _check_options(n_prime, c, estimate)
    except (TypeError, ValueError):
        return None
    data = _binary(y_true, y_prob, weights, True)
    if data is None:
        return None
    y, p, w = data
    dtype = p.dtype
    num_models = model_range(bucket_size(p.size), c)[1]
    count = int((w > 0).sum()) if w is not None else p.size
    b = np.arange(1, num_models + 1)[:, None]  # [M, 1]
    col = np.arange(num_models + 1)[None, :]  # [1, M + 1]
    edges = _weighted_quantiles(p, w, _levels(num_models, dtype))
    edges = np.where(col == 0, 0, np.where(col >= b, 1, edges)).astype(dtype)
    edges = np.maximum.accumulate(edges, axis=1)
    if not _normal(edges, 0, 1):
        return None
    # weighted counts below each edge (exact: integers, or float64 sums of the weights)
    order = np.argsort(p, kind="stable")
    ps = p[order]
    ws = np.ones(p.size) if w is None else w[order].astype(np.float64)
    ys = y[order].astype(np.float64)
    cum_pos = np.concatenate([[0.0], np.cumsum(ws * ys)])
    cum_neg = np.concatenate([[0.0], np.cumsum(ws * (1 - ys))])
    below = np.searchsorted(ps, edges, side="left")
    last = col >= b
    pos_below = np.where(last, cum_pos[-1], cum_pos[below])
    neg_below = np.where(last, cum_neg[-1], cum_neg[below])
    m_b = np.maximum(np.diff(pos_below, axis=1), 0)  # [M, M]
    n_b = np.maximum(np.diff(neg_below, axis=1), 0)
    total_b = m_b + n_b
    in_model = col[:, :-1] < b
    e64 = edges.astype(np.float64)
    mid = (e64[:, :-1] + e64[:, 1:]) / 2
    strength = n_prime / b
    tiny = float(np.finfo(dtype).tiny)
    alpha = np.where(strength * mid == 0, tiny, strength * mid)
    beta = np.where(strength * (1 - mid) == 0, tiny, strength * (1 - mid))
    term = np.zeros(total_b.shape)
    i = np.nonzero(in_model)
    a, bb, s = alpha[i], beta[i], np.broadcast_to(strength, total_b.shape)[i]
    term[i] = (
        lgamma(s)
        - lgamma(total_b[i] + s)
        + lgamma(m_b[i] + a)
        - lgamma(a)
        + lgamma(n_b[i] + bb)
        - lgamma(bb)
    )
    log_score = term.sum(axis=1)
    lo, hi = _thresholds(num_models, c)
    in_range = (count >= lo) & (count <= hi)
    if not in_range.any():
        return None
    log_score = np.where(in_range, log_score, -np.inf)
    model_weights = np.exp(log_score - log_score.max())
    model_weights = np.where(in_range, model_weights / model_weights.sum(), 0)
    # the bin estimates in the kernel's dtype arithmetic (its table is in the dtype)
    mid_d, total_d, m_d = mid.astype(dtype), total_b.astype(dtype), m_b.astype(dtype)
    if estimate == "frequency":
        theta = np.where(total_d > 0, m_d / np.where(total_d > 0, total_d, 1), mid_d)
    else:
        eps = np.finfo(dtype).eps
        theta = (m_d + alpha.astype(dtype)) / (total_d + strength.astype(dtype))
        theta = np.clip(theta, eps, 1 - eps)
    theta = np.clip(theta, 0, 1).astype(dtype)
    theta = np.take_along_axis(theta, np.minimum(col[:, :-1], b - 1), axis=1)
    return BBQCalibrator(
        _device(edges),
        _device(_flushed(theta)),
        _device(_flushed(model_weights.astype(dtype))),
        estimate,
        n_prime,
        c,
    )


def bbq_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``BBQCalibrator.__call__`` on the host: the models of positive weight only (the
    others add exact zeros in the kernel), summed in float64."""
    p = _floats(y_prob)
    tables = [_floats(getattr(calibrator, name), 1 << 22) for name in ("edges", "values")]
    weights = _vector(calibrator.weights)
    edges, values = tables
    if p is None or edges is None or values is None or weights is None or p.size == 0:
        return None
    m = weights.size
    if edges.shape != (m, m + 1) or values.shape != (m, m):
        return None
    if calibrator.estimate not in ("frequency", "posterior"):
        return None
    if not (
        _normal(p.reshape(-1), 0, 1) and _normal(values, 0, 1) and _normal(weights, 0, 1)
    ):
        return None
    if not _normal(edges, 0, 1):
        return None
    dt = p.dtype
    flat = p.reshape(-1)
    out = np.zeros(flat.size)
    for j in np.flatnonzero(weights):
        k = np.searchsorted(edges[j, 1:].astype(dt), flat, side="right")
        out += float(weights[j].astype(dt)) * values[j].astype(dt)[np.minimum(k, m - 1)]
    if calibrator.estimate == "posterior":
        eps = np.finfo(dt).eps
        out = np.clip(out.astype(dt), eps, 1 - eps)
    else:
        out = np.clip(out.astype(dt), 0, 1)
    return _device(_flushed(out.reshape(p.shape)))


# --------------------------------------------------------------------------- smooth ECE
def _relplot_smooth(
    f: np.ndarray, rows: np.ndarray, sigma: float, grid: int, mesh: int, dtype: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``classification._smooth._smooth`` (relplot's spreading, reflected Gaussian
    convolution and interpolation) in float64: the mesh ``t`` in ``dtype`` and the
    smoothed ``rows [R, N]`` on it ``[R, mesh]`` (float64)."""
    x = f.astype(np.float64) * (grid - 1)
    idx = np.clip(np.floor(x), 0, grid - 2).astype(np.intp)
    frac = x - idx
    spread = np.stack(
        [
            np.bincount(idx, (1 - frac) * r, grid) + np.bincount(idx + 1, frac * r, grid)
            for r in rows
        ]
    )
    tg = np.arange(grid) / (grid - 1)
    ker = np.exp(-((tg - 0.5) ** 2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    # the grid reflected at both ends: v[E-1] ... v[1], v[0] ... v[E-1], v[E-2] ... v[0]
    ext = np.concatenate([spread[:, :0:-1], spread, spread[:, -2::-1]], axis=1)
    nfft = 1 << (ext.shape[1] + grid - 2).bit_length()  # >= the linear length
    full = np.fft.irfft(np.fft.rfft(ext, nfft) * np.fft.rfft(ker, nfft), nfft)
    conv = full[:, grid - 1 + grid // 2 : grid - 1 + grid // 2 + grid]
    # the kernel's mesh: XLA divides by a constant as a product with its reciprocal
    t = np.arange(mesh, dtype=dtype) * (np.asarray(1, dtype) / np.asarray(mesh - 1, dtype))
    tt = t.astype(np.float64)
    j = np.clip(np.floor(tt * (grid - 1)), 0, grid - 2).astype(np.intp)
    bucket = 1 / (grid - 1)
    resid = (tt - j * bucket) / bucket
    return t, conv[:, j] * (1 - resid) + conv[:, j + 1] * resid


def _relplot_smece(
    p: np.ndarray, rows: np.ndarray, sigma: float, grid: int, mesh: int
) -> float:
    """smECE_sigma (relplot): ``sum |num / dens| dens / sum dens`` on its mesh."""
    from bayescal.classification._smooth import _DENSITY_EPS

    _, sm = _relplot_smooth(p, rows, sigma, grid, mesh, np.float64)
    num, dens = sm[0], sm[1] + _DENSITY_EPS
    return float(np.sum(np.abs(num / dens) * dens) / np.sum(dens))


def _smooth_bandwidth(p: np.ndarray, rows: np.ndarray) -> tuple[int, float]:
    """``classification._smooth._fixed_point_kernel``: relplot's bisection for
    ``sigma = smECE_sigma``; ``(k, smece)`` with the bandwidth ``k / 1024``."""
    from bayescal.classification._smooth import _SEARCH_EPS, _SEARCH_STEPS, _UNIT

    lo, hi, value = 0, _UNIT, math.nan
    for i in range(_SEARCH_STEPS + 1):
        k = _UNIT if i == 0 else (lo + hi) // 2
        sigma = k / _UNIT
        if sigma < _SEARCH_EPS:  # accepted without an evaluation (relplot's predicate)
            lo = k
            continue
        err = _relplot_smece(p, rows, sigma, *_search_grid_sizes(k))
        ok = sigma < err
        if i == 0 or not ok:
            hi, value = k, err
        else:
            lo = k
        if i == 0 and ok:
            break
    return hi, value


def _smooth_inputs(y_true: Any, y_prob: Any, bandwidth: Any) -> Any:
    """Labels, probabilities and the bandwidth option (None or a float in (0, 1]), or
    None for anything the kernel path decides."""
    if bandwidth is not None and not (
        type(bandwidth) in (float, int) and 0 < bandwidth <= 1
    ):
        return None
    data = _binary(y_true, y_prob, None, True)
    if data is None:
        return None
    return data[0], data[1], None if bandwidth is None else float(bandwidth)


def _search_grid_sizes(k: int) -> tuple[int, int]:
    """``classification._smooth._search_grid_sizes`` (integer arithmetic)."""
    from bayescal.classification._smooth import _K_MIN, _MIN_MESH, _UNIT

    k = max(k, _K_MIN)
    grid = max((2 * 20 * _UNIT + k) // (2 * k), 2000) // 2 + 1
    return grid, max((2 * 10 * _UNIT + k) // (2 * k), _MIN_MESH)


def smooth_fixed_point(y_true: Any, y_prob: Any) -> tuple[float, jax.Array] | None:
    """``(smece, bandwidth)`` of the fixed point on the host, or None; the bandwidth
    as the kernel gives it (an array of the probabilities' dtype: traced, not static,
    in the program it is passed to)."""
    data = _smooth_inputs(y_true, y_prob, None)
    if data is None:
        return None
    y, p, _ = data
    rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
    k, err = _smooth_bandwidth(p, rows)
    return err, _result(k / 1024, p.dtype)


def smooth_calibration_error(
    y_true: Any, y_prob: Any, *, bandwidth: Any = None, return_bandwidth: Any = False
) -> Any:
    """:func:`bayescal.classification.smooth_calibration_error` on the host (float64;
    the bisection's decisions are the kernel's but for an error within float32
    rounding of a bandwidth tried)."""
    data = _smooth_inputs(y_true, y_prob, bandwidth)
    if data is None or not isinstance(return_bandwidth, bool):
        return None
    from bayescal.classification._smooth import _grid_sizes

    y, p, sigma = data
    rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
    if sigma is None:
        k, err = _smooth_bandwidth(p, rows)
        sigma = k / 1024
    else:
        err = _relplot_smece(p, rows, sigma, *_grid_sizes(sigma))
    out = _result(err, p.dtype)
    # the kernel's bandwidth leaves its program as an array of the dtype
    return (out, float(np.asarray(sigma, p.dtype))) if return_bandwidth else out


def smooth_reliability_curve(
    y_true: Any, y_prob: Any, *, bandwidth: Any = None, num_points: Any = 200
) -> Any:
    """:func:`bayescal.classification.smooth_reliability_curve` on the host."""
    from bayescal._src.curve import CalibrationCurve
    from bayescal.classification._smooth import _DENSITY_EPS, _grid_sizes

    data = _smooth_inputs(y_true, y_prob, bandwidth)
    ok_points = num_points is None or (type(num_points) is int and 2 <= num_points <= 10**6)
    if data is None or not ok_points:
        return None
    y, p, sigma = data
    if sigma is None:
        rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
        k, _ = _smooth_bandwidth(p, rows)
        sigma = k / 1024
        grid = _search_grid_sizes(k)[0]
    else:
        grid = _grid_sizes(sigma)[0]
    mesh = _grid_sizes(sigma)[1] if num_points is None else num_points
    t, sm = _relplot_smooth(
        p, np.stack([y.astype(np.float64), np.ones(p.size)]), sigma, grid, mesh, p.dtype
    )
    dens = sm[1] + _DENSITY_EPS
    mu = sm[0] / dens
    return CalibrationCurve(_device(t), _result(mu, p.dtype), _result(dens, p.dtype))


# --------------------------------------------------------------------------- classification SKCE
_SKCE_MAX = 1 << 20  # probabilities: the host only converts them and takes the median


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
        y = _vector(y_true)
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
    from bayescal.classification._kernel import _h

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


def kernel_calibration_error_classification(
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


def kernel_calibration_test_classification(
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


def _split_words(words: np.ndarray, count: int) -> np.ndarray:
    """``jax.random.key_data(jax.random.split(key, count))`` of the key of ``words``
    (the partitionable split: the threefry hash of the counters ``(0, i)``)."""
    return _threefry2x32(words, np.zeros(count, np.uint32), np.arange(count, dtype=np.uint32))


def smooth_reliability_band(
    key: Any,
    y_true: Any,
    y_prob: Any,
    *,
    bandwidth: Any = None,
    num_points: Any = 200,
    num_samples: Any = 200,
    level: Any = 0.95,
) -> Any:
    """:func:`bayescal.classification.smooth_reliability_band` on the host: the same
    resamples (the kernel's split keys, :func:`_split_words`, seed NumPy's generator as
    ``bands.cell_draws`` does), smoothed in float64."""
    from bayescal._src.bands import _host_cell_draws, use_xla_draws
    from bayescal._src.curve import CalibrationCurve
    from bayescal.classification._smooth import _DENSITY_EPS, _grid_sizes

    # several devices (or bands.xla_draws): the kernel draws with jax.random there
    words = None if use_xla_draws() else _key_words(key)
    data = _smooth_inputs(y_true, y_prob, bandwidth)
    ok_points = num_points is None or (type(num_points) is int and 2 <= num_points <= 10**6)
    ok_samples = type(num_samples) is int and 2 <= num_samples <= 10**5
    if words is None or data is None or not ok_points or not ok_samples:
        return None
    if type(level) not in (float, int) or not 0 < level < 1:
        return None
    y, p, sigma = data
    if sigma is None:
        rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
        sigma = _smooth_bandwidth(p, rows)[0] / 1024
    grid, mesh = _grid_sizes(sigma)
    mesh = mesh if num_points is None else num_points
    n = p.size
    # the kernel's jobs: 0 the data, j >= 1 resample j with the (j - 1)-th split key
    weights = np.empty((num_samples + 1, n), np.float64)
    weights[0] = 1.0
    weights[1:] = _host_cell_draws(
        _split_words(words, num_samples), np.float64(n), np.ones(n), kind="resample"
    )
    y64 = y.astype(np.float64)
    t, sm = _relplot_smooth(
        p, np.concatenate([y64 * weights, weights]), sigma, grid, mesh, p.dtype
    )
    dens = sm[num_samples + 1 :] + _DENSITY_EPS
    mu = sm[: num_samples + 1] / dens
    alpha = (1 - float(np.asarray(level, p.dtype))) / 2
    lower, upper = np.quantile(mu[1:], [alpha, 1 - alpha], axis=0)
    return CalibrationCurve(
        _device(t),
        _result(mu[0], p.dtype),
        _result(dens[0], p.dtype),
        _result(lower, p.dtype),
        _result(upper, p.dtype),
    )

# --------------------------------------------------------------------------- scaling
# [N, C] inputs: the scaling fits' first calls compile a Newton solver (0.5-0.6 s at
# N = 1e4, C = 5, i.e. 5e4 values, above HOST_MAX); here that many values, and a
# Newton step of at most about _SCALING_COST multiply-adds (N P^2, P parameters).
_SCALING_MAX = 1 << 17
_SCALING_COST = 2e8


def _class_labels(y_true: Any, n: int, k: int) -> np.ndarray | None:
    """Integer class labels ``[n]`` in ``[0, k)`` (``validation.check_class_labels``
    accepts them), or None."""
    y = _floats(y_true, _SCALING_MAX)
    if y is None or y.shape != (n,):
        return None
    if not ((y >= 0) & (y < k) & (y == np.round(y))).all():  # NaN fails
        return None
    return y.astype(np.intp)


def _multiclass_weights(weights: Any, y: np.ndarray, k: int, dtype: Any) -> np.ndarray | None:
    """Checked observation weights in float64 (ones for None), or None: bad weights, or
    a class without positive weight (the kernel path's messages)."""
    if weights is None:
        w = np.ones(y.size)
    else:
        w = _observation_weights(weights, np.empty(y.size, dtype))
        if w is _BAD:
            return None
        w = w.astype(np.float64)
    if not (np.bincount(y, w, k) > 0).all():
        return None
    return w


def _logit_matrix(logits: Any) -> np.ndarray | None:
    """Finite (and 0 or normal) ``[N, C]`` logits with ``C >= 2``, or None."""
    z = _floats(logits, _SCALING_MAX)
    if z is None or z.ndim != 2 or z.shape[0] == 0 or z.shape[1] < 2:
        return None
    return z if _normal(z.reshape(-1)) else None


def multinomial_newton(
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    pen: np.ndarray,
    gauge: np.ndarray,
    target: np.ndarray,
    start: np.ndarray,
    max_steps: int = 100,
) -> tuple[np.ndarray, bool]:
    """``argmin_theta`` of ``classification._scaling._scaling_objective`` (divided by
    the total weight) in float64: ``theta [K, D]``, ``eta_ik = theta_k . x_i`` for
    shared features ``x [N, D]`` (matrix scaling) or ``theta_k . x_ik`` for ``x [N, K,
    D]`` (vector scaling); the weighted mean multinomial NLL of the labels ``y`` plus
    ``sum pen theta^2`` plus the gauge term ``1/2 sum_d gauge_d (sum_k theta_kd -
    target_d)^2``.

    The kernel's solver (:func:`~bayescal._src.newton.minimize_host`) from ``start``;
    the objective is strictly convex (the gauge term fixes softmax's free shift), so
    the optimum is the kernel's. False when the solver did not converge (the steps ran
    out: separated classes, the kernel path warns)."""
    k, d = start.shape
    n = y.size
    if n * k * k > _SCALING_MAX * 32:  # the [N, K, K] curvature weights: 32 MiB at most
        return start, False
    shared = x.ndim == 2
    wn = w / w.sum()
    rows = np.arange(n)
    gauge = gauge.astype(np.float64)
    # no BLAS (einsum runs its own loops): see _penalised_newton
    if shared:
        upper = np.triu_indices(d)
        pairs = x[:, upper[0]] * x[:, upper[1]]  # [N, D(D+1)/2]
    else:  # [K, D, N]: einsum's loops run over contiguous N (5x faster than [N, K, D])
        x_t = np.ascontiguousarray(np.moveaxis(x, 0, -1))
    fixed = np.diag(2 * pen.reshape(-1)) + np.kron(np.ones((k, k)), np.diag(gauge))

    def objective(flat: np.ndarray) -> _newton.Derivatives:
        theta = flat.reshape(k, d)
        eta = np.einsum("nd,kd->nk", x, theta) if shared else np.einsum("kdn,kd->nk", x_t, theta)
        top = eta.max(axis=1, keepdims=True)
        e = np.exp(eta - top)
        total = e.sum(axis=1, keepdims=True)
        nll = top[:, 0] + np.log(total[:, 0]) - eta[rows, y]
        off = (theta.sum(axis=0) - target) * gauge
        val = np.einsum("n,n->", wn, nll) + np.sum(pen * theta**2) + 0.5 * np.sum(off**2)
        q = e / total
        wq = q * wn[:, None]
        r = wq.copy()
        r[rows, y] -= wn
        if shared:
            c = -np.einsum("nk,nl->nkl", wq, q)  # wn (diag(q) - q q')
            c[:, np.arange(k), np.arange(k)] += wq
            grad = np.einsum("nk,nd->kd", r, x)
            packed = np.einsum("nkl,nj->klj", c, pairs)
            full = np.empty((k, k, d, d))
            full[:, :, upper[0], upper[1]] = packed
            full[:, :, upper[1], upper[0]] = packed
            hess = full.transpose(0, 2, 1, 3)
        else:
            grad = np.einsum("kn,kdn->kd", r.T, x_t)
            # two-operand sums (einsum's fast loops): the outer part, then the blocks
            wqx = (wq.T[:, None, :] * x_t).reshape(k * d, n)
            qx = (q.T[:, None, :] * x_t).reshape(k * d, n)
            hess = -np.einsum("pn,rn->pr", wqx, qx).reshape(k, d, k, d)
            blocks = np.einsum("kdn,ken->kde", wqx.reshape(k, d, n), x_t)
            hess[np.arange(k), :, np.arange(k), :] += blocks
        grad = grad + 2 * pen * theta + off[None, :]
        hess = hess.reshape(k * d, k * d) + fixed
        val = float(val)  # every term >= 0: the magnitude is the value
        return _newton.Derivatives(val, grad.reshape(-1), hess, val)

    res = _newton.minimize_host(objective, start.reshape(-1), max_steps=max_steps)
    return res.x.reshape(k, d), bool(res.converged)


def _scaling_result(theta: np.ndarray, dtype: Any) -> np.ndarray | None:
    """Fitted parameters in the kernel's dtype, or None (not finite, or subnormal)."""
    out = theta.astype(dtype)
    return out if _normal(out.reshape(-1)) else None


def fit_vector_scaling(y_true: Any, logits: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_vector_scaling` on the host: the kernel's
    objective (gauge: intercepts summing to 0) by :func:`multinomial_newton`."""
    from bayescal.classification._scaling import VectorScalingCalibrator

    z = _logit_matrix(logits)
    if z is None:
        return None
    n, k = z.shape
    if n * (2 * k) ** 2 > _SCALING_COST:
        return None
    y = _class_labels(y_true, n, k)
    if y is None:
        return None
    w = _multiclass_weights(weights, y, k, z.dtype)
    if w is None:
        return None
    z64 = z.astype(np.float64)
    x = np.stack([z64, np.ones_like(z64)], axis=-1)  # [N, K, 2]
    start = np.stack([np.ones(k), np.zeros(k)], axis=1)
    theta, ok = multinomial_newton(
        x, y, w, np.zeros((k, 2)), np.array([False, True]), np.zeros(2), start
    )
    theta = _scaling_result(theta, z.dtype) if ok else None
    if theta is None:
        return None
    return VectorScalingCalibrator(
        _device(np.ascontiguousarray(theta[:, 0])), _device(np.ascontiguousarray(theta[:, 1]))
    )


def _matrix_fit(
    y: np.ndarray, x: np.ndarray, w: np.ndarray, regularization: str, reg_lambda: float,
    reg_mu: float, dtype: Any,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``_fit_matrix_core`` on the host: ``(coef [K, K], intercept [K])`` or None."""
    from bayescal.classification._scaling import penalty_table

    n, k = x.shape
    if n * (k * (k + 1)) ** 2 > _SCALING_COST:
        return None
    pen, gauge, target = penalty_table(k, regularization, reg_lambda, reg_mu)
    # the kernel's penalty is rounded to the dtype (before its scaling by the weight)
    pen = pen.astype(dtype).astype(np.float64)
    features = np.concatenate([x.astype(np.float64), np.ones((n, 1))], axis=1)
    start = np.concatenate([np.eye(k), np.zeros((k, 1))], axis=1)
    theta, ok = multinomial_newton(
        features, y, w, pen, np.array(gauge), np.array(target), start
    )
    theta = _scaling_result(theta, dtype) if ok else None
    if theta is None:
        return None
    return np.ascontiguousarray(theta[:, :k]), np.ascontiguousarray(theta[:, k])


def fit_matrix_scaling(
    y_true: Any, logits: Any, *, reg_lambda: Any = 0.0, reg_mu: Any = 0.0, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.fit_matrix_scaling` on the host (ODIR penalty)."""
    from bayescal.classification._scaling import MatrixScalingCalibrator, _check_reg

    reg_lambda, reg_mu = _check_reg(reg_lambda, "reg_lambda"), _check_reg(reg_mu, "reg_mu")
    z = _logit_matrix(logits)
    if z is None:
        return None
    y = _class_labels(y_true, *z.shape)
    if y is None:
        return None
    w = _multiclass_weights(weights, y, z.shape[1], z.dtype)
    if w is None:
        return None
    fit = _matrix_fit(y, z, w, "odir", reg_lambda, reg_mu, z.dtype)
    if fit is None:
        return None
    return MatrixScalingCalibrator(*(_device(a) for a in fit))


def fit_dirichlet(
    y_true: Any,
    probs: Any,
    *,
    regularization: Any = "odir",
    reg_lambda: Any = 0.0,
    reg_mu: Any = 0.0,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_dirichlet` on the host: matrix scaling of the
    log probabilities (taken in the dtype, clipped with ``eps``, as the kernel)."""
    from bayescal.classification._scaling import (
        REGULARIZATIONS,
        DirichletCalibrator,
        _check_reg,
    )

    if regularization not in REGULARIZATIONS or not _eps_ok(eps):
        return None
    reg_lambda, reg_mu = _check_reg(reg_lambda, "reg_lambda"), _check_reg(reg_mu, "reg_mu")
    if regularization == "l2" and reg_mu != 0:
        return None
    p = _floats(probs, _SCALING_MAX)
    if p is None or p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        return None
    n, k = p.shape
    if not _normal(p.reshape(-1), 0, 1):
        return None
    # rows summing to 1 (multiclass_inputs' tolerance, halved: near it, the kernel decides)
    tol = 1e-4 if p.dtype == _F32 else 1e-8
    if not (np.abs(p.astype(np.float64).sum(axis=1) - 1) <= 0.5 * tol * k).all():
        return None
    if eps is None:
        if not (p.min() > 0 and p.max() < 1):
            return None  # log(0): the kernel's message
        q = p
    else:
        q = np.clip(p, p.dtype.type(eps), p.dtype.type(1 - eps))
    x = np.log(q)
    if not _normal(x.reshape(-1)):
        return None
    y = _class_labels(y_true, n, k)
    if y is None:
        return None
    w = _multiclass_weights(weights, y, k, p.dtype)
    if w is None:
        return None
    fit = _matrix_fit(y, x, w, regularization, reg_lambda, reg_mu, p.dtype)
    if fit is None:
        return None
    return DirichletCalibrator(*(_device(a) for a in fit), eps)


def fit_temperature(y_true: Any, logits: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_temperature` on the host: the kernel's Newton
    solver (:func:`~bayescal._src.newton.minimize_host`) on ``beta = 1 / T >= 0``
    (convex, one parameter) in float64. Left to the kernel path: its
    errors (no improvement on the uniform forecast, every example ranked correctly)
    and its warnings (logits in [0, 1], no convergence)."""
    from bayescal.classification._calibrators import TemperatureCalibrator

    z = _floats(logits, _SCALING_MAX)
    if z is None or z.size == 0 or z.ndim not in (1, 2) or not _normal(z.reshape(-1)):
        return None
    dtype = z.dtype
    if z.ndim == 1:
        data = _binary(y_true, z, None, False)
        if data is None:
            return None
        labels = data[0]
        if not (labels.min() == 0 and labels.max() == 1):
            return None  # one class: the kernel's message
        y = labels.astype(np.intp)
        zz = np.stack([np.zeros(z.size), z.astype(np.float64)], axis=1)
    else:
        if z.shape[1] < 2:
            return None
        y = _class_labels(y_true, *z.shape)
        if y is None:
            return None
        zz = z.astype(np.float64)
    n = zz.shape[0]
    if weights is None:
        w = np.ones(n)
    else:
        w = _observation_weights(weights, np.empty(n, dtype))
        if w is _BAD:
            return None
        w = w.astype(np.float64)
    live = w > 0
    if ((zz >= 0) & (zz <= 1) | ~live[:, None]).all():
        return None  # probabilities passed as logits: the kernel path warns
    rows = np.arange(n)
    z_true = zz[rows, y]
    if ((z_true >= zz.max(axis=1)) | ~live).all():
        return None  # no finite optimum: the kernel's message
    if not np.einsum("n,n->", w, zz.mean(axis=1) - z_true) < 0:
        return None  # the NLL does not decrease for T > 0: the kernel's message
    wn = w / w.sum()

    zt = np.ascontiguousarray(zz.T)  # [C, N]: the loops run over contiguous N

    def objective(x: np.ndarray) -> _newton.Derivatives:
        s = x[0] * zt
        top = s.max(axis=0)
        e = np.exp(s - top)
        total = e.sum(axis=0)
        q = e / total
        loss = top + np.log(total) - x[0] * z_true
        mean = np.einsum("kn,kn->n", q, zt)
        var = np.einsum("kn,kn->n", q, (zt - mean) ** 2)
        value = float(np.einsum("n,n->", wn, loss))
        grad = np.einsum("n,n->", wn, mean - z_true)
        hess = np.einsum("n,n->", wn, var)
        return _newton.Derivatives(value, grad[None], hess[None, None], value)

    # the kernel's start (beta = 1) and bound (beta >= 0)
    res = _newton.minimize_host(objective, np.ones(1), lower=np.zeros(1))
    if not res.converged:
        return None  # out of steps: the kernel path warns
    beta = res.x[0]
    temperature = np.asarray(1 / beta, dtype)
    if not _normal(temperature.reshape(1), _limits(dtype).tiny):
        return None
    return TemperatureCalibrator(_device(temperature))


def fit_beta(y_true: Any, y_prob: Any, *, eps: Any = None, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_beta` on the host: the logistic regression on
    ``(ln p, -ln(1 - p))`` with ``a, b >= 0`` (features in the dtype, as the kernel)
    by :func:`logistic_rows` from the identity map (float64)."""
    if not _eps_ok(eps):
        return None
    from bayescal.classification._calibrators import BetaCalibrator

    data = _binary(y_true, y_prob, weights, True)
    if data is None:
        return None
    y, p, w = data
    dt = p.dtype
    if eps is None:
        if not (p.min() > 0 and p.max() < 1):
            return None  # log(0): the kernel's message
        q = p
    else:
        q = np.clip(p, dt.type(eps), dt.type(1 - eps))
    features = [np.log(q), -np.log1p(-q)]
    if not all(_normal(f) for f in features):
        return None
    w = np.ones(y.size) if w is None else w.astype(np.float64)
    if not (w[y == 1].sum() > 0 and w[y == 0].sum() > 0):
        return None  # one class (of positive weight): the kernel path decides
    theta, converged = logistic_rows(
        [f.astype(np.float64) for f in features],
        y.astype(np.float64),
        w[None],
        np.array([1.0, 1.0, 0.0]),
        np.array([0.0, 0.0, -np.inf]),
        soft_labels=False,
    )
    if not converged[0]:
        return None
    out = theta[0].astype(dt)
    if not _normal(out):
        return None
    return BetaCalibrator(*(_device(np.asarray(v)) for v in out), eps)


def _softmax_rows(eta: np.ndarray, dtype: Any) -> np.ndarray:
    """``softmax(eta)`` over the last axis (float64 inside) in ``dtype``, flushed."""
    e = np.exp(eta - eta.max(axis=-1, keepdims=True))
    return _flushed((e / e.sum(axis=-1, keepdims=True)).astype(dtype))


def _scaling_params(calibrator: Any, matrix: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """A scaling calibrator's ``(coef, intercept)``: finite, of one float dtype."""
    coef, intercept = _floats(calibrator.coef), _vector(calibrator.intercept)
    if coef is None or intercept is None or not isinstance(calibrator.coef, jax.Array):
        return None
    k = intercept.size
    if coef.shape != ((k, k) if matrix else (k,)) or coef.dtype != intercept.dtype:
        return None
    return (coef, intercept) if _normal(coef.reshape(-1)) and _normal(intercept) else None


def _class_columns(x: Any, k: int) -> np.ndarray | None:
    """``[N, k]`` inputs (N >= 1) of a calibrator's call, or None."""
    a = _floats(x, _SCALING_MAX)
    return a if a is not None and a.ndim == 2 and a.shape[0] and a.shape[1] == k else None


def vector_scaling_apply(calibrator: Any, logits: Any) -> jax.Array | None:
    """``VectorScalingCalibrator.__call__`` on the host."""
    params = _scaling_params(calibrator, False)
    if params is None:
        return None
    coef, intercept = params
    z = _class_columns(logits, coef.size)
    if z is None or not _normal(z.reshape(-1)):
        return None
    dt = z.dtype
    eta = z * coef.astype(dt) + intercept.astype(dt)  # in the dtype, as the kernel
    return _device(_softmax_rows(eta.astype(np.float64), dt))


def _matrix_map(coef: np.ndarray, intercept: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``softmax(x W' + b)`` in ``x``'s dtype (float64 inside, no BLAS)."""
    dt = x.dtype
    w64, b64 = coef.astype(dt).astype(np.float64), intercept.astype(dt).astype(np.float64)
    return _softmax_rows(np.einsum("nj,kj->nk", x.astype(np.float64), w64) + b64, dt)


def matrix_scaling_apply(calibrator: Any, logits: Any) -> jax.Array | None:
    """``MatrixScalingCalibrator.__call__`` on the host."""
    params = _scaling_params(calibrator, True)
    if params is None:
        return None
    z = _class_columns(logits, params[1].size)
    if z is None or not _normal(z.reshape(-1)):
        return None
    return _device(_matrix_map(*params, z))


def dirichlet_apply(calibrator: Any, probs: Any) -> jax.Array | None:
    """``DirichletCalibrator.__call__`` on the host (the log in the dtype)."""
    params = _scaling_params(calibrator, True)
    if params is None or not _eps_ok(calibrator.eps):
        return None
    p = _class_columns(probs, params[1].size)
    if p is None or not _normal(p.reshape(-1), 0, 1):
        return None
    eps = calibrator.eps
    if eps is None:
        if not (p.min() > 0 and p.max() < 1):
            return None  # log(0): the kernel's message
    else:
        p = np.clip(p, p.dtype.type(eps), p.dtype.type(1 - eps))
    return _device(_matrix_map(*params, np.log(p)))


def temperature_apply(calibrator: Any, logits: Any) -> jax.Array | None:
    """``TemperatureCalibrator.__call__`` on the host."""
    t = _scalar(calibrator.temperature)
    z = _floats(logits, _SCALING_MAX)
    if t is None or z is None or z.ndim not in (1, 2) or z.size == 0:
        return None
    dt = z.dtype
    if not (_normal(z.reshape(-1)) and _normal(t.reshape(1), _limits(t.dtype).tiny)):
        return None
    scaled = (z / t.astype(dt)).astype(np.float64)  # in the dtype, as the kernel
    if z.ndim == 2:
        return _device(_softmax_rows(scaled, dt))
    return _device(_flushed((0.5 + 0.5 * np.tanh(0.5 * scaled)).astype(dt)))


def beta_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``BetaCalibrator.__call__`` on the host (0 and 1 map to the map's limits)."""
    a, b, c = (_scalar(getattr(calibrator, name)) for name in "abc")
    p = _floats(y_prob)
    if a is None or b is None or c is None or p is None or p.size == 0:
        return None
    if not _eps_ok(calibrator.eps) or not _normal(p.reshape(-1), 0, 1):
        return None
    if not all(_normal(v.reshape(1)) for v in (a, b, c)):
        return None
    dt = p.dtype
    if calibrator.eps is not None:
        p = np.clip(p, dt.type(calibrator.eps), dt.type(1 - calibrator.eps))
    q = p.astype(np.float64)
    a64, b64, c64 = (float(v.astype(dt)) for v in (a, b, c))
    eta = (a64 * np.log(q) if a64 else 0.0) - (b64 * np.log1p(-q) if b64 else 0.0) + c64
    eta = np.broadcast_to(eta, p.shape)
    return _device(_flushed((0.5 + 0.5 * np.tanh(0.5 * eta)).astype(dt)))
