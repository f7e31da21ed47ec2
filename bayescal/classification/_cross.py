"""Cross-validated calibration: per-fold and pooled out-of-fold strategies (eager)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import validation as _v
from bayescal._src.folds import check_fold_ids
from bayescal._src.folds import stratified_folds as _stratified_folds
from bayescal._src.options import KeyLike
from bayescal._src.resampling import check_key
from bayescal.classification._calibrators import _binary_fit

__all__ = ["CrossCalibratedClassifier", "cross_calibrate"]

ENSEMBLES = ("per_fold", "pooled")


def _take(x: Any, idx: np.ndarray) -> Any:
    if hasattr(x, "iloc"):  # pandas
        return x.iloc[idx]
    if isinstance(x, np.ndarray | jax.Array):
        return x[idx]
    return np.asarray(x)[idx]


def _concat(a: Any, b: Any) -> Any:
    if hasattr(a, "iloc"):
        import pandas as pd

        return pd.concat([a, b])
    if isinstance(a, jax.Array):
        return jnp.concatenate([a, jnp.asarray(b)])
    return np.concatenate([np.asarray(a), np.asarray(b)])


def _length(x: Any, name: str) -> int:
    try:
        return len(x)
    except TypeError as err:
        raise TypeError(
            f"{name} must be indexable by integer arrays along its first axis (a numpy "
            f"or JAX array or a pandas object); got {type(x).__name__}."
        ) from err


def _checked(scores: Any, x_eval: Any, what: str = "fit_predict") -> np.ndarray:
    scores = np.asarray(scores)
    n_eval = _length(x_eval, "X_eval")
    if scores.shape != (n_eval,):
        raise ValueError(
            f"{what} must return one score per row of X_eval, shape ({n_eval},); "
            f"got shape {scores.shape}. For predict_proba output pass column 1."
        )
    return scores


def _call(fit_predict: Callable, x_train: Any, y_train: Any, x_eval: Any) -> np.ndarray:
    return _checked(fit_predict(x_train, y_train, x_eval), x_eval)


def _model_functions(fit_predict: Any) -> tuple[Callable, Callable] | None:
    """``(fit, predict)`` for the pair form, None for a ``fit_predict`` callable."""
    if callable(fit_predict):
        return None
    if (
        isinstance(fit_predict, tuple | list)
        and len(fit_predict) == 2
        and all(callable(f) for f in fit_predict)
    ):
        return fit_predict[0], fit_predict[1]
    raise TypeError(
        "fit_predict must be a callable fit_predict(X_train, y_train, X_eval) -> scores, "
        "or a pair (fit, predict) of callables fit(X_train, y_train) -> model and "
        f"predict(model, X_eval) -> scores (trained once, reused); got "
        f"{type(fit_predict).__name__}."
    )


def _average(probs: list) -> jax.Array:
    """The mean of the folds' calibrated probabilities (on the host when they are
    there: no program per length)."""
    if all(_v.paddable(q) for q in probs):
        return jax.device_put(np.mean(np.stack([np.asarray(q) for q in probs]), axis=0))
    return jnp.mean(jnp.stack(probs), axis=0)


def _check_folds(folds: Any, labels: np.ndarray) -> np.ndarray:
    fold = check_fold_ids(folds, labels.shape[0])
    num = int(fold.max()) + 1
    for k in range(num):
        held_out = labels[fold == k]
        if held_out.min() == held_out.max():
            raise ValueError(
                f"fold {k} holds only class {held_out[0]}; every held-out fold needs "
                "both classes to fit its calibrator. Stratify the folds."
            )
    return fold


@dataclasses.dataclass(frozen=True, eq=False)
class CrossCalibratedClassifier:
    """Result of :func:`cross_calibrate`: calibrators plus what is needed to predict.

    Not a pytree (it holds the user's functions, models and training data); its
    ``calibrators`` are, and can be saved with :func:`save_calibrator`.

    Attributes
    ----------
    fit_predict : callable or (callable, callable)
        The user's ``fit_predict(X_train, y_train, X_eval) -> scores``, or the
        ``(fit, predict)`` pair.
    X, y
        The training data.
    ensemble : {"per_fold", "pooled"}
    fold : ndarray of int, shape [N]
        Fold of every training observation.
    calibrators : tuple
        One calibrator per fold (``"per_fold"``) or a single one (``"pooled"``).
    oof_scores : ndarray, shape [N]
        Out-of-fold (uncalibrated) scores of the training data.
    new_proba : Array or None
        Calibrated probabilities for ``X_new`` when it was passed to
        :func:`cross_calibrate`.
    models : tuple
        With the ``(fit, predict)`` form: the models ``fit`` returned, trained once by
        :func:`cross_calibrate` (one per fold for ``"per_fold"``; the one trained on
        all the data for ``"pooled"``) and reused by every :meth:`predict_proba`.
        Empty with a ``fit_predict`` callable.
    """

    fit_predict: Any
    X: Any
    y: np.ndarray
    ensemble: str
    fold: np.ndarray
    calibrators: tuple
    oof_scores: np.ndarray
    new_proba: jax.Array | None = None
    models: tuple = ()

    def predict_proba(self, X_new: Any) -> jax.Array:
        """Calibrated probabilities of class 1 for ``X_new``, shape ``[M]``.

        With the ``(fit, predict)`` form, calls ``predict`` on the stored
        :attr:`models`: nothing is trained again. With a ``fit_predict`` callable
        there is no model to keep, so it calls ``fit_predict`` again: once per fold
        on that fold's training part (``"per_fold"``) or once on all the data
        (``"pooled"``); pass ``X_new`` to :func:`cross_calibrate` (and read
        ``new_proba``), or use the ``(fit, predict)`` form, to avoid the refits.

        Parameters
        ----------
        X_new : array_like
            New inputs, in whatever form ``fit_predict`` accepts.

        Returns
        -------
        Array, shape [M]
            Calibrated probabilities of class 1.
        """
        if self.models:
            predict = self.fit_predict[1]
            probs = [
                cal(_checked(predict(model, X_new), X_new, "predict"))
                for model, cal in zip(self.models, self.calibrators, strict=True)
            ]
            return probs[0] if self.ensemble == "pooled" else _average(probs)
        if self.ensemble == "pooled":
            scores = _call(self.fit_predict, self.X, self.y, X_new)
            return self.calibrators[0](scores)
        probs = []
        for k, cal in enumerate(self.calibrators):
            train = np.flatnonzero(self.fold != k)
            scores = _call(self.fit_predict, _take(self.X, train), self.y[train], X_new)
            probs.append(cal(scores))
        return _average(probs)


def cross_calibrate(
    key: KeyLike | None,
    fit_predict: Callable[[Any, Any, Any], Any],
    X: Any,
    y: Any,
    *,
    method: str | Callable[[Any, Any], Any] = "isotonic",
    ensemble: Literal["per_fold", "pooled"] = "per_fold",
    num_folds: int = 5,
    folds: Any = None,
    X_new: Any = None,
    **options: Any,
) -> CrossCalibratedClassifier:
    r"""Fit a classifier and its calibrator on the same data by cross-validation.

    Parameters
    ----------
    key : PRNG key, int seed or None
        Randomness of the stratified fold assignment (the first argument, as in
        ``jax.random``). May be None only when ``folds`` is given.
    fit_predict : callable or (callable, callable)
        ``fit_predict(X_train, y_train, X_eval) -> scores``: trains the user's model
        on ``(X_train, y_train)`` and returns one score (a probability of class 1, or
        a raw score for ``method="platt", input="score"``) per row of ``X_eval``.
        Plain Python / numpy is fine. Or a pair ``(fit, predict)``:
        ``fit(X_train, y_train) -> model`` and ``predict(model, X_eval) -> scores``;
        the models are then trained here, once, and kept, so that
        :meth:`CrossCalibratedClassifier.predict_proba` trains nothing (``"pooled"``
        also trains its final model on all the data here).
    X : array_like, shape [N, ...]
        Features; indexed with integer arrays along the first axis.
    y : array_like, shape [N]
        Binary labels, 0 or 1; each class needs at least ``num_folds`` members.
    method : {"isotonic", "platt", "beta", "histogram"} or callable, default "isotonic"
        Calibrator: one of the binary ``fit_*`` functions, or any
        ``fit(y_true, scores) -> calibrator``.
    ensemble : {"per_fold", "pooled"}, default "per_fold"
        One calibrator per fold, averaged at prediction time, or one calibrator fitted
        on the pooled out-of-fold scores. See Notes.
    num_folds : int, default 5
        Number of stratified folds (>= 2).
    folds : array_like of int, shape [N], optional
        Your own fold id (``0 .. K-1``) for every observation, instead of the
        stratified random assignment (``num_folds`` and ``key`` are then ignored).
    X_new : array_like, optional
        Data to predict right away, from the same ``fit_predict`` calls (no refits):
        the result's ``new_proba``.
    **options
        Passed to the calibrator fit (e.g. ``input="score"`` for Platt).

    Returns
    -------
    CrossCalibratedClassifier
        With ``predict_proba(X_new)``, the fitted ``calibrators``, the fold ids and
        the out-of-fold scores.

    Notes
    -----
    Calibrators must be fitted on predictions for data the model was not trained
    on. Both strategies split the data into :math:`K` stratified folds and train the
    model :math:`K` times, each time predicting the held-out fold.

    ``"per_fold"`` (scikit-learn's ``CalibratedClassifierCV(ensemble=True)``): fold
    :math:`k` gets its own model :math:`m_k` (trained without fold :math:`k`) and
    its own calibrator :math:`C_k` (fitted on :math:`m_k`'s predictions for fold
    :math:`k`). A new point gets :math:`\frac1K\sum_k C_k(m_k(x))`. No model sees
    all the data and each calibrator sees only :math:`N/K` points, but the average
    acts as a small ensemble.

    ``"pooled"`` (``ensemble=False``): the :math:`K` held-out predictions are pooled
    into out-of-fold predictions for all :math:`N` points and one calibrator
    :math:`C` is fitted on them; a final model :math:`m` is trained on all the data
    and a new point gets :math:`C(m(x))`. One model and one calibrator, both from
    all the data; the calibrator is fitted on CV models' predictions and applied to
    the full model's, which is slightly optimistic when the model improves with
    more data.

    With a ``fit_predict`` callable, models are not stored (there is none to keep):
    ``predict_proba`` retrains them, and ``X_new`` gets its predictions from the
    training calls themselves. With ``(fit, predict)`` they are trained once and
    stored in ``models``.

    References
    ----------
    Platt, J. C. (1999). Probabilistic outputs for support vector machines.
    *Advances in Large Margin Classifiers*, 61-74 (calibration on out-of-sample
    predictions from cross-validation).
    scikit-learn developers. ``sklearn.calibration.CalibratedClassifierCV``, v1.9.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import cross_calibrate
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 1))
    >>> y = (rng.uniform(size=200) < 1 / (1 + np.exp(-2 * X[:, 0]))).astype(int)
    >>> def fit_predict(X_train, y_train, X_eval):  # an overconfident "model"
    ...     slope = 3.0 * np.sign(np.corrcoef(X_train[:, 0], y_train)[0, 1])
    ...     return 1 / (1 + np.exp(-slope * 2 * X_eval[:, 0]))
    >>> res = cross_calibrate(0, fit_predict, X, y, method="platt", num_folds=4)
    >>> len(res.calibrators), res.predict_proba(X[:3]).shape
    (4, (3,))

    Trained once, predicted many times, with a ``(fit, predict)`` pair:

    >>> def fit(X_train, y_train):
    ...     return 3.0 * np.sign(np.corrcoef(X_train[:, 0], y_train)[0, 1])
    >>> def predict(slope, X_eval):
    ...     return 1 / (1 + np.exp(-slope * 2 * X_eval[:, 0]))
    >>> res = cross_calibrate(0, (fit, predict), X, y, method="platt", num_folds=4)
    >>> len(res.models), res.predict_proba(X[:3]).shape
    (4, (3,))
    """
    pair = _model_functions(fit_predict)
    _v.check_choice(ensemble, "ensemble", ENSEMBLES)
    num_folds = _v.check_positive_int(num_folds, "num_folds", minimum=2)
    if folds is None:
        key = check_key(key)
    fit = _binary_fit(method, allow_callable=True)
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D; got shape {labels.shape}.")
    n = _length(X, "X")
    if labels.shape[0] != n:
        raise ValueError(
            f"y has {labels.shape[0]} labels but X has {n} rows; they must match."
        )
    # numeric labels are checked in NumPy as they are (jnp.asarray of int64 labels
    # compiles a conversion for every length)
    _v.check_binary_labels(
        labels if labels.dtype.kind in "biuf" else jnp.asarray(labels), "y"
    )
    labels = labels.astype(np.int64)
    if folds is None:
        counts = np.bincount(labels, minlength=2)
        if counts.min() < num_folds:
            raise ValueError(
                f"each class needs at least num_folds={num_folds} members so every "
                f"held-out fold has both classes; got {counts[0]} of class 0 and "
                f"{counts[1]} of class 1. Lower num_folds or add data."
            )
        fold = _stratified_folds(labels, num_folds, key)
    else:
        fold = _check_folds(folds, labels)
        num_folds = int(fold.max()) + 1
    n_new = None if X_new is None else _length(X_new, "X_new")
    oof = np.empty(n, np.float64)
    new_scores = []
    models = []
    for k in range(num_folds):
        test, train = np.flatnonzero(fold == k), np.flatnonzero(fold != k)
        x_test = _take(X, test)
        x_eval = (
            x_test if (X_new is None or ensemble == "pooled") else _concat(x_test, X_new)
        )
        if pair is None:
            scores = _call(fit_predict, _take(X, train), labels[train], x_eval)
        else:
            models.append(pair[0](_take(X, train), labels[train]))
            scores = _checked(pair[1](models[-1], x_eval), x_eval, "predict")
        oof[test] = scores[: test.size]
        new_scores.append(scores[test.size :])
    oof_scores = (
        oof.astype(scores.dtype) if np.issubdtype(scores.dtype, np.floating) else oof
    )
    if ensemble == "per_fold":
        calibrators = tuple(
            fit(labels[fold == k], oof_scores[fold == k], **options)
            for k in range(num_folds)
        )
        new_proba = None
        if X_new is not None:
            new_proba = _average(
                [cal(s) for cal, s in zip(calibrators, new_scores, strict=True)]
            )
    else:
        calibrators = (fit(labels, oof_scores, **options),)
        new_proba = None
        if pair is not None:
            models = [pair[0](X, labels)]  # the final model, on all the data
        if X_new is not None:
            scores = (
                _call(fit_predict, X, labels, X_new)
                if pair is None
                else _checked(pair[1](models[0], X_new), X_new, "predict")
            )
            new_proba = calibrators[0](scores)
    if n_new is not None and new_proba is not None and new_proba.shape != (n_new,):
        raise ValueError(f"expected {n_new} predictions for X_new; got {new_proba.shape}.")
    return CrossCalibratedClassifier(
        fit_predict, X, labels, ensemble, fold, calibrators, oof_scores, new_proba,
        tuple(models),
    )
