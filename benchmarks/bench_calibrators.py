"""The calibrators and calibration tests of issue 20, each against its peer.

Same inputs, one process, for every row and every N:

1. *cold*: the first call of the bayescal function at this N in this process (its
   compilation included; an earlier row may have compiled a shared piece, e.g. the
   isotonic fit behind Venn-ABERS; N = 1e3 is the first N of every row);
2. the peer is run and its numbers are compared with the cold call's: they must agree
   within the row's stated tolerance (the script stops with an AssertionError
   otherwise), before anything else is timed;
3. *warm*: the median of ``--repeat`` further calls of bayescal; *peer*: the median
   of ``--repeat`` calls of the peer (at most 3).

Fit rows time fit + apply on 100 new points (the package peers need both to give a
number); test rows time the statistic and its p-value. A peer that is not installed
gives a row marked "peer not installed" (bayescal still timed). Inputs are numpy
float32 arrays (float64 under ``JAX_ENABLE_X64=1``), built before the clock starts.

Peers (the ``bench`` extra of pyproject.toml, except scikit-learn/scipy/numpy ones):
``venn-abers`` 1.5 (``VennAbers``), an IVAP built from scikit-learn's
``IsotonicRegression`` (refit with each test point, Vovk et al. 2015), ``probcal``
0.4 (``CenteredIsotonicCalibrator``), ``uncertainty-calibration`` 0.1.4 (Kumar et al.
2019's ``PlattBinnerCalibrator``), scikit-learn's ``LogisticRegression`` (matrix
scaling on logits; Dirichlet calibration without regularization on log-probabilities,
since ``dirichletcal`` does not install from the package index: its setup.py has a
malformed ``install_requires``), scipy L-BFGS-B on the vector-scaling NLL, numpy
(top-label histogram binning per Gupta & Ramdas 2022; the O(N^2) kernel calibration
error of Widmann et al. 2019; Hosmer-Lemeshow, Spiegelhalter's z, ICI with
scikit-learn's isotonic fit), ``statsmodels`` GLM (calibration slope and intercept),
a plain cross-validation loop over scikit-learn's ``PredefinedSplit`` as in
``CalibratedClassifierCV`` (``select_calibrator``, binary; and multiclass, with
temperature scaling by scipy, vector scaling by scipy L-BFGS-B and Dirichlet
calibration by ``LogisticRegression`` on log-probabilities, scored by
``sklearn.metrics.log_loss``), and ``splinecalib`` 0.0.13 (``SplineCalib``, Lucena
2018; ``fit_spline``), built from source by pip (a C extension; gcc).

``python benchmarks/bench_calibrators.py [--sizes 1e3,1e4,1e5] [--repeat 5]
[--markdown FILE]`` prints the markdown table (and writes it atomically to FILE, never
replacing a file this script did not write); ``benchmarks/run.py bench_calibrators``
runs it with the other benchmarks.
"""

from __future__ import annotations

import argparse
import importlib
import math
import pathlib
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's bayescal, not an installed one

import jax  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402
import scipy.special  # noqa: E402
import scipy.stats  # noqa: E402
from _common import block, median_time, row, write_atomic  # noqa: E402

from bayescal import classification as clf  # noqa: E402

MARK = "<!-- written by benchmarks/bench_calibrators.py -->"
NOT_INSTALLED = "peer not installed"
NUM_TEST = 100  # new points each fitted calibrator is applied to
K_CLASSES = 4
NUM_FOLDS = 5
SPLINE_KNOTS = 10  # fit_spline's default
BANDWIDTH = 0.3  # the kernel's length scale, given to both sides (bayescal's default
# median heuristic subsamples 512 points; the O(N^2) median would dominate the peer)


def _dtype():
    return np.float64 if jax.config.jax_enable_x64 else np.float32


def _loose(f32: float, f64: float) -> float:
    return f64 if jax.config.jax_enable_x64 else f32


def _peer_module(name: str):
    """The peer's module, or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# --------------------------------------------------------------------------------------
# Data (numpy only)
# --------------------------------------------------------------------------------------
def _binary(n: int, seed: int):
    """Labels from p_true; the model's p is overconfident and shifted (miscalibrated)."""
    r = np.random.default_rng(seed)
    p_true = r.uniform(0.03, 0.97, n)
    y = (r.uniform(size=n) < p_true).astype(np.int64)
    p = scipy.special.expit(1.5 * scipy.special.logit(p_true) + 0.3).astype(_dtype())
    test = scipy.special.expit(1.5 * r.normal(0, 1.3, NUM_TEST)).astype(_dtype())
    return y, p, test


def _multiclass(n: int, seed: int):
    r = np.random.default_rng(seed)
    z = 2.0 * r.normal(size=(n + NUM_TEST, K_CLASSES))
    truth = scipy.special.softmax(0.6 * z + np.array([0.3, 0, -0.2, 0.1]), axis=1)
    y = (r.uniform(size=(n + NUM_TEST, 1)) > truth.cumsum(1)).sum(1).clip(0, K_CLASSES - 1)
    z = z.astype(_dtype())
    return y[:n], z[:n], z[n:]


# --------------------------------------------------------------------------------------
# Peers written out (numpy / scipy / scikit-learn)
# --------------------------------------------------------------------------------------
def _sklearn_ivap(y, s, test):
    """IVAP by definition: scikit-learn's isotonic fit of the calibration set plus the
    test point with label 0, resp. 1, read at the test point (Vovk et al. 2015)."""
    from sklearn.isotonic import IsotonicRegression

    s64 = np.asarray(s, np.float64)
    out = np.empty((len(test), 2))
    for i, t in enumerate(np.asarray(test, np.float64)):
        for label in (0, 1):
            ir = IsotonicRegression(out_of_bounds="clip")
            ir.fit(np.append(s64, t), np.append(y, label))
            out[i, label] = ir.predict([t])[0]
    return out


