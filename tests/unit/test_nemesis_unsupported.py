"""What a runtime cannot do is refused with a message naming the runtimes that can.

The cluster is a real local-runtime Cluster with no processes running: refusals happen
before anything is touched, and healing a quiet cluster finds nothing to do.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nemesis import Fault, Nemesis, heal_all
from nemesis.errors import UnsupportedFaultError
from squall.cluster.cluster import Cluster, ClusterState, NodeState

local = pytest.importorskip("squall.cluster.local", reason="the local runtime is not there yet")


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    state = ClusterState(
        run_id="unsupported",
        runtime="local",
        brokers=[
            NodeState(f"n{i}", f"127.0.9.{i}", root=str(tmp_path / f"n{i}")) for i in (1, 2, 3)
        ],
        zookeeper=NodeState("zk1", "127.0.9.10", root=str(tmp_path / "zk1")),
    )
    cluster: Cluster = local.LocalRuntime().attach(state)
    return cluster


def test_partitions_are_refused_on_local(cluster: Cluster) -> None:
    nemesis = Nemesis(cluster, rng=random.Random(0))
    expected = "partitions need the docker or ssh runtime; this cluster runs on local"
    with pytest.raises(UnsupportedFaultError, match=expected):
        nemesis.apply(Fault("start-partition", {"shape": "halves"}))
    with pytest.raises(UnsupportedFaultError, match=expected):
        nemesis.apply(Fault("start-partition", {"grudge": {"n1": ["n2"]}}))
    assert nemesis.active.quiet


def test_netem_and_freeze_are_refused_on_local(cluster: Cluster) -> None:
    nemesis = Nemesis(cluster, rng=random.Random(0))
    with pytest.raises(UnsupportedFaultError, match=r"netem.*docker or ssh runtime.*local"):
        nemesis.apply(Fault("start-netem", {"delay_ms": 100}))
    with pytest.raises(UnsupportedFaultError, match=r"needs the docker runtime.*runs on local"):
        nemesis.apply(Fault("freeze", {"targets": ["n1"]}))
    assert nemesis.active.quiet


def test_healing_a_quiet_cluster_does_nothing_harmful(cluster: Cluster) -> None:
    nemesis = Nemesis(cluster, rng=random.Random(0))
    assert nemesis.heal() == []
    assert nemesis.heal(restart_killed=True) == []
    done = heal_all(cluster)
    assert [f.f for f in done] == ["resume", "drop-snapshots"]
    assert done[0].value["outcome"] == {n: "not-running" for n in ["n1", "n2", "n3", "zk1"]}
    assert done[1].value == {
        "targets": ["n1", "n2", "n3"],
        "outcome": {n: "no-snapshots" for n in ["n1", "n2", "n3"]},
    }
    assert heal_all(cluster) == done


def test_a_fault_on_a_stopped_daemon_says_so(cluster: Cluster) -> None:
    nemesis = Nemesis(cluster, rng=random.Random(0))
    applied = nemesis.apply(Fault("kill", {"targets": ["n2", "zk"]}))
    assert applied.value["targets"] == ["n2", "zk1"]
    assert applied.value["outcome"] == {"n2": "not-running", "zk1": "not-running"}
    assert applied.value["requested"] == {"targets": ["n2", "zk"]}
    assert applied.value["roles"] == {"zk": ["zk1"]}
    assert nemesis.active.quiet
    plain = nemesis.apply(Fault("pause", {"targets": ["n1"]}))
    assert plain.value == {"targets": ["n1"], "outcome": {"n1": "not-running"}}
