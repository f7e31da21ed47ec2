"""The host path's rule and shared helpers: NumPy twins of public calls on small inputs.

An eager call with small inputs spends its time on fixed costs, not on the data: the
jit dispatch, the transfer of the inputs and the host sync of the check flags, some
100s of microseconds on a CPU where NumPy needs a few for 1e3 values. So when JAX's
default backend is the CPU and the inputs are concrete and host-resident (numpy
arrays, lists, JAX arrays on the CPU) with at most :data:`HOST_MAX` values, the
public functions decorated with :func:`first` compute their result in NumPy, and
return it as a JAX array of the dtype and shape the kernel gives. ``BAYESCAL_HOST_PATH=0``
or ``core.host_path(False)`` turns this off (:mod:`bayescal._src.backend`).

Each twin lives beside its kernel, in its method's module, as ``_twin_<name>`` (e.g.
``bayescal.classification._calibrators._twin_fit_platt``); a branch's ``_host.py``
holds the NumPy arithmetic that twins of several of its modules share and imports no
other module of the branch. This module holds what both branches use (the switch, the
array conversions and checks, the isotonic knots, the SKCE's pair sums and the
bootstrap counts) and imports neither branch.

Each twin handles only the inputs it is sure about and returns None for anything
else (an option it does not implement, a value that fails a check, anything
unusual); the kernel path then runs as before and gives the result or the documented
error. No message is written twice, and bad input behaves exactly as without this
module.

Equal to the kernels (tests/test_host_path.py): bins, counts and order statistics
exactly; the sums (accumulated in float64 here) and logarithms to float tolerance.
XLA on the CPU flushes subnormal floats to zero where NumPy keeps them: inputs or
results where that would matter go back to the kernel path.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import backend as _backend
from bayescal._src import kernel_calibration as _kc
from bayescal._src import newton
from bayescal._src.bucketing import bucket_size, pad_axis
from bayescal._src.interp import interpolate
from bayescal._src.reduce import reduce_scores
from bayescal._src.validation import host_resident

__all__ = ["HOST_MAX", "TWINS", "active", "disabled", "erfc", "first"]

#: Inputs of at most this many values go the host path. Measured on the 2-core CPU
#: machines (benchmarks/bench_small.py and the n = 2^12 ... 2^17 sweep of its
#: functions): up to 2^15 the eager kernel runs quick-compiled code
#: (``xla_options.QUICK_COMPILE_MAX_SIZE``) and the host path is 3-6x faster; at 2^16
#: the optimized kernel is as fast or faster for the ECE and the log-loss.
HOST_MAX = 1 << 15
_REDUCTIONS = ("mean", "sum", "none")
_NORMS = ("l1", "l2", "max")

def disabled() -> contextlib.AbstractContextManager[None]:
    """Within this block every call takes the kernel path (``core.host_path(False)``)."""
    return _backend.host_path(False)


def active() -> bool:
    """Whether the host path may run: enabled (``BAYESCAL_HOST_PATH``,
    ``core.host_path``, not the rehearsal), and JAX computes on the CPU by default."""
    return (
        _backend.host_path_enabled()
        and getattr(jax.config, "jax_default_device", None) is None
        and jax.default_backend() == "cpu"
    )


_F = TypeVar("_F", bound=Callable[..., Any])

#: Every twin, by the qualified name of the function or method it answers for
#: (``"bayescal.classification._calibrators.fit_platt"``): tests/test_twins.py checks
#: each against its kernel, and a twin without a case there fails it.
TWINS: dict[str, Callable[..., Any]] = {}


def first(twin: Callable[..., Any]) -> Callable[[_F], _F]:
    """Decorator of a public function: try its NumPy ``twin`` first.

    ``twin`` takes the same arguments and returns the result, or None to leave the
    call to the decorated function (so does any exception it raises). The decorated
    function keeps its signature, for type checkers too.
    """

    def wrap(fn: _F) -> _F:
        TWINS[f"{fn.__module__}.{fn.__qualname__}"] = twin

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if active():
                out = _attempt(twin, args, kwargs)
                if out is not None:
                    return out
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return wrap


def _attempt(twin: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``twin(*args, **kwargs)``, or None where it raises (the tests spy on this)."""
    try:
        with np.errstate(all="ignore"):
            return twin(*args, **kwargs)
    except Exception:  # any doubt: the kernel path decides
        return None


