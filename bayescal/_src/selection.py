"""Choosing a calibrator by cross-validation: the core shared by both branches.

A branch names its candidates in a registry (``name -> Candidate``) and a
per-observation loss; :func:`cross_validated_scores` fits every candidate on the
training part of every fold and scores it on the held-out part in ONE compiled
program: folds are weight masks (0 outside the part) over the whole, bucket-padded
data, so every fit has the same static shapes and the folds run in one ``vmap`` per
candidate. One more row of the ``vmap`` fits each candidate on all the data (the
refit of the winner costs no other program). :func:`summarise` turns the fold scores
into the table (means, standard errors, paired differences to ``"none"``) and picks
the winner. Candidates with a NumPy version of their fits (``Candidate.host``) skip
that program for inputs of up to :data:`HOST_MAX_SIZE` observations
(:func:`host_scores`): the same weight rows, fitted on the host, compile nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton, xla_options
from bayescal._src import validation as _v
from bayescal._src.families import _host_t_quantile

__all__ = [
    "Candidate",
    "HOST_MAX_SIZE",
    "RULES",
    "cross_validated_scores",
    "host_scores",
    "host_weights",
    "on_host",
    "paired_interval",
    "summarise",
    "table_repr",
]

#: How the winner is chosen from the table.
RULES = ("paired", "min", "one_se")


class Candidate(NamedTuple):
    """A calibrator that :func:`select_calibrator` can try.

    ``fit(*data, weights)`` returns a fitted calibrator (a pytree; None for "no
    recalibration"; ``fit`` itself None for a candidate fitted on the host only); it must trace under ``jit`` and ``vmap`` with ``weights`` of 0
    for the rows it must ignore (held-out rows and the bucket's padding).
    ``trim(calibrator, n)`` (optional) cuts a calibrator fitted on the padded data
    back to what the public ``fit_*`` returns for ``n`` observations (e.g. the
    isotonic knots, one per observation). ``host(data, w_rows)`` (optional) does the
    same fits in NumPy on the unpadded host data, one per row of ``w_rows [R, n]``,
    and returns ``(out, build)``: ``out`` what the branch's host loss scores (e.g. the
    calibrated probabilities ``[R, n]``), ``build(r)`` the calibrator of row ``r`` as
    the public ``fit_*`` returns it. Concrete inputs of up to :data:`HOST_MAX_SIZE`
    observations take this path: no program is compiled for them.
    """

    fit: Callable[..., Any]
    trim: Callable[[Any, int], Any] | None = None
    host: Callable[..., Any] | None = None


#: Up to this many observations the candidates with a ``host`` fit run in NumPy: the
#: folds' fits then cost no compilation (the compiled kernel took ~2.5 s to compile
#: for the five binary candidates at N = 1e4, the NumPy fits ~30 ms to run). At
#: N = 131,072 a first call took 0.7-0.8 s in NumPy against 3.0 s compiled (warm:
#: 0.7 against 0.4 s); at 5e5 and 1e6 the two were within the noise of a busy 2-core
#: machine (5-11 s each), so beyond this size the compiled program runs (on
#: accelerators, not measured, it should run faster still).
HOST_MAX_SIZE = 1 << 17
def on_host(n: int) -> bool:
    """Whether ``n`` observations are fitted in NumPy (:func:`host_scores`)."""
    return n <= HOST_MAX_SIZE


def _options(size: int) -> dict[str, Any]:
    # the largest argument holds K + 1 rows of weights: quick compiles up to the
    # quick size per row (the fits' Newton loops compile ~3x faster unoptimised)
    return xla_options.compiler_options(size, 16 * xla_options.QUICK_COMPILE_MAX_SIZE)


@functools.partial(
    newton.fast_jit, static_argnames=("names", "registry", "loss"), compiler_options=_options
)
def _kernel(data, w_train, w_test, *, names, registry, loss):
    """``([C, K + 1] held-out scores, calibrators)``: row ``K`` is the fit on all the data."""
    table = registry()
    scores, fitted = [], []
    for name in names:
        fit = table[name].fit

        def one(wt, fit=fit):
            cal = fit(*data, wt)
            return cal, loss(cal, data)

        cal, per_obs = jax.vmap(one)(w_train)  # [K + 1, size]
        total = jnp.sum(jnp.where(w_test > 0, w_test * per_obs, 0), axis=1)
        scores.append(total / jnp.sum(w_test, axis=1))
        fitted.append(jax.tree_util.tree_map(lambda a: a[-1], cal))  # on all the data
    return jnp.stack(scores), tuple(fitted)


def fold_weights(fold: np.ndarray, weights: np.ndarray, size: int, dtype: Any):
    """``(train, test)`` weights ``[K + 1, size]`` (host): fold ``k``'s training and
    held-out parts, then all the data; 0 in the padding beyond ``len(fold)``."""
    n = fold.shape[0]
    num = int(fold.max()) + 1
    ids = np.full(size, -1, np.int64)
    ids[:n] = fold
    w = np.zeros(size, dtype)
    w[:n] = weights
    held = ids[None, :] == np.arange(num)[:, None]  # [K, size]
    real = (ids >= 0)[None, :]
    train = np.concatenate([(real & ~held) * w, w[None, :]]).astype(dtype)
    test = np.concatenate([held * w, w[None, :]]).astype(dtype)
    return train, test


def cross_validated_scores(
    data: tuple, train: np.ndarray, test: np.ndarray, names: tuple[str, ...],
    registry: Callable[[], dict[str, Candidate]], loss: Callable[..., Any],
) -> tuple[np.ndarray, tuple]:
    """Fold scores ``[C, K]`` and the calibrators fitted on all the data (one per
    candidate, still padded), from one compiled program."""
    scores, fitted = _kernel(
        data, jax.device_put(train), jax.device_put(test), names=names, registry=registry,
        loss=loss,
    )
    return np.asarray(scores)[:, :-1], fitted


def held_out_means(per_obs: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Weighted held-out means ``[R]`` of per-observation losses ``[R or 1, n]`` (host);
    rows outside the part (weight 0) count nowhere, even where their loss is inf."""
    total = np.sum(np.where(test > 0, test * per_obs, 0), axis=1)
    return total / np.sum(test, axis=1)


def host_scores(
    data: tuple, train: np.ndarray, test: np.ndarray, names: tuple[str, ...],
    registry: dict[str, Candidate], loss: Callable[[Any, tuple], np.ndarray],
) -> tuple[np.ndarray, list]:
    """Fold scores ``[C, K]`` of candidates with a ``host`` fit, and for each a
    ``build()`` of its calibrator fitted on all the data; no compiled program.

    ``train``, ``test``: :func:`fold_weights` for ``size = n`` (no padding);
    ``loss(out, data)``: per-observation losses ``[R or 1, n]`` of a host fit's output.
    """
    scores, builds = [], []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for name in names:
            out, build = registry[name].host(data, train)
            scores.append(held_out_means(loss(out, data), test)[:-1])
            builds.append(functools.partial(build, train.shape[0] - 1))
    return np.stack(scores), builds


def host_weights(weights: Any, n: int, dtype: Any) -> np.ndarray:
    """Observation weights on the host in ``dtype`` (ones by default), checked."""
    if weights is None:
        return np.ones(n, dtype)
    _v.reject_masked(weights, "weights")
    w = np.asarray(weights)
    if w.dtype.kind not in "biuf" or w.shape != (n,):
        raise ValueError(
            f"weights must be numeric, one per observation (shape ({n},)); got dtype "
            f"{w.dtype} and shape {w.shape}."
        )
    with np.errstate(over="ignore"):  # first: a float64 weight beyond float32's range
        w = w.astype(dtype)  # becomes inf, rejected below (as the other functions do)
    # the other functions' messages: the counts of NaN, inf and negative weights
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(_v.failure_message("nonnegative", "weights", w, what="weights"))
    if not np.any(w > 0):
        raise ValueError(_v.failure_message("any_positive", "weights", w, what="weight"))
    return w


class Table(NamedTuple):
    mean: np.ndarray
    se: np.ndarray
    diff: np.ndarray
    diff_se: np.ndarray
    winner: int


def _mean_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = x.shape[-1]
    with np.errstate(invalid="ignore"):
        return x.mean(axis=-1), x.std(axis=-1, ddof=1) / np.sqrt(k)


def summarise(fold_scores: np.ndarray, names: tuple[str, ...], rule: str) -> Table:
    """Means and standard errors over folds, paired differences to ``"none"``, winner.

    ``rule="min"``: the lowest mean score. ``"one_se"``: the first candidate (in the
    order given) whose mean is within one standard error of the lowest mean (the SE
    of the best candidate; Hastie, Tibshirani & Friedman 2009, sec. 7.10).
    ``"paired"``: the lowest mean, unless ``"none"`` is a candidate and the 95%
    interval of the best one's paired difference to it (``diff +- t * diff_se``, with
    Student's ``t`` quantile of ``K - 1`` degrees of freedom for ``K`` folds) reaches
    0: then ``"none"`` (no recalibration without evidence that it helps). NaN means
    (a fit that failed) never win.
    """
    mean, se = _mean_se(fold_scores)
    if "none" in names:
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, as the table says
            paired = fold_scores - fold_scores[names.index("none")]
            diff, diff_se = _mean_se(paired)
    else:
        diff = diff_se = np.full(len(names), np.nan)
    ok = ~np.isnan(mean)
    if not ok.any():
        raise ValueError(
            "every candidate's cross-validated score is NaN (every fit failed); check "
            "the inputs or choose other candidates."
        )
    ranked = np.where(ok, mean, np.inf)
    best = int(np.argmin(ranked))
    if rule == "one_se" and np.isfinite(mean[best]):
        bound = mean[best] + (se[best] if np.isfinite(se[best]) else 0.0)
        best = int(np.flatnonzero(ok & (mean <= bound))[0])
    if rule == "paired" and "none" in names and names[best] != "none":
        upper = sum(paired_interval(paired[best]))
        if np.isfinite(upper) and upper >= 0:  # NaN or -inf (none scored inf): keep
            best = names.index("none")
    return Table(mean, se, diff, diff_se, best)


def _t_quantile(dof: int) -> float:
    """Student's t 0.975 quantile (two-sided 95%): SciPy's ``stdtrit``, the t quantile
    of the distributional families, not ``scipy.stats`` (~1.5 s to import, 0.3 s)."""
    return float(_host_t_quantile(np.float64(0.975), np.float64(dof)))


def paired_interval(differences: Any) -> tuple[float, float]:
    """Mean of paired differences and the half-width of its Student's t 95% interval.

    The interval of the default ``"paired"`` rule of
    :func:`bayescal.classification.select_calibrator` and
    :func:`bayescal.regression.select_recalibrator` (and of ``bayescal evaluate
    --recalibrate``'s verdict): a candidate is chosen over no recalibration only when
    the interval of its paired score difference to it, over the folds, lies below 0.

    Parameters
    ----------
    differences : array_like
        Paired differences, e.g. a candidate's score minus "none"'s in each fold.

    Returns
    -------
    tuple of float
        ``(mean, half)``: the interval is ``mean +- half``; ``half`` is nan for one
        difference, and both are non-finite where a difference is.

    Examples
    --------
    >>> from bayescal.core import paired_interval
    >>> [round(v, 4) for v in paired_interval([1.0, 2.0, 3.0])]
    [2.0, 2.4841]
    """
    d = np.asarray(differences, np.float64).reshape(-1)
    mean, se = _mean_se(d)
    half = _t_quantile(d.size - 1) * se if d.size > 1 else np.nan
    return float(mean), float(half)


def table_repr(title: str, names, mean, se, diff, diff_se, winner: str, score: str) -> str:
    """The table as text: one row per candidate, the winner marked."""
    width = max(len(n) for n in names)
    lines = [
        f"{title}(score={score!r}, winner={winner!r})",
        f"  {'candidate'.ljust(width)}  {'mean':>10}  {'se':>9}  {'- none':>10}  {'se':>9}",
    ]
    for i, name in enumerate(names):
        mark = " *" if name == winner else ""
        lines.append(
            f"  {name.ljust(width)}  {mean[i]:10.5g}  {se[i]:9.3g}  {diff[i]:10.3g}  "
            f"{diff_se[i]:9.3g}{mark}"
        )
    if not np.all(np.isfinite(mean)):
        lines.append(
            "  inf: in some fold a predicted probability of exactly 0 (or 1) met an event "
            "(a non-event), whose log loss is infinite (pass eps= to clip the scored "
            "probabilities); nan: a fit that failed, or a difference of infinite scores"
        )
    return "\n".join(lines)


def fold_count(folds: Any, key: Any) -> int | None:
    """The number of folds when ``folds`` is a count (then ``key`` draws them), or None
    for the user's own fold ids."""
    if isinstance(folds, int | np.integer) and not isinstance(folds, bool):
        num = _v.check_positive_int(folds, "folds", minimum=2)
        if key is None:
            raise TypeError(
                "key is needed to draw the folds: pass key= (a PRNG key or an int "
                "seed), or folds= your own fold ids."
            )
        return num
    return None


def concrete_inputs(y_true: Any, y_prob: Any) -> tuple[np.ndarray, np.ndarray]:
    """``y_true`` and ``y_prob`` as NumPy arrays of numbers: refused when masked or
    traced (the selection runs on the host and compiles its own programs)."""
    for value, name in ((y_true, "y_true"), (y_prob, "y_prob")):
        _v.reject_masked(value, name)
        if isinstance(value, jax.core.Tracer):
            raise TypeError(
                f"select_calibrator runs its own programs: {name} must be concrete (not "
                "traced by jit/vmap); call it outside jax.jit."
            )
    y, p = np.asarray(y_true), np.asarray(y_prob)
    if p.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
        raise TypeError(
            f"y_true and y_prob must be numeric; got dtypes {y.dtype} and {p.dtype}."
        )
    return y, p
