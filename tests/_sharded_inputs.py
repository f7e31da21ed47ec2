"""Public functions on inputs sharded over 8 simulated CPU devices: cases and harness.

Used by ``tests/test_sharded_inputs.py`` (suite ``pav``: the PAV-based functions of
issue 22, item 4), ``tests/test_sharded_public.py`` (suite ``public``: every other
public function of both branches and ``core``, and their non-default options, issue
19, item 1) and ``tests/test_sharded_workflows.py`` (suite ``workflows``: the NumPyro
and ArviZ adapters, ``cross_calibrate``, the accumulators, ``pit_ecdf_band`` and
calibrators saved after a sharded fit).

A case is ``(function, inputs)`` or ``(function, inputs, axes)``: ``axes`` names, per
input, the axis sharded over the mesh (``None``: the input is passed as it is; a dict
input, e.g. posterior samples, has that axis of every array sharded). The function
may be ``{"eager": f, "jit": g}`` when its ``jit`` form is not ``jax.jit(f)`` (a fit
under ``jit`` whose result is then saved); :data:`EAGER_ONLY` cases have no ``jit``
run; :data:`SAVED` cases write a calibrator that the tests load and apply.

``--xla_force_host_platform_device_count=8`` must be set before JAX initialises, so
the sharded calls run in a subprocess: this file run as a script,
``python _sharded_inputs.py OUT_DIR SUITE [name:mode ...]``. For every run (a case and
a mode, ``eager`` or ``jit``) the case's function gets its inputs sharded along the
observation axis (or its ``axes``), one more JAX operation is applied to every JAX
array of the result (a result laid out as ``{maximal device=0}`` raised ``TypeError:
Cannot convert GSPMDSharding ... into SdyArray`` there), and the leaves are saved to
``OUT_DIR/<case>-<mode>.npz`` (the message of a case that must raise, to
``<case>-<mode>.txt``). A line ``start <case> <mode>`` precedes each run, so an abort
names its run; :func:`run_suite` starts a fresh subprocess for the runs after one
that aborted or hung. The tests compare the files with the same functions on the
unsharded inputs in their own (one-device) process: :func:`check_run`.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODES = ("eager", "jit")

# N = 32,768 aborted every PAV-based function (issue 22, item 4; N = 24,576 did not),
# and the smooth reliability band under jit; the CORP band with 50 resamples aborted
# already at N = 2,000.
N = 32_768
SAMPLES = 20  # resamples of the bootstrap-style functions
EDGES = np.array([0.0, 0.1, 0.3, 0.5, 0.8, 0.95, 1.0], np.float32)  # explicit bin edges


# --------------------------------------------------------------------------- data
def _binary(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    return y, p


def _multiclass(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(3), size=n).astype(np.float32)
    u = rng.uniform(size=(n, 1))
    labels = (u < np.cumsum(probs, axis=1)).argmax(axis=1).astype(np.int32)
    return labels, probs


def _responses(n: int, seed: int = 2):
    rng = np.random.default_rng(seed)
    return (np.linspace(0.0, 1.0, n) + 0.3 * rng.normal(size=n)).astype(np.float32)


@functools.cache
def _regression(n: int = N, seed: int = 3):
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    y = rng.normal(size=n).astype(np.float32)
    loc = (y + 0.8 * rng.normal(size=n)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, n).astype(np.float32)
    levels = np.array([0.1, 0.5, 0.9], np.float32)
    return dict(
        y=y,
        loc=loc,
        scale=scale,
        draws=(loc + scale * rng.normal(size=(40, n))).T.astype(np.float32),  # [N, S]
        pit=rng.uniform(size=n).astype(np.float32),
        levels=levels,
        quantiles=(loc + scale * norm.ppf(levels)[:, None]).T.astype(np.float32),  # [N, L]
        lower=(loc - scale).astype(np.float32),
        upper=(loc + scale).astype(np.float32),
        groups=rng.integers(0, 4, n).astype(np.int32),
    )


def _gather_inputs(n: int = 1024):
    rng = np.random.default_rng(4)
    return (
        rng.normal(size=(n, 3)).astype(np.float32),
        rng.integers(-5, 5, n).astype(np.int32),
        rng.uniform(size=n) < 0.5,
        rng.normal(size=(n, 2)).astype(np.float16),
    )


def _with_gather_limit(fn, limit):
    """``fn`` run with ``sorting.GATHER_MAX_SIZE = limit`` (its size guard, tested small)."""

    def run(*args):
        from bayescal._src import sorting

        old, sorting.GATHER_MAX_SIZE = sorting.GATHER_MAX_SIZE, limit
        try:
            return fn(*args)
        finally:
            sorting.GATHER_MAX_SIZE = old

    return run


# --------------------------------------------------------------------------- cases
#: Cases that must raise on the mesh: ``{name: regex of the message}``.
RAISES = {
    "fit_isotonic_beyond_gather_limit": r"needs the whole data on every device.*"
    r"jax\.device_put\(x, jax\.devices\(\)\[0\]\)",
}

#: Relative tolerances (of the largest magnitude of each result array) other than
#: 1e-6, with the reason. Beyond those, results equal the unsharded ones: integers
#: exactly, floats to 1e-6 of their array's largest magnitude.
TOLERANCE = {
    # The Newton fits: their float32 gradient sums add in another order on 8 shards,
    # and a small parameter moves by ~1e-7 absolute, more relative to itself: beta
    # calibration's intercept c ~ 0.025 by 3.8e-6 of itself (c ~ -0.012 of one class
    # one-vs-rest: 1.1e-5), 1e-7 of the slopes a, b ~ 1; one-vs-rest Platt's
    # intercept ~ 8e-4 by 3.7e-6 on jax 0.4.38
    "fit_beta": 1e-5,
    "fit_one_vs_rest_beta": 2e-5,
    "fit_one_vs_rest_platt": 1e-5,
    # Weighted per-bin means of ~0.5 differ by an ulp (3e-8) between the shardings'
    # summation orders; the max-norm ECE, one gap of ~1e-2 between two such means,
    # inherits it: 2.7e-6 of itself (docs/scale-out.md, "Accuracy at any N")
    "expected_calibration_error_max_edges_weighted": 1e-5,
    # The scaling fits: the one-device reference runs the float64 host twin, the mesh
    # the float32 kernel (a small intercept ~0.017 moves by 2e-7: 4e-6 of the largest)
    "fit_matrix_scaling": 1e-5,
    "fit_dirichlet": 1e-5,
    # BBQ's model weights are exponentials of BDeu scores (sums of lgamma of counts up
    # to N = 32,768, ~1e5 in float32 on the mesh): 3.7e-6 of the largest weight
    "fit_bbq": 1e-5,
}


def pav_cases():
    """``{name: thunk}``; the thunk gives ``(function, inputs)`` (inputs positional)."""
    import jax

    from bayescal import classification as C
    from bayescal import core
    from bayescal._src.sorting import gather_all

    key = jax.random.key(0)
    return {
        "brier_decomposition": lambda: (C.brier_decomposition, _binary(N)),
        "corp_curve": lambda: (C.corp_curve, _binary(N)),
        "corp_curve_key": lambda: (
            lambda y, p: C.corp_curve(y, p, key=key, num_samples=2),
            _binary(N),
        ),
        "corp_curve_key_small": lambda: (
            lambda y, p: C.corp_curve(y, p, key=key, num_samples=50),
            _binary(2_000),
        ),
        "fit_isotonic": lambda: (C.fit_isotonic, _binary(N)),
        "fit_one_vs_rest_isotonic": lambda: (
            lambda y, q: C.fit_one_vs_rest(y, q, method="isotonic"),
            _multiclass(N),
        ),
        "isotonic_regression": lambda: (core.isotonic_regression, (_responses(N),)),
        "isotonic_regression_weighted_decreasing": lambda: (
            lambda y, w: core.isotonic_regression(y, weights=w, increasing=False),
            (_responses(N), _regression()["scale"]),
        ),
        # sorting.gather_all packs arrays of several dtypes into one gather, bit for bit
        "gather_all": lambda: (lambda *a: gather_all(a, "test"), _gather_inputs()),
        # another N than fit_isotonic's: no compiled program to reuse (it would not trace)
        "fit_isotonic_beyond_gather_limit": lambda: (
            _with_gather_limit(C.fit_isotonic, 1000),
            _binary(4096),
        ),
    }


def public_cases():
    """The other public functions (``{name: thunk}`` as :func:`pav_cases`)."""
    import jax
    import jax.numpy as jnp

    from bayescal import classification as C
    from bayescal import core
    from bayescal import regression as R

    key = jax.random.key(0)
    S = SAMPLES
    yp = lambda: _binary(N)  # noqa: E731
    mc = lambda: _multiclass(N)  # noqa: E731
    r = _regression

    def reg(*names):
        return tuple(r()[k] for k in names)

    def fitted(fit, data):
        """A calibrator fitted on the unsharded data, applied to the sharded input."""

        def make():
            cal = fit(*data())
            return (lambda x: cal(x)), (data()[-1],)

        return make

    def logits():
        labels, probs = _multiclass(N)
        return labels, np.log(probs)

    def sigma(family="normal", **kw):
        return R.fit_sigma_scaling(*reg("y", "loc", "scale"), family=family, **kw)

    levels = r()["levels"]
    folds = np.arange(N) % 4  # the fold ids of fit_cross_venn_abers
    return {
        # classification: metrics
        "reliability_curve": lambda: (C.reliability_curve, yp()),
        "reliability_curve_quantile": lambda: (
            lambda y, p: C.reliability_curve(y, p, strategy="quantile"),
            yp(),
        ),
        "acceptance_intervals": lambda: (
            lambda y, p: C.acceptance_intervals(C.reliability_curve(y, p)),
            yp(),
        ),
        "bootstrap_reliability_curve": lambda: (
            lambda y, p: C.bootstrap_reliability_curve(key, y, p, num_samples=S),
            yp(),
        ),
        "expected_calibration_error": lambda: (C.expected_calibration_error, yp()),
        "expected_calibration_error_debiased_key": lambda: (
            lambda y, p: C.expected_calibration_error(y, p, debias=True, key=key, num_samples=S),
            yp(),
        ),
        "brier_score": lambda: (C.brier_score, yp()),
        "log_loss": lambda: (C.log_loss, yp()),
        "brier_decomposition_binned": lambda: (C.brier_decomposition_binned, yp()),
        "prediction_sharpness": lambda: (C.prediction_sharpness, yp()[1:]),
        "top_label_calibration_error": lambda: (C.top_label_calibration_error, mc()),
        "marginal_calibration_error": lambda: (C.marginal_calibration_error, mc()),
        "smooth_calibration_error": lambda: (C.smooth_calibration_error, yp()),
        "smooth_reliability_curve": lambda: (C.smooth_reliability_curve, yp()),
        "smooth_reliability_band": lambda: (
            lambda y, p: C.smooth_reliability_band(key, y, p, num_samples=S),
            yp(),
        ),
        # classification: calibrators, fitted on sharded data and applied to it
        "fit_platt": lambda: (C.fit_platt, yp()),
        "fit_histogram_binning": lambda: (C.fit_histogram_binning, yp()),
        "fit_beta": lambda: (C.fit_beta, yp()),
        "fit_temperature": lambda: (C.fit_temperature, logits()),
        "fit_one_vs_rest_platt": lambda: (
            lambda y, q: C.fit_one_vs_rest(y, q, method="platt"),
            mc(),
        ),
        "fit_one_vs_rest_histogram": lambda: (
            lambda y, q: C.fit_one_vs_rest(y, q, method="histogram"),
            mc(),
        ),
        "fit_one_vs_rest_beta": lambda: (
            lambda y, q: C.fit_one_vs_rest(y, q, method="beta"),
            mc(),
        ),
        # the calibrators added since (issue 20): fitted on sharded data, applied to it
        "fit_bbq": lambda: (C.fit_bbq, yp()),
        "fit_scaling_binning": lambda: (C.fit_scaling_binning, yp()),
        "fit_spline": lambda: (
            lambda y, p: C.fit_spline(y, p, penalties=(0.1, 10.0), folds=2),
            yp(),
        ),
        "fit_venn_abers": lambda: (C.fit_venn_abers, yp()),
        # folds fix the number of folds: concrete, closed over under jit (as documented)
        "fit_cross_venn_abers": lambda: (
            {
                "eager": lambda y, p: C.fit_cross_venn_abers(y, p, folds),
                "jit": jax.jit(lambda y, p: C.fit_cross_venn_abers(y, p, folds)),
            },
            yp(),
        ),
        "fit_centered_isotonic": lambda: (C.fit_centered_isotonic, yp()),
        "fit_vector_scaling": lambda: (C.fit_vector_scaling, logits()),
        "fit_matrix_scaling": lambda: (
            lambda y, z: C.fit_matrix_scaling(y, z, reg_lambda=0.01, reg_mu=0.01),
            logits(),
        ),
        "fit_dirichlet": lambda: (
            lambda y, q: C.fit_dirichlet(y, q, reg_lambda=0.01, reg_mu=0.01),
            mc(),
        ),
        "platt_calibrator": fitted(C.fit_platt, yp),
        "isotonic_calibrator": fitted(C.fit_isotonic, yp),
        "histogram_calibrator": fitted(C.fit_histogram_binning, yp),
        "beta_calibrator": fitted(C.fit_beta, yp),
        "temperature_calibrator": fitted(C.fit_temperature, logits),
        "one_vs_rest_calibrator": fitted(
            lambda y, q: C.fit_one_vs_rest(y, q, method="isotonic"), mc
        ),
        # regression
        "pit_normal": lambda: (R.pit_normal, reg("y", "loc", "scale")),
        "pit_draws": lambda: (lambda y, d: R.pit_draws(y, d.T), reg("y", "draws")),
        "pit_cdf": lambda: (
            lambda y, m, s: R.pit_cdf(y, lambda t: jax.scipy.stats.norm.cdf(t, m, s)),
            reg("y", "loc", "scale"),
        ),
        "pit_quantiles": lambda: (
            lambda y, q: R.pit_quantiles(y, q.T, levels),
            reg("y", "quantiles"),
        ),
        "calibration_curve": lambda: (R.calibration_curve, reg("pit")),
        "calibration_error": lambda: (R.calibration_error, reg("pit")),
        "miscalibration_area": lambda: (R.miscalibration_area, reg("pit")),
        "sharpness": lambda: (R.sharpness, reg("scale")),
        "crps_normal": lambda: (R.crps_normal, reg("y", "loc", "scale")),
        "crps_draws": lambda: (lambda y, d: R.crps_draws(y, d.T), reg("y", "draws")),
        "nll_normal": lambda: (R.nll_normal, reg("y", "loc", "scale")),
        "kernel_calibration_test_regression_linear": lambda: (
            lambda y, m, s: R.kernel_calibration_test(y, m, s),
            reg("y", "loc", "scale"),
        ),
        "interval_score": lambda: (
            lambda y, lo, hi: R.interval_score(y, lo, hi, alpha=0.1),
            reg("y", "lower", "upper"),
        ),
        "pinball_loss": lambda: (
            lambda y, q: R.pinball_loss(y, q.T, levels),
            reg("y", "quantiles"),
        ),
        "fit_isotonic_recalibrator": lambda: (R.fit_isotonic_recalibrator, reg("pit")),
        "fit_sigma_scaling": lambda: (R.fit_sigma_scaling, reg("y", "loc", "scale")),
        "fit_sigma_scaling_student_t": lambda: (
            lambda y, m, s: R.fit_sigma_scaling(y, m, s, family="student_t", df=5.0),
            reg("y", "loc", "scale"),
        ),
        "recalibrated_quantiles_sigma": lambda: (
            (lambda cal: lambda m, s: R.recalibrated_quantiles(cal, levels, loc=m, scale=s))(
                sigma()
            ),
            reg("loc", "scale"),
        ),
        "recalibrated_quantiles_student_t": lambda: (
            (lambda cal: lambda m, s: R.recalibrated_quantiles(cal, levels, loc=m, scale=s))(
                sigma("student_t", df=5.0)
            ),
            reg("loc", "scale"),
        ),
        "recalibrated_interval_isotonic": lambda: (
            (lambda cal: lambda m, s: R.recalibrated_interval(cal, 0.9, loc=m, scale=s))(
                R.fit_isotonic_recalibrator(r()["pit"])
            ),
            reg("loc", "scale"),
        ),
        "isotonic_level_calibrator": fitted(R.fit_isotonic_recalibrator, lambda: reg("pit")),
        "bootstrap_calibration_curve": lambda: (
            lambda u: R.bootstrap_calibration_curve(key, u, num_samples=S),
            reg("pit"),
        ),
        "bootstrap_calibration_error": lambda: (
            lambda u: R.bootstrap_calibration_error(key, u, num_samples=S),
            reg("pit"),
        ),
        "pit_null_test": lambda: (
            lambda u: R.pit_null_test(key, R.calibration_error, u, num_samples=S),
            reg("pit"),
        ),
        "calibration_error_test": lambda: (
            lambda u: R.calibration_error_test(key, u, num_samples=S),
            reg("pit"),
        ),
        "miscalibration_area_test": lambda: (
            lambda u: R.miscalibration_area_test(key, u, num_samples=S),
            reg("pit"),
        ),
        "expected_normalized_calibration_error": lambda: (
            R.expected_normalized_calibration_error,
            reg("y", "loc", "scale"),
        ),
        "spread_skill_curve": lambda: (R.spread_skill_curve, reg("y", "loc", "scale")),
        "group_calibration_curve": lambda: (
            lambda u, g: R.group_calibration_curve(u, g, num_groups=4),
            reg("pit", "groups"),
        ),
        "group_calibration_error": lambda: (
            lambda u, g: R.group_calibration_error(u, g, num_groups=4),
            reg("pit", "groups"),
        ),
        # 24 groups drawn, not the default 10 x 10 x 10: the same code on the mesh
        # (draws, gathers, curves), 10.8 -> 1-3 s a mode
        "adversarial_group_calibration": lambda: (
            lambda y, m, s: R.adversarial_group_calibration(
                key, y, m, s, num_group_sizes=4, num_trials=2, num_group_draws=3
            ),
            reg("y", "loc", "scale"),
        ),
        "fit_conformal": lambda: (R.fit_conformal, reg("y", "loc", "scale")),
        "fit_conformalized_quantile": lambda: (
            R.fit_conformalized_quantile,
            reg("y", "lower", "upper"),
        ),
        "conformal_calibrator": lambda: (
            (lambda cal: lambda m, s: cal(m, s))(R.fit_conformal(*reg("y", "loc", "scale"))),
            reg("loc", "scale"),
        ),
        "conformalized_quantile_calibrator": lambda: (
            (lambda cal: lambda lo, hi: cal(lo, hi))(
                R.fit_conformalized_quantile(*reg("y", "lower", "upper"))
            ),
            reg("lower", "upper"),
        ),
        # non-default options of the functions above (issue 19, item 1): each at least once
        "reliability_curve_edges": lambda: (
            lambda y, p: C.reliability_curve(y, p, bins=EDGES),
            yp(),
        ),
        "expected_calibration_error_l2_quantile": lambda: (
            lambda y, p: C.expected_calibration_error(y, p, norm="l2", strategy="quantile"),
            yp(),
        ),
        "expected_calibration_error_max_edges_weighted": lambda: (
            lambda y, p, w: C.expected_calibration_error(
                y, p, bins=EDGES, norm="max", weights=w
            ),
            (*yp(), r()["scale"]),
        ),
        "expected_calibration_error_debiased_l2": lambda: (
            lambda y, p: C.expected_calibration_error(y, p, debias=True, norm="l2"),
            yp(),
        ),
        "expected_calibration_error_debiased_normal": lambda: (
            lambda y, p: C.expected_calibration_error(
                y, p, debias=True, method="normal", key=key, num_samples=S
            ),
            yp(),
        ),
        "top_label_calibration_error_l2_quantile": lambda: (
            lambda y, q: C.top_label_calibration_error(y, q, norm="l2", strategy="quantile"),
            mc(),
        ),
        "marginal_calibration_error_debiased_l2": lambda: (
            lambda y, q: C.marginal_calibration_error(y, q, debias=True, norm="l2"),
            mc(),
        ),
        "bootstrap_reliability_curve_bayesian": lambda: (
            lambda y, p: C.bootstrap_reliability_curve(
                key, y, p, num_samples=S, method="bayesian", strategy="quantile"
            ),
            yp(),
        ),
        "brier_score_weighted_none": lambda: (
            lambda y, p, w: C.brier_score(y, p, weights=w, reduction="none"),
            (*yp(), r()["scale"]),
        ),
        "log_loss_weighted_sum": lambda: (
            lambda y, p, w: C.log_loss(y, p, weights=w, reduction="sum"),
            (*yp(), r()["scale"]),
        ),
        "fit_histogram_binning_quantile": lambda: (
            lambda y, p: C.fit_histogram_binning(y, p, bins=20, strategy="quantile"),
            yp(),
        ),
        "calibration_curve_interval": lambda: (
            lambda u: R.calibration_curve(u, num_levels=20, kind="interval"),
            reg("pit"),
        ),
        "calibration_error_l2_interval": lambda: (
            lambda u: R.calibration_error(u, norm="l2", kind="interval"),
            reg("pit"),
        ),
        "bootstrap_calibration_curve_bayesian_interval": lambda: (
            lambda u: R.bootstrap_calibration_curve(
                key, u, num_samples=S, method="bayesian", kind="interval"
            ),
            reg("pit"),
        ),
        "crps_normal_weighted_none": lambda: (
            lambda y, m, s, w: R.crps_normal(y, m, s, weights=w, reduction="none"),
            reg("y", "loc", "scale", "scale"),
        ),
        "crps_draws_weighted": lambda: (
            lambda y, d, w: R.crps_draws(y, d.T, weights=w),
            reg("y", "draws", "scale"),
        ),
        "pinball_loss_none": lambda: (
            lambda y, q: R.pinball_loss(y, q.T, levels, reduction="none"),
            reg("y", "quantiles"),
        ),
        "interval_score_weighted_sum": lambda: (
            lambda y, lo, hi, w: R.interval_score(
                y, lo, hi, alpha=0.1, weights=w, reduction="sum"
            ),
            reg("y", "lower", "upper", "scale"),
        ),
        # core
        "curve_error": lambda: (lambda u: core.curve_error(R.calibration_curve(u)), reg("pit")),
        "curve_area": lambda: (lambda u: core.curve_area(R.calibration_curve(u)), reg("pit")),
        "bootstrap": lambda: (
            lambda y, p: core.bootstrap(key, C.brier_score, y, p, num_samples=S),
            yp(),
        ),
        "null_pvalue": lambda: (
            lambda u: core.null_pvalue(
                key,
                R.calibration_error,
                R.calibration_error(u),
                lambda k: jax.random.uniform(k, u.shape, u.dtype) + jnp.zeros_like(u),
                num_samples=S,
            ),
            reg("pit"),
        ),
    }


# The adapters and the stateful / host-side workflows (suite ``workflows``).
NA = 8_192  # observations
SA = 40  # posterior (and predictive) draws: a multiple of 8, sharded over the draws too


def _normal_model(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    s = numpyro.sample("s", dist.LogNormal(0.0, 0.3))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Normal(m + x, s), obs=y)


def _logistic_model(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Bernoulli(logits=a + b * x), obs=y)


def _poisson_model(x, y=None):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Poisson(jnp.exp(a + b * x)), obs=y)


@functools.cache
def _posterior(n: int = NA, seed: int = 5):
    """Draws of a normal and a logistic model's latents, and data for them (numpy)."""
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    f32 = np.float32
    x = rng.normal(size=n).astype(f32)
    normal = {"m": rng.normal(0.0, 0.1, SA).astype(f32), "s": rng.uniform(0.8, 1.2, SA).astype(f32)}
    loc = normal["m"][:, None] + x
    out = dict(
        x=x,
        y=(x + rng.normal(size=n)).astype(f32),
        normal=normal,
        logistic={"a": rng.normal(0.0, 0.1, SA).astype(f32), "b": rng.normal(1.0, 0.1, SA).astype(f32)},
        draws=(loc + normal["s"][:, None] * rng.normal(size=(SA, n))).astype(f32),  # [S, N]
    )
    out["loglik"] = norm.logpdf(out["y"], loc, normal["s"][:, None]).astype(f32)
    rate = np.exp(out["logistic"]["a"][:, None] + out["logistic"]["b"][:, None] * x)
    out["counts"] = rng.poisson(np.exp(x)).astype(f32)
    out["count_draws"] = rng.poisson(rate).astype(f32)  # [S, N]
    return out


