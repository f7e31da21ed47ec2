"""fit_scaling_binning (Kumar, Liang & Ma 2019, "Verified uncertainty calibration").

Reference: the paper's algorithm as released in the authors' package
``uncertainty-calibration`` 0.1.4 (``calibration.utils``: ``get_platt_scaler``,
``get_equal_bins``, ``get_histogram_calibrator``, ``unbiased_square_ce``), written
out below in numpy (float64), with the Platt step solved by Newton's method in
float64 to machine precision (the package's lbfgs stops at ~1e-4; its own outputs agree with
bayescal's to 1e-5, see docs/choosing.md).
"""

from __future__ import annotations

import bisect
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from bayescal import classification as clf
from bayescal import core
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
TOL = dict(rtol=1e-8, atol=1e-10) if X64 else dict(rtol=2e-4, atol=2e-5)


def _data(seed, n=400):
    r = np.random.default_rng(seed)
    z = r.normal(0, 1.5, n)
    y = (r.uniform(size=n) < scipy.special.expit(z)).astype(np.int64)
    p = np.clip(scipy.special.expit(2 * z + 0.3), 1e-6, 1 - 1e-6).astype(DT)
    return y, p


# ----------------------------------------------------------------- numpy reference
def _platt_reference(y, p, w):
    """Unpenalised logistic regression of y on logit(p), float64, weights w."""
    f = scipy.special.logit(p.astype(np.float64))

    t = np.array([1.0, 0.0])
    x = np.stack([f, np.ones_like(f)], axis=1)
    for _ in range(50):  # Newton's method to machine precision (a convex loss)
        q = scipy.special.expit(x @ t)
        grad = x.T @ (w * (q - y))
        hess = (x * (w * q * (1 - q))[:, None]).T @ x
        t = t - np.linalg.solve(hess, grad)
    beta, c = t
    return lambda q: scipy.special.expit(
        beta * scipy.special.logit(q.astype(np.float64)) + c
    )


def _equal_bins(probs, num_bins):
    """uncertainty-calibration 0.1.4 utils.get_equal_bins (the package's code)."""
    sorted_probs = sorted(probs)
    parts = [list(a) for a in np.array_split(sorted_probs, num_bins)]
    bins = [(parts[i][-1] + parts[i + 1][0]) / 2.0 for i in range(num_bins - 1)]
    return sorted(set([*bins, 1.0]))


def _histogram(model_probs, bins):
    """uncertainty-calibration 0.1.4 utils.get_histogram_calibrator(model_probs,
    model_probs, bins): bin means of the scaled values (bisect_left bins)."""
    binned = [[] for _ in bins]
    for v in model_probs:
        binned[bisect.bisect_left(bins, v)].append(float(v))
    means = []
    for i, vals in enumerate(binned):
        if vals:
            means.append(np.mean(vals))
        else:
            means.append(bins[0] / 2.0 if i == 0 else (bins[i] + bins[i - 1]) / 2.0)
    means = np.array(means)
    return bins, means, lambda q: means[np.searchsorted(bins, q)]


def _reference(y, p, num_bins, split):
    m = len(p) if split is None else int(np.floor(split * len(p)))
    g = _platt_reference(y[:m], p[:m], np.ones(m))
    second = slice(0, len(p)) if split is None else slice(m, len(p))
    scaled = g(p[second])
    bins, means, apply = _histogram(scaled, _equal_bins(scaled, num_bins))
    return g, bins, means, lambda q: apply(g(q))


def _unbiased_l2_ce(q, y):
    """uncertainty-calibration 0.1.4 get_binning_ce(q, y, p=2, debias=True): one bin
    per distinct value of q, sqrt(max(sum_k n_k/n [gap_k^2 - ybar(1-ybar)/(n_k-1)], 0))."""
    total = 0.0
    for v in np.unique(q):
        sel = q == v
        nk = sel.sum()
        if nk < 2:
            continue
        ybar = y[sel].mean()
        total += nk / len(q) * ((q[sel].mean() - ybar) ** 2 - ybar * (1 - ybar) / (nk - 1))
    return np.sqrt(max(total, 0.0))


def _away_from_edges(grid, bins):
    """Grid points not within 1e-4 of an edge (float32 may put those in the next bin)."""
    return np.array([np.min(np.abs(np.asarray(bins) - x)) > 1e-4 for x in grid])


