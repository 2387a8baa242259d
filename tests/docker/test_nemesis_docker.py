"""Nemeses against real containers: iptables partitions, netem, freezing, process faults over
SSH, heal_all, and a schedule recorded and replayed.

One cluster (n1..n3 + zk1, short ZooKeeper sessions) serves the module; every test leaves it
healed, with every daemon running, for the next.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nemesis import (
    Fault,
    Nemesis,
    PartitionGrudge,
    Schedule,
    ScheduledFault,
    ScheduleRunner,
    heal_all,
    replay,
)
from nemesis.errors import UnsupportedFaultError
from nemesis.protocols import Freezer
from squall.cluster.cluster import BROKER_PORT, ZOOKEEPER_PORT, Cluster
from system_under_test.client import AdminClient
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.docker
TOPIC = "chaos"
KEY = "chaos-0"


def wait_for(condition: Callable[[], Any], *, timeout: float = 60.0, what: str) -> Any:
    return _wait_for(condition, timeout, what, interval=0.2)


def partition_state(cluster: Cluster) -> tuple[int, list[int]]:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        p = admin.describe_topics([TOPIC])[0].partitions[0]
        return p.leader, p.isr


def reaches(cluster: Cluster, src: str, dst: str) -> bool:
    """Whether a TCP connection from node src to node dst's service port succeeds."""
    port = ZOOKEEPER_PORT if dst == cluster.zookeeper.name else BROKER_PORT
    probe = (
        "python3 -c 'import socket,sys; s=socket.socket(); s.settimeout(1.5); "
        f'sys.exit(s.connect_ex(("{cluster.node(dst).address}", {port})))\''
    )
    return cluster.node(src).run(probe, timeout=20, check=False).exit_code == 0


def squall_rules(cluster: Cluster, name: str) -> list[str]:
    output = cluster.node(name).run("iptables -w -S SQUALL", check=False).output
    return [line for line in output.splitlines() if line.startswith("-A SQUALL")]


@pytest.fixture(scope="module")
def cluster(squall_home: Path, docker_runtime: Any) -> Iterator[Cluster]:
    run_id = f"nemesis-{secrets.token_hex(3)}"
    cluster: Cluster = docker_runtime.up(
        run_id,
        3,
        settings={
            "zookeeper.session.timeout.ms": "4000",
            "replica.lag.time.max.ms": "4000",
            "default.replication.factor": "3",
        },
    )
    try:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, 1, replication_factor=3)
        wait_for(lambda: len(partition_state(cluster)[1]) == 3, what="a full ISR")
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


@pytest.fixture(scope="module")
def freezer(cluster: Cluster, docker_runtime: Any) -> Freezer:
    found = cluster.freezer
    assert isinstance(found, Freezer)
    return found


@pytest.fixture
def nemesis(cluster: Cluster, freezer: Freezer) -> Iterator[Nemesis]:
    nemesis = Nemesis(cluster, rng=random.Random(11), topic_hint=KEY)
    yield nemesis
    heal_all(cluster, restart_killed=True)
    wait_for(lambda: len(partition_state(cluster)[1]) == 3, what="the ISR to be full again")


def test_isolating_the_leader_cuts_it_off_until_healed(cluster: Cluster, nemesis: Nemesis) -> None:
    leader, _isr = partition_state(cluster)
    old = f"n{leader}"
    applied = nemesis.apply(Fault("start-partition", {"shape": "isolate", "targets": ["leader"]}))
    assert applied.value["targets"] == [old]
    assert applied.value["roles"] == {"leader": [old]}
    others = [n.name for n in cluster.all_nodes() if n.name != old]
    assert applied.value["grudge"][old] == others
    assert len(squall_rules(cluster, old)) == len(others)
    for other in others:
        assert not reaches(cluster, old, other)
        assert not reaches(cluster, other, old)
    # The control machine still reaches the isolated node (its address is not in the grudge).
    assert cluster.node(old).run("true").ok
    # ZooKeeper expires the isolated leader's session; the controller elects another.
    wait_for(lambda: partition_state(cluster)[0] not in (-1, leader), what="a new leader")

    healed = nemesis.heal()
    assert [f.f for f in healed] == ["stop-partition"]
    assert healed[0].value["healed"] == applied.value["grudge"]
    assert squall_rules(cluster, old) == []
    assert all(reaches(cluster, old, other) for other in others)
    assert nemesis.heal() == []


