"""The nemesis's faults on consumer-group members, through the workload's registry of them
(`workloads.group_members.GroupMembers`), here holding real processes (`sleep`) as members:
a pause stops the process, healing resumes it, a kill ends it, a leave closes it."""

from __future__ import annotations

import random
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemesis import Fault, Nemesis
from nemesis.errors import FaultError, TargetError, UnsupportedFaultError
from nemesis.fault import MEMBER_FAULTS
from nemesis.schedule import ScheduleSpec, generate_schedule, not_applicable
from nemesis.timing import Detectors
from squall.cluster.cluster import Cluster, ClusterState, NodeState
from squall.cluster.local import LocalRuntime
from workloads.group_members import GroupMembers


class SleepingMember:
    """A member host whose member is a `sleep` process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.process = subprocess.Popen(["sleep", "60"])
        self.left = False

    def member_pid(self) -> int | None:
        return self.process.pid if self.process.poll() is None else None

    def kill_member(self) -> bool:
        running = self.process.poll() is None
        self.process.kill()
        self.process.wait()
        return running

    def leave(self, timeout_s: float) -> bool:
        self.process.terminate()
        self.process.wait(timeout_s)
        self.left = True
        return True


def state_of(pid: int) -> str:
    """The process's state once it settles (a signal is delivered asynchronously): T
    stopped, S or R running."""
    deadline = time.monotonic() + 5.0
    while True:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
        if state in "TS" or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


@pytest.fixture
def members() -> Iterator[tuple[GroupMembers, list[SleepingMember]]]:
    registry = GroupMembers()
    registry.start()
    hosts = [SleepingMember(f"consumer-{i}") for i in range(3)]
    for host in hosts:
        registry.add(host)
    yield registry, hosts
    registry.close()
    for host in hosts:
        host.kill_member()


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    state = ClusterState(
        run_id="members",
        runtime="local",
        brokers=[NodeState(f"n{i}", f"127.0.9.{i}", root=str(tmp_path / f"n{i}")) for i in (1, 2)],
        zookeeper=NodeState("zk1", "127.0.9.10", root=str(tmp_path / "zk1")),
    )
    attached: Cluster = LocalRuntime().attach(state)
    return attached


def test_a_paused_member_is_stopped_until_healed_and_replays_on_the_same_member(
    cluster: Cluster, members: tuple[GroupMembers, list[SleepingMember]]
) -> None:
    registry, hosts = members
    nemesis = Nemesis(cluster, rng=random.Random(1), members=registry)
    paused = nemesis.apply(Fault("pause-member"))
    (name,) = paused.value["members"]
    host = next(h for h in hosts if h.name == name)
    assert paused.value["outcome"] == {name: "paused"} and paused.is_resolved
    assert state_of(host.process.pid) == "T"
    # A second pause draws another member: the first is asleep already.
    other = nemesis.apply(Fault("pause-member"))
    assert other.value["members"] != [name]
    healed = nemesis.heal()
    assert [f.f for f in healed] == ["resume-member"]
    assert sorted(healed[0].value["members"]) == sorted([name, *other.value["members"]])
    assert all(state_of(h.process.pid) == "S" for h in hosts)
    assert nemesis.active.quiet
    # The fault as applied names its member: applied again, it hits the same one.
    again = nemesis.apply(Fault.from_json(paused.to_json()).request())
    assert again.value["members"] == [name]
    nemesis.apply(Fault("resume-member"))
    assert state_of(host.process.pid) == "S"


def test_killed_and_leaving_members_are_gone_and_not_drawn_again(
    cluster: Cluster, members: tuple[GroupMembers, list[SleepingMember]]
) -> None:
    registry, hosts = members
    nemesis = Nemesis(cluster, rng=random.Random(2), members=registry)
    killed = nemesis.apply(Fault("kill-member", {"members": ["consumer-1"]}))
    assert killed.value["outcome"] == {"consumer-1": "killed"}
    assert hosts[1].process.returncode == -9
    left = nemesis.apply(Fault("leave-member", {"count": 5}))
    assert left.value["members"] == ["consumer-0", "consumer-2"]
    assert all(h.left for h in (hosts[0], hosts[2]))
    assert registry.running() == []
    with pytest.raises(TargetError, match="no consumer-group member is running"):
        nemesis.apply(Fault("pause-member"))
    assert nemesis.apply(Fault("kill-member", {"members": ["consumer-1"]})).value["outcome"] == {
        "consumer-1": "not-running"
    }


def test_member_faults_need_members_and_say_whom_they_hit(cluster: Cluster) -> None:
    with pytest.raises(UnsupportedFaultError, match="group_membership"):
        Nemesis(cluster, rng=random.Random(0)).apply(Fault("kill-member"))
    with pytest.raises(FaultError, match="not with targets"):
        Fault("pause-member", {"targets": ["leader"]})
    with pytest.raises(FaultError, match="count must be"):
        Fault("kill-member", {"count": 0})
    with pytest.raises(FaultError, match="members must be a list"):
        Fault("leave-member", {"members": "consumer-0"})


def test_the_default_mix_faults_members_alongside_the_brokers_where_there_are_members() -> None:
    detectors = Detectors(member_session_s=6.0)
    spec = ScheduleSpec(generator="default", time_limit_s=120.0, seed=4, detectors=detectors)
    faults = generate_schedule(spec).faults
    ours = [f for f in faults if f.fault.f in MEMBER_FAULTS]
    assert {f.fault.f for f in ours} == MEMBER_FAULTS
    assert any(f.scenario for f in faults)  # the brokers' scenarios still run
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)
    by_id = {f.id: f for f in faults}
    resumes = [f for f in ours if f.fault.f == "resume-member"]
    assert resumes and all(by_id[f.heals].fault.f == "pause-member" for f in resumes if f.heals)
    # Each pause outlasts the member's session timeout, so that it wakes up a zombie.
    assert all(
        1.5 * 6.0 <= f.at_s - by_id[f.heals].at_s <= 2.5 * 6.0 + 0.001
        for f in resumes
        if f.heals is not None and f.at_s < 120.0
    )
    without = ScheduleSpec(
        generator="default",
        time_limit_s=120.0,
        seed=4,
        detectors=detectors,
        capabilities=spec.capabilities - {"members"},
    )
    assert not [f for f in generate_schedule(without).faults if f.fault.f in MEMBER_FAULTS]
    assert "member-pause" not in not_applicable(without)


def test_a_member_slow_to_leave_does_not_hold_up_the_nodes_faults(
    cluster: Cluster, members: tuple[GroupMembers, list[SleepingMember]]
) -> None:
    registry, hosts = members
    nemesis = Nemesis(cluster, rng=random.Random(3), members=registry)
    leaving = threading.Event()
    let_go = threading.Event()
    slow = hosts[0]

    def leave_slowly(timeout_s: float) -> bool:
        leaving.set()
        let_go.wait(timeout_s)
        slow.left = True
        return True

    slow.leave = leave_slowly  # type: ignore[method-assign]
    member_fault = threading.Thread(
        target=nemesis.apply, args=(Fault("leave-member", {"members": ["consumer-0"]}),)
    )
    member_fault.start()
    try:
        assert leaving.wait(5.0)
        # The nodes' side answers while the member is still leaving.
        assert nemesis.heal() == []
        assert member_fault.is_alive() and not slow.left
    finally:
        let_go.set()
        member_fault.join(10.0)
    assert slow.left
