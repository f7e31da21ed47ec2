# bayescal developer tasks. Each target sets up its environment itself on a fresh
# machine (only python3 >= 3.11, pip and make are needed; the 3.12 tier also needs a
# python3.12, e.g. from pyenv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
# pytest's worker count; 2 suits the 2-core CI machines.
JOBS   ?= 2

# Second tier (test-py312): Python 3.12 with the newest jax (>= 0.11), numpyro and
# arviz 1.x (arviz_base / arviz_stats, data as xarray.DataTree, no InferenceData).
# python3.12 on PATH if it runs, else the newest pyenv 3.12.
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && { echo "$$p"; break; }; done)
VENV312 := .venv312
# Third tier (test-min): the declared minimum versions of pyproject.toml's runtime
# dependencies, pinned (Python 3.11, arviz 0.x with InferenceData). Raise a minimum here
# and in pyproject.toml together.
VENVMIN := .venvmin
MIN_PINS := jax==0.4.38 jaxlib==0.4.38 numpyro==0.15.0 numpy==2.0.2 scipy==1.13.1 \
	arviz==0.22.0 matplotlib==3.8.4 pandas==2.2.2 xarray==2024.10.0

FAST := -m "not slow and not docs and not mesh"
# The tiers run their files' slow tests too (the NumPyro/ArviZ round trips through MCMC
# and SVI are slow tests).
TIER := -m "not docs"

# What the two version tiers run: the tests (slow ones included) at the boundaries with the
# dependencies, where a version changes what bayescal does:
# - the adapters and I/O: ArviZ (test_arviz, test_loo), NumPyro (test_numpyro,
#   test_recalibrated_distribution), the command line on CSV (pandas) and NetCDF
#   (xarray, h5netcdf; test_cli, test_cli_inputs, test_cli_loo, test_cli_netcdf),
#   calibrator files, bundled data, matplotlib plots, the demo, the persistent
#   compilation cache, and the doctests of bayescal.arviz and bayescal.numpyro;
# - JAX itself: the contract matrix (every public function eager, under jit and vmap,
#   gradients, the scipy host callbacks).
# The list names the files (an include list, so that a new test file runs in `make
# test` only until it is put here for a reason). ~5 minutes a tier on the 2-core machine.
# Left out, because `make test` runs them on every change and they call the same
# jax/numpy/scipy functions the contract matrix calls: the tests of the metrics',
# calibrators', bands' and tests' mathematics against fixed references, the NumPy twins
# against the kernels, the fits under jit/vmap, the kernels, accumulators and core, the
# fuzz harness, the other command-line tests (hardening, output, report), and
# RecalibratedDistribution's moments and density against numerical quadrature.
# Also left out: the sharded and multi-host suites (8-device subprocesses, ~10 minutes
# of CPU a tier; a CI tier that ran them on a loaded machine took 22 minutes), the
# bucketing and compile-budget tests (they count compilations on the JAX of `make
# test`, in the accelerator rehearsal; the padding's conditions, prefix-stable random
# draws and symbolic shapes for NumPyro models, are those of JAX >= 0.5), and the
# bit-for-bit quantile edges (on jax 0.4.38 the XLA path under jit with a static count
# is an ulp off numpy in float32; the CPU path users get there, np.quantile, is exact).
TIER_FILES := arviz loo numpyro recalibrated_distribution \
	cli cli_inputs cli_loo cli_netcdf demo calibrator_io datasets plot \
	compilation_cache contract
TIER_TESTS := $(foreach t,$(TIER_FILES),tests/test_$(t).py) bayescal/arviz.py bayescal/numpyro.py \
	$(foreach t,mean_and_variance_equal_quad_of_density log_prob_integrates_to_one_and_is_the_cdf_derivative,\
		--deselect=tests/test_recalibrated_distribution.py::test_$(t))

.PHONY: fuzz test test-pytest test-fast test-rehearsal test-rehearsal-more test-fast-then-rehearsal test-docs-then-x64 test-x64-core test-x64 test-slow test-mesh test-py312 test-min ci demo bench bench-gpu \
	lint docs clean

# Packages are installed by uv (itself installed from PyPI by the venv's pip): it resolves
# the same versions as pip, from the same index, and links them from its cache, so that
# make test's setup takes ~15 s instead of ~35 (measured on the 2-core machine).
# --compile-bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set (as on the CI
# machines), every process would otherwise compile jax's sources again on import (6.6 s
# instead of 2.6 s for the test workers' imports). `uv pip install` is pip's interface;
# plain pip works too (docs/install.md).
UV_INSTALL = uv pip install --quiet --compile-bytecode --python

