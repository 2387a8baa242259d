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

PRODUCER_OTHER_KEYS = ("enable.idempotence",)
"""Producer keys whose values are not integers."""

CONSUMER_DEFAULTS: dict[str, tuple[int, int]] = {
    "fetch.max.bytes": (52428800, 1),
    "max.partition.fetch.bytes": (1048576, 1),
    "fetch.max.wait.ms": (500, 0),
    "fetch.min.bytes": (1, 0),
    "request.timeout.ms": (30000, 1),
    "zookeeper.session.timeout.ms": (6000, 1),
    "zookeeper.connection.timeout.ms": (6000, 1),
    "auto.commit.interval.ms": (60000, 0),
    "reconnect.backoff.ms": (50, 0),
    "reconnect.backoff.max.ms": (1000, 0),
}
# Consumer keys whose values are not integers. auto.commit.enable defaults to false here,
# unlike Kafka 0.8 (true): squall's workloads commit explicitly and record every commit.
CONSUMER_OTHER_KEYS = ("auto.offset.reset", "group.id", "zookeeper.connect", "auto.commit.enable")
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
    enable_idempotence: bool = False
    """Kafka's idempotent producer (a producer id, sequence numbers): a retried batch the
    broker already wrote is not written again. Needs acks=-1 and retries."""

    @classmethod
    def from_mapping(cls, config: Mapping[str, object] | None) -> ProducerConfig:
        v = _integers(config, PRODUCER_DEFAULTS, "producer", PRODUCER_OTHER_KEYS)
        idempotent = _flag(config or {}, "enable.idempotence", "false", "producer")
        if idempotent and v["message.send.max.retries"] < 1:
            raise ClientConfigError(
                "producer config enable.idempotence=true needs message.send.max.retries >= 1: "
                "idempotence is what makes retries safe"
            )
        return cls(
            v["batch.num.messages"],
            v["queue.buffering.max.ms"],
            v["queue.buffering.max.messages"],
            v["queue.enqueue.timeout.ms"],
            v["message.send.max.retries"],
            v["retry.backoff.ms"],
            v["request.timeout.ms"],
            v["max.in.flight.requests"],
            idempotent,
        )


def _flag(config: Mapping[str, object], key: str, default: str, what: str) -> bool:
    raw = config.get(key, default)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ClientConfigError(f"{what} config {key}={raw!r} must be true or false")
    return text == "true"


def _group_id(raw: object) -> str | None:
    if raw is None:
        return None
    group = str(raw).strip()
    if not group or "/" in group or group in (".", ".."):
        raise ClientConfigError(
            f"consumer config group.id={raw!r} is not a usable group name: give a non-empty "
            "name without '/' (it becomes the ZooKeeper znode /consumers/<group.id>)"
        )
    return group


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A consumer's validated settings.

    With ``group.id`` the consumer belongs to a group whose committed offsets live in
    ZooKeeper at ``zookeeper.connect`` (Kafka 0.8's layout). ``auto.commit.enable`` is off
    by default, unlike Kafka 0.8: squall's workloads commit explicitly.
    """

    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    fetch_max_wait_ms: int
    fetch_min_bytes: int
    request_timeout_ms: int
    auto_offset_reset: OffsetReset
    group_id: str | None = None
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 6000
    zookeeper_connection_timeout_ms: int = 6000
    auto_commit_enable: bool = False
    auto_commit_interval_ms: int = 60000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000

    @classmethod
    def from_mapping(cls, config: Mapping[str, object] | None) -> ConsumerConfig:
        given = dict(config or {})
        v = _integers(given, CONSUMER_DEFAULTS, "consumer", CONSUMER_OTHER_KEYS)
        reset = str(given.get("auto.offset.reset", "none")).strip().lower()
        if reset == "smallest":  # Kafka 0.8 names
            reset = "earliest"
        elif reset == "largest":
            reset = "latest"
        if reset not in OFFSET_RESETS:
            raise ClientConfigError(
                f"consumer config auto.offset.reset={reset!r} must be earliest, latest or none "
                "(or Kafka 0.8's smallest, largest)"
            )
        group = _group_id(given.get("group.id"))
        raw_connect = given.get("zookeeper.connect")
        connect = str(raw_connect).strip() if raw_connect is not None else None
        auto_commit = _flag(given, "auto.commit.enable", "false", "consumer")
        if group is not None and not connect:
            raise ClientConfigError(
                f"consumer config group.id={group!r} needs zookeeper.connect "
                "(HOST:PORT, optionally with a chroot: HOST:PORT/squall), the ZooKeeper where the "
                "group's offsets are kept"
            )
        if auto_commit and group is None:
            raise ClientConfigError(
                "consumer config auto.commit.enable=true needs a group.id (and zookeeper.connect) "
                "to commit to"
            )
        return cls(
            v["fetch.max.bytes"],
            v["max.partition.fetch.bytes"],
            v["fetch.max.wait.ms"],
            v["fetch.min.bytes"],
            v["request.timeout.ms"],
            reset,
            group_id=group,
            zookeeper_connect=connect or None,
            zookeeper_session_timeout_ms=v["zookeeper.session.timeout.ms"],
            zookeeper_connection_timeout_ms=v["zookeeper.connection.timeout.ms"],
            auto_commit_enable=auto_commit,
            auto_commit_interval_ms=v["auto.commit.interval.ms"],
            reconnect_backoff_ms=v["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=max(v["reconnect.backoff.max.ms"], v["reconnect.backoff.ms"]),
        )
