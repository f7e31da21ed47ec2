"""The host path (bayescal._src.host): small concrete CPU inputs answered in NumPy.

Every twin must give what the kernel path gives (``host.disabled()``): the same type,
dtype, shape and device; bins, counts and order statistics exactly, sums to float
tolerance; and bad input left to the kernel path, whose error the user then gets.
Traced inputs and inputs above ``HOST_MAX`` take the kernel path.
"""

import contextlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayescal import regression as reg
from bayescal._src import host
from bayescal.classification import _host as classification_host
from bayescal.classification import (
    brier_score,
    calibration_slope_intercept,
    expected_calibration_error,
    fit_bbq,
    fit_beta,
    fit_centered_isotonic,
    fit_cross_venn_abers,
    fit_dirichlet,
    fit_histogram_binning,
    fit_isotonic,
    fit_matrix_scaling,
    fit_platt,
    fit_scaling_binning,
    fit_spline,
    fit_temperature,
    fit_vector_scaling,
    fit_venn_abers,
    hosmer_lemeshow,
    log_loss,
    reliability_curve,
    spiegelhalter_z,
)
from tests.conftest import X64, float_tol
from tests.test_classification_errors import CASES as CLASSIFICATION_CASES

DT = np.float64 if X64 else np.float32
# Absolute tolerance of the float results: a kernel's per-bin means, per-observation
# scores and logarithms are rounded to the dtype, the host's accumulated in float64.
ATOL = 1e-12 if X64 else 1e-6
NORMS = ("l1", "l2", "max")
#: Examples per property test. Every twin also has its fixed case in
#: ``tests/test_twins.py`` (the registry, the floor a new twin must reach); these draw
#: sizes, ties, weights and input types around it. Each example compiles the kernel
#: side anew wherever a bucket or static option changes, so 30 examples (the project
#: profile) made this file 138 of the fast suite's ~1,300 worker-seconds; 10 keep
#: hypothesis's explicit boundary cases and a few random draws.
TWIN_EXAMPLES = settings(max_examples=10)


class Declined(Exception):
    """A twin left the call to the kernel path (raised by ``spy(stop=True)``)."""


@contextlib.contextmanager
def spy(*, stop=False):
    """The twins tried within: a list of ``(name, answered)``; with ``stop``, the
    call ends with :class:`Declined` where a twin leaves it to the kernel path."""
    log = []
    attempt = host._attempt

    def recorded(twin, args, kwargs):
        out = attempt(twin, args, kwargs)
        name = twin.__name__.removeprefix("_twin_")  # the name of the function it twins
        log.append((name, out is not None))
        if stop and out is None:
            raise Declined(name)
        return out

    host._attempt = recorded
    try:
        yield log
    finally:
        host._attempt = attempt


def outcome(call):
    try:
        return call(), None
    except Exception as err:  # compared below: the same error on both paths
        return None, (type(err), str(err))


def both(call):
    """``call()`` with the host path, without it, and which twins answered."""
    with spy() as log:
        got = outcome(call)
    with host.disabled():
        want = outcome(call)
    return got, want, [answered for _, answered in log]


def assert_same(got, want, *, exact=False):
    (out, err), (ref, ref_err) = got, want
    assert err == ref_err
    if err is not None:
        return
    assert type(out) is type(ref)
    leaves, ref_leaves = jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(ref)
    for a, b in zip(leaves, ref_leaves, strict=True):
        assert isinstance(a, jax.Array)
        assert (a.dtype, a.shape, a.weak_type) == (b.dtype, b.shape, b.weak_type)
        assert a.devices() == b.devices() and a._committed == b._committed
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=float_tol(), atol=ATOL)


def assert_same_rank(got, want, num_samples):
    """Resampling p-values ``(1 + k) / (1 + B)`` of the same ``k``: the host computes
    the correctly rounded quotient, XLA multiplies by the rounded reciprocal of the
    constant ``1 + B`` (e.g. 18 / 20 in float32: 0.9 and 0.90000004)."""
    a, b = (float(x) * (1 + num_samples) for x in (got, want))
    assert round(a) == round(b)
    assert a == pytest.approx(b, rel=1e-6)


CONVERSIONS = {
    "numpy": lambda a: a,
    "float64": lambda a: np.asarray(a, np.float64),
    "list": lambda a: a.tolist(),
    "jax": jnp.asarray,
}


@st.composite
def binary_data(draw, max_n=2000):
    """Labels, probabilities (ties on bin edges k/10, k/15, at 0 and 1) and weights
    (with zeros), through one of :data:`CONVERSIONS`."""
    n = draw(st.integers(1, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["uniform", "tenths", "fifteenths", "extremes"]))
    if kind == "uniform":
        p = rng.uniform(size=n)
    elif kind == "tenths":
        p = rng.integers(0, 11, size=n) / 10
    elif kind == "fifteenths":
        p = rng.integers(0, 16, size=n) / 15
    else:
        p = rng.choice([0.0, 1e-3, 0.5, 1 - 1e-3, 1.0], size=n)
    p = p.astype(DT)
    y = (rng.uniform(size=n) < p).astype(draw(st.sampled_from([DT, np.int64, bool])))
    w = rng.uniform(size=n).astype(DT) * (rng.uniform(size=n) < 0.8)
    w[rng.integers(n)] = 1.0
    convert = CONVERSIONS[draw(st.sampled_from(sorted(CONVERSIONS)))]
    return convert(y), convert(p), convert(w)


@TWIN_EXAMPLES
@given(
    binary_data(),
    st.sampled_from([1, 2, 10, 15, 16]),
    st.sampled_from(["uniform", "quantile"]),
    st.sampled_from(NORMS),
    st.booleans(),
)
def test_ece_equals_kernel(data, bins, strategy, norm, weighted):
    y, p, w = data
    got, want, answered = both(
        lambda: expected_calibration_error(
            y, p, bins=bins, strategy=strategy, norm=norm, weights=w if weighted else None
        )
    )
    assert answered == [True]
    assert_same(got, want)


@TWIN_EXAMPLES
@given(
    binary_data(),
    st.sampled_from([1, 2, 10, 15, 16]),
    st.sampled_from(["uniform", "quantile"]),
)
def test_bins_and_counts_equal_kernel(data, bins, strategy):
    y, p, _ = data
    curve, edges = reliability_curve(y, p, bins=bins, strategy=strategy, return_edges=True)
    ph = host._floats(p)
    host_edges = classification_host._edges(bins, strategy, ph)
    np.testing.assert_array_equal(host_edges, edges)
    counts = np.bincount(classification_host._bin_index(ph, host_edges), minlength=bins)
    np.testing.assert_array_equal(counts, curve.weight)


@TWIN_EXAMPLES
@given(binary_data(max_n=300), st.sampled_from(["fd", "edges"]), st.sampled_from(NORMS))
def test_ece_explicit_and_fd_bins_equal_kernel(data, bins, norm):
    y, p, _ = data
    if bins == "edges":
        bins = np.array([0.0, 0.1, 0.1, 0.25, 0.5, 0.7, 1.0])
    got, want, answered = both(
        lambda: expected_calibration_error(y, p, bins=bins, norm=norm)
    )
    assert answered == [True]
    assert_same(got, want)


@TWIN_EXAMPLES
@given(
    binary_data(), st.sampled_from(["mean", "sum", "none"]), st.booleans(), st.booleans()
)
def test_brier_score_equals_kernel(data, reduction, weighted, from_logits):
    y, p, w = data
    kwargs = {"reduction": reduction, "weights": w if weighted else None}
    if from_logits:
        z = (np.asarray(p, DT) - 0.5) * 30  # logits up to +-15
        got, want, answered = both(lambda: brier_score(y, logits=z, **kwargs))
    else:
        got, want, answered = both(lambda: brier_score(y, p, **kwargs))
    assert answered == [True]
    assert_same(got, want)


