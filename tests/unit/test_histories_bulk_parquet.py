"""The bulk Parquet converter: the exact converter's tables, or nothing and a reason."""

from __future__ import annotations

import importlib
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histories import (
    HistoryFormatError,
    HistoryWriter,
    Operation,
    TruncatedHistoryWarning,
    read_parquet_tables,
    write_parquet,
)
from histories.bulk_parquet import BulkOutcome, write_parquet_bulk
from histories.jsonline import encode_line
from histories.operation import make_operation
from tests.unit.test_histories_parquet import expected_leniency, paired_histories

SMALL_BLOCKS = 4096  # many blocks: pairing across them, invokes completed blocks later


def assert_same_tables(source: Path, **options: Any) -> BulkOutcome:
    """Convert with both converters and require identical tables and summaries."""
    with tempfile.TemporaryDirectory() as tmp:
        bulk_dir, exact_dir = Path(tmp) / "bulk", Path(tmp) / "exact"
        with warnings.catch_warnings(record=True) as bulk_warnings:
            warnings.simplefilter("always")
            outcome = write_parquet_bulk(source, bulk_dir, **options)
        assert outcome.fallback is None
        with warnings.catch_warnings(record=True) as exact_warnings:
            warnings.simplefilter("always")
            exact = write_parquet(source, exact_dir)
        assert [str(w.message) for w in bulk_warnings] == [str(w.message) for w in exact_warnings]
        assert outcome.summary is not None
        assert (outcome.summary.path, outcome.summary.truncated_tail) == (
            bulk_dir, exact.truncated_tail)  # fmt: skip
        assert outcome.summary.leniency == exact.leniency
        bulk_tables, exact_tables = read_parquet_tables(bulk_dir), read_parquet_tables(exact_dir)
        for name, table in exact_tables.items():
            assert bulk_tables[name].schema.equals(table.schema, check_metadata=True), name
            assert bulk_tables[name].equals(table, check_metadata=True), (
                name, _first_difference(bulk_tables[name].to_pylist(), table.to_pylist()))  # fmt: skip
            assert getattr(outcome.summary, name) == getattr(exact, name) == table.num_rows
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["bulk", "exact"]
    return outcome


def _first_difference(got: list[Any], expected: list[Any]) -> Any:
    for position, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            return position, a, b
    return len(got), len(expected)


def assert_falls_back(source: Path, tmp_path: Path, reason: str = "") -> None:
    out = tmp_path / "history.parquet"
    outcome = write_parquet_bulk(source, out, block_bytes=SMALL_BLOCKS)
    assert outcome.summary is None and outcome.fallback is not None
    assert reason in outcome.fallback
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def line(index: int, process: Any, op_type: str, f: str, value: Any, **fields: Any) -> str:
    record = {"index": index, "time": 10 * index, "process": process, "type": op_type, "f": f,
              "value": value, **fields}  # fmt: skip
    return json.dumps(record, separators=(",", ":"))


# ---------------------------------------------------------------- equal tables


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bench_histories_convert_exactly(tmp_path: Path, seed: int) -> None:
    try:
        check_scale = importlib.import_module("bench.check_scale")
    except ImportError as err:  # it imports checkers, which may be mid-change elsewhere
        pytest.skip(f"bench.check_scale does not import: {err}")
    source = tmp_path / "history.jsonl"
    check_scale.SyntheticHistory(source, 20_000, seed).run(2)
    lines = source.read_bytes().count(b"\n")
    outcome = assert_same_tables(source)
    assert outcome.per_line < lines // 50  # only assign, subscribe and events
    assert_same_tables(source, block_bytes=1 << 16)


