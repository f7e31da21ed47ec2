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

__all__ = ["sort_last_axis"]


def _host_sort(x: np.ndarray) -> np.ndarray:
    return np.sort(np.asarray(x), axis=-1)


def _cpu_sort(x: jax.Array) -> jax.Array:
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(_host_sort, out, x, vmap_method="expand_dims")


def sort_last_axis(x: jax.Array) -> jax.Array:
    """Sort along the last axis (NaNs last, like ``np.sort`` and ``jnp.sort``)."""
    return jax.lax.platform_dependent(
        x, cpu=_cpu_sort, default=lambda v: jnp.sort(v, axis=-1)
    )
