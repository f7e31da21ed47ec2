"""Classification: binned ECE and isotonic calibration vs scikit-learn and scipy.

Same inputs, one process; the numbers are checked to agree before anything is timed.

- ECE (15 uniform bins): bayescal's jitted ``expected_calibration_error`` on JAX
  arrays vs ``sklearn.calibration.calibration_curve`` plus the count weighting a user
  has to add (sklearn drops empty bins and returns no counts): ``np.bincount`` of the
  same bin ids, then the count-weighted mean gap. Also the eager call on numpy input
  (conversion and value validation included).
- Isotonic calibration fit: ``fit_isotonic`` (argsort, tie pooling, PAV) vs the same
  pipeline written with numpy + ``scipy.optimize.isotonic_regression``, vs
  ``sklearn.isotonic.IsotonicRegression().fit``; and the PAV alone
  (``bayescal.core.isotonic_regression``) vs scipy on the same pooled data.
  Scores lie on a 2^-19 grid: exact in float32 and spaced more than float32's
  resolution (1e-6, below which scikit-learn merges values), so all three agree
  exactly; ~450k distinct scores among 1e6, with ties.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from _common import median_time, row
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression

from bayescal import core
from bayescal.classification import expected_calibration_error, fit_isotonic

NUM_BINS = 15


def _sklearn_ece(y: np.ndarray, p: np.ndarray) -> float:
    prob_true, prob_pred = calibration_curve(y, p, n_bins=NUM_BINS)
    edges = np.linspace(0.0, 1.0, NUM_BINS + 1)
    counts = np.bincount(np.searchsorted(edges[1:-1], p), minlength=NUM_BINS)
    counts = counts[counts > 0]
    return float(np.sum(counts * np.abs(prob_true - prob_pred)) / p.size)


def _numpy_pool(score: np.ndarray, y: np.ndarray):
    order = np.argsort(score)
    s, t = score[order], y[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    counts = np.diff(np.r_[starts, s.size]).astype(np.float64)
    means = np.add.reduceat(t.astype(np.float64), starts) / counts
    return s[starts], means, counts


def _numpy_scipy_fit(score: np.ndarray, y: np.ndarray):
    x, means, counts = _numpy_pool(score, y)
    return x, scipy.optimize.isotonic_regression(means, weights=counts).x


def main(quick: bool = False) -> list[dict]:
    n = 100_000 if quick else 1_000_000
    tag = "1e5" if quick else "1e6"
    rng = np.random.default_rng(0)
    rows = []

    # --- binned ECE ---
    p = rng.uniform(size=n).astype(np.float32)
    y = (rng.uniform(size=n) < p**1.3).astype(np.float32)
    pj, yj = jnp.asarray(p), jnp.asarray(y)
    ece_jit = jax.jit(functools.partial(expected_calibration_error, bins=NUM_BINS))
    ref = _sklearn_ece(y, p)
    np.testing.assert_allclose(float(ece_jit(yj, pj)), ref, rtol=1e-4)
    np.testing.assert_allclose(float(expected_calibration_error(y, p)), ref, rtol=1e-4)
    t_peer = median_time(lambda: _sklearn_ece(y, p))
    t_jit = median_time(lambda: ece_jit(yj, pj))
    t_eager = median_time(lambda: expected_calibration_error(y, p, bins=NUM_BINS))
    peer = "sklearn calibration_curve+bincount"
    goal = None if quick else 5.0  # issue "One library", item 4 (N = 1e6)
    rows.append(
        row(f"ECE 15 bins n={tag} (jit, JAX input)", t_jit, t_peer, peer, goal=goal)
    )
    rows.append(
        row(f"ECE 15 bins n={tag} (eager, numpy input)", t_eager, t_peer, peer, goal=goal)
    )

    # --- isotonic calibration fit ---
    score = (rng.integers(0, 2**19, size=n) / 2**19).astype(np.float32)
    y = (rng.uniform(size=n) < score**2).astype(np.float32)
    sj, yj = jnp.asarray(score), jnp.asarray(y)
    cal = fit_isotonic(yj, sj)
    x_ref, fit_ref = _numpy_scipy_fit(score, y)
    sk = IsotonicRegression(out_of_bounds="clip").fit(score, y)
    # the calibrator keeps one knot per observation (tied scores share a value)
    np.testing.assert_array_equal(np.unique(np.asarray(cal.thresholds)), x_ref)
    np.testing.assert_allclose(np.asarray(cal(x_ref)), fit_ref, atol=1e-6)
    grid = np.linspace(-0.1, 1.1, 10_001).astype(np.float32)
    np.testing.assert_allclose(np.asarray(cal(grid)), sk.predict(grid), atol=1e-6)

    t_ours = median_time(lambda: fit_isotonic(yj, sj).values)
    t_numpy = median_time(lambda: _numpy_scipy_fit(score, y))
    t_sk = median_time(
        lambda: IsotonicRegression(out_of_bounds="clip").fit(score, y), repeat=5
    )
    rows.append(
        row(
            f"isotonic fit n={tag} (sort+pool+PAV)",
            t_ours,
            t_numpy,
            "numpy pool + scipy PAV",
        )
    )
    rows.append(
        row(f"isotonic fit n={tag}", t_ours, t_sk, "sklearn IsotonicRegression.fit")
    )

    _, means, counts = _numpy_pool(score, y)
    mj, cj = jnp.asarray(means, jnp.float32), jnp.asarray(counts, jnp.float32)
    np.testing.assert_allclose(
        np.asarray(core.isotonic_regression(mj, weights=cj)),
        scipy.optimize.isotonic_regression(means, weights=counts).x,
        atol=1e-6,
    )
    t_pav = median_time(lambda: core.isotonic_regression(mj, weights=cj))
    t_scipy = median_time(lambda: scipy.optimize.isotonic_regression(means, weights=counts))
    rows.append(
        row(
            f"PAV on {means.size / 1e3:.0f}k pooled points",
            t_pav,
            t_scipy,
            "scipy.optimize.isotonic_regression",
        )
    )
    for r in rows:
        print(
            f"{r['benchmark']}: {r['bayescal_ms']:.2f} ms vs {r['peer_ms']:.2f} ms "
            f"({r['speedup']:.2f}x)",
            flush=True,
        )
    return rows
