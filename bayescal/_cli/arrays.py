"""Posterior predictive arrays read lazily (NetCDF, zarr) or from memory, in chunks.

The observation axis is streamed in chunks of about ``chunk_bytes`` of draws, so an
[S, N] file larger than memory is read once with bounded resident memory. Draws and
observations are aligned by dimension names, never by reshaping: the observation dims
of ``observed_data`` must all appear, with the same sizes (and coordinates, where both
groups have them), in ``posterior_predictive``; its other dims are the sample dims
(``chain``, ``draw``), moved first. Transposed observation dims are transposed back.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayescal._cli.csv_layouts import InputError
from bayescal._cli.options import shown
from bayescal._cli.sniff import format_hint


@dataclass
class DrawSource:
    """Observed values ``y`` [N] (in memory) and draws [S, N] read chunk by chunk."""

    y: np.ndarray
    num_draws: int
    name: str  # for messages, e.g. "posterior_predictive/y"
    source: str
    _var: Any = None  # a lazy xarray.DataArray (sample dims first, then obs dims)
    _array: np.ndarray | None = None  # or an in-memory [S, N] array
    sample_dims: tuple[str, ...] = ()
    obs_dims: tuple[str, ...] = ()
    obs_shape: tuple[int, ...] = ()
    closers: list = field(default_factory=list)
    var_name: str = ""
    tree: Any = None  # the opened DataTree (NetCDF/zarr), for LOO-PIT
    has_log_likelihood: bool = False
    path: str = ""  # the file, for messages
    signature: tuple | None = None  # a regular file's identity, size and time at opening

    def chunks(self, chunk_bytes: int, itemsize: int = 4) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(offset, draws[:, offset:offset + n])`` as float64 or file dtype."""
        if self._array is not None:
            n = self._array.shape[1]
            step = max(1, chunk_bytes // max(1, self.num_draws * itemsize))
            for a in range(0, n, step):
                yield a, self._array[:, a : a + step]
            return
        yield from self._lazy_chunks(chunk_bytes, itemsize)

    def _lazy_chunks(self, chunk_bytes, itemsize):
        shape = self.obs_shape
        m = len(shape)
        per_draw = max(1, chunk_bytes // max(1, self.num_draws * itemsize))
        # the first obs dim k whose trailing block fits the budget is chunked; the dims
        # before it are looped over one index at a time (flat offsets stay contiguous)
        k = 0
        while k < m - 1 and math.prod(shape[k + 1 :]) > per_draw:
            k += 1
        tail = math.prod(shape[k + 1 :])
        rows = max(1, per_draw // tail)
        for prefix in np.ndindex(*shape[:k]):
            base = (int(np.ravel_multi_index(prefix, shape[:k])) if k else 0) * shape[k]
            for a in range(0, shape[k], rows):
                b = min(a + rows, shape[k])
                sel = {d: i for d, i in zip(self.obs_dims[:k], prefix, strict=True)}
                sel[self.obs_dims[k]] = slice(a, b)
                with reading(self.path):
                    block = self._var.isel(sel).values  # reads only this block
                self.check_unchanged()
                yield (base + a) * tail, block.reshape(self.num_draws, -1)

    def check_unchanged(self) -> None:
        """Refuse what was read if the file changed since it was opened: HDF5 reads the
        part of a file truncated meanwhile as zeros, without an error."""
        if self.signature is None:
            return
        now = file_signature(self.path)
        if now != self.signature:
            was, size = self.signature[2], now[2] if now else None
            change = (f"{was:,} bytes, now {size:,}" if size is not None and size != was
                      else "modified" if now else "removed")
            raise InputError(
                f"{shown(self.path)}: could not be read (the file changed while it was "
                f"read: {change}); run again when it is complete"
            )

    def close(self) -> None:
        for c in self.closers:
            c.close()


def file_signature(path: str) -> tuple | None:
    """A regular file's identity, size and modification time (None: it is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def unreadable(path: object, err: BaseException) -> InputError:
    """The error for a file whose data cannot be read (a corrupted compressed chunk, a
    file truncated or removed while it is read): the reader's reason, one line."""
    msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
    why = type(err).__name__ + (f": {msg[:200]}" if msg else "")
    return InputError(f"{shown(path)}: could not be read ({why})")


@contextlib.contextmanager
def reading(path: object) -> Iterator[None]:
    """Any failure of the reader (h5py's ``OSError``, netCDF4's and numcodecs'
    ``RuntimeError``, ...) becomes :func:`unreadable`; Ctrl-C stays Ctrl-C."""
    try:
        yield
    except (InputError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - a reader's failure is a bad file
        raise unreadable(path, err) from None


def in_memory(y: np.ndarray, draws: np.ndarray, source: str) -> DrawSource:
    return DrawSource(
        y=y, num_draws=draws.shape[0], name="draws", source=source, _array=draws
    )


def _describe(var) -> str:
    pairs = zip(var.dims, var.shape, strict=True)
    return "(" + ", ".join(f"{shown(d)}={n}" for d, n in pairs) + ")"


def _names(names) -> str:
    """Names from the file (groups, variables, dims) for a message (see :func:`shown`)."""
    return ", ".join(shown(n) for n in names)


def open_lazy(
    path: pathlib.Path, fmt: str, var_name: str | None, data: bytes | None = None
) -> DrawSource:
    """Open ``posterior_predictive`` and ``observed_data`` lazily and align them.

    ``data``: the file's content, read from a pipe (opened from memory).
    """
    import xarray as xr

    where = shown(path)  # for messages
    engine = None
    if fmt == "zarr":
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise InputError(
                f"{where}: reading zarr needs the optional zarr package (pip install zarr)"
            ) from None
        engine = "zarr"
    # taken before opening: a file that changes from now on is refused (check_unchanged)
    signature = file_signature(str(path)) if data is None and path.is_file() else None
    try:
        tree = xr.open_datatree(path if data is None else io.BytesIO(data), engine=engine)
    except Exception as err:  # noqa: BLE001 - any reader failure is a bad file
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise InputError(
            f"{where}: not a readable ArviZ "
            f"{'zarr store' if fmt == 'zarr' else 'NetCDF file'}"
            f"{format_hint(path, data, 'netcdf') if fmt != 'zarr' else ''} "
            f"({type(err).__name__}: {msg[:200]})"
        ) from None
    try:
        with reading(path):
            src = _align(path, tree, var_name, fmt)
        src.signature = signature
        src.check_unchanged()  # y was read
        return src
    except BaseException:
        tree.close()
        raise


def _align(path, tree, var_name, fmt) -> DrawSource:
    where = shown(path)  # for messages
    groups = [g.lstrip("/") for g in tree.groups if g != "/"]
    missing = [g for g in ("posterior_predictive", "observed_data") if g not in groups]
    if missing:
        raise InputError(
            f"{where}: missing group(s) {', '.join(missing)}; the file has: "
            f"{_names(groups) or 'none'}"
        )
    pp = tree["posterior_predictive"].to_dataset()
    obs = tree["observed_data"].to_dataset()
    shared = [v for v in pp.data_vars if v in obs.data_vars]
    if var_name is None:
        if len(shared) != 1:
            raise InputError(
                f"{where}: {'no' if not shared else 'several'} variables in both "
                f"posterior_predictive and observed_data ({_names(shared) or 'none'}); "
                "choose one with --var-name"
            )
        var_name = shared[0]
    elif var_name not in shared:
        raise InputError(
            f"{where}: variable '{shown(var_name)}' not in both groups; available: "
            f"{_names(shared) or 'none'}"
        )
    pv, ov = pp[var_name], obs[var_name]
    # for messages (DrawSource.name too)
    pname, oname = (f"{group}/{shown(var_name)}"
                    for group in ("posterior_predictive", "observed_data"))
    for v, name in ((pv, pname), (ov, oname)):
        if not (np.issubdtype(v.dtype, np.number) or v.dtype == bool):
            raise InputError(f"{where}: {name} has dtype {v.dtype}; numbers are needed")
    absent = [d for d in ov.dims if d not in pv.dims]
    wrong = [d for d in ov.dims if d in pv.dims and pv.sizes[d] != ov.sizes[d]]
    if absent or wrong:
        what = []
        if absent:
            what.append(f"observation dim(s) {_names(absent)} missing in {pname}")
        if wrong:
            what.append(
                "size mismatch in "
                + ", ".join(f"{shown(d)} ({pv.sizes[d]} vs {ov.sizes[d]})" for d in wrong)
            )
        raise InputError(
            f"{where}: {'; '.join(what)}: {pname} has dims {_describe(pv)}, {oname} has "
            f"{_describe(ov)}; draws and observations are aligned by dim names"
        )
    for d in ov.dims:
        if d in pv.coords and d in ov.coords:
            a, b = pv.coords[d].values, ov.coords[d].values
            if a.shape != b.shape or not np.array_equal(a, b):
                raise InputError(
                    f"{where}: the coordinates of dim {shown(d)} differ between {pname} and "
                    f"{oname}"
                )
    sample_dims = tuple(d for d in pv.dims if d not in ov.dims)
    if not sample_dims:
        raise InputError(
            f"{where}: {pname} has no sample dims beside the observation dims "
            f"{_describe(pv)}; expected (chain, draw, ...)"
        )
    obs_dims = tuple(ov.dims)
    lazy = pv.transpose(*sample_dims, *obs_dims)  # lazy: no data read
    y = np.asarray(ov.values, dtype=np.float64).reshape(-1)
    num_draws = math.prod(pv.sizes[d] for d in sample_dims)
    if num_draws < 1 or y.size < 1:
        raise InputError(f"{where}: {pname} {_describe(pv)} holds no draws or observations")
    return DrawSource(
        y=y,
        num_draws=num_draws,
        name=pname,
        source=f"{fmt} ({var_name}, {num_draws} draws)",
        _var=lazy,
        sample_dims=sample_dims,
        obs_dims=obs_dims,
        obs_shape=tuple(ov.sizes[d] for d in obs_dims),
        closers=[tree],
        var_name=str(var_name),
        tree=tree,
        has_log_likelihood="log_likelihood" in groups,
        path=str(path),
    )
