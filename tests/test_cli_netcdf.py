"""``bayescal evaluate`` on ArviZ NetCDF files: lazy reading, streaming in chunks, and
alignment of draws and observations by dimension names (issue 9, item 8).

References: ``bayescal.regression.pit_draws`` / ``calibration_error`` on the arrays
aligned by hand with xarray (``transpose`` by names), and the one-shot path (one
chunk) for the streamed path (many chunks): the PIT counts must be identical. The files
are written as the installed ArviZ writes them (``InferenceData.to_netcdf`` on arviz 0.x,
``DataTree.to_netcdf`` on arviz 1.x: ``tests/_arviz_compat.py``).
"""

import json
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
import xarray as xr

from bayescal import regression as reg
from bayescal._cli.evaluate import draw_statistics, load_task, pit_from_counts
from bayescal.cli import main
from tests import _arviz_compat as azc

X64 = bool(jax.config.read("jax_enable_x64"))
DTYPE = np.dtype(np.float64 if X64 else np.float32)


def to_netcdf(path, pp, obs):
    """Write an ArviZ NetCDF file from two xarray Datasets."""
    return azc.to_netcdf(path, posterior_predictive=pp, observed_data=obs)


def evaluate(capsys, *args):
    code = main(["evaluate", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


@pytest.fixture
def grid_file(tmp_path):
    """Observations on a 2-d grid (a, b); draws stored with the obs dims transposed."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=(6, 7))
    draws = 0.8 * rng.normal(size=(2, 50, 6, 7)) + y + 0.3  # miscalibrated on purpose
    pp = xr.Dataset({"y": (("chain", "draw", "a", "b"), draws)}).transpose(
        "chain", "draw", "b", "a"
    )
    obs = xr.Dataset({"y": (("a", "b"), y)})
    return to_netcdf(tmp_path / "grid.nc", pp, obs), y, draws


def test_transposed_observation_dims_are_aligned_by_name(tmp_path, capsys, grid_file):
    # issue 9: transposed observation dims gave 0.038 instead of 0.210 (blind reshape)
    path, y, draws = grid_file
    code, out, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots")
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    u = reg.pit_draws(y.ravel().astype(DTYPE), draws.reshape(100, 42).astype(DTYPE))
    for kind in ("quantile", "interval"):
        np.testing.assert_allclose(
            report["metrics"][kind]["MACE"],
            float(reg.calibration_error(u, kind=kind)),
            rtol=1e-6,
        )


def test_observation_count_mismatch_names_the_dims(tmp_path, capsys):
    # issue 9: 99 predictive observations against 100 observed exited 0 with a garbage MACE
    rng = np.random.default_rng(1)
    pp = xr.Dataset({"y": (("chain", "draw", "y_dim_0"), rng.normal(size=(2, 50, 99)))})
    obs = xr.Dataset({"y": (("y_dim_0",), rng.normal(size=100))})
    path = to_netcdf(tmp_path / "mis.nc", pp, obs)
    code, _, err = evaluate(capsys, path, "--out", tmp_path / "o")
    assert code == 2 and len(err) == 1
    assert "size mismatch in y_dim_0 (99 vs 100)" in err[0]
    assert "posterior_predictive/y has dims (chain=2, draw=50, y_dim_0=99)" in err[0]
    assert not (tmp_path / "o").exists()


def test_differently_named_dims_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(2)
    pp = xr.Dataset({"y": (("chain", "draw", "obs"), rng.normal(size=(1, 20, 10)))})
    obs = xr.Dataset({"y": (("y_dim_0",), rng.normal(size=10))})
    code, _, err = evaluate(capsys, to_netcdf(tmp_path / "n.nc", pp, obs), "--out", tmp_path / "o")
    assert code == 2 and "observation dim(s) y_dim_0 missing in posterior_predictive/y" in err[0]


def test_different_coordinates_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(3)
    pp = xr.Dataset(
        {"y": (("chain", "draw", "site"), rng.normal(size=(1, 20, 3)))},
        coords={"site": ["a", "b", "c"]},
    )
    obs = xr.Dataset({"y": (("site",), rng.normal(size=3))}, coords={"site": ["c", "b", "a"]})
    code, _, err = evaluate(capsys, to_netcdf(tmp_path / "c.nc", pp, obs), "--out", tmp_path / "o")
    assert code == 2 and "the coordinates of dim site differ" in err[0]


@pytest.mark.parametrize("chunk_draw_columns", [1, 3, 8, 41])
def test_streamed_chunks_equal_the_one_shot_path(grid_file, chunk_draw_columns):
    path, y, draws = grid_file
    task = load_task(str(path))
    src = task["draws"]
    try:
        whole = draw_statistics(src, DTYPE, chunk_bytes=1 << 40)
        # chunk_bytes of a few observations' draws: chunks cut inside the (a, b) grid
        small = draw_statistics(src, DTYPE, chunk_bytes=chunk_draw_columns * 100 * DTYPE.itemsize)
    finally:
        src.close()
    for k in ("le", "lt"):  # integer counts: identical
        np.testing.assert_array_equal(small[k], whole[k])
    for k in ("mean", "var", "crps"):  # float64 sums: numpy's SIMD order may differ by 1 ulp
        np.testing.assert_allclose(small[k], whole[k], rtol=1e-12)
    pit_small = pit_from_counts(small["le"], small["lt"], 100, DTYPE)
    pit_whole = pit_from_counts(whole["le"], whole["lt"], 100, DTYPE)
    np.testing.assert_array_equal(pit_small, pit_whole)
    # and both equal the library on the arrays aligned by names
    u = reg.pit_draws(y.ravel().astype(DTYPE), draws.reshape(100, 42).astype(DTYPE))
    np.testing.assert_array_equal(pit_whole, np.asarray(u))
    crps = reg.crps_draws(
        y.ravel().astype(np.float64), draws.reshape(100, 42).astype(DTYPE).astype(np.float64),
        reduction="none",
    )
    np.testing.assert_allclose(whole["crps"], np.asarray(crps), rtol=1e-6, atol=1e-7)


def test_randomized_pit_for_integer_draws_is_chunk_independent(tmp_path):
    rng = np.random.default_rng(4)
    y = rng.poisson(3.0, size=30)
    pp = xr.Dataset({"y": (("chain", "draw", "i"), rng.poisson(3.0, size=(2, 40, 30)))})
    obs = xr.Dataset({"y": (("i",), y)})
    task = load_task(str(to_netcdf(tmp_path / "p.nc", pp, obs)))
    src = task["draws"]
    try:
        a = draw_statistics(src, DTYPE, chunk_bytes=1 << 40)
        b = draw_statistics(src, DTYPE, chunk_bytes=80 * 7 * DTYPE.itemsize)
    finally:
        src.close()
    assert a["integer"] and b["integer"]
    key = jax.random.key(5)
    np.testing.assert_array_equal(
        pit_from_counts(a["le"], a["lt"], 80, DTYPE, key),
        pit_from_counts(b["le"], b["lt"], 80, DTYPE, key),
    )
    # the library's randomized PIT with the same key: same uniform draws, same counts
    d = pp["y"].values.reshape(80, 30).astype(DTYPE)
    np.testing.assert_allclose(
        pit_from_counts(a["le"], a["lt"], 80, DTYPE, key),
        np.asarray(reg.pit_draws(y.astype(DTYPE), d, key=key)),
        rtol=1e-6,
    )


def test_bernoulli_draws_give_a_classification_report(tmp_path, capsys):
    rng = np.random.default_rng(6)
    p = rng.uniform(size=60)
    y = (rng.uniform(size=60) < p).astype(int)
    draws = (rng.uniform(size=(1, 200, 60)) < p).astype(int)
    pp = xr.Dataset({"y": (("chain", "draw", "i"), draws)})
    obs = xr.Dataset({"y": (("i",), y)})
    path = to_netcdf(tmp_path / "b.nc", pp, obs)
    code, out, err = evaluate(capsys, path, "--out", tmp_path / "o", "--no-plots", "--bins", "5")
    assert code == 0, err
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    from bayescal import classification as clf

    prob = draws.reshape(200, 60).mean(0)
    np.testing.assert_allclose(
        report["metrics"]["ECE"],
        float(clf.expected_calibration_error(y, prob.astype(DTYPE), bins=5)),
        rtol=1e-6,
    )


def test_nonfinite_draw_is_reported(tmp_path, capsys):
    rng = np.random.default_rng(7)
    d = rng.normal(size=(1, 20, 10))
    d[0, 3, 4] = np.nan
    pp = xr.Dataset({"y": (("chain", "draw", "i"), d)})
    obs = xr.Dataset({"y": (("i",), rng.normal(size=10))})
    code, _, err = evaluate(capsys, to_netcdf(tmp_path / "f.nc", pp, obs), "--out", tmp_path / "o")
    assert code == 2 and "'posterior_predictive/y' has 1 NaN" in err[0]


def test_zarr_is_optional(tmp_path, capsys):
    store = tmp_path / "fit.zarr"
    rng = np.random.default_rng(8)
    y = rng.normal(size=12)
    try:
        import zarr  # noqa: F401
    except ImportError:
        store.mkdir()
        code, _, err = evaluate(capsys, store, "--out", tmp_path / "o")
        assert code == 2 and "reading zarr needs the optional zarr package" in err[0]
        return
    pp = xr.Dataset({"y": (("chain", "draw", "i"), rng.normal(size=(1, 30, 12)) + y)})
    obs = xr.Dataset({"y": (("i",), y)})
    azc.to_zarr(store, posterior_predictive=pp, observed_data=obs)
    code, _, err = evaluate(capsys, store, "--out", tmp_path / "o", "--no-plots")
    assert code == 0, err


PEAK_RSS = textwrap.dedent(
    """
    import sys
    import numpy as np

    def hwm_mb():  # VmHWM: this process's peak RSS, reset by exec (ru_maxrss is not:
        # it keeps the parent's high-water mark from before the fork)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024

    if sys.argv[4] == "stream":
        from bayescal._cli.evaluate import draw_statistics, load_task
        src = load_task(sys.argv[1])["draws"]
        draw_statistics(src, np.dtype(np.float32), chunk_bytes=int(sys.argv[3]) << 20)
        code = 0
    else:
        from bayescal.cli import main
        code = main(["evaluate", sys.argv[1], "--out", sys.argv[2], "--no-plots",
                     "--chunk-mb", sys.argv[3]])
    print(code, hwm_mb())
    """
)


@pytest.mark.slow
def test_resident_memory_is_bounded_by_the_chunk_not_the_file(tmp_path):
    """The streamed pass over a [400, 100000] float32 file (160 MB) with 8 MB chunks
    peaks within 80 MB of the same pass over a file 100x smaller: the draws are never
    all in memory. The whole run (JAX's compilations and metrics on N values included,
    which vary by a few hundred MB from run to run) stays far below the issue's 2 GB.
    Measured as ``VmHWM`` in fresh subprocesses."""
    import h5netcdf  # noqa: F401 - the writer

    def peak(num_obs, name, mode):
        rng = np.random.default_rng(9)
        y = rng.normal(size=num_obs).astype(np.float32)
        path = tmp_path / f"{name}.nc"
        if not path.exists():
            pp = xr.Dataset(
                {"y": (("chain", "draw", "i"), rng.normal(size=(4, 100, num_obs)).astype(np.float32))}
            )
            to_netcdf(path, pp, xr.Dataset({"y": (("i",), y)}))
            del pp
        out = subprocess.run(
            [sys.executable, "-c", PEAK_RSS, str(path), str(tmp_path / f"{name}-{mode}"), "8", mode],
            capture_output=True, text=True, check=True,
        )
        code, mb = map(int, out.stdout.split()[-2:])
        assert code == 0, out.stderr
        return mb

    small, large = peak(1_000, "small", "stream"), peak(100_000, "large", "stream")
    assert large - small < 80, (small, large)
    assert peak(100_000, "large", "evaluate") < 2048
