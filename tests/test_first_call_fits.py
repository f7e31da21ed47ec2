"""First-call latency of the parametric fits (issue "First result fast", items 1-3).

Every public parametric fit (Platt, beta, temperature, one-vs-rest with Platt or beta,
sigma-scaling) runs eagerly as ONE compiled program per bucket of N (inputs padded on
the host, value checks inside the program), and calling a fitted calibrator on new
data is one program per bucket as well: a second N in the same bucket compiles
nothing. Padding must not change a fit: the eager (padded) results equal the unpadded
ones under ``jax.jit``, and the padding rows, whatever they hold, carry no weight.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from bayescal import classification as clf
from bayescal import regression as reg
from bayescal._src import host, newton, xla_options
from bayescal._src.bucketing import bucket_size
from bayescal.classification import _calibrators as _cal
from bayescal.regression import _recalibration as _rec
from tests.conftest import X64, compilations_during

DT = np.float64 if X64 else np.float32
RTOL = 1e-9 if X64 else 2e-5

# Two sizes in one bucket (and a third for calling the calibrators).
N1, N2, N3 = 1000, 1017, 1003
assert bucket_size(N1) == bucket_size(N2) == bucket_size(N3) == 1024


def _data(n: int, seed: int = 0) -> dict:
    r = np.random.default_rng(seed)
    z = r.normal(0, 1.5, size=n)
    lab = (r.uniform(size=n) < scipy.special.expit(z)).astype(DT)
    logits3 = r.normal(size=(n, 3)) * 2
    probs3 = scipy.special.softmax(logits3, axis=1)
    cls = np.array([r.choice(3, p=q) for q in scipy.special.softmax(logits3 / 2, axis=1)])
    y = r.normal(size=n)
    return dict(
        lab=lab,
        p=scipy.special.expit(2 * z + 0.3).astype(DT),
        score=(2 * z).astype(DT),
        logits3=logits3.astype(DT),
        probs3=probs3.astype(DT),
        cls=cls,
        y=y.astype(DT),
        loc=(y + r.standard_t(4, size=n) * 0.7).astype(DT),
        scale=r.uniform(0.5, 1.5, size=n).astype(DT),
        w=r.integers(0, 4, size=n).astype(DT),
    )


# name -> (fit, names of the array arguments, options, name of the calibrator's input)
FITS = {
    "platt": (clf.fit_platt, ("lab", "p"), {}, "p"),
    "platt_score_hard": (
        clf.fit_platt,
        ("lab", "score"),
        {"input": "score", "soft_labels": False},
        "score",
    ),
    "platt_eps": (clf.fit_platt, ("lab", "p"), {"eps": 1e-6}, "p"),
    "beta": (clf.fit_beta, ("lab", "p"), {}, "p"),
    "temperature": (clf.fit_temperature, ("cls", "logits3"), {}, "logits3"),
    "temperature_binary": (clf.fit_temperature, ("lab", "score"), {}, "score"),
    "one_vs_rest_platt": (
        clf.fit_one_vs_rest,
        ("cls", "probs3"),
        {"method": "platt"},
        "probs3",
    ),
    "one_vs_rest_beta": (
        clf.fit_one_vs_rest,
        ("cls", "probs3"),
        {"method": "beta"},
        "probs3",
    ),
    "sigma_normal": (reg.fit_sigma_scaling, ("y", "loc", "scale"), {}, "scale"),
    # with observation weights (issue 20): the same one program per bucket
    "platt_weighted": (
        lambda y, p, w: clf.fit_platt(y, p, weights=w),
        ("lab", "p", "w"),
        {},
        "p",
    ),
    "beta_weighted": (
        lambda y, p, w: clf.fit_beta(y, p, weights=w),
        ("lab", "p", "w"),
        {},
        "p",
    ),
    "temperature_weighted": (
        lambda y, z, w: clf.fit_temperature(y, z, weights=w),
        ("cls", "logits3", "w"),
        {},
        "logits3",
    ),
    "one_vs_rest_platt_weighted": (
        lambda y, p, w: clf.fit_one_vs_rest(y, p, method="platt", weights=w),
        ("cls", "probs3", "w"),
        {},
        "probs3",
    ),
    "sigma_student_t_weighted": (
        lambda y, m, s, w: reg.fit_sigma_scaling(
            y, m, s, family="student_t", df=4.0, weights=w
        ),
        ("y", "loc", "scale", "w"),
        {},
        "scale",
    ),
    "sigma_student_t": (
        reg.fit_sigma_scaling,
        ("y", "loc", "scale"),
        {"family": "student_t", "df": 4.0},
        "scale",
    ),
    "sigma_laplace": (
        reg.fit_sigma_scaling,
        ("y", "loc", "scale"),
        {"family": "laplace"},
        "scale",
    ),
}


def _fit(name: str, data: dict):
    fn, args, kw, _ = FITS[name]
    return fn(*(data[a] for a in args), **kw)


def _assert_same(a, b, rtol=RTOL):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for u, v in zip(la, lb, strict=True):
        np.testing.assert_allclose(
            np.asarray(u, np.float64), np.asarray(v, np.float64), rtol=rtol, atol=1e-6
        )


@pytest.mark.parametrize("name", sorted(FITS))
def test_a_second_size_in_the_bucket_compiles_nothing(name):
    d1, d2, d3 = _data(N1, 1), _data(N2, 2), _data(N3, 3)
    key = FITS[name][3]
    out = {}

    def first():
        out["cal"] = _fit(name, d1)
        out["q1"] = np.asarray(out["cal"](d1[key]))

    # one program for the fit and one for the call at most (0 when this process has
    # compiled them already)
    assert compilations_during(first) <= 2

    def second():
        out["cal2"] = _fit(name, d2)
        out["q2"] = np.asarray(out["cal2"](d2[key]))
        out["q3"] = np.asarray(out["cal"](d3[key]))

    assert compilations_during(second) == 0
    assert out["q2"].shape[0] == N2 and out["q3"].shape[0] == N3
    assert np.all(np.isfinite(out["q2"])) and np.all(np.isfinite(out["q3"]))


@pytest.mark.parametrize("name", sorted(FITS))
def test_a_fresh_bucket_compiles_one_program_per_call(name):
    # 2900 -> bucket 3072 (used nowhere else in this file)
    assert bucket_size(2900) == 3072
    d = _data(2900, 4)
    key = FITS[name][3]
    out = {}
    assert compilations_during(lambda: out.setdefault("cal", _fit(name, d))) <= 1
    assert compilations_during(lambda: np.asarray(out["cal"](d[key]))) <= 1


@pytest.mark.parametrize("name", sorted(FITS))
@pytest.mark.parametrize("n", [1000, 1281])
def test_padded_eager_fit_equals_unpadded_fit_under_jit(name, n):
    # 1281 -> bucket 1536: 255 padding rows
    d = _data(n, 5)
    fn, args, kw, key = FITS[name]
    eager = _fit(name, d)
    jitted = jax.jit(lambda *a: fn(*a, **kw))(*(jnp.asarray(d[a]) for a in args))
    _assert_same(eager, jitted)
    # and the calibrators' bucketed calls equal their calls under jit
    x = d[key][: n - 7]
    np.testing.assert_allclose(
        np.asarray(eager(x), np.float64),
        np.asarray(jax.jit(lambda c, v: c(v))(jitted, jnp.asarray(x)), np.float64),
        rtol=RTOL,
        atol=1e-6,
    )


def _garbage_padding(x: np.ndarray, size: int, fill) -> np.ndarray:
    pad = np.broadcast_to(np.asarray(fill, x.dtype), (size - x.shape[0],) + x.shape[1:])
    return np.concatenate([x, pad])


@pytest.mark.parametrize(
    "core, arrays, fills, options",
    [
        (
            _cal._fit_platt,
            ("lab", "p"),
            (1.0, 0.999),
            dict(input="prob", soft_labels=True, eps=None),
        ),
        (_cal._fit_beta, ("lab", "p"), (0.0, 0.9), dict(eps=None)),
        (_cal._fit_temperature, ("cls", "logits3"), (2, [9.0, 0.0, -9.0]), {}),
        (
            _cal._fit_ovr_parametric,
            ("cls", "probs3"),
            (0, [0.01, 0.01, 0.98]),
            dict(
                method="platt",
                options=(("eps", None), ("input", "prob"), ("soft_labels", True)),
            ),
        ),
        (
            _rec._fit_sigma_scaling,
            ("y", "loc", "scale"),
            (50.0, 0.0, 0.1),
            dict(family="student_t", df=3.0),
        ),
        (
            _rec._fit_sigma_scaling,
            ("y", "loc", "scale"),
            (50.0, 0.0, 0.1),
            dict(family="normal", df=None),
        ),
    ],
)
def test_padding_rows_carry_no_weight(core, arrays, fills, options):
    # The bucketed core, given n = 1000 real rows and 536 rows of (valid) values far
    # from the data, must return the fit of the 1000 rows alone.
    n, size = 1000, 1536
    d = _data(n, 6)
    real = [d[a] for a in arrays]
    padded = [_garbage_padding(x, size, f) for x, f in zip(real, fills, strict=True)]
    # (weights=None: the cores take the user's weights before n)
    masked = jax.jit(lambda *a: core(*a[:-1], None, a[-1], **options))(
        *padded, jnp.asarray(n, jnp.int32)
    )
    unpadded = jax.jit(lambda *a: core(*a, None, None, **options))(*real)
    _assert_same(masked, unpadded)
    # and without the mask the padding would change the fit (the test can fail)
    ignored = jax.jit(lambda *a: core(*a, None, None, **options))(*padded)
    with pytest.raises(AssertionError):
        _assert_same(ignored, unpadded)


def test_one_vs_rest_equals_the_binary_fits_class_by_class():
    d = _data(N1, 7)
    for method, fit in (("platt", clf.fit_platt), ("beta", clf.fit_beta)):
        ovr = clf.fit_one_vs_rest(d["cls"], d["probs3"], method=method)
        for k, cal in enumerate(ovr.calibrators):
            _assert_same(cal, fit((d["cls"] == k).astype(DT), d["probs3"][:, k]))
    # the renormalised call equals the binary calibrators' columns renormalised
    ovr = clf.fit_one_vs_rest(d["cls"], d["probs3"], method="platt")
    cols = np.stack(
        [np.asarray(c(d["probs3"][:, k])) for k, c in enumerate(ovr.calibrators)], 1
    )
    np.testing.assert_allclose(
        np.asarray(ovr(d["probs3"])),
        cols / cols.sum(1, keepdims=True),
        rtol=RTOL,
        atol=1e-7,
    )


def test_errors_name_the_unpadded_data():
    # A NaN in the last row: the padding repeats that row, yet the message counts
    # the user's data (the failed fused pass re-runs the checks unpadded).
    d = _data(N1, 8)
    p = d["p"].copy()
    p[-1] = np.nan
    with pytest.raises(ValueError, match=r"y_score contains 1 NaN and 0 infinite"):
        clf.fit_platt(d["lab"], p, input="score")
    with pytest.raises(ValueError, match=r"y_true holds only class 1 \(1000 labels\)"):
        clf.fit_platt(np.ones(N1), d["p"])
    with pytest.raises(ValueError, match="scale must be strictly positive"):
        reg.fit_sigma_scaling(d["y"], d["loc"], -d["scale"])
    cls = d["cls"].copy()
    cls[cls == 2] = 0
    with pytest.raises(ValueError, match="class 2 does not occur in y_true"):
        clf.fit_one_vs_rest(cls, d["probs3"], method="platt")
    probs = d["probs3"].copy()
    probs[5] = [0.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="class 0: y_prob has values at exactly 0 or 1"):
        clf.fit_one_vs_rest(d["cls"], probs, method="beta")
    with pytest.raises(TypeError, match="bins"):
        clf.fit_one_vs_rest(d["cls"], d["probs3"], method="platt", bins=3)
    with pytest.raises(ValueError, match="input must be one of"):
        clf.fit_one_vs_rest(d["cls"], d["probs3"], method="platt", input="odds")


def test_one_vs_rest_warns_for_a_separable_class():
    # class 0 is separated by its probability column: hard-label Platt diverges
    r = np.random.default_rng(9)
    cls = r.integers(0, 3, N1)
    probs = np.full((N1, 3), 0.25)
    probs[:, 0] = np.where(cls == 0, 0.7, 0.2)
    probs[:, 1:] = ((1 - probs[:, 0]) / 2)[:, None]
    with pytest.warns(RuntimeWarning, match="fit_platt: the logistic fit did not converge"):
        clf.fit_one_vs_rest(cls, probs.astype(DT), method="platt", soft_labels=False)


def test_sigma_scaling_derivatives_equal_autodiff():
    # Named reference: forward-mode autodiff (jax.jacfwd) of the per-observation NLL
    # in theta = log s, which the solver used before the derivatives were written out.
    from bayescal._src import families as fam

    z = jnp.asarray(np.random.default_rng(10).standard_t(3, size=700) * 1.7, DT)
    w = jnp.asarray(np.random.default_rng(11).uniform(size=700) < 0.8, DT)
    for family, df in (("normal", None), ("laplace", None), ("student_t", 2.5)):

        def loss(x, family=family, df=df):
            return x[0] - fam.log_density(z * jnp.exp(-x[0]), family, df)

        for theta in (-0.7, 0.0, 0.4):
            x = jnp.asarray([theta], DT)
            d = _rec._sigma_objective(z, w, family, df)(x)
            np.testing.assert_allclose(
                float(d.value), float(jnp.sum(w * loss(x))), rtol=RTOL
            )
            g = jnp.sum(w[:, None] * jax.jacfwd(loss)(x), axis=0)
            h = jnp.sum(w[:, None, None] * jax.jacfwd(jax.jacfwd(loss))(x), axis=0)
            np.testing.assert_allclose(
                np.asarray(d.grad), np.asarray(g), rtol=RTOL, atol=1e-4
            )
            np.testing.assert_allclose(
                np.asarray(d.hess), np.asarray(h), rtol=RTOL, atol=1e-4
            )


def test_fits_work_where_xla_rejects_the_compiler_options(monkeypatch):
    # An XLA without the option: the first call notices and compiles without options.
    monkeypatch.setattr(
        xla_options, "COMPILER_OPTIONS", {"xla_bayescal_no_such_option": True}
    )
    monkeypatch.setattr(xla_options, "_OPTIONS_KNOWN", [True])
    d = _data(777, 12)
    with host.disabled():  # the kernel path (concrete CPU inputs: a NumPy twin)
        cal = clf.fit_platt(d["lab"], d["p"])
    assert xla_options._OPTIONS_KNOWN == [False]
    _assert_same(cal, jax.jit(clf.fit_platt)(jnp.asarray(d["lab"]), jnp.asarray(d["p"])))
    assert np.asarray(cal(d["p"][:500])).shape == (500,)


def test_accurate_sum_of_stacked_rows_equals_row_by_row_float64():
    # Named reference: numpy's float64 sum (math.fsum-accurate at this size).
    r = np.random.default_rng(13)
    x = r.normal(size=(5, 3000)).astype(DT)
    got = np.asarray(newton.accurate_sum(jnp.asarray(x), axis=-1))
    np.testing.assert_allclose(got, x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-4)
    got0 = np.asarray(newton.accurate_sum(jnp.asarray(x.T), axis=0))
    np.testing.assert_allclose(got0, got, rtol=1e-6)


def test_warnings_of_converged_fits_stay_quiet():
    d = _data(N1, 14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.fit_one_vs_rest(d["cls"], d["probs3"], method="beta")
        clf.fit_platt(d["lab"], d["p"])


@pytest.mark.parametrize(
    "fit, args",
    [
        (clf.fit_platt, ([], [])),
        (clf.fit_beta, (np.zeros(0), np.zeros(0))),
        (clf.fit_temperature, (np.zeros(0, int), np.zeros((0, 3)))),
        (reg.fit_sigma_scaling, ([], [], [])),
    ],
)
def test_empty_inputs_raise_the_named_error_not_a_padding_error(fit, args):
    # np.pad cannot repeat the last row of an empty array: the empty input must reach
    # the validation's own message
    with pytest.raises(ValueError, match="is empty"):
        fit(*args)


def test_sigma_scaling_of_a_2d_split_is_the_closed_form_over_all_values():
    # Laves et al. (2020): s = sqrt(mean(((y - loc) / scale)^2)) over every value; the
    # unpadded path of the program divides by the number of values, not of rows.
    r = np.random.default_rng(15)
    y = r.normal(size=(40, 7)).astype(DT) * 1.9
    ref = np.sqrt(np.mean(y.astype(np.float64) ** 2))
    got = reg.fit_sigma_scaling(y, np.zeros_like(y), np.ones_like(y))
    np.testing.assert_allclose(float(got.factor), ref, rtol=RTOL)
    flat = reg.fit_sigma_scaling(y.ravel(), np.zeros(y.size, DT), np.ones(y.size, DT))
    np.testing.assert_allclose(float(got.factor), float(flat.factor), rtol=RTOL)
