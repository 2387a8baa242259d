"""Every anomaly type found where it is, and not claimed where it is not.

One history per tested configuration holds many scenarios, each on its own keys; it is
checked once (a Spark run is slow to start), and each test asserts one scenario.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, check_history, key_pass
from checkers.config import TestSettings
from checkers.events import collect_events
from checkers.key_pass import KeyCheck, key_pass_frame, shared_facts
from checkers.load import load_history
from checkers.losses import LossRules
from checkers.registry import REGISTRY
from tests.unit.checkers.history_builder import HistoryBuilder
from tests.unit.checkers.outcomes import as_expected, assert_outcome
from tests.unit.checkers.scenarios import (
    ACKS1_SCENARIOS,
    DEFAULT_SCENARIOS,
    PROMISE_SCENARIOS,
    UNCLEAN_SCENARIOS,
    Outcome,
    Scenario,
    build,
)

ALL = CheckConfig(sample=1000)
PROMISE = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"acks": -1},
}
ACKS1 = {**PROMISE, "workload": {"acks": 1}}
UNCLEAN = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 1, "unclean_leader_election": True},
    "workload": {"acks": "all"},
}


def _run(
    root: Path, scenarios: dict[str, Scenario], test_json: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Outcome]]:
    builder = HistoryBuilder(root, test_json=test_json)
    outcomes = build(builder, scenarios)
    return check_history(builder.close(), config=ALL), outcomes


@pytest.fixture(scope="module")
def default_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _run(tmp_path_factory.mktemp("default"), DEFAULT_SCENARIOS, None)


@pytest.fixture(scope="module")
def promise_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _run(tmp_path_factory.mktemp("promise"), PROMISE_SCENARIOS, PROMISE)


@pytest.fixture(scope="module")
def acks1_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _run(tmp_path_factory.mktemp("acks1"), ACKS1_SCENARIOS, ACKS1)


@pytest.fixture(scope="module")
def unclean_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _run(tmp_path_factory.mktemp("unclean"), UNCLEAN_SCENARIOS, UNCLEAN)


@pytest.mark.parametrize("name", sorted(DEFAULT_SCENARIOS))
def test_default_configuration(default_run: Any, name: str) -> None:
    results, outcomes = default_run
    assert_outcome(results, name, outcomes[name])


def _pass_rows(spark: Any, run: Any, *, partitions: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of the per-key pass over `run`'s history, sorted."""
    results, _ = run
    loaded = load_history(spark, results["history"]["parquet"])
    shared = shared_facts(loaded.ops, loaded.mops, loaded.assign)
    frame = key_pass_frame(
        loaded.ops, loaded.mops, loaded.assign, LossRules(TestSettings(), frozenset()),
        [checker for checker in REGISTRY if isinstance(checker, KeyCheck)], 1000, shared,
        collect_events(loaded.events).replication, partitions=partitions,
    )  # fmt: skip
    return sorted((tuple(row) for row in frame.collect()), key=repr)


@pytest.fixture(scope="module")
def default_pass(spark: Any, default_run: Any) -> list[tuple[Any, ...]]:
    """The per-key pass over the default history as the checkers partition it."""
    return _pass_rows(spark, default_run)


def test_pass_partitions_change_nothing(
    spark: Any, default_run: Any, default_pass: list[tuple[Any, ...]]
) -> None:
    """A key's findings are the same whichever keys share its partition: all in one, or
    (nearly) one a partition, as in the pass over a large history."""
    found = default_pass
    assert any(row[1] is not None for row in found)  # anomalies, not only facts
    assert _pass_rows(spark, default_run, partitions=1) == found
    assert _pass_rows(spark, default_run, partitions=37) == found


