"""Network partitions as Jepsen grudges: ``grudge[dst]`` is the set of sources dst drops.

Pure functions over node names and a ``random.Random``, after Jepsen's ``nemesis.clj``
(complete-grudge, bisect, bridge, majorities-ring). A grudge says nothing about how it is
applied; ``nemesis.partitioner`` turns it into iptables rules inside each destination.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemesis.errors import FaultError

SHAPES = (
    "isolate",
    "halves",
    "random-halves",
    "majorities-ring",
    "bridge",
    "one-way",
    "isolate-zk",
)
"""Every partition shape a ``start-partition`` fault may name."""

TARGETED_SHAPES = frozenset({"isolate", "one-way", "isolate-zk"})
"""Shapes that take ``targets`` (the nodes to cut); the others split the whole node set."""


def node_sort_key(name: str) -> tuple[Any, ...]:
    """Natural order, so that ``n2`` sorts before ``n10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def sorted_nodes(names: Iterable[str]) -> list[str]:
    """Distinct node names in natural order."""
    return sorted(set(names), key=node_sort_key)


@dataclass(frozen=True)
class PartitionGrudge:
    """Who drops whom: ``drops[dst]`` = the sources whose packets dst drops on INPUT."""

    drops: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cleaned = {dst: frozenset(srcs) for dst, srcs in self.drops.items() if srcs}
        for dst, srcs in cleaned.items():
            if dst in srcs:
                raise FaultError(f"grudge: node {dst} cannot drop its own packets")
        object.__setattr__(self, "drops", cleaned)

    def __hash__(self) -> int:
        return hash(frozenset(self.drops.items()))

    def __bool__(self) -> bool:
        return bool(self.drops)

    @property
    def nodes(self) -> list[str]:
        """Every node the grudge mentions, as destination or source."""
        return sorted_nodes([*self.drops, *(s for srcs in self.drops.values() for s in srcs)])

    def can_reach(self, src: str, dst: str) -> bool:
        """Whether packets from src arrive at dst."""
        return src not in self.drops.get(dst, frozenset())

    def is_symmetric(self) -> bool:
        """Every cut goes both ways."""
        return all(
            dst in self.drops.get(src, frozenset()) for dst, s in self.drops.items() for src in s
        )

    def reachable_from(self, node: str, universe: Iterable[str]) -> set[str]:
        """The nodes of universe that node can talk to both ways (itself included)."""
        return {
            other
            for other in universe
            if other == node or (self.can_reach(node, other) and self.can_reach(other, node))
        }

    def to_json(self) -> dict[str, list[str]]:
        """``{dst: [sources...]}`` in natural order, destinations without drops left out."""
        return {dst: sorted_nodes(self.drops[dst]) for dst in sorted_nodes(self.drops)}

    @classmethod
    def from_json(cls, doc: object) -> PartitionGrudge:
        """The inverse of ``to_json``; FaultError naming what is wrong."""
        if not isinstance(doc, Mapping):
            raise FaultError(f"grudge must be an object {{dst: [sources]}}, not {doc!r}")
        drops: dict[str, frozenset[str]] = {}
        for dst, srcs in doc.items():
            if not isinstance(dst, str) or not isinstance(srcs, list | tuple | set | frozenset):
                raise FaultError(f"grudge entry {dst!r}: expected a node name and a list of nodes")
            if not all(isinstance(s, str) and s for s in srcs):
                raise FaultError(f"grudge entry {dst!r}: sources must be node names, got {srcs!r}")
            drops[dst] = frozenset(srcs)
        return cls(drops)


def complete_grudge(components: Sequence[Collection[str]]) -> PartitionGrudge:
    """No node can talk to any node outside its own component (Jepsen's complete-grudge)."""
    universe = {node for component in components for node in component}
    drops: dict[str, frozenset[str]] = {}
    for component in components:
        outside = frozenset(universe - set(component))
        for node in component:
            drops[node] = outside
    return PartitionGrudge(drops)


