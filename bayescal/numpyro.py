"""NumPyro adapter: PIT values, predictive moments and probabilities from NumPyro models.

Two routes to PIT values of held-out observations:

* :func:`pit` counts predictive draws (:class:`numpyro.infer.Predictive` output), like
  :func:`bayescal.regression.pit_draws`;
* :func:`rao_blackwell_pit` evaluates the observed site's own distribution for every
  posterior draw and averages its CDF, :math:`u_i = \\frac1S \\sum_s F(y_i \\mid
  \\theta_s)`: the exact CDF of the posterior predictive mixture, with no Monte Carlo
  noise from sampling ``y``.

:func:`predictive_moments` gives the predictive mean and variance (law of total
variance) for sharpness and sigma-scaling; :func:`predictive_probs` gives the
posterior-mean probability of a Bernoulli site for the classification branch.

This is calibration of the *predictive distribution* against held-out data. It is not
``numpyro.infer.calibration`` (simulation-based calibration checks of the inference
algorithm against data simulated from the prior).

The module imports NumPyro when it is imported; ``import bayescal`` alone does not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal.core import BUCKET_MAX as _BUCKET_MAX
from bayescal.core import as_key as check_key
from bayescal.core import (
    bucket_size,
    narrows,
    pad_axis,
    paddable,
    random_prefix_stable,
    reject_masked,
    warn,
)
from bayescal.regression import pit_draws

try:
    import numpyro.distributions as _dist
    from numpyro import handlers as _handlers
except ImportError as _err:  # pragma: no cover - numpyro is a dependency
    raise ImportError(
        "bayescal.numpyro needs NumPyro; install it with `pip install numpyro`."
    ) from _err

__all__ = [
    "pit",
    "rao_blackwell_pit",
    "loo_pit",
    "predictive_moments",
    "PredictiveMoments",
    "predictive_probs",
    "RecalibratedDistribution",
    "LooPit",  # noqa: F822 (provided by the module __getattr__, with the ArviZ adapter)
    "MatmulPrecision",
]

# Elements (draws x observations) evaluated per step when chunk_size is None: 512 KB
# per float32 temporary keeps a step's working set in cache on CPU. Measured (2-core
# CPU, Normal model): 2-3 ns per element at 1e5-2.5e5 elements per step, 2-3x slower
# at 4e5-3e6 (memory bound) and at 1e3 (per-step overhead).
_AUTO_CHUNK_ELEMENTS = 2**17

_WRAPPERS = (_dist.Independent, _dist.ExpandedDistribution, _dist.MaskedDistribution)

#: Precisions accepted by ``jax.default_matmul_precision``.
MatmulPrecision: TypeAlias = Literal[
    "highest", "high", "default", "float32", "tensorfloat32", "bfloat16"
]
_MATMUL_PRECISIONS: tuple[str, ...] = get_args(MatmulPrecision)

_CALL_PIT = (
    "{name}(model, posterior_samples, y_true, *args, **kwargs) calls "
    "model(*args, **kwargs): the arguments after y_true go to the model."
)
_CALL_NO_Y = (
    "{name}(model, posterior_samples, *args, **kwargs) calls model(*args, **kwargs) "
    "and takes no y_true (unlike rao_blackwell_pit(model, posterior_samples, y_true, "
    "*args)): call {name}(model, posterior_samples, X_test), without the observations."
)


def _default_float() -> np.dtype:
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))  # float32 unless x64


def _needs_float(dtype: Any) -> bool:
    return not jnp.issubdtype(dtype, jnp.floating) or jnp.finfo(dtype).bits < 32


def _reshape(x: Any, shape: tuple[int, ...]) -> Any:
    """``x.reshape(shape)``; in NumPy for host-resident arrays (an eager reshape of a
    JAX array compiles a program per shape)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    if paddable(x):
        return jax.device_put(np.asarray(x).reshape(shape))
    return x.reshape(shape)


class _Checks:
    """The few input checks of this adapter (it sits on the public API, not on _src)."""

    @staticmethod
    def is_concrete(x: Any) -> bool:
        return not isinstance(x, jax.core.Tracer)

    @staticmethod
    def as_float_array(x: Any, name: str) -> jax.Array:
        """A float JAX array; host data is converted in NumPy and moved with
        ``device_put`` (``jnp.asarray`` and ``astype`` compile a program per shape)."""
        if isinstance(x, jax.Array | jax.core.Tracer):
            if not _needs_float(x.dtype):
                return x
            if paddable(x):
                return jax.device_put(np.asarray(x).astype(_default_float()))
            return x.astype(_default_float())
        if isinstance(x, str | bytes) or x is None:
            raise TypeError(f"{name} must be an array of numbers; got {type(x).__name__}.")
        reject_masked(x, name)  # np.asarray would drop the mask
        h = np.asarray(x)
        if h.dtype == object or not (np.issubdtype(h.dtype, np.number) or h.dtype == bool):
            raise TypeError(f"{name} must be an array of numbers; got dtype {h.dtype}.")
        if np.issubdtype(h.dtype, np.complexfloating):
            raise TypeError(f"{name} must be real; got complex dtype {h.dtype}.")
        canonical = jax.dtypes.canonicalize_dtype(h.dtype)
        target = _default_float() if _needs_float(canonical) else canonical
        return jax.device_put(h.astype(target, copy=False))

    @staticmethod
    def check_nonempty(x: Any, name: str) -> None:
        if x.size == 0:
            raise ValueError(
                f"{name} is empty (shape {tuple(x.shape)}); at least one value is needed."
            )

    @staticmethod
    def check_finite(x: Any, name: str) -> None:
        if not _Checks.is_concrete(x):
            return
        if paddable(x):  # in NumPy: no program per shape
            h = np.asarray(x)
            if np.isfinite(h).all():
                return
            n_nan, n_inf = int(np.isnan(h).sum()), int(np.isinf(h).sum())
        elif bool(jnp.isfinite(jnp.sum(x * 0))):
            return
        else:
            n_nan, n_inf = int(jnp.sum(jnp.isnan(x))), int(jnp.sum(jnp.isinf(x)))
        raise ValueError(
            f"{name} contains {n_nan} NaN and {n_inf} infinite values; all values must "
            "be finite. Drop or impute those observations first."
        )

    @staticmethod
    def check_positive_int(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(
                f"{name} must be an int >= 1; got {type(value).__name__} {value!r}."
            )
        if value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value}.")
        return int(value)

    @staticmethod
    def check_choice(value: Any, name: str, choices: Any) -> Any:
        if not isinstance(value, str) or value not in choices:
            opts = ", ".join(repr(c) for c in choices)
            raise ValueError(f"{name} must be one of {opts}; got {value!r}.")
        return value


_v = _Checks


def _matmul_precision(value: Any) -> contextlib.AbstractContextManager:
    """``jax.default_matmul_precision(value)``, or no change for None."""
    if value is None:
        return contextlib.nullcontext()
    _v.check_choice(value, "matmul_precision", _MATMUL_PRECISIONS)
    return jax.default_matmul_precision(value)


# ---------------------------------------------------------------------------------------
# PIT from predictive draws
# ---------------------------------------------------------------------------------------


def _flat_y_for_shape(y: jax.Array, obs_shape: tuple[int, ...], what: str) -> jax.Array:
    """``y`` reshaped to ``obs_shape``; ``y`` may have that shape or be flat."""
    if tuple(y.shape) == tuple(obs_shape):
        return y
    size = math.prod(obs_shape)
    if y.ndim == 1 and y.shape[0] == size:
        return _reshape(y, obs_shape)
    raise ValueError(
        f"y_true has shape {tuple(y.shape)} but {what} has observation shape "
        f"{tuple(obs_shape)}; pass y_true with that shape (or flattened to {size} "
        "values in C order). If the model was called on other data, pass the held-out "
        "inputs that match y_true."
    )


def pit(
    y_true: ArrayLike,
    predictive: Mapping[str, ArrayLike] | ArrayLike,
    *,
    site: str = "obs",
    key: jax.Array | None = None,
) -> jax.Array:
    r"""PIT values from NumPyro predictive draws.

    :math:`u_i = \frac1S \#\{s: y^{(s)}_i \le y_i\}`, or with ``key`` the randomized
    PIT for discrete sites (see :func:`bayescal.regression.pit_draws`).

    Parameters
    ----------
    y_true : array_like, shape ``[*obs_shape]`` or [N]
        Observed values, with the site's observation shape or flattened (C order).
    predictive : dict or array_like
        The output of :class:`numpyro.infer.Predictive` (a dict of draws-first arrays, from
        which ``predictive[site]`` is taken) or the draws themselves, shape
        ``[S, *obs_shape]``.
    site : str, default "obs"
        Name of the observed site in ``predictive``.
    key : jax.random.PRNGKey, optional
        Randomize between :math:`\#\{<\}` and :math:`\#\{\le\}` (for count or binary
        data, where plain PIT values are not uniform even for a correct model).

    Returns
    -------
    Array, shape like ``y_true``

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayescal.numpyro import pit
    >>> draws = {"obs": jnp.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0]])}
    >>> pit(jnp.array([1.5, 1.0]), draws).tolist()
    [0.5, 0.25]
    """
    if isinstance(predictive, Mapping):
        if site not in predictive:
            raise ValueError(
                f"site {site!r} is not in predictive; it has the sites "
                f"{sorted(predictive)}. Pass site=<one of these> (the observed site)."
            )
        draws = predictive[site]
        what = f"predictive[{site!r}]"
    else:
        draws = predictive
        what = "predictive"
    d = _v.as_float_array(draws, what)
    y = _v.as_float_array(y_true, "y_true")
    _v.check_nonempty(y, "y_true")
    if d.ndim < 2:
        raise ValueError(
            f"{what} must be predictive draws of shape [S, *obs_shape] (draws first, as "
            f"numpyro.infer.Predictive returns); got shape {tuple(d.shape)}."
        )
    _v.check_nonempty(d, what)
    y_obs = _flat_y_for_shape(y, tuple(d.shape[1:]), what)
    u = pit_draws(
        _reshape(y_obs, (y_obs.size,)),
        _reshape(d, (d.shape[0], math.prod(d.shape[1:]))),
        key=key,
    )
    return _reshape(u, y.shape)


