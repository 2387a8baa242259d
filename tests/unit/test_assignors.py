"""The range and round-robin assignors against kafka-python's (an independent implementation
of Kafka's), on random groups: the same assignment, every partition to exactly one member."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from system_under_test.client.assignors import Assignment, range_assignor, roundrobin_assignor

TOPICS = ["a", "b", "c"]
groups = st.fixed_dictionaries(
    {
        "subscriptions": st.dictionaries(
            st.text("mnopq", min_size=1, max_size=4),
            st.lists(st.sampled_from(TOPICS), min_size=1, unique=True),
            min_size=1,
            max_size=6,
        ),
        "partitions": st.fixed_dictionaries({t: st.integers(0, 9) for t in TOPICS}),
    }
)


def theirs(
    assignor: type, subscriptions: dict[str, list[str]], partitions: dict[str, int]
) -> Assignment:
    cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(partitions[t])))
    members = [
        SimpleNamespace(member_id=m, group_instance_id=None, metadata=SimpleNamespace(topics=ts))
        for m, ts in subscriptions.items()
    ]
    out = assignor.assign(cluster, members)
    return {
        m: {topic: sorted(ps) for topic, ps in a.assigned_partitions if ps} for m, a in out.items()
    }


def every_partition_once(assignment: Assignment, group: dict) -> None:
    owned = [(t, p) for topics in assignment.values() for t, ps in topics.items() for p in ps]
    subscribed = {t for ts in group["subscriptions"].values() for t in ts}
    expected = [(t, p) for t in subscribed for p in range(group["partitions"][t])]
    assert sorted(owned) == sorted(expected)
    for member, topics in assignment.items():
        assert set(topics) <= set(group["subscriptions"][member])


@settings(max_examples=200, deadline=None, database=None)
@given(groups)
def test_range_matches_kafkas(group: dict) -> None:
    ours = range_assignor(group["subscriptions"], group["partitions"])
    every_partition_once(ours, group)
    assert ours == theirs(RangePartitionAssignor, group["subscriptions"], group["partitions"])


@settings(max_examples=200, deadline=None, database=None)
@given(groups)
def test_roundrobin_matches_kafkas(group: dict) -> None:
    ours = roundrobin_assignor(group["subscriptions"], group["partitions"])
    every_partition_once(ours, group)
    # kafka-python 3's round robin fails when a member skips a topic (it takes the next
    # member's (instance id, member id) pair for its id), so it is the reference only where
    # every member subscribes to the same topics; Kafka's Java assignor skips such members.
    if len({frozenset(ts) for ts in group["subscriptions"].values()}) == 1:
        reference = theirs(RoundRobinPartitionAssignor, group["subscriptions"], group["partitions"])
        assert ours == reference


def test_roundrobin_skips_members_not_subscribed_to_a_topic() -> None:
    assert roundrobin_assignor({"m1": ["a"], "m2": ["a", "b"], "m3": ["b"]}, {"a": 3, "b": 3}) == {
        "m1": {"a": [0, 2]},
        "m2": {"a": [1], "b": [0, 2]},
        "m3": {"b": [1]},
    }


def test_range_gives_the_first_members_the_extra_partitions() -> None:
    assert range_assignor({"m1": ["a"], "m2": ["a"]}, {"a": 3}) == {
        "m1": {"a": [0, 1]},
        "m2": {"a": [2]},
    }
