"""Venn-ABERS and centered isotonic calibration, both built on the isotonic fit.

:func:`fit_venn_abers` is the inductive Venn-ABERS predictor (IVAP) of Vovk & Petej
(2014): for a new score it returns the two isotonic-calibrated probabilities
``(p0, p1)`` obtained by adding the test point to the calibration set with label 0 and
with label 1, and their log-loss-minimax merger ``p1 / (1 - p0 + p1)``, which never
equals 0 or 1. :func:`fit_centered_isotonic` is centered isotonic regression (Oron &
Flournoy 2017): the PAV fit of :func:`fit_isotonic` with each flat block collapsed to
one point at its weighted mean score and linear interpolation between the points.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.host import _F32, _F64, _device, _floats, _normal
from bayescal._src.host import first as host_first
from bayescal._src.pytree import pytree_dataclass
from bayescal._src.reduce import check_weights
from bayescal._src.sorting import gather_all, mesh_safe_callback
from bayescal._src.ties import isotonic_fit, pool_ties
from bayescal._src.validation import host_resident
from bayescal.classification import _host
from bayescal.classification._calibrators import (
    _isotonic_apply,
    _scores,
    _zero_weight_to_a_tie,
)
from bayescal.classification._host import _binary
from bayescal.classification._inputs import binary_inputs, isotonic_fit_compiler_options

__all__ = [
    "VennAbersCalibrator",
    "CrossVennAbersCalibrator",
    "CenteredIsotonicCalibrator",
    "fit_venn_abers",
    "fit_cross_venn_abers",
    "fit_centered_isotonic",
]


# --------------------------------------------------------------------------- Venn-ABERS
def _hull_parents(c: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``parent[k]``: the vertex before point ``k`` on the lower convex hull of points
    ``0..k`` of the diagram ``(c, z)`` (``c`` strictly increasing); ``parent[0] = 0``.

    Following ``parent`` from ``k`` walks that hull right to left, so the hulls of all
    prefixes form one tree rooted at point 0. Andrew's monotone chain: one stack, each
    point pushed once and popped at most once (O(M)).
    """
    cl, zl = c.tolist(), z.tolist()
    n = len(cl)
    parent = [0] * n
    stack = [0] * n
    top = 0
    for k in range(1, n):
        ck, zk = cl[k], zl[k]
        while top:  # the top leaves unless strictly below the chord (top - 1) -> k
            a, b = stack[top - 1], stack[top]
            ca, za = cl[a], zl[a]
            if (zl[b] - za) * (ck - ca) < (zk - za) * (cl[b] - ca):
                break
            top -= 1
        parent[k] = stack[top]
        top += 1
        stack[top] = k
    return np.asarray(parent, dtype=np.intp)


def _ancestors(parent: np.ndarray, root: int) -> list[np.ndarray]:
    """Binary lifting: entry ``l`` maps a vertex to its ``2**l``-th ancestor (or the
    root), as many levels as the deepest hull needs."""
    levels = [parent]
    while not np.all(levels[-1] == root):
        levels.append(levels[-1][levels[-1]])
    return levels


def _first_on_chain(start: np.ndarray, up: list[np.ndarray], pred) -> np.ndarray:
    """For each start vertex, the first vertex ``v`` on its chain to the root (start
    included) with ``pred(v)``, for a ``pred`` that is false on an initial stretch of
    every chain and true from there on (true at the root): binary search by lifting."""
    done = pred(start)
    cur = start
    for level in reversed(up):
        v = level[cur]
        cur = np.where(done | pred(v), cur, v)  # jump while still on the false stretch
    return np.where(done, cur, up[0][cur])


