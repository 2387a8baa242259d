"""Faults as plain data: ``{"f": "kill", "value": {"targets": ["leader:t-0"]}}``.

A fault as requested may name roles (``leader:t-0``, ``minority``...) or leave choices to
the moment it strikes (a shape without a grudge). The Nemesis returns the fault as applied:
``targets`` replaced by node names, the grudge computed, and details added (``requested``,
``roles``, ``observed``, ``outcome``, ...). That resolved fault is what the history and
``schedule.json`` record, and replaying it hits exactly the same nodes with the same grudge.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nemesis.duty_cycle import DutyCycleSpec
from nemesis.errors import FaultError
from nemesis.grudge import SHAPES, TARGETED_SHAPES, PartitionGrudge
from nemesis.netem import NetemSpec
from nemesis.storage import validate as validate_storage
from nemesis.targets import parse_target

STORAGE_FAULTS = frozenset({"corrupt-file", "truncate-file", "snapshot", "power-loss"})
"""Faults on the brokers' disks (``nemesis.storage``); ``rollback`` ends a snapshot."""
TARGETS_REQUIRED = frozenset({"kill", "bounce", "pause", "freeze", "start-slow", *STORAGE_FAULTS})
"""Faults that must say whom they hit."""
TARGETS_DEFAULT_TO_ACTIVE = frozenset(
    {"start", "resume", "unfreeze", "stop-netem", "stop-slow", "rollback", "drop-snapshots"}
)
"""Healing faults: without targets they undo whatever this nemesis did (a rollback: to each
node's latest snapshot)."""
MEMBER_FAULTS = frozenset({"pause-member", "resume-member", "kill-member", "leave-member"})
"""Faults on the workload's consumer-group members (``nemesis.member_faults``), named by
``members`` (or ``count`` of them drawn when the fault strikes), never by ``targets``."""
FAULT_NAMES = frozenset(
    {
        *TARGETS_REQUIRED,
        *MEMBER_FAULTS,
        *TARGETS_DEFAULT_TO_ACTIVE,
        "start-partition",
        "stop-partition",
        "start-netem",
    }
)
PARTITION_AMONG = ("all", "brokers")
"""Which nodes a shape splits: every node (ZooKeeper included), or the brokers only."""
DERIVED_KEYS = frozenset(
    {
        "requested",
        "roles",
        "observed",
        "source",
        "outcome",
        "error",
        "interfaces",
        "healed",
        "cycles",
        "killed",
        "copied",
        "lost",
    }
)
"""Value keys the Nemesis adds when it applies a fault; ``request()`` drops them."""


