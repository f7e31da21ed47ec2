"""Accelerator benchmark: the test files that touch device kernels, then per-kernel
time, GB/s of input read and the fraction of a device copy's bandwidth.

Usage (``make bench-gpu`` runs the first form)::

    python benchmarks/bench_gpu.py --markdown gpu-bench.md
    python benchmarks/bench_gpu.py --interpret --sizes 1e4,1e5   # CPU: Pallas interpreted

On an accelerator it runs ``pytest`` on :data:`TEST_FILES` (in a subprocess, its
summary goes into the table's header), then for N = 1e6, 1e7, 1e8 (sizes whose
inputs do not fit in device memory are skipped) times each kernel of
:func:`kernels`: the median of ``--repeat`` calls after one warm-up call, each waited
for with ``block_until_ready``, under ``jax.jit``. GB/s counts the bytes of the
inputs read (4 per float32 value); "of copy" divides by the bandwidth of a read+write
device copy of 1 GiB measured in the same run, the limit of one pass over the data.

Without an accelerator the script stops unless ``--interpret`` is given: then the
Pallas kernels run in Pallas' interpreter on the CPU at small N (default 1e4, 1e5) so
that the script itself is tested (tests/test_bench_gpu.py); those numbers measure the
interpreter, not a kernel.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import platform
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))  # this checkout's bayescal, not an installed one

#: The test files whose code paths differ on an accelerator: the per-backend kernels
#: (binning variants, Pallas, PIT counts), the device-side PAV, the accumulators, the
#: sharded and multi-device paths, the contract matrix (every public function eager,
#: jit, vmap, grad) and the cold-start budget.
TEST_FILES = (
    "tests/test_pallas.py",
    "tests/test_kernels.py",
    "tests/test_isotonic_device.py",
    "tests/test_accumulators.py",
    "tests/test_sharding.py",
    "tests/test_contract.py",
    "tests/test_regression_pit.py",
    "tests/test_classification_metrics.py",
)

#: First line of the markdown file: an existing file without it is never replaced.
MARK = "<!-- written by benchmarks/bench_gpu.py -->"
GPU_SIZES = (10**6, 10**7, 10**8)
CPU_SIZES = (10**4, 10**5)


def _parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(float(s)) for s in text.split(",") if s.strip())
    except ValueError:
        raise SystemExit(  # noqa: B904 (the message is the whole story)
            f"--sizes must be comma-separated numbers like 1e6,1e7; got {text!r}"
        )
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"--sizes must be positive numbers like 1e6,1e7; got {text!r}")
    return sizes


def accelerator() -> str | None:
    """The accelerator's description (``"NVIDIA H100 80GB HBM3 (gpu)"``), or None."""
    import jax

    backend = jax.default_backend()
    if backend == "cpu":
        return None
    dev = jax.devices()[0]
    return f"{getattr(dev, 'device_kind', dev.platform)} ({backend})"


def _device_bytes() -> int | None:
    import jax

    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # not every backend reports memory
        return None
    return stats.get("bytes_limit")