def _isotonic_prior(y, s, test, a, b):
    """fit_isotonic(prior=(a, b)) by its definition: scikit-learn's isotonic fit, every
    level set (W, v) shrunk to (W v + a) / (W + a + b), scipy's weighted PAV again with
    weights W + a + b, linear interpolation between the distinct scores."""
    from sklearn.isotonic import IsotonicRegression

    s64 = np.asarray(s, np.float64)
    x, counts = np.unique(s64, return_counts=True)
    fit = IsotonicRegression(out_of_bounds="clip").fit(s64, y).predict(x)
    starts = np.flatnonzero(np.r_[True, fit[1:] != fit[:-1]])
    w = np.add.reduceat(counts.astype(float), starts)
    v = fit[starts]
    shrunk = scipy.optimize.isotonic_regression((w * v + a) / (w + a + b), weights=w + a + b).x
    values = np.repeat(shrunk, np.diff(np.r_[starts, x.size]))
    return np.interp(np.asarray(test, np.float64), x, values)


def _vector_scaling(y, z, test):
    """Guo et al. (2017) vector scaling softmax(v * z + b), NLL minimised by scipy."""
    z = np.asarray(z, np.float64)
    n, k = z.shape
    onehot = np.eye(k)[y]

    def loss(theta):
        eta = theta[:k] * z + theta[k:]
        q = scipy.special.softmax(eta, axis=1)
        nll = -np.sum(onehot * scipy.special.log_softmax(eta, axis=1)) / n
        g = (q - onehot) / n
        return nll, np.r_[np.sum(g * z, 0), np.sum(g, 0)]

    theta = np.r_[np.ones(k), np.zeros(k)]
    res = scipy.optimize.minimize(
        loss, theta, jac=True, method="L-BFGS-B", options=dict(gtol=1e-10, ftol=1e-14)
    )
    v, b = res.x[:k], res.x[k:]
    return scipy.special.softmax(v * np.asarray(test, np.float64) + b, axis=1)


def _multinomial(y, features, test):
    """Unpenalised multinomial logistic regression (scikit-learn, lbfgs)."""
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000)
    m.fit(np.asarray(features, np.float64), y)
    return m.predict_proba(np.asarray(test, np.float64))


def _top_label(y, probs, test, bins=10):
    """Gupta & Ramdas (2022), Algorithm 2 with uniform-mass histogram binning: per
    predicted class, bins at np.quantile's k/B quantiles of its rows' confidences,
    [e_k, e_{k+1}) with the last closed, value = fraction correct (empty: midpoint)."""
    label, conf = probs.argmax(1), probs.max(1)
    tl, tc = test.argmax(1), test.max(1).astype(np.float64)
    out = np.empty(len(test))
    for k in range(probs.shape[1]):
        rows = label == k
        c = conf[rows]
        edges = np.quantile(c, (np.arange(bins + 1) / bins).astype(c.dtype)).astype(np.float64)
        idx = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, bins - 1)
        hits = np.bincount(idx, weights=(y[rows] == k).astype(float), minlength=bins)
        cnt = np.bincount(idx, minlength=bins)
        mid = (edges[:-1] + edges[1:]) / 2
        values = np.where(cnt > 0, hits / np.maximum(cnt, 1), mid)
        sel = tl == k
        j = np.clip(np.searchsorted(edges, tc[sel], side="right") - 1, 0, bins - 1)
        out[sel] = values[j]
    return tl, out


def _kernel_uq(y, p, bandwidth, block_rows=1024):
    """Widmann et al. (2019) unbiased quadratic SKCE, binary as (1 - p, p):
    h_ij = exp(-sqrt(2) |p_i - p_j| / nu) * 2 (y_i - p_i)(y_j - p_j), mean over i < j;
    numpy O(N^2) in blocks of rows (float64)."""
    p = np.asarray(p, np.float64)
    r = y - p
    n = p.size
    total = 0.0
    for i0 in range(0, n, block_rows):
        pi, ri = p[i0 : i0 + block_rows, None], r[i0 : i0 + block_rows, None]
        h = np.exp(-math.sqrt(2) * np.abs(pi - p[None]) / bandwidth) * 2 * ri * r[None]
        total += h.sum() - np.trace(h[:, i0 : i0 + block_rows])
    return total / (n * (n - 1))


def _linear_skce_test(y, p, points=512):
    """Widmann et al. (2019): the linear SKCE estimator's test (Lemma 3's terms
    h_{2i, 2i+1}, normal approximation, one-sided), binary as (1 - p, p), with the
    median heuristic nu = np.median of ||p_i - p_j|| over the pairs i < j of ``points``
    observations spread over the data (rows floor(k n / points), as bayescal takes
    them); numpy, float64."""
    p = np.asarray(p, np.float64)
    n = p.size
    m = min(n, points)
    sub = p[(np.arange(m) * n) // m]
    iu, ju = np.triu_indices(m, 1)
    nu = float(np.median(math.sqrt(2) * np.abs(sub[iu] - sub[ju])))
    r = y - p
    a, b = slice(0, n - n % 2, 2), slice(1, n - n % 2, 2)
    terms = np.exp(-math.sqrt(2) * np.abs(p[a] - p[b]) / nu) * 2 * r[a] * r[b]
    mean, sd = terms.mean(), terms.std(ddof=1)
    return mean, scipy.stats.norm.sf(math.sqrt(terms.size) * mean / sd), nu


def _hosmer_lemeshow(y, p, g=10):
    """Hosmer & Lemeshow (1980): groups at np.quantile's k/g quantiles, chi2(g - 2)."""
    edges = np.quantile(p, (np.arange(g + 1) / g).astype(p.dtype))
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, g - 1)
    q = p.astype(np.float64)
    o = np.bincount(idx, weights=y, minlength=g)
    e = np.bincount(idx, weights=q, minlength=g)
    nk = np.bincount(idx, minlength=g)
    keep = nk > 0
    stat = np.sum((o - e)[keep] ** 2 / (e * (1 - e / np.maximum(nk, 1)))[keep])
    return stat, scipy.stats.chi2.sf(stat, g - 2)


