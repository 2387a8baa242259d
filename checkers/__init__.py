"""Spark checkers over histories: one concept per module, one shared SparkSession.

    from checkers import CheckConfig, check_history
    results = check_history("store/latest", config=CheckConfig(sample=5))

`results` is the results.json document of docs/results.md. Modules: `session` (the shared
SparkSession), `load` (path -> Parquet tables), `evidence` and `dense` (reads, writes,
commitment, the dense offset index), `checker` (the Checker protocol and the context every
checker is given), `registry` (the checkers a check composes), the checkers `offsets`,
`delivery`, `order`, `consumer_groups`, `unclean`, plus `losses` (expected losses),
`stats`, `results` and `check`. A new checker is a module with a `Checker`, registered:

    checkers.REGISTRY.register(MyChecker())
"""

from checkers.check import check_history, check_loaded
from checkers.checker import CheckContext, Checker
from checkers.config import CheckConfig, ExpectedLoss, TestSettings, read_test_settings
from checkers.errors import (
    CheckerDefinitionError,
    CheckerError,
    HistoryNotFoundError,
    SparkSessionConflictError,
    SparkUnavailableError,
    TestConfigError,
)
from checkers.load import LoadedHistory, load_history, locate_history
from checkers.registry import REGISTRY, CheckerRegistry
from checkers.results import CheckerReport, write_results
from checkers.session import SparkSettings, get_spark, stop_spark

__all__ = [
    "REGISTRY",
    "CheckConfig",
    "CheckContext",
    "Checker",
    "CheckerDefinitionError",
    "CheckerError",
    "CheckerRegistry",
    "CheckerReport",
    "ExpectedLoss",
    "HistoryNotFoundError",
    "LoadedHistory",
    "SparkSessionConflictError",
    "SparkSettings",
    "SparkUnavailableError",
    "TestConfigError",
    "TestSettings",
    "check_history",
    "check_loaded",
    "get_spark",
    "load_history",
    "locate_history",
    "read_test_settings",
    "stop_spark",
    "write_results",
]
