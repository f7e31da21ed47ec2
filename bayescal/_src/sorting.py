"""Sorting that is fast on every backend.

XLA's sort on CPU is slow (``jnp.sort`` of 1e6 float32 took 300-460 ms against 5-8 ms
for ``np.sort`` on the project's 2-core machines). On CPU we therefore sort on the
host through a callback; on accelerators XLA's own sort is used. Both paths work
under ``jit`` and ``vmap`` (the callback sorts the last axis of a batched array).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.backend import cpu_backend

__all__ = [
    "GATHER_MAX_SIZE",
    "column_quantiles",
    "all_platform_branches",
    "by_platform",
    "gather_all",
    "gather_whole",
    "mesh_safe_callback",
    "several_devices",
    "sort_last_axis",
]

#: The most values :func:`gather_whole` copies to every device of a mesh.
GATHER_MAX_SIZE = 1 << 26

#: Bytes of each piece :func:`mesh_safe_callback` cuts an operand into with several
#: devices: below the 100 KiB (102,400 bytes) from which JAX's CPU runtime copies a
#: host array to a device asynchronously, on its worker threads.
CALLBACK_PIECE_BYTES = 1 << 16


def _host_sort(x: np.ndarray) -> np.ndarray:
    return np.sort(np.asarray(x), axis=-1)


def _cpu_sort(x: jax.Array) -> jax.Array:
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(_host_sort, out, x, vmap_method="expand_dims")


def several_devices() -> bool:
    """True when this process sees more than one device, or runs with several processes.

    Host callbacks on sharded inputs make XLA gather (replicate) the input and, on
    simulated CPU meshes, abort after a 40 s all-reduce rendezvous timeout; with
    several devices the kernels therefore use XLA's own (shardable) operations.
    """
    return jax.device_count() > 1


_ALL_BRANCHES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bayescal_all_platform_branches", default=False
)


@contextlib.contextmanager
def all_platform_branches() -> Iterator[None]:
    """Within this block :func:`by_platform` stages every branch even in a CPU-only
    process, so a program traced there can be lowered for an accelerator
    (``jax.jit(f).trace(x).lower(lowering_platforms=("cuda",))``: tests)."""
    token = _ALL_BRANCHES.set(True)
    try:
        yield
    finally:
        _ALL_BRANCHES.reset(token)


def by_platform(*args, cpu, default):
    """``cpu(*args)`` on CPU, ``default(*args)`` on every other platform.

    ``jax.lax.platform_dependent`` where an accelerator may run the program; in a
    process whose default backend is CPU (the only one there, or chosen with
    ``JAX_PLATFORMS=cpu``) the CPU branch alone is traced: platform_dependent traces
    every branch (only the CPU one is lowered and compiled), and tracing the device
    PAV added 0.3 s to first calls on CPU.
    """
    if cpu_backend() and not _ALL_BRANCHES.get():
        return cpu(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu, default=default)


def _mesh_of(x: jax.Array):
    """The (abstract) mesh ``x`` is laid out on under ``jit``, or None (one device,
    a concrete array, a sharding without a mesh, or a JAX without ``jax.typeof``)."""
    try:
        sharding = jax.typeof(x).sharding
        mesh = sharding.mesh
        if mesh.empty or mesh.size <= 1:
            return None
        return mesh
    except Exception:  # older JAX, or a sharding that is not a NamedSharding
        return None


def _words(x: jax.Array, axis: int) -> jax.Array:
    """``x`` as uint32 words ``[n, k]``, ``n`` its length along ``axis`` (bit for bit)."""
    x = jnp.moveaxis(x, axis, 0)
    if x.dtype == jnp.bool_:
        w = x.astype(jnp.uint32)
    elif x.dtype.itemsize == 4:
        w = jax.lax.bitcast_convert_type(x, jnp.uint32)
    elif x.dtype.itemsize == 8:  # x64: two words each
        w = jax.lax.bitcast_convert_type(x, jnp.uint32)
    else:  # 1 or 2 bytes: the bits in the low part of a word
        unsigned = jnp.uint8 if x.dtype.itemsize == 1 else jnp.uint16
        w = jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32)
    return w.reshape(x.shape[0], -1)


def _unwords(w: jax.Array, like: jax.Array, axis: int) -> jax.Array:
    """The inverse of :func:`_words` for an array shaped like ``like``."""
    shape = jnp.moveaxis(like, axis, 0).shape
    if like.dtype == jnp.bool_:
        x = w.reshape(shape) != 0
    elif like.dtype.itemsize == 4:
        x = jax.lax.bitcast_convert_type(w.reshape(shape), like.dtype)
    elif like.dtype.itemsize == 8:
        x = jax.lax.bitcast_convert_type(w.reshape(shape + (2,)), like.dtype)
    else:
        unsigned = jnp.uint8 if like.dtype.itemsize == 1 else jnp.uint16
        x = jax.lax.bitcast_convert_type(w.reshape(shape).astype(unsigned), like.dtype)
    return jnp.moveaxis(x, 0, axis)


def gather_all(arrays, what: str, axes=None) -> tuple:
    """The arrays replicated on every device of the mesh they are sharded over, in ONE
    all-gather (under ``jit``; a no-op on one device and for arrays without a mesh).

    For kernels that need the whole data at once on each device (a PAV, resampling
    loops): one explicit gather before them, instead of the collectives XLA inserts
    inside their loops (the device PAV ran 15x slower on an 8-device CPU mesh with
    them). One collective, not one per array: XLA's CPU runtime may run independent
    collectives of one program in different orders on different devices, and on a
    mesh of more devices than cores two of them waiting for each other aborted the
    process (an all-gather and an all-reduce of the smooth reliability band, N =
    32,768 on 8 devices, 2 cores). So the arrays are packed bit for bit into one
    ``uint32`` array ``[n, k]`` along their observation axes (``axes``, default 0: the
    same length ``n``; otherwise one gather each), gathered, and unpacked. ``None``,
    0-d and non-JAX entries pass through. Raises
    for more than :data:`GATHER_MAX_SIZE` values: every device would hold a copy.
    """
    arrays = tuple(arrays)
    axes = (0,) * len(arrays) if axes is None else tuple(axes)
    meshes = [None if a is None or not np.ndim(a) else _mesh_of(a) for a in arrays]
    picked = [i for i, m in enumerate(meshes) if m is not None]
    if not picked:
        return arrays
    if len({arrays[i].shape[axes[i]] for i in picked}) > 1:  # no common length: one by one
        out = list(arrays)
        for i in picked:
            out[i] = gather_all((arrays[i],), what, (axes[i],))[0]
        return tuple(out)
    mesh = meshes[picked[0]]
    size = sum(arrays[i].size for i in picked)
    if size > GATHER_MAX_SIZE:
        raise ValueError(
            f"{what} needs the whole data on every device, and it is sharded over "
            f"{mesh.size} devices with {size} values (at most {GATHER_MAX_SIZE} are "
            "copied to each device). Compute it on a subsample, or on one device: "
            "jax.device_put(x, jax.devices()[0]) outside jit."
        )
    from jax.sharding import NamedSharding, PartitionSpec

    words = [_words(arrays[i], axes[i]) for i in picked]
    packed = words[0] if len(words) == 1 else jnp.concatenate(words, axis=1)
    packed = jax.lax.with_sharding_constraint(packed, NamedSharding(mesh, PartitionSpec()))
    out = list(arrays)
    start = 0
    for i, w in zip(picked, words, strict=True):
        out[i] = _unwords(packed[:, start : start + w.shape[1]], arrays[i], axes[i])
        start += w.shape[1]
    return tuple(out)


def gather_whole(x: jax.Array, what: str) -> jax.Array:
    """:func:`gather_all` of one array (its first axis the observations)."""
    if x.ndim == 0:
        return x
    return gather_all((x,), what)[0]


def mesh_safe_callback(fn, result_shape_dtypes, *args, vmap_method: str):
    """``jax.pure_callback(fn, result_shape_dtypes, *args, vmap_method=vmap_method)``
    that also runs inside a program over several devices.

    There XLA runs the callback on one device (a ``{maximal device=0}`` sharding) and
    the other devices wait for its result in the collective that broadcasts it. JAX
    hands the callback its operands as arrays put back on the CPU device, and JAX's
    CPU runtime makes that copy asynchronously, on its worker threads, for an operand
    of 100 KiB or more: threads that are all taken by the waiting devices on a mesh of
    more devices than cores. The copy never starts, and on CPU meshes the process
    aborts after a 40 s rendezvous timeout (``fit_venn_abers`` at N = 32,768 float32
    on 8 devices, 2 cores: 128 KiB; N = 25,592 ran, 25,600 = 100 KiB hung). So with
    several devices every operand goes to the callback cut into pieces of at most
    :data:`CALLBACK_PIECE_BYTES`, copied synchronously and joined on the host, and a
    ``vmap`` calls ``fn`` once per batch element (``"sequential"``: batched pieces
    would grow by the batch size); ``fn`` then gets numpy arrays of the operands'
    shapes. With one device this is ``jax.pure_callback`` itself.
    """
    if not several_devices():
        return jax.pure_callback(fn, result_shape_dtypes, *args, vmap_method=vmap_method)
    arrays = [jnp.asarray(a) for a in args]
    pieces, counts = [], []
    for a in arrays:
        flat = a.reshape(-1)
        step = max(1, CALLBACK_PIECE_BYTES // a.dtype.itemsize)
        cut = [flat[i : i + step] for i in range(0, flat.size, step)] or [flat]
        pieces += cut
        counts.append(len(cut))
    shapes = [a.shape for a in arrays]

    def joined(*flat: np.ndarray):
        whole, start = [], 0
        for count, shape in zip(counts, shapes, strict=True):
            parts = [np.asarray(p) for p in flat[start : start + count]]
            whole.append(np.concatenate(parts).reshape(shape))
            start += count
        return fn(*whole)

    return jax.pure_callback(joined, result_shape_dtypes, *pieces, vmap_method="sequential")


def sort_last_axis(x: jax.Array) -> jax.Array:
    """Sort along the last axis (NaNs last, like ``np.sort`` and ``jnp.sort``).

    One device: a host sort on CPU (numpy), XLA's sort elsewhere. Several devices
    (a mesh, or ``jax.distributed``): XLA's sort everywhere, which works on sharded
    inputs without a host round trip.
    """
    if several_devices():
        return jnp.sort(x, axis=-1)
    return by_platform(x, cpu=_cpu_sort, default=lambda v: jnp.sort(v, axis=-1))


def column_quantiles(draws: jax.Array, probs: jax.Array) -> jax.Array:
    """Per-column quantiles of ``draws [S, N]`` at ``probs [L]`` (numpy 'linear')."""
    xs = sort_last_axis(draws.T)  # [N, S]
    s = xs.shape[-1]
    pos = probs * (s - 1)
    lo = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, s - 1)
    hi = jnp.clip(lo + 1, 0, s - 1)
    frac = (pos - lo).astype(draws.dtype)
    q = xs[:, lo] * (1 - frac) + xs[:, hi] * frac  # [N, L]
    return q.T