# --------------------------------------------------------------------------- arrays
def _default_float() -> type:
    return np.float64 if jax.config.jax_enable_x64 else np.float32


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _floats(x: Any, limit: int = HOST_MAX) -> np.ndarray | None:
    """``x`` in the float dtype that ``validation.as_float_array`` gives it, or None.

    Only numpy arrays (no subclass: a masked array is refused by the kernel path),
    lists, tuples and JAX arrays in host memory, of at most ``limit`` values.
    """
    if type(x) is np.ndarray or isinstance(x, list | tuple):
        a = np.asarray(x)
        dt = a.dtype
        if a.size > limit:
            return None
        if dt == _F64:
            return a if jax.config.jax_enable_x64 else a.astype(_F32)
        if dt == _F32:
            return a
        if dt.kind not in "biuf":
            return None
        return a.astype(_F32 if dt.itemsize <= 2 else _default_float())
    if not isinstance(x, jax.Array) or not host_resident(x) or x.size > limit:
        return None
    a = np.asarray(x)
    if a.dtype == _F32 or a.dtype == _F64:
        return a
    if jnp.issubdtype(a.dtype, jnp.floating):  # float16, bfloat16: in float32
        return a.astype(_F32)
    if jnp.issubdtype(a.dtype, jnp.integer) or a.dtype == np.bool_:
        return a.astype(_default_float())
    return None


def _vector(x: Any, limit: int = HOST_MAX) -> np.ndarray | None:
    """A 1-D, non-empty float array (see :func:`_floats`), or None."""
    a = _floats(x, limit)
    return a if a is not None and a.ndim == 1 and a.size else None


class _Limits(NamedTuple):
    """Of a float dtype: XLA on the CPU reads and writes subnormal floats as 0."""

    tiny: float  # the smallest normal float
    big: float  # the largest finite float
    # 2^(p + 2) tiny (p mantissa bits): every float from there up is a multiple of
    # tiny, so a sum or difference with it is 0 or normal (never flushed), and a
    # subnormal addend (0 for XLA) is lost in its rounding: NumPy and XLA agree.
    safe: float


@functools.cache
def _limits(dtype: np.dtype) -> _Limits:
    info = np.finfo(dtype)
    return _Limits(
        float(info.tiny), float(info.max), float(info.tiny) * 2.0 ** (info.nmant + 2)
    )


def _normal(a: np.ndarray, low: float = -np.inf, high: float = np.inf) -> bool:
    """All values finite, in ``[low, high]``, and 0 or normal (XLA flushes subnormal
    floats to 0; NumPy keeps them). NaN fails."""
    lim = _limits(a.dtype)
    if low >= 0:
        m = a
        small, big = a.min(), a.max()
        if not (low <= small and big <= high):
            return False
    else:
        m = np.abs(a)
        small, big = m.min(), m.max()
    if not big <= lim.big:
        return False
    return bool(small >= lim.tiny or ((m >= lim.tiny) | (m == 0)).all())


_PUT: list[Callable[[np.ndarray], jax.Array]] = []  # the transfer, chosen on first use
_AVALS: dict[tuple[Any, ...], Any] = {}


def _device(x: np.ndarray) -> jax.Array:
    """``x`` as a JAX array on the default device, as ``jnp.asarray`` gives it.

    ``jnp.asarray`` spends ~30 us in Python before its transfer, JAX's
    ``batched_device_put``, which this calls directly (~3 us). If that fails on the
    first use (another JAX), ``jax.device_put`` from then on.
    """
    if not _PUT:
        try:
            from jax._src import core
            from jax._src.lib import xla_client

            device = jax.local_devices()[0]
            sharding = jax.sharding.SingleDeviceSharding(device)

            def put(v: np.ndarray) -> jax.Array:
                key = (v.shape, v.dtype)
                aval = _AVALS.get(key)
                if aval is None:
                    aval = _AVALS[key] = core.ShapedArray(v.shape, v.dtype)
                return xla_client.batched_device_put(aval, sharding, [v], [device], False)

            probe = np.arange(3, dtype=np.float32)
            got = put(probe)
            like = jax.device_put(probe)
            same = (
                type(got) is type(like)
                and got.devices() == like.devices()
                and got._committed == like._committed
                and got.weak_type == like.weak_type
                and np.array_equal(np.asarray(got), probe)
            )
            _PUT.append(put if same else jax.device_put)
        except Exception:
            _PUT.append(jax.device_put)
    return _PUT[0](x)


