"""Tests of the shared core: PAV, binning, error functionals, validation."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bayescal import core
from bayescal._src import validation
from bayescal.core import CalibrationCurve
from tests import _kernels as kernels
from tests.conftest import X64, compilations_during

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)


# --- isotonic regression: reference is scipy.optimize.isotonic_regression (C++ PAV) ---
@given(
    # a few lengths (each new length is one more compilation), random values
    st.sampled_from([1, 2, 5, 17, 60]).flatmap(
        lambda n: st.tuples(
            hnp.arrays(np.float64, n, elements=finite),
            hnp.arrays(np.float64, n, elements=st.floats(0.125, 100, width=32)),
        )
    ),
    st.booleans(),
)
def test_isotonic_equals_scipy_weighted(data, increasing):
    y, w = data
    dtype = np.float64 if X64 else np.float32
    y, w = y.astype(dtype), w.astype(dtype)
    got = np.asarray(core.isotonic_regression(y, weights=w, increasing=increasing))
    ref = scipy.optimize.isotonic_regression(
        y.astype(np.float64), weights=w.astype(np.float64), increasing=increasing
    ).x
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4 if not X64 else 1e-9)
    assert got.dtype == dtype


@given(
    st.integers(0, 300).flatmap(
        lambda n: st.tuples(
            # few distinct values: many ties and long pools
            hnp.arrays(np.float64, n, elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0])),
            hnp.arrays(np.float64, n, elements=st.floats(0.01, 100)),
        )
    ),
    st.booleans(),
    st.integers(1, 3),
)
def test_host_pav_equals_scipy_bit_for_bit(data, increasing, rows):
    # The host callback's PAV is scipy's own C++ routine, loaded from its extension:
    # the same values as scipy.optimize.isotonic_regression (the reference), row by row.
    from bayescal._src import isotonic

    y, w = data
    y = np.stack([y + r for r in range(rows)])
    w = np.stack([w * (r + 1) for r in range(rows)])
    got = isotonic._host_pav(y, w, increasing)
    for r in range(rows):
        ref = scipy.optimize.isotonic_regression(y[r], weights=w[r], increasing=increasing).x
        np.testing.assert_array_equal(got[r], ref)
    got32 = isotonic._host_pav(y.astype(np.float32), w, increasing)
    assert got32.dtype == np.float32
    for r in range(rows):
        ref = scipy.optimize.isotonic_regression(
            y[r].astype(np.float32), weights=w[r], increasing=increasing
        ).x
        np.testing.assert_array_equal(got32[r], ref.astype(np.float32))


def test_host_pav_gives_nan_not_an_error_for_nonpositive_weights():
    # Under jit a failed weight check makes the result NaN; the callback must not raise
    # (scipy's PAV raises "Weights w must be strictly positive"). Only that row.
    from bayescal._src import isotonic

    y = np.array([[3.0, 1.0, 2.0], [3.0, 1.0, 2.0]])
    for bad in (0.0, -1.0, np.nan):
        got = isotonic._host_pav(y, np.array([[1.0, bad, 1.0], [1.0, 1.0, 1.0]]), True)
        assert np.isnan(got[0]).all()
        np.testing.assert_array_equal(got[1], [2.0, 2.0, 2.0])
    kernel = jax.jit(isotonic.isotonic_kernel, static_argnums=2)
    assert np.isnan(np.asarray(kernel(y[0], np.zeros(3), True))).all()


def test_isotonic_fits_do_not_import_scipy_optimize():
    # scipy.optimize costs ~0.3 s to import: on a CPU the PAV loads scipy's extension
    # alone, at every size (a host twin at N = 1e4, the kernel's callback at 1e5), and
    # a later import of scipy.optimize uses the same module. Accelerators fit in XLA:
    # there scipy's PAV is not even loaded (this failed on an H200 before it said so).
    import subprocess
    import sys

    code = (
        "import sys, jax, numpy as np\n"
        "from bayescal import classification as C\n"
        "for n in (10_000, 100_000):\n"
        "    p = np.random.default_rng(0).uniform(size=n)\n"
        "    C.fit_isotonic((p > 0.5).astype(int), p)(p[:10])\n"
        "print('scipy.optimize' in sys.modules)\n"
        "pava = sys.modules.get('scipy.optimize._pava_pybind')\n"
        "if jax.default_backend() == 'cpu':\n"
        "    import scipy.optimize._isotonic as iso\n"
        "    print(iso.pava is pava.pava)\n"
        "else:\n"
        "    print(pava is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_isotonic_jit_vmap_grad_match_eager_loop(rng):
    y = rng.normal(size=(5, 40)).cumsum(1) * 0.1 + rng.normal(size=(5, 40))
    w = rng.uniform(0.5, 2.0, size=(5, 40))
    y, w = jnp.asarray(y), jnp.asarray(w)
    loop = jnp.stack([core.isotonic_regression(y[i], weights=w[i]) for i in range(5)])
    vm = jax.vmap(lambda a, b: core.isotonic_regression(a, weights=b))(y, w)
    jt = jax.jit(lambda a, b: core.isotonic_regression(a, weights=b))(y, w)
    batched = core.isotonic_regression(y, weights=w)
    np.testing.assert_allclose(vm, loop, rtol=1e-6)
    np.testing.assert_allclose(jt, loop, rtol=1e-6)
    np.testing.assert_allclose(batched, loop, rtol=1e-6)


def test_isotonic_gradient_matches_finite_differences(rng):
    y = jnp.asarray(rng.normal(size=30))
    w = jnp.asarray(rng.uniform(0.5, 2.0, size=30))
    c = jnp.asarray(rng.normal(size=30))

    def f(y, w):
        return jnp.sum(c * core.isotonic_regression(y, weights=w))

    gy, gw = jax.grad(f, argnums=(0, 1))(y, w)
    eps = 1e-3
    for i in [0, 7, 15, 29]:
        e = jnp.zeros(30).at[i].set(eps)
        fd_y = (f(y + e, w) - f(y - e, w)) / (2 * eps)
        fd_w = (f(y, w + e) - f(y, w - e)) / (2 * eps)
        np.testing.assert_allclose(gy[i], fd_y, rtol=2e-2, atol=2e-3)
        np.testing.assert_allclose(gw[i], fd_w, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y=[]), "y is empty"),
        (dict(y=[1.0, np.nan]), "y contains 1 NaN"),
        (dict(y=[1.0, 2.0], weights=[1.0, 0.0]), "weights must be strictly positive"),
        (dict(y=[1.0, 2.0], weights=[1.0, 1.0, 1.0]), "weights has shape"),
        (dict(y="abc"), "y must be an array of numbers"),
    ],
)
def test_isotonic_bad_input(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        core.isotonic_regression(**kwargs)


# --- binning engine ---
def test_bin_index_edges_convention():
    edges = jnp.array([0.0, 0.25, 0.5, 0.75, 1.0])
    x = jnp.array([0.0, 0.2499, 0.25, 0.5, 0.99, 1.0])
    # [e_k, e_{k+1}) with the last bin closed
    np.testing.assert_array_equal(kernels.bin_index(x, edges), [0, 0, 1, 2, 3, 3])


def test_bin_sums_keeps_empty_bins_and_counts_in_int():
    idx = jnp.array([0, 0, 3])
    count, (s,) = kernels.bin_sums(idx, 5, (jnp.array([1.0, 2.0, 3.0]),))
    np.testing.assert_array_equal(count, [2, 0, 0, 1, 0])
    assert jnp.issubdtype(count.dtype, jnp.integer)
    np.testing.assert_allclose(s, [3.0, 0, 0, 3.0, 0])
    total, (sw,) = kernels.bin_sums(
        idx, 5, (jnp.array([1.0, 2.0, 3.0]),), jnp.array([1.0, 0.5, 2.0])
    )
    np.testing.assert_allclose(total, [1.5, 0, 0, 2.0, 0])
    np.testing.assert_allclose(sw, [2.0, 0, 0, 6.0, 0])


@pytest.mark.slow
@given(
    # XLA on CPU flushes subnormals to zero, so they are left out of the comparison.
    hnp.arrays(
        np.float32,
        st.integers(1, 200),
        elements=st.floats(0, 1, width=32, allow_subnormal=False),
    ),
    st.integers(2, 300),
)
def test_count_at_or_below_equals_direct_comparison(u, m):
    levels = np.asarray(jnp.linspace(0.0, 1.0, m, dtype=jnp.float32))
    ref = (u[:, None] <= levels[None, :]).sum(0)
    np.testing.assert_array_equal(kernels.count_at_or_below(jnp.asarray(u), m), ref)


def test_count_at_or_below_exact_grid_points():
    m = 101
    levels = jnp.linspace(0.0, 1.0, m, dtype=jnp.float32)
    got = kernels.count_at_or_below(levels, m)  # u equal to each grid point
    np.testing.assert_array_equal(got, np.arange(1, m + 1))


# --- functionals ---
def _fine_area(x, d, n=400_001):
    t = np.linspace(x[0], x[-1], n)
    return np.trapezoid(np.abs(np.interp(t, x, d)), t)


@pytest.mark.slow
@given(hnp.arrays(np.float64, st.integers(2, 30), elements=st.floats(-1, 1)))
def test_area_between_matches_fine_quadrature(d):
    x = np.linspace(0, 1, d.size)
    got = float(kernels.area_between(jnp.asarray(x), jnp.asarray(d)))
    np.testing.assert_allclose(got, _fine_area(x, d), atol=1e-5)


def test_ecdf_area_matches_fine_grid_with_ties(rng):
    u = np.sort(np.concatenate([rng.beta(2, 5, 300), [0.3] * 20, [0.0, 1.0, 1.0]]))
    got = float(kernels.ecdf_area_to_diagonal(jnp.asarray(u)))
    p = np.linspace(0, 1, 1_000_001)
    g = np.searchsorted(u, p, side="right") / u.size
    ref = np.trapezoid(np.abs(g - p), p)
    np.testing.assert_allclose(got, ref, atol=2e-6)


def test_curve_error_norms_and_empty_bins():
    c = CalibrationCurve(
        jnp.array([0.1, 0.5, 0.9]), jnp.array([0.2, 0.0, 0.6]), jnp.array([1, 0, 3])
    )
    # reference: hand computation; the empty middle bin is ignored everywhere
    np.testing.assert_allclose(
        core.curve_error(c, norm="l1"), (0.1 + 3 * 0.3) / 4, rtol=1e-6
    )
    np.testing.assert_allclose(
        core.curve_error(c, norm="l2"), np.sqrt((0.01 + 3 * 0.09) / 4), rtol=1e-6
    )
    np.testing.assert_allclose(core.curve_error(c, norm="max"), 0.3, rtol=1e-6)
    with pytest.raises(ValueError, match="norm must be one of"):
        core.curve_error(c, norm="l3")


# --- validation layer ---
def test_float64_input_is_downcast_silently():
    # JAX's own convention (DESIGN.md, Precision): no warning on an ordinary first call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = validation.as_float_array(np.ones(3), "pit")
    assert x.dtype == (jnp.float64 if X64 else jnp.float32)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_half_precision_is_computed_in_float32(dtype):
    x = validation.as_float_array(np.array([0.25, 0.5], dtype=dtype), "pit")
    assert x.dtype == jnp.float32
    y = validation.as_float_array(jnp.array([0.25, 0.5], dtype=dtype), "pit")
    assert y.dtype == jnp.float32


def test_dtype_kept():
    x = validation.as_float_array(np.ones(3, np.float32), "x")
    assert x.dtype == jnp.float32
    i = validation.as_float_array(np.arange(3), "x")
    assert jnp.issubdtype(i.dtype, jnp.floating)


# Value checks of host arrays run in NumPy (validation._HOST_PREDICATES); the compiled
# predicates (validation._PREDICATES, what runs under jit and on accelerators) are the
# reference: both must give the same answer on every edge case (NaN, +-inf, -0, the
# bounds 0 and 1, empty arrays, ties, integer and boolean inputs).
_EDGE_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 0.25, 2.0, 3.0, np.nan, np.inf, -np.inf])
_KINDS = {  # kind: (arrays, params, shape of one array)
    "finite": (1, (), (6,)),
    "unit": (1, (), (6,)),
    "positive": (1, (), (6,)),
    "nonnegative": (1, (), (6,)),
    "binary": (1, (), (6,)),
    "both_classes": (1, (), (6,)),
    "any_positive": (1, (), (6,)),
    "sorted": (1, (True,), (6,)),
    "sorted_weak": (1, (False,), (6,)),
    "nondecreasing_axis0": (1, (), (3, 4)),
    "less_equal": (2, (), (6,)),
    "no_zero_or_one": (1, (), (6,)),
    "class_range": (1, (3,), (6,)),
    "row_sums": (1, (1e-3,), (3, 4)),
}


def _edge_batch(rng, kind, shape, dtype, rows=300):
    """``rows`` arrays of ``shape``, each drawn from 1 to 3 edge values (so that rows that
    pass, e.g. all in [0, 1] or all binary, are common), half of them sorted."""
    x = np.stack([rng.choice(rng.choice(_EDGE_VALUES, size=rng.integers(1, 4), replace=False),
                             size=shape) for _ in range(rows)])
    half = rows // 2
    if kind.startswith("sorted"):  # distinct values (strictly sorted unless -0.0 and 0.0)
        x[:half] = np.sort([rng.choice(_EDGE_VALUES, size=shape, replace=False)
                            for _ in range(half)], axis=-1)
    if kind == "nondecreasing_axis0":
        x[:half] = np.sort(x[:half], axis=1)
    if kind == "row_sums":  # rows summing to 1, 1 +- 5e-4 (inside tol) and 1 + 2e-3 (outside)
        w = rng.dirichlet(np.ones(shape[-1]), size=(half, shape[0]))
        w[..., 0] += rng.choice([0.0, 5e-4, -5e-4, 2e-3], size=(half, shape[0]))
        x[:half] = w
    if dtype != np.float32:
        x = np.nan_to_num(x, posinf=2, neginf=-1)
    return x.astype(dtype)


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_host_predicates_equal_the_compiled_predicates(kind):
    count, params, shape = _KINDS[kind]
    name = "sorted" if kind.startswith("sorted") else kind
    rng = np.random.default_rng(sorted(_KINDS).index(kind))
    for dtype in (np.float32, np.int32, np.bool_):
        if (name == "row_sums" and dtype != np.float32) or (
            name in ("sorted", "nondecreasing_axis0") and dtype == np.bool_
        ):
            continue  # probabilities; edges and quantiles are numbers
        batches = [_edge_batch(rng, kind, shape, dtype) for _ in range(count)]
        if count == 2:  # b = a + offset: equal, larger, smaller rows
            offset = rng.choice([0, 1, -1], size=(len(batches[0]), 1)).astype(dtype)
            batches[1] = (batches[0] + offset).astype(dtype)
        compiled = np.asarray(
            jax.jit(jax.vmap(lambda *a: validation._PREDICATES[name](*a, *params)))(*batches)
        )
        host = np.concatenate([
            validation._host_flags([validation._Check(name, "x", tuple(b[i] for b in batches),
                                                      params, "values")])
            for i in range(len(batches[0]))
        ])
        np.testing.assert_array_equal(host, compiled, err_msg=f"{kind}, {dtype.__name__}")
        if dtype == np.float32:
            assert compiled.any() and not compiled.all(), (kind, compiled.mean())  # both outcomes
        empty = np.zeros((0,) + shape[1:], dtype)
        if count == 1:
            assert validation._host_flags([validation._Check(name, "x", (empty,), params, "")]) == bool(
                validation._PREDICATES[name](jnp.asarray(empty), *params))


def _on_cpu(x: np.ndarray) -> jax.Array:
    """A JAX array in host memory (on the CPU device), whatever the default backend."""
    return jax.device_put(x, jax.devices("cpu")[0])


def test_host_checks_are_wired_like_the_compiled_pass(rng):
    # several checks of both array kinds in one pass: the same flags, in the same order
    # (JAX arrays in host memory: on a GPU jnp.asarray would put them on the device,
    # which the host checks leave to the compiled pass)
    x = rng.uniform(size=(3, 4)).astype(np.float32)
    checks = [
        validation._Check("unit", "p", (x,), (), "values"),
        validation._Check("less_equal", "lo", (_on_cpu(x), x - 1), (), "values"),
        validation._Check("positive", "scale", (_on_cpu(x - 0.5),), (), "values"),
        validation._Check("class_range", "y", (np.array([0, 2, 1]),), (3,), "labels"),
        validation._Check("sorted", "edges", (np.array([0.0, 0.5, 0.5, 1.0]),), (True,), "values"),
    ]
    host = validation._host_flags(checks)
    np.testing.assert_array_equal(host, [True, False, False, True, False])
    np.testing.assert_array_equal(host, np.asarray(validation._flags(checks)))


def test_host_checks_leave_large_and_bfloat16_arrays_to_the_compiled_pass():
    big = np.zeros(validation.HOST_CHECK_MAX_SIZE + 1, np.float32)
    for x in (big, jnp.ones(4, jnp.bfloat16)):
        check = validation._Check("finite", "x", (x,), (), "values")
        assert validation._host_flags([check]) is None
    big[-1] = np.nan
    with pytest.raises(ValueError, match="x contains 1 NaN"):
        validation.record("finite", "x", big)


def test_host_checks_size_each_array_once():
    # several checks of one array read it once: [N, 5] probabilities checked for their
    # range and row sums count 5N values, not 10N (at N = 100,000 the sum of the
    # repeats passed HOST_CHECK_MAX_SIZE and a flag program was compiled)
    n = validation.HOST_CHECK_MAX_SIZE // 6
    p = np.full((n, 5), 0.2, np.float32)
    y = np.zeros(n, np.int32)
    checks = [
        validation._Check("class_range", "y", (y,), (5,), "labels"),
        validation._Check("unit", "p", (p,), (), "values"),
        validation._Check("finite", "p", (p,), (), "values"),
    ]
    np.testing.assert_array_equal(validation._host_flags(checks), [True, True, True])
    other = checks + [validation._Check("finite", "q", (p.copy(),), (), "values")]
    assert validation._host_flags(other) is None  # another array of 5N values: too many


def test_checks_of_new_shapes_compile_nothing(rng):
    # one eager check per length: in NumPy, no XLA program per shape
    def run():
        for n in range(200, 230):
            validation.record("unit", "p", rng.uniform(size=n).astype(np.float32))
            validation.record("finite", "loc", _on_cpu(rng.normal(size=n).astype(np.float32)))

    assert compilations_during(run) == 0
    with pytest.raises(ValueError, match="p must lie in \\[0, 1\\]"):
        validation.record("unit", "p", np.full(231, 1.5, np.float32))


@pytest.mark.parametrize("seed", [0, 7, 2**31 - 1, 2**31, 2**40])
def test_an_int_seed_gives_the_results_of_its_key(seed):
    # Public functions take an int seed for jax.random.key(seed); a seed below 2**31 is
    # made a key on the host (validation._seed_key: a static int compiled a program
    # per seed), larger ones are made keys inside the program: the same results.
    from bayescal import classification as clf
    from bayescal import regression as reg

    rng = np.random.default_rng(0)
    u = rng.uniform(size=300)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    calls = [
        lambda k: reg.bootstrap_calibration_error(k, u, num_samples=50),
        lambda k: reg.calibration_error_test(k, u, num_samples=50).pvalue,
        lambda k: clf.bootstrap_reliability_curve(k, y, p, num_samples=50).lower,
        lambda k: clf.corp_curve(y, p, key=k, num_samples=20).upper,
    ]
    for call in calls:
        by_seed = np.asarray(jax.tree_util.tree_leaves(call(seed))[0])
        by_key = np.asarray(jax.tree_util.tree_leaves(call(jax.random.key(seed)))[0])
        np.testing.assert_array_equal(by_seed, by_key)
