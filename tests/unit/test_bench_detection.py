"""bench/detection.py's summary of the safe configuration: only an invalid run is a false
alarm; a run with losses the configuration allows (the storage family's power losses under
Kafka's default flush policy) is counted apart."""

from __future__ import annotations

import importlib

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
