"""A fast `history.jsonl` -> `history.parquet/` import with Spark's JSON reader.

`histories.write_parquet` converts about 40k operations a second in Python; this import
reads the JSON lines on every core (values as VARIANT), checks them against the history
contract with DataFrame expressions, pairs invocations by process with a window, and
writes the same four tables (`histories.parquet_schema`), one Parquet file each.

It vouches only for what it can check. Any line it cannot accept (not JSON, a field of
the wrong type or shape, indices not dense and in order, a blank line, invocations that
do not pair) makes it give up with a reason, and the caller runs the exact converter,
which reports the file and line. A torn last line (a crash mid-write) is ignored and
reported, as the exact reader does. Known differences from the exact converter: rows are
not in index order; object values (`value_json` of nemesis events, commit keys) have
their keys sorted; non-ASCII text in values is written as UTF-8, not `\\u` escapes; text
after the JSON object on a line is ignored.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from histories.parquet_schema import DEFAULT_ROW_GROUP_SIZE, SCHEMAS, TABLES

RAW_SCHEMA = (
    "index BIGINT, time BIGINT, process VARIANT, type STRING, f VARIANT, value VARIANT, "
    "error VARIANT, node VARIANT, acks INT, final BOOLEAN, key VARIANT, "
    "_corrupt_record STRING"
)
_INT = "^-?[0-9]+$"
_NON_NEGATIVE = "^[0-9]+$"
_POSITION_BITS = 33  # monotonically_increasing_id: partition id << 33 | row in partition


@dataclass
class ImportOutcome:
    """What `import_jsonl` did: `fallback` says why it gave up (None: tables written)."""

    fallback: str | None = None
    notes: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)


class _Rejected(Exception):
    """The input is not something this import can vouch for."""


def _sure(check: Column) -> Column:
    """A check that is false, not null, when something it looks at is missing."""
    return F.coalesce(check, F.lit(False))


def _json(column: Column) -> Column:
    return F.to_json(column)


def _is_string(variant: Column) -> Column:
    return _json(variant).startswith('"')


def _is_int(variant: Column) -> Column:
    return _json(variant).rlike(_INT)


def _is_scalar_value(variant: Column) -> Column:
    """A sent or read value: an int or a string."""
    text = _json(variant)
    return text.startswith('"') | text.rlike(_INT)


def _absent(variant: Column) -> Column:
    """Missing or JSON null (optional fields)."""
    return variant.isNull() | F.is_variant_null(variant)


def _text(variant: Column) -> Column:
    """A string or int variant as text (keys: 5 -> "5")."""
    return F.when(~_absent(variant), F.try_variant_get(variant, "$", "string"))


def _array(variant: Column) -> Column:
    return F.try_variant_get(variant, "$", "array<variant>")


def _element(items: Column, position: int) -> Column:
    return F.try_element_at(items, F.lit(position))


def _record_ok(record: Column) -> Column:
    """[offset >= 0, int or string value]."""
    pair = _array(record)
    return (
        pair.isNotNull()
        & (F.size(pair) == 2)
        & _json(_element(pair, 1)).rlike(_NON_NEGATIVE)
        & F.try_variant_get(_element(pair, 1), "$", "bigint").isNotNull()
        & _is_scalar_value(_element(pair, 2))
    )


def read_raw(spark: SparkSession, path: Path) -> DataFrame:
    """The history's lines as rows with their position in the file, and basic columns."""
    raw = spark.read.schema(RAW_SCHEMA).option("mode", "PERMISSIVE").json(str(path))
    process_text = _json(F.col("process"))
    client = process_text.rlike(_NON_NEGATIVE)
    return raw.select(
        "*",
        F.spark_partition_id().alias("_part"),
        (F.monotonically_increasing_id() % F.lit(1 << _POSITION_BITS)).alias("_row"),
        F.when(client, F.try_variant_get("process", "$", "bigint")).alias("process_id"),
        F.when(client, process_text)
        .otherwise(F.try_variant_get("process", "$", "string"))
        .alias("process_text"),
        client.alias("client"),
        F.try_variant_get("f", "$", "string").alias("f_text"),
    )


