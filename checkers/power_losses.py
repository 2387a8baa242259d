"""Acknowledged writes lost with the power of every replica that held them.

A `power-loss` fault (docs/history.md) kills a broker and drops what its filesystem had not
fsynced. Under a flush policy that does not fsync a message before it is acknowledged
(Kafka's default: `log.flush.interval.messages` never), an acknowledged write survives only
on the page cache of the replicas that hold it until they fsync; when every one of them
loses power first, it is gone, as the design allows. With `flush_messages` 1 every replica
fsyncs each message before it counts, and no power loss may take an acknowledged write.

An indeterminate (`info`) send whose record an `ok` read saw was committed by that read: it
is followed as an `ok` write acknowledged at its last read (its loss is then no anomaly of
its own, but it explains the offset reused after it and a reader's step back).

Which replicas held an `ok` write, from the history:
- at its acknowledgement, the ISR: every broker in the ISR in force from its invocation to
  its completion, widened by the clock tolerance of the SUT's events
  (`TestSettings.event_tolerance_ns`), less the brokers that had lost power before the
  invocation and not rejoined an ISR since (they cannot have appended it), and less those
  that a leader's ISR shrink in that span left out before the write was committed (the
  event's `high_watermark`, or the `log_end_offsets` it gives them, at or below the write's
  offset), unless a later event of the span brought them back: the leader committed the
  write without them; where no event says the key's ISR, every broker of test.json's
  `brokers`;
- later, every broker an ISR names while some holder is in it (a replica joins the ISR only
  once it has caught up with the leader), except one that lost power within the tolerance
  before (its election may still list it); a holder an ISR leaves out stops counting (out
  of sync, its copy cannot be elected leader while unclean election is off, and it
  truncates to the leader when it catches up), unless the same event lists it among the
  eligible leader replicas (KIP-966: left out by a shrink below min.insync.replicas, it
  keeps everything committed and a clean election may pick it); it counts as long as
  events list it in the ISR or the ELR.
A holder stops holding the write when its node loses power after the write was invoked.
The write is lost with power at the first power loss that leaves no holder, provided no `ok`
read saw it once the key had an elected leader again (then some copy survived, and the
history explains its loss otherwise); a read before that came from a deposed leader (paused
or cut off while the controller moved on, and not yet told), whose copy, out of the ISR, no
clean election may pick and which it truncates when it follows again. An ISR that leaves out every holder (an election of a replica that lacked the
write, say) makes it no loss with power: that is for the other checkers to judge. Nemesis events and operations share one clock, so power losses are compared
with operations as they are.

Whether the configuration allows such a loss is `checkers.losses`' decision: when the flush
policy does not fsync before acknowledging; under `min.insync.replicas=1` a write
acknowledged by an ISR of one is said so. A loss of a replica minority, a corruption or a
rollback never makes a write lost with power: only the power of all its holders does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from checkers.config import TestSettings
from checkers.events import NemesisEvent
from checkers.key_log import KeyLog, ReplicationEvent

POWER_LOST_COLUMNS = (
    "value",
    "offset",
    "power_index",
    "power_time",
    "led_again",
    "isr",
    "lost_with",
    "alone",
    "acknowledged",
)
"""`key_power_lost`'s columns: the write, the power loss that left it no holder (history
index and time, and when the key had an elected leader again: a read before then came from
a deposed leader), the brokers that held it at its acknowledgement, the nodes whose power took
it (in words: "n1, n2 at 41.2 s"), whether one broker alone acknowledged it, and whether it
was acknowledged (`ok`) or an indeterminate send that a read saw committed."""


@dataclass(frozen=True)
class PowerLoss:
    """A `power-loss` fault as applied: its history index and time, and the nodes that lost
    power with their broker ids (`brokers`: node -> id, those test.json names)."""

    index: int
    time: int
    nodes: tuple[str, ...]
    brokers: Mapping[str, int]


def power_losses(
    nemesis: Sequence[NemesisEvent], brokers: Mapping[str, int] | None
) -> tuple[PowerLoss, ...]:
    """The history's power losses, in history order: the nodes its `outcome` says lost
    power (else its `targets`). None without `brokers`: the nodes cannot be told apart from
    the SUT's broker ids."""
    if not brokers:
        return ()
    found = []
    for index, time, f, value_json in nemesis:
        if f != "power-loss" or value_json is None:
            continue
        nodes = _nodes_that_lost_power(value_json)
        known = {node: brokers[node] for node in nodes if node in brokers}
        if known:
            found.append(PowerLoss(index, time, tuple(sorted(known)), known))
    return tuple(found)


