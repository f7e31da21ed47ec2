"""One damped (projected) Newton solver for the small parametric fits of both branches.

Platt scaling, beta calibration, temperature scaling and sigma-scaling all minimise a
smooth convex sum of per-observation losses over 1-3 parameters (their algebra is
unrolled into scalar operations); the multiclass vector and matrix scaling and
Dirichlet fits use the same loop with 2K or K(K + 1) parameters (array algebra and a
Cholesky solve). :func:`minimize`
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

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import validation as _v
from . import xla_options
from .bucketing import bucket_size, pad_axis

__all__ = [
    "BLOCK",
    "Derivatives",
    "NewtonResult",
    "accurate_sum",
    "apply_bucketed",
    "bucketed_fit",
    "fast_jit",
    "logistic_objective",
    "mask_weights",
    "minimize",
    "minimize_host",
]

#: Largest number of terms added by one plain reduction in :func:`accurate_sum`.
BLOCK = 1024


def accurate_sum(x: jax.Array, axis: int = 0) -> jax.Array:
    """Sum over ``axis`` in blocks of at most :data:`BLOCK` terms, then over the blocks.

    The worst-case rounding error of a plain float32 sum of N terms grows like
    ``N * eps``; here it grows like ``(BLOCK + N / BLOCK) * eps`` for N <= BLOCK**2 and
    ``3 * BLOCK * eps`` beyond (the block sums are summed the same way, recursively).
    The axis is padded with zeros to whole blocks (adding 0 is exact) and reduced by
    one reshape and one reduction per level: few operations to compile. The block
    shape is static, so this traces under ``jit`` and ``vmap``.
    """
    x = jnp.moveaxis(x, axis, -1)
    while x.shape[-1] > BLOCK:
        m = -(-x.shape[-1] // BLOCK)
        pad = m * BLOCK - x.shape[-1]
        if pad:
            x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
        x = jnp.sum(x.reshape(x.shape[:-1] + (m, BLOCK)), axis=-1)
    return jnp.sum(x, axis=-1)


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
        # One block sum per entry, each fused with its products: stacking the rows
        # into one [K, N] reduction compiled no faster and ran 4-10x slower on CPU.
        pairs = [(a, b) for a in range(k + 1) for b in range(a, k + 1)]
        total = accurate_sum(loss)
        grad = jnp.stack([accurate_sum(times(r, c)) for c in cols])
        upper = {(a, b): accurate_sum(times(times(v, cols[a]), cols[b])) for a, b in pairs}
        hess = jnp.stack(
            [
                jnp.stack([upper[(min(a, b), max(a, b))] for b in range(k + 1)])
                for a in range(k + 1)
            ]
        )
        return Derivatives(total, grad, hess, total)  # the losses are >= 0 here

    return objective


def _cholesky_solve(h: jax.Array, g: jax.Array, xp: Any = jnp) -> jax.Array:
    """Solve ``h x = g`` for a small symmetric positive definite ``h`` (unrolled).

    P is 1-3 for the scalar fits: an unrolled Cholesky factorisation is a handful of
    scalar operations, where ``jnp.linalg.solve`` adds an LU with pivoting to every
    compiled solver. Larger P (the multiclass scaling fits, P = 2K or K(K + 1)) use
    ``jnp.linalg.cholesky`` and two triangular solves. A matrix that is not positive
    definite gives NaN (the caller falls back). ``xp``: ``jax.numpy`` (the compiled
    loop) or ``numpy`` (:func:`minimize_host`), the same arithmetic.
    """
    p = h.shape[0]
    if p > _UNROLLED:
        if xp is np:
            try:
                low = np.linalg.cholesky(h)
            except np.linalg.LinAlgError:  # not positive definite
                return np.full(p, np.nan)
            return np.linalg.solve(low.T, np.linalg.solve(low, g))
        low = jnp.linalg.cholesky(h)  # NaN when h is not positive definite
        y = jax.scipy.linalg.solve_triangular(low, g, lower=True)
        return jax.scipy.linalg.solve_triangular(low, y, lower=True, trans="T")
    low = [[None] * p for _ in range(p)]
    for i in range(p):
        for j in range(i + 1):
            acc = h[i, j] - sum((low[i][k] * low[j][k] for k in range(j)), 0.0)
            if i == j:
                low[i][i] = xp.sqrt(xp.where(acc > 0, acc, xp.nan))
            else:
                low[i][j] = acc / low[j][j]
    y = [None] * p
    for i in range(p):
        y[i] = (g[i] - sum((low[i][k] * y[k] for k in range(i)), 0.0)) / low[i][i]
    x = [None] * p
    for i in reversed(range(p)):
        x[i] = (y[i] - sum((low[k][i] * x[k] for k in range(i + 1, p)), 0.0)) / low[i][i]
    return xp.stack(x)


def _dot(a: jax.Array, b: jax.Array, xp: Any = jnp) -> jax.Array:
    """``a . b`` for P <= 3 as scalar products and sums.

    The loop body's small-P algebra is written without reductions (``dot``, ``max``,
    ``any``): XLA fuses chains of scalar elementwise operations, while each reduction
    starts a kernel of its own, and each kernel costs compile time.
    """
    if a.shape[0] > _UNROLLED:
        if xp is np:
            return np.dot(a, b)
        return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)
    return functools.reduce(xp.add, [a[i] * b[i] for i in range(a.shape[0])])


#: Up to this many parameters the small-P algebra is unrolled into scalar operations
#: (the 1-3 parameter fits); beyond it, array operations (one reduction each).
_UNROLLED = 3


def _max(a: jax.Array, xp: Any = jnp) -> jax.Array:
    if a.shape[0] > _UNROLLED:
        return xp.max(a)
    return functools.reduce(xp.maximum, [a[i] for i in range(a.shape[0])])


def _all(a: jax.Array, xp: Any = jnp) -> jax.Array:
    if a.shape[0] > _UNROLLED:
        return xp.all(a)
    return functools.reduce(xp.logical_and, [a[i] for i in range(a.shape[0])])


def _any(a: jax.Array, xp: Any = jnp) -> jax.Array:
    if a.shape[0] > _UNROLLED:
        return xp.any(a)
    return functools.reduce(xp.logical_or, [a[i] for i in range(a.shape[0])])


# The rules of the iteration, shared by the compiled loop (:func:`minimize`) and the
# host's Python loop (:func:`minimize_host`).
#: Armijo's sufficient-decrease fraction.
_ARMIJO = 1e-4
#: Levenberg ridge in units of eps times the largest curvature.
_RIDGE = 16
#: Default relative rounding level of the objective, in units of eps.
_RTOL = 32
#: Converged after this many consecutive points with a predicted decrease at rounding
#: level (so two such steps were taken).
_QUIET = 3


def _direction(d: Derivatives, free: jax.Array, xp: Any = jnp) -> jax.Array:
    """Newton direction on the free variables (0 on the held ones), ridge-damped."""
    p = d.grad.shape[0]
    eye = xp.eye(p, dtype=d.hess.dtype)
    both = free[:, None] & free[None, :]
    h = xp.where(both, d.hess, eye)
    g = xp.where(free, d.grad, 0)
    diag = xp.abs(xp.diagonal(h))
    tiny = xp.finfo(h.dtype).tiny
    # Levenberg ridge at rounding level of the largest curvature: keeps the solve
    # finite when the Hessian is singular (e.g. a constant feature), changes nothing
    # otherwise.
    largest = _max(diag, xp)
    ridge = _RIDGE * xp.finfo(h.dtype).eps * largest + tiny
    step = -_cholesky_solve(h + ridge * eye, g, xp)
    # Fallback when the factorisation fails or the step does not descend: the
    # diagonally scaled gradient (a descent direction whenever the gradient is not 0).
    fallback = -g / xp.maximum(diag, ridge)
    finite = _all(xp.isfinite(step), xp)
    ok = finite & (_dot(g, step, xp) <= 0)
    return xp.where(free, xp.where(ok, step, fallback), 0)


def _free(x: jax.Array, lo: jax.Array, grad: jax.Array) -> jax.Array:
    """The variables not held: a variable at its bound whose gradient pushes it further
    out is held there (Bertsekas' projected Newton)."""
    return ~((x <= lo) & (grad > 0))


def _noise(d: Derivatives, rtol: float, tiny: float) -> jax.Array:
    """The rounding level of the objective at a point."""
    return rtol * (d.magnitude + tiny)


def _accepts(d: Derivatives, x, d_t: Derivatives, trial, noise, xp: Any = jnp):
    """Armijo along the projected path, with the objective's rounding level as slack
    (within it a comparison of values means nothing)."""
    bound = d.value + _ARMIJO * _dot(d.grad, trial - x, xp) + noise
    return xp.isfinite(d_t.value) & (d_t.value <= bound)


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


def _pack(s: _State) -> jax.Array:
    """The loop state as ONE flat vector (counters and flags as exact small floats).

    One vector carried by the loop and one select per iteration, where a tuple of
    twenty scalars compiled to a kernel per scalar (compile time is what users wait
    for; the state is a few dozen numbers).
    """
    dtype = s.x.dtype
    parts = [s.x, s.d.value, s.d.grad, s.d.hess, s.d.magnitude, s.step, s.decrease]
    parts += [s.rate, s.steps, s.halvings, s.quiet, s.done, s.converged]
    return jnp.concatenate([jnp.ravel(jnp.asarray(a)).astype(dtype) for a in parts])


def _unpack(v: jax.Array, p: int) -> _State:
    i = 0

    def take(size: int, shape: tuple[int, ...] = ()) -> jax.Array:
        nonlocal i
        out = v[i : i + size].reshape(shape)
        i += size
        return out

    x, value, grad = take(p, (p,)), take(1), take(p, (p,))
    hess, magnitude = take(p * p, (p, p)), take(1)
    step, decrease, rate = take(p, (p,)), take(1), take(1)
    steps, halvings, quiet, done, converged = (take(1) for _ in range(5))
    return _State(
        x, Derivatives(value, grad, hess, magnitude), step, decrease, rate,
        steps, halvings, quiet, done > 0, converged > 0,
    )  # fmt: skip


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
        rtol = _RTOL * float(jnp.finfo(dtype).eps)
    lo = jnp.full(x0.shape, -jnp.inf, dtype) if lower is None else lower.astype(dtype)
    x0 = jnp.maximum(x0.astype(dtype), lo)
    zero = jnp.zeros((), dtype)
    p = x0.shape[0]

    def cond(v: jax.Array) -> jax.Array:
        return ~_unpack(v, p).done

    def body(v: jax.Array) -> jax.Array:
        s = _unpack(v, p)
        trial = jnp.maximum(s.x + s.rate * s.step, lo)
        d_t = objective(trial)
        tiny = jnp.finfo(dtype).tiny
        ok = _accepts(s.d, s.x, d_t, trial, _noise(s.d, rtol, tiny))
        # Accepted: the next direction from the trial point.
        step = _direction(d_t, _free(trial, lo, d_t.grad))
        decrease = -_dot(d_t.grad, step)
        quiet_t = decrease <= _noise(d_t, rtol, tiny)
        quiet = jnp.where(quiet_t, s.quiet + 1, zero)
        steps = s.steps + 1
        converged = (quiet >= _QUIET) | (decrease <= 0)
        accepted = _State(
            trial,
            d_t,
            step,
            decrease,
            jnp.ones((), dtype),
            steps,
            zero,
            quiet,
            converged | (steps >= max_steps),
            converged,
        )
        # Rejected: halve the step (give up when halving no longer moves the point).
        halvings = s.halvings + 1
        moves = _any(s.step != 0)
        stuck = (halvings >= max_halvings) | ~moves
        rejected = s._replace(rate=s.rate * 0.5, halvings=halvings, done=stuck)
        return jnp.where(ok, _pack(accepted), _pack(rejected))

    # The first trial is x0 itself (value +inf accepts any finite objective there).
    inf = jnp.asarray(jnp.inf, dtype)
    start = _State(
        x0,
        Derivatives(inf, jnp.zeros((p,), dtype), jnp.zeros((p, p), dtype), zero),
        jnp.zeros((p,), dtype),
        inf,
        jnp.zeros((), dtype),
        -jnp.ones((), dtype),
        zero,
        zero,
        jnp.asarray(False),
        jnp.asarray(False),
    )
    out = _unpack(jax.lax.while_loop(cond, body, _pack(start)), p)
    return NewtonResult(
        out.x, out.d.value, out.d.grad, out.steps.astype(jnp.int32), out.converged
    )


def minimize_host(
    objective: Callable[[np.ndarray], Derivatives],
    x0: Any,
    *,
    lower: Any = None,
    max_steps: int = 100,
    max_halvings: int = 60,
    rtol: float | None = None,
) -> NewtonResult:
    """:func:`minimize` in NumPy float64, a Python loop: the host twins' solver.

    The same iteration (projected Newton directions with the Levenberg ridge and the
    scaled-gradient fallback, Armijo with the objective's rounding level as slack, the
    held variables, converged after three quiet points) with the same helpers, on
    small concrete inputs where compiling the ``lax.while_loop`` would cost more than
    the fit. ``objective(x [P] float64) -> Derivatives`` of NumPy floats; ``rtol``
    defaults to ``32 * eps`` of float64. Returns a :class:`NewtonResult` of NumPy
    values.

    Examples
    --------
    >>> import numpy as np
    >>> def objective(x):  # (x - 2)^2 + (y + 1)^2, y >= 0
    ...     r = x - np.array([2.0, -1.0])
    ...     return Derivatives(float(r @ r), 2 * r, 2 * np.eye(2), float(r @ r) + 1)
    >>> res = minimize_host(objective, np.zeros(2), lower=np.array([-np.inf, 0.0]))
    >>> res.x.tolist(), bool(res.converged)
    ([2.0, 0.0], True)
    """
    x0 = np.asarray(x0, np.float64)
    info = np.finfo(np.float64)
    tiny = float(info.tiny)
    if rtol is None:
        rtol = _RTOL * float(info.eps)
    lo = np.full(x0.shape, -np.inf) if lower is None else np.asarray(lower, np.float64)
    x = np.maximum(x0, lo)
    p = x.shape[0]
    with np.errstate(all="ignore"):  # NaN from a failed factorisation: the fallback
        d = objective(x)  # the first trial, x0 itself (accepted when finite)
        steps, quiet = 0, 0
        if not np.isfinite(d.value):
            return NewtonResult(x, np.inf, np.zeros(p), -1, False)
        while True:
            step = _direction(d, _free(x, lo, d.grad), np)
            decrease = -_dot(d.grad, step, np)
            quiet = quiet + 1 if decrease <= _noise(d, rtol, tiny) else 0
            converged = bool((quiet >= _QUIET) | (decrease <= 0))
            if converged or steps >= max_steps:
                return NewtonResult(x, d.value, d.grad, steps, converged)
            noise, rate = _noise(d, rtol, tiny), 1.0
            for _ in range(max_halvings):
                trial = np.maximum(x + rate * step, lo)
                d_t = objective(trial)
                if _accepts(d, x, d_t, trial, noise, np):
                    break
                rate *= 0.5
            else:  # halving no longer helps
                return NewtonResult(x, d.value, d.grad, steps, False)
            x, d, steps = trial, d_t, steps + 1


# --------------------------------------------------------------------------- first call
def _any_tracer(tree: Any) -> bool:
    return any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(tree))


