"""Coverage of ``regression.bootstrap_calibration_error``'s intervals, by simulation.

For PIT values ``U^a`` (``a = 1``: calibrated; ``a > 1``: PIT values bunched towards 0)
the population curve is the CDF ``x^(1/a)``, so the population error at the levels
``linspace(0, 1, num_levels)`` is exact: ``norm(|z^(1/a) - z|)``. For each ``a``,
``reps`` data sets of ``n`` values (numpy seed 12345) each get a ``level`` interval of
both kinds (``interval="projection"`` and ``"percentile"``, from the same replicates,
``num_samples`` of them, key ``split(key(0), reps)[r]``); the table counts the
intervals that hold the population error, and the projection intervals whose lower
end is 0. Usage: ``python benchmarks/sim_bootstrap_coverage.py [n] [reps]
[num_samples] [norm]`` (defaults 2000 200 1000 l1; about a minute per ``a`` on 2 CPU
cores).
"""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from bayescal import regression as reg

NUM_LEVELS = 100
EXPONENTS = (1.0, 1.05, 1.1, 1.3)


def population_error(a: float, norm: str, num_levels: int = NUM_LEVELS) -> float:
    z = np.linspace(0.0, 1.0, num_levels)
    d = np.abs(z ** (1.0 / a) - z)
    return float({"l1": d.mean(), "l2": np.sqrt((d**2).mean()), "max": d.max()}[norm])


def coverage(a, n, reps, num_samples, norm, level=0.95, seed=12345):
    rng = np.random.default_rng(seed)
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    data = (rng.uniform(size=(reps, n)) ** a).astype(dtype)
    keys = jax.random.split(jax.random.key(0), reps)
    theta = population_error(a, norm)
    out = {}
    for interval in ("percentile", "projection"):
        res = jax.lax.map(
            lambda x, interval=interval: reg.bootstrap_calibration_error(
                x[0],
                x[1],
                num_samples=num_samples,
                norm=norm,
                level=level,
                interval=interval,
            ),
            (keys, data),
        )
        lo, hi = np.asarray(res.lower, float), np.asarray(res.upper, float)
        out[interval] = int(np.sum((lo <= theta) & (theta <= hi)))
        out[interval + " at 0"] = int(np.sum(lo == 0))
        out[interval + " width"] = float(np.median(hi - lo))
    return theta, out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    num_samples = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    norm = sys.argv[4] if len(sys.argv) > 4 else "l1"
    print(f"N = {n}, {reps} data sets, {num_samples} replicates, norm={norm}, level 0.95")
    print(
        "| a | population error | percentile: covers | projection: covers | "
        "projection: lower end 0 | median width pct / proj |"
    )
    print("|---|---|---|---|---|---|")
    for a in EXPONENTS:
        t0 = time.perf_counter()
        theta, c = coverage(a, n, reps, num_samples, norm)
        print(
            f"| {a} | {theta:.5f} | {c['percentile']}/{reps} | {c['projection']}/{reps} | "
            f"{c['projection at 0']}/{reps} | {c['percentile width']:.4f} / "
            f"{c['projection width']:.4f} |  ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