def _spiegelhalter(y, p):
    q = p.astype(np.float64)
    z = np.sum((y - q) * (1 - 2 * q)) / np.sqrt(np.sum((1 - 2 * q) ** 2 * q * (1 - q)))
    return z, 2 * scipy.stats.norm.sf(abs(z))


def _ici(y, p):
    """ICI/E50/E90/Emax with scikit-learn's isotonic fit as the smoother."""
    from sklearn.isotonic import IsotonicRegression

    q = p.astype(np.float64)
    d = np.abs(q - IsotonicRegression(out_of_bounds="clip").fit(q, y).predict(q))
    return np.array([d.mean(), np.quantile(d, 0.5), np.quantile(d, 0.9), d.max()])


def _platt_soft(y, p):
    """fit_platt's default (Platt's smoothed targets) with scikit-learn: every row as
    a label-1 row of weight t_i and a label-0 row of weight 1 - t_i, C = inf."""
    from sklearn.linear_model import LogisticRegression

    npos = y.sum()
    t = np.where(y == 1, (npos + 1) / (npos + 2), 1 / (y.size - npos + 2))
    f = scipy.special.logit(np.asarray(p, np.float64))[:, None]
    m = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000)
    m.fit(np.r_[f, f], np.r_[np.ones(y.size), np.zeros(y.size)], sample_weight=np.r_[t, 1 - t])
    return lambda q: m.predict_proba(scipy.special.logit(np.asarray(q, np.float64))[:, None])[:, 1]


def _cv_table(y, p, folds, eps):
    """CalibratedClassifierCV-style loop: per PredefinedSplit fold, fit each candidate
    on the training part (scikit-learn) and score the held-out part (log-loss)."""
    from sklearn.isotonic import IsotonicRegression
    from sklearn.metrics import log_loss
    from sklearn.model_selection import PredefinedSplit

    p64 = np.asarray(p, np.float64)
    table = np.empty((3, folds.max() + 1))
    for k, (train, test) in enumerate(PredefinedSplit(folds).split()):
        iso = IsotonicRegression(out_of_bounds="clip").fit(p64[train], y[train])
        preds = (p64[test], _platt_soft(y[train], p[train])(p64[test]), iso.predict(p64[test]))
        for c, q in enumerate(preds):
            table[c, k] = log_loss(y[test], np.clip(q, eps, 1 - eps), labels=[0, 1])
    return table


def _temperature(y, z, test):
    """Guo et al. (2017) temperature scaling softmax(z / T), the NLL minimised by scipy
    L-BFGS-B over log T."""
    z = np.asarray(z, np.float64)
    n, k = z.shape
    onehot = np.eye(k)[y]

    def loss(theta):
        eta = z / np.exp(theta[0])
        q = scipy.special.softmax(eta, axis=1)
        nll = -np.sum(onehot * scipy.special.log_softmax(eta, axis=1)) / n
        return nll, np.array([-np.sum((q - onehot) * eta) / n])  # d eta / d log T = -eta

    res = scipy.optimize.minimize(
        loss, np.zeros(1), jac=True, method="L-BFGS-B", options=dict(gtol=1e-10, ftol=1e-14)
    )
    return scipy.special.softmax(np.asarray(test, np.float64) / np.exp(res.x[0]), axis=1)


MULTICLASS = ("none", "temperature", "vector", "dirichlet")


