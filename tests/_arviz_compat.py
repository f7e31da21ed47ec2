"""Version-neutral ArviZ for the tests: arviz 0.x (``InferenceData``) and 1.x (``DataTree``).

arviz 1.0 made ``arviz`` a meta-package over ``arviz_base`` / ``arviz_stats`` /
``arviz_plots``: data is an ``xarray.DataTree`` (``InferenceData`` is gone),
``az.from_dict`` takes one mapping of groups instead of one keyword per group,
``az.psislw`` became ``arviz_stats``' ``.azstats.psislw`` (which takes the
log-likelihood, not the log importance ratios) and ``az.loo_pit(data, y=)`` became
``az.loo_pit(data, var_names=)`` returning a ``Dataset``. The tests build their data and
their ArviZ references through these helpers, so each test runs unchanged on both
majors (``make test`` and ``make test-min``: 0.x; ``make test-py312``: 1.x).
"""

import warnings

import numpy as np
import xarray as xr

with warnings.catch_warnings():  # arviz 0.x announces its 1.0 refactor on import
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

AZ_MAJOR = int(str(az.__version__).split(".")[0])
AZ1 = AZ_MAJOR >= 1


def from_dict(groups, *, dims=None, coords=None):
    """``az.from_dict`` with ``{group: {var: array}}``: InferenceData (0.x), DataTree (1.x).

    Both name missing dims ``<var>_dim_<i>`` and add ``chain`` / ``draw`` to every group
    but ``observed_data``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if AZ1:
            return az.from_dict(groups, dims=dims, coords=coords)
        return az.from_dict(**groups, dims=dims, coords=coords)


def from_datasets(**groups):
    """ArviZ data from ``xarray.Dataset`` groups: InferenceData (0.x), DataTree (1.x)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if AZ1:
            return xr.DataTree.from_dict(groups)
        return az.InferenceData(**groups)


def as_datatree(data):
    """``InferenceData.to_datatree()`` on 0.x; the data itself (already one) on 1.x."""
    if isinstance(data, xr.DataTree):
        return data
    return data.to_datatree()


def group(data, name):
    """One group as an ``xarray.Dataset`` (InferenceData attribute or DataTree node)."""
    g = data[name] if isinstance(data, xr.DataTree) else getattr(data, name)
    return g.to_dataset() if isinstance(g, xr.DataTree) else g


def containers(data):
    """The same data in every container ``bayescal.arviz`` accepts on this arviz.

    0.x: the InferenceData, its DataTree and a dict of Datasets; 1.x: the DataTree and a
    dict of Datasets (there is no InferenceData on 1.x).
    """
    tree = as_datatree(data)
    as_dict = {name: tree[name].to_dataset() for name in tree.children}
    return ([] if AZ1 else [data]) + [tree, as_dict]


def to_netcdf(path, **groups):
    """Write ``xarray.Dataset`` groups as ArviZ writes them: ``InferenceData.to_netcdf``
    (0.x) or ``DataTree.to_netcdf`` (1.x, what ``az.from_numpyro(...).to_netcdf`` does)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_datasets(**groups).to_netcdf(str(path))
    return path


def to_zarr(path, **groups):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_datasets(**groups).to_zarr(str(path))
    return path


def from_numpyro(mcmc, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.from_numpyro(mcmc, **kwargs)


def psislw(log_lik, r_eff=1.0):
    """ArviZ's PSIS on ``[N, S]`` log-likelihood values: normalized log weights
    ``[N, S]`` and Pareto k ``[N]``.

    0.x: ``az.psislw`` of the log ratios ``-log_lik``; 1.x: ``arviz_stats``' DataArray
    accessor ``.azstats.psislw`` (which negates the log-likelihood itself).
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    if not AZ1:
        lw, k = az.psislw(-ll, reff=r_eff)
        return np.asarray(lw), np.asarray(k)
    import arviz_stats  # noqa: F401 - registers the .azstats accessor

    da = xr.DataArray(ll, dims=("obs", "sample"))
    lw, k = da.azstats.psislw(r_eff=r_eff, dim="sample")
    return np.asarray(lw.transpose("obs", "sample").values), np.asarray(k.values)


def loo_pit(data, var_name):
    """ArviZ's own LOO-PIT values of ``var_name`` as a numpy array.

    0.x: ``az.loo_pit(data, y=var_name)``; 1.x: ``arviz_stats.loo_pit(data,
    var_names=var_name)[var_name]`` (randomizes ties of discrete data with a fixed seed).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if AZ1:
            return np.asarray(az.loo_pit(data, var_names=var_name)[var_name].values)
        return np.asarray(az.loo_pit(data, y=var_name))


def loo_pareto_k(data, var_name):
    """``az.loo(data, pointwise=True).pareto_k`` (the same call on both majors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(az.loo(data, var_name=var_name, pointwise=True).pareto_k.values)


def relative_ess(data):
    """``r_eff`` as ArviZ's ``loo`` computes it from the ``posterior`` group: the mean
    "mean" ESS over all variables / draws (1 for a single chain)."""
    post = group(data, "posterior")
    n = post.sizes["chain"] * post.sizes["draw"]
    if post.sizes["chain"] == 1:
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if AZ1:
            import arviz_stats  # noqa: F401 - registers the .azstats accessor

            ess = post.azstats.ess(method="mean")
        else:
            ess = az.ess(post, method="mean")
    return float(np.hstack([np.asarray(ess[v].values).ravel() for v in ess.data_vars]).mean() / n)
