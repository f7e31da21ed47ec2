"""Squared kernel calibration error (Widmann, Lindsten & Zachariah 2019): the estimators
against a numpy double loop of the paper's formulas, the tests' sizes under the null
and power on miscalibrated models by simulation (fixed seeds), jit/vmap, bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayescal import classification as clf
from bayescal.classification import _kernel as _kk
from tests.conftest import optimized

X64 = bool(jax.config.jax_enable_x64)
TOL = 1e-9 if X64 else 2e-5


def _dtype():
    return np.float64 if X64 else np.float32


# ----------------------------------------------------------------- numpy reference
def _reference(y, p, bandwidth=None):
    """Widmann et al. (2019), section 4: with k(p, p') = exp(-||p - p'|| / nu) I_C and
    h_ij = k(p_i, p_j)-weighted (e_{y_i} - p_i)^T (e_{y_j} - p_j),
    SKCE_uq = binom(n, 2)^-1 sum_{i<j} h_ij (the U-statistic) and
    SKCE_ul = floor(n/2)^-1 sum_i h_{2i-1, 2i} (Lemma 3's linear estimator); nu the
    median of ||p_i - p_j|| over i < j (np.median) when not given. Plain double loops
    in float64; binary p is the two-class vector (1 - p, p)."""
    p = np.asarray(p, np.float64)
    y = np.asarray(y)
    if p.ndim == 1:
        p = np.stack([1 - p, p], axis=1)
        y = y.astype(int)
    n, c = p.shape
    e = np.eye(c)[y]
    r = e - p
    if bandwidth is None:
        d = [np.linalg.norm(p[i] - p[j]) for i in range(n) for j in range(i + 1, n)]
        bandwidth = float(np.median(d))

    def h(i, j):
        return math.exp(-np.linalg.norm(p[i] - p[j]) / bandwidth) * float(r[i] @ r[j])

    uq = sum(h(i, j) for i in range(n) for j in range(i + 1, n)) / (n * (n - 1) / 2)
    m = n // 2
    terms = np.array([h(2 * i, 2 * i + 1) for i in range(m)])
    return uq, terms.mean(), terms, bandwidth


def _binary(n, seed, *, shrink=1.0):
    rng = np.random.default_rng(seed)
    q = 1 / (1 + np.exp(-rng.normal(-0.3, 1.2, n)))
    y = (rng.random(n) < q).astype(np.float64)
    p = 1 / (1 + np.exp(-np.log(q / (1 - q)) / shrink))
    return y, p.astype(_dtype())


def _multiclass(n, c, seed, *, temperature=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, (n, c))
    q = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(c, p=row) for row in q])
    zt = z / temperature
    p = np.exp(zt) / np.exp(zt).sum(1, keepdims=True)
    return y, p.astype(_dtype())


@pytest.mark.parametrize("n", [2, 7, 60])
@pytest.mark.parametrize("bandwidth", [None, 0.3])
def test_binary_estimators_equal_the_numpy_double_loop(n, bandwidth):
    y, p = _binary(n, n, shrink=0.7)
    uq, ul, _, _ = _reference(y, p, bandwidth)
    got_uq = clf.kernel_calibration_error(y, p, bandwidth=bandwidth)
    got_ul = clf.kernel_calibration_error(y, p, estimator="linear", bandwidth=bandwidth)
    np.testing.assert_allclose(float(got_uq), uq, rtol=1e-4, atol=TOL)
    np.testing.assert_allclose(float(got_ul), ul, rtol=1e-4, atol=TOL)


@pytest.mark.parametrize("n,c", [(5, 3), (41, 4), (90, 10)])
def test_multiclass_estimators_equal_the_numpy_double_loop(n, c):
    y, p = _multiclass(n, c, n + c, temperature=0.6)
    uq, ul, _, _ = _reference(y, p)
    np.testing.assert_allclose(float(clf.kernel_calibration_error(y, p)), uq, rtol=1e-4, atol=TOL)
    got = clf.kernel_calibration_error(y, p, estimator="linear")
    np.testing.assert_allclose(float(got), ul, rtol=1e-4, atol=TOL)


@given(
    st.lists(
        st.sampled_from([0.0, -0.0, 1e-40, 0.25, 0.5, 1.0, 3.0, math.inf, math.nan])
        | st.floats(0, 2.0**100, width=32),
        min_size=1,
        max_size=80,
    ),
    st.integers(0, 79),
    st.booleans(),
)
def test_middle_order_statistics_equal_numpys_sort(values, count, wide):
    """The selection behind the median heuristic against ``np.sort`` (the values
    ``(count - 1) // 2`` and ``count // 2`` of the sorted array, bit for bit), with
    ties, zeros of both signs, subnormals, inf and NaN, under ``jit``; float64 too
    where x64 is on."""
    from bayescal._src.kernel_calibration import middle_order_statistics

    dt = np.float64 if wide and jax.config.jax_enable_x64 else np.float32
    v = np.asarray(values, dt)
    c = min(count, v.size - 1) + 1
    got = np.asarray(jax.jit(middle_order_statistics)(jnp.asarray(v), c))
    s = np.sort(v)
    want = np.array([s[(c - 1) // 2], s[c // 2]])
    np.testing.assert_array_equal(got + 0, want + 0)  # -0.0 reads as 0.0


def test_median_heuristic_is_the_reference_median_and_the_test_reports_it():
    y, p = _binary(101, 3)  # 5050 pairs (even count: np.median's mean of two)
    _, _, _, nu = _reference(y, p)
    t = clf.kernel_calibration_test(y, p)
    np.testing.assert_allclose(float(t.bandwidth), nu, rtol=1e-5)


def test_more_than_512_observations_are_blocked_and_match_the_reference():
    # the O(N^2) sum runs in blocks of rows; its value is the double loop's (a given
    # bandwidth: the median heuristic subsamples beyond 512 observations)
    y, p = _binary(700, 4, shrink=0.8)
    uq, ul, _, _ = _reference(y, p, 0.25)
    np.testing.assert_allclose(
        float(clf.kernel_calibration_error(y, p, bandwidth=0.25)), uq, rtol=1e-3, atol=TOL
    )


def test_binary_equals_the_two_class_form():
    # property: a binary y_prob is the two-class case (1 - p, p)
    y, p = _binary(300, 5)
    both = np.stack([1 - p, p], axis=1)
    for est in ("unbiased", "linear"):
        a = clf.kernel_calibration_error(y, p, estimator=est)
        b = clf.kernel_calibration_error(y.astype(int), both, estimator=est)
        np.testing.assert_allclose(float(a), float(b), rtol=1e-4, atol=10 * TOL)


def test_linear_test_p_value_is_the_normal_tail_of_the_reference_terms():
    # Widmann et al. (2019), Lemma 3: z = sqrt(m) mean / sd (ddof 1); p = 1 - Phi(z)
    import scipy.stats

    y, p = _binary(200, 6, shrink=0.6)
    _, ul, terms, nu = _reference(y, p)
    z = math.sqrt(len(terms)) * terms.mean() / terms.std(ddof=1)
    t = clf.kernel_calibration_test(y, p)
    np.testing.assert_allclose(float(t.statistic), ul, rtol=1e-4, atol=TOL)
    np.testing.assert_allclose(float(t.p_value), scipy.stats.norm.sf(z), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(float(t.bandwidth), nu, rtol=1e-5)


def test_unbiased_test_statistic_is_the_estimate_and_the_p_value_is_a_resampling_rank():
    y, p = _binary(150, 7)
    t = clf.kernel_calibration_test(y, p, estimator="unbiased", key=3, num_samples=99)
    np.testing.assert_allclose(
        float(t.statistic), float(clf.kernel_calibration_error(y, p)), rtol=1e-5, atol=TOL
    )
    # (1 + #{T_b >= T}) / (1 + B): a multiple of 1/100 in (0, 1]
    k = float(t.p_value) * 100
    assert 1 <= round(k) <= 100 and abs(k - round(k)) < 1e-3
    # the same key gives the same p-value; another key usually another
    again = clf.kernel_calibration_test(y, p, estimator="unbiased", key=3, num_samples=99)
    assert float(again.p_value) == float(t.p_value)


def test_new_n_in_a_bucket_gives_the_unpadded_values():
    # 300 and the padded bucket of 320: the padding must change nothing (property)
    y, p = _binary(300, 8, shrink=0.8)
    yj, pj = jnp.asarray(y), jnp.asarray(p)
    for est in ("unbiased", "linear"):
        eager = clf.kernel_calibration_error(y, p, estimator=est)
        traced = jax.jit(lambda a, b, e=est: clf.kernel_calibration_error(a, b, estimator=e))(yj, pj)
        np.testing.assert_allclose(float(eager), float(traced), rtol=1e-4, atol=10 * TOL)
    key = jax.random.key(1)
    eager = clf.kernel_calibration_test(y, p, estimator="unbiased", key=key, num_samples=49)
    traced = jax.jit(
        lambda a, b, k: clf.kernel_calibration_test(
            a, b, estimator="unbiased", key=k, num_samples=49
        )
    )(yj, pj, key)
    for a, b in zip(eager, traced, strict=True):
        np.testing.assert_allclose(float(a), float(b), rtol=1e-4, atol=10 * TOL)


def test_vmap_equals_a_loop():
    ys, ps = zip(*[_binary(64, 20 + s, shrink=0.7) for s in range(4)], strict=True)
    ys, ps = np.stack(ys), np.stack(ps)
    for est in ("unbiased", "linear"):
        fn = lambda a, b, e=est: clf.kernel_calibration_error(a, b, estimator=e)  # noqa: E731
        batched = np.asarray(jax.vmap(fn)(jnp.asarray(ys), jnp.asarray(ps)))
        loop = [float(fn(a, b)) for a, b in zip(ys, ps, strict=True)]
        np.testing.assert_allclose(batched, loop, rtol=1e-4, atol=10 * TOL)
    res = jax.vmap(lambda a, b: clf.kernel_calibration_test(a, b).p_value)(
        jnp.asarray(ys), jnp.asarray(ps)
    )
    loop = [float(clf.kernel_calibration_test(a, b).p_value) for a, b in zip(ys, ps, strict=True)]
    np.testing.assert_allclose(np.asarray(res), loop, rtol=1e-4, atol=1e-6)


def test_multiclass_jit_and_vmap_equal_eager():
    ys, ps = zip(*[_multiclass(50, 3, 60 + s) for s in range(3)], strict=True)
    ys, ps = np.stack(ys), np.stack(ps)
    for est in ("unbiased", "linear"):
        fn = lambda a, b, e=est: clf.kernel_calibration_error(a, b, estimator=e)  # noqa: E731
        loop = [float(fn(a, b)) for a, b in zip(ys, ps, strict=True)]
        batched = np.asarray(jax.vmap(fn)(jnp.asarray(ys), jnp.asarray(ps)))
        np.testing.assert_allclose(batched, loop, rtol=1e-4, atol=10 * TOL)
        jitted = float(jax.jit(fn)(jnp.asarray(ys[0]), jnp.asarray(ps[0])))
        np.testing.assert_allclose(jitted, loop[0], rtol=1e-4, atol=10 * TOL)


# ----------------------------------------------------------------- binary O(N log N)
# A binary y_prob's U-statistic is a 1-D Laplacian kernel sum, computed exactly by
# sorting and a linear recurrence; these compare it with O(N^2) references: the
# blocked two-class path (``binary=False``, what the multiclass input runs) and a
# float64 NumPy matrix product. Tolerance: both sides are sums of the n(n-1) terms
# h_ij, |h_ij| <= 2 |r_i| |r_j|, so each is off by at most ~(n + 8) eps times
# M = 2 (sum_i |r_i|)^2 / (n (n - 1)) (the recurrence adds up to n terms in sequence;
# the blocked sum less); 4x that is asserted (measured: <= 1e-7 M in float32 and
# <= 3e-16 M in x64 at n = 1e4).
EPS = float(np.finfo(_dtype()).eps)


def _scale(y, p):
    r = np.asarray(y, np.float64) - np.asarray(p, np.float64)
    n = len(r)
    return 2 * np.abs(r).sum() ** 2 / (n * (n - 1))


def _tol(y, p):
    return 4 * (len(p) + 8) * EPS * _scale(y, p)


def _numpy_uq(y, p, nu):
    """The binary U-statistic in float64 as the (1 - p, p) two-class double sum."""
    p = np.asarray(p, np.float64)
    pp = np.stack([1 - p, p], axis=1)
    r = np.stack([p - y, y - p], axis=1)
    d = np.sqrt(((pp[:, None] - pp[None]) ** 2).sum(-1))
    k = np.exp(-d / nu)
    np.fill_diagonal(k, 0)
    n = len(p)
    return float(np.einsum("ij,ic,jc->", k, r, r)) / (n * (n - 1))


def _quadratic(y, p, nu, w=None):
    """The O(N^2) blocked path of the package on the two-class form (the reference)."""
    pp, r, binary = _kk._inputs(np.asarray(y, _dtype()), np.asarray(p, _dtype()))
    assert binary
    return float(_kk._error_kernel(pp, r, w, nu, estimator="unbiased", binary=False))


def _fast(y, p, nu, w=None):
    pp, r, _ = _kk._inputs(np.asarray(y, _dtype()), np.asarray(p, _dtype()))
    return float(_kk._error_kernel(pp, r, w, nu, estimator="unbiased", binary=True))


@given(
    st.integers(2, 200),
    st.integers(0, 2**31 - 1),
    st.sampled_from([None, 0.05, 0.4, 3.0]),
    st.sampled_from([0, 3, 20]),
)
def test_binary_unbiased_is_the_pair_sum_hypothesis(n, seed, bandwidth, levels):
    # random inputs; levels > 0 rounds p to a grid (many ties, factor exactly 1)
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    if levels:
        p = np.round(p * levels) / levels
    y = (rng.random(n) < p).astype(np.float64)
    p = p.astype(_dtype())
    got = float(clf.kernel_calibration_error(y, p, bandwidth=bandwidth))
    nu = bandwidth
    if nu is None:  # the median heuristic, unchanged (the linear test reports it)
        nu = float(clf.kernel_calibration_test(y, p, estimator="unbiased", key=0,
                                               num_samples=1).bandwidth)
    ref = _numpy_uq(y, p, nu)
    assert abs(got - ref) <= _tol(y, p), (got, ref, _tol(y, p))


@pytest.mark.parametrize("n", [2, 3, 700, 3000])
@pytest.mark.parametrize("kind", ["random", "ties", "constant", "extremes"])
def test_binary_unbiased_equals_the_blocked_quadratic_path(n, kind):
    rng = np.random.default_rng(n)
    p = {
        "random": rng.random(n),
        "ties": np.round(rng.random(n) * 7) / 7,
        "constant": np.full(n, 0.3),
        "extremes": rng.choice([0.0, 1.0, 0.5], n),
    }[kind]
    y = (rng.random(n) < p).astype(np.float64)
    p = p.astype(_dtype())
    for nu in (0.01, 0.3, None):
        nu_ = nu
        if nu is None:
            pp, _, _ = _kk._inputs(y, p)
            nu_ = float(_kk._bandwidth(pp, jnp.ones(n, pp.dtype), None))
        ref = _quadratic(y, p, nu_)
        assert abs(_fast(y, p, nu_) - ref) <= _tol(y, p), (kind, nu)
        got = float(clf.kernel_calibration_error(y, p, bandwidth=nu))
        assert abs(got - ref) <= _tol(y, p), (kind, nu)


def test_binary_padding_adds_nothing():
    # weight-0 rows anywhere in the sort (here: values inside the data, repeated and
    # extreme) leave the sum of the real rows unchanged
    rng = np.random.default_rng(5)
    n, pad = 90, 38
    p = rng.random(n + pad).astype(_dtype())
    p[n:n + 5] = p[3]
    p[n + 5] = 0.0
    y = (rng.random(n + pad) < p).astype(np.float64)
    w = np.r_[np.ones(n), np.zeros(pad)].astype(_dtype())
    padded = _fast(y, p, 0.2, jnp.asarray(w))
    assert abs(padded - _fast(y[:n], p[:n], 0.2)) <= _tol(y[:n], p[:n])
    assert abs(padded - _numpy_uq(y[:n], p[:n], 0.2)) <= _tol(y[:n], p[:n])


@pytest.mark.parametrize("n", [37, 300, 1000])
def test_binary_eager_buckets_equal_jit_and_the_reference(n):
    # eager calls pad to a bucket (256, 320, 1024); jit runs the unpadded arrays
    y, p = _binary(n, 40 + n, shrink=0.8)
    yj, pj = jnp.asarray(y), jnp.asarray(p)
    eager = float(clf.kernel_calibration_error(y, p))
    traced = float(jax.jit(clf.kernel_calibration_error)(yj, pj))
    nu = float(clf.kernel_calibration_test(y, p).bandwidth)
    ref = _quadratic(y, p, nu)
    for got in (eager, traced):
        assert abs(got - ref) <= _tol(y, p)


def test_binary_vmap_of_the_fast_path_equals_a_loop_and_the_reference():
    ys, ps = zip(*[_binary(64, 70 + s, shrink=0.6) for s in range(4)], strict=True)
    ys, ps = np.stack(ys), np.stack(ps)
    batched = np.asarray(jax.vmap(clf.kernel_calibration_error)(jnp.asarray(ys), jnp.asarray(ps)))
    for a, b, got in zip(ys, ps, batched, strict=True):
        loop = float(clf.kernel_calibration_error(a, b))
        nu = float(clf.kernel_calibration_test(a, b).bandwidth)
        assert abs(got - loop) <= _tol(a, b)
        assert abs(got - _quadratic(a, b, nu)) <= _tol(a, b)


@pytest.mark.parametrize("n,num", [(2, 3), (57, 30), (600, 45)])
def test_binary_consistency_resamples_equal_the_blocked_quadratic_path(n, num):
    # the same draws (key, index) summed both ways: sorted O(N log N) and O(N^2) blocks
    rng = np.random.default_rng(n)
    p = np.round(rng.random(n) * 9) / 9 if n > 2 else rng.random(n)
    y = (rng.random(n) < p).astype(np.float64)
    pp, rr, _ = _kk._inputs(y, p.astype(_dtype()))
    key = jax.random.key(n)
    for pad in (0, 11):
        ppad = jnp.concatenate([pp, jnp.repeat(pp[-1:], pad, axis=0)])
        rpad = jnp.concatenate([rr, jnp.repeat(rr[-1:], pad, axis=0)])
        w = jnp.r_[jnp.ones(n), jnp.zeros(pad)].astype(pp.dtype)
        # the data's estimate first, then the resamples'
        fast = _kk._consistency_samples(key, ppad, rpad, w, 0.25, num, True)
        slow = _kk._consistency_samples(key, ppad, rpad, w, 0.25, num, False)
        assert fast.shape == slow.shape == (num + 1,)
        # a resample's residuals are each at most 1: M <= 2
        np.testing.assert_allclose(np.asarray(fast), np.asarray(slow), rtol=0,
                                   atol=8 * (n + 8) * EPS)


def test_binary_unbiased_test_p_values_jit_and_vmap_equal_eager():
    ys, ps = zip(*[_binary(80, 90 + s, shrink=0.7) for s in range(3)], strict=True)
    ys, ps = np.stack(ys), np.stack(ps)
    keys = jax.random.split(jax.random.key(4), 3)

    def fn(a, b, k):
        return clf.kernel_calibration_test(a, b, estimator="unbiased", key=k, num_samples=60)

    batched = jax.vmap(fn)(jnp.asarray(ys), jnp.asarray(ps), keys)
    for i in range(3):
        eager = fn(ys[i], ps[i], keys[i])
        jitted = jax.jit(fn)(jnp.asarray(ys[i]), jnp.asarray(ps[i]), keys[i])
        for got in (jitted, jax.tree_util.tree_map(lambda x, i=i: x[i], batched)):
            assert float(got.p_value) == float(eager.p_value)
            assert abs(float(got.statistic) - float(eager.statistic)) <= _tol(ys[i], ps[i])
            np.testing.assert_allclose(float(got.bandwidth), float(eager.bandwidth), rtol=1e-6)


# ----------------------------------------------------------------- bad input
def test_bad_input_names_the_argument():
    y, p = _binary(50, 9)
    fn = clf.kernel_calibration_error
    with pytest.raises(ValueError, match="y_true"):
        fn(np.where(np.arange(50) == 3, 2.0, y), p)
    with pytest.raises(ValueError, match="y_prob"):
        fn(y, np.where(np.arange(50) == 3, 1.5, p))
    with pytest.raises(ValueError, match="y_prob"):
        fn(y, p[:-1])
    with pytest.raises(ValueError, match="y_prob"):
        fn(y[:1], p[:1])
    with pytest.raises(ValueError, match="y_prob"):
        fn(y, np.ones((50, 1)))
    yc, pc = _multiclass(30, 3, 1)
    with pytest.raises(ValueError, match="y_prob"):
        fn(yc, pc * 1.5)  # rows do not sum to 1
    with pytest.raises(ValueError, match="y_true"):
        fn(np.where(np.arange(30) == 0, 3, yc), pc)
    with pytest.raises(ValueError, match="estimator"):
        fn(y, p, estimator="quadratic")
    with pytest.raises(ValueError, match="bandwidth"):
        fn(y, p, bandwidth=0.0)
    with pytest.raises(TypeError, match="bandwidth"):
        fn(y, p, bandwidth="median")
    with pytest.raises(TypeError, match="key"):
        clf.kernel_calibration_test(y, p, estimator="unbiased")
    with pytest.raises(ValueError, match="num_samples"):
        clf.kernel_calibration_test(y, p, estimator="unbiased", key=0, num_samples=0)
    with pytest.raises(ValueError, match="y_prob"):
        clf.kernel_calibration_test(y[:3], p[:3])
    # under jit the failed check makes the result NaN instead of a plausible number
    out = jax.jit(fn)(jnp.asarray(y), jnp.asarray(np.where(np.arange(50) == 3, 1.5, p)))
    assert np.isnan(float(out))


# ----------------------------------------------------------------- size and power
def _simulate(reps, n, seed, shrink=1.0):
    rng = np.random.default_rng(seed)
    q = 1 / (1 + np.exp(-rng.normal(-0.3, 1.2, (reps, n))))
    y = (rng.random((reps, n)) < q).astype(np.float64)
    p = 1 / (1 + np.exp(-np.log(q / (1 - q)) / shrink))
    return jnp.asarray(y, _dtype()), jnp.asarray(p, _dtype())


def _band(reps):  # three binomial standard errors of a 5% rate
    return 3 * math.sqrt(0.05 * 0.95 / reps)


def _linear_p(y, p):
    return clf.kernel_calibration_test(y, p).p_value


def _unbiased_p(y, p, k):
    return clf.kernel_calibration_test(y, p, estimator="unbiased", key=k, num_samples=99).p_value


def _rates(y, p, estimator, seed=0):
    if estimator == "linear":
        pv = optimized(jax.vmap(_linear_p))(y, p)
    else:
        keys = jax.random.split(jax.random.key(seed), y.shape[0])
        pv = optimized(jax.vmap(_unbiased_p))(y, p, keys)
    pv = np.asarray(pv)
    assert np.isfinite(pv).all()
    return float(np.mean(pv < 0.05))


@pytest.mark.parametrize("estimator,reps,n", [("linear", 1000, 400), ("unbiased", 400, 150)])
def test_size_at_the_nominal_level(estimator, reps, n):
    y, p = _simulate(reps, n, 31)
    rate = _rates(y, p, estimator)
    assert abs(rate - 0.05) < _band(reps), rate


def test_power_of_the_unbiased_test_on_overconfident_predictions():
    y, p = _simulate(100, 200, 32, shrink=0.5)  # logits doubled
    assert _rates(y, p, "unbiased") > 0.8


def test_power_of_the_linear_test_on_squared_probabilities():
    # the linear test spends half its pairs' information: it needs a larger N or a
    # larger miscalibration (on the doubled logits above it rejects ~13% at N = 1000)
    y, p = _simulate(100, 2000, 32)
    assert _rates(y, jnp.square(p), "linear") > 0.8


def _multiclass_sims(reps, n, c, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, (reps, n, c))
    q = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    u = rng.random((reps, n, 1))
    y = np.minimum((np.cumsum(q, -1) < u).sum(-1), c - 1)
    zt = scale * z
    p = np.exp(zt) / np.exp(zt).sum(-1, keepdims=True)
    return jnp.asarray(y), jnp.asarray(p, _dtype())


@pytest.mark.parametrize("estimator,reps,n", [("linear", 300, 300), ("unbiased", 300, 120)])
def test_multiclass_size_at_the_nominal_level(estimator, reps, n):
    y, p = _multiclass_sims(reps, n, 4, 33)
    rate = _rates(y, p, estimator, seed=1)
    assert abs(rate - 0.05) < _band(reps), rate


def test_multiclass_power_of_the_unbiased_test_on_overconfident_predictions():
    y, p = _multiclass_sims(100, 200, 4, 34, scale=2.0)  # logits doubled
    assert _rates(y, p, "unbiased", seed=2) > 0.8


# ----------------------------------------------------------------- bootstrap test
def _h_matrix(y, p, nu):
    """h_ij of the reference (all pairs, the diagonal included), float64."""
    p = np.asarray(p, np.float64)
    if p.ndim == 1:
        p = np.stack([1 - p, p], axis=1)
    r = np.eye(p.shape[1])[np.asarray(y).astype(int)] - p
    d = np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))
    return np.exp(-d / nu) * (r @ r.T)


def _bootstrap_reference(H, counts, num_samples):
    """CalibrationTests.jl's AsymptoticSKCETest (src/skce/asymptotic.jl, v0.6): the
    statistic n/(n-1) SKCE_uq - SKCE_b; per resample of indices I, the mean of h over
    its pairs a < b less twice the mean of h(x_Ia, x_k) over all a, k; p-value
    (1 + #{T_b >= statistic}) / (1 + B) (bayescal's rank convention)."""
    n = H.shape[0]
    uq = (H.sum() - np.trace(H)) / (n * (n - 1))
    stat = n / (n - 1) * uq - H.sum() / n**2
    straps = []
    for b in range(num_samples):
        idx = np.repeat(np.arange(n), counts[:, b].astype(int))
        sub = H[np.ix_(idx, idx)]
        straps.append((sub.sum() - np.trace(sub)) / (n * (n - 1)) - 2 * H[idx].mean())
    return uq, (1 + np.sum(np.array(straps) >= stat)) / (1 + num_samples), np.array(straps), stat


def _kernel_counts(key, n, num_samples):
    from bayescal._src import kernel_calibration as kc

    return np.asarray(kc.bootstrap_counts_of_passes(key, jnp.ones(n, _dtype()), num_samples))


@pytest.mark.parametrize("kind,n,num", [("binary", 30, 40), ("multiclass", 25, 30), ("multiclass", 9, 600)])
def test_bootstrap_equals_calibration_tests_jl_loops(kind, n, num):
    """The kernel's matrix products on resample counts against the reference's loops
    over the resampled indices (the same draws): the statistics to float tolerance,
    and the p-value where no bootstrap statistic ties the statistic to that tolerance."""
    from bayescal._src import kernel_calibration as kc

    y, p = _binary(n, 50, shrink=0.7) if kind == "binary" else _multiclass(n, 4, 51, temperature=0.7)
    nu = 0.4
    key = jax.random.key(11)
    H = _h_matrix(y, p, nu)
    uq, pv, straps, stat = _bootstrap_reference(H, _kernel_counts(key, n, num), num)
    t = jax.jit(
        lambda yy, pp, k: clf.kernel_calibration_test(
            yy, pp, estimator="unbiased", key=k, num_samples=num, bandwidth=nu, method="bootstrap"
        )
    )(jnp.asarray(y), jnp.asarray(p), key)
    scale = np.abs(H).mean()
    np.testing.assert_allclose(float(t.statistic), uq, rtol=1e-4, atol=TOL * scale)
    close = np.abs(straps - stat) <= 1e-4 * np.abs(stat) + TOL * scale
    if not close.any():
        assert float(t.p_value) == pytest.approx(pv, rel=1e-6)
    # the statistics themselves, through the shared helper
    pp = np.stack([1 - p, p], axis=1) if p.ndim == 1 else p
    r = np.eye(pp.shape[1])[np.asarray(y).astype(int)] - pp
    ppj, rj = jnp.asarray(pp, _dtype()), jnp.asarray(r, _dtype())
    got = kc.bootstrap_statistics(
        _kk._h_tile(jnp.asarray(nu, _dtype())), (ppj, rj), jnp.sum(rj * rj, axis=1),
        jnp.ones(n, _dtype()), key, num,
    )
    np.testing.assert_allclose(float(got[1]), stat, rtol=1e-4, atol=TOL * scale)
    np.testing.assert_allclose(np.asarray(got[2]), straps, rtol=1e-4, atol=TOL * scale)


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("method", ["bootstrap", "consistency"])
def test_host_unbiased_test_equals_the_kernel(kind, method):
    """Concrete CPU inputs: the host's median heuristic and bootstrap counts, the
    kernel's pair sums; the same result as the kernel path (host.disabled())."""
    from tests.test_host_path import assert_same, assert_same_rank, both

    for n in (2, 300, 3000):
        y, p = _binary(n, n) if kind == "binary" else _multiclass(n, 5, n)
        got, want, answered = both(
            lambda y=y, p=p: clf.kernel_calibration_test(
                y, p, estimator="unbiased", key=4, num_samples=19, method=method
            )
        )
        assert answered == [True]
        assert_same(got, want)
        assert_same_rank(got[0].p_value, want[0].p_value, 19)


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("bandwidth", [None, 0.4])
def test_host_unbiased_error_equals_the_kernel(kind, bandwidth):
    """The host's median heuristic (and, multiclass, residuals and padding to the
    bucket: ``kernel_calibration.host_program``), the same estimate as the kernel."""
    from tests.test_host_path import assert_same, both

    for n in (2, 300, 3000):
        y, p = _binary(n, n) if kind == "binary" else _multiclass(n, 5, n)
        got, want, answered = both(
            lambda y=y, p=p: clf.kernel_calibration_error(y, p, bandwidth=bandwidth)
        )
        assert answered == [True]
        assert_same(got, want)


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
@pytest.mark.parametrize("n", [4, 5, 300, 5000])
@pytest.mark.parametrize("bandwidth", [None, 0.4])
def test_host_linear_equals_the_kernel(kind, n, bandwidth):
    """The linear estimator and test on the host (float64 terms of the kernel's
    formula, the median heuristic in the inputs' dtype), as the kernel computes them."""
    from tests.test_host_path import assert_same, assert_same_test, both

    y, p = _binary(n, n) if kind == "binary" else _multiclass(n, 3, n)
    got, want, answered = both(lambda: clf.kernel_calibration_test(y, p, bandwidth=bandwidth))
    assert answered == [True]
    assert_same_test(got, want)
    got, want, answered = both(
        lambda: clf.kernel_calibration_error(y, p, estimator="linear", bandwidth=bandwidth)
    )
    assert answered == [True]
    assert_same(got, want)


def test_host_linear_leaves_the_rest_to_the_kernel():
    from tests.test_host_path import both

    y, p = _multiclass(6, 3, 1)
    bad = [
        ((y[:3], p[:3]), {}),  # fewer than two pairs
        ((y, p * 1.5), {}),  # outside [0, 1]
        ((np.where(y == 0, 3, y), p), {}),  # a label out of range
        ((y[:5], p), {}),
        ((y, p), {"bandwidth": 0.0}),
        ((y, p), {"estimator": "quadratic"}),
        ((y, p), {"method": "wild"}),  # the linear test draws nothing, yet checks it
    ]
    for args, kwargs in bad:
        got, want, answered = both(
            lambda args=args, kwargs=kwargs: clf.kernel_calibration_test(*args, **kwargs)
        )
        assert want[1] is not None, "not a bad input"
        assert got[1] == want[1]
        assert not any(answered)


def test_host_bootstrap_of_several_passes_equals_the_kernel():
    """600 resamples: two passes of the host program, as the kernel's two passes."""
    from tests.test_host_path import assert_same, assert_same_rank, both

    y, p = _multiclass(300, 4, 9)
    got, want, answered = both(
        lambda: clf.kernel_calibration_test(
            y, p, estimator="unbiased", key=5, num_samples=600, method="bootstrap"
        )
    )
    assert answered == [True]
    assert_same(got, want)
    assert_same_rank(got[0].p_value, want[0].p_value, 600)


@pytest.mark.parametrize("method", ["bootstrap", "consistency"])
def test_host_paths_leave_bad_inputs_to_the_kernel(method):
    """Labels out of range and rows that do not sum to 1: the host twins decline and
    the kernel path raises its message (naming the argument)."""
    from tests.test_host_path import both

    y, p = _multiclass(300, 4, 2)
    bad_label = y.copy()
    bad_label[7] = 4
    bad_rows = p.copy()
    bad_rows[3] = [0.5, 0.5, 0.5, 0.5]
    for yy, pp, name in ((bad_label, p, "y_true"), (y, bad_rows, "y_prob")):
        calls = (
            lambda yy=yy, pp=pp: clf.kernel_calibration_error(yy, pp),
            lambda yy=yy, pp=pp: clf.kernel_calibration_test(
                yy, pp, estimator="unbiased", key=1, num_samples=19, method=method
            ),
        )
        for call in calls:
            got, want, answered = both(call)
            assert answered == [False]
            assert got == want
            assert got[1] is not None and got[1][0] is ValueError and name in got[1][1]


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_bootstrap_eager_bucket_jit_and_vmap_agree(kind):
    from bayescal._src.host import disabled

    make = (lambda s: _binary(100, s)) if kind == "binary" else (lambda s: _multiclass(100, 3, s))
    opts = {"estimator": "unbiased", "num_samples": 19, "method": "bootstrap"}
    key = jax.random.key(2)
    y, p = make(3)
    eager = clf.kernel_calibration_test(y, p, key=key, **opts)
    with disabled():
        kernel = clf.kernel_calibration_test(y, p, key=key, **opts)
    traced = jax.jit(lambda a, b, k: clf.kernel_calibration_test(a, b, key=k, **opts))(
        jnp.asarray(y), jnp.asarray(p), key
    )
    for a, b, c in zip(eager, traced, kernel, strict=True):
        np.testing.assert_allclose(float(a), float(b), rtol=1e-4, atol=10 * TOL)
        np.testing.assert_allclose(float(c), float(b), rtol=1e-4, atol=10 * TOL)
    rows = [make(s) for s in (4, 5, 6)]
    ys, ps = jnp.asarray(np.stack([r[0] for r in rows])), jnp.asarray(np.stack([r[1] for r in rows]))
    keys = jax.random.split(key, 3)
    batched = jax.vmap(lambda a, b, k: clf.kernel_calibration_test(a, b, key=k, **opts))(ys, ps, keys)
    for i, (yy, pp) in enumerate(rows):
        one = clf.kernel_calibration_test(yy, pp, key=keys[i], **opts)
        for a, b in zip(one, batched, strict=True):
            np.testing.assert_allclose(float(a), float(b[i]), rtol=1e-4, atol=10 * TOL)


def test_auto_method_and_bad_method():
    y, p = _multiclass(60, 4, 8)
    run = lambda **kw: clf.kernel_calibration_test(y, p, estimator="unbiased", key=1, num_samples=99, **kw)  # noqa: E731
    assert float(run().p_value) == float(run(method="consistency").p_value)
    assert 99 * 4 * 60**2 <= _kk.AUTO_BUDGET
    with pytest.raises(ValueError, match="method"):
        run(method="wild")
    with pytest.raises(ValueError, match="method"):
        clf.kernel_calibration_test(y, p, method="wild")


def _bootstrap_p(y, p, k):
    return clf.kernel_calibration_test(
        y, p, estimator="unbiased", key=k, num_samples=99, method="bootstrap"
    ).p_value


@pytest.mark.slow
def test_bootstrap_size_at_the_nominal_level():
    # binary (N = 150) and four classes (N = 120), 300 simulated calibrated data sets each
    for y, p, seed in (_simulate(300, 150, 31) + (0,), _multiclass_sims(300, 120, 4, 33) + (1,)):
        keys = jax.random.split(jax.random.key(seed), y.shape[0])
        rate = float(np.mean(np.asarray(jax.vmap(_bootstrap_p)(y, p, keys)) < 0.05))
        assert abs(rate - 0.05) < _band(300), rate


@pytest.mark.slow
def test_bootstrap_power_on_overconfident_predictions():
    # the bootstrap's null is the data's own, wider under the alternative: on four
    # classes it needs N = 400 where consistency resampling rejects > 80% at N = 200
    # (the bootstrap: ~71% there)
    for y, p, seed in (
        _simulate(100, 200, 32, shrink=0.5) + (0,),
        _multiclass_sims(100, 400, 4, 34, scale=2.0) + (2,),
    ):
        keys = jax.random.split(jax.random.key(seed), y.shape[0])
        assert float(np.mean(np.asarray(jax.vmap(_bootstrap_p)(y, p, keys)) < 0.05)) > 0.8


def test_quadratic_estimators_refuse_more_pairs_than_the_budget_before_starting():
    # issue 37: at N = 4.2 million the unbiased SKCE asked XLA for 69-252 GB or ran for
    # minutes without a word. Above MAX_PAIRS pairs the call is refused at once, with
    # the cost and the way out; the linear estimator still runs.
    import time

    from bayescal import classification as C
    from bayescal import regression as R
    from bayescal._src.kernel_calibration import MAX_PAIRS

    n = int((1 + (1 + 8 * MAX_PAIRS) ** 0.5) / 2) + 1  # the first N over the budget
    assert n * (n - 1) // 2 > MAX_PAIRS >= (n - 1) * (n - 2) // 2
    rng = np.random.default_rng(0)
    y, loc = rng.normal(size=n), np.zeros(n)
    p = np.full((n, 3), 1 / 3)
    labels = rng.integers(0, 3, size=n)
    calls = [
        (lambda: R.kernel_calibration_error(y, loc, 1.0), "y_true"),
        (lambda: R.kernel_calibration_test(y, loc, 1.0, estimator="unbiased", key=0), "y_true"),
        (lambda: C.kernel_calibration_error(labels, p), "y_prob"),
        (lambda: C.kernel_calibration_test(labels, p, estimator="unbiased", key=0), "y_prob"),
    ]
    for call, name in calls:
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match=rf"^{name} holds {n:,} observations: .* "
                           r"estimator='linear' .* random subsample of at most"):
            call()
        assert time.perf_counter() - t0 < 5  # refused before any pair is summed
    assert np.isfinite(float(R.kernel_calibration_error(y, loc, 1.0, estimator="linear")))


def test_the_linear_test_is_answered_on_the_host_up_to_its_limit():
    """Binary labels beyond HOST_MAX (here 40,000) no longer send the linear test to
    the kernel after its median was taken on the host: the twin answers, equal to the
    kernel; beyond ``_LINEAR_MAX`` (where the kernel is faster) the kernel answers."""
    from bayescal._src.host import HOST_MAX
    from bayescal.classification._kernel import _LINEAR_MAX
    from tests.test_host_path import assert_same, both

    for n, on_host in ((40_000, True), (_LINEAR_MAX + 2, False)):
        assert (n > HOST_MAX) and (n <= _LINEAR_MAX) == on_host
        y, p = _binary(n, 7)
        got, want, answered = both(lambda y=y, p=p: clf.kernel_calibration_test(y, p))
        assert answered == [on_host]
        assert_same(got, want)