@TWIN_EXAMPLES
@given(
    binary_data(),
    st.sampled_from(["mean", "sum", "none"]),
    st.booleans(),
    st.sampled_from([None, 1e-3, 1e-12, "logits"]),
)
def test_log_loss_equals_kernel(data, reduction, weighted, mode):
    y, p, w = data
    kwargs = {"reduction": reduction, "weights": w if weighted else None}
    if mode == "logits":
        z = (np.asarray(p, DT) - 0.5) * 30
        got, want, answered = both(lambda: log_loss(y, logits=z, **kwargs))
    else:
        got, want, answered = both(lambda: log_loss(y, p, eps=mode, **kwargs))
    assert answered == [True]
    assert_same(got, want)  # inf (p = 0 for an observed 1) on both paths


def test_zero_weight_removes_an_infinite_term():
    y, p, w = np.array([1.0, 0.0, 1.0]), np.array([0.0, 0.2, 0.7]), np.array([0.0, 1, 2])
    for reduction in ("mean", "sum"):
        got, want, answered = both(
            lambda r=reduction: log_loss(y, p, weights=w, reduction=r)
        )
        assert answered == [True] and np.isfinite(got[0])
        assert_same(got, want)


@st.composite
def regression_data(draw, max_n=2000):
    """Observations, predictions (with tied scores) and scales."""
    n = draw(st.integers(1, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n) * draw(st.sampled_from([1e-3, 1.0, 100.0]))
    if draw(st.booleans()):  # on a grid: tied scores, zero residuals
        y, mu = np.round(y * 4) / 4, np.round(mu * 4) / 4
    scale = rng.uniform(0.1, 3.0, size=n)
    convert = CONVERSIONS[draw(st.sampled_from(sorted(CONVERSIONS)))]
    return tuple(convert(a.astype(DT)) for a in (y, mu, scale))


ALPHAS = st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5, 0.9])


@TWIN_EXAMPLES
@given(regression_data(), ALPHAS, st.booleans())
def test_fit_conformal_equals_kernel(data, alpha, normalized):
    y, mu, scale = data
    s = scale if normalized else None
    got, want, answered = both(lambda: reg.fit_conformal(y, mu, s, alpha=alpha))
    assert_same(got, want, exact=True)  # an order statistic: the same bits
    assert answered == [want[1] is None]  # a too small n: the kernel path raises
    if want[1] is None:
        assert got[0] == want[0]  # alpha and normalized too
        cal = want[0]  # a kernel path calibrator, applied on both paths
        got, want, answered = both(lambda: cal(mu, s))
        assert answered == [True]
        # mu -/+ q exactly; mu -/+ q s to float tolerance (a fused kernel may use an FMA)
        assert_same(got, want, exact=not normalized)


@TWIN_EXAMPLES
@given(regression_data(), ALPHAS)
def test_conformalized_quantile_equals_kernel(data, alpha):
    y, mu, scale = data
    lo, hi = np.asarray(mu, DT) - np.asarray(scale, DT), np.asarray(mu, DT) + 0.5
    got, want, answered = both(
        lambda: reg.fit_conformalized_quantile(y, lo, hi, alpha=alpha)
    )
    assert_same(got, want, exact=True)
    assert answered == [want[1] is None]
    if want[1] is None:
        assert got[0] == want[0]
        cal = want[0]
        got, want, answered = both(lambda: cal(lo, hi))
        assert answered == [True]
        assert_same(got, want, exact=True)


def test_calibrator_on_two_dimensional_and_broadcast_inputs():
    rng = np.random.default_rng(0)
    y, mu, s = rng.normal(size=(3, 50)).astype(DT)
    cal = reg.fit_conformal(y, mu, np.abs(s) + 0.5)
    for loc, scale in [(mu.reshape(5, 10), np.full((1, 10), 2.0, DT)), (mu, np.abs(s) + 1)]:
        got, want, answered = both(lambda loc=loc, scale=scale: cal(loc, scale))
        assert answered == [True]
        assert_same(got, want)


@TWIN_EXAMPLES
@given(binary_data(), st.integers(0, 2**32 - 1))
def test_fit_isotonic_and_its_calibrator_equal_kernel(data, seed):
    y, p, _ = data
    got, want, answered = both(lambda: fit_isotonic(y, p))
    # The thresholds are the sorted distinct scores (exact); the values are PAV means
    # (the kernel's padding slot may pool with the last block: an ulp).
    assert_same(got, want)
    np.testing.assert_array_equal(got[0].thresholds, want[0].thresholds)
    assert answered == [True]
    new = np.random.default_rng(seed).uniform(-0.2, 1.2, size=37).astype(DT)
    for cal in (got[0], want[0]):
        got_apply, want_apply, answered = both(lambda c=cal: c(new))
        assert answered == [True]
        assert_same(got_apply, want_apply)


@TWIN_EXAMPLES
@given(binary_data(), st.sampled_from([1.0, (0.5, 2.0), (3.0, 1e-3)]))
def test_fit_isotonic_with_a_prior_equals_kernel(data, prior):
    y, p, _ = data
    got, want, answered = both(lambda: fit_isotonic(y, p, prior=prior))
    assert answered == [True]
    assert_same(got, want)
    np.testing.assert_array_equal(got[0].thresholds, want[0].thresholds)


@TWIN_EXAMPLES
@given(binary_data(), st.integers(0, 2**32 - 1))
def test_fit_centered_isotonic_and_its_calibrator_equal_kernel(data, seed):
    y, p, _ = data
    got, want, answered = both(lambda: fit_centered_isotonic(y, p))
    assert answered == [True]
    assert_same(got, want)  # the block centres: float64 here, the dtype there
    new = np.random.default_rng(seed).uniform(-0.2, 1.2, size=37).astype(DT)
    for cal in (got[0], want[0]):
        got_apply, want_apply, answered = both(lambda c=cal: c(new))
        assert answered == [True]
        assert_same(got_apply, want_apply)


@TWIN_EXAMPLES
@given(binary_data(max_n=300), st.integers(0, 2**32 - 1))
def test_venn_abers_calls_equal_kernel(data, seed):
    # the host twins of VennAbersCalibrator / CrossVennAbersCalibrator calls (NumPy
    # searchsorted and the merger) against the jitted lookup; scores on, between and
    # beyond the calibration scores
    y, p, w = data
    # the fits: the host calls the kernel's own callback (exact)
    for fit in (
        lambda: fit_venn_abers(y, p),
        lambda: fit_venn_abers(y, p, weights=w),
        lambda: fit_cross_venn_abers(y, p, np.arange(np.size(p)) % 2, weights=w),
    ):
        got, want, answered = both(fit)
        assert answered == [True] or (np.size(p) < 2 and answered == [False])
        assert_same(got, want, exact=True)
    y, p = np.asarray(y, DT), np.asarray(p, DT)
    rng = np.random.default_rng(seed)
    new = np.concatenate([p[:20], rng.uniform(-0.2, 1.2, size=17)]).astype(DT)
    ivap = fit_venn_abers(y, p)
    for call in (ivap, ivap.probability, ivap.interval):
        got, want, answered = both(lambda c=call: c(new))
        assert answered == [True]
        assert_same(got, want)
    if p.size >= 2:
        cvap = fit_cross_venn_abers(y, p, np.arange(p.size) % 2)
        two = np.stack([new, new[::-1]], axis=1)
        for call in (cvap, cvap.probability, cvap.interval):
            got, want, answered = both(lambda c=call: c(two))
            assert answered == [True]
            assert_same(got, want)


