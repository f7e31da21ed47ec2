"""Every registered NumPy twin against its kernel (issue "One library", item 3).

``bayescal._src.host.first`` records each twin under the qualified name of the public
function or calibrator method it answers for (``host.TWINS``). Each needs a case here:
a call on small concrete CPU inputs that the twin answers (checked with the spy of
``tests/test_host_path.py``), whose result equals the kernel's (the same call with the
host path off): the same type, tree, dtypes and shapes, values to the case's tolerance
(the twins compute in float64 and round once; the kernels in the dtype). A twin
registered without a case, or a case for a name no longer registered, fails
:func:`test_every_twin_has_a_case`.

The property tests of ``tests/test_host_path.py`` (random sizes, ties, weights, bad
input) go further for most twins; this table is the floor that a new twin must reach.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import bayescal.classification as clf
import bayescal.core as core
import bayescal.regression as reg
from bayescal._src import host
from tests.conftest import X64, float_tol
from tests.test_host_path import both

DT = np.float64 if X64 else np.float32
N = 400
C = "bayescal.classification."
R = "bayescal.regression."

#: Tolerances (rtol, atol): closed forms and maps round once on either side; fits
#: stop the same Newton (or PAV) at float tolerance; the spline's map goes through
#: its fitted coefficients.
EXACT = (float_tol(), 1e-12 if X64 else 1e-6)
FIT = (1e-8, 1e-8) if X64 else (1e-4, 4e-5)
SPLINE = (1e-9, 1e-12) if X64 else (0.0, 2e-3)


@functools.cache
def data():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, N).astype(DT)
    y = (rng.uniform(size=N) < p).astype(DT)
    probs = rng.dirichlet(np.ones(3), size=N).astype(DT)
    labels = (rng.uniform(size=(N, 1)) < np.cumsum(probs, 1)).argmax(1).astype(np.int32)
    yr = rng.normal(size=N).astype(DT)
    loc = (yr + 0.8 * rng.normal(size=N)).astype(DT)
    scale = rng.uniform(0.5, 1.5, N).astype(DT)
    pit = rng.uniform(size=N).astype(DT)
    return dict(
        y=y,
        p=p,
        z=np.log(p / (1 - p)),
        probs=probs,
        labels=labels,
        logits=np.log(probs),
        yr=yr,
        loc=loc,
        scale=scale,
        pit=pit,
        lower=loc - scale,
        upper=loc + scale,
        folds=np.arange(N) % 4,
    )


@functools.cache
def fitted(name):
    """A calibrator fitted once, by the kernel, for the cases of its methods."""
    d = data()
    with host.disabled():
        return {
            "platt": lambda: clf.fit_platt(d["y"], d["p"]),
            "beta": lambda: clf.fit_beta(d["y"], d["p"]),
            "histogram": lambda: clf.fit_histogram_binning(d["y"], d["p"]),
            "isotonic": lambda: clf.fit_isotonic(d["y"], d["p"]),
            "temperature": lambda: clf.fit_temperature(d["labels"], d["logits"]),
            "bbq": lambda: clf.fit_bbq(d["y"], d["p"]),
            "vector": lambda: clf.fit_vector_scaling(d["labels"], d["logits"]),
            "matrix": lambda: clf.fit_matrix_scaling(d["labels"], d["logits"]),
            "dirichlet": lambda: clf.fit_dirichlet(d["labels"], d["probs"]),
            "scaling_binning": lambda: clf.fit_scaling_binning(d["y"], d["p"]),
            "spline": lambda: clf.fit_spline(d["y"], d["p"], knots=4, folds=2),
            "centered": lambda: clf.fit_centered_isotonic(d["y"], d["p"]),
            "venn": lambda: clf.fit_venn_abers(d["y"], d["p"]),
            "cross_venn": lambda: clf.fit_cross_venn_abers(d["y"], d["p"], d["folds"]),
            "conformal": lambda: reg.fit_conformal(
                d["yr"], d["loc"], d["scale"], coverage=0.9
            ),
            "cqr": lambda: reg.fit_conformalized_quantile(
                d["yr"], d["lower"], d["upper"], coverage=0.9
            ),
            "levels": lambda: reg.fit_isotonic_recalibrator(d["pit"]),
            "sigma": lambda: reg.fit_sigma_scaling(d["yr"], d["loc"], d["scale"]),
            "cps": lambda: reg.fit_conformal_predictive(
                d["yr"], d["loc"], d["scale"], groups=d["folds"]
            ),
        }[name]()


@functools.cache
def _cv_plus():
    d = data()

    def fit(X, y):
        return np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]

    def predict(w, X):
        return np.c_[X, np.ones(len(X))] @ w

    return reg.fit_cross_conformal(fit, predict, np.c_[d["loc"], d["scale"]], d["yr"], folds=5)


def _cases():
    d = data()
    key = jax.random.key(0)
    new = d["p"][::-1].copy()
    per_fold = np.tile(new[:, None], (1, 4))  # one score per fold's model
    return {
        # core: the PAV of one host row (the kernel's host callback, without a program)
        "bayescal.core.isotonic_regression": (
            lambda: core.isotonic_regression(d["yr"], weights=d["scale"], increasing=False),
            EXACT,
        ),
        # classification: metrics and tests
        C + "_metrics.brier_score": (lambda: clf.brier_score(d["y"], d["p"]), EXACT),
        C + "_metrics.log_loss": (lambda: clf.log_loss(d["y"], d["p"]), EXACT),
        C + "_metrics.expected_calibration_error": (
            lambda: clf.expected_calibration_error(d["y"], d["p"]),
            EXACT,
        ),
        C + "_metrics.reliability_curve": (
            lambda: clf.reliability_curve(d["y"], d["p"]),
            EXACT,
        ),
        C + "_kernel.kernel_calibration_error": (
            lambda: clf.kernel_calibration_error(d["y"], d["p"]),
            EXACT,
        ),
        C + "_kernel.kernel_calibration_test": (
            lambda: clf.kernel_calibration_test(d["y"], d["p"], key=key, num_samples=50),
            EXACT,
        ),
        C + "_smooth.smooth_calibration_error": (
            lambda: clf.smooth_calibration_error(d["y"], d["p"]),
            EXACT,
        ),
        C + "_smooth.smooth_reliability_curve": (
            lambda: clf.smooth_reliability_curve(d["y"], d["p"]),
            EXACT,
        ),
        C + "_smooth.smooth_reliability_band": (
            lambda: clf.smooth_reliability_band(key, d["y"], d["p"], num_samples=20),
            EXACT,
        ),
        C + "_tests.calibration_slope_intercept": (
            lambda: clf.calibration_slope_intercept(d["y"], d["p"]),
            FIT,
        ),
        C + "_tests.hosmer_lemeshow": (lambda: clf.hosmer_lemeshow(d["y"], d["p"]), EXACT),
        C + "_tests.spiegelhalter_z": (lambda: clf.spiegelhalter_z(d["y"], d["p"]), EXACT),
        C + "_tests.cumulative_calibration_test": (
            lambda: clf.cumulative_calibration_test(d["y"], d["p"]),
            EXACT,
        ),
        # classification: fits
        C + "_calibrators.fit_platt": (lambda: clf.fit_platt(d["y"], d["p"]), FIT),
        C + "_calibrators.fit_beta": (lambda: clf.fit_beta(d["y"], d["p"]), FIT),
        C + "_calibrators.fit_histogram_binning": (
            lambda: clf.fit_histogram_binning(d["y"], d["p"]),
            EXACT,
        ),
        C + "_calibrators.fit_isotonic": (lambda: clf.fit_isotonic(d["y"], d["p"]), EXACT),
        C + "_calibrators.fit_temperature": (
            lambda: clf.fit_temperature(d["labels"], d["logits"]),
            FIT,
        ),
        C + "_bbq.fit_bbq": (lambda: clf.fit_bbq(d["y"], d["p"]), FIT),
        C + "_scaling.fit_vector_scaling": (
            lambda: clf.fit_vector_scaling(d["labels"], d["logits"]),
            FIT,
        ),
        C + "_scaling.fit_matrix_scaling": (
            lambda: clf.fit_matrix_scaling(d["labels"], d["logits"]),
            FIT,
        ),
        C + "_scaling.fit_dirichlet": (
            lambda: clf.fit_dirichlet(d["labels"], d["probs"]),
            FIT,
        ),
        C + "_scaling_binning.fit_scaling_binning": (
            lambda: clf.fit_scaling_binning(d["y"], d["p"]),
            FIT,
        ),
        C + "_spline.fit_spline": (
            lambda: clf.fit_spline(d["y"], d["p"], knots=4, folds=2),
            SPLINE,
        ),
        C + "_venn.fit_centered_isotonic": (
            lambda: clf.fit_centered_isotonic(d["y"], d["p"]),
            EXACT,
        ),
        C + "_venn.fit_venn_abers": (lambda: clf.fit_venn_abers(d["y"], d["p"]), EXACT),
        C + "_venn.fit_cross_venn_abers": (
            lambda: clf.fit_cross_venn_abers(d["y"], d["p"], d["folds"]),
            EXACT,
        ),
        # classification: calibrators applied
        C + "_calibrators.PlattCalibrator.__call__": (lambda: fitted("platt")(new), EXACT),
        C + "_calibrators.BetaCalibrator.__call__": (lambda: fitted("beta")(new), EXACT),
        C + "_calibrators.HistogramBinningCalibrator.__call__": (
            lambda: fitted("histogram")(new),
            EXACT,
        ),
        C + "_calibrators.IsotonicCalibrator.__call__": (
            lambda: fitted("isotonic")(new),
            EXACT,
        ),
        C + "_calibrators.TemperatureCalibrator.__call__": (
            lambda: fitted("temperature")(d["logits"]),
            EXACT,
        ),
        C + "_bbq.BBQCalibrator.__call__": (lambda: fitted("bbq")(new), EXACT),
        C + "_scaling.VectorScalingCalibrator.__call__": (
            lambda: fitted("vector")(d["logits"]),
            EXACT,
        ),
        C + "_scaling.MatrixScalingCalibrator.__call__": (
            lambda: fitted("matrix")(d["logits"]),
            EXACT,
        ),
        C + "_scaling.DirichletCalibrator.__call__": (
            lambda: fitted("dirichlet")(d["probs"]),
            EXACT,
        ),
        C + "_scaling_binning.ScalingBinningCalibrator.__call__": (
            lambda: fitted("scaling_binning")(new),
            EXACT,
        ),
        C + "_spline.SplineCalibrator.__call__": (lambda: fitted("spline")(new), SPLINE),
        C + "_venn.CenteredIsotonicCalibrator.__call__": (
            lambda: fitted("centered")(new),
            EXACT,
        ),
        C + "_venn.VennAbersCalibrator.__call__": (lambda: fitted("venn")(new), EXACT),
        C + "_venn.VennAbersCalibrator.interval": (
            lambda: fitted("venn").interval(new),
            EXACT,
        ),
        C + "_venn.VennAbersCalibrator.probability": (
            lambda: fitted("venn").probability(new),
            EXACT,
        ),
        C + "_venn.CrossVennAbersCalibrator.__call__": (
            lambda: fitted("cross_venn")(per_fold),
            EXACT,
        ),
        C + "_venn.CrossVennAbersCalibrator.interval": (
            lambda: fitted("cross_venn").interval(per_fold),
            EXACT,
        ),
        C + "_venn.CrossVennAbersCalibrator.probability": (
            lambda: fitted("cross_venn").probability(per_fold),
            EXACT,
        ),
        # regression
        R + "_pit.pit_normal": (
            lambda: reg.pit_normal(d["yr"], d["loc"], d["scale"]),
            EXACT,
        ),
        R + "_scores.crps_normal": (
            lambda: reg.crps_normal(d["yr"], d["loc"], d["scale"]),
            EXACT,
        ),
        R + "_metrics.calibration_curve": (lambda: reg.calibration_curve(d["pit"]), EXACT),
        R + "_metrics.calibration_error": (lambda: reg.calibration_error(d["pit"]), EXACT),
        R + "_metrics.miscalibration_area": (
            lambda: reg.miscalibration_area(d["pit"]),
            EXACT,
        ),
        R + "_metrics.sharpness": (lambda: reg.sharpness(d["scale"]), EXACT),
        R + "_kernel.kernel_calibration_error": (
            lambda: reg.kernel_calibration_error(d["yr"], d["loc"], d["scale"]),
            EXACT,
        ),
        R + "_kernel.kernel_calibration_test": (
            lambda: reg.kernel_calibration_test(
                d["yr"], d["loc"], d["scale"], key=key, num_samples=50
            ),
            EXACT,
        ),
        R + "_conformal._fit_conformal_alpha": (
            lambda: reg.fit_conformal(d["yr"], d["loc"], d["scale"], coverage=0.9),
            EXACT,
        ),
        R + "_conformal._fit_cqr_alpha": (
            lambda: reg.fit_conformalized_quantile(
                d["yr"], d["lower"], d["upper"], coverage=0.9
            ),
            EXACT,
        ),
        # conformal predictive systems (Mondrian, normalized)
        R + "_cps._fit_cps": (
            lambda: reg.fit_conformal_predictive(d["yr"], d["loc"], d["scale"], groups=d["folds"]),
            EXACT,
        ),
        R + "_cps.ConformalPredictiveDistribution.pit": (
            lambda: fitted("cps")(d["loc"], d["scale"], groups=d["folds"]).pit(d["yr"]),
            EXACT,
        ),
        R + "_cps.ConformalPredictiveDistribution.quantile": (
            lambda: fitted("cps")(d["loc"], d["scale"], groups=d["folds"]).quantile([0.1, 0.5]),
            EXACT,
        ),
        R + "_cps.ConformalPredictiveDistribution.interval": (
            lambda: fitted("cps")(d["loc"], d["scale"], groups=d["folds"]).interval(0.8),
            EXACT,
        ),
        R + "_cps.ConformalPredictiveDistribution.crps": (
            lambda: fitted("cps")(d["loc"], d["scale"], groups=d["folds"]).crps(d["yr"]),
            EXACT,
        ),
        # CV+ (the partition of each row on the host, a sort in the kernel)
        R + "_cross_conformal._intervals": (
            lambda: _cv_plus().interval(np.c_[d["loc"], d["scale"]][::-1]),
            EXACT,
        ),
        R + "_conformal.ConformalCalibrator.__call__": (
            lambda: fitted("conformal")(d["loc"], d["scale"]),
            EXACT,
        ),
        R + "_conformal.ConformalizedQuantileCalibrator.__call__": (
            lambda: fitted("cqr")(d["lower"], d["upper"]),
            EXACT,
        ),
        R + "_recalibration.fit_isotonic_recalibrator": (
            lambda: reg.fit_isotonic_recalibrator(d["pit"]),
            EXACT,
        ),
        R + "_recalibration.fit_sigma_scaling": (
            lambda: reg.fit_sigma_scaling(d["yr"], d["loc"], d["scale"]),
            FIT,
        ),
        R + "_recalibration.IsotonicLevelCalibrator.__call__": (
            lambda: fitted("levels")(d["pit"]),
            EXACT,
        ),
        R + "_recalibration.IsotonicLevelCalibrator.inverse": (
            lambda: fitted("levels").inverse(d["pit"]),
            EXACT,
        ),
        R + "_recalibration.SigmaScalingCalibrator.__call__": (
            lambda: fitted("sigma")(d["scale"]),
            EXACT,
        ),
    }


CASES = _cases()


def test_every_twin_has_a_case():
    registered = set(host.TWINS)
    assert len(registered) > 50  # the registry is filled at import, not empty
    missing = sorted(registered - set(CASES))
    stale = sorted(set(CASES) - registered)
    assert not missing, f"twins without a case here (add one to CASES): {missing}"
    assert not stale, f"cases for names no twin answers for (remove them): {stale}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_twin_equals_kernel(name):
    call, (rtol, atol) = CASES[name]
    got, want, answered = both(call)
    twin = host.TWINS.get(name)
    assert twin is not None, f"{name} has no registered twin"
    assert True in answered, f"no twin answered the case of {name} ({answered})"
    (out, err), (ref, ref_err) = got, want
    assert err == ref_err
    assert type(out) is type(ref)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(ref)
    for a, b in zip(
        jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref), strict=True
    ):
        if isinstance(b, jax.Array | np.ndarray):
            assert (np.shape(a), np.asarray(a).dtype) == (np.shape(b), np.asarray(b).dtype)
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)
        else:
            assert a == pytest.approx(b, rel=max(rtol, 1e-12), abs=atol)
