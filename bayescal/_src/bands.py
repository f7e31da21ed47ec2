"""Acceptance and consistency bands under the hypothesis of calibration.

* Binomial quantiles and per-bin acceptance intervals for reliability diagrams.
* CORP consistency bands: resample outcomes from the forecasts and refit PAV.
* The simultaneous ECDF band of ``n`` uniform values (Säilynoja, Bürkner & Vehtari,
  2022), used for PIT values.

Binomial CDFs and quantiles are evaluated on the host in float64 with scipy through
``jax.pure_callback`` (so they work under ``jit`` and ``vmap``): JAX's float32
``betainc`` was measured off by up to 0.04 in the binomial CDF at n = 1e5, enough
to move a quantile by several counts.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.binning import count_at_or_below
from bayescal._src.bucketing import bucket_floor
from bayescal._src.device_quantiles import device_binomial_ppf
from bayescal._src.isotonic import isotonic_kernel
from bayescal._src.resampling import (
    check_batch_size,
    check_key,
    check_level,
    default_batch_size,
)
from bayescal._src.sorting import by_platform, gather_whole, several_devices, sort_last_axis

__all__ = [
    "Band",
    "binomial_quantile",
    "binomial_acceptance_intervals",
    "corp_band",
    "corp_consistency_band",
    "ecdf_band_kernel",
    "simulate_ecdf_counts",
    "cell_draws",
    "use_xla_draws",
    "xla_draws",
    "MULTINOMIAL_PER_POINT",
]


class Band(NamedTuple):
    """A band ``[lower, upper]`` evaluated at the points ``x``.

    Attributes
    ----------
    x : Array, shape [K]
        Where the band is evaluated (levels, bin positions or sorted forecasts).
    lower, upper : Array, shape [K]
        The band's edges, on the scale of the quantity it surrounds (a proportion).
    """

    x: jax.Array
    lower: jax.Array
    upper: jax.Array


# ------------------------------------------------------------- binomial on the host


def _host_binom_ppf(q: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``scipy.stats.binom.ppf(q, n, p)``, its rule and edge cases, from scipy.special.

    Importing scipy.stats costs ~0.5 s (its distributions' docstrings are built at
    import), scipy.special ~0.1 s: where scipy.special has the ufunc that
    ``binom._ppf`` calls (scipy >= 1.15), the edge cases of ``rv_discrete.ppf`` are
    handled here: NaN for invalid arguments (``n`` not a nonnegative whole number,
    ``p`` outside [0, 1]), -1 for ``q == 0``, ``n`` for ``q == 1``.
    """
    try:
        from scipy.special._ufuncs import _binom_ppf as ppf
    except ImportError:  # older scipy: its own function, and its import time
        from scipy.stats import binom

        return binom.ppf(*(np.asarray(a, dtype=np.float64) for a in (q, n, p)))

    q, n, p = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (q, n, p)))
    valid = (n >= 0) & (n == np.floor(n)) & (p >= 0) & (p <= 1)
    out = np.full(q.shape, np.nan)
    out[valid & (q == 0)] = -1.0
    top = valid & (q == 1)
    out[top] = n[top]
    inside = valid & (q > 0) & (q < 1)
    if inside.any():
        out[inside] = ppf(q[inside], n[inside], p[inside])
    return out


