"""End-to-end tests of the command line, as a user runs it (real subprocesses).

Each subprocess imports JAX afresh (~2.5 s of CPU): the message of every bad input is
checked in-process through ``bayescal.cli.main`` (as in test_cli_hardening.py), and one
bad input of each kind (CSV content, file, option) also as a real process, for the exit
status and the one line on stderr that a user sees.
"""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from bayescal import regression as reg
from bayescal.cli import main
from tests._cli import assert_one_line_error, evaluate


def run(*args, cwd=None, timeout=600):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "bayescal.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def write_csv(path, header, columns, fmt="%.8g"):
    np.savetxt(
        path,
        np.column_stack(columns),
        delimiter=",",
        header=",".join(header),
        comments="",
        fmt=fmt,
    )
    return path


@pytest.fixture
def regression_csv(tmp_path):
    rng = np.random.default_rng(0)
    loc = rng.normal(size=300)
    y = loc + 1.5 * rng.normal(size=300)
    return write_csv(
        tmp_path / "pred.csv", ["y", "loc", "scale"], [y, loc, np.ones(300)]
    ), (y, loc)


def test_help_documents_every_option():
    out = run("evaluate", "--help")
    assert out.returncode == 0
    for option in (
        "--format",
        "--var-name",
        "--out",
        "--num-levels",
        "--bins",
        "--seed",
        "--no-plots",
        "--layout",
        "--force",
        "--chunk-mb",
    ):
        assert option in out.stdout


@pytest.mark.parametrize("args", [["demo", "--help"], ["--help"]])
def test_other_help_exits_0(capsys, args):
    with pytest.raises(SystemExit) as exc:  # argparse's --help, as in a real process
        main(args)
    assert exc.value.code == 0
    assert "usage: bayescal" in capsys.readouterr().out


def test_evaluate_regression_csv_matches_library(tmp_path, regression_csv):
    path, (y, loc) = regression_csv
    out = run("evaluate", str(path), "--out", str(tmp_path / "rep"))
    assert out.returncode == 0, out.stderr
    assert "regression, 300 observations" in out.stdout
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u = reg.pit_normal(
            y.astype(np.float32), loc.astype(np.float32), np.ones(300, np.float32)
        )
    np.testing.assert_allclose(
        report["metrics"]["interval"]["MACE"],
        float(reg.calibration_error(u, kind="interval")),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        report["metrics"]["quantile"]["area (exact)"],
        float(reg.miscalibration_area(u)),
        rtol=1e-5,
    )
    assert sorted(os.path.basename(p) for p in report["plots"]) == [
        "calibration_interval.png",
        "calibration_quantile.png",
        "pit_ecdf.png",
    ]
    for p in report["plots"]:
        assert os.path.getsize(p) > 5000


@pytest.mark.slow
def test_evaluate_classification_and_draws_csv(tmp_path):
    rng = np.random.default_rng(1)
    p = rng.beta(2, 2, 200)
    y = (rng.uniform(size=200) < p).astype(int)
    path = write_csv(tmp_path / "clf.csv", ["y", "prob"], [y, p])
    out = run(
        "evaluate", str(path), "--out", str(tmp_path / "c"), "--no-plots", "--bins", "5"
    )
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    assert report["task"] == "classification" and report["plots"] == []
    from bayescal import classification as clf

    ece = float(clf.expected_calibration_error(y, p.astype(np.float32), bins=5))
    np.testing.assert_allclose(report["metrics"]["ECE"], ece, rtol=1e-5)

    draws = rng.poisson(3.0, size=(50, 120))
    yy = rng.poisson(3.0, size=120)
    cols = [yy] + list(draws)
    path = write_csv(
        tmp_path / "draws.csv", ["y"] + [f"draw_{i}" for i in range(50)], cols, fmt="%d"
    )
    out = run("evaluate", str(path), "--out", str(tmp_path / "d"), "--no-plots")
    assert out.returncode == 0, out.stderr
    assert "50 draw columns" in out.stdout and "randomized" in out.stdout


def test_evaluate_arviz_netcdf(tmp_path):
    # InferenceData.to_netcdf on arviz 0.x, DataTree.to_netcdf on arviz 1.x
    from tests import _arviz_compat as azc

    rng = np.random.default_rng(2)
    idata = azc.from_dict(
        {
            "posterior_predictive": {"y": rng.normal(size=(2, 100, 40))},
            "observed_data": {"y": rng.normal(size=40)},
        }
    )
    idata.to_netcdf(str(tmp_path / "fit.nc"))
    out = run(
        "evaluate", str(tmp_path / "fit.nc"), "--out", str(tmp_path / "n"), "--no-plots"
    )
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "n" / "report.json").read_text())
    draws = azc.group(idata, "posterior_predictive")["y"].values.reshape(200, 40)
    y = azc.group(idata, "observed_data")["y"].values
    u = reg.pit_draws(y.astype(np.float32), draws.astype(np.float32))
    np.testing.assert_allclose(
        report["metrics"]["quantile"]["MACE"], float(reg.calibration_error(u)), rtol=1e-5
    )


