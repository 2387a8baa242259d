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
    seventh send fails indeterminately. Stops the worker after SENDS sends."""

    stop: threading.Event
    peak_in_flight = 0

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
            if self.sent >= SENDS:
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
        self._drain()
        self.closed = True


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sends_are_recorded_with_offsets_and_a_process_per_in_flight_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: ProducerMode
) -> None:
    monkeypatch.setattr(workloads.squall_client, "Producer", FakeProducer)
    FakeProducer.peak_in_flight = 0
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
    pairs = pair_operations(ops)
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
        assert 1 < busy <= spec.in_flight
        assert FakeProducer.peak_in_flight <= spec.in_flight


def _max_concurrent(ops: list[Operation]) -> int:
    in_flight = peak = 0
    for op in ops:
        in_flight += 1 if op.type == "invoke" else -1
        peak = max(peak, in_flight)
    return peak
