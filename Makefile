# squall: `make demo` runs the main job, `make test` the tests; both set up what they need.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test lint imports typecheck unit integration bench clean

setup:
	@bash scripts/setup.sh

# Two 60-second real tests on the default runtime (docker where an engine answers, else
# local processes) under the default mix of fault scenarios: the safe configuration
# (acks=-1, RF 3, min.insync 2) and acks=1, one after the other, each verdict explained
# and each report named.
demo: setup
	$(PY) -m squall campaign campaigns/demo.toml

test: setup lint imports typecheck
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The architecture's import contracts ([tool.importlinter] in pyproject.toml).
imports: setup
	$(VENV)/bin/lint-imports --no-cache

typecheck: setup
	$(PY) -m mypy squall system_under_test nemesis workloads histories checkers

unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

integration: setup
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

bench: setup
	$(PY) bench/log_throughput.py
	$(PY) bench/produce_throughput.py

clean:
	rm -rf build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