def _every_shape(path: Path) -> None:
    """Lines of every kind, tier 1 and tier 2, written by the HistoryWriter."""
    with HistoryWriter(path, clock=iter(range(0, 10**9, 7)).__next__) as writer:
        send = writer.invoke(0, "send", [["send", "t-0", 1], ["send", 5, "v"]], acks=-1,
                             key="t-0", node="n1")  # fmt: skip
        poll = writer.invoke(1, "poll", [["poll"]])
        writer.complete(send, "ok", [["send", "t-0", [0, 1]], ["send", 5, "v"]])
        writer.event("kill", {"n1": "killed"})
        strings = ["a\"b", "back\\slash", "tab\tnew\nline", "é", "😀", "\x7f\x01", "[,]{:}",
                   "/", "", "\ud800"]  # fmt: skip
        for n, text in enumerate(strings):
            invoke = writer.invoke(2, "send", [["send", "s-1", text]], key=n)
            writer.complete(invoke, "ok", [["send", "s-1", [n, text]]])
        for results in ({}, {"t-0": []}, {"t-0": [[0, 1], [1, -3], [2, 2**70]], "7": []}):
            invoke = writer.invoke(2, "poll", [["poll"]], final=True)
            writer.complete(invoke, "ok", [["poll", results]], final=True)
        writer.complete(poll, "ok", [["poll", {"t-0": [[0, 1], [1, "x"]], "5": []}]])
        txn = writer.invoke(3, "txn", [["send", 1, -1], ["poll"], ["send", "k", "x"]])
        writer.complete(txn, "info", None, error="timeout")
        txn = writer.invoke(4, "txn", [["poll"], ["send", 0, 0]])
        writer.complete(txn, "ok", [["poll", {"0": [[9, 0]]}], ["send", 0, [10, 0]]])
        for f, value in (("assign", ["t-0", 5]), ("subscribe", ["t-1"]),
                         ("commit", {"t-0": 3, "t-1": 0}), ("commit", {})):  # fmt: skip
            invoke = writer.invoke(5, f, value)
            writer.complete(invoke, "ok", value)
        commit = writer.invoke(5, "commit", {"t-0": 4})
        writer.complete(commit, "fail", None, error='said "no"')
        crash = writer.invoke(5, "crash", None)
        writer.complete(crash, "info", None)
        poll = writer.invoke(6, "poll", [["poll"]])
        writer.complete(poll, "fail", [["poll"]], error="not leader", node="n2")
        send = writer.invoke(6, "send", [["send", "t-1", 2]], acks=0)
        writer.complete(send, "ok", [["send", "t-1", 2]], acks=0)
        writer.event("leader-election", {"key": "t-0", "leader": 2, "leader_epoch": 3,
                     "isr": [2, 3], "previous_leader": 1, "unclean": True}, process="sut")  # fmt: skip
        writer.event("isr-change", {"key": 7, "isr": [1], "leader": None}, process="sut")
        writer.event("start-partition", {"n1": ["n2", "n3"]})
        invoke = writer.invoke(7, "send", [["send", "t-2", 3]], trace={"id": [1]})  # extra field
        writer.complete(invoke, "fail", [["send", "t-2", 3]], error="")
        writer.invoke(8, "poll", [["poll"]])  # pending
        writer.invoke(9, "send", [["send", "t-1", 9]], acks=1, key="t-1")  # pending


@pytest.mark.parametrize("block_bytes", [64, SMALL_BLOCKS, 1 << 24])
def test_every_line_shape_converts_exactly(tmp_path: Path, block_bytes: int) -> None:
    source = tmp_path / "history.jsonl"
    _every_shape(source)
    outcome = assert_same_tables(source, block_bytes=block_bytes)
    # Tier 2: assign, subscribe, crash, events, the extra field, and the strings holding a
    # quote or brackets (an escaped quote, JSON structure).
    assert outcome.per_line == 17


def raw_line(index: int, process: int, op_type: str, f: str, value: str, tail: str = "") -> str:
    """A line spelt as given: `value` and the optional fields `tail` are JSON text."""
    return (
        f'{{"index":{index},"time":{index},"process":{process},"type":"{op_type}","f":"{f}",'
        f'"value":{value}{tail}}}'
    )


ODD_COMPLETIONS = [  # valid, but not as the writer spells them
    ("poll", '[["poll",{"a":[[0,1]],"b":[],"a":[[1,2]]}]]', ""),  # a key twice
    ("commit", '{"a":1,"a":2}', ""),
    ("send", '[["send","k",-0]]', ""),
    ("send", '[["send","k",[0,"\\/"]]]', ""),
    ("send", '[["send","k",[0,"\\u00E9"]]]', ""),
    ("send", '[["send","k",[0,"\\u20AC"]]]', ""),
    ("send", '[["send","k",[0,"\\u0041"]]]', ""),
    ("send", '[["send","k",[0,"\\u000a"]]]', ""),
    ("send", '[["send","k",[0,"a\\"b"]]]', ""),  # a quote: tier 2 by design
    ("send", '[["send","\\u006b",[0,1]]]', ""),
    ("send", '[["send","k",[0,1]]]', ',"extra":[1]'),
    ("send", '[["send","k",[0,1]]]', ',"key":"k","acks":-1'),  # fields out of order
    ("send", '[["send","k",[0,1]]]', ',"node":"n\\u0031"'),
    ("send", '[["send","k",[9223372036854775807,1]]]', ""),  # 19 digits
    ("send", '[[ "send","k",[0,1]]]', ""),
]
INVOKES = {"send": '[["send","k",1]]', "poll": '[["poll"]]', "commit": '{"a":1}'}


