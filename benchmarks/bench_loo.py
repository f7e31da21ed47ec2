"""LOO-PIT: ``bayescal.arviz.loo_pit`` vs ``az.loo_pit`` (arviz 0.x) on the same data.

Synthetic InferenceData with one chain (so both use ``r_eff = 1``) of S draws x N
observations: posterior predictive draws, a Normal log-likelihood and observations.
Both call ArviZ's own ``az.psislw`` (a Python loop over observations, the dominant
cost); the PIT step given the same log weights is also timed on its own
(``az.loo_pit(y=, y_hat=, log_weights=)`` vs bayescal's jitted weighted count).

Sizes: the issue asks for 4000 draws x 1e5 observations. ``az.psislw`` takes ~1.7 ms
per observation on the 2-core machine (~3 minutes per call at 1e5) and the float64
copies need ~13 GB, so the full pipeline runs at 4000 x 1e4 (``quick``: 4000 x 1000)
and only the PIT step at 4000 x 1e5 (``quick``: 4000 x 1e4).
Agreement: values equal to 1e-5 (float32 sums in bayescal).
"""

from __future__ import annotations

import pathlib
import sys
import warnings

import numpy as np
from _common import median_time, row

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bayescal import arviz as baz  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def _data(s: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 0.1, size=(1, s, 1))
    y = rng.normal(size=n).astype(np.float32)  # same dtype as the draws: no ties from rounding
    pp = (mu + rng.normal(size=(1, s, n))).astype(np.float32)
    ll = (-0.5 * (y - mu) ** 2).astype(np.float32)
    return y, pp, ll


def main(quick: bool = False) -> list[dict]:
    rows = []
    s = 4000
    n_full, n_pit = (1000, 10_000) if quick else (10_000, 100_000)
    # full pipeline (PSIS included, ArviZ's in both)
    y, pp, ll = _data(s, n_full)
    idata = az.from_dict(
        posterior_predictive={"y": pp}, log_likelihood={"y": ll}, observed_data={"y": y}
    )
    idata.add_groups(posterior=idata.posterior_predictive.rename({"y": "mu"}))
    ours = np.asarray(baz.loo_pit(idata, "y", flat=True).pit)
    ref = np.asarray(az.loo_pit(idata, y="y"))
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    t_ours = median_time(lambda d=idata: baz.loo_pit(d, "y", flat=True).pit, repeat=3)
    t_az = median_time(lambda d=idata: az.loo_pit(d, y="y"), repeat=3)
    rows.append(row(f"loo_pit incl. PSIS {s}x{n_full}", t_ours, t_az, "az.loo_pit"))
    del idata, pp, ll
    # PIT step alone, same log weights (PSIS once, outside the timing)
    y, pp, ll = _data(s, n_pit, seed=1)
    draws = np.ascontiguousarray(pp[0].T)  # [N, S]
    lw, _ = az.psislw(-np.ascontiguousarray(ll[0].T).astype(np.float64)) if n_pit <= 10_000 else (None, None)
    if lw is None:  # PSIS at 1e5 takes minutes: normalized raw ratios stand in for it
        raw = -np.ascontiguousarray(ll[0].T).astype(np.float64)
        lw = raw - np.log(np.exp(raw - raw.max(1, keepdims=True)).sum(1, keepdims=True)) - raw.max(1, keepdims=True)
    ours = np.asarray(baz._weighted_pit(y, draws, lw))
    ref = np.asarray(az.loo_pit(y=y, y_hat=draws, log_weights=lw))
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    t_ours = median_time(lambda: baz._weighted_pit(y, draws, lw), repeat=3)
    t_az = median_time(lambda: az.loo_pit(y=y, y_hat=draws, log_weights=lw), repeat=1, warmup=0)
    rows.append(row(f"LOO-PIT step given weights {s}x{n_pit}", t_ours, t_az, "az.loo_pit(log_weights=)"))
    return rows


def full() -> list[dict]:
    """The issue's size, whole pipeline: 4000 draws x 1e5 observations, one call each
    (``az.psislw`` alone takes minutes there; peak memory ~13 GB). Run by hand:
    ``python benchmarks/bench_loo.py --full``."""
    import gc
    import time

    s, n = 4000, 100_000
    y, pp, ll = _data(s, n, seed=2)
    idata = az.from_dict(
        posterior_predictive={"y": pp}, log_likelihood={"y": ll}, observed_data={"y": y}
    )
    # az.loo_pit needs a posterior group (one chain: r_eff = 1 in both)
    idata.add_groups(posterior=idata.posterior_predictive.isel(y_dim_0=[0]).rename({"y": "mu"}))
    del pp, ll
    gc.collect()
    t0 = time.perf_counter()
    ours = np.asarray(baz.loo_pit(idata, "y", flat=True).pit)
    t_ours = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    ref = np.asarray(az.loo_pit(idata, y="y"))
    t_az = time.perf_counter() - t0
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    return [row(f"loo_pit incl. PSIS {s}x{n} (one call, compile incl.)", t_ours, t_az, "az.loo_pit")]


if __name__ == "__main__":
    from _common import print_table

    print_table(full() if "--full" in sys.argv else main(quick="--quick" in sys.argv))
