"""Conformance: the configuration's promises judged against the log's own events.

The SUT logs its leader elections and ISR changes (`leader-election`, `isr-change`; the
runner merges them into the history with each node's clock offset corrected). Per key they
make a timeline of the partition's state: who leads (-1: offline) and the ISR. The events
of a key are ordered by leader epoch (a controller's election or ISR change starts a new
epoch; a leader's ISR changes keep its epoch), elections first within an epoch, then by
time; each state holds from its event's time (never before an earlier state's) until the
next. Where some event lacks its epoch (hand-written histories), by time alone.

- `ack-below-min-isr`: an `ok` send with acks=-1 (the operation's `acks`, else test.json's
  `workload.acks`) whose whole window, from its invocation to its completion widened by the
  clock tolerance on each side, lies in one stretch of states in which a leader held an ISR
  of fewer than `min.insync.replicas` members. Such a leader must refuse the write
  (NOT_ENOUGH_REPLICAS) or leave it unacknowledged; an acknowledgement racing an ISR change
  is not judged. Judged only where test.json gives `topic.min_insync_replicas`.
- `isr-join-behind-hw`: a leader's ISR change that added a follower (a member of `isr` not
  in `previous_isr`) whose log end offset, as the leader knew it when it decided, was below
  the leader's high watermark then: a follower joins the ISR only once it has every
  record the high watermark covers. Judged on the events that carry those facts (squall's
  SUT logs them on every ISR change a leader makes).
- `hw-regression`: a leader's ISR change whose high watermark (when it decided) is below
  the one an earlier ISR change of the same leader in the same leader epoch gave: the high
  watermark never moves back while a broker leads. Events of one leader come from one
  clock, so they are ordered by time (then history index) without tolerance.
- `election-outside-isr`: an election of a leader outside the ISR of the state before it,
  when the election says it was clean, or when unclean leader election is off
  (`topic.unclean_leader_election` false). A leader from that state's eligible leader
  replicas (`elr`, KIP-966: replicas that left the ISR as it fell below
  min.insync.replicas, holding everything committed) is elected cleanly and not judged.
  An election with no state before it (the partition's first) is not judged, nor one made
  from the state written right after the last one logged (by ZooKeeper version:
  `zk_version` + 1) whose ISR or ELR (`previous_isr`, `previous_elr`) names the leader: a
  write whose writer died before logging it.
- `truncated-acknowledged`: a replica's `truncation` that cut `ok` acks=-1 writes it held
  as a member of every ISR in force while they were acknowledged (widened by the clock
  tolerance; not left out by a shrink before they were committed), which the key's final
  read still finds at their offsets, with no fault on the replica's disk
  (`checkers.disk_faults`), recovery of its log or unclean election of the key from their
  invocation to the truncation: a replica of the ISR never discards a committed record
  (KIP-101's promise); one case per truncation.

- `stale-isr-member`: a follower whose broker the nemesis stopped (killed, paused, frozen),
  still in its leader's ISR when the lag time and a grace had passed (`checkers.stale_isr`).

The clock tolerance is test.json's `clock.tolerance_ns` (`TestSettings.event_tolerance_ns`).
All but `stale-isr-member` are found per key, in the per-key pass (`checkers.key_pass`): the
key's events are few and looped over; its sends are placed on the timeline with one search
(numpy). A key that no operation touched is not in the pass, so its events are not judged.
`stale-isr-member` joins the nemesis events with every key's SUT events on the driver, in
`check`, and adds its count and samples to the pass's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from checkers.checker import CheckContext
from checkers.config import TestSettings
from checkers.disk_faults import DiskFault
from checkers.findings import SampledRows
from checkers.key_findings import FindingRow, key_finding, rows_of, sampled_rows
from checkers.key_log import KeyLog, ReplicationEvent
from checkers.losses import KeyLosses, LossRules
from checkers.partition_timeline import NO_LEADER, PartitionTimeline
from checkers.power_losses import shrunk_without
from checkers.results import CheckerReport
from checkers.stale_isr import stale_isr_members

CHECKER = "conformance"
ANOMALIES = (
    "ack-below-min-isr",
    "election-outside-isr",
    "isr-join-behind-hw",
    "hw-regression",
    "truncated-acknowledged",
    "stale-isr-member",
)


def acknowledged_all(writes: pd.DataFrame, default_acks: int | None) -> pd.DataFrame:
    """The `ok` acks=-1 sends (the operation's `acks`, else `default_acks`) with both their
    invocation and completion times."""
    acks = writes["acks"] if default_acks is None else writes["acks"].fillna(default_acks)
    return writes[
        (writes["status"] == "ok").to_numpy()
        & (acks == -1).fillna(False).to_numpy(dtype=bool)
        & writes["invoke_time"].notna().to_numpy()
        & writes["complete_time"].notna().to_numpy()
    ]


def acks_below_min_isr(
    log: KeyLog, settings: TestSettings, default_acks: int | None
) -> pd.DataFrame:
    """The key's `ok` acks=-1 sends acknowledged wholly inside a stretch whose ISR was
    smaller than min.insync.replicas, with the state (`event`, `leader`, `isr`)."""
    minimum = settings.min_insync_replicas
    timeline = PartitionTimeline.of(log.events)
    writes = log.writes
    if minimum is None or len(timeline) == 0 or writes.empty:
        return pd.DataFrame()
    chosen = acknowledged_all(writes, default_acks)
    if chosen.empty:
        return pd.DataFrame()
    sizes = timeline.isr_sizes()
    below = (sizes >= 0) & (sizes < minimum)
    # Consecutive states on the same side of the minimum form one stretch.
    stretch = np.concatenate([[0], np.cumsum(below[1:] != below[:-1])])
    tolerance = settings.event_tolerance_ns
    first = timeline.state_at(chosen["invoke_time"].to_numpy(dtype=np.int64) - tolerance)
    last = timeline.state_at(chosen["complete_time"].to_numpy(dtype=np.int64) + tolerance)
    inside = (first >= 0) & (stretch[np.maximum(first, 0)] == stretch[np.maximum(last, 0)])
    certain = inside & below[np.maximum(first, 0)]
    found = chosen[certain].copy()
    # The state the acknowledgement came in: the last one the window reaches.
    state = last[certain]
    found["event"] = [timeline.events[i].index for i in state]
    found["leader"] = [timeline.events[i].leader for i in state]
    found["isr"] = [list(timeline.events[i].isr or ()) for i in state]
    found["min_insync_replicas"] = minimum
    found["key"] = log.key
    found["acks"] = -1
    return found


def elections_outside_isr(log: KeyLog, settings: TestSettings) -> pd.DataFrame:
    """The key's elections of a leader outside the ISR (and the eligible leader replicas)
    before them, where the election says it was clean or unclean election is off, with
    that ISR and ELR (`last_isr`, `last_elr`, `last_event`)."""
    timeline = PartitionTimeline.of(log.events)
    rows = []
    for before, event in zip(timeline.events, timeline.events[1:], strict=False):
        if event.f != "leader-election" or event.leader is None or event.leader == NO_LEADER:
            continue
        if before.isr is None or event.leader in (*before.isr, *(before.elr or ())):
            continue
        if from_unlogged_write(before, event):
            continue
        if event.unclean and settings.unclean_leader_election is not False:
            continue
        rows.append(
            {
                "key": log.key,
                "election": event.index,
                "time": event.time,
                "leader": event.leader,
                "previous_leader": event.previous_leader,
                "leader_epoch": event.leader_epoch,
                "unclean": event.unclean,
                "last_isr": list(before.isr),
                "last_elr": list(before.elr or ()),
                "last_event": before.index,
            }
        )
    return pd.DataFrame(rows)


def from_unlogged_write(before: ReplicationEvent, election: ReplicationEvent) -> bool:
    """Whether `election` was made from the partition state one write after the one `before`
    logged, naming its leader in that state's ISR or ELR (`previous_isr`, `previous_elr`):
    an ISR change that
    reached ZooKeeper but not its writer's event log (the writer died between the two).
    Versions number every write of a partition's state, so a state elected from that is
    older or further on is not excused."""
    named = (*(election.previous_isr or ()), *(election.previous_elr or ()))
    return (
        election.previous_isr is not None
        and election.leader in named
        and before.zk_version is not None
        and election.previous_zk_version is not None
        and election.previous_zk_version == before.zk_version + 1
    )


def joins_behind_hw(log: KeyLog) -> pd.DataFrame:
    """The key's ISR expansions that added a follower whose log end, as its leader knew it,
    was below the leader's high watermark."""
    rows = []
    for event in log.events:
        if (
            event.f != "isr-change"
            or event.isr is None
            or event.previous_isr is None
            or event.high_watermark is None
            or event.log_end_offsets is None
        ):
            continue
        for follower in sorted(set(event.isr) - set(event.previous_isr)):
            end = event.log_end_offsets.get(follower)
            if end is not None and end < event.high_watermark:
                rows.append(
                    {
                        "key": log.key,
                        "event": event.index,
                        "time": event.time,
                        "leader": event.leader,
                        "leader_epoch": event.leader_epoch,
                        "follower": follower,
                        "follower_log_end_offset": end,
                        "high_watermark": event.high_watermark,
                        "isr": list(event.isr),
                        "previous_isr": list(event.previous_isr),
                    }
                )
    return pd.DataFrame(rows)


def high_watermark_regressions(log: KeyLog) -> pd.DataFrame:
    """The key's leader ISR changes whose high watermark is below an earlier one of the same
    leader and leader epoch, with that earlier one (`earlier_event`, its watermark)."""
    facts = sorted(
        (
            e
            for e in log.events
            if e.f == "isr-change"
            and e.high_watermark is not None
            and e.leader is not None
            and e.leader_epoch is not None
        ),
        key=lambda e: (e.time, e.index),
    )
    highest: dict[tuple[int, int], ReplicationEvent] = {}
    rows = []
    for event in facts:
        tenure = (event.leader, event.leader_epoch)
        assert event.high_watermark is not None and event.leader_epoch is not None
        earlier = highest.get(tenure)  # type: ignore[arg-type]
        if earlier is not None and event.high_watermark < (earlier.high_watermark or 0):
            rows.append(
                {
                    "key": log.key,
                    "event": event.index,
                    "time": event.time,
                    "leader": event.leader,
                    "leader_epoch": event.leader_epoch,
                    "high_watermark": event.high_watermark,
                    "earlier_event": earlier.index,
                    "earlier_high_watermark": earlier.high_watermark,
                }
            )
        elif earlier is None or event.high_watermark > (earlier.high_watermark or 0):
            highest[tenure] = event  # type: ignore[index]
    return pd.DataFrame(rows)


def truncations_of_acknowledged(log: KeyLog, rules: LossRules) -> pd.DataFrame:
    """The key's truncations that cut acknowledged acks=-1 writes which the replica held as a
    member of the ISR that committed them and which the log still holds at their offsets,
    one row per truncation: how many such writes it cut (`acknowledged`) and the first
    (`value`, `offset`, its `writer` and `invoked` lines)."""
    settings = rules.settings
    tolerance = settings.event_tolerance_ns
    cuts = [
        e
        for e in log.events
        if e.f == "truncation"
        and e.broker is not None
        and e.from_offset is not None
        and e.to_offset is not None
        and e.from_offset > e.to_offset
    ]
    writes = log.writes
    if not cuts or writes.empty:
        return pd.DataFrame()
    chosen = acknowledged_all(writes, rules.default_acks)
    chosen = chosen[chosen["offset"].notna().to_numpy()]
    reads = log.reads
    final = reads[(reads["type"] == "ok") & reads["final"]]
    kept = set(zip(final["offset"].tolist(), final["value"].tolist(), strict=True))
    if chosen.empty or not kept:
        return pd.DataFrame()
    offsets = chosen["offset"].to_numpy(dtype=np.int64)
    invoked = chosen["invoke_time"].to_numpy(dtype=np.int64)
    completed = chosen["complete_time"].to_numpy(dtype=np.int64)
    values = chosen["value"].tolist()
    memberships = sorted(
        (e for e in log.events if e.isr is not None and e.f != "truncation"),
        key=lambda e: (e.time, e.index),
    )
    spoilers = [
        e
        for e in log.events
        if (e.f == "leader-election" and e.unclean)
        or (e.f == "log-recovery" and e.broker is not None)
    ]
    rows = []
    for cut in cuts:
        assert cut.broker is not None and cut.to_offset is not None
        assert cut.from_offset is not None
        candidates = np.flatnonzero(
            (offsets >= cut.to_offset)
            & (offsets < cut.from_offset)
            & (completed + tolerance < cut.time)
        )
        found = [
            at
            for at in candidates
            if (int(offsets[at]), values[at]) in kept
            and _held_from_ack(
                memberships,
                cut.broker,
                int(invoked[at]),
                int(completed[at]),
                int(offsets[at]),
                tolerance,
            )
            and not _disturbed(
                cut, spoilers, rules.disk_faults, int(invoked[at]) - tolerance, tolerance
            )
        ]
        if not found:
            continue
        first = min(found, key=lambda at: offsets[at])
        row = chosen.iloc[first]
        rows.append(
            {
                "key": log.key,
                "event": cut.index,
                "time": cut.time,
                "broker": cut.broker,
                "from_offset": cut.from_offset,
                "to_offset": cut.to_offset,
                "leader_epoch": cut.leader_epoch,
                "reason": cut.reason,
                "acknowledged": len(found),
                "offset": int(offsets[first]),
                "value": values[first],
                "writer": int(row["complete_index"]),
                "invoked": int(row["invoke_index"]),
            }
        )
    return pd.DataFrame(rows)


def _held_from_ack(
    memberships: Sequence[ReplicationEvent],
    broker: int,
    invoked: int,
    completed: int,
    offset: int,
    tolerance: int,
) -> bool:
    """Whether `broker` surely held a write acknowledged from `invoked` to `completed` at
    `offset`: a member of every ISR in force in that span widened by the tolerance (some
    event before it saying the ISR), and not left out by a leader's shrink before the
    offset was committed."""
    early, late = invoked - tolerance, completed + tolerance
    before = [e for e in memberships if e.time <= early]
    if not before:
        return False
    during = [e for e in memberships if early < e.time <= late]
    if any(broker not in (e.isr or ()) for e in (before[-1], *during)):
        return False
    return broker not in shrunk_without(during, offset)


def _disturbed(
    cut: ReplicationEvent,
    spoilers: Sequence[ReplicationEvent],
    faults: Sequence[DiskFault],
    since: int,
    tolerance: int,
) -> bool:
    """Whether something from `since` to the truncation `cut` (widened by the tolerance) may
    have changed what the replica held, or made the log's history another: a fault on its
    disk, a recovery of its log, an unclean election of the key."""
    until = cut.time + tolerance
    if any(cut.broker in f.brokers and since <= f.time <= until for f in faults):
        return True
    return any(
        since <= e.time <= until and (e.f == "leader-election" or e.broker == cut.broker)
        for e in spoilers
    )


def check_conformance_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
    """The findings of this checker on one key."""
    if not log.events:
        return []  # every finding is of an event of the key's (most keys have none)
    settings = losses.rules.settings
    acked = acks_below_min_isr(log, settings, losses.rules.default_acks)
    elected = elections_outside_isr(log, settings)
    joined = joins_behind_hw(log)
    regressed = high_watermark_regressions(log)
    truncated = truncations_of_acknowledged(log, losses.rules)
    return [
        *rows_of(
            CHECKER,
            "ack-below-min-isr",
            acked,
            order="complete_index",
            detail=[
                ("key", "key"),
                ("value", "value"),
                ("offset", "offset"),
                ("writer", "complete_index"),
                ("invoked", "invoke_index"),
                ("acks", "acks"),
                ("event", "event"),
                ("leader", "leader"),
                ("isr", "isr"),
                ("min_insync_replicas", "min_insync_replicas"),
            ],
        ),
        *rows_of(
            CHECKER,
            "election-outside-isr",
            elected,
            order="election",
            detail=[(name, name) for name in elected.columns],
        ),
        *rows_of(
            CHECKER,
            "isr-join-behind-hw",
            joined,
            order="event",
            detail=[(name, name) for name in joined.columns],
        ),
        *rows_of(
            CHECKER,
            "hw-regression",
            regressed,
            order="event",
            detail=[(name, name) for name in regressed.columns],
        ),
        *rows_of(
            CHECKER,
            "truncated-acknowledged",
            truncated,
            order="event",
            detail=[(name, name) for name in truncated.columns],
        ),
    ]


class ConformanceChecker:
    """The `Checker` of this module, a per-key check."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
        return check_conformance_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        settings = context.settings
        notes = []
        if settings.min_insync_replicas is None:
            notes.append(
                "test.json gives no topic.min_insync_replicas: ack-below-min-isr is not judged"
            )
        if settings.brokers is None or settings.replica_lag_time_max_ms is None:
            notes.append(
                "test.json gives no brokers (node name -> broker id) or no "
                "replica.lag.time.max.ms: stale-isr-member is not judged"
            )
        elif not context.nemesis:
            notes.append("the history has no nemesis events: stale-isr-member is not judged")
        found = key_finding(context.key_findings, CHECKER, ANOMALIES)
        stale = stale_isr_members(context.nemesis, context.replication, settings, CHECKER)
        sampled = dict(found.sampled or {})
        for _checker, anomaly, key, order, expected, detail, count in sampled_rows(
            stale, context.config.sample
        ):
            slot = (str(anomaly), bool(expected))
            before = sampled.get(slot, SampledRows(0, ()))
            sampled[slot] = SampledRows(
                before.count + (count or 0), (*before.rows, (order, key, detail))
            )
        return CheckerReport(
            self.name,
            [replace(found, sampled=sampled)],
            details={"clock_tolerance_ns": settings.event_tolerance_ns},
            notes=notes,
        )
