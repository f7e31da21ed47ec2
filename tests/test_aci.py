"""Adaptive conformal inference (``adaptive_conformal_intervals``).

References:
- MAPIE 1.6, ``TimeSeriesRegressor(estimator, method="aci", cv="prefit")``: ``fit`` on
  a calibration split (absolute residuals), then for each new point ``predict(...,
  allow_infinite_bounds=True)`` and ``adapt_conformal_inference(x, y, gamma)``. Its
  intervals and levels equal the recursion written out below in Python floats
  (``_loop``: Gibbs & Candes 2021, Eq. 2, with MAPIE's clipping to [0, 1]), which is
  the reference of the kernel.
- Gibbs & Candes (2021), Prop. 4.1: without clipping, for any sequence,
  ``|mean(err) - alpha| <= (max(alpha_1, 1 - alpha_1) + gamma) / (gamma T)``.
"""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest

from bayescal import regression as reg
from tests.conftest import X64

DT = np.float64 if X64 else np.float32


def _loop(y, loc, scores, alpha, gamma, window=False, clip=True, scale=None):
    """The ACI recursion in Python floats: (lower, upper, alpha_t, covered) per step."""
    ring = [float(v) for v in scores]
    sd = np.ones(len(y)) if scale is None else np.asarray(scale, np.float64)
    n, a_t, oldest, out = len(ring), alpha, 0, []
    for yt, mt, st in zip(np.asarray(y, np.float64), np.asarray(loc, np.float64), sd, strict=True):
        k = math.ceil((1 - a_t) * (n + 1))
        q = math.inf if k > n else -math.inf if k < 1 else sorted(ring)[k - 1]
        lo, hi = mt - st * q, mt + st * q
        hit = bool(lo <= yt <= hi)
        out.append((lo, hi, a_t, hit))
        a_t = a_t + gamma * (alpha - (0.0 if hit else 1.0))
        if clip:
            a_t = min(max(a_t, 0.0), 1.0)
        if window:
            ring[oldest] = abs(yt - mt) / st
            oldest = (oldest + 1) % n
    return [np.array(v) for v in zip(*out, strict=True)]


