"""Shape bucketing of the rest of the regression branch and of the adapters.

The same contract as tests/test_bucketing.py: an eager call on host-resident inputs
pads the observation axis to ``bucketing.bucket_size(n)``, so a new ``n`` in a bucket
already used compiles nothing, and the result equals the unpadded computation (the same
call under ``jax.jit``, which traces the exact length): counts exactly, floats to
``float_tol``. Calls that ``jax.jit`` cannot trace (PSIS runs in NumPy, ArviZ data are
xarray objects, ``num_groups=None`` reads the data) are compared with a reference
computed another way, named in REFERENCES.
"""

import contextlib
import functools
import importlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import xarray as xr
from jax.scipy.stats import norm

import bayescal
from bayescal import arviz as BA
from bayescal import numpyro as BN
from bayescal import regression as R
from bayescal._src.bucketing import bucket_size, random_prefix_stable
from tests.conftest import compilations_during
from tests.test_bucketing import _assert_same
from tests.test_bucketing import _inputs as _base_inputs

# The bucketed kernel path itself: small eager calls would otherwise take the host path.
pytestmark = pytest.mark.usefixtures("kernel_path")

S = 40  # posterior draws of the NumPyro models
_POSTERIOR = {
    "w": np.random.default_rng(11).normal(size=(S, 2)),
    "a": np.random.default_rng(12).normal(size=(S, 3)),
    "s": np.random.default_rng(13).uniform(0.5, 1.5, S),
}


def _inputs(n, seed=0):
    data = _base_inputs(n, seed)
    rng = np.random.default_rng(seed + n + 7)
    x = rng.normal(size=(n, 2))
    data.update(
        x=x,
        groups=rng.integers(0, 3, n),
        lower=data["loc"] - data["scale"],
        upper=data["loc"] + data["scale"],
        counts=rng.poisson(2.0, n).astype(np.float64),
        count_draws=rng.poisson(2.0, (20, n)).astype(np.int64),
        # posterior predictive draws of the regression model, one per posterior draw
        predictive=(x @ _POSTERIOR["w"].T).T + rng.normal(size=(S, n)),
    )
    return data


# --------------------------------------------------------------------------- models
def _regression_model(x, g, y=None):
    """Row-local: matmul, a group effect by indexing, a column of x."""
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0))
    a = numpyro.sample("a", dist.Normal(jnp.zeros(3), 1.0))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("data", x.shape[0]):
        loc = x @ w + a[g]
        numpyro.sample("obs", dist.Normal(loc, s + jax.nn.softplus(x[:, 0])), obs=y)


def _count_model(x, g, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Poisson(jnp.exp(0.3 * (x @ w))), obs=y)


def _logistic_model(x, g, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Bernoulli(logits=x @ w), obs=y)


def _centred_model(x, g, y=None):
    """Not row-local: each observation's mean depends on the mean of all the x."""
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Normal((x - x.mean(0)) @ w, s), obs=y)


def _counted_model(x, g, y=None):
    """Not row-local: the scale depends on the number of observations."""
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Normal(x @ w, s * jnp.sqrt(x.shape[0]) / 30), obs=y)


def _shifted_model(x, g, y=None):
    """Not row-local: each observation's mean is the previous observation's x."""
    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("obs", dist.Normal(jnp.roll(x, 1, axis=0) @ w, 1.0), obs=y)


# --------------------------------------------------------------------------- fitted objects
@functools.cache
def _isotonic():
    return R.fit_isotonic_recalibrator(np.linspace(0.01, 0.99, 300) ** 2)


@functools.cache
def _sigma(family="normal", df=None):
    d = _base_inputs(300)
    return R.fit_sigma_scaling(d["y"], d["loc"], d["scale"], family=family, df=df)


@functools.cache
def _conformal(normalized):
    d = _base_inputs(500)
    return R.fit_conformal(d["y"], d["loc"], d["scale"] if normalized else None)


@functools.cache
def _cqr():
    d = _base_inputs(500)
    return R.fit_conformalized_quantile(
        d["y"], d["loc"] - d["scale"], d["loc"] + d["scale"]
    )


