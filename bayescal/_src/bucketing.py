"""Shape bucketing: pad 1-D inputs to power-of-two lengths, with a validity mask.

Every new array length costs a compilation (~0.2-0.4 s and a few MB of resident
memory that is never given back). Kernels whose result depends only on sufficient
statistics (counts per level or bin, sums) can instead take the input padded to the
next power of two with a mask of the real entries: evaluating N = 1000 ... 1199 then
compiles twice (buckets 1024 and 2048) instead of 200 times. Padding entries carry
weight 0: they are excluded from every count and sum.

The padding itself must not compile per length either: an eager ``jnp.concatenate``
of an ``[N]`` array is one more program for every new ``N``. Arrays in host memory
(numpy, and JAX arrays on a single CPU device) are therefore padded on the host and
put on the device once; only arrays on accelerators or sharded over several devices
are padded on the device (one small program per length).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .validation import host_resident

__all__ = ["MIN_BUCKET", "bucket_size", "pad_to_bucket"]

#: Smallest bucket: tiny inputs share one compilation.
MIN_BUCKET = 256


def bucket_size(n: int, minimum: int = MIN_BUCKET) -> int:
    """The smallest power of two ``>= max(n, minimum)``.

    Examples
    --------
    >>> from bayescal._src.bucketing import bucket_size
    >>> bucket_size(1000), bucket_size(1024), bucket_size(1025), bucket_size(3)
    (1024, 1024, 2048, 256)
    """
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


def pad_to_bucket(
    x, fill, *, minimum: int = MIN_BUCKET
) -> tuple[jax.Array, jax.Array]:
    """``x [N]`` padded with ``fill`` to :func:`bucket_size` ``(N)``, and the mask of real entries.

    Static shapes only (works under ``jit``; the bucket is a function of the static
    length). Host-resident inputs (numpy arrays, JAX arrays on one CPU device) are
    padded on the host, so a new length compiles nothing; other JAX arrays are padded
    on their device.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal._src.bucketing import pad_to_bucket
    >>> x, mask = pad_to_bucket(np.ones(3, np.float32), 0.0, minimum=4)
    >>> x.tolist(), mask.tolist()
    ([1.0, 1.0, 1.0, 0.0], [True, True, True, False])
    """
    n = x.shape[-1]
    size = bucket_size(n, minimum)
    pad = size - n
    mask = jnp.arange(size) < n  # one program per bucket: n is an argument, not a constant
    if not pad:
        return jnp.asarray(x), mask
    if host_resident(x):
        host = np.asarray(x)
        return jax.device_put(np.concatenate([host, np.full(pad, fill, host.dtype)])), mask
    x = jnp.asarray(x)
    return jnp.concatenate([x, jnp.full((pad,), fill, x.dtype)]), mask