def fast_jit(
    fun: Callable[..., Any],
    *,
    compiler_options: Callable[[int], dict[str, Any]] | None = None,
    **jit_kwargs: Any,
) -> Callable[..., Any]:
    """``jax.jit(fun)``, compiled with :mod:`xla_options`' options when called at top level.

    Inside a trace (``jit``, ``vmap``) the plain ``jax.jit`` is used: JAX accepts
    compiler options only on top-level programs. ``compiler_options``: another policy
    for them (see ``xla_options.with_options``).
    """
    plain = jax.jit(fun, **jit_kwargs)

    @functools.cache
    def with_options(options: tuple) -> Any:
        return jax.jit(fun, compiler_options=dict(options), **jit_kwargs)

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _any_tracer((args, kwargs)):
            return plain(*args, **kwargs)
        return xla_options.with_options(
            xla_options.largest((args, kwargs)),
            lambda o: (with_options(tuple(sorted(o.items()))) if o else plain)(
                *args, **kwargs
            ),
            compiler_options,
        )

    return call


def mask_weights(n: Any, size: int, dtype: Any) -> jax.Array | None:
    """Weights 1 for the first ``n`` of ``size`` observations and 0 for the padding.

    ``n=None`` means no padding (None: no weights at all). ``n`` is a traced scalar in
    the bucketed programs, so one program serves every ``n`` of a bucket.
    """
    if n is None:
        return None
    return (jnp.arange(size) < n).astype(dtype)


