"""Unclean-loss windows: committed data lost when a leader outside the ISR was elected.

From the SUT's `leader-election` events with `unclean: true`. A committed write (`ok`, or
`info` and read; see `checkers.key_log`) with a known offset is lost in the window of
election E (of its key) when either
- it was acknowledged, and last read by an `ok` read, before E (E is the first unclean
  election of the key after both), no `ok` read completed after E saw it, and the log
  after E no longer held it there: `ok` reads completed after E reached its offset or
  beyond, or the final read after E (which reads the key to its end) ended below it; or
- it was acknowledged before E (E is the first unclean election of the key after the
  acknowledgement) and last read after E but before the deposed leader rejoined the new
  leader's ISR (see below): clients may still read from a deposed leader that has not
  learned of E; after that rejoin, `ok` reads reached its offset or beyond without seeing
  it, or the final read ended below it; or
- it was acknowledged (or, indeterminate, first read) after E (E is the last unclean
  election of the key before) by the deposed leader, which had not yet learned of E:
  acknowledged and last read before the deposed leader (E's `previous_leader`) rejoined
  the ISR of the new leader (a later `isr-change` or `leader-election` of the key whose
  ISR holds it), and after that rejoin `ok` reads reached its offset or beyond without
  seeing it, or the final read ended below it.
One `unclean-loss-window` per election that lost something: the key, the election, the
lost offset range, how many committed values were lost, and the time window from the
first lost acknowledgement to the election. Expected (not invalid) when unclean leader
election was allowed; the lost writes' own `lost-write`/`unseen` are then expected too.
Found per key, in the per-key pass (`checkers.key_pass`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from checkers.catalogue import ANOMALIES as CATALOGUE
from checkers.checker import CheckContext
from checkers.key_findings import (
    FindingRow,
    KeyFacts,
    KeyFindings,
    key_finding,
    rows_of,
    same_named,
)
from checkers.key_log import KeyLog, ReplicationEvent
from checkers.losses import KeyLosses
from checkers.results import CheckerReport

CHECKER = "unclean"
ANOMALIES = ("unclean-loss-window",)


NOTHING_LOST = pd.DataFrame(
    columns=["value", "offset", "complete_time", "complete_index", "election_index"]
)
"""`key_unclean_lost` of a key that lost nothing (most keys), made once."""


def key_unclean_lost(log: KeyLog) -> pd.DataFrame:
    """The key's committed writes lost in an unclean-loss window (the module's rules), with
    `election_index` (empty when the key had no unclean election)."""
    events = log.events
    elections = log.unclean_elections
    if not elections:
        return NOTHING_LOST.copy()
    nan = float("nan")
    table = pd.DataFrame(
        {
            "election_index": [e.index for e in elections],
            "election_time": [float(e.time) for e in elections],
            "previous_time": [nan] + [float(e.time) for e in elections[:-1]],
            "next_time": [float(e.time) for e in elections[1:]] + [nan],
            "rejoin_time": [_rejoin_time(e, events) for e in elections],
        }
    )
    writes = log.located_writes
    acked = writes[writes["committed"]].copy()
    acked["offset"] = acked["offset"].fillna(acked["first_offset"])
    acked = acked[acked["offset"].notna()]
    ok = acked["status"] == "ok"
    complete = acked["complete_time"].astype("float64")
    last_read = acked["last_read_time"].astype("float64")
    acked["complete_time"] = complete.where(ok, _least(complete, last_read))
    if acked.empty:
        return NOTHING_LOST.copy()
    pairs = acked.merge(table, how="cross")
    complete = pairs["complete_time"].astype("float64")
    last_read = pairs["last_read_time"].astype("float64")
    last_sign = _greatest(complete, last_read)
    at = pairs["election_time"]

    def first_after(moment: pd.Series) -> pd.Series:
        return (at > moment) & (pairs["previous_time"].isna() | (pairs["previous_time"] <= moment))

    before = first_after(last_sign)
    acked_after = (at < complete) & (pairs["next_time"].isna() | (pairs["next_time"] >= complete))
    read_after = first_after(complete) & (last_read >= at)
    deposed = (acked_after | read_after) & (last_sign < pairs["rejoin_time"])
    pairs["_before"] = before
    candidates = pairs[before | deposed]
    reads = log.reads[log.reads["type"] == "ok"]
    final = reads[reads["final"]]
    # Per election: how far `ok` reads, and the final read, went after it (and after the
    # deposed leader's rejoin): a write is gone when reads passed its offset without it, or
    # when the final read, which reads each key to its end, ended below it.
    reach = {
        e.index: (
            (_max_offset(reads, e.time), _max_offset(final, e.time)),
            (nan, nan) if math.isnan(r) else (_max_offset(reads, r), _max_offset(final, r)),
        )
        for e, r in zip(elections, table["rejoin_time"], strict=True)
    }
    limits = [
        reach[election][0 if early else 1]
        for election, early in zip(candidates["election_index"], candidates["_before"], strict=True)
    ]
    index = candidates.index
    passed = pd.Series([limit[0] for limit in limits], index=index, dtype="float64")
    log_end = pd.Series([limit[1] for limit in limits], index=index, dtype="float64")
    offset = candidates["offset"].astype("float64")
    lost = candidates[(offset <= passed) | (offset > log_end)]
    lost = lost.sort_values("election_index", kind="stable").drop_duplicates("value")
    return lost.drop(columns=["_before"]).reset_index(drop=True)


def _least(a: pd.Series, b: pd.Series) -> pd.Series:
    """Spark's `least` of two float columns: the smaller, nulls (NaN) skipped."""
    return pd.Series(np.fmin(a.to_numpy(), b.to_numpy()), index=a.index)


