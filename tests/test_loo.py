"""LOO-PIT (PSIS-LOO) from ArviZ data and from NumPyro models; split-free recalibration.

References: ArviZ's own LOO-PIT and PSIS on ArviZ's bundled ``centered_eight`` example
(Rubin 1981; PyMC fit shipped with ArviZ): ``az.loo_pit`` and ``az.psislw`` on arviz 0.x,
``arviz_stats.loo_pit`` and ``.azstats.psislw`` on arviz 1.x (``tests/_arviz_compat.py``);
a direct float64 numpy computation ``sum_s w_is scipy.stats.norm.cdf(y_i, mu_s, sigma_s)``
from the same PSIS weights; :func:`bayescal.numpyro.rao_blackwell_pit` for uniform weights; binomial
coverage bounds for the split-free recalibration.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.stats
from numpyro.infer import Predictive

from bayescal import arviz as baz
from bayescal import numpyro as bn
from bayescal import regression as reg
from tests import _arviz_compat as azc
from tests.conftest import X64

ATOL = 1e-9 if X64 else 2e-6


def normal_model(x, y=None):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Normal(a + b * x, s), obs=y)


@pytest.fixture(scope="module")
def fitted():
    """Exact-ish posterior draws (independent, fabricated around the truth) and data."""
    rng = np.random.default_rng(0)
    n, s = 60, 400
    x = rng.normal(size=n)
    y = 0.3 + 0.5 * x + rng.normal(size=n)
    post = {
        "a": 0.3 + 0.13 * rng.normal(size=s),
        "b": 0.5 + 0.13 * rng.normal(size=s),
        "s": np.exp(0.09 * rng.normal(size=s)),
    }
    dtype = np.float64 if X64 else np.float32
    post = {k: jnp.asarray(v, dtype) for k, v in post.items()}
    return jnp.asarray(x, dtype), jnp.asarray(y, dtype), post


def hand_rb_loo(post, x, y):
    """float64 numpy: ArviZ's PSIS weights, then sum_s w_is Phi(y_i | theta_s)."""
    a, b, s = (np.asarray(post[k], np.float64) for k in "abs")
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    mu = a[:, None] + b[:, None] * x
    ll = scipy.stats.norm.logpdf(y, mu, s[:, None])
    lw, k = azc.psislw(ll.T, r_eff=1.0)
    return (np.exp(lw) * scipy.stats.norm.cdf(y, mu, s[:, None]).T).sum(1), k


# --- bayescal.arviz.loo_pit ---------------------------------------------------------------


def test_arviz_loo_pit_equals_az_loo_pit_on_centered_eight():
    data = azc.az.load_arviz_data("centered_eight")  # bundled with arviz, no download
    ref = azc.loo_pit(data, "obs")  # az.loo_pit (0.x) / arviz_stats.loo_pit (1.x)
    out = baz.loo_pit(data)
    np.testing.assert_allclose(out.pit.values, ref, atol=1e-6)
    assert out.pit.dims == ("school",)
    # Pareto k: az.loo's pointwise k from the same PSIS
    k_ref = azc.loo_pareto_k(data, "obs")
    np.testing.assert_allclose(out.pareto_k.values, k_ref, rtol=1e-12)
    # every container (DataTree, dict of Datasets; InferenceData on 0.x) gives the
    # same, flat too
    for form in azc.containers(data):
        flat = baz.loo_pit(form, "obs", flat=True)
        np.testing.assert_allclose(np.asarray(flat.pit), ref, atol=1e-6)
    # it differs from the in-sample PIT (the point of LOO)
    assert np.abs(baz.pit(data).values - ref).max() > 0.02


