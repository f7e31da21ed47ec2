"""Top-label calibration (Gupta & Ramdas 2022, ICLR, Sec. 3 and Algorithm 2).

Reference: the paper's reduction written out, one binary calibrator per predicted
class fitted on that class's rows only (``fit_histogram_binning`` / ``fit_isotonic``
on the subset, whose own references are numpy and scikit-learn); and the defining
property in-sample: within each (predicted class, bin), the calibrated confidence
equals the fraction of correct predictions.
"""

import numpy as np
import pytest
import scipy.special

from bayescal import classification as clf
from bayescal.core import host_path
from tests.conftest import X64

DT = np.float64 if X64 else np.float32


@pytest.fixture(params=[True, False], ids=["host", "kernel"])
def path(request):
    """Both paths: the binary fits' host twins, and their kernels (past the host path's
    size, or on an accelerator)."""
    with host_path(request.param):
        yield request.param


def _data(n=600, k=4, seed=0):
    r = np.random.default_rng(seed)
    probs = scipy.special.softmax(2.5 * r.normal(size=(n, k)), axis=1)
    truth = scipy.special.softmax(np.log(probs) / 2.0, axis=1)  # overconfident model
    y = (r.uniform(size=(n, 1)) > truth.cumsum(axis=1)).sum(axis=1).clip(0, k - 1)
    return y, probs.astype(DT)


@pytest.mark.parametrize(
    "method, options", [("histogram", {}), ("histogram", {"bins": 4, "strategy": "uniform"}), ("isotonic", {})]
)
def test_equals_per_class_fits_on_the_predicted_rows(method, options, path):
    y, p = _data()
    cal = clf.fit_top_label(y, p, method=method, **options)
    label, conf = p.argmax(axis=1), p.max(axis=1)
    out = cal(p)
    np.testing.assert_array_equal(np.asarray(out.label), label)
    fit = clf.fit_histogram_binning if method == "histogram" else clf.fit_isotonic
    if method == "histogram":
        options = {"bins": 10, "strategy": "quantile", **options}
    for k in range(p.shape[1]):
        rows = label == k
        ref = fit((y[rows] == k).astype(int), conf[rows], **options)
        np.testing.assert_allclose(
            np.asarray(out.confidence)[rows], np.asarray(ref(conf[rows])), atol=1e-6
        )


def test_in_sample_top_label_calibration_per_class_and_bin(path):
    # the definition: P(Y = c(X) | c(X) = k, h(X) = v) = v, exactly on the fitting data
    # with the raw fractions (shrinkage=None); the default's Jeffreys shrinkage gives
    # each (class, bin) (m + 1/2) / (n + 1) of its n rows, m of them right
    y, p = _data(seed=1)
    for shrinkage in (None, "jeffreys"):
        cal = clf.fit_top_label(y, p, bins=5, shrinkage=shrinkage)
        res = cal(p)
        label, conf = np.asarray(res.label), np.asarray(res.confidence, np.float64)
        for k in range(p.shape[1]):
            # the rows of each of class k's bins ([e_j, e_j+1), the last closed)
            edges = np.asarray(cal.calibrators[k].edges)
            mine = label == k
            bin_of = np.clip(np.searchsorted(edges, p.max(axis=1), "right") - 1, 0, 4)
            for j in np.unique(bin_of[mine]):
                rows = mine & (bin_of == j)
                right, n = np.sum(y[rows] == k), np.sum(rows)
                want = right / n if shrinkage is None else (right + 0.5) / (n + 1)
                np.testing.assert_allclose(conf[rows], want, atol=1e-6)


def test_weights_zero_removes_rows(path):
    y, p = _data(seed=2)
    w = np.ones(len(y))
    w[::3] = 0
    a = clf.fit_top_label(y, p, method="isotonic", weights=w)
    keep = w > 0
    b = clf.fit_top_label(y[keep], p[keep], method="isotonic")
    np.testing.assert_allclose(
        np.asarray(a(p).confidence), np.asarray(b(p).confidence), atol=1e-6
    )


def test_a_class_never_predicted_gets_the_pooled_calibrator(path):
    y, p = _data(seed=3, k=3)
    p = p.copy()
    p[:, 2] = 0.5 * np.minimum(p[:, 0], p[:, 1])  # class 2 never the argmax
    p = p / p.sum(axis=1, keepdims=True)
    cal = clf.fit_top_label(y, p.astype(DT), method="isotonic")
    pooled = clf.fit_isotonic((p.argmax(1) == y).astype(int), p.max(1))
    grid = np.linspace(0.34, 1, 7)
    np.testing.assert_allclose(
        np.asarray(cal.calibrators[2](grid)), np.asarray(pooled(grid)), atol=1e-6
    )


def test_bad_input_names_the_argument(path):
    y, p = _data(n=50)
    with pytest.raises(ValueError, match="method"):
        clf.fit_top_label(y, p, method="spline")
    with pytest.raises(ValueError, match="probs"):
        clf.fit_top_label(y, p[:, :1])
    with pytest.raises(ValueError, match="y_true"):
        clf.fit_top_label(y[:-1], p)
    with pytest.raises(ValueError, match="weights"):
        clf.fit_top_label(y, p, weights=-np.ones(len(y)))
    with pytest.raises(ValueError, match="probs must have shape"):
        clf.fit_top_label(y, p)(p[:, :2])

