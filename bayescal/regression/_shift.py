"""Conformal prediction under covariate shift (Tibshirani, Barber, Candes & Ramdas 2019).

When the test inputs come from another distribution than the calibration inputs
(``P_test(x) != P_cal(x)``, with the same ``P(y | x)``), split conformal loses its
guarantee. Weighting each calibration score by the likelihood ratio
``w(x) = dP_test / dP_cal (x)``, and the test point itself by ``w(x_test)``, restores
it: the interval at ``x`` uses the smallest score ``s`` with

    sum_{i: s_i <= s} w(x_i) >= (1 - alpha) (sum_i w(x_i) + w(x)),

which depends on ``x`` through its own weight. :func:`fit_density_ratio` estimates
``w`` by a logistic regression that tells test inputs from calibration inputs (the
classifier approach of the paper, Sec. 2.2).
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.bucketing import bucket_size, pad_axis, paddable
from bayescal._src.newton import Derivatives, logistic_objective, minimize
from bayescal._src.options import coverage_and_alpha
from bayescal._src.pytree import pytree_dataclass

__all__ = ["DensityRatio", "fit_density_ratio", "weighted_conformal_interval"]


@pytree_dataclass(data=("coef", "intercept"), meta=())
class DensityRatio:
    r"""An estimated likelihood ratio :math:`w(x) = dP_{test}/dP_{cal}(x)`.

    :math:`w(x) = \exp(\beta^\top x + c)`: the odds of "test" against "calibration"
    of a logistic regression, with the ratio of the two sample sizes in ``c``.

    Attributes
    ----------
    coef : Array, shape [D]
        :math:`\beta`.
    intercept : Array, scalar
        :math:`c` (the classifier's intercept plus ``log(n_cal / n_test)``).
    """

    coef: jax.Array
    intercept: jax.Array

    def __call__(self, X: ArrayLike) -> jax.Array:
        """:math:`w(x)` of each row of ``X`` (shape [M, D]): the weights."""
        return _ratio(self.coef, self.intercept, X)


@_v.validated(fuse=True, bucket={"X": 0}, per_observation=-1)
def _ratio(coef, intercept, X):
    x = _v.as_float_array(X, "X")
    _v.check_ndim(x, "X", 2)
    _v.check_finite(x, "X")
    if x.shape[1] != coef.shape[0]:
        raise ValueError(
            f"X has {x.shape[1]} columns; this ratio was fitted on {coef.shape[0]}."
        )
    return jnp.exp(x @ coef.astype(x.dtype) + intercept.astype(x.dtype))


def fit_density_ratio(
    X_cal: ArrayLike, X_test: ArrayLike, *, reg: float = 1.0
) -> DensityRatio:
    r"""Estimate the likelihood ratio of test to calibration inputs by a classifier.

    Fits an L2-penalized logistic regression of "is a test input" on the features
    (the penalty :math:`\tfrac{reg}{2}\lVert\beta\rVert^2`, no penalty on the
    intercept: scikit-learn's ``LogisticRegression(C=1/reg)``), and returns its odds
    times :math:`n_{cal}/n_{test}`, the estimate of :math:`dP_{test}/dP_{cal}`
    (Tibshirani et al. 2019, Sec. 2.2).

    Parameters
    ----------
    X_cal : array_like, shape [N, D]
        Calibration inputs.
    X_test : array_like, shape [M, D]
        Test inputs (unlabeled).
    reg : float, default 1.0
        The penalty's weight (> 0).

    Returns
    -------
    DensityRatio
        Call it on inputs to get their weights.

    See Also
    --------
    weighted_conformal_interval : The intervals these weights give.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import fit_density_ratio
    >>> rng = np.random.default_rng(0)
    >>> ratio = fit_density_ratio(rng.normal(0, 1, (500, 1)), rng.normal(1, 1, (500, 1)))
    >>> w = ratio(np.array([[-1.0], [0.5], [2.0]]))  # exp(x - 1/2) in truth
    >>> bool(w[0] < w[1] < w[2])
    True
    """
    if isinstance(reg, bool) or not isinstance(reg, int | float) or not reg > 0:
        raise ValueError(f"reg must be a float > 0 (the L2 penalty's weight); got {reg!r}.")
    # both samples padded to their buckets on the host (weight 0 for the padding, the
    # counts as an argument): a new size in used buckets compiles nothing
    counts, padded = [], []
    for x in (X_cal, X_test):
        n = int(np.shape(x)[0]) if np.ndim(x) == 2 else 0
        counts.append(n)
        padded.append(pad_axis(x, bucket_size(n), axis=0) if n and paddable(x) else x)
    return _fit_ratio(*padded, np.asarray(counts, np.int32), reg=float(reg))


@_v.validated(fuse=True)
def _fit_ratio(X_cal, X_test, counts, *, reg):
    a = _v.as_float_array(X_cal, "X_cal")
    b = _v.as_float_array(X_test, "X_test")
    for name, x in (("X_cal", a), ("X_test", b)):
        _v.check_ndim(x, name, 2)
        _v.check_nonempty(x, name)
        _v.check_finite(x, name)
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"X_cal has {a.shape[1]} columns and X_test {b.shape[1]}; pass the same features."
        )
    dtype = jnp.result_type(a, b)
    x = jnp.concatenate([a, b]).astype(dtype)
    labels = jnp.concatenate([jnp.zeros(a.shape[0], dtype), jnp.ones(b.shape[0], dtype)])
    real = jnp.concatenate(
        [jnp.arange(a.shape[0]) < counts[0], jnp.arange(b.shape[0]) < counts[1]]
    ).astype(dtype)
    d = x.shape[1]
    plain = logistic_objective(tuple(x[:, j] for j in range(d)), labels, weights=real)
    ridge = jnp.concatenate([jnp.full(d, reg, dtype), jnp.zeros(1, dtype)])

    def objective(theta):
        o = plain(theta)
        penalty = 0.5 * jnp.sum(ridge * theta * theta)
        return Derivatives(
            o.value + penalty,
            o.grad + ridge * theta,
            o.hess + jnp.diag(ridge),
            o.magnitude + penalty,
        )

    fit = minimize(objective, jnp.zeros(d + 1, dtype))
    shift = jnp.log(counts[0].astype(dtype) / counts[1].astype(dtype))
    return DensityRatio(fit.x[:d], fit.x[d] + shift)


def weighted_conformal_interval(
    y_true: ArrayLike,
    loc: ArrayLike,
    weights: ArrayLike,
    loc_test: ArrayLike,
    weights_test: ArrayLike,
    scale: ArrayLike | None = None,
    scale_test: ArrayLike | None = None,
    *,
    coverage: float | None = None,
    alpha: float | None = None,
) -> tuple[jax.Array, jax.Array]:
    r"""Split-conformal intervals under covariate shift: each test point weighted too.

    With calibration scores :math:`s_i = |y_i - \mu_i|` (``/ scale``) and likelihood
    ratios :math:`w_i` (``weights``, e.g. from :func:`fit_density_ratio`), the interval
    at a test point of prediction :math:`\mu` and ratio :math:`w` is
    :math:`\mu \pm \hat q(w)` (times its scale), :math:`\hat q(w)` the smallest
    score whose cumulative weight reaches :math:`(1 - \alpha)(\sum_i w_i + w)`
    (Tibshirani et al. 2019, Corollary 1): coverage :math:`\ge 1 - \alpha` under
    covariate shift with the true ratio. Infinite where no score reaches it (a test
    point far from the calibration data: its own weight dominates).

    Parameters
    ----------
    y_true, loc : array_like, shape [N]
        The calibration split's observations and point predictions.
    weights : array_like, shape [N]
        Their likelihood ratios (>= 0).
    loc_test : array_like, shape [M]
        The test points' predictions.
    weights_test : array_like, shape [M]
        Their likelihood ratios (>= 0).
    scale, scale_test : array_like, optional
        Predicted spreads (> 0) of both: normalized scores.
    coverage, alpha : float in (0, 1), optional
        The nominal coverage or miscoverage; neither means ``alpha=0.1``.

    Returns
    -------
    (lower, upper) : Arrays, shape [M]

    See Also
    --------
    fit_conformal : The same with ``weights`` and every test point at weight 1.

    References
    ----------
    Tibshirani, Barber, Candes & Ramdas (2019), "Conformal prediction under covariate
    shift", NeurIPS 32.

    Examples
    --------
    >>> from bayescal.regression import weighted_conformal_interval
    >>> y, loc = [1.0, 2.0, 3.0, 4.0], [1.5, 2.0, 2.0, 4.5]  # scores 0.5, 0, 1, 0.5
    >>> lo, hi = weighted_conformal_interval(y, loc, [1.0, 1.0, 1.0, 1.0], [0.0, 0.0],
    ...                                      [1.0, 0.0], alpha=0.25)
    >>> hi.tolist()  # 0.75 (4 + 1) needs all four weights; 0.75 (4 + 0), three
    [1.0, 0.5]
    """
    _, a = coverage_and_alpha(coverage, alpha, default_alpha=0.1)
    if (scale is None) != (scale_test is None):
        raise ValueError("pass scale and scale_test together (normalized scores) or neither.")
    frac = 1 - Fraction(repr(a))
    # the calibration side padded to its bucket on the host, at weight 0 (such a score
    # never reaches the quantile first): a new N in a used bucket compiles nothing
    cal = [np.asarray(v) if isinstance(v, list | tuple) else v for v in (y_true, loc, weights, scale)]
    if all(v is None or (paddable(v) and np.ndim(v) == 1) for v in cal) and np.size(cal[0]):
        n = int(np.shape(cal[0])[0])
        if all(v is None or np.shape(v) == (n,) for v in cal):
            size = bucket_size(n)
            y_true, loc, scale = (
                None if v is None else pad_axis(np.asarray(v), size) for v in (cal[0], cal[1], cal[3])
            )
            weights = pad_axis(np.asarray(cal[2]), size, fill=0)
    return _weighted_interval(
        y_true, loc, weights, loc_test, weights_test, scale, scale_test,
        num=frac.numerator, den=frac.denominator,
    )


@_v.validated(fuse=True, bucket={"loc_test": -1, "weights_test": -1, "scale_test": -1},
              per_observation=-1)
def _weighted_interval(y_true, loc, weights, loc_test, weights_test, scale, scale_test, *,
                       num, den):
    y = _v.as_float_array(y_true, "y_true")
    mu = _v.as_float_array(loc, "loc")
    w = _v.as_float_array(weights, "weights")
    mt = _v.as_float_array(loc_test, "loc_test")
    wt = _v.as_float_array(weights_test, "weights_test")
    for name, x in (("y_true", y), ("loc", mu), ("weights", w), ("loc_test", mt),
                    ("weights_test", wt)):
        _v.check_ndim(x, name, 1)
        _v.check_nonempty(x, name)
        _v.check_finite(x, name)
    _v.check_same_shape(y_true=y, loc=mu, weights=w)
    _v.check_same_shape(loc_test=mt, weights_test=wt)
    _v.check_nonnegative(w, "weights")
    _v.check_nonnegative(wt, "weights_test")
    dtype = jnp.result_type(y, mu, w, mt, wt)
    scores = jnp.abs(y - mu).astype(dtype)
    half = jnp.ones_like(mt, dtype)
    if scale is not None:
        s = _v.as_float_array(scale, "scale")
        st = _v.as_float_array(scale_test, "scale_test")
        _v.check_same_shape(y_true=y, scale=s)
        _v.check_same_shape(loc_test=mt, scale_test=st)
        _v.check_positive(s, "scale")
        _v.check_positive(st, "scale_test")
        scores = scores / s.astype(dtype)
        half = st.astype(dtype)
    order = jnp.argsort(scores)
    ordered = scores[order]
    cum = jnp.cumsum(w.astype(dtype)[order])
    total = cum[-1]
    # the smallest score whose cumulative weight reaches (1 - alpha)(W + w_test),
    # compared as den * cum >= num * (W + w_test) (alpha read as its decimal)
    need = num * (total + wt.astype(dtype))
    k = jnp.searchsorted(den * cum, need, side="left")
    q = jnp.where(k < cum.shape[0], ordered[jnp.minimum(k, cum.shape[0] - 1)], jnp.inf)
    return mt.astype(dtype) - half * q, mt.astype(dtype) + half * q
