"""A known verdict on containers: unclean leader election on, the ISR isolated.

One follower is paused until it drops out of the ISR while acks=-1 writes go on with
min.insync.replicas 1; then the ISR is taken away: the leader is cut off from every other
node (ZooKeeper included) and the other ISR member is paused, and the out-of-sync follower
resumes. The controller finds no live ISR member and, with unclean election allowed, elects
the out-of-sync follower: the writes acknowledged while it was out are lost. The checkers
must report an `unclean-loss-window` naming that election, as an expected loss (the
configuration allowed it), and the run stays valid.

The ISR members are isolated apart rather than together: two isolated together would go on
acknowledging acks=-1 writes as a deposed leader and its follower (ZooKeeper-era Kafka's
split brain), losses that squall reports as anomalies, not as the unclean window's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.cluster import STATE_DIR_ENV
from tests.verdicts import KEY, WORKLOAD, Step, run_scenario, topic_config

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
        workload={**WORKLOAD, "acks": -1, "topic_config": topic_config(1, unclean=True)},
        broker={
            "zookeeper.session.timeout.ms": "4000",
            "replica.lag.time.max.ms": "2000",
        },
        steps=[
            Step(3, "pause", {"targets": [f"follower:{KEY}"]}),
            Step(9, "pause", {"targets": [f"followers:{KEY}"]}),
            Step(9, "start-partition", {"shape": "isolate", "targets": [f"leader:{KEY}"]}),
            Step(9.5, "resume", {}, heals=1),
            Step(24, "stop-partition", {}, heals=3),
            Step(24, "resume", {}, heals=2),
        ],
        time_limit_s=30,
        recovery_wait_s=8,
    )
    why = verdict.explain()
    paused = verdict.applied[0]["value"]["targets"]
    in_sync = verdict.applied[1]["value"]
    isolated = verdict.applied[2]["value"]
    assert "error" not in isolated and "error" not in in_sync, why
    assert len(paused) == 1 and len(in_sync["targets"]) == 1, why
    assert len({*paused, *in_sync["targets"], *isolated["targets"]}) == 3, why
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
