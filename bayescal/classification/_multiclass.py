"""Multiclass calibration errors built on the binary machinery."""

from __future__ import annotations

from typing import Any, Literal

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.options import BinStrategy, KeyLike, Norm
from bayescal.classification._inputs import (
    multiclass_compiler_options,
    multiclass_inputs,
    resolve_bins,
)
from bayescal.classification._metrics import _ece, _ece_options

__all__ = ["top_label_calibration_error", "marginal_calibration_error"]

# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "probs": 0}


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=multiclass_compiler_options)
def top_label_calibration_error(
    y_true: ArrayLike,
    probs: ArrayLike,
    *,
    bins: Any = 15,
    strategy: BinStrategy = "uniform",
    norm: Norm = "l1",
    debias: bool = False,
    key: KeyLike | None = None,
    num_samples: int = 1000,
    method: Literal["bernoulli", "normal"] = "bernoulli",
) -> jax.Array:
    r"""Top-label calibration error: ECE of the confidence in the predicted class.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels in ``0 .. C-1``.
    probs : array_like, shape [N, C]
        Predicted class probabilities (rows sum to 1).
    bins, strategy, norm, debias, key, num_samples, method
        As in :func:`expected_calibration_error`, applied to the pairs
        (correct?, confidence).

    Returns
    -------
    Array, scalar
        In ``probs``' dtype.

    Notes
    -----
    With confidence :math:`c_i = \max_k p_{ik}` and correctness
    :math:`a_i = 1[\arg\max_k p_{ik} = y_i]` (ties: the first maximal class), this is
    the binary ECE of :math:`(a_i, c_i)`: how far accuracy is from confidence, bin by
    bin. It is the "ECE" of Guo et al. (2017) and the top-label calibration error of
    Kumar et al. (2019).

    References
    ----------
    Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On calibration of
    modern neural networks. *ICML*.
    Kumar, A., Liang, P. and Ma, T. (2019). Verified uncertainty calibration.
    *NeurIPS 32*.

    Examples
    --------
    >>> from bayescal.classification import top_label_calibration_error
    >>> probs = [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]
    >>> round(float(top_label_calibration_error([0, 2, 2], probs, bins=1)), 4)
    0.0333
    """
    y, p = multiclass_inputs(y_true, probs)
    options, key = _ece_options(norm, debias, num_samples, method, key)
    confidence = jnp.max(p, axis=1)
    correct = (jnp.argmax(p, axis=1) == y).astype(p.dtype)
    bins = resolve_bins(bins, strategy, confidence)
    mask = _v.observation_mask(p.shape[0])
    return _ece(correct, confidence, None, bins, key, options, mask)


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=multiclass_compiler_options)
def marginal_calibration_error(
    y_true: ArrayLike,
    probs: ArrayLike,
    *,
    bins: Any = 15,
    strategy: BinStrategy = "uniform",
    norm: Norm = "l1",
    debias: bool = False,
    per_class: bool = False,
    key: KeyLike | None = None,
    num_samples: int = 1000,
    method: Literal["bernoulli", "normal"] = "bernoulli",
) -> jax.Array:
    r"""Marginal (classwise) calibration error, averaged over classes.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels in ``0 .. C-1``.
    probs : array_like, shape [N, C]
        Predicted class probabilities (rows sum to 1).
    bins, strategy, norm, debias, key, num_samples, method
        As in :func:`expected_calibration_error`, applied to every class's
        one-vs-rest pairs :math:`(1[y_i = k], p_{ik})`. ``bins="fd"`` picks the
        edges per class.
    per_class : bool, default False
        Return the ``[C]`` per-class errors instead of their average.

    Returns
    -------
    Array, scalar (or shape [C] with ``per_class=True``)
        In ``probs``' dtype.

    Notes
    -----
    With :math:`\mathrm{CE}_k` the binary calibration error of class :math:`k`, the
    average follows the norm, as in Kumar et al. (2019, Sec. 2.2):
    :math:`\frac1C\sum_k \mathrm{CE}_k` for ``"l1"``,
    :math:`(\frac1C\sum_k \mathrm{CE}_k^2)^{1/2}` for ``"l2"`` and
    :math:`\max_k \mathrm{CE}_k` for ``"max"``. With an int ``bins`` or explicit edges
    all classes are computed in one vectorised (``vmap``) call; every class uses the
    same ``key``.

    References
    ----------
    Kumar, A., Liang, P. and Ma, T. (2019). Verified uncertainty calibration.
    *NeurIPS 32*.
    Nixon, J., Dusenberry, M. W., Zhang, L., Jerfel, G. and Tran, D. (2019).
    Measuring calibration in deep learning. *CVPR Workshops*.

    Examples
    --------
    >>> from bayescal.classification import marginal_calibration_error
    >>> probs = [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]
    >>> round(float(marginal_calibration_error([0, 2, 2], probs, bins=1)), 4)
    0.3111
    """
    y, p = multiclass_inputs(y_true, probs)
    options, key = _ece_options(norm, debias, num_samples, method, key)
    if not isinstance(per_class, bool):
        raise TypeError(f"per_class must be a bool; got {per_class!r}.")
    onehot = (y[:, None] == jnp.arange(p.shape[1])[None, :]).astype(p.dtype)
    mask = _v.observation_mask(p.shape[0])
    if isinstance(bins, str):  # "fd": edges (and their number) differ per class
        per = jnp.stack(
            [
                _ece(
                    onehot[:, k],
                    p[:, k],
                    None,
                    resolve_bins(bins, strategy, p[:, k]),
                    key,
                    options,
                    mask,
                )
                for k in range(p.shape[1])
            ]
        )
    else:  # one binning for all classes: a single vmapped kernel
        b = resolve_bins(bins, strategy, p[:, 0])
        per = jax.vmap(
            lambda yk, pk: _ece(yk, pk, None, b, key, options, mask), in_axes=(1, 1)
        )(onehot, p)
    if per_class:
        return per
    if norm == "l1":
        return jnp.mean(per)
    if norm == "l2":
        return jnp.sqrt(jnp.mean(per**2))
    return jnp.max(per)