def test_arviz_loo_pit_randomized_between_lt_and_le():
    rng = np.random.default_rng(1)
    pp = rng.poisson(3.0, size=(2, 100, 20)).astype(float)
    y = rng.poisson(3.0, size=20).astype(float)
    ll = scipy.stats.poisson.logpmf(y, 3.0 + 0.1 * rng.normal(size=(2, 100, 1)))
    data = azc.from_dict(
        {
            "posterior": {"lam": rng.normal(size=(2, 100))},
            "posterior_predictive": {"y": pp},
            "log_likelihood": {"y": ll},
            "observed_data": {"y": y},
        }
    )
    upper = np.asarray(baz.loo_pit(data, flat=True).pit)
    u = np.asarray(baz.loo_pit(data, key=0, flat=True).pit)
    r_eff = azc.relative_ess(data)  # ArviZ's default r_eff, as az.loo computes it
    assert r_eff != 1.0
    np.testing.assert_allclose(baz._relative_ess(azc.group(data, "posterior"), 200), r_eff)
    lw, _ = azc.psislw(ll.reshape(200, 20).T, r_eff=r_eff)
    w = np.exp(lw)
    lower = (w * (pp.reshape(200, 20).T < y[:, None])).sum(1)
    np.testing.assert_allclose(upper, (w * (pp.reshape(200, 20).T <= y[:, None])).sum(1), atol=ATOL * 10)
    assert np.all(u >= lower - 1e-6) and np.all(u <= upper + 1e-6)
    assert np.any((u > lower + 1e-6) & (u < upper - 1e-6))


def test_arviz_loo_pit_warns_on_large_pareto_k():
    rng = np.random.default_rng(2)
    ll = np.zeros((1, 200, 2))
    ll[0, :, 1] = 30 * rng.standard_cauchy(200)  # heavy-tailed ratios: large k
    data = azc.from_dict(
        {
            "posterior_predictive": {"y": rng.normal(size=(1, 200, 2))},
            "log_likelihood": {"y": ll},
            "observed_data": {"y": np.zeros(2)},
        }
    )
    with pytest.warns(UserWarning, match=r"of 2 Pareto k values exceed 0.7"):
        baz.loo_pit(data)


def test_arviz_loo_pit_flat_log_likelihood_gives_raw_weights_and_infinite_k():
    # A log-likelihood constant over the draws: no Pareto tail to fit. arviz 0.x's
    # psislw keeps the raw (here uniform) weights and gives k = inf; arviz_stats raises
    # "All tail values are the same" for the whole array, and bayescal gives such rows
    # the 0.x result on arviz 1.x too, the other rows their usual PSIS.
    rng = np.random.default_rng(3)
    pp = rng.normal(size=(1, 300, 3))
    ll = np.zeros((1, 300, 3))
    ll[0, :, 1] = -0.5 * (0.3 - rng.normal(0.0, 0.2, size=300)) ** 2
    data = azc.from_dict(
        {
            "posterior_predictive": {"y": pp},
            "log_likelihood": {"y": ll},
            "observed_data": {"y": np.array([-0.5, 0.3, 1.0])},
        }
    )
    with pytest.warns(UserWarning, match=r"2 of 3 Pareto k values exceed 0.7"):
        out = baz.loo_pit(data, flat=True)
    np.testing.assert_array_equal(out.pareto_k[[0, 2]], [np.inf, np.inf])
    plain = np.asarray(baz.pit(data, flat=True))
    np.testing.assert_allclose(np.asarray(out.pit)[[0, 2]], plain[[0, 2]], atol=ATOL)
    lw, k = azc.psislw(ll[0, :, 1:2].T)  # the varying row alone: ArviZ's own PSIS
    # (bayescal's PSIS equals ArviZ's to rounding: tests/test_psis.py)
    assert np.isfinite(k[0]) and k[0] < 0.7
    assert out.pareto_k[1] == pytest.approx(k[0], rel=1e-12, abs=0)
    np.testing.assert_allclose(
        out.pit[1], (np.exp(lw[0]) * (pp[0, :, 1] <= 0.3)).sum(), atol=ATOL
    )


def test_arviz_loo_pit_bad_input():
    data = azc.az.load_arviz_data("centered_eight")
    no_ll = {g: azc.group(data, g) for g in ("posterior_predictive", "observed_data")}
    with pytest.raises(ValueError, match="no 'log_likelihood' group"):
        baz.loo_pit(no_ll)
    with pytest.raises(ValueError, match="r_eff must be a positive"):
        baz.loo_pit(data, r_eff=-1.0)


