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


# ------------------------------------------- tampered fields (issue item 10)
# Each of these loaded before: arrays of other shapes that then broadcast, a negative
# conformal quantile, values that overflow or vanish in float32, an int64 2**40 that
# wrapped to 0, normalized="no" read as true; deeply nested JSON raised RecursionError.
X64 = bool(__import__("jax").config.read("jax_enable_x64"))


def _platt(tmp_path):
    return _saved(tmp_path, clf.fit_platt(Y, P))


def _with_array(path, spec, arrays, field, value):
    cal = spec["calibrator"]
    _write(path, spec, {**arrays, cal["arrays"][field]: value})


def _conformal(tmp_path, normalized=True):
    rng = np.random.default_rng(3)
    y = rng.normal(size=30)
    args = (y, np.zeros(30), np.ones(30)) if normalized else (y, np.zeros(30))
    return _saved(tmp_path, reg.fit_conformal(*args, alpha=0.2))


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("a", np.array([1.0, 2.0, 3.0]), r"PlattCalibrator.a must be a scalar \(shape \(\)\)"),
        ("b", np.zeros((1, 1)), r"PlattCalibrator.b must be a scalar"),
        ("a", np.array(2**40, np.int64), "a: must be a float32 or float64 array.*int64"),
        ("a", np.array(True), "a: must be a float32 or float64 array.*bool"),
    ],
)
def test_platt_shapes_and_dtypes(tmp_path, field, value, match):
    path, spec, arrays = _platt(tmp_path)
    _with_array(path, spec, arrays, field, value)
    with pytest.raises(CalibratorFileError, match=match):
        load_calibrator(path)


def test_values_that_overflow_or_vanish_in_float32(tmp_path):
    path, spec, arrays = _platt(tmp_path)
    _with_array(path, spec, arrays, "a", np.array(1e300))
    if X64:  # float64 is the compute dtype: the value is representable and kept
        assert float(load_calibrator(path).a) == 1e300
        return
    with pytest.raises(CalibratorFileError, match="a: holds values beyond the float32 range"):
        load_calibrator(path)
    logits = np.stack([np.zeros(8), 3 * (P - 0.5)], axis=1)
    labels = np.array([0, 1, 1, 1, 0, 0, 1, 0])
    path, spec, arrays = _saved(tmp_path, clf.fit_temperature(labels, logits))
    _with_array(path, spec, arrays, "temperature", np.array(1e-300))  # 0 in float32
    with pytest.raises(CalibratorFileError, match="temperature must be > 0, at least the smallest"):
        load_calibrator(path)


def test_subnormal_temperature_and_factor_are_refused(tmp_path):
    logits = np.stack([np.zeros(8), 3 * (P - 0.5)], axis=1)
    labels = np.array([0, 1, 1, 1, 0, 0, 1, 0])
    path, spec, arrays = _saved(tmp_path, clf.fit_temperature(labels, logits))
    _with_array(path, spec, arrays, "temperature", np.array(1e-320))  # subnormal float64
    with pytest.raises(CalibratorFileError, match="temperature must be > 0"):
        load_calibrator(path)
    sig = reg.fit_sigma_scaling(np.random.default_rng(0).normal(size=20), np.zeros(20), np.ones(20))
    path, spec, arrays = _saved(tmp_path, sig)
    _with_array(path, spec, arrays, "factor", np.array(1e-41, np.float32))
    with pytest.raises(CalibratorFileError, match="factor must be > 0"):
        load_calibrator(path)


def test_mismatched_vector_shapes(tmp_path):
    path, spec, arrays = _saved(tmp_path, clf.fit_histogram_binning(Y, P, bins=4))
    key = spec["calibrator"]["arrays"]["values"]
    _write(path, spec, {**arrays, key: arrays[key][None, :]})  # [1, K] broadcast before
    with pytest.raises(CalibratorFileError, match="values must be one value per bin"):
        load_calibrator(path)
    path, spec, arrays = _saved(tmp_path, clf.fit_isotonic(Y, P))
    key = spec["calibrator"]["arrays"]["thresholds"]
    _write(path, spec, {**arrays, key: np.stack([arrays[key]] * 2)})
    with pytest.raises(CalibratorFileError, match="thresholds must be 1-D"):
        load_calibrator(path)
    path, spec, arrays = _saved(tmp_path, reg.fit_isotonic_recalibrator(P))
    key = spec["calibrator"]["arrays"]["calibrated"]
    _write(path, spec, {**arrays, key: arrays[key][:-1]})
    with pytest.raises(CalibratorFileError, match="calibrated must be the shape of raw"):
        load_calibrator(path)


