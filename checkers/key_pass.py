"""The per-key pass: every per-key check of a history in one shuffle.

The micro-operations of each key are brought together by one `groupBy("key")` and handed,
as Arrow columns, to one Python function per key (`applyInArrow`), which builds the key's
`KeyLog` and runs every per-key check on it; the checks' findings come back as rows of the
finding frame (`checkers.findings`). What a key cannot know alone is computed before the
pass and sent with the function: which `info` send operations were seen (they may have
written other keys) and the SUT's replication events of each key.

A checker joins the pass by having `check_key(log, losses)`, which returns its findings
on one key as `FindingRow`s; its `check` then reads them from `CheckContext.key_findings`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.errors import CheckerDefinitionError
from checkers.findings import FINDING_COLUMNS, Finding
from checkers.key_log import INPUT_COLUMNS, KeyLog, SharedFacts
from checkers.losses import KeyLosses, LossRules
from checkers.unclean import ReplicationEvent, key_unclean_lost, replication_events

FINDING_SCHEMA = pa.schema(
    [
        ("checker", pa.string()),
        ("anomaly", pa.string()),
        ("key", pa.string()),
        ("order", pa.int64()),
        ("expected", pa.bool_()),
        ("detail", pa.string()),
    ]
)
FINDING_DDL = (
    "checker string, anomaly string, key string, order long, expected boolean, detail string"
)


@dataclass(frozen=True)
class FindingRow:
    """One anomaly found on one key: a row of the finding frame, `detail` as a mapping."""

    checker: str
    anomaly: str
    key: str
    order: int
    expected: bool
    detail: Mapping[str, Any]


@runtime_checkable
class KeyCheck(Protocol):
    """A checker whose findings are per key, computed in the per-key pass."""

    @property
    def name(self) -> str: ...

    def check_key(self, log: KeyLog, losses: KeyLosses) -> Iterable[FindingRow]:
        """Its findings on the key of `log`."""
        ...


def _plain(item: Any) -> Any:
    """`item` as JSON sees it: numpy and pandas scalars as Python ones, missing as None."""
    if item is None or item is pd.NA:
        return None
    if isinstance(item, float) and math.isnan(item):
        return None
    if hasattr(item, "item") and not isinstance(item, (list, dict, str)):
        return item.item()
    if isinstance(item, (list, tuple)):
        return [_plain(element) for element in item]
    if isinstance(item, dict):
        fields = {name: _plain(element) for name, element in item.items()}
        return {name: element for name, element in fields.items() if element is not None}
    return item


def detail_json(detail: Mapping[str, Any]) -> str:
    """`detail` as Spark's `to_json` writes a struct: compact, in order, nulls left out."""
    return json.dumps(_plain(dict(detail)), separators=(",", ":"), ensure_ascii=False)


def rows_of(
    checker: str,
    anomaly: str,
    frame: pd.DataFrame,
    *,
    order: str,
    detail: Sequence[tuple[str, str]],
    expected: str | None = None,
) -> list[FindingRow]:
    """One `FindingRow` per row of `frame` (with a `key` column): `detail` names (field, column) pairs; with
    `expected` (a boolean column), an expected row's `expected_reason` is its
    `expected_because`."""
    out = []
    for record in frame.to_dict("records"):
        is_expected = bool(_plain(record[expected])) if expected is not None else False
        fields = {name: record[column] for name, column in detail}
        if expected is not None:
            fields["expected_because"] = record["expected_reason"] if is_expected else None
        out.append(
            FindingRow(
                checker, anomaly, str(record["key"]), int(record[order]), is_expected, fields
            )
        )
    return out


def _prepared(ops: DataFrame, mops: DataFrame, assign: DataFrame) -> DataFrame:
    """The keyed micro-operations and `ok` commits with the columns of `INPUT_COLUMNS`."""
    invoked = (F.col("type") == "invoke") | (F.col("invoke_index") == F.col("index"))
    unsettled = ops.filter(
        invoked
        & F.col("f").isin("send", "txn")
        & (F.col("complete_type").isNull() | (F.col("complete_type") != "ok"))
    ).select(
        F.col("index").alias("_invoke"),
        F.lit(True).alias("unsettled"),
        F.col("complete_type").alias("op_type"),
        F.col("complete_index").alias("op_complete_index"),
        (F.col("time") + F.col("latency_ns")).alias("op_complete_time"),
    )
    errors = ops.filter((F.col("type") != "invoke") & F.col("error").isNotNull()).select(
        F.col("index").alias("_completion"), "error"
    )
    keyed = mops.filter(F.col("key").isNotNull())
    with_ops = keyed.join(
        F.broadcast(unsettled), keyed["invoke_index"] == F.col("_invoke"), "left"
    ).drop("_invoke")
    completion = F.coalesce(F.col("op_complete_index"), F.col("index"))
    rows = (
        with_ops.join(F.broadcast(errors), completion == F.col("_completion"), "left")
        .drop("_completion")
        .select(*INPUT_COLUMNS)
    )
    commits = (
        assign.filter(
            (F.col("f") == "commit") & (F.col("type") == "ok") & F.col("keys").isNotNull()
        )
        .select(
            "index",
            "invoke_index",
            "time",
            "process_id",
            "type",
            F.explode(F.arrays_zip("keys", "offsets")).alias("c"),
        )
        .select(
            "index",
            "invoke_index",
            "time",
            "process_id",
            "type",
            F.lit("commit").alias("op_f"),
            F.lit("commit").alias("f"),
            F.col("c.keys").alias("key"),
            F.col("c.offsets").alias("offset"),
        )
    )
    absent = [
        F.lit(None).cast(kind).alias(name)
        for name, kind in rows.dtypes
        if name not in commits.columns
    ]
    return rows.unionByName(commits.select("*", *absent))


