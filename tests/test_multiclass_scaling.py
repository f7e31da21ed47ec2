"""Vector scaling, matrix scaling (ODIR) and Dirichlet calibration against references.

Reference: the objective written out in NumPy (float64) and minimised by
``scipy.optimize.minimize(method="L-BFGS-B")`` with its analytic gradient and tight
tolerances. The objective is Kull et al. (2019, "Beyond temperature scaling", NeurIPS,
Sec. 4): mean NLL + lambda / (K (K - 1)) * sum_{k != j} W_kj^2 + mu / K * sum b_k^2
(ODIR), or lambda / (K (K + 1)) * (sum W^2 + sum b^2) (L2, dirichletcal's reg_norm
form); vector scaling is Guo et al. (2017, Sec. 4.2). The fitted parameters' loss
(evaluated in float64) must not exceed scipy's by more than 1e-6 relative (x64; a
float32 rounding level otherwise), and the predictions must agree.
"""

import jax
import numpy as np
import pytest
import scipy.optimize
import scipy.special

from bayescal import classification as clf
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
LOSS_RTOL = 1e-6 if X64 else 2e-5
PRED_ATOL = 1e-4 if X64 else 1e-3


def _data(n=400, k=4, seed=0):
    r = np.random.default_rng(seed)
    z = 2.5 * r.normal(size=(n, k))
    mix = np.eye(k) + 0.3 * r.normal(size=(k, k))  # miscalibrated and mixed classes
    truth = scipy.special.softmax(z @ mix.T / 2 + 0.4 * np.arange(k), axis=1)
    y = (r.uniform(size=(n, 1)) > truth.cumsum(axis=1)).sum(axis=1).clip(0, k - 1)
    y[:k] = np.arange(k)
    w = r.integers(0, 4, size=n).astype(float)
    w[:k] = 1.0
    return y, z, w


def _nll(eta, y, w):
    logq = scipy.special.log_softmax(eta, axis=1)
    return -np.sum(w * logq[np.arange(len(y)), y]) / np.sum(w)


def _matrix_loss(theta, x, y, w, lam, mu, reg):
    k = x.shape[1]
    W, b = theta[:, :k], theta[:, k]
    loss = _nll(x @ W.T + b, y, w)
    if reg == "odir":
        off = W - np.diag(np.diag(W))
        return loss + lam / (k * (k - 1)) * np.sum(off**2) + mu / k * np.sum(b**2)
    return loss + lam / (k * (k + 1)) * (np.sum(W**2) + np.sum(b**2))


def _scipy_matrix(x, y, w, lam=0.0, mu=0.0, reg="odir"):
    n, k = x.shape
    xt = np.hstack([x, np.ones((n, 1))])
    onehot = np.eye(k)[y]

    def f(v):
        theta = v.reshape(k, k + 1)
        value = _matrix_loss(theta, x, y, w, lam, mu, reg)
        q = scipy.special.softmax(xt @ theta.T, axis=1)
        grad = ((q - onehot) * w[:, None]).T @ xt / np.sum(w)
        if reg == "odir":
            pen = np.hstack([lam / (k * (k - 1)) * (1 - np.eye(k)), np.full((k, 1), mu / k)])
        else:
            pen = np.full((k, k + 1), lam / (k * (k + 1)))
        return value, (grad + 2 * pen * theta).ravel()

    x0 = np.hstack([np.eye(k), np.zeros((k, 1))]).ravel()
    res = scipy.optimize.minimize(
        f, x0, jac=True, method="L-BFGS-B",
        options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-11},
    )  # fmt: skip
    return res.x.reshape(k, k + 1), res.fun


def _scipy_vector(z, y, w):
    n, k = z.shape
    onehot = np.eye(k)[y]

    def f(v):
        a, b = v[:k], v[k:]
        eta = z * a + b
        q = scipy.special.softmax(eta, axis=1)
        r = (q - onehot) * w[:, None] / np.sum(w)
        return _nll(eta, y, w), np.concatenate([np.sum(r * z, axis=0), np.sum(r, axis=0)])

    x0 = np.concatenate([np.ones(k), np.zeros(k)])
    res = scipy.optimize.minimize(
        f, x0, jac=True, method="L-BFGS-B",
        options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-11},
    )  # fmt: skip
    return res.x[:k], res.x[k:], res.fun


