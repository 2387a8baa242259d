"""A fast, exact `history.jsonl` -> `history.parquet/` converter, in two tiers.

`write_parquet_bulk(source, out_dir)` writes the same four tables as
`histories.parquet.write_parquet`, value for value and row for row, several times faster.
The file is read in blocks of lines, parsed on worker threads:

- Tier 1 (vectorised): client send/poll/txn and commit lines spelt exactly as
  `histories.jsonline` writes them (compact ASCII, fields in their fixed order, optional
  error/node/acks/final/key) are recognised by one RE2 grammar, and taken apart with
  Arrow string kernels and numpy. The grammar is strict: ints as Python prints them,
  strings without the characters that give JSON its structure, canonical escapes only in
  sent and read values. A line it does not accept, or that breaks a rule of the contract
  once parsed (duplicate keys in an object, a poll in a send, ...), goes to tier 2.
- Tier 2 (per line): `json.loads`, the exact reader's validation, and rows built by the
  exact converter's own functions (`histories.parquet`).

Invocations of both tiers are then paired together by process, vectorised, with the rules
of `histories.pairing` (its leniencies counted alike). Any doubt (an invalid line, a
non-dense index, a pairing violation, a value Arrow refuses) stops the conversion with
nothing written and a reason (`BulkOutcome.fallback`); the caller then runs
`write_parquet`, which converts what it can and reports the file and line of what it
cannot (`checkers.load` does both).
"""

from __future__ import annotations

import json
import os
import warnings
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from histories.contract import KEY_LIST_FS, MICRO_OP_FS
from histories.errors import HistoryError
from histories.pairing import SHOWN, Leniency
from histories.parquet import (
    COMPRESSION,
    ParquetSummary,
    add_mop_rows,
    assign_generation,
    assign_lists,
    assign_positions,
    event_row,
    leniency_metadata,
    operation_row,
    record_fields,
    staged_directory,
    values_as_json,
)
from histories.parquet_schema import (
    ASSIGN_SCHEMA,
    BOOL,
    DEFAULT_ROW_GROUP_SIZE,
    EVENTS_SCHEMA,
    I64,
    MOPS_SCHEMA,
    OPS_SCHEMA,
    STR,
    TABLES,
)
from histories.reader import (
    TruncatedHistoryWarning,
    TruncatedTail,
    WholeLineBlocks,
    collector_paused,
)
from histories.validation import check_json_dict

Ints = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int8]
Bytes = npt.NDArray[np.uint8]
Flags = npt.NDArray[np.bool_]

BLOCK_BYTES = 24 << 20
WORKERS = 2

# -- the tier-1 grammar --------------------------------------------------------------------
_ID = r"(?:0|[1-9][0-9]{0,17})"  # an int >= 0 that fits int64 (longer ones: tier 2)
_TIME = r"(?:0|-?[1-9][0-9]{0,17})"
_INT = r"(?:0|-?[1-9][0-9]*)"  # any int, spelt as Python prints it
# Printable ASCII but " \ , : [ ] { }: such a string is its own text, and cannot be
# mistaken for structure when values are split on brackets, braces and commas.
_PLAIN = r"[ !#-+\--9;-Z^-z|~]"
_KEY = f'"{_PLAIN}*"'
# The escapes `json.encoder.encode_basestring_ascii` writes, and no others: a value's JSON
# text must be what the exact converter re-encodes.
_ESCAPE = (
    r"\\(?:[\\bfnrt]|u(?:000[0-7bef]|001[0-9a-f]|007f|00[89a-f][0-9a-f]"
    r"|0[1-9a-f][0-9a-f]{2}|[1-9a-f][0-9a-f]{3}))"
)
_SCALAR = f'(?:{_INT}|"(?:{_PLAIN}|{_ESCAPE})*")'
_RECORD = rf"\[{_ID},{_SCALAR}\]"
_RECORDS = rf"\[(?:{_RECORD}(?:,{_RECORD})*)?\]"
_RESULTS = rf"\{{(?:{_KEY}:{_RECORDS}(?:,{_KEY}:{_RECORDS})*)?\}}"
_MOP = rf'(?:\["send",(?:{_KEY}|{_INT}),(?:{_SCALAR}|{_RECORD})\]|\["poll"(?:,{_RESULTS})?\])'
_MOPS = rf"\[{_MOP}(?:,{_MOP})*\]"
_COMMIT = rf"\{{(?:{_KEY}:{_ID}(?:,{_KEY}:{_ID})*)?\}}"
_TEXT = r'"[ !#-\[\]-~]*"'  # printable ASCII but " and \: its own text
_TAIL_FIELDS = ("error", "node", "acks", "final", "key")
_TAIL = (
    rf'(?P<error>,"error":{_TEXT})?(?P<node>,"node":{_TEXT})?(?P<acks>,"acks":(?:-1|0|1))?'
    rf'(?P<final>,"final":(?:true|false))?(?P<key>,"key":(?:{_TEXT}|{_INT}))?'
)
_UNNAMED_TAIL = _TAIL.replace("(?P<", "(?:<")
for _name in _TAIL_FIELDS:
    _UNNAMED_TAIL = _UNNAMED_TAIL.replace(f"(?:<{_name}>", "(?:")
_LINE = (
    rf'^\{{"index":{_ID},"time":{_TIME},"process":{_ID},"type":"(?:invoke|ok|fail|info)",'
    rf'"f":"(?:(?:send|poll|txn)","value":(?:null|{_MOPS})|commit","value":(?:null|{_COMMIT}))'
    rf"{_UNNAMED_TAIL}\}}\n$"
)
# On a line of the grammar, the first place from which only optional fields follow is where
# its value ends: a field starting inside the value would have to hold the value's closing
# bracket in a string, and the quote after that bracket would end the string too early.
_VALUE_END = rf"{_UNNAMED_TAIL}\}}\n$"
_TAIL_LINE = rf"^{_TAIL}$"

