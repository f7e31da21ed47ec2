"""Shape bucketing: the one rule for padding the observation axis, with a validity mask.

Every new array length costs a compilation (~0.1-0.4 s on a CPU). Kernels whose
result depends only on the real observations (counts per level or bin, weighted sums,
fits with observation weights) instead take their inputs padded to a *bucket* size,
with a mask or zero weights for the padding: a new ``N`` in a bucket already compiled
then compiles nothing. :func:`bucket_size` is the rule for the whole package (public
functions, accumulators, parametric fits): 4 sizes per octave above
:data:`MIN_BUCKET`, so the padding costs at most 25% (12.5% on average).

The padding itself must not compile per length either: an eager ``jnp.pad`` of an
``[N]`` array is one more program for every new ``N``. Arrays in host memory (numpy,
and JAX arrays on a single CPU device) are therefore padded on the host
(:func:`pad_axis`); only arrays on accelerators or sharded over several devices are
padded on the device (one small program per length).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "BUCKET_MAX",
    "MIN_BUCKET",
    "bucket_floor",
    "bucket_size",
    "on_one_device",
    "pad_axis",
    "pad_to_bucket",
    "paddable",
    "random_prefix_stable",
]

#: Observation axes longer than this are not padded (a copy of the data costs more
#: than the compilation it saves).
BUCKET_MAX = 1 << 24


def on_one_device(x: Any) -> bool:
    """Whether ``x`` is a concrete JAX array on one device (any platform)."""
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        return False
    try:
        return len(x.devices()) == 1 and x.is_fully_addressable
    except Exception:  # a deleted or otherwise unusable buffer
        return False


def _count(value: Any, name: str) -> int:
    """``value`` as a nonnegative Python int (a count or a length), else an error naming
    ``name``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int; got {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be at least 0; got {value}.")
    return int(value)


def paddable(x: Any) -> bool:
    """Whether ``x`` can be padded to its bucket (or sliced back) on the host.

    A numpy array, or a concrete JAX array on one device of at most
    :data:`BUCKET_MAX` values: padding it in NumPy compiles nothing (on a CPU a view;
    on an accelerator one transfer each way, on an H200 ~8 ms per 10 MB to the host
    and ~1.5 ms back, where a compilation per length costs ~0.1 s). The same rule on every backend, so the accelerator rehearsal
    pads what a CPU pads. Tracers and sharded arrays are not paddable: pad them with
    ``jnp.pad`` inside your program.

    Parameters
    ----------
    x : Any
        The array.

    Returns
    -------
    bool

    Examples
    --------
    >>> import jax.numpy as jnp, numpy as np
    >>> from bayescal.core import paddable
    >>> paddable(np.zeros(3)), paddable(jnp.zeros(3)), paddable([0.0, 1.0])
    (True, True, False)
    """
    if isinstance(x, np.ndarray):
        return True
    return on_one_device(x) and x.size <= BUCKET_MAX


#: Smallest bucket: tiny inputs share one compilation.
MIN_BUCKET = 256


def bucket_size(n: int, minimum: int = MIN_BUCKET) -> int:
    """The length bayescal pads an observation axis of ``n`` to (its *bucket*).

    The smallest of ``minimum`` and the sizes ``m * 2**k`` (``m`` in 4..7, 4 sizes per
    octave) that is ``>= n``: padding costs at most 25% (12.5% on average), and a
    program compiled for a bucket serves every ``n`` in it. Pad your own jitted
    code's inputs to it (:func:`pad_axis`, with a mask or zero weights for the
    padding) and a new ``n`` in a used bucket compiles nothing. Axes longer than
    :data:`BUCKET_MAX` are not padded by bayescal.

    Parameters
    ----------
    n : int
        The number of observations.
    minimum : int, default 256
        The smallest bucket, rounded up to a power of two.

    Returns
    -------
    int

    Examples
    --------
    >>> from bayescal.core import bucket_size
    >>> [bucket_size(n) for n in (3, 256, 257, 1000, 1025, 10_000, 10_007)]
    [256, 256, 320, 1024, 1280, 10240, 10240]
    """
    n = _count(n, "n")
    floor = 1 << max(_count(minimum, "minimum") - 1, 0).bit_length()
    if n <= floor:
        return floor
    grain = 1 << (n.bit_length() - 3)
    return -(-n // grain) * grain


def bucket_floor(size: int, minimum: int = MIN_BUCKET) -> int:
    """The smallest ``n`` whose bucket is ``size`` (a bucket of :func:`bucket_size`).

    A kernel that runs on a padded bucket knows only that its true ``n`` lies in
    ``[bucket_floor(size), size]``: where a choice depends on ``n`` (e.g. drawing
    replicates per observation or per cell above a threshold), it is static when the
    whole range is on one side.

    Examples
    --------
    >>> from bayescal._src.bucketing import bucket_floor
    >>> [bucket_floor(s) for s in (256, 320, 1024, 10240)]
    [1, 257, 897, 8193]
    """
    size = int(size)
    if bucket_size(size, minimum) != size:
        raise ValueError(f"{size} is not a bucket size")
    lo, hi = 1, size  # bucket_size is nondecreasing: bisect for the first n mapping to size
    while lo < hi:
        mid = (lo + hi) // 2
        if bucket_size(mid, minimum) < size:
            lo = mid + 1
        else:
            hi = mid
    return lo


#: The alignment of the host buffers :func:`pad_axis` fills: XLA's CPU client takes a
#: numpy array of this alignment without a copy (:func:`to_device`).
_ALIGN = 64


def _aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-ordered numpy array whose data starts on a :data:`_ALIGN`-byte
    boundary (numpy's own allocations are 16-byte aligned)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def _device_put_aliases() -> bool:
    """Whether this JAX's ``device_put`` takes ``may_alias`` (JAX >= 0.4.31)."""
    import inspect

    return "may_alias" in inspect.signature(jax.device_put).parameters


_MAY_ALIAS = _device_put_aliases()


def to_device(x: np.ndarray) -> Any:
    """A numpy array that bayescal made and will not change, as a JAX array on the
    default device: on a CPU without a copy where XLA can take the buffer as it is
    (aligned, C-ordered, of a dtype JAX keeps), else copied as ``jax.device_put`` does.

    For the arrays :func:`pad_axis` filled (aligned for this) and host slices of JAX
    arrays: the copy of a padded input cost as much as padding it (0.5 ms per 4 MB on
    the 2-core CPU machine). Never for a user's array: a JAX array sharing its memory
    would change when the user changes it.
    """
    if _MAY_ALIAS and jax.dtypes.canonicalize_dtype(x.dtype) == x.dtype:
        return jax.device_put(x, may_alias=True)
    return jax.device_put(x)


def pad_axis(x: Any, size: int, *, axis: int = -1, fill: Any = None) -> Any:
    """``x`` padded along ``axis`` to length ``size``, on the host where it can be.

    :func:`paddable` arrays (numpy, or a JAX array on one device) are padded in NumPy
    (no compilation per length) and returned as NumPy arrays; others (sharded) are
    padded with ``jnp.pad`` on their devices.

    Parameters
    ----------
    x : array
        The array.
    size : int
        The new length of ``axis`` (at least its length now).
    axis : int, default -1
        The axis to pad.
    fill : scalar, optional
        The padding's value. None (the default) repeats the last entry along the axis
        ("edge" padding): the padded array then passes every value check the original
        passes (finite, ranges, labels, positivity, order along other axes).

    Returns
    -------
    array
        ``x`` itself where the axis already has length ``size``; else numpy for
        paddable input and a JAX array for the others.

    Raises
    ------
    ValueError
        ``size`` is shorter than the axis.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.core import bucket_size, pad_axis
    >>> pad_axis(np.array([[1.0, 2.0], [3.0, 4.0]]), 3, axis=0).tolist()
    [[1.0, 2.0], [3.0, 4.0], [3.0, 4.0]]
    >>> pad_axis(np.ones(3), bucket_size(3, minimum=4), fill=0.0).tolist()
    [1.0, 1.0, 1.0, 0.0]
    """
    if not isinstance(x, np.ndarray | jax.Array) or x.ndim == 0:
        raise TypeError(
            f"x must be a numpy or JAX array with at least one axis; got "
            f"{type(x).__name__}{'' if np.ndim(x) else ' of no axis'}. Convert it first "
            "(np.asarray(x))."
        )
    size = _count(size, "size")
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise TypeError(f"axis must be an int; got {axis!r}.")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"axis must lie in [-{x.ndim}, {x.ndim}) for an array of {x.ndim} axes; "
            f"got {axis}."
        )
    axis = int(axis) % x.ndim
    pad = size - x.shape[axis]
    if pad < 0:
        raise ValueError(
            f"size must be at least the length of axis {axis} ({x.shape[axis]}); got "
            f"{size}. Pass a length of at least {x.shape[axis]} (e.g. "
            "bucket_size(length))."
        )
    if pad == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, pad)
    if paddable(x):
        host = np.asarray(x)
        if host.dtype.kind not in "biufc" or (fill is None and host.shape[axis] == 0):
            # strings and objects (refused later, naming the argument), or np.pad's
            # error for an empty axis (no entry to repeat)
            if fill is None:
                return np.pad(host, widths, mode="edge")
            return np.pad(host, widths, mode="constant", constant_values=fill)
        # filled in place (np.pad's edge and constant modes) in an aligned buffer, which
        # the fused programs then take without a copy (to_device)
        shape = list(host.shape)
        shape[axis] = size
        out = _aligned_empty(tuple(shape), host.dtype)
        head = [slice(None)] * x.ndim
        head[axis] = slice(0, host.shape[axis])
        out[tuple(head)] = host
        head[axis] = slice(host.shape[axis], size)
        out[tuple(head)] = host.take([-1], axis=axis) if fill is None else fill
        return out
    x = jnp.asarray(x)
    if fill is None:
        return jnp.pad(x, widths, mode="edge")
    return jnp.pad(x, widths, constant_values=fill)


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
    # Made on the host and transferred: eagerly, jnp.arange(size) < n compiled two
    # single-operation programs per bucket.
    mask = jax.device_put(np.arange(size) < n)
    if size == n:
        return jnp.asarray(x), mask
    padded = pad_axis(x, size, fill=fill)
    return (to_device(padded) if isinstance(padded, np.ndarray) else padded), mask


def random_prefix_stable(key: Any = None) -> bool:
    """Whether ``jax.random`` draws of shape ``[m]`` begin with those of shape ``[n]``.

    True for threefry keys with ``jax_threefry_partitionable`` on (the default since
    JAX 0.5): each value is a function of its own index, so a randomized kernel run on
    a padded bucket gives the real observations the values the unpadded call gives
    them. Otherwise (older JAX's default, other PRNG implementations) randomized calls
    must not be padded.

    Parameters
    ----------
    key : PRNG key, optional
        The key to be used (None: JAX's default implementation).

    Returns
    -------
    bool

    Examples
    --------
    >>> import jax
    >>> from bayescal.core import random_prefix_stable
    >>> random_prefix_stable(jax.random.key(0)) == jax.config.jax_threefry_partitionable
    True
    """
    if not jax.config.jax_threefry_partitionable:
        return False
    try:
        dtype = getattr(key, "dtype", None)
        if dtype is None or not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            impl = jax.config.jax_default_prng_impl
        else:
            impl = jax.random.key_impl(key)
    except Exception:
        return False
    return str(impl) == "threefry2x32"