def _cv_table_multiclass(y, probs, folds, test):
    """The multiclass select_calibrator by hand: per PredefinedSplit fold, each
    candidate fitted on the training part's log-probabilities (scipy / scikit-learn)
    and scored on the held-out part by sklearn.metrics.log_loss; the winner (lowest
    mean, the first on ties) refitted on all the data and applied to ``test``."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import PredefinedSplit

    logp, tlogp = np.log(np.asarray(probs, np.float64)), np.log(np.asarray(test, np.float64))
    labels = np.arange(probs.shape[1])

    def fit(name, rows, new):
        if name == "none":  # the float32 rows renormalised in float64 (as log_loss would)
            return np.exp(new) / np.exp(new).sum(1, keepdims=True)
        if name == "temperature":
            return _temperature(y[rows], logp[rows], new)
        if name == "vector":
            return _vector_scaling(y[rows], logp[rows], new)
        return _multinomial(y[rows], logp[rows], new)  # Dirichlet, unregularized

    table = np.empty((len(MULTICLASS), folds.max() + 1))
    for k, (train, held) in enumerate(PredefinedSplit(folds).split()):
        for c, name in enumerate(MULTICLASS):
            table[c, k] = log_loss(y[held], fit(name, train, logp[held]), labels=labels)
    winner = MULTICLASS[int(np.argmin(table.mean(1)))]
    return table, winner, fit(winner, np.arange(y.size), tlogp)


def _splinecalib_order(sc, y, num_folds):
    """A reordering of the rows for splinecalib: its stratified folds (calib_utils.
    get_stratified_foldnums, seed 42: each class shuffled, then cut in contiguous
    blocks) of the reordered rows are fit_spline's folds of the rows (the j-th row of
    each class in fold j mod F). Needs every class count a multiple of F."""
    theirs = sc.calib_utils.get_stratified_foldnums(y.astype(np.float64), num_folds, 42)
    ours = np.empty(y.size, np.int64)
    for c in (0, 1):
        rows = np.flatnonzero(y == c)
        ours[rows] = np.arange(rows.size) % num_folds
    order = np.empty(y.size, np.int64)
    for c in (0, 1):
        for f in range(num_folds):
            slots = np.flatnonzero((y == c) & (theirs == f))
            rows = np.flatnonzero((y == c) & (ours == f))
            assert slots.size == rows.size, "class counts must be multiples of the folds"
            order[slots] = rows
    return order


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    peer: str  # the peer's name in the table
    module: str | None  # the peer's package (None: scikit-learn / scipy / numpy)
    max_n: int  # the largest N with a peer row (the peer takes seconds beyond it)
    tolerance: str  # as stated in the table
    note: str
    setup: Callable[[int], tuple[Callable[[], Any], Callable[[Any], Any], Callable]]
    # setup(n) -> (ours(), peer(module), check(ours_out, peer_out))


def _close(got, want, atol, rtol=0.0):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               atol=atol, rtol=rtol)


def _venn(n):
    y, s, test = _binary(n, 1)

    def ours():
        return clf.fit_venn_abers(y, s)(test)

    def peer(va):
        m = va.VennAbers().fit(np.stack([1 - s, s], 1).astype(np.float64), y)
        return m.predict_proba(np.stack([1 - test, test], 1).astype(np.float64))[1]

    def check(out, ref):
        _close(np.stack([np.asarray(o) for o in out], 1), ref, _loose(2e-5, 1e-9))

    return ours, peer, check


def _venn_sklearn(n):
    ours, _, check = _venn(n)
    y, s, test = _binary(n, 1)
    return ours, lambda _: _sklearn_ivap(y, s, test), check


def _cross_venn(n):
    y, s, test = _binary(n, 2)
    folds = np.random.default_rng(3).permutation(np.arange(n) % NUM_FOLDS)
    tests = np.repeat(test[:, None], NUM_FOLDS, 1)

    def ours():
        cal = clf.fit_cross_venn_abers(y, s, folds)
        return cal(tests), cal.probability(tests)

    def peer(va):
        p0, p1 = [], []
        for k in range(NUM_FOLDS):
            rows = folds == k
            m = va.VennAbers().fit(np.stack([1 - s[rows], s[rows]], 1).astype(np.float64),
                                   y[rows])
            pair = m.predict_proba(np.stack([1 - test, test], 1).astype(np.float64))[1]
            p0.append(pair[:, 0])
            p1.append(pair[:, 1])
        p0, p1 = np.stack(p0, 1), np.stack(p1, 1)
        g1 = np.exp(np.mean(np.log(p1), 1))  # Vovk, Petej & Fedorova (2015)
        g0 = np.exp(np.mean(np.log1p(-p0), 1))
        return p0, p1, g1 / (g0 + g1)

    def check(out, ref):
        (p0, p1), p = out
        tol = _loose(3e-5, 1e-9)
        _close(p0, ref[0], tol)
        _close(p1, ref[1], tol)
        _close(p, ref[2], tol)

    return ours, peer, check


def _centered(n):
    y, s, _ = _binary(n, 4)
    q = np.linspace(0.001, 0.999, NUM_TEST).astype(s.dtype)

    def ours():
        return clf.fit_centered_isotonic(y, s)(q)

    def peer(probcal):
        pc = probcal.CenteredIsotonicCalibrator().fit(s.astype(np.float64), y)
        ref = np.asarray(pc.predict_proba(q.astype(np.float64)))
        return (ref[:, 1] if ref.ndim == 2 else ref), pc

    def check(out, ref):
        ref, pc = ref
        # probcal keeps adjacent PAV blocks of equal level apart, Oron & Flournoy pool
        # them: compare where neither end block shares its level (tests/test_venn.py)
        lv, cs = np.asarray(pc.block_mean_), np.asarray(pc.block_center_s_)
        # (equal up to rounding: probcal's block means are sums / counts, 2/10 vs 3/15)
        same = np.isclose(lv[1:], lv[:-1], rtol=1e-9, atol=1e-12)
        shared = np.zeros(lv.size, bool)
        shared[1:] |= same
        shared[:-1] |= same
        seg = np.searchsorted(cs, q, side="right") - 1
        ok = (seg >= 0) & (seg < lv.size - 1)
        ok[ok] &= ~shared[seg[ok]] & ~shared[seg[ok] + 1]
        assert ok.mean() > 0.3, f"comparable on only {ok.mean():.0%} of the grid"
        _close(np.asarray(out)[ok], ref[ok], _loose(2e-5, 1e-9))

    return ours, peer, check


def _iso_prior(n):
    y, s, test = _binary(n, 5)

    def ours():
        return clf.fit_isotonic(y, s, prior=1.0)(test)

    def check(out, ref):
        # float32: at N = 1e5 neighbouring scores are ~1e-5 apart, so interpolating
        # between float32 thresholds is off by up to 2.4e-5 (seen); x64 to 1e-9
        _close(out, ref, _loose(5e-5, 1e-9))

    return ours, lambda _: _isotonic_prior(y, s, test, 1.0, 1.0), check


def _scaling_binning(n):
    y, p, _ = _binary(n, 6)
    p = np.clip(p, 1e-6, 1 - 1e-6).astype(p.dtype)

    def ours():
        return clf.fit_scaling_binning(y, p, bins=10, split=None)(p)

    def peer(calibration):
        c = calibration.PlattBinnerCalibrator(num_calibration=n, num_bins=10)
        c.train_calibration(p.astype(np.float64), y)
        return c.calibrate(p.astype(np.float64))

    def check(out, ref):
        # the package's lbfgs Platt step (scikit-learn's default tol 1e-4) stops early;
        # both maps are monotone, so the calibration points fall in the same bins and
        # only the bin means differ: ~5e-5 at N = 1e3-1e5, 1.7e-4 at N = 200 (the
        # smoke test's size), the same in float32 and x64
        _close(out, ref, 3e-4)

    return ours, peer, check


def _vector(n):
    y, z, test = _multiclass(n, 7)
    return (
        lambda: clf.fit_vector_scaling(y, z)(test),
        lambda _: _vector_scaling(y, z, test),
        lambda out, ref: _close(out, ref, _loose(2e-3, 1e-5)),
    )


def _matrix(n):
    y, z, test = _multiclass(n, 8)
    return (
        lambda: clf.fit_matrix_scaling(y, z)(test),
        lambda _: _multinomial(y, z, test),
        lambda out, ref: _close(out, ref, _loose(2e-3, 1e-5)),
    )


def _dirichlet(n):
    y, z, test = _multiclass(n, 9)
    probs = scipy.special.softmax(z.astype(np.float64), axis=1).astype(z.dtype)
    tprobs = scipy.special.softmax(test.astype(np.float64), axis=1).astype(z.dtype)
    return (
        lambda: clf.fit_dirichlet(y, probs)(tprobs),
        lambda _: _multinomial(y, np.log(probs.astype(np.float64)),
                               np.log(tprobs.astype(np.float64))),
        lambda out, ref: _close(out, ref, _loose(2e-3, 1e-5)),
    )


def _top(n):
    y, z, test = _multiclass(n, 10)
    probs = scipy.special.softmax(z.astype(np.float64), axis=1).astype(z.dtype)
    tprobs = scipy.special.softmax(test.astype(np.float64), axis=1).astype(z.dtype)

    def ours():
        # the paper's raw fractions (the default shrinks them: (k + 1/2) / (n + 1))
        out = clf.fit_top_label(y, probs, shrinkage=None)(tprobs)
        return out.label, out.confidence

    def check(out, ref):
        np.testing.assert_array_equal(np.asarray(out[0]), ref[0])
        _close(out[1], ref[1], _loose(1e-5, 1e-12))

    return ours, lambda _: _top_label(y, probs, tprobs), check


def _kernel(n):
    y, p, _ = _binary(n, 11)
    return (
        lambda: clf.kernel_calibration_error(y, p, bandwidth=BANDWIDTH),
        lambda _: _kernel_uq(y, p, BANDWIDTH),
        lambda out, ref: _close(out, ref, _loose(1e-6, 1e-12), _loose(1e-3, 1e-9)),
    )


def _kernel_test(n):
    y, p, _ = _binary(n, 11)

    def ours():
        t = clf.kernel_calibration_test(y, p)
        return t.statistic, t.p_value, t.bandwidth

    def check(out, ref):
        _close(out[2], ref[2], _loose(1e-6, 1e-12), _loose(1e-5, 1e-12))  # nu
        _close(out[0], ref[0], _loose(1e-6, 1e-12), _loose(1e-3, 1e-9))
        _close(out[1], ref[1], _loose(1e-4, 1e-9), _loose(1e-3, 1e-8))

    return ours, lambda _: _linear_skce_test(y, p), check


def _hl(n):
    y, p, _ = _binary(n, 12)

    def ours():
        r = clf.hosmer_lemeshow(y, p)
        return r.statistic, r.p_value

    def check(out, ref):
        _close(out[0], ref[0], _loose(1e-3, 1e-8), _loose(1e-4, 1e-9))
        _close(out[1], ref[1], _loose(1e-5, 1e-10), _loose(1e-3, 1e-6))

    return ours, lambda _: _hosmer_lemeshow(y, p), check


def _spiegel(n):
    y, p, _ = _binary(n, 13)

    def ours():
        r = clf.spiegelhalter_z(y, p)
        return r.statistic, r.p_value

    def check(out, ref):
        _close(out[0], ref[0], _loose(1e-4, 1e-10), _loose(1e-4, 1e-9))
        _close(out[1], ref[1], _loose(1e-5, 1e-10), _loose(1e-3, 1e-6))

    return ours, lambda _: _spiegelhalter(y, p), check


def _cumulative(n):
    r = np.random.default_rng(31)
    p = r.uniform(0.02, 0.98, n).astype(_dtype())
    y = (r.uniform(size=n) < p).astype(np.int64)
    q = p.astype(np.float64)
    step = 1 / np.sqrt(np.sum(q * (1 - q)))  # one observation's largest move of C / sigma
    mapie = {}

    def ours():
        return tuple(clf.cumulative_calibration_test(y, p))

    def peer(m):
        mapie["m"] = m
        return (m.kolmogorov_smirnov_statistic(y, q), m.kolmogorov_smirnov_p_value(y, q),
                m.kuiper_statistic(y, q), m.kuiper_p_value(y, q))

    def check(out, ref):
        # MAPIE jitters the scores by 1e-8 relative; its p-values (1 - cdf) are exact to
        # ~1e-13 absolute
        _close(out[0], ref[0], 0.0, _loose(2e-5, 1e-7))
        _close(out[1], ref[1], 1e-12, _loose(1e-4, 1e-7))
        # Kuiper: MAPIE's range leaves out the path's start C_0 = 0, so where the path
        # keeps one sign ours is larger by its smallest |C_k|, at most one step
        gap = float(out[2]) - float(ref[2])
        assert -2e-5 * float(ref[2]) <= gap <= step * (1 + 1e-5), (out[2], ref[2], step)
        want = 1 - mapie["m"].kuiper_cdf(float(out[2]))  # MAPIE's function at ours
        _close(out[3], want, 1e-12, _loose(1e-4, 1e-7))

    return ours, peer, check


def _slope(n):
    y, p, _ = _binary(n, 14)

    def ours():
        r = clf.calibration_slope_intercept(y, p)
        return r.slope, r.intercept, r.statistic, r.p_value

    def peer(sm):
        f = scipy.special.logit(p.astype(np.float64))
        fit = sm.GLM(y, sm.add_constant(f), family=sm.families.Binomial()).fit()
        loglik0 = np.sum(y * -np.logaddexp(0, -f) + (1 - y) * -np.logaddexp(0, f))
        stat = 2 * (fit.llf - loglik0)  # Cox (1958): slope 1, intercept 0 vs the fit
        return fit.params[1], fit.params[0], stat, scipy.stats.chi2.sf(stat, 2)

    def check(out, ref):
        tol = _loose(1e-4, 1e-8)
        _close(out[0], ref[0], tol, tol)
        _close(out[1], ref[1], tol, tol)
        _close(out[2], ref[2], _loose(2e-2, 1e-6), _loose(1e-3, 1e-7))
        _close(out[3], ref[3], _loose(1e-4, 1e-10), _loose(1e-2, 1e-5))

    return ours, peer, check


def _ici_case(n):
    y, p, _ = _binary(n, 15)

    def ours():
        return np.asarray([float(v) for v in clf.isotonic_calibration_index(y, p)])

    return ours, lambda _: _ici(y, p), lambda out, ref: _close(out, ref, _loose(1e-5, 1e-12))


def _select(n):
    y, p, _ = _binary(n, 16)
    folds = np.random.default_rng(17).permutation(np.arange(n) % NUM_FOLDS)
    eps = 1e-4

    def ours():
        return clf.select_calibrator(
            y, p, candidates=("none", "platt", "isotonic"), folds=folds, eps=eps
        ).fold_scores

    return (
        ours,
        lambda _: _cv_table(y, p, folds, eps),
        lambda out, ref: _close(out, ref, _loose(2e-4, 1e-7), _loose(1e-3, 1e-6)),
    )


def _select_multiclass(n):
    y, z, test = _multiclass(n, 18)
    probs = scipy.special.softmax(z.astype(np.float64), axis=1).astype(z.dtype)
    tprobs = scipy.special.softmax(test.astype(np.float64), axis=1).astype(z.dtype)
    folds = np.random.default_rng(19).permutation(np.arange(n) % NUM_FOLDS)

    def ours():
        res = clf.select_calibrator(y, probs, candidates=MULTICLASS, folds=folds, rule="min")
        out = tprobs if res.calibrator is None else res.calibrator(tprobs)
        return res.fold_scores, res.winner, out

    def check(out, ref):
        # every candidate is an unregularized maximum-likelihood fit, so both sides
        # reach one optimum, and a held-out log-loss moves only at second order in
        # the fitted parameters' error: the fold scores agree to the float32 rounding
        # of bayescal's table (6e-8 relative; 1.2e-7 seen)
        _close(out[0], ref[0], 0.0, _loose(1e-5, 1e-6))
        means = np.sort(ref[0].mean(1))
        if means[1] - means[0] > _loose(1e-4, 1e-7):  # not a tie: the same winner,
            assert out[1] == ref[1], (out[1], ref[1])
            # refitted on all the data: probabilities as in the vector scaling row
            _close(out[2], ref[2], _loose(2e-3, 1e-5))

    return ours, lambda _: _cv_table_multiclass(y, probs, folds, tprobs), check


def _spline_data(n, seed):
    """y ~ Bernoulli(p^2) (not a sigmoid of logit p), both class counts multiples of
    the folds (up to 4 labels flipped to 0), so that splinecalib can be given
    fit_spline's folds; new points over (0.01, 0.99)."""
    r = np.random.default_rng(seed)
    p = r.uniform(0.02, 0.98, n)
    y = (r.uniform(size=n) < p**2).astype(np.int64)
    y[np.flatnonzero(y == 1)[: y.sum() % NUM_FOLDS]] = 0
    return y, p.astype(_dtype()), r.uniform(0.01, 0.99, NUM_TEST).astype(_dtype())


