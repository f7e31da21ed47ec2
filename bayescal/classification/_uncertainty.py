"""Sampling uncertainty of reliability curves: acceptance intervals, CORP, bootstrap."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.bands import (
    MULTINOMIAL_PER_POINT,
    binomial_acceptance_intervals,
    cell_draws,
    corp_band,
    per_cell,
)
from bayescal._src.binning import bin_counts, bin_index, bin_sums
from bayescal._src.curve import CalibrationCurve
from bayescal._src.options import BinStrategy, BootstrapMethod, KeyLike
from bayescal._src.resampling import (
    METHODS,
    check_key,
    check_level,
    default_batch_size,
    percentile_interval,
)
from bayescal._src.sorting import gather_all
from bayescal._src.ties import argsort_last_axis, isotonic_fit
from bayescal._src.xla_options import pair_sum_options
from bayescal.classification._inputs import binary_inputs, resolve_bins
from bayescal.classification._metrics import _reliability_kernel

__all__ = ["acceptance_intervals", "corp_curve", "bootstrap_reliability_curve"]

# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "y_prob": 0}


def acceptance_intervals(
    curve: CalibrationCurve, *, level: float = 0.95
) -> CalibrationCurve:
    r"""Fill ``lower`` / ``upper`` with per-bin acceptance intervals under calibration.

    For a bin with :math:`n_k` forecasts of mean :math:`\bar p_k`, a calibrated model
    gives :math:`n_k \bar y_k \sim \mathrm{Binomial}(n_k, \bar p_k)` (approximately,
    treating the bin's forecasts as equal), so the observed frequency falls between
    the binomial quantiles :math:`q_{(1-\text{level})/2} / n_k` and
    :math:`q_{(1+\text{level})/2} / n_k` with probability at least ``level``. Points
    outside their interval are evidence of miscalibration in that bin (Bröcker &
    Smith, 2007, "Increasing the reliability of reliability diagrams").

    Parameters
    ----------
    curve : CalibrationCurve
        From :func:`reliability_curve` (``weight`` = counts).
    level : float in (0, 1), default 0.95

    Returns
    -------
    CalibrationCurve
        The same curve with ``lower`` and ``upper`` set (NaN for empty bins).

    See Also
    --------
    bootstrap_reliability_curve : The uncertainty of this model's curve.
    bayescal.regression.pit_ecdf_band : The simultaneous band of a PIT ECDF.

    Examples
    --------
    >>> from bayescal.classification import reliability_curve, acceptance_intervals
    >>> c = acceptance_intervals(reliability_curve([0, 1] * 10, [0.5] * 20, bins=2))
    >>> [round(float(v), 2) for v in (c.lower[1], c.upper[1])]  # Binomial(20, 0.5) quantiles / 20
    [0.3, 0.7]
    """
    if not isinstance(curve, CalibrationCurve):
        raise TypeError(
            f"curve must be a CalibrationCurve (from reliability_curve); got {type(curve).__name__}."
        )
    band = binomial_acceptance_intervals(curve.expected, curve.weight, level=level)
    return curve._replace(lower=band.lower, upper=band.upper)


@_v.validated(fuse=True, bucket=_BUCKET, per_observation=0, compiler_options=pair_sum_options)
def corp_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    key: KeyLike | None = None,
    level: float = 0.95,
    num_samples: int = 1000,
) -> CalibrationCurve:
    r"""The CORP reliability curve: the PAV recalibration of the forecasts.

    CORP (Dimitriadis, Gneiting & Jordan, 2021) replaces binning by isotonic
    regression of the labels on the forecasts (ties pooled): the curve is the step
    function through the distinct forecasts and their PAV-fitted frequencies, with no
    tuning choice. With a ``key``, the curve gets their consistency band: the pointwise
    ``level`` range of the PAV fit when the labels are resampled as
    :math:`y^* \sim \mathrm{Bernoulli}(p)`, i.e. what a calibrated model would show.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Labels in {0, 1}.
    y_prob : array_like, shape [N]
        Forecast probabilities.
    key : PRNG key or int seed, optional
        Randomness of the consistency band. Without a key no band is computed
        (``lower``/``upper`` are None): the curve itself is deterministic.
    level : float in (0, 1), default 0.95
    num_samples : int, default 1000

    Returns
    -------
    CalibrationCurve
        ``expected``: the sorted forecasts ``[N]``; ``observed``: the PAV fit there;
        ``weight``: 1 per forecast; ``lower`` / ``upper``: the consistency band (or
        None). Draw it as a right-continuous step function.

    Examples
    --------
    >>> from bayescal.classification import corp_curve
    >>> c = corp_curve([0, 1, 0, 1], [0.2, 0.4, 0.6, 0.8])
    >>> c.observed.tolist()
    [0.0, 0.5, 0.5, 1.0]
    """
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y_true, y_prob = gather_all((y_true, y_prob), "The CORP curve (PAV)")
    y, p = binary_inputs(y_true, y_prob)
    if key is not None:
        key = check_key(key)
        num_samples = _v.check_positive_int(num_samples, "num_samples")
        level = check_level(level)
    mask = _v.observation_mask(p.shape[0])
    if mask is not None:
        # The padding of a bucket: forecasts above every real one (sorted last, one tie
        # group of their own) with label 1, the largest value any fit takes, so PAV
        # never pools them with a real block: the first n fitted values are those of the
        # real data. Sliced off on the host (per_observation=0).
        p = jnp.where(mask, p, jnp.asarray(2, p.dtype))
        y = jnp.where(mask, y, jnp.ones((), y.dtype))
    order = argsort_last_axis(p)
    xs = p[order]
    fitted = isotonic_fit(p, y).fitted[order]
    curve = CalibrationCurve(xs, fitted, jnp.ones_like(xs))
    if key is None:
        return curve
    # the padding's resampled labels are all 1 (u < 2), so it never moves a real fit
    b = corp_band(key, p, num_samples=num_samples, level=level)
    return curve._replace(lower=b.lower, upper=b.upper)


@functools.partial(
    jax.jit,
    static_argnames=("num_bins", "num_samples", "method", "batch_size", "per_cell"),
)
def _bootstrap_bands(
    key, y, p, n, mask, edges, level, *, num_bins, num_samples, method, batch_size, per_cell
):
    """Percentile bands of the observed frequencies over bootstrap replicates.

    A bin's frequency depends on a replicate only through the counts (or summed
    weights) of its two cells, (bin, label 0) and (bin, label 1). Replicate ``b``
    (key ``split(key, num_samples)[b]``) draws them per observation for small ``n``:
    ``n`` indices uniform on the first ``n`` observations (``method="plain"``,
    :func:`bayescal.core.bootstrap`'s draws) or Dirichlet(1, ..., 1) weights
    (``"bayesian"``), counted per cell; and per cell above 40 observations per cell
    (:func:`~bayescal._src.bands.per_cell`): multinomial counts, or gamma weights,
    whose cost does not grow with ``n``. Both are exact. ``mask`` (None when nothing is
    padded) marks the real observations of a padded bucket: per-observation draws have
    the bucket's length and only their first ``n`` entries count, which with JAX's
    counter-based threefry are exactly the draws of an unpadded call.
    """
    size = p.shape[0]
    dtype = p.dtype
    cells = 2 * num_bins
    idx = 2 * bin_index(p, edges) + (y > 0.5).astype(jnp.int32)
    if mask is not None:
        idx = jnp.where(mask, idx, cells)  # out of range: counted nowhere
    count, _ = bin_sums(idx, cells)
    count = count.astype(dtype)
    nf = jnp.asarray(n, dtype)
    keys = jax.random.split(key, num_samples)

    def frequencies(c):
        c = c.reshape(num_bins, 2)
        total = c[:, 0] + c[:, 1]
        # empty bins give no information in a replicate: NaN is left out of the percentiles
        return jnp.where(total > 0, c[:, 1] / jnp.where(total > 0, total, 1), jnp.nan)

    def per_cells():
        kind = "multinomial" if method == "plain" else "gamma"

        def one(k):
            return frequencies(cell_draws(k, nf, count, kind=kind))

        return jax.lax.map(one, keys, batch_size=default_batch_size(cells, num_samples))

    def per_observation():
        if method == "plain":

            def one(k):
                pick = jax.random.randint(k, (size,), 0, n, dtype=jnp.int32)
                c = bin_counts(jnp.where(jnp.arange(size) < n, idx[pick], cells), cells)
                return frequencies(c.astype(dtype))

        else:

            def one(k):
                e = jax.random.exponential(k, (size,), dtype)
                if mask is not None:
                    e = jnp.where(mask, e, 0)
                w, _ = bin_sums(idx, cells, weights=e)
                return frequencies(w)

        return jax.lax.map(one, keys, batch_size=batch_size)

    if per_cell is None:
        samples = jax.lax.cond(
            n > MULTINOMIAL_PER_POINT * cells, per_cells, per_observation
        )
    else:
        samples = per_cells() if per_cell else per_observation()
    return percentile_interval(samples, level)


@_v.validated(fuse=True, bucket=_BUCKET)
def bootstrap_reliability_curve(
    key: KeyLike,
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bins: Any = 15,
    strategy: BinStrategy = "uniform",
    level: float = 0.95,
    num_samples: int = 1000,
    method: BootstrapMethod = "plain",
) -> CalibrationCurve:
    """Reliability curve with bootstrap percentile bands of the observed frequencies.

    The bin edges are resolved once on the full data (so every replicate uses the
    same bins); each replicate resamples the observations (``method="plain"``) or
    reweights them with Dirichlet weights (``"bayesian"``), all in one ``vmap``.
    Unlike :func:`acceptance_intervals`, which show what a *calibrated* model would
    give, these bands show the uncertainty of *this* model's curve. A bin whose
    observations all have the same label gets a band of width 0 (every resample
    repeats that frequency): with few points per bin, prefer the acceptance intervals
    or the CORP consistency band.

    Parameters
    ----------
    key : PRNG key or int seed
        Randomness of the replicates (the first argument, as in ``jax.random``).
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1.
    bins, strategy
        As in :func:`reliability_curve`.
    level : float in (0, 1), default 0.95
        Coverage of the pointwise percentile bands.
    num_samples : int, default 1000
        Number of bootstrap replicates.
    method : {"plain", "bayesian"}, default "plain"
        Resample the observations, or reweight them with Dirichlet(1, ..., 1) weights.

    Returns
    -------
    CalibrationCurve
        :func:`reliability_curve` with ``lower`` / ``upper`` set (NaN in a bin that
        no replicate filled).

    See Also
    --------
    acceptance_intervals : What a calibrated model would show.
    bayescal.regression.bootstrap_calibration_curve : The regression twin.

    Examples
    --------
    >>> import jax
    >>> from bayescal.classification import bootstrap_reliability_curve
    >>> p = jax.random.uniform(jax.random.key(1), (400,))
    >>> y = jax.random.bernoulli(jax.random.key(2), p).astype(int)
    >>> c = bootstrap_reliability_curve(jax.random.key(0), y, p, bins=4, num_samples=200)
    >>> bool((c.lower <= c.observed).all() & (c.observed <= c.upper).all())
    True
    """
    y, p = binary_inputs(y_true, y_prob)
    mask = _v.observation_mask(p.shape[0])
    resolved = resolve_bins(bins, strategy, p)
    curve, edges = _reliability_kernel(
        y,
        p,
        None,
        resolved.edges,
        mask,
        num_bins=resolved.num_bins,
        strategy=resolved.strategy,
    )
    _v.check_choice(method, "method", METHODS)
    key = check_key(key)
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    level = check_level(level)
    size = p.shape[0]
    n = _v.observation_count(p, 0)
    lower, upper = _bootstrap_bands(
        key,
        y,
        p,
        n,
        mask,
        edges,
        level,
        num_bins=resolved.num_bins,
        num_samples=num_samples,
        method=method,
        batch_size=default_batch_size(2 * size, num_samples),
        per_cell=per_cell(n, size, 2 * resolved.num_bins),
    )
    return curve._replace(lower=lower, upper=upper)
