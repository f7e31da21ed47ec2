"""The command line keeps its promise (issue 12): bad input gives one line on stderr and
exit status 2, never a traceback, never partial output, never an overwrite without
--force. Each case of the issue's "What was found" list is here; every one failed
before the fix (checked on the parent commit).

The calls go through ``bayescal.cli.main([...])`` in this process (fast); the
subprocess tests in test_cli.py check the same promise as a user runs it.
"""

import json
import os
import pathlib
import stat

import jax
import numpy as np
import pytest

from bayescal import regression as reg
from bayescal.cli import main
from tests._cli import assert_one_line_error, evaluate, write_good_csv

X64 = bool(jax.config.read("jax_enable_x64"))
DTYPE = np.float64 if X64 else np.float32


def write(path, text):
    path.write_text(text)
    return path


@pytest.fixture
def good_csv(tmp_path):
    return write_good_csv(tmp_path / "good.csv")


# ------------------------------------------------------ values in the compute dtype
def test_huge_value_checked_in_compute_dtype(tmp_path, capsys):
    # issue 12: y=1e300 passed the float64 checks, then overflowed in float32
    path = write(tmp_path / "a.csv", "y,loc,scale\n1e300,0,1\n2,0,1\n3,1,2\n")
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    if X64:  # finite in float64, but the NLL (z^2 / 2 = 5e599) overflows float64
        assert_one_line_error(code, err, r"a.csv: the values are too large or too small for float64")
    else:
        assert_one_line_error(code, err, r"'y' has values beyond the float32 range .*1e\+300")
        assert not (tmp_path / "o").exists()


def test_tiny_scale_checked_in_compute_dtype(tmp_path, capsys):
    # issue 12: scale=1e-50 is > 0 in float64 and 0 in float32
    path = write(tmp_path / "a.csv", "y,loc,scale\n1,0,1e-50\n2,0,1\n3,1,2\n")
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    if X64:
        assert code == 0, err
    else:
        assert_one_line_error(code, err, r"'scale' has 1 values below the smallest normal float32")


def test_difference_overflow_is_refused(tmp_path, capsys):
    path = write(tmp_path / "a.csv", "y,loc,scale\n3e38,-3e38,1e38\n2,0,1\n3,1,2\n")
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    if X64:  # exact in float64: z = 6, PIT = Phi(6)
        assert code == 0, err
    else:
        assert_one_line_error(code, err, r"y - loc overflows float32")


