"""Cold start: the first call of each public function in a fresh process, and a new N.

Principle 9 of the design ("fast on the first call"): a user calls each function once
on new data, and the command line runs in fresh processes, so compile latency is the
speed users see. Every measurement here runs in a FRESH process: this file started
again with ``--worker`` (the same python, ``PYTHONPATH`` = this checkout, no
``JAX_COMPILATION_CACHE_*`` variables), which for part 1 forks one child per function
right after importing jax and bayescal (no JAX backend exists yet, nothing was traced
or compiled: each child is a fresh process after its imports, without paying the
~1-2 s of interpreter start and imports 62 x 3 times). Inputs are numpy float64
arrays built before anything is timed; results are waited for with
``jax.block_until_ready``. A function that raises is reported and left out of the
table; the run goes on.

1. Per public function of ``bayescal.regression`` and ``bayescal.classification``
   (enumerated from ``__all__``; classes skipped; the accumulators' ``update`` and the
   fitted calibrators' ``__call__`` ("apply") measured as rows of their own, with the
   accumulator state or the calibrator made in setup, outside the timed call), one
   process per function and mode:
   (a) the first call at N = 10,000, (b) a call at N = 10,007, in the same bucket
   (``bayescal._src.bucketing.bucket_size``), (c) the warm call at N = 10,000 (median).
   XLA compilations (events ending in ``backend_compile_duration``, less persistent
   cache hits, which JAX reports under the same event) and their seconds are counted
   during (a) and (b).
2. The "first session": 14 calls a user makes on day one (PIT, curve, errors,
   sharpness, scores, four calibrators fitted and applied) at N = 10,000 in a fresh
   process, then at N = 10,007 in the same process, then at 10,000 again; beside it,
   the same session with uncertainty-toolbox + scikit-learn + scipy in a fresh
   process. The numbers are checked equal where both compute the same quantity.
3. Each without a persistent compilation cache, with an empty one ("cache cold":
   a fresh temporary directory) and with the one the cold run filled ("cache warm").
   ``bayescal.enable_compilation_cache(path)`` is used when the package has it, else
   the JAX options are set directly before the first compilation.

``python benchmarks/bench_cold.py`` prints the markdown section of
docs/benchmarks.md ("First call and new N (cold start)"); ``--quick`` measures three
functions and the session without cache only (a smoke test, ~1 minute).
``--fits-at 100000`` measures (a)-(c) of every fit (``fit_*``) at N = 100,000 and
100,007 without cache and prints their table: the first calls past the host path's
size limit (issue "One library": at most 0.5 s each).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date

import numpy as np

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parent.parent
# N1: a new N in N0's bucket. ``--fits-at N`` measures at N0 = N instead (the worker
# processes read it from the environment variable below).
N0 = int(os.environ.get("BAYESCAL_BENCH_COLD_N", "10000"))
N1 = N0 + 7
S_DRAWS, N_LEVELS, K_CLASSES = 100, 9, 5
WARM_REPEAT = 5  # warm calls at most, ...
WARM_BUDGET_S = 1.0  # ... and no more once they took this long together
# Resamples of the unbiased kernel calibration tests (their default is 500): every
# other bootstrap and Monte Carlo function runs at its default (issue 37: figures at the
# defaults users get).
KERNEL_TEST_RESAMPLES = 20
QUICK_FUNCTIONS = ("pit_normal", "calibration_error", "expected_calibration_error")
# Public functions measured by no row, with the reason.
SKIPPED = {
    "calibration_accumulator": "a factory; its `update` has a row",
    "reliability_accumulator": "a factory; its `update` has a row",
    "conformal_rank": "integer arithmetic, no arrays",
    "save_calibrator": "file I/O",
    "load_calibrator": "file I/O",
}
MODES = ("none", "cold", "warm")
MODE_TITLE = {"none": "no cache", "cold": "cache cold", "warm": "cache warm"}


# --------------------------------------------------------------------------------------
# Inputs (numpy only: building them compiles nothing)
# --------------------------------------------------------------------------------------


class Data:
    """Valid inputs of every public function at ``n`` observations (numpy float64)."""

    def __init__(self, n: int, seed: int = 0):
        from scipy.special import expit, ndtri, softmax

        r = np.random.default_rng(seed * 1_000_003 + n)
        self.n = n
        self.seed = seed  # also the int seed of the random functions
        # Gaussian predictives, miscalibrated on purpose (biased, overconfident).
        self.loc = r.normal(size=n)
        self.scale = r.uniform(0.5, 2.0, size=n)
        self.y = self.loc + 0.1 + 1.3 * self.scale * r.normal(size=n)
        self.pit = r.uniform(size=n) ** 1.2
        self.draws = self.loc + self.scale * r.normal(size=(S_DRAWS, n))
        self.levels = np.linspace(0.1, 0.9, N_LEVELS)
        self.quantiles = self.loc + self.scale * ndtri(self.levels)[:, None]  # [L, N]
        self.lower, self.upper = self.quantiles[0], self.quantiles[-1]
        self.groups = r.integers(0, 5, size=n)
        # Binary classifier: scores on a 2^-19 grid (exact in float32, no near-ties
        # that scikit-learn's isotonic fit would merge), labels 0/1 as integers.
        z = r.normal(0.0, 1.5, size=n)
        self.label = (r.uniform(size=n) < expit(z)).astype(np.int64)
        grid = 2.0**-19
        self.prob = np.clip(np.round(expit(1.5 * z + 0.8) / grid) * grid, grid, 1 - grid)
        # Multiclass, K classes: probabilities [N, K], logits [N, K], labels 0..K-1.
        self.mc_logits = 2.0 * r.normal(size=(n, K_CLASSES))
        self.mc_prob = softmax(self.mc_logits, axis=1)
        truth = softmax(self.mc_logits / 1.5, axis=1).cumsum(axis=1)
        self.mc_label = np.minimum((r.uniform(size=(n, 1)) > truth).sum(axis=1), 4)
        self.X = r.normal(size=(n, 3))
        # NumPyro adapters: posterior draws of _numpyro_model (a Normal linear model),
        # S_DRAWS of them, and its predictive draws of the observations.
        self.posterior = {
            "a": 0.1 * r.normal(size=S_DRAWS),
            "b": np.array([1.0, -0.5, 0.25]) + 0.05 * r.normal(size=(S_DRAWS, 3)),
            "sigma": r.uniform(0.9, 1.1, size=S_DRAWS),
        }
        # einsum, not `@`: a BLAS product starts OpenBLAS's threads, whose spinning
        # after the product took CPU from the timed first calls (+0.02-0.03 s each)
        mu = self.posterior["a"][:, None] + np.einsum("sk,nk->sn", self.posterior["b"], self.X)
        self.obs_draws = {"obs": mu + self.posterior["sigma"][:, None] * r.normal(size=mu.shape)}
        self.obs = np.einsum("nk,k->n", self.X, np.array([1.0, -0.5, 0.25])) + r.normal(size=n)


def _numpyro_model(X, y=None):
    """The model of the NumPyro adapter rows: Normal linear regression."""
    import numpyro
    import numpyro.distributions as dist

    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([3]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("obs", dist.Normal(a + X @ b, sigma), obs=y)


def _norm_cdf_of(loc, scale):
    """A vectorized CDF as a user passes to ``pit_cdf`` (jax.scipy's Normal)."""
    import jax.scipy.stats as jst

    return lambda t: jst.norm.cdf(t, loc, scale)


def _pit_statistic(u):
    """A jittable statistic of PIT values for ``pit_null_test``."""
    import jax.numpy as jnp

    return jnp.abs(jnp.mean(u) - 0.5)


def _fit_predict(X_train, y_train, X_eval):
    """A user's model for ``cross_calibrate``: a fixed linear score (numpy)."""
    return 1.0 / (1.0 + np.exp(-(X_eval @ np.array([1.0, -0.5, 0.25]))))


def _lstsq_fit(X, y):
    return np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]


