"""Saving and loading fitted calibrators as ``.npz`` files (never pickle)."""

from __future__ import annotations

import json
import os
from typing import Any

import jax.numpy as jnp
import numpy as np

from bayescal.classification._calibrators import (
    BetaCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    OneVsRestCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
)

__all__ = ["save_calibrator", "load_calibrator"]

FORMAT = "bayescal.calibrator/1"
# type[Any]: the classes get _data_fields / _meta_fields at run time (see _pytree).
_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        PlattCalibrator,
        IsotonicCalibrator,
        HistogramBinningCalibrator,
        BetaCalibrator,
        TemperatureCalibrator,
        OneVsRestCalibrator,
    )
}
_NESTED = "calibrators"  # the one field holding a tuple of calibrators


def _encode(cal: Any, arrays: dict[str, np.ndarray], prefix: str) -> dict[str, Any]:
    name = type(cal).__name__
    if _TYPES.get(name) is not type(cal):
        raise TypeError(
            f"save_calibrator saves bayescal calibrators ({', '.join(_TYPES)}); got "
            f"{name}. For cross_calibrate results save each of result.calibrators."
        )
    spec: dict[str, Any] = {"type": name, "arrays": {}, "meta": {}, "nested": []}
    for field in cal._meta_fields:
        spec["meta"][field] = getattr(cal, field)
    for field in cal._data_fields:
        value = getattr(cal, field)
        if field == _NESTED:
            spec["nested"] = [
                _encode(c, arrays, f"{prefix}{i}.") for i, c in enumerate(value)
            ]
        else:
            key = f"{prefix}{field}"
            arrays[key] = np.asarray(value)
            spec["arrays"][field] = key
    return spec


def _decode(spec: dict[str, Any], arrays: Any) -> Any:
    kind: Any = spec.get("type")  # any JSON value; unknown ones give None below
    cls = _TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown calibrator type {kind!r} in the file.")
    kwargs: dict[str, Any] = dict(spec["meta"])
    for field, key in spec["arrays"].items():
        kwargs[field] = jnp.asarray(arrays[key])
    if cls is OneVsRestCalibrator:
        kwargs[_NESTED] = tuple(_decode(s, arrays) for s in spec["nested"])
    return cls(**kwargs)


def save_calibrator(calibrator: Any, path: str | os.PathLike) -> None:
    """Save a fitted calibrator to an ``.npz`` file (arrays + a JSON description).

    Parameters
    ----------
    calibrator : PlattCalibrator, IsotonicCalibrator, HistogramBinningCalibrator, \
BetaCalibrator, TemperatureCalibrator or OneVsRestCalibrator
        What a ``fit_*`` function returned.
    path : str or path-like
        File to write (written as given; no suffix is added).

    Notes
    -----
    The file is a numpy ``.npz`` archive: every array field under its own name,
    stored in its dtype, and a ``__spec__`` entry holding UTF-8 JSON with the class
    name, the option fields and the format version (``bayescal.calibrator/1``).
    Nothing is pickled, so :func:`load_calibrator` reads it with
    ``allow_pickle=False`` and a file can never run code. The round trip is exact:
    same class, same options, bitwise equal arrays of the same dtype.

    Examples
    --------
    >>> import os, tempfile
    >>> from bayescal.classification import fit_platt, load_calibrator, save_calibrator
    >>> cal = fit_platt([1, 0, 0], [5.0, -4.0, 1.0], input="score")
    >>> path = os.path.join(tempfile.mkdtemp(), "platt.npz")
    >>> save_calibrator(cal, path)
    >>> same = load_calibrator(path)
    >>> bool(same.a == cal.a), same.input
    (True, 'score')
    """
    arrays: dict[str, np.ndarray] = {}
    spec = {"format": FORMAT, "calibrator": _encode(calibrator, arrays, "")}
    blob = np.frombuffer(json.dumps(spec).encode("utf-8"), dtype=np.uint8)
    # dict[str, Any]: numpy's stubs check ** entries against savez's allow_pickle.
    entries: dict[str, Any] = arrays
    with open(path, "wb") as fh:
        np.savez(fh, __spec__=blob, **entries)


def load_calibrator(path: str | os.PathLike) -> Any:
    """Load a calibrator written by :func:`save_calibrator`.

    Parameters
    ----------
    path : str or path-like
        The ``.npz`` file.

    Returns
    -------
    The calibrator, of the class it was saved from.

    Notes
    -----
    Reads with ``np.load(..., allow_pickle=False)``: object arrays are refused, so
    loading never unpickles. A float64 calibrator loaded while JAX's x64 mode is off
    becomes float32 (JAX cannot hold float64 then).

    Examples
    --------
    See :func:`save_calibrator`.
    """
    with np.load(path, allow_pickle=False) as archive:
        if "__spec__" not in archive.files:
            raise ValueError(
                f"{os.fspath(path)!r} is not a bayescal calibrator file (no __spec__ "
                "entry); write it with save_calibrator."
            )
        spec = json.loads(archive["__spec__"].tobytes().decode("utf-8"))
        if spec.get("format") != FORMAT:
            raise ValueError(
                f"unsupported calibrator file format {spec.get('format')!r}; this "
                f"version of bayescal reads {FORMAT!r}."
            )
        arrays = {name: archive[name] for name in archive.files}
    return _decode(spec["calibrator"], arrays)
