"""ArviZ adapter: PIT values from the ``posterior_predictive`` and ``observed_data`` groups.

Works with ``arviz.InferenceData`` (arviz 0.x), ``xarray.DataTree`` (arviz 1.x and
arviz-base) and a plain mapping of group names to ``xarray.Dataset`` objects, so
models fitted with NumPyro, PyMC or Stan reach bayescal through ArviZ.

The module imports xarray when it is imported; ``import bayescal`` alone does not.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from bayescal.regression import pit_draws

try:
    import xarray as _xr
except ImportError as _err:  # pragma: no cover - xarray comes with arviz
    raise ImportError(
        "bayescal.arviz needs xarray (installed with ArviZ); install it with "
        "`pip install arviz`."
    ) from _err

__all__ = ["pit"]

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
        Return a flat ``jax.Array`` (C order over the observation dims) instead of a
        ``DataArray``.
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
    present = [d for d in sample_dims if d in pp.dims]
    if not present:
        raise ValueError(
            f"{_PP}[{name!r}] has dims {list(pp.dims)} but none of the sample dims "
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
            f"{_PP}[{name!r}] has {list(pp.dims)} (sample dims {present}). Give both "
            "the same observation dims (dims= in az.from_numpyro / az.from_dict)."
        )
    for d in obs.dims:
        if pp.sizes[d] != obs.sizes[d]:
            raise ValueError(
                f"dim {d!r} has {obs.sizes[d]} values in {_OBS!r} but {pp.sizes[d]} in "
                f"{_PP!r}; the predictive draws must be for the observed data."
            )
        if (
            d in obs.indexes
            and d in pp.indexes
            and not obs.indexes[d].equals(pp.indexes[d])
        ):
            raise ValueError(
                f"the coordinates of dim {d!r} differ between {_OBS!r} and {_PP!r}; "
                "the draws must be for the same observations, in the same order."
            )
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
