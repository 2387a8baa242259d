"""Role targets resolved from an observed cluster view (plain data; the live observation is
exercised by the integration and docker tests)."""

from __future__ import annotations

import random
from dataclasses import replace

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


# --- brokers that lead nothing ---------------------------------------------------------------


def idle(*targets: str, view: ClusterView = VIEW, seed: int = 0) -> list[str]:
    specs = [parse_target(t) for t in targets]
    return list(resolve_targets(specs, view, random.Random(seed)).nodes)


def test_an_idle_broker_is_live_and_leads_no_partition() -> None:
    # n1 and n2 lead; n5 is in no ISR, so without ZooKeeper's record it is not known live
    assert {idle("idle-broker", seed=s)[0] for s in range(40)} == {"n3", "n4"}
    registered = replace(VIEW, live=(1, 2, 4, 5))  # n3 lost its session, n5 registered
    assert {idle("idle-broker", view=registered, seed=s)[0] for s in range(40)} == {"n4", "n5"}
    resolution = resolve_targets([parse_target("idle-broker")], VIEW, random.Random(0))
    assert set(resolution.observed) == {"t-0", "t-1", "lonely-0"}  # what showed it idle


def test_an_idle_follower_follows_the_partition_and_leads_nothing() -> None:
    assert {idle("idle-follower:t-0", seed=s)[0] for s in range(40)} == {"n3", "n4"}
    assert VIEW.idle_followers("t-0") == [3, 4] and VIEW.idle_followers("lonely-0") == []
    t1_led_by_3 = replace(
        VIEW, partitions={**VIEW.partitions, "t-1": PartitionView(3, 6, (3, 4, 5), (3, 4))}
    )
    assert idle("idle-follower:t-0", view=t1_led_by_3) == ["n4"]
    assert parse_target("idle-follower") == TargetSpec("idle-follower")


def test_the_last_follower_is_the_one_a_clean_election_picks_last() -> None:
    assert resolve("last-follower:t-0") == ["n4"]  # replicas (2, 3, 4), led by 2
    shuffled = replace(VIEW, partitions={"t-0": PartitionView(3, 1, (4, 3, 2, 5), (2, 3, 4, 5))})
    picked = resolve_targets([parse_target("last-follower:t-0")], shuffled, random.Random(0))
    assert list(picked.nodes) == ["n5"]
    out_of_isr = replace(VIEW, partitions={"t-0": PartitionView(2, 1, (2, 3, 4), (2, 3))})
    assert list(
        resolve_targets([parse_target("last-follower:t-0")], out_of_isr, random.Random(0)).nodes
    ) == ["n3"]
    with pytest.raises(TargetError, match="no follower in its ISR"):
        resolve("last-follower:lonely-0")


def test_without_an_idle_broker_the_roles_refuse() -> None:
    everyone_leads = ClusterView(
        ("n1", "n2"),
        "zk1",
        {
            "t-0": PartitionView(1, 1, (1, 2), (1, 2)),
            "t-1": PartitionView(2, 1, (2, 1), (2, 1)),
        },
        live=(1, 2),
    )
    with pytest.raises(TargetError, match="every live broker leads a partition"):
        idle("idle-broker", view=everyone_leads)
    with pytest.raises(TargetError, match="no follower in the ISR \\[1, 2\\] of t-0 is free"):
        idle("idle-follower:t-0", view=everyone_leads)


def test_idle_roles_observe_every_partition_of_the_workload() -> None:
    workload = ("t-0", "t-1", "t-2")
    assert needs([parse_target("idle-broker")], None, workload) == (set(workload), False)
    assert needs([parse_target("idle-follower:t-1")], None, workload) == (set(workload), False)
    with pytest.raises(FaultError, match="looks across the workload's partitions"):
        needs([parse_target("idle-broker")], "t-0")
