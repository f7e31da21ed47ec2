"""Shared pieces of the squared kernel calibration error (private).

Widmann, Lindsten & Zachariah (2019, 2021): the SKCE is the expectation of a
symmetric pair function ``h`` over two independent observations; its unbiased
quadratic estimator is the U-statistic over all pairs ``i != j``, its linear estimator
the mean of ``h`` over the disjoint pairs ``(0, 1), (2, 3), ...``. Here: the median
heuristic, the blocked pair sum (memory ``O(N * block)``), the linear pairs and the
normal p-value of the linear estimator. Observations carry weights ``w``: 1 for a real
observation and 0 for a bucket's padding (which comes last).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfc

#: Values of one ``[block, N, ...]`` intermediate of the pair sums (16 MiB of float32).
BLOCK_VALUES = 1 << 22
#: The median heuristic looks at the pairs of at most this many observations.
MEDIAN_POINTS = 512


def block_rows(n: int, width: int = 1) -> int:
    """Rows per block of a ``[block, n, width]`` pair computation (>= 1, <= n)."""
    return int(max(1, min(n, BLOCK_VALUES // max(1, n * width))))


#: The most pairs ``N (N - 1) / 2`` an O(N^2) estimator takes on: N = 632,456 (about
#: 4 minutes of a 2-core CPU at the regression SKCE's ~8e8 pairs a second, measured at
#: N = 10,240). Above, the call is refused before it starts: at N = 4.2 million the
#: pair sums asked XLA for 69-252 GB or ran past 300 s without a word (issue 37).
MAX_PAIRS = 2 * 10**11


def check_pair_budget(length: int | None, name: str, what: str) -> None:
    """Refuse ``length`` observations when their ``N (N - 1) / 2`` pairs exceed
    :data:`MAX_PAIRS`, saying the cost and how to ask for less (``length`` None: a bad
    input the other checks refuse)."""
    if length is None:
        return
    pairs = length * (length - 1) // 2
    if pairs <= MAX_PAIRS:
        return
    max_n = int((1 + (1 + 8 * MAX_PAIRS) ** 0.5) / 2)
    raise ValueError(
        f"{name} holds {length:,} observations: {what} sums the kernel over all "
        f"{pairs:.2g} pairs (O(N^2): about {pairs / 8e8 / 3600:.1f} hours of a 2-core CPU "
        f"at ~8e8 pairs a second, and more memory than most machines have). Pass "
        f"estimator='linear' (O(N): the same expectation, a larger variance), or a "
        f"random subsample of at most {max_n:,} observations."
    )


def check_bandwidth(value: Any, name: str = "bandwidth") -> float | None:
    """``None`` (the median heuristic) or a positive finite float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(
            f"{name} must be None (the median heuristic) or a positive float; got "
            f"{type(value).__name__} {value!r}."
        )
    if not (np.isfinite(float(value)) and float(value) > 0):
        raise ValueError(
            f"{name} must be None (the median heuristic) or a positive finite float; "
            f"got {value!r}."
        )
    return float(value)


def check_estimator(value: Any) -> str:
    if value not in ("unbiased", "linear"):
        raise ValueError(
            f"estimator must be 'unbiased' (the quadratic U-statistic) or 'linear' (the "
            f"linear-time estimator); got {value!r}."
        )
    return value


def check_min_length(length: int, name: str, minimum: int, what: str) -> None:
    if length < minimum:
        raise ValueError(
            f"{name} has {length} observations; {what} needs at least {minimum}. "
            "Pass more observations."
        )


def shape_of(x: Any) -> tuple[int, ...] | None:
    """The shape of an array-like argument, or None where it has none (ragged: the
    input checks report it)."""
    shape = getattr(x, "shape", None)
    if shape is None:
        try:
            shape = np.shape(x)
        except Exception:
            return None
    return tuple(shape)


def real_count(w: jax.Array) -> jax.Array:
    """The number of real observations (int32): the padding has weight 0."""
    return jnp.sum(w > 0).astype(jnp.int32)


