"""The exceptions raised by `checkers`, one class per kind of problem.

Malformed histories raise the `histories` package's own errors (`HistoryFormatError` with
the file and line, `JepsenImportError`, `PairingError`); these classes cover the rest.
"""

from __future__ import annotations


class CheckerError(Exception):
    """Base class of every error raised by the `checkers` package."""


class HistoryNotFoundError(CheckerError, FileNotFoundError):
    """The path given names no history that the checkers can read."""


class TestConfigError(CheckerError, ValueError):
    """A run's `test.json` cannot be read, or a field the checkers use has the wrong type."""

    __test__ = False  # not a pytest test class, despite the name


class SparkUnavailableError(CheckerError, RuntimeError):
    """Spark could not be started or reached: an infrastructure failure, not a finding."""


class SparkSessionConflictError(CheckerError, RuntimeError):
    """A SparkSession with another master is already running in this process."""


class CheckerDefinitionError(CheckerError, ValueError):
    """A checker breaks the `Checker` protocol: its name is taken, or its report is named
    otherwise or holds anomaly types it did not declare."""
