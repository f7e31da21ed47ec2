"""Shape bucketing of the uncertainty functions: bands, bootstraps, null tests, core.

As in tests/test_bucketing.py: an eager call on host-resident inputs pads the
observation axis to ``bucketing.bucket_size(n)`` and runs one compiled program per
bucket, so a new ``n`` in a bucket already used compiles nothing, and the result equals
the unpadded computation (``jax.jit`` of the same call, traced at the exact length).
For the randomized functions the same key gives the same result padded and unpadded:
the per-observation draws have the bucket's length and only their first ``n`` entries
are used, which with JAX's counter-based (partitionable) threefry are exactly the
draws of length ``n``. Curves (levels, bins, sorted forecasts) are padded like
observations: curves of any length in one bucket share one program.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal import classification as C
from bayescal import core
from bayescal import regression as R
from bayescal._src.bucketing import bucket_floor, bucket_size, random_prefix_stable
from bayescal.core import CalibrationCurve
from tests.conftest import compilations_during
from tests.test_bucketing import _assert_same, _inputs

KEY = jax.random.key(7)
B = 64  # replicates: enough to exercise the loops, cheap to compile and run


def _data(n, seed=0):
    """tests.test_bucketing's inputs, plus sorted levels and whole-number counts."""
    d = _inputs(n, seed)
    d["x"] = np.sort(d["u"])  # a curve's expected values (sorted)
    d["counts"] = (d["labels"] * 7 + (d["scale"] > 1)).astype(np.int64)  # some 0
    return d


# name: (function, positional inputs, keyword options); "module.function[variant]"
CASES = {
    # regression
    "regression.pit_ecdf_band": (
        lambda u: R.pit_ecdf_band(KEY, u.shape[0], num_samples=200),
        ("u",),
        {},
    ),
    "regression.pit_ecdf_band[few points]": (
        lambda u: R.pit_ecdf_band(KEY, u.shape[0], num_points=20, num_samples=200),
        ("u",),
        {},
    ),
    "regression.bootstrap_calibration_curve": (
        functools.partial(R.bootstrap_calibration_curve, KEY),
        ("u",),
        {"num_samples": B},
    ),
    "regression.bootstrap_calibration_curve[bayesian]": (
        functools.partial(R.bootstrap_calibration_curve, KEY),
        ("u",),
        {"num_samples": B, "method": "bayesian", "kind": "interval"},
    ),
    "regression.bootstrap_calibration_curve[int seed]": (
        functools.partial(R.bootstrap_calibration_curve, 3),
        ("u",),
        {"num_samples": B, "num_levels": 10},
    ),
    "regression.bootstrap_calibration_error": (
        functools.partial(R.bootstrap_calibration_error, KEY),
        ("u",),
        {"num_samples": B},
    ),
    # n = 1000 > 40 * 20 levels: replicates drawn per cell (multinomial)
    "regression.bootstrap_calibration_error[per cell]": (
        functools.partial(R.bootstrap_calibration_error, KEY),
        ("u",),
        {"num_samples": B, "num_levels": 20, "norm": "max"},
    ),
    "regression.bootstrap_calibration_error[per cell, bayesian]": (
        functools.partial(R.bootstrap_calibration_error, KEY),
        ("u",),
        {"num_samples": B, "num_levels": 20, "method": "bayesian"},
    ),
    # 40 * 25 levels = 1000 lies inside the bucket 1024 (897..1024): decided at run time
    "regression.bootstrap_calibration_error[across]": (
        functools.partial(R.bootstrap_calibration_error, KEY),
        ("u",),
        {"num_samples": B, "num_levels": 25, "norm": "l2"},
    ),
    "regression.calibration_error_test": (
        functools.partial(R.calibration_error_test, KEY),
        ("u",),
        {"num_samples": B},
    ),
    "regression.calibration_error_test[across]": (
        functools.partial(R.calibration_error_test, KEY),
        ("u",),
        {"num_samples": B, "num_levels": 25, "kind": "interval"},
    ),
    "regression.miscalibration_area_test": (
        functools.partial(R.miscalibration_area_test, KEY),
        ("u",),
        {"num_samples": B},
    ),
    "regression.miscalibration_area_test[grid]": (
        functools.partial(R.miscalibration_area_test, KEY),
        ("u",),
        {"num_samples": B, "num_levels": 20},
    ),
    "regression.kernel_calibration_test[unbiased]": (
        functools.partial(R.kernel_calibration_test, estimator="unbiased", key=KEY),
        ("y", "loc", "scale"),
        {"num_samples": 8},
    ),
    # classification
    "classification.bootstrap_reliability_curve": (
        functools.partial(C.bootstrap_reliability_curve, KEY),
        ("labels", "p"),
        {"num_samples": B},
    ),
    "classification.bootstrap_reliability_curve[bayesian, quantile]": (
        functools.partial(C.bootstrap_reliability_curve, KEY),
        ("labels", "p"),
        {"num_samples": B, "method": "bayesian", "strategy": "quantile", "bins": 5},
    ),
    "classification.corp_curve": (C.corp_curve, ("labels", "p"), {}),
    "classification.corp_curve[band]": (
        C.corp_curve,
        ("labels", "p"),
        {"key": KEY, "num_samples": B},
    ),
    "classification.corp_curve[ties, band]": (
        lambda y, p: C.corp_curve(y, np.round(p, 1), key=KEY, num_samples=B),
        ("labels", "p"),
        {},
    ),
    # the bins of a curve are its points: curves of any number of bins in one bucket
    "classification.acceptance_intervals": (
        # lower, upper: the other fields are the curve given, passed through unchanged
        lambda x, c: C.acceptance_intervals(CalibrationCurve(x, x, c), level=0.9)[3:5],
        ("x", "counts"),
        {},
    ),
    # core
    "core.isotonic_regression": (core.isotonic_regression, ("y",), {}),
    "core.isotonic_regression[weighted, decreasing]": (
        lambda y, w: core.isotonic_regression(y, weights=w + 0.1, increasing=False),
        ("y", "w"),
        {},
    ),
    "core.isotonic_regression[batch]": (core.isotonic_regression, ("draws",), {}),
    "core.curve_error": (
        lambda x, u, c: core.curve_error(CalibrationCurve(x, u, c)),
        ("x", "u", "counts"),
        {},
    ),
    "core.curve_error[max]": (
        lambda x, u, c: core.curve_error(CalibrationCurve(x, u, c), norm="max"),
        ("x", "u", "counts"),
        {},
    ),
    "core.curve_area": (
        lambda x, u, c: core.curve_area(CalibrationCurve(x, u, c)),
        ("x", "u", "counts"),
        {},
    ),
}

