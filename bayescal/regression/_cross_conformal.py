"""Jackknife+, CV+ and jackknife-minmax intervals (Barber, Candes, Ramdas & Tibshirani 2021).

The user's model is trained once per fold (``fit``/``predict`` callables, as
:func:`bayescal.classification.cross_calibrate` takes them) and kept; each
observation's out-of-fold residual ``R_i = |y_i - mu_{-k(i)}(x_i)|`` then calibrates
intervals built from every fold model's prediction at the new point:

* ``"plus"`` (CV+; jackknife+ with one fold per observation): from the
  ``floor(alpha (n + 1))``-th smallest of ``mu_{-k(i)}(x) - R_i`` to the
  ``ceil((1 - alpha)(n + 1))``-th smallest of ``mu_{-k(i)}(x) + R_i``;
* ``"minmax"``: from ``min_k mu_{-k}(x)`` minus to ``max_k mu_{-k}(x)`` plus the
  ``ceil((1 - alpha)(n + 1))``-th smallest ``R_i``.

The jackknife+-after-bootstrap (J+aB, Kim, Xu & Barber 2020) trains ``B`` models on
bootstrap resamples instead of folds: ``mu_{-i}`` is the mean of the models whose
resample left ``i`` out.

Coverage ``>= 1 - 2 alpha`` for ``"plus"`` and ``>= 1 - alpha`` for ``"minmax"`` on
exchangeable data, whatever the model (Barber et al. 2021, Theorems 1, 2 and 4; CV+
loses at most a further ``sqrt(2 / n)``-order term with ``K`` folds, Theorem 4); in
practice ``"plus"`` covers close to ``1 - alpha`` and is narrower.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.folds import check_fold_ids
from bayescal._src.host import _device
from bayescal._src.host import first as host_first
from bayescal._src.options import coverage_and_alpha
from bayescal._src.resampling import check_key

__all__ = ["CrossConformalRegressor", "fit_cross_conformal", "fit_jackknife_after_bootstrap"]

_METHODS = ("plus", "minmax")


def _kfold(n: int, k: int) -> np.ndarray:
    """scikit-learn's ``KFold(k)`` without shuffling: contiguous blocks, the first
    ``n % k`` of them one longer."""
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    return np.repeat(np.arange(k), sizes)


def _fold_ids(folds: Any, n: int) -> np.ndarray:
    if isinstance(folds, str):
        if folds != "loo":
            raise ValueError(f"folds must be an int >= 2, 'loo' or an array of fold ids; got {folds!r}.")
        return np.arange(n)
    if isinstance(folds, int | np.integer) and not isinstance(folds, bool):
        k = _v.check_positive_int(folds, "folds", minimum=2, maximum=n)
        return _kfold(n, k)
    return check_fold_ids(folds, n)


@dataclasses.dataclass(frozen=True, repr=False)
class CrossConformalRegressor:
    r"""Fold models and their out-of-fold residuals (:func:`fit_cross_conformal`).

    Attributes
    ----------
    residuals : Array, shape [N]
        The out-of-fold absolute residuals :math:`R_i`.
    folds : Array of int32, shape [N], or None
        The fold of each observation (its residual's model is the one trained
        without that fold); None after bootstrap (:func:`fit_jackknife_after_bootstrap`).
    models : tuple
        The ``K`` fitted models (whatever ``fit`` returned), fold 0 first.
    predict : callable
        ``predict(model, X) -> [M]`` predictions.
    alpha : float
        The miscoverage the intervals are made for.
    method : {"plus", "minmax"}
    out_of_bag : numpy array of bool, shape [N, K]
        Whether model ``k`` was trained without observation ``i``: its fold's model
        only (CV+), or the bootstrap models whose resample left ``i`` out (their mean
        prediction is ``i``'s, J+aB).

    Not a pytree and not saved by :func:`bayescal.core.save_calibrator`: it holds your
    models, which only your code knows how to store.
    """

    residuals: jax.Array
    folds: jax.Array | None
    models: tuple = ()
    predict: Callable[[Any, Any], Any] | None = None
    alpha: float = 0.1
    method: str = "plus"
    out_of_bag: Any = None

    def __repr__(self) -> str:
        return (
            f"CrossConformalRegressor(models={len(self.models)}, n={self.residuals.shape[-1]}, "
            f"alpha={self.alpha}, method={self.method!r})"
        )

    def interval(self, X_new: Any) -> tuple[jax.Array, jax.Array]:
        """The intervals at new inputs (one ``predict`` call per model).

        Parameters
        ----------
        X_new : array_like, shape [M, ...]
            New inputs, as ``predict`` takes them.

        Returns
        -------
        (lower, upper) : Arrays, shape [M]
        """
        preds = np.stack([np.asarray(self.predict(m, X_new), np.float64).reshape(-1)
                          for m in self.models])  # [K, M]
        n = int(self.residuals.shape[-1])
        frac = Fraction(repr(self.alpha))
        ranks = np.asarray(
            [n, math.floor(frac * (n + 1)), math.ceil((1 - frac) * (n + 1))], np.int32
        )
        # the residuals padded to their bucket on the host (their count and ranks are
        # arguments): a new N in a used bucket compiles nothing
        size = bucket_size(n)
        r = pad_axis(np.asarray(self.residuals), size, fill=np.inf)
        w = self.out_of_bag / self.out_of_bag.sum(axis=1, keepdims=True)  # [n, K] means
        w = pad_axis(w.astype(r.dtype), size, axis=0, fill=0.0)
        return _intervals(r, w, preds.astype(r.dtype), ranks, method=self.method)


def _kth(values: Any, k: Any, xp: Any) -> Any:
    """The ``k``-th smallest (1-based) along the last axis; ``k`` within ``[1, size]``."""
    if xp is np:
        return np.take(np.partition(values, k - 1, axis=-1), k - 1, axis=-1)
    return jnp.take(jnp.sort(values, axis=-1), k - 1, axis=-1)


def _bounds(residuals, weights, preds, ranks, method, xp):
    """CV+ or minmax bounds from ``preds [K, M]``; ``ranks``: the number of residuals
    ``n`` (the rest is padding), ``floor(alpha (n + 1))`` and ``ceil((1 - alpha)(n + 1))``."""
    n, low, high = ranks[0], ranks[1], ranks[2]
    size = residuals.shape[-1]
    inf = xp.asarray(np.inf, preds.dtype)
    real = xp.arange(size) < n
    lo_k, hi_k = xp.clip(low, 1, size), xp.clip(high, 1, size)
    # [M, n]: at each new x, the mean prediction of the models trained without i
    mu = preds.T @ weights.T
    if method == "plus":
        lo = _kth(xp.where(real, mu - residuals, inf), lo_k, xp)  # the padding last
        hi = _kth(xp.where(real, mu + residuals, inf), hi_k, xp)
        return xp.where(low >= 1, lo, -inf), xp.where(high <= n, hi, inf)
    q = xp.where(high <= n, _kth(residuals, hi_k, xp), inf)
    return xp.min(xp.where(real, mu, inf), axis=-1) - q, xp.max(xp.where(real, mu, -inf), axis=-1) + q


#: Values of the ``[M, N]`` matrix of leave-out predictions held at once: the new
#: points are taken in blocks of ``_CELLS // N`` (memory ~64 MB in float32).
_CELLS = 1 << 24


def _block(size: int, m: int) -> int:
    return int(min(m, max(1, _CELLS // max(size, 1))))


def _twin_intervals(residuals, weights, preds, ranks, *, method):
    """``_intervals`` on the host: ``np.partition`` instead of sorting every row."""
    if not all(type(a) is np.ndarray for a in (residuals, weights, preds)):
        return None
    if not np.isfinite(preds).all():
        return None  # the kernel path names the predictions
    step = _block(residuals.shape[-1], preds.shape[1])
    parts = [
        _bounds(residuals, weights, preds[:, i : i + step], ranks, method, np)
        for i in range(0, preds.shape[1], step)
    ]
    lo, hi = (np.concatenate([p[j] for p in parts]) for j in (0, 1))
    return _device(np.asarray(lo, preds.dtype)), _device(np.asarray(hi, preds.dtype))


@host_first(_twin_intervals)
@_v.validated(fuse=True, bucket={"preds": -1}, per_observation=-1)
def _intervals(residuals, weights, preds, ranks, *, method):
    p = _v.as_float_array(preds, "predictions")
    _v.check_finite(p, "predictions")
    r, w = residuals.astype(p.dtype), weights.astype(p.dtype)
    m = p.shape[1]
    step = _block(r.shape[-1], m)
    if step >= m:
        return _bounds(r, w, p, ranks, method, jnp)
    pad = -m % step  # the new points in blocks, one at a time (bounded memory)
    blocks = jnp.pad(p, ((0, 0), (0, pad)), mode="edge").reshape(p.shape[0], -1, step)
    lo, hi = jax.lax.map(
        lambda b: _bounds(r, w, b, ranks, method, jnp), jnp.moveaxis(blocks, 1, 0)
    )
    return lo.reshape(-1)[:m], hi.reshape(-1)[:m]


def _check_fit_inputs(fit: Any, predict: Any, X: Any, y: Any) -> tuple[np.ndarray, int]:
    if not callable(fit) or not callable(predict):
        raise TypeError("fit and predict must be callables: fit(X, y) -> model, predict(model, X).")
    y_arr = np.asarray(y, np.float64)
    if y_arr.ndim != 1 or y_arr.size < 2 or not np.isfinite(y_arr).all():
        raise ValueError(
            f"y must be a 1-D array of at least 2 finite targets; got shape {y_arr.shape}"
            f"{'' if np.isfinite(y_arr).all() else ' with NaN or infinite values'}."
        )
    if len(X) != y_arr.size:
        raise ValueError(
            f"X has {len(X)} rows but y has {y_arr.size} targets; pass one row per target."
        )
    return y_arr, y_arr.size


def _check_rank(n: int, alpha: float) -> None:
    if math.ceil((1 - Fraction(repr(alpha))) * (n + 1)) > n:
        raise ValueError(
            f"N={n} observations are too few for alpha={alpha}: the upper rank "
            f"ceil((1 - alpha)(N + 1)) exceeds N (infinite intervals). Use more data or "
            "a larger alpha."
        )


def fit_cross_conformal(
    fit: Callable[[Any, Any], Any],
    predict: Callable[[Any, Any], Any],
    X: Any,
    y: Any,
    *,
    folds: int | str | Any = 5,
    method: str = "plus",
    coverage: float | None = None,
    alpha: float | None = None,
) -> CrossConformalRegressor:
    r"""CV+ and jackknife+ intervals for any regression model (Barber et al. 2021).

    Trains the model once per fold (``fit`` on the other folds), keeps the models, and
    records each observation's out-of-fold residual. No calibration split is held out:
    every observation calibrates, and every one trains all models but its own fold's.

    Parameters
    ----------
    fit : callable
        ``fit(X_train, y_train) -> model``: trains the user's model (plain Python /
        NumPy is fine; it runs here, once per fold).
    predict : callable
        ``predict(model, X) -> predictions`` (one per row of ``X``).
    X : array_like, shape [N, ...]
        Features, indexed along the first axis.
    y : array_like, shape [N]
        Targets.
    folds : int, "loo" or array_like of int, default 5
        ``K`` contiguous folds (scikit-learn's ``KFold(K)``, no shuffle: shuffle the
        rows first, or pass your own ids, for ordered data); ``"loo"``: one fold per
        observation, the jackknife+ (``N`` fits); or the fold id ``0..K-1`` of each row.
    method : {"plus", "minmax"}, default "plus"
        CV+ / jackknife+ (coverage ``>= 1 - 2 alpha``, in practice near ``1 - alpha``)
        or the jackknife-minmax (``>= 1 - alpha``, wider).
    coverage, alpha : float in (0, 1), optional
        The nominal coverage or miscoverage; neither means ``alpha=0.1``.

    Returns
    -------
    CrossConformalRegressor
        Its ``interval(X_new)`` gives ``(lower, upper)``.

    See Also
    --------
    fit_conformal : Split conformal (a held-out calibration split, one model).
    bayescal.classification.cross_calibrate : The same folds for classifiers.

    References
    ----------
    Barber, Candes, Ramdas & Tibshirani (2021), "Predictive inference with the
    jackknife+", Annals of Statistics 49(1). MAPIE's ``CrossConformalRegressor`` (the
    reference of the tests: equal intervals on the same folds).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import fit_cross_conformal
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 1)); y = 2 * X[:, 0] + rng.normal(size=60)
    >>> fit = lambda X, y: np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]
    >>> predict = lambda w, X: np.c_[X, np.ones(len(X))] @ w
    >>> cv = fit_cross_conformal(fit, predict, X, y, folds=5, alpha=0.2)
    >>> lo, hi = cv.interval(np.zeros((1, 1)))
    >>> bool(lo[0] < 0 < hi[0])
    True
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    method = _v.check_choice(method, "method", _METHODS)
    y_arr, n = _check_fit_inputs(fit, predict, X, y)
    ids = _fold_ids(folds, n)
    k = int(ids.max()) + 1
    _check_rank(n, a)
    out_of_bag = ids[:, None] == np.arange(k)[None, :]
    trains = [np.flatnonzero(ids != fold) for fold in range(k)]
    return _fitted(fit, predict, X, y_arr, trains, out_of_bag, a, method, ids)


