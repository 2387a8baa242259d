"""The durable writer and the validating reader of history.jsonl."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import histories.reader
from histories import (
    HistoryFormatError,
    HistoryWriter,
    HistoryWriterClosedError,
    Operation,
    OperationError,
    TruncatedHistoryWarning,
    iter_history,
    read_history,
    read_history_result,
    write_history,
)


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_round_trip_with_extra_fields(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        send = writer.invoke(0, "send", [["send", "t-0", 7]], acks=-1, trace={"span": [1, 2]})
        poll = writer.invoke(1, "poll", [["poll"]], final=True)
        writer.event("start-partition", {"n1": ["n2", "n3"]}, node="n1")
        writer.complete(send, "ok", [["send", "t-0", [0, 7]]])
        writer.complete(poll, "ok", [["poll", {"t-0": [[0, 7]]}]], note="é")
        writer.event("isr-change", {"key": "t-0", "isr": [1], "leader": 1}, process="sut")
    ops = read_history(path)
    assert [op.index for op in ops] == list(range(6))
    assert [op.type for op in ops] == ["invoke", "invoke", "info", "ok", "ok", "info"]
    # completions inherit the invocation's optional and extra fields
    assert ops[3].acks == -1 and ops[3].extra == {"trace": {"span": [1, 2]}}
    assert ops[4].final is True and ops[4].extra == {"note": "é"}
    assert ops[5].process == "sut"
    times = [op.time for op in ops]
    assert times == sorted(times) and times[0] >= 0
    # the file holds exactly what the operations say, one compact line each
    assert _lines(path) == [op.to_json_dict() for op in ops]


def test_given_time_is_kept_and_append_renumbers(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as writer:
        first = writer.write(0, "invoke", "poll", [["poll"]], time=42)
        moved = writer.append(Operation(17, 99, "nemesis", "info", "kill", None))
    assert first.time == 42
    assert (moved.index, moved.time) == (1, 99)
    assert [op.index for op in read_history(path)] == [0, 1]


def test_invalid_operations_are_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as writer:
        with pytest.raises(OperationError, match="field 'type' is 'done'"):
            writer.write(0, "done", "poll", [["poll"]])
        invoke = writer.invoke(0, "poll", [["poll"]])
        with pytest.raises(OperationError, match="expected one of ok, fail, info"):
            writer.complete(invoke, "invoke", None)
        with pytest.raises(OperationError, match="cannot be written as JSON"):
            writer.invoke(1, "poll", [["poll"]], blob=object())
        assert writer.next_index == 1
    assert len(read_history(path)) == 1
    with pytest.raises(HistoryWriterClosedError, match="is closed"):
        writer.invoke(2, "poll", [["poll"]])
    with pytest.raises(ValueError, match="fsync_every_lines is 0"):
        HistoryWriter(path, fsync_every_lines=0)


def test_concurrent_threads_get_dense_indices(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    per_thread = 300
    with HistoryWriter(path, fsync_every_lines=100, fsync_every_seconds=0.05) as writer:

        def client(process: int) -> None:
            for n in range(per_thread):
                invoke = writer.invoke(process, "send", [["send", "t-0", f"{process}-{n}"]])
                writer.complete(invoke, "ok", [["send", "t-0", [0, f"{process}-{n}"]]])

        threads = [threading.Thread(target=client, args=(p,)) for p in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    ops = read_history(path)
    assert [op.index for op in ops] == list(range(8 * 2 * per_thread))
    times = [op.time for op in ops]
    assert times == sorted(times)
    sent = {op.value[0][2] for op in ops if op.type == "invoke"}
    assert len(sent) == 8 * per_thread


_KILLED_WRITER = """
import sys
from histories import HistoryWriter
with HistoryWriter(sys.argv[1]) as writer:
    n = 0
    while True:
        invoke = writer.invoke(n % 4, "send", [["send", "t-0", n]], acks=-1, pad="x" * (n % 300))
        writer.complete(invoke, "ok", [["send", "t-0", [n, n]]])
        n += 1
        if n == 200:
            print("ready", flush=True)
