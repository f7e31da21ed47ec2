"""Shared test configuration."""

import gc
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

# JAX's persistent compilation cache is OFF in the suite unless asked for with
# BAYESCAL_JAX_CACHE=<folder> (e.g. `BAYESCAL_JAX_CACHE=.jax_cache make test`: a second
# local run then takes ~40% of the first). Off by default because on a clean clone it
# saves little (each worker publishes its entries only at exit, see below) and because
# jaxlib 0.10's CPU executable serialization crashed a worker twice in a cold run
# ("Segmentation fault" in compilation_cache.put_executable_and_time, and an abort in
# its deserialize), which left pytest-xdist waiting for the dead worker until CI's time
# ran out. When on, the float32 and x64 runs compile different programs, so they do not
# collide, and concurrent=True makes each process write into a private folder and
# publish its entries atomically at exit (JAX writes entries in place).
_CACHE = os.environ.get("BAYESCAL_JAX_CACHE", "")
# The command line and the test scripts run in subprocesses read these: never the real
# home cache.
for _name in ("JAX_COMPILATION_CACHE_DIR", "BAYESCAL_CACHE_DIR", "BAYESCAL_NO_CACHE"):
    os.environ.pop(_name, None)
if _CACHE:
    import warnings

    import bayescal

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # replacing a JAX_COMPILATION_CACHE_DIR: intended
        bayescal.enable_compilation_cache(os.path.abspath(_CACHE), concurrent=True)
    os.environ["BAYESCAL_CACHE_DIR"] = os.path.abspath(_CACHE)
else:
    os.environ["BAYESCAL_NO_CACHE"] = "1"


# Every compiled XLA:CPU program keeps ~3 memory mappings (its code and data) for as long
# as JAX caches it, and Linux caps a process at vm.max_map_count mappings (65530 by
# default). A pytest-xdist worker runs dozens of modules and compiles thousands of
# programs (test_fuzz.py alone leaves ~25,000 mappings under x64): past the cap, LLVM's
# next mmap fails and the worker dies with "Segmentation fault" inside
# backend_compile_and_load (or inside the cache's serialize), which is how CI's cold
# runs crashed. So compiled programs are dropped after every module, and within a module
# whenever the count passes _MAX_MAPS (the next call recompiles what it needs).
_MAX_MAPS = 30_000


def _memory_mappings():
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:  # not Linux
        return 0


def _release_compiled_programs():
    jax.clear_caches()
    gc.collect()


@pytest.fixture(autouse=True, scope="module")
def _compiled_programs_per_module():
    yield
    _release_compiled_programs()


@pytest.fixture(autouse=True)
def _compiled_programs_under_the_cap():
    yield
    if _memory_mappings() > _MAX_MAPS:
        _release_compiled_programs()


# Every XLA compilation in this process, while `_COMPILES` is a list (jax.monitoring has
# no public unregister in the oldest supported jax, so the listener stays and idles).
_COMPILES = None


def _on_event_duration(event, duration, **kwargs):
    if _COMPILES is not None and event.endswith("backend_compile_duration"):
        _COMPILES.append(duration)


jax.monitoring.register_event_duration_secs_listener(_on_event_duration)


def compile_profile(run):
    """``(compilations, their seconds)`` while ``run()`` runs (a persistent-cache hit counts).

    The test suite's compile-budget helper: the tests assert the counts; the seconds
    are what benchmarks/bench_cold.py reports (timings are not asserted in tests).
    """
    global _COMPILES
    _COMPILES = []
    try:
        run()
        return len(_COMPILES), float(sum(_COMPILES))
    finally:
        _COMPILES = None


def compilations_during(run):
    """The number of XLA compilations while ``run()`` runs (a persistent-cache hit counts)."""
    return compile_profile(run)[0]


def optimized(fn):
    """``jax.jit(fn)``, compiled with LLVM's optimisations on (level 3, XLA's default).

    For the tests' own run-time-heavy programs, e.g. a test's size over a thousand
    simulated data sets: ``make test`` compiles every program unoptimised (the
    Makefile's ``QUICK_XLA``), which made ``test_size_at_the_nominal_level`` 26 -> 65 s.
    An XLA that does not know the option compiles with its defaults.
    """
    jitted = jax.jit(fn)

    def call(*args):
        lowered = jitted.lower(*args)
        try:
            compiled = lowered.compile({"xla_backend_optimization_level": 3})
        except jax.errors.JaxRuntimeError as err:  # as bayescal._src.xla_options does
            if "compile option" not in str(err):
                raise
            compiled = lowered.compile()
        return compiled(*args)

    return call


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def float_tol(dtype=None):
    """Relative tolerance matching the dtype bayescal computes in."""
    return 1e-10 if X64 else 2e-5

# Scripts run in subprocesses (with their own XLA flags), not test modules.
collect_ignore = ["_sharded_check.py", "_multihost_worker.py"]


@pytest.fixture
def kernel_path():
    """Small eager calls run their compiled kernels, not the NumPy host path.

    For tests of the kernel path itself (bucketing, compilations):
    ``pytestmark = pytest.mark.usefixtures("kernel_path")``.
    """
    from bayescal._src import host

    with host.disabled():
        yield
