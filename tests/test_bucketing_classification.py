"""Shape bucketing of the classification functions (issue "First result fast").

The same checks as tests/test_bucketing.py for the multiclass errors, the CORP and
smooth calibration errors, histogram binning, the one-vs-rest fits, temperature
scaling and cross-calibration: after a first call at n = 1000, calls at n = 1013 and
1024 (the same bucket) compile nothing, and the padded eager result equals the
unpadded computation (``jax.jit`` of the same call, which traces the exact length).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from bayescal import classification as C
from bayescal._src import host
from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size
from bayescal.classification import _smooth
from tests.conftest import X64, compilations_during
from tests.test_bucketing import _assert_same, _inputs

DT = np.float64 if X64 else np.float32


def _data(n, seed=0):
    """The binary inputs of tests/test_bucketing.py plus multiclass ones (3 classes)."""
    d = _inputs(n, seed)
    rng = np.random.default_rng(seed + n + 17)
    logits = 2 * rng.normal(size=(n, 3))
    truth = scipy.special.softmax(logits / 2, axis=1).cumsum(axis=1)
    cls = (rng.uniform(size=(n, 1)) > truth).sum(axis=1).clip(0, 2)
    cls[:3] = [0, 1, 2]  # every class occurs
    d.update(
        cls=cls,
        logits3=logits.astype(DT),
        probs3=scipy.special.softmax(logits, axis=1).astype(DT),
        X=rng.normal(size=(n, 2)),
        # smooth ECE at a bandwidth the search needs small grids for ...
        p_smooth=d["p"],
        # ... and at one where it needs larger ones (calibrated: smECE ~ 1/sqrt(n))
        labels_calibrated=(rng.uniform(size=n) < d["p"]).astype(np.int64),
    )
    return d


@functools.cache
def _histogram():
    x = np.linspace(0.0, 1.0, 300)
    return C.fit_histogram_binning((np.sin(40 * x) > 0.5 - x).astype(int), x, bins=7)


@functools.cache
def _bbq():
    x = np.linspace(0.0, 1.0, 300)
    return C.fit_bbq((np.sin(40 * x) > 0.5 - x).astype(int), x)


@functools.cache
def _scaling_binning():
    x = np.linspace(0.01, 0.99, 300)
    y = (np.sin(40 * x) > 0.5 - x).astype(int)
    return C.fit_scaling_binning(y, x, bins=7, eps=1e-6)
def _venn():
    d = _data(300, 4)
    return C.fit_venn_abers(d["labels"], d["p"])


@functools.cache
def _cross_venn():
    d = _data(300, 5)
    return C.fit_cross_venn_abers(d["labels"], d["p"], np.arange(300) % 3)


@functools.cache
def _centered():
    d = _data(300, 6)
    return C.fit_centered_isotonic(d["labels"], d["p"])


def _three_folds(p):
    """The same test score for each of 3 fold models (NumPy eagerly: host-resident)."""
    xp = jnp if isinstance(p, jax.core.Tracer) else np
    return xp.stack([p, p, p], axis=-1)


@functools.cache
def _one_vs_rest(method):
    d = _data(300, 3)
    return C.fit_one_vs_rest(d["cls"], d["probs3"], method=method)


def _fit_predict(X_train, y_train, X_eval):
    """A user's model for cross_calibrate: a fixed linear score (numpy)."""
    return scipy.special.expit(X_eval @ np.array([1.0, -0.5]))


def _cross(method, ensemble="per_fold"):
    def run(X, y):
        res = C.cross_calibrate(
            0, _fit_predict, X, y, method=method, ensemble=ensemble, num_folds=3, X_new=X
        )
        return {
            "fold": res.fold,
            "oof": res.oof_scores,
            "calibrators": res.calibrators,
            "new_proba": res.new_proba,
            "predict_proba": res.predict_proba(X[:100]),
        }

    return run


def _smooth_ece(y, p):
    # the bandwidth found: a float eagerly, a traced scalar under jit
    err, sigma = C.smooth_calibration_error(y, p, return_bandwidth=True)
    assert isinstance(sigma, float) == _v.is_concrete(err)
    return err, jnp.asarray(sigma, err.dtype)


