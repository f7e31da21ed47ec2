"""CSV inputs of ``bayescal evaluate``: explicit layouts, strict schema, fast reader.

Layouts (the header names the columns; any column order; one row per observation):

=========== ======================================= ==================================
layout      columns                                 meaning
=========== ======================================= ==================================
normal      ``y, loc, scale``                       Normal predictive N(loc, scale^2)
draws       ``y, draw_0, ..., draw_{S-1}``          S predictive draws (S >= 2)
quantiles   ``y, q_<level>, ...`` (``q_0.05``, ...) predicted quantiles, >= 2 levels
binary      ``y, prob``                             P(y = 1) of a binary classifier
=========== ======================================= ==================================

Without ``--layout`` the header must match exactly one layout: any other column is
rejected (with the columns found and the accepted layouts), never dropped or guessed.
With ``--layout`` the named layout's columns are taken and the others are ignored, as
the printed note and the report say. The file is read by pandas' C parser (UTF-8 with
or without a byte-order mark, LF or CRLF line ends).
"""

from __future__ import annotations

import csv
import io
import pathlib
import re
import warnings
from typing import Any

import numpy as np

from bayescal._cli.options import shown
from bayescal._cli.sniff import delimiter_hint, format_hint

LAYOUTS = ("normal", "draws", "quantiles", "binary")
LAYOUT_HELP = (
    "normal (y,loc,scale), draws (y,draw_0,...,draw_{S-1}), "
    "quantiles (y,q_0.1,q_0.5,q_0.9,...), binary (y,prob)"
)
_DRAW = re.compile(r"^draw_(\d+)$")
_QUANTILE = re.compile(r"^q_(\d*\.?\d+(?:[eE][-+]?\d+)?)$")


class InputError(Exception):
    """A bad input file; the command line prints it as one line, exit status 2."""


def _found(columns: list[str]) -> str:
    """Column names for a message (see :func:`shown`), at most 11 of them."""
    names = [shown(c) for c in columns]
    return ", ".join(names if len(names) <= 12 else [*names[:10], "...", names[-1]])


def _open_text(path: pathlib.Path, data: bytes | None):
    if data is None:
        return path.open(newline="", encoding="utf-8-sig")
    return io.TextIOWrapper(io.BytesIO(data), newline="", encoding="utf-8-sig")


def _read_header(path: pathlib.Path, data: bytes | None = None) -> list[str]:
    where = shown(path)  # for messages
    try:
        with _open_text(path, data) as f:
            first = ""
            for line in f:
                if line.strip():
                    first = line
                    break
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: not a UTF-8 text CSV file ({err.reason})"
                         f"{format_hint(path, data, 'csv')}") from None
    except OSError as err:
        raise InputError(f"{where}: cannot read the file ({err.strerror})") from None
    if not first:
        raise InputError(f"{where}: the CSV file is empty")
    header = [h.strip() for h in next(csv.reader([first]))]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError(f"{where}: duplicate column names in the header: {_found(dupes)}")
    if any(h == "" for h in header):
        raise InputError(
            f"{where}: the header has an empty column name (found: {_found(header)})")
    return header


def _match(layout: str, columns: list[str]) -> tuple[list[str], list[str]]:
    """(the columns the layout takes, the others) for a header that has ``y``."""
    rest = [c for c in columns if c != "y"]
    if layout == "normal":
        take = [c for c in rest if c in ("loc", "scale")]
    elif layout == "binary":
        take = [c for c in rest if c == "prob"]
    elif layout == "draws":
        take = sorted((c for c in rest if _DRAW.match(c)), key=lambda c: int(c[5:]))
    else:
        take = sorted((c for c in rest if _QUANTILE.match(c)), key=lambda c: float(c[2:]))
    return take, [c for c in rest if c not in take]


def _complete(layout: str, take: list[str]) -> bool:
    if layout == "normal":
        return sorted(take) == ["loc", "scale"]
    if layout == "binary":
        return take == ["prob"]
    return len(take) >= 1