def observation_weights(weights: Any, n: Any, size: int, dtype: Any) -> jax.Array | None:
    """A fit's ``weights`` argument, checked, with 0 in a bucket's padding.

    ``weights`` (None: every observation weighs 1) must be ``[size]``, finite and
    ``>= 0`` and not all 0 (a ``ValueError`` naming ``weights``; NaN results under
    tracing), the checks of the metrics' ``weights``
    (:func:`bayescal._src.reduce.check_weights`). The padding repeats the last weight
    and gets weight 0 here (:func:`mask_weights`). Returns None when there are neither
    weights nor padding.
    """
    from .reduce import check_weights  # reduce imports validation, as this module does

    mask = mask_weights(n, size, dtype)
    w = check_weights(weights, size, dtype)
    if w is None:
        return mask
    return w if mask is None else jnp.where(mask > 0, w, jnp.zeros((), w.dtype))


def _host_paddable(arrays: tuple) -> tuple | None:
    """The arrays as numpy (or device) arrays of one common length ``N`` along axis 0."""
    out = []
    first = next(a for a in arrays if a is not None)
    for a in arrays:
        if a is None:  # an optional array left out (e.g. weights=None): not padded
            out.append(None)
            continue
        if isinstance(a, jax.core.Tracer | np.ma.MaskedArray):
            return None  # masked: the ordinary path refuses it (np.asarray drops the mask)
        if not isinstance(a, jax.Array):
            try:
                a = np.asarray(a)
            except Exception:
                return None
            if a.dtype.kind not in "biuf":
                return None
        if a.ndim == 0 or a.shape[0] == 0 or a.shape[0] != np.shape(first)[0]:
            return None
        out.append(a)
    return tuple(out)


