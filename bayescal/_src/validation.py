"""Input validation shared by every public function.

Shapes, dtypes and options are checked in Python at once. Value checks (finite, ranges,
labels, positivity, order) are *recorded* while a public function runs and evaluated at
its end in ONE fused device pass that returns a few flags, read by one host sync; the data
itself never goes to the host for a check. Arrays already in host memory (small enough)
are checked in NumPy in place: the same predicates, with no program to compile for each
new shape. Public functions opt in with the :func:`validated` decorator.

Under ``jax.jit``/``jax.vmap``/``jax.grad`` no check can raise; there the decorator makes
every floating result NaN when a recorded check fails (per batch element under ``vmap``),
so invalid values never give a plausible number. Concrete arrays closed over by a traced
function are still checked eagerly.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar, overload

import jax
import jax.numpy as jnp
import numpy as np

from . import xla_options
from .backend import rehearsal
from .bucketing import (
    BUCKET_MAX,
    bucket_size,
    on_one_device,
    pad_axis,
    paddable,
    random_prefix_stable,
    to_device,
)

__all__ = [
    "validated",
    "one_call_at_a_time",
    "as_float_array",
    "check_choice",
    "check_finite",
    "check_in_unit_interval",
    "check_positive",
    "check_nonnegative",
    "check_same_shape",
    "check_nonempty",
    "check_levels",
    "check_pit",
    "check_positive_int",
    "check_num_bins",
    "check_binary_labels",
    "check_both_classes",
    "check_class_labels",
    "check_edges",
    "check_any_positive",
    "check_nondecreasing",
    "check_row_sums",
    "check_finite_params",
    "is_concrete",
    "host_resident",
    "reject_masked",
    "narrows",
    "record",
    "failure_message",
    "observation_count",
    "observation_mask",
    "masked_nan",
    "mask_weights",
    "fused_call",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds values (not a tracer under jit/vmap/grad)."""
    return not isinstance(x, jax.core.Tracer)


def reject_masked(x: Any, name: str) -> None:
    """Refuse a numpy masked array: converting it would drop its mask silently.

    Every public function of bayescal applies this rule to its array arguments.

    Parameters
    ----------
    x : Any
        The argument.
    name : str
        The argument's name, for the message.

    Raises
    ------
    TypeError
        ``x`` is a numpy masked array (``numpy.ma.MaskedArray``); the message says
        how to pass it.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.core import reject_masked
    >>> reject_masked(np.zeros(2), "y")  # anything else passes
    >>> reject_masked(np.ma.masked_array([1.0, 2.0], [0, 1]), "y")
    Traceback (most recent call last):
    ...
    TypeError: y is a numpy masked array; bayescal does not read masks ...
    """
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a numpy masked array; bayescal does not read masks (converting "
            "it would silently use the masked values too). Pass "
            f"{name}.compressed() to leave the masked values out (and drop the same "
            f"observations from the other arguments), or {name}.filled(value)."
        )


def narrows(x: Any) -> bool:
    """Whether JAX would wrap values of the integer numpy array ``x`` on conversion.

    Without x64, JAX converts int64 (uint64) arrays to int32 (uint32) modulo 2^32:
    ``2**32 + 1`` becomes 1. Such arrays must be refused, or converted on the host.

    Parameters
    ----------
    x : Any
        The argument (anything but an integer numpy array gives False).

    Returns
    -------
    bool

    Examples
    --------
    >>> import jax, numpy as np
    >>> from bayescal.core import narrows
    >>> big = np.array([2**32 + 1])
    >>> narrows(big) == (not jax.config.jax_enable_x64), narrows(np.array([7]))
    (True, False)
    """
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "iu" or x.size == 0:
        return False
    target = np.dtype(jax.dtypes.canonicalize_dtype(x.dtype))
    if target.itemsize >= x.dtype.itemsize:
        return False
    info = np.iinfo(target)
    return bool(x.min() < info.min or x.max() > info.max)


# --------------------------------------------------------------------------- recording
class _Check(NamedTuple):
    kind: str  # a key of _PREDICATES
    name: str  # the argument's name, for the message
    arrays: tuple[Any, ...]
    params: tuple[Any, ...]  # static, hashable parameters of the predicate
    what: str  # wording for the message


_PENDING: contextvars.ContextVar[list[_Check] | None] = contextvars.ContextVar(
    "bayescal_pending_checks", default=None
)


def _all_finite(x: jax.Array) -> jax.Array:
    # x * 0 is 0 for finite x and NaN for NaN or +-inf; one streaming pass.
    return jnp.isfinite(jnp.sum(x * jnp.zeros((), x.dtype)))


def _tiny(dtype: Any) -> Any:
    """The smallest positive value a "positive" check accepts: the smallest normal float.

    XLA's CPU backend flushes subnormal floats to zero, so a subnormal scale is 0 on
    the device: it is rejected on both paths (NumPy on the host, the compiled pass).
    """
    return jnp.finfo(dtype).tiny if jnp.issubdtype(dtype, jnp.floating) else 1


def _sorted(x: jax.Array, strict: bool) -> jax.Array:
    d = jnp.diff(x, axis=-1)
    return jnp.all(d > 0) if strict else jnp.all(d >= 0)


def _two_inside(x: Any, xp: Any) -> Any:
    """At least two distinct values strictly inside (0, 1) (``xp``: jnp or np)."""
    inside = (x > 0) & (x < 1)
    lo = xp.min(xp.where(inside, x, xp.inf)) if x.size else xp.inf
    hi = xp.max(xp.where(inside, x, -xp.inf)) if x.size else -xp.inf
    return lo < hi


_PREDICATES: dict[str, Callable[..., jax.Array]] = {
    "two_inside": lambda x: _two_inside(x, jnp),
    "finite": lambda x: _all_finite(x),
    "unit": lambda x: jnp.all((x >= 0) & (x <= 1)),
    "positive": lambda x: _all_finite(x) & jnp.all(x >= _tiny(x.dtype)),
    "nonnegative": lambda x: _all_finite(x) & jnp.all(x >= 0),
    "binary": lambda x: jnp.all((x == 0) | (x == 1)),
    "both_classes": lambda x: jnp.any(x == 1) & jnp.any(x == 0),
    "any_positive": lambda x: jnp.any(x > 0),
    "sorted": lambda x, strict: _sorted(x, strict),
    "nondecreasing_axis0": lambda x: jnp.all(jnp.diff(x, axis=0) >= 0),
    "less_equal": lambda a, b: jnp.all(a <= b),
    "no_zero_or_one": lambda x: ~jnp.any((x == 0) | (x == 1)),
    "class_range": lambda x, k: jnp.all((x >= 0) & (x < k)),
    "row_sums": lambda x, tol: jnp.all(
        jnp.abs(jnp.sum(x.astype(jnp.promote_types(x.dtype, jnp.float32)), axis=-1) - 1)
        <= tol
    ),
}


