"""Saving and loading calibrators: the one function pair of :mod:`bayescal.core`."""

from bayescal._src.calibrator_io import load_calibrator, save_calibrator

__all__ = ["save_calibrator", "load_calibrator"]
