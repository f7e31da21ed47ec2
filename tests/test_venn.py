"""Venn-ABERS (fit_venn_abers) and centered isotonic regression (fit_centered_isotonic).

References: Venn-ABERS against a brute-force IVAP built from scikit-learn's
``IsotonicRegression`` refitted with the test point labelled 0 and 1 (Vovk & Petej
2014, the definition; the issue notes the venn-abers package equals this); centered
isotonic against a numpy implementation of Oron & Flournoy (2017)'s definition on top
of scikit-learn's isotonic fit, and against probcal 0.4's ``CenteredIsotonicCalibrator``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from bayescal.classification import (
    CenteredIsotonicCalibrator,
    CrossVennAbersCalibrator,
    VennAbersCalibrator,
    fit_centered_isotonic,
    fit_cross_venn_abers,
    fit_isotonic,
    fit_venn_abers,
    load_calibrator,
    log_loss,
    save_calibrator,
)

TOL = 1e-5 if jax.config.jax_enable_x64 else 2e-5


def _data(n, seed, ties=False):
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=n)
    if ties:
        s = np.round(s * 7) / 7
    y = (rng.uniform(size=n) < s**2).astype(float)
    return y, s


def _brute_ivap(y, s, w, test):
    """p0, p1 by refitting scikit-learn's isotonic regression with the test point."""
    p0, p1 = [], []
    for t in test:
        out = []
        for label in (0.0, 1.0):
            ir = IsotonicRegression(out_of_bounds="clip")
            ir.fit(np.append(s, t), np.append(y, label), sample_weight=np.append(w, 1.0))
            out.append(float(ir.predict([t])[0]))
        p0.append(out[0])
        p1.append(out[1])
    return np.array(p0), np.array(p1)


@pytest.mark.parametrize("n,seed,ties", [(1, 0, False), (7, 1, False), (40, 2, True),
                                         (120, 3, False), (60, 4, True)])
def test_venn_abers_equals_brute_force_isotonic(n, seed, ties):
    y, s = _data(n, seed, ties)
    # test points: every calibration score, the gaps, and beyond both ends
    u = np.unique(s)
    mids = (u[1:] + u[:-1]) / 2
    test = np.concatenate([u, mids, [u[0] - 1, u[-1] + 1]])
    cal = fit_venn_abers(y, s)
    p0, p1 = cal(test)
    r0, r1 = _brute_ivap(y, s, np.ones(n), test)
    # scikit-learn merges scores within 1e-6 in float32; our scores are far apart
    np.testing.assert_allclose(np.asarray(p0), r0, atol=TOL)
    np.testing.assert_allclose(np.asarray(p1), r1, atol=TOL)


@pytest.mark.parametrize("seed", range(6))
def test_venn_abers_ties_and_duplicated_test_scores_equal_brute_force(seed):
    # heavy ties among the calibration scores (4 distinct values) and test scores that
    # repeat, equal calibration scores, or fall between/outside them; non-integer
    # weights from seed 3 on: scikit-learn's IsotonicRegression refit per test point
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 60))
    s = rng.integers(0, 4, size=n) / 3.0
    y = (rng.uniform(size=n) < 0.2 + 0.6 * s).astype(float)
    w = rng.uniform(0.2, 3.0, size=n) if seed >= 3 else np.ones(n)
    test = np.concatenate([s[:5], s[:5], [-1.0, 0.5, 0.5, 2.0, 1 / 6, 1 / 6]])
    p0, p1 = fit_venn_abers(y, s, weights=None if seed < 3 else w)(test)
    r0, r1 = _brute_ivap(y, s, w, test)
    np.testing.assert_allclose(np.asarray(p0), r0, atol=TOL)
    np.testing.assert_allclose(np.asarray(p1), r1, atol=TOL)
    # equal scores get equal pairs
    np.testing.assert_array_equal(np.asarray(p0)[:5], np.asarray(p0)[5:10])


