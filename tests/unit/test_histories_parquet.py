"""Parquet conversion: flat tables that reproduce the history, streamed in row groups."""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from histories import (
    HistoryFormatError,
    HistoryWriter,
    Operation,
    OperationError,
    PairingError,
    TruncatedHistoryWarning,
    pair_operations,
    read_parquet_tables,
    write_parquet,
)
from histories.operation import make_operation
from histories.pairing import SHOWN, Leniency
from histories.parquet import leniency_metadata, pairing_notes
from histories.parquet_schema import SCHEMAS
from tests.unit.test_histories_operation import client_value, event_operations, optional_fields

CLIENT_FS = ["send", "poll", "txn", "assign", "subscribe", "commit", "crash"]


@st.composite
def paired_histories(draw: st.DrawFn, lenient: bool = False) -> list[Operation]:
    """Valid histories: three client slots (a process retires after info) and events.

    `lenient`: as Jepsen's hand-written histories, a process may go on after its info, and
    a completion may come without invoke.
    """
    ops: list[Operation] = []
    outstanding: dict[int, Operation] = {}
    processes = [0, 1, 2]
    now = 0
    for _ in range(draw(st.integers(0, 30))):
        now += draw(st.integers(0, 1000))
        index = len(ops)
        if draw(st.integers(0, 7)) == 0:
            event = draw(event_operations())
            ops.append(Operation(index, now, event.process, "info", event.f, event.value))
            continue
        slot = draw(st.integers(0, 2))
        process = processes[slot]
        fields = draw(optional_fields)
        invoke = outstanding.pop(process, None)
        if invoke is None and lenient and draw(st.integers(0, 3)) == 0:
            f = draw(st.sampled_from(CLIENT_FS))
            op_type = draw(st.sampled_from(["ok", "fail", "info"]))
            op = make_operation(index, now, process, op_type, f,
                                draw(client_value(op_type, f)), **fields)  # fmt: skip
        elif invoke is None:
            f = draw(st.sampled_from(CLIENT_FS))
            op = make_operation(index, now, process, "invoke", f,
                                draw(client_value("invoke", f)), **fields)  # fmt: skip
            outstanding[process] = op
        else:
            op_type = draw(st.sampled_from(["ok", "fail", "info"]))
            op = make_operation(index, now, process, op_type, invoke.f,
                                draw(client_value(op_type, invoke.f)), **fields)  # fmt: skip
            if op_type == "info" and not (lenient and draw(st.booleans())):
                processes[slot] = max(processes) + 1
        ops.append(op)
    return ops


def expected_leniency(ops: list[Operation]) -> Leniency:
    """What pairing accepts in `ops` as Jepsen does, counted the plain way."""
    informed: set[Any] = set()
    outstanding: set[Any] = set()
    after_info: list[int] = []
    uninvoked: list[int] = []
    for op in ops:
        if not op.is_client:
            continue
        if op.process in informed:
            after_info.append(op.index)
        if op.type == "invoke":
            outstanding.add(op.process)
            continue
        if op.process not in outstanding:
            uninvoked.append(op.index)
        outstanding.discard(op.process)
        if op.type == "info":
            informed.add(op.process)
    return Leniency(len(after_info), tuple(after_info[:SHOWN]), len(uninvoked),
                    tuple(uninvoked[:SHOWN]))  # fmt: skip


def _rows(table: Any) -> list[dict[str, Any]]:
    return list(table.to_pylist())