def test_majorities_ring_rules_match_the_grudge(cluster: Cluster, nemesis: Nemesis) -> None:
    applied = nemesis.apply(Fault("start-partition", {"shape": "majorities-ring"}))
    grudge = PartitionGrudge.from_json(applied.value["grudge"])
    for node in cluster.all_nodes():
        expected = {
            f"-A SQUALL -s {cluster.node(s).address}/32 -j DROP"
            for s in grudge.drops.get(node.name, ())
        }
        assert set(squall_rules(cluster, node.name)) == expected
    # A new partition replaces the old one, with no healed moment in between.
    halves = nemesis.apply(Fault("start-partition", {"shape": "halves", "among": "brokers"}))
    assert halves.value["grudge"] == {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
    assert squall_rules(cluster, "zk1") == []
    assert not reaches(cluster, "n1", "n2") and reaches(cluster, "n1", "zk1")


def test_one_way_drops_only_on_the_destination(cluster: Cluster, nemesis: Nemesis) -> None:
    applied = nemesis.apply(
        Fault("start-partition", {"shape": "one-way", "targets": ["n1"], "destinations": ["n2"]})
    )
    assert applied.value["grudge"] == {"n2": ["n1"]}
    assert squall_rules(cluster, "n1") == []
    assert squall_rules(cluster, "n2") == [f"-A SQUALL -s {cluster.node('n1').address}/32 -j DROP"]


def test_isolate_zookeeper_keeps_brokers_connected(cluster: Cluster, nemesis: Nemesis) -> None:
    applied = nemesis.apply(Fault("start-partition", {"shape": "isolate-zk", "targets": ["n3"]}))
    assert applied.value["grudge"] == {"n3": ["zk1"], "zk1": ["n3"]}
    assert not reaches(cluster, "n3", "zk1")
    assert reaches(cluster, "n3", "n1") and reaches(cluster, "n1", "zk1")


def test_netem_delays_or_is_refused_clearly(cluster: Cluster, nemesis: Nemesis) -> None:
    fault = Fault("start-netem", {"targets": ["n1"], "delay_ms": 300, "jitter_ms": 0})
    if not cluster.capabilities.netem:
        with pytest.raises(UnsupportedFaultError, match="sch_netem"):
            nemesis.apply(fault)
        return
    applied = nemesis.apply(fault)
    interface = applied.value["interfaces"]["n1"]
    shown = cluster.node("n1").run(f"tc qdisc show dev {interface}").output
    assert "netem" in shown and "delay 300" in shown
    started = time.monotonic()
    assert reaches(cluster, "n2", "n1")
    assert time.monotonic() - started >= 0.3
    healed = nemesis.heal()
    assert [f.f for f in healed] == ["stop-netem"]
    assert "netem" not in cluster.node("n1").run(f"tc qdisc show dev {interface}").output


def test_freeze_a_node_and_heal(cluster: Cluster, nemesis: Nemesis, freezer: Any) -> None:
    applied = nemesis.apply(Fault("freeze", {"targets": ["follower"]}))
    (frozen,) = applied.value["targets"]
    assert freezer.is_frozen(frozen)
    assert nemesis.active.frozen == {frozen}
    healed = nemesis.heal()
    assert [f.f for f in healed] == ["unfreeze"]
    assert not freezer.is_frozen(frozen)
    assert cluster.node(frozen).run("true").ok


def test_process_faults_over_ssh(cluster: Cluster, nemesis: Nemesis) -> None:
    killed = nemesis.apply(Fault("kill", {"targets": ["controller"]}))
    (name,) = killed.value["targets"]
    assert killed.value["outcome"] == {name: "killed"}
    assert not cluster.broker(name).is_running()
    paused = nemesis.apply(Fault("pause", {"targets": ["zk"]}))
    assert paused.value["outcome"] == {"zk1": "paused"}
    state = cluster.zookeeper.run(f"ps -o stat= -p $(cat {cluster.zookeeper_service().pidfile})")
    assert state.output.strip().startswith("T")
    healed = nemesis.heal(restart_killed=True)
    assert [f.f for f in healed] == ["resume", "start"]
    assert cluster.broker(name).is_running()
    bounced = nemesis.apply(Fault("bounce", {"targets": [name]}))
    assert bounced.value["outcome"] == {name: "bounced"}


def test_heal_all_undoes_everything_and_is_idempotent(cluster: Cluster, freezer: Any) -> None:
    nemesis = Nemesis(cluster, rng=random.Random(3), topic_hint=KEY)
    nemesis.apply(Fault("start-partition", {"shape": "bridge"}))
    nemesis.apply(Fault("pause", {"targets": ["n1"]}))
    nemesis.apply(Fault("freeze", {"targets": ["n2"]}))
    done = heal_all(cluster)
    assert [f.f for f in done][:3] == ["unfreeze", "resume", "stop-partition"]
    assert not freezer.is_frozen("n2")
    assert all(squall_rules(cluster, n.name) == [] for n in cluster.all_nodes())
    assert heal_all(cluster)  # again: nothing to do, nothing fails
    wait_for(lambda: len(partition_state(cluster)[1]) == 3, what="the ISR to be full again")


def test_a_recorded_partition_schedule_replays_the_same_grudges(
    cluster: Cluster, nemesis: Nemesis
) -> None:
    schedule = Schedule(
        (
            ScheduledFault(0.0, Fault("start-partition", {"shape": "random-halves"}), 0),
            ScheduledFault(1.0, Fault("stop-partition"), 1, heals=0),
            ScheduledFault(1.5, Fault("start-partition", {"shape": "isolate"}), 2),
            ScheduledFault(2.5, Fault("stop-partition"), 3, heals=2),
        )
    )
    record = ScheduleRunner(nemesis).run(schedule)
    assert all(s.fault.is_resolved for s in record.faults)
    other = Nemesis(cluster, rng=random.Random(999), topic_hint=KEY)
    again = replay(record, other)
    grudges = [s.fault.value.get("grudge") for s in record.faults]
    assert [s.fault.value.get("grudge") for s in again.faults] == grudges
    assert other.active.quiet
