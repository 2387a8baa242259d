"""Causes: the log's own events that explain a lost, diverged or reordered write.

What a black-box checker cannot say, the SUT's events can: which replica cut the record
out of its log (a `truncation`, or a `log-recovery` that loaded less than it had), and
which election then made a replica without it the leader. Per key, from its events
(`checkers.events`), a case at `offset` whose write was acknowledged at history index
`after` is explained by, in this order of preference:

1. a truncation (or log recovery) of the key after `after` whose range covers the offset
   (`to_offset <= offset < from_offset`; a recovery covers everything from its log end on),
   by a replica that a later election made the key's leader: the truncation, then that
   election (the high-watermark rule's loss: a follower cuts its log to its high watermark,
   then leads);
2. such a truncation whose replica was not elected afterwards: the election before it that
   made another replica leader (whose log lacked the offset), then the truncation of the
   deposed leader that followed it;
3. an unclean election of the key after `after`: a leader from outside the ISR;
4. nothing: the case says so (`no_cause`), which is a finding too.

Only the cases results.json keeps are explained (`explain_rows`, in the per-key pass), so
the work per key is a few look-ups over its events, whatever the number of losses. The
faults in force around a cause come from the nemesis events on the driver
(`explain_samples`, which also explains the kept cases of `replica-divergence`, a checker
outside the pass), where they are few.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from checkers.catalogue import CAUSED
from checkers.key_findings import detail_json
from checkers.key_log import ReplicationEvent

NS_PER_S = 1_000_000_000
NO_CAUSE = "no truncation, log recovery or unclean election of the key explains it"
CUTS = ("truncation", "log-recovery")
_END = int(np.iinfo(np.int64).max)


@dataclass(frozen=True, eq=False)
class KeyCauses:
    """A key's events that can explain a loss: its truncations and log recoveries (`cuts`,
    with their history indices, times and ranges as columns: a recovery's range starts at
    its log end and has no end) and its leader elections, in history order; `nodes` names
    each broker's node."""

    key: str
    cuts: tuple[ReplicationEvent, ...]
    elections: tuple[ReplicationEvent, ...]
    nodes: Mapping[int, str]
    tolerance_ns: int
    cut_index: np.ndarray
    cut_time: np.ndarray
    cut_to: np.ndarray
    cut_from: np.ndarray

    @classmethod
    def of(
        cls,
        key: str,
        events: Sequence[ReplicationEvent],
        brokers: Mapping[str, int] | None,
        tolerance_ns: int = 0,
    ) -> KeyCauses:
        """From a key's SUT events; `brokers` (node -> broker id, test.json's) names nodes,
        else the node each broker's own events came from, else `n<broker>`; `tolerance_ns`:
        how far an event's time may be off the operations' clock (test.json's)."""
        nodes = {
            e.broker: e.node for e in events if e.f in CUTS and e.broker is not None and e.node
        }
        nodes.update({broker: node for node, broker in (brokers or {}).items()})
        by_index = sorted(events, key=lambda e: e.index)
        cuts = tuple(e for e in by_index if e.f in CUTS and e.to_offset is not None)
        elections = tuple(e for e in by_index if e.f == "leader-election" and e.leader is not None)

        def column(items: list[int]) -> np.ndarray:
            return np.array(items, dtype=np.int64)

        return cls(
            key,
            cuts,
            elections,
            nodes,
            tolerance_ns,
            column([e.index for e in cuts]),
            column([e.time for e in cuts]),
            column([e.to_offset for e in cuts if e.to_offset is not None]),
            column([_END if e.from_offset is None else e.from_offset for e in cuts]),
        )

    def node(self, broker: int | None) -> str:
        if broker is None:
            return "an unknown broker"
        return self.nodes.get(broker, f"n{broker}")

    def explain(
        self,
        offset: int | None,
        *,
        after: int | None = None,
        before: int | None = None,
        acked_ns: int | None = None,
    ) -> dict[str, Any]:
        """The cause of a case at `offset` whose write was acknowledged (or first seen) at
        history index `after` (at `acked_ns`: an event up to the clock tolerance earlier
        counts as after it) and, for a step back, noticed at `before`: `{"cause": {...}}`
        or `{"no_cause": reason}` (the module's rules)."""
        if offset is None:
            return {"no_cause": "its offset is unknown, so no event of the log can be tied to it"}
        low = -1 if after is None else after
        high = _END if before is None else before
        since = None if acked_ns is None else acked_ns - self.tolerance_ns
        cuts = self._covering(offset, low, high, since)
        for cut in cuts:
            led = self._led_after(cut)
            if led is not None:
                return self._cause("truncation-then-election", [cut, led])
        if cuts:
            cut = cuts[0]
            deposed_by = self._elected_before(cut)
            events = [cut] if deposed_by is None else [deposed_by, cut]
            return self._cause("election-then-truncation" if deposed_by else "truncation", events)
        unclean = [
            e
            for e in self.elections
            if e.unclean
            and (low < e.index or (since is not None and e.time >= since))
            and e.index < high
        ]
        if unclean:
            return self._cause("unclean-election", [unclean[0]])
        reason = f"{NO_CAUSE} (offset {offset})"
        if before is not None:
            between = [e for e in self.elections if low < e.index < high]
            if between:
                moves = "; ".join(self._move(e) for e in between[:3])
                more = f" and {len(between) - 3} more" if len(between) > 3 else ""
                reason += f"; between the two operations its leadership changed: {moves}{more}"
        return {"no_cause": reason}

    def _move(self, election: ReplicationEvent) -> str:
        """An election in words, with its line, for a step back's `no_cause`."""
        at = f"at {_seconds(election.time)} (line {election.index + 1})"
        if election.leader == -1:
            return f"offline {at}"
        return f"{self.node(election.leader)} elected ({self._epoch(election)}) {at}"

    def _covering(
        self, offset: int, low: int, high: int, since: int | None
    ) -> list[ReplicationEvent]:
        """The cuts after `low` (or at `since` or later) and before `high` whose range
        covers `offset`, in history order."""
        later = self.cut_index > low
        if since is not None:
            later |= self.cut_time >= since
        hit = later & (self.cut_index < high) & (self.cut_to <= offset) & (offset < self.cut_from)
        return [self.cuts[i] for i in np.flatnonzero(hit)]

    def _led_after(self, cut: ReplicationEvent) -> ReplicationEvent | None:
        """The first election after `cut` that made its replica leader."""
        for election in self.elections:
            if election.index <= cut.index:
                continue
            if election.leader == cut.broker:
                return election
        return None

    def _elected_before(self, cut: ReplicationEvent) -> ReplicationEvent | None:
        """The last election before `cut` of another replica than the one that truncated."""
        found = None
        for election in self.elections:
            if election.index >= cut.index:
                break
            if election.leader not in (cut.broker, -1):
                found = election
        return found

    def _cause(self, kind: str, events: list[ReplicationEvent]) -> dict[str, Any]:
        shown = [self._event(e) for e in events]
        return {"cause": {"kind": kind, "events": shown, "text": self._text(kind, events)}}

    def _event(self, event: ReplicationEvent) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "line": event.index + 1,
            "kind": event.f,
            "time_s": round(event.time / NS_PER_S, 3),
        }
        if event.f in CUTS:
            shown.update(node=self.node(event.broker), broker=event.broker)
            if event.f == "truncation":
                shown.update(
                    from_offset=event.from_offset, to_offset=event.to_offset, rule=event.reason
                )
                if event.from_offset is not None and event.to_offset is not None:
                    shown["removed"] = event.from_offset - event.to_offset
            else:
                shown.update(log_end_offset=event.to_offset, problem=event.reason)
        else:
            shown.update(
                node=self.node(event.leader),
                leader=event.leader,
                leader_epoch=event.leader_epoch,
                unclean=event.unclean,
                previous_leader=event.previous_leader,
            )
        return shown

    def _text(self, kind: str, events: list[ReplicationEvent]) -> str:
        parts = []
        for position, event in enumerate(events):
            if event.f in CUTS:
                parts.append(self._cut_text(event, first=position == 0))
            elif kind == "truncation-then-election":
                parts.append(f"then led it ({self._epoch(event)}) at {_seconds(event.time)}")
            else:
                parts.append(
                    f"{self.node(event.leader)} was elected leader of {self.key} "
                    f"({self._epoch(event)}) at {_seconds(event.time)}"
                )
        return ", ".join(parts)

    def _cut_text(self, cut: ReplicationEvent, *, first: bool) -> str:
        who = self.node(cut.broker)
        what = self.key if first else "it"
        if cut.f == "log-recovery":
            problem = f" ({cut.reason})" if cut.reason else ""
            return f"{who} recovered {what} to log end {cut.to_offset}{problem} at {_seconds(cut.time)}"
        begin = "?" if cut.from_offset is None else str(cut.from_offset)
        rule = f" ({cut.reason} rule)" if cut.reason else ""
        verb = "truncated" if first else "then truncated"
        return f"{who} {verb} {what} {begin}→{cut.to_offset}{rule} at {_seconds(cut.time)}"

    @staticmethod
    def _epoch(election: ReplicationEvent) -> str:
        epoch = "epoch ?" if election.leader_epoch is None else f"epoch {election.leader_epoch}"
        return f"{epoch}, {'unclean' if election.unclean else 'clean'}"