@functools.partial(jax.jit, static_argnums=0)
def _flags_kernel(specs: tuple[tuple[str, tuple[Any, ...]], ...], arrays: tuple) -> Any:
    return jnp.stack(
        [_PREDICATES[kind](*arrs, *params) for (kind, params), arrs in zip(specs, arrays, strict=True)]
    )


def _flags(checks: Sequence[_Check]) -> jax.Array:
    specs = tuple((c.kind, c.params) for c in checks)
    return _flags_kernel(specs, tuple(c.arrays for c in checks))


# The same predicates in NumPy, for concrete arrays in host memory (below).
_HOST_PREDICATES: dict[str, Callable[..., bool]] = {
    "two_inside": lambda x: bool(_two_inside(x, np)),
    "finite": lambda x: bool(np.isfinite(x).all()),
    "unit": lambda x: bool(((x >= 0) & (x <= 1)).all()),
    "positive": lambda x: bool(np.isfinite(x).all() and (x >= _tiny(x.dtype)).all()),
    "nonnegative": lambda x: bool(np.isfinite(x).all() and (x >= 0).all()),
    "binary": lambda x: bool(((x == 0) | (x == 1)).all()),
    "both_classes": lambda x: bool((x == 1).any() and (x == 0).any()),
    "any_positive": lambda x: bool((x > 0).any()),
    "sorted": lambda x, strict: bool(
        (np.diff(x, axis=-1) > 0).all() if strict else (np.diff(x, axis=-1) >= 0).all()
    ),
    "nondecreasing_axis0": lambda x: bool((np.diff(x, axis=0) >= 0).all()),
    "less_equal": lambda a, b: bool((a <= b).all()),
    "no_zero_or_one": lambda x: not ((x == 0) | (x == 1)).any(),
    "class_range": lambda x, k: bool(((x >= 0) & (x < k)).all()),
    "row_sums": lambda x, tol: bool(
        (np.abs(x.astype(jnp.promote_types(x.dtype, jnp.float32)).sum(axis=-1) - 1) <= tol).all()
    ),
}

# Up to this many values in all, the checks of host-resident arrays run in NumPy: no
# compilation for each new combination of checks and shapes (an eager call on new
# shapes would otherwise compile the flag kernel, ~60 ms on a CPU, to check microseconds
# of data). Beyond it, the one compiled pass (_flags_kernel) is the faster one.
HOST_CHECK_MAX_SIZE = 1 << 20


def host_resident(x: Any) -> bool:
    """Whether ``x`` lives in host memory: a numpy array or a JAX array on one CPU."""
    if isinstance(x, np.ndarray):
        return True
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
        return False
    try:
        devices = x.devices()
    except Exception:  # a deleted or otherwise unusable buffer: let jnp raise
        return False
    # In the accelerator rehearsal a JAX array is on the device, as it would be there.
    return len(devices) == 1 and next(iter(devices)).platform == "cpu" and not rehearsal()


def slice_without_program(x: Any, index: Any) -> Any:
    """``x[index]`` with a static ``index``, compiling nothing.

    An eager slice of a JAX array is a program per shape: a new N of a bucketed
    call's per-observation result would compile one. A numpy array or a JAX array on
    one device is sliced on the host instead and put back on its device (a view on a
    CPU; one transfer each way on an accelerator, on an H200 ~8 ms per 10 MB to the
    host and ~1.5 ms back, where a compilation costs ~0.1 s). Arrays sharded over
    several devices are sliced where they are (never gathered).
    """
    if isinstance(x, np.ndarray):
        return jax.device_put(x[index])
    if not on_one_device(x):
        return x[index]
    device = next(iter(x.devices()))
    host = np.asarray(x)[index]
    # a prefix of a CPU array's buffer is taken as it is (no copy)
    out = to_device(host) if device == jax.devices()[0] else jax.device_put(host, device)
    _remember_host_copy(out, host)  # its checks, if any, run on the host copy
    return out


# JAX arrays that the conversions below made from NumPy data, with that data (by id,
# dropped when the array dies): on an accelerator (or in the rehearsal) their checks
# run on the NumPy data in place, as a CPU checks its own arrays, instead of a flag
# program compiled for every new shape.
_HOST_COPIES: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def _remember_host_copy(arr: Any, host: np.ndarray) -> None:
    if host.size > HOST_CHECK_MAX_SIZE or host_resident(arr):
        return
    key = id(arr)
    _HOST_COPIES[key] = (weakref.ref(arr, lambda _, key=key: _HOST_COPIES.pop(key, None)), host)


def host_copy(x: Any) -> np.ndarray | None:
    """``x`` in host memory without a transfer: a numpy array, a CPU JAX array's
    buffer, or the NumPy data a device array was converted from; else None."""
    if host_resident(x):
        return np.asarray(x)  # zero-copy for CPU JAX arrays
    entry = _HOST_COPIES.get(id(x))
    return entry[1] if entry is not None and entry[0]() is x else None


def _host_flags(checks: Sequence[_Check]) -> np.ndarray | None:
    """The flags of ``checks`` computed in NumPy, or None where the compiled pass applies.

    Only for concrete arrays in host memory (:func:`host_copy`), of NumPy's own dtypes
    (not bfloat16), HOST_CHECK_MAX_SIZE values at most; equal to ``_flags``
    (tests/test_core.py).
    """
    arrays = [a for c in checks for a in c.arrays]
    # sized first (no host copy of what the compiled pass checks), each array once:
    # several checks of one array (range, row sums) read it once
    distinct = {id(a): a for a in arrays}.values()
    if sum(int(np.size(a)) for a in distinct) > HOST_CHECK_MAX_SIZE:
        return None
    host = [host_copy(a) for a in arrays]
    if any(h is None for h in host) or any(h.dtype.kind not in "biuf" for h in host):
        return None
    flags, it = [], iter(host)
    try:
        with np.errstate(all="ignore"):  # inf - inf in a diff is a failed check, not a warning
            for c in checks:
                flags.append(_HOST_PREDICATES[c.kind](*[next(it) for _ in c.arrays], *c.params))
    except Exception:  # any doubt (e.g. a boolean diff): the compiled pass decides
        return None
    return np.array(flags)


