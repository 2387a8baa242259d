"""Every scenario reaches the state it aims at, on real containers, as the SUT's own events
show: an election away from the node it struck, an ISR of one, a truncation, a new
controller.

One cluster with quick detectors (3 s sessions, 3 s replica lag) serves every scenario; a
producer keeps acks=1 writes in flight the whole time, so that leader changes have
something to lose and returning replicas something to truncate. Each scenario is laid out
by the generator and applied by the schedule runner exactly as a test run does it.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nemesis import Fault, Nemesis, ScheduleRunner, ScheduleSpec, generate_schedule, heal_all
from nemesis.timing import Detectors
from squall.cluster.cluster import Cluster
from squall.cluster.docker import DockerRuntime
from system_under_test.client import AdminClient, Producer
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.docker
TOPIC = "scenarios"
KEY = f"{TOPIC}-0"
DETECTORS = Detectors(session_timeout_s=3.0, replica_lag_s=3.0, fetch_wait_s=0.2)
SETTINGS = {
    "zookeeper.session.timeout.ms": "3000",
    "zookeeper.connection.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "default.replication.factor": "3",
}


def wait_for(condition: Callable[[], Any], *, timeout: float = 60.0, what: str) -> Any:
    return _wait_for(condition, timeout, what, interval=0.3)


def partition_state(cluster: Cluster) -> tuple[int, list[int]]:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        p = admin.describe_topics([TOPIC])[0].partitions[0]
        return p.leader, list(p.isr)


class Writer:
    """Sends acks=1 records to the topic until stopped; failures are expected and ignored."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            bootstrap, acks=1, mode="async", config={"queue.buffering.max.ms": 2}
        )
        self.stopped = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, name="scenario-writer", daemon=True)

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                try:
                    self.producer.send(TOPIC, str(self.sent).encode(), partition=0)
                    self.sent += 1
                except Exception:
                    time.sleep(0.05)
                time.sleep(0.004)
        finally:
            self.producer.close(timeout=5)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)
        assert self.sent > 100, f"the writer sent only {self.sent} records"


@pytest.fixture(scope="module")
def cluster(squall_home: Path, docker_runtime: DockerRuntime) -> Iterator[Cluster]:
    run_id = f"scenarios-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(run_id, 3, settings=SETTINGS)
    try:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, 1, replication_factor=3)
        wait_for(lambda: len(partition_state(cluster)[1]) == 3, what="a full ISR")
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


def run_scenario(
    cluster: Cluster, name: str, tmp_path: Path, seed: int = 5
) -> list[dict[str, Any]]:
    """Lay the scenario out, run it under a writer, heal, wait for a full ISR again; the SUT
    events of every broker from the scenario's start, in time order."""
    wait_for(lambda: len(partition_state(cluster)[1]) == 3, what="a full ISR before")
    spec = ScheduleSpec(
        generator=name,
        time_limit_s=600.0,
        seed=seed,
        detectors=DETECTORS,
        brokers=tuple(cluster.brokers),
        capabilities=frozenset({"partitions"}),
    )
    nemesis = Nemesis(cluster, rng=random.Random(seed), topic_hint=KEY)
    started = time.time_ns()
    with Writer(cluster.bootstrap):
        applied = ScheduleRunner(nemesis).run(generate_schedule(spec))
        time.sleep(1.0)
    heal_all(cluster, restart_killed=True)
    wait_for(lambda: len(partition_state(cluster)[1]) == 3, timeout=90, what="a full ISR after")
    assert all("error" not in s.fault.value for s in applied.faults), applied.to_json()
    events: list[dict[str, Any]] = []
    for node in cluster.brokers:
        local = tmp_path / name / node
        cluster.broker(node).fetch_logs(local)
        path = local / "events.jsonl"
        if path.exists():
            events += [json.loads(line) for line in path.read_text().splitlines() if line]
    return sorted(
        (e for e in events if e["wall_time_ns"] >= started), key=lambda e: e["wall_time_ns"]
    )


def elections(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "leader-election" and e["key"] == KEY]


def struck(applied_name: str, events: list[dict[str, Any]]) -> None:
    assert elections(events), f"{applied_name}: no leader election at all"


