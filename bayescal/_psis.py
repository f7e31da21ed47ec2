"""Pareto-smoothed importance sampling (PSIS) for all observations at once, in NumPy.

The LOO-PIT (``bayescal.arviz.loo_pit``, ``bayescal.numpyro.loo_pit``) weights the
posterior draws of each observation by PSIS (Vehtari, Simpson, Gelman, Yao & Gabry
2024, "Pareto smoothed importance sampling", JMLR 25(72)). ArviZ computes them one
observation at a time in a Python loop; here every step is an array operation over
the rows, and the only loop is over the distinct tail lengths (one length for all rows
unless some rows have ties at the cutoff).

For each row of log importance ratios ``r = -log_likelihood`` (``S`` draws):

1. shift by the row's maximum (the largest raw log weight becomes 0) and sort;
2. take the right tail of the ``M`` largest ratios and the cutoff below it;
3. fit a generalized Pareto distribution to ``exp(tail) - exp(cutoff)`` by the
   empirical Bayes estimate of Zhang & Stephens (2009, Technometrics 51(3)): a grid of
   ``m = 30 + floor(sqrt(M))`` candidates ``b`` (``theta`` in the paper), weighted by
   their profile likelihood, and the posterior mean of ``b``; then the weakly
   informative prior of Vehtari et al. on the shape, ``k <- (M k + 5) / (M + 10)``
   (10 pseudo-observations at ``k = 0.5``);
4. replace the tail by the fitted quantiles at ``(j - 1/2) / M``, ``j = 1..M`` (the
   expected order statistics), in the order of the raw ratios, truncated at the
   largest raw log weight;
5. normalize by the row's logsumexp.

Two rules, for the two ArviZ generations the LOO-PIT tests compare with:

``"arviz0"`` (``arviz.psislw``, arviz 0.x)
    ``M = ceil(min(S / 5, 3 sqrt(S / r_eff)))``; the cutoff is the ``(M + 1)``-th
    largest ratio, raised to ``log(tiny)`` (the smallest normal float64) if below it;
    the tail is the ratios *strictly above* the cutoff (fewer than ``M`` when the
    cutoff is tied). A tail of 4 or fewer ratios is not fitted: the row keeps its raw
    weights and gets ``k = inf``.
``"arviz1"`` (``arviz_stats``' ``psislw``, arviz 1.x)
    ``M = floor(3 sqrt(S / r_eff))`` when ``S r_eff > 225``, else ``floor(S / 5)``
    (so ``M`` is one less than arviz 0.x's at e.g. ``S = 1000, r_eff = 1``); the tail is
    the last ``M`` ratios in sorted order, ties at the cutoff included, and the cutoff
    is the ratio sorted just below them (no ``log(tiny)`` floor). ``arviz_stats``
    raises ``ValueError`` for ``M < 5`` or a tail whose values are all equal; here
    such a row keeps its raw weights and gets ``k = inf`` (what arviz 0.x gives a
    flat tail, and what ``bayescal.arviz`` gave on arviz 1.x before this module). A
    tail whose first quartile equals its minimum is not fitted either: raw weights,
    ``k = nan``.

Both rules leave the weights raw (normalized) and return ``k = nan`` when the fit gives
``nan``, except that ``"arviz1"`` reports a ``nan`` shape from the fit's last step as
``k = inf``, as ``arviz_stats`` does.

Equal to ``arviz.psislw`` 0.23 and ``arviz_stats`` 1.3 (tests/test_psis.py, to 1e-12;
measured at most 7e-15 in the log weights and 9e-16 in k): the arithmetic is theirs
step for step, and the sums run over the same contiguous axes; what differs is the
order of a few sums (grid weights dropped as negligible are zeroed here, not removed)
and the normalization of the grid weights (``m`` exponentials, not ArviZ 0.x's
``m^2``), a few ulps. Among draws tied inside the tail, which one gets which smoothed
value follows NumPy's default (unstable) sort, called on the same values as ArviZ
calls it (the whole row for ``"arviz1"``, the tail in draw order for ``"arviz0"``), so
that the weights match ArviZ's draw for draw: MCMC draws repeat (a chain that stays
put), and the LOO-PIT depends on which of the repeated draws gets which weight.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["psislw", "tail_length"]

_RULES = ("arviz0", "arviz1")

# Elements of the [rows, m, max(M, m)] temporaries of the grid fit per block of rows.
_FIT_BLOCK_ELEMENTS = 1 << 21

_PRIOR_BS = 3.0  # Zhang & Stephens' grid scale: b spans up to 1 / (3 * first quartile)
_PRIOR_K = 10.0  # pseudo-observations of the weakly informative prior on k (at 0.5)
_EPS = np.finfo(np.float64).eps
_TINY = np.finfo(np.float64).tiny


def tail_length(num_draws: int, r_eff: float, rule: str = "arviz0") -> int:
    """Draws in the right tail that PSIS fits: ``M`` of ``S`` draws.

    Examples
    --------
    >>> tail_length(1000, 1.0), tail_length(1000, 1.0, "arviz1"), tail_length(100, 1.0)
    (95, 94, 20)
    """
    s = int(num_draws)
    if rule == "arviz0":
        return int(math.ceil(min(s / 5.0, 3 * (s / r_eff) ** 0.5)))
    if rule == "arviz1":
        if s * r_eff > 225:
            return int(math.floor(3 * (s / r_eff) ** 0.5))
        return int(math.floor(s / 5))
    raise ValueError(f"rule must be one of {_RULES}; got {rule!r}.")


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """``log(sum(exp(x)))`` over the last axis, shifted by the row maximum."""
    top = np.max(x, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return np.log(np.sum(np.exp(x - top), axis=-1)) + top[..., 0]


def _fit_gpd(tail: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Zhang & Stephens' estimate of the generalized Pareto ``(k, sigma)`` of each row of
    ``tail`` ``[R, n]`` (ascending, nonnegative exceedances), with the prior on ``k``."""
    n = tail.shape[-1]
    m = 30 + int(n**0.5)
    grid = 1 - np.sqrt(m / (np.arange(1, m + 1, dtype=np.float64) - 0.5))  # [m], <= 0
    quartile = tail[:, int(n / 4 + 0.5) - 1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = grid / (_PRIOR_BS * quartile[:, None]) + 1 / tail[:, -1:]  # [R, m]
        t = np.multiply(-b[:, :, None], tail[:, None, :])  # [R, m, n], one temporary
        k_grid = np.log1p(t, out=t).mean(axis=-1)  # [R, m]
        profile = n * (np.log(-(b / k_grid)) - k_grid - 1)  # log-likelihood of each b
        # normalized profile likelihoods: arviz 0.x writes them 1 / sum_j exp(L_j - L_i)
        # (m^2 exponentials), arviz_stats exp(L - logsumexp(L)); the same to rounding
        w = np.exp(profile - np.max(profile, axis=-1, keepdims=True))
        w = w / w.sum(axis=-1, keepdims=True)
        w = np.where(w >= 10 * _EPS, w, 0.0)  # negligible candidates dropped
        w = w / w.sum(axis=-1, keepdims=True)
        b_post = np.sum(np.where(w > 0, b * w, 0.0), axis=-1)
        k = np.log1p(-b_post[:, None] * tail).mean(axis=-1)
        sigma = -k / b_post
        k = (n * k + _PRIOR_K * 0.5) / (n + _PRIOR_K)
    if rule == "arviz1":
        flat_start = quartile <= tail[:, 0]  # arviz_stats: too far from a GPD, no fit
        k = np.where(flat_start, np.nan, np.where(np.isnan(k), np.inf, k))
        sigma = np.where(flat_start, np.nan, sigma)
    return k, sigma


def _smoothed_tail(
    k: np.ndarray, sigma: np.ndarray, cutoff: np.ndarray, n: int, rule: str
) -> np.ndarray:
    """Log of the fitted quantiles at ``(j - 1/2) / n`` above ``exp(cutoff)``, ``[R, n]``,
    truncated at 0 (the largest raw log weight after the shift)."""
    p = np.arange(0.5, n) / n
    log1m_p = np.log1p(-p)
    k_, s_, c_ = k[:, None], sigma[:, None], np.exp(cutoff)[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if rule == "arviz0":
            near0 = np.abs(k_) < _EPS
            q = np.where(near0, -log1m_p, np.expm1(-k_ * log1m_p) / np.where(near0, 1, k_))
            q = np.log(q * s_ + c_)
        else:
            q = np.where(
                k_ == 0,
                c_ - s_ * log1m_p,
                c_ + s_ * np.expm1(-k_ * log1m_p) / np.where(k_ == 0, 1, k_),
            )
            q = np.log(q)
        q = np.where(s_ > 0, q, np.nan)
        return np.where(q > 0, 0.0, q)


def psislw(log_likelihood: Any, r_eff: float = 1.0, *, rule: str = "arviz0") -> tuple:
    """PSIS log weights ``[..., S]`` (normalized over the draws) and Pareto k ``[...]``.

    Parameters
    ----------
    log_likelihood : array-like, shape [..., S]
        Pointwise log-likelihood of each observation under each of ``S`` posterior
        draws (draws last). The log importance ratios of leave-one-out are its negative.
    r_eff : float, default 1.0
        Relative effective sample size of the draws (ESS / S).
    rule : {"arviz0", "arviz1"}, default "arviz0"
        Tail length and cutoff as ``arviz.psislw`` (arviz 0.x) or ``arviz_stats``
        (arviz 1.x) choose them (see the module docstring).

    Returns
    -------
    log_weights : numpy.ndarray, float64, shape [..., S]
    k : numpy.ndarray, float64, shape [...]
        Estimated Pareto shape of each row's tail: ``inf`` where the tail is too short
        or flat to fit (the raw weights are kept), ``nan`` where the fit fails.

    Examples
    --------
    >>> import numpy as np
    >>> ll = np.random.default_rng(0).normal(size=(2, 100))
    >>> lw, k = psislw(ll)
    >>> lw.shape, k.shape, np.allclose(np.exp(lw).sum(axis=-1), 1.0)
    ((2, 100), (2,), True)
    """
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}; got {rule!r}.")
    ll = np.asarray(log_likelihood, dtype=np.float64)
    if ll.ndim == 0:
        raise ValueError("log_likelihood must have a draws axis (the last); got a scalar.")
    shape = ll.shape
    s = shape[-1]
    rows = ll.reshape(-1, s)
    with np.errstate(invalid="ignore"):
        x = np.negative(rows)
        x -= np.max(x, axis=-1, keepdims=True) if s else 0.0
    k = np.full(rows.shape[0], np.inf)
    m = tail_length(s, r_eff, rule) if s >= 2 else 0
    if rows.shape[0] and 5 <= m < s:
        # NumPy's default sort, row by row, as ArviZ sorts: among tied ratios in the
        # tail, which draw gets which smoothed value follows that sort's order
        if rule == "arviz0":
            cutoff = np.maximum(np.sort(x, axis=-1)[:, s - m - 1], np.log(_TINY))
            n = np.sum(x > cutoff[:, None], axis=-1)
            fit = n > 4
        else:
            order = np.argsort(x, axis=-1)
            cutoff = np.take_along_axis(x, order[:, s - m - 1 : s - m], axis=-1)[:, 0]
            n = np.full(rows.shape[0], m)
            tail_span = np.take_along_axis(x, order[:, [s - m, s - 1]], axis=-1)
            fit = ~(np.abs(tail_span[:, 1] - tail_span[:, 0]) < _TINY)  # flat: k = inf
        for length in np.unique(n[fit]):
            (idx,) = np.nonzero(fit & (n == length))
            block = max(
                1, _FIT_BLOCK_ELEMENTS // ((30 + int(length**0.5)) * max(length, 40))
            )
            for a in range(0, idx.size, block):
                sel = idx[a : a + block]
                if rule == "arviz0":
                    # arviz 0.x: the ratios above the cutoff, in draw order, then sorted
                    xr = x[sel]
                    pos = np.nonzero(xr > cutoff[sel][:, None])[1].reshape(-1, length)
                    vals = np.take_along_axis(xr, pos, axis=-1)
                    pos = np.take_along_axis(pos, np.argsort(vals, axis=-1), axis=-1)
                else:
                    pos = order[sel, s - length :]
                tail_log = np.take_along_axis(x[sel], pos, axis=-1)
                tail = np.exp(tail_log) - np.exp(cutoff[sel])[:, None]
                k_sel, sigma = _fit_gpd(tail, rule)
                k[sel] = k_sel
                ok = np.isfinite(k_sel)
                if np.any(ok):
                    smooth = _smoothed_tail(
                        k_sel[ok], sigma[ok], cutoff[sel[ok]], length, rule
                    )
                    x[sel[ok][:, None], pos[ok]] = smooth
    if s:
        x -= _logsumexp_rows(x)[:, None]
    return x.reshape(shape), k.reshape(shape[:-1])