def _seconds(ns: int) -> str:
    return f"{ns / NS_PER_S:.1f} s"


def _int(item: Any) -> int | None:
    return item if isinstance(item, int) and not isinstance(item, bool) else None


def case_cause(causes: KeyCauses, anomaly: str, case: Mapping[str, Any]) -> dict[str, Any]:
    """The cause fields of one case of `anomaly` (`{"cause": ...}` or `{"no_cause": ...}`):
    where its offset and its acknowledgement (or the operations around a step back) are."""
    if anomaly in ("nonmonotonic-poll", "nonmonotonic-send"):
        offsets = case.get("offsets") or []
        ops = case.get("ops") or []
        offset = _int(offsets[0]) if offsets else None
        after = _int(ops[0]) if ops else None
        before = _int(ops[-1]) if len(ops) > 1 else None
        return causes.explain(offset, after=after, before=before)
    if anomaly == "replica-divergence":
        offsets = case.get("offsets") or []
        return causes.explain(_int(offsets[0]) if offsets else None)
    if anomaly == "unclean-loss-window":
        offsets = case.get("offsets") or []
        election = _int(case.get("election"))
        return causes.explain(
            _int(offsets[0]) if offsets else None,
            after=None if election is None else election - 1,
        )
    return causes.explain(
        _int(case.get("offset")), after=_int(case.get("writer")), acked_ns=_int(case.get("time"))
    )


