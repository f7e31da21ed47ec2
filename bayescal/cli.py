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
    ev = sub.add_parser(
        "evaluate",
        help="compute calibration metrics of predictions stored in a file",
        description=(
            "Read predictions from FILE and report calibration: a NetCDF file written "
            "by ArviZ (posterior_predictive and observed_data groups; any PPL through "
            "ArviZ), or a CSV file with named columns: y,loc,scale (Normal predictives), "
            "y,prob (binary classifier), or y plus one column per predictive draw "
            "(draw_1, draw_2, ...). Prints a table, writes report.json and PNG plots "
            "into --out. Bad input: one line on stderr and exit status 2."
        ),
    )
    ev.add_argument("file", metavar="FILE", help="a .nc (ArviZ NetCDF) or .csv file")
    ev.add_argument(
        "--format",
        choices=("auto", "csv", "netcdf"),
        default="auto",
        help="file format; auto: by extension (.nc/.netcdf/.nc4/.h5 = NetCDF, else CSV)",
    )
    ev.add_argument(
        "--var-name",
        default=None,
        help="NetCDF: the variable in posterior_predictive and observed_data "
        "(default: the only one in both)",
    )
    ev.add_argument(
        "--out",
        default="bayescal-report",
        help="folder for report.json and the plots (default: %(default)s)",
    )
    ev.add_argument(
        "--num-levels",
        type=int,
        default=100,
        help="regression: levels of the calibration curve (default: %(default)s)",
    )
    ev.add_argument(
        "--bins",
        type=int,
        default=15,
        help="classification: number of equal-width bins (default: %(default)s)",
    )
    ev.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the randomized PIT for integer data (default: %(default)s)",
    )
    ev.add_argument("--no-plots", action="store_true", help="write no PNG files")
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
        elif args.command == "evaluate":
            from bayescal._cli.evaluate import InputError, run_evaluate

            if args.num_levels < 2:
                raise UserError(f"--num-levels must be >= 2; got {args.num_levels}")
            if args.bins < 1:
                raise UserError(f"--bins must be >= 1; got {args.bins}")
            try:
                run_evaluate(
                    args.file,
                    out=args.out,
                    fmt=args.format,
                    var_name=args.var_name,
                    num_levels=args.num_levels,
                    bins=args.bins,
                    seed=args.seed,
                    plots=not args.no_plots,
                )
            except InputError as err:
                raise UserError(str(err)) from None
        return 0
    except UserError as err:
        print(f"bayescal {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
