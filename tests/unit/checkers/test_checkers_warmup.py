"""The history `squall spark start` checks to warm its server: valid, and it goes through
every checker's paths that a real history does (indeterminate and failed sends, consumer
groups, commits, a final read, a fault and an election)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.check import check_history
from checkers.warmup import KEYS, write_warmup_history


def test_the_warmup_history_checks_valid_through_every_path(spark: Any, tmp_path: Path) -> None:
    run = write_warmup_history(tmp_path / "run")
    assert run == tmp_path / "run" and (run / "test.json").is_file()

    results = check_history(run)

    assert results["valid"] is True, results["anomaly_types"]
    assert results["anomaly_types"] == [] and results["expected_anomaly_types"] == []
    by_f = results["stats"]["by_f"]
    assert by_f["send"]["ok"] > 0 and by_f["send"]["info"] > 0 and by_f["send"]["fail"] > 0
    assert by_f["poll"]["ok"] > 0 and by_f["commit"]["ok"] > 0
    assert by_f["assign"]["ok"] == 2 and by_f["subscribe"]["ok"] == 1
    delivery = results["checkers"]["delivery"]["details"]
    assert delivery["lost_acked_write"] == "judged"
    assert delivery["keys_with_complete_final_read"] == len(KEYS)
    assert results["checkers"]["unclean"]["details"]["leader_elections"] == 1
    assert results["stats"]["events"] == {"nemesis": 2, "sut": 1}
    assert [fault["fault"] for fault in results["stats"]["faults"]] == ["start-partition"]


def test_the_warmup_history_is_the_same_each_time(tmp_path: Path) -> None:
    first = write_warmup_history(tmp_path / "a") / "history.jsonl"
    second = write_warmup_history(tmp_path / "b") / "history.jsonl"
    assert first.read_bytes() == second.read_bytes()