def shared_facts(ops: DataFrame, mops: DataFrame, assign: DataFrame) -> SharedFacts:
    """What every key is told (`SharedFacts`), collected: few rows."""
    changes = (
        assign.filter(F.col("f").isin("assign", "subscribe") & F.col("type").isin("ok", "info"))
        .select("process_id", "index", "keys")
        .orderBy("index")
        .toPandas()
    )
    members = (
        assign.filter((F.col("type") == "ok") & F.col("f").isin("subscribe", "commit"))
        .select("process_id")
        .distinct()
    )
    return SharedFacts(
        info_seen=frozenset(info_operations_seen(mops, ops)),
        assignments=changes,
        members=frozenset(int(row["process_id"]) for row in members.collect()),
    )


def info_operations_seen(mops: DataFrame, ops: DataFrame) -> set[int]:
    """The `info` (or never completed) send operations one of whose sent values an `ok`
    poll read, in any key."""
    invoked = (F.col("type") == "invoke") | (F.col("invoke_index") == F.col("index"))
    indeterminate = ops.filter(
        invoked
        & F.col("f").isin("send", "txn")
        & (F.col("complete_type").isNull() | (F.col("complete_type") == "info"))
    ).select(F.col("index").alias("invoke_index"))
    sent = (
        mops.filter((F.col("f") == "send") & F.col("value").isNotNull())
        .join(F.broadcast(indeterminate), "invoke_index", "left_semi")
        .select("key", "value", "invoke_index")
        .distinct()
    )
    read = mops.filter(
        (F.col("type") == "ok") & (F.col("f") == "poll") & F.col("offset").isNotNull()
    ).select("key", "value")
    seen = read.join(F.broadcast(sent), ["key", "value"]).select("invoke_index").distinct()
    return {int(row["invoke_index"]) for row in seen.collect()}


def key_pass(
    ops: DataFrame,
    mops: DataFrame,
    events: DataFrame,
    assign: DataFrame,
    rules: LossRules,
    checks: Sequence[KeyCheck],
) -> DataFrame:
    """The finding frame of `checks` over every key: one shuffle, one function per key."""
    shared = shared_facts(ops, mops, assign)
    run = _key_function(checks, rules, shared, replication_events(events))
    return _prepared(ops, mops, assign).groupBy("key").applyInArrow(run, schema=FINDING_DDL)


def _key_function(
    checks: Sequence[KeyCheck],
    rules: LossRules,
    shared: SharedFacts,
    events: Mapping[str, list[ReplicationEvent]],
) -> Callable[[pa.Table], pa.Table]:
    plain_rules = LossRules(rules.settings, rules.expect_loss)
    checks = tuple(checks)

    def run(table: pa.Table) -> pa.Table:
        key = table.column("key")[0].as_py()
        log = KeyLog(key, table, shared)
        losses = KeyLosses(plain_rules, key_unclean_lost(log, events.get(key, [])))
        rows = [row for check in checks for row in check.check_key(log, losses)]
        return pa.table(
            {
                "checker": [row.checker for row in rows],
                "anomaly": [row.anomaly for row in rows],
                "key": [row.key for row in rows],
                "order": [row.order for row in rows],
                "expected": [row.expected for row in rows],
                "detail": [detail_json(row.detail) for row in rows],
            },
            schema=FINDING_SCHEMA,
        )

    return run


def key_finding(
    frame: DataFrame | None,
    checker: str,
    anomalies: tuple[str, ...],
    *,
    json_fields: tuple[str, ...] = ("value",),
    allowed: frozenset[str] = frozenset(),
) -> Finding:
    """The findings of `checker` in the pass's frame, as a `Finding`."""
    if frame is None:
        raise CheckerDefinitionError(
            f"checker {checker!r} finds per key, but the per-key pass did not run: give "
            "its CheckContext the frame of checkers.key_pass.key_pass"
        )
    return Finding(
        checker,
        anomalies,
        frame.filter(F.col("checker") == checker).select(*FINDING_COLUMNS),
        json_fields,
        allowed,
    )
