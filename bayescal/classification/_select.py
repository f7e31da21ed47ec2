"""Choosing a binary calibrator (or none) by cross-validation on a proper score."""

from __future__ import annotations

import functools
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlog1py, xlogy

from bayescal._src import selection as _sel
from bayescal._src import validation as _v
from bayescal._src.binned import jeffreys_means
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.isotonic import _host_pav
from bayescal._src.resampling import check_key
from bayescal._src.ties import pool_ties
from bayescal.classification import _host
from bayescal.classification._bbq import fit_bbq
from bayescal.classification._calibrators import (
    BetaCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    fit_beta,
    fit_histogram_binning,
    fit_isotonic,
    fit_platt,
    fit_temperature,
)
from bayescal.classification._cross import _check_folds, _stratified_folds
from bayescal.classification._inputs import check_eps
from bayescal.classification._scaling import (
    DirichletCalibrator,
    fit_dirichlet,
    fit_vector_scaling,
)
from bayescal.classification._spline import fit_spline

__all__ = ["CalibratorSelection", "CANDIDATES", "select_calibrator"]

SCORES = ("log_loss", "brier")

DEFAULT = ("none", "platt", "isotonic", "beta", "histogram")
_LOGIT = {"platt", "beta"}  # fits on log p / log(1 - p): p must be inside (0, 1)


# --------------------------------------------------------------------------- host fits
# For concrete inputs up to HOST_MAX_SIZE observations the folds are fitted in NumPy,
# in float64, with no compiled program: every candidate's K + 1 fits (the folds' and
# the one on all the data) are weight rows, as in the compiled kernel. A logistic fit
# is convex with one optimum, so Newton's method here reaches the optimum fit_platt /
# fit_beta reach (they agree with float64 to ~1e-6 relative in float32); the isotonic
# fit pools ties and runs fit_isotonic's PAV (scipy's);
# histogram binning is two bincounts per row.


def _host_platt(data, w_rows, input="prob"):
    y, p = data
    p64 = p.astype(np.float64)
    f = np.log(p64) - np.log1p(-p64) if input == "prob" else p64
    theta, _ = _host.logistic_rows(
        [f], y, w_rows, np.array([0.0, np.nan]), np.full(2, -np.inf), soft_labels=True
    )
    a, b = -theta[:, 0], -theta[:, 1]  # A = -beta, B = -c

    def build(r):
        a_r, b_r = (jax.device_put(np.asarray(v, p.dtype)) for v in (a[r], b[r]))
        return PlattCalibrator(a_r, b_r, input=input)

    q = _host.platt_map(a[:, None], b[:, None], f)
    return q, build


def _host_beta(data, w_rows):
    y, p = data
    feats = [np.log(p.astype(np.float64)), -np.log1p(-p.astype(np.float64))]
    theta, _ = _host.logistic_rows(
        feats, y, w_rows, np.array([1.0, 1.0, 0.0]), np.array([0.0, 0.0, -np.inf]),
        soft_labels=False,
    )

    def build(r):
        return BetaCalibrator(*(jax.device_put(np.asarray(v, p.dtype)) for v in theta[r]))

    q = _host.beta_map(theta[:, :1], theta[:, 1:2], theta[:, 2:], p.astype(np.float64))
    return q, build


def _host_isotonic(data, w_rows):
    y, p = data
    fits = []
    for w in w_rows:
        keep = w > 0
        pooled = pool_ties(p[keep], y[keep], w[keep])
        values = _host_pav(pooled.mean, pooled.weight, True)
        fits.append((pooled.thresholds, values))
    q = np.stack([np.interp(p, t.astype(np.float64), v) for t, v in fits])

    def build(r):
        t, v = fits[r]
        pad = p.size - t.size  # fit_isotonic's fixed-size output repeats the last knot
        return IsotonicCalibrator(
            jax.device_put(np.concatenate([t, np.repeat(t[-1:], pad)])),
            jax.device_put(np.concatenate([v, np.repeat(v[-1:], pad)]).astype(p.dtype)),
        )

    return q, build


def _host_histogram(data, w_rows, num_bins=10):
    y, p = data
    # fit_histogram_binning's edges: uniform_edges' k / K rounded once, built here in
    # NumPy (jnp.asarray would compile a program)
    edges = (np.arange(num_bins + 1, dtype=np.float64) / num_bins).astype(p.dtype)
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, num_bins - 1)
    rows = w_rows.shape[0]
    cell = (idx + num_bins * np.arange(rows)[:, None]).ravel()
    total = np.bincount(cell, w_rows.ravel(), rows * num_bins).reshape(rows, num_bins)
    ones = np.bincount(cell, (w_rows * y).ravel(), rows * num_bins).reshape(rows, num_bins)
    mid = ((edges[:-1] + edges[1:]) / 2).astype(p.dtype)  # an empty bin: its midpoint
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(total > 0, ones / np.where(total > 0, total, 1), mid)
    # the candidate's shrinkage, (k + 1/2) / (n + 1), by fit_histogram_binning's helper
    values = jeffreys_means(values, total, np)
    q = np.take_along_axis(values, np.broadcast_to(idx, (rows, p.size)), axis=1)

    def build(r):
        return HistogramBinningCalibrator(
            jax.device_put(edges), jax.device_put(values[r].astype(p.dtype))
        )

    return q, build