def record(
    kind: str, name: str, *arrays: Any, params: tuple[Any, ...] = (), what: str = "values"
) -> None:
    """Record a value check; evaluated at the end of the enclosing public function.

    Outside a :func:`validated` function the check runs at once (raising on failure).
    """
    check = _Check(kind, name, tuple(arrays), tuple(params), what)
    pending = _PENDING.get()
    if pending is not None:
        pending.append(check)
        return
    _evaluate([check])


def failure_message(
    kind: str, name: str, *arrays: Any, params: tuple[Any, ...] = (), what: str = "values"
) -> str:
    """The message of a :func:`record` check of ``kind`` that the caller found failing
    itself (e.g. in NumPy on the host): the same words, values and counts as the
    public functions' own checks, with no flag pass (which, beyond the host checks'
    size, would see int64 values narrowed to int32 without x64)."""
    with jax.ensure_compile_time_eval():
        return _message(_Check(kind, name, tuple(arrays), tuple(params), what))


def _evaluate(checks: Sequence[_Check]) -> jax.Array | None:
    """Raise for the first failing check (concrete arrays) or return the traced flag."""
    if not checks:
        return None
    if all(is_concrete(a) for c in checks for a in c.arrays):
        flags = _host_flags(checks)
        if flags is None:
            with jax.ensure_compile_time_eval():
                flags = np.asarray(_flags(checks))  # the one host sync: a few booleans
        if not flags.all():
            bad = checks[int(np.argmin(flags))]
            with jax.ensure_compile_time_eval():
                raise ValueError(_message(bad))
        return None
    return jnp.all(_flags(checks))


def _poison(out: Any, ok: jax.Array) -> Any:
    def leaf(x: Any) -> Any:
        if isinstance(x, jax.Array | jax.core.Tracer) and jnp.issubdtype(
            x.dtype, jnp.floating
        ):
            return jnp.where(ok, x, jnp.asarray(jnp.nan, x.dtype))
        return x

    return jax.tree_util.tree_map(leaf, out)


# The number of real observations while a bucketed public call is traced (a traced
# int32 scalar; the observation axes then have the bucket's length), else None.
_BUCKET: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "bayescal_bucket", default=None
)


def observation_count(x: Any, axis: int = -1) -> Any:
    """The number of real observations along ``axis`` of ``x``.

    Inside a bucketed call (see :func:`validated`) the observation axis is padded and
    this is the traced true count; otherwise it is the static length.
    """
    bucket = _BUCKET.get()
    if bucket is None:
        return x.shape[axis]
    _check_bucket_length(x.shape[axis], bucket[1])
    return bucket[0]


def _check_bucket_length(length: int, size: int) -> None:
    if length != size:  # a kernel asked about an axis that is not the padded one
        raise RuntimeError(
            f"bayescal internal error: an axis of length {length} treated as the "
            f"observation axis of a bucket of {size}; please report this."
        )


def observation_mask(length: int) -> jax.Array | None:
    """The mask ``[length]`` of real observations in a bucketed call, else None.

    Kernels use it to leave the padding out of counts, sums and means. None means
    nothing is padded (an eager call that is not bucketed, or a call traced by the
    user's ``jit``/``vmap``), and the kernel runs as before. Read it in the public
    function's body and pass it to the kernels as an argument: a jitted kernel's traced
    program is cached by shapes alone and would not see a later bucket.
    """
    bucket = _BUCKET.get()
    if bucket is None:
        return None
    _check_bucket_length(length, bucket[1])
    return jnp.arange(length) < bucket[0]


def mask_weights(
    w: jax.Array | None, shape: tuple[int, ...], dtype: Any
) -> jax.Array | None:
    """Observation weights with 0 in a bucket's padding (the mask itself without ``w``).

    ``shape`` is the shape of the per-observation scores (observations last).
    Outside a bucketed call: ``w`` unchanged. Call it in the public function's body and
    pass the result to the kernel: never read the bucket inside a jitted kernel, whose
    traced program is cached by shapes alone.
    """
    if _BUCKET.get() is None or not shape:
        return w
    mask = observation_mask(shape[-1])
    if mask is None:
        return w
    return mask.astype(dtype) if w is None else jnp.where(mask, w, jnp.zeros((), w.dtype))


def masked_nan(x: jax.Array, axis: int = -1) -> jax.Array:
    """``x`` with NaN in the padding of a bucketed call (counted nowhere by the grids)."""
    mask = observation_mask(x.shape[axis])
    if mask is None:
        return x
    mask = mask.reshape((-1,) + (1,) * (x.ndim - 1 - axis % x.ndim))
    return jnp.where(mask, x, jnp.asarray(jnp.nan, x.dtype))


def _bucketed(
    args: tuple, kwargs: dict, names: dict[str, int], positions: dict[str, int]
) -> tuple[tuple, dict, int, int] | None:
    """The arguments named in ``names`` padded to the bucket of their common length.

    Only :func:`paddable` arrays (padded in NumPy: nothing to compile per length) of
    one common length ``n`` along their observation axis; anything else (sharded or
    very large device arrays, lengths that disagree, which the ordinary path
    reports): None.
    """
    found = []
    for name, axis in names.items():
        pos = positions.get(name)
        if name in kwargs:
            value, where = kwargs[name], name
        elif pos is not None and pos < len(args):
            value, where = args[pos], pos
        else:
            continue
        if isinstance(value, list | tuple):
            # a list is host data, converted as the function itself would: padded like
            # the arrays (left as it is, it would not match their padded length)
            try:
                value = np.asarray(value)
            except Exception:  # ragged: the ordinary path reports it
                return None
            if value.dtype.kind not in "biuf":
                return None
        if value is None or not hasattr(value, "ndim") or value.ndim == 0:
            continue  # absent, or a scalar that broadcasts
        if not paddable(value):
            return None
        found.append((where, value, axis))
    if not found:
        return None
    lengths = {v.shape[a] for _, v, a in found}
    if len(lengths) != 1:
        return None
    (n,) = lengths
    if not 0 < n <= BUCKET_MAX:
        return None
    size = bucket_size(n)
    new_args, new_kwargs = list(args), dict(kwargs)
    for where, value, axis in found:
        padded = pad_axis(value, size, axis=axis)
        if (
            isinstance(padded, np.ndarray)
            and padded is not value
            and padded.dtype.kind in "biuf"  # others: the ordinary path's dtype error
            and not narrows(padded)
        ):
            padded = to_device(padded)  # a buffer bayescal filled: no copy on a CPU
        if isinstance(where, int):
            new_args[where] = padded
        else:
            new_kwargs[where] = padded
    return tuple(new_args), new_kwargs, n, size


_KEY_NAMES = ("key", "rng_key")