def _spline(n):
    y, p, test = _spline_data(n, 20)
    # fit_spline's documented knots (np.quantile of the log-odds at linspace(0, 1, 10)),
    # given to splinecalib on the probability scale (it takes the logit of add_knots)
    x = scipy.special.logit(p.astype(np.float64))
    knots = np.quantile(x, np.linspace(0, 1, SPLINE_KNOTS))
    order = {}

    def peer(sc):
        import warnings

        if "rows" not in order:  # the first call, the untimed check's
            order["rows"] = _splinecalib_order(sc, y, NUM_FOLDS)
        rows = order["rows"]
        cal = sc.SplineCalib(
            knot_sample_size=0, add_knots=scipy.special.expit(knots), unity_prior=False,
            cv_spline=NUM_FOLDS, param_search_mode="full", reg_prec=16, tol=1e-8,
        )
        with warnings.catch_warnings():  # the L-BFGS-B "did not converge" notes
            warnings.simplefilter("ignore", UserWarning)
            cal.fit(p[rows].astype(np.float64), y[rows])
        return cal.calibrate(test.astype(np.float64)), cal, rows

    def check(out, ref):
        _, cal, rows = ref
        sc = sys.modules["splinecalib.calib_utils"]
        # 1. the knots
        got = clf.fit_spline(y, p)
        _close(got.knots, knots, _loose(1e-5, 1e-12), _loose(1e-6, 1e-12))
        # 2. the penalty: bayescal's choice (its calibrator) is its fit at the penalty
        # splinecalib chose on the same folds
        lam = float(cal.best_reg_param)
        _close(out, clf.fit_spline(y, p, penalties=(lam,))(test), _loose(1e-6, 1e-12))
        # 3. the final fit: splinecalib 0.0.13 fits its final model without its last
        # fold (fit_spline on all the data); moved to all the data with its own basis
        # and objective (loss_fun_c.pen_ll_fun_grad), from its coefficients, by scipy's
        # trust-exact with the objective's Hessian written out (its BFGS stops at ~1e-7
        # in the probabilities), the two calibrated probabilities agree (float32:
        # bayescal's float32 coefficients, 5e-7 seen; x64: 6e-9 seen)
        big_x, k = cal.X_mat_used, knots.size

        def hessian(beta, *_):
            q = scipy.special.expit(big_x @ beta)
            h = (big_x * (q * (1 - q))[:, None]).T @ big_x / big_x.shape[0]
            return h + 2 * lam / k * np.eye(k)

        res = scipy.optimize.minimize(
            sc.pen_ll_fun_grad, cal.basis_coef_vec, (big_x, y[rows].astype(np.float64), lam),
            jac=True, hess=hessian, method="trust-exact", options=dict(gtol=1e-13),
        )
        basis = sc._natural_cubic_spline_basis_expansion(
            scipy.special.logit(test.astype(np.float64)), cal.knot_vec_tr
        )
        _close(out, scipy.special.expit(basis @ res.x), _loose(1e-5, 1e-7))

    return lambda: clf.fit_spline(y, p)(test), peer, check