_TYPES = ("invoke", "ok", "fail", "info")
_INVOKE, _OK, _FAIL, _INFO = range(4)
_TYPE_TEXT = pa.array(_TYPES, STR)
_TIER1_FS = ("send", "poll", "txn", "commit")  # the first f codes of every block
_SEND, _POLL, _TXN, _COMMIT_F = range(4)
_TIER1_F_TEXT = pa.array(_TIER1_FS, STR)
_MOP_F_TEXT = pa.array(["send", "poll"], STR)


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """What `write_parquet_bulk` did: the summary of what it wrote, or why it wrote nothing;
    and how many lines it parsed one by one (tier 2)."""

    summary: ParquetSummary | None
    fallback: str | None
    per_line: int = 0


class _Fallback(Exception):
    """The bulk converter cannot vouch for this history; the exact one must convert it."""


# -- Arrow and numpy helpers -------------------------------------------------------------
def _layout(strings: pa.Array) -> tuple[pa.Buffer, Bytes, Ints, Ints]:
    """The data buffer of a string array, its bytes, and where each string starts and ends."""
    count = len(strings)
    _, offset_buffer, buffer = strings.buffers()
    if buffer is None:  # no string has a byte
        buffer = pa.py_buffer(b"")
    if offset_buffer is None:
        offset_buffer = pa.py_buffer(np.zeros(count + 1, np.int32))
    offsets = np.frombuffer(offset_buffer, np.int32, count + 1, strings.offset * 4)
    data = np.frombuffer(buffer, np.uint8)
    bounds = offsets.astype(np.int64)
    return buffer, data, bounds[:-1], bounds[1:]