def test_odd_spellings_go_to_tier_two_and_convert_exactly(tmp_path: Path) -> None:
    lines = []
    for process, (f, value, tail) in enumerate(ODD_COMPLETIONS):
        lines += [raw_line(2 * process, process, "invoke", f, INVOKES[f]),
                  raw_line(2 * process + 1, process, "ok", f, value, tail)]  # fmt: skip
    lines += [
        raw_line(len(lines), 99, "invoke", "poll", '[["poll"]]').replace("{", "{ ", 1),
        raw_line(len(lines) + 1, 99, "ok", "poll", '[["poll",{}]]') + "\r",  # CRLF
    ]
    outcome = assert_same_tables(write_lines(tmp_path / "history.jsonl", lines))
    assert outcome.per_line == len(ODD_COMPLETIONS) + 2  # the odd lines, and no other


def test_empty_history(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    source.write_bytes(b"")
    outcome = assert_same_tables(source)
    assert outcome.summary is not None and outcome.summary.ops == 0


def test_torn_last_line_is_ignored_with_the_exact_warning(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    _every_shape(source)
    with source.open("ab") as fh:
        fh.write(b'{"index":99,"ti')
    outcome = assert_same_tables(source, block_bytes=SMALL_BLOCKS)
    assert outcome.summary is not None and outcome.summary.truncated_tail is not None
    with pytest.warns(TruncatedHistoryWarning, match="the last line is torn"):
        write_parquet_bulk(source, tmp_path / "out")


def test_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    source.write_text(line(0, 0, "invoke", "poll", [["poll"]]) + "\n"
                      + line(1, 0, "ok", "poll", [["poll", {"k": [[0, 1]]}]]))  # fmt: skip
    outcome = assert_same_tables(source)
    assert outcome.summary is not None and outcome.summary.mops == 2


tier1_keys = st.one_of(
    st.sampled_from(["t-0", "t-1", "q 3", "acks", ""]), st.integers(-3, 2**64).map(str)
)
tier1_values = st.one_of(
    st.integers(-(2**70), 2**70), st.text(max_size=4), st.sampled_from(["v", "a,b", "[1]"])
)


@st.composite
def client_histories(draw: st.DrawFn, lenient: bool = False) -> list[Operation]:
    """Mostly tier-1 histories: sends, polls, txns and commits, with optional fields.

    `lenient`: a process may go on after its info, and complete what it never invoked.
    """
    ops: list[Operation] = []
    now = draw(st.integers(-(10**6), 10**6))
    for process in range(draw(st.integers(1, 4))):
        for _ in range(draw(st.integers(0, 5))):
            f = draw(st.sampled_from(["send", "poll", "txn", "commit"]))
            op_type = draw(st.sampled_from(["ok", "ok", "fail", "info"]))
            records = st.lists(st.tuples(st.integers(0, 2**63 - 1), tier1_values).map(list),
                               max_size=3)  # fmt: skip
            results = st.dictionaries(tier1_keys, records, max_size=3)
            sent = st.tuples(tier1_keys | st.integers(0, 9), tier1_values)
            if f == "commit":
                invoke = done = draw(st.dictionaries(tier1_keys, st.integers(0, 2**63 - 1)))
            else:
                kinds = ["send"] if f == "send" else ["poll"] if f == "poll" else ["send", "poll"]
                mops = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3))
                invoke, done = [], []
                for kind in mops:
                    if kind == "send":
                        key, value = draw(sent)
                        invoke.append(["send", key, value])
                        offset = draw(st.none() | st.integers(0, 2**63 - 1))
                        done.append(["send", key, value if offset is None else [offset, value]])
                    else:
                        invoke.append(["poll"])
                        done.append(["poll", draw(results)])
            if op_type != "ok" and draw(st.booleans()):
                done = None
            fields = draw(st.fixed_dictionaries({}, optional={
                "error": st.sampled_from(["timeout", 'a "quoted" [error]', "é", ""]),
                "node": st.just("n1"), "acks": st.sampled_from([-1, 0, 1]),
                "final": st.booleans(), "key": tier1_keys | st.integers(-5, 5)}))  # fmt: skip
            steps = [("invoke", invoke), (op_type, done)]
            if lenient and draw(st.integers(0, 3)) == 0:
                del steps[0]
            for kind, value in steps:
                now += draw(st.integers(0, 10**9))
                ops.append(make_operation(len(ops), now, process, kind, f, value, **fields))
            if op_type == "info" and not (lenient and draw(st.booleans())):
                break
    return ops