def _greatest(a: pd.Series, b: pd.Series) -> pd.Series:
    """Spark's `greatest` of two float columns: the larger, nulls (NaN) skipped."""
    return pd.Series(np.fmax(a.to_numpy(), b.to_numpy()), index=a.index)


def _rejoin_time(election: ReplicationEvent, events: Sequence[ReplicationEvent]) -> float:
    """When the deposed leader was next in the key's ISR after `election` (NaN: never)."""
    times = [
        e.time
        for e in events
        if e.isr is not None
        and e.time > election.time
        and election.previous_leader is not None
        and election.previous_leader in e.isr
    ]
    return float(min(times)) if times else float("nan")


def _max_offset(reads: pd.DataFrame, since: float) -> float:
    """The highest offset of the `ok` reads at or after `since` (NaN: none)."""
    offsets = reads.loc[reads["time"] >= since, "offset"]
    return float("nan") if offsets.empty else float(offsets.max())


def loss_windows(log: KeyLog, losses: KeyLosses) -> pd.DataFrame:
    """One row per unclean election of the key that lost committed writes."""
    lost = losses.unclean_lost
    if lost.empty:
        return pd.DataFrame()
    elections = {e.index: e for e in log.events if e.f == "leader-election" and e.unclean}
    rows = []
    for election, group in lost.groupby("election_index", sort=True):
        event = elections[int(election)]
        sample = group.sort_values(["offset", "value"]).head(5)
        acked = group["complete_time"].astype("int64")
        rows.append(
            {
                "key": log.key,
                "election": event.index,
                "time": event.time,
                "leader": event.leader,
                "previous_leader": event.previous_leader,
                "leader_epoch": event.leader_epoch,
                "isr": None if event.isr is None else list(event.isr),
                "offsets": [int(group["offset"].min()), int(group["offset"].max())],
                "lost": len(group),
                "window": [int(acked.min()), max(int(acked.max()), event.time)],
                "lost_values": sample["value"].tolist(),
            }
        )
    return pd.DataFrame(rows)


def check_unclean_key(log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
    """The findings of this checker on one key: its loss windows."""
    if losses.unclean_lost.empty:  # most keys: no frame to make
        return []
    windows = loss_windows(log, losses)
    if windows.empty:
        return []
    rules = losses.rules
    windows["expected"] = rules.unclean_allowed
    windows["expected_reason"] = (
        "test.json allows unclean leader election"
        if rules.settings.unclean_leader_election
        else "--expect-loss unclean"
    )
    return rows_of(
        CHECKER,
        "unclean-loss-window",
        windows,
        order="election",
        detail=same_named(CATALOGUE["unclean-loss-window"].checked_fields),
        expected="expected",
    )


class UncleanChecker:
    """The `Checker` of this module, a per-key check: the loss windows, with the elections
    counted, and a note when test.json had turned unclean election off."""

    name = CHECKER
    anomalies = ANOMALIES

    def check_key(self, log: KeyLog, losses: KeyLosses) -> list[FindingRow]:
        return check_unclean_key(log, losses)

    def check(self, context: CheckContext) -> CheckerReport:
        unclean = context.elections["unclean_elections"]
        notes = []
        if unclean and context.settings.unclean_leader_election is False:
            notes.append(
                f"{unclean} unclean leader election(s) although "
                "test.json turned unclean leader election off"
            )
        return CheckerReport(
            self.name,
            [key_finding(context.key_findings, CHECKER, ANOMALIES, json_fields=("lost_values",))],
            details=dict(context.elections),
            notes=notes,
        )


def unclean_lost_frame(spark: SparkSession, found: KeyFindings) -> DataFrame:
    """(key, value, election_index) of the committed writes lost in unclean-loss windows,
    from the per-key pass's facts, as a frame for checkers of one's own."""
    rows = [
        (key, lost["value"], lost["election_index"])
        for key, facts in sorted(found.facts.get(CHECKER, {}).items())
        for lost in facts.get("lost", [])
    ]
    return spark.createDataFrame(rows, "key string, value string, election_index long")


def lost_facts(log: KeyLog, lost: pd.DataFrame) -> KeyFacts | None:
    """The key's writes lost in unclean-loss windows as a facts row (None: none lost)."""
    if lost.empty:
        return None
    pairs = [[v, int(e)] for v, e in zip(lost["value"], lost["election_index"], strict=True)]
    return KeyFacts(
        CHECKER, log.key, {"lost": [{"value": v, "election_index": e} for v, e in pairs]}
    )
