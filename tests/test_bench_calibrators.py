"""benchmarks/bench_calibrators.py runs end to end at a tiny N (smoke test).

Property checks only (timings on a shared CPU mean nothing): the script exits 0, so
every row's equality check against its peer passed (it raises AssertionError
otherwise); every row is in the table; a row whose peer package is not installed in
this environment is marked "peer not installed" instead of being skipped, and every
other row says "equal: <tolerance>" with a ratio; the table is written atomically and
a file the script did not write is never replaced.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_calibrators.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_calibrators  # noqa: E402


def _run(*args, timeout=600):
    # the same module search path as this process, so "installed" means the same here
    path = os.pathsep.join([str(ROOT), *[p for p in sys.path if p]])
    env = dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu")
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def _installed(module):
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def test_tiny_run_checks_every_row_and_writes_the_table(tmp_path):
    out = tmp_path / "bench.md"
    proc = _run("--sizes", "200", "--repeat", "1", "--markdown", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert text.startswith(bench_calibrators.MARK)
    lines = [line for line in text.splitlines() if line.startswith("| ") and "2e+02" in line]
    assert len(lines) == len(bench_calibrators.CASES)
    for case, line in zip(bench_calibrators.CASES, lines, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == case.name and cells[4] == case.peer, line
        assert float(cells[2]) > 0 and float(cells[3]) > 0, line  # cold and warm timed
        if _installed(case.module):
            assert cells[7] == f"equal: {case.tolerance}", line
            assert cells[6].endswith("x") and float(cells[5]) > 0, line
        else:
            assert cells[7] == bench_calibrators.NOT_INSTALLED, line
            assert cells[5] == "" and cells[6] == "", line
    # the rows cover the public names issue 20 added (fits and tests)
    covered = " ".join(c.name for c in bench_calibrators.CASES)
    for name in (
        "fit_venn_abers", "fit_cross_venn_abers", "fit_centered_isotonic",
        "fit_isotonic(prior=", "fit_scaling_binning", "fit_vector_scaling",
        "fit_matrix_scaling", "fit_dirichlet", "fit_top_label", "kernel_calibration_error",
        "hosmer_lemeshow", "spiegelhalter_z", "calibration_slope_intercept",
        "cumulative_calibration_test",
        "isotonic_calibration_index", "select_calibrator", "select_calibrator [N, K=4]",
        "fit_spline",
    ):
        assert name in covered, name
    assert not [p for p in tmp_path.iterdir() if p.name != "bench.md"]  # no temp file left


def test_refuses_a_file_it_did_not_write_and_bad_sizes(tmp_path):
    other = tmp_path / "notes.md"
    other.write_text("my notes\n")
    proc = _run("--sizes", "50", "--markdown", str(other), timeout=120)
    assert proc.returncode != 0 and "was not written by bench_calibrators" in proc.stderr
    assert other.read_text() == "my notes\n"
    proc = _run("--sizes", "1e3,abc", timeout=120)
    assert proc.returncode != 0 and "--sizes must be" in proc.stderr