# ---------------------------------------------------------------------------------------
# Posterior averages of per-draw site statistics
# ---------------------------------------------------------------------------------------


def _unwrap(fn: Any) -> Any:
    """Strip Independent / ExpandedDistribution / MaskedDistribution wrappers."""
    while isinstance(fn, _WRAPPERS):
        fn = fn.base_dist
    return fn


def _dist_name(fn: Any) -> str:
    base = _unwrap(fn)
    if base is fn:
        return type(fn).__name__
    return f"{type(base).__name__} (inside {type(fn).__name__})"


def _pit_stats(base, y, extra, shape, discrete):
    """Per-draw CDF at ``y`` (and at ``y - 1`` for integer supports, in one call)."""
    if not discrete:
        return (jnp.broadcast_to(base.cdf(y), shape),)
    below = y - 1
    both = jnp.broadcast_to(base.cdf(jnp.stack([y, below])), (2, *shape))
    lower = both[1]
    bound = getattr(base.support, "lower_bound", None)
    if bound is not None:
        lower = jnp.where(below < bound, jnp.zeros((), lower.dtype), lower)
    return both[0], lower


def _moment_stats(base, y, pivot, shape, discrete):
    """Per-draw mean (shifted by a fixed pivot), variance, squared shifted mean."""
    mean = jnp.broadcast_to(base.mean, shape)
    var = jnp.broadcast_to(base.variance, shape).astype(mean.dtype)
    centred = mean - pivot
    return centred, var, centred * centred


def _prob_stats(base, y, extra, shape, discrete):
    return (jnp.broadcast_to(base.probs, shape),)


_STATS: dict[str, Callable] = {
    "pit": _pit_stats,
    "moments": _moment_stats,
    "probs": _prob_stats,
}


@dataclasses.dataclass(frozen=True, eq=False)
class _Spec:
    """Static description of one model evaluation (hashed for jit's cache)."""

    model: Callable
    site: str
    treedef: Any
    static_leaves: tuple
    dynamic_index: tuple[int, ...]
    kind: str
    shape: tuple[int, ...]
    discrete: bool

    def _key(self):
        return (
            self.model,
            self.site,
            self.treedef,
            self.static_leaves,
            self.dynamic_index,
            self.kind,
            self.shape,
            self.discrete,
        )

    def __hash__(self):
        try:
            return hash(self._key())
        except TypeError:  # an unhashable static model argument: no cache reuse
            return id(self)

    def __eq__(self, other):
        if not isinstance(other, _Spec):
            return NotImplemented
        if self is other:
            return True
        try:
            return bool(self._key() == other._key())
        except Exception:
            return False

    def rebuild(self, dynamic_leaves):
        return _rebuild(
            self.treedef, self.static_leaves, self.dynamic_index, dynamic_leaves
        )


def _rebuild(treedef, static_leaves, dynamic_index, dynamic_leaves):
    """The model's ``(args, kwargs)`` from static leaves and (traced) array leaves."""
    leaves = list(static_leaves)
    for i, leaf in zip(dynamic_index, dynamic_leaves, strict=True):
        leaves[i] = leaf
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _split_model_args(args, kwargs):
    """Array leaves of the model arguments are traced; everything else is static."""
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    dynamic_index = tuple(
        i for i, leaf in enumerate(leaves) if isinstance(leaf, np.ndarray | jax.Array)
    )
    for i in dynamic_index:  # device_put would drop a mask
        reject_masked(leaves[i], "a model argument")
    static = tuple(None if i in dynamic_index else leaf for i, leaf in enumerate(leaves))
    # numpy leaves are moved with device_put: jnp.asarray compiles a program per shape
    dynamic = [
        jax.device_put(leaves[i]) if isinstance(leaves[i], np.ndarray) else leaves[i]
        for i in dynamic_index
    ]
    return treedef, static, dynamic_index, dynamic


def _site_fn(model, draw, args, kwargs, site, observed):
    """Trace ``model`` with one posterior draw substituted; return the trace.

    Only sample sites are substituted: recorded deterministic sites (in
    ``mcmc.get_samples()``) were computed on the training inputs and are recomputed
    here, as ``Predictive`` does.
    """
    m = model
    if observed is not None:
        m = _handlers.condition(m, data={site: observed})
    m = _handlers.substitute(
        m,
        substitute_fn=lambda msg: (
            draw.get(msg["name"]) if msg["type"] == "sample" else None
        ),
    )
    m = _handlers.seed(m, rng_seed=0)
    return _handlers.trace(m).get_trace(*args, **kwargs)


@functools.partial(jax.jit, static_argnames=("spec", "chunk"))
def _average_kernel(samples, weights, dynamic, observed, obs_weights=None, *, spec, chunk):
    """Posterior means over draws of per-draw site statistics, scanning chunk by chunk.

    ``samples`` are ``[S, ...]``; they are cut into ``[num_chunks, chunk, ...]``
    blocks here (the last one filled by repeating the first draw), ``weights``
    ``[num_chunks, chunk]`` (0 for those padding draws). Only one chunk's ``[chunk,
    *shape]`` temporaries are alive. With ``obs_weights`` (``[S, *shape]``, e.g. PSIS
    weights per draw and observation) each statistic is multiplied by its weight and
    the means are weighted means. One program: the blocking, the scan, the division
    and, for ``kind="moments"``, the mixture's mean and variance.
    Returns the means (``(mean, variance)`` for ``kind="moments"``).
    """
    stat_fn = _STATS[spec.kind]
    num = next(iter(jax.tree_util.tree_leaves(samples))).shape[0]
    num_chunks = weights.shape[0]
    pad = num_chunks * chunk - num

    def blocks(v):
        if pad:
            v = jnp.concatenate([v, jnp.broadcast_to(v[:1], (pad,) + v.shape[1:])])
        return v.reshape((num_chunks, chunk) + v.shape[1:])

    samples = jax.tree_util.tree_map(blocks, samples)
    if obs_weights is not None:
        obs_weights = blocks(obs_weights.reshape((num, *spec.shape)))

    def site_dist(draw):
        args, kwargs = spec.rebuild(dynamic)
        tr = _site_fn(spec.model, draw, args, kwargs, spec.site, observed)
        return _unwrap(tr[spec.site]["fn"])

    extra = None
    if spec.kind == "moments":
        first = jax.tree_util.tree_map(lambda a: a[0, 0], samples)
        extra = jnp.broadcast_to(site_dist(first).mean, spec.shape)

    def one(draw):
        return stat_fn(site_dist(draw), observed, extra, spec.shape, spec.discrete)

    weighted = obs_weights is not None

    def batched(chunk, ow):
        stats = jax.vmap(one)(chunk)
        if weighted:
            stats = tuple(s * ow.astype(s.dtype) for s in stats) + (ow,)
        return stats

    proto = jax.eval_shape(
        batched,
        jax.tree_util.tree_map(lambda a: a[0], samples),
        None if not weighted else obs_weights[0],
    )
    init = tuple(jnp.zeros(p.shape[1:], p.dtype) for p in proto)

    def step(carry, xs):
        chunk, w, ow = xs
        stats = batched(chunk, ow)
        keep = (w > 0).reshape((-1,) + (1,) * len(spec.shape))
        new = []
        for c, s in zip(carry, stats, strict=True):
            s = jnp.where(keep, s, jnp.zeros((), s.dtype)).reshape(s.shape[0], -1)
            # A dot, not jnp.sum(axis=0): on CPU, XLA fuses the CDF into a column
            # reduction as slow scalar code (~10x slower per element than a dot).
            total = jnp.ones((s.shape[0],), s.dtype) @ s
            new.append(c + total.reshape(c.shape))
        return tuple(new), None

    sums, _ = jax.lax.scan(step, init, (samples, weights, obs_weights))
    if not weighted:
        means = tuple(t / num for t in sums)
    else:
        # Each weighted sum adds the same number of terms as the total weight, in the
        # same order, none larger (statistics in [0, 1]): the ratio stays in [0, 1].
        means = tuple(t / sums[-1].astype(t.dtype) for t in sums[:-1])
    if spec.kind == "moments":
        return _moments(extra, *means)
    return means


def _check_samples(posterior_samples: Any, site: str) -> tuple[dict[str, jax.Array], int]:
    if not isinstance(posterior_samples, Mapping):
        raise TypeError(
            "posterior_samples must be a dict of draws-first arrays, e.g. "
            "mcmc.get_samples() or Predictive(guide, params=..., num_samples=...)(key); "
            f"got {type(posterior_samples).__name__}."
        )
    samples = {}
    for k, v in posterior_samples.items():
        if k == site:
            continue
        reject_masked(v, f"posterior_samples[{k!r}]")
        arr = v if isinstance(v, jax.Array) else np.asarray(v)
        if narrows(arr):
            raise ValueError(
                f"posterior_samples[{k!r}] holds integers beyond the int32 range "
                f"(min {arr.min()}, max {arr.max()}), which JAX without x64 wraps; "
                "enable x64 (jax.config.update('jax_enable_x64', True)) or pass them "
                "as floats."
            )
        if jnp.issubdtype(arr.dtype, jnp.floating):
            samples[k] = _v.as_float_array(arr, f"posterior_samples[{k!r}]")
        else:  # integer draws of discrete latent sites stay integers
            samples[k] = jnp.asarray(arr)
    if not samples:
        raise ValueError(
            "posterior_samples is empty (no latent sites besides the observed site "
            f"{site!r}); pass the posterior draws, e.g. mcmc.get_samples()."
        )
    sizes = {k: (int(v.shape[0]) if v.ndim else None) for k, v in samples.items()}
    num = next(iter(sizes.values()))
    if num is None or any(s != num for s in sizes.values()):
        raise ValueError(
            "posterior_samples must all have the same leading draw axis; got leading "
            f"sizes {sizes}. Pass mcmc.get_samples() (draws first, chains pooled)."
        )
    if num == 0:
        raise ValueError(
            "posterior_samples has 0 draws; at least one posterior draw is needed."
        )
    return samples, num


