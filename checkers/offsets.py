"""Offset consistency: `inconsistent-offsets` and `duplicate` (docs/anomalies.md, as Jepsen).

- inconsistent-offsets: an offset of a key holds two or more distinct values, by the
  evidence (every poll, every committed send). It is counted as expected when a write at
  that offset was lossy by configuration (acks=0/1, or lost in an allowed unclean window):
  a lost record's offset is reused by the next leader.
- duplicate: one value appears at more than one offset of a key. It is counted as
  expected when the producer may have retried the send without idempotence and a retry
  explains it (`checkers.losses`); its sample then lists the value's send operations.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.checker import CheckContext
from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.losses import LossRules
from checkers.results import CheckerReport

CHECKER = "offsets"
ANOMALIES = ("inconsistent-offsets", "duplicate")


def inconsistent_offsets(evidence: Evidence, losses: LossRules) -> DataFrame:
    """Per (key, offset) holding several values: key, offset, didx, values, expected, reason."""
    several = evidence.offset_index.filter(F.col("value_count") > 1).select("key", "offset", "didx")
    inconsistent = evidence.values_at(several).join(several, ["offset", "key"])
    writes = evidence.located_writes.filter(F.col("committed")).select(
        "key",
        F.coalesce("offset", "first_offset").alias("offset"),
        "value",
        "acks",
    )
    at_offsets = writes.join(inconsistent.select("key", "offset"), ["offset", "key"], "left_semi")
    lossy = (
        losses.classify(at_offsets)
        .filter(F.col("expected"))
        .groupBy("key", "offset")
        .agg(F.min("expected_reason").alias("expected_reason"))
    )
    return inconsistent.join(lossy, ["offset", "key"], "left").withColumn(
        "expected", F.col("expected_reason").isNotNull()
    )


def check_offsets(evidence: Evidence, losses: LossRules) -> list[Finding]:
    """The findings of this checker."""
    inconsistent = inconsistent_offsets(evidence, losses)
    several = evidence.values.filter(F.col("offset_count") > 1)
    duplicates = evidence.dense_index(
        several.join(evidence.offsets_of(several), ["value", "key"]), "first_offset", "first_idx"
    )
    duplicate_detail: list[Column | str] = [
        "key",
        "value",
        "offsets",
        F.col("offset_count").alias("count"),
        F.col("first_idx").alias("index"),
    ]
    excused: Column | None = None
    if losses.retries_may_duplicate:
        duplicates = losses.classify_duplicates(
            duplicates.join(evidence.sends_of(several), ["value", "key"], "left")
        )
        duplicate_detail.append("sends")
        excused = F.col("expected")
    return [
        finding(
            CHECKER,
            "inconsistent-offsets",
            inconsistent,
            order="offset",
            detail=["key", "offset", F.col("didx").alias("index"), "values"],
            expected=F.col("expected"),
            json_fields=("values",),
        ),
        finding(
            CHECKER,
            "duplicate",
            duplicates,
            order="first_offset",
            detail=duplicate_detail,
            expected=excused,
        ),
    ]


class OffsetsChecker:
    """The `Checker` of this module."""

    name = CHECKER
    anomalies = ANOMALIES

    def check(self, context: CheckContext) -> CheckerReport:
        return CheckerReport(self.name, check_offsets(context.evidence, context.losses))
