"""bench/detection.py's summary of the safe configuration: only an invalid run is a false
alarm; a run with losses the configuration allows (the storage family's power losses under
Kafka's default flush policy) is counted apart."""

from __future__ import annotations

import importlib
from typing import Any

import pytest


def test_the_safe_summary_counts_invalid_runs_as_false_alarms_and_allowed_losses_apart() -> None:
    try:
        detection = importlib.import_module("bench.detection")
    except ImportError as err:
        pytest.fail(f"bench.detection does not import: {err}")

    def record(seed: int, verdict: str, expected: list[str]) -> object:
        return detection.RunRecord(
            config=detection.SAFE,
            seed=seed,
            run_dir=None,
            verdict=verdict,
            detected=verdict in ("invalid", "allowed-losses"),
            anomaly_types=["lost-write"] if verdict == "invalid" else [],
            expected_anomaly_types=expected,
            first_detection_s=None,
            leader_elections=None,
            failovers=None,
            availability=None,
            seconds=1.0,
        )

    records = [
        record(1, "valid", []),
        record(2, "allowed-losses", ["lost-write"]),
        record(3, "invalid", []),
        record(4, "failed", []),
    ]
    summary = detection.summarise(detection.SAFE, records)
    assert (summary["false_alarms"], summary["allowed_loss_runs"]) == (1, 1)
    assert summary["detected"] == 2
    assert "false_alarms" not in detection.summarise("acks1", records)


def test_safe_variants_are_judged_by_false_alarms_and_every_disks_bench_case_loads() -> None:
    detection = importlib.import_module("bench.detection")
    assert detection.is_safe("safe") and detection.is_safe("safe-flush1")
    assert not detection.is_safe("safer") and not detection.is_safe("misr1")
    from squall.campaign import load_campaign

    _name, cases = load_campaign(detection.ZOO.parent / "disks-bench.toml")
    assert [c.spec.name for c in cases] == ["safe-flush1", "rack-power-loss", "misr1", "safe"]
    flush1 = cases[0].spec
    assert flush1.broker == {"log.flush.interval.messages": "1"}
    assert flush1.nemesis is not None and "stagger" in flush1.nemesis.generator


def test_a_configuration_is_found_by_its_own_allowance_not_the_flush_policys() -> None:
    """acks=1 found by acks=1 losses, misr1 by an ISR of one's; a flush-policy loss from
    the default mix's power losses finds neither; hw-truncation only when invalid, and an
    invalid misr1 run is no finding."""
    detection = importlib.import_module("bench.detection")
    power = "lost with the power of n1, n2, n3 at 4.3 s; log.flush.interval.messages=..."
    alone = (
        "acknowledged by n1 alone (ISR of one, min.insync.replicas=1); lost with the power "
        "of n1 at 31.2 s (...)"
    )
    samples = [{"expected_because": power}, {"expected_because": "sent with acks=1"}]
    assert detection.allowed_by(samples) == {"flush-policy": 1, "acks": 1}
    assert detection.allowed_by([{"expected_because": alone}, {}]) == {"min-isr-1": 1}

    def record(verdict: str, allowed: dict[str, int]) -> object:
        return detection.RunRecord(
            config="x",
            seed=1,
            run_dir=None,
            verdict=verdict,
            detected=verdict != "valid",
            anomaly_types=[],
            expected_anomaly_types=[],
            first_detection_s=None,
            leader_elections=None,
            failovers=None,
            availability=None,
            seconds=1.0,
            allowed_by=allowed,
        )

    flush_only = record("allowed-losses", {"flush-policy": 3})
    for config in ("acks1", "misr1", "hw-truncation", "unclean"):
        assert not detection.found_its_bug(config, flush_only), config
    assert detection.found_its_bug("rack-power-loss", flush_only)
    assert detection.found_its_bug("acks1", record("allowed-losses", {"acks": 2}))
    assert detection.found_its_bug("misr1", record("allowed-losses", {"min-isr-1": 1}))
    assert detection.found_its_bug("hw-truncation", record("invalid", {}))
    # An invalid run of a configuration that exists to show an allowance is no finding.
    assert not detection.found_its_bug("misr1", record("invalid", {"flush-policy": 3}))
    summary = detection.summarise("acks1", [flush_only, record("allowed-losses", {"acks": 1})])
    assert (summary["found"], summary["invalid"], summary["detected"]) == (1, 0, 2)
    summary = detection.summarise("misr1", [record("invalid", {"min-isr-1": 0})])
    assert (summary["found"], summary["invalid"]) == (0, 1)


def test_reach_is_counted_by_instance_and_the_kept_send_rate_is_summarised() -> None:
    """An instance reached in its second attempt counts once, as reached; the kept send rate
    comes from results.json's live rate."""
    detection = importlib.import_module("bench.detection")
    runs = [
        {"scenario": "a", "instance": 0, "attempt": 1, "reached": False},
        {"scenario": "a", "instance": 0, "attempt": 2, "reached": True},
        {"scenario": "b", "instance": 1, "attempt": 1, "reached": False},
        {"scenario": "b", "instance": 1, "attempt": 2, "reached": False},
        {"scenario": "a", "instance": 2, "attempt": 1, "reached": None},  # cut off
        {"scenario": "a", "instance": 3, "attempt": 1, "reached": True},
    ]

    def record(kept: float) -> Any:
        results = {
            "valid": True,
            "scenarios": {"runs": runs},
            "stats": {"live_rate": {"kept": {"send": kept / 2, "send_writable": kept}}},
        }
        report = detection.RunReport.of(1, None, results, exit_code=0, seconds=1.0)
        return detection._record("safe", report, results, None, 1.0)

    first = record(0.6)
    assert first.scenario_instances == {"a": [2, 2], "b": [0, 1]}
    assert (first.send_kept, first.send_kept_writable) == (0.3, 0.6)
    assert first.scenarios_reached == "2/5"
    summary = detection.summarise("safe", [first, record(0.4), record(0.8)])
    assert summary["scenario_instances_reached"] == {"a": [6, 6], "b": [0, 3]}
    assert (summary["median_send_kept_writable"], summary["min_send_kept_writable"]) == (0.6, 0.4)