def _history_file(ops: list[Operation]) -> Path:
    path = Path(tempfile.mkdtemp()) / "history.jsonl"
    path.write_bytes(b"".join(encode_line(op) for op in ops))
    return path


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(client_histories(), paired_histories(), client_histories(lenient=True),
              paired_histories(lenient=True)),
    st.sampled_from([64, 1 << 20]),
)  # fmt: skip
def test_generated_histories_convert_exactly(ops: list[Operation], block_bytes: int) -> None:
    # Interleave the processes' operations the way a run does: by time, renumbered.
    ops = [op.with_index(i) for i, op in enumerate(sorted(ops, key=lambda op: op.time))]
    source = _history_file(ops)
    try:
        outcome = assert_same_tables(source, block_bytes=block_bytes)
        assert outcome.summary is not None
        assert outcome.summary.leniency == expected_leniency(ops)
    finally:
        source.unlink()
        source.parent.rmdir()


# ---------------------------------------------------------------- fallback


def _valid_lines(start: int = 0) -> list[str]:
    """200 lines of sends from index `start`, each by a process of its own."""
    lines = []
    for i in range(start, start + 200, 2):
        lines.append(line(i, 1000 + i, "invoke", "send", [["send", "k", i]]))
        lines.append(line(i + 1, 1000 + i, "ok", "send", [["send", "k", [i, i]]]))
    return lines


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        ('{"index":200,"time":1,"process":', "not a valid operation"),
        (line(201, 900, "invoke", "poll", [["poll"]]), "index 201, expected 200"),
        (line(200, 1201, "invoke", "poll", [["poll"]]), "pairing"),  # 1201 invokes at 201
        (line(200, "sut", "info", "leader-election", {"key": "k", "isr": "all"}), "isr"),
        (line(200, 5, "ok", "send", [["send", "k", [1.5, 2]]]), "not a valid operation"),
        (line(200, 5, "invoke", "poll", [["poll"]], acks=2), "acks"),
        (line(200, 5, "invoke", "poll", [["poll", {}]]), "not a valid operation"),
        (line(200, 5, "invoke", "send", [["send", "k", [1, 2]]]), "not a valid operation"),
        (line(200, 5, "ok", "poll", [["poll"]]), "not a valid operation"),
        (line(200, 5, "invoke", "send", None), "not a valid operation"),
        (line(200, 5, "ok", "send", None), "not a valid operation"),
        (line(200, 5, "invoke", "send", [["poll"]]), "not a valid operation"),
        (line(200, 5, "invoke", "crash", float("nan")), "JSON"),
        (
            '{"index":200,"time":"0","process":5,"type":"invoke","f":"poll","value":[["poll"]]}',
            "time",
        ),
        ("", "not a valid operation"),
    ],
)
def test_invalid_histories_fall_back_with_nothing_written(
    tmp_path: Path, broken: str, reason: str
) -> None:
    lines = [*_valid_lines(), broken, *_valid_lines(201)]
    source = write_lines(tmp_path / "history.jsonl", lines)
    assert_falls_back(source, tmp_path, reason)
    with pytest.raises((HistoryFormatError, ValueError)):
        write_parquet(source, tmp_path / "exact")


def _padded(lines: list[str], spread: bool) -> list[str]:
    """`lines` from index 200 among valid lines, the last one in the same block as the
    others, or (`spread`) 200 lines and blocks later."""
    before, last = lines[:-1], lines[-1]
    return [
        *_valid_lines(),
        *(_shifted(text, 200) for text in before),
        *(_valid_lines(200 + len(before)) if spread else []),
        _shifted(last, 200 + 200 * spread),
    ]


