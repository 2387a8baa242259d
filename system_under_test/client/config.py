"""Client configuration keys (Kafka 0.8 producer and consumer names) with their defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from system_under_test.client.exceptions import ClientConfigError

OffsetReset = Literal["earliest", "latest", "none"]

PRODUCER_DEFAULTS: dict[str, tuple[int, int]] = {
    # key: (default, minimum)
    "batch.num.messages": (200, 1),
    "queue.buffering.max.ms": (5000, 0),
    "queue.buffering.max.messages": (10000, 1),
    "queue.enqueue.timeout.ms": (-1, -1),
    "message.send.max.retries": (3, 0),
    "retry.backoff.ms": (100, 0),
    "request.timeout.ms": (30000, 1),
    "max.in.flight.requests": (5, 1),
}

CONSUMER_DEFAULTS: dict[str, tuple[int, int]] = {
    "fetch.max.bytes": (52428800, 1),
    "max.partition.fetch.bytes": (1048576, 1),
    "fetch.max.wait.ms": (500, 0),
    "fetch.min.bytes": (1, 0),
    "request.timeout.ms": (30000, 1),
}
OFFSET_RESETS: tuple[OffsetReset, ...] = ("earliest", "latest", "none")


def _integers(
    config: Mapping[str, object] | None,
    declared: Mapping[str, tuple[int, int]],
    what: str,
    extra_keys: tuple[str, ...] = (),
) -> dict[str, int]:
    given = dict(config or {})
    unknown = sorted(set(given) - set(declared) - set(extra_keys))
    if unknown:
        known = ", ".join(sorted([*declared, *extra_keys]))
        raise ClientConfigError(
            f"unknown {what} config key(s) {', '.join(unknown)}; known keys: {known}"
        )
    out: dict[str, int] = {}
    for key, (default, minimum) in declared.items():
        raw = given.get(key, default)
        try:
            if isinstance(raw, bool):
                raise ValueError
            value = raw if isinstance(raw, int) else int(str(raw).strip())
        except ValueError:
            raise ClientConfigError(f"{what} config {key}={raw!r} is not an integer") from None
        if value < minimum:
            raise ClientConfigError(f"{what} config {key}={value} is below its minimum {minimum}")
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """A producer's validated settings."""

    batch_num_messages: int
    linger_ms: int
    max_queued_messages: int
    enqueue_timeout_ms: int
    retries: int
    retry_backoff_ms: int
    request_timeout_ms: int
    max_in_flight: int

    @classmethod
    def from_mapping(cls, config: Mapping[str, object] | None) -> ProducerConfig:
        v = _integers(config, PRODUCER_DEFAULTS, "producer")
        return cls(
            v["batch.num.messages"],
            v["queue.buffering.max.ms"],
            v["queue.buffering.max.messages"],
            v["queue.enqueue.timeout.ms"],
            v["message.send.max.retries"],
            v["retry.backoff.ms"],
            v["request.timeout.ms"],
            v["max.in.flight.requests"],
        )


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A consumer's validated settings."""

    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    fetch_max_wait_ms: int
    fetch_min_bytes: int
    request_timeout_ms: int
    auto_offset_reset: OffsetReset

    @classmethod
    def from_mapping(cls, config: Mapping[str, object] | None) -> ConsumerConfig:
        v = _integers(config, CONSUMER_DEFAULTS, "consumer", ("auto.offset.reset",))
        reset = str((config or {}).get("auto.offset.reset", "none")).strip().lower()
        if reset == "smallest":  # Kafka 0.8 names
            reset = "earliest"
        elif reset == "largest":
            reset = "latest"
        if reset not in OFFSET_RESETS:
            raise ClientConfigError(
                f"consumer config auto.offset.reset={reset!r} must be earliest, latest or none"
            )
        return cls(
            v["fetch.max.bytes"],
            v["max.partition.fetch.bytes"],
            v["fetch.max.wait.ms"],
            v["fetch.min.bytes"],
            v["request.timeout.ms"],
            reset,
        )
