"""``bayescal evaluate`` reports LOO-PIT metrics for files with a log_likelihood group
(issue 10, item 7).

Reference: ``bayescal.arviz.loo_pit`` on the same data in memory (itself tested against
``az.loo_pit`` in tests/test_loo.py), passed through ``calibration_error`` /
``miscalibration_area``: the report must hold exactly those numbers.
"""

import json
import warnings

import jax
import numpy as np
import pytest
import xarray as xr

from bayescal import arviz as baz
from bayescal import regression as reg
from bayescal._cli import evaluate as ev
from bayescal.cli import main
from tests import _arviz_compat as compat

X64 = bool(jax.config.read("jax_enable_x64"))
DTYPE = np.dtype(np.float64 if X64 else np.float32)
DIMS = ("chain", "draw", "obs")


def _tree(seed=0, n=40, s=200, integer=False, ll_draws=None):
    """A misspecified Normal model: the predictive is too narrow (sd 0.5 vs 1)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 0.1, size=(2, s // 2, 1))
    y = rng.normal(size=n)
    pp = mu + 0.5 * rng.normal(size=(2, s // 2, n))
    if integer:
        y, pp = np.round(3 * y), np.round(3 * pp)
    ll = -0.5 * ((y - mu) / 0.5) ** 2
    if ll_draws is not None:
        ll = ll[:, :ll_draws]
    return xr.DataTree.from_dict({
        "posterior": xr.Dataset({"mu": (("chain", "draw"), mu[..., 0])}),
        "posterior_predictive": xr.Dataset({"y": (DIMS, pp)}),
        "log_likelihood": xr.Dataset({"y": (DIMS, ll)}),
        "observed_data": xr.Dataset({"y": (("obs",), y)}),
    })


def _write(tree, path):
    """As ArviZ writes files (InferenceData.to_netcdf on 0.x, DataTree on 1.x); a bare
    DataTree.to_netcdf picks scipy's NetCDF3 writer, which has no groups, on some
    xarray versions."""
    compat.to_netcdf(path, **{name: tree[name].to_dataset() for name in tree.children})
    return path


def _run(capsys, path, *args):
    code = main(["evaluate", str(path), *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("integer", [False, True])
def test_loo_metrics_equal_the_library_on_the_same_data(tmp_path, capsys, integer):
    tree = _tree(integer=integer)
    path = tmp_path / "m.nc"
    _write(tree, path)
    code, out, err = _run(capsys, path, "--out", tmp_path / "o", "--seed", 3)
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    key = jax.random.key(3) if integer else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k > 0.7: checked below
        ref = baz.loo_pit(tree, "y", key=key, flat=True)
    u = np.asarray(ref.pit).astype(DTYPE)
    for kind in ("quantile", "interval"):
        got = report["loo"]["metrics"][kind]
        assert got["MACE"] == float(reg.calibration_error(u, kind=kind, num_levels=100))
        assert got["area (exact)"] == float(reg.miscalibration_area(u, kind=kind))
    k = np.asarray(ref.pareto_k)
    assert report["loo"]["pareto_k"] == {
        "max": float(k.max()), "above 0.7": int((k > 0.7).sum()), "n": 40
    }
    assert report["loo"]["randomized"] is integer
    bad = int((k > 0.7).sum())
    assert any(n.startswith(f"{bad} observations have Pareto k > 0.7")
               for n in report["notes"]) == (bad > 0)
    # the too-narrow predictive shows in the LOO-PIT too (U-shaped: large MACE)
    assert report["loo"]["metrics"]["interval"]["MACE"] > 0.2
    assert "LOO-PIT (PSIS" in out
    assert any(p.endswith("loo_pit_ecdf.png") for p in report["plots"])
    assert (tmp_path / "o" / "loo_pit_ecdf.png").stat().st_size > 5000


def test_no_loo_option_and_files_without_log_likelihood(tmp_path, capsys):
    tree = _tree()
    path = tmp_path / "m.nc"
    _write(tree, path)
    code, out, _ = _run(capsys, path, "--out", tmp_path / "a", "--no-loo", "--no-plots")
    assert code == 0 and "LOO-PIT" not in out
    assert "loo" not in json.loads((tmp_path / "a" / "report.json").read_text())
    plain = xr.DataTree.from_dict(
        {g: tree[g].to_dataset() for g in ("posterior_predictive", "observed_data")}
    )
    _write(plain, tmp_path / "p.nc")
    code, out, _ = _run(capsys, tmp_path / "p.nc", "--out", tmp_path / "b", "--no-plots")
    assert code == 0 and "LOO-PIT" not in out
    assert "loo" not in json.loads((tmp_path / "b" / "report.json").read_text())


def test_unusable_log_likelihood_is_a_note_not_a_failure(tmp_path, capsys):
    # the log-likelihood holds fewer draws than the predictive: LOO-PIT cannot be
    # computed, the ordinary report still is, and the note says why
    path = tmp_path / "bad.nc"
    _write(_tree(ll_draws=1), path)
    code, out, err = _run(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert "loo" not in report
    assert any(n.startswith("LOO-PIT not computed: the sample dims differ") for n in
               report["notes"])
    assert "note: LOO-PIT not computed" in out


def test_loo_is_skipped_above_the_memory_limit(tmp_path, capsys, monkeypatch):
    path = tmp_path / "m.nc"
    _write(_tree(), path)
    monkeypatch.setattr(ev, "LOO_MAX_BYTES", 1000)
    code, out, _ = _run(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert "loo" not in report
    assert any("would hold about" in n and "bayescal.arviz.loo_pit" in n
               for n in report["notes"])
