"""Role targets resolved from an observed cluster view (plain data; the live observation is
exercised by the integration and docker tests)."""

from __future__ import annotations

import random

import pytest

from nemesis.errors import FaultError, TargetError
from nemesis.targets import (
    ClusterView,
    PartitionView,
    TargetSpec,
    minority_size,
    needs,
    parse_key,
    parse_target,
    resolve_targets,
)

BROKERS = ("n1", "n2", "n3", "n4", "n5")
VIEW = ClusterView(
    BROKERS,
    "zk1",
    {
        "t-0": PartitionView(leader=2, leader_epoch=4, replicas=(2, 3, 4), isr=(2, 3, 4)),
        "t-1": PartitionView(leader=-1, leader_epoch=5, replicas=(3, 4, 5), isr=(3,)),
        "lonely-0": PartitionView(leader=1, leader_epoch=0, replicas=(1,), isr=(1,)),
    },
    controller=5,
    source="brokers",
)


def resolve(*targets: str, seed: int = 0, hint: str | None = None) -> list[str]:
    specs = [parse_target(t) for t in targets]
    return list(resolve_targets(specs, VIEW, random.Random(seed), topic_hint=hint).nodes)


def test_parse_target_syntax() -> None:
    assert parse_target("n2") == TargetSpec("node", "n2")
    assert parse_target("node:n2") == TargetSpec("node", "n2")
    assert parse_target("leader:my-topic-3") == TargetSpec("leader", "my-topic-3")
    assert parse_target("follower") == TargetSpec("follower")
    assert str(parse_target("leader:t-0")) == "leader:t-0"
    assert parse_key("my-topic-3") == ("my-topic", 3)
    for bad in ["", "  ", "n2!", "node:", "leader:t", "boss:n1"]:
        with pytest.raises(FaultError):
            parse_target(bad)


def test_names_and_simple_roles() -> None:
    assert resolve("n3", "node:n1") == ["n1", "n3"]
    assert resolve("zk") == ["zk1"]
    assert resolve("zk1") == ["zk1"]
    assert resolve("brokers") == list(BROKERS)
    assert resolve("all") == [*BROKERS, "zk1"]
    assert resolve("n2", "n2", "leader:t-0") == ["n2"]


def test_partition_roles() -> None:
    specs = [parse_target("leader:t-0"), parse_target("controller")]
    resolution = resolve_targets(specs, VIEW, random.Random(0))
    assert resolution.nodes == ("n2", "n5")
    assert resolution.roles == {"leader:t-0": ["n2"], "controller": ["n5"]}
    assert resolution.observed == {
        "t-0": {"leader": 2, "leader_epoch": 4, "replicas": [2, 3, 4], "isr": [2, 3, 4]}
    }
    followers = {resolve("follower:t-0", seed=s)[0] for s in range(40)}
    assert followers == {"n3", "n4"}
    assert resolve("leader", hint="lonely-0") == ["n1"]
    assert resolve("followers:t-0") == ["n3", "n4"]
    assert resolve("isr:t-0") == ["n2", "n3", "n4"]
    assert resolve("isr:t-1") == ["n3"]
    assert parse_target("isr:t-0") == TargetSpec("isr", "t-0")


def test_roles_without_a_holder_fail_clearly() -> None:
    with pytest.raises(TargetError, match="t-1 has no leader"):
        resolve("leader:t-1")
    with pytest.raises(TargetError, match="no follower"):
        resolve("follower:lonely-0")
    with pytest.raises(TargetError, match="no follower"):
        resolve("followers:lonely-0")
    with pytest.raises(TargetError, match="unknown to the cluster"):
        resolve("leader:nope-0")
    with pytest.raises(TargetError, match="no node 'n9'"):
        resolve("n9")
    with pytest.raises(FaultError, match="topic_hint"):
        resolve("leader")
    no_controller = ClusterView(BROKERS, "zk1", controller=None)
    with pytest.raises(TargetError, match="no controller"):
        resolve_targets([parse_target("controller")], no_controller, random.Random(0))


def test_random_choices_are_seeded_and_within_bounds() -> None:
    assert resolve("minority", seed=3) == resolve("minority", seed=3)
    picks = {tuple(resolve("minority", seed=s)) for s in range(50)}
    assert len(picks) > 1
    assert all(len(p) == 2 and set(p) <= set(BROKERS) for p in picks)
    assert {resolve("random", seed=s)[0] for s in range(50)} == set(BROKERS)
    assert [minority_size(n) for n in (1, 2, 3, 4, 5, 7)] == [1, 1, 1, 1, 2, 3]


def test_needs_lists_what_to_observe() -> None:
    specs = [parse_target(t) for t in ["n1", "leader:t-0", "follower", "controller", "minority"]]
    assert needs(specs, "t-9") == ({"t-0", "t-9"}, True)
    assert needs([parse_target("random")], None) == (set(), False)
