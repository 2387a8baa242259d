"""Nemeses against real processes: a local-runtime cluster (ZooKeeper and three brokers on
this machine), and squall's iptables commands inside a private network namespace."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemesis import (
    Fault,
    Nemesis,
    Schedule,
    ScheduledFault,
    ScheduleRunner,
    heal_all,
    replay,
)
from nemesis.errors import UnsupportedFaultError
from nemesis.partitioner import heal_command, install_command, remove_chain_command
from squall.cluster.cluster import Cluster
from system_under_test.client import AdminClient
from tests.support import wait_for

local = pytest.importorskip(
    "squall.cluster.local", reason="squall.cluster.local (the local runtime) is not there yet"
)

pytestmark = pytest.mark.integration
TOPIC = "t"
KEY = "t-0"


def leader_of(cluster: Cluster) -> int:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        return admin.describe_topics([TOPIC])[0].partitions[0].leader


def process_state(cluster: Cluster, name: str) -> str:
    """The kernel's state letter of the node's daemon (``T``: stopped), or ``-`` if none."""
    daemon = cluster.broker(name) if name != "zk1" else cluster.zookeeper_service()
    try:
        pid = int(Path(daemon.pidfile).read_text().strip())
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError):
        return "-"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SQUALL_HOME", str(tmp_path_factory.mktemp("squall-home")))
        runtime = local.LocalRuntime()
        cluster: Cluster = runtime.up(
            f"nemesis-{uuid.uuid4().hex[:6]}",
            3,
            settings={
                "zookeeper.session.timeout.ms": "3000",
                "replica.lag.time.max.ms": "3000",
                "default.replication.factor": "3",
            },
        )
        try:
            with AdminClient(cluster.bootstrap) as admin:
                admin.create_topic(TOPIC, 1, replication_factor=3)
            wait_for(lambda: leader_of(cluster) > 0, what="a leader of t-0")
            yield cluster
        finally:
            runtime.down(cluster.state)


@pytest.fixture
def nemesis(cluster: Cluster) -> Iterator[Nemesis]:
    """A nemesis per test; the cluster is fully healed and restarted after each."""
    nemesis = Nemesis(cluster, rng=random.Random(7), topic_hint=KEY, start_timeout_s=60)
    yield nemesis
    heal_all(cluster, restart_killed=True)
    wait_for(lambda: leader_of(cluster) > 0, what="t-0 to have a leader again")


def test_kill_the_leader_then_start_it(cluster: Cluster, nemesis: Nemesis) -> None:
    leader = leader_of(cluster)
    applied = nemesis.apply(Fault("kill", {"targets": ["leader:t-0"]}))
    assert applied.value["targets"] == [f"n{leader}"]
    assert applied.value["roles"] == {"leader:t-0": [f"n{leader}"]}
    assert applied.value["observed"][KEY]["leader"] == leader
    assert applied.value["outcome"] == {f"n{leader}": "killed"}
    assert not cluster.broker(f"n{leader}").is_running()
    assert nemesis.active.killed == {f"n{leader}"}
    wait_for(lambda: leader_of(cluster) not in (-1, leader), what="a new leader")

    started = nemesis.apply(Fault("start"))
    assert started.value == {"targets": [f"n{leader}"], "outcome": {f"n{leader}": "started"}}
    assert cluster.broker(f"n{leader}").is_running()
    assert nemesis.active.quiet


def test_pause_the_controller_and_heal(cluster: Cluster, nemesis: Nemesis) -> None:
    applied = nemesis.apply(Fault("pause", {"targets": ["controller"]}))
    (paused,) = applied.value["targets"]
    assert applied.value["observed"]["controller"] == int(paused[1:])
    assert process_state(cluster, paused) == "T"
    assert nemesis.active.paused == {paused}

    healed = nemesis.heal()
    assert [f.f for f in healed] == ["resume"]
    assert healed[0].value["targets"] == [paused]
    assert process_state(cluster, paused) != "T"
    assert nemesis.heal() == []


def test_bounce_a_follower_restarts_it_cleanly(cluster: Cluster, nemesis: Nemesis) -> None:
    wait_for(lambda: len(_isr(cluster)) == 3, what="a full ISR")
    applied = nemesis.apply(Fault("bounce", {"targets": ["follower"]}))
    (bounced,) = applied.value["targets"]
    assert int(bounced[1:]) in applied.value["observed"][KEY]["isr"]
    assert int(bounced[1:]) != applied.value["observed"][KEY]["leader"]
    assert applied.value["outcome"] == {bounced: "bounced"}
    assert cluster.broker(bounced).is_running()
    assert nemesis.active.quiet


def test_slow_a_follower_by_a_duty_cycle_then_heal(cluster: Cluster, nemesis: Nemesis) -> None:
    wait_for(lambda: len(_isr(cluster)) == 3, what="a full ISR")
    applied = nemesis.apply(
        Fault("start-slow", {"targets": ["follower"], "stopped_ms": 100, "running_ms": 50})
    )
    (slowed,) = applied.value["targets"]
    assert applied.value["outcome"] == {slowed: "slowed"}
    assert int(slowed[1:]) != applied.value["observed"][KEY]["leader"]
    # the process is seen stopped, then running again, then stopped: a cycle, not a pause
    for states in ("T", "SR", "T"):
        wait_for(lambda s=states: process_state(cluster, slowed) in s, what=f"state {states}")  # type: ignore[misc]
    assert not nemesis.active.quiet
    healed = nemesis.heal()
    assert [f.f for f in healed] == ["stop-slow"]
    assert healed[0].value["outcome"] == {slowed: "resumed"}
    assert healed[0].value["cycles"][slowed] >= 1
    assert process_state(cluster, slowed) != "T"
    assert nemesis.active.quiet
    wait_for(lambda: len(_isr(cluster)) == 3, what="the slowed follower in the ISR still")


def _isr(cluster: Cluster) -> list[int]:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        return admin.describe_topics([TOPIC])[0].partitions[0].isr


def test_kill_zookeeper_and_heal_all_restarts_only_when_asked(
    cluster: Cluster, nemesis: Nemesis
) -> None:
    nemesis.apply(Fault("kill", {"targets": ["zk"]}))
    nemesis.apply(Fault("pause", {"targets": ["n1"]}))
    assert not cluster.zookeeper_service().is_running()

    done = heal_all(cluster)  # the local runtime's disks can hold snapshots: they go too
    assert [f.f for f in done] == ["resume", "drop-snapshots"]
    assert set(done[1].value["outcome"].values()) == {"no-snapshots"}
    assert process_state(cluster, "n1") != "T"
    assert not cluster.zookeeper_service().is_running()

    done = heal_all(cluster, restart_killed=True)
    assert [f.f for f in done] == ["resume", "drop-snapshots", "start"]
    assert done[2].value["outcome"]["zk1"] == "started"
    assert cluster.zookeeper_service().is_running()


def test_unsupported_faults_on_local(nemesis: Nemesis) -> None:
    with pytest.raises(UnsupportedFaultError, match="partitions need the docker or ssh runtime"):
        nemesis.apply(Fault("start-partition", {"shape": "isolate", "targets": ["leader"]}))
    with pytest.raises(UnsupportedFaultError, match="docker runtime"):
        nemesis.apply(Fault("freeze", {"targets": ["n1"]}))


def test_a_schedule_runs_and_its_record_replays_the_same_nodes(
    cluster: Cluster, nemesis: Nemesis
) -> None:
    schedule = Schedule(
        (
            ScheduledFault(0.1, Fault("kill", {"targets": ["leader:t-0"]}), 0),
            ScheduledFault(1.0, Fault("start"), 1, heals=0),
            ScheduledFault(1.2, Fault("pause", {"targets": ["minority"]}), 2),
            ScheduledFault(1.8, Fault("resume"), 3, heals=2),
        ),
        seed=7,
    )
    seen: list[Fault] = []
    started = time.monotonic()
    record = ScheduleRunner(nemesis, on_applied=seen.append).run(schedule)
    assert time.monotonic() - started >= 1.8
    assert record.resolved
    assert [s.fault for s in record.faults] == seen
    killed, restarted, paused, resumed = (s.fault for s in record.faults)
    assert restarted.targets == killed.targets and restarted.value["outcome"] == {
        killed.value["targets"][0]: "started"
    }
    assert resumed.targets == paused.targets
    assert all(s.fault.is_resolved for s in record.faults)
    assert nemesis.active.quiet

    other = Nemesis(cluster, rng=random.Random(12345), topic_hint=KEY)
    again = replay(record, other)
    assert [s.fault.targets for s in again.faults] == [s.fault.targets for s in record.faults]


def test_a_runner_stops_early_when_told(nemesis: Nemesis) -> None:
    stop = threading.Event()
    schedule = Schedule((ScheduledFault(30.0, Fault("kill", {"targets": ["n1"]}), 0),))
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    record = ScheduleRunner(nemesis, stop=stop).run(schedule)
    assert record.faults == ()
    assert nemesis.active.quiet


# --- iptables, for real, in a network namespace of its own -------------------------------


def _in_namespace_works() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make a network namespace"
    if shutil.which("unshare") is None or shutil.which("iptables") is None:
        return "needs unshare and iptables"
    probe = subprocess.run(
        ["unshare", "--net", "iptables", "-w", "-n", "-L"], capture_output=True, check=False
    )
    return None if probe.returncode == 0 else f"iptables in a namespace: {probe.stderr!r}"


_NAMESPACE = _in_namespace_works()


@pytest.mark.skipif(_NAMESPACE is not None, reason=_NAMESPACE or "")
def test_iptables_commands_cut_traffic_and_heal_in_a_private_namespace() -> None:
    """Two addresses on the loopback of a fresh namespace: a drop rule from one to the other
    stops a TCP connect; heal lets it through; everything is idempotent."""
    connect = (
        "python3 -c \"import socket,sys; s=socket.socket(); s.bind(('10.9.0.2',0)); "
        "s.settimeout(1); sys.exit(s.connect_ex(('10.9.0.1',2222)))\""
    )
    script = "\n".join(
        [
            "set -e",
            "ip link set lo up",
            "ip addr add 10.9.0.1/32 dev lo",
            "ip addr add 10.9.0.2/32 dev lo",
            "python3 -c \"import socket,time; s=socket.socket(); s.bind(('10.9.0.1',2222)); "
            's.listen(); time.sleep(30)" &',
            "server=$!",
            "sleep 0.5",
            f"{connect} && echo before=open",
            heal_command(),  # no chain yet: fine
            install_command(["10.9.0.2"]),
            install_command(["10.9.0.2"]),  # idempotent: still one jump, one rule
            "echo jumps=$(iptables -w -S INPUT | grep -c SQUALL)",
            "echo rules=$(iptables -w -S SQUALL | grep -c DROP)",
            f"if {connect}; then echo during=open; else echo during=cut; fi",
            heal_command(),
            heal_command(),
            f"{connect} && echo after=open",
            remove_chain_command(),
            "iptables -w -n -L SQUALL >/dev/null 2>&1 || echo chain=gone",
            'kill "$server"',
        ]
    )
    result = subprocess.run(
        ["unshare", "--net", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert lines == [
        "before=open",
        "jumps=1",
        "rules=1",
        "during=cut",
        "after=open",
        "chain=gone",
    ], result.stdout + result.stderr
