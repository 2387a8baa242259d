"""ProducerWorker against a fake producer: sync and async sends, process per in-flight send."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

import workloads.squall_client
from histories import HistoryWriter, Operation, pair_operations, read_history
from system_under_test.client import ProduceError, SendFuture
from system_under_test.client.batch import ProduceBatch
from system_under_test.errors import ErrorCode
from workloads import (
    AcknowledgedSends,
    OperationRecorder,
    OpMix,
    ProducerWorker,
    RateLimiter,
    SquallClientFactory,
    ValueSequence,
    WorkloadSpec,
)
from workloads.spec import ProducerMode

SENDS = 60


class FakeProducer:
    """Completes sends from its own thread, like the async producer's I/O thread; every
    seventh send fails indeterminately. Stops the worker after SENDS sends (by all the
    producers a worker opened)."""

    stop: threading.Event
    peak_in_flight = 0
    total_sent = 0

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: str,
        config: Mapping[str, object],
        client_id: str,
    ) -> None:
        self.mode = mode
        self.sent = 0
        self.offsets: dict[int, int] = {}
        self.waiting: list[ProduceBatch] = []
        self.lock = threading.Lock()
        self.closed = False
        self.io = threading.Thread(target=self._complete_later, daemon=True)
        self.io.start()

    def send(self, topic: str, value: bytes, *, partition: int) -> SendFuture:
        batch = ProduceBatch(topic, partition, time.monotonic())
        batch.items.append((None, value, 0))
        with self.lock:
            self.sent += 1
            FakeProducer.total_sent += 1
            if FakeProducer.total_sent >= SENDS:
                self.stop.set()
            if self.sent % 7 == 0:
                batch.fail(
                    ProduceError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        "no answer",
                        definite=False,
                        topic=topic,
                        partition=partition,
                    )
                )
            else:
                self.waiting.append(batch)
            FakeProducer.peak_in_flight = max(FakeProducer.peak_in_flight, len(self.waiting))
        if self.mode == "sync":
            self._drain()
        return SendFuture(batch, 0)

    def _drain(self) -> None:
        with self.lock:
            batches, self.waiting = self.waiting, []
        for batch in batches:
            offset = self.offsets.get(batch.partition, 0)
            self.offsets[batch.partition] = offset + 1
            batch.complete(offset)

    def _complete_later(self) -> None:
        while not self.closed:
            time.sleep(0.002)
            self._drain()

    def flush(self, timeout: float | None = None) -> None:
        self._drain()

    def close(self, timeout: float | None = None) -> None:
        self.closed = True
        self.io.join()  # nothing completes after close returns
        self._drain()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sends_are_recorded_with_offsets_and_a_process_per_in_flight_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: ProducerMode
) -> None:
    monkeypatch.setattr(workloads.squall_client, "Producer", FakeProducer)
    FakeProducer.peak_in_flight = 0
    FakeProducer.total_sent = 0
    stop = threading.Event()
    FakeProducer.stop = stop
    spec = WorkloadSpec(
        topic="t",
        partitions=3,
        producer_mode=mode,
        in_flight=4,
        consumers=0,
        acks=-1,
        mix=OpMix(send=1, poll=0, commit=0, crash=0),
    )
    path = tmp_path / "history.jsonl"
    acknowledged = AcknowledgedSends()
    failures: list[BaseException] = []
    with HistoryWriter(path) as writer:
        worker = ProducerWorker(
            0,
            spec,
            "127.0.0.1:9092",
            client_factory=SquallClientFactory(),
            recorder=OperationRecorder(writer),
            values=ValueSequence(),
            limiter=RateLimiter(None),
            acknowledged=acknowledged,
            leaders=None,
            rng=random.Random(2),
            stop=stop,
            on_failure=failures.append,
        )
        worker.run()
    assert failures == []
    ops = read_history(path)
    pairs = pair_operations(ops, strict=True)
    assert all(done is not None for _, done in pairs)
    sends = [(invoke, done) for invoke, done in pairs if done is not None]
    assert len(sends) >= SENDS
    values = [invoke.value[0][2] for invoke, _ in sends]
    assert len(set(values)) == len(values)
    ok = [done for _, done in sends if done.type == "ok"]
    info = [done for _, done in sends if done.type == "info"]
    assert info and all((done.error or "").startswith("REQUEST_TIMED_OUT") for done in info)
    assert all(done.value[0][2][0] >= 0 and done.acks == -1 for done in ok)
    assert acknowledged.count() == len(ok)
    # Offsets are dense per key: every acknowledged send is accounted for.
    for key in spec.keys:
        assert sorted(acknowledged.offsets(key)) == list(range(len(acknowledged.offsets(key))))
    busy = _max_concurrent(ops)
    if mode == "sync":
        assert busy == 1
    else:
        # The limit is per partition: up to in_flight sends of each key at once.
        assert 1 < busy <= spec.in_flight * spec.partitions
        assert FakeProducer.peak_in_flight <= spec.in_flight * spec.partitions
        for key in spec.keys:
            assert _max_concurrent([op for op in ops if op.key == key]) <= spec.in_flight


def _max_concurrent(ops: list[Operation]) -> int:
    in_flight = peak = 0
    for op in ops:
        in_flight += 1 if op.type == "invoke" else -1
        peak = max(peak, in_flight)
    return peak


class HoldingProducer:
    """Keeps every send in flight until `acknowledge`; `close` fails what is left, as squall's
    producer does (definitely, for records it never sent)."""

    opened: list[HoldingProducer]

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: str,
        config: Mapping[str, object],
        client_id: str,
    ) -> None:
        self.client_id = client_id
        self.config = dict(config)
        self.waiting: list[ProduceBatch] = []
        self.closed_with: float | None = None
        self.flushed = False
        HoldingProducer.opened.append(self)

    def send(self, topic: str, value: bytes, *, partition: int) -> SendFuture:
        batch = ProduceBatch(topic, partition, time.monotonic())
        batch.items.append((None, value, 0))
        self.waiting.append(batch)
        return SendFuture(batch, 0)

    def acknowledge(self, offset: int) -> None:
        self.waiting.pop(0).complete(offset)

    def flush(self, timeout: float | None = None) -> None:
        self.flushed = True

    def close(self, timeout: float | None = None) -> None:
        self.closed_with = timeout
        for batch in self.waiting:
            batch.fail_with(ErrorCode.REQUEST_TIMED_OUT, "the producer was closed")
        self.waiting = []


def test_a_producer_crash_ends_its_sends_in_flight_as_info_and_a_new_client_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workloads.squall_client, "Producer", HoldingProducer)
    HoldingProducer.opened = []
    spec = WorkloadSpec(
        topic="t",
        partitions=1,
        in_flight=4,
        consumers=0,
        idempotent_producers=0,
        mix=OpMix(poll=0, commit=0, crash=0),
    )
    assert spec.producer_mode == "async"
    path = tmp_path / "history.jsonl"
    acknowledged = AcknowledgedSends()
    with HistoryWriter(path) as writer:
        worker = ProducerWorker(
            0,
            spec,
            "127.0.0.1:9092",
            client_factory=SquallClientFactory(),
            recorder=OperationRecorder(writer),
            values=ValueSequence(),
            limiter=RateLimiter(None),
            acknowledged=acknowledged,
            leaders=None,
            rng=random.Random(3),
            stop=threading.Event(),
            on_failure=lambda err: pytest.fail(f"worker failed: {err}"),
        )
        session = worker.open()
        for _ in range(3):
            assert worker.send(session)
        first = HoldingProducer.opened[0]
        first.acknowledge(0)  # one send lands before the crash
        worker.crash()
        assert worker.session is None
        # Closed at once, without flushing; its late failures change nothing recorded.
        assert first.closed_with == 0.0 and not first.flushed
        assert first.config["message.send.max.retries"] == 0
        second = worker.open()
        assert worker.send(second)
        HoldingProducer.opened[1].acknowledge(1)
    assert [p.client_id for p in HoldingProducer.opened] == [
        "squall-producer-0",
        "squall-producer-0.1",
    ]
    ops = read_history(path)
    pair_operations(ops, strict=True)  # one op at a time per process, nothing after an info
    rows = [(op.process, op.type, op.f, op.value, op.error) for op in ops]
    sends = [(p, v[0][2]) for p, t, f, v, _ in rows if f == "send" and t == "invoke"]
    assert [value for _, value in sends] == [0, 1, 2, 3]
    crash = [row for row in rows if row[2] == "crash"]
    assert [(t, v) for _, t, _, v, _ in crash] == [("invoke", None), ("info", None)]
    crash_process = crash[0][0]
    # The crash comes between the ok send and the sends it cut short, which complete info.
    assert [(t, f, e) for _, t, f, _, e in rows[4:]] == [
        ("invoke", "crash", None),
        ("info", "send", "crashed"),
        ("info", "send", "crashed"),
        ("info", "crash", None),
        ("invoke", "send", None),
        ("ok", "send", None),
    ]
    crashed_processes = {p for p, t, _, _, e in rows if e == "crashed"}
    assert crashed_processes == {sends[1][0], sends[2][0]}
    # The new client sends under a process number never used before.
    old_processes = {p for p, _ in sends[:3]} | {crash_process}
    assert sends[3][0] not in old_processes
    assert [(key, dict(acknowledged.offsets(key))) for key in spec.keys] == [("t-0", {0: 0, 1: 3})]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_mix_crashes_producers_now_and_then_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: ProducerMode
) -> None:
    monkeypatch.setattr(workloads.squall_client, "Producer", FakeProducer)
    stop = threading.Event()
    FakeProducer.stop = stop
    FakeProducer.total_sent = 0
    spec = WorkloadSpec(
        topic="t",
        partitions=2,
        consumers=0,
        producer_mode=mode,
        mix=OpMix(poll=0, commit=0, crash=0, producer_crash=0.1),
    )
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        worker = ProducerWorker(
            0,
            spec,
            "127.0.0.1:9092",
            client_factory=SquallClientFactory(),
            recorder=OperationRecorder(writer),
            values=ValueSequence(),
            limiter=RateLimiter(None),
            acknowledged=AcknowledgedSends(),
            leaders=None,
            rng=random.Random(4),
            stop=stop,
            on_failure=lambda err: pytest.fail(f"worker failed: {err}"),
        )
        worker.run()
    ops = read_history(path)
    pair_operations(ops, strict=True)
    crashes = [op for op in ops if op.f == "crash" and op.type == "info"]
    assert worker.crashes == len(crashes) >= 1
    assert sum(op.f == "send" and op.type == "ok" for op in ops) > 0


class StuckLeaderProducer:
    """Partition 0's leader never answers: its sends stay in flight until `close` fails them
    (as a request timeout would); every other partition's send is acknowledged at once."""

    opened: list[StuckLeaderProducer]
    stop: threading.Event
    answered_to_stop = 200

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: str,
        config: Mapping[str, object],
        client_id: str,
    ) -> None:
        self.stuck: list[ProduceBatch] = []
        self.offsets: dict[int, int] = {}
        self.answered = 0
        StuckLeaderProducer.opened.append(self)

    def send(self, topic: str, value: bytes, *, partition: int) -> SendFuture:
        batch = ProduceBatch(topic, partition, time.monotonic())
        batch.items.append((None, value, 0))
        if partition == 0:
            self.stuck.append(batch)
        else:
            offset = self.offsets.get(partition, 0)
            self.offsets[partition] = offset + 1
            batch.complete(offset)
            self.answered += 1
            if self.answered >= self.answered_to_stop:
                self.stop.set()
        return SendFuture(batch, 0)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        for batch in self.stuck:
            batch.fail(
                ProduceError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    "no response within request.timeout.ms",
                    definite=False,
                    topic=batch.topic,
                    partition=batch.partition,
                )
            )
        self.stuck = []


