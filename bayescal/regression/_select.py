"""Choosing a recalibrator of Gaussian predictives (or none) by cross-validation."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from bayescal._src import selection as _sel
from bayescal._src import validation as _v
from bayescal._src.folds import stratified_folds
from bayescal._src.resampling import check_key
from bayescal.regression import _host
from bayescal.regression._recalibration import (
    IsotonicLevelCalibrator,
    SigmaScalingCalibrator,
    _host_map_levels,
    _host_ndtri,
)
from bayescal.regression._scores import crps_standard_normal

__all__ = ["RecalibratorSelection", "RECALIBRATORS", "select_recalibrator"]

SCORES = ("crps", "interval")
#: Levels of the quantile-score integral of the isotonic candidate's CRPS (midpoints
#: of GRID equal cells; for a Normal predictive the mean CRPS on this grid is within
#: ~2e-6 relative of the closed form).
GRID = 1024


# --------------------------------------------------------------------------- host fits
# The data are (z, sigma, dtype): standardized residuals (y - loc) / scale in float64
# and the scales. Each candidate's output describes, per weight row, the recalibrated
# predictive in standardized units: ("normal", factors [R]) for N(0, factor^2), or
# ("isotonic", [(raw, calibrated) knots per row]) for R o Phi.


def _host_none(data, w_rows):
    return ("normal", np.ones(1)), lambda r: None


def _host_sigma(data, w_rows):
    z, _, dtype = data
    factor = np.sqrt(np.sum(w_rows * z * z, axis=1) / np.sum(w_rows, axis=1))

    def build(r):
        return SigmaScalingCalibrator(jax.device_put(np.asarray(factor[r], dtype)), "normal", None)

    return ("normal", factor), build


def _host_isotonic(data, w_rows):
    z, _, dtype = data
    u = _host.ndtr(z)  # PIT values of the Normal predictives
    knots = []
    for w in w_rows:  # fit_isotonic_recalibrator: the (weighted) ECDF of the PIT values
        keep = w > 0
        order = np.argsort(u[keep], kind="stable")
        s = u[keep][order]
        cum = np.cumsum(w[keep][order])
        ecdf = cum[np.searchsorted(s, s, side="right") - 1] / cum[-1]
        knots.append((np.concatenate([[0.0], s, [1.0]]), np.concatenate([[0.0], ecdf, [1.0]])))

    def build(r):
        raw, cal = knots[r]
        pad = z.size + 2 - raw.size  # values of weight 0: knots (1, 1) at the end
        raw, cal = (np.concatenate([a, np.ones(pad)]).astype(dtype) for a in (raw, cal))
        return IsotonicLevelCalibrator(jax.device_put(raw), jax.device_put(cal))

    return ("isotonic", knots), build


RECALIBRATORS: dict[str, _sel.Candidate] = {
    "none": _sel.Candidate(None, host=_host_none),
    "isotonic": _sel.Candidate(None, host=_host_isotonic),
    "sigma": _sel.Candidate(None, host=_host_sigma),
}
DEFAULT = ("none", "isotonic", "sigma")


# --------------------------------------------------------------------------- scores
def _crps_grid(t: np.ndarray, zq: np.ndarray) -> np.ndarray:
    """``2 mean_j QS_{tau_j}(zq_j, t)``: the quantile-score integral of the CRPS on the
    midpoint levels ``tau_j`` of ``GRID`` cells, for sorted quantiles ``zq``, in
    O((M + n) log M) by prefix sums."""
    m = zq.size
    tau = (np.arange(m) + 0.5) / m
    k = np.searchsorted(zq, t, side="right")  # quantiles j >= k lie above t
    suffix = np.concatenate([np.cumsum(zq[::-1])[::-1], [0.0]])
    above, above_sum = m - k, suffix[k]
    total = t * tau.sum() - np.sum(tau * zq) - (t * above - above_sum)
    return 2 * total / m


def _interval_standard(t, lower, upper, alpha):
    return (
        (upper - lower)
        + (2 / alpha) * np.maximum(lower - t, 0)
        + (2 / alpha) * np.maximum(t - upper, 0)
    )


def _host_loss(score: str, alpha: float):
    half = float(_host_ndtri(np.asarray([1 - alpha / 2]))[0])
    levels = (np.arange(GRID) + 0.5) / GRID

    def loss(out, data):
        z, sigma, _ = data
        kind, params = out
        if kind == "normal":
            f = params[:, None]
            if score == "crps":
                return sigma * f * crps_standard_normal(np.asarray(z / f, np.float64))
            return sigma * _interval_standard(z, -half * f, half * f, alpha)
        rows = []
        for raw, cal in params:
            if score == "crps":
                zq = _host_ndtri(_host_map_levels(cal, raw, levels))  # R^-1, then Phi^-1
                rows.append(sigma * _crps_grid(z, zq))
            else:
                lo, hi = _host_ndtri(_host_map_levels(cal, raw, np.array([alpha / 2, 1 - alpha / 2])))
                rows.append(sigma * _interval_standard(z, lo, hi, alpha))
        return np.stack(rows)

    return loss


class RecalibratorSelection(NamedTuple):
    """Result of :func:`select_recalibrator`: the table of scores and the winner.

    Attributes
    ----------
    names : tuple of str
        The candidates, in the order given.
    mean, se : ndarray [C]
        Each candidate's cross-validated score (mean over folds of its held-out
        score, lower is better) and its standard error over folds.
    diff_none, diff_none_se : ndarray [C]
        Mean over folds of (candidate - ``"none"``) and its standard error (NaN when
        ``"none"`` is no candidate).
    fold_scores : ndarray [C, K]
        The held-out score of every candidate on every fold.
    folds : ndarray of int [N]
        The fold of every observation.
    winner : str
        The chosen candidate (``"none"``: keep the predictives).
    recalibrator : IsotonicLevelCalibrator, SigmaScalingCalibrator or None
        The winner refitted on all the data, or None when ``"none"`` wins.
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
    recalibrator: Any
    score: str
    rule: str

    def __repr__(self) -> str:
        return _sel.table_repr(
            "RecalibratorSelection", self.names, self.mean, self.se, self.diff_none,
            self.diff_none_se, self.winner, self.score,
        )