def _fitted(fit, predict, X, y, trains, out_of_bag, alpha, method, ids=None):
    """Train one model per index set of ``trains``; each observation's residual is
    against the mean prediction of the models whose ``out_of_bag`` column holds it."""
    X_arr = X if hasattr(X, "__getitem__") and hasattr(X, "shape") else np.asarray(X)
    n = y.size
    models, oob_sum = [], np.zeros(n)
    for b, train in enumerate(trains):
        model = fit(X_arr[train], y[train])
        held = np.flatnonzero(out_of_bag[:, b])
        pred = np.asarray(predict(model, X_arr[held]), np.float64).reshape(-1)
        if pred.shape != (held.size,) or not np.isfinite(pred).all():
            raise ValueError(
                f"predict returned {pred.shape} values (or non-finite ones) for the "
                f"{held.size} rows left out of model {b}; it must give one finite "
                "prediction per row."
            )
        oob_sum[held] += pred
        models.append(model)
    counts = out_of_bag.sum(axis=1)
    used = counts > 0  # an observation in every resample has no out-of-bag prediction
    residuals = np.abs(y[used] - oob_sum[used] / counts[used])
    # device_put, not jnp.asarray: that compiles a conversion per shape
    dtype = np.dtype(_v.default_float())
    return CrossConformalRegressor(
        jax.device_put(residuals.astype(dtype)),
        None if ids is None else jax.device_put(ids.astype(np.int32)),
        tuple(models),
        predict,
        float(alpha),
        method,
        out_of_bag[used],
    )