def _host_rows(fit):
    """The ``host`` fit of a candidate whose public ``fit_*`` and calibrator call have
    NumPy twins (``bayescal._src.host``): one public fit per weight row, on all the
    observations with the row's weights (0 for the rows it must ignore, as the
    compiled fits see them), and its calibrated probabilities. Where a twin declines,
    the public function runs its compiled kernel: the same result, slower."""

    def host(data, w_rows):
        y, p = data
        cals = [fit(y, p, w.astype(p.dtype)) for w in w_rows]
        q = np.stack([np.asarray(cal(p), np.float64) for cal in cals])
        return q, lambda r: cals[r]

    return host


def _log_odds(p, xp, dtype):
    """``log(p / (1 - p))`` in ``dtype`` where ``0 < p < 1`` (0 elsewhere), and that mask."""
    inside = (p > 0) & (p < 1)
    safe = xp.where(inside, p, 0.5).astype(dtype)
    return xp.log(safe) - xp.log1p(-safe), inside


def _binary_temperature(y, p, w):
    """Temperature scaling of the probabilities' log-odds, as a calibrator taking the
    probabilities: :math:`q = \\sigma(\\mathrm{logit}(p) / T)`, by :func:`fit_temperature`
    on the binary logits (hard labels; Platt scaling with the intercept fixed at 0),
    returned as the :class:`PlattCalibrator` with ``a = -1/T``, ``b = 0``. Rows at
    exactly 0 or 1 are left out of the fit (weight 0): any temperature keeps them
    (:math:`\\sigma(\\pm\\infty / T)`), and the calibrator maps them to themselves.
    NumPy inputs (the host folds, the command line) are fitted on the host in float64
    (``fit_temperature``'s NumPy twin), traced ones in the kernel."""
    host = isinstance(p, np.ndarray)
    xp = np if host else jnp
    z, inside = _log_odds(p, xp, np.float64 if host else p.dtype)
    w = xp.where(inside, w, 0)
    with warnings.catch_warnings():
        # log-odds that all lie in [0, 1] are no probabilities passed by mistake here
        warnings.filterwarnings("ignore", "fit_temperature: every value", UserWarning)
        try:
            t = fit_temperature(y, z, weights=w).temperature
        except ValueError as err:  # its message names logits and weights, not passed here
            raise ValueError(
                "the 'temperature' candidate cannot be fitted to y_prob (in "
                "select_calibrator, to a training part of the folds): with the logits "
                "log(p / (1 - p)) of its probabilities strictly inside (0, 1), and "
                f"weight 0 for exact 0 and 1: {err} Leave 'temperature' out of the "
                "candidates, or use 'platt' ('platt_score' with exact 0 and 1), whose soft "
                "labels keep its fit finite."
            ) from None
    if host:
        a = jax.device_put(np.asarray(-1 / np.float64(t), p.dtype))
        return PlattCalibrator(a, jax.device_put(np.zeros((), p.dtype)))
    a = (-1 / t).astype(p.dtype)
    return PlattCalibrator(a, jnp.zeros_like(a))


def _host_temperature(data, w_rows):
    """The ``host`` fit of ``"temperature"``: :func:`_binary_temperature` per weight
    row, and its probabilities computed here in float64 (exact 0 and 1 kept), so that
    no call of the calibrator's kernel (which exact 0 and 1 would take) compiles."""
    y, p = data
    cals = [_binary_temperature(y, p, w.astype(p.dtype)) for w in w_rows]
    z, inside = _log_odds(p, np, np.float64)
    slope = np.array([-float(cal.a) for cal in cals])[:, None]  # 1 / T, as refitted
    q = np.where(inside, _host.sigmoid(slope * z), p.astype(np.float64))
    return q, lambda r: cals[r]


def _fit_spline(y, p, w):
    return fit_spline(y, p, weights=w)


def _fit_bbq(y, p, w):
    # the posterior-mean estimates (never exactly 0 or 1, as the histogram candidate):
    # a cross-validated log-loss and the refitted winner stay finite on new data
    return fit_bbq(y, p, weights=w, estimate="posterior")