def bisect(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split in two at the middle; the first half is the smaller one for odd counts."""
    middle = len(nodes) // 2
    return list(nodes[:middle]), list(nodes[middle:])


def _require(nodes: Sequence[str], at_least: int, shape: str) -> None:
    if len(nodes) < at_least:
        raise FaultError(f"a {shape} partition needs at least {at_least} nodes, got {list(nodes)}")


def isolate(nodes: Sequence[str], targets: Collection[str]) -> PartitionGrudge:
    """Cut targets (together) from every other node, both ways."""
    universe = sorted_nodes(nodes)
    unknown = set(targets) - set(universe)
    if unknown:
        raise FaultError(f"cannot isolate {sorted_nodes(unknown)}: not among {universe}")
    rest = [n for n in universe if n not in targets]
    if not targets or not rest:
        raise FaultError(f"isolate needs some but not all of {universe}, got {sorted(targets)}")
    return complete_grudge([sorted_nodes(targets), rest])


def halves(nodes: Sequence[str]) -> PartitionGrudge:
    """The first half of the sorted nodes against the second half."""
    _require(nodes, 2, "halves")
    return complete_grudge(bisect(sorted_nodes(nodes)))


def random_halves(nodes: Sequence[str], rng: random.Random) -> PartitionGrudge:
    """Two halves of a seeded shuffle of the nodes."""
    _require(nodes, 2, "random-halves")
    shuffled = sorted_nodes(nodes)
    rng.shuffle(shuffled)
    return complete_grudge(bisect(shuffled))


def majority(count: int) -> int:
    """The smallest number of nodes that is more than half."""
    return count // 2 + 1


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> PartitionGrudge:
    """Every node sees a majority, and no two nodes see the same one (Jepsen's ring).

    The nodes are shuffled into a ring; each window of ``majority(n)`` consecutive nodes is
    what the node in its middle can hear. It is symmetric when the majority is odd (5 nodes).
    """
    _require(nodes, 3, "majorities-ring")
    ring = sorted_nodes(nodes)
    rng.shuffle(ring)
    count, size = len(ring), majority(len(ring))
    universe = frozenset(ring)
    drops: dict[str, frozenset[str]] = {}
    for start in range(count):
        window = [ring[(start + k) % count] for k in range(size)]
        drops[window[size // 2]] = universe - set(window)
    return PartitionGrudge(drops)


def bridge(nodes: Sequence[str], rng: random.Random) -> PartitionGrudge:
    """Two halves that only one bridge node connects: the bridge sees everyone.

    As Jepsen's ``(comp bridge shuffle)``: shuffle, bisect, and the first node of the second
    half becomes the bridge.
    """
    _require(nodes, 3, "bridge")
    shuffled = sorted_nodes(nodes)
    rng.shuffle(shuffled)
    first, second = bisect(shuffled)
    hub = second[0]
    cut = complete_grudge([first, second])
    return PartitionGrudge({dst: srcs - {hub} for dst, srcs in cut.drops.items() if dst != hub})


def one_way(sources: Collection[str], destinations: Collection[str]) -> PartitionGrudge:
    """Packets from sources never arrive at destinations; the other direction still works."""
    if not sources or not destinations:
        raise FaultError("a one-way partition needs sources and destinations")
    return PartitionGrudge({dst: frozenset(sources) - {dst} for dst in destinations})


def isolate_zookeeper(brokers: Collection[str], zookeeper: str) -> PartitionGrudge:
    """Cut brokers from the ZooKeeper node only, both ways; brokers still see each other."""
    if not brokers or zookeeper in brokers:
        raise FaultError(f"isolate-zk needs broker nodes other than {zookeeper}, got {brokers}")
    drops = {broker: frozenset({zookeeper}) for broker in brokers}
    drops[zookeeper] = frozenset(brokers)
    return PartitionGrudge(drops)


def shape_grudge(
    shape: str,
    nodes: Sequence[str],
    *,
    rng: random.Random,
    targets: Sequence[str] = (),
    destinations: Sequence[str] = (),
    zookeeper: str | None = None,
) -> PartitionGrudge:
    """The grudge of a named shape over nodes.

    ``targets``: the isolated nodes (isolate; default one random node), the sources that
    cannot be heard (one-way; default one random node), or the brokers cut from ZooKeeper
    (isolate-zk; default every node but ``zookeeper``). ``destinations`` (one-way only)
    default to every other node.
    """
    universe = sorted_nodes(nodes)
    if shape not in SHAPES:
        raise FaultError(f"unknown partition shape {shape!r}; use one of {', '.join(SHAPES)}")
    if targets and shape not in TARGETED_SHAPES:
        raise FaultError(
            f"shape {shape} splits all nodes and takes no targets; "
            f"targets go with {', '.join(sorted(TARGETED_SHAPES))}"
        )
    if destinations and shape != "one-way":
        raise FaultError("only a one-way partition takes destinations")
    if shape == "isolate":
        return isolate(universe, targets or [rng.choice(universe)])
    if shape == "halves":
        return halves(universe)
    if shape == "random-halves":
        return random_halves(universe, rng)
    if shape == "majorities-ring":
        return majorities_ring(universe, rng)
    if shape == "bridge":
        return bridge(universe, rng)
    if shape == "one-way":
        sources = list(targets) or [rng.choice(universe)]
        return one_way(sources, list(destinations) or [n for n in universe if n not in sources])
    if zookeeper is None:
        raise FaultError("isolate-zk needs the name of the ZooKeeper node")
    return isolate_zookeeper(list(targets) or [n for n in universe if n != zookeeper], zookeeper)
