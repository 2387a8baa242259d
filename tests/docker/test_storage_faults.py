"""Storage faults on real containers, shown from the SUT's own events and files: a corrupted
segment cut back by the broker's recovery, a chopped tail fetched again, a rolled-back
replica caught up, snapshots removed by heal, a power loss that shortens a replica's log
on its lazy disk (docker's default).

One cluster (n1..n3 + zk1, quick detectors) and one partition replicated on all three serve
the module; every test leaves it healed, with every broker running and the ISR full.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nemesis import Fault, Nemesis, heal_all
from squall.cluster.cluster import Cluster
from squall.cluster.docker import DockerRuntime
from system_under_test.client import AdminClient, Producer
from tests.support import QUICK_DETECTORS
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.docker
TOPIC = "disk"
KEY = "disk-0"
SEGMENT = f"{KEY}/{0:020d}.log"
SETTINGS = {**QUICK_DETECTORS, "min.insync.replicas": "2"}


def wait_for(condition: Callable[[], Any], *, timeout: float = 90.0, what: str) -> Any:
    return _wait_for(condition, timeout, what, interval=0.3)


def partition_state(cluster: Cluster) -> tuple[int, list[int]]:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        p = admin.describe_topics([TOPIC])[0].partitions[0]
        return p.leader, list(p.isr)


def full_isr(cluster: Cluster) -> bool:
    leader, isr = partition_state(cluster)
    return leader >= 0 and len(isr) == 3


def write(cluster: Cluster, count: int) -> None:
    """``count`` acknowledged records (acks=-1), 200 bytes each."""
    producer = Producer(cluster.bootstrap, acks=-1, mode="sync")
    try:
        for n in range(count):
            producer.send(TOPIC, b"%06d" % n + b"x" * 194, partition=0)
    finally:
        producer.close(timeout=10)


def size_on(cluster: Cluster, node: str, path: str = SEGMENT) -> int:
    logs = cluster.broker(node).log_dir
    result = cluster.node(node).run(f"stat -c %s {logs}/{path}", check=False)
    return int(result.output.strip()) if result.ok else -1


def events_of(cluster: Cluster, node: str, kind: str) -> list[dict[str, Any]]:
    text = cluster.node(node).run(f"cat {cluster.broker(node).event_log}", check=False).output
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("type") == kind and e.get("key", KEY) == KEY]


def same_logs(cluster: Cluster) -> bool:
    """Every replica holds the leader's segment, byte for byte as long (caught up)."""
    return full_isr(cluster) and len({size_on(cluster, n) for n in cluster.brokers}) == 1


@pytest.fixture(scope="module")
def cluster(squall_home: Path, docker_runtime: DockerRuntime) -> Iterator[Cluster]:
    run_id = f"disk-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(run_id, 3, settings=SETTINGS)
    try:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, 1, replication_factor=3)
        wait_for(lambda: full_isr(cluster), what="a full ISR")
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


@pytest.fixture
def nemesis(cluster: Cluster) -> Iterator[Nemesis]:
    nemesis = Nemesis(cluster, rng=random.Random(17), topic_hint=KEY)
    yield nemesis
    heal_all(cluster, restart_killed=True)
    wait_for(lambda: same_logs(cluster), what="every replica caught up again")


def test_a_corrupted_segment_is_cut_back_by_recovery_and_fetched_again(
    cluster: Cluster, nemesis: Nemesis
) -> None:
    write(cluster, 300)
    wait_for(lambda: same_logs(cluster), what="the records on every replica")
    applied = nemesis.apply(Fault("corrupt-file", {"targets": ["follower"], "bits": 4}))
    [node] = applied.value["targets"]
    damage = applied.value["damage"][node]
    assert applied.value["killed"] == [node]
    assert applied.value["outcome"] == {node: "corrupted"}
    assert damage["path"] == SEGMENT and len(damage["flips"]) == 4
    first_bad = min(offset for offset, _bit in damage["flips"])
    assert not cluster.daemons.is_running(node)  # down until started

    nemesis.apply(Fault("start", {"targets": [node]}))

    [recovery] = events_of(cluster, node, "log-recovery")
    assert recovery["clean_shutdown"] is False
    assert recovery["truncated_bytes"] >= damage["size"] - first_bad
    assert recovery["log_end_offset"] < 300
    assert recovery["problem"]
    wait_for(lambda: same_logs(cluster), what=f"{node} to fetch again what recovery cut")


