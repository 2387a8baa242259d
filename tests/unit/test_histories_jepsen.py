"""Import of Jepsen Kafka-workload histories."""

from __future__ import annotations

from pathlib import Path

import pytest

from histories import (
    JepsenImportError,
    Leniency,
    Operation,
    pair_operations,
    read_parquet_tables,
    write_parquet,
)
from histories.jepsen import import_jepsen_history, jepsen_operation
from histories.parquet import pairing_notes

FIXTURE = Path(__file__).parent / "data" / "histories" / "jepsen_kafka_history.edn"
# Written by hand, as in Jepsen's own tests: process 0 goes on after its :info, and
# process 1 completes a send it never invoked.
HAND_WRITTEN_EDN = """\
[{:type :invoke, :f :send, :value [[:send 0 1]], :time 1000, :process 0}
 {:type :info, :f :send, :value [[:send 0 1]], :time 2000, :process 0, :error :timeout}
 {:type :invoke, :f :send, :value [[:send 0 2]], :time 3000, :process 0}
 {:type :ok, :f :send, :value [[:send 0 [1 2]]], :time 4000, :process 0}
 {:type :ok, :f :send, :value [[:send 0 [2 3]]], :time 5000, :process 1}
 {:type :invoke, :f :poll, :value [[:poll]], :time 6000, :process 0}
 {:type :ok, :f :poll, :value [[:poll {0 [[0 1] [1 2] [2 3]]}]], :time 7000, :process 0}]
"""


def test_fixture_imports_into_expected_operations() -> None:
    ops = import_jepsen_history(FIXTURE)
    assert len(ops) == 26
    assert [op.index for op in ops] == list(range(26))
    assert ops[0] == Operation(0, 10881167, 0, "invoke", "assign", [0, 1])
    assert ops[3] == Operation(3, 52312417, 1, "ok", "send", [["send", 0, [0, 1]]])
    assert ops[5].value == [["send", 1, [0, 2]], ["poll", {"0": [[0, 1]]}]]
    assert ops[5].f == "txn" and ops[4].value == [["send", 1, 2], ["poll"]]
    assert ops[6] == Operation(6, 90000451, "nemesis", "info", "start-partition", "majority")
    # sets become sorted lists, map keys strings
    assert ops[7].value == ["isolated", {"n1": ["n4", "n5"], "n4": ["n1", "n2", "n3"]}]
    assert ops[11].type == "info" and ops[11].process == 2
    assert ops[11].error == '["timeout","no response within 10000 ms"]'
    assert ops[13].error == "not-leader-for-partition"
    assert ops[14].value is None
    assert ops[18].f == "subscribe" and ops[18].value == [0, 1]
    assert ops[23].value == [["poll", {"0": [[0, 1], [1, 3], [2, 6]], "1": [[0, 2], [1, 5]]}]]
    assert ops[23].extra == {"debug": {"fetch-ms": 17}}
    assert (ops[25].f, ops[25].type) == ("crash", "info")
    assert all(not op.extra for op in ops if op.index != 23)  # :index matched: not kept
    # It pairs as Jepsen would, and converts.
    pairs = pair_operations(ops)
    assert len(pairs) == 11 and all(completion is not None for _, completion in pairs)


def test_fixture_converts_to_parquet_with_matching_keys(tmp_path: Path) -> None:
    summary = write_parquet(import_jepsen_history(FIXTURE), tmp_path / "history.parquet")
    mops = read_parquet_tables(summary.path)["mops"].to_pylist()
    acked = {(r["key"], r["value"]) for r in mops
             if r["f"] == "send" and r["type"] == "ok" and r["offset"] is not None}  # fmt: skip
    read = {(r["key"], r["value"]) for r in mops if r["f"] == "poll" and r["offset"] is not None}
    assert acked == {("0", "1"), ("1", "2"), ("1", "5"), ("0", "6")}
    assert acked <= read  # send keys (ints) and poll keys (strings) line up as text
    assert summary.events == 4


def test_single_vector_and_tagged_records(tmp_path: Path) -> None:
    path = tmp_path / "history.edn"
    path.write_text(
        "[#jepsen.history.Op{:index 5, :time 1, :type :invoke, :process 0, :f :poll, "
        ":value [[:poll]]}\n {:time 2, :type :ok, :process 0, :f :poll, "
        ":value [[:poll {}]]}\n {:time 3, :type :invoke, :process :nemesis, :f :kill, "
        ":value :primaries}]\n"
    )
    ops = import_jepsen_history(path)
    assert [op.index for op in ops] == [0, 1, 2]
    assert ops[0].extra == {"jepsen_index": 5}
    assert ops[1].value == [["poll", {}]]
    assert ops[2].type == "info" and ops[2].extra == {"jepsen_type": "invoke"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{:time 1, :type :okay, :process 0, :f :poll, :value nil}", ":type is 'okay'"),
        ("{:time 1, :type :ok, :process :client, :f :poll}", ":process is 'client'"),
        ("{:type :ok, :process 0, :f :poll}", "the op has no :time"),
        ("{:time 1, :type :ok, :process 0, :f :send, :value [[:send 1]]}", "micro-op 0"),
        ("[1]", "expected an op map, got int"),
    ],
)
def test_bad_ops_are_reported_with_their_place(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "history.edn"
    good = "{:time 0, :type :invoke, :process 9, :f :poll, :value [[:poll]]}"
    path.write_text(f"{good}\n{text}\n" if not text.startswith("[") else text)
    with pytest.raises(JepsenImportError) as caught:
        import_jepsen_history(path)
    assert message in str(caught.value)
    where = "line 1, column 2" if text.startswith("[") else "line 2, column 1"
    assert f"{path}, {where}:" in str(caught.value)


def test_jepsen_operation_converts_odd_values() -> None:
    op = jepsen_operation(
        {"type": "info", "process": "nemesis", "f": "kill", "time": 5.0,
         "value": {("n1", 2): 1.5, None: float("inf")}, "node": 3},
        index=0,
    )  # fmt: skip
    assert op.time == 5
    assert op.value == {'["n1",2]': 1.5, "null": "inf"}
    assert op.node == "3" and op.extra == {}


def test_hand_written_history_pairs_as_jepsen_and_notes_it(tmp_path: Path) -> None:
    path = tmp_path / "history.edn"
    path.write_text(HAND_WRITTEN_EDN)
    ops = import_jepsen_history(path)
    pairs = [(a.index, b.index if b else None) for a, b in pair_operations(ops)]
    assert pairs == [(0, 1), (2, 3), (4, 4), (5, 6)]  # 4 is its own invoke
    summary = write_parquet(ops, tmp_path / "history.parquet")
    assert summary.leniency == Leniency(4, (2, 3, 5, 6), 1, (4,))
    rows = read_parquet_tables(summary.path)["ops"].to_pylist()
    assert [(r["invoke_index"], r["complete_index"], r["latency_ns"]) for r in rows] == [
        (0, 1, 1000), (0, 1, 1000), (2, 3, 1000), (2, 3, 1000), (4, 4, 0), (5, 6, 1000),
        (5, 6, 1000)]  # fmt: skip
    # An EDN op is not a line of its own: its place is its index.
    assert pairing_notes(summary.path) == [
        "4 operations came from processes after their info completion (operation indices 2, "
        "3, 5, 6); each process went on, its next completion pairing with its next invoke, "
        "as Jepsen does",
        "1 completion had no invoke (operation index 4); it was taken as invoked at its own "
        "time, as Jepsen does",
    ]