# --- bayescal.numpyro.loo_pit -----------------------------------------------------------


def test_numpyro_loo_pit_equals_hand_psis_mixture_cdf(fitted):
    x, y, post = fitted
    out = bn.loo_pit(normal_model, post, y, x)
    ref, k_ref = hand_rb_loo(post, x, y)
    np.testing.assert_allclose(out.pit, ref, atol=ATOL)
    np.testing.assert_allclose(out.pareto_k, k_ref, atol=1e-9 if X64 else 1e-4)
    assert out.pit.shape == y.shape and out.pareto_k.shape == y.shape


def test_numpyro_loo_pit_counting_agrees_with_rao_blackwell(fitted):
    x, y, post = fitted
    rb = bn.loo_pit(normal_model, post, y, x)
    pred = Predictive(normal_model, post)(jax.random.key(3), x)
    cnt = bn.loo_pit(normal_model, post, y, x, rao_blackwell=False, predictive=pred)
    # Counting = RB + noise of mean zero; its sd is at most sqrt(u(1-u) sum_s w_s^2)
    # (weighted Bernoulli sum): 4 sd per point, with the weights' own sum of squares.
    ll = scipy.stats.norm.logpdf(
        np.asarray(y), np.asarray(post["a"])[:, None] + np.asarray(post["b"])[:, None] * np.asarray(x),
        np.asarray(post["s"])[:, None],
    )
    lw, _ = azc.psislw(ll.T)
    sd = np.sqrt(0.25 * (np.exp(lw) ** 2).sum(1))
    assert np.all(np.abs(np.asarray(cnt.pit) - np.asarray(rb.pit)) <= 4 * sd + 1e-6)
    np.testing.assert_array_equal(cnt.pareto_k, rb.pareto_k)


def test_weighted_kernel_with_uniform_weights_is_rao_blackwell_pit(fitted):
    # the weights path of the shared kernel (used by loo_pit) with equal weights gives
    # rao_blackwell_pit exactly up to rounding (PSIS itself smooths even constant
    # ratios, so this is checked on the kernel)
    x, y, post = fitted
    prep = bn._prepare(normal_model, post, (x,), {}, site="obs", y_true=y, bucket=False)
    for w in (jnp.ones((400, 60), y.dtype), jnp.full((400, 60), 3.5, y.dtype)):
        means = bn._run_average(
            normal_model, prep, site="obs", kind="pit", chunk_size=None, obs_weights=w
        )
        ref = bn.rao_blackwell_pit(normal_model, post, y, x)
        np.testing.assert_allclose(means[0], ref, atol=ATOL)


def test_numpyro_loo_pit_bad_input(fitted):
    x, y, post = fitted
    with pytest.raises(ValueError, match="pass predictive="):
        bn.loo_pit(normal_model, post, y, x, rao_blackwell=False)
    with pytest.raises(ValueError, match="only used with rao_blackwell=False"):
        bn.loo_pit(normal_model, post, y, x, predictive={"obs": jnp.zeros((400, 60))})
    with pytest.raises(ValueError, match="expected"):
        bn.loo_pit(normal_model, post, y, x, rao_blackwell=False, predictive=jnp.zeros((3, 60)))

    def event_model(x, y=None):
        a = numpyro.sample("a", dist.Normal(0.0, 1.0))
        numpyro.sample("obs", dist.Normal(a + x, 1.0).to_event(1), obs=y)

    with pytest.raises(ValueError, match=r"event shape.*numpyro.plate"):
        bn.loo_pit(event_model, {"a": post["a"]}, y, x)


# --- split-free recalibration ------------------------------------------------------------


