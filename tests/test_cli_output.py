"""The output folder loses nothing (issue "Nothing lost, nothing silent", items 1 and 3).

``--out`` is always a folder: an existing non-folder (file, FIFO or socket standing for
a device, a link to one), the input or a folder containing it is refused with or without
``--force``, before any work (nothing printed, nothing written); ``--force`` replaces
only report files, never a folder or a special file named like one. SIGTERM while the
report is written leaves no staging folder and the previous report as it was. Every
test here failed on the parent commit (see the commit message for how each failed).
Special files are made in ``tmp_path`` (the tests may run as root: never a system path).
"""

import json
import os
import pathlib
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from bayescal.cli import main
from tests._cli import assert_one_line_error, evaluate, write_good_csv


@pytest.fixture
def good_csv(tmp_path):
    return write_good_csv(tmp_path / "good.csv")[0]


def _snapshot(folder):
    """Names, kinds and contents of everything in ``folder`` (not following links)."""
    out = {}
    for p in sorted(pathlib.Path(folder).rglob("*")):
        st = p.lstat()
        body = p.read_bytes() if stat.S_ISREG(st.st_mode) else None
        link = os.readlink(p) if p.is_symlink() else None
        out[str(p.relative_to(folder))] = (stat.S_IFMT(st.st_mode), body, link)
    return out


def _special_files(tmp_path):
    """A regular file, a FIFO and a socket (standing for devices) and links to them."""
    made = {}
    made["file"] = tmp_path / "precious.txt"
    made["file"].write_text("keep me")
    made["fifo"] = tmp_path / "a_fifo"
    os.mkfifo(made["fifo"])
    made["socket"] = tmp_path / "a_sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(made["socket"]))
    sock.close()
    for name in ("file", "fifo"):
        made[f"link to {name}"] = tmp_path / f"link_to_{name}"
        os.symlink(made[name], made[f"link to {name}"])
    return made


@pytest.mark.parametrize("force", [False, True])
def test_out_naming_a_non_folder_is_refused_before_any_work(tmp_path, capsys, good_csv,
                                                             force):
    # issue: `--out /dev/null --force` replaced the device node with a folder, and
    # `--out d.csv --force` replaced the input with a folder
    made = _special_files(tmp_path)
    before = _snapshot(tmp_path)
    kinds = {"file": "a regular file", "fifo": "a FIFO", "socket": "a socket",
             "link to file": "a symbolic link to a regular file",
             "link to fifo": "a symbolic link to a FIFO"}
    for name, target in made.items():
        code, out, err = evaluate(capsys, good_csv, "--out", target,
                                  *(["--force"] if force else []))
        assert_one_line_error(code, err, rf"--out .*{target.name} is {kinds[name]}, not a "
                              r"folder; choose another --out")
        assert out == ""  # refused before reading or computing anything
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("force", [False, True])
def test_out_is_never_the_input_or_a_folder_holding_it(tmp_path, capsys, good_csv, force):
    sub = tmp_path / "deeper"
    sub.mkdir()
    data = sub / "d.csv"
    data.write_bytes(good_csv.read_bytes())
    before = _snapshot(tmp_path)
    flags = ["--force"] if force else []
    for out in (data, sub, tmp_path):
        code, stdout, err = evaluate(capsys, data, "--out", out, *flags)
        assert code == 2 and stdout == "", err
        assert len(err) == 1 and err[0].startswith("bayescal evaluate: error: --out"), err
    code, _, err = evaluate(capsys, data, "--out", sub, "--force")
    assert_one_line_error(code, err, r"--out .*deeper is the input .*d.csv or a folder "
                          "containing it; choose another --out")
    # the same, spelled through a relative path and a link to the folder
    os.symlink(sub, tmp_path / "alias")
    code, _, err = evaluate(capsys, data, "--out", tmp_path / "alias", "--force")
    assert_one_line_error(code, err, r"is the input .* or a folder containing it")
    (tmp_path / "alias").unlink()
    assert _snapshot(tmp_path) == before


