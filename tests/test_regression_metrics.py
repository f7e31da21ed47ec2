"""Calibration curves, errors, areas and sharpness.

References: uncertainty-toolbox 0.1.1 (its own test fixture values, from
``tests/test_metrics_calibration.py`` of uncertainty-toolbox, and its functions run
live), scipy.stats.kstest's distribution for statistical tolerances, and fine-grid
quadrature for the exact area.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
import uncertainty_toolbox.metrics_calibration as utc
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bayescal import regression as reg
from tests.conftest import X64

ATOL = 1e-9 if X64 else 2e-6

# uncertainty-toolbox's fixture: mean [1, 2, 3], std [.1, .5, 1], y [1.5, 3, 2]
UT_MEAN, UT_STD, UT_Y = (
    np.array([1.0, 2.0, 3.0]),
    np.array([0.1, 0.5, 1.0]),
    np.array([1.5, 3.0, 2.0]),
)
UT_VALUES = {  # from uncertainty-toolbox's tests (rounded to 5 decimals there)
    "interval": {"mace": 0.37333, "rmsce": 0.41658, "area": 0.37710},
    "quantile": {"mace": 0.23758, "rmsce": 0.30363, "area": 0.23916},
}


@pytest.mark.parametrize("kind", ["interval", "quantile"])
def test_uncertainty_toolbox_fixture_values(kind):
    u = reg.pit_normal(UT_Y, UT_MEAN, UT_STD)
    want = UT_VALUES[kind]
    np.testing.assert_allclose(reg.calibration_error(u, kind=kind), want["mace"], atol=6e-6)
    np.testing.assert_allclose(
        reg.calibration_error(u, kind=kind, norm="l2"), want["rmsce"], atol=6e-6
    )
    np.testing.assert_allclose(
        reg.miscalibration_area(u, kind=kind, num_levels=100), want["area"], atol=6e-6
    )


@pytest.mark.parametrize("kind", ["interval", "quantile"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_uncertainty_toolbox_on_random_inputs(kind, seed):
    r = np.random.default_rng(seed)
    n = 500
    mean = r.normal(size=n)
    std = r.uniform(0.2, 2.0, n)
    y = mean + r.standard_t(4, n) * std * r.uniform(0.5, 1.5)  # miscalibrated
    u = reg.pit_normal(y, mean, std)
    for vectorized in (True, False):
        ref_mace = utc.mean_absolute_calibration_error(
            mean, std, y, vectorized=vectorized, prop_type=kind
        )
        ref_rmsce = utc.root_mean_squared_calibration_error(
            mean, std, y, vectorized=vectorized, prop_type=kind
        )
        ref_area = utc.miscalibration_area(
            mean, std, y, vectorized=vectorized, prop_type=kind
        )
        # A PIT value within float32 rounding of a grid level may fall on the other side:
        # each such flip moves one level by 1/n, so allow that in float32.
        tol = 1e-7 if X64 else 2.5 / n / 100
        np.testing.assert_allclose(reg.calibration_error(u, kind=kind), ref_mace, atol=tol)
        np.testing.assert_allclose(
            reg.calibration_error(u, kind=kind, norm="l2"), ref_rmsce, atol=tol
        )
        np.testing.assert_allclose(
            reg.miscalibration_area(u, kind=kind, num_levels=100), ref_area, atol=tol
        )


def test_interval_curve_equals_uncertainty_toolbox_curve(rng):
    mean, std = rng.normal(size=300), rng.uniform(0.5, 1.5, 300)
    y = mean + 1.3 * std * rng.normal(size=300)
    exp, obs = utc.get_proportion_lists_vectorized(mean, std, y, prop_type="interval")
    c = reg.calibration_curve(reg.pit_normal(y, mean, std), kind="interval")
    np.testing.assert_allclose(c.expected, exp, atol=1e-7)
    np.testing.assert_allclose(c.observed, obs, atol=ATOL if X64 else 1 / 300 + 1e-7)
    # quantile kind: uncertainty-toolbox uses prediction minus truth, so its curve is
    # ours mirrored: obs_ut(p) = 1 - G(1 - p) (up to ties at grid points).
    exp_q, obs_q = utc.get_proportion_lists_vectorized(mean, std, y, prop_type="quantile")
    cq = reg.calibration_curve(reg.pit_normal(y, mean, std), kind="quantile")
    np.testing.assert_allclose(
        obs_q[1:-1], 1 - np.asarray(cq.observed)[::-1][1:-1], atol=1 / 300 + 1e-7
    )


def test_curve_definition_direct_counting(rng):
    u = rng.uniform(size=257)
    u[:10] = np.linspace(0, 1, 10)  # exact grid points and the ends
    u = u.astype(np.float64 if X64 else np.float32)  # the statistic in the compute dtype
    for kind, stat in [("quantile", u), ("interval", np.abs(2 * u - 1))]:
        c = reg.calibration_curve(u, num_levels=37, kind=kind)
        lv = np.asarray(c.expected)
        np.testing.assert_allclose(lv, np.linspace(0, 1, 37), atol=1e-7)
        ref = (stat[:, None] <= lv[None, :]).mean(0)
        np.testing.assert_allclose(c.observed, ref, atol=1e-7)
        np.testing.assert_array_equal(c.weight, np.ones(37))


def test_exact_area_matches_fine_grid(rng):
    u = rng.beta(0.7, 1.3, size=2000)
    for kind in ("quantile", "interval"):
        exact = float(reg.miscalibration_area(u, kind=kind))
        stat = np.sort(u if kind == "quantile" else np.abs(2 * u - 1))
        p = np.linspace(0, 1, 2_000_001)
        g = np.searchsorted(stat, p, side="right") / stat.size
        np.testing.assert_allclose(
            exact, np.trapezoid(np.abs(g - p), p), atol=1e-6 if X64 else 2e-5
        )
        # a fine polygon grid converges to it (the piecewise-linear curve smooths jumps)
        fine = float(reg.miscalibration_area(u, kind=kind, num_levels=20_001))
        assert abs(fine - exact) < 1e-3


@pytest.mark.slow
def test_calibrated_data_gives_near_zero_error():
    # Under perfect calibration sqrt(n) * max_p |G_n(p) - p| follows Kolmogorov's
    # distribution; its 99.9% quantile is 1.95, and MACE, RMSCE and the area are all
    # bounded by the max gap (plus 1/num_levels grid effects for the grid errors).
    n = 20_000
    rng = np.random.default_rng(11)
    loc, scale = rng.normal(size=n), rng.uniform(0.5, 2, n)
    y = loc + scale * rng.normal(size=n)
    u = reg.pit_normal(y, loc, scale)
    bound = scipy.stats.kstwobign.ppf(0.999) / np.sqrt(n)
    for kind in ("quantile", "interval"):
        assert float(reg.calibration_error(u, kind=kind, norm="max")) < bound
        assert float(reg.calibration_error(u, kind=kind)) < bound
        assert float(reg.miscalibration_area(u, kind=kind)) < bound
    # ... while a model with a 2x too small scale is far off.
    u_bad = reg.pit_normal(y, loc, scale / 2)
    assert float(reg.miscalibration_area(u_bad, kind="interval")) > 10 * bound


@given(
    hnp.arrays(np.float32, 64, elements=st.floats(0, 1, width=32, allow_subnormal=False)),
    st.sampled_from(["quantile", "interval"]),
)
def test_curve_properties(u, kind):
    c = reg.calibration_curve(jnp.asarray(u), num_levels=50, kind=kind)
    obs = np.asarray(c.observed)
    assert np.all(np.diff(obs) >= 0) and obs[-1] == 1.0 and obs.min() >= 0
    l1 = float(reg.calibration_error(u, kind=kind, num_levels=50))
    l2 = float(reg.calibration_error(u, kind=kind, num_levels=50, norm="l2"))
    mx = float(reg.calibration_error(u, kind=kind, num_levels=50, norm="max"))
    assert l1 <= l2 + 1e-6 <= mx + 2e-6
    area = float(reg.miscalibration_area(u, kind=kind))
    assert 0 <= area <= 0.5 + 1e-6


@given(
    hnp.arrays(np.float32, 64, elements=st.floats(0, 1, width=32, allow_subnormal=False))
)
def test_exact_area_mirror_invariance(u):
    # G of 1 - u is the reflected ECDF; |G(p) - p| integrates to the same area.
    a = float(reg.miscalibration_area(jnp.asarray(u)))
    b = float(reg.miscalibration_area(1 - jnp.asarray(u)))
    assert abs(a - b) < 1e-5


def test_sharpness_matches_uncertainty_toolbox(rng):
    std = rng.uniform(0.1, 3, 100)
    np.testing.assert_allclose(reg.sharpness(std, root=True), utc.sharpness(std), rtol=1e-6)
    np.testing.assert_allclose(reg.sharpness(std), np.mean(std**2), rtol=1e-6)
    draws = rng.normal(size=(50, 100)) * std
    np.testing.assert_allclose(
        reg.sharpness(draws=draws), np.var(draws, axis=0).mean(), rtol=1e-5
    )
    with pytest.raises(ValueError, match="exactly one of scale"):
        reg.sharpness()
    with pytest.raises(ValueError, match="scale must be strictly positive"):
        reg.sharpness([1.0, 0.0])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: reg.calibration_curve([0.2, 1.2]), "pit must lie in \\[0, 1\\]"),
        (lambda: reg.calibration_curve([0.2, np.nan]), "pit contains 1 NaN"),
        (lambda: reg.calibration_curve([]), "pit is empty"),
        (lambda: reg.calibration_curve([0.5], kind="two-sided"), "kind must be one of"),
        (
            lambda: reg.calibration_curve([0.5], num_levels=1),
            "num_levels must be an int >= 2",
        ),
        (lambda: reg.calibration_curve([0.5], num_levels=2.5), "num_levels must be an int"),
        (lambda: reg.calibration_error([0.5], norm="l3"), "norm must be one of"),
        (lambda: reg.miscalibration_area([[0.5]]), "pit must be 1-D"),
        (lambda: reg.miscalibration_area([-0.1]), "pit must lie in \\[0, 1\\]"),
    ],
)
def test_metric_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_metrics_jit_equals_eager_and_vmap_equals_loop(rng):
    u = jnp.asarray(
        rng.beta(2, 3, size=(3, 200)), dtype=jnp.float32 if not X64 else jnp.float64
    )
    fns = {
        "curve": lambda p: (
            reg.calibration_curve(p, num_levels=20, kind="interval").observed
        ),
        "l1": lambda p: reg.calibration_error(p),
        "l2q": lambda p: reg.calibration_error(p, norm="l2", kind="interval"),
        "area": lambda p: reg.miscalibration_area(p),
        "grid_area": lambda p: reg.miscalibration_area(p, num_levels=50),
    }
    for name, fn in fns.items():
        loop = jnp.stack([fn(u[i]) for i in range(3)])
        np.testing.assert_allclose(jax.vmap(fn)(u), loop, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(jax.jit(fn)(u[0]), loop[0], rtol=1e-6, err_msg=name)
    # the public function itself under jit, with static options
    jitted = jax.jit(reg.calibration_error, static_argnames=("norm", "num_levels", "kind"))
    # (the eager call's program is compiled with other XLA options: an ulp may differ)
    np.testing.assert_allclose(
        jitted(u[1], norm="max"), reg.calibration_error(u[1], norm="max"), rtol=1e-6
    )
    # results keep the input dtype
    assert reg.calibration_error(u[0]).dtype == u.dtype
    assert reg.miscalibration_area(u[0]).dtype == u.dtype


def test_public_functions_under_jit_with_closed_over_concrete_arrays(rng):
    # Concrete arrays captured by a jitted function work (no tracer-conversion error).
    y = jnp.asarray(rng.normal(size=100))
    loc = jnp.asarray(rng.normal(size=100))

    @jax.jit
    def area(c):
        u = reg.pit_normal(y, loc, c * jnp.ones_like(loc))
        return reg.miscalibration_area(u)

    np.testing.assert_allclose(
        area(2.0),
        reg.miscalibration_area(reg.pit_normal(y, loc, 2.0 * jnp.ones(100))),
        rtol=1e-6,
    )
    bad = jnp.asarray(np.r_[np.nan, np.ones(99)])

    @jax.jit
    def with_nan(c):
        return reg.pit_normal(bad, loc, c * jnp.ones_like(loc))

    # Under jit nothing can raise: the invalid value makes the whole result NaN
    # (conventions: "Under jit/vmap, invalid values give NaN"), never a plausible number.
    assert np.isnan(np.asarray(with_nan(1.0))).all()