$(PY):
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: | $(PY)
	$(PY) -m pip install --quiet uv

$(VENV)/.test-installed: pyproject.toml | $(BIN)/uv
	$(BIN)/$(UV_INSTALL) $(PY) -e '.[test]'
	touch $@

$(VENV)/.bench-installed: pyproject.toml | $(BIN)/uv
	$(BIN)/$(UV_INSTALL) $(PY) -e '.[bench]'
	touch $@

$(VENV)/.lint-installed: pyproject.toml | $(BIN)/uv
	$(BIN)/$(UV_INSTALL) $(PY) -e '.[lint]'
	touch $@

$(VENV)/.docs-installed: pyproject.toml | $(BIN)/uv
	$(BIN)/$(UV_INSTALL) $(PY) -e '.[test,docs]'
	touch $@ $(VENV)/.test-installed

$(VENV)/.installed: pyproject.toml | $(BIN)/uv
	$(BIN)/$(UV_INSTALL) $(PY) -e .
	touch $@

$(VENV312)/.installed: pyproject.toml
	@test -n "$(PYTHON312)" || { echo "make test-py312: no python3.12 found (set PYTHON312=...)"; exit 1; }
	$(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install --quiet uv
	$(VENV312)/bin/$(UV_INSTALL) $(VENV312)/bin/python --upgrade -e '.[test]' 'jax>=0.11' numpyro 'arviz>=1'
	touch $@

$(VENVMIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENVMIN)
	$(VENVMIN)/bin/python -m pip install --quiet uv
	printf '%s\n' $(MIN_PINS) > $(VENVMIN)/constraints.txt
	$(VENVMIN)/bin/$(UV_INSTALL) $(VENVMIN)/bin/python -c $(VENVMIN)/constraints.txt -e '.[test]'
	touch $@

# The everyday suite (target: under 6 minutes on 2 cores, from a fresh clone): the
# tests and doctests in float32 (JAX's default) without the slow statistical and
# end-to-end tests, the tests whose results hang on the float width again under
# JAX_ENABLE_X64=1 (X64_CORE), then the docs (built with -W, the notebooks executed, and
# tests/test_docs.py run on the HTML). CI (.ci/run) also runs test-slow and
# the two version tiers.
# The float32 tests keep two cores busy for ~5 minutes; the docs build keeps about one
# busy for ~2.5 (the notebooks run one after another), then the x64 tests run in one
# process (two workers would cost another ~10 s of CPU to start) beside the end of the
# float32 run. Each target's output is printed when it ends.
test: $(VENV)/.docs-installed
	$(MAKE) --no-print-directory -j 2 --output-sync=target test-fast-then-rehearsal test-docs-then-x64

# --dist loadfile: a module's tests run in one worker, so its fixtures (an MCMC fit, a
# fitted recalibrator) and its compiled kernels are made once, not once per worker.
PYTEST_N = $(PY) -m pytest -n $(JOBS) --dist loadfile -q $(FAST)

# The fast suite and the rehearsal compile thousands of XLA programs, and compiling is
# most of their time. They run with the options bayescal gives its own small programs
# on CPU (bayescal/_src/xla_options.py) set for every program, the tests' own jit and
# vmap included: LLVM's optimisations off and XLA's older loop emitters. That halved
# their time (tests/test_fits_jax.py + tests/test_contract.py: 191 -> 92 s on the two
# cores). The machine code differs, the arithmetic does not (no fast-math either way);
# the x64 numerics of make test, test-slow and the version tiers compile with XLA's
# defaults; a test's own run-time-heavy program asks for LLVM's optimisations
# (tests/conftest.py: optimized). Each option is probed first: an XLA that does not know one (jax 0.12
# dropped the emitter switch) aborts at start-up on it, so it is left out there.
QUICK_XLA := --xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false
# On a loaded machine XLA aborts a CPU mesh's program when one device's thread reaches
# a collective more than 60 s (a 20 s warning, then 40 s) after the others: in a
# make test of 2026-11-30 (load ~4 on the 2 cores) tests/test_fuzz_sharded.py's
# 8-device subprocess died so in fit_scaling_binning (6.5 s alone) and took the 12
# entries after it along. Wait 10 minutes instead (jax >= ~0.8 knows the flag).
SLOW_MACHINE_XLA := --xla_cpu_collective_call_terminate_timeout_seconds=600
TEST_XLA_FLAGS = $(strip $(XLA_FLAGS) $(shell for f in $(QUICK_XLA) $(SLOW_MACHINE_XLA); do \
	XLA_FLAGS=$$f $(PY) -c 'import jax.numpy as n; n.zeros(1).block_until_ready()' \
	>/dev/null 2>&1 && echo $$f; done))
PYTEST_FAST = XLA_FLAGS="$(TEST_XLA_FLAGS)" $(PYTEST_N)

# The accelerator rehearsal (BAYESCAL_REHEARSAL=1; bayescal/_src/backend.py): the NumPy
# host path off, and every Python-level choice that depends on the backend (compiler
# options, NumPy shortcuts for JAX arrays, tracing one platform's branch) takes the
# branch an accelerator takes, so the programs compiled on this CPU are those a GPU
# compiles. The bucketing and compile-budget tests run only
# here: on the host path they would count the NumPy twins, which compile nothing, not
# the kernels (~10 minutes of the two cores).
# The bad-input, contract and command-line tests run this way too (REHEARSAL_MORE; they
# also run on the host path in the fast suite): ~1 minute of the two cores, all green
# since 2026-11-29; `make test-rehearsal-more` runs them alone.
REHEARSAL_ONLY := $(addprefix tests/,test_bucketing.py test_bucketing_classification.py \
	test_bucketing_regression.py test_bucketing_uncertainty.py test_compile_budget.py)
REHEARSAL_MORE := $(addprefix tests/,test_bad_input_classes.py test_contract.py test_cli.py)
REHEARSAL_TESTS := $(REHEARSAL_ONLY) $(REHEARSAL_MORE)

test-rehearsal: $(VENV)/.test-installed
	BAYESCAL_REHEARSAL=1 $(PYTEST_FAST) $(REHEARSAL_TESTS)

test-rehearsal-more: $(VENV)/.test-installed
	BAYESCAL_REHEARSAL=1 $(PYTEST_FAST) $(REHEARSAL_MORE)

test-fast-then-rehearsal: test-fast
	$(MAKE) --no-print-directory test-rehearsal
PYTEST_X64_CORE = JAX_ENABLE_X64=1 $(PYTEST_N) $(X64_CORE)

# make test's tests without the docs, one run after the other.
test-pytest: $(VENV)/.test-installed
	$(PYTEST_FAST) $(addprefix --ignore=,$(REHEARSAL_ONLY))
	BAYESCAL_REHEARSAL=1 $(PYTEST_FAST) $(REHEARSAL_TESTS)
	$(PYTEST_X64_CORE)

test-docs-then-x64: docs
	JAX_ENABLE_X64=1 $(PY) -m pytest -p no:xdist -q $(FAST) $(X64_CORE)

test-fast: $(VENV)/.test-installed
	$(PYTEST_FAST) $(addprefix --ignore=,$(REHEARSAL_ONLY))

# Under x64, everything but the plumbing that is the same in both modes (the command
# line's options and files, the plots, the bundled datasets, save/load, the ArviZ
# adapter's data handling, the sharded and multi-host runs); the float32 run covers
# those. Split in two: X64_CORE, the numerics where float32 and float64 take different
# paths or tolerances (binning kernels and compensated sums, PIT tails, PIT from draws
# and quantiles, proper scores, binned means, the PAV in XLA), run by `make test`; and the rest,
# `make test-x64` (not in CI since the issue "One library": ~14 minutes of CI's time for
# a rerun of what float32 covers). Both together: `make test-x64-core test-x64`.
X64_IGNORE := $(addprefix --ignore=tests/,test_cli.py test_plot.py test_datasets.py \
	test_calibrator_io.py test_arviz.py test_sharding.py test_sharded_inputs.py \
	test_multihost.py test_fuzz_sharded.py)
X64_CORE := $(addprefix tests/,test_kernels.py test_pit_quantiles_tails.py \
	test_regression_pit.py test_regression_scores.py test_classification_core.py \
	test_isotonic_device.py test_cumulative_calibration.py)

test-x64-core: $(VENV)/.test-installed
	$(PYTEST_X64_CORE)

test-x64: $(VENV)/.test-installed
	JAX_ENABLE_X64=1 $(PYTEST_FAST) $(X64_IGNORE) $(addprefix --ignore=,$(X64_CORE) $(REHEARSAL_ONLY)) tests

# The long statistical and end-to-end tests (CI runs them too: .ci/run).
# The 8-device CPU-mesh suites (tests/test_sharded_public.py, _inputs, _workflows and
# tests/test_fuzz_sharded.py; pytest marker `mesh`): every public function on inputs
# sharded over 8 simulated CPU devices, each suite in one subprocess, compared with the
# unsharded call. Out of `make test` since the issue "One library" (they were ~250 of
# its ~1,300 worker-seconds, four subprocesses of 25-75 s each); CI runs them, with the
# fast suite's XLA options. ~2.5 minutes on 2 cores.
test-mesh: $(VENV)/.test-installed
	XLA_FLAGS="$(TEST_XLA_FLAGS)" $(PY) -m pytest -n $(JOBS) --dist loadfile -q -m mesh tests

test-slow: $(VENV)/.test-installed
	$(PY) -m pytest -n $(JOBS) -q -m slow

test-py312: $(VENV312)/.installed
	$(VENV312)/bin/python -c 'import sys, jax, numpyro, arviz, xarray; print("tier py3.12: python", sys.version.split()[0], "jax", jax.__version__, "numpyro", numpyro.__version__, "arviz", arviz.__version__, "xarray", xarray.__version__)'
	$(VENV312)/bin/python -m pytest -n $(JOBS) -q $(TIER) $(TIER_TESTS)

test-min: $(VENVMIN)/.installed
	$(VENVMIN)/bin/python -c 'import sys, jax, numpyro, arviz, xarray; print("tier minimum: python", sys.version.split()[0], "jax", jax.__version__, "numpyro", numpyro.__version__, "arviz", arviz.__version__, "xarray", xarray.__version__)'
	$(VENVMIN)/bin/python -m pytest -n $(JOBS) -q $(TIER) $(TIER_TESTS)

# Everything CI runs.
ci: test test-mesh test-slow test-py312 test-min

# The fuzz harness with thousands of examples per public function (tests/test_fuzz.py;
# `make test` runs a few per function), and 40 drawn cases per function on the 8-device
# mesh (tests/test_fuzz_sharded.py, ~2 hours; `make test` runs one each).
fuzz: $(VENV)/.test-installed
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -p no:xdist -q tests/test_fuzz.py
	HYPOTHESIS_PROFILE=medium $(PY) -m pytest -p no:xdist -q tests/test_fuzz_sharded.py
	HYPOTHESIS_PROFILE=fuzz JAX_ENABLE_X64=1 $(PY) -m pytest -p no:xdist -q tests/test_fuzz.py

# --force: a second `make demo` replaces the report of the first.
demo: $(VENV)/.installed
	$(BIN)/bayescal demo --force

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/run.py

# On a machine with a GPU and JAX's CUDA build in the venv (docs/gpu.md): the
# accelerator-relevant test files, then per-kernel time, GB/s and fraction of a device
# copy at N = 1e6, 1e7, 1e8, written to gpu-bench.md. Without an accelerator it says so;
# `$(PY) benchmarks/bench_gpu.py --interpret` exercises the script on a CPU.
BENCH_GPU_MD ?= gpu-bench.md
bench-gpu: $(VENV)/.test-installed
	$(PY) benchmarks/bench_gpu.py --markdown $(BENCH_GPU_MD)

lint: $(VENV)/.lint-installed
	$(BIN)/ruff check bayescal tests benchmarks
	$(BIN)/ruff format --check bayescal tests benchmarks
	$(BIN)/mypy bayescal

# The notebooks' kernels use no persistent JAX compilation cache unless DOCS_JAX_CACHE
# names a folder (a second local build then compiles little); see tests/conftest.py for
# why caches are opt-in in the build and the tests.
DOCS_JAX_CACHE ?=
docs: $(VENV)/.docs-installed
	rm -rf docs/_build docs/api/generated docs/api/modules docs/tutorials
	$(if $(DOCS_JAX_CACHE),JAX_COMPILATION_CACHE_DIR=$(abspath $(DOCS_JAX_CACHE)) JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0) \
		$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html
	$(PY) -m pytest -q -p no:xdist -m docs tests/test_docs.py

clean:
	rm -rf $(VENV) $(VENV312) $(VENVMIN) docs/_build docs/api/generated docs/api/modules \
		docs/tutorials .pytest_cache .hypothesis .jax_cache
