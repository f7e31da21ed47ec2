"""ArviZ adapter.

References: :func:`bayescal.regression.pit_draws` on the chain/draw-stacked numpy arrays
(itself checked against ``(draws <= y).mean(0)``), and :func:`bayescal.numpyro.pit` on
the same NumPyro ``Predictive`` output for the ``az.from_numpyro`` round trip
(arviz 0.22 and 0.23 with ``InferenceData``; arviz 1.3 with ``xarray.DataTree``, in
``make test-py312``). The data is built through ``tests/_arviz_compat.py``, so every
test runs on both arviz majors.
"""

import jax
import numpy as np
import pytest
import xarray as xr

from bayescal import arviz as baz
from bayescal import regression as reg
from tests import _arviz_compat as azc

SCHOOLS = ["a", "b", "c"]
YEARS = [2000, 2001, 2002, 2003]


@pytest.fixture(scope="module")
def school_data():
    """Posterior predictive [chain=2, draw=50, school=3, year=4] and observations."""
    rng = np.random.default_rng(0)
    pp = rng.normal(size=(2, 50, 3, 4))
    obs = rng.normal(size=(3, 4))
    idata = azc.from_dict(
        {
            "posterior_predictive": {"y": pp, "z": pp + 1.0},
            "observed_data": {"y": obs, "w": obs},
        },
        dims={"y": ["school", "year"], "z": ["school", "year"], "w": ["school", "year"]},
        coords={"school": SCHOOLS, "year": YEARS},
    )
    return idata, pp, obs


def test_every_container_agrees_with_pit_draws(school_data):
    # InferenceData (arviz 0.x only), its DataTree and a dict of Datasets
    idata, pp, obs = school_data
    forms = azc.containers(idata)
    assert any(isinstance(f, xr.DataTree) for f in forms)
    assert len(forms) == (2 if azc.AZ1 else 3)
    ref = reg.pit_draws(obs.ravel(), pp.reshape(100, 12)).reshape(3, 4)
    for form in forms:
        u = baz.pit(form, "y")
        np.testing.assert_array_equal(u.values, np.asarray(ref))
        np.testing.assert_allclose(u.values, (pp.reshape(100, 3, 4) <= obs).mean(0), rtol=1e-6)


def test_dims_and_coords_preserved(school_data):
    idata, _, _ = school_data
    u = baz.pit(idata, "y")
    assert isinstance(u, xr.DataArray)
    assert u.dims == ("school", "year")
    assert u["school"].values.tolist() == SCHOOLS
    assert u["year"].values.tolist() == YEARS
    assert u.name == "y"
    # a cell keeps its label: school "b", year 2002
    ref = baz.pit(idata, "y", flat=True).reshape(3, 4)[1, 2]
    assert float(u.sel(school="b", year=2002)) == float(ref)


def test_flat_returns_jax_array(school_data):
    idata, _, _ = school_data
    u = baz.pit(idata, "y", flat=True)
    assert isinstance(u, jax.Array) and u.shape == (12,)
    np.testing.assert_array_equal(u, baz.pit(idata, "y").values.ravel())


def test_datatree_built_directly_and_dict_of_datasets():
    rng = np.random.default_rng(1)
    pp = xr.Dataset({"obs": (("chain", "draw", "i"), rng.normal(size=(3, 40, 7)))})
    observed = xr.Dataset(
        {"obs": (("i",), rng.normal(size=7))}, coords={"i": np.arange(7) * 10}
    )
    tree = xr.DataTree.from_dict({"posterior_predictive": pp, "observed_data": observed})
    u = baz.pit(tree)  # the single shared variable is picked
    ref = reg.pit_draws(observed["obs"].values, pp["obs"].values.reshape(120, 7))
    np.testing.assert_array_equal(u.values, np.asarray(ref))
    assert u["i"].values.tolist() == list(range(0, 70, 10))
    as_dict = {"posterior_predictive": pp, "observed_data": observed}
    np.testing.assert_array_equal(baz.pit(as_dict).values, u.values)


def test_randomized_pit_for_counts_matches_pit_draws():
    rng = np.random.default_rng(2)
    pp = rng.poisson(3.0, size=(2, 200, 500))
    obs = rng.poisson(3.0, size=500)
    idata = azc.from_dict({"posterior_predictive": {"y": pp}, "observed_data": {"y": obs}})
    key = jax.random.key(3)
    u = baz.pit(idata, key=key, flat=True)
    ref = reg.pit_draws(obs.astype(float), pp.reshape(400, 500).astype(float), key=key)
    np.testing.assert_array_equal(u, ref)
    plain = baz.pit(idata, flat=True)
    assert np.all(np.asarray(u) <= np.asarray(plain) + 1e-6)


