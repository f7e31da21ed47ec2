"""Calibration of binary (and multiclass) classifiers: metrics and calibrators.

Metrics: :func:`reliability_curve`, :func:`expected_calibration_error`,
:func:`brier_score`, :func:`log_loss`, :func:`brier_decomposition` (exact CORP),
:func:`brier_decomposition_binned` (Murphy), :func:`prediction_sharpness`, and for
multiclass :func:`top_label_calibration_error`, :func:`marginal_calibration_error`.

Calibration tests and summaries: :func:`calibration_slope_intercept` (Cox),
:func:`spiegelhalter_z`, :func:`hosmer_lemeshow`, :func:`isotonic_calibration_index`
(ICI, E50, E90, Emax on the isotonic curve).

Calibrators (frozen pytrees, callable on new scores, usable inside ``jax.jit``):
:func:`fit_platt`, :func:`fit_isotonic`, :func:`fit_histogram_binning`,
:func:`fit_beta`, :func:`fit_temperature`, :func:`fit_one_vs_rest`,
:func:`fit_scaling_binning`, :func:`fit_spline`; cross-validated
fitting with :func:`cross_calibrate`; persistence with :func:`save_calibrator` /
:func:`load_calibrator`.
"""

from bayescal.classification._calibrators import (
    BetaCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    OneVsRestCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    fit_beta,
    fit_histogram_binning,
    fit_isotonic,
    fit_one_vs_rest,
    fit_platt,
    fit_temperature,
)
from bayescal.classification._cross import CrossCalibratedClassifier, cross_calibrate
from bayescal.classification._io import load_calibrator, save_calibrator
from bayescal.classification._metrics import (
    BrierDecomposition,
    MurphyDecomposition,
    PredictionSharpness,
    brier_decomposition,
    brier_decomposition_binned,
    brier_score,
    expected_calibration_error,
    log_loss,
    prediction_sharpness,
    reliability_accumulator,
    reliability_curve,
)
from bayescal.classification._multiclass import (
    marginal_calibration_error,
    top_label_calibration_error,
)
from bayescal.classification._scaling_binning import (
    ScalingBinningCalibrator,
    fit_scaling_binning,
)
from bayescal.classification._smooth import (
    smooth_calibration_error,
    smooth_reliability_band,
    smooth_reliability_curve,
)
from bayescal.classification._spline import SplineCalibrator, fit_spline
from bayescal.classification._tests import (
    CalibrationSlope,
    HosmerLemeshowTest,
    IsotonicCalibrationIndex,
    SpiegelhalterTest,
    calibration_slope_intercept,
    hosmer_lemeshow,
    isotonic_calibration_index,
    spiegelhalter_z,
)
from bayescal.classification._uncertainty import (
    acceptance_intervals,
    bootstrap_reliability_curve,
    corp_curve,
)

__all__ = [
    # uncertainty of reliability curves
    "acceptance_intervals",
    "corp_curve",
    "bootstrap_reliability_curve",
    # metrics
    "reliability_curve",
    "reliability_accumulator",
    "expected_calibration_error",
    "brier_score",
    "log_loss",
    "brier_decomposition",
    "brier_decomposition_binned",
    "prediction_sharpness",
    "top_label_calibration_error",
    "marginal_calibration_error",
    "smooth_calibration_error",
    "smooth_reliability_curve",
    "smooth_reliability_band",
    "BrierDecomposition",
    "MurphyDecomposition",
    "PredictionSharpness",
    # calibration tests and summaries
    "calibration_slope_intercept",
    "spiegelhalter_z",
    "hosmer_lemeshow",
    "isotonic_calibration_index",
    "CalibrationSlope",
    "SpiegelhalterTest",
    "HosmerLemeshowTest",
    "IsotonicCalibrationIndex",
    # calibrators
    "fit_platt",
    "fit_isotonic",
    "fit_histogram_binning",
    "fit_beta",
    "fit_temperature",
    "fit_one_vs_rest",
    "fit_scaling_binning",
    "fit_spline",
    "PlattCalibrator",
    "IsotonicCalibrator",
    "HistogramBinningCalibrator",
    "BetaCalibrator",
    "TemperatureCalibrator",
    "OneVsRestCalibrator",
    "ScalingBinningCalibrator",
    "SplineCalibrator",
    # cross-validation and persistence
    "cross_calibrate",
    "CrossCalibratedClassifier",
    "save_calibrator",
    "load_calibrator",
]