def _field_checks() -> Column:
    """Per line: true when its top-level fields keep the contract."""
    client = F.col("client")
    event = F.col("process_text").isin("nemesis", "sut") & ~client
    optional_text = [_absent(F.col(name)) | _is_string(F.col(name)) for name in ("error", "node")]
    return (
        F.col("_corrupt_record").isNull()
        & F.col("index").isNotNull()
        & (F.col("index") >= 0)
        & F.col("time").isNotNull()
        & F.col("value").isNotNull()
        & ((client & F.col("process_id").isNotNull()) | event)
        & F.col("type").isin("invoke", "ok", "fail", "info")
        & (client | (F.col("type") == "info"))
        & _is_string(F.col("f"))
        & (F.length("f_text") > 0)
        & optional_text[0]
        & optional_text[1]
        & (F.col("acks").isNull() | F.col("acks").isin(-1, 0, 1))
        & (_absent(F.col("key")) | _is_string(F.col("key")) | _is_int(F.col("key")))
    )


def _value_checks() -> Column:
    """Per line: the value's shape for assign/subscribe/commit and SUT events (not micro-ops)."""
    value = F.col("value")
    null_allowed = F.is_variant_null(value) & F.col("type").isin("fail", "info")
    key_list = F.try_variant_get(value, "$", "array<variant>")
    keys_ok = key_list.isNotNull() & F.forall(key_list, lambda k: _is_string(k) | _is_int(k))
    commit = F.try_variant_get(value, "$", "map<string,variant>")
    commit_ok = commit.isNotNull() & F.forall(
        F.map_values(commit),
        lambda o: (
            o.isNotNull()
            & _json(o).rlike(_NON_NEGATIVE)
            & F.try_variant_get(o, "$", "bigint").isNotNull()
        ),
    )
    fields = F.try_variant_get(value, "$", "map<string,variant>")

    def member(name: str) -> Column:
        return F.try_element_at(fields, F.lit(name))

    def int_or_null(name: str) -> Column:
        item = member(name)
        return _absent(item) | (_is_int(item) & F.try_variant_get(item, "$", "bigint").isNotNull())

    isr = member("isr")
    isr_list = F.try_variant_get(isr, "$", "array<variant>")
    isr_ok = _absent(isr) | (
        isr_list.isNotNull()
        & F.forall(isr_list, lambda n: _is_int(n) & F.try_variant_get(n, "$", "bigint").isNotNull())
    )
    key = member("key")
    sut_common = fields.isNotNull() & ~_absent(key) & (_is_string(key) | _is_int(key))
    election_ok = (
        sut_common
        & int_or_null("leader")
        & int_or_null("leader_epoch")
        & isr_ok
        & int_or_null("previous_leader")
        & _json(member("unclean")).isin("true", "false")
    )
    isr_change_ok = sut_common & isr_ok & int_or_null("leader")
    f = F.col("f_text")
    client = F.col("client")
    sut = F.col("process_text") == "sut"
    return (
        F.when(client & f.isin("assign", "subscribe"), null_allowed | keys_ok)
        .when(client & (f == "commit"), null_allowed | commit_ok)
        .when(sut & (f == "leader-election"), election_ok)
        .when(sut & (f == "isr-change"), isr_change_ok)
        .otherwise(F.lit(True))
    )


def _pairing(lines: DataFrame) -> DataFrame:
    """Client lines with invoke_index, complete_index/type, latency and a pairing verdict."""
    by_process = Window.partitionBy("process_id").orderBy("index")
    prev_type = F.lag("type").over(by_process)
    prev_f = F.lag("f_text").over(by_process)
    next_type = F.lead("type").over(by_process)
    invoke = F.col("type") == "invoke"
    completes = (~F.col("_next_type").isNull()) & (F.col("_next_type") != "invoke")
    return (
        lines.withColumn("_prev_type", prev_type)
        .withColumn("_prev_f", prev_f)
        .withColumn("_prev_index", F.lag("index").over(by_process))
        .withColumn("_prev_time", F.lag("time").over(by_process))
        .withColumn("_next_type", next_type)
        .withColumn("_next_index", F.lead("index").over(by_process))
        .withColumn("_next_time", F.lead("time").over(by_process))
        .withColumn(
            "paired",
            _sure(
                F.when(
                    invoke,
                    F.col("_prev_type").isNull() | F.col("_prev_type").isin("ok", "fail"),
                ).otherwise(
                    (F.col("_prev_type") == "invoke") & (F.col("_prev_f") == F.col("f_text"))
                )
            ),
        )
        .withColumn("invoke_index", F.when(invoke, F.col("index")).otherwise(F.col("_prev_index")))
        .withColumn(
            "complete_index",
            F.when(invoke, F.when(completes, F.col("_next_index"))).otherwise(F.col("index")),
        )
        .withColumn(
            "complete_type",
            F.when(invoke, F.when(completes, F.col("_next_type"))).otherwise(F.col("type")),
        )
        .withColumn(
            "latency_ns",
            F.when(invoke, F.when(completes, F.col("_next_time") - F.col("time"))).otherwise(
                F.col("time") - F.col("_prev_time")
            ),
        )
    )


