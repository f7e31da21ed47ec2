"""Tests of the core pieces added for classification: bin edges, per-bin means,
isotonic fit on a covariate with ties pooled, host argsort."""

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.isotonic import IsotonicRegression

from tests import _kernels as kernels
from tests.conftest import X64

DTYPE = np.float64 if X64 else np.float32


def test_quantile_edges_match_numpy_quantile(rng):
    # reference: numpy 2.4 np.quantile(method="linear"), numpy's default
    x = rng.beta(2, 5, size=997).astype(DTYPE)
    got = np.asarray(kernels.quantile_edges(jnp.asarray(x), 7))
    ref = np.quantile(x, np.linspace(0, 1, 8))
    np.testing.assert_allclose(got, ref, rtol=1e-6 if not X64 else 1e-12)
    assert got[0] == x.min() and got[-1] == x.max()
    assert np.all(np.diff(got) >= 0)


def test_quantile_edges_with_ties_are_nondecreasing_and_vmap():
    x = jnp.asarray(np.array([0.0] * 6 + [0.5, 0.7, 1.0, 1.0], DTYPE))
    e = np.asarray(kernels.quantile_edges(x, 5))
    np.testing.assert_array_equal(e[:3], 0.0)  # repeated edges -> empty bins
    batch = jnp.stack([x, x[::-1]])
    np.testing.assert_array_equal(
        jax.vmap(lambda v: kernels.quantile_edges(v, 5))(batch)[1], e
    )


def test_freedman_diaconis_edges_match_numpy(rng):
    # reference: numpy 2.4 np.histogram_bin_edges(bins="fd", range=(0, 1))
    x = rng.uniform(size=500)
    np.testing.assert_array_equal(
        kernels.freedman_diaconis_edges(x), np.histogram_bin_edges(x, "fd", range=(0, 1))
    )
    assert kernels.freedman_diaconis_edges(np.full(10, 0.3)).size == 2  # IQR 0: one bin
    assert kernels.freedman_diaconis_edges(x, max_bins=3).size == 4


def test_binned_means_keep_empty_bins_with_fill_and_int_counts():
    idx = jnp.array([0, 0, 2])
    v = jnp.array([1.0, 3.0, 5.0], DTYPE)
    fill = jnp.array([-1.0, -2.0, -3.0], DTYPE)
    count, (mean,) = kernels.binned_means(idx, 3, (v,), fill=fill)
    np.testing.assert_array_equal(count, [2, 0, 1])
    assert jnp.issubdtype(count.dtype, jnp.integer)
    np.testing.assert_array_equal(mean, [2.0, -2.0, 5.0])
    total, (wmean,) = kernels.binned_means(idx, 3, (v,), weights=jnp.array([1.0, 3.0, 2.0]))
    np.testing.assert_allclose(total, [4.0, 0.0, 2.0])
    np.testing.assert_allclose(wmean, [2.5, 0.0, 5.0])


def test_isotonic_fit_pools_ties_like_sklearn(rng):
    # reference: scikit-learn 1.9 IsotonicRegression (averages tied X before PAV)
    x = (rng.integers(0, 30, size=400) / 30).astype(DTYPE)
    y = (rng.uniform(size=400) < x).astype(DTYPE)
    w = rng.uniform(0.5, 2.0, size=400).astype(DTYPE)
    fit = kernels.isotonic_fit(jnp.asarray(x), jnp.asarray(y), jnp.asarray(w))
    ref = IsotonicRegression().fit(x, y, sample_weight=w)
    k = int(fit.num_thresholds)
    assert k == np.unique(x).size
    np.testing.assert_array_equal(fit.thresholds[:k], np.unique(x))
    tol = 1e-12 if X64 else 2e-6
    np.testing.assert_allclose(fit.fitted, ref.predict(x), atol=tol)
    # tied x share one fitted value; the padding repeats the last threshold
    np.testing.assert_allclose(np.asarray(fit.weight[:k]).sum(), w.sum(), rtol=1e-5)
    assert np.all(np.asarray(fit.weight[k:]) == 0)
    assert np.all(np.asarray(fit.thresholds[k:]) == x.max())


def test_isotonic_fit_vmap_matches_loop(rng):
    x = jnp.asarray(rng.integers(0, 10, size=(3, 50)).astype(DTYPE))
    y = jnp.asarray((rng.uniform(size=(3, 50)) < 0.5).astype(DTYPE))
    w = jnp.ones_like(x)
    batched = kernels.isotonic_fit(x, y, w).fitted
    loop = jnp.stack([kernels.isotonic_fit(x[i], y[i], w[i]).fitted for i in range(3)])
    np.testing.assert_array_equal(batched, loop)