def test_zombie_leader_is_deposed(cluster: Cluster, tmp_path: Path) -> None:
    before, _ = partition_state(cluster)
    events = run_scenario(cluster, "zombie-leader", tmp_path)
    moved = [e for e in elections(events) if e["previous_leader"] == before]
    assert moved and moved[0]["leader"] != before


def test_isr_shrinks_to_the_leader_then_the_leader_is_lost(
    cluster: Cluster, tmp_path: Path
) -> None:
    events = run_scenario(cluster, "isr-shrink-leader-loss", tmp_path)
    alone = [
        e for e in events if e["type"] == "isr-change" and e["key"] == KEY and len(e["isr"]) == 1
    ]
    assert alone, "the ISR never shrank to one replica"
    lost = [e for e in elections(events) if e["previous_leader"] == alone[0]["isr"][0]]
    assert lost, "the last ISR member was never replaced or taken offline"


def controller_apart_from_the_leader(cluster: Cluster) -> None:
    """Bounce the leader until another broker is controller: the KIP-101 sequence needs a
    controller that outlives the leader (with the controller on the leader's node, the
    restarted followers are made followers by nobody before the leader is gone)."""
    for _ in range(4):
        view = cluster.roles.observe([KEY], controller=True)
        if view.controller != view.partitions[KEY].leader:
            return
        Nemesis(cluster, rng=random.Random(1), topic_hint=KEY).apply(
            Fault("bounce", {"targets": ["leader"]})
        )
        wait_for(lambda: len(partition_state(cluster)[1]) == 3, what="a full ISR after a bounce")
    pytest.fail("the controller stayed on the partition's leader after four bounces")


def test_follower_restart_then_leader_loss_elects_a_follower_that_truncated(
    cluster: Cluster, tmp_path: Path
) -> None:
    controller_apart_from_the_leader(cluster)
    before, isr = partition_state(cluster)
    followers = {b for b in isr if b != before}
    events = run_scenario(cluster, "follower-restart-leader-loss", tmp_path)
    elected = [e for e in elections(events) if e["previous_leader"] == before]
    assert elected and elected[0]["leader"] in followers, elected
    # KIP-101's state: a controller that did not see the followers crash made them followers
    # of the paused leader again, in its ISR (where a replica truncating by the high
    # watermark would truncate), and elected one of them when the leader's session ended
    assert elected[0]["reason"].startswith("broker change"), elected[0]
    assert elected[0]["leader"] in elected[0]["isr"], elected[0]
    assert any(
        e["type"] == "controller-elected" and e["wall_time_ns"] < elected[0]["wall_time_ns"]
        for e in events
    ), "no new controller between the followers' restart and the election"


def test_failover_during_truncation_truncates_the_returning_leader(
    cluster: Cluster, tmp_path: Path
) -> None:
    events = run_scenario(cluster, "failover-during-truncation", tmp_path)
    assert len({e["leader"] for e in elections(events)}) >= 2
    truncations = [e for e in events if e["type"] == "truncation" and e["key"] == KEY]
    assert truncations, "no replica truncated after the failover"
    assert all(e["to_offset"] < e["from_offset"] for e in truncations)


def test_controller_failover_during_an_election(cluster: Cluster, tmp_path: Path) -> None:
    events = run_scenario(cluster, "controller-failover-during-election", tmp_path)
    assert any(e["type"] == "controller-elected" for e in events)
    struck("controller-failover-during-election", events)


def test_leader_session_loss_moves_leadership(cluster: Cluster, tmp_path: Path) -> None:
    before, _ = partition_state(cluster)
    events = run_scenario(cluster, "leader-session-loss", tmp_path)
    assert any(e["previous_leader"] == before and e["leader"] != before for e in elections(events))


def test_controller_session_loss_elects_another_controller(
    cluster: Cluster, tmp_path: Path
) -> None:
    events = run_scenario(cluster, "controller-session-loss", tmp_path)
    controllers = [e["controller"] for e in events if e["type"] == "controller-elected"]
    assert controllers, "no controller election"


def test_rolling_bounce_moves_the_leadership(cluster: Cluster, tmp_path: Path) -> None:
    before, _ = partition_state(cluster)
    events = run_scenario(cluster, "rolling-bounce", tmp_path)
    # The leader is bounced at some point of the round, so leadership moves off it.
    assert any(e["previous_leader"] == before and e["leader"] != before for e in elections(events))