def _quiet(fn):
    """``fn`` without its warnings (PSIS-LOO's Pareto k warning with only SA draws)."""

    def run(*args):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)

    return run


def _arviz(y, draws, loglik=None):
    """ArviZ data (InferenceData on arviz 0.x, DataTree on 1.x): 4 chains of SA / 4 draws."""
    import _arviz_compat as azc

    chains = lambda a: a.reshape(4, SA // 4, -1)  # noqa: E731
    groups = {"posterior_predictive": {"y": chains(draws)}, "observed_data": {"y": y}}
    if loglik is not None:
        groups["log_likelihood"] = {"y": chains(loglik)}
    return azc.from_dict(groups)


#: Cases not run under ``jit``: their functions take non-array arguments (ArviZ data,
#: a Python training callback) or give numpy results (PSIS runs in ArviZ, on the host).
EAGER_ONLY = {
    "arviz_pit",
    "arviz_pit_key",
    "arviz_loo_pit",
    "numpyro_loo_pit_obs",
    "numpyro_loo_pit_draws",
    "numpyro_loo_pit_counting_obs",
    "numpyro_loo_pit_counting_draws",
    "cross_calibrate_isotonic",
    "cross_calibrate_platt_pooled",
}
#: Cases whose results must equal the one-device ones bit for bit (rtol 0).
EXACT = {"pit_ecdf_band", "pit_ecdf_band_batched"}
#: Cases that save their calibrator (fitted on sharded data) to :func:`saved_path`:
#: ``{name: predict(calibrator, *inputs)}``, the prediction compared with the one of
#: the unsharded fit after loading the file in the tests' one-device process.
SAVED = {}
SAVE_DIR: str | None = None  # set in the 8-device process


def workflow_cases():
    """The adapters, ``cross_calibrate``, the accumulators, the band, save / load."""
    import jax

    from bayescal import arviz as A
    from bayescal import classification as C
    from bayescal import numpyro as NP
    from bayescal import regression as R

    key = jax.random.key(0)
    po = _posterior
    yp = lambda: _binary(N)  # noqa: E731
    r = _regression
    levels = r()["levels"]

    def numpyro_pair(name, fn, data, obs_axes, draws_axes):
        """The case sharded over the observation axis and, separately, the draws."""
        return {
            f"{name}_obs": lambda: (fn, data(), obs_axes),
            f"{name}_draws": lambda: (fn, data(), draws_axes),
        }

    def saved(name, fit, predict, data):
        """``fit`` on the sharded data (eagerly / under jit), its prediction; the fit
        saved with ``save_calibrator``."""
        SAVED[name] = predict

        def run(mode):
            def go(*inputs):
                cal = jax.jit(fit)(*inputs) if mode == "jit" else fit(*inputs)
                path = saved_path(name, mode)
                if path is not None:
                    C.save_calibrator(cal, path)
                pred = jax.jit(predict) if mode == "jit" else predict
                return pred(cal, *inputs)

            return go

        return {name: lambda: ({m: run(m) for m in MODES}, data())}

    def logits():
        labels, probs = _multiclass(N)
        return labels, np.log(probs)

    def cross(method, **kw):
        def fit_predict(X_train, y_train, X_eval):  # a one-feature least-squares score
            w = jax.numpy.mean(X_train[:, 0] * (2.0 * y_train - 1.0))
            return jax.nn.sigmoid(0.5 * w * X_eval[:, 0])  # no probability at 0 or 1 (Platt)

        def run(X, y):
            res = C.cross_calibrate(key, fit_predict, X, y, method=method, **kw)
            return res.fold, res.oof_scores, res.predict_proba(X)

        def data():
            y, p = yp()
            return np.log(p / (1 - p))[:, None], y

        return lambda: (run, data())

    def accumulate(acc, *data):
        """Two halves updated separately (each sharded), merged, finalized."""
        h = N // 2
        a = acc.update(acc.init(), *[d[:h] for d in data])
        b = acc.update(acc.init(), *[d[h:] for d in data])
        return acc.finalize(acc.merge(a, b))

    cases = {
        # bayescal.numpyro: draws [S, N], the observation axis 1
        **numpyro_pair(
            "numpyro_pit",
            lambda y, d: NP.pit(y, {"obs": d}),
            lambda: (po()["y"], po()["draws"]),
            (0, 1),
            (None, 0),
        ),
        **numpyro_pair(
            "numpyro_rao_blackwell_pit",
            lambda smp, y, x: NP.rao_blackwell_pit(_normal_model, smp, y, x),
            lambda: (po()["normal"], po()["y"], po()["x"]),
            (None, 0, 0),
            (0, None, None),
        ),
        **numpyro_pair(  # discrete: the randomized PIT
            "numpyro_pit_key",
            lambda y, d: NP.pit(y, {"obs": d}, key=key),
            lambda: (po()["counts"], po()["count_draws"]),
            (0, 1),
            (None, 0),
        ),
        # (over the observations only: the Poisson CDF is slow to compile, and the
        # draws axis is covered by numpyro_rao_blackwell_pit_draws)
        "numpyro_rao_blackwell_pit_key_obs": lambda: (
            lambda smp, y, x: NP.rao_blackwell_pit(_poisson_model, smp, y, x, key=key),
            (po()["logistic"], po()["counts"], po()["x"]),
            (None, 0, 0),
        ),
        **numpyro_pair(  # the counting form, from predictive draws
            "numpyro_loo_pit_counting",
            _quiet(
                lambda smp, y, x, d: NP.loo_pit(
                    _normal_model, smp, y, x, rao_blackwell=False, predictive={"obs": d}
                )
            ),
            lambda: (po()["normal"], po()["y"], po()["x"], po()["draws"]),
            (None, 0, 0, 1),
            (0, None, None, 0),
        ),
        **numpyro_pair(
            "numpyro_predictive_moments",
            lambda smp, x: tuple(NP.predictive_moments(_normal_model, smp, x)),
            lambda: (po()["normal"], po()["x"]),
            (None, 0),
            (0, None),
        ),
        **numpyro_pair(
            "numpyro_predictive_probs",
            lambda smp, x: NP.predictive_probs(_logistic_model, smp, x),
            lambda: (po()["logistic"], po()["x"]),
            (None, 0),
            (0, None),
        ),
        **numpyro_pair(
            "numpyro_loo_pit",
            _quiet(lambda smp, y, x: NP.loo_pit(_normal_model, smp, y, x)),
            lambda: (po()["normal"], po()["y"], po()["x"]),
            (None, 0, 0),
            (0, None, None),
        ),
        # bayescal.arviz: numpy data; the functions' own arrays on the default device
        "arviz_pit": lambda: (
            lambda y, d: A.pit(_arviz(y, d), flat=True),
            (po()["y"], po()["draws"]),
            (None, None),
        ),
        "arviz_pit_key": lambda: (
            lambda y, d: A.pit(_arviz(np.round(y), np.round(d)), key=key, flat=True),
            (po()["y"], po()["draws"]),
            (None, None),
        ),
        "arviz_loo_pit": lambda: (
            _quiet(lambda y, d, ll: tuple(A.loo_pit(_arviz(y, d, ll), flat=True))),
            (po()["y"], po()["draws"], po()["loglik"]),
            (None, None, None),
        ),
        # classification.cross_calibrate: sharded features and labels
        "cross_calibrate_isotonic": cross("isotonic"),
        "cross_calibrate_platt_pooled": cross("platt", ensemble="pooled"),
        # the streaming accumulators: sharded halves, updated, merged
        "reliability_accumulator": lambda: (
            lambda y, p: accumulate(C.reliability_accumulator(), y, p),
            yp(),
        ),
        "reliability_accumulator_weighted": lambda: (
            lambda y, p, w: accumulate(C.reliability_accumulator(10, weighted=True), y, p, w),
            (*yp(), r()["scale"]),
        ),
        "calibration_accumulator": lambda: (
            lambda u: accumulate(R.calibration_accumulator(), u),
            (r()["pit"],),
        ),
        "calibration_accumulator_interval": lambda: (
            lambda u: accumulate(R.calibration_accumulator(20, kind="interval"), u),
            (r()["pit"],),
        ),
        # the band: no array input; run in the 8-device process
        "pit_ecdf_band": lambda: (lambda: R.pit_ecdf_band(key, 1000, num_samples=200), ()),
        "pit_ecdf_band_batched": lambda: (
            lambda: R.pit_ecdf_band(key, 5000, num_points=50, num_samples=100, batch_size=32),
            (),
        ),
    }
    cal = lambda c, *inputs: c(inputs[-1])  # noqa: E731
    for args in [
        ("save_platt", C.fit_platt, cal, yp),
        ("save_isotonic", C.fit_isotonic, cal, yp),
        ("save_histogram", C.fit_histogram_binning, cal, yp),
        ("save_temperature", C.fit_temperature, cal, logits),
        (
            "save_one_vs_rest_histogram",
            lambda y, q: C.fit_one_vs_rest(y, q, method="histogram"),
            cal,
            lambda: _multiclass(N),
        ),
        ("save_isotonic_recalibrator", R.fit_isotonic_recalibrator, cal, lambda: (r()["pit"],)),
        (
            "save_sigma_scaling",
            R.fit_sigma_scaling,
            lambda c, y, m, s: R.recalibrated_quantiles(c, levels, loc=m, scale=s),
            lambda: tuple(r()[k] for k in ("y", "loc", "scale")),
        ),
        (
            "save_conformal",
            R.fit_conformal,
            lambda c, y, m, s: c(m, s),
            lambda: tuple(r()[k] for k in ("y", "loc", "scale")),
        ),
    ]:
        cases.update(saved(*args))
    return cases


SUITES = {"pav": pav_cases, "public": public_cases, "workflows": workflow_cases}


@functools.cache
def case(suite: str, name: str):
    """``(function, inputs)`` of a case (built once per process)."""
    return SUITES[suite]()[name]()


def names(suite: str) -> list[str]:
    return list(SUITES[suite]())


def run_names(suite: str) -> list[tuple[str, str]]:
    """Every ``(case, mode)`` of ``suite``: both modes but for :data:`EAGER_ONLY` cases."""
    return [
        (name, mode)
        for name in names(suite)
        for mode in MODES
        if mode == "eager" or name not in EAGER_ONLY
    ]


def split_case(made):
    """``(function, inputs, axes)`` of a built case: the axis of every input sharded
    over the mesh (``None``: passed as it is), the first (observation) axis unless the
    case gives its own third element."""
    fn, inputs, *axes = made
    return fn, inputs, (tuple(axes[0]) if axes else (0,) * len(inputs))


def saved_path(name: str, mode: str) -> str | None:
    """Where a :data:`SAVED` case writes its calibrator in the 8-device process (None in
    the tests' own process: nothing is saved there)."""
    return None if SAVE_DIR is None else os.path.join(SAVE_DIR, f"{name}-{mode}.npz.cal")


#: Cases that draw multinomial cell counts (on a mesh with jax 0.4.x, which has no
#: ``jax.random.multinomial``, as conditional binomials: ``bands.cell_draws``).
MULTINOMIAL = {"bootstrap_calibration_curve", "bootstrap_calibration_error", "calibration_error_test"}
#: Cases whose random counts are drawn on the host on one device, in XLA on a mesh
#: (``bands.cell_draws``: multinomial, Gamma (Bayesian bootstraps), hypergeometric and
#: resample counts; the binomial draws of ``pit_ecdf_band``).
HOST_DRAWS = MULTINOMIAL | {
    "adversarial_group_calibration",
    "bootstrap_reliability_curve",
    "bootstrap_reliability_curve_bayesian",
    "bootstrap_calibration_curve_bayesian_interval",
    "smooth_reliability_band",
    "pit_ecdf_band",
    "pit_ecdf_band_batched",
}


def explicit_gathers() -> bool:
    """Whether this JAX tells a traced array's mesh (``sorting.gather_all`` acts)."""
    import jax

    return hasattr(jax, "typeof")


def leaves(out):
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]


