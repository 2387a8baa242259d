"""`stale-isr-member`: a follower kept in its partition's ISR although it could not fetch.

A leader removes from the ISR a follower that has not caught up for longer than
`replica.lag.time.max.ms`. The nemesis events say when a broker could not fetch at all
(`kill` until `start`, `pause` until `resume`, `freeze` until `unfreeze` of its node); the
key's SUT events (`checkers.conformance.PartitionTimeline`) say who led and what the ISR
was. A follower is stale when, at its deadline, the events still show it in the ISR of the
same leader, and the fault had not ended nor the leader changed. The deadline is the fault's
time plus the lag time, the clock tolerance (event times against nemesis times), and a
grace for the leader's periodic ISR check and its write to ZooKeeper: half the lag time
plus 2 s (squall's SUT checks every min(lag/2, 1 s)). A new leader epoch of the same leader
starts the count again.

Judged only where nothing else could keep the leader from shrinking its ISR, from the lag
time before the fault (an earlier fault's effects may outlast its heal) until the deadline,
widened by the tolerance: no partition or netem fault in force, no fault on the leader's
node or on a node that is not a broker (ZooKeeper's), no fault the checker does not know. A fault never healed in the history is not judged. Needs
test.json's `brokers` (node name -> broker id) and `replica.lag.time.max.ms`; without
them, or without nemesis events, nothing is judged. The events are few: this runs on the
driver over `checkers.events.HistoryEvents`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from checkers.config import TestSettings
from checkers.events import NemesisEvent
from checkers.key_findings import FindingRow, rows_of
from checkers.key_log import ReplicationEvent
from checkers.partition_timeline import NO_LEADER, PartitionTimeline

ANOMALY = "stale-isr-member"
MS = 1_000_000
GRACE_NS = 2_000 * MS
"""Beyond half the lag time: the leader's ISR check period and its ZooKeeper write."""
STOPS = {"kill": "start", "pause": "resume", "freeze": "unfreeze"}
"""Faults that keep a broker from fetching, and what ends each."""
EFFECTS = {"kill": "killed", "pause": "paused", "freeze": "frozen"}
"""The outcome word by which a stopping fault says it took effect on a node."""
HEALS = {
    "start-slow": "stop-slow",
    "start-netem": "stop-netem",
    "start-partition": "stop-partition",
    **STOPS,
}
GLOBAL = frozenset({"start-partition", "start-netem"})
"""Faults that may cut or delay any broker from ZooKeeper, whatever their targets."""
KNOWN = frozenset({*HEALS, *HEALS.values(), "bounce"})


@dataclass(frozen=True)
class FaultSpan:
    """A fault in force on `node` (None: on every node) from `start` to `end` (ns; inf:
    never healed), set by the nemesis event at `index`, healed by the one at `healed`."""

    f: str
    node: str | None
    start: int
    end: float
    index: int
    healed: int | None
    effective: bool


