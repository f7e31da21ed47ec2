"""Classes of bad input that were lost or silent (issue "Nothing lost, nothing silent").

Items 6, 8, 11 and 12: huge bin counts and sparse group ids (which allocated
gigabytes), 0-d scores, int64 labels beyond int32 (wrapped: ``2**32 + 1`` read as 1),
numpy masked arrays (the mask dropped) and subnormal scales (accepted by the host
check, rejected by the device check). Each raises eagerly with a message naming the
argument, and gives NaN under ``jit`` where the check is a value check.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal import classification as clf
from bayescal import regression as reg
from bayescal._src import validation as _v

X64 = bool(jax.config.read("jax_enable_x64"))
P = np.linspace(0.05, 0.95, 30)
PROBS = np.stack([1 - P, 0.5 * P, 0.5 * P], axis=1)
U = np.linspace(0.01, 0.99, 30)


# ----------------------------------------------------------------- item 6: sizes, 0-d
def test_bins_beyond_the_maximum_raise_naming_bins():
    # bins=10**9 was OOM-killed at 24 GB; now a ValueError before anything is allocated
    y = np.array([0, 1] * 15)
    for call in (
        lambda b: clf.expected_calibration_error(y, P, bins=b),
        lambda b: clf.reliability_curve(y, P, bins=b),
        lambda b: clf.top_label_calibration_error(y % 3, PROBS, bins=b),
        lambda b: clf.reliability_accumulator(bins=b),
        lambda b: reg.spread_skill_curve(U, np.zeros(30), np.ones(30), bins=b),
    ):
        with pytest.raises(ValueError, match=r"bins must be an int in \[1, 10000\]"):
            call(10**9)
    assert float(clf.expected_calibration_error(y, P, bins=_v.MAX_BINS)) >= 0


def test_num_levels_beyond_the_maximum_raise_naming_num_levels():
    # num_levels had no upper bound (the curve's arrays have one entry per level)
    for call in (
        lambda m: reg.calibration_curve(U, num_levels=m),
        lambda m: reg.calibration_error(U, num_levels=m),
        lambda m: reg.miscalibration_area(U, num_levels=m),
        lambda m: reg.calibration_accumulator(num_levels=m),
        lambda m: reg.group_calibration_error(U, np.arange(30) % 2, num_levels=m),
    ):
        with pytest.raises(
            ValueError, match=r"num_levels must be an int in \[2, 1000000\]"
        ):
            call(10**9)
        with pytest.raises(ValueError, match=r"num_levels must be an int >= 2"):
            call(1)
    area = reg.miscalibration_area(U, num_levels=_v.MAX_LEVELS)  # the largest allowed
    assert abs(float(area) - float(reg.miscalibration_area(U))) < 1e-5


@pytest.mark.parametrize("fn", [reg.crps_normal, reg.nll_normal])
def test_closed_form_scores_of_one_0d_observation(fn):
    # 0-d inputs raised IndexError; like pit_normal, a scalar is one observation
    for reduction in ("mean", "sum", "none"):
        got = fn(np.float32(0.3), 0.1, 2.0, reduction=reduction)
        one = fn(np.array([0.3], np.float32), 0.1, 2.0, reduction="none")
        assert np.shape(got) == ()
        np.testing.assert_allclose(float(got), float(one[0]), rtol=1e-6)
    with pytest.raises(ValueError, match="weights need 1-D y_true"):
        fn(0.3, 0.1, 2.0, weights=np.ones(1))


def test_interval_score_of_one_0d_observation():
    assert float(reg.interval_score(2.0, -1.0, 1.0, alpha=0.1)) == pytest.approx(22.0)


@pytest.mark.parametrize("fn", [reg.group_calibration_error, reg.group_calibration_curve])
def test_sparse_group_ids_raise_naming_groups(fn):
    # a group id of 2**32 made the kernel allocate 1.7 TB ([2**32 + 1, num_levels])
    groups = np.array([0, 2**32] * 15)
    with pytest.raises(ValueError, match="groups holds ids up to 4294967296.*np.unique"):
        fn(U, groups, num_levels=5)
    with pytest.raises(ValueError, match="num_groups must be at most"):
        fn(U, np.array([0, 1] * 15), num_groups=2**32 + 1, num_levels=5)
    # relabelled as the message says, the same data works
    _, dense = np.unique(groups, return_inverse=True)
    assert (
        np.asarray(jax.tree_util.tree_leaves(fn(U, dense, num_levels=5))[0]).shape[0] == 2
    )


def test_bool_groups_are_two_groups():
    # bool ids were read as one group: "groups must hold class indices in [0, 0]"
    mask = np.arange(30) % 3 == 0
    got = reg.group_calibration_error(U, mask, num_levels=5)
    ref = reg.group_calibration_error(U, mask.astype(np.int64), num_levels=5)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    assert got.shape == (2,)


def test_negative_group_ids_message_names_group_ids():
    with pytest.raises(
        ValueError, match=r"groups must hold class indices in \[0, 1\] \(one group"
    ):
        reg.group_calibration_error(U, np.array([-1, 1] * 15), num_levels=5)


# ------------------------------------------------- item 8: int64 labels beyond int32
BIG = 2**32 + 1  # wrapped to 1 by an int32 conversion
BINARY = {
    "expected_calibration_error": lambda y: clf.expected_calibration_error(y, P),
    "brier_score": lambda y: clf.brier_score(y, P),
    "log_loss": lambda y: clf.log_loss(y, P),
    "reliability_curve": lambda y: clf.reliability_curve(y, P),
    "brier_decomposition": lambda y: clf.brier_decomposition(y, P),
    "fit_isotonic": lambda y: clf.fit_isotonic(y, P),
    "fit_platt": lambda y: clf.fit_platt(y, P),
    "fit_histogram_binning": lambda y: clf.fit_histogram_binning(y, P),
    "fit_scaling_binning": lambda y: clf.fit_scaling_binning(y, P, bins=3),
    "fit_bbq": lambda y: clf.fit_bbq(y, P),
    "fit_spline": lambda y: clf.fit_spline(y, P, knots=4, folds=2),
}
MULTICLASS = {
    "top_label_calibration_error": lambda y: clf.top_label_calibration_error(y, PROBS),
    "marginal_calibration_error": lambda y: clf.marginal_calibration_error(y, PROBS),
    "fit_one_vs_rest": lambda y: clf.fit_one_vs_rest(y, PROBS),
    "fit_one_vs_rest_platt": lambda y: clf.fit_one_vs_rest(y, PROBS, method="platt"),
    "fit_temperature": lambda y: clf.fit_temperature(y, np.log(PROBS)),
    "group_calibration_error": lambda y: reg.group_calibration_error(U, y, num_groups=3),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_int64_binary_labels_beyond_int32_raise(name):
    y = np.array([0, BIG] * 15, dtype=np.int64)
    with pytest.raises(ValueError, match="y_true must hold binary labels 0 and 1"):
        BINARY[name](y)


@pytest.mark.parametrize("name", sorted(MULTICLASS))
def test_int64_class_labels_beyond_int32_raise(name):
    y = np.array([0, 1, 2**32 + 2] * 10, dtype=np.int64)  # 2**32 + 2 wrapped to class 2
    arg = "groups" if name.startswith("group") else "y_true"
    with pytest.raises(
        ValueError, match=rf"{arg} must hold class indices in \[0, 2\].*4294967298"
    ):
        MULTICLASS[name](y)
    with pytest.raises(ValueError, match=rf"{arg} must hold class indices"):
        MULTICLASS[name](y.astype(np.uint64))


def test_uint32_class_labels_beyond_int32_raise():
    y = np.array([0, 1, 2**31 + 2] * 10, dtype=np.uint32)  # int32 made it negative
    with pytest.raises(
        ValueError, match=r"y_true must hold class indices in \[0, 2\].*2147483650"
    ):
        clf.top_label_calibration_error(y, PROBS)


def test_int64_labels_beyond_int32_give_nan_traced_or_raise_eagerly():
    y_np = np.array([0, 1, 2**32 + 2] * 10, dtype=np.int64)
    if not X64:
        # traced int64 arrays exist only under x64 (JAX wraps them to int32 before
        # bayescal sees them); the NumPy labels a float32 user passes raise
        for fn in (clf.top_label_calibration_error, clf.marginal_calibration_error):
            with pytest.raises(ValueError, match="y_true"):
                fn(y_np, PROBS)
        return
    y = jnp.asarray(y_np)
    for fn in (clf.top_label_calibration_error, clf.marginal_calibration_error):
        assert np.isnan(float(jax.jit(fn)(y, PROBS)))
    assert np.isnan(
        np.asarray(jax.jit(lambda g: reg.group_calibration_error(U, g, num_groups=3))(y))
    ).all()
    yb = jnp.asarray(np.array([0, BIG] * 15, dtype=np.int64))
    assert np.isnan(float(jax.jit(clf.expected_calibration_error)(yb, P)))
    assert np.isnan(float(jax.jit(clf.brier_score)(yb, P)))


def test_int64_labels_within_range_still_work():
    y = np.array([0, 1] * 15, dtype=np.int64)
    ref = float(clf.expected_calibration_error(y.astype(np.float32), P))
    assert float(clf.expected_calibration_error(y, P)) == pytest.approx(ref)
    yc = np.array([0, 1, 2] * 10, dtype=np.int64)
    ref = float(clf.top_label_calibration_error(yc.astype(np.int32), PROBS))
    assert float(clf.top_label_calibration_error(yc, PROBS)) == pytest.approx(ref)


# ------------------------------------------------------------ item 11: masked arrays
def _masked(x):
    return np.ma.masked_array(x, mask=np.arange(np.size(x)) % 7 == 3)


MASKED = {
    "calibration_error": (lambda a: reg.calibration_error(a), "pit", lambda: _masked(U)),
    "calibration_curve": (lambda a: reg.calibration_curve(a), "pit", lambda: _masked(U)),
    "ece_y": (
        lambda a: clf.expected_calibration_error(a, P),
        "y_true",
        lambda: _masked(np.array([0, 1] * 15)),
    ),
    "ece_p": (
        lambda a: clf.expected_calibration_error(np.array([0, 1] * 15), y_prob=a),
        "y_prob",
        lambda: _masked(P),
    ),
    "crps_scale": (
        lambda a: reg.crps_normal(U, 0.0, scale=a),
        "scale",
        lambda: _masked(np.ones(30)),
    ),
    "top_label_y": (
        lambda a: clf.top_label_calibration_error(a, PROBS),
        "y_true",
        lambda: _masked(np.array([0, 1, 2] * 10)),
    ),
    "fit_platt": (
        lambda a: clf.fit_platt(np.array([0, 1] * 15), a),
        "y_score",
        lambda: _masked(P),
    ),
    "fit_one_vs_rest": (
        lambda a: clf.fit_one_vs_rest(a, PROBS, method="platt"),
        "y_true",
        lambda: _masked(np.array([0, 1, 2] * 10)),
    ),
    "groups": (
        lambda a: reg.group_calibration_error(U, a),
        "groups",
        lambda: _masked(np.array([0, 1] * 15)),
    ),
    "accumulator": (
        lambda a: reg.calibration_accumulator(10).update(
            reg.calibration_accumulator(10).init(), a
        ),
        "pit",
        lambda: _masked(U),
    ),
    "calibrator": (
        lambda a: clf.fit_platt(np.array([0, 1] * 15), P)(a),
        "y_score",
        lambda: _masked(P),
    ),
}


def _numpyro_model(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    a = numpyro.sample("a", dist.Normal(0, 1))
    numpyro.sample("obs", dist.Normal(a * x, 1), obs=y)


def _rb(samples, x):
    from bayescal.numpyro import rao_blackwell_pit

    return rao_blackwell_pit(_numpyro_model, samples, np.arange(5.0), x)


def _numpyro_pit(y, draws):
    from bayescal.numpyro import pit

    return pit(y, {"obs": draws})


# the NumPyro adapter converted its inputs with its own np.asarray (mask dropped)
MASKED |= {
    "numpyro_pit_y": (
        lambda a: _numpyro_pit(a, np.zeros((4, 5))),
        "y_true",
        lambda: _masked(np.arange(5.0)),
    ),
    "numpyro_pit_draws": (
        lambda a: _numpyro_pit(np.arange(5.0), a),
        r"predictive\['obs'\]",
        lambda: _masked(np.zeros((4, 5))),
    ),
    "numpyro_posterior": (
        lambda a: _rb({"a": a}, np.arange(5.0)),
        r"posterior_samples\['a'\]",
        lambda: _masked(np.ones(4)),
    ),
    "numpyro_model_argument": (
        lambda a: _rb({"a": np.ones(4)}, a),
        "a model argument",
        lambda: _masked(np.arange(5.0)),
    ),
}


def test_numpyro_integer_posterior_draws_beyond_int32_raise():
    # JAX without x64 wraps them (2**32 + 1 -> 1): refused before any conversion
    draws = np.ones(4, np.int64) + 2**32
    if X64:
        assert np.isfinite(np.asarray(_rb({"a": draws}, np.arange(5.0)))).all()
        return
    with pytest.raises(ValueError, match=r"posterior_samples\['a'\] holds integers beyond"):
        _rb({"a": draws}, np.arange(5.0))


def test_conformal_calibrators_reject_non_finite_predictions():
    # the calibrators' calls checked shapes only: NaN bounds came back as NaN intervals
    rng = np.random.default_rng(0)
    y = rng.normal(size=100)
    cqr = reg.fit_conformalized_quantile(y, y - 1.0, y + rng.uniform(0.5, 1.5, 100))
    split = reg.fit_conformal(y, y + rng.normal(scale=0.3, size=100))
    with pytest.raises(ValueError, match="lower contains 1 NaN"):
        cqr(np.array([0.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="upper contains 0 NaN and 1 infinite"):
        cqr(np.array([0.0, 1.0]), np.array([np.inf, 2.0]))
    with pytest.raises(ValueError, match="loc contains 1 NaN"):
        split(np.array([0.0, np.nan]))
    # under jit the value check folds into the result: all NaN (docs/bad-input.md)
    lower, upper = jax.jit(cqr.__call__)(jnp.array([0.0, jnp.nan]), jnp.array([1.0, 2.0]))
    assert np.isnan(np.asarray(lower)).all() and np.isnan(np.asarray(upper)).all()
    lower, upper = cqr(np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    np.testing.assert_allclose(
        np.asarray(upper) - np.asarray(lower),
        np.array([1.0, 1.0]) + 2 * float(cqr.quantile),
        rtol=1e-6,
    )


@pytest.mark.parametrize("case", sorted(MASKED))
def test_masked_arrays_are_refused_naming_the_argument(case):
    # calibration_error of a masked array gave 0.151 (the mask dropped), 0.359 on
    # .compressed(): now a TypeError that names the argument and the two ways out
    call, name, make = MASKED[case]
    with pytest.raises(
        TypeError, match=rf"{name} is a numpy masked array.*compressed\(\).*filled"
    ):
        call(make())


def test_masked_array_in_bootstrap_is_refused():
    from bayescal.core import bootstrap

    with pytest.raises(TypeError, match=r"arrays\[0\] is a numpy masked array"):
        bootstrap(0, jnp.mean, _masked(np.arange(30)), num_samples=4)
    with pytest.raises(TypeError, match=r"arrays\[1\] is a numpy masked array"):
        bootstrap(0, lambda a, b: jnp.mean(a + b), U, _masked(U), num_samples=4)


# ------------------------------------------------------------- item 12: subnormal scales
SUBNORMAL = float(np.finfo(np.float32).tiny) / 8 if not X64 else 1e-310


@pytest.mark.parametrize(
    "call",
    [
        lambda s: reg.crps_normal([0.1, 0.2], [0.0, 0.0], s),
        lambda s: reg.pit_normal([0.1, 0.2], [0.0, 0.0], s),
        lambda s: reg.nll_normal([0.1, 0.2], [0.0, 0.0], s),
    ],
)
def test_subnormal_scales_are_rejected_on_both_paths(call, monkeypatch):
    # crps_normal returned NaN and pit_normal 1.0 for a subnormal scale (the host check
    # let it pass; XLA's CPU backend then flushed it to 0); with 2^21 values the device
    # check raised. One rule on both paths: at least the smallest normal float.
    scale = np.array([SUBNORMAL, 1.0])
    with pytest.raises(
        ValueError, match="scale must be strictly positive.*smallest normal.*subnormal"
    ):
        call(scale)
    monkeypatch.setattr(_v, "HOST_CHECK_MAX_SIZE", 0)  # the compiled pass decides
    with pytest.raises(
        ValueError, match="scale must be strictly positive.*smallest normal"
    ):
        call(scale)
    monkeypatch.undo()
    assert np.isnan(np.asarray(jax.jit(call)(jnp.asarray(scale)))).all()
    tiny = float(jnp.finfo(jnp.zeros(()).dtype).tiny)
    call(np.array([tiny, 1.0]))  # the smallest normal float is accepted


def test_host_and_device_positive_checks_agree_on_subnormals():
    # the NumPy checks (of host data: numpy arrays on every backend, CPU JAX arrays off
    # the rehearsal) and the compiled checks both reject a subnormal scale
    dtype = jnp.zeros(()).dtype
    h = np.array([SUBNORMAL, 1.0], dtype=dtype)
    x = jnp.asarray(h)
    host_check = _v._Check("positive", "scale", (h,), (), "values")
    assert not _v._host_flags([host_check]).all()
    check = _v._Check("positive", "scale", (x,), (), "values")
    assert not np.asarray(_v._flags([check])).all()


def test_bootstrap_int64_data_beyond_int32_raise_or_are_kept():
    from bayescal.core import bootstrap

    if X64:  # int64 is kept: the estimate is the data's own mean
        res = bootstrap(0, jnp.mean, np.array([1, 2**40] * 5), num_samples=4)
        assert float(res.estimate) == np.mean([1, 2**40])
        return
    # jnp.asarray wrapped 2**40 to 0: the mean of the replicates was silently wrong
    with pytest.raises(ValueError, match=r"arrays\[0\] holds integers beyond int32"):
        bootstrap(0, jnp.mean, np.array([1, 2**40] * 5), num_samples=4)


# ------------------------------------------- issue "Nothing lost, round 2", item 6
def test_select_recalibrator_refuses_a_subnormal_scale_as_crps_normal_does():
    # It returned a winner with a sigma factor of 4.6e37 for scales of 1e-40.
    rng = np.random.default_rng(0)
    y = rng.normal(size=50)
    scale = np.full(50, SUBNORMAL)
    with pytest.raises(
        ValueError, match="scale must be strictly positive.*smallest normal"
    ):
        reg.crps_normal(y, np.zeros(50), scale)
    with pytest.raises(
        ValueError, match="scale must be strictly positive.*smallest normal"
    ):
        reg.select_recalibrator(y, np.zeros(50), scale, key=0)


@pytest.mark.parametrize("host_path", [True, False], ids=["host", "kernel"])
@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_hosmer_lemeshow_with_fewer_observations_than_groups_raises(n, host_path):
    # At N = 1, 2, 5 with 10 groups it returned p-values of 0.8-0.99 silently.
    from bayescal.core import host_path as use_host

    p = np.linspace(0.1, 0.9, n)
    y = (np.arange(n) % 2).astype(float)
    with (
        use_host(host_path),
        pytest.raises(
            ValueError, match="y_prob must hold at least bins=10 observations"
        ),
    ):
        clf.hosmer_lemeshow(y, p)
    assert np.isnan(np.asarray(jax.jit(clf.hosmer_lemeshow)(y, p).p_value))
    ten = np.linspace(0.1, 0.9, 10)
    with use_host(host_path):
        assert np.isfinite(float(clf.hosmer_lemeshow(np.arange(10) % 2, ten).p_value))


@pytest.mark.parametrize("host_path", [True, False], ids=["host", "kernel"])
@pytest.mark.parametrize("value", [0.5, 0.0, 1.0])
def test_spiegelhalter_z_on_probabilities_without_variance_raises(value, host_path):
    # With every p = 0.5 the test's variance is 0: it returned NaN without a word.
    from bayescal.core import host_path as use_host

    y = (np.arange(20) % 2).astype(float)
    p = np.full(20, value)
    with (
        use_host(host_path),
        pytest.raises(ValueError, match="y_prob must not all be 0, 1/2 or 1"),
    ):
        clf.spiegelhalter_z(y, p)
    assert np.isnan(np.asarray(jax.jit(clf.spiegelhalter_z)(y, p).statistic))
    p[0] = 0.3  # one probability with variance: defined
    with use_host(host_path):
        assert np.isfinite(float(clf.spiegelhalter_z(y, p).statistic))


@pytest.mark.parametrize("host_path", [True, False], ids=["host", "kernel"])
def test_an_infinite_probability_is_counted_in_the_message(host_path):
    # docs/bad-input.md promises the counts of NaN and inf; one +inf probability got the
    # "[0, 1]" message with the range of the finite values only.
    from bayescal.core import host_path as use_host

    p = np.linspace(0.05, 0.95, 20)
    p[3] = np.inf
    y = (np.arange(20) % 2).astype(float)
    with (
        use_host(host_path),
        pytest.raises(ValueError, match="y_prob contains 0 NaN and 1 infinite values"),
    ):
        clf.expected_calibration_error(y, p)