def _mops(client: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The mops rows of client send/poll/txn lines (`_ok`: its records keep the contract),
    and each micro-op's verdict (index, `_mop_ok`)."""
    value = F.col("value")
    micro = client.filter(F.col("f_text").isin("send", "poll", "txn")).withColumn(
        "_mops", _array(value)
    )
    head = micro.select(
        "index",
        "invoke_index",
        "time",
        "process_text",
        "process_id",
        "type",
        "f_text",
        "final",
        "acks",
        F.is_variant_null(value).alias("_null"),
        "_mops",
        F.posexplode_outer("_mops").alias("mop_index", "_mop"),
    ).withColumn("_m", _array(F.col("_mop")))
    kind = _json(_element(F.col("_m"), 1))
    size = F.size("_m")
    invoke = F.col("type") == "invoke"
    sent = _element(F.col("_m"), 3)
    sent_pair = _array(sent)
    send_ok = (
        (F.col("f_text") != "poll")
        & (size == 3)
        & (_is_string(_element(F.col("_m"), 2)) | _is_int(_element(F.col("_m"), 2)))
        & (_is_scalar_value(sent) | (~invoke & sent_pair.isNotNull() & _record_ok(sent)))
    )
    results = F.try_variant_get(_element(F.col("_m"), 2), "$", "map<string,variant>")
    poll_ok = (F.col("f_text") != "send") & (
        ((size == 1) & (F.col("type") != "ok")) | ((size == 2) & ~invoke & results.isNotNull())
    )
    shaped = head.withColumn(
        "_mop_ok",
        _sure(
            F.when(F.col("_null"), F.col("type").isin("fail", "info"))
            .when(F.col("_mops").isNull() | (F.size("_mops") == 0), F.lit(False))
            .when(F.col("_m").isNull() | (size == 0), F.lit(False))
            .when(kind == '"send"', send_ok)
            .when(kind == '"poll"', poll_ok)
            .otherwise(F.lit(False))
        ),
    )
    micro_ops_ok = shaped.select("index", "_mop_ok")
    shaped = shaped.filter(~F.col("_null"))
    sends = shaped.filter(kind == '"send"').select(
        "*",
        F.lit("send").alias("f"),
        _text(_element(F.col("_m"), 2)).alias("key"),
        F.when(sent_pair.isNull(), _json(sent))
        .otherwise(_json(_element(sent_pair, 2)))
        .alias("value"),
        F.try_variant_get(_element(sent_pair, 1), "$", "bigint").alias("offset"),
        F.lit(None).cast("int").alias("poll_seq"),
        F.lit(None).cast("boolean").alias("has_results"),
        F.lit(True).alias("_ok"),
    )
    polls = (
        shaped.filter(kind != '"send"')
        .withColumn("_results", F.when(size == 2, results))
        .select(
            "*",
            F.explode_outer(F.when(F.size("_results") > 0, F.col("_results"))).alias(
                "_key", "_records"
            ),
        )
        .withColumn("_recs", _array(F.col("_records")))
        .select(
            "*",
            F.posexplode_outer(F.when(F.size("_recs") > 0, F.col("_recs"))).alias("_seq", "_rec"),
        )
        .select(
            "*",
            F.lit("poll").alias("f"),
            F.col("_key").alias("key"),
            _json(_element(_array(F.col("_rec")), 2)).alias("value"),
            F.try_variant_get(_element(_array(F.col("_rec")), 1), "$", "bigint").alias("offset"),
            F.col("_seq").cast("int").alias("poll_seq"),
            (size == 2).alias("has_results"),
            _sure(
                F.col("_records").isNull()
                | (
                    F.col("_recs").isNotNull()
                    & (F.col("_rec").isNull() | _record_ok(F.col("_rec")))
                )
            ).alias("_ok"),
        )
    )
    columns: list[Column | str] = [
        *_operation_columns(f_as="op_f"),
        F.col("acks").cast("byte").alias("acks"),
        F.col("mop_index").cast("int").alias("mop_index"),
        "f",
        "key",
        "value",
        "offset",
        "poll_seq",
        "has_results",
        "_ok",
    ]
    mops = sends.select(*columns).unionByName(polls.select(*columns))
    return mops, micro_ops_ok


def _ops(lines: DataFrame, paired: DataFrame) -> DataFrame:
    micro = F.col("f_text").isin("send", "poll", "txn")
    events = lines.filter(~F.col("client")).select(
        "index",
        "time",
        F.col("process_text").alias("process"),
        F.lit(None).cast("long").alias("process_id"),
        "type",
        F.col("f_text").alias("f"),
        "final",
        F.col("acks").cast("byte").alias("acks"),
        _text(F.col("node")).alias("node"),
        _text(F.col("error")).alias("error"),
        _text(F.col("key")).alias("key"),
        F.lit(None).cast("long").alias("invoke_index"),
        F.lit(None).cast("long").alias("complete_index"),
        F.lit(None).cast("string").alias("complete_type"),
        F.lit(None).cast("long").alias("latency_ns"),
        _json(F.col("value")).alias("value_json"),
    )
    clients = paired.select(
        "index",
        "time",
        F.col("process_text").alias("process"),
        "process_id",
        "type",
        F.col("f_text").alias("f"),
        "final",
        F.col("acks").cast("byte").alias("acks"),
        _text(F.col("node")).alias("node"),
        _text(F.col("error")).alias("error"),
        _text(F.col("key")).alias("key"),
        "invoke_index",
        "complete_index",
        "complete_type",
        "latency_ns",
        F.when(~micro, _json(F.col("value"))).alias("value_json"),
    )
    return clients.unionByName(events)


def _events(lines: DataFrame) -> DataFrame:
    value = F.col("value")
    sut_dict = (F.col("process_text") == "sut") & F.try_variant_get(
        value, "$", "map<string,variant>"
    ).isNotNull()

    def member(name: str, kind: str) -> Column:
        return F.when(sut_dict, F.try_variant_get(value, f"$.{name}", kind))

    return lines.filter(~F.col("client")).select(
        "index",
        "time",
        F.col("process_text").alias("process"),
        F.col("f_text").alias("f"),
        _text(F.col("node")).alias("node"),
        _text(F.col("error")).alias("error"),
        _json(value).alias("value_json"),
        F.coalesce(member("key", "string"), _text(F.col("key"))).alias("key"),
        member("leader", "bigint").alias("leader"),
        member("leader_epoch", "bigint").alias("leader_epoch"),
        member("isr", "array<bigint>").alias("isr"),
        member("previous_leader", "bigint").alias("previous_leader"),
        member("unclean", "boolean").alias("unclean"),
    )


def _operation_columns(*, f_as: str) -> list[Column | str]:
    """The operation's own columns that head the mops and assign tables."""
    return [
        "index",
        "invoke_index",
        "time",
        F.col("process_text").alias("process"),
        "process_id",
        "type",
        F.col("f_text").alias(f_as),
        "final",
    ]


def _assign(paired: DataFrame) -> DataFrame:
    value = F.col("value")
    commit = F.try_variant_get(value, "$", "map<string,bigint>")
    keys = F.try_variant_get(value, "$", "array<string>")
    return paired.filter(F.col("f_text").isin("assign", "subscribe", "commit")).select(
        *_operation_columns(f_as="f"),
        F.when(F.col("f_text") == "commit", F.map_keys(commit)).otherwise(keys).alias("keys"),
        F.when(F.col("f_text") == "commit", F.map_values(commit)).alias("offsets"),
    )


def _count_lines(path: Path) -> tuple[int, bool]:
    """Lines in the file (a last line without newline counts), and whether it ends in one."""
    lines = 0
    last = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    ends_in_newline = last in (b"\n", b"")
    return lines + (0 if ends_in_newline else 1), ends_in_newline


def _check_order(raw: DataFrame, lines_in_file: int, ends_in_newline: bool) -> list[str]:
    """Indices dense from 0 and in file order; returns notes (a torn tail); raises _Rejected."""
    runs = (
        raw.groupBy("_part")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.count("_corrupt_record").alias("corrupt"),
            F.max("_row").alias("last_row"),
            F.min(F.when(F.col("_corrupt_record").isNull(), F.col("index") - F.col("_row"))).alias(
                "lo"
            ),
            F.max(F.when(F.col("_corrupt_record").isNull(), F.col("index") - F.col("_row"))).alias(
                "hi"
            ),
            F.min("index").alias("first"),
            F.max(F.when(F.col("_corrupt_record").isNotNull(), F.col("_row"))).alias("corrupt_row"),
        )
        .collect()
    )
    runs = sorted(runs, key=lambda run: run["_part"])
    rows = sum(run["rows"] for run in runs)
    if rows != lines_in_file:
        raise _Rejected(
            f"the file has {lines_in_file} lines but {rows} JSON lines were read (blank lines?)"
        )
    notes = []
    corrupt = sum(run["corrupt"] for run in runs)
    nonempty = [run for run in runs if run["rows"]]
    if corrupt:
        last = nonempty[-1]
        torn = (
            corrupt == 1
            and not ends_in_newline
            and last["corrupt"] == 1
            and last["corrupt_row"] == last["last_row"]
        )
        if not torn:
            raise _Rejected(f"{corrupt} line(s) are not JSON objects of the expected types")
        notes.append(
            f"line {lines_in_file}: the last line is torn (no newline, not valid JSON), as a "
            "crash mid-write leaves it; it was ignored"
        )
    expected = 0
    for run in nonempty:
        good = run["rows"] - run["corrupt"]
        if good == 0:
            continue
        if run["lo"] != run["hi"] or run["first"] != expected:
            raise _Rejected("indices are not dense from 0 and in file order")
        expected += good
    return notes


