"""Short reprs: results and fitted calibrators print their headline numbers, not arrays.

One helper, :func:`summarize`, turns any field value (a scalar, an array of any size, a
JAX tracer, a pytree of those) into a string of bounded length, in the spirit of
NumPy's threshold summarization: a scalar prints as its number, a short vector in full,
a longer array as its size, dtype and mean. :func:`short_repr` puts the fields of an
object together as ``Name(field=..., ...)``; the result NamedTuples and every
:func:`~bayescal._src.pytree.pytree_dataclass` use it as their ``__repr__``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

__all__ = ["summarize", "short_repr"]

#: Vectors of at most this many elements print in full; longer ones are summarized.
_FULL = 6
#: Longest text of one field; a longer one falls back to its short summary.
_FIELD_CHARS = 90


def _number(x: Any) -> str:
    """A scalar as NumPy prints it (the shortest text that reads back to the value)."""
    return str(x) if isinstance(x, (bool, int, float, str)) else str(np.asarray(x)[()])


def _shape_text(dtype: Any, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


def _array(x: Any) -> str:
    shape = tuple(getattr(x, "shape", ()))
    dtype = getattr(x, "dtype", None)
    if isinstance(x, jax.core.Tracer):
        return f"<traced {_shape_text(dtype, shape)}>"
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return f"<{_shape_text(dtype, shape)} keys>"
    a = np.asarray(x)
    if a.ndim == 0:
        return _number(a)
    if a.ndim == 1 and a.size <= _FULL:
        return np.array2string(a, precision=4, separator=", ", max_line_width=10**6)
    head = f"{a.size} {a.dtype} values" if a.ndim == 1 else _shape_text(a.dtype, a.shape)
    if a.size == 0 or a.dtype.kind not in "biuf":
        return f"<{head}>"
    with np.errstate(all="ignore"):
        mean = np.mean(a, dtype=np.float64)
    return f"<{head}, mean {mean:.4g}>"


def summarize(value: Any) -> str:
    """Bounded text for one field value: a number, a short vector, or a summary.

    Never raises: a value it cannot read (a deleted buffer, say) prints as its type.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal._src.reprs import summarize
    >>> summarize(np.float32(0.25)), summarize(np.array([1.0, 2.0]))
    ('0.25', '[1., 2.]')
    >>> summarize(np.zeros(100_000, np.float32))
    '<100000 float32 values, mean 0>'
    """
    try:
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return _array(value)
        if hasattr(value, "_fields") or hasattr(type(value), "_data_fields"):
            text = repr(value)  # a NamedTuple or a fitted calibrator: its own repr
        elif isinstance(value, dict):
            text = "{" + ", ".join(f"{k!r}: {summarize(v)}" for k, v in value.items()) + "}"
        elif isinstance(value, (tuple, list)):
            inner = ", ".join(summarize(v) for v in value)
            text = f"({inner}{',' if len(value) == 1 else ''})" if isinstance(
                value, tuple) else f"[{inner}]"
        else:
            text = repr(value)
        if len(text) <= _FIELD_CHARS:
            return text
        if isinstance(value, (tuple, list, dict)) and len(value) > 0:
            kinds = {type(v).__name__ for v in value.values()} if isinstance(
                value, dict) else {type(v).__name__ for v in value}
            kind = kinds.pop() if len(kinds) == 1 else "values"
            return f"<{type(value).__name__} of {len(value)} {kind}>"
        leaves = jax.tree_util.tree_leaves(value)
        return f"<{type(value).__name__} of {len(leaves)} arrays>"
    except Exception:  # a repr must never fail
        return f"<{type(value).__name__}>"


def short_repr(obj: Any, fields: tuple[str, ...]) -> str:
    """``Name(field=summary, ...)`` over ``fields`` of ``obj``, in that order."""
    parts = ", ".join(f"{f}={summarize(getattr(obj, f))}" for f in fields)
    return f"{type(obj).__name__}({parts})"
