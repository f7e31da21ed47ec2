"""Input validation shared by every public function.

Public functions call these helpers before their jittable kernels. Shape and dtype
are always checked; values (NaN, inf, ranges) only when the array is concrete, so the
same public function still works inside ``jax.jit`` and ``jax.vmap``, where documented
value behaviour (NaN out) replaces the value checks.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from types import FrameType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "as_float_array",
    "check_choice",
    "check_finite",
    "check_in_unit_interval",
    "check_positive",
    "check_same_shape",
    "check_nonempty",
    "check_levels",
    "check_pit",
    "check_positive_int",
    "is_concrete",
    "reset_float64_warning",
]

_FLOAT64_WARNED = False


def reset_float64_warning() -> None:
    """Re-arm the one-time float64 -> float32 warning (used by the tests)."""
    global _FLOAT64_WARNED
    _FLOAT64_WARNED = False


def _warn_float64_once(name: str) -> None:
    global _FLOAT64_WARNED
    if _FLOAT64_WARNED:
        return
    _FLOAT64_WARNED = True
    # Point the warning at the user's line: the first frame outside the package.
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        package_dir
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(
        f"{name} is float64 but JAX runs in float32 because x64 is disabled, so "
        "bayescal computes in float32. Set JAX_ENABLE_X64=1 (or "
        "jax.config.update('jax_enable_x64', True)) to keep float64. "
        "This warning is shown once.",
        UserWarning,
        stacklevel=level,
    )


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds values (not a tracer under jit/vmap/grad)."""
    return not isinstance(x, jax.core.Tracer)


def holds(predicate: Any, *arrays: Any) -> bool:
    """``all(predicate(*arrays))`` for concrete arrays; True when any array is traced.

    Evaluated under ``jax.ensure_compile_time_eval`` so that concrete arrays closed
    over by a function being traced by ``jit`` are still checked, on their device,
    instead of being staged into the computation.
    """
    if not all(is_concrete(a) for a in arrays):
        return True
    with jax.ensure_compile_time_eval():
        return bool(jnp.all(predicate(*arrays)))


def as_float_array(x: Any, name: str) -> jax.Array:
    """Convert ``x`` to a floating JAX array, keeping float32/float64.

    Integers and booleans become the default float dtype. A float64 input that has
    to be downcast because x64 is off triggers a one-time warning.
    """
    if isinstance(x, jax.Array):
        arr = x
    else:
        if isinstance(x, str | bytes) or x is None:
            raise TypeError(
                f"{name} must be an array of numbers; got {type(x).__name__}. "
                "Pass a numpy or JAX array."
            )
        try:
            np_arr = np.asarray(x)
        except Exception as err:  # pragma: no cover - exotic objects
            raise TypeError(
                f"{name} must be an array of numbers; got {type(x).__name__} "
                f"that numpy cannot convert ({err})."
            ) from err
        if np_arr.dtype == object or not (
            np.issubdtype(np_arr.dtype, np.number) or np_arr.dtype == bool
        ):
            raise TypeError(
                f"{name} must be an array of numbers; got dtype {np_arr.dtype}. "
                "Convert it to a float array first."
            )
        if np.issubdtype(np_arr.dtype, np.complexfloating):
            raise TypeError(f"{name} must be real; got complex dtype {np_arr.dtype}.")
        if (
            np_arr.dtype == np.float64
            and hasattr(x, "dtype")
            and not jax.config.read("jax_enable_x64")
        ):
            _warn_float64_once(name)
        if not np.issubdtype(np_arr.dtype, np.floating):
            np_arr = np_arr.astype(jnp.zeros((), dtype=float).dtype)
        if np_arr.dtype == np.float64 and not jax.config.read("jax_enable_x64"):
            np_arr = np_arr.astype(np.float32)
        # device_put moves a large numpy array 2-4x faster than jnp.asarray on CPU.
        arr = jax.device_put(np_arr) if np_arr.ndim else jnp.asarray(np_arr)
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real; got complex dtype {arr.dtype}.")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.zeros((), dtype=float).dtype)
    return arr


def check_nonempty(x: jax.Array, name: str) -> None:
    if x.size == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(x.shape)}); at least one value is needed."
        )


