"""The shared core of bayescal: curves, binning, isotonic regression, error functionals.

Regression and classification are both built on these pieces; neither branch keeps a
copy of its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.bands import (
    Band,
    binomial_acceptance_intervals,
    binomial_quantile,
    corp_consistency_band,
)
from bayescal._src.binned import (
    bin_midpoints,
    binned_means,
    freedman_diaconis_edges,
    quantile_edges,
    uniform_edges,
)
from bayescal._src.binning import bin_index, bin_sums, count_at_or_below, grid_index
from bayescal._src.curve import CalibrationCurve
from bayescal._src.functionals import NORMS, area_between, curve_gap, ecdf_area_to_diagonal
from bayescal._src.isotonic import isotonic_kernel
from bayescal._src.resampling import (
    BootstrapResult,
    NullTestResult,
    bayesian_bootstrap_weights,
    bootstrap,
    bootstrap_indices,
    null_pvalue,
)
from bayescal._src.sorting import sort_last_axis
from bayescal._src.ties import (
    IsotonicFit,
    PooledTies,
    argsort_last_axis,
    isotonic_fit,
    pool_ties,
)

__all__ = [
    "CalibrationCurve",
    "isotonic_regression",
    "curve_error",
    "curve_area",
    "bin_index",
    "bin_sums",
    "grid_index",
    "count_at_or_below",
    "area_between",
    "ecdf_area_to_diagonal",
    "sort_last_axis",
    # resampling and bands
    "BootstrapResult",
    "NullTestResult",
    "Band",
    "bootstrap",
    "bootstrap_indices",
    "bayesian_bootstrap_weights",
    "null_pvalue",
    "binomial_quantile",
    "binomial_acceptance_intervals",
    "corp_consistency_band",
]
__all__ += [  # bin edges, per-bin means, isotonic fit on a covariate (ties pooled)
    "uniform_edges",
    "quantile_edges",
    "freedman_diaconis_edges",
    "bin_midpoints",
    "binned_means",
    "IsotonicFit",
    "isotonic_fit",
    "PooledTies",
    "pool_ties",
    "argsort_last_axis",
]


@_v.validated
def isotonic_regression(
    y: ArrayLike, *, weights: ArrayLike | None = None, increasing: bool = True
) -> jax.Array:
    r"""Weighted isotonic regression of ordered data (pool adjacent violators).

    Solves :math:`\min_{f_1 \le \dots \le f_n} \sum_i w_i (y_i - f_i)^2`.

    Parameters
    ----------
    y : array_like, shape [..., n]
        Responses, already ordered by the covariate along the last axis. Leading axes
        are a batch (each row is fitted on its own).
    weights : array_like, shape [..., n], optional
        Positive observation weights (default 1).
    increasing : bool, default True
        Fit a nondecreasing (True) or nonincreasing (False) sequence.

    Returns
    -------
    Array, shape like ``y``
        The fitted values, in ``y``'s dtype.

    Notes
    -----
    Equal to ``scipy.optimize.isotonic_regression`` (whose C++ PAV it calls on the
    host through ``jax.pure_callback``). Works under ``jit``, ``vmap`` and ``grad``:
    the derivative is the exact O(n) block-average rule.

    Examples
    --------
    >>> from bayescal.core import isotonic_regression
    >>> isotonic_regression([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    """
    y = _v.as_float_array(y, "y")
    _v.check_ndim(y, "y", range(1, 8))
    _v.check_nonempty(y, "y")
    _v.check_finite(y, "y")
    if weights is None:
        w = jnp.ones_like(y)
    else:
        w = _v.as_float_array(weights, "weights").astype(y.dtype)
        _v.check_broadcastable("y", tuple(y.shape), weights=w)
        _v.check_positive(w, "weights")
        w = jnp.broadcast_to(w, y.shape)
    if not isinstance(increasing, bool):
        raise TypeError(f"increasing must be a bool; got {increasing!r}.")
    return isotonic_kernel(y, w, increasing)


@_v.validated
def curve_error(curve: CalibrationCurve, *, norm: str = "l1") -> jax.Array:
    """Weighted gap between a curve's observed and expected values.

    ``norm="l1"``: :math:`\\sum_k w_k |o_k - e_k| / \\sum_k w_k`; ``"l2"``: the root of
    the weighted mean squared gap; ``"max"``: the largest gap over points of positive
    weight. For a regression curve (unit weights) these are MACE, RMSCE and the max
    calibration error; for a reliability curve (count weights) ECE, its L2 version and
    MCE.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.core import CalibrationCurve, curve_error
    >>> c = CalibrationCurve(jnp.array([0.2, 0.8]), jnp.array([0.3, 0.6]), jnp.array([1, 3]))
    >>> round(float(curve_error(c)), 4)
    0.175
    """
    _v.check_choice(norm, "norm", NORMS)
    return curve_gap(curve.expected, curve.observed, curve.weight, norm)


@_v.validated
def curve_area(curve: CalibrationCurve) -> jax.Array:
    """Area between the piecewise-linear curve and the diagonal, crossings exact.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.core import CalibrationCurve, curve_area
    >>> x = jnp.array([0.0, 1.0])
    >>> c = CalibrationCurve(x, jnp.array([0.5, 0.5]), jnp.ones(2))
    >>> float(curve_area(c))
    0.25
    """
    return area_between(curve.expected, curve.observed - curve.expected)
