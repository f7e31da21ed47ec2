"""Shape bucketing of eager public calls (bayescal._src.validation.validated(bucket=...)).

An eager call on host-resident inputs pads the observation axis to
``bucketing.bucket_size(n)`` and runs one compiled program per bucket: a new ``n`` in a
bucket already used compiles nothing, and the result equals the unpadded computation
(``jax.jit`` of the same call, which traces the exact shape and pads nothing): counts
exactly, sums to float tolerance.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayescal import classification as C
from bayescal import regression as R
from bayescal._src import validation as _v
from bayescal._src.bucketing import MIN_BUCKET, bucket_size
from tests.conftest import X64, compilations_during, float_tol

# The bucketed kernel path itself: small eager calls would otherwise take the host path.
pytestmark = pytest.mark.usefixtures("kernel_path")


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed + n)
    y = rng.normal(size=n)
    return {
        "u": rng.uniform(size=n),
        "y": y,
        "loc": y + 0.3 * rng.normal(size=n),
        "scale": 0.5 + rng.uniform(size=n),
        "draws": rng.normal(size=(20, n)),
        "q": np.sort(rng.normal(size=(5, n)), axis=0),
        "levels": np.linspace(0.1, 0.9, 5),
        "labels": (rng.uniform(size=n) < 0.4).astype(np.int64),
        "p": np.clip(rng.uniform(size=n), 0.01, 0.99),
        "w": rng.uniform(size=n),
        "group": np.arange(n) % 3,  # Mondrian groups (drawn last: the rest as before)
    }


@functools.cache
def _recalibrator():
    return R.fit_isotonic_recalibrator(np.linspace(0.01, 0.99, 300) ** 2)


@functools.cache
def _mondrian():
    d = _inputs(300, seed=5)
    return R.fit_conformal(d["y"], d["loc"], d["scale"], groups=d["group"])


@functools.cache
def _cps():
    d = _inputs(300, seed=6)
    return R.fit_conformal_predictive(d["y"], d["loc"], d["scale"], groups=d["group"])


@functools.cache
def _isotonic():
    x = np.linspace(0.0, 1.0, 300)
    return C.fit_isotonic((np.sin(40 * x) > 0.5 - x).astype(int), x)


# name: (function, positional inputs, keyword options)
CASES = {
    "fit_isotonic": (C.fit_isotonic, ("labels", "p"), {}),
    "fit_isotonic_ties": (
        lambda y, p: C.fit_isotonic(y, np.round(p, 1)),
        ("labels", "p"),
        {},
    ),
    "isotonic_calibrator_call": (lambda p: _isotonic()(p), ("p",), {}),
    "fit_isotonic_recalibrator": (R.fit_isotonic_recalibrator, ("u",), {}),
    # with observation weights (issue 20): bucketed as the unweighted fits
    "fit_isotonic_weighted": (
        lambda y, p, w: C.fit_isotonic(y, np.round(p, 1), weights=w),
        ("labels", "p", "w"),
        {},
    ),
    "fit_isotonic_recalibrator_weighted": (
        lambda u, w: R.fit_isotonic_recalibrator(u, weights=w),
        ("u", "w"),
        {},
    ),
    "fit_histogram_binning_weighted_quantile": (
        lambda y, p, w: C.fit_histogram_binning(
            y, p, bins=8, strategy="quantile", weights=w
        ),
        ("labels", "p", "w"),
        {},
    ),
    "fit_conformal_weighted": (
        lambda y, m, s, w: R.fit_conformal(y, m, s, alpha=0.5, weights=w),
        ("y", "loc", "scale", "w"),
        {},
    ),
    "fit_conformalized_quantile_weighted": (
        lambda y, m, s, w: R.fit_conformalized_quantile(
            y, m - s, m + s, alpha=0.5, weights=w
        ),
        ("y", "loc", "scale", "w"),
        {},
    ),
    # Mondrian conformal: three groups (alpha 0.5 needs one observation in each)
    "fit_conformal_groups": (
        lambda y, m, s, g: R.fit_conformal(y, m, s, alpha=0.5, groups=g, num_groups=3),
        ("y", "loc", "scale", "group"),
        {},
    ),
    "fit_conformal_groups_weighted": (
        lambda y, m, w, g: R.fit_conformal(
            y, m, alpha=0.5, weights=w, groups=g, num_groups=3
        ),
        ("y", "loc", "w", "group"),
        {},
    ),
    "fit_conformalized_quantile_groups": (
        lambda y, m, s, g: R.fit_conformalized_quantile(
            y, m - s, m + s, alpha=0.5, groups=g, num_groups=3
        ),
        ("y", "loc", "scale", "group"),
        {},
    ),
    "conformal_calibrator_call_groups": (
        lambda m, s, g: _mondrian()(m, s, groups=g),
        ("loc", "scale", "group"),
        {},
    ),
    # anytime-valid monitoring
    "pit_martingale": (R.pit_martingale, ("u",), {}),
    "calibration_martingale": (C.calibration_martingale, ("labels", "p"), {}),
    "conformal_p_values": (lambda a, t: R.conformal_p_values(a, tau=t), ("scale", "u"), {}),
    # adaptive conformal inference: the stream's length bucketed, the scores' too
    "adaptive_conformal_intervals": (
        lambda y, m, w: R.adaptive_conformal_intervals(y, m, w, gamma=0.05),
        ("y", "loc", "w"),
        {},
    ),
    "adaptive_conformal_intervals_window": (
        lambda y, m, s, w: R.adaptive_conformal_intervals(y, m, w, s, gamma=0.05, window=True),
        ("y", "loc", "scale", "w"),
        {},
    ),
    # conformal predictive systems (Mondrian, normalized): the fit and each method
    "fit_conformal_predictive": (
        lambda y, m, s, g: R.fit_conformal_predictive(y, m, s, groups=g, num_groups=3),
        ("y", "loc", "scale", "group"),
        {},
    ),
    "conformal_predictive_pit": (
        lambda y, m, s, g: _cps()(m, s, groups=g).pit(y),
        ("y", "loc", "scale", "group"),
        {},
    ),
    "conformal_predictive_pit_smoothed": (
        lambda y, m, s, g: _cps()(m, s, groups=g).pit(y, key=jax.random.key(3)),
        ("y", "loc", "scale", "group"),
        {},
    ),
    "conformal_predictive_interval": (
        lambda m, s, g: _cps()(m, s, groups=g).interval(0.8),
        ("loc", "scale", "group"),
        {},
    ),
    "conformal_predictive_quantile": (
        lambda m, s, g: _cps()(m, s, groups=g).quantile([0.1, 0.5]),
        ("loc", "scale", "group"),
        {},
    ),
    "conformal_predictive_crps": (
        lambda y, m, s, g: _cps()(m, s, groups=g).crps(y),
        ("y", "loc", "scale", "group"),
        {},
    ),
    "isotonic_recalibrator_call": (lambda u: _recalibrator()(u), ("u",), {}),
    "isotonic_recalibrator_inverse": (lambda u: _recalibrator().inverse(u), ("u",), {}),
    "pit_normal": (R.pit_normal, ("y", "loc", "scale"), {}),
    "pit_quantiles": (R.pit_quantiles, ("y", "q", "levels"), {}),
    "calibration_curve": (R.calibration_curve, ("u",), {}),
    "calibration_curve_interval": (R.calibration_curve, ("u",), {"kind": "interval"}),
    "calibration_error": (R.calibration_error, ("u",), {}),
    "calibration_error_max": (R.calibration_error, ("u",), {"norm": "max"}),
    "miscalibration_area": (R.miscalibration_area, ("u",), {}),
    "miscalibration_area_grid": (R.miscalibration_area, ("u",), {"num_levels": 50}),
    "sharpness": (R.sharpness, ("scale",), {}),
    "sharpness_draws": (lambda d: R.sharpness(draws=d), ("draws",), {}),
    "crps_normal": (R.crps_normal, ("y", "loc", "scale"), {}),
    "crps_normal_none": (R.crps_normal, ("y", "loc", "scale"), {"reduction": "none"}),
    "crps_draws": (R.crps_draws, ("y", "draws"), {}),
    "nll_normal": (R.nll_normal, ("y", "loc", "scale"), {"reduction": "sum"}),
    "interval_score": (
        lambda y, lo, s: R.interval_score(y, lo - s, lo + s, alpha=0.1),
        ("y", "loc", "scale"),
        {},
    ),
    "pinball_loss": (R.pinball_loss, ("y", "q", "levels"), {}),
    "reliability_curve": (C.reliability_curve, ("labels", "p"), {}),
    "reliability_curve_quantile": (
        C.reliability_curve,
        ("labels", "p"),
        {"strategy": "quantile"},
    ),
    "expected_calibration_error": (C.expected_calibration_error, ("labels", "p"), {}),
    "ece_quantile": (
        C.expected_calibration_error,
        ("labels", "p"),
        {"strategy": "quantile"},
    ),
    "ece_l2_debiased": (
        C.expected_calibration_error,
        ("labels", "p"),
        {"norm": "l2", "debias": True},
    ),
    "ece_l1_debiased": (
        C.expected_calibration_error,
        ("labels", "p"),
        {"debias": True, "key": 0},
    ),
    "brier_score": (C.brier_score, ("labels", "p"), {}),
    "brier_score_none": (C.brier_score, ("labels", "p"), {"reduction": "none"}),
    "log_loss": (C.log_loss, ("labels", "p"), {}),
    "brier_decomposition_binned": (C.brier_decomposition_binned, ("labels", "p"), {}),
    "prediction_sharpness": (C.prediction_sharpness, ("p",), {}),
    "calibration_slope_intercept": (C.calibration_slope_intercept, ("labels", "p"), {}),
    "spiegelhalter_z": (C.spiegelhalter_z, ("labels", "p"), {}),
    "cumulative_calibration_test": (C.cumulative_calibration_test, ("labels", "p"), {}),
    # bins=5: the 7-observation case needs one observation per group.
    "hosmer_lemeshow": (C.hosmer_lemeshow, ("labels", "p"), {"bins": 5}),
    "kernel_calibration_error": (C.kernel_calibration_error, ("labels", "p"), {}),
    "kernel_calibration_error_linear": (
        C.kernel_calibration_error,
        ("labels", "p"),
        {"estimator": "linear"},
    ),
    "kernel_calibration_test": (C.kernel_calibration_test, ("labels", "p"), {}),
    "kernel_calibration_error_regression": (
        R.kernel_calibration_error, ("y", "loc", "scale"), {},
    ),
    "kernel_calibration_error_regression_linear": (
        R.kernel_calibration_error, ("y", "loc", "scale"), {"estimator": "linear"},
    ),
    "kernel_calibration_test_regression": (
        R.kernel_calibration_test, ("y", "loc", "scale"), {},
    ),
    "isotonic_calibration_index": (C.isotonic_calibration_index, ("labels", "p"), {}),
}
WEIGHTED = {
    "crps_normal_weighted": (R.crps_normal, ("y", "loc", "scale")),
    "reliability_curve_weighted": (C.reliability_curve, ("labels", "p")),
    "ece_weighted": (C.expected_calibration_error, ("labels", "p")),
    "log_loss_weighted": (C.log_loss, ("labels", "p")),
}


def _call(name, data):
    if name in WEIGHTED:
        fn, keys = WEIGHTED[name]
        return fn(*(data[k] for k in keys), weights=data["w"])
    fn, keys, kw = CASES[name]
    return fn(*(data[k] for k in keys), **kw)


def _unpadded(name, data):
    """The same call under jax.jit: traced at the exact length, nothing padded."""
    if name in WEIGHTED:
        fn, keys = WEIGHTED[name]
        return jax.jit(lambda *a: fn(*a[:-1], weights=a[-1]))(
            *(data[k] for k in keys), data["w"]
        )
    fn, keys, kw = CASES[name]
    return jax.jit(functools.partial(fn, **kw))(*(data[k] for k in keys))


def _assert_same(got, want):
    got_leaves, want_leaves = (
        jax.tree_util.tree_leaves(got),
        jax.tree_util.tree_leaves(want),
    )
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if np.issubdtype(g.dtype, np.integer):
            np.testing.assert_array_equal(g, w)  # counts: exactly
        else:
            np.testing.assert_allclose(g, w, rtol=float_tol(g.dtype), atol=1e-6)


ALL = sorted(CASES) + sorted(WEIGHTED)


@pytest.mark.parametrize("name", ALL)
def test_new_length_in_a_used_bucket_compiles_nothing(name):
    # 1000 and 1013 share the bucket 1024; 1024 itself fills it exactly.
    assert bucket_size(1000) == bucket_size(1013) == bucket_size(1024) == 1024
    first = _inputs(1000)
    jax.block_until_ready(_call(name, first))
    for n in (1013, 1024):
        data = _inputs(n)
        assert (
            compilations_during(lambda d=data: jax.block_until_ready(_call(name, d))) == 0
        )


@pytest.mark.parametrize("name", ALL)
def test_bucketed_equals_unpadded(name):
    for n in (7, 1000):
        data = _inputs(n, seed=1)
        _assert_same(_call(name, data), _unpadded(name, data))


@pytest.mark.parametrize(
    "name", ["calibration_error", "brier_score", "ece_quantile", "crps_normal"]
)
def test_an_unpadded_trace_of_the_bucket_length_is_not_reused(name):
    # jit at exactly the bucket's length first (its kernels' traces are cached by
    # shape), then an eager call padded to that length: the padding must still be
    # left out (the mask is an argument of the kernels, never read inside them).
    full = _inputs(1024, seed=2)
    _unpadded(name, full)
    part = _inputs(900, seed=2)  # bucket 1024 as well
    assert bucket_size(900) == 1024
    _assert_same(_call(name, part), _unpadded(name, part))


def test_per_observation_results_are_sliced_on_the_host():
    data = _inputs(1000)
    u = R.pit_normal(data["y"], data["loc"], data["scale"])
    assert u.shape == (1000,)
    scores = C.brier_score(data["labels"], data["p"], reduction="none")
    assert scores.shape == (1000,)
    # a reduced score with as many levels as the bucket has slots is not sliced
    q = np.sort(np.random.default_rng(0).normal(size=(256, 100)), axis=0)
    levels = np.linspace(0.001, 0.999, 256)
    loss = R.pinball_loss(np.zeros(100), q, levels)
    assert bucket_size(100) == 256 and loss.shape == (256,)


def test_invalid_values_still_raise_with_the_unpadded_message():
    data = _inputs(1000)
    u = data["u"].copy()
    u[3] = 1.5
    with pytest.raises(ValueError, match="pit must lie in"):
        R.calibration_error(u)
    p = data["p"].copy()
    p[-1] = np.nan  # the last value is the one the padding repeats
    with pytest.raises(ValueError, match="y_prob contains 1 NaN"):
        C.expected_calibration_error(data["labels"], p)


def test_mismatched_lengths_are_reported_not_padded():
    data = _inputs(1000)
    with pytest.raises(ValueError, match="y_true"):
        C.brier_score(data["labels"][:999], data["p"])


def test_recalibrators_of_sizes_in_one_bucket_share_their_programs():
    # the knots are padded to their own bucket with the last knot (1, 1) repeated
    u = _inputs(500)["u"]
    first = R.fit_isotonic_recalibrator(_inputs(1000)["u"])
    jax.block_until_ready((first(u), first.inverse(u)))
    other = R.fit_isotonic_recalibrator(_inputs(1010)["u"])
    assert other.raw.shape == (1012,)  # the fitted knots themselves are not padded
    assert (
        compilations_during(lambda: jax.block_until_ready((other(u), other.inverse(u))))
        == 0
    )
    want = jax.jit(lambda r, x: (r(x), r.inverse(x)))(other, u)
    _assert_same((other(u), other.inverse(u)), want)


def test_kernels_see_no_bucket_outside_a_bucketed_call():
    assert _v.observation_mask(10) is None
    assert _v.observation_count(jnp.zeros(10)) == 10
    assert _v.mask_weights(None, (10,), jnp.float32) is None


@given(st.integers(1, 1 << 40))
def test_bucket_size_rule(n):
    size = bucket_size(n)
    assert size >= n and size >= MIN_BUCKET
    assert bucket_size(size) == size  # a bucket is its own bucket
    if n > MIN_BUCKET:
        assert size <= n * 1.25  # at most 25% padding
        # 4 sizes per octave: the size is m * 2^k with m in 4..7
        k = size.bit_length() - 3
        assert size % (1 << k) == 0 and 4 <= size >> k <= 7
    assert bucket_size(n + 1) >= size  # monotone


@given(
    st.integers(1, 40),
    st.integers(0, 300),
    st.integers(0, 1),
    st.sampled_from([None, 0.0, -1.5]),
)
def test_core_pad_axis_keeps_the_data_and_pads_as_asked(n, extra, axis, fill):
    # core.pad_axis, the public padding of host arrays (issue "One library"): the first
    # n rows are the data, the rest repeat the last row (fill=None) or hold fill; a
    # JAX array on one device is padded in NumPy like a numpy one (no program)
    import bayescal.core as core

    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    if axis == 1:
        x = x.T
    size = x.shape[axis] + extra
    for arr in (x, jax.device_put(x)):
        assert core.paddable(arr)
        got = []
        assert compilations_during(
            lambda arr=arr, got=got: got.append(core.pad_axis(arr, size, axis=axis, fill=fill))
        ) == 0
        out = got[0]
        assert out is arr if extra == 0 else isinstance(out, np.ndarray)
        if extra:  # in a buffer the fused programs take without a copy (to_device)
            assert out.ctypes.data % 64 == 0 and out.dtype == x.dtype
        out = np.asarray(out)
        moved = np.moveaxis(out, axis, 0)
        assert moved.shape[0] == size
        np.testing.assert_array_equal(moved[: x.shape[axis]], np.moveaxis(x, axis, 0))
        tail = np.moveaxis(x, axis, 0)[-1] if fill is None else fill
        padding = moved[x.shape[axis] :]
        np.testing.assert_array_equal(padding, np.broadcast_to(tail, padding.shape))


def test_padded_inputs_reach_the_program_without_a_copy_and_results_never_alias_the_users_data():
    # The eager call pads host inputs into aligned buffers of its own, which XLA's CPU
    # client takes as they are (before: one more copy of each input per call, 0.5 ms
    # per 4 MB); a user's array is never taken that way, so changing it after the call
    # changes no result.
    from bayescal._src.bucketing import _MAY_ALIAS, pad_axis, to_device

    x = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    padded = pad_axis(x, bucket_size(1000))
    on_device = to_device(padded)
    if _MAY_ALIAS and jax.default_backend() == "cpu":
        assert on_device.unsafe_buffer_pointer() == padded.ctypes.data
    np.testing.assert_array_equal(np.asarray(on_device)[:1000], x)
    for n in (1000, 1024):  # padded; of a bucket's length (not padded)
        data = _inputs(n, seed=3)
        # float32: a dtype JAX keeps, which XLA could take without a copy
        y, loc, scale, p = (data[k].astype(np.float32) for k in ("y", "loc", "scale", "p"))
        labels = data["labels"].astype(np.int32)
        results = [
            R.pit_normal(y, loc, scale),
            R.crps_normal(y, loc, scale, reduction="none"),
            C.brier_score(labels, p, reduction="none"),
        ]
        kept = [np.array(r) for r in results]
        for a in (y, loc, p):
            a[:] = 0.5
        scale[:] = 9.0
        labels[:] = 1 - labels
        for got, want in zip(results, kept, strict=True):
            np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("fill", [None, "z"])
def test_core_pad_axis_pads_strings_and_objects_as_np_pad(fill):
    # non-numeric arrays (refused later by the public functions, naming the argument)
    # are padded by np.pad itself: an aligned numeric buffer cannot hold them
    import bayescal.core as core

    for x in (np.array(["a", "b"]), np.array([0.5, "b"], dtype=object)):
        got = core.pad_axis(x, 4, fill=fill)
        want = np.pad(x, (0, 2), mode="edge") if fill is None else np.pad(
            x, (0, 2), constant_values=fill
        )
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_core_pad_axis_refuses_a_shorter_size_naming_the_argument():
    import bayescal.core as core

    with pytest.raises(ValueError, match=r"size must be at least the length of axis 0 \(5\)"):
        core.pad_axis(np.zeros(5), 3, axis=0)
    assert not core.paddable([1.0, 2.0])  # a list is not an array: convert it first


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda c: c.pad_axis([1.0, 2.0], 3), TypeError, "x must be a numpy or JAX array"),
        (lambda c: c.pad_axis(np.float32(1.0), 3), TypeError, "with at least one axis"),
        (lambda c: c.pad_axis(np.zeros((2, 3)), 4, axis=2), ValueError, r"axis must lie in \[-2, 2\)"),
        (lambda c: c.pad_axis(np.zeros(3), 4, axis=0.0), TypeError, "axis must be an int"),
        (lambda c: c.pad_axis(np.zeros(3), 4.0), TypeError, "size must be an int"),
        (lambda c: c.bucket_size(10.5), TypeError, "n must be an int"),
        (lambda c: c.bucket_size(True), TypeError, "n must be an int"),
        (lambda c: c.bucket_size(-1), ValueError, "n must be at least 0"),
        (lambda c: c.bucket_size(10, minimum=-4), ValueError, "minimum must be at least 0"),
    ],
)
def test_core_bucket_helpers_name_the_bad_argument(call, error, message):
    import bayescal.core as core

    with pytest.raises(error, match=message):
        call(core)


def test_x64_mode_is_what_the_suite_runs():
    # the comparisons above use the dtype bayescal computes in
    assert R.calibration_error(_inputs(10)["u"]).dtype == (
        jnp.float64 if X64 else jnp.float32
    )
