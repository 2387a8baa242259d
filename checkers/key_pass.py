"""The per-key pass: every per-key check of a history in one shuffle.

The micro-operations of each key are brought into one partition by one shuffle
(`repartition("key")`) and handed, as Arrow columns, to a Python function per partition
(`mapInArrow`) that picks out each key's rows, builds the key's `KeyLog` and runs every
per-key check on it; the checks' findings come back as rows of the
finding frame (`checkers.findings`). What a key cannot know alone comes with the
function: the SUT's replication events of each key, and `shared_facts`, collected before
the pass in one job of few rows: the consumer groups' assignments and members, and what
the rows of an operation that did not complete `ok` (or had an error) must know of its
completion, with, for an `info` send operation that wrote several keys, whether another
key read it, and where the final read found each log to end (its `log-ends`). The pass's query is then one scan and one shuffle, with no join: a join
there widens every row of a long history by columns that only those few need (10M lines:
a check took 37 s with it, 34 s without, medians of five), though past
`TOLD_WITH_FUNCTION` such operations they are joined after all.

A checker joins the pass by having `check_key(log, losses)`, which returns its findings
on one key as `FindingRow`s, and what it learnt of the key for its details as a `KeyFacts`
(a row of the frame without an anomaly). Each key keeps only the rows results.json may
sample, with their counts (`sampled_rows`), so the pass is collected in one job; a
checker's `check` reads what it found from `CheckContext.key_findings` (`key_finding`) and
`CheckContext.key_facts`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.catalogue import CAUSED
from checkers.causes import KeyCauses, explain_rows
from checkers.key_findings import FindingRow, KeyFacts, KeyFindings, sampled_rows
from checkers.key_log import (
    INPUT_COLUMNS,
    LOG_ENDS,
    TOLD,
    KeyLog,
    ReplicationEvent,
    SharedFacts,
    told_frame,
)
from checkers.losses import KeyLosses, LossRules
from checkers.power_losses import key_power_lost
from checkers.unclean import key_unclean_lost, lost_facts

PASS_SCHEMA = pa.schema(
    [
        ("checker", pa.string()),
        ("anomaly", pa.string()),
        ("key", pa.string()),
        ("order", pa.int64()),
        ("expected", pa.bool_()),
        ("detail", pa.string()),
        ("count", pa.int64()),
    ]
)
PASS_DDL = (
    "checker string, anomaly string, key string, order long, expected boolean, "
    "detail string, count long"
)
"""The rows of the pass (`checkers.key_findings.PassRow`)."""


@runtime_checkable
class KeyCheck(Protocol):
    """A checker whose findings are per key, computed in the per-key pass."""

    @property
    def name(self) -> str: ...

    def check_key(self, log: KeyLog, losses: KeyLosses) -> Iterable[FindingRow | KeyFacts]:
        """Its findings on the key of `log`."""
        ...


TOLD_WITH_FUNCTION = 50_000
"""At most this many told operations (`SharedFacts.told`) travel with the pass's function,
which every task receives (50,000 are about 2 MB; a million 40 MB, unpickled in 0.13 s by
each task); more are joined onto the rows in the pass's query instead, which costs every row
of a long history the told columns (10M lines: 37 s a check against 34 s, medians of five)
but sends each executor one copy."""


def _prepared(mops: DataFrame, assign: DataFrame, told: DataFrame | None = None) -> DataFrame:
    """The keyed micro-operations and `ok` commits with the columns of `INPUT_COLUMNS`, and
    with `told`'s (`told_operations` and `op_seen`) where it is given."""
    # A poll's row of a key it read nothing from says nothing of the key's log (`KeyLog`
    # reads only records, which have offsets): most of a long history's polls are such.
    keyed = mops.filter(
        F.col("key").isNotNull() & ~((F.col("f") == "poll") & F.col("offset").isNull())
    )
    if told is None:
        rows = keyed.select(*INPUT_COLUMNS)
    else:
        told = told.withColumnRenamed("invoke_index", "_invoke")
        rows = keyed.join(
            F.broadcast(told), keyed["invoke_index"] == F.col("_invoke"), "left"
        ).select(*INPUT_COLUMNS, *(name for name in TOLD if name != "invoke_index"))
    operation = ("index", "invoke_index", "time", "process_id", "type")
    commits = (
        assign.filter(
            (F.col("f") == "commit") & F.col("type").isin("ok", "info") & F.col("keys").isNotNull()
        )
        .select(*operation, F.explode(F.arrays_zip("keys", "offsets")).alias("c"))
        .select(
            *operation,
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


def told_operations(ops: DataFrame) -> DataFrame:
    """What a key's rows must be told of their operation, one row per operation, keyed by
    `invoke_index` (lazily): a send or txn that did not complete `ok` is `unsettled`, with
    its completion's `op_type`, `op_complete_index` and `op_complete_time` (null: it never
    completed); a completion's `error` goes with it."""
    invocation = F.col("type") == "invoke"
    sends = F.col("f").isin("send", "txn")
    unsettled = sends & (F.col("type") != "ok")  # on the rows kept below
    return ops.filter(
        (invocation & sends & F.col("complete_type").isNull())
        | (~invocation & (unsettled | F.col("error").isNotNull()))
    ).select(
        "invoke_index",
        unsettled.alias("unsettled"),
        F.when(unsettled & ~invocation, F.col("type")).alias("op_type"),
        F.when(unsettled & ~invocation, F.col("index")).alias("op_complete_index"),
        F.when(unsettled & ~invocation, F.col("time")).alias("op_complete_time"),
        "error",
    )


TOLD_ROW = tuple(name for name in TOLD if name != "op_seen")
"""The columns of `told_operations`."""


def shared_facts(ops: DataFrame, mops: DataFrame, assign: DataFrame) -> SharedFacts:
    """What every key is told (`SharedFacts`), from the consumer-group operations, the
    operations that did not complete `ok` or had an error, and the indeterminate sends,
    collected in one job (few rows); and, only when some indeterminate send wrote several
    keys, which of those another key read, in a second."""
    ok = F.col("type") == "ok"
    shape = ("fact", "process_id", "index", "invoke", "keys", "positions")
    # Tables converted before assign.parquet had `positions` lack it.
    positions = F.col("positions") if "positions" in assign.columns else F.lit(None)

    def fact(name: str, frame: DataFrame, process: str | None, index: str) -> DataFrame:
        assignment = name == "assignment"
        return frame.select(
            F.lit(name).alias("fact"),
            (F.lit(None) if process is None else F.col(process)).cast("long"),
            F.col(index).cast("long"),
            (F.col("invoke_index") if assignment else F.lit(None)).cast("long"),
            F.col("keys") if assignment else F.lit(None).cast("array<string>"),
            (positions if assignment else F.lit(None)).cast("array<long>"),
        ).toDF(*shape)

    changes = assign.filter(
        F.col("f").isin("assign", "subscribe") & F.col("type").isin("ok", "info")
    )
    # A process that completed a commit in any way acted for the group: a consumer whose
    # client goes on under a new process number after an `info` (a commit the coordinator
    # could not confirm) has no `ok` subscribe of its own.
    attempted = (F.col("f") == "commit") & (F.col("type") != "invoke")
    members = (
        assign.filter((ok & (F.col("f") == "subscribe")) | attempted)
        .groupBy("process_id")
        .agg(F.count(F.when((F.col("f") == "commit") & ok, 1)).alias("commits"))
    )
    told = told_operations(ops).select(
        F.lit("told").alias("fact"), F.col("invoke_index").alias("index"), *TOLD_ROW[1:]
    )
    ends = F.from_json("value_json", "map<string,bigint>")
    log_ends = ops.filter(
        (F.col("f") == LOG_ENDS)
        & ok
        & F.coalesce(F.col("final"), F.lit(False))
        & F.col("process_id").isNotNull()
    ).select(
        F.lit("log-ends").alias("fact"),
        F.col("process_id").cast("long").alias("process_id"),
        F.col("index").cast("long").alias("index"),
        F.lit(None).cast("long").alias("invoke"),
        F.map_keys(ends).alias("keys"),
        F.map_values(ends).alias("positions"),
    )
    # Collected as Arrow, not toPandas: Spark Connect's frame carries the query's metrics in
    # its `attrs`, which pandas deep-copies into every frame derived from it.
    facts = (
        fact("assignment", changes, "process_id", "index")
        .unionByName(fact("member", members, "process_id", "commits"))
        .unionByName(fact("spread", spread_operations(ops, mops), None, "invoke_index"))
        .unionByName(log_ends)
        .unionByName(told, allowMissingColumns=True)
        .toArrow()
    )
    of = {
        name: facts.filter(pc.equal(facts.column("fact"), name))
        for name in ("assignment", "member", "spread", "told", "log-ends")
    }
    assignments = (
        of["assignment"]
        .select(["process_id", "index", "invoke", "keys", "positions"])
        .rename_columns(["process_id", "index", "invoke_index", "keys", "positions"])
        .to_pandas()
    )
    member = of["member"]
    spread = frozenset(of["spread"].column("index").to_pylist())
    seen: frozenset[int] = frozenset()
    if spread:
        read = spread_operations_seen(mops, spread).toArrow()
        seen = frozenset(read.column("invoke_index").to_pylist())
    many = of["told"].num_rows > TOLD_WITH_FUNCTION
    return SharedFacts(
        assignments=assignments.astype(
            {"process_id": np.int64, "index": np.int64, "invoke_index": np.int64}
        )
        .sort_values("index", kind="stable")
        .reset_index(drop=True),
        members=frozenset(member.column("process_id").to_pylist()),
        # Every ok commit is a member's: a process with one is a member.
        commits=int(pc.sum(member.column("index")).as_py() or 0),
        told=None if many else _told(of["told"], seen),
        seen=seen,
        log_ends=_log_ends(of["log-ends"]),
    )


def _log_ends(rows: pa.Table) -> dict[str, dict[int, int]]:
    """`SharedFacts.log_ends` from the log-ends rows of `shared_facts` (`keys` and their
    ends as `positions`): per key and process, its last `ok` log-ends' end."""
    out: dict[str, dict[int, int]] = {}
    ordered = sorted(
        zip(
            *(
                rows.column(name).to_pylist()
                for name in ("index", "process_id", "keys", "positions")
            ),
            strict=True,
        ),
        key=lambda row: row[0],
    )
    for _, process, keys, ends in ordered:
        for key, end in zip(keys or (), ends or (), strict=False):
            if key is not None and end is not None:
                out.setdefault(key, {})[int(process)] = int(end)
    return out


def _told(rows: pa.Table, seen: Set[int]) -> pd.DataFrame:
    """`SharedFacts.told` from the told rows of `shared_facts` and `SharedFacts.seen`."""
    table = rows.select(["index", *TOLD_ROW[1:]]).rename_columns(list(TOLD_ROW))
    read_elsewhere = pa.array(sorted(seen), pa.int64())
    return told_frame(
        table.append_column(
            "op_seen", pc.is_in(table.column("invoke_index"), value_set=read_elsewhere)
        )
    )


def spread_operations(ops: DataFrame, mops: DataFrame) -> DataFrame:
    """The `info` (or never completed) send operations that sent to more than one key:
    `invoke_index` (lazily)."""
    invoked = (F.col("type") == "invoke") | (F.col("invoke_index") == F.col("index"))
    indeterminate = ops.filter(
        invoked
        & F.col("f").isin("send", "txn")
        & (F.col("complete_type").isNull() | (F.col("complete_type") == "info"))
    ).select(F.col("index").alias("invoke_index"))
    return (
        mops.filter(F.col("f") == "send")
        .join(F.broadcast(indeterminate), "invoke_index", "left_semi")
        .groupBy("invoke_index")
        .agg(F.min("key").alias("first"), F.max("key").alias("last"))
        .filter(F.col("first") != F.col("last"))
        .select("invoke_index")
    )


def spread_operations_seen(mops: DataFrame, spread: Set[int]) -> DataFrame:
    """Those of the `spread` operations (`spread_operations`) one of whose sent values an
    `ok` poll read, in any key: `invoke_index`, distinct (lazily)."""
    sent = mops.filter(
        (F.col("f") == "send") & F.col("value").isNotNull() & F.col("invoke_index").isin(*spread)
    ).select("key", "value", "invoke_index")
    read = mops.filter(
        (F.col("type") == "ok") & (F.col("f") == "poll") & F.col("offset").isNotNull()
    ).select("key", "value")
    return read.join(F.broadcast(sent), ["key", "value"]).select("invoke_index").distinct()


def key_pass(
    ops: DataFrame,
    mops: DataFrame,
    assign: DataFrame,
    shared: SharedFacts,
    replication: Mapping[str, list[ReplicationEvent]],
    rules: LossRules,
    checks: Sequence[KeyCheck],
    sample: int,
    *,
    partitions: int | None = None,
) -> KeyFindings:
    """What `checks` found over every key, told `shared` (`shared_facts`) and each key's
    elections and ISR changes (`replication`, `checkers.events`), sampled as results.json
    samples (`sample` per type): one shuffle into `partitions` (default: the session's
    `spark.sql.shuffle.partitions`), one function per key, one collect."""
    frame = key_pass_frame(
        ops, mops, assign, rules, checks, sample, shared, replication, partitions=partitions
    )
    columns = frame.toArrow().to_pydict()
    rows = zip(*(columns[name] for name in PASS_SCHEMA.names), strict=True)
    return KeyFindings.from_rows(rows, shared)


def key_pass_frame(
    ops: DataFrame,
    mops: DataFrame,
    assign: DataFrame,
    rules: LossRules,
    checks: Sequence[KeyCheck],
    sample: int,
    shared: SharedFacts,
    events: Mapping[str, list[ReplicationEvent]],
    *,
    partitions: int | None = None,
) -> DataFrame:
    """The pass's rows (`PASS_DDL`), lazily."""
    # The workers get the checks' code with the function, not by importing squall: a
    # cluster's or a Connect server's Python needs only pyspark, pandas and pyarrow.
    cloudpickle.register_pickle_by_value(sys.modules["checkers"])  # type: ignore[no-untyped-call]
    run = _key_function(checks, rules, shared, events, sample)

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Every key of one partition: its rows picked out of the partition's (`key_tables`)."""
        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        del received
        for rows in key_tables(table):
            yield from run(rows).to_batches()

    # One shuffle brings each key's rows into one partition. Not groupBy().applyInArrow:
    # that sorts every partition by key first, which at 10M lines costs the JVM 14 s of
    # 37 s; the key's function picks its rows out of the partition instead.
    told = None
    if shared.told is None:  # too many to send with the function: joined onto the rows
        told = told_operations(ops).withColumn("op_seen", F.col("invoke_index").isin(*shared.seen))
    prepared = _prepared(mops, assign, told)
    by_key = (
        prepared.repartition("key")
        if partitions is None
        else prepared.repartition(partitions, "key")
    )
    return by_key.mapInArrow(run_partition, schema=PASS_DDL)


SORTED_FROM = 64
"""From this many keys in a partition on, `key_tables` sorts the partition's rows by key
once rather than scanning them once a key: a scan costs about 5 ns a row, the sort about
70 scans' worth (measured on a 457,000-row table of 200 keys)."""
SORTED_BELOW = 1_000
"""`key_tables` sorts a partition of fewer keys too where they average fewer rows than this:
a scan's own cost, whatever the rows (a filter of every column), then outweighs the sort's
(a history of 2,000 keys of about 230 rows in 200 partitions: 0.25 ms a key scanned, 0.05
sorted)."""


def key_tables(table: pa.Table) -> Iterator[pa.Table]:
    """Each key's rows of `table` (the pass's rows of one partition), keys in order of first
    appearance, each key's rows in their order."""
    column = table.column("key")
    keys = pc.unique(column)
    if len(keys) == 1 and not column.null_count:  # every row is the key's
        yield table
        return
    few = len(keys) < SORTED_FROM and table.num_rows >= SORTED_BELOW * len(keys)
    if few or column.null_count:
        for key in keys.to_pylist():
            yield table.filter(pc.equal(column, key))
        return
    # dictionary_encode numbers the keys in order of first appearance, as unique lists them
    codes = pc.dictionary_encode(column.combine_chunks()).indices.to_numpy()
    ordered = table.take(pa.array(np.argsort(codes, kind="stable")))
    ends = np.cumsum(np.bincount(codes, minlength=len(keys)))
    for start, end in zip(np.r_[0, ends[:-1]], ends, strict=True):
        yield ordered.slice(int(start), int(end - start))


def pass_partitions(spark: SparkSession) -> int:
    """Partitions for the pass over a large history: several a core. A partition is a task
    that checks its keys one after the other, and keys are few (tens), so with one or two
    partitions a core the last task often runs alone while the other cores idle (measured at
    10M lines, 16 keys, `local[2]`: 38.8 s with 4 partitions, 33.2 s with 16)."""
    default = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    return max(default, min(4 * default, 64))


def _key_function(
    checks: Sequence[KeyCheck],
    rules: LossRules,
    shared: SharedFacts,
    events: Mapping[str, list[ReplicationEvent]],
    sample: int,
) -> Callable[[pa.Table], pa.Table]:
    checks = tuple(checks)

    def run(table: pa.Table) -> pa.Table:
        key = table.column("key")[0].as_py()
        log = KeyLog(key, table, shared, events.get(key, []))
        losses = KeyLosses(
            rules,
            key_unclean_lost(log),
            key_power_lost(log, rules.power_losses, rules.settings),
        )
        rows = [row for check in checks for row in check.check_key(log, losses)]
        lost = lost_facts(log, losses.unclean_lost)
        if lost is not None:
            rows.append(lost)
        # Rows are read by their method, not their class: a checker of one's own imports
        # checkers' classes, while the pass's own code is a by-value copy of them.
        kept = sampled_rows(rows, sample)
        if any(row[1] in CAUSED for row in kept):
            settings = rules.settings
            causes = KeyCauses.of(key, log.events, settings.brokers, settings.event_tolerance_ns)
            kept = explain_rows(kept, causes)
        columns = list(zip(*kept, strict=True)) or [()] * 7
        return pa.table(
            dict(zip(PASS_SCHEMA.names, map(list, columns), strict=True)), schema=PASS_SCHEMA
        )

    return run