def _lstsq_predict(w, X):
    return np.c_[X, np.ones(len(X))] @ w


#: A least-squares model as ``fit``/``predict`` callables (fit_cross_conformal's row).
_LSTSQ = (_lstsq_fit, _lstsq_predict)


def cases() -> dict:
    """name -> (call(d, ctx), setup(d0) or None); setup runs once at N0, untimed."""
    from bayescal import classification as C
    from bayescal import regression as R

    def acc_state(factory):
        def setup(d):
            acc = factory()
            return acc, acc.init()

        return setup

    def fitted(fit):
        return lambda d: fit(d)

    c = {
        # bayescal.regression
        "pit_normal": (lambda d, _: R.pit_normal(d.y, d.loc, d.scale), None),
        "pit_draws": (lambda d, _: R.pit_draws(d.y, d.draws), None),
        "pit_cdf": (lambda d, _: R.pit_cdf(d.y, _norm_cdf_of(d.loc, d.scale)), None),
        "pit_quantiles": (lambda d, _: R.pit_quantiles(d.y, d.quantiles, d.levels), None),
        "calibration_curve": (lambda d, _: R.calibration_curve(d.pit), None),
        "calibration_accumulator.update": (
            lambda d, ctx: ctx[0].update(ctx[1], d.pit),
            acc_state(R.calibration_accumulator),
        ),
        "calibration_error": (lambda d, _: R.calibration_error(d.pit), None),
        "miscalibration_area": (lambda d, _: R.miscalibration_area(d.pit), None),
        "sharpness": (lambda d, _: R.sharpness(d.scale), None),
        "crps_normal": (lambda d, _: R.crps_normal(d.y, d.loc, d.scale), None),
        "crps_draws": (lambda d, _: R.crps_draws(d.y, d.draws), None),
        "nll_normal": (lambda d, _: R.nll_normal(d.y, d.loc, d.scale), None),
        "kernel_calibration_error -> regression": (
            lambda d, _: R.kernel_calibration_error(d.y, d.loc, d.scale),
            None,
        ),
        "kernel_calibration_test -> regression": (
            lambda d, _: R.kernel_calibration_test(d.y, d.loc, d.scale),
            None,
        ),
        "kernel_calibration_test -> regression unbiased": (
            lambda d, _: R.kernel_calibration_test(
                d.y, d.loc, d.scale, estimator="unbiased", key=d.seed,
                num_samples=KERNEL_TEST_RESAMPLES
            ),
            None,
        ),
        "kernel_calibration_test -> regression unbiased consistency": (
            lambda d, _: R.kernel_calibration_test(
                d.y, d.loc, d.scale, estimator="unbiased", key=d.seed,
                num_samples=KERNEL_TEST_RESAMPLES,
                method="consistency",
            ),
            None,
        ),
        "interval_score": (
            lambda d, _: R.interval_score(d.y, d.lower, d.upper, alpha=0.2),
            None,
        ),
        "pinball_loss": (lambda d, _: R.pinball_loss(d.y, d.quantiles, d.levels), None),
        "fit_isotonic_recalibrator": (
            lambda d, _: R.fit_isotonic_recalibrator(d.pit),
            None,
        ),
        "fit_isotonic_recalibrator -> apply": (
            lambda d, cal: cal(d.pit),
            fitted(lambda d: R.fit_isotonic_recalibrator(d.pit)),
        ),
        "fit_sigma_scaling": (lambda d, _: R.fit_sigma_scaling(d.y, d.loc, d.scale), None),
        "fit_sigma_scaling -> apply": (
            lambda d, cal: cal(d.scale),
            fitted(lambda d: R.fit_sigma_scaling(d.y, d.loc, d.scale)),
        ),
        "recalibrated_quantiles": (
            lambda d, cal: R.recalibrated_quantiles(
                cal, d.levels, loc=d.loc, scale=d.scale
            ),
            fitted(lambda d: R.fit_isotonic_recalibrator(d.pit)),
        ),
        "recalibrated_interval": (
            lambda d, cal: R.recalibrated_interval(cal, 0.9, loc=d.loc, scale=d.scale),
            fitted(lambda d: R.fit_isotonic_recalibrator(d.pit)),
        ),
        "pit_ecdf_band": (
            lambda d, _: R.pit_ecdf_band(d.seed, d.n),
            None,
        ),
        "bootstrap_calibration_curve": (
            lambda d, _: R.bootstrap_calibration_curve(d.seed, d.pit),
            None,
        ),
        "bootstrap_calibration_error": (
            lambda d, _: R.bootstrap_calibration_error(d.seed, d.pit),
            None,
        ),
        "pit_null_test": (
            lambda d, _: R.pit_null_test(d.seed, _pit_statistic, d.pit),
            None,
        ),
        "calibration_error_test": (
            lambda d, _: R.calibration_error_test(d.seed, d.pit),
            None,
        ),
        "miscalibration_area_test": (
            lambda d, _: R.miscalibration_area_test(d.seed, d.pit),
            None,
        ),
        "expected_normalized_calibration_error": (
            lambda d, _: R.expected_normalized_calibration_error(d.y, d.loc, d.scale),
            None,
        ),
        "spread_skill_curve": (
            lambda d, _: R.spread_skill_curve(d.y, d.loc, d.scale),
            None,
        ),
        "group_calibration_curve": (
            lambda d, _: R.group_calibration_curve(d.pit, d.groups),
            None,
        ),
        "group_calibration_error": (
            lambda d, _: R.group_calibration_error(d.pit, d.groups),
            None,
        ),
        "adversarial_group_calibration": (
            lambda d, _: R.adversarial_group_calibration(d.seed, d.y, d.loc, d.scale),
            None,
        ),
        "fit_conformal": (lambda d, _: R.fit_conformal(d.y, d.loc, d.scale), None),
        "fit_conformalized_quantile": (
            lambda d, _: R.fit_conformalized_quantile(d.y, d.lower, d.upper),
            None,
        ),
        "fit_conformal.groups": (
            lambda d, _: R.fit_conformal(d.y, d.loc, d.scale, groups=d.groups),
            None,
        ),
        "fit_density_ratio": (
            lambda d, _: R.fit_density_ratio(d.X[: d.n // 2], d.X[d.n // 2 :] + 0.5),
            None,
        ),
        "fit_density_ratio -> apply": (
            lambda d, ratio: ratio(d.X),
            fitted(lambda d: R.fit_density_ratio(d.X[: d.n // 2], d.X[d.n // 2 :] + 0.5)),
        ),
        "weighted_conformal_interval": (
            lambda d, _: R.weighted_conformal_interval(d.y, d.loc, d.scale, d.loc, d.scale),
            None,
        ),
        "fit_cross_conformal": (
            lambda d, _: R.fit_cross_conformal(*_LSTSQ, d.X, d.y).interval(d.X),
            None,
        ),
        "fit_jackknife_after_bootstrap": (
            lambda d, _: R.fit_jackknife_after_bootstrap(*_LSTSQ, d.X, d.y, key=d.seed).interval(
                d.X
            ),
            None,
        ),
        "pit_martingale": (lambda d, _: R.pit_martingale(d.pit), None),
        "conformal_p_values": (
            lambda d, _: R.conformal_p_values(np.abs(d.y - d.loc), key=d.seed),
            None,
        ),
        "adaptive_conformal_intervals": (
            lambda d, _: R.adaptive_conformal_intervals(d.y, d.loc, d.pit),
            None,
        ),
        "fit_conformal_predictive": (
            lambda d, _: R.fit_conformal_predictive(d.y, d.loc, d.scale, groups=d.groups),
            None,
        ),
        "fit_conformal_predictive -> pit": (
            lambda d, cps: cps(d.loc, d.scale, groups=d.groups).pit(d.y, key=d.seed),
            fitted(lambda d: R.fit_conformal_predictive(d.y, d.loc, d.scale, groups=d.groups)),
        ),
        "fit_conformal_predictive -> interval": (
            lambda d, cps: cps(d.loc, d.scale, groups=d.groups).interval(0.9),
            fitted(lambda d: R.fit_conformal_predictive(d.y, d.loc, d.scale, groups=d.groups)),
        ),
        "fit_conformal_predictive -> crps": (
            lambda d, cps: cps(d.loc, d.scale, groups=d.groups).crps(d.y),
            fitted(lambda d: R.fit_conformal_predictive(d.y, d.loc, d.scale, groups=d.groups)),
        ),
        "select_recalibrator": (
            lambda d, _: R.select_recalibrator(d.y, d.loc, d.scale, key=d.seed).fold_scores,
            None,
        ),
        # bayescal.classification
        "acceptance_intervals": (
            lambda d, curve: C.acceptance_intervals(curve),
            lambda d: C.reliability_curve(d.label, d.prob),
        ),
        "corp_curve": (lambda d, _: C.corp_curve(d.label, d.prob), None),
        "corp_curve -> with its band (key)": (
            lambda d, _: C.corp_curve(d.label, d.prob, key=d.seed), None,
        ),
        "bootstrap_reliability_curve": (
            lambda d, _: C.bootstrap_reliability_curve(
                d.seed, d.label, d.prob
            ),
            None,
        ),
        "reliability_curve": (lambda d, _: C.reliability_curve(d.label, d.prob), None),
        "reliability_accumulator.update": (
            lambda d, ctx: ctx[0].update(ctx[1], d.label, d.prob),
            acc_state(C.reliability_accumulator),
        ),
        "expected_calibration_error": (
            lambda d, _: C.expected_calibration_error(d.label, d.prob),
            None,
        ),
        "brier_score": (lambda d, _: C.brier_score(d.label, d.prob), None),
        "log_loss": (lambda d, _: C.log_loss(d.label, d.prob), None),
        "brier_decomposition": (lambda d, _: C.brier_decomposition(d.label, d.prob), None),
        "brier_decomposition_binned": (
            lambda d, _: C.brier_decomposition_binned(d.label, d.prob),
            None,
        ),
        "prediction_sharpness": (lambda d, _: C.prediction_sharpness(d.prob), None),
        "calibration_slope_intercept": (
            lambda d, _: C.calibration_slope_intercept(d.label, d.prob),
            None,
        ),
        "spiegelhalter_z": (lambda d, _: C.spiegelhalter_z(d.label, d.prob), None),
        "cumulative_calibration_test": (
            lambda d, _: C.cumulative_calibration_test(d.label, d.prob),
            None,
        ),
        "hosmer_lemeshow": (lambda d, _: C.hosmer_lemeshow(d.label, d.prob), None),
        "kernel_calibration_error": (
            lambda d, _: C.kernel_calibration_error(d.label, d.prob),
            None,
        ),
        "kernel_calibration_error -> multiclass": (
            lambda d, _: C.kernel_calibration_error(d.mc_label, d.mc_prob),
            None,
        ),
        "kernel_calibration_test": (
            lambda d, _: C.kernel_calibration_test(d.label, d.prob),
            None,
        ),
        "kernel_calibration_test -> unbiased multiclass": (
            lambda d, _: C.kernel_calibration_test(
                d.mc_label, d.mc_prob, estimator="unbiased", key=d.seed,
                num_samples=KERNEL_TEST_RESAMPLES
            ),
            None,
        ),
        "kernel_calibration_test -> unbiased multiclass consistency": (
            lambda d, _: C.kernel_calibration_test(
                d.mc_label, d.mc_prob, estimator="unbiased", key=d.seed,
                num_samples=KERNEL_TEST_RESAMPLES,
                method="consistency",
            ),
            None,
        ),
        "isotonic_calibration_index": (
            lambda d, _: C.isotonic_calibration_index(d.label, d.prob),
            None,
        ),
        "top_label_calibration_error": (
            lambda d, _: C.top_label_calibration_error(d.mc_label, d.mc_prob),
            None,
        ),
        "marginal_calibration_error": (
            lambda d, _: C.marginal_calibration_error(d.mc_label, d.mc_prob),
            None,
        ),
        "smooth_calibration_error": (
            lambda d, _: C.smooth_calibration_error(d.label, d.prob),
            None,
        ),
        "smooth_reliability_curve": (
            lambda d, _: C.smooth_reliability_curve(d.label, d.prob),
            None,
        ),
        "smooth_reliability_band": (
            lambda d, _: C.smooth_reliability_band(d.seed, d.label, d.prob),
            None,
        ),
        "fit_platt": (lambda d, _: C.fit_platt(d.label, d.prob), None),
        "calibration_martingale": (lambda d, _: C.calibration_martingale(d.label, d.prob), None),
        "fit_platt -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_platt(d.label, d.prob)),
        ),
        "fit_isotonic": (lambda d, _: C.fit_isotonic(d.label, d.prob), None),
        "fit_isotonic -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_isotonic(d.label, d.prob)),
        ),
        "fit_histogram_binning": (
            lambda d, _: C.fit_histogram_binning(d.label, d.prob),
            None,
        ),
        "fit_histogram_binning -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_histogram_binning(d.label, d.prob)),
        ),
        "fit_venn_abers": (lambda d, _: C.fit_venn_abers(d.label, d.prob), None),
        "fit_venn_abers -> apply": (
            lambda d, cal: cal.probability(d.prob),
            fitted(lambda d: C.fit_venn_abers(d.label, d.prob)),
        ),
        "fit_cross_venn_abers": (
            lambda d, _: C.fit_cross_venn_abers(d.label, d.prob, d.groups),
            None,
        ),
        "fit_cross_venn_abers -> apply": (
            lambda d, cal: cal.probability(np.repeat(d.prob[:, None], 5, axis=1)),
            fitted(lambda d: C.fit_cross_venn_abers(d.label, d.prob, d.groups)),
        ),
        "fit_isotonic.prior": (lambda d, _: C.fit_isotonic(d.label, d.prob, prior=1.0), None),
        "fit_centered_isotonic": (
            lambda d, _: C.fit_centered_isotonic(d.label, d.prob),
            None,
        ),
        "fit_centered_isotonic -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_centered_isotonic(d.label, d.prob)),
        ),
        "fit_beta": (lambda d, _: C.fit_beta(d.label, d.prob), None),
        "fit_beta -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_beta(d.label, d.prob)),
        ),
        "fit_scaling_binning": (
            lambda d, _: C.fit_scaling_binning(d.label, d.prob),
            None,
        ),
        "fit_scaling_binning -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_scaling_binning(d.label, d.prob)),
        ),
        "fit_bbq": (lambda d, _: C.fit_bbq(d.label, d.prob), None),
        "fit_bbq -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_bbq(d.label, d.prob)),
        ),
        "fit_spline": (lambda d, _: C.fit_spline(d.label, d.prob), None),
        "fit_spline -> apply": (
            lambda d, cal: cal(d.prob),
            fitted(lambda d: C.fit_spline(d.label, d.prob)),
        ),
        "fit_temperature": (lambda d, _: C.fit_temperature(d.mc_label, d.mc_logits), None),
        "fit_temperature -> apply": (
            lambda d, cal: cal(d.mc_logits),
            fitted(lambda d: C.fit_temperature(d.mc_label, d.mc_logits)),
        ),
        "fit_vector_scaling": (
            lambda d, _: C.fit_vector_scaling(d.mc_label, d.mc_logits),
            None,
        ),
        "fit_vector_scaling -> apply": (
            lambda d, cal: cal(d.mc_logits),
            fitted(lambda d: C.fit_vector_scaling(d.mc_label, d.mc_logits)),
        ),
        "fit_matrix_scaling": (
            lambda d, _: C.fit_matrix_scaling(d.mc_label, d.mc_logits, reg_lambda=0.01),
            None,
        ),
        "fit_matrix_scaling -> apply": (
            lambda d, cal: cal(d.mc_logits),
            fitted(lambda d: C.fit_matrix_scaling(d.mc_label, d.mc_logits)),
        ),
        "fit_dirichlet": (
            lambda d, _: C.fit_dirichlet(d.mc_label, d.mc_prob, reg_lambda=0.01, reg_mu=0.01),
            None,
        ),
        "fit_dirichlet -> apply": (
            lambda d, cal: cal(d.mc_prob),
            fitted(lambda d: C.fit_dirichlet(d.mc_label, d.mc_prob)),
        ),
        "fit_top_label": (lambda d, _: C.fit_top_label(d.mc_label, d.mc_prob), None),
        "fit_top_label -> apply": (
            lambda d, cal: cal(d.mc_prob),
            fitted(lambda d: C.fit_top_label(d.mc_label, d.mc_prob)),
        ),
        "fit_one_vs_rest": (lambda d, _: C.fit_one_vs_rest(d.mc_label, d.mc_prob), None),
        "fit_one_vs_rest -> apply": (
            lambda d, cal: cal(d.mc_prob),
            fitted(lambda d: C.fit_one_vs_rest(d.mc_label, d.mc_prob)),
        ),
        "cross_calibrate": (
            lambda d, _: C.cross_calibrate(d.seed, _fit_predict, d.X, d.label),
            None,
        ),
        "select_calibrator": (
            lambda d, _: C.select_calibrator(d.label, d.prob, key=d.seed).fold_scores,
            None,
        ),
        # the NumPyro adapters (issue 37: their first calls had no row)
        "numpyro.pit": (
            lambda d, _: _bn().pit(d.obs, d.obs_draws),
            None,
        ),
        "numpyro.rao_blackwell_pit": (
            lambda d, _: _bn().rao_blackwell_pit(_numpyro_model, d.posterior, d.obs, d.X),
            None,
        ),
        "numpyro.predictive_moments": (
            lambda d, _: _bn().predictive_moments(_numpyro_model, d.posterior, d.X).mean,
            None,
        ),
    }
    return c


