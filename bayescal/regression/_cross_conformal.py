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

Coverage ``>= 1 - 2 alpha`` for ``"plus"`` and ``>= 1 - alpha`` for ``"minmax"`` on
exchangeable data, whatever the model (Barber et al. 2021, Theorems 1, 2 and 4; CV+
loses at most a further ``sqrt(2 / n)``-order term with ``K`` folds, Theorem 4); in
practice ``"plus"`` covers close to ``1 - alpha`` and is narrower.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.host import _device
from bayescal._src.host import first as host_first
from bayescal._src.options import coverage_and_alpha
from bayescal._src.validation import host_resident

__all__ = ["CrossConformalRegressor", "fit_cross_conformal"]

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
    ids = np.asarray(folds)
    if ids.shape != (n,) or ids.dtype.kind not in "iu":
        raise ValueError(
            f"folds must be an int >= 2, 'loo' or one integer fold id per observation "
            f"(shape ({n},)); got {ids.dtype} of shape {ids.shape}."
        )
    present = np.unique(ids)
    if present.size < 2 or present[0] != 0 or present[-1] != present.size - 1:
        raise ValueError(
            "folds must number the folds 0..K-1 with every fold used and K >= 2; got "
            f"the ids {present[:10].tolist()}."
        )
    return ids.astype(np.int64)


@dataclasses.dataclass(frozen=True, repr=False)
class CrossConformalRegressor:
    r"""Fold models and their out-of-fold residuals (:func:`fit_cross_conformal`).

    Attributes
    ----------
    residuals : Array, shape [N]
        The out-of-fold absolute residuals :math:`R_i`.
    folds : Array of int32, shape [N]
        The fold of each observation (its residual's model is the one trained
        without that fold).
    models : tuple
        The ``K`` fitted models (whatever ``fit`` returned), fold 0 first.
    predict : callable
        ``predict(model, X) -> [M]`` predictions.
    alpha : float
        The miscoverage the intervals are made for.
    method : {"plus", "minmax"}

    Not a pytree and not saved by :func:`bayescal.core.save_calibrator`: it holds your
    models, which only your code knows how to store.
    """

    residuals: jax.Array
    folds: jax.Array
    models: tuple = ()
    predict: Callable[[Any, Any], Any] | None = None
    alpha: float = 0.1
    method: str = "plus"

    def __repr__(self) -> str:
        return (
            f"CrossConformalRegressor(folds={len(self.models)}, n={self.residuals.shape[-1]}, "
            f"alpha={self.alpha}, method={self.method!r})"
        )

    def interval(self, X_new: Any) -> tuple[jax.Array, jax.Array]:
        """The intervals ``(lower, upper)`` at new inputs (one ``predict`` per model)."""
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
        k = pad_axis(np.asarray(self.folds), size, fill=0)
        return _intervals(r, k, preds.astype(r.dtype), ranks, method=self.method)


def _kth(values: Any, k: Any, xp: Any) -> Any:
    """The ``k``-th smallest (1-based) along the last axis; ``k`` within ``[1, size]``."""
    if xp is np:
        return np.take(np.partition(values, k - 1, axis=-1), k - 1, axis=-1)
    return jnp.take(jnp.sort(values, axis=-1), k - 1, axis=-1)


def _bounds(residuals, folds, preds, ranks, method, xp):
    """CV+ or minmax bounds from ``preds [K, M]``; ``ranks``: the number of residuals
    ``n`` (the rest is padding), ``floor(alpha (n + 1))`` and ``ceil((1 - alpha)(n + 1))``."""
    n, low, high = ranks[0], ranks[1], ranks[2]
    size = residuals.shape[-1]
    inf = xp.asarray(np.inf, preds.dtype)
    real = xp.arange(size) < n
    lo_k, hi_k = xp.clip(low, 1, size), xp.clip(high, 1, size)
    if method == "plus":
        mu = xp.take(preds, folds, axis=0).T  # [M, n]: the model without i's fold, at x
        lo = _kth(xp.where(real, mu - residuals, inf), lo_k, xp)  # the padding last
        hi = _kth(xp.where(real, mu + residuals, inf), hi_k, xp)
        return xp.where(low >= 1, lo, -inf), xp.where(high <= n, hi, inf)
    q = xp.where(high <= n, _kth(residuals, hi_k, xp), inf)
    return xp.min(preds, axis=0) - q, xp.max(preds, axis=0) + q


def _twin_intervals(residuals, folds, preds, ranks, *, method):
    """``_intervals`` on the host: ``np.partition`` instead of sorting every row."""
    if not (host_resident(residuals) and host_resident(folds)) or type(preds) is not np.ndarray:
        return None
    if not np.isfinite(preds).all():
        return None  # the kernel path names the predictions
    lo, hi = _bounds(np.asarray(residuals), np.asarray(folds), preds, ranks, method, np)
    return _device(np.asarray(lo, preds.dtype)), _device(np.asarray(hi, preds.dtype))


@host_first(_twin_intervals)
@_v.validated(fuse=True, bucket={"preds": -1}, per_observation=-1)
def _intervals(residuals, folds, preds, ranks, *, method):
    p = _v.as_float_array(preds, "predictions")
    _v.check_finite(p, "predictions")
    return _bounds(residuals.astype(p.dtype), folds, p, ranks, method, jnp)


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
    if not callable(fit) or not callable(predict):
        raise TypeError("fit and predict must be callables: fit(X, y) -> model, predict(model, X).")
    y_arr = np.asarray(y, np.float64)
    if y_arr.ndim != 1 or y_arr.size < 2 or not np.isfinite(y_arr).all():
        raise ValueError(
            f"y must be a 1-D array of at least 2 finite targets; got shape {y_arr.shape}"
            f"{'' if np.isfinite(y_arr).all() else ' with NaN or infinite values'}."
        )
    n = y_arr.size
    if len(X) != n:
        raise ValueError(f"X has {len(X)} rows but y has {n} targets; pass one row per target.")
    ids = _fold_ids(folds, n)
    k = int(ids.max()) + 1
    if math.ceil((1 - Fraction(repr(a))) * (n + 1)) > n:
        raise ValueError(
            f"N={n} observations are too few for alpha={a}: the upper rank "
            f"ceil((1 - alpha)(N + 1)) exceeds N (infinite intervals). Use more data or "
            "a larger alpha."
        )
    models, residuals = [], np.empty(n)
    X_arr = X if hasattr(X, "__getitem__") and hasattr(X, "shape") else np.asarray(X)
    for fold in range(k):
        held = np.flatnonzero(ids == fold)
        train = np.flatnonzero(ids != fold)
        model = fit(X_arr[train], y_arr[train])
        pred = np.asarray(predict(model, X_arr[held]), np.float64).reshape(-1)
        if pred.shape != (held.size,) or not np.isfinite(pred).all():
            raise ValueError(
                f"predict returned {pred.shape} values (or non-finite ones) for the "
                f"{held.size} rows of fold {fold}; it must give one finite prediction per row."
            )
        residuals[held] = np.abs(y_arr[held] - pred)
        models.append(model)
    # device_put, not jnp.asarray: that compiles a conversion per shape
    dtype = np.dtype(_v.default_float())
    return CrossConformalRegressor(
        jax.device_put(residuals.astype(dtype)),
        jax.device_put(ids.astype(np.int32)),
        tuple(models),
        predict,
        float(a),
        method,
    )