def seed_words(value: Any) -> np.ndarray | None:
    """The key data ``jax.random.key(seed)`` holds for an int seed, computed on the host
    (threefry's seed of ``s`` in ``[0, 2**31)`` is ``[0, s]``), or None for anything
    else (other seeds, PRNG implementations, bools, non-ints)."""
    if (
        isinstance(value, int | np.integer)
        and not isinstance(value, bool | np.bool_)
        and 0 <= int(value) < 2**31
        and str(jax.config.jax_default_prng_impl) == "threefry2x32"
    ):
        return np.array([0, int(value)], np.uint32)
    return None


def _seed_key(value: Any) -> Any:
    """An int seed as the typed key ``jax.random.key(seed)`` makes, built on the host.

    A Python int is a static argument of the fused program: every new seed compiled
    the whole program again. The key holds the same data (:func:`seed_words`), so the
    results are those of the seed; anything else is left to the function's own check.
    """
    words = seed_words(value)
    return value if words is None else jax.random.wrap_key_data(words)


def _seeds_as_keys(args: tuple, kwargs: dict, positions: dict[str, int]):
    """``args``, ``kwargs`` with int seeds of the key arguments made typed keys."""
    for name in _KEY_NAMES:
        if name in kwargs:
            kwargs = {**kwargs, name: _seed_key(kwargs[name])}
        elif (pos := positions.get(name)) is not None and pos < len(args):
            args = (*args[:pos], _seed_key(args[pos]), *args[pos + 1 :])
    return args, kwargs


def _keys_prefix_stable(args: tuple, kwargs: dict, positions: dict[str, int]) -> bool:
    """Whether the call's random key (if any) draws the same first values when padded.

    A randomized kernel on a padded bucket gives the real observations the values of
    the unpadded call only where ``jax.random``'s draws of a longer array begin with
    those of a shorter one (:func:`bucketing.random_prefix_stable`); otherwise the
    call is not padded, so that a key gives the same result whatever the bucket.
    """
    for name in _KEY_NAMES:
        pos = positions.get(name)
        if name in kwargs:
            key = kwargs[name]
        elif pos is not None and pos < len(args):
            key = args[pos]
        else:
            continue
        if key is not None and not random_prefix_stable(key):
            return False
    return True


def unreduced(kwargs: dict[str, Any]) -> int | None:
    """``per_observation`` of the scores: the last axis with ``reduction="none"``."""
    return -1 if kwargs.get("reduction") == "none" else None


def _unpad(out: Any, n: int, size: int, axis: int) -> Any:
    """Slice every array leaf of ``out`` with the bucket's length along ``axis`` to ``n``.

    On the host for CPU arrays (no program per length), on the device otherwise.
    """

    def leaf(x: Any) -> Any:
        if not isinstance(x, jax.Array) or x.ndim == 0 or x.shape[axis] != size:
            return x
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, n)
        return slice_without_program(x, tuple(index))

    return jax.tree_util.tree_map(leaf, out)


class _FusedPending(list):
    """The pending checks of a public call being traced whole by its fused eager path."""