def _normal_cdf(v):
    return norm.cdf(v, 0.1, 1.3)


def _idata(y, draws, predictive=None):
    """ArviZ data (a DataTree) of 2 chains; the log-likelihood of a unit Normal."""
    n = y.shape[0]
    pp = (draws if predictive is None else predictive).reshape(2, -1, n)
    dims = ("chain", "draw", "obs")
    return xr.DataTree.from_dict(
        {
            "posterior_predictive": xr.Dataset({"y": (dims, pp)}),
            "log_likelihood": xr.Dataset({"y": (dims, -0.5 * (y - pp) ** 2)}),
            "observed_data": xr.Dataset({"y": (("obs",), y)}),
        }
    )


def _loo(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto k warnings: not what is tested here
        return tuple(BN.loo_pit(_regression_model, _POSTERIOR, *args, **kw))


def _arviz_loo(y, draws, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(BA.loo_pit(_idata(y, draws), flat=True, r_eff=1.0, **kw))


KEY = jax.random.key(1)

# name: (function, positional inputs, keyword options)
CASES = {
    # PIT
    "pit_draws": (R.pit_draws, ("y", "draws"), {}),
    "pit_draws_key": (R.pit_draws, ("counts", "count_draws"), {"key": KEY}),
    "pit_cdf": (lambda y: R.pit_cdf(y, _normal_cdf), ("y",), {}),
    # recalibrated predictives
    "recalibrated_quantiles_isotonic": (
        lambda m, s, lv: R.recalibrated_quantiles(_isotonic(), lv, loc=m, scale=s),
        ("loc", "scale", "levels"),
        {},
    ),
    "recalibrated_quantiles_draws": (
        lambda d, lv: R.recalibrated_quantiles(_isotonic(), lv, draws=d),
        ("draws", "levels"),
        {},
    ),
    "recalibrated_quantiles_sigma": (
        lambda m, s, lv: R.recalibrated_quantiles(_sigma(), lv, loc=m, scale=s),
        ("loc", "scale", "levels"),
        {},
    ),
    "recalibrated_quantiles_student_t": (
        lambda m, s, lv: R.recalibrated_quantiles(
            _sigma("student_t", 4.0), lv, loc=m, scale=s
        ),
        ("loc", "scale", "levels"),
        {},
    ),
    "recalibrated_quantiles_laplace": (
        lambda m, s, lv: R.recalibrated_quantiles(_sigma("laplace"), lv, loc=m, scale=s),
        ("loc", "scale", "levels"),
        {},
    ),
    "recalibrated_interval_isotonic": (
        lambda m, s: R.recalibrated_interval(_isotonic(), 0.9, loc=m, scale=s),
        ("loc", "scale"),
        {},
    ),
    "recalibrated_interval_draws": (
        lambda d: R.recalibrated_interval(_isotonic(), 0.8, draws=d),
        ("draws",),
        {},
    ),
    "recalibrated_interval_sigma": (
        lambda m, s: R.recalibrated_interval(_sigma(), 0.9, loc=m, scale=s),
        ("loc", "scale"),
        {},
    ),
    # conformal (alpha 0.25: n = 7 is enough for the conformal rank)
    "fit_conformal": (R.fit_conformal, ("y", "loc"), {"alpha": 0.25}),
    "fit_conformal_scaled": (R.fit_conformal, ("y", "loc", "scale"), {"alpha": 0.25}),
    "fit_conformalized_quantile": (
        R.fit_conformalized_quantile,
        ("y", "lower", "upper"),
        {"alpha": 0.25},
    ),
    "conformal_calibrator_call": (lambda m: _conformal(False)(m), ("loc",), {}),
    "conformal_calibrator_call_scaled": (
        lambda m, s: _conformal(True)(m, s),
        ("loc", "scale"),
        {},
    ),
    "conformalized_quantile_calibrator_call": (
        lambda lo, hi: _cqr()(lo, hi),
        ("lower", "upper"),
        {},
    ),
    # conditional calibration
    "spread_skill_curve": (R.spread_skill_curve, ("y", "loc", "scale"), {"bins": 7}),
    "spread_skill_curve_uniform": (
        R.spread_skill_curve,
        ("y", "loc", "scale"),
        {"strategy": "uniform"},
    ),
    "expected_normalized_calibration_error": (
        R.expected_normalized_calibration_error,
        ("y", "loc", "scale"),
        {},
    ),
    "ence_uniform": (
        R.expected_normalized_calibration_error,
        ("y", "loc", "scale"),
        {"strategy": "uniform", "bins": 5},
    ),
    "group_calibration_curve": (
        R.group_calibration_curve,
        ("u", "groups"),
        {"num_groups": 3, "num_levels": 20},
    ),
    "group_calibration_error": (
        R.group_calibration_error,
        ("u", "groups"),
        {"num_groups": 3},
    ),
    "group_calibration_error_interval": (
        R.group_calibration_error,
        ("u", "groups"),
        {"num_groups": 4, "kind": "interval", "norm": "max"},
    ),
    "group_calibration_error_num_groups_read": (
        R.group_calibration_error,
        ("u", "groups"),
        {},
    ),
    "adversarial_group_calibration": (
        lambda y, m, s: R.adversarial_group_calibration(
            3, y, m, s, num_trials=3, num_group_draws=4
        ),
        ("y", "loc", "scale"),
        {},
    ),
    "adversarial_group_calibration_replace": (
        lambda y, m, s: R.adversarial_group_calibration(
            3, y, m, s, num_trials=3, num_group_draws=4, replace=True
        ),
        ("y", "loc", "scale"),
        {},
    ),
    # NumPyro
    "numpyro_pit": (lambda y, d: BN.pit(y, {"obs": d}), ("y", "draws"), {}),
    "numpyro_pit_key": (
        lambda y, d: BN.pit(y, d, key=KEY),
        ("counts", "count_draws"),
        {},
    ),
    "rao_blackwell_pit": (
        lambda y, x, g: BN.rao_blackwell_pit(_regression_model, _POSTERIOR, y, x, g),
        ("y", "x", "groups"),
        {},
    ),
    "rao_blackwell_pit_key": (
        lambda y, x, g: BN.rao_blackwell_pit(_count_model, _POSTERIOR, y, x, g, key=KEY),
        ("counts", "x", "groups"),
        {},
    ),
    "predictive_moments": (
        lambda x, g: BN.predictive_moments(_regression_model, _POSTERIOR, x, g),
        ("x", "groups"),
        {},
    ),
    "predictive_probs": (
        lambda x, g: BN.predictive_probs(_logistic_model, _POSTERIOR, x, g),
        ("x", "groups"),
        {},
    ),
    "numpyro_loo_pit": (_loo, ("y", "x", "groups"), {}),
    "numpyro_loo_pit_key": (_loo, ("y", "x", "groups"), {"key": 5}),
    "numpyro_loo_pit_counting": (
        lambda y, x, g, pp: _loo(y, x, g, rao_blackwell=False, predictive={"obs": pp}),
        ("y", "x", "groups", "predictive"),
        {},
    ),
    # ArviZ
    "arviz_pit": (lambda y, d: BA.pit(_idata(y, d), flat=True), ("y", "draws"), {}),
    "arviz_pit_dataarray": (lambda y, d: BA.pit(_idata(y, d)).values, ("y", "draws"), {}),
    "arviz_loo_pit": (_arviz_loo, ("y", "draws"), {}),
    "arviz_loo_pit_key": (_arviz_loo, ("y", "draws"), {"key": 2}),
}

# Cases whose result depends on a key: padded only where jax.random's draws of a longer
# array begin with those of a shorter one (threefry, partitionable: JAX's default).
RANDOMIZED = {
    "pit_draws_key",
    "numpyro_pit_key",
    "rao_blackwell_pit_key",
    "numpyro_loo_pit_key",
    "arviz_loo_pit_key",
    "adversarial_group_calibration_replace",
}


@contextlib.contextmanager
def _no_model_bucketing():
    """The NumPyro functions evaluated at the exact length (their own unpadded path)."""
    original = BN._bucket_model
    BN._bucket_model = lambda *args: None
    try:
        yield
    finally:
        BN._bucket_model = original


def _loo_unpadded(*args, **kw):
    with _no_model_bucketing():
        return _loo(*args, **kw)


def _weighted_pit_reference(y, draws, key=None):
    """The LOO-PIT of _idata in NumPy float64 with ArviZ's own PSIS weights."""
    d = draws.T  # [N, S]
    log_weights, k = BA._psislw(-0.5 * (y[:, None] - d) ** 2, 1.0)
    w = np.exp(log_weights)
    total = w.sum(-1)
    upper = (w * (d <= y[:, None])).sum(-1) / total
    if key is not None:
        lower = (w * (d < y[:, None])).sum(-1) / total
        dtype = jnp.result_type(float)
        v = np.asarray(jax.random.uniform(bayescal.core.as_key(key), y.shape, dtype=dtype))
        upper = np.clip(lower + v * (upper - lower), lower, upper)
    dtype = jnp.result_type(float)
    return jnp.asarray(upper.astype(dtype)), np.asarray(k)


# Calls jax.jit cannot trace, with the reference each is compared with instead.
REFERENCES = {
    # num_groups=None reads the largest group id on the host: the documented meaning
    "group_calibration_error_num_groups_read": lambda u, g: jax.jit(
        functools.partial(R.group_calibration_error, num_groups=int(g.max()) + 1)
    )(u, g),
    # PSIS runs in NumPy: the same call with the model evaluated at its exact length
    "numpyro_loo_pit": _loo_unpadded,
    "numpyro_loo_pit_key": functools.partial(_loo_unpadded, key=5),
    "numpyro_loo_pit_counting": lambda y, x, g, pp: _loo_unpadded(
        y, x, g, rao_blackwell=False, predictive={"obs": pp}
    ),
    # ArviZ data are xarray objects: the PIT of the pooled draws, unpadded
    "arviz_pit": lambda y, d: jax.jit(R.pit_draws)(y, d),
    "arviz_pit_dataarray": lambda y, d: np.asarray(jax.jit(R.pit_draws)(y, d)),
    "arviz_loo_pit": _weighted_pit_reference,
    "arviz_loo_pit_key": functools.partial(_weighted_pit_reference, key=2),
}

# The public functions these cases cover (with tests/test_bucketing.py's, the issue's
# list), qualified by submodule.
COVERS = {
    "regression.pit_draws",
    "regression.pit_cdf",
    "regression.recalibrated_quantiles",
    "regression.recalibrated_interval",
    "regression.fit_conformal",
    "regression.fit_conformalized_quantile",
    "regression.conformal_rank",
    "regression.ConformalCalibrator",
    "regression.ConformalizedQuantileCalibrator",
    "regression.expected_normalized_calibration_error",
    "regression.spread_skill_curve",
    "regression.group_calibration_curve",
    "regression.group_calibration_error",
    "regression.adversarial_group_calibration",
    "regression.calibration_accumulator",
    "numpyro.pit",
    "numpyro.rao_blackwell_pit",
    "numpyro.predictive_moments",
    "numpyro.predictive_probs",
    "numpyro.loo_pit",
    "arviz.pit",
    "arviz.loo_pit",
}


def _call(name, data):
    fn, keys, kw = CASES[name]
    return fn(*(data[k] for k in keys), **kw)


def _unpadded(name, data):
    """The same call under jax.jit (traced at the exact length), or its reference."""
    fn, keys, kw = CASES[name]
    args = [data[k] for k in keys]
    if name in REFERENCES:
        return REFERENCES[name](*args)
    return jax.jit(functools.partial(fn, **kw))(*args)


def _require_padding(name):
    # Randomized calls are padded only with prefix-stable draws (JAX >= 0.5's default,
    # the JAX of `make test`; the version tiers leave this file out).
    if name in RANDOMIZED:
        assert random_prefix_stable()


@pytest.mark.parametrize("name", sorted(CASES))
def test_new_length_in_a_used_bucket_compiles_nothing(name):
    _require_padding(name)
    assert bucket_size(1000) == bucket_size(1013) == bucket_size(1024) == 1024
    jax.block_until_ready(_call(name, _inputs(1000)))
    for n in (1013, 1024):
        data = _inputs(n)
        assert (
            compilations_during(lambda d=data: jax.block_until_ready(_call(name, d))) == 0
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_bucketed_equals_unpadded(name):
    for n in (7, 1000):
        data = _inputs(n, seed=1)
        _assert_same(_call(name, data), _unpadded(name, data))


@pytest.mark.parametrize("name", sorted(RANDOMIZED))
def test_same_key_same_result(name):
    data = _inputs(1000, seed=3)
    first, again = _call(name, data), _call(name, data)
    for a, b in zip(
        jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(again), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
    "name",
    [
        "fit_conformal",
        "spread_skill_curve",
        "group_calibration_error",
        "adversarial_group_calibration",
        "rao_blackwell_pit",
    ],
)
def test_an_unpadded_trace_of_the_bucket_length_is_not_reused(name):
    # jit at exactly the bucket's length first, then an eager call padded to it: the
    # padding must still be left out (the mask is an argument of the kernels)
    _unpadded(name, _inputs(1024, seed=2))
    part = _inputs(900, seed=2)
    assert bucket_size(900) == 1024
    _assert_same(_call(name, part), _unpadded(name, part))


def test_calibration_accumulator_takes_new_chunk_lengths_without_compiling():
    acc = R.calibration_accumulator(num_levels=50)
    chunks = [_inputs(n, seed=4)["u"] for n in (1000, 1013, 1024, 7)]
    state = jax.block_until_ready(acc.update(acc.init(), chunks[0]))
    jax.block_until_ready(acc.finalize(acc.merge(state, state)))

    def rest(state):
        for chunk in chunks[1:3]:
            state = acc.update(state, chunk)
        return jax.block_until_ready(acc.finalize(state))

    assert compilations_during(lambda: rest(state)) == 0
    state = acc.init()
    for chunk in chunks:
        state = acc.update(state, chunk)
    want = jax.jit(functools.partial(R.calibration_curve, num_levels=50))(
        np.concatenate(chunks)
    )
    _assert_same(acc.finalize(state), want)


def test_conformal_rank_compiles_nothing():
    assert compilations_during(lambda: R.conformal_rank(1013, 0.1)) == 0
    assert R.conformal_rank(1013, 0.1) == int(np.ceil(1014 * 0.9))


@pytest.mark.parametrize("model", [_centred_model, _counted_model, _shifted_model])
def test_models_that_mix_observations_are_not_padded(model):
    # padding such a model's inputs would change the real observations' values: they
    # are evaluated at their exact length (and still equal the jitted call)
    data = _inputs(1000, seed=5)
    with BN._matmul_precision("highest"):
        prep = BN._prepare(
            model, _POSTERIOR, (data["x"], data["groups"]), {}, site="obs", y_true=data["y"]
        )
    assert prep.n is None and prep.info.shape == (1000,)
    got = BN.rao_blackwell_pit(model, _POSTERIOR, data["y"], data["x"], data["groups"])
    want = jax.jit(lambda *a: BN.rao_blackwell_pit(model, _POSTERIOR, *a))(
        data["y"], data["x"], data["groups"]
    )
    _assert_same(got, want)


def test_row_local_models_are_padded():
    data = _inputs(1000, seed=5)
    prep = BN._prepare(
        _regression_model,
        _POSTERIOR,
        (data["x"], data["groups"]),
        {},
        site="obs",
        y_true=data["y"],
    )
    assert prep.n == 1000 and prep.info.shape == (1024,)

    # the number of observations given as an int cannot be padded
    def by_count(n, y=None):
        mu = numpyro.sample("s", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", n):
            numpyro.sample("obs", dist.Normal(mu, 1.0), obs=y)

    prep = BN._prepare(by_count, _POSTERIOR, (1000,), {}, site="obs", y_true=data["y"])
    assert prep.n is None


def test_covers_names_public_functions():
    for qualified in COVERS:
        module, name = qualified.split(".")
        mod = importlib.import_module(f"bayescal.{module}")
        assert name in mod.__all__, qualified