def _bn():
    from bayescal import numpyro as bn

    return bn


def public_functions() -> list[str]:
    """The callables of both modules' ``__all__`` that are functions (not classes)."""
    import inspect

    from bayescal import classification, regression

    names = []
    for mod in (regression, classification):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj) and not inspect.isclass(obj):
                names.append(name)
    return names


# --------------------------------------------------------------------------------------
# Worker side (runs in the fresh process)
# --------------------------------------------------------------------------------------


class CompileCounter:
    """Counts XLA compilations and their seconds (and persistent-cache hits)."""

    def __init__(self):
        import jax

        self.compiles, self.seconds, self.hits = 0, 0.0, 0

        def on_duration(event, duration, **_):
            if event.endswith("backend_compile_duration"):
                self.compiles += 1
                self.seconds += duration

        def on_event(event, **_):
            if event == "/jax/compilation_cache/cache_hits":
                self.hits += 1

        jax.monitoring.register_event_duration_secs_listener(on_duration)
        jax.monitoring.register_event_listener(on_event)

    def snapshot(self) -> tuple[int, float, int]:
        return self.compiles, self.seconds, self.hits

    def since(self, snap) -> dict:
        """Programs obtained since ``snap``: XLA compilations and persistent-cache hits.

        JAX records ``backend_compile_duration`` around compile-or-load-from-cache, so
        a cache hit is one such event too: compilations = events - hits.
        """
        events, hits = self.compiles - snap[0], self.hits - snap[2]
        return {
            "compiles": events - hits,
            "compile_s": self.seconds - snap[1],
            "cache_hits": hits,
        }