# name: (function, positional inputs, keyword options)
CASES = {
    "brier_decomposition": (C.brier_decomposition, ("labels", "p"), {}),
    "brier_decomposition_ties": (
        lambda y, p: C.brier_decomposition(y, np.round(p, 1)),
        ("labels", "p"),
        {},
    ),
    "top_label_calibration_error": (
        C.top_label_calibration_error,
        ("cls", "probs3"),
        {},
    ),
    "top_label_quantile_l2": (
        C.top_label_calibration_error,
        ("cls", "probs3"),
        {"strategy": "quantile", "norm": "l2", "bins": 7},
    ),
    "top_label_debiased": (
        C.top_label_calibration_error,
        ("cls", "probs3"),
        {"debias": True, "key": 0, "num_samples": 50},
    ),
    "marginal_calibration_error": (
        C.marginal_calibration_error,
        ("cls", "probs3"),
        {},
    ),
    "marginal_per_class_quantile": (
        C.marginal_calibration_error,
        ("cls", "probs3"),
        {"per_class": True, "strategy": "quantile", "bins": 5},
    ),
    "marginal_max": (C.marginal_calibration_error, ("cls", "probs3"), {"norm": "max"}),
    "smooth_calibration_error": (_smooth_ece, ("labels", "p_smooth"), {}),
    "smooth_calibration_error_small_bandwidth": (
        _smooth_ece,
        ("labels_calibrated", "p_smooth"),
        {},
    ),
    "smooth_calibration_error_bandwidth": (
        C.smooth_calibration_error,
        ("labels", "p_smooth"),
        {"bandwidth": 0.04},
    ),
    "smooth_reliability_curve": (
        C.smooth_reliability_curve,
        ("labels_calibrated", "p_smooth"),
        {},
    ),
    "smooth_reliability_curve_bandwidth": (
        C.smooth_reliability_curve,
        ("labels", "p_smooth"),
        {"bandwidth": 0.1, "num_points": 50},
    ),
    "smooth_reliability_band": (
        lambda y, p: C.smooth_reliability_band(0, y, p, num_samples=20, num_points=40),
        ("labels", "p_smooth"),
        {},
    ),
    "smooth_reliability_band_bandwidth": (
        lambda y, p: C.smooth_reliability_band(
            jax.random.key(3), y, p, bandwidth=0.07, num_samples=30, level=0.8
        ),
        ("labels", "p_smooth"),
        {},
    ),
    "fit_histogram_binning": (C.fit_histogram_binning, ("labels", "p"), {}),
    "fit_histogram_binning_quantile": (
        C.fit_histogram_binning,
        ("labels", "p"),
        {"bins": 8, "strategy": "quantile"},
    ),
    "histogram_calibrator_call": (lambda p: _histogram()(p), ("p",), {}),
    "fit_scaling_binning": (
        C.fit_scaling_binning,
        ("labels", "p"),
        {"bins": 3, "split": None, "eps": 1e-6},
    ),
    "scaling_binning_call": (lambda p: _scaling_binning()(p), ("p",), {}),
    "fit_bbq": (C.fit_bbq, ("labels", "p"), {}),
    "fit_bbq_posterior": (C.fit_bbq, ("labels", "p"), {"estimate": "posterior"}),
    "bbq_call": (lambda p: _bbq()(p), ("p",), {}),
    "fit_venn_abers": (C.fit_venn_abers, ("labels", "p"), {}),
    "venn_abers_call": (lambda p: _venn()(p), ("p",), {}),
    "venn_abers_probability": (lambda p: _venn().probability(p), ("p",), {}),
    "venn_abers_interval": (lambda p: _venn().interval(p), ("p",), {}),
    "fit_cross_venn_abers": (
        lambda y, p: C.fit_cross_venn_abers(y, p, np.arange(y.shape[0]) % 3),
        ("labels", "p"),
        {},
    ),
    "cross_venn_abers_call": (lambda p: _cross_venn()(_three_folds(p)), ("p",), {}),
    "cross_venn_abers_probability": (
        lambda p: _cross_venn().probability(_three_folds(p)),
        ("p",),
        {},
    ),
    "cross_venn_abers_interval": (
        lambda p: _cross_venn().interval(_three_folds(p)),
        ("p",),
        {},
    ),
    "fit_centered_isotonic": (C.fit_centered_isotonic, ("labels", "p"), {}),
    "centered_isotonic_call": (lambda p: _centered()(p), ("p",), {}),
    "fit_isotonic_prior": (C.fit_isotonic, ("labels", "p"), {"prior": (1.0, 2.0)}),
    "fit_spline": (
        C.fit_spline,
        ("labels", "p"),
        {"knots": 4, "folds": 2, "penalties": (0.1, 10.0), "eps": 1e-6},
    ),
    "fit_one_vs_rest_isotonic": (C.fit_one_vs_rest, ("cls", "probs3"), {}),
    "fit_one_vs_rest_histogram": (
        C.fit_one_vs_rest,
        ("cls", "probs3"),
        {"method": "histogram", "bins": 6, "strategy": "quantile"},
    ),
    # edges: the class-by-class loop (each binary fit bucketed, the classes cut in NumPy)
    "fit_one_vs_rest_histogram_edges": (
        C.fit_one_vs_rest,
        ("cls", "probs3"),
        {"method": "histogram", "bins": np.linspace(0.0, 1.0, 6)},
    ),
    "one_vs_rest_isotonic_call": (lambda p: _one_vs_rest("isotonic")(p), ("probs3",), {}),
    "one_vs_rest_histogram_call": (
        lambda p: _one_vs_rest("histogram")(p),
        ("probs3",),
        {},
    ),
    # fit_temperature on [N, C] logits is bucketed by newton.bucketed_fit (also in
    # tests/test_first_call_fits.py); here with its calibrator's call
    "fit_temperature_multiclass": (
        lambda y, z: (lambda cal: (cal, cal(z)))(C.fit_temperature(y, z)),
        ("cls", "logits3"),
        {},
    ),
    # the multiclass scaling fits (newton.bucketed_fit), compared by their calibrated
    # probabilities: at n = 7 the likelihood is nearly flat along some coefficients
    # (near separation), where padded and unpadded rounding stop the solver at points
    # a few 1e-3 apart with the same predictions
    "fit_vector_scaling": (
        lambda y, z: C.fit_vector_scaling(y, z)(z),
        ("cls", "logits3"),
        {},
    ),
    "fit_matrix_scaling": (
        lambda y, z: C.fit_matrix_scaling(y, z, reg_lambda=0.1)(z),
        ("cls", "logits3"),
        {},
    ),
    "fit_dirichlet": (
        lambda y, p: C.fit_dirichlet(y, p, reg_mu=0.1)(p),
        ("cls", "probs3"),
        {},
    ),
    # top-label: one bucketed histogram fit per class (the same program), and its call
    "fit_top_label": (
        lambda y, p: (lambda cal: (cal, cal(p)))(C.fit_top_label(y, p, bins=6)),
        ("cls", "probs3"),
        {},
    ),
}
# cross_calibrate calls a host function (fit_predict) and draws its folds on the host:
# jax.jit cannot trace it. Its reference is the same call with padding switched off
# (bucket_size(n) = n everywhere, see _no_padding): every program then traces the
# exact length.
HOST_CASES = {
    "cross_calibrate_isotonic": (_cross("isotonic"), ("X", "labels"), {}),
    "cross_calibrate_platt_pooled": (_cross("platt", "pooled"), ("X", "labels"), {}),
    "cross_calibrate_histogram": (_cross("histogram"), ("X", "labels"), {}),
}
COVERS = {
    "classification.brier_decomposition",
    "classification.top_label_calibration_error",
    "classification.marginal_calibration_error",
    "classification.smooth_calibration_error",
    "classification.smooth_reliability_curve",
    "classification.smooth_reliability_band",
    "classification.fit_histogram_binning",
    "classification.HistogramBinningCalibrator",
    "classification.fit_scaling_binning",
    "classification.ScalingBinningCalibrator",
    "classification.fit_bbq",
    "classification.BBQCalibrator",
    "classification.fit_venn_abers",
    "classification.VennAbersCalibrator",
    "classification.fit_cross_venn_abers",
    "classification.CrossVennAbersCalibrator",
    "classification.fit_centered_isotonic",
    "classification.CenteredIsotonicCalibrator",
    "classification.fit_spline",
    "classification.fit_one_vs_rest",
    "classification.OneVsRestCalibrator",
    "classification.fit_temperature",
    "classification.fit_vector_scaling",
    "classification.VectorScalingCalibrator",
    "classification.fit_matrix_scaling",
    "classification.MatrixScalingCalibrator",
    "classification.fit_dirichlet",
    "classification.DirichletCalibrator",
    "classification.fit_top_label",
    "classification.TopLabelCalibrator",
    "classification.cross_calibrate",
    "classification.CrossCalibratedClassifier",
}
ALL = sorted(CASES) + sorted(HOST_CASES)


