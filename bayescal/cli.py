"""Command line: ``bayescal demo`` and ``bayescal evaluate``.

Errors in user input (bad files, bad options, values the compute dtype cannot hold,
an output folder that cannot be written, a path the system cannot hold, a device as
FILE) end with one line on stderr naming the problem and exit status 2, never a
traceback. Ctrl-C ends a run with "interrupted" and exit status 130, whatever was
running (:mod:`bayescal._cli.interrupt`). Output folders are written all at once or
not at all, and never overwrite anything without ``--force``. Text the terminal's
encoding cannot show (a file name) is printed escaped, and so is every control
character (``\\x1b``, ``\\x07``, ``\\x9b``; not newline and tab) that anything prints,
so that a column or file name cannot drive the terminal; a long name in a message is
cut, with its length (:func:`bayescal._cli.options.shown`).

Both commands switch on JAX's persistent compilation cache
(:func:`bayescal.enable_compilation_cache`, in the user's cache folder or
``--cache-dir`` / ``$BAYESCAL_CACHE_DIR``; a directory set for JAX with
``$JAX_COMPILATION_CACHE_DIR`` is kept), so that a second run loads its compiled
programs instead of compiling them. ``--no-cache`` (or ``BAYESCAL_NO_CACHE=1``)
leaves it off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import TextIO

from bayescal._cli import interrupt
from bayescal._cli import options as _o
from bayescal._cli.options import (
    OneLineParser,
    UserError,
    bounded_float,
    bounded_int,
    escaped,
    shown,
)

__all__ = ["main"]


def _range(bounds: tuple[int, int]) -> str:
    return f"{bounds[0]}..{bounds[1]}"


def _add_cache_options(command: OneLineParser) -> None:
    command.add_argument(
        "--no-cache",
        action="store_true",
        help="do not use JAX's persistent compilation cache (also: BAYESCAL_NO_CACHE=1)",
    )
    command.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="compilation cache folder (default: $BAYESCAL_CACHE_DIR, else JAX's "
        "configured one, else ~/.cache/bayescal/jax or the platform's cache folder)",
    )


def _enable_cache(args) -> None:
    """The command line's compilation cache: on unless --no-cache / BAYESCAL_NO_CACHE."""
    if args.no_cache or os.environ.get("BAYESCAL_NO_CACHE", "") not in ("", "0"):
        return
    path = args.cache_dir or os.environ.get("BAYESCAL_CACHE_DIR") or None
    from bayescal import enable_compilation_cache

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's choice of folder is the answer
            enable_compilation_cache(path, concurrent=True)
    except (OSError, ValueError) as err:
        # a cache is an optimisation: say why it is off, and go on without it
        print(f"bayescal: compilation cache off: {err}", file=sys.stderr)