def test_told_on_the_rows_changes_nothing(
    spark: Any,
    default_run: Any,
    default_pass: list[tuple[Any, ...]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the rows of unsettled operations are told is the same sent with the function
    or, when there are too many such operations, joined onto the rows."""
    found = default_pass  # told with the function
    results, _ = default_run
    loaded = load_history(spark, results["history"]["parquet"])
    told = shared_facts(loaded.ops, loaded.mops, loaded.assign).told
    assert told is not None and told["unsettled"].any() and told["op_seen"].any()
    monkeypatch.setattr(key_pass, "TOLD_WITH_FUNCTION", 0)
    assert shared_facts(loaded.ops, loaded.mops, loaded.assign).told is None
    assert _pass_rows(spark, default_run) == found


def test_default_verdict(default_run: Any) -> None:
    results, _ = default_run
    assert results["valid"] is False
    assert "int-send-skip" not in results["anomaly_types"]
    assert results["allowed_anomaly_types"] == ["int-send-skip"]
    assert results["expected_anomaly_types"] == ["lost-write", "unseen"]
    assert results["config"]["test"]["promises_no_loss"] is False
    assert "lost-acked-write" not in results["checkers"]["delivery"]["counts"]
    counts = results["checkers"]["offsets"]["counts"]
    assert counts == {"inconsistent-offsets": 14, "duplicate": 1}


@pytest.mark.parametrize("name", sorted(PROMISE_SCENARIOS))
def test_configuration_promising_no_loss(promise_run: Any, name: str) -> None:
    results, outcomes = promise_run
    assert_outcome(results, name, outcomes[name])


def test_lost_acked_write_judged(promise_run: Any) -> None:
    results, _ = promise_run
    delivery = results["checkers"]["delivery"]
    assert delivery["counts"]["lost-acked-write"] == 5
    samples = {s["value"]: s for s in delivery["anomalies"]["lost-acked-write"]}
    sample = samples["lostacked-1"]
    assert (sample["offset"], sample["acks"], sample["placement"]) == (1, -1, "middle")
    assert "log_end" not in sample  # a history without log-ends checks as before
    details = delivery["details"]
    assert details["keys_without_complete_final_read"] == [
        "clean",
        "finalpartial",
        "grewpastend",
        "shortofend",
    ]
    assert details["keys_with_complete_final_read"] == 5


def test_a_lost_tail_is_judged_against_the_log_end_the_final_read_recorded(
    promise_run: Any,
) -> None:
    """Writes above the log end the final read read to are lost-acked-writes in the tail;
    a log that ended at 0 lost the whole log."""
    results, _ = promise_run
    cases = results["checkers"]["delivery"]["anomalies"]["lost-acked-write"]
    tail = [c for c in cases if c["key"] == "losttail"]
    assert [(c["offset"], c["placement"], c["log_end"], c["final_read_to"]) for c in tail] == [
        (2, "tail", 2, 1),
        (3, "tail", 2, 1),
    ]
    whole = [c for c in cases if c["key"] == "wholelog"]
    assert [(c["offset"], c["placement"], c["log_end"]) for c in whole] == [
        (0, "whole-log", 0),
        (1, "whole-log", 0),
    ]
    assert "final_read_to" not in whole[0]


@pytest.mark.parametrize("name", sorted(ACKS1_SCENARIOS))
def test_acks1_losses_are_expected(acks1_run: Any, name: str) -> None:
    results, outcomes = acks1_run
    assert_outcome(results, name, as_expected(outcomes[name]))


def test_acks1_history_is_valid(acks1_run: Any) -> None:
    results, _ = acks1_run
    assert results["valid"] is True
    assert results["anomaly_types"] == []
    assert results["checkers"]["delivery"]["expected_counts"] == {"lost-write": 2, "unseen": 3}
    lost = results["checkers"]["delivery"]["expected"]["lost-write"][0]
    assert lost["expected_because"] == "sent with acks=1"


@pytest.mark.parametrize("name", sorted(UNCLEAN_SCENARIOS))
def test_unclean_losses_are_expected_when_allowed(unclean_run: Any, name: str) -> None:
    results, outcomes = unclean_run
    assert_outcome(results, name, as_expected(outcomes[name]))


def test_unclean_loss_window(unclean_run: Any) -> None:
    results, _ = unclean_run
    # Only the loss after the deposed leader rejoined is not the election's.
    assert results["valid"] is False
    assert results["anomaly_types"] == ["inconsistent-offsets", "lost-write", "unseen"]
    section = results["checkers"]["unclean"]
    windows = {w["key"]: w for w in section["expected"]["unclean-loss-window"]}
    assert set(windows) == {
        "unclean",
        "truncated",
        "shortened",
        "recommitted",
        "deposed",
        "deposedread",
        "deposedinfo",
        "logend",
    }
    assert windows["deposed"]["lost"] == 2
    assert windows["deposed"]["lost_values"] == ["deposed-1", "deposed-deposed"]
    assert windows["deposedread"]["lost_values"] == ["deposedread-1"]
    assert windows["deposedinfo"]["lost_values"] == ["deposedinfo-deposed"]
    assert windows["deposedinfo"]["offsets"] == [2, 2]
    assert windows["logend"]["lost_values"] == ["logend-2", "logend-3"]
    window = windows["unclean"]
    assert window["offsets"] == [2, 3]
    assert window["lost"] == 2
    assert window["lost_values"] == ["unclean-2", "unclean-3"]
    assert window["window"][1] == window["time"]
    assert section["details"] == {"leader_elections": 11, "unclean_elections": 10}
    steps = results["checkers"]["order"]["expected"]
    (send,) = steps["nonmonotonic-send"]
    assert send["key"] == "truncated" and send["offsets"] == [3, 2]
    assert "unclean-loss window" in send["expected_because"]
    polls = {poll["key"]: poll for poll in steps["nonmonotonic-poll"]}
    assert polls["truncated"]["offsets"] == [3, 0]
    assert polls["shortened"]["offsets"] == [3, 0]
    assert "truncated the log between" in polls["shortened"]["expected_because"]


def test_acknowledged_writes_lost_are_counted_once(promise_run: Any) -> None:
    """A write lost under three names (lost-acked-write, lost-write, unseen) is one
    acknowledged write lost; an acks=1 one is allowed; the totals are the keys' sums."""
    results, _ = promise_run
    summary = results["summary"]
    keys = summary["keys"]
    assert keys["lostacked"] == {"acknowledged_lost": 1, "allowed_lost": 0}
    assert keys["finalacks1"] == {"acknowledged_lost": 1, "allowed_lost": 1}
    assert keys["finalpartial"] == {"acknowledged_lost": 1, "allowed_lost": 0}
    assert keys["losttail"] == {"acknowledged_lost": 2, "allowed_lost": 0}
    assert keys["wholelog"] == {"acknowledged_lost": 2, "allowed_lost": 0}
    assert keys["shortofend"] == {"acknowledged_lost": 3, "allowed_lost": 0}
    assert "clean" not in keys and "finalok" not in keys
    assert summary["acknowledged_lost"] == sum(k["acknowledged_lost"] for k in keys.values())
    assert summary["allowed_lost"] == sum(k["allowed_lost"] for k in keys.values())


def test_losses_the_configuration_allows_are_all_allowed(acks1_run: Any) -> None:
    results, _ = acks1_run
    summary = results["summary"]
    assert summary["acknowledged_lost"] > 0
    assert summary["allowed_lost"] == summary["acknowledged_lost"]