def test_argsort_last_axis_matches_numpy(rng):
    x = rng.normal(size=(2, 100)).astype(DTYPE)
    got = np.asarray(jax.jit(kernels.argsort_last_axis)(jnp.asarray(x)))
    np.testing.assert_array_equal(np.take_along_axis(x, got, -1), np.sort(x, -1))


def test_pool_ties_host_and_xla_paths_agree(rng):
    # The CPU path of isotonic_fit pools on the host (numpy); accelerators use the XLA
    # path. Both must give the same padded arrays (the XLA path is run here on CPU).
    from bayescal._src.ties import _host_pool_padded, _xla_pool

    x = (rng.integers(0, 25, size=200) / 25).astype(DTYPE)
    y = rng.uniform(size=200).astype(DTYPE)
    w = rng.uniform(0.5, 2.0, size=200).astype(DTYPE)
    for weights in (None, w):
        host = _host_pool_padded(x, y, weights)
        xla = jax.jit(_xla_pool)(
            jnp.asarray(x),
            jnp.asarray(y),
            None if weights is None else jnp.asarray(weights),
        )
        order_h, order_x = np.asarray(host[0]), np.asarray(xla[0])
        np.testing.assert_array_equal(x[order_h], x[order_x])  # same sort (ties aside)
        np.testing.assert_array_equal(host[1], xla[1])
        for a, b in zip(host[2:], xla[2:], strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    pooled = kernels.pool_ties(x, y, w)
    ref_mean = [np.average(y[x == v], weights=w[x == v]) for v in np.unique(x)]
    np.testing.assert_allclose(pooled.mean, ref_mean, rtol=1e-5)
    np.testing.assert_array_equal(pooled.thresholds, np.unique(x))


def test_isotonic_fit_vmap_with_shared_response(rng):
    # vmap over x only: the host callback sees a batched x and an unbatched y
    x = jnp.asarray(rng.integers(0, 8, size=(3, 40)).astype(DTYPE))
    y = jnp.asarray((rng.uniform(size=40) < 0.5).astype(DTYPE))
    got = jax.vmap(lambda xi: kernels.isotonic_fit(xi, y).fitted)(x)
    for i in range(3):
        np.testing.assert_allclose(got[i], kernels.isotonic_fit(x[i], y).fitted, rtol=1e-6)



def test_shared_maps_equal_scipy_in_both_tails():
    # reference: scipy.special.expit (float64). The host twins' sigmoid, Platt and beta
    # maps (NumPy, float64) and the kernels' (xp=jax.numpy, in DTYPE) are accurate to a
    # few ulp RELATIVE, also where the probability is tiny (the twins' former
    # 0.5 + 0.5 tanh(x / 2) was 6e-4 off at x = -30)
    import scipy.special

    from bayescal.classification._host import beta_map, platt_map, sigmoid

    x = np.concatenate([-np.geomspace(1e-3, 80, 200), [0.0], np.geomspace(1e-3, 80, 200)])
    np.testing.assert_allclose(sigmoid(x), scipy.special.expit(x), rtol=4e-16)
    xd = x.astype(DTYPE)
    ulp = np.finfo(DTYPE).eps
    np.testing.assert_allclose(sigmoid(jnp.asarray(xd), jnp), scipy.special.expit(xd), rtol=8 * ulp)
    a, b = np.float64(-1.7), np.float64(0.3)
    np.testing.assert_allclose(platt_map(a, b, x), scipy.special.expit(-(a * x + b)), rtol=1e-15)
    q = scipy.special.expit(x)[(x > -40) & (x < 35)]
    a, b, c = np.float64(1.3), np.float64(0.0), np.float64(-0.2)
    want = scipy.special.expit(a * np.log(q) + c)  # b = 0: the ln(1 - q) term dropped
    np.testing.assert_allclose(beta_map(a, b, c, q), want, rtol=1e-13)
    qd = q.astype(DTYPE)
    got = beta_map(*(jnp.asarray(v, DTYPE) for v in (a, b, c, qd)), jnp)
    want = scipy.special.expit(DTYPE(a) * np.log(qd.astype(np.float64)) + DTYPE(c))
    np.testing.assert_allclose(got, want, rtol=64 * ulp)
