"""Saving and loading every fitted object of both branches (``.npz``, never pickle)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import reprlib
import secrets
import stat
import zipfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src.pytree import REGISTRY, registered

__all__ = ["save_calibrator", "load_calibrator", "CalibratorFileError", "FORMAT"]

FORMAT = "bayescal.calibrator/1"
_NESTED = "calibrators"  # a field holding a tuple of fitted objects


class CalibratorFileError(ValueError):
    """A calibrator file that cannot be read or holds invalid fields.

    Raised by :func:`load_calibrator` for every kind of bad file (not an ``.npz``
    archive, no or malformed description, unknown class, missing, extra or invalid
    fields); the message starts with the file name. A ``ValueError`` subclass.
    """


# ----------------------------------------------------------------------- field rules
def _finite(a: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(a)))


def _in_unit(a: np.ndarray) -> bool:
    return bool(np.all((a >= 0) & (a <= 1)))


def _nondecreasing(a: np.ndarray) -> bool:
    return a.ndim == 0 or bool(np.all(np.diff(a, axis=-1) >= 0))


def _eps_ok(v: Any) -> bool:
    return v is None or (
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 0.5
    )


def _number(v: Any) -> bool:
    """A finite JSON number (not a bool, not NaN or Infinity, which json also reads)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _scalar(*names: str) -> list[tuple[str, Callable[[dict[str, Any]], bool], str]]:
    return [(n, lambda d, n=n: d[n].shape == (), "a scalar (shape ())") for n in names]