@dataclasses.dataclass(frozen=True)
class _SiteInfo:
    name: str  # the distribution, for messages
    shape: tuple[int, ...]  # batch_shape + event_shape of the site
    discrete: bool
    latent: tuple[str, ...] = ()  # the model's latent sample sites (besides ``site``)
    event_shape: tuple[int, ...] = ()


def _describe_args(args, kwargs) -> str:
    def one(a):
        shape = getattr(a, "shape", None)
        if shape is not None:
            return f"array{list(shape)}"
        return type(a).__name__ if not isinstance(a, int | float | str) else repr(a)

    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _probe(model, samples, split, site, check, call=None) -> _SiteInfo:
    """Trace the model abstractly (no compilation) on the first draw; check the site.

    ``check(name, base, probe_value)`` runs on the unwrapped distribution while
    tracing and raises when the site cannot serve the request. ``call`` describes the
    public function's calling convention, for the message when the model fails.
    """
    info: dict[str, Any] = {}

    def trace_first(draw0, dynamic):
        args, kwargs = _rebuild(*split[:3], dynamic)
        try:
            tr = _site_fn(model, draw0, args, kwargs, site, None)
        except Exception as err:
            raise TypeError(
                f"the model failed when called as model({_describe_args(args, kwargs)}) "
                f"with {type(err).__name__}: {err}. "
                + (call or "")
                + " Pass the model's own inputs (e.g. X) after the fixed arguments."
            ) from err
        sample_sites = [k for k, s in tr.items() if s["type"] == "sample"]
        if site not in sample_sites:
            raise ValueError(
                f"site {site!r} is not a sample site of the model; its sample sites are "
                f"{sample_sites}. Pass site=<the observed site>."
            )
        missing = [
            k
            for k, s in tr.items()
            if s["type"] == "sample"
            and not s["is_observed"]
            and k != site
            and k not in samples
        ]
        if missing:
            raise ValueError(
                f"posterior_samples has no draws for the latent sites {missing} (it has "
                f"{sorted(samples)}); pass draws of every latent site "
                "(mcmc.get_samples(), or Predictive(guide, ...) output), or observe "
                "those sites."
            )
        fn = tr[site]["fn"]
        base = _unwrap(fn)
        name = _dist_name(fn)
        latent = tuple(
            k
            for k, s in tr.items()
            if s["type"] == "sample" and not s["is_observed"] and k != site
        )
        info["site"] = _SiteInfo(
            name,
            tuple(fn.batch_shape) + tuple(fn.event_shape),
            bool(getattr(base.support, "is_discrete", False)),
            latent,
            tuple(fn.event_shape),
        )
        if check is not None:
            check(name, base, jnp.zeros((), jnp.result_type(float)))
        return jnp.zeros(())

    draw0 = {k: jax.ShapeDtypeStruct(v.shape[1:], v.dtype) for k, v in samples.items()}
    jax.eval_shape(trace_first, draw0, split[3])
    return info["site"]


class _Prepared(NamedTuple):
    """The checked inputs of one model evaluation."""

    samples: dict[str, jax.Array]
    num: int
    split: tuple
    info: _SiteInfo  # its shape padded to the bucket when bucketed
    y_site: jax.Array | None  # padded likewise
    n: int | None = None  # the real number of observations when bucketed, else None


def _prepare(
    model,
    posterior_samples,
    args,
    kwargs,
    *,
    site,
    y_true=None,
    check=None,
    call=None,
    bucket=True,
) -> _Prepared:
    """Check the model, the draws and ``y_true``; probe the site (no compilation).

    ``bucket``: pad the observations to their bucket where the model is row-local
    (:func:`_bucket_model`); the returned ``n`` then says how many are real.
    """
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model (a callable); got {model!r}.")
    if not isinstance(site, str):
        raise TypeError(f"site must be the name (str) of the observed site; got {site!r}.")
    samples, num = _check_samples(posterior_samples, site)
    split = _split_model_args(args, kwargs)
    info = _probe(model, samples, split, site, check, call)
    y_site = None
    if y_true is not None:
        y = _v.as_float_array(y_true, "y_true")
        _v.check_nonempty(y, "y_true")
        _v.check_finite(y, "y_true")
        y_site = _flat_y_for_shape(y, info.shape, f"site {site!r}")
        if info.discrete and _v.is_concrete(y):
            y_np = np.asarray(y)
            frac = y_np[y_np != np.floor(y_np)]
            if frac.size:
                raise ValueError(
                    f"y_true must be integer-valued for the discrete site {site!r} "
                    f"({info.name}); got {frac.size} non-integer values such as "
                    f"{frac[:3].tolist()}."
                )
    padded = _bucket_model(model, samples, split, site, info) if bucket else None
    if padded is None:
        return _Prepared(samples, num, split, info, y_site)
    split, info, n = padded
    if y_site is not None:
        y_site = _pad_rows(y_site, info.shape[0])
    return _Prepared(samples, num, split, info, y_site, n)