F32 = "f32 / x64"
CASES = [
    Case("fit_venn_abers + apply", "venn-abers 1.5 VennAbers", "venn_abers", 10**5,
         f"p0, p1 to 2e-5 / 1e-9 ({F32})", "", _venn),
    # 200 isotonic fits per call: ~3 s at N = 1e5 (measured on the 2-core machine)
    Case("fit_venn_abers + apply", "IVAP from sklearn IsotonicRegression", None, 10**5,
         f"p0, p1 to 2e-5 / 1e-9 ({F32})",
         "the peer refits isotonic regression twice per test point", _venn_sklearn),
    Case("fit_cross_venn_abers (5 folds) + apply", "venn-abers VennAbers per fold + GM",
         "venn_abers", 10**5, f"p0, p1, p to 3e-5 / 1e-9 ({F32})",
         "peer: one VennAbers per fold, merged by the CVAP formula", _cross_venn),
    Case("fit_centered_isotonic + apply", "probcal 0.4 CenteredIsotonicCalibrator",
         "probcal", 10**5, f"2e-5 / 1e-9 ({F32}) on the comparable grid",
         "probcal does not pool adjacent equal-level blocks: compared where no end "
         "block shares its level", _centered),
    Case("fit_isotonic(prior=1) + apply", "sklearn isotonic + shrink + scipy PAV", None,
         10**5, f"5e-5 / 1e-9 ({F32})", "", _iso_prior),
    Case("fit_scaling_binning(split=None) + apply",
         "uncertainty-calibration PlattBinnerCalibrator", "calibration", 10**5,
         "3e-4 (the peer's lbfgs stops early: ~5e-5 at N >= 1e3)", "", _scaling_binning),
    Case("fit_vector_scaling + apply (K=4)", "scipy L-BFGS-B on the NLL", None, 10**5,
         f"probabilities to 2e-3 / 1e-5 ({F32})", "", _vector),
    Case("fit_matrix_scaling + apply (K=4)", "sklearn LogisticRegression multinomial",
         None, 10**5, f"probabilities to 2e-3 / 1e-5 ({F32})", "unregularized", _matrix),
    Case("fit_dirichlet + apply (K=4)", "sklearn LogisticRegression on log p", None,
         10**5, f"probabilities to 2e-3 / 1e-5 ({F32})",
         "unregularized; dirichletcal does not install (malformed setup.py)", _dirichlet),
    Case("fit_top_label + apply (K=4)", "numpy Gupta & Ramdas histogram", None, 10**5,
         f"labels equal, confidences to 1e-5 / 1e-12 ({F32})", "", _top),
    # the peer's O(N^2) pairs take ~170 s a call at N = 1e5 (1.1 s at 8192, measured),
    # 4 calls a row: not run above 1e4; bayescal's binary estimator (sorting, O(N log N))
    # is still timed at 1e5
    Case("kernel_calibration_error (unbiased)", "numpy O(N^2) Widmann et al. 2019", None,
         10**4, f"rtol 1e-3 / 1e-9 ({F32})", f"bandwidth {BANDWIDTH} given to both",
         _kernel),
    Case("kernel_calibration_test (linear, median bandwidth)",
         "numpy Widmann et al. 2019 linear test + np.median", None, 10**5,
         f"statistic rtol 1e-3, p-value 1e-3, bandwidth 1e-5 ({F32})",
         "bandwidth: median over 512 spread observations' pairs", _kernel_test),
    Case("hosmer_lemeshow (10 groups)", "numpy + scipy.stats.chi2", None, 10**5,
         f"statistic rtol 1e-4 / 1e-9 ({F32})", "", _hl),
    Case("spiegelhalter_z", "numpy + scipy.stats.norm", None, 10**5,
         f"z rtol 1e-4 / 1e-9 ({F32})", "", _spiegel),
    Case("cumulative_calibration_test (KS + Kuiper)", "MAPIE 1.6 kolmogorov_smirnov/kuiper",
         "mapie.metrics.calibration", 10**5,
         f"KS and p-values rtol 2e-5, 1e-4 / 1e-7 + 1e-12 ({F32})",
         "Kuiper: MAPIE leaves out C_0 = 0 (at most one step apart); MAPIE's 4 calls",
         _cumulative),
    Case("calibration_slope_intercept", "statsmodels GLM Binomial + scipy", "statsmodels.api",
         10**5, f"slope, intercept 1e-4 / 1e-8 ({F32})", "LR statistic vs 2 x loglik gain",
         _slope),
    Case("isotonic_calibration_index", "sklearn IsotonicRegression + numpy", None, 10**5,
         f"ICI/E50/E90/Emax to 1e-5 / 1e-12 ({F32})", "", _ici_case),
    Case("select_calibrator (none/platt/isotonic, 5 folds)",
         "CV loop: PredefinedSplit + sklearn fits", None, 10**5,
         f"fold scores rtol 1e-3 / 1e-6 ({F32})", "log-loss clipped at 1e-4", _select),
    # the peer (24 unregularized lbfgs fits at tol 1e-10) takes ~30 s a call at
    # N = 1e5 (measured; 0.6-4 s at 1e4), 4 calls a row: not run above 1e4
    Case("select_calibrator [N, K=4] (none/temperature/vector/dirichlet, 5 folds) + apply",
         "CV loop: PredefinedSplit + scipy/sklearn fits", None, 10**4,
         f"fold scores rtol 1e-5 / 1e-6 ({F32}); same winner, its probabilities to "
         f"2e-3 / 1e-5", "sklearn log_loss; winner refitted on all the data",
         _select_multiclass),
    # the peer (85 L-BFGS-B fits at tol 1e-8) takes ~75 s a call at N = 1e5 (measured
    # on the loaded machine; 1-15 s at 1e4), 4 calls a row: not run above 1e4
    Case("fit_spline + apply", "splinecalib 0.0.13 SplineCalib", "splinecalib", 10**4,
         f"same knots and penalty; probabilities to 1e-5 / 1e-7 ({F32}) after its final "
         "fit is moved to all the data",
         "peer given fit_spline's knots and folds, full CV, tol 1e-8, no unity prior",
         _spline),
]