def detect_layout(path: pathlib.Path, header: list[str], layout: str | None):
    """Resolve the layout: (layout, columns taken, columns ignored)."""
    where = shown(path)  # for messages
    accepted = f"accepted layouts: {LAYOUT_HELP}"
    if "y" not in header:
        raise InputError(
            f"{where}: no 'y' column (found: {_found(header)})"
            f"{delimiter_hint(header)}; {accepted}"
        )
    if layout is not None:
        take, other = _match(layout, header)
        if not _complete(layout, take):
            raise InputError(
                f"{where}: --layout {layout} needs the columns "
                f"{LAYOUT_HELP.split(layout + ' (')[1].split(')')[0]} "
                f"(found: {_found(header)})"
            )
        return layout, take, other
    exact = []
    for name in LAYOUTS:
        take, other = _match(name, header)
        if _complete(name, take) and not other:
            exact.append((name, take, other))
    if len(exact) != 1:
        raise InputError(
            f"{where}: the columns do not match one layout (found: {_found(header)}); "
            f"{accepted}; rename or remove the other columns, or pass --layout to "
            "choose one and ignore the rest"
        )
    return exact[0]


def read_csv(path: pathlib.Path, layout: str | None, data: bytes | None = None) -> dict[str, Any]:
    """Read a CSV file into the arrays of its layout (float64, before validation).

    ``data``: the file's content, read from a pipe (parsed from memory).
    """
    import pandas as pd

    where = shown(path)  # for messages
    header = _read_header(path, data)
    layout, take, ignored = detect_layout(path, header, layout)
    wanted = ["y", *take]
    try:
        with warnings.catch_warnings():
            # "Length of header or names does not match length of data": a row with
            # more fields than the header, which pandas would silently truncate
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = _read_frame(pd, path if data is None else io.BytesIO(data))
    except pd.errors.ParserWarning:
        raise InputError(
            f"{where}: a row has more fields than the header ({len(header)} columns: "
            f"{_found(header)})"
        ) from None
    except UnicodeDecodeError as err:
        raise InputError(f"{where}: not a UTF-8 text CSV file ({err.reason})"
                         f"{format_hint(path, data, 'csv')}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "Calling read(nbytes) on source failed" in first:
            # pandas' C reader reports so any failure of the read itself (an I/O error;
            # also Ctrl-C, which bayescal.cli.main reports as an interruption)
            raise InputError(f"{where}: could not be read (the read call failed)") from None
        raise InputError(f"{where}: not a well-formed CSV file ({shown(first)})") from None
    except OSError as err:
        raise InputError(f"{where}: cannot read the file ({err.strerror})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if len(frame) == 0:
        raise InputError(f"{where}: the CSV file has a header but no data rows")
    cols: dict[str, np.ndarray] = {}
    for name in wanted:
        col = frame[name]
        if not pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(
            col.dtype
        ):
            num = pd.to_numeric(col, errors="coerce")
            bad = num.isna() & col.notna()
            if bad.any():
                i = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"{where}: column '{shown(name)}' is not numeric (value "
                    f"{shown(repr(str(col.iloc[i])))} "
                    f"in data row {i + 1})"
                )
            col = num
        cols[name] = col.to_numpy(dtype=np.float64, na_value=np.nan)
    return _task(path, layout, take, ignored, cols)


def _read_frame(pd, path):
    return pd.read_csv(
        path,
        encoding="utf-8-sig",
        index_col=False,
        skipinitialspace=True,
        skip_blank_lines=True,
        engine="c",
        low_memory=False,
    )


def _task(path, layout, take, ignored, cols) -> dict[str, Any]:
    where = shown(path)  # for messages
    task: dict[str, Any] = {"layout": layout, "ignored": ignored, "y": cols["y"]}
    if layout == "normal":
        task.update(loc=cols["loc"], scale=cols["scale"], source="csv (Normal loc/scale)")
    elif layout == "binary":
        task.update(prob=cols["prob"], source="csv (probabilities)")
    elif layout == "draws":
        if len(take) < 2:
            raise InputError(
                f"{where}: only {len(take)} draw column ({_found(take)}); the draws "
                "layout needs at least 2 (draw_0, draw_1, ...)"
            )
        task.update(
            draws=np.stack([cols[c] for c in take]),
            source=f"csv ({len(take)} draw columns)",
        )
    else:
        levels = np.array([float(c[2:]) for c in take])
        if len(take) < 2:
            raise InputError(
                f"{where}: only {len(take)} quantile column ({_found(take)}); the "
                "quantiles layout needs at least 2 levels (q_0.1, q_0.9, ...)"
            )
        if np.any(np.diff(levels) <= 0) or levels[0] < 0 or levels[-1] > 1:
            raise InputError(
                f"{where}: quantile levels must be distinct and in [0, 1] "
                f"(found: {_found(take)})"
            )
        task.update(
            quantiles=np.stack([cols[c] for c in take]),
            levels=levels,
            source=f"csv ({len(take)} quantile columns)",
        )
    if ignored:
        task["notes"] = [f"columns ignored by --layout {layout}: {', '.join(ignored)}"]
    return task
