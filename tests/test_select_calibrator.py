"""select_calibrator: nested cross-validation of calibrators against a plain loop.

Reference: for every fold of scikit-learn's ``PredefinedSplit`` over the same fold ids,
each candidate is fitted on the training part with the library's eager ``fit_*`` and
scored on the held-out part with ``sklearn.metrics.log_loss`` / ``brier_score_loss``;
the table is the mean over folds, the standard deviation over sqrt(K), and the paired
difference to "none" (Hastie, Tibshirani & Friedman 2009, sec. 7.10).
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from sklearn.metrics import brier_score_loss
from sklearn.metrics import log_loss as sk_log_loss
from sklearn.model_selection import PredefinedSplit

from bayescal import classification as clf
from bayescal._src.selection import Candidate
from bayescal.classification._select import CANDIDATES

FITS = {
    "none": None,
    "platt": clf.fit_platt,
    "isotonic": clf.fit_isotonic,
    "beta": clf.fit_beta,
    "histogram": clf.fit_histogram_binning,
}
DT = np.float64 if jax.config.jax_enable_x64 else np.float32  # select_calibrator's dtype
TOL = (
    dict(rtol=2e-4, atol=2e-5)
    if not jax.config.jax_enable_x64
    else dict(rtol=1e-7, atol=1e-9)
)


def _data(n, seed, power=1.0):
    """Labels from p_true; the model reports p_true sharpened by ``power`` (1: calibrated)."""
    rng = np.random.default_rng(seed)
    p_true = rng.uniform(0.03, 0.97, n)
    y = (rng.uniform(size=n) < p_true).astype(int)
    p = 1 / (1 + ((1 - p_true) / p_true) ** power)
    return y, p


def _reference(y, p, folds, names, score, eps=None, weights=None, fits=FITS):
    w = np.ones(len(y)) if weights is None else np.asarray(weights, float)
    table = np.empty((len(names), folds.max() + 1))
    for k, (train, test) in enumerate(PredefinedSplit(folds).split()):
        for c, name in enumerate(names):
            fit = fits[name]
            if fit is None:
                q = p[test]
            else:
                cal = fit(y[train], p[train], weights=w[train])
                q = np.asarray(cal(p[test]), float)
            if score == "brier":
                table[c, k] = brier_score_loss(y[test], q, sample_weight=w[test])
            else:
                if eps is not None:
                    q = np.clip(q, eps, 1 - eps)
                table[c, k] = sk_log_loss(y[test], q, sample_weight=w[test], labels=[0, 1])
    return table


@pytest.mark.parametrize("score", ["log_loss", "brier"])
def test_table_equals_a_loop_over_folds_and_candidates(score):
    y, p = _data(300, seed=1, power=2.5)
    eps = 1e-4 if score == "log_loss" else None  # isotonic / histogram give 0 and 1
    res = clf.select_calibrator(y, p, key=3, score=score, eps=eps)
    ref = _reference(y, np.asarray(p, DT), res.folds, res.names, score, eps)
    np.testing.assert_allclose(res.fold_scores, ref, **TOL)
    k = ref.shape[1]
    np.testing.assert_allclose(res.mean, ref.mean(1), **TOL)
    np.testing.assert_allclose(
        res.se, ref.std(1, ddof=1) / np.sqrt(k), rtol=2e-3, atol=1e-6
    )
    paired = ref - ref[0]
    np.testing.assert_allclose(res.diff_none, paired.mean(1), rtol=2e-3, atol=3e-5)
    np.testing.assert_allclose(
        res.diff_none_se, paired.std(1, ddof=1) / np.sqrt(k), rtol=2e-3, atol=3e-5
    )
    assert res.winner == res.names[int(np.argmin(ref.mean(1)))]
    # the stratified folds are cross_calibrate's: each class dealt evenly
    for label in (0, 1):
        counts = np.bincount(res.folds[y == label], minlength=5)
        assert counts.max() - counts.min() <= 1


def test_own_folds_and_weights_match_the_loop():
    y, p = _data(200, seed=2, power=0.5)
    folds = np.arange(200) % 4
    w = np.random.default_rng(0).integers(0, 4, 200).astype(float)
    res = clf.select_calibrator(
        y,
        p,
        folds=folds,
        weights=w,
        score="brier",
        candidates=("none", "platt", "beta", "isotonic"),
    )
    ref = _reference(y, np.asarray(p, DT), folds, res.names, "brier", weights=w)
    np.testing.assert_allclose(res.fold_scores, ref, **TOL)
    assert res.fold_scores.shape == (4, 4)


def test_integer_weights_equal_repeated_rows():
    y, p = _data(120, seed=4, power=2.0)
    folds = np.arange(120) % 3
    reps = np.random.default_rng(1).integers(1, 3, 120)
    a = clf.select_calibrator(y, p, folds=folds, weights=reps, score="brier")
    b = clf.select_calibrator(
        np.repeat(y, reps), np.repeat(p, reps), folds=np.repeat(folds, reps), score="brier"
    )
    np.testing.assert_allclose(a.fold_scores, b.fold_scores, **TOL)


def test_calibrated_model_none_wins_or_is_within_one_se():
    y, p = _data(150, seed=7, power=1.0)
    res = clf.select_calibrator(y, p, key=0, eps=1e-3)
    i_none, i_win = res.names.index("none"), res.names.index(res.winner)
    assert res.mean[i_none] <= res.mean[i_win] + res.se[i_win]
    # flexible calibrators do not beat the raw probabilities here
    for name in ("isotonic", "histogram"):
        assert res.diff_none[res.names.index(name)] > 0
    assert clf.select_calibrator(y, p, key=0, eps=1e-3, rule="one_se").winner == "none"
    res_none = clf.select_calibrator(y, p, key=0, candidates=("none",))
    assert res_none.winner == "none" and res_none.calibrator is None


@pytest.mark.parametrize("power", [0.4, 3.0])  # under- and overconfident
def test_miscalibrated_model_a_calibrator_wins(power):
    y, p = _data(1000, seed=8, power=power)  # n: a margin of many SEs whatever the folds
    res = clf.select_calibrator(y, p, key=1)
    assert res.winner != "none"
    i = res.names.index(res.winner)
    assert res.diff_none[i] < -2 * res.diff_none_se[i]


@pytest.mark.parametrize("winner", ["platt", "isotonic", "beta", "histogram"])
def test_winner_is_refitted_on_all_the_data(winner):
    y, p = _data(250, seed=5, power=2.0)
    res = clf.select_calibrator(y, p, key=0, candidates=(winner,), score="brier")
    assert res.winner == winner
    eager = FITS[winner](y, np.asarray(p, DT))
    assert type(res.calibrator) is type(eager)
    grid = np.linspace(0.01, 0.99, 97, dtype=DT)
    np.testing.assert_allclose(res.calibrator(grid), eager(grid), **TOL)
    leaves = jax.tree_util.tree_leaves(res.calibrator), jax.tree_util.tree_leaves(eager)
    for a, b in zip(*leaves, strict=True):
        assert np.shape(a) == np.shape(b)


def test_save_load_round_trip(tmp_path):
    y, p = _data(200, seed=6, power=3.0)
    res = clf.select_calibrator(y, p, key=0, candidates=("none", "beta"))
    assert res.winner == "beta"
    path = tmp_path / "cal.npz"
    clf.save_calibrator(res.calibrator, path)
    back = clf.load_calibrator(path)
    grid = np.linspace(0.01, 0.99, 11, dtype=DT)
    np.testing.assert_array_equal(back(grid), res.calibrator(grid))


def test_deterministic_for_a_key_and_the_key_matters():
    y, p = _data(200, seed=9, power=2.0)
    a = clf.select_calibrator(y, p, key=11)
    b = clf.select_calibrator(y, p, key=jax.random.key(11))
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    np.testing.assert_array_equal(a.folds, b.folds)
    c = clf.select_calibrator(y, p, key=12)
    assert not np.array_equal(a.folds, c.folds)


def test_a_registered_candidate_joins_in_one_line(monkeypatch):
    monkeypatch.setitem(
        CANDIDATES,
        "platt_hard",
        Candidate(lambda y, p, w: clf.fit_platt(y, p, weights=w, soft_labels=False)),
    )
    y, p = _data(200, seed=10, power=2.0)
    res = clf.select_calibrator(
        y, p, key=0, candidates=("none", "platt_hard"), score="brier"
    )
    fits = {
        **FITS,
        "platt_hard": lambda y, p, weights: clf.fit_platt(
            y, p, weights=weights, soft_labels=False
        ),
    }
    ref = _reference(y, np.asarray(p, DT), res.folds, res.names, "brier", fits=fits)
    np.testing.assert_allclose(res.fold_scores, ref, **TOL)


def test_repr_is_a_readable_table():
    y, p = _data(150, seed=3, power=2.0)
    text = repr(clf.select_calibrator(y, p, key=0, candidates=("none", "platt"), rule="min"))
    lines = text.splitlines()
    assert lines[0].startswith("CalibratorSelection(score='log_loss', winner='platt')")
    assert lines[2].split()[0] == "none" and lines[3].split()[0] == "platt"
    assert lines[3].endswith("*")


def test_isotonic_log_loss_is_inf_without_eps():
    # isotonic gives 0 or 1 at the ends: an observed event called impossible
    y, p = _data(150, seed=3, power=1.0)
    res = clf.select_calibrator(y, p, key=0, candidates=("none", "isotonic"))
    assert np.isinf(res.mean[1]) and res.winner == "none"


Y, P = _data(60, seed=0, power=2.0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(candidates=("none", "spline?")), ValueError, "candidates"),
        (dict(candidates="platt"), TypeError, "candidates"),
        (dict(candidates=("platt", "platt")), ValueError, "distinct"),
        (dict(score="crps"), ValueError, "score"),
        (dict(rule="best"), ValueError, "rule"),
        (dict(folds=1), ValueError, "folds"),
        (dict(folds=40), ValueError, "folds"),
        (dict(folds=2.5), TypeError, "folds"),
        (dict(key=None), TypeError, "key"),
        (dict(eps=0.7), ValueError, "eps"),
        (dict(eps=1e-3, score="brier"), ValueError, "eps"),
        (dict(weights=np.ones(59)), ValueError, "weights"),
        (dict(weights=-np.ones(60)), ValueError, "weights"),
        (dict(folds=np.zeros(60, int)), ValueError, "folds"),
    ],
)
def test_bad_options(kwargs, error, match):
    kwargs = {"key": 0, **kwargs}
    with pytest.raises(error, match=match):
        clf.select_calibrator(Y, P, **kwargs)


def test_bad_data():
    with pytest.raises(ValueError, match="y_true"):
        clf.select_calibrator(Y + 1, P, key=0)
    with pytest.raises(ValueError, match="y_prob"):
        clf.select_calibrator(Y, P + 1, key=0)
    with pytest.raises(ValueError, match="y_true and y_prob"):
        clf.select_calibrator(Y, P[:-1], key=0)
    with pytest.raises(ValueError, match="y_prob holds probabilities of exactly 0 or 1"):
        clf.select_calibrator(Y, np.where(Y == 1, 1.0, P), key=0, candidates=("platt",))
    # the default candidates take Platt on the probabilities as scores there; without
    # the logit candidates probabilities of 0 and 1 are fine
    res = clf.select_calibrator(
        Y, np.where(Y == 1, 1.0, P), key=0, candidates=("none", "isotonic"), score="brier"
    )
    assert np.all(np.isfinite(res.mean))
    # a training part with one class only
    folds = np.where(Y == 1, 0, 1)
    with pytest.raises(ValueError, match="fold"):
        clf.select_calibrator(Y, P, folds=folds)
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(lambda p: clf.select_calibrator(Y, p, key=0))(P)


def _with(x, tail):
    """``x`` with its last values replaced by ``tail``."""
    return np.r_[np.asarray(x, float)[: -len(tail)], tail]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        # the values found and their count, as the other public functions say them
        (
            dict(y_true=_with(Y, [2, 7, 7])),
            r"y_true must hold binary labels 0 and 1; got 3 other values \(2\.0, 7\.0, "
            r"7\.0\)",
        ),
        (dict(y_true=_with(Y, [np.nan])), r"y_true .* got 1 other value \(nan\)"),
        (
            dict(y_true=_with(Y, [2**32 + 1]).astype(np.int64)),  # no wrap to 1 (int32)
            r"y_true .* got 1 other value \(4294967297\)",
        ),
        (
            dict(y_prob=_with(P, [np.nan, np.nan, np.inf])),
            r"y_prob contains 2 NaN and 1 infinite values",
        ),
        (
            dict(y_prob=_with(P, [1.5, -0.25])),
            r"y_prob must lie in \[0, 1\]; got 2 values outside it \(min -0\.25, max 1\.5\)",
        ),
        (
            dict(weights=_with(np.ones(60), [-1.0, -2.0])),
            r"weights must be >= 0; got 2 negative values",
        ),
        (
            dict(weights=_with(np.ones(60), [np.nan])),
            r"weights contains 1 NaN and 0 infinite values",
        ),
        (dict(weights=np.zeros(60)), r"weights are all 0"),
    ],
)
def test_bad_values_get_the_other_functions_messages(kwargs, match):
    # Issue 37, friction: select_calibrator said "y_true must hold binary labels, 0 or
    # 1." (no values) and "y_prob must hold finite probabilities in [0, 1]." (no
    # counts), where docs/bad-input.md promises the counts of NaN and inf and the
    # labels found; its messages are now the shared validation's. Each names the
    # argument passed (tests/test_fuzz.py's rule for every public function).
    args = {"y_true": Y, "y_prob": P, "key": 0, **kwargs}
    with pytest.raises(ValueError, match=match) as caught:
        clf.select_calibrator(**args)
    named = [k for k in kwargs if k in str(caught.value)]
    assert named, str(caught.value)
    # the same words as a fit's own check of the same argument, where it has one
    fit_args = {k: args[k] for k in ("y_true", "y_prob", "weights") if k in args}
    with pytest.raises(ValueError) as fit_error:
        clf.fit_histogram_binning(**fit_args)
    assert str(fit_error.value).split(";")[0] == str(caught.value).split(";")[0]


@pytest.mark.parametrize(
    "y, p, match",
    [
        (
            [0, 1, 3, 2.5],
            np.full((4, 3), 1 / 3),
            r"y_true must hold class labels 0 \.\. 2 .* got 2 other values \(3\.0, 2\.5\)",
        ),
        (
            [0, 1, 2, 2],
            [[0.5, 0.5, np.nan]] + [[0.2, 0.3, 0.5]] * 3,
            r"y_prob contains 1 NaN and 0 infinite values",
        ),
        (
            [0, 1, 2, 2],
            [[0.5, 0.5, 0.0]] + [[0.2, 0.3, 0.5]] * 3,
            r"y_prob must hold class probabilities in \(0, 1\].* got 1 value outside it "
            r"\(0\.0\)",
        ),
        (
            [0, 1, 2, 2],
            [[0.5, 0.4, 0.2]] + [[0.2, 0.3, 0.5]] * 3,
            r"y_prob's rows must sum to 1 .*; 1 of 4 rows do not, the worst \(row 0\) "
            r"sums to 1\.1",
        ),
    ],
)
def test_multiclass_bad_values_show_the_values_and_counts(y, p, match):
    with pytest.raises(ValueError, match=match):
        clf.select_calibrator(np.asarray(y), np.asarray(p), key=0)


def test_a_new_n_in_the_bucket_compiles_nothing_with_an_isotonic_winner():
    from tests.conftest import compilations_during

    y, p = _data(1000, seed=12, power=2.0)
    res = clf.select_calibrator(y, p, key=0, candidates=("isotonic",), score="brier")
    assert res.winner == "isotonic"
    y, p = _data(1013, seed=13, power=2.0)  # the same bucket, 1024
    count = compilations_during(
        lambda: clf.select_calibrator(y, p, key=0, candidates=("isotonic",), score="brier")
    )
    assert count == 0


@pytest.mark.parametrize("score", ["log_loss", "brier"])
def test_numpy_fits_equal_the_compiled_kernel(score, monkeypatch):
    # inputs up to HOST_MAX_SIZE are fitted in NumPy (no compilation); beyond,
    # the compiled kernel runs: both give the same table and the same refitted winner
    from bayescal._src import selection

    y, p = _data(300, seed=14, power=2.0)
    w = np.random.default_rng(2).integers(0, 3, 300).astype(float)
    kw = dict(key=5, score=score, weights=w, eps=1e-4 if score == "log_loss" else None)

    def run(host, **extra):
        monkeypatch.setattr(selection, "on_host", lambda n: host)
        return clf.select_calibrator(y, p, **{**kw, **extra})

    np.testing.assert_allclose(run(True).fold_scores, run(False).fold_scores, **TOL)
    for name in clf.select_calibrator(y, p, **kw).names:
        a = run(True, candidates=(name,)).calibrator
        b = run(False, candidates=(name,)).calibrator
        if a is None:
            assert b is None
            continue
        assert type(a) is type(b)
        grid = np.linspace(0.01, 0.99, 97, dtype=DT)
        np.testing.assert_allclose(a(grid), b(grid), **TOL)


def test_a_first_call_compiles_at_most_the_fold_program():
    # the folds' fits run in NumPy: only the fold assignment's program (per bucket)
    from tests.conftest import compilations_during

    y, p = _data(5000, seed=15, power=2.0)
    assert compilations_during(lambda: clf.select_calibrator(y, p, key=0)) <= 1


@pytest.mark.parametrize("name", ["bbq", "spline"])
def test_named_candidates_numpy_fits_equal_the_compiled_kernel(name, monkeypatch):
    # "bbq" and "spline" fit on the host through their public fits' NumPy twins, one
    # per fold row with the row's weights; the compiled kernel vmaps the same fits
    from bayescal._src import selection

    y, p = _data(300, seed=16, power=2.0)
    kw = dict(key=6, score="brier", candidates=("none", name))

    def run(host):
        monkeypatch.setattr(selection, "on_host", lambda n: host)
        return clf.select_calibrator(y, p, **kw)

    a, b = run(True), run(False)
    tol = dict(rtol=1e-4, atol=1e-5) if name == "spline" else TOL
    np.testing.assert_allclose(a.fold_scores, b.fold_scores, **tol)
    if a.calibrator is not None:
        assert type(a.calibrator) is type(b.calibrator)
        grid = np.linspace(0.01, 0.99, 97, dtype=DT)
        np.testing.assert_allclose(a.calibrator(grid), b.calibrator(grid), **tol)


def test_spline_can_win_where_the_truth_is_not_sigmoid():
    # y ~ Bernoulli(p^3): its log-odds are not linear in logit(p), which Platt's two
    # parameters cannot follow; the spline is first or within one standard error of
    # the best, and better than no recalibration
    rng = np.random.default_rng(17)
    p = rng.uniform(0.01, 0.99, 3000)
    y = (rng.uniform(size=p.size) < p**3).astype(int)
    res = clf.select_calibrator(y, p, key=0, candidates=("none", "platt", "spline"))
    best = int(np.argmin(res.mean))
    i = res.names.index("spline")
    assert res.mean[i] <= res.mean[best] + res.se[best]
    assert res.mean[i] < res.mean[res.names.index("none")]


# --------------------------------------------------------------------------- multiclass
def _multiclass_data(n, seed, c=4):
    """Labels from softmax(z); the model reports an overconfident, shifted softmax."""
    from scipy.special import softmax

    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, c)) * 2
    truth = softmax(z, axis=1)
    y = (rng.uniform(size=(n, 1)) > np.cumsum(truth, axis=1)).sum(axis=1)
    shift = np.linspace(0.5, -0.5, c)
    return np.minimum(y, c - 1), softmax(2 * z + shift, axis=1)


def _multiclass_reference(y, p, folds, names, score, weights=None):
    """The table by a loop: each candidate's public fit on the training folds only
    (rows dropped), scored on the held-out fold by scikit-learn 1.9's ``log_loss`` and
    ``brier_score_loss`` (multiclass: the sum over classes)."""
    from scipy.special import softmax
    from sklearn.metrics import brier_score_loss
    from sklearn.metrics import log_loss as sk_log_loss

    w = np.ones(len(y)) if weights is None else weights
    c = p.shape[1]
    table = np.empty((len(names), int(folds.max()) + 1))
    for k in range(table.shape[1]):
        tr, te = (folds != k) & (w > 0), folds == k
        logp = np.log(p)
        for i, name in enumerate(names):
            if name == "none":
                q = p[te]
            elif name == "temperature":
                t = float(clf.fit_temperature(y[tr], logp[tr], weights=w[tr]).temperature)
                q = softmax(logp[te] / t, axis=1)
            elif name == "vector":
                cal = clf.fit_vector_scaling(y[tr], logp[tr], weights=w[tr])
                q = np.asarray(cal(logp[te]))
            else:
                q = np.asarray(clf.fit_dirichlet(y[tr], p[tr], weights=w[tr])(p[te]))
            q = np.asarray(q, np.float64)
            # (float32 rows sum to 1 within 1e-7: scikit-learn warns about that)
            warnings.filterwarnings("ignore", "The y_prob values do not sum to one")
            if score == "brier":
                table[i, k] = brier_score_loss(
                    y[te], q, sample_weight=w[te], labels=range(c)
                )
            else:
                table[i, k] = sk_log_loss(y[te], q, sample_weight=w[te], labels=range(c))
    return table


@pytest.mark.parametrize("score", ["log_loss", "brier"])
def test_multiclass_table_equals_a_loop_over_folds_and_candidates(score):
    y, p = _multiclass_data(600, seed=21)
    p = p.astype(DT)
    res = clf.select_calibrator(y, p, key=4, score=score)
    assert res.names == ("none", "temperature", "vector", "dirichlet")
    ref = _multiclass_reference(y, p, res.folds, res.names, score)
    tol = dict(rtol=2e-4, atol=2e-5) if DT == np.float32 else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(res.fold_scores, ref, **tol)
    assert res.winner == res.names[int(np.argmin(ref.mean(1)))]
    assert res.winner != "none"  # the model is overconfident
    # every class dealt evenly over the folds
    for label in range(4):
        counts = np.bincount(res.folds[y == label], minlength=5)
        assert counts.max() - counts.min() <= 1


def test_multiclass_weights_and_own_folds_match_the_loop():
    y, p = _multiclass_data(400, seed=22, c=3)
    folds = np.arange(400) % 4
    w = np.random.default_rng(3).integers(0, 3, 400).astype(float)
    res = clf.select_calibrator(y, p, folds=folds, weights=w, score="brier")
    ref = _multiclass_reference(y, p.astype(DT), folds, res.names, "brier", weights=w)
    tol = dict(rtol=2e-4, atol=2e-5) if DT == np.float32 else dict(rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(res.fold_scores, ref, **tol)


@pytest.mark.parametrize("winner", ["temperature", "vector", "dirichlet"])
def test_multiclass_winner_is_a_dirichlet_map_refitted_on_all_the_data(winner):
    from scipy.special import softmax

    y, p = _multiclass_data(500, seed=23)
    res = clf.select_calibrator(y, p, key=0, candidates=(winner,))
    assert res.winner == winner
    assert type(res.calibrator).__name__ == "DirichletCalibrator"
    logp = np.log(p.astype(DT))
    if winner == "temperature":
        t = float(clf.fit_temperature(y, logp).temperature)
        want = softmax(logp / t, axis=1)
    elif winner == "vector":
        want = clf.fit_vector_scaling(y, logp)(logp)
    else:
        want = clf.fit_dirichlet(y, p.astype(DT))(p.astype(DT))
    np.testing.assert_allclose(res.calibrator(p.astype(DT)), want, rtol=1e-4, atol=1e-6)


def test_multiclass_calibrated_model_none_is_within_one_se():
    from scipy.special import softmax

    rng = np.random.default_rng(24)
    p = softmax(rng.normal(size=(800, 3)) * 1.5, axis=1)
    y = (rng.uniform(size=(800, 1)) > np.cumsum(p, axis=1)).sum(axis=1).clip(0, 2)
    res = clf.select_calibrator(y, p, key=1, rule="one_se")
    assert res.winner == "none" and res.calibrator is None


@pytest.mark.parametrize(
    "y, p, kwargs, error, match",
    [
        ([0, 1, 2], [[0.5, 0.5, 0.0]] * 3, {}, ValueError, r"in \(0, 1\]"),
        ([0, 1, 2], [[0.5, 0.4, 0.2]] * 3, {}, ValueError, "rows must sum to 1"),
        ([0, 1, 3], [[0.5, 0.3, 0.2]] * 3, {}, ValueError, "class labels 0 .. 2"),
        ([0, 1], [[0.5, 0.3, 0.2]] * 3, {}, ValueError, "shapes"),
        (
            [0, 1, 2],
            [[0.5, 0.3, 0.2]] * 3,
            {"candidates": ("platt",)},
            ValueError,
            "names among",
        ),
        ([0, 1, 2], [[0.5, 0.3, 0.2]] * 3, {}, ValueError, "at least folds=5 members"),
        (
            [0, 1, 2],
            [[0.5, 0.3, 0.2]] * 3,
            {"folds": [0, 1, 1]},
            ValueError,
            "miss a class",
        ),
    ],
)
def test_multiclass_bad_input(y, p, kwargs, error, match):
    with pytest.raises(error, match=match):
        clf.select_calibrator(y, p, **{"key": 0, **kwargs})


def test_multiclass_deterministic_for_a_key_and_compiles_nothing_on_a_new_n():
    from tests.conftest import compilations_during

    y, p = _multiclass_data(300, seed=25)
    a = clf.select_calibrator(y, p, key=2)
    np.testing.assert_array_equal(a.folds, clf.select_calibrator(y, p, key=2).folds)
    assert not np.array_equal(a.folds, clf.select_calibrator(y, p, key=3).folds)
    y2, p2 = _multiclass_data(301, seed=26)
    assert compilations_during(lambda: clf.select_calibrator(y2, p2, key=7)) == 0


def test_two_columns_of_predict_proba_get_the_column_hint():
    # Issue "Verdicts a user can trust", friction: scikit-learn's [N, 2] predict_proba
    # got ".ravel()" as advice (which then fails on length), and select_calibrator took
    # it silently as a multiclass problem (winner "vector", a DirichletCalibrator).
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, size=60)
    y = (rng.uniform(size=60) < p).astype(int)
    two = np.stack([1 - p, p], axis=1)
    with pytest.raises(
        ValueError, match=r"pass y_prob\[:, 1\] \(the probability of class 1\)"
    ):
        clf.expected_calibration_error(y, two)
    with pytest.raises(ValueError, match=r"y_prob has two columns.*pass y_prob\[:, 1\]"):
        clf.select_calibrator(y, two, key=0)
    named = clf.select_calibrator(y, two, key=0, candidates=("none", "temperature"))
    assert named.names == ("none", "temperature")  # asked for by name: multiclass
    assert clf.select_calibrator(y, two[:, 1], key=0).names == (
        "none",
        "platt",
        "isotonic",
        "beta",
        "histogram",
    )


def test_exact_zeros_and_ones_select_without_a_clip_as_scikit_learn_fits():
    # Issue "Verdicts a user can trust", item 6: a random forest's exact 0 and 1 made
    # select_calibrator raise (eps=1e-6 too), and clipping changed Platt's result with
    # the clip. The default candidates now fit Platt on the probability as the score.
    from sklearn.calibration import _SigmoidCalibration

    rng = np.random.default_rng(5)
    p = np.round(rng.uniform(size=600), 1)  # 0.0, 0.1, ..., 1.0: a forest's votes
    y = (rng.uniform(size=600) < 0.1 + 0.8 * p).astype(int)
    res = clf.select_calibrator(y, p, key=0)
    assert res.names == ("none", "platt_score", "isotonic", "histogram")
    assert "inf: in some fold a predicted probability of exactly 0" in repr(res)
    both = clf.select_calibrator(y, p, key=0, candidates=("none", "platt_score"))
    assert both.winner == "platt_score"  # "none" scores inf: events at p = 0
    ref = _SigmoidCalibration().fit(p, y)  # scikit-learn's Platt on predict_proba
    cal = both.calibrator
    assert cal.input == "score"
    np.testing.assert_allclose([float(cal.a), float(cal.b)], [ref.a_, ref.b_], rtol=2e-3)
    np.testing.assert_allclose(cal(p), ref.predict(p), rtol=1e-3, atol=1e-5)
    with pytest.raises(ValueError, match="Name 'platt_score' instead of 'platt'"):
        clf.select_calibrator(y, p, key=0, candidates=("none", "platt"))


@pytest.mark.slow
def test_the_default_rule_recalibrates_only_with_evidence():
    # Issue "Verdicts a user can trust", item 9: under rule="min" a calibrated model
    # lost to Platt by 0.00048 +- 0.00022. The default ("paired") keeps "none" unless
    # the 95% t interval of the winner's paired difference to it lies below 0.
    # Simulation, 30 data sets of N = 500 per case (fixed seeds). Calibrated: a false
    # recalibration needs one of 4 candidates' intervals to miss 0 on the wrong side
    # (<= 4 x 2.5% = 10% by the union bound), so more than 7 of 30 has probability
    # < 0.01 under Bin(30, 0.1). Overconfident (p = sigmoid(3 logit p_true)): the
    # gain is many SEs, so at least 27 of 30 recalibrate.
    false_alarms = misses = 0
    for r in range(30):
        rng = np.random.default_rng(100 + r)
        p_true = rng.uniform(0.05, 0.95, 500)
        y = (rng.uniform(size=500) < p_true).astype(int)
        false_alarms += clf.select_calibrator(y, p_true, key=r).winner != "none"
        over = 1 / (1 + ((1 - p_true) / p_true) ** 3)
        misses += clf.select_calibrator(y, over, key=r).winner == "none"
    assert false_alarms <= 7
    assert misses <= 3


def test_the_paired_rule_keeps_a_finite_winner_over_an_infinite_none():
    from bayescal._src.selection import summarise

    scores = np.array([[np.inf, 0.5, 0.4, 0.5, 0.6], [0.40, 0.42, 0.39, 0.41, 0.40]])
    assert summarise(scores, ("none", "platt"), "paired").winner == 1
    close = np.array([[0.400, 0.410, 0.390, 0.405, 0.395], [0.399, 0.411, 0.389, 0.404, 0.396]])
    assert summarise(close, ("none", "platt"), "min").winner == 1
    assert summarise(close, ("none", "platt"), "paired").winner == 0  # within noise


def _forest(seed=0):
    """A random forest's probabilities (exact 0 and 1 among them) on calibration and
    test thirds of scikit-learn's breast-cancer data, trained on the rest."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    x, y = load_breast_cancer(return_X_y=True)
    x_fit, x_rest, y_fit, y_rest = train_test_split(
        x, y, test_size=0.6, random_state=seed, stratify=y
    )
    x_cal, x_test, y_cal, y_test = train_test_split(
        x_rest, y_rest, test_size=0.5, random_state=seed, stratify=y_rest
    )
    forest = RandomForestClassifier(n_estimators=50, random_state=seed).fit(x_fit, y_fit)
    return (
        y_cal,
        forest.predict_proba(x_cal)[:, 1],
        y_test,
        forest.predict_proba(x_test)[:, 1],
    )