#: The candidates :func:`select_calibrator` knows, by name. A new binary calibrator
#: joins with one line, e.g. ``CANDIDATES["venn_abers"] = Candidate(lambda y, p, w:
#: fit_venn_abers(y, p, weights=w))`` (its fit must trace under ``jit``/``vmap`` and take
#: observation weights; see :class:`bayescal._src.selection.Candidate`; a ``host=``
#: NumPy version of the fits spares small inputs the compilation). Register at import
#: time: the program compiled for a tuple of names is reused.
CANDIDATES: dict[str, _sel.Candidate] = {
    "none": _sel.Candidate(
        lambda y, p, w: None,
        host=lambda data, w: (data[1].astype(np.float64)[None], lambda r: None),
    ),
    "platt": _sel.Candidate(lambda y, p, w: fit_platt(y, p, weights=w), host=_host_platt),
    # Platt on the probability itself as the score (no logit, so exact 0 and 1 are
    # fine): scikit-learn's CalibratedClassifierCV(method="sigmoid") on predict_proba
    "platt_score": _sel.Candidate(
        lambda y, p, w: fit_platt(y, p, input="score", weights=w),
        host=functools.partial(_host_platt, input="score"),
    ),
    "isotonic": _sel.Candidate(
        lambda y, p, w: fit_isotonic(y, p, weights=w),
        trim=lambda cal, n: IsotonicCalibrator(
            *(jax.device_put(np.asarray(a)[:n]) for a in (cal.thresholds, cal.values))
        ),  # cut on the host: no program per n
        host=_host_isotonic,
    ),
    "beta": _sel.Candidate(lambda y, p, w: fit_beta(y, p, weights=w), host=_host_beta),
    # temperature scaling of logit(p): Platt with the intercept fixed at 0, hard
    # labels (Guo et al. 2017); exact 0 and 1 are kept as they are, and left out of the fit
    "temperature": _sel.Candidate(_binary_temperature, host=_host_temperature),
    # Jeffreys' shrinkage (fit_histogram_binning's default, named here so that the
    # candidate never says 0 or 1 whatever the default): no infinite held-out log-loss
    "histogram": _sel.Candidate(
        lambda y, p, w: fit_histogram_binning(y, p, weights=w, shrinkage="jeffreys"),
        host=_host_histogram,
    ),
    # its model range counts the fold's rows of weight > 0
    "bbq": _sel.Candidate(_fit_bbq, host=_host_rows(_fit_bbq)),
    "spline": _sel.Candidate(_fit_spline, host=_host_rows(_fit_spline)),
}


def _registry() -> dict[str, _sel.Candidate]:
    return CANDIDATES


def _log_loss(cal, data):
    y, p = data
    q = p if cal is None else cal(p)
    return -(xlogy(y, q) + xlog1py(1 - y, -q))


def _brier(cal, data):
    y, p = data
    q = p if cal is None else cal(p)
    return (q - y) ** 2


_LOSSES = {"log_loss": _log_loss, "brier": _brier}


def _host_loss(score: str, eps: float | None):
    """Per-observation loss of calibrated probabilities ``q`` on the host (float64)."""

    def loss(q, data):
        y = data[0]
        if score == "brier":
            return (q - y) ** 2
        if eps is not None:
            q = np.clip(q, eps, 1 - eps)
        return np.where(y > 0.5, -np.log(q), -np.log1p(-q))

    return loss


def _clipped_log_loss(eps: float):
    # one function per eps (cached), so that the compiled program is reused
    return _CLIPPED.setdefault(eps, lambda cal, data: _log_loss_eps(cal, data, eps))


_CLIPPED: dict[float, Any] = {}


def _log_loss_eps(cal, data, eps):
    y, p = data
    q = p if cal is None else cal(p)
    q = jnp.clip(q, eps, 1 - eps)
    return -(xlogy(y, q) + xlog1py(1 - y, -q))


class CalibratorSelection(NamedTuple):
    """Result of :func:`select_calibrator`: the table of scores and the winner.

    Attributes
    ----------
    names : tuple of str
        The candidates, in the order given.
    mean : ndarray [C]
        Each candidate's cross-validated score: the mean over folds of its
        held-out score (lower is better).
    se : ndarray [C]
        Standard error of ``mean``: the standard deviation of the fold scores over
        :math:`\\sqrt K`.
    diff_none : ndarray [C]
        Mean over folds of (candidate - ``"none"``) on the same held-out folds
        (negative: recalibrating helps); NaN when ``"none"`` is no candidate.
    diff_none_se : ndarray [C]
        Standard error of the paired difference.
    fold_scores : ndarray [C, K]
        The held-out score of every candidate on every fold.
    folds : ndarray of int [N]
        The fold of every observation.
    winner : str
        The chosen candidate (``"none"``: no recalibration).
    calibrator : calibrator or None
        The winner refitted on all the data (with its ``fit_*`` and defaults), or
        None when ``"none"`` wins: use the raw probabilities.
    score : str
        The score of the table.
    rule : str
        How the winner was chosen.
    """

    names: tuple
    mean: np.ndarray
    se: np.ndarray
    diff_none: np.ndarray
    diff_none_se: np.ndarray
    fold_scores: np.ndarray
    folds: np.ndarray
    winner: str
    calibrator: Any
    score: str
    rule: str

    def __repr__(self) -> str:
        return _sel.table_repr(
            "CalibratorSelection", self.names, self.mean, self.se, self.diff_none,
            self.diff_none_se, self.winner, self.score,
        )


