"""Converting a history to Parquet: four flat tables that Spark checkers read without UDFs.

`write_parquet(source, out_dir)` streams a history (a `history.jsonl` path, or operations
in index order) into the directory `out_dir` (by convention `<run>/history.parquet`),
holding at most two row groups of operations in memory, so histories of any length convert.
The directory is written beside its destination and renamed into place when complete.
The tables and their columns are described in `histories.parquet_schema`. The building
of rows from a line is shared with the bulk converter, `histories.bulk_parquet`.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from histories.contract import KEY_LIST_FS, MICRO_OP_FS, Process
from histories.errors import HistoryFormatError, OperationError, PairingError
from histories.jsonline import to_json
from histories.operation import Operation
from histories.pairing import InvocationTracker, Leniency
from histories.parquet_schema import (
    BOOL,
    DEFAULT_ROW_GROUP_SIZE,
    I64,
    MOPS_SCHEMA,
    OPS_SCHEMA,
    SCHEMAS,
    STR,
    TABLES,
)
from histories.reader import (
    HistoryReader,
    TruncatedHistoryWarning,
    TruncatedTail,
    collector_paused,
)

_ENCODE_STR = json.encoder.encode_basestring_ascii
COMPRESSION = "snappy"
LENIENCY_KEY = "squall.history.leniency"
"""The ops.parquet footer key that records what pairing accepted leniently (if anything)."""

# An ops row as buffered: `operation_row` (the columns of OPS_SCHEMA up to key, then
# value_json), then invoke_index and latency_ns (known on completions); the pairing of
# invokes is filled in at flush time.
_OPS_BUFFER_TYPES = [*[field.type for field in OPS_SCHEMA][:11], STR, I64, I64]
_O_INDEX, _O_TIME, _O_TYPE, _O_VALUE, _O_INVOKE, _O_LATENCY = 0, 1, 4, 11, 12, 13

OperationFields = tuple[
    int, int, Process, str, str, Any, str | None, str | None, int | None, bool | None, str | None
]
"""index, time, process, type, f, value, error, node, acks, final, key (as text)."""


@dataclass(frozen=True, slots=True)
class ParquetSummary:
    """What `write_parquet` wrote: the directory, row counts, a torn tail it ignored, and
    what pairing accepted as Jepsen does (`histories.pairing`)."""

    path: Path
    ops: int
    mops: int
    events: int
    assign: int
    truncated_tail: TruncatedTail | None = None
    leniency: Leniency = field(default_factory=Leniency)


def leniency_metadata(leniency: Leniency, *, lines: bool) -> dict[str, str]:
    """The ops.parquet footer metadata recording `leniency` (none when there was none);
    `lines`: its positions are lines of a history file."""
    if not leniency:
        return {}
    record = {
        "positions": "line" if lines else "index",
        "after_info": leniency.after_info,
        "after_info_first": list(leniency.after_info_first),
        "uninvoked": leniency.uninvoked,
        "uninvoked_first": list(leniency.uninvoked_first),
    }
    return {LENIENCY_KEY: json.dumps(record, separators=(",", ":"))}


def pairing_notes(directory: str | os.PathLike[str]) -> list[str]:
    """The notes for results.json on what pairing accepted leniently when the tables of
    `directory` were written (read from the footer of its ops.parquet file, if a file)."""
    path = Path(directory) / "ops.parquet"
    if not path.is_file():
        return []
    try:
        text = (pq.ParquetFile(path).metadata.metadata or {}).get(LENIENCY_KEY.encode())
        if text is None:
            return []
        record = json.loads(text)
        leniency = Leniency(
            int(record["after_info"]),
            tuple(int(i) for i in record["after_info_first"]),
            int(record["uninvoked"]),
            tuple(int(i) for i in record["uninvoked_first"]),
        )
        lines = record["positions"] == "line"
    except (OSError, pa.ArrowException, ValueError, KeyError, TypeError):
        return []  # unreadable tables fail when read; a note is not worth an error here
    return leniency.notes(lines=lines)


def value_json(index: int, value: Any) -> str:
    """The ops/events `value_json` of an operation's value."""
    try:
        return to_json(value)
    except (TypeError, ValueError, RecursionError) as err:
        raise OperationError(
            f"operation {index}: its value cannot be written as JSON ({err}); values must be "
            "JSON data"
        ) from err


