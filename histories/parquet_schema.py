"""The schema of `history.parquet/`: four flat tables, for Spark checkers without UDFs.

`history.parquet/` holds `ops.parquet`, `mops.parquet`, `events.parquet` and
`assign.parquet` (written by `histories.parquet.write_parquet`). Every table carries the schema metadata `squall.history.version` = "1"; when pairing accepted a history
leniently, as Jepsen does, ops.parquet's footer also holds `squall.history.leniency` (JSON:
the counts and first positions, `histories.parquet.pairing_notes`). Process is
written twice: `process` as text ("3", "nemesis", "sut") and `process_id` as the client
number (null for nemesis and SUT). Keys are opaque strings: an int key 5 is written "5",
the way poll results spell it, so send keys and poll keys compare equal. Values are written
as their JSON text (`7`, `"v-7"`), one comparable column that tells ints from strings.

`ops.parquet`, one row per operation:
  index int64, time int64, process string, process_id int64, type string, f string,
  final bool, acks int8, node string, error string, key string,
  invoke_index int64     the pair's invoke: its own index on an invoke, its invoke's on a
                         completion; null for nemesis and SUT events. A completion without
                         invoke is its own invoke (its own index; `histories.pairing`)
  complete_index int64   the pair's completion (own index on a completion); null if none
  complete_type string   the pair's completion type (ok, fail, info); null if none
  latency_ns int64       completion time - invoke time, on both rows of a pair (0 on a
                         completion without invoke)
  value_json string      the value as JSON, except for send/poll/txn (see mops)

`mops.parquet`, one row per micro-operation of a client send, poll or txn, and for poll
results one row per record:
  index, invoke_index, time, process, process_id, type, op_f (send/poll/txn), final, acks:
                         the operation's, as in ops (`type` is the completion type on a
                         completion's rows)
  mop_index int32        position of the micro-op in the operation's value
  f string               "send" or "poll"
  key string             the key sent to or read from (null: see below)
  value string           JSON text of the value sent or read; null where nothing was read
  offset int64           the offset sent to or read from; null when unknown (invokes, and
                         sends completed without one)
  poll_seq int32         position of the record in the poll's list for its key; null on sends
  has_results bool       on polls: whether the micro-op carried results (false for an
                         invoke's ["poll"]); null on sends
Every micro-op gives at least one row: a poll whose results hold an empty list for a key
gives one row with that key and null value, offset and poll_seq; a poll without results,
or with an empty results map, gives one row with a null key. Filter on
`offset IS NOT NULL` for evidence of what sits at an offset.

`events.parquet`, one row per nemesis or SUT operation:
  index int64, time int64, process string ("nemesis"/"sut"), f string, node string,
  error string, value_json string, and from SUT leader-election / isr-change values:
  key string, leader int64, leader_epoch int64, isr list<int64>, previous_leader int64,
  unclean bool

`assign.parquet`, one row per client assign, subscribe or commit operation:
  index int64, invoke_index int64, time int64, process string, process_id int64,
  type string, f string, final bool,
  keys list<string>      the keys now consumed (assign/subscribe) or committed (commit);
                         null when the value is null (a failed or indeterminate one)
  offsets list<int64>    commit only: the committed offsets, parallel to keys
  positions list<int64>  assign/subscribe only: the offset the new consumer starts reading
                         each of `keys` at, from the completion's `positions` object
                         (`{key: offset}`), parallel to keys (null elements for keys it
                         does not name); null when the line has no such object. Tables
                         written before this column existed lack it.
  generation int64       a group member's: the generation of its assignment (assign) or
                         the one it committed under (commit), from the line's integer
                         `generation`; null without one. Tables written before this column
                         existed lack it.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "1"
TABLES = ("ops", "mops", "events", "assign")
DEFAULT_ROW_GROUP_SIZE = 100_000


def _schema(table: str, fields: list[tuple[str, pa.DataType, bool]]) -> pa.Schema:
    return pa.schema(
        [pa.field(name, kind, nullable=nullable) for name, kind, nullable in fields],
        metadata={"squall.history.version": SCHEMA_VERSION, "squall.history.table": table},
    )


I64, STR, BOOL = pa.int64(), pa.string(), pa.bool_()

OPS_SCHEMA = _schema(
    "ops",
    [
        ("index", I64, False),
        ("time", I64, False),
        ("process", STR, False),
        ("process_id", I64, True),
        ("type", STR, False),
        ("f", STR, False),
        ("final", BOOL, True),
        ("acks", pa.int8(), True),
        ("node", STR, True),
        ("error", STR, True),
        ("key", STR, True),
        ("invoke_index", I64, True),
        ("complete_index", I64, True),
        ("complete_type", STR, True),
        ("latency_ns", I64, True),
        ("value_json", STR, True),
    ],
)
MOPS_SCHEMA = _schema(
    "mops",
    [
        ("index", I64, False),
        ("invoke_index", I64, False),
        ("time", I64, False),
        ("process", STR, False),
        ("process_id", I64, False),
        ("type", STR, False),
        ("op_f", STR, False),
        ("final", BOOL, True),
        ("acks", pa.int8(), True),
        ("mop_index", pa.int32(), False),
        ("f", STR, False),
        ("key", STR, True),
        ("value", STR, True),
        ("offset", I64, True),
        ("poll_seq", pa.int32(), True),
        ("has_results", BOOL, True),
    ],
)
EVENTS_SCHEMA = _schema(
    "events",
    [
        ("index", I64, False),
        ("time", I64, False),
        ("process", STR, False),
        ("f", STR, False),
        ("node", STR, True),
        ("error", STR, True),
        ("value_json", STR, True),
        ("key", STR, True),
        ("leader", I64, True),
        ("leader_epoch", I64, True),
        ("isr", pa.list_(pa.field("element", I64)), True),
        ("previous_leader", I64, True),
        ("unclean", BOOL, True),
    ],
)
ASSIGN_SCHEMA = _schema(
    "assign",
    [
        ("index", I64, False),
        ("invoke_index", I64, False),
        ("time", I64, False),
        ("process", STR, False),
        ("process_id", I64, False),
        ("type", STR, False),
        ("f", STR, False),
        ("final", BOOL, True),
        ("keys", pa.list_(pa.field("element", STR)), True),
        ("offsets", pa.list_(pa.field("element", I64)), True),
        ("positions", pa.list_(pa.field("element", I64)), True),
        ("generation", I64, True),
    ],
)
SCHEMAS = {"ops": OPS_SCHEMA, "mops": MOPS_SCHEMA, "events": EVENTS_SCHEMA, "assign": ASSIGN_SCHEMA}