@pytest.mark.slow
def test_from_numpyro_round_trip():
    # the diabetes NUTS fit shared with tests/test_numpyro.py
    from numpyro.infer import Predictive

    from bayescal import numpyro as bn
    from tests._fits import diabetes, diabetes_mcmc, linear_model

    X_train, y_train, _, _ = diabetes()
    mcmc = diabetes_mcmc()
    predictive = Predictive(linear_model, mcmc.get_samples())(jax.random.key(1), X_train)
    idata = azc.from_numpyro(mcmc, posterior_predictive=predictive, log_likelihood=False)
    u = baz.pit(idata, "obs")
    assert u.dims == ("data",)  # from_numpyro names the dim after the plate
    np.testing.assert_allclose(u.values, bn.pit(y_train, predictive), rtol=1e-6)
    for form in azc.containers(idata):
        np.testing.assert_array_equal(baz.pit(form, "obs").values, u.values)


# --- bad input ---------------------------------------------------------------------------


def test_missing_group_lists_groups(school_data):
    idata, _, _ = school_data
    no_obs = azc.from_datasets(posterior_predictive=azc.group(idata, "posterior_predictive"))
    with pytest.raises(
        ValueError, match=r"no 'observed_data' group.*\['posterior_predictive'\]"
    ):
        baz.pit(no_obs, "y")
    tree = xr.DataTree.from_dict({"observed_data": azc.group(idata, "observed_data")})
    with pytest.raises(
        ValueError, match=r"no 'posterior_predictive' group.*\['observed_data'\]"
    ):
        baz.pit(tree, "y")


def test_variable_choice_errors_list_what_is_there(school_data):
    idata, _, _ = school_data
    with pytest.raises(
        ValueError, match=r"'q' is not in the 'posterior_predictive'.*\['y', 'z'\]"
    ):
        baz.pit(idata, "q")
    with pytest.raises(
        ValueError, match=r"'z' is not in the 'observed_data'.*\['y', 'w'\]"
    ):
        baz.pit(idata, "z")
    two = azc.from_dict(
        {
            "posterior_predictive": {"y": np.zeros((1, 5, 2)), "v": np.zeros((1, 5, 2))},
            "observed_data": {"y": np.zeros(2), "v": np.zeros(2)},
        }
    )
    with pytest.raises(ValueError, match=r"several variables.*\['y', 'v'\].*var_name"):
        baz.pit(two)
    none = azc.from_dict(
        {"posterior_predictive": {"a": np.zeros((1, 5, 2))}, "observed_data": {"b": np.zeros(2)}}
    )
    with pytest.raises(
        ValueError, match=r"no variable is in both groups.*\['a'\].*\['b'\]"
    ):
        baz.pit(none)
    with pytest.raises(TypeError, match="var_name must be a str"):
        baz.pit(idata, 3)


def test_mismatched_dims_sizes_and_coords():
    rng = np.random.default_rng(5)
    pp = xr.Dataset({"y": (("chain", "draw", "i"), rng.normal(size=(1, 10, 4)))})
    obs = xr.Dataset({"y": (("j",), rng.normal(size=4))})
    with pytest.raises(ValueError, match=r"observation dims differ.*\['j'\]"):
        baz.pit({"posterior_predictive": pp, "observed_data": obs})
    short = xr.Dataset({"y": (("i",), rng.normal(size=3))})
    with pytest.raises(ValueError, match="dim 'i' has 3 values in 'observed_data' but 4"):
        baz.pit({"posterior_predictive": pp, "observed_data": short})
    pp_c = pp.assign_coords(i=[0, 1, 2, 3])
    obs_c = xr.Dataset({"y": (("i",), rng.normal(size=4))}, coords={"i": [3, 2, 1, 0]})
    with pytest.raises(ValueError, match="coordinates of dim 'i' differ"):
        baz.pit({"posterior_predictive": pp_c, "observed_data": obs_c})
    no_sample = xr.Dataset({"y": (("s", "i"), rng.normal(size=(10, 4)))})
    obs_i = xr.Dataset({"y": (("i",), rng.normal(size=4))})
    with pytest.raises(ValueError, match=r"none of the sample dims \['chain', 'draw'\]"):
        baz.pit({"posterior_predictive": no_sample, "observed_data": obs_i})
    # other sample dims can be named
    u = baz.pit(
        {"posterior_predictive": no_sample, "observed_data": obs_i}, sample_dims=("s",)
    )
    assert u.dims == ("i",)


def test_wrong_data_type():
    with pytest.raises(TypeError, match="InferenceData, an xarray.DataTree or a dict"):
        baz.pit(np.zeros((3, 4)))
    with pytest.raises(TypeError, match="flat must be a bool"):
        baz.pit({}, flat=1)
