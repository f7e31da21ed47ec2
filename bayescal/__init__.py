"""bayescal: measure and repair the calibration of probabilistic predictions, in JAX.

Submodules: :mod:`bayescal.core`, :mod:`bayescal.regression`,
:mod:`bayescal.classification`, and the optional adapters :mod:`bayescal.numpyro`,
:mod:`bayescal.arviz` and :mod:`bayescal.plot` (imported on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

from bayescal._src.curve import CalibrationCurve

__version__ = "0.1.0"
__all__ = ["CalibrationCurve", "__version__"]

_LAZY = ("core", "regression", "classification", "numpyro", "arviz", "plot", "cli")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"bayescal.{name}")
    raise AttributeError(f"module 'bayescal' has no attribute {name!r}")
