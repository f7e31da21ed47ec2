"""Bayesian binning into quantiles (fit_bbq) against a NumPy reference of the paper.

The reference below is written from Naeini, Cooper & Hauskrecht (2015, AAAI), the
BDeu score of their eq. for P(D | M), and pycalib's ``_binning_model_logscore`` /
``BayesianBinningQuantiles._fit_binary`` (Wenger et al.): equal-frequency edges by
``np.quantile`` with the outer edges 0 and 1 and a running maximum, bins by
``np.digitize(right=False)`` with the last one closed, softmax model weights.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

import bayescal.classification as clf
from bayescal._src.bucketing import bucket_size
from bayescal.classification._bbq import model_range

X64 = bool(jax.config.jax_enable_x64)
DT = np.float64 if X64 else np.float32
# x64: the reference's own rounding. float32: the log-scores are sums of lgamma of
# counts of magnitude ~N ln 2 (~230 at N = 333); float32 keeps ~1e-7 of each term, so
# they move by up to ~1e-4 and the weights by that relative amount (measured: 1e-6).
TOL = 1e-6 if X64 else 1e-4


def _brute_range(n, c):
    """B_min, B_max by integer search (the definitions, no cube roots)."""
    b_min = max(1, max(k for k in range(n + 1) if (k * c) ** 3 <= n))
    b_max = min(-(-n // 5), min(k for k in range(10 * n + 10) if k**3 >= c**3 * n))
    return b_min, b_max


def reference(y, p, *, n_prime=2.0, c=10, estimate="frequency", w=None):
    """Log-scores, model weights and the predictor, in float64 from p's own edges."""
    y = np.asarray(y, np.float64)
    p = np.asarray(p)
    w = np.ones(p.shape) if w is None else np.asarray(w, np.float64)
    keep = w > 0
    b_min, b_max = _brute_range(int(keep.sum()), c)
    scores, models = [], []
    for b in range(b_min, b_max + 1):
        q = (np.arange(b + 1) / b).astype(p.dtype)
        e = np.quantile(np.repeat(p[keep], w[keep].astype(int)), q)  # integer weights
        e[0], e[-1] = 0, 1
        e = np.maximum.accumulate(e)
        k = np.clip(np.digitize(p, e, right=False) - 1, 0, b - 1)
        e = e.astype(np.float64)
        n_b = np.bincount(k, weights=w, minlength=b)
        m_b = np.bincount(k, weights=w * y, minlength=b)
        mid = (e[:-1] + e[1:]) / 2
        s = n_prime / b
        a, bb = s * mid, s * (1 - mid)
        a[a == 0] = np.finfo(np.float64).tiny
        bb[bb == 0] = np.finfo(np.float64).tiny
        g = sp.gammaln
        scores.append(
            np.sum(g(s) - g(n_b + s) + g(m_b + a) - g(a) + g(n_b - m_b + bb) - g(bb))
        )
        if estimate == "frequency":
            theta = np.where(n_b > 0, m_b / np.where(n_b > 0, n_b, 1), mid)
        else:
            theta = (m_b + a) / (n_b + s)
        models.append((e, theta))
    scores = np.array(scores)
    weights = np.exp(scores - sp.logsumexp(scores))

    def predict(x):
        out = np.zeros(np.shape(x))
        for wt, (e, theta) in zip(weights, models, strict=True):
            k = np.clip(np.digitize(x, e, right=False) - 1, 0, len(theta) - 1)
            out += wt * theta[k]
        return out

    return scores, weights, models, predict, b_min


def _data(n, seed, grid=0.05):
    r = np.random.default_rng(seed)
    p = np.round(r.uniform(-0.1, 1.1, n) / grid) * grid  # ties, 0 and 1 included
    p = np.clip(p, 0, 1).astype(DT)
    y = (r.uniform(size=n) < p**2).astype(DT)
    return y, p


@pytest.mark.parametrize(
    "n, expected",
    # by hand: 5^(1/3) = 1.71, 27^(1/3) = 3 exactly (Python's 27 ** (1/3) is
    # 3.0000000000000004, pycalib's ceil(10 * that) = 31; ceil(27/5) = 6 decides),
    # 1000^(1/3) = 10, 10000^(1/3) = 21.54: floor(2.154) = 2, ceil(215.4) = 216
    [(5, (1, 1)), (27, (1, 6)), (1000, (1, 100)), (10000, (2, 216))],
)
def test_model_range(n, expected):
    assert model_range(n) == expected == _brute_range(n, 10)


@pytest.mark.parametrize("n", [5, 27, 1000, 10000])
def test_fitted_models_are_the_range(n):
    y, p = _data(n, 0, grid=0.001)
    cal = clf.fit_bbq(y, p)
    b_min, b_max = model_range(n)
    m = model_range(bucket_size(n))[1]  # the tables: B_max of N's bucket
    w = np.asarray(cal.weights)
    assert w.shape == (m,) and cal.edges.shape == (m, m + 1)
    assert np.all(w[: b_min - 1] == 0) and np.all(w[b_max:] == 0)
    assert np.isclose(w[b_min - 1 : b_max].sum(), 1, atol=1e-5)  # (some underflow to 0)


