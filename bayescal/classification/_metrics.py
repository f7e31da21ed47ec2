"""Calibration metrics for binary classifiers: reliability curves, ECE, proper scores."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.binned import (
    bin_midpoints,
    binned_means,
    means_from_sums,
    quantile_edges,
    uniform_edges,
)
from bayescal._src.binning import bin_index, bin_sums_from_edges, pallas_on_gpu
from bayescal._src.curve import CalibrationCurve
from bayescal._src.host import _NORMS, _REDUCTIONS, _device, _reduce, _result
from bayescal._src.host import first as host_first
from bayescal._src.options import NORMS, BinStrategy, KeyLike, Norm, Reduction
from bayescal._src.reduce import check_reduction, clip_unit, reduce_scores
from bayescal._src.resampling import check_key
from bayescal._src.sorting import gather_all
from bayescal._src.ties import isotonic_fit
from bayescal._src.warn import warn
from bayescal.classification._host import _bin_means, _binary, _binned, sigmoid
from bayescal.classification._inputs import (
    Bins,
    binary_inputs,
    check_eps,
    observation_weights,
    quick_compiler_options,
    resolve_bins,
)
from bayescal.core import curve_error

__all__ = [
    "BrierDecomposition",
    "MurphyDecomposition",
    "PredictionSharpness",
    "reliability_curve",
    "expected_calibration_error",
    "brier_score",
    "log_loss",
    "brier_decomposition",
    "brier_decomposition_binned",
    "prediction_sharpness",
]

DEBIAS_METHODS = ("bernoulli", "normal")

# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "y_prob": 0, "logits": 0, "weights": 0}


# --------------------------------------------------------------------------- kernels
@functools.partial(jax.jit, static_argnames=("num_bins", "strategy"))
def _reliability_kernel(y, p, w, edges, mask=None, *, num_bins: int, strategy: str):
    """Curve and edges; ``edges`` None means: derive them from ``strategy``.

    ``mask``: the real observations of a padded bucket (the rest go to no bin).
    """
    if edges is None:
        if strategy == "uniform":
            edges = uniform_edges(num_bins, p.dtype)
        else:
            edges = quantile_edges(p, num_bins, mask)
    if w is None and pallas_on_gpu():
        # On CUDA GPUs the Pallas kernel finds the bins itself: p, y read once.
        mid = bin_midpoints(edges).astype(p.dtype)
        weight, sums = bin_sums_from_edges(p, edges, (p, y), mask)
        expected, observed = means_from_sums(weight, sums, fill=(mid, mid))
        return CalibrationCurve(expected, observed, weight, edges=edges), edges
    idx = bin_index(p, edges)
    if mask is not None:
        idx = jnp.where(mask, idx, num_bins)  # out of range: counted nowhere
    mid = bin_midpoints(edges).astype(p.dtype)
    weight, (expected, observed) = binned_means(idx, num_bins, (p, y), w, fill=(mid, mid))
    return CalibrationCurve(expected, observed, weight, edges=edges), edges


def _curve(y, p, w, bins: Bins, mask=None) -> tuple[CalibrationCurve, jax.Array]:
    return _reliability_kernel(
        y, p, w, bins.edges, mask, num_bins=bins.num_bins, strategy=bins.strategy
    )


@functools.partial(
    jax.jit,
    static_argnames=("num_bins", "strategy", "norm", "debias", "num_samples", "method"),
)
def _ece_kernel(
    y,
    p,
    w,
    edges,
    key,
    mask=None,
    *,
    num_bins: int,
    strategy: str,
    norm: str,
    debias: bool,
    num_samples: int,
    method: str,
):
    curve, _ = _reliability_kernel(
        y, p, w, edges, mask, num_bins=num_bins, strategy=strategy
    )
    plugin = curve_error(curve, norm=norm)
    if not debias:
        return plugin
    dtype = p.dtype
    count = curve.weight.astype(dtype)
    frac = count / jnp.sum(count)
    ybar, pbar = curve.observed, curve.expected
    if norm == "l2":
        # Kumar, Liang & Ma (2019), Def. 5.2 / their unbiased_l2_ce: bins with fewer
        # than two observations contribute 0.
        several = count > 1
        variance = ybar * (1 - ybar) / jnp.where(several, count - 1, 1)
        term = jnp.where(several, frac * ((ybar - pbar) ** 2 - variance), 0)
        return jnp.sqrt(jnp.maximum(jnp.sum(term), 0)).astype(dtype)
    # norm == "l1": ECE_db = 2 * plugin - mean over resampled bin label means.
    shape = (num_samples, num_bins)
    safe = jnp.maximum(count, 1)
    if method == "bernoulli":
        draws = jax.random.binomial(key, count, ybar, shape=shape, dtype=dtype) / safe
    else:
        sd = jnp.sqrt(ybar * (1 - ybar) / safe)
        draws = ybar + sd * jax.random.normal(key, shape, dtype)
    resampled = jnp.sum(frac * jnp.abs(draws - pbar), axis=-1)
    return (2 * plugin - jnp.mean(resampled)).astype(dtype)


class _ECEOptions(NamedTuple):
    norm: str
    debias: bool
    num_samples: int
    method: str


def _ece_options(
    norm: str, debias: bool, num_samples: int, method: str, key: Any
) -> tuple[_ECEOptions, jax.Array | None]:
    """Validate the options shared by the binary and multiclass calibration errors."""
    _v.check_choice(norm, "norm", NORMS)
    _v.check_choice(method, "method", DEBIAS_METHODS)
    if not isinstance(debias, bool):
        raise TypeError(f"debias must be a bool; got {debias!r}.")
    if debias and norm == "max":
        raise ValueError(
            "debias=True is defined for norm='l1' and norm='l2' only; got norm='max'. "
            "Use the plug-in MCE (debias=False) or another norm."
        )
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    random = debias and norm == "l1"
    if random and key is None:
        raise TypeError(
            "debias=True with norm='l1' corrects the bias by resampling, which needs "
            "randomness: pass key (a PRNG key or an int seed, e.g. key=0), or use "
            "norm='l2', whose debiased estimate is exact."
        )
    if key is not None and not random:
        raise TypeError(
            "key is used only by debias=True with norm='l1' (the resampling "
            f"correction); got a key with debias={debias}, norm={norm!r}. Drop the key."
        )
    return _ECEOptions(norm, debias, num_samples, method), (
        check_key(key) if random else None
    )


def _ece(
    y, p, w, bins: Bins, key: Any, options: _ECEOptions, mask=None
) -> jax.Array:
    """The ECE kernel on resolved bins (``key`` only for the resampled L1 debiasing)."""
    return _ece_kernel(
        y,
        p,
        w,
        bins.edges,
        key,
        mask,
        num_bins=bins.num_bins,
        strategy=bins.strategy,
        **options._asdict(),
    )


# --------------------------------------------------------------------------- curves
@overload
def reliability_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bins: Any = ...,
    strategy: BinStrategy = ...,
    weights: Any = ...,
    return_edges: Literal[False] = ...,
) -> CalibrationCurve: ...


@overload
def reliability_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bins: Any = ...,
    strategy: BinStrategy = ...,
    weights: Any = ...,
    return_edges: Literal[True],
) -> tuple[CalibrationCurve, jax.Array]: ...


# --------------------------------------------------------------------------- closed forms
# Written once for both paths against the array namespace xp: jax.numpy in the
# kernels, numpy in the host twins.
def _brier_terms(y: Any, x: Any, is_logit: bool, xp: Any) -> Any:
    """Squared errors of the probabilities ``x`` (or of ``sigmoid(x)`` for logits)."""
    return (sigmoid(x, xp) - y) ** 2 if is_logit else (x - y) ** 2


def _log_loss_terms(y: Any, x: Any, is_logit: bool, eps: float | None, xp: Any) -> Any:
    """Per-observation log-loss of labels ``y`` in {0, 1}: of probabilities ``x``
    (clipped to ``[eps, 1 - eps]`` with ``eps``), or of logits ``x`` as
    ``softplus(-x)`` for ``y = 1`` and ``softplus(x)`` for ``y = 0``."""
    if is_logit:
        return xp.logaddexp(0, xp.where(y == 1, -x, x))
    p = x if eps is None else clip_unit(x, eps, xp)
    return -xp.where(y == 1, xp.log(p), xp.log1p(-p))


# --------------------------------------------------------------------------- host twins
def _twin_brier_score(
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
    y, x, w = data
    if is_logit:
        x = x.astype(np.float64)
    return _reduce(_brier_terms(y, x, is_logit, np), w, reduction, data[1].dtype)


def _twin_log_loss(
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
    # in the input's dtype, as the kernel (the sums in float64, in _reduce)
    return _reduce(_log_loss_terms(y, x, is_logit, eps, np), w, reduction, x.dtype)


def _twin_expected_calibration_error(
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


def _twin_reliability_curve(
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


@host_first(_twin_reliability_curve)
@_v.validated(fuse=True, bucket=_BUCKET)
def reliability_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bins: Any = 15,
    strategy: BinStrategy = "uniform",
    weights: ArrayLike | None = None,
    return_edges: bool = False,
) -> CalibrationCurve | tuple[CalibrationCurve, jax.Array]:
    r"""Reliability curve of a binary classifier: fraction positive per probability bin.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    bins : int, array_like or "fd", default 15
        Number of bins (placed by ``strategy``; 15 as in
        :func:`expected_calibration_error`, so the curve shows the bins the ECE
        sums over), an array of ``K + 1``
        nondecreasing edges, or ``"fd"`` for Freedman-Diaconis bins on [0, 1]
        (resolved eagerly from ``y_prob``; not available under ``jax.jit``).
    strategy : {"uniform", "quantile"}, default "uniform"
        With an int ``bins``: equal-width bins on [0, 1], or edges at the sample
        quantiles of ``y_prob`` (equal-count bins).
    weights : array_like, shape [N], optional
        Nonnegative observation weights.
    return_edges : bool, default False
        Also return the ``K + 1`` bin edges used (e.g. for
        ``plot.reliability_diagram(curve, edges=edges)`` with quantile or
        Freedman-Diaconis bins).

    Returns
    -------
    CalibrationCurve
        ``expected``: mean predicted probability per bin; ``observed``: fraction of
        positives per bin; ``weight``: count per bin (int32), or the summed weights.
        All ``[K]``, empty bins included; ``edges``: the ``K + 1`` bin edges used. With ``return_edges=True``, the tuple
        ``(curve, edges)``.

    See Also
    --------
    expected_calibration_error : Its count-weighted gap.
    bayescal.regression.calibration_curve : The regression twin.
    bayescal.plot.reliability_diagram : Draws it.

    Notes
    -----
    Bin :math:`k` is :math:`[e_k, e_{k+1})`, the last bin closed; values outside the
    edges count in the first or last bin. With :math:`B_k` the observations in bin
    :math:`k`, :math:`n_k = |B_k|`,

    .. math:: \bar p_k = \frac{1}{n_k}\sum_{i \in B_k} p_i, \qquad
              \bar y_k = \frac{1}{n_k}\sum_{i \in B_k} y_i .

    An empty bin keeps weight 0 and reports ``expected = observed`` = its midpoint
    (a weightless point on the diagonal; filter with ``curve.weight > 0`` before
    plotting). Error functionals ignore it, and no NaN is ever produced.

    Quantile edges are ``np.quantile(y_prob, q)`` bit for bit (numpy's default
    linear method, ``q = (np.arange(K + 1) / K).astype(y_prob.dtype)``), eager and
    under ``jit``, so a probability that sits on an edge lands in the same bin as
    with numpy (``np.searchsorted(edges, p, side="right") - 1``, the last bin closed).
    ``weights`` weigh the bins' means, not the edges. Ties can repeat an edge; the tied values then all fall in the last
    bin that starts at their value and the others stay empty. scikit-learn's
    ``calibration_curve`` uses ``(e_k, e_{k+1}]`` bins and drops empty ones; away
    from edges the non-empty bins agree.

    References
    ----------
    DeGroot, M. H. and Fienberg, S. E. (1983). The comparison and evaluation of
    forecasters. *The Statistician* 32, 12-22.

    Examples
    --------
    >>> from bayescal.classification import reliability_curve
    >>> c = reliability_curve([0, 0, 1, 1], [0.1, 0.3, 0.6, 0.9], bins=2)
    >>> [round(v, 4) for v in c.expected.tolist()], c.observed.tolist(), c.weight.tolist()
    ([0.2, 0.75], [0.0, 1.0], [2, 2])
    """
    y, p = binary_inputs(y_true, y_prob)
    w = observation_weights(weights, p)
    curve, edges = _curve(y, p, w, resolve_bins(bins, strategy, p), _v.observation_mask(p.shape[0]))
    if not isinstance(return_edges, bool):
        raise TypeError(f"return_edges must be a bool; got {return_edges!r}.")
    return (curve, edges) if return_edges else curve


@host_first(_twin_expected_calibration_error)
@_v.validated(fuse=True, bucket=_BUCKET)
def expected_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bins: Any = 15,
    strategy: BinStrategy = "uniform",
    norm: Norm = "l1",
    debias: bool = False,
    weights: ArrayLike | None = None,
    key: KeyLike | None = None,
    num_samples: int = 1000,
    method: Literal["bernoulli", "normal"] = "bernoulli",
) -> jax.Array:
    r"""Expected calibration error: the count-weighted gap of the reliability curve.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    bins, strategy
        As in :func:`reliability_curve` (default 15 uniform bins).
    norm : {"l1", "l2", "max"}, default "l1"
        Mean absolute gap (the usual ECE), root mean squared gap, or the largest gap
        over non-empty bins (MCE).
    debias : bool, default False
        Kumar, Liang & Ma's debiased estimator (``"l1"`` and ``"l2"`` only).
    weights : array_like, shape [N], optional
        Observation weights (plug-in estimate only).
    key : PRNG key or int seed, optional
        Randomness of the ``"l1"`` debiasing, which resamples (required there; not
        accepted otherwise, since every other estimate is deterministic).
    num_samples : int, default 1000
        Resamples in the ``"l1"`` debiasing.
    method : {"bernoulli", "normal"}, default "bernoulli"
        How the ``"l1"`` debiasing redraws the bin label means (see Notes).

    Returns
    -------
    Array, scalar
        In ``y_prob``'s dtype.

    See Also
    --------
    reliability_curve : The curve it summarises.
    bayescal.regression.calibration_error : The regression twin.
    top_label_calibration_error : For multiclass confidences.

    Notes
    -----
    With :math:`n_k, \bar p_k, \bar y_k` from :func:`reliability_curve` and
    :math:`n = \sum_k n_k`, the plug-in estimates are (``bayescal.core.curve_error``)

    .. math:: \mathrm{ECE}_1 = \sum_k \frac{n_k}{n} |\bar y_k - \bar p_k|, \quad
              \mathrm{ECE}_2 = \Big(\sum_k \frac{n_k}{n} (\bar y_k - \bar p_k)^2
              \Big)^{1/2}, \quad \mathrm{MCE} = \max_{k: n_k > 0}|\bar y_k - \bar p_k|.

    ``debias=True, norm="l2"`` (Kumar et al. 2019, Def. 5.2, exact formula):
    :math:`(\bar y_k - \bar p_k)^2` overestimates the squared bin gap by the variance
    of :math:`\bar y_k`, estimated without bias by
    :math:`\bar y_k(1 - \bar y_k)/(n_k - 1)`, so

    .. math:: \widehat{\mathrm{ECE}}_2^{\,2} = \sum_{k: n_k \ge 2} \frac{n_k}{n}
              \Big[(\bar y_k - \bar p_k)^2 - \frac{\bar y_k (1 - \bar y_k)}{n_k - 1}
              \Big],

    and the result is :math:`\sqrt{\max(\widehat{\mathrm{ECE}}_2^{\,2}, 0)}`. Bins with
    fewer than two observations contribute 0 (as in the authors' code). The result is
    never larger than the plug-in ECE_2.

    ``debias=True, norm="l1"`` (Kumar et al. 2019, Sec. 5, bias correction by
    resampling): with :math:`R` = ``num_samples`` parametric redraws
    :math:`\bar y_k^{(r)}` of the bin label means,

    .. math:: \widehat{\mathrm{ECE}}_1 = 2\,\mathrm{ECE}_1 - \frac{1}{R}\sum_{r}
              \sum_k \frac{n_k}{n} |\bar y_k^{(r)} - \bar p_k| .

    ``method="bernoulli"``: :math:`n_k \bar y_k^{(r)} \sim
    \mathrm{Binomial}(n_k, \bar y_k)`, i.e. every label of bin :math:`k` redrawn as
    Bernoulli(:math:`\bar y_k`). ``method="normal"``: :math:`\bar y_k^{(r)} \sim
    \mathcal N(\bar y_k, \bar y_k(1-\bar y_k)/n_k)`, the normal approximation used in
    the authors' released code. The corrected value can be slightly negative. The
    correction is accurate when the bin gaps are large against their noise; at zero
    gap (a calibrated model) it removes only about 41% of the plug-in's bias (the
    factor :math:`2 - \sqrt 2`, from :math:`E|N(0, 2s^2)| = \sqrt 2\, E|N(0, s^2)|`).

    References
    ----------
    Kumar, A., Liang, P. and Ma, T. (2019). Verified uncertainty calibration.
    *NeurIPS 32*.
    Naeini, M. P., Cooper, G. F. and Hauskrecht, M. (2015). Obtaining well calibrated
    probabilities using Bayesian binning. *AAAI*.

    Examples
    --------
    >>> from bayescal.classification import expected_calibration_error
    >>> y, p = [0, 0, 1, 1], [0.1, 0.3, 0.6, 0.9]
    >>> round(float(expected_calibration_error(y, p, bins=2)), 4)
    0.225
    >>> round(float(expected_calibration_error(y, p, bins=2, norm="l2", debias=True)), 4)
    0.2264
    """
    y, p = binary_inputs(y_true, y_prob)
    options, key = _ece_options(norm, debias, num_samples, method, key)
    w = observation_weights(weights, p)
    if debias and w is not None:
        raise ValueError(
            "debias=True needs unweighted counts; got weights. Drop the weights or use "
            "debias=False."
        )
    bins = resolve_bins(bins, strategy, p)
    return _ece(y, p, w, bins, key, options, _v.observation_mask(p.shape[0]))


# --------------------------------------------------------------------------- scores
def _prob_or_logits(
    y_true: ArrayLike, y_prob: Any, logits: Any
) -> tuple[jax.Array, jax.Array, bool]:
    if (y_prob is None) == (logits is None):
        raise TypeError(
            "pass exactly one of y_prob (probabilities) and logits= (log-odds); got "
            f"{'both' if y_prob is not None else 'neither'}."
        )
    if logits is not None:
        y, z = binary_inputs(y_true, logits, prob_name="logits", probabilities=False)
        return y, z, True
    y, p = binary_inputs(y_true, y_prob)
    return y, p, False


@functools.partial(jax.jit, static_argnames=("is_logit", "reduction"))
def _brier_kernel(y, x, w, *, is_logit: bool, reduction: str):
    return reduce_scores(_brier_terms(y, x, is_logit, jnp), w, reduction)


@functools.partial(jax.jit, static_argnames=("is_logit", "eps", "reduction"))
def _log_loss_kernel(y, x, w, *, is_logit: bool, eps: float | None, reduction: str):
    return reduce_scores(_log_loss_terms(y, x, is_logit, eps, jnp), w, reduction)


_F = TypeVar("_F", bound=Callable[..., Any])


def _warns_on_probabilities_as_logits(fn: _F) -> _F:
    """Warn when ``logits=`` holds values that all lie in [0, 1] (as ``fit_temperature``
    does): probabilities passed as logits give a plausible, wrong score (log-loss 0.437
    where it is 0.112). Checked on inputs in host memory (NumPy, lists, CPU arrays)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        logits = kwargs.get("logits")
        if logits is not None and not isinstance(logits, jax.core.Tracer):
            host = (
                _v.host_copy(logits)
                if isinstance(logits, jax.Array)
                else np.asarray(logits)
                if isinstance(logits, list | tuple | np.ndarray)
                else None
            )
            if (
                host is not None
                and host.size
                and host.dtype.kind in "biuf"
                and bool(((host >= 0) & (host <= 1)).all())
            ):
                warn(
                    f"{fn.__name__}: every value of logits lies in [0, 1]; these look "
                    "like probabilities, not log-odds. Pass them as y_prob (the second "
                    "argument), or logits=np.log(p / (1 - p)).",
                    UserWarning,
                )
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@_warns_on_probabilities_as_logits
@host_first(_twin_brier_score)
@_v.validated(fuse=True, bucket=_BUCKET, per_observation=_v.unreduced)
def brier_score(
    y_true: ArrayLike,
    y_prob: ArrayLike | None = None,
    *,
    logits: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""Brier score: mean squared difference between probability and outcome.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N], optional
        Predicted probabilities of class 1.
    logits : array_like, shape [N], optional
        Log-odds instead of ``y_prob`` (exactly one of the two).
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}, default "mean"
        Average over observations, sum, or return per-observation scores.

    Returns
    -------
    Array
        :math:`\frac1n \sum_i (p_i - y_i)^2` (weighted mean with weights), in the
        input's dtype; ``[N]`` with ``reduction="none"``. Equals
        ``sklearn.metrics.brier_score_loss``.

    Warns
    -----
    UserWarning
        When every value of ``logits`` lies in [0, 1]: they look like probabilities.

    See Also
    --------
    brier_decomposition : Its exact CORP decomposition.
    bayescal.regression.crps_normal : The CRPS, which generalises the Brier score.

    References
    ----------
    Brier, G. W. (1950). Verification of forecasts expressed in terms of probability.
    *Monthly Weather Review* 78, 1-3.

    Examples
    --------
    >>> from bayescal.classification import brier_score
    >>> round(float(brier_score([0, 1], [0.2, 0.6])), 4)
    0.1
    """
    check_reduction(reduction)
    y, x, is_logit = _prob_or_logits(y_true, y_prob, logits)
    w = _v.mask_weights(observation_weights(weights, x), x.shape, x.dtype)
    return _brier_kernel(y, x, w, is_logit=is_logit, reduction=reduction)


@_warns_on_probabilities_as_logits
@host_first(_twin_log_loss)
@_v.validated(fuse=True, bucket=_BUCKET, per_observation=_v.unreduced)
def log_loss(
    y_true: ArrayLike,
    y_prob: ArrayLike | None = None,
    *,
    logits: ArrayLike | None = None,
    eps: float | None = None,
    weights: ArrayLike | None = None,
    reduction: Reduction = "mean",
) -> jax.Array:
    r"""Logarithmic loss (negative mean log-likelihood) of binary predictions.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N], optional
        Predicted probabilities of class 1.
    logits : array_like, shape [N], optional
        Log-odds instead of ``y_prob`` (exactly one of the two); computed with
        log-sigmoid, accurate for any finite logit.
    eps : float in (0, 0.5), optional
        Clip probabilities to ``[eps, 1 - eps]`` first (in the input's dtype; where
        ``1 - eps`` rounds to 1, the largest float below 1). Off by default: nothing
        is clipped unless you ask.
    weights : array_like, shape [N], optional
        Nonnegative observation weights of the mean or sum (not of ``"none"``).
    reduction : {"mean", "sum", "none"}, default "mean"
        Average over observations, sum, or return per-observation scores.

    Returns
    -------
    Array
        Scalar (``[N]`` with ``reduction="none"``), in the input's dtype.

    Warns
    -----
    UserWarning
        When every value of ``logits`` lies in [0, 1]: they look like probabilities.

    See Also
    --------
    bayescal.regression.nll_normal : The logarithmic score of Normal predictives. ``inf`` when a probability of exactly 0 was given to an
        observed 1 (or 1 to an observed 0).

    Notes
    -----
    .. math:: \mathrm{LL} = -\frac1n \sum_i \big[y_i \log p_i + (1-y_i)\log(1-p_i)\big],

    with :math:`0 \log 0 = 0`. From logits, :math:`\log p = -\mathrm{softplus}(-z)`
    and :math:`\log(1-p) = -\mathrm{softplus}(z)`. A forecast of probability 0 for an
    event that happens has infinite log loss: it called the event impossible. The
    result is then ``inf``, on purpose; scikit-learn's ``log_loss`` instead clips
    silently at machine epsilon (pass ``eps=np.finfo(dtype).eps`` to reproduce it).

    References
    ----------
    Good, I. J. (1952). Rational decisions. *JRSS B* 14, 107-114.

    Examples
    --------
    >>> from bayescal.classification import log_loss
    >>> round(float(log_loss([0, 1], [0.2, 0.6])), 4)
    0.367
    >>> round(float(log_loss([0, 1], logits=[0.0, 2.0])), 4)
    0.41
    >>> float(log_loss([1], [0.0]))
    inf
    """
    eps = check_eps(eps)
    y, x, is_logit = _prob_or_logits(y_true, y_prob, logits)
    if is_logit and eps is not None:
        raise ValueError("eps applies to probabilities; with logits= leave it None.")
    check_reduction(reduction)
    w = _v.mask_weights(observation_weights(weights, x), x.shape, x.dtype)
    return _log_loss_kernel(y, x, w, is_logit=is_logit, eps=eps, reduction=reduction)


# --------------------------------------------------------------------------- decompositions
class BrierDecomposition(NamedTuple):
    """CORP decomposition of the Brier score: ``BS = MCB - DSC + UNC``.

    Attributes
    ----------
    miscalibration : Array
        MCB >= 0: how much recalibration (isotonic, PAV) would lower the score.
    discrimination : Array
        DSC >= 0: how much the recalibrated forecast beats the climatology.
    uncertainty : Array
        UNC: the score of the constant forecast ``mean(y)``, i.e.
        ``mean(y) (1 - mean(y))``.
    """

    miscalibration: jax.Array
    discrimination: jax.Array
    uncertainty: jax.Array


class MurphyDecomposition(NamedTuple):
    """Binned Murphy decomposition: ``BS ~= reliability - resolution + uncertainty``.

    Attributes
    ----------
    reliability : Array, scalar
        Binned miscalibration term.
    resolution : Array, scalar
        Binned resolution term.
    uncertainty : Array, scalar
        Base-rate term ``pbar (1 - pbar)``.
    """

    reliability: jax.Array
    resolution: jax.Array
    uncertainty: jax.Array


@jax.jit
def _corp_kernel(
    y: jax.Array, p: jax.Array, w: jax.Array | None = None
) -> BrierDecomposition:
    """``w``: 1 for the real observations of a padded bucket, 0 for the padding."""
    # The padding repeats the last observation: pooled with its tie, weight 0 changes
    # no fitted value.
    recalibrated = isotonic_fit(p, y, w).fitted
    if w is None:
        mean = jnp.mean
    else:
        total = jnp.sum(w)

        def mean(x: jax.Array) -> jax.Array:
            return jnp.sum(w * x) / total

    ybar = mean(y)
    r = recalibrated
    # S(x) - S(r) and S(ybar) - S(r) as means of per-observation differences,
    # (x - y)^2 - (r - y)^2 = (x - r)(x + r - 2y): no cancellation of two means
    mcb = mean((p - r) * (p + r - 2 * y))
    dsc = mean((ybar - r) * (ybar + r - 2 * y))
    return BrierDecomposition(mcb, dsc, mean((ybar - y) ** 2))


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=quick_compiler_options)
def brier_decomposition(y_true: Any, y_prob: Any) -> BrierDecomposition:
    r"""Exact CORP decomposition of the Brier score into MCB, DSC and UNC.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].

    Returns
    -------
    BrierDecomposition
        ``(miscalibration, discrimination, uncertainty)``, scalars in ``y_prob``'s
        dtype, with ``brier_score = miscalibration - discrimination + uncertainty``
        up to rounding.

    Notes
    -----
    CORP (consistent, optimally binned, reproducible, PAV-based; Dimitriadis, Gneiting
    & Jordan 2021): :math:`\hat x` is the isotonic (PAV) regression of :math:`y` on the
    forecasts :math:`x`, with tied forecasts pooled to one value. With :math:`S` the
    mean Brier score and :math:`\bar y` the event rate,

    .. math:: \mathrm{MCB} = S(x) - S(\hat x), \quad
              \mathrm{DSC} = S(\bar y) - S(\hat x), \quad
              \mathrm{UNC} = S(\bar y),

    so :math:`S(x) = \mathrm{MCB} - \mathrm{DSC} + \mathrm{UNC}` exactly, MCB >= 0 and
    DSC >= 0 (PAV fits are optimal among nondecreasing maps, constants included).
    Unlike the binned :func:`brier_decomposition_binned` there is no tuning parameter
    and no within-bin remainder.

    References
    ----------
    Dimitriadis, T., Gneiting, T. and Jordan, A. I. (2021). Stable reliability
    diagrams for probabilistic classifiers. *PNAS* 118(8), e2016191118.

    Examples
    --------
    >>> from bayescal.classification import brier_decomposition
    >>> d = brier_decomposition([0, 1, 0, 1], [0.2, 0.4, 0.6, 0.8])
    >>> [round(float(v), 4) for v in d]
    [0.075, 0.125, 0.25]
    """
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y_true, y_prob = gather_all((y_true, y_prob), "The CORP Brier decomposition (PAV)")
    y, p = binary_inputs(y_true, y_prob)
    return _corp_kernel(y, p, _v.mask_weights(None, p.shape, p.dtype))


@functools.partial(jax.jit, static_argnames=("num_bins", "strategy"))
def _murphy_kernel(
    y, p, edges, mask=None, *, num_bins: int, strategy: str
) -> MurphyDecomposition:
    curve, _ = _reliability_kernel(
        y, p, None, edges, mask, num_bins=num_bins, strategy=strategy
    )
    total = jnp.sum(curve.weight)  # the number of (real) observations
    frac = curve.weight.astype(p.dtype) / total.astype(p.dtype)
    ybar = jnp.sum(frac * curve.observed)  # = mean(y): the count-weighted bin means
    rel = jnp.sum(frac * (curve.expected - curve.observed) ** 2)
    res = jnp.sum(frac * (curve.observed - ybar) ** 2)
    return MurphyDecomposition(rel, res, ybar * (1 - ybar))


@_v.validated(fuse=True, bucket=_BUCKET)
def brier_decomposition_binned(
    y_true: ArrayLike, y_prob: Any, *, bins: Any = 15, strategy: BinStrategy = "uniform"
) -> MurphyDecomposition:
    r"""Murphy's binned reliability / resolution / uncertainty decomposition (approximate).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    bins, strategy
        As in :func:`reliability_curve`.

    Returns
    -------
    MurphyDecomposition
        ``(reliability, resolution, uncertainty)``, scalars in ``y_prob``'s dtype.

    Notes
    -----
    With the bins of :func:`reliability_curve`,

    .. math:: \mathrm{REL} = \sum_k \frac{n_k}{n}(\bar p_k - \bar y_k)^2, \quad
              \mathrm{RES} = \sum_k \frac{n_k}{n}(\bar y_k - \bar y)^2, \quad
              \mathrm{UNC} = \bar y (1 - \bar y).

    ``REL - RES + UNC`` equals the Brier score only when the forecasts are constant
    within each bin; otherwise it misses the within-bin variance and covariance terms
    (Stephenson et al. 2008) and depends on the binning. For an exact decomposition
    use :func:`brier_decomposition` (CORP).

    References
    ----------
    Murphy, A. H. (1973). A new vector partition of the probability score. *J. Appl.
    Meteor.* 12, 595-600.
    Stephenson, D. B., Coelho, C. A. S. and Jolliffe, I. T. (2008). Two extra
    components in the Brier score decomposition. *Weather and Forecasting* 23, 752-757.

    Examples
    --------
    >>> from bayescal.classification import brier_decomposition_binned
    >>> d = brier_decomposition_binned([0, 0, 1, 1], [0.2, 0.2, 0.8, 0.8], bins=2)
    >>> [round(float(v), 4) for v in d]
    [0.04, 0.25, 0.25]
    """
    y, p = binary_inputs(y_true, y_prob)
    b = resolve_bins(bins, strategy, p)
    mask = _v.observation_mask(p.shape[0])
    return _murphy_kernel(y, p, b.edges, mask, num_bins=b.num_bins, strategy=b.strategy)


# --------------------------------------------------------------------------- sharpness
class PredictionSharpness(NamedTuple):
    """Spread of a classifier's predicted probabilities (larger is sharper).

    Attributes
    ----------
    variance : Array
        Variance of the predicted probabilities around their mean (population
        variance, divisor n).
    mean_distance : Array
        Mean distance from 1/2, ``mean(|p - 1/2|)``, in [0, 1/2].
    """

    variance: jax.Array
    mean_distance: jax.Array


@_v.validated(fuse=True, bucket={"y_prob": 0})
def prediction_sharpness(y_prob: Any) -> PredictionSharpness:
    r"""Sharpness of binary probability forecasts, without the labels.

    Parameters
    ----------
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].

    Returns
    -------
    PredictionSharpness
        ``(variance, mean_distance)``, scalars in ``y_prob``'s dtype.

    Notes
    -----
    :math:`\mathrm{Var}(p) = \frac1n\sum_i (p_i - \bar p)^2` and
    :math:`\frac1n\sum_i |p_i - \tfrac12|`. Calibration alone is cheap (the constant
    forecast :math:`\bar y` is calibrated); a useful forecaster is calibrated *and*
    sharp (Gneiting, Balabdaoui & Raftery 2007). For a calibrated forecaster the
    variance equals the resolution term of the Brier score decomposition, so it is
    the natural companion of :func:`brier_decomposition`; the mean distance from 1/2
    is the spread on the scale of a decision threshold at 1/2. Check that a
    recalibrator did not buy calibration by giving up sharpness.

    References
    ----------
    Gneiting, T., Balabdaoui, F. and Raftery, A. E. (2007). Probabilistic forecasts,
    calibration and sharpness. *JRSS B* 69, 243-268.

    Examples
    --------
    >>> from bayescal.classification import prediction_sharpness
    >>> s = prediction_sharpness([0.1, 0.9, 0.5, 0.5])
    >>> round(float(s.variance), 4), round(float(s.mean_distance), 4)
    (0.08, 0.2)
    """
    p = _v.as_float_array(y_prob, "y_prob")
    _v.check_ndim(p, "y_prob", 1)
    _v.check_nonempty(p, "y_prob")
    _v.check_in_unit_interval(p, "y_prob", "predicted probabilities")
    return _sharpness_kernel(p, _v.mask_weights(None, p.shape, p.dtype))


@jax.jit
def _sharpness_kernel(p: jax.Array, w: jax.Array | None = None) -> PredictionSharpness:
    """``w``: 1 for the real observations of a padded bucket, 0 for the padding."""
    if w is None:
        return PredictionSharpness(jnp.var(p), jnp.mean(jnp.abs(p - 0.5)))
    n = jnp.sum(w)
    mean = jnp.sum(w * p) / n
    return PredictionSharpness(
        jnp.sum(w * (p - mean) ** 2) / n, jnp.sum(w * jnp.abs(p - 0.5)) / n
    )


# --------------------------------------------------------------------------- streaming
def reliability_accumulator(bins: int = 15, *, weighted: bool = False):
    r"""Streaming :func:`reliability_curve` (uniform bins): ``init / update / merge / finalize``.

    For data in chunks, on several devices or hosts. The state holds integer counts
    per bin and compensated per-bin sums of the probabilities and labels, which merge
    by addition: the counts equal :func:`reliability_curve` on all the data exactly,
    the per-bin means to a few float ulps, whatever the chunking.

    Parameters
    ----------
    bins : int, default 15
        Number of equal-width bins on [0, 1].
    weighted : bool, default False
        Accept ``weights`` in ``update``; the curve's ``weight`` is then the summed
        weight per bin instead of the count. Both are floats (the count is exact up
        to ``2^24`` per bin in float32, ``2^53`` in float64; the state itself counts
        exactly far beyond ``2^31``).

    Returns
    -------
    bayescal._src.accumulate.Accumulator
        A NamedTuple of pure functions: ``init() -> state``,
        ``update(state, y_true, y_prob, weights=None) -> state``,
        ``merge(state, state) -> state`` and ``finalize(state) -> CalibrationCurve``.

    See Also
    --------
    reliability_curve : The one-shot curve.
    bayescal.regression.calibration_accumulator : The regression twin.

    Notes
    -----
    ``update`` is jitted and cannot raise on values: probabilities outside [0, 1],
    labels other than 0 and 1, negative or non-finite weights are counted as invalid
    and make ``finalize`` return NaN ``expected`` and ``observed``. Feed the curve to
    ``bayescal.core.curve_error`` for the ECE. Chunks are padded to power-of-two
    lengths internally (on the host for numpy and CPU arrays), so chunks of many
    sizes compile only a few times.

    Examples
    --------
    >>> from bayescal.classification import reliability_accumulator
    >>> from bayescal.core import curve_error
    >>> acc = reliability_accumulator(bins=2)
    >>> s = acc.update(acc.init(), [0, 0], [0.1, 0.3])
    >>> s = acc.merge(s, acc.update(acc.init(), [1, 1], [0.6, 0.9]))
    >>> c = acc.finalize(s)
    >>> c.weight.tolist(), round(float(curve_error(c)), 4)
    ([2.0, 2.0], 0.225)
    """
    from bayescal._src.accumulate import reliability_accumulator as _build

    if isinstance(bins, bool) or not isinstance(bins, int):
        raise TypeError(
            f"bins must be an int number of uniform bins; got {bins!r}. Quantile or "
            "custom edges depend on all the data and cannot be streamed."
        )
    num = _v.check_num_bins(bins, "bins")
    if not isinstance(weighted, bool):
        raise TypeError(f"weighted must be a bool; got {weighted!r}.")
    return _build(num, weighted)