def _later_defaults(cls: Any, missing: set[str]) -> dict[str, Any]:
    """The defaults of ``cls``'s option fields in ``missing`` that have one."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    return {
        name: fields[name].default
        for name in missing
        if name in fields and fields[name].default is not dataclasses.MISSING
    }


def _num_groups_rule() -> tuple[str, Callable[[dict[str, Any]], bool], str]:
    return (
        "num_groups",
        lambda d: d["num_groups"] is None
        or (
            isinstance(d["num_groups"], int)
            and not isinstance(d["num_groups"], bool)
            and d["num_groups"] >= 1
        ),
        "None or an int >= 1",
    )


def _groups_rules() -> list[tuple[str, Callable[[dict[str, Any]], bool], str]]:
    """A conformal quantile: a scalar, or one per Mondrian group."""
    return [
        _num_groups_rule(),
        (
            "quantile",
            lambda d: d["quantile"].shape
            == (() if d["num_groups"] is None else (d["num_groups"],)),
            "a scalar, or one per group (shape [num_groups])",
        ),
    ]


def _vector(name: str, minimum: int) -> tuple[str, Callable[[dict[str, Any]], bool], str]:
    return (
        name,
        lambda d: d[name].ndim == 1 and d[name].shape[0] >= minimum,
        f"1-D with at least {minimum} entries",
    )


def _alpha() -> tuple[str, Callable[[dict[str, Any]], bool], str]:
    return (
        "alpha",
        lambda d: _number(d["alpha"]) and 0 < d["alpha"] < 1,
        "a float in (0, 1)",
    )


_POSITIVE = "> 0, at least the smallest normal float of the compute dtype"

#: The classes a one-vs-rest calibrator holds (fit_one_vs_rest's methods).
_BINARY = (
    "PlattCalibrator",
    "IsotonicCalibrator",
    "HistogramBinningCalibrator",
    "BetaCalibrator",
)


def _matrix_rules() -> list[tuple[str, Callable[[dict[str, Any]], bool], str]]:
    """A square ``coef [C, C]`` (C >= 2) and an ``intercept [C]``."""
    return [
        (
            "coef",
            lambda d: d["coef"].ndim == 2
            and d["coef"].shape[0] == d["coef"].shape[1] >= 2,
            "a square [C, C] matrix with C >= 2",
        ),
        (
            "intercept",
            lambda d: d["intercept"].shape == d["coef"].shape[:1],
            "1-D with one entry per row of coef",
        ),
    ]


def _venn_table_rules() -> list[tuple[str, Callable[[dict[str, Any]], bool], str]]:
    """Venn-ABERS' ``p0_table`` and ``p1_table``: nondecreasing probabilities, one per
    threshold."""
    return [
        (field, check, what)
        for field in ("p0_table", "p1_table")
        for check, what in (
            (lambda d, f=field: _in_unit(d[f]), "probabilities in [0, 1]"),
            (lambda d, f=field: _nondecreasing(d[f]), "nondecreasing"),
            (
                lambda d, f=field: d[f].shape == d["thresholds"].shape,
                "the shape of thresholds",
            ),
        )
    ] + [
        (
            "p1_table",
            lambda d: bool(np.all(d["p0_table"] <= d["p1_table"])),
            "at least p0_table at every threshold (each prediction is the interval "
            "[p0, p1])",
        )
    ]


def _rules(cls_name: str) -> list[tuple[str, Callable[[dict[str, Any]], bool], str]]:
    """(field, predicate over all fields, what must hold) per class."""
    table: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool], str]]] = {
        "PlattCalibrator": [
            *_scalar("a", "b"),
            ("input", lambda d: d["input"] in ("prob", "score"), "'prob' or 'score'"),
            ("eps", lambda d: _eps_ok(d["eps"]), "None or a float in (0, 0.5)"),
        ],
        "IsotonicCalibrator": [
            _vector("thresholds", 1),
            ("thresholds", lambda d: _nondecreasing(d["thresholds"]), "nondecreasing"),
            ("values", lambda d: _in_unit(d["values"]), "probabilities in [0, 1]"),
            ("values", lambda d: _nondecreasing(d["values"]), "nondecreasing"),
            (
                "values",
                lambda d: d["values"].shape == d["thresholds"].shape,
                "the shape of thresholds",
            ),
        ],
        "CenteredIsotonicCalibrator": [
            _vector("thresholds", 1),
            ("thresholds", lambda d: _nondecreasing(d["thresholds"]), "nondecreasing"),
            ("values", lambda d: _in_unit(d["values"]), "probabilities in [0, 1]"),
            ("values", lambda d: _nondecreasing(d["values"]), "nondecreasing"),
            (
                "values",
                lambda d: d["values"].shape == d["thresholds"].shape,
                "the shape of thresholds",
            ),
        ],
        "VennAbersCalibrator": [
            _vector("thresholds", 2),
            ("thresholds", lambda d: _nondecreasing(d["thresholds"]), "nondecreasing"),
            *_venn_table_rules(),
        ],
        "CrossVennAbersCalibrator": [
            (
                "thresholds",
                lambda d: d["thresholds"].ndim == 2
                and d["thresholds"].shape[0] >= 2
                and d["thresholds"].shape[1] >= 2,
                "2-D [K, N + 1] with K >= 2 folds and N >= 1",
            ),
            ("thresholds", lambda d: _nondecreasing(d["thresholds"]), "nondecreasing"),
            *_venn_table_rules(),
        ],
        "HistogramBinningCalibrator": [
            _vector("edges", 2),
            ("edges", lambda d: _nondecreasing(d["edges"]), "nondecreasing"),
            ("values", lambda d: _in_unit(d["values"]), "probabilities in [0, 1]"),
            (
                "values",
                lambda d: d["values"].shape == (d["edges"].shape[0] - 1,),
                "one value per bin (one fewer than the edges)",
            ),
        ],
        "BetaCalibrator": [
            *_scalar("a", "b", "c"),
            ("a", lambda d: bool(np.all(d["a"] >= 0)), ">= 0"),
            ("b", lambda d: bool(np.all(d["b"] >= 0)), ">= 0"),
            ("eps", lambda d: _eps_ok(d["eps"]), "None or a float in (0, 0.5)"),
        ],
        "ScalingBinningCalibrator": [
            *_scalar("a", "b"),
            _vector("edges", 2),
            (
                "edges",
                lambda d: _in_unit(d["edges"]) and _nondecreasing(d["edges"]),
                "in [0, 1], nondecreasing",
            ),
            (
                "values",
                lambda d: _in_unit(d["values"]) and _nondecreasing(d["values"]),
                "probabilities in [0, 1], nondecreasing",
            ),
            (
                "values",
                lambda d: d["values"].shape == (d["edges"].shape[0] - 1,),
                "one value per bin (one fewer than the edges)",
            ),
            ("eps", lambda d: _eps_ok(d["eps"]), "None or a float in (0, 0.5)"),
        ],
        "BBQCalibrator": [
            (
                "edges",
                lambda d: d["edges"].ndim == 2
                and d["edges"].shape[0] >= 1
                and d["edges"].shape[1] == d["edges"].shape[0] + 1,
                "2-D [M, M + 1] with M >= 1 models",
            ),
            (
                "edges",
                lambda d: _in_unit(d["edges"]) and _nondecreasing(d["edges"]),
                "in [0, 1], nondecreasing along each row",
            ),
            (
                "values",
                lambda d: d["values"].shape == (d["edges"].shape[0],) * 2,
                "[M, M] (one row of bin values per model)",
            ),
            ("values", lambda d: _in_unit(d["values"]), "probabilities in [0, 1]"),
            (
                "weights",
                lambda d: d["weights"].shape == (d["edges"].shape[0],)
                and _in_unit(d["weights"])
                and abs(float(np.sum(d["weights"])) - 1) < 1e-3,
                "[M] model probabilities summing to 1",
            ),
            (
                "estimate",
                lambda d: d["estimate"] in ("frequency", "posterior"),
                "'frequency' or 'posterior'",
            ),
            ("n_prime", lambda d: _number(d["n_prime"]) and d["n_prime"] > 0, "a number > 0"),
            ("c", lambda d: _number(d["c"]) and d["c"] >= 1, "a number >= 1"),
        ],
        "SplineCalibrator": [
            _vector("knots", 3),
            ("knots", lambda d: _nondecreasing(d["knots"]), "nondecreasing"),
            (
                "coef",
                lambda d: d["coef"].shape == d["knots"].shape,
                "the shape of knots (one coefficient per basis function)",
            ),
            ("eps", lambda d: _eps_ok(d["eps"]), "None or a float in (0, 0.5)"),
        ],
        "TemperatureCalibrator": [
            *_scalar("temperature"),
            ("temperature", lambda d: _positive(d["temperature"]), _POSITIVE),
        ],
        "VectorScalingCalibrator": [
            _vector("coef", 2),
            (
                "intercept",
                lambda d: d["intercept"].shape == d["coef"].shape,
                "the shape of coef",
            ),
        ],
        "MatrixScalingCalibrator": _matrix_rules(),
        "DirichletCalibrator": [
            *_matrix_rules(),
            ("eps", lambda d: _eps_ok(d["eps"]), "None or a float in (0, 0.5)"),
        ],
        "IsotonicLevelCalibrator": [
            _vector("raw", 2),
            (
                "raw",
                lambda d: _in_unit(d["raw"]) and _nondecreasing(d["raw"]),
                "levels in [0, 1], nondecreasing",
            ),
            (
                "calibrated",
                lambda d: d["calibrated"].shape == d["raw"].shape,
                "the shape of raw",
            ),
            (
                "calibrated",
                lambda d: _in_unit(d["calibrated"]) and _nondecreasing(d["calibrated"]),
                "levels in [0, 1], nondecreasing",
            ),
        ],
        "ConformalCalibrator": [
            *_groups_rules(),
            (
                "quantile",
                lambda d: bool(np.all(d["quantile"] >= 0)),
                ">= 0 (a quantile of |residuals|)",
            ),
            _alpha(),
            ("normalized", lambda d: isinstance(d["normalized"], bool), "true or false"),
        ],
        "ConformalizedQuantileCalibrator": [*_groups_rules(), _alpha()],
        "DensityRatio": [
            _vector("coef", 1),
            *_scalar("intercept"),
        ],
        "ConformalPredictiveSystem": [
            _vector("residuals", 1),
            ("normalized", lambda d: isinstance(d["normalized"], bool), "true or false"),
            _num_groups_rule(),
            (
                "counts",
                lambda d: d["counts"].shape == (d["num_groups"] or 1,)
                and bool(np.all(d["counts"] >= 1))
                and int(np.sum(d["counts"])) == d["residuals"].shape[0],
                "one count >= 1 per group, summing to the number of residuals",
            ),
            (
                "residuals",
                lambda d: all(
                    _nondecreasing(part)
                    for part in np.split(d["residuals"], np.cumsum(d["counts"])[:-1])
                ),
                "sorted within each group",
            ),
        ],
        "SigmaScalingCalibrator": [
            *_scalar("factor"),
            ("factor", lambda d: _positive(d["factor"]), _POSITIVE),
            (
                "family",
                lambda d: d["family"] in ("normal", "student_t", "laplace"),
                "'normal', 'student_t' or 'laplace'",
            ),
            (
                "df",
                lambda d: d["df"] is None or (_number(d["df"]) and d["df"] > 0),
                "None or a positive number",
            ),
        ],
    }
    return table.get(cls_name, [])


# ------------------------------------------------------------------------ encoding
def _encode(obj: Any, arrays: dict[str, np.ndarray], prefix: str) -> dict[str, Any]:
    name = type(obj).__name__
    if REGISTRY.get(name) is not type(obj):
        raise TypeError(
            f"save_calibrator saves the fitted objects of bayescal ({', '.join(sorted(REGISTRY))}); "
            f"got {name}. For cross_calibrate results save each of result.calibrators."
        )
    spec: dict[str, Any] = {"type": name, "arrays": {}, "meta": {}, "nested": []}
    for field in obj._meta_fields:
        spec["meta"][field] = getattr(obj, field)
    for field in obj._data_fields:
        value = getattr(obj, field)
        if field == _NESTED:
            spec["nested"] = [
                _encode(c, arrays, f"{prefix}{i}.") for i, c in enumerate(value)
            ]
        else:
            key = f"{prefix}{field}"
            arrays[key] = np.asarray(value)
            spec["arrays"][field] = key
    return spec


def save_calibrator(calibrator: Any, path: str | os.PathLike) -> None:
    """Save any fitted object of bayescal to an ``.npz`` file (arrays + JSON).

    Works for the calibrators of both branches (``fit_platt``, ``fit_isotonic``,
    ``fit_histogram_binning``, ``fit_beta``, ``fit_temperature``, ``fit_one_vs_rest``,
    ``fit_scaling_binning``, ``fit_bbq``, ``fit_spline``,
    ``fit_isotonic_recalibrator``, ``fit_sigma_scaling``, ...): everything
    registered as a fitted pytree.

    Parameters
    ----------
    calibrator : fitted calibrator
        What a ``fit_*`` function returned.
    path : str or path-like
        File to write (written as given; no suffix is added). An existing file is
        replaced whole and atomically; a symbolic link is followed (its target is
        replaced, the link kept).

    Raises
    ------
    TypeError
        When ``calibrator`` is not a fitted object of bayescal.
    ValueError
        When ``path`` is an existing folder or not a regular file (a device, a FIFO,
        a socket): nothing is written there.
    OSError
        When the file cannot be written (e.g. ``ENOSPC``, a full disk): the previous
        file at ``path``, if any, is left as it was and no temporary file remains.

    See Also
    --------
    load_calibrator : The inverse, validating every field.

    Notes
    -----
    The file is a numpy ``.npz`` archive: every array field under its own name, in its
    dtype, and a ``__spec__`` entry holding UTF-8 JSON with the class name, the option
    fields and the format version (``bayescal.calibrator/1``). Nothing is pickled, so a
    file can never run code. The round trip is exact: same class, same options,
    bitwise-equal arrays of the same dtype.

    The file is written to a temporary file in the same folder, flushed to disk
    (``fsync``) and renamed over ``path`` (``os.replace``): a failed or interrupted
    save never leaves a truncated file, and the previous calibrator stays loadable. A
    new file gets the mode of the user's umask, a replaced one keeps its mode.

    Examples
    --------
    A round trip is shown under :class:`bayescal.core.Calibrator` (a fitted object
    comes from a branch, which ``bayescal._src`` does not import).
    """
    arrays: dict[str, np.ndarray] = {}
    spec = {"format": FORMAT, "calibrator": _encode(calibrator, arrays, "")}
    _check_savable(spec["calibrator"], arrays)
    blob = np.frombuffer(json.dumps(spec).encode("utf-8"), dtype=np.uint8)
    entries: dict[str, Any] = arrays
    target = _save_target(path)
    tmp, fd = _create_temporary(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, __spec__=blob, **entries)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))  # keep a replaced mode
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(os.path.dirname(target))


def _check_savable(spec: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Refuse to write a file that load_calibrator would refuse (NaN fields, a batch).

    A ``ValueError`` naming the field: e.g. a batch of calibrators stacked by ``vmap``
    (a Platt ``a`` of shape ``(3,)``), or one fitted under ``jit`` on invalid data (NaN).
    """
    fields: dict[str, Any] = dict(spec["meta"])
    for field, key in spec["arrays"].items():
        problem = _array_problem(arrays[key], spec["type"], field)
        if problem:
            raise ValueError(
                f"save_calibrator: {spec['type']}.{field}: {problem}; a file "
                "with it could not be loaded."
            )
        fields[field] = arrays[key]
    problem = _field_problem(spec["type"], fields)
    if problem:
        raise ValueError(
            f"save_calibrator: {problem}; a file with it could not be loaded. A batch of "
            "calibrators (from vmap or stacking) is saved one by one, e.g. "
            "jax.tree_util.tree_map(lambda x: x[i], calibrator)."
        )
    for sub in spec["nested"]:
        _check_savable(sub, arrays)


