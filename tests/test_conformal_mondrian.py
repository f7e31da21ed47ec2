"""Mondrian (group-conditional) conformal: ``groups=`` of ``fit_conformal`` and CQR.

References:
- crepes 0.9 (Bostrom), ``ConformalRegressor().fit(residuals, sigmas, bins)`` and
  ``predict_int(y_hat, sigmas, bins, confidence)``: its Mondrian categories ("bins")
  give each category the ``floor(alpha (n_g + 1))``-th largest score, the same
  quantile as ``ceil((n_g + 1)(1 - alpha))``-th smallest (Vovk, Gammerman & Shafer
  2005, "Algorithmic Learning in a Random World", Sec. 4.5 Mondrian conformal
  predictors). Intervals equal on the same data, plain and normalized.
- CQR per group (Romano, Patterson & Candes 2019, Eq. 6-7, within each group): numpy.
- The rank under ``jit``: Python's exact ``math.ceil((n + 1) * (1 - Fraction(alpha)))``
  (``conformal_rank``) for every group size, and the Stern-Brocot bound against a
  brute-force search.
- Coverage: within each group, split conformal covers a new exchangeable point with
  probability ``k_g / (n_g + 1)`` exactly for continuous scores; checked over 2,000
  simulated calibration sets within 4 binomial standard errors.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayescal import core
from bayescal import regression as reg
from bayescal._src import host
from bayescal.regression._conformal import _ceil_mul_div, _group_ranks, _upper_fraction
from tests.conftest import X64
from tests.test_host_path import assert_same, both

DT = np.float64 if X64 else np.float32
RTOL = 1e-12 if X64 else 1e-6


def _data(seed=0, sizes=(40, 25, 60), scales=(0.5, 1.0, 3.0)):
    """Three groups of different noise: a model whose one scale fits none of them."""
    r = np.random.default_rng(seed)
    groups = np.concatenate([np.full(n, g) for g, n in enumerate(sizes)])
    r.shuffle(groups)
    x = r.uniform(0, 3, groups.size)
    noise = np.asarray(scales)[groups]
    y = np.sin(x) + noise * r.standard_t(4, groups.size)
    loc = 0.9 * np.sin(x)
    scale = 0.5 + 0.2 * x
    return y.astype(DT), loc.astype(DT), scale.astype(DT), groups


# --------------------------------------------------------------------------- references
@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("confidence", [0.9, 0.8])
def test_intervals_equal_crepes_mondrian(normalized, confidence):
    from crepes import ConformalRegressor

    y, loc, scale, g = _data()
    yt, loct, scalet, gt = _data(seed=1, sizes=(7, 9, 11))
    sig = scale if normalized else None
    cal = reg.fit_conformal(y, loc, sig, coverage=confidence, groups=g)
    lo, hi = cal(loct, scalet if normalized else None, groups=gt)
    cr = ConformalRegressor().fit(
        (y - loc).astype(np.float64),
        sigmas=None if sig is None else sig.astype(np.float64),
        bins=g,
    )
    ref = cr.predict_int(
        loct.astype(np.float64),
        sigmas=scalet.astype(np.float64) if normalized else None,
        bins=gt,
        confidence=confidence,
    )
    np.testing.assert_allclose(np.asarray(lo), ref[:, 0], rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(np.asarray(hi), ref[:, 1], rtol=RTOL, atol=1e-6)


def test_exact_rank_where_crepes_float_rank_is_one_short():
    # crepes computes int((1 - confidence)(n + 1)) in floats: 1 - 0.9 is
    # 0.09999999999999998, so for n + 1 = 40 it takes the 3rd largest score (index
    # int(3.9999999999999996) - 1) where the conformal rank ceil(40 * 0.9) = 36 of 39 is
    # the 4th largest. bayescal reads alpha as the decimal 0.1 (conformal_rank).
    from crepes import ConformalRegressor

    y, loc, _, g = _data(17, sizes=(39, 59))
    cal = reg.fit_conformal(y, loc, coverage=0.9, groups=g)
    cr = ConformalRegressor().fit((y - loc).astype(np.float64), bins=g)
    ref = cr.predict_int(np.zeros(2), bins=np.arange(2), confidence=0.9)[:, 1]
    for j, n in enumerate((39, 59)):
        desc = np.sort(np.abs(y - loc)[g == j].astype(np.float64))[::-1]
        k = reg.conformal_rank(n, 0.1)
        assert n + 1 - k == 4 + 2 * j  # the 4th (6th) largest
        np.testing.assert_allclose(float(cal.quantile[j]), desc[n - k], rtol=RTOL)
        np.testing.assert_allclose(ref[j], desc[n - k - 1], rtol=1e-12)  # crepes: one up


@pytest.mark.parametrize("alpha", [0.1, 0.25])
def test_cqr_per_group_equals_numpy(alpha):
    y, loc, scale, g = _data(2)
    lower, upper = loc - scale, loc + scale
    cqr = reg.fit_conformalized_quantile(y, lower, upper, alpha=alpha, groups=g)
    scores = np.maximum(lower - y, y - upper).astype(np.float64)
    for j in range(3):
        s = np.sort(scores[g == j])
        k = math.ceil((s.size + 1) * (1 - Fraction(str(alpha))))
        np.testing.assert_allclose(float(cqr.quantile[j]), s[k - 1], rtol=RTOL, atol=1e-7)
    lo, hi = cqr(lower[:5], upper[:5], groups=g[:5])
    np.testing.assert_allclose(np.asarray(lo), lower[:5] - np.asarray(cqr.quantile)[g[:5]])
    np.testing.assert_allclose(np.asarray(hi), upper[:5] + np.asarray(cqr.quantile)[g[:5]])


def test_one_group_is_the_plain_fit():
    y, loc, scale, _ = _data(3)
    one = reg.fit_conformal(y, loc, scale, groups=np.zeros(y.size, np.int32))
    plain = reg.fit_conformal(y, loc, scale)
    assert one.num_groups == 1 and one.quantile.shape == (1,)
    np.testing.assert_array_equal(np.asarray(one.quantile)[0], np.asarray(plain.quantile))


def test_integer_weights_per_group_equal_repeated_rows():
    y, loc, _, g = _data(4)
    w = np.random.default_rng(4).integers(0, 4, y.size)
    weighted = reg.fit_conformal(y, loc, alpha=0.2, weights=w.astype(DT), groups=g)
    rep = np.repeat(np.arange(y.size), w)
    repeated = reg.fit_conformal(y[rep], loc[rep], alpha=0.2, groups=g[rep], num_groups=3)
    np.testing.assert_array_equal(np.asarray(weighted.quantile), np.asarray(repeated.quantile))


# --------------------------------------------------------------------------- the rank
@given(
    st.fractions(min_value=0, max_value=1).filter(lambda f: 0 < f < 1),
    st.integers(1, 60),
)
def test_upper_fraction_is_the_smallest_above_with_a_bounded_denominator(p, limit):
    best = min(Fraction(math.ceil(p * d), d) for d in range(1, limit + 1))
    assert _upper_fraction(p, limit) == best


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(1, 2**31 - 1))
def test_ceil_of_a_product_over_a_divisor_is_exact(m, c, d):
    c = min(c, d)
    got = int(jax.jit(_ceil_mul_div, static_argnums=(1, 2))(jnp.int32(m), c, d))
    assert got == -(-m * c // d)


@pytest.mark.parametrize(
    "alpha", [0.1, 0.05, 0.2, 1 / 3, 0.123456789, 0.999, 1e-7, 0.5, 2 / 7]
)
def test_group_ranks_equal_conformal_rank_at_every_size(alpha):
    size = 5000
    counts = np.arange(size + 1)
    got = np.asarray(jax.jit(_group_ranks, static_argnums=(1, 2))(counts, alpha, size))
    want = [math.ceil((n + 1) * (1 - Fraction(repr(alpha)))) for n in counts]
    np.testing.assert_array_equal(got, want)
    usable = [n for n in counts if want[n] <= n]
    assert all(reg.conformal_rank(n, alpha) == want[n] for n in usable[:200])


# --------------------------------------------------------------------------- coverage
def test_coverage_holds_within_every_group_and_not_without_groups():
    # 2,000 calibration sets of three groups (noise 0.5, 1 and 3; n_g = 30, 50, 80),
    # one test point per group each: the per-group coverage of the Mondrian intervals
    # is k_g / (n_g + 1) (continuous scores), within 4 binomial standard errors; the
    # one-quantile fit over-covers the quiet group and under-covers the noisy one.
    reps, sizes, scales, alpha = 2000, (30, 50, 80), np.array([0.5, 1.0, 3.0]), 0.1
    groups = np.concatenate([np.full(n, j) for j, n in enumerate(sizes)])
    r = np.random.default_rng(8)
    y = (scales[groups] * r.normal(size=(reps, groups.size))).astype(DT)
    y_test = (scales * r.normal(size=(reps, 3))).astype(DT)
    zeros = np.zeros(groups.size, DT)

    def covered(y_cal, yt, mondrian):
        if mondrian:
            cal = reg.fit_conformal(y_cal, zeros, alpha=alpha, groups=groups, num_groups=3)
            lo, hi = cal(jnp.zeros(3, DT), groups=jnp.arange(3))
        else:
            cal = reg.fit_conformal(y_cal, zeros, alpha=alpha)
            lo, hi = cal(jnp.zeros(3, DT))
        return (lo <= yt) & (yt <= hi)

    rate = np.asarray(jax.jit(jax.vmap(lambda a, b: covered(a, b, True)))(y, y_test)).mean(0)
    exact = np.array([reg.conformal_rank(n, alpha) / (n + 1) for n in sizes])
    se = np.sqrt(exact * (1 - exact) / reps)
    assert np.all(np.abs(rate - exact) < 4 * se), (rate, exact)
    pooled = np.asarray(jax.jit(jax.vmap(lambda a, b: covered(a, b, False)))(y, y_test))
    pooled = pooled.mean(0)
    assert pooled[0] > 0.99 and pooled[2] < 0.85, pooled


# --------------------------------------------------------------------------- contract
def test_jit_equals_eager_and_vmap_equals_loop():
    y, loc, scale, g = _data(5)
    eager = reg.fit_conformal(y, loc, scale, alpha=0.2, groups=g)
    traced = jax.jit(
        lambda a, b, c, d: reg.fit_conformal(a, b, c, alpha=0.2, groups=d, num_groups=3)
    )(y, loc, scale, g)
    assert traced == eager
    lo, hi = eager(loc, scale, groups=g)
    tlo, thi = jax.jit(lambda a, b, d: eager(a, b, groups=d))(loc, scale, g)
    # loc -/+ q * scale: XLA may contract it into one fused multiply-add in one
    # program and not the other (1 ulp)
    np.testing.assert_allclose(np.asarray(lo), np.asarray(tlo), rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(np.asarray(hi), np.asarray(thi), rtol=RTOL, atol=1e-6)

    ys = np.stack([_data(s)[0] for s in (6, 7, 8)])
    fit = jax.vmap(
        lambda a: reg.fit_conformalized_quantile(
            a, loc - scale, loc + scale, alpha=0.2, groups=g, num_groups=3
        )
    )(ys)
    for i in range(3):
        one = reg.fit_conformalized_quantile(ys[i], loc - scale, loc + scale, alpha=0.2, groups=g)
        np.testing.assert_array_equal(np.asarray(fit.quantile[i]), np.asarray(one.quantile))


@pytest.mark.parametrize("weighted", [False, True])
def test_host_twin_equals_the_kernel(weighted):
    y, loc, scale, g = _data(9)
    w = np.linspace(0.5, 2.0, y.size).astype(DT) if weighted else None
    got, want, answered = both(
        lambda: reg.fit_conformal(y, loc, scale, alpha=0.2, weights=w, groups=g)
    )
    assert answered == [not weighted]  # weighted fits are the kernel's on both paths
    assert_same(got, want)
    got, want, answered = both(
        lambda: reg.fit_conformalized_quantile(y, loc - scale, loc + scale, alpha=0.2, groups=g)
    )
    assert answered == [True]
    assert_same(got, want)
    # the calls: each test point's group quantile (codes as a list too)
    split = reg.fit_conformal(y, loc, scale, alpha=0.2, groups=g)
    cqr = reg.fit_conformalized_quantile(y, loc - scale, loc + scale, alpha=0.2, groups=g)
    for call in (
        lambda: split(loc, scale, groups=g),
        lambda: split(loc[:7], scale[:7], groups=g[:7].tolist()),
        lambda: cqr(loc - scale, loc + scale, groups=g),
    ):
        got, want, answered = both(call)
        assert answered == [True]
        assert_same(got, want)


def test_too_small_groups_raise_naming_them_and_give_inf_under_jit():
    y, loc, _, _ = _data(10)
    g = np.zeros(y.size, np.int64)
    g[:5], g[5:8] = 1, 3  # group 1: 5 scores, group 2: none, group 3: 3
    with pytest.raises(ValueError, match=r"group\(s\) 1 \(5\), 2 \(0\), 3 \(3\)") as e:
        reg.fit_conformal(y, loc, alpha=0.1, groups=g)
    assert "at least 9 calibration observations" in str(e.value)
    q = jax.jit(
        lambda a, b, c: reg.fit_conformal(a, b, alpha=0.1, groups=c, num_groups=4).quantile
    )(y, loc, g)
    assert np.isfinite(q[0]) and np.all(np.isinf(q[1:]))


def test_save_and_load(tmp_path):
    y, loc, scale, g = _data(11)
    for cal in (
        reg.fit_conformal(y, loc, scale, alpha=0.2, groups=g),
        reg.fit_conformalized_quantile(y, loc - scale, loc + scale, alpha=0.2, groups=g),
    ):
        path = tmp_path / f"{type(cal).__name__}.npz"
        core.save_calibrator(cal, path)
        assert core.load_calibrator(path) == cal


def test_files_written_before_groups_still_load(tmp_path):
    # a file of the format before num_groups existed: the JSON description (the
    # uint8 member __spec__, as save_calibrator writes it) has no such field
    y, loc, _, _ = _data(12)
    cal = reg.fit_conformal(y, loc, alpha=0.2)
    path = tmp_path / "new.npz"
    core.save_calibrator(cal, path)
    with np.load(path) as f:
        members = {k: f[k] for k in f.files}
    spec = json.loads(members["__spec__"].tobytes())
    assert spec["calibrator"]["meta"].pop("num_groups") is None
    members["__spec__"] = np.frombuffer(json.dumps(spec).encode(), np.uint8)
    old = tmp_path / "old.npz"
    np.savez(old, **members)
    assert core.load_calibrator(old) == cal


def test_a_batched_or_infinite_quantile_is_refused_when_saving(tmp_path):
    y, loc, _, _ = _data(13)
    g = np.zeros(y.size, np.int32)
    g[:3] = 1
    cal = jax.jit(
        lambda a, b: reg.fit_conformal(a, b, alpha=0.1, groups=g, num_groups=2)
    )(y, loc)
    with pytest.raises(ValueError, match="could not be loaded"):
        core.save_calibrator(cal, tmp_path / "inf.npz")
    assert not (tmp_path / "inf.npz").exists()


# --------------------------------------------------------------------------- bad input
BAD_GROUPS = {
    "one code short": (lambda g: {"groups": g[:-1]}, ValueError, "one code per observation"),
    "num_groups alone": (lambda g: {"num_groups": 3}, ValueError, "only used with groups"),
    "negative": (
        lambda g: {"groups": np.where(g == 2, -1, g), "num_groups": 3},
        ValueError,
        r"groups.*\[0, 2\]",
    ),
    "too large": (
        lambda g: {"groups": np.where(g == 2, 7, g), "num_groups": 3},
        ValueError,
        r"groups.*\[0, 2\]",
    ),
    "fractional": (lambda g: {"groups": g + 0.5}, ValueError, "groups must hold integer"),
    "strings": (lambda g: {"groups": g.astype(str)}, TypeError, "groups must hold integer"),
    "no groups": (lambda g: {"groups": g, "num_groups": 0}, ValueError, "num_groups must"),
    "float count": (lambda g: {"groups": g, "num_groups": 2.5}, TypeError, "num_groups must"),
}


@pytest.mark.parametrize("case", sorted(BAD_GROUPS))
@pytest.mark.parametrize("fit", ["split", "cqr"])
def test_bad_groups_raise_naming_the_argument(case, fit):
    y, loc, scale, g = _data(14)
    kwargs, error, message = BAD_GROUPS[case]
    with pytest.raises(error, match=message):
        if fit == "split":
            reg.fit_conformal(y, loc, alpha=0.2, **kwargs(g))
        else:
            reg.fit_conformalized_quantile(y, loc - scale, loc + scale, alpha=0.2, **kwargs(g))


def test_traced_groups_need_num_groups():
    y, loc, _, g = _data(15)
    with pytest.raises(ValueError, match="pass num_groups"):
        jax.jit(lambda c: reg.fit_conformal(y, loc, groups=c))(g)


def test_calls_need_groups_exactly_when_fitted_with_them():
    y, loc, scale, g = _data(16)
    mondrian = reg.fit_conformal(y, loc, alpha=0.2, groups=g)
    plain = reg.fit_conformal(y, loc, alpha=0.2)
    with pytest.raises(ValueError, match="pass the test points' groups"):
        mondrian(loc)
    with pytest.raises(ValueError, match="fitted without groups"):
        plain(loc, groups=g)
    with pytest.raises(ValueError, match=r"groups.*\[0, 2\]"):
        mondrian(loc[:3], groups=[0, 1, 3])
    cqr = reg.fit_conformalized_quantile(y, loc - scale, loc + scale, alpha=0.2, groups=g)
    with pytest.raises(ValueError, match="pass the test points' groups"):
        cqr(loc - scale, loc + scale)
    with host.disabled():
        lo, hi = mondrian(loc[:4], groups=g[:4])
    np.testing.assert_allclose(
        np.asarray(hi - lo), 2 * np.asarray(mondrian.quantile)[g[:4]], rtol=RTOL
    )
