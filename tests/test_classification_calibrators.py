"""Calibrators: reference values, held-out improvement, pytrees under jit/vmap,
cross-calibration and save/load round trips."""

import functools
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special
from sklearn.calibration import CalibratedClassifierCV, _sigmoid_calibration
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB

from bayescal.classification import (
    BetaCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    OneVsRestCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    cross_calibrate,
    expected_calibration_error,
    fit_beta,
    fit_histogram_binning,
    fit_isotonic,
    fit_one_vs_rest,
    fit_platt,
    fit_temperature,
    load_calibrator,
    log_loss,
    marginal_calibration_error,
    save_calibrator,
)
from tests.conftest import X64, float_tol

DTYPE = np.float64 if X64 else np.float32


def _overconfident(seed, n):
    """True p = sigmoid(z); the classifier reports sigmoid(3 z) (overconfident)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, size=n)
    y = (rng.uniform(size=n) < scipy.special.expit(z)).astype(DTYPE)
    return y, scipy.special.expit(3 * z).astype(DTYPE), (3 * z).astype(DTYPE)


# --- Platt ---
def test_platt_reproduces_platts_example():
    # Platt (1999), also scikit-learn 1.9 tests/test_calibration.py::test_sigmoid_calibration:
    # F = [5, -4, 1], y = [1, -1, -1] -> A = -0.20261, B = 0.65236 (libsvm, stopped at
    # gradient ~5e-6). The exact optimum, checked here by scipy and by the gradient,
    # is A = -0.2026145, B = 0.6523666: within 4e-6 of the published values.
    cal = fit_platt([1, 0, 0], np.array([5.0, -4.0, 1.0], DTYPE), input="score")
    np.testing.assert_allclose([cal.a, cal.b], [-0.20261, 0.65236], atol=1e-5)
    f, t = np.array([5.0, -4.0, 1.0]), np.array([2 / 3, 1 / 4, 1 / 4])

    def loss(ab):
        z = ab[0] * f + ab[1]
        return np.sum(np.logaddexp(0, z) - (1 - t) * z)

    ref = scipy.optimize.minimize(
        loss, [0.0, 0.0], method="BFGS", options={"gtol": 1e-12}
    ).x
    np.testing.assert_allclose([cal.a, cal.b], ref, atol=1e-7 if X64 else 1e-6)
    a, b = _sigmoid_calibration(f, np.array([1, 0, 0]))
    np.testing.assert_allclose([cal.a, cal.b], [a, b], atol=1e-6)


def test_platt_matches_sklearn_sigmoid_calibration(rng):
    # reference: scikit-learn 1.9 sklearn.calibration._sigmoid_calibration (LBFGS)
    score = rng.normal(size=500) * 2
    y = (rng.uniform(size=500) < scipy.special.expit(0.7 * score - 0.3)).astype(int)
    cal = fit_platt(y, score.astype(DTYPE), input="score")
    a, b = _sigmoid_calibration(score, y)
    np.testing.assert_allclose([cal.a, cal.b], [a, b], rtol=1e-4, atol=1e-5)
    # input="prob" is the same fit on the logits of the probabilities
    p = scipy.special.expit(score).astype(DTYPE)
    calp = fit_platt(y, p)
    np.testing.assert_allclose([calp.a, calp.b], [a, b], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(calp(p), cal(score.astype(DTYPE)), rtol=1e-4, atol=1e-6)
    # hard labels: plain maximum likelihood, like unpenalised logistic regression
    hard = fit_platt(y, score.astype(DTYPE), input="score", soft_labels=False)
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=1000).fit(score[:, None], y)
    np.testing.assert_allclose(
        [-hard.a, -hard.b], [lr.coef_[0, 0], lr.intercept_[0]], rtol=1e-4
    )


@pytest.mark.slow
def test_platt_keeps_calibrated_probabilities_nearly_unchanged(rng):
    p = rng.uniform(0.02, 0.98, size=4000).astype(DTYPE)
    y = (rng.uniform(size=4000) < p).astype(DTYPE)
    cal = fit_platt(y, p, soft_labels=False)
    assert abs(float(cal.a) + 1) < 0.1 and abs(float(cal.b)) < 0.1


# --- isotonic vs scikit-learn 1.9 IsotonicRegression(out_of_bounds="clip") ---
def test_isotonic_matches_sklearn_including_ties(rng):
    score = (rng.integers(0, 40, size=700) / 40 + 0.1).astype(DTYPE)  # many ties
    y = (rng.uniform(size=700) < score - 0.1).astype(DTYPE)
    cal = fit_isotonic(y, score)
    ref = IsotonicRegression(out_of_bounds="clip").fit(score, y)
    new = np.concatenate(
        [rng.uniform(-0.2, 1.3, size=300), np.unique(score), [score.min(), score.max()]]
    ).astype(DTYPE)
    tol = 1e-12 if X64 else 1e-6
    np.testing.assert_allclose(cal(new), ref.predict(new), atol=tol)
    np.testing.assert_allclose(cal(score), ref.predict(score), atol=tol)
    # fixed-size output: the distinct scores, then the largest one repeated up to N
    m = np.unique(score).size
    assert cal.thresholds.shape == cal.values.shape == (700,)
    np.testing.assert_array_equal(cal.thresholds[:m], np.unique(score))
    np.testing.assert_array_equal(cal.thresholds[m:], score.max())
    np.testing.assert_array_equal(cal.values[m:], cal.values[m - 1])
    # single distinct score: constant calibrator
    const = fit_isotonic([0, 1, 1], np.full(3, 0.4, DTYPE))
    np.testing.assert_allclose(
        const(np.array([0.0, 1.0], DTYPE)), [2 / 3, 2 / 3], rtol=1e-6
    )


# --- histogram binning, beta, temperature: reference values ---
def test_histogram_binning_values_and_empty_bins():
    y = np.array([0, 1, 1, 0, 1], DTYPE)
    p = np.array([0.05, 0.15, 0.12, 0.95, 0.91], DTYPE)
    # by hand: bin 0 holds 2 positives of 3, bin 3 one of 2; bins 1 and 2 are empty
    # (their midpoints 0.375 and 0.625, with or without shrinkage)
    raw = fit_histogram_binning(y, p, bins=4, shrinkage=None)
    np.testing.assert_allclose(raw.values, [2 / 3, 0.375, 0.625, 0.5], rtol=1e-6)
    out = raw(np.array([0.0, 0.3, 0.6, 1.0], DTYPE))
    np.testing.assert_allclose(out, [2 / 3, 0.375, 0.625, 0.5], rtol=1e-6)
    # the default, Jeffreys: (k + 1/2) / (n + 1)
    cal = fit_histogram_binning(y, p, bins=4)
    want = [2.5 / 4, 0.375, 0.625, 1.5 / 3]
    np.testing.assert_allclose(cal.values, want, rtol=1e-6)
    np.testing.assert_allclose(cal(np.array([0.0, 0.3, 0.6, 1.0], DTYPE)), want, rtol=1e-6)
    q = fit_histogram_binning(y, p, bins=2, strategy="quantile")
    assert q.edges.shape == (3,) and float(q.edges[0]) == float(p.min())


# --- histogram binning's Jeffreys shrinkage (issue 37, item 9) ---
def _pure_top_bin():
    """Calibration data whose top bin of ten, [0.9, 1], holds 4 positives and nothing
    else; a held-out negative predicted at 0.92 lands there."""
    y = np.array([0, 0, 1, 0, 1, 1, 1, 1, 1, 1], DTYPE)
    p = np.array([0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.91, 0.93, 0.95, 0.97], DTYPE)
    return y, p


def test_histogram_binning_never_calls_a_pure_small_bin_certain():
    # Issue 37, item 9: select_calibrator picked a histogram calibrator that said
    # exactly 1 from a bin of 4 positives, an infinite log-loss on the first held-out
    # negative there. The raw fraction (shrinkage=None) still does that; the default
    # gives (4 + 1/2) / (4 + 1) = 0.9 and -log(1 - 0.9) = log(10).
    y, p = _pure_top_bin()
    new_y, new_p = np.array([0], DTYPE), np.array([0.92], DTYPE)
    raw = fit_histogram_binning(y, p, shrinkage=None)
    assert float(raw(new_p)[0]) == 1.0
    assert np.isinf(float(log_loss(new_y, raw(new_p))))
    cal = fit_histogram_binning(y, p)
    np.testing.assert_allclose(cal(new_p), [0.9], rtol=4 * np.finfo(DTYPE).eps)
    np.testing.assert_allclose(log_loss(new_y, cal(new_p)), np.log(10), rtol=1e-5)
    values = np.asarray(cal.values)
    assert np.all((values > 0) & (values < 1))


@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_shrinkage_is_the_jeffreys_posterior_mean(weighted):
    # reference: scipy.stats.beta(k + 1/2, n - k + 1/2).mean(), the posterior mean of a
    # bin's positive rate under Jeffreys' Beta(1/2, 1/2) prior, with k and n counted
    # here by np.histogram on the fitted edges (weighted: sums of integer weights, so
    # equal to repeating the rows); empty bins keep their midpoint
    import scipy.stats

    rng = np.random.default_rng(37)
    p = rng.beta(0.6, 0.6, 120).astype(DTYPE)  # many small bins near 0 and 1
    y = (rng.uniform(size=120) < p).astype(DTYPE)
    w = rng.integers(0, 4, 120).astype(DTYPE) if weighted else None
    for bins, strategy in [(25, "uniform"), (12, "quantile")]:
        cal = fit_histogram_binning(y, p, bins=bins, strategy=strategy, weights=w)
        edges = np.asarray(cal.edges, np.float64)
        # bins [e_k, e_{k+1}), the last closed: np.histogram's convention
        ones = np.ones_like(p) if w is None else w
        n, _ = np.histogram(p.astype(np.float64), edges, weights=ones)
        k, _ = np.histogram(p.astype(np.float64), edges, weights=ones * y)
        full = n > 0
        want = 0.5 * (edges[:-1] + edges[1:])  # empty (or all weight 0): the midpoint
        want[full] = scipy.stats.beta(k[full] + 0.5, n[full] - k[full] + 0.5).mean()
        assert full.sum() >= 5 and np.any(full & ((k == 0) | (k == n)))  # pure bins
        np.testing.assert_allclose(cal.values, want, rtol=8 * np.finfo(DTYPE).eps)
        raw = fit_histogram_binning(
            y, p, bins=bins, strategy=strategy, weights=w, shrinkage=None
        )
        np.testing.assert_allclose(
            np.asarray(raw.values)[full], k[full] / n[full], rtol=4 * np.finfo(DTYPE).eps
        )
        if weighted:  # an integer weight is a repeated row, shrinkage included
            rep = np.repeat(np.arange(120), w.astype(int))
            again = fit_histogram_binning(y[rep], p[rep], bins=bins, strategy=strategy)
            np.testing.assert_allclose(again.values, cal.values, rtol=1e-6)


@pytest.mark.parametrize("shrinkage", ["jeffreys", None])
def test_histogram_shrinkage_host_twin_equals_kernel_and_jit_equals_eager(
    shrinkage, monkeypatch
):
    # the NumPy twin (host path) and the kernel share jeffreys_means: bit for bit
    # unweighted; under jit the same kernel as eagerly
    rng = np.random.default_rng(38)
    p = rng.beta(0.6, 0.6, 90).astype(DTYPE)
    y = (rng.uniform(size=90) < p).astype(DTYPE)
    new = np.r_[0.0, 1.0, rng.uniform(size=30)].astype(DTYPE)
    for kw in (dict(bins=15), dict(bins=8, strategy="quantile")):
        host = fit_histogram_binning(y, p, shrinkage=shrinkage, **kw)
        monkeypatch.setenv("BAYESCAL_HOST_PATH", "0")
        kernel = fit_histogram_binning(y, p, shrinkage=shrinkage, **kw)
        kernel_out = kernel(new)
        jitted = jax.jit(
            functools.partial(fit_histogram_binning, shrinkage=shrinkage, **kw)
        )(jnp.asarray(y), jnp.asarray(p))
        monkeypatch.delenv("BAYESCAL_HOST_PATH")
        np.testing.assert_array_equal(host.edges, kernel.edges)
        np.testing.assert_array_equal(host.values, kernel.values)
        np.testing.assert_array_equal(host(new), kernel_out)
        np.testing.assert_array_equal(jitted.edges, kernel.edges)
        np.testing.assert_allclose(jitted.values, kernel.values, rtol=float_tol(), atol=0)
        if shrinkage is not None:
            assert np.all((np.asarray(host(new)) > 0) & (np.asarray(host(new)) < 1))


def test_histogram_shrinkage_keeps_float32_below_one():
    # (n + 1/2) / (n + 1) is within 2^-24 of 1 beyond n ~ 10^7, where float32 rounds it
    # to 1: the largest float below 1 instead (the helper both paths use)
    from bayescal._src.binned import jeffreys_means

    for xp in (np, jnp):
        out = jeffreys_means(
            xp.asarray([1.0, 0.0], np.float32), xp.asarray([2**26, 2**26]), xp
        )
        out = np.asarray(out)
        assert out.dtype == np.float32
        assert out[0] == np.nextafter(np.float32(1), np.float32(0))
        np.testing.assert_allclose(out[1], 0.5 / (2**26 + 1), rtol=1e-6)


@pytest.mark.parametrize("shrinkage", ["jeffreys", None])
def test_one_vs_rest_histogram_shrinks_as_the_binary_fit(shrinkage):
    # fit_one_vs_rest fits all classes' histograms in one vmapped program: each class's
    # calibrator equals fit_histogram_binning on (y == k, p[:, k]) with the same option
    rng = np.random.default_rng(39)
    truth = scipy.special.softmax(3 * rng.normal(size=(80, 3)), axis=1)
    labels = np.array([rng.choice(3, p=row) for row in truth])
    probs = truth.astype(DTYPE)
    labels[:3] = [0, 1, 2]
    kw = {} if shrinkage == "jeffreys" else {"shrinkage": None}  # the default, and None
    ovr = fit_one_vs_rest(labels, probs, method="histogram", bins=6, **kw)
    for k, cal in enumerate(ovr.calibrators):
        one = fit_histogram_binning((labels == k).astype(DTYPE), probs[:, k], bins=6, **kw)
        np.testing.assert_array_equal(cal.edges, one.edges)
        np.testing.assert_allclose(cal.values, one.values, rtol=float_tol(), atol=0)
    with pytest.raises(ValueError, match="shrinkage must be 'jeffreys'"):
        fit_one_vs_rest(labels, probs, method="histogram", shrinkage="laplace")
    with pytest.raises(ValueError, match="shrinkage must be 'jeffreys'"):
        fit_histogram_binning(labels == 0, probs[:, 0], shrinkage="none")


def _beta_reference(y, p):
    """The betacal (Kull et al. 2017) fitting logic with scikit-learn 1.9 LogisticRegression."""
    x = np.column_stack([np.log(p), -np.log1p(-p)])

    def lr(features):
        m = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(features, y)
        return m.coef_[0], m.intercept_[0]

    coef, c = lr(x)
    if coef[0] < 0:
        (b,), c = lr(x[:, 1:])
        return 0.0, b, c
    if coef[1] < 0:
        (a,), c = lr(x[:, :1])
        return a, 0.0, c
    return coef[0], coef[1], c


@pytest.mark.parametrize("shape", ["both", "drop_a"])
def test_beta_matches_reference_fit(rng, shape):
    p = rng.uniform(0.01, 0.99, size=800)
    if shape == "both":
        truth = scipy.special.expit(1.8 * np.log(p) - 0.6 * np.log1p(-p) + 0.2)
    else:  # decreasing in log p: a < 0 at first, refit with a = 0
        truth = scipy.special.expit(-0.3 * np.log(p) - 1.5 * np.log1p(-p) - 1.0)
    y = (rng.uniform(size=800) < truth).astype(int)
    ref = _beta_reference(y, p)
    cal = fit_beta(y, p.astype(DTYPE))
    np.testing.assert_allclose([cal.a, cal.b, cal.c], ref, rtol=2e-4, atol=2e-5)
    if shape == "drop_a":
        assert float(cal.a) == 0.0
    assert float(cal.a) >= 0 and float(cal.b) >= 0


def test_temperature_matches_scalar_minimisation(rng):
    z = rng.normal(size=(600, 5)) * 3
    probs = scipy.special.softmax(z / 3, axis=1)  # truth: T = 3
    y = np.array([rng.choice(5, p=row) for row in probs])
    cal = fit_temperature(y, z.astype(DTYPE))

    def nll(t):
        return -np.mean(scipy.special.log_softmax(z / t, axis=1)[np.arange(600), y])

    ref = scipy.optimize.minimize_scalar(
        nll, bounds=(0.1, 20), method="bounded", options={"xatol": 1e-10}
    ).x
    np.testing.assert_allclose(cal.temperature, ref, rtol=1e-5)
    assert 2.4 < float(cal.temperature) < 3.8
    out = cal(z.astype(DTYPE))
    np.testing.assert_allclose(out, scipy.special.softmax(z / ref, axis=1), atol=1e-5)
    np.testing.assert_array_equal(np.argmax(out, 1), np.argmax(z, 1))  # accuracy kept


@pytest.mark.parametrize("host_path", [True, False], ids=["host", "kernel"])
def test_warnings_name_the_callers_line_on_both_paths(rng, host_path):
    # Issue "Verdicts a user can trust", friction: a fixed stacklevel named
    # bayescal/_src/host.py (the host path's wrapper) instead of the user's line.
    from bayescal.classification import log_loss
    from bayescal.core import host_path as use_host

    probs = scipy.special.softmax(rng.normal(size=(40, 3)), axis=1).astype(DTYPE)
    y = rng.integers(0, 3, size=40)
    with use_host(host_path), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_temperature(y, probs)
        log_loss(y % 2, logits=probs[:, 0])
    assert [w.filename for w in caught] == [__file__] * 2, [str(w) for w in caught]


def test_temperature_warns_when_given_probabilities(rng):
    # Issue 21: probabilities passed as logits gave T = 4.65 silently. softmax is
    # invariant to a per-row shift, so np.log(probs) are logits of the same model
    # (scipy.special.softmax(np.log(p)) == p): the fix the warning names.
    z = rng.normal(size=(400, 3)) * 3
    probs = scipy.special.softmax(z, axis=1)
    y = np.array([rng.choice(3, p=row) for row in scipy.special.softmax(z / 3, axis=1)])
    with pytest.warns(UserWarning, match=r"look like probabilities.*np\.log\(probs\)"):
        fit_temperature(y, probs.astype(DTYPE))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = fit_temperature(y, np.log(probs).astype(DTYPE))
        ref = fit_temperature(y, z.astype(DTYPE))  # the same model, shifted per row
    np.testing.assert_allclose(cal.temperature, ref.temperature, rtol=1e-4)
    # binary: probabilities of class 1 as [N] "logits"
    yb = (rng.uniform(size=400) < 0.5).astype(DTYPE)
    pb = np.clip(0.5 + 0.3 * (yb - 0.5) + 0.1 * rng.normal(size=400), 0, 1)
    with pytest.warns(UserWarning, match=r"np\.log\(p / \(1 - p\)\)"):
        fit_temperature(yb, pb.astype(DTYPE))
    # one value outside [0, 1] is enough to read them as logits; under jit the flag is
    # traced: no warning (nothing can be told), the fit still runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_temperature(yb, np.append(pb[:-1], 1.5).astype(DTYPE))
        jax.jit(fit_temperature)(y, probs.astype(DTYPE))


# --- held-out improvement on an overconfident classifier (fixed seed) ---
@pytest.mark.slow
def test_calibrators_improve_heldout_ece():
    y_cal, p_cal, z_cal = _overconfident(0, 5000)
    y_test, p_test, z_test = _overconfident(1, 5000)
    before = float(expected_calibration_error(y_test, p_test))
    assert before > 0.08  # sigmoid(3 z) is far from sigmoid(z)
    fitted = {
        "platt": fit_platt(y_cal, p_cal)(p_test),
        "isotonic": fit_isotonic(y_cal, p_cal)(p_test),
        "histogram": fit_histogram_binning(y_cal, p_cal, bins=15)(p_test),
        "beta": fit_beta(y_cal, p_cal, eps=1e-7)(p_test),
        "temperature": fit_temperature(y_cal, z_cal)(z_test),
    }
    for name, p_new in fitted.items():
        after = float(expected_calibration_error(y_test, p_new))
        # held-out ECE of a calibrated forecast with 5000 points is ~0.01-0.02
        assert after < 0.3 * before, (name, before, after)
    temp = fit_temperature(y_cal, z_cal)
    assert abs(float(temp.temperature) - 3) < 0.3
    platt = fit_platt(y_cal, p_cal)
    assert abs(float(platt.a) + 1 / 3) < 0.05  # logit(p) = 3 z, so A ~ -1/3


@pytest.mark.slow
def test_one_vs_rest_renormalises_and_improves(rng):
    def data(seed, n):
        r = np.random.default_rng(seed)
        z = r.normal(size=(n, 3)) * 1.5
        truth = scipy.special.softmax(z, axis=1)
        y = np.array([r.choice(3, p=row) for row in truth])
        return y, scipy.special.softmax(3 * z, axis=1).astype(DTYPE)

    y_cal, p_cal = data(2, 3000)
    y_test, p_test = data(3, 3000)
    before = float(marginal_calibration_error(y_test, p_test))
    for method, options in [
        ("isotonic", {}),
        ("platt", {"eps": 1e-7}),
        ("beta", {"eps": 1e-7}),
        ("histogram", {"bins": 10}),
    ]:
        cal = fit_one_vs_rest(y_cal, p_cal, method=method, **options)
        out = np.asarray(cal(p_test))
        np.testing.assert_allclose(out.sum(1), 1.0, rtol=1e-5)
        assert float(marginal_calibration_error(y_test, out)) < 0.6 * before, method
    # a row whose classes are all calibrated to 0 becomes uniform
    zero = OneVsRestCalibrator(
        tuple(IsotonicCalibrator(jnp.zeros(1), jnp.zeros(1)) for _ in range(3))
    )
    np.testing.assert_allclose(zero(p_test[:2]), np.full((2, 3), 1 / 3), rtol=1e-6)


# --- pytrees: jit, vmap, dtype ---
def _all_calibrators():
    y, p, z = _overconfident(4, 400)
    zz = np.column_stack([np.zeros_like(z), z]).astype(DTYPE)
    labels = np.asarray(y, int)
    return {
        "platt": (fit_platt(y, p), p),
        "platt_score": (fit_platt(y, z, input="score"), z),
        "isotonic": (fit_isotonic(y, p), p),
        "histogram": (fit_histogram_binning(y, p, bins=7, strategy="quantile"), p),
        "beta": (fit_beta(y, p, eps=1e-6), p),
        "temperature": (fit_temperature(labels, zz), zz),
        "temperature_binary": (fit_temperature(y, z), z),
        "one_vs_rest": (
            fit_one_vs_rest(labels, scipy.special.softmax(zz, axis=1).astype(DTYPE)),
            scipy.special.softmax(zz, axis=1).astype(DTYPE),
        ),
    }


def test_calibrators_work_inside_jit_and_keep_dtype():
    for name, (cal, x) in _all_calibrators().items():
        eager = cal(x)
        jitted = jax.jit(lambda c, s: c(s))(cal, jnp.asarray(x))
        np.testing.assert_allclose(jitted, eager, rtol=1e-6, err_msg=name)
        assert eager.dtype == x.dtype, name
        leaves = jax.tree_util.tree_leaves(cal)
        assert leaves and all(isinstance(leaf, jax.Array) for leaf in leaves), name


def test_stacked_calibrators_vmap_like_a_loop(rng):
    y, p, _ = _overconfident(5, 300)
    cals = [fit_platt(y[i::3], p[i::3]) for i in range(3)]
    stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *cals)
    out = jax.vmap(lambda c, s: c(s), in_axes=(0, None))(stacked, jnp.asarray(p))
    for i, c in enumerate(cals):
        np.testing.assert_allclose(out[i], c(p), rtol=1e-6)
    assert isinstance(stacked, PlattCalibrator) and stacked.input == "prob"


# --- save / load: exact round trip for every type, never pickle ---
def test_save_load_round_trip_every_calibrator(tmp_path):
    seen = set()
    for name, (cal, x) in _all_calibrators().items():
        path = os.path.join(tmp_path, f"{name}.npz")
        save_calibrator(cal, path)
        back = load_calibrator(path)
        assert type(back) is type(cal)
        seen.add(type(cal))
        a_leaves, a_def = jax.tree_util.tree_flatten(cal)
        b_leaves, b_def = jax.tree_util.tree_flatten(back)
        assert a_def == b_def, name  # same classes and option (meta) fields
        for a, b in zip(a_leaves, b_leaves, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name  # bitwise
        np.testing.assert_array_equal(back(x), cal(x))
    assert seen == {
        PlattCalibrator,
        IsotonicCalibrator,
        HistogramBinningCalibrator,
        BetaCalibrator,
        TemperatureCalibrator,
        OneVsRestCalibrator,
    }


def test_load_refuses_pickled_content_and_foreign_files(tmp_path):
    evil = os.path.join(tmp_path, "evil.npz")
    np.savez(evil, __spec__=np.array([{"type": "PlattCalibrator"}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        load_calibrator(evil)
    other = os.path.join(tmp_path, "other.npz")
    np.savez(other, a=np.ones(3))
    with pytest.raises(ValueError, match="not a bayescal calibrator file"):
        load_calibrator(other)
    with pytest.raises(TypeError, match="save_calibrator saves the fitted objects of bayescal"):
        save_calibrator(object(), os.path.join(tmp_path, "x.npz"))


# --- cross-calibration vs scikit-learn 1.9 CalibratedClassifierCV ---
def _gnb_fit_predict(x_train, y_train, x_eval):
    return GaussianNB().fit(x_train, y_train).predict_proba(x_eval)[:, 1]


@pytest.mark.parametrize("strategy, ensemble", [("per_fold", True), ("pooled", False)])
def test_cross_calibrate_matches_sklearn_calibrated_classifier_cv(rng, strategy, ensemble):
    # GaussianNB has no decision_function, so sklearn calibrates predict_proba[:, 1]
    # like we do; the same folds are passed to both.
    x = rng.normal(size=(400, 3))
    y = (rng.uniform(size=400) < scipy.special.expit(x @ [1.5, -1.0, 0.5])).astype(int)
    x_new = rng.normal(size=(50, 3))
    fold = np.arange(400) % 4
    splits = [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float64 scores -> float32
        res = cross_calibrate(0,
            _gnb_fit_predict, x, y, ensemble=strategy, folds=fold, X_new=x_new
        )
        ours = res.predict_proba(x_new)
    ref = CalibratedClassifierCV(
        GaussianNB(), method="isotonic", cv=splits, ensemble=ensemble
    ).fit(x, y)
    expected = ref.predict_proba(x_new)[:, 1]
    tol = 1e-10 if X64 else 2e-6
    np.testing.assert_allclose(ours, expected, atol=tol)
    np.testing.assert_allclose(res.new_proba, expected, atol=tol)  # no refit path
    assert len(res.calibrators) == (4 if strategy == "per_fold" else 1)


@pytest.mark.parametrize("strategy, ensemble", [("per_fold", True), ("pooled", False)])
def test_cross_calibrated_classifier_fits_once_and_reuses_its_models(rng, strategy, ensemble):
    # Issue 21: predict_proba refitted the K models on every call. With (fit, predict)
    # the models are trained in cross_calibrate (K folds, + 1 final model for pooled)
    # and each predict_proba only predicts, with the very model objects stored; the
    # result equals scikit-learn 1.9's CalibratedClassifierCV on the same folds.
    x = rng.normal(size=(400, 3))
    y = (rng.uniform(size=400) < scipy.special.expit(x @ [1.5, -1.0, 0.5])).astype(int)
    x_new = rng.normal(size=(50, 3))
    fold = np.arange(400) % 4
    splits = [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(4)]
    fitted, predicted_with = [], []

    def fit(x_train, y_train):
        fitted.append(GaussianNB().fit(x_train, y_train))
        return fitted[-1]

    def predict(model, x_eval):
        predicted_with.append(model)
        return model.predict_proba(x_eval)[:, 1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float64 scores -> float32
        res = cross_calibrate(0, (fit, predict), x, y, ensemble=strategy, folds=fold)
        trained = len(fitted)
        assert trained == (4 if strategy == "per_fold" else 5)
        del predicted_with[:]
        first = res.predict_proba(x_new)
        for _ in range(3):
            np.testing.assert_array_equal(res.predict_proba(x_new), first)
    assert len(fitted) == trained  # nothing trained again
    stored = res.models if strategy == "per_fold" else (fitted[-1],)
    assert all(a is b for a, b in zip(res.models, stored, strict=True))
    assert predicted_with[: len(stored)] == list(stored)
    assert all(any(m is s for s in stored) for m in predicted_with)
    ref = CalibratedClassifierCV(
        GaussianNB(), method="isotonic", cv=splits, ensemble=ensemble
    ).fit(x, y)
    np.testing.assert_allclose(first, ref.predict_proba(x_new)[:, 1], atol=1e-10 if X64 else 2e-6)


def test_cross_calibrate_rejects_a_bad_model_pair():
    with pytest.raises(TypeError, match=r"a pair \(fit, predict\)"):
        cross_calibrate(0, (lambda x, y: None,), np.zeros((10, 1)), np.arange(10) % 2)


def test_cross_calibrate_stratified_folds_and_callable_method(rng):
    x = rng.normal(size=(120, 2))
    y = (x[:, 0] + rng.normal(size=120) > 0).astype(int)
    res = cross_calibrate(1,
        _gnb_fit_predict,
        x.astype(DTYPE),
        y,
        method=functools.partial(fit_platt, eps=1e-7),
        num_folds=3,)
    counts = np.array(
        [[np.sum((res.fold == k) & (y == c)) for c in (0, 1)] for k in range(3)]
    )
    assert np.ptp(counts, axis=0).max() <= 1  # stratified, balanced
    assert all(isinstance(c, PlattCalibrator) for c in res.calibrators)
    res2 = cross_calibrate(1, _gnb_fit_predict, x.astype(DTYPE), y, num_folds=3)
    np.testing.assert_array_equal(res.fold, res2.fold)  # seeded


def test_separable_data_warn_instead_of_silent_garbage():
    score = np.array([-2.0, -1.0, 1.0, 2.0], DTYPE)
    y = np.array([0, 0, 1, 1])
    with pytest.warns(RuntimeWarning, match="separable"):
        fit_platt(y, score, input="score", soft_labels=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Platt's soft labels keep the fit finite
        cal = fit_platt(y, score, input="score")
    assert np.isfinite(float(cal.a)) and float(cal.a) < 0
    logits = np.array([[3.0, 0.0], [0.0, 3.0], [2.0, 0.0]], DTYPE)
    with pytest.raises(ValueError, match="no finite optimal temperature"):
        fit_temperature([0, 1, 0], logits)