def check_ndim(x: jax.Array, name: str, ndims: int | Sequence[int]) -> None:
    allowed = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if x.ndim not in allowed:
        want = " or ".join(f"{d}-D" for d in allowed)
        raise ValueError(
            f"{name} must be {want}; got shape {tuple(x.shape)}. "
            "Reshape it (e.g. .ravel()) before calling."
        )


def check_same_shape(**arrays: jax.Array) -> None:
    """All arrays must have the same shape (names come from the keywords)."""
    items = list(arrays.items())
    first_name, first = items[0]
    for name, arr in items[1:]:
        if tuple(arr.shape) != tuple(first.shape):
            raise ValueError(
                f"{name} has shape {tuple(arr.shape)} but {first_name} has shape "
                f"{tuple(first.shape)}; they must match (one value per observation)."
            )


def check_broadcastable(target: str, shape: tuple[int, ...], **arrays: jax.Array) -> None:
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


def check_finite(x: jax.Array, name: str) -> None:
    """Raise when a concrete ``x`` holds NaN or inf."""
    if holds(_all_finite, x):
        return
    bad = ~np.isfinite(np.asarray(x))
    if bad.any():
        n_nan = int(np.isnan(np.asarray(x)).sum())
        n_inf = int(bad.sum()) - n_nan
        raise ValueError(
            f"{name} contains {n_nan} NaN and {n_inf} infinite values; all values must "
            "be finite. Drop or impute those observations first."
        )


@jax.jit
def _all_finite(x: jax.Array) -> jax.Array:
    # One streaming pass: x * 0 is 0 for finite x and NaN for NaN or +-inf, and a NaN
    # makes the sum NaN. About 4x faster than all(isfinite(x)) on CPU, which
    # materializes a boolean array first.
    return jnp.isfinite(jnp.sum(x * jnp.zeros((), x.dtype)))


def check_positive(x: jax.Array, name: str) -> None:
    """Raise when a concrete ``x`` has values <= 0 (or non-finite)."""
    check_finite(x, name)
    if holds(lambda a: a > 0, x):
        return
    arr = np.asarray(x)
    if (arr <= 0).any():
        raise ValueError(
            f"{name} must be strictly positive; got {int((arr <= 0).sum())} values "
            f"<= 0 (min {arr.min()!r}). A predictive scale must be > 0: check that "
            "you passed standard deviations, not log-scales or variances of 0."
        )


def check_in_unit_interval(x: jax.Array, name: str, what: str = "values") -> None:
    """Raise when a concrete ``x`` has NaN or values outside [0, 1]."""
    if holds(lambda a: (a >= 0) & (a <= 1), x):
        return
    arr = np.asarray(x)
    if np.isnan(arr).any():
        raise ValueError(
            f"{name} contains {int(np.isnan(arr).sum())} NaN values; {what} must lie in "
            "[0, 1]."
        )
    if ((arr < 0) | (arr > 1)).any():
        raise ValueError(
            f"{name} must lie in [0, 1]; got values outside it (min {arr.min()!r}, max "
            f"{arr.max()!r}). {what[0].upper() + what[1:]} are probabilities: check the "
            "input is not a raw score, a logit or a percentage."
        )


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        opts = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {opts}; got {value!r}.")
    return value


def check_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(
            f"{name} must be an int >= {minimum}; got {type(value).__name__} {value!r}."
        )
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value}.")
    return int(value)


def check_pit(pit: Any, name: str = "pit") -> jax.Array:
    """PIT values: a 1-D, non-empty float array with values in [0, 1]."""
    u = as_float_array(pit, name)
    check_ndim(u, name, 1)
    check_nonempty(u, name)
    check_in_unit_interval(u, name, "PIT values")
    return u


def check_levels(levels: jax.Array, name: str = "levels", *, strict: bool = True) -> None:
    """Levels: 1-D, finite, in [0, 1], increasing (strictly by default)."""
    check_ndim(levels, name, 1)
    check_nonempty(levels, name)
    if not is_concrete(levels):
        return
    arr = np.asarray(levels)
    check_in_unit_interval(levels, name, "levels")
    diffs = np.diff(arr)
    if (diffs <= 0).any() if strict else (diffs < 0).any():
        raise ValueError(
            f"{name} must be sorted in {'strictly ' if strict else ''}increasing order; "
            f"got {arr!r}. Sort them (and drop duplicates) first."
        )


