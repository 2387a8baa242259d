# squall: `make demo` runs the main job, `make test` the tests; both set up what they need.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test lint typecheck unit integration bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m squall demo

test: setup lint typecheck
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

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
