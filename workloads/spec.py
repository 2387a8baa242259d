"""WorkloadSpec: what the queue workload does, validated once, as plain data.

A spec says which topic and keys (one key per partition, named ``"<topic>-<partition>"``
as docs/history.md asks), how records are produced (acks, sync or async producer, how often the
producer client may retry a send on its own) and consumed (commit after processing for
at-least-once or before for at-most-once; assign or subscribe), how fast (total ops/s, split
between producers and consumers by the op mix), and how long the final read may take. The
specs are pydantic models: an invalid value raises pydantic's ``ValidationError`` naming the
field, the value and what would be valid.

The defaults make an intense workload: async producers with many sends in flight at 1000
ops/s in all, so that a fault always strikes writes on their way, and a producer client that
never retries by itself, so that every attempt is an operation of its own in the history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationInfo,
    field_validator,
    model_validator,
)

from system_under_test.client.config import ConsumerConfig, ProducerConfig
from system_under_test.client.group_consumer import GroupConfig
from system_under_test.config import TOPIC_KEYS, ConfigError, resolve_topic_config
from workloads.clients import SQUALL, ClientName, check_kafka_settings, speaks_kafka
from workloads.errors import WorkloadSpecError

ProducerMode = Literal["sync", "async"]
ConsumerMode = Literal["at-least-once", "at-most-once"]
Subscription = Literal["assign", "subscribe"]

MAX_VALUE_SIZE = 1 << 20
CONSUMER_CRASH_INTERVAL_S = 5.0
MEMBER_CRASH_INTERVAL_S = 60.0
# The workload records every commit, so it alone decides when and where the group commits.
_RESERVED_CONSUMER_KEYS = ("group.id", "zookeeper.connect", "auto.commit.enable")
_ASYNC_PRODUCER_DEFAULTS: dict[str, object] = {"queue.buffering.max.ms": 5}
REQUEST_TIMEOUT_KEY = "request.timeout.ms"
IDEMPOTENCE_KEY = "enable.idempotence"
RETRIES_KEY = "message.send.max.retries"
IDEMPOTENT_RETRIES = 3
"""How often an idempotent producer resends a failed batch where `producer_retries` is 0:
squall's client's own default message.send.max.retries (one that never resent would never
use what makes it idempotent)."""
"""The producer setting (Kafka 0.8's name) for how often the client resends a failed send."""
_MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


def key_name(topic: str, partition: int) -> str:
    """The history key of one topic-partition: ``"<topic>-<partition>"``."""
    return f"{topic}-{partition}"


def partition_of(key: str) -> int:
    """The partition number in a key written by `key_name`."""
    _, sep, number = key.rpartition("-")
    if not sep or not number.isdigit():
        raise WorkloadSpecError(f"key {key!r} is not '<topic>-<partition>'")
    return int(number)


def _no_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"expected -1 (all), 0 or 1, not {value}")
    return value