def _call(name, data):
    fn, keys, kw = {**CASES, **HOST_CASES}[name]
    return fn(*(data[k] for k in keys), **kw)


def _unpadded(name, data):
    """The same call under jax.jit: traced at the exact length, nothing padded."""
    fn, keys, kw = CASES[name]
    return jax.jit(functools.partial(fn, **kw))(*(jnp.asarray(data[k]) for k in keys))


def _no_padding(monkeypatch):
    """Every bucket the exact length (no padding anywhere) for the rest of the test."""
    import bayescal

    exact = lambda n, minimum=None: int(n)  # noqa: E731
    monkeypatch.setattr(_v, "BUCKET_MAX", 0)  # validated(bucket=...) pads nothing
    for mod in list(__import__("sys").modules.values()):
        name = getattr(mod, "__name__", "")
        if name.startswith(bayescal.__name__) and hasattr(mod, "bucket_size"):
            monkeypatch.setattr(mod, "bucket_size", exact)


@pytest.mark.parametrize("name", ALL)
def test_new_length_in_a_used_bucket_compiles_nothing(name):
    assert bucket_size(1000) == bucket_size(1013) == bucket_size(1024) == 1024
    jax.block_until_ready(jax.tree_util.tree_leaves(_call(name, _data(1000))))
    for n in (1013, 1024):
        data = _data(n)
        run = lambda d=data: jax.block_until_ready(jax.tree_util.tree_leaves(_call(name, d)))  # noqa: E731
        assert compilations_during(run) == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_bucketed_equals_unpadded(name):
    # the padded kernel against the unpadded one: small NumPy inputs would take the
    # host path (a float64 twin, tests/test_host_path.py compares it with the kernel)
    for n in (7, 1000):
        data = _data(n, seed=1)
        with host.disabled():
            got = _call(name, data)
        _assert_same(got, _unpadded(name, data))


