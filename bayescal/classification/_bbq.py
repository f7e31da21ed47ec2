"""Bayesian binning into quantiles (BBQ; Naeini, Cooper & Hauskrecht 2015).

A frozen pytree like the other binary calibrators: the fit is one jittable, vmappable
program, bucketed by ``newton.bucketed_fit`` so that one compiled program serves every
``N`` of a bucket. Every binning model lives in one row of padded tables (row ``j``:
``B = j + 1`` equal-frequency bins), so the number of models, which depends on the
data, is a mask over the rows rather than a shape.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton
from bayescal._src import validation as _v
from bayescal._src.binned import weighted_quantiles
from bayescal._src.bucketing import bucket_size
from bayescal._src.host import _device, _floats, _flushed, _normal, _vector
from bayescal._src.host import first as host_first
from bayescal._src.pytree import pytree_dataclass
from bayescal.classification._calibrators import _scores
from bayescal.classification._host import _binary, _weighted_quantiles
from bayescal.classification._inputs import binary_inputs

__all__ = ["BBQCalibrator", "fit_bbq"]

ESTIMATES = ("frequency", "posterior")
_INT32_MAX = 2**31 - 1


# ----------------------------------------------------------------- the model range
def _ceil_c_cbrt(n: int, c: Fraction) -> int:
    """``ceil(c n^(1/3))`` exactly: the least ``k >= 0`` with ``k^3 >= c^3 n``."""
    target = c**3 * n
    k = max(0, math.ceil(float(c) * n ** (1 / 3)) - 2)
    while k**3 < target:
        k += 1
    return k


def _floor_cbrt_over_c(n: int, c: Fraction) -> int:
    """``floor(n^(1/3) / c)`` exactly: the largest ``k >= 0`` with ``(k c)^3 <= n``."""
    k = max(0, math.floor(n ** (1 / 3) / float(c)) + 2)
    while k > 0 and (k * c) ** 3 > n:
        k -= 1
    return k


def model_range(n: int, c: float = 10.0) -> tuple[int, int]:
    r"""``(B_min, B_max)`` of BBQ for ``n`` observations, in exact arithmetic.

    :math:`B_\min = \max(1, \lfloor n^{1/3} / C \rfloor)`, :math:`B_\max =
    \min(\lceil n / 5 \rceil, \lceil C\, n^{1/3} \rceil)` (Naeini et al. 2015, Sec. 3),
    the cube roots compared exactly (``n = 27`` gives ``n^{1/3} = 3``, not Python's
    ``27 ** (1 / 3) = 3.0000000000000004``).

    Examples
    --------
    >>> from bayescal.classification._bbq import model_range
    >>> model_range(27), model_range(1000), model_range(10_000)
    ((1, 6), (1, 100), (2, 216))
    """
    cf = Fraction(c)
    b_min = max(1, _floor_cbrt_over_c(n, cf))
    b_max = min(-(-n // 5), _ceil_c_cbrt(n, cf))
    return b_min, b_max


@functools.lru_cache(maxsize=64)
def _thresholds(num_models: int, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row ``j`` (``B = j + 1``): the model is in range iff ``lo <= n <= hi``.

    ``B <= ceil(n / 5)`` iff ``n > 5 (B - 1)``; ``B <= ceil(C n^(1/3))`` iff
    ``n > ((B - 1) / C)^3``; ``B >= floor(n^(1/3) / C)`` iff ``n < ((B + 1) C)^3``
    (exact rationals on the host: the traced count is only compared to integers).
    """
    cf = Fraction(c)
    lo = np.empty(num_models, np.int64)
    hi = np.empty(num_models, np.int64)
    for j in range(num_models):
        b = j + 1
        lo[j] = max(5 * (b - 1) + 1, math.floor(((b - 1) / cf) ** 3) + 1)
        hi[j] = min(math.ceil(((b + 1) * cf) ** 3) - 1, _INT32_MAX)
    lo = np.minimum(lo, _INT32_MAX)
    return lo.astype(np.int32), hi.astype(np.int32)


@functools.lru_cache(maxsize=64)
def _levels(num_models: int, dtype: np.dtype) -> np.ndarray:
    """Row ``j``: ``k / B`` (``B = j + 1``, float64 division cast to ``dtype``, as
    the quantile edges of ``binned.quantile_edges``), padded with 1."""
    k = np.arange(num_models + 1, dtype=np.float64)
    b = np.arange(1, num_models + 1, dtype=np.float64)[:, None]
    q = np.where(k[None, :] <= b, k[None, :] / b, 1.0).astype(dtype)
    q.flags.writeable = False
    return q


