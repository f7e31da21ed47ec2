"""Command line: ``bayescal demo`` and ``bayescal evaluate``.

Errors in user input end with one line on stderr naming the problem and exit status
2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


class UserError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayescal",
        description="Measure and repair the calibration of probabilistic predictions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    demo = sub.add_parser(
        "demo",
        help="fit simple NumPyro models on bundled real data and report calibration",
        description=(
            "Fit a deliberately simple Bayesian linear regression to the diabetes data "
            "(Efron et al. 2004), split train / calibration / test, and report "
            "calibration and sharpness on the test split before and after isotonic "
            "recalibration and sigma-scaling."
        ),
    )
    demo.add_argument(
        "--out",
        default="bayescal-demo-output",
        help="folder for the report and plots (default: %(default)s)",
    )
    demo.add_argument(
        "--seed", type=int, default=0, help="random seed (default: %(default)s)"
    )
    demo.add_argument(
        "--num-samples",
        type=int,
        default=1000,
        help="posterior draws after warm-up (default: %(default)s)",
    )
    demo.add_argument(
        "--num-warmup", type=int, default=500, help="warm-up steps (default: %(default)s)"
    )
    demo.add_argument("--quiet", action="store_true", help="no progress bar while sampling")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayescal`` command; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            from bayescal._cli.demo import run_demo

            run_demo(
                out=args.out,
                seed=args.seed,
                num_samples=args.num_samples,
                num_warmup=args.num_warmup,
                progress=not args.quiet,
            )
        return 0
    except UserError as err:
        print(f"bayescal {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
