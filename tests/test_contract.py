"""The contract shared by both branches (issue "One contract for both branches").

One matrix over every metric and calibrator: jit == eager, vmap == a Python loop,
NaN (never a plausible number) for invalid values under jit, equality that never
raises, save/load round trips, gradients where defined; plus the defects found by the
peers' tests, each with a test that failed before its fix.
"""

from __future__ import annotations

import os
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal import classification as clf
from bayescal import core
from bayescal import regression as reg
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
RTOL = 1e-9 if X64 else 2e-5


def _data(seed: int, n: int = 64):
    r = np.random.default_rng(seed)
    y = r.normal(size=n).astype(DT)
    loc = (y + r.normal(scale=0.8, size=n)).astype(DT)
    scale = r.uniform(0.5, 1.5, size=n).astype(DT)
    draws = (loc + scale * r.normal(size=(40, n))).astype(DT)
    pit = r.uniform(size=n).astype(DT)
    p = r.uniform(0.02, 0.98, size=n).astype(DT)
    lab = (r.uniform(size=n) < p).astype(DT)
    lab[:2] = [0, 1]  # both classes in every data set
    probs = r.dirichlet(np.ones(3) * 0.5, size=n).astype(DT)
    probs /= probs.sum(axis=1, keepdims=True)
    cls = (r.uniform(size=(n, 1)) > np.cumsum(probs, axis=1)).sum(axis=1).clip(0, 2)
    cls[:3] = [0, 1, 2]
    levels = np.array([0.1, 0.5, 0.9], DT)
    from scipy.stats import norm

    quantiles = (loc + scale * norm.ppf(levels)[:, None]).astype(DT)
    return dict(
        y=y, loc=loc, scale=scale, draws=draws, pit=pit, p=p, lab=lab, probs=probs,
        cls=cls, levels=levels, quantiles=quantiles,
    )  # fmt: skip


# name -> (function, names of the batched array arguments, static keyword options)
METRICS = {
    "pit_normal": (reg.pit_normal, ("y", "loc", "scale"), {}),
    "pit_draws": (reg.pit_draws, ("y", "draws"), {}),
    "pit_quantiles": (reg.pit_quantiles, ("y", "quantiles", "levels"), {}),
    "calibration_curve": (reg.calibration_curve, ("pit",), {"num_levels": 11}),
    "calibration_curve_interval": (
        reg.calibration_curve,
        ("pit",),
        {"num_levels": 11, "kind": "interval"},
    ),
    "calibration_error": (reg.calibration_error, ("pit",), {}),
    "calibration_error_max": (reg.calibration_error, ("pit",), {"norm": "max"}),
    "miscalibration_area": (reg.miscalibration_area, ("pit",), {}),
    "miscalibration_area_grid": (reg.miscalibration_area, ("pit",), {"num_levels": 20}),
    "sharpness": (reg.sharpness, ("scale",), {}),
    "crps_normal": (reg.crps_normal, ("y", "loc", "scale"), {}),
    "crps_draws": (reg.crps_draws, ("y", "draws"), {}),
    "nll_normal": (reg.nll_normal, ("y", "loc", "scale"), {}),
    "kernel_calibration_error_regression": (
        reg.kernel_calibration_error, ("y", "loc", "scale"), {},
    ),
    "kernel_calibration_test_regression": (
        reg.kernel_calibration_test, ("y", "loc", "scale"), {},
    ),
    "kernel_calibration_test_regression_unbiased": (
        reg.kernel_calibration_test,
        ("y", "loc", "scale"),
        {"estimator": "unbiased", "key": 3, "num_samples": 20},
    ),
    "pinball_loss": (reg.pinball_loss, ("y", "quantiles", "levels"), {}),
    "reliability_curve": (clf.reliability_curve, ("lab", "p"), {"bins": 5}),
    "ece": (clf.expected_calibration_error, ("lab", "p"), {}),
    "ece_l2_debiased": (
        clf.expected_calibration_error,
        ("lab", "p"),
        {"norm": "l2", "debias": True},
    ),
    "ece_l1_debiased": (
        clf.expected_calibration_error,
        ("lab", "p"),
        {"debias": True, "key": 3, "num_samples": 50},
    ),
    "brier_score": (clf.brier_score, ("lab", "p"), {}),
    "log_loss": (clf.log_loss, ("lab", "p"), {}),
    "brier_decomposition_binned": (clf.brier_decomposition_binned, ("lab", "p"), {}),
    "prediction_sharpness": (clf.prediction_sharpness, ("p",), {}),
    "calibration_slope_intercept": (clf.calibration_slope_intercept, ("lab", "p"), {}),
    "spiegelhalter_z": (clf.spiegelhalter_z, ("lab", "p"), {}),
    "cumulative_calibration_test": (clf.cumulative_calibration_test, ("lab", "p"), {}),
    "hosmer_lemeshow": (clf.hosmer_lemeshow, ("lab", "p"), {}),
    "kernel_calibration_error": (clf.kernel_calibration_error, ("lab", "p"), {}),
    "kernel_calibration_test": (clf.kernel_calibration_test, ("lab", "p"), {}),
    "kernel_calibration_test_unbiased": (
        clf.kernel_calibration_test,
        ("lab", "p"),
        {"estimator": "unbiased", "key": 3, "num_samples": 20},
    ),
    "hosmer_lemeshow_dof": (clf.hosmer_lemeshow, ("lab", "p"), {"bins": 5, "dof": 5}),
    "isotonic_calibration_index": (clf.isotonic_calibration_index, ("lab", "p"), {}),
    "top_label": (clf.top_label_calibration_error, ("cls", "probs"), {}),
    # fits whose mathematics allow jit and vmap of the fit itself
    "fit_venn_abers": (clf.fit_venn_abers, ("lab", "p"), {}),
    "fit_cross_venn_abers": (
        lambda y, p: clf.fit_cross_venn_abers(y, p, np.arange(64) % 3),
        ("lab", "p"),
        {},
    ),
    "fit_centered_isotonic": (clf.fit_centered_isotonic, ("lab", "p"), {}),
    "fit_bbq": (clf.fit_bbq, ("lab", "p"), {}),
    "fit_bbq_posterior": (clf.fit_bbq, ("lab", "p"), {"estimate": "posterior"}),
    "fit_isotonic_prior": (clf.fit_isotonic, ("lab", "p"), {"prior": (1.0, 2.0)}),
    "marginal": (clf.marginal_calibration_error, ("cls", "probs"), {}),
}


