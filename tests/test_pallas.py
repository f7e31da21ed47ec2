"""The Pallas histogram kernels (GPU) against the XLA compare kernels, on CPU.

Off a GPU the kernels run in Pallas' interpreter (``interpret=True``, forced here by
``variant="pallas"``). Reference: the XLA ``"compare"`` variant of
:mod:`bayescal._src.binning` (itself tested against ``np.bincount`` and float64 sums
in tests/test_kernels.py) on the same inputs: counts exactly equal, per-bin sums to
1e-6 relative (float32). Sizes are odd (1, 7, 1000, 4097: one partial sub-block, a
partial last program, several programs) and values sit on the edges and levels too.
Each (size, K) pair compiles a program, so the pairs are few (the file runs in
~12 s of CPU time).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal._src import binning as b
from bayescal._src import pallas_histogram as ph
from bayescal._src.binned import uniform_edges

# Pallas' Triton primitives need JAX >= 0.5: the min tier (jax 0.4.38) leaves this
# file out (Makefile); everywhere else they must import.


def test_pallas_triton_is_available():
    assert ph.available()


# (N, K): every size and every K of the issue at least once, each pair one program.
CASES = ((1, 1), (7, 2), (1000, 15), (4097, 100))


def _float():
    return jnp.zeros((), dtype=float).dtype


def _probabilities(rng, n, num_bins):
    """Uniform values, a third of them exactly on the edges ``k / K`` (0 and 1 too)."""
    edges = np.asarray(uniform_edges(num_bins, _float()))
    p = rng.random(n).astype(_float())
    on = rng.random(n) < 1 / 3
    p[on] = edges[rng.integers(0, num_bins + 1, on.sum())]
    return jnp.asarray(p)


@functools.partial(jax.jit, static_argnames=("num_bins", "variant", "bounded"))
def _bin_sums(idx, p, y, w, *, num_bins, variant, bounded):
    return b.bin_sums(idx, num_bins, (p, y), w, bounded=bounded, variant=variant)


@pytest.mark.parametrize(("n", "num_bins"), CASES)
def test_counts_and_sums_equal_the_compare_kernel(rng, n, num_bins):
    p = _probabilities(rng, n, num_bins)
    y = jnp.asarray(rng.random(n) < 0.5, p.dtype)
    idx = b.bin_index(p, uniform_edges(num_bins, p.dtype))
    idx = jnp.where(jnp.arange(n) % 5 == 4, num_bins, idx)  # some out of range: dropped
    args = dict(num_bins=num_bins, bounded=True)
    count, sums = _bin_sums(idx, p, y, None, variant="pallas", **args)
    ref_count, ref_sums = _bin_sums(idx, p, y, None, variant="compare", **args)
    assert count.dtype == ref_count.dtype
    np.testing.assert_array_equal(np.asarray(count), np.asarray(ref_count))
    for s, r in zip(sums, ref_sums, strict=True):
        assert s.dtype == r.dtype
        np.testing.assert_allclose(np.asarray(s), np.asarray(r), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(
        np.asarray(b.bin_counts(idx, num_bins, variant="pallas")), np.asarray(ref_count)
    )


@pytest.mark.parametrize(("n", "num_bins"), [CASES[2]])
def test_weighted_sums_of_unbounded_values_equal_the_compare_kernel(rng, n, num_bins):
    # Values far from [-1, 1] (the scale found by a pass) and observation weights.
    p = _probabilities(rng, n, num_bins)
    y = jnp.asarray(rng.normal(size=n) * 1e3, p.dtype)
    w = jnp.asarray(rng.random(n) * 3, p.dtype)
    idx = b.bin_index(p, uniform_edges(num_bins, p.dtype))
    args = dict(num_bins=num_bins, bounded=False)
    weight, sums = _bin_sums(idx, p, y, w, variant="pallas", **args)
    ref_weight, ref_sums = _bin_sums(idx, p, y, w, variant="compare", **args)
    for s, r in zip((weight, *sums), (ref_weight, *ref_sums), strict=True):
        # relative to the bin's sum of magnitudes (a sum of signed values can cancel)
        np.testing.assert_allclose(np.asarray(s), np.asarray(r), rtol=1e-6, atol=1e-3)


@functools.partial(jax.jit, static_argnames="num_bins")
def _from_edges(p, *, num_bins):
    """Counts and sums with the bins found in the kernel, and their XLA references."""
    edges = uniform_edges(num_bins, p.dtype)
    x = jnp.nan_to_num(p, nan=0.0)
    count_nan, _ = ph.bin_stats(p, num_bins, edges=edges, interpret=True)
    count, (hi, lo) = ph.bin_stats(x, num_bins, (x,), (2.0,), edges=edges, interpret=True)
    ref_nan = b.bin_counts(b.bin_index(p, edges), num_bins, variant="compare")
    idx = b.bin_index(x, edges)
    ref = b.bin_counts(idx, num_bins, variant="compare")
    ((s, c),) = b.compensated_bin_sums(idx, num_bins, (x,), variant="compare")
    return count_nan, ref_nan, count, ref, hi, hi + lo, s + c


@pytest.mark.parametrize(("n", "num_bins"), ((7, 2), (4097, 100)))
def test_bins_found_from_values_and_edges_equal_bin_index(rng, n, num_bins):
    p = _probabilities(rng, n, num_bins)
    p = p.at[:3].set(jnp.asarray([-0.5, 1.5, jnp.nan], p.dtype))  # outside, NaN
    count_nan, ref_nan, count, ref, hi, parts, sums = _from_edges(p, num_bins=num_bins)
    np.testing.assert_array_equal(np.asarray(count_nan), np.asarray(ref_nan))  # NaN: last
    np.testing.assert_array_equal(np.asarray(count), np.asarray(ref))
    # the high parts lie on the grid 2 * 2^-16, so their block sums are exact
    scaled = np.asarray(hi, np.float64) * 2.0**15
    np.testing.assert_array_equal(scaled, np.round(scaled))
    np.testing.assert_allclose(np.asarray(parts).sum(0), np.asarray(sums), rtol=1e-6)


def test_empty_input_and_bad_scales():
    count, parts = ph.bin_stats(jnp.zeros(0, jnp.int32), 3, interpret=True)
    assert count.tolist() == [0, 0, 0] and parts == ()
    with pytest.raises(ValueError, match="scales must have one entry per value"):
        ph.bin_stats(jnp.zeros(3, jnp.int32), 3, (jnp.zeros(3),), (), interpret=True)


def test_default_dispatch_on_cpu_is_unchanged():
    # Without a CUDA backend the Pallas branch is not even traced (same program).
    assert not b.pallas_on_gpu() or jax.default_backend() == "gpu"
    if jax.default_backend() == "cpu":
        text = (
            jax.jit(lambda i: b.bin_counts(i, 15)).lower(jnp.zeros(9, jnp.int32)).as_text()
        )
        assert "pallas" not in text and "triton" not in text
    with pytest.raises(ValueError, match="variant must be"):
        b.bin_counts(jnp.zeros(3, jnp.int32), 2, variant="triton")


def test_gpu_programs_of_the_binned_metrics_call_the_triton_kernels(monkeypatch):
    # Lowered for CUDA on this CPU machine (no GPU needed): with Pallas picked, the
    # GPU program of each public histogram metric holds the Triton kernel call, so every
    # primitive of the kernels has a Triton lowering rule. Property check.
    from bayescal.classification import expected_calibration_error, reliability_curve
    from bayescal.regression import calibration_curve

    p = jnp.linspace(0.0, 1.0, 333, dtype=_float())
    y = (p > 0.4).astype(p.dtype)
    monkeypatch.setattr(b, "pallas_on_gpu", lambda: True)
    jax.clear_caches()  # no program traced without the Pallas branch is reused
    try:
        for f, args, triton in (
            (expected_calibration_error, (y, p), True),
            (reliability_curve, (y, p), True),
            (calibration_curve, (p,), False),  # level counts: XLA's compare kernel
        ):
            lowered = jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",))
            assert ("xla.gpu.triton" in lowered.as_text()) == triton, f.__name__
        # the level counts on CUDA: the block-private scatter kernel (no compare kernel)
        text = jax.jit(calibration_curve).trace(p).lower(lowering_platforms=("cuda",))
        assert "stablehlo.scatter" in text.as_text()
    finally:
        jax.clear_caches()


def test_mixed_float_dtypes_sum_like_the_compare_kernel(rng):
    # Under x64 a float32 label array beside float64 probabilities: one float64 kernel,
    # each value's sums in its own dtype (as the XLA kernels return them).
    p = _probabilities(rng, 1000, 15)
    y = jnp.asarray(rng.random(1000) < 0.5, jnp.float32)
    idx = b.bin_index(p, uniform_edges(15, p.dtype))
    args = dict(num_bins=15, bounded=True)
    count, sums = _bin_sums(idx, p, y, None, variant="pallas", **args)
    ref_count, ref_sums = _bin_sums(idx, p, y, None, variant="compare", **args)
    np.testing.assert_array_equal(np.asarray(count), np.asarray(ref_count))
    for s, r in zip(sums, ref_sums, strict=True):
        assert s.dtype == r.dtype
        np.testing.assert_allclose(np.asarray(s), np.asarray(r), rtol=1e-6)


@functools.partial(jax.jit, static_argnames=("num_bins", "variant"))
def _from_edges_public(p, y, mask, *, num_bins, variant):
    edges = uniform_edges(num_bins, p.dtype)
    return b.bin_sums_from_edges(p, edges, (p, y), mask, variant=variant)


@pytest.mark.parametrize(("n", "num_bins"), ((7, 2), (1000, 15)))
def test_bins_from_edges_with_a_mask_equal_the_compare_kernel(rng, n, num_bins):
    # The route of ECE and the reliability curve on GPUs: a bucket's padding (mask
    # False, here every third value, not only a tail) is counted nowhere.
    p = _probabilities(rng, n, num_bins)
    y = jnp.asarray(rng.random(n) < 0.5, p.dtype)
    mask = jnp.arange(n) % 3 != 1
    args = dict(num_bins=num_bins)
    count, sums = _from_edges_public(p, y, mask, variant="pallas", **args)
    ref_count, ref_sums = _from_edges_public(p, y, mask, variant="compare", **args)
    np.testing.assert_array_equal(np.asarray(count), np.asarray(ref_count))
    for s, r in zip(sums, ref_sums, strict=True):
        assert s.dtype == r.dtype
        np.testing.assert_allclose(np.asarray(s), np.asarray(r), rtol=1e-6)
    # and the default (scatter on CPU) gives the same counts
    default = _from_edges_public(p, y, mask, variant=None, **args)[0]
    np.testing.assert_array_equal(np.asarray(default), np.asarray(ref_count))


def test_levels_have_no_pallas_kernel():
    # the calibration curves' level counts run XLA's compare kernel on GPUs too (as
    # fast on an H200); forcing Pallas says so instead of running something else
    with pytest.raises(ValueError, match="no Pallas kernel"):
        b.count_at_or_below(jnp.zeros(3), 4, variant="pallas")