def _check(loss, ref_loss, pred, ref_pred):
    assert loss <= ref_loss + LOSS_RTOL * abs(ref_loss), (loss, ref_loss)
    np.testing.assert_allclose(pred, ref_pred, atol=PRED_ATOL)


@pytest.mark.parametrize("weighted", [False, True])
def test_vector_scaling_matches_scipy(weighted):
    y, z, w = _data()
    w = w if weighted else np.ones_like(w)
    cal = clf.fit_vector_scaling(y, z.astype(DT), weights=w if weighted else None)
    a, b = np.asarray(cal.coef, np.float64), np.asarray(cal.intercept, np.float64)
    ra, rb, ref = _scipy_vector(z, y, w)
    _check(
        _nll(z * a + b, y, w),
        ref,
        np.asarray(cal(z.astype(DT))),
        scipy.special.softmax(z * ra + rb, axis=1),
    )
    # the gauge: intercepts centred (softmax ignores a common shift)
    assert abs(float(np.sum(b))) < 1e-4


@pytest.mark.parametrize(
    "lam, mu", [(0.0, 0.0), (0.5, 0.5), (2.0, 0.0), (0.0, 1.0)]
)
def test_matrix_scaling_matches_scipy(lam, mu):
    y, z, w = _data(seed=1)
    cal = clf.fit_matrix_scaling(y, z.astype(DT), reg_lambda=lam, reg_mu=mu, weights=w)
    theta = np.hstack([np.asarray(cal.coef, np.float64), np.asarray(cal.intercept)[:, None]])
    ref_theta, ref = _scipy_matrix(z, y, w, lam, mu)
    k = z.shape[1]
    ref_pred = scipy.special.softmax(z @ ref_theta[:, :k].T + ref_theta[:, k], axis=1)
    _check(
        _matrix_loss(theta, z, y, w, lam, mu, "odir"),
        ref,
        np.asarray(cal(z.astype(DT))),
        ref_pred,
    )
    if lam == 0:  # the free direction fixed at the identity's column sums
        np.testing.assert_allclose(theta[:, :k].sum(axis=0), 1.0, atol=1e-4)
    if mu == 0:
        assert abs(theta[:, k].sum()) < 1e-4


@pytest.mark.parametrize(
    "reg, lam, mu, eps",
    [("odir", 0.0, 0.0, None), ("odir", 0.3, 0.1, None), ("l2", 0.5, 0.0, 1e-6)],
)
def test_dirichlet_matches_scipy(reg, lam, mu, eps):
    y, z, w = _data(seed=2, k=3)
    p = scipy.special.softmax(z / 1.5, axis=1)
    cal = clf.fit_dirichlet(
        y, p.astype(DT), regularization=reg, reg_lambda=lam, reg_mu=mu, eps=eps, weights=w
    )
    x = np.log(p if eps is None else np.clip(p, eps, 1 - eps))
    theta = np.hstack([np.asarray(cal.coef, np.float64), np.asarray(cal.intercept)[:, None]])
    ref_theta, ref = _scipy_matrix(x, y, w, lam, mu, reg)
    k = p.shape[1]
    ref_pred = scipy.special.softmax(x @ ref_theta[:, :k].T + ref_theta[:, k], axis=1)
    _check(
        _matrix_loss(theta, x, y, w, lam, mu, reg),
        ref,
        np.asarray(cal(p.astype(DT))),
        ref_pred,
    )


def test_two_classes_are_platt_and_beta():
    # Identities (proved in the docstrings): on logits (0, s) vector and matrix scaling
    # give sigmoid(a s + c), Platt scaling of s with hard labels; Dirichlet calibration
    # on (1 - p, p) is beta calibration without its sign constraints (Kull et al. 2017,
    # 2019), equal to fit_beta where beta's optimum is interior.
    r = np.random.default_rng(5)
    s = r.normal(0, 2, size=300)
    y = (r.uniform(size=300) < scipy.special.expit(0.6 * s - 0.4)).astype(int)
    two = np.stack([np.zeros_like(s), s], axis=1).astype(DT)
    platt = np.asarray(clf.fit_platt(y, s.astype(DT), input="score", soft_labels=False)(s.astype(DT)))
    for fit in (clf.fit_vector_scaling, clf.fit_matrix_scaling):
        got = np.asarray(fit(y, two)(two))[:, 1]
        np.testing.assert_allclose(got, platt, atol=1e-4 if X64 else 1e-3)
    p = scipy.special.expit(s).astype(DT)
    beta = clf.fit_beta(y, p)
    assert float(beta.a) > 0 and float(beta.b) > 0  # interior
    pp = np.stack([1 - p, p], axis=1)
    got = np.asarray(clf.fit_dirichlet(y, pp)(pp))[:, 1]
    np.testing.assert_allclose(got, np.asarray(beta(p)), atol=1e-4 if X64 else 1e-3)


