"""Consumer group generations: `generation-double-owner` and `stale-generation-commit`.

A group member's operations name their generation (`generation` on its `ok` assigns and its
commits; docs/history.md). In each generation the group's leader gives every partition to
one member, and the coordinator takes a member's commits only under the group's current
generation (Kafka's ILLEGAL_GENERATION otherwise). So:

- two processes whose `ok` assigns give them the same key under the same generation are
  two owners of it at once (`generation-double-owner`);
- an `ok` commit under generation g, invoked after an `ok` assign of a later generation had
  completed (the coordinator had moved past g), was a stale generation's commit that the
  coordinator accepted (`stale-generation-commit`): a zombie member's progress written over
  the partitions' new owners'.

Operations without a generation (consumers outside any group, histories of other tools) are
not judged; the final read is never a member.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.checker import CheckContext
from checkers.events import NemesisEvent
from checkers.findings import Finding, finding
from checkers.power_losses import PowerLoss
from checkers.results import CheckerReport

CHECKER = "generations"
ANOMALIES = ("generation-double-owner", "stale-generation-commit")


def _of_members(assign: DataFrame, f: str) -> DataFrame:
    """The `ok` operations `f` of group members (with a generation), outside the final read."""
    return assign.filter(
        (F.col("f") == f)
        & (F.col("type") == "ok")
        & (F.col("generation") >= 0)
        & ~F.coalesce(F.col("final"), F.lit(False))
    )


def _with_learnt_since(assign: DataFrame) -> DataFrame:
    """`assign` with `since`: where the member may have been given what a row says. A
    member learns of a rebalance inside a poll and writes it after (everything revoked, then
    its new assignment), so an assignment may date from the process's last completed row
    before it that is not everything revoked (its subscribe, its last assignment of some
    keys, a commit); its own index where there is none."""
    completed = F.col("type") != "invoke"
    revoked = (F.col("f") == "assign") & (F.size("keys") == 0)
    before = (
        Window.partitionBy("process_id").orderBy("index").rowsBetween(Window.unboundedPreceding, -1)
    )
    learnt = F.max(F.when(completed & ~F.coalesce(revoked, F.lit(False)), F.col("index"))).over(
        before
    )
    return assign.withColumn("since", F.coalesce(learnt, F.col("index")))


def double_owners(assign: DataFrame) -> DataFrame:
    """Per (generation, key) given to more than one process: the processes, their assigns,
    the last of those (where the second owner appeared), and `since`, the earliest any of
    those assignments may have been given (`_with_learnt_since`)."""
    given = _of_members(_with_learnt_since(assign), "assign").select(
        "generation", "process_id", "index", "since", F.explode("keys").alias("key")
    )
    return (
        given.groupBy("generation", "key")
        .agg(
            F.array_sort(F.collect_set("process_id")).alias("processes"),
            F.array_sort(F.collect_list("index")).alias("ops"),
            F.max("index").alias("last"),
            F.min("since").alias("since"),
        )
        .filter(F.size("processes") > 1)
    )


def stale_commits(assign: DataFrame) -> DataFrame:
    """`ok` commits under a generation older than one already given: each with the first
    such assign (`assign`, of generation `newer`)."""
    commits = _of_members(assign, "commit").select(
        F.col("index").alias("commit"),
        F.col("invoke_index").alias("invoked"),
        F.col("process_id").alias("process"),
        "generation",
        F.array_join(F.array_sort("keys"), ",").alias("key"),
    )
    given = _of_members(assign, "assign").select(
        F.col("index").alias("assign"), F.col("generation").alias("newer")
    )
    later = commits.join(
        given, (given["assign"] < commits["invoked"]) & (given["newer"] > commits["generation"])
    )
    first = later.groupBy("commit").agg(F.min("assign").alias("assign"))
    return later.join(first, ["commit", "assign"]).dropDuplicates(["commit"])


def member_faults(nemesis: Sequence[NemesisEvent]) -> dict[str, Any]:
    """The nemesis's faults on group members: how many of each, and how long each member
    paused slept (seconds, from its pause to its resume or the history's last event)."""
    counts: dict[str, int] = {}
    paused: dict[str, int] = {}
    slept: list[float] = []
    last = max((time for _, time, _, _ in nemesis), default=0)
    for _, time, f, value_json in nemesis:
        if f not in ("pause-member", "resume-member", "kill-member", "leave-member"):
            continue
        value = json.loads(value_json) if value_json else {}
        hit = [m for m, outcome in (value.get("outcome") or {}).items() if outcome != "not-running"]
        if hit:
            counts[f] = counts.get(f, 0) + len(hit)
        for member in hit:
            if f == "pause-member":
                paused[member] = time
            elif member in paused:
                slept.append((time - paused.pop(member)) / 1e9)
    slept.extend((last - time) / 1e9 for time in paused.values())
    return {"counts": counts, "paused_s": sorted(round(s, 3) for s in slept)}


def rebalance_counts(assign: DataFrame) -> dict[str, int]:
    """Of the group's members: the generations they were given partitions in, the
    rebalances they went through (each written as everything revoked), and the commits the
    coordinator refused (a definite fail: a stale generation, an unknown member...)."""
    given = (F.col("f") == "assign") & (F.col("type") == "ok") & (F.col("generation") >= 0)
    revoked = (F.col("f") == "assign") & (F.col("type") == "ok") & (F.size("keys") == 0)
    refused = (F.col("f") == "commit") & (F.col("type") == "fail") & F.col("generation").isNotNull()
    row = (
        assign.filter(~F.coalesce(F.col("final"), F.lit(False)))
        .agg(
            F.countDistinct(F.when(given, F.col("generation"))).alias("generations"),
            F.count(F.when(revoked, True)).alias("revocations"),
            F.count(F.when(refused, True)).alias("refused_commits"),
        )
        .first()
    )
    names = ("generations", "revocations", "refused_commits")
    return {k: 0 if row is None else int(row[k] or 0) for k in names}


def _lost_between(
    losses: Sequence[tuple[PowerLoss, str]], since: Column, until: Column
) -> tuple[Column, Column]:
    """Whether one of the group state's `losses` lies between the two indexes, and the
    reason of the first that does."""
    condition = F.lit(False)
    reason: Column = F.lit(None).cast("string")
    for loss, why in reversed(losses):
        between = (since < F.lit(loss.index)) & (F.lit(loss.index) < until)
        condition = condition | between
        reason = F.when(between, F.lit(why)).otherwise(reason)
    return condition, reason


class GenerationsChecker:
    """Two owners of a key in one generation; a stale generation's commit accepted."""

    name = CHECKER
    anomalies = ANOMALIES

    def check(self, context: CheckContext) -> CheckerReport:
        assign = context.assign
        if "generation" not in assign.columns:
            note = (
                "the history's tables predate the generation column: convert the history "
                "again to judge generations"
            )
            return CheckerReport(self.name, [Finding(CHECKER, (), None)], notes=[note])
        losses = context.losses.group_state_losses()
        twice, twice_why = _lost_between(losses, F.col("since"), F.array_max("ops"))
        owners = finding(
            CHECKER,
            "generation-double-owner",
            double_owners(assign).withColumn("expected_reason", twice_why),
            order="last",
            detail=["key", "generation", "processes", "ops"],
            expected=twice,
            json_fields=(),
        )
        stale, stale_why = _lost_between(losses, F.col("assign"), F.col("commit"))
        stale_found = finding(
            CHECKER,
            "stale-generation-commit",
            stale_commits(assign).withColumn("expected_reason", stale_why),
            order="commit",
            detail=["key", "process", "commit", "generation", "newer", "assign"],
            expected=stale,
            json_fields=(),
        )
        details: dict[str, Any] = rebalance_counts(assign)
        faults = member_faults(context.nemesis)
        if faults["counts"]:
            details["member_faults"] = faults
        return CheckerReport(self.name, [owners, stale_found], details=details)
