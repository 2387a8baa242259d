"""A real run (local runtime, a broker killed and restarted) reads every replica of every key
off its disk after the final read: one or more `replica-read` lines per replica and key,
whose records agree with what the final read saw below the high watermark, and the
`replicas` checker judges them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

PARTITIONS = 2
REPLICATION = 3


def test_a_run_records_every_replica_of_every_key(tmp_path: Path) -> None:
    env = {**os.environ, "SQUALL_HOME": str(tmp_path / "home"), "COLUMNS": "100"}
    store = tmp_path / "store"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "squall",
            "run",
            "--runtime",
            "local",
            "--name",
            "replicas",
            "--nodes",
            "3",
            "--partitions",
            str(PARTITIONS),
            "--replication-factor",
            str(REPLICATION),
            "--time-limit",
            "8",
            "--faults",
            "kill",
            "--rate",
            "100",
            "--store",
            str(store),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    run_dir = next(store.glob("replicas/2*"))
    assert (run_dir / "history.jsonl").exists(), run.stderr[-3000:]
    lines = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    reads = [op for op in lines if op["f"] == "replica-read"]
    by_replica: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for op in reads:
        assert op["process"] == "sut" and op["type"] == "info" and op["final"] is True
        by_replica[(op["value"]["key"], op["value"]["broker"])].append(op["value"])
    keys = {f"{op['value']['key']}" for op in reads}
    assert len(keys) == PARTITIONS
    assert sorted(by_replica) == sorted((k, b) for k in keys for b in (1, 2, 3))
    final_reads: dict[str, dict[int, Any]] = defaultdict(dict)
    for op in lines:
        if op["f"] == "poll" and op["type"] == "ok" and op.get("final"):
            for key, records in op["value"][0][1].items():
                final_reads[key].update({offset: value for offset, value in records})
    for (key, broker), values in by_replica.items():
        assert "error" not in values[0], values[0]
        assert [v["chunk"] for v in values] == list(range(values[0]["chunks"]))
        held = {o: v for value in values for o, v in value["records"]}
        assert len(held) == values[0]["record_count"]
        hw = values[0]["high_watermark"]
        assert hw is not None and hw > 0, (key, broker)
        if broker in values[0]["isr"]:
            limit = min(hw, max(final_reads[key], default=-1) + 1)
            below = {o: v for o, v in held.items() if o < limit}
            assert below == {o: v for o, v in final_reads[key].items() if o < limit}, key
        assert values[0]["invalid_offsets"] == [] and values[0]["recovery_stop"] is None
    results = json.loads((run_dir / "results.json").read_text())
    section = results["checkers"]["replicas"]
    assert section["details"]["replicas"] == PARTITIONS * REPLICATION
    assert section["counts"] == {"replica-divergence": 0}, section