def test_a_chopped_tail_is_fetched_again(cluster: Cluster, nemesis: Nemesis) -> None:
    write(cluster, 200)
    wait_for(lambda: same_logs(cluster), what="the records on every replica")
    applied = nemesis.apply(Fault("truncate-file", {"targets": ["follower"], "max_bytes": 5000}))
    [node] = applied.value["targets"]
    damage = applied.value["damage"][node]
    assert damage["path"] == SEGMENT
    assert damage["size"] - 5000 <= damage["to_size"] < damage["size"]
    assert size_on(cluster, node) == damage["to_size"]

    nemesis.apply(Fault("start", {"targets": [node]}))

    wait_for(lambda: same_logs(cluster), what=f"{node} to fetch its lost tail again")
    assert size_on(cluster, node) == damage["size"]


def test_a_rolled_back_replica_catches_up_and_heal_drops_the_snapshot(
    cluster: Cluster, nemesis: Nemesis
) -> None:
    write(cluster, 100)
    wait_for(lambda: same_logs(cluster), what="the records on every replica")
    taken = nemesis.apply(Fault("snapshot", {"targets": ["follower"]}))
    [node] = taken.value["targets"]
    snapshots = f"{Path(cluster.broker(node).log_dir).parent}/snapshots"
    assert taken.value["outcome"] == {node: "taken"}
    assert cluster.daemons.is_running(node)
    write(cluster, 200)
    wait_for(lambda: same_logs(cluster), what="the later records on every replica")
    backed_up = size_on(cluster, node, f"../snapshots/snap-0/{SEGMENT}")
    assert 0 < backed_up < size_on(cluster, node)
    events_before = len(events_of(cluster, node, "isr-change"))

    rolled = nemesis.apply(Fault("rollback", {"targets": [node]}))

    assert rolled.value["outcome"] == {node: "rolled-back"}
    assert rolled.value["snapshots"] == {node: "snap-0"}
    assert cluster.daemons.is_running(node)
    assert len(events_of(cluster, node, "isr-change")) >= events_before  # its event log kept
    wait_for(lambda: same_logs(cluster), what=f"{node} to catch up from its backup")

    healed = nemesis.heal()
    assert [f.f for f in healed] == ["drop-snapshots"]
    assert not cluster.node(node).run(f"test -e {snapshots}", check=False).ok


def test_a_power_loss_drops_the_unsynced_tail_and_the_replica_fetches_it_again(
    cluster: Cluster, nemesis: Nemesis
) -> None:
    assert cluster.capabilities.lazy_disk  # docker's default
    write(cluster, 200)
    wait_for(lambda: same_logs(cluster), what="the records on every replica")
    before = size_on(cluster, "n1")
    follower = next(f"n{b}" for b in partition_state(cluster)[1] if f"n{b}" != "n1")
    size = size_on(cluster, follower)

    applied = nemesis.apply(Fault("power-loss", {"targets": [follower]}))

    assert applied.value["outcome"] == {follower: "lost-power"}
    assert applied.value["lost"][follower]["bytes"] > 0
    assert not cluster.daemons.is_running(follower)
    assert size_on(cluster, follower) < size  # nothing fsynced it: the tail is gone
    nemesis.apply(Fault("start", {"targets": [follower]}))
    wait_for(lambda: same_logs(cluster), what=f"{follower} to fetch its lost tail again")
    assert size_on(cluster, follower) >= before