def _run_checked(fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    outer = _PENDING.get()
    pending: list[_Check] = []
    token: Any = _PENDING.set(pending)
    try:
        out = fn(*args, **kwargs)
    except Exception as err:
        _PENDING.reset(token)
        token = None
        # A value error recorded before the failure explains it better than the
        # failure itself (e.g. a NaN that later broke a host computation).
        if pending:
            try:
                _evaluate(pending)
            except ValueError as bad:
                raise bad from err
        raise
    finally:
        if token is not None:
            _PENDING.reset(token)
    if isinstance(outer, _FusedPending) or (
        outer is not None and all(is_concrete(a) for c in pending for a in c.arrays)
    ):
        outer.extend(pending)  # checked in the enclosing public function's pass
        return out
    # Traced inputs (possibly of a transformation inside the enclosing function):
    # fold the checks into this call's own result so that no tracer escapes.
    ok = _evaluate(pending)
    return out if ok is None else _poison(out, ok)


def _fused_body(
    fn: Callable[..., Any],
    dyn: tuple,
    static: tuple,
    layout: tuple,
    n: Any = None,
    size: int | None = None,
) -> Any:
    args, kwargs = _merge(dyn, static, layout)
    pending = _FusedPending()
    token = _PENDING.set(pending)
    bucket = None if n is None else _BUCKET.set((n, size))
    try:
        out = fn(*args, **kwargs)
    finally:
        if bucket is not None:
            _BUCKET.reset(bucket)
        _PENDING.reset(token)
    ok = jnp.all(_flags(pending)) if pending else jnp.asarray(True)
    return out, ok


_fused_jit = jax.jit(_fused_body, static_argnums=(0, 2, 3, 5))


@functools.cache
def _fused_jit_with(options: tuple[tuple[str, Any], ...]) -> Any:
    return jax.jit(_fused_body, static_argnums=(0, 2, 3, 5), compiler_options=dict(options))


def _kernel_options(size: int) -> dict[str, Any]:
    """The fused programs' default XLA options: quick compiles up to the quick size.

    Beyond it XLA's defaults: its fusion emitters ran the scatter-heavy kernels up to
    2.4x faster at N = 1e6 (ECE: 9.9 vs 23.5 ms) than the older emitters.
    """
    return xla_options.compiler_options(size, large=False)


def _run_fused(options: dict[str, Any], *args: Any) -> Any:
    jitted = _fused_jit_with(tuple(sorted(options.items()))) if options else _fused_jit
    return jitted(*args)


def fused_call(
    fn: Callable[..., Any], args: tuple, kwargs: dict, *, compiler_options: Any = None
) -> tuple[Any, jax.Array] | None:
    """``(out, ok)``: ``fn(*args, **kwargs)`` and its recorded checks as ONE compiled program.

    The building block of ``validated(fuse=True)`` for callers that prepare the
    arguments themselves (e.g. pad them to a bucket size first) and decide what to do
    when ``ok`` is False. Returns None where no fused program applies: inside another
    validated call, with traced or unhashable arguments, or without array arguments.
    ``compiler_options`` (a dict) are passed to XLA for this program.
    """
    if _PENDING.get() is not None:
        return None
    parts = _split(args, kwargs)
    if parts is None or not parts[0]:
        return None
    return _run_fused(compiler_options or {}, fn, *parts)


def _split(args: tuple, kwargs: dict) -> tuple[tuple, tuple, tuple] | None:
    """Array arguments (traced) apart from the rest (static; None if unhashable)."""
    dyn, static, layout = [], [], []
    for key, value in [(i, a) for i, a in enumerate(args)] + sorted(kwargs.items()):
        if isinstance(value, jax.core.Tracer):
            return None  # traced (vmap/jit): no fused eager pass (old jax hashes tracers)
        if isinstance(value, jax.Array | np.ndarray) and not isinstance(
            value, jax.core.Tracer
        ):
            if isinstance(value, np.ndarray) and value.dtype.kind not in "biuf":
                return None  # the ordinary path gives the dtype error
            if narrows(value):
                return None  # JAX would wrap it: the ordinary path converts on the host
            dyn.append(value)
            layout.append((key, True))
        else:
            try:
                hash(value)
            except TypeError:
                return None
            static.append(value)
            layout.append((key, False))
    return tuple(dyn), tuple(static), tuple(layout)


def _merge(dyn: tuple, static: tuple, layout: tuple) -> tuple[list, dict]:
    it_dyn, it_static = iter(dyn), iter(static)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for key, is_dyn in layout:
        value = next(it_dyn) if is_dyn else next(it_static)
        if isinstance(key, int):
            args.append(value)
        else:
            kwargs[key] = value
    return args, kwargs


def _reject_masked_arguments(f: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Masked arrays among the arguments raise, named by their parameter.

    Checked before anything converts them (the bucketing pads host arrays with
    ``np.pad``, which would drop the mask).
    """
    for key, value in kwargs.items():
        reject_masked(value, key)
    if not any(isinstance(a, np.ma.MaskedArray) for a in args):
        return
    import inspect

    params = list(inspect.signature(f).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    for i, value in enumerate(args):
        name = positional[i] if i < len(positional) else f"{star}[{i - len(positional)}]"
        reject_masked(value, name)


# One public call runs its programs at a time, across threads. JAX hands a host
# callback (scipy's PAV, the Venn-ABERS hulls, the quantile functions of bands) its
# operands as arrays put back on the CPU device, a copy JAX's CPU runtime makes
# asynchronously on its worker threads for an operand of 100 KiB or more: with several
# threads calling at once, every worker thread can be a callback waiting for such a copy,
# and the process hangs (8 threads calling fit_isotonic at N = 40,000 did; serially the
# same calls take a few seconds). A thread waits here instead, and a call's results are
# ready before the next call starts, so no callback of it is left running.
_ONE_CALL_AT_A_TIME = threading.RLock()


def one_call_at_a_time(run: Callable[[], Any]) -> Any:
    """``run()`` (a public call) under :data:`_ONE_CALL_AT_A_TIME`, its concrete results
    computed before another thread's call starts; inside another public call (which
    holds the lock) simply ``run()``."""
    if _PENDING.get() is not None:
        return run()
    with _ONE_CALL_AT_A_TIME:
        return _settled(run())


def _settled(out: Any) -> Any:
    """``out`` once its concrete arrays are computed (see :data:`_ONE_CALL_AT_A_TIME`)."""
    for leaf in jax.tree_util.tree_leaves(out):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            leaf.block_until_ready()
    return out


@overload
def validated(fn: _F) -> _F: ...


@overload
def validated(
    fn: None = None,
    *,
    fuse: bool = False,
    bucket: dict[str, int] | None = None,
    per_observation: Any = None,
    nested_bucket: bool = True,
    compiler_options: Callable[[int], dict[str, Any]] | None = None,
) -> Callable[[_F], _F]: ...


def validated(
    fn: _F | None = None,
    *,
    fuse: bool = False,
    bucket: dict[str, int] | None = None,
    per_observation: Any = None,
    nested_bucket: bool = True,
    compiler_options: Callable[[int], dict[str, Any]] | None = None,
) -> _F | Callable[[_F], _F]:
    """Decorator of public functions: fused value checks, NaN results under tracing.

    Value checks recorded while ``fn`` runs (by the ``check_*`` helpers below) are
    evaluated together at its end: eagerly in one device pass and one host sync of a
    few flags (raising a ``ValueError`` that names the argument), or, when an input is
    traced, folded into the result (floating leaves become NaN when a check fails).
    A nested validated call on concrete arrays adds its checks to the enclosing call's
    pass; on traced arrays it folds them into its own result. The decorated function
    keeps its signature, for type checkers too (tests/test_typing.py).

    ``fuse=True`` (for functions whose work is one kernel on array arguments): an eager
    call with array arguments runs the whole function, checks included, as ONE
    compiled computation (cached per static options), so the checks cost no extra pass
    over the data; only when a flag fails is it run again unfused, to raise the
    detailed error.

    ``bucket`` (with ``fuse``): the arguments that carry the observation axis, as
    ``{name: axis}``. In the fused eager call, those that are host-resident arrays of
    one common length ``n`` are padded in NumPy to ``bucketing.bucket_size(n)`` by
    repeating their last observation (so every value check gives the same answer
    without a mask), and ``fn`` runs with :func:`observation_count` /
    :func:`observation_mask` telling its kernels the real ``n``: one compiled program
    serves every ``n`` of a bucket. ``per_observation``: the axis of the result's
    per-observation arrays (e.g. PIT values, unreduced scores), which are sliced back
    to ``n`` on the host; None when no result has an observation axis; ``(axis,
    extra)`` for arrays of ``n + extra`` entries along it (e.g. knots with both ends
    added), whose padding comes last; or a function of the keyword arguments giving
    any of these (e.g. per-observation scores only with ``reduction="none"``).

    ``nested_bucket=False``: called inside another public function's traced body, ``fn``
    runs with no bucket (:func:`observation_mask` gives None), because its bucketed
    axis is not that function's observation axis (e.g. the points of a curve, which
    a caller with a padded curve leaves out itself, by weight 0). By default a nested
    call sees the enclosing call's bucket (e.g. ``calibration_error`` inside a test
    of it, on the same padded PIT values).
    ``compiler_options`` (with ``fuse``): the fused program's XLA options as a function
    of the number of values of its largest array argument, instead of
    ``xla_options.compiler_options`` (e.g. that function with other arguments, for a
    program measured with another trade-off).
    """

    def wrap(f: _F) -> _F:
        import inspect

        positions = {}
        for i, param in enumerate(inspect.signature(f).parameters.values()):
            if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                positions[param.name] = i
        seeded = any(name in inspect.signature(f).parameters for name in _KEY_NAMES)

        def call(args: Any, kwargs: Any) -> Any:
            _reject_masked_arguments(f, args, kwargs)
            if seeded:
                args, kwargs = _seeds_as_keys(args, kwargs, positions)
            if fuse and _PENDING.get() is None:
                padded = (
                    _bucketed(args, kwargs, bucket, positions)
                    if bucket and _keys_prefix_stable(args, kwargs, positions)
                    else None
                )
                call_args, call_kwargs = (padded[0], padded[1]) if padded else (args, kwargs)
                parts = _split(call_args, call_kwargs)
                if parts is not None and parts[0]:
                    extra = (np.asarray(padded[2], np.int32), padded[3]) if padded else ()
                    try:
                        out, ok = xla_options.with_options(
                            xla_options.largest(parts[0]),
                            lambda o: _run_fused(o, f, *parts, *extra),
                            compiler_options or _kernel_options,
                        )
                    except Exception:  # e.g. an option that needs concrete values
                        ok = False  # the ordinary path gives the result or the error
                    if isinstance(ok, jax.core.Tracer):
                        # concrete inputs inside another function's trace (a fit on
                        # constants under jit): the ordinary path folds the checks
                        ok = False
                    if bool(ok):  # the one host sync
                        axis = (
                            per_observation(kwargs)
                            if callable(per_observation)
                            else per_observation
                        )
                        if padded and axis is not None:
                            axis, extra = axis if isinstance(axis, tuple) else (axis, 0)
                            out = _unpad(out, padded[2] + extra, padded[3] + extra, axis)
                        return out
            if not nested_bucket and _BUCKET.get() is not None:
                token = _BUCKET.set(None)
                try:
                    return _run_checked(f, args, kwargs)
                finally:
                    _BUCKET.reset(token)
            return _run_checked(f, args, kwargs)

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return one_call_at_a_time(lambda: call(args, kwargs))

        return wrapper  # type: ignore[return-value]

    return wrap(fn) if fn is not None else wrap


# --------------------------------------------------------------------------- messages
def _count(mask: jax.Array) -> int:
    return int(jnp.sum(mask))


def _range(x: jax.Array) -> str:
    finite = jnp.where(jnp.isfinite(x), x, jnp.nan)
    return f"min {float(jnp.nanmin(finite))!r}, max {float(jnp.nanmax(finite))!r}"


def listed_values(x: Any, bad: Any, show: int = 5) -> tuple[int, str]:
    """The count of ``x``'s entries where ``bad`` holds and the first ``show`` of them,
    in order, as text (``"2.0, 7.0, nan"``, ``", ..."`` after them when there are more),
    for a message."""
    x, bad = np.asarray(x).ravel(), np.asarray(bad).ravel()
    count = int(bad.sum())
    shown = ", ".join(repr(v) for v in x[bad][:show].tolist())
    return count, shown + (", ..." if count > show else "")


def _message(c: _Check) -> str:
    name, what = c.name, c.what
    x = c.arrays[0]
    if c.kind in ("finite", "positive", "nonnegative", "unit") and x.size:
        n_nan = _count(jnp.isnan(x))
        n_inf = _count(jnp.isinf(x))
        if n_nan or n_inf:
            return (
                f"{name} contains {n_nan} NaN and {n_inf} infinite values; all {what} "
                "must be finite. Drop or impute those observations first."
            )
    if c.kind == "positive":
        host = np.asarray(x)  # the values as given: the device may flush subnormals to 0
        tiny = _tiny(x.dtype)
        low = int(np.sum(host <= 0))
        tiny_low = int(np.sum((host > 0) & (host < tiny)))
        below = f"{low} values <= 0" if low else ""
        if tiny_low:
            below += (" and " if low else "") + (
                f"{tiny_low} subnormal values between 0 and it (flushed to 0 on the device)"
            )
        return (
            f"{name} must be strictly positive, at least the smallest normal "
            f"{np.dtype(x.dtype).name} ({float(tiny):.6g}); got {below} (min "
            f"{float(host.min())!r}). A predictive scale must be > 0: check that you "
            "passed standard deviations, not log-scales or variances of 0 (rescale the "
            "data, or compute in float64 with JAX_ENABLE_X64=1, for tinier scales)."
        )
    if c.kind == "nonnegative":
        return (
            f"{name} must be >= 0; got {_count(x < 0)} negative values. {what[0].upper()}"
            f"{what[1:]} are nonnegative."
        )
    if c.kind == "unit":
        outside = _count((x < 0) | (x > 1))
        return (
            f"{name} must lie in [0, 1]; got {outside} value{'s' if outside != 1 else ''} "
            f"outside it ({_range(x)}). "
            f"{what[0].upper() + what[1:]} are probabilities: check the input is not a raw "
            "score, a logit or a percentage."
        )
    if c.kind == "binary":
        num_bad, shown = listed_values(x, (x != 0) & (x != 1))
        return (
            f"{name} must hold binary labels 0 and 1; got {num_bad} other "
            f"value{'s' if num_bad != 1 else ''} ({shown}). Encode "
            "the positive class as 1 and the negative class as 0 (e.g. y == positive_label)."
        )
    if c.kind == "both_classes":
        only = 1 if bool(jnp.any(x == 1)) else 0
        return (
            f"{name} holds only class {only} ({x.size} labels); fitting a calibrator "
            "needs both classes. Use a larger or stratified calibration set."
        )
    if c.kind == "two_inside":
        host = np.asarray(x)
        inside = host[(host > 0) & (host < 1)]
        values, counts = np.unique(host, return_counts=True)
        shown = ", ".join(f"{v.item()!r} ({k}x)" for v, k in zip(values[:4], counts[:4], strict=True))
        return (
            f"{name} has {np.unique(inside).size} distinct values strictly between 0 and 1 "
            f"among its {host.size} values ({shown}{', ...' if values.size > 4 else ''}); "
            f"{what} needs at least 2. On PIT values at one point (e.g. all 1: every "
            "observation above its predictive) the map would be an arbitrary "
            "interpolation, not the empirical CDF of the calibration data. Check the "
            "predictive (location and scale), or use a larger calibration set."
        )
    if c.kind == "any_positive":
        return f"{name} are all 0; at least one observation needs {what} > 0."
    if c.kind == "sorted":
        strict = c.params[0]
        if not bool(_all_finite(x)):
            return f"{name} must be finite; got {np.asarray(x)!r}."
        return (
            f"{name} must be sorted in {'strictly increasing' if strict else 'nondecreasing'} order; "
            f"got {np.asarray(x)!r}. Sort them{' (and drop duplicates)' if strict else ''} "
            "first."
        )
    if c.kind == "nondecreasing_axis0":
        return (
            f"{name} must be nondecreasing along the level axis (axis 0) for every "
            "observation; sort them (np.sort(quantiles, axis=0)) to fix quantile crossing."
        )
    if c.kind in ("less_equal", "no_zero_or_one"):
        return f"{name} {what}."
    if c.kind == "class_range":
        k = c.params[0]
        return (
            f"{name} must hold class indices in [0, {k - 1}] ({what}); got values from "
            f"{int(jnp.min(x))} to {int(jnp.max(x))}."
        )
    if c.kind == "row_sums":
        dev = jnp.abs(jnp.sum(x.astype(jnp.float32), axis=-1) - 1)
        worst = float(jnp.max(dev))
        return (
            f"{name} rows must sum to 1; the worst row sums to {1.0 + worst:.6g} (off by "
            f"{worst:.3g}). Normalise the rows (e.g. with a softmax of the logits)."
        )
    return f"{name} has invalid {what}."


# --------------------------------------------------------------------------- conversion
def _float_dtype() -> Any:
    return default_float()


def default_float() -> Any:
    """JAX's default float dtype: float32, or float64 under x64 (compiles nothing,
    where ``jnp.zeros((), float).dtype`` compiled a program on a process's first call)."""
    return jax.dtypes.canonicalize_dtype(float)


