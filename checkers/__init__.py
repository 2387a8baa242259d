"""Spark checkers over histories: one concept per module, one shared SparkSession.

    from checkers import CheckConfig, check_history
    results = check_history("store/latest", config=CheckConfig(sample=5))

`results` is the results.json document of docs/results.md. Modules: `session` (the shared
SparkSession), `load` (path -> Parquet tables), `evidence` and `dense` (reads, writes,
commitment, the dense offset index), `checker` (the Checker protocol and the context every
checker is given), `registry` (the checkers a check composes), the checkers `offsets`,
`delivery`, `order`, `consumer_groups`, `consumer_anchors`, `unclean`, `conformance`, `replicas`
(with `events`, the SUT events each key is told), plus `losses` (expected losses) and
`power_losses` (writes lost with the power of every replica that held them),
`stats`, `results` and `check`. A new checker is a module with a `Checker`, registered:

    checkers.REGISTRY.register(MyChecker())
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_LAZY = {
    "CheckConfig": "checkers.config",
    "CheckContext": "checkers.checker",
    "Checker": "checkers.checker",
    "CheckerDefinitionError": "checkers.errors",
    "CheckerError": "checkers.errors",
    "CheckerRegistry": "checkers.registry",
    "CheckerReport": "checkers.results",
    "ExpectedLoss": "checkers.config",
    "HistoryNotFoundError": "checkers.errors",
    "LoadedHistory": "checkers.load",
    "REGISTRY": "checkers.registry",
    "SparkSessionConflictError": "checkers.errors",
    "SparkSettings": "checkers.session",
    "SparkUnavailableError": "checkers.errors",
    "TestConfigError": "checkers.errors",
    "TestSettings": "checkers.config",
    "check_history": "checkers.check",
    "check_loaded": "checkers.check",
    "get_spark": "checkers.session",
    "load_history": "checkers.load",
    "locate_history": "checkers.load",
    "read_test_settings": "checkers.config",
    "stop_spark": "checkers.session",
    "write_results": "checkers.results",
}
"""Where each public name lives: imported on first use, so that `checkers.catalogue` (and
any module that needs no Spark) is imported without pyspark."""

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'checkers' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