def run_tests(files=TEST_FILES) -> str:
    """Run ``pytest`` on ``files`` in a subprocess; its last line (the summary)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", *files]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "(no output)"
    print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n", flush=True)
    return f"{tail} (exit {proc.returncode})"


def kernels(n: int, *, interpret: bool):
    """``[(name, fn, bytes of input)]`` at ``n`` values, inputs on the device."""
    import jax
    import jax.numpy as jnp

    from bayescal._src import binning as b
    from bayescal._src import pallas_histogram as ph
    from bayescal._src.binned import uniform_edges
    from bayescal.classification import (
        brier_decomposition,
        expected_calibration_error,
        fit_isotonic,
        reliability_curve,
    )
    from bayescal.regression import calibration_curve, pit_draws

    p = jax.random.uniform(jax.random.key(0), (n,))
    y = (jax.random.uniform(jax.random.key(1), (n,)) < p).astype(p.dtype)
    u = jax.random.uniform(jax.random.key(2), (n,))
    edges = uniform_edges(15, p.dtype)

    def variant(name):
        def sums(p, y):
            return b.bin_sums(b.bin_index(p, edges), 15, (p, y), bounded=True, variant=name)

        def levels(u):
            return b.count_at_or_below(u, 100, variant=name)

        return jax.jit(sums), jax.jit(levels)

    cases = [
        (
            "expected_calibration_error (15 bins)",
            jax.jit(expected_calibration_error),
            (y, p),
            8,
        ),
        ("reliability_curve (15 bins)", jax.jit(reliability_curve), (y, p), 8),
        (
            "calibration_curve (100 levels)",
            jax.jit(lambda v: calibration_curve(v, num_levels=100)),
            (u,),
            4,
        ),
    ]
    names = ["compare"]
    if interpret or b.pallas_on_gpu():
        names.append("pallas")
    for name in names:
        sums, levels = variant(name)
        cases.append((f"bin_sums count+p+y, 15 bins [{name}]", sums, (p, y), 8))
        if name != "pallas":  # the level counts have no Pallas kernel (XLA as fast)
            cases.append((f"count_at_or_below 100 levels [{name}]", levels, (u,), 4))
    if interpret or b.pallas_on_gpu():
        fused = jax.jit(
            lambda p, y: ph.bin_stats(
                p, 15, (p, y), (1.0, 1.0), edges=edges, interpret=not b.pallas_on_gpu()
            )
        )
        cases.append(("bin_stats from values+edges, 15 bins [pallas]", fused, (p, y), 8))
    cases += [
        ("fit_isotonic", fit_isotonic, (y, p), 8),
        ("brier_decomposition", jax.jit(brier_decomposition), (y, p), 8),
    ]
    # PIT from draws [1000, N / 1000] beside the plain count of draws at or below y
    s = 1000
    draws = jax.random.normal(jax.random.key(3), (s, max(n // s, 1)))
    obs = jax.random.normal(jax.random.key(4), (draws.shape[1],))
    cases += [
        ("plain jnp.mean(draws <= y, axis=0) [1000 draws]",
         jax.jit(lambda d, v: jnp.mean(d <= v, axis=0)), (draws, obs), 4),
        ("pit_draws [1000 draws]", jax.jit(lambda d, v: pit_draws(v, d)), (draws, obs), 4),
        ("pit_draws, randomized [1000 draws]",
         jax.jit(lambda d, v: pit_draws(v, d, key=jax.random.key(5))), (draws, obs), 4),
    ]
    cases += _torchmetrics(p, y)
    return [(name, fn, args, int(per * n)) for name, fn, args, per in cases]


def _torchmetrics(p, y) -> list:
    """torchmetrics' ``binary_calibration_error`` (15 bins) on the same data on the GPU,
    when torch with CUDA and torchmetrics import; its value is printed beside
    bayescal's (:data:`VALUES`)."""
    try:
        import torch
        from torchmetrics.functional.classification import binary_calibration_error
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    import numpy as np

    from bayescal.classification import expected_calibration_error

    tp = torch.from_numpy(np.asarray(p)).cuda()
    ty = torch.from_numpy(np.asarray(y)).cuda().long()

    def run(tp, ty):
        return float(binary_calibration_error(tp, ty, n_bins=15, norm="l1"))

    VALUES.append(
        (p.shape[0], run(tp, ty), float(expected_calibration_error(y, p)))
    )
    return [("torchmetrics binary_calibration_error (15 bins)", run, (tp, ty), 8)]


#: (N, torchmetrics' ECE, bayescal's ECE) of the run, for the markdown
VALUES: list = []


