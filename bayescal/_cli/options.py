"""Argument types and the parser of the command line: every numeric option is bounded.

Bad options end like every other bad input: one line on stderr, exit status 2 (no
usage block, no traceback).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


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
        raise UserError(f"{message} (see '{self.prog} --help')", prog=self.prog)


def bounded_int(name: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type=`` that accepts an integer in ``[low, high]``."""

    def convert(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, {high}]; got {text!r}"
            ) from None
        if not low <= value <= high:
            shown = text if len(text) <= 24 else text[:21] + "..."
            raise argparse.ArgumentTypeError(
                f"must be in [{low}, {high}]; got {shown}"
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
                f"expected a number in ({low:g}, {high:g}); got {text!r}"
            ) from None
        if not low < value < high:  # NaN too
            shown = text if len(text) <= 24 else text[:21] + "..."
            raise argparse.ArgumentTypeError(f"must be in ({low:g}, {high:g}); got {shown}")
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