def _result(value: Any, dtype: Any) -> jax.Array:
    return _device(np.asarray(value, dtype))


# --------------------------------------------------------------------------- classification
_BAD = object()  # an input the host path leaves to the kernel


def _observation_weights(weights: Any, like: np.ndarray, limit: int = HOST_MAX) -> Any:
    """``weights`` as the kernels take them (``like``'s shape and dtype; finite,
    ``>= 0``, not all 0), None for none, or :data:`_BAD`."""
    if weights is None:
        return None
    w = _floats(weights, limit)
    if w is None or w.shape != like.shape:
        return _BAD
    w = w.astype(like.dtype)
    return w if _normal(w, 0) and w.max() > 0 else _BAD


def _reduce(scores: np.ndarray, w: np.ndarray | None, reduction: str, dtype: Any) -> Any:
    """``reduce.reduce_scores`` on the host: float64 sums, rounded once to ``dtype``."""
    if reduction == "none":
        return _device(scores.astype(dtype))
    w64 = None if w is None else w.astype(np.float64)
    return _result(reduce_scores(scores.astype(np.float64), w64, reduction, np), dtype)


# --------------------------------------------------------------------------- isotonic
# The kernels of these four calls sort, pool and run PAV in host callbacks, and JAX's
# persistent cache never stores a program with a host callback: with a warm cache
# their first calls still compiled (~90 ms of a first session's ~0.8 s). Here the
# same host steps run directly, with the kernels' arithmetic.
def _interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """:func:`bayescal._src.interp.interpolate` in NumPy (the kernels' own code)."""
    return interpolate(x, xp, fp, np)


def _knots(*arrays: Any, dtype: Any = None) -> list[np.ndarray] | None:
    """Fitted knots as 1-D float arrays of one dtype in host memory, or None; cast to
    ``dtype`` when given (checked once, after the cast, as the kernel reads them)."""
    if not all(
        isinstance(a, jax.Array) and a.ndim == 1 and a.size and host_resident(a)
        for a in arrays
    ):
        return None
    out = [np.asarray(a) for a in arrays]
    own = out[0].dtype
    if own not in (_F32, _F64) or any(
        a.dtype != own or a.shape != out[0].shape for a in out
    ):
        return None
    if dtype is not None:
        out = [a.astype(dtype) for a in out]
    if not all(_normal(a) for a in out):
        return None
    return out


_ERFC = np.frompyfunc(math.erfc, 1, 1)  # scipy.special's import costs ~0.2 s; this ~0


def erfc(x: Any) -> np.ndarray:
    """The complementary error function of ``x`` in float64, elementwise, without
    importing scipy.special (the host twins of both branches)."""
    return _ERFC(np.asarray(x, np.float64)).astype(np.float64)


def _flushed(a: np.ndarray) -> np.ndarray:
    """Subnormal results as XLA on the CPU writes them: 0."""
    return np.where(np.abs(a) < _limits(a.dtype).tiny, a.dtype.type(0), a)


@functools.lru_cache(maxsize=64)
def _levels(num_levels: int, dtype: np.dtype) -> np.ndarray:
    """``jnp.linspace(0, 1, num_levels, dtype)``: ``i * (1 / (m - 1))``, each rounded
    to the dtype, then 1 (XLA divides by a constant as a product with its reciprocal;
    tests/test_host_path.py checks these floats against JAX's levels and the
    kernels'). Read-only."""
    levels = np.ones(num_levels, dtype)
    step = dtype.type(1) / dtype.type(num_levels - 1)
    levels[:-1] = np.arange(num_levels - 1, dtype=dtype) * step
    levels.flags.writeable = False
    return levels


def _scalar(x: Any) -> np.ndarray | None:
    """A fitted parameter (a concrete 0-d array in host memory), or None."""
    if not isinstance(x, jax.Array) or x.ndim != 0 or not host_resident(x):
        return None
    return np.asarray(x)