def test_sends_stuck_on_one_partition_leave_the_other_partitions_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workloads.squall_client, "Producer", StuckLeaderProducer)
    StuckLeaderProducer.opened = []
    stop = threading.Event()
    StuckLeaderProducer.stop = stop
    spec = WorkloadSpec(
        topic="t",
        partitions=3,
        in_flight=4,
        consumers=0,
        mix=OpMix(poll=0, commit=0, crash=0, producer_crash=0),
    )
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        worker = ProducerWorker(
            0,
            spec,
            "127.0.0.1:9092",
            client_factory=SquallClientFactory(),
            recorder=OperationRecorder(writer),
            values=ValueSequence(),
            limiter=RateLimiter(None),
            acknowledged=AcknowledgedSends(),
            leaders=None,
            rng=random.Random(6),
            stop=stop,
            on_failure=lambda err: pytest.fail(f"worker failed: {err}"),
        )
        worker.run()
    ops = read_history(path)
    pairs = pair_operations(ops, strict=True)
    assert all(done is not None for _, done in pairs)  # the stuck sends too, however late
    invoked = {key: sum(op.type == "invoke" and op.key == key for op in ops) for key in spec.keys}
    # Partition 0 got exactly its in-flight limit, then no more; the others went on.
    assert invoked["t-0"] == spec.in_flight
    assert invoked["t-1"] + invoked["t-2"] == StuckLeaderProducer.answered_to_stop
    assert invoked["t-1"] > spec.in_flight and invoked["t-2"] > spec.in_flight
    stuck = [done for invoke, done in pairs if invoke.key == "t-0"]
    assert [(done.type, (done.error or "")[:17]) for done in stuck if done is not None] == [
        ("info", "REQUEST_TIMED_OUT")
    ] * spec.in_flight
