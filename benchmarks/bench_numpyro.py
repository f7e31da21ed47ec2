"""Rao-Blackwellized PIT from a NumPyro model vs counting Predictive draws.

Normal linear model, 1000 posterior draws x 100000 held-out observations (``quick``:
100 x 10000). The posterior draws are fabricated arrays of the right shapes (what
``mcmc.get_samples()`` returns); no sampler is run.

* ``bayescal.numpyro.rao_blackwell_pit``: the exact mixture CDF, evaluated chunk by
  chunk, so memory stays O(chunk x N): its peak RSS increase is reported next to the
  S x N x 4 bytes a full [S, N] float32 array would take.
* Peer: sample-based PIT, ``Predictive(model, samples)(key, X)["obs"]`` ([S, N] draws)
  then ``bayescal.regression.pit_draws``; timed with and without the draw generation.

Agreement: both agree to Monte Carlo error; the Rao-Blackwellized values also equal
``scipy.stats.norm.cdf(y, mu_s, sigma_s).mean(0)`` on the first 500 observations.
"""

from __future__ import annotations

import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.stats
from _common import block, median_time, row
from numpyro.infer import Predictive

# this checkout's bayescal, not another one installed in the environment
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bayescal import numpyro as bn  # noqa: E402
from bayescal.regression import pit_draws  # noqa: E402


def model(X, y=None):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("obs", dist.Normal(a + X @ b, sigma), obs=y)


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_increase_mb(fn) -> tuple[float, float]:
    """(peak RSS increase in MB during ``fn()``, seconds of that call)."""
    reset = _reset_peak()
    before = _rss_kib("VmRSS") if reset else _rss_kib("VmHWM")
    t0 = time.perf_counter()
    block(fn())
    seconds = time.perf_counter() - t0
    return (_rss_kib("VmHWM") - before) / 1024, seconds


def main(quick: bool = False) -> list[dict]:
    s, n, p = (100, 10_000, 3) if quick else (1000, 100_000, 3)
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(n, p)), jnp.float32)
    truth_b = np.array([0.5, -1.0, 0.25])
    y = jnp.asarray(0.3 + np.asarray(X) @ truth_b + rng.normal(size=n), jnp.float32)
    samples = {  # a posterior concentrated near the truth
        "a": jnp.asarray(rng.normal(0.3, 0.05, s), jnp.float32),
        "b": jnp.asarray(truth_b + rng.normal(0.0, 0.05, (s, p)), jnp.float32),
        "sigma": jnp.asarray(rng.uniform(0.9, 1.1, s), jnp.float32),
    }
    full_mb = s * n * 4 / 2**20

    # first call: compile + run, with the peak RSS increase (before any [S, N] exists)
    rb_mem, rb_first = _peak_increase_mb(lambda: bn.rao_blackwell_pit(model, samples, y, X))
    # second call (compiled): the working memory of the evaluation itself
    rb_mem2, _ = _peak_increase_mb(lambda: bn.rao_blackwell_pit(model, samples, y, X))
    u_rb = bn.rao_blackwell_pit(model, samples, y, X)

    # correctness: the hand mixture CDF on the first 500 observations
    m = 500
    mu = np.asarray(samples["a"])[:, None] + np.asarray(samples["b"]) @ np.asarray(X[:m]).T
    ref = scipy.stats.norm.cdf(np.asarray(y[:m]), mu, np.asarray(samples["sigma"])[:, None])
    err = float(np.max(np.abs(np.asarray(u_rb[:m]) - ref.mean(0))))
    if err > 1e-5:
        raise AssertionError(f"rao_blackwell_pit differs from the scipy mixture by {err}")

    predictive = Predictive(model, samples)

    def sample_then_count():
        draws = predictive(jax.random.key(1), X)["obs"]
        return pit_draws(y, draws)

    pd_mem, _ = _peak_increase_mb(sample_then_count)
    draws = block(predictive(jax.random.key(1), X)["obs"])
    u_draws = pit_draws(y, draws)
    gap = np.abs(np.asarray(u_rb) - np.asarray(u_draws))
    # counting S draws has standard error <= 0.5 / sqrt(S) per observation
    if gap.max() > 6 * 0.5 / np.sqrt(s) or gap.mean() > 0.5 / np.sqrt(s):
        raise AssertionError(f"PIT from draws and Rao-Blackwell disagree: {gap.max()}")

    repeat = 3 if not quick else 5
    t_rb = median_time(lambda: bn.rao_blackwell_pit(model, samples, y, X), repeat=repeat)
    t_peer = median_time(sample_then_count, repeat=repeat)
    t_count = median_time(lambda: pit_draws(y, draws), repeat=repeat)
    size = f"{s}x{n}"
    mem = (
        f"peak RSS +{rb_mem:.0f} MB on the first call (compiling), +{rb_mem2:.0f} MB "
        f"after, vs {full_mb:.0f} MB for a full [S, N] float32 array (Predictive + "
        f"count: +{pd_mem:.0f} MB); first call {rb_first:.2f} s "
        f"incl. compile; max |u - scipy| {err:.1e}; max |u_RB - u_draws| {gap.max():.3f}"
    )
    print(mem, flush=True)
    return [
        row(
            f"numpyro RB-PIT {size} vs sampling",
            t_rb,
            t_peer,
            "Predictive draws + pit_draws",
            mem,
        ),
        row(
            f"numpyro RB-PIT {size} vs counting",
            t_rb,
            t_count,
            "pit_draws on given [S, N] draws",
            "the peer skips drawing; RB has no Monte Carlo error",
        ),
    ]


if __name__ == "__main__":
    from _common import print_table

    print_table(main())
