"""All-or-nothing output folders for the command line.

``--out`` is always a folder. Everything is written into a temporary folder created
beside it (same parent, so same filesystem) and moved into place only when complete: a
failure, Ctrl-C (SIGINT) or SIGTERM leaves nothing behind and the previous report, if
any, as it was. ``--force`` lets a report replace the report files of the same names in
an existing folder (and only those); it never replaces the folder itself, nor a file,
device, FIFO or socket named by ``--out``, nor the input. Files are created with the
user's umask (plain ``open``; the temporary folder's 0700 mode is relaxed to the umask
before it is moved in).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator

from bayescal._cli import interrupt
from bayescal._cli.options import UserError, shown
from bayescal._cli.paths import name_problem

TMP_PREFIX = ".tmp-bayescal-"
# room left in a path to --out for the names joined to it: "/" and a report file's
# name, or the staging folder's (TMP_PREFIX and 8 random characters)
_ROOM = 1 + 32


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _what(path: pathlib.Path) -> str:
    """What an existing non-folder is, in words."""
    if not path.exists():
        return "a broken symbolic link"
    mode = path.stat().st_mode
    kind = (
        "a regular file" if stat.S_ISREG(mode)
        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a FIFO" if stat.S_ISFIFO(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "not a folder"
    )
    return f"a symbolic link to {kind}" if path.is_symlink() else kind


def _overlaps(out: pathlib.Path, given: str | os.PathLike) -> bool:
    """``out`` is the input, a folder containing it, or inside an input folder."""
    o, i = out.resolve(), pathlib.Path(given).resolve()
    return o == i or o in i.parents or (i.is_dir() and i in o.parents)


def _probe(folder: pathlib.Path, out: pathlib.Path) -> None:
    """Refuse now a folder in which nothing can be created (found only at the end else)."""
    try:
        os.rmdir(tempfile.mkdtemp(dir=folder, prefix=TMP_PREFIX))
    except OSError as err:
        raise UserError(
            f"--out {shown(out)}: cannot create a folder in {shown(folder)} "
            f"({err.strerror or err}); choose another --out"
        ) from None


def check_target(
    out: pathlib.Path,
    *,
    force: bool,
    names: Iterable[str] = (),
    inputs: Iterable[str | os.PathLike] = (),
) -> None:
    """Refuse early (before any work) what :func:`staged_output` would refuse.

    ``names``: the files a report may write (checked with ``force``: none of them may be
    a folder or a special file in ``out``); ``inputs``: the files the command reads
    (``out`` may be neither one of them nor a folder containing one).
    """
    named = shown(out)  # for messages
    problem = name_problem(out, room=_ROOM)
    if problem:  # else ENAMETOOLONG: a traceback, or an error after the computation
        raise UserError(
            f"--out {shown(out, 60, length=False)}: {problem}; choose a shorter --out")
    if out.is_symlink() and not out.exists():
        raise UserError(
            f"--out {named}: a broken symbolic link; remove it or choose another")
    if out.exists() and not out.is_dir():
        raise UserError(
            f"--out {named} is {_what(out)}, not a folder; choose another --out (--out is "
            "always a folder; --force never replaces anything but report files in it)"
        )
    for given in inputs:
        if _overlaps(out, given):
            raise UserError(
                f"--out {named} is the input {shown(given)} or a folder containing it; "
                "choose another --out (with or without --force)"
            )
    if out.is_dir():
        if any(out.iterdir()) and not force:
            raise UserError(
                f"--out {named} exists and is not empty; choose another folder or pass "
                "--force to overwrite the report files in it"
            )
        _check_replaceable(out, names)
    parent = out.parent if str(out.parent) else pathlib.Path(".")
    while not parent.exists() and not parent.is_symlink():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(
            f"--out {named}: cannot create a folder in {shown(parent)} ({_what(parent)}, "
            "not a folder); choose another --out"
        )
    _probe(parent, out)  # the staging folder goes there
    if out.is_dir():
        _probe(out, out)  # the report files go there


def _check_replaceable(out: pathlib.Path, names: Iterable[str]) -> None:
    """Report files may replace regular files only: never a folder, device, FIFO, socket."""
    named = shown(out)  # for messages
    targets = [out / name for name in names]
    blocked = [p.name for p in targets if p.is_dir()]
    if blocked:
        raise UserError(
            f"--out {named}: {', '.join(map(shown, blocked))} would overwrite a folder of "
            "that name; remove it or choose another --out; nothing was written"
        )
    special = [p.name for p in targets if p.exists() and not p.is_file()]
    if special:
        raise UserError(
            f"--out {named}: {', '.join(map(shown, special))} would overwrite something "
            "that is not a regular file (a device, FIFO or socket); remove it or choose "
            "another --out; nothing was written"
        )


# ------------------------------------------------------------------------- signals
class _Terminated(BaseException):
    """SIGTERM arrived while a report was staged (raised by the handler, like Ctrl-C)."""


def _interruption(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else _Terminated()


class _Signals:
    """SIGINT and SIGTERM while a report is staged.

    Each raises an exception (``KeyboardInterrupt``; ``_Terminated``) so that the
    staging folder is removed on the way out; in the short critical sections (creating
    the folder, moving the files in, cleaning up) the signal is held and acted on
    after. A SIGTERM then ends the process as SIGTERM would have (the default handler is
    restored and the signal sent again). Handlers are installed only from the main
    thread and only over the defaults: a program that set its own keeps them.
    """

    def __init__(self) -> None:
        self.holding = False
        self.pending: int | None = None

    def _handler(self, signum: int, frame: object) -> None:
        if signum == signal.SIGINT:
            interrupt.note()
        if self.holding:
            self.pending = self.pending or signum
            return
        raise _interruption(signum)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        before = self.holding
        self.holding = True
        try:
            yield
        finally:
            self.holding = before

    def act_on_pending(self) -> None:
        signum, self.pending = self.pending, None
        if signum is not None:
            raise _interruption(signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        previous = {}
        if threading.current_thread() is threading.main_thread():
            defaults = {signal.SIGINT: (signal.default_int_handler, interrupt.handler),
                        signal.SIGTERM: (signal.SIG_DFL,)}
            for signum, default in defaults.items():
                if any(signal.getsignal(signum) is d for d in default):
                    previous[signum] = signal.signal(signum, self._handler)
        error: BaseException | None = None
        try:
            yield
        except BaseException as err:
            error = err
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if isinstance(error, _Terminated) or self.pending == signal.SIGTERM:
            os.kill(os.getpid(), signal.SIGTERM)  # the default handler again: the end
            raise SystemExit(128 + signal.SIGTERM)  # only if SIGTERM did not end us
        if error is not None:
            raise error
        self.act_on_pending()


@contextlib.contextmanager
def staged_output(
    out: pathlib.Path, *, force: bool, inputs: Iterable[str | os.PathLike] = ()
) -> Iterator[pathlib.Path]:
    """Yield a temporary folder to write into; move its files to ``out`` on success.

    ``out`` absent: the temporary folder is renamed to ``out`` (atomic). ``out`` an
    empty folder, or an existing folder with ``force``: each file is moved in with
    ``os.replace`` (atomic per file), after checking that none of the targets is a
    folder or a special file; other files in ``out`` are kept. ``out`` an existing
    non-folder, the input or a folder containing it: refused, ``force`` or not. On any
    error, SIGINT or SIGTERM the temporary folder (and any parent folders created for
    it) are removed and ``out`` is left as it was.
    """
    inputs = list(inputs)
    check_target(out, force=force, inputs=inputs)
    parent = out.parent if str(out.parent) else pathlib.Path(".")
    created: list[pathlib.Path] = []
    p = parent
    while not p.exists():
        created.append(p)
        p = p.parent
    signals = _Signals()
    with signals.installed():
        tmp: pathlib.Path | None = None
        try:
            with signals.held():
                for d in reversed(created):
                    d.mkdir()
                tmp = pathlib.Path(tempfile.mkdtemp(dir=parent, prefix=TMP_PREFIX))
            signals.act_on_pending()
            yield tmp
            interrupt.check()  # a Ctrl-C swallowed on the way (see interrupt): no report
            os.chmod(tmp, 0o777 & ~_umask())
            with signals.held():
                _move_into_place(tmp, out, force=force, inputs=inputs)
        except BaseException as err:
            with signals.held():
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                _remove_created(created)
            if isinstance(err, OSError):
                doing = ("write the report" if tmp is not None
                         else f"create a folder in {shown(parent)}")
                raise UserError(
                    f"--out {shown(out)}: cannot {doing} ({err.strerror or err}); nothing "
                    "was written"
                ) from None
            raise


def _remove_created(created: list[pathlib.Path]) -> None:
    for d in created:  # innermost first
        with contextlib.suppress(OSError):
            d.rmdir()


def _fsync(path: pathlib.Path) -> None:
    """Flush a file's or a folder's data to disk (a folder: its entries)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a folder: nothing more to do
        if not path.is_dir():
            raise
    finally:
        os.close(fd)


def _move_into_place(
    tmp: pathlib.Path, out: pathlib.Path, *, force: bool, inputs: list[str | os.PathLike]
) -> None:
    files = sorted(tmp.iterdir())
    # every file on disk before any is visible under its name (a crash after the
    # rename never leaves a report file empty or truncated)
    for f in files:
        _fsync(f)
    # again: something may have appeared meanwhile
    check_target(out, force=force, names=[f.name for f in files], inputs=inputs)
    if not out.exists():
        os.rename(tmp, out)
        _fsync(out.parent if str(out.parent) else pathlib.Path("."))
        return
    for f in files:
        os.replace(f, out / f.name)
    tmp.rmdir()
    _fsync(out)
