"""Ctrl-C (SIGINT) on the command line: always reported as an interruption.

Python turns SIGINT into a ``KeyboardInterrupt`` wherever the main thread happens to
be, and some code on the way turns that into another error: pandas' C reader reports
it as a ``ParserError`` ("Calling read(nbytes) on source failed", which was then shown
as "not a well-formed CSV file"), and JAX reports a ``KeyboardInterrupt`` raised in a
host callback (``jax.pure_callback``) as a ``JaxRuntimeError``, which a fallback may
catch and compute around (the run then went on to the end and exited 0). So the
command line notes every SIGINT itself (:func:`watching`): whatever error follows it,
or none, the run ends with "interrupted" and exit status 130 (128 + SIGINT), as a
shell expects, and writes no report.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

__all__ = ["EXIT_STATUS", "check", "handler", "note", "received", "watching"]

#: The exit status of an interrupted run: 128 + SIGINT, as shells report a Ctrl-C.
EXIT_STATUS = 128 + int(signal.SIGINT)

_received = [False]
_JAX_CALLBACK_LOGGER = "jax._src.callback"  # logs "jax.pure_callback failed"


def note() -> None:
    """Record that SIGINT arrived."""
    _received[0] = True


def received() -> bool:
    """Whether SIGINT arrived since :func:`watching` began."""
    return _received[0]


def check() -> None:
    """Raise ``KeyboardInterrupt`` if SIGINT arrived and was swallowed on the way."""
    if _received[0]:
        raise KeyboardInterrupt


def handler(signum: int, frame: object) -> None:
    """The SIGINT handler of the command line: note it, then act as Python's default."""
    note()
    raise KeyboardInterrupt


def _not_an_interruption(record: logging.LogRecord) -> bool:
    """A logging filter: JAX logs the traceback of a ``KeyboardInterrupt`` raised in a
    host callback ("jax.pure_callback failed"); the command line says "interrupted"."""
    info = record.exc_info
    return not (info and isinstance(info[1], KeyboardInterrupt))


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Note every SIGINT while the command runs (main thread, default handler only: a
    program that set its own handler keeps it; the ``KeyboardInterrupt`` is still
    caught)."""
    _received[0] = False
    installed = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if installed:
        signal.signal(signal.SIGINT, handler)
    callbacks = logging.getLogger(_JAX_CALLBACK_LOGGER)
    callbacks.addFilter(_not_an_interruption)
    try:
        yield
    finally:
        callbacks.removeFilter(_not_an_interruption)
        if installed and signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, signal.default_int_handler)
