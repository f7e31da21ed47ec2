"""``weights=`` in every ``fit_*`` of both branches (issue 20, item 3).

Properties: an integer weight equals repeating the row (hypothesis, against the fit
on the repeated rows); a weight of 0 removes the row; unit weights change nothing;
jit == eager; bad weights raise a ValueError naming ``weights``. References:
scikit-learn 1.9 ``IsotonicRegression.fit(sample_weight=)``,
``LogisticRegression(C=np.inf).fit(sample_weight=)`` and
``sklearn.calibration._sigmoid_calibration(sample_weight=)`` (Platt's targets with
weighted class totals), and the weighted split-conformal quantile of Tibshirani,
Barber, Candes & Ramdas (2019) (smallest score whose cumulative weight reaches
``(W + 1)(1 - alpha)``).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import bayescal.classification as bc
import bayescal.regression as br
from tests.conftest import X64

DTYPE = np.float64 if X64 else np.float32
TOL = dict(rtol=1e-10, atol=1e-12) if X64 else dict(rtol=2e-5, atol=2e-6)
GRID = np.linspace(0.0, 1.0, 41).astype(DTYPE)


def _data(seed, n=30):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n).astype(DTYPE)
    y = (rng.uniform(size=n) < p).astype(np.int64)
    y[:2] = (0, 1)
    return rng, y, p


def _int_weights(rng, n):
    w = rng.integers(0, 4, n)
    w[:2] = (1, 2)  # both classes keep weight
    return w


# (name, fit(y, p, **kw), how to compare the fitted objects)
def _map_on(cal, x=GRID):
    return np.asarray(cal(x))


CLASSIFICATION = {
    "platt": (lambda y, p, **kw: bc.fit_platt(y, p, **kw), _map_on),
    "platt_hard": (lambda y, p, **kw: bc.fit_platt(y, p, soft_labels=False, **kw), _map_on),
    "beta": (lambda y, p, **kw: bc.fit_beta(y, p, **kw), _map_on),
    "isotonic": (lambda y, p, **kw: bc.fit_isotonic(y, p, **kw), _map_on),
    "histogram": (lambda y, p, **kw: bc.fit_histogram_binning(y, p, bins=5, **kw), _map_on),
    "histogram_quantile": (
        lambda y, p, **kw: bc.fit_histogram_binning(
            y, p, bins=4, strategy="quantile", **kw
        ),
        _map_on,
    ),
    # split=None: a split counts rows, so repeated rows would move it
    "scaling_binning": (
        lambda y, p, **kw: bc.fit_scaling_binning(y, p, bins=4, split=None, **kw),
        lambda cal: _map_on(cal, GRID[1:-1]),  # logit(0), logit(1) are infinite
    ),
    # one penalty: the cross-validation folds count rows, the fit itself is weighted
    "spline": (
        lambda y, p, **kw: bc.fit_spline(y, p, knots=4, penalties=(0.1,), **kw),
        lambda cal: _map_on(cal, GRID[1:-1]),
    ),
    "temperature": (
        lambda y, p, **kw: bc.fit_temperature(y, jnp.log(p / (1 - p)), **kw),
        lambda cal: np.asarray(cal.temperature),
    ),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(CLASSIFICATION))
@given(seed=st.integers(0, 2**16))
def test_classification_integer_weights_repeat_rows(name, seed):
    fit, view = CLASSIFICATION[name]
    rng, y, p = _data(seed)
    w = _int_weights(rng, y.size)
    weighted = fit(y, p, weights=w)
    repeated = fit(np.repeat(y, w), np.repeat(p, w))
    np.testing.assert_allclose(view(weighted), view(repeated), **TOL)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(CLASSIFICATION))
def test_classification_unit_and_zero_weights(name):
    fit, view = CLASSIFICATION[name]
    rng, y, p = _data(7)
    plain = fit(y, p)
    np.testing.assert_allclose(view(fit(y, p, weights=np.ones(y.size))), view(plain), **TOL)
    # weight 0 removes rows: the fit on the others
    w = np.ones(y.size)
    w[5:12] = 0
    keep = w > 0
    np.testing.assert_allclose(
        view(fit(y, p, weights=w)), view(fit(y[keep], p[keep])), **TOL
    )
    # jit == eager
    jitted = jax.jit(lambda a, b, c: fit(a, b, weights=c))(y, p, w.astype(DTYPE))
    np.testing.assert_allclose(view(jitted), view(fit(y, p, weights=w)), **TOL)


def test_isotonic_weights_match_scikit_learn():
    from sklearn.isotonic import IsotonicRegression

    rng, y, p = _data(3, n=60)
    w = rng.uniform(0, 3, y.size)
    w[::7] = 0
    cal = bc.fit_isotonic(y, p, weights=w)
    # reference: sklearn's IsotonicRegression(out_of_bounds="clip") with sample_weight
    ref = IsotonicRegression(out_of_bounds="clip").fit(
        p.astype(np.float64), y, sample_weight=w
    )
    x = np.sort(p)
    np.testing.assert_allclose(np.asarray(cal(x)), ref.predict(x), rtol=1e-5, atol=1e-6)


def test_platt_weights_match_scikit_learn():
    from sklearn.calibration import _sigmoid_calibration
    from sklearn.linear_model import LogisticRegression

    rng, y, p = _data(4, n=80)
    w = rng.uniform(0, 3, y.size)
    f = np.log(p / (1 - p)).astype(np.float64)
    # Platt's soft labels with weighted class totals: sklearn's _sigmoid_calibration
    a_ref, b_ref = _sigmoid_calibration(f, y, sample_weight=w)
    cal = bc.fit_platt(y, f.astype(DTYPE), input="score", weights=w)
    np.testing.assert_allclose([float(cal.a), float(cal.b)], [a_ref, b_ref], rtol=2e-4)
    # hard labels: the unpenalised weighted logistic regression
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)
    lr.fit(f[:, None], y, sample_weight=w)
    hard = bc.fit_platt(y, f.astype(DTYPE), input="score", soft_labels=False, weights=w)
    np.testing.assert_allclose(
        [-float(hard.a), -float(hard.b)], [lr.coef_[0, 0], lr.intercept_[0]], rtol=1e-4
    )


@pytest.mark.parametrize("method", ["isotonic", "platt", "beta", "histogram"])
def test_one_vs_rest_integer_weights_repeat_rows(method):
    rng = np.random.default_rng(5)
    z = rng.normal(size=(45, 3))
    probs = (np.exp(z) / np.exp(z).sum(1, keepdims=True)).astype(DTYPE)
    y = rng.integers(0, 3, 45)
    y[:3] = (0, 1, 2)
    w = rng.integers(0, 3, 45)
    w[:3] = 1
    got = bc.fit_one_vs_rest(y, probs, method=method, weights=w)
    ref = bc.fit_one_vs_rest(np.repeat(y, w), np.repeat(probs, w, axis=0), method=method)
    np.testing.assert_allclose(np.asarray(got(probs)), np.asarray(ref(probs)), **TOL)


def test_vmap_over_weights():
    rng, y, p = _data(6)
    ws = rng.integers(1, 4, (3, y.size)).astype(DTYPE)
    batched = jax.vmap(lambda w: bc.fit_platt(y, p, weights=w))(ws)
    for i in range(3):
        one = bc.fit_platt(y, p, weights=ws[i])
        np.testing.assert_allclose(float(batched.a[i]), float(one.a), **TOL)


# --------------------------------------------------------------------------- regression
def _reg(seed, n=40):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n).astype(DTYPE)
    mu = (0.5 * rng.normal(size=n)).astype(DTYPE)
    sc = rng.uniform(0.5, 2.0, n).astype(DTYPE)
    return rng, y, mu, sc


REGRESSION = {
    "conformal": lambda y, mu, sc, **kw: float(
        br.fit_conformal(y, mu, alpha=0.1, **kw).quantile
    ),
    "conformal_scaled": lambda y, mu, sc, **kw: float(
        br.fit_conformal(y, mu, sc, alpha=0.2, **kw).quantile
    ),
    "cqr": lambda y, mu, sc, **kw: float(
        br.fit_conformalized_quantile(y, mu - sc, mu + sc, alpha=0.1, **kw).quantile
    ),
    "sigma_normal": lambda y, mu, sc, **kw: float(
        br.fit_sigma_scaling(y, mu, sc, **kw).factor
    ),
    "sigma_laplace": lambda y, mu, sc, **kw: float(
        br.fit_sigma_scaling(y, mu, sc, family="laplace", **kw).factor
    ),
    "sigma_t": lambda y, mu, sc, **kw: float(
        br.fit_sigma_scaling(y, mu, sc, family="student_t", df=4.0, **kw).factor
    ),
    "isotonic_recalibrator": lambda y, mu, sc, **kw: np.asarray(
        br.fit_isotonic_recalibrator(
            np.clip(0.5 + 0.3 * (y - mu) / sc, 0, 1).astype(DTYPE), **kw
        )(GRID)
    ),
}


@pytest.mark.parametrize("name", list(REGRESSION))
@given(seed=st.integers(0, 2**16))
def test_regression_integer_weights_repeat_rows(name, seed):
    fit = REGRESSION[name]
    rng, y, mu, sc = _reg(seed)
    w = rng.integers(0, 4, y.size)
    w[:2] = (1, 2)
    r = np.repeat
    np.testing.assert_allclose(
        fit(y, mu, sc, weights=w), fit(r(y, w), r(mu, w), r(sc, w)), **TOL
    )


@pytest.mark.parametrize("name", list(REGRESSION))
def test_regression_unit_and_zero_weights(name):
    fit = REGRESSION[name]
    _, y, mu, sc = _reg(8)
    np.testing.assert_allclose(
        fit(y, mu, sc, weights=np.ones(y.size)), fit(y, mu, sc), **TOL
    )
    w = np.ones(y.size)
    w[3:15] = 0
    k = w > 0
    np.testing.assert_allclose(fit(y, mu, sc, weights=w), fit(y[k], mu[k], sc[k]), **TOL)


def test_weighted_conformal_quantile_reference():
    # Tibshirani et al. (2019): the smallest score with cumulative weight >= (W + 1)(1 - a)
    rng, y, mu, _ = _reg(9)
    w = rng.uniform(0, 2, y.size)
    s = np.abs(y - mu).astype(np.float64)
    order = np.argsort(s)
    cum = np.cumsum(w[order])
    ref = s[order][np.argmax(cum >= (cum[-1] + 1) * 0.9)]
    got = br.fit_conformal(y, mu, alpha=0.1, weights=w.astype(DTYPE))
    np.testing.assert_allclose(float(got.quantile), ref, rtol=1e-6)
    jitted = jax.jit(lambda w: br.fit_conformal(y, mu, alpha=0.1, weights=w))(
        w.astype(DTYPE)
    )
    assert float(jitted.quantile) == float(got.quantile)


def test_conformal_weight_too_small_raises():
    _, y, mu, _ = _reg(10, n=5)
    with pytest.raises(ValueError, match="weights are too small for alpha=0.1"):
        br.fit_conformal(y, mu, alpha=0.1, weights=np.ones(5))
    # the same data, each row counted 3 times: W = 15 is enough
    assert np.isfinite(
        float(br.fit_conformal(y, mu, alpha=0.1, weights=np.full(5, 3.0)).quantile)
    )


# --------------------------------------------------------------------------- bad weights
_, _Y, _P = _data(11)
_, _RY, _RMU, _RSC = _reg(11, n=_Y.size)
FITS = {
    "fit_platt": lambda w: bc.fit_platt(_Y, _P, weights=w),
    "fit_beta": lambda w: bc.fit_beta(_Y, _P, weights=w),
    "fit_isotonic": lambda w: bc.fit_isotonic(_Y, _P, weights=w),
    "fit_histogram_binning": lambda w: bc.fit_histogram_binning(_Y, _P, weights=w),
    "fit_temperature": lambda w: bc.fit_temperature(_Y, _P - 0.5, weights=w),
    "fit_scaling_binning": lambda w: bc.fit_scaling_binning(_Y, _P, bins=4, weights=w),
    "fit_bbq": lambda w: bc.fit_bbq(_Y, _P, weights=w),
    "fit_spline": lambda w: bc.fit_spline(_Y, _P, knots=4, folds=2, weights=w),
    "fit_one_vs_rest": lambda w: bc.fit_one_vs_rest(
        _Y, np.stack([1 - _P, _P], axis=1), weights=w
    ),
    "fit_conformal": lambda w: br.fit_conformal(_RY, _RMU, weights=w),
    "fit_conformalized_quantile": lambda w: br.fit_conformalized_quantile(
        _RY, _RMU - 1, _RMU + 1, weights=w
    ),
    "fit_sigma_scaling": lambda w: br.fit_sigma_scaling(_RY, _RMU, _RSC, weights=w),
    "fit_isotonic_recalibrator": lambda w: br.fit_isotonic_recalibrator(
        np.clip(0.5 + 0.2 * _RY, 0, 1), weights=w
    ),
}


def _bad(n):
    neg = np.ones(n)
    neg[3] = -1.0
    nan = np.ones(n)
    nan[4] = np.nan
    inf = np.ones(n)
    inf[0] = np.inf
    return {
        "negative": (neg, ">= 0"),
        "nan": (nan, "NaN"),
        "inf": (inf, "infinite"),
        "shape": (np.ones(n + 1), "shape"),
        "2-d": (np.ones((n, 1)), "shape"),
        "all zero": (np.zeros(n), "all 0"),
    }


@pytest.mark.parametrize("fit", list(FITS))
@pytest.mark.parametrize("case", list(_bad(8)))
def test_bad_weights_raise_naming_the_argument(fit, case):
    w, words = _bad(_Y.size)[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="weights") as err:
            FITS[fit](w)
    assert words in str(err.value)


def test_bad_weights_under_jit_give_nan():
    w = np.ones(_Y.size, DTYPE)
    w[2] = -1
    cal = jax.jit(lambda w: bc.fit_platt(_Y, _P, weights=w))(jnp.asarray(w))
    assert np.isnan(float(cal.a))
