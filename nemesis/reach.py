"""Whether a run of a scenario reached the state it aimed at, judged from the SUT's events.

The events are the log's own record (docs/history.md, SUT events): ``leader-election``
(``key``, ``leader``, ``previous_leader``, ``isr``, ``unclean``), ``isr-change`` (``key``,
``isr``, ``leader``), ``truncation`` (``key``, ``from_offset``, ``to_offset``, ``broker``:
the replica that truncated), ``controller-elected`` (``controller``) and ``group-load``
(``topic``, ``partition``, ``broker``: a new coordinator loaded the groups), each with the
node's ``wall_time_ns``. A judge sees the events logged from the run's start (those
read from the nodes after it began) to the moment it judges, the run's aim (the partition
and its roles when the run began) and its faults as applied; it returns whether the state
was reached, the events that show it, and otherwise what was missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemesis.aim import Aim
from nemesis.fault import Fault

Event = Mapping[str, Any]


@dataclass(frozen=True)
class ScenarioRun:
    """What a judge looks at: one run of a scenario, its faults and the events since."""

    name: str
    aim: Aim
    faults: Sequence[Fault]
    events: Sequence[Event]


@dataclass(frozen=True)
class Reach:
    """A judge's verdict: reached or not, the events that show it, what was missing."""

    reached: bool
    evidence: list[dict[str, Any]] = field(default_factory=list)
    missing: str = ""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"reached": self.reached, "evidence": self.evidence}
        if self.missing:
            doc["missing"] = self.missing
        return doc


Judge = Callable[[ScenarioRun], Reach]


def _evidence(*events: Event) -> list[dict[str, Any]]:
    return [dict(e) for e in events]


def _on(run: ScenarioRun, kind: str) -> list[Event]:
    """The run's events of one kind on its partition (any partition for controller moves),
    in time order."""
    return sorted(
        (
            e
            for e in run.events
            if e.get("type") == kind
            and (kind == "controller-elected" or e.get("key") == run.aim.key)
        ),
        key=lambda e: int(e.get("wall_time_ns", 0)),
    )


def struck_broker(run: ScenarioRun, role: str) -> int | None:
    """The broker the run's first fault aimed at ``role`` (``leader``, ``controller``) hit."""
    struck = struck_brokers(run, role)
    return struck[0] if struck else None


def struck_brokers(run: ScenarioRun, role: str) -> list[int]:
    """The brokers the run's first fault aimed at ``role`` (``followers``, ...) hit, as the
    roles were when it struck (leadership may have moved since the run took its aim)."""
    name = role if role == "controller" else f"{role}:{run.aim.key}"
    for fault in run.faults:
        nodes = (fault.value.get("roles") or {}).get(name)
        if nodes:
            return [b for b in map(_broker_id, nodes) if b is not None]
    return []


def _broker_id(node: str) -> int | None:
    return int(node[1:]) if node.startswith("n") and node[1:].isdigit() else None


def _elections_away(run: ScenarioRun, leader: int | None) -> list[Event]:
    return [
        e
        for e in _on(run, "leader-election")
        if e.get("previous_leader") == leader and e.get("leader") != leader
    ]


def leader_deposed(run: ScenarioRun) -> Reach:
    """An election that moved the partition's leadership away from the leader struck."""
    leader = struck_broker(run, "leader")
    leader = run.aim.leader if leader is None else leader
    away = _elections_away(run, leader)
    if away:
        return Reach(True, _evidence(away[0]))
    return Reach(False, missing=f"no election of {run.aim.key} away from broker {leader}")


