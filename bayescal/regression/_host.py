"""NumPy arithmetic that several regression modules' host twins share.

Each NumPy twin (the host path: small concrete inputs on a CPU, see
:mod:`bayescal._src.host` for the rule and the switch) lives beside its kernel, in its
method's module, as ``_twin_<name>``; this module holds only what twins of several
modules use, and imports no other module of the branch (no import circle). Twins
equal their kernels (tests/test_host_path.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayescal._src.host import _normal, _vector, erfc


def ndtr(z: Any) -> np.ndarray:
    """The standard normal CDF in float64, ``erfc(-z / sqrt 2) / 2`` (accurate tails)."""
    z = np.asarray(z, np.float64)
    return 0.5 * erfc(-z * math.sqrt(0.5))


def _normal_predictive(
    y_true: Any, loc: Any, scale: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``y``, ``scale`` and the standardized residual ``z`` in the kernels' arithmetic
    (``(y - loc) / scale`` in the common dtype), or None."""
    y, m, s = _vector(y_true), _vector(loc), _vector(scale)
    if y is None or m is None or s is None or not y.shape == m.shape == s.shape:
        return None
    if not y.dtype == m.dtype == s.dtype:
        return None  # the kernel's promotion decides
    if not (_normal(y) and _normal(m) and _normal(s, 0) and s.min() > 0):
        return None
    d = y - m
    if not _normal(d):
        return None
    z = d / s
    return (y, s, z) if _normal(z) else None


