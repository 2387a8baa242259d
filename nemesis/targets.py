"""Targets of a fault, by name or by role, resolved from the live cluster when it strikes.

Syntax (one string per target):

- ``n2`` or ``node:n2``: that node; ``zk1`` names the ZooKeeper node too.
- ``zk``: the ZooKeeper node.
- ``leader:TOPIC-PARTITION``: the partition's leader now (``leader`` alone: the topic hint).
- ``follower:TOPIC-PARTITION``: a random ISR member that is not the leader.
- ``followers:TOPIC-PARTITION``: every ISR member that is not the leader.
- ``isr:TOPIC-PARTITION``: every ISR member, the leader included.
- ``idle-follower:TOPIC-PARTITION``: a random ISR member that is not the leader and leads
  no partition of the workload.
- ``last-follower:TOPIC-PARTITION``: the ISR member that is not the leader and comes last in
  the partition's assignment: the follower a clean election picks last (Kafka elects the
  first live ISR member in assignment order).
- ``controller``: the broker that is controller now.
- ``idle-broker``: a random live broker that leads no partition of the workload (it may
  follow some).
- ``random``: one random broker; ``minority``: a random minority of the brokers
  (``max(1, (n - 1) // 2)`` of them); ``brokers``: every broker; ``all``: every node,
  ZooKeeper included.

Resolution is split in two: the cluster's ``RoleObserver`` (``nemesis.protocols``) reads
what roles need from the live cluster into a ``ClusterView`` (plain data), and
``resolve_targets`` is a pure function of that view and a ``random.Random``. The resolved
node names are what the history records, so a replay hits exactly the same nodes.

The idle roles look across every partition of the workload (the Nemesis is told them): a
broker leads nothing when no observed partition has it as leader, and is live when
ZooKeeper holds its registration (without ZooKeeper's answer, when it is in some
partition's ISR). A role nobody holds is a TargetError, as for every other role.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemesis.errors import FaultError, TargetError
from nemesis.grudge import sorted_nodes

NODE_ROLES = ("zk", "controller", "random", "minority", "brokers", "all", "idle-broker")
PARTITION_ROLES = ("leader", "follower", "followers", "last-follower", "isr", "idle-follower")
IDLE_ROLES = ("idle-broker", "idle-follower")
"""Roles that look across every partition of the workload."""


@dataclass(frozen=True)
class TargetSpec:
    """One parsed target: a role (``node``, ``leader``, ...) and its argument, if any."""

    role: str
    argument: str | None = None

    def __str__(self) -> str:
        return self.role if self.argument is None else f"{self.role}:{self.argument}"

    @classmethod
    def node(cls, name: str) -> TargetSpec:
        return cls("node", name)


def parse_target(text: str) -> TargetSpec:
    """Parse one target string; FaultError listing the syntax if it is not one."""
    if not isinstance(text, str) or not text.strip():
        raise FaultError(f"a target must be a non-empty string, got {text!r}")
    role, sep, argument = text.strip().partition(":")
    if sep:
        if role == "node" and argument:
            return TargetSpec("node", argument)
        if role in PARTITION_ROLES and argument:
            parse_key(argument)
            return TargetSpec(role, argument)
        raise FaultError(
            f"target {text!r}: expected node:NAME, or {', '.join(PARTITION_ROLES)} "
            "followed by :TOPIC-PARTITION"
        )
    if role in NODE_ROLES or role in PARTITION_ROLES:
        return TargetSpec(role)
    if role.replace("-", "").replace("_", "").isalnum():
        return TargetSpec("node", role)
    raise FaultError(
        f"target {text!r} is neither a node name nor a role; roles: "
        f"{', '.join(NODE_ROLES)}, and {', '.join(PARTITION_ROLES)} with :TOPIC-PARTITION"
    )


def parse_key(key: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)``; FaultError if it is not TOPIC-PARTITION."""
    topic, sep, partition = key.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise FaultError(f"{key!r} is not a TOPIC-PARTITION key such as 't-0'")
    return topic, int(partition)


@dataclass(frozen=True)
class PartitionView:
    """A partition's leadership as observed: broker ids, ``leader == -1`` when offline."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }


@dataclass(frozen=True)
class ClusterView:
    """What role resolution needs to know of the cluster at one moment."""

    brokers: tuple[str, ...]
    zookeeper: str
    partitions: Mapping[str, PartitionView] = field(default_factory=dict)
    controller: int | None = None
    source: str = ""
    """Where roles were read from (``brokers`` or ``zookeeper``), for the record."""
    live: tuple[int, ...] | None = None
    """The brokers registered in ZooKeeper; None when not read."""
    groups: Mapping[str, PartitionView] = field(default_factory=dict)
    """The partitions that hold the workload's consumer groups' state, where observed: a
    group's coordinator is its partition's leader. Apart from ``partitions``, so that the
    roles that look across the workload's partitions do not count them."""

    def leading(self) -> set[int]:
        """The brokers that lead some observed partition."""
        return {state.leader for state in self.partitions.values() if state.leader >= 0}

    def is_live(self, broker: int) -> bool:
        """Registered in ZooKeeper, or (without that record) in some observed ISR."""
        if self.live is not None:
            return broker in self.live
        return any(broker in state.isr for state in self.partitions.values())

    def idle_followers(self, key: str) -> list[int]:
        """The live followers in ``key``'s ISR that lead no observed partition."""
        state = self.partitions.get(key)
        if state is None:
            return []
        leading = self.leading()
        return sorted(
            b for b in state.isr if b != state.leader and b not in leading and self.is_live(b)
        )