def default_int() -> Any:
    """JAX's default integer dtype: int32, or int64 under x64 (compiles nothing)."""
    return jax.dtypes.canonicalize_dtype(int)


def as_float_array(x: Any, name: str) -> jax.Array:
    """Convert ``x`` to a floating JAX array.

    float32 and float64 are kept (float64 becomes float32 silently when JAX's x64 mode is
    off, as JAX itself does); float16 and bfloat16 are computed in float32; integers and
    booleans become the default float dtype. pandas Series and xarray DataArrays are
    read through ``numpy.asarray``.
    """
    if isinstance(x, jax.Array | jax.core.Tracer):
        arr = x
    else:
        if isinstance(x, str | bytes) or x is None:
            raise TypeError(
                f"{name} must be an array of numbers; got {type(x).__name__}. "
                "Pass a numpy or JAX array."
            )
        reject_masked(x, name)
        try:
            np_arr = np.asarray(x)
        except Exception as err:
            raise TypeError(
                f"{name} must be an array of numbers; got {type(x).__name__} "
                f"that numpy cannot convert ({err})."
            ) from err
        if np_arr.dtype == object or not (
            np.issubdtype(np_arr.dtype, np.number)
            or np_arr.dtype == bool
            or np_arr.dtype.name == "bfloat16"
        ):
            raise TypeError(
                f"{name} must be an array of numbers; got dtype {np_arr.dtype}. "
                "Convert it to a float array first."
            )
        if np.issubdtype(np_arr.dtype, np.complexfloating):
            raise TypeError(f"{name} must be real; got complex dtype {np_arr.dtype}.")
        if np_arr.dtype == np.float64 and not jax.config.read("jax_enable_x64"):
            np_arr = np_arr.astype(np.float32)
        elif not (np_arr.dtype == np.float32 or np_arr.dtype == np.float64):
            np_arr = np_arr.astype(
                np.float32 if np_arr.dtype.itemsize <= 2 else _float_dtype()
            )
        # device_put moves a large numpy array 2-4x faster than jnp.asarray on CPU.
        arr = jax.device_put(np_arr) if np_arr.ndim else jnp.asarray(np_arr)
        _remember_host_copy(arr, np_arr)
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real; got complex dtype {arr.dtype}.")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(_float_dtype())
    elif jnp.finfo(arr.dtype).bits < 32:
        arr = arr.astype(jnp.float32)  # float16 / bfloat16: compute in float32
    return arr