def test_conformal_fields(tmp_path):
    path, spec, arrays = _conformal(tmp_path)
    _with_array(path, spec, arrays, "quantile", -np.abs(arrays["quantile"]) - 1)
    with pytest.raises(CalibratorFileError, match="quantile must be >= 0"):
        load_calibrator(path)
    _with_array(path, spec, arrays, "quantile", np.ones(3))
    with pytest.raises(CalibratorFileError, match="quantile must be a scalar"):
        load_calibrator(path)
    for bad in ("no", 1, None):
        path, spec, arrays = _conformal(tmp_path)
        spec["calibrator"]["meta"]["normalized"] = bad
        _write(path, spec, arrays)
        with pytest.raises(CalibratorFileError, match="normalized must be true or false"):
            load_calibrator(path)
    for bad in (True, float("nan"), "0.1"):
        path, spec, arrays = _conformal(tmp_path, normalized=False)
        spec["calibrator"]["meta"]["alpha"] = bad
        _write(path, spec, arrays)
        with pytest.raises(CalibratorFileError, match=r"alpha must be a float in \(0, 1\)"):
            load_calibrator(path)


def test_infinite_degrees_of_freedom(tmp_path):
    rng = np.random.default_rng(0)
    sig = reg.fit_sigma_scaling(rng.normal(size=20), np.zeros(20), np.ones(20),
                                family="student_t", df=5.0)
    path, spec, arrays = _saved(tmp_path, sig)
    spec["calibrator"]["meta"]["df"] = float("inf")  # json writes Infinity, reads it back
    _write(path, spec, arrays)
    with pytest.raises(CalibratorFileError, match="df must be None or a positive number"):
        load_calibrator(path)


def test_deeply_nested_json_is_a_file_error(tmp_path):
    path, spec, arrays = _platt(tmp_path)
    deep = 100_000
    text = json.dumps(spec).replace('"eps": null', '"eps": ' + "[" * deep + "]" * deep)
    blob = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, __spec__=blob, **arrays)
    with pytest.raises(CalibratorFileError, match="nested too deeply"):
        load_calibrator(path)
    # moderately deep: parsed, then refused with a bounded message
    text = json.dumps(spec).replace('"eps": null', '"eps": ' + "[" * 500 + "]" * 500)
    blob = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, __spec__=blob, **arrays)
    with pytest.raises(CalibratorFileError, match="eps must be None") as info:
        load_calibrator(path)
    assert len(str(info.value)) < 500


def test_one_vs_rest_nesting_and_extra_arrays(tmp_path):
    probs = np.stack([1 - P, P * 0.5, P * 0.5], axis=1)
    labels = np.array([0, 0, 1, 2, 0, 1, 2, 0])
    path, spec, arrays = _saved(tmp_path, clf.fit_one_vs_rest(labels, probs, method="platt"))
    inner = json.loads(json.dumps(spec["calibrator"]))
    spec["calibrator"]["nested"][0] = inner  # a one-vs-rest inside a one-vs-rest
    _write(path, spec, arrays)
    with pytest.raises(CalibratorFileError, match=r"calibrators\[0\] must be one of"):
        load_calibrator(path)
    path, spec, arrays = _saved(tmp_path, clf.fit_one_vs_rest(labels, probs, method="platt"))
    spec["calibrator"]["nested"] = spec["calibrator"]["nested"][:1]
    _write(path, spec, arrays)
    with pytest.raises(CalibratorFileError, match="at least 2"):
        load_calibrator(path)
    path, spec, arrays = _platt(tmp_path)
    _write(path, spec, {**arrays, "smuggled": np.ones(3)})
    with pytest.raises(CalibratorFileError, match="no field refers to: \\['smuggled'\\]"):
        load_calibrator(path)


def test_save_refuses_what_load_would_refuse(tmp_path):
    import jax
    import jax.numpy as jnp

    cals = [clf.fit_platt(Y[i::2], P[i::2]) for i in range(2)]
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *cals)  # a of shape (2,)
    path = os.path.join(tmp_path, "batch.npz")
    with pytest.raises(ValueError, match=r"PlattCalibrator.a must be a scalar.*one by one"):
        save_calibrator(batch, path)
    nan = jax.jit(clf.fit_platt)(jnp.asarray(Y), jnp.asarray(P).at[0].set(jnp.nan))
    with pytest.raises(ValueError, match="PlattCalibrator.a: holds NaN"):
        save_calibrator(nan, path)
    assert not os.path.exists(path)  # nothing written


