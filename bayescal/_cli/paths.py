"""The paths the command line is given: names the system cannot hold, and what FILE is.

- A path with a name (one component) longer than the filesystem allows (255 bytes on
  Linux and macOS filesystems) or longer as a whole than the system takes (4096 bytes
  on Linux) is refused before anything is read or computed, naming the argument
  (``FILE`` or ``--out``). Left to the system, ``ENAMETOOLONG`` surfaced as a traceback,
  or (for a new ``--out``) only after the whole computation.
- ``FILE`` is read according to what it is: a regular file (or a folder: a zarr store)
  in place; a FIFO or a pipe (``<(cat d.csv)``, which the shell passes as
  ``/dev/fd/N``; ``/dev/stdin`` in a pipeline) once, whole, into memory, at most
  :data:`STREAM_MAX_BYTES`; a character or block device (``/dev/zero``, a terminal)
  or a socket is refused before anything is read (reading ``/dev/zero`` never ends).
"""

from __future__ import annotations

import errno
import os
import stat

from bayescal._cli.csv_layouts import InputError
from bayescal._cli.options import shown

__all__ = ["STREAM_MAX_BYTES", "name_problem", "read_stream", "stat_input"]

#: The most bytes read from a FIFO or a pipe (the data are held in memory whole):
#: beyond it the input is refused; a regular file has no such limit.
STREAM_MAX_BYTES = 1 << 30

_NAME_MAX = 255  # where the filesystem does not say
_PATH_MAX = 4096


def _limits(path: str | os.PathLike) -> tuple[int, int]:
    """(longest name, longest path) in bytes where ``path`` lies, as the system says."""
    folder = os.path.dirname(os.path.abspath(os.fsdecode(path))) or os.sep
    while not os.path.isdir(folder) and folder != os.path.dirname(folder):
        folder = os.path.dirname(folder)
    limits = []
    for name, default in (("PC_NAME_MAX", _NAME_MAX), ("PC_PATH_MAX", _PATH_MAX)):
        try:
            limits.append(int(os.pathconf(folder, name)) or default)
        except (OSError, ValueError, AttributeError):
            limits.append(default)
    return limits[0], limits[1]


def name_problem(path: str | os.PathLike, room: int = 0) -> str | None:
    """Why the system cannot name ``path`` (too long a name or path), or None.

    ``room``: bytes the path must leave for names joined to it (files in a folder).
    """
    raw = os.fsencode(path)
    name_max, path_max = _limits(path)
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > name_max:
        return (
            f"a name in the path is {len(longest)} bytes long, over the {name_max} "
            "bytes the filesystem allows"
        )
    if len(raw) + room >= path_max:
        return (
            f"the path is {len(raw)} bytes long; the system allows {path_max - 1}"
            + (f", less {room} for the names of the files in it" if room else "")
        )
    return None


def _kind(mode: int) -> str:
    return (
        "a character device" if stat.S_ISCHR(mode)
        else "a block device" if stat.S_ISBLK(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "not a regular file"
    )


def stat_input(path: str | os.PathLike) -> os.stat_result:
    """The status of ``FILE`` (links followed), or an :class:`InputError` saying why not.

    Refuses what cannot be read as a file: a name too long for the system, and what is
    neither a regular file, a folder, nor a FIFO or pipe (a device, a socket).
    """
    where = shown(path)  # for messages
    problem = name_problem(path)
    if problem:
        raise InputError(
            f"FILE {shown(path, 60, length=False)}: {problem}; rename or move the file")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise InputError(
                f"FILE {shown(path, 60, length=False)}: the name is too long for the "
                "system; rename or move the file"
            ) from None
        raise InputError(f"{where}: cannot read the file ({err.strerror or err})") from None
    mode = st.st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISFIFO(mode)):
        raise InputError(
            f"{where}: is {_kind(mode)}, not a file; FILE must be a regular file, a zarr "
            "folder, or a pipe or FIFO (e.g. <(cat data.csv)) that ends"
        )
    return st


def read_stream(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """The whole content of the FIFO or pipe ``path``, read once (at most ``limit``).

    Opening a FIFO waits for a writer, as ``cat`` does (Ctrl-C ends the wait); the data
    are read until the writer closes its end. More than ``limit`` bytes (default
    :data:`STREAM_MAX_BYTES`) is refused: an endless stream is not read forever.
    """
    where = shown(path)  # for messages
    limit = STREAM_MAX_BYTES if limit is None else limit
    parts, total = [], 0
    try:
        with open(path, "rb", buffering=0) as f:
            while True:
                part = f.read(min(1 << 20, limit + 1 - total))
                if not part:
                    break
                parts.append(part)
                total += len(part)
                if total > limit:
                    raise InputError(
                        f"{where}: the pipe or FIFO holds more than {limit:,} bytes, the "
                        "most read from a stream (it is held in memory); save the data "
                        "to a regular file and pass that (regular files have no limit)"
                    )
    except OSError as err:
        raise InputError(f"{where}: cannot read the file ({err.strerror or err})") from None
    return b"".join(parts)