def _call(name, data):
    fn, args, kw = METRICS[name]
    return fn(*(data[a] for a in args), **kw)


def _leaves(x):
    return [np.asarray(v, np.float64) for v in jax.tree_util.tree_leaves(x)]


def _assert_same(a, b, rtol=RTOL, atol=1e-6):
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb, strict=True):
        np.testing.assert_allclose(u, v, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_jit_equals_eager(name):
    data = _data(0)
    fn, args, kw = METRICS[name]
    eager = _call(name, data)
    jitted = jax.jit(lambda *a: fn(*a, **kw))(*(jnp.asarray(data[a]) for a in args))
    _assert_same(eager, jitted)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_vmap_equals_loop(name):
    sets = [_data(s) for s in (1, 2, 3)]
    fn, args, kw = METRICS[name]
    stacked = [jnp.stack([jnp.asarray(d[a]) for d in sets]) for a in args]
    batched = jax.vmap(lambda *a: fn(*a, **kw))(*stacked)
    for i, d in enumerate(sets):
        one = _call(name, d)
        _assert_same(jax.tree_util.tree_map(lambda x, i=i: x[i], batched), one)


# Invalid values per argument kind: what the eager call rejects, jit turns into NaN.
BAD = {
    "y": np.nan,
    "loc": np.inf,
    "scale": -1.0,
    "pit": 1.5,
    "p": 1.5,
    "lab": 0.5,
    "draws": np.nan,
}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_invalid_values_raise_eagerly_and_give_nan_under_jit(name):
    fn, args, kw = METRICS[name]
    arg = next((a for a in args if a in BAD), None)
    if arg is None:  # integer labels / probabilities rows: covered by the bad-input tests
        arg = "probs"
    data = _data(4)
    bad = dict(data)
    if arg == "probs":
        v = data["probs"].copy()
        v[0] = [0.7, 0.7, 0.7]  # rows must sum to 1
    else:
        v = np.array(data[arg], copy=True)
        v.reshape(-1)[0] = BAD[arg]
    bad[arg] = v
    with pytest.raises(ValueError, match=arg if arg != "lab" else "y_true"):
        _call(name, bad)
    out = jax.jit(lambda *a: fn(*a, **kw))(*(jnp.asarray(bad[a]) for a in args))
    # every floating result is NaN (integer counts per bin stay counts)
    floats = [
        np.asarray(x)
        for x in jax.tree_util.tree_leaves(out)
        if jnp.issubdtype(x.dtype, jnp.floating) and x.size
    ]
    assert floats and all(np.isnan(x).all() for x in floats), name


def test_jit_of_nan_pit_is_nan_not_a_plausible_number():
    # The example: jax.jit(calibration_error) of PIT values with a NaN gave 0.0527.
    u = jnp.asarray(np.r_[np.nan, np.linspace(0.01, 0.99, 99)], DT)
    assert np.isnan(float(jax.jit(reg.calibration_error)(u)))


# --------------------------------------------------------------------- gradients
@pytest.mark.parametrize(
    "name, fn",
    [
        ("crps_normal", lambda d, t: reg.crps_normal(d["y"], d["loc"] + t, d["scale"])),
        ("nll_normal", lambda d, t: reg.nll_normal(d["y"], d["loc"], d["scale"] * (1 + t))),
        ("brier_score", lambda d, t: clf.brier_score(d["lab"], logits=d["p"] + t)),
        ("log_loss", lambda d, t: clf.log_loss(d["lab"], logits=d["p"] + t)),
        (
            "isotonic_regression",
            lambda d, t: jnp.sum(core.isotonic_regression(d["y"] * (1 + t)) ** 2),
        ),
    ],
)
def test_grad_matches_central_difference(name, fn):
    # float32: a coarse step and tolerance; the x64 run gives the tight check
    d = {k: jnp.asarray(v) for k, v in _data(5).items()}
    g = float(jax.grad(lambda t: fn(d, t))(0.0))
    h = 1e-6 if X64 else 1e-2
    fd = (float(fn(d, h)) - float(fn(d, -h))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5 if X64 else 2e-2, atol=1e-7)


# -------------------------------------------------------------------- calibrators
def _fits():
    d = _data(6, n=80)
    return {
        "platt": clf.fit_platt(d["lab"], d["p"]),
        "platt_score": clf.fit_platt(d["lab"], d["loc"], input="score"),
        "isotonic": clf.fit_isotonic(d["lab"], d["p"]),
        "isotonic_prior": clf.fit_isotonic(d["lab"], d["p"], prior=1.0),
        "venn_abers": clf.fit_venn_abers(d["lab"], d["p"]),
        "cross_venn_abers": clf.fit_cross_venn_abers(d["lab"], d["p"], np.arange(80) % 4),
        "centered_isotonic": clf.fit_centered_isotonic(d["lab"], d["p"]),
        "histogram": clf.fit_histogram_binning(d["lab"], d["p"], bins=5),
        "beta": clf.fit_beta(d["lab"], d["p"]),
        "scaling_binning": clf.fit_scaling_binning(d["lab"], d["p"], bins=5),
        "bbq": clf.fit_bbq(d["lab"], d["p"]),
        "spline": clf.fit_spline(d["lab"], d["p"], knots=5, penalties=(0.1,)),
        "temperature": clf.fit_temperature(d["cls"], np.log(d["probs"])),
        "one_vs_rest": clf.fit_one_vs_rest(d["cls"], d["probs"], method="platt"),
        "vector_scaling": clf.fit_vector_scaling(d["cls"], np.log(d["probs"])),
        "matrix_scaling": clf.fit_matrix_scaling(
            d["cls"], np.log(d["probs"]), reg_lambda=0.1, reg_mu=0.1
        ),
        "dirichlet": clf.fit_dirichlet(d["cls"], d["probs"], eps=1e-7),
        "top_label": clf.fit_top_label(d["cls"], d["probs"], method="isotonic"),
        "isotonic_recalibrator": reg.fit_isotonic_recalibrator(d["pit"]),
        "sigma_scaling": reg.fit_sigma_scaling(d["y"], d["loc"], d["scale"]),
    }


FITS = _fits()


@pytest.mark.parametrize("name", sorted(FITS))
def test_calibrator_contract(name, tmp_path):
    cal = FITS[name]
    assert isinstance(cal, core.Calibrator)
    # equality never raises, and is by value
    assert (cal == cal) is True
    other = jax.tree_util.tree_map(lambda x: x + 1, cal)
    assert (cal == other) is False
    assert (cal == "something else") is False
    assert hash(cal) == hash(jax.tree_util.tree_map(lambda x: x, cal))
    # save / load round trip through the one function pair of the core
    path = os.path.join(tmp_path, f"{name}.npz")
    core.save_calibrator(cal, path)
    back = core.load_calibrator(path)
    assert type(back) is type(cal) and back == cal
    # calibrators pass through jit as pytrees
    leaves_in = jax.tree_util.tree_leaves(cal)
    leaves_out = jax.tree_util.tree_leaves(jax.jit(lambda c: c)(cal))
    assert all(np.array_equal(a, b) for a, b in zip(leaves_in, leaves_out, strict=True))


# ------------------------------------------------------------------ the defects
def test_bins_follow_the_documented_rule_on_edges():
    # Defect (a): p = repeat(arange(11)/10, 3) with bins=10 gave ECE 0.1606 in float32
    # and 0.1242 under x64. The rule [e_k, e_{k+1}) puts 0.3 in bin 3 (exact decimals).
    p = np.repeat(np.arange(11) / 10, 3)
    y = np.tile([1.0, 0.0, 1.0], 11)
    # reference: exact rational bins, floor(10 p) with the last bin closed
    k = [min(int(Fraction(str(v)) * 10), 9) for v in np.round(p, 1)]
    k = np.array(k)
    counts = np.bincount(k, minlength=10)
    gap = [abs(y[k == b].mean() - p[k == b].mean()) for b in range(10)]
    ref = float(np.sum(counts / counts.sum() * np.array(gap)))
    curve = clf.reliability_curve(y, p, bins=10)
    assert np.asarray(curve.weight).tolist() == counts.tolist()
    np.testing.assert_allclose(
        float(clf.expected_calibration_error(y, p, bins=10)), ref, rtol=1e-6
    )


def test_log_loss_eps_below_float32_resolution_stays_finite():
    # Defect (c): eps = float64 eps returned inf in float32 (1 - eps rounds to 1).
    eps = float(np.finfo(np.float64).eps)
    out = float(clf.log_loss([0.0, 1.0], [1.0, 0.0], eps=eps))
    assert np.isfinite(out)
    one = np.array(1, DT)
    hi = min(DT(1 - eps), np.nextafter(one, DT(0)))
    lo = max(DT(eps), np.finfo(DT).tiny)
    ref = 0.5 * (-np.log1p(-np.float64(hi)) - np.log(np.float64(lo)))
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_fair_crps_needs_two_draws():
    # Defect (e): crps_draws(fair=True) with one draw silently returned |x - y|.
    with pytest.raises(ValueError, match="fair=True needs at least 2 draws"):
        reg.crps_draws([0.0], [[1.0]], fair=True)


def test_weights_and_reduction_in_both_branches():
    from sklearn.metrics import brier_score_loss, log_loss

    d = _data(7)
    w = np.random.default_rng(7).uniform(0.1, 2.0, size=d["y"].size)
    # classification: scikit-learn's sample_weight is the weighted mean
    np.testing.assert_allclose(
        float(clf.brier_score(d["lab"], d["p"], weights=w)),
        brier_score_loss(d["lab"], d["p"], sample_weight=w),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        float(clf.log_loss(d["lab"], d["p"], weights=w)),
        log_loss(d["lab"], d["p"], sample_weight=w),
        rtol=1e-5,
    )
    per = np.asarray(clf.brier_score(d["lab"], d["p"], reduction="none"), np.float64)
    np.testing.assert_allclose(per, (d["p"] - d["lab"]) ** 2, rtol=1e-6)
    np.testing.assert_allclose(
        float(clf.log_loss(d["lab"], d["p"], reduction="sum")),
        log_loss(d["lab"], d["p"], normalize=False),
        rtol=1e-5,
    )
    # regression: the same weighted mean / sum over the per-observation scores
    for fn in (reg.crps_normal, reg.nll_normal):
        per = np.asarray(fn(d["y"], d["loc"], d["scale"], reduction="none"), np.float64)
        np.testing.assert_allclose(
            float(fn(d["y"], d["loc"], d["scale"], weights=w)),
            np.average(per, weights=w),
            rtol=1e-5,
        )
        np.testing.assert_allclose(
            float(fn(d["y"], d["loc"], d["scale"], weights=w, reduction="sum")),
            np.sum(per * w),
            rtol=1e-5,
        )
    with pytest.raises(ValueError, match="weights must be >= 0"):
        reg.crps_normal(d["y"], d["loc"], d["scale"], weights=-w)
    with pytest.raises(ValueError, match="weights has shape"):
        reg.crps_draws(d["y"], d["draws"], weights=w[:3])


# ------------------------------------------------------------------ randomness
def test_key_rule():
    u = _data(8)["pit"]
    # int seeds are keys: the same seed gives the same result
    a = reg.bootstrap_calibration_error(0, u, num_samples=50)
    b = reg.bootstrap_calibration_error(jax.random.key(0), u, num_samples=50)
    np.testing.assert_array_equal(np.asarray(a.samples), np.asarray(b.samples))
    with pytest.raises(TypeError, match="key is required"):
        reg.pit_ecdf_band(None, 100)
    with pytest.raises(TypeError, match="key must be a PRNG key"):
        reg.pit_ecdf_band("seed", 100)
    with pytest.raises(TypeError, match="key must be a PRNG key"):
        core.as_key(1.5)
    # no hidden key: a CORP curve without a key has no band; the debiased L1 ECE asks
    assert clf.corp_curve([0, 1, 1, 0], [0.1, 0.4, 0.6, 0.8]).lower is None
    with pytest.raises(TypeError, match="pass key"):
        clf.expected_calibration_error([0, 1], [0.2, 0.7], debias=True)


def test_int_seed_key_is_jax_random_key_and_compiles_nothing():
    # as_key builds an int seed's threefry key on the host: the key jax.random.key
    # makes (reference: JAX's own seeding), with no XLA program compiled for it
    from tests.conftest import compilations_during

    for seed in (0, 1, 12345, 2**31 - 1, 2**31, 2**40):
        got = core.as_key(seed)
        want = jax.random.key(seed)
        assert jax.random.key_impl(got) == jax.random.key_impl(want)
        np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(want))
        np.testing.assert_array_equal(
            jax.random.key_data(jax.random.split(got, 3)),
            jax.random.key_data(jax.random.split(want, 3)),
        )
    keys = []
    jax.clear_caches()  # JAX's own seeding compiles again from here: the check can fail
    assert compilations_during(lambda: keys.append(core.as_key(987654))) == 0
    assert compilations_during(lambda: keys.append(jax.random.key(987654))) > 0


