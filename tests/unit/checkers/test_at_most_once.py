"""Consumption at most once (test.json's `workload.consumer_mode`): the group commits what
it fetched before delivering it, so a commit past a value nobody in the group consumed is
expected there, and stays an anomaly at least once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, TestConfigError, check_history, read_test_settings
from checkers.consumer_groups import AT_MOST_ONCE
from tests.unit.checkers.history_builder import HistoryBuilder
from tests.unit.checkers.scenarios import at_least_once_violation

ALL = CheckConfig(sample=100)


def _check(root: Path, mode: str) -> Any:
    builder = HistoryBuilder(root, test_json={"workload": {"acks": -1, "consumer_mode": mode}})
    at_least_once_violation(builder, "k")
    return check_history(builder.close(), config=ALL)


def test_at_most_once_a_commit_past_an_unconsumed_value_is_expected(
    spark: Any, tmp_path: Path
) -> None:
    results = _check(tmp_path, "at-most-once")
    assert results["valid"] is True
    assert results["expected_anomaly_types"] == ["at-least-once-violation"]
    report = results["checkers"]["consumer_groups"]
    (case,) = report["expected"]["at-least-once-violation"]
    assert case["expected_because"] == AT_MOST_ONCE
    assert results["config"]["test"]["consumer_mode"] == "at-most-once"
    assert any("at-most-once" in note for note in results["config"]["allowances"])


def test_at_least_once_it_stays_an_anomaly(spark: Any, tmp_path: Path) -> None:
    results = _check(tmp_path, "at-least-once")
    assert results["valid"] is False
    assert results["anomaly_types"] == ["at-least-once-violation"]


def test_an_unknown_consumer_mode_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    path.write_text('{"workload": {"consumer_mode": "exactly-once"}}')
    with pytest.raises(TestConfigError, match="consumer_mode is 'exactly-once', expected one of"):
        read_test_settings(path)
