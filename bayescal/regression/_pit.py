"""Probability integral transform (PIT) values from several predictive formats."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.backend import cpu_backend
from bayescal._src.bucketing import bucket_size, pad_axis, random_prefix_stable
from bayescal._src.host import _device, _flushed
from bayescal._src.host import first as host_first
from bayescal._src.resampling import check_key
from bayescal.regression._host import _normal_predictive
from bayescal.regression._host import ndtr as _host_ndtr

__all__ = ["pit_normal", "pit_draws", "pit_cdf", "pit_quantiles"]

# Rows of the draws array processed per loop step: large enough to amortise the loop,
# small enough that the step's temporaries stay in cache-sized chunks.
_ROWS_PER_STEP = 8


def _prep_y_and_params(y_true, name_pairs):
    y = _v.as_float_array(y_true, "y_true")
    _v.check_nonempty(y, "y_true")
    arrays = {"y_true": y}
    for name, value in name_pairs:
        arrays[name] = _v.as_float_array(value, name)
    dtype = _v.result_dtype(*arrays.values())
    arrays = {k: a.astype(dtype) for k, a in arrays.items()}
    _v.check_broadcastable(
        "y_true", tuple(y.shape), **{k: a for k, a in arrays.items() if k != "y_true"}
    )
    for k, a in arrays.items():
        _v.check_finite(a, k)
    return arrays


# --------------------------------------------------------------------------- host twins
def _twin_pit_normal(y_true: Any, loc: Any, scale: Any) -> jax.Array | None:
    """:func:`bayescal.regression.pit_normal` on the host."""
    data = _normal_predictive(y_true, loc, scale)
    if data is None:
        return None
    _, _, z = data
    return _device(_flushed(_host_ndtr(z).astype(z.dtype)))


@host_first(_twin_pit_normal)
@_v.validated(fuse=True, bucket={"y_true": -1, "loc": -1, "scale": -1}, per_observation=-1)
def pit_normal(y_true: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> jax.Array:
    r"""PIT values under Normal predictive distributions.

    :math:`u_i = \Phi((y_i - \mu_i) / \sigma_i)`, computed with ``ndtr`` so the tails
    keep their relative precision.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    loc, scale : array_like, shape [N] (or broadcastable to it)
        Predictive means and standard deviations (``scale > 0``).

    Returns
    -------
    Array, shape [N]
        PIT values in [0, 1], in the inputs' common float dtype.

    Examples
    --------
    >>> from bayescal.regression import pit_normal
    >>> [round(v, 4) for v in pit_normal([0.0, 1.0], 0.0, 1.0).tolist()]
    [0.5, 0.8413]
    """
    a = _prep_y_and_params(y_true, [("loc", loc), ("scale", scale)])
    _v.check_positive(a["scale"], "scale")
    return _pit_normal_kernel(a["y_true"], a["loc"], a["scale"])


@jax.jit
def _pit_normal_kernel(y, loc, scale):
    return ndtr((y - loc) / scale)


def pit_draws(
    y_true: ArrayLike, draws: ArrayLike, *, key: jax.Array | None = None
) -> jax.Array:
    r"""PIT values from predictive draws (posterior predictive samples, ensembles).

    Without ``key``: :math:`u_i = \frac1S \#\{s: x_{si} \le y_i\}`. With a PRNG ``key``
    (randomized PIT, for discrete or tied data): :math:`u_i = L_i + V_i (R_i - L_i)`
    with :math:`L_i = \frac1S\#\{x_{si} < y_i\}`, :math:`R_i = \frac1S\#\{x_{si} \le y_i\}`
    and :math:`V_i \sim U(0, 1)`; then :math:`u_i` is exactly uniform for a correct
    discrete predictive.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    draws : array_like, shape [S, N]
        Predictive draws, draw axis first (as ``numpyro.infer.Predictive`` returns).
    key : jax.random.PRNGKey, optional
        Randomize ties as above.

    Returns
    -------
    Array, shape [N]

    Notes
    -----
    On CPU the kernel streams through ``draws`` in blocks of rows with a
    ``lax.fori_loop``, accumulating integer counts: memory stays O(N) beyond the
    input, and it runs at about the speed of one numpy pass, where a
    broadcast-compare-mean under XLA is many times slower. On accelerators one
    broadcast compare-and-reduce is faster (``jax.lax.platform_dependent`` picks).
    The finiteness check of ``draws`` comes out of the same pass. A large numpy
    ``draws`` (over 128 MB) is not copied to the device whole: on the CPU backend it
    is counted in place in cache-sized blocks, on accelerators fed in row blocks,
    each counted as it arrives.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.regression import pit_draws
    >>> draws = jnp.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0]])
    >>> pit_draws(jnp.array([1.5, 1.0]), draws).tolist()
    [0.5, 0.25]
    """
    # large numpy draws: counted in row blocks (a JAX array is its own float array
    # too, and goes the fused way)
    if isinstance(draws, np.ndarray) and _draws_array(draws) is draws:
        return _pit_draws_streamed(y_true, draws, key=key)
    if key is None or random_prefix_stable(key):
        # host-resident inputs padded to their bucket (columns repeated: each PIT
        # value is its own column's count, so the padding changes no real value; the
        # uniforms of a randomized PIT are drawn per index, the same as unpadded)
        return _pit_draws_bucketed(y_true, draws, key=key)
    return _pit_draws_fused(y_true, draws, key=key)


def _pit_draws_impl(y_true, draws, *, key=None):
    y = _v.as_float_array(y_true, "y_true")
    d = _draws_array(draws)
    _v.check_ndim(d, "draws", 2)
    _v.check_ndim(y, "y_true", 1)
    _v.check_nonempty(d, "draws")
    if d.shape[1] != y.shape[0]:
        hint = ""
        if d.shape[0] == y.shape[0]:
            hint = " It looks transposed: pass draws.T (draws come first, as in NumPyro)."
        raise ValueError(
            f"draws has shape {tuple(d.shape)} but y_true has {y.shape[0]} values; draws "
            f"must be [S, N] with N = {y.shape[0]} (one column per observation).{hint}"
        )
    dtype = _v.result_dtype(y, d)
    y = y.astype(dtype)
    _v.check_finite(y, "y_true")
    if isinstance(d, np.ndarray):
        le, lt, finite = _count_numpy_chunks(y, d, strict=key is not None)
    else:
        le, lt, finite = _count_kernel(y, d.astype(dtype), strict=key is not None)
    # The finiteness of the draws comes out of the counting pass itself (no second
    # pass over [S, N]); the full check runs only to explain a failure.
    if _v.is_concrete(finite):
        if not bool(finite):
            _v.check_finite(jnp.asarray(d), "draws")
    else:
        _v.record("finite", "draws", jnp.where(finite, 0.0, jnp.nan).astype(dtype)[None])
    s = d.shape[0]
    if key is None:
        return (le / s).astype(dtype)
    v = jax.random.uniform(check_key(key), y.shape, dtype=dtype)
    return ((lt + v * (le - lt)) / s).astype(dtype)


_pit_draws_fused = _v.validated(fuse=True)(_pit_draws_impl)
_pit_draws_bucketed = _v.validated(
    fuse=True, bucket={"y_true": -1, "draws": -1}, per_observation=-1
)(_pit_draws_impl)
_pit_draws_streamed = _v.validated(_pit_draws_impl)


# Large numpy draws are fed to the device in row blocks of about this many bytes, each
# counted as it arrives: no full device copy of the input (device_put of 1 GB cost
# ~650 ms on the 2-core CPU machines, more than the count itself).
_NUMPY_CHUNK_BYTES = 1 << 26
_NUMPY_CHUNKED_ABOVE = 1 << 27


def _draws_array(draws):
    """Large float numpy draws stay on the host (counted in row blocks); else a JAX array."""
    if (
        isinstance(draws, np.ndarray)
        and draws.ndim == 2
        and draws.nbytes > _NUMPY_CHUNKED_ABOVE
        and draws.dtype in (np.float32, np.float64)
        and (draws.dtype == np.float32 or jax.config.read("jax_enable_x64"))
    ):
        return draws
    return _v.as_float_array(draws, "draws")


# On the CPU backend the draws are already where the count runs: they are counted in
# place by numpy in tiles of at most _HOST_TILE_COLUMNS observations x about
# _HOST_TILE_BYTES (so the comparison and the finiteness flag read each tile from
# cache, and the tile's counts stay in cache), with no copy at all. Rows of all the
# observations (2 MB each at N = 250,000 in float64) counted 1.8x slower, and numpy's
# own pass (d <= y).mean(0) writes a bool array the size of the draws (2-core CPU
# machine, [1000, 250000] float64, 2026-11-29: 450 ms tiled, 860 ms by rows, 500 ms
# numpy's pass without any finiteness check).
_HOST_TILE_COLUMNS = 1 << 14
_HOST_TILE_BYTES = 1 << 19


def _count_host_blocks(y: np.ndarray, d: np.ndarray, strict: bool):
    """``(le, lt, finite)`` of numpy draws counted in place, tile by tile."""
    n = d.shape[1]
    cols = min(n, _HOST_TILE_COLUMNS)
    rows = min(d.shape[0], max(1, _HOST_TILE_BYTES // max(1, cols * d.itemsize)))
    le = np.zeros(n, np.int32)
    lt = np.zeros(n, np.int32)
    cmp = np.empty((rows, cols), bool)
    finite = True
    for j in range(0, n, cols):
        y_j, le_j, lt_j = y[j : j + cols], le[j : j + cols], lt[j : j + cols]
        for start in range(0, d.shape[0], rows):
            tile = d[start : start + rows, j : j + cols]
            c = cmp[: tile.shape[0], : tile.shape[1]]
            np.less_equal(tile, y_j, out=c)
            le_j += np.add.reduce(c, axis=0, dtype=np.int32)
            if strict:
                np.less(tile, y_j, out=c)
                lt_j += np.add.reduce(c, axis=0, dtype=np.int32)
            if finite:  # once a non-finite draw is seen, the full check explains it later
                np.isfinite(tile, out=c)
                finite = bool(c.all())
    return jnp.asarray(le), jnp.asarray(lt), jnp.asarray(finite)


def _count_numpy_chunks(y, d: np.ndarray, strict: bool):
    if cpu_backend() and _v.is_concrete(y):
        return _count_host_blocks(np.asarray(y), d, strict)
    rows = max(1, _NUMPY_CHUNK_BYTES // max(1, d.shape[1] * d.itemsize))
    rows = 1 << (rows.bit_length() - 1)  # a power of two: few distinct block shapes
    n = d.shape[1]
    le, lt = jnp.zeros((n,), jnp.int32), jnp.zeros((n,), jnp.int32)
    finite = jnp.asarray(True)
    for start in range(0, d.shape[0], rows):
        block = jax.device_put(np.ascontiguousarray(d[start : start + rows]))
        le, lt, finite = _count_step(
            le, lt, finite, y, block.astype(y.dtype), strict=strict
        )
    return le, lt, finite


@functools.partial(jax.jit, static_argnames=("strict",), donate_argnums=(0, 1))
def _count_step(le, lt, finite, y, block, *, strict):
    a, b, f = _count_kernel(y, block, strict=strict)
    return le + a, lt + b, finite & f


def _count_rows(y, draws, strict: bool):
    """Integer counts ``#{s: draws[s] <= y}`` (and ``< y``) by a loop over row blocks.

    A ``fori_loop`` takes ``dynamic_slice`` blocks of ``_ROWS_PER_STEP`` rows straight
    from ``draws``, so no copy of the input is made whatever ``S``: a ``scan`` over
    ``draws[:full].reshape(...)`` copied the whole array when ``S`` was not a multiple
    of the block (8x slower at [1001, 250001]). The last ``S mod k`` rows are added at
    the end. Also returns whether every draw is finite, from the same pass.
    """
    s, n = draws.shape
    k = min(_ROWS_PER_STEP, s)
    num_blocks = s // k
    full = num_blocks * k

    def add(carry, block):
        le, lt, bad = carry
        le = le + jnp.sum(block <= y, axis=0, dtype=jnp.int32)
        if strict:
            lt = lt + jnp.sum(block < y, axis=0, dtype=jnp.int32)
        # x * 0 is NaN exactly for NaN and +-inf: a per-column flag, no extra pass
        bad = bad | jnp.any(jnp.isnan(block * 0), axis=0)
        return le, lt, bad

    def body(i, carry):
        return add(carry, jax.lax.dynamic_slice_in_dim(draws, i * k, k, axis=0))

    zeros = jnp.zeros((n,), jnp.int32)
    carry = jax.lax.fori_loop(0, num_blocks, body, (zeros, zeros, jnp.zeros((n,), bool)))
    if full < s:
        carry = add(carry, draws[full:])
    le, lt, bad = carry
    return le, lt, ~jnp.any(bad)


def _count_broadcast(y, draws, strict: bool):
    """The same counts by one broadcast compare-and-reduce (fast on accelerators).

    Written as the plain ``jnp.sum(draws <= y, axis=0)`` in float32, which XLA reads
    at the memory's speed (integer sums and a separate finiteness reduction ran 2-5x
    slower on an H200): each term is ``[x <= y] + 0 x``, so a column holding NaN or
    +-inf sums to NaN, and otherwise to its exact count (integers below ``2^24``).
    Both counts of a randomized PIT share one sum, ``#{<=} + 4096 #{<}``, while it
    stays below ``2^24`` (``S < 4096``); integer sums past those sizes.
    """
    s = draws.shape[0]
    if s >= 2**24 or (strict and s >= 2**12):
        bad = jnp.any(jnp.isnan(draws * 0), axis=0)  # NaN exactly for NaN and +-inf
        le = jnp.sum(draws <= y, axis=0, dtype=jnp.int32)
        lt = jnp.sum(draws < y, axis=0, dtype=jnp.int32) if strict else jnp.zeros_like(le)
        return le, lt, ~jnp.any(bad)
    one = jnp.ones((), jnp.float32)
    term = jnp.where(draws <= y, one, 0) + (draws * 0).astype(jnp.float32)
    if strict:
        term = term + jnp.where(draws < y, 4096 * one, 0)
    total = jnp.sum(term, axis=0)
    finite = jnp.all(jnp.isfinite(total))
    count = jnp.where(jnp.isfinite(total), total, 0).astype(jnp.int32)
    if strict:
        return count % 4096, count // 4096, finite
    return count, jnp.zeros_like(count), finite


@functools.partial(jax.jit, static_argnames=("strict", "variant"))
def _count_kernel(y, draws, *, strict: bool, variant: str | None = None):
    """``(#{draws <= y}, #{draws < y}, all finite)``: row-block loop on CPU (where a
    broadcast compare under XLA ran 10-30x slower), broadcast elsewhere (on an H100 at
    [1000, 1e5]: 0.31 ms against 1.72 ms for the loop). ``variant`` forces one."""
    if variant == "rows":
        return _count_rows(y, draws, strict)
    if variant == "broadcast":
        return _count_broadcast(y, draws, strict)
    return jax.lax.platform_dependent(
        y,
        draws,
        cpu=lambda a, b: _count_rows(a, b, strict),
        default=lambda a, b: _count_broadcast(a, b, strict),
    )


@_v.validated
def pit_cdf(y_true: ArrayLike, cdf: Callable[[jax.Array], ArrayLike]) -> jax.Array:
    """PIT values from a vectorized CDF callable.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Observed values.
    cdf : callable
        ``cdf(y) -> [N]``, evaluated elementwise, e.g. the ``.cdf`` method of a batched
        NumPyro distribution (``dist.Gamma(a, b).cdf``) or a ``scipy.stats`` frozen
        distribution's ``cdf``.

    Returns
    -------
    Array, shape [N]

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from jax.scipy.stats import norm
    >>> from bayescal.regression import pit_cdf
    >>> pit_cdf(jnp.array([0.0]), lambda y: norm.cdf(y, 0.0, 2.0)).tolist()
    [0.5]
    """
    if not callable(cdf):
        raise TypeError(
            f"cdf must be a callable returning CDF values (e.g. dist.cdf); got "
            f"{type(cdf).__name__}."
        )
    y = _v.as_float_array(y_true, "y_true")
    _v.check_nonempty(y, "y_true")
    _v.check_finite(y, "y_true")
    u = _bucketed_cdf(cdf, y)
    if u is None:
        u = _cdf_program(cdf, y)
    if u is None:
        u = _v.as_float_array(cdf(y), "cdf(y_true)")
    if tuple(u.shape) != tuple(y.shape):
        raise ValueError(
            f"cdf(y_true) returned shape {tuple(u.shape)} but y_true has shape "
            f"{tuple(y.shape)}; the callable must be vectorized elementwise (one CDF "
            "value per observation)."
        )
    _v.check_in_unit_interval(u, "cdf(y_true)", "CDF values")
    return u


def _bucketed_cdf(cdf: Callable[[jax.Array], ArrayLike], y: jax.Array) -> jax.Array | None:
    """``cdf(y)`` evaluated on ``y`` padded to its bucket, then sliced back; or None.

    The callable is user code, often eager ``jnp`` operations that compile once per
    input shape: evaluated on the bucket's length (the last observation repeated,
    valid for an elementwise CDF), a new ``N`` in a used bucket compiles nothing.
    Only for 1-D ``y`` that is ``validation.paddable``; a callable that cannot take the padded input
    (e.g. a batched distribution with ``N`` parameters) raises or returns another
    shape, and is then called on ``y`` itself (None here).
    """
    n = y.shape[0] if y.ndim == 1 else 0
    if not (0 < n <= _v.BUCKET_MAX and _v.paddable(y)):
        return None
    size = bucket_size(n)
    padded = jax.device_put(pad_axis(np.asarray(y), size))
    try:
        u = _cdf_program(cdf, padded, numpy_code_only=True)
        if u is None:  # NumPy code (scipy.stats): called on the padded values
            u = _v.as_float_array(cdf(padded), "cdf(y_true)")
    except Exception:  # not elementwise on the padded input: the plain call decides
        return None
    if tuple(u.shape) != (size,) or not _v.is_concrete(u):
        return None
    return _v.slice_without_program(u, slice(0, n))


#: Compiled CDF programs by the text of the callable's jaxpr (most recent last).
_CDF_PROGRAMS: dict[str, Callable] = {}
_CDF_PROGRAMS_MAX = 32


def _cdf_program(
    cdf: Callable[[jax.Array], ArrayLike], y: jax.Array, *, numpy_code_only: bool = False
) -> jax.Array | None:
    """``cdf(y)`` as ONE compiled program, or None where ``cdf`` cannot be traced.

    Called eagerly, a CDF written with ``jnp`` runs one small program per operation,
    each compiled on its first use at a shape (13 for ``jax.scipy.stats.norm.cdf``
    with array parameters, ~0.3 s). Here the callable is traced to a jaxpr; arrays it
    closes over (the predictive's parameters) become the jaxpr's constants, passed to
    the program as arguments, and the program is kept under the jaxpr's text. So a
    new callable of the same form (a new ``lambda`` over new parameters of the same
    shapes) reuses the program: nothing is compiled again. Callables that do not
    trace (a ``scipy.stats`` distribution's ``cdf``: NumPy code) give None and are
    called as they are. Inside ``jit`` or ``vmap`` the caller's trace does this job.

    ``numpy_code_only``: return None only for a callable that is not traceable because
    it converts its input to NumPy; raise the tracing error otherwise (on the padded
    input of a bucket, an error of shapes: the callable closes over ``N`` values).
    """
    if not _v.is_concrete(y):
        return None
    try:
        closed = jax.make_jaxpr(cdf)(y)
    except jax.errors.TracerArrayConversionError:  # NumPy code (scipy.stats)
        return None
    except Exception:  # not traceable: a data-dependent branch, shapes, ...
        if numpy_code_only:
            raise
        return None
    if len(closed.out_avals) != 1:
        return None
    from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

    text = str(closed.jaxpr)
    program = _CDF_PROGRAMS.pop(text, None)
    if program is None:
        jaxpr = closed.jaxpr

        @jax.jit
        def program(consts, values):
            return jaxpr_as_fun(ClosedJaxpr(jaxpr, consts))(values)[0]

    _CDF_PROGRAMS[text] = program  # the most recently used last
    while len(_CDF_PROGRAMS) > _CDF_PROGRAMS_MAX:
        _CDF_PROGRAMS.pop(next(iter(_CDF_PROGRAMS)))
    return _v.as_float_array(program(list(closed.consts), y), "cdf(y_true)")


@_v.validated(fuse=True, bucket={"y_true": -1, "quantiles": -1}, per_observation=-1)
def pit_quantiles(
    y_true: ArrayLike, quantiles: ArrayLike, levels: ArrayLike, *, tails: str = "clamp"
) -> jax.Array:
    r"""PIT values from predicted quantiles, by monotone linear interpolation.

    Between two predicted quantiles :math:`q_j \le y < q_{j+1}` the PIT is
    interpolated linearly between :math:`\tau_j` and :math:`\tau_{j+1}`. Outside the
    predicted range the CDF is unknown: ``tails="clamp"`` (default) returns the outer
    level (:math:`\tau_1` below :math:`q_1`, :math:`\tau_L` above :math:`q_L`);
    ``tails="linear"`` extends the first/last segment linearly and clips to [0, 1]
    (a first or last segment of zero width extends vertically: 0 below :math:`q_1`,
    1 above :math:`q_L`). The predictive CDF is taken right-continuous: where
    quantiles tie, :math:`y` equal to the tied value gets the highest tied level.
    Include levels 0 and 1 (with finite support bounds) to remove the ambiguity.

    Parameters
    ----------
    y_true : array_like, shape [N]
    quantiles : array_like, shape [L, N]
        Predicted quantiles, level axis first, nondecreasing along it.
    levels : array_like, shape [L]
        Strictly increasing levels in [0, 1], ``L >= 2``.
    tails : {"clamp", "linear"}

    Returns
    -------
    Array, shape [N]

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.regression import pit_quantiles
    >>> q = jnp.array([[0.0], [1.0], [3.0]])
    >>> round(float(pit_quantiles(jnp.array([2.0]), q, jnp.array([0.1, 0.5, 0.9]))[0]), 4)
    0.7
    """
    _v.check_choice(tails, "tails", ("clamp", "linear"))
    y = _v.as_float_array(y_true, "y_true")
    q = _v.as_float_array(quantiles, "quantiles")
    lv = _v.as_float_array(levels, "levels")
    _v.check_ndim(y, "y_true", 1)
    _v.check_ndim(q, "quantiles", 2)
    _v.check_nonempty(y, "y_true")
    _v.check_levels(lv, "levels")
    if lv.shape[0] < 2:
        raise ValueError(
            f"levels needs at least 2 values to interpolate; got {lv.shape[0]}."
        )
    if q.shape != (lv.shape[0], y.shape[0]):
        raise ValueError(
            f"quantiles has shape {tuple(q.shape)}; expected [L, N] = "
            f"({lv.shape[0]}, {y.shape[0]}) from levels and y_true (level axis first)."
        )
    dtype = _v.result_dtype(y, q, lv)
    y, q, lv = y.astype(dtype), q.astype(dtype), lv.astype(dtype)
    _v.check_finite(y, "y_true")
    _v.check_finite(q, "quantiles")
    _v.check_nondecreasing(q, "quantiles", "the level axis, for every observation")
    return _pit_quantiles_kernel(y, q, lv, tails == "linear")


@functools.partial(jax.jit, static_argnums=3)
def _pit_quantiles_kernel(y, q, levels, linear_tails):
    """The documented rule, segment by segment.

    ``above = #{j: q_j <= y}`` (the predictive CDF is right-continuous). Inside the
    predicted range (``1 <= above <= L - 1``) ``q_{above-1} <= y < q_above``: that
    segment has positive width and is interpolated. Below ``q_1`` (``above = 0``) and
    at or above ``q_L`` (``above = L``) the tail rule applies: the outer level for
    ``"clamp"``; for ``"linear"`` the first (last) segment extended, where a segment of
    zero width extends vertically (0 below, 1 above). Choosing the segment by
    ``above`` and never by clipping keeps a zero-width outer segment from being read
    as the interpolation of a point inside it.
    """
    num = q.shape[0]
    above = jnp.sum(q <= y, axis=0)  # number of quantiles at or below y
    cols = jnp.arange(y.shape[0])
    below_range = above == 0
    above_range = above == num
    # Interior: the segment [q_j, q_{j+1}) that holds y, of positive width.
    j = jnp.clip(above - 1, 0, num - 2)
    q0, q1 = q[j, cols], q[j + 1, cols]
    t0, t1 = levels[j], levels[j + 1]
    width = q1 - q0
    safe = jnp.where(width > 0, width, 1)
    frac = jnp.clip((y - q0) / safe, 0.0, 1.0)
    inside = t0 + frac * (t1 - t0)
    if not linear_tails:
        u = jnp.where(below_range, levels[0], inside)
        return jnp.where(above_range, levels[-1], u)
    # Linear tails: the first / last segment extended, clipped to [0, 1].
    w_lo = q[1] - q[0]
    lo = levels[0] + (y - q[0]) / jnp.where(w_lo > 0, w_lo, 1) * (levels[1] - levels[0])
    lo = jnp.where(w_lo > 0, lo, 0.0)
    w_hi = q[-1] - q[-2]
    hi = levels[-1] + (y - q[-1]) / jnp.where(w_hi > 0, w_hi, 1) * (levels[-1] - levels[-2])
    hi = jnp.where((w_hi > 0) | (y == q[-1]), hi, 1.0)
    u = jnp.where(below_range, lo, inside)
    u = jnp.where(above_range, hi, u)
    return jnp.clip(u, 0.0, 1.0)