def test_shrunk_candidates_score_finite_on_a_random_forest():
    # Issue 37, item 9: the histogram candidate (the raw fraction of positives) could
    # say exactly 0 or 1 from a bin of a few observations, so a held-out observation
    # of the other class there scored inf. It now shrinks, (k + 1/2) / (n + 1) (as
    # BBQ's candidate takes its posterior means): every fold score, and the refitted
    # winner's log-loss on new data, is finite. Reference: sklearn.metrics.log_loss.
    y_cal, p_cal, y_test, p_test = _forest()
    assert np.any(p_cal == 0) and np.any(p_cal == 1) and np.any(p_test == 1)
    names = ("none", "platt_score", "isotonic", "histogram", "bbq")
    res = clf.select_calibrator(y_cal, p_cal, key=0, candidates=names, rule="min")
    for name in ("platt_score", "histogram", "bbq"):
        row = res.fold_scores[names.index(name)]
        assert np.all(np.isfinite(row)), (name, row)
        cal = clf.select_calibrator(y_cal, p_cal, key=0, candidates=(name,)).calibrator
        q = np.asarray(cal(p_test), np.float64)
        assert np.all((q > 0) & (q < 1)), name
        want = sk_log_loss(y_test, q, labels=[0, 1])
        assert np.isfinite(want)
        np.testing.assert_allclose(clf.log_loss(y_test, q), want, rtol=1e-5)
    # the raw fraction: exactly 1 in a pure bin, and inf on this test set
    raw = clf.fit_histogram_binning(y_cal, p_cal, shrinkage=None)
    assert np.any(np.asarray(raw.values) == 1.0)
    assert np.isinf(float(clf.log_loss(y_test, raw(p_test))))
    # the isotonic fit and the forest itself still say 0 and 1: their rows may be inf
    # (the table's footnote says why); eps= clips them when the user wants a number