# --------------------------------------------------------------------- subprocess
def _main(out_dir: str, suite: str, runs: list[str]) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import bayescal

    if os.environ.get("BAYESCAL_CACHE_DIR"):  # the tests' shared cache (tests/conftest.py)
        bayescal.enable_compilation_cache(os.environ["BAYESCAL_CACHE_DIR"], concurrent=True)
    assert jax.device_count() == 8, jax.device_count()
    mesh = Mesh(np.array(jax.devices()), ("d",))

    def put(a, axis):  # axis ``axis`` of every array of ``a`` over the mesh
        if axis is None:
            return a

        def one(x):
            spec = [None] * x.ndim
            spec[axis] = "d"
            return jax.device_put(x, NamedSharding(mesh, P(*spec)))

        return jax.tree_util.tree_map(one, a)

    global SAVE_DIR
    SAVE_DIR = out_dir
    todo = [r.split(":") for r in runs] or list(run_names(suite))
    for name, mode in todo:
        print("start", name, mode, flush=True)
        t = time.perf_counter()
        fn, inputs, axes = split_case(case(suite, name))
        run = fn[mode] if isinstance(fn, dict) else jax.jit(fn) if mode == "jit" else fn
        try:
            out = run(*[put(a, axis) for a, axis in zip(inputs, axes, strict=True)])
            # one more JAX operation on every JAX array of the result (numpy results,
            # e.g. from ArviZ's PSIS, are left as they are: their dtype is the result's)
            out = jax.tree_util.tree_map(
                lambda a: a + jnp.zeros((), a.dtype) if isinstance(a, jax.Array) else a, out
            )
        except Exception as err:  # the test decides: expected (RAISES) or a failure
            with open(os.path.join(out_dir, f"{name}-{mode}.txt"), "w") as f:
                f.write(f"{type(err).__name__}: {err}")
        else:
            if name in RAISES:
                with open(os.path.join(out_dir, f"{name}-{mode}.txt"), "w") as f:
                    f.write("no error")
            else:
                np.savez(os.path.join(out_dir, f"{name}-{mode}.npz"), *leaves(out))
        print(f"ok {name} {mode} {time.perf_counter() - t:.1f} s", flush=True)
    print("ALL OK", flush=True)