def _check_candidates(
    candidates: Any, registry: Any = None, example: str = "'platt'", what: str = ""
) -> tuple[str, ...]:
    """Distinct candidate names of ``registry`` (default :data:`CANDIDATES`);
    ``example`` and ``what`` complete the messages."""
    registry = CANDIDATES if registry is None else registry
    if isinstance(candidates, str) or not isinstance(candidates, tuple | list):
        raise TypeError(
            f"candidates must be a tuple of names, e.g. ('none', {example}); got "
            f"{candidates!r}."
        )
    names = tuple(candidates)
    known = ", ".join(repr(n) for n in registry)
    for name in names:
        if not isinstance(name, str) or name not in registry:
            raise ValueError(f"candidates must be names among {known}{what}; got {name!r}.")
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"candidates must be distinct names, at least one; got {names}.")
    return names


def select_calibrator(
    y_true: Any,
    y_prob: Any,
    *,
    candidates: Any = DEFAULT,
    score: str = "log_loss",
    folds: Any = 5,
    key: Any = None,
    weights: Any = None,
    rule: str = "paired",
    eps: float | None = None,
) -> CalibratorSelection:
    r"""Choose a calibrator, or none, by cross-validation on a proper score.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1, of held-out (calibration) data; with ``[N, C]``
        probabilities, class labels ``0 .. C-1``.
    y_prob : array_like, shape [N] or [N, C]
        The model's predicted probabilities of class 1 for them, in [0, 1] (inside
        (0, 1) when ``"platt"`` or ``"beta"`` is a candidate). Or class probabilities
        ``[N, C]`` (rows summing to 1, every value > 0; ``C = 2`` only with the
        candidates named, since two columns are most often a binary
        ``predict_proba``, whose ``[:, 1]`` is meant): then the candidates are the
        multiclass ones, ``("none", "temperature",
        "vector", "dirichlet")`` by default: :func:`fit_temperature` and
        :func:`fit_vector_scaling` of ``log p`` and :func:`fit_dirichlet` of ``p``,
        with their defaults, and the refitted winner is a
        :class:`DirichletCalibrator` in every case (temperature and vector scaling of
        ``log p`` are Dirichlet maps with :math:`W = I/T` and :math:`W =
        \mathrm{diag}(w)`), so it takes the probabilities. The scores are the
        multiclass log loss and Brier score (the sum over classes, scikit-learn's
        ``brier_score_loss``); the folds deal each class, shuffled by NumPy's generator
        seeded with ``key``'s data, round-robin.
    candidates : tuple of str, default ("none", "platt", "isotonic", "beta", "histogram")
        Names in :data:`CANDIDATES`: ``"none"`` (the raw probabilities), and the
        calibrators of :func:`fit_platt`, :func:`fit_isotonic`, :func:`fit_beta`,
        :func:`fit_histogram_binning`, with their defaults (histogram binning's
        Jeffreys shrinkage, :math:`(k + 1/2) / (n + 1)` per bin, so that it never
        predicts exactly 0 or 1 from a few observations); ``"platt_score"``
        (:func:`fit_platt` with ``input="score"``: the sigmoid of ``A p + B`` of the
        probability itself, scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``
        on ``predict_proba``). When ``y_prob`` holds probabilities of exactly 0 or 1
        (random forests, boosted trees), whose logit is infinite, the default is
        ``("none", "platt_score", "isotonic", "histogram")``: no clip to choose, and
        the result does not depend on one. ``"bbq"`` (:func:`fit_bbq` with
        ``estimate="posterior"``, never exactly 0 or 1) and ``"spline"`` (:func:`fit_spline`, which chooses its own penalty by an inner
        cross-validation within each fold) are not defaults but can be named too, as
        can ``"temperature"``: :func:`fit_temperature` of the log-odds
        :math:`\log(p / (1 - p))`, :math:`q = \sigma(\mathrm{logit}(p) / T)` (Platt
        scaling with :math:`B = 0` and hard labels; one parameter, so it keeps
        :math:`p = 1/2` and the ranking), refitted as the :class:`PlattCalibrator`
        with :math:`A = -1/T`, :math:`B = 0`, which takes the probabilities. Any
        temperature keeps a probability of exactly 0 or 1, so those rows are left out
        of its fit and mapped to themselves (no clip, no error); a ValueError naming
        ``y_prob`` says when no finite temperature fits (every label on the side of
        1/2 that ``p`` says: :math:`T \to 0`).
    score : {"log_loss", "brier"}, default "log_loss"
        The proper score of the held-out predictions (lower is better).
    folds : int or array_like of int, default 5
        The number ``K >= 2`` of stratified folds (drawn with ``key``, as
        :func:`cross_calibrate` draws them), or your own fold id ``0 .. K-1`` for
        every observation.
    key : PRNG key or int seed
        Randomness of the fold assignment; needed when ``folds`` is a number.
    weights : array_like, shape [N], optional
        Observation weights: of the fits (as their ``weights``) and of the held-out
        means. Finite, ``>= 0``, not all 0.
    rule : {"paired", "min", "one_se"}, default "paired"
        The winner: the lowest mean score, unless the 95% interval of its paired
        difference to ``"none"`` (``diff_none +- t * diff_none_se``, Student's ``t``
        with ``K - 1`` degrees of freedom) reaches 0: then ``"none"``, so nothing is
        recalibrated without evidence that it helps on held-out data. ``"min"``: the
        lowest mean score whatever its uncertainty; ``"one_se"``: the first candidate
        in ``candidates`` whose mean is within one standard error of the lowest.
    eps : float in (0, 0.5), optional
        With ``score="log_loss"``: clip the scored probabilities to ``[eps, 1 - eps]``.
        Off by default, so a calibrator that gives probability 0 to an event that
        happens (isotonic; the raw probabilities of a tree ensemble) scores ``inf``.

    Returns
    -------
    CalibratorSelection
        The table (means, standard errors, paired differences to ``"none"``, fold
        scores), the winner's name and the winner refitted on all the data.

    Notes
    -----
    Each of the :math:`K` folds is held out in turn: every candidate is fitted on
    the other folds and scored on the held-out one, so each score is an honest
    estimate of the candidate's score on new data (the calibrator never sees the
    observations it is scored on). A candidate's ``mean`` is the average of its
    :math:`K` fold scores, its ``se`` their standard deviation over
    :math:`\sqrt K`. The folds are shared by all candidates, so a candidate's
    difference to ``"none"`` is paired fold by fold: ``diff_none_se`` is much
    smaller than the two ``se`` combined, and ``diff_none`` more than about two
    ``diff_none_se`` below 0 is a real gain from recalibrating. The winner (by
    ``rule``; ties go to the earlier candidate) is refitted on all the data. When
    recalibration does not help, ``"none"`` wins and ``calibrator`` is None: on
    small samples a flexible calibrator (isotonic, histogram) often makes held-out
    predictions worse, which this table shows rather than hides.

    The standard errors treat the fold scores as independent, which they are not
    quite (the training parts overlap); they are a guide, not a test (Bengio &
    Grandvalet 2004). The folds are weight masks over the data: up to
    ``N = 131072`` the fits run in NumPy in float64 (Newton's method for Platt and
    beta, which converges to the unique optimum that :func:`fit_platt` and
    :func:`fit_beta` reach, so the parameters agree with theirs to the dtype's
    precision; PAV with pooled ties for isotonic; two bincounts for histogram
    binning; the NumPy twin of :func:`fit_temperature`, Newton's method on
    :math:`1/T`, for temperature), so nothing is compiled but the fold assignment's
    small program; beyond,
    all folds and candidates, and the fits on all the data, run as one compiled
    program per bucket of ``N``.

    References
    ----------
    Hastie, T., Tibshirani, R. and Friedman, J. (2009). *The Elements of Statistical
    Learning*, 2nd ed., sec. 7.10 (cross-validation, the one-standard-error rule).
    Bengio, Y. and Grandvalet, Y. (2004). No unbiased estimator of the variance of
    K-fold cross-validation. *JMLR* 5, 1089-1105.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import select_calibrator
    >>> rng = np.random.default_rng(0)
    >>> p_true = rng.uniform(0.05, 0.95, 400)
    >>> y = (rng.uniform(size=400) < p_true).astype(int)
    >>> p = 1 / (1 + ((1 - p_true) / p_true) ** 3)  # overconfident model
    >>> res = select_calibrator(y, p, candidates=("none", "platt"), key=0)
    >>> res.winner, bool(res.diff_none[1] < -2 * res.diff_none_se[1])
    ('platt', True)
    >>> type(res.calibrator).__name__  # refitted on all 400 points
    'PlattCalibrator'
    """
    _v.check_choice(score, "score", SCORES)
    _v.check_choice(rule, "rule", _sel.RULES)
    eps = check_eps(eps)
    if eps is not None and score != "log_loss":
        raise ValueError(
            "eps clips the probabilities of the log loss; with score='brier' leave it None."
        )
    if np.ndim(y_prob) == 2 and np.shape(y_prob)[1] == 2 and candidates is DEFAULT:
        raise ValueError(
            "y_prob has two columns (scikit-learn's predict_proba of a binary "
            "classifier?): pass y_prob[:, 1], the probability of class 1, to choose "
            "among the binary calibrators (Platt, isotonic, beta, histogram); to compare "
            "the multiclass ones on two classes, name them in candidates, e.g. "
            "candidates=('none', 'temperature', 'vector')."
        )
    if np.ndim(y_prob) == 2:
        return _select_multiclass(
            y_true, y_prob, candidates=candidates, score=score, folds=folds, key=key,
            weights=weights, rule=rule, eps=eps,
        )
    names = _check_candidates(candidates)
    if candidates is DEFAULT and _exact_zero_or_one(y_prob):
        # the logit of 0 or 1 is infinite: Platt on the probabilities as scores, no
        # beta calibration (on log p and log(1 - p)); the table names what ran
        names = ("none", "platt_score", "isotonic", "histogram")
    labels, probs = _host_inputs(y_true, y_prob, names)
    n = labels.shape[0]
    dtype = probs.dtype
    w = _sel.host_weights(weights, n, dtype)
    fold = _fold_ids(folds, key, labels, w)
    small = _sel.on_host(n)
    on_host = tuple(c for c in names if small and CANDIDATES[c].host is not None)
    compiled = tuple(c for c in names if c not in on_host)
    rows, refit = {}, {}
    if on_host:  # NumPy, float64: no compiled program
        train, test = _sel.fold_weights(fold, w.astype(np.float64), n, np.float64)
        scores, builds = _sel.host_scores(
            (labels.astype(np.float64), probs), train, test, on_host, CANDIDATES,
            _host_loss(score, eps),
        )
        rows.update(zip(on_host, scores, strict=True))
        refit.update(zip(on_host, builds, strict=True))
    if compiled:  # one program for all of them, per bucket of N
        size = bucket_size(n)
        train, test = _sel.fold_weights(fold, w, size, dtype)
        data = (
            jax.device_put(pad_axis(labels.astype(dtype), size, axis=0)),
            jax.device_put(pad_axis(probs, size, axis=0)),
        )
        loss = _LOSSES[score] if eps is None else _clipped_log_loss(eps)
        scores, fitted = _sel.cross_validated_scores(
            data, train, test, compiled, _registry, loss
        )
        rows.update(zip(compiled, scores, strict=True))
        for name, cal in zip(compiled, fitted, strict=True):
            refit[name] = functools.partial(_trimmed, name, cal, n)
    fold_scores = np.stack([rows[c] for c in names]).astype(dtype)
    table = _sel.summarise(fold_scores, names, rule)
    winner = names[table.winner]
    cal = refit[winner]()
    return CalibratorSelection(
        names, table.mean, table.se, table.diff, table.diff_se, fold_scores, fold,
        winner, cal, score, rule,
    )


