"""Multiclass scaling calibrators: vector scaling, matrix scaling and Dirichlet calibration.

All three are multinomial logistic regressions of the labels on a per-class linear
map of the inputs, fitted by the shared damped Newton solver
(:func:`bayescal._src.newton.minimize`) with the gradient and Hessian written out:

- vector scaling (Guo et al. 2017): ``softmax(w * z + b)`` on logits ``z``, 2K
  parameters;
- matrix scaling (Guo et al. 2017): ``softmax(W z + b)``, K(K + 1) parameters, with
  the off-diagonal and intercept regularisation (ODIR) of Kull et al. (2019);
- Dirichlet calibration (Kull et al. 2019): matrix scaling on ``log p``.

The Newton system has K(K + 1) unknowns (110 at K = 10); it is solved by a Cholesky
factorisation inside the solver's ``lax.while_loop`` (one compiled program per call,
bucketed over N). The cost per Newton step is O(N K^2 (K + 1)^2) for the Hessian and
O(K^6) for the factorisation: fine up to a few dozen classes.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton
from bayescal._src import newton as _newton
from bayescal._src import validation as _v
from bayescal._src.host import (
    _BAD,
    _F32,
    _device,
    _floats,
    _normal,
    _observation_weights,
    _vector,
)
from bayescal._src.host import first as host_first
from bayescal._src.pytree import pytree_dataclass
from bayescal._src.warn import warn
from bayescal.classification._host import (
    _SCALING_MAX,
    _class_labels,
    _eps_ok,
    _softmax_rows,
    softmax,
)
from bayescal.classification._inputs import check_eps, multiclass_inputs

__all__ = [
    "VectorScalingCalibrator",
    "MatrixScalingCalibrator",
    "DirichletCalibrator",
    "fit_vector_scaling",
    "fit_matrix_scaling",
    "fit_dirichlet",
]

_HIGHEST = jax.lax.Precision.HIGHEST
REGULARIZATIONS = ("odir", "l2")


# --------------------------------------------------------------------------- inputs
def _logit_inputs(y_true: Any, logits: Any) -> tuple[jax.Array, jax.Array]:
    """Integer labels ``[N]`` and finite logits ``[N, C]``, C >= 2."""
    z = _v.as_float_array(logits, "logits")
    if z.ndim != 2 or z.shape[1] < 2:
        raise ValueError(
            f"logits must be 2-D [N, C] class logits with C >= 2; got shape "
            f"{tuple(z.shape)}. For a binary classifier pass the two columns "
            "(0, logit), or use fit_platt."
        )
    _v.check_nonempty(z, "logits")
    _v.check_finite(z, "logits")
    y = _v.check_class_labels(y_true, "y_true", z.shape[1], "one per column of logits")
    if y.ndim != 1 or y.shape[0] != z.shape[0]:
        raise ValueError(
            f"y_true has shape {tuple(y.shape)} but logits has shape {tuple(z.shape)}; "
            "pass one integer label per row of logits."
        )
    return y, z


def _check_reg(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a float >= 0; got {value!r}.")
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(
            f"{name} must be a finite float >= 0 (0: no penalty); got {value!r}."
        )
    return float(value)


def _record_every_class(y: jax.Array, weights: jax.Array, num_classes: int) -> None:
    counts = jnp.sum(
        (y[:, None] == jnp.arange(num_classes)[None, :]) * weights[:, None], axis=0
    )
    _v.record(
        "less_equal",
        "y_true",
        jnp.any(counts == 0),
        False,
        what=(
            "must hold every class (with positive weight): a class that never occurs "
            "has no finite maximum-likelihood intercept. Use a larger or stratified "
            "calibration set"
        ),
    )


# --------------------------------------------------------------------------- objective
def _softmax_parts(eta: jax.Array, y: jax.Array):
    """``(q, loss)``: softmax of ``eta`` [N, K] and the NLL of label ``y`` per row."""
    top = jnp.max(eta, axis=1, keepdims=True)
    e = jnp.exp(eta - top)
    total = jnp.sum(e, axis=1, keepdims=True)
    q = e / total
    eta_y = jnp.take_along_axis(eta, y[:, None], axis=1)[:, 0]
    loss = (top[:, 0] - eta_y) + jnp.log(total[:, 0])
    return q, loss


def _scaling_objective(
    features: jax.Array,
    y: jax.Array,
    weights: jax.Array,
    penalty: jax.Array,
    gauge: np.ndarray,
    target: np.ndarray,
    *,
    shared: bool,
):
    r"""Weighted multinomial NLL of a per-class linear map, with a quadratic penalty.

    Parameters are ``theta [K, D]`` (flattened row by row). ``shared=True``: the
    features ``x [N, D]`` are the same for every class, :math:`\eta_{ik} = \theta_k
    \cdot x_i` (matrix scaling: ``x = (z, 1)``); ``shared=False``: ``features [N, K,
    D]``, :math:`\eta_{ik} = \theta_k \cdot x_{ik}` (vector scaling: ``x_ik = (z_ik,
    1)``). ``penalty [K, D]`` adds :math:`\sum c_{kd} \theta_{kd}^2` (already scaled
    by the total weight). ``gauge [D]`` (static bool): columns :math:`d` whose shift
    :math:`\theta_{kd} \to \theta_{kd} + v` for all k leaves the objective unchanged
    (softmax is shift invariant and nothing penalises them); the term
    :math:`\frac{n}{2}(\sum_k \theta_{kd} - t_d)^2` fixes them to the point of the
    orbit whose column sum is ``target[d]``, without changing the minimum (it is 0
    there) and makes the Hessian positive definite.
    """
    k, d = (int(s) for s in penalty.shape)
    onehot = (y[:, None] == jnp.arange(k)[None, :]).astype(features.dtype)
    n_total = jnp.sum(weights)
    gauge_cols = jnp.asarray(gauge, features.dtype)  # [D] 0/1
    target_cols = jnp.asarray(target, features.dtype)

    def objective(x: jax.Array) -> newton.Derivatives:
        theta = x.reshape(k, d)
        if shared:
            eta = jnp.dot(features, theta.T, precision=_HIGHEST)  # [N, K]
        else:
            eta = jnp.sum(features * theta[None], axis=-1)
        q, loss = _softmax_parts(eta, y)
        r = (q - onehot) * weights[:, None]  # [N, K]
        wq = q * weights[:, None]
        loss = loss * weights
        loss, r, wq = jax.lax.optimization_barrier((loss, r, wq))
        if shared:
            # block sums (newton.accurate_sum): rounding that grows with the block size,
            # not with N, and the same summation order padded or not
            grad = newton.accurate_sum(r[:, :, None] * features[:, None, :])  # [K, D]
            # diagonal blocks: sum_i w q_ik x_i x_i^T
            blocks = jnp.einsum("nk,nd,ne->kde", wq, features, features, precision=_HIGHEST)
            v = (q[:, :, None] * features[:, None, :]).reshape(-1, k * d)
        else:
            grad = newton.accurate_sum(r[:, :, None] * features)
            blocks = jnp.einsum("nk,nkd,nke->kde", wq, features, features, precision=_HIGHEST)
            v = (q[:, :, None] * features).reshape(-1, k * d)
        outer = jnp.dot((v * weights[:, None]).T, v, precision=_HIGHEST)
        hess = jnp.einsum("kl,kde->kdle", jnp.eye(k, dtype=x.dtype), blocks).reshape(
            k * d, k * d
        )
        hess = hess - outer
        # the penalty
        pen = jnp.sum(penalty * theta**2)
        grad = grad + 2 * penalty * theta
        hess = hess + jnp.diag(2 * penalty.reshape(-1))
        # the gauge term (n / 2) sum_d g_d (sum_k theta_kd - t_d)^2
        off = (jnp.sum(theta, axis=0) - target_cols) * gauge_cols  # [D]
        pen = pen + 0.5 * n_total * jnp.sum(off**2)
        grad = grad + n_total * off[None, :]
        ones = jnp.ones((k, k), x.dtype)
        hess = hess + n_total * jnp.einsum("kl,de->kdle", ones, jnp.diag(gauge_cols)).reshape(
            k * d, k * d
        )
        value = newton.accurate_sum(loss) + pen
        return newton.Derivatives(value, grad.reshape(-1), hess, value)  # all terms >= 0

    return objective


@functools.partial(jax.jit, static_argnames=("shared", "gauge", "target"))
def _scaling_fit(features, y, weights, penalty, x0, *, shared, gauge, target):
    """``(theta [K, D], converged, value)`` of :func:`_scaling_objective`."""
    objective = _scaling_objective(
        features, y, weights, penalty, np.asarray(gauge), np.asarray(target), shared=shared
    )
    res = newton.minimize(objective, x0.reshape(-1))
    return res.x.reshape(x0.shape), res.converged


def _weights(weights: Any, n: Any, size: int, dtype: Any) -> jax.Array:
    w = newton.observation_weights(weights, n, size, dtype)
    return jnp.ones((size,), dtype) if w is None else w


def _warn(name: str, converged: Any) -> None:
    if _v.is_concrete(converged) and not bool(converged):
        warn(
            f"{name} did not converge in 100 Newton steps: the classes are (nearly) "
            "separated by the inputs, so some maximum-likelihood parameters are "
            "infinite. Use more (held-out) calibration data or a penalty "
            "(reg_lambda, reg_mu > 0 where the fit takes them).",
            RuntimeWarning,
        )


# --------------------------------------------------------------------------- apply
@newton.fast_jit
def _vector_apply(params, z):
    coef, intercept = params
    eta = z * coef.astype(z.dtype) + intercept.astype(z.dtype)
    return softmax(eta, jnp).astype(z.dtype)


def _matrix_map(coef, intercept, x):
    eta = jnp.dot(x, coef.astype(x.dtype).T, precision=_HIGHEST) + intercept.astype(x.dtype)
    return softmax(eta, jnp).astype(x.dtype)


# --------------------------------------------------------------------------- host twins
_SCALING_COST = 2e8


def _multiclass_weights(weights: Any, y: np.ndarray, k: int, dtype: Any) -> np.ndarray | None:
    """Checked observation weights in float64 (ones for None), or None: bad weights, or
    a class without positive weight (the kernel path's messages)."""
    if weights is None:
        w = np.ones(y.size)
    else:
        w = _observation_weights(weights, np.empty(y.size, dtype))
        if w is _BAD:
            return None
        w = w.astype(np.float64)
    if not (np.bincount(y, w, k) > 0).all():
        return None
    return w


def _logit_matrix(logits: Any) -> np.ndarray | None:
    """Finite (and 0 or normal) ``[N, C]`` logits with ``C >= 2``, or None."""
    z = _floats(logits, _SCALING_MAX)
    if z is None or z.ndim != 2 or z.shape[0] == 0 or z.shape[1] < 2:
        return None
    return z if _normal(z.reshape(-1)) else None


def multinomial_newton(
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    pen: np.ndarray,
    gauge: np.ndarray,
    target: np.ndarray,
    start: np.ndarray,
    max_steps: int = 100,
) -> tuple[np.ndarray, bool]:
    """``argmin_theta`` of ``classification._scaling._scaling_objective`` (divided by
    the total weight) in float64: ``theta [K, D]``, ``eta_ik = theta_k . x_i`` for
    shared features ``x [N, D]`` (matrix scaling) or ``theta_k . x_ik`` for ``x [N, K,
    D]`` (vector scaling); the weighted mean multinomial NLL of the labels ``y`` plus
    ``sum pen theta^2`` plus the gauge term ``1/2 sum_d gauge_d (sum_k theta_kd -
    target_d)^2``.

    The kernel's solver (:func:`~bayescal._src.newton.minimize_host`) from ``start``;
    the objective is strictly convex (the gauge term fixes softmax's free shift), so
    the optimum is the kernel's. False when the solver did not converge (the steps ran
    out: separated classes, the kernel path warns)."""
    k, d = start.shape
    n = y.size
    if n * k * k > _SCALING_MAX * 32:  # the [N, K, K] curvature weights: 32 MiB at most
        return start, False
    shared = x.ndim == 2
    wn = w / w.sum()
    rows = np.arange(n)
    gauge = gauge.astype(np.float64)
    # no BLAS (einsum runs its own loops): see _penalised_newton
    if shared:
        upper = np.triu_indices(d)
        pairs = x[:, upper[0]] * x[:, upper[1]]  # [N, D(D+1)/2]
    else:  # [K, D, N]: einsum's loops run over contiguous N (5x faster than [N, K, D])
        x_t = np.ascontiguousarray(np.moveaxis(x, 0, -1))
    fixed = np.diag(2 * pen.reshape(-1)) + np.kron(np.ones((k, k)), np.diag(gauge))

    def objective(flat: np.ndarray) -> _newton.Derivatives:
        theta = flat.reshape(k, d)
        eta = np.einsum("nd,kd->nk", x, theta) if shared else np.einsum("kdn,kd->nk", x_t, theta)
        top = eta.max(axis=1, keepdims=True)
        e = np.exp(eta - top)
        total = e.sum(axis=1, keepdims=True)
        nll = top[:, 0] + np.log(total[:, 0]) - eta[rows, y]
        off = (theta.sum(axis=0) - target) * gauge
        val = np.einsum("n,n->", wn, nll) + np.sum(pen * theta**2) + 0.5 * np.sum(off**2)
        q = e / total
        wq = q * wn[:, None]
        r = wq.copy()
        r[rows, y] -= wn
        if shared:
            c = -np.einsum("nk,nl->nkl", wq, q)  # wn (diag(q) - q q')
            c[:, np.arange(k), np.arange(k)] += wq
            grad = np.einsum("nk,nd->kd", r, x)
            packed = np.einsum("nkl,nj->klj", c, pairs)
            full = np.empty((k, k, d, d))
            full[:, :, upper[0], upper[1]] = packed
            full[:, :, upper[1], upper[0]] = packed
            hess = full.transpose(0, 2, 1, 3)
        else:
            grad = np.einsum("kn,kdn->kd", r.T, x_t)
            # two-operand sums (einsum's fast loops): the outer part, then the blocks
            wqx = (wq.T[:, None, :] * x_t).reshape(k * d, n)
            qx = (q.T[:, None, :] * x_t).reshape(k * d, n)
            hess = -np.einsum("pn,rn->pr", wqx, qx).reshape(k, d, k, d)
            blocks = np.einsum("kdn,ken->kde", wqx.reshape(k, d, n), x_t)
            hess[np.arange(k), :, np.arange(k), :] += blocks
        grad = grad + 2 * pen * theta + off[None, :]
        hess = hess.reshape(k * d, k * d) + fixed
        val = float(val)  # every term >= 0: the magnitude is the value
        return _newton.Derivatives(val, grad.reshape(-1), hess, val)

    res = _newton.minimize_host(objective, start.reshape(-1), max_steps=max_steps)
    return res.x.reshape(k, d), bool(res.converged)


def _scaling_result(theta: np.ndarray, dtype: Any) -> np.ndarray | None:
    """Fitted parameters in the kernel's dtype, or None (not finite, or subnormal)."""
    out = theta.astype(dtype)
    return out if _normal(out.reshape(-1)) else None


def _twin_fit_vector_scaling(y_true: Any, logits: Any, *, weights: Any = None) -> Any:
    """:func:`bayescal.classification.fit_vector_scaling` on the host: the kernel's
    objective (gauge: intercepts summing to 0) by :func:`multinomial_newton`."""

    z = _logit_matrix(logits)
    if z is None:
        return None
    n, k = z.shape
    if n * (2 * k) ** 2 > _SCALING_COST:
        return None
    y = _class_labels(y_true, n, k)
    if y is None:
        return None
    w = _multiclass_weights(weights, y, k, z.dtype)
    if w is None:
        return None
    z64 = z.astype(np.float64)
    x = np.stack([z64, np.ones_like(z64)], axis=-1)  # [N, K, 2]
    start = np.stack([np.ones(k), np.zeros(k)], axis=1)
    theta, ok = multinomial_newton(
        x, y, w, np.zeros((k, 2)), np.array([False, True]), np.zeros(2), start
    )
    theta = _scaling_result(theta, z.dtype) if ok else None
    if theta is None:
        return None
    return VectorScalingCalibrator(
        _device(np.ascontiguousarray(theta[:, 0])), _device(np.ascontiguousarray(theta[:, 1]))
    )


def _matrix_fit(
    y: np.ndarray, x: np.ndarray, w: np.ndarray, regularization: str, reg_lambda: float,
    reg_mu: float, dtype: Any,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``_fit_matrix_core`` on the host: ``(coef [K, K], intercept [K])`` or None."""

    n, k = x.shape
    if n * (k * (k + 1)) ** 2 > _SCALING_COST:
        return None
    pen, gauge, target = penalty_table(k, regularization, reg_lambda, reg_mu)
    # the kernel's penalty is rounded to the dtype (before its scaling by the weight)
    pen = pen.astype(dtype).astype(np.float64)
    features = np.concatenate([x.astype(np.float64), np.ones((n, 1))], axis=1)
    start = np.concatenate([np.eye(k), np.zeros((k, 1))], axis=1)
    theta, ok = multinomial_newton(
        features, y, w, pen, np.array(gauge), np.array(target), start
    )
    theta = _scaling_result(theta, dtype) if ok else None
    if theta is None:
        return None
    return np.ascontiguousarray(theta[:, :k]), np.ascontiguousarray(theta[:, k])


def _twin_fit_matrix_scaling(
    y_true: Any, logits: Any, *, reg_lambda: Any = 0.0, reg_mu: Any = 0.0, weights: Any = None
) -> Any:
    """:func:`bayescal.classification.fit_matrix_scaling` on the host (ODIR penalty)."""

    reg_lambda, reg_mu = _check_reg(reg_lambda, "reg_lambda"), _check_reg(reg_mu, "reg_mu")
    z = _logit_matrix(logits)
    if z is None:
        return None
    y = _class_labels(y_true, *z.shape)
    if y is None:
        return None
    w = _multiclass_weights(weights, y, z.shape[1], z.dtype)
    if w is None:
        return None
    fit = _matrix_fit(y, z, w, "odir", reg_lambda, reg_mu, z.dtype)
    if fit is None:
        return None
    return MatrixScalingCalibrator(*(_device(a) for a in fit))


def _twin_fit_dirichlet(
    y_true: Any,
    probs: Any,
    *,
    regularization: Any = "odir",
    reg_lambda: Any = 0.0,
    reg_mu: Any = 0.0,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_dirichlet` on the host: matrix scaling of the
    log probabilities (taken in the dtype, clipped with ``eps``, as the kernel)."""

    if regularization not in REGULARIZATIONS or not _eps_ok(eps):
        return None
    reg_lambda, reg_mu = _check_reg(reg_lambda, "reg_lambda"), _check_reg(reg_mu, "reg_mu")
    if regularization == "l2" and reg_mu != 0:
        return None
    p = _floats(probs, _SCALING_MAX)
    if p is None or p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        return None
    n, k = p.shape
    if not _normal(p.reshape(-1), 0, 1):
        return None
    # rows summing to 1 (multiclass_inputs' tolerance, halved: near it, the kernel decides)
    tol = 1e-4 if p.dtype == _F32 else 1e-8
    if not (np.abs(p.astype(np.float64).sum(axis=1) - 1) <= 0.5 * tol * k).all():
        return None
    if eps is None:
        if not (p.min() > 0 and p.max() < 1):
            return None  # log(0): the kernel's message
        q = p
    else:
        q = np.clip(p, p.dtype.type(eps), p.dtype.type(1 - eps))
    x = np.log(q)
    if not _normal(x.reshape(-1)):
        return None
    y = _class_labels(y_true, n, k)
    if y is None:
        return None
    w = _multiclass_weights(weights, y, k, p.dtype)
    if w is None:
        return None
    fit = _matrix_fit(y, x, w, regularization, reg_lambda, reg_mu, p.dtype)
    if fit is None:
        return None
    return DirichletCalibrator(*(_device(a) for a in fit), eps)


def _scaling_params(calibrator: Any, matrix: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """A scaling calibrator's ``(coef, intercept)``: finite, of one float dtype."""
    coef, intercept = _floats(calibrator.coef), _vector(calibrator.intercept)
    if coef is None or intercept is None or not isinstance(calibrator.coef, jax.Array):
        return None
    k = intercept.size
    if coef.shape != ((k, k) if matrix else (k,)) or coef.dtype != intercept.dtype:
        return None
    return (coef, intercept) if _normal(coef.reshape(-1)) and _normal(intercept) else None


def _class_columns(x: Any, k: int) -> np.ndarray | None:
    """``[N, k]`` inputs (N >= 1) of a calibrator's call, or None."""
    a = _floats(x, _SCALING_MAX)
    return a if a is not None and a.ndim == 2 and a.shape[0] and a.shape[1] == k else None


def _twin_vector_scaling_apply(calibrator: Any, logits: Any) -> jax.Array | None:
    """``VectorScalingCalibrator.__call__`` on the host."""
    params = _scaling_params(calibrator, False)
    if params is None:
        return None
    coef, intercept = params
    z = _class_columns(logits, coef.size)
    if z is None or not _normal(z.reshape(-1)):
        return None
    dt = z.dtype
    eta = z * coef.astype(dt) + intercept.astype(dt)  # in the dtype, as the kernel
    return _device(_softmax_rows(eta.astype(np.float64), dt))


def _twin_matrix_map(coef: np.ndarray, intercept: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``softmax(x W' + b)`` in ``x``'s dtype (float64 inside, no BLAS)."""
    dt = x.dtype
    w64, b64 = coef.astype(dt).astype(np.float64), intercept.astype(dt).astype(np.float64)
    return _softmax_rows(np.einsum("nj,kj->nk", x.astype(np.float64), w64) + b64, dt)


def _twin_matrix_scaling_apply(calibrator: Any, logits: Any) -> jax.Array | None:
    """``MatrixScalingCalibrator.__call__`` on the host."""
    params = _scaling_params(calibrator, True)
    if params is None:
        return None
    z = _class_columns(logits, params[1].size)
    if z is None or not _normal(z.reshape(-1)):
        return None
    return _device(_twin_matrix_map(*params, z))


def _twin_dirichlet_apply(calibrator: Any, probs: Any) -> jax.Array | None:
    """``DirichletCalibrator.__call__`` on the host (the log in the dtype)."""
    params = _scaling_params(calibrator, True)
    if params is None or not _eps_ok(calibrator.eps):
        return None
    p = _class_columns(probs, params[1].size)
    if p is None or not _normal(p.reshape(-1), 0, 1):
        return None
    eps = calibrator.eps
    if eps is None:
        if not (p.min() > 0 and p.max() < 1):
            return None  # log(0): the kernel's message
    else:
        p = np.clip(p, p.dtype.type(eps), p.dtype.type(1 - eps))
    return _device(_twin_matrix_map(*params, np.log(p)))


@newton.fast_jit
def _matrix_apply(params, z):
    return _matrix_map(*params, z)


def _log_probs(p: jax.Array, eps: float | None) -> jax.Array:
    q = p if eps is None else jnp.clip(p, eps, 1 - eps)
    return jnp.log(q)


@functools.partial(jax.jit, static_argnames=("eps",))
def _dirichlet_apply_kernel(coef, intercept, p, *, eps):
    return _matrix_map(coef, intercept, _log_probs(p, eps))


@functools.partial(newton.fast_jit, static_argnames=("eps",))
def _dirichlet_apply(params, p, *, eps):
    return _dirichlet_apply_kernel(*params, p, eps=eps)


def _check_columns(x: jax.Array, name: str, num_classes: int) -> None:
    if x.ndim != 2 or x.shape[1] != num_classes:
        raise ValueError(
            f"{name} must have shape [N, {num_classes}] (one column per fitted class); "
            f"got {tuple(x.shape)}."
        )


# --------------------------------------------------------------------------- vector
@pytree_dataclass(data=("coef", "intercept"))
class VectorScalingCalibrator:
    r"""Vector scaling: :math:`\mathrm{softmax}(w \odot z + b)` on ``[N, C]`` logits.

    Create it with :func:`fit_vector_scaling`.

    Attributes
    ----------
    coef : Array [C]
        The per-class slopes :math:`w` (temperature scaling is :math:`w_k = 1/T`).
    intercept : Array [C]
        The per-class intercepts :math:`b`, centred to sum to 0 (softmax ignores a
        common shift).
    """

    coef: jax.Array
    intercept: jax.Array

    @host_first(_twin_vector_scaling_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, logits: Any) -> jax.Array:
        """Calibrated ``[N, C]`` probabilities (rows sum to 1)."""
        z = _v.as_float_array(logits, "logits")
        _check_columns(z, "logits", self.coef.shape[-1])
        _v.check_finite(z, "logits")
        return newton.apply_bucketed(_vector_apply, (self.coef, self.intercept), z)


@host_first(_twin_fit_vector_scaling)
def fit_vector_scaling(
    y_true: Any, logits: Any, *, weights: Any = None
) -> VectorScalingCalibrator:
    r"""Fit vector scaling (Guo et al. 2017): per-class slopes and intercepts on logits.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels ``0 .. C-1``.
    logits : array_like, shape [N, C]
        Uncalibrated logits (pre-softmax scores); ``np.log(probs)`` works as well.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): each multiplies its
        observation's term of the NLL, so an integer weight equals repeating the row
        and a weight of 0 removes it. Finite, ``>= 0``, not all 0.

    Returns
    -------
    VectorScalingCalibrator
        ``coef`` and ``intercept`` in ``logits``' dtype.

    Warns
    -----
    RuntimeWarning
        When the Newton iteration did not converge (classes separated by the logits).

    Notes
    -----
    .. math:: (\hat w, \hat b) = \arg\min_{w, b} -\sum_i \omega_i
              \log \mathrm{softmax}(w \odot z_i + b)_{y_i}

    with observation weights :math:`\omega_i`. The objective is convex; softmax
    ignores a common shift of :math:`b`, so the fit takes the :math:`b` that sums to
    0 (a gauge term that is 0 at the optimum). Solved by damped Newton steps with the
    gradient and Hessian written out (the shared solver of ``bayescal._src.newton``,
    2C parameters, from the identity :math:`w = 1, b = 0`). ``jax.jit`` and
    ``jax.vmap`` work; there invalid values give NaN parameters instead of an error.
    Every class must occur in ``y_true``.

    For two classes on logits :math:`(0, s_i)` vector scaling is Platt scaling of
    :math:`s` (``fit_platt(input="score", soft_labels=False)``); with all
    :math:`w_k` equal and :math:`b = 0` it is temperature scaling, so its NLL is never
    above :func:`fit_temperature`'s. Unlike temperature scaling it can change the
    predicted class.

    References
    ----------
    Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On calibration of
    modern neural networks. *ICML*, Sec. 4.2.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_vector_scaling
    >>> logits = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0],
    ...                    [2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 0.0, 2.0]])
    >>> cal = fit_vector_scaling([0, 1, 2, 1, 1, 0], logits)
    >>> cal.coef.shape, cal(logits).shape
    ((3,), (6, 3))
    """
    cal, converged = newton.bucketed_fit(_fit_vector, (y_true, logits, weights), {})
    _warn("fit_vector_scaling", converged)
    return cal


def _fit_vector(y_true, logits, weights, n):
    y, z = _logit_inputs(y_true, logits)
    num, k = z.shape
    w = _weights(weights, n, num, z.dtype)
    _record_every_class(y, w, k)
    features = jnp.stack([z, jnp.ones_like(z)], axis=-1)  # [N, K, 2]
    x0 = jnp.stack([jnp.ones((k,), z.dtype), jnp.zeros((k,), z.dtype)], axis=1)
    penalty = jnp.zeros((k, 2), z.dtype)
    theta, converged = _scaling_fit(
        features, y, w, penalty, x0, shared=False, gauge=(False, True), target=(0.0, 0.0)
    )
    return VectorScalingCalibrator(theta[:, 0], theta[:, 1]), converged


# --------------------------------------------------------------------------- matrix
def penalty_table(k: int, regularization: str, reg_lambda: float, reg_mu: float):
    """``(penalty [K, K+1] per unit of weight, gauge, target)`` for ODIR or L2 (Kull
    et al. 2019), in NumPy float64 (the host twins of ``bayescal._src.host`` use it)."""
    offdiag = 1.0 - np.eye(k)
    if regularization == "odir":
        lam = reg_lambda / (k * (k - 1))
        pen = np.concatenate([lam * offdiag, np.full((k, 1), reg_mu / k)], axis=1)
        gauge = tuple([reg_lambda == 0] * k + [reg_mu == 0])
    else:  # "l2": every coefficient and intercept, dirichletcal's normalisation
        pen = np.full((k, k + 1), reg_lambda / (k * (k + 1)))
        gauge = tuple([reg_lambda == 0] * (k + 1))
    target = tuple([1.0] * k + [0.0])  # the identity's column sums
    return pen, gauge, target


def _matrix_penalty(k: int, n_total, dtype, regularization: str, reg_lambda, reg_mu):
    """``(penalty [K, K+1], gauge, target)``: :func:`penalty_table`, the penalty
    scaled by the total weight."""
    pen, gauge, target = penalty_table(k, regularization, reg_lambda, reg_mu)
    return jnp.asarray(pen, dtype) * n_total, gauge, target


def _fit_matrix_core(y, x, w, *, regularization, reg_lambda, reg_mu):
    num, k = x.shape
    _record_every_class(y, w, k)
    features = jnp.concatenate([x, jnp.ones((num, 1), x.dtype)], axis=1)  # [N, K+1]
    penalty, gauge, target = _matrix_penalty(
        k, jnp.sum(w), x.dtype, regularization, reg_lambda, reg_mu
    )
    x0 = jnp.concatenate([jnp.eye(k, dtype=x.dtype), jnp.zeros((k, 1), x.dtype)], axis=1)
    theta, converged = _scaling_fit(
        features, y, w, penalty, x0, shared=True, gauge=gauge, target=target
    )
    return theta[:, :k], theta[:, k], converged


@pytree_dataclass(data=("coef", "intercept"))
class MatrixScalingCalibrator:
    r"""Matrix scaling: :math:`\mathrm{softmax}(W z + b)` on ``[N, C]`` logits.

    Create it with :func:`fit_matrix_scaling`.

    Attributes
    ----------
    coef : Array [C, C]
        The matrix :math:`W` (row k gives class k's new logit).
    intercept : Array [C]
        The intercepts :math:`b`.
    """

    coef: jax.Array
    intercept: jax.Array

    @host_first(_twin_matrix_scaling_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, logits: Any) -> jax.Array:
        """Calibrated ``[N, C]`` probabilities (rows sum to 1)."""
        z = _v.as_float_array(logits, "logits")
        _check_columns(z, "logits", self.coef.shape[-1])
        _v.check_finite(z, "logits")
        return newton.apply_bucketed(_matrix_apply, (self.coef, self.intercept), z)


@host_first(_twin_fit_matrix_scaling)
def fit_matrix_scaling(
    y_true: Any,
    logits: Any,
    *,
    reg_lambda: float = 0.0,
    reg_mu: float = 0.0,
    weights: Any = None,
) -> MatrixScalingCalibrator:
    r"""Fit matrix scaling (Guo et al. 2017) with Kull et al.'s ODIR penalty.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels ``0 .. C-1``.
    logits : array_like, shape [N, C]
        Uncalibrated logits (pre-softmax scores).
    reg_lambda : float >= 0, default 0
        Weight :math:`\lambda` of the off-diagonal penalty.
    reg_mu : float >= 0, default 0
        Weight :math:`\mu` of the intercept penalty. Both 0: Guo et al.'s
        unregularised matrix scaling.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): each multiplies its
        observation's term of the NLL (the mean below is the weighted mean), so an
        integer weight equals repeating the row and a weight of 0 removes it. Finite,
        ``>= 0``, not all 0.

    Returns
    -------
    MatrixScalingCalibrator
        ``coef`` ``[C, C]`` and ``intercept`` ``[C]`` in ``logits``' dtype.

    Warns
    -----
    RuntimeWarning
        When the Newton iteration did not converge (classes separated by the logits:
        add a penalty).

    Notes
    -----
    Kull et al. (2019), Sec. 4 ("ODIR"):

    .. math:: L(W, b) = -\frac{1}{n}\sum_i \log \mathrm{softmax}(W z_i + b)_{y_i}
              + \frac{\lambda}{C(C-1)} \sum_{k \ne j} W_{kj}^2
              + \frac{\mu}{C} \sum_k b_k^2 .

    The diagonal of :math:`W` is not penalised, so a strong penalty shrinks matrix
    scaling towards vector scaling without intercepts. The objective is convex. Where
    nothing penalises them, softmax's invariance to a common shift of the logits
    leaves a direction free (adding a vector to every row of :math:`W`, or a constant
    to :math:`b`): the fit then takes the point whose column sums are the
    identity's (those of :math:`W` are 1, those of :math:`b` 0); predictions do not
    depend on this choice. Solved by damped Newton steps on all :math:`C(C + 1)`
    parameters (the shared solver of ``bayescal._src.newton`` with a Cholesky
    solve, from the identity :math:`W = I, b = 0`); each step costs
    :math:`O(N C^4 + C^6)`. ``jax.jit`` and ``jax.vmap`` work; there invalid values
    give NaN parameters instead of an error. Every class must occur in ``y_true``.

    References
    ----------
    Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On calibration of
    modern neural networks. *ICML*, Sec. 4.2.
    Kull, M., Perello-Nieto, M., Kängsepp, M., Silva Filho, T., Song, H. and Flach,
    P. (2019). Beyond temperature scaling: obtaining well-calibrated multiclass
    probabilities with Dirichlet calibration. *NeurIPS 32*.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_matrix_scaling
    >>> logits = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0],
    ...                    [2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 0.0, 2.0]])
    >>> cal = fit_matrix_scaling([0, 1, 2, 1, 1, 0], logits, reg_lambda=0.1, reg_mu=0.1)
    >>> cal.coef.shape, cal(logits).shape
    ((3, 3), (6, 3))
    """
    options = dict(
        reg_lambda=_check_reg(reg_lambda, "reg_lambda"), reg_mu=_check_reg(reg_mu, "reg_mu")
    )
    cal, converged = newton.bucketed_fit(_fit_matrix, (y_true, logits, weights), options)
    _warn("fit_matrix_scaling", converged)
    return cal


def _fit_matrix(y_true, logits, weights, n, *, reg_lambda, reg_mu):
    y, z = _logit_inputs(y_true, logits)
    w = _weights(weights, n, z.shape[0], z.dtype)
    coef, intercept, converged = _fit_matrix_core(
        y, z, w, regularization="odir", reg_lambda=reg_lambda, reg_mu=reg_mu
    )
    return MatrixScalingCalibrator(coef, intercept), converged


# --------------------------------------------------------------------------- Dirichlet
@pytree_dataclass(data=("coef", "intercept"), meta=("eps",))
class DirichletCalibrator:
    r"""Dirichlet calibration: :math:`\mathrm{softmax}(W \log p + b)` on ``[N, C]`` probabilities.

    Create it with :func:`fit_dirichlet`.

    Attributes
    ----------
    coef : Array [C, C]
        The matrix :math:`W`.
    intercept : Array [C]
        The intercepts :math:`b`.
    eps : float or None
        Probabilities are clipped to ``[eps, 1 - eps]`` before the log (None: not
        clipped; an exact 0 is then an error).
    """

    coef: jax.Array
    intercept: jax.Array
    eps: float | None = None

    @host_first(_twin_dirichlet_apply)
    @_v.validated  # checks fold into NaN under jit/vmap
    def __call__(self, probs: Any) -> jax.Array:
        """Calibrated ``[N, C]`` probabilities (rows sum to 1)."""
        p = _v.as_float_array(probs, "probs")
        _check_columns(p, "probs", self.coef.shape[-1])
        _v.check_in_unit_interval(p, "probs", "class probabilities")
        _no_zero(p, self.eps)
        return newton.apply_bucketed(
            _dirichlet_apply, (self.coef, self.intercept), p, eps=self.eps
        )


def _no_zero(p: jax.Array, eps: float | None) -> None:
    """Record that no probability is exactly 0 (or 1, which forces 0s in its row)."""
    if eps is not None:
        return
    _v.record(
        "no_zero_or_one",
        "probs",
        p,
        what=(
            "has values at exactly 0 or 1; Dirichlet calibration needs log(p), which is "
            "-inf at 0 (a 1 leaves 0s in its row). Pass eps (e.g. eps=1e-7) to clip "
            "them to [eps, 1 - eps] explicitly"
        ),
    )


@host_first(_twin_fit_dirichlet)
def fit_dirichlet(
    y_true: Any,
    probs: Any,
    *,
    regularization: Literal["odir", "l2"] = "odir",
    reg_lambda: float = 0.0,
    reg_mu: float = 0.0,
    eps: float | None = None,
    weights: Any = None,
) -> DirichletCalibrator:
    r"""Fit Dirichlet calibration (Kull et al. 2019): matrix scaling of ``log p``.

    Parameters
    ----------
    y_true : array_like of int, shape [N]
        Class labels ``0 .. C-1``.
    probs : array_like, shape [N, C]
        Predicted class probabilities (rows sum to 1).
    regularization : {"odir", "l2"}, default "odir"
        ``"odir"``: the off-diagonal and intercept penalty (``reg_lambda``,
        ``reg_mu``; see :func:`fit_matrix_scaling`). ``"l2"``: the penalty
        :math:`\frac{\lambda}{C(C+1)}(\sum W_{kj}^2 + \sum b_k^2)` on every parameter
        (dirichletcal's ``reg_norm=True`` form; ``reg_mu`` must stay 0).
    reg_lambda, reg_mu : float >= 0, default 0
        Penalty weights; both 0 give the unregularised maximum-likelihood fit.
    eps : float in (0, 0.5), optional
        Clip probabilities to ``[eps, 1 - eps]`` before the log. Without it an exact
        0 is an error (its log is infinite).
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``), as in
        :func:`fit_matrix_scaling`.

    Returns
    -------
    DirichletCalibrator

    Warns
    -----
    RuntimeWarning
        When the Newton iteration did not converge.

    Notes
    -----
    :math:`\hat p = \mathrm{softmax}(W \log p + b)`: the canonical parametrisation
    of the Dirichlet calibration map (Kull et al. 2019, Eq. 3-4), i.e. multinomial
    logistic regression on the log probabilities, fitted by minimising the weighted
    mean NLL plus the penalty (Sec. 4). It starts at the identity :math:`W = I,
    b = 0`, which returns ``probs`` unchanged. The free shift direction is fixed as in
    :func:`fit_matrix_scaling`. For two classes it is beta calibration
    (:func:`fit_beta`) without beta's sign constraints; on probabilities that are a
    softmax of logits it contains temperature scaling (:math:`W = I/T`).
    ``jax.jit`` and ``jax.vmap`` work. Every class must occur in ``y_true``.

    References
    ----------
    Kull, M., Perello-Nieto, M., Kängsepp, M., Silva Filho, T., Song, H. and Flach,
    P. (2019). Beyond temperature scaling: obtaining well-calibrated multiclass
    probabilities with Dirichlet calibration. *NeurIPS 32*.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_dirichlet
    >>> probs = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7],
    ...                   [0.5, 0.4, 0.1], [0.3, 0.3, 0.4], [0.2, 0.6, 0.2]])
    >>> cal = fit_dirichlet([0, 1, 2, 1, 2, 0], probs, reg_lambda=0.1, reg_mu=0.1)
    >>> out = cal(probs)
    >>> out.shape, bool(np.allclose(out.sum(axis=1), 1.0, atol=1e-6))
    ((6, 3), True)
    """
    _v.check_choice(regularization, "regularization", REGULARIZATIONS)
    reg_lambda = _check_reg(reg_lambda, "reg_lambda")
    reg_mu = _check_reg(reg_mu, "reg_mu")
    if regularization == "l2" and reg_mu != 0:
        raise ValueError(
            f"reg_mu applies to regularization='odir' only; got reg_mu={reg_mu!r} with "
            "regularization='l2' (whose reg_lambda penalises the intercepts too). Drop "
            "reg_mu or use regularization='odir'."
        )
    options = dict(
        regularization=regularization,
        reg_lambda=reg_lambda,
        reg_mu=reg_mu,
        eps=check_eps(eps),
    )
    cal, converged = newton.bucketed_fit(_fit_dirichlet, (y_true, probs, weights), options)
    _warn("fit_dirichlet", converged)
    return cal


def _fit_dirichlet(y_true, probs, weights, n, *, regularization, reg_lambda, reg_mu, eps):
    y, p = multiclass_inputs(y_true, probs)
    _no_zero(p, eps)
    w = _weights(weights, n, p.shape[0], p.dtype)
    coef, intercept, converged = _fit_matrix_core(
        y,
        _log_probs(p, eps),
        w,
        regularization=regularization,
        reg_lambda=reg_lambda,
        reg_mu=reg_mu,
    )
    return DirichletCalibrator(coef, intercept, eps), converged
