"""Which partition a run of a scenario aims at, chosen over every partition of the workload.

Where the controller sits, and which broker leads which partition, decides whether a
scenario can reach its state: KIP-101's first sequence needs a controller that outlives the
leader; faults that only ever struck partition 0's leader never touched a broker that leads
only other partitions. So when a scenario's first fault strikes, the runner observes every
partition of the workload and the controller, and the scenario's rule picks a partition:

- ``any``: a partition with a leader and a follower in its ISR (a full ISR preferred);
- ``apart-from-controller``: the same, whose leader is not the controller;
- ``with-controller``: the same, whose leader is the controller;
- ``idle-follower``: the same, with a follower in its ISR that leads no partition of the
  workload (``idle-follower`` in ``nemesis.targets``);
- ``group-state``: a partition that holds a consumer group's state (``ClusterView.groups``),
  with a leader (the group's coordinator) and a follower in its ISR.

A rule that no partition satisfies falls back to ``any`` (and says so). The scenario's
partition roles (``leader``, ``followers``...) then mean that partition's, for every step of
that run, and each fault records it as ``aim``. A run whose partition had no idle follower
when it was aimed at strikes ``follower`` where its scenario says ``idle-follower``.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from nemesis.errors import FaultError, TargetError
from nemesis.fault import Fault
from nemesis.targets import PARTITION_ROLES, ClusterView, PartitionView, parse_target

RULES = ("any", "apart-from-controller", "with-controller", "idle-follower", "group-state")


@dataclass(frozen=True)
class Aim:
    """The partition a run aims at, and its roles when it was chosen."""

    key: str
    rule: str
    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    controller: int | None
    fallback: bool = False
    """The rule had no partition: any partition was taken instead."""
    idle_followers: tuple[int, ...] = ()
    """The followers in its ISR that led no partition of the workload."""

    @property
    def followers(self) -> tuple[int, ...]:
        return tuple(b for b in self.isr if b != self.leader)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "rule": self.rule,
            "leader": self.leader,
            "isr": list(self.isr),
            "replicas": list(self.replicas),
            "controller": self.controller,
            "fallback": self.fallback,
            "idle_followers": list(self.idle_followers),
        }


def _fits(rule: str, key: str, view: ClusterView) -> bool:
    state = view.partitions[key]
    if rule == "apart-from-controller":
        return view.controller is not None and state.leader != view.controller
    if rule == "with-controller":
        return state.leader == view.controller
    if rule == "idle-follower":
        return bool(view.idle_followers(key))
    return True


def _usable(partitions: Mapping[str, PartitionView]) -> dict[str, PartitionView]:
    """The partitions with a leader and a follower in their ISR."""
    return {
        key: state
        for key, state in partitions.items()
        if state.leader >= 0 and any(b != state.leader for b in state.isr)
    }


def _full(usable: dict[str, PartitionView]) -> dict[str, PartitionView]:
    """Those of ``usable`` whose every replica is in the ISR, or all of them when none is."""
    return {k: s for k, s in usable.items() if set(s.replicas) <= set(s.isr)} or usable


def choose_partition(
    rule: str, view: ClusterView, rng: random.Random, *, avoid: Collection[str] = ()
) -> Aim:
    """A partition of ``view`` for ``rule``, other than those in ``avoid`` where possible;
    TargetError when no partition has a leader and a follower in its ISR."""
    if rule not in RULES:
        raise FaultError(f"unknown partition rule {rule!r}; use one of {', '.join(RULES)}")
    usable = _usable(view.partitions)
    if not usable:
        raise TargetError(
            "no partition of the workload has a leader and a follower in its ISR right now"
        )
    full = _full(usable)
    if rule == "group-state":
        fitting = _full(_usable(view.groups))
    else:
        fitting = {k: s for k, s in full.items() if _fits(rule, k, view)}
    fallback = not fitting
    pool = fitting or full
    fresh = sorted(k for k in pool if k not in avoid) or sorted(pool)
    key = rng.choice(fresh)
    state = pool[key]
    idle = tuple(view.idle_followers(key))
    return Aim(key, rule, state.leader, state.isr, state.replicas, view.controller, fallback, idle)


def aimed(fault: Fault, key: str, *, idle: bool = True) -> Fault:
    """The fault with its bare partition roles (``leader``, ``followers``...) naming ``key``,
    and ``aim`` recording it; a bare ``idle-follower`` becomes ``follower`` unless ``idle``
    (the partition had an idle follower when the run aimed at it)."""
    value = dict(fault.value)
    for field_name in ("targets", "destinations"):
        if field_name in value:
            value[field_name] = [_aim_target(t, key, idle) for t in value[field_name]]
    value["aim"] = key
    return Fault(fault.f, value)


def _aim_target(target: str, key: str, idle: bool) -> str:
    spec = parse_target(target)
    if spec.role in PARTITION_ROLES and spec.argument is None:
        role = "follower" if spec.role == "idle-follower" and not idle else spec.role
        return f"{role}:{key}"
    return target
