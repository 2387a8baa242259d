"""A known verdict on containers: unclean leader election on, the ISR isolated.

One follower is paused until it drops out of the ISR while acks=-1 writes go on with
min.insync.replicas 1; then every ISR member is cut off from every other node (ZooKeeper
included) and the paused follower resumes. The controller finds no live ISR member and, with
unclean election allowed, elects the out-of-sync follower: the writes acknowledged while it
was out are lost. The checkers must report an `unclean-loss-window` naming that election, as
an expected loss (the configuration allowed it), and the run stays valid.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.cluster import STATE_DIR_ENV
from tests.verdicts import KEY, Step, run_scenario

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture
def squall_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / ".squall"))
    yield tmp_path


def test_isolating_the_isr_with_unclean_election_reports_the_loss_window(
    squall_root: Path,
) -> None:
    verdict = run_scenario(
        squall_root,
        "verdict-unclean",
        runtime="docker",
        workload={
            "partitions": 1,
            "replication_factor": 3,
            "producers": 2,
            "consumers": 2,
            "producer_mode": "sync",
            "rate": 200.0,
            "acks": -1,
            "topic_config": {
                "min.insync.replicas": "1",
                "unclean.leader.election.enable": "true",
            },
            "final_read_deadline_s": 30.0,
        },
        broker={
            "zookeeper.session.timeout.ms": "4000",
            "replica.lag.time.max.ms": "2000",
        },
        steps=[
            Step(3, "pause", {"targets": [f"follower:{KEY}"]}),
            Step(10, "start-partition", {"shape": "isolate", "targets": [f"isr:{KEY}"]}),
            Step(10.5, "resume", {}, heals=1),
            Step(24, "stop-partition", {}, heals=2),
        ],
        time_limit_s=30,
        recovery_wait_s=8,
    )
    why = verdict.explain()
    paused = verdict.applied[0]["value"]["targets"]
    isolated = verdict.applied[1]["value"]
    assert "error" not in isolated, why
    assert set(isolated["targets"]).isdisjoint(paused) and len(isolated["targets"]) == 2, why
    unclean = [e for e in verdict.elections if e["value"].get("unclean")]
    assert unclean and f"n{unclean[0]['value']['leader']}" in paused, why

    assert verdict.outcome.exit_code == 0, why
    assert verdict.results["valid"] is True, why
    assert verdict.results["anomaly_types"] == [], why
    assert "unclean-loss-window" in verdict.results["expected_anomaly_types"], why
    section = verdict.results["checkers"]["unclean"]
    assert section["expected_counts"]["unclean-loss-window"] >= 1, why
    window = section["expected"]["unclean-loss-window"][0]
    assert window["key"] == KEY, why
    assert window["lost"] > 0, why
    assert window["election"] in {e["index"] for e in unclean}, why
