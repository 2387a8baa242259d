"""Consumer groups: `at-least-once-violation`, and how often the group consumed each value.

The group's members are the processes with an `ok` subscribe or an `ok` commit. A commit
`{key: offset}` says the group is done with everything below `offset`. An `ok` write at a
known offset below an offset committed after the write was invoked, never read by an `ok`
poll of a member, is an at-least-once violation: the group moved past it without consuming
it.
When nobody at all read the value and its loss is allowed (acks=0/1, allowed unclean
window), the violation is expected: the record was gone before the group got there.
Values consumed more than once are allowed by at-least-once delivery and only counted.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.checker import CheckContext
from checkers.evidence import Evidence
from checkers.findings import Finding, finding
from checkers.losses import LossRules
from checkers.results import CheckerReport

CHECKER = "consumer_groups"
ANOMALIES = ("at-least-once-violation",)


def group_members(assign: DataFrame) -> DataFrame:
    """The processes that acted as consumer-group members."""
    return (
        assign.filter((F.col("type") == "ok") & F.col("f").isin("subscribe", "commit"))
        .select("process_id")
        .distinct()
    )


def group_commits(assign: DataFrame) -> DataFrame:
    """One row per (commit operation, key): process_id, index, time, key, committed."""
    return (
        assign.filter(
            (F.col("f") == "commit") & (F.col("type") == "ok") & F.col("keys").isNotNull()
        )
        .select(
            "process_id", "index", "time", F.explode(F.arrays_zip("keys", "offsets")).alias("c")
        )
        .select(
            "process_id",
            "index",
            "time",
            F.col("c.keys").alias("key"),
            F.col("c.offsets").alias("committed"),
        )
    )


def consumed_values(evidence: Evidence, assign: DataFrame) -> DataFrame:
    """Per (key, value) read by an `ok` poll of a member: how many times (kept by
    `evidence`: the check and the details both read it)."""
    members = F.broadcast(group_members(assign))
    return evidence.keep(
        "consumed_values",
        lambda: (
            evidence.reads.filter(F.col("type") == "ok")
            .join(members, "process_id", "left_semi")
            .groupBy("key", "value")
            .agg(F.count(F.lit(1)).alias("times"))
        ),
    )


def at_least_once_violations(evidence: Evidence, assign: DataFrame, losses: LossRules) -> DataFrame:
    """`ok` writes that no member consumed although a later commit moved past their offset,
    with that first commit. Only commits after the write was invoked count: after a
    truncation, an offset committed earlier may hold a newer value."""
    commits = group_commits(assign)
    highest = commits.groupBy("key").agg(F.max("committed").alias("max_committed"))
    candidates = (
        evidence.writes.filter((F.col("status") == "ok") & F.col("offset").isNotNull())
        .join(highest, "key")
        .filter(F.col("offset") < F.col("max_committed"))
        .join(consumed_values(evidence, assign), ["value", "key"], "left_anti")
    )
    first_commit = (
        candidates.select("key", "value", "offset", "invoke_index")
        .join(commits.select("key", "committed", F.col("index").alias("commit_op")), "key")
        .filter(
            (F.col("committed") > F.col("offset")) & (F.col("commit_op") > F.col("invoke_index"))
        )
        .groupBy("key", "value")
        .agg(F.min_by(F.struct("commit_op", "committed"), F.col("commit_op")).alias("first"))
    )
    classified = losses.classify(candidates.join(first_commit, ["value", "key"]))
    return classified.withColumn("expected", F.col("expected") & ~F.col("was_read"))


def check_consumer_groups(
    evidence: Evidence, assign: DataFrame, losses: LossRules
) -> list[Finding]:
    """The findings of this checker."""
    return [
        finding(
            CHECKER,
            "at-least-once-violation",
            at_least_once_violations(evidence, assign, losses),
            order="offset",
            detail=[
                "key",
                "value",
                "offset",
                F.col("complete_index").alias("writer"),
                F.col("first.commit_op").alias("commit"),
                F.col("first.committed").alias("committed"),
                F.col("effective_acks").alias("acks"),
                F.col("was_read").alias("read_by_anyone"),
            ],
            expected=F.col("expected"),
        )
    ]


def consumption_details(evidence: Evidence, assign: DataFrame) -> dict[str, Any]:
    """Members, commits, values consumed, and how many times each was consumed."""
    ok = F.col("type") == "ok"
    row = assign.agg(
        F.count_distinct(
            F.when(ok & F.col("f").isin("subscribe", "commit"), F.col("process_id"))
        ).alias("members"),
        F.count(F.when(ok & (F.col("f") == "commit"), 1)).alias("commits"),
    ).collect()[0]
    members, commits = int(row["members"]), int(row["commits"])
    if members == 0:
        return {"members": 0, "commits": commits, "note": "no consumer group in the history"}
    distribution = (
        consumed_values(evidence, assign).groupBy("times").count().orderBy("times").collect()
    )
    counts = {int(row["times"]): int(row["count"]) for row in distribution}
    return {
        "members": members,
        "commits": commits,
        "consumed_values": sum(counts.values()),
        "duplicates_consumed": sum(n for times, n in counts.items() if times > 1),
        "consumption_counts": {str(times): n for times, n in sorted(counts.items())},
    }


class ConsumerGroupsChecker:
    """The `Checker` of this module; its details say how the group consumed."""

    name = CHECKER
    anomalies = ANOMALIES

    def check(self, context: CheckContext) -> CheckerReport:
        return CheckerReport(
            self.name,
            check_consumer_groups(context.evidence, context.assign, context.losses),
            details=consumption_details(context.evidence, context.assign),
        )
