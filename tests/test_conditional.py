"""Conditional calibration: spread-skill / ENCE, per-group curves, adversarial groups.

References: a float64 numpy reimplementation of ENCE written from Levi et al. (2022),
"Evaluating and Calibrating Uncertainty Prediction in Regression Tasks", Sensors
22(15) 5540, Sec. 3 (uncertainty-toolbox 0.1.1 has no ENCE); uncertainty-toolbox's
``metrics_calibration.adversarial_group_calibration`` and
``mean_absolute_calibration_error``; bayescal's own ``calibration_curve`` /
``calibration_error`` on each group's subset for the per-group functions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import uncertainty_toolbox as uct
from hypothesis import given
from hypothesis import strategies as st

from bayescal import regression as reg
from bayescal.core import CalibrationCurve
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
RTOL = 1e-10 if X64 else 2e-5


def _gaussian(seed: int, n: int, inflate: float = 1.0):
    r = np.random.default_rng(seed)
    loc = r.normal(size=n)
    scale = r.uniform(0.3, 3.0, size=n)
    y = loc + inflate * scale * r.normal(size=n)
    return y, loc, scale


def _ence_reference(y, loc, scale, bins):
    """Levi et al. (2022): sort by sigma, equal-count bins, mean |RMV - RMSE| / RMV."""
    order = np.argsort(scale, kind="stable")
    rmv, rmse = [], []
    for idx in np.array_split(order, bins):
        if idx.size == 0:
            continue
        rmv.append(np.sqrt(np.mean(scale[idx] ** 2)))
        rmse.append(np.sqrt(np.mean((y[idx] - loc[idx]) ** 2)))
    rmv, rmse = np.array(rmv), np.array(rmse)
    return np.mean(np.abs(rmv - rmse) / rmv), rmv, rmse


# ----------------------------------------------------------------------------- ENCE
@pytest.mark.parametrize(("n", "bins"), [(100, 10), (1003, 7), (57, 5), (6, 10)])
def test_ence_and_curve_equal_reference(n, bins):
    y, loc, scale = _gaussian(n, n, inflate=1.2)
    ref, rmv, rmse = _ence_reference(y, loc, scale, bins)
    got = reg.expected_normalized_calibration_error(
        y.astype(DT), loc.astype(DT), scale.astype(DT), bins=bins
    )
    np.testing.assert_allclose(float(got), ref, rtol=RTOL * 10)
    c = reg.spread_skill_curve(y.astype(DT), loc.astype(DT), scale.astype(DT), bins=bins)
    assert isinstance(c, CalibrationCurve)
    full = np.asarray(c.weight) > 0
    sizes = [a.size for a in np.array_split(np.arange(n), bins)]
    np.testing.assert_array_equal(np.asarray(c.weight), sizes)
    np.testing.assert_allclose(np.asarray(c.expected)[full], rmv, rtol=RTOL * 10)
    np.testing.assert_allclose(np.asarray(c.observed)[full], rmse, rtol=RTOL * 10)
    assert np.all(np.isnan(np.asarray(c.expected)[~full]))  # empty bins (n < bins)


def test_uniform_strategy_equals_reference():
    y, loc, scale = _gaussian(3, 500)
    edges = np.linspace(scale.min(), scale.max(), 9)
    idx = np.clip(np.searchsorted(edges, scale, side="right") - 1, 0, 7)
    terms = []
    for k in range(8):
        m = idx == k
        if m.any():
            rmv = np.sqrt(np.mean(scale[m] ** 2))
            terms.append(abs(rmv - np.sqrt(np.mean((y[m] - loc[m]) ** 2))) / rmv)
    got = reg.expected_normalized_calibration_error(
        y.astype(DT), loc.astype(DT), scale.astype(DT), bins=8, strategy="uniform"
    )
    np.testing.assert_allclose(float(got), np.mean(terms), rtol=RTOL * 10)


def test_ence_calibrated_and_miscalibrated_data():
    # Calibrated: per bin of m points RMSE/RMV ~ sqrt(chi2_m / m) ~ 1 + Z / sqrt(2m), so
    # ENCE ~ mean_k |Z_k| / sqrt(2m): mean sqrt(2/pi)/sqrt(2m) = 1/sqrt(pi m), sd
    # sqrt(1 - 2/pi) / sqrt(2m K). n = 20000, K = 10, m = 2000: 0.0126 +- 0.0030.
    n, k = 20000, 10
    m = n / k
    mean, sd = 1 / np.sqrt(np.pi * m), np.sqrt(1 - 2 / np.pi) / np.sqrt(2 * m * k)
    y, loc, scale = _gaussian(11, n)
    got = float(reg.expected_normalized_calibration_error(y, loc, scale, bins=k))
    assert abs(got - mean) < 5 * sd
    # Spread too small by 1.3: RMSE/RMV ~ 1.3 (1 + Z / sqrt(2m)), ENCE ~ 0.3 with sd
    # 1.3 / sqrt(2 m K).
    y, loc, scale = _gaussian(12, n, inflate=1.3)
    got = float(reg.expected_normalized_calibration_error(y, loc, scale, bins=k))
    assert abs(got - 0.3) < 5 * 1.3 / np.sqrt(2 * m * k)


def test_ence_jit_equals_eager_and_nan_for_bad_scale():
    y, loc, scale = (jnp.asarray(a, DT) for a in _gaussian(4, 64))
    f = jax.jit(lambda a, b, c: reg.expected_normalized_calibration_error(a, b, c, bins=4))
    eager = reg.expected_normalized_calibration_error(y, loc, scale, bins=4)
    np.testing.assert_allclose(float(f(y, loc, scale)), float(eager), rtol=RTOL * 10)
    assert np.isnan(float(f(y, loc, scale.at[0].set(-1.0))))


def test_ence_bad_input_raises():
    y, loc, scale = _gaussian(5, 20)
    with pytest.raises(ValueError, match="scale must be strictly positive"):
        reg.expected_normalized_calibration_error(y, loc, -scale)
    with pytest.raises(ValueError, match="loc has shape"):
        reg.expected_normalized_calibration_error(y, loc[:-1], scale)
    with pytest.raises(ValueError, match="strategy must be one of"):
        reg.spread_skill_curve(y, loc, scale, strategy="equal")
    with pytest.raises(TypeError, match="bins must be an int"):
        reg.spread_skill_curve(y, loc, scale, bins=2.5)
    with pytest.raises(ValueError, match="y_true contains 1 NaN"):
        reg.spread_skill_curve(np.r_[np.nan, y[1:]], loc, scale)


# ----------------------------------------------------------------------------- groups
def _groups(seed: int, n: int, g: int):
    r = np.random.default_rng(seed)
    return r.uniform(size=n).astype(DT), r.integers(0, g, size=n)


@pytest.mark.parametrize("kind", ["quantile", "interval"])
def test_group_curve_equals_loop(kind):
    pit, groups = _groups(0, 300, 4)
    c = reg.group_calibration_curve(pit, groups, num_levels=21, kind=kind)
    assert c.observed.shape == (4, 21)
    for g in range(4):
        ref = reg.calibration_curve(pit[groups == g], num_levels=21, kind=kind)
        np.testing.assert_allclose(np.asarray(c.observed[g]), np.asarray(ref.observed), rtol=RTOL)
        np.testing.assert_allclose(np.asarray(c.expected[g]), np.asarray(ref.expected))


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_group_error_equals_loop_and_empty_group_is_nan(norm):
    pit, groups = _groups(1, 200, 3)
    groups = np.where(groups == 1, 3, groups)  # group 1 is empty, 4 groups in all
    e = reg.group_calibration_error(pit, groups, norm=norm, num_levels=50)
    assert e.shape == (4,)
    assert np.isnan(float(e[1]))
    for g in (0, 2, 3):
        ref = reg.calibration_error(pit[groups == g], norm=norm, num_levels=50)
        np.testing.assert_allclose(float(e[g]), float(ref), rtol=RTOL)


@given(
    n=st.sampled_from([16, 33]),
    g=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_group_errors_equal_definition_property(n, g, seed):
    # Reference: MACE from its definition (Kuleshov et al. 2018), numpy float64:
    # mean over levels p of |#{u <= p} / n_g - p|. Ids drawn from [0, g) of 5 groups,
    # so some groups are empty (NaN).
    pit, groups = _groups(seed, n, g)
    e = np.asarray(reg.group_calibration_error(pit, groups, num_groups=5, num_levels=11))
    levels = np.linspace(0, 1, 11).astype(DT)
    for k in range(5):
        sub = pit[groups == k]
        if sub.size == 0:
            assert np.isnan(e[k])
        else:
            obs = (sub[:, None] <= levels[None, :]).mean(axis=0)
            np.testing.assert_allclose(e[k], np.abs(obs - levels).mean(), rtol=1e-5, atol=1e-7)


def test_group_jit_equals_eager_and_float_ids():
    pit, groups = _groups(2, 100, 3)
    eager = reg.group_calibration_error(pit, groups)
    jitted = jax.jit(lambda u, g: reg.group_calibration_error(u, g, num_groups=3))(
        jnp.asarray(pit), jnp.asarray(groups)
    )
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=RTOL)
    as_float = reg.group_calibration_error(pit, groups.astype(float))
    np.testing.assert_allclose(np.asarray(as_float), np.asarray(eager), rtol=RTOL)


def test_group_bad_input_raises():
    pit, groups = _groups(3, 30, 3)
    with pytest.raises(ValueError, match=r"groups must hold class indices in \[0, 1\]"):
        reg.group_calibration_curve(pit, groups, num_groups=2)
    with pytest.raises(ValueError, match="groups has shape"):
        reg.group_calibration_curve(pit, groups[:-1])
    with pytest.raises(ValueError, match="non-integer"):
        reg.group_calibration_curve(pit, groups + 0.5)
    with pytest.raises(ValueError, match=r"pit must lie in \[0, 1\]"):
        reg.group_calibration_curve(pit + 1, groups)
    with pytest.raises(TypeError, match="num_groups=None"):
        jax.jit(reg.group_calibration_curve)(jnp.asarray(pit), jnp.asarray(groups))
    with pytest.raises(ValueError, match="norm must be one of"):
        reg.group_calibration_error(pit, groups, norm="l3")


# ----------------------------------------------------------------------------- adversarial
def test_adversarial_full_group_equals_uncertainty_toolbox_mace():
    # At group size 1 every draw without replacement is the whole data set: no noise.
    y, loc, scale = _gaussian(6, 120, inflate=1.4)
    r = reg.adversarial_group_calibration(
        0, y, loc, scale, num_group_sizes=3, num_trials=2, num_group_draws=2
    )
    ref = uct.metrics_calibration.mean_absolute_calibration_error(
        loc, scale, y, num_bins=100, prop_type="interval"
    )
    np.testing.assert_allclose(float(r.mean[-1]), ref, rtol=1e-4)
    assert float(r.std[-1]) < 1e-6
    np.testing.assert_array_equal(np.asarray(r.group_count), [2, 60, 120])
    np.testing.assert_allclose(np.asarray(r.group_size), [0.0, 0.5, 1.0])


@pytest.mark.slow
@pytest.mark.parametrize(("norm", "cali_type", "replace"), [("l1", "mean_abs", False), ("l2", "root_mean_sq", True)])
def test_adversarial_inside_uncertainty_toolbox_monte_carlo_spread(norm, cali_type, replace):
    # Both are Monte Carlo means over num_trials independent trials of the worst error;
    # their difference has standard error sqrt(se_b^2 + se_ut^2), se = sd / sqrt(T)
    # (UT's "score_stderr" is the sd). 10 group sizes: a 4.5-sigma band for each keeps
    # the family-wise false alarm rate below 1e-4 under normality; 1e-6 absolute slack
    # for the noiseless full-size group.
    y, loc, scale = _gaussian(7, 300, inflate=1.3)
    trials = 10
    np.random.seed(0)  # noqa: NPY002 (uncertainty-toolbox draws from the global state)
    ut = uct.metrics_calibration.adversarial_group_calibration(
        loc, scale, y, cali_type=cali_type, num_trials=trials,
        draw_with_replacement=replace,
    )
    b = reg.adversarial_group_calibration(
        jax.random.key(0), y.astype(DT), loc.astype(DT), scale.astype(DT),
        norm=norm, num_trials=trials, replace=replace,
    )
    np.testing.assert_allclose(np.asarray(b.group_size), ut.group_size, atol=1e-7)
    np.testing.assert_allclose(np.asarray(b.stderr), np.asarray(b.std) / np.sqrt(trials), rtol=1e-6)
    se = np.sqrt((np.asarray(b.std) ** 2 + ut.score_stderr**2) / trials)
    diff = np.abs(np.asarray(b.mean) - ut.score_mean)
    assert np.all(diff <= 4.5 * se + 1e-5), (diff, se)


def test_adversarial_key_semantics_and_bad_input():
    y, loc, scale = _gaussian(8, 50)
    kw = {"num_group_sizes": 4, "num_trials": 3, "num_group_draws": 3}
    a = reg.adversarial_group_calibration(3, y, loc, scale, **kw)
    b = reg.adversarial_group_calibration(jax.random.key(3), y, loc, scale, **kw)
    c = reg.adversarial_group_calibration(4, y, loc, scale, **kw)
    np.testing.assert_array_equal(np.asarray(a.mean), np.asarray(b.mean))
    assert not np.array_equal(np.asarray(a.mean[:-1]), np.asarray(c.mean[:-1]))
    with pytest.raises(TypeError, match="key is required"):
        reg.adversarial_group_calibration(None, y, loc, scale)
    with pytest.raises(ValueError, match="num_trials must be an int >= 2"):
        reg.adversarial_group_calibration(0, y, loc, scale, num_trials=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        reg.adversarial_group_calibration(0, y, loc, scale, kind="central")
    with pytest.raises(ValueError, match="at least 2 observations"):
        reg.adversarial_group_calibration(0, y[:1], loc[:1], scale[:1])


@pytest.mark.parametrize("sampler", ["selection", "hypergeometric"])
def test_selection_sampling_draws_exact_sizes_uniformly(sampler):
    # Knuth's Algorithm S (the XLA path on several devices) and the multivariate
    # hypergeometric counts (one device): each lane selects exactly k_m points, and each
    # point is selected with probability k_m / n. With one level per point
    # (b = arange), the counts are inclusion indicators; over 400 lanes of size 10 from
    # n = 40 each point's inclusion count is Binomial(400, 1/4): mean 100, sd
    # sqrt(75) = 8.7; 5 sd bound. Padding after the n real points is never taken.
    from bayescal.regression import _conditional

    draw = {
        "selection": _conditional._subset_counts_without_replacement,
        "hypergeometric": _conditional._subset_counts_hypergeometric,
    }[sampler]
    n, lanes, k = 40, 400, 10
    sizes = jnp.concatenate([jnp.full((lanes,), k, jnp.int32), jnp.array([0, 1, n], jnp.int32)])
    b = jnp.concatenate([jnp.arange(n), jnp.full((8,), 3)])  # 8 padding slots at level 3
    counts = np.asarray(draw(jax.random.key(0), b, sizes, n, jnp.asarray(n)))
    np.testing.assert_array_equal(counts.sum(axis=1), np.asarray(sizes))
    assert counts.max() == 1  # without replacement
    inclusion = counts[:lanes].sum(axis=0)
    assert np.all(np.abs(inclusion - lanes * k / n) < 5 * np.sqrt(lanes * 0.25 * 0.75))
