"""results.json assembly, fault intervals, loss rules and Spark settings (no Spark needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

from checkers.config import TestSettings
from checkers.fault_intervals import fault_intervals
from checkers.findings import Finding
from checkers.losses import LossRules
from checkers.results import (
    EXPLAINED_CASES,
    CheckerReport,
    Collected,
    assemble_results,
    decode_values,
    explain_anomalies,
    worst,
    write_results,
)
from checkers.session import SparkSettings


def _finding(checker: str, *names: str, allowed: tuple[str, ...] = ()) -> Finding:
    return Finding(checker, names, MagicMock(), ("value",), frozenset(allowed))


def _assemble(collected: dict[tuple[str, str, bool], Collected], *, has_ok: bool) -> Any:
    reports = [
        CheckerReport("delivery", [_finding("delivery", "lost-write", "unseen")]),
        CheckerReport(
            "order", [_finding("order", "int-send-skip", "poll-skip", allowed=("int-send-skip",))]
        ),
    ]
    return assemble_results(
        reports, collected, has_ok=has_ok, stats={}, config={}, history={}, notes=["n"]
    )


def test_worst_validity() -> None:
    assert worst([True, "unknown", True]) == "unknown"
    assert worst([True, False, "unknown"]) is False
    assert worst([]) is True


def test_clean_history_is_valid_and_counts_every_judged_type() -> None:
    results = _assemble({}, has_ok=True)
    assert results["valid"] is True
    assert results["checkers"]["delivery"]["counts"] == {"lost-write": 0, "unseen": 0}
    assert results["anomaly_types"] == []


def test_nothing_ok_is_unknown_unless_something_is_wrong() -> None:
    assert _assemble({}, has_ok=False)["valid"] == "unknown"
    sample = {"key": "k", "value": "1"}
    found = {("delivery", "lost-write", False): Collected(3, [sample])}
    results = _assemble(found, has_ok=False)
    assert results["valid"] is False
    assert results["checkers"]["delivery"]["counts"]["lost-write"] == 3
    assert results["checkers"]["order"]["valid"] == "unknown"


def test_allowed_and_expected_types_do_not_invalidate() -> None:
    found = {
        ("order", "int-send-skip", False): Collected(2, []),
        ("delivery", "unseen", True): Collected(5, [{"key": "k"}]),
    }
    results = _assemble(found, has_ok=True)
    assert results["valid"] is True
    assert results["allowed_anomaly_types"] == ["int-send-skip"]
    assert results["expected_anomaly_types"] == ["unseen"]
    assert results["checkers"]["delivery"]["expected_counts"] == {"unseen": 5}
    assert results["checkers"]["order"]["counts"]["int-send-skip"] == 2


def test_values_are_decoded_from_their_json_text() -> None:
    detail = {"value": '"v-1"', "values": ["7", None, '"x"'], "offset": 3}
    decoded = decode_values(detail, ("value", "values"))
    assert decoded == {"value": "v-1", "values": [7, None, "x"], "offset": 3}


def test_write_results_is_atomic(tmp_path: Path) -> None:
    target = write_results({"valid": True}, tmp_path / "results.json")
    assert json.loads(target.read_text()) == {"valid": True}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_fault_intervals() -> None:
    s = 1_000_000_000
    events = [
        (0, 1 * s, "start-partition", '"majority"'),
        (1, 2 * s, "start-partition", '{"n1":["n2"]}'),
        (2, 3 * s, "kill", '["n1"]'),
        (3, 5 * s, "stop-partition", "null"),
        (4, 6 * s, "stop-partition", "null"),
        (5, 7 * s, "bounce", '["n2"]'),
        (6, 8 * s, "start", '["n1"]'),
        (7, 9 * s, "pause", '["n3"]'),
        (8, 9 * s + 1, "resume", '["n9"]'),
        (9, 10 * s, "start-netem", "{}"),
    ]
    intervals, instants = fault_intervals(events)
    spans = [(i.fault, i.start // s, None if i.end is None else i.end // s) for i in intervals]
    assert spans == [
        ("start-partition", 1, 6),
        ("kill", 3, 8),
        ("pause", 9, 9),
        ("start-netem", 10, None),
    ]
    assert intervals[0].value == "majority"
    assert [(i["fault"], i["index"]) for i in instants] == [("bounce", 5)]


def test_fault_intervals_pair_heals_with_their_targets() -> None:
    s = 1_000_000_000
    events = [
        (0, 1 * s, "pause", '{"targets": ["n3"]}'),
        (1, 2 * s, "pause", '{"targets": ["n1"]}'),
        (2, 3 * s, "resume", '{"targets": ["n3"]}'),
        (3, 4 * s, "kill", '{"targets": ["n2"]}'),
        (4, 9 * s, "resume", '{"targets": ["n1"]}'),
        (5, 10 * s, "start", "{}"),
    ]
    intervals, instants = fault_intervals(events)
    spans = [(i.fault, i.start // s, None if i.end is None else i.end // s) for i in intervals]
    assert spans == [("pause", 1, 3), ("pause", 2, 9), ("kill", 4, 10)]
    assert instants == []


def test_a_kill_ends_the_pause_of_the_process_it_kills() -> None:
    """A paused broker killed is paused no more: its pause ends at the kill, not at a later
    resume of the same node (as when a scenario kills a paused leader)."""
    s = 1_000_000_000
    events = [
        (0, 8 * s, "pause", '{"targets": ["n2"]}'),
        (1, 9 * s, "pause", '{"targets": ["n3"]}'),
        (2, 18 * s, "kill", '{"targets": ["n2"]}'),
        (3, 27 * s, "start", '{"targets": ["n2"]}'),
        (4, 30 * s, "power-loss", '{"targets": ["n3"]}'),
        (5, 115 * s, "pause", '{"targets": ["n2"]}'),
        (6, 125 * s, "resume", '{"targets": ["n2"]}'),
    ]
    intervals, instants = fault_intervals(events)
    spans = [(i.fault, i.start // s, None if i.end is None else i.end // s) for i in intervals]
    assert spans == [
        ("pause", 8, 18),
        ("pause", 9, 30),
        ("kill", 18, 27),
        ("power-loss", 30, None),
        ("pause", 115, 125),
    ]
    assert instants == []


def test_a_power_loss_or_a_crash_to_damage_files_lasts_until_the_start() -> None:
    """The broker is down from a power loss, or a crash to damage its files, to its start;
    a file damaged under a running broker (`crash: false`) is an instant."""
    s = 1_000_000_000
    events = [
        (0, 1 * s, "power-loss", '{"targets": ["n1"]}'),
        (1, 2 * s, "corrupt-file", '{"targets": ["n2"], "file": "log"}'),
        (2, 3 * s, "corrupt-file", '{"targets": ["n3"], "crash": false}'),
        (3, 4 * s, "start", '{"targets": ["n1"]}'),
        (4, 5 * s, "kill", '{"targets": ["n3"]}'),
        (5, 6 * s, "truncate-file", '{"targets": ["n1"]}'),
        (6, 7 * s, "start", "{}"),
    ]
    intervals, instants = fault_intervals(events)
    spans = [(i.fault, i.start // s, None if i.end is None else i.end // s) for i in intervals]
    assert spans == [
        ("power-loss", 1, 4),
        ("corrupt-file", 2, 7),
        ("kill", 5, 7),
        ("truncate-file", 6, 7),
    ]
    assert [(i["fault"], i["index"]) for i in instants] == [("corrupt-file", 2)]


def test_loss_rules() -> None:
    assert LossRules(TestSettings(acks=1), frozenset()).default_acks == 1
    assert LossRules(TestSettings(), frozenset({"acks0"})).default_acks == 0
    assert LossRules(TestSettings(acks=-1), frozenset({"acks1"})).default_acks == -1
    assert LossRules(TestSettings(unclean_leader_election=True), frozenset()).unclean_allowed
    assert LossRules(TestSettings(), frozenset({"unclean"})).unclean_allowed
    assert not LossRules(TestSettings(unclean_leader_election=False), frozenset()).unclean_allowed


@pytest.mark.parametrize(
    ("master", "cores", "partitions"),
    [
        ("local", 1, "2"),
        ("local[3]", 3, "6"),
        ("local[2,4]", 2, "4"),
        ("spark://h:7077", None, "200"),
    ],
)
def test_spark_settings(master: str, cores: int | None, partitions: str) -> None:
    settings = SparkSettings(master=master, java_options="-Xss4m", extra={"a.b": "c"})
    if cores is not None:
        assert settings.local_cores() == cores
    conf = settings.conf()
    assert conf["spark.sql.shuffle.partitions"] == partitions
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.driver.extraJavaOptions"].endswith("-Xss4m")
    assert conf["a.b"] == "c"
    assert ("spark.driver.host" in conf) == settings.is_local
    assert conf.get("spark.pyspark.python") == (sys.executable if settings.is_local else None)
    assert conf["spark.sql.adaptive.enabled"] == ("false" if settings.is_local else "true")
    java = conf["spark.driver.extraJavaOptions"].split()
    assert ("-XX:+UseParallelGC" in java) == settings.is_local
    assert conf["spark.sql.requireAllClusterKeysForCoPartition"] == "false"
    bloom = conf.get("spark.sql.optimizer.runtime.bloomFilter.enabled")
    assert bloom == ("false" if settings.is_local else None)


def test_explanations_describe_each_anomaly_type_found_once() -> None:
    lost = {"key": "q-0", "value": 4, "offset": 2, "writer": 9, "status": "ok", "acks": -1}
    sections = {
        "delivery": {
            "anomalies": {"lost-write": [lost] * 5, "unseen": []},
            "expected": {"unseen": [{"key": "q-0", "value": 5, "offset": 3}]},
        },
        "order": {"anomalies": {"lost-write": [lost]}},
    }
    explained = explain_anomalies(sections)
    assert list(explained) == ["lost-write", "unseen"]
    entry = explained["lost-write"]
    assert entry["checker"] == "delivery" and entry["doc"] == "docs/anomalies/lost-write.md"
    assert entry["meaning"].startswith("A write known to have happened")
    assert len(entry["cases"]) == EXPLAINED_CASES
    assert entry["cases"][0]["lines"] == [10] and entry["cases"][0]["offsets"] == [2]
    assert explained["unseen"]["cases"][0]["key"] == "q-0"
    assert explain_anomalies({"x": {"anomalies": {"made-up": [{"odd": 1}]}}})["made-up"]["cases"]
