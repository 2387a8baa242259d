"""A verdict in words says what was found and what the configuration promised or allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from squall.report.verdict import describe_faults, explain, leader_elections, nemesis_operations

SAFE = {
    "source": "test.json",
    "acks": -1,
    "replication_factor": 3,
    "min_insync_replicas": 2,
    "unclean_leader_election": False,
    "promises_no_loss": True,
}


def results(valid: Any, *, test: dict[str, Any] = SAFE, **fields: Any) -> dict[str, Any]:
    return {"valid": valid, "config": {"test": test, "allowances": []}, **fields}


def test_invalid_names_the_anomalies_and_the_promise() -> None:
    text = explain(
        results(
            False,
            anomaly_types=["lost-acked-write"],
            checkers={"delivery": {"counts": {"lost-acked-write": 3, "unseen": 0}}},
        )
    )
    assert text.startswith("INVALID: lost-acked-write 3 under")
    assert "acks=all, RF 3, min.insync 2, unclean election off" in text
    assert "promised that no acknowledged write is lost" in text


def test_allowed_losses_are_valid_and_say_why() -> None:
    acks1 = {**SAFE, "acks": 1, "min_insync_replicas": 1, "promises_no_loss": False}
    found = results(
        True,
        test=acks1,
        expected_anomaly_types=["lost-write"],
        checkers={"delivery": {"expected_counts": {"lost-write": 7}}},
    )
    found["config"]["allowances"] = ["losses of acks=0/1 writes are expected"]
    text = explain(found, elections=12)
    assert text.startswith("VALID, with losses the configuration allows: lost-write 7 through")
    assert "through 12 leader elections" in text and "acks=0/1 writes are expected" in text


def test_writes_lost_lead_each_counted_once() -> None:
    """One loss shows under several types; the verdict leads with the writes lost."""
    invalid = results(
        False,
        anomaly_types=["lost-acked-write", "lost-write", "unseen"],
        checkers={"delivery": {"counts": {"lost-acked-write": 42, "lost-write": 42, "unseen": 42}}},
        summary={"acknowledged_lost": 42, "allowed_lost": 0, "keys": {}},
    )
    assert explain(invalid).startswith(
        "INVALID: 42 acknowledged writes lost; cases by type: lost-acked-write 42, lost-write 42, "
        "unseen 42 under acks=all"
    )
    acks1 = {**SAFE, "acks": 1, "min_insync_replicas": 1, "promises_no_loss": False}
    allowed = results(
        True,
        test=acks1,
        expected_anomaly_types=["lost-write", "unseen"],
        checkers={"delivery": {"expected_counts": {"lost-write": 761, "unseen": 761}}},
        summary={"acknowledged_lost": 761, "allowed_lost": 761, "keys": {}},
    )
    assert explain(allowed).startswith(
        "VALID, with losses the configuration allows: 761 acknowledged writes lost; cases by type: "
        "lost-write 761, unseen 761 under acks=1"
    )
    allowed["summary"] = {"acknowledged_lost": 1, "allowed_lost": 0, "keys": {}}
    assert "1 acknowledged write lost; cases by type" in explain(allowed)


def test_clean_and_unknown() -> None:
    assert explain(results(True), elections=3).startswith(
        "VALID: every acknowledged write was read back through 3 leader elections"
    )
    assert explain(results("unknown")).startswith("UNKNOWN")
    no_test = explain({"valid": True, "config": {"test": {"source": None}}})
    assert "no test.json" in no_test


def test_faults_and_elections_from_the_history(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    ops = [
        {
            "index": 0,
            "time": 1,
            "process": "nemesis",
            "type": "info",
            "f": "kill",
            "value": {"targets": ["n1"], "scenario": "zombie-leader"},
        },
        {
            "index": 1,
            "time": 2,
            "process": "sut",
            "type": "info",
            "f": "leader-election",
            "value": {"key": "t-0", "leader": 2},
        },
        {
            "index": 2,
            "time": 3,
            "process": "nemesis",
            "type": "info",
            "f": "start",
            "value": {"targets": ["n1"], "scenario": "zombie-leader"},
        },
    ]
    history.write_text("".join(json.dumps(op) + "\n" for op in ops))
    assert leader_elections(history) == 1
    applied = nemesis_operations(history)
    test = {
        "profile": "kafka-2.4",
        "nemesis": {
            "generator": "default",
            "detectors": {"session_timeout_s": 6.0, "replica_lag_s": 10.0},
        },
    }
    text = describe_faults(test, applied)
    assert text == (
        "faults: the default mix of scenarios; 2 nemesis operations in 1 scenarios "
        "(zombie-leader); profile kafka-2.4: session 6 s, lag 10 s"
    )
    for name, asked in (
        ("default-with-disks", "the default mix of scenarios"),
        ("default-without-disks", "the default mix of scenarios without the storage family"),
    ):
        named = {"nemesis": {"generator": name}}
        assert describe_faults(named, []) == f"faults: {asked}; 0 nemesis operations"
    assert describe_faults({"nemesis": None}, []) == "faults: none (the nemesis was off)"
    assert leader_elections(tmp_path / "missing.jsonl") is None


def test_an_interrupted_run_is_never_valid() -> None:
    import signal

    from squall.report.junit import render_junit
    from squall.runner import interrupted_results

    marked = interrupted_results(results(True, notes=[]), signal.SIGTERM)
    assert marked["valid"] == "unknown" and marked["interrupted"] is True
    assert "SIGTERM" in marked["notes"][-1]
    assert explain(marked).startswith("INTERRUPTED")
    assert "interrupted" in render_junit(marked, suite="t")
    invalid = interrupted_results(results(False, anomaly_types=["lost-write"]), None)
    assert invalid["valid"] is False  # what it found still counts
    assert "lost-write" in explain(invalid)


def test_a_run_junit_carries_time_properties_and_counted_failures() -> None:
    from xml.etree import ElementTree

    from squall.report.junit import render_junit

    found = results(False, anomaly_types=["lost-write"])
    found["checkers"] = {
        "delivery": {
            "valid": False,
            "counts": {"lost-write": 3, "unseen": 0},
            "anomalies": {"lost-write": [{"key": "k-0", "value": 4, "offset": 2, "writer": 9}]},
        },
        "offsets": {"valid": True, "counts": {}, "anomalies": {}},
    }
    found["stats"] = {"duration_s": 121.04}
    test = {"seed": 7, "runtime": "docker", "nodes": 3, "workload": {"acks": 1}, "topic": {}}
    suite = ElementTree.fromstring(render_junit(found, suite="t", test=test, run_dir="/s/t/1"))
    assert suite.get("time") == "121.0" and suite.get("tests") == "2"
    assert suite.get("failures") == "1"
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["seed"] == "7" and properties["runtime"] == "docker"
    assert properties["replay"] == "squall replay /s/t/1"
    assert '"acks": 1' in properties["spec"]
    failure = suite.find("testcase[@name='delivery']/failure")
    assert failure.get("message").startswith("lost-write (3): A write known to have happened")
    assert "docs/anomalies/lost-write.md" in failure.text
    assert "line 10" in failure.text  # the writer, index 9