def _setting_text(value: object) -> str:
    """A setting as a properties file writes it: 2 as "2", true as "true"."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _topic_config(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(setting, str | int | bool) for setting in value.values()
    ):
        raise ValueError('expected a table of topic settings, e.g. { "min.insync.replicas" = "2" }')
    try:
        resolve_topic_config(value, "topic_config")
    except ConfigError as err:  # the path is in front of the message already
        raise ValueError(str(err).removeprefix("topic_config: ")) from None
    return {str(key): _setting_text(setting) for key, setting in value.items()}


Weight = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(strict=True, ge=1)]
Size = Annotated[int, Field(strict=True, ge=0)]
Acks = Annotated[Literal[-1, 0, 1], BeforeValidator(_no_bool)]
TopicConfig = Annotated[
    dict[str, str],
    PlainValidator(
        _topic_config,
        json_schema_input_type=dict[Literal[tuple(TOPIC_KEYS)], str | int | bool],  # type: ignore[misc]
    ),
]


class OpMix(BaseModel):
    """Relative weights of the operations, as Jepsen's generator mixes them.

    Sends and producer crashes are made by producers, polls, commits and crashes by
    consumers; the total rate is split between the two in proportion to the weights, each
    producer draws send or producer crash from their weights, and each consumer draws its
    next operation from the poll/commit/crash weights.
    """

    model_config = _MODEL_CONFIG

    send: Weight = 1.0
    """Weight of sends (producers)."""
    poll: Weight = 1.0
    """Weight of polls (consumers)."""
    commit: Weight = 0.2
    """Weight of offset commits (consumers)."""
    crash: Weight = 0.0
    """Weight of consumer crashes drawn per operation (the client is closed and a new one
    starts); 0 by default, as consumers crash in time (WorkloadSpec.consumer_crash_interval_s)."""
    producer_crash: Weight = 0.0001
    """Weight of producer crashes: the client is closed at once, its sends in flight end as
    info, and a new one starts (the default: one every 20-30 s at the default rate)."""

    @model_validator(mode="after")
    def _something_to_do(self) -> OpMix:
        if self.send == 0 and self.poll == 0:
            raise ValueError(
                "every weight of the op mix is 0 but crashes and commits; give send or poll a "
                "positive weight"
            )
        return self

    @property
    def total(self) -> float:
        return self.producer_total + self.consumer_total

    @property
    def producer_total(self) -> float:
        return self.send + self.producer_crash

    @property
    def consumer_total(self) -> float:
        return self.poll + self.commit + self.crash


class WorkloadSpec(BaseModel):
    """One queue workload: topic and keys, producers, consumers, rates and the final read.

    `rate` is the total ops/s over every worker (None: as fast as the clients go). An async
    producer keeps up to `in_flight` sends outstanding, each under its own process number.
    `producer_config` / `consumer_config` are client settings (Kafka 0.8 names) on top of
    the workload's defaults; the group keys are the workload's own. `producer_retries` is
    the client's message.send.max.retries: 0 unless set here or in `producer_config`.
    """

    model_config = _MODEL_CONFIG

    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")] = "squall-queue"
    """The topic: 1 to 249 of [A-Za-z0-9._-]."""
    partitions: Count = 3
    """Partitions of the topic; each is one key of the history."""
    replication_factor: Count = 3
    """Replicas of each partition."""
    topic_config: TopicConfig = Field(default_factory=dict)
    """Topic-level settings with Kafka's names, e.g. { "min.insync.replicas" = "2" }."""
    acks: Acks = -1
    """The producer's acks: -1 (all), 0 or 1."""
    client: ClientName = "squall"
    """The client library the workload runs through (docs/clients.md): squall's own, or a
    Kafka client (confluent-kafka, kafka-python) against the brokers' Kafka listeners; its
    producer_config and consumer_config are then that client's settings."""
    producer_mode: ProducerMode = "async"
    """async: up to in_flight sends outstanding per producer, batched; sync: one at a time."""
    in_flight: Count = 32
    """Sends an async producer keeps outstanding per partition (sends stuck on one
    partition's leader do not hold back the others). Kafka's producer pipelines several
    requests per connection, each a batch of many records; with a few single-record sends,
    what a replica holds beyond its high watermark, or a leader beyond its followers, when a
    fault strikes would be a handful of records."""
    send_backoff_ms: Size = 100
    """After a send to a partition fails, its client rests this long before sending again,
    doubling with that partition's failures in a row up to ten times it (async producers)."""
    producer_retries: Size = 0
    """How often the producer client itself resends a failed send (Kafka 0.8's
    message.send.max.retries; default: producer_config's, else 0). Above 0 a send may land
    twice without the history showing a second attempt, unless `idempotence` is on."""
    idempotence: bool = False
    """The client's idempotent producer (enable.idempotence): producer ids from
    InitProducerId and sequences the leader checks, so that a retried send lands once and
    the checkers count any duplicate as an anomaly. Needs acks -1 and producer_retries >= 1."""
    idempotent_producers: Size | None = None
    """How many of the producers are idempotent (Kafka's enable.idempotence), the others not,
    so that one run drives both of the leaders' write paths: batches with a producer id and
    sequences, which a leader checks against the producer state it rebuilt from its log, and
    batches without. An idempotent producer resends a failed batch `producer_retries` times,
    or `IDEMPOTENT_RETRIES` where that is 0; any duplicate of its sends is an anomaly.
    Default: every producer with `idempotence`; else, where acks is -1, half of them (rounded
    down; Kafka's producer is idempotent by default since 3.0); else none."""
    rate: Positive | None = 1000.0
    """Operations per second over every worker (none: as fast as the clients go)."""
    producers: Size = 2
    """Producer workers."""
    consumers: Size = 6
    """Consumer workers (one polls about a hundred times a second at most: six can take the
    consumers' share of the default rate)."""
    long_lived_consumers: Size = 2
    """Of the consumers, how many (at most all) never crash on purpose: they tail the log
    from the group's committed offsets for the whole run, through every fault."""
    consumer_crash_interval_s: Positive | None = CONSUMER_CRASH_INTERVAL_S
    """Mean seconds between crashes of each other consumer (exponentially distributed,
    drawn in time, not per operation); none: no timed crashes. Default 5 s, but 60 s for
    members of the group (`group_membership`): a member's crash (it leaves) and its
    successor's join each rebalance the whole group, which takes a heartbeat interval or
    more, so members crashing as often as plain consumers would keep the group rebalancing
    without end, and no member would read."""
    poll_backoff_ms: Size = 100
    """Pause after a failed poll or consumer start, doubling with each failure in a row."""
    poll_backoff_max_ms: Size = 1000
    """The longest pause after failed polls."""
    request_timeout_ms: Count = 5000
    """The clients' request.timeout.ms unless producer_config or consumer_config sets it: how
    long a request to an unresponsive broker holds its sends or a poll before it is given up
    (the send completes info) and the client looks for the partition's new leader."""
    value_size: Annotated[int, Field(strict=True, ge=0, le=MAX_VALUE_SIZE)] = 0
    """Bytes of padding in each value (at most 1 MiB)."""
    mix: OpMix = Field(default_factory=OpMix)
    """Relative weights of sends, polls, commits, consumer crashes and producer crashes."""
    consumer_mode: ConsumerMode = "at-least-once"
    """Commit after processing (at-least-once) or before (at-most-once)."""
    subscription: Subscription = "subscribe"
    """subscribe: each consumer is a member of the group, whose coordinator shares the
    partitions out (see group_membership); assign: the workload shares them out itself."""
    group_membership: bool = True
    """With subscribe (the default: true with subscribe, false with assign): each consumer
    joins the group, whose coordinator shares the partitions out among the members and
    rebalances them as members come and go (any client). false with subscribe: every consumer
    reads every partition outside any rebalancing (squall's own client then keeps the group's
    offsets in ZooKeeper, as Kafka 0.8 did)."""
    group_id: str | None = None
    """The consumer group (default: squall-<topic>)."""
    poll_timeout_ms: Size = 100
    """How long one poll waits for records."""
    final_read_deadline_s: Positive = 30.0
    """How long the final read may take."""
    final_read_settle_s: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] = 3.0
    """How long the final read waits for nothing new before it ends."""
    shutdown_timeout_s: Positive = 15.0
    """How long workers get to stop."""
    producer_config: dict[str, Any] = Field(default_factory=dict)
    """Producer client settings (Kafka 0.8 names)."""
    consumer_config: dict[str, Any] = Field(default_factory=dict)
    """Consumer client settings (Kafka 0.8 names); the group keys are the workload's."""

    @model_validator(mode="before")
    @classmethod
    def _membership_from_subscription(cls, data: Any) -> Any:
        """Without `group_membership`: members of the group with subscribe, not with assign;
        without `consumer_crash_interval_s`: the members' or the plain consumers' default."""
        if not isinstance(data, Mapping):
            return data
        resolved = dict(data)
        if resolved.get("group_membership") is None:
            subscription = resolved.get("subscription", "subscribe")
            resolved["group_membership"] = subscription == "subscribe"
        if "consumer_crash_interval_s" not in resolved:
            members = resolved["group_membership"] is True
            resolved["consumer_crash_interval_s"] = (
                MEMBER_CRASH_INTERVAL_S if members else CONSUMER_CRASH_INTERVAL_S
            )
        return resolved

    @model_validator(mode="before")
    @classmethod
    def _idempotent_producers_by_default(cls, data: Any) -> Any:
        """Without `idempotent_producers`: every producer with `idempotence`, else half of
        them where acks is -1, else none (malformed fields are left to their own checks)."""
        if not isinstance(data, Mapping) or data.get("idempotent_producers") is not None:
            return data
        producers = data.get("producers", cls.model_fields["producers"].default)
        if type(producers) is not int or producers < 0:
            return data
        if data.get("idempotence") is True:
            count = producers
        elif data.get("acks", -1) == -1:
            count = producers // 2
        else:
            count = 0
        return {**data, "idempotent_producers": count}

    @model_validator(mode="before")
    @classmethod
    def _retries_from_producer_config(cls, data: Any) -> Any:
        """Without `producer_retries`, take producer_config's message.send.max.retries."""
        if not isinstance(data, Mapping) or data.get("producer_retries") is not None:
            return data
        config = data.get("producer_config")
        if not isinstance(config, Mapping) or RETRIES_KEY not in config:
            return data
        try:
            retries = ProducerConfig.from_mapping({RETRIES_KEY: config[RETRIES_KEY]}).retries
        except ValueError:
            return data  # the producer_config check names the bad value
        return {**data, "producer_retries": retries}

    @field_validator("topic")
    @classmethod
    def _not_reserved(cls, topic: str) -> str:
        if topic in (".", ".."):
            raise ValueError(f"topic {topic!r} is reserved; choose another name")
        return topic

    @field_validator("group_id")
    @classmethod
    def _znode_name(cls, group_id: str | None) -> str | None:
        if group_id is not None and (
            not group_id.strip() or "/" in group_id or group_id in (".", "..")
        ):
            raise ValueError(
                "expected a non-empty name without '/' (it becomes the ZooKeeper znode "
                "/consumers/<group_id>)"
            )
        return group_id

    @field_validator("producer_config")
    @classmethod
    def _producer_settings(cls, config: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        client = info.data.get("client", SQUALL)
        if speaks_kafka(client):
            check_kafka_settings(client, "producer", config)
        else:
            if IDEMPOTENCE_KEY in config:
                raise ValueError(
                    f"sets {IDEMPOTENCE_KEY}, which the workload owns (the checkers read "
                    "it): use idempotence for the idempotent producer"
                )
            ProducerConfig.from_mapping(config)  # ClientConfigError, a ValueError, names the key
        return config

    @field_validator("consumer_config")
    @classmethod
    def _consumer_settings(cls, config: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        reserved = sorted(set(config) & set(_RESERVED_CONSUMER_KEYS))
        if reserved:
            raise ValueError(
                f"sets {', '.join(reserved)}, which the workload owns (it "
                "records every commit); use group_id for the group's name"
            )
        client = info.data.get("client", SQUALL)
        if speaks_kafka(client):
            check_kafka_settings(client, "consumer", config)
        elif info.data.get("group_membership"):
            # A member's own settings (session.timeout.ms, ...), then the Consumer's.
            _, rest = GroupConfig.split({"group.id": "checked", **config})
            ConsumerConfig.from_mapping({"auto.offset.reset": "earliest", **rest})
        else:
            ConsumerConfig.from_mapping({"auto.offset.reset": "earliest", **config})
        return config

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        insync = resolve_topic_config(self.topic_config).get("min.insync.replicas")
        if isinstance(insync, int) and insync > self.replication_factor:
            raise ValueError(
                f"topic_config min.insync.replicas={insync} exceeds replication_factor="
                f"{self.replication_factor}: every acks=-1 send would fail; lower it or add "
                "replicas"
            )
        configured = self.producer_config.get(RETRIES_KEY)
        if (
            configured is not None
            and ProducerConfig.from_mapping({RETRIES_KEY: configured}).retries
            != self.producer_retries
        ):
            raise ValueError(
                f"producer_retries={self.producer_retries} but producer_config sets "
                f"{RETRIES_KEY}={configured!r}; set one of them"
            )
        self._check_workers()
        self._check_groups()
        self._check_idempotence()
        return self

    def _check_idempotence(self) -> None:
        idempotent = self.idempotent_producer_count
        if idempotent > self.producers:
            raise ValueError(
                f"idempotent_producers={idempotent} exceeds producers={self.producers}; "
                "lower it or add producers"
            )
        if self.idempotence and idempotent != self.producers:
            raise ValueError(
                f"idempotence makes every producer idempotent, but idempotent_producers="
                f"{idempotent} of producers={self.producers}; set one of them"
            )
        if idempotent and self.acks != -1:
            raise ValueError(
                f"idempotent_producers={idempotent} needs acks = -1 (Kafka's idempotent "
                f"producer writes with acks=all), not {self.acks}; set idempotent_producers "
                "to 0 or acks to -1"
            )
        if not self.idempotence:
            return
        if self.acks != -1:
            raise ValueError(
                f"idempotence needs acks = -1 (Kafka's idempotent producer writes with "
                f"acks=all), not {self.acks}; set one of them"
            )
        if self.producer_retries < 1:
            raise ValueError(
                "idempotence is what makes retries safe: set producer_retries >= 1 (the "
                "clients refuse an idempotent producer that never retries)"
            )

    def _check_groups(self) -> None:
        if not self.group_membership:
            return
        if self.subscription != "subscribe":
            raise ValueError(
                'group_membership needs subscription = "subscribe" (assign takes partitions '
                "outside the group's rebalancing); set one of them"
            )

    def _check_workers(self) -> None:
        mix = self.mix
        if self.poll_backoff_max_ms < self.poll_backoff_ms:
            raise ValueError(
                f"poll_backoff_max_ms={self.poll_backoff_max_ms} is below poll_backoff_ms="
                f"{self.poll_backoff_ms}; raise it"
            )
        if self.producers == 0 and self.consumers == 0:
            raise ValueError("producers and consumers are both 0; give one of them >= 1")
        if self.producers > 0 and mix.send == 0:
            raise ValueError(
                f"producers is {self.producers} but mix.send is 0; give sends a weight or set "
                "producers=0"
            )
        if mix.send > 0 and self.producers == 0:
            raise ValueError("mix.send is positive but producers is 0; add a producer")
        if self.consumers > 0 and mix.poll == 0:
            raise ValueError(
                f"consumers is {self.consumers} but mix.poll is 0; give polls a weight or set "
                "consumers=0"
            )
        if mix.consumer_total > 0 and self.consumers == 0:
            raise ValueError(
                "mix gives polls, commits or crashes a weight but consumers is 0; add a "
                "consumer or set those weights to 0"
            )

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
    def producer_weight(self) -> float:
        """The producers' share of the mix: sends and producer crashes (none without
        producers, whose crash weight then means nothing)."""
        return self.mix.producer_total if self.producers > 0 else 0.0

    @property
    def producer_rate(self) -> float | None:
        """Sends and producer crashes per second over all producers (None: unlimited)."""
        if self.rate is None:
            return None
        return self.rate * self.producer_weight / (self.producer_weight + self.mix.consumer_total)

    @property
    def consumer_rate(self) -> float | None:
        """Polls, commits and crashes per second over all consumers (None: unlimited)."""
        if self.rate is None:
            return None
        consumers = self.mix.consumer_total
        return self.rate * consumers / (self.producer_weight + consumers)

    def assignment(self, consumer: int) -> list[int]:
        """The partitions consumer number `consumer` reads.

        A member of the group (`group_membership`, subscribe's default): none until its
        coordinator gives it some. subscribe outside the group: all of them. assign: a
        share, round-robin, so that the consumers together cover every partition.
        """
        if self.group_membership:
            return []
        if self.subscription == "subscribe":
            return list(range(self.partitions))
        if self.consumers >= self.partitions:
            return [consumer % self.partitions]
        return list(range(consumer % self.consumers, self.partitions, self.consumers))

    @property
    def idempotent_producer_count(self) -> int:
        """How many producers are idempotent (`idempotent_producers`, resolved)."""
        if self.idempotent_producers is not None:
            return self.idempotent_producers
        return self.producers if self.idempotence else 0

    def is_idempotent_producer(self, index: int) -> bool:
        """Whether producer worker `index` is idempotent: the first
        `idempotent_producer_count` of them are."""
        return index < self.idempotent_producer_count

    def producer_settings(self, *, idempotent: bool | None = None) -> dict[str, object]:
        """A producer's client config: the workload's defaults, then `producer_config`,
        with message.send.max.retries `producer_retries` (an idempotent producer's at least
        `IDEMPOTENT_RETRIES` where that is 0). `idempotent`: that producer's (None: as
        `idempotence` says)."""
        idempotent = self.idempotence if idempotent is None else idempotent
        settings: dict[str, object] = {REQUEST_TIMEOUT_KEY: self.request_timeout_ms}
        if self.producer_mode == "async":
            settings.update(_ASYNC_PRODUCER_DEFAULTS)
        settings.update(self.producer_config)
        settings[RETRIES_KEY] = self.producer_retries
        if idempotent:
            settings[IDEMPOTENCE_KEY] = True
            settings[RETRIES_KEY] = self.producer_retries or IDEMPOTENT_RETRIES
        return settings

    def producer_request_timeout_s(self) -> float:
        """The producers' request.timeout.ms in force, in seconds."""
        return int(str(self.producer_settings()[REQUEST_TIMEOUT_KEY])) / 1000

    def member_session_timeout_s(self) -> float:
        """A member's session.timeout.ms in force, in seconds: the consumer_config's, else
        the client's default (librdkafka 45 s, kafka-python and squall's 10 s)."""
        configured = self.consumer_config.get("session.timeout.ms")
        if configured is not None:
            return int(str(configured)) / 1000
        return 45.0 if self.client == "confluent-kafka" else 10.0

    def consumer_settings(self, zookeeper_connect: str | None) -> dict[str, object]:
        """A consumer's client config; with `zookeeper_connect`, a member of the group."""
        settings: dict[str, object] = {
            "auto.offset.reset": "earliest",
            REQUEST_TIMEOUT_KEY: self.request_timeout_ms,
        }
        settings.update(self.consumer_config)
        if zookeeper_connect is not None:
            settings["group.id"] = self.group
            settings["zookeeper.connect"] = zookeeper_connect
        return settings

    # --- as data ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data (test.json's `workload`), `producer_retries` included:
        the checkers read it to tell a retry's duplicate from a bug's."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkloadSpec:
        """Build a spec from data such as a test file holds; unknown keys are errors."""
        return cls.model_validate(data)