# ------------------------------------------------------------------------ the map
def _bbq_map(edges, values, weights, p, *, estimate):
    """``sum_B w_B theta_B(bin of p)`` with bins ``[e_k, e_{k+1})``, the last closed."""
    dtype = p.dtype
    num_bins = values.shape[-1]
    upper = edges[:, 1:].astype(dtype)  # [M, K]: inner edges, then 1 (and padding 1)

    def one(row_edges, row_values):
        k = jnp.searchsorted(row_edges, p, side="right", method="scan")
        return jnp.take(row_values.astype(dtype), jnp.minimum(k, num_bins - 1))

    theta = jax.vmap(one)(upper, values)  # [M, n]
    w = weights.astype(dtype).reshape((-1,) + (1,) * p.ndim)  # p of any shape
    out = jnp.sum(w * theta, axis=0)
    if estimate == "posterior":
        eps = jnp.finfo(dtype).eps
        out = jnp.clip(out, eps, 1 - eps)
    else:
        out = jnp.clip(out, 0, 1)
    return out


@functools.partial(newton.fast_jit, static_argnames=("estimate",))
def _bbq_apply(params, p, *, estimate):
    return _bbq_map(*params, p, estimate=estimate)


# --------------------------------------------------------------------------- host twins
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


def _twin_fit_bbq(
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


def _twin_bbq_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
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


@pytree_dataclass(data=("edges", "values", "weights"), meta=("estimate", "n_prime", "c"))
class BBQCalibrator:
    r"""Bayesian binning into quantiles: a posterior-weighted average of binnings.

    Create it with :func:`fit_bbq`. Row ``j`` of the tables is the equal-frequency
    binning model with :math:`B = j + 1` bins; calling the calibrator on ``p`` gives
    :math:`\sum_B w_B\, \theta_{B, k_B(p)}` with :math:`k_B(p)` the bin
    :math:`[e_k, e_{k+1})` of row ``B`` holding ``p`` (the last bin closed: ``p = 1``
    is in it), i.e. ``np.digitize(p, edges, right=False) - 1`` clipped to the bins.

    Attributes
    ----------
    edges : Array [M, M + 1]
        Row ``j``: the ``B + 1 = j + 2`` edges of model ``B`` (0, the quantiles, 1;
        nondecreasing), padded with 1.
    values : Array [M, M]
        Row ``j``: the ``B`` bin estimates :math:`\theta` of model ``B``, padded with
        its last one.
    weights : Array [M]
        Posterior probability of each model (0 outside :math:`[B_\min, B_\max]`);
        sums to 1.
    estimate : {"frequency", "posterior"}
        The bin estimate (see :func:`fit_bbq`).
    n_prime, c : float
        The prior's equivalent sample size :math:`N'` and the model-range constant
        :math:`C` of the fit.
    """

    edges: jax.Array
    values: jax.Array
    weights: jax.Array
    estimate: str = "frequency"
    n_prime: float = 2.0
    c: float = 10.0

    @property
    def model_bins(self) -> np.ndarray:
        """The number of bins ``B`` of each row, 1 to ``M``."""
        return np.arange(1, self.values.shape[-2] + 1)

    def _map(self, p: jax.Array) -> jax.Array:  # validated p
        return _bbq_map(self.edges, self.values, self.weights, p, estimate=self.estimate)

    @host_first(_twin_bbq_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, y_prob: Any) -> jax.Array:
        """Calibrated probabilities: the model average of the bin estimates."""
        p = _scores(y_prob, "y_prob", probabilities=True)
        params = (self.edges, self.values, self.weights)
        return newton.apply_bucketed(_bbq_apply, params, p, estimate=self.estimate)


def _check_options(n_prime: Any, c: Any, estimate: Any) -> tuple[float, float, str]:
    for name, value in (("n_prime", n_prime), ("c", c)):
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise TypeError(f"{name} must be a real number; got {value!r}.")
    n_prime, c = float(n_prime), float(c)
    if not (math.isfinite(n_prime) and n_prime > 0):
        raise ValueError(
            f"n_prime must be a finite number > 0 (the prior's equivalent sample size; "
            f"2 in Naeini et al.); got {n_prime!r}."
        )
    if not (math.isfinite(c) and c >= 1):
        raise ValueError(
            f"c must be a finite number >= 1 (it sets the range of numbers of bins, "
            f"N^(1/3)/c to c N^(1/3); below 1 the range can be empty; 10 in Naeini et "
            f"al.); got {c!r}."
        )
    if not isinstance(estimate, str):
        raise TypeError(f"estimate must be 'frequency' or 'posterior'; got {estimate!r}.")
    estimate = _v.check_choice(estimate, "estimate", ESTIMATES)
    return n_prime, c, estimate


@host_first(_twin_fit_bbq)
def fit_bbq(
    y_true: Any,
    y_prob: Any,
    *,
    n_prime: float = 2.0,
    c: float = 10.0,
    estimate: Literal["frequency", "posterior"] = "frequency",
    weights: Any = None,
) -> BBQCalibrator:
    r"""Fit Bayesian binning into quantiles (BBQ) of Naeini, Cooper & Hauskrecht (2015).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities, in [0, 1].
    n_prime : float > 0, default 2
        The prior's equivalent sample size :math:`N'` (the paper's value).
    c : float >= 1, default 10
        Sets the range of numbers of bins (the paper's :math:`C = 10`).
    estimate : {"frequency", "posterior"}, default "frequency"
        A bin's estimate :math:`\theta`: ``"frequency"`` is its fraction of positives
        (an empty bin: its midpoint), as in pycalib's ``BayesianBinningQuantiles``
        and the histogram binning each model is (:func:`fit_histogram_binning`); the
        default, because it is the reference implementations' and because averaging
        many binnings already smooths it. ``"posterior"`` is the mean of the bin's
        Beta posterior, :math:`(m_b + \alpha_b) / (N_b + N'/B)`: shrunk toward the
        bin's midpoint and never exactly 0 or 1 (clipped to ``[eps, 1 - eps]`` of
        the dtype where a bin of zero width at 0 or 1 would round to it), so the
        held-out log-loss stays finite; choose it when scoring by log-loss or when
        bins are small.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): weighted counts
        :math:`N_b, m_b` in the score and the estimates, and weighted quantiles for
        the edges (as ``fit_histogram_binning(strategy="quantile", weights=...)``),
        so an integer weight equals repeating the row and a weight of 0 removes it.
        The :math:`N` of the model range is the number of rows of positive weight
        (not the total weight). Finite, ``>= 0``, not all 0.

    Returns
    -------
    BBQCalibrator
        Tables of :math:`M` models in ``y_prob``'s dtype, :math:`M` the
        :math:`B_\max` of the bucket of :math:`N` (the padded size of
        ``bayescal._src.bucketing.bucket_size``, 256 at least), so that fits of every
        :math:`N` in a bucket share one shape and one compiled call; the models
        outside :math:`[B_\min, B_\max]` have weight 0.

    Notes
    -----
    For every :math:`B` from :math:`B_\min = \max(1, \lfloor N^{1/3}/C \rfloor)` to
    :math:`B_\max = \min(\lceil N/5 \rceil, \lceil C N^{1/3} \rceil)` (cube roots
    compared exactly), the model :math:`M_B` has equal-frequency edges: numpy's
    linear quantiles of ``y_prob`` at levels :math:`k/B` (computed as
    ``np.arange(B + 1) / B``, which can differ from ``np.linspace(0, 1, B + 1)`` by an
    ulp; bit for bit ``np.quantile``, eager and under ``jit``, see
    ``binned.weighted_quantile_edges``), the outer edges replaced by 0 and 1 and made
    nondecreasing by a running maximum. An observation on an edge :math:`e_k` falls in
    the bin :math:`[e_k, e_{k+1})` above it (``np.digitize(p, edges, right=False)``,
    as pycalib's fit; its ``predict_proba`` uses the other side), the last bin
    includes 1. With a uniform prior over models, the score is the BDeu marginal
    likelihood (Naeini et al. 2015, eq. 2; pycalib's ``_binning_model_logscore``)

    .. math:: \log P(D \mid M_B) = \sum_{b=1}^{B} \Big[\ln\Gamma(\tfrac{N'}{B})
       - \ln\Gamma(N_b + \tfrac{N'}{B}) + \ln\Gamma(m_b + \alpha_b) - \ln\Gamma(\alpha_b)
       + \ln\Gamma(n_b + \beta_b) - \ln\Gamma(\beta_b)\Big],

    :math:`\alpha_b = \tfrac{N'}{B} p_b`, :math:`\beta_b = \tfrac{N'}{B}(1 - p_b)`,
    :math:`p_b` the bin's midpoint, :math:`N_b` its observations, :math:`m_b` its
    positives, :math:`n_b = N_b - m_b` (a zero-width bin at 0 or 1 gets the smallest
    positive float for :math:`\alpha_b` or :math:`\beta_b`, as pycalib does). The
    prediction is :math:`\sum_B w_B\, \theta_B(p)` with :math:`w` the softmax of the
    scores. ``jax.jit`` and ``jax.vmap`` work (there invalid values give NaN). In
    float32 the scores, sums of :math:`\ln\Gamma` of counts, carry an absolute
    rounding of about :math:`10^{-7} N \ln N`, which moves the model weights (and
    the output) by about :math:`10^{-4}` at :math:`N = 10^4`; use x64 for
    reference values.

    References
    ----------
    Naeini, M. P., Cooper, G. F. and Hauskrecht, M. (2015). Obtaining well calibrated
    probabilities using Bayesian binning. *AAAI*, 2901-2907.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_bbq
    >>> r = np.random.default_rng(0)
    >>> p = r.uniform(0.05, 0.95, 300)
    >>> y = (r.uniform(size=300) < p ** 2).astype(int)
    >>> cal = fit_bbq(y, p)
    >>> cal.weights.shape, round(float(cal.weights.sum()), 4)
    ((64,), 1.0)
    >>> bool(np.all(np.diff(np.asarray(cal(np.linspace(0, 1, 5)))) > -0.2))
    True
    """
    n_prime, c, estimate = _check_options(n_prime, c, estimate)
    options = dict(n_prime=n_prime, c=c, estimate=estimate)
    return newton.bucketed_fit(_fit_bbq, (y_true, y_prob, weights), options)


def _fit_bbq(y_true, y_prob, weights, n, *, n_prime, c, estimate):
    y, p = binary_inputs(y_true, y_prob)
    dtype = p.dtype
    size = p.shape[0]
    w = newton.observation_weights(weights, n, size, dtype)
    if w is None:
        w = jnp.ones((size,), dtype)
    # B_max of the bucket of N (an upper bound of the true range): the tables' shape
    # depends on the bucket only, eager, padded or traced, so one program applies them
    num_models = model_range(bucket_size(size), c)[1]
    count = jnp.sum(w > 0, dtype=jnp.int32)  # the N of the model range
    b = jnp.arange(1, num_models + 1, dtype=dtype)[:, None]  # [M, 1]
    col = jnp.arange(num_models + 1)[None, :]  # [1, M + 1]
    nbins = jnp.arange(1, num_models + 1)[:, None]

    # edges: numpy's linear quantiles, the outer ones 0 and 1, the padding 1
    edges = weighted_quantiles(p, w, jnp.asarray(_levels(num_models, np.dtype(dtype))))
    edges = jnp.where(col == 0, 0, jnp.where(col >= nbins, 1, edges)).astype(dtype)
    edges = jax.lax.cummax(edges, axis=1)

    # weighted counts below each edge: bins [e_k, e_{k+1}), the last closed
    order = jnp.argsort(p)
    ps = jnp.take(p, order)
    ws, ys = jnp.take(w, order), jnp.take(y, order)
    zero = jnp.zeros((1,), dtype)
    cum_pos = jnp.concatenate([zero, jnp.cumsum(ws * ys)])
    cum_neg = jnp.concatenate([zero, jnp.cumsum(ws * (1 - ys))])
    below = jnp.searchsorted(ps, edges, side="left", method="scan")  # [M, M + 1]
    last = col >= nbins
    pos_below = jnp.where(last, cum_pos[-1], jnp.take(cum_pos, below))
    neg_below = jnp.where(last, cum_neg[-1], jnp.take(cum_neg, below))
    m_b = jnp.maximum(jnp.diff(pos_below, axis=1), 0)  # [M, M]
    n_b = jnp.maximum(jnp.diff(neg_below, axis=1), 0)
    total_b = m_b + n_b

    in_model = col[:, :-1] < nbins  # [M, M]: bin k exists in model B
    mid = (edges[:, :-1] + edges[:, 1:]) / 2
    strength = jnp.asarray(n_prime, dtype) / b  # N'/B
    tiny = jnp.finfo(dtype).tiny
    alpha = strength * mid
    beta = strength * (1 - mid)
    alpha = jnp.where(alpha == 0, tiny, alpha)
    beta = jnp.where(beta == 0, tiny, beta)
    lg = jax.lax.lgamma
    term = (
        lg(strength)
        - lg(total_b + strength)
        + lg(m_b + alpha)
        - lg(alpha)
        + lg(n_b + beta)
        - lg(beta)
    )
    log_score = jnp.sum(jnp.where(in_model, term, 0), axis=1)  # [M]
    lo, hi = _thresholds(num_models, c)
    in_range = (count >= jnp.asarray(lo)) & (count <= jnp.asarray(hi))
    log_score = jnp.where(in_range, log_score, -jnp.inf)
    model_weights = jax.nn.softmax(log_score)
    model_weights = jnp.where(in_range, model_weights, 0).astype(dtype)

    if estimate == "frequency":
        safe = jnp.where(total_b > 0, total_b, 1)
        theta = jnp.where(total_b > 0, m_b / safe, mid)
    else:
        eps = jnp.finfo(dtype).eps
        theta = jnp.clip((m_b + alpha) / (total_b + strength), eps, 1 - eps)
    theta = jnp.clip(theta, 0, 1)
    # padding: the last bin's value, so a lookup past the model's bins finds it
    last_bin = jnp.broadcast_to(nbins - 1, theta.shape)
    theta = jnp.take_along_axis(theta, jnp.minimum(col[:, :-1], last_bin), axis=1)
    return BBQCalibrator(edges, theta.astype(dtype), model_weights, estimate, n_prime, c)