def select_recalibrator(
    y_true: Any,
    loc: Any,
    scale: Any,
    *,
    candidates: Any = DEFAULT,
    score: str = "crps",
    alpha: float = 0.1,
    folds: Any = 5,
    key: Any = None,
    weights: Any = None,
    rule: str = "paired",
) -> RecalibratorSelection:
    r"""Choose a recalibrator of Normal predictives, or none, by cross-validation.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observations of held-out (calibration) data.
    loc, scale : array_like, shape [N]
        The model's Normal predictive for each: mean and standard deviation (> 0).
    candidates : tuple of str, default ("none", "isotonic", "sigma")
        Names in :data:`RECALIBRATORS`: ``"none"`` (the predictives as they are),
        ``"isotonic"`` (:func:`fit_isotonic_recalibrator` on the PIT values) and
        ``"sigma"`` (:func:`fit_sigma_scaling`, Normal family).
    score : {"crps", "interval"}, default "crps"
        The proper score of the held-out recalibrated predictives (lower is better):
        the CRPS, or the interval score of the central ``1 - alpha`` interval.
    alpha : float in (0, 1), default 0.1
        With ``score="interval"``: the interval's miscoverage.
    folds : int or array_like of int, default 5
        The number ``K >= 2`` of random folds (drawn with ``key``), or your own fold
        id ``0 .. K-1`` for every observation.
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

    Returns
    -------
    RecalibratorSelection
        The table (means, standard errors, paired differences to ``"none"``, fold
        scores), the winner's name and the winner refitted on all the data.

    Notes
    -----
    As :func:`bayescal.classification.select_calibrator`: each fold is held out in
    turn, every candidate fitted on the other folds and scored on it; the fold
    scores are paired across candidates. The CRPS of a Normal predictive
    :math:`N(\mu, (s\sigma)^2)` (``"none"``: :math:`s = 1`; ``"sigma"``: the fitted
    factor) is the closed form of :func:`crps_normal`. The isotonic candidate's
    predictive has the CDF :math:`R(\Phi((y - \mu)/\sigma))` and the quantiles of
    :func:`recalibrated_quantiles`; its CRPS is the quantile-score integral
    :math:`2\int_0^1 \rho_\tau(y - q_\tau)\,d\tau` (Gneiting & Raftery 2007, eq.
    21), taken at the midpoints of :data:`GRID` = 1024 equal cells of levels (on a
    Normal predictive this is within ~2e-6 relative of the closed form, far below the
    differences that matter). The interval score uses the central interval of
    :func:`recalibrated_interval`. The fits are closed forms (an ECDF, a root mean
    square) and run in NumPy in float64 at any ``N``: nothing is compiled but the
    fold assignment's small program.

    References
    ----------
    Gneiting, T. and Raftery, A. E. (2007). Strictly proper scoring rules, prediction,
    and estimation. *JASA* 102, 359-378.
    Kuleshov, V., Fenner, N. and Ermon, S. (2018). Accurate uncertainties for deep
    learning using calibrated regression. *ICML*.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import select_recalibrator
    >>> rng = np.random.default_rng(0)
    >>> loc = rng.normal(size=500)
    >>> y = loc + 2.0 * rng.normal(size=500)  # the model says scale 1: overconfident
    >>> res = select_recalibrator(y, loc, np.ones(500), key=0)
    >>> res.winner, bool(1.8 < float(res.recalibrator.factor) < 2.2)  # the true 2
    ('sigma', True)
    """
    names = _check_candidates(candidates)
    _v.check_choice(score, "score", SCORES)
    _v.check_choice(rule, "rule", _sel.RULES)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1), e.g. 0.1; got {alpha!r}.")
    y, m, s = _host_inputs(y_true, loc, scale)
    n = y.shape[0]
    dtype = s.dtype
    w = _sel.host_weights(weights, n, dtype)
    fold = _fold_ids(folds, key, w)
    z = (y.astype(np.float64) - m.astype(np.float64)) / s.astype(np.float64)
    data = (z, s.astype(np.float64), dtype)
    train, test = _sel.fold_weights(fold, w.astype(np.float64), n, np.float64)
    scores, builds = _sel.host_scores(
        data, train, test, names, RECALIBRATORS, _host_loss(score, float(alpha))
    )
    fold_scores = scores.astype(dtype)
    table = _sel.summarise(fold_scores, names, rule)
    return RecalibratorSelection(
        names, table.mean, table.se, table.diff, table.diff_se, fold_scores, fold,
        names[table.winner], builds[table.winner](), score, rule,
    )