def measure(sizes, *, interpret: bool, repeat: int) -> tuple[float, list[dict]]:
    """The copy bandwidth (GB/s) and one row per (kernel, N)."""
    from _common import copy_bandwidth, median_time

    copy = copy_bandwidth(1 << 30 if not interpret else 1 << 26)
    print(f"device copy (read + write): {copy:.1f} GB/s", flush=True)
    limit = _device_bytes()
    rows = []
    for n in sizes:
        # inputs (3 float32 arrays), a bin index, a sort's workspace and the copy's
        # buffers: about 40 bytes per value
        if limit is not None and 40 * n > limit:
            print(f"N = {n:.0e}: skipped (needs ~{40 * n / 2**30:.1f} GiB)", flush=True)
            continue
        for name, fn, args, nbytes in kernels(n, interpret=interpret):
            t = median_time(lambda fn=fn, args=args: fn(*args), repeat=repeat)
            gbs = nbytes / t / 1e9
            row = {
                "kernel": name,
                "N": n,
                "ms": t * 1e3,
                "GB/s": gbs,
                "of copy": gbs / copy,
            }
            rows.append(row)
            print(
                f"{name:<48} N={n:.0e} {row['ms']:10.3f} ms {gbs:9.3g} GB/s "
                f"{row['of copy']:6.2f} of copy",
                flush=True,
            )
    return copy, rows


def markdown(
    device: str, copy: float, rows: list[dict], tests: str, interpret: bool
) -> str:
    import jax

    lines = [
        MARK,
        f"### bench_gpu: {device}, jax {jax.__version__}, "
        f"{datetime.date.today().isoformat()}",
        "",
        f"Device copy (read + write): {copy:.1f} GB/s. Tests: {tests}.",
    ]
    if interpret:
        lines.append(
            "Pallas kernels run in Pallas' interpreter on the CPU (`--interpret`): these "
            "numbers test the script, they do not measure the kernels."
        )
    lines += [
        "",
        "| kernel | N | ms | GB/s of input | of copy |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['N']:.0e} | {r['ms']:.3f} | {r['GB/s']:.3g} | "
            f"{r['of copy']:.2f} |"
        )
    if VALUES:
        lines += ["", "| N | ECE, torchmetrics | ECE, bayescal |", "|---:|---:|---:|"]
        lines += [f"| {n:.0e} | {t:.6f} | {b:.6f} |" for n, t, b in VALUES]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", help="write the table here (markdown)")
    parser.add_argument(
        "--interpret",
        action="store_true",
        help="no accelerator: run the Pallas kernels interpreted on the CPU at small N",
    )
    parser.add_argument("--sizes", help="comma-separated N (default 1e6,1e7,1e8; 1e4,1e5)")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per kernel")
    parser.add_argument("--no-tests", action="store_true", help="skip the pytest run")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1; got {args.repeat}")
    if args.markdown is not None:
        out = pathlib.Path(args.markdown)
        if not out.parent.is_dir():
            raise SystemExit(
                f"--markdown: folder {out.parent} does not exist; create it first"
            )
        if out.exists() and not out.read_text(errors="replace").startswith(MARK):
            raise SystemExit(
                f"--markdown: {out} exists and was not written by bench_gpu; "
                "name a new file or remove it first"
            )
    device = accelerator()
    if device is None and not args.interpret:
        print(
            "bench_gpu: no accelerator (jax.default_backend() is 'cpu'). Install JAX's "
            "CUDA build on a GPU machine (docs/gpu.md), or pass --interpret to run the "
            "Pallas kernels interpreted on the CPU at small N (tests the script only).",
            file=sys.stderr,
        )
        return 2
    interpret = device is None
    sizes = (
        _parse_sizes(args.sizes) if args.sizes else (CPU_SIZES if interpret else GPU_SIZES)
    )
    label = device or f"CPU ({platform.processor() or platform.machine()}), interpreted"
    print(f"# bench_gpu on {label}", flush=True)
    tests = "not run (--no-tests)" if args.no_tests else run_tests()
    copy, rows = measure(sizes, interpret=interpret, repeat=args.repeat)
    text = markdown(label, copy, rows, tests, interpret)
    print("\n" + text, flush=True)
    if args.markdown is not None:
        from _common import write_atomic

        write_atomic(pathlib.Path(args.markdown), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
