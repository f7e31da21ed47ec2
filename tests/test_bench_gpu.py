"""benchmarks/bench_gpu.py runs end to end on CPU (``--interpret``, tiny N).

Property checks only (no reference numbers: timings on a shared CPU mean nothing):
the script exits 0, times every kernel it lists (the XLA and the Pallas variants),
writes the markdown table atomically, and refuses to replace a file it did not write.
"""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_gpu.py"


def _run(*args, timeout=240):
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_interpret_run_writes_the_table(tmp_path):
    out = tmp_path / "bench.md"
    proc = _run(
        "--interpret",
        "--no-tests",
        "--sizes",
        "300",
        "--repeat",
        "1",
        "--markdown",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert text.startswith("<!-- written by benchmarks/bench_gpu.py -->")
    assert "interpreter" in text
    for kernel in (
        "expected_calibration_error (15 bins)",
        "calibration_curve (100 levels)",
        "count_at_or_below 100 levels [compare]",
        "bin_sums count+p+y, 15 bins [pallas]",
        "fit_isotonic",
        "brier_decomposition",
        "plain jnp.mean(draws <= y, axis=0) [1000 draws]",
        "pit_draws [1000 draws]",
        "pit_draws, randomized [1000 draws]",
    ):
        assert f"| {kernel} | 3e+02 |" in text, kernel
    assert not [p for p in tmp_path.iterdir() if p.name != "bench.md"]  # no temp file left
    # A second run replaces its own file; a file it did not write is left alone.
    other = tmp_path / "notes.md"
    other.write_text("my notes\n")
    proc = _run("--interpret", "--no-tests", "--sizes", "1", "--markdown", str(other))
    assert proc.returncode != 0 and "was not written by bench_gpu" in proc.stderr
    assert other.read_text() == "my notes\n"


def test_without_accelerator_or_interpret_it_says_what_to_do():
    proc = _run("--no-tests")
    assert proc.returncode == 2
    assert "--interpret" in proc.stderr and "no accelerator" in proc.stderr
    proc = _run("--interpret", "--sizes", "1e6,abc")
    assert proc.returncode != 0 and "--sizes must be" in proc.stderr


def test_make_bench_calls_main_quick_of_every_other_module():
    # `make bench` (benchmarks/run.py) calls main(quick=...) of every bench_*.py but the
    # scripts in its SEPARATE set; bench_gpu's main(argv) crashed it before. Each module
    # is read as source here (importing them all would import every peer).
    import ast

    separate = set()
    for node in ast.parse((ROOT / "benchmarks" / "run.py").read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "SEPARATE":
            separate = ast.literal_eval(node.value)
    assert "bench_gpu" in separate
    for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        mains = [
            f
            for f in ast.parse(path.read_text()).body
            if isinstance(f, ast.FunctionDef) and f.name == "main"
        ]
        assert len(mains) == 1, path.name
        takes_quick = "quick" in [a.arg for a in mains[0].args.args]
        assert takes_quick != (path.stem in separate), path.name


def test_gpu_alternatives_smoke_run():
    # benchmarks/gpu_alternatives.py (the alternatives quoted in docs/gpu.md) runs every
    # case at tiny N on CPU, and each alternative agreed with its reference (the script
    # exits non-zero on a mismatch)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_alternatives.py"), "all", "--small"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in (
        "PAV n=1e+03 accel ",
        "PAV adversarial one huge pool",
        "pit [100, 1e+03] count, both",
        "bins15 n=1e+03 siblings",
        "levels100 n=1e+03 block-scatter",
    ):
        assert line in proc.stdout, line
