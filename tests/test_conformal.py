"""Split-conformal intervals and conformalized quantile regression.

References: the finite-sample conformal quantile of Lei et al. (2018), "Distribution-
Free Predictive Inference for Regression", JASA, Sec. 2.2 (rank ceil((n+1)(1-alpha)) of
the absolute residuals), its normalized-residual variant (Sec. 5.2) and Romano,
Patterson & Candes (2019), "Conformalized Quantile Regression", NeurIPS, Eq. (6)-(7),
written here as numpy float64 code; the coverage guarantee
1 - alpha <= P(y in C) <= 1 - alpha + 1/(n+1) (continuous scores) checked on repeated
random splits.
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayescal import regression as reg
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
RTOL = 1e-12 if X64 else 1e-6


def _pool(seed: int, n: int):
    """Heteroscedastic, heavy-tailed data and a misspecified Gaussian model of it."""
    r = np.random.default_rng(seed)
    x = r.uniform(0, 4, size=n)
    y = np.sin(x) + (0.2 + 0.3 * x) * r.standard_t(3, size=n)
    loc = 0.9 * np.sin(x)
    scale = 0.1 + 0.2 * x  # too small by ~1.5 and of the wrong shape
    return y, loc, scale


def _rank_reference(n, alpha):
    return int(np.ceil((n + 1) * (1 - alpha)))  # float64 formula (unambiguous cases)


# (n, alpha) where (n + 1)(1 - alpha) is not within rounding of an integer
CASES = [(100, 0.1), (50, 0.05), (37, 0.2), (500, 0.32), (9, 0.15)]


@pytest.mark.parametrize(("n", "alpha"), CASES)
def test_quantiles_equal_numpy_reference(n, alpha):
    y, loc, scale = _pool(n, n)
    k = _rank_reference(n, alpha)
    assert reg.conformal_rank(n, alpha) == k
    cal = reg.fit_conformal(y.astype(DT), loc.astype(DT), alpha=alpha)
    ref = np.sort(np.abs(y - loc))[k - 1]
    np.testing.assert_allclose(float(cal.quantile), ref, rtol=RTOL)
    cal_n = reg.fit_conformal(y.astype(DT), loc.astype(DT), scale.astype(DT), alpha=alpha)
    ref_n = np.sort(np.abs(y - loc) / scale)[k - 1]
    np.testing.assert_allclose(float(cal_n.quantile), ref_n, rtol=RTOL)
    lo, hi = loc - 1.5 * scale, loc + 1.5 * scale
    cqr = reg.fit_conformalized_quantile(y.astype(DT), lo.astype(DT), hi.astype(DT), alpha=alpha)
    ref_c = np.sort(np.maximum(lo - y, y - hi))[k - 1]
    np.testing.assert_allclose(float(cqr.quantile), ref_c, rtol=RTOL, atol=1e-7)
    # the intervals on new points
    lo_t, hi_t = cal_n(np.array([0.0, 1.0], DT), np.array([1.0, 2.0], DT))
    np.testing.assert_allclose(np.asarray(lo_t), [-ref_n, 1 - 2 * ref_n], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(hi_t), [ref_n, 1 + 2 * ref_n], rtol=1e-6)
    a, b = cqr(np.array([-1.0], DT), np.array([1.0], DT))
    np.testing.assert_allclose([float(a[0]), float(b[0])], [-1 - ref_c, 1 + ref_c], rtol=1e-6)


def test_rank_reads_alpha_as_the_decimal_written():
    # In floats 20 * (1 - 0.1) = 18.000000000000004, whose ceiling is 19; the exact
    # rank for alpha = 1/10 is 18 (exact rational arithmetic as the reference).
    for n, alpha, exact in [(19, 0.1, Fraction(1, 10)), (9, 0.3, Fraction(3, 10)),
                            (99, 0.01, Fraction(1, 100)), (39, 0.05, Fraction(1, 20))]:
        ref = -((-(n + 1) * (1 - exact)) // 1)  # exact ceiling
        assert reg.conformal_rank(n, alpha) == ref


def test_too_small_calibration_set_raises():
    # alpha = 0.1 needs n >= 9: ceil(9 * 0.9) = 9 <= 9, ceil(8 * 0.9)... n=8 gives 9 > 8
    assert reg.conformal_rank(9, 0.1) == 9
    with pytest.raises(ValueError, match=r"n=8 observations, too few for alpha=0.1.*at least 9"):
        reg.fit_conformal(np.zeros(8), np.ones(8), alpha=0.1)
    with pytest.raises(ValueError, match="too few for alpha=0.01"):
        reg.fit_conformalized_quantile(np.zeros(50), np.zeros(50), np.ones(50), alpha=0.01)


@pytest.mark.parametrize("method", ["absolute", "normalized", "cqr"])
def test_coverage_on_repeated_splits(method):
    # Exchangeable splits of one pool: the mean coverage over splits estimates
    # P(y in C), which lies in [1 - alpha, 1 - alpha + 1/(n+1)] (Lei et al. 2018, Thm 2.2;
    # continuous scores). Tolerance: 4 standard errors of that mean, the standard error
    # estimated from the spread of the per-split coverages (S = 300 splits).
    alpha, n_cal, n_test, splits = 0.1, 99, 400, 300
    y, loc, scale = (a.astype(DT) for a in _pool(0, 40000))
    r = np.random.default_rng(1)
    idx = np.stack([r.permutation(y.size)[: n_cal + n_test] for _ in range(splits)])
    cal, test = idx[:, :n_cal], idx[:, n_cal:]
    lo_all, hi_all = loc - 1.645 * scale, loc + 1.645 * scale
    if method == "absolute":
        fit = jax.vmap(lambda a, b: reg.fit_conformal(a, b, alpha=alpha))(y[cal], loc[cal])
        q = np.asarray(fit.quantile)[:, None]
        lo, hi = loc[test] - q, loc[test] + q
    elif method == "normalized":
        fit = jax.vmap(lambda a, b, c: reg.fit_conformal(a, b, c, alpha=alpha))(
            y[cal], loc[cal], scale[cal]
        )
        q = np.asarray(fit.quantile)[:, None]
        lo, hi = loc[test] - q * scale[test], loc[test] + q * scale[test]
    else:
        fit = jax.vmap(lambda a, b, c: reg.fit_conformalized_quantile(a, b, c, alpha=alpha))(
            y[cal], lo_all[cal], hi_all[cal]
        )
        q = np.asarray(fit.quantile)[:, None]
        lo, hi = lo_all[test] - q, hi_all[test] + q
    cover = ((y[test] >= lo) & (y[test] <= hi)).mean(axis=1)
    se = cover.std(ddof=1) / np.sqrt(splits)
    assert cover.mean() >= 1 - alpha - 4 * se
    assert cover.mean() <= 1 - alpha + 1 / (n_cal + 1) + 4 * se
    # the raw model's 90% interval is far off (the point of recalibrating)
    raw = ((y >= lo_all) & (y <= hi_all)).mean()
    assert raw < 0.8


def test_vmap_equals_loop_and_jit_equals_eager():
    y, loc, scale = (a.reshape(3, 40).astype(DT) for a in _pool(2, 120))
    batched = jax.vmap(lambda a, b, c: reg.fit_conformal(a, b, c, alpha=0.2))(y, loc, scale)
    loop = [float(reg.fit_conformal(a, b, c, alpha=0.2).quantile) for a, b, c in zip(y, loc, scale, strict=True)]
    np.testing.assert_allclose(np.asarray(batched.quantile), loop, rtol=RTOL)
    eager = reg.fit_conformal(y[0], loc[0], alpha=0.2)
    jitted = jax.jit(lambda a, b: reg.fit_conformal(a, b, alpha=0.2))(y[0], loc[0])
    assert jitted == eager  # pytrees through jit, equality never raises
    assert jitted != reg.fit_conformal(y[0], loc[0], alpha=0.3)
    lo_e, hi_e = eager(loc[1])
    lo_j, hi_j = jax.jit(lambda c, m: c(m))(eager, loc[1])
    np.testing.assert_allclose(np.asarray(lo_j), np.asarray(lo_e), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(hi_j), np.asarray(hi_e), rtol=RTOL)


def test_invalid_values_under_jit_give_nan():
    y, loc, scale = (jnp.asarray(a, DT) for a in _pool(3, 30))
    f = jax.jit(lambda a, b, c: reg.fit_conformal(a, b, c, alpha=0.2).quantile)
    assert np.isfinite(float(f(y, loc, scale)))
    assert np.isnan(float(f(y, loc, scale.at[0].set(0.0))))
    assert np.isnan(float(f(y.at[3].set(jnp.nan), loc, scale)))


def test_bad_input_raises():
    y, loc, scale = _pool(4, 30)
    with pytest.raises(ValueError, match="alpha must be a float in"):
        reg.fit_conformal(y, loc, alpha=1.0)
    with pytest.raises(TypeError, match="alpha must be a float in"):
        reg.fit_conformal(y, loc, alpha="0.1")
    with pytest.raises(ValueError, match="scale must be strictly positive"):
        reg.fit_conformal(y, loc, -scale)
    with pytest.raises(ValueError, match="loc has shape"):
        reg.fit_conformal(y, loc[:-1])
    with pytest.raises(ValueError, match="y_true contains 1 NaN"):
        reg.fit_conformal(np.r_[np.nan, y[1:]], loc)
    with pytest.raises(ValueError, match="upper has shape"):
        reg.fit_conformalized_quantile(y, loc, loc[:-1])
    cal_n = reg.fit_conformal(y, loc, scale, alpha=0.2)
    with pytest.raises(ValueError, match="pass the test predictions' scale"):
        cal_n(loc)
    with pytest.raises(ValueError, match="fitted on absolute residuals"):
        reg.fit_conformal(y, loc, alpha=0.2)(loc, scale)


def test_save_load_round_trip(tmp_path):
    from bayescal.classification import load_calibrator, save_calibrator
    from bayescal.core import Calibrator

    y, loc, scale = _pool(5, 40)
    fitted = [
        reg.fit_conformal(y, loc, scale, alpha=0.2),
        reg.fit_conformal(y, loc, alpha=0.1),
        reg.fit_conformalized_quantile(y, loc - scale, loc + scale, alpha=0.25),
    ]
    for i, cal in enumerate(fitted):
        assert isinstance(cal, Calibrator)
        path = tmp_path / f"c{i}.npz"
        save_calibrator(cal, path)
        back = load_calibrator(path)
        assert back == cal
        assert type(back) is type(cal)


# --- one convention: coverage or alpha (issue 21) ---
def test_coverage_and_alpha_name_the_same_interval():
    # n = 19, alpha = 0.1: Lei et al.'s rank ceil((n + 1)(1 - alpha)) = 18 exactly; the
    # float 1 - 0.9 = 0.09999999999999998 would give 19. coverage=0.9 must be alpha=0.1.
    y, loc, scale = _pool(7, 19)
    scores = np.sort(np.abs(y - loc) / scale)
    by_alpha = reg.fit_conformal(y, loc, scale, alpha=0.1)
    by_coverage = reg.fit_conformal(y, loc, scale, coverage=0.9)
    default = reg.fit_conformal(y, loc, scale)
    assert reg.conformal_rank(19, 0.1) == 18
    np.testing.assert_allclose(float(by_coverage.quantile), scores[17], rtol=1e-6)
    assert by_coverage == by_alpha == default
    assert by_coverage.alpha == 0.1 and by_coverage.coverage == 0.9
    lo, hi = loc - scale, loc + scale
    cqr = reg.fit_conformalized_quantile(y, lo, hi, coverage=0.9)
    assert cqr == reg.fit_conformalized_quantile(y, lo, hi, alpha=0.1)
    assert cqr.coverage == 0.9
    # the isotonic / sigma-scaling intervals take both too
    s = reg.fit_sigma_scaling(y, loc, scale)
    ref = reg.recalibrated_interval(s, 0.9, loc=loc, scale=scale)
    for kwargs in ({"alpha": 0.1}, {"coverage": 0.9}):
        got = reg.recalibrated_interval(s, loc=loc, scale=scale, **kwargs)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    assert float(reg.interval_score(y, lo, hi, coverage=0.9)) == float(
        reg.interval_score(y, lo, hi, alpha=0.1)
    )


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda y, m, s: reg.fit_conformal(y, m, alpha=0.1, coverage=0.9), ValueError,
         r"pass coverage or alpha, not both"),
        (lambda y, m, s: reg.fit_conformalized_quantile(y, m - s, m + s, alpha=0.1,
                                                        coverage=0.9), ValueError, "not both"),
        (lambda y, m, s: reg.recalibrated_interval(reg.fit_sigma_scaling(y, m, s), 0.9,
                                                   alpha=0.1, loc=m, scale=s), ValueError,
         "not both"),
        (lambda y, m, s: reg.recalibrated_interval(reg.fit_sigma_scaling(y, m, s), loc=m,
                                                   scale=s), TypeError,
         r"coverage \(e\.g\. coverage=0\.9\) or its miscoverage alpha"),
        (lambda y, m, s: reg.interval_score(y, m - s, m + s), TypeError, "coverage"),
        (lambda y, m, s: reg.fit_conformal(y, m, coverage=90), ValueError,
         r"coverage must be a float in \(0, 1\), e\.g\. 0\.9"),
        (lambda y, m, s: reg.fit_conformal(y, m, coverage="0.9"), TypeError,
         "coverage must be a float"),
    ],
)
def test_coverage_and_alpha_errors_name_the_fix(call, error, match):
    y, loc, scale = _pool(8, 40)
    with pytest.raises(error, match=match):
        call(y, loc, scale)