def _nodes_that_lost_power(value_json: str) -> list[str]:
    try:
        value = json.loads(value_json)
    except ValueError:
        return []
    if not isinstance(value, dict):
        return []
    outcome = value.get("outcome")
    if isinstance(outcome, dict):
        return [node for node, word in outcome.items() if word == "lost-power"]
    targets = value.get("targets")
    return [node for node in targets if isinstance(node, str)] if isinstance(targets, list) else []


NONE_POWER_LOST = pd.DataFrame(columns=list(POWER_LOST_COLUMNS))
"""`key_power_lost` of a key that lost nothing with power (most keys), made once."""


def key_power_lost(
    log: KeyLog, losses: Sequence[PowerLoss], settings: TestSettings
) -> pd.DataFrame:
    """The key's `ok` writes, and indeterminate ones an `ok` read saw, lost with the power of
    every replica that held them (the module's rules), with `POWER_LOST_COLUMNS`; empty
    without power losses."""
    if not losses or not settings.brokers:
        return NONE_POWER_LOST.copy()
    writes = log.located_writes
    reads = log.reads
    final_values = reads.loc[(reads["type"] == "ok") & reads["final"], "value"]
    # Only a write that some `ok` read missed can be lost: the others are not looked at.
    missed = ~writes["was_read"] | ~writes["value"].isin(final_values)
    ok = (writes["status"] == "ok") & writes["complete_time"].notna()
    read_info = (writes["status"] == "info") & writes["was_read"]
    acked = writes[(ok | read_info) & missed]
    if acked.empty:
        return NONE_POWER_LOST.copy()
    memberships = [e for e in log.events if e.isr is not None]
    timeline = HolderTimeline(memberships, losses, settings)
    rows = []
    is_ok = (acked["status"] == "ok").to_numpy()
    invoked = acked["invoke_time"].astype("float64").to_numpy(na_value=np.nan)
    last_read = acked["last_read_time"].astype("float64").to_numpy(na_value=np.nan)
    # An indeterminate send an `ok` read saw was committed by its last read: its holders are
    # followed from the ISR in force up to then.
    completed = np.where(
        is_ok, acked["complete_time"].astype("float64").to_numpy(na_value=np.nan), last_read
    )
    offsets = acked["offset"].astype("Int64").fillna(acked["first_offset"].astype("Int64"))
    for at, (value, offset) in enumerate(zip(acked["value"], offsets, strict=True)):
        start = completed[at] if np.isnan(invoked[at]) else invoked[at]
        known = None if pd.isna(offset) else int(offset)
        found = timeline.lost_with_power(int(start), int(completed[at]), known)
        if found is None:
            continue
        loss, isr, took = found
        led_again = timeline.led_again(loss.time)
        if not np.isnan(last_read[at]) and last_read[at] > led_again:
            continue
        rows.append(
            {
                "value": value,
                "offset": offset,
                "power_index": loss.index,
                "power_time": loss.time,
                "led_again": int(led_again),
                "isr": sorted(isr),
                "lost_with": _in_words(took),
                "alone": len(isr) == 1,
                "acknowledged": bool(is_ok[at]),
            }
        )
    return pd.DataFrame(rows, columns=list(POWER_LOST_COLUMNS))


