"""confluent-kafka (librdkafka) as the workload's client protocol, through Kafka's protocol.

Settings are passed to librdkafka as they are (it takes the workload's Kafka 0.8 names,
``message.send.max.retries`` and ``queue.buffering.max.ms``, as aliases of its own), except
the workload's group keys: ``zookeeper.connect`` is dropped (a Kafka client's group lives on
the brokers) and automatic commits are always off (the workload commits). Idempotence is
off: the brokers do not serve InitProducerId yet. librdkafka's delivery timeout
(``message.timeout.ms``, 300 s by default) is bounded by the request timeout times the
attempts, so that a send never outlives what the workload waits for it, and every request's
(``socket.timeout.ms``, 60 s by default) is the workload's request timeout.

Outcomes (docs/clients.md): a delivery error is `definite` only when the record never left
the client (refused by ``produce()``, purged from the queue): librdkafka resends a batch
answered NOT_LEADER_FOR_PARTITION whatever its retries, so any broker's answer may follow
an attempt that landed; everything else is indeterminate. A commit
refused by the coordinator for its generation, member or sizes is definite; a commit that
failed otherwise may have landed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from workloads.client import (
    GroupConsumer,
    OperationError,
    PartitionState,
    Record,
    SendResult,
    TopicPartition,
    TopicRefusedError,
    TopicState,
)
from workloads.delivery import DeliveryFuture
from workloads.kafka_codes import COMMIT_REFUSED

log = logging.getLogger(__name__)
"""librdkafka's own log lines (connections refused, brokers down) go here, not to stderr."""
NEVER_SENT = frozenset({KafkaError._QUEUE_FULL, KafkaError._PURGE_QUEUE})
"""librdkafka's local errors for a record that never left the client."""
TOPIC_REFUSED = frozenset(
    {
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.INVALID_PARTITIONS,
        KafkaError.INVALID_REPLICATION_FACTOR,
        KafkaError.INVALID_CONFIG,
        KafkaError.INVALID_REQUEST,
    }
)
GROUP_KEYS_DROPPED = ("zookeeper.connect", "auto.commit.enable")
_MAX_POLL_RECORDS = 500
FETCH_WAIT_MS = 100
"""librdkafka's fetch.wait.max.ms for the workload's consumers (500 by default): how long a
fetch at a log's end waits for data. Each poll fetches anew, after that fetch returns."""
FETCH_BYTES = 64 * 1024
"""librdkafka's max.partition.fetch.bytes for the workload's consumers (1 MiB by default):
each poll drops what was fetched beyond the records it returns and fetches anew, so a larger
fetch is work thrown away, on the brokers (which build every fetched batch) and the client."""
_DEFAULT_REQUEST_TIMEOUT_MS = 30_000


def _error_of(err: KafkaException | KafkaError, *, definite: bool = False) -> OperationError:
    kafka_error = err if isinstance(err, KafkaError) else err.args[0]
    if not isinstance(kafka_error, KafkaError):
        return OperationError(type(err).__name__, str(err), definite=definite)
    return OperationError(kafka_error.name(), kafka_error.str(), definite=definite)


def _retries(settings: Mapping[str, object]) -> int:
    value = settings.get("message.send.max.retries", settings.get("retries", 0))
    return int(str(value))


def _request_timeout_ms(settings: Mapping[str, object]) -> int:
    return int(str(settings.get("request.timeout.ms", _DEFAULT_REQUEST_TIMEOUT_MS)))