def measure(case: Case, n: int, repeat: int) -> dict:
    ours, peer, check = case.setup(n)
    t0 = time.perf_counter()
    out = block(ours())
    cold = time.perf_counter() - t0
    module = None
    if case.module is not None:
        module = _peer_module(case.module)
    installed = case.module is None or module is not None
    has_peer = installed and n <= case.max_n
    if has_peer:
        check(out, peer(module))  # equal before anything else is timed
    warm = median_time(ours, repeat=repeat, warmup=0)
    if has_peer:
        t_peer = median_time(lambda: peer(module), repeat=min(repeat, 3), warmup=0)
        status = f"equal: {case.tolerance}"
    else:
        t_peer = float("nan")
        status = NOT_INSTALLED if not installed else f"peer not run above N={case.max_n:.0e}"
    r = row(case.name, warm, t_peer, case.peer, case.note)
    r.update(n=n, cold_ms=cold * 1e3, check=status)
    return r


def markdown(rows: list[dict], label: str) -> str:
    lines = [
        MARK,
        "",
        label,
        "",
        "| benchmark | N | bayescal cold (ms) | bayescal warm (ms) | peer | peer (ms) | "
        "ratio peer / warm | check | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "" if math.isnan(r["speedup"]) else f"{r['speedup']:.2f}x"
        peer_ms = "" if math.isnan(r["peer_ms"]) else f"{r['peer_ms']:.2f}"
        lines.append(
            f"| {r['benchmark']} | {r['n']:.0e} | {r['cold_ms']:.1f} | {r['bayescal_ms']:.2f} "
            f"| {r['peer']} | {peer_ms} | {ratio} | {r['check']} | {r['note']} |"
        )
    return "\n".join(lines) + "\n"


def main(quick: bool = False, sizes=None, repeat: int = 5) -> list[dict]:
    if sizes is None:
        sizes = (10**3, 10**4) if quick else (10**3, 10**4, 10**5)
    rows = []
    for n in sizes:
        for case in CASES:
            r = measure(case, n, repeat)
            print(
                f"{case.name} N={n:.0e}: cold {r['cold_ms']:.1f} ms, warm "
                f"{r['bayescal_ms']:.2f} ms, {case.peer} {r['peer_ms']:.2f} ms ({r['check']})",
                flush=True,
            )
            rows.append(r)
    return rows


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(float(s)) for s in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 20:
        raise argparse.ArgumentTypeError(
            f"--sizes must be comma-separated numbers >= 20 (e.g. 1e3,1e4), got {text!r}"
        )
    return sizes


def cli(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=_sizes, default=(10**3, 10**4, 10**5))
    parser.add_argument("--repeat", type=int, default=5, help="warm calls (median)")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    out = None
    if args.markdown is not None:
        out = pathlib.Path(args.markdown)
        if out.exists() and not out.read_text().startswith(MARK):
            parser.error(
                f"--markdown: {out} exists and was not written by bench_calibrators; "
                "name a new file or remove it first"
            )
    rows = main(sizes=args.sizes, repeat=args.repeat)
    label = (
        f"{platform.machine()} {platform.processor() or ''}, Python "
        f"{platform.python_version()}, jax {jax.__version__} on {jax.default_backend()}, "
        f"x64 {'on' if jax.config.jax_enable_x64 else 'off'}, repeat {args.repeat}"
    )
    text = markdown(rows, label)
    print("\n" + text, flush=True)
    if out is not None:
        write_atomic(out, text)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
