"""select_recalibrator: cross-validated recalibrators of Normal predictives vs a plain loop.

Reference: for every fold of scikit-learn's ``PredefinedSplit`` over the same fold ids,
each candidate is fitted on the training part with the library's public fits
(``fit_sigma_scaling``; ``fit_isotonic_recalibrator`` on ``pit_normal``) and scored on
the held-out part with formulas written here with scipy: the Normal CRPS in closed form
(Gneiting & Raftery 2007, eq. 5), the isotonic predictive's CRPS as the quantile-score
integral (their eq. 21) over the quantiles of the public ``recalibrated_quantiles`` at
the same midpoint levels, and the interval score (their eq. 43) of
``recalibrated_interval``'s bounds.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy.stats import norm
from sklearn.model_selection import PredefinedSplit

from bayescal import regression as reg
from bayescal.regression._select import GRID, _crps_grid

DT = np.float64 if jax.config.jax_enable_x64 else np.float32
TOL = dict(rtol=1e-4, atol=1e-5) if not jax.config.jax_enable_x64 else dict(rtol=1e-7, atol=1e-9)


def _data(n, seed, spread=1.0, bias=0.0):
    """Normal predictives N(loc, scale^2); y drawn with ``spread`` x the scale."""
    rng = np.random.default_rng(seed)
    loc = rng.normal(size=n)
    scale = rng.uniform(0.5, 2.0, n)
    y = loc + bias + spread * scale * rng.normal(size=n)
    return y, loc, scale


def _crps_normal(y, mu, sigma):
    z = (y - mu) / sigma
    return sigma * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))


def _interval(y, lo, hi, alpha):
    return (hi - lo) + 2 / alpha * (lo - y) * (y < lo) + 2 / alpha * (y - hi) * (y > hi)


def _reference(y, loc, scale, folds, names, score, alpha=0.1, weights=None):
    y, loc, scale = (np.asarray(a, DT) for a in (y, loc, scale))
    w = np.ones(len(y)) if weights is None else np.asarray(weights, float)
    levels = (np.arange(GRID) + 0.5) / GRID
    table = np.empty((len(names), folds.max() + 1))
    for k, (tr, te) in enumerate(PredefinedSplit(folds).split()):
        yt, mt, st = (np.asarray(a[te], float) for a in (y, loc, scale))
        for c, name in enumerate(names):
            if name == "none" or name == "sigma":
                f = 1.0
                if name == "sigma":
                    f = float(reg.fit_sigma_scaling(y[tr], loc[tr], scale[tr], weights=w[tr]).factor)
                if score == "crps":
                    per = _crps_normal(yt, mt, f * st)
                else:
                    half = norm.ppf(1 - alpha / 2) * f * st
                    per = _interval(yt, mt - half, mt + half, alpha)
            else:
                pit = reg.pit_normal(y[tr], loc[tr], scale[tr])
                r = reg.fit_isotonic_recalibrator(pit, weights=w[tr])
                if score == "crps":
                    q = np.asarray(
                        reg.recalibrated_quantiles(r, levels, loc=loc[te], scale=scale[te]), float
                    )
                    qs = (yt - q) * (levels[:, None] - (yt < q))
                    per = 2 * qs.mean(axis=0)
                else:
                    lo, hi = reg.recalibrated_interval(r, alpha=alpha, loc=loc[te], scale=scale[te])
                    per = _interval(yt, np.asarray(lo, float), np.asarray(hi, float), alpha)
            table[c, k] = np.sum(w[te] * per) / np.sum(w[te])
    return table


@pytest.mark.parametrize("score", ["crps", "interval"])
def test_table_equals_a_loop_over_folds_and_candidates(score):
    y, loc, scale = _data(300, seed=1, spread=1.5, bias=0.2)
    res = reg.select_recalibrator(y, loc, scale, key=3, score=score)
    ref = _reference(y, loc, scale, res.folds, res.names, score)
    np.testing.assert_allclose(res.fold_scores, ref, **TOL)
    k = ref.shape[1]
    np.testing.assert_allclose(res.mean, ref.mean(1), **TOL)
    np.testing.assert_allclose(res.se, ref.std(1, ddof=1) / np.sqrt(k), rtol=2e-3, atol=1e-5)
    paired = ref - ref[0]
    np.testing.assert_allclose(res.diff_none, paired.mean(1), rtol=2e-3, atol=3e-5)
    assert res.winner == res.names[int(np.argmin(ref.mean(1)))]
    assert np.bincount(res.folds).max() - np.bincount(res.folds).min() <= 1


def test_own_folds_weights_and_alpha_match_the_loop():
    y, loc, scale = _data(200, seed=2, spread=0.6)
    folds = np.arange(200) % 4
    w = np.random.default_rng(0).integers(0, 4, 200).astype(float)
    res = reg.select_recalibrator(
        y, loc, scale, folds=folds, weights=w, score="interval", alpha=0.2
    )
    ref = _reference(y, loc, scale, folds, res.names, "interval", alpha=0.2, weights=w)
    np.testing.assert_allclose(res.fold_scores, ref, **TOL)
    res = reg.select_recalibrator(y, loc, scale, folds=folds, weights=w)
    ref = _reference(y, loc, scale, folds, res.names, "crps", weights=w)
    np.testing.assert_allclose(res.fold_scores, ref, **TOL)


def test_calibrated_model_none_wins_or_is_within_one_se():
    y, loc, scale = _data(400, seed=7, spread=1.0)
    for score in ("crps", "interval"):
        res = reg.select_recalibrator(y, loc, scale, key=0, score=score)
        i_none, i_win = res.names.index("none"), res.names.index(res.winner)
        assert res.mean[i_none] <= res.mean[i_win] + res.se[i_win]
        one_se = reg.select_recalibrator(y, loc, scale, key=0, score=score, rule="one_se")
        assert one_se.winner == "none" and one_se.recalibrator is None


@pytest.mark.parametrize("score", ["crps", "interval"])
def test_overdispersed_model_sigma_wins(score):
    # the right parametric fix; isotonic repairs the spread too, less efficiently
    # (at N = 400 the two were within noise of each other, either could win)
    y, loc, scale = _data(1000, seed=8, spread=2.0)
    res = reg.select_recalibrator(y, loc, scale, key=1, score=score)
    assert res.winner == "sigma"
    for name in ("sigma", "isotonic"):
        i = res.names.index(name)
        assert res.diff_none[i] < -2 * res.diff_none_se[i]


def test_winner_is_refitted_on_all_the_data():
    y, loc, scale = _data(250, seed=5, spread=1.7)
    res = reg.select_recalibrator(y, loc, scale, key=0, candidates=("sigma",))
    eager = reg.fit_sigma_scaling(y, loc, scale)
    assert type(res.recalibrator) is type(eager)
    np.testing.assert_allclose(float(res.recalibrator.factor), float(eager.factor), **TOL)
    res = reg.select_recalibrator(y, loc, scale, key=0, candidates=("isotonic",))
    eager = reg.fit_isotonic_recalibrator(reg.pit_normal(y, loc, scale))
    assert type(res.recalibrator) is type(eager)
    for a, b in zip(
        jax.tree_util.tree_leaves(res.recalibrator), jax.tree_util.tree_leaves(eager), strict=True
    ):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **TOL)


def test_quantile_grid_crps_of_a_normal_is_the_closed_form():
    # the isotonic candidate's quadrature, on Phi^-1 itself: within ~2e-6 on the mean
    t = np.random.default_rng(0).normal(size=2000) * 1.3
    zq = norm.ppf((np.arange(GRID) + 0.5) / GRID)
    grid, exact = _crps_grid(t, zq), _crps_normal(t, 0.0, 1.0)
    assert abs(grid.mean() - exact.mean()) < 5e-6 * exact.mean()
    # and the prefix sums equal the direct sum over levels
    levels = (np.arange(GRID) + 0.5) / GRID
    direct = 2 * ((t - zq[:, None]) * (levels[:, None] - (t < zq[:, None]))).mean(axis=0)
    np.testing.assert_allclose(grid, direct, rtol=1e-10, atol=1e-12)


def test_deterministic_for_a_key_and_the_key_matters():
    y, loc, scale = _data(200, seed=9, spread=1.3)
    a = reg.select_recalibrator(y, loc, scale, key=11)
    b = reg.select_recalibrator(y, loc, scale, key=jax.random.key(11))
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    c = reg.select_recalibrator(y, loc, scale, key=12)
    assert not np.array_equal(a.folds, c.folds)


def test_repr_is_a_readable_table():
    y, loc, scale = _data(300, seed=3, spread=2.0)
    lines = repr(reg.select_recalibrator(y, loc, scale, key=0)).splitlines()
    assert lines[0].startswith("RecalibratorSelection(score='crps', winner='sigma')")
    assert [line.split()[0] for line in lines[2:]] == ["none", "isotonic", "sigma"]
    assert lines[4].endswith("*")


def test_a_new_n_compiles_nothing():
    from tests.conftest import compilations_during

    y, loc, scale = _data(1000, seed=12, spread=1.5)
    reg.select_recalibrator(y, loc, scale, key=0)
    y, loc, scale = _data(1013, seed=13, spread=1.5)  # the same bucket, 1024
    assert compilations_during(lambda: reg.select_recalibrator(y, loc, scale, key=0)) == 0


Y, LOC, SCALE = _data(60, seed=0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(candidates=("none", "quantile?")), ValueError, "candidates"),
        (dict(candidates="sigma"), TypeError, "candidates"),
        (dict(candidates=("sigma", "sigma")), ValueError, "distinct"),
        (dict(score="log_loss"), ValueError, "score"),
        (dict(rule="best"), ValueError, "rule"),
        (dict(alpha=1.5), ValueError, "alpha"),
        (dict(folds=1), ValueError, "folds"),
        (dict(folds=40), ValueError, "folds"),
        (dict(folds=2.5), TypeError, "folds"),
        (dict(key=None), TypeError, "key"),
        (dict(weights=np.ones(59)), ValueError, "weights"),
        (dict(weights=-np.ones(60)), ValueError, "weights"),
        (dict(folds=np.zeros(60, int)), ValueError, "folds"),
    ],
)
def test_bad_options(kwargs, error, match):
    kwargs = {"key": 0, **kwargs}
    with pytest.raises(error, match=match):
        reg.select_recalibrator(Y, LOC, SCALE, **kwargs)


def test_bad_data():
    with pytest.raises(ValueError, match="scale"):
        reg.select_recalibrator(Y, LOC, -SCALE, key=0)
    with pytest.raises(ValueError, match="y_true"):
        reg.select_recalibrator(np.where(Y > 0, np.nan, Y), LOC, SCALE, key=0)
    with pytest.raises(ValueError, match="1-D"):
        reg.select_recalibrator(Y, LOC[:-1], SCALE, key=0)
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(lambda m: reg.select_recalibrator(Y, m, SCALE, key=0))(LOC)


@pytest.mark.parametrize("name", ["y_true", "loc", "scale", "weights"])
def test_non_finite_values_get_their_counts(name):
    # Issue 37, friction: "y_true must be finite." gave no count; the message is now
    # the other functions' (crps_normal's): the argument, the counts of NaN and inf
    args = {"y_true": Y, "loc": LOC, "scale": SCALE, "weights": np.ones(60)}
    args[name] = np.r_[args[name][:-3], np.nan, np.inf, -np.inf]
    with pytest.raises(ValueError, match=rf"^{name} contains 1 NaN and 2 infinite values"):
        reg.select_recalibrator(**args, key=0)
    if name != "weights":
        with pytest.raises(ValueError, match=rf"^{name} contains 1 NaN and 2 infinite"):
            reg.crps_normal(args["y_true"], args["loc"], args["scale"])


def test_a_first_call_compiles_at_most_the_fold_program():
    # the fits and scores run in NumPy: only the fold assignment's program (per bucket)
    from tests.conftest import compilations_during

    y, loc, scale = _data(5000, seed=15, spread=1.5)
    assert compilations_during(lambda: reg.select_recalibrator(y, loc, scale, key=0)) <= 1
