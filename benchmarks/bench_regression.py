"""Regression calibration: bayescal against uncertainty-toolbox, numpy and scipy.

Three groups, each on the same inputs for both sides, values checked with
``np.testing.assert_allclose`` before anything is timed, medians after a warm-up call
(which also compiles):

1. MACE + RMSCE + grid miscalibration area (100 levels) of N Gaussian predictions,
   ``kind="interval"`` (uncertainty-toolbox's default ``prop_type``) and
   ``"quantile"``, against uncertainty-toolbox's three vectorized calls. bayescal
   runs in float32 (x64 off), the toolbox in float64 numpy. Ours is timed (a) through
   the public eager functions on JAX arrays already on the device (validation
   included) and (b) as one ``jax.jit`` function of ``(y, loc, scale)``. The exact
   area (``num_levels=None``) sorts, on the host on CPU; it is timed against the same
   formula in numpy float64.
2. PIT from ``[S, N]`` float32 draws against the fastest of three plain numpy passes
   over the array. Ours is timed on a JAX array made beforehand with ``jnp.asarray``
   (eager: includes the finiteness check of the draws; under ``jax.jit``: the kernel
   alone), from numpy input (counted in place on CPU, no copy), and randomized.
   A naive jitted ``(draws <= y).mean(0)`` is shown for contrast.
3. Weighted and unweighted PAV at n = 1e6 against ``scipy.optimize.isotonic_regression``
   in float64.

``speed-up`` is peer time / bayescal time (> 1: bayescal is faster).
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np
from _common import block, row
from scipy.optimize import isotonic_regression as scipy_isotonic
from uncertainty_toolbox import metrics_calibration as utc

from bayescal.core import isotonic_regression
from bayescal.regression import (
    calibration_error,
    miscalibration_area,
    pit_draws,
    pit_normal,
)

NUM_LEVELS = 100
UT = f"uncertainty-toolbox {metadata.version('uncertainty-toolbox')} (vec.)"


def _medians(
    fns: dict[str, Callable[[], object]], repeat: int, warmup: bool = True
) -> dict[str, float]:
    """Median seconds of each ``fn()``, runs interleaved (A B C A B C ...).

    The machines are shared: interleaving lets load from other processes hit every
    side alike, so the ratios are steadier than with back-to-back blocks of runs.
    One warm-up call each (compiles) first, unless ``warmup=False`` (functions
    already compiled by the agreement checks, too slow to run once more).
    """
    for fn in fns.values() if warmup else ():
        block(fn())
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            block(fn())
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _sci(n: int) -> str:
    return f"{n:.0e}".replace("e+0", "e")


def _say(text: str) -> None:
    print(f"  {text}", flush=True)


# --------------------------------------------------------------------------------------
# 1. MACE + RMSCE + miscalibration area of Gaussian predictions
# --------------------------------------------------------------------------------------


def _ours_eager(y, loc, scale, kind):
    u = pit_normal(y, loc, scale)
    return (
        calibration_error(u, norm="l1", num_levels=NUM_LEVELS, kind=kind),
        calibration_error(u, norm="l2", num_levels=NUM_LEVELS, kind=kind),
        miscalibration_area(u, num_levels=NUM_LEVELS, kind=kind),
    )


_ours_jit = jax.jit(_ours_eager, static_argnames="kind")


def _toolbox(mu, sd, y, kind):
    kw = {"num_bins": NUM_LEVELS, "vectorized": True, "prop_type": kind}
    return (
        utc.mean_absolute_calibration_error(mu, sd, y, **kw),
        utc.root_mean_squared_calibration_error(mu, sd, y, **kw),
        utc.miscalibration_area(mu, sd, y, **kw),
    )


def _np_exact_area(u: np.ndarray, kind: str) -> float:
    """Exact area between the empirical curve and the diagonal (float64, np.sort)."""
    v = np.sort(u if kind == "quantile" else np.abs(2 * u - 1))
    n = v.size
    knots = np.concatenate([[0.0], v, [1.0]])
    level = np.arange(n + 1) / n
    b, a = knots[:-1] - level, knots[1:] - level
    same = (a >= 0) == (b >= 0)
    piece = np.where(
        same, np.diff(knots) * (np.abs(a) + np.abs(b)) / 2, (a * a + b * b) / 2
    )
    return float(piece.sum())


def _calibration_rows(quick: bool) -> list[dict]:
    n = 100_000 if quick else 1_000_000
    repeat = 5 if quick else 7
    goal = None if quick else 10.0  # issue "One library", item 4 (N = 1e6)
    rng = np.random.default_rng(0)
    # Miscalibrated on purpose (overconfident and biased) so that the errors are
    # sizeable (~0.05) and the agreement check below is meaningful.
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    y = mu + 0.1 + 1.3 * sd * rng.normal(size=n)
    y_j, mu_j, sd_j = (jnp.asarray(a, jnp.float32) for a in (y, mu, sd))
    _say(
        f"[calibration] N = {n:,}, {NUM_LEVELS} levels; bayescal float32 "
        f"(jax_enable_x64={jax.config.jax_enable_x64}), toolbox float64 numpy"
    )
    rows = []
    for kind in ("interval", "quantile"):
        ut_vals = _toolbox(mu, sd, y, kind)
        eager_vals = [float(v) for v in _ours_eager(y_j, mu_j, sd_j, kind)]
        jit_vals = [float(v) for v in _ours_jit(y_j, mu_j, sd_j, kind=kind)]
        # float32 PIT values can fall on the other side of a level than the float64
        # ones (each such point moves a fraction by 1/N): 2e-5 absolute.
        np.testing.assert_allclose(eager_vals, ut_vals, rtol=0, atol=2e-5)
        np.testing.assert_allclose(jit_vals, eager_vals, rtol=1e-6, atol=1e-7)
        _say(
            f"[{kind}] MACE/RMSCE/area bayescal "
            f"{'/'.join(f'{v:.6f}' for v in eager_vals)}, toolbox "
            f"{'/'.join(f'{v:.6f}' for v in ut_vals)}"
        )
        t = _medians(
            {
                "ut": lambda kind=kind: _toolbox(mu, sd, y, kind),
                "eager": lambda kind=kind: _ours_eager(y_j, mu_j, sd_j, kind),
                "jit": lambda kind=kind: _ours_jit(y_j, mu_j, sd_j, kind=kind),
            },
            repeat,
        )
        t_ut, t_eager, t_jit = t["ut"], t["eager"], t["jit"]
        rows.append(
            row(
                f"MACE+RMSCE+area {kind}, eager N={_sci(n)}",
                t_eager,
                t_ut,
                UT,
                "pit_normal + 2 x calibration_error + miscalibration_area(100) on "
                "float32 JAX arrays, validation included; toolbox: 3 calls, float64",
                goal=goal,
            )
        )
        rows.append(
            row(
                f"MACE+RMSCE+area {kind}, one jit N={_sci(n)}",
                t_jit,
                t_ut,
                UT,
                "one jax.jit function of (y, loc, scale) -> the 3 numbers",
                goal=goal,
            )
        )

    # Exact area: sorts |2u - 1| (on the host on CPU).
    kind = "interval"
    u_j = pit_normal(y_j, mu_j, sd_j)
    u64 = np.asarray(u_j, np.float64)
    exact = float(miscalibration_area(u_j, kind=kind))
    ref = _np_exact_area(u64, kind)
    np.testing.assert_allclose(exact, ref, rtol=1e-4, atol=2e-6)
    _say(f"[exact area, {kind}] bayescal {exact:.6f}, numpy float64 {ref:.6f}")
    t = _medians(
        {
            "ours": lambda: miscalibration_area(u_j, kind=kind),
            "numpy": lambda: _np_exact_area(u64, kind),
            "ut": lambda: utc.miscalibration_area(
                mu, sd, y, num_bins=NUM_LEVELS, vectorized=True, prop_type=kind
            ),
        },
        repeat,
    )
    t_exact, t_np_exact, t_ut_area = t["ours"], t["numpy"], t["ut"]
    rows.append(
        row(
            f"exact area {kind} (sorts) N={_sci(n)}",
            t_exact,
            t_np_exact,
            "numpy sort + same formula (f64)",
            "miscalibration_area(num_levels=None) from PIT values; host np.sort on CPU",
        )
    )
    rows.append(
        row(
            f"exact area {kind} (sorts) N={_sci(n)}",
            t_exact,
            t_ut_area,
            "toolbox miscalibration_area (grid)",
            "different quantity: the toolbox only has the 100-level grid area",
        )
    )
    return rows


# --------------------------------------------------------------------------------------
# 2. PIT from predictive draws
# --------------------------------------------------------------------------------------


def _pit_rows(quick: bool) -> list[dict]:
    s, n = (200, 50_000) if quick else (1000, 250_000)
    repeat, slow_repeat = (5, 2) if quick else (7, 3)
    rng = np.random.default_rng(1)
    draws = rng.standard_normal((s, n), dtype=np.float32)
    y = (1.1 * rng.standard_normal(n)).astype(np.float32)
    y_j = jnp.asarray(y)
    draws_j = jnp.asarray(draws)
    key = jax.random.key(0)
    _say(f"[pit_draws] draws [{s}, {n}] float32 ({draws.nbytes / 2**20:.0f} MiB)")

    numpy_passes = {
        "numpy (d <= y).mean(0)": lambda: (draws <= y).mean(axis=0),
        "numpy count_nonzero(d <= y, 0)": lambda: np.count_nonzero(draws <= y, axis=0) / s,
        "numpy (d <= y).sum(0, int32)": lambda: (
            (draws <= y).sum(axis=0, dtype=np.int32) / s
        ),
    }
    le = (draws <= y).sum(axis=0, dtype=np.int32)
    lt = (draws < y).sum(axis=0, dtype=np.int32)
    expected = le / s
    for fn in numpy_passes.values():
        np.testing.assert_allclose(fn(), expected, rtol=0, atol=1e-6)

    naive = jax.jit(lambda y, d: (d <= y).mean(axis=0))
    pit_jit = jax.jit(pit_draws)
    np_rng = np.random.default_rng(2)

    def numpy_randomized():
        le = (draws <= y).sum(axis=0, dtype=np.int32)
        lt = (draws < y).sum(axis=0, dtype=np.int32)
        v = np_rng.random(n, dtype=np.float32)
        return (lt + v * (le - lt)) / s

    np.testing.assert_allclose(np.asarray(pit_draws(y_j, draws_j)), expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(pit_jit(y_j, draws_j)), expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(pit_draws(y, draws)), expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(naive(y_j, draws_j)), expected, atol=1e-6)
    u_rand = np.asarray(pit_draws(y_j, draws_j, key=key), np.float64)
    assert np.all(u_rand >= lt / s - 1e-6) and np.all(u_rand <= le / s + 1e-6)
    u_np = numpy_randomized()
    assert np.all(u_np >= lt / s - 1e-6) and np.all(u_np <= le / s + 1e-6)

    t = _medians(
        {
            **numpy_passes,
            "eager": lambda: pit_draws(y_j, draws_j),
            "jit": lambda: pit_jit(y_j, draws_j),
            "rand": lambda: pit_draws(y_j, draws_j, key=key),
            "numpy rand": numpy_randomized,
            "from numpy": lambda: pit_draws(y, draws),
        },
        repeat,
    )
    t_numpy = {k: t[k] for k in numpy_passes}
    peer_name = min(t_numpy, key=t_numpy.get)
    t_peer = t_numpy[peer_name]
    t_eager, t_jit, t_rand, t_np_rand = t["eager"], t["jit"], t["rand"], t["numpy rand"]
    _say(
        "[pit_draws] numpy passes (ms): "
        + ", ".join(f"{k.removeprefix('numpy ')} {v * 1e3:.1f}" for k, v in t_numpy.items())
        + f"; peer = fastest: {peer_name}"
    )
    t_slow = _medians(
        {
            "convert": lambda: jnp.asarray(draws),
            "naive": lambda: naive(y_j, draws_j),
        },
        slow_repeat,
        warmup=False,  # all compiled by the checks above
    )
    t_convert, t_naive = t_slow["convert"], t_slow["naive"]
    t_from_numpy = t["from numpy"]
    _say(f"[pit_draws] jnp.asarray(draws) alone: {t_convert * 1e3:.0f} ms (a copy)")
    shape = f"[{s},{n}]"
    return [
        row(
            f"pit_draws {shape} f32, eager (JAX in)",
            t_eager,
            t_peer,
            peer_name,
            "draws already a JAX array (jnp.asarray beforehand); includes the "
            "finiteness check over the whole draws array",
        ),
        row(
            f"pit_draws {shape} f32, under jax.jit",
            t_jit,
            t_peer,
            peer_name,
            "jax.jit(pit_draws): value checks are skipped under tracing -> the kernel",
        ),
        row(
            f"pit_draws {shape}, numpy in, eager",
            t_from_numpy,
            t_peer,
            peer_name,
            "numpy draws as given: counted in place in cache-sized blocks on the CPU "
            "backend (no copy), block-wise device transfers on accelerators",
            goal=None if quick else 0.67,  # issue "One library", item 4
        ),
        row(
            f"pit_draws {shape} randomized, eager",
            t_rand,
            t_np_rand,
            "numpy 2 passes (<, <=) + uniform",
            "randomized PIT; values checked to lie in [#{<}/S, #{<=}/S]",
        ),
        row(
            "contrast: naive jit (d <= y).mean(0)",
            t_naive,
            t_peer,
            peer_name,
            "NOT bayescal: broadcast-compare-mean under XLA on CPU, for contrast",
        ),
    ]


# --------------------------------------------------------------------------------------
# 3. Weighted PAV
# --------------------------------------------------------------------------------------


def _isotonic_rows(quick: bool) -> list[dict]:
    n = 100_000 if quick else 1_000_000
    repeat = 7 if quick else 9
    rng = np.random.default_rng(3)
    y = np.linspace(0.0, 1.0, n) + rng.normal(0.0, 0.3, n)
    w = rng.uniform(0.5, 2.0, n)
    y_j, w_j = jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32)
    iso_jit = jax.jit(isotonic_regression)
    x64 = jax.config.jax_enable_x64

    ref_w = scipy_isotonic(y, weights=w).x
    ref_u = scipy_isotonic(y).x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float64 -> float32 (x64 off)
        fit_np = np.asarray(isotonic_regression(y, weights=w))
    # float32 data: the fit differs from scipy's float64 one by float32 rounding.
    for fit, ref in [
        (isotonic_regression(y_j, weights=w_j), ref_w),
        (iso_jit(y_j, weights=w_j), ref_w),
        (fit_np, ref_w),
        (isotonic_regression(y_j), ref_u),
        (iso_jit(y_j), ref_u),
    ]:
        np.testing.assert_allclose(np.asarray(fit, np.float64), ref, rtol=0, atol=1e-5)
    _say(
        f"[isotonic] n = {n:,}; scipy float64; bayescal float32 JAX arrays "
        f"(jax_enable_x64={x64}: float64 numpy input is cast to float32)"
    )

    def ours_np():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return isotonic_regression(y, weights=w)

    t = _medians(
        {
            "scipy w": lambda: scipy_isotonic(y, weights=w),
            "scipy": lambda: scipy_isotonic(y),
            "w": lambda: isotonic_regression(y_j, weights=w_j),
            "w jit": lambda: iso_jit(y_j, weights=w_j),
            "w np": ours_np,
            "u": lambda: isotonic_regression(y_j),
            "u jit": lambda: iso_jit(y_j),
        },
        repeat,
    )
    t_sw, t_su, t_w, t_w_jit = t["scipy w"], t["scipy"], t["w"], t["w jit"]
    t_w_np, t_u, t_u_jit = t["w np"], t["u"], t["u jit"]
    peer_w, peer_u = "scipy isotonic_regression w (f64)", "scipy isotonic_regression (f64)"
    goal = None if quick else 1 / 1.5  # at most 1.5x scipy's time (issue "One library")
    return [
        row(
            f"PAV weighted n={_sci(n)}, eager f32 JAX",
            t_w,
            t_sw,
            peer_w,
            "public eager",
            goal=goal,
        ),
        row(
            f"PAV weighted n={_sci(n)}, under jax.jit",
            t_w_jit,
            t_sw,
            peer_w,
            "jit",
            goal=goal,
        ),
        row(
            f"PAV weighted n={_sci(n)}, f64 numpy in",
            t_w_np,
            t_sw,
            peer_w,
            f"x64={x64}: cast to float32 (one-time warning)",
        ),
        row(
            f"PAV unweighted n={_sci(n)}, eager f32 JAX",
            t_u,
            t_su,
            peer_u,
            "public eager",
            goal=goal,
        ),
        row(
            f"PAV unweighted n={_sci(n)}, under jax.jit",
            t_u_jit,
            t_su,
            peer_u,
            "jit",
            goal=goal,
        ),
    ]


def main(quick: bool = False) -> list[dict]:
    rows = _calibration_rows(quick)
    rows += _pit_rows(quick)
    rows += _isotonic_rows(quick)
    return rows


if __name__ == "__main__":
    from _common import print_table

    print_table(main())