def _build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="bayescal",
        description="Measure and repair the calibration of probabilistic predictions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    demo = sub.add_parser(
        "demo",
        help="fit simple NumPyro models on bundled real data and report calibration",
        description=(
            "Fit two deliberately simple Bayesian models with NumPyro (NUTS) on bundled "
            "real data, split train / calibration / test: a Poisson regression to the "
            "diabetes data (Efron et al. 2004), reported before and after isotonic "
            "recalibration (on the calibration split, and split-free on the training "
            "data's LOO-PIT) and sigma-scaling, and a logistic regression to the "
            "breast-cancer data (Wisconsin diagnostic), before and after Platt scaling "
            "and isotonic calibration. Prints the tables, writes report.json and PNG "
            "plots into --out."
        ),
    )
    demo.add_argument(
        "--out",
        default="bayescal-demo-output",
        metavar="DIR",
        help="folder for the report and plots, created whole when the run succeeds "
        "(default: %(default)s)",
    )
    demo.add_argument(
        "--force", action="store_true", help="overwrite the report files in an existing --out"
    )
    demo.add_argument(
        "--seed",
        type=bounded_int("--seed", *_o.SEED),
        metavar="N",
        default=0,
        help=f"random seed, {_range(_o.SEED)} (default: %(default)s)",
    )
    demo.add_argument(
        "--num-samples",
        type=bounded_int("--num-samples", *_o.NUM_SAMPLES),
        metavar="N",
        default=1000,
        help=f"posterior draws after warm-up, {_range(_o.NUM_SAMPLES)} (default: %(default)s)",
    )
    demo.add_argument(
        "--num-warmup",
        type=bounded_int("--num-warmup", *_o.NUM_WARMUP),
        metavar="N",
        default=500,
        help=f"warm-up steps, {_range(_o.NUM_WARMUP)} (default: %(default)s)",
    )
    demo.add_argument("--quiet", action="store_true", help="no progress bar while sampling")
    _add_cache_options(demo)
    ev = sub.add_parser(
        "evaluate",
        help="compute calibration metrics of predictions stored in a file",
        description=(
            "Read predictions from FILE and report calibration: a NetCDF file written "
            "by ArviZ (posterior_predictive and observed_data groups; any PPL through "
            "ArviZ; read lazily and streamed in chunks), a zarr store (needs zarr), or a "
            "CSV file with a header in one layout: normal (y,loc,scale), draws "
            "(y,draw_0,...,draw_{S-1}), quantiles (y,q_0.1,q_0.5,...) or binary "
            "(y,prob). Without --layout the columns must match one layout exactly. "
            "FILE may be a pipe or FIFO (e.g. <(cat d.csv)), read once into memory (at "
            "most 1 GiB). Prints the tables (metrics with calibration-test p-values, "
            "coverage of central intervals, sparse bins), writes report.json, "
            "report.html (self-contained) and PNG plots into --out. "
            "Bad input: one line on stderr and exit status 2; Ctrl-C: exit status 130."
        ),
    )
    ev.add_argument("file", metavar="FILE",
                    help="a .csv, .nc (ArviZ NetCDF) or .zarr path, or a pipe or FIFO")
    ev.add_argument(
        "--format",
        choices=("auto", "csv", "netcdf", "zarr"),
        default="auto",
        help="file format; auto: by extension (.nc/.netcdf/.nc4/.h5/.hdf5 = NetCDF, "
        ".zarr = zarr, else CSV; a pipe: NetCDF if it begins as one, else CSV)",
    )
    ev.add_argument(
        "--layout",
        choices=("normal", "draws", "quantiles", "binary"),
        default=None,
        help="CSV layout; the columns of other layouts are then ignored (and reported). "
        "Default: the one layout the header matches exactly",
    )
    ev.add_argument(
        "--var-name",
        default=None,
        metavar="NAME",
        help="NetCDF/zarr: the variable in posterior_predictive and observed_data "
        "(default: the only one in both)",
    )
    ev.add_argument(
        "--out",
        default="bayescal-report",
        metavar="DIR",
        help="folder for report.json and the plots, created whole when the run succeeds "
        "(default: %(default)s)",
    )
    ev.add_argument(
        "--force", action="store_true", help="overwrite the report files in an existing --out"
    )
    ev.add_argument(
        "--num-levels",
        type=bounded_int("--num-levels", *_o.NUM_LEVELS),
        metavar="K",
        default=100,
        help=f"regression: levels of the calibration curve, {_range(_o.NUM_LEVELS)} "
        "(default: %(default)s)",
    )
    ev.add_argument(
        "--bins",
        type=bounded_int("--bins", *_o.BINS),
        metavar="K",
        default=15,
        help=f"classification: number of equal-width bins, {_range(_o.BINS)} "
        "(default: %(default)s)",
    )
    ev.add_argument(
        "--seed",
        type=bounded_int("--seed", *_o.SEED),
        metavar="N",
        default=0,
        help=f"seed of the randomized PIT for integer data, the tests' p-values, the "
        f"PIT ECDF band and the calibration split, {_range(_o.SEED)} "
        "(default: %(default)s)",
    )
    ev.add_argument(
        "--chunk-mb",
        type=bounded_int("--chunk-mb", *_o.CHUNK_MB),
        metavar="MB",
        default=64,
        help="draws: megabytes of draws read and processed at a time (default: %(default)s)",
    )
    ev.add_argument("--no-plots", action="store_true",
                    help="write no PNG files (report.html then holds the tables only)")
    ev.add_argument(
        "--no-loo",
        action="store_true",
        help="NetCDF/zarr with a log_likelihood group: skip the PSIS-LOO PIT metrics "
        "(computed by default, with the draws in memory)",
    )
    ev.add_argument(
        "--data-split",
        choices=("auto", "in-sample", "held-out"),
        default="auto",
        help="were FILE's observations used to fit the model? Labels the table, the "
        "JSON and the figures. auto: in-sample for NetCDF/zarr (ArviZ's observed_data "
        "is the data the model was fitted to), not stated for CSV (default: %(default)s)",
    )
    ev.add_argument(
        "--recalibrate",
        choices=("auto", "isotonic", "sigma", "conformal", "platt", "beta", "histogram",
                 "temperature"),
        default=None,
        help="fit a recalibrator on a calibration part of FILE (the LOO-PIT where "
        "computed), write it (recalibrator*.npz, for bayescal.core.load_calibrator) and "
        "report the held-out part before and after, with a verdict: whether it beat no "
        "recalibration in cross-validation within the calibration part. auto: the "
        "cross-validated choice, none included (then no file). Regression: auto, "
        "isotonic, sigma (normal layout), conformal (normal or draws, one file per "
        "coverage 50/80/90/95%%); classifiers: auto, isotonic, platt, beta, histogram, "
        "temperature",
    )
    ev.add_argument(
        "--calibration-fraction",
        type=bounded_float("--calibration-fraction", *_o.CALIBRATION_FRACTION),
        default=0.5,
        metavar="F",
        help="--recalibrate: share of the observations (drawn with --seed) to fit on; "
        "the rest is held out (default: %(default)s)",
    )
    _add_cache_options(ev)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayescal`` command; returns the exit status.

    ``--help`` exits with status 0 (``SystemExit``, as argparse does); every error in
    the options or the input prints one line on stderr and returns 2; Ctrl-C (SIGINT)
    prints "interrupted" and returns 130, whatever was running when it came.
    """
    command = ["bayescal"]
    with _printable_streams(), interrupt.watching():
        try:
            _run(argv, command)
            interrupt.check()  # a Ctrl-C swallowed on the way (see bayescal._cli.interrupt)
            return 0
        except SystemExit:
            raise  # --help
        except BaseException as err:
            if interrupt.received() or isinstance(err, KeyboardInterrupt):
                # whatever error the interruption became on the way
                print(f"{command[0]}: interrupted", file=sys.stderr)
                return interrupt.EXIT_STATUS
            if isinstance(err, OSError):
                # a system error the checks did not anticipate: still one line, exit 2
                where = f"{shown(err.filename)}: " if err.filename else ""
                err = UserError(f"{where}{err.strerror or err}")
            if not isinstance(err, UserError):
                raise
            text = " ".join(str(err).split())  # one line, whatever the message held
            print(f"{err.prog or command[0]}: error: {text}", file=sys.stderr)
            return 2


def _run(argv: Sequence[str] | None, command: list[str]) -> None:
    """Parse ``argv`` and run the command; ``command[0]`` is set to its name."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    command[0] = f"bayescal {args.command}"
    _enable_cache(args)
    if args.command == "demo":
        from bayescal._cli.demo import run_demo

        run_demo(
            out=args.out,
            seed=args.seed,
            num_samples=args.num_samples,
            num_warmup=args.num_warmup,
            progress=not args.quiet,
            force=args.force,
        )
    else:
        from bayescal._cli.evaluate import InputError, run_evaluate

        try:
            run_evaluate(
                args.file,
                out=args.out,
                fmt=args.format,
                var_name=args.var_name,
                layout=args.layout,
                num_levels=args.num_levels,
                bins=args.bins,
                seed=args.seed,
                plots=not args.no_plots,
                force=args.force,
                chunk_mb=args.chunk_mb,
                loo=not args.no_loo,
                split=args.data_split,
                recalibrate=args.recalibrate,
                calibration_fraction=args.calibration_fraction,
            )
        except InputError as err:
            raise UserError(str(err)) from None
        except (ValueError, TypeError) as err:
            # a library check the CLI did not anticipate: still one line, exit 2
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise UserError(first) from None