def test_model_range_other_c_matches_integer_search():
    for c in (1, 2.5, 7):
        for n in (1, 2, 8, 26, 27, 28, 64, 125, 343, 999, 1000, 1001, 4096):
            assert model_range(n, c) == _brute_range(n, c), (n, c)


@pytest.mark.parametrize("estimate", ["frequency", "posterior"])
@pytest.mark.parametrize("n, seed", [(7, 0), (40, 1), (333, 2), (1200, 3)])
def test_matches_reference(n, seed, estimate):
    y, p = _data(n, seed)
    cal = clf.fit_bbq(y, p, estimate=estimate)
    _, weights, models, predict, b_min = reference(y, p, estimate=estimate)
    got_w = np.asarray(cal.weights, np.float64)
    stop = b_min - 1 + weights.size
    np.testing.assert_allclose(got_w[b_min - 1 : stop], weights, rtol=0, atol=TOL)
    assert np.all(got_w[: b_min - 1] == 0) and np.all(got_w[stop:] == 0)
    for j, (e, theta) in enumerate(models):
        b = b_min + j
        np.testing.assert_array_equal(np.asarray(cal.edges)[b - 1, : b + 1], e)
        np.testing.assert_allclose(np.asarray(cal.values)[b - 1, :b], theta, atol=TOL)
    # on the data (values on edges), on a grid and between grid points
    x = np.concatenate([p, np.linspace(0, 1, 201), np.linspace(0.0123, 0.9877, 77)])
    x = x.astype(DT)
    np.testing.assert_allclose(np.asarray(cal(x), np.float64), predict(x), atol=TOL)


def test_weights_match_reference_and_repeated_rows():
    y, p = _data(60, 4)
    w = np.random.default_rng(5).integers(0, 4, 60).astype(DT)
    cal = clf.fit_bbq(y, p, weights=w)
    _, weights, _, predict, b_min = reference(y, p, w=w)
    got = np.asarray(cal.weights)  # B_max of the 60 rows: models past the range weigh 0
    np.testing.assert_allclose(got[b_min - 1 : b_min - 1 + weights.size], weights, atol=TOL)
    assert np.all(got[b_min - 1 + weights.size :] == 0)
    np.testing.assert_allclose(np.asarray(cal(p), np.float64), predict(p), atol=TOL)
    # every model B: the same edges and bin values as the fit on repeated rows (the
    # model range differs: it counts rows of positive weight)
    rep = clf.fit_bbq(np.repeat(y, w.astype(int)), np.repeat(p, w.astype(int)))
    m = min(cal.weights.shape[0], rep.weights.shape[0])
    np.testing.assert_array_equal(rep.edges[:m, : m + 1], cal.edges[:m, : m + 1])
    np.testing.assert_allclose(rep.values[:m, :m], cal.values[:m, :m], atol=TOL)


def test_integer_weights_equal_repeated_rows_where_the_range_agrees():
    # c = 1: 30 rows and 40 repeated rows both have B in [3, 4]
    assert model_range(30, 1) == model_range(40, 1) == (3, 4)
    y, p = _data(30, 6)
    w = np.ones(30, DT)
    w[:10] = 2
    cal = clf.fit_bbq(y, p, c=1, weights=w)
    rep = clf.fit_bbq(np.repeat(y, 1 + (w > 1)), np.repeat(p, 1 + (w > 1)), c=1)
    x = np.linspace(0, 1, 101).astype(DT)
    np.testing.assert_allclose(cal(x), rep(x), atol=TOL)
    np.testing.assert_allclose(cal.weights[:4], rep.weights[:4], atol=TOL)


def test_zero_weight_removes_rows():
    y, p = _data(50, 7)
    w = np.ones(50, DT)
    w[::5] = 0
    cal = clf.fit_bbq(y, p, weights=w)
    sub = clf.fit_bbq(y[w > 0], p[w > 0])
    np.testing.assert_allclose(cal.weights, sub.weights, atol=TOL)  # one bucket
    np.testing.assert_allclose(cal(p), sub(p), atol=TOL)


def test_posterior_is_never_zero_or_one():
    # ties at 0 (all negative) and at 1 (all positive): zero-width bins at the ends
    p = np.concatenate([np.zeros(30), np.linspace(0.1, 0.9, 40), np.ones(30)]).astype(DT)
    y = np.concatenate([np.zeros(30), np.arange(40) % 2, np.ones(30)]).astype(DT)
    freq = np.asarray(clf.fit_bbq(y, p).values)
    assert np.any(freq == 0) and np.any(freq == 1)  # pure bins: frequencies 0 and 1
    fit = clf.fit_bbq(y, p, estimate="posterior")
    values, post = np.asarray(fit.values), np.asarray(fit(p))
    assert np.all((values > 0) & (values < 1)) and np.all((post > 0) & (post < 1))
    flipped = 1 - y
    assert np.isfinite(float(clf.log_loss(flipped, post)))