# ----------------------------------------------------------------- the reference
@pytest.mark.parametrize("split", [None, 0.5, 0.3])
@pytest.mark.parametrize("num_bins", [1, 5, 10])
def test_matches_the_authors_algorithm(split, num_bins):
    y, p = _data(0)
    cal = clf.fit_scaling_binning(y, p, bins=num_bins, split=split)
    g, bins, means, apply = _reference(y, p, num_bins, split)
    # the package drops repeated edges; none repeat on continuous data
    assert len(bins) == num_bins
    np.testing.assert_allclose(np.asarray(cal.edges[1:], np.float64), bins, **TOL)
    assert float(cal.edges[0]) == 0.0
    np.testing.assert_allclose(np.asarray(cal.values, np.float64), means, **TOL)
    grid = np.linspace(0.001, 0.999, 501).astype(DT)
    keep = _away_from_edges(g(grid), bins)
    np.testing.assert_allclose(
        np.asarray(cal(grid), np.float64)[keep], apply(grid)[keep], **TOL
    )
    # the Platt step is Platt's map (same a, b as the reference's slope and intercept)
    np.testing.assert_allclose(
        np.asarray(
            jax.nn.sigmoid(-(cal.a * jnp.asarray(scipy.special.logit(grid)) + cal.b))
        ),
        g(grid),
        **TOL,
    )


def test_repeated_scaled_values_give_empty_bins_no_value_reaches():
    # 40 observations on 4 distinct probabilities, 10 bins: most edges repeat; the
    # package drops repeated edges, bayescal keeps them as empty bins, same outputs
    r = np.random.default_rng(3)
    p = np.repeat(np.array([0.2, 0.4, 0.6, 0.8], DT), 10)
    y = (r.uniform(size=40) < p).astype(int)
    y[:2] = [0, 1]
    cal = clf.fit_scaling_binning(y, p, bins=10, split=None)
    _, bins, means, apply = _reference(y, p, 10, None)
    assert len(bins) < 10
    np.testing.assert_allclose(np.asarray(cal(p), np.float64), apply(p), **TOL)
    assert np.all(np.diff(np.asarray(cal.values)) >= 0)


def test_outputs_take_at_most_bins_values_and_are_monotone():
    y, p = _data(1)
    cal = clf.fit_scaling_binning(y, p, bins=7)
    grid = np.linspace(0, 1, 2001).astype(DT)
    out = np.asarray(cal(np.clip(grid, 1e-6, 1 - 1e-6)))
    assert len(np.unique(out)) <= 7
    assert np.all(np.diff(out) >= 0)  # Platt slope > 0 here: a nondecreasing map


# -------------------------------------------------- the paper's calibration error
def test_calibration_error_is_the_papers_debiased_estimate():
    y, p = _data(2, n=600)
    cal = clf.fit_scaling_binning(y[:300], p[:300], bins=10)
    q = np.asarray(cal(p[300:]), np.float64)
    ref = _unbiased_l2_ce(q, y[300:])
    got = float(cal.calibration_error(y[300:], p[300:]))
    np.testing.assert_allclose(got, ref, rtol=1e-5 if not X64 else 1e-10, atol=1e-7)
    # the same as expected_calibration_error(debias=True) binned by output value
    edges = np.append(np.asarray(cal.values), 1.0)
    ece = clf.expected_calibration_error(
        y[300:], q.astype(DT), bins=edges, norm="l2", debias=True
    )
    np.testing.assert_allclose(got, float(ece), rtol=1e-6)
    # plug-in: the root mean squared bin gap, at least the debiased estimate
    plug = float(cal.calibration_error(y[300:], p[300:], debias=False))
    gaps = [
        (q[q == v].mean() - y[300:][q == v].mean(), (q == v).mean()) for v in np.unique(q)
    ]
    np.testing.assert_allclose(plug, np.sqrt(sum(w * g**2 for g, w in gaps)), rtol=1e-5)
    assert plug >= got


def test_calibration_error_of_a_calibrated_model_is_small_and_of_a_bad_one_large():
    # property: on held-out data from a calibrated source the debiased estimate is
    # near 0 (its bias removed); a shifted model gives a large one
    r = np.random.default_rng(4)
    p = r.uniform(0.05, 0.95, 8000).astype(DT)
    y = (r.uniform(size=8000) < p).astype(int)
    cal = clf.fit_scaling_binning(y[:4000], p[:4000], bins=10)
    assert float(cal.calibration_error(y[4000:], p[4000:])) < 0.02
    bad = clf.ScalingBinningCalibrator(
        jnp.asarray(-1.0, DT), jnp.asarray(-1.5, DT), cal.edges, cal.values
    )  # not fitted: a map shifted by 1.5 logits
    assert float(bad.calibration_error(y[4000:], p[4000:])) > 0.05


