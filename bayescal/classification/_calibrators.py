"""Fitted calibrators for classifiers: frozen pytrees, callable on new scores.

Every ``fit_*`` validates its input and returns a frozen dataclass registered with
``jax.tree_util.register_dataclass``: arrays are data fields (they trace through
``jax.jit`` and stack under ``jax.vmap``), option strings are meta fields. Fitting
and calling are both jittable and vmappable: the parametric fits run the shared
damped-Newton solver of ``bayescal._src.newton`` (a ``lax.while_loop``), the isotonic
fit pools ties and runs PAV through host callbacks that batch under ``vmap``, with a
fixed-size (padded) output. Eagerly, invalid values raise a ``ValueError``; under
``jit``/``vmap`` they make the fitted parameters NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton
from bayescal._src import newton as _newton
from bayescal._src import validation as _v
from bayescal._src.binned import jeffreys_means, weighted_quantile_edges
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.host import (
    _BAD,
    _device,
    _floats,
    _flushed,
    _limits,
    _normal,
    _observation_weights,
    _scalar,
    _vector,
)
from bayescal._src.host import first as host_first
from bayescal._src.interp import interp
from bayescal._src.pytree import pytree_dataclass
from bayescal._src.reduce import check_weights
from bayescal._src.sorting import gather_all
from bayescal._src.ties import isotonic_fit
from bayescal._src.warn import warn
from bayescal.classification import _host
from bayescal.classification._host import (
    _MAX_BINS,
    _SCALING_MAX,
    _bin_index,
    _bin_means,
    _binary,
    _class_labels,
    _edges,
    _eps_ok,
    _logistic_one,
    _weighted_quantiles,
    beta_map,
    histogram_map,
    logistic_rows,
    logit_probabilities,
    platt_map,
)
from bayescal.classification._host import _logit as _host_logit
from bayescal.classification._host import _platt_map as _host_platt_map
from bayescal.classification._inputs import (
    binary_inputs,
    check_eps,
    check_shrinkage,
    isotonic_fit_compiler_options,
    multiclass_compiler_options,
    multiclass_fit_compiler_options,
    multiclass_inputs,
    quick_compiler_options,
    resolve_bins,
)
from bayescal.classification._metrics import _curve

__all__ = [
    "PlattCalibrator",
    "IsotonicCalibrator",
    "HistogramBinningCalibrator",
    "BetaCalibrator",
    "TemperatureCalibrator",
    "OneVsRestCalibrator",
    "TopLabelCalibrator",
    "TopLabelPrediction",
    "fit_platt",
    "fit_isotonic",
    "fit_histogram_binning",
    "fit_beta",
    "fit_temperature",
    "fit_one_vs_rest",
    "fit_top_label",
]

INPUTS = ("prob", "score")


def _scores(y_score: Any, name: str, *, probabilities: bool) -> jax.Array:
    s = _v.as_float_array(y_score, name)
    _v.check_nonempty(s, name)
    if probabilities:
        _v.check_in_unit_interval(s, name, "probabilities")
    else:
        _v.check_finite(s, name)
    return s


def _logit(p: jax.Array, eps: float | None) -> jax.Array:
    """log(p / (1 - p)); +-inf at 1 and 0 unless ``eps`` clips explicitly."""
    if eps is None:
        return _logit_kernel(p, 0.0, 1.0, clip=False)
    return _logit_kernel(p, eps, 1 - eps, clip=True)


# One compiled program per shape (eagerly, it was four single-operation programs).
@functools.partial(jax.jit, static_argnames="clip")
def _logit_kernel(p: jax.Array, lo: Any, hi: Any, clip: bool) -> jax.Array:
    if clip:
        p = jnp.clip(p, lo, hi)
    return jnp.log(p) - jnp.log1p(-p)


def _no_infinite_logits(p: jax.Array, name: str, eps: float | None, method: str) -> None:
    """Record that no probability is exactly 0 or 1 (their logit is infinite)."""
    if eps is not None:
        return
    _v.record(
        "no_zero_or_one",
        name,
        p,
        what=(
            f"has values at exactly 0 or 1, where {method} needs log(p) and "
            "log(1 - p), which are infinite. Pass eps (e.g. eps=1e-7) to clip them to "
            "[eps, 1 - eps] explicitly, or fit on the raw scores"
        ),
    )


# Jitted bodies of the calibrators' __call__, each called through
# newton.apply_bucketed (one compiled program per bucket of the input's length).
def _platt_map(a, b, s, *, use_logit: bool, eps: float | None):
    f = _logit(s, eps) if use_logit else s
    return platt_map(a, b, f, jnp).astype(s.dtype)


@functools.partial(newton.fast_jit, static_argnames=("use_logit", "eps"))
def _platt_apply(params, s, *, use_logit: bool, eps: float | None):
    return _platt_map(*params, s, use_logit=use_logit, eps=eps)


@jax.jit
def _isotonic_apply(thresholds, values, s):
    return interp(s, thresholds.astype(s.dtype), values.astype(s.dtype)).astype(s.dtype)


@jax.jit
def _histogram_apply(edges, values, p):
    return histogram_map(edges, values, p, jnp)


@newton.fast_jit
def _histogram_apply_bucketed(params, p):
    return _histogram_apply(*params, p)


def _beta_map(a, b, c, p, *, eps: float | None):
    q = p if eps is None else jnp.clip(p, eps, 1 - eps)
    return beta_map(a, b, c, q, jnp).astype(p.dtype)


@functools.partial(newton.fast_jit, static_argnames=("eps",))
def _beta_apply(params, p, *, eps: float | None):
    return _beta_map(*params, p, eps=eps)


@newton.fast_jit
def _temperature_apply(temperature, z):
    scaled = (z / temperature.astype(z.dtype)).astype(z.dtype)
    return logit_probabilities(scaled, jnp)


# --------------------------------------------------------------------------- solver
@functools.partial(jax.jit, static_argnames=("soft_labels",))
def _logistic_fit(features, y, weights, x0, lower, *, soft_labels: bool):
    """Unpenalised logistic regression of binary ``y`` on ``features`` (+ intercept).

    Returns ``(theta, ok)`` with ``theta = (beta_1..beta_K, c)``; ``ok`` is False when
    the solver ran out of steps or the loss went to ~0 (below 1e-6 per observation):
    with hard labels that means the classes are separated by the features and the
    maximum-likelihood coefficients are infinite. Platt's soft labels keep the loss
    away from 0. ``weights`` (or None) are 0 for padding: the public fits pad to a
    bucket size (``newton.bucketed_fit``), so one compiled program serves many sizes.
    """
    dtype = features[0].dtype
    if weights is None:
        weights = jnp.ones_like(y)
    n = jnp.sum(weights)
    n_pos = jnp.sum(weights * (y > 0.5))
    n_neg = n - n_pos
    if x0 is None:
        x0 = jnp.zeros(len(features) + 1, dtype)
        x0 = x0.at[-1].set(jnp.log((n_pos + 1) / (n_neg + 1)))
    offset = None
    if soft_labels:  # Platt's targets t = y + offset
        offset = jnp.where(y > 0.5, -1 / (n_pos + 2), 1 / (n_neg + 2)).astype(dtype)
    objective = newton.logistic_objective(features, y, offset, weights)
    res = newton.minimize(objective, x0.astype(dtype), lower=lower)
    return res.x, res.converged & (res.value >= 1e-6 * n)


def _warn_not_converged(name: str) -> None:
    warn(
        f"{name}: the logistic fit did not converge; the classes are (nearly) "
        "separable by the score, so the maximum-likelihood slope is infinite. Use "
        "soft labels, more calibration data, or isotonic calibration.",
        RuntimeWarning,
    )


# --------------------------------------------------------------------------- host twins
def _twin_fit_isotonic(
    y_true: Any, y_score: Any, *, weights: Any = None, prior: Any = None
) -> Any:
    """:func:`bayescal.classification.fit_isotonic` on the host."""
    if weights is not None:
        return None  # the kernel path (weighted PAV)
    from bayescal._src.isotonic import _pav_row
    from bayescal._src.ties import pool_ties

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


def _twin_fit_histogram_binning(
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


def _twin_histogram_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
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
    return _device(histogram_map(e, values, p))


def _twin_fit_platt(
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

    data = _binary(y_true, y_score, weights, input == "prob")
    if data is None:
        return None
    y, s, w = data
    f = _host_logit(s, eps) if input == "prob" else s
    if f is None or not _normal(f):
        return None
    theta = _logistic_one(f, y, w, soft_labels)
    if theta is None:
        return None
    a, b = (np.asarray(-v, s.dtype) for v in theta)
    return PlattCalibrator(_device(a), _device(b), input, eps)


def _twin_platt_apply(calibrator: Any, y_score: Any) -> jax.Array | None:
    """``PlattCalibrator.__call__`` on the host."""
    s = _floats(y_score)
    a, b = _scalar(calibrator.a), _scalar(calibrator.b)
    if s is None or a is None or b is None or s.size == 0:
        return None
    flat = s.reshape(-1)
    if calibrator.input == "prob":
        if not _normal(flat, 0, 1):
            return None
        f = _host_logit(s, calibrator.eps)
        if f is None:
            return None
    else:
        if not _normal(flat):
            return None
        f = s
    return _device(_host_platt_map(a, b, f, s.dtype))


def _twin_fit_temperature(y_true: Any, logits: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_temperature` on the host: the kernel's Newton
    solver (:func:`~bayescal._src.newton.minimize_host`) on ``beta = 1 / T >= 0``
    (convex, one parameter) in float64. Left to the kernel path: its
    errors (no improvement on the uniform forecast, every example ranked correctly)
    and its warnings (logits in [0, 1], no convergence)."""

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


