# squall: `make demo` runs the main job, `make test` the tests; both set up what they need.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Two pytest-xdist workers, each test module whole on one (its module-scoped clusters stay
# one per module) and the Docker tests all on one (tests/conftest.py). Most tests wait on
# brokers, ZooKeeper, Spark or containers, so two workers finish the suite in well under
# half the serial time on two cores. PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

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
	$(PYTEST) $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The architecture's import contracts ([tool.importlinter] in pyproject.toml).
imports: setup
	$(VENV)/bin/lint-imports --no-cache

typecheck: setup
	$(PY) -m mypy squall system_under_test nemesis workloads histories checkers

unit: setup
	$(PYTEST) tests/unit $(PYTEST_ARGS)

integration: setup
	$(PYTEST) tests/integration $(PYTEST_ARGS)

bench: setup
	$(PY) bench/log_throughput.py
	$(PY) bench/produce_throughput.py

clean:
	rm -rf build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
