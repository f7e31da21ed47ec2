"""Eager overhead: a public call against the same call under the user's ``jax.jit``.

An eager call validates its inputs (one fused device pass of the value checks and one
host sync of a few flags) and then runs its kernel; the jitted call runs the kernel
with the checks folded into the result. The goal (issue "One contract for both
branches"): eager at most 1.3x the jitted time at n = 1e6 and at most 3x at n = 1000.
Inputs are JAX arrays already on the device, as in a user's pipeline, and the eager and
jitted results are checked equal before timing.
"""

from __future__ import annotations

import numpy as np
from _common import median_time, row


def _cases(n: int):
    import jax.numpy as jnp

    from bayescal import classification as clf
    from bayescal import regression as reg

    r = np.random.default_rng(0)
    y = jnp.asarray(r.normal(size=n), jnp.float32)
    loc = jnp.asarray(r.normal(size=n), jnp.float32)
    scale = jnp.asarray(r.uniform(0.5, 2.0, size=n), jnp.float32)
    u = jnp.asarray(r.uniform(size=n), jnp.float32)
    p = jnp.asarray(r.uniform(size=n), jnp.float32)
    lab = jnp.asarray(r.uniform(size=n) < p, jnp.float32)
    return [
        ("pit_normal", reg.pit_normal, (y, loc, scale)),
        ("calibration_error", reg.calibration_error, (u,)),
        ("crps_normal", reg.crps_normal, (y, loc, scale)),
        ("expected_calibration_error", clf.expected_calibration_error, (lab, p)),
        ("brier_score", clf.brier_score, (lab, p)),
        ("log_loss", clf.log_loss, (lab, p)),
    ]


def main(quick: bool = False) -> list[dict]:
    import jax

    rows = []
    sizes = (1000, 100_000) if quick else (1000, 1_000_000)
    for n in sizes:
        for name, fn, args in _cases(n):
            jitted = jax.jit(fn)
            eager_out, jit_out = fn(*args), jitted(*args)
            np.testing.assert_allclose(
                np.asarray(eager_out), np.asarray(jit_out), rtol=1e-5, atol=1e-7
            )
            repeat = 51 if n <= 1000 else 11
            t_eager = median_time(
                lambda fn=fn, args=args: fn(*args), repeat=repeat, warmup=3
            )
            t_jit = median_time(
                lambda jitted=jitted, args=args: jitted(*args), repeat=repeat, warmup=3
            )
            goal = 3.0 if n <= 1000 else 1.3
            rows.append(
                row(
                    f"{name} eager, n={n:.0e}",
                    t_eager,
                    t_jit,
                    "the same call under jax.jit",
                    note=f"eager/jit {t_eager / t_jit:.2f}x (goal <= {goal}x)",
                    goal=1 / goal,
                )
            )
            print(
                f"{name:28s} n={n:>8d}  eager {t_eager * 1e6:9.1f} us  jit "
                f"{t_jit * 1e6:9.1f} us  eager/jit {t_eager / t_jit:5.2f}x (goal <= {goal})",
                flush=True,
            )
    return rows


if __name__ == "__main__":
    main()
