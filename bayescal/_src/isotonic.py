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
scipy's PAV on a CPU from n ~ 1e6, docs/gpu.md), the fit runs in XLA
(:func:`device_isotonic`): a divide-and-conquer PAV that merges
the solved halves of chunks of 1, 2, 4, ... observations (:func:`_device_pav_row`),
exact up to rounding (block means from compensated prefix sums). A custom JVP gives exact
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


def _dd_prefix(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Inclusive prefix sums along axis 0 of ``x [n, ...]`` as compensated pairs.

    ``x`` is cut into ``m`` rows of ``k ~ sqrt(n)`` values: one ``lax.scan`` over the
    ``k`` columns adds all rows at once, a second one over the ``m`` row totals gives
    their offsets; every addition is a TwoSum, so ``hi + lo`` is the exact prefix sum
    up to ~``n eps^2`` of the magnitudes (float32: ~1e-9 relative at n = 1e6).
    ``jax.lax.associative_scan`` with the same combiner took 2.8 s to compile at
    n = 32,768 against 0.4 s for these two scans.
    """
    n = x.shape[0]
    k = max(1, math.isqrt(n))
    m = -(-n // k)
    xp = jnp.concatenate([x, jnp.zeros((m * k - n,) + x.shape[1:], x.dtype)])
    cols = jnp.swapaxes(xp.reshape((m, k) + x.shape[1:]), 0, 1)  # [k, m, ...]
    zero = jnp.zeros(cols.shape[1:], x.dtype)

    def column(carry, v):
        carry = _dd_add(carry, (v, jnp.zeros_like(v)))
        return carry, carry

    totals, (hi, lo) = jax.lax.scan(column, (zero, zero), cols)

    def row(carry, t):
        return _dd_add(carry, t), carry  # exclusive: the offset of each row

    _, (off_hi, off_lo) = jax.lax.scan(row, (zero[0], zero[0]), totals)
    s, e = two_sum(hi, off_hi[None])
    lo = lo + off_lo[None] + e
    shape = (m * k,) + x.shape[1:]
    return jnp.swapaxes(s, 0, 1).reshape(shape)[:n], jnp.swapaxes(lo, 0, 1).reshape(shape)[:n]


def _dd_prefix_parallel(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`_dd_prefix` in ``log2(n)`` parallel steps (``jax.lax.associative_scan``
    with the TwoSum combiner): what accelerators run from :data:`PARALLEL_PREFIX`
    values, where the two scans' ``2 sqrt(n)`` sequential steps cost more than its
    longer compilation (CPU meshes keep the scans)."""
    return jax.lax.associative_scan(_dd_add, (x, jnp.zeros_like(x)), axis=0)


#: Rows at least this long take the parallel prefix sum on accelerators. It saved 6 ms a
#: call at n = 1e6 on an H200 (17.5 against 23.6 ms) but cost 1.1 s more to compile
#: (3.3 against 2.2 s), a trade that pays only over many calls; the two scans' 2
#: sqrt(n) steps (~3 us each there) cost more than that compilation from ~1e8 on.
PARALLEL_PREFIX = 2**22


def _take(x: jax.Array, i: jax.Array) -> jax.Array:
    return x.at[i].get(mode="promise_in_bounds")  # indices are clipped by the callers


#: Tiers of merge levels, ``(first level, ways of the searches)``: each tier is one loop
#: body (compiled once) with one slot per pair of chunks at its first level (n /
#: 2^(l0 + 1)), so later levels of a tier waste the slots of pairs they no longer
#: have. CPU meshes: two tiers of binary searches, the least work and the smallest
#: program (~0.9 s to compile on CPU at n = 32,768). Accelerators: a loop round costs
#: them ~45 us (H200), so wider searches in shorter tiers, keeping
#: slots x ways^2 below ~n / 2 (on an H200: 17 ms at n = 1e6 with three tiers
#: against 109 ms for the binary ones; the 1e8 case needed the shorter tiers).
_NARROW = ((0, 2), (4, 2))
_WIDE = ((0, 2), (4, 4), (8, 8), (12, 16), (16, 32))


def _device_pav_row(
    y: jax.Array, w: jax.Array, *, wide: bool = False, prefix: Callable | None = None
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
    adversarial ones). ``prefix`` computes the prefix sums (:func:`_dd_prefix` by
    default).
    """
    n = y.shape[-1]
    index_dtype = jnp.int32
    sums = jnp.stack([w * y, w], axis=-1)  # [n, 2]
    hi, lo = (prefix or _dd_prefix)(sums)
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

    def level_body(level: jax.Array, carry: tuple, slots: int, ways: int) -> tuple:
        first, last, block_mean = carry  # block_mean[i]: the mean of i's block
        h = jnp.left_shift(jnp.asarray(1, index_dtype), level)
        ls = jnp.minimum(jnp.arange(slots, dtype=index_dtype) * (2 * h), n)
        rs = jnp.minimum(ls + h, n)  # R = [rs, re), L = [ls, rs)
        re = jnp.minimum(ls + 2 * h, n)
        rc = clip(rs)
        need = (rs < re) & (_take(block_mean, clip(rc - 1)) > _take(block_mean, rc))
        # a search over 2^level positions takes ceil((level + 1) / log2(ways)) rounds
        rounds = (level + ways.bit_length() - 1) // (ways.bit_length() - 1)

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
    tiers = [t for t in (_WIDE if wide else _NARROW) if t[0] < max(num_levels, 1)]
    ends = [t[0] for t in tiers[1:]] + [num_levels]
    carry = (idx, idx + 1, y)
    for (l0, ways), l1 in zip(tiers, ends, strict=True):
        slots = -(-n // (2 << l0))
        body = functools.partial(level_body, slots=slots, ways=ways)
        carry = jax.lax.fori_loop(l0, l1, body, carry)
    fit = carry[2]
    valid = jnp.all(w > 0)  # invalid weights (rejected or NaN upstream): NaN, as the host
    return jnp.where(valid, fit, jnp.asarray(jnp.nan, fit.dtype))


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
    # accelerators: searches of 2 to 32 ways (fewer loop rounds) and, from PARALLEL_PREFIX
    # values on, a parallel prefix sum; CPU meshes: binary searches, the least work
    parallel = y.shape[-1] >= PARALLEL_PREFIX
    row = functools.partial(
        _device_pav_row, wide=True, prefix=_dd_prefix_parallel if parallel else None
    )
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