def _twin_fit_beta(y_true: Any, y_prob: Any, *, eps: Any = None, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_beta` on the host: the logistic regression on
    ``(ln p, -ln(1 - p))`` with ``a, b >= 0`` (features in the dtype, as the kernel)
    by :func:`logistic_rows` from the identity map (float64)."""
    if not _eps_ok(eps):
        return None

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


def _twin_temperature_apply(calibrator: Any, logits: Any) -> jax.Array | None:
    """``TemperatureCalibrator.__call__`` on the host."""
    t = _scalar(calibrator.temperature)
    z = _floats(logits, _SCALING_MAX)
    if t is None or z is None or z.ndim not in (1, 2) or z.size == 0:
        return None
    dt = z.dtype
    if not (_normal(z.reshape(-1)) and _normal(t.reshape(1), _limits(t.dtype).tiny)):
        return None
    scaled = (z / t.astype(dt)).astype(np.float64)  # in the dtype, as the kernel
    return _device(_flushed(logit_probabilities(scaled).astype(dt)))


def _twin_beta_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
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
    a64, b64, c64 = (v.astype(dt).astype(np.float64) for v in (a, b, c))
    return _device(_flushed(beta_map(a64, b64, c64, p.astype(np.float64)).astype(dt)))


# --------------------------------------------------------------------------- Platt
@pytree_dataclass(data=("a", "b"), meta=("input", "eps"))
class PlattCalibrator:
    r"""Platt scaling, :math:`P(y = 1 \mid f) = 1 / (1 + \exp(A f + B))`.

    ``f`` is the raw score (``input="score"``) or the log-odds of a probability
    (``input="prob"``). Create it with :func:`fit_platt`.

    Attributes
    ----------
    a, b : Array, scalar
        Platt's :math:`A` (negative when higher scores mean class 1) and :math:`B`.
    input : {"prob", "score"}
        What the calibrator is called on.
    eps : float or None
        Probabilities are clipped to ``[eps, 1 - eps]`` before the logit when set.
    """

    a: jax.Array
    b: jax.Array
    input: str = "prob"
    eps: float | None = None

    def _map(self, s: jax.Array) -> jax.Array:  # validated s
        return _platt_map(self.a, self.b, s, use_logit=self.input == "prob", eps=self.eps)

    @host_first(_twin_platt_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, y_score: Any) -> jax.Array:
        """Calibrated probabilities for scores or probabilities (shape kept)."""
        s = _scores(y_score, "y_score", probabilities=self.input == "prob")
        return newton.apply_bucketed(
            _platt_apply, (self.a, self.b), s, use_logit=self.input == "prob", eps=self.eps
        )


@host_first(_twin_fit_platt)
def fit_platt(
    y_true: Any,
    y_score: Any,
    *,
    input: str = "prob",
    soft_labels: bool = True,
    eps: float | None = None,
    weights: Any = None,
) -> PlattCalibrator:
    r"""Fit Platt scaling (logistic calibration) with Platt's target smoothing.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1, of the calibration set (both classes present).
    y_score : array_like, shape [N]
        Predicted probabilities (``input="prob"``) or raw scores such as SVM margins
        or logits (``input="score"``).
    input : {"prob", "score"}, default "prob"
        ``"prob"`` fits on :math:`f = \log(p / (1 - p))`, so a calibrated input can be
        kept exactly (:math:`A = -1, B = 0`); ``"score"`` fits on the scores as they are.
    soft_labels : bool, default True
        Platt's targets :math:`t_+ = (N_+ + 1)/(N_+ + 2)` for positives and
        :math:`t_- = 1/(N_- + 2)` for negatives (a Bayesian prior that avoids
        overfitting and keeps the fit finite on separable data); False fits the 0/1
        labels.
    eps : float in (0, 0.5), optional
        With ``input="prob"``: clip probabilities to ``[eps, 1 - eps]`` before the
        logit (at fit and at call time). Without it, probabilities of exactly 0 or 1
        raise an error rather than being clipped silently.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): each multiplies its
        observation's term of the log-likelihood, and Platt's :math:`N_+, N_-` are the
        weighted class totals (as in scikit-learn's ``_sigmoid_calibration``), so an
        integer weight equals repeating the row and a weight of 0 removes it. Finite,
        ``>= 0``, not all 0.

    Returns
    -------
    PlattCalibrator
        Parameters in ``y_score``'s dtype.

    Notes
    -----
    Minimises :math:`-\sum_i t_i \log P_i + (1 - t_i)\log(1 - P_i)` with
    :math:`P_i = 1/(1 + \exp(A f_i + B))` by Newton's method with step halving (Lin,
    Lin & Weng 2007), starting from :math:`A = 0`,
    :math:`B = \log((N_- + 1)/(N_+ + 1))`, in JAX in ``y_score``'s dtype (the shared
    solver of ``bayescal._src.newton``; sums over observations are taken in blocks,
    and residuals :math:`P_i - t_i` are formed without cancellation, so in float32
    :math:`A, B` agree with the float64 optimum to ~1e-6 relative at N = 1e6, with an
    absolute floor of about 1e-7 for a parameter near 0). Deterministic; the loss is
    convex, so it converges to the unique optimum. ``jax.jit(fit_platt)`` and
    ``jax.vmap(fit_platt)`` (over stacked data sets) work; there invalid values give
    NaN parameters, and the warning for separable data (hard labels) is not issued.
    Platt's example :math:`F = (5, -4, 1)`,
    :math:`y = (1, 0, 0)` gives :math:`A = -0.2026145`, :math:`B = 0.6523666` (the
    gradient there is ~1e-9); the published :math:`A = -0.20261, B = 0.65236`
    (libsvm's looser stopping rule, gradient ~5e-6) agree to 4e-6.

    References
    ----------
    Platt, J. C. (1999). Probabilistic outputs for support vector machines and
    comparisons to regularized likelihood methods. *Advances in Large Margin
    Classifiers*, 61-74.
    Lin, H.-T., Lin, C.-J. and Weng, R. C. (2007). A note on Platt's probabilistic
    outputs for support vector machines. *Machine Learning* 68, 267-276.

    Examples
    --------
    >>> from bayescal.classification import fit_platt
    >>> cal = fit_platt([1, 0, 0], [5.0, -4.0, 1.0], input="score")
    >>> round(float(cal.a), 4), round(float(cal.b), 4)
    (-0.2026, 0.6524)
    >>> [round(v, 3) for v in cal([5.0, -4.0]).tolist()]
    [0.589, 0.188]
    """
    _v.check_choice(input, "input", INPUTS)
    if not isinstance(soft_labels, bool):
        raise TypeError(f"soft_labels must be a bool; got {soft_labels!r}.")
    eps = check_eps(eps)
    if eps is not None and input != "prob":
        raise ValueError("eps clips probabilities; it only applies with input='prob'.")
    cal, converged = newton.bucketed_fit(
        _fit_platt,
        (y_true, y_score, weights),
        dict(input=input, soft_labels=soft_labels, eps=eps),
    )
    if _v.is_concrete(converged) and not bool(converged):
        _warn_not_converged("fit_platt")
    return cal


def _fit_platt(y_true, y_score, weights, n, *, input, soft_labels, eps):
    y, s = binary_inputs(
        y_true, y_score, prob_name="y_score", probabilities=input == "prob"
    )
    _v.check_both_classes(y, "y_true")
    if input == "prob":
        _no_infinite_logits(s, "y_score", eps, "Platt scaling with input='prob'")
        f = _logit(s, eps)
    else:
        f = s
    # Standard logistic form eta = beta f + c, i.e. A = -beta, B = -c.
    weights = newton.observation_weights(weights, n, s.shape[0], s.dtype)
    theta, converged = _logistic_fit((f,), y, weights, None, None, soft_labels=soft_labels)
    return PlattCalibrator(-theta[0], -theta[1], input, eps), converged


# --------------------------------------------------------------------------- isotonic
@pytree_dataclass(data=("thresholds", "values"))
class IsotonicCalibrator:
    """Isotonic calibration: a nondecreasing piecewise-linear map of the score.

    Create it with :func:`fit_isotonic`.

    Attributes
    ----------
    thresholds : Array [N]
        The distinct calibration scores in increasing order, then (a fixed-size
        output, so that fits trace under ``jit`` and stack under ``vmap``) the
        largest score repeated up to the number ``N`` of calibration observations.
    values : Array [N]
        Calibrated probability at each threshold (nondecreasing, in [0, 1]); the
        padding repeats the last value, so it leaves the interpolation unchanged.
    """

    thresholds: jax.Array
    values: jax.Array

    def _map(self, s: jax.Array) -> jax.Array:  # validated s
        return _isotonic_apply(self.thresholds, self.values, s)

    def _bucketed(self) -> IsotonicCalibrator:
        """The same map with host-resident knots padded to their bucket (the last knot
        repeated): calibrators fitted on sizes in one bucket share their programs."""
        knots = (self.thresholds, self.values)
        if not all(_v.paddable(k) and k.ndim == 1 for k in knots):
            return self
        size = bucket_size(self.thresholds.shape[0])
        return IsotonicCalibrator(*(pad_axis(k, size) for k in knots))

    @host_first(_host.isotonic_apply)
    def __call__(self, y_score: Any) -> jax.Array:
        """Linear interpolation between thresholds; constant outside their range."""
        cal = self._bucketed()
        return _apply_isotonic(cal.thresholds, cal.values, y_score)


@_v.validated(fuse=True, bucket={"y_score": -1}, per_observation=-1)
def _apply_isotonic(thresholds: jax.Array, values: jax.Array, y_score: Any) -> jax.Array:
    s = _scores(y_score, "y_score", probabilities=False)
    return _isotonic_apply(thresholds, values, s)


@host_first(_twin_fit_isotonic)
@_v.validated(
    fuse=True,
    bucket={"y_true": 0, "y_score": 0, "weights": 0},
    per_observation=0,
    compiler_options=isotonic_fit_compiler_options,
)
def fit_isotonic(
    y_true: Any, y_score: Any, *, weights: Any = None, prior: Any = None
) -> IsotonicCalibrator:
    r"""Fit isotonic calibration (PAV) of the labels on the scores, ties pooled.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_score : array_like, shape [N]
        Scores or probabilities (any finite reals; only their order matters).
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): the least-squares
        objective is :math:`\sum_i w_i (y_i - m(s_i))^2`, so an integer weight equals
        repeating the row and a weight of 0 removes it (its score is no threshold,
        as scikit-learn's ``IsotonicRegression`` drops such rows). Finite, ``>= 0``,
        not all 0.
    prior : float or (float, float), optional
        Beta pseudo-counts ``(a, b)`` (a float ``c`` means ``(c, c)``; ``1`` is
        Laplace's rule of succession), finite and ``> 0``: every level set of the fit
        (the scores sharing one fitted value, total weight ``W``, mean ``v``) gets
        ``(W v + a) / (W + a + b)``, the posterior mean of a Beta(a, b) prior, and PAV
        runs again on these with weights ``W + a + b`` (the shrinkage can break the
        order). The values then lie strictly inside (0, 1): the log-loss is finite
        where the plain fit's 0 or 1 meets the other label. None (default): the plain
        least-squares fit.

    Returns
    -------
    IsotonicCalibrator
        Thresholds and values in ``y_score``'s dtype, both of length ``N`` (the
        ``M`` distinct scores, then padding that repeats the last knot).

    Notes
    -----
    Solves :math:`\min_{m \text{ nondecreasing}} \sum_i (y_i - m(s_i))^2`:
    observations are sorted by score and equal scores pooled into one weighted mean,
    so they get one calibrated value; weighted PAV fits the pooled means. On CPU the
    sort and pooling run in numpy and PAV in scipy's C++, through
    ``jax.pure_callback`` (so ``jax.jit`` and ``jax.vmap`` work; under ``vmap`` each
    data set is fitted on its own); on accelerators XLA sorts and pools. New scores
    are mapped by linear interpolation between the distinct calibration scores and
    clipped to the end values outside them.
    This is scikit-learn's ``IsotonicRegression(out_of_bounds="clip")`` (which
    ``CalibratedClassifierCV(method="isotonic")`` uses), except that scikit-learn also
    merges scores closer than the dtype's resolution (1e-6 in float32); bayescal
    pools only exact ties. Isotonic calibration is nonparametric and needs more data
    than Platt scaling (Niculescu-Mizil & Caruana 2005).
    With ``prior``, the block frequencies are smoothed as Zadrozny & Elkan (2001)
    smooth leaf frequencies (their m-estimate ``(k + b m) / (n + m)`` is ``a = b m``,
    ``b = (1 - b) m`` here); weights count as observations. For an isotonic-based
    probability that is never 0 or 1 with a validity guarantee instead, see
    :func:`fit_venn_abers`.

    References
    ----------
    Zadrozny, B. and Elkan, C. (2002). Transforming classifier scores into accurate
    multiclass probability estimates. *KDD*, 694-699.
    Niculescu-Mizil, A. and Caruana, R. (2005). Predicting good probabilities with
    supervised learning. *ICML*.
    Zadrozny, B. and Elkan, C. (2001). Obtaining calibrated probability estimates from
    decision trees and naive Bayesian classifiers. *ICML*, 609-616.

    Examples
    --------
    >>> from bayescal.classification import fit_isotonic
    >>> cal = fit_isotonic([0, 1, 0, 1, 1], [0.1, 0.3, 0.5, 0.7, 0.9])
    >>> cal.values.tolist()
    [0.0, 0.5, 0.5, 1.0, 1.0]
    >>> [round(v, 3) for v in cal([0.0, 0.2, 0.8, 1.0]).tolist()]
    [0.0, 0.25, 1.0, 1.0]
    >>> smooth = fit_isotonic([0, 1, 0, 1, 1], [0.1, 0.3, 0.5, 0.7, 0.9], prior=1)
    >>> [round(v, 3) for v in smooth.values.tolist()]
    [0.333, 0.5, 0.5, 0.75, 0.75]
    """
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y_true, y_score, weights = gather_all((y_true, y_score, weights), "An isotonic fit (PAV)")
    y, s = binary_inputs(y_true, y_score, prob_name="y_score", probabilities=False)
    # In a bucketed call the padding (copies of the last observation) gets weight 0:
    # pooled with that observation's tie, it changes no fitted value.
    w = _v.mask_weights(check_weights(weights, s.shape[0], s.dtype), s.shape, s.dtype)
    s = _zero_weight_to_a_tie(s, weights, w)
    fit = isotonic_fit(s, y, w)  # sort, pool ties, PAV; padded to N knots
    if prior is None:
        return IsotonicCalibrator(fit.thresholds, fit.values.astype(s.dtype))
    a, b = _check_prior(prior)
    values = _shrunk_levels(fit.values, fit.weight, fit.num_thresholds, a, b)
    return IsotonicCalibrator(fit.thresholds, values.astype(s.dtype))


def _check_prior(prior: Any) -> tuple[float, float]:
    pair = (prior, prior) if isinstance(prior, int | float | np.number) else prior
    try:
        a, b = (float(v) for v in pair)
    except (TypeError, ValueError):
        a = b = float("nan")
    if isinstance(prior, bool) or not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
        raise ValueError(
            f"prior must be None, a positive number c (pseudo-counts (c, c)) or a pair "
            f"(a, b) of finite positive pseudo-counts of positives and negatives; got "
            f"{prior!r}. prior=1 is Laplace's rule of succession."
        )
    return a, b


@jax.jit
def _shrunk_levels(values, weight, num, a, b):
    """Beta(a, b) posterior mean of every level set of an isotonic fit, then PAV."""
    n = values.shape[-1]
    idx = jnp.arange(n)
    valid = idx < num
    prev = jnp.concatenate([values[:1], values[:-1]])
    block = jnp.cumsum(valid & ((idx == 0) | (values != prev))) - 1  # padding: last
    wt = jnp.where(valid, weight, 0).astype(values.dtype)
    total = jax.ops.segment_sum(wt, block, num_segments=n)
    pos = jax.ops.segment_sum(wt * values, block, num_segments=n)
    nb = block[num - 1] + 1
    has = idx < nb
    mean = (pos + a) / (total + a + b)
    mean = jnp.where(has, mean, mean[nb - 1])
    # PAV over the level sets (in order; the padding tied to the last one, weight 0)
    level = isotonic_fit(
        jnp.minimum(idx, nb - 1).astype(values.dtype),
        mean,
        jnp.where(has, total + a + b, 0).astype(values.dtype),
    ).fitted
    return level[block]


def _zero_weight_to_a_tie(s: jax.Array, weights: Any, w: jax.Array | None) -> jax.Array:
    """Scores of the rows of weight 0 replaced by the score of the first row of positive
    weight: pooled into its tie with no weight, they leave the fit as if removed."""
    if weights is None or w is None:
        return s  # no user weights: only a bucket's padding, already a tie
    first = jnp.argmax(w > 0)
    return jnp.where(w > 0, s, jnp.take(s, first[None], axis=-1))


# --------------------------------------------------------------------------- histogram
@pytree_dataclass(data=("edges", "values"))
class HistogramBinningCalibrator:
    """Histogram binning: the positive frequency of the bin the probability falls in.

    Create it with :func:`fit_histogram_binning`.

    Attributes
    ----------
    edges : Array [K + 1]
        Bin edges; bins are ``[e_k, e_{k+1})``, the last closed, values outside go
        to the first / last bin.
    values : Array [K]
        Calibrated probability per bin (empty calibration bins: the bin midpoint).
    """

    edges: jax.Array
    values: jax.Array

    def _map(self, p: jax.Array) -> jax.Array:  # validated p
        return _histogram_apply(self.edges, self.values, p)

    @host_first(_twin_histogram_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, y_prob: Any) -> jax.Array:
        """Piecewise-constant calibrated probabilities."""
        p = _scores(y_prob, "y_prob", probabilities=True)
        knots = (self.edges, self.values)
        return newton.apply_bucketed(_histogram_apply_bucketed, knots, p)


@host_first(_twin_fit_histogram_binning)
@_v.validated(
    fuse=True,
    bucket={"y_true": 0, "y_prob": 0, "weights": 0},
    compiler_options=quick_compiler_options,
)
def fit_histogram_binning(
    y_true: Any,
    y_prob: Any,
    *,
    bins: Any = 10,
    strategy: str = "uniform",
    weights: Any = None,
    shrinkage: str | None = "jeffreys",
) -> HistogramBinningCalibrator:
    r"""Fit histogram binning: replace a probability by its bin's positive frequency.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities, in [0, 1].
    bins, strategy
        As in :func:`reliability_curve` (int with ``"uniform"`` or ``"quantile"``,
        edges, or ``"fd"``).
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): a bin's value is the
        weighted fraction of positives, and ``strategy="quantile"`` takes the
        quantiles of the sample in which each row is repeated ``w_i`` times (numpy's
        linear quantile, generalised to real weights), so an integer weight equals
        repeating the row and a weight of 0 removes it. ``bins="fd"`` ignores the
        weights, as ``np.histogram_bin_edges`` does. Finite, ``>= 0``, not all 0.
        With shrinkage the weights count observations (the prior adds half a
        positive and half a negative to each bin): weights scaled to sum to 1 would
        let the prior dominate.
    shrinkage : {"jeffreys", None}, default "jeffreys"
        ``"jeffreys"``: a bin's value is :math:`(k + 1/2) / (n + 1)`, the posterior
        mean of its positive rate under Jeffreys' Beta(1/2, 1/2) prior (as probcal's
        ``HistogramBinningCalibrator(shrinkage="jeffreys")``), never exactly 0 or 1,
        so no prediction is called impossible on the evidence of a few calibration
        observations (a bin of 4 positives gives 0.9, not 1, and a held-out
        negative there a finite log-loss). ``None``: the raw fraction
        :math:`k / n` of Zadrozny & Elkan (the ``observed`` values of
        :func:`reliability_curve`; what this function did before the option existed).

    Returns
    -------
    HistogramBinningCalibrator

    Notes
    -----
    :math:`C(p) = (k_{b} + 1/2) / (n_{b} + 1)` with ``shrinkage="jeffreys"``, or
    :math:`C(p) = k_b / n_b = \bar y_{b}` with ``shrinkage=None``, where
    :math:`b = b(p)` is the bin of :math:`p`, :math:`n_b` the (weighted) number of
    calibration observations in it and :math:`k_b` the (weighted) number of
    positives among them. The shrinkage moves a bin's value toward 1/2 by
    :math:`|1/2 - \bar y_b| / (n_b + 1) \le 1 / (2 (n_b + 1))`: 0.05 at
    :math:`n_b = 9`, 0.0005 at :math:`n_b = 999`, so it matters only where a bin
    holds few observations, which is where a raw 0 or 1 is least trustworthy. A bin
    without calibration data gets its midpoint either way (no information: the
    identity at the bin centre; strictly inside (0, 1) unless you pass edges making a
    bin of zero width at 0 or 1). The map is piecewise constant and need not be
    monotone.

    References
    ----------
    Zadrozny, B. and Elkan, C. (2001). Obtaining calibrated probability estimates from
    decision trees and naive Bayesian classifiers. *ICML*, 609-616.
    Jeffreys, H. (1946). An invariant form for the prior probability in estimation
    problems. *Proc. R. Soc. Lond. A* 186, 453-461.

    Examples
    --------
    >>> from bayescal.classification import fit_histogram_binning
    >>> cal = fit_histogram_binning([0, 1, 1, 1], [0.1, 0.2, 0.7, 0.8], bins=2)
    >>> cal.values.tolist()  # (1 + 1/2) / 3 and (2 + 1/2) / 3
    [0.5, 0.8333333...]
    >>> raw = fit_histogram_binning([0, 1, 1, 1], [0.1, 0.2, 0.7, 0.8], bins=2,
    ...                             shrinkage=None)
    >>> raw([0.05, 0.95]).tolist()
    [0.5, 1.0]
    """
    shrinkage = check_shrinkage(shrinkage)
    y, p = binary_inputs(y_true, y_prob)
    w = check_weights(weights, p.shape[0], p.dtype)
    bins = resolve_bins(bins, strategy, p)
    mask = _v.observation_mask(p.shape[0])
    if w is not None:
        w = _v.mask_weights(w, p.shape, p.dtype)  # 0 in a bucket's padding
        if bins.edges is None and bins.strategy == "quantile":
            bins = bins._replace(edges=weighted_quantile_edges(p, w, bins.num_bins))
    curve, edges = _curve(y, p, w, bins, mask)
    return HistogramBinningCalibrator(edges, _bin_values(curve, shrinkage))


def _bin_values(curve: Any, shrinkage: str | None) -> jax.Array:
    """A histogram calibrator's values: the curve's bin means, shrunk or not."""
    if shrinkage is None:
        return curve.observed
    return jeffreys_means(curve.observed, curve.weight, jnp)


# --------------------------------------------------------------------------- beta
@pytree_dataclass(data=("a", "b", "c"), meta=("eps",))
class BetaCalibrator:
    r"""Beta calibration, :math:`\mathrm{logit}\,q = a \ln p - b \ln(1 - p) + c`.

    Create it with :func:`fit_beta`.

    Attributes
    ----------
    a, b : Array, scalar
        Nonnegative shape parameters (0 when the feature was dropped).
    c : Array, scalar
        Intercept.
    eps : float or None
        Probabilities are clipped to ``[eps, 1 - eps]`` first when set.
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array
    eps: float | None = None

    def _map(self, p: jax.Array) -> jax.Array:  # validated p
        return _beta_map(self.a, self.b, self.c, p, eps=self.eps)

    @host_first(_twin_beta_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, y_prob: Any) -> jax.Array:
        """Calibrated probabilities (0 and 1 map to the limits of the map)."""
        p = _scores(y_prob, "y_prob", probabilities=True)
        return newton.apply_bucketed(_beta_apply, (self.a, self.b, self.c), p, eps=self.eps)


@host_first(_twin_fit_beta)
def fit_beta(
    y_true: Any, y_prob: Any, *, eps: float | None = None, weights: Any = None
) -> BetaCalibrator:
    r"""Fit beta calibration (Kull, Silva Filho & Flach 2017), shape parameters >= 0.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1 (both classes present).
    y_prob : array_like, shape [N]
        Predicted probabilities, in [0, 1].
    eps : float in (0, 0.5), optional
        Clip probabilities to ``[eps, 1 - eps]`` (at fit and call time). Without it,
        probabilities of exactly 0 or 1 raise an error: their log is infinite.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): each multiplies its
        observation's term of the log-likelihood, so an integer weight equals
        repeating the row and a weight of 0 removes it. Finite, ``>= 0``, not all 0.

    Returns
    -------
    BetaCalibrator
        Parameters in ``y_prob``'s dtype.

    Notes
    -----
    The three-parameter beta map is

    .. math:: q(p) = \Big(1 + \frac{1}{e^{c}\, p^{a} / (1 - p)^{b}}\Big)^{-1},

    i.e. a logistic regression of :math:`y` on the features :math:`\ln p` and
    :math:`-\ln(1 - p)` with coefficients :math:`a, b` and intercept :math:`c`
    (unpenalised). :math:`a, b \ge 0` keeps the map nondecreasing, and the fit
    enforces it: the log-likelihood is maximised over :math:`a, b \ge 0` by projected
    Newton steps (a coefficient at 0 whose gradient points below 0 stays at 0), so
    the result is the constrained maximum-likelihood fit, with :math:`a` or
    :math:`b` exactly 0 when the constraint binds. Where the authors' code
    (``betacal``: refit with :math:`a = 0` if the fitted :math:`a < 0`, else with
    :math:`b = 0` if :math:`b < 0`) returns nonnegative parameters, the two agree; its
    refit can itself return a negative parameter (a decreasing map), this fit cannot.
    The family contains the identity (:math:`a = b = 1, c = 0`, the starting point)
    and, unlike logistic calibration, also non-sigmoid shapes. Jittable and
    vmappable like :func:`fit_platt`.

    References
    ----------
    Kull, M., Silva Filho, T. and Flach, P. (2017). Beta calibration: a well-founded
    and easily implemented improvement on logistic calibration for binary
    classifiers. *AISTATS*, PMLR 54, 623-631.

    Examples
    --------
    >>> from bayescal.classification import fit_beta
    >>> cal = fit_beta([0, 0, 1, 0, 1, 1], [0.1, 0.3, 0.4, 0.6, 0.7, 0.9])
    >>> float(cal.a) >= 0 and float(cal.b) >= 0
    True
    >>> [round(v, 3) for v in cal([0.1, 0.5, 0.9]).tolist()]
    [0.035, 0.5, 0.965]
    """
    eps = check_eps(eps)
    cal, converged = newton.bucketed_fit(_fit_beta, (y_true, y_prob, weights), dict(eps=eps))
    if _v.is_concrete(converged) and not bool(converged):
        _warn_not_converged("fit_beta")
    return cal


def _fit_beta(y_true, y_prob, weights, n, *, eps):
    y, p = binary_inputs(y_true, y_prob)
    _v.check_both_classes(y, "y_true")
    _no_infinite_logits(p, "y_prob", eps, "beta calibration")
    q = p if eps is None else jnp.clip(p, eps, 1 - eps)
    features = (jnp.log(q), -jnp.log1p(-q))
    dtype = p.dtype
    x0 = jnp.asarray([1.0, 1.0, 0.0], dtype)  # the identity map
    lower = jnp.asarray([0.0, 0.0, -jnp.inf], dtype)  # a, b >= 0
    weights = newton.observation_weights(weights, n, p.shape[0], dtype)
    theta, converged = _logistic_fit(features, y, weights, x0, lower, soft_labels=False)
    return BetaCalibrator(theta[0], theta[1], theta[2], eps), converged


# --------------------------------------------------------------------------- temperature
@pytree_dataclass(data=("temperature",))
class TemperatureCalibrator:
    """Temperature scaling: ``softmax(logits / T)`` (or ``sigmoid(logit / T)``).

    Create it with :func:`fit_temperature`. Calling it on ``[N, C]`` logits gives
    ``[N, C]`` probabilities; on ``[N]`` binary logits, the probability of class 1.

    Attributes
    ----------
    temperature : Array, scalar
        :math:`T > 0`; :math:`T > 1` softens overconfident predictions.
    """

    temperature: jax.Array

    @_v.validated  # checks fold into NaN under jit/vmap
    def scale(self, logits: Any) -> jax.Array:
        """The rescaled logits ``logits / T``.

        Parameters
        ----------
        logits : array_like, shape [N, C] or [N]
            Uncalibrated logits.

        Returns
        -------
        Array
            ``logits / T``, same shape and dtype.
        """
        z = _v.as_float_array(logits, "logits")
        _v.check_ndim(z, "logits", (1, 2))
        _v.check_finite(z, "logits")
        return (z / self.temperature.astype(z.dtype)).astype(z.dtype)

    @host_first(_twin_temperature_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, logits: Any) -> jax.Array:
        """Calibrated probabilities (softmax over the last axis, or sigmoid for 1-D)."""
        z = _v.as_float_array(logits, "logits")
        _v.check_ndim(z, "logits", (1, 2))
        _v.check_finite(z, "logits")
        return newton.apply_bucketed(_temperature_apply, self.temperature, z)


def _temperature_objective(z: jax.Array, z_true: jax.Array, weights: jax.Array):
    """Summed NLL of ``softmax(beta z)`` in ``beta`` (convex), with its derivatives.

    Per observation: loss ``logsumexp(beta z_i) - beta z_{i,y_i}``, derivative
    ``E_q[z_i] - z_{i,y_i}`` and second derivative ``Var_q[z_i]`` under
    ``q = softmax(beta z_i)``; each is multiplied by the observation's weight.
    """

    def objective(x: jax.Array) -> newton.Derivatives:
        s = x[0] * z
        top = jnp.max(s, axis=-1, keepdims=True)
        e = jnp.exp(s - top)
        total = jnp.sum(e, axis=-1, keepdims=True)
        q = e / total
        lse = (top + jnp.log(total))[..., 0]
        loss = lse - x[0] * z_true
        mean = jnp.sum(q * z, axis=-1)
        grad = mean - z_true
        hess = jnp.sum(q * (z - mean[..., None]) ** 2, axis=-1)
        rows = (loss * weights, grad * weights, hess * weights)
        value, g, h = (newton.accurate_sum(a) for a in jax.lax.optimization_barrier(rows))
        return newton.Derivatives(value, g[None], h[None, None], value)  # losses >= 0

    return objective


@jax.jit
def _temperature_fit(z: jax.Array, y: jax.Array, weights: jax.Array | None):
    """``(beta, g0, all_correct, converged)`` for logits ``[N, C]`` and labels ``[N]``.

    ``weights`` (or None) are 0 for padding rows.
    """
    if weights is None:
        weights = jnp.ones(z.shape[0], z.dtype)
    z_true = jnp.take_along_axis(z, y[:, None], axis=1)[:, 0]
    # derivative at beta = 0
    g0 = newton.accurate_sum(weights * (jnp.mean(z, axis=1) - z_true))
    all_correct = jnp.all((z_true >= jnp.max(z, axis=1)) | (weights == 0))
    x0 = jnp.ones((1,), z.dtype)
    lower = jnp.zeros((1,), z.dtype)
    res = newton.minimize(_temperature_objective(z, z_true, weights), x0, lower=lower)
    return res.x[0], g0, all_correct, res.converged


@host_first(_twin_fit_temperature)
def fit_temperature(y_true: Any, logits: Any, *, weights: Any = None) -> TemperatureCalibrator:
    r"""Fit temperature scaling by minimising the negative log-likelihood over T > 0.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Integer class labels ``0 .. C-1`` for ``[N, C]`` logits, or binary labels for
        ``[N]`` logits of class 1.
    logits : array_like, shape [N, C] or [N]
        Uncalibrated logits (pre-softmax scores) of the calibration set, not
        probabilities: a UserWarning says so when every value lies in [0, 1] (pass
        ``np.log(probs)``, or ``np.log(p / (1 - p))`` for binary probabilities).
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): each multiplies its
        observation's term of the NLL, so an integer weight equals repeating the row
        and a weight of 0 removes it. Finite, ``>= 0``, not all 0.

    Returns
    -------
    TemperatureCalibrator
        ``temperature`` in ``logits``' dtype.

    Warns
    -----
    UserWarning
        When every value of ``logits`` lies in [0, 1]: they look like probabilities.

    Notes
    -----
    .. math:: \hat T = \arg\min_{T > 0} -\frac1n \sum_i
              \log \mathrm{softmax}(z_i / T)_{y_i}.

    With :math:`\beta = 1/T` the objective is convex (a log-sum-exp minus a linear
    term), so damped Newton steps on :math:`\beta \ge 0` (the shared solver of
    ``bayescal._src.newton``, in JAX, from :math:`\beta = 1`) converge to the global
    optimum. ``jax.jit`` and ``jax.vmap`` work; there the two failures below give a
    NaN temperature instead of an error. Binary logits are treated
    as the two-class logits :math:`(0, z_i)`. Temperature scaling keeps the predicted
    class (and the ranking), so accuracy is unchanged. An error is raised when no
    positive temperature improves on the uniform forecast, and when every example is
    classified correctly (the optimum is then :math:`T \to 0`).

    References
    ----------
    Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On calibration of
    modern neural networks. *ICML*.

    Examples
    --------
    >>> from bayescal.classification import fit_temperature
    >>> logits = [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0], [4.0, 0.0, 0.0]]
    >>> cal = fit_temperature([0, 1, 2, 1], logits)
    >>> round(float(cal.temperature), 3)
    2.232
    >>> cal(logits).shape
    (4, 3)
    """
    cal, (converged, in_unit) = newton.bucketed_fit(
        _fit_temperature, (y_true, logits, weights), {}
    )
    if _v.is_concrete(in_unit) and bool(in_unit):
        warn(
            "fit_temperature: every value of logits lies in [0, 1]; these look like "
            "probabilities, not logits (T = "
            f"{float(cal.temperature):.6g} fitted to them means little). Pass logits: "
            "np.log(probs) for [N, C] class probabilities (softmax ignores the "
            "per-row shift), np.log(p / (1 - p)) for binary ones, or use fit_platt / "
            "fit_one_vs_rest, which take probabilities.",
            UserWarning,
        )
    if _v.is_concrete(converged) and not bool(converged):
        warn(
            f"fit_temperature did not converge in 100 Newton steps (T = "
            f"{float(cal.temperature):.6g}).",
            RuntimeWarning,
        )
    return cal


def _fit_temperature(y_true, logits, weights, n):
    z = _v.as_float_array(logits, "logits")
    _v.check_ndim(z, "logits", (1, 2))
    _v.check_nonempty(z, "logits")
    _v.check_finite(z, "logits")
    if z.ndim == 1:
        y, z = binary_inputs(y_true, z, prob_name="logits", probabilities=False)
        _v.check_both_classes(y, "y_true")
        zz = jnp.stack([jnp.zeros_like(z), z], axis=1)
        labels = (y > 0.5).astype(jnp.int32)
    else:
        if z.shape[1] < 2:
            raise ValueError(
                f"logits must have C >= 2 columns; got shape {tuple(z.shape)}. Pass 1-D "
                "logits for a binary classifier."
            )
        y = _v.check_class_labels(y_true, "y_true", z.shape[1])
        if y.ndim != 1 or y.shape[0] != z.shape[0]:
            raise ValueError(
                f"y_true has shape {tuple(y.shape)} but logits has shape "
                f"{tuple(z.shape)}; pass one label per row of logits."
            )
        zz = z
        labels = jnp.clip(y, 0, z.shape[1] - 1)  # out of range: flagged above
    weights = newton.observation_weights(weights, n, zz.shape[0], zz.dtype)
    beta, g0, all_correct, converged = _temperature_fit(zz, labels, weights)
    # every real row in [0, 1]: probabilities passed as logits (a warning, not an error)
    in_unit = (zz >= 0) & (zz <= 1)
    if weights is not None:
        in_unit = in_unit | (weights[:, None] == 0)
    in_unit = jnp.all(in_unit)
    _v.record(
        "less_equal",
        "logits",
        g0 >= 0,
        False,
        what=(
            "carry no information about y_true in the direction of the labels (the NLL "
            "decreases only for negative temperatures); temperature scaling cannot "
            "help. Check that labels and logit columns match"
        ),
    )
    _v.record(
        "less_equal",
        "logits",
        all_correct,
        False,
        what=(
            "rank the true class first (among the largest logits) for every "
            "calibration example, so the NLL keeps decreasing as T -> 0 and there is "
            "no finite optimal temperature. Use more (or held-out, harder) calibration "
            "data"
        ),
    )
    return TemperatureCalibrator((1 / beta).astype(z.dtype)), (converged, in_unit)


# --------------------------------------------------------------------------- one-vs-rest
_BINARY_FITS: dict[str, Callable[..., Any]] = {
    "isotonic": fit_isotonic,
    "platt": fit_platt,
    "beta": fit_beta,
    "histogram": fit_histogram_binning,
}


def _binary_fit(method: Any, *, allow_callable: bool = False) -> Callable[..., Any]:
    """The binary ``fit_*`` named by ``method`` (or ``method`` itself if allowed)."""
    if allow_callable and callable(method):
        return method
    fit = _BINARY_FITS.get(method) if isinstance(method, str) else None
    if fit is None:
        opts = ", ".join(repr(m) for m in _BINARY_FITS)
        extra = " or a callable" if allow_callable else ""
        raise ValueError(f"method must be one of {opts}{extra}; got {method!r}.")
    return fit


@pytree_dataclass(data=("calibrators",))
class OneVsRestCalibrator:
    """One binary calibrator per class, outputs renormalised to sum to 1.

    Create it with :func:`fit_one_vs_rest`.

    Attributes
    ----------
    calibrators : tuple
        The ``C`` fitted binary calibrators (class ``k`` vs the rest).
    """

    calibrators: tuple

    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, probs: Any) -> jax.Array:
        """Calibrated ``[N, C]`` probabilities (rows sum to 1)."""
        p = _v.as_float_array(probs, "probs")
        if p.ndim != 2 or p.shape[1] != len(self.calibrators):
            raise ValueError(
                f"probs must have shape [N, {len(self.calibrators)}] (one column per "
                f"fitted class); got {tuple(p.shape)}."
            )
        _v.check_in_unit_interval(p, "probs", "class probabilities")
        if all(hasattr(cal, "_map") for cal in self.calibrators):
            # the fitted kinds: one program per bucket of N, checks on the host
            cals = tuple(
                c._bucketed() if isinstance(c, IsotonicCalibrator) else c
                for c in self.calibrators
            )
            return newton.apply_bucketed(_ovr_apply, cals, p)
        cols = [cal(p[:, k]) for k, cal in enumerate(self.calibrators)]
        return _renormalise(jnp.stack(cols, axis=1).astype(p.dtype))


def _renormalise(q: jax.Array) -> jax.Array:
    total = jnp.sum(q, axis=1, keepdims=True)
    uniform = jnp.full_like(q, 1.0 / q.shape[1])
    return jnp.where(total > 0, q / jnp.where(total > 0, total, 1), uniform)


@functools.partial(
    newton.fast_jit,
    compiler_options=functools.partial(multiclass_compiler_options, large=True),
)
def _ovr_apply(calibrators: tuple, p: jax.Array) -> jax.Array:
    first = jax.tree_util.tree_structure(calibrators[0])
    shapes = [[np.shape(a) for a in jax.tree_util.tree_leaves(c)] for c in calibrators]
    if all(
        jax.tree_util.tree_structure(c) == first and s == shapes[0]
        for c, s in zip(calibrators, shapes, strict=True)
    ):
        # calibrators of one kind and shape: one vmapped map (compiled once, not C times)
        stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *calibrators)
        q = jax.vmap(lambda cal, col: cal._map(col), in_axes=(0, 1), out_axes=1)(stacked, p)
    else:
        q = jnp.stack([cal._map(p[:, k]) for k, cal in enumerate(calibrators)], axis=1)
    return _renormalise(q.astype(p.dtype))


def fit_one_vs_rest(
    y_true: Any,
    probs: Any,
    *,
    method: str = "isotonic",
    weights: Any = None,
    **options: Any,
) -> OneVsRestCalibrator:
    r"""Calibrate each class one-vs-rest with a binary calibrator, then renormalise.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels in ``0 .. C-1``.
    probs : array_like, shape [N, C]
        Predicted class probabilities (rows sum to 1).
    method : {"isotonic", "platt", "beta", "histogram"}, default "isotonic"
        Binary calibrator fitted to :math:`(1[y_i = k], p_{ik})` for each class.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``), passed to every
        binary fit (see their ``weights``): an integer weight equals repeating the
        row, a weight of 0 removes it. Finite, ``>= 0``, not all 0.
    **options
        Passed to the binary fit (e.g. ``bins=`` or ``shrinkage=`` for histogram,
        ``eps=`` for beta).

    Returns
    -------
    OneVsRestCalibrator

    Notes
    -----
    :math:`\tilde p_{ik} = C_k(p_{ik}) / \sum_j C_j(p_{ij})` (Zadrozny & Elkan 2002,
    Sec. 5.2; scikit-learn's ``CalibratedClassifierCV`` does the same). When every
    class is calibrated to 0 for a row, the row becomes uniform ``1/C``. Every class
    must occur in ``y_true`` (a ``ValueError`` names a missing one; under ``jax.jit``
    the calibrator becomes NaN), and the parametric methods also need each class to
    be absent from some rows. ``jax.jit`` and ``jax.vmap`` work.

    References
    ----------
    Zadrozny, B. and Elkan, C. (2002). Transforming classifier scores into accurate
    multiclass probability estimates. *KDD*, 694-699.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_one_vs_rest
    >>> probs = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7],
    ...                   [0.5, 0.4, 0.1], [0.3, 0.3, 0.4], [0.2, 0.6, 0.2]])
    >>> cal = fit_one_vs_rest([0, 1, 2, 1, 2, 0], probs, method="isotonic")
    >>> out = cal(probs)
    >>> out.shape, bool(np.allclose(out.sum(axis=1), 1.0))
    ((6, 3), True)
    """
    fit = _binary_fit(method)
    parametric = _parametric_ovr_options(method, options)
    if parametric is not None:  # one program for all classes, per bucket of N
        out, converged = newton.bucketed_fit(
            _fit_ovr_parametric,
            (y_true, probs, weights),
            dict(method=method, options=parametric),
            fallback=lambda: (_fit_ovr_loop(fit, y_true, probs, weights, options), None),
        )
        if converged is not None and _v.is_concrete(converged):
            for ok in np.asarray(converged):
                if not ok:
                    _warn_not_converged(f"fit_{method}")
        return out
    batched = _nonparametric_ovr_options(method, options)
    if batched is not None:  # one program for all classes, per bucket of N
        out = newton.bucketed_fit(
            _fit_ovr_nonparametric,
            (y_true, probs, weights),
            dict(method=method, options=batched),
            fallback=lambda: _fit_ovr_loop(fit, y_true, probs, weights, options),
            compiler_options=multiclass_fit_compiler_options,
        )
        return _unpadded_knots(out, np.shape(probs)[0])
    return _fit_ovr_loop(fit, y_true, probs, weights, options)


def _parametric_ovr_options(method: Any, options: dict) -> tuple | None:
    """Platt's or beta's options, checked as their fits check them, as a sorted tuple;
    None for another method or an option they do not take (the loop raises for it)."""
    if method == "platt" and set(options) <= {"input", "soft_labels", "eps"}:
        input = options.get("input", "prob")
        soft_labels = options.get("soft_labels", True)
        _v.check_choice(input, "input", INPUTS)
        if not isinstance(soft_labels, bool):
            raise TypeError(f"soft_labels must be a bool; got {soft_labels!r}.")
        eps = check_eps(options.get("eps"))
        if eps is not None and input != "prob":
            raise ValueError("eps clips probabilities; it only applies with input='prob'.")
        return (("eps", eps), ("input", input), ("soft_labels", soft_labels))
    if method == "beta" and set(options) <= {"eps"}:
        return (("eps", check_eps(options.get("eps"))),)
    return None


def _nonparametric_ovr_options(method: Any, options: dict) -> tuple | None:
    """Isotonic's or histogram binning's options as a sorted tuple, for the fit of all
    classes in one program; None where the loop decides (another method, an option
    they do not take, or bins that are not an int: ``"fd"`` or edges)."""
    if method == "isotonic" and not options:
        return ()
    if method == "histogram" and set(options) <= {"bins", "strategy", "shrinkage"}:
        bins = options.get("bins", 10)
        strategy = options.get("strategy", "uniform")
        shrinkage = options.get("shrinkage", "jeffreys")
        if shrinkage is not None and not (
            isinstance(shrinkage, str) and shrinkage == "jeffreys"
        ):
            return None  # the loop's fit raises its message
        if isinstance(bins, int | np.integer) and not isinstance(bins, bool):
            return (("bins", int(bins)), ("shrinkage", shrinkage), ("strategy", strategy))
    return None


def _fit_ovr_nonparametric(y_true, probs, weights, n, *, method, options):
    """All classes' isotonic or histogram fits at once (vmapped over the classes).

    Records a check that fails exactly where the loop raises (the caller then runs it
    for its message). With ``n`` (a padded bucket) the isotonic knots have the
    bucket's length; the caller cuts them to ``N``.
    """
    if method == "isotonic":
        # On a mesh: the whole data on every device, in ONE collective (gather_all)
        y_true, probs, weights = gather_all((y_true, probs, weights), "An isotonic fit (PAV)")
    user_weights = weights is not None
    y, p = multiclass_inputs(y_true, probs)
    num, num_classes = p.shape
    weights = newton.observation_weights(weights, n, num, p.dtype)
    labels = (y[None, :] == jnp.arange(num_classes)[:, None]).astype(p.dtype)  # [C, N]
    counts = jnp.sum(labels if weights is None else labels * weights, axis=1)
    _v.record(
        "less_equal",
        "y_true",
        jnp.any(counts == 0),
        False,
        what="must hold every class",
    )
    if method == "isotonic":
        # the padding (copies of the last row) gets weight 0 in every class
        w = None if weights is None else jnp.broadcast_to(weights, labels.shape)
        scores = _zero_weight_to_a_tie(p.T, user_weights or None, weights)
        fit = isotonic_fit(scores, labels, w)  # vmapped over the classes
        cals = tuple(
            IsotonicCalibrator(fit.thresholds[k], fit.values[k].astype(p.dtype))
            for k in range(num_classes)
        )
    else:
        opts = dict(options)
        bins = resolve_bins(opts["bins"], opts["strategy"], p[:, 0])
        mask = None if n is None else jnp.arange(num) < n

        def one(yk, pk):
            b = bins
            if user_weights and b.edges is None and b.strategy == "quantile":
                b = b._replace(edges=weighted_quantile_edges(pk, weights, b.num_bins))
            return _curve(yk, pk, weights if user_weights else None, b, mask)

        curves, edges = jax.vmap(one)(labels, p.T)
        values = _bin_values(curves, opts["shrinkage"])
        cals = tuple(
            HistogramBinningCalibrator(edges[k], values[k]) for k in range(num_classes)
        )
    return OneVsRestCalibrator(cals)


def _unpadded_knots(out: OneVsRestCalibrator, n: int) -> OneVsRestCalibrator:
    """Isotonic knots of a padded fit cut to the ``N`` of an unpadded one (host)."""

    def cut(k: jax.Array) -> jax.Array:
        return _v.slice_without_program(k, slice(0, n))

    cals = []
    for c in out.calibrators:
        if isinstance(c, IsotonicCalibrator) and c.thresholds.shape[-1] > n:
            c = IsotonicCalibrator(cut(c.thresholds), cut(c.values))
        cals.append(c)
    return OneVsRestCalibrator(tuple(cals))


def _fit_ovr_parametric(y_true, probs, weights, n, *, method, options):
    """All classes' Platt or beta fits at once (the solver batched over classes).

    Records checks that fail exactly where the per-class fits raise (the caller then
    runs them one by one for their messages); returns the calibrator and the classes'
    convergence flags.
    """
    opts = dict(options)
    eps = opts["eps"]
    y, p = multiclass_inputs(y_true, probs)
    num, num_classes = p.shape
    weights = newton.observation_weights(weights, n, num, p.dtype)
    if weights is None:
        weights = jnp.ones((num,), p.dtype)
    labels = (y[None, :] == jnp.arange(num_classes)[:, None]).astype(p.dtype)  # [C, N]
    counts = jnp.sum(labels * weights, axis=1)
    _v.record(
        "less_equal",
        "y_true",
        jnp.any((counts == 0) | (counts == jnp.sum(weights))),
        False,
        what="must hold every class, and each class must be absent from some rows",
    )
    pt = p.T  # [C, N]
    use_logit = method == "beta" or opts["input"] == "prob"
    if use_logit and eps is None:
        _no_infinite_logits(p, "probs", eps, f"fit_{method}")
    if method == "platt":
        feats = (_logit(pt, eps) if opts["input"] == "prob" else pt,)
        x0 = lower = None
        soft = opts["soft_labels"]
    else:
        q = pt if eps is None else jnp.clip(pt, eps, 1 - eps)
        feats = (jnp.log(q), -jnp.log1p(-q))
        x0 = jnp.asarray([1.0, 1.0, 0.0], p.dtype)
        lower = jnp.asarray([0.0, 0.0, -jnp.inf], p.dtype)
        soft = False
    theta, converged = jax.vmap(
        lambda f, lab: _logistic_fit(f, lab, weights, x0, lower, soft_labels=soft)
    )(feats, labels)
    if method == "platt":
        cals = tuple(
            PlattCalibrator(-theta[k, 0], -theta[k, 1], opts["input"], eps)
            for k in range(num_classes)
        )
    else:
        cals = tuple(
            BetaCalibrator(theta[k, 0], theta[k, 1], theta[k, 2], eps)
            for k in range(num_classes)
        )
    return OneVsRestCalibrator(cals), converged


def _fit_ovr_loop(fit, y_true, probs, weights, options):
    """One binary fit per class (any method), with the per-class error messages."""
    y, p = _ovr_inputs(y_true, probs)
    if weights is not None:
        options = dict(options, weights=weights)
    num_classes = p.shape[1]
    xp = jnp
    host_y, host_p = _v.host_copy(y), _v.host_copy(p)
    if host_y is not None and host_p is not None:
        # the classes' labels and columns cut on the host: no program for each N (the
        # binary fits pad them to their buckets)
        xp, y, p = np, host_y, host_p
    counts = xp.sum(y[:, None] == xp.arange(num_classes), axis=0)
    # One host sync of C counts (never the data): a class without examples gets a
    # calibrator fitted to all-0 labels, i.e. one that maps every score to 0.
    host_counts = np.asarray(counts) if _v.is_concrete(counts) else None
    calibrators = []
    for k in range(num_classes):
        if host_counts is not None and host_counts[k] == 0:
            present = [int(c) for c in np.flatnonzero(host_counts)]
            raise ValueError(
                f"class {k} does not occur in y_true ({y.shape[0]} labels, classes "
                f"present: {present}); one-vs-rest calibration fits one calibrator per "
                f"class and needs examples of every class. Use a larger or stratified "
                f"calibration set, or drop column {k} of probs if the class cannot occur."
            )
        yk = (y == k).astype(p.dtype)
        try:
            calibrators.append(fit(yk, p[:, k], **options))
        except ValueError as err:
            raise ValueError(f"class {k}: {err}") from err
    out = OneVsRestCalibrator(tuple(calibrators))
    if host_counts is None:  # traced: a missing class makes the calibrator NaN
        every = jnp.all(counts > 0)
        out = jax.tree_util.tree_map(
            lambda x: jnp.where(every, x, jnp.nan)
            if jnp.issubdtype(x.dtype, jnp.floating)
            else x,
            out,
        )
    return out


@_v.validated
def _ovr_inputs(y_true, probs):
    return multiclass_inputs(y_true, probs)


# --------------------------------------------------------------------------- top-label
class TopLabelPrediction(NamedTuple):
    """What a :class:`TopLabelCalibrator` returns.

    Attributes
    ----------
    label : Array of int32, shape [N]
        The predicted class (argmax, the first of ties).
    confidence : Array, shape [N]
        The calibrated probability that the predicted class is right.
    """

    label: jax.Array
    confidence: jax.Array


@pytree_dataclass(data=("calibrators",))
class TopLabelCalibrator:
    """Top-label calibration: one binary calibrator of the confidence per predicted class.

    Create it with :func:`fit_top_label`. Calling it on ``[N, C]`` probabilities gives
    a :class:`TopLabelPrediction`: the predicted class and its calibrated confidence.

    Attributes
    ----------
    calibrators : tuple
        The ``C`` fitted binary calibrators; calibrator ``k`` maps the confidence
        ``max p`` of a row predicted as class ``k`` to P(y = k).
    """

    calibrators: tuple

    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, probs: Any) -> TopLabelPrediction:
        """The predicted class and its calibrated confidence, each ``[N]``."""
        p = _v.as_float_array(probs, "probs")
        if p.ndim != 2 or p.shape[1] != len(self.calibrators):
            raise ValueError(
                f"probs must have shape [N, {len(self.calibrators)}] (one column per "
                f"fitted class); got {tuple(p.shape)}."
            )
        _v.check_in_unit_interval(p, "probs", "class probabilities")
        cals = tuple(
            c._bucketed() if isinstance(c, IsotonicCalibrator) else c for c in self.calibrators
        )
        return TopLabelPrediction(*newton.apply_bucketed(_top_label_apply, cals, p))


@newton.fast_jit
def _top_label_apply(calibrators: tuple, p: jax.Array):
    label = jnp.argmax(p, axis=1)
    confidence = jnp.max(p, axis=1)
    q = jnp.stack([cal._map(confidence) for cal in calibrators], axis=1).astype(p.dtype)
    confidence = jnp.take_along_axis(q, label[:, None], axis=1)[:, 0]
    return label.astype(jnp.int32), confidence


def fit_top_label(
    y_true: Any,
    probs: Any,
    *,
    method: str = "histogram",
    weights: Any = None,
    **options: Any,
) -> TopLabelCalibrator:
    r"""Top-label calibration (Gupta & Ramdas 2022): calibrate the confidence per predicted class.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels in ``0 .. C-1``.
    probs : array_like, shape [N, C]
        Predicted class probabilities (rows sum to 1).
    method : {"histogram", "isotonic", "platt", "beta"}, default "histogram"
        The binary calibrator fitted, for each class ``k``, to the pairs
        (``y_i == k``, ``max_j p_ij``) of the rows predicted as ``k``.
        ``"histogram"`` defaults to ``bins=10, strategy="quantile"`` (uniform-mass
        bins, as in the paper) and to :func:`fit_histogram_binning`'s Jeffreys
        shrinkage, :math:`(k + 1/2) / (n + 1)` per bin (``shrinkage=None``: the
        paper's raw fractions :math:`k / n`).
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``), passed to the binary
        fits: an integer weight equals repeating the row, 0 removes it.
    **options
        Passed to the binary fit (e.g. ``bins=``, ``strategy=`` for histogram).

    Returns
    -------
    TopLabelCalibrator
        Callable on ``[N, C]`` probabilities; returns a :class:`TopLabelPrediction`
        (``label``, ``confidence``).

    Notes
    -----
    A predictor is top-label calibrated when :math:`P(Y = c(X) \mid c(X),
    h(X)) = h(X)`: among the inputs predicted as class :math:`k` with confidence
    :math:`h`, a fraction :math:`h` are of class :math:`k`. This conditions on the
    predicted class as well as the confidence, so it is stronger than the usual
    "confidence calibration" (which pools the classes and can hide a class whose
    confidence is systematically wrong). Gupta & Ramdas' reduction: for every class
    :math:`k`, fit a binary calibrator of the confidence :math:`\max_j p_{ij}` on the
    calibration rows predicted as :math:`k` (target :math:`1[y_i = k]`); the
    predicted class is kept (argmax, first of ties). Here each class's fit runs on all
    rows with weight 0 outside its predicted rows, so one compiled program serves
    every class. A class never predicted on the calibration data gets the calibrator
    fitted to all rows' confidences (pooled confidence calibration). ``jax.jit`` and
    ``jax.vmap`` work for the methods whose fits do.

    References
    ----------
    Gupta, C. and Ramdas, A. (2022). Top-label calibration and multiclass-to-binary
    reductions. *ICLR*.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_top_label
    >>> probs = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7],
    ...                   [0.5, 0.4, 0.1], [0.3, 0.3, 0.4], [0.2, 0.6, 0.2]])
    >>> cal = fit_top_label([0, 1, 2, 1, 2, 0], probs, bins=1)
    >>> out = cal(probs)
    >>> out.label.tolist(), [round(float(c), 4) for c in out.confidence]
    ([0, 1, 2, 0, 2, 1], [0.5, 0.5, 0.8333, 0.5, 0.8333, 0.5])

    (Class 2, predicted twice and right twice: :math:`(2 + 1/2) / (2 + 1)`, histogram
    binning's Jeffreys shrinkage; ``shrinkage=None`` gives 1.0.)
    """
    fit = _binary_fit(method)
    if method == "histogram":
        options = {"bins": 10, "strategy": "quantile", **options}
    y, p = _ovr_inputs(y_true, probs)
    num_classes = p.shape[1]
    host_y, host_p = _v.host_copy(y), _v.host_copy(p)
    xp = np if (host_y is not None and host_p is not None) else jnp
    if xp is np:
        y, p = host_y, host_p
    label = xp.argmax(p, axis=1)
    confidence = xp.max(p, axis=1)
    correct = (label == y).astype(p.dtype)
    base = xp.ones(p.shape[0], p.dtype)
    if weights is not None:
        w = check_weights(weights, p.shape[0], p.dtype)
        base = np.asarray(w) if xp is np and _v.is_concrete(w) else w
    calibrators = []
    for k in range(num_classes):
        mine = (label == k).astype(p.dtype)
        some = xp.sum(mine * base) > 0
        wk = xp.where(some, mine, 1).astype(p.dtype) * base
        try:
            calibrators.append(fit(correct, confidence, weights=wk, **options))
        except ValueError as err:
            raise ValueError(f"class {k} (rows predicted as {k}): {err}") from err
    return TopLabelCalibrator(tuple(calibrators))
