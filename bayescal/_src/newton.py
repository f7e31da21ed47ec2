"""One damped (projected) Newton solver for the small parametric fits of both branches.

Platt scaling, beta calibration, temperature scaling and sigma-scaling all minimise a
smooth convex sum of per-observation losses over 1-3 parameters. :func:`minimize`
does that with Newton steps, a backtracking (Armijo) line search, a Levenberg ridge
when the Hessian is (nearly) singular, and lower bounds by projection (Bertsekas'
projected Newton: a variable at its bound whose gradient pushes it further out is held
there). It is a ``lax.while_loop``, so it traces under ``jax.jit``, batches under
``jax.vmap`` (each data set stops at its own convergence) and never syncs with the host.

float32. The sums over observations are taken in blocks (:func:`accurate_sum`), so
their rounding error grows with the block sizes (<= 1024), not with N. The loss
itself is only known to a few float32 ulps of its magnitude; once the predicted
decrease of a Newton step falls below that level a comparison of losses means
nothing, so steps within it are accepted without one and the iteration stops after
two such steps (Newton converges quadratically, so the second one lands at the
precision of the gradient). Platt's (A, B) at N = 1e6 then agree with the float64
optimum to ~1e-6 relative; what remains is a floor of ~eps * sum|residual| / curvature
(~1e-7 absolute for Platt), from the float32 exponentials themselves, which shows as a
large relative error only for a parameter near 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .bucketing import bucket_size, pad_axis

__all__ = [
    "BLOCK",
    "Derivatives",
    "NewtonResult",
    "accurate_sum",
    "pad_observations",
    "derivative_sums",
    "logistic_objective",
    "minimize",
]

#: Largest number of terms added by one plain reduction in :func:`accurate_sum`.
BLOCK = 1024


def accurate_sum(x: jax.Array, axis: int = 0) -> jax.Array:
    """Sum over ``axis`` in blocks of at most :data:`BLOCK` terms, then over the blocks.

    The worst-case rounding error of a plain float32 sum of N terms grows like
    ``N * eps``; here it grows like ``(BLOCK + N / BLOCK) * eps`` for N <= BLOCK**2 and
    ``3 * BLOCK * eps`` beyond (the block sums are summed the same way, recursively).
    The block shape is static, so this traces under ``jit`` and ``vmap``.
    """
    x = jnp.moveaxis(x, axis, 0)
    n = x.shape[0]
    if n <= BLOCK:
        return jnp.sum(x, axis=0)
    m = n // BLOCK
    head = x[: m * BLOCK].reshape((m, BLOCK) + x.shape[1:])
    partial = jnp.sum(head, axis=1)  # [m, ...] block sums
    if n > m * BLOCK:
        partial = jnp.concatenate([partial, jnp.sum(x[m * BLOCK :], axis=0)[None]])
    return accurate_sum(partial, 0)


def pad_observations(*arrays: jax.Array) -> tuple[tuple[jax.Array, ...], jax.Array]:
    """Pad the observation axis (axis 0) to the package's bucket size with zeros.

    Returns the padded arrays and the weights (1 for the observations, 0 for the
    padding). One compiled solver then serves every ``n`` in a bucket (compiling the
    solver takes far longer than running it on a few thousand points). Host-resident
    arrays are padded on the host (no program compiled per length).
    """
    n = arrays[0].shape[0]
    size = bucket_size(n)
    padded = tuple(pad_axis(a, size, axis=0, fill=0) for a in arrays)
    weights = (jnp.arange(size) < n).astype(arrays[0].dtype)
    return padded, weights


class Derivatives(NamedTuple):
    """An objective's value, gradient ``[P]``, Hessian ``[P, P]`` and magnitude.

    ``magnitude`` is the sum of the absolute per-observation losses: the scale of the
    value's rounding error (``value`` itself can be near 0 by cancellation).
    """

    value: jax.Array
    grad: jax.Array
    hess: jax.Array
    magnitude: jax.Array


class NewtonResult(NamedTuple):
    """Result of :func:`minimize`."""

    x: jax.Array  # [P] the minimiser
    value: jax.Array  # objective at x
    grad: jax.Array  # [P] gradient at x
    num_steps: jax.Array  # int32 Newton steps taken
    converged: jax.Array  # bool: stopped by the convergence test, not by max_steps


def derivative_sums(
    loss: Callable[[jax.Array], jax.Array], x: jax.Array, weights: jax.Array | None = None
) -> Derivatives:
    """Value, gradient and Hessian of ``sum_i w_i loss(x)_i`` by forward-mode autodiff.

    ``loss(x)`` returns the ``[N]`` per-observation losses for parameters ``x [P]``;
    their derivatives (``[N, P]`` and ``[N, P, P]``, P small) are summed with
    :func:`accurate_sum`.
    """

    per_obs = loss(x)
    jac = jax.jacfwd(loss)(x)  # [N, P]
    hess = jax.jacfwd(jax.jacfwd(loss))(x)  # [N, P, P]
    if weights is not None:
        per_obs = per_obs * weights
        jac = jac * weights[:, None]
        hess = hess * weights[:, None, None]
    return Derivatives(
        accurate_sum(per_obs),
        accurate_sum(jac),
        accurate_sum(hess),
        accurate_sum(jnp.abs(per_obs)),
    )


def logistic_objective(
    features: tuple[jax.Array, ...],
    labels: jax.Array,
    offset: jax.Array | None = None,
    weights: jax.Array | None = None,
) -> Callable[[jax.Array], Derivatives]:
    r"""Logistic regression with an intercept and soft targets, as an objective.

    Parameters ``x = (beta_1, ..., beta_K, c)`` give :math:`\eta_i = \sum_k \beta_k
    F_{ik} + c`; the loss is :math:`\sum_i w_i(\mathrm{softplus}(\eta_i) - t_i\eta_i)`
    with targets :math:`t_i = y_i + \delta_i` given as binary ``labels`` :math:`y_i`
    and a small ``offset`` :math:`\delta_i` (Platt's soft targets are
    :math:`1 - 1/(N_+ + 2)` and :math:`1/(N_- + 2)`: in float32 the target
    :math:`1 - 2\cdot 10^{-6}` itself would be rounded by 3% of its distance to 1, a
    bias that adds up over the positives). Residuals :math:`q_i - t_i` are computed
    as :math:`-\sigma(-\eta_i) - \delta_i` for positives and :math:`\sigma(\eta_i) -
    \delta_i` for negatives, without cancellation.

    A feature whose coefficient is exactly 0 contributes 0 even where it is infinite
    (a dropped feature stays dropped). The derivatives are written out (no autodiff),
    elementwise (no matmul, so no reduced-precision matmul on accelerators), and
    summed with :func:`accurate_sum`.
    """
    k = len(features)
    positive = labels > 0.5
    # Columns of the design: the features (0 where infinite: only reached with a
    # coefficient of exactly 0) and the intercept's column of ones (None).
    cols: list[jax.Array | None] = [jnp.where(jnp.isfinite(f), f, 0) for f in features]
    cols.append(None)

    def times(a: jax.Array, c: jax.Array | None) -> jax.Array:
        return a if c is None else a * c

    def objective(x: jax.Array) -> Derivatives:
        eta = x[k] + sum(
            (jnp.where(x[j] == 0, 0, x[j] * features[j]) for j in range(k)),
            jnp.zeros_like(labels),
        )
        # One exp and one log1p per observation: with e = exp(-|eta|),
        # sigmoid(|eta|) = 1 / (1 + e), sigmoid(-|eta|) = e / (1 + e),
        # softplus(-|eta|) = log1p(e), softplus(|eta|) = |eta| + log1p(e).
        e = jnp.exp(-jnp.abs(eta))
        big, small = 1 / (1 + e), e / (1 + e)
        v = big * small  # q (1 - q) without cancellation
        # q - y: -sigmoid(-eta) for positives, sigmoid(eta) for negatives.
        agree = positive == (eta >= 0)  # the label is on the side eta points to
        r = jnp.where(agree, small, big)
        r = jnp.where(positive, -r, r)
        loss = jnp.log1p(e) + jnp.where(agree, 0, jnp.abs(eta))
        if offset is not None:
            r = r - offset
            loss = loss - offset * eta
        if weights is not None:
            loss, r, v = loss * weights, r * weights, v * weights
        # Materialise the three per-observation arrays once: otherwise XLA recomputes
        # the exponentials inside each of the reductions below (2-3x slower on CPU).
        loss, r, v = jax.lax.optimization_barrier((loss, r, v))
        total = accurate_sum(loss)
        grad = jnp.stack([accurate_sum(times(r, c)) for c in cols])
        upper = {
            (a, b): accurate_sum(times(times(v, cols[a]), cols[b]))
            for a in range(k + 1)
            for b in range(a, k + 1)
        }
        hess = jnp.stack(
            [
                jnp.stack([upper[(min(a, b), max(a, b))] for b in range(k + 1)])
                for a in range(k + 1)
            ]
        )
        return Derivatives(total, grad, hess, total)  # the losses are >= 0 here

    return objective


def _cholesky_solve(h: jax.Array, g: jax.Array) -> jax.Array:
    """Solve ``h x = g`` for a small symmetric positive definite ``h`` (unrolled).

    P is 1-3 here: an unrolled Cholesky factorisation is a handful of scalar
    operations, where ``jnp.linalg.solve`` adds an LU with pivoting to every compiled
    solver. A matrix that is not positive definite gives NaN (the caller falls back).
    """
    p = h.shape[0]
    low = [[None] * p for _ in range(p)]
    for i in range(p):
        for j in range(i + 1):
            acc = h[i, j] - sum((low[i][k] * low[j][k] for k in range(j)), 0.0)
            if i == j:
                low[i][i] = jnp.sqrt(jnp.where(acc > 0, acc, jnp.nan))
            else:
                low[i][j] = acc / low[j][j]
    y = [None] * p
    for i in range(p):
        y[i] = (g[i] - sum((low[i][k] * y[k] for k in range(i)), 0.0)) / low[i][i]
    x = [None] * p
    for i in reversed(range(p)):
        x[i] = (y[i] - sum((low[k][i] * x[k] for k in range(i + 1, p)), 0.0)) / low[i][i]
    return jnp.stack(x)


def _direction(d: Derivatives, free: jax.Array) -> jax.Array:
    """Newton direction on the free variables (0 on the held ones), ridge-damped."""
    p = d.grad.shape[0]
    eye = jnp.eye(p, dtype=d.hess.dtype)
    both = free[:, None] & free[None, :]
    h = jnp.where(both, d.hess, eye)
    g = jnp.where(free, d.grad, 0)
    diag = jnp.abs(jnp.diagonal(h))
    tiny = jnp.finfo(h.dtype).tiny
    # Levenberg ridge at rounding level of the largest curvature: keeps the solve
    # finite when the Hessian is singular (e.g. a constant feature), changes nothing
    # otherwise.
    ridge = 16 * jnp.finfo(h.dtype).eps * jnp.max(diag) + tiny
    step = -_cholesky_solve(h + ridge * eye, g)
    # Fallback when the factorisation fails or the step does not descend: the
    # diagonally scaled gradient (a descent direction whenever the gradient is not 0).
    fallback = -g / jnp.maximum(diag, ridge)
    ok = jnp.all(jnp.isfinite(step)) & (jnp.dot(g, step) <= 0)
    return jnp.where(free, jnp.where(ok, step, fallback), 0)


class _State(NamedTuple):
    x: jax.Array  # current (accepted) point
    d: Derivatives  # at x
    step: jax.Array  # Newton direction from x
    decrease: jax.Array  # -grad . step, the predicted decrease (x2) of a full step
    rate: jax.Array  # step length being tried
    steps: jax.Array  # accepted steps
    halvings: jax.Array  # rejected trials along the current direction
    quiet: jax.Array  # consecutive points whose predicted decrease is at rounding level
    done: jax.Array
    converged: jax.Array


def minimize(
    objective: Callable[[jax.Array], Derivatives],
    x0: jax.Array,
    *,
    lower: jax.Array | None = None,
    max_steps: int = 100,
    max_halvings: int = 60,
    rtol: float | None = None,
) -> NewtonResult:
    """Minimise a smooth convex objective by damped projected Newton steps.

    Parameters
    ----------
    objective : callable
        ``objective(x [P]) -> Derivatives`` (value, gradient, Hessian, magnitude).
    x0 : Array [P]
        Starting point (projected onto the bounds first).
    lower : Array [P], optional
        Lower bounds (``-inf`` for a free parameter). A variable at its bound with a
        positive gradient is held there; steps are projected onto the bounds.
    max_steps : int
        Newton steps at most; ``converged`` is False when they run out.
    max_halvings : int
        Step halvings at most in one line search.
    rtol : float, optional
        Relative rounding level of the objective (default ``32 * eps`` of the dtype).

    Returns
    -------
    NewtonResult
        ``converged`` is True when the predicted decrease of a Newton step has been
        below the rounding level of the objective (``rtol * magnitude``) at three
        consecutive points (so two such steps were taken), or is exactly 0.

    Notes
    -----
    One loop, one call of ``objective`` per iteration (a trial point): an accepted
    trial gives the next Newton direction, a rejected one halves the step. The first
    trial is ``x0`` itself, so the compiled loop holds the objective once.
    """
    dtype = x0.dtype
    if rtol is None:
        rtol = 32 * float(jnp.finfo(dtype).eps)
    lo = jnp.full(x0.shape, -jnp.inf, dtype) if lower is None else lower.astype(dtype)
    x0 = jnp.maximum(x0.astype(dtype), lo)
    zero = jnp.zeros((), dtype)
    p = x0.shape[0]

    def cond(s: _State):
        return ~s.done

    def body(s: _State) -> _State:
        trial = jnp.maximum(s.x + s.rate * s.step, lo)
        d_t = objective(trial)
        noise = rtol * (s.d.magnitude + jnp.finfo(dtype).tiny)
        # Armijo along the projected path, with the objective's rounding level as
        # slack (within it a comparison of values means nothing).
        bound = s.d.value + 1e-4 * jnp.dot(s.d.grad, trial - s.x) + noise
        ok = jnp.isfinite(d_t.value) & (d_t.value <= bound)
        # Accepted: the next direction from the trial point.
        free = ~((trial <= lo) & (d_t.grad > 0))
        step = _direction(d_t, free)
        decrease = -jnp.dot(d_t.grad, step)
        quiet_t = decrease <= rtol * (d_t.magnitude + jnp.finfo(dtype).tiny)
        quiet = jnp.where(quiet_t, s.quiet + 1, 0)
        steps = s.steps + 1
        converged = (quiet >= 3) | (decrease <= 0)
        accepted = _State(
            trial,
            d_t,
            step,
            decrease,
            jnp.ones((), dtype),
            steps,
            jnp.zeros((), jnp.int32),
            quiet,
            converged | (steps >= max_steps),
            converged,
        )
        # Rejected: halve the step (give up when halving no longer moves the point).
        halvings = s.halvings + 1
        stuck = (halvings >= max_halvings) | ~jnp.any(s.step != 0)
        rejected = s._replace(rate=s.rate * 0.5, halvings=halvings, done=stuck)
        return jax.tree_util.tree_map(
            lambda a, b: jnp.where(ok, a, b), accepted, rejected
        )

    # The first trial is x0 itself (value +inf accepts any finite objective there).
    inf = jnp.asarray(jnp.inf, dtype)
    start = _State(
        x0,
        Derivatives(inf, jnp.zeros((p,), dtype), jnp.zeros((p, p), dtype), zero),
        jnp.zeros((p,), dtype),
        inf,
        jnp.zeros((), dtype),
        jnp.asarray(-1, jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), jnp.int32),
        jnp.asarray(False),
        jnp.asarray(False),
    )
    out = jax.lax.while_loop(cond, body, start)
    return NewtonResult(out.x, out.d.value, out.d.grad, out.steps, out.converged)
