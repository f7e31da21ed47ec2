"""Smooth ECE against relplot, adversarial group calibration against uncertainty-toolbox.

Same inputs for both sides; numbers checked before anything is timed; medians after a
warm-up call (which also compiles):

1. ``smooth_calibration_error`` (fixed-point bandwidth, eager; the bisection runs on
   the host and each of its ~11 evaluations is one compiled call) against
   ``relplot.smECE`` (numpy float64), agreement required to 1e-4; and at a fixed
   bandwidth under ``jax.jit`` against ``relplot.smECE_sigma``.
2. ``adversarial_group_calibration`` (uncertainty-toolbox's defaults: 10 group sizes x
   10 trials x 10 groups, MACE at 100 levels, central intervals) against
   ``uncertainty_toolbox.metrics_calibration.adversarial_group_calibration``. Both are
   Monte Carlo estimates with different random groups, so the check is that their
   means agree within 5 standard errors of the difference at every group size.

bayescal runs in float32 (x64 off). ``speed-up`` is peer time / bayescal time.
"""

from __future__ import annotations

from importlib import metadata

import jax
import numpy as np
import relplot
from _common import median_time, row
from uncertainty_toolbox import metrics_calibration as utc

from bayescal.classification import smooth_calibration_error
from bayescal.regression import adversarial_group_calibration

RELPLOT = f"relplot {metadata.version('relplot')}"
UT = f"uncertainty-toolbox {metadata.version('uncertainty-toolbox')}"


def _binary(n: int, seed: int = 0):
    r = np.random.default_rng(seed)
    p = r.uniform(size=n)
    y = (r.uniform(size=n) < p**1.3).astype(np.float64)
    return y, p


def _gaussian(n: int, seed: int = 0):
    r = np.random.default_rng(seed)
    loc = r.normal(size=n)
    scale = r.uniform(0.3, 3.0, size=n)
    y = loc + 1.3 * scale * r.normal(size=n)
    return y, loc, scale


def _smooth_rows(n: int) -> list[dict]:
    y, p = _binary(n)
    y32, p32 = jax.device_put(y.astype(np.float32)), jax.device_put(p.astype(np.float32))
    ref, sigma = relplot.smECE(p, y, return_width=True)
    got, got_sigma = smooth_calibration_error(y32, p32, return_bandwidth=True)
    if got_sigma != sigma or abs(float(got) - ref) > 1e-4:
        raise AssertionError(f"smECE differs: {float(got)} vs relplot {ref}")
    rows = [
        row(
            f"smooth ECE, fixed point, N={n:.0e}",
            median_time(lambda: smooth_calibration_error(y32, p32), repeat=5),
            median_time(lambda: relplot.smECE(p, y), repeat=5),
            RELPLOT,
            f"sigma*={sigma:.4f}, |diff|={abs(float(got) - ref):.1e}",
        )
    ]
    fixed = jax.jit(lambda a, b: smooth_calibration_error(a, b, bandwidth=0.05))
    ref_fixed = relplot.smECE_sigma(p, y, 0.05)
    if abs(float(fixed(y32, p32)) - ref_fixed) > 1e-4:
        raise AssertionError("smECE_sigma differs")
    rows.append(
        row(
            f"smooth ECE, sigma=0.05, jit, N={n:.0e}",
            median_time(lambda: fixed(y32, p32)),
            median_time(lambda: relplot.smECE_sigma(p, y, 0.05)),
            RELPLOT,
        )
    )
    return rows


def _adversarial_rows(n: int) -> list[dict]:
    y, loc, scale = _gaussian(n)
    args32 = [jax.device_put(a.astype(np.float32)) for a in (y, loc, scale)]
    np.random.seed(0)  # noqa: NPY002 (uncertainty-toolbox draws from the global state)
    ut = utc.adversarial_group_calibration(loc, scale, y, cali_type="mean_abs")
    ours = adversarial_group_calibration(0, *args32)
    se = np.sqrt((np.asarray(ours.std) ** 2 + ut.score_stderr**2) / 10)
    diff = np.abs(np.asarray(ours.mean) - ut.score_mean)
    if not np.all(diff <= 5 * se + 1e-5):
        raise AssertionError(f"adversarial group calibration differs: {diff} vs {5 * se}")
    keys = iter(range(1, 1000))
    return [
        row(
            f"adversarial group calibration, N={n:.0e}",
            median_time(lambda: adversarial_group_calibration(next(keys), *args32), repeat=3),
            median_time(
                lambda: utc.adversarial_group_calibration(loc, scale, y, cali_type="mean_abs"),
                repeat=3,
            ),
            UT,
            f"max |diff|/se = {np.max(diff[:-1] / se[:-1]):.2f} (noisy sizes)",
        )
    ]


def main(quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    for n in (1_000, 10_000) if quick else (1_000, 10_000, 100_000):
        rows += _smooth_rows(n)
    for n in (1_000,) if quick else (1_000, 10_000):
        rows += _adversarial_rows(n)
    for r in rows:
        print(
            f"{r['benchmark']:<44} ours {r['bayescal_ms']:9.2f} ms   peer {r['peer_ms']:9.2f} ms"
            f"   x{r['speedup']:.2f}   {r['note']}",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    import sys

    main(quick="--quick" in sys.argv)