def _trimmed(name: str, cal: Any, n: int) -> Any:
    trim = CANDIDATES[name].trim
    return cal if cal is None or trim is None else trim(cal, n)


def _host_inputs(y_true: Any, y_prob: Any, names: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Labels and probabilities as host arrays, checked (messages name the argument)."""
    y, p = _sel.concrete_inputs(y_true, y_prob)
    if y.ndim != 1 or p.ndim != 1 or y.shape != p.shape:
        raise ValueError(
            f"y_true and y_prob must be 1-D of one length; got shapes {y.shape} and "
            f"{p.shape}."
        )
    if not np.all((y == 0) | (y == 1)):
        # the other functions' message: the values found and their count
        raise ValueError(_v.failure_message("binary", "y_true", y))
    p = p.astype(jnp.result_type(float)) if p.dtype.kind != "f" else p
    if p.dtype == np.float64 and not jax.config.jax_enable_x64:
        p = p.astype(np.float32)
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        # the counts of NaN and inf, or of the values outside [0, 1] and their range
        raise ValueError(
            _v.failure_message("unit", "y_prob", p, what="predicted probabilities")
        )
    if _LOGIT & set(names) and np.any((p == 0) | (p == 1)):
        bad = sorted(_LOGIT & set(names))
        raise ValueError(
            f"y_prob holds probabilities of exactly 0 or 1 (a tree ensemble's?), whose "
            f"logit is infinite: the candidates {bad} cannot fit them. Name "
            "'platt_score' instead of 'platt' (Platt scaling of the probabilities as "
            "scores, as scikit-learn's sigmoid calibration does), or leave candidates "
            "at their default, which does so; clipping y_prob would make the fit "
            "depend on the clip."
        )
    return y.astype(np.int64), p


def _exact_zero_or_one(y_prob: Any) -> bool:
    """Whether ``y_prob`` (checked later) holds a probability of exactly 0 or 1."""
    try:
        p = np.asarray(y_prob)
        return p.dtype.kind in "biuf" and bool(np.any((p == 0) | (p == 1)))
    except Exception:  # traced or odd input: _host_inputs gives the error
        return False


def _fold_ids(folds: Any, key: Any, labels: np.ndarray, w: np.ndarray) -> np.ndarray:
    num = _sel.fold_count(folds, key)
    if num is not None:
        counts = np.bincount(labels[w > 0], minlength=2)
        if counts.min() < num:
            raise ValueError(
                f"each class needs at least folds={num} members so that every fold "
                f"holds both; got {counts[0]} of class 0 and {counts[1]} of class 1. "
                "Lower folds or add data."
            )
        return _stratified_folds(labels, num, check_key(_v._seed_key(key)))
    if isinstance(folds, bool) or np.ndim(folds) == 0:
        raise TypeError(f"folds must be an int >= 2 or fold ids; got {folds!r}.")
    fold = _check_folds(folds, labels)
    for k in range(int(fold.max()) + 1):
        train = labels[fold != k]
        if train.min() == train.max():
            raise ValueError(
                f"the data outside fold {k} hold only class {train[0]}; every "
                "training part needs both classes. Stratify the folds."
            )
    return fold


# --------------------------------------------------------------------------- multiclass
#: The multiclass candidates, by name (``y_prob`` of shape [N, C]). Each refitted
#: calibrator is a :class:`DirichletCalibrator` (it takes the probabilities): temperature
#: and vector scaling of ``log p`` are Dirichlet maps with ``W = I / T`` and
#: ``W = diag(w)``.
MULTICLASS_DEFAULT = ("none", "temperature", "vector", "dirichlet")


def _dirichlet_of(coef: np.ndarray, intercept: np.ndarray, dtype: Any) -> DirichletCalibrator:
    return DirichletCalibrator(
        jax.device_put(np.asarray(coef, dtype)), jax.device_put(np.asarray(intercept, dtype))
    )


def _multiclass_fit(name: str, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> Any:
    """The candidate ``name`` fitted with observation weights ``w`` (0: ignored)."""
    k = p.shape[1]
    if name == "none":
        return None
    if name == "dirichlet":
        return fit_dirichlet(y, p, weights=w)
    logp = np.log(p)
    if name == "temperature":
        t = float(fit_temperature(y, logp, weights=w).temperature)
        return _dirichlet_of(np.eye(k) / t, np.zeros(k), p.dtype)
    cal = fit_vector_scaling(y, logp, weights=w)
    return _dirichlet_of(np.diag(np.asarray(cal.coef)), np.asarray(cal.intercept), p.dtype)


def _multiclass_host(name: str):
    def host(data, w_rows):
        y, p = data
        cals = [_multiclass_fit(name, y, p, w.astype(p.dtype)) for w in w_rows]
        q = np.stack(
            [p.astype(np.float64) if c is None else np.asarray(c(p), np.float64) for c in cals]
        )
        return q, lambda r: cals[r]

    return host


MULTICLASS_CANDIDATES: dict[str, _sel.Candidate] = {
    name: _sel.Candidate(None, host=_multiclass_host(name)) for name in MULTICLASS_DEFAULT
}


def _multiclass_loss(score: str, eps: float | None):
    """Per-observation multiclass loss of ``q [R, n, C]`` (float64): ``-log q_y``, or
    the Brier score ``sum_k (q_k - [y = k])^2`` (Brier 1950; scikit-learn's
    ``brier_score_loss`` for more than two classes)."""

    def loss(q, data):
        y = data[0]
        if score == "brier":
            return np.sum((q - np.eye(q.shape[-1])[y]) ** 2, axis=-1)
        qy = np.take_along_axis(q, np.broadcast_to(y[:, None], q.shape[:-1] + (1,)), -1)[..., 0]
        if eps is not None:
            qy = np.clip(qy, eps, 1 - eps)
        return -np.log(qy)

    return loss


def _multiclass_inputs(y_true: Any, y_prob: Any) -> tuple[np.ndarray, np.ndarray]:
    y, p = _sel.concrete_inputs(y_true, y_prob)
    if p.ndim != 2 or p.shape[1] < 2 or y.shape != (p.shape[0],):
        raise ValueError(
            f"y_prob must be [N, C] class probabilities (C >= 2) and y_true [N] labels; "
            f"got shapes {y.shape} and {p.shape}."
        )
    c = p.shape[1]
    with np.errstate(invalid="ignore"):
        bad = ~((y == np.round(y)) & (y >= 0) & (y < c))
    if np.any(bad):
        count, shown = _v.listed_values(y, bad)
        raise ValueError(
            f"y_true must hold class labels 0 .. {c - 1} (one per column of y_prob); got "
            f"{count} other value{'s' if count != 1 else ''} ({shown}). Pass class "
            "indices (e.g. np.argmax of one-hot labels)."
        )
    p = p.astype(jnp.result_type(float)) if p.dtype.kind != "f" else p
    if p.dtype == np.float64 and not jax.config.jax_enable_x64:
        p = p.astype(np.float32)
    if not np.all(np.isfinite(p)):  # the counts of NaN and inf
        raise ValueError(_v.failure_message("finite", "y_prob", p, what="class probabilities"))
    if np.any((p <= 0) | (p > 1)):
        count, shown = _v.listed_values(p, (p <= 0) | (p > 1))
        raise ValueError(
            "y_prob must hold class probabilities in (0, 1]: the candidates fit log(p), "
            f"infinite at 0; got {count} value{'s' if count != 1 else ''} outside it "
            f"({shown}). Clip and renormalise (e.g. p = np.clip(p, 1e-7, 1); "
            "p /= p.sum(1, keepdims=True))."
        )
    tol = (1e-4 if p.dtype == np.float32 else 1e-8) * c
    off = np.abs(p.sum(axis=1, dtype=np.float64) - 1)
    if np.any(off > tol):
        worst = int(np.argmax(off))
        raise ValueError(
            f"y_prob's rows must sum to 1 (within {tol:g}); {int(np.sum(off > tol))} of "
            f"{p.shape[0]} rows do not, the worst (row {worst}) sums to "
            f"{float(p[worst].sum(dtype=np.float64)):.6g}. Normalise the rows (e.g. "
            "p /= p.sum(1, keepdims=True))."
        )
    return y.astype(np.int64), p


def _multiclass_folds(folds: Any, key: Any, labels: np.ndarray, w: np.ndarray, c: int):
    """Fold ids: each class shuffled by NumPy's generator seeded with the key's data
    and dealt round-robin (as the binary folds are dealt); or the user's ids."""
    num = _sel.fold_count(folds, key)
    if num is not None:
        counts = np.bincount(labels[w > 0], minlength=c)
        if counts.min() < num:
            raise ValueError(
                f"each class needs at least folds={num} members so that every training "
                f"part holds it; got class counts {counts.tolist()}. Lower folds or add data."
            )
        key = check_key(_v._seed_key(key))
        seed = np.asarray(jax.random.key_data(key)).astype(np.uint64).ravel().tolist()
        rng = np.random.default_rng(seed)
        fold = np.empty(labels.shape[0], np.int64)
        start = 0
        for label in range(c):
            idx = rng.permutation(np.flatnonzero(labels == label))
            fold[idx] = (start + np.arange(idx.size)) % num
            start += idx.size
        return fold
    if isinstance(folds, bool) or np.ndim(folds) == 0:
        raise TypeError(f"folds must be an int >= 2 or fold ids; got {folds!r}.")
    fold = np.asarray(folds)
    if fold.shape != labels.shape or not np.issubdtype(fold.dtype, np.integer):
        raise ValueError(
            f"folds must be integer fold ids, one per observation (shape "
            f"{labels.shape}); got dtype {fold.dtype} and shape {fold.shape}."
        )
    num = int(fold.max()) + 1
    if fold.min() < 0 or num < 2 or np.unique(fold).size != num:
        raise ValueError(f"folds must use every id 0 .. K-1 with K >= 2; got {np.unique(fold).tolist()}.")
    for k in range(num):
        present = np.unique(labels[(fold != k) & (w > 0)])
        if present.size != c:
            raise ValueError(
                f"the data outside fold {k} miss a class (they hold {present.tolist()} of "
                f"0 .. {c - 1}); every training part needs every class. Stratify the folds."
            )
    return fold.astype(np.int64)


def _select_multiclass(y_true, y_prob, *, candidates, score, folds, key, weights, rule, eps):
    if candidates is DEFAULT:
        candidates = MULTICLASS_DEFAULT
    names = _check_candidates(
        candidates, MULTICLASS_CANDIDATES, "'temperature'", " for [N, C] probabilities"
    )
    labels, probs = _multiclass_inputs(y_true, y_prob)
    n, c = probs.shape
    w = _sel.host_weights(weights, n, probs.dtype)
    fold = _multiclass_folds(folds, key, labels, w, c)
    train, test = _sel.fold_weights(fold, w.astype(np.float64), n, np.float64)
    scores, builds = _sel.host_scores(
        (labels, probs), train, test, names, MULTICLASS_CANDIDATES,
        _multiclass_loss(score, eps),
    )
    fold_scores = scores.astype(probs.dtype)
    table = _sel.summarise(fold_scores, names, rule)
    winner = names[table.winner]
    return CalibratorSelection(
        names, table.mean, table.se, table.diff, table.diff_se, fold_scores, fold,
        winner, builds[table.winner](), score, rule,
    )