# --------------------------------------------------------------------------- temperature
# Issue 37, item 3: a binary "temperature" candidate (q = sigmoid(logit(p) / T), Platt
# scaling with the intercept fixed at 0), named, not a default.
def _overconfident(n, seed, slope=2.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, n)  # the true log-odds
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    return y, 1 / (1 + np.exp(-slope * z))


def _logistic_slope(y, p, w=None):
    # reference: scikit-learn's unpenalised logistic regression (C=np.inf, the
    # replacement of penalty=None since 1.8) of y on the single feature logit(p),
    # without intercept: its coefficient is 1 / T (Guo et al. 2017, binary case)
    from sklearn.linear_model import LogisticRegression

    p = np.asarray(p, np.float64)
    x = (np.log(p) - np.log1p(-p))[:, None]
    m = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10_000)
    return float(m.fit(x, y, sample_weight=w).coef_[0, 0])


def test_binary_temperature_equals_an_interceptless_logistic_regression():
    y, p = _overconfident(2000, seed=20)
    p = p.astype(DT)
    res = clf.select_calibrator(y, p, key=0, candidates=("none", "temperature"))
    assert res.winner == "temperature"  # p = sigmoid(2 z): 1 / T near 1/2
    cal = res.calibrator
    assert isinstance(cal, clf.PlattCalibrator) and cal.input == "prob"
    slope = _logistic_slope(y, p)
    np.testing.assert_allclose(-float(cal.a), slope, rtol=1e-5)
    assert float(cal.b) == 0 and abs(slope - 0.5) < 0.05
    logit = np.log(p.astype(float)) - np.log1p(-p.astype(float))
    np.testing.assert_allclose(cal(p), 1 / (1 + np.exp(-slope * logit)), rtol=2e-5)
    # the fold scores: the same interceptless fit on each training part, scored by
    # sklearn's log_loss on the held-out part
    fits = {"none": None, "temperature": lambda yt, pt, weights: clf.PlattCalibrator(
        np.asarray(-_logistic_slope(yt, pt, weights), DT), np.asarray(0, DT))}
    ref = _reference(y, p, res.folds, res.names, "log_loss", fits=fits)
    np.testing.assert_allclose(res.fold_scores, ref, rtol=1e-5)


