"""The PAV in XLA on the CPU, beside the host PAV: the CPU proxy of the accelerator PAV.

On one CPU device bayescal fits isotonic regressions with scipy's C++ PAV (the host
path); accelerators and meshes run the PAV in XLA (``bayescal._src.isotonic``), whose
GPU speed ``make bench-gpu`` measures. Here both XLA formulations run on the CPU under
``jax.jit``, beside ``scipy.optimize.isotonic_regression`` (the peer), on CORP-like
data (labels drawn from sorted probabilities): the accelerator one (searches of 4 to 32
ways in loops of fixed trip counts) and the CPU-mesh one (binary searches), both after
chunks of 16 observations solved at once. The fits are checked equal to scipy's first. These rows track the work of the
XLA PAV between GPU runs; they are not a speed claim (the host path is what a CPU runs).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import scipy.optimize
from _common import median_time, row

from bayescal._src import isotonic

FORMULATIONS = {
    "accelerator formulation": dict(wide=True),
    "CPU-mesh formulation": dict(wide=False),
}


def main(quick: bool = False) -> list[dict]:
    rows = []
    peer = "scipy.optimize.isotonic_regression"
    for n in (10_000,) if quick else (10_000, 100_000):
        rng = np.random.default_rng(n)
        y = (rng.uniform(size=n) < np.linspace(0, 1, n)).astype(np.float32)
        w = np.ones(n, np.float32)
        ref = scipy.optimize.isotonic_regression(y.astype(np.float64)).x
        t_peer = median_time(lambda y=y: scipy.optimize.isotonic_regression(y), repeat=5)
        for name, kw in FORMULATIONS.items():
            fn = jax.jit(jax.vmap(functools.partial(isotonic._device_pav_row, **kw)))
            got = np.asarray(fn(y[None], w[None]))[0]
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
            t = median_time(lambda fn=fn, y=y, w=w: fn(y[None], w[None]), repeat=5)
            rows.append(
                row(
                    f"PAV in XLA, {name}, n={n:.0e}".replace("+0", ""),
                    t,
                    t_peer,
                    peer,
                    "CPU proxy of the GPU kernel",
                )
            )
    return rows
