"""Shared test configuration."""

import os

import jax
import numpy as np
import pytest
from hypothesis import settings

# derandomize: every run of the suite, local or CI, draws the same examples (a green
# `make test` here means a green CI); `make fuzz` explores new ones.
settings.register_profile("bayescal", max_examples=30, deadline=None, derandomize=True)
settings.load_profile("bayescal")

X64 = bool(jax.config.jax_enable_x64)

# Share compiled kernels across the pytest-xdist workers and across runs: JAX's
# persistent compilation cache (set BAYESCAL_JAX_CACHE="" to switch it off). The float32
# and x64 runs compile different programs, so they do not collide. Every program is
# cached, however quick to compile: most of the suite's ~5000 compilations take
# 10-100 ms each, and together they are most of its time (a second run of the float32
# tests takes ~40% of the first).
_CACHE = os.environ.get(
    "BAYESCAL_JAX_CACHE", os.path.join(os.path.dirname(__file__), "..", ".jax_cache")
)
if _CACHE:
    jax.config.update("jax_compilation_cache_dir", os.path.abspath(_CACHE))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def float_tol(dtype=None):
    """Relative tolerance matching the dtype bayescal computes in."""
    return 1e-10 if X64 else 2e-5

# Scripts run in subprocesses (with their own XLA flags), not test modules.
collect_ignore = ["_sharded_check.py", "_multihost_worker.py"]