def _gap_fits(c: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Isotonic fit at a unit-weight test point of label 0 and of label 1 in each gap.

    ``c``, ``z`` (length ``M + 1``, leading 0): cumulative weights and weighted labels
    of the ``M`` pooled calibration scores, the points ``P_0..P_M`` of the cumulative
    sum diagram (CSD). A test point of label ``L`` in gap ``k`` (after ``k`` pooled
    scores) makes the CSD ``P_0..P_k, P_k + (1, L), .., P_M + (1, L)``; the isotonic
    fit is the left slope of its greatest convex minorant (Barlow et al. 1972), so the
    fit at the test point is the slope of the GCM over the step from ``P_k`` to
    ``P_k + (1, L)``: the bridge (common lower tangent) of the lower hull of
    ``P_0..P_k`` and the lower hull of ``P_k..P_M`` moved by ``(1, L)``, i.e.
    ``max_{i <= k} min_{j >= k} (z_j - z_i + L) / (c_j - c_i + 1)`` (Vovk & Petej 2014;
    Vovk, Petej & Fedorova 2015 precompute it for every gap from the GCMs).

    Here: the prefix hulls and the suffix hulls are two trees of parent pointers (one
    monotone-chain pass each). For every gap at once, the bridge's left end is the
    first vertex ``u`` on the prefix hull (walking left from ``P_k``) whose incoming
    edge is no steeper than the tangent from ``u`` to the moved suffix hull, and that
    tangent touches the first vertex ``w`` (walking right from ``P_k``) whose outgoing
    edge is at least as steep as the line from ``u`` to ``w``. Both are monotone along
    a hull, so both are binary searches over ancestors: O(M log M) vectorized after
    the O(M) hull passes, for both labels together. Float64; the fits of label 0 and 1.
    """
    m1 = c.size
    m = m1 - 1
    pl = _hull_parents(c, z)
    pr = (m - _hull_parents(-c[::-1], z[::-1]))[::-1]  # the suffix hulls, mirrored
    in_slope = np.full(m1, -np.inf)
    in_slope[1:] = (z[1:] - z[pl[1:]]) / (c[1:] - c[pl[1:]])
    out_slope = np.full(m1, np.inf)
    out_slope[:-1] = (z[pr[:-1]] - z[:-1]) / (c[pr[:-1]] - c[:-1])
    up_left, up_right = _ancestors(pl, 0), _ancestors(pr, m)
    k = np.concatenate([np.arange(m1), np.arange(m1)])
    label = np.repeat([0.0, 1.0], m1)

    def tangent(u: np.ndarray) -> np.ndarray:
        # the suffix hull moved by (1, L) seen from P_u: moving P_u by (-1, -L) instead
        cu, zu = c[u] - 1.0, z[u] - label

        def slope(w):
            return (z[w] - zu) / (c[w] - cu)

        w = _first_on_chain(k, up_right, lambda w: slope(w) <= out_slope[w])
        return slope(w)

    u = _first_on_chain(k, up_left, lambda u: in_slope[u] <= tangent(u))
    fit = np.clip(tangent(u), 0.0, 1.0)
    return fit[:m1], fit[m1:]


def _host_venn_abers(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple:
    """Pooled thresholds and the p0/p1 tables, padded to ``n + 1`` (numpy, one row)."""
    s, y, w = np.asarray(s), np.asarray(y), np.asarray(w)
    if s.ndim > 1:  # batched by vmap (expand_dims: unbatched operands broadcast)
        shape = np.broadcast_shapes(s.shape, y.shape, w.shape)
        rows = [
            _host_venn_abers(*r)
            for r in zip(
                *(np.broadcast_to(a, shape).reshape(-1, shape[-1]) for a in (s, y, w)),
                strict=True,
            )
        ]
        return tuple(
            np.stack([r[i] for r in rows]).reshape(shape[:-1] + (shape[-1] + 1,))
            for i in range(3)
        )
    n = s.size
    bad = not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0)
    if bad or not (np.all(np.isfinite(s)) and np.all(np.isfinite(y))):
        nan = np.full(n + 1, np.nan, s.dtype)
        return nan, nan, nan
    keep = w > 0
    pooled = pool_ties(s[keep], y[keep].astype(np.float64), w[keep])
    m = pooled.thresholds.size
    c = np.concatenate([[0.0], np.cumsum(pooled.weight, dtype=np.float64)])
    z = np.concatenate([[0.0], np.cumsum(pooled.weight * pooled.mean, dtype=np.float64)])
    pad = n + 1 - m
    thresholds = np.concatenate([pooled.thresholds, np.full(pad, pooled.thresholds[-1])])
    tables = [
        np.concatenate([f, np.full(pad - 1, f[-1])]).astype(s.dtype) for f in _gap_fits(c, z)
    ]
    return thresholds.astype(s.dtype), tables[0], tables[1]


def _venn_abers_kernel(s: jax.Array, y: jax.Array, w: jax.Array) -> tuple:
    size = s.shape[:-1] + (s.shape[-1] + 1,)
    out = tuple(jax.ShapeDtypeStruct(size, s.dtype) for _ in range(3))
    # (on a mesh the data come replicated by gather_all, and are cut into pieces that
    # JAX copies to the callback synchronously: mesh_safe_callback)
    return mesh_safe_callback(_host_venn_abers, out, s, y, w, vmap_method="expand_dims")


@jax.jit
def _venn_abers_apply(thresholds, p0_table, p1_table, s):
    t = thresholds.astype(s.dtype)
    # A label-0 point at a calibration score has the fit of one in the gap just after
    # it, a label-1 point the fit of one in the gap just before (Vovk & Petej 2014).
    p0 = p0_table.astype(s.dtype)[jnp.searchsorted(t, s, side="right")]
    p1 = p1_table.astype(s.dtype)[jnp.searchsorted(t, s, side="left")]
    return p0, p1


# --------------------------------------------------------------------------- host twins
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


def _twin_venn_abers_apply(calibrator: Any, y_score: Any, output: str = "pair") -> Any:
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


def _twin_cross_venn_abers_apply(calibrator: Any, y_score: Any, output: str = "pair") -> Any:
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


def _twin_venn_abers_probability(calibrator: Any, y_score: Any) -> Any:
    """``VennAbersCalibrator.probability`` on the host."""
    return _twin_venn_abers_apply(calibrator, y_score, "probability")


def _twin_venn_abers_interval(calibrator: Any, y_score: Any) -> Any:
    """``VennAbersCalibrator.interval`` on the host."""
    return _twin_venn_abers_apply(calibrator, y_score, "interval")


def _twin_cross_venn_abers_probability(calibrator: Any, y_score: Any) -> Any:
    """``CrossVennAbersCalibrator.probability`` on the host."""
    return _twin_cross_venn_abers_apply(calibrator, y_score, "probability")


def _twin_cross_venn_abers_interval(calibrator: Any, y_score: Any) -> Any:
    """``CrossVennAbersCalibrator.interval`` on the host."""
    return _twin_cross_venn_abers_apply(calibrator, y_score, "interval")


def _twin_fit_venn_abers(y_true: Any, y_score: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_venn_abers` on the host (its kernel's
    callback, called directly: no program to compile)."""

    data = _binary(y_true, y_score, weights, probabilities=False)
    if data is None:
        return None
    y, s, w = data
    out = _host_venn_abers(s, y, np.ones_like(s) if w is None else w)
    return VennAbersCalibrator(*(_device(a) for a in out))


def _twin_fit_cross_venn_abers(
    y_true: Any, y_score: Any, folds: Any, *, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.fit_cross_venn_abers` on the host."""

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


def _twin_fit_centered_isotonic(y_true: Any, y_score: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_centered_isotonic` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted PAV)
    from bayescal._src.isotonic import _pav_row
    from bayescal._src.ties import pool_ties

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


@pytree_dataclass(data=("thresholds", "p0_table", "p1_table"))
class VennAbersCalibrator:
    """Inductive Venn-ABERS predictor: a pair of isotonic probabilities per score.

    Create it with :func:`fit_venn_abers`. Calling it on scores returns the pair
    ``(p0, p1)``; :meth:`probability` returns the merged ``p1 / (1 - p0 + p1)``.

    Attributes
    ----------
    thresholds : Array [N + 1]
        The ``M`` distinct calibration scores (of positive weight) in increasing
        order, then the largest repeated (padding, so that fits trace under ``jit``).
    p0_table, p1_table : Array [N + 1]
        Entry ``k`` is the isotonic fit at a test point placed between thresholds
        ``k - 1`` and ``k`` (before the first for ``k = 0``, after the last for
        ``k = M``) with label 0, resp. 1; the padding repeats entry ``M``.
    """

    thresholds: jax.Array
    p0_table: jax.Array
    p1_table: jax.Array

    def _bucketed(self) -> VennAbersCalibrator:
        fields = (self.thresholds, self.p0_table, self.p1_table)
        if not all(_v.paddable(k) and k.ndim == 1 for k in fields):
            return self
        size = bucket_size(self.thresholds.shape[0] - 1) + 1
        return VennAbersCalibrator(*(pad_axis(k, size) for k in fields))

    @host_first(_twin_venn_abers_apply)
    def __call__(self, y_score: Any) -> tuple[jax.Array, jax.Array]:
        """The multiprobability pair ``(p0, p1)`` of each score, ``p0 <= p1``."""
        cal = self._bucketed()
        return _apply_venn_abers(cal.thresholds, cal.p0_table, cal.p1_table, y_score)

    @host_first(_twin_venn_abers_probability)
    def probability(self, y_score: Any) -> jax.Array:
        """Merged probability ``p1 / (1 - p0 + p1)``, strictly inside (0, 1).

        The minimiser of the worst-case log-loss over the pair (Vovk & Petej 2014).

        Parameters
        ----------
        y_score : array_like
            Scores of the test cases, any shape.

        Returns
        -------
        Array
            The merged probabilities, the shape of ``y_score``.
        """
        cal = self._bucketed()
        return _apply_venn_abers(
            cal.thresholds, cal.p0_table, cal.p1_table, y_score, output="probability"
        )

    @host_first(_twin_venn_abers_interval)
    def interval(self, y_score: Any) -> jax.Array:
        """``[p0, p1]`` stacked on a last axis of size 2 (the probability interval).

        Parameters
        ----------
        y_score : array_like
            Scores of the test cases, any shape.

        Returns
        -------
        Array
            Shape ``y_score.shape + (2,)``: ``p0`` then ``p1``.
        """
        cal = self._bucketed()
        return _apply_venn_abers(
            cal.thresholds, cal.p0_table, cal.p1_table, y_score, output="interval"
        )


@jax.jit
def _merge(p0: jax.Array, p1: jax.Array) -> jax.Array:
    return p1 / (1 - p0 + p1)


@_v.validated(
    fuse=True,
    bucket={"y_score": -1},
    per_observation=lambda kw: -2 if kw.get("output") == "interval" else -1,
)
def _apply_venn_abers(thresholds, p0_table, p1_table, y_score: Any, output: str = "pair"):
    s = _scores(y_score, "y_score", probabilities=False)
    p0, p1 = _venn_abers_apply(thresholds, p0_table, p1_table, s)
    if output == "probability":
        return _merge(p0, p1)
    if output == "interval":
        return jnp.stack([p0, p1], axis=-1)
    return p0, p1


@host_first(_twin_fit_venn_abers)
@_v.validated(
    fuse=True,
    bucket={"y_true": 0, "y_score": 0, "weights": 0},
    per_observation=(0, 1),
    compiler_options=isotonic_fit_compiler_options,
)
def fit_venn_abers(y_true: Any, y_score: Any, *, weights: Any = None) -> VennAbersCalibrator:
    r"""Fit an inductive Venn-ABERS predictor (IVAP) on calibration labels and scores.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_score : array_like, shape [N]
        Scores or probabilities (any finite reals; only their order matters).
    weights : array_like, shape [N], optional
        Observation weights of the calibration set, as in :func:`fit_isotonic`
        (finite, ``>= 0``, not all 0); the test point always enters with weight 1,
        which the validity theorem covers only for unit weights.

    Returns
    -------
    VennAbersCalibrator
        Called on scores it returns ``(p0, p1)``; ``.probability(scores)`` the merged
        probability and ``.interval(scores)`` the pair stacked.

    Notes
    -----
    For a test score :math:`s`, :math:`p_0(s)` and :math:`p_1(s)` are the values at
    :math:`s` of the isotonic fit (:func:`fit_isotonic`, ties pooled) of the
    calibration set plus the point :math:`(s, 0)`, resp. :math:`(s, 1)`. Exactly, not
    approximately: both are constant between consecutive calibration scores, so the
    fit precomputes them for the ``M + 1`` gaps as slopes of the greatest convex
    minorant of the cumulative sum diagram with the test point added (Vovk, Petej &
    Fedorova 2015): two monotone-chain passes build the lower hulls of all prefixes
    and suffixes as parent-pointer trees, then every gap's bridge between its two
    hulls is found by binary search over ancestors, O(N log N) in all (numpy on the
    host, through ``jax.pure_callback``, so ``jax.jit`` and ``jax.vmap`` work).
    Calling the calibrator is a jitted ``searchsorted`` lookup. A test score equal to a
    calibration score pools with it; its label-0 fit is the one of the gap after it
    and its label-1 fit the one of the gap before it. The pair is a valid
    multiprobability prediction: one of the two is calibrated (Vovk & Petej 2014).
    :math:`0 \le p_0 \le p_1 \le 1`, and the merged probability
    :math:`p = p_1 / (1 - p_0 + p_1)` lies strictly inside (0, 1), since
    :math:`p_1 > 0` and :math:`p_0 < 1` (the test point's own label is in its block):
    unlike plain :func:`fit_isotonic`, the merged Venn-ABERS probability never gives
    an infinite log-loss (``fit_isotonic(..., prior=)`` is the other way to that).
    The tables are computed in float64 and stored in ``y_score``'s dtype.

    References
    ----------
    Vovk, V. and Petej, I. (2014). Venn-Abers predictors. *UAI*, 829-838.
    Vovk, V., Petej, I. and Fedorova, V. (2015). Large-scale probabilistic predictors
    with and without guarantee of validity. *NeurIPS*.

    Examples
    --------
    >>> from bayescal.classification import fit_venn_abers
    >>> cal = fit_venn_abers([0, 1, 0, 1, 1], [0.1, 0.3, 0.5, 0.7, 0.9])
    >>> p0, p1 = cal([0.2, 0.8])
    >>> [round(v, 3) for v in p0.tolist()], [round(v, 3) for v in p1.tolist()]
    ([0.0, 0.5], [0.667, 1.0])
    >>> [round(v, 3) for v in cal.probability([0.2, 0.8]).tolist()]
    [0.4, 0.667]
    """
    y_true, y_score, weights = gather_all((y_true, y_score, weights), "A Venn-ABERS fit")
    y, s = binary_inputs(y_true, y_score, prob_name="y_score", probabilities=False)
    w = _v.mask_weights(check_weights(weights, s.shape[0], s.dtype), s.shape, s.dtype)
    w = jnp.ones_like(s) if w is None else w.astype(s.dtype)
    return VennAbersCalibrator(*_venn_abers_kernel(s, y, w))


# ------------------------------------------------------------------ cross Venn-ABERS
def _check_fold_ids(folds: Any, n: int) -> tuple[np.ndarray, int]:
    if isinstance(folds, jax.core.Tracer):
        raise TypeError(
            "folds must be concrete integer fold ids (a numpy array or list), not a "
            "traced value: it fixes the number of folds. Close over it under jax.jit "
            "or jax.vmap (jax.jit(lambda y, s: fit_cross_venn_abers(y, s, folds)))."
        )
    if isinstance(folds, np.ma.MaskedArray):
        raise TypeError(
            "folds is a masked array; its mask would be dropped. Pass the fold ids of "
            "the rows to use (folds.compressed(), with y_true and y_score filtered alike)."
        )
    fold = np.asarray(folds)
    if fold.ndim != 1 or not np.issubdtype(fold.dtype, np.integer) or fold.shape[0] != n:
        raise ValueError(
            f"folds must be integer fold ids 0 .. K-1, one per observation (shape ({n},)); "
            f"got dtype {fold.dtype} and shape {fold.shape}. Assign each calibration row "
            "the fold whose model scored it out of fold."
        )
    present = np.unique(fold)
    num = int(present[-1]) + 1 if present.size else 0
    if present.size == 0 or present[0] < 0 or num < 2 or present.size != num:
        raise ValueError(
            f"folds must use every id 0 .. K-1 with K >= 2; got ids {present.tolist()}. "
            "Number the folds consecutively from 0."
        )
    return fold.astype(np.int32), num


@pytree_dataclass(data=("thresholds", "p0_table", "p1_table"))
class CrossVennAbersCalibrator:
    """Cross Venn-ABERS predictor: one inductive Venn-ABERS predictor per fold.

    Create it with :func:`fit_cross_venn_abers`. Row ``k`` of each attribute is the
    :class:`VennAbersCalibrator` fitted on fold ``k`` (:meth:`fold` returns it).

    Attributes
    ----------
    thresholds, p0_table, p1_table : Array [K, N + 1]
        The folds' tables, as in :class:`VennAbersCalibrator` (each row padded to the
        ``N + 1`` of the whole calibration set).
    """

    thresholds: jax.Array
    p0_table: jax.Array
    p1_table: jax.Array

    def _bucketed(self) -> CrossVennAbersCalibrator:
        fields = (self.thresholds, self.p0_table, self.p1_table)
        if not all(_v.paddable(k) and k.ndim == 2 for k in fields):
            return self
        size = bucket_size(self.thresholds.shape[-1] - 1) + 1
        return CrossVennAbersCalibrator(*(pad_axis(k, size) for k in fields))

    @property
    def num_folds(self) -> int:
        """The number ``K`` of folds (of IVAPs)."""
        return int(self.thresholds.shape[-2])

    def fold(self, k: int) -> VennAbersCalibrator:
        """The IVAP of fold ``k`` (its calibration rows only).

        Parameters
        ----------
        k : int
            The fold, ``0 <= k < K``.

        Returns
        -------
        VennAbersCalibrator
        """
        return VennAbersCalibrator(self.thresholds[k], self.p0_table[k], self.p1_table[k])

    @host_first(_twin_cross_venn_abers_apply)
    def __call__(self, y_score: Any) -> tuple[jax.Array, jax.Array]:
        """The folds' pairs ``(p0, p1)``, each of shape [M, K], for scores [M, K].

        Column ``k`` of ``y_score`` is the test score from fold ``k``'s model (the one
        that scored fold ``k`` out of fold). With one model for all folds, repeat its
        scores: ``np.repeat(s[:, None], K, axis=1)``.
        """
        cal = self._bucketed()
        return _apply_cross_venn_abers(cal.thresholds, cal.p0_table, cal.p1_table, y_score)

    @host_first(_twin_cross_venn_abers_probability)
    def probability(self, y_score: Any) -> jax.Array:
        """Merged probability ``GM(p1) / (GM(1 - p0) + GM(p1))`` over the folds.

        ``GM`` is the geometric mean over the ``K`` folds: the log-loss minimax merger
        of Vovk, Petej & Fedorova (2015); strictly inside (0, 1).

        Parameters
        ----------
        y_score : array_like, shape [M, K]
            Column ``k``: the test scores from fold ``k``'s model.

        Returns
        -------
        Array, shape [M]
        """
        cal = self._bucketed()
        return _apply_cross_venn_abers(
            cal.thresholds, cal.p0_table, cal.p1_table, y_score, output="probability"
        )

    @host_first(_twin_cross_venn_abers_interval)
    def interval(self, y_score: Any) -> jax.Array:
        """``[min_k p0, max_k p1]`` stacked on a last axis of size 2.

        The envelope of the folds' intervals; it contains :meth:`probability` (the
        merger is increasing in every ``p0``, ``p1`` and equals ``c`` when all equal
        ``c``).

        Parameters
        ----------
        y_score : array_like, shape [M, K]
            Column ``k``: the test scores from fold ``k``'s model.

        Returns
        -------
        Array, shape [M, 2]
        """
        cal = self._bucketed()
        return _apply_cross_venn_abers(
            cal.thresholds, cal.p0_table, cal.p1_table, y_score, output="interval"
        )


@jax.jit
def _merge_folds(p0: jax.Array, p1: jax.Array) -> jax.Array:
    g1 = jnp.exp(jnp.mean(jnp.log(p1), axis=-1))
    g0 = jnp.exp(jnp.mean(jnp.log1p(-p0), axis=-1))
    return g1 / (g0 + g1)


@jax.jit
def _cross_apply(thresholds, p0_table, p1_table, s):
    p0, p1 = jax.vmap(_venn_abers_apply, in_axes=(0, 0, 0, -1), out_axes=-1)(
        thresholds, p0_table, p1_table, s
    )
    return p0, p1


@_v.validated(fuse=True, bucket={"y_score": 0}, per_observation=0)
def _apply_cross_venn_abers(
    thresholds, p0_table, p1_table, y_score: Any, output: str = "pair"
):
    s = _scores(y_score, "y_score", probabilities=False)
    k = thresholds.shape[-2]
    if s.ndim != 2 or s.shape[-1] != k:
        raise ValueError(
            f"y_score must have shape [M, K] with K = {k}, the fold models' scores of "
            f"each test point; got shape {s.shape}. With one model for all folds, repeat "
            f"its scores: np.repeat(s[:, None], {k}, axis=1)."
        )
    p0, p1 = _cross_apply(thresholds, p0_table, p1_table, s)
    if output == "probability":
        return _merge_folds(p0, p1)
    if output == "interval":
        return jnp.stack([jnp.min(p0, axis=-1), jnp.max(p1, axis=-1)], axis=-1)
    return p0, p1


@_v.validated(
    fuse=True,
    bucket={"y_true": 0, "y_score": 0, "fold_ids": 0, "weights": 0},
    per_observation=(1, 1),
)
def _fit_cross(y_true, y_score, fold_ids, num_folds, weights=None):
    y_true, y_score, weights = gather_all((y_true, y_score, weights), "A Venn-ABERS fit")
    y, s = binary_inputs(y_true, y_score, prob_name="y_score", probabilities=False)
    w = _v.mask_weights(check_weights(weights, s.shape[0], s.dtype), s.shape, s.dtype)
    w = jnp.ones_like(s) if w is None else w.astype(s.dtype)
    member = jnp.asarray(fold_ids)[None, :] == jnp.arange(num_folds)[:, None]
    wk = jnp.where(member, w[None, :], jnp.zeros((), s.dtype))
    shape = wk.shape
    out = _venn_abers_kernel(jnp.broadcast_to(s, shape), jnp.broadcast_to(y, shape), wk)
    return CrossVennAbersCalibrator(*out)


@host_first(_twin_fit_cross_venn_abers)
def fit_cross_venn_abers(
    y_true: Any, y_score: Any, folds: Any, *, weights: Any = None
) -> CrossVennAbersCalibrator:
    r"""Fit a cross Venn-ABERS predictor (CVAP): one IVAP per fold, merged.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_score : array_like, shape [N]
        Out-of-fold scores: row ``i`` scored by the model trained without its fold.
    folds : array_like of int, shape [N]
        Fold id ``0 .. K-1`` (``K >= 2``, every id used) of each row; concrete (not
        traced: it fixes ``K``).
    weights : array_like, shape [N], optional
        Observation weights, as in :func:`fit_venn_abers`.

    Returns
    -------
    CrossVennAbersCalibrator
        Called on test scores of shape [M, K] (column ``k`` from fold ``k``'s model)
        it returns the folds' pairs ``(p0, p1)``; ``.probability`` the merged
        probability and ``.interval`` the envelope ``[min p0, max p1]``.

    Notes
    -----
    Vovk, Petej & Fedorova (2015): split the training data into ``K`` folds; for each
    fold ``k`` train the scoring model on the other folds and fit the inductive
    Venn-ABERS predictor (:func:`fit_venn_abers`) on fold ``k``'s scores. A test
    object gets ``K`` pairs :math:`(p_0^k, p_1^k)` and the merged probability
    :math:`p = G_1 / (G_0 + G_1)` with :math:`G_1 = (\prod_k p_1^k)^{1/K}` and
    :math:`G_0 = (\prod_k (1 - p_0^k))^{1/K}`, the minimiser of the worst-case log-loss
    averaged over the folds. Fold ``k``'s IVAP equals ``fit_venn_abers`` on the rows
    of fold ``k`` (the others get weight 0). The fits run as one host call over the
    folds (jittable and vmappable over ``y_true``, ``y_score`` with ``folds`` fixed).
    The validity guarantee of the IVAPs is not proved for their merger (the paper
    reports it calibrated in practice).

    References
    ----------
    Vovk, V., Petej, I. and Fedorova, V. (2015). Large-scale probabilistic predictors
    with and without guarantee of validity. *NeurIPS*.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_cross_venn_abers
    >>> y = [0, 1, 0, 1, 1, 0, 1, 1]
    >>> s = [0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6, 0.8]
    >>> cal = fit_cross_venn_abers(y, s, folds=[0, 0, 0, 0, 1, 1, 1, 1])
    >>> cal.num_folds
    2
    >>> test = np.repeat(np.array([[0.2], [0.8]]), 2, axis=1)
    >>> [round(v, 3) for v in cal.probability(test).tolist()]
    [0.366, 0.71]
    """
    n = _v.as_float_array(y_score, "y_score").shape
    fold, num = _check_fold_ids(folds, n[0] if len(n) == 1 else -1)
    return _fit_cross(y_true, y_score, fold, num, weights=weights)


# -------------------------------------------------------------- centered isotonic
@pytree_dataclass(data=("thresholds", "values"))
class CenteredIsotonicCalibrator:
    """Centered isotonic calibration: linear interpolation through block centers.

    Create it with :func:`fit_centered_isotonic`.

    Attributes
    ----------
    thresholds : Array [N]
        The weighted mean score of each block of the PAV fit (strictly increasing),
        then the last repeated up to ``N`` (padding).
    values : Array [N]
        The block values (strictly increasing, in [0, 1]); padding repeats the last.
    """

    thresholds: jax.Array
    values: jax.Array

    def _bucketed(self) -> CenteredIsotonicCalibrator:
        knots = (self.thresholds, self.values)
        if not all(_v.paddable(k) and k.ndim == 1 for k in knots):
            return self
        size = bucket_size(self.thresholds.shape[0])
        return CenteredIsotonicCalibrator(*(pad_axis(k, size) for k in knots))

    @host_first(_host.isotonic_apply)  # the same interpolation as isotonic's
    def __call__(self, y_score: Any) -> jax.Array:
        """Linear interpolation between the centers; constant outside their range."""
        cal = self._bucketed()
        return _apply_centered(cal.thresholds, cal.values, y_score)


@_v.validated(fuse=True, bucket={"y_score": -1}, per_observation=-1)
def _apply_centered(thresholds, values, y_score: Any) -> jax.Array:
    s = _scores(y_score, "y_score", probabilities=False)
    return _isotonic_apply(thresholds, values, s)


def _centers_1d(thresholds, values, weight, num):
    n = thresholds.shape[-1]
    idx = jnp.arange(n)
    valid = idx < num
    prev = jnp.concatenate([values[:1], values[:-1]])
    start = valid & ((idx == 0) | (values != prev))
    block = jnp.cumsum(start) - 1  # padding stays in the last block, with weight 0
    wt = jnp.where(valid, weight, 0).astype(thresholds.dtype)
    # weighted mean score, computed about the block's first score (no cancellation)
    first = jnp.full_like(thresholds, jnp.inf).at[block].min(
        jnp.where(valid, thresholds, jnp.inf)
    )
    num_w = jax.ops.segment_sum(wt * (thresholds - first[block]), block, num_segments=n)
    den = jax.ops.segment_sum(wt, block, num_segments=n)
    nb = block[num - 1] + 1
    has = idx < nb
    centers = first + num_w / jnp.where(has, den, 1)
    level = jnp.full_like(values, -jnp.inf).at[block].max(jnp.where(valid, values, -jnp.inf))
    centers = jnp.where(has, centers, centers[nb - 1])
    level = jnp.where(has, level, level[nb - 1])
    return centers, level


@jax.jit
def _centered_kernel(s, y, w):
    fit = isotonic_fit(s, y, w)
    return _centers_1d(fit.thresholds, fit.values, fit.weight, fit.num_thresholds)


@host_first(_twin_fit_centered_isotonic)
@_v.validated(
    fuse=True,
    bucket={"y_true": 0, "y_score": 0, "weights": 0},
    per_observation=0,
    compiler_options=isotonic_fit_compiler_options,
)
def fit_centered_isotonic(
    y_true: Any, y_score: Any, *, weights: Any = None
) -> CenteredIsotonicCalibrator:
    r"""Fit centered isotonic regression (CIR) of the labels on the scores.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_score : array_like, shape [N]
        Scores or probabilities (any finite reals).
    weights : array_like, shape [N], optional
        Observation weights, as in :func:`fit_isotonic` (finite, ``>= 0``, not all 0).

    Returns
    -------
    CenteredIsotonicCalibrator
        Knots (block centers) and values, both of length ``N`` (padded).

    Notes
    -----
    Runs :func:`fit_isotonic`'s PAV (ties pooled), then replaces every maximal block
    of equal fitted values by one point: its value at the block's mean score weighted
    by the pooled weights. New scores are mapped by linear interpolation between these
    points and clipped to the end values outside them, so the map is strictly
    increasing between the first and last centers, where isotonic calibration is a
    step function with ties (Oron & Flournoy 2017; probcal's
    ``CenteredIsotonicCalibrator``). Jittable and vmappable like :func:`fit_isotonic`.

    References
    ----------
    Oron, A. P. and Flournoy, N. (2017). Centered isotonic regression: point and
    interval estimation for dose-response studies. *Statistics in Biopharmaceutical
    Research* 9(3), 258-267.

    Examples
    --------
    >>> from bayescal.classification import fit_centered_isotonic
    >>> cal = fit_centered_isotonic([0, 1, 0, 1, 1], [0.1, 0.3, 0.5, 0.7, 0.9])
    >>> [round(v, 3) for v in cal.thresholds[:3].tolist()]
    [0.1, 0.4, 0.8]
    >>> [round(v, 3) for v in cal([0.1, 0.25, 0.6, 1.0]).tolist()]
    [0.0, 0.25, 0.75, 1.0]
    """
    y_true, y_score, weights = gather_all(
        (y_true, y_score, weights), "A centered isotonic fit (PAV)"
    )
    y, s = binary_inputs(y_true, y_score, prob_name="y_score", probabilities=False)
    w = _v.mask_weights(check_weights(weights, s.shape[0], s.dtype), s.shape, s.dtype)
    s = _zero_weight_to_a_tie(s, weights, w)
    centers, level = _centered_kernel(s, y, w)
    return CenteredIsotonicCalibrator(centers, level.astype(s.dtype))