# --------------------------------------------------------------------------- regression SKCE
def _kernel_bandwidth(value: Any) -> float | None:
    """A bandwidth option the kernel takes unchanged (a positive finite float), or
    None for anything else (``None`` asks for the median heuristic: see the caller)."""
    if type(value) in (float, int) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _hypot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``jnp.hypot``'s formula in the inputs' dtype, ``max * sqrt(1 + (min / max)^2)``,
    as XLA on CPU computes it (NumPy's ``hypot`` can differ from it in the last bit,
    which moves the median heuristic's bandwidth by an ulp)."""
    a, b = np.abs(a), np.abs(b)
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    with np.errstate(over="ignore", under="ignore"):
        safe = np.where(hi == 0, hi.dtype.type(1), hi)
        q = lo / safe
        if q.dtype == np.float32:  # XLA fuses 1 + q^2 into one rounding (an FMA)
            one_plus = (1 + np.square(q.astype(np.float64))).astype(np.float32)
        else:
            one_plus = 1 + np.square(q)
        out = np.where(hi == 0, hi, hi * np.sqrt(one_plus))
    return np.where(np.isposinf(a) | np.isposinf(b), np.inf, out).astype(a.dtype)


@functools.cache
def _upper_mask(m: int) -> np.ndarray:
    """The pairs ``i < j`` of ``m`` points: a read-only ``[m, m]`` mask, made once."""
    mask = np.triu(np.ones((m, m), bool), 1)
    mask.flags.writeable = False
    return mask


def _median_heuristic(a: np.ndarray, b: np.ndarray | None = None) -> float:
    """``kernel_calibration.median_distance`` of the points ``a`` ([N], or the rows of
    ``[N, C]``; or of the normals ``(a, b)`` in the 2-Wasserstein distance), in their
    dtype's arithmetic: the pairs ``i < j`` of at most ``MEDIAN_POINTS`` observations
    spread over the data."""

    n = a.shape[0]
    m = min(n, _kc.MEDIAN_POINTS)
    idx = (np.arange(m) * n) // m
    upper = _upper_mask(m)  # all differences at once, then the pairs i < j (2.7x a gather)
    sa = a[idx]
    if b is None and a.ndim == 2:  # rows: the Euclidean distance, summed as the kernel
        d = np.sqrt(sum(np.square(c[:, None] - c[None, :]) for c in sa.T))[upper]
    elif b is None:
        d = np.abs(sa[:, None] - sa[None, :])[upper]
    else:
        sb = b[idx]
        d = _hypot((sa[:, None] - sa[None, :])[upper], (sb[:, None] - sb[None, :])[upper])
    c = d.size
    mid = np.partition(d, [(c - 1) // 2, c // 2])  # the two middle values, no sort
    med = (mid[(c - 1) // 2] + mid[c // 2]) / a.dtype.type(2)
    if med > 0:
        return float(med)
    # each distance divided before the sum, as the kernel does (no overflow)
    mean = float(np.sum(d / a.dtype.type(c), dtype=a.dtype))
    return mean if mean > 0 else 1.0


def _linear_pairs(h: Callable[..., Any], arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    """``kernel_calibration.linear_terms`` of the host twins: ``h`` (NumPy) on the
    pairs ``(2i, 2i+1)`` of the arrays, in float64."""

    x = tuple(a.astype(np.float64) for a in arrays)
    return _kc.linear_terms(h, x, np.ones(x[0].shape[0]))[0]


def _linear_test(terms: np.ndarray) -> tuple[float, float]:
    """``kernel_calibration.linear_test`` of the linear estimator's terms (float64):
    the estimate and the one-sided p-value of the normal approximation."""
    mean, var = float(terms.mean()), float(terms.var(ddof=1))
    if var > 0:
        p = 0.5 * math.erfc(math.sqrt(terms.size) * mean / math.sqrt(var) / math.sqrt(2))
    else:  # every term equal: no evidence against calibration unless the mean is > 0
        p = 0.0 if mean > 0 else 1.0
    return mean, p


def _scalar_array(value: float, dtype: Any) -> np.ndarray:
    """A bandwidth as a 0-d array in ``dtype``: an array argument of the kernel's
    fused program (a float would be a static one: a program per value)."""
    return np.asarray(value, dtype)


def _bucket_padded(arrays: Any, n: int) -> tuple[Any, np.ndarray]:
    """The arrays of a pytree (``n`` observations first) padded to the bucket of
    ``n`` by repeating the last observation (``bucketing.bucket_size``: one compiled
    program per bucket, as the validated programs pad), and the weights (1 for a real
    observation, 0 for the padding) in the first array's dtype."""

    size = bucket_size(n)
    padded = jax.tree_util.tree_map(lambda a: pad_axis(a, size, axis=0), arrays)
    dtype = jax.tree_util.tree_leaves(arrays)[0].dtype
    return padded, (np.arange(size) < n).astype(dtype)


def _unbiased_on_host(
    program: Callable[..., Any], args: tuple, n: int, dtype: Any, policy: Any
) -> jax.Array:
    """The unbiased SKCE ``sum_{i != j} h_ij / (n (n - 1))``: the pair sum of
    ``program(*args)`` compiled alone (``kernel_calibration.host_program``), divided
    here in ``dtype``."""

    total = np.asarray(_kc.host_program(program, args, policy))
    nf = np.dtype(dtype).type(n)
    return _result(total / (nf * (nf - 1)), dtype)


def _bootstrap_on_host(
    program: Callable[..., Any], x: Any, w: np.ndarray, counts: np.ndarray, policy: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``(SKCE_uq, p-value)`` of ``kernel_calibration.bootstrap_statistics`` with the
    host's ``counts`` [n, B]: per pass, ``program(x, v)`` (``v`` the weights ``w`` and
    the pass's counts, padded to ``w``'s bucket) compiled alone gives the bilinear
    sums and the ``h_ii``; the statistics and the p-value are computed here in the
    inputs' dtype, as the kernel computes them."""
    dt = w.dtype
    n, num_samples = counts.shape
    nbatches, batch = _kc.bootstrap_batches(num_samples)
    c_all = np.zeros((w.size, nbatches * batch), dt)
    c_all[:n, :num_samples] = counts
    nf = dt.type(n)
    straps, offdiag, diag = [], None, None
    for i in range(nbatches):
        c = c_all[:, i * batch : (i + 1) * batch]
        sums, h_ii = _kc.host_program(program, (x, np.concatenate([w[:, None], c], 1)), policy)
        diag = np.where(w > 0, np.asarray(h_ii), dt.type(0))
        strap, off = _kc.bootstrap_pass(np.asarray(sums), c, diag, nf, np)
        straps.append(strap)
        offdiag = off if offdiag is None else offdiag
    uq, _, _, p = _kc.bootstrap_summary(
        offdiag, diag, w, nf, np.concatenate(straps)[:num_samples], np
    )
    return uq, p


# --------------------------------------------------------------------------- keys
#: The bootstrap's counts ``[N, B]`` come to the host for up to this many values (1 MiB
#: in float32); beyond, the kernel draws them inside its program.
_COUNTS_MAX = 1 << 18


def _unbiased_draws(
    key: Any, num_samples: Any, method: Any, budget: float, y: np.ndarray | None,
    classes: int = 1,
) -> tuple[Any, str, np.ndarray | None] | None:
    """For an unbiased kernel calibration test of the observations ``y`` [N]
    (``classes`` as ``kernel_calibration.resolve_method`` takes them): the key as the
    kernel takes it, the resolved method and, for the bootstrap, its counts ``[N, B]``
    (:func:`bootstrap_counts`; None where the kernel draws them: too many); None where
    the public function's checks should speak (bad options)."""
    from bayescal._src.resampling import as_key

    if y is None or type(num_samples) is not int or num_samples < 1 or key is None:
        return None
    if method not in _kc.METHODS:
        return None
    n = y.size
    how = _kc.resolve_method(method, n, num_samples, budget, classes)
    k = as_key(key)
    if how != "bootstrap" or n * num_samples > _COUNTS_MAX:
        return k, how, None
    return k, how, bootstrap_counts(k, n, num_samples, y.dtype)


def bootstrap_counts(key: jax.Array, n: int, num_samples: int, dtype: Any) -> np.ndarray:
    """``kernel_calibration.bootstrap_statistics``' counts ``[n, B]`` for ``key``, drawn
    by JAX (:func:`_counts_program`) for the bucket of ``n`` as the kernel draws them
    (its padding never drawn): one program per bucket, ``B`` and dtype."""
    w = (np.arange(bucket_size(n)) < n).astype(dtype)
    return np.asarray(_counts_program(key, w, num_samples))[:n]


# unoptimised code: threefry's hash compiles ~10x faster so (bayescal._src.folds)
_counts_program = newton.fast_jit(_kc.bootstrap_counts_of_passes, static_argnums=2)