@dataclass(frozen=True)
class Resolution:
    """Resolved node names, what each role meant, and the partition states behind them."""

    nodes: tuple[str, ...]
    roles: Mapping[str, list[str]]
    observed: Mapping[str, dict[str, Any]]


def needs(
    specs: Iterable[TargetSpec], topic_hint: str | None, workload: Collection[str] = ()
) -> tuple[set[str], bool]:
    """The partition keys and whether the controller must be observed to resolve specs;
    the idle roles need every partition of the ``workload``."""
    keys: set[str] = set()
    controller = False
    for spec in specs:
        if spec.role in IDLE_ROLES:
            if not workload:
                raise FaultError(
                    f"target {spec.role!r} looks across the workload's partitions, which this "
                    "nemesis was not given (a test run gives them); name the nodes instead"
                )
            keys.update(workload)
        if spec.role in PARTITION_ROLES:
            keys.add(_key_of(spec, topic_hint))
        elif spec.role == "controller":
            controller = True
    return keys, controller


def _key_of(spec: TargetSpec, topic_hint: str | None) -> str:
    if spec.argument is not None:
        return spec.argument
    if topic_hint is None:
        raise FaultError(
            f"target {spec.role!r} needs a partition: write {spec.role}:TOPIC-PARTITION, or give "
            "the Nemesis a topic_hint"
        )
    return topic_hint


def broker_node(broker_id: int, brokers: Collection[str], what: str) -> str:
    name = f"n{broker_id}"
    if name not in brokers:
        raise TargetError(f"{what} is broker {broker_id}, which is not a node of this cluster")
    return name


def _id_of(node: str) -> int:
    """``"n2"`` -> 2; -1 for a node that is not a broker id's."""
    return int(node[1:]) if node.startswith("n") and node[1:].isdigit() else -1


def minority_size(count: int) -> int:
    """How many brokers ``minority`` picks: fewer than half, at least one."""
    return max(1, (count - 1) // 2)


def resolve_targets(
    specs: Sequence[TargetSpec],
    view: ClusterView,
    rng: random.Random,
    *,
    topic_hint: str | None = None,
) -> Resolution:
    """Turn target specs into node names using view; TargetError if a role has no holder."""
    brokers = sorted_nodes(view.brokers)
    every = [*brokers, view.zookeeper]
    roles: dict[str, list[str]] = {}
    observed: dict[str, dict[str, Any]] = {}
    chosen: list[str] = []
    for spec in specs:
        if spec.role == "node":
            assert spec.argument is not None
            if spec.argument not in every:
                raise TargetError(f"no node {spec.argument!r} in this cluster; nodes: {every}")
            names = [spec.argument]
        elif spec.role == "zk":
            names = [view.zookeeper]
        elif spec.role == "brokers":
            names = list(brokers)
        elif spec.role == "all":
            names = list(every)
        elif spec.role == "random":
            names = [rng.choice(brokers)]
        elif spec.role == "minority":
            names = sorted_nodes(rng.sample(brokers, minority_size(len(brokers))))
        elif spec.role == "controller":
            if view.controller is None or view.controller < 0:
                raise TargetError("there is no controller right now (no broker holds /controller)")
            names = [broker_node(view.controller, brokers, "the controller")]
        elif spec.role == "idle-broker":
            leading = view.leading()
            idle = [n for n in brokers if _id_of(n) not in leading and view.is_live(_id_of(n))]
            if not idle:
                raise TargetError(
                    f"every live broker leads a partition of the workload right now "
                    f"(leaders: {sorted(leading)})"
                )
            names = [rng.choice(idle)]
            observed.update({k: state.to_json() for k, state in sorted(view.partitions.items())})
        else:
            key = _key_of(spec, topic_hint)
            state = view.partitions.get(key)
            if state is None:
                raise TargetError(
                    f"partition {key} is unknown to the cluster; create the topic first"
                )
            observed[key] = state.to_json()
            if spec.role == "leader":
                if state.leader < 0:
                    raise TargetError(f"{key} has no leader right now (offline partition)")
                names = [broker_node(state.leader, brokers, f"the leader of {key}")]
            elif spec.role == "isr":
                if not state.isr:
                    raise TargetError(f"{key} has an empty ISR right now")
                names = [broker_node(b, brokers, f"an ISR member of {key}") for b in state.isr]
            elif spec.role == "idle-follower":
                idle_ids = view.idle_followers(key)
                if not idle_ids:
                    raise TargetError(
                        f"no follower in the ISR {list(state.isr)} of {key} is free of "
                        f"leadership right now (leaders: {sorted(view.leading())})"
                    )
                names = [broker_node(rng.choice(idle_ids), brokers, f"an idle follower of {key}")]
                observed.update({k: s.to_json() for k, s in sorted(view.partitions.items())})
            else:
                followers = sorted(b for b in state.isr if b != state.leader)
                if not followers:
                    raise TargetError(
                        f"{key} has no follower in its ISR {list(state.isr)} right now"
                    )
                if spec.role == "follower":
                    followers = [rng.choice(followers)]
                elif spec.role == "last-follower":
                    order = {b: i for i, b in enumerate(state.replicas)}
                    followers = [max(followers, key=lambda b: order.get(b, len(order)))]
                names = [broker_node(b, brokers, f"a follower of {key}") for b in followers]
        roles[str(spec)] = names
        chosen += names
    return Resolution(tuple(sorted_nodes(chosen)), roles, observed)