def test_binary_temperature_numpy_fits_equal_the_compiled_kernel(monkeypatch):
    from bayescal._src import selection

    y, p = _overconfident(300, seed=21, slope=3.0)
    w = np.random.default_rng(3).integers(0, 3, 300).astype(float)
    p[:7], p[7:12] = 0.0, 1.0  # exact 0 and 1 too

    def run(host):
        monkeypatch.setattr(selection, "on_host", lambda n: host)
        return clf.select_calibrator(
            y, p, key=7, weights=w, candidates=("none", "temperature"), score="brier"
        )

    a, b = run(True), run(False)
    np.testing.assert_allclose(a.fold_scores, b.fold_scores, **TOL)
    grid = np.r_[0.0, np.linspace(0.01, 0.99, 97), 1.0].astype(DT)
    np.testing.assert_allclose(a.calibrator(grid), b.calibrator(grid), **TOL)


def test_binary_temperature_keeps_exact_zeros_and_ones_and_fits_the_others():
    # sigmoid(logit(p) / T) is 0 at p = 0 and 1 at p = 1 for every T > 0: those rows
    # cannot inform T, so the fit leaves them out (no clip, no error), and the
    # calibrator maps them to themselves
    y, p = _overconfident(600, seed=22, slope=3.0)
    p = p.astype(DT)
    p[:20], p[20:40] = 0.0, 1.0
    res = clf.select_calibrator(y, p, key=0, candidates=("temperature",))
    cal = res.calibrator
    inside = (p > 0) & (p < 1)
    np.testing.assert_allclose(-float(cal.a), _logistic_slope(y[inside], p[inside]), rtol=1e-5)
    q = np.asarray(cal(p))
    assert np.all(q[:20] == 0) and np.all(q[20:40] == 1)
    assert np.all((q[inside] > 0) & (q[inside] < 1))
    # ... as does the default's switch away from the logit's candidates: temperature is
    # not among them, and naming it with "platt" still asks for "platt_score"
    with pytest.raises(ValueError, match=r"candidates \['platt'\] cannot fit them"):
        clf.select_calibrator(y, p, key=0, candidates=("temperature", "platt"))