def explain_rows(rows: Sequence[tuple[Any, ...]], causes: KeyCauses) -> list[tuple[Any, ...]]:
    """The pass's rows of one key (`checkers.key_findings.PassRow`) with each case of a
    `CAUSED` type given its cause (appended to its detail)."""
    out = []
    for row in rows:
        anomaly = row[1]
        if anomaly not in CAUSED:
            out.append(row)
            continue
        detail = json.loads(row[5])
        detail.update(case_cause(causes, anomaly, detail))
        out.append((*row[:5], detail_json(detail), row[6]))
    return out


def explain_samples(
    samples: Mapping[tuple[str, str, bool], Any],
    replication: Mapping[str, Sequence[ReplicationEvent]],
    brokers: Mapping[str, int] | None,
    intervals: Sequence[Any],
    tolerance_ns: int = 0,
) -> None:
    """Complete the kept cases on the driver (`checkers.results.Collected` by slot): the
    causes of the checkers outside the per-key pass (`replica-divergence`), then every
    cause's faults (`with_faults`)."""
    for (_, anomaly, _), collected in samples.items():
        if anomaly not in CAUSED:
            continue
        for case in collected.samples:
            if "cause" not in case and "no_cause" not in case:
                key = str(case.get("key"))
                causes = KeyCauses.of(key, replication.get(key, []), brokers, tolerance_ns)
                case.update(case_cause(causes, anomaly, case))
            with_faults(case, intervals)


