"""Conditional calibration: by predicted scale, by group, and over adversarial groups.

Average calibration (:func:`calibration_curve`) can hide groups that are badly off.
This module measures calibration conditional on something:

* on the predicted scale: the spread-skill curve and the ENCE (Levi et al., 2022);
* on user-given groups: one calibration curve / error per group, all groups in one
  vmapped call with fixed shapes;
* on the worst group of a given size: uncertainty-toolbox's adversarial group
  calibration, as a Monte Carlo estimate.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.bands import cell_draws, use_xla_draws
from bayescal._src.binning import bin_index, bin_sums, count_at_or_below, grid_index
from bayescal._src.bucketing import random_prefix_stable
from bayescal._src.curve import CalibrationCurve
from bayescal._src.functionals import NORMS, curve_gap
from bayescal._src.options import BinStrategy, CurveKind, Norm
from bayescal._src.resampling import as_key

__all__ = [
    "expected_normalized_calibration_error",
    "spread_skill_curve",
    "group_calibration_curve",
    "group_calibration_error",
    "adversarial_group_calibration",
    "AdversarialGroupCalibration",
]

_KINDS = ("quantile", "interval")
_STRATEGIES = ("quantile", "uniform")


def _gaussian_inputs(y_true: Any, loc: Any, scale: Any) -> tuple[jax.Array, ...]:
    """1-D ``y_true``, ``loc`` and ``scale`` of one shape, finite, ``scale > 0``."""
    y = _v.as_float_array(y_true, "y_true")
    _v.check_ndim(y, "y_true", 1)
    _v.check_nonempty(y, "y_true")
    mu = _v.as_float_array(loc, "loc")
    s = _v.as_float_array(scale, "scale")
    _v.check_same_shape(y_true=y, loc=mu, scale=s)
    dtype = _v.result_dtype(y, mu, s)
    y, mu, s = (a.astype(dtype) for a in (y, mu, s))
    _v.check_finite(y, "y_true")
    _v.check_finite(mu, "loc")
    _v.check_positive(s, "scale")
    return y, mu, s


# --------------------------------------------------------------------------- ENCE
def _equal_count_bins(n: jax.Array | int, length: int, num_bins: int) -> jax.Array:
    """Bin of each rank ``0..length-1`` when ``n`` sorted values are split as
    ``np.array_split``; ranks ``>= n`` (a bucket's padding, sorted last) get
    ``num_bins``, a bin that is dropped. ``n`` may be traced (integer arithmetic)."""
    q, r = n // num_bins, n % num_bins
    ranks = jnp.arange(length)
    big = r * (q + 1)  # the first r bins hold q + 1 values, the others q
    idx = jnp.where(ranks < big, ranks // (q + 1), r + (ranks - big) // jnp.maximum(q, 1))
    return jnp.where(ranks < n, idx, num_bins).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("num_bins", "strategy"))
def _spread_skill_kernel(y, loc, scale, n, mask, num_bins, strategy):
    """The binned RMV and RMSE; ``n`` real observations, ``mask`` the real ones of a
    padded bucket (None: all). The padding goes to bin ``num_bins``, dropped."""
    length = y.shape[-1]
    if strategy == "quantile":
        key = scale if mask is None else jnp.where(mask, scale, jnp.inf)  # padding last
        order = jnp.argsort(key, stable=True)
        idx = jnp.zeros((length,), jnp.int32).at[order].set(
            _equal_count_bins(n, length, num_bins)
        )
    else:
        # the padding repeats the last observation: min and max are those of the data
        edges = jnp.linspace(jnp.min(scale), jnp.max(scale), num_bins + 1)
        idx = bin_index(scale, edges)
        if mask is not None:
            idx = jnp.where(mask, idx, num_bins)
    count, (var_sum, sq_sum) = bin_sums(idx, num_bins, (scale * scale, (y - loc) ** 2))
    c = count.astype(y.dtype)
    safe = jnp.where(count > 0, c, 1)
    rmv = jnp.where(count > 0, jnp.sqrt(var_sum / safe), jnp.nan)
    rmse = jnp.where(count > 0, jnp.sqrt(sq_sum / safe), jnp.nan)
    return CalibrationCurve(rmv, rmse, count)


def _check_binning(bins: Any, strategy: Any) -> int:
    _v.check_choice(strategy, "strategy", _STRATEGIES)
    return _v.check_num_bins(bins, "bins")


_GAUSSIAN = {"y_true": -1, "loc": -1, "scale": -1}


@_v.validated(fuse=True, bucket=_GAUSSIAN)
def spread_skill_curve(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike,
    *,
    bins: int = 10,
    strategy: BinStrategy = "quantile",
) -> CalibrationCurve:
    r"""Spread-skill (RMV vs RMSE) curve, binned by the predicted scale.

    The observations are binned by their predicted standard deviation
    :math:`\sigma_i`; in each bin :math:`B_k`

    .. math:: \mathrm{RMV}_k = \sqrt{\tfrac{1}{|B_k|}\sum_{i \in B_k} \sigma_i^2},\qquad
        \mathrm{RMSE}_k = \sqrt{\tfrac{1}{|B_k|}\sum_{i \in B_k} (y_i - \mu_i)^2}.

    A calibrated predictive gives the diagonal RMSE = RMV (Levi et al., 2022).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    loc : array_like, shape [N]
        Predictive means.
    scale : array_like, shape [N]
        Predictive standard deviations (> 0).
    bins : int, default 10
        Number of bins.
    strategy : {"quantile", "uniform"}, default "quantile"
        ``"quantile"``: equal-count bins of the observations sorted by scale (split as
        ``np.array_split``; ties broken by position), as in Levi et al.;
        ``"uniform"``: equal-width bins between the smallest and largest scale
        (bins ``[e_k, e_{k+1})``, the last closed).

    Returns
    -------
    CalibrationCurve
        ``expected`` = RMV, ``observed`` = RMSE, ``weight`` = count per bin (int);
        empty bins have weight 0 and NaN values.

    See Also
    --------
    expected_normalized_calibration_error : Its summary.
    calibration_curve : Average (unconditional) calibration.

    References
    ----------
    Levi, Gispan, Giladi & Fetaya (2022), "Evaluating and Calibrating Uncertainty
    Prediction in Regression Tasks", Sensors 22(15), 5540.

    Examples
    --------
    >>> from bayescal.regression import spread_skill_curve
    >>> c = spread_skill_curve([1.0, -1.0, 2.0, -2.0], [0.0] * 4, [1.0, 1.0, 2.0, 2.0],
    ...                        bins=2)
    >>> c.expected.tolist(), c.observed.tolist(), c.weight.tolist()
    ([1.0, 2.0], [1.0, 2.0], [2, 2])
    """
    y, mu, s = _gaussian_inputs(y_true, loc, scale)
    num_bins = _check_binning(bins, strategy)
    return _spread_skill_kernel(
        y, mu, s, _v.observation_count(s), _v.observation_mask(s.shape[-1]), num_bins, strategy
    )


@functools.partial(jax.jit, static_argnames=("num_bins", "strategy"))
def _ence_kernel(y, loc, scale, n, mask, num_bins, strategy):
    c = _spread_skill_kernel(y, loc, scale, n, mask, num_bins, strategy)
    full = c.weight > 0
    term = jnp.where(full, jnp.abs(c.expected - c.observed) / jnp.where(full, c.expected, 1), 0)
    return jnp.sum(term) / jnp.sum(full)


@_v.validated(fuse=True, bucket=_GAUSSIAN)
def expected_normalized_calibration_error(
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike,
    *,
    bins: int = 10,
    strategy: BinStrategy = "quantile",
) -> jax.Array:
    r"""Expected normalized calibration error, ENCE (Levi et al., 2022).

    .. math:: \mathrm{ENCE} = \frac1K \sum_{k=1}^K
        \frac{|\mathrm{RMV}_k - \mathrm{RMSE}_k|}{\mathrm{RMV}_k}

    over the non-empty bins of :func:`spread_skill_curve` (bins by predicted scale).
    0 for a perfectly calibrated spread; it does not go to 0 with finite bins of
    noise (each bin's RMSE has sampling error of relative size about
    :math:`1/\sqrt{2|B_k|}`).

    Parameters
    ----------
    y_true, loc, scale : array_like, shape [N]
        Observed values, predictive means and standard deviations (> 0).
    bins : int, default 10
        Number of bins.
    strategy : {"quantile", "uniform"}, default "quantile"
        See :func:`spread_skill_curve`.

    Returns
    -------
    Array, scalar

    See Also
    --------
    spread_skill_curve : The per-bin values.
    calibration_error : Average calibration of PIT values.

    References
    ----------
    Levi, Gispan, Giladi & Fetaya (2022), "Evaluating and Calibrating Uncertainty
    Prediction in Regression Tasks", Sensors 22(15), 5540.

    Examples
    --------
    >>> from bayescal.regression import expected_normalized_calibration_error as ence
    >>> float(ence([2.0, -2.0, 2.0, -2.0], [0.0] * 4, [1.0, 1.0, 2.0, 2.0], bins=2))
    0.5
    """
    y, mu, s = _gaussian_inputs(y_true, loc, scale)
    num_bins = _check_binning(bins, strategy)
    return _ence_kernel(
        y, mu, s, _v.observation_count(s), _v.observation_mask(s.shape[-1]), num_bins, strategy
    )


# --------------------------------------------------------------------------- groups
def _statistic(u: jax.Array, kind: str) -> jax.Array:
    return u if kind == "quantile" else jnp.abs(2 * u - 1)


@functools.partial(jax.jit, static_argnames=("num_groups", "num_levels", "kind"))
def _group_curve_kernel(u, groups, mask, num_groups, num_levels, kind):
    """One curve per group; ``mask``: the real observations of a padded bucket."""
    v = _statistic(u, kind)
    levels = jnp.linspace(0.0, 1.0, num_levels, dtype=u.dtype)
    if mask is not None:
        groups = jnp.where(mask, groups, -1)  # the padding is in no group

    def one(g):
        w = (groups == g).astype(u.dtype)
        counts = count_at_or_below(v, num_levels, weights=w)
        n_g = jnp.sum(w)
        return counts / n_g, n_g  # empty group: 0/0 = NaN

    observed, sizes = jax.vmap(one)(jnp.arange(num_groups))
    expected = jnp.broadcast_to(levels, observed.shape)
    weight = jnp.broadcast_to((sizes > 0).astype(u.dtype)[:, None], observed.shape)
    return CalibrationCurve(expected, observed, weight)


#: More groups than observations are allowed up to this many (empty groups are NaN).
_GROUPS_FLOOR = 1024


def _infer_num_groups(groups: Any, n: int) -> int:
    """``max(groups) + 1``, read on the host; bool groups are the two groups 0 and 1.

    Group ids index the output rows, so they must be consecutive from 0: sparse ids
    (e.g. 2**32, which made the kernel allocate 1.7 TB) raise here, naming ``groups``.
    """
    _v.reject_masked(groups, "groups")
    g_np = np.asarray(groups)
    if g_np.dtype == bool:
        return 2
    if g_np.size == 0 or not np.issubdtype(g_np.dtype, np.number):
        return 1  # the checks that follow raise with the proper message
    finite = g_np[np.isfinite(g_np)] if g_np.dtype.kind == "f" else g_np
    if not finite.size:
        return 1  # the label check raises, with the values found
    top = finite.max().item()
    if top >= max(n, _GROUPS_FLOOR):
        raise ValueError(
            f"groups holds ids up to {top} for {n} observations; group ids index the "
            f"output rows, so they must be consecutive integers from 0 (at most "
            f"max(N, {_GROUPS_FLOOR}) groups). Relabel them first: "
            "ids, groups = np.unique(groups, return_inverse=True) (row k is then "
            "group ids[k])."
        )
    return max(int(top) + 1, 1)


def _check_num_groups(num_groups: Any, n: int) -> int:
    num_groups = _v.check_positive_int(num_groups, "num_groups")
    if num_groups > max(n, _GROUPS_FLOOR):
        raise ValueError(
            f"num_groups must be at most max(N, {_GROUPS_FLOOR}) = {max(n, _GROUPS_FLOOR)} "
            f"for N = {n} observations; got {num_groups} (every group is a row of the "
            "output, most of them empty). Relabel the groups to consecutive ids from 0 "
            "with np.unique(groups, return_inverse=True)."
        )
    return num_groups


def _num_groups(groups: Any, num_groups: Any) -> Any:
    """``num_groups``, read from the largest group id (on the host) when None."""
    if num_groups is None:
        if not _v.is_concrete(groups):
            raise TypeError(
                "num_groups=None reads the number of groups from the largest group id, "
                "which needs concrete values; under jax.jit or jax.vmap pass num_groups."
            )
        shape = np.shape(groups)
        num_groups = _infer_num_groups(groups, shape[-1] if shape else 1)
    return num_groups


def _group_inputs(pit, groups, num_groups, num_levels, kind):
    _v.check_choice(kind, "kind", _KINDS)
    num_levels = _v.check_num_levels(num_levels)
    u = _v.check_pit(pit)
    num_groups = _check_num_groups(_num_groups(groups, num_groups), u.shape[0])
    g = _v.check_class_labels(groups, "groups", num_groups, what="one group id per PIT value")
    if g.shape != u.shape:
        raise ValueError(
            f"groups has shape {tuple(g.shape)} but pit has shape {tuple(u.shape)}; "
            "pass one integer group id per PIT value."
        )
    return u, g, num_groups, num_levels


def group_calibration_curve(
    pit: ArrayLike,
    groups: ArrayLike,
    *,
    num_groups: int | None = None,
    num_levels: int = 100,
    kind: CurveKind = "quantile",
) -> CalibrationCurve:
    r"""Calibration curve of the PIT values of each group, all groups at once.

    For group :math:`g` with members :math:`I_g`, the curve of
    :func:`calibration_curve` on :math:`\{u_i : i \in I_g\}`. All groups are
    computed in one vmapped call with fixed shapes (a mask per group), so the
    function works under ``jax.jit`` (with ``num_groups`` given).

    Parameters
    ----------
    pit : array_like, shape [N]
        PIT values in [0, 1].
    groups : array_like of int, shape [N]
        Group id of each observation, in ``[0, num_groups)``.
    num_groups : int, optional
        Number of groups; default ``max(groups) + 1`` (read eagerly).
    num_levels : int, default 100
        Number of levels, including 0 and 1.
    kind : {"quantile", "interval"}, default "quantile"
        One-sided or central-interval calibration (see :func:`calibration_curve`).

    Returns
    -------
    CalibrationCurve
        Fields of shape ``[num_groups, num_levels]``: ``expected`` = levels,
        ``observed`` = the group's fractions, ``weight`` = 1 (0 and NaN ``observed``
        for an empty group).

    See Also
    --------
    group_calibration_error : The error of each group's curve.
    calibration_curve : One curve of all observations.

    Examples
    --------
    >>> from bayescal.regression import group_calibration_curve
    >>> c = group_calibration_curve([0.1, 0.9, 0.4, 0.6], [0, 0, 1, 1], num_levels=3)
    >>> c.observed.tolist()
    [[0.0, 0.5, 1.0], [0.0, 0.5, 1.0]]
    """
    return _group_curve(
        pit,
        groups,
        num_groups=_num_groups(groups, num_groups),
        num_levels=num_levels,
        kind=kind,
    )


_GROUPS = {"pit": -1, "groups": -1}


# The public functions read num_groups=None from the data on the host first: the
# fused, bucketed call traces its arrays.
@_v.validated(fuse=True, bucket=_GROUPS)
def _group_curve(pit, groups, *, num_groups, num_levels, kind):
    u, g, num_groups, num_levels = _group_inputs(pit, groups, num_groups, num_levels, kind)
    mask = _v.observation_mask(u.shape[-1])
    return _group_curve_kernel(u, g, mask, num_groups, num_levels, kind)


def group_calibration_error(
    pit: ArrayLike,
    groups: ArrayLike,
    *,
    norm: Norm = "l1",
    num_groups: int | None = None,
    num_levels: int = 100,
    kind: CurveKind = "quantile",
) -> jax.Array:
    """Calibration error of the PIT values of each group, all groups at once.

    :func:`calibration_error` of each group's subset, from
    :func:`group_calibration_curve`.

    Parameters
    ----------
    pit : array_like, shape [N]
        PIT values in [0, 1].
    groups : array_like of int, shape [N]
        Group id of each observation, in ``[0, num_groups)``.
    norm : {"l1", "l2", "max"}, default "l1"
        Mean absolute gap (MACE), root mean squared gap (RMSCE) or the largest gap.
    num_groups : int, optional
        Number of groups; default ``max(groups) + 1`` (read eagerly).
    num_levels : int, default 100
        Number of levels, including 0 and 1.
    kind : {"quantile", "interval"}, default "quantile"
        One-sided or central-interval calibration.

    Returns
    -------
    Array, shape [num_groups]
        NaN for an empty group.

    See Also
    --------
    group_calibration_curve : The curves.
    calibration_error : The error of all observations.
    adversarial_group_calibration : The worst group of a given size.

    Examples
    --------
    >>> from bayescal.regression import group_calibration_error
    >>> e = group_calibration_error([0.1, 0.2, 0.5, 0.6], [0, 0, 1, 1], num_levels=3)
    >>> [round(v, 4) for v in e.tolist()]
    [0.1667, 0.0]
    """
    return _group_error(
        pit,
        groups,
        norm=norm,
        num_groups=_num_groups(groups, num_groups),
        num_levels=num_levels,
        kind=kind,
    )


@_v.validated(fuse=True, bucket=_GROUPS)
def _group_error(pit, groups, *, norm, num_groups, num_levels, kind):
    _v.check_choice(norm, "norm", NORMS)
    u, g, num_groups, num_levels = _group_inputs(pit, groups, num_groups, num_levels, kind)
    mask = _v.observation_mask(u.shape[-1])
    c = _group_curve_kernel(u, g, mask, num_groups, num_levels, kind)
    return curve_gap(c.expected, c.observed, c.weight, norm)


# --------------------------------------------------------------------------- adversarial
class AdversarialGroupCalibration(NamedTuple):
    """Worst-group calibration error against group size (Monte Carlo estimate).

    Attributes
    ----------
    group_size : Array, shape [R]
        Group size as a fraction of the data, ``linspace(0, 1, R)`` (uncertainty-
        toolbox's ``group_size``).
    group_count : Array of int, shape [R]
        Number of observations per group, ``max(round(N * group_size), 2)``.
    mean : Array, shape [R]
        Mean over the trials of the worst error among the drawn groups
        (uncertainty-toolbox's ``score_mean``).
    std : Array, shape [R]
        Standard deviation (``ddof=1``) of the worst error over the trials; this is
        what uncertainty-toolbox returns as ``score_stderr``.
    stderr : Array, shape [R]
        Standard error of ``mean``: ``std / sqrt(num_trials)``.
    """

    group_size: jax.Array
    group_count: jax.Array
    mean: jax.Array
    std: jax.Array
    stderr: jax.Array


def _subset_counts_without_replacement(key, b, sizes, num_levels, n=None):
    """Per-level counts of one uniform random subset of ``sizes[m]`` points per lane.

    Knuth's selection sampling (Algorithm S): point ``i`` joins lane ``m``'s subset with
    probability ``(k_m - taken_m) / (n - i)``, which gives every subset of size ``k_m``
    the same probability. One pass over the points for all lanes at once, no sort (XLA's
    sort, behind ``jax.random.permutation``, is slow on CPU). ``n`` real points (may be
    traced): a bucket's padding, after them, is never taken (each lane has taken its
    ``k_m`` by then), and point ``i``'s randomness is its own (``fold_in(key, i)``).
    """
    lanes = sizes.shape[0]
    n = b.shape[-1] if n is None else n

    def step(carry, i):
        counts, taken = carry
        u = jax.random.uniform(jax.random.fold_in(key, i), (lanes,), jnp.float32)
        need = sizes - taken
        remaining = n - i
        take = (need >= remaining) | (u * remaining.astype(jnp.float32) < need)
        take = take & (need > 0)
        counts = counts.at[:, b[i]].add(take.astype(jnp.int32), mode="drop")
        return (counts, taken + take.astype(jnp.int32)), None

    init = (jnp.zeros((lanes, num_levels), jnp.int32), jnp.zeros((lanes,), jnp.int32))
    (counts, _), _ = jax.lax.scan(step, init, jnp.arange(b.shape[-1], dtype=jnp.int32))
    return counts


def _subset_counts_hypergeometric(key, b, sizes, num_levels, n=None):
    """:func:`_subset_counts_without_replacement` in distribution, from the counts per
    level alone: those of a uniform random subset of ``k`` of the ``n`` points are
    multivariate hypergeometric. Drawn on the host, one key per lane
    (:func:`~bayescal._src.bands.cell_draws`); the selection scan took 0.7 s at
    ``n = 1e4`` for the default 1000 lanes. The padding of a bucket is counted nowhere.
    """
    n = b.shape[-1] if n is None else n
    real = jnp.arange(b.shape[-1]) < n
    cells, _ = bin_sums(jnp.where(real, b, num_levels), num_levels)
    keys = jax.random.split(key, sizes.shape[0])
    cells = cells.astype(jnp.int32)

    def one(k, size):
        return cell_draws(k, size, cells, kind="hypergeometric")

    return jax.vmap(one)(keys, sizes.astype(jnp.int32))


def _subset_counts_with_replacement(key, b, sizes, num_levels, n=None):
    """Per-level counts of ``sizes[m]`` points drawn with replacement, per lane.

    ``n`` real points (may be traced): indices are drawn from ``[0, n)``, so a bucket's
    padding is never drawn; with prefix-stable random draws
    (:func:`~bayescal._src.bucketing.random_prefix_stable`) the first ``n`` indices
    are those of the unpadded call.
    """
    length = b.shape[-1]
    n = length if n is None else n
    positions = jnp.arange(length)

    def one(k, size):
        idx = jax.random.randint(k, (length,), 0, n)
        w = (positions < size).astype(jnp.int32)
        return jax.ops.segment_sum(w, b[idx], num_segments=num_levels)

    keys = jax.random.split(key, sizes.shape[0])
    return jax.lax.map(lambda a: one(*a), (keys, sizes), batch_size=64)


@functools.partial(
    jax.jit,
    static_argnames=("num_levels", "kind", "norm", "num_trials", "num_group_draws", "replace"),
)
def _adversarial_kernel(
    key, u, counts, n, num_levels, kind, norm, num_trials, num_group_draws, replace
):
    b = grid_index(_statistic(u, kind), num_levels)
    levels = jnp.linspace(0.0, 1.0, num_levels, dtype=u.dtype)
    per_size = num_trials * num_group_draws
    sizes = jnp.repeat(counts, per_size)  # one lane per (size, trial, draw)
    if replace:
        per_level = _subset_counts_with_replacement(key, b, sizes, num_levels, n)
    elif use_xla_draws():
        per_level = _subset_counts_without_replacement(key, b, sizes, num_levels, n)
    else:
        per_level = _subset_counts_hypergeometric(key, b, sizes, num_levels, n)
    observed = jnp.cumsum(per_level, axis=-1).astype(u.dtype) / sizes[:, None].astype(u.dtype)
    errs = curve_gap(levels, observed, jnp.ones_like(levels), norm)
    worst = jnp.max(errs.reshape(counts.shape[0], num_trials, num_group_draws), axis=-1)
    mean = jnp.mean(worst, axis=-1)
    std = jnp.std(worst, axis=-1, ddof=1)
    return mean, std, std / np.sqrt(num_trials)


def adversarial_group_calibration(
    key: Any,
    y_true: ArrayLike,
    loc: ArrayLike,
    scale: ArrayLike,
    *,
    norm: Norm = "l1",
    kind: CurveKind = "interval",
    num_levels: int = 100,
    num_group_sizes: int = 10,
    num_trials: int = 10,
    num_group_draws: int = 10,
    replace: bool = False,
) -> AdversarialGroupCalibration:
    r"""Adversarial group calibration of Normal predictives (uncertainty-toolbox).

    For each group size :math:`r` in ``linspace(0, 1, num_group_sizes)`` (a fraction
    of the :math:`N` observations; :math:`\max(\mathrm{round}(rN), 2)` points), each of
    ``num_trials`` trials draws ``num_group_draws`` random groups of that size (without
    replacement unless ``replace``) and keeps the worst calibration error among them;
    the result is the mean and spread of that worst error over the trials. This is
    uncertainty-toolbox's ``adversarial_group_calibration`` (``cali_type``
    ``"mean_abs"`` = ``norm="l1"``, ``"root_mean_sq"`` = ``"l2"``; ``prop_type`` =
    ``kind``; ``num_bins`` = ``num_levels``; ``num_group_bins`` = ``num_group_sizes``;
    ``draw_with_replacement`` = ``replace``), computed in one compiled call. The
    random groups differ, so the numbers agree with it within Monte Carlo error.

    Parameters
    ----------
    key : PRNG key or int
        Randomness of the groups (the result is random: key first).
    y_true, loc, scale : array_like, shape [N]
        Observed values, predictive means and standard deviations (> 0).
    norm : {"l1", "l2", "max"}, default "l1"
        Calibration error of a group (see :func:`calibration_error`).
    kind : {"interval", "quantile"}, default "interval"
        Central-interval (uncertainty-toolbox's default) or one-sided calibration.
    num_levels : int, default 100
        Levels of each group's calibration curve.
    num_group_sizes : int, default 10
        Number of group sizes, evenly spaced fractions from 0 to 1.
    num_trials : int, default 10
        Trials per group size (at least 2, for the standard deviation).
    num_group_draws : int, default 10
        Random groups per trial, of which the worst counts.
    replace : bool, default False
        Draw each group's members with replacement.

    Returns
    -------
    AdversarialGroupCalibration
        ``(group_size, group_count, mean, std, stderr)``, each of shape
        ``[num_group_sizes]``.

    See Also
    --------
    group_calibration_error : Errors of user-given groups.
    calibration_error : Average calibration.

    References
    ----------
    Chung, Neiswanger, Char & Schneider (2021), "Beyond Pinball Loss: Quantile Methods
    for Calibrated Uncertainty Quantification", NeurIPS; uncertainty-toolbox
    (``metrics_calibration.adversarial_group_calibration``).

    Examples
    --------
    >>> from bayescal.regression import adversarial_group_calibration
    >>> r = adversarial_group_calibration(0, [0.1, -0.5, 1.2, 0.3], [0.0] * 4,
    ...                                   [1.0] * 4, num_group_sizes=3, num_trials=2)
    >>> r.group_count.tolist()
    [2, 2, 4]
    """
    # The shapes and options here, where n is known (the group sizes are computed from
    # it on the host); the values and the Monte Carlo estimate in one program per
    # bucket of n.
    k = as_key(key)
    y = _v.as_float_array(y_true, "y_true")
    _v.check_ndim(y, "y_true", 1)
    _v.check_nonempty(y, "y_true")
    _v.check_choice(norm, "norm", NORMS)
    _v.check_choice(kind, "kind", _KINDS)
    num_levels = _v.check_num_levels(num_levels)
    num_group_sizes = _v.check_positive_int(num_group_sizes, "num_group_sizes")
    num_trials = _v.check_positive_int(num_trials, "num_trials", minimum=2)
    num_group_draws = _v.check_positive_int(num_group_draws, "num_group_draws")
    replace = _v.check_bool(replace, "replace")
    n = y.shape[-1]
    if n < 2:
        raise ValueError(
            f"y_true has {n} observation; adversarial group calibration draws groups of "
            "at least 2, so pass at least 2 observations."
        )
    ratios = np.linspace(0, 1, num_group_sizes)
    # uncertainty-toolbox: max([int(round(num_pts * r)), 2]) (round half to even)
    sizes = np.array([max(int(round(n * r)), 2) for r in ratios], np.int32)
    # Drawn with replacement, the indices are one array of random draws per lane: the
    # padded call gives the same ones only where such draws are prefix-stable.
    run = (
        _adversarial_bucketed
        if not replace or random_prefix_stable(k)
        else _adversarial_unbucketed
    )
    return run(
        k,
        y,
        _v.as_float_array(loc, "loc"),
        _v.as_float_array(scale, "scale"),
        ratios,
        sizes,
        norm=norm,
        kind=kind,
        num_levels=num_levels,
        num_trials=num_trials,
        num_group_draws=num_group_draws,
        replace=replace,
    )


def _adversarial(key, y_true, loc, scale, ratios, sizes, **options):
    y, mu, s = _gaussian_inputs(y_true, loc, scale)
    u = ndtr((y - mu) / s)
    mean, std, stderr = _adversarial_kernel(
        key, u, sizes, _v.observation_count(u), **options
    )
    return AdversarialGroupCalibration(
        jnp.asarray(ratios, u.dtype), jnp.asarray(sizes), mean, std, stderr
    )


_adversarial_bucketed = _v.validated(fuse=True, bucket=_GAUSSIAN)(_adversarial)
_adversarial_unbucketed = _v.validated(fuse=True)(_adversarial)
