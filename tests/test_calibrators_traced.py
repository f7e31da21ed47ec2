"""Fitted calibrators on invalid input under ``jit`` / ``vmap``: NaN, never a number.

Issue "Nothing lost, nothing silent", item 9: a call that raises eagerly returned
plausible numbers when traced (histogram binning ``[0.3, nan] -> [0.25, 0.95]``, a
one-vs-rest NaN row ``-> [0.5, 0.5]``, Platt on scores with inf ``-> 1.0``), because the
calibrators' ``__call__`` recorded checks outside a validated function, where a traced
check was computed and dropped. They now fold into NaN as the metrics do.
``SigmaScalingCalibrator`` accepted a negative or NaN scale eagerly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal import classification as clf
from bayescal import regression as reg

Y = np.array([0, 0, 1, 1, 1, 0, 1, 0], float)  # not separable by P: the fits converge
P = np.array([0.1, 0.3, 0.6, 0.8, 0.4, 0.7, 0.9, 0.2])
PROBS = np.stack([1 - P, P * 0.5, P * 0.5], axis=1)
LABELS = np.array([0, 0, 1, 2, 0, 1, 2, 0])
NAN_ROW = np.array([[np.nan, 0.5, 0.5]])


def _cases():
    rng = np.random.default_rng(0)
    good_logits = np.log(PROBS[:2])
    return {
        # name: (calibrator, valid input, invalid input)
        "histogram": (clf.fit_histogram_binning(Y, P), P[:2], np.array([0.3, np.nan])),
        "isotonic": (clf.fit_isotonic(Y, P), P[:2], np.array([0.3, np.inf])),
        "platt_prob": (clf.fit_platt(Y, P), P[:2], np.array([0.3, 1.5])),
        "platt_score": (
            clf.fit_platt(Y, 4 * P - 2, input="score"), P[:2], np.array([0.3, np.inf])
        ),
        "beta": (clf.fit_beta(Y, P), P[:2], np.array([0.3, -0.5])),
        "bbq": (clf.fit_bbq(Y, P), P[:2], np.array([0.3, 1.5])),
        "scaling_binning": (
            clf.fit_scaling_binning(Y, P, bins=3, split=None),
            P[:2],
            np.array([0.3, 1.5]),
        ),
        "spline": (
            clf.fit_spline(Y, P, knots=4, folds=2, penalties=(0.1, 1.0)),
            P[:2],
            np.array([0.3, 1.5]),
        ),
        "temperature": (
            clf.fit_temperature(LABELS, np.log(PROBS)),
            good_logits,
            np.vstack([good_logits[:1], [[np.nan, 0.0, 0.0]]]),
        ),
        "one_vs_rest": (
            clf.fit_one_vs_rest(LABELS, PROBS), PROBS[:2], np.vstack([PROBS[:1], NAN_ROW])
        ),
        "one_vs_rest_platt": (
            clf.fit_one_vs_rest(LABELS, PROBS, method="platt"),
            PROBS[:2],
            np.vstack([PROBS[:1], NAN_ROW]),
        ),
        "one_vs_rest_histogram": (
            clf.fit_one_vs_rest(LABELS, PROBS, method="histogram"),
            PROBS[:2],
            np.vstack([PROBS[:1], [[1.5, 0.5, 0.5]]]),
        ),
        "isotonic_recalibrator": (
            reg.fit_isotonic_recalibrator(np.linspace(0.05, 0.95, 20)),
            np.array([0.2, 0.5, 0.7]),
            np.array([np.inf, 1.5, -0.5]),
        ),
        "sigma_scaling": (
            reg.fit_sigma_scaling(rng.normal(size=20), np.zeros(20), np.ones(20)),
            np.array([1.0, 2.0]),
            np.array([1.0, -1.0]),
        ),
    }


CASES = _cases()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_input_raises_eagerly_and_is_nan_traced(name):
    cal, good, bad = CASES[name]
    with pytest.raises(ValueError):
        cal(bad)
    jitted = jax.jit(lambda x: cal(x))
    assert np.isnan(np.asarray(jitted(jnp.asarray(bad)))).all()
    # the calibrator itself traced too (a jit argument)
    assert np.isnan(np.asarray(jax.jit(lambda c, x: c(x))(cal, jnp.asarray(bad)))).all()
    # valid input: the traced call equals the eager one
    np.testing.assert_allclose(
        np.asarray(jitted(jnp.asarray(good))), np.asarray(cal(good)), rtol=1e-5, atol=1e-7
    )
    # vmap: only the invalid batch element becomes NaN
    both = jax.vmap(lambda x: cal(x))(jnp.stack([jnp.asarray(good), jnp.asarray(bad)]))
    both = np.asarray(both)
    assert np.isfinite(both[0]).all() and np.isnan(both[1]).all()


def test_sigma_scaling_rejects_negative_and_nan_scales_eagerly():
    cal = CASES["sigma_scaling"][0]
    for bad, match in (([1.0, -1.0], "values <= 0"), ([1.0, np.nan], "NaN")):
        with pytest.raises(ValueError, match=f"scale .*{match}"):
            cal(np.array(bad))
    with pytest.raises(ValueError, match="scale must be strictly positive"):
        cal.pit(np.zeros(2), np.zeros(2), np.array([1.0, 0.0]))
    assert np.isnan(np.asarray(
        jax.jit(cal.pit)(jnp.zeros(2), jnp.zeros(2), jnp.array([1.0, 0.0]))
    )).all()


def test_normalized_conformal_scale_is_nan_traced():
    rng = np.random.default_rng(1)
    cal = reg.fit_conformal(rng.normal(size=40), np.zeros(40), np.ones(40), alpha=0.2)
    with pytest.raises(ValueError, match="scale must be strictly positive"):
        cal(np.zeros(2), np.array([1.0, -1.0]))
    lo, hi = jax.jit(lambda s: cal(jnp.zeros(2), s))(jnp.array([1.0, -1.0]))
    assert np.isnan(np.asarray(lo)).all() and np.isnan(np.asarray(hi)).all()