def test_import_is_light_and_compiles_nothing():
    # scipy.stats took 0.49 s of the 1.11 s import of bayescal.regression, and
    # scipy.optimize (PAV) and scipy.special (Student-t quantiles) another 0.25 s: they
    # are imported by the functions that need them. Importing must compile nothing and
    # leave JAX's configuration alone (no compilation cache switched on).
    import subprocess
    import sys

    code = (
        "import sys, jax, jax.monitoring as m\n"
        "events = []\n"
        "m.register_event_duration_secs_listener(lambda e, d, **k: events.append(e))\n"
        "before = jax.config.jax_compilation_cache_dir\n"
        "import bayescal, bayescal.regression, bayescal.classification, bayescal.core\n"
        "heavy = ('scipy.stats', 'scipy.optimize', 'scipy.special', 'matplotlib',\n"
        "         'numpyro', 'arviz')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(sum(e.endswith('backend_compile_duration') for e in events))\n"
        "print(jax.config.jax_compilation_cache_dir == before)\n"
        "import jax.numpy as jnp\n"
        "jnp.arange(3.0).block_until_ready()\n"
        "print(sum(e.endswith('backend_compile_duration') for e in events) > 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    # the last line shows that the listener sees compilations at all
    assert out.stdout.split("\n")[:4] == ["[]", "0", "True", "True"], out.stdout


def test_sharpness_never_overflows_or_underflows_silently():
    # Found by the fuzz harness: float32 squares overflowed (inf) or underflowed (0.0).
    big = np.array([3.3e38, 1.0], np.float32)
    ref = np.sqrt(np.mean(big.astype(np.float64) ** 2))
    np.testing.assert_allclose(float(reg.sharpness(big, root=True)), ref, rtol=1e-6)
    tiny = np.array([1.0, 2.0], np.float32) * np.float32(1e-30)
    ref_tiny = np.sqrt(np.mean(tiny.astype(np.float64) ** 2))
    np.testing.assert_allclose(float(reg.sharpness(tiny, root=True)), ref_tiny, rtol=1e-6)
    if not X64:  # in float64 both variances are representable
        for s in (big, tiny):
            with pytest.raises(ValueError, match="scale gives a mean variance outside"):
                reg.sharpness(s)
    with pytest.raises(ValueError, match="scale must be 1-D"):
        reg.sharpness(np.ones((1, 3)))