class ConfluentProducer:
    """A librdkafka producer whose delivery reports a thread of its own serves."""

    def __init__(self, config: dict[str, Any]) -> None:
        try:
            self._producer = confluent_kafka.Producer({**config, "logger": log})
        except KafkaException as err:
            raise _error_of(err, definite=True) from err
        self._closed = threading.Event()
        self._poller = threading.Thread(
            target=self._serve_reports, name=f"rdkafka-{config['client.id']}", daemon=True
        )
        self._poller.start()

    def _serve_reports(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def send(self, topic: str, partition: int, value: bytes) -> DeliveryFuture:
        if self._closed.is_set():
            raise OperationError("ProducerClosed", "the producer is closed", definite=True)
        future = DeliveryFuture()

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                offset = msg.offset()
                future.succeed(SendResult(offset if offset is not None and offset >= 0 else None))
                return
            # librdkafka resends a batch answered NOT_LEADER_FOR_PARTITION whatever its
            # retries (docs/clients.md), so a broker's refusal may follow an attempt that
            # landed: only a record that never left the client is definite.
            future.fail(OperationError(err.name(), err.str(), definite=err.code() in NEVER_SENT))

        try:
            self._producer.produce(topic, value, partition=partition, on_delivery=delivered)
        except BufferError as err:
            raise OperationError("_QUEUE_FULL", str(err), definite=True) from err
        except KafkaException as err:
            raise _error_of(err, definite=True) from err
        return future

    def flush(self, timeout_s: float | None = None) -> None:
        left = self._producer.flush(-1 if timeout_s is None else timeout_s)
        if left:
            raise TimeoutError(f"{left} sends still without an outcome after {timeout_s} s")

    def close(self, timeout_s: float | None = None) -> None:
        """Purge what was never sent (it fails definite), wait for what is in flight."""
        if self._closed.is_set():
            return
        self._producer.purge(in_queue=True, in_flight=False)
        with contextlib.suppress(TimeoutError):
            self.flush(timeout_s)
        self._producer.purge(in_queue=True, in_flight=True)
        self._producer.flush(1.0)  # serves the purged sends' reports
        self._closed.set()
        self._poller.join(timeout=5)


class ConfluentConsumer:
    """A librdkafka consumer that assigns; it seeks by assigning, so positions are known."""

    def __init__(
        self, config: dict[str, Any], *, in_group: bool, reset: str, timeout_s: float
    ) -> None:
        try:
            self._consumer = confluent_kafka.Consumer({**config, "logger": log})
        except KafkaException as err:
            raise _error_of(err, definite=True) from err
        self._in_group = in_group
        self._fetch_wait_ms = int(config.get("fetch.wait.max.ms", FETCH_WAIT_MS))
        self._reset = reset
        self._timeout_s = timeout_s
        self._positions: dict[TopicPartition, int] = {}

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Each partition from the group's committed offset, else where auto.offset.reset
        says; the starting offsets are looked up here so that `position` knows them."""
        tps = list(partitions)
        try:
            committed = self._committed(tps)
            starts = {tp: committed.get(tp, -1) for tp in tps}
            for tp, offset in starts.items():
                if offset < 0:
                    low, high = self._consumer.get_watermark_offsets(
                        KafkaTopicPartition(*tp), timeout=self._timeout_s, cached=False
                    )
                    starts[tp] = high if self._reset == "latest" else low
            self._positions = starts
            self._assign()
        except KafkaException as err:
            raise _error_of(err) from err

    def _committed(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not self._in_group:
            return {}
        answered = self._consumer.committed(
            [KafkaTopicPartition(*tp) for tp in tps], timeout=self._timeout_s
        )
        for tp in answered:
            if tp.error is not None:
                raise KafkaException(tp.error)
        return {(tp.topic, tp.partition): tp.offset for tp in answered}

    def _assign(self) -> None:
        self._consumer.assign(
            [KafkaTopicPartition(t, p, offset) for (t, p), offset in self._positions.items()]
        )

    def position(self, tp: TopicPartition) -> int:
        try:
            return self._positions[tp]
        except KeyError:
            raise OperationError("_UNKNOWN_PARTITION", f"{tp} is not assigned") from None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._positions:
            raise OperationError("_UNKNOWN_PARTITION", f"{tp} is not assigned", definite=True)
        self._positions[tp] = offset
        try:
            self._assign()
        except KafkaException as err:
            raise _error_of(err) from err

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        try:
            low, _high = self._consumer.get_watermark_offsets(
                KafkaTopicPartition(*tp), timeout=self._timeout_s, cached=False
            )
        except KafkaException as err:
            raise _error_of(err) from err
        self.seek(tp, low)

    def poll(self, timeout_ms: int) -> list[Record]:
        """The records fetched after this call began: the first to come within the timeout
        and those with it; if there are none and librdkafka reported an error instead, that
        error."""
        try:
            # Records librdkafka fetched before this poll was invoked must not be returned:
            # the history reads a poll as the log's state between its invocation and its
            # completion (a power loss between a prefetch and the poll would otherwise seem
            # survived). Assigning again discards them and fetches anew from the positions.
            self._assign()
            # The fresh fetch may wait for one already in flight (a long poll of at most
            # fetch.wait.max.ms at a log's end) before it is sent.
            wait_s = (timeout_ms + self._fetch_wait_ms) / 1000
            messages = self._consumer.consume(1, wait_s)  # the first to come
            if messages:  # and what came with it
                messages += self._consumer.consume(_MAX_POLL_RECORDS - 1, 0)
        except KafkaException as err:
            raise _error_of(err) from err
        records: list[Record] = []
        errors: list[KafkaError] = []
        for msg in messages:
            error = msg.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    errors.append(error)
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            records.append(Record(topic, partition, offset, msg.value()))
            self._positions[(topic, partition)] = offset + 1
        if not records and errors:
            raise _error_of(errors[0])
        return records

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        asked = [KafkaTopicPartition(t, p, o) for (t, p), o in offsets.items()]
        try:
            answered = self._consumer.commit(offsets=asked, asynchronous=False) or []
        except KafkaException as err:
            code = err.args[0].code() if isinstance(err.args[0], KafkaError) else None
            raise _error_of(err, definite=code in COMMIT_REFUSED) from err
        failed = [(tp, tp.error) for tp in answered if tp.error is not None]
        if failed:
            first = failed[0][1]
            committed = {(tp.topic, tp.partition): tp.offset for tp in answered if tp.error is None}
            raise OperationError(
                first.name(),
                first.str(),
                definite=all(error.code() in COMMIT_REFUSED for _, error in failed),
                committed=committed,
            )

    def close(self) -> None:
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as err:
            raise OperationError(type(err).__name__, str(err)) from err


class ConfluentGroupConsumer(ConfluentConsumer):
    """A librdkafka consumer that subscribes: a member of its group, whose coordinator
    assigns it partitions at each rebalance (librdkafka's eager protocols, range and
    round-robin: everything revoked, then given). librdkafka does not tell its generation."""

    def __init__(self, config: dict[str, Any], *, reset: str, timeout_s: float) -> None:
        super().__init__(config, in_group=True, reset=reset, timeout_s=timeout_s)
        self._assignments = 0
        self._owned: list[TopicPartition] = []

    def subscribe(self, topic: str) -> None:
        def assigned(_consumer: object, partitions: list[KafkaTopicPartition]) -> None:
            self._assignments += 1
            self._owned = sorted((tp.topic, tp.partition) for tp in partitions)
            self._positions = {}  # known again from each partition's first record

        def revoked(_consumer: object, _partitions: list[KafkaTopicPartition]) -> None:
            self._owned = []
            self._positions = {}

        try:
            self._consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
        except KafkaException as err:
            raise _error_of(err, definite=True) from err

    def assignment(self) -> list[TopicPartition]:
        return list(self._owned)

    def assignments(self) -> int:
        return self._assignments

    def generation(self) -> int:
        return -1

    def position(self, tp: TopicPartition) -> int:
        """Where the member reads `tp` next: known from its records, else the group's
        committed offset (librdkafka starts there)."""
        if tp in self._positions:
            return self._positions[tp]
        if tp not in self._owned:
            raise OperationError("_UNKNOWN_PARTITION", f"{tp} is not assigned")
        try:
            committed = self._committed([tp]).get(tp, -1)
        except KafkaException as err:
            raise _error_of(err) from err
        if committed < 0:
            raise OperationError("_NO_OFFSET", f"{tp}: no committed offset to start from")
        return committed

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._owned:
            raise OperationError("_UNKNOWN_PARTITION", f"{tp} is not assigned", definite=True)
        self._positions[tp] = offset
        try:
            self._consumer.seek(KafkaTopicPartition(*tp, offset))
        except KafkaException as err:
            raise _error_of(err) from err

    def _assign(self) -> None:
        """Discard what was fetched before this poll, as `ConfluentConsumer.poll` does, by
        seeking the partitions whose positions are known (assigning would leave the group)."""
        for tp in self._owned:
            if tp in self._positions:
                with contextlib.suppress(KafkaException):  # not fetching yet: nothing kept
                    self._consumer.seek(KafkaTopicPartition(*tp, self._positions[tp]))


class ConfluentAdmin:
    """librdkafka's AdminClient, and a consumer of no group for the high watermarks."""

    def __init__(self, bootstrap: str, *, request_timeout_ms: int) -> None:
        self._timeout_s = request_timeout_ms / 1000
        self._bootstrap = bootstrap
        self._admin = AdminClient(
            {"bootstrap.servers": bootstrap, "socket.timeout.ms": request_timeout_ms}, logger=log
        )
        self._offsets: confluent_kafka.Consumer | None = None

    def create_topic(
        self, name: str, partitions: int, *, replication_factor: int, config: Mapping[str, str]
    ) -> bool:
        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(config),
        )
        try:
            futures = self._admin.create_topics(
                [topic], request_timeout=self._timeout_s, operation_timeout=self._timeout_s
            )
            futures[name].result(timeout=self._timeout_s * 2)
        except KafkaException as err:
            error = err.args[0]
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            if isinstance(error, KafkaError) and error.code() in TOPIC_REFUSED:
                raise TopicRefusedError(error.name(), error.str(), definite=True) from err
            raise _error_of(err) from err
        return True

    def describe_topic(self, name: str) -> TopicState | None:
        try:
            metadata = self._admin.list_topics(topic=name, timeout=self._timeout_s)
        except KafkaException as err:
            raise _error_of(err) from err
        topic = metadata.topics.get(name)
        if topic is None:
            return None
        if topic.error is not None:
            if topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise _error_of(topic.error)
        return TopicState(
            name,
            [
                PartitionState(
                    p.id, p.leader if p.leader >= 0 else None, list(p.replicas), list(p.isrs)
                )
                for p in sorted(topic.partitions.values(), key=lambda p: p.id)
            ],
        )

    def end_offset(self, tp: TopicPartition) -> int:
        if self._offsets is None:
            self._offsets = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": self._bootstrap,
                    "group.id": f"squall-offsets-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "logger": log,
                }
            )
        try:
            _low, high = self._offsets.get_watermark_offsets(
                KafkaTopicPartition(*tp), timeout=self._timeout_s, cached=False
            )
        except KafkaException as err:
            raise _error_of(err) from err
        return int(high)

    def close(self) -> None:
        if self._offsets is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                self._offsets.close()