BAD_CSV = {
    "missing column": ("y,foo\n1,2\n3,4\n", "the columns do not match one layout \\(found: y, foo\\)"),
    "no y": ("loc,scale\n1,2\n", "no 'y' column"),
    "nan": ("y,loc,scale\n1,nan,1\n2,0,1\n", "'loc' has 1 NaN"),
    "non-numeric": ("y,loc,scale\n1,a,1\n2,0,1\n", "column 'loc' is not numeric"),
    "ragged short": ("y,loc,scale\n1,0\n2,0,1\n", "'scale' has 1 NaN or missing .* data row 1"),
    "ragged long": ("y,loc,scale\n1,0,1\n2,0,1,4\n", "Expected 3 fields in line 3, saw 4"),
    "ragged long first row": ("y,loc,scale\n1,0,1,4\n2,0,1\n", "more fields than the header"),
    "empty": ("", "the CSV file is empty"),
    "header only": ("y,loc,scale\n", "no data rows"),
    "bad scale": ("y,loc,scale\n1,0,0\n2,0,1\n", "'scale' must be > 0"),
    "bad prob": ("y,prob\n1,1.5\n0,0.2\n", "'prob' must lie in \\[0, 1\\]"),
    "bad labels": ("y,prob\n2,0.5\n0,0.2\n", "'y' must hold 0/1 labels \\(found 0, 2\\)"),
}


# every message of the command line starts so
EVALUATE_ERROR = "bayescal evaluate: error:"


@pytest.mark.parametrize("case", sorted(BAD_CSV))
def test_evaluate_bad_csv_one_line_exit_2_no_report(tmp_path, capsys, case):
    text, message = BAD_CSV[case]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "rep")
    assert_one_line_error(code, err, message, EVALUATE_ERROR)
    assert not (tmp_path / "rep" / "report.json").exists()
    if case == "nan":  # and as a user runs it
        out = run("evaluate", str(path), "--out", str(tmp_path / "rep"))
        assert_one_line_error(out.returncode, out.stderr.strip().splitlines(), message, EVALUATE_ERROR)
        assert not (tmp_path / "rep" / "report.json").exists()


def test_evaluate_bad_files(tmp_path, capsys):
    from tests import _arviz_compat as azc

    cases = {}
    cases["missing"] = (tmp_path / "nope.csv", "no such file")
    garbage = tmp_path / "garbage.nc"
    garbage.write_bytes(b"\x00\x01 not netcdf")
    cases["unreadable netcdf"] = (garbage, "not a readable ArviZ NetCDF file")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    cases["binary csv"] = (binary, "not a UTF-8 text CSV file")
    azc.from_dict({"posterior": {"mu": np.zeros((1, 10))}}).to_netcdf(
        str(tmp_path / "posterior_only.nc")
    )
    cases["wrong groups"] = (
        tmp_path / "posterior_only.nc",
        "missing group\\(s\\) posterior_predictive, observed_data; the file has: posterior",
    )
    for name, (path, message) in cases.items():
        code, _, err = evaluate(capsys, path, "--out", tmp_path / name)
        assert_one_line_error(code, err, message, EVALUATE_ERROR)
        assert not (tmp_path / name / "report.json").exists()
    # and as a user runs it: a bad file, a bad option
    out = run("evaluate", str(garbage), "--out", str(tmp_path / "real"))
    assert_one_line_error(
        out.returncode, out.stderr.strip().splitlines(), "not a readable ArviZ NetCDF file",
        EVALUATE_ERROR,
    )
    assert not (tmp_path / "real" / "report.json").exists()
    out = run("evaluate", str(tmp_path / "nope.csv"), "--num-levels", "1")
    assert_one_line_error(
        out.returncode, out.stderr.strip().splitlines(),
        "argument --num-levels: must be in \\[2, 10000\\]; got 1", EVALUATE_ERROR,
    )


@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    out = run(
        "demo",
        "--quiet",
        "--out",
        str(tmp_path / "demo"),
        "--num-samples",
        "300",
        "--num-warmup",
        "300",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "demo" / "report.json").read_text())
    rows = {r["method"]: r for r in report["regression"]["rows"]}
    raw, iso, sig = rows["Poisson model"], rows["+ isotonic"], rows["+ sigma-scaling"]
    iso_loo = rows["+ isotonic, split-free (LOO)"]
    # the overdispersed target makes the Poisson model badly overconfident ...
    assert raw["90% coverage"] < 0.5
    # ... and the recalibrations repair much of it on the held-out test split, the
    # split-free one (fitted on the training data's LOO-PIT, no calibration split) too
    loo = report["regression"]["loo"]
    assert loo["n_train"] == 221 and 0 <= loo["pareto_k_above_0.7"] <= loo["n_train"]
    assert loo["MACE (quantile), training data"] > 0.1  # the LOO check sees the misfit
    for fixed in (iso, sig, iso_loo):
        assert fixed["MACE (interval)"] < raw["MACE (interval)"] / 2
        assert fixed["90% coverage"] > 0.7
    assert {r["method"] for r in report["classification"]["rows"]} == {
        "logistic model",
        "+ Platt",
        "+ isotonic",
    }
    for p in report["plots"]:
        assert os.path.getsize(p) > 5000
    assert "Regression calibration on the test split" in out.stdout
    # issue 37 item 4: every number with its uncertainty, and PSIS-LOO's reliability said
    for r in rows.values():
        lo, hi = r["90% coverage, 95% Wilson interval"]
        assert lo <= r["90% coverage"] <= hi
        assert 0 < r["p-values"]["quantile"]["MACE"] <= 1
    assert raw["p-values"]["interval"]["area"] < 0.01  # the overconfident model fails
    d = iso["CRPS minus the model's"]
    assert d["95% interval"][0] <= d["mean"] <= d["95% interval"][1]
    bad = loo["pareto_k_above_0.7"]
    assert ("warning: PSIS-LOO is unreliable" in out.stdout) == (bad > 0)
    assert ("split-free (LOO) [!]" in out.stdout) == (bad > 0)
    assert ("warning" in loo) == (bad > 0)
