"""Unclean-loss windows: committed data lost when a leader outside the ISR was elected.

From the SUT's `leader-election` events with `unclean: true`. A committed write (`ok`, or
`info` and read; see `checkers.evidence`) with a known offset is lost in the window of
election E (of its key) when either
- it was acknowledged, and last read by an `ok` read, before E (E is the first unclean
  election of the key after both), and no `ok` read completed after E saw it, although
  `ok` reads completed after E reached its offset or beyond (so the log after E no longer
  held it there); or
- it was acknowledged before E (E is the first unclean election of the key after the
  acknowledgement) and last read after E but before the deposed leader rejoined the new
  leader's ISR (see below): clients may still read from a deposed leader that has not
  learned of E; `ok` reads after that rejoin reached its offset or beyond without seeing
  it; or
- it was acknowledged (or, indeterminate, first read) after E (E is the last unclean
  election of the key before) by the deposed leader, which had not yet learned of E: acknowledged and last read before the
  deposed leader (E's `previous_leader`) rejoined the ISR of the new leader (a later
  `isr-change` or `leader-election` of the key whose ISR holds it), and `ok` reads after
  that rejoin reached its offset or beyond without seeing it.
One `unclean-loss-window` per election that lost something: the key, the election, the
lost offset range, how many committed values were lost, and the time window from the
first lost acknowledgement to the election. Expected (not invalid) when unclean leader
election was allowed; the lost writes' own `lost-write`/`unseen` are then expected too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.checker import CheckContext
from checkers.evidence import Evidence
from checkers.key_findings import FindingRow, key_finding, rows_of
from checkers.key_log import KeyLog, ReplicationEvent
from checkers.losses import KeyLosses
from checkers.results import CheckerReport

CHECKER = "unclean"
ANOMALIES = ("unclean-loss-window",)


def unclean_elections(events: DataFrame) -> DataFrame:
    """The SUT's unclean leader elections: key, index, time, leader, epoch, ISR."""
    return events.filter(
        (F.col("process") == "sut")
        & (F.col("f") == "leader-election")
        & (F.col("unclean") == F.lit(True))
        & F.col("key").isNotNull()
    ).select(
        "key",
        F.col("index").alias("election_index"),
        F.col("time").alias("election_time"),
        "leader",
        "previous_leader",
        "leader_epoch",
        "isr",
    )


def _rejoins(events: DataFrame, elections: DataFrame) -> DataFrame:
    """Per unclean election: when its deposed leader was next seen back in the key's ISR."""
    changes = events.filter(
        (F.col("process") == "sut")
        & F.col("f").isin("isr-change", "leader-election")
        & F.col("isr").isNotNull()
    ).select(F.col("key").alias("_key"), F.col("time").alias("_time"), "isr")
    return (
        elections.join(
            changes,
            (F.col("key") == F.col("_key"))
            & (F.col("_time") > F.col("election_time"))
            & F.array_contains(F.col("isr"), F.col("previous_leader")),
        )
        .groupBy("election_index")
        .agg(F.min("_time").alias("rejoin_time"))
    )