@dataclass(frozen=True)
class Fault:
    """One nemesis operation: its name ``f`` and a JSON object ``value``.

    The value is copied through JSON on construction, so a Fault equals its own round trip
    and nobody else holds a reference to its contents.
    """

    f: str
    value: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.f not in FAULT_NAMES:
            raise FaultError(f"unknown fault {self.f!r}; known: {', '.join(sorted(FAULT_NAMES))}")
        if not isinstance(self.value, Mapping):
            raise FaultError(f"{self.f}: value must be a JSON object, got {self.value!r}")
        try:
            copied = json.loads(json.dumps(dict(self.value), allow_nan=False))
        except (TypeError, ValueError) as err:
            raise FaultError(f"{self.f}: value is not plain JSON data ({err})") from None
        object.__setattr__(self, "value", copied)
        _validate(self.f, copied)

    @property
    def targets(self) -> list[str] | None:
        """The targets as written (roles or node names), or None when not given."""
        targets = self.value.get("targets")
        return None if targets is None else list(targets)

    @property
    def is_resolved(self) -> bool:
        """Whether applying it again needs no choices: node names only, a grudge given."""
        if self.f in MEMBER_FAULTS:
            return "members" in self.value or self.f == "resume-member"
        names = [*(self.targets or []), *self.value.get("destinations", [])]
        if any(parse_target(t).role != "node" for t in names):
            return False
        return self.f != "start-partition" or "grudge" in self.value

    @property
    def grudge(self) -> PartitionGrudge | None:
        """The grudge of a resolved start-partition."""
        doc = self.value.get("grudge")
        return None if doc is None else PartitionGrudge.from_json(doc)

    def with_value(self, **changes: Any) -> Fault:
        """A copy whose value has these keys set."""
        return Fault(self.f, {**self.value, **changes})

    def request(self) -> Fault:
        """The fault without what applying it added: what to apply again."""
        return Fault(self.f, {k: v for k, v in self.value.items() if k not in DERIVED_KEYS})

    def to_json(self) -> dict[str, Any]:
        return {"f": self.f, "value": json.loads(json.dumps(self.value))}

    @classmethod
    def from_json(cls, doc: object) -> Fault:
        """Read ``{"f": ..., "value": {...}}``; FaultError naming what is wrong."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("f"), str):
            raise FaultError(f'a fault is {{"f": NAME, "value": {{...}}}}, got {doc!r}')
        return cls(doc["f"], doc.get("value") or {})

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> Fault:
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise FaultError(f"a fault must be JSON: {err}") from None
        return cls.from_json(doc)


def _target_list(f: str, value: Mapping[str, Any], key: str) -> list[str] | None:
    targets = value.get(key)
    if targets is None:
        return None
    if not isinstance(targets, list):
        raise FaultError(f'{f}: {key} must be a list such as ["n1", "leader:t-0"], got {targets!r}')
    for target in targets:
        parse_target(target)
    return targets


def _validate(f: str, value: Mapping[str, Any]) -> None:
    if f in MEMBER_FAULTS:
        _validate_members(f, value)
        return
    targets = _target_list(f, value, "targets")
    if f in TARGETS_REQUIRED and not targets:
        raise FaultError(f'{f} needs targets, e.g. {{"targets": ["leader:t-0"]}} or ["n2"]')
    destinations = _target_list(f, value, "destinations")
    if f == "start-partition":
        _validate_partition(value, targets, destinations)
    elif destinations is not None:
        raise FaultError(f"{f} takes no destinations (only a one-way partition does)")
    if f == "start-netem":
        NetemSpec.from_value(value)
    if f == "start-slow":
        DutyCycleSpec.from_value(value)
    validate_storage(f, value)


def _validate_members(f: str, value: Mapping[str, Any]) -> None:
    if "targets" in value or "destinations" in value:
        raise FaultError(
            f'{f} hits consumer-group members: name them with "members" (["consumer-0"]) or '
            'draw "count" of them, not with targets'
        )
    members = value.get("members")
    if members is not None and (
        not isinstance(members, list) or not all(isinstance(m, str) and m for m in members)
    ):
        raise FaultError(f'{f}: members must be a list of names such as ["consumer-0"]')
    count = value.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise FaultError(f"{f}: count must be a whole number of members >= 1, got {count!r}")


def _validate_partition(
    value: Mapping[str, Any], targets: list[str] | None, destinations: list[str] | None
) -> None:
    shape, grudge = value.get("shape"), value.get("grudge")
    if shape is None and grudge is None:
        raise FaultError(
            f'start-partition needs a "shape" ({", ".join(SHAPES)}) or a "grudge" '
            "{dst: [sources dst drops]}"
        )
    if grudge is not None and not PartitionGrudge.from_json(grudge):
        raise FaultError("start-partition: the grudge cuts nothing; give at least one drop")
    if shape is not None:
        if shape not in SHAPES:
            raise FaultError(f"unknown partition shape {shape!r}; use one of {', '.join(SHAPES)}")
        if grudge is None and targets and shape not in TARGETED_SHAPES:
            raise FaultError(
                f"shape {shape} splits all nodes and takes no targets; targets go with "
                f"{', '.join(sorted(TARGETED_SHAPES))}"
            )
        if grudge is None and destinations and shape != "one-way":
            raise FaultError("only a one-way partition takes destinations")
    among = value.get("among", "all")
    if among not in PARTITION_AMONG:
        raise FaultError(f"start-partition: among must be one of {PARTITION_AMONG}, got {among!r}")