@functools.partial(jax.jit, static_argnums=(2, 3))
def _draw(key: Any, n: jax.Array, b: int, size: int) -> jax.Array:
    """``b`` rows of ``size`` indices uniform in ``[0, n)`` (the first ``n`` of each row
    are a bootstrap resample): one program per bucket of ``n``, not per ``n``."""
    return jax.random.randint(key, (b, size), 0, n)


def fit_jackknife_after_bootstrap(
    fit: Callable[[Any, Any], Any],
    predict: Callable[[Any, Any], Any],
    X: Any,
    y: Any,
    *,
    key: Any = None,
    num_resamples: int = 30,
    resamples: Any = None,
    method: str = "plus",
    coverage: float | None = None,
    alpha: float | None = None,
) -> CrossConformalRegressor:
    r"""Jackknife+-after-bootstrap intervals (J+aB; Kim, Xu & Barber 2020).

    Trains the model on ``B`` bootstrap resamples; each observation's prediction is
    the mean of the models whose resample left it out, its residual is against that,
    and the intervals are the jackknife+ ones (``method="plus"``) or the minmax ones
    over those leave-out means. An observation in every resample (rare for ``B``
    above ~20) has no out-of-bag model and is left out of the calibration.

    Parameters
    ----------
    fit, predict : callable
        ``fit(X_train, y_train) -> model`` and ``predict(model, X) -> predictions``.
    X : array_like, shape [N, ...]
        Features, indexed along the first axis.
    y : array_like, shape [N]
        Targets.
    key : jax.random.PRNGKey or int, optional
        The resamples' randomness (``num_resamples`` of ``N`` indices drawn with
        replacement by ``jax.random.randint``). Needed unless ``resamples`` is given.
    num_resamples : int, default 30
        ``B``, the number of bootstrap models.
    resamples : array_like of int, shape [B, m], optional
        Your own training index sets (e.g. another library's), instead of drawing.
    method : {"plus", "minmax"}, default "plus"
    coverage, alpha : float in (0, 1), optional
        The nominal coverage or miscoverage; neither means ``alpha=0.1``.

    Returns
    -------
    CrossConformalRegressor
        Its ``interval(X_new)`` gives ``(lower, upper)``.

    References
    ----------
    Kim, Xu & Barber (2020), "Predictive inference is free with the
    jackknife+-after-bootstrap", NeurIPS 33. MAPIE's
    ``JackknifeAfterBootstrapRegressor`` (the reference of the tests, on the same
    resamples).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import fit_jackknife_after_bootstrap
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 1)); y = 2 * X[:, 0] + rng.normal(size=60)
    >>> fit = lambda X, y: np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]
    >>> predict = lambda w, X: np.c_[X, np.ones(len(X))] @ w
    >>> jab = fit_jackknife_after_bootstrap(fit, predict, X, y, key=0, alpha=0.2)
    >>> lo, hi = jab.interval(np.zeros((1, 1)))
    >>> bool(lo[0] < 0 < hi[0])
    True
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    method = _v.check_choice(method, "method", _METHODS)
    y_arr, n = _check_fit_inputs(fit, predict, X, y)
    if resamples is None:
        if key is None:
            raise ValueError("key is needed to draw the resamples (or pass resamples=...).")
        b = _v.check_positive_int(num_resamples, "num_resamples", minimum=2)
        # sliced in NumPy: a slice of the JAX array would compile a program per n
        idx = np.asarray(_draw(check_key(key), np.asarray(n, np.int32), b, bucket_size(n)))[:, :n]
    else:
        idx = np.asarray(resamples)
        if idx.ndim != 2 or idx.shape[0] < 2 or idx.dtype.kind not in "iu":
            raise ValueError(
                "resamples must be a [B, m] integer array of training indices, B >= 2; "
                f"got {idx.dtype} of shape {idx.shape}."
            )
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"resamples must hold indices in [0, {n - 1}].")
    out_of_bag = np.ones((n, idx.shape[0]), bool)
    for j, train in enumerate(idx):
        out_of_bag[train, j] = False
    used = int(out_of_bag.any(axis=1).sum())
    _check_rank(used, a)
    return _fitted(fit, predict, X, y_arr, list(idx), out_of_bag, a, method)