def _ppf_callback(q: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
    """``binom.ppf``: on the host (scipy, float64) on CPU, by bisection in XLA
    (:func:`bayescal._src.device_quantiles.device_binomial_ppf`) elsewhere."""
    dtype = p.dtype

    def host(q_, n_, p_):
        return _host_binom_ppf(q_, n_, p_).astype(dtype)

    shape = jnp.broadcast_shapes(q.shape, n.shape, p.shape)
    out = jax.ShapeDtypeStruct(shape, dtype)

    def cpu(q, n, p):
        return jax.pure_callback(host, out, q, n, p, vmap_method="broadcast_all")

    def device(q, n, p):
        return device_binomial_ppf(q, n, p).astype(dtype)

    return by_platform(q, n, p, cpu=cpu, default=device)


def _check_counts(count: ArrayLike, name: str) -> jax.Array:
    c = _v.as_float_array(count, name)
    _v.check_less_equal(
        jnp.zeros((), c.dtype),
        c,
        name,
        "must hold nonnegative whole numbers (counts of observations); got negative "
        "values. Pass unweighted counts, not weights or proportions",
    )
    _v.check_less_equal(
        c,
        jnp.round(c),
        name,
        "must hold nonnegative whole numbers (counts of observations); got fractions. "
        "Pass unweighted counts, not weights or proportions",
    )
    _v.check_less_equal(jnp.round(c), c, name, "must hold whole numbers; got fractions")
    return c


@_v.validated
def binomial_quantile(q: ArrayLike, n: ArrayLike, p: ArrayLike) -> jax.Array:
    r"""Quantile function of the binomial distribution :math:`\mathrm{Bin}(n, p)`.

    The smallest integer ``k`` in ``0..n`` with :math:`P(X \le k) \ge q`, element-wise
    over broadcast ``q``, ``n``, ``p``: equal to ``scipy.stats.binom.ppf`` (which it
    calls on the host in float64 through ``jax.pure_callback``, so it works under
    ``jit`` and ``vmap``; ``q = 0`` gives ``-1`` like scipy).

    Parameters
    ----------
    q : array_like
        Probabilities in [0, 1].
    n : array_like
        Numbers of trials (nonnegative whole numbers).
    p : array_like
        Success probabilities in [0, 1].

    Returns
    -------
    Array
        Quantiles as whole numbers, in the float dtype of ``p``.

    Examples
    --------
    >>> from bayescal._src.bands import binomial_quantile
    >>> binomial_quantile([0.025, 0.975], 20, 0.5).tolist()
    [6.0, 14.0]
    """
    p = _v.as_float_array(p, "p")
    q = _v.as_float_array(q, "q").astype(p.dtype)
    n = _check_counts(n, "n").astype(p.dtype)
    _v.check_in_unit_interval(q, "q", "probabilities")
    _v.check_in_unit_interval(p, "p", "probabilities")
    try:
        jnp.broadcast_shapes(q.shape, n.shape, p.shape)
    except ValueError as err:
        raise ValueError(
            f"q, n and p must broadcast together; got shapes {tuple(q.shape)}, "
            f"{tuple(n.shape)} and {tuple(p.shape)}."
        ) from err
    return _ppf_callback(q, n, p)


@jax.jit
def _acceptance_kernel(expected, count, level):
    half = ((1 - level) / 2).astype(expected.dtype)
    q = jnp.stack([half, 1 - half])[:, None]
    k = _ppf_callback(q, count[None, :], expected[None, :])
    safe = jnp.where(count > 0, count, 1)
    lower = jnp.where(count > 0, k[0] / safe, jnp.nan)
    upper = jnp.where(count > 0, k[1] / safe, jnp.nan)
    return Band(expected, lower.astype(expected.dtype), upper.astype(expected.dtype))


@_v.validated(fuse=True, bucket={"expected": 0, "count": 0}, per_observation=0)
def binomial_acceptance_intervals(
    expected: ArrayLike, count: ArrayLike, *, level: float = 0.95
) -> Band:
    r"""Per-bin acceptance intervals of a reliability diagram under calibration.

    If the forecasts in bin ``b`` (``n_b`` observations, mean forecast
    :math:`\bar p_b`) are calibrated, its count of positives is about
    :math:`\mathrm{Bin}(n_b, \bar p_b)`, so the observed frequency falls in

    .. math:: \big[\,Q(\alpha/2;\, n_b, \bar p_b) / n_b,\;
              Q(1 - \alpha/2;\, n_b, \bar p_b) / n_b\,\big]

    with probability at least ``level`` :math:`= 1 - \alpha` (``Q`` is the binomial
    quantile, :func:`binomial_quantile`). An observed frequency outside its interval is
    evidence of miscalibration in that bin (pointwise, not simultaneous over bins).
    These are exact binomial versions of the consistency bars of Bröcker & Smith
    (2007), which treat the forecasts within a bin as equal to their mean.

    Parameters
    ----------
    expected : array_like, shape [K]
        Mean forecast probability per bin, in [0, 1].
    count : array_like, shape [K]
        Number of observations per bin (whole numbers); empty bins give NaN.
    level : float in (0, 1), default 0.95

    Returns
    -------
    Band
        ``x = expected``; ``lower``, ``upper`` as observed frequencies, in
        ``expected``'s dtype.

    References
    ----------
    Bröcker & Smith (2007), "Increasing the reliability of reliability diagrams",
    *Weather and Forecasting* 22(3).

    Examples
    --------
    >>> from bayescal._src.bands import binomial_acceptance_intervals
    >>> band = binomial_acceptance_intervals([0.1, 0.5], [50, 20])
    >>> [round(v, 3) for v in band.lower.tolist()], [round(v, 3) for v in band.upper.tolist()]
    ([0.02, 0.3], [0.18, 0.7])
    """
    p = _v.as_float_array(expected, "expected")
    _v.check_ndim(p, "expected", 1)
    _v.check_nonempty(p, "expected")
    c = _check_counts(count, "count").astype(p.dtype)
    _v.check_same_shape(expected=p, count=c)
    empty = c == 0
    # empty bins may carry any placeholder (NaN) as their mean forecast
    _v.check_in_unit_interval(jnp.where(empty, 0.5, p), "expected", "probabilities")
    p = jnp.where(empty, 0.5, p)
    level = check_level(level)
    band = _acceptance_kernel(p, c, jnp.asarray(level, p.dtype))
    return band._replace(x=_v.as_float_array(expected, "expected"))


# ------------------------------------------------------------------ CORP resampling


def _tie_structure(x_sorted: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Group id of each sorted value and its rank within its group of ties."""
    n = x_sorted.shape[-1]
    pos = jnp.arange(n)
    starts = jnp.concatenate([jnp.ones((1,), bool), x_sorted[1:] != x_sorted[:-1]])
    group = jnp.cumsum(starts) - 1
    first = jax.lax.cummax(jnp.where(starts, pos, 0))
    return group, pos - first


def _corp_refit(key, x_sorted, group, rank, grid):
    """PAV fit of outcomes drawn from Bernoulli(x), ties pooled as in CORP."""
    n = x_sorted.shape[-1]
    y = jax.random.uniform(key, x_sorted.shape, x_sorted.dtype) < x_sorted
    ones = jax.ops.segment_sum(y.astype(jnp.int32), group, num_segments=n)
    # Within a group of tied forecasts, put the ones first (a decreasing run): PAV then
    # pools the whole group, which is CORP's rule that ties get one value.
    y_desc = (rank < ones[group]).astype(x_sorted.dtype)
    fit = isotonic_kernel(y_desc, jnp.ones_like(y_desc), True)
    if grid is None:
        return fit
    i = jnp.clip(jnp.searchsorted(x_sorted, grid, side="right") - 1, 0, n - 1)
    return fit[i]


@functools.partial(jax.jit, static_argnames=("num_samples", "batch_size"))
def _corp_kernel(x, grid, key, level, num_samples, batch_size):
    # sharded over a mesh: resampled and refitted whole on every device (one gather)
    x_sorted = sort_last_axis(gather_whole(x, "The CORP consistency band"))
    group, rank = _tie_structure(x_sorted)
    keys = jax.random.split(key, num_samples)
    fits = jax.lax.map(
        lambda k: _corp_refit(k, x_sorted, group, rank, grid), keys, batch_size=batch_size
    )
    q = jnp.stack([(1 - level) / 2, (1 + level) / 2]).astype(x.dtype)
    lo_hi = _column_quantiles(fits, q)
    where = x_sorted if grid is None else grid
    return Band(where, lo_hi[0], lo_hi[1])


def _host_column_quantiles(fits: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.quantile(fits, q, axis=-2).astype(fits.dtype)


def _column_quantiles(fits: jax.Array, q: jax.Array) -> jax.Array:
    """``jnp.quantile(fits, q, axis=0)`` (the "linear" rule): on one CPU device by
    NumPy's partition in a host callback, which took 0.14 s for the band's [1000,
    10000] refits where XLA's CPU sort of the columns took 1.4-2.2 s."""
    if several_devices():  # no host callback on a mesh (see bayescal._src.isotonic)
        return jnp.quantile(fits, q, axis=0)
    out = jax.ShapeDtypeStruct(q.shape + fits.shape[1:], fits.dtype)

    def host(f, q):
        return jax.pure_callback(_host_column_quantiles, out, f, q, vmap_method="sequential")

    return by_platform(
        fits, q, cpu=host, default=lambda f, q: jnp.quantile(f, q, axis=0)
    )


@_v.validated
def corp_consistency_band(
    key: Any,
    y_prob: ArrayLike,
    *,
    num_samples: int = 1000,
    level: float = 0.95,
    grid: ArrayLike | None = None,
    batch_size: int | None = None,
) -> Band:
    r"""Consistency band of the CORP (PAV) reliability curve under calibration.

    Dimitriadis, Gneiting & Jordan's (2021) resampling: draw outcomes
    :math:`y^*_i \sim \mathrm{Bernoulli}(x_i)` from the forecasts themselves (so the
    forecasts are calibrated by construction), refit the isotonic (PAV) recalibration
    curve with :func:`bayescal.core.isotonic_regression`'s kernel, and take pointwise
    quantiles of the refitted curves. A CORP curve leaving the band is evidence of
    miscalibration there. Tied forecasts share one fitted value, as in CORP.

    Parameters
    ----------
    key : PRNG key or int seed
        Randomness of the result (the first argument, as in ``jax.random``).
    y_prob : array_like, shape [N]
        Forecast probabilities in [0, 1] (any order).
    num_samples : int, default 1000
    level : float in (0, 1), default 0.95
        Pointwise coverage of the band.
    grid : array_like, shape [K], optional
        Evaluate the band at these points (each resampled fit is a right-continuous
        step function of the forecast) instead of at every sorted forecast; memory is
        then ``num_samples x K`` instead of ``num_samples x N``.
    batch_size : int, optional
        Resamples fitted per ``vmap`` batch.

    Returns
    -------
    Band
        ``x``: the sorted forecasts (or ``grid``); ``lower``, ``upper``: the band of the
        recalibrated probability at ``x``, in ``y_prob``'s dtype.

    Notes
    -----
    Each refit runs scipy's PAV on the host (``jax.pure_callback``), so the cost is
    ``num_samples`` PAV fits of ``N`` points. Ties are pooled without any sort per
    resample: within a run of tied forecasts the resampled ones are put first, which
    makes PAV merge the whole run (the isotonic fit without the tie constraint then
    already satisfies it).

    References
    ----------
    Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for
    probabilistic classifiers", *PNAS* 118(8), e2016191118.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from bayescal._src.bands import corp_consistency_band
    >>> x = jnp.linspace(0.05, 0.95, 200)
    >>> band = corp_consistency_band(jax.random.key(0), x, num_samples=100)
    >>> band.x.shape, bool((band.lower <= band.upper).all())
    ((200,), True)
    """
    x = _v.as_float_array(y_prob, "y_prob")
    _v.check_ndim(x, "y_prob", 1)
    _v.check_nonempty(x, "y_prob")
    _v.check_in_unit_interval(x, "y_prob", "probabilities")
    key = check_key(key)
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    level = check_level(level)
    batch_size = check_batch_size(batch_size)
    g = None
    if grid is not None:
        g = _v.as_float_array(grid, "grid").astype(x.dtype)
        _v.check_levels(g, "grid", strict=False)
    return corp_band(
        key, x, num_samples=num_samples, level=level, grid=g, batch_size=batch_size
    )


def corp_band(
    key: jax.Array,
    x: jax.Array,
    *,
    num_samples: int,
    level: float,
    grid: jax.Array | None = None,
    batch_size: int | None = None,
) -> Band:
    """:func:`corp_consistency_band` on checked arguments (no checks here).

    ``x`` may hold a bucket's padding as values above 1: they sort last, their
    resampled labels are all 1, and PAV never pools them with the real forecasts, so
    the band's first ``n`` points are those of the real data.
    """
    if batch_size is None:
        batch_size = default_batch_size(x.shape[0], num_samples)
    return _corp_kernel(x, grid, key, jnp.asarray(level, x.dtype), num_samples, batch_size)


# ------------------------------------------------------------- ECDF of uniforms


# Above this many observations per grid point, simulate counts per grid cell directly
# (multinomial or gamma draws, cost independent of n) instead of drawing n values:
# about the break-even point measured on CPU (a binomial or gamma draw costs as much
# as 30-50 uniform draws with their scatter-add).
MULTINOMIAL_PER_POINT = 40


def per_cell(n: Any, size: int, num_cells: int) -> bool | None:
    """Whether ``n`` observations are resampled per cell (``n > 40 * num_cells``).

    ``n`` is the static length, or the traced count of a padded bucket of ``size``:
    then the answer is static when the whole bucket lies on one side of the threshold,
    and None (decided at run time, both ways compiled) for the one bucket across it.
    """
    threshold = MULTINOMIAL_PER_POINT * num_cells
    if isinstance(n, int):
        return n > threshold
    if bucket_floor(size) > threshold:
        return True
    if size <= threshold:
        return False
    return None


def _uniform_ecdf_counts(key, n, num_points, dtype, size):
    u = jax.random.uniform(key, (size,), dtype)
    if not isinstance(n, int) or n != size:
        # Only the first n draws are observations: with JAX's counter-based
        # (partitionable) threefry the first n of `size` draws are exactly the n draws
        # of an unpadded call, so a padded bucket gives the same counts.
        u = jnp.where(jnp.arange(size) < n, u, jnp.nan)  # NaN is counted nowhere
    return count_at_or_below(u, num_points)


def _host_cell_draws(words, n, weights, *, kind: str):
    """Per key (the rows of ``words``), NumPy's generator seeded by the key's words:
    ``"multinomial"``: counts of ``n`` trials over cells of probability ``weights /
    sum(weights)``; ``"gamma"``: Gamma(max(weight, 1), 1) draws, 0 where the weight is
    0; ``"hypergeometric"``: the counts per cell of ``n`` of the ``sum(weights)`` items
    taken without replacement (``weights``: whole counts per cell); ``"resample"``:
    how often each of the first ``n`` cells is drawn in ``n`` uniform draws (a
    bootstrap resample's multiplicities). Float64 on the host; batched arguments
    (``vmap_method="expand_dims"``) broadcast."""
    words = np.asarray(words)
    dtype = np.asarray(weights).dtype
    weights = np.asarray(weights, np.float64)
    n = np.asarray(n)
    batch = np.broadcast_shapes(words.shape[:-1], weights.shape[:-1], n.shape)
    k = weights.shape[-1]
    flat_words = np.broadcast_to(words, batch + words.shape[-1:]).reshape(-1, words.shape[-1])
    flat_w = np.broadcast_to(weights, batch + (k,)).reshape(-1, k)
    flat_n = np.broadcast_to(n, batch).reshape(-1)
    out = np.zeros((flat_w.shape[0], k), np.float64)
    for i in range(out.shape[0]):
        rng = np.random.default_rng(flat_words[i].astype(np.uint32))
        w = np.clip(flat_w[i], 0.0, None)
        m = int(round(float(flat_n[i])))
        if kind == "resample":
            out[i] = np.bincount(rng.integers(0, m, m), minlength=k) if m > 0 else 0.0
        elif kind == "gamma":
            out[i] = np.where(w > 0, rng.standard_gamma(np.maximum(w, 1.0)), 0.0)
        elif kind == "hypergeometric":
            colors = np.round(w).astype(np.int64)
            out[i] = rng.multivariate_hypergeometric(colors, min(m, int(colors.sum())))
        elif w.sum() > 0:
            out[i] = rng.multinomial(m, w / w.sum())
    return out.reshape(batch + (k,)).astype(dtype)


_DRAWS = ("multinomial", "gamma", "hypergeometric", "resample")
_HOST_DRAWS = {kind: functools.partial(_host_cell_draws, kind=kind) for kind in _DRAWS}


_XLA_DRAWS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bayescal_xla_draws", default=False
)


@contextlib.contextmanager
def xla_draws() -> Iterator[None]:
    """Within this block, programs traced draw with ``jax.random`` as on several
    devices (tests: the mesh's draws on one device; clear JAX's caches around it, a
    program traced before keeps its draws)."""
    token = _XLA_DRAWS.set(True)
    try:
        yield
    finally:
        _XLA_DRAWS.reset(token)


def use_xla_draws() -> bool:
    """Whether random cell draws run in XLA: several devices, or :func:`xla_draws`."""
    return several_devices() or _XLA_DRAWS.get()


def _multinomial_by_binomials(key, n, p, dtype):
    """Multinomial counts as conditional binomials, cell after cell (exact): for JAX
    before 0.5, which has ``jax.random.binomial`` but no ``multinomial``."""
    tail = jnp.cumsum(p[::-1])[::-1]  # the probability left from each cell on

    def step(left, cell):
        k, pk, rest = cell
        q = jnp.where(rest > 0, jnp.clip(pk / jnp.where(rest > 0, rest, 1), 0, 1), 0)
        c = jnp.round(jax.random.binomial(k, left, q)).astype(dtype)
        return left - c, c

    cells = (jax.random.split(key, p.shape[-1]), p, tail)
    _, counts = jax.lax.scan(step, jnp.asarray(n, dtype), cells)
    return counts


def cell_draws(key: jax.Array, n: Any, weights: jax.Array, *, kind: str = "multinomial"):
    """Random counts (or weights) per cell for one key, in ``weights``' dtype, exact:
    ``"multinomial"``: ``n`` trials over cells of probability proportional to
    ``weights``; ``"gamma"``: Gamma(max(weight, 1)) draws, 0 where the weight is 0;
    ``"hypergeometric"``: ``n`` of the items counted by ``weights`` taken without
    replacement; ``"resample"``: how often each of the first ``n`` cells is drawn in
    ``n`` uniform draws, the multiplicities of a bootstrap resample (``weights`` only
    gives the shape and dtype). ``n`` and ``weights`` may be traced.

    On one device the draws come from NumPy's generator seeded by the key's words
    through ``jax.pure_callback``: JAX's own binomial sampler made up most of a
    bootstrap's first call (0.3 s of tracing, 0.3 s of XLA compilation at K = 101
    cells), NumPy's draws compile nothing and cost microseconds. With several devices
    (a mesh, ``jax.distributed``) ``jax.random``'s samplers run in XLA, as the sort
    does (:mod:`bayescal._src.sorting`); it has no hypergeometric sampler, so callers
    of that kind keep an XLA path of their own there.
    """
    dtype = weights.dtype
    if use_xla_draws():
        if kind == "resample":
            size = weights.shape[-1]
            idx = jax.random.randint(key, (size,), 0, n)
            idx = jnp.where(jnp.arange(size) < n, idx, size)  # n draws only
            return jnp.zeros((size,), dtype).at[idx].add(1, mode="drop")
        if kind == "gamma":
            g = jax.random.gamma(key, jnp.maximum(weights, 1))
            return jnp.where(weights > 0, g, 0).astype(dtype)
        if kind != "multinomial":
            raise NotImplementedError(f"{kind} draws on several devices")
        p = weights / jnp.sum(weights)
        if not hasattr(jax.random, "multinomial"):  # JAX < 0.5
            return _multinomial_by_binomials(key, n, p, dtype)
        return jax.random.multinomial(key, jnp.asarray(n, dtype), p, dtype=dtype)
    out = jax.ShapeDtypeStruct(weights.shape, dtype)
    return jax.pure_callback(
        _HOST_DRAWS[kind],
        out,
        _key_words(key),
        jnp.asarray(n, dtype),
        weights,
        vmap_method="expand_dims",
    )


def _multinomial_ecdf_counts(key, n, grid):
    cells = cell_draws(key, n, jnp.diff(grid))
    counts = jnp.concatenate([jnp.zeros((1,), grid.dtype), jnp.cumsum(cells)])
    return jnp.round(counts).astype(jnp.int32)


def simulate_ecdf_counts(
    key: jax.Array,
    n: Any,
    num_points: int,
    dtype: Any,
    *,
    size: int | None = None,
    per_cell: bool | None = None,
) -> jax.Array:
    """Counts ``#{u_i <= z_j}`` of ``n`` uniforms at ``z = linspace(0, 1, num_points)``.

    ``n`` is an int, or a traced count in a padded bucket of ``size`` observations;
    ``per_cell`` (default: ``n > MULTINOMIAL_PER_POINT * num_points`` for an int
    ``n``) draws multinomial cell counts instead of ``n`` uniforms, and None with a
    traced ``n`` decides by ``n`` at run time (both ways compiled).
    """
    if size is None:
        size = int(n)
    if per_cell is None and isinstance(n, int):
        per_cell = n > MULTINOMIAL_PER_POINT * num_points

    def cells():
        grid = jnp.linspace(0.0, 1.0, num_points, dtype=dtype)
        return _multinomial_ecdf_counts(key, jnp.asarray(n, dtype), grid)

    def uniforms():
        return _uniform_ecdf_counts(key, n, num_points, dtype, size).astype(jnp.int32)

    if per_cell is None:
        return jax.lax.cond(n > MULTINOMIAL_PER_POINT * num_points, cells, uniforms)
    return cells() if per_cell else uniforms()


def _host_tails(k: np.ndarray, n: np.int64, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(X <= k)`` and ``P(X >= k)`` for ``X ~ Bin(n, z)`` (float64, scipy's cephes)."""
    k = np.asarray(k, dtype=np.float64)
    import scipy.special

    cdf = np.where(k < 0, 0.0, scipy.special.bdtr(np.maximum(k, 0), n, z))
    sf = np.where(k <= 0, 1.0, scipy.special.bdtrc(np.maximum(k - 1, 0), n, z))
    return np.where(k >= n, 1.0, cdf), np.where(k > n, 0.0, sf)


def _smallest_tails(counts: np.ndarray, n: np.int64, z: np.ndarray) -> np.ndarray:
    """``min_j min(P(X_j <= c_j), P(X_j >= c_j))`` for each row of ``counts [B, K]``.

    The tails depend on the point and the count only, so they are computed once per
    count that occurs at each point (a table of a few standard deviations per point)
    and looked up: the same values as computing them for every entry, several times
    faster for many simulations.
    """
    counts = np.asarray(counts, np.int64)
    low = counts.min(axis=0)
    span = counts.max(axis=0) - low + 1
    start = np.concatenate([[0], np.cumsum(span)[:-1]])
    point = np.repeat(np.arange(counts.shape[-1]), span)
    value = low[point] + np.arange(span.sum()) - start[point]
    lower_tail, upper_tail = _host_tails(value, n, z[point])
    table = np.minimum(lower_tail, upper_tail)
    return table[start + (counts - low)].min(axis=-1)


def _binom_ppf(q: Any, n: np.int64, z: np.ndarray) -> np.ndarray:
    """``scipy.stats.binom.ppf(q, n, z)`` from scipy.special (the same rule)."""
    import scipy.special

    vals = np.ceil(scipy.special.bdtrik(q, n, z))
    below = np.maximum(vals - 1, 0)
    return np.where(scipy.special.bdtr(below, n, z) >= q, below, vals)


def _host_band_counts(counts, z, level, n):
    """Adjusted tail ``q`` and the band's counts, from the simulated counts (host).

    ``t_b`` is the smallest one-sided tail of simulation ``b``. With ``k`` the
    conservative rank ``ceil((1 - level) B)``, the threshold is put strictly between
    the ``k``-th smallest value of ``t`` and the largest value below it (their geometric
    mean), so at most ``k - 1`` simulations fall outside, and never on a value that
    ``t`` takes: ``t`` is discrete (a binomial tail), and a threshold on one of its
    atoms would make "inside" depend on rounding.
    The counts ``L_j = min{c: P(X_j <= c) >= q}``, ``U_j = max{c: P(X_j >= c) >= q}``
    are found with the same tail functions, so that a curve is inside the band exactly
    when its own ``t >= q``.
    """
    n = np.int64(n)
    z = np.asarray(z, dtype=np.float64)
    t = np.sort(_smallest_tails(np.asarray(counts), n, z))
    rank = max(1, int(np.ceil((1.0 - float(level)) * t.size - 1e-9)))
    cut = t[rank - 1]
    # Tails equal but for rounding (e.g. at points symmetric about 1/2, one computed as
    # a lower tail and the other as an upper tail) are one atom: a threshold between
    # them would sit within rounding of both.
    smaller = t[t < cut * (1 - 1e-9)]
    q = np.sqrt(cut * smaller[-1]) if smaller.size and smaller[-1] > 0 else cut / 2
    # starting points within a count or two of the answer (scipy.stats.binom's ppf rule,
    # without importing scipy.stats), then moved until the tail rules hold exactly
    lo = np.clip(_binom_ppf(q, n, z), 0, n)
    hi = np.clip(_binom_ppf(1.0 - q, n, z), 0, n)
    for _ in range(64):  # a step or two fixes any disagreement between the algorithms
        before = (lo, hi)
        lo = lo + (_host_tails(lo, n, z)[0] < q)
        lo = lo - ((lo > 0) & (_host_tails(lo - 1, n, z)[0] >= q))
        hi = hi + ((hi < n) & (_host_tails(hi + 1, n, z)[1] >= q))
        hi = hi - (_host_tails(hi, n, z)[1] < q)
        if np.array_equal(before[0], lo) and np.array_equal(before[1], hi):
            break
    return np.float64(q), lo, hi


def _host_ecdf_counts(
    words: np.ndarray, n: int, z: np.ndarray, num_samples: int, batch_size: int
) -> np.ndarray:
    """``num_samples`` simulated ECDF counts of ``n`` uniforms at the points ``z``.

    On the host with NumPy's generator seeded by the key's words: the counts at the
    points are cumulative multinomial cell counts (exactly the counts of ``n`` uniform
    draws, at a cost independent of ``n``), drawn ``batch_size`` rows at a time (the
    same stream whatever the batch size).
    """
    rng = np.random.default_rng(np.asarray(words, np.uint32).ravel())
    cells = np.diff(np.asarray(z, np.float64))
    cells = np.clip(cells, 0.0, None)
    cells /= cells.sum()
    out = np.empty((num_samples, z.size), np.int64)
    out[:, 0] = 0
    for start in range(0, num_samples, batch_size):
        stop = min(start + batch_size, num_samples)
        draws = rng.multinomial(n, cells, size=stop - start)
        np.cumsum(draws, axis=1, out=out[start:stop, 1:])
    return out


# The interior edges of the band are moved outwards by this many units in the last
# place: a curve's count / n may round either way (XLA divides by a constant n as a
# product with its reciprocal, up to ~3 ulps off the exact quotient), and a curve
# exactly on an edge of the band is inside it. Far below the distance 1 / n to the
# next count.
_EDGE_ULPS = 4


def _host_ecdf_band(words, z, level, *, n, num_samples, batch_size, dtype):
    """The band's ``lower``, ``upper`` (proportions) and ``q``, from the key's words."""
    z = np.asarray(z)
    counts = _host_ecdf_counts(words, n, z, num_samples, batch_size)
    q, lo, hi = _host_band_counts(counts[:, 1:-1], z[1:-1], level, n)
    dtype = np.dtype(dtype)
    lower = np.concatenate([[0.0], lo / n, [1.0]]).astype(dtype)
    upper = np.concatenate([[0.0], hi / n, [1.0]]).astype(dtype)
    # 0 and 1 stay exact (no curve lies below 0 or above 1), and so do the ends
    interior = np.zeros(z.size, bool)
    interior[1:-1] = True
    down, up = interior & (lower > 0), interior & (upper < 1)
    for _ in range(_EDGE_ULPS):
        lower[down] = np.nextafter(lower[down], dtype.type(-np.inf))
        upper[up] = np.nextafter(upper[up], dtype.type(np.inf))
    return lower, upper, np.asarray(q, dtype)


def _unit_grid(num_points: int, dtype: np.dtype) -> np.ndarray:
    # jnp.linspace(0, 1, num_points)'s floats, bit for bit (as in the calibration
    # curves), made on the host: no program (a jitted linspace was one per process)
    from bayescal._src.host import _levels

    return _levels(num_points, np.dtype(dtype))


def _key_words(key: Any) -> Any:
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


def ecdf_band_kernel(key, level, *, n, num_points, num_samples, dtype, batch_size):
    """Simultaneous ECDF band of ``n`` uniforms on ``linspace(0, 1, num_points)``.

    Returns the band and the adjusted one-sided pointwise tail probability ``q``: a
    curve is inside the band exactly when the smallest of its one-sided binomial tail
    probabilities over the interior points is at least ``q``.

    Everything runs on the host (NumPy and scipy, float64), seeded by the key: an eager
    call compiles nothing for a new ``n``; under ``jit`` or ``vmap`` (a traced key or
    level) the same host function runs through ``jax.pure_callback``.
    """
    dtype = jnp.dtype(dtype)
    n, num_points = int(n), int(num_points)
    grid_host = _unit_grid(num_points, dtype)
    words = _key_words(key)
    host = functools.partial(
        _host_ecdf_band,
        n=n,
        num_samples=int(num_samples),
        batch_size=int(batch_size),
        dtype=dtype,
    )
    if _v.is_concrete(words) and _v.is_concrete(level):
        lower, upper, q = host(np.asarray(words), grid_host, float(level))
        put = jax.device_put
        return Band(put(grid_host), put(lower), put(upper)), put(q)
    grid = jnp.asarray(grid_host)  # a constant of the traced program
    shapes = (
        jax.ShapeDtypeStruct(grid.shape, dtype),
        jax.ShapeDtypeStruct(grid.shape, dtype),
        jax.ShapeDtypeStruct((), dtype),
    )
    lower, upper, q = jax.pure_callback(
        host, shapes, words, grid, level, vmap_method="sequential"
    )
    return Band(grid, lower, upper), q