@pytest.mark.parametrize("name", sorted(HOST_CASES))
def test_host_functions_bucketed_equal_unpadded(name, monkeypatch):
    for n in (40, 1000):
        data = _data(n, seed=1)
        got = _call(name, data)
        with monkeypatch.context() as m:
            _no_padding(m)
            want = _call(name, data)
        _assert_same(got, want)


@pytest.mark.parametrize(
    "name", ["brier_decomposition", "marginal_per_class_quantile", "smooth_reliability_band"]
)
def test_an_unpadded_trace_of_the_bucket_length_is_not_reused(name):
    # jit at exactly the bucket's length first, then an eager call padded to it
    _unpadded(name, _data(1024, seed=2))
    part = _data(900, seed=2)
    assert bucket_size(900) == 1024
    _assert_same(_call(name, part), _unpadded(name, part))


def _reference_folds(y, num_folds, key):
    """cross_calibrate's stratified folds as drawn before the bucketing."""
    fold, start = np.empty(y.size, np.int64), 0
    for label, k in zip((0, 1), jax.random.split(key), strict=True):
        idx = np.asarray(jax.random.permutation(k, np.flatnonzero(y == label)))
        fold[idx] = (start + np.arange(idx.size)) % num_folds
        start += idx.size
    return fold


@pytest.mark.parametrize(
    "n, frac, key",
    [
        (10, 0.5, 0),
        (300, 0.3, 7),
        (2000, 0.9, 0),  # 1800 positives: two rounds of sorts (> 1625 values)
        (4000, 0.5, 3),
        (1013, 0.4, "rbg"),  # not prefix-stable: jax.random.permutation itself
    ],
)
def test_fold_assignment_depends_on_n_only(n, frac, key):
    # the folds of n observations are those drawn before the bucketing, and do not
    # depend on the bucket (their shuffles are drawn for the bucket's length)
    from bayescal.classification._cross import _stratified_folds

    y = (np.random.default_rng(n).uniform(size=n) < frac).astype(np.int64)
    k = jax.random.key(0, impl="rbg") if key == "rbg" else _v_key(key)
    np.testing.assert_array_equal(_stratified_folds(y, 4, k), _reference_folds(y, 4, k))
    if key == 0:
        X = np.random.default_rng(1).normal(size=(n, 2))
        res = C.cross_calibrate(key, _fit_predict, X, y, num_folds=4)
        np.testing.assert_array_equal(res.fold, _reference_folds(y, 4, k))


