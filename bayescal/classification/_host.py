"""NumPy arithmetic that several classification modules' host twins share.

Each NumPy twin (the host path: small concrete inputs on a CPU, see
:mod:`bayescal._src.host` for the rule and the switch) lives beside its kernel, in its
method's module, as ``_twin_<name>``; this module holds only what twins of several
modules use (the binary inputs, bin edges and indices, the logistic fits of Platt and
scaling-binning, the isotonic map of the isotonic and Venn-ABERS calibrators), and
imports no other module of the branch (no import circle). Twins equal their kernels
(tests/test_host_path.py).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np

from bayescal._src import newton as _newton
from bayescal._src.binning import bin_index
from bayescal._src.host import (
    _BAD,
    HOST_MAX,
    _device,
    _floats,
    _flushed,
    _interp,
    _knots,
    _normal,
    _observation_weights,
    _vector,
)

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


def sigmoid(x: Any, xp: Any = np) -> Any:
    """The logistic function ``1 / (1 + exp(-x))``, for the host twins (NumPy) and the
    kernels that share their arithmetic (``xp=jax.numpy``: ``jax.nn.sigmoid``).

    Accurate to a few ulp relative in both tails, without overflow: in NumPy from
    ``e = exp(-|x|)`` as ``1 / (1 + e)`` or ``e / (1 + e)``. (``0.5 + 0.5 tanh(x / 2)``
    cancels where the result is small: 6e-4 relative at ``x = -30`` in float64, 4e-6 at
    ``x = -3.4`` in float32.)
    """
    if xp is not np:
        return jax.nn.sigmoid(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e)


def softmax(eta: Any, xp: Any = np) -> Any:
    """``softmax`` over the last axis, for the host twins (NumPy) and the kernels that
    share their arithmetic (``xp=jax.numpy``: ``jax.nn.softmax``, the same
    ``exp(eta - max) / sum``, with a derivative that stays finite at -inf)."""
    if xp is not np:
        return jax.nn.softmax(eta, axis=-1)
    e = np.exp(eta - eta.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logit_probabilities(eta: Any, xp: Any = np) -> Any:
    """Probabilities from logits, once for both paths: :func:`sigmoid` of 1-D
    (binary) logits, :func:`softmax` over the classes of ``[N, C]`` ones (temperature
    scaling's map after ``z / T``; vector and matrix scaling take the softmax)."""
    return sigmoid(eta, xp) if eta.ndim == 1 else softmax(eta, xp)


def histogram_map(edges: Any, values: Any, p: Any, xp: Any = np, side: Any = "right") -> Any:
    """Histogram binning's map: the value of the bin ``[e_k, e_{k+1})`` holding each
    probability (``binning.bin_index``; ``side="left"``: ``(e_k, e_{k+1}]``, as
    scaling-binning bins), once for both paths: the calibrators' ``__call__``
    (``xp=jax.numpy``) and their host twins."""
    return values.astype(p.dtype)[bin_index(p, edges.astype(p.dtype), xp, side)]


def _times(coef: Any, x: Any, xp: Any = np) -> Any:
    """``coef * x`` with 0 * inf = 0 (a dropped feature stays dropped at p = 0 or 1)."""
    return xp.where(coef == 0, 0, coef * x)


def platt_map(a: Any, b: Any, f: Any, xp: Any = np) -> Any:
    """Platt's map ``1 / (1 + exp(a f + b))`` of the scores or log-odds ``f``, once for
    both paths: ``PlattCalibrator.__call__`` (``xp=jax.numpy``, in the dtype) and its
    host twin (NumPy, in float64)."""
    return sigmoid(-(_times(a, f, xp) + b), xp)


def beta_map(a: Any, b: Any, c: Any, q: Any, xp: Any = np) -> Any:
    """The beta calibration map ``sigmoid(a ln q - b ln(1 - q) + c)`` (Kull et al.
    2017) of the (clipped) probabilities ``q``, once for both paths (as
    :func:`platt_map`)."""
    return sigmoid(_times(a, xp.log(q), xp) - _times(b, xp.log1p(-q), xp) + c, xp)


def _platt_map(a: np.ndarray, b: np.ndarray, f: np.ndarray, dtype: Any) -> np.ndarray:
    """:func:`platt_map` in float64, then in ``dtype`` with subnormals flushed."""
    a64, b64, f64 = (v.astype(np.float64) for v in (a, b, f))
    return _flushed(platt_map(a64, b64, f64).astype(dtype))


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


# --------------------------------------------------------------------------- tests


# --------------------------------------------------------------------------- scaling-binning


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


# --------------------------------------------------------------------------- BBQ


# --------------------------------------------------------------------------- smooth ECE


# --------------------------------------------------------------------------- classification SKCE


# --------------------------------------------------------------------------- scaling
# [N, C] inputs: the scaling fits' first calls compile a Newton solver (0.5-0.6 s at
# N = 1e4, C = 5, i.e. 5e4 values, above HOST_MAX); here that many values, and a
# Newton step of at most about _SCALING_COST multiply-adds (N P^2, P parameters).
_SCALING_MAX = 1 << 17


def _class_labels(y_true: Any, n: int, k: int) -> np.ndarray | None:
    """Integer class labels ``[n]`` in ``[0, k)`` (``validation.check_class_labels``
    accepts them), or None."""
    y = _floats(y_true, _SCALING_MAX)
    if y is None or y.shape != (n,):
        return None
    if not ((y >= 0) & (y < k) & (y == np.round(y))).all():  # NaN fails
        return None
    return y.astype(np.intp)


def _softmax_rows(eta: np.ndarray, dtype: Any) -> np.ndarray:
    """``softmax(eta)`` over the last axis (float64 inside) in ``dtype``, flushed."""
    return _flushed(softmax(eta).astype(dtype))


