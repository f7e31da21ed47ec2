"""Weighted isotonic regression (pool adjacent violators), jittable and vmappable.

With one device the solver runs on the host through ``jax.pure_callback``: scipy's C++
PAV (:func:`_pav_row`, bit for bit ``scipy.optimize.isotonic_regression``, loaded without
the 0.3 s import of ``scipy.optimize``), which ran at about 1.3x scipy on its own at
n = 1e6, where a pure XLA ``while_loop`` PAV ran 2.8-7.6x slower and is fragile.

With several devices (a mesh, or several processes) a host callback is not an option:
on a sharded input XLA gathers the operand to device 0 and, on CPU meshes, the other
devices' threads wait in an all-reduce rendezvous that aborts the process after 40 s
(N = 32,768 on 8 devices), and its result has a ``{maximal device=0}`` sharding. There,
and on accelerators (no device -> host -> device round trip; on an H200 it beats
scipy's PAV on a CPU from n ~ 1e6: 4.4 ms against 16 ms there, docs/gpu.md), the fit
runs in XLA (:func:`device_isotonic`): chunks of 16 or 32 observations solved at once,
then a divide-and-conquer PAV that merges solved neighbours into chunks twice as long,
level by level (:func:`_device_pav_row`), exact up to rounding (block means from
compensated prefix sums). A custom JVP gives exact
O(n) derivatives: the fit is constant on blocks, each block value being the weighted
mean of its observations, so

    d fit_i = sum_{j in B(i)} (w_j dy_j + dw_j (y_j - fit_j)) / sum_{j in B(i)} w_j.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
import sys
import threading
from collections.abc import Callable
from importlib.machinery import EXTENSION_SUFFIXES

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.binning import two_sum
from bayescal._src.sorting import by_platform, gather_all, several_devices

__all__ = ["device_isotonic", "isotonic_kernel"]


_PAVA_LOCK = threading.Lock()
_PAVA: list = []  # scipy's C++ PAV, once loaded


def _scipy_pava() -> Callable:
    """scipy's C++ PAV, the routine behind ``scipy.optimize.isotonic_regression``.

    Loaded from its extension file (``scipy/optimize/_pava_pybind``, scipy >= 1.12): the
    extension takes under 1 ms to load, where importing ``scipy.optimize`` took 0.28-0.33
    s of a first fit (2-core CPU machine, 2026-11-29). Registered under its own name,
    so a later ``import scipy.optimize`` uses the same module; another layout of scipy
    falls back on that import.
    """
    if _PAVA:
        return _PAVA[0]
    with _PAVA_LOCK:  # the first calls may come from several XLA callback threads
        if not _PAVA:
            import scipy

            name = "scipy.optimize._pava_pybind"
            module = sys.modules.get(name)
            folder = os.path.join(os.path.dirname(scipy.__file__), "optimize")
            paths = [os.path.join(folder, "_pava_pybind" + s) for s in EXTENSION_SUFFIXES]
            found = [path for path in paths if os.path.exists(path)]
            if module is None and found:
                spec = importlib.util.spec_from_file_location(name, found[0])
                if spec is not None and spec.loader is not None:
                    module = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(module)
                    sys.modules[name] = module
            if module is None:
                module = importlib.import_module(name)
            _PAVA.append(module.pava)
    return _PAVA[0]


def _pav_row(y: np.ndarray, w: np.ndarray, increasing: bool = True) -> np.ndarray:
    """The weighted PAV fit of one row, in float64: bit for bit
    ``scipy.optimize.isotonic_regression(y, weights=w, increasing=increasing).x``.

    NaN where a weight is not positive (scipy raises, which a host callback must not:
    the public functions reject such weights, or turn their results into NaN under jit).
    """
    order = slice(None) if increasing else slice(None, None, -1)
    x = np.array(y[order], dtype=np.float64, order="C")  # copies: the PAV works in place
    wx = np.array(w[order], dtype=np.float64, order="C")
    if not np.all(wx > 0):
        return np.full(x.shape, np.nan)
    if x.size:
        x = _scipy_pava()(x, wx, np.full(x.size + 1, -1, np.intp))[0]
    return x[order]


def _host_pav(y: np.ndarray, w: np.ndarray, increasing: bool) -> np.ndarray:
    y = np.asarray(y)
    w = np.broadcast_to(np.asarray(w), y.shape)
    rows = (math.prod(y.shape[:-1]), y.shape[-1])  # not -1: rows may be empty
    flat_y, flat_w = y.reshape(rows), w.reshape(rows)
    out = np.empty(rows, dtype=y.dtype)
    for i in range(rows[0]):
        out[i] = _pav_row(flat_y[i], flat_w[i], increasing)
    return out.reshape(y.shape)


# One callable per direction: a fresh functools.partial per call made every eager call
# a cache miss (a ~17 ms recompilation of the callback).
_HOST_PAV = {inc: functools.partial(_host_pav, increasing=inc) for inc in (True, False)}


# ------------------------------------------------------------------ PAV in XLA
def _dd_add(a: tuple, b: tuple) -> tuple:
    """Add two compensated sums ``(s, c)`` (value ``s + c``) with TwoSum."""
    s, e = two_sum(a[0], b[0])
    return s, a[1] + b[1] + e


def _dd_prefix(x: jax.Array, base: int = 16) -> tuple[jax.Array, jax.Array]:
    """Inclusive prefix sums along axis 0 of ``x [n, ...]`` as compensated pairs.

    Rows of ``base`` values are summed by one ``lax.scan`` over their ``base``
    columns (all rows at once), then the row totals (compensated pairs) are
    prefix-summed the same way, recursively: ``base * ceil(log_base(n))`` sequential
    steps. Every addition is a TwoSum, so ``hi + lo`` is the exact prefix sum up to
    ~``n eps^2`` of the magnitudes (float32: ~1e-9 relative at n = 1e6).

    On an H200 at n = 1e6 the PAV around it took 7.3 ms, against 23.6 ms with two
    scans of ``sqrt(n)`` steps (the loop steps, ~3 us each there, were the cost) and
    6.7 ms with ``jax.lax.associative_scan`` and the same combiner, which compiled
    0.4 s longer; at 1e8 these two were equal (2026-11-30).
    """
    return _dd_prefix_pairs((x, jnp.zeros_like(x)), base)


def _dd_prefix_pairs(pair: tuple, base: int) -> tuple[jax.Array, jax.Array]:
    hi, lo = pair
    n = hi.shape[0]
    m = -(-n // base)
    k = base if m > 1 else n

    def cols(v):
        v = jnp.concatenate([v, jnp.zeros((m * k - n,) + v.shape[1:], v.dtype)])
        return jnp.swapaxes(v.reshape((m, k) + v.shape[1:]), 0, 1)  # [k, m, ...]

    zero = jnp.zeros((m,) + hi.shape[1:], hi.dtype)

    def column(carry, v):
        carry = _dd_add(carry, v)
        return carry, carry

    totals, (s, c) = jax.lax.scan(column, (zero, zero), (cols(hi), cols(lo)))
    if m > 1:  # the offset of each row: the exclusive prefix sum of the row totals
        off_hi, off_lo = (
            jnp.concatenate([jnp.zeros_like(v[:1]), v[:-1]])
            for v in _dd_prefix_pairs(totals, base)
        )
        s, e = two_sum(s, off_hi[None])
        c = c + off_lo[None] + e
    shape = (m * k,) + hi.shape[1:]
    return jnp.swapaxes(s, 0, 1).reshape(shape)[:n], jnp.swapaxes(c, 0, 1).reshape(shape)[:n]


#: Levels solved at once by :func:`_solve_chunks` before the merges, on CPU meshes
#: (chunks of 16 observations) and on accelerators (32). On the CPU at n = 1e6 the
#: mesh formulation took 809 against 952 ms with none solved (the accelerator one, 3
#: levels: 469 against 752 ms), and compiled in 1.1 against 1.6 s at n = 32,768. H200,
#: 2026-11-30: 4.4 ms at n = 1e6 and 110 ms at 1e8 with 5 levels, 4.8 and 124 ms with
#: 4, 7.2 ms at 1e6 with none.
SOLVED = {False: 4, True: 5}


def _take(x: jax.Array, i: jax.Array) -> jax.Array:
    return x.at[i].get(mode="promise_in_bounds")  # indices are clipped by the callers


#: Tiers of merge levels, ``(first level, ways of the searches)``, the first one
#: starting after the :data:`SOLVED` levels: each tier is one loop body (compiled
#: once) with one slot per pair of chunks at its first level (n / 2^(l0 + 1)), so
#: later levels of a tier waste the slots of pairs they no longer have. CPU meshes:
#: one tier of binary searches, the least work and the smallest program.
#: Accelerators: wider searches in shorter tiers (a loop round costs a GPU more than
#: its probes), keeping slots x ways^2 below ~n / 2, in loops of fixed trip counts
#: (those of the tier's last level): a loop whose trip count XLA knows runs without a
#: round trip to the host per round. On an H200 at n = 1e6: 32.7 ms with the trip
#: counts of each level, 23.6 ms with fixed ones (both before :data:`SOLVED`, with
#: prefix sums of sqrt(n) sequential steps).
_NARROW = ((0, 2),)
_WIDE = ((0, 4), (8, 8), (12, 16), (16, 32))


def _device_pav_row(
    y: jax.Array,
    w: jax.Array,
    *,
    wide: bool = False,
    solved: int | None = None,
) -> jax.Array:
    """Nondecreasing weighted PAV fit of one row ``y [n]`` (weights ``w > 0``), in XLA.

    Divide and conquer on the chunks ``[c 2^l, (c + 1) 2^l)``: at level ``l`` each
    chunk holds its own PAV solution, as blocks (``first[i]``, ``last[i]``: the block of
    observation ``i``) with nondecreasing means. Merging two solved neighbours L and R
    pools at most one run of blocks, a suffix of L's and a prefix of R's (PAV never
    splits a block), found by a nested search: for a start ``j`` of L's suffix, R's
    prefix runs while the next block's mean is below the pooled mean (a monotone
    condition: R's means increase, the pooled mean decreases); L's suffix starts at
    the last block whose predecessor's mean is not above the pooled mean so found.
    Each search probes ``ways - 1`` positions a round (:func:`_search`; binary on CPU
    meshes, up to 32 ways on accelerators with ``wide``, see :data:`_WIDE`). Every
    pooled mean is a ratio of range sums of compensated prefix sums of ``w y`` and
    ``w`` (exact up to rounding, as scipy's float64 PAV); the mean of each block is
    carried from level to level. ``log2(n)`` levels of ``O(n)`` gathers each,
    ``O((l / log2(ways))^2)`` search rounds per level ``l``: no data-dependent round
    count (a round-based PAV took 1000 rounds on CORP data at n = 1e6 and O(n) on
    adversarial ones). The first ``solved`` levels (:data:`SOLVED` by default) are
    solved at once, without a loop (:func:`_solve_chunks`).
    """
    n = y.shape[-1]
    index_dtype = jnp.int32
    sums = jnp.stack([w * y, w], axis=-1)  # [n, 2]
    hi, lo = _dd_prefix(sums)
    zero = jnp.zeros((1, 2), y.dtype)
    prefix = jnp.concatenate(
        [jnp.concatenate([zero, hi]), jnp.concatenate([zero, lo])], axis=-1
    )  # [n + 1, 4]: hi(S), hi(W), lo(S), lo(W) of the sums before each position

    def mean_from(pa: jax.Array, b: jax.Array) -> jax.Array:
        """Weighted mean of ``y[a:b]`` (a < b), given ``pa = prefix[a]``."""
        pb = _take(prefix, b)
        s, e = two_sum(pb[..., :2], -pa[..., :2])
        total = s + (e + (pb[..., 2:] - pa[..., 2:]))
        return total[..., 0] / total[..., 1]

    idx = jnp.arange(n, dtype=index_dtype)
    last_index = max(n - 1, 0)

    def clip(i: jax.Array) -> jax.Array:
        return jnp.clip(i, 0, last_index)

    def level_body(
        level: jax.Array, carry: tuple, slots: int, ways: int, fixed: int = 0
    ) -> tuple:
        first, last, block_mean = carry  # block_mean[i]: the mean of i's block
        h = jnp.left_shift(jnp.asarray(1, index_dtype), level)
        ls = jnp.minimum(jnp.arange(slots, dtype=index_dtype) * (2 * h), n)
        rs = jnp.minimum(ls + h, n)  # R = [rs, re), L = [ls, rs)
        re = jnp.minimum(ls + 2 * h, n)
        rc = clip(rs)
        need = (rs < re) & (_take(block_mean, clip(rc - 1)) > _take(block_mean, rc))
        # a search over 2^level positions takes ceil((level + 1) / log2(ways)) rounds;
        # static: those of the tier's last level, a loop of known trip count
        bits = ways.bit_length() - 1
        rounds = fixed or (level + bits) // bits

        def pooled_end(j: jax.Array, rs: jax.Array, re: jax.Array) -> jax.Array:
            """End of R's prefix pooled with L's suffix from ``j`` (R = [rs, re))."""
            pj = _take(prefix, j)[..., None, :]

            def runs_past(k: jax.Array) -> jax.Array:  # monotone: True, then False
                kb = _take(last, clip(k))  # the next block starts at kb
                return (kb < re[..., None]) & (
                    _take(block_mean, clip(kb)) < mean_from(pj, kb)
                )

            _, above = _search(rs - 1, re - 1, runs_past, rounds, ways)
            return _take(last, clip(above))

        def stays(k: jax.Array) -> jax.Array:
            """L's suffix starts after ``first[k]`` (monotone: True, then False)."""
            j = _take(first, clip(k))
            bounds = (jnp.broadcast_to(x[:, None], j.shape) for x in (rs, re))
            pooled = mean_from(_take(prefix, j), pooled_end(j, *bounds))
            return ~((j > ls[:, None]) & (_take(block_mean, clip(j - 1)) > pooled))

        keep, _ = _search(ls, rs, stays, rounds, ways)
        a = _take(first, clip(keep))
        b = pooled_end(a, rs, re)
        pooled = mean_from(_take(prefix, a), b)
        a = jnp.where(need, a, n)
        b = jnp.where(need, b, n)
        pair = jnp.minimum(idx // (2 * h), slots - 1)
        ap, bp = _take(a, pair), _take(b, pair)
        inside = (idx >= ap) & (idx < bp)
        return (
            jnp.where(inside, ap, first),
            jnp.where(inside, bp, last),
            jnp.where(inside, _take(pooled, pair), block_mean),
        )

    num_levels = last_index.bit_length()
    carry = (idx, idx + 1, y)
    start = min(SOLVED[wide] if solved is None else solved, num_levels)
    if start:
        carry = _solve_chunks(prefix, n, start)
    table = _WIDE if wide else _NARROW
    at_start = [v for l0, v in table if l0 <= start] or [table[0][1]]  # its tier's ways
    tiers = [(start, at_start[-1])] * (start < num_levels)
    tiers += [t for t in table if start < t[0] < num_levels]
    ends = [t[0] for t in tiers[1:]] + [num_levels] * bool(tiers)
    for (l0, ways), l1 in zip(tiers, ends, strict=True):
        slots = -(-n // (2 << l0))
        body = functools.partial(level_body, slots=slots, ways=ways)
        if wide:
            bits = ways.bit_length() - 1
            body = functools.partial(body, fixed=(l1 + bits - 1) // bits)
        carry = jax.lax.fori_loop(l0, l1, body, carry)
    fit = carry[2]
    valid = jnp.all(w > 0)  # invalid weights (rejected or NaN upstream): NaN, as the host
    return jnp.where(valid, fit, jnp.asarray(jnp.nan, fit.dtype))


#: Range means held at once by :func:`_solve_chunks` (``chunks x c x c``, 64 MB in
#: float32): beyond it the chunks are solved in groups, one after the other.
SOLVE_GROUP = 1 << 24


def _solve_chunks(prefix: jax.Array, n: int, levels: int) -> tuple:
    """The PAV of every chunk of ``c = 2^levels`` observations at once, by the min-max
    formula ``fit_i = max_{j <= i} min_{k >= i} mean(y[j..k])`` (Barlow et al. 1972)
    over the ``c x c`` range means of each chunk: no loop (``c`` values of work per
    observation; groups of chunks in a loop where more than :data:`SOLVE_GROUP` means
    would be held at once). Returns the carry of :func:`_device_pav_row` at level
    ``levels``: ``(first, last, block_mean)``, blocks being the runs of equal fits."""
    c = 1 << levels
    m = -(-n // c)
    groups = -(-m * c * c // SOLVE_GROUP)
    rows = -(-m // groups)
    t = jnp.arange(c)
    upper = t[:, None] <= t[None, :]  # j <= k

    def solve(pos: jax.Array) -> tuple:  # pos [rows, c]: the chunks' positions
        pj = _take(prefix, jnp.minimum(pos, n))[:, :, None, :]  # the sums before j
        pk = _take(prefix, jnp.minimum(pos + 1, n))[:, None, :, :]  # ... up to k
        s, e = two_sum(pk[..., :2], -pj[..., :2])
        total = s + (e + (pk[..., 2:] - pj[..., 2:]))
        mean = total[..., 0] / total[..., 1]
        mean = jnp.where(upper & (pos < n)[:, None, :], mean, jnp.inf)
        low = jax.lax.cummin(mean, axis=2, reverse=True)  # [chunk, j, i]: min, k >= i
        fit = jnp.max(jnp.where(upper, low, -jnp.inf), axis=1)  # max over j <= i
        r = pos.shape[0]
        new = jnp.concatenate([jnp.ones((r, 1), bool), fit[:, 1:] != fit[:, :-1]], axis=1)
        end = jnp.concatenate([new[:, 1:], jnp.ones((r, 1), bool)], axis=1) | (pos == n - 1)
        first = jax.lax.cummax(jnp.where(new, pos, 0), axis=1)
        last = jax.lax.cummin(jnp.where(end, pos + 1, n), axis=1, reverse=True)
        return first, last, fit

    pos = jnp.arange(groups * rows * c, dtype=jnp.int32).reshape(groups, rows, c)
    out = solve(pos[0]) if groups == 1 else jax.lax.map(solve, pos)
    return tuple(v.reshape(-1)[:n] for v in out)


def _search(below, above, holds, rounds, ways: int):
    """Narrow ``(below, above]`` to the step of a monotone predicate, ``ways - 1``
    probes a round: ``holds(k [..., ways - 1])`` is True up to the step and False
    after; ``holds(below)`` is taken True and ``holds(above)`` False. Returns
    ``(below, above)`` with ``above - below <= 1`` after enough ``rounds`` (each
    divides the gap by ``ways``, rounded up)."""
    frac = jnp.arange(1, ways, dtype=below.dtype)

    def halve(_, c):  # ways = 2: a plain binary search (15% fewer HLO lines, ~0.1 s less
        # to trace and compile on CPU meshes than the general round with one probe)
        below, above = c
        mid = (below + above) // 2
        ok = holds(mid[..., None])[..., 0]
        go = above - below > 1
        return jnp.where(go & ok, mid, below), jnp.where(go & ~ok, mid, above)

    def round_(_, c):
        below, above = c
        gap = (above - below)[..., None]
        # below + gap * f // ways without overflowing int32 at n ~ 2^27
        probe = below[..., None] + (gap // ways) * frac + (gap % ways) * frac // ways
        inside = (probe > below[..., None]) & (probe < above[..., None])
        ok = holds(probe)
        below = jnp.max(jnp.where(inside & ok, probe, below[..., None]), axis=-1)
        above = jnp.min(jnp.where(inside & ~ok, probe, above[..., None]), axis=-1)
        return below, above

    return jax.lax.fori_loop(0, rounds, halve if ways == 2 else round_, (below, above))


def device_isotonic(y: jax.Array, w: jax.Array, increasing: bool = True) -> jax.Array:
    """PAV fit of ``y [..., n]`` with weights ``w`` (broadcast to ``y``), all in XLA.

    The kernel of :func:`isotonic_kernel` when several devices are present: no host
    callback, so it works on sharded inputs, eagerly and under ``jit``. Equal to the
    host PAV up to rounding (tests/test_isotonic_device.py); computed in ``y``'s float
    dtype (float32 at least).
    """
    dtype = y.dtype
    work = jnp.promote_types(dtype, jnp.float32)
    y, w = gather_all((y, jnp.broadcast_to(w, y.shape)), "Isotonic regression (PAV)", (-1, -1))
    w = w.astype(work)
    y = y.astype(work)
    if y.shape[-1] == 0:
        return y.astype(dtype)
    sign = 1 if increasing else -1  # a nonincreasing fit is -(fit of -y)
    rows = y.reshape(-1, y.shape[-1])
    # accelerators: searches of 4 to 32 ways in loops of fixed trip counts (fewer,
    # cheaper rounds); CPU meshes: binary searches, the least work
    row = functools.partial(_device_pav_row, wide=True)
    fit = by_platform(
        sign * rows,
        w.reshape(rows.shape),
        cpu=jax.vmap(_device_pav_row),
        default=jax.vmap(row),
    )
    return (sign * fit).reshape(y.shape).astype(dtype)


def _pav_primal(y: jax.Array, w: jax.Array, increasing: bool) -> jax.Array:
    if several_devices():
        return device_isotonic(y, w, increasing)
    out = jax.ShapeDtypeStruct(y.shape, y.dtype)

    def host(y, w):
        return jax.pure_callback(_HOST_PAV[increasing], out, y, w, vmap_method="expand_dims")

    # on an accelerator the device PAV: no device -> host -> device round trip
    return by_platform(
        y, w, cpu=host, default=lambda y, w: device_isotonic(y, w, increasing)
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def isotonic_kernel(y: jax.Array, w: jax.Array, increasing: bool = True) -> jax.Array:
    """PAV fit of ``y`` (last axis ordered) with positive weights ``w``."""
    return _pav_primal(y, w, increasing)


def _block_average(fit: jax.Array, w: jax.Array, num: jax.Array) -> jax.Array:
    """Weighted block mean of ``num / w`` over the constant blocks of ``fit`` (1-D)."""
    n = fit.shape[-1]
    starts = jnp.concatenate([jnp.ones((1,), bool), fit[1:] != fit[:-1]])
    block = jnp.cumsum(starts) - 1
    wsum = jax.ops.segment_sum(w, block, num_segments=n)
    nsum = jax.ops.segment_sum(num, block, num_segments=n)
    return (nsum / jnp.where(wsum == 0, 1, wsum))[block]


@isotonic_kernel.defjvp
def _isotonic_jvp(increasing, primals, tangents):
    y, w = primals
    dy, dw = tangents
    fit = isotonic_kernel(y, w, increasing)
    w_full = jnp.broadcast_to(w, y.shape)
    dw_full = jnp.broadcast_to(dw, y.shape)
    num = w_full * dy + dw_full * (y - fit)
    avg = _block_average
    for _ in range(y.ndim - 1):
        avg = jax.vmap(avg)
    return fit, avg(fit, w_full, num)