def _save_target(path: str | os.PathLike) -> str:
    """The regular file that ``save_calibrator(..., path)`` replaces (links followed)."""
    name = os.fspath(path)
    target = os.path.realpath(name)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    if stat.S_ISDIR(mode):
        raise ValueError(
            f"save_calibrator: path {name!r} is an existing folder; give a file path "
            "(e.g. inside it: os.path.join(path, 'calibrator.npz'))"
        )
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"save_calibrator: path {name!r} exists and is not a regular file (a "
            "device, FIFO or socket); nothing was written; give a file path"
        )
    return target


def _create_temporary(target: str) -> tuple[str, int]:
    """A new file beside ``target`` (same filesystem), created with the umask's mode."""
    folder, base = os.path.split(target)
    while True:
        tmp = os.path.join(folder, f".tmp-bayescal-{secrets.token_hex(6)}-{base[:64]}")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue


def _fsync_folder(folder: str) -> None:
    """Flush the rename to disk where the platform allows it (best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ------------------------------------------------------------------------ decoding
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60


def _short(value: Any) -> str:
    """A bounded repr (a tampered field may be huge or deeply nested)."""
    return _REPR.repr(value)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype ``jnp.asarray`` gives an array of ``dtype`` (float64 only under x64)."""
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


#: Array fields that hold counts: int32 (or int64 within int32's range), not floats.
_INT_FIELDS = {("ConformalPredictiveSystem", "counts")}


