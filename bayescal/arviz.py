"""ArviZ adapter: PIT values from the ``posterior_predictive`` and ``observed_data`` groups.

:func:`pit` counts predictive draws for held-out data; :func:`loo_pit` gives
leave-one-out PIT values of the training data by PSIS-LOO (with the
``log_likelihood`` group), without refitting and without a held-out split.

Works with :class:`arviz.InferenceData` (arviz 0.x), :class:`xarray.DataTree` (arviz 1.x
and arviz-base) and a plain mapping of group names to :class:`xarray.Dataset` objects, so
models fitted with NumPyro, PyMC or Stan reach bayescal through ArviZ.

The module imports xarray when it is imported; ``import bayescal`` alone does not.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal.core import BUCKET_MAX as _BUCKET_MAX
from bayescal.core import KeyLike, bucket_size, pad_axis, random_prefix_stable, warn
from bayescal.core import as_key as check_key
from bayescal.core import paddable as _paddable
from bayescal.regression import pit_draws

try:
    import xarray as _xr
except ImportError as _err:  # pragma: no cover - xarray comes with arviz
    raise ImportError(
        "bayescal.arviz needs xarray (installed with ArviZ); install it with "
        "`pip install arviz`."
    ) from _err

__all__ = ["pit", "loo_pit", "LooPit", "PARETO_K_THRESHOLD"]

_PP = "posterior_predictive"
_OBS = "observed_data"
_SAMPLE = "__bayescal_sample__"


def _groups(data: Any) -> dict[str, Any]:
    """Map group name -> accessor for InferenceData, DataTree or a dict of Datasets."""
    if isinstance(data, _xr.DataTree):
        return {name: (lambda n=name: data[n].to_dataset()) for name in data.children}
    if type(data).__name__ == "InferenceData" and hasattr(data, "groups"):
        return {name: (lambda n=name: getattr(data, n)) for name in data.groups()}
    if isinstance(data, Mapping) and all(
        isinstance(v, _xr.Dataset | _xr.DataTree) for v in data.values()
    ):

        def get(n):
            v = data[n]
            return v.to_dataset() if isinstance(v, _xr.DataTree) else v

        return {name: (lambda n=name: get(n)) for name in data}
    raise TypeError(
        "data must be an arviz.InferenceData, an xarray.DataTree or a dict of "
        f"xarray.Dataset groups; got {type(data).__name__}. Convert it first, e.g. "
        "az.from_numpyro(mcmc, posterior_predictive=...)."
    )


def _group(groups: dict[str, Any], name: str) -> _xr.Dataset:
    if name not in groups:
        raise ValueError(
            f"data has no {name!r} group; its groups are {sorted(groups)}. PIT values "
            f"need both {_PP!r} (predictive draws) and {_OBS!r} (the observations), "
            "e.g. az.from_numpyro(mcmc, posterior_predictive=Predictive(...)(...))."
        )
    return groups[name]()


def _choose_var(pp: _xr.Dataset, obs: _xr.Dataset, var_name: str | None) -> Hashable:
    pp_vars, obs_vars = list(pp.data_vars), list(obs.data_vars)
    if var_name is None:
        shared = [v for v in obs_vars if v in pp_vars]
        if len(shared) == 1:
            return shared[0]
        if not shared:
            raise ValueError(
                f"no variable is in both groups: {_PP!r} has {pp_vars} and {_OBS!r} has "
                f"{obs_vars}. Rename one so they share a name, then pass var_name."
            )
        raise ValueError(
            f"several variables are in both groups: {shared}; pass var_name=<one of these>."
        )
    if not isinstance(var_name, str):
        raise TypeError(f"var_name must be a str or None; got {var_name!r}.")
    for group, names in ((_PP, pp_vars), (_OBS, obs_vars)):
        if var_name not in names:
            raise ValueError(
                f"variable {var_name!r} is not in the {group!r} group; it has {names}."
            )
    return var_name


def _aligned_sample_dims(
    pp: _xr.DataArray,
    obs: _xr.DataArray,
    name: Hashable,
    sample_dims: Sequence[str],
    group: str = _PP,
) -> list[str]:
    """The sample dims of ``pp`` present; checks that ``pp`` has ``obs``'s dims and coords.

    ``group`` names ``pp``'s group in the messages.
    """
    present = [d for d in sample_dims if d in pp.dims]
    if not present:
        raise ValueError(
            f"{group}[{name!r}] has dims {list(pp.dims)} but none of the sample dims "
            f"{list(sample_dims)}; pass sample_dims=<its draw dims>."
        )
    stray = [d for d in obs.dims if d in present]
    if stray:
        raise ValueError(
            f"{_OBS}[{name!r}] has the sample dims {stray}; it must hold one value per "
            "observation."
        )
    extra = [d for d in pp.dims if d not in present and d not in obs.dims]
    missing = [d for d in obs.dims if d not in pp.dims]
    if extra or missing:
        raise ValueError(
            f"the observation dims differ: {_OBS}[{name!r}] has {list(obs.dims)} and "
            f"{group}[{name!r}] has {list(pp.dims)} (sample dims {present}). Give both "
            "the same observation dims (dims= in az.from_numpyro / az.from_dict)."
        )
    for d in obs.dims:
        if pp.sizes[d] != obs.sizes[d]:
            raise ValueError(
                f"dim {d!r} has {obs.sizes[d]} values in {_OBS!r} but {pp.sizes[d]} in "
                f"{group!r}; the predictive draws must be for the observed data."
            )
        if (
            d in obs.indexes
            and d in pp.indexes
            and not obs.indexes[d].equals(pp.indexes[d])
        ):
            raise ValueError(
                f"the coordinates of dim {d!r} differ between {_OBS!r} and {group!r}; "
                "the draws must be for the same observations, in the same order."
            )
    return present


def pit(
    data: Any,
    var_name: str | None = None,
    *,
    key: jax.Array | None = None,
    flat: bool = False,
    sample_dims: Sequence[str] = ("chain", "draw"),
) -> Any:
    r"""PIT values of observed data under the posterior predictive draws in ArviZ data.

    Chains and draws are pooled into one sample axis; then
    :math:`u_i = \frac1S\#\{s: y^{(s)}_i \le y_i\}`, or the randomized PIT with
    ``key`` (see :func:`bayescal.regression.pit_draws`), for every observation.

    Parameters
    ----------
    data : arviz.InferenceData, xarray.DataTree or dict of xarray.Dataset
        Must hold the ``posterior_predictive`` and ``observed_data`` groups.
    var_name : str, optional
        The observed variable, named alike in both groups. Default: the only variable
        the two groups share.
    key : jax.random.PRNGKey, optional
        Randomized PIT, for count or binary data.
    flat : bool, default False
        Return a flat :class:`jax.Array` (C order over the observation dims) instead of
        a :class:`~xarray.DataArray`.
    sample_dims : sequence of str, default ("chain", "draw")
        The sample dimensions of the ``posterior_predictive`` group (those present are
        pooled).

    Returns
    -------
    xarray.DataArray or jax.Array
        PIT values with the observed variable's dims and coordinates, or flat
        ``[N]`` with ``flat=True`` (ready for :func:`bayescal.regression.calibration_curve`).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from bayescal.arviz import pit
    >>> pp = xr.Dataset({"y": (("chain", "draw", "obs"), np.arange(8.0).reshape(2, 2, 2))})
    >>> obs = xr.Dataset({"y": (("obs",), np.array([4.0, 1.0]))})
    >>> data = xr.DataTree.from_dict({"posterior_predictive": pp, "observed_data": obs})
    >>> pit(data).values.tolist()
    [0.75, 0.25]
    """
    if not isinstance(flat, bool):
        raise TypeError(f"flat must be a bool; got {flat!r}.")
    if isinstance(sample_dims, str):
        sample_dims = (sample_dims,)
    groups = _groups(data)
    pp_ds, obs_ds = _group(groups, _PP), _group(groups, _OBS)
    name = _choose_var(pp_ds, obs_ds, var_name)
    pp, obs = pp_ds[name], obs_ds[name]
    present = _aligned_sample_dims(pp, obs, name, sample_dims)
    stacked = pp.stack({_SAMPLE: present}).transpose(_SAMPLE, *obs.dims)
    draws = np.asarray(stacked.values)
    y = np.asarray(obs.values)
    if y.size == 0:
        raise ValueError(f"{_OBS}[{name!r}] is empty; at least one observation is needed.")
    u = pit_draws(y.reshape(-1), draws.reshape(draws.shape[0], -1), key=key)
    if flat:
        return u
    return _xr.DataArray(
        np.asarray(u).reshape(y.shape),
        dims=obs.dims,
        coords=obs.coords,
        name=name,
        attrs={"long_name": f"PIT of {name}"},
    )


# ---------------------------------------------------------------------------------------
# LOO-PIT
# ---------------------------------------------------------------------------------------

_LL = "log_likelihood"
_POSTERIOR = "posterior"

#: Pareto k above which PSIS-LOO estimates are unreliable (Vehtari et al., 2024).
PARETO_K_THRESHOLD = 0.7

# Elements of the [N, S] inputs processed per loop step of the weighted PIT kernel: a
# few MB per block keeps the exp, compare and row sums in cache (measured on a 2-core
# CPU: ~10x faster than one fused pass over a [5000, 4000] array).
_WEIGHTED_BLOCK_ELEMENTS = 2**20


class LooPit(NamedTuple):
    """PSIS-LOO PIT values with their Pareto k diagnostics.

    Attributes
    ----------
    pit : xarray.DataArray or jax.Array
        Leave-one-out PIT values, one per observation.
    pareto_k : xarray.DataArray or numpy.ndarray
        Estimated Pareto shape :math:`\\hat k` of each observation's importance
        weights: the estimate of that observation's PIT value is unreliable above
        0.7 (:data:`PARETO_K_THRESHOLD`).
    """

    pit: Any
    pareto_k: Any


def _import_arviz() -> Any:
    """``import arviz``, without arviz 0.23's once-a-day FutureWarning about its refactor
    (a notice about ArviZ itself, not about the user's data: bayescal's calls would
    otherwise show it on a user's first LOO-PIT of the day)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning
        )
        import arviz
    return arviz