def enable_cache(path: str | None) -> str:
    """Point JAX's persistent compilation cache at ``path`` (before any compilation)."""
    if path is None:
        return "none"
    import bayescal

    if hasattr(bayescal, "enable_compilation_cache"):
        bayescal.enable_compilation_cache(path)
        return "bayescal.enable_compilation_cache"
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if hasattr(jax.config, "jax_persistent_cache_min_entry_size_bytes"):
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return "jax.config"


def _timed(fn, counter) -> dict:
    import jax

    snap = counter.snapshot()
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    out = {"s": time.perf_counter() - t0}
    out.update(counter.since(snap))
    return out


def worker_function(name: str, cache: str | None, warm_repeat: int, new_n: bool) -> dict:
    """(a) first call at N0, (b) new N1 (if ``new_n``), (c) warm median at N0."""
    d0, d1 = Data(N0), Data(N1)
    import jax  # noqa: F401  (import before the listener; compiles nothing)

    counter = CompileCounter()
    import bayescal.classification  # noqa: F401
    import bayescal.regression  # noqa: F401

    how = enable_cache(cache)
    call, setup = cases()[name]
    ctx = setup(d0) if setup is not None else None
    first = _timed(lambda: call(d0, ctx), counter)
    second = _timed(lambda: call(d1, ctx), counter) if new_n else None
    warm: list[float] = []
    while len(warm) < warm_repeat and sum(warm) < WARM_BUDGET_S:
        warm.append(_timed(lambda: call(d0, ctx), counter)["s"])
    return {
        "name": name,
        "cache": how,
        "first": first,
        "new_n": second,
        "warm_s": statistics.median(warm) if warm else None,
    }