def _run_average(model, prep: _Prepared, *, site, kind, chunk_size, obs_weights=None):
    r"""Posterior means of per-draw statistics in one program; see
    :func:`_posterior_average`.

    ``obs_weights`` (``[S, *shape]``) makes them weighted means
    :math:`\sum_s w_{si} t_{si} / \sum_s w_{si}` per observation.
    """
    samples, num, split, info, y_site, _ = prep
    shape = info.shape
    if chunk_size is None:
        chunk = max(1, min(num, _AUTO_CHUNK_ELEMENTS // max(1, math.prod(shape))))
    else:
        chunk = min(chunk_size, num)
    num_chunks = -(-num // chunk)
    weights = (np.arange(num_chunks * chunk) < num).astype(np.int32)
    treedef, static, dynamic_index, dynamic = split
    ow = obs_weights
    if isinstance(ow, np.ndarray):
        ow = jax.device_put(ow)
    spec = _Spec(model, site, treedef, static, dynamic_index, kind, shape, info.discrete)
    return _average_kernel(
        samples,
        weights.reshape(num_chunks, chunk),
        dynamic,
        y_site,
        ow,
        spec=spec,
        chunk=chunk,
    )


def _posterior_average(
    model,
    posterior_samples,
    args,
    kwargs,
    *,
    site,
    kind,
    y_true=None,
    chunk_size=None,
    check=None,
    call=None,
    bucket=True,
):
    """Posterior means of per-draw statistics of ``site``'s distribution.

    Returns ``(means, n, info)``: ``means`` is a tuple of arrays of the site's
    shape (``(mean, variance)`` for ``kind="moments"``), ``info`` a
    :class:`_SiteInfo`; when the
    observations were padded to a bucket, ``n`` is the real number of them (the
    shapes are the padded ones: cut them with :func:`_cut_rows`), else None.
    """
    if chunk_size is not None:
        chunk_size = _v.check_positive_int(chunk_size, "chunk_size")
    prep = _prepare(
        model,
        posterior_samples,
        args,
        kwargs,
        site=site,
        y_true=y_true,
        check=check,
        call=call,
        bucket=bucket,
    )
    means = _run_average(model, prep, site=site, kind=kind, chunk_size=chunk_size)
    return means, prep.n, prep.info


def _check_cdf(site):
    def check(name, base, probe):
        try:
            base.cdf(probe)
        except NotImplementedError:
            raise TypeError(
                f"the distribution of site {site!r}, {name}, has no cdf in NumPyro, so "
                "no Rao-Blackwellized PIT. Use bayescal.numpyro.pit on Predictive draws "
                "instead (with key= for discrete data), or predictive_probs for a "
                "Bernoulli site."
            ) from None

    return check


def rao_blackwell_pit(
    model: Callable,
    posterior_samples: Mapping[str, ArrayLike],
    y_true: ArrayLike,
    *args: Any,
    site: str = "obs",
    key: jax.Array | None = None,
    chunk_size: int | None = None,
    matmul_precision: MatmulPrecision | None = "highest",
    **kwargs: Any,
) -> jax.Array:
    r"""Rao-Blackwellized PIT: the posterior predictive mixture CDF at each observation.

    For posterior draws :math:`\theta_1, \dots, \theta_S` and the observed site's
    distribution :math:`F(\cdot \mid \theta)`,

    .. math:: u_i = \frac1S \sum_{s=1}^S F(y_i \mid \theta_s),

    the exact CDF of the posterior predictive (a mixture over the draws) at
    :math:`y_i`. It has no sampling noise from drawing :math:`y`, so it is much less
    noisy than counting predictive draws (:func:`pit`).

    For a discrete site (integer support) with a PRNG ``key``, the randomized PIT

    .. math:: u_i = \bar F(y_i - 1) + V_i\,[\bar F(y_i) - \bar F(y_i - 1)],
       \quad V_i \sim U(0, 1),

    with :math:`\bar F = \frac1S\sum_s F(\cdot \mid \theta_s)`, is exactly uniform for
    a correct model. Without a key a discrete site gives :math:`\bar F(y_i)` (the
    upper end, not uniform even for a correct model) and a ``UserWarning`` says so. For
    continuous sites the key changes nothing (:math:`\bar F(y^-) = \bar F(y)`).

    Parameters
    ----------
    model : callable
        The NumPyro model.
    posterior_samples : dict of str to array_like
        Draws of the latent sites, draw axis first with chains pooled:
        ``mcmc.get_samples()``, or draws of an SVI guide,
        ``Predictive(guide, params=svi_result.params, num_samples=S)(key, ...)``. An
        entry for ``site`` itself is ignored.
    y_true : array_like, shape ``[*site_shape]`` or [N]
        Observed values (held-out data), with the site's shape or flattened.
    *args, **kwargs
        Passed to ``model``: the held-out inputs (e.g. ``X_test``) and the model's
        observation argument as you like it (``y=None`` or ``y=y_true``). The site is
        conditioned on ``y_true`` either way. Array arguments are traced; other
        arguments (ints, strings, ``None``) are static. Keyword arguments named
        ``site``, ``key``, ``chunk_size`` or ``matmul_precision`` cannot reach the
        model.
    site : str, default "obs"
        The observed sample site. Its distribution, after removing the
        ``Independent``, ``ExpandedDistribution`` and ``MaskedDistribution`` wrappers
        NumPyro adds for ``to_event``, plates and masks, must have a ``cdf`` (Normal,
        StudentT, Laplace, Cauchy, Logistic, LogNormal, Gamma, Exponential, Weibull,
        truncated distributions, Poisson, GammaPoisson / NegativeBinomial2, ...).
    key : jax.random.PRNGKey, optional
        Randomize discrete sites as above.
    chunk_size : int, optional
        Posterior draws evaluated per step. Memory is ``O(chunk_size * N)`` whatever
        the number of draws. Default: about :math:`2^{17} / N` draws per step (one
        draw at a time from N = 131072 on).
    matmul_precision : str or None, default "highest"
        The model is evaluated under :obj:`jax.default_matmul_precision` at this
        value, so that its matrix products (``X @ w``) mean the same on every backend: the
        default float32 matmul on recent NVIDIA GPUs is TF32 (10-bit mantissa), which
        moved PIT values by up to 1.7e-4. ``None`` leaves JAX's setting alone.

    Returns
    -------
    Array, shape like ``y_true``
        PIT values in [0, 1].

    Notes
    -----
    Each draw's distribution is found by tracing ``model`` with
    :class:`~numpyro.handlers.substitute` (the draw), ``condition`` (``y_true``) and
    ``trace``, vmapped over the draws of a chunk inside one jitted ``lax.scan`` that
    accumulates sums over chunks (the machinery of
    :func:`numpyro.infer.log_likelihood`). The model must therefore be traceable by
    :func:`jax.jit`.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpyro, numpyro.distributions as dist
    >>> from bayescal.numpyro import rao_blackwell_pit
    >>> def model(x, y=None):
    ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    ...     with numpyro.plate("data", x.shape[0]):
    ...         numpyro.sample("obs", dist.Normal(mu + x, 1.0), obs=y)
    >>> samples = {"mu": jnp.array([-1.0, 1.0])}  # two posterior draws
    >>> x, y = jnp.zeros(2), jnp.array([0.0, 1.0])
    >>> [round(v, 3) for v in rao_blackwell_pit(model, samples, y, x).tolist()]
    [0.5, 0.739]
    """
    if key is not None and not isinstance(key, jax.Array):
        raise TypeError(
            f"key must be a jax.random key (PRNGKey); got {type(key).__name__}."
        )
    y_in = _v.as_float_array(y_true, "y_true")
    with _matmul_precision(matmul_precision):
        means, n, info = _posterior_average(
            model,
            posterior_samples,
            args,
            kwargs,
            site=site,
            kind="pit",
            y_true=y_true,
            chunk_size=chunk_size,
            check=_check_cdf(site),
            call=_CALL_PIT.format(name="rao_blackwell_pit"),
            # the randomized PIT draws one uniform per observation
            bucket=key is None or random_prefix_stable(key),
        )
    u = _finish_pit(means, info, key, site)
    _check_result(u, "rao_blackwell_pit", site, info.name)
    return _reshape(_astype(_cut_rows(u, n), y_in.dtype), y_in.shape)


def _finish_pit(means, info, key, site):
    """PIT values from the mixture CDF at y (and at y - 1 for discrete sites)."""
    upper = means[0]
    if not info.discrete:
        return upper
    lower = means[1]
    if key is None:
        warn(
            f"site {site!r} is discrete ({info.name}) and no key was given, so "
            "the PIT values are the predictive CDF at y, which is not uniform even "
            "for a correct model. Pass key=jax.random.key(...) for the randomized "
            "PIT.",
            UserWarning,
        )
        return upper
    v = jax.random.uniform(key, upper.shape, dtype=upper.dtype)
    return lower + v * (upper - lower)


def _check_result(x: jax.Array, what: str, site: str, name: str) -> None:
    if not _v.is_concrete(x):
        return
    bad = ~np.isfinite(np.asarray(x))
    if bad.any():
        raise ValueError(
            f"{what}: the distribution of site {site!r} ({name}) gave "
            f"{int(bad.sum())} non-finite values. Check that y_true lies in the "
            "distribution's support (e.g. Beta needs 0 <= y <= 1) and that the "
            "posterior draws give valid parameters."
        )


class PredictiveMoments(NamedTuple):
    """Posterior predictive mean and variance, from :func:`predictive_moments`.

    A NamedTuple, so ``mean, variance = predictive_moments(...)`` unpacks as before;
    the fields say which is which, and :attr:`scale` is the standard deviation that
    the ``scale`` arguments of :mod:`bayescal.regression` expect (a variance passed
    there reads as a scale that is its square: ``fit_sigma_scaling`` then fits a
    factor near the variance's own size, not 1).

    Attributes
    ----------
    mean : Array
        Predictive mean, of the site's shape (``[*site_shape]``).
    variance : Array
        Predictive variance (law of total variance), of the same shape; infinite
        where a draw's distribution has no finite variance.
    """

    mean: jax.Array
    variance: jax.Array

    @property
    def scale(self) -> jax.Array:
        """The predictive standard deviation, ``sqrt(variance)``: the ``scale`` of
        :func:`~bayescal.regression.pit_normal`, :func:`~bayescal.regression.sharpness`
        and :func:`~bayescal.regression.fit_sigma_scaling`."""
        v = self.variance
        if isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer) and paddable(v):
            return jax.device_put(np.sqrt(np.asarray(v)))  # no program per length
        return jnp.sqrt(v)


def predictive_moments(
    model: Callable,
    posterior_samples: Mapping[str, ArrayLike],
    *args: Any,
    site: str = "obs",
    chunk_size: int | None = None,
    matmul_precision: MatmulPrecision | None = "highest",
    **kwargs: Any,
) -> PredictiveMoments:
    r"""Posterior predictive mean and variance of a site (law of total variance).

    .. math::
        \mathrm{E}[y] = \frac1S\sum_s \mu_s, \qquad
        \mathrm{Var}[y] = \frac1S\sum_s \sigma^2_s
        + \frac1S\sum_s (\mu_s - \bar\mu)^2,

    with :math:`\mu_s, \sigma^2_s` the mean and variance of the site's distribution
    under draw :math:`s`: exact for the mixture over the draws, without sampling
    ``y``. The result's ``scale`` (``sqrt(variance)``) is the predictive scale for
    :func:`bayescal.regression.sharpness` and
    :func:`bayescal.regression.fit_sigma_scaling`; pass it, not the variance.

    Parameters
    ----------
    model, posterior_samples, site, chunk_size, matmul_precision
        As in :func:`rao_blackwell_pit`.
    *args, **kwargs
        Passed straight to ``model`` (there is no ``y_true``: unlike
        :func:`rao_blackwell_pit`, call ``predictive_moments(model, samples, X_test)``).

    Returns
    -------
    PredictiveMoments
        ``(mean, variance)``, each of shape ``[*site_shape]``, and ``.scale`` =
        ``sqrt(variance)``. The variance is infinite where a draw's distribution has
        no finite variance (StudentT with ``df <= 2``).

    Notes
    -----
    The spread of the means is accumulated around the first draw's means (a shifted
    sum of squares), which avoids the cancellation of :math:`E[\mu^2] - E[\mu]^2` in
    float32.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpyro, numpyro.distributions as dist
    >>> from bayescal.numpyro import predictive_moments
    >>> def model(n, y=None):
    ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    ...     with numpyro.plate("data", n):
    ...         numpyro.sample("obs", dist.Normal(mu, 1.0), obs=y)
    >>> m = predictive_moments(model, {"mu": jnp.array([-1.0, 1.0])}, 3)
    >>> m.mean.tolist(), m.variance.tolist()
    ([0.0, 0.0, 0.0], [2.0, 2.0, 2.0])
    >>> [round(s, 4) for s in m.scale.tolist()]  # for the scale arguments
    [1.4142, 1.4142, 1.4142]
    >>> mean, var = m  # unpacks as a pair
    """

    def check(name, base, probe):
        try:
            base.mean, base.variance  # noqa: B018 - properties that may raise
        except NotImplementedError:
            raise TypeError(
                f"the distribution of site {site!r}, {name}, has no mean or "
                "variance in NumPyro; estimate the moments from Predictive draws."
            ) from None

    with _matmul_precision(matmul_precision):
        (mean, var), n, info = _posterior_average(
            model,
            posterior_samples,
            args,
            kwargs,
            site=site,
            kind="moments",
            chunk_size=chunk_size,
            check=check,
            call=_CALL_NO_Y.format(name="predictive_moments"),
        )
    _check_result(mean, "predictive_moments", site, info.name)
    return PredictiveMoments(_cut_rows(mean, n), _cut_rows(var, n))


def _moments(pivot, centred, within, centred_sq):
    """The mixture's mean and variance (law of total variance), in the kernel."""
    return pivot + centred, within + jnp.maximum(centred_sq - centred * centred, 0.0)


def predictive_probs(
    model: Callable,
    posterior_samples: Mapping[str, ArrayLike],
    *args: Any,
    site: str = "obs",
    chunk_size: int | None = None,
    matmul_precision: MatmulPrecision | None = "highest",
    **kwargs: Any,
) -> jax.Array:
    r"""Posterior predictive probability :math:`P(y_i = 1)` of a Bernoulli site.

    :math:`p_i = \frac1S \sum_s p_i(\theta_s)`, the mean of the site distribution's
    ``probs`` over the posterior draws (the exact predictive probability, not a
    fraction of 0/1 predictive draws). Ready for :mod:`bayescal.classification`.

    Parameters
    ----------
    model, posterior_samples, site, chunk_size, matmul_precision
        As in :func:`rao_blackwell_pit`; the site must be ``Bernoulli`` (``probs`` or
        ``logits``), possibly inside plates, ``to_event`` or ``mask``.
    *args, **kwargs
        Passed straight to ``model`` (there is no ``y_true``).

    Returns
    -------
    Array, shape ``[*site_shape]``
        Probabilities in [0, 1].

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpyro, numpyro.distributions as dist
    >>> from bayescal.numpyro import predictive_probs
    >>> def model(x, y=None):
    ...     w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    ...     with numpyro.plate("data", x.shape[0]):
    ...         numpyro.sample("obs", dist.Bernoulli(logits=w * x), obs=y)
    >>> p = predictive_probs(model, {"w": jnp.array([-1.0, 1.0])}, jnp.array([0.0, 2.0]))
    >>> [round(v, 4) for v in p.tolist()]
    [0.5, 0.5]
    """

    def check(name, base, probe):
        if not isinstance(base, _dist.BernoulliProbs | _dist.BernoulliLogits):
            raise TypeError(
                f"predictive_probs needs a Bernoulli site; site {site!r} has "
                f"{name}. For a continuous or count site use "
                "rao_blackwell_pit or predictive_moments."
            )

    with _matmul_precision(matmul_precision):
        means, n, info = _posterior_average(
            model,
            posterior_samples,
            args,
            kwargs,
            site=site,
            kind="probs",
            chunk_size=chunk_size,
            check=check,
            call=_CALL_NO_Y.format(name="predictive_probs"),
        )
    _check_result(means[0], "predictive_probs", site, info.name)
    return _cut_rows(means[0], n)


# ---------------------------------------------------------------------------------------
# Leave-one-out PIT (PSIS-LOO)
# ---------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("spec",))
def _log_likelihood_kernel(samples, dynamic, observed, *, spec):
    """Pointwise log-likelihood ``[S, *shape]`` of the site, by NumPyro's own function."""
    from numpyro.infer import log_likelihood

    args, kwargs = spec.rebuild(dynamic)
    conditioned = _handlers.condition(spec.model, data={spec.site: observed})
    return log_likelihood(conditioned, samples, *args, **kwargs)[spec.site]


def _pointwise_log_likelihood(model, prep: _Prepared, site: str) -> np.ndarray:
    """``[S, N]`` float64: the log-likelihood of each observation under each draw."""
    samples, num, split, info, y_site, n = prep
    if info.event_shape:
        raise ValueError(
            f"site {site!r} ({info.name}) has event shape {info.event_shape}: its "
            "log-likelihood is one number per event, not per observation, so PSIS-LOO "
            "cannot leave single observations out. Declare the observations with "
            "numpyro.plate (batch dims) instead of .to_event()."
        )
    latent = {k: v for k, v in samples.items() if k in info.latent}
    treedef, static, dynamic_index, dynamic = split
    spec = _Spec(
        model, site, treedef, static, dynamic_index, "loglik", info.shape, info.discrete
    )
    ll = np.asarray(_log_likelihood_kernel(latent, dynamic, y_site, spec=spec))
    if n is not None:
        ll = ll[:, :n]  # the real observations of a padded bucket
    ll = ll.astype(np.float64).reshape(num, -1)
    bad = ~np.isfinite(ll)
    if bad.any():
        raise ValueError(
            f"loo_pit: the log-likelihood of site {site!r} ({info.name}) has "
            f"{int(bad.sum())} non-finite values. Check that y_true lies in the "
            "distribution's support and that the posterior draws give valid parameters."
        )
    return ll


def loo_pit(
    model: Callable,
    posterior_samples: Mapping[str, ArrayLike],
    y_true: ArrayLike,
    *args: Any,
    site: str = "obs",
    key: Any = None,
    rao_blackwell: bool = True,
    predictive: Mapping[str, ArrayLike] | ArrayLike | None = None,
    r_eff: float = 1.0,
    chunk_size: int | None = None,
    matmul_precision: MatmulPrecision | None = "highest",
    **kwargs: Any,
):
    r"""Leave-one-out PIT values of the training data by PSIS-LOO, without refitting.

    With the posterior draws :math:`\theta_s` of a model fitted on all the data and
    ArviZ's Pareto-smoothed importance weights :math:`w_{is} \propto 1 / p(y_i \mid
    \theta_s)` (normalized over the draws), the Rao-Blackwellized LOO-PIT is

    .. math:: u_i = \sum_s w_{is}\, F(y_i \mid \theta_s),

    the CDF at :math:`y_i` of the leave-one-out posterior predictive of observation
    :math:`i`, from the site's own CDF: no sampling noise from predictive draws (no
    peer has it). With ``rao_blackwell=False`` the counting form
    :math:`u_i = \sum_s w_{is} \mathbb 1[x_{si} \le y_i]` from ``predictive`` draws
    :math:`x_{si}` (what :func:`arviz.loo_pit` computes). For discrete sites with a ``key``,
    both give the randomized PIT (as :func:`rao_blackwell_pit`).

    LOO-PIT values check calibration with no held-out split, and a recalibrator fitted
    on them (:func:`bayescal.regression.fit_isotonic_recalibrator`) needs no
    calibration split.

    Parameters
    ----------
    model : callable
        The NumPyro model.
    posterior_samples : dict of str to array_like
        Draws of the latent sites fitted on the data ``y_true``
        (:meth:`MCMC.get_samples() <numpyro.infer.mcmc.MCMC.get_samples>`).
    y_true : array_like, shape ``[*site_shape]`` or [N]
        The *training* observations the posterior was fitted on.
    *args, **kwargs
        Passed to ``model``: the training inputs (as in :func:`rao_blackwell_pit`).
        The site is conditioned on ``y_true``.
    site : str, default "obs"
        The observed sample site. Its observations must be batch dims (plates), not
        event dims (``.to_event``), so that each has its own log-likelihood.
    key : jax.random.PRNGKey or int, optional
        Randomized PIT for discrete sites.
    rao_blackwell : bool, default True
        Use the site's CDF (needs a distribution with a ``cdf``); False counts
        ``predictive`` draws.
    predictive : dict or array_like, optional
        With ``rao_blackwell=False`` (required then): posterior predictive draws of the
        site, ``Predictive(model, posterior_samples)(key, *args)`` or its
        ``[S, *site_shape]`` array, one per posterior draw, in the same order.
    r_eff : float, default 1.0
        Relative effective sample size passed to PSIS (ESS / number of draws; 1 for
        independent draws; see :func:`arviz.loo`).
    chunk_size, matmul_precision
        As in :func:`rao_blackwell_pit`.

    Returns
    -------
    LooPit
        :class:`~typing.NamedTuple` ``(pit, pareto_k)``: PIT values
        (:class:`jax.Array` shaped like ``y_true``) and the Pareto k of each
        observation (``numpy`` float64, same shape). A :class:`UserWarning` says how
        many k exceed 0.7 (unreliable estimates).

    See Also
    --------
    rao_blackwell_pit : the same without weights, for held-out data.
    bayescal.arviz.loo_pit : the counting form from ArviZ data.
    arviz.loo_pit : ArviZ's own LOO-PIT (the counting form, arviz 0.x).

    Notes
    -----
    The pointwise log-likelihood is NumPyro's own :func:`numpyro.infer.log_likelihood`
    (jitted); PSIS is bayescal's own NumPy implementation, all observations at once,
    tested equal to :func:`arviz.psislw` (arviz 0.x) and ``arviz_stats``' ``psislw``
    (arviz 1.x) to 1e-12, with the tail rule of the installed ArviZ (see
    :func:`bayescal.arviz.loo_pit`).
    The weighted sums run through the chunked kernel of :func:`rao_blackwell_pit`.

    References
    ----------
    Vehtari, Gelman & Gabry (2017), "Practical Bayesian model evaluation using
    leave-one-out cross-validation and WAIC", Statistics and Computing 27(5).
    Gelman, Vehtari, Simpson et al. (2020), "Bayesian workflow", arXiv:2011.01808
    (LOO-PIT checks).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpyro, numpyro.distributions as dist
    >>> from bayescal.numpyro import loo_pit
    >>> def model(n, y=None):
    ...     mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    ...     with numpyro.plate("data", n):
    ...         numpyro.sample("obs", dist.Normal(mu, 1.0), obs=y)
    >>> draws = {"mu": jnp.linspace(-0.5, 0.5, 100)}  # (not a real posterior)
    >>> out = loo_pit(model, draws, jnp.array([-1.0, 0.0, 1.0]), 3)
    >>> [round(v, 2) for v in out.pit.tolist()]
    [0.15, 0.5, 0.85]
    """
    from bayescal.arviz import (
        LooPit,
        _check_r_eff,
        _psislw,
        _warn_pareto_k,
        _weighted_pit,
    )

    if not isinstance(rao_blackwell, bool):
        raise TypeError(f"rao_blackwell must be a bool; got {rao_blackwell!r}.")
    r_eff = _check_r_eff(r_eff)
    if r_eff is None:
        raise TypeError("r_eff must be a positive float (1.0 for independent draws).")
    rng_key = None if key is None else check_key(key, "key")
    if chunk_size is not None:
        chunk_size = _v.check_positive_int(chunk_size, "chunk_size")
    if rao_blackwell and predictive is not None:
        raise ValueError(
            "predictive draws are only used with rao_blackwell=False (the counting "
            "form); the Rao-Blackwellized LOO-PIT uses the site's CDF. Drop predictive "
            "or pass rao_blackwell=False."
        )
    if not rao_blackwell and predictive is None:
        raise ValueError(
            "rao_blackwell=False counts posterior predictive draws: pass "
            "predictive=Predictive(model, posterior_samples)(key, *args) (one draw per "
            "posterior draw), or use the default rao_blackwell=True."
        )
    y_in = _v.as_float_array(y_true, "y_true")
    with _matmul_precision(matmul_precision):
        prep = _prepare(
            model,
            posterior_samples,
            args,
            kwargs,
            site=site,
            y_true=y_true,
            check=_check_cdf(site) if rao_blackwell else None,
            call=_CALL_PIT.format(name="loo_pit"),
            bucket=rng_key is None or random_prefix_stable(rng_key),
        )
        info, n = prep.info, prep.n
        log_lik = _pointwise_log_likelihood(model, prep, site)  # [S, N] (real N)
        log_weights, pareto_k = _psislw(log_lik.T, r_eff)  # [N, S], [N]
        if rao_blackwell:
            dtype = np.dtype(prep.y_site.dtype)
            # the weights on the host, padded like the observations (no program per N)
            w = np.exp(log_weights.T.astype(dtype))
            if n is not None:
                w = _pad_rows(
                    w.reshape((prep.num, n) + info.shape[1:]), info.shape[0], axis=1
                )
            means = _run_average(
                model, prep, site=site, kind="pit", chunk_size=chunk_size, obs_weights=w
            )
            u = _finish_pit(means, info, rng_key, site)
        else:
            shape = info.shape if n is None else (n, *info.shape[1:])
            draws = _predictive_draws(predictive, site, prep.num, shape)
            y_site = _cut_rows(prep.y_site, n)
            u = _weighted_pit(
                np.asarray(y_site).reshape(-1)
                if paddable(y_site)
                else y_site.reshape(-1),
                _rows_last(draws, prep.num),
                log_weights,
                rng_key,
            )
            n = None  # _weighted_pit pads and cuts on its own
    _check_result(u, "loo_pit", site, info.name)
    _warn_pareto_k(pareto_k)
    u = _reshape(_astype(_cut_rows(u, n), y_in.dtype), y_in.shape)
    return LooPit(u, np.asarray(pareto_k).reshape(y_in.shape))


def _rows_last(draws: jax.Array, num: int) -> Any:
    """``draws [S, *shape]`` as ``[N, S]`` (on the host for host arrays)."""
    if paddable(draws):
        return np.asarray(draws).reshape(num, -1).T
    return draws.reshape(num, -1).T


def _predictive_draws(predictive, site, num, shape) -> jax.Array:
    if isinstance(predictive, Mapping):
        if site not in predictive:
            raise ValueError(
                f"site {site!r} is not in predictive; it has the sites "
                f"{sorted(predictive)}. Pass site=<one of these> (the observed site)."
            )
        draws, what = predictive[site], f"predictive[{site!r}]"
    else:
        draws, what = predictive, "predictive"
    d = _v.as_float_array(draws, what)
    _v.check_finite(d, what)
    expected = (num, *shape)
    if tuple(d.shape) != expected and not (
        d.ndim == 2 and d.shape[0] == num and d.shape[1] == math.prod(shape)
    ):
        raise ValueError(
            f"{what} has shape {tuple(d.shape)}; expected {expected}: one predictive "
            "draw per posterior draw (in the same order) for each observation, e.g. "
            "Predictive(model, posterior_samples)(key, *args)."
        )
    return d


def _astype(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype)``; in NumPy for host-resident arrays (no program per shape)."""
    if x.dtype == dtype:
        return x
    if paddable(x):
        return jax.device_put(np.asarray(x).astype(dtype))
    return x.astype(dtype)


def _pad_rows(x: Any, size: int, axis: int = 0) -> Any:
    """``x`` padded along ``axis`` to ``size`` by repeating its last row, on the host."""
    host = np.asarray(x)
    out = pad_axis(host, size, axis=axis)
    return out if isinstance(x, np.ndarray) else jax.device_put(out)


def _cut_rows(x: Any, n: int | None) -> Any:
    """The first ``n`` rows of ``x`` (all of them for None), cut on the host when it
    lives there (no program per length)."""
    if n is None or x.shape[0] == n:
        return x
    if paddable(x):
        return jax.device_put(np.asarray(x)[:n])
    return x[:n]


def _bucket_model(model, samples, split, site, info: _SiteInfo) -> tuple | None:
    """The model's arguments padded to the bucket of the number of observations.

    Returns ``(split, info, n)`` with the padded arguments and site shape, or None
    (nothing to pad, or a model not proven row-local). The arguments padded are the
    host-resident arrays whose first axis has the site's first length ``n``; the
    model is traced with that length symbolic (nothing is compiled), and its site's
    distribution must then have the symbolic length first and keep the observations
    apart (:func:`_row_local`). Each observation's statistics are then those of the
    unpadded model, and one program serves every ``n`` of a bucket.
    """
    if not info.shape:
        return None
    n_obs = info.shape[0]
    size = bucket_size(n_obs)
    if size == n_obs or n_obs > _BUCKET_MAX:
        return None
    treedef, static, dynamic_index, dynamic = split
    rows = [
        j
        for j, a in enumerate(dynamic)
        if paddable(a) and a.ndim >= 1 and a.shape[0] == n_obs
    ]
    if not rows:  # e.g. the number of observations given as an int: not padded
        return None
    key = (
        model,
        site,
        treedef,
        static,
        tuple(
            (j in rows, a.shape[1:] if j in rows else a.shape, str(a.dtype))
            for j, a in enumerate(dynamic)
        ),
        tuple(sorted((k, v.shape[1:], str(v.dtype)) for k, v in samples.items())),
        info.shape[1:],
        info.event_shape,
    )
    try:
        local = _ROW_LOCAL.get(key)
    except TypeError:  # an unhashable static argument: analysed every time
        key, local = None, None
    if local is None:
        local = _row_local_model(model, samples, split, site, info, rows)
        if key is not None:
            if len(_ROW_LOCAL) >= 256:
                _ROW_LOCAL.clear()
            _ROW_LOCAL[key] = local
    if not local:
        return None
    padded = [_pad_rows(a, size) if j in rows else a for j, a in enumerate(dynamic)]
    info = dataclasses.replace(info, shape=(size, *info.shape[1:]))
    return (treedef, static, dynamic_index, padded), info, n_obs


# Whether a model (with given static arguments, shapes and dtypes) is row-local:
# the analysis traces the model (~40 ms), so its answer is kept.
_ROW_LOCAL: dict[Any, bool] = {}


def _row_local_model(model, samples, split, site, info: _SiteInfo, rows: list[int]) -> bool:
    """Whether ``model``'s site keeps the observations apart when the arguments
    ``rows`` (of ``split``'s array arguments) have a symbolic first length."""
    treedef, static, dynamic_index, dynamic = split
    try:
        (n_sym,) = jax.export.symbolic_shape("n")
        avals = [
            jax.ShapeDtypeStruct((n_sym, *a.shape[1:]) if j in rows else a.shape, a.dtype)
            for j, a in enumerate(dynamic)
        ]
        draw = {k: jax.ShapeDtypeStruct(v.shape[1:], v.dtype) for k, v in samples.items()}
        found: dict[str, Any] = {}

        def leaves(draw, dyn):
            args, kwargs = _rebuild(treedef, static, dynamic_index, dyn)
            fn = _site_fn(model, draw, args, kwargs, site, None)[site]["fn"]
            found["shape"] = tuple(fn.batch_shape) + tuple(fn.event_shape)
            found["event"] = tuple(fn.event_shape)
            return [
                leaf
                for leaf in jax.tree_util.tree_leaves(fn)
                if isinstance(leaf, jax.Array | jax.core.Tracer)
            ]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            closed = jax.make_jaxpr(leaves)(draw, avals)
        shape = found["shape"]
        if (
            len(shape) != len(info.shape)
            or _row_axis(shape, n_sym) != 0
            or tuple(shape[1:]) != tuple(info.shape[1:])
            or found["event"] != tuple(info.event_shape)
            or not _row_local(closed.jaxpr, n_sym)
            # the distribution's arrays with rows have them first, like the site
            or any(
                _row_axis(v.aval.shape, n_sym) not in (None, 0)
                for v in closed.jaxpr.outvars
            )
        ):
            return False
    except Exception:  # the model does not trace with a symbolic length
        return False
    return True


# ---------------------------------------------------------------------------------------
# Shape bucketing of model evaluations
# ---------------------------------------------------------------------------------------
#
# A model is user code: padding its inputs (repeating the last observation) is valid
# only when each observation's distribution depends on that observation's rows of the
# inputs alone: no mean over the data, no count of it (``x.shape[0]`` as a number), no
# sort or shift of it. That is read off the model's jaxpr, traced abstractly (nothing is
# compiled) with a *symbolic* number of observations ``n``, by the conservative
# analysis below; a model it cannot prove row-local is evaluated at its exact length,
# as before.

# Primitives applied elementwise (operands of one shape, or rank-0 operands broadcast).
_ELEMENTWISE = frozenset(
    """abs acos acosh add and asin asinh atan atan2 atanh bessel_i0e bessel_i1e cbrt
    ceil clamp clz conj convert_element_type copy copy_p cos cosh digamma div eq erf
    erf_inv erfc exp exp2 expm1 floor ge gt igamma igamma_grad_a igammac imag
    integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter
    not or polygamma population_count pow random_gamma_grad real reduce_precision
    regularized_incomplete_beta rem round rsqrt select_n shift_left
    shift_right_arithmetic shift_right_logical sign sin sinh sqrt square stop_gradient
    sub tan tanh xor zeta bitcast_convert_type optimization_barrier""".split()
)
_CALLS = frozenset(
    "pjit jit closed_call core_call custom_jvp_call custom_vjp_call "
    "custom_vjp_call_jaxpr remat checkpoint".split()
)
# Primitives that keep rows apart along their other axes (checked per primitive below).
_ALONG_OTHER_AXES = frozenset(
    "reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax "
    "argmin cumsum cumprod cummax cummin cumlogsumexp sort rev concatenate pad slice "
    "split dynamic_slice".split()
)
# Primitives that make a value with the rows' axis from no data: fine where its value
# at row r does not depend on n (an index, a constant).
_INDEX_STABLE = frozenset("iota broadcast_in_dim reshape squeeze transpose".split())


_ODD = "odd"  # a shape with n twice, or with another symbolic size (n - 1, 2 n)


def _row_axis(shape: tuple, n: Any) -> Any:
    """The axis of ``shape`` holding ``n``; None: none; :data:`_ODD`: ``n`` twice, or
    another symbolic size such as ``n - 1`` or ``2 n``."""
    axes = []
    for a, dim in enumerate(shape):
        if isinstance(dim, int | np.integer):
            continue
        try:
            same = bool(dim == n)
        except Exception:
            same = False
        if not same:
            return _ODD
        axes.append(a)
    if len(axes) > 1:
        return _ODD
    return axes[0] if axes else None


def _sub_jaxpr(eqn: Any) -> Any:
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = eqn.params.get(name)
        if sub is not None:
            return getattr(sub, "jaxpr", sub)  # a ClosedJaxpr or a Jaxpr
    return None


def _row_local(jaxpr: Any, n: Any) -> bool:
    """Whether every output of ``jaxpr`` keeps the observations (rows) apart.

    The observation axis has the symbolic size ``n``; every value has it once or not
    at all. Row-local: a value with it has, at row ``r``, a function of the inputs'
    row ``r`` (and of values without rows); a value without it depends on no row.
    Every equation on the way to the outputs with an input or output that has rows
    must be one of the primitives understood here, applied so that this holds;
    anything else (a reduction or a scan over the rows, a gather across them, ``n``
    used as a number, random draws of ``n`` values, an unknown primitive) makes the
    outputs that depend on it not row-local. Values that reach no output (e.g. the
    site's own sample, drawn while tracing) do not count.
    """
    return not any(_mixed_outputs(jaxpr, [False] * len(jaxpr.invars), n))


def _mixed_outputs(jaxpr: Any, mixed_in: list[bool], n: Any) -> list[bool]:
    """For each output of ``jaxpr``: whether it may mix rows (see :func:`_row_local`)."""
    mixed: dict[Any, bool] = dict(zip(jaxpr.invars, mixed_in, strict=True))

    def read(v: Any) -> bool:
        return False if type(v).__name__ == "Literal" else mixed.get(v, False)

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = [read(v) for v in eqn.invars]
        in_axes = [_row_axis(getattr(v.aval, "shape", ()), n) for v in eqn.invars]
        out_axes = [_row_axis(getattr(v.aval, "shape", ()), n) for v in eqn.outvars]
        sub = _sub_jaxpr(eqn) if name in _CALLS else None
        if name in _CALLS and sub is not None and len(sub.invars) == len(ins):
            outs = _mixed_outputs(sub, ins, n)
        elif name == "dim_as_value" or _ODD in in_axes or _ODD in out_axes:
            outs = [True] * len(eqn.outvars)  # n used as a number; n twice, n - 1, 2 n
        elif all(a is None for a in in_axes + out_axes):
            outs = [any(ins)] * len(eqn.outvars)  # no rows here
        else:
            data = any(a is not None for a in in_axes)
            ok = not (data and any(a is None for a in out_axes))  # rows reduced away
            ok = ok and _eqn_row_local(eqn, name, in_axes, out_axes, data)
            outs = [any(ins) or not ok] * len(eqn.outvars)
        for v, m in zip(eqn.outvars, outs, strict=True):
            mixed[v] = m
    return [read(v) for v in jaxpr.outvars]


def _eqn_row_local(eqn: Any, name: str, in_axes: list, out_axes: list, data: bool) -> bool:
    p = eqn.params
    d_out = out_axes[0]
    if not data:  # rows made from no data: an index or a constant along them
        return name in _INDEX_STABLE or name in _ELEMENTWISE
    if name in _ELEMENTWISE:
        rank = len(getattr(eqn.outvars[0].aval, "shape", ()))
        return all(
            a is None or (a == d_out and len(v.aval.shape) == rank)
            for a, v in zip(in_axes, eqn.invars, strict=True)
        ) and all(a == d_out for a in out_axes)
    d = next(a for a in in_axes if a is not None)
    shape = eqn.invars[in_axes.index(d)].aval.shape
    if name == "broadcast_in_dim":
        return in_axes[0] == d and p["broadcast_dimensions"][d] == d_out
    if name == "reshape":
        if p.get("dimensions") is not None:
            return False
        out_shape = eqn.outvars[0].aval.shape
        try:
            return bool(math.prod(shape[:d]) == math.prod(out_shape[:d_out]))
        except Exception:
            return False
    if name == "squeeze":
        dims = [a % len(shape) for a in p["dimensions"]]
        return d not in dims and d - sum(a < d for a in dims) == d_out
    if name == "transpose":
        return list(p["permutation"]).index(d) == d_out
    if name == "dot_general":
        # n is never contracted (the output keeps it once): batch or free dims only
        return True
    if name == "gather":
        dn = p["dimension_numbers"]
        if getattr(dn, "operand_batching_dims", ()):
            return False
        if in_axes[0] is not None:  # from the rows: only all of them, kept in place
            a = in_axes[0]
            if (
                in_axes[1] is not None
                or a in dn.collapsed_slice_dims
                or a in dn.start_index_map
            ):
                return False
            kept = [b for b in range(len(shape)) if b not in dn.collapsed_slice_dims]
            return dn.offset_dims[kept.index(a)] == d_out
        index_rank = len(eqn.invars[1].aval.shape)
        if in_axes[1] == index_rank - 1:
            return False
        batch = [
            a for a in range(len(eqn.outvars[0].aval.shape)) if a not in dn.offset_dims
        ]
        return batch[in_axes[1]] == d_out
    if name in _ALONG_OTHER_AXES:
        if any(a is not None and a != d for a in in_axes):
            return False
        if name.startswith(("reduce_", "arg")):
            axes = list(p["axes"])
            return d not in axes and d - sum(a < d for a in axes) == d_out
        if name.startswith("cum"):
            return p["axis"] != d and d == d_out
        if name == "sort":
            return p["dimension"] != d and all(a == d for a in out_axes)
        if name == "rev":
            return d not in p["dimensions"] and d == d_out
        if name in ("concatenate", "split"):
            axis = p["dimension"] if name == "concatenate" else p["axis"]
            return axis != d and all(a == d for a in out_axes)
        if name == "pad":
            return tuple(p["padding_config"][d]) == (0, 0, 0) and d == d_out
        if name == "slice":  # the output keeps all n rows: the full axis
            strides = p.get("strides")
            return (
                p["start_indices"][d] == 0
                and (not strides or strides[d] == 1)
                and d == d_out
            )
        if name == "dynamic_slice":  # size n along the rows: the full axis
            return in_axes[0] == d and all(a is None for a in in_axes[1:]) and d == d_out
    return False


# ---------------------------------------------------------------------------------------
# Recalibrated predictive distribution
# ---------------------------------------------------------------------------------------

# Gauss-Legendre rule on [-1, 1] for the moments by quadrature over levels.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(8)
_GENERIC_PANELS = 128  # panels of the uniform level grid for recalibrators without knots
_GRADE = np.concatenate([[0.0], 2.0 ** -np.arange(40, -1, -1)])  # 0, 2^-40, ..., 1/2, 1


def _implements(base: Any, method: str) -> bool:
    return getattr(type(base), method, None) is not getattr(_dist.Distribution, method)


class RecalibratedDistribution(_dist.Distribution):
    r"""A predictive distribution recalibrated by a map of CDF levels.

    For a base predictive with CDF :math:`F` and a fitted recalibrator :math:`R`
    (nondecreasing from [0, 1] onto [0, 1], e.g. Kuleshov's isotonic map from
    :func:`bayescal.regression.fit_isotonic_recalibrator`),

    .. math::
        G(y) = R(F(y)), \qquad G^{-1}(q) = F^{-1}(R^{-1}(q)), \qquad
        \log g(y) = \log f(y) + \log R'(F(y)).

    A NumPyro ``Distribution``: use it as a site distribution (in a plate, under
    :class:`numpyro.infer.Predictive`, inside :func:`jax.jit`), or evaluate it directly.
    Sampling is by inversion, :math:`G^{-1}(U)`; ``mean`` and ``variance`` are
    computed by Gauss-Legendre quadrature over levels, :math:`\int_0^1 G^{-1}(q)\,dq`.

    Parameters
    ----------
    base : numpyro.distributions.Distribution
        A continuous, univariate (event shape ``()``) predictive with ``cdf`` and
        ``icdf`` (Normal, StudentT, Laplace, Cauchy, Logistic, Gumbel, ...); its batch
        shape is the batch shape of the result.
    recalibrator : IsotonicLevelCalibrator or callable with ``.inverse``
        Maps raw levels to calibrated levels; ``recalibrator.inverse`` maps them back.
        An :class:`~bayescal.regression.IsotonicLevelCalibrator` is piecewise linear:
        :math:`R'` is the slope of the segment of its knots containing :math:`F(y)`
        (zero-width segments of repeated knots are skipped). Any other callable is
        differentiated by :func:`jax.jvp` and must then be differentiable.
    validate_args : bool, optional
        NumPyro's argument validation flag.

    Notes
    -----
    Kuleshov's map reaches level 1 at the largest calibration PIT value
    :math:`u_{(n)}` (and level :math:`1/n` already at :math:`u_{(1)}`), so :math:`G`
    has no mass above :math:`F^{-1}(u_{(n)})`: ``log_prob`` is ``-inf`` there. The
    quadrature uses 8 Gauss-Legendre nodes on each segment between consecutive
    calibrated knots of an ``IsotonicLevelCalibrator`` (where :math:`G^{-1}` is smooth),
    or on each of 128 equal panels for other recalibrators, with the first and last
    panels split geometrically towards levels 0 and 1 (where :math:`G^{-1}` of an
    unbounded base is infinite). Calibration PIT values of exactly 0 or 1 (a base CDF
    rounded in float32, e.g. :math:`\Phi(z) = 1` beyond :math:`z \approx 5.4`) would
    put :math:`F^{-1}(0)` or :math:`F^{-1}(1)` inside the distribution: ``icdf`` (and
    so ``sample``) clamps those levels to the nearest representable ones inside (0, 1).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpyro.distributions as dist
    >>> from bayescal.numpyro import RecalibratedDistribution
    >>> from bayescal.regression import fit_isotonic_recalibrator
    >>> r = fit_isotonic_recalibrator(jnp.array([0.1, 0.2, 0.3, 0.9]))
    >>> d = RecalibratedDistribution(dist.Normal(0.0, 1.0), r)
    >>> round(float(d.cdf(0.0)), 4)  # R(0.5): three of four PIT values are below
    0.8333
    >>> round(float(d.icdf(0.5)), 4)  # the base's 0.2-quantile
    -0.8416
    """

    arg_constraints: dict = {}
    pytree_data_fields = ("base", "recalibrator")

    def __init__(self, base: Any, recalibrator: Any, *, validate_args: bool | None = None):
        if not isinstance(base, _dist.Distribution):
            raise TypeError(
                "base must be a numpyro.distributions.Distribution (the predictive to "
                f"recalibrate, e.g. dist.Normal(loc, scale)); got {type(base).__name__}."
            )
        if tuple(base.event_shape) != ():
            raise ValueError(
                f"base must be univariate (event shape ()); got {type(base).__name__} "
                f"with event shape {tuple(base.event_shape)}. Recalibrate each "
                "coordinate's marginal (batch dims) instead."
            )
        if getattr(base.support, "is_discrete", False):
            raise TypeError(
                f"base must be continuous; {type(base).__name__} is discrete. A map of "
                "CDF levels has no density for discrete predictives; recalibrate their "
                "randomized PIT values instead."
            )
        missing = [m for m in ("cdf", "icdf") if not _implements(base, m)]
        if missing:
            raise TypeError(
                f"base ({type(base).__name__}) has no {' or '.join(missing)} in NumPyro; "
                "RecalibratedDistribution needs both (Normal, StudentT, Laplace, "
                "Cauchy, Logistic, Gumbel, ...). For a plated or masked site pass the "
                "unwrapped distribution and expand the result."
            )
        if not callable(recalibrator) or not callable(
            getattr(recalibrator, "inverse", None)
        ):
            raise TypeError(
                "recalibrator must map CDF levels to levels and have an .inverse (e.g. "
                "fit_isotonic_recalibrator(pit)); got "
                f"{type(recalibrator).__name__}. A SigmaScalingCalibrator rescales the scale: "
                "build the base with scale * factor instead."
            )
        self.base = base
        self.recalibrator = recalibrator
        super().__init__(
            batch_shape=tuple(base.batch_shape), event_shape=(), validate_args=validate_args
        )

    @_dist.constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return self.base.support

    def _knots(self):
        raw = getattr(self.recalibrator, "raw", None)
        cal = getattr(self.recalibrator, "calibrated", None)
        if (
            raw is None
            or cal is None
            or jnp.ndim(raw) != 1
            or jnp.shape(raw) != jnp.shape(cal)
        ):
            return None
        return jnp.asarray(raw), jnp.asarray(cal)

    def _slope(self, p):
        """:math:`R'(p)`: the slope of the knot segment containing ``p``."""
        knots = self._knots()
        if knots is None:
            return jax.jvp(self.recalibrator, (p,), (jnp.ones_like(p),))[1]
        raw, cal = knots
        m = raw.shape[0]
        right = jnp.searchsorted(raw, p, side="right") - 1  # raw[k] <= p < raw[k+1]
        left = jnp.searchsorted(raw, p, side="left") - 1  # at p = 1: the last segment
        k = jnp.clip(jnp.where(right <= m - 2, right, left), 0, m - 2)
        width = raw[k + 1] - raw[k]
        rise = cal[k + 1] - cal[k]
        slope = jnp.where(width > 0, rise / jnp.where(width > 0, width, 1), jnp.inf)
        return jnp.where(jnp.isnan(p), jnp.nan, slope).astype(p.dtype)

    def cdf(self, value):
        return self.recalibrator(self.base.cdf(value))

    def icdf(self, q):
        r = self.recalibrator.inverse(q)
        # PIT values of the fit may hold exact 0s and 1s where the base's CDF rounds
        # (float32: Phi(z) == 1 beyond z ~ 5.4), so R^-1 of a level inside (0, 1) can be
        # 0 or 1, where the base's quantile is infinite. The nearest representable
        # levels inside (0, 1) are what those PIT values stood for.
        dtype = jnp.result_type(r)
        info = jnp.finfo(dtype)
        inside = (q > 0) & (q < 1)
        r = jnp.where(inside, jnp.clip(r, info.tiny, 1 - info.epsneg), r)
        return self.base.icdf(r)

    def log_prob(self, value):
        p = self.base.cdf(value)
        return self.base.log_prob(value) + jnp.log(self._slope(p))

    def sample(self, key, sample_shape=()):
        shape = tuple(sample_shape) + tuple(self.batch_shape)
        dtype = jnp.result_type(float)
        u = jax.random.uniform(key, shape, dtype=dtype, minval=jnp.finfo(dtype).tiny)
        return self.icdf(u)

    def _quadrature(self):
        """Levels ``q [M]`` and weights ``[M]`` of the quadrature over (0, 1)."""
        x = jnp.asarray(_GL_NODES)
        w = jnp.asarray(_GL_WEIGHTS)
        knots = self._knots()
        if knots is None:
            edges = jnp.linspace(0.0, 1.0, _GENERIC_PANELS + 1)
        else:
            edges = knots[1]
        # The quantile function of an unbounded base is infinite at levels 0 and 1:
        # split the first and last panels geometrically towards them (panels of
        # relative width 2^-j), which keeps the rule accurate there.
        grade = jnp.asarray(_GRADE, edges.dtype)
        first = edges[0] + (edges[1] - edges[0]) * grade
        last = edges[-1] - (edges[-1] - edges[-2]) * grade[::-1]
        edges = jnp.concatenate([first, edges[2:-2], last])
        lo, length = edges[:-1], jnp.diff(edges)
        q = lo[:, None] + length[:, None] * (x + 1) / 2
        weight = length[:, None] * w / 2
        return q.reshape(-1), weight.reshape(-1).astype(q.dtype)

    def _values_at_levels(self):
        q, weight = self._quadrature()
        # Zero-width segments (repeated knots) have weight 0 and may sit at level 0 or
        # 1, where icdf is infinite; in float32 the finest graded panels round to 0 or
        # 1 too (their mass is below 1e-7). Drop those nodes (evaluated at 1/2).
        keep = (weight > 0) & (q > 0) & (q < 1)
        weight = jnp.where(keep, weight, 0)
        q = jnp.where(keep, q, 0.5)
        q = q.reshape((-1,) + (1,) * len(self.batch_shape))
        values = self.icdf(q)
        weight = weight.reshape(q.shape).astype(values.dtype)
        return values, weight

    @property
    def mean(self):
        values, weight = self._values_at_levels()
        return jnp.sum(weight * values, axis=0) / jnp.sum(weight, axis=0)

    @property
    def variance(self):
        values, weight = self._values_at_levels()
        total = jnp.sum(weight, axis=0)
        mean = jnp.sum(weight * values, axis=0) / total
        return jnp.sum(weight * (values - mean) ** 2, axis=0) / total


def __getattr__(name: str) -> Any:
    if name == "LooPit":  # defined with the ArviZ adapter, which holds the PSIS code
        from bayescal.arviz import LooPit

        return LooPit
    raise AttributeError(f"module 'bayescal.numpyro' has no attribute {name!r}")
