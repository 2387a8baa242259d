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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.checker import CheckContext
from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.losses import LossRules
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


def loss_windows(lost: DataFrame, events: DataFrame) -> DataFrame:
    """One row per unclean election that lost acknowledged writes."""
    windows = lost.groupBy("election_index").agg(
        F.count(F.lit(1)).alias("lost"),
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.min("complete_time").alias("first_ack_time"),
        F.max("complete_time").alias("last_ack_time"),
        F.slice(F.array_sort(F.collect_list(F.struct("offset", "value"))), 1, 5).alias("sample"),
    )
    return windows.join(unclean_elections(events), "election_index").withColumn(
        "lost_values", F.col("sample.value")
    )


def check_unclean(lost: DataFrame, events: DataFrame, losses: LossRules) -> list[Finding]:
    """The findings of this checker, from `unclean_lost_writes`."""
    windows = loss_windows(lost, events)
    reason = (
        "test.json allows unclean leader election"
        if losses.settings.unclean_leader_election
        else "--expect-loss unclean"
    )
    windows = windows.withColumn("expected_reason", F.lit(reason))
    return [
        finding(
            CHECKER,
            "unclean-loss-window",
            windows,
            order="election_index",
            detail=[
                "key",
                F.col("election_index").alias("election"),
                F.col("election_time").alias("time"),
                "leader",
                "previous_leader",
                "leader_epoch",
                "isr",
                F.array("first_offset", "last_offset").alias("offsets"),
                "lost",
                F.array("first_ack_time", F.greatest("last_ack_time", "election_time")).alias(
                    "window"
                ),
                "lost_values",
            ],
            expected=F.lit(losses.unclean_allowed),
            json_fields=("lost_values",),
        )
    ]


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
    """The `Checker` of this module: the loss windows of `CheckContext.unclean_lost`, with
    the elections counted, and a note when test.json had turned unclean election off."""

    name = CHECKER
    anomalies = ANOMALIES

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
            check_unclean(context.unclean_lost, context.events, context.losses),
            details=dict(context.elections),
            notes=notes,
        )