def _rebuild_micro_ops(rows: list[dict[str, Any]]) -> dict[int, list[Any]]:
    """The micro-operations of every op, rebuilt from mops rows."""
    by_op: dict[int, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_op[row["index"]][row["mop_index"]].append(row)
    rebuilt: dict[int, list[Any]] = {}
    for index, mops in by_op.items():
        value = []
        for position in sorted(mops):
            group = mops[position]
            if group[0]["f"] == "send":
                (row,) = group
                sent = json.loads(row["value"])
                value.append(["send", row["key"],
                              sent if row["offset"] is None else [row["offset"], sent]])  # fmt: skip
            elif not group[0]["has_results"]:
                value.append(["poll"])
            else:
                results: dict[str, list[list[Any]]] = {}
                for row in sorted(group, key=lambda r: (r["poll_seq"] is not None, r["poll_seq"])):
                    if row["key"] is None:
                        continue
                    records = results.setdefault(row["key"], [])
                    if row["offset"] is not None:
                        records.append([row["offset"], json.loads(row["value"])])
                value.append(["poll", results])
        rebuilt[index] = value
    return rebuilt


def _keys_as_text(value: Any) -> Any:
    """Micro-ops with send keys as text, as the mops table spells every key."""
    return [[mop[0], str(mop[1]), *mop[2:]] if mop[0] == "send" else mop for mop in value]


@settings(max_examples=60)
@given(st.one_of(paired_histories(), paired_histories(lenient=True)), st.integers(1, 6))
def test_tables_reproduce_the_history(ops: list[Operation], row_group_size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        summary = write_parquet(ops, Path(tmp) / "history.parquet", row_group_size=row_group_size)
        tables = read_parquet_tables(summary.path)
        notes = pairing_notes(summary.path)
    assert summary.leniency == expected_leniency(ops)
    assert notes == summary.leniency.notes(lines=False)
    for name, table in tables.items():
        schema = SCHEMAS[name]
        if name == "ops":  # with the leniency, if any, in its footer
            schema = schema.with_metadata(
                {**schema.metadata, **leniency_metadata(summary.leniency, lines=False)}
            )
        assert table.schema.equals(schema, check_metadata=True)
    ops_rows = _rows(tables["ops"])
    assert [row["index"] for row in ops_rows] == [op.index for op in ops]
    pairs = {invoke.index: completion for invoke, completion in pair_operations(ops)}
    invoke_of = {c.index: i for i, c in pairs.items() if c is not None}
    for op, row in zip(ops, ops_rows, strict=True):
        assert (row["time"], row["type"], row["f"], row["process"]) == (
            op.time, op.type, op.f, str(op.process))  # fmt: skip
        assert row["process_id"] == (op.process if op.is_client else None)
        assert (row["acks"], row["final"], row["node"], row["error"]) == (
            op.acks, op.final, op.node, op.error)  # fmt: skip
        assert row["key"] == (None if op.key is None else str(op.key))
        if not op.is_client:
            assert row["invoke_index"] is None and row["complete_index"] is None
            continue
        if op.type == "invoke":
            completion = pairs[op.index]
            assert row["invoke_index"] == op.index
        else:
            completion = op
            assert row["invoke_index"] == invoke_of[op.index]
        assert row["complete_index"] == (completion.index if completion else None)
        assert row["complete_type"] == (completion.type if completion else None)
        invoke_time = ops[row["invoke_index"]].time
        assert row["latency_ns"] == (completion.time - invoke_time if completion else None)
        if op.f in ("send", "poll", "txn"):
            assert row["value_json"] is None
        else:
            assert json.loads(row["value_json"]) == op.value

    rebuilt = _rebuild_micro_ops(_rows(tables["mops"]))
    expected = {op.index: _keys_as_text(op.value) for op in ops
                if op.is_client and op.f in ("send", "poll", "txn") and op.value is not None}  # fmt: skip
    assert rebuilt == expected
    for row in _rows(tables["mops"]):
        op = ops[row["index"]]
        assert (row["type"], row["op_f"], row["acks"], row["process_id"]) == (
            op.type, op.f, op.acks, op.process)  # fmt: skip

    assign_rows = {row["index"]: row for row in _rows(tables["assign"])}
    for op in ops:
        if not (op.is_client and op.f in ("assign", "subscribe", "commit")):
            assert op.index not in assign_rows
            continue
        row = assign_rows.pop(op.index)
        if op.value is None:
            assert row["keys"] is None
        elif op.f == "commit":
            assert dict(zip(row["keys"], row["offsets"], strict=True)) == op.value
        else:
            assert row["keys"] == [str(key) for key in op.value] and row["offsets"] is None

    events = {row["index"]: row for row in _rows(tables["events"])}
    assert sorted(events) == [op.index for op in ops if not op.is_client]
    for index, row in events.items():
        op = ops[index]
        assert json.loads(row["value_json"]) == op.value
        if op.process == "sut":
            assert row["key"] == str(op.value["key"])
            assert row["isr"] == op.value.get("isr")
            assert row["leader"] == op.value.get("leader")
            assert row["unclean"] == op.value.get("unclean")


def _example(path: Path) -> None:
    with HistoryWriter(path) as writer:
        send = writer.invoke(0, "send", [["send", "t-0", 1], ["send", 5, "v"]], acks=-1)
        poll = writer.invoke(1, "poll", [["poll"]])
        writer.complete(send, "ok", [["send", "t-0", [0, 1]], ["send", 5, "v"]])
        writer.event("kill", {"n1": "killed"})
        for _ in range(5):  # enough operations to flush the poll's invoke before it completes
            invoke = writer.invoke(2, "poll", [["poll"]])
            writer.complete(invoke, "ok", [["poll", {}]])
        writer.complete(poll, "ok", [["poll", {"t-0": [[0, 1], [1, 3]], "5": []}]])
        writer.event("leader-election", {"key": "t-0", "leader": 2, "leader_epoch": 3,
                     "isr": [2], "previous_leader": 1, "unclean": True}, process="sut")  # fmt: skip
        assign = writer.invoke(3, "assign", ["t-0", 5])
        writer.complete(assign, "ok", ["t-0", 5])
        writer.invoke(4, "send", [["send", "t-1", 9]])


def test_file_conversion_example(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    _example(source)
    summary = write_parquet(source, tmp_path / "history.parquet", row_group_size=2)
    assert (summary.ops, summary.events, summary.assign) == (19, 2, 2)
    tables = read_parquet_tables(summary.path)
    ops = tables["ops"].to_pylist()
    poll_invoke = ops[1]
    # completed long after its row group was written: patched afterwards
    assert (poll_invoke["complete_index"], poll_invoke["complete_type"]) == (14, "ok")
    assert poll_invoke["latency_ns"] == ops[14]["time"] - ops[1]["time"]
    assert ops[18]["complete_index"] is None and ops[18]["complete_type"] is None
    mops = [row for row in tables["mops"].to_pylist() if row["index"] == 14]
    assert [(r["key"], r["value"], r["offset"], r["poll_seq"]) for r in mops] == [
        ("t-0", "1", 0, 0), ("t-0", "3", 1, 1), ("5", None, None, None)]  # fmt: skip
    sends = [row for row in tables["mops"].to_pylist() if row["index"] == 2]
    assert [(r["key"], r["value"], r["offset"], r["acks"]) for r in sends] == [
        ("t-0", "1", 0, -1), ("5", '"v"', None, -1)]  # fmt: skip
    (election,) = [row for row in tables["events"].to_pylist() if row["process"] == "sut"]
    assert (election["key"], election["leader"], election["isr"], election["unclean"]) == (
        "t-0", 2, [2], True)  # fmt: skip
    metadata = pq.read_schema(summary.path / "ops.parquet").metadata
    assert metadata[b"squall.history.version"] == b"1"
    assert pq.ParquetFile(summary.path / "ops.parquet").metadata.num_row_groups == 10


def test_values_compare_equal_across_sends_and_polls(tmp_path: Path) -> None:
    ops = [Operation(0, 0, 0, "invoke", "txn", [["send", 5, "a\"b"], ["send", 5, 2**62]]),
           Operation(1, 1, 0, "ok", "txn", [["send", 5, [0, "a\"b"]], ["send", 5, [1, 2**62]]]),
           Operation(2, 2, 1, "invoke", "poll", [["poll"]]),
           Operation(3, 3, 1, "ok", "poll", [["poll", {"5": [[0, "a\"b"], [1, 2**62]]}]])]  # fmt: skip
    tables = read_parquet_tables(write_parquet(ops, tmp_path / "h").path)
    rows = tables["mops"].to_pylist()
    sent = {(r["key"], r["value"]) for r in rows if r["f"] == "send" and r["offset"] is not None}
    read = {(r["key"], r["value"]) for r in rows if r["f"] == "poll" and r["offset"] is not None}
    assert sent == read == {("5", '"a\\"b"'), ("5", str(2**62))}


def test_truncated_tail_is_reported_and_the_rest_converted(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    _example(source)
    with source.open("ab") as fh:
        fh.write(b'{"index": 19, "ti')
    with pytest.warns(TruncatedHistoryWarning):
        summary = write_parquet(source, tmp_path / "out")
    assert summary.ops == 19 and summary.truncated_tail is not None


def test_bad_pairing_in_a_file_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    source.write_text(
        '{"index":0,"time":0,"process":0,"type":"invoke","f":"poll","value":[["poll"]]}\n'
        '{"index":1,"time":1,"process":0,"type":"invoke","f":"poll","value":[["poll"]]}\n'
    )
    out = tmp_path / "history.parquet"
    with pytest.raises(HistoryFormatError, match="line 2: operation 1: process 0 invokes"):
        write_parquet(source, out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [source]  # no temporary directory left behind


# As in Jepsen's own tests: process 0 goes on after its info, and 1 and 2 complete what
# they never invoked.
HAND_WRITTEN: list[dict[str, Any]] = [
    {"process": 0, "type": "invoke", "f": "send", "value": [["send", "k", 1]]},
    {"process": 0, "type": "info", "f": "send", "value": None},
    {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"k": [[0, 2]]}]]},
    {"process": 0, "type": "invoke", "f": "send", "value": [["send", "k", 2]]},
    {"process": "nemesis", "type": "info", "f": "kill", "value": None},
    {"process": 0, "type": "ok", "f": "send", "value": [["send", "k", [0, 2]]]},
    {"process": 2, "type": "fail", "f": "send", "value": [["send", "k", 3]]},
]


def test_hand_written_leniency_pairs_as_jepsen_and_is_recorded(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    source.write_text("".join(json.dumps({"index": i, "time": 10 * i, **op}) + "\n"
                              for i, op in enumerate(HAND_WRITTEN)))  # fmt: skip
    # One row a group: the invoke at index 3 is written before its completion (patched).
    summary = write_parquet(source, tmp_path / "history.parquet", row_group_size=1)
    assert summary.leniency == Leniency(2, (3, 5), 2, (2, 6))
    ops = read_parquet_tables(summary.path)["ops"].to_pylist()
    pairing = [(r["index"], r["invoke_index"], r["complete_index"], r["complete_type"],
                r["latency_ns"]) for r in ops]  # fmt: skip
    assert pairing == [(0, 0, 1, "info", 10), (1, 0, 1, "info", 10), (2, 2, 2, "ok", 0),
                       (3, 3, 5, "ok", 20), (4, None, None, None, None), (5, 3, 5, "ok", 20),
                       (6, 6, 6, "fail", 0)]  # fmt: skip
    assert len(ops) == len(HAND_WRITTEN)
    assert pairing_notes(summary.path) == [
        "2 operations came from processes after their info completion (lines 4, 6); each "
        "process went on, its next completion pairing with its next invoke, as Jepsen does",
        "2 completions had no invoke (lines 3, 7); each was taken as invoked at its own time, "
        "as Jepsen does",
    ]
    ordinary = write_parquet([Operation(0, 0, 0, "invoke", "poll", [["poll"]])], tmp_path / "o")
    assert not ordinary.leniency and pairing_notes(ordinary.path) == []


def test_operations_must_be_dense_and_paired(tmp_path: Path) -> None:
    op = Operation(1, 0, 0, "invoke", "poll", [["poll"]])
    with pytest.raises(OperationError, match="operation 0 of the history has index 1"):
        write_parquet([op], tmp_path / "a")
    with pytest.raises(PairingError, match="still outstanding"):
        write_parquet([Operation(0, 0, 0, "invoke", "poll", [["poll"]]),
                       Operation(1, 0, 0, "invoke", "poll", [["poll"]])], tmp_path / "b")  # fmt: skip


def test_existing_output_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "history.parquet"
    write_parquet([Operation(0, 0, "nemesis", "info", "kill", None)], out)
    summary = write_parquet([], out)
    assert summary.ops == 0
    assert all(table.num_rows == 0 for table in read_parquet_tables(out).values())
    with pytest.raises(FileNotFoundError, match=r"not a complete history\.parquet"):
        read_parquet_tables(tmp_path)
