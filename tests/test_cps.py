"""Split conformal predictive systems (``fit_conformal_predictive``).

References:
- crepes 0.9 (Bostrom et al.), ``ConformalPredictiveSystem``: ``fit(residuals,
  sigmas, bins)``, ``predict(y_hat, sigmas, bins, y=, smoothing=False)`` (the CPD at
  y, ``(#{C <= y} + 1) / (n + 1)``), ``predict_int`` and ``predict_percentiles`` (the
  ``floor(p (n + 1))``-th and ``ceil(p (n + 1))``-th smallest ``C``), and ``evaluate(...,
  metrics=["CRPS"])`` (the CRPS of the empirical distribution of the ``C``):
  equal values on the same data, plain, normalized and Mondrian, where crepes' float
  ranks are exact.
- ``crps_draws`` of the CPD's values (the same empirical distribution).
- Vovk et al. (2017), Prop. 1: the smoothed CPD at the outcome is uniform on
  exchangeable data, and a central interval covers with probability
  ``(k_hi - k_lo) / (n + 1)``; checked over 2,000 simulated calibration sets within 4
  binomial standard errors.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from bayescal import core
from bayescal import regression as reg
from bayescal._src import host
from tests.conftest import X64
from tests.test_host_path import assert_same, both

DT = np.float64 if X64 else np.float32
RTOL = 1e-12 if X64 else 1e-5


def _data(seed=0, n=200, groups=3):
    r = np.random.default_rng(seed)
    x = r.uniform(0, 3, n)
    g = r.integers(0, groups, n)
    y = np.sin(x) + (0.3 + 0.5 * g) * r.standard_t(5, n)
    loc = 0.9 * np.sin(x)
    scale = 0.4 + 0.3 * x
    return y.astype(DT), loc.astype(DT), scale.astype(DT), g


def _crepes(y, loc, scale, g, normalized, mondrian):
    from crepes import ConformalPredictiveSystem

    return ConformalPredictiveSystem().fit(
        (y - loc).astype(np.float64),
        sigmas=scale.astype(np.float64) if normalized else None,
        bins=g if mondrian else None,
    )


MODES = [(False, False), (True, False), (False, True), (True, True)]


# --------------------------------------------------------------------------- crepes
@pytest.mark.parametrize(("normalized", "mondrian"), MODES)
def test_values_equal_crepes(normalized, mondrian):
    y, loc, scale, g = _data(1, n=157)  # group sizes with no float-rounded rank
    yt, loct, scalet, gt = _data(2, n=60)
    cps = reg.fit_conformal_predictive(
        y, loc, scale if normalized else None, groups=g if mondrian else None
    )
    dist = cps(loct, scalet if normalized else None, groups=gt if mondrian else None)
    ref = _crepes(y, loc, scale, g, normalized, mondrian)
    kw = {
        "sigmas": scalet.astype(np.float64) if normalized else None,
        "bins": gt if mondrian else None,
    }
    y_hat = loct.astype(np.float64)
    p_ref = ref.predict(y_hat, y=yt.astype(np.float64), smoothing=False, **kw)
    np.testing.assert_allclose(np.asarray(dist.pit(yt)), p_ref, rtol=RTOL)
    for confidence in (0.8, 0.5):
        lo, hi = dist.interval(confidence)
        int_ref = ref.predict_int(y_hat, confidence=confidence, **kw)
        np.testing.assert_allclose(np.asarray(lo), int_ref[:, 0], rtol=RTOL, atol=1e-6)
        np.testing.assert_allclose(np.asarray(hi), int_ref[:, 1], rtol=RTOL, atol=1e-6)
    levels = [0.1, 0.37, 0.5, 0.93]
    q_ref = ref.predict_percentiles(y_hat, higher_percentiles=[100 * v for v in levels], **kw)
    np.testing.assert_allclose(np.asarray(dist.quantile(levels)).T, q_ref, rtol=RTOL, atol=1e-6)
    crps_ref = ref.evaluate(y_hat, yt.astype(np.float64), metrics=["CRPS"], **kw)["CRPS"]
    if normalized:
        # crepes 0.9's get_crps multiplies the partial step around y by sigma although
        # (y - cpd[i]) is already in y's units: its normalized CRPS is off. The
        # reference here is the empirical CRPS of crepes' own CPDs, in numpy:
        # mean |C - y| - mean |C - C'| / 2 (Gneiting & Raftery 2007, Eq. 20).
        cpds = ref.predict_cpds(y_hat, cpds_by_bins=False, **kw)
        crps_ref = np.mean(
            [
                np.mean(np.abs(c - t)) - np.mean(np.abs(c[:, None] - c[None, :])) / 2
                for c, t in zip(cpds, yt.astype(np.float64), strict=True)
            ]
        )
    np.testing.assert_allclose(float(dist.crps(yt)), crps_ref, rtol=1e-10 if X64 else 1e-5)


def test_crps_equals_crps_draws_of_the_cpd_values():
    y, loc, scale, _ = _data(3, n=120)
    yt, loct, scalet, _ = _data(4, n=30)
    cps = reg.fit_conformal_predictive(y, loc, scale)
    values = loct[None, :] + scalet[None, :] * np.asarray(cps.residuals)[:, None]  # [n, N]
    want = reg.crps_draws(yt, values.astype(DT), reduction="none")
    got = cps(loct, scalet).crps(yt, reduction="none")
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10 if X64 else 2e-5)


def test_exact_percentile_ranks_where_crepes_rounds():
    # crepes computes int((1 - 0.8) / 2 * 100 / 100 * (n + 1)) in floats: for n + 1 = 100,
    # 0.09999999999999998 * 100 gives index 9 - 1 where floor(0.1 * 100) = 10 is the rank
    from crepes import ConformalPredictiveSystem

    r = np.random.default_rng(5)
    res = r.normal(size=99)
    cps = reg.fit_conformal_predictive(res.astype(DT), np.zeros(99, DT))
    lo, hi = cps(np.zeros(1, DT)).interval(0.8)
    s = np.sort(res)
    assert math.floor(0.1 * 100) == 10 and math.ceil(0.9 * 100) == 90
    np.testing.assert_allclose(float(lo[0]), s[9], rtol=RTOL)
    np.testing.assert_allclose(float(hi[0]), s[89], rtol=RTOL)
    ref = ConformalPredictiveSystem().fit(res).predict_int(np.zeros(1), confidence=0.8)
    assert ref[0, 0] == s[8]  # crepes: one rank lower


# --------------------------------------------------------------------------- properties
def test_smoothed_pit_lies_between_the_cdf_limits_and_is_uniform():
    y, loc, scale, _ = _data(6, n=99)
    yt, loct, scalet, _ = _data(7, n=3000)
    dist = reg.fit_conformal_predictive(y, loc, scale)(loct, scalet)
    smooth = np.asarray(dist.pit(yt, key=jax.random.key(0)))
    upper = np.asarray(dist.pit(yt))
    n = 99
    assert np.all(smooth <= upper + 1e-7) and np.all(smooth >= upper - (n + 1) / (n + 1) ** 2 - 1e-7)
    # the same key twice: the same values; an int seed is its key
    np.testing.assert_array_equal(smooth, np.asarray(dist.pit(yt, key=0)))
    # uniform given the calibration set only on average; the test points share one
    # calibration set, so test uniformity across calibration sets below instead


def test_coverage_and_uniformity_by_simulation():
    # 2,000 calibration sets of n = 39 heavy-tailed residuals, one test point each:
    # the smoothed PIT is uniform (Kolmogorov-Smirnov, seed fixed) and the central 80%
    # interval covers with probability (ceil(0.9 * 40) - floor(0.1 * 40)) / 40 = 0.8.
    reps, n = 2000, 39
    r = np.random.default_rng(8)
    y = r.standard_t(3, size=(reps, n)).astype(DT)
    yt = r.standard_t(3, size=(reps, 1)).astype(DT)
    zeros = np.zeros(n, DT)
    keys = jax.random.split(jax.random.key(1), reps)

    def one(yc, t, key):
        dist = reg.fit_conformal_predictive(yc, zeros)(jnp.zeros(1, DT))
        lo, hi = dist.interval(0.8)
        return dist.pit(t, key=key)[0], (lo[0] <= t[0]) & (t[0] <= hi[0])

    pit, covered = jax.jit(jax.vmap(one))(y, yt, keys)
    assert scipy.stats.kstest(np.asarray(pit), "uniform").pvalue > 0.01
    exact = (math.ceil(0.9 * 40) - math.floor(0.1 * 40)) / 40
    se = math.sqrt(exact * (1 - exact) / reps)
    assert abs(float(np.mean(covered)) - exact) < 4 * se


def test_pit_values_feed_the_regression_metrics():
    y, loc, scale, g = _data(9, n=300)
    yt, loct, scalet, gt = _data(10, n=500)
    dist = reg.fit_conformal_predictive(y, loc, scale, groups=g)(loct, scalet, groups=gt)
    u = dist.pit(yt, key=1)
    assert 0 <= float(reg.calibration_error(u)) < 0.1
    assert reg.calibration_error_test(jax.random.key(2), u).pvalue > 0.001


# --------------------------------------------------------------------------- contract
def test_jit_equals_eager_and_vmap_equals_loop():
    y, loc, scale, g = _data(11)
    yt, loct, scalet, gt = _data(12, n=40)
    eager = reg.fit_conformal_predictive(y, loc, scale, groups=g)
    traced = jax.jit(
        lambda a, b, c, d: reg.fit_conformal_predictive(a, b, c, groups=d, num_groups=3)
    )(y, loc, scale, g)
    # (y - loc) / scale may round differently in the two programs (1 ulp)
    np.testing.assert_allclose(np.asarray(traced.residuals), np.asarray(eager.residuals), rtol=RTOL)
    np.testing.assert_array_equal(np.asarray(traced.counts), np.asarray(eager.counts))

    def evaluate(cps, yt, loct, scalet, gt):
        dist = cps(loct, scalet, groups=gt)
        return dist.pit(yt), dist.interval(0.8), dist.quantile([0.25, 0.75]), dist.crps(yt)

    want = evaluate(eager, yt, loct, scalet, gt)
    got = jax.jit(evaluate)(eager, yt, loct, scalet, gt)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=1e-6)

    ys = np.stack([_data(s)[0] for s in (13, 14, 15)])
    batch = jax.vmap(lambda a: reg.fit_conformal_predictive(a, loc, scale, groups=g, num_groups=3))(ys)
    for i in range(3):
        one = reg.fit_conformal_predictive(ys[i], loc, scale, groups=g)
        np.testing.assert_allclose(np.asarray(batch.residuals[i]), np.asarray(one.residuals), rtol=RTOL)
        np.testing.assert_array_equal(np.asarray(batch.counts[i]), np.asarray(one.counts))


@pytest.mark.parametrize(("normalized", "mondrian"), MODES)
def test_host_twins_equal_the_kernels(normalized, mondrian):
    y, loc, scale, g = _data(16)
    yt, loct, scalet, gt = _data(17, n=50)
    s, st = (scale, scalet) if normalized else (None, None)
    gg, ggt = (g, gt) if mondrian else (None, None)
    for call in (
        lambda: reg.fit_conformal_predictive(y, loc, s, groups=gg),
        lambda: reg.fit_conformal_predictive(y, loc, s, groups=gg)(loct, st, groups=ggt).pit(yt),
        lambda: reg.fit_conformal_predictive(y, loc, s, groups=gg)(loct, st, groups=ggt).interval(0.7),
        lambda: reg.fit_conformal_predictive(y, loc, s, groups=gg)(loct, st, groups=ggt).quantile(0.3),
        lambda: reg.fit_conformal_predictive(y, loc, s, groups=gg)(loct, st, groups=ggt).crps(yt),
    ):
        got, want, answered = both(call)
        assert answered and all(answered)
        assert_same(got, want)


def test_save_and_load(tmp_path):
    y, loc, scale, g = _data(18)
    for cps in (
        reg.fit_conformal_predictive(y, loc),
        reg.fit_conformal_predictive(y, loc, scale, groups=g),
    ):
        path = tmp_path / "cps.npz"
        core.save_calibrator(cps, path)
        back = core.load_calibrator(path)
        assert back == cps
        path.unlink()


def test_a_file_with_unsorted_residuals_or_wrong_counts_is_refused(tmp_path):
    y, loc, _, g = _data(19)
    cps = reg.fit_conformal_predictive(y, loc, groups=g)
    for bad in (
        cps.__class__(cps.residuals[::-1], cps.counts, cps.normalized, cps.num_groups),
        cps.__class__(cps.residuals, cps.counts + 1, cps.normalized, cps.num_groups),
    ):
        with pytest.raises(ValueError, match="could not be loaded"):
            core.save_calibrator(bad, tmp_path / "bad.npz")


# --------------------------------------------------------------------------- bad input
def test_bad_input_raises_naming_the_argument():
    y, loc, scale, g = _data(20)
    with pytest.raises(ValueError, match="y_true"):
        reg.fit_conformal_predictive(np.where(np.arange(y.size) == 3, np.nan, y), loc)
    with pytest.raises(ValueError, match="scale"):
        reg.fit_conformal_predictive(y, loc, -scale)
    with pytest.raises(ValueError, match="groups 1 have no calibration"):
        reg.fit_conformal_predictive(y, loc, groups=np.where(g == 1, 2, g))
    with pytest.raises(ValueError, match="num_groups is only used with groups"):
        reg.fit_conformal_predictive(y, loc, num_groups=2)
    plain = reg.fit_conformal_predictive(y, loc)
    mondrian = reg.fit_conformal_predictive(y, loc, scale, groups=g)
    with pytest.raises(ValueError, match="pass the test predictions' scale"):
        mondrian(loc)
    with pytest.raises(ValueError, match="pass the test points' groups"):
        mondrian(loc, scale)
    with pytest.raises(ValueError, match="fitted without groups"):
        plain(loc, groups=g)
    with pytest.raises(ValueError, match="shape of loc"):
        mondrian(loc, scale[:-1], groups=g)
    with pytest.raises(ValueError, match=r"groups.*\[0, 2\]"):
        mondrian(loc, scale, groups=np.where(g == 2, 5, g)).pit(y)
    with pytest.raises(ValueError, match="scale"):
        mondrian(loc, -scale, groups=g).interval(0.9)
    with pytest.raises(ValueError, match="y_true"):
        plain(loc).pit(y[:-1])
    with pytest.raises(ValueError, match="levels must be in"):
        plain(loc).quantile([0.5, 1.5])
    with pytest.raises(ValueError, match="coverage"):
        plain(loc).interval(1.5)
    with pytest.raises(ValueError, match="reduction"):
        plain(loc).crps(y, reduction="median")
    with host.disabled():
        with pytest.raises(ValueError, match="loc"):
            plain(np.where(np.arange(y.size) == 0, np.inf, loc)).quantile(0.5)