def _write_table(frame: DataFrame, name: str, scratch: Path, target: Path) -> int:
    """Write with Spark into scratch, then into one Parquet file with the exact schema."""
    parts = scratch / name
    frame.write.mode("overwrite").parquet(str(parts))
    schema = SCHEMAS[name]
    rows = 0
    with pq.ParquetWriter(target / f"{name}.parquet", schema, compression="snappy") as writer:
        for part in sorted(parts.glob("part-*.parquet")):
            source = pq.ParquetFile(part)
            for batch in source.iter_batches(batch_size=DEFAULT_ROW_GROUP_SIZE):
                table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
                table = table.replace_schema_metadata(schema.metadata)
                writer.write_table(table, row_group_size=DEFAULT_ROW_GROUP_SIZE)
                rows += table.num_rows
    return rows


def import_jsonl(spark: SparkSession, source: Path, out_dir: Path) -> ImportOutcome:
    """Convert `source` into the `history.parquet` directory `out_dir`, or say why not."""
    outcome = ImportOutcome()
    lines_in_file, ends_in_newline = _count_lines(source)
    if lines_in_file == 0:
        outcome.fallback = "the history is empty"
        return outcome
    raw = read_raw(spark, source).persist(StorageLevel.MEMORY_AND_DISK)
    scratch = out_dir.with_name(f".{out_dir.name}.spark-{uuid.uuid4().hex[:8]}")
    temporary = out_dir.with_name(f".{out_dir.name}.{os.getpid()}.tmp")
    try:
        outcome.notes.extend(_check_order(raw, lines_in_file, ends_in_newline))
        lines = raw.filter(F.col("_corrupt_record").isNull())
        bad = (
            lines.filter(~_sure(_field_checks() & _value_checks()))
            .select("index")
            .limit(1)
            .collect()
        )
        if bad:
            raise _Rejected(f"operation {bad[0]['index']} breaks the history contract")
        paired = _pairing(lines.filter(F.col("client"))).persist(StorageLevel.MEMORY_AND_DISK)
        unpaired = paired.filter(~F.col("paired")).select("index").limit(1).collect()
        if unpaired:
            raise _Rejected(f"operation {unpaired[0]['index']} does not pair with an invoke")
        mops, micro_ops = _mops(paired)
        mops = mops.persist(StorageLevel.MEMORY_AND_DISK)
        malformed = (
            micro_ops.filter(~F.col("_mop_ok"))
            .select("index")
            .unionByName(mops.filter(~F.col("_ok")).select("index"))
            .limit(1)
            .collect()
        )
        if malformed:
            raise _Rejected(f"operation {malformed[0]['index']} has a malformed micro-op")
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        tables = {
            "ops": _ops(lines, paired),
            "mops": mops.drop("_ok"),
            "events": _events(lines),
            "assign": _assign(paired),
        }
        for name in TABLES:
            outcome.rows[name] = _write_table(tables[name], name, scratch, temporary)
        paired.unpersist()
        mops.unpersist()
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(temporary, out_dir)
    except _Rejected as rejected:
        outcome.fallback = str(rejected)
    finally:
        raw.unpersist()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(temporary, ignore_errors=True)
    return outcome