class _Escaping:
    """A text stream that writes through to ``unescaped`` with the control characters
    escaped (:func:`bayescal._cli.options.escaped`); the rest is the stream's own."""

    def __init__(self, stream: TextIO, *, reader_may_leave: bool = False) -> None:
        self.unescaped = stream
        self.reader_may_leave = reader_may_leave
        self.reader_left = False

    def write(self, text: str) -> int:
        if not self.reader_left:
            with self._reader_leaving():
                self.unescaped.write(escaped(text) if isinstance(text, str) else text)
        return len(text)

    def flush(self) -> None:
        if not self.reader_left:
            with self._reader_leaving():
                self.unescaped.flush()

    @contextlib.contextmanager
    def _reader_leaving(self) -> Iterator[None]:
        """Standard output's reader may stop reading (``bayescal evaluate ... | head``):
        the rest of the printed report is dropped, and the command goes on to write its
        files and ends as it would have (a closed pipe loses nothing on disk). The
        stream's descriptor is pointed at the null device, so that Python's own flush at
        exit has nowhere to fail."""
        try:
            yield
        except BrokenPipeError:
            if not self.reader_may_leave:
                raise
            self.reader_left = True
            with contextlib.suppress(OSError, ValueError, AttributeError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self.unescaped.fileno())
                os.close(null)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.unescaped, name)


@contextlib.contextmanager
def _printable_streams() -> Iterator[None]:
    """Print what the terminal's encoding cannot show (a file name in UTF-8 under
    ``PYTHONIOENCODING=ascii`` or a C locale, bytes that are not UTF-8) escaped, as
    ``\\xe9``, instead of failing with ``UnicodeEncodeError`` after the computation; and
    the control characters of whatever is printed (a column or file name from the
    user's data in a message or a table) escaped, as ``\\x1b``: nothing printed can set
    the terminal's title, clear it or move its cursor (:class:`_Escaping`)."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        if errors == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError, AttributeError):
                continue
            changed.append((stream, errors))
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (
        _Escaping(s, reader_may_leave=s is saved[0]) if s is not None else s for s in saved
    )
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for stream, errors in changed:
            with contextlib.suppress(ValueError, OSError, AttributeError):
                stream.reconfigure(errors=errors)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
