"""OperationRecorder: invoke/complete pairs, process retirement, and the op shapes of docs/history.md.

Every test writes with a real HistoryWriter to a temporary file and reads it back with the
validating reader, then pairs it as the checkers will. Errors of squall's client reach the
recorder as the squall client module translates them (`send_error`, `commit_error`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from histories import HistoryWriter, Operation, pair_operations, read_history
from system_under_test.client import (
    BrokerUnavailableError,
    ConnectionLostError,
    NoOffsetForPartitionError,
    OffsetCommitError,
    ProduceError,
    ProducerClosedError,
    QueueFullError,
    RequestTimeoutError,
)
from system_under_test.errors import ErrorCode
from workloads import ClientBusyError, OperationRecorder, ProcessNumbers, WorkloadCounters
from workloads.client import Record, SendResult
from workloads.squall_client import commit_error, operation_error, send_error

Recorded = Callable[[], list[Operation]]


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[OperationRecorder, Recorded]]:
    """A recorder on a real history file, and a function that closes and reads it back."""
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    recorder = OperationRecorder(writer, counters=WorkloadCounters())

    def read() -> list[Operation]:
        writer.close()
        ops = read_history(path)
        pair_operations(ops, strict=True)  # raises PairingError if the process rules are broken
        return ops

    yield recorder, read
    writer.close()


def record(topic: str, partition: int, offset: int, value: bytes) -> Record:
    return Record(topic, partition, offset, value)


def completions(ops: list[Operation]) -> list[Operation]:
    return [op for op in ops if op.type != "invoke"]


# --- process numbering ---------------------------------------------------------------------


def test_ok_and_fail_keep_the_process_and_info_retires_it(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    other = recorder.new_client()
    first = client.process
    recorder.complete_send(recorder.invoke_send(client, "t-0", 1, acks=-1), SendResult(0))
    assert client.process == first
    definite = ProduceError(
        ErrorCode.NOT_ENOUGH_REPLICAS, "x", definite=True, topic="t", partition=0
    )
    recorder.complete_send(recorder.invoke_send(client, "t-0", 2, acks=-1), send_error(definite))
    assert client.process == first
    maybe = ProduceError(ErrorCode.REQUEST_TIMED_OUT, "x", definite=False, topic="t", partition=0)
    recorder.complete_send(recorder.invoke_send(client, "t-0", 3, acks=-1), send_error(maybe))
    retired = client.process
    assert retired not in (first, other.process)
    recorder.complete_send(recorder.invoke_send(client, "t-0", 4, acks=-1), SendResult(1))
    ops = read()
    processes = [op.process for op in ops]
    assert processes == [first] * 6 + [retired] * 2
    assert [op.type for op in completions(ops)] == ["ok", "fail", "info", "ok"]


def test_process_numbers_are_never_reused(history: Any) -> None:
    recorder, read = history
    clients = [recorder.new_client() for _ in range(3)]
    seen = {c.process for c in clients}
    for client in clients:
        recorder.record_crash(client, lambda: None)
        assert client.process not in seen
        seen.add(client.process)
    assert len(seen) == 6
    read()


def test_a_client_has_one_operation_in_flight(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    recorder.invoke_poll(client)
    with pytest.raises(ClientBusyError, match="one operation at a time"):
        recorder.invoke_send(client, "t-0", 1, acks=1)
    recorder.abandon_outstanding("stopped")
    read()


def test_numbering_can_start_after_processes_already_used(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as writer:
        recorder = OperationRecorder(writer, numbers=ProcessNumbers(start=40))
        assert recorder.new_client().process == 40


# --- sends ---------------------------------------------------------------------------------


def test_ok_send_shapes(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    pending = recorder.invoke_send(client, "t-1", 17, acks=-1, node="n2")
    recorder.complete_send(pending, SendResult(42))
    invoke, ok = read()
    assert invoke.value == [["send", "t-1", 17]]
    assert (invoke.acks, invoke.key, invoke.node) == (-1, "t-1", "n2")
    assert ok.type == "ok"
    assert ok.value == [["send", "t-1", [42, 17]]]
    assert (ok.acks, ok.key, ok.node) == (-1, "t-1", "n2")


def test_acks_zero_send_completes_without_an_offset(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    recorder.complete_send(recorder.invoke_send(client, "t-0", 5, acks=0), SendResult(None))
    _, ok = read()
    assert ok.type == "ok" and ok.value == [["send", "t-0", 5]] and ok.acks == 0


@pytest.mark.parametrize(
    ("error", "expected_type", "error_prefix"),
    [
        (
            ProduceError(
                ErrorCode.NOT_ENOUGH_REPLICAS, "isr 1", definite=True, topic="t", partition=0
            ),
            "fail",
            "NOT_ENOUGH_REPLICAS: ",
        ),
        (
            ProduceError(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                "isr shrank",
                definite=False,
                topic="t",
                partition=0,
            ),
            "info",
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND: ",
        ),
        (
            ProduceError(
                ErrorCode.NOT_LEADER_FOR_PARTITION, "moved", definite=False, topic="t", partition=0
            ),
            "info",
            "NOT_LEADER_FOR_PARTITION: ",
        ),
        (
            ProduceError(
                ErrorCode.NETWORK_EXCEPTION, "refused", definite=True, topic="t", partition=0
            ),
            "fail",
            "NETWORK_EXCEPTION: ",
        ),
        (QueueFullError("t", 0, "10000 records wait"), "fail", "QUEUE_FULL: "),
        (ProducerClosedError("closed"), "fail", "ProducerClosedError: "),
        (TimeoutError("no answer in 5 s"), "info", "TimeoutError: "),
        (RuntimeError("surprise"), "info", "RuntimeError: "),
    ],
)
def test_failed_send_types_and_shapes(
    history: Any, error: BaseException, expected_type: str, error_prefix: str
) -> None:
    recorder, read = history
    client = recorder.new_client()
    recorder.complete_send(recorder.invoke_send(client, "t-0", 9, acks=-1), send_error(error))
    _, done = read()
    assert done.type == expected_type
    assert done.value == [["send", "t-0", 9]]  # the value that may or may not be in the log
    assert done.error is not None and done.error.startswith(error_prefix)
    assert done.acks == -1 and done.key == "t-0"


# --- polls ---------------------------------------------------------------------------------


def test_ok_poll_groups_records_by_key_in_read_order(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    records = [
        record("t", 0, 5, b"10"),
        record("t", 1, 0, b"11   "),
        record("t", 0, 6, b"12"),
        record("t", 1, 1, b"not ours"),
    ]
    recorder.complete_poll(recorder.invoke_poll(client), records)
    recorder.complete_poll(recorder.invoke_poll(client), [])
    invoke, ok, _, empty = read()
    assert invoke.value == [["poll"]]
    assert ok.type == "ok"
    assert ok.value == [["poll", {"t-0": [[5, 10], [6, 12]], "t-1": [[0, 11], [1, "not ours"]]}]]
    assert empty.value == [["poll", {}]]


@pytest.mark.parametrize(
    "error",
    [
        BrokerUnavailableError("connection refused"),
        ConnectionLostError("reset", request_sent=True),
        RequestTimeoutError("no answer"),
        NoOffsetForPartitionError("no position"),
    ],
)
def test_failed_polls_are_fail_and_keep_the_process(history: Any, error: Exception) -> None:
    recorder, read = history
    client = recorder.new_client()
    process = client.process
    recorder.complete_poll(recorder.invoke_poll(client), operation_error(error))
    assert client.process == process
    _, done = read()
    assert done.type == "fail" and done.value == [["poll"]]
    assert done.error is not None and done.error.startswith(type(error).__name__)


# --- commits, assignment, crashes ----------------------------------------------------------


def test_commit_outcomes(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    offsets = {"t-0": 7, "t-1": 3}
    ok = recorder.record_commit(client, offsets, lambda: None)
    assert ok is not None and ok.type == "ok"

    def refused() -> None:
        raise commit_error(OffsetCommitError("nothing written", definite=True))

    def partial() -> None:
        raise commit_error(
            OffsetCommitError("lost session", definite=False, committed={("t", 0): 7})
        )

    def broken() -> None:
        raise commit_error(ConnectionError("zk gone"))

    failed = recorder.record_commit(client, offsets, refused)
    assert failed is not None and failed.type == "fail"
    before = client.process
    maybe = recorder.record_commit(client, offsets, partial)
    assert maybe is not None and maybe.type == "info" and client.process != before
    unknown = recorder.record_commit(client, offsets, broken)
    assert unknown is not None and unknown.type == "info"
    ops = read()
    assert all(op.value == offsets for op in ops)
    assert [op.type for op in completions(ops)] == ["ok", "fail", "info", "info"]
    assert completions(ops)[2].extra == {"committed": {"t-0": 7}}


def test_assign_and_subscribe_return_the_action_result_or_fail(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    op, result = recorder.record_assign(client, "subscribe", ["t-0", "t-1"], lambda: "consumer")
    assert result == "consumer" and op is not None and op.type == "ok"

    def unreachable() -> str:
        raise operation_error(BrokerUnavailableError("no broker answered"))

    op, result = recorder.record_assign(client, "assign", ["t-1"], unreachable)
    assert result is None and op is not None and op.type == "fail"
    ops = read()
    assert [(op.f, op.type, op.value) for op in ops] == [
        ("subscribe", "invoke", ["t-0", "t-1"]),
        ("subscribe", "ok", ["t-0", "t-1"]),
        ("assign", "invoke", ["t-1"]),
        ("assign", "fail", ["t-1"]),
    ]


def test_crash_is_info_and_retires_the_process_even_if_closing_fails(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    first = client.process

    def close() -> None:
        raise OSError("already gone")

    recorder.record_crash(client, close)
    assert client.process != first
    invoke, info = read()
    assert (invoke.f, invoke.value, info.type, info.value) == ("crash", None, "info", None)
    assert info.error == "OSError: already gone"


# --- abandoning, final reads, counters -----------------------------------------------------


def test_abandoned_operations_complete_as_info_and_late_completions_are_dropped(
    history: Any,
) -> None:
    recorder, read = history
    client = recorder.new_client()
    pending = recorder.invoke_send(client, "t-0", 1, acks=-1)
    assert recorder.abandon_outstanding("gave up") == 1
    assert recorder.complete_send(pending, SendResult(0)) is None
    assert recorder.outstanding() == []
    invoke, info = read()
    assert info.type == "info" and info.error == "gave up"
    assert info.value == invoke.value == [["send", "t-0", 1]]


def test_a_final_recorder_marks_every_operation_final(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as writer:
        recorder = OperationRecorder(writer, final=True)
        client = recorder.new_client()
        recorder.record_assign(client, "assign", ["t-0"], lambda: None)
        recorder.complete_poll(recorder.invoke_poll(client), [record("t", 0, 0, b"1")])
    ops = read_history(path)
    assert len(ops) == 4 and all(op.final is True for op in ops)


def test_counters_follow_the_recorded_operations(history: Any) -> None:
    recorder, read = history
    client = recorder.new_client()
    recorder.complete_send(recorder.invoke_send(client, "t-0", 1, acks=1), SendResult(0))
    recorder.complete_poll(
        recorder.invoke_poll(client), operation_error(RequestTimeoutError("slow"))
    )
    recorder.record_crash(client, lambda: None)
    recorder.invoke_poll(client)
    snapshot = recorder.counters.snapshot()
    assert (snapshot.invoked, snapshot.ok, snapshot.fail, snapshot.info) == (4, 1, 1, 1)
    assert snapshot.in_flight == 1
    assert snapshot.by_f["poll"] == {"invoke": 2, "ok": 0, "fail": 1, "info": 0}
    recorder.abandon_outstanding("end")
    read()
