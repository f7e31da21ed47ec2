"""bayescal: measure and repair the calibration of probabilistic predictions, in JAX.

Submodules: :mod:`bayescal.core`, :mod:`bayescal.regression`,
:mod:`bayescal.classification`, and the optional adapters :mod:`bayescal.numpyro`,
:mod:`bayescal.arviz` and :mod:`bayescal.plot` (imported on first use).
:func:`enable_compilation_cache` switches on JAX's persistent compilation cache, so
that a new process loads bayescal's compiled programs from disk.
"""

from __future__ import annotations

import importlib
from typing import Any

from bayescal._src import pytree as _pytree
from bayescal._src.curve import CalibrationCurve

__version__ = "0.1.0"
__all__ = ["CalibrationCurve", "__version__", "enable_compilation_cache"]

_LAZY = ("core", "regression", "classification", "numpyro", "arviz", "plot", "cli")


def _import_branches() -> None:
    """Enter every fitted class in the registry that calibrator files are read with (a
    fresh process that loads a file has not always imported its branch)."""
    for branch in ("classification", "regression"):
        importlib.import_module(f"bayescal.{branch}")


_pytree.BEFORE_LOOKUP.append(_import_branches)


def __getattr__(name: str) -> Any:
    if name == "enable_compilation_cache":
        from bayescal._src.compilation_cache import enable_compilation_cache

        return enable_compilation_cache
    if name in _LAZY:
        return importlib.import_module(f"bayescal.{name}")
    raise AttributeError(f"module 'bayescal' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_LAZY))