# --------------------------------------------------------------------------- shapes
def check_nonempty(x: Any, name: str) -> None:
    if x.size == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(x.shape)}); at least one value is needed."
        )


def check_ndim(x: Any, name: str, ndims: int | Sequence[int]) -> None:
    allowed = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if x.ndim not in allowed:
        want = " or ".join(f"{d}-D" for d in allowed)
        hint = (
            # scikit-learn's predict_proba of a binary classifier: [N, 2]
            f"For the two columns of a binary predict_proba, pass {name}[:, 1] (the "
            "probability of class 1)."
            if allowed == (1,) and x.ndim == 2 and x.shape[-1] == 2
            else "Reshape it (e.g. .ravel()) before calling."
        )
        raise ValueError(f"{name} must be {want}; got shape {tuple(x.shape)}. {hint}")


def check_same_shape(**arrays: Any) -> None:
    """All arrays must have the same shape (names come from the keywords)."""
    items = list(arrays.items())
    first_name, first = items[0]
    for name, arr in items[1:]:
        if tuple(arr.shape) != tuple(first.shape):
            raise ValueError(
                f"{name} has shape {tuple(arr.shape)} but {first_name} has shape "
                f"{tuple(first.shape)}; they must match (one value per observation)."
            )


def check_broadcastable(target: str, shape: tuple[int, ...], **arrays: Any) -> None:
    for name, arr in arrays.items():
        try:
            out = np.broadcast_shapes(tuple(arr.shape), shape)
        except ValueError:
            out = None
        if out != tuple(shape):
            raise ValueError(
                f"{name} has shape {tuple(arr.shape)}, which does not broadcast to the "
                f"shape {tuple(shape)} of {target}; pass one value per observation."
            )


# --------------------------------------------------------------------------- options
def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        opts = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {opts}; got {value!r}.")
    return value


def check_positive_int(
    value: Any, name: str, minimum: int = 1, maximum: int | None = None
) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(
            f"{name} must be an int >= {minimum}; got {type(value).__name__} {value!r}."
        )
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise ValueError(f"{name} must be an int >= {minimum}{upper}; got {value}.")
    return int(value)


#: The largest number of bins a metric accepts (the command line's ``--bins`` bound):
#: every bin holds a few arrays, and a binned estimate over more bins than this has
#: too few observations per bin to mean anything at any realistic N.
MAX_BINS = 10_000


#: The largest number of CDF levels a curve accepts: the curve's arrays have one entry
#: per level (10^9 levels would allocate gigabytes), and far below this a grid is exact
#: to better than its sampling error (``miscalibration_area`` with ``num_levels=None``
#: gives the exact integral). The command line's ``--num-levels`` stops at 10,000.
MAX_LEVELS = 1_000_000


def check_num_levels(value: Any, name: str = "num_levels") -> int:
    """A number of CDF levels: an int in ``[2, MAX_LEVELS]``."""
    num = check_positive_int(value, name, minimum=2)
    if num > MAX_LEVELS:
        raise ValueError(
            f"{name} must be an int in [2, {MAX_LEVELS}]; got {num}. The curve has "
            "one entry per level: a few hundred resolve it far below its sampling "
            "error (the default is 100); for the exact area use miscalibration_area "
            "with num_levels=None."
        )
    return num