def coordinator_moved(run: ScenarioRun) -> Reach:
    """The group's coordinator deposed: an election of its state partition away from the
    leader struck. The evidence adds the new leader's first ``group-load`` of the
    partition after it, where one was logged by the time of judging (a broker loads a
    group when its members first ask it, which they may do only once a cut-off or paused
    old coordinator has learnt it was deposed)."""
    deposed = leader_deposed(run)
    if not deposed.reached:
        return deposed
    elected = deposed.evidence[0]
    since = int(elected.get("wall_time_ns", 0))
    loads = sorted(
        (
            e
            for e in run.events
            if e.get("type") == "group-load"
            and f"{e.get('topic')}-{e.get('partition')}" == run.aim.key
            and e.get("broker") == elected.get("leader")
            and int(e.get("wall_time_ns", 0)) >= since
        ),
        key=lambda e: int(e.get("wall_time_ns", 0)),
    )
    return Reach(True, _evidence(elected, *loads[:1]))


def leadership_moved(run: ScenarioRun) -> Reach:
    """An election away from the broker that led the partition when the run began."""
    away = _elections_away(run, run.aim.leader)
    if away:
        return Reach(True, _evidence(away[0]))
    return Reach(
        False, missing=f"no election of {run.aim.key} away from its leader {run.aim.leader}"
    )


def isr_of_one_then_lost(run: ScenarioRun) -> Reach:
    """An ISR of one replica, then an election away from that replica (or offline)."""
    alone = [e for e in _on(run, "isr-change") if len(e.get("isr") or []) == 1]
    if not alone:
        return Reach(False, missing=f"the ISR of {run.aim.key} never shrank to one replica")
    for shrink in alone:
        last = shrink["isr"][0]
        lost = [
            e
            for e in _elections_away(run, last)
            if int(e.get("wall_time_ns", 0)) >= int(shrink.get("wall_time_ns", 0))
        ]
        if lost:
            return Reach(True, _evidence(shrink, lost[0]))
    return Reach(
        False,
        _evidence(alone[0]),
        f"the ISR of {run.aim.key} shrank to one replica, but that replica was never replaced",
    )


def restarted_follower_elected(run: ScenarioRun) -> Reach:
    """KIP-101's first case: a clean election, away from the leader struck, of a follower
    that had been restarted (in the new leader's ISR), with any truncation it made."""
    leader = struck_broker(run, "leader")
    leader = run.aim.leader if leader is None else leader
    followers = set(struck_brokers(run, "followers") or run.aim.followers)
    elected = [
        e
        for e in _elections_away(run, leader)
        if e.get("leader") in followers and not e.get("unclean") and e["leader"] in e["isr"]
    ]
    if not elected:
        return Reach(
            False,
            missing=f"no clean election of a restarted follower {sorted(followers)} of "
            f"{run.aim.key} away from broker {leader}",
        )
    truncated = [e for e in _on(run, "truncation") if e.get("broker") == elected[0]["leader"]]
    return Reach(True, _evidence(*truncated, elected[0]))


def truncation_during_failover(run: ScenarioRun) -> Reach:
    """KIP-101's second case: a leader change, a replica truncating after it, and another
    leader change."""
    first = leader_deposed(run)
    if not first.reached:
        return first
    elected = first.evidence[0]
    after = int(elected.get("wall_time_ns", 0))
    truncations = [e for e in _on(run, "truncation") if int(e.get("wall_time_ns", 0)) >= after]
    if not truncations:
        return Reach(False, first.evidence, f"no replica of {run.aim.key} truncated after it")
    second = [
        e
        for e in _elections_away(run, elected.get("leader"))
        if int(e.get("wall_time_ns", 0)) >= after
    ]
    if not second:
        return Reach(
            False,
            _evidence(elected, truncations[0]),
            f"the new leader {elected.get('leader')} of {run.aim.key} was never replaced",
        )
    return Reach(True, _evidence(elected, truncations[0], second[0]))