def bucketed_fit(
    core: Callable[..., Any],
    arrays: tuple,
    options: dict,
    *,
    fallback: Callable[[], Any] | None = None,
    compiler_options: Callable[[int], dict[str, Any]] | None = None,
) -> Any:
    """A public fit as ONE compiled program per bucket of ``N`` (checks included).

    ``core(*arrays, n, **options)`` validates and fits (an entry of ``arrays`` may be
    None, an optional array left out: it is passed on as None) (recording its value checks with
    :mod:`bayescal._src.validation`); ``n`` is the number of real observations (a
    traced scalar: the arrays hold ``bucket_size(N)`` rows, the padding repeating the
    last row, so every value check gives what it gives on the real rows) or None when
    the arrays are not padded. Eagerly, on arrays of one common length ``N``, the
    arrays are padded on the host and the fit, checks and all, runs as one program
    compiled once per bucket and option set: a new ``N`` in a bucket compiles nothing.
    When a check fails, or under ``jit``/``vmap``, ``fallback()`` runs instead (by
    default ``core`` unpadded through the ordinary validated path, which raises the
    detailed error, or makes the result NaN under tracing). ``compiler_options``: as in
    :func:`fast_jit` (default: ``xla_options.fit_compiler_options``). One call at a
    time, as every validated public function (``validation.one_call_at_a_time``: the
    host callbacks of concurrent programs can starve JAX's CPU threads).
    """
    return _v.one_call_at_a_time(
        lambda: _bucketed_fit(core, arrays, options, fallback, compiler_options)
    )


