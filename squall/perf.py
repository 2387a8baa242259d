"""Producer performance, measured like Kafka's ``kafka-producer-perf-test``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from system_under_test.client import Producer, SendFuture

MAX_LATENCY_SAMPLES = 50_000


@dataclass
class LatencyRecorder:
    """Per-record latencies in milliseconds, and the errors seen."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def completion(self, sent_at: float) -> Callable[[SendFuture], None]:
        def done(future: SendFuture) -> None:
            elapsed = (time.perf_counter() - sent_at) * 1000.0
            error = future.exception()
            with self._lock:
                if error is None:
                    self.latencies_ms.append(elapsed)
                else:
                    name = type(error).__name__ + ": " + str(error).split(":")[0]
                    self.errors[name] = self.errors.get(name, 0) + 1

        return done


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of the sorted values fall (nearest rank)."""
    if not sorted_values:
        return 0.0
    rank = min(len(sorted_values) - 1, max(0, int(fraction * len(sorted_values) + 0.5) - 1))
    return sorted_values[rank]


@dataclass(frozen=True)
class PerfResult:
    """What one run measured; ``as_dict`` is the JSON the CLI prints."""

    records: int
    record_size: int
    acks: int
    mode: str
    seconds: float
    acknowledged: int
    errors: dict[str, int]
    latencies_ms: list[float]

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms)
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        mean = sum(ordered) / len(ordered) if ordered else 0.0
        return {
            "records": self.records,
            "record_size": self.record_size,
            "acks": self.acks,
            "mode": self.mode,
            "seconds": round(self.seconds, 3),
            "records_per_sec": round(rate, 1),
            "mb_per_sec": round(rate * self.record_size / (1024 * 1024), 2),
            "acknowledged": self.acknowledged,
            "errors": self.errors,
            "latency_ms": {
                "avg": round(mean, 3),
                "p50": round(percentile(ordered, 0.50), 3),
                "p99": round(percentile(ordered, 0.99), 3),
                "p999": round(percentile(ordered, 0.999), 3),
                "max": round(ordered[-1], 3) if ordered else 0.0,
            },
        }


def run_producer_perf(
    bootstrap: str,
    topic: str,
    *,
    records: int,
    record_size: int,
    acks: int,
    mode: Literal["sync", "async"],
    partition: int | None = 0,
    producer_config: dict[str, object] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> PerfResult:
    """Send ``records`` random payloads of ``record_size`` bytes and time their completions."""
    payloads = [os.urandom(record_size) for _ in range(min(records, 64) or 1)]
    recorder = LatencyRecorder()
    config: dict[str, object] = {"batch.num.messages": 1000, "queue.buffering.max.ms": 5}
    config.update(producer_config or {})
    progress_every = max(1, records // 100)
    # Like Kafka's perf tool, latencies are a sample: a callback on every record would cost
    # as much as the send itself. Every outcome is still checked at the end.
    sample_every = max(1, records // MAX_LATENCY_SAMPLES)
    futures: list[SendFuture] = []
    with Producer(bootstrap, acks=acks, mode=mode, config=config) as producer:
        start = time.perf_counter()
        for i in range(records):
            if i % sample_every == 0:
                sent_at = time.perf_counter()
                future = producer.send(topic, payloads[i % len(payloads)], partition=partition)
                future.add_callback(recorder.completion(sent_at))
            else:
                future = producer.send(topic, payloads[i % len(payloads)], partition=partition)
            futures.append(future)
            if on_progress is not None and i % progress_every == 0:
                on_progress(i)
        producer.flush()
        seconds = time.perf_counter() - start
    if on_progress is not None:
        on_progress(records)
    errors: dict[str, int] = {}
    for future in futures:
        error = future.exception()
        if error is not None:
            name = f"{type(error).__name__}: {str(error).split(':')[0]}"
            errors[name] = errors.get(name, 0) + 1
    return PerfResult(
        records=records,
        record_size=record_size,
        acks=acks,
        mode=mode,
        seconds=seconds,
        acknowledged=records - sum(errors.values()),
        errors=errors,
        latencies_ms=recorder.latencies_ms,
    )