def result_dtype(*arrays: jax.Array) -> jnp.dtype:
    return jnp.result_type(*[a.dtype for a in arrays])


# --- helpers added for the classification branch ---
__all__ += [
    "check_binary_labels",
    "check_both_classes",
    "check_class_labels",
    "check_edges",
    "check_nonnegative",
]


def check_binary_labels(y: jax.Array, name: str = "y_true") -> None:
    """Raise when a concrete ``y`` holds values other than 0 and 1 (or NaN)."""
    # Value checks of the classification helpers run in numpy on the host: no XLA
    # compilation per new input shape.
    if not is_concrete(y):
        return
    arr = np.asarray(y)
    if np.all((arr == 0) | (arr == 1)):
        return
    bad = np.unique(arr[(arr != 0) & (arr != 1)])
    shown = ", ".join(repr(v.item()) for v in bad[:5]) + (", ..." if bad.size > 5 else "")
    raise ValueError(
        f"{name} must hold binary labels 0 and 1; got other values ({shown}). Encode "
        "the positive class as 1 and the negative class as 0 (e.g. y == positive_label)."
    )


def check_both_classes(y: jax.Array, name: str = "y_true") -> None:
    """Raise when concrete binary labels hold only one class (a fit needs both)."""
    if not is_concrete(y):
        return
    n_pos = int(np.count_nonzero(np.asarray(y) == 1))
    if n_pos == 0 or n_pos == y.size:
        only = 1 if n_pos else 0
        raise ValueError(
            f"{name} holds only class {only} ({y.size} labels); fitting a calibrator "
            "needs both classes. Use a larger or stratified calibration set."
        )


def check_class_labels(y: Any, name: str, num_classes: int) -> jax.Array:
    """Integer class labels in ``[0, num_classes)``; returns them as an int32 array."""
    arr = y if isinstance(y, jax.Array) else np.asarray(y)
    if not (jnp.issubdtype(arr.dtype, jnp.integer) or arr.dtype == bool):
        if jnp.issubdtype(arr.dtype, jnp.floating) and is_concrete(arr):
            host = np.asarray(arr)
            if np.all(np.isfinite(host)) and np.all(host == np.round(host)):
                arr = host.astype(np.int64)
        if not jnp.issubdtype(arr.dtype, jnp.integer):
            raise TypeError(
                f"{name} must hold integer class labels 0..{num_classes - 1}; got dtype "
                f"{arr.dtype}. Pass class indices (e.g. np.argmax of one-hot labels)."
            )
    if is_concrete(arr) and arr.size:
        host = np.asarray(arr)
        if host.min() < 0 or host.max() >= num_classes:
            raise ValueError(
                f"{name} must hold class indices in [0, {num_classes - 1}] (one per "
                f"column of the probabilities); got values from {host.min()} to "
                f"{host.max()}."
            )
    return jnp.asarray(arr).astype(jnp.int32)


def check_nonnegative(x: jax.Array, name: str) -> None:
    """Raise when a concrete ``x`` has negative or non-finite values."""
    check_finite(x, name)
    if not is_concrete(x):
        return
    n_neg = int(np.count_nonzero(np.asarray(x) < 0))
    if not n_neg:
        return
    raise ValueError(
        f"{name} must be >= 0; got {n_neg} negative values. "
        "Weights are nonnegative observation weights."
    )


def check_edges(edges: jax.Array, name: str = "bins") -> None:
    """Bin edges: 1-D with at least 2 entries, finite and nondecreasing."""
    if edges.ndim != 1 or edges.shape[0] < 2:
        raise ValueError(
            f"{name} as an array must be 1-D bin edges with at least 2 entries; got "
            f"shape {tuple(edges.shape)}. Pass e.g. np.linspace(0, 1, 11), or an int."
        )
    if not is_concrete(edges):
        return
    arr = np.asarray(edges)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} edges must be finite; got {arr!r}.")
    if np.any(np.diff(arr) < 0):
        raise ValueError(
            f"{name} edges must be sorted in nondecreasing order; got {arr!r}. Sort them."
        )