def test_force_never_replaces_a_special_file_named_like_a_report_file(tmp_path, capsys,
                                                                      good_csv):
    out = tmp_path / "o"
    out.mkdir()
    os.mkfifo(out / "report.json")  # stands for a device node
    (out / "notes.txt").write_text("mine")
    before = _snapshot(tmp_path)
    code, stdout, err = evaluate(capsys, good_csv, "--out", out, "--force", "--no-plots")
    assert_one_line_error(code, err, r"report.json would overwrite something that is not a "
                          r"regular file .*nothing was written")
    assert stdout == ""
    assert _snapshot(tmp_path) == before


def test_a_folder_named_like_a_report_file_is_refused_before_any_work(tmp_path, capsys,
                                                                      good_csv):
    (tmp_path / "o" / "pit_ecdf.png").mkdir(parents=True)
    code, stdout, err = evaluate(capsys, good_csv, "--out", tmp_path / "o", "--force")
    assert_one_line_error(code, err, r"pit_ecdf.png would overwrite a folder")
    assert stdout == ""  # was: the whole table, then the error


def test_unwritable_out_is_refused_before_the_table_is_printed(tmp_path, capsys, good_csv,
                                                               monkeypatch):
    # issue: on an unwritable --out the whole table was printed before the exit-2 error.
    # Root writes anywhere, so the refusal of the filesystem is simulated.
    import tempfile

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    code, stdout, err = evaluate(capsys, good_csv, "--out", tmp_path / "new" / "o")
    assert_one_line_error(code, err, r"--out .*o: cannot create a folder in .*Permission "
                          "denied")
    assert stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.csv"]


def test_demo_refuses_a_non_folder_before_any_work(tmp_path, capsys):
    made = _special_files(tmp_path)
    before = _snapshot(tmp_path)
    for target in (made["file"], made["fifo"], made["link to file"]):
        code = main(["demo", "--quiet", "--force", "--out", str(target)])
        captured = capsys.readouterr()
        assert_one_line_error(code, captured.err.strip().splitlines(),
                              r"--out .* not a folder; choose another --out",
                              prefix="bayescal demo")
        assert captured.out == ""
    assert _snapshot(tmp_path) == before


# --------------------------------------------------------------------------- SIGTERM
# The write phase is made to wait (a partial PNG written, then a sleep) by a wrapper
# script that replaces the plot writer before calling the real entry point: SIGTERM
# arrives at a known point, as it did in the issue (partial PNGs in .tmp-bayescal-*).
_WRAPPER = textwrap.dedent("""
    import pathlib, sys, time
    import bayescal._cli.evaluate as ev

    def slow_plots(kind, result, folder):
        (folder / "calibration_quantile.png").write_bytes(b"\\x89PNG partial")
        pathlib.Path(sys.argv[1]).write_text("writing")
        time.sleep(60)
        return []

    ev._write_plots = slow_plots
    from bayescal.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_sigterm_while_writing_leaves_nothing_and_the_old_report(tmp_path, good_csv):
    out = tmp_path / "o"
    out.mkdir()
    (out / "report.json").write_text('{"old": true}')
    (out / "notes.txt").write_text("mine")
    script = tmp_path / "wrapper.py"
    script.write_text(_WRAPPER)
    ready = tmp_path / "ready"
    before = _snapshot(out)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ready), "evaluate", str(good_csv), "--out",
         str(out), "--force"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 45
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), proc.communicate(timeout=5)
        staged = [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-bayescal-")]
        assert len(staged) == 1 and (staged[0] / "calibration_quantile.png").exists()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGTERM  # ended as by SIGTERM, not "exit 0"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []
    assert _snapshot(out) == before
    assert json.loads((out / "report.json").read_text()) == {"old": True}


def test_a_reader_that_stops_reading_loses_no_report(tmp_path, good_csv):
    # issue 37: `bayescal evaluate ... | head -1` ended with "error: Broken pipe" and
    # exit status 2, writing the report or not depending on timing. Now a closed
    # standard output drops the rest of the printout only: the report is written, the
    # status is 0 and nothing is said on stderr. The pipe's reading end is closed
    # before the command prints anything, so its first write meets the closed pipe.
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bayescal.cli", "evaluate", str(good_csv), "--out",
             str(tmp_path / "o"), "--no-plots"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=300,
            cwd=pathlib.Path(__file__).parent.parent,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["n"] == 50
