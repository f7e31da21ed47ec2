"""One of two CPU processes joined by jax.distributed (see tests/test_multihost.py).

Each process holds half of the PIT values; the global array is built with
jax.make_array_from_process_local_data and the curve computed on it, and also by
merging the two processes' accumulator states with a psum over the global mesh.
"""

import os
import sys

import jax

import bayescal

if os.environ.get("BAYESCAL_CACHE_DIR"):  # the tests' shared cache (tests/conftest.py)
    bayescal.enable_compilation_cache(os.environ["BAYESCAL_CACHE_DIR"], concurrent=True)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, pid = int(sys.argv[1]), int(sys.argv[2])
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from bayescal.regression import calibration_accumulator, calibration_curve  # noqa: E402

u = np.random.default_rng(0).uniform(size=2000).astype(np.float32)
half = u[pid * 1000 : (pid + 1) * 1000]
mesh = Mesh(np.array(jax.devices()), ("p",))
sharding = NamedSharding(mesh, P("p"))
global_u = jax.make_array_from_process_local_data(sharding, half, (2000,))
curve = calibration_curve(global_u, num_levels=21)
observed = np.asarray(curve.observed.addressable_data(0))  # replicated result

# the accumulator: local state, summed over processes
acc = calibration_accumulator(num_levels=21)
local = acc.update(acc.init(), half)
summed = multihost_utils.process_allgather(local.count)  # split pairs (high, low)
count = sum(np.asarray(part).reshape(2, -1).sum(0) * scale
            for part, scale in zip(summed, (2**20, 1), strict=True))
ref = (u[:, None] <= np.linspace(0, 1, 21, dtype=np.float32)).sum(0)
assert (count == ref).all(), (count, ref)
# counts are exact (above); the division by n may round differently by 1 ulp
np.testing.assert_allclose(observed, ref / 2000, rtol=2e-7)
print("PROCESS", pid, "OK", flush=True)
jax.distributed.shutdown()
