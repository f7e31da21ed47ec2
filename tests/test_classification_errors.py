"""Bad input: every public classification function says what was expected, what it
got and what to do (ValueError / TypeError, never assert, never a garbage number)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal.classification import (
    IsotonicCalibrator,
    OneVsRestCalibrator,
    brier_decomposition,
    brier_score,
    cross_calibrate,
    expected_calibration_error,
    fit_beta,
    fit_histogram_binning,
    fit_isotonic,
    fit_one_vs_rest,
    fit_platt,
    fit_temperature,
    log_loss,
    marginal_calibration_error,
    prediction_sharpness,
    reliability_curve,
    top_label_calibration_error,
)

Y = np.array([0, 1, 1, 0])
P = np.array([0.2, 0.7, 0.9, 0.4])
PROBS = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.1, 0.9]])
ece = expected_calibration_error
rel = reliability_curve

CASES = [
    # labels, probabilities, shapes
    (
        rel,
        (np.array([0, 2, 1, 0]), P),
        {},
        ValueError,
        "y_true must hold binary labels 0 and 1",
    ),
    (
        ece,
        (Y, np.array([0.2, 1.2, 0.9, 0.4])),
        {},
        ValueError,
        r"y_prob must lie in \[0, 1\]",
    ),
    (ece, (Y, np.array([0.2, np.nan, 0.9, 0.4])), {}, ValueError, "y_prob contains 1 NaN"),
    (
        ece,
        (Y[:3], P),
        {},
        ValueError,
        r"y_prob has shape \(4,\) but y_true has shape \(3,\)",
    ),
    (ece, ([], []), {}, ValueError, "y_prob is empty"),
    (rel, (Y, P[None, :]), {}, ValueError, "y_prob must be 1-D"),
    (rel, ("0101", P), {}, TypeError, "y_true must be an array of numbers"),
    # options and bins
    (ece, (Y, P), {"strategy": "equal"}, ValueError, "strategy must be one of"),
    (ece, (Y, P), {"norm": "l3"}, ValueError, "norm must be one of"),
    (ece, (Y, P), {"bins": 0}, ValueError, "bins must be an int >= 1"),
    (ece, (Y, P), {"bins": "sturges"}, ValueError, "bins must be an int, an array of bin"),
    (ece, (Y, P), {"bins": 2.5}, TypeError, "bins must be an int, an array of bin edges"),
    (
        rel,
        (Y, P),
        {"bins": [0.0, 0.6, 0.5, 1.0]},
        ValueError,
        "sorted in nondecreasing order",
    ),
    (rel, (Y, P), {"bins": [0.5]}, ValueError, "at least 2 entries"),
    (
        rel,
        (Y, P),
        {"bins": [0, 0.5, 1], "strategy": "quantile"},
        ValueError,
        "strategy='quantile' needs an int",
    ),
    (rel, (Y, P), {"weights": [1.0, -1.0, 1.0, 1.0]}, ValueError, "weights must be >= 0"),
    (rel, (Y, P), {"weights": [0.0, 0.0, 0.0, 0.0]}, ValueError, "weights are all 0"),
    (
        ece,
        (Y, P),
        {"debias": True, "norm": "max"},
        ValueError,
        "debias=True is defined for",
    ),
    (
        ece,
        (Y, P),
        {"debias": True, "weights": np.ones(4), "key": 0},
        ValueError,
        "unweighted counts",
    ),
    (ece, (Y, P), {"debias": True}, TypeError, "needs randomness: pass key"),
    (ece, (Y, P), {"key": 0}, TypeError, "key is used only by debias=True"),
    (ece, (Y, P), {"debias": True, "key": "seed"}, TypeError, "key must be a PRNG key"),
    (ece, (Y, P), {"debias": 1}, TypeError, "debias must be a bool"),
    (
        ece,
        (Y, P),
        {"debias": True, "method": "boot", "key": 0},
        ValueError,
        "method must be one of",
    ),
    (ece, (Y, P), {"num_samples": 0}, ValueError, "num_samples must be an int >= 1"),
    # scores
    (log_loss, (Y, P), {"logits": P}, TypeError, "pass exactly one of y_prob"),
    (brier_score, (Y,), {}, TypeError, "pass exactly one of y_prob"),
    (
        log_loss,
        (Y, P),
        {"eps": 0.7},
        ValueError,
        r"eps must be None or a float in \(0, 0.5\)",
    ),
    (
        log_loss,
        (Y,),
        {"logits": P, "eps": 1e-7},
        ValueError,
        "eps applies to probabilities",
    ),
    (
        log_loss,
        (Y,),
        {"logits": [0.0, np.inf, 1.0, 2.0]},
        ValueError,
        "logits contains 0 NaN and 1",
    ),
    (brier_decomposition, (Y, P * 2), {}, ValueError, r"y_prob must lie in \[0, 1\]"),
    (prediction_sharpness, (P - 1,), {}, ValueError, r"y_prob must lie in \[0, 1\]"),
    # calibrators
    (
        fit_platt,
        (np.ones(4), P),
        {},
        ValueError,
        "y_true holds only class 1.*needs both classes",
    ),
    (fit_platt, (Y, P), {"input": "logit"}, ValueError, "input must be one of"),
    (fit_platt, (Y, [0.0, 0.7, 0.9, 0.4]), {}, ValueError, "values at exactly 0 or 1.*eps"),
    (
        fit_platt,
        (Y, P),
        {"input": "score", "eps": 1e-6},
        ValueError,
        "only applies with input",
    ),
    (fit_platt, (Y, P), {"soft_labels": "yes"}, TypeError, "soft_labels must be a bool"),
    (fit_isotonic, (Y, [0.1, np.nan, 0.3, 0.2]), {}, ValueError, "y_score contains 1 NaN"),
    (fit_histogram_binning, (Y, P), {"bins": -3}, ValueError, "bins must be an int >= 1"),
    (fit_beta, (np.zeros(4), P), {}, ValueError, "y_true holds only class 0"),
    (fit_beta, (Y, [0.2, 1.0, 0.9, 0.4]), {}, ValueError, "exactly 0 or 1"),
    (fit_temperature, ([0, 1, 2, 0], PROBS), {}, ValueError, r"class indices in \[0, 1\]"),
    (fit_temperature, ([0.5, 1, 1, 0], PROBS), {}, ValueError, "integer class labels"),
    (fit_temperature, (Y, PROBS[None]), {}, ValueError, "logits must be 1-D or 2-D"),
    (fit_temperature, (Y[:3], PROBS), {}, ValueError, "one label per row of logits"),
    (
        fit_temperature,
        ([1, 0, 1, 0], np.log(PROBS)),
        {},
        ValueError,
        "temperature scaling cannot help",
    ),
    (
        fit_one_vs_rest,
        (Y, PROBS),
        {"method": "dirichlet"},
        ValueError,
        "method must be one of",
    ),
    (fit_one_vs_rest, (Y, PROBS * 1.2), {}, ValueError, r"probs must lie in \[0, 1\]"),
    (fit_one_vs_rest, (Y, PROBS * 0.9), {}, ValueError, "probs rows must sum to 1"),
    (fit_one_vs_rest, (Y, P), {}, ValueError, r"probs must be 2-D \[N, C\]"),
    (
        fit_one_vs_rest,
        ([0, 0, 0, 0], PROBS),
        {"method": "platt"},
        ValueError,
        "class 0: y_true holds only class 1",
    ),
    # multiclass metrics
    (top_label_calibration_error, ([0, 1, 2, 0], PROBS), {}, ValueError, "class indices"),
    (marginal_calibration_error, (Y, PROBS), {"per_class": "no"}, TypeError, "per_class"),
    (
        marginal_calibration_error,
        (Y, PROBS),
        {"norm": "max", "debias": True},
        ValueError,
        "debias=True is defined for",
    ),
]


@pytest.mark.parametrize(
    "fn, args, kwargs, exc, match",
    CASES,
    ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)],
)
def test_bad_input_raises_with_message(fn, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_calibrator_calls_check_their_input():
    cal = fit_platt(Y, P)
    with pytest.raises(ValueError, match=r"y_score must lie in \[0, 1\]"):
        cal(np.array([0.5, 1.5]))
    ovr = OneVsRestCalibrator((IsotonicCalibrator(jnp.zeros(1), jnp.zeros(1)),) * 2)
    with pytest.raises(ValueError, match=r"probs must have shape \[N, 2\]"):
        ovr(np.ones((3, 3)) / 3)
    temp = fit_temperature([0, 1, 1, 1], np.log(PROBS))
    with pytest.raises(ValueError, match="logits must be 1-D or 2-D"):
        temp(np.zeros((1, 2, 2)))


def test_shapes_are_checked_under_jit_values_are_not():
    with pytest.raises(ValueError, match="y_prob has shape"):
        jax.jit(ece)(jnp.asarray(Y[:3]), jnp.asarray(P))
    with pytest.raises(TypeError, match="bins='fd' chooses the edges from the data"):
        jax.jit(functools.partial(ece, bins="fd"))(jnp.asarray(Y), jnp.asarray(P))
    # inside jit a value problem cannot raise; the result is a number (documented)
    out = jax.jit(ece)(jnp.asarray(Y), jnp.asarray(P))
    assert np.isfinite(float(out))


def test_cross_calibrate_bad_input():
    x = np.arange(20.0)[:, None]
    y = np.array([0, 1] * 10)

    def fit_predict(x_train, y_train, x_eval):
        return np.clip(x_eval[:, 0] / 20, 0.01, 0.99)

    with pytest.raises(TypeError, match="fit_predict must be a callable"):
        cross_calibrate(0, "model", x, y)
    with pytest.raises(ValueError, match="ensemble must be one of"):
        cross_calibrate(0, fit_predict, x, y, ensemble="nested")
    with pytest.raises(ValueError, match="num_folds must be an int >= 2"):
        cross_calibrate(0, fit_predict, x, y, num_folds=1)
    with pytest.raises(ValueError, match="y has 19 labels but X has 20 rows"):
        cross_calibrate(0, fit_predict, x, y[:19])
    with pytest.raises(ValueError, match="y must hold binary labels"):
        cross_calibrate(0, fit_predict, x, y * 2)
    with pytest.raises(ValueError, match="each class needs at least num_folds=11"):
        cross_calibrate(0, fit_predict, x, y, num_folds=11)
    with pytest.raises(ValueError, match="method must be one of"):
        cross_calibrate(0, fit_predict, x, y, method="spline")
    with pytest.raises(ValueError, match="fit_predict must return one score per row"):
        cross_calibrate(0, lambda a, b, c: np.zeros((len(c), 2)), x, y)
    with pytest.raises(ValueError, match="fold 0 holds only class 0"):
        cross_calibrate(0, fit_predict, x, y, folds=np.arange(20) % 2)
    with pytest.raises(ValueError, match="folds must use every id"):
        cross_calibrate(0, fit_predict, x, y, folds=np.arange(20) % 3 * 2)
