"""Resampling engine: bootstrap intervals and null simulations, one ``vmap`` over keys.

Every replicate is a function of its own PRNG key (``jax.random.split(key, B)[b]``),
so the whole set of replicates is one ``jax.lax.map`` over keys with ``vmap`` inside
(``batch_size`` keys at a time, which bounds the temporary memory), all under
``jax.jit``. Percentile intervals are taken along the replicate axis, element-wise, so
a metric returning an array (e.g. a whole curve) gets pointwise bands.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.reprs import short_repr

__all__ = [
    "BootstrapResult",
    "NullTestResult",
    "bootstrap",
    "bootstrap_indices",
    "bayesian_bootstrap_weights",
    "null_pvalue",
    "percentile_interval",
    "projection_interval",
    "check_key",
    "check_level",
    "check_batch_size",
    "default_batch_size",
]

from bayescal._src.options import BOOTSTRAP_METHODS as METHODS  # noqa: E402
from bayescal._src.options import BootstrapMethod  # noqa: E402

# Elements per array per vmapped batch of replicates: big enough to amortise the loop,
# small enough to stay in cache (1000 x 1e5 int32 indices at once would be 400 MB).
_ELEMENTS_PER_BATCH = 2**20


class BootstrapResult(NamedTuple):
    """Bootstrap estimate with its interval.

    Attributes
    ----------
    estimate : Array or pytree
        The metric on the original data (for ``method="bayesian"``: with equal weights
        ``1/n``).
    lower, upper : Array or pytree
        The interval at the requested level, element-wise (pointwise bands for
        array-valued metrics): the percentile interval for :func:`bootstrap`; for
        ``bayescal.regression.bootstrap_calibration_error`` the one its ``interval``
        argument names (by default the projection interval, which can reach 0).
    samples : Array or pytree
        The ``num_samples`` replicates, stacked along a new leading axis.
    """

    estimate: Any
    lower: Any
    upper: Any
    samples: Any

    def __repr__(self) -> str:  # headline numbers first, arrays summarized
        return short_repr(self, self._fields)


class NullTestResult(NamedTuple):
    """Monte Carlo test against a simulated null distribution.

    Attributes
    ----------
    statistic : Array
        The observed value of the statistic.
    pvalue : Array
        :math:`(1 + \\#\\{T_b \\ge T_{obs}\\}) / (1 + B)`.
    samples : Array, shape [B, ...]
        The statistic on the ``B`` simulated null data sets.
    """

    statistic: jax.Array
    pvalue: jax.Array
    samples: jax.Array

    def __repr__(self) -> str:  # headline numbers first, arrays summarized
        return short_repr(self, self._fields)


# --------------------------------------------------------------------------- checks


def as_key(key: Any, name: str = "key") -> jax.Array:
    """A PRNG key from a key or an int seed: the one key helper of bayescal.

    Accepts a typed key (``jax.random.key(0)``), a legacy ``uint32[2]`` key
    (``jax.random.PRNGKey(0)``) or a nonnegative int seed (made into
    ``jax.random.key(seed)``). Anything else raises a ``TypeError`` naming ``name``.

    Parameters
    ----------
    key : PRNG key or int
        The key or seed.
    name : str
        The argument name used in error messages.

    Returns
    -------
    Array
        A typed PRNG key.

    Examples
    --------
    >>> import jax
    >>> from bayescal.core import as_key
    >>> bool(jax.random.key_data(as_key(3)).tolist() == jax.random.key_data(jax.random.key(3)).tolist())
    True
    """
    if key is None:
        raise TypeError(
            f"{name} is required: pass a PRNG key or an int seed, e.g. "
            f"jax.random.key(0) or 0."
        )
    if isinstance(key, bool | np.bool_):
        raise TypeError(f"{name} must be a PRNG key or an int seed; got the bool {key!r}.")
    if isinstance(key, int | np.integer):
        if not 0 <= int(key) < 2**63:
            raise TypeError(
                f"{name} as an int seed must lie in [0, 2**63); got {int(key)}. Pass a "
                "smaller seed or a PRNG key."
            )
        # built on the host where it can be (jax.random.key compiles two programs on
        # its first call in a process)
        words = _v.seed_words(key)
        return jax.random.key(int(key)) if words is None else jax.random.wrap_key_data(words)
    if isinstance(key, jax.Array | np.ndarray | jax.core.Tracer):
        dtype = key.dtype
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and key.shape == ():
            return cast(jax.Array, key)  # only JAX arrays have a key dtype
        if dtype == np.uint32 and tuple(key.shape) == (2,):
            return jnp.asarray(key)
        raise TypeError(
            f"{name} must be a single PRNG key (jax.random.key(0) or "
            f"jax.random.PRNGKey(0)) or an int seed; got an array of dtype {dtype} and "
            f"shape {tuple(key.shape)}. Pass one key; the replicates split it themselves."
        )
    raise TypeError(
        f"{name} must be a PRNG key such as jax.random.key(0), or an int seed; got "
        f"{type(key).__name__} {key!r}."
    )


check_key = as_key


def check_level(level: Any, name: str = "level") -> Any:
    """A probability strictly between 0 and 1 (traced values pass unchecked)."""
    if isinstance(level, jax.core.Tracer):
        return level
    if isinstance(level, bool) or not isinstance(level, numbers.Real | np.ndarray):
        raise TypeError(f"{name} must be a float in (0, 1), e.g. 0.95; got {level!r}.")
    value = float(level)
    if not 0.0 < value < 1.0:
        raise ValueError(
            f"{name} must lie strictly between 0 and 1 (e.g. 0.95 for a 95% interval); "
            f"got {level!r}."
        )
    return value


def check_batch_size(batch_size: Any) -> int | None:
    if batch_size is None:
        return None
    return _v.check_positive_int(batch_size, "batch_size")


def default_batch_size(elements_per_replicate: int, num_samples: int) -> int:
    """Replicates per vmapped batch so that a batch holds about 1M elements.

    A divisor of ``num_samples`` is preferred (down to half the target size): when the
    batch size does not divide it, ``lax.map`` compiles the remainder batch as a second
    copy of the body, which doubled the compile time in measurements.
    """
    per = max(int(elements_per_replicate), 1)
    target = int(max(1, min(num_samples, _ELEMENTS_PER_BATCH // per)))
    for size in range(target, max(target // 2, 1) - 1, -1):
        if num_samples % size == 0:
            return size
    return target


def _check_metric(metric: Any, name: str = "metric") -> None:
    if not callable(metric):
        raise TypeError(f"{name} must be a callable; got {type(metric).__name__}.")


def _as_data_array(a: Any, name: str) -> jax.Array:
    """Numbers (float, int or bool) as a JAX array; floats keep float32/float64."""
    arr: jax.Array | np.ndarray
    if isinstance(a, jax.Array):
        arr = a
    else:
        if isinstance(a, str | bytes) or a is None:
            raise TypeError(f"{name} must be an array; got {type(a).__name__}.")
        _v.reject_masked(a, name)
        arr = np.asarray(a)
    if jnp.issubdtype(arr.dtype, jnp.floating):
        return _v.as_float_array(a, name)
    if jnp.issubdtype(arr.dtype, jnp.integer) or arr.dtype == bool:
        if _v.narrows(arr):
            raise ValueError(
                f"{name} holds integers beyond {jax.dtypes.canonicalize_dtype(arr.dtype)} (up to "
                f"{arr.max()}), which JAX would wrap around; pass them as floats, or "
                "enable 64-bit integers with JAX_ENABLE_X64=1."
            )
        return jnp.asarray(arr)
    raise TypeError(
        f"{name} must be an array of numbers; got dtype {arr.dtype}. Convert it first."
    )


def _check_arrays(arrays: tuple[Any, ...]) -> tuple[jax.Array, ...]:
    if not arrays:
        raise TypeError(
            "bootstrap needs at least one data array after the metric, e.g. "
            "bootstrap(key, metric, pit)."
        )
    out = tuple(_as_data_array(a, f"arrays[{i}]") for i, a in enumerate(arrays))
    for i, a in enumerate(out):
        if a.ndim == 0:
            raise ValueError(
                f"arrays[{i}] is a scalar; every data array needs a leading observation "
                "axis (shape [n, ...])."
            )
    n = out[0].shape[0]
    for i, a in enumerate(out):
        if a.shape[0] != n:
            raise ValueError(
                f"arrays[{i}] has {a.shape[0]} observations along axis 0 but arrays[0] "
                f"has {n}; all arrays are resampled together and must match."
            )
    if n == 0:
        raise ValueError("the data arrays are empty (0 observations); need at least 1.")
    return out


def _weight_dtype(arrays: tuple[jax.Array, ...]) -> jnp.dtype:
    floats = [a.dtype for a in arrays if jnp.issubdtype(a.dtype, jnp.floating)]
    if floats:
        return jnp.result_type(*floats)
    return jax.dtypes.canonicalize_dtype(float)


def _hashable(fn: Callable) -> bool:
    try:
        hash(fn)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------- primitives


def _indices(key: jax.Array, n: int) -> jax.Array:
    return jax.random.randint(key, (n,), 0, n, dtype=jnp.int32)


def _dirichlet_weights(key: jax.Array, n: int, dtype) -> jax.Array:
    e = jax.random.exponential(key, (n,), dtype=dtype)
    return e / _order_free_sum(e)


def _order_free_sum(x: jax.Array) -> jax.Array:
    """``sum(x)`` whatever the order XLA adds in (sharded or not): a compensated sum.

    A plain ``jnp.sum`` adds in an order that depends on the sharding, so the weights,
    and every metric of them, differed by several ulps between sharded and unsharded
    inputs (9.4e-6 relative for an ECE of 2e5 predictions, whose gaps amplify them).
    Here the high parts of fixed blocks sum exactly and the blocks are combined in a
    fixed tree (:func:`bayescal._src.binning.compensated_bin_sums`): the sum is the
    correctly rounded one but for remainders ``2^16`` times smaller.
    """
    from bayescal._src.binning import compensated_bin_sums

    idx = jnp.zeros(x.shape, jnp.int32)
    ((s, c),) = compensated_bin_sums(idx, 1, (x,), variant="compare")
    return (s + c)[0]


def percentile_interval(samples: Any, level: Any) -> tuple[Any, Any]:
    """Element-wise percentile interval along axis 0, ignoring NaN replicates."""
    level = jnp.asarray(level)

    def one(s):
        s = s if jnp.issubdtype(s.dtype, jnp.floating) else s.astype(float)
        lv = level.astype(s.dtype)
        q = jnp.stack([(1 - lv) / 2, (1 + lv) / 2])
        lo_hi = jnp.nanquantile(s, q, axis=0)
        return lo_hi[0], lo_hi[1]

    pairs = jax.tree_util.tree_map(one, samples)
    is_pair = lambda x: isinstance(x, tuple) and len(x) == 2  # noqa: E731
    lower = jax.tree_util.tree_map(lambda p: p[0], pairs, is_leaf=is_pair)
    upper = jax.tree_util.tree_map(lambda p: p[1], pairs, is_leaf=is_pair)
    return lower, upper


def projection_interval(estimate: Any, distances: Any, level: Any) -> tuple[Any, Any]:
    r"""``[max(0, estimate - c), estimate + c]``, ``c`` the ``level`` quantile of
    ``distances`` (NaN replicates left out).

    For a nonnegative error :math:`\theta = \lVert d \rVert` of a curve gap ``d``
    estimated by :math:`\hat\theta = \lVert \hat d \rVert`, with ``distances`` the
    replicates' :math:`\lVert \hat d^* - \hat d \rVert`: the range of the error over
    the bootstrap confidence ball :math:`\{d: \lVert d - \hat d \rVert \le c\}`
    (triangle inequality), so its coverage is at least the ball's, and it reaches 0.
    """
    floating = jnp.issubdtype(distances.dtype, jnp.floating)
    d = distances if floating else distances.astype(float)
    c = jnp.nanquantile(d, jnp.asarray(level, d.dtype), axis=0)
    est = jnp.asarray(estimate, d.dtype)
    return jnp.maximum(est - c, jnp.zeros((), d.dtype)), est + c


# -------------------------------------------------------------------------- kernels


def _bootstrap_impl(metric, arrays, key, level, num_samples, method, batch_size):
    n = arrays[0].shape[0]
    keys = jax.random.split(key, num_samples)
    if method == "plain":
        estimate = metric(*arrays)

        def one(k):
            idx = _indices(k, n)
            return metric(*(jnp.take(a, idx, axis=0) for a in arrays))

    else:
        dtype = _weight_dtype(arrays)
        estimate = metric(*arrays, weights=jnp.full((n,), 1.0 / n, dtype))

        def one(k):
            return metric(*arrays, weights=_dirichlet_weights(k, n, dtype))

    samples = jax.lax.map(one, keys, batch_size=batch_size)
    lower, upper = percentile_interval(samples, level)
    return BootstrapResult(estimate, lower, upper, samples)


_bootstrap_kernel = jax.jit(
    _bootstrap_impl, static_argnames=("metric", "num_samples", "method", "batch_size")
)


def _null_impl(statistic, simulate, observed, key, num_samples, batch_size):
    keys = jax.random.split(key, num_samples)
    samples = jax.lax.map(lambda k: statistic(simulate(k)), keys, batch_size=batch_size)
    observed = jnp.asarray(observed)
    exceed = jnp.sum(samples >= observed, axis=0)
    dtype = (
        observed.dtype
        if jnp.issubdtype(observed.dtype, jnp.floating)
        else jax.dtypes.canonicalize_dtype(float)
    )
    pvalue = ((1 + exceed) / (1 + num_samples)).astype(dtype)
    return NullTestResult(observed, pvalue, samples)


_null_kernel = jax.jit(
    _null_impl, static_argnames=("statistic", "simulate", "num_samples", "batch_size")
)


# -------------------------------------------------------------------------- public


@_v.validated
def bootstrap(
    key: Any,
    metric: Callable[..., Any],
    *arrays: ArrayLike,
    num_samples: int = 1000,
    method: BootstrapMethod = "plain",
    level: float = 0.95,
    batch_size: int | None = None,
) -> BootstrapResult:
    r"""Bootstrap percentile intervals for any metric, all replicates in one ``vmap``.

    Two resampling schemes, over the observations (axis 0 of every array, resampled
    together):

    * ``method="plain"`` (Efron): each replicate draws ``n`` indices uniformly with
      replacement and calls ``metric(*[a[idx] for a in arrays])``. Works for any
      jittable function of the data.
    * ``method="bayesian"`` (Rubin, 1981): each replicate draws weights
      :math:`w \sim \mathrm{Dirichlet}(1, \dots, 1)` (``n`` weights summing to 1) and
      calls ``metric(*arrays, weights=w)``. The metric must accept a ``weights``
      keyword and treat them as observation weights (normalised or not); the estimate
      is ``metric(*arrays, weights=full(n, 1/n))``.

    Replicate ``b`` uses ``jax.random.split(key, num_samples)[b]``; the indices and
    weights are those of :func:`bootstrap_indices` and
    :func:`bayesian_bootstrap_weights` for the same key.

    Parameters
    ----------
    key : PRNG key or int seed
        ``jax.random.key(seed)`` (or a legacy ``PRNGKey``).
    metric : callable
        A jittable function of the arrays returning an array or a pytree of arrays (a
        scalar metric, a whole curve, a ``CalibrationCurve``...). It is a static
        argument of ``jax.jit``: reuse the same function object to reuse the
        compilation (a new ``lambda`` per call recompiles).
    *arrays : array_like, each of shape [n, ...]
        The data, with observations along axis 0.
    num_samples : int, default 1000
        Number of bootstrap replicates ``B``.
    method : {"plain", "bayesian"}
    level : float in (0, 1), default 0.95
        Central coverage of the percentile interval: the ``(1 - level) / 2`` and
        ``(1 + level) / 2`` quantiles of the replicates, element-wise. Replicates that
        are NaN for an element (e.g. an empty bin) are left out for that element.
    batch_size : int, optional
        Replicates evaluated together by ``vmap`` inside a ``lax.map``; the default
        keeps about 1M data elements per batch, so memory stays bounded
        (1000 replicates x 1e5 int32 indices at once would take 400 MB).

    Returns
    -------
    BootstrapResult
        ``estimate``, ``lower``, ``upper`` (same structure as the metric's output) and
        ``samples`` (a leading axis of length ``num_samples``).

    Notes
    -----
    Percentile intervals are first-order accurate; they can undercover for
    statistics with a large bias relative to their spread. A nonnegative error (ECE,
    MCE, a miscalibration area, the SKCE) close to 0 is such a statistic: every
    replicate lies above 0 and its estimator is biased upwards, so the percentile
    interval never covers the error 0 of a calibrated model (0 of 200 simulated data
    sets for MACE) and can lie above its own estimate. Read ``lower`` there as the
    replicates' ``(1 - level) / 2`` quantile, not as a confidence bound: test the
    hypothesis of calibration instead (:func:`null_pvalue`, the ``*_test``
    functions), or, for the PIT calibration error, use
    ``bayescal.regression.bootstrap_calibration_error``, whose default interval (a
    projection of a bootstrap confidence ball of the curve) reaches 0.

    References
    ----------
    Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13.
    Rubin (1981), "The Bayesian bootstrap", *Annals of Statistics* 9(1).

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from bayescal.core import bootstrap
    >>> x = jnp.arange(10.0)
    >>> res = bootstrap(jax.random.key(0), jnp.mean, x, num_samples=200)
    >>> bool(res.lower < 4.5 < res.upper), res.samples.shape
    (True, (200,))
    >>> wmean = lambda x, weights: jnp.sum(weights * x) / jnp.sum(weights)
    >>> res = bootstrap(jax.random.key(0), wmean, x, method="bayesian")
    >>> round(float(res.estimate), 4)
    4.5
    """
    _check_metric(metric)
    key = check_key(key)
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    _v.check_choice(method, "method", METHODS)
    level = check_level(level)
    batch_size = check_batch_size(batch_size)
    data = _check_arrays(arrays)
    if batch_size is None:
        per = sum(int(np.prod(a.shape)) for a in data)
        batch_size = default_batch_size(per, num_samples)
    try:
        if not _hashable(metric):
            kernel = jax.jit(
                functools.partial(_bootstrap_impl, metric), static_argnums=(3, 4, 5)
            )
            return kernel(data, key, level, num_samples, method, batch_size)
        return _bootstrap_kernel(metric, data, key, level, num_samples, method, batch_size)
    except TypeError as err:
        if method == "bayesian" and "weights" in str(err):
            raise TypeError(
                "method='bayesian' calls metric(*arrays, weights=w) with Dirichlet "
                f"weights, but the metric does not take them ({err}). Give it a "
                "`weights` keyword (observation weights), or use method='plain'."
            ) from err
        raise


@_v.validated
def bootstrap_indices(key: jax.Array, n: int, num_samples: int) -> jax.Array:
    """The resampled index sets that :func:`bootstrap` uses with ``method="plain"``.

    Parameters
    ----------
    key : PRNG key or int seed
    n : int
        Number of observations.
    num_samples : int
        Number of replicates.

    Returns
    -------
    Array, shape [num_samples, n], int32
        Row ``b`` holds the indices of replicate ``b`` (uniform on ``0..n-1``, with
        replacement).

    Examples
    --------
    >>> import jax
    >>> from bayescal._src.resampling import bootstrap_indices
    >>> idx = bootstrap_indices(jax.random.key(0), 5, 3)
    >>> idx.shape, bool(((idx >= 0) & (idx < 5)).all())
    ((3, 5), True)
    """
    key = check_key(key)
    n = _v.check_positive_int(n, "n")
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    keys = jax.random.split(key, num_samples)
    return jax.vmap(lambda k: _indices(k, n))(keys)


@_v.validated
def bayesian_bootstrap_weights(
    key: jax.Array, n: int, num_samples: int, *, dtype: Any = None
) -> jax.Array:
    r"""The Dirichlet(1, ..., 1) weights that :func:`bootstrap` uses with ``"bayesian"``.

    Drawn as normalised standard exponentials,
    :math:`w_i = E_i / \sum_j E_j`, which is exactly :math:`\mathrm{Dirichlet}(1^n)`.

    Parameters
    ----------
    key : PRNG key or int seed
    n : int
        Number of observations.
    num_samples : int
        Number of replicates.
    dtype : float dtype, optional
        Default: JAX's default float (float32, or float64 under x64).

    Returns
    -------
    Array, shape [num_samples, n]
        Nonnegative weights; each row sums to 1.

    Examples
    --------
    >>> import jax
    >>> from bayescal._src.resampling import bayesian_bootstrap_weights
    >>> w = bayesian_bootstrap_weights(jax.random.key(0), 4, 2)
    >>> w.shape, [round(float(s), 5) for s in w.sum(axis=1)]
    ((2, 4), [1.0, 1.0])
    """
    key = check_key(key)
    n = _v.check_positive_int(n, "n")
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    dtype = jax.dtypes.canonicalize_dtype(float) if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a float dtype; got {dtype}.")
    keys = jax.random.split(key, num_samples)
    return jax.vmap(lambda k: _dirichlet_weights(k, n, dtype))(keys)


@_v.validated
def null_pvalue(
    key: Any,
    statistic: Callable[[Any], jax.Array],
    observed: ArrayLike,
    simulate: Callable[[jax.Array], Any],
    *,
    num_samples: int = 1000,
    batch_size: int | None = None,
) -> NullTestResult:
    r"""Monte Carlo p-value of a statistic against data simulated under the null.

    Draws ``B = num_samples`` data sets ``simulate(k_b)`` (one per key of
    ``jax.random.split(key, B)``), evaluates ``T_b = statistic(simulate(k_b))`` in one
    ``vmap``, and returns

    .. math:: p = \frac{1 + \#\{b: T_b \ge T_{obs}\}}{1 + B},

    the exact-size Monte Carlo p-value for large values of ``T`` being evidence
    against the null (Davison & Hinkley, 1997, eq. 4.11). Under the null it is
    uniform on ``{1/(B+1), ..., 1}``.

    Parameters
    ----------
    key : PRNG key or int seed
        Randomness of the result (the first argument, as in ``jax.random``).
    statistic : callable
        ``data -> Array``; large values are evidence against the null. Static under
        ``jit``: reuse the same function object to reuse the compilation.
    observed : array_like
        The statistic's value on the observed data (an array gives element-wise
        p-values).
    simulate : callable
        ``key -> data``: one data set drawn under the null (of the observed size).
        Static under ``jit`` like ``statistic``.
    num_samples : int, default 1000
    batch_size : int, optional
        Simulations evaluated together by ``vmap`` (default: all).

    Returns
    -------
    NullTestResult
        ``statistic`` (the observed value), ``pvalue`` and the simulated ``samples``.

    References
    ----------
    Davison & Hinkley (1997), *Bootstrap Methods and their Application*, sec. 4.2.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from bayescal.core import null_pvalue
    >>> stat = lambda x: jnp.abs(jnp.mean(x))
    >>> sim = lambda k: jax.random.normal(k, (25,))
    >>> res = null_pvalue(jax.random.key(0), stat, 1.0, sim, num_samples=99)
    >>> round(float(res.pvalue), 4)  # a mean of 1.0 is 5 standard errors away
    0.01
    >>> res  # doctest: +ELLIPSIS
    NullTestResult(statistic=1.0, pvalue=0.01, samples=<99 float... values, mean 0.1...>)
    """
    _check_metric(statistic, "statistic")
    _check_metric(simulate, "simulate")
    key = check_key(key)
    num_samples = _v.check_positive_int(num_samples, "num_samples")
    batch_size = check_batch_size(batch_size)
    obs = jnp.asarray(observed)
    if jnp.issubdtype(obs.dtype, jnp.floating):
        _v.check_finite(obs, "observed")
    if not (_hashable(statistic) and _hashable(simulate)):
        kernel = jax.jit(
            functools.partial(_null_impl, statistic, simulate), static_argnums=(2, 3)
        )
        return kernel(obs, key, num_samples, batch_size)
    return _null_kernel(statistic, simulate, obs, key, num_samples, batch_size)