#: The public functions covered by CASES (each by at least one case).
COVERS = {
    "regression.pit_ecdf_band",
    "regression.bootstrap_calibration_curve",
    "regression.bootstrap_calibration_error",
    "regression.calibration_error_test",
    "regression.miscalibration_area_test",
    "regression.kernel_calibration_test",
    "classification.bootstrap_reliability_curve",
    "classification.corp_curve",
    "classification.acceptance_intervals",
    "core.isotonic_regression",
    "core.curve_error",
    "core.curve_area",
}

#: The functions of the issue's list that are not bucketed, and why.
EXEMPT = {
    "regression.pit_null_test": (
        "calls the user's statistic on arrays of exactly n PIT values (the observed ones "
        "and the simulated ones): padding would change any statistic that is not "
        "written for a mask; one compiled program per n and statistic"
    ),
    "core.bootstrap": (
        "calls the user's metric on the resampled arrays: a plain replicate must hold "
        "exactly n observations, and zero-weighted padding (bayesian) is only exact for "
        "a metric that ignores zero weights entirely (quantile bins, a division by the "
        "array length would see the padding); one compiled program per n and metric"
    ),
    "core.null_pvalue": (
        "no observation axis: observed is a statistic's value and the data are made by "
        "the user's simulate(key); one compiled program per statistic and simulate"
    ),
}

# The cases whose choice between per-observation and per-cell draws falls inside the
# bucket 1024: compared with the unpadded call on both sides of the threshold too.
ACROSS = sorted(name for name in CASES if "[across]" in name)


def _call(name, data):
    fn, keys, kw = CASES[name]
    return fn(*(data[k] for k in keys), **kw)


