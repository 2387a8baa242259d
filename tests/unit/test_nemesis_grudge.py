"""Partition shapes as Jepsen grudges: the properties Jepsen's nemesis tests check."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis.errors import FaultError
from nemesis.grudge import (
    PartitionGrudge,
    bridge,
    complete_grudge,
    halves,
    isolate,
    isolate_zookeeper,
    majorities_ring,
    majority,
    one_way,
    random_halves,
    shape_grudge,
    sorted_nodes,
)

FIVE = ["n1", "n2", "n3", "n4", "n5"]

node_sets = st.integers(min_value=3, max_value=11).map(lambda n: [f"n{i}" for i in range(1, n + 1)])
seeds = st.integers(min_value=0, max_value=2**32)


def assert_complete_cut(grudge: PartitionGrudge, components: list[list[str]]) -> None:
    """Nodes in one component talk both ways; nodes in different ones not at all."""
    for a, b in itertools.permutations([n for c in components for n in c], 2):
        same = any(a in c and b in c for c in components)
        assert grudge.can_reach(a, b) is same, (a, b)


def test_natural_order() -> None:
    assert sorted_nodes(["n10", "n2", "zk1", "n1", "n2"]) == ["n1", "n2", "n10", "zk1"]


def test_halves_is_jepsens_bisect() -> None:
    grudge = halves(FIVE)
    assert grudge.to_json() == {
        "n1": ["n3", "n4", "n5"],
        "n2": ["n3", "n4", "n5"],
        "n3": ["n1", "n2"],
        "n4": ["n1", "n2"],
        "n5": ["n1", "n2"],
    }
    assert_complete_cut(grudge, [["n1", "n2"], ["n3", "n4", "n5"]])


def test_isolate_cuts_one_node_from_all_others() -> None:
    grudge = isolate([*FIVE, "zk1"], ["n3"])
    assert_complete_cut(grudge, [["n3"], ["n1", "n2", "n4", "n5", "zk1"]])
    assert grudge.drops["n3"] == {"n1", "n2", "n4", "n5", "zk1"}


def test_isolate_refuses_unknown_or_every_node() -> None:
    with pytest.raises(FaultError, match="not among"):
        isolate(FIVE, ["n9"])
    with pytest.raises(FaultError, match="some but not all"):
        isolate(["n1", "n2"], ["n1", "n2"])


@given(node_sets, seeds)
def test_random_halves_is_a_complete_symmetric_cut(nodes: list[str], seed: int) -> None:
    grudge = random_halves(nodes, random.Random(seed))
    assert grudge.is_symmetric()
    sides = {frozenset(grudge.reachable_from(n, nodes)) for n in nodes}
    assert len(sides) == 2
    small, large = sorted(sides, key=len)
    assert len(small) == len(nodes) // 2 and len(small) + len(large) == len(nodes)
    assert_complete_cut(grudge, [sorted(small), sorted(large)])


@given(node_sets, seeds)
def test_majorities_ring_every_node_sees_a_distinct_majority(nodes: list[str], seed: int) -> None:
    grudge = majorities_ring(nodes, random.Random(seed))
    seen = {n: frozenset(set(nodes) - grudge.drops.get(n, frozenset())) for n in nodes}
    for node, visible in seen.items():
        assert node in visible
        assert len(visible) == majority(len(nodes))
    assert len(set(seen.values())) == len(nodes)
    if majority(len(nodes)) % 2 == 1:  # a window centred on its node: n=4, 5, 8, 9...
        assert grudge.is_symmetric()


def test_majorities_ring_of_five_matches_jepsen() -> None:
    grudge = majorities_ring(FIVE, random.Random(7))
    for node in FIVE:
        assert len(grudge.drops[node]) == 2  # sees itself and two neighbours of the ring
    assert len({grudge.drops[n] for n in FIVE}) == 5
    assert grudge.is_symmetric()


@given(node_sets, seeds)
def test_bridge_connects_two_halves_through_one_node(nodes: list[str], seed: int) -> None:
    grudge = bridge(nodes, random.Random(seed))
    assert grudge.is_symmetric()
    hubs = [n for n in nodes if grudge.reachable_from(n, nodes) == set(nodes)]
    assert len(hubs) == 1
    hub = hubs[0]
    others = [n for n in nodes if n != hub]
    sides = {frozenset(grudge.reachable_from(n, others)) for n in others}
    assert len(sides) == 2
    assert all(grudge.can_reach(hub, n) and grudge.can_reach(n, hub) for n in others)


@given(node_sets, st.data())
def test_one_way_drops_only_at_the_destination(nodes: list[str], data: st.DataObject) -> None:
    sources = data.draw(st.lists(st.sampled_from(nodes), min_size=1, unique=True))
    destinations = [n for n in nodes if n not in sources]
    if not destinations:
        return
    grudge = one_way(sources, destinations)
    for src in sources:
        assert src not in grudge.drops
        for dst in destinations:
            assert not grudge.can_reach(src, dst)
            assert grudge.can_reach(dst, src)


def test_isolate_zookeeper_leaves_brokers_connected() -> None:
    grudge = isolate_zookeeper(["n1", "n2", "n3"], "zk1")
    assert grudge.is_symmetric()
    assert grudge.to_json() == {
        "n1": ["zk1"],
        "n2": ["zk1"],
        "n3": ["zk1"],
        "zk1": ["n1", "n2", "n3"],
    }
    assert all(grudge.can_reach(a, b) for a, b in itertools.permutations(["n1", "n2", "n3"], 2))


@given(node_sets, seeds, st.sampled_from(["random-halves", "majorities-ring", "bridge", "isolate"]))
def test_shapes_are_deterministic_for_a_seed(nodes: list[str], seed: int, shape: str) -> None:
    first = shape_grudge(shape, nodes, rng=random.Random(seed))
    assert first == shape_grudge(shape, list(reversed(nodes)), rng=random.Random(seed))


@given(st.dictionaries(st.sampled_from(FIVE), st.sets(st.sampled_from(FIVE))))
def test_grudge_json_round_trip(drops: dict[str, set[str]]) -> None:
    cleaned = {dst: frozenset(srcs - {dst}) for dst, srcs in drops.items()}
    grudge = PartitionGrudge(cleaned)
    assert PartitionGrudge.from_json(grudge.to_json()) == grudge
    assert all(srcs for srcs in grudge.to_json().values())


def test_shape_grudge_defaults_and_errors() -> None:
    rng = random.Random(1)
    zk_cut = shape_grudge("isolate-zk", [*FIVE, "zk1"], rng=rng, zookeeper="zk1")
    assert zk_cut.drops["zk1"] == set(FIVE)
    only = shape_grudge("isolate-zk", [*FIVE, "zk1"], rng=rng, targets=["n2"], zookeeper="zk1")
    assert only.to_json() == {"n2": ["zk1"], "zk1": ["n2"]}
    with pytest.raises(FaultError, match="takes no targets"):
        shape_grudge("halves", FIVE, rng=rng, targets=["n1"])
    with pytest.raises(FaultError, match="unknown partition shape"):
        shape_grudge("triangle", FIVE, rng=rng)
    with pytest.raises(FaultError, match="at least 3 nodes"):
        shape_grudge("majorities-ring", ["n1", "n2"], rng=rng)
    with pytest.raises(FaultError, match="own packets"):
        PartitionGrudge({"n1": frozenset({"n1"})})


def test_complete_grudge_of_three_components() -> None:
    grudge = complete_grudge([["n1"], ["n2", "n3"], ["n4"]])
    assert_complete_cut(grudge, [["n1"], ["n2", "n3"], ["n4"]])
