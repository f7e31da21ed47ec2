"""Quantile bin edges equal ``np.quantile`` bit for bit (issue 20, the edge defect).

Reference throughout: numpy 2.4 ``np.quantile(x, q)`` with its default method
``"linear"`` (``numpy/lib/_function_base_impl.py``: ``_quantile``, ``_get_indexes``,
``_get_gamma``, ``_lerp``) and ``q = (np.arange(K + 1) / K).astype(x.dtype)``; bins
``[e_k, e_{k+1})`` (the last closed) are ``np.searchsorted(edges, x, side="right") -
1`` clipped to ``[0, K - 1]``. XLA contracts a multiply and an add into one FMA on CPU
(one rounding instead of numpy's two): before the fix one interpolated float32 edge
in ten differed by an ulp on the device path, and values sitting on an edge changed
bins.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayescal._src.binned import device_sorted_quantile_edges, quantile_edges
from bayescal._src.binning import bin_index
from bayescal.classification import fit_histogram_binning, reliability_curve
from tests.conftest import X64

DTYPES = [np.float32, np.float64] if X64 else [np.float32]
PAD = 64  # the padded length of the jitted checks (one program per K)


def numpy_edges(x: np.ndarray, k: int) -> np.ndarray:
    """np.quantile's edges (made nondecreasing, as documented; numpy's own decrease
    only when two levels share a gap and b - a rounds)."""
    q = (np.arange(k + 1) / k).astype(x.dtype)
    return np.maximum.accumulate(np.quantile(x, q))


def numpy_bins(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    k = edges.size - 1
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, k - 1)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _jitted(k):
    @jax.jit
    def run(sorted_pad, shuffled, mask, n):
        return (
            device_sorted_quantile_edges(sorted_pad, n, k),
            quantile_edges(shuffled, k, mask),
        )

    return run


_JITTED: dict = {}


def _check_all(x: np.ndarray, k: int, rng: np.random.Generator):
    dt = x.dtype
    ref = numpy_edges(x, k)
    n = x.size
    xs = np.sort(x)
    junk = rng.uniform(-5, 5, size=PAD - n).astype(dt)  # padding: never in the edges
    sorted_pad = np.concatenate([xs, np.full(PAD - n, np.nan, dt)])
    perm = rng.permutation(PAD)
    shuffled = np.concatenate([x, junk])[perm]
    mask = (np.arange(PAD) < n)[perm]
    key = (k, np.dtype(dt).name)
    if key not in _JITTED:
        _JITTED[key] = _jitted(k)
    got = {
        "public eager": quantile_edges(jnp.asarray(x), k),
        "public jit": jax.jit(quantile_edges, static_argnums=1)(jnp.asarray(x), k),
        "device static eager": device_sorted_quantile_edges(jnp.asarray(xs), n, k),
        "device static jit": jax.jit(device_sorted_quantile_edges, static_argnums=(1, 2))(
            jnp.asarray(xs), n, k
        ),
    }
    traced, masked = _JITTED[key](sorted_pad, shuffled, mask, np.int32(n))
    got["device traced jit"] = traced
    got["public masked jit"] = masked
    for name, edges in got.items():
        assert same_bits(edges, ref), (name, np.asarray(edges), ref)
    # the values on the edges (and the data) land in numpy's bins
    probe = np.concatenate([ref, x])
    want = numpy_bins(probe, ref)
    idx = jax.jit(bin_index)(jnp.asarray(probe), jnp.asarray(ref))
    np.testing.assert_array_equal(np.asarray(idx), want)


values = st.one_of(
    # ties and integer-valued probabilities k/10 (a random forest's votes)
    st.lists(st.integers(0, 10), min_size=1, max_size=PAD).map(
        lambda v: np.asarray(v) / 10
    ),
    st.lists(st.integers(0, 3), min_size=1, max_size=PAD).map(lambda v: np.asarray(v) / 3),
    st.lists(
        st.floats(0, 1, allow_subnormal=False, width=32), min_size=1, max_size=PAD
    ).map(np.asarray),
)


@given(values, st.sampled_from([1, 2, 3, 7, 10, 13, 50]), st.sampled_from(DTYPES))
def test_edges_equal_numpy_quantile_bit_for_bit(x, k, dtype):
    x = x.astype(dtype)
    _check_all(x, k, np.random.default_rng(x.size))


@pytest.mark.parametrize("dtype", DTYPES)
def test_edges_bit_for_bit_on_spread_values(dtype):
    # Random values spanning 1e-3..1e3 (the device path before the fix: 114 of 1500
    # float32 cases off by an ulp on CPU).
    rng = np.random.default_rng(0)
    for k in (3, 7, 10, 13):
        for _ in range(10):
            n = int(rng.integers(2, PAD + 1))
            scale = dtype(rng.choice([1e-3, 1.0, 1e3]))
            _check_all((rng.uniform(size=n) * scale).astype(dtype), k, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_edges_under_vmap_with_masks(dtype):
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(5, 40)).astype(dtype)
    mask = rng.uniform(size=(5, 40)) < 0.6
    mask[:, 0] = True
    got = np.asarray(jax.jit(jax.vmap(lambda v, m: quantile_edges(v, 10, m)))(x, mask))
    for i in range(5):
        assert same_bits(got[i], numpy_edges(x[i][mask[i]], 10))


def _digits_forest():
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    data, target = load_digits(return_X_y=True)
    y = (target == 3).astype(np.int64)  # one digit against the rest
    x_fit, x_rest, y_fit, y_rest = train_test_split(data, y, test_size=0.6, random_state=0)
    x_cal, x_test, y_cal, y_test = train_test_split(
        x_rest, y_rest, test_size=0.5, random_state=0
    )
    forest = RandomForestClassifier(n_estimators=10, random_state=0).fit(x_fit, y_fit)
    return y_cal, forest.predict_proba(x_cal)[:, 1], forest.predict_proba(x_test)[:, 1]


def _numpy_histogram_binning(y, p, k):
    """Histogram binning with np.quantile edges and np.searchsorted(side="right")
    (Zadrozny & Elkan 2001); an empty bin predicts its midpoint, as documented."""
    edges = numpy_edges(p, k)
    idx = numpy_bins(p, edges)
    mid = (edges[1:] + edges[:-1]) / 2
    values = np.array(
        [y[idx == j].mean() if np.any(idx == j) else mid[j] for j in range(k)]
    )
    return edges, values.astype(p.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [5, 10, 20])
def test_histogram_binning_on_a_random_forest_matches_numpy(dtype, k):
    # A 10-tree forest votes in steps of 1/10: most probabilities sit on an edge.
    y_cal, p_cal64, p_test64 = _digits_forest()  # float64, from scikit-learn
    p_cal, p_test = p_cal64.astype(dtype), p_test64.astype(dtype)
    edges, values = _numpy_histogram_binning(y_cal, p_cal, k)
    # the raw fraction of positives, as the reference (the default shrinks it: its
    # formula is tested against scipy in tests/test_classification_calibrators.py)
    cal = fit_histogram_binning(y_cal, p_cal, bins=k, strategy="quantile", shrinkage=None)
    assert same_bits(cal.edges, edges)
    np.testing.assert_allclose(
        np.asarray(cal.values), values, rtol=2e-7 if dtype == np.float32 else 1e-15
    )
    want = values[numpy_bins(p_test, edges)]
    for got in (cal(p_test), jax.jit(lambda c, p: c(p))(cal, p_test)):
        np.testing.assert_allclose(
            np.asarray(got), want, rtol=2e-7 if dtype == np.float32 else 1e-15
        )
    # The float64 reference on the forest's own float64 probabilities (the issue's
    # comparison: up to 0.75 apart before the fix): the same bins, the same values.
    e64, v64 = _numpy_histogram_binning(y_cal, p_cal64, k)
    np.testing.assert_allclose(
        np.asarray(cal(p_test)), v64[numpy_bins(p_test64, e64)], rtol=1e-6, atol=0
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_reliability_curve_quantile_bins_on_ties(dtype):
    # Values k/10 with many ties: the curve's bins are numpy's, eager and under jit.
    rng = np.random.default_rng(3)
    p = (rng.integers(0, 11, size=300) / 10).astype(dtype)
    y = (rng.uniform(size=300) < p).astype(np.int64)
    edges = numpy_edges(p, 10)
    idx = numpy_bins(p, edges)
    count = np.bincount(idx, minlength=10)
    for curve in (
        reliability_curve(y, p, bins=10, strategy="quantile"),
        jax.jit(lambda a, b: reliability_curve(a, b, bins=10, strategy="quantile"))(y, p),
    ):
        assert same_bits(curve.edges, edges)
        np.testing.assert_array_equal(np.asarray(curve.weight), count)
        for j in np.nonzero(count)[0]:
            np.testing.assert_allclose(
                float(curve.observed[j]), y[idx == j].mean(), rtol=1e-6
            )
