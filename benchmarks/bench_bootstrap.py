"""Bootstrap of MACE: 1000 replicates at N = 1e5, bayescal against a loop over peers.

bayescal: ``core.bootstrap(key, regression.calibration_error, pit, ...)`` (indices resampled
for every replicate, ``vmap`` over keys in chunks under ``jit``) and
``regression.bootstrap_calibration_error`` (the same distribution drawn from the counts
per level). Peer: a Python loop over uncertainty-toolbox's
``mean_absolute_calibration_error(..., vectorized=True, prop_type="quantile")`` on data
resampled with numpy. The peer is timed on fewer replicates and scaled linearly to
1000 (each replicate costs the same). Both sides get the predictive means, scales and
observations; bayescal turns them into PIT values once, outside the timed region.
"""

from __future__ import annotations

import numpy as np
from _common import median_time, row


def main(quick: bool = False) -> list[dict]:
    import jax
    import uncertainty_toolbox.metrics_calibration as utc

    from bayescal import core
    from bayescal import regression as reg
    from bayescal._src import resampling as kernels

    n = 20_000 if quick else 100_000
    num_samples = 1000
    peer_reps = 10 if quick else 50
    rng = np.random.default_rng(0)
    loc = rng.normal(size=n)
    scale = rng.uniform(0.5, 2.0, n)
    y = loc + 1.2 * scale * rng.normal(size=n)
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    pit = reg.pit_normal(y.astype(dtype), loc.astype(dtype), scale.astype(dtype))
    key = jax.random.key(0)

    def ours_engine():
        return core.bootstrap(key, reg.calibration_error, pit, num_samples=num_samples)

    def ours_counts():
        return reg.bootstrap_calibration_error(key, pit, num_samples=num_samples)

    indices = [rng.integers(0, n, n) for _ in range(peer_reps)]

    def peer():
        return [
            utc.mean_absolute_calibration_error(
                loc[i], scale[i], y[i], vectorized=True, prop_type="quantile"
            )
            for i in indices
        ]

    # Agreement on one replicate: the engine's replicate 0 against the peer on the same
    # resampled observations. uncertainty-toolbox's quantile curve is ours mirrored
    # (it uses prediction minus truth), which gives the same MACE up to PIT values
    # within float rounding of a level: each flip moves one level by 1/n, hence the
    # tolerance of a few flips.
    res = ours_engine()
    idx0 = np.asarray(kernels.bootstrap_indices(key, n, 1))[0]
    ref0 = utc.mean_absolute_calibration_error(
        loc[idx0], scale[idx0], y[idx0], vectorized=True, prop_type="quantile"
    )
    ours0 = float(res.samples[0])
    if abs(ours0 - ref0) > 5 / n / 100 + 1e-6:
        raise AssertionError(f"replicate 0: bayescal {ours0} vs uncertainty-toolbox {ref0}")
    counts = ours_counts()
    if abs(float(counts.estimate) - float(res.estimate)) > 1e-6:
        raise AssertionError("the two bayescal routes disagree on the estimate")
    spread = float(np.std(np.asarray(res.samples)))
    if abs(spread / float(np.std(np.asarray(counts.samples))) - 1) > 0.15:
        raise AssertionError("the two bayescal routes disagree on the bootstrap spread")
    print(
        f"MACE {float(res.estimate):.5f}, replicate 0: bayescal {ours0:.6f} vs "
        f"uncertainty-toolbox {ref0:.6f}; 95% interval "
        f"[{float(res.lower):.5f}, {float(res.upper):.5f}]",
        flush=True,
    )

    t_engine = median_time(ours_engine, repeat=3)
    t_counts = median_time(ours_counts, repeat=5)
    t_peer = median_time(peer, repeat=3, warmup=0) * num_samples / peer_reps
    size = f"N={n:.0e}".replace("e+0", "e")
    scaled = f"peer timed on {peer_reps} replicates, x{num_samples // peer_reps}"
    return [
        row(
            f"bootstrap MACE 1000x {size} (engine)",
            t_engine,
            t_peer,
            "uncertainty-toolbox loop",
            f"{scaled}; index resampling, vmap in chunks",
        ),
        row(
            f"bootstrap MACE 1000x {size} (level counts)",
            t_counts,
            t_peer,
            "uncertainty-toolbox loop",
            f"{scaled}; bootstrap_calibration_error",
        ),
    ]


if __name__ == "__main__":
    from _common import print_table

    print_table(main())