# The first session. Each side returns {quantity: value} for the agreement check.
def bayescal_session(d: Data, t: Data) -> dict:
    """14 public calls at ``d.n``; the calibrators are applied to the test split ``t``."""
    from bayescal import classification as C
    from bayescal import regression as R

    u = R.pit_normal(d.y, d.loc, d.scale)
    ut = R.pit_normal(t.y, t.loc, t.scale)
    iso_r = R.fit_isotonic_recalibrator(u)
    sig = R.fit_sigma_scaling(d.y, d.loc, d.scale)
    platt = C.fit_platt(d.label, d.prob, soft_labels=False)
    iso = C.fit_isotonic(d.label, d.prob)
    out = {
        "pit": u,
        "mace": R.calibration_error(u),
        # The 100-level grid area: the quantity uncertainty-toolbox computes.
        "area": R.miscalibration_area(u, num_levels=100),
        "curve_observed": R.calibration_curve(u).observed,
        "sharpness": R.sharpness(d.scale, root=True),
        "iso_recal_apply": iso_r(ut),
        "sigma_factor": sig.factor,
        "sigma_apply": sig(t.scale),
        "crps": R.crps_normal(d.y, d.loc, d.scale),
        "ece": C.expected_calibration_error(d.label, d.prob),
        "reliability_observed": C.reliability_curve(d.label, d.prob).observed,
        "brier": C.brier_score(d.label, d.prob),
        "log_loss": C.log_loss(d.label, d.prob),
        "platt_apply": platt(t.prob),
        "isotonic_apply": iso(t.prob),
    }
    import jax

    return jax.block_until_ready(out)


def peer_session(d: Data, t: Data) -> dict:
    """The same session with uncertainty-toolbox, scikit-learn, scipy and numpy."""
    from scipy.special import logit
    from scipy.stats import norm
    from sklearn.calibration import calibration_curve
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import brier_score_loss, log_loss
    from uncertainty_toolbox import metrics_calibration as utc

    kw = {"num_bins": 100, "vectorized": True, "prop_type": "quantile"}
    u = norm.cdf(d.y, d.loc, d.scale)
    ut = norm.cdf(t.y, t.loc, t.scale)
    # Kuleshov's recalibrator: isotonic regression of the ECDF pairs (u_t, P(u_t)).
    us = np.sort(u)
    ecdf = np.searchsorted(us, us, side="right") / us.size
    iso_r = IsotonicRegression(out_of_bounds="clip").fit(us, ecdf)
    factor = np.sqrt(np.mean(((d.y - d.loc) / d.scale) ** 2))
    z = (d.y - d.loc) / d.scale
    crps = d.scale * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
    # ECE and the reliability curve, 15 uniform bins (bayescal's default for both):
    # calibration_curve drops empty bins and returns no counts.
    true15, pred15 = calibration_curve(d.label, d.prob, n_bins=15)
    counts = np.bincount(np.searchsorted(np.linspace(0, 1, 16)[1:-1], d.prob), minlength=15)
    ece = np.sum(counts[counts > 0] * np.abs(true15 - pred15)) / d.n
    lr = LogisticRegression(C=np.inf, solver="lbfgs", tol=1e-8, max_iter=1000)
    lr.fit(logit(d.prob)[:, None], d.label)
    iso = IsotonicRegression(out_of_bounds="clip").fit(d.prob, d.label)
    return {
        "pit": u,
        "mace": utc.mean_absolute_calibration_error(d.loc, d.scale, d.y, **kw),
        "area": utc.miscalibration_area(d.loc, d.scale, d.y, **kw),
        # uncertainty-toolbox counts (loc - y) / scale <= q: the fractions of PIT values
        # >= 1 - p, the mirror image of the PIT curve (same MACE on a symmetric grid).
        "curve_observed": 1
        - utc.get_proportion_lists_vectorized(
            d.loc, d.scale, d.y, num_bins=100, prop_type="quantile"
        )[1][::-1],
        "sharpness": utc.sharpness(d.scale),
        "iso_recal_apply": iso_r.predict(ut),
        "sigma_factor": factor,
        "sigma_apply": factor * t.scale,
        "crps": np.mean(crps),
        "ece": ece,
        "reliability_observed": true15,
        "brier": brier_score_loss(d.label, d.prob),
        "log_loss": log_loss(d.label, d.prob),
        "platt_apply": lr.predict_proba(logit(t.prob)[:, None])[:, 1],
        "isotonic_apply": iso.predict(t.prob),
    }


