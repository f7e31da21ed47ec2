"""Streaming accumulators against the one-shot curves (exact counts), merge laws, jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayescal._src.accumulate import exact_count
from bayescal.classification import reliability_accumulator, reliability_curve
from bayescal.core import curve_error
from bayescal.regression import (
    calibration_accumulator,
    calibration_curve,
    calibration_error,
)
from tests.conftest import compilations_during


def _float():
    return jnp.zeros((), dtype=float).dtype


def _chunks(x, cuts):
    cuts = sorted(set(c for c in cuts if 0 < c < len(x)))
    return np.split(x, cuts)


def assert_same_counts_over_n(got, ref, n):
    """``got`` and ``ref`` are ``count / n`` with identical integer counts.

    The counts are exact; the float division may differ by 1 ulp between the two paths:
    the one-shot kernel divides by the constant ``n`` inside ``jit``, which XLA CPU of
    jax 0.4 (the ``make test-min`` tier) turns into a multiplication by ``1 / n``, while
    ``finalize`` divides by the traced total.
    """
    got, ref = np.asarray(got), np.asarray(ref)
    np.testing.assert_array_equal(np.rint(got * n), np.rint(ref * n))
    np.testing.assert_array_max_ulp(got, ref, maxulp=1)


@settings(max_examples=10)
@given(st.lists(st.integers(1, 499), max_size=4), st.sampled_from(["quantile", "interval"]))
def test_calibration_accumulator_equals_one_shot(cuts, kind):
    u = np.random.default_rng(len(cuts)).uniform(size=500).astype(_float())
    acc = calibration_accumulator(num_levels=20, kind=kind)
    state = acc.init()
    for chunk in _chunks(u, cuts):
        state = acc.update(state, chunk)
    got, ref = acc.finalize(state), calibration_curve(u, num_levels=20, kind=kind)
    assert_same_counts_over_n(got.observed, ref.observed, u.size)
    np.testing.assert_array_equal(np.asarray(got.expected), np.asarray(ref.expected))
    # atol: the 1-ulp differences of the curve values (~6e-8 near 1) carry over
    np.testing.assert_allclose(
        float(curve_error(got)), float(calibration_error(u, num_levels=20, kind=kind)),
        rtol=1e-6, atol=1e-7,
    )


def test_calibration_accumulator_merge_and_jit(rng):
    u = rng.uniform(size=300).astype(_float())
    acc = calibration_accumulator(num_levels=11)
    a = acc.update(acc.init(), u[:120])
    b = acc.update(acc.init(), u[120:])
    both = acc.update(acc.update(acc.init(), u[:120]), u[120:])
    merged = acc.merge(a, b)
    for x, y in zip(jax.tree_util.tree_leaves(merged), jax.tree_util.tree_leaves(both), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    jitted = jax.jit(acc.update)(acc.init(), jnp.asarray(u))
    np.testing.assert_array_equal(exact_count(jitted.count), exact_count(both.count))
    # merge is commutative and init is its identity
    np.testing.assert_array_equal(exact_count(acc.merge(b, a).count), exact_count(merged.count))
    np.testing.assert_array_equal(exact_count(acc.merge(acc.init(), a).count), exact_count(a.count))


def test_calibration_accumulator_invalid_gives_nan():
    acc = calibration_accumulator(num_levels=5)
    state = acc.update(acc.init(), jnp.array([0.2, 1.5, 0.4]))
    assert np.isnan(np.asarray(acc.finalize(state).observed)).all()
    assert np.isnan(np.asarray(acc.finalize(acc.init()).observed)).all()  # no data


def test_calibration_accumulator_bad_options():
    with pytest.raises(ValueError, match="kind"):
        calibration_accumulator(kind="two-sided")
    with pytest.raises((ValueError, TypeError), match="num_levels"):
        calibration_accumulator(num_levels=1)
    acc = calibration_accumulator()
    with pytest.raises(ValueError, match="pit must be 1-D"):
        acc.update(acc.init(), np.zeros((2, 2)))


@settings(max_examples=10)
@given(st.lists(st.integers(1, 599), max_size=4))
def test_reliability_accumulator_equals_one_shot(cuts):
    rng = np.random.default_rng(len(cuts))
    p = rng.uniform(size=600).astype(_float())
    p[:30] = np.arange(30) % 16 / 15  # values exactly on the edges
    y = (rng.uniform(size=600) < p).astype(_float())
    acc = reliability_accumulator(bins=15)
    state = acc.init()
    for cy, cp in zip(_chunks(y, cuts), _chunks(p, cuts), strict=True):
        state = acc.update(state, cy, cp)
    got, ref = acc.finalize(state), reliability_curve(y, p, bins=15)
    np.testing.assert_array_equal(np.asarray(got.weight), np.asarray(ref.weight))
    np.testing.assert_allclose(np.asarray(got.expected), np.asarray(ref.expected), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got.observed), np.asarray(ref.observed), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(got.edges), np.asarray(ref.edges))
    np.testing.assert_allclose(float(curve_error(got)), float(curve_error(ref)), rtol=1e-5)


def test_reliability_accumulator_weighted_merge(rng):
    p = rng.uniform(size=400).astype(_float())
    y = (rng.uniform(size=400) < p).astype(_float())
    w = rng.exponential(size=400).astype(_float())
    acc = reliability_accumulator(bins=8, weighted=True)
    a = acc.update(acc.init(), y[:150], p[:150], w[:150])
    b = jax.jit(acc.update)(acc.init(), y[150:], p[150:], w[150:])
    got = acc.finalize(acc.merge(a, b))
    ref = reliability_curve(y, p, bins=8, weights=w)
    np.testing.assert_allclose(np.asarray(got.weight), np.asarray(ref.weight), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got.observed), np.asarray(ref.observed), rtol=1e-6)


def test_reliability_accumulator_errors_and_nan():
    with pytest.raises(TypeError, match="uniform bins"):
        reliability_accumulator(bins=np.linspace(0, 1, 5))
    acc = reliability_accumulator(bins=4)
    with pytest.raises(TypeError, match="weighted=True"):
        acc.update(acc.init(), [1.0], [0.5], [2.0])
    with pytest.raises(ValueError, match="y_true"):
        acc.update(acc.init(), [1.0, 0.0], [0.5])
    bad = acc.update(acc.init(), [1.0, 2.0], [0.5, 0.5])  # label 2
    assert np.isnan(np.asarray(acc.finalize(bad).observed)).all()


def test_accumulator_in_scan(rng):
    # A stream of equal chunks under lax.scan: the state is a pytree of arrays.
    u = rng.uniform(size=(5, 64)).astype(_float())
    acc = calibration_accumulator(num_levels=9)
    state, _ = jax.lax.scan(lambda s, c: (acc.update(s, c), None), acc.init(), jnp.asarray(u))
    ref = calibration_curve(u.ravel(), num_levels=9)
    assert_same_counts_over_n(acc.finalize(state).observed, ref.observed, u.size)


@pytest.mark.parametrize("source", ["numpy", "jax"])
def test_bucketing_compiles_few_times(rng, source):
    # 200 chunk lengths 1000..1199 fall in two buckets (1024, 1280): the
    # kernel compiles twice, and nothing else compiles per length (host inputs are
    # padded on the host). Warm up on one length of each bucket first; then no length
    # may compile anything.
    u = rng.uniform(size=1400).astype(_float())
    y = (rng.uniform(size=1400) < u).astype(_float())
    to_array = jax.device_put if source == "jax" else np.asarray  # no program per length
    chunks = {n: (to_array(y[:n]), to_array(u[:n])) for n in [*range(1000, 1200), 1400]}
    # options of their own per source: no program of the other run is reused
    k = 10 if source == "numpy" else 11
    curve = calibration_accumulator(num_levels=k)
    rel = reliability_accumulator(bins=k)
    states = {"curve": curve.init(), "rel": rel.init()}

    def feed(lengths):
        for n in lengths:
            yn, un = chunks[n]
            states["curve"] = curve.update(states["curve"], un)
            states["rel"] = rel.update(states["rel"], yn, un)

    feed([1000, 1100])
    assert compilations_during(lambda: feed(range(1001, 1200))) == 0
    # A new bucket: one program per accumulator, nothing else.
    assert compilations_during(lambda: feed([1400])) == 2
    seen = sum(range(1000, 1200)) + 1100 + 1400  # 1100 was fed twice
    assert int(exact_count(states["curve"].total)) == seen
    assert int(exact_count(states["rel"].count).sum()) == seen


# ------------------------------------------------ counts past 2^31 (issue item 7)
# int32 counts wrapped past 2^31 values: after 33 updates of 2^26 values `observed`
# was [0, 0, -0.532, -0.532, 1] and the reliability weight negative. Doubling a
# state by merging it with itself reaches 2^32 observations with no large array: the
# same public operation as merging the states of two hosts.
DOUBLINGS = 23  # 512 * 2^23 = 2^32 observations


def _doubled(acc, state, times=DOUBLINGS):
    for _ in range(times):
        state = acc.merge(state, state)
    return state


def test_calibration_counts_past_2_31_stay_exact():
    u = np.random.default_rng(0).uniform(size=512).astype(_float())
    acc = calibration_accumulator(num_levels=5)
    one = acc.update(acc.init(), u)
    big = _doubled(acc, one)
    ref = calibration_curve(u, num_levels=5)
    np.testing.assert_array_equal(exact_count(big.count), exact_count(one.count) << DOUBLINGS)
    assert int(exact_count(big.total)) == 512 << DOUBLINGS
    got = acc.finalize(big)
    np.testing.assert_allclose(np.asarray(got.observed), np.asarray(ref.observed), rtol=1e-6)
    assert (np.asarray(got.observed) >= 0).all()
    # an update and a jitted merge on top of 2^32 stay exact (the carries)
    more = jax.jit(acc.merge)(acc.update(big, u[:100]), acc.update(acc.init(), u[100:]))
    want = (exact_count(one.count) << DOUBLINGS) + exact_count(one.count)
    np.testing.assert_array_equal(exact_count(more.count), want)
    assert int(exact_count(more.total)) == (512 << DOUBLINGS) + 512


def test_reliability_counts_past_2_31_stay_exact():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=512).astype(_float())
    y = (rng.uniform(size=512) < p).astype(_float())
    acc = reliability_accumulator(bins=4)
    one = acc.update(acc.init(), y, p)
    got = acc.finalize(_doubled(acc, one, 26))  # ~128 * 2^26 = 2^33 per bin
    ref = reliability_curve(y, p, bins=4)
    np.testing.assert_allclose(
        np.asarray(got.weight, np.float64), np.asarray(ref.weight, np.float64) * 2.0**26,
        rtol=1e-7,
    )
    assert (np.asarray(got.weight) > 0).all()
    np.testing.assert_allclose(np.asarray(got.observed), np.asarray(ref.observed), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got.expected), np.asarray(ref.expected), rtol=1e-5)


def test_summed_leaves_of_many_states_stay_exact():
    # psum / process_allgather(...).sum(0) add the leaves of many states without merge
    u = np.random.default_rng(2).uniform(size=300).astype(_float())
    acc = calibration_accumulator(num_levels=7)
    big = _doubled(acc, acc.update(acc.init(), u), 20)
    stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x] * 1000), big)
    summed = jax.tree_util.tree_map(lambda x: x.sum(0), stacked)
    np.testing.assert_array_equal(exact_count(summed.count), exact_count(big.count) * 1000)
    np.testing.assert_array_equal(
        exact_count(acc.merge(summed, acc.init()).count), exact_count(big.count) * 1000
    )
    np.testing.assert_allclose(
        np.asarray(acc.finalize(summed).observed), np.asarray(acc.finalize(big).observed),
        rtol=1e-6,
    )


def test_invalid_counts_saturate_instead_of_wrapping():
    acc = calibration_accumulator(num_levels=3)
    bad = acc.update(acc.init(), np.array([2.0] * 4, _float()))
    bad = _doubled(acc, bad, 70)  # 4 * 2^70 invalid values: the count stops at the max
    assert int(bad.invalid) == np.iinfo(np.asarray(bad.invalid).dtype).max
    assert np.isnan(np.asarray(acc.finalize(bad).observed)).all()