"""


def test_sigkilled_writer_leaves_a_readable_history(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"ready"
    time.sleep(0.2)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    result = read_history_result(path, warn=False)
    ops = result.operations
    assert len(ops) >= 400
    assert [op.index for op in ops] == list(range(len(ops)))
    if result.truncated_tail is not None:  # killed inside write(2): at most that line is lost
        assert result.truncated_tail.line == len(ops) + 1
    # and the history can be continued, the torn line (if any) cut off with a warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = HistoryWriter(path)
    with writer:
        assert writer.next_index == len(ops)
        writer.event("kill", {"control": "restarted"})
    assert bool(caught) == (result.truncated_tail is not None)
    assert len(read_history(path)) == len(ops) + 1


def _write_lines(path: Path, lines: list[str], *, newline_at_end: bool = True) -> None:
    path.write_text("\n".join(lines) + ("\n" if newline_at_end else ""))


def _good(index: int, process: int = 0) -> str:
    op_type = "invoke" if index % 2 == 0 else "ok"
    value = [["poll"]] if op_type == "invoke" else [["poll", {"t-0": []}]]
    return json.dumps({"index": index, "time": index * 10, "process": process,
                       "type": op_type, "f": "poll", "value": value})  # fmt: skip


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ('{"index": 2, "time": 1, "process": 0', "not valid JSON: Expecting ',' delimiter"),
        ('{"index": 2, "time": 1, "process": 0, "type": "okay", "f": "poll", "value": null}',
         "field 'type' is 'okay', expected one of invoke, ok, fail, info"),
        ('{"index": 2, "time": 1, "process": 0, "type": "invoke", "value": null}',
         "missing field 'f'"),
        ('{"index": 3, "time": 1, "process": 0, "type": "invoke", "f": "x", "value": null}',
         "field 'index' is 3, expected 2: indices are dense from 0"),
        ('{"index": 1, "time": 1, "process": 0, "type": "invoke", "f": "x", "value": null}',
         "field 'index' is 1, expected 2"),
        ("", "empty line"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"index": 2} {"index": 3}', "not valid JSON: Extra data"),
    ],
)  # fmt: skip
def test_malformed_line_names_file_line_and_reason(
    tmp_path: Path, bad_line: str, reason: str
) -> None:
    path = tmp_path / "history.jsonl"
    _write_lines(path, [_good(0), _good(1), bad_line, _good(3)])
    with pytest.raises(HistoryFormatError) as caught:
        read_history(path)
    assert caught.value.line == 3
    assert caught.value.path == str(path)
    assert reason in caught.value.reason
    assert f"{path}, line 3: {reason}" in str(caught.value)


def test_errors_past_a_chunk_boundary_have_the_right_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(histories.reader, "_CHUNK_BYTES", 300)
    path = tmp_path / "history.jsonl"
    lines = [_good(i, process=i // 2) for i in range(40)]
    _write_lines(path, lines)
    assert [op.index for op in read_history(path)] == list(range(40))
    lines[33] = lines[33].replace('"ok"', '"okay"', 1)
    _write_lines(path, lines)
    with pytest.raises(HistoryFormatError) as caught:
        read_history(path)
    assert caught.value.line == 34
    assert "field 'type' is 'okay'" in caught.value.reason


def test_not_utf8_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes((_good(0) + "\n").encode() + b'{"index": 1, "f": "\xff"}\n')
    with pytest.raises(HistoryFormatError, match="line 2: not UTF-8"):
        read_history(path)


def test_torn_last_line_is_reported_and_ignored(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    _write_lines(path, [_good(0), _good(1), '{"index": 2, "time": 20, "pro'],
                 newline_at_end=False)  # fmt: skip
    with pytest.warns(TruncatedHistoryWarning, match="line 3: the last line is torn"):
        result = read_history_result(path)
    assert [op.index for op in result.operations] == [0, 1]
    assert result.truncated_tail is not None
    assert result.truncated_tail.line == 3
    assert result.truncated_tail.byte_offset == len(_good(0)) + len(_good(1)) + 2
    reader = iter_history(path, warn=False)
    assert len(list(reader)) == 2 and reader.truncated_tail == result.truncated_tail


def test_complete_last_line_without_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    _write_lines(path, [_good(0), _good(1)], newline_at_end=False)
    result = read_history_result(path)
    assert len(result.operations) == 2 and result.truncated_tail is None
    # ... but one that is whole JSON and not an operation is an error, not a torn line
    _write_lines(path, [_good(0), '{"index": 1}'], newline_at_end=False)
    with pytest.raises(HistoryFormatError, match="line 2: missing field 'time'"):
        read_history(path)


def test_torn_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    _write_lines(path, [_good(0), '{"index": 1, "ti', _good(1)])
    with pytest.raises(HistoryFormatError, match="line 2: not valid JSON"):
        read_history(path)


def test_reopening_continues_after_the_last_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        invoke = writer.invoke(0, "poll", [["poll"]], time=1_000_000)
    with HistoryWriter(path) as writer:
        assert writer.next_index == 1
        completion = writer.complete(invoke, "ok", [["poll", {}]])
    assert completion.index == 1 and completion.time >= 1_000_000
    # a torn tail is cut off before appending
    with path.open("ab") as fh:
        fh.write(b'{"index": 2, "time"')
    with pytest.warns(TruncatedHistoryWarning, match="cut off before appending"):
        writer = HistoryWriter(path)
    with writer:
        writer.event("kill", None)
    assert [op.index for op in read_history(path)] == [0, 1, 2]
    # a whole last line without a newline is kept, and a newline added
    with path.open("ab") as fh:
        fh.write(_good(3).encode())
    with HistoryWriter(path) as writer:
        writer.event("start", None)
    assert [op.index for op in read_history(path)] == [0, 1, 2, 3, 4]


def test_reopening_a_history_whose_last_line_is_corrupt_fails(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    _write_lines(path, [_good(0), '{"index": 1, "type": "nope"}'])
    with pytest.raises(HistoryFormatError, match="line 2: the last line is not a valid"):
        HistoryWriter(path)


def test_write_history_is_atomic_and_checks_density(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    ops = [Operation(0, 0, 0, "invoke", "poll", [["poll"]]),
           Operation(1, 5, 0, "fail", "poll", [["poll"]], error="boom")]  # fmt: skip
    assert write_history(path, ops) == 2
    assert read_history(path) == ops
    with pytest.raises(OperationError, match="operation 1 of the history has index 5"):
        write_history(path, [ops[0], ops[1].with_index(5)])
    assert read_history(path) == ops  # the old file is untouched
    assert sorted(os.listdir(tmp_path)) == ["history.jsonl"]


def test_first_error_wins_even_before_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes((_good(0) + "\n" + _good(2) + "\n").encode() + b'{"index": 2, "f": "\xff"}\n')
    with pytest.raises(HistoryFormatError, match="line 2: field 'index' is 2, expected 1"):
        read_history(path)
