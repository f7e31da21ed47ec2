"""Sorting that is fast on every backend.

XLA's sort on CPU is slow (``jnp.sort`` of 1e6 float32 took 300-460 ms against 5-8 ms
for ``np.sort`` on the project's 2-core machines). On CPU we therefore sort on the
host through a callback; on accelerators XLA's own sort is used. Both paths work
under ``jit`` and ``vmap`` (the callback sorts the last axis of a batched array).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["GATHER_MAX_SIZE", "gather_whole", "several_devices", "sort_last_axis"]

#: The most values :func:`gather_whole` copies to every device of a mesh.
GATHER_MAX_SIZE = 1 << 26


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


def gather_whole(x: jax.Array, what: str) -> jax.Array:
    """``x`` replicated on every device of the mesh it is sharded over (under ``jit``).

    For kernels that need the whole array at once on each device (a PAV, a host
    sort): one explicit all-gather before them, instead of the collectives XLA
    inserts for every gather of a sharded operand inside their loops (the device PAV
    ran 15x slower on an 8-device CPU mesh without it). A no-op on one device and for
    arrays without a mesh. Raises for more than :data:`GATHER_MAX_SIZE` values: every
    device would hold a copy.
    """
    mesh = _mesh_of(x)
    if mesh is None:
        return x
    if x.size > GATHER_MAX_SIZE:
        raise ValueError(
            f"{what} needs the whole array on every device, and this one is sharded over "
            f"{mesh.size} devices with {x.size} values (at most {GATHER_MAX_SIZE} are "
            "copied to each device). Compute it on a subsample, or on one device: "
            "jax.device_put(x, jax.devices()[0]) outside jit."
        )
    from jax.sharding import NamedSharding, PartitionSpec

    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, PartitionSpec()))


def sort_last_axis(x: jax.Array) -> jax.Array:
    """Sort along the last axis (NaNs last, like ``np.sort`` and ``jnp.sort``).

    One device: a host sort on CPU (numpy), XLA's sort elsewhere. Several devices
    (a mesh, or ``jax.distributed``): XLA's sort everywhere, which works on sharded
    inputs without a host round trip.
    """
    if several_devices():
        return jnp.sort(x, axis=-1)
    return jax.lax.platform_dependent(
        x, cpu=_cpu_sort, default=lambda v: jnp.sort(v, axis=-1)
    )
