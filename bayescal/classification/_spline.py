"""Spline calibration (Lucena 2018): penalised logistic regression on a natural cubic
spline basis of the log-odds, the penalty chosen by cross-validated log-loss.

A frozen pytree like the other binary calibrators; the fit is one jittable,
vmappable program (every fold and penalty solved at once by the shared damped Newton
solver under ``vmap``), bucketed by ``newton.bucketed_fit``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton, xla_options
from bayescal._src import validation as _v
from bayescal._src.binned import weighted_quantile_edges
from bayescal._src.host import _device, _floats, _flushed, _normal, _vector
from bayescal._src.host import first as host_first
from bayescal._src.pytree import pytree_dataclass
from bayescal.classification._calibrators import (
    _logit,
    _no_infinite_logits,
    _scores,
    _warn_not_converged,
)
from bayescal.classification._host import (
    _binary_logits,
    _eps_ok,
    _quantile_edges,
    _weighted_quantiles,
    sigmoid,
)
from bayescal.classification._host import _logit as _host_logit
from bayescal.classification._inputs import binary_inputs, check_eps

__all__ = ["SplineCalibrator", "fit_spline"]

#: Lucena's default penalty grid, ``np.logspace(-4, 4, 17)``.
DEFAULT_PENALTIES = tuple(float(v) for v in np.logspace(-4, 4, 17))


def spline_basis(x: Any, knots: Any, xp: Any = jnp) -> Any:
    r"""The natural cubic spline basis ``[..., K]`` of Hastie, Tibshirani & Friedman.

    :math:`N_1 = 1`, :math:`N_2 = x`, :math:`N_{k+2} = d_k - d_{K-1}` with
    :math:`d_k(x) = [(x - \xi_k)_+^3 - (x - \xi_K)_+^3] / (\xi_K - \xi_k)`
    (*The Elements of Statistical Learning*, eq. 5.4-5.5; the basis of Lucena's
    ``splinecalib``). A knot equal to the last gives a column of zeros. ``xp``: the
    array module (``jax.numpy``, or ``numpy`` for the host path).
    """
    last = knots[-1]

    def d(k):
        gap = last - knots[k]
        num = xp.maximum(x - knots[k], 0) ** 3 - xp.maximum(x - last, 0) ** 3
        return xp.where(gap > 0, num / xp.where(gap > 0, gap, 1), 0)

    num_knots = knots.shape[0]
    cols = [xp.ones_like(x), x]
    top = d(num_knots - 2)
    cols += [d(k) - top for k in range(num_knots - 2)]
    return xp.stack(cols, axis=-1)


def _spline_map(knots, coef, p, *, eps):
    x = _logit(p, eps)
    eta = jnp.sum(spline_basis(x, knots.astype(x.dtype)) * coef.astype(x.dtype), axis=-1)
    return jax.nn.sigmoid(eta).astype(p.dtype)


@functools.partial(newton.fast_jit, static_argnames=("eps",))
def _spline_apply(params, p, *, eps):
    return _spline_map(*params, p, eps=eps)


# --------------------------------------------------------------------------- host twins
def _weighted_knots(x: np.ndarray, w: np.ndarray | None, k: int) -> np.ndarray | None:
    """``binned.weighted_quantile_edges(x, w, k)``, or None (a subnormal edge)."""
    if w is None:
        return _quantile_edges(x, k)
    from bayescal._src.binned import _quantile_levels

    edges = _weighted_quantiles(x, w, _quantile_levels(k, x.dtype))
    return edges if _normal(edges) else None


def _penalised_newton(
    basis: np.ndarray,
    y: np.ndarray,
    w_rows: np.ndarray,
    pen: np.ndarray,
    start: np.ndarray,
    max_steps: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """``argmin_b sum_i w_ri (softplus(eta_i) - y_i eta_i) / W_r + pen_r ||b||^2`` with
    ``eta = basis @ b``, for every row ``r`` of ``w_rows [R, N]`` at once (float64).

    Newton steps; a row whose Newton decrement ``g' H^-1 g`` exceeds 1/4 (far from its
    optimum, e.g. the first steps from 0) halves its step until the objective decreases
    (Armijo), closer rows take the full step (the objective is strictly convex, so the
    optimum is ``fit_spline``'s). A row has converged when its decrement (about twice
    the objective's distance to the optimum, a mean log-loss of order 0.1-1) is below
    1e-20. Returns ``b [R, K]`` and, per row, whether it converged."""
    # No BLAS (einsum runs its own loops): OpenBLAS' threads, spinning on a machine
    # whose cores are busy, made one fit 10-30x slower than this.
    rows, k = start.shape
    wn = w_rows / w_rows.sum(axis=1, keepdims=True)
    eye = np.eye(k)
    upper = np.triu_indices(k)
    outer = _basis_products(basis)  # [N, K(K+1)/2], the kernel's
    basis_t = np.ascontiguousarray(basis.T)

    def linear(b: np.ndarray) -> np.ndarray:  # basis @ b per row: [R, N]
        return np.einsum("rk,kn->rn", b, basis_t)

    def value(b: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eta = linear(b)
        loss = np.logaddexp(0, eta) - y * eta
        return np.einsum("rn,rn->r", wn[r], loss) + pen[r] * np.einsum(
            "rk,rk->r", b, b
        ), eta

    beta = start.astype(np.float64).copy()
    live = np.arange(rows)
    eta = linear(beta)
    converged = np.zeros(rows, bool)
    for _ in range(max_steps):
        q = sigmoid(eta)
        grad = np.einsum("rn,kn->rk", wn[live] * (q - y), basis_t)
        grad += 2 * pen[live, None] * beta[live]
        hess = np.empty((live.size, k, k))
        hess[:, upper[0], upper[1]] = np.einsum("rn,nj->rj", wn[live] * q * (1 - q), outer)
        hess[:, upper[1], upper[0]] = hess[:, upper[0], upper[1]]
        hess += 2 * pen[live, None, None] * eye
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        decrease = np.einsum("rk,rk->r", grad, step)
        if not np.isfinite(decrease).all():
            return beta, converged
        done = decrease <= 1e-20
        converged[live[done]] = True
        keep = ~done
        live, step, decrease, eta = live[keep], step[keep], decrease[keep], eta[keep]
        if live.size == 0:
            break
        far = decrease > 0.25
        if far.any():  # Armijo backtracking for the rows far from their optimum
            rows_far = live[far]
            val, _ = value(beta[rows_far], rows_far)
            rate = np.ones(rows_far.size)
            for _ in range(60):
                trial = beta[rows_far] - rate[:, None] * step[far]
                v, _ = value(trial, rows_far)
                bad = ~(v <= val - 1e-4 * rate * decrease[far])
                if not bad.any():
                    break
                rate[bad] *= 0.5
            else:
                return beta, converged  # no decrease: left to the kernel path
            step[far] *= rate[:, None]
        beta[live] -= step
        eta = linear(beta[live])
    return beta, converged


#: fit_spline's host path up to this many observations (not HOST_MAX): where its
#: float64 Newton fits take as long as the compiled program's first call (2-core CPU
#: machine, fresh processes, 2026-11-29: host 0.32 / 1.58 / 4.1 s at N = 1e4 / 4e4 /
#: 1e5, the kernel's first call 2.0 / 2.3 / 2.6 s, its warm fit 0.06 / 0.23 / 0.62 s).
_SPLINE_MAX = 1 << 16


def _twin_fit_spline(
    y_true: Any,
    y_prob: Any,
    *,
    knots: Any = 10,
    penalties: Any = None,
    folds: Any = 5,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_spline` on the host: the same knots, folds and
    strictly convex objectives, every fold x penalty solved by Newton in float64 (from
    the fit on all the data at that penalty, which is also the final fit)."""

    def count(v: Any) -> int | None:
        ok = isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
        return int(v) if ok else None

    num_knots, num_folds = count(knots), count(folds)
    if num_knots is None or num_folds is None or num_knots < 3 or num_folds < 2:
        return None
    if not _eps_ok(eps):
        return None
    if penalties is None:
        lam = np.asarray(DEFAULT_PENALTIES)
    elif isinstance(penalties, list | tuple | np.ndarray):
        lam = np.asarray(penalties, dtype=np.float64).reshape(-1)
        if not (lam.size and np.isfinite(lam).all() and (lam > 0).all()):
            return None
    else:
        return None
    data = _binary_logits(y_true, y_prob, weights, eps, _SPLINE_MAX)
    if data is None:
        return None
    y, p, w, x = data
    weight = np.ones(y.size) if w is None else w.astype(np.float64)
    live, positive = weight > 0, y > 0.5
    if min((live & positive).sum(), (live & ~positive).sum()) < num_folds:
        return None  # one class, or too few of one for the folds: the kernel's message
    edges = _weighted_knots(x, w, num_knots - 1)
    if edges is None:
        return None
    basis = spline_basis(x.astype(np.float64), edges.astype(np.float64), np)
    y64 = y.astype(np.float64)
    rank = np.where(positive, np.cumsum(live & positive), np.cumsum(live & ~positive)) - 1
    fold = rank % num_folds
    # the fits on all the data, one per penalty; then every fold from its penalty's
    full, ok = _penalised_newton(
        basis,
        y64,
        np.broadcast_to(weight, (lam.size, y.size)),
        lam / num_knots,
        np.zeros((lam.size, num_knots)),
    )
    if not ok.all():
        return None
    train = np.where(fold[None, :] == np.arange(num_folds)[:, None], 0.0, weight)  # [F, N]
    pairs_w = np.repeat(train, lam.size, axis=0)  # fold-major, as the kernel
    pairs_lam = np.tile(lam, num_folds)
    beta, ok = _penalised_newton(
        basis, y64, pairs_w, pairs_lam / num_knots, np.tile(full, (num_folds, 1))
    )
    if not ok.all():
        return None
    eta = np.einsum("rk,nk->rn", beta, basis)  # no BLAS (see _penalised_newton)
    nll = np.maximum(eta, 0) + np.log1p(np.exp(-np.abs(eta))) - y64 * eta
    held = (pairs_w == 0) & live[None, :]
    scores = np.where(held, nll * weight, 0).sum(axis=1).reshape(num_folds, -1).sum(axis=0)
    best = int(np.argmin(scores))
    coef = full[best].astype(p.dtype)
    if not _normal(coef):
        return None
    return SplineCalibrator(_device(edges), _device(coef), eps)


def _twin_spline_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``SplineCalibrator.__call__`` on the host."""

    p = _floats(y_prob)
    knots, coef = _vector(calibrator.knots), _vector(calibrator.coef)
    if p is None or knots is None or coef is None or p.size == 0:
        return None
    if knots.size < 3 or coef.shape != knots.shape or not _eps_ok(calibrator.eps):
        return None
    if not (_normal(p.reshape(-1), 0, 1) and _normal(knots) and _normal(coef)):
        return None
    x = _host_logit(p, calibrator.eps)
    if x is None or not _normal(x):
        return None
    cast = lambda a: a.astype(p.dtype).astype(np.float64)  # noqa: E731  (the kernel's dtype)
    eta = spline_basis(x.astype(np.float64), cast(knots), np) @ cast(coef)
    return _device(_flushed(sigmoid(eta).astype(p.dtype)))


@pytree_dataclass(data=("knots", "coef"), meta=("eps",))
class SplineCalibrator:
    r"""Spline calibration: :math:`\sigma(\sum_k \beta_k N_k(\mathrm{logit}\,p))`.

    Create it with :func:`fit_spline`.

    Attributes
    ----------
    knots : Array [K]
        Knots on the log-odds scale, nondecreasing (quantiles of the calibration
        log-odds, the smallest and largest included).
    coef : Array [K]
        Coefficients of the natural cubic spline basis (intercept, slope, then the
        ``K - 2`` cubic terms); the map is linear in the log-odds beyond the end knots.
    eps : float or None
        Probabilities are clipped to ``[eps, 1 - eps]`` before the logit when set.
    """

    knots: jax.Array
    coef: jax.Array
    eps: float | None = None

    def _map(self, p: jax.Array) -> jax.Array:  # validated p
        return _spline_map(self.knots, self.coef, p, eps=self.eps)

    @host_first(_twin_spline_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, y_prob: Any) -> jax.Array:
        """Calibrated probabilities (shape kept)."""
        p = _scores(y_prob, "y_prob", probabilities=True)
        _no_infinite_logits(p, "y_prob", self.eps, "spline calibration (on log-odds)")
        return newton.apply_bucketed(
            _spline_apply, (self.knots, self.coef), p, eps=self.eps
        )


@host_first(_twin_fit_spline)
def fit_spline(
    y_true: Any,
    y_prob: Any,
    *,
    knots: int = 10,
    penalties: Any = None,
    folds: int = 5,
    eps: float | None = None,
    weights: Any = None,
) -> SplineCalibrator:
    r"""Fit spline calibration (Lucena 2018), the penalty chosen by cross-validation.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1 (both classes present).
    y_prob : array_like, shape [N]
        Predicted probabilities, in [0, 1].
    knots : int, default 10
        Number :math:`K \ge 3` of knots, at the quantiles ``linspace(0, 1, K)`` of the
        calibration log-odds (numpy's linear quantile; weighted with ``weights``).
    penalties : sequence of float, optional
        The grid of penalties :math:`\lambda > 0` searched (default Lucena's
        ``np.logspace(-4, 4, 17)``).
    folds : int, default 5
        Cross-validation folds (>= 2), stratified: the :math:`j`-th observation of
        each class (in the order given, among those of positive weight) goes to fold
        :math:`j \bmod F`.
    eps : float in (0, 0.5), optional
        Clip probabilities to ``[eps, 1 - eps]`` before the logit (at fit and call
        time). Without it, probabilities of exactly 0 or 1 raise an error.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): they multiply the
        log-likelihood terms, the held-out log-loss and the knots' quantiles, so an
        integer weight equals repeating the row in the fit (the folds count rows).
        Finite, ``>= 0``, not all 0.

    Returns
    -------
    SplineCalibrator

    Notes
    -----
    With :math:`x = \mathrm{logit}(p)`, basis :math:`N(x)` (:math:`K` columns, see
    :class:`SplineCalibrator`) and :math:`\eta = N(x)\beta`, each penalty minimises

    .. math:: \frac{1}{W}\sum_i w_i\big(\log(1 + e^{\eta_i}) - y_i\eta_i\big)
              + \frac{\lambda}{K}\lVert\beta\rVert^2,

    the objective of Lucena's ``splinecalib`` (``pen_ll_fun``). For every penalty
    and fold the model is fitted without the fold and scored by the log-loss on it;
    the penalty with the lowest log-loss over all folds (the first on ties) is
    fitted on all the data. The :math:`|\lambda|` fits on all the data run first, as
    one batch of the shared damped Newton solver, then the :math:`F \times |\lambda|`
    fold fits as another, each from its penalty's fit on all the data. Differences
    from ``splinecalib`` 0.0.13: knots at quantiles instead of a random sample of 30
    values plus 0.1, ..., 0.9;
    deterministic folds; cross-validation over all folds (its ``"full"`` mode) and
    the final fit on all the data (its final fit leaves out the last fold); no
    ``unity_prior``. ``jax.jit`` and ``jax.vmap`` work; there invalid values give
    NaN parameters.

    References
    ----------
    Lucena, B. (2018). Spline-based probability calibration. arXiv:1809.07751.
    Hastie, T., Tibshirani, R. and Friedman, J. (2009). *The Elements of Statistical
    Learning*, 2nd ed., Sec. 5.2.1.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_spline
    >>> r = np.random.default_rng(0)
    >>> p = r.uniform(0.02, 0.98, 500)
    >>> y = (r.uniform(size=500) < p ** 2).astype(int)
    >>> cal = fit_spline(y, p, knots=5)
    >>> out = np.asarray(cal([0.2, 0.5, 0.8]))
    >>> bool(np.all(np.abs(out - np.array([0.2, 0.5, 0.8]) ** 2) < 0.1))
    True
    """
    num_knots = _v.check_positive_int(knots, "knots")
    if num_knots < 3:
        raise ValueError(
            f"knots must be an int >= 3 (a natural cubic spline); got {knots}."
        )
    num_folds = _v.check_positive_int(folds, "folds")
    if num_folds < 2:
        raise ValueError(f"folds must be an int >= 2 (cross-validation); got {folds}.")
    if penalties is None:
        grid = DEFAULT_PENALTIES
    else:
        if isinstance(penalties, str) or not np.iterable(penalties):
            raise TypeError(
                f"penalties must be a sequence of positive floats; got {penalties!r}."
            )
        arr = np.asarray(penalties, dtype=float).reshape(-1)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(
                f"penalties must be a nonempty sequence of finite floats > 0; got {penalties!r}."
            )
        grid = tuple(float(v) for v in arr)
    eps = check_eps(eps)
    _check_size(y_prob, num_folds, len(grid))
    cal, converged = newton.bucketed_fit(
        _fit_spline,
        (y_true, y_prob, weights),
        dict(num_knots=num_knots, penalties=grid, num_folds=num_folds, eps=eps),
        # quick compiles up to QUICK_COMPILE_MAX_SIZE values, then optimised code (not
        # the fits' larger quick size): its Newton loops run on every fold and penalty,
        # and unoptimised they ran 2x slower for the same first call (N = 1e5, 2-core
        # CPU machine, 2026-11-29: first call 2.6 s either way, warm 1.3 s quick, 0.6 s
        # optimised)
        compiler_options=xla_options.compiler_options,
    )
    if _v.is_concrete(converged) and not bool(converged):
        _warn_not_converged("fit_spline")
    return cal


#: The most observation-fits (N x folds x penalties) fit_spline takes on: N = 1,000,000
#: at the defaults (5 folds, 17 penalties). It solves every fold and penalty at once on
#: the whole data: at N = 400,000 that took 4.6 s (first call; 2.5 s warm) and 1.2 GB
#: on a 2-core CPU (112 s and 2.4 GB before the shared basis products of 2026-11-29),
#: and at N = 4.2 million XLA had asked for 69-252 GB (issue 37).
MAX_FIT_OBSERVATIONS = 85 * 10**6


def _check_size(y_prob: Any, num_folds: int, num_penalties: int) -> None:
    """Refuse before starting a fit larger than :data:`MAX_FIT_OBSERVATIONS`."""
    shape = getattr(y_prob, "shape", None)
    if shape is None or len(shape) == 0:
        return  # a list or a scalar: small, or a bad input the checks refuse
    n = int(shape[0])
    work = n * num_folds * num_penalties
    if work <= MAX_FIT_OBSERVATIONS:
        return
    most = MAX_FIT_OBSERVATIONS // (num_folds * num_penalties)
    raise ValueError(
        f"y_prob holds {n:,} observations: fit_spline solves {num_folds} folds x "
        f"{num_penalties} penalties on all of them ({work:.2g} observation-fits; "
        f"400,000 observations at the defaults took 4.6 s and 1.2 GB on a 2-core CPU, "
        f"and the memory grows with N x folds x penalties). Fit on a random subsample "
        f"of at most {most:,} observations (the spline has few parameters), or pass "
        f"fewer penalties or folds."
    )


def _penalised_objective(basis, outer, y, weights, total, penalty):
    """Lucena's penalised mean log-loss in the coefficients, with its derivatives.

    ``outer [N, K (K + 1) / 2]``: the products of the basis columns ``j <= l`` per
    observation (:func:`_basis_products`), shared by every fold and penalty: each
    Hessian is then one product with the observations' curvature weights, and a batch
    of fits (``vmap``) one matrix product, where ``basis.T * weights`` made a
    ``[fits, K, N]`` array per step (10 s for 85 fits at N = 1e5 on the 2-core CPU).
    """
    num = basis.shape[1]
    hi = jax.lax.Precision.HIGHEST
    upper = np.triu_indices(num)
    basis_t = basis.T  # eta as beta . basis.T: [fits, N] under vmap, in the weights' layout

    def objective(beta):
        eta = jnp.dot(beta, basis_t, precision=hi)
        e = jnp.exp(-jnp.abs(eta))
        big = 1 / (1 + e)
        small = e * big  # e / (1 + e): one division per value instead of two
        positive = y > 0.5
        agree = positive == (eta >= 0)
        r = jnp.where(agree, small, big)
        r = jnp.where(positive, -r, r)  # q - y without cancellation
        loss = jnp.log1p(e) + jnp.where(agree, 0, jnp.abs(eta))
        v = big * small
        lw, rw, vw = (a * weights / total for a in (loss, r, v))
        pen = penalty / num
        value = newton.accurate_sum(lw) + pen * jnp.sum(beta**2)
        grad = jnp.dot(rw, basis, precision=hi) + 2 * pen * beta
        packed = jnp.dot(vw, outer, precision=hi)
        hess = jnp.zeros((num, num), beta.dtype).at[upper].set(packed)
        hess = hess + jnp.triu(hess, 1).T + 2 * pen * jnp.eye(num, dtype=beta.dtype)
        return newton.Derivatives(
            value, grad, hess, newton.accurate_sum(lw) + pen * jnp.sum(beta**2)
        )

    return objective


def _basis_products(basis):
    """``basis[:, j] * basis[:, l]`` for ``j <= l`` (row-major upper triangle), of a
    NumPy (the host twin) or JAX (the kernel) basis."""
    j, k = np.triu_indices(basis.shape[1])
    return basis[:, j] * basis[:, k]


def _fit_spline(y_true, y_prob, weights, n, *, num_knots, penalties, num_folds, eps):
    y, p = binary_inputs(y_true, y_prob)
    _v.check_both_classes(y, "y_true")
    _no_infinite_logits(p, "y_prob", eps, "spline calibration (on log-odds)")
    dtype = p.dtype
    size = p.shape[0]
    w = newton.observation_weights(weights, n, size, dtype)
    if w is None:
        w = jnp.ones((size,), dtype)
    x = _logit(p, eps)
    knots = weighted_quantile_edges(x, w, num_knots - 1)
    basis = spline_basis(x, knots)
    # stratified folds: the j-th row of each class (of positive weight) in fold j mod F
    positive = y > 0.5
    live = w > 0
    rank_pos = jnp.cumsum(live & positive) - 1
    rank_neg = jnp.cumsum(live & ~positive) - 1
    fold = jnp.where(positive, rank_pos, rank_neg) % num_folds
    _v.record(
        "less_equal",
        "folds",
        (jnp.sum(live & positive) < num_folds) | (jnp.sum(live & ~positive) < num_folds),
        False,
        what=(
            f"({num_folds}) must not exceed the number of observations of either class "
            "in y_true (each fold holds some of both); use fewer folds or more data"
        ),
    )
    lam = jnp.asarray(penalties, dtype)
    outer = _basis_products(basis)

    def solve(train_weights, penalty, start):
        total = jnp.sum(train_weights)
        obj = _penalised_objective(basis, outer, y, train_weights, total, penalty)
        res = newton.minimize(obj, start)
        return res.x, res.converged

    # the fits on all the data, one per penalty; every fold's fit starts from its
    # penalty's (a few Newton steps away, as the host twin does)
    zeros = jnp.zeros((lam.shape[0], num_knots), dtype)
    full, full_converged = jax.vmap(solve)(jnp.broadcast_to(w, (lam.shape[0], size)), lam, zeros)
    folds = jnp.arange(num_folds)
    train = jnp.where(fold[None, :] == folds[:, None], 0, w[None, :])  # [F, N]
    pairs_w = jnp.repeat(train, lam.shape[0], axis=0)  # [F * L, N]
    pairs_lam = jnp.tile(lam, num_folds)
    beta, _ = jax.vmap(solve)(pairs_w, pairs_lam, jnp.tile(full, (num_folds, 1)))  # [F * L, K]
    eta = jnp.dot(beta, basis.T, precision=jax.lax.Precision.HIGHEST)  # [F * L, N]
    nll = jax.nn.softplus(eta) - y * eta
    held = (pairs_w == 0) & live[None, :]
    scores = jnp.sum(jnp.where(held, nll * w, 0), axis=1).reshape(num_folds, -1).sum(axis=0)
    best = jnp.argmin(scores)
    return SplineCalibrator(knots, full[best].astype(dtype), eps), full_converged[best]