def _series(seed=0, t=600, n=200, drift=300):
    """A linear model on a series whose noise grows (drift): train, calibration, stream."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(200 + n + t, 2))
    noise = 1 + np.arange(x.shape[0]) / drift
    y = x @ np.array([1.0, 2.0]) + noise * r.normal(size=x.shape[0])
    return x, y


def _until_rounding(alpha_t, n):
    """The steps before the first whose rank ceil((1 - alpha_t)(n + 1)) float32 rounding
    of ``alpha_t`` could flip (all of them under x64): the float32 kernel and the float64
    recursion agree there, and may part from there on (a flip changes the path)."""
    if X64:
        return len(alpha_t)
    v = (1 - np.asarray(alpha_t, np.float64)) * (n + 1)
    near = np.flatnonzero(np.abs(v - np.round(v)) < 1e-4)
    return int(near[0]) if near.size else len(alpha_t)


def test_the_recursion_equals_mapie_and_the_kernel_equals_the_recursion():
    from mapie.conformity_scores import AbsoluteConformityScore
    from mapie.regression import TimeSeriesRegressor
    from sklearn.linear_model import LinearRegression

    x, y = _series(drift=1500)  # mild: the level stays above 0 (MAPIE raises at 0)
    est = LinearRegression().fit(x[:200], y[:200])
    cal, stream = slice(200, 400), slice(400, None)
    gamma, alpha = 0.0031, 0.1  # MAPIE's symmetric score cannot take alpha_t = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # symmetric absolute residuals: MAPIE's TimeSeriesRegressor defaults to signed
        # ones (a lower and an upper quantile), not the scores ACI is defined with
        mapie = TimeSeriesRegressor(
            est, method="aci", cv="prefit", conformity_score=AbsoluteConformityScore(sym=True)
        ).fit(x[cal], y[cal])
        bounds = []
        for t in range(400, x.shape[0]):
            _, b = mapie.predict(x[t : t + 1], confidence_level=0.9, allow_infinite_bounds=True)
            bounds.append(b[0, :, 0])
            mapie.adapt_conformal_inference(
                x[t : t + 1], y[t : t + 1], gamma=gamma, confidence_level=0.9
            )
    bounds = np.array(bounds)
    scores = np.abs(y[cal] - est.predict(x[cal]))
    loc = est.predict(x[stream])
    lo, hi, a_t, hit = _loop(y[stream], loc, scores, alpha, gamma)
    assert a_t.max() > 0.11 and a_t.min() < 0.07  # the level moved both ways
    np.testing.assert_allclose(lo, bounds[:, 0], rtol=1e-12)
    np.testing.assert_allclose(hi, bounds[:, 1], rtol=1e-12)

    out = reg.adaptive_conformal_intervals(
        y[stream].astype(DT), loc.astype(DT), scores.astype(DT), alpha=alpha, gamma=gamma
    )
    m = _until_rounding(a_t, scores.size)
    assert m >= 100, m
    np.testing.assert_allclose(np.asarray(out.alpha)[:m], a_t[:m], atol=1e-12 if X64 else 2e-5)
    for got, want in ((out.lower, lo), (out.upper, hi)):
        np.testing.assert_allclose(
            np.asarray(got)[:m], want[:m], rtol=1e-12 if X64 else 1e-5, atol=0 if X64 else 1e-6
        )
    np.testing.assert_array_equal(np.asarray(out.covered)[:m], hit[:m])
    np.testing.assert_allclose(
        np.asarray(out.coverage), np.cumsum(np.asarray(out.covered)) / np.arange(1, hit.size + 1),
        rtol=1e-6,
    )


@pytest.mark.parametrize("clip", [True, False])
def test_rolling_window_and_scale_equal_the_recursion(clip):
    r = np.random.default_rng(3)
    t, n = 300, 57
    scale = np.exp(r.normal(size=t) / 3)
    loc = r.normal(size=t)
    y = loc + scale * r.standard_t(3, size=t) * np.linspace(1, 3, t)
    scores = np.abs(r.standard_t(3, size=n))
    lo, hi, a_t, hit = _loop(y, loc, scores, 0.2, 0.03, window=True, clip=clip, scale=scale)
    out = reg.adaptive_conformal_intervals(
        y.astype(DT), loc.astype(DT), scores.astype(DT), scale.astype(DT),
        alpha=0.2, gamma=0.03, window=True, clip=clip,
    )
    m = _until_rounding(a_t, n)
    assert m >= 50, m
    np.testing.assert_array_equal(np.asarray(out.covered)[:m], hit[:m])
    np.testing.assert_allclose(np.asarray(out.alpha)[:m], a_t[:m], atol=1e-12 if X64 else 2e-5)
    np.testing.assert_allclose(
        np.asarray(out.upper)[:m], hi[:m], rtol=1e-12 if X64 else 1e-5, atol=1e-12 if X64 else 1e-6
    )


def test_long_run_miscoverage_bound_without_clipping():
    # Gibbs & Candes (2021), Prop. 4.1: deterministic, for any sequence
    x, y = _series(seed=4, t=3000)
    loc = x[400:] @ np.array([1.0, 2.0])
    scores = np.abs(y[200:400] - x[200:400] @ np.array([1.0, 2.0]))
    for gamma in (0.005, 0.05):
        out = reg.adaptive_conformal_intervals(
            y[400:].astype(DT), loc.astype(DT), scores.astype(DT), gamma=gamma, clip=False
        )
        miss = 1 - float(np.mean(np.asarray(out.covered)))
        bound = (max(0.1, 0.9) + gamma) / (gamma * loc.size)
        assert abs(miss - 0.1) <= bound + 1e-6, (gamma, miss, bound)
    split = reg.adaptive_conformal_intervals(
        y[400:].astype(DT), loc.astype(DT), scores.astype(DT), gamma=0.0
    )
    assert 1 - float(np.mean(np.asarray(split.covered))) > 0.2  # drift: split conformal fails


def test_jit_equals_eager_and_vmap_equals_loop():
    r = np.random.default_rng(5)
    y, loc, scores = r.normal(size=(3, 120)), np.zeros(120), np.abs(r.normal(size=80))
    y, loc, scores = y.astype(DT), loc.astype(DT), scores.astype(DT)
    eager = reg.adaptive_conformal_intervals(y[0], loc, scores, gamma=0.02, window=True)
    traced = jax.jit(
        lambda a, b, c: reg.adaptive_conformal_intervals(a, b, c, gamma=0.02, window=True)
    )(y[0], loc, scores)
    # the level's update may be one fused multiply-add in one program, not the other
    np.testing.assert_array_equal(np.asarray(traced.covered), np.asarray(eager.covered))
    for a, b in zip(traced, eager, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12 if X64 else 1e-6)
    batch = jax.vmap(lambda a: reg.adaptive_conformal_intervals(a, loc, scores, gamma=0.02))(y)
    for i in range(3):
        one = reg.adaptive_conformal_intervals(y[i], loc, scores, gamma=0.02)
        np.testing.assert_array_equal(np.asarray(batch.covered[i]), np.asarray(one.covered))
        for a, b in zip(batch, one, strict=True):
            np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-12 if X64 else 1e-6)


def test_bad_input_raises_naming_the_argument():
    y, loc, scores = np.zeros(10), np.zeros(10), np.ones(9)
    with pytest.raises(ValueError, match="gamma"):
        reg.adaptive_conformal_intervals(y, loc, scores, gamma=-0.1)
    with pytest.raises(ValueError, match="scores"):
        reg.adaptive_conformal_intervals(y, loc, -scores)
    with pytest.raises(ValueError, match="scores"):
        reg.adaptive_conformal_intervals(y, loc, np.where(scores > 0, np.nan, 0))
    with pytest.raises(ValueError, match="loc"):
        reg.adaptive_conformal_intervals(y, loc[:-1], scores)
    with pytest.raises(ValueError, match="scale"):
        reg.adaptive_conformal_intervals(y, loc, scores, -np.ones(10))
    with pytest.raises(ValueError, match="alpha"):
        reg.adaptive_conformal_intervals(y, loc, scores, alpha=1.5)
    with pytest.raises(TypeError, match="window"):
        reg.adaptive_conformal_intervals(y, loc, scores, window="yes")
