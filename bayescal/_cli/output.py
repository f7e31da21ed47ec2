"""All-or-nothing output folders for the command line.

Everything is written into a temporary folder created beside the target (same parent,
so same filesystem) and moved into place only when complete: a failure leaves nothing
behind, and nothing is overwritten without ``force``. Files are created with the
user's umask (plain ``open``; the temporary folder's 0700 mode is relaxed to the umask
before it is moved in).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

from bayescal._cli.options import UserError

TMP_PREFIX = ".tmp-bayescal-"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_target(out: pathlib.Path, *, force: bool) -> None:
    """Refuse early (before any work) what :func:`staged_output` would refuse."""
    if out.is_symlink() and not out.exists():
        raise UserError(f"--out {out}: a broken symbolic link; remove it or choose another")
    if out.exists() and not out.is_dir() and not force:
        raise UserError(
            f"--out {out} is an existing file, not a folder; choose another --out or pass "
            "--force to replace it"
        )
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(
            f"--out {out} exists and is not empty; choose another folder or pass --force to "
            "overwrite the report files in it"
        )


@contextlib.contextmanager
def staged_output(out: pathlib.Path, *, force: bool) -> Iterator[pathlib.Path]:
    """Yield a temporary folder to write into; move its files to ``out`` on success.

    ``out`` absent: the temporary folder is renamed to ``out`` (atomic). ``out`` an
    empty folder, or an existing folder with ``force``: each file is moved in with
    ``os.replace`` (atomic per file), after checking that none of the targets is a
    folder; other files in ``out`` are kept. ``out`` an existing file with ``force``:
    the file is replaced by the folder. On any error the temporary folder (and any
    parent folders created for it) are removed and ``out`` is left as it was.
    """
    check_target(out, force=force)
    parent = out.parent if str(out.parent) else pathlib.Path(".")
    created: list[pathlib.Path] = []
    p = parent
    while not p.exists():
        created.append(p)
        p = p.parent
    try:
        for d in reversed(created):
            d.mkdir()
        tmp = pathlib.Path(tempfile.mkdtemp(dir=parent, prefix=TMP_PREFIX))
    except OSError as err:
        _remove_created(created)
        raise UserError(f"--out {out}: cannot create a folder in {parent} ({err.strerror})") from None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        _move_into_place(tmp, out, force=force)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_created(created)
        if isinstance(err, OSError):
            raise UserError(
                f"--out {out}: cannot write the report ({err.strerror or err}); nothing "
                "was written"
            ) from None
        raise


def _remove_created(created: list[pathlib.Path]) -> None:
    for d in created:  # innermost first
        with contextlib.suppress(OSError):
            d.rmdir()


def _move_into_place(tmp: pathlib.Path, out: pathlib.Path, *, force: bool) -> None:
    check_target(out, force=force)  # again: something may have appeared meanwhile
    if out.exists() and not out.is_dir():
        out.unlink()  # force: an existing file is replaced by the folder
    if not out.exists():
        os.rename(tmp, out)
        return
    files = sorted(tmp.iterdir())
    blocked = [f.name for f in files if (out / f.name).is_dir()]
    if blocked:
        raise UserError(
            f"--out {out}: {', '.join(blocked)} would overwrite a folder of that name; "
            "remove it or choose another --out; nothing was written"
        )
    for f in files:
        os.replace(f, out / f.name)
    tmp.rmdir()