def check_num_bins(value: Any, name: str = "bins") -> int:
    """A number of bins: an int in ``[1, MAX_BINS]``."""
    num = check_positive_int(value, name)
    if num > MAX_BINS:
        raise ValueError(
            f"{name} must be an int in [1, {MAX_BINS}]; got {num}. A binned estimate needs "
            "several observations per bin: use at most a few hundred bins (15 is "
            "usual), or pass explicit bin edges."
        )
    return num


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool; got {type(value).__name__} {value!r}.")
    return bool(value)


def check_level(value: Any, name: str = "level") -> float:
    """A probability strictly between 0 and 1 (a confidence level, alpha)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise TypeError(f"{name} must be a float in (0, 1); got {value!r}.")
    if not 0 < float(value) < 1:
        raise ValueError(f"{name} must be a float in (0, 1); got {value!r}.")
    return float(value)


# --------------------------------------------------------------------------- values
def check_finite(x: Any, name: str, what: str = "values") -> None:
    """NaN and inf are rejected."""
    record("finite", name, x, what=what)


def check_positive(x: Any, name: str) -> None:
    """Values must be finite and > 0."""
    record("positive", name, x)


def check_nonnegative(x: Any, name: str, what: str = "weights") -> None:
    """Values must be finite and >= 0."""
    record("nonnegative", name, x, what=what)


def check_any_positive(x: Any, name: str, what: str = "weight") -> None:
    """At least one value > 0 (e.g. weights that are not all 0)."""
    record("any_positive", name, x, what=what)


def check_in_unit_interval(x: Any, name: str, what: str = "values") -> None:
    """Values in [0, 1] (NaN fails)."""
    record("unit", name, x, what=what)


def check_binary_labels(y: Any, name: str = "y_true") -> None:
    """Values 0 or 1 only."""
    record("binary", name, y)


def check_both_classes(y: Any, name: str = "y_true") -> None:
    """Binary labels holding both classes (a fit needs both)."""
    record("both_classes", name, y)


def check_nondecreasing(x: Any, name: str, what: str = "") -> None:
    """Nondecreasing along axis 0."""
    record("nondecreasing_axis0", name, x, what=what)


def check_less_equal(a: Any, b: Any, name: str, what: str) -> None:
    """``a <= b`` elementwise; ``what`` is the message after the name."""
    record("less_equal", name, a, b, what=what)


def check_row_sums(x: Any, name: str, tol: float) -> None:
    record("row_sums", name, x, params=(float(tol),))


def check_finite_params(x: Any, name: str) -> None:
    check_finite(x, name, "parameters")


def check_pit(pit: Any, name: str = "pit") -> jax.Array:
    """PIT values: a 1-D, non-empty float array with values in [0, 1]."""
    u = as_float_array(pit, name)
    check_ndim(u, name, 1)
    check_nonempty(u, name)
    check_in_unit_interval(u, name, "PIT values")
    return u


def check_levels(levels: Any, name: str = "levels", *, strict: bool = True) -> None:
    """Levels: 1-D, finite, in [0, 1], increasing (strictly by default)."""
    check_ndim(levels, name, 1)
    check_nonempty(levels, name)
    check_in_unit_interval(levels, name, "levels")
    record("sorted", name, levels, params=(bool(strict),))


def check_edges(edges: Any, name: str = "bins") -> None:
    """Bin edges: 1-D with at least 2 entries, finite and nondecreasing."""
    if edges.ndim != 1 or edges.shape[0] < 2:
        raise ValueError(
            f"{name} as an array must be 1-D bin edges with at least 2 entries; got "
            f"shape {tuple(edges.shape)}. Pass e.g. np.linspace(0, 1, 11), or an int."
        )
    check_finite(edges, name, "edges")
    record("sorted", name, edges, params=(False,))


def check_class_labels(
    y: Any, name: str, num_classes: int, what: str = "one per column of the probabilities"
) -> jax.Array:
    """Integer class labels in ``[0, num_classes)``; returns them as an int32 array."""
    reject_masked(y, name)
    arr = y if isinstance(y, jax.Array | jax.core.Tracer) else np.asarray(y)
    if arr.dtype == object or not (
        jnp.issubdtype(arr.dtype, jnp.integer)
        or arr.dtype == bool
        or jnp.issubdtype(arr.dtype, jnp.floating)
    ):
        raise TypeError(
            f"{name} must hold integer class labels 0..{num_classes - 1}; got dtype "
            f"{arr.dtype}. Pass class indices (e.g. np.argmax of one-hot labels)."
        )
    if jnp.issubdtype(arr.dtype, jnp.floating):
        f = as_float_array(arr, name)
        record(
            "less_equal",
            name,
            f,
            jnp.round(f),
            what=(
                f"must hold integer class labels 0..{num_classes - 1}; got non-integer "
                "values. Pass class indices (e.g. np.argmax of one-hot labels)"
            ),
        )
        record(
            "less_equal",
            name,
            jnp.round(f),
            f,
            what=f"must hold integer class labels 0..{num_classes - 1}; got non-integers",
        )
        arr = jnp.where(jnp.isfinite(f), f, -1)
    elif arr.dtype != bool and np.dtype(arr.dtype).itemsize >= 4 and arr.dtype != np.int32:
        arr = _wide_labels(arr, name, int(num_classes), what)
    if isinstance(arr, np.ndarray):
        # converted on the host: jnp.asarray of a NumPy array compiles a program for
        # every shape (JAX 0.10), device_put none
        host = arr.astype(np.int32, copy=False)
        labels = jax.device_put(host)
        _remember_host_copy(labels, host)
    else:
        labels = jnp.asarray(arr).astype(jnp.int32)
    record("class_range", name, labels, params=(int(num_classes),), what=what)
    return labels


def _wide_labels(arr: Any, name: str, num_classes: int, what: str) -> Any:
    """Integer labels of a dtype that int32 may not hold (int64, uint32, uint64).

    Checked before the narrowing conversion, which would wrap ``2**32 + 1`` to 1: host
    arrays in NumPy (raising with the values found), JAX arrays by a recorded check on
    the wide array (NaN under ``jit``). Returns labels safe to convert to int32.
    """
    if isinstance(arr, np.ndarray):
        if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
            raise ValueError(
                f"{name} must hold class indices in [0, {num_classes - 1}] ({what}); "
                f"got values from {int(arr.min())} to {int(arr.max())}."
            )
        return arr.astype(np.int32)
    record("class_range", name, arr, params=(num_classes,), what=what)
    return jnp.where((arr >= 0) & (arr < num_classes), arr, 0)  # the check above fails


def result_dtype(*arrays: Any) -> Any:
    return jnp.result_type(*[a.dtype for a in arrays])
