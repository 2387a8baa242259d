"""Delivery: `lost-write`, `unseen`, `G1a` and `lost-acked-write` (docs/anomalies.md).

- lost-write (Jepsen): a committed write whose value's last dense index is at or below the
  highest index an `ok` read reached in its key, and that no `ok` read saw (compared by
  offset: the dense index is increasing in the offset).
- unseen (Jepsen): an `ok` write that no `ok` read saw by the end of the history.
- G1a (Jepsen): an `ok` read saw a value whose send completed `fail`; one anomaly per
  (key, value), with the first reader and the number of reads.
- lost-acked-write (squall): an `ok` write with acks=-1 and a known offset, absent from a
  complete final read of its key, while test.json promised no loss. A key's final read is
  complete when one process's `ok` polls marked `final: true` read it from at or before
  the key's lowest known offset to at or beyond its highest acknowledged offset (acks of
  sends without an offset are not judged here: `unseen` covers them).
lost-write and unseen are expected losses for acks=0/1 writes and, when allowed, for
writes lost in an unclean-loss window (`checkers.losses`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.checker import CheckContext
from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.losses import LossRules
from checkers.results import CheckerReport

CHECKER = "delivery"
ANOMALIES = ("lost-write", "unseen", "G1a", "lost-acked-write")


def _write_detail() -> list[Column | str]:
    return [
        "key",
        "value",
        "offset",
        F.col("complete_index").alias("writer"),
        "status",
        F.col("effective_acks").alias("acks"),
        F.col("complete_time").alias("time"),
    ]


def lost_writes(evidence: Evidence, losses: LossRules) -> DataFrame:
    """Committed writes at or below the highest read index of their key, never read ok."""
    candidates = evidence.located_writes.filter(
        F.col("committed") & ~F.col("was_read") & F.col("last_offset").isNotNull()
    )
    lost = candidates.join(evidence.read_bounds, "key").filter(
        F.col("last_offset") <= F.col("max_read_offset")
    )
    lost = evidence.dense_index(lost, "first_offset", "first_idx")
    return losses.classify(evidence.dense_index(lost, "max_read_offset", "max_read_idx"))


def unseen_writes(evidence: Evidence, losses: LossRules) -> DataFrame:
    """`ok` writes that no `ok` read saw."""
    unseen = evidence.writes.filter((F.col("status") == "ok") & ~F.col("was_read"))
    return losses.classify(unseen)


def aborted_reads(evidence: Evidence) -> DataFrame:
    """Values read by an `ok` read although their send failed."""
    return evidence.writes.filter((F.col("status") == "fail") & F.col("was_read"))


def final_read_coverage(evidence: Evidence) -> DataFrame:
    """Per key with acknowledged offsets: its highest one, lowest known offset, completeness."""
    acked = (
        evidence.writes.filter((F.col("status") == "ok") & F.col("offset").isNotNull())
        .groupBy("key")
        .agg(F.max("offset").alias("max_acked_offset"))
    )
    lowest = evidence.offset_index.groupBy("key").agg(F.min("offset").alias("min_known_offset"))
    final = (
        evidence.reads.filter((F.col("type") == "ok") & F.col("final"))
        .groupBy("key", "process_id")
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
    )
    coverage = acked.join(lowest, "key", "left").join(final, "key", "left")
    covers = (F.col("first") <= F.col("min_known_offset")) & (
        F.col("last") >= F.col("max_acked_offset")
    )
    return coverage.groupBy("key").agg(
        F.first("max_acked_offset").alias("max_acked_offset"),
        F.first("min_known_offset").alias("min_known_offset"),
        F.max("last").alias("final_read_to"),
        F.coalesce(F.max(covers), F.lit(False)).alias("complete"),
    )


def lost_acked_writes(evidence: Evidence, losses: LossRules) -> DataFrame:
    """acks=-1 `ok` writes with an offset, missing from their key's complete final read."""
    complete = final_read_coverage(evidence).filter(F.col("complete"))
    final_values = (
        evidence.reads.filter((F.col("type") == "ok") & F.col("final"))
        .select("key", "value")
        .distinct()
    )
    acked = losses.with_acks(
        evidence.writes.filter((F.col("status") == "ok") & F.col("offset").isNotNull())
    ).filter(F.col("effective_acks") == -1)
    return acked.join(complete.select("key", "final_read_to"), "key").join(
        final_values, ["value", "key"], "left_anti"
    )


def judges_lost_acked_writes(losses: LossRules) -> bool:
    """Only a configuration that promised no loss of acks=-1 writes is held to it."""
    return losses.settings.promises_no_loss and not losses.unclean_allowed


def check_delivery(evidence: Evidence, losses: LossRules) -> list[Finding]:
    """The findings of this checker."""
    lost = lost_writes(evidence, losses)
    unseen = unseen_writes(evidence, losses)
    aborted = aborted_reads(evidence)
    findings = [
        finding(
            CHECKER,
            "lost-write",
            lost,
            order="offset",
            detail=[
                *_write_detail(),
                F.col("first_idx").alias("index"),
                F.col("max_read_idx").alias("max_read_index"),
            ],
            expected=F.col("expected"),
        ),
        finding(
            CHECKER,
            "unseen",
            unseen,
            order="complete_index",
            detail=_write_detail(),
            expected=F.col("expected"),
        ),
        finding(
            CHECKER,
            "G1a",
            aborted,
            order="complete_index",
            detail=[
                "key",
                "value",
                F.col("complete_index").alias("writer"),
                F.col("first_reader").alias("reader"),
                "reads",
            ],
        ),
    ]
    if judges_lost_acked_writes(losses):
        findings.append(
            finding(
                CHECKER,
                "lost-acked-write",
                lost_acked_writes(evidence, losses),
                order="offset",
                detail=[*_write_detail(), "final_read_to"],
            )
        )
    return findings


def delivery_details(evidence: Evidence, losses: LossRules) -> dict[str, Any]:
    """What lost-acked-write could judge: keys with and without a complete final read."""
    if not judges_lost_acked_writes(losses):
        return {
            "lost_acked_write": "not judged: "
            + (
                "unclean leader election is allowed"
                if losses.unclean_allowed
                else "the configuration did not promise it (test.json absent, or "
                "min.insync.replicas < 2, or unclean leader election not off)"
            )
        }
    rows = final_read_coverage(evidence).select("key", "complete").collect()
    incomplete = sorted(str(row["key"]) for row in rows if not row["complete"])
    return {
        "lost_acked_write": "judged",
        "keys_with_complete_final_read": sum(1 for row in rows if row["complete"]),
        "keys_without_complete_final_read": incomplete[:50],
        "keys_without_complete_final_read_count": len(incomplete),
    }


class DeliveryChecker:
    """The `Checker` of this module; its details say what lost-acked-write could judge."""

    name = CHECKER
    anomalies = ANOMALIES

    def check(self, context: CheckContext) -> CheckerReport:
        return CheckerReport(
            self.name,
            check_delivery(context.evidence, context.losses),
            details=delivery_details(context.evidence, context.losses),
        )