RECENT_NS = 10 * NS_PER_S
"""A fault on a cause's node healed at most this long before the cause's first event is
named too: a broker restarted after a kill truncates its log as it starts following."""


def with_faults(
    case: dict[str, Any], intervals: Sequence[Any], *, limit: int = 3
) -> dict[str, Any]:
    """`case` with its cause's `faults`: the nemesis fault intervals
    (`checkers.fault_intervals.FaultInterval`) overlapping the span from the case's acknowledgement
    (its `time`, else its cause's first event) to its cause's last event, and those on the
    cause's nodes healed up to `RECENT_NS` before its first event; those on the cause's
    nodes first, at most `limit`; the cause's text names them. A case that no event
    explains gets `cause: null` beside its `no_cause`."""
    if "no_cause" in case and "cause" not in case:
        case["cause"] = None
        return case
    cause = case.get("cause")
    if not isinstance(cause, dict) or not cause.get("events"):
        return case
    events = cause["events"]
    first = int(events[0]["time_s"] * NS_PER_S)
    last = int(events[-1]["time_s"] * NS_PER_S)
    acked = _int(case.get("time"))
    start = min(first, acked if acked is not None else first)
    nodes = {e.get("node") for e in events}

    def near(interval: Any, end: int | None) -> bool:
        if interval.start > last:
            return False
        on_cause = bool(_targets(interval.value) & nodes)
        return end is None or end >= start or (on_cause and end >= first - RECENT_NS)

    ended = _pauses_ended(intervals)
    chosen = [(i, end) for i, end in zip(intervals, ended, strict=True) if near(i, end)]
    chosen.sort(key=lambda p: (not (_targets(p[0].value) & nodes), p[0].start, p[0].start_index))
    faults = [
        {
            "fault": i.fault,
            "line": i.start_index + 1,
            "targets": sorted(_targets(i.value)),
            "start_s": round(i.start / NS_PER_S, 3),
            "end_s": None if end is None else round(end / NS_PER_S, 3),
        }
        for i, end in chosen[:limit]
    ]
    if faults:
        cause["faults"] = faults
        named = "; ".join(_fault_text(f) for f in faults)
        cause["text"] = f"{cause['text']}; faults: {named}"
    return case


def _pauses_ended(intervals: Sequence[Any]) -> list[int | None]:
    """Each interval's end, a pause never resumed ended by the first later kill of one of
    its nodes (a killed process is no longer paused)."""
    ends = []
    for interval in intervals:
        end = interval.end
        if end is None and interval.fault == "pause":
            kills = [
                k.start
                for k in intervals
                if k.fault == "kill"
                and k.start >= interval.start
                and _targets(k.value) & _targets(interval.value)
            ]
            end = min(kills, default=None)
        ends.append(end)
    return ends


def _fault_text(fault: Mapping[str, Any]) -> str:
    targets = " ".join(fault["targets"])
    on = f" {targets}" if targets else ""
    if fault["end_s"] is None:
        return f"{fault['fault']}{on} (from {fault['start_s']:.1f} s, never healed)"
    return f"{fault['fault']}{on} ({fault['start_s']:.1f} s to {fault['end_s']:.1f} s)"


def _targets(value: Any) -> set[str]:
    """The node names a fault's value targets."""
    if not isinstance(value, Mapping):
        return set()
    targets = value.get("targets")
    if isinstance(targets, list):
        return {t for t in targets if isinstance(t, str)}
    if isinstance(targets, str):
        return {targets}
    return set()
