"""Smooth ECE (Blasiok & Nakkiran 2023) against relplot, its reference implementation.

Reference: relplot 1.0.3 (github.com/apple/ml-calibration), ``relplot.smECE`` (the
fixed-point bandwidth), ``relplot.smECE_sigma`` (a fixed bandwidth) and
``relplot.estimators.KernelSmoother`` with ``relplot.kernels.ReflectedGaussianKernel``
(the smoothed reliability curve), run in float64 on the same inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest
import relplot
from relplot.estimators import KernelSmoother
from relplot.kernels import ReflectedGaussianKernel

from bayescal import plot
from bayescal.classification import (
    smooth_calibration_error,
    smooth_reliability_band,
    smooth_reliability_curve,
)
from bayescal.core import CalibrationCurve
from tests.conftest import X64

matplotlib.use("Agg")

DT = np.float64 if X64 else np.float32


def _data(seed: int, n: int, power: float):
    r = np.random.default_rng(seed)
    p = r.uniform(size=n)
    y = (r.uniform(size=n) < p**power).astype(np.float64)
    return y, p


# (seed, n, power): calibrated (power 1) and miscalibrated data, small and large n;
# n = 20000 calibrated gives a bandwidth below 0.01, where relplot's grids grow.
CASES = [
    (0, 40, 1.0),
    (1, 300, 1.0),
    (2, 1000, 0.5),
    (3, 2000, 2.0),
    pytest.param(4, 20000, 1.0, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("seed", "n", "power"), CASES)
def test_equals_relplot_smece(seed, n, power):
    y, p = _data(seed, n, power)
    ref, ref_sigma = relplot.smECE(p, y, return_width=True)
    got, sigma = smooth_calibration_error(y.astype(DT), p.astype(DT), return_bandwidth=True)
    assert sigma == ref_sigma  # the same bisection path
    np.testing.assert_allclose(float(got), ref, atol=1e-4 if not X64 else 1e-8)
    # the requirement is 1e-4; float32 gets ~1e-7 in practice
    assert abs(float(got) - ref) < 1e-4


@pytest.mark.parametrize("sigma", [0.004, 0.05, 0.3])
def test_equals_relplot_fixed_bandwidth(sigma):
    y, p = _data(5, 500, 1.5)
    ref = relplot.smECE_sigma(p, y, sigma)
    got = smooth_calibration_error(y.astype(DT), p.astype(DT), bandwidth=sigma)
    np.testing.assert_allclose(float(got), ref, atol=1e-6 if not X64 else 1e-10)


def test_curve_equals_relplot_kernel_smoother():
    y, p = _data(6, 800, 0.7)
    _, sigma = relplot.smECE(p, y, return_width=True)
    mesh = np.linspace(0, 1, 200)
    ref = KernelSmoother(ReflectedGaussianKernel(sigma)).fit(p.reshape(-1, 1), y)
    ref_mu = ref.predict(mesh.reshape(-1, 1))
    c = smooth_reliability_curve(y.astype(DT), p.astype(DT))
    assert isinstance(c, CalibrationCurve)
    np.testing.assert_allclose(np.asarray(c.expected), mesh, atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(c.observed), ref_mu, atol=1e-5 if not X64 else 1e-10
    )
    # the density is relplot's ReflectedGaussianKernel.apply of ones
    ref_dens = ReflectedGaussianKernel(sigma).apply(p, np.ones_like(p), mesh) + 1e-4
    np.testing.assert_allclose(
        np.asarray(c.weight), ref_dens, rtol=1e-5 if not X64 else 1e-10
    )


def test_jit_with_bandwidth_equals_eager():
    y, p = _data(7, 200, 1.0)
    y, p = jnp.asarray(y, DT), jnp.asarray(p, DT)
    eager = smooth_calibration_error(y, p, bandwidth=0.1)
    jitted = jax.jit(lambda a, b: smooth_calibration_error(a, b, bandwidth=0.1))(y, p)
    np.testing.assert_allclose(float(jitted), float(eager), rtol=1e-6)


def test_vmap_with_bandwidth_equals_loop():
    ys, ps = zip(*[_data(s, 100, 1.3) for s in range(3)], strict=True)
    ys, ps = jnp.asarray(np.stack(ys), DT), jnp.asarray(np.stack(ps), DT)
    f = jax.vmap(lambda a, b: smooth_calibration_error(a, b, bandwidth=0.08))
    loop = [
        float(smooth_calibration_error(a, b, bandwidth=0.08))
        for a, b in zip(ys, ps, strict=True)
    ]
    np.testing.assert_allclose(np.asarray(f(ys, ps)), loop, rtol=1e-5)


def test_invalid_values_under_jit_give_nan():
    y = jnp.array([0.0, 1.0, 2.0], DT)  # 2 is not a label
    p = jnp.array([0.2, 0.5, 0.7], DT)
    out = jax.jit(lambda a, b: smooth_calibration_error(a, b, bandwidth=0.1))(y, p)
    assert np.isnan(float(out))


@pytest.mark.slow
def test_perfect_predictions_have_small_error_and_fixed_point():
    # A deterministic, perfectly calibrated forecaster: y = 1 exactly when p = 1.
    y = np.array([0.0] * 50 + [1.0] * 50)
    p = y.copy()
    err, sigma = smooth_calibration_error(y, p, return_bandwidth=True)
    ref = relplot.smECE(p, y)
    assert abs(float(err) - ref) < 1e-4
    assert float(err) < 1e-3


def test_band_contains_curve_and_is_reproducible():
    y, p = _data(8, 400, 1.0)
    kw = {"num_samples": 50, "num_points": 50, "bandwidth": 0.1}
    a = smooth_reliability_band(0, y, p, **kw)
    b = smooth_reliability_band(jax.random.key(0), y, p, **kw)
    np.testing.assert_array_equal(np.asarray(a.lower), np.asarray(b.lower))
    lo, hi, mu = np.asarray(a.lower), np.asarray(a.upper), np.asarray(a.observed)
    assert np.all(lo <= hi)
    # the full-data curve lies inside its 95% bootstrap band except at a few points
    inside = (mu >= lo - 1e-6) & (mu <= hi + 1e-6)
    assert inside.mean() > 0.9
    c = smooth_reliability_band(1, y, p, **kw)
    assert not np.array_equal(np.asarray(c.lower), lo)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"bandwidth": 0.0}, ValueError, "bandwidth must be None"),
        ({"bandwidth": 1.5}, ValueError, "bandwidth must be None"),
        ({"bandwidth": "auto"}, TypeError, "bandwidth must be None"),
        ({"return_bandwidth": 1}, TypeError, "return_bandwidth must be a bool"),
    ],
)
def test_bad_options_raise(kwargs, err, match):
    with pytest.raises(err, match=match):
        smooth_calibration_error([0, 1], [0.2, 0.8], **kwargs)


def test_bad_values_raise():
    with pytest.raises(ValueError, match="y_true must hold binary labels"):
        smooth_calibration_error([0, 2], [0.2, 0.8])
    with pytest.raises(ValueError, match=r"y_prob must lie in \[0, 1\]"):
        smooth_calibration_error([0, 1], [0.2, 1.8])
    with pytest.raises(ValueError, match="y_prob has shape"):
        smooth_calibration_error([0, 1, 1], [0.2, 0.8])
    with pytest.raises(TypeError, match="key"):
        smooth_reliability_band(None, [0, 1], [0.2, 0.8])
    with pytest.raises(TypeError, match="num_points=None"):
        jax.jit(lambda a, b: smooth_reliability_curve(a, b, num_points=None))(
            jnp.array([0.0, 1.0]), jnp.array([0.2, 0.8])
        )


def test_jit_and_vmap_find_the_fixed_point_bandwidth():
    # the bisection runs in the compiled program: jit and vmap need no bandwidth
    y, p = _data(10, 300, 1.0)
    y, p = jnp.asarray(y, DT), jnp.asarray(p, DT)
    eager, sigma = smooth_calibration_error(y, p, return_bandwidth=True)
    jitted, jsigma = jax.jit(
        lambda a, b: smooth_calibration_error(a, b, return_bandwidth=True)
    )(y, p)
    assert float(jsigma) == sigma
    np.testing.assert_allclose(float(jitted), float(eager), rtol=1e-6)
    ys, ps = zip(*[_data(s, 100, 1.3) for s in range(3)], strict=True)
    ys, ps = jnp.asarray(np.stack(ys), DT), jnp.asarray(np.stack(ps), DT)
    batched = jax.vmap(lambda a, b: smooth_calibration_error(a, b, return_bandwidth=True))
    errs, sigmas = batched(ys, ps)
    loop = [
        smooth_calibration_error(a, b, return_bandwidth=True)
        for a, b in zip(ys, ps, strict=True)
    ]
    np.testing.assert_array_equal(np.asarray(sigmas), [s for _, s in loop])
    np.testing.assert_allclose(np.asarray(errs), [float(e) for e, _ in loop], rtol=1e-5)


def test_plot_draws_curve_band_and_density():
    y, p = _data(9, 300, 1.0)
    ax = plot.smooth_reliability_diagram(y, p, key=0, num_samples=30)
    assert isinstance(ax, matplotlib.axes.Axes)
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(label.startswith("smoothed (smECE = ") for label in labels)
    assert "ideal" in labels
    # the band and the density are two filled collections
    assert len(ax.collections) == 2
    curve = next(line for line in ax.get_lines() if line.get_label().startswith("smoothed"))
    ref_mu = np.asarray(smooth_reliability_curve(y, p).observed)
    # the plot smooths at the bandwidth found (convolution grid of that bandwidth), the
    # curve inside the search's program (FFT of the largest grid): equal to rounding
    np.testing.assert_allclose(curve.get_ydata(), ref_mu, rtol=1e-6, atol=2e-7)
    matplotlib.pyplot.close("all")
    ax2 = plot.smooth_reliability_diagram(y, p, density=False)
    assert len(ax2.collections) == 0
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize(("seed", "n", "power"), [(5, 500, 1.5), (2, 40000, 1.0)])
def test_band_eager_two_programs_equal_the_searching_program(seed, n, power):
    # Eagerly with bandwidth=None the band runs the smooth-ECE search first and then a
    # program with the bandwidth's grid fixed; under jit the search runs inside the one
    # program. Both must give the same band (the same resamples, the same bandwidth).
    # n = 40000 calibrated: a bandwidth below 0.01, whose grid is larger than 1001.
    y, p = _data(seed, n, power)
    y, p = y.astype(DT), p.astype(DT)
    kw = {"num_samples": 12, "num_points": 40}
    eager = smooth_reliability_band(7, y, p, **kw)
    traced = jax.jit(lambda k, a, b: smooth_reliability_band(k, a, b, **kw))(
        jax.random.key(7), y, p
    )
    _, sigma = smooth_calibration_error(y, p, return_bandwidth=True)
    if n == 40000:
        assert sigma < 0.01  # the case this parameter is for
    fixed = smooth_reliability_band(7, y, p, bandwidth=sigma, **kw)
    for got in (traced, fixed):
        for a, b in zip(eager, got, strict=True):
            assert (a is None) == (b is None)
            if a is None:  # the curve's edges: none for a smooth curve
                continue
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_band_mesh_of_the_bandwidth_eagerly():
    # num_points=None: relplot's smECE mesh max(round(10 / sigma), 200) for the fixed
    # point (eagerly the bandwidth is known before the band's program is compiled)
    y, p = _data(9, 300, 2.0)
    _, sigma = smooth_calibration_error(y, p, return_bandwidth=True)
    band = smooth_reliability_band(0, y, p, num_points=None, num_samples=5)
    assert band.expected.shape == (max(round(10 / sigma), 200),)


def test_pointwise_quantiles_equal_numpy():
    # numpy.quantile, method "linear" (its default), is the reference
    from bayescal.classification._smooth import _pointwise_quantiles

    r = np.random.default_rng(3)
    for m, level in [(200, 0.95), (7, 0.5), (2, 0.9), (51, 0.999)]:
        x = r.normal(size=(m, 13)).astype(DT)
        lo, hi = _pointwise_quantiles(jnp.asarray(x), jnp.asarray(level, DT))
        ref = np.quantile(x.astype(np.float64), [(1 - level) / 2, (1 + level) / 2], axis=0)
        np.testing.assert_allclose(np.asarray(lo), ref[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(hi), ref[1], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- host path
# Concrete CPU inputs take NumPy twins (bayescal._src.host): relplot's arithmetic in
# float64, the kernel's bisection decisions, the kernel's mesh. Compared with the
# kernel path (host.disabled()) as tests/test_host_path.py compares every twin.
@pytest.mark.parametrize(("seed", "n", "power"), CASES)
@pytest.mark.parametrize("bandwidth", [None, 0.05, 0.3, 1])
def test_host_twins_equal_the_kernel_and_relplot(seed, n, power, bandwidth):
    from tests.test_host_path import assert_same, both

    y, p = _data(seed, n, power)
    y, p = y.astype(DT), p.astype(DT)
    got, want, answered = both(
        lambda: smooth_calibration_error(y, p, bandwidth=bandwidth, return_bandwidth=True)
    )
    assert answered == [True]
    assert got[0][1] == want[0][1]  # the bandwidth (the bisection's: exactly)
    assert_same((got[0][0], None), (want[0][0], None))
    ref = (
        relplot.smECE(p.astype(np.float64), y, return_width=True)[0]
        if bandwidth is None
        else relplot.smECE_sigma(p.astype(np.float64), y, bandwidth)
    )
    # float64 arithmetic on the host: closer to relplot than the float32 kernel
    np.testing.assert_allclose(float(got[0][0]), ref, rtol=1e-12 if X64 else 1e-6)
    for points in (200, None, 7):
        got, want, answered = both(
            lambda points=points: smooth_reliability_curve(
                y, p, bandwidth=bandwidth, num_points=points
            )
        )
        assert answered == [True]
        assert_same(got, want)
        np.testing.assert_array_equal(got[0].expected, want[0].expected)  # the mesh


def test_host_twins_leave_bad_input_to_the_kernel():
    from tests.test_host_path import both

    bad = [
        (smooth_calibration_error, ([0, 2], [0.2, 0.8]), {}),
        (smooth_calibration_error, ([0, 1], [0.2, 1.8]), {}),
        (smooth_calibration_error, ([0, 1], [0.2, 0.8]), {"bandwidth": 0.0}),
        (smooth_calibration_error, ([0, 1], [0.2, 0.8]), {"return_bandwidth": 1}),
        (smooth_reliability_curve, ([0, 1], [0.2, np.nan]), {}),
        (smooth_reliability_curve, ([0, 1], [0.2, 0.8]), {"num_points": 1}),
        (smooth_reliability_curve, ([0, 1], [0.2, 0.8]), {"bandwidth": True}),
    ]
    for fn, args, kwargs in bad:
        got, want, answered = both(
            lambda fn=fn, args=args, kwargs=kwargs: fn(*args, **kwargs)
        )
        assert want[1] is not None, "not a bad input"
        assert got[1] == want[1]
        assert not any(answered)


def test_band_searches_its_bandwidth_on_the_host_and_compiles_one_program():
    # Where the band's twin declines (here: its key split fails; in use: several
    # devices, more than HOST_MAX values) the kernel runs,
    # with the bandwidth still searched on the host: one program, reused at a new N
    from unittest import mock

    from bayescal._src import host
    from bayescal.classification import _smooth
    from tests.conftest import compilations_during

    y, p = _data(7, 777, 2.0)
    bands = []
    with mock.patch.object(_smooth, "_split_words", side_effect=RuntimeError):
        # the one program (the resampling) compiled for this bucket: a new N reuses it
        smooth_reliability_band(0, y[:770], p[:770], num_samples=20)  # bucket 896, as 777
        assert (
            compilations_during(
                lambda: bands.append(
                    jax.block_until_ready(smooth_reliability_band(1, y, p, num_samples=20))
                )
            )
            == 0
        )
    with host.disabled():
        ref = smooth_reliability_band(1, y, p, num_samples=20)
    for a, b in zip(jax.tree.leaves(bands[0]), jax.tree.leaves(ref), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


KEYS = {
    "int": lambda: 3,
    "typed": lambda: jax.random.key(11),
    "legacy": lambda: jax.random.PRNGKey(2**31 + 5),
}


@pytest.mark.parametrize("key", sorted(KEYS))
@pytest.mark.parametrize(
    ("n", "kwargs"),
    [
        (300, {"num_samples": 37, "level": 0.8}),
        (300, {"num_samples": 5, "num_points": None, "bandwidth": 0.1}),
        (2500, {"num_samples": 200}),
    ],
)
def test_host_band_equals_the_kernel(key, n, kwargs):
    # The twin draws the kernel's resamples (the same split keys seed NumPy's
    # generator, as bands.cell_draws does), so the band is the kernel's to rounding
    from tests.test_host_path import assert_same, both

    y, p = _data(n, n, 1.5)
    y, p = y.astype(DT), p.astype(DT)
    got, want, answered = both(lambda: smooth_reliability_band(KEYS[key](), y, p, **kwargs))
    assert answered == [True]
    assert_same(got, want)
    np.testing.assert_array_equal(got[0].expected, want[0].expected)  # the mesh
    assert got[0].lower is not None and got[0].upper is not None


def test_host_band_compiles_only_its_key_split():
    # The twin draws its resamples' keys with jax.random.split (one small program per
    # num_samples), the rest in NumPy: nothing more at a new N or another key
    from tests.conftest import compilations_during

    y, p = _data(12, 1234, 2.0)
    first = compilations_during(lambda: smooth_reliability_band(4, y, p, num_samples=31))
    assert first <= 1
    again = compilations_during(
        lambda: smooth_reliability_band(jax.random.key(5), y[:1000], p[:1000], num_samples=31)
    )
    assert again == 0


def test_host_band_leaves_bad_input_to_the_kernel():
    from tests.test_host_path import both

    y, p = [0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4]
    bad = [
        ((0, [0, 2, 1, 0], p), {}),
        ((0, y, [0.2, 1.7, 0.9, 0.4]), {}),
        ((-1, y, p), {}),
        ((0, y, p), {"num_samples": 1}),
        ((0, y, p), {"num_samples": 2.0}),
        ((0, y, p), {"level": 1.0}),
        ((0, y, p), {"num_points": 1}),
        ((0, y, p), {"bandwidth": 0.0}),
    ]
    for args, kwargs in bad:
        got, want, answered = both(
            lambda args=args, kwargs=kwargs: smooth_reliability_band(*args, **kwargs)
        )
        assert want[1] is not None, "not a bad input"
        assert got[1] == want[1]
        assert not any(answered)