def _unpadded(name, data):
    """The same call under jax.jit: traced at the exact length, nothing padded."""
    fn, keys, kw = CASES[name]
    return jax.jit(functools.partial(fn, **kw))(*(data[k] for k in keys))


def _covered(name):
    return name.split("[")[0]


def test_cases_cover_exactly_the_listed_functions():
    assert {_covered(name) for name in CASES} == COVERS
    assert not COVERS & set(EXEMPT)
    modules = {"regression": R, "classification": C, "core": core}
    for name in COVERS | set(EXEMPT):
        module, function = name.split(".")
        assert function in modules[module].__all__, name
        assert callable(getattr(modules[module], function))


# The cases that draw per observation with a key: padded only where jax.random's draws
# are prefix-stable (bucketing.random_prefix_stable; JAX >= 0.5's default).
RANDOMIZED = {
    n for n in CASES if "bootstrap" in n or "_test" in n or "[band]" in n or "band]" in n
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_new_length_in_a_used_bucket_compiles_nothing(name):
    if name in RANDOMIZED:  # keyed calls are padded with prefix-stable draws only
        assert random_prefix_stable()  # JAX >= 0.5 (the version tiers skip this file)
    # 1000 and 1013 share the bucket 1024; 1024 itself fills it exactly.
    assert bucket_size(1000) == bucket_size(1013) == bucket_size(1024) == 1024
    jax.block_until_ready(_call(name, _data(1000)))
    for n in (1013, 1024):
        data = _data(n)
        assert (
            compilations_during(lambda d=data: jax.block_until_ready(_call(name, d))) == 0
        ), n


@pytest.mark.parametrize("name", sorted(CASES))
def test_bucketed_equals_unpadded(name):
    for n in (7, 1000):
        data = _data(n, seed=1)
        _assert_same(_call(name, data), _unpadded(name, data))


@pytest.mark.parametrize("name", ACROSS)
def test_draws_decided_at_run_time_equal_unpadded_on_both_sides(name):
    # 1000 <= 40 * 25 levels: per observation; 1013 > 1000: per level cell. Both run in
    # the program of the bucket 1024 (bucket_floor 897 <= 1000 < 1024).
    assert bucket_floor(1024) <= 1000 < 1013 <= 1024
    for n in (1000, 1013):
        data = _data(n, seed=2)
        _assert_same(_call(name, data), _unpadded(name, data))


@pytest.mark.parametrize(
    "name",
    [
        "regression.bootstrap_calibration_curve",
        "regression.calibration_error_test",
        "classification.bootstrap_reliability_curve",
        "classification.corp_curve[band]",
        "core.isotonic_regression",
    ],
)
def test_an_unpadded_trace_of_the_bucket_length_is_not_reused(name):
    # jit at exactly the bucket's length first (its kernels' traces are cached by
    # shape), then an eager call padded to that length: the padding must still be
    # left out (the mask or n is an argument of the kernels, never read inside them).
    _unpadded(name, _data(1024, seed=3))
    part = _data(900, seed=3)
    assert bucket_size(900) == 1024
    _assert_same(_call(name, part), _unpadded(name, part))


def test_same_key_same_draws_whatever_the_bucket():
    # The per-observation draws of the bootstrap are those of core.bootstrap_indices
    # (the engine's) for the same key, padded or not.
    from bayescal._src.resampling import bootstrap_indices

    u = _data(300, seed=4)["u"]
    assert bucket_size(300) == 320
    fast = R.bootstrap_calibration_error(KEY, u, num_samples=B, num_levels=10)
    idx = np.asarray(bootstrap_indices(KEY, 300, B))
    levels = np.linspace(0, 1, 10)
    curves = (u[idx][:, :, None] <= levels).mean(axis=1)
    ref = np.abs(curves - levels).mean(axis=1)
    np.testing.assert_allclose(np.asarray(fast.samples), ref, rtol=1e-5, atol=1e-6)


def test_pit_ecdf_band_traced_key_equals_eager():
    eager = R.pit_ecdf_band(KEY, 300, num_points=30, num_samples=200)
    jitted = jax.jit(lambda k: R.pit_ecdf_band(k, 300, num_points=30, num_samples=200))(KEY)
    _assert_same(eager, jitted)
    keys = jax.random.split(KEY, 2)
    batched = jax.vmap(lambda k: R.pit_ecdf_band(k, 300, num_points=30, num_samples=200))(
        keys
    )
    _assert_same(
        jax.tree_util.tree_map(lambda a: a[1], batched),
        R.pit_ecdf_band(keys[1], 300, num_points=30, num_samples=200),
    )


def test_pit_ecdf_band_compiles_nothing_for_a_new_n():
    jax.block_until_ready(R.pit_ecdf_band(0, 10_000, num_samples=100))
    for n in (10_007, 3, 500, 123_456):  # any n: nothing has the length n
        assert (
            compilations_during(
                lambda n=n: jax.block_until_ready(R.pit_ecdf_band(0, n, num_samples=100))
            )
            == 0
        ), n


def test_invalid_values_still_raise_with_the_unpadded_message():
    data = _data(1000)
    u = data["u"].copy()
    u[-1] = 1.5  # the value the padding repeats
    with pytest.raises(ValueError, match="pit must lie in"):
        R.bootstrap_calibration_curve(KEY, u, num_samples=B)
    with pytest.raises(ValueError, match="pit must lie in"):
        R.calibration_error_test(KEY, u, num_samples=B)
    p = data["p"].copy()
    p[3] = np.nan
    with pytest.raises(ValueError, match="y_prob contains 1 NaN"):
        C.corp_curve(data["labels"], p, key=0)
    with pytest.raises(ValueError, match="y_true must hold binary labels"):
        C.bootstrap_reliability_curve(KEY, data["labels"] + 1, data["p"], num_samples=B)
    y = data["y"].copy()
    y[5] = np.inf
    with pytest.raises(ValueError, match="y contains 0 NaN and 1 infinite"):
        core.isotonic_regression(y)
    with pytest.raises(ValueError, match="weights must be strictly positive"):
        core.isotonic_regression(data["y"], weights=-data["w"])
    with pytest.raises(ValueError, match="norm must be one of"):
        core.curve_error(CalibrationCurve(data["x"], data["u"], data["counts"]), norm="l3")
    with pytest.raises(ValueError, match="count must hold nonnegative whole numbers"):
        C.acceptance_intervals(CalibrationCurve(data["x"], data["x"], data["u"]))


def test_per_observation_results_are_sliced_on_the_host():
    data = _data(1000)
    assert core.isotonic_regression(data["draws"]).shape == (20, 1000)
    curve = C.corp_curve(data["labels"], data["p"], key=KEY, num_samples=B)
    assert {a.shape for a in curve[:5]} == {(1000,)}
    band = C.acceptance_intervals(CalibrationCurve(data["x"], data["x"], data["counts"]))
    assert band.lower.shape == band.upper.shape == (1000,)


def test_the_draws_rely_on_partitionable_threefry():
    # The first n of `size` draws equal the n draws only with counter-based threefry
    # (JAX's default since 0.5); the padded and unpadded calls agree because of it, and
    # without it keyed calls are not padded (test_bucketed_equals_unpadded holds both).
    assert random_prefix_stable() == bool(jax.config.jax_threefry_partitionable)
    if not random_prefix_stable():
        return
    k = jax.random.key(1)
    n = jnp.int32(100)
    np.testing.assert_array_equal(
        jax.random.randint(k, (256,), 0, n)[:100], jax.random.randint(k, (100,), 0, 100)
    )


def test_a_curve_inside_another_bucketed_call_is_taken_as_it_is():
    # The ECE's kernel calls core.curve_error on its bins inside the bucketed ECE: the
    # curve's points are not the ECE's observations, so the ECE's bucket must not
    # reach them, whatever their number (here as many as the bucket's length).
    from bayescal._src import validation as _v

    @_v.validated(fuse=True, bucket={"u": -1})
    def errors(u, x):
        curve = CalibrationCurve(x, x[::-1], jnp.ones_like(x))
        return core.curve_error(curve), core.curve_area(curve), jnp.nansum(_v.masked_nan(u))

    u = _data(1000)["u"]
    for points in (15, bucket_size(1000)):
        x = np.linspace(0, 1, points)
        _assert_same(errors(u, x), jax.jit(errors)(u, x))
