"""Classification metrics: reliability curves, ECE (plug-in and debiased), proper
scores, Brier decompositions, sharpness, multiclass errors."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sklearn.calibration
import sklearn.isotonic
import sklearn.metrics

from bayescal.classification import (
    brier_decomposition,
    brier_decomposition_binned,
    brier_score,
    expected_calibration_error,
    log_loss,
    marginal_calibration_error,
    prediction_sharpness,
    reliability_curve,
    top_label_calibration_error,
)
from tests import _kernels as kernels
from tests.conftest import X64

DTYPE = np.float64 if X64 else np.float32
RTOL = 1e-10 if X64 else 2e-5


def _calibrated(rng, n, dtype=DTYPE):
    p = rng.uniform(size=n).astype(dtype)
    return (rng.uniform(size=n) < p).astype(dtype), p


# --- reliability curve vs scikit-learn 1.9 sklearn.calibration.calibration_curve ---
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_reliability_curve_matches_sklearn_calibration_curve(rng, strategy):
    # sklearn bins are (e_k, e_{k+1}] and it drops empty bins; ours are [e_k, e_{k+1})
    # and keep them. On continuous data where no value sits on an edge the non-empty
    # bins must agree exactly. n = 1000, 10 quantile bins: the quantile positions
    # 99.9 k are never integers, so quantile edges fall strictly between data points.
    y, p = _calibrated(rng, 1000)
    p = (p * 0.8 + 0.05).astype(DTYPE)  # leaves the outer uniform bins empty
    bins = 10
    curve = reliability_curve(y, p, bins=bins, strategy=strategy)
    prob_true, prob_pred = sklearn.calibration.calibration_curve(
        y, p, n_bins=bins, strategy=strategy
    )
    edges = (
        np.linspace(0, 1, bins + 1)
        if strategy == "uniform"
        else np.quantile(p.astype(np.float64), np.linspace(0, 1, bins + 1))
    )
    gap = np.abs(p.astype(np.float64)[:, None] - edges[1:-1][None, :]).min()
    assert gap > 1e-6  # the premise: no value on an interior edge
    nonempty = np.asarray(curve.weight) > 0
    if strategy == "uniform":
        assert not nonempty.all()  # empty bins are kept, with weight 0
    np.testing.assert_allclose(np.asarray(curve.observed)[nonempty], prob_true, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(curve.expected)[nonempty], prob_pred, rtol=RTOL)
    assert int(np.asarray(curve.weight).sum()) == p.size
    assert curve.expected.shape == (bins,)


def test_reliability_curve_empty_bins_midpoint_and_no_nan():
    y = np.array([0, 1, 1, 0], DTYPE)
    p = np.array([0.05, 0.1, 0.92, 0.97], DTYPE)
    c = reliability_curve(y, p, bins=4)
    np.testing.assert_array_equal(c.weight, [2, 0, 0, 2])
    np.testing.assert_allclose(c.expected[1:3], [0.375, 0.625], rtol=1e-6)
    np.testing.assert_allclose(c.observed[1:3], [0.375, 0.625], rtol=1e-6)
    assert not np.isnan(np.asarray(c.observed)).any()
    e = expected_calibration_error(y, p, bins=4)
    ref = (2 * abs(0.5 - 0.075) + 2 * abs(0.5 - 0.945)) / 4  # hand computation
    np.testing.assert_allclose(e, ref, rtol=1e-6)
    np.testing.assert_allclose(
        expected_calibration_error(y, p, bins=4, norm="max"), 0.445, rtol=1e-5
    )


def test_reliability_curve_edge_conventions_and_explicit_edges():
    # [e_k, e_{k+1}) with the last bin closed: 0.5 goes up, 1.0 stays in the last bin
    y = np.array([0, 1, 1, 1], DTYPE)
    p = np.array([0.0, 0.5, 0.7, 1.0], DTYPE)
    c = reliability_curve(y, p, bins=np.array([0.0, 0.5, 1.0]))
    np.testing.assert_array_equal(c.weight, [1, 3])
    np.testing.assert_array_equal(reliability_curve(y, p, bins=2).weight, [1, 3])


def test_reliability_curve_quantile_duplicate_edges():
    # half the predictions are exactly 0: duplicated quantile edges give empty bins,
    # every observation is counted once
    p = np.array([0.0] * 10 + list(np.linspace(0.1, 0.9, 10)), DTYPE)
    y = (np.arange(20) % 2).astype(DTYPE)
    c = reliability_curve(y, p, bins=5, strategy="quantile")
    w = np.asarray(c.weight)
    assert w.sum() == 20 and (w == 0).sum() >= 1
    # numpy quantile edges: [0, 0, 0, 0.2244, 0.5622, 0.9]; bins 0 and 1 are [0, 0)
    # (empty), bin 2 = [0, 0.2244) holds the ten zeros and 0.1, 0.1889
    np.testing.assert_array_equal(w, [0, 0, 12, 4, 4])
    np.testing.assert_allclose(c.expected[2], (0.1 + (0.1 + 0.8 / 9)) / 12, rtol=1e-5)


def test_reliability_curve_fd_and_weights(rng):
    y, p = _calibrated(rng, 500)
    edges = np.histogram_bin_edges(p.astype(np.float64), "fd", range=(0, 1))
    c = reliability_curve(y, p, bins="fd")
    assert c.weight.shape == (edges.size - 1,)
    c2 = reliability_curve(y, p, bins=edges)
    np.testing.assert_array_equal(c.weight, c2.weight)
    w = rng.uniform(0.5, 2.0, size=500).astype(DTYPE)
    cw = reliability_curve(y, p, bins=5, weights=w)
    idx = np.minimum((p * 5).astype(int), 4)
    ref_w = np.bincount(idx, weights=w, minlength=5)
    ref_obs = np.bincount(idx, weights=w * y, minlength=5) / ref_w
    np.testing.assert_allclose(cw.weight, ref_w, rtol=1e-5)
    np.testing.assert_allclose(cw.observed, ref_obs, rtol=1e-5)


# --- ECE ---
def test_ece_plugin_matches_hand_computation(rng):
    y, p = _calibrated(rng, 300)
    idx = np.minimum((p.astype(np.float64) * 15).astype(int), 14)
    n = np.bincount(idx, minlength=15)
    ok = n > 0
    ybar = np.bincount(idx, weights=y, minlength=15)[ok] / n[ok]
    pbar = np.bincount(idx, weights=p, minlength=15)[ok] / n[ok]
    w = n[ok] / 300
    np.testing.assert_allclose(
        expected_calibration_error(y, p), np.sum(w * np.abs(ybar - pbar)), rtol=1e-5
    )
    np.testing.assert_allclose(
        expected_calibration_error(y, p, norm="l2"),
        np.sqrt(np.sum(w * (ybar - pbar) ** 2)),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        expected_calibration_error(y, p, norm="max"), np.abs(ybar - pbar).max(), rtol=1e-5
    )


def test_debiased_l2_matches_formula_by_hand():
    # Kumar, Liang & Ma (2019) Def. 5.2, computed by hand on two bins of [0, 0.5), [0.5, 1]
    y = np.array([0, 1, 0, 0, 1, 1, 1, 0, 1], DTYPE)
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95], DTYPE)
    # bin 0: n=4, ybar=1/4, pbar=0.25; bin 1: n=5, ybar=4/5, pbar=0.79
    sq = (4 / 9) * ((0.25 - 0.25) ** 2 - 0.25 * 0.75 / 3) + (5 / 9) * (
        (0.8 - 0.79) ** 2 - 0.8 * 0.2 / 4
    )
    ref = np.sqrt(max(sq, 0.0))  # sq < 0 here -> 0
    assert ref == 0.0
    got = expected_calibration_error(y, p, bins=2, norm="l2", debias=True)
    np.testing.assert_allclose(got, ref, atol=1e-7)
    # an overconfident case where the corrected square stays positive; reference by
    # explicit loops over the bins (one bin holds a single point: contributes 0)
    rng = np.random.default_rng(5)
    p2 = np.concatenate([rng.uniform(0.0, 0.3, 30), rng.uniform(0.7, 1.0, 30), [0.5]])
    y2 = np.concatenate([rng.uniform(size=30) < 0.4, rng.uniform(size=30) < 0.6, [1]])
    p2, y2 = p2.astype(DTYPE), y2.astype(DTYPE)
    idx = np.minimum((p2.astype(np.float64) * 3).astype(int), 2)
    total = 0.0
    for k in range(3):
        yk, pk = y2[idx == k].astype(np.float64), p2[idx == k].astype(np.float64)
        m = yk.size
        if m >= 2:
            ybar = yk.mean()
            total += m / p2.size * ((ybar - pk.mean()) ** 2 - ybar * (1 - ybar) / (m - 1))
    assert total > 0
    got2 = expected_calibration_error(y2, p2, bins=3, norm="l2", debias=True)
    np.testing.assert_allclose(got2, np.sqrt(total), rtol=1e-5)
    assert float(got2) < float(expected_calibration_error(y2, p2, bins=3, norm="l2"))


@pytest.mark.slow
def test_debiased_estimators_have_smaller_bias_on_calibrated_data():
    # 200 calibrated data sets of n = 500 (fixed seed): p ~ U(0, 1), y ~ Bernoulli(p),
    # 10 uniform bins. Within a bin E[ybar_k | p] = pbar_k, so the binned calibration
    # error is exactly 0 and bias = mean estimate.
    # Plug-in L2: E[ECE_2^2] = sum_k (n_k/n) Var(ybar_k) ~ sum_k pbar_k (1-pbar_k) / n
    # ~ 10 * (1/6) / 500 = 3.3e-3, so ECE_2 ~ 0.055. The debiased square S has mean
    # -sum_k (n_k/n) sd_k(p)^2 / (n_k - 1) ~ -2e-5 (p varies within bins) and sd
    # ~ sqrt(sum_k (n_k/n)^2 2 Var(ybar_k)^2) ~ 1.5e-3, so sqrt(max(S, 0)) has mean
    # ~ sqrt(1.5e-3) * E[sqrt(max(Z, 0))] ~ 0.039 * 0.41 ~ 0.016. Across the 200 sets
    # the plug-in's sd is ~0.01 (Monte-Carlo error of its mean ~7e-4), so "debiased
    # mean < 0.5 x plug-in mean" holds with a margin of >20 standard errors.
    rng = np.random.default_rng(20190527)
    p = rng.uniform(size=(200, 500)).astype(DTYPE)
    y = (rng.uniform(size=(200, 500)) < p).astype(DTYPE)
    y, p = jnp.asarray(y), jnp.asarray(p)

    def ece(norm, debias):
        key = 0 if (debias and norm == "l1") else None  # only the L1 debiasing resamples
        f = functools.partial(
            expected_calibration_error,
            bins=10,
            norm=norm,
            debias=debias,
            num_samples=200,
            key=key,
        )
        return np.asarray(jax.vmap(f)(y, p), np.float64)

    plug2, deb2 = ece("l2", False), ece("l2", True)
    assert np.all(deb2 <= plug2 + 1e-7)
    assert 0.045 < plug2.mean() < 0.065
    assert abs(deb2.mean()) < 0.5 * plug2.mean()
    # L1 (resampling correction): with zero true gaps and ybar_k - pbar_k ~ N(0, s_k^2),
    # the plug-in has mean sum_k (n_k/n) s_k sqrt(2/pi) (~0.044 here). A redraw around
    # ybar_k has |N(0, 2 s_k^2)| in expectation, sqrt(2) times that, so
    # 2 plug-in - resampled has mean (2 - sqrt(2)) ~ 0.59 times the plug-in bias: the
    # correction removes ~41% of the bias at zero gap (it is exact only for gaps large
    # against the noise). Monte-Carlo error of the ratio of means is ~0.02, so we check
    # 0.45 < ratio < 0.72 around 0.59.
    plug1, deb1 = ece("l1", False), ece("l1", True)
    assert abs(deb1.mean()) < plug1.mean()
    assert 0.45 < deb1.mean() / plug1.mean() < 0.72


def test_debiased_l1_resampling_options_and_key():
    y = np.array([0, 1, 0, 0, 1, 1, 1, 0, 1, 1], DTYPE)
    p = np.linspace(0.05, 0.95, 10).astype(DTYPE)
    a = expected_calibration_error(y, p, bins=2, debias=True, key=0)
    b = expected_calibration_error(y, p, bins=2, debias=True, key=jax.random.key(0))
    np.testing.assert_array_equal(a, b)  # documented default key
    c = expected_calibration_error(y, p, bins=2, debias=True, key=jax.random.key(1))
    assert float(a) != float(c)
    plug = float(expected_calibration_error(y, p, bins=2))
    normal = float(
        expected_calibration_error(y, p, bins=2, debias=True, method="normal", key=0)
    )
    assert normal < plug and float(a) < plug


# --- jit, vmap, dtype ---
def test_metrics_jit_equals_eager_and_vmap_equals_loop(rng):
    y, p = _calibrated(rng, 200)
    probs = np.clip(p[None, :] + rng.normal(0, 0.1, size=(3, 200)), 0, 1).astype(DTYPE)
    for strategy in ("uniform", "quantile"):
        f = functools.partial(expected_calibration_error, bins=8, strategy=strategy)
        np.testing.assert_allclose(jax.jit(f)(y, p), f(y, p), rtol=1e-6)
        batched = jax.vmap(f, in_axes=(None, 0))(jnp.asarray(y), jnp.asarray(probs))
        loop = [f(y, probs[i]) for i in range(3)]
        np.testing.assert_allclose(batched, loop, rtol=1e-6)
        r = functools.partial(reliability_curve, bins=8, strategy=strategy)
        cb = jax.vmap(r, in_axes=(None, 0))(jnp.asarray(y), jnp.asarray(probs))
        for i in range(3):
            ci = r(y, probs[i])
            np.testing.assert_allclose(cb.observed[i], ci.observed, rtol=1e-6)
            np.testing.assert_array_equal(cb.weight[i], ci.weight)
    for fn in (
        brier_score,
        log_loss,
        lambda a, b: brier_decomposition(a, b).miscalibration,
    ):
        np.testing.assert_allclose(jax.jit(fn)(y, p), fn(y, p), rtol=1e-6)
        loop = [fn(y, probs[i]) for i in range(3)]
        np.testing.assert_allclose(
            jax.vmap(fn, in_axes=(None, 0))(y, probs), loop, rtol=1e-6
        )


def test_results_keep_input_dtype(rng):
    y, p = _calibrated(rng, 50, np.float32)
    for value in (
        expected_calibration_error(y, p),
        expected_calibration_error(y, p, debias=True, key=0),
        brier_score(y, p),
        log_loss(y, p),
        brier_decomposition(y, p).discrimination,
        reliability_curve(y, p).observed,
        prediction_sharpness(p).variance,
    ):
        assert value.dtype == jnp.float32
    assert jnp.issubdtype(reliability_curve(y, p).weight.dtype, jnp.integer)
    if X64:
        y64, p64 = y.astype(np.float64), p.astype(np.float64)
        assert expected_calibration_error(y64, p64).dtype == jnp.float64
        assert brier_decomposition(y64, p64).uncertainty.dtype == jnp.float64


# --- proper scores vs scikit-learn 1.9 sklearn.metrics ---
def test_brier_and_log_loss_match_sklearn(rng):
    y, p = _calibrated(rng, 400)
    p = np.clip(p, 1e-3, 1 - 1e-3).astype(DTYPE)
    np.testing.assert_allclose(
        brier_score(y, p), sklearn.metrics.brier_score_loss(y, p), rtol=RTOL
    )
    np.testing.assert_allclose(log_loss(y, p), sklearn.metrics.log_loss(y, p), rtol=RTOL)
    w = rng.uniform(0.1, 3.0, size=400).astype(DTYPE)
    np.testing.assert_allclose(
        brier_score(y, p, weights=w),
        sklearn.metrics.brier_score_loss(y, p, sample_weight=w),
        rtol=RTOL,
    )
    np.testing.assert_allclose(
        log_loss(y, p, weights=w),
        sklearn.metrics.log_loss(y, p, sample_weight=w),
        rtol=RTOL,
    )


def test_log_loss_from_logits_edges_and_explicit_eps(rng):
    z = rng.normal(0, 3, size=100).astype(DTYPE)
    y = (rng.uniform(size=100) < 0.5).astype(DTYPE)
    p = 1 / (1 + np.exp(-z.astype(np.float64)))
    np.testing.assert_allclose(
        log_loss(y, logits=z), sklearn.metrics.log_loss(y, p), rtol=1e-5
    )
    np.testing.assert_allclose(brier_score(y, logits=z), np.mean((p - y) ** 2), rtol=1e-5)
    # logits far out stay finite and accurate (log-sigmoid, no overflow)
    np.testing.assert_allclose(log_loss([1.0], logits=[-100.0]), 100.0, rtol=1e-6)
    # no silent clipping: an impossible event that happened has infinite loss
    assert np.isinf(float(log_loss([1, 0], [0.0, 0.0])))
    assert float(log_loss([0, 1], [0.0, 1.0])) == 0.0  # 0 log 0 = 0
    eps = float(np.finfo(DTYPE).eps)  # sklearn 1.9 clips at the dtype's eps
    edge = np.array([0.0, 1.0, 0.3], DTYPE)
    ye = np.array([1, 0, 1])
    np.testing.assert_allclose(
        log_loss(ye, edge, eps=eps), sklearn.metrics.log_loss(ye, edge), rtol=1e-5
    )


# --- Brier decompositions ---
def _corp_reference(y, p):
    """Independent CORP: scikit-learn IsotonicRegression (ties pooled) on the same data."""
    y, p = y.astype(np.float64), p.astype(np.float64)
    recal = sklearn.isotonic.IsotonicRegression().fit(p, y).predict(p)
    score = np.mean((p - y) ** 2)
    score_recal = np.mean((recal - y) ** 2)
    unc = np.mean((y.mean() - y) ** 2)
    return score - score_recal, unc - score_recal, unc


def test_corp_decomposition_sums_to_brier_and_matches_reference(rng):
    p = np.round(rng.beta(2, 2, size=600), 2).astype(DTYPE)  # many ties
    y = (rng.uniform(size=600) < p**1.5).astype(DTYPE)
    d = brier_decomposition(y, p)
    tol = 1e-12 if X64 else 1e-6
    np.testing.assert_allclose(
        d.miscalibration - d.discrimination + d.uncertainty, brier_score(y, p), atol=tol
    )
    np.testing.assert_allclose(d, _corp_reference(y, p), atol=10 * tol)
    assert float(d.miscalibration) >= 0 and float(d.discrimination) >= 0
    # a recalibrated forecast has no miscalibration left
    fit = kernels.isotonic_fit(jnp.asarray(p), jnp.asarray(y), jnp.ones(600, DTYPE)).fitted
    np.testing.assert_allclose(brier_decomposition(y, fit).miscalibration, 0, atol=tol)


def test_murphy_decomposition_binned(rng):
    # exact when predictions are constant within bins
    p = rng.choice(np.array([0.05, 0.35, 0.65, 0.95]), size=400).astype(DTYPE)
    y = (rng.uniform(size=400) < 0.8 * p).astype(DTYPE)
    d = brier_decomposition_binned(y, p, bins=4)
    np.testing.assert_allclose(sum([d[0], -d[1], d[2]]), brier_score(y, p), rtol=1e-5)
    # otherwise approximate: the within-bin terms are missing
    q = rng.uniform(size=400).astype(DTYPE)
    yq = (rng.uniform(size=400) < q).astype(DTYPE)
    dq = brier_decomposition_binned(yq, q, bins=3)
    assert abs(float(dq[0] - dq[1] + dq[2] - brier_score(yq, q))) > 1e-4


def test_prediction_sharpness():
    s = prediction_sharpness(np.array([0.0, 1.0, 0.5, 0.5], DTYPE))
    np.testing.assert_allclose(s.variance, 0.125, rtol=1e-6)
    np.testing.assert_allclose(s.mean_distance, 0.25, rtol=1e-6)
    flat = prediction_sharpness(np.full(5, 0.3, DTYPE))
    np.testing.assert_allclose(flat, [0.0, 0.2], atol=1e-7)


# --- multiclass ---
def _softmax_probs(rng, n=300, c=4, scale=2.0):
    z = rng.normal(size=(n, c)) * scale
    probs = np.exp(z - z.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    y = np.array([rng.choice(c, p=row) for row in probs])
    sharp = np.exp(1.5 * z - (1.5 * z).max(1, keepdims=True))
    return y, (sharp / sharp.sum(1, keepdims=True)).astype(DTYPE)


def test_top_label_and_marginal_reduce_to_binary(rng):
    y, probs = _softmax_probs(rng)
    conf = probs.max(1)
    correct = (probs.argmax(1) == y).astype(DTYPE)
    np.testing.assert_allclose(
        top_label_calibration_error(y, probs, bins=10),
        expected_calibration_error(correct, conf, bins=10),
        rtol=1e-6,
    )
    per = [
        expected_calibration_error((y == k).astype(DTYPE), probs[:, k], bins=10, norm="l2")
        for k in range(4)
    ]
    got = marginal_calibration_error(y, probs, bins=10, norm="l2", per_class=True)
    np.testing.assert_allclose(got, per, rtol=1e-5)
    np.testing.assert_allclose(
        marginal_calibration_error(y, probs, bins=10, norm="l2"),
        np.sqrt(np.mean(np.square(per))),
        rtol=1e-5,
    )
    l1 = [expected_calibration_error((y == k).astype(DTYPE), probs[:, k]) for k in range(4)]
    np.testing.assert_allclose(marginal_calibration_error(y, probs), np.mean(l1), rtol=1e-5)
    fd = marginal_calibration_error(y, probs, bins="fd", per_class=True)
    assert fd.shape == (4,)
    q = marginal_calibration_error(y, probs, strategy="quantile", debias=True, norm="l2")
    assert np.isfinite(float(q))


def test_a_zero_weight_removes_its_term_even_where_the_score_is_infinite():
    # issue "Nothing lost, nothing silent", item 13: the first observation scores +inf
    # (label 1 at probability 0) but has weight 0; the weighted mean is the second
    # term alone, log 2 (was NaN from 0 * inf).
    from bayescal.classification import log_loss

    got = log_loss([1, 1], [0.0, 0.5], weights=[0.0, 1.0])
    np.testing.assert_allclose(float(got), np.log(2.0), rtol=1e-6)
    assert np.isinf(float(log_loss([1, 1], [0.0, 0.5], weights=[0.5, 1.0])))


# --- one default bin count (issue 21) ---
def test_binned_functions_share_one_default_bin_count(rng):
    import inspect

    from bayescal import classification as clf
    from bayescal.classification import _multiclass

    fns = [
        clf.reliability_curve,
        clf.expected_calibration_error,
        clf.bootstrap_reliability_curve,
        clf.brier_decomposition_binned,
        clf.reliability_accumulator,
        _multiclass.top_label_calibration_error,
        _multiclass.marginal_calibration_error,
    ]
    defaults = {f.__name__: inspect.signature(f).parameters["bins"].default for f in fns}
    assert set(defaults.values()) == {15}, defaults
    # the default curve is the one the default ECE sums over: ECE = the count-weighted
    # mean gap of reliability_curve(y, p) (Guo et al. 2017, eq. 3), the same 15 bins
    y, p = _calibrated(rng, 3000)
    p = np.clip(p * 1.3 - 0.15, 0, 1).astype(DTYPE)  # miscalibrated
    c = clf.reliability_curve(y, p)
    assert c.expected.shape == (15,)
    w = np.asarray(c.weight, np.float64)
    gap = np.abs(np.asarray(c.observed, np.float64) - np.asarray(c.expected, np.float64))
    np.testing.assert_allclose(
        float(clf.expected_calibration_error(y, p)), (w * gap).sum() / w.sum(), rtol=1e-4
    )


# Issue "Verdicts a user can trust", item 5: probabilities passed as logits= gave a
# plausible, wrong log-loss (0.437 where it is 0.112), without a word.
@pytest.mark.parametrize("fn", [log_loss, brier_score], ids=["log_loss", "brier"])
def test_probabilities_passed_as_logits_warn(fn):
    import warnings

    rng = np.random.default_rng(3)
    p = rng.uniform(0.02, 0.98, size=200)
    y = (rng.uniform(size=200) < p).astype(float)
    # checked in host memory only: a JAX array counts on the CPU backend, not on a GPU
    # (no device-to-host copy for a warning; this test failed on an H200 before)
    on_host = jax.default_backend() == "cpu"
    for given in (p, p.tolist()) + ((jnp.asarray(p),) if on_host else ()):
        with pytest.warns(UserWarning, match="look like probabilities, not log-odds"):
            wrong = fn(y, logits=given)
        # the warning is right: the value is not the score of these probabilities
        assert abs(float(wrong) - float(fn(y, p))) > 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # real log-odds, or probabilities as y_prob: silent
        fn(y, logits=np.log(p / (1 - p)))
        fn(y, p)
        jax.jit(lambda z: fn(y, logits=z))(p)  # traced: not checked