def _value(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _targets(value: Mapping[str, Any]) -> list[str]:
    targets = value.get("targets")
    return [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []


def fault_spans(nemesis: Sequence[NemesisEvent]) -> list[FaultSpan]:
    """The faults of the nemesis events, each paired with the first later event that heals
    it (on its node; a heal without node names heals every node)."""
    spans: list[FaultSpan] = []
    open_: dict[tuple[str, str | None], list[tuple[int, int, bool]]] = {}
    for index, time, f, text in nemesis:
        value = _value(text)
        targets = _targets(value)
        nodes: list[str | None] = [None] if not targets else list(targets)
        if f == "bounce" or f not in KNOWN:
            # Momentary, or unknown: it interferes around its time.
            for node in nodes:
                spans.append(FaultSpan(f, node, time, time, index, index, True))
            continue
        if f in HEALS:
            outcome = value.get("outcome")
            for node in nodes:
                effective = (
                    not isinstance(outcome, dict)
                    or f not in EFFECTS
                    or outcome.get(node) == EFFECTS[f]
                )
                open_.setdefault((f, node), []).append((index, time, effective))
            continue
        starter = next(s for s, h in HEALS.items() if h == f)
        for (fault, node), started in list(open_.items()):
            if fault != starter or not (node is None or not targets or node in targets):
                continue
            for start_index, start_time, effective in started:
                spans.append(
                    FaultSpan(fault, node, start_time, time, start_index, index, effective)
                )
            del open_[(fault, node)]
    for (fault, node), started in open_.items():
        for start_index, start_time, effective in started:
            spans.append(FaultSpan(fault, node, start_time, math.inf, start_index, None, effective))
    spans.sort(key=lambda s: s.index)
    return spans


def _interferes(span: FaultSpan, leader_node: str | None, brokers: Mapping[str, int]) -> bool:
    """Whether `span` could keep the leader (on `leader_node`) from shrinking its ISR."""
    if span.f in GLOBAL or span.f not in KNOWN or span.node is None:
        return True
    return span.node == leader_node or span.node not in brokers


def stale_isr_members(
    nemesis: Sequence[NemesisEvent],
    replication: Mapping[str, Sequence[ReplicationEvent]],
    settings: TestSettings,
    checker: str,
) -> list[FindingRow]:
    """Every follower kept in a key's ISR past its deadline while its broker could not
    fetch (see the module's docstring)."""
    brokers = settings.brokers
    lag_ms = settings.replica_lag_time_max_ms
    if brokers is None or lag_ms is None or not nemesis:
        return []
    node_of = {broker: node for node, broker in brokers.items()}
    tolerance = settings.event_tolerance_ns
    wait = lag_ms * MS + tolerance + lag_ms * MS // 2 + GRACE_NS
    spans = fault_spans(nemesis)
    stopped = [
        s for s in spans if s.f in STOPS and s.effective and s.node in brokers and s.end < math.inf
    ]
    found_rows: list[dict[str, Any]] = []
    for key in sorted(replication):
        timeline = PartitionTimeline.of(replication[key])
        if len(timeline) == 0:
            continue
        starts = [int(t) for t in timeline.starts]
        for fault in stopped:
            assert fault.node is not None
            follower = brokers[fault.node]
            first = int(timeline.state_at(np.array([fault.start]))[0])
            if first < 0:
                continue
            leader = timeline.events[first].leader
            if leader is None or leader in (NO_LEADER, follower):
                continue
            end = fault.end - tolerance
            since, epoch = fault.start, timeline.events[first].leader_epoch
            found = None
            for i in range(first, len(timeline)):
                event = timeline.events[i]
                begins = max(starts[i], fault.start)
                if begins >= end or event.leader != leader:
                    break
                if follower not in (event.isr or ()):
                    break
                if event.leader_epoch != epoch:
                    since, epoch = begins, event.leader_epoch
                deadline = since + wait
                until = starts[i + 1] if i + 1 < len(timeline) else math.inf
                if begins <= deadline < min(until, end):
                    found = (i, deadline)
                    break
            if found is None:
                continue
            i, deadline = found
            leader_node = node_of.get(leader)
            if any(
                s is not fault
                and _interferes(s, leader_node, brokers)
                and s.start - tolerance <= deadline
                and s.end + tolerance + lag_ms * MS >= fault.start
                for s in spans
            ):
                continue
            event = timeline.events[i]
            found_rows.append(
                {
                    "key": key,
                    "follower": follower,
                    "node": fault.node,
                    "fault": fault.index,
                    "fault_f": fault.f,
                    "fault_time": fault.start,
                    "healed": fault.healed,
                    "healed_time": int(fault.end),
                    "leader": leader,
                    "leader_epoch": event.leader_epoch,
                    "deadline": deadline,
                    "event": event.index,
                    "isr": list(event.isr or ()),
                    "replica_lag_time_max_ms": lag_ms,
                }
            )
    frame = pd.DataFrame(found_rows)
    return rows_of(
        checker, ANOMALY, frame, order="event", detail=[(name, name) for name in frame.columns]
    )