class ConfluentClientFactory:
    """Opens confluent-kafka's Producer, Consumer and AdminClient behind the workload's
    protocol, against the brokers' Kafka listeners."""

    name = "confluent-kafka"

    def producer(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: Literal["sync", "async"],
        settings: Mapping[str, object],
        client_id: str,
    ) -> ConfluentProducer:
        config = producer_config(bootstrap, acks=acks, mode=mode, settings=settings)
        config["client.id"] = client_id
        return ConfluentProducer(config)

    def consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> ConfluentConsumer:
        return ConfluentConsumer(
            **_consumer_arguments(bootstrap, settings, client_id),
            in_group="group.id" in settings,
        )

    def group_consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> GroupConsumer:
        return ConfluentGroupConsumer(**_consumer_arguments(bootstrap, settings, client_id))

    def admin(self, bootstrap: str, *, request_timeout_ms: int) -> ConfluentAdmin:
        return ConfluentAdmin(bootstrap, request_timeout_ms=request_timeout_ms)


def producer_config(
    bootstrap: str, *, acks: int, mode: Literal["sync", "async"], settings: Mapping[str, object]
) -> dict[str, Any]:
    """librdkafka's producer config for the workload's settings."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": False,
        "socket.nagle.disable": True,  # as Kafka's own clients: no 40 ms stalls on small requests
        **({"linger.ms": 0} if mode == "sync" else {}),
        **settings,
    }
    config.setdefault("socket.timeout.ms", _request_timeout_ms(settings))
    if "message.timeout.ms" not in settings and "delivery.timeout.ms" not in settings:
        attempts = _retries(settings) + 1
        config["message.timeout.ms"] = _request_timeout_ms(settings) * attempts + 1_000
    return config


def _consumer_arguments(
    bootstrap: str, settings: Mapping[str, object], client_id: str
) -> dict[str, Any]:
    """A consumer's config, reset policy and request timeout, as its constructor takes them."""
    config = consumer_config(bootstrap, settings)
    config["client.id"] = client_id
    return {
        "config": config,
        "reset": str(settings.get("auto.offset.reset", "earliest")),
        "timeout_s": _request_timeout_ms(settings) / 1000,
    }


def consumer_config(bootstrap: str, settings: Mapping[str, object]) -> dict[str, Any]:
    """librdkafka's consumer config for the workload's settings; outside a group, a group
    of its own that never commits (librdkafka wants one)."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.nagle.disable": True,
        **{k: v for k, v in settings.items() if k not in GROUP_KEYS_DROPPED},
        "enable.auto.commit": False,
    }
    config.setdefault("group.id", f"squall-reader-{uuid.uuid4().hex}")
    config.setdefault("fetch.wait.max.ms", FETCH_WAIT_MS)
    config.setdefault("max.partition.fetch.bytes", FETCH_BYTES)
    # librdkafka's request.timeout.ms is the producer's; its consumers time out requests
    # (fetches aside, commits and offset lookups too) after socket.timeout.ms, 60 s by default.
    timeout_ms = config.pop("request.timeout.ms", None)
    if timeout_ms is not None:
        config.setdefault("socket.timeout.ms", timeout_ms)
    return config