def unclean_lost_writes(evidence: Evidence, events: DataFrame) -> DataFrame:
    """Committed writes lost in an unclean election: write columns plus the election's."""
    by_key = Window.partitionBy("key").orderBy("election_time", "election_index")
    found = unclean_elections(events).select(
        "key", "election_index", "election_time", "previous_leader"
    )
    elections = F.broadcast(
        found.withColumn("previous_time", F.lag("election_time").over(by_key))
        .withColumn("next_time", F.lead("election_time").over(by_key))
        .join(_rejoins(events, found), "election_index", "left")
    )
    # Committed writes at a known offset. An indeterminate write that was read counts from
    # when it was known to be in the log: its completion or its read, whichever came first.
    acked = (
        evidence.located_writes.filter(F.col("committed"))
        .withColumn("offset", F.coalesce("offset", "first_offset"))
        .filter(F.col("offset").isNotNull())
        .withColumn(
            "complete_time",
            F.when(F.col("status") == "ok", F.col("complete_time")).otherwise(
                F.least("complete_time", "last_read_time")
            ),
        )
    )
    complete = F.col("complete_time")
    last_sign = F.greatest(complete, F.coalesce(F.col("last_read_time"), complete))

    def first_after(moment: Column) -> Column:
        """E is the first unclean election of the key after `moment`."""
        return (F.col("election_time") > moment) & (
            F.col("previous_time").isNull() | (F.col("previous_time") <= moment)
        )

    # Before E: E is the first election after the acknowledgement and the last read.
    before = first_after(last_sign)
    # After E, by the deposed leader: E is the last election before the acknowledgement.
    acked_after = (F.col("election_time") < complete) & (
        F.col("next_time").isNull() | (F.col("next_time") >= complete)
    )
    # Acknowledged before E, read after E from the deposed leader.
    read_after = first_after(complete) & (F.col("last_read_time") >= F.col("election_time"))
    # Both only while the deposed leader had not rejoined the new leader's ISR.
    deposed = (acked_after | read_after) & (last_sign < F.col("rejoin_time"))
    candidates = acked.join(
        elections, (acked["key"] == elections["key"]) & (before | deposed)
    ).select(
        acked["key"],
        "value",
        "offset",
        "complete_time",
        "complete_index",
        "election_index",
        before.alias("_before"),
    )
    ok_reads = evidence.reads.filter(F.col("type") == "ok").select("key", "offset", "time")
    reach_after = (
        ok_reads.join(
            elections.select("key", "election_index", "election_time", "rejoin_time"), "key"
        )
        .groupBy("election_index")
        .agg(
            F.max(F.when(F.col("time") >= F.col("election_time"), F.col("offset"))).alias(
                "reach_election"
            ),
            F.max(F.when(F.col("time") >= F.col("rejoin_time"), F.col("offset"))).alias(
                "reach_rejoin"
            ),
        )
    )
    # The log after E (after the rejoin, for the deposed leader's writes) reached the offset.
    lost = candidates.join(F.broadcast(reach_after), "election_index").filter(
        F.col("offset")
        <= F.when(F.col("_before"), F.col("reach_election")).otherwise(F.col("reach_rejoin"))
    )
    # A write read on both sides of an election may match two: it was lost in the first.
    first = Window.partitionBy("key", "value").orderBy("election_index")
    return (
        lost.withColumn("_rank", F.row_number().over(first))
        .filter(F.col("_rank") == 1)
        .drop("_before", "reach_election", "reach_rejoin", "_rank")
    )


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
    fields = [
        "key",
        "election",
        "time",
        "leader",
        "previous_leader",
        "leader_epoch",
        "isr",
        "offsets",
        "lost",
        "window",
        "lost_values",
    ]
    return rows_of(
        CHECKER,
        "unclean-loss-window",
        windows,
        order="election",
        detail=[(name, name) for name in fields],
        expected="expected",
    )


def election_counts(events: DataFrame) -> dict[str, int]:
    """How many leader elections the SUT reported, and how many were unclean."""
    row = (
        events.filter((F.col("process") == "sut") & (F.col("f") == "leader-election"))
        .agg(
            F.count(F.lit(1)).alias("elections"),
            F.count(F.when(F.col("unclean") == F.lit(True), 1)).alias("unclean"),
        )
        .collect()[0]
    )
    return {"leader_elections": int(row["elections"]), "unclean_elections": int(row["unclean"])}


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


def key_unclean_lost(log: KeyLog) -> pd.DataFrame:
    """`unclean_lost_writes` on one key: its committed writes lost in an unclean-loss
    window, with `election_index` (empty when the key had no unclean election)."""
    events = log.events
    elections = sorted(
        (e for e in events if e.f == "leader-election" and e.unclean),
        key=lambda e: (e.time, e.index),
    )
    columns = ["value", "offset", "complete_time", "complete_index", "election_index"]
    if not elections:
        return pd.DataFrame(columns=columns)
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
    acked["complete_time"] = complete.where(ok, complete.combine(last_read, _least))
    if acked.empty:
        return pd.DataFrame(columns=columns)
    pairs = acked.merge(table, how="cross")
    complete = pairs["complete_time"].astype("float64")
    last_read = pairs["last_read_time"].astype("float64")
    last_sign = complete.combine(last_read.fillna(complete), _greatest)
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
    reach = {
        e.index: (
            _max_offset(reads, e.time),
            None if math.isnan(r) else _max_offset(reads, r),
        )
        for e, r in zip(elections, table["rejoin_time"], strict=True)
    }
    limit = [
        reach[election][0 if early else 1]
        for election, early in zip(candidates["election_index"], candidates["_before"], strict=True)
    ]
    bound = pd.Series(limit, index=candidates.index, dtype="float64")
    lost = candidates[candidates["offset"].astype("float64") <= bound]
    lost = lost.sort_values("election_index", kind="stable").drop_duplicates("value")
    return lost.drop(columns=["_before"]).reset_index(drop=True)


def _least(a: float, b: float) -> float:
    """Spark's `least`: the smaller, nulls skipped."""
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def _greatest(a: float, b: float) -> float:
    """Spark's `greatest`: the larger, nulls skipped."""
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


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