def _fit_with_weights(y, p, w):
    return clf.fit_bbq(y, p, weights=w, estimate="posterior")


def test_jit_equals_eager_and_vmap_equals_loop():
    sets = [_data(48, s) for s in (8, 9, 10)]
    ws = [np.random.default_rng(s).uniform(0.5, 2, 48).astype(DT) for s in (1, 2, 3)]
    x = jnp.linspace(0, 1, 57, dtype=DT)
    for (y, p), w in zip(sets, ws, strict=True):
        eager = _fit_with_weights(y, p, w)
        jitted = jax.jit(_fit_with_weights)(y, p, w)
        assert jitted.edges.shape == eager.edges.shape
        for a, b in zip(
            jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted), strict=True
        ):
            np.testing.assert_allclose(a, b, atol=TOL)
        np.testing.assert_allclose(jax.jit(lambda c: c(x))(eager), eager(x), atol=TOL)
    ys, ps = (jnp.stack(a) for a in zip(*sets, strict=True))
    batched = jax.vmap(_fit_with_weights)(ys, ps, jnp.stack(ws))
    out = jax.vmap(lambda c: c(x))(batched)
    for i, ((y, p), w) in enumerate(zip(sets, ws, strict=True)):
        one = _fit_with_weights(y, p, w)
        np.testing.assert_allclose(batched.weights[i], one.weights, atol=TOL)
        np.testing.assert_allclose(out[i], one(x), atol=TOL)


def test_save_load_round_trip(tmp_path):
    y, p = _data(90, 11)
    cal = clf.fit_bbq(y, p, estimate="posterior", n_prime=3.0, c=4)
    path = os.path.join(tmp_path, "bbq.npz")
    clf.save_calibrator(cal, path)
    back = clf.load_calibrator(path)
    assert back == cal and back.estimate == "posterior" and back.c == 4.0
    assert np.array_equal(back(p), cal(p))
    assert (cal == clf.fit_bbq(y, p)) is False and (cal == 3) is False


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"n_prime": 0.0}, ValueError, "n_prime"),
        ({"n_prime": "2"}, TypeError, "n_prime"),
        ({"c": 0.5}, ValueError, "c must"),
        ({"c": float("inf")}, ValueError, "c must"),
        ({"estimate": "mean"}, ValueError, "estimate"),
        ({"estimate": 1}, TypeError, "estimate"),
        ({"weights": -np.ones(20)}, ValueError, "weights"),
        ({"weights": np.ones(19)}, ValueError, "weights"),
    ],
)
def test_bad_options_name_the_argument(kwargs, exc, name):
    y, p = _data(20, 12)
    with pytest.raises(exc, match=name):
        clf.fit_bbq(y, p, **kwargs)


def test_bad_data_name_the_argument():
    y, p = _data(20, 12)
    bad = p.copy()
    bad[3] = 1.5
    with pytest.raises(ValueError, match="y_prob"):
        clf.fit_bbq(y, bad)
    with pytest.raises(ValueError, match="y_true"):
        clf.fit_bbq(np.full(20, 0.5), p)
    with pytest.raises(ValueError, match="y_prob"):
        clf.fit_bbq(y, p)(bad)


def test_lowers_held_out_log_loss_and_ece_on_an_overconfident_model():
    r = np.random.default_rng(13)
    true = r.uniform(0.02, 0.98, 24_000)
    y = (r.uniform(size=true.size) < true).astype(DT)
    logit = np.log(true) - np.log1p(-true)
    raw = (1 / (1 + np.exp(-3 * logit))).astype(DT)  # overconfident: slope 3
    fit, test = slice(0, 4000), slice(4000, None)
    cal = clf.fit_bbq(y[fit], raw[fit], estimate="posterior")
    q = np.asarray(cal(raw[test]), np.float64)
    yt, rt = y[test].astype(np.float64), raw[test].astype(np.float64)
    rt = np.clip(rt, 1e-12, 1 - 1e-12)

    def nll(prob):
        return -(yt * np.log(prob) + (1 - yt) * np.log1p(-prob))

    diff = nll(rt) - nll(q)  # paired per-observation improvements
    se = diff.std(ddof=1) / np.sqrt(diff.size)
    assert diff.mean() > 10 * se, (diff.mean(), se)
    ece_raw = float(clf.expected_calibration_error(yt, rt, bins=15))
    ece_bbq = float(clf.expected_calibration_error(yt, q, bins=15))
    assert ece_bbq < ece_raw / 3, (ece_raw, ece_bbq)