def _bucketed_fit(core, arrays, options, fallback, compiler_options):
    try:
        host = _host_paddable(arrays)
        if host is not None:
            n = int(host[0].shape[0])
            size = bucket_size(n)
            args = tuple(None if a is None else pad_axis(a, size, axis=0) for a in host)
            args += (np.asarray(n, np.int32),)
        else:
            args = tuple(arrays) + (None,)
        res = xla_options.with_options(
            xla_options.largest(args),
            lambda o: _v.fused_call(core, args, options, compiler_options=o),
            compiler_options or xla_options.fit_compiler_options,
        )
    except Exception:  # e.g. a wrong shape: the ordinary path raises the right error
        res = None
    if res is not None and bool(res[1]):  # the one host sync
        return res[0]
    if fallback is not None:
        return fallback()
    return _v.validated(core)(*arrays, None, **options)


def apply_bucketed(kernel: Callable[..., Any], params: Any, x: jax.Array, **static: Any):
    """``kernel(params, x, **static)`` for a calibrator's call, compiled once per bucket.

    ``kernel`` maps ``x [N, ...]`` row by row (a :func:`fast_jit` function; its result
    an array or a tuple of arrays, each ``[N, ...]``). A
    :func:`~bayescal._src.validation.paddable` ``x`` is padded on the host to :func:`bucket_size` rows (repeating
    the last row) and the result sliced back in NumPy, so a new ``N`` in a bucket
    compiles nothing; other inputs (traced, sharded, 0-d) go through as they are.
    """
    if (
        x.ndim == 0
        or x.shape[0] == 0
        or isinstance(x, jax.core.Tracer)
        or _any_tracer(params)
        or not _v.paddable(x)
    ):
        return kernel(params, x, **static)
    n = int(x.shape[0])
    size = bucket_size(n)
    if size == n:
        return kernel(params, x, **static)
    out = kernel(params, jax.device_put(pad_axis(x, size, axis=0)), **static)
    return jax.tree_util.tree_map(lambda a: _v.slice_without_program(a, slice(0, n)), out)
