"""What the command line prints cannot drive the terminal ("Nothing lost, round 2", item 3).

Control characters from the user's data (a CSV header, a file or folder name, a
variable name, an unknown option) reach stdout and stderr escaped, as Python writes them
(``\\x1b``), never raw: a column named ``"\\x1b]0;title\\x07\\x1b[2J"`` set the terminal's
title and cleared the screen when an error named it. A name longer than a line is cut,
with its length said: a 100,000-character column name gave one 100 kB line. The report
files keep the names as they are (the HTML report escapes them itself).

Each test failed before the fix (the raw bytes reached the streams; the long name came
out whole). The calls go through ``bayescal.cli.main`` in this process (fast), but for
one subprocess that checks the real streams.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from bayescal.cli import main
from tests import _arviz_compat as azc
from tests._cli import evaluate, write_good_csv

# OSC "set the title" (ended by BEL), "clear the screen", and the 8-bit CSI (C1)
EVIL = "\x1b]0;title\x07\x1b[2J\x9b"
EVIL_SHOWN = "\\x1b]0;title\\x07\\x1b[2J\\x9b"
RAW = ("\x1b", "\x07", "\x9b")
ROWS = "1.0,0.5,1.0\n2.0,1.5,2.0\n0.5,0.0,1.0\n"


def assert_escaped(*texts):
    """No raw control character in ``texts`` (streams' contents or lines)."""
    for text in texts:
        text = "\n".join(text) if isinstance(text, list) else text
        for ch in RAW:
            assert ch not in text, repr(text[:2000])


def ones(header, n=3):
    """``n`` data rows of ones, as many fields as ``header`` has."""
    return "".join(",".join(["1"] * (header.count(",") + 1)) + "\n" for _ in range(n))


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------- column names (CSV)
@pytest.mark.parametrize(
    "header, message",
    [
        (f"y_true,loc,scale,{EVIL}", "no 'y' column"),
        (f"y,loc,scale,{EVIL}", "the columns do not match one layout"),
        (f"y,{EVIL},loc,scale,{EVIL}", "duplicate column names"),
    ],
)
def test_column_name_in_an_error_is_escaped(tmp_path, capsys, header, message):
    path = write(tmp_path / "a.csv", f"{header}\n{ones(header)}")
    code, out, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 2 and len(err) == 1, err
    assert message in err[0]
    assert_escaped(out, err)
    assert EVIL_SHOWN in err[0]  # the user still sees which column it is
    assert not (tmp_path / "o").exists()


def test_column_name_echoed_on_success_is_escaped_and_the_report_keeps_it(tmp_path, capsys):
    path = write(tmp_path / "a.csv", f"y,loc,scale,{EVIL}\n" + ROWS.replace("\n", ",7\n"))
    code, out, err = evaluate(
        capsys, path, "--layout", "normal", "--out", tmp_path / "o", "--no-plots"
    )
    assert code == 0, err
    assert_escaped(out, err)
    assert f"columns ignored by --layout normal: {EVIL_SHOWN}" in out
    assert "\n" in out and "MACE" in out  # the program's own line ends stay
    report = json.loads((tmp_path / "o" / "report.json").read_text(encoding="utf-8"))
    assert report["notes"][0] == f"columns ignored by --layout normal: {EVIL}"  # as read


# ----------------------------------------------------------------------- file names
@pytest.mark.parametrize(
    "content, message",
    [
        ("", "the CSV file is empty"),  # said by the CSV reader
        ("y,loc,scale\n1,0,-1\n2,0,1\n3,1,1\n", "column 'scale' must be > 0"),  # checks
    ],
)
def test_file_name_in_an_error_is_escaped(tmp_path, capsys, content, message):
    path = write(tmp_path / "data\x1b[31m\x9b.csv", content)
    code, out, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 2 and len(err) == 1, err
    assert message in err[0]
    assert_escaped(out, err)
    assert "data\\x1b[31m\\x9b.csv" in err[0]


def test_file_and_folder_names_on_success_are_escaped(tmp_path, capsys):
    path = write_good_csv(tmp_path / "data\x1b[31m.csv")[0]
    out_dir = tmp_path / "out\x07\x9b"
    code, out, err = evaluate(capsys, path, "--out", out_dir, "--no-plots")
    assert code == 0, err
    assert_escaped(out, err)
    assert "data\\x1b[31m.csv: regression" in out
    assert "out\\x07\\x9b" in out  # "report: <folder>/report.json, ..."
    report = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
    assert report["file"] == str(path)  # the report keeps the name as it is


@pytest.mark.parametrize("command", ["evaluate", "demo"])
def test_out_folder_name_in_an_error_is_escaped(tmp_path, capsys, command):
    out_dir = tmp_path / "busy\x1b[2J"
    out_dir.mkdir()
    (out_dir / "x").write_text("x")
    args = [command, "--out", str(out_dir)]
    if command == "evaluate":
        args.insert(1, str(write_good_csv(tmp_path / "a.csv")[0]))
    code = main(args)
    captured = capsys.readouterr()
    assert code == 2
    assert_escaped(captured.out, captured.err)
    assert "busy\\x1b[2J exists and is not empty" in captured.err


# ------------------------------------------------------------ options, variable names
def test_unknown_option_is_escaped_and_cut(tmp_path, capsys):
    code = main(["evaluate", "a.csv", f"--x{EVIL}", "z" * 100_000])
    captured = capsys.readouterr()
    assert code == 2
    assert_escaped(captured.out, captured.err)
    assert "unrecognized arguments" in captured.err and EVIL_SHOWN in captured.err
    assert all(len(line) < 1000 for line in captured.err.splitlines())
    assert "100,000 characters" in captured.err


@pytest.fixture
def netcdf_file(tmp_path):
    rng = np.random.default_rng(0)
    pp = xr.Dataset({"y": (("chain", "draw", "obs"), rng.normal(size=(2, 10, 5)))})
    obs = xr.Dataset({"y": (("obs",), rng.normal(size=5))})
    return azc.to_netcdf(tmp_path / "d.nc", posterior_predictive=pp, observed_data=obs)


@pytest.mark.parametrize("name", [EVIL, "v" * 100_000])
def test_variable_name_in_an_error_is_escaped_and_cut(tmp_path, capsys, netcdf_file, name):
    code, out, err = evaluate(
        capsys, netcdf_file, "--var-name", name, "--out", tmp_path / "o"
    )
    assert code == 2 and len(err) == 1, err
    assert "not in both groups; available: y" in err[0]
    assert_escaped(out, err)
    assert len(err[0]) < 1000
    assert (EVIL_SHOWN if name == EVIL else "100,000 characters") in err[0]


# ----------------------------------------------------------------------- long names
@pytest.mark.parametrize(
    "header",
    [
        "y,loc,scale,{long}",  # the columns do not match one layout (found: ...)
        "y,loc,scale,{long},{long}",  # duplicate column names
        "y_true,{long}",  # no 'y' column (found: ...)
    ],
)
def test_a_100000_character_column_name_gives_a_short_line(tmp_path, capsys, header):
    long = "a" * 100_000
    header = header.format(long=long)
    path = write(tmp_path / "a.csv", f"{header}\n{ones(header)}")
    code, out, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 2 and len(err) == 1, err
    assert all(len(line) < 1000 for line in err)
    assert "aaaa" in err[0] and "100,000 characters" in err[0]  # what and how long


def test_a_100000_character_ignored_column_gives_a_short_note(tmp_path, capsys):
    long = "a" * 100_000
    path = write(tmp_path / "a.csv", f"y,loc,scale,{long}\n" + ROWS.replace("\n", ",7\n"))
    code, out, err = evaluate(
        capsys, path, "--layout", "normal", "--out", tmp_path / "o", "--no-plots"
    )
    assert code == 0, err
    assert all(len(line) < 2000 for line in out.splitlines())
    assert "note: columns ignored by --layout normal: aaaa" in out
    assert re.search(r"\.\.\.a+ \(100,0\d\d characters\)", out)  # the note's length
    report = json.loads((tmp_path / "o" / "report.json").read_text(encoding="utf-8"))
    assert report["notes"][0] == f"columns ignored by --layout normal: {long}"  # whole


# ------------------------------------------------------------ the real streams
def test_real_streams_get_no_raw_escape(tmp_path):
    path = write(tmp_path / "a\x1b[31m.csv", f"y_true,loc,scale,{EVIL}\n{ROWS}")
    env = dict(os.environ, PYTHONWARNINGS="ignore", BAYESCAL_NO_CACHE="1")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bayescal.cli",
            "evaluate",
            str(path),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    for raw in (b"\x1b", b"\x07", "\x9b".encode()):
        assert raw not in out.stdout + out.stderr
    err = out.stderr.decode()
    assert "a\\x1b[31m.csv: no 'y' column" in err and EVIL_SHOWN in err