def _key_text(key: Any) -> str | None:
    if key is None:
        return None
    return key if type(key) is str else str(key)


def values_as_json(values: list[Any]) -> pa.Array:
    """JSON text of int/str values, in C++ when they are all ints."""
    try:
        return pa.array(values, I64).cast(STR)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array(
            [None if v is None else (_ENCODE_STR(v) if type(v) is str else str(v)) for v in values],
            STR,
        )


def record_fields(record: dict[str, Any]) -> OperationFields:
    """The fields of a validated history line, its key as text."""
    if len(record) == 6:
        return (
            record["index"], record["time"], record["process"], record["type"], record["f"],
            record["value"], None, None, None, None, None,
        )  # fmt: skip
    get = record.get
    key = get("key")
    if key is not None and type(key) is not str:
        key = str(key)
    return (
        record["index"], record["time"], record["process"], record["type"], record["f"],
        record["value"], get("error"), get("node"), get("acks"), get("final"), key,
    )  # fmt: skip


def operation_row(fields: OperationFields) -> tuple[Any, ...]:
    """The ops columns of an operation up to `key`, then `value_json` (pairing left out)."""
    index, time, process, op_type, f, value, error, node, acks, final, key = fields
    if type(process) is not int:
        return (index, time, process, None, op_type, f, final, acks, node, error, key,
                value_json(index, value))  # fmt: skip
    return (index, time, str(process), process, op_type, f, final, acks, node, error, key,
            None if f in MICRO_OP_FS else value_json(index, value))  # fmt: skip


def add_mop_rows(rows: list[tuple[Any, ...]], ref: int, value: list[Any]) -> None:
    """Append the mops rows of a send/poll/txn value, each `(ref, mop_index, f, key, value,
    offset, poll_seq, has_results)`; the value is a valid one, not null."""
    append = rows.append
    for position, mop in enumerate(value):
        if mop[0] == "send":
            key = mop[1]
            if type(key) is not str:
                key = str(key)
            sent = mop[2]
            if type(sent) is list:
                append((ref, position, "send", key, sent[1], sent[0], None, None))
            else:
                append((ref, position, "send", key, sent, None, None, None))
        elif len(mop) == 1:
            append((ref, position, "poll", None, None, None, None, False))
        elif mop[1]:
            for key, records in mop[1].items():
                if records:
                    for seq, (offset, read) in enumerate(records):
                        append((ref, position, "poll", key, read, offset, seq, True))
                else:
                    append((ref, position, "poll", key, None, None, None, True))
        else:
            append((ref, position, "poll", None, None, None, None, True))


def event_row(
    index: int,
    time: int,
    process: Process,
    f: str,
    value: Any,
    error: str | None,
    node: str | None,
    key: str | None,
) -> tuple[Any, ...]:
    """The events row of a nemesis or SUT operation."""
    leader = epoch = isr = previous = unclean = None
    if process == "sut" and type(value) is dict:
        key = _key_text(value.get("key", key))
        leader = value.get("leader")
        epoch = value.get("leader_epoch")
        isr = value.get("isr")
        previous = value.get("previous_leader")
        unclean = value.get("unclean")
    return (index, time, process, f, node, error, value_json(index, value), key, leader,
            epoch, isr, previous, unclean)  # fmt: skip


def assign_positions(f: str, value: Any, record: dict[str, Any]) -> list[int | None] | None:
    """The `positions` column of an assign or subscribe line: its `positions` object's
    offset for each key of `value` (None where it names none); None without one."""
    positions = record.get("positions")
    if f == "commit" or type(positions) is not dict or type(value) is not list:
        return None
    texts = {(k if type(k) is str else str(k)): v for k, v in positions.items()}
    return [
        offset if type(offset := texts.get(k if type(k) is str else str(k))) is int else None
        for k in value
    ]


def assign_generation(record: dict[str, Any]) -> int | None:
    """The `generation` column of an assign, subscribe or commit line: its integer
    `generation` field, else None."""
    generation = record.get("generation")
    return generation if type(generation) is int else None