@functools.cache
def _arviz_major() -> int:
    """The installed ArviZ's major version (0 without ArviZ), read from the package
    metadata (~1 ms, once), without importing ArviZ."""
    from importlib import metadata

    try:
        major = metadata.version("arviz").split(".")[0]
    except metadata.PackageNotFoundError:
        return 0
    return int(major) if major.isdigit() else 0


def _psis_rule() -> str:
    """The PSIS tail rule of the installed ArviZ: ``"arviz1"`` on arviz 1.x, else
    ``"arviz0"`` (also without ArviZ: the tail length of Vehtari et al. 2024)."""
    return "arviz1" if _arviz_major() >= 1 else "arviz0"


def _psislw(log_likelihood: Any, r_eff: float) -> tuple[np.ndarray, np.ndarray]:
    """PSIS: normalized log weights ``[..., S]`` and Pareto k ``[...]``.

    ``log_likelihood`` is ``[..., S]`` (draws last). bayescal's own vectorized PSIS
    (:func:`bayescal._psis.psislw`), with the tail rule of the installed ArviZ:
    equal to ``az.psislw(-log_likelihood, reff=r_eff)`` on arviz 0.x and to
    ``arviz_stats``' ``psislw`` on arviz 1.x (tests/test_psis.py); ~12x faster than
    ArviZ's loop over the rows (1.8 -> 0.15 s on [10000, 100], arviz 0.23).

    A row whose right tail of ratios is flat (e.g. a log-likelihood constant over the
    draws) has no Pareto tail to fit: it keeps its raw weights and gets k = inf, as
    arviz 0.x gives it (``arviz_stats`` raises ``ValueError("All tail values are the
    same")`` for the whole array).
    """
    from bayescal._psis import psislw

    return psislw(log_likelihood, r_eff, rule=_psis_rule())