def worker_session(side: str, cache: str | None, values_path: str | None) -> dict:
    """Import, session at N0, at N1, at N0 again; in this fresh process."""
    datas = {n: (Data(n), Data(n, seed=1)) for n in (N0, N1)}
    t0 = time.perf_counter()
    if side == "bayescal":
        counter = CompileCounter()
        import bayescal.classification  # noqa: F401
        import bayescal.regression  # noqa: F401

        how = enable_cache(cache)
        session = bayescal_session
    else:
        import sklearn.calibration  # noqa: F401
        import sklearn.isotonic  # noqa: F401
        import sklearn.linear_model  # noqa: F401
        import sklearn.metrics  # noqa: F401
        import uncertainty_toolbox.metrics_calibration  # noqa: F401
        from scipy.stats import norm  # noqa: F401

        counter, how = None, "n/a"
        session = peer_session
    import_s = time.perf_counter() - t0
    runs = {}
    for label, n in (("first", N0), ("new_n", N1), ("again", N0)):
        snap = counter.snapshot() if counter else None
        t1 = time.perf_counter()
        values = session(*datas[n])
        runs[label] = {"s": time.perf_counter() - t1}
        if counter:
            runs[label].update(counter.since(snap))
        if label == "first" and values_path:
            np.savez(
                values_path, **{k: np.asarray(v, np.float64) for k, v in values.items()}
            )
    return {"side": side, "cache": how, "import_s": import_s, **runs}


# --------------------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------------------


def _env() -> dict:
    env = dict(os.environ)
    # No cache unless this benchmark sets one; the same package as this checkout.
    for k in list(env):
        if k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE")):
            env.pop(k)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    return env


def _stream(*args: str):
    """The JSON lines of a worker process, as they come."""
    cmd = [sys.executable, str(HERE), "--worker", *args]
    with tempfile.TemporaryFile("w+") as err:
        with subprocess.Popen(
            cmd, env=_env(), stdout=subprocess.PIPE, stderr=err, text=True
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("{"):
                    yield json.loads(line)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(args)} failed:\n{err.read()[-3000:]}")


def _spawn(*args: str) -> dict:
    cmd = [sys.executable, str(HERE), "--worker", *args]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def _forked(fn, *args) -> dict:
    """``fn(*args)`` in a forked child of this process; its JSON-able result."""
    import traceback

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            payload = json.dumps(fn(*args))
        except BaseException:  # noqa: BLE001  (reported to the parent)
            payload = json.dumps({"error": traceback.format_exc()})
        with os.fdopen(w, "w") as f:
            f.write(payload)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else {"error": "the child died"}


def worker_functions(names: list[str], mode: str, tmp: str, repeat: int) -> None:
    """One forked child per function, from this fresh process; a JSON line each.

    This process has imported jax and bayescal (and built nothing on a device: no
    backend exists yet), so each child starts as a fresh process would after its
    imports: no compiled program, no traced function, no JAX backend. With a cache,
    each function gets its own directory ``tmp/<name>``: empty for ``cold``, as the
    cold child left it for ``warm``.
    """
    import jax  # noqa: F401
    from jax._src import xla_bridge

    import bayescal.classification  # noqa: F401
    import bayescal.regression  # noqa: F401

    assert not xla_bridge._backends, "a JAX backend exists before forking"
    for name in names:
        cache = None if mode == "none" else os.path.join(tmp, name.replace(" ", "_"))
        # cold: the first call only (the new N compiles what it compiles without cache)
        res = _forked(worker_function, name, cache, repeat, mode != "cold")
        print(json.dumps({"name": name, **res}), flush=True)


def run_functions(names: list[str], modes: tuple[str, ...], warm_repeat: int) -> dict:
    """{name: {mode: result}}: each (function, mode) in a fresh (forked) process."""
    results: dict = {n: {} for n in names}
    with tempfile.TemporaryDirectory(prefix="bench_cold_") as tmp:
        for mode in modes:
            t0 = time.perf_counter()
            repeat = warm_repeat if mode == "none" else 0
            args = ["functions", ",".join(names), "--mode", mode, "--repeat", str(repeat)]
            for r in _stream(*args, "--cache-dir", tmp):
                results[r["name"]][mode] = r
                if "error" in r:
                    print(f"  {r['name']} {MODE_TITLE[mode]} FAILED:\n{r['error']}")
                    continue
                a, b = r["first"], r["new_n"]
                print(
                    f"  {r['name']:38s} {MODE_TITLE[mode]:10s} first {a['s']:6.3f} s"
                    f" ({a['compiles']:3d} compiles, {a['cache_hits']:3d} cache hits)"
                    + (f"  new N {b['s']:6.3f} s ({b['compiles']} compiles)" if b else ""),
                    flush=True,
                )
            print(f"  [{MODE_TITLE[mode]}: {time.perf_counter() - t0:.0f} s]", flush=True)
    return results


# Agreement tolerances (bayescal in float32, x64 off; peers in float64).
TOLERANCES = {
    "pit": {"atol": 1e-5},
    # One PIT value on the other side of a level moves that level's fraction by 1/N.
    "curve_observed": {"atol": 1.01 / N0},
    "mace": {"atol": 2e-5},
    "area": {"atol": 2e-5},
    "sharpness": {"rtol": 1e-5},
    # float32 PIT values reorder against float64 ones by at most a few ranks.
    "iso_recal_apply": {"atol": 3.01 / N0},
    "sigma_factor": {"rtol": 1e-5},
    "sigma_apply": {"rtol": 1e-5},
    "crps": {"rtol": 1e-5},
    "ece": {"rtol": 1e-4},
    "reliability_observed": {"atol": 1e-6},
    "brier": {"rtol": 1e-5},
    "log_loss": {"rtol": 1e-5},
    "platt_apply": {"rtol": 1e-4, "atol": 1e-6},
    "isotonic_apply": {"atol": 1e-6},
}


def check_session(ours_path: str, peer_path: str) -> list[str]:
    """Assert the two sessions' numbers agree; returns the quantities checked."""
    ours, peer = np.load(ours_path), np.load(peer_path)
    for key, tol in TOLERANCES.items():
        a, b = ours[key], peer[key]
        if key == "reliability_observed":  # scikit-learn drops empty bins
            a = a[np.isfinite(a)]
        np.testing.assert_allclose(a, b, **tol, err_msg=key)
    return list(TOLERANCES)


def run_sessions(modes: tuple[str, ...]) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_cold_session_") as tmp:
        cache = os.path.join(tmp, "cache")
        ours_path, peer_path = os.path.join(tmp, "ours.npz"), os.path.join(tmp, "peer.npz")
        for mode in modes:
            args = ["session", "bayescal"]
            if mode == "none":
                args += ["--values", ours_path]
            else:
                args += ["--cache-dir", cache]
            out[mode] = r = _spawn(*args)
            print(
                f"  session bayescal {MODE_TITLE[mode]:10s}: import {r['import_s']:.2f} s, "
                + ", ".join(
                    f"{k} {r[k]['s']:.3f} s ({r[k]['compiles']} compiles)"
                    for k in ("first", "new_n", "again")
                ),
                flush=True,
            )
        if not peers_installed():
            print(f"  session peers: skipped ({PEERS_MISSING})", flush=True)
            out["peer"], out["checked"] = None, []
            return out
        out["peer"] = r = _spawn("session", "peer", "--values", peer_path)
        print(
            f"  session peers: import {r['import_s']:.2f} s, "
            f"first {r['first']['s']:.3f} s, "
            f"new N {r['new_n']['s']:.3f} s, again {r['again']['s']:.3f} s",
            flush=True,
        )
        out["checked"] = check_session(ours_path, peer_path)
    return out


