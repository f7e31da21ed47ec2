# bayescal developer tasks. Each target sets up .venv itself on a fresh machine
# (only python3 >= 3.11, pip and make are needed).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python

.PHONY: test test-x64 fuzz demo bench lint docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.test-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

$(VENV)/.bench-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@

$(VENV)/.lint-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[lint]'
	touch $@

$(VENV)/.docs-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test,docs]'
	touch $@

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

# The whole suite: tests and doctests in float32 (JAX's default), the tests again with
# JAX_ENABLE_X64=1, then the docs with the tutorial notebooks executed.
test: $(VENV)/.test-installed $(VENV)/.docs-installed
	$(PY) -m pytest -n 2 -q
	JAX_ENABLE_X64=1 $(PY) -m pytest -n 2 -q -m "not slow" tests
	$(MAKE) docs

# The fuzz harness with thousands of examples per public function (tests/test_fuzz.py;
# `make test` runs a few per function).
fuzz: $(VENV)/.test-installed
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -p no:xdist -q tests/test_fuzz.py
	HYPOTHESIS_PROFILE=fuzz JAX_ENABLE_X64=1 $(PY) -m pytest -p no:xdist -q tests/test_fuzz.py

demo: $(VENV)/.installed
	$(BIN)/bayescal demo

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/run.py

lint: $(VENV)/.lint-installed
	$(BIN)/ruff check bayescal tests benchmarks
	$(BIN)/ruff format --check bayescal tests benchmarks
	$(BIN)/mypy bayescal

docs: $(VENV)/.docs-installed
	rm -rf docs/_build docs/api/generated docs/tutorials
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

clean:
	rm -rf $(VENV) docs/_build .pytest_cache .hypothesis
