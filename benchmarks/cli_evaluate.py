"""Time and peak memory of ``bayescal evaluate`` on large inputs (issue 12, issue 9).

1. A CSV of 1e6 rows ``y,loc,scale``: the read (pandas' C parser) and the whole run.
2. An ArviZ NetCDF file of [S draws x N observations] float32 (default 1000 x 2e5 =
   800 MB), evaluated by streaming chunks: peak resident memory (``ru_maxrss``) of
   the evaluating process (``VmHWM``), against the file size.

Each measurement runs in a fresh subprocess and reads its own ``VmHWM``.
Usage: ``python benchmarks/cli_evaluate.py [--draws 1000] [--obs 200000] [--rows 1000000]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

CHILD = textwrap.dedent(
    """
    import pathlib, sys, time

    def hwm_mb():  # VmHWM: this process's peak RSS, reset by exec (ru_maxrss is not:
        # it keeps the parent's high-water mark from before the fork)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024

    import pandas  # imports are not part of the read
    from bayescal._cli.csv_layouts import read_csv
    t0 = time.perf_counter()
    if sys.argv[1] == "read":
        task = read_csv(pathlib.Path(sys.argv[2]), None)
        assert task["y"].size == int(sys.argv[3])
        code = 0
    else:
        from bayescal.cli import main
        code = main(["evaluate", *sys.argv[2:]])
    dt = time.perf_counter() - t0
    rss = hwm_mb()
    print(f"RESULT {code} {dt:.3f} {rss:.0f}")
    """
)


def child(*args: str) -> tuple[int, float, float]:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env
    )
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")]
    if not line:
        raise RuntimeError(out.stderr[-2000:])
    code, dt, rss = line[-1].split()[1:]
    return int(code), float(dt), float(rss)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--obs", type=int, default=200_000)
    parser.add_argument("--chunk-mb", default="64")
    a = parser.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. CSV
        loc = rng.normal(size=a.rows)
        y = loc + rng.normal(size=a.rows)
        path = os.path.join(tmp, "big.csv")
        np.savetxt(path, np.column_stack([y, loc, np.ones(a.rows)]), delimiter=",",
                   header="y,loc,scale", comments="", fmt="%.9g")
        size = os.path.getsize(path) / 2**20
        _, t_read, rss_read = child("read", path, str(a.rows))
        _, t_run, rss_run = child("run", path, "--out", os.path.join(tmp, "o1"), "--no-plots")
        _, t_import, rss_base = child("run", "--help-not-an-option")
        print(f"CSV {a.rows} rows ({size:.0f} MB): read {t_read:.2f} s after imports (peak RSS "
              f"{rss_read:.0f} MB); whole evaluate {t_run:.2f} s with the JAX imports and compilations (peak RSS {rss_run:.0f} MB); "
              f"an import-only run peaks at {rss_base:.0f} MB")
        os.remove(path)
        # 2. NetCDF streamed
        import arviz as az
        import xarray as xr

        nc = os.path.join(tmp, "big.nc")
        chains = 4 if a.draws % 4 == 0 else 1
        per = a.draws // chains
        yv = rng.normal(size=a.obs).astype(np.float32)
        pp = xr.Dataset({"y": (("chain", "draw", "i"), np.empty((chains, per, a.obs), np.float32))})
        for c in range(chains):
            pp["y"].values[c] = rng.normal(size=(per, a.obs)).astype(np.float32) + yv
        az.InferenceData(posterior_predictive=pp, observed_data=xr.Dataset({"y": (("i",), yv)})).to_netcdf(nc)
        del pp
        nc_mb = os.path.getsize(nc) / 2**20
        code, t_nc, rss_nc = child("run", nc, "--out", os.path.join(tmp, "o2"), "--no-plots",
                                   "--chunk-mb", a.chunk_mb)
        print(f"NetCDF [{a.draws} x {a.obs}] float32 ({nc_mb:.0f} MB on disk), --chunk-mb "
              f"{a.chunk_mb}: exit {code}, {t_nc:.1f} s, peak RSS {rss_nc:.0f} MB")


if __name__ == "__main__":
    main()