def assign_lists(value: Any) -> tuple[list[str] | None, list[int] | None]:
    """The `keys` and `offsets` of an assign, subscribe or commit value."""
    if value is None:
        return None, None
    if type(value) is dict:
        return list(value), list(value.values())
    return [k if type(k) is str else str(k) for k in value], None


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """A fresh directory beside `target`, renamed into place (replacing `target`) when the
    block completes, and removed if it raises."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        yield temporary
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    if target.exists():
        shutil.rmtree(target)
    os.replace(temporary, target)


class _TableWriter:
    """One Parquet file written row group by row group."""

    def __init__(self, path: Path, schema: pa.Schema, row_group_size: int) -> None:
        self.schema = schema
        self.rows = 0
        self._row_group_size = row_group_size
        self._writer = pq.ParquetWriter(path, schema, compression=COMPRESSION)

    def write(self, columns: list[Any]) -> None:
        table = pa.Table.from_arrays(columns, schema=self.schema)
        self.rows += table.num_rows
        self._writer.write_table(table, row_group_size=self._row_group_size)

    def close(self, metadata: dict[str, str] | None = None) -> None:
        if metadata:
            self._writer.add_key_value_metadata(metadata)
        self._writer.close()


class HistoryTables:
    """Streams operations (in index order) into the four Parquet tables of `out_dir`.

    `lines`: the operations are the lines of a history file, so a leniency recorded in
    ops.parquet is placed by line (index + 1) rather than by index.
    """

    def __init__(
        self, out_dir: Path, *, row_group_size: int = DEFAULT_ROW_GROUP_SIZE, lines: bool = False
    ) -> None:
        if row_group_size < 1:
            raise ValueError(f"row_group_size is {row_group_size}, expected >= 1")
        self._dir = out_dir
        self._rg = row_group_size
        self._lines = lines
        self._writers = {
            name: _TableWriter(out_dir / f"{name}.parquet", SCHEMAS[name], row_group_size)
            for name in TABLES
        }
        self._tracker = InvocationTracker()
        self._observe = self._tracker.observe
        self._ops_limit = 2 * row_group_size
        self._ops: list[tuple[Any, ...]] = []
        self._ops_start = 0  # index of the first buffered ops row
        self._late: dict[int, tuple[int, str, int]] = {}
        self._mop_ops: list[tuple[Any, ...]] = []
        self._mops: list[tuple[Any, ...]] = []
        self._events: list[tuple[Any, ...]] = []
        self._assign: list[tuple[Any, ...]] = []
        self.count = 0

    def add(self, record: dict[str, Any]) -> None:
        """Add the next operation, a validated history line (its index must be the next one)."""
        fields = record_fields(record)
        index, time, process, op_type, f, value, error, node, acks, final, key = fields
        if index != self.count:
            raise OperationError(
                f"operation {self.count} of the history has index {index}; indices must be "
                "dense from 0 and in order"
            )
        self.count = index + 1
        if type(process) is not int:
            self._ops.append((*operation_row(fields), None, None))
            self._events.append(event_row(index, time, process, f, value, error, node, key))
            if len(self._events) >= self._rg:
                self._flush_rows("events", self._events)
        else:
            pending = self._observe(index, time, process, op_type, f)
            if pending is None:
                invoke_index, latency = index, None
            else:
                invoke_index, latency = pending[0], time - pending[1]
                if invoke_index < self._ops_start:
                    self._late[invoke_index] = (index, op_type, latency)
            row = operation_row(fields)
            self._ops.append((*row, invoke_index, latency))
            op_row = (index, invoke_index, time, row[2], process, op_type, f, final)
            if f in MICRO_OP_FS:
                if value is not None:
                    self._add_mops((*op_row, acks), value)
            elif f in KEY_LIST_FS or f == "commit":
                self._assign.append(
                    (
                        *op_row,
                        *assign_lists(value),
                        assign_positions(f, value, record),
                        assign_generation(record),
                    )
                )
                if len(self._assign) >= self._rg:
                    self._flush_rows("assign", self._assign)
        if len(self._ops) >= self._ops_limit:
            self._flush_ops(self._rg)

    def _add_mops(self, op_row: tuple[Any, ...], value: list[Any]) -> None:
        self._mop_ops.append(op_row)
        add_mop_rows(self._mops, len(self._mop_ops) - 1, value)
        if len(self._mops) >= self._rg:
            self._flush_mops()

    def _flush_rows(self, name: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        writer = self._writers[name]
        columns = [
            pa.array(column, field.type)
            for column, field in zip(zip(*rows, strict=True), writer.schema, strict=True)
        ]
        writer.write(columns)
        rows.clear()

    def _flush_mops(self) -> None:
        if not self._mops:
            return
        ref, mop_index, f, key, value, offset, seq, has_results = zip(*self._mops, strict=True)
        op_columns = [
            pa.array(column, field.type)
            for column, field in zip(zip(*self._mop_ops, strict=True), MOPS_SCHEMA, strict=False)
        ]
        take = pa.array(ref, pa.int32())
        self._writers["mops"].write(
            [column.take(take) for column in op_columns]
            + [
                pa.array(mop_index, pa.int32()),
                pa.array(f, STR),
                pa.array(key, STR),
                values_as_json(list(value)),
                pa.array(offset, I64),
                pa.array(seq, pa.int32()),
                pa.array(has_results, BOOL),
            ]
        )
        self._mops.clear()
        self._mop_ops.clear()

    def _flush_ops(self, count: int) -> None:
        """Write the first `count` buffered ops rows, pairing their invokes within the buffer."""
        window = self._ops
        if not window:
            return
        head_columns = list(zip(*window[:count], strict=True))
        arrays = [
            pa.array(column, kind)
            for column, kind in zip(head_columns, _OPS_BUFFER_TYPES, strict=True)
        ]
        # The rest of the window is read only for the completions of the head's invokes.
        lookup = [arrays[i] for i in (_O_INDEX, _O_TIME, _O_TYPE, _O_INVOKE)]
        if len(window) > count:
            tail_columns = list(zip(*window[count:], strict=True))
            lookup = [
                pa.concat_arrays([array, pa.array(tail_columns[i], _OPS_BUFFER_TYPES[i])])
                for array, i in zip(lookup, (_O_INDEX, _O_TIME, _O_TYPE, _O_INVOKE), strict=True)
            ]
        index, time, op_type, invoke_index = lookup
        latency = arrays[_O_LATENCY]
        completed = pc.and_(pc.not_equal(op_type, "invoke"), pc.is_valid(invoke_index))
        done_invoke = invoke_index.filter(completed)
        done_index, done_type = index.filter(completed), op_type.filter(completed)
        done_time = time.filter(completed)

        head = slice(0, count)
        h_index, h_time, h_type = index[head], time[head], op_type[head]
        h_invoke, h_latency, h_completed = invoke_index[head], latency, completed[head]
        is_invoke = pc.equal(h_type, "invoke")
        found = pc.index_in(h_index, value_set=done_invoke)
        null_i64 = pa.nulls(count, I64)
        complete_index = pc.if_else(
            is_invoke, done_index.take(found), pc.if_else(h_completed, h_index, null_i64)
        )
        complete_type = pc.if_else(
            is_invoke, done_type.take(found), pc.if_else(h_completed, h_type, pa.nulls(count, STR))
        )
        latency_ns = pc.if_else(is_invoke, pc.subtract(done_time.take(found), h_time), h_latency)
        out = arrays[:_O_VALUE]
        out += [h_invoke, complete_index, complete_type, latency_ns, arrays[_O_VALUE]]
        self._writers["ops"].write(out)
        del window[:count]
        self._ops_start += count

    def close(self) -> None:
        """Flush everything, fix up invokes completed long after they were written."""
        self._flush_ops(len(self._ops))
        self._flush_mops()
        self._flush_rows("events", self._events)
        self._flush_rows("assign", self._assign)
        metadata = leniency_metadata(self.leniency, lines=self._lines)
        for name, writer in self._writers.items():
            writer.close(metadata if name == "ops" else None)
        if self._late:
            self._patch_late_completions(metadata)

    @property
    def leniency(self) -> Leniency:
        """What pairing has accepted leniently so far."""
        return self._tracker.leniency()

    def abort(self) -> None:
        for writer in self._writers.values():
            writer.close()

    def rows(self) -> dict[str, int]:
        return {name: writer.rows for name, writer in self._writers.items()}

    def _patch_late_completions(self, metadata: dict[str, str]) -> None:
        """Rewrite ops.parquet, filling in invokes whose completion came after their flush."""
        path = self._dir / "ops.parquet"
        patched = self._dir / "ops.parquet.patching"
        late = sorted(self._late.items())
        late_invoke = pa.array([item[0] for item in late], I64)
        late_index = pa.array([item[1][0] for item in late], I64)
        late_type = pa.array([item[1][1] for item in late], STR)
        late_latency = pa.array([item[1][2] for item in late], I64)
        source = pq.ParquetFile(path)
        writer = pq.ParquetWriter(patched, OPS_SCHEMA, compression=COMPRESSION)
        try:
            for batch in source.iter_batches(batch_size=self._rg):
                table = pa.Table.from_batches([batch], schema=OPS_SCHEMA)
                found = pc.index_in(table["index"], value_set=late_invoke)
                hit = pc.is_valid(found)
                for name, values in (
                    ("complete_index", late_index),
                    ("complete_type", late_type),
                    ("latency_ns", late_latency),
                ):
                    column = table.schema.get_field_index(name)
                    merged = pc.if_else(hit, values.take(found), table[name])
                    table = table.set_column(column, OPS_SCHEMA.field(name), merged)
                writer.write_table(table, row_group_size=self._rg)
            if metadata:
                writer.add_key_value_metadata(metadata)
        finally:
            writer.close()
        os.replace(patched, path)


def write_parquet(
    source: str | os.PathLike[str] | Iterable[Operation],
    out_dir: str | os.PathLike[str],
    *,
    row_group_size: int = DEFAULT_ROW_GROUP_SIZE,
) -> ParquetSummary:
    """Convert a history (a `history.jsonl` path, or operations) into `out_dir`.

    `out_dir` is the `history.parquet` directory itself; an existing one is replaced.
    A history whose invocations do not pair up raises `HistoryFormatError` (for a file) or
    `PairingError`; what pairing accepted as Jepsen does is in the summary's `leniency`
    and in ops.parquet's footer (`pairing_notes`).
    """
    target = Path(out_dir)
    tail: TruncatedTail | None = None
    from_file = isinstance(source, (str, os.PathLike))
    with staged_directory(target) as temporary:
        tables = HistoryTables(temporary, row_group_size=row_group_size, lines=from_file)
        try:
            with collector_paused():
                if isinstance(source, (str, os.PathLike)):
                    tail = _add_file(tables, Path(source))
                else:
                    for op in source:
                        tables.add(op.to_json_dict())
                tables.close()
        except BaseException:
            tables.abort()
            raise
    rows = tables.rows()
    return ParquetSummary(
        target, rows["ops"], rows["mops"], rows["events"], rows["assign"], tail, tables.leniency
    )


def _add_file(tables: HistoryTables, path: Path) -> TruncatedTail | None:
    reader = HistoryReader(path, warn=False)
    add = tables.add
    try:
        for record in reader.records():
            add(record)
    except PairingError as err:
        raise HistoryFormatError(path, reader.lines, str(err)) from err
    if reader.truncated_tail is not None:
        warnings.warn(TruncatedHistoryWarning(reader.truncated_tail.describe(path)), stacklevel=3)
    return reader.truncated_tail


def read_parquet_tables(directory: str | os.PathLike[str]) -> dict[str, pa.Table]:
    """The four tables of a `history.parquet` directory (for tests and small histories)."""
    root = Path(directory)
    missing = [name for name in TABLES if not (root / f"{name}.parquet").is_file()]
    if missing:
        raise FileNotFoundError(
            f"{root} is not a complete history.parquet directory: {', '.join(missing)} missing; "
            "convert the history again with write_parquet"
        )
    return {name: pq.ParquetFile(root / f"{name}.parquet").read() for name in TABLES}