def _relative_ess(posterior: _xr.Dataset | None, num_samples: int) -> float:
    """``r_eff`` as ``az.loo_pit`` computes it: mean ESS of the posterior / draws.

    1 for a single chain or without a posterior group.
    """
    if posterior is None or "chain" not in posterior.dims or posterior.sizes["chain"] < 2:
        return 1.0
    if _arviz_major() < 1:
        ess = _import_arviz().ess(posterior, method="mean")
    else:  # arviz 1.x (make test-py312)
        import arviz_stats  # noqa: F401 - registers the .azstats accessor

        ess = posterior.azstats.ess(method="mean")
    values = np.hstack([np.asarray(ess[v].values).ravel() for v in ess.data_vars])
    return float(values.mean() / num_samples)


def _check_r_eff(r_eff: Any) -> float | None:
    if r_eff is None:
        return None
    if isinstance(r_eff, bool) or not isinstance(r_eff, int | float | np.floating):
        raise TypeError(f"r_eff must be a positive float or None; got {r_eff!r}.")
    if not (np.isfinite(r_eff) and r_eff > 0):
        raise ValueError(
            f"r_eff must be a positive finite float (relative effective sample size, "
            f"ESS / number of draws); got {r_eff!r}."
        )
    return float(r_eff)


def _warn_pareto_k(pareto_k: np.ndarray) -> None:
    k = np.asarray(pareto_k)
    bad = int(np.sum(~(k <= PARETO_K_THRESHOLD)))  # NaN counts as bad
    if bad:
        warn(
            f"{bad} of {k.size} Pareto k values exceed {PARETO_K_THRESHOLD} (or are "
            "not finite): the PSIS-LOO PIT values of those observations are unreliable. "
            "Inspect them through the pareto_k field; refit without them (exact LOO) "
            "or use k-fold cross-validation for those observations.",
            UserWarning,
        )


