"""Pallas histogram kernels for GPUs: per-block private histograms, then a reduction.

On GPUs a scatter-add into a few bins serializes on atomics (16 GB/s at N = 1e8 on an
H100); :mod:`bayescal._src.binning` therefore compares every value against every bin
in blocks and reduces (647 GB/s at 15 bins). The kernels here do the same work in one
pass over the input, with each program's histogram held privately in registers
(Triton backend of :mod:`jax.experimental.pallas`; a Pallas per-block kernel ran at
980 GB/s at 15 bins on an H100, see the design notes):

- :func:`bin_counts` - integer counts at ``K`` bins from bin indices;
- :func:`bin_stats` - counts and per-block sums of value arrays, the bin of each value
  taken from bin indices or found in the kernel from the values and the bin edges
  (ECE and the reliability curve: count, sum of ``p``, sum of ``y`` per bin).

The level counts of the calibration curves (``#{u_i <= level_j}``) have no kernel
here any more: XLA's compare-and-reduce ran as fast on an H200 (2.11 against 2.10 ms
at N = 1e8 and 100 levels, 0.18 against 0.21 ms at 1e6), and the Pallas Triton
backend is deprecated (JAX 0.11).

Layout and order. The observation axis is cut into programs of ``T = rows * 256``
values (``T`` a power of two, at most :data:`MAX_PROGRAM`; the grid is ``ceil(N / T)``
programs). Each program loops over its ``rows`` sub-blocks of :data:`ROW` = 256 values
(= :data:`bayescal._src.binning.BLOCK`), compares each value's bin with the ``Kp``
bins (``K`` rounded up to a power of two, as Triton wants power-of-two shapes) and
reduces over the sub-block. Values past ``N`` (the last program's tail) are masked
off in the load: no padding copy of the input is made. Counts are int32 and summed
over the sub-blocks in the program, then over programs by XLA (exact in any order).
Sums are kept per sub-block of 256 values: output ``[ceil(N/256), K]`` per value
part, exactly the block sums of the XLA kernels, and reduced across blocks by
:func:`bayescal._src.binning.compensated_sum` (one TwoSum reduction). Each value is
split in the kernel into a high part on the grid ``scale * 2^-16`` (``floor(t + 0.5)``
of ``t = v 2^16 / scale``, exact) and the remainder, so the 256-term sum of high parts
is exact in float32; the remainders are summed in the sub-block in the reduction order
of the backend (a tree), which is the only place where the result can differ from the
XLA kernels: by a few float32 ulps of the sum of remainders, far below ``1e-6`` of the
sum. Under x64 the sums are float64 and the counts still int32 in the kernel
(widened to int64 by XLA when summing programs).

Availability. The kernels need :mod:`jax.experimental.pallas` with the Triton load
primitive (``jax.experimental.pallas.triton.load``, JAX >= 0.5); :func:`available`
says so, and the package imports Pallas only when it is called (JAX 0.4.38 imports
bayescal without it). ``interpret=True`` runs a kernel through Pallas' interpreter
(any backend): that is how the tests check them on CPU against the XLA kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp

__all__ = [
    "ROW",
    "MAX_PROGRAM",
    "available",
    "bin_counts",
    "bin_stats",
]

#: Values per sub-block (the block of the exact high-part sums, = binning.BLOCK).
ROW = 256
#: Most values one program reads (a power of two; not tuned on a GPU yet).
MAX_PROGRAM = 4096
_HI_BITS = 16


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """True when Pallas and its Triton primitives import (``pallas.triton.load``).

    Examples
    --------
    >>> from bayescal._src.pallas_histogram import available
    >>> isinstance(available(), bool)
    True
    """
    try:
        from jax.experimental import pallas as pl  # noqa: F401
        from jax.experimental.pallas import triton as plt
    except Exception:  # ImportError, or a backend module failing to load
        return False
    return hasattr(plt, "load") and hasattr(pl, "pallas_call")


def _modules():
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    return pl, plt


def _pow2(k: int) -> int:
    return 1 << max(int(k) - 1, 0).bit_length()


def _layout(n: int) -> tuple[int, int]:
    """``(rows, programs)``: sub-blocks of :data:`ROW` per program and grid size."""
    rows = min(_pow2(-(-n // ROW)), MAX_PROGRAM // ROW)
    return rows, max(-(-n // (rows * ROW)), 1)


def _sub_rows(kp: int) -> int:
    """Values compared at once in the count-only kernels: about 8192 compares (a
    ``[sub, Kp]`` tile in registers), a power of two between 32 and :data:`ROW`."""
    return max(32, min(ROW, 8192 // kp))


def _count_dtype():
    return jax.dtypes.canonicalize_dtype(int)


# --------------------------------------------------------------------------- kernels
def _bins_of(plt, key_ref, edges_ref, sl, valid, num_bins: int, mode: str):
    """Bin index of each value of the sub-block (``-1`` for the masked tail)."""
    if mode == "index":
        return plt.load(key_ref.at[sl], mask=valid, other=-1)
    x = plt.load(key_ref.at[sl], mask=valid, other=0)
    e = edges_ref[...]  # [Ep]: the K + 1 edges, then +inf
    # searchsorted(edges, x, side="right") - 1, clipped to [0, K - 1] (bin_index):
    # NaN sorts above every edge there, so it lands in the last bin.
    raw = jnp.sum(e[None, :] <= x[:, None], axis=1, dtype=jnp.int32)
    raw = jnp.where(jnp.isnan(x), num_bins + 1, raw)
    idx = jnp.minimum(jnp.maximum(raw, 1), num_bins) - 1
    return jnp.where(valid, idx, -1)


def _stats_kernel(*refs, n, rows, kp, num_bins, mode, num_values, with_edges, with_mask):
    pl, plt = _modules()
    it = iter(refs)
    key_ref = next(it)
    edges_ref = next(it) if with_edges else None
    mask_ref = next(it) if with_mask else None
    ups_ref = next(it) if num_values else None
    val_refs = [next(it) for _ in range(num_values)]
    cnt_ref = next(it)
    part_refs = [next(it) for _ in range(2 * num_values)]
    base = pl.program_id(0) * (rows * ROW)
    bins = jax.lax.broadcasted_iota(jnp.int32, (1, kp), 1)
    ups = [ups_ref[pl.ds(j, 1)] for j in range(num_values)] if num_values else []

    def body(r, cnt):
        off = r * ROW
        sl = pl.ds(off, ROW)
        valid = base + off + jax.lax.broadcasted_iota(jnp.int32, (ROW,), 0) < n
        if with_mask:  # int8, nonzero for the observations to count
            valid = valid & (plt.load(mask_ref.at[sl], mask=valid, other=0) != 0)
        idx = _bins_of(plt, key_ref, edges_ref, sl, valid, num_bins, mode)
        hit = idx[:, None] == bins  # [ROW, Kp]
        cnt = cnt + jnp.sum(hit, axis=0, keepdims=True, dtype=jnp.int32)
        for j in range(num_values):
            v = plt.load(val_refs[j].at[sl], mask=valid, other=0)
            up = ups[j]
            hi = jnp.floor(v * up + 0.5) / up  # on the grid scale * 2^-16: exact
            lo = v - hi
            zero = jnp.zeros((), v.dtype)
            for ref, part in ((part_refs[2 * j], hi), (part_refs[2 * j + 1], lo)):
                s = jnp.sum(jnp.where(hit, part[:, None], zero), axis=0, keepdims=True)
                ref[pl.ds(r, 1), :] = s
        return cnt

    cnt_ref[...] = jax.lax.fori_loop(0, rows, body, jnp.zeros((1, kp), jnp.int32))


# --------------------------------------------------------------------------- wrappers
def _call(kernel, grid, in_specs, out_specs, out_shape, interpret, args):
    pl, plt = _modules()
    # Triton explicitly: without compiler parameters newer JAX lowers GPU kernels with
    # Mosaic GPU (jax_pallas_use_mosaic_gpu), a different programming model.
    params = plt.CompilerParams(num_warps=4) if hasattr(plt, "CompilerParams") else None
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        interpret=interpret,
        compiler_params=params,
    )(*args)


def bin_stats(
    key: jax.Array,
    num_bins: int,
    values: Sequence[jax.Array] = (),
    scales: Sequence[jax.Array | float] = (),
    *,
    edges: jax.Array | None = None,
    mask: jax.Array | None = None,
    interpret: bool = False,
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """Counts per bin and per-block sums of the high and low parts of ``values``.

    Parameters
    ----------
    key : Array [N]
        Bin indices (int; outside ``[0, K)`` counted nowhere), or with ``edges`` the
        values whose bin :func:`bayescal._src.binning.bin_index` would give.
    num_bins : int
        Static number of bins ``K``.
    values : sequence of Array [N]
        Values to sum per bin (float, one dtype).
    scales : sequence of scalars
        Per value, a power of two at or above ``max |v|`` (the grid of the high parts).
    edges : Array [K + 1], optional
        Nondecreasing bin edges; the bins are found in the kernel.
    mask : bool Array [N], optional
        Only the observations where it is True are counted and summed (a bucket's
        padding is left out; read as int8, one byte per value).
    interpret : bool
        Run through Pallas' interpreter (CPU tests).

    Returns
    -------
    (counts, parts) : int counts ``[K]`` (int64 under x64) and, per value, its high
    and low parts' sums per block of :data:`ROW` values, each ``[ceil(N/256), K]``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.pallas_histogram import bin_stats
    >>> c, (hi, lo) = bin_stats(jnp.array([0, 2, 2]), 3, (jnp.array([1.0, 2.0, 3.0]),),
    ...                         (4.0,), interpret=True)
    >>> c.tolist(), (hi + lo).sum(0).tolist()
    ([1, 0, 2], [1.0, 0.0, 5.0])
    """
    pl, _ = _modules()
    values = tuple(values)
    if len(scales) != len(values):
        raise ValueError(
            f"scales must have one entry per value; got {len(scales)} for {len(values)}."
        )
    n = key.shape[-1]
    if n == 0:
        zeros = jnp.zeros((0, num_bins), values[0].dtype) if values else None
        return jnp.zeros((num_bins,), _count_dtype()), (zeros,) * (2 * len(values))
    kp = _pow2(num_bins)
    rows, programs = _layout(n)
    t = rows * ROW
    mode = "index" if edges is None else "values"
    key = key.astype(jnp.int32) if edges is None else key
    args: list[jax.Array] = [key]
    in_specs = [pl.BlockSpec((t,), lambda i: (i,))]
    if edges is not None:
        ep = _pow2(num_bins + 1)
        e = edges.astype(key.dtype)
        e = jnp.concatenate([e, jnp.full((ep - num_bins - 1,), jnp.inf, key.dtype)])
        args.append(e)
        in_specs.append(pl.BlockSpec((ep,), lambda i: (0,)))
    if mask is not None:
        args.append(mask.astype(jnp.int8))
        in_specs.append(pl.BlockSpec((t,), lambda i: (i,)))
    dtype = values[0].dtype if values else None
    if values:
        vp = _pow2(len(values))
        ups = [jnp.asarray(2.0**_HI_BITS, dtype) / jnp.asarray(s, dtype) for s in scales]
        ups += [jnp.ones((), dtype)] * (vp - len(values))
        args.append(jnp.stack(ups))
        in_specs.append(pl.BlockSpec((vp,), lambda i: (0,)))
        args.extend(v.astype(dtype) for v in values)
        in_specs.extend(pl.BlockSpec((t,), lambda i: (i,)) for _ in values)
    out_shape = [jax.ShapeDtypeStruct((programs, kp), jnp.int32)]
    out_specs = [pl.BlockSpec((1, kp), lambda i: (i, 0))]
    for _ in range(2 * len(values)):
        out_shape.append(jax.ShapeDtypeStruct((programs * rows, kp), dtype))
        out_specs.append(pl.BlockSpec((rows, kp), lambda i: (i, 0)))
    kernel = functools.partial(
        _stats_kernel,
        n=n,
        rows=rows,
        kp=kp,
        num_bins=num_bins,
        mode=mode,
        num_values=len(values),
        with_edges=edges is not None,
        with_mask=mask is not None,
    )
    outs = _call(kernel, (programs,), in_specs, out_specs, out_shape, interpret, args)
    counts = jnp.sum(outs[0][:, :num_bins], axis=0, dtype=_count_dtype())
    nb = -(-n // ROW)
    return counts, tuple(o[:nb, :num_bins] for o in outs[1:])


def bin_counts(idx: jax.Array, num_bins: int, *, interpret: bool = False) -> jax.Array:
    """Integer counts of bin indices at ``K`` bins (outside ``[0, K)``: dropped).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal._src.pallas_histogram import bin_counts
    >>> bin_counts(jnp.array([0, 2, 2, 5]), 3, interpret=True).tolist()
    [1, 0, 2]
    """
    return bin_stats(idx, num_bins, interpret=interpret)[0]