def _array_problem(a: np.ndarray, kind: str = "", field: str = "") -> str | None:
    """What is wrong with an array field whatever the class, or None.

    Every array field of a fitted calibrator is a float32 or float64 array of finite
    values that survive the conversion to the compute dtype (float32 unless x64):
    ``1e300`` would become inf there, and an int64 ``2**40`` would wrap to 0. (Values
    that must stay positive are checked by their class's rules, :func:`_positive`.)
    The fields of ``_INT_FIELDS`` are int32 counts instead.
    """
    if (kind, field) in _INT_FIELDS:
        if a.dtype not in (np.int32, np.int64):
            return f"must be an int32 array of counts; got dtype {a.dtype}"
        if a.size and not (0 <= a.min() and a.max() < 2**31):
            return "holds counts outside [0, 2**31)"
        return None
    if a.dtype not in (np.float32, np.float64):
        return f"must be a float32 or float64 array (as save_calibrator writes); got dtype {a.dtype}"
    if not _finite(a):
        return "holds NaN or infinite values"
    target = _compute_dtype(a.dtype)
    with np.errstate(over="ignore", under="ignore"):
        cast = a.astype(target)
    if not _finite(cast):
        return (
            f"holds values beyond the {target} range (max |value| {float(np.max(np.abs(a))):.6g}), "
            f"which become infinite in {target}"
        )
    return None