# ----------------------------------------------------------------- weights
def test_integer_weights_repeat_rows_and_zero_weights_remove_them():
    y, p = _data(5, n=80)
    w = np.random.default_rng(5).integers(0, 4, 80)
    w[:2] = 1
    y[:2] = [0, 1]
    a = clf.fit_scaling_binning(y, p, bins=6, split=None, weights=w)
    b = clf.fit_scaling_binning(np.repeat(y, w), np.repeat(p, w), bins=6, split=None)
    grid = np.linspace(0.01, 0.99, 97).astype(DT)
    np.testing.assert_allclose(np.asarray(a.edges), np.asarray(b.edges), **TOL)
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), **TOL)
    np.testing.assert_allclose(np.asarray(a(grid)), np.asarray(b(grid)), **TOL)
    # with a split, weight 0 in the second part removes the row from the binning
    keep = np.ones(80)
    keep[60:70] = 0
    c = clf.fit_scaling_binning(y, p, bins=4, weights=keep)
    d_p = np.delete(p, range(60, 70))
    g = _reference(y, p, 4, 0.5)[0]  # Platt on the first 40 rows
    scaled = g(d_p[40:])
    _, means, _ = _histogram(scaled, _equal_bins(scaled, 4))
    np.testing.assert_allclose(np.asarray(c.values, np.float64), means, **TOL)


# ----------------------------------------------------------------- JAX contract
def test_jit_equals_eager_and_vmap_equals_loop():
    sets = [_data(s, n=120) for s in (6, 7, 8)]
    fit = lambda y, p: clf.fit_scaling_binning(y, p, bins=5)  # noqa: E731
    for y, p in sets:
        eager = fit(y, p)
        jitted = jax.jit(fit)(jnp.asarray(y), jnp.asarray(p))
        for u, v in zip(
            jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted), strict=True
        ):
            np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-7)
    ys = jnp.stack([jnp.asarray(y) for y, _ in sets])
    ps = jnp.stack([jnp.asarray(p) for _, p in sets])
    batched = jax.vmap(fit)(ys, ps)
    for i, (y, p) in enumerate(sets):
        one = fit(y, p)
        for u, v in zip(
            jax.tree_util.tree_leaves(batched), jax.tree_util.tree_leaves(one), strict=True
        ):
            np.testing.assert_allclose(
                np.asarray(u[i]), np.asarray(v), rtol=1e-5, atol=1e-7
            )
    # the calibrator's call under jit and vmap
    cal = fit(*sets[0])
    q = sets[1][1]
    np.testing.assert_array_equal(
        np.asarray(jax.jit(lambda c, x: c(x))(cal, q)), np.asarray(cal(q))
    )


def test_save_load_round_trip_and_tampered_values(tmp_path):
    y, p = _data(9, n=100)
    cal = clf.fit_scaling_binning(y, p, bins=4, eps=1e-6)
    path = os.path.join(tmp_path, "sb.npz")
    core.save_calibrator(cal, path)
    back = core.load_calibrator(path)
    assert back == cal and type(back) is clf.ScalingBinningCalibrator
    bad = clf.ScalingBinningCalibrator(cal.a, cal.b, cal.edges, cal.values[::-1])
    with pytest.raises(ValueError, match="values must be probabilities in"):
        core.save_calibrator(bad, os.path.join(tmp_path, "bad.npz"))


# ----------------------------------------------------------------- bad input
Y, P = _data(10, n=40)


@pytest.mark.parametrize(
    "kwargs, args, error, match",
    [
        ({"bins": 0}, (Y, P), ValueError, "bins must be"),
        ({"bins": 2.5}, (Y, P), TypeError, "bins must be"),
        (
            {"bins": 21},
            (Y, P),
            ValueError,
            r"bins \(21\) must not exceed the number of binning",
        ),
        ({"bins": 41, "split": None}, (Y, P), ValueError, "bins .* must not exceed"),
        ({"split": 1.0}, (Y, P), ValueError, r"split must lie in \(0, 1\)"),
        ({"split": 0}, (Y, P), ValueError, r"split must lie in \(0, 1\)"),
        ({"split": "half"}, (Y, P), TypeError, "split must be a float"),
        ({"split": True}, (Y, P), TypeError, "split must be a float"),
        ({"soft_labels": 1}, (Y, P), TypeError, "soft_labels must be a bool"),
        ({"eps": 0.7}, (Y, P), ValueError, "eps"),
        ({}, (np.r_[np.zeros(20), Y[20:]], P), ValueError, "y_true must hold both classes"),
        ({}, (Y, np.r_[P[:-1], 1.0]), ValueError, "Pass eps"),
        ({}, (Y, np.r_[P[:-1], 1.5]), ValueError, "y_prob"),
        ({}, (Y[:-1], P), ValueError, "y_true"),
        ({"weights": -np.ones(40)}, (Y, P), ValueError, "weights must be >= 0"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs, args, error, match):
    with pytest.raises(error, match=match):
        clf.fit_scaling_binning(*args, **kwargs)


def test_bad_input_under_jit_gives_nan():
    bad = np.r_[P[:-1], 1.5].astype(DT)
    out = jax.jit(lambda y, p: clf.fit_scaling_binning(y, p, bins=4))(
        jnp.asarray(Y), jnp.asarray(bad)
    )
    assert np.isnan(np.asarray(out.values)).all()
