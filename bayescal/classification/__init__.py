"""Calibration of binary (and multiclass) classifiers: metrics and calibrators.

Metrics: :func:`reliability_curve`, :func:`expected_calibration_error`,
:func:`brier_score`, :func:`log_loss`, :func:`brier_decomposition` (exact CORP),
:func:`brier_decomposition_binned` (Murphy), :func:`prediction_sharpness`, and for
multiclass :func:`top_label_calibration_error`, :func:`marginal_calibration_error`.

Calibration tests and summaries: :func:`calibration_slope_intercept` (Cox),
:func:`spiegelhalter_z`, :func:`hosmer_lemeshow`, :func:`cumulative_calibration_test`
(Kolmogorov-Smirnov and Kuiper on the cumulative differences, no bins),
:func:`isotonic_calibration_index` (ICI, E50, E90, Emax on the isotonic curve),
:func:`kernel_calibration_error` and :func:`kernel_calibration_test` (the squared
kernel calibration error of Widmann et al. 2019, binary and multiclass).

Calibrators (frozen pytrees, callable on new scores, usable inside ``jax.jit``):
:func:`fit_platt`, :func:`fit_isotonic`, :func:`fit_histogram_binning`,
:func:`fit_beta`, :func:`fit_temperature`, :func:`fit_one_vs_rest`,
:func:`fit_scaling_binning`, :func:`fit_bbq` (Bayesian binning into quantiles),
:func:`fit_spline` (spline calibration), :func:`fit_venn_abers` and :func:`fit_cross_venn_abers`
(Venn-ABERS), :func:`fit_centered_isotonic`, and for multiclass
:func:`fit_vector_scaling`, :func:`fit_matrix_scaling`, :func:`fit_dirichlet`,
:func:`fit_top_label`; cross-validated
fitting with :func:`cross_calibrate`; choosing one (or none) by nested
cross-validation with :func:`select_calibrator`; persistence with :func:`save_calibrator` /
:func:`load_calibrator`.
"""

from bayescal.classification._bbq import BBQCalibrator, fit_bbq
from bayescal.classification._calibrators import (
    BetaCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    OneVsRestCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    TopLabelCalibrator,
    TopLabelPrediction,
    fit_beta,
    fit_histogram_binning,
    fit_isotonic,
    fit_one_vs_rest,
    fit_platt,
    fit_temperature,
    fit_top_label,
)
from bayescal.classification._cross import CrossCalibratedClassifier, cross_calibrate
from bayescal.classification._io import load_calibrator, save_calibrator
from bayescal.classification._kernel import (
    KernelCalibrationTest,
    kernel_calibration_error,
    kernel_calibration_test,
)
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
from bayescal.classification._monitor import calibration_martingale
from bayescal.classification._multiclass import (
    marginal_calibration_error,
    top_label_calibration_error,
)
from bayescal.classification._scaling import (
    DirichletCalibrator,
    MatrixScalingCalibrator,
    VectorScalingCalibrator,
    fit_dirichlet,
    fit_matrix_scaling,
    fit_vector_scaling,
)
from bayescal.classification._scaling_binning import (
    ScalingBinningCalibrator,
    fit_scaling_binning,
)
from bayescal.classification._select import CalibratorSelection, select_calibrator
from bayescal.classification._smooth import (
    smooth_calibration_error,
    smooth_reliability_band,
    smooth_reliability_curve,
)
from bayescal.classification._spline import SplineCalibrator, fit_spline
from bayescal.classification._tests import (
    CalibrationSlope,
    CumulativeCalibrationTest,
    HosmerLemeshowTest,
    IsotonicCalibrationIndex,
    SpiegelhalterTest,
    calibration_slope_intercept,
    cumulative_calibration_test,
    hosmer_lemeshow,
    isotonic_calibration_index,
    spiegelhalter_z,
)
from bayescal.classification._uncertainty import (
    acceptance_intervals,
    bootstrap_reliability_curve,
    corp_curve,
)
from bayescal.classification._venn import (
    CenteredIsotonicCalibrator,
    CrossVennAbersCalibrator,
    VennAbersCalibrator,
    fit_centered_isotonic,
    fit_cross_venn_abers,
    fit_venn_abers,
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
    "kernel_calibration_error",
    "kernel_calibration_test",
    "KernelCalibrationTest",
    "hosmer_lemeshow",
    "cumulative_calibration_test",
    "calibration_martingale",
    "isotonic_calibration_index",
    "CalibrationSlope",
    "SpiegelhalterTest",
    "HosmerLemeshowTest",
    "CumulativeCalibrationTest",
    "IsotonicCalibrationIndex",
    # calibrators
    "fit_platt",
    "fit_isotonic",
    "fit_histogram_binning",
    "fit_beta",
    "fit_temperature",
    "fit_one_vs_rest",
    "fit_venn_abers",
    "fit_cross_venn_abers",
    "fit_centered_isotonic",
    "fit_vector_scaling",
    "fit_matrix_scaling",
    "fit_dirichlet",
    "fit_top_label",
    "fit_scaling_binning",
    "fit_bbq",
    "fit_spline",
    "PlattCalibrator",
    "IsotonicCalibrator",
    "HistogramBinningCalibrator",
    "BetaCalibrator",
    "TemperatureCalibrator",
    "OneVsRestCalibrator",
    "VennAbersCalibrator",
    "CrossVennAbersCalibrator",
    "CenteredIsotonicCalibrator",
    "VectorScalingCalibrator",
    "MatrixScalingCalibrator",
    "DirichletCalibrator",
    "TopLabelCalibrator",
    "TopLabelPrediction",
    "ScalingBinningCalibrator",
    "BBQCalibrator",
    "SplineCalibrator",
    # cross-validation and persistence
    "cross_calibrate",
    "CrossCalibratedClassifier",
    # choosing a calibrator
    "select_calibrator",
    "CalibratorSelection",
    "save_calibrator",
    "load_calibrator",
]