# --------------------------------------------------------------------- the tests' side
def _run(out_dir, suite, runs, stall):
    """Run ``runs`` (``name:mode``) in one 8-device subprocess: (finished, log).

    The subprocess is ended only when it prints nothing for ``stall`` seconds (a hang:
    it prints a line for every run it starts and finishes), not for being slow.
    """
    from tests._progress import run

    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["JAX_PLATFORMS"] = "cpu"
    command = [sys.executable, str(Path(__file__)), str(out_dir), suite, *runs]
    proc = run(command, stall=stall, env=env)
    out = proc.stdout
    if proc.stalled_after is not None:
        log = f"no progress for {proc.stalled_after:.0f} s (a hang)\n{proc.stderr[-3000:]}"
    else:
        log = f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    finished = {":".join(line.split()[1:3]) for line in out.splitlines() if line.startswith("ok ")}
    return finished, out + log


def run_suite(out_dir, suite: str, stall: float):
    """Every case and mode of ``suite`` run on the 8-device mesh: ``{run: log}`` of failures.

    A run that aborts (or makes no progress for ``stall`` seconds) ends its
    subprocess; the runs after it get a fresh one, so every case is tried on its own
    account. No limit on the total time: a slow machine is not a failure.
    """
    pending = [f"{name}:{mode}" for name, mode in run_names(suite)]
    logs = {}
    while pending:
        finished, log = _run(out_dir, suite, pending, stall)
        failed = next((r for r in pending if r not in finished), None)
        if failed is None:
            break
        logs[failed] = log
        pending = pending[pending.index(failed) + 1 :]
    return logs