# ------------------------------------------ issue "Nothing lost, round 2", items 2, 4, 5
def test_a_fresh_process_loads_files_of_either_branch(tmp_path):
    # Each class enters the registry when its branch is imported: a fresh process that
    # imported only bayescal.core refused every file ("unknown calibrator type
    # 'SigmaScalingCalibrator'; known: ."), and each branch's load_calibrator the other's.
    import subprocess
    import sys

    rng = np.random.default_rng(2)
    files = {
        "SigmaScalingCalibrator": reg.fit_sigma_scaling(
            rng.normal(size=30), np.zeros(30), np.ones(30)
        ),
        "PlattCalibrator": clf.fit_platt(Y, P),
    }
    for kind, cal in files.items():
        save_calibrator(cal, os.path.join(tmp_path, f"{kind}.npz"))
    script = (
        "import sys\n"
        "from bayescal.core import load_calibrator\n"
        "from bayescal.classification import load_calibrator as clf_load\n"
        "for path in sys.argv[1:]:\n"
        "    print(type(load_calibrator(path)).__name__, type(clf_load(path)).__name__)\n"
    )
    paths = [os.path.join(tmp_path, f"{kind}.npz") for kind in files]
    out = subprocess.run(
        [sys.executable, "-c", script, *paths], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [kind for kind in files for _ in range(2)]


def _npy_member(header_shape, payload: bytes, descr="<f8") -> bytes:
    fh = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        fh, {"descr": descr, "fortran_order": False, "shape": header_shape}
    )
    return fh.getvalue() + payload


def _with_members(path, spec, arrays, members, compression=zipfile.ZIP_STORED):
    """``_write``'s archive plus raw members (name -> bytes) added to it."""
    _write(path, spec, arrays)
    with zipfile.ZipFile(path, "a", compression=compression) as zf:
        for member, data in members.items():
            zf.writestr(member, data)


def test_a_declared_shape_larger_than_the_member_is_refused_before_reading(tmp_path):
    # A 910-byte file asked np.load for 7.28 TiB: MemoryError, not CalibratorFileError.
    path, spec, arrays = _platt(tmp_path)
    huge = _npy_member((2**40,), b"\0" * 8)
    del arrays["a"]
    _with_members(path, spec, arrays, {"a.npy": huge})
    with pytest.raises(CalibratorFileError, match=r"declares shape \(1099511627776,\)"):
        load_calibrator(path)
    # The same member unreferenced is never read: only the name is reported.
    path, spec, arrays = _platt(tmp_path)
    _with_members(path, spec, arrays, {"bomb.npy": huge})
    with pytest.raises(CalibratorFileError, match=r"no field refers to: \['bomb'\]"):
        load_calibrator(path)


def test_a_member_that_inflates_a_thousandfold_is_refused(tmp_path):
    # 96 MiB of zeros deflate to ~100 kB: more than a calibrator's arrays can inflate.
    path, spec, arrays = _platt(tmp_path)
    zeros = _npy_member((12 * 2**20,), bytes(96 * 2**20))
    del arrays["a"]
    _with_members(path, spec, arrays, {"a.npy": zeros}, compression=zipfile.ZIP_DEFLATED)
    assert os.path.getsize(path) < 2**20
    with pytest.raises(CalibratorFileError, match="inflates from"):
        load_calibrator(path)


def test_a_deflated_file_of_honest_arrays_still_loads(tmp_path):
    # np.savez_compressed of a saved file's own members: compression alone is fine.
    path, spec, arrays = _platt(tmp_path)
    blob = np.frombuffer(json.dumps(spec).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, __spec__=blob, **arrays)
    assert load_calibrator(path) == clf.fit_platt(Y, P)


@pytest.mark.parametrize("cross", [False, True], ids=["venn_abers", "cross_venn_abers"])
@pytest.mark.parametrize("tamper", ["swapped", "p0_one_p1_zero"])
def test_venn_abers_tables_with_lower_above_upper_are_refused(tmp_path, cross, tamper):
    # Loaded before, and gave intervals with lower > upper.
    y = np.tile(Y, 4)
    p = np.tile(P, 4) + np.repeat(np.arange(4) * 0.01, 8)
    cal = clf.fit_cross_venn_abers(y, p, np.arange(32) % 2) if cross else clf.fit_venn_abers(y, p)
    assert np.any(np.asarray(cal.p0_table) < np.asarray(cal.p1_table))  # a real interval
    path, spec, arrays = _saved(tmp_path, cal)
    refs = spec["calibrator"]["arrays"]
    p0, p1 = arrays[refs["p0_table"]], arrays[refs["p1_table"]]
    if tamper == "swapped":
        arrays[refs["p0_table"]], arrays[refs["p1_table"]] = p1, p0
    else:
        arrays[refs["p0_table"]], arrays[refs["p1_table"]] = np.ones_like(p0), np.zeros_like(p1)
    _write(path, spec, arrays)
    with pytest.raises(CalibratorFileError, match="p1_table must be at least p0_table"):
        load_calibrator(path)