#: Why the first session has no peer beside it, where its peers are missing (the
#: GPU machines have no uncertainty-toolbox: the session ran there and crashed).
PEERS_MISSING = "uncertainty-toolbox or scikit-learn is not installed: the bench extra has them"


def peers_installed() -> bool:
    """Whether the peer session's packages are importable."""
    return all(importlib.util.find_spec(m) for m in ("uncertainty_toolbox", "sklearn"))


def _versions() -> str:
    from importlib import metadata

    names = ("jax", "numpy", "scipy", "scikit-learn", "uncertainty-toolbox")
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    parts = [f"{n} {version(n)}" for n in names]
    return f"Python {platform.python_version()}, " + ", ".join(parts)


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f}"


def markdown(
    funcs: dict,
    sessions: dict,
    modes: tuple[str, ...],
    session_modes: tuple[str, ...],
    notes: list[str],
) -> str:
    """The section of docs/benchmarks.md, from the results of a run."""
    from bayescal._src.bucketing import bucket_size

    used = {r["cache"] for v in funcs.values() for m, r in v.items() if m != "none"}

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "## First call and new N (cold start)",
        "",
        f"Measured with `python benchmarks/bench_cold.py` (part of `make bench`) on "
        f"{date.today().isoformat()}, {platform.machine()} CPU with {os.cpu_count()} "
        f"cores shared with other jobs (load average {load:.1f} at the end), "
        f"{_versions()}, JAX on CPU with x64 off. Every number comes from a fresh "
        "process (import excluded unless said); inputs are numpy float64 arrays built "
        "before the clock starts; results are waited for with "
        f"`jax.block_until_ready`. N = {N0:,}; the new N is {N1:,}, in the same bucket "
        f"(`bucket_size` gives {bucket_size(N0):,} for both). *Compiles*: XLA "
        "compilations during the call (JAX's `backend_compile_duration` events, less "
        "persistent-cache hits). *No cache*: no compilation cache directory set; *cache "
        "cold*: an empty one; *cache warm*: a second fresh process on the directory "
        "the cold one filled (`bayescal.enable_compilation_cache(path)` where the "
        "package has it, else `jax_compilation_cache_dir` with "
        "`jax_persistent_cache_min_compile_time_secs = 0`; this run: "
        f"{', '.join(f'`{u}`' for u in sorted(used))}). Speed ratios are peer time "
        "/ bayescal time (above 1: bayescal is faster). After a change, rerun the "
        "script and replace this section with what it prints.",
        "",
    ]
    lines += [*notes, ""] if notes else []
    # --- the first session ---
    if sessions:
        peer = sessions["peer"]
        lines += [
            "### The first session",
            "",
            "14 calls in a fresh process at N = 10,000: `pit_normal`, `calibration_error`, "
            "`miscalibration_area` (100 levels), `calibration_curve`, `sharpness`, "
            "`fit_isotonic_recalibrator` + apply, `fit_sigma_scaling` + apply, "
            "`crps_normal`, `expected_calibration_error`, `reliability_curve`, "
            "`brier_score`, `log_loss`, `fit_platt` + apply, `fit_isotonic` + apply; then "
            "the same calls at N = 10,007 in the same process, then at 10,000 again. "
            "Peers: uncertainty-toolbox (MACE, grid area, proportion lists, sharpness), "
            "scikit-learn (`calibration_curve`, `brier_score_loss`, `log_loss`, "
            "`LogisticRegression` for Platt, `IsotonicRegression` for both isotonic "
            "maps), scipy (`norm.cdf` for the PIT) and numpy (CRPS, sigma scaling). "
            f"Checked equal: {', '.join(sessions['checked'])}."
            if peer
            else f"No peer session: {PEERS_MISSING}.",
            "",
            "| session | import (s) | first, N=1e4 (s) | compiles | import + first (s) "
            "| new N=10,007 (s) | compiles | again, N=1e4 (ms) | speed ratio, first "
            "| speed ratio, import + first |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        peer_total = peer["import_s"] + peer["first"]["s"] if peer else None
        for mode in session_modes:
            r = sessions[mode]
            total = r["import_s"] + r["first"]["s"]
            ratios = "- | -"
            if peer:
                ratio = peer["first"]["s"] / r["first"]["s"]
                ratios = f"{ratio:.3f}x | {peer_total / total:.3f}x"
            lines.append(
                f"| bayescal, {MODE_TITLE[mode]} | {r['import_s']:.2f} "
                f"| {r['first']['s']:.2f} | {r['first']['compiles']} | {total:.2f} "
                f"| {r['new_n']['s']:.2f} | {r['new_n']['compiles']} "
                f"| {_ms(r['again']['s'])} | {ratios} |"
            )
        if peer:
            lines.append(
                f"| uncertainty-toolbox + scikit-learn + scipy | {peer['import_s']:.2f} "
                f"| {peer['first']['s']:.2f} | - | {peer_total:.2f} "
                f"| {peer['new_n']['s']:.2f} | - | {_ms(peer['again']['s'])} | 1x | 1x |"
            )
        lines.append("")
    # --- per function ---
    order = sorted(funcs, key=lambda k: -funcs[k]["none"]["first"]["s"])
    head = (
        "| function | first (s) | compiles | compile (s) | new N (s) | compiles at new N "
        "| warm (ms) |"
    )
    if "cold" in modes:
        head += " first, cache cold (s) |"
    if "warm" in modes:
        head += " first, cache warm (s) | compiles, cache warm | new N, cache warm (s) |"
    lines += [
        "### Per function",
        "",
        "One fresh process per function and mode (forked, one per function, from a "
        "fresh process that imported jax and bayescal and has no JAX backend yet): "
        "(a) *first*: the first call at N = 10,000 after import and input building "
        "(the fitted calibrator or accumulator state a row needs is made before, "
        "untimed); (b) *new N*: then a call at N = 10,007; (c) *warm*: the median of up "
        f"to {WARM_REPEAT} more calls at N = 10,000 (at most {WARM_BUDGET_S:.0f} s "
        "of them). *compile (s)*: the seconds of the first call's compilations. "
        "`-> apply` rows call a calibrator fitted in setup; `.update` rows an "
        "accumulator's update on its initial state. Every call runs with its default "
        "options, the bootstrap and Monte Carlo functions with their default number of "
        "resamples, except the unbiased kernel calibration tests: `num_samples="
        f"{KERNEL_TEST_RESAMPLES}` (default 500). `numpyro.*` rows: a Normal linear "
        f"model, {S_DRAWS} posterior draws. Not measured: "
        + ", ".join(f"`{k}` ({v})" for k, v in SKIPPED.items())
        + ". Sorted by the first call without cache. *cache cold* and *cache warm*: each "
        "in a process of its own, on the function's own cache directory; the cold "
        "process calls at N = 10,000 only, so *new N, cache warm* compiles what "
        "N = 10,007 needs beyond N = 10,000's programs.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for name in order:
        r = funcs[name]["none"]
        cells = [
            f"`{name}`",
            f"{r['first']['s']:.3f}",
            str(r["first"]["compiles"]),
            f"{r['first']['compile_s']:.2f}",
            f"{r['new_n']['s']:.3f}",
            str(r["new_n"]["compiles"]),
            _ms(r["warm_s"]),
        ]
        if "cold" in modes:
            cells.append(f"{funcs[name]['cold']['first']['s']:.3f}")
        if "warm" in modes:
            w = funcs[name]["warm"]
            cells += [f"{w['first']['s']:.3f}", str(w["first"]["compiles"])]
            cells.append(f"{w['new_n']['s']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += summary(funcs, modes)
    return "\n".join(lines)


def summary(funcs: dict, modes: tuple[str, ...]) -> list[str]:
    """The summary lines: first-call median and max, counts over 0.3 s and 0.6 s."""
    out = []
    for mode in modes:
        firsts = [funcs[k][mode]["first"]["s"] for k in funcs]
        compiles = sum(funcs[k][mode]["first"]["compiles"] for k in funcs)
        text = (
            f"- {MODE_TITLE[mode]}, {len(firsts)} functions: first call median "
            f"{statistics.median(firsts):.3f} s, max {max(firsts):.3f} s; "
            f"{sum(f > 0.3 for f in firsts)} over 0.3 s, {sum(f > 0.6 for f in firsts)} "
            f"over 0.6 s; {compiles} XLA compilations in all first calls together"
        )
        if all(funcs[k][mode]["new_n"] for k in funcs):
            new_n = [k for k in funcs if funcs[k][mode]["new_n"]["compiles"] > 0]
            text += f"; {len(new_n)} compile something at the new N"
            rest = [k for k in funcs if k not in new_n]
            if mode == "none" and new_n and len(new_n) <= len(rest):
                text += f" ({', '.join(f'`{k}`' for k in new_n)})"
            elif mode == "none" and rest:
                text += f" (all but {', '.join(f'`{k}`' for k in rest)})"
        out.append(text + ".")
    return out


def main(quick: bool = False, markdown_path: str | None = None) -> list[dict]:
    """Run everything; print the markdown section; rows for benchmarks/run.py's table."""
    import bayescal  # noqa: F401  (the driver itself never compiles)

    t_start = time.perf_counter()
    public = public_functions()
    known = cases()
    missing = [n for n in public if n not in known and n not in SKIPPED]
    if missing:
        print(f"  WARNING: public functions with no cold-start case: {missing}", flush=True)
    names = [n for n in known if not quick or n in QUICK_FUNCTIONS]
    print(
        f"[cold start] {len(names)} functions x {len(MODES)} modes, fresh processes",
        flush=True,
    )
    funcs = run_functions(names, MODES, 3 if quick else WARM_REPEAT)
    failed = [k for k, v in funcs.items() if any("error" in r for r in v.values())]
    funcs = {k: v for k, v in funcs.items() if k not in failed}
    session_modes = ("none",) if quick else MODES
    sessions = run_sessions(session_modes)
    notes = [f"(`--quick` run: {len(names)} functions only.)"] if quick else []
    if failed:
        notes.append(f"FAILED (left out, see the log): {', '.join(failed)}.")
    if missing:
        notes.append(f"Public functions with no case in the script: {', '.join(missing)}.")
    text = markdown(funcs, sessions, MODES, session_modes, notes)
    print()
    print(text, flush=True)
    if markdown_path:
        pathlib.Path(markdown_path).write_text(text + "\n")
    print(f"\n[cold start] took {time.perf_counter() - t_start:.0f} s", flush=True)
    peer = sessions["peer"]
    rows = []
    for mode in session_modes if peer else ():  # rows compare with the peers
        r = sessions[mode]
        rows.append(
            {
                "benchmark": f"first session N=1e4, import incl., {MODE_TITLE[mode]}",
                "bayescal_ms": (r["import_s"] + r["first"]["s"]) * 1e3,
                "peer": "uncertainty-toolbox+sklearn+scipy",
                "peer_ms": (peer["import_s"] + peer["first"]["s"]) * 1e3,
                "speedup": (peer["import_s"] + peer["first"]["s"])
                / (r["import_s"] + r["first"]["s"]),
                "note": "",
            }
        )
    return rows


def fits_at(n: int) -> str:
    """(a)-(c) of every ``fit_*`` function at ``n`` (and ``n + 7``), no cache: a table."""
    import bayescal  # noqa: F401

    os.environ["BAYESCAL_BENCH_COLD_N"] = str(n)  # read by the worker processes
    names = [k for k in cases() if k.startswith("fit_") and " -> " not in k]
    funcs = run_functions(names, ("none",), WARM_REPEAT)
    lines = [
        f"First calls of the fits at N = {n:,} (fresh processes, no cache; new N = "
        f"{n + 7:,}, same bucket), {platform.machine()}, {date.today()}:",
        "",
        "| fit | first call (s) | compiles | compile (s) | new N (s) | warm (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in sorted(funcs.items(), key=lambda kv: -kv[1]["none"].get("first", {}).get("s", 0)):
        r = r["none"]
        if "error" in r:
            lines.append(f"| `{name}` | failed | | | | |")
            continue
        a, b = r["first"], r["new_n"]
        lines.append(
            f"| `{name}` | {a['s']:.3f} | {a['compiles']} | {a['compile_s']:.2f} | "
            f"{b['s']:.3f} | {_ms(r['warm_s'])} |"
        )
    return "\n".join(lines)


def _worker(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("function", "functions", "session"))
    p.add_argument("name", help="function name(s, comma-separated) or session side")
    p.add_argument("--cache-dir")
    p.add_argument("--mode", choices=MODES, default="none")
    p.add_argument("--repeat", type=int, default=WARM_REPEAT)
    p.add_argument("--values")
    a = p.parse_args(argv)
    if a.what == "function":
        res = worker_function(a.name, a.cache_dir, a.repeat, True)
    elif a.what == "functions":
        worker_functions(a.name.split(","), a.mode, a.cache_dir, a.repeat)
        return
    else:
        res = worker_session(a.name, a.cache_dir, a.values)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2:])
    else:
        sys.path.insert(0, str(ROOT))
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--quick", action="store_true", help="three functions")
        parser.add_argument("--markdown", help="also write the markdown section here")
        parser.add_argument(
            "--fits-at", type=int, metavar="N", help="only the fits' first calls at N"
        )
        args = parser.parse_args()
        if args.fits_at:
            print(fits_at(args.fits_at), flush=True)
        else:
            main(quick=args.quick, markdown_path=args.markdown)