@pytest.mark.slow
def test_split_free_recalibration_reaches_nominal_coverage():
    """Normal model with a too-small fixed noise sd (0.5; the truth is 1.0).

    Conjugate posterior of the coefficients drawn exactly. LOO-PIT of the 400 training
    points, no calibration split. Held-out 90% central coverage: raw about 0.59; the
    isotonic recalibrator and sigma-scaling fitted on LOO-PIT bring it to 0.90. The
    tolerance is 3 sd of coverage_hat - 0.9: binomial sd sqrt(.09 / n_test) of the test
    fraction plus sqrt(.09 / n_train) of the recalibrated interval's true coverage.
    """
    rng = np.random.default_rng(4)
    n_train, n_test, s_draws, sigma0 = 400, 2000, 400, 0.5
    X = rng.normal(size=(n_train + n_test, 2))
    y = X @ np.array([1.0, -0.5]) + rng.normal(size=n_train + n_test)
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    prec = Xtr.T @ Xtr / sigma0**2 + np.eye(2) / 100
    cov = np.linalg.inv(prec)
    mean = cov @ Xtr.T @ ytr / sigma0**2
    beta = rng.multivariate_normal(mean, cov, size=s_draws)
    dtype = np.float64 if X64 else np.float32

    def model(X, y=None):
        b = numpyro.sample("b", dist.Normal(0.0, 10.0).expand([2]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("obs", dist.Normal(X @ b, sigma0), obs=y)

    post = {"b": jnp.asarray(beta, dtype)}
    loo = bn.loo_pit(model, post, ytr.astype(dtype), Xtr.astype(dtype))
    u_test = np.asarray(bn.rao_blackwell_pit(model, post, yte.astype(dtype), Xte.astype(dtype)))

    def coverage(u):
        return float(np.mean(np.abs(2 * u - 1) <= 0.9))

    tol = 3 * np.sqrt(0.09 / n_test + 0.09 / n_train)
    raw = coverage(u_test)
    assert abs(raw - 0.9) > 5 * tol  # far off
    iso = reg.fit_isotonic_recalibrator(loo.pit)
    assert abs(coverage(np.asarray(iso(u_test))) - 0.9) <= tol
    # sigma-scaling: the predictive is Normal here, so Phi^-1(LOO-PIT) is the
    # standardized LOO residual; fit the factor on it, apply to the test predictive
    z = scipy.stats.norm.ppf(np.clip(np.asarray(loo.pit, np.float64), 1e-12, 1 - 1e-12))
    scaling = reg.fit_sigma_scaling(z, np.zeros_like(z), np.ones_like(z))
    m, v = bn.predictive_moments(model, post, Xte.astype(dtype))
    lo, hi = reg.recalibrated_interval(scaling, 0.9, loc=m, scale=jnp.sqrt(v))
    cov_sigma = float(np.mean((yte >= np.asarray(lo)) & (yte <= np.asarray(hi))))
    assert abs(cov_sigma - 0.9) <= tol


def test_loo_pit_shows_no_arviz_refactor_notice(tmp_path):
    # arviz 0.23 warns (FutureWarning, once a day, stamped in the user's cache folder)
    # on import about its own refactor; bayescal's LOO-PIT and `bayescal demo` must not
    # pass it on to a user's first call. A fresh cache folder makes it fire.
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from bayescal.arviz import _psislw\n"
        "_psislw(np.random.default_rng(0).normal(size=(2, 50)), 1.0)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", "-c", code],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "ArviZ is undergoing" not in out.stderr


def test_psis_in_row_blocks_equals_one_call(monkeypatch):
    # The Pareto fits run on blocks of rows (bounded [rows, m, M] temporaries); blocks
    # that do not divide the rows give exactly the weights and k of one block
    from bayescal import _psis as psis

    rng = np.random.default_rng(5)
    ll = rng.normal(size=(2, 5, 300)).astype(np.float32)  # [..., S]
    whole_lw, whole_k = baz._psislw(ll, 1.0)
    monkeypatch.setattr(psis, "_FIT_BLOCK_ELEMENTS", 1)  # one row per block
    lw, k = baz._psislw(ll, 1.0)
    assert lw.shape == ll.shape and k.shape == ll.shape[:-1]
    np.testing.assert_array_equal(lw, whole_lw)
    np.testing.assert_array_equal(k, whole_k)