def _cut(buffer: pa.Buffer, starts: Ints, ends: Ints) -> pa.Array:
    """The strings buffer[starts[i]:ends[i]], for segments in order and not overlapping."""
    count = len(starts)
    if count == 0:
        return pa.array([], STR)
    bounds = np.empty(2 * count, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    pieces = pa.Array.from_buffers(STR, 2 * count - 1, [None, pa.py_buffer(bounds), buffer])
    return pieces.take(pa.array(np.arange(0, 2 * count - 1, 2, dtype=np.int32)))


def _ints(buffer: pa.Buffer, starts: Ints, ends: Ints) -> Ints:
    return np.asarray(pc.cast(_cut(buffer, starts, ends), I64), np.int64)


def _split(strings: pa.Array, pattern: str) -> tuple[pa.Array, Ints, Ints]:
    """Split each string on a literal: the parts, the string each came from, its position."""
    lists = pc.split_pattern(strings, pattern)
    parts = lists.flatten()
    parent = np.asarray(pc.list_parent_indices(lists), np.int64)
    offsets = np.asarray(lists.offsets, np.int64)
    position = np.arange(len(parts), dtype=np.int64) - offsets[parent]
    return parts, parent, position


def _found(strings: pa.Array, pattern: str, *, regex: bool = False) -> Ints:
    """Where the pattern first occurs in each string."""
    find = pc.find_substring_regex if regex else pc.find_substring
    return np.asarray(find(strings, pattern), np.int64)


def _nullable(values: npt.NDArray[Any], valid: Flags, kind: pa.DataType) -> pa.Array:
    return pa.array(values, kind, mask=~valid)


def _scatter(count: int, where: Ints, values: pa.Array, kind: pa.DataType) -> pa.Array:
    """An array of `count` nulls with `values` at the positions `where` (ascending)."""
    if len(where) == count:
        return values.cast(kind)
    slot = np.full(count, -1, np.int64)
    slot[where] = np.arange(len(where))
    return values.cast(kind).take(pa.array(slot, mask=slot < 0))


def _duplicated(groups: Ints, keys: pa.Array) -> Ints:
    """The groups (ascending ids) in which a key occurs twice: JSON objects repeating a key."""
    if len(keys) == 0:
        return np.empty(0, np.int64)
    encoded = pc.dictionary_encode(keys)
    codes = np.asarray(encoded.indices, np.int64)
    distinct = len(encoded.dictionary)
    if distinct <= 256:
        # Few distinct keys (the usual case): a group repeats none if it has as many bits
        # set, one per key, as it has keys.
        first = np.flatnonzero(np.diff(groups, prepend=-1))
        size = np.diff(first, append=len(groups))
        seen = np.zeros(len(first), np.int64)
        for word in range(0, distinct, 64):
            bits = np.where(
                (codes >= word) & (codes < word + 64),
                np.left_shift(np.uint64(1), (codes - word).clip(0, 63).astype(np.uint64)),
                np.uint64(0),
            )
            seen += np.bitwise_count(np.bitwise_or.reduceat(bits, first))
        repeating: Ints = groups[first[seen != size]]
        return repeating
    pairs = np.sort(groups * distinct + codes)
    return np.unique(pairs[1:][pairs[1:] == pairs[:-1]] // distinct)


# -- tier 1 --------------------------------------------------------------------------------
@dataclass(slots=True)
class _Tier1:
    """The parsed tier-1 lines of a block: ops columns, and mops/assign rows by line."""

    rows: Ints  # block rows of the lines
    ops: list[pa.Array]  # index .. key, value_json (the columns of `operation_row`)
    time: Ints
    process_id: Ints
    type_code: Codes
    f_code: Codes
    mops: pa.Table  # _MOP_COLUMNS, `parent` a block row
    assign: pa.Table  # _ASSIGN_COLUMNS


_MOP_COLUMNS = pa.schema(
    [
        ("parent", I64),
        ("mop_index", pa.int32()),
        ("f", STR),
        ("key", STR),
        ("value", STR),
        ("offset", I64),
        ("poll_seq", pa.int32()),
        ("has_results", BOOL),
    ]
)
_ASSIGN_COLUMNS = pa.schema(
    [
        ("parent", I64),
        ASSIGN_SCHEMA.field("keys"),
        ASSIGN_SCHEMA.field("offsets"),
        ASSIGN_SCHEMA.field("positions"),
        ASSIGN_SCHEMA.field("generation"),
    ]
)


class _Lines:
    """A block of whole lines, and where each starts and ends (at its newline)."""

    def __init__(self, data: memoryview) -> None:
        self.buffer = pa.py_buffer(data)
        self.raw: Bytes = np.frombuffer(data, np.uint8)
        self.ends: Ints = np.flatnonzero(self.raw == ord("\n"))
        self.count = len(self.ends)
        self.starts: Ints = np.zeros(self.count, np.int64)
        self.starts[1:] = self.ends[:-1] + 1
        offsets = np.zeros(self.count + 1, np.int32)
        offsets[1:] = self.ends + 1
        self.text = pa.Array.from_buffers(
            pa.binary(), self.count, [None, pa.py_buffer(offsets), self.buffer]
        )
        self._commas: Ints | None = None

    @property
    def commas(self) -> Ints:
        if self._commas is None:
            self._commas = np.flatnonzero(self.raw == ord(","))
        return self._commas

    def raw_line(self, row: int) -> bytes:
        return bytes(self.raw[self.starts[row] : self.ends[row] + 1])


def _parse_tier1(lines: _Lines, rows: Ints) -> _Tier1 | Ints:
    """Parse grammatical lines; or the rows among them that must go to tier 2 instead."""
    buffer, raw = lines.buffer, lines.raw
    start, newline = lines.starts[rows], lines.ends[rows]
    # No comma before the value: the first five of a line end its first five fields.
    first = np.searchsorted(lines.commas, start)
    c1, c2, c3, c4, c5 = (lines.commas[first + k] for k in range(5))
    # Told apart by length, and fail from info by the first letter.
    type_length = c4 - c3 - 10
    type_code: Codes = np.full(len(rows), _FAIL, np.int8)
    type_code[type_length == 6] = _INVOKE
    type_code[type_length == 2] = _OK
    type_code[(type_length == 4) & (raw[c3 + 9] == ord("i"))] = _INFO
    f_initial = raw[c4 + 6]
    f_code: Codes = np.full(len(rows), _SEND, np.int8)
    for f, initial in ((_POLL, "p"), (_TXN, "t"), (_COMMIT_F, "c")):
        f_code[f_initial == ord(initial)] = f
    value_start = c5 + 9
    value_end = newline - 1
    last = raw[newline - 2]  # an array or object ends in ] or }, null in l: no field after
    with_tail = np.flatnonzero((last != ord("]")) & (last != ord("}")) & (last != ord("l")))
    if len(with_tail):
        rest = _cut(buffer, value_start[with_tail], newline[with_tail] + 1)
        value_end[with_tail] = value_start[with_tail] + _found(rest, _VALUE_END, regex=True)
    null = (value_end - value_start == 4) & (raw[value_start] == ord("n"))
    bad = null & (type_code <= _OK)

    micro = np.flatnonzero((f_code != _COMMIT_F) & ~null)
    mops, bad_micro = _parse_micro_ops(
        buffer, rows, value_start[micro], value_end[micro], micro, type_code, f_code
    )
    commits = np.flatnonzero(f_code == _COMMIT_F)
    assign, bad_commits = _parse_commits(
        buffer, rows[commits], value_start[commits], value_end[commits], null[commits]
    )
    bad[bad_micro] = True
    bad[commits[bad_commits]] = True
    if bad.any():
        rejected: Ints = rows[bad]
        return rejected

    ops: list[pa.Array] = [
        pa.array(_ints(buffer, start + 9, c1)),
        pa.array(_ints(buffer, c1 + 8, c2)),
    ]
    process_text = _cut(buffer, c2 + 11, c3)
    process_id = np.asarray(pc.cast(process_text, I64), np.int64)
    ops += [process_text, pa.array(process_id), _TYPE_TEXT.take(pa.array(type_code))]
    ops.append(_TIER1_F_TEXT.take(pa.array(f_code)))
    ops += _tail_fields(buffer, len(rows), with_tail, value_end[with_tail], newline[with_tail] - 1)
    value_json = _cut(buffer, value_start[commits], value_end[commits])
    ops.append(_scatter(len(rows), commits, value_json, STR))
    return _Tier1(
        rows, ops, np.asarray(ops[1], np.int64), process_id, type_code, f_code, mops, assign
    )


def _tail_fields(
    buffer: pa.Buffer, count: int, rows: Ints, starts: Ints, ends: Ints
) -> list[pa.Array]:
    """final, acks, node, error and key of the lines (`rows`) whose value a tail follows."""
    fields = pc.extract_regex(_cut(buffer, starts, ends), _TAIL_LINE)
    present = {name: pc.greater(pc.utf8_length(fields.field(name)), 0) for name in _TAIL_FIELDS}

    def column(name: str, value: pa.Array, kind: pa.DataType) -> pa.Array:
        return _scatter(count, rows, pc.if_else(present[name], value, pa.nulls(1, kind)[0]), kind)

    final = pc.equal(pc.utf8_slice_codeunits(fields.field("final"), 9), "true")
    acks = pc.utf8_slice_codeunits(fields.field("acks"), 8)
    acks = pc.cast(pc.if_else(present["acks"], acks, "0"), pa.int8())
    key = fields.field("key")
    quoted = pc.starts_with(key, ',"key":"')
    key = pc.if_else(quoted, pc.utf8_slice_codeunits(key, 8, -1), pc.utf8_slice_codeunits(key, 7))
    return [
        column("final", final, BOOL),
        column("acks", acks, pa.int8()),
        column("node", pc.utf8_slice_codeunits(fields.field("node"), 9, -1), STR),
        column("error", pc.utf8_slice_codeunits(fields.field("error"), 10, -1), STR),
        column("key", key, STR),
    ]


def _parse_micro_ops(
    buffer: pa.Buffer,
    rows: Ints,
    value_start: Ints,
    value_end: Ints,
    lines: Ints,
    type_code: Codes,
    f_code: Codes,
) -> tuple[pa.Table, Ints]:
    """The mops rows of send/poll/txn values; and the lines (of `lines`) that break a rule."""
    # '[["send","k",1],["poll"]]' -> 'send","k",1' and 'poll"': a '],["' only ends a mop.
    mops, owner, mop_index = _split(_cut(buffer, value_start + 3, value_end - 2), '],["')
    line = lines[owner]
    data_buffer, data, start, end = _layout(mops)
    length = end - start
    send = data[start] == ord("s")
    bare = ~send & (length == 5)  # 'poll"'
    empty = ~send & (length == 8)  # 'poll",{}'
    results = ~send & (length > 8)
    op_type, f = type_code[line], f_code[line]
    wrong = (send & (f == _POLL)) | (~send & (f == _SEND)) | (bare & (op_type == _OK))
    wrong |= (empty | results) & (op_type == _INVOKE)

    # send: 'send",' key ',' (value | '[' offset ',' value ']')
    sends = np.flatnonzero(send)
    s, e = start[sends], end[sends]
    commas = np.flatnonzero(data == ord(","))
    after_key = np.searchsorted(commas, s + 6)
    c2 = commas[after_key]
    quoted = (data[s + 6] == ord('"')).astype(np.int64)
    with_offset = data[c2 + 1] == ord("[")
    wrong[sends[with_offset & (op_type[sends] == _INVOKE)]] = True
    c3 = commas[np.minimum(after_key + 1, len(commas) - 1)]
    offsets = np.zeros(len(sends), np.int64)
    offsets[with_offset] = _ints(data_buffer, c2[with_offset] + 2, c3[with_offset])
    send_rows = {
        "mop": sends,
        "key": _cut(data_buffer, s + 6 + quoted, c2 - quoted),
        "value": _cut(
            data_buffer, np.where(with_offset, c3 + 1, c2 + 1), np.where(with_offset, e - 1, e)
        ),
        "offset": _nullable(offsets, with_offset, I64),
        "poll_seq": pa.nulls(len(sends), pa.int32()),
        "has_results": pa.nulls(len(sends), BOOL),
    }
    # poll results: 'poll",{"k":[],"j":[[0,1],[1,2]]}' -> 'k":[' and 'j":[[0,1],[1,2]'
    polls = np.flatnonzero(results)
    groups, group_of, _ = _split(_cut(data_buffer, start[polls] + 8, end[polls] - 2), '],"')
    group_mop = polls[group_of]
    group_buffer, _, gs, ge = _layout(groups)
    key_end = gs + _found(groups, '"')
    keys = _cut(group_buffer, gs, key_end)
    wrong[_duplicated(group_mop, keys)] = True
    filled = np.flatnonzero(key_end + 3 < ge)
    records, record_of, seq = _split(_cut(group_buffer, key_end[filled] + 4, ge[filled] - 1), "],[")
    record_group = filled[record_of]
    record_buffer, _, rs, re_ = _layout(records)
    comma = rs + _found(records, ",")
    unfilled = np.flatnonzero(key_end + 3 == ge)
    empties = np.flatnonzero(bare | empty)
    poll_rows = {
        "mop": np.concatenate([group_mop[record_group], group_mop[unfilled], empties]),
        "key": pa.concat_arrays(
            [
                keys.take(pa.array(record_group)),
                keys.take(pa.array(unfilled)),
                pa.nulls(len(empties), STR),
            ]
        ),
        "value": pa.concat_arrays(
            [_cut(record_buffer, comma + 1, re_), pa.nulls(len(unfilled) + len(empties), STR)]
        ),
        "offset": pa.concat_arrays(
            [pa.array(_ints(record_buffer, rs, comma)), pa.nulls(len(unfilled) + len(empties), I64)]
        ),
        "poll_seq": pa.concat_arrays(
            [pa.array(seq, pa.int32()), pa.nulls(len(unfilled) + len(empties), pa.int32())]
        ),
        "has_results": pa.array(
            np.concatenate([np.ones(len(record_group) + len(unfilled), bool), empty[empties]])
        ),
    }
    # Each mop's rows in the order the exact converter makes them: by mop, then by group
    # (records keep their order, the sort being stable).
    group_order = np.concatenate([record_group, unfilled, np.zeros(len(empties), np.int64)])
    mop_of_row = np.concatenate([sends, poll_rows["mop"]])
    order = np.lexsort((np.concatenate([np.zeros(len(sends), np.int64), group_order]),
                        mop_of_row))  # fmt: skip
    mop_of_row = mop_of_row[order]
    take = pa.array(order)
    table = pa.Table.from_arrays(
        [
            pa.array(rows[line[mop_of_row]]),
            pa.array(mop_index[mop_of_row], pa.int32()),
            _MOP_F_TEXT.take(pa.array((~send[mop_of_row]).astype(np.int8))),
            *(
                pa.concat_arrays([send_rows[name], poll_rows[name]]).take(take)
                for name in ("key", "value", "offset", "poll_seq", "has_results")
            ),
        ],
        schema=_MOP_COLUMNS,
    )
    return table, np.unique(line[wrong]) if wrong.any() else np.empty(0, np.int64)


def _parse_commits(
    buffer: pa.Buffer, rows: Ints, value_start: Ints, value_end: Ints, null: Flags
) -> tuple[pa.Table, Ints]:
    """The assign rows of commit lines; and those (positions) with a key twice."""
    filled = np.flatnonzero(~null & (value_end - value_start > 2))
    # '{"a":1,"b":2}' -> 'a":1' and 'b":2'
    pairs, owner, _ = _split(_cut(buffer, value_start[filled] + 2, value_end[filled] - 1), ',"')
    pair_buffer, _, ps, pe = _layout(pairs)
    key_end = ps + _found(pairs, '"')
    keys = _cut(pair_buffer, ps, key_end)
    offsets = pa.array(_ints(pair_buffer, key_end + 2, pe))
    counts = np.zeros(len(rows), np.int64)
    counts[filled] = np.bincount(owner, minlength=len(filled))
    bounds = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    mask = pa.array(null)
    table = pa.Table.from_arrays(
        [
            pa.array(rows),
            pa.ListArray.from_arrays(bounds, keys, type=_ASSIGN_COLUMNS.field("keys").type,
                                     mask=mask),
            pa.ListArray.from_arrays(bounds, offsets,
                                     type=_ASSIGN_COLUMNS.field("offsets").type, mask=mask),
            pa.nulls(len(rows), _ASSIGN_COLUMNS.field("positions").type),
            pa.nulls(len(rows), _ASSIGN_COLUMNS.field("generation").type),
        ],
        schema=_ASSIGN_COLUMNS,
    )  # fmt: skip
    return table, filled[_duplicated(owner, keys)]


# -- tier 2 --------------------------------------------------------------------------------
_OPS_COLUMNS = pa.schema([*list(OPS_SCHEMA)[:11], OPS_SCHEMA.field("value_json")])
_TYPE_CODES = {name: code for code, name in enumerate(_TYPES)}


@dataclass(slots=True)
class _Tier2:
    """The other lines of a block, decoded, validated and made rows of by the exact code."""

    rows: Ints
    ops: list[pa.Array]
    time: Ints
    process_id: Ints  # -1 for nemesis and SUT
    type_code: Codes
    f_names: list[str]  # the f of each row
    mops: pa.Table
    assign: pa.Table
    events: pa.Table


def _decode(raw: bytes, line: int) -> dict[str, Any]:
    """A tier-2 line as the exact reader decodes and validates it."""
    try:
        record = json.loads(raw.decode("utf-8"))
        check_json_dict(record)
    except (ValueError, RecursionError, HistoryError) as err:
        raise _Fallback(f"line {line} is not a valid operation: {err}") from err
    return record  # type: ignore[no-any-return]


def _tier2(lines: _Lines, rows: Ints, first_index: int) -> _Tier2:
    ops: list[tuple[Any, ...]] = []
    mops: list[tuple[Any, ...]] = []
    assign: list[tuple[Any, ...]] = []
    events: list[tuple[Any, ...]] = []
    for row in rows.tolist():
        line = first_index + row + 1
        record = _decode(lines.raw_line(row), line)
        fields = record_fields(record)
        index, time, process, _, f, value, error, node, _, _, key = fields
        if index != first_index + row:
            raise _Fallback(
                f"line {line} has index {index}, expected {first_index + row} (dense from 0)"
            )
        try:
            ops.append(operation_row(fields))
            if type(process) is not int:
                events.append(event_row(index, time, process, f, value, error, node, key))
            elif f in MICRO_OP_FS:
                if value is not None:
                    add_mop_rows(mops, row, value)
            elif f in KEY_LIST_FS or f == "commit":
                assign.append(
                    (
                        row,
                        *assign_lists(value),
                        assign_positions(f, value, record),
                        assign_generation(record),
                    )
                )
        except HistoryError as err:
            raise _Fallback(f"line {line}: {err}") from err
    op_columns = _columns(ops, _OPS_COLUMNS)
    return _Tier2(
        rows,
        op_columns,
        np.asarray(op_columns[1], np.int64),
        np.asarray(op_columns[3].fill_null(-1), np.int64),
        np.array([_TYPE_CODES[row[4]] for row in ops], np.int8),
        [row[5] for row in ops],
        pa.Table.from_arrays(_columns(mops, _MOP_COLUMNS, values_at=4), schema=_MOP_COLUMNS),
        pa.Table.from_arrays(_columns(assign, _ASSIGN_COLUMNS), schema=_ASSIGN_COLUMNS),
        pa.Table.from_arrays(_columns(events, EVENTS_SCHEMA), schema=EVENTS_SCHEMA),
    )


def _columns(
    rows: list[tuple[Any, ...]], schema: pa.Schema, values_at: int | None = None
) -> list[pa.Array]:
    """Arrow columns of row tuples, as the exact converter makes them (Arrow may refuse)."""
    if not rows:
        return [pa.array([], kind) for kind in schema.types]
    try:
        return [
            values_as_json(list(column)) if position == values_at else pa.array(column, kind)
            for position, (column, kind) in enumerate(
                zip(zip(*rows, strict=True), schema.types, strict=True)
            )
        ]
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as err:
        raise _Fallback(f"a value Arrow cannot hold: {err}") from err


# -- a block: both tiers -------------------------------------------------------------------
@dataclass(slots=True)
class _Block:
    """A block of lines parsed, its rows in index order (block row = index - first_index)."""

    first_index: int
    ops: pa.Table  # _OPS_COLUMNS
    time: Ints
    process_id: Ints  # -1 for nemesis and SUT
    type_code: Codes
    f_code: npt.NDArray[np.int32]  # into f_names
    f_names: list[str]
    mops: pa.Table  # _MOP_COLUMNS
    assign: pa.Table  # _ASSIGN_COLUMNS
    events: pa.Table
    per_line: int

    @property
    def count(self) -> int:
        return len(self.time)


def _parse_block(data: memoryview, first_index: int) -> _Block:
    """Parse a block of whole lines, the first of which has index `first_index`."""
    lines = _Lines(data)
    grammatical = np.asarray(pc.match_substring_regex(lines.text, _LINE))
    tier1 = _parse_tier1(lines, np.flatnonzero(grammatical))
    while not isinstance(tier1, _Tier1):
        grammatical[tier1] = False
        tier1 = _parse_tier1(lines, np.flatnonzero(grammatical))
    rows = tier1.rows
    misplaced = np.flatnonzero(np.asarray(tier1.ops[0], np.int64) != first_index + rows)
    if len(misplaced):
        row = int(rows[misplaced[0]])
        raise _Fallback(
            f"line {first_index + row + 1} has index {tier1.ops[0][misplaced[0]]}, expected "
            f"{first_index + row} (dense from 0)"
        )
    tier2 = _tier2(lines, np.flatnonzero(~grammatical), first_index)
    f_names = [*_TIER1_FS, *sorted(set(tier2.f_names) - set(_TIER1_FS))]
    f_code_of = {name: code for code, name in enumerate(f_names)}
    tier2_f = np.array([f_code_of[name] for name in tier2.f_names], np.int32)
    if not len(tier2.rows):
        return _Block(
            first_index, pa.Table.from_arrays(tier1.ops, schema=_OPS_COLUMNS), tier1.time,
            tier1.process_id, tier1.type_code, tier1.f_code.astype(np.int32), f_names,
            tier1.mops, tier1.assign, tier2.events, 0,
        )  # fmt: skip
    # Rows of tier 1 first, then of tier 2: put them in index order.
    order = np.empty(lines.count, np.int64)
    order[rows] = np.arange(len(rows))
    order[tier2.rows] = len(rows) + np.arange(len(tier2.rows))
    ops = pa.Table.from_arrays(
        [pa.concat_arrays([a, b]) for a, b in zip(tier1.ops, tier2.ops, strict=True)],
        schema=_OPS_COLUMNS,
    ).take(pa.array(order))
    return _Block(
        first_index,
        ops,
        np.concatenate([tier1.time, tier2.time])[order],
        np.concatenate([tier1.process_id, tier2.process_id])[order],
        np.concatenate([tier1.type_code, tier2.type_code])[order],
        np.concatenate([tier1.f_code.astype(np.int32), tier2_f])[order],
        f_names,
        _by_parent(tier1.mops, tier2.mops),
        _by_parent(tier1.assign, tier2.assign),
        tier2.events,
        len(tier2.rows),
    )


def _by_parent(tier1: pa.Table, tier2: pa.Table) -> pa.Table:
    """Rows of both tiers by the operation they belong to, in their order within it."""
    if not tier2.num_rows:
        return tier1
    table = pa.concat_tables([tier1, tier2])
    order = np.argsort(np.asarray(table.column("parent"), np.int64), kind="stable")
    return table.take(pa.array(order))


# -- pairing and writing -------------------------------------------------------------------
# Dictionary encoding for the columns with few distinct values only: on the others
# (indices, times, offsets, values) it costs time and space for nothing.
_DICTIONARY_COLUMNS: dict[str, bool | list[str]] = {
    "ops": ["process", "process_id", "type", "f", "final", "acks", "node", "error", "key",
            "complete_type"],
    "mops": ["process", "process_id", "type", "op_f", "final", "acks", "mop_index", "f", "key",
             "poll_seq", "has_results"],
    "events": True,
    "assign": True,
}  # fmt: skip


class _RowGroupWriter:
    """One Parquet file, written in row groups of exactly DEFAULT_ROW_GROUP_SIZE rows."""

    def __init__(self, path: Path, schema: pa.Schema, dictionary: bool | list[str]) -> None:
        self.schema = schema
        self.rows = 0
        self._writer = pq.ParquetWriter(
            path, schema, compression=COMPRESSION, use_dictionary=dictionary
        )
        self._pending: list[pa.Table] = []
        self._pending_rows = 0

    def write(self, columns: list[pa.Array]) -> None:
        table = pa.Table.from_arrays(columns, schema=self.schema)
        self.rows += table.num_rows
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= DEFAULT_ROW_GROUP_SIZE:
            self._flush(self._pending_rows - self._pending_rows % DEFAULT_ROW_GROUP_SIZE)

    def _flush(self, count: int) -> None:
        pending = pa.concat_tables(self._pending)
        self._writer.write_table(pending.slice(0, count), row_group_size=DEFAULT_ROW_GROUP_SIZE)
        self._pending = [pending.slice(count)]
        self._pending_rows -= count

    def close(self, metadata: dict[str, str] | None = None) -> None:
        if self._pending_rows:
            self._flush(self._pending_rows)
        if metadata:
            self._writer.add_key_value_metadata(metadata)
        self._writer.close()

    def abort(self) -> None:
        self._writer.close()


@dataclass(slots=True)
class _Paired:
    """A block's ops columns and pairing (-1: null), held until its invokes are all paired."""

    first_index: int
    ops: pa.Table
    invoke_index: Ints
    complete_index: Ints
    complete_type: Codes
    latency: Ints
    open_invokes: int  # invokes of the block not completed yet

    def complete(self, invoke: int, completion: int, kind: int, latency: int) -> None:
        row = invoke - self.first_index
        self.complete_index[row] = completion
        self.complete_type[row] = kind
        self.latency[row] = latency
        self.open_invokes -= 1

    def columns(self) -> list[pa.Array]:
        completed = self.complete_index >= 0
        return [
            *self.ops.columns[:11],
            _nullable(self.invoke_index, self.invoke_index >= 0, I64),
            _nullable(self.complete_index, completed, I64),
            _TYPE_TEXT.take(_nullable(self.complete_type, completed, pa.int8())),
            _nullable(self.latency, completed, I64),
            self.ops.column(11),
        ]


class _Tables:
    """Pairs the blocks' invocations in order, as `histories.pairing` does, and writes the
    four tables on a writer thread: a block's ops once its invokes are all paired."""

    def __init__(self, directory: Path, writer_thread: ThreadPoolExecutor) -> None:
        schemas = {"ops": OPS_SCHEMA, "mops": MOPS_SCHEMA, "events": EVENTS_SCHEMA,
                   "assign": ASSIGN_SCHEMA}  # fmt: skip
        self._writers = {
            name: _RowGroupWriter(
                directory / f"{name}.parquet", schemas[name], _DICTIONARY_COLUMNS[name]
            )
            for name in TABLES
        }
        self._writer_thread = writer_thread
        self._writing: deque[Future[None]] = deque()
        self._outstanding: dict[int, tuple[int, int, int]] = {}  # process: index, time, f
        self._informed: Ints = np.empty(0, np.int64)  # processes with an info, sorted
        self._counts = {"after_info": 0, "uninvoked": 0}
        self._first: dict[str, list[int]] = {"after_info": [], "uninvoked": []}
        self._f_ids: dict[str, int] = {}
        self._held: deque[_Paired] = deque()
        self.per_line = 0

    def add(self, block: _Block) -> None:
        paired = self._pair(block)
        self._held.append(paired)
        self.per_line += block.per_line
        op_columns = ["index", "time", "process", "process_id", "type", "f", "final", "acks"]
        for name, table in (("mops", block.mops), ("assign", block.assign)):
            if not table.num_rows:
                continue
            parent = np.asarray(table.column("parent"), np.int64)
            of_op = block.ops.select(op_columns).take(pa.array(parent))
            invoke_index = pa.array(paired.invoke_index[parent])
            if name == "mops":
                columns = [of_op.column(0), invoke_index, *of_op.columns[1:]]
            else:
                columns = [of_op.column(0), invoke_index, *of_op.columns[1:7]]
            self._write(name, columns + table.columns[1:])
        if block.events.num_rows:
            self._write("events", block.events.columns)
        while self._held and not self._held[0].open_invokes:
            self._write("ops", self._held.popleft().columns())

    def _write(self, name: str, columns: list[pa.Array]) -> None:
        self._writing.append(self._writer_thread.submit(self._writers[name].write, columns))
        while len(self._writing) > 8 or (self._writing and self._writing[0].done()):
            self._writing.popleft().result()

    def _pair(self, block: _Block) -> _Paired:
        count = block.count
        client = np.flatnonzero(block.process_id >= 0)
        f_ids = np.array(
            [self._f_ids.setdefault(name, len(self._f_ids)) for name in block.f_names], np.int64
        )
        # Each process's operations in order, after its invoke still outstanding if any.
        held = np.array(
            [(p, *pending) for p, pending in self._outstanding.items()], np.int64
        ).reshape(len(self._outstanding), 4)
        process = np.concatenate([held[:, 0], block.process_id[client]])
        index = np.concatenate([held[:, 1], block.first_index + client])
        time = np.concatenate([held[:, 2], block.time[client]])
        f = np.concatenate([held[:, 3], f_ids[block.f_code[client]]])
        op_type = np.concatenate([np.zeros(len(held), np.int8), block.type_code[client]])
        row = np.concatenate([np.full(len(held), -1), client])
        order = np.lexsort((index, process))
        process, index, time, f, op_type, row = (
            a[order] for a in (process, index, time, f, op_type, row)
        )
        same = np.zeros(len(order), bool)
        same[1:] = process[1:] == process[:-1]
        after_invoke = np.zeros(len(order), bool)  # the process's previous op is an invoke
        after_invoke[1:] = op_type[:-1] == _INVOKE
        after_invoke &= same
        completes = op_type != _INVOKE
        paired = completes & after_invoke
        breaks = ~completes & after_invoke
        breaks[1:] |= paired[1:] & (f[1:] != f[:-1])
        if breaks.any():
            raise _Fallback(
                f"operation {index[breaks].min()} breaks the pairing of invocations by process "
                "(a second invoke while one is outstanding, or a completion of another f)"
            )
        uninvoked = completes & ~paired  # taken as invoked at its own index and time
        is_info = op_type == _INFO
        self._count_leniency(process, index, row, same, is_info, uninvoked)
        done = np.flatnonzero(paired)
        invoke, completion = row[done - 1], row[done]
        latency = time[done] - time[done - 1]
        invoke_index = np.full(count, -1, np.int64)
        invoke_index[client] = block.first_index + client
        invoke_index[completion] = index[done - 1]
        complete_index = np.full(count, -1, np.int64)
        complete_type = np.full(count, -1, np.int8)
        latencies = np.zeros(count, np.int64)
        here = invoke >= 0
        for rows, keep in ((completion, slice(None)), (invoke, here)):
            complete_index[rows[keep]] = index[done][keep]
            complete_type[rows[keep]] = op_type[done][keep]
            latencies[rows[keep]] = latency[keep]
        alone = row[uninvoked]
        complete_index[alone] = block.first_index + alone
        complete_type[alone] = block.type_code[alone]
        for at in np.flatnonzero(~here).tolist():
            invoked = int(index[done[at] - 1])
            paired_block = next(p for p in reversed(self._held) if p.first_index <= invoked)
            paired_block.complete(
                invoked, int(index[done[at]]), int(op_type[done[at]]), int(latency[at])
            )
        last = np.ones(len(order), bool)
        last[:-1] = ~same[1:]
        for p, i, t, kind, fid in zip(
            *(a[last].tolist() for a in (process, index, time, op_type, f)), strict=True
        ):
            if kind == _INVOKE:
                self._outstanding[p] = (i, t, fid)
            else:
                self._outstanding.pop(p, None)
        if is_info.any():
            self._informed = np.union1d(self._informed, process[is_info])
        open_invokes = int(np.count_nonzero(block.type_code[client] == _INVOKE)) - int(here.sum())
        return _Paired(
            block.first_index, block.ops, invoke_index, complete_index, complete_type,
            latencies, open_invokes,
        )  # fmt: skip

    def _count_leniency(
        self, process: Ints, index: Ints, row: Ints, same: Flags, is_info: Flags, alone: Flags
    ) -> None:
        """Count the operations of processes after their info completion and the
        completions without invoke (the block's ops sorted by process, then index)."""
        went_on = np.zeros(len(process), bool)
        if len(self._informed):  # an info in an earlier block
            found = np.searchsorted(self._informed, process) % len(self._informed)
            went_on = self._informed[found] == process
        if is_info.any():  # an info earlier in this block, of the same process
            before: Ints = np.cumsum(is_info) - is_info
            group_start = np.flatnonzero(~same)
            group = np.cumsum(~same) - 1
            went_on |= before > before[group_start][group]
        went_on &= row >= 0  # an invoke held from an earlier block was counted there
        for kind, flags in (("after_info", went_on), ("uninvoked", alone)):
            if flags.any():
                at = np.sort(index[flags])
                first = self._first[kind]
                first += at[: SHOWN - len(first)].tolist()
                self._counts[kind] += len(at)

    @property
    def leniency(self) -> Leniency:
        """What pairing has accepted so far as Jepsen does."""
        return Leniency(
            self._counts["after_info"],
            tuple(self._first["after_info"]),
            self._counts["uninvoked"],
            tuple(self._first["uninvoked"]),
        )

    def close(self) -> dict[str, int]:
        while self._held:
            self._write("ops", self._held.popleft().columns())
        while self._writing:
            self._writing.popleft().result()
        metadata = leniency_metadata(self.leniency, lines=True)
        for name, writer in self._writers.items():
            writer.close(metadata if name == "ops" else None)
        return {name: writer.rows for name, writer in self._writers.items()}

    def abort(self) -> None:
        for future in self._writing:
            future.cancel()
        for future in self._writing:
            if not future.cancelled():
                future.exception()
        for writer in self._writers.values():
            writer.abort()


# -- reading -------------------------------------------------------------------------------
class _BlockReader:
    """The blocks of whole lines of a history file, each with the index of its first line.

    After the last block, `truncated_tail` is set if the file ends in a torn line; a last
    line without newline that is valid JSON is the last block.
    """

    def __init__(self, path: Path, block_bytes: int) -> None:
        self.path = path
        self.block_bytes = block_bytes
        self.truncated_tail: TruncatedTail | None = None

    def __iter__(self) -> Iterator[tuple[memoryview, int]]:
        lines = 0
        blocks = WholeLineBlocks(self.path, self.block_bytes)
        for data, cut in blocks:
            yield memoryview(data)[:cut], lines
            lines += data.count(b"\n", 0, cut)
        if carry := blocks.tail:
            try:
                json.loads(carry)
            except ValueError:
                self.truncated_tail = TruncatedTail(
                    lines + 1, blocks.consumed, len(carry), carry[:200]
                )
            else:
                yield memoryview(carry + b"\n"), lines


def write_parquet_bulk(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    block_bytes: int = BLOCK_BYTES,
    workers: int = WORKERS,
) -> BulkOutcome:
    """Convert a `history.jsonl` file into the `history.parquet` directory `out_dir`.

    Writes exactly what `write_parquet` writes, or nothing: then `fallback` says why, and
    the history must be converted by `write_parquet`. An existing `out_dir` is replaced.
    """
    if block_bytes < 1 or workers < 1:
        raise ValueError(f"block_bytes {block_bytes} and workers {workers}: expected >= 1")
    path, target = Path(source), Path(out_dir)
    reader = _BlockReader(path, block_bytes)
    try:
        with (
            staged_directory(target) as directory,
            collector_paused(),
            ThreadPoolExecutor(1) as writer_thread,
        ):
            tables = _Tables(directory, writer_thread)
            try:
                _convert(reader, tables, workers)
                rows = tables.close()
            except BaseException:
                tables.abort()
                raise
    except _Fallback as reason:
        return BulkOutcome(None, str(reason))
    except (pa.ArrowException, ValueError, IndexError, TypeError, RecursionError) as err:
        return BulkOutcome(None, f"the bulk converter failed: {type(err).__name__}: {err}")
    tail = reader.truncated_tail
    if tail is not None:
        warnings.warn(TruncatedHistoryWarning(tail.describe(path)), stacklevel=2)
    summary = ParquetSummary(
        target, rows["ops"], rows["mops"], rows["events"], rows["assign"], tail, tables.leniency
    )
    return BulkOutcome(summary, None, tables.per_line)


def _convert(reader: _BlockReader, tables: _Tables, workers: int) -> None:
    """Parse blocks on `workers` threads, a few ahead, and add them to `tables` in order."""
    with ThreadPoolExecutor(workers) as pool:
        parsing: deque[Future[_Block]] = deque()
        try:
            for data, first_index in reader:
                parsing.append(pool.submit(_parse_block, data, first_index))
                if len(parsing) > workers:
                    tables.add(parsing.popleft().result())
            while parsing:
                tables.add(parsing.popleft().result())
        finally:
            for future in parsing:
                future.cancel()