def middle_order_statistics(values: jax.Array, count: jax.Array) -> jax.Array:
    """``[2]``: the ``(count - 1) // 2``-th and ``count // 2``-th smallest (0-based) of
    the nonnegative ``values`` (+inf and NaN largest, as ``jnp.sort`` puts them), the
    pair whose mean ``np.median`` of the ``count`` smallest takes.

    Exact, without a sort: nonnegative floats order as their bit patterns read as
    signed integers, so the first is found by bisection on those integers, each step
    one count of the values at or below the midpoint (32 counts in float32, 64 in
    float64), and the second is the first again or the smallest value above it. The
    median heuristic of the kernel tests over 512 points (130,816 pairs): 68 -> 14 ms
    a call on the kernel path at N = 1e4, and 16 -> 4.4 s under ``vmap`` over 1,000
    data sets (2-core CPU machine).
    """
    itype = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[values.dtype.itemsize]
    top = jnp.asarray(jnp.iinfo(itype).max, itype)
    bits = jax.lax.bitcast_convert_type(values, itype)
    # -0.0 as 0.0 and every NaN last (on the bits: XLA's CPU flushes subnormals in
    # float comparisons)
    bits = jnp.where(bits == jnp.iinfo(itype).min, 0, jnp.where(jnp.isnan(values), top, bits))
    count = jnp.asarray(count, itype)
    rank = (count - 1) // 2

    def step(_, bounds):  # the answer's bits lie in (lo, hi]
        lo, hi = bounds
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)  # floor((lo + hi) / 2), no overflow
        below = jnp.sum(bits <= mid) > rank
        return jnp.where(below, lo, mid), jnp.where(below, mid, hi)

    nbits = 8 * values.dtype.itemsize
    _, first = jax.lax.fori_loop(0, nbits, step, (jnp.asarray(-1, itype), top))
    same = (count // 2 == rank) | (jnp.sum(bits <= first) > rank + 1)
    second = jnp.where(same, first, jnp.min(jnp.where(bits > first, bits, top)))
    return jax.lax.bitcast_convert_type(jnp.stack([first, second]), values.dtype)


def median_distance(x: jax.Array, n: jax.Array, dist: Callable[..., jax.Array]) -> jax.Array:
    """The median heuristic: the median of ``dist(x_i, x_j)`` over pairs ``i < j``.

    ``x``: a pytree of per-observation arrays (observations first), the first ``n`` real.
    Up to :data:`MEDIAN_POINTS` observations all pairs; beyond, the pairs of the
    observations at ``floor(k n / M)``, ``k < M`` (spread over the data). The median
    is ``np.median``'s (the mean of the middle two for an even count). When it is 0
    (more than half the pairs at distance 0) the mean distance is used, and 1 when
    that is 0 too.
    """
    size = jax.tree_util.tree_leaves(x)[0].shape[0]
    points = min(size, MEDIAN_POINTS)
    m = jnp.minimum(n, points)
    k = jnp.arange(points)
    idx = jnp.minimum((k * n) // jnp.maximum(m, 1), size - 1)
    sub = jax.tree_util.tree_map(lambda a: a[idx], x)
    rows = jax.tree_util.tree_map(lambda a: a[:, None], sub)
    cols = jax.tree_util.tree_map(lambda a: a[None, :], sub)
    d = dist(rows, cols)
    valid = (k[:, None] < k[None, :]) & (k[None, :] < m)
    count = (m * (m - 1)) // 2
    if points > 1:  # the upper triangle only: the same values, half the work
        iu, ju = np.triu_indices(points, 1)
        s = jnp.where(ju < m, d[iu, ju], jnp.inf)
    else:
        s = jnp.where(valid, d, jnp.inf).ravel()
    c = jnp.maximum(count, 1)
    med = jnp.mean(middle_order_statistics(s, c))
    # each distance divided before the sum: no overflow of the sum near the dtype's max
    mean = jnp.sum(jnp.where(valid, d / jnp.maximum(count, 1).astype(d.dtype), 0))
    out = jnp.where(med > 0, med, jnp.where(mean > 0, mean, jnp.ones_like(med)))
    return jnp.where(count > 0, out, jnp.nan).astype(d.dtype)


#: Leaves of at most this many values per observation are sliced for the tiles of
#: :func:`upper_tiles` from one stacked array (multiclass bootstrap at N = 10,240, C =
#: 5 with the weights and 20 counts, 21 columns: 0.054 s warm stacked, 0.071 s not);
#: wider ones on their own (consistency resampling's 105 columns of residuals: 0.075 s
#: on their own, 0.11 s stacked; 2-core CPU machine).
STACK_MAX_WIDTH = 32
#: Side of the square tiles of :func:`pair_sum` (fastest of 256 ... 2048 at
#: N = 1e4 on the 2-core CPU machines).
PAIR_TILE = 512


def upper_tiles(
    fn: Callable[..., jax.Array], x: Any, tile: int = PAIR_TILE
) -> jax.Array:
    """``sum`` over the square tiles of the upper triangle of the pairs of ``x``'s
    observations of ``fn(rows, cols, upper)``: ``rows`` and ``cols`` the pytrees of the
    tiles' observations (leaves ``[T, ...]``), ``upper [T, T]`` whether a pair is
    ``i < j`` (False below the diagonal of the tiles on it, and for the padding's
    repeats of the last observation beyond ``N``: give it weight 0 in ``x``).
    """
    leaves, tree = jax.tree_util.tree_flatten(x)
    size = leaves[0].shape[0]
    tile = max(1, min(size, tile))
    ntiles = -(-size // tile)
    pad = ntiles * tile - size
    # the narrow leaves of one dtype as the rows of one [K, N] array: a tile is one
    # slice of it, not one per leaf (fewer loops for XLA to compile: 0.02 s of 0.13 s),
    # and a column of a narrow leaf is a contiguous row (the multiclass tiles' per-class
    # terms). Wide leaves (STACK_MAX_WIDTH; matrix operands of the tiles' products)
    # keep their [N, ...] layout: transposing them for every tile ran slower.
    groups: dict[Any, list[int]] = {}
    wide = []
    for i, a in enumerate(leaves):
        if math.prod(a.shape[1:]) <= STACK_MAX_WIDTH:
            groups.setdefault(jnp.dtype(a.dtype), []).append(i)
        else:
            wide.append(i)

    def padded(a, axis):
        if not pad:
            return a
        last = jax.lax.slice_in_dim(a, size - 1, size, axis=axis)
        return jnp.concatenate([a, jnp.repeat(last, pad, axis=axis)], axis=axis)

    stacks = [
        padded(jnp.concatenate([leaves[i].reshape(size, -1).T for i in members]), 1)
        for members in groups.values()
    ]
    wides = [padded(leaves[i], 0) for i in wide]
    ti, tj = (jnp.asarray(t, jnp.int32) for t in np.triu_indices(ntiles))
    offsets = jnp.arange(tile)

    def sliced(start):
        out: list[Any] = [None] * len(leaves)
        for members, rows in zip(groups.values(), stacks, strict=True):
            part = jax.lax.dynamic_slice_in_dim(rows, start, tile, axis=1)
            at = 0
            for i in members:
                width = math.prod(leaves[i].shape[1:])
                out[i] = part[at : at + width].T.reshape((tile,) + leaves[i].shape[1:])
                at += width
        for i, a in zip(wide, wides, strict=True):
            out[i] = jax.lax.dynamic_slice_in_dim(a, start, tile)
        return jax.tree_util.tree_unflatten(tree, out)

    def one(k):
        i0, j0 = ti[k] * tile, tj[k] * tile
        rows, cols = sliced(i0), sliced(j0)
        upper = (i0 + offsets)[:, None] < (j0 + offsets)[None, :]
        upper &= (j0 + offsets)[None, :] < size
        return fn(rows, cols, upper)

    return jnp.sum(jax.lax.map(one, jnp.arange(ti.shape[0])), axis=0)


def pair_sum(hs: Callable[..., jax.Array], x: Any, w: jax.Array) -> jax.Array:
    """``sum_{i != j} w_i w_j h(x_i, x_j)`` of a pair function ``h`` given by its
    symmetric sum ``hs(a, b) = h(a, b) + h(b, a)``: ``sum_{i < j} w_i w_j hs(x_i,
    x_j)``, over the square tiles of the upper triangle only (:func:`upper_tiles`,
    memory ``O(T^2)``). Half the pairs of a sum over rows: 1.6x faster at N = 1e4
    (2-core CPU machines).

    ``hs(rows, cols)`` takes pytrees whose leaves are ``[T, 1, ...]`` and ``[1, T, ...]``
    and returns ``[T, T]``.
    """

    def tile(rows, cols, upper):
        (xr, wr), (xc, wc) = rows, cols
        weight = jnp.where(upper, wr[:, None] * wc[None, :], 0)
        xr = jax.tree_util.tree_map(lambda a: a[:, None], xr)
        xc = jax.tree_util.tree_map(lambda a: a[None, :], xc)
        # the row sums by a product with ones: XLA then compiles an elementwise loop
        # and a library call, not a loop of exponentials fused into a reduction
        # (0.08 instead of 0.13 s of compilation, run as fast; N = 10,240)
        return (weight * hs(xr, xc)) @ jnp.ones(weight.shape[1], weight.dtype)

    return jnp.sum(upper_tiles(tile, (x, w)))


# --------------------------------------------------------------------------- bootstrap test
#: Resamples of one pass of :func:`bootstrap_sums` (the ``[N, 1 + B]`` weights and
#: counts; the same at every N, so that the draws do not depend on the bucket): more
#: take several passes, each computing the pair values again.
BOOTSTRAP_BATCH = 512
METHODS = ("auto", "bootstrap", "consistency")


def check_method(value: Any) -> str:
    if value not in METHODS:
        raise ValueError(
            f"method must be 'auto' (consistency resampling where it is cheap, else the "
            f"bootstrap), 'bootstrap' (the asymptotic test: the data's pair values "
            f"resampled) or 'consistency' (consistency resampling: new targets drawn and "
            f"the kernel evaluated again for each resample); got {value!r}."
        )
    return value


def resolve_method(
    method: str, length: int | None, num_samples: int, budget: float, classes: int | None = 1
) -> str:
    """``"auto"`` as ``"consistency"`` where consistency resampling's cost,
    ``num_samples * classes * length^2`` (regression: ``classes=1``), is at most
    ``budget``, else ``"bootstrap"``; the other methods unchanged. ``classes=0``: a
    binary input (O(B N + N log N): always consistency); ``length`` or ``classes``
    None: unknown (a bad input the checks will refuse)."""
    if method != "auto":
        return method
    if length is None or classes is None or classes == 0:
        return "consistency"
    return "consistency" if num_samples * classes * length**2 <= budget else "bootstrap"


def bootstrap_batches(num_samples: int) -> tuple[int, int]:
    """``(passes, resamples per pass)`` of :func:`bootstrap_statistics`: at most
    :data:`BOOTSTRAP_BATCH` a pass, as even as can be (the last pass padded)."""
    nbatches = -(-num_samples // BOOTSTRAP_BATCH)
    return nbatches, -(-num_samples // nbatches)


def bootstrap_counts(key: jax.Array, w: jax.Array, num_samples: int) -> jax.Array:
    """``[N, B]`` counts of the real observations in ``B`` resamples with replacement
    of size ``n`` (the real count; the padding, weight 0, last, is never drawn and
    counts 0). Draw ``k`` of every resample comes from row ``k`` of one ``[N, B]``
    array of uniforms (one random-bits computation, not one per resample), whose rows
    depend on ``(key, k)`` only with JAX's partitionable threefry, so a padded bucket
    gives the unpadded call's counts."""
    size = w.shape[0]
    n = real_count(w)
    u = jax.random.uniform(key, (size, num_samples), w.dtype)
    idx = jnp.minimum(jnp.floor(u * n.astype(w.dtype)).astype(jnp.int32), n - 1)
    real = jnp.broadcast_to((w > 0).astype(w.dtype)[:, None], idx.shape)
    cols = jnp.broadcast_to(jnp.arange(num_samples)[None, :], idx.shape)
    return jnp.zeros((size, num_samples), w.dtype).at[idx, cols].add(real)


def bootstrap_counts_of_passes(key: jax.Array, w: jax.Array, num_samples: int) -> jax.Array:
    """All ``[N, B]`` counts that :func:`bootstrap_statistics` draws pass by pass (one
    array; for references and tests)."""
    nbatches, batch = bootstrap_batches(num_samples)
    parts = [bootstrap_counts(jax.random.fold_in(key, i), w, batch) for i in range(nbatches)]
    return jnp.concatenate(parts, axis=1)[:, :num_samples]


def bootstrap_sums(
    h: Callable[..., jax.Array], x: Any, v: jax.Array, tile: int = PAIR_TILE
) -> jax.Array:
    """Bilinear forms of the pair matrix ``H_ij = h(x_i, x_j)`` (``i != j``; its
    diagonal left out) with the columns of ``v`` [N, K], column 0 the weights ``w``:
    ``[3, K]`` of ``sum_{i < j}`` of ``v_ik H_ij v_jk`` (row 0), ``v_ik H_ij w_j``
    (row 1) and ``w_i H_ij v_jk`` (row 2). One pass over the tiles of the upper
    triangle (:func:`upper_tiles`), each tile's ``[T, T]`` pair values computed once
    and multiplied by ``v``'s ``[T, K]`` rows (one matrix product).

    ``h(rows, cols)`` takes pytrees whose leaves are ``[T, ...]`` (the tiles'
    observations) and returns the ``[T, T]`` values; pairs with a padded observation
    (weight 0) are set to 0 (their values may be anything finite or not).
    """

    def one(rows, cols, upper):
        (xr, vr), (xc, vc) = rows, cols
        keep = upper & (vr[:, :1] > 0) & (vc[:, 0] > 0)[None, :]
        hm = jnp.where(keep, h(xr, xc), 0)
        prod = hm @ vc  # [T, K]
        return jnp.stack(
            [jnp.sum(vr * prod, axis=0), vr.T @ prod[:, 0], vr[:, 0] @ prod]
        )

    return upper_tiles(one, (x, v), tile)


def bootstrap_statistics(
    h: Callable[..., jax.Array],
    x: Any,
    diag: jax.Array,
    w: jax.Array,
    key: jax.Array,
    num_samples: int,
    counts: jax.Array | None = None,
    tile: int = PAIR_TILE,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The unbiased SKCE, the statistic, the ``B`` bootstrap statistics and the
    p-value (:func:`bootstrap_summary`) of the asymptotic test of Widmann, Lindsten &
    Zachariah (2019, section 5; CalibrationTests.jl's ``AsymptoticSKCETest``): the
    bootstrap of degenerate U-statistics of Arcones & Gine (1992) on the data's own
    pair values ``h`` (``diag``: ``h(x_i, x_i)`` [N]).

    With ``n`` observations, ``SKCE_uq = sum_{i != j} h_ij / (n (n - 1))`` and
    ``SKCE_b = sum_{i, j} h_ij / n^2``, the statistic ``n SKCE_uq / (n - 1) - SKCE_b``
    is compared with ``T_b = sum_{a != b} h(x*_a, x*_b) / (n (n - 1)) - 2 sum_{a, k}
    h(x*_a, x_k) / n^2`` over resamples ``x*`` drawn with replacement (the resampled
    U-statistic of the kernel centred at the empirical distribution, less
    ``SKCE_b``). A resample with counts ``c`` gives ``T_b = (c' H c - sum_i c_i
    h_ii) / (n (n - 1)) - 2 c' H w / n^2``: one pass of :func:`bootstrap_sums` per
    :data:`BOOTSTRAP_BATCH` resamples, whose counts are :func:`bootstrap_counts` of
    ``fold_in(key, pass)`` (``counts`` [N, B]: these counts, drawn by the caller,
    e.g. on the host).
    """
    dt = w.dtype
    nf = real_count(w).astype(dt)
    real = (w > 0).astype(dt)
    nbatches, batch = bootstrap_batches(num_samples)
    diag = jnp.where(w > 0, diag, 0)
    if counts is not None:
        pad = nbatches * batch - num_samples
        counts = jnp.pad(counts.astype(dt), ((0, 0), (0, pad))) * real[:, None]
        counts = counts.reshape(-1, nbatches, batch)

    def one(i):
        if counts is None:
            c = bootstrap_counts(jax.random.fold_in(key, i), w, batch)  # [N, batch]
        else:
            c = counts[:, i]
        sums = bootstrap_sums(h, x, jnp.concatenate([w[:, None], c], axis=1), tile)
        return bootstrap_pass(sums, c, diag, nf)

    if nbatches == 1:  # no loop in the program
        straps, offdiag = jax.tree_util.tree_map(lambda a: a[None], one(0))
    else:
        straps, offdiag = jax.lax.map(one, jnp.arange(nbatches))
    return bootstrap_summary(offdiag[0], diag, w, nf, straps.reshape(-1)[:num_samples])


def bootstrap_pass(sums: Any, c: Any, diag: Any, nf: Any, xp: Any = jnp) -> tuple[Any, Any]:
    """The ``B`` bootstrap statistics ``T_b`` of one pass of :func:`bootstrap_sums`
    (``sums`` [3, 1 + B] of the weights and the counts ``c`` [N, B]; ``diag`` the
    ``h_ii``, 0 for the padding; ``nf`` the real count as a float), and the data's
    ``sum_{i != j} h_ij``. ``xp``: ``jax.numpy``, or ``numpy`` (the host paths)."""
    quad = 2 * sums[0, 1:] + xp.sum((c * c - c) * diag[:, None], axis=0)
    cross = sums[1, 1:] + sums[2, 1:] + c.T @ diag
    return quad / (nf * (nf - 1)) - 2 * cross / (nf * nf), 2 * sums[0, 0]


def bootstrap_summary(
    offdiag: Any, diag: Any, w: Any, nf: Any, straps: Any, xp: Any = jnp
) -> tuple[Any, Any, Any, Any]:
    """``(SKCE_uq, statistic, straps, p-value)`` from the data's ``sum_{i != j}
    h_ij``, the ``h_ii`` and the bootstrap statistics (:func:`bootstrap_pass`):
    ``p = (1 + #{T_b >= statistic}) / (1 + B)``."""
    uq = offdiag / (nf * (nf - 1))
    biased = (offdiag + xp.sum(w * diag)) / (nf * nf)
    statistic = nf / (nf - 1) * uq - biased
    p = (1 + xp.sum(straps >= statistic)) / (1 + straps.shape[0])
    return uq, statistic, straps, xp.asarray(p).astype(uq.dtype)


def bootstrap_test(*args: Any, **kwargs: Any) -> tuple[jax.Array, jax.Array]:
    """``(SKCE_uq, p-value)`` of :func:`bootstrap_statistics` (the same arguments)."""
    uq, _, _, p = bootstrap_statistics(*args, **kwargs)
    return uq, p


# --------------------------------------------------------------------------- host programs
def _apply(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


@functools.cache
def _host_jit(options: tuple[tuple[str, Any], ...]) -> Any:
    return jax.jit(_apply, static_argnums=0, compiler_options=dict(options) or None)


def host_program(
    fn: Callable[..., Any], args: tuple, policy: Callable[[int], dict[str, Any]]
) -> Any:
    """``fn(*args)`` as one compiled program, with the XLA options ``policy(size)``
    (``size``: the values of the largest argument), for the host paths of the O(N^2)
    estimators: their arguments are NumPy arrays already checked, transformed and
    padded to a bucket on the host, so the program holds the pair sums and little
    else. (The validated programs also hold the value checks, the per-observation
    terms and the final arithmetic: ~40 small loops for XLA to compile, 0.1 s of
    the bootstrap test's 0.19 s at N = 10,240.) ``fn``: a module-level function (a
    static argument: one program per function and shapes)."""
    from bayescal._src import xla_options

    def run(options: dict[str, Any]) -> Any:
        return _host_jit(tuple(sorted(options.items())))(fn, *args)

    return xla_options.with_options(xla_options.largest(args), run, policy)


def linear_terms(h: Callable[..., Any], x: Any, w: Any):
    """``h`` on the pairs ``(2i, 2i+1)`` and their validity (both observations real);
    JAX or NumPy arrays (the host twins)."""
    size = jax.tree_util.tree_leaves(x)[0].shape[0]
    m = size // 2
    even = jax.tree_util.tree_map(lambda a: a[0 : 2 * m : 2], x)
    odd = jax.tree_util.tree_map(lambda a: a[1 : 2 * m : 2], x)
    valid = (w[0 : 2 * m : 2] > 0) & (w[1 : 2 * m : 2] > 0)
    return h(even, odd), valid


def linear_estimate(terms: jax.Array, valid: jax.Array) -> jax.Array:
    count = jnp.sum(valid).astype(terms.dtype)
    return jnp.sum(jnp.where(valid, terms, 0)) / count


def linear_test(terms: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The linear estimate and its one-sided p-value from the normal approximation.

    Widmann et al. (2019), Lemma 3 / Corollary: ``sqrt(m) (SKCE_ul - SKCE) / s`` is
    asymptotically standard normal, ``s`` the standard deviation of the ``m`` terms;
    under calibration SKCE = 0, so ``p = 1 - Phi(sqrt(m) SKCE_ul / s_hat)`` with
    ``s_hat`` the sample standard deviation (ddof 1).
    """
    m = jnp.sum(valid).astype(terms.dtype)
    mean = jnp.sum(jnp.where(valid, terms, 0)) / m
    var = jnp.sum(jnp.where(valid, (terms - mean) ** 2, 0)) / (m - 1)
    z = jnp.sqrt(m) * mean / jnp.sqrt(var)
    p = 0.5 * erfc(z / jnp.sqrt(jnp.asarray(2.0, terms.dtype)))
    # every term equal (e.g. all 0): no evidence against calibration unless mean > 0
    p = jnp.where(var > 0, p, jnp.where(mean > 0, 0.0, 1.0).astype(terms.dtype))
    return mean, p.astype(terms.dtype)


# --------------------------------------------------------------------------- 1-D exact
def sort_order(x: jax.Array, w: jax.Array) -> jax.Array:
    """The indices sorting ``x`` ascending, the padding (weight 0) last."""
    return jnp.argsort(jnp.where(w > 0, x, jnp.inf))


def laplace_cross(xs: jax.Array, ws: jax.Array, rs: jax.Array, scale: jax.Array) -> jax.Array:
    """``sum_{i != j} exp(-scale |x_i - x_j|) r_i r_j`` per column of ``rs`` [N, ...],
    exactly in ``O(N log N)``, for ``xs`` sorted ascending (``ws`` its weights, the
    padding last, its ``rs`` 0).

    With ``c_i = sum_{j < i} exp(-scale (x_i - x_j)) r_j``, the sum is
    ``2 sum_i r_i c_i``, and ``c`` obeys ``c_0 = 0``,
    ``c_i = f_i (c_{i-1} + r_{i-1})``, ``f_i = exp(-scale (x_i - x_{i-1})) <= 1``: a
    linear recurrence (every factor at most 1, so stable), run by ``lax.scan`` (on
    CPU it compiles in a tenth of the time of ``lax.associative_scan`` and runs as
    fast). Ties have factor 1 exactly; the padding gets factor 1 (its ``r`` is 0: it
    adds nothing).
    """
    dx = jnp.where(ws[1:] > 0, xs[1:] - xs[:-1], 0)
    f = jnp.exp(-scale * dx).reshape((-1,) + (1,) * (rs.ndim - 1))

    def step(c, inp):
        fi, prev = inp
        c = fi * (c + prev)
        return c, c

    _, c = jax.lax.scan(step, jnp.zeros_like(rs[0]), (f, rs[:-1]))
    return 2 * jnp.sum(rs[1:] * c, axis=0)


def test_draws(
    estimator: str, key: Any, num_samples: Any, length: int | None, name: str
) -> tuple[jax.Array, int]:
    """``(key, number of resamples)`` of a kernel calibration test, checked: the
    linear test needs two pairs and no key (a fixed, unused one); the unbiased test
    two observations, a key and ``num_samples``. ``length``: the observations (None
    when the input checks will report a bad shape), named ``name`` in messages."""
    from bayescal._src import validation as _v
    from bayescal._src.resampling import as_key

    if estimator == "linear":
        if length is not None:
            check_min_length(length, name, 4, "the linear test (two pairs)")
        # the key is not used; built on the host (jax.random.key compiles 2 programs)
        return as_key(0), 1
    if length is not None:
        check_min_length(length, name, 2, "the kernel calibration test")
    if key is None:
        raise TypeError(
            "key is required with estimator='unbiased' (the consistency resamples "
            "are random): pass a PRNG key or an int seed, e.g. key=0."
        )
    return as_key(key), _v.check_positive_int(num_samples, "num_samples")
