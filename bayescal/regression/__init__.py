"""Calibration of regression predictives: PIT values, curves, scores, recalibration.

The flow: predictive distribution on held-out data -> PIT values
(:func:`pit_normal`, :func:`pit_draws`, :func:`pit_cdf`, :func:`pit_quantiles`) ->
curve and errors (:func:`calibration_curve`, :func:`calibration_error`,
:func:`miscalibration_area`, :func:`sharpness`, proper scores) -> recalibrator fitted
on a calibration split (:func:`fit_isotonic_recalibrator`, :func:`fit_sigma_scaling`)
-> recalibrated PIT values, quantiles and intervals on test data.
:func:`kernel_calibration_error` and :func:`kernel_calibration_test` (the squared kernel
calibration error of Widmann et al. 2021) assess normal predictives without PIT values.
"""

from bayescal._src.curve import CalibrationCurve
from bayescal.regression._aci import AdaptiveConformalResult, adaptive_conformal_intervals
from bayescal.regression._conditional import (
    AdversarialGroupCalibration,
    adversarial_group_calibration,
    expected_normalized_calibration_error,
    group_calibration_curve,
    group_calibration_error,
    spread_skill_curve,
)
from bayescal.regression._conformal import (
    ConformalCalibrator,
    ConformalizedQuantileCalibrator,
    conformal_rank,
    fit_conformal,
    fit_conformalized_quantile,
)
from bayescal.regression._cps import (
    ConformalPredictiveDistribution,
    ConformalPredictiveSystem,
    fit_conformal_predictive,
)
from bayescal.regression._cross_conformal import (
    CrossConformalRegressor,
    fit_cross_conformal,
    fit_jackknife_after_bootstrap,
)
from bayescal.regression._kernel import (
    KernelCalibrationTest,
    kernel_calibration_error,
    kernel_calibration_test,
)
from bayescal.regression._metrics import (
    calibration_accumulator,
    calibration_curve,
    calibration_error,
    miscalibration_area,
    sharpness,
)
from bayescal.regression._monitor import (
    MartingaleResult,
    conformal_p_values,
    pit_martingale,
)
from bayescal.regression._pit import pit_cdf, pit_draws, pit_normal, pit_quantiles
from bayescal.regression._recalibration import (
    IsotonicLevelCalibrator,
    SigmaScalingCalibrator,
    fit_isotonic_recalibrator,
    fit_sigma_scaling,
    recalibrated_interval,
    recalibrated_quantiles,
)
from bayescal.regression._scores import (
    crps_draws,
    crps_normal,
    interval_score,
    nll_normal,
    pinball_loss,
)
from bayescal.regression._select import RecalibratorSelection, select_recalibrator
from bayescal.regression._shift import (
    DensityRatio,
    fit_density_ratio,
    weighted_conformal_interval,
)
from bayescal.regression._uncertainty import (
    bootstrap_calibration_curve,
    bootstrap_calibration_error,
    calibration_error_test,
    miscalibration_area_test,
    pit_ecdf_band,
    pit_null_test,
)

__all__ = [
    "CalibrationCurve",
    "pit_normal",
    "pit_draws",
    "pit_cdf",
    "pit_quantiles",
    "calibration_curve",
    "calibration_accumulator",
    "calibration_error",
    "miscalibration_area",
    "sharpness",
    "crps_normal",
    "crps_draws",
    "nll_normal",
    "interval_score",
    "pinball_loss",
    "IsotonicLevelCalibrator",
    "SigmaScalingCalibrator",
    "fit_isotonic_recalibrator",
    "fit_sigma_scaling",
    "recalibrated_quantiles",
    "recalibrated_interval",
    "select_recalibrator",
    "RecalibratorSelection",
    "pit_ecdf_band",
    "bootstrap_calibration_curve",
    "bootstrap_calibration_error",
    "pit_null_test",
    "calibration_error_test",
    "miscalibration_area_test",
    # squared kernel calibration error (Widmann et al. 2021)
    "kernel_calibration_error",
    "kernel_calibration_test",
    "KernelCalibrationTest",
    # conditional calibration
    "expected_normalized_calibration_error",
    "spread_skill_curve",
    "group_calibration_curve",
    "group_calibration_error",
    "adversarial_group_calibration",
    "AdversarialGroupCalibration",
    # conformal intervals
    "fit_conformal",
    "fit_conformalized_quantile",
    "conformal_rank",
    # covariate shift
    "fit_density_ratio",
    "DensityRatio",
    "weighted_conformal_interval",
    # CV+ and jackknife+
    "fit_cross_conformal",
    "fit_jackknife_after_bootstrap",
    "CrossConformalRegressor",
    # anytime-valid monitoring
    "pit_martingale",
    "conformal_p_values",
    "MartingaleResult",
    # adaptive conformal inference over a stream
    "adaptive_conformal_intervals",
    "AdaptiveConformalResult",
    # conformal predictive systems
    "fit_conformal_predictive",
    "ConformalPredictiveSystem",
    "ConformalPredictiveDistribution",
    "ConformalCalibrator",
    "ConformalizedQuantileCalibrator",
]
