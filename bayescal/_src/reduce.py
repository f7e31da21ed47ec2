"""Per-observation scores to one number: the ``weights`` / ``reduction`` pair of both branches.

:func:`reduce_scores` and :func:`clip_unit` take the array namespace ``xp``: ``jax.numpy``
in the kernels, ``numpy`` in the host twins (which pass float64 scores and round the
result once to the inputs' dtype).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from bayescal._src import validation as _v
from bayescal._src.options import REDUCTIONS

__all__ = ["check_reduction", "check_weights", "reduce_scores", "clip_unit"]


def check_reduction(reduction: Any) -> str:
    return _v.check_choice(reduction, "reduction", REDUCTIONS)


def check_weights(weights: Any, n: int, dtype: Any) -> jax.Array | None:
    """Optional nonnegative weights, one per observation (``[n]``), not all 0."""
    if weights is None:
        return None
    w = _v.as_float_array(weights, "weights").astype(dtype)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(
            f"weights has shape {tuple(w.shape)}; pass one nonnegative weight per "
            f"observation, shape ({n},)."
        )
    _v.check_nonnegative(w, "weights")
    _v.check_any_positive(w, "weights")
    return w


def reduce_scores(x: Any, w: Any, reduction: str, xp: Any = jnp) -> Any:
    """Combine scores over the last (observation) axis.

    ``"mean"``: the (weighted) mean; ``"sum"``: the (weighted) sum; ``"none"``: the
    per-observation scores, unweighted. A term of weight 0 is left out entirely
    (also where its score is infinite): that is how a bucket's padding is dropped
    (:func:`bayescal._src.validation.mask_weights`).
    """
    if reduction == "none" or x.ndim == 0:
        return x  # a scalar is one observation: its mean and its sum are itself
    if w is None:
        return xp.mean(x, axis=-1) if reduction == "mean" else xp.sum(x, axis=-1)
    total = xp.sum(xp.where(w == 0, 0, w * x), axis=-1)
    return total / xp.sum(w) if reduction == "mean" else total


def clip_unit(p: Any, eps: float, xp: Any = jnp) -> Any:
    """Clip probabilities to ``[eps, 1 - eps]`` in ``p``'s dtype.

    ``1 - eps`` is taken as the largest float of the dtype below 1 when it rounds to 1
    (e.g. ``eps = 2.2e-16`` in float32), so ``log(1 - p)`` stays finite.
    """
    one = xp.asarray(1, p.dtype)
    hi = xp.minimum(xp.asarray(1 - eps, p.dtype), xp.nextafter(one, xp.zeros_like(one)))
    lo = xp.maximum(xp.asarray(eps, p.dtype), xp.finfo(p.dtype).tiny)
    return xp.clip(p, lo, hi)