def test_nested_models_nll_order():
    # temperature < vector < matrix scaling are nested (w_k = 1/T, b = 0; W = diag(w)),
    # so their fitted training NLLs are ordered (up to rounding).
    y, z, _ = _data(seed=3)
    zz = z.astype(DT)
    losses = [
        -np.mean(np.log(np.asarray(cal(zz), np.float64)[np.arange(len(y)), y]))
        for cal in (
            clf.fit_temperature(y, zz),
            clf.fit_vector_scaling(y, zz),
            clf.fit_matrix_scaling(y, zz),
        )
    ]
    tol = 1e-9 if X64 else 1e-5
    assert losses[1] <= losses[0] + tol and losses[2] <= losses[1] + tol, losses


def test_integer_weights_equal_repeated_rows():
    y, z, w = _data(n=120, seed=4)
    rep = np.repeat(np.arange(len(y)), w.astype(int))
    for fit in (clf.fit_vector_scaling, clf.fit_matrix_scaling):
        a = fit(y, z.astype(DT), weights=w)
        b = fit(y[rep], z[rep].astype(DT))
        np.testing.assert_allclose(
            np.asarray(a(z.astype(DT))), np.asarray(b(z.astype(DT))), atol=1e-5 if X64 else 2e-4
        )


def test_identity_start_is_kept_on_calibrated_probabilities_with_a_strong_penalty():
    # ODIR with large lambda and mu leaves only the diagonal: Dirichlet calibration then
    # rescales log p per class; probabilities drawn from themselves stay nearly unchanged.
    r = np.random.default_rng(6)
    p = scipy.special.softmax(r.normal(0, 2, size=(3000, 3)), axis=1)
    y = (r.uniform(size=(3000, 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 2)
    cal = clf.fit_dirichlet(y, p.astype(DT), reg_lambda=1e3, reg_mu=1e3)
    np.testing.assert_allclose(np.asarray(cal(p.astype(DT))), p, atol=0.03)


BAD = [
    (lambda y, z, p: clf.fit_matrix_scaling(y, z, reg_lambda=-1.0), ValueError, "reg_lambda"),
    (lambda y, z, p: clf.fit_matrix_scaling(y, z, reg_mu="a"), TypeError, "reg_mu"),
    (lambda y, z, p: clf.fit_dirichlet(y, p, regularization="l1"), ValueError, "regularization"),
    (
        lambda y, z, p: clf.fit_dirichlet(y, p, regularization="l2", reg_mu=1.0),
        ValueError,
        "reg_mu",
    ),
    (lambda y, z, p: clf.fit_vector_scaling(y, z[:, 0]), ValueError, "logits must be 2-D"),
    (lambda y, z, p: clf.fit_vector_scaling(y[:-1], z), ValueError, "y_true"),
    (lambda y, z, p: clf.fit_vector_scaling(np.minimum(y, 1), z), ValueError, "every class"),
    (lambda y, z, p: clf.fit_matrix_scaling(y, np.where(z > 3, np.nan, z)), ValueError, "logits"),
    (
        lambda y, z, p: clf.fit_dirichlet(y, np.where(p > 0.9, 1.0, p) / 1.0),
        ValueError,
        "probs",
    ),
    (lambda y, z, p: clf.fit_dirichlet(y, p, eps=1e-7, weights=-np.ones(len(y))), ValueError, "weights"),
    (lambda y, z, p: clf.fit_vector_scaling(y, z)(z[:, :2]), ValueError, "logits must have shape"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_argument(i):
    y, z, _ = _data(n=60, seed=7)
    p = scipy.special.softmax(z, axis=1)
    p[0] = [1.0, 0.0, 0.0, 0.0]
    fn, err, match = BAD[i]
    with pytest.raises(err, match=match):
        fn(y, z.astype(DT), p.astype(DT))


def test_jit_of_invalid_values_gives_nan():
    y, z, _ = _data(n=60, seed=8)
    bad = np.where(z > 3, np.inf, z).astype(DT)
    cal = jax.jit(clf.fit_matrix_scaling)(y, bad)
    assert np.isnan(np.asarray(cal.coef)).all()