def second_failover_to_the_stalled_follower(run: ScenarioRun) -> Reach:
    """Two leader changes in a row: away from the leader struck to one follower, then away
    from that one to a replica that led neither time (the follower that could not fetch
    from the first new leader), with any truncation it made in between."""
    first = leader_deposed(run)
    if not first.reached:
        return first
    elected = first.evidence[0]
    struck, middle = elected.get("previous_leader"), elected.get("leader")
    since = int(elected.get("wall_time_ns", 0))
    second = [
        e
        for e in _elections_away(run, middle)
        if int(e.get("wall_time_ns", 0)) >= since and e.get("leader") not in (struck, middle, -1)
    ]
    if not second:
        return Reach(
            False,
            first.evidence,
            f"the new leader {middle} of {run.aim.key} was not replaced by the other follower",
        )
    last = second[0]
    until = int(last.get("wall_time_ns", 0))
    truncated = [
        e
        for e in _on(run, "truncation")
        if e.get("broker") == last.get("leader") and since <= int(e.get("wall_time_ns", 0)) <= until
    ]
    return Reach(True, _evidence(elected, *truncated, last))


def _new_controllers(run: ScenarioRun) -> list[Event]:
    controller = struck_broker(run, "controller")
    controller = run.aim.controller if controller is None else controller
    return [e for e in _on(run, "controller-elected") if e.get("controller") != controller]


def new_controller(run: ScenarioRun) -> Reach:
    """Another broker elected controller."""
    moved = _new_controllers(run)
    if moved:
        return Reach(True, _evidence(moved[0]))
    return Reach(False, missing=f"no broker other than {run.aim.controller} became controller")


def election_by_new_controller(run: ScenarioRun) -> Reach:
    """Another broker elected controller, and the partition's leadership moved by it."""
    moved = _new_controllers(run)
    if not moved:
        return new_controller(run)
    leader = struck_broker(run, "leader")
    leader = run.aim.leader if leader is None else leader
    since = int(moved[0].get("wall_time_ns", 0))
    after = [e for e in _elections_away(run, leader) if int(e.get("wall_time_ns", 0)) >= since]
    if after:
        return Reach(True, _evidence(moved[0], after[0]))
    return Reach(
        False,
        _evidence(moved[0]),
        f"the new controller made no election of {run.aim.key} away from broker {leader}",
    )


DAMAGED = {
    "corrupt-file": ("corrupted",),
    "truncate-file": ("truncated",),
    "rollback": ("rolled-back", "rolled-back-down"),
}
"""Storage faults and the outcomes by which they say they changed a replica's disk."""


def damaged_then_leader_lost(run: ScenarioRun) -> Reach:
    """A follower's disk damaged or rolled back (by its fault's outcome, with the log's own
    recovery of it where there was one), then an election away from the leader struck."""
    damaged = [
        node
        for fault in run.faults
        if fault.f in DAMAGED
        for node, outcome in (fault.value.get("outcome") or {}).items()
        if outcome in DAMAGED[fault.f]
    ]
    if not damaged:
        return Reach(False, missing=f"no replica of {run.aim.key} had its disk damaged")
    broker_ids = {_broker_id(node) for node in damaged}
    recovered = [e for e in _on(run, "log-recovery") if e.get("broker") in broker_ids]
    leader = struck_broker(run, "leader")
    leader = run.aim.leader if leader is None else leader
    away = _elections_away(run, leader)
    if not away:
        return Reach(
            False,
            _evidence(*recovered),
            f"{', '.join(damaged)} damaged, but no election of {run.aim.key} away from "
            f"broker {leader}",
        )
    return Reach(True, _evidence(*recovered, away[0]))


def reelected_after_outage(run: ScenarioRun) -> Reach:
    """After every replica stopped, the cluster back: a controller elected (the controller
    was among them where every broker holds a replica) or a leader for the partition."""
    elected = [e for e in _on(run, "leader-election") if int(e.get("leader", -1)) >= 0]
    back = elected or _on(run, "controller-elected")
    if back:
        return Reach(True, _evidence(back[-1]))
    return Reach(
        False, missing=f"no controller and no leader of {run.aim.key} elected after the outage"
    )
