"""Run every ``benchmarks/bench_*.py`` and print one markdown table.

Each module defines ``main(quick: bool) -> list[dict]`` (rows from ``_common.row``) and
checks that bayescal and the peer agree before timing. ``--quick`` uses smaller inputs.
``bench_cold`` (first calls and new N, with and without the persistent compilation
cache) runs its measurements in fresh processes and also prints the markdown section
"First call and new N (cold start)" of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import platform
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's bayescal, not an installed one

from _common import bandwidth_rows, print_bandwidth, print_table  # noqa: E402

#: Scripts with a command line of their own, not a ``main(quick)``: ``make bench-gpu``
#: runs bench_gpu (it crashed ``make bench`` here before).
SEPARATE = {"bench_gpu"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
    parser.add_argument(
        "--bandwidth",
        action="store_true",
        help="also report GB/s per kernel on CPU (always on with an accelerator)",
    )
    parser.add_argument("only", nargs="*", help="module names (e.g. bench_regression)")
    args = parser.parse_args()
    import jax

    print(
        f"# bayescal benchmarks on {platform.processor() or platform.machine()}, "
        f"jax {jax.__version__}, backend {jax.default_backend()}\n"
    )
    rows = []
    for path in sorted(HERE.glob("bench_*.py")):
        if args.only and path.stem not in args.only:
            continue
        if path.stem in SEPARATE:
            continue
        mod = importlib.import_module(path.stem)
        print(f"## {path.stem}", flush=True)
        rows.extend(mod.main(quick=args.quick))
    print()
    print_table(rows)
    if jax.default_backend() != "cpu" or args.bandwidth:
        # On an accelerator: per kernel GB/s of input read, and the fraction of a
        # read+write copy's bandwidth measured in the same run (the limit of a pass).
        n = 10**6 if args.quick else 10**8
        if jax.default_backend() == "cpu":
            n = min(n, 10**7)
        print(f"\n## bandwidth (N = {n:.0e} float32, backend {jax.default_backend()})\n")
        print_bandwidth(bandwidth_rows(n))


if __name__ == "__main__":
    main()