def _v_key(seed):
    from bayescal._src.resampling import check_key

    return check_key(seed)


def test_search_grid_sizes_equal_relplots():
    # the traced sizes of the bisection's bandwidths k / 1024 (integer arithmetic)
    k = np.arange(_smooth._K_MIN, _smooth._UNIT + 1)
    grid, mesh = _smooth._search_grid_sizes(jnp.asarray(k, jnp.int32))
    want = np.array([_smooth._grid_sizes(float(v) / _smooth._UNIT) for v in k])
    np.testing.assert_array_equal(np.asarray(grid), want[:, 0])
    np.testing.assert_array_equal(np.asarray(mesh), want[:, 1])
    assert want[:, 0].max() == _smooth._SEARCH_GRID
    assert want[:, 1].max() == _smooth._SEARCH_MESH


def test_one_vs_rest_nonparametric_equals_the_binary_fits():
    d = _data(1000, 4)
    for method, fit, kw in (
        ("isotonic", C.fit_isotonic, {}),
        ("histogram", C.fit_histogram_binning, {"bins": 5, "strategy": "quantile"}),
    ):
        ovr = C.fit_one_vs_rest(d["cls"], d["probs3"], method=method, **kw)
        for k, cal in enumerate(ovr.calibrators):
            want = fit((d["cls"] == k).astype(DT), d["probs3"][:, k], **kw)
            _assert_same(cal, want)


def test_one_vs_rest_errors_still_name_the_class():
    d = _data(1000)
    cls = d["cls"].copy()
    cls[cls == 2] = 0
    with pytest.raises(ValueError, match="class 2 does not occur in y_true"):
        C.fit_one_vs_rest(cls, d["probs3"])
    with pytest.raises(ValueError, match="class 2 does not occur in y_true"):
        C.fit_one_vs_rest(cls, d["probs3"], method="histogram")
    with pytest.raises(ValueError, match="class 0: strategy must be one of"):
        C.fit_one_vs_rest(d["cls"], d["probs3"], method="histogram", strategy="x")
    probs = d["probs3"].copy()
    probs[-1] = [0.5, 0.7, -0.2]  # the last row: the one the padding repeats
    with pytest.raises(ValueError, match=r"probs must lie in \[0, 1\]"):
        C.fit_one_vs_rest(d["cls"], probs)


def test_invalid_values_still_raise_with_the_unpadded_message():
    d = _data(1000)
    probs = d["probs3"].copy()
    probs[-1, 0] = np.nan
    with pytest.raises(ValueError, match="probs contains 1 NaN"):
        C.top_label_calibration_error(d["cls"], probs)
    p = d["p"].copy()
    p[-1] = 1.5
    with pytest.raises(ValueError, match=r"y_prob must lie in \[0, 1\]"):
        C.smooth_calibration_error(d["labels"], p)
    with pytest.raises(ValueError, match=r"y_prob must lie in \[0, 1\]"):
        C.brier_decomposition(d["labels"], p)


def test_band_with_draws_that_are_not_prefix_stable_is_not_padded():
    # an rbg key's draws of the bucket's length do not begin with those of n: the band
    # then runs unpadded (equal to jit), rather than depend on the bucket
    key = jax.random.key(0, impl="rbg")
    d = _data(1000, 5)

    def band(k, y, p):
        return C.smooth_reliability_band(k, y, p, bandwidth=0.1, num_samples=20)

    _assert_same(band(key, d["labels"], d["p"]), jax.jit(band)(key, d["labels"], d["p"]))
