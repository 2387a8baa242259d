"""Known verdicts from real runs on the local runtime (ZooKeeper and three broker processes).

- acks=-1, RF 3, min.insync.replicas 2, unclean election off, the leader killed twice: no
  acknowledged write may be lost, so the run must be valid. The same run (two partitions)
  shows that a run reads every replica of every key off its disk after the final read: one
  or more `replica-read` lines per replica and key, whose records agree with what the final
  read saw below the high watermark, and that the `replicas` checker judges them.
- acks=1, the followers paused (still in the ISR) while the leader acknowledges alone, then
  the leader killed: a clean election loses what only the leader had. acks=1 allows that
  loss, so it must be reported as expected loss, with the run still valid.

The unclean-election verdict needs partitions (tests/docker/test_unclean_verdict.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.cluster.cluster import STATE_DIR_ENV
from tests.verdicts import KEY, WORKLOAD, Step, run_scenario, topic_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BROKER = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "10000",
}


def assert_every_replica_was_read(
    history: list[dict[str, Any]], results: dict[str, Any], partitions: int, replicas: int
) -> None:
    """One or more `replica-read` lines per replica and key, in chunks, agreeing with the
    final read below the high watermark where the replica is in the ISR; judged."""
    reads = [op for op in history if op["f"] == "replica-read"]
    by_replica: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for op in reads:
        assert op["process"] == "sut" and op["type"] == "info" and op["final"] is True
        by_replica[(op["value"]["key"], op["value"]["broker"])].append(op["value"])
    keys = {f"{op['value']['key']}" for op in reads}
    assert len(keys) == partitions
    brokers = range(1, replicas + 1)
    assert sorted(by_replica) == sorted((k, b) for k in keys for b in brokers)
    final_reads: dict[str, dict[int, Any]] = defaultdict(dict)
    for op in history:
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
    section = results["checkers"]["replicas"]
    assert section["details"]["replicas"] == partitions * replicas
    assert section["counts"] == {"replica-divergence": 0}, section


@pytest.fixture
def squall_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / ".squall"))
    yield tmp_path


def test_acks_all_with_leader_kills_is_valid(squall_root: Path) -> None:
    verdict = run_scenario(
        squall_root,
        "verdict-acks-all",
        runtime="local",
        workload={
            **WORKLOAD,
            "partitions": 2,
            "acks": -1,
            "topic_config": topic_config(2, unclean=False),
        },
        broker=BROKER,
        steps=[
            Step(4, "kill", {"targets": [f"leader:{KEY}"]}),
            Step(10, "start", {}, heals=1),
            Step(15, "kill", {"targets": [f"leader:{KEY}"]}),
            Step(21, "start", {}, heals=3),
        ],
        time_limit_s=26,
    )
    why = verdict.explain()
    kills = [op for op in verdict.applied if op["f"] == "kill"]
    assert len(kills) == 2 and all("error" not in op["value"] for op in kills), why
    # The kills really moved leadership, cleanly, while acknowledged writes went on.
    moved = [e for e in verdict.elections if e["value"].get("previous_leader") is not None]
    assert len(moved) >= 2, why
    assert not any(e["value"].get("unclean") for e in verdict.elections), why
    assert verdict.ok_sends() > 200, why
    assert verdict.outcome.exit_code == 0, why
    assert verdict.results["valid"] is True, why
    assert verdict.results["anomaly_types"] == [], why
    assert verdict.results.get("expected_anomaly_types", []) == [], why
    assert verdict.results["checkers"]["delivery"]["counts"]["lost-acked-write"] == 0, why
    assert_every_replica_was_read(verdict.history, verdict.results, partitions=2, replicas=3)


def test_acks_one_losses_after_a_leader_kill_are_expected_not_invalid(squall_root: Path) -> None:
    verdict = run_scenario(
        squall_root,
        "verdict-acks-one",
        runtime="local",
        workload={
            **WORKLOAD,
            "acks": 1,
            "topic_config": topic_config(2, unclean=False),
        },
        broker=BROKER,
        steps=[
            # Paused for 3 s: behind, but within replica.lag.time.max.ms and the ZooKeeper
            # session, so both stay in the ISR while the leader acknowledges alone.
            Step(4, "pause", {"targets": [f"followers:{KEY}"]}),
            Step(6.5, "kill", {"targets": [f"leader:{KEY}"]}),
            Step(7, "resume", {}, heals=1),
            Step(17, "start", {}, heals=2),
        ],
        time_limit_s=24,
    )
    why = verdict.explain()
    paused, killed = verdict.applied[0]["value"], verdict.applied[1]["value"]
    assert len(paused["targets"]) == 2 and "error" not in paused, why
    assert len(killed["targets"]) == 1 and "error" not in killed, why
    assert killed["targets"][0] not in paused["targets"], why
    # The new leader came from the ISR: a clean election.
    assert any(
        e["value"].get("previous_leader") is not None and not e["value"].get("unclean")
        for e in verdict.elections
    ), why
    assert verdict.outcome.exit_code == 0, why
    assert verdict.results["valid"] is True, why
    assert verdict.results["anomaly_types"] == [], why
    expected = verdict.results["expected_anomaly_types"]
    assert "unseen" in expected or "lost-write" in expected, why
    delivery = verdict.results["checkers"]["delivery"]
    lost = sum(
        delivery.get("expected_counts", {}).get(kind, 0) for kind in ("unseen", "lost-write")
    )
    assert lost > 0, why
    samples = [
        s for kind in ("unseen", "lost-write") for s in delivery.get("expected", {}).get(kind, [])
    ]
    assert samples and all(s.get("expected_because") for s in samples), why