def test_pairing_violations_fall_back(tmp_path: Path) -> None:
    poll = [["poll"]]
    cases = {
        "second invoke": [line(0, 1, "invoke", "poll", poll), line(1, 1, "invoke", "poll", poll)],
        "second invoke after info": [
            line(0, 1, "invoke", "poll", poll), line(1, 1, "info", "poll", None),
            line(2, 1, "invoke", "poll", poll), line(3, 1, "invoke", "poll", poll)],
        "another f": [line(0, 1, "invoke", "poll", poll),
                      line(1, 1, "ok", "send", [["send", "k", 1]])],
    }  # fmt: skip
    for name, lines in cases.items():
        for spread in (False, True):
            case_dir = tmp_path / f"{name.replace(' ', '-')}-{spread}"
            case_dir.mkdir()
            source = write_lines(case_dir / "history.jsonl", _padded(lines, spread))
            assert_falls_back(source, case_dir, "pairing")
            with pytest.raises(HistoryFormatError):
                write_parquet(source, case_dir / "exact")


def test_jepsen_leniency_converts_exactly(tmp_path: Path) -> None:
    poll, polled = [["poll"]], [["poll", {"k": [[0, 0]]}]]
    cases = {
        "completion without invoke": ([line(0, 1, "ok", "poll", polled)], (0, 1)),
        "completions without invoke": (
            [line(0, 1, "fail", "send", [["send", "k", 5]]), line(1, 1, "info", "poll", None)],
            (0, 2)),
        "after info": ([line(0, 1, "invoke", "poll", poll), line(1, 1, "info", "poll", None),
                        line(2, 1, "invoke", "poll", poll)], (1, 0)),
        "after info, completed": (
            [line(0, 1, "invoke", "poll", poll), line(1, 1, "info", "poll", None),
             line(2, 1, "invoke", "poll", poll), line(3, 1, "ok", "poll", polled)], (2, 0)),
        "after info, uninvoked": (
            [line(0, 1, "invoke", "poll", poll), line(1, 1, "info", "poll", None),
             line(2, 1, "ok", "poll", polled)], (1, 1)),
    }  # fmt: skip
    for name, (lines, (after_info, uninvoked)) in cases.items():
        for spread in (False, True):
            source = tmp_path / f"{name.replace(' ', '-')}-{spread}.jsonl"
            write_lines(source, _padded(lines, spread))
            outcome = assert_same_tables(source, block_bytes=SMALL_BLOCKS)
            assert outcome.summary is not None
            leniency = outcome.summary.leniency
            assert (leniency.after_info, leniency.uninvoked) == (after_info, uninvoked), name
            last = 200 + len(lines) - 1 + 200 * spread
            assert last in leniency.after_info_first + leniency.uninvoked_first


def _shifted(text: str, by: int) -> str:
    """A line with its index moved on by `by`."""
    record = json.loads(text)
    record["index"] += by
    return json.dumps(record, separators=(",", ":"))


def test_existing_output_is_kept_on_fallback_and_replaced_on_success(tmp_path: Path) -> None:
    out = tmp_path / "history.parquet"
    out.mkdir()
    (out / "marker").write_text("old")
    broken = write_lines(tmp_path / "broken.jsonl", ["{"])
    assert write_parquet_bulk(broken, out).fallback is not None
    assert (out / "marker").exists()
    good = write_lines(tmp_path / "good.jsonl", _valid_lines())
    assert write_parquet_bulk(good, out).fallback is None
    assert sorted(p.name for p in out.iterdir()) == [
        "assign.parquet", "events.parquet", "mops.parquet", "ops.parquet"]  # fmt: skip


def test_assign_positions_convert_exactly(tmp_path: Path) -> None:
    """An assign's `positions` become the assign table's `positions`, parallel to its keys,
    alike in both converters; a commit, or an assign without them, has none."""
    lines = [
        raw_line(0, 1, "invoke", "assign", '["a","b"]'),
        raw_line(1, 1, "ok", "assign", '["a","b"]', ',"positions":{"a":4,"c":1}'),
        raw_line(2, 2, "invoke", "subscribe", '["a",5]'),
        raw_line(3, 2, "ok", "subscribe", '["a",5]', ',"positions":{"5":7,"a":"x"}'),
        raw_line(4, 1, "invoke", "commit", '{"a":5}'),
        raw_line(5, 1, "ok", "commit", '{"a":5}'),
    ]
    source = write_lines(tmp_path / "history.jsonl", lines)
    assert_same_tables(source, block_bytes=SMALL_BLOCKS)
    write_parquet(source, tmp_path / "exact")
    assign = read_parquet_tables(tmp_path / "exact")["assign"].to_pylist()
    assert [row["positions"] for row in assign] == [None, [4, None], None, [None, 7], None, None]
