"""Run every ``benchmarks/bench_*.py`` and print one markdown table.

Each module defines ``main(quick: bool) -> list[dict]`` (rows from ``_common.row``) and
checks that bayescal and the peer agree before timing. ``--quick`` uses smaller inputs.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import platform
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Benchmark the checkout these files live in, not another installed (editable) copy.
sys.path.insert(0, str(HERE.parent))

from _common import print_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller inputs")
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
        mod = importlib.import_module(path.stem)
        print(f"## {path.stem}", flush=True)
        rows.extend(mod.main(quick=args.quick))
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
