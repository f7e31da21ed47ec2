"""Argument types and the parser of the command line: every numeric option is bounded.

Bad options end like every other bad input: one line on stderr, exit status 2 (no
usage block, no traceback). A name from the user (a column, a file, a variable, an
option) is put into a message with :func:`shown`: its control characters escaped, and
cut if it is long.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterable

# what a terminal acts on: C0 controls but tab and newline, DEL, C1 controls (8-bit CSI)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escaped(text: str) -> str:
    """``text`` with its control characters written as Python writes them (``\\x1b``,
    ``\\r``): printed, it cannot set the terminal's title, clear it or move its cursor.
    Newline and tab are kept."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _fit(chars: Iterable[str], room: int) -> list[str]:
    """The first of ``chars``, escaped, that fit in ``room`` characters."""
    out: list[str] = []
    for ch in chars:
        room -= len(e := escaped(ch))
        if room < 0:
            break
        out.append(e)
    return out


def shown(value: str | os.PathLike | bytes, width: int = 200, *, length: bool = True
          ) -> str:
    """A name or path from the user, for a message: control characters escaped, and if
    longer than ``width`` characters cut in the middle (``start...end``) and followed by
    its length (``(100,000 characters)``; ``length=False`` where the message says it)."""
    text = os.fsdecode(value) if isinstance(value, (bytes, os.PathLike)) else str(value)
    whole = escaped(text)
    if len(whole) <= width:
        return whole
    half = (width - 3) // 2
    cut = "".join(_fit(text, half)) + "..." + "".join(reversed(_fit(reversed(text), half)))
    return f"{cut} ({len(text):,} characters)" if length else cut


class UserError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""

    def __init__(self, message: str, prog: str | None = None):
        super().__init__(message)
        self.prog = prog


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UserError` (one line, exit 2).

    argparse's own ``error`` prints the usage block and calls ``sys.exit(2)``; the
    command line promises one line, and ``bayescal.cli.main`` returns the status
    instead of exiting, so it can be called from Python.
    """

    def error(self, message: str):  # type: ignore[override]
        message = " ".join(shown(word) for word in message.split(" "))  # the arguments
        raise UserError(f"{message} (see '{self.prog} --help')", prog=self.prog)


def bounded_int(name: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type=`` that accepts an integer in ``[low, high]``."""

    def convert(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, {high}]; got '{shown(text, 24)}'"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be in [{low}, {high}]; got {shown(text, 24)}"
            )
        return value

    convert.__name__ = "integer"  # argparse names the type in some messages
    return convert


def bounded_float(name: str, low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type=`` that accepts a number strictly between ``low`` and ``high``."""

    def convert(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number in ({low:g}, {high:g}); got '{shown(text, 24)}'"
            ) from None
        if not low < value < high:  # NaN too
            raise argparse.ArgumentTypeError(
                f"must be in ({low:g}, {high:g}); got {shown(text, 24)}")
        return value

    convert.__name__ = "number"
    return convert


# The bounds, in one place (documented in --help and docs/bad-input.md).
NUM_LEVELS = (2, 10_000)  # a curve on more levels than this is a grid, not a curve
BINS = (1, 10_000)  # 15 is usual; 1e4 bins of 1e6 predictions hold 100 each
SEED = (0, 2**32 - 2)  # jax.random.key wraps seeds modulo 2**32; the demo uses seed + 1
NUM_SAMPLES = (1, 100_000)
NUM_WARMUP = (0, 100_000)
CHUNK_MB = (1, 65_536)
CALIBRATION_FRACTION = (0.0, 1.0)  # open interval: both parts non-empty