def _weighted_counts(y, draws, log_weights):
    """Row sums ``[3, N]``: weight of draws ``< y``, ``<= y``, and the total weight.

    ``draws`` and ``log_weights`` are ``[N, S]``. A ``fori_loop`` over blocks of rows
    (``dynamic_slice``, no copy of the inputs); the last ``N mod b`` rows at the end.
    """
    n, s = draws.shape
    b = max(1, min(n, _WEIGHTED_BLOCK_ELEMENTS // s))
    num_blocks = n // b
    full = num_blocks * b

    def sums(yb, xb, lb):
        w = jnp.exp(lb)
        below = yb[:, None]
        zero = jnp.zeros((), w.dtype)
        return jnp.stack(
            [
                jnp.sum(jnp.where(xb < below, w, zero), axis=-1),
                jnp.sum(jnp.where(xb <= below, w, zero), axis=-1),
                jnp.sum(w, axis=-1),
            ]
        )

    def body(i, out):
        def rows(a):
            return jax.lax.dynamic_slice_in_dim(a, i * b, b, axis=0)

        block = sums(rows(y), rows(draws), rows(log_weights))
        return jax.lax.dynamic_update_slice_in_dim(out, block, i * b, axis=1)

    out = jax.lax.fori_loop(0, num_blocks, body, jnp.zeros((3, n), draws.dtype))
    if full < n:
        out = out.at[:, full:].set(sums(y[full:], draws[full:], log_weights[full:]))
    return out


@jax.jit
def _weighted_pit_kernel(y, draws, log_weights):
    _, le, total = _weighted_counts(y, draws, log_weights)
    # le and total are summed in the same order over the same nonnegative terms with
    # le's a subset, so le <= total and u <= 1 without clipping.
    return le / total


@jax.jit
def _weighted_pit_randomized_kernel(y, draws, log_weights, key):
    lt, le, total = _weighted_counts(y, draws, log_weights)
    lower, upper = lt / total, le / total
    v = jax.random.uniform(key, y.shape, dtype=y.dtype)
    # a convex combination of lower and upper; the clip only undoes rounding
    return jnp.clip(lower + v * (upper - lower), lower, upper)


def _weighted_pit(y, draws, log_weights, key=None) -> jax.Array:
    """``u_i = sum_s w_is 1[x_is <= y_i]`` (randomized between < and <= with a key).

    ``y [N]``, ``draws [N, S]``, ``log_weights [N, S]`` (normalized or not: the sums
    are divided by the total weight of each row).
    """
    arrays = (y, draws, log_weights)
    n = int(np.shape(y)[0])
    if (
        all(_paddable(a) for a in arrays)
        and 0 < n <= _BUCKET_MAX
        and (key is None or random_prefix_stable(key))
    ):
        # Host data: converted in NumPy and padded to the bucket of N by repeating the
        # last row (rows are independent: the padding changes no real value; the
        # uniforms of the randomized PIT are drawn per index), so a new N in a used
        # bucket compiles nothing; the result is sliced back on the host.
        dtype = jnp.result_type(
            *(jax.dtypes.canonicalize_dtype(np.asarray(a).dtype) for a in arrays), jnp.float32
        )
        if not jnp.issubdtype(dtype, jnp.floating):
            dtype = jnp.result_type(float)
        size = bucket_size(n)
        y, draws, log_weights = (
            jax.device_put(pad_axis(np.asarray(a).astype(dtype, copy=False), size, axis=0))
            for a in arrays
        )
        u = _weighted_pit_device(y, draws, log_weights, key)
        return jax.device_put(np.asarray(u)[:n]) if size > n else u
    y, draws, log_weights = (jnp.asarray(a) for a in arrays)
    dtype = jnp.result_type(y, draws, log_weights, jnp.float32)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    y, draws, log_weights = (a.astype(dtype) for a in (y, draws, log_weights))
    return _weighted_pit_device(y, draws, log_weights, key)


def _weighted_pit_device(y, draws, log_weights, key):
    if key is None:
        return _weighted_pit_kernel(y, draws, log_weights)
    return _weighted_pit_randomized_kernel(y, draws, log_weights, key)


def _finite_values(arr: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{what} has {int(bad.sum())} non-finite values (NaN or inf); LOO-PIT needs "
            "finite values. Check the model and the conversion to ArviZ data."
        )


def loo_pit(
    data: Any,
    var_name: str | None = None,
    *,
    key: KeyLike | None = None,
    flat: bool = False,
    sample_dims: Sequence[str] = ("chain", "draw"),
    r_eff: float | None = None,
) -> LooPit:
    r"""Leave-one-out PIT values by Pareto-smoothed importance sampling (PSIS-LOO).

    The PIT value of each observation under the posterior predictive fitted *without*
    it, from one fit on all the data: with PSIS weights :math:`w_{is}`
    (normalized over the draws, from the log-likelihood of observation :math:`i` under
    each posterior draw :math:`s`),

    .. math:: u_i = \sum_s w_{is}\, \mathbb 1[x_{si} \le y_i],

    with :math:`x_{si}` the posterior predictive draws. With ``key`` the randomized
    PIT for discrete data, :math:`u_i = L_i + V_i (R_i - L_i)`, :math:`L_i = \sum_s
    w_{is} \mathbb 1[x_{si} < y_i]`, :math:`R_i` as :math:`u_i` above, :math:`V_i \sim
    U(0, 1)`.

    LOO-PIT values of the *training* data check calibration without a held-out split,
    and a recalibrator fitted on them (:func:`bayescal.regression.fit_isotonic_recalibrator`)
    needs no calibration split either.

    Parameters
    ----------
    data : arviz.InferenceData, xarray.DataTree or dict of xarray.Dataset
        Must hold the ``posterior_predictive``, ``observed_data`` and
        ``log_likelihood`` groups (:func:`arviz.from_numpyro`, as
        ``az.from_numpyro(mcmc, posterior_predictive=...)``, stores the log-likelihood
        by default). The ``posterior`` group, when present with several chains, gives
        the relative efficiency ``r_eff``.
    var_name : str, optional
        The observed variable, named alike in ``posterior_predictive`` and
        ``observed_data``. Default: the only variable the two groups share. Its
        log-likelihood is the ``log_likelihood`` variable of that name, or the only
        one there.
    key : jax.random.PRNGKey or int, optional
        Randomized PIT, for count or binary data.
    flat : bool, default False
        Return flat arrays (C order over the observation dims) instead of DataArrays.
    sample_dims : sequence of str, default ("chain", "draw")
        The sample dims (those present are pooled, in this order).
    r_eff : float, optional
        Relative effective sample size passed to PSIS. Default: as
        :func:`arviz.loo_pit` computes it, the mean "mean" ESS of the ``posterior``
        variables divided by the number of draws when there are several chains, else 1.

    Returns
    -------
    LooPit
        ``pit``: PIT values with the observed variable's dims and coords (a jax.Array
        of shape [N] with ``flat=True``); ``pareto_k``: the Pareto k of each
        observation (a numpy array with ``flat=True``). A ``UserWarning`` says how many
        exceed 0.7.

    See Also
    --------
    pit : PIT values of held-out data (no weights).
    bayescal.numpyro.loo_pit : the Rao-Blackwellized LOO-PIT from a NumPyro model.
    arviz.loo_pit : ArviZ's own LOO-PIT (arviz 0.x).
    arviz_stats.loo_pit : the same in arviz 1.x.

    Notes
    -----
    Without a key this equals ``az.loo_pit(idata, y=var_name)`` (arviz 0.x, which
    does the same with the same PSIS weights) for continuous data; for integer data
    ``az.loo_pit`` smooths the values instead, and :func:`arviz_stats.loo_pit` (arviz
    1.x) randomizes ties with a fixed seed. PSIS is bayescal's own NumPy implementation,
    all observations at once, with the tail length and cutoff of the installed ArviZ:
    tested equal, draw for draw, to :func:`arviz.psislw` on arviz 0.x and to
    ``arviz_stats``' ``psislw`` on arviz 1.x (to 1e-12; tests/test_psis.py), and some
    10x faster than their loop over the observations. The weighted counts are
    summed in the dtype JAX computes in (float32 unless x64 is enabled).

    References
    ----------
    Vehtari, Gelman & Gabry (2017), "Practical Bayesian model evaluation using
    leave-one-out cross-validation and WAIC", Statistics and Computing 27(5).
    Vehtari, Simpson, Gelman, Yao & Gabry (2024), "Pareto smoothed importance
    sampling", JMLR 25(72).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from bayescal.arviz import loo_pit
    >>> rng = np.random.default_rng(0)
    >>> mu = rng.normal(0.0, 0.3, size=(1, 400, 1))  # posterior draws of a mean
    >>> y = np.array([-1.0, 0.0, 1.5])
    >>> dims = ("chain", "draw", "obs")
    >>> data = xr.DataTree.from_dict({
    ...     "posterior_predictive": xr.Dataset({"y": (dims, rng.normal(mu, 1.0, (1, 400, 3)))}),
    ...     "log_likelihood": xr.Dataset({"y": (dims, -0.5 * (y - mu) ** 2)}),
    ...     "observed_data": xr.Dataset({"y": (("obs",), y)}),
    ... })
    >>> out = loo_pit(data)
    >>> [round(v, 2) for v in out.pit.values.tolist()]
    [0.1, 0.51, 0.97]
    >>> bool((out.pareto_k < 0.7).all())
    True
    """
    if not isinstance(flat, bool):
        raise TypeError(f"flat must be a bool; got {flat!r}.")
    if isinstance(sample_dims, str):
        sample_dims = (sample_dims,)
    r_eff = _check_r_eff(r_eff)
    rng_key = None if key is None else check_key(key, "key")
    groups = _groups(data)
    pp_ds, obs_ds = _group(groups, _PP), _group(groups, _OBS)
    if _LL not in groups:
        raise ValueError(
            f"data has no {_LL!r} group; its groups are {sorted(groups)}. LOO-PIT needs "
            "the pointwise log-likelihood: az.from_numpyro(mcmc, ...) stores it by "
            "default (log_likelihood=True); for PyMC pass "
            "idata_kwargs={'log_likelihood': True} to pm.sample."
        )
    ll_ds = groups[_LL]()
    name = _choose_var(pp_ds, obs_ds, var_name)
    ll_vars = list(ll_ds.data_vars)
    if name in ll_vars:
        ll_name = name
    elif len(ll_vars) == 1:
        ll_name = ll_vars[0]
    else:
        raise ValueError(
            f"the {_LL!r} group has no variable {name!r} and several others "
            f"{ll_vars}; rename the log-likelihood of {name!r} to {name!r}."
        )
    pp, obs, ll = pp_ds[name], obs_ds[name], ll_ds[ll_name]
    present = _aligned_sample_dims(pp, obs, name, sample_dims)
    ll_present = _aligned_sample_dims(ll, obs, name, sample_dims, group=_LL)
    if ll_present != present or any(ll.sizes[d] != pp.sizes[d] for d in present):
        raise ValueError(
            f"the sample dims differ: {_PP}[{name!r}] has "
            f"{ {d: pp.sizes[d] for d in present} } and {_LL}[{ll_name!r}] has "
            f"{ {d: ll.sizes[d] for d in ll_present} }; both must hold the same draws."
        )
    y = np.asarray(obs.values)
    if y.size == 0:
        raise ValueError(f"{_OBS}[{name!r}] is empty; at least one observation is needed.")
    n = y.size

    def flat_draws(da: _xr.DataArray) -> np.ndarray:
        # observation dims first, then the sample dims in the order of `present`,
        # flattened in C order (one copy; `stack` made a second)
        return np.asarray(da.transpose(*obs.dims, *present).values).reshape(n, -1)

    draws, log_lik = flat_draws(pp), flat_draws(ll)
    _finite_values(y, f"{_OBS}[{name!r}]")
    _finite_values(draws, f"{_PP}[{name!r}]")
    _finite_values(log_lik, f"{_LL}[{ll_name!r}]")
    if r_eff is None:
        r_eff = _relative_ess(
            groups[_POSTERIOR]() if _POSTERIOR in groups else None, draws.shape[1]
        )
    log_weights, k = _psislw(log_lik, r_eff)
    u = _weighted_pit(y.reshape(-1), draws, log_weights, rng_key)
    _warn_pareto_k(k)
    if flat:
        return LooPit(u, np.asarray(k).reshape(-1))
    attrs = {"long_name": f"LOO-PIT of {name}"}
    pit_da = _xr.DataArray(
        np.asarray(u).reshape(y.shape),
        dims=obs.dims,
        coords=obs.coords,
        name=name,
        attrs=attrs,
    )
    k_da = _xr.DataArray(
        np.asarray(k).reshape(y.shape), dims=obs.dims, coords=obs.coords, name="pareto_k"
    )
    return LooPit(pit_da, k_da)
