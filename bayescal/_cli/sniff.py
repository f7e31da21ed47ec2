"""What a file's first bytes and header say it is: hints for misnamed inputs."""

from __future__ import annotations

import os

__all__ = ["NETCDF_MAGIC", "delimiter_hint", "format_hint"]


#: How a NetCDF file begins: netCDF-4 (HDF5), then classic netCDF (CDF-1, -2, -5).
NETCDF_MAGIC = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")


def format_hint(path: str | os.PathLike, data: bytes | None, tried: str) -> str:
    r"""What the first bytes of a file that failed to read as ``tried`` ("csv" or
    "netcdf") say it is, as the end of the error message ("" when they say nothing):
    a NetCDF file named ``.csv`` gets ``--format netcdf``, a CSV file named ``.nc``
    ``--format csv``.

    Examples
    --------
    >>> format_hint("p.nc", b"y,loc,scale\n1,0,1\n", "netcdf")
    '; it looks like CSV text: pass --format csv'
    """
    if data is None:
        try:
            with open(path, "rb") as f:
                data = f.read(4096)
        except OSError:
            return ""
    head = data[:4096]
    if head.startswith(NETCDF_MAGIC):
        return "; it begins as a NetCDF file: pass --format netcdf" if tried == "csv" else ""
    if tried == "netcdf":
        try:
            text = head.decode("utf-8-sig", errors="strict")
        except UnicodeDecodeError as err:
            if err.start < len(head) - 4:  # not just a character cut at the 4096th byte
                return ""
            text = head[: err.start].decode("utf-8-sig")
        if "\n" in text or "," in text:
            return "; it looks like CSV text: pass --format csv"
    return ""


def delimiter_hint(header: list[str]) -> str:
    """The end of a "no 'y' column" message for a header read as one column that
    another delimiter would have split ("" otherwise).

    Examples
    --------
    >>> delimiter_hint(["y;loc;scale"])
    "; the header seems separated by ';': bayescal reads comma-separated files; convert it, e.g. pandas.read_csv(path, sep=';', decimal=',').to_csv(new_path, index=False) (decimal=',' if numbers are written 1,5)"
    """
    if len(header) != 1:
        return ""
    for sep, name in ((";", "';'"), ("\t", "tabs"), ("|", "'|'")):
        if sep in header[0]:
            py_sep = "\\t" if sep == "\t" else sep
            return (
                f"; the header seems separated by {name}: bayescal reads comma-separated "
                f"files; convert it, e.g. pandas.read_csv(path, sep='{py_sep}', "
                "decimal=',').to_csv(new_path, index=False) (decimal=',' if numbers are "
                "written 1,5)"
            )
    return ""
