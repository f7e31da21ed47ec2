"""Loading calibrator files: every field validated, one documented error class.

Each case below was accepted, or raised a raw EOFError / KeyError / JSONDecodeError /
BadZipFile, before the loader moved to the core (issue "Hardening").
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import zipfile

import numpy as np
import pytest

from bayescal import classification as clf
from bayescal import regression as reg
from bayescal.core import CalibratorFileError, load_calibrator, save_calibrator


def _write(path, spec, arrays):
    blob = np.frombuffer(json.dumps(spec).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, __spec__=blob, **arrays)


def _saved(tmp_path, cal):
    path = os.path.join(tmp_path, "cal.npz")
    save_calibrator(cal, path)
    with np.load(path, allow_pickle=False) as z:
        spec = json.loads(z["__spec__"].tobytes().decode("utf-8"))
        arrays = {k: z[k] for k in z.files if k != "__spec__"}
    return path, spec, arrays


Y = np.array([0, 0, 1, 1, 0, 1, 1, 0], float)
P = np.array([0.1, 0.3, 0.6, 0.8, 0.4, 0.7, 0.9, 0.2])


def _tamper(spec, arrays, what):
    cal = spec["calibrator"]
    if what == "input":
        cal["meta"]["input"] = "banana"
    elif what == "eps":
        cal["meta"]["eps"] = 5
    elif what == "nan":
        arrays["a"] = np.array(np.nan, arrays["a"].dtype)
    elif what == "extra_meta":
        cal["meta"]["colour"] = "red"
    elif what == "missing_array":
        del arrays["b"]
    elif what == "object":
        arrays["a"] = np.array(["x"])
    elif what == "type":
        cal["type"] = "os.system"
    elif what == "format":
        spec["format"] = "bayescal.calibrator/99"
    return spec, arrays


@pytest.mark.parametrize(
    "what, match",
    [
        ("input", "PlattCalibrator.input must be 'prob' or 'score'"),
        ("eps", r"PlattCalibrator.eps must be None or a float in \(0, 0.5\)"),
        ("nan", "PlattCalibrator.a: holds NaN"),
        ("extra_meta", "option fields"),
        ("missing_array", "the array 'b' is missing"),
        ("object", "arrays must be numeric"),
        ("type", "unknown calibrator type 'os.system'"),
        ("format", "unsupported calibrator file format"),
    ],
)
def test_platt_fields_are_validated(tmp_path, what, match):
    path, spec, arrays = _saved(tmp_path, clf.fit_platt(Y, P))
    _write(path, *_tamper(spec, arrays, what))
    with pytest.raises(CalibratorFileError, match=match) as info:
        load_calibrator(path)
    assert str(info.value).startswith(path)  # the message names the file
    assert isinstance(info.value, ValueError)


def test_reversed_thresholds_and_values_out_of_range(tmp_path):
    path, spec, arrays = _saved(tmp_path, clf.fit_isotonic(Y, P))
    key = spec["calibrator"]["arrays"]["thresholds"]
    _write(path, spec, {**arrays, key: arrays[key][::-1].copy()})
    with pytest.raises(CalibratorFileError, match="thresholds must be nondecreasing"):
        load_calibrator(path)
    vkey = spec["calibrator"]["arrays"]["values"]
    _write(path, spec, {**arrays, vkey: arrays[vkey] + 2})
    with pytest.raises(
        CalibratorFileError, match=r"values must be probabilities in \[0, 1\]"
    ):
        load_calibrator(path)


def test_negative_temperature_and_scale_factor(tmp_path):
    logits = np.stack([np.zeros(8), 3 * (P - 0.5)], axis=1)
    labels = np.array([0, 1, 1, 1, 0, 0, 1, 0])  # some confident mistakes: T is finite
    path, spec, arrays = _saved(tmp_path, clf.fit_temperature(labels, logits))
    key = spec["calibrator"]["arrays"]["temperature"]
    _write(path, spec, {**arrays, key: -arrays[key]})
    with pytest.raises(CalibratorFileError, match="temperature must be > 0"):
        load_calibrator(path)
    rng = np.random.default_rng(0)
    y = rng.normal(size=20)
    sig = reg.fit_sigma_scaling(y, np.zeros(20), np.ones(20))
    path, spec, arrays = _saved(tmp_path, sig)
    key = spec["calibrator"]["arrays"]["factor"]
    _write(path, spec, {**arrays, key: -arrays[key]})
    with pytest.raises(CalibratorFileError, match="factor must be > 0"):
        load_calibrator(path)


def test_nested_one_vs_rest_is_validated(tmp_path):
    probs = np.stack([1 - P, P * 0.5, P * 0.5], axis=1)
    labels = np.array([0, 0, 1, 2, 0, 1, 2, 0])
    path, spec, arrays = _saved(
        tmp_path, clf.fit_one_vs_rest(labels, probs, method="platt")
    )
    spec["calibrator"]["nested"][1]["meta"]["input"] = "banana"
    _write(path, spec, arrays)
    with pytest.raises(CalibratorFileError, match="input must be 'prob' or 'score'"):
        load_calibrator(path)


def _bytes(path, data):
    with open(path, "wb") as fh:
        fh.write(data)


def test_malformed_files_raise_one_error_class(tmp_path):
    path = os.path.join(tmp_path, "bad.npz")
    # empty file (np.load raised EOFError)
    _bytes(path, b"")
    with pytest.raises(CalibratorFileError, match="not a readable .npz archive"):
        load_calibrator(path)
    # a broken zip (BadZipFile)
    _bytes(path, b"PK\x03\x04garbage")
    with pytest.raises(CalibratorFileError, match="not a readable .npz archive"):
        load_calibrator(path)
    # the spec is not JSON (JSONDecodeError)
    blob = np.frombuffer(b"{not json", dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, __spec__=blob)
    with pytest.raises(CalibratorFileError, match="not UTF-8 JSON"):
        load_calibrator(path)
    # JSON without the calibrator entry (KeyError)
    _write(path, {"format": "bayescal.calibrator/1"}, {})
    with pytest.raises(CalibratorFileError, match="not a JSON object"):
        load_calibrator(path)
    # a zip archive that is not an npz
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hello.txt", "hi")
    _bytes(path, buf.getvalue())
    with pytest.raises(CalibratorFileError):
        load_calibrator(path)
    # a single .npy array
    with open(path, "wb") as fh:
        np.save(fh, np.ones(3))
    with pytest.raises(CalibratorFileError, match="not an .npz archive"):
        load_calibrator(path)
    with pytest.raises(FileNotFoundError, match="no such calibrator file"):
        load_calibrator(os.path.join(tmp_path, "missing.npz"))


def test_regression_calibrators_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    u = rng.uniform(size=50)
    for cal in (
        reg.fit_isotonic_recalibrator(u),
        reg.fit_sigma_scaling(rng.normal(size=30), np.zeros(30), np.ones(30)),
    ):
        path = os.path.join(tmp_path, "r.npz")
        save_calibrator(cal, path)
        back = load_calibrator(path)
        assert type(back) is type(cal) and back == cal


# ------------------------------------------------------ saving never loses the old file
# Issue "Nothing lost, nothing silent", item 2: save_calibrator wrote in place, so a
# failed overwrite (a full disk) left a truncated file and the previous calibrator was
# gone; a folder or a FIFO at the path was opened for writing (the FIFO blocked).


def _leftovers(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".tmp-"))


def test_failed_overwrite_keeps_the_previous_file(tmp_path, monkeypatch):

    old = clf.fit_platt(Y, P)
    path = os.path.join(tmp_path, "cal.npz")
    save_calibrator(old, path)
    before = open(path, "rb").read()
    real_savez = np.savez

    def full_disk(fh, **entries):  # writes part of the archive, then the disk is full
        buf = io.BytesIO()
        real_savez(buf, **entries)
        fh.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        fh.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError) as info:
        save_calibrator(clf.fit_isotonic(Y, P), path)
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert load_calibrator(path) == old
    assert _leftovers(tmp_path) == []


def test_interrupted_save_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = os.path.join(tmp_path, "cal.npz")

    def interrupted(fh, **entries):
        fh.write(b"PK\x03\x04partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_calibrator(clf.fit_platt(Y, P), path)
    assert os.listdir(tmp_path) == []


def test_replaced_file_keeps_its_mode_and_links_are_followed(tmp_path):
    path = os.path.join(tmp_path, "cal.npz")
    save_calibrator(clf.fit_platt(Y, P), path)
    os.chmod(path, 0o640)
    link = os.path.join(tmp_path, "link.npz")
    os.symlink(path, link)
    new = clf.fit_isotonic(Y, P)
    save_calibrator(new, link)
    assert os.path.islink(link) and load_calibrator(path) == new
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert _leftovers(tmp_path) == []


def test_folder_or_special_file_at_the_path_is_refused(tmp_path):
    cal = clf.fit_platt(Y, P)
    folder = tmp_path / "a_folder"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="path .*a_folder.* is an existing folder"):
        save_calibrator(cal, folder)
    assert folder.is_dir() and (folder / "keep.txt").read_text() == "mine"
    fifo = tmp_path / "a_fifo"  # stands for a device: not a regular file
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="path .*a_fifo.* not a regular file"):
        save_calibrator(cal, fifo)
    link = tmp_path / "to_fifo"
    os.symlink(fifo, link)
    with pytest.raises(ValueError, match="not a regular file"):
        save_calibrator(cal, link)
    assert os.path.islink(link)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert _leftovers(tmp_path) == []