class HolderTimeline:
    """One key's ISR memberships and the history's power losses, to follow a write's
    holders through them."""

    def __init__(
        self,
        memberships: Sequence[ReplicationEvent],
        losses: Sequence[PowerLoss],
        settings: TestSettings,
    ) -> None:
        self.memberships = sorted(memberships, key=lambda e: (e.time, e.index))
        self.elections = [e for e in self.memberships if e.leader is not None and e.leader >= 0]
        self.losses = sorted(losses, key=lambda p: (p.time, p.index))
        self.tolerance = settings.event_tolerance_ns
        self.every_broker = frozenset((settings.brokers or {}).values())
        self.node_of = {b: n for n, b in (settings.brokers or {}).items()}

    def led_again(self, lost_at: int) -> float:
        """When the key had an elected leader again after a power loss at `lost_at` (the
        first election or ISR change naming one), less the tolerance: a read before then was
        served by a deposed leader, whose copy no clean election may pick. `lost_at` itself
        when no event says so (a read after the loss then counts as a surviving copy)."""
        for event in self.elections:
            if event.time > lost_at:
                return float(max(lost_at, event.time - self.tolerance))
        return float(lost_at)

    def isr_at_ack(self, invoked: int, completed: int, offset: int | None = None) -> set[int]:
        """The brokers in the ISR in force at some moment from `invoked` to `completed`,
        widened by the tolerance; every broker when no event says the ISR by then. Given the
        write's `offset`, less a broker that a leader's shrink in that span left out before
        the offset was committed (the leader's high watermark, or the log end it knew of the
        broker, at or below it), and that no later event of the span brought back: the
        leader committed the write without it."""
        early, late = invoked - self.tolerance, completed + self.tolerance
        before = [e for e in self.memberships if e.time <= early]
        during = [e for e in self.memberships if early < e.time <= late]
        if not before and not during:
            return set(self.every_broker)
        isr: set[int] = set(before[-1].isr or ()) if before else set()
        for event in during:
            isr |= set(event.isr or ())
        if offset is not None:
            isr -= shrunk_without(during, offset)
        return isr

    def lost_with_power(
        self, invoked: int, completed: int, offset: int | None = None
    ) -> tuple[PowerLoss, set[int], list[tuple[PowerLoss, list[str]]]] | None:
        """The power loss that left a write invoked and acknowledged then (at `offset`, when
        known) without a holder, the brokers that held it at its acknowledgement and the
        nodes whose power took it (per power loss); None when some holder was always
        left."""
        holders = self.isr_at_ack(invoked, completed, offset)
        last_lost: dict[int, int] = {}
        for loss in self.losses:
            if loss.time > invoked:
                break
            for broker in loss.brokers.values():
                last_lost[broker] = loss.time
        for broker, lost_at in last_lost.items():
            rejoined = any(
                lost_at + self.tolerance < e.time <= completed + self.tolerance
                and broker in (e.isr or ())
                for e in self.memberships
            )
            if not rejoined:
                holders.discard(broker)
        if not holders:
            return None  # none of its ISR can have appended it: not a power loss's doing
        at_ack = set(holders)
        took: list[tuple[PowerLoss, list[str]]] = []
        # The events around the acknowledgement count as membership changes too: a holder
        # that one of them leaves out stops counting, whether it left before the write was
        # committed (it may lack it) or after (out of sync, it cannot be elected cleanly).
        later = [e for e in self.memberships if e.time > invoked - self.tolerance]
        steps = sorted(
            [(p.time, 0, p.index, p) for p in self.losses if p.time > invoked]
            + [(e.time, 1, e.index, e) for e in later],
            key=lambda step: step[:3],
        )
        for _time, _kind, _index, step in steps:
            if isinstance(step, PowerLoss):
                hit = sorted(b for b in step.brokers.values() if b in holders)
                for broker in step.brokers.values():
                    last_lost[broker] = step.time
                if hit:
                    holders -= set(hit)
                    took.append((step, [self.node_of.get(b, str(b)) for b in hit]))
                if not holders:
                    return step, at_ack, took
            else:
                members = set(step.isr or ())
                # A holder the event moves to the eligible leader replicas keeps its copy
                # and may be elected cleanly: it still holds the write.
                eligible = holders & set(step.elr or ())
                if not holders & (members | eligible):
                    return None  # the ISR left every holder out: no power loss's doing
                holders = (
                    (holders & members)
                    | eligible
                    | {
                        b
                        for b in members
                        if b not in last_lost or step.time > last_lost[b] + self.tolerance
                    }
                )
        return None


def shrunk_without(events: Sequence[ReplicationEvent], offset: int) -> set[int]:
    """The brokers that a leader's ISR shrink among `events` (in time order) left out before
    `offset` was committed (its high watermark, or the log end it knew of the broker, at or
    below the offset when it decided), and that no later event brought back."""
    out: set[int] = set()
    for event in events:
        members = set(event.isr or ())
        out -= members
        ends = event.log_end_offsets or {}
        uncommitted = event.high_watermark is not None and event.high_watermark <= offset
        for broker in set(event.previous_isr or ()) - members:
            end = ends.get(broker)
            if uncommitted or (end is not None and end <= offset):
                out.add(broker)
    return out


def _in_words(took: Sequence[tuple[PowerLoss, list[str]]]) -> str:
    """The nodes whose power took a write, and when (seconds of the history's clock), as
    `n1 at 12.0 s; n2, n3 at 41.2 s`."""
    return "; ".join(f"{', '.join(nodes)} at {loss.time / 1e9:.1f} s" for loss, nodes in took)