@st.composite
def pit_data(draw, max_n=2000):
    """PIT values with ties, exact 0 and 1, through one of :data:`CONVERSIONS`."""
    n = draw(st.integers(2, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    u = rng.uniform(size=n)
    if draw(st.booleans()):
        u = np.round(u * 20) / 20  # ties, and 0 and 1 themselves
    u[:2] = [0.25, 0.75]  # two distinct values inside (0, 1): a valid fit
    convert = CONVERSIONS[draw(st.sampled_from(sorted(CONVERSIONS)))]
    return convert(rng.permutation(u).astype(DT))


@TWIN_EXAMPLES
@given(pit_data(), st.integers(0, 2**32 - 1))
def test_isotonic_recalibrator_and_its_maps_equal_kernel(pit, seed):
    got, want, answered = both(lambda: reg.fit_isotonic_recalibrator(pit))
    assert answered == [True]
    # The raw knots (sorted PIT values) exactly; the ECDF values k / n within an ulp:
    # the host divides, XLA may multiply by the reciprocal.
    assert_same(got, want)
    np.testing.assert_array_equal(got[0].raw, want[0].raw)
    levels = np.random.default_rng(seed).uniform(size=(3, 11)).astype(DT)
    levels[0, :3] = [0.0, 1.0, np.asarray(pit, DT)[0]]  # the ends and a knot
    for cal in (got[0], want[0]):
        for call in (lambda c=cal: c(levels), lambda c=cal: c.inverse(levels)):
            got_map, want_map, answered = both(call)
            assert answered == [True]
            assert_same(got_map, want_map)


# --------------------------------------------------------------------------- more twins
def test_levels_equal_jax_linspace():
    # the curves' levels: jnp.linspace(0, 1, m) in the dtype, bit for bit (the counts
    # at a level are exact only if the levels are the same floats)
    # (each m is a program of its own: the small counts, the powers of two and their
    # neighbours, where a float32 step's rounding changes, and a few large ones)
    u = np.array([0.25, 0.5], DT)
    counts = sorted({*range(2, 41), *(2**k + d for k in range(6, 10) for d in (-1, 0, 1)),
                     99, 100, 101, 199, 200, 201, 1000, 1001, 4097, 10_000})
    for m in counts:
        want = np.asarray(jnp.linspace(0.0, 1.0, m, dtype=DT))
        np.testing.assert_array_equal(host._levels(m, np.dtype(DT)), want)
        if m in (20, 100, 200) or m > 400:  # and the kernel's own levels (inside jit)
            with host.disabled():
                kernel = reg.calibration_curve(u, num_levels=m).expected
            np.testing.assert_array_equal(host._levels(m, np.dtype(DT)), kernel)


@st.composite
def normal_data(draw, max_n=1500):
    """Observations, locations and scales (tails out to 9 sigma, ties), and weights."""
    n = draw(st.integers(1, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    loc = rng.normal(size=n) * draw(st.sampled_from([1.0, 1e3]))
    scale = rng.uniform(0.1, 3.0, size=n)
    z = rng.normal(size=n) * draw(st.sampled_from([1.0, 3.0]))
    z[: max(1, n // 10)] = rng.choice([0.0, -9.0, 9.0, 1.5], size=max(1, n // 10))
    y = loc + z * scale
    w = rng.uniform(size=n) * (rng.uniform(size=n) < 0.8)
    w[0] = 1.0
    convert = CONVERSIONS[draw(st.sampled_from(sorted(CONVERSIONS)))]
    return tuple(convert(a.astype(DT)) for a in (y, loc, scale, w))


@TWIN_EXAMPLES
@given(normal_data())
def test_pit_normal_equals_kernel(data):
    y, loc, scale, _ = data
    got, want, answered = both(lambda: reg.pit_normal(y, loc, scale))
    assert answered == [True]
    assert_same(got, want)


@TWIN_EXAMPLES
@given(normal_data(), st.sampled_from(["mean", "sum", "none"]), st.booleans())
def test_crps_normal_equals_kernel(data, reduction, weighted):
    y, loc, scale, w = data
    kw = {
        "reduction": reduction,
        "weights": w if weighted and reduction != "none" else None,
    }
    got, want, answered = both(lambda: reg.crps_normal(y, loc, scale, **kw))
    assert answered == [True]
    assert_same(got, want)


@TWIN_EXAMPLES
@given(normal_data(), st.booleans(), st.booleans())
def test_sigma_scaling_and_its_map_equal_kernel(data, weighted, root):
    y, loc, scale, w = data
    got, want, answered = both(
        lambda: reg.fit_sigma_scaling(y, loc, scale, weights=w if weighted else None)
    )
    # every residual 0 (or weighted 0) is an error: the kernel path raises it
    assert answered == [want[1] is None]
    assert_same(got, want)
    if want[1] is not None:
        return
    for cal in (got[0], want[0]):
        got_apply, want_apply, answered = both(lambda c=cal: c(scale))
        assert answered == [True]
        assert_same(got_apply, want_apply)
    got, want, answered = both(lambda: reg.sharpness(scale, root=root))
    assert answered == [True]
    assert_same(got, want)


@TWIN_EXAMPLES
@given(
    pit_data(),
    st.sampled_from([2, 5, 21, 100, 101]),
    st.sampled_from(["quantile", "interval"]),
    st.sampled_from(NORMS),
)
def test_pit_curves_equal_kernel(pit, num_levels, kind, norm):
    # pit_data has ties on multiples of 1/20: on the levels of 21 and 101 (exact counts)
    kw = {"num_levels": num_levels, "kind": kind}
    got, want, answered = both(lambda: reg.calibration_curve(pit, **kw))
    assert answered == [True]
    assert_same(got, want)
    # the levels exactly, and the counts behind the fractions
    np.testing.assert_array_equal(got[0].expected, want[0].expected)
    n = np.asarray(pit).size
    counts = [np.rint(np.asarray(c[0].observed, np.float64) * n) for c in (got, want)]
    np.testing.assert_array_equal(*counts)
    got, want, answered = both(lambda: reg.calibration_error(pit, norm=norm, **kw))
    assert answered == [True]
    assert_same(got, want)
    for levels in (num_levels, None):
        got, want, answered = both(
            lambda lv=levels: reg.miscalibration_area(pit, num_levels=lv, kind=kind)
        )
        assert answered == [True]
        assert_same(got, want)


@TWIN_EXAMPLES
@given(
    binary_data(),
    st.sampled_from([1, 2, 10, 15]),
    st.sampled_from(["uniform", "quantile"]),
    st.booleans(),
    st.booleans(),
)
def test_reliability_curve_equals_kernel(data, bins, strategy, weighted, return_edges):
    y, p, w = data
    kw = {"bins": bins, "strategy": strategy, "return_edges": return_edges}
    got, want, answered = both(
        lambda: reliability_curve(y, p, weights=w if weighted else None, **kw)
    )
    assert answered == [True]
    assert_same(got, want)
    curve, ref = (got[0][0], want[0][0]) if return_edges else (got[0], want[0])
    # the edges and the counts exactly
    np.testing.assert_array_equal(curve.edges, ref.edges)
    if not weighted:
        np.testing.assert_array_equal(curve.weight, ref.weight)


@pytest.mark.parametrize("n", [40, 600, 5000])
@pytest.mark.parametrize("soft", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_fit_platt_and_its_map_equal_kernel(n, soft, weighted):
    # the loss is convex: the host's float64 Newton and the kernel's solver reach the
    # same optimum (the kernel's docstring: ~1e-6 relative in float32, a floor of ~1e-7)
    rng = np.random.default_rng(n + soft)
    p = rng.uniform(0.01, 0.99, size=n).astype(DT)
    y = (rng.uniform(size=n) < p**1.3).astype(DT)
    w = rng.integers(0, 3, size=n).astype(DT) if weighted else None
    got, want, answered = both(lambda: fit_platt(y, p, soft_labels=soft, weights=w))
    assert answered == [True]
    (out, _), (ref, _) = got, want
    for a, b in ((out.a, ref.a), (out.b, ref.b)):
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-5 if not X64 else 1e-9, atol=2e-7)
    new = rng.uniform(size=(3, 17)).astype(DT)
    for cal in (out, ref):
        got_apply, want_apply, answered = both(lambda c=cal: c(new))
        assert answered == [True]
        assert_same(got_apply, want_apply)


def assert_same_test(got, want):
    """A test's statistic to float tolerance and its p-value to what that allows: a
    chi-square tail's log changes by at most about half the statistic's change (the
    hazard of gammaincc(a, x) in x is below 1 where the p-value is small), so tail
    p-values are compared on the log scale with that margin."""
    (out, err), (ref, ref_err) = got, want
    assert err == ref_err
    if err is not None:
        return
    assert type(out) is type(ref)
    for name in out._fields:
        a, b = getattr(out, name), getattr(ref, name)
        assert (a.dtype, a.shape, a.devices()) == (b.dtype, b.shape, b.devices())
        if name != "p_value":
            np.testing.assert_allclose(a, b, rtol=10 * float_tol(), atol=ATOL)
    stat_gap = abs(float(out.statistic) - float(ref.statistic))
    margin = 0.75 * stat_gap + 10 * float_tol()
    tiny = np.finfo(out.p_value.dtype).tiny  # below it both paths write 0 (flushed)
    log_p = [np.log(max(float(v), tiny)) for v in (out.p_value, ref.p_value)]
    assert abs(log_p[0] - log_p[1]) <= margin


@pytest.mark.parametrize("n", [40, 600, 5000])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [None, 0.05])
def test_calibration_slope_intercept_equals_kernel(n, weighted, eps):
    # Cox's fit is fit_platt's hard-label Newton problem: the host's float64 Newton and
    # the kernel's solver reach the same optimum (a convex loss)
    rng = np.random.default_rng(n + weighted)
    p = rng.uniform(0.01, 0.99, size=n).astype(DT)
    y = (rng.uniform(size=n) < p**1.3).astype(DT)
    w = rng.integers(0, 3, size=n).astype(DT) if weighted else None
    got, want, answered = both(
        lambda: calibration_slope_intercept(y, p, weights=w, eps=eps)
    )
    assert answered == [True]
    assert_same_test(got, want)


@TWIN_EXAMPLES
@given(binary_data(), st.sampled_from([3, 5, 10]), st.sampled_from([None, 4]))
def test_hosmer_lemeshow_equals_kernel(data, bins, dof):
    y, p, _ = data
    got, want, answered = both(lambda: hosmer_lemeshow(y, p, bins, dof=dof))
    assert answered in ([True], [False])
    assert answered == [True] or want[1] is not None or np.size(p) == 0
    assert_same_test(got, want)


@TWIN_EXAMPLES
@given(binary_data(), st.booleans())
def test_spiegelhalter_z_equals_kernel(data, weighted):
    y, p, w = data
    got, want, answered = both(
        lambda: spiegelhalter_z(y, p, weights=w if weighted else None)
    )
    err = got[1]
    if answered == [False]:  # only bad input or a zero variance: every p (of positive
        # weight) in {0, 1/2, 1}, where the kernel's z is NaN or infinite
        p64 = np.asarray(p, np.float64)
        if weighted:
            p64 = p64[np.asarray(w, np.float64) > 0]
        assert err is not None or np.all((p64 == 0) | (p64 == 0.5) | (p64 == 1))
        return
    assert_same_test(got, want)


@pytest.mark.parametrize("n", [40, 600, 5000])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "kwargs", [{}, {"split": None}, {"bins": 4, "soft_labels": True, "eps": 0.01}]
)
def test_fit_scaling_binning_and_its_map_equal_kernel(n, weighted, kwargs):
    # the Platt step is fit_platt's (same optimum, float tolerance); the equal-mass
    # groups are counted on integer weights, so the bins hold the same observations
    rng = np.random.default_rng(n + 2 * weighted)
    p = rng.uniform(0.01, 0.99, size=n).astype(DT)
    y = (rng.uniform(size=n) < p**1.3).astype(DT)
    w = rng.integers(0, 3, size=n).astype(DT) if weighted else None
    got, want, answered = both(lambda: fit_scaling_binning(y, p, weights=w, **kwargs))
    assert answered == [True]
    (out, _), (ref, _) = got, want
    for name in ("a", "b", "edges", "values"):
        a, b = getattr(out, name), getattr(ref, name)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        np.testing.assert_allclose(a, b, rtol=1e-5 if not X64 else 1e-9, atol=2e-7)
    new = rng.uniform(size=(3, 17)).astype(DT)
    got_apply, want_apply, answered = both(lambda: ref(new))
    assert answered == [True]
    assert_same(got_apply, want_apply, exact=True)


@pytest.mark.parametrize(
    "n", [60, 600, 5000, pytest.param(40000, marks=pytest.mark.slow)]  # > HOST_MAX too
)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kwargs", [{}, {"knots": 5, "folds": 3, "eps": 0.01}])
def test_fit_spline_and_its_map_equal_kernel(n, weighted, kwargs):
    # Each fold x penalty objective is strictly convex: the host's float64 Newton and
    # the kernel's solver reach the same optima. In float32 the kernel's normal
    # equations lose ~4 digits (the cubic columns reach ~1e2), so the calibrated
    # probabilities agree to 2e-3 (tests/test_spline.py's tolerance against numpy), and
    # the penalty grid is spread out so that float32 rounding cannot flip the choice.
    rng = np.random.default_rng(n + 2 * weighted)
    p = rng.uniform(0.02, 0.98, size=n).astype(DT)
    y = (rng.uniform(size=n) < p.astype(np.float64) ** 2).astype(DT)
    w = rng.integers(0, 3, size=n).astype(DT) if weighted else None
    if not X64:
        kwargs = {**kwargs, "penalties": (1e-4, 1e-1, 1e2)}
    got, want, answered = both(lambda: fit_spline(y, p, weights=w, **kwargs))
    assert answered == [True]
    (out, _), (ref, _) = got, want
    for name in ("knots", "coef"):
        a, b = getattr(out, name), getattr(ref, name)
        assert (a.dtype, a.shape, a.weak_type) == (b.dtype, b.shape, b.weak_type)
    # knots: quantiles of the logit, computed by numpy's log here and XLA's there (an
    # ulp apart in float32)
    np.testing.assert_allclose(
        out.knots, ref.knots, **(dict(rtol=1e-12) if X64 else dict(rtol=1e-6, atol=1e-6))
    )
    if X64:
        np.testing.assert_allclose(out.coef, ref.coef, rtol=1e-6, atol=1e-9)
    new = rng.uniform(0.01, 0.99, size=(3, 17)).astype(DT)
    tol = dict(rtol=1e-9, atol=1e-12) if X64 else dict(rtol=0, atol=2e-3)
    np.testing.assert_allclose(out(new), ref(new), **tol)
    # the map alone, on the same calibrator: float64 inside against the kernel's dtype
    got_apply, want_apply, answered = both(lambda: ref(new))
    assert answered == [True]
    (a, _), (b, _) = got_apply, want_apply
    assert (a.dtype, a.shape, a.weak_type) == (b.dtype, b.shape, b.weak_type)
    assert a.devices() == b.devices() and a._committed == b._committed
    np.testing.assert_allclose(a, b, **(dict(rtol=1e-12, atol=1e-14) if X64 else SPLINE_MAP_TOL))


@pytest.mark.parametrize("n", [7, 600, 5000])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("estimate", ["frequency", "posterior"])
def test_fit_bbq_and_its_map_equal_kernel(n, weighted, estimate):
    # The edges are numpy's quantiles on both paths (bit for bit) and the counts
    # exact, so the bins hold the same observations. The model log-scores are sums of
    # lgamma of counts, ~N ln N in magnitude: the host sums them in float64, the kernel
    # in the dtype, so in float32 the weights (and the output) move by about
    # 1e-7 N ln N (fit_bbq's docstring), the tolerance here.
    rng = np.random.default_rng(n + 2 * weighted)
    p = np.round(rng.uniform(-0.1, 1.1, n) / 0.02) * 0.02  # ties, 0 and 1 included
    p = np.clip(p, 0, 1).astype(DT)
    y = (rng.uniform(size=n) < p.astype(np.float64) ** 2).astype(DT)
    w = rng.integers(0, 3, size=n).astype(DT) if weighted else None
    if weighted:
        w[:2] = 1  # a model range that is not empty
    got, want, answered = both(lambda: fit_bbq(y, p, weights=w, estimate=estimate))
    assert answered == [True]
    (out, _), (ref, _) = got, want
    assert (out.estimate, out.n_prime, out.c) == (ref.estimate, ref.n_prime, ref.c)
    for name in ("edges", "values", "weights"):
        a, b = getattr(out, name), getattr(ref, name)
        assert (a.dtype, a.shape, a.weak_type) == (b.dtype, b.shape, b.weak_type)
    np.testing.assert_array_equal(out.edges, ref.edges)
    np.testing.assert_allclose(out.values, ref.values, rtol=float_tol(), atol=ATOL)
    score_tol = 1e-12 if X64 else 1e-7 * n * np.log(n)
    np.testing.assert_allclose(out.weights, ref.weights, rtol=0, atol=score_tol)
    # a 2-D input (the kernel's map broke on one before this test), values on edges
    new = np.resize(np.r_[0.0, 1.0, p, rng.uniform(size=60)], 62).astype(DT).reshape(2, -1)
    np.testing.assert_allclose(out(new), ref(new), rtol=0, atol=score_tol)
    # the map alone, on the same calibrator
    got_apply, want_apply, answered = both(lambda: ref(new))
    assert answered == [True]
    assert_same(got_apply, want_apply)


@TWIN_EXAMPLES
@given(
    binary_data(),
    st.sampled_from([1, 7, "fd", "edges"]),
    st.sampled_from(["uniform", "quantile"]),
    st.booleans(),
    st.sampled_from(["jeffreys", None]),
)
def test_fit_histogram_binning_and_its_map_equal_kernel(data, bins, strategy, weighted, shrinkage):
    # the edges (weighted quantiles of integer weights included), the bins and each
    # bin's mean, raw or shrunk (one jeffreys_means for both paths): exactly; with
    # weights, the means to float tolerance (sums)
    y, p, w = data
    w = np.round(np.asarray(w) * 3) if weighted else None  # 0 to 3, some 0
    if bins == "edges":
        bins, strategy = [0.0, 0.3, 0.3, 0.55, 1.0], "uniform"  # a repeated edge: empty bin
    elif bins == "fd":
        strategy = "uniform"
    got, want, answered = both(
        lambda: fit_histogram_binning(
            y, p, bins=bins, strategy=strategy, weights=w, shrinkage=shrinkage
        )
    )
    assert answered == [want[1] is None]
    assert_same(got, want, exact=not weighted)
    if want[1] is None:
        np.testing.assert_array_equal(got[0].edges, want[0].edges)
        cal = want[0]
        for new in (p, np.reshape(p, (-1, 1)), [0.0, 0.3, 1.0]):
            got_apply, want_apply, answered = both(lambda c=cal, x=new: c(x))
            assert answered == [True]
            assert_same(got_apply, want_apply, exact=True)


@TWIN_EXAMPLES
@given(st.floats(min_value=1e-300, max_value=1e15))
def test_lgamma_equals_math_lgamma(x):
    # fit_bbq's host scores: Stirling's series at x + 8 and the recurrence down to x
    want = math.lgamma(x)
    # (measured over 3e5 points from 1e-300 to 1e15: at most 7.5e-15)
    from bayescal.classification._bbq import lgamma

    assert abs(lgamma(np.array([x]))[0] - want) <= 1e-14 * max(1.0, abs(want))


# The scaling fits: convex objectives, so the host's float64 Newton and the kernel's
# solver (in the dtype) reach the same optimum; the kernel stops at its objective's
# rounding level (32 eps relative), which moves well-determined parameters by ~1e-6 in
# float32 (measured: at most 5e-6 at N = 1e4) and ~1e-9 in float64. Predictions are
# compared at that precision, parameters 4x looser (the ODIR penalty's weak
# directions).
SCALING_PARAM_TOL = dict(rtol=1e-8, atol=1e-8) if X64 else dict(rtol=1e-4, atol=4e-5)
SCALING_PRED_TOL = dict(rtol=0, atol=2e-9) if X64 else dict(rtol=0, atol=1e-5)


def multiclass_data(n, k, seed):
    """Labels (every class present), logits ``[n, k]`` and their softmax."""
    from scipy.special import softmax

    rng = np.random.default_rng(seed)
    z = 2.0 * rng.normal(size=(n, k))
    truth = softmax(z / 1.5, axis=1).cumsum(axis=1)
    y = np.minimum((rng.uniform(size=(n, 1)) > truth).sum(axis=1), k - 1)
    y[:k] = np.arange(k)
    return y, z.astype(DT), softmax(z, axis=1).astype(DT)


def assert_same_fit(got, want, new):
    (out, err), (ref, ref_err) = got, want
    assert err is None and ref_err is None
    assert type(out) is type(ref)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(ref)
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref), strict=True):
        assert (a.dtype, a.shape, a.weak_type) == (b.dtype, b.shape, b.weak_type)
        assert a.devices() == b.devices() and a._committed == b._committed
        np.testing.assert_allclose(a, b, **SCALING_PARAM_TOL)
    with host.disabled():
        np.testing.assert_allclose(out(new), ref(new), **SCALING_PRED_TOL)
    # the map alone, on the same calibrator (float64 inside, rounded to the dtype)
    got_apply, want_apply, answered = both(lambda: ref(new))
    assert answered == [True]
    assert_same(got_apply, want_apply)


SCALING_FITS = {
    "vector": lambda y, z, p, w: fit_vector_scaling(y, z, weights=w),
    "matrix": lambda y, z, p, w: fit_matrix_scaling(y, z, weights=w),
    "matrix-odir": lambda y, z, p, w: fit_matrix_scaling(
        y, z, reg_lambda=0.05, reg_mu=0.01, weights=w
    ),
    "dirichlet": lambda y, z, p, w: fit_dirichlet(y, p, weights=w),
    "dirichlet-odir": lambda y, z, p, w: fit_dirichlet(
        y, p, reg_lambda=0.1, reg_mu=0.0, eps=1e-4, weights=w
    ),
    "dirichlet-l2": lambda y, z, p, w: fit_dirichlet(
        y, p, regularization="l2", reg_lambda=0.1, eps=1e-6, weights=w
    ),
}


@pytest.mark.parametrize("kind", list(SCALING_FITS))
@pytest.mark.parametrize("n, k", [(50, 2), (700, 3), (3000, 6)])
@pytest.mark.parametrize("weighted", [False, True])
def test_scaling_fits_equal_kernel(kind, n, k, weighted):
    y, z, p = multiclass_data(n, k, n + k + weighted)
    w = np.random.default_rng(n).integers(0, 3, size=n).astype(DT) if weighted else None
    if weighted:
        w[:k] = 1  # every class keeps a positive weight
    got, want, answered = both(lambda: SCALING_FITS[kind](y, z, p, w))
    assert answered == [True]
    _, z_new, p_new = multiclass_data(40, k, 7)
    assert_same_fit(got, want, p_new if kind.startswith("dirichlet") else z_new)


@pytest.mark.parametrize("n, k", [(50, 0), (700, 3), (3000, 6)])
@pytest.mark.parametrize("weighted", [False, True])
def test_fit_temperature_equals_kernel(n, k, weighted):
    y, z, _ = multiclass_data(n, max(k, 2), n + k)
    if k == 0:  # binary: 1-D logits of class 1
        z = z[:, 1] - z[:, 0]
    w = np.random.default_rng(n).integers(0, 3, size=n).astype(DT) if weighted else None
    got, want, answered = both(lambda: fit_temperature(y, z, weights=w))
    assert answered == [True]
    assert_same_fit(got, want, z[:30])


@pytest.mark.parametrize("n", [40, 600, 5000])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [None, 0.05])
def test_fit_beta_equals_kernel(n, weighted, eps):
    # fit_platt's problem on two features with a, b >= 0: the bound binds for some
    # draws (a or b exactly 0 on both paths)
    rng = np.random.default_rng(n + weighted)
    p = rng.uniform(0.01, 0.99, size=n).astype(DT)
    y = (rng.uniform(size=n) < p ** (1.3 if n != 600 else 0.4)).astype(DT)
    w = rng.integers(0, 3, size=n).astype(DT) if weighted else None
    got, want, answered = both(lambda: fit_beta(y, p, eps=eps, weights=w))
    assert answered == [True]
    (out, _), (ref, _) = got, want
    for name in ("a", "b"):
        if float(getattr(ref, name)) == 0:
            assert float(getattr(out, name)) == 0
    assert out.eps == ref.eps
    assert_same_fit(got, want, rng.uniform(size=(3, 17)).astype(DT))


def test_scaling_warnings_are_the_kernels():
    # separated classes (no finite optimum) and probabilities passed as logits: the
    # twins leave the call to the kernel path, which warns
    z = np.array([[3.0, 0.0], [0.0, 3.0], [2.0, 0.0], [0.0, 1.0]], DT)
    y = np.array([0, 1, 0, 1])
    for call, warning in (
        (lambda: fit_vector_scaling(y, z), RuntimeWarning),
        (lambda: fit_matrix_scaling(y, z), RuntimeWarning),
        (lambda: fit_temperature([0, 1, 1, 0], np.array([0.2, 0.9, 0.7, 0.6], DT)), UserWarning),
    ):
        with spy() as log, pytest.warns(warning):
            call()
        assert [answered for _, answered in log] == [False]


# float32: the kernel sums basis columns of ~1e2 in float32 before the sigmoid
SPLINE_MAP_TOL = dict(rtol=0, atol=1e-5)


# --------------------------------------------------------------------------- bad input
SPLINE_Y, SPLINE_P = np.arange(40) % 2, np.linspace(0.05, 0.95, 40)
SPLINE = fit_spline(SPLINE_Y, SPLINE_P, knots=4, folds=2)
BBQ = fit_bbq(SPLINE_Y, SPLINE_P)
HIST = fit_histogram_binning(SPLINE_Y, SPLINE_P)
CONFORMAL_Y, CONFORMAL_LOC = np.linspace(0, 1, 30), np.linspace(0, 1, 30) ** 2
CAL = reg.fit_conformal(CONFORMAL_Y, CONFORMAL_LOC)
CAL_SCALED = reg.fit_conformal(CONFORMAL_Y, CONFORMAL_LOC, np.ones(30))
ISO_R = reg.fit_isotonic_recalibrator(CONFORMAL_LOC)
ISO = fit_isotonic(CONFORMAL_Y > 0.5, CONFORMAL_LOC)
SIGMA = reg.fit_sigma_scaling(CONFORMAL_Y, CONFORMAL_LOC, np.ones(30))
PLATT = fit_platt(CONFORMAL_Y > 0.5, np.clip(CONFORMAL_LOC, 0.01, 0.99))
MC_Y, MC_Z, MC_P = multiclass_data(60, 3, 0)
VECTOR = fit_vector_scaling(MC_Y, MC_Z)
MATRIX = fit_matrix_scaling(MC_Y, MC_Z)
DIRICHLET = fit_dirichlet(MC_Y, MC_P)
TEMPERATURE = fit_temperature(MC_Y, MC_Z)
BETA = fit_beta([0, 0, 1, 0, 1, 1], [0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
BAD = (
    [
        (fn, args, kwargs)
        for fn, args, kwargs, *_ in CLASSIFICATION_CASES
        if fn in (expected_calibration_error, brier_score, log_loss)
    ]
    + [
        (brier_score, ([0, np.inf], [0.2, 0.6]), {}),  # inf * inf == inf: not a label
        (log_loss, ([np.inf, 1], [0.2, 0.6]), {}),
        (expected_calibration_error, ([np.inf], [0.5]), {}),
        (brier_score, ([0, 1], [0.2, 0.6]), {"weights": [-1.0, 2.0]}),
        (brier_score, ([0, 1], [0.2, 0.6]), {"weights": [0.0, 0.0]}),
        (brier_score, ([0, 1], [0.2, 0.6]), {"weights": [1.0, np.inf]}),
        (brier_score, ([0, 1], [0.2, 0.6]), {"weights": [1.0]}),
        (brier_score, ([0, 1], [0.2, 0.6]), {"reduction": "avg"}),
        (brier_score, ([0, 1],), {"logits": [0.0, np.inf]}),
        (log_loss, ([0, 1], [0.2, 0.6]), {"eps": 0.7}),
        (log_loss, ([0, 1],), {"logits": [0.0, 1.0], "eps": 1e-3}),
        (log_loss, ([0, 0.5], [0.2, 0.6]), {}),
        (
            expected_calibration_error,
            ([0, 1], [0.2, 0.6]),
            {"debias": True, "weights": [1, 1]},
        ),
        (expected_calibration_error, ([0, 1], [0.2, 0.6]), {"bins": True}),
        (
            expected_calibration_error,
            ([0, 1], [0.2, 0.6]),
            {"bins": "fd", "strategy": "quantile"},
        ),
        (
            expected_calibration_error,
            ([0, 1], [0.2, 0.6]),
            {"bins": [0, 1], "strategy": "quantile"},
        ),
        (expected_calibration_error, ([0, 1], [0.2, 0.6]), {"bins": [0.0, np.nan, 1.0]}),
        (expected_calibration_error, ([0, 1], [0.2, 0.6]), {"method": "exact"}),
        (reg.fit_conformal, (CONFORMAL_Y, CONFORMAL_LOC), {"alpha": 1.0}),
        (reg.fit_conformal, (CONFORMAL_Y, CONFORMAL_LOC), {"alpha": "0.1"}),
        (reg.fit_conformal, (CONFORMAL_Y, CONFORMAL_LOC), {"alpha": 0.01}),
        (reg.fit_conformal, (CONFORMAL_Y, CONFORMAL_LOC, -np.ones(30)), {}),
        (reg.fit_conformal, (CONFORMAL_Y, CONFORMAL_LOC[:-1]), {}),
        (reg.fit_conformal, (np.r_[np.nan, CONFORMAL_Y[1:]], CONFORMAL_LOC), {}),
        (reg.fit_conformal, (np.r_[np.inf, CONFORMAL_Y[1:]], CONFORMAL_LOC), {}),
        (reg.fit_conformal, ([], []), {}),
        (reg.fit_conformal, ("abc", CONFORMAL_LOC), {}),
        (
            reg.fit_conformalized_quantile,
            (CONFORMAL_Y, CONFORMAL_LOC, CONFORMAL_LOC[:-1]),
            {},
        ),
        (
            reg.fit_conformalized_quantile,
            (CONFORMAL_Y, CONFORMAL_LOC, np.r_[np.nan, CONFORMAL_LOC[1:]]),
            {},
        ),
        (CAL_SCALED, (CONFORMAL_LOC,), {}),
        (CAL, (CONFORMAL_LOC, np.ones(30)), {}),
        (CAL_SCALED, (CONFORMAL_LOC, np.zeros(30)), {}),
        (CAL_SCALED, (CONFORMAL_LOC, np.ones(7)), {}),
        (fit_isotonic, ([0, 0.5, 1], [0.2, 0.6, 0.7]), {}),
        (fit_isotonic, ([0, 1, 1], [0.2, np.nan, 0.7]), {}),
        (fit_isotonic, ([0, 1, 1], [0.2, 0.6]), {}),
        (fit_isotonic, ([], []), {}),
        (fit_isotonic, ([0, 1, 1], [0.2, 0.6, 0.7]), {"prior": -1.0}),
        (reg.fit_isotonic_recalibrator, (np.ones(50),), {}),
        (reg.fit_isotonic_recalibrator, ([0.2, 0.2, 1.0, 0.0],), {}),
        (reg.fit_isotonic_recalibrator, ([0.2, 0.4, 1.5],), {}),
        (reg.fit_isotonic_recalibrator, ([0.2, 0.4, np.nan],), {}),
        (reg.fit_isotonic_recalibrator, (np.full((2, 3), 0.5),), {}),
        (reg.fit_isotonic_recalibrator, ([],), {}),
        (ISO_R, ([0.2, 1.5],), {}),
        (ISO_R.inverse, ([0.2, -0.5],), {}),
        (ISO_R, ([0.2, np.nan],), {}),
        (ISO, ([0.2, np.inf],), {}),
        (ISO, ([],), {}),
        (reg.pit_normal, ([0.0, 1.0], [0.0, 0.0], [1.0, 0.0]), {}),
        (reg.pit_normal, ([0.0, np.nan], [0.0, 0.0], [1.0, 1.0]), {}),
        (reg.pit_normal, ([0.0, 1.0], [0.0], [1.0, 1.0, 1.0]), {}),
        (reg.crps_normal, ([0.0, 1.0], [0.0, 0.0], [1.0, -1.0]), {}),
        (reg.crps_normal, ([0.0, 1.0], [0.0, 0.0], [1.0, 1.0]), {"reduction": "avg"}),
        (reg.crps_normal, ([0.0, 1.0], [0.0, 0.0], [1.0, 1.0]), {"weights": [0.0, 0.0]}),
        (reg.sharpness, ([1.0, 0.0],), {}),
        (reg.calibration_curve, ([0.2, 1.5],), {}),
        (reg.calibration_error, ([0.2, 0.5],), {"norm": "l3"}),
        (reg.calibration_error, ([0.2, 0.5],), {"num_levels": 1}),
        (reg.miscalibration_area, ([0.2, np.nan],), {}),
        (reg.miscalibration_area, ([0.2, 0.5],), {"kind": "central"}),
        (reg.fit_sigma_scaling, ([1.0, 2.0], [1.0, 2.0], [1.0, 1.0]), {}),
        (reg.fit_sigma_scaling, ([1.0, 2.0], [0.0, 2.0], [1.0, 0.0]), {}),
        (SIGMA, ([1.0, -2.0],), {}),
        (reliability_curve, ([0, 1], [0.2, 1.6]), {}),
        (reliability_curve, ([0, 1], [0.2, 0.6]), {"return_edges": 1}),
        (fit_platt, ([0, 0], [0.2, 0.6]), {}),
        (fit_platt, ([0, 1], [0.0, 0.6]), {}),
        (fit_platt, ([0, 1], [0.2, 0.6]), {"input": "logit"}),
        (PLATT, ([0.2, 1.5],), {}),
        (calibration_slope_intercept, ([0, 1], [0.0, 0.6]), {}),
        (calibration_slope_intercept, ([0, 0], [0.2, 0.6]), {}),
        (calibration_slope_intercept, ([0, 1], [0.2, 0.6]), {"eps": 0.7}),
        (hosmer_lemeshow, ([0, 1, 1], [0.2, 0.6, 0.7]), {"bins": 2}),
        (hosmer_lemeshow, ([0, 1, 1], [0.2, 0.6, 0.7]), {"dof": 0}),
        (hosmer_lemeshow, ([0, 1, 1], [0.2, 0.6, 1.7]), {}),
        (spiegelhalter_z, ([0, 1, 2], [0.2, 0.6, 0.7]), {}),
        (spiegelhalter_z, ([0, 1], [0.2, 0.6]), {"weights": [-1.0, 1.0]}),
        (fit_scaling_binning, ([0, 1, 0, 1], [0.2, 0.6, 0.3, 0.7]), {"bins": 3}),
        (fit_scaling_binning, ([0, 0, 1, 1], [0.2, 0.6, 0.3, 0.7]), {"bins": 1}),
        (fit_scaling_binning, ([0, 1, 0, 1], [0.0, 0.6, 0.3, 0.7]), {"bins": 1}),
        (fit_scaling_binning, ([0, 1, 0, 1], [0.2, 0.6, 0.3, 0.7]), {"split": 1.5}),
        (fit_spline, (np.zeros(40), SPLINE_P), {}),
        (fit_spline, (SPLINE_Y, SPLINE_P), {"folds": 21}),
        (fit_spline, (SPLINE_Y, np.r_[0.0, SPLINE_P[1:]]), {}),
        (fit_spline, (SPLINE_Y, SPLINE_P), {"knots": 2}),
        (fit_spline, (SPLINE_Y, SPLINE_P), {"penalties": [1.0, -1.0]}),
        (fit_spline, (SPLINE_Y, SPLINE_P), {"weights": -np.ones(40)}),
        (fit_histogram_binning, ([0, 1, 0], [0.2, 0.6, 1.3]), {}),
        (fit_histogram_binning, ([0, 1, 0], [0.2, 0.6, 0.3]), {"bins": 0}),
        (fit_histogram_binning, ([0, 1, 0], [0.2, 0.6, 0.3]), {"strategy": "kmeans"}),
        (fit_histogram_binning, ([0, 1, 2], [0.2, 0.6, 0.3]), {}),
        (fit_histogram_binning, ([0, 1, 0], [0.2, 0.6, 0.3]), {"shrinkage": "laplace"}),
        (HIST, ([0.2, 1.5],), {}),
        (fit_bbq, ([0, 1, 0], [0.2, 0.6, 0.3]), {"c": 0.5}),
        (fit_bbq, ([0, 1, 0], [0.2, 0.6, 1.3]), {}),
        (fit_bbq, ([0, 1, 0], [0.2, 0.6, 0.3]), {"estimate": "mean"}),
        (fit_bbq, ([0, 1, 0], [0.2, 0.6, 0.3]), {"weights": [1.0, -1.0, 1.0]}),
        (BBQ, ([0.2, 1.5],), {}),
        (SPLINE, ([0.2, 1.5],), {}),
        (fit_vector_scaling, ([0, 0, 1], np.eye(3)), {}),  # class 2 absent
        (fit_vector_scaling, ([0, 1, 2], np.eye(3)), {"weights": [1.0, 1.0, 0.0]}),
        (fit_vector_scaling, ([0, 1, 2], np.r_[np.eye(2), [[np.nan, 0]]]), {}),
        (fit_vector_scaling, ([0, 1, 3], np.eye(3)), {}),
        (fit_vector_scaling, ([0, 1, 1.5], np.eye(3)), {}),
        (fit_vector_scaling, ([0, 1], np.eye(3)), {}),
        (fit_matrix_scaling, ([0, 1, 2], np.eye(3)), {"reg_lambda": -1.0}),
        (fit_matrix_scaling, ([0, 1, 2], np.eye(3)), {"reg_mu": "0.1"}),
        (fit_matrix_scaling, ([0, 1, 2], np.ones((3, 1))), {}),
        (fit_dirichlet, ([0, 1, 2], np.eye(3)), {}),  # log(0)
        (fit_dirichlet, ([0, 1, 2], np.full((3, 3), 0.3)), {}),  # rows sum to 0.9
        (fit_dirichlet, ([0, 1, 2], np.full((3, 3), 1 / 3)), {"regularization": "l1"}),
        (
            fit_dirichlet,
            ([0, 1, 2], np.full((3, 3), 1 / 3)),
            {"regularization": "l2", "reg_mu": 0.1},
        ),
        (fit_dirichlet, ([0, 1, 2], np.full((3, 3), 1 / 3)), {"eps": 0.7}),
        (fit_dirichlet, ([0, 1, 1], np.full((3, 3), 1 / 3)), {"eps": 1e-3}),
        (fit_temperature, ([0, 1, 2], 3 * np.eye(3)), {}),  # every example right
        (fit_temperature, ([1, 2, 0], 3 * np.eye(3)), {}),  # no information
        (fit_temperature, ([0, 1, 3], 3 * np.eye(3)), {}),
        (fit_temperature, ([0, 0, 0], [1.0, -2.0, 3.0]), {}),
        (fit_temperature, ([0, 1, 2], 3 * np.eye(3)), {"weights": [1.0, -1.0, 1.0]}),
        (VECTOR, (np.eye(2),), {}),
        (VECTOR, ([[0.0, np.inf, 1.0]],), {}),
        (MATRIX, (np.ones(3),), {}),
        (MATRIX, ([[0.0, np.nan, 1.0]],), {}),
        (DIRICHLET, (np.eye(3),), {}),
        (DIRICHLET, ([[0.5, 1.5, 0.5]],), {}),
        (TEMPERATURE, ([np.nan, 1.0],), {}),
        (TEMPERATURE, (np.ones((2, 2, 2)),), {}),
        (BETA, ([0.2, 1.5],), {}),
        (fit_beta, ([0, 0, 0], [0.2, 0.6, 0.3]), {}),
        (fit_beta, ([0, 1, 0], [0.0, 0.6, 0.3]), {}),
        (fit_beta, ([0, 1, 0], [0.2, 0.6, 0.3]), {"eps": 0.7}),
        (fit_beta, ([0, 1, 0], [0.2, 0.6, 1.3]), {}),
        (SPLINE, ([0.0, 0.5],), {}),
    ]
)


@pytest.mark.parametrize("fn, args, kwargs", BAD)
def test_bad_input_is_left_to_the_kernel(fn, args, kwargs):
    """No twin answers a bad input: it leaves the call to the kernel path, whose error
    the user gets (a twin cannot raise one of its own: ``host._attempt`` takes any
    exception for "leave it"). The kernel's errors for these inputs are the subject of
    the bad-input tests, which the accelerator rehearsal runs without twins; running
    the kernel here too compiled a program per row (163 of this file's 510 s)."""
    with spy(stop=True) as log:
        try:
            fn(*args, **kwargs)
        except Declined:
            pass
        except Exception:  # refused before any twin was tried
            assert not log
        else:
            pytest.fail(f"a bad input was answered: {log}")
    assert not any(answered for _, answered in log)


def test_subnormal_values_give_what_the_kernel_gives():
    # XLA flushes subnormal floats to 0, NumPy keeps them: the host path must not differ.
    tiny = np.finfo(DT).tiny
    p = np.array([tiny / 4, 0.5, 1.0, 0.0], DT)
    y = np.array([1.0, 0.0, 1.0, 0.0], DT)
    for call in (
        lambda: log_loss(y, p),
        lambda: log_loss(y, p, reduction="none"),
        lambda: expected_calibration_error(y, p, strategy="quantile", bins=3),
        lambda: brier_score(y, p, weights=np.array([tiny / 2, 1, 1, 1], DT)),
        lambda: reg.fit_conformal(p, np.zeros(4, DT), alpha=0.2),
        lambda: reg.fit_conformal(p * 4, 3 * p, alpha=0.2),
        lambda: reg.fit_conformalized_quantile(p, -p, 2 * p, alpha=0.2),
        lambda: CAL(p),
        lambda: CAL_SCALED(p, np.full(4, tiny, DT)),
        lambda: fit_isotonic(y, p),
        lambda: reg.fit_isotonic_recalibrator(p),
        lambda: ISO_R(p),
        lambda: ISO(p),
    ):
        got, want, _ = both(call)
        assert_same(got, want, exact=True)


# --------------------------------------------------------------------------- where not
def test_traced_inputs_take_the_kernel_path():
    rng = np.random.default_rng(1)
    p = jnp.asarray(rng.uniform(size=(3, 40)), DT)
    y = (p > 0.5).astype(DT)
    yy, mu = jnp.asarray(rng.normal(size=(2, 40)), DT)
    with spy() as log:
        jitted = [
            jax.jit(brier_score)(y[0], p[0]),
            jax.jit(lambda a, b: log_loss(a, b))(y[0], p[0]),
            jax.jit(lambda a, b: expected_calibration_error(a, b, strategy="quantile"))(
                y[0], p[0]
            ),
            jax.jit(lambda a, b: reg.fit_conformal(a, b).quantile)(yy, mu),
            jax.jit(lambda c, m: c(m)[0])(CAL, mu),
            jax.jit(lambda a, b: fit_isotonic(a, b).values)(y[0], p[0]),
            jax.jit(lambda c, a: c(a))(ISO, p[0]),
            jax.jit(lambda a: reg.fit_isotonic_recalibrator(a).calibrated)(p[0]),
            jax.jit(lambda c, a: c.inverse(a))(ISO_R, p[0]),
        ]
        mapped = jax.vmap(expected_calibration_error)(y, p)
    assert log and not any(answered for _, answered in log)
    eager = [
        brier_score(y[0], p[0]),
        log_loss(y[0], p[0]),
        expected_calibration_error(y[0], p[0], strategy="quantile"),
        reg.fit_conformal(yy, mu).quantile,
        CAL(mu)[0],
        fit_isotonic(y[0], p[0]).values,
        ISO(p[0]),
        reg.fit_isotonic_recalibrator(p[0]).calibrated,
        ISO_R.inverse(p[0]),
    ]
    for a, b in zip(jitted, eager, strict=True):
        np.testing.assert_allclose(a, b, rtol=float_tol(), atol=ATOL)
    for i in range(3):
        np.testing.assert_allclose(
            mapped[i], expected_calibration_error(y[i], p[i]), rtol=float_tol(), atol=ATOL
        )


def test_above_host_max_the_kernel_runs():
    n = host.HOST_MAX + 1
    rng = np.random.default_rng(2)
    p = rng.uniform(size=n).astype(DT)
    y = (rng.uniform(size=n) < p).astype(DT)
    with spy() as log:
        brier_score(y, p)
        expected_calibration_error(y, p)
        reg.fit_conformal(y, p)
        CAL(p)
    assert [name for name, _ in log] == [
        "brier_score",
        "expected_calibration_error",
        "fit_conformal",
        "conformal_interval",
    ]
    assert not any(answered for _, answered in log)
    with spy() as log:
        brier_score(y[:-1], p[:-1])
    assert log == [("brier_score", True)]


def test_not_active_with_another_default_device_or_disabled():
    y, p = np.array([0.0, 1.0]), np.array([0.3, 0.8])
    with spy() as log:
        with jax.default_device(jax.devices("cpu")[0]):
            brier_score(y, p)
        with host.disabled():
            brier_score(y, p)
            assert not host.active()
        assert host.active()
        brier_score(y, p)
    assert log == [("brier_score", True)]


def test_masked_arrays_and_other_types_go_to_the_kernel_path():
    y, p = np.array([0.0, 1.0, 1.0]), np.ma.masked_array([0.3, 0.8, 0.5], [0, 0, 1])
    with spy() as log:
        outcome(lambda: brier_score(y, p))
        brier_score(y, np.array([0.3, 0.8, 0.5], np.float16))
    assert log == [("brier_score", False), ("brier_score", True)]


def test_device_put_matches_jnp_asarray():
    for x in (np.float32(0.5), np.arange(5, dtype=DT), np.zeros((2, 3), np.float32)):
        a, b = host._device(np.asarray(x)), jnp.asarray(np.asarray(x))
        assert type(a) is type(b)
        assert (a.dtype, a.shape, a.weak_type, a._committed) == (
            b.dtype,
            b.shape,
            b.weak_type,
            b._committed,
        )
        assert a.devices() == b.devices()
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [1, 7, 1000, 70_000])  # 70,000 > SMALL_ROW: scipy's PAV
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("increasing", [True, False])
def test_isotonic_regression_twin_equals_the_kernel(n, weighted, increasing):
    # core.isotonic_regression's twin runs the kernel's own host callback on one row
    # (any length up to BUCKET_MAX, not HOST_MAX), without the program around it
    import bayescal.core as core

    rng = np.random.default_rng(n)
    y = (np.linspace(0, 1, n) + rng.normal(0, 0.3, n)).astype(DT)
    y[n // 3 : n // 3 + n // 10] = y[n // 3]  # ties
    w = rng.uniform(0.5, 2, n).astype(DT) if weighted else None
    got, want, answered = both(
        lambda: core.isotonic_regression(y, weights=w, increasing=increasing)
    )
    assert answered == [True]
    assert_same(got, want)
    fit = np.asarray(got[0])
    assert np.all(np.diff(fit) >= 0) if increasing else np.all(np.diff(fit) <= 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(y=np.ones((2, 5))),  # rows of a batch: the kernel
        dict(y=np.array([1.0, np.nan])),  # its error message
        dict(y=np.array([1.0, 2.0]), weights=np.array([1.0, 0.0])),
        dict(y=np.array([1.0, 2.0]), weights=np.array([1.0, 2.0, 3.0])),
        dict(y=np.array([1.0, 2.0]), increasing=1),
    ],
)
def test_isotonic_regression_twin_leaves_other_inputs_to_the_kernel(kwargs):
    import bayescal.core as core

    got, want, answered = both(lambda: core.isotonic_regression(**kwargs))
    assert answered == [False]
    assert_same(got, want)
