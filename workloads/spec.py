"""WorkloadSpec: what the queue workload does, validated once, as plain data.

A spec says which topic and keys (one key per partition, named ``"<topic>-<partition>"``
as HISTORY.md asks), how records are produced (acks, sync or async producer) and consumed
(commit after processing for at-least-once or before for at-most-once; assign or
subscribe), how fast (total ops/s, split between producers and consumers by the op mix),
and how long the final read may take. Every mistake raises `WorkloadSpecError` naming the
field and what would be valid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, cast, get_args

from system_under_test.client.config import ConsumerConfig, ProducerConfig
from system_under_test.client.exceptions import ClientConfigError
from system_under_test.config import ConfigError, resolve_topic_config
from workloads.errors import WorkloadSpecError

ProducerMode = Literal["sync", "async"]
ConsumerMode = Literal["at-least-once", "at-most-once"]
Subscription = Literal["assign", "subscribe"]

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
MAX_VALUE_SIZE = 1 << 20
# The workload records every commit, so it alone decides when and where the group commits.
_RESERVED_CONSUMER_KEYS = ("group.id", "zookeeper.connect", "auto.commit.enable")
_ASYNC_PRODUCER_DEFAULTS: dict[str, object] = {"queue.buffering.max.ms": 5}


def key_name(topic: str, partition: int) -> str:
    """The history key of one topic-partition: ``"<topic>-<partition>"``."""
    return f"{topic}-{partition}"


def partition_of(key: str) -> int:
    """The partition number in a key written by `key_name`."""
    _, sep, number = key.rpartition("-")
    if not sep or not number.isdigit():
        raise WorkloadSpecError(f"key {key!r} is not '<topic>-<partition>'")
    return int(number)


def _finite(name: str, value: object, *, minimum: float = 0.0, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WorkloadSpecError(f"{name} is {value!r}, expected a finite number")
    if value < minimum or (strict and value == minimum):
        relation = ">" if strict else ">="
        raise WorkloadSpecError(f"{name} is {value!r}, expected a number {relation} {minimum:g}")
    return float(value)


def _integer(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadSpecError(f"{name} is {value!r}, expected an integer >= {minimum}")
    if value < minimum:
        raise WorkloadSpecError(f"{name} is {value}, expected an integer >= {minimum}")
    return value


def _choice(name: str, value: object, kind: Any) -> None:
    allowed = get_args(kind)
    if value not in allowed:
        raise WorkloadSpecError(
            f"{name} is {value!r}, expected one of {', '.join(repr(a) for a in allowed)}"
        )


@dataclass(frozen=True, slots=True)
class OpMix:
    """Relative weights of the operations, as Jepsen's generator mixes them.

    Sends are made by producers, polls, commits and crashes by consumers; the total rate is
    split between the two in proportion to the weights, and each consumer draws its next
    operation from the poll/commit/crash weights.
    """

    send: float = 1.0
    poll: float = 1.0
    commit: float = 0.2
    crash: float = 0.01

    def __post_init__(self) -> None:
        for name in ("send", "poll", "commit", "crash"):
            _finite(f"mix.{name}", getattr(self, name))
        if self.total == 0:
            raise WorkloadSpecError(
                "every weight of the op mix is 0; give send or poll a positive weight"
            )

    @property
    def total(self) -> float:
        return self.send + self.poll + self.commit + self.crash

    @property
    def consumer_total(self) -> float:
        return self.poll + self.commit + self.crash


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """One queue workload: topic and keys, producers, consumers, rates and the final read.

    `rate` is the total ops/s over every worker (None: as fast as the clients go). An async
    producer keeps up to `in_flight` sends outstanding, each under its own process number.
    `producer_config` / `consumer_config` are client settings (Kafka 0.8 names) on top of
    the workload's defaults; the group keys are the workload's own.
    """

    topic: str = "squall-queue"
    partitions: int = 3
    replication_factor: int = 3
    topic_config: Mapping[str, str] = field(default_factory=dict)
    acks: int = -1
    producer_mode: ProducerMode = "sync"
    in_flight: int = 8
    rate: float | None = 100.0
    producers: int = 2
    consumers: int = 2
    value_size: int = 0
    mix: OpMix = field(default_factory=OpMix)
    consumer_mode: ConsumerMode = "at-least-once"
    subscription: Subscription = "subscribe"
    group_id: str | None = None
    poll_timeout_ms: int = 100
    final_read_deadline_s: float = 30.0
    final_read_settle_s: float = 3.0
    shutdown_timeout_s: float = 15.0
    producer_config: Mapping[str, object] = field(default_factory=dict)
    consumer_config: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not _TOPIC_NAME.fullmatch(self.topic):
            raise WorkloadSpecError(f"topic is {self.topic!r}, expected 1 to 249 of [A-Za-z0-9._-]")
        if self.topic in (".", ".."):
            raise WorkloadSpecError(f"topic {self.topic!r} is reserved; choose another name")
        _integer("partitions", self.partitions, minimum=1)
        _integer("replication_factor", self.replication_factor, minimum=1)
        self._check_topic_config()
        if isinstance(self.acks, bool) or self.acks not in (-1, 0, 1):
            raise WorkloadSpecError(f"acks is {self.acks!r}, expected -1 (all), 0 or 1")
        _choice("producer_mode", self.producer_mode, ProducerMode)
        _integer("in_flight", self.in_flight, minimum=1)
        if self.rate is not None:
            _finite("rate", self.rate, strict=True)
        _integer("producers", self.producers, minimum=0)
        _integer("consumers", self.consumers, minimum=0)
        _integer("value_size", self.value_size, minimum=0)
        if self.value_size > MAX_VALUE_SIZE:
            raise WorkloadSpecError(
                f"value_size is {self.value_size}, expected at most {MAX_VALUE_SIZE} bytes"
            )
        if not isinstance(self.mix, OpMix):
            raise WorkloadSpecError(f"mix is {self.mix!r}, expected an OpMix")
        _choice("consumer_mode", self.consumer_mode, ConsumerMode)
        _choice("subscription", self.subscription, Subscription)
        _integer("poll_timeout_ms", self.poll_timeout_ms, minimum=0)
        _finite("final_read_deadline_s", self.final_read_deadline_s, strict=True)
        _finite("final_read_settle_s", self.final_read_settle_s)
        _finite("shutdown_timeout_s", self.shutdown_timeout_s, strict=True)
        self._check_workers()
        self._check_client_configs()

    def _check_topic_config(self) -> None:
        if not isinstance(self.topic_config, Mapping):
            raise WorkloadSpecError(
                f"topic_config is {self.topic_config!r}, expected a mapping such as "
                "{'min.insync.replicas': '2'}"
            )
        try:
            resolved = resolve_topic_config(self.topic_config, "workload topic_config")
        except ConfigError as err:
            raise WorkloadSpecError(str(err)) from None
        insync = resolved.get("min.insync.replicas")
        if isinstance(insync, int) and insync > self.replication_factor:
            raise WorkloadSpecError(
                f"topic_config min.insync.replicas={insync} exceeds replication_factor="
                f"{self.replication_factor}: every acks=-1 send would fail; lower it or add "
                "replicas"
            )

    def _check_workers(self) -> None:
        mix = self.mix
        if self.producers == 0 and self.consumers == 0:
            raise WorkloadSpecError("producers and consumers are both 0; give one of them >= 1")
        if self.producers > 0 and mix.send == 0:
            raise WorkloadSpecError(
                f"producers is {self.producers} but mix.send is 0; give sends a weight or set "
                "producers=0"
            )
        if mix.send > 0 and self.producers == 0:
            raise WorkloadSpecError("mix.send is positive but producers is 0; add a producer")
        if self.consumers > 0 and mix.poll == 0:
            raise WorkloadSpecError(
                f"consumers is {self.consumers} but mix.poll is 0; give polls a weight or set "
                "consumers=0"
            )
        if mix.consumer_total > 0 and self.consumers == 0:
            raise WorkloadSpecError(
                "mix gives polls, commits or crashes a weight but consumers is 0; add a "
                "consumer or set those weights to 0"
            )
        if self.group_id is not None and (
            not isinstance(self.group_id, str)
            or not self.group_id.strip()
            or "/" in self.group_id
            or self.group_id in (".", "..")
        ):
            raise WorkloadSpecError(
                f"group_id is {self.group_id!r}, expected a non-empty name without '/' "
                "(it becomes the ZooKeeper znode /consumers/<group_id>)"
            )

    def _check_client_configs(self) -> None:
        for name in ("producer_config", "consumer_config"):
            if not isinstance(getattr(self, name), Mapping):
                raise WorkloadSpecError(f"{name} must be a mapping of client settings")
        reserved = sorted(set(self.consumer_config) & set(_RESERVED_CONSUMER_KEYS))
        if reserved:
            raise WorkloadSpecError(
                f"consumer_config sets {', '.join(reserved)}, which the workload owns (it "
                "records every commit); use group_id for the group's name"
            )
        try:
            ProducerConfig.from_mapping(self.producer_settings())
            ConsumerConfig.from_mapping(self.consumer_settings("127.0.0.1:2181"))
        except ClientConfigError as err:
            raise WorkloadSpecError(f"client settings: {err}") from None

    # --- derived values --------------------------------------------------------------------

    @property
    def keys(self) -> list[str]:
        """Every key of the workload, in partition order."""
        return [key_name(self.topic, p) for p in range(self.partitions)]

    def key(self, partition: int) -> str:
        return key_name(self.topic, partition)

    @property
    def group(self) -> str:
        """The consumer group's name (`group_id`, or one derived from the topic)."""
        return self.group_id if self.group_id is not None else f"squall-{self.topic}"

    @property
    def producer_rate(self) -> float | None:
        """Sends per second over all producers (None: unlimited)."""
        if self.rate is None:
            return None
        return self.rate * self.mix.send / self.mix.total

    @property
    def consumer_rate(self) -> float | None:
        """Polls, commits and crashes per second over all consumers (None: unlimited)."""
        if self.rate is None:
            return None
        return self.rate * self.mix.consumer_total / self.mix.total

    def assignment(self, consumer: int) -> list[int]:
        """The partitions consumer number `consumer` reads.

        subscribe: all of them (our consumer has no group rebalancing). assign: a share,
        round-robin, so that the consumers together cover every partition.
        """
        if self.subscription == "subscribe":
            return list(range(self.partitions))
        if self.consumers >= self.partitions:
            return [consumer % self.partitions]
        return list(range(consumer % self.consumers, self.partitions, self.consumers))

    def producer_settings(self) -> dict[str, object]:
        """The producer's client config: the workload's defaults, then `producer_config`."""
        settings = dict(_ASYNC_PRODUCER_DEFAULTS) if self.producer_mode == "async" else {}
        settings.update(self.producer_config)
        return settings

    def consumer_settings(self, zookeeper_connect: str | None) -> dict[str, object]:
        """A consumer's client config; with `zookeeper_connect`, a member of the group."""
        settings: dict[str, object] = {"auto.offset.reset": "earliest"}
        settings.update(self.consumer_config)
        if zookeeper_connect is not None:
            settings["group.id"] = self.group
            settings["zookeeper.connect"] = zookeeper_connect
        return settings

    # --- as data ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data (for test.json)."""
        data = asdict(self)
        data["topic_config"] = dict(self.topic_config)
        data["producer_config"] = dict(self.producer_config)
        data["consumer_config"] = dict(self.consumer_config)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkloadSpec:
        """Build a spec from data such as a test file holds; unknown keys are errors."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise WorkloadSpecError(
                f"unknown workload field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        values = dict(data)
        mix = values.get("mix")
        if isinstance(mix, Mapping):
            mix_known = {f.name for f in fields(OpMix)}
            mix_unknown = sorted(set(mix) - mix_known)
            if mix_unknown:
                raise WorkloadSpecError(
                    f"unknown mix weight(s) {', '.join(mix_unknown)}; known: "
                    f"{', '.join(sorted(mix_known))}"
                )
            values["mix"] = OpMix(**cast(dict[str, float], dict(mix)))
        return cls(**values)