def check_run(out_dir, logs, suite: str, name: str, mode: str) -> None:
    """Assert that the sharded run equals the unsharded call in this process."""
    log = logs.get(f"{name}:{mode}", "")
    missing = f"{name} ({mode}) did not finish on the 8-device mesh:\n{log[-4000:]}"
    error = Path(out_dir) / f"{name}-{mode}.txt"
    if name in RAISES:
        assert error.exists(), missing
        message = error.read_text()
        if not explicit_gathers():
            # JAX without jax.typeof (0.4.x) gives no mesh at trace time: nothing is
            # gathered explicitly (XLA partitions the kernels itself), nothing raises
            assert message == "no error", message
            return
        assert message.startswith("ValueError"), message
        assert re.search(RAISES[name], message, re.S), message
        return
    assert not error.exists(), f"{name} ({mode}) raised on the 8-device mesh: {error.read_text()}"
    path = Path(out_dir) / f"{name}-{mode}.npz"
    assert path.exists(), missing
    fn, inputs, _ = split_case(case(suite, name))
    fn = fn["eager"] if isinstance(fn, dict) else fn
    if name in HOST_DRAWS:
        # On one device these draw their random counts on the host (NumPy), on a mesh
        # with jax.random: the reference draws as the mesh does.
        import jax

        from bayescal._src.bands import xla_draws

        jax.clear_caches()
        with xla_draws():
            ref = leaves(fn(*inputs))
        jax.clear_caches()
    else:
        ref = leaves(fn(*inputs))
    with np.load(path) as got:
        got = [got[f"arr_{i}"] for i in range(len(got.files))]
    assert len(got) == len(ref), (len(got), len(ref))
    if name in SAVED:
        # the calibrator saved in the 8-device process, loaded here (one device),
        # predicts what the unsharded fit predicts (the reference: the prediction)
        from bayescal.classification import load_calibrator

        saved = Path(out_dir) / f"{name}-{mode}.npz.cal"
        assert saved.exists(), f"{name} ({mode}): nothing saved at {saved}"
        got += leaves(SAVED[name](load_calibrator(saved), *inputs))
        ref += ref
    rtol = 0.0 if name in EXACT else TOLERANCE.get(name, 1e-6)
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, b.shape, a.dtype, b.dtype)
        if not np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_array_equal(b, a, err_msg=f"{name}, leaf {i}")
            continue
        np.testing.assert_array_equal(np.isnan(b), np.isnan(a), err_msg=f"{name}, leaf {i}")
        finite = a[np.isfinite(a)]
        scale = float(np.max(np.abs(finite))) if finite.size else 0.0
        np.testing.assert_allclose(
            b, a, rtol=rtol, atol=rtol * scale, err_msg=f"{name}, leaf {i}"
        )


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2], sys.argv[3:])