def _check_candidates(candidates: Any) -> tuple[str, ...]:
    if isinstance(candidates, str) or not isinstance(candidates, tuple | list):
        raise TypeError(
            "candidates must be a tuple of names, e.g. ('none', 'sigma'); got "
            f"{candidates!r}."
        )
    names = tuple(candidates)
    known = ", ".join(repr(c) for c in RECALIBRATORS)
    for name in names:
        if not isinstance(name, str) or name not in RECALIBRATORS:
            raise ValueError(f"candidates must be names among {known}; got {name!r}.")
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"candidates must be distinct names, at least one; got {names}.")
    return names


def _host_inputs(y_true: Any, loc: Any, scale: Any) -> tuple[np.ndarray, ...]:
    """The three arrays on the host in one float dtype, checked."""
    out = []
    for value, name in ((y_true, "y_true"), (loc, "loc"), (scale, "scale")):
        _v.reject_masked(value, name)
        if isinstance(value, jax.core.Tracer):
            raise TypeError(
                f"select_recalibrator runs on the host: {name} must be concrete (not "
                "traced by jit/vmap); call it outside jax.jit."
            )
        a = np.asarray(value)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric; got dtype {a.dtype}.")
        out.append(a)
    if any(a.ndim != 1 for a in out) or len({a.shape for a in out}) != 1:
        raise ValueError(
            "y_true, loc and scale must be 1-D of one length; got shapes "
            f"{[a.shape for a in out]}."
        )
    dtype = np.result_type(*[a.dtype if a.dtype.kind == "f" else np.float32 for a in out])
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        dtype = np.dtype(np.float32)
    y, m, s = (a.astype(dtype) for a in out)
    for a, name in ((y, "y_true"), (m, "loc"), (s, "scale")):
        if not np.all(np.isfinite(a)):  # the counts of NaN and inf
            raise ValueError(_v.failure_message("finite", name, a))
    tiny = np.finfo(dtype).tiny
    if np.any(s < tiny):  # a subnormal scale is flushed to 0 on the device (as crps_normal)
        raise ValueError(
            f"scale must be strictly positive, at least the smallest normal {dtype.name} "
            f"({float(tiny):.6g}); got {int(np.sum(s < tiny))} values below it (min "
            f"{float(s.min())!r}). A predictive scale must be > 0: pass standard "
            "deviations, not log-scales or variances of 0."
        )
    return y, m, s


def _fold_ids(folds: Any, key: Any, w: np.ndarray) -> np.ndarray:
    n = w.shape[0]
    num = _sel.fold_count(folds, key)
    if num is not None:
        if int(np.sum(w > 0)) < 2 * num:
            raise ValueError(
                f"folds={num} needs at least {2 * num} observations of positive weight "
                f"(two per fold); got {int(np.sum(w > 0))}. Lower folds or add data."
            )
        # one class: every observation shuffled and dealt round-robin
        return stratified_folds(np.zeros(n, np.int64), num, check_key(_v._seed_key(key)))
    if isinstance(folds, bool) or np.ndim(folds) == 0:
        raise TypeError(f"folds must be an int >= 2 or fold ids; got {folds!r}.")
    fold = np.asarray(folds)
    if fold.shape != (n,) or not np.issubdtype(fold.dtype, np.integer):
        raise ValueError(
            f"folds must be integer fold ids, one per observation (shape ({n},)); got "
            f"dtype {fold.dtype} and shape {fold.shape}."
        )
    present = np.unique(fold)
    num = int(fold.max()) + 1
    if fold.min() < 0 or num < 2 or present.size != num:
        raise ValueError(
            f"folds must use every id 0 .. K-1 with K >= 2; got ids {present.tolist()}."
        )
    for k in range(num):
        if np.sum(w[fold != k] > 0) < 2 or not np.any(w[fold == k] > 0):
            raise ValueError(
                f"fold {k}: every fold needs an observation of positive weight and its "
                "training part (the other folds) at least two."
            )
    return fold.astype(np.int64)
