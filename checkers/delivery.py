"""Delivery: `lost-write`, `unseen`, `G1a` and `lost-acked-write` (docs/anomalies.md).

- lost-write (Jepsen): a committed write whose value's last dense index is at or below the
  highest index an `ok` read reached in its key, and that no `ok` read saw (compared by
  offset: the dense index is increasing in the offset).
- unseen (Jepsen): an `ok` write that no `ok` read saw by the end of the history.
- G1a (Jepsen): an `ok` read saw a value whose send completed `fail`; one anomaly per
  (key, value), with the first reader and the number of reads.
- lost-acked-write (squall): an `ok` write with acks=-1 and a known offset, absent from a
  complete final read of its key, while test.json bounded such losses (unclean election
  off, `min.insync.replicas` given, replication factor >= 2 or unknown:
  `judges_lost_acked_writes`). A key's final read is
  complete when one process's `ok` polls marked `final: true` read it from at or before
  the key's lowest known offset to at or beyond its highest acknowledged offset, or to the
  end of the log that process's last `ok` `log-ends` recorded (and not beyond it: a read
  past the recorded end shows the log grew after it), so that a lost tail is judged (acks
  of sends without an offset are not judged here: `unseen` covers them). Expected only when
  lost with the power of every replica that held it under a flush policy that does not
  fsync before acknowledging (`checkers.power_losses`; under `min.insync.replicas=1` the
  reason names an ISR of one that acknowledged it).
Each key also counts its acknowledged writes lost, each once however many of these types
it shows under (`acknowledged_lost`: `ok` writes unseen or missing from a complete final
read; `allowed_lost`: those of them the configuration allows), for results.json's
`summary`.
Each lost-write and lost-acked-write case is placed in its key's log as the log was held
at the end, by the final read and the replicas' final reads (`placement`: `prefix`,
`middle` (a hole), `tail`, or `whole-log`).
lost-write and unseen are expected losses for acks=0/1 writes and, when allowed, for
writes lost in an unclean-loss window or with the power of all their holders
(`checkers.losses`). All are found per key, in the
per-key pass (`checkers.key_pass`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from checkers.checker import CheckContext
from checkers.columns import integer_values, isin
from checkers.empty_frames import made_once
from checkers.key_findings import FindingRow, KeyFacts, key_finding, keyed, rows_of
from checkers.key_log import KeyLog
from checkers.losses import KeyLosses, LossRules
from checkers.results import CheckerReport

CHECKER = "delivery"
ANOMALIES = ("lost-write", "unseen", "G1a", "lost-acked-write")
WRITE_DETAIL = (
    ("key", "key"),
    ("value", "value"),
    ("offset", "offset"),
    ("writer", "complete_index"),
    ("status", "status"),
    ("acks", "effective_acks"),
    ("time", "complete_time"),
)


def lost_writes(log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """Committed writes at or below the highest read offset of the key, never read ok."""
    writes = log.located_writes
    reach = log.max_read_offset
    if reach is None:
        return losses.classify(writes.iloc[0:0])
    last = writes["last_offset"]
    unread = (
        writes["committed"].to_numpy(dtype=bool)
        & ~writes["was_read"].to_numpy(dtype=bool)
        & last.notna().to_numpy()
        & (last.to_numpy(dtype=np.int64, na_value=reach + 1) <= reach)
    )
    if not unread.any():  # most keys lose nothing
        return losses.classify(writes.iloc[0:0])
    lost = writes[unread].copy()
    lost["first_idx"] = log.dense(lost["first_offset"]).to_numpy()
    lost["max_read_idx"] = log.dense(pd.Series([reach] * len(lost), dtype="Int64")).to_numpy()
    return losses.classify(lost)


def unseen_writes(log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """`ok` writes that no `ok` read saw."""
    writes = log.writes
    ok = writes["status"].to_numpy() == "ok"
    return losses.classify(writes[ok & ~writes["was_read"].to_numpy(dtype=bool)])


def aborted_reads(log: KeyLog) -> pd.DataFrame:
    """Values read by an `ok` read although their send failed."""
    writes = log.writes
    return writes[(writes["status"].to_numpy() == "fail") & writes["was_read"].to_numpy(dtype=bool)]


def final_read_coverage(log: KeyLog) -> dict[str, Any] | None:
    """The key's highest acknowledged offset, lowest known offset, how far its final read
    went, the log end it read to (`log_end`, `reached_log_end`) and whether it was
    complete; None when no acknowledged write has an offset."""
    writes = log.columns["writes"]
    offsets = writes["offset"]
    acked = (writes["status"] == "ok") & ~pd.isna(offsets)
    if not acked.any():
        return None
    max_acked = int(integer_values(offsets)[acked].max())
    lowest = int(log.offsets[0])
    reads = log.columns["reads"]
    final = _final(reads)
    spans = _spans(reads["process_id"][final], reads["offset"][final])
    complete = any(low <= lowest and high >= max_acked for low, high in spans.values())
    log_end = reached_log_end(spans, log.shared.log_ends.get(log.key, {}), lowest)
    return {
        "max_acked_offset": max_acked,
        "min_known_offset": lowest,
        "final_read_to": max(high for _, high in spans.values()) if spans else None,
        "log_end": log_end,
        "complete": complete or log_end is not None,
    }


def _final(reads: Mapping[str, Any]) -> np.ndarray:
    """Which of `reads` (`KeyLog.reads`' columns) the final read made: `ok` and `final`."""
    final: np.ndarray = (np.asarray(reads["type"]) == "ok") & np.asarray(reads["final"], bool)
    return final


def _spans(processes: np.ndarray, offsets: np.ndarray) -> dict[Any, tuple[int, int]]:
    """The least and greatest of `offsets` per process, by process (a row without one is
    left out, as a groupby leaves it)."""
    named = ~pd.isna(processes)
    if not named.any():
        return {}
    order = np.argsort(processes[named], kind="stable")
    processes, offsets = processes[named][order], np.asarray(offsets[named])[order]
    starts = np.flatnonzero(np.concatenate(([True], processes[1:] != processes[:-1])))
    known = processes[starts]
    low = np.minimum.reduceat(offsets, starts)
    high = np.maximum.reduceat(offsets, starts)
    return {
        process: (int(first), int(last))
        for process, first, last in zip(known.tolist(), low, high, strict=True)
    }


def reached_log_end(
    spans: Mapping[Any, tuple[int, int]], ends: Mapping[int, int], lowest: int
) -> int | None:
    """The highest log end (`SharedFacts.log_ends`: per process, the end its last `ok`
    `log-ends` recorded) that its process's final read (`spans`: min and max offset read,
    per process) read the key to from at or before `lowest`, and not beyond; a log that
    ended at or below `lowest` held nothing to read. None if none did."""
    reached = None
    for process, end in ends.items():
        if process in spans:
            first, last = spans[process]
            if last >= end or first > lowest or last < end - 1:
                continue
        elif end > lowest:
            continue
        reached = end if reached is None else max(reached, end)
    return reached


def lost_acked_writes(
    log: KeyLog, losses: KeyLosses, final_read_to: Any, log_end: Any = None
) -> pd.DataFrame:
    """acks=-1 `ok` writes with an offset, missing from the key's complete final read; those
    lost with the power of every replica that held them are expected where the flush
    policy allows it (`KeyLosses.classify`)."""
    kept = _missing_from_final_read(log, losses)
    writes = log.writes
    if not kept.any():  # most keys; the columns' dtypes follow the two facts' types
        facts = (type(final_read_to), type(log_end))
        return made_once(
            ("lost-acked-write", facts),
            writes.iloc[0:0],
            lambda none: _missing(losses.classify(none), final_read_to, log_end),
        )
    return _missing(losses.classify(writes[kept]), final_read_to, log_end)


def _acks_all(acks: Any, default: int | None) -> np.ndarray:
    """Which of `acks` (the writes' own; null: not said) are -1 once the default fills
    those not said, as `KeyLosses.effective_acks` fills them."""
    said = acks if isinstance(acks, pd.arrays.IntegerArray) else pd.array(acks, dtype="Int64")
    null = np.asarray(said.isna(), dtype=bool)
    minus_one = (said.to_numpy(dtype=np.int64, na_value=0) == -1) & ~null
    found: np.ndarray = minus_one | (null & (default == -1))
    return found


def _missing_from_final_read(log: KeyLog, losses: KeyLosses) -> np.ndarray:
    """Which of the key's writes are acks=-1 `ok` writes with an offset whose value the
    final read did not return."""
    writes = log.columns["writes"]
    reads = log.columns["reads"]
    final_values = np.asarray(reads["value"])[_final(reads)]
    kept: np.ndarray = (writes["status"] == "ok") & ~pd.isna(writes["offset"])
    if kept.any():
        kept &= _acks_all(writes["acks"], losses.rules.default_acks)
        kept &= ~isin(np.asarray(writes["value"]), final_values)
    return kept


def _missing(missing: pd.DataFrame, final_read_to: Any, log_end: Any) -> pd.DataFrame:
    """The classified writes `missing` from the final read, with where it read to."""
    missing["final_read_to"] = final_read_to
    missing["log_end"] = log_end
    return missing


def held_span(log: KeyLog) -> tuple[int, int] | None:
    """The first and last offset the key's log still held at the end: read by its final
    read (`ok` polls marked `final`) or listed by a replica's final read (`replica-read`);
    None when neither holds anything."""
    reads = log.columns["reads"]
    final = np.asarray(reads["offset"])[_final(reads)]
    final = final[~pd.isna(final)]
    lows = [int(final.min())] if len(final) else []
    highs = [int(final.max())] if len(final) else []
    for event in log.events:
        if event.f == "replica-read" and event.from_offset is not None:
            lows.append(event.from_offset)
            highs.append(event.to_offset if event.to_offset is not None else event.from_offset)
    return (min(lows), max(highs)) if lows else None


def with_placement(lost: pd.DataFrame, span: tuple[int, int] | None) -> pd.DataFrame:
    """`lost` with `placement`: where each lost write's offset sits in the key's log as it
    was held at the end (`held_span`): `prefix` (below its first offset), `tail` (past its
    last), `middle` (between: a hole), or `whole-log` (the log held nothing)."""
    if lost.empty:
        return lost.assign(placement=pd.Series(dtype=object))
    offsets = lost["offset"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    placement = np.full(len(lost), "whole-log" if span is None else "middle", dtype=object)
    if span is not None:
        placement[offsets < span[0]] = "prefix"
        placement[offsets > span[1]] = "tail"
    placement[np.isnan(offsets)] = None
    return lost.assign(placement=placement)


def _placed(lost: pd.DataFrame, span: tuple[int, int] | None, key: str) -> pd.DataFrame:
    """`lost` with its placement (`with_placement`) and `key` for `rows_of`; as it is when
    empty."""
    return lost if lost.empty else with_placement(lost, span).assign(key=key)


def judges_lost_acked_writes(rules: LossRules) -> bool:
    """Whether the configuration bounds the loss of acks=-1 writes, and is held to it:
    unclean election off, `min.insync.replicas` given, the replication factor 2 or more (or
    not given). Under `min.insync.replicas=1` too: a loss is then allowed only as that
    setting and the flush policy allow it (lost with the power of every replica that held
    the write, an ISR of one among them), and every other loss is an anomaly."""
    settings = rules.settings
    return (
        settings.min_insync_replicas is not None
        and settings.unclean_leader_election is False
        and not rules.unclean_allowed
        and (settings.replication_factor is None or settings.replication_factor >= 2)
    )


def acknowledged_lost(unseen: pd.DataFrame, missing: pd.DataFrame) -> dict[str, int]:
    """The key's acknowledged writes lost, each value once: `ok` writes no read saw
    (`unseen`) or a complete final read missed (`missing`), both classified;
    `allowed_lost`: those of them every case of which the configuration allows. (An `ok`
    `lost-write` is also `unseen`.)"""

    if unseen.empty and missing.empty:  # most keys lose nothing
        return {"acknowledged_lost": 0, "allowed_lost": 0}

    def values(rows: pd.DataFrame) -> set[Any]:
        return {_hashable(value) for value in rows["value"].tolist()}

    def refused(rows: pd.DataFrame) -> set[Any]:
        if "expected" not in rows.columns:
            return values(rows)
        return values(rows[~rows["expected"].fillna(False).astype(bool)])

    allowed = (values(unseen) | values(missing)) - refused(unseen) - refused(missing)
    everything = values(unseen) | values(missing)
    return {"acknowledged_lost": len(everything), "allowed_lost": len(allowed)}


def _hashable(value: Any) -> Any:
    """A history value as a set member: a list or mapping (a Jepsen value) as its JSON."""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _lost_any(log: KeyLog) -> bool:
    """Whether the key has a lost-write, unseen or G1a case (`lost_writes`, `unseen_writes`,
    `aborted_reads`), decided on the log's columns."""
    writes = log.columns["writes"]
    status, was_read = writes["status"], np.asarray(writes["was_read"], dtype=bool)
    if ((status == "ok") & ~was_read).any() or ((status == "fail") & was_read).any():
        return True
    reach = log.max_read_offset
    if reach is None:
        return False
    located = log.columns["located_writes"]
    last = located["last_offset"]
    unread = (
        np.asarray(located["committed"], dtype=bool)
        & ~np.asarray(located["was_read"], dtype=bool)
        & ~pd.isna(last)
        & (last.to_numpy(dtype=np.int64, na_value=reach + 1) <= reach)
    )
    return bool(unread.any())


def check_delivery_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow | KeyFacts]:
    """The findings of this checker on one key, its final read's coverage, and its
    acknowledged writes lost (`acknowledged_lost`). A key that lost nothing (most) is
    judged on the log's columns alone."""
    key = log.key
    judged = judges_lost_acked_writes(losses.rules)
    coverage = final_read_coverage(log) if judged else None
    complete = coverage is not None and coverage["complete"]
    if not _lost_any(log) and not (complete and _missing_from_final_read(log, losses).any()):
        return [] if coverage is None else [KeyFacts(CHECKER, key, {"complete": complete})]
    lost = lost_writes(log, losses)
    unseen = unseen_writes(log, losses)
    missing = unseen.iloc[0:0]
    facts: dict[str, Any] = {}
    span = held_span(log) if not lost.empty or judges_lost_acked_writes(losses.rules) else None
    found: list[FindingRow | KeyFacts] = [
        *rows_of(
            CHECKER,
            "lost-write",
            _placed(lost, span, key),
            order="offset",
            detail=[
                *WRITE_DETAIL,
                ("index", "first_idx"),
                ("max_read_index", "max_read_idx"),
                ("placement", "placement"),
            ],
            expected="expected",
        ),
        *rows_of(
            CHECKER,
            "unseen",
            keyed(unseen, key),
            order="complete_index",
            detail=WRITE_DETAIL,
            expected="expected",
        ),
        *rows_of(
            CHECKER,
            "G1a",
            keyed(aborted_reads(log), key),
            order="complete_index",
            detail=[
                ("key", "key"),
                ("value", "value"),
                ("writer", "complete_index"),
                ("reader", "first_reader"),
                ("reads", "reads"),
            ],
        ),
    ]
    if judged and coverage is not None:
        facts["complete"] = coverage["complete"]
        if coverage["complete"]:
            missing = lost_acked_writes(log, losses, coverage["final_read_to"], coverage["log_end"])
            found += rows_of(
                CHECKER,
                "lost-acked-write",
                _placed(missing, span, key),
                order="offset",
                detail=[
                    *WRITE_DETAIL,
                    ("final_read_to", "final_read_to"),
                    ("log_end", "log_end"),
                    ("placement", "placement"),
                ],
                expected="expected",
            )
    counted = acknowledged_lost(unseen, missing)
    if counted["acknowledged_lost"]:
        facts.update(counted)
    if facts:
        found.append(KeyFacts(CHECKER, key, facts))
    return found


def lost_by_key(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per key that lost any, its `acknowledged_lost` and `allowed_lost` (sorted by key)."""
    return {
        key: {name: int(fact[name]) for name in ("acknowledged_lost", "allowed_lost")}
        for key, fact in sorted(facts.items())
        if fact.get("acknowledged_lost")
    }


def delivery_details(rules: LossRules, facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What lost-acked-write could judge: keys with and without a complete final read."""
    if not judges_lost_acked_writes(rules):
        return {
            "lost_acked_write": "not judged: "
            + (
                "unclean leader election is allowed"
                if rules.unclean_allowed
                else "the configuration did not bound it (test.json absent or silent on "
                "min.insync.replicas, unclean leader election not off, or a replication "
                "factor of 1)"
            )
        }
    covered = {key: fact["complete"] for key, fact in facts.items() if "complete" in fact}
    incomplete = sorted(key for key, complete in covered.items() if not complete)
    return {
        "lost_acked_write": "judged",
        "keys_with_complete_final_read": sum(1 for complete in covered.values() if complete),
        "keys_without_complete_final_read": incomplete[:50],
        "keys_without_complete_final_read_count": len(incomplete),
    }


class DeliveryChecker:
    """The `Checker` of this module, a per-key check; its details say what
    lost-acked-write could judge."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow | KeyFacts]:
        return check_delivery_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        judged = judges_lost_acked_writes(context.losses)
        looked_for = ANOMALIES if judged else tuple(a for a in ANOMALIES if a != "lost-acked-write")
        facts = context.key_facts.get(CHECKER, {})
        return CheckerReport(
            self.name,
            [key_finding(context.key_findings, CHECKER, looked_for)],
            details=delivery_details(context.losses, facts),
            lost_by_key=lost_by_key(facts),
        )