def test_venn_abers_weighted_equals_brute_force():
    y, s = _data(50, 5)
    w = np.random.default_rng(6).integers(0, 4, size=50).astype(float)
    w[0] = 1.0
    test = np.concatenate([s, np.linspace(-0.1, 1.1, 23)])
    p0, p1 = fit_venn_abers(y, s, weights=w)(test)
    keep = w > 0
    r0, r1 = _brute_ivap(y[keep], s[keep], w[keep], test)
    np.testing.assert_allclose(np.asarray(p0), r0, atol=TOL)
    np.testing.assert_allclose(np.asarray(p1), r1, atol=TOL)


def test_venn_abers_properties_and_finite_log_loss():
    # demo-style data: isotonic reaches 0 and 1, so its log-loss on new data is inf
    y, s = _data(300, 7)
    y_new, s_new = _data(300, 8)
    y_new[np.argmin(s_new)] = 1.0  # a positive below every calibration positive
    iso = fit_isotonic(y, s)(s_new)
    assert not np.isfinite(float(log_loss(y_new, np.asarray(iso))))
    cal = fit_venn_abers(y, s)
    p0, p1 = (np.asarray(a) for a in cal(s_new))
    p = np.asarray(cal.probability(s_new))
    assert np.all(p0 <= p1) and np.all(p0 >= 0) and np.all(p1 <= 1)
    assert np.all(p > 0) and np.all(p < 1)  # strictly: never 0 or 1
    np.testing.assert_allclose(p, p1 / (1 - p0 + p1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(cal.interval(s_new)), np.stack([p0, p1], -1))
    assert np.isfinite(float(log_loss(y_new, p)))


def test_venn_abers_jit_vmap_and_round_trip(tmp_path):
    y, s = _data(30, 9)
    cal = fit_venn_abers(y, s)
    jitted = jax.jit(fit_venn_abers)(jnp.asarray(y), jnp.asarray(s))
    q = np.linspace(0, 1, 11)
    for a, b in zip(cal(q), jax.jit(lambda c, x: c(x))(jitted, q), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-7)
    ys, ss = np.stack([y, _data(30, 10)[0]]), np.stack([s, _data(30, 10)[1]])
    batched = jax.vmap(fit_venn_abers)(jnp.asarray(ys), jnp.asarray(ss))
    for i in range(2):
        one = fit_venn_abers(ys[i], ss[i])
        np.testing.assert_allclose(np.asarray(batched.p1_table[i]), np.asarray(one.p1_table))
        np.testing.assert_allclose(np.asarray(batched.p0_table[i]), np.asarray(one.p0_table))
    path = tmp_path / "va.npz"
    save_calibrator(cal, path)
    back = load_calibrator(path)
    assert isinstance(back, VennAbersCalibrator) and back == cal


def _cir_reference(y, s, w=None):
    """Oron & Flournoy (2017), numpy: PAV (scikit-learn) on the pooled scores, each
    maximal flat block replaced by the point (weighted mean score, block value),
    linear interpolation between the points, constant outside."""
    w = np.ones_like(s) if w is None else w
    u, inv = np.unique(s, return_inverse=True)
    wu = np.bincount(inv, w)
    yu = np.bincount(inv, w * y) / wu
    fit = IsotonicRegression().fit(u, yu, sample_weight=wu).predict(u)
    xs, vs = [], []
    start = 0
    for i in range(1, len(u) + 1):
        if i == len(u) or fit[i] != fit[start]:
            xs.append(np.sum(wu[start:i] * u[start:i]) / np.sum(wu[start:i]))
            vs.append(fit[start])
            start = i
    return lambda t: np.interp(t, xs, vs)


@pytest.mark.parametrize("n,seed,ties", [(1, 0, False), (9, 1, False), (200, 2, True),
                                         (500, 3, False)])
def test_centered_isotonic_equals_reference(n, seed, ties):
    y, s = _data(n, seed, ties)
    q = np.linspace(-0.2, 1.2, 301)
    got = np.asarray(fit_centered_isotonic(y, s)(q))
    np.testing.assert_allclose(got, _cir_reference(y, s)(q), atol=TOL)


def test_centered_isotonic_weighted_and_probcal():
    import probcal  # a test extra (pyproject.toml)
    y, s = _data(300, 11)
    q = np.linspace(0, 1, 101)
    pc = probcal.CenteredIsotonicCalibrator().fit(s, y)
    ref = np.asarray(pc.predict_proba(q))
    ref = ref[:, 1] if ref.ndim == 2 else ref
    # probcal keeps PAV's blocks, so adjacent blocks of equal level (runs of 0-labels
    # at the bottom) stay separate points; Oron & Flournoy pool them (flat stretches
    # count as violations). Compare where neither end block shares its level.
    lv, cs = np.asarray(pc.block_mean_), np.asarray(pc.block_center_s_)
    shared = np.zeros(lv.size, bool)
    shared[1:] |= lv[1:] == lv[:-1]
    shared[:-1] |= lv[1:] == lv[:-1]
    seg = np.searchsorted(cs, q, side="right") - 1
    ok = (seg >= 0) & (seg < lv.size - 1)
    ok[ok] &= ~shared[seg[ok]] & ~shared[seg[ok] + 1]
    assert ok.mean() > 0.5  # the comparison covers most of the range
    got = np.asarray(fit_centered_isotonic(y, s)(q))
    np.testing.assert_allclose(got[ok], ref[ok], atol=TOL)
    w = np.random.default_rng(12).integers(0, 3, size=300).astype(float)
    w[0] = 1
    got = np.asarray(fit_centered_isotonic(y, s, weights=w)(q))
    keep = w > 0
    np.testing.assert_allclose(got, _cir_reference(y[keep], s[keep], w[keep])(q), atol=TOL)


def test_centered_isotonic_strictly_increasing_jit_vmap_round_trip(tmp_path):
    y, s = _data(200, 13)
    cal = fit_centered_isotonic(y, s)
    m = int(np.sum(np.diff(np.asarray(cal.thresholds)) > 0)) + 1
    assert np.all(np.diff(np.asarray(cal.thresholds)[:m]) > 0)
    assert np.all(np.diff(np.asarray(cal.values)[:m]) > 0)
    jitted = jax.jit(fit_centered_isotonic)(jnp.asarray(y), jnp.asarray(s))
    np.testing.assert_allclose(np.asarray(jitted.values), np.asarray(cal.values), atol=1e-7)
    ys = np.stack([y, _data(200, 14)[0]])
    ss = np.stack([s, _data(200, 14)[1]])
    batched = jax.vmap(fit_centered_isotonic)(jnp.asarray(ys), jnp.asarray(ss))
    one = fit_centered_isotonic(ys[1], ss[1])
    np.testing.assert_allclose(np.asarray(batched.thresholds[1]), np.asarray(one.thresholds),
                               rtol=1e-6)
    path = tmp_path / "cir.npz"
    save_calibrator(cal, path)
    back = load_calibrator(path)
    assert isinstance(back, CenteredIsotonicCalibrator) and back == cal


@pytest.mark.parametrize("fit", [fit_venn_abers, fit_centered_isotonic])
def test_bad_input_names_the_argument(fit):
    with pytest.raises(ValueError, match="y_true"):
        fit([0, 2, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="y_score"):
        fit([0, 1, 1], [0.1, np.nan, 0.3])
    with pytest.raises(ValueError, match="y_score"):
        fit([0, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="weights"):
        fit([0, 1, 1], [0.1, 0.2, 0.3], weights=[1.0, -1.0, 1.0])


# ------------------------------------------------------------------ cross Venn-ABERS
def _cvap_formula(pairs):
    """Vovk, Petej & Fedorova (2015), CVAP: p = GM(p1) / (GM(1 - p0) + GM(p1))."""
    p0 = np.stack([a for a, _ in pairs], -1).astype(float)
    p1 = np.stack([b for _, b in pairs], -1).astype(float)
    g1 = np.exp(np.mean(np.log(p1), -1))
    g0 = np.exp(np.mean(np.log1p(-p0), -1))
    return p0, p1, g1 / (g0 + g1)


@pytest.mark.parametrize("num_folds,weighted", [(2, False), (5, False), (3, True)])
def test_cross_venn_abers_equals_formula_on_separate_ivaps(num_folds, weighted):
    y, s = _data(90, 20, ties=True)
    folds = np.arange(90) % num_folds
    w = np.random.default_rng(21).uniform(0.5, 2.0, size=90) if weighted else None
    cal = fit_cross_venn_abers(y, s, folds, weights=w)
    assert cal.num_folds == num_folds
    test = np.random.default_rng(22).uniform(-0.1, 1.1, size=(17, num_folds))
    test[:4] = s[:4, None]  # on calibration scores
    pairs = []
    for k in range(num_folds):
        rows = folds == k
        ivap = fit_venn_abers(y[rows], s[rows], weights=None if w is None else w[rows])
        pairs.append(tuple(np.asarray(a) for a in ivap(test[:, k])))
    r0, r1, rp = _cvap_formula(pairs)
    p0, p1 = cal(test)
    np.testing.assert_allclose(np.asarray(p0), r0, atol=TOL)
    np.testing.assert_allclose(np.asarray(p1), r1, atol=TOL)
    p = np.asarray(cal.probability(test))
    np.testing.assert_allclose(p, rp, atol=TOL)
    iv = np.asarray(cal.interval(test))
    np.testing.assert_allclose(iv, np.stack([r0.min(-1), r1.max(-1)], -1), atol=TOL)
    assert np.all((iv[:, 0] <= p + 1e-6) & (p <= iv[:, 1] + 1e-6)) and np.all((p > 0) & (p < 1))


def test_cross_venn_abers_is_calibrated_fixed_seed():
    # scores miscalibrated on purpose (true probability q, score q**3); K = 5 folds of
    # one fixed score map; calibration on 3000 points, reliability on 40000 new ones,
    # in deciles of the merged probability. Validity (Vovk & Petej 2014): the observed
    # frequency lies between the folds' mean p0 and mean p1, up to 4 binomial standard
    # errors plus 0.02 for one fixed calibration set of 600 points per fold (the
    # guarantee is on average over calibration sets). The merged probability: its
    # expected calibration error over the deciles < 0.025, a tenth of the raw score's.
    rng = np.random.default_rng(23)
    q = rng.uniform(size=3000)
    y = (rng.uniform(size=3000) < q).astype(float)
    folds = rng.permutation(np.arange(3000) % 5)
    cal = fit_cross_venn_abers(y, q**3, folds)
    qt = rng.uniform(size=40000)
    yt = (rng.uniform(size=40000) < qt).astype(float)
    test = np.repeat((qt**3)[:, None], 5, axis=1)
    p = np.asarray(cal.probability(test), float)
    p0, p1 = (np.asarray(a, float).mean(-1) for a in cal(test))

    def deciles(pred):
        edges = np.quantile(pred, np.linspace(0, 1, 11))
        return np.clip(np.searchsorted(edges, pred, side="right") - 1, 0, 9)

    b = deciles(p)
    ece = 0.0
    for k in range(10):
        m = b == k
        obs = yt[m].mean()
        se = np.sqrt(obs * (1 - obs) / m.sum())
        assert p0[m].mean() - 4 * se - 0.02 <= obs <= p1[m].mean() + 4 * se + 0.02, k
        ece += m.mean() * abs(obs - p[m].mean())
    raw = qt**3
    br = deciles(raw)
    ece_raw = sum((br == k).mean() * abs(yt[br == k].mean() - raw[br == k].mean())
                  for k in range(10))
    assert ece < 0.025 and ece < ece_raw / 10, (ece, ece_raw)


def test_cross_venn_abers_contract(tmp_path):
    y, s = _data(60, 24)
    folds = np.arange(60) % 3
    cal = fit_cross_venn_abers(y, s, folds)
    test = np.random.default_rng(25).uniform(size=(9, 3))
    jitted = jax.jit(lambda a, b: fit_cross_venn_abers(a, b, folds))(jnp.asarray(y), jnp.asarray(s))
    for a, b in zip(jax.tree.leaves(cal), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(jax.jit(lambda c, x: c.probability(x))(cal, test)),
        np.asarray(cal.probability(test)), atol=1e-6)
    y2, s2 = _data(60, 26)
    batched = jax.vmap(lambda a, b: fit_cross_venn_abers(a, b, folds))(
        jnp.asarray(np.stack([y, y2])), jnp.asarray(np.stack([s, s2])))
    for i, (yy, ss) in enumerate([(y, s), (y2, s2)]):
        one = fit_cross_venn_abers(yy, ss, folds)
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(batched), strict=True):
            np.testing.assert_allclose(np.asarray(b)[i], np.asarray(a), atol=1e-7)
    path = tmp_path / "cvap.npz"
    save_calibrator(cal, path)
    back = load_calibrator(path)
    assert isinstance(back, CrossVennAbersCalibrator) and back == cal
    assert (back == fit_cross_venn_abers(y2, s2, folds)) in (True, False)
    assert (cal == fit_venn_abers(y, s)) is False


def test_cross_venn_abers_bad_input_names_the_argument():
    y, s = _data(12, 27)
    with pytest.raises(ValueError, match="folds"):
        fit_cross_venn_abers(y, s, np.zeros(12, int))  # one fold
    with pytest.raises(ValueError, match="folds"):
        fit_cross_venn_abers(y, s, np.arange(12) % 3 * 2)  # ids 0, 2, 4
    with pytest.raises(ValueError, match="folds"):
        fit_cross_venn_abers(y, s, np.arange(11) % 2)
    with pytest.raises(ValueError, match="folds"):
        fit_cross_venn_abers(y, s, (np.arange(12) % 2).astype(float))
    with pytest.raises(ValueError, match="y_true"):
        fit_cross_venn_abers(np.full(12, 2.0), s, np.arange(12) % 2)
    cal = fit_cross_venn_abers(y, s, np.arange(12) % 2)
    with pytest.raises(ValueError, match="y_score"):
        cal(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="y_score"):
        cal(np.full((4, 2), np.nan))


# ------------------------------------------------------- isotonic with a Beta prior
def _isotonic_prior_reference(y, s, w, a, b):
    """numpy + scikit-learn: PAV on the pooled scores, each level set's frequency
    shrunk to (W v + a) / (W + a + b) (Beta posterior mean; Zadrozny & Elkan 2001's
    m-estimate), PAV again on those with weights W + a + b; np.interp between scores."""
    u, inv = np.unique(s, return_inverse=True)
    wu = np.bincount(inv, w)
    yu = np.bincount(inv, w * y) / wu
    fit = IsotonicRegression().fit(np.arange(u.size), yu, sample_weight=wu).predict(
        np.arange(u.size))
    _, block = np.unique(fit, return_inverse=True)  # fit is nondecreasing: level sets
    wb = np.bincount(block, wu)
    vb = (np.bincount(block, wu * fit) + a) / (wb + a + b)
    vb = IsotonicRegression().fit(np.arange(vb.size), vb, sample_weight=wb + a + b).predict(
        np.arange(vb.size))
    return lambda t: np.interp(t, u, vb[block])


@pytest.mark.parametrize("prior,weighted,ties", [(1.0, False, False), ((0.5, 2.0), False, True),
                                                 ((3.0, 0.2), True, False)])
def test_isotonic_prior_equals_reference(prior, weighted, ties):
    y, s = _data(300, 30, ties)
    w = np.random.default_rng(31).uniform(0.1, 3, size=300) if weighted else np.ones(300)
    a, b = (prior, prior) if np.isscalar(prior) else prior
    cal = fit_isotonic(y, s, weights=w if weighted else None, prior=prior)
    q = np.linspace(-0.1, 1.1, 257)
    np.testing.assert_allclose(np.asarray(cal(q)), _isotonic_prior_reference(y, s, w, a, b)(q),
                               atol=TOL)
    assert np.all(np.diff(np.asarray(cal.values)) >= 0)


def test_isotonic_prior_finite_log_loss_and_off_equals_plain():
    # the demo's failure: plain isotonic puts 0 (or 1) where a new point has the other
    # label, so its log-loss is inf; with a prior every value is strictly inside (0, 1)
    y, s = _data(300, 7)
    y_new, s_new = _data(300, 8)
    y_new[np.argmin(s_new)] = 1.0
    plain = fit_isotonic(y, s)
    assert np.asarray(plain.values).min() == 0.0 and np.asarray(plain.values).max() == 1.0
    assert not np.isfinite(float(log_loss(y_new, np.asarray(plain(s_new)))))
    smooth = fit_isotonic(y, s, prior=1)
    v = np.asarray(smooth.values)
    assert v.min() > 0 and v.max() < 1
    assert np.isfinite(float(log_loss(y_new, np.asarray(smooth(s_new)))))
    # off: the plain fit, exactly; a vanishing prior converges to it
    assert fit_isotonic(y, s, prior=None) == plain
    tiny = fit_isotonic(y, s, prior=1e-6)
    np.testing.assert_allclose(np.asarray(tiny.values), np.asarray(plain.values), atol=1e-4)
    # jit == eager, vmap == loop, round trip
    jitted = jax.jit(lambda a, b: fit_isotonic(a, b, prior=1))(jnp.asarray(y), jnp.asarray(s))
    np.testing.assert_allclose(np.asarray(jitted.values), v, atol=1e-6)
    y2, s2 = _data(300, 9)
    batched = jax.vmap(lambda a, b: fit_isotonic(a, b, prior=(2, 1)))(
        jnp.asarray(np.stack([y, y2])), jnp.asarray(np.stack([s, s2])))
    np.testing.assert_allclose(np.asarray(batched.values[1]),
                               np.asarray(fit_isotonic(y2, s2, prior=(2, 1)).values), atol=1e-6)


@pytest.mark.parametrize("bad", [0, -1.0, (1.0,), (1.0, np.inf), "laplace", True, (1, 0)])
def test_isotonic_prior_bad_values_name_the_argument(bad):
    with pytest.raises(ValueError, match="prior"):
        fit_isotonic([0, 1, 1], [0.1, 0.2, 0.3], prior=bad)


@pytest.mark.parametrize("seed", range(4))
def test_gap_fits_equal_the_max_min_formula(seed):
    # the definition the fit precomputes, directly: a unit-weight test point of label L
    # in gap k of the cumulative sum diagram (c, z) has the isotonic fit
    # max_{i <= k} min_{j >= k} (z_j - z_i + L) / (c_j - c_i + 1) (Barlow et al. 1972's
    # max-min formula; Vovk & Petej 2014), O(M^2) here, on random pooled diagrams with
    # fractional weights and means, collinear stretches included
    from bayescal.classification._venn import _gap_fits

    rng = np.random.default_rng(200 + seed)
    for _ in range(25):
        m = int(rng.integers(0, 40))
        w = rng.integers(1, 4, size=m) * (1.0 if seed % 2 else rng.uniform(0.3, 2))
        mean = rng.integers(0, 4, size=m) / 3.0
        c = np.concatenate([[0.0], np.cumsum(w)])
        z = np.concatenate([[0.0], np.cumsum(w * mean)])
        got = _gap_fits(c, z)
        for label in (0.0, 1.0):
            ref = [
                max(min((z[j] - z[i] + label) / (c[j] - c[i] + 1) for j in range(k, m + 1))
                    for i in range(k + 1))
                for k in range(m + 1)
            ]
            np.testing.assert_allclose(got[int(label)], ref, rtol=0, atol=1e-12)