def _positive(a: np.ndarray) -> bool:
    """> 0 still in the compute dtype: at least its smallest normal float (a temperature
    or scale factor of ``1e-300`` becomes 0 in float32, and a subnormal one is flushed
    to 0 on the device: a division by zero)."""
    target = _compute_dtype(a.dtype)
    return bool(np.all(a >= np.finfo(target).tiny))


def _field_problem(kind: str, fields: dict[str, Any]) -> str | None:
    """The first rule of class ``kind`` that ``fields`` break, as a message, or None."""
    for field, pred, what in _rules(kind):
        try:
            good = pred(fields)
        except Exception:  # a malformed field (wrong shape or type) fails its rule
            good = False
        if not good:
            value = fields.get(field)
            got = (
                f"shape {value.shape}, {_short(value.tolist())}"
                if isinstance(value, np.ndarray)
                else _short(value)
            )
            return f"{kind}.{field} must be {what}; got {got}"
    return None


def _decode(
    spec: Any,
    arrays: Mapping[str, np.ndarray],
    fail: Callable[[str], Exception],
    used: set[str],
) -> Any:
    if not isinstance(spec, dict):
        raise fail("the description of a calibrator is not a JSON object")
    kind = spec.get("type")
    cls = registered(kind) if isinstance(kind, str) else None
    if cls is None:
        raise fail(
            f"unknown calibrator type {_short(kind)}; known: {', '.join(sorted(REGISTRY))}"
        )
    meta, refs, nested = spec.get("meta"), spec.get("arrays"), spec.get("nested", [])
    if (
        not isinstance(meta, dict)
        or not isinstance(refs, dict)
        or not isinstance(nested, list)
    ):
        raise fail(f"{kind}: 'meta' and 'arrays' must be JSON objects and 'nested' a list")
    want_meta = set(cls._meta_fields)
    want_data = set(cls._data_fields) - {_NESTED}
    # an option field added to a class later (e.g. num_groups, 2026-11) takes its
    # default in files written before it
    meta = {**_later_defaults(cls, want_meta - set(meta)), **meta}
    if set(meta) != want_meta:
        raise fail(f"{kind}: option fields {sorted(meta)} differ from {sorted(want_meta)}")
    if set(refs) != want_data:
        raise fail(f"{kind}: array fields {sorted(refs)} differ from {sorted(want_data)}")
    fields: dict[str, Any] = dict(meta)
    for field, key in refs.items():
        if not isinstance(key, str) or key not in arrays:
            raise fail(
                f"{kind}.{field}: the array {_short(key)} is missing from the archive"
            )
        used.add(key)
        a = arrays[key]
        if a.dtype.kind not in "fiub":
            raise fail(f"{kind}.{field}: arrays must be numeric; got dtype {a.dtype}")
        problem = _array_problem(a, kind, field)
        if problem:
            raise fail(f"{kind}.{field}: {problem}")
        if (kind, field) in _INT_FIELDS:
            a = a.astype(np.int32)
        fields[field] = a
    problem = _field_problem(kind, fields)
    if problem:
        raise fail(problem)
    if _NESTED in cls._data_fields:
        if len(nested) < 2:
            raise fail(f"{kind}: needs one nested calibrator per class (at least 2)")
        for i, sub in enumerate(nested):
            sub_kind = sub.get("type") if isinstance(sub, dict) else None
            if sub_kind not in _BINARY:
                raise fail(
                    f"{kind}.calibrators[{i}] must be one of {', '.join(_BINARY)}; got "
                    f"{_short(sub_kind)}"
                )
        fields[_NESTED] = tuple(_decode(s, arrays, fail, used) for s in nested)
    elif nested:
        raise fail(f"{kind}: unexpected nested calibrators")
    kwargs = {
        k: (jnp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in fields.items()
    }
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise fail(f"{kind}: {err}") from err


def load_calibrator(path: str | os.PathLike) -> Any:
    """Load a fitted object written by :func:`save_calibrator`, validating every field.

    Parameters
    ----------
    path : str or path-like
        The ``.npz`` file.

    Returns
    -------
    fitted calibrator
        Of the class it was saved from, equal to the saved object.

    Raises
    ------
    CalibratorFileError
        (a ``ValueError``) for any bad file: not an ``.npz`` archive, a missing or
        malformed description, an unknown class, missing or extra fields, a member
        whose declared shape does not match its bytes or that inflates beyond the
        limit below, option values out of range (e.g. ``input="banana"``,
        ``eps=5``), non-finite arrays, decreasing thresholds, negative temperatures or
        shapes, Venn-ABERS tables with ``p0 > p1``. The message names the
        file and the field.
    FileNotFoundError
        When ``path`` does not exist.

    See Also
    --------
    save_calibrator : Writes the file.

    Notes
    -----
    Loading never unpickles. Only the archive members a field refers to are read
    (the names of others are reported), each after its ``.npy`` header is checked
    against the bytes the member holds and the member's size against its compressed
    size (at most 100 times it, plus 64 MiB): a small file cannot ask for terabytes.
    A float64 calibrator loaded while JAX's x64 mode is off becomes float32. The file
    of either branch loads in a fresh process, whichever modules it imported.

    Examples
    --------
    See :func:`save_calibrator`.
    """
    name = os.fspath(path)

    def fail(reason: str) -> CalibratorFileError:
        return CalibratorFileError(
            f"{name}: {reason}. Write the file with save_calibrator."
        )

    if not os.path.exists(name):
        raise FileNotFoundError(f"{name}: no such calibrator file.")
    try:
        archive = np.load(name, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise fail("not an .npz archive (a single .npy array)")
    except CalibratorFileError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise fail(f"not a readable .npz archive ({type(err).__name__}: {err})") from err
    with archive:
        members = _Members(archive, fail)
        if "__spec__" not in members:
            raise fail("not a bayescal calibrator file (no __spec__ entry)")
        try:
            spec = json.loads(members["__spec__"].tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise fail(f"the __spec__ entry is not UTF-8 JSON ({err})") from err
        except RecursionError as err:  # JSON nested thousands of levels deep
            raise fail("the __spec__ entry is nested too deeply to be a calibrator") from err
        if not isinstance(spec, dict) or spec.get("format") != FORMAT:
            got = spec.get("format") if isinstance(spec, dict) else spec
            raise fail(
                f"unsupported calibrator file format {_short(got)}; this version reads {FORMAT!r}"
            )
        used: set[str] = set()
        calibrator = _decode(spec.get("calibrator"), members, fail, used)
    # Members no field refers to are never read (only their names are known).
    extra = sorted(set(members.names) - used - {"__spec__"})
    if extra:
        raise fail(f"the archive holds arrays that no field refers to: {_short(extra)}")
    return calibrator


#: How much larger than its compressed bytes an archive member may be once
#: decompressed, besides :data:`_INFLATE_ALLOWANCE`: a calibrator's arrays (thresholds,
#: probabilities) compress a few times at most, while a deflated run of zeros inflates
#: ~1000-fold (an "archive bomb"). So reading a file takes at most about this many
#: times its size in memory.
_INFLATE_RATIO = 100
_INFLATE_ALLOWANCE = 64 * 2**20


class _Members(Mapping):
    """The arrays of an ``.npz`` archive, each read only when asked for and only after
    its declared size is checked: the ``.npy`` header's shape and dtype against the
    bytes the member holds, and the member's size against its compressed size. A
    910-byte file can otherwise declare a 7 TiB array (``np.load`` allocates it before
    finding the data missing), and a small deflated file can hold gigabytes of zeros."""

    def __init__(self, archive: Any, fail: Callable[[str], Exception]) -> None:
        self._zip, self._fail = archive.zip, fail
        self._member = {}
        for member in self._zip.namelist():
            key = member[:-4] if member.endswith(".npy") else member
            self._member.setdefault(key, member)
        self.names = list(self._member)

    def __contains__(self, key: object) -> bool:
        return key in self._member

    def __iter__(self) -> Iterator[str]:
        return iter(self._member)

    def __len__(self) -> int:
        return len(self._member)

    def __getitem__(self, key: str) -> np.ndarray:
        fail, member = self._fail, self._member[key]
        info = self._zip.getinfo(member)
        limit = _INFLATE_RATIO * info.compress_size + _INFLATE_ALLOWANCE
        if info.file_size > limit:
            raise fail(
                f"the archive member {_short(member)} inflates from {info.compress_size} "
                f"to {info.file_size} bytes, more than a calibrator's arrays can"
            )
        try:
            with self._zip.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(fh)
                if dtype.hasobject:
                    raise fail(
                        f"the array {_short(key)} holds Python objects (pickled data, "
                        "never loaded: allow_pickle=False)"
                    )
                declared = math.prod(shape) * dtype.itemsize
                if declared != info.file_size - fh.tell():
                    raise fail(
                        f"the array {_short(key)} declares shape {_short(shape)} of "
                        f"{dtype} ({declared} bytes) but its member holds "
                        f"{info.file_size - fh.tell()} bytes of data"
                    )
                data = fh.read(declared)
        except CalibratorFileError:
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
            raise fail(
                f"the array {_short(key)} is not readable ({type(err).__name__}: {err})"
            ) from err
        order = "F" if fortran else "C"
        return np.frombuffer(data, dtype).reshape(shape, order=order).copy(order="K")
