"""bayescal's vectorized PSIS (``bayescal/_psis.py``) against ArviZ's.

References: ``arviz.psislw`` (arviz 0.23, ``arviz/stats/stats.py``, on the log ratios
``-log_likelihood``) under ``make test``; ``arviz_stats.base.array_stats.psislw``
(arviz_stats 1.3, on the log-likelihood) under the python3.12 environment with arviz
1.x. Both implement Vehtari, Simpson, Gelman, Yao & Gabry (2024), "Pareto smoothed
importance sampling", JMLR 25(72), with the generalized Pareto fit of Zhang & Stephens
(2009), Technometrics 51(3). ``arviz_stats`` raises ``ValueError`` for a row whose tail
is flat or shorter than 5 draws; the reference then gives what bayescal documents (and
arviz 0.x gives): the raw weights, normalized, and k = inf.

Tolerance: the arithmetic is ArviZ's step for step, so the two agree to rounding: a few
ulps of the log weights (measured: at most ~4e-15 absolute) and of k (~1e-15). The tests
ask for 1e-12, well below any difference of rule (a tail one draw longer moves k by
~1e-2) and above the ulps that the order of a few sums moves.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bayescal._psis import psislw, tail_length
from bayescal.arviz import _psis_rule, _psislw
from tests import _arviz_compat as azc

RULE = "arviz1" if azc.AZ1 else "arviz0"
TOL = 1e-12


def _reference(ll, r_eff):
    """ArviZ's PSIS of each row of ``ll`` ``[N, S]``: log weights ``[N, S]``, k ``[N]``."""
    if not azc.AZ1:
        lw, k = azc.az.psislw(-ll, reff=r_eff)
        return np.asarray(lw), np.asarray(k)
    from arviz_stats.base import array_stats

    lw, k = np.empty_like(ll), np.empty(ll.shape[0])
    for i, row in enumerate(ll):
        try:
            lw[i], k[i] = array_stats.psislw(row, r_eff=r_eff, axis=-1)
        except ValueError as err:  # a flat or short tail: raw weights, k = inf
            assert "tail" in str(err)
            x = -row - np.max(-row)
            lw[i], k[i] = x - np.log(np.sum(np.exp(x))), np.inf
    return lw, k


def _assert_equal_to_arviz(ll, r_eff):
    lw, k = psislw(ll, r_eff, rule=RULE)
    ref_lw, ref_k = _reference(ll, r_eff)
    assert lw.shape == ll.shape and k.shape == ll.shape[:-1]
    np.testing.assert_array_equal(np.isnan(k), np.isnan(ref_k))
    np.testing.assert_array_equal(np.isposinf(k), np.isposinf(ref_k))
    fin = np.isfinite(ref_k)
    np.testing.assert_allclose(k[fin], ref_k[fin], rtol=0, atol=TOL)
    # draw for draw, tied draws too (which of them gets which smoothed value follows
    # NumPy's sort, called on the same values as ArviZ calls it)
    np.testing.assert_allclose(lw, ref_lw, rtol=0, atol=TOL)
    return k


@pytest.mark.parametrize("num_draws", [10, 100, 1000])
@pytest.mark.parametrize("r_eff", [1.0, 0.4, 2.5])
def test_random_rows_equal_arviz(num_draws, r_eff):
    rng = np.random.default_rng(num_draws)
    scale = rng.uniform(0.05, 4.0, size=(60, 1))  # from nearly flat to heavy-tailed
    ll = rng.normal(size=(60, num_draws)) * scale
    k = _assert_equal_to_arviz(ll, r_eff)
    if num_draws == 10:  # a tail of 2 draws is not fitted, by either ArviZ
        assert np.all(k == np.inf)
    else:
        assert np.all(np.isfinite(k)) and np.any(k > 0.7) and np.any(k < 0.5)


@pytest.mark.parametrize("num_draws", [100, 1000])
def test_normal_model_rows_equal_arviz(num_draws):
    # y_i ~ Normal(mu, 1) with draws of mu from its posterior under a flat prior, plus
    # outliers; the farthest one's leave-one-out weights are heavy-tailed (k > 0.7)
    rng = np.random.default_rng(7)
    y = np.concatenate([rng.normal(size=20), [-8.0, 12.0, 20.0]])
    mu = rng.normal(y.mean(), 1 / np.sqrt(y.size), size=num_draws)
    ll = -0.5 * (y[:, None] - mu[None, :]) ** 2 - 0.5 * np.log(2 * np.pi)
    k = _assert_equal_to_arviz(ll, 1.0)
    assert np.all(k[:20] < 0.7) and k[-1] > 0.7


@pytest.mark.parametrize("r_eff", [1.0, 0.7])
def test_heavy_tails_equal_arviz(r_eff):
    # log ratios of a lognormal with a large scale: Pareto k well above 0.7
    rng = np.random.default_rng(11)
    ll = -rng.normal(size=(50, 400)) * rng.uniform(2.0, 8.0, size=(50, 1))
    k = _assert_equal_to_arviz(ll, r_eff)
    assert np.mean(k > 0.7) > 0.5


