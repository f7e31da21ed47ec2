"""Run in a subprocess with 8 simulated CPU devices (see tests/test_sharding.py).

Every metric on inputs sharded over a 1-D Mesh with NamedSharding against the same
metric on unsharded inputs. Prints one line per metric and "ALL OK" at the end.
"""

import os
import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import bayescal
from bayescal import classification as C
from bayescal import core
from bayescal import regression as R

if os.environ.get("BAYESCAL_CACHE_DIR"):  # the tests' shared cache (tests/conftest.py)
    bayescal.enable_compilation_cache(os.environ["BAYESCAL_CACHE_DIR"], concurrent=True)

assert jax.device_count() == 8, jax.device_count()
mesh = Mesh(np.array(jax.devices()), ("d",))
row = NamedSharding(mesh, P("d"))
col = NamedSharding(mesh, P(None, "d"))
rng = np.random.default_rng(0)
n = 8 * 250
y_reg = rng.normal(size=n).astype(np.float32)
loc = np.zeros(n, np.float32)
scale = np.ones(n, np.float32)
draws = rng.normal(size=(64, n)).astype(np.float32)
u = rng.uniform(size=n).astype(np.float32)
p = rng.uniform(size=n).astype(np.float32)
y = (rng.uniform(size=n) < p).astype(np.float32)


def put(x):
    return jax.device_put(x, col if x.ndim == 2 else row)


def _dirichlet(y, p, weights):
    return weights * (p * 0 + 1)  # the replicates' weights, tied to the sharded data


def _weighted_ece(y, p, weights):
    return C.expected_calibration_error(y, p, weights=weights)


def _bootstrap(metric):
    def run(y, p):
        return core.bootstrap(0, metric, y, p, num_samples=8, method="bayesian")

    return run


CASES = {
    "pit_normal": (R.pit_normal, (y_reg, loc, scale), {}),
    "pit_draws": (R.pit_draws, (y_reg, draws), {}),
    "calibration_curve": (R.calibration_curve, (u,), {}),
    "calibration_error_l1": (R.calibration_error, (u,), {}),
    "calibration_error_max": (R.calibration_error, (u,), {"norm": "max"}),
    "miscalibration_area_exact": (R.miscalibration_area, (u,), {}),
    "miscalibration_area_grid": (R.miscalibration_area, (u,), {"num_levels": 50}),
    "sharpness": (R.sharpness, (scale,), {}),
    "crps_normal": (R.crps_normal, (y_reg, loc, scale), {}),
    "nll_normal": (R.nll_normal, (y_reg, loc, scale), {}),
    "crps_draws": (R.crps_draws, (y_reg, draws), {}),
    "reliability_curve": (C.reliability_curve, (y, p), {}),
    "reliability_curve_quantile": (C.reliability_curve, (y, p), {"strategy": "quantile"}),
    "expected_calibration_error": (C.expected_calibration_error, (y, p), {}),
    "brier_score": (C.brier_score, (y, p), {}),
    "log_loss": (C.log_loss, (y, p), {}),
    "brier_decomposition": (C.brier_decomposition, (y, p), {}),
    "brier_decomposition_binned": (C.brier_decomposition_binned, (y, p), {}),
    "prediction_sharpness": (C.prediction_sharpness, (p,), {}),
    # the Dirichlet weights do not depend on the sharding (bitwise: EXACT below)
    "bootstrap_bayesian_weights": (_bootstrap(_dirichlet), (y, p), {}),
    "bootstrap_bayesian_ece": (_bootstrap(_weighted_ece), (y, p), {}),
}
EXACT = {"bootstrap_bayesian_weights"}

only = sys.argv[1:] or list(CASES)
for name in only:
    fn, args, kwargs = CASES[name]
    ref = fn(*args, **kwargs)
    got = fn(*[put(a) for a in args], **kwargs)
    for a, b in zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(got), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if np.issubdtype(a.dtype, np.integer) or name in EXACT:
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:  # float sums: within a few ulps whatever the sharding
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7, err_msg=name)
    print("ok", name, flush=True)
print("ALL OK", flush=True)
