"""Every binning variant against the others on CPU, and accuracy of per-bin sums at large N.

The variants are forced through the private ``variant=`` argument (on CPU the default
is the scatter kernel; accelerators run the compare kernel). References: numpy
(``np.bincount`` for counts, float64 sums for per-bin sums) and exact arithmetic.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayescal._src import binning as b
from bayescal._src.binned import binned_means, uniform_edges
from bayescal._src.bucketing import bucket_size, pad_to_bucket
from bayescal.classification import expected_calibration_error, reliability_curve
from bayescal.regression import calibration_curve

VARIANTS = ("scatter", "compare")

# The library runs these kernels inside jit (every public function compiles its kernel
# whole); here too: one program per (length, options), shared by the tests, instead of
# one per primitive of an eager call.
_jit = functools.partial(jax.jit, static_argnums=1)
count_at_or_below = _jit(b.count_at_or_below, static_argnames="variant")
_blocks_kernel = jax.jit(b._at_or_below_blocks, static_argnums=1)
bin_counts = _jit(b.bin_counts, static_argnames="variant")
bin_sums = _jit(b.bin_sums, static_argnames=("variant", "bounded"))
compensated_bin_sums = _jit(b.compensated_bin_sums, static_argnames="variant")
_binned_means = _jit(binned_means, static_argnames=("variant", "bounded"))
bin_index = jax.jit(b.bin_index)


def _float():
    return jnp.zeros((), dtype=float).dtype


# A few fixed lengths (each compiles once per variant; any length is as good a test
# of the kernels as another, and hypothesis still chooses the values).
SIZES = (1, 3, 64, 700)


def _lists(elements):
    return st.sampled_from(SIZES).flatmap(
        lambda n: st.lists(elements, min_size=n, max_size=n)
    )


# Values drawn partly exactly on the grid (edges / levels) and partly anywhere.
def _unit_values(num):
    on_grid = st.integers(0, num).map(lambda k: k / num)
    # no float32 subnormals: XLA on CPU flushes them to zero (see the conventions)
    anywhere = st.floats(0, 1, allow_subnormal=False, width=32)
    return _lists(st.one_of(on_grid, anywhere))


@settings(max_examples=12)
@given(_lists(st.integers(-2, 17)))
def test_counts_variants_equal_bincount(idx):
    idx = np.array(idx, np.int32)
    ref = np.bincount(idx[(idx >= 0) & (idx < 15)], minlength=15)  # numpy reference
    for variant in VARIANTS:
        got = bin_counts(jnp.asarray(idx), 15, variant=variant)
        np.testing.assert_array_equal(np.asarray(got), ref)


@settings(max_examples=12)
@given(_unit_values(99), st.sampled_from([2, 7, 100]))
def test_count_at_or_below_variants_identical(u, m):
    u = jnp.asarray(np.array(u), _float())
    levels = np.asarray(jnp.linspace(0.0, 1.0, m, dtype=u.dtype))
    ref = (np.asarray(u)[:, None] <= levels).sum(0)  # direct comparison (numpy)
    for variant in VARIANTS:
        got = count_at_or_below(u, m, variant=variant)
        np.testing.assert_array_equal(np.asarray(got), ref)
    # the CUDA kernel (a private histogram per block), run here on CPU
    np.testing.assert_array_equal(np.asarray(_blocks_kernel(u, m)), ref)


@settings(max_examples=12)
@given(_unit_values(15))
def test_reliability_bins_variants_identical(p):
    p = jnp.asarray(np.array(p), _float())
    y = (p > 0.5).astype(p.dtype)
    idx = bin_index(p, uniform_edges(15, p.dtype))
    out = [_binned_means(idx, 15, (p, y), variant=v) for v in VARIANTS]
    np.testing.assert_array_equal(np.asarray(out[0][0]), np.asarray(out[1][0]))
    for a, c in zip(out[0][1], out[1][1], strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-6, atol=1e-7)
    # per-bin means against float64 numpy
    pn, yn, i = np.asarray(p, np.float64), np.asarray(y, np.float64), np.asarray(idx)
    for k in range(15):
        if (i == k).any():
            np.testing.assert_allclose(float(out[0][1][0][k]), pn[i == k].mean(), rtol=1e-6, atol=1e-30)
            np.testing.assert_allclose(float(out[0][1][1][k]), yn[i == k].mean(), rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("variant", VARIANTS)
def test_compensated_sums_match_float64(variant, rng):
    n = 50_001
    idx = rng.integers(-1, 16, size=n).astype(np.int32)
    v = rng.uniform(size=n).astype(_float())
    w = rng.exponential(size=n).astype(_float()) * 1e3
    (s, c), (sw, cw) = compensated_bin_sums(
        jnp.asarray(idx), 15, (jnp.asarray(v), jnp.asarray(w)), variant=variant
    )
    for k in range(15):
        sel = idx == k
        # float64 numpy reference; the result is within a few ulps of it.
        np.testing.assert_allclose(float(s[k] + c[k]), v[sel].astype(np.float64).sum(), rtol=3e-7)
        np.testing.assert_allclose(float(sw[k] + cw[k]), w[sel].astype(np.float64).sum(), rtol=3e-7)


def test_compensated_sum_exact_on_ones():
    # 2^25 + 1 ones: plain float32 accumulation stalls at 2^24; the pair is exact.
    x = jnp.ones((2**12 + 1, 1), jnp.float32) * 2**13
    s, c = jax.jit(b.compensated_sum)(x)
    assert float(s[0]) + float(c[0]) == (2**12 + 1) * 2**13


def test_compensated_sum_is_accurate_in_any_order_and_differentiable():
    # Reference: math.fsum (exact) of terms spanning 2^40 in magnitude, both signs;
    # the pair (s, c) is within an ulp of the exact sum however XLA orders the reduction.
    import math

    r = np.random.default_rng(3)
    x = (r.normal(size=(3000, 2)) * 2.0 ** r.integers(-20, 20, size=(3000, 2))).astype(
        np.float32
    )
    s, c = jax.jit(b.compensated_sum)(jnp.asarray(x))
    for k in range(2):
        exact = math.fsum(x[:, k].astype(np.float64))
        assert abs(float(s[k]) + float(c[k]) - exact) <= np.spacing(np.float32(abs(exact)))
    # vmap over a leading axis equals the loop; the derivative is that of a plain sum
    xs = jnp.asarray(x.T.reshape(2, 3000, 1))
    vm = jax.vmap(b.compensated_sum)(xs)
    for k in range(2):
        one = b.compensated_sum(xs[k])
        assert float(vm[0][k, 0]) == float(one[0][0]) and float(vm[1][k, 0]) == float(one[1][0])
    g = jax.grad(lambda t: jnp.sum(sum(b.compensated_sum(t * jnp.asarray(x)))))(1.0)
    np.testing.assert_allclose(float(g), x.astype(np.float64).sum(), rtol=1e-5)


def test_ece_past_2_pow_24_observations():
    # Facts in DESIGN.md: float32 per-bin sums stopped growing past 2^24 terms and the
    # ECE of 2e7 predictions at 0.95 that all came true returned 0.0. Exact: 0.05.
    n = 17_000_000  # > 2^24 = 16_777_216
    p = jnp.full((n,), 0.95, jnp.float32)
    y = jnp.ones((n,), jnp.float32)
    ece = float(expected_calibration_error(y, p))
    assert abs(ece - (1 - float(np.float32(0.95)))) < 1e-6


def test_per_bin_sums_ulp_accurate_large_n():
    # One bin, 2^22 values of a float32 p (a plain float32 running sum is off by ~1e-4
    # there): the mean must be p to ~1 ulp (the
    # float32 rounding of the exact mean), in both variants.
    n = 2**22
    p = jnp.full((n,), np.float32(0.3), jnp.float32)
    idx = jnp.zeros((n,), jnp.int32)
    for variant in VARIANTS:
        count, (s,) = bin_sums(idx, 1, (p,), variant=variant, bounded=True)
        assert int(count[0]) == n
        np.testing.assert_allclose(float(s[0]) / n, float(np.float32(0.3)), rtol=1e-7)


def test_variants_under_jit_and_vmap():
    u = jax.random.uniform(jax.random.key(0), (3, 1000))
    for variant in VARIANTS:
        f = jax.jit(jax.vmap(lambda x, v=variant: b.count_at_or_below(x, 11, variant=v)))
        loop = jnp.stack([b.count_at_or_below(x, 11, variant=variant) for x in u])
        np.testing.assert_array_equal(np.asarray(f(u)), np.asarray(loop))


def test_block_histogram_kernel_over_many_blocks():
    # the CUDA level counter on CPU: 1,000 values over four blocks, a third exactly on
    # the levels, NaN counted nowhere; under vmap it equals the loop
    rng = np.random.default_rng(7)
    u = rng.uniform(size=(2, 1000)).astype(_float())
    on = rng.uniform(size=u.shape) < 1 / 3
    u[on] = np.asarray(jnp.linspace(0.0, 1.0, 11, dtype=u.dtype))[rng.integers(0, 11, on.sum())]
    u[:, :3] = np.nan
    levels = np.asarray(jnp.linspace(0.0, 1.0, 11, dtype=u.dtype))
    ref = (u[:, :, None] <= levels).sum(1)  # numpy: NaN compares False
    got = jax.jit(jax.vmap(lambda x: b._at_or_below_blocks(x, 11)))(jnp.asarray(u))
    np.testing.assert_array_equal(np.asarray(got), ref)
    np.testing.assert_array_equal(np.asarray(_blocks_kernel(jnp.asarray(u[0]), 11)), ref[0])


def test_default_dispatch_equals_forced_variants():
    u = jax.random.uniform(jax.random.key(1), (999,))
    default = count_at_or_below(u, 100)
    for variant in VARIANTS:
        np.testing.assert_array_equal(
            np.asarray(default), np.asarray(count_at_or_below(u, 100, variant=variant))
        )


def test_unknown_variant_raises():
    with pytest.raises(ValueError, match="variant must be"):
        b.bin_counts(jnp.zeros(3, jnp.int32), 2, variant="atomic")


def test_public_curves_unchanged_against_numpy(rng):
    # calibration_curve: fraction of u <= level (numpy reference, exact counts).
    u = rng.uniform(size=3001).astype(_float())
    c = calibration_curve(u, num_levels=50)
    levels = np.asarray(c.expected)
    np.testing.assert_allclose(
        np.asarray(c.observed), (u[:, None] <= levels).mean(0), rtol=1e-6
    )
    y = (rng.uniform(size=3001) < u).astype(_float())
    r = reliability_curve(y, u, bins=10)
    i = np.minimum((u * 10).astype(int), 9)
    np.testing.assert_array_equal(np.asarray(r.weight), np.bincount(i, minlength=10))


def test_bucketing_helpers():
    assert [bucket_size(n) for n in (1, 256, 257, 1000, 1025)] == [256, 256, 320, 1024, 1280]
    x, mask = pad_to_bucket(jnp.arange(5.0), -1.0, minimum=8)
    assert x.tolist() == [0, 1, 2, 3, 4, -1, -1, -1] and int(mask.sum()) == 5


# --------------------------------------------------------------------------- pit_draws
from bayescal.regression import _pit, pit_draws  # noqa: E402


@settings(max_examples=10)
@given(st.sampled_from([1, 3, 20]), st.sampled_from([1, 7, 40]), st.booleans())
def test_pit_draws_variants_identical(s, n, strict):
    rng = np.random.default_rng(s * 100 + n)
    d = jnp.asarray(rng.integers(0, 4, size=(s, n)).astype(_float()))  # many ties
    y = jnp.asarray(rng.integers(0, 4, size=n).astype(_float()))
    ref_le = (np.asarray(d) <= np.asarray(y)).sum(0)  # numpy reference
    ref_lt = (np.asarray(d) < np.asarray(y)).sum(0)
    for variant in ("rows", "broadcast"):
        le, lt, finite = _pit._count_kernel(y, d, strict=strict, variant=variant)
        np.testing.assert_array_equal(np.asarray(le), ref_le)
        if strict:
            np.testing.assert_array_equal(np.asarray(lt), ref_lt)
        assert bool(finite)


def test_pit_draws_strict_counts_past_the_packed_range():
    # 2^12 draws and more: the two counts of a randomized PIT no longer share a float32
    s = 2**12
    d = jnp.asarray(np.tile(np.array([[0.0], [1.0], [2.0], [1.0]], _float()), (s // 4, 3)))
    le, lt, finite = _pit._count_broadcast(jnp.ones(3, _float()), d, strict=True)
    assert le.tolist() == [3 * s // 4] * 3 and lt.tolist() == [s // 4] * 3 and bool(finite)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_pit_draws_finite_flag_from_the_count(bad):
    d = jnp.ones((11, 5), _float()).at[9, 3].set(bad)
    for variant in ("rows", "broadcast"):
        for strict in (False, True):  # the broadcast kernel's one and two-count sums
            flag = _pit._count_kernel(jnp.zeros(5), d, strict=strict, variant=variant)[2]
            assert not bool(flag)
    with pytest.raises(ValueError, match="draws contains"):
        pit_draws(jnp.zeros(5), d)
    assert np.isnan(np.asarray(jax.jit(pit_draws)(jnp.zeros(5), d))).all()


@pytest.mark.parametrize("where", ["host", "device"])
def test_pit_draws_numpy_row_blocks(monkeypatch, rng, where):
    # Force the streamed path for a small numpy array, in blocks that do not divide the
    # rows: counted in place by numpy (CPU backend; tiles of 16 observations x 5 or 10
    # draws, dividing neither axis) or fed to the device block by block
    # (accelerators); same PIT as numpy's one pass.
    monkeypatch.setattr(_pit, "_NUMPY_CHUNKED_ABOVE", 0)
    monkeypatch.setattr(_pit, "_NUMPY_CHUNK_BYTES", 8 * 4 * 50)
    monkeypatch.setattr(_pit, "_HOST_TILE_COLUMNS", 16)
    monkeypatch.setattr(_pit, "_HOST_TILE_BYTES", 16 * 8 * 5)
    if where == "device":
        monkeypatch.setattr(_pit.jax, "default_backend", lambda: "gpu")
    dtype = np.dtype(_float())
    d = rng.normal(size=(37, 50)).astype(dtype)
    y = rng.normal(size=50).astype(dtype)
    d[5, :10] = y[:10]  # ties: <= and < differ there
    got = pit_draws(y, d)
    ref = (d <= y).mean(0)  # numpy reference
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6)
    # randomized: between the strict and the non-strict count
    v = np.asarray(jax.random.uniform(jax.random.key(3), (50,), dtype=dtype))
    ref_r = ((d < y).sum(0) + v * ((d <= y).sum(0) - (d < y).sum(0))) / 37
    np.testing.assert_allclose(np.asarray(pit_draws(y, d, key=3)), ref_r, rtol=1e-6)
    d[20, 7] = np.nan
    with pytest.raises(ValueError, match="draws contains 1 NaN"):
        pit_draws(y, d)
    d[20, 7], d[36, 49] = 0.0, np.inf  # in the last, partial block
    with pytest.raises(ValueError, match="draws contains .*infinite"):
        pit_draws(y, d)
