"""NumPyro adapter: PIT values, predictive moments and probabilities from NumPyro models.

Two routes to PIT values of held-out observations:

* :func:`pit` counts predictive draws (``numpyro.infer.Predictive`` output), like
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

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal.regression import pit_draws

try:
    import numpyro.distributions as _dist
    from numpyro import handlers as _handlers
except ImportError as _err:  # pragma: no cover - numpyro is a dependency
    raise ImportError(
        "bayescal.numpyro needs NumPyro; install it with `pip install numpyro`."
    ) from _err

__all__ = ["pit", "rao_blackwell_pit", "predictive_moments", "predictive_probs"]

# Elements (draws x observations) evaluated per step when chunk_size is None: 512 KB
# per float32 temporary keeps a step's working set in cache on CPU. Measured (2-core
# CPU, Normal model): 2-3 ns per element at 1e5-2.5e5 elements per step, 2-3x slower
# at 4e5-3e6 (memory bound) and at 1e3 (per-step overhead).
_AUTO_CHUNK_ELEMENTS = 2**17

_WRAPPERS = (_dist.Independent, _dist.ExpandedDistribution, _dist.MaskedDistribution)


# ---------------------------------------------------------------------------------------
# PIT from predictive draws
# ---------------------------------------------------------------------------------------


def _flat_y_for_shape(y: jax.Array, obs_shape: tuple[int, ...], what: str) -> jax.Array:
    """``y`` reshaped to ``obs_shape``; ``y`` may have that shape or be flat."""
    if tuple(y.shape) == tuple(obs_shape):
        return y
    size = math.prod(obs_shape)
    if y.ndim == 1 and y.shape[0] == size:
        return y.reshape(obs_shape)
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
        The output of ``numpyro.infer.Predictive`` (a dict of draws-first arrays, from
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
    u = pit_draws(y_obs.ravel(), d.reshape(d.shape[0], -1), key=key)
    return u.reshape(y.shape)


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
    static = tuple(None if i in dynamic_index else leaf for i, leaf in enumerate(leaves))
    dynamic = [jnp.asarray(leaves[i]) for i in dynamic_index]
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


@functools.partial(jax.jit, static_argnames=("spec",))
def _average_kernel(samples, weights, dynamic, observed, *, spec):
    """Weighted sums over draws of per-draw site statistics, scanning chunk by chunk.

    ``samples`` are ``[num_chunks, chunk, ...]``, ``weights`` ``[num_chunks, chunk]``
    (0 for padding draws). Only one chunk's ``[chunk, *shape]`` temporaries are alive.
    Returns the sums and, for ``kind="moments"``, the first draw's means (the pivot of
    the shifted sums of squares; otherwise None).
    """
    stat_fn = _STATS[spec.kind]

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

    batched = jax.vmap(one)
    proto = jax.eval_shape(batched, jax.tree_util.tree_map(lambda a: a[0], samples))
    init = tuple(jnp.zeros(p.shape[1:], p.dtype) for p in proto)

    def step(carry, xs):
        chunk, w = xs
        stats = batched(chunk)
        keep = (w > 0).reshape((-1,) + (1,) * len(spec.shape))
        new = []
        for c, s in zip(carry, stats, strict=True):
            s = jnp.where(keep, s, jnp.zeros((), s.dtype)).reshape(s.shape[0], -1)
            # A dot, not jnp.sum(axis=0): on CPU, XLA fuses the CDF into a column
            # reduction as slow scalar code (~10x slower per element than a dot).
            total = jnp.ones((s.shape[0],), s.dtype) @ s
            new.append(c + total.reshape(c.shape))
        return tuple(new), None

    sums, _ = jax.lax.scan(step, init, (samples, weights))
    return sums, extra


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
        arr = v if isinstance(v, jax.Array) else np.asarray(v)
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


def _probe(model, samples, split, site, check) -> _SiteInfo:
    """Trace the model abstractly (no compilation) on the first draw; check the site.

    ``check(name, base, probe_value)`` runs on the unwrapped distribution while
    tracing and raises when the site cannot serve the request.
    """
    info: dict[str, Any] = {}

    def trace_first(draw0, dynamic):
        args, kwargs = _rebuild(*split[:3], dynamic)
        tr = _site_fn(model, draw0, args, kwargs, site, None)
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
        info["site"] = _SiteInfo(
            name,
            tuple(fn.batch_shape) + tuple(fn.event_shape),
            bool(getattr(base.support, "is_discrete", False)),
        )
        if check is not None:
            check(name, base, jnp.zeros((), jnp.result_type(float)))
        return jnp.zeros(())

    draw0 = {k: v[0] for k, v in samples.items()}
    jax.eval_shape(trace_first, draw0, split[3])
    return info["site"]


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
):
    """Posterior means of per-draw statistics of ``site``'s distribution.

    Returns ``(means, y_site, info, extra)``: ``means`` is a tuple of arrays of the
    site's shape, ``info`` a :class:`_SiteInfo`, ``extra`` the kernel's pivot.
    """
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model (a callable); got {model!r}.")
    if not isinstance(site, str):
        raise TypeError(f"site must be the name (str) of the observed site; got {site!r}.")
    if chunk_size is not None:
        chunk_size = _v.check_positive_int(chunk_size, "chunk_size")
    samples, num = _check_samples(posterior_samples, site)
    split = _split_model_args(args, kwargs)
    info = _probe(model, samples, split, site, check)
    shape = info.shape
    y_site = None
    if y_true is not None:
        y = _v.as_float_array(y_true, "y_true")
        _v.check_nonempty(y, "y_true")
        _v.check_finite(y, "y_true")
        y_site = _flat_y_for_shape(y, shape, f"site {site!r}")
        if info.discrete and _v.is_concrete(y):
            y_np = np.asarray(y)
            frac = y_np[y_np != np.floor(y_np)]
            if frac.size:
                raise ValueError(
                    f"y_true must be integer-valued for the discrete site {site!r} "
                    f"({info.name}); got {frac.size} non-integer values such as "
                    f"{frac[:3].tolist()}."
                )
    if chunk_size is None:
        chunk = max(1, min(num, _AUTO_CHUNK_ELEMENTS // max(1, math.prod(shape))))
    else:
        chunk = min(chunk_size, num)
    num_chunks = -(-num // chunk)
    pad = num_chunks * chunk - num

    def blocks(v):
        if pad:
            v = jnp.concatenate([v, jnp.broadcast_to(v[:1], (pad,) + v.shape[1:])])
        return v.reshape((num_chunks, chunk) + v.shape[1:])

    weights = (np.arange(num_chunks * chunk) < num).astype(np.int32)
    treedef, static, dynamic_index, dynamic = split
    spec = _Spec(model, site, treedef, static, dynamic_index, kind, shape, info.discrete)
    sums, extra = _average_kernel(
        {k: blocks(v) for k, v in samples.items()},
        weights.reshape(num_chunks, chunk),
        dynamic,
        y_site,
        spec=spec,
    )
    means = tuple(s / num for s in sums)
    return means, y_site, info, extra


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
        ``site``, ``key`` or ``chunk_size`` cannot reach the model.
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

    Returns
    -------
    Array, shape like ``y_true``
        PIT values in [0, 1].

    Notes
    -----
    Each draw's distribution is found by tracing ``model`` with
    ``numpyro.handlers.substitute`` (the draw), ``condition`` (``y_true``) and
    ``trace``, vmapped over the draws of a chunk inside one jitted ``lax.scan`` that
    accumulates sums over chunks (the machinery of ``numpyro.infer.log_likelihood``).
    The model must therefore be traceable by ``jax.jit``.

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
    means, _, info, _ = _posterior_average(
        model,
        posterior_samples,
        args,
        kwargs,
        site=site,
        kind="pit",
        y_true=y_true,
        chunk_size=chunk_size,
        check=_check_cdf(site),
    )
    upper = means[0]
    if info.discrete:
        lower = means[1]
        if key is None:
            warnings.warn(
                f"site {site!r} is discrete ({info.name}) and no key was given, so "
                "the PIT values are the predictive CDF at y, which is not uniform even "
                "for a correct model. Pass key=jax.random.key(...) for the randomized "
                "PIT.",
                UserWarning,
                stacklevel=2,
            )
            u = upper
        else:
            v = jax.random.uniform(key, upper.shape, dtype=upper.dtype)
            u = lower + v * (upper - lower)
    else:
        u = upper
    _check_result(u, "rao_blackwell_pit", site, info.name)
    return u.astype(y_in.dtype).reshape(y_in.shape)


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


def predictive_moments(
    model: Callable,
    posterior_samples: Mapping[str, ArrayLike],
    *args: Any,
    site: str = "obs",
    chunk_size: int | None = None,
    **kwargs: Any,
) -> tuple[jax.Array, jax.Array]:
    r"""Posterior predictive mean and variance of a site (law of total variance).

    .. math::
        \mathrm{E}[y] = \frac1S\sum_s \mu_s, \qquad
        \mathrm{Var}[y] = \frac1S\sum_s \sigma^2_s
        + \frac1S\sum_s (\mu_s - \bar\mu)^2,

    with :math:`\mu_s, \sigma^2_s` the mean and variance of the site's distribution
    under draw :math:`s`: exact for the mixture over the draws, without sampling
    ``y``. Use ``sqrt(var)`` as the predictive scale for
    :func:`bayescal.regression.sharpness` and
    :func:`bayescal.regression.fit_sigma_scaling`.

    Parameters
    ----------
    model, posterior_samples, *args, **kwargs, site, chunk_size
        As in :func:`rao_blackwell_pit`.

    Returns
    -------
    mean, var : Array, shape ``[*site_shape]``
        Infinite where a draw's distribution has no finite variance (StudentT with
        ``df <= 2``).

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
    >>> mean, var = predictive_moments(model, {"mu": jnp.array([-1.0, 1.0])}, 3)
    >>> mean.tolist(), var.tolist()
    ([0.0, 0.0, 0.0], [2.0, 2.0, 2.0])
    """

    def check(name, base, probe):
        try:
            base.mean, base.variance  # noqa: B018 - properties that may raise
        except NotImplementedError:
            raise TypeError(
                f"the distribution of site {site!r}, {name}, has no mean or "
                "variance in NumPyro; estimate the moments from Predictive draws."
            ) from None

    means, _, info, pivot = _posterior_average(
        model,
        posterior_samples,
        args,
        kwargs,
        site=site,
        kind="moments",
        chunk_size=chunk_size,
        check=check,
    )
    centred, within, centred_sq = means
    mean = pivot + centred
    var = within + jnp.maximum(centred_sq - centred * centred, 0.0)
    _check_result(mean, "predictive_moments", site, info.name)
    return mean, var


def predictive_probs(
    model: Callable,
    posterior_samples: Mapping[str, ArrayLike],
    *args: Any,
    site: str = "obs",
    chunk_size: int | None = None,
    **kwargs: Any,
) -> jax.Array:
    r"""Posterior predictive probability :math:`P(y_i = 1)` of a Bernoulli site.

    :math:`p_i = \frac1S \sum_s p_i(\theta_s)`, the mean of the site distribution's
    ``probs`` over the posterior draws (the exact predictive probability, not a
    fraction of 0/1 predictive draws). Ready for :mod:`bayescal.classification`.

    Parameters
    ----------
    model, posterior_samples, *args, **kwargs, site, chunk_size
        As in :func:`rao_blackwell_pit`; the site must be ``Bernoulli`` (``probs`` or
        ``logits``), possibly inside plates, ``to_event`` or ``mask``.

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

    means, _, info, _ = _posterior_average(
        model,
        posterior_samples,
        args,
        kwargs,
        site=site,
        kind="probs",
        chunk_size=chunk_size,
        check=check,
    )
    _check_result(means[0], "predictive_probs", site, info.name)
    return means[0]