# ------------------------------------------------------------------ bounded options
@pytest.mark.parametrize(
    "args, pattern",
    [
        (["--bins", "100000000"], r"argument --bins: must be in \[1, 10000\]; got 100000000"),
        (["--bins", "0"], r"argument --bins: must be in \[1, 10000\]"),
        (["--seed", str(2**70)], r"argument --seed: must be in \[0, 4294967294\]"),
        (["--seed", "-1"], r"argument --seed: must be in"),
        (["--num-levels", "1"], r"argument --num-levels: must be in \[2, 10000\]"),
        (["--num-levels", "10**9"], r"argument --num-levels: expected an integer"),
        (["--chunk-mb", "0"], r"argument --chunk-mb: must be in"),
        (["--layout", "banana"], r"argument --layout: invalid choice: 'banana'"),
        (["--frobnicate"], r"unrecognized arguments: --frobnicate"),
    ],
)
def test_numeric_and_unknown_options_are_refused_in_one_line(
    tmp_path, capsys, good_csv, args, pattern
):
    code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "o", *args)
    assert_one_line_error(code, err, pattern)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["--num-samples", "0"], r"argument --num-samples: must be in \[1, 100000\]; got 0"),
        (["--num-warmup", "-5"], r"argument --num-warmup: must be in"),
        (["--seed", str(2**70)], r"argument --seed: must be in"),
    ],
)
def test_demo_options_are_bounded(tmp_path, capsys, args, pattern):
    # issue 12: `bayescal demo --num-samples 0` ended in a traceback
    code = main(["demo", "--out", str(tmp_path / "d"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert_one_line_error(code, err, pattern)
    assert err[0].startswith("bayescal demo: error:")


def test_no_command_and_unknown_command(capsys):
    assert main([]) == 2
    assert main(["frob"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("bayescal: error:") for e in err)


# ------------------------------------------------------------------------ layouts
def test_drawing_is_not_a_draw_column(tmp_path, capsys):
    # issue 12: "y,drawing,draw_1" ran as "2 draw columns"
    path = write(tmp_path / "a.csv", "y,drawing,draw_1\n1,2,3\n2,3,4\n3,3,1\n")
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o")
    assert_one_line_error(
        code, err, r"do not match one layout \(found: y, drawing, draw_1\); accepted layouts"
    )
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o", "--layout", "draws")
    assert_one_line_error(code, err, r"only 1 draw column \(draw_1\)")


def test_extra_prob_column_is_not_dropped_silently(tmp_path, capsys):
    # issue 12: "y,loc,scale,prob" ran as a Normal regression, prob dropped silently
    text = "y,loc,scale,prob\n1,0,1,0.5\n0,0,1,0.25\n1,1,2,0.75\n"
    path = write(tmp_path / "a.csv", text)
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o")
    assert_one_line_error(code, err, r"found: y, loc, scale, prob.*normal \(y,loc,scale\)")
    # an explicit --layout takes its columns and says which were ignored
    code, out, err = evaluate(
        capsys, path, "--out", tmp_path / "o", "--layout", "binary", "--no-plots"
    )
    assert code == 0, err
    assert "note: columns ignored by --layout binary: loc, scale" in out
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["task"] == "classification" and report["layout"] == "binary"
    assert report["notes"] == ["columns ignored by --layout binary: loc, scale"]


def test_bom_and_crlf_are_accepted(tmp_path, capsys, good_csv):
    # issue 12: a UTF-8 BOM header was read as "no 'y' column"
    path, y, loc = good_csv
    text = path.read_text()
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    reports = []
    for p, out in ((path, "plain"), (bom, "bom")):
        code, _, err = evaluate(capsys, p, "--out", tmp_path / out, "--no-plots")
        assert code == 0, err
        reports.append(json.loads((tmp_path / out / "report.json").read_text()))
    assert reports[0]["metrics"] == reports[1]["metrics"]
    u = reg.pit_normal(y.astype(DTYPE), loc.astype(DTYPE), np.ones(50, DTYPE))
    np.testing.assert_allclose(
        reports[1]["metrics"]["quantile"]["MACE"], float(reg.calibration_error(u)), rtol=1e-6
    )


def test_quantiles_layout_matches_pit_quantiles(tmp_path, capsys):
    rng = np.random.default_rng(3)
    levels = np.array([0.1, 0.5, 0.9])
    y = rng.normal(size=40)
    q = np.stack([np.full(40, v) for v in (-1.2816, 0.0, 1.2816)])  # N(0, 1) quantiles
    header = "y,q_0.9,q_0.1,q_0.5"  # any column order
    rows = "\n".join(",".join(repr(float(v)) for v in (y[i], q[2, i], q[0, i], q[1, i])) for i in range(40))
    path = write(tmp_path / "q.csv", header + "\n" + rows + "\n")
    code, out, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["layout"] == "quantiles"
    u = reg.pit_quantiles(y.astype(DTYPE), q.astype(DTYPE), levels.astype(DTYPE))
    np.testing.assert_allclose(
        report["metrics"]["interval"]["MACE"],
        float(reg.calibration_error(u, kind="interval")),
        rtol=1e-6,
    )


# ------------------------------------------------------------------------- output
def test_failed_write_leaves_nothing_behind(tmp_path, capsys, good_csv):
    # issue 12: `mkdir -p out/report.json` then evaluate left three PNGs and a .tmp-*.json
    (tmp_path / "out" / "report.json").mkdir(parents=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "out")
    assert_one_line_error(code, err, r"--out .*out exists and is not empty.*--force")
    code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "out", "--force")
    assert_one_line_error(code, err, r"report.json would overwrite a folder .*nothing was written")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.json"]
    assert list((tmp_path / "out" / "report.json").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no .tmp-* folder


def test_existing_file_is_never_overwritten(tmp_path, capsys, good_csv):
    # issue 12: --out naming an existing file ended in a traceback; issue "Nothing
    # lost, nothing silent": with --force the file was replaced by a folder (more cases
    # in test_cli_output.py)
    target = write(tmp_path / "precious.txt", "keep me")
    for force in ([], ["--force"]):
        code, _, err = evaluate(capsys, good_csv[0], "--out", target, "--no-plots", *force)
        assert_one_line_error(code, err, r"is a regular file, not a folder; choose another")
        assert target.read_text() == "keep me"


def test_force_overwrites_report_files_and_keeps_others(tmp_path, capsys, good_csv):
    out = tmp_path / "o"
    out.mkdir()
    write(out / "notes.txt", "mine")
    write(out / "report.json", "old")
    code, _, err = evaluate(capsys, good_csv[0], "--out", out, "--no-plots", "--force")
    assert code == 0, err
    assert json.loads((out / "report.json").read_text())["n"] == 50
    assert (out / "notes.txt").read_text() == "mine"
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


def test_unwritable_target_is_one_line(tmp_path, capsys, good_csv):
    # a parent that is a file cannot hold a folder (a read-only folder behaves alike for
    # users other than root; the tests may run as root, where chmod does not bind)
    write(tmp_path / "plain", "x")
    code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "plain" / "o")
    assert_one_line_error(code, err, r"cannot create a folder in .*plain")


def test_missing_parents_are_created_and_removed_on_failure(tmp_path, capsys, good_csv):
    out = tmp_path / "a" / "b" / "o"
    code, _, err = evaluate(capsys, good_csv[0], "--out", out, "--no-plots")
    assert code == 0, err and (out / "report.json").is_file()
    bad = write(tmp_path / "bad.csv", "y,loc,scale\n1,0,1\n2,0,0\n")
    code, _, err = evaluate(capsys, bad, "--out", tmp_path / "c" / "d")
    assert code == 2 and not (tmp_path / "c").exists()


def test_files_get_the_users_umask(tmp_path, capsys, good_csv):
    # issue 12: report.json was written with mode 0600 (mkstemp)
    old = os.umask(0o022)
    try:
        code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "o")
    finally:
        os.umask(old)
    assert code == 0, err
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "o").iterdir()}
    assert modes["report.json"] == 0o644
    assert set(modes.values()) == {0o644}
    assert stat.S_IMODE((tmp_path / "o").stat().st_mode) == 0o755
    old = os.umask(0o077)
    try:
        code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "p", "--no-plots")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "p" / "report.json").stat().st_mode) == 0o600


def test_report_paths_point_into_the_final_folder(tmp_path, capsys, good_csv):
    code, _, err = evaluate(capsys, good_csv[0], "--out", tmp_path / "o")
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert len(report["plots"]) == 3
    for p in report["plots"]:
        assert pathlib.Path(p).parent == tmp_path / "o" and os.path.getsize(p) > 5000