@pytest.mark.parametrize("num_draws", [100, 1000])
def test_ties_and_constant_rows_equal_arviz(num_draws):
    rng = np.random.default_rng(13)
    ll = rng.normal(size=(40, num_draws))
    ll[0] = 0.25  # constant: no tail to fit, uniform weights, k = inf
    ll[1, : num_draws // 2] = 3.0  # the smaller half of the ratios tied (the body)
    ll[2, : num_draws // 2] = -5.0  # the larger half of the ratios tied (a flat tail)
    ll[3] = np.round(ll[3], 1)  # many ties, at the cutoff and inside the tail
    ll[4] = np.round(ll[4] * 3) / 3  # coarser still
    ll[5, np.argsort(ll[5])[: num_draws // 4 + 3]] = ll[5].min()  # ties at the top ratios
    ll[6:10] = np.round(ll[6:10], 2)
    k = _assert_equal_to_arviz(ll, 1.0)
    lw, _ = psislw(ll, 1.0, rule=RULE)
    assert k[0] == np.inf and k[2] == np.inf
    np.testing.assert_allclose(lw[0], -np.log(num_draws), rtol=0, atol=1e-14)


def test_repeated_mcmc_draws_equal_arviz():
    # Metropolis-like chains repeat a draw while they stay put: tied log-likelihoods
    # inside the tail, whose weights the LOO-PIT pairs with different predictive draws
    rng = np.random.default_rng(23)
    theta = np.repeat(rng.normal(size=300), rng.integers(1, 6, size=300))[:800]
    y = np.concatenate([rng.normal(size=30), [4.0, -5.0]])
    ll = -0.5 * (y[:, None] - theta[None, :]) ** 2
    assert np.unique(ll[0]).size < ll.shape[1]
    _assert_equal_to_arviz(ll, 0.3)


def test_centered_eight_equals_arviz():
    # a real posterior (bundled with ArviZ): the centered eight schools' chains stick,
    # so the log-likelihood repeats values; r_eff as loo_pit computes it
    import bayescal.arviz as baz

    data = azc.az.load_arviz_data("centered_eight")
    ll_da = azc.group(data, "log_likelihood")["obs"]
    ll = ll_da.stack(sample=("chain", "draw")).transpose("school", "sample").values
    r_eff = baz._relative_ess(azc.group(data, "posterior"), ll.shape[-1])
    _assert_equal_to_arviz(ll, r_eff)


def test_extreme_log_likelihoods_equal_arviz():
    # ratios far below the maximum (below log(tiny) relative to it: arviz 0.x floors
    # its cutoff there) and large offsets
    rng = np.random.default_rng(17)
    ll = rng.normal(size=(20, 200)) * 300.0 + rng.normal(size=(20, 1)) * 1e4
    _assert_equal_to_arviz(ll, 1.0)


def test_shapes_dtypes_and_wrapper():
    rng = np.random.default_rng(19)
    ll = rng.normal(size=(2, 3, 150)).astype(np.float32)
    lw, k = _psislw(ll, 1.0)
    assert lw.shape == (2, 3, 150) and k.shape == (2, 3)
    assert lw.dtype == np.float64 and k.dtype == np.float64
    flat_lw, flat_k = psislw(ll.reshape(6, 150).astype(np.float64), 1.0, rule=_psis_rule())
    np.testing.assert_array_equal(lw.reshape(6, 150), flat_lw)
    np.testing.assert_array_equal(k.reshape(6), flat_k)
    one_lw, one_k = psislw(ll[0, 0], 1.0)
    assert one_lw.shape == (150,) and one_k.shape == ()
    assert _psis_rule() == RULE


def test_tail_length_rules():
    # arviz 0.x: ceil(min(S / 5, 3 sqrt(S / r_eff))); arviz_stats: floor(3 sqrt(S / r_eff))
    # when S r_eff > 225, else floor(S / 5). 3 sqrt(1000) = 94.87, 3 sqrt(100 / 0.5) = 42.4
    assert tail_length(1000, 1.0, "arviz0") == 95
    assert tail_length(1000, 1.0, "arviz1") == 94
    assert tail_length(100, 0.5, "arviz0") == 20 == tail_length(100, 0.5, "arviz1")
    assert tail_length(101, 1.0, "arviz0") == 21 and tail_length(101, 1.0, "arviz1") == 20


def test_bad_rule():
    with pytest.raises(ValueError, match="rule must be one of"):
        psislw(np.zeros((2, 50)), 1.0, rule="arviz2")
    with pytest.raises(ValueError, match="rule must be one of"):
        tail_length(50, 1.0, "loo")


@settings(max_examples=60, deadline=None)
@given(
    ll=hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(2, 300)),
        elements=st.floats(-30, 30, allow_nan=False, width=64),
    ),
    r_eff=st.floats(0.2, 3.0),
    rule=st.sampled_from(["arviz0", "arviz1"]),
)
def test_weights_normalized_and_monotone_in_the_ratios(ll, r_eff, rule):
    lw, k = psislw(ll, r_eff, rule=rule)
    assert np.all(np.isfinite(lw)) and k.shape == ll.shape[:1]
    np.testing.assert_allclose(np.exp(lw).sum(axis=-1), 1.0, rtol=1e-12)
    for ratios, w in zip(-ll, lw, strict=True):
        # a larger raw ratio never gets a smaller weight (tied ratios may differ). The
        # ratios are compared as PSIS sees them, less their maximum: that subtraction
        # can round distinct ratios to one value (1 - 5e-190 - 1 = -1)
        values, group = np.unique(ratios - np.max(ratios), return_inverse=True)
        lo = np.full(values.size, np.inf)
        hi = np.full(values.size, -np.inf)
        np.minimum.at(lo, group, w)
        np.maximum.at(hi, group, w)
        assert np.all(hi[:-1] <= lo[1:] + 1e-12)
        # and the largest raw ratio (one of them, if tied) keeps the largest weight
        assert hi[-1] == np.max(w)