def test_temperature_is_registered_but_not_a_default():
    from bayescal.classification._select import DEFAULT

    assert "temperature" in CANDIDATES and "temperature" not in DEFAULT


def test_binary_temperature_round_trips_through_save_and_load(tmp_path):
    y, p = _overconfident(400, seed=23)
    cal = clf.select_calibrator(y, p, key=0, candidates=("temperature",)).calibrator
    clf.save_calibrator(cal, tmp_path / "t.npz")
    back = clf.load_calibrator(tmp_path / "t.npz")
    grid = np.linspace(0.01, 0.99, 9, dtype=DT)
    np.testing.assert_array_equal(back(grid), cal(grid))


def test_binary_temperature_first_call_compiles_at_most_the_fold_program():
    # its folds are fitted by fit_temperature's NumPy twin and scored in NumPy, exact
    # 0 and 1 included (the calibrator's own call would take its kernel there)
    from tests.conftest import compilations_during

    y, p = _overconfident(3001, seed=24)
    p[:5], p[5:9] = 0.0, 1.0
    count = compilations_during(
        lambda: clf.select_calibrator(y, p, key=0, candidates=("none", "temperature"))
    )
    assert count <= 1


@pytest.mark.parametrize(
    "p, match",
    [
        # every label on the side of 1/2 that p says: the NLL falls as T -> 0
        (np.r_[np.linspace(0.05, 0.45, 50), np.linspace(0.55, 0.95, 50)], "T -> 0"),
        (np.r_[np.zeros(50), np.ones(50)], "weights are all 0"),  # nothing inside (0, 1)
    ],
)
def test_binary_temperature_without_a_finite_fit_names_y_prob(p, match):
    y = np.r_[np.zeros(50, int), np.ones(50, int)]
    with pytest.raises(ValueError, match="'temperature' candidate cannot be fitted to y_prob") as e:
        clf.select_calibrator(y, p, key=0, candidates=("none", "temperature"))
    assert match in str(e.value)
