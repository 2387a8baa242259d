"""kafka-python as the workload's client protocol, through Kafka's protocol.

Settings by Kafka's names become kafka-python's keyword arguments (dots to underscores:
``request.timeout.ms`` is ``request_timeout_ms``); the workload's Kafka 0.8 names are
translated (``message.send.max.retries`` to ``retries``, ``queue.buffering.max.ms`` to
``linger_ms``), its ZooKeeper group keys dropped (a Kafka client's group lives on the
brokers) and automatic commits are always off. A setting kafka-python does not know is an
error. Idempotence, kafka-python's default, is off: the brokers do not serve InitProducerId
yet. The delivery timeout is bounded by the request timeout times the attempts.

Outcomes (docs/clients.md): a send fails `definite` only when kafka-python refused it before
sending (a full buffer, a record too large, a closed producer) or when the producer makes a
single attempt (no retries) and the broker refused it before appending
(`workloads.kafka_codes`); everything else, a timeout above all, is indeterminate. A commit
refused by the coordinator for its generation, member or sizes is definite.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import kafka
import kafka.errors as kerrors
from kafka import ConsumerRebalanceListener
from kafka.admin import NewTopic
from kafka.producer.future import FutureRecordMetadata
from kafka.structs import OffsetAndMetadata

from workloads.client import (
    OperationError,
    PartitionState,
    Record,
    SendResult,
    TopicPartition,
    TopicRefusedError,
    TopicState,
)
from workloads.delivery import DeliveryFuture
from workloads.kafka_codes import COMMIT_REFUSED, send_definite

RENAMED = {
    "message.send.max.retries": "retries",
    "queue.buffering.max.ms": "linger_ms",
    "group.id": "group_id",
}
DROPPED = ("zookeeper.connect", "auto.commit.enable")
TOPIC_REFUSED = (
    kerrors.InvalidTopicError,
    kerrors.InvalidPartitionsError,
    kerrors.InvalidReplicationFactorError,
    kerrors.InvalidConfigurationError,
    kerrors.InvalidRequestError,
)
_DEFAULT_REQUEST_TIMEOUT_MS = 30_000
_MAX_POLL_RECORDS = 500


def keyword_settings(settings: Mapping[str, object], known: Mapping[str, object]) -> dict[str, Any]:
    """`settings` by Kafka's names as kafka-python's keyword arguments; ValueError naming a
    setting it does not have."""
    out: dict[str, Any] = {}
    for name, value in settings.items():
        if name in DROPPED:
            continue
        keyword = RENAMED.get(name, name.replace(".", "_"))
        if keyword not in known:
            raise ValueError(
                f"kafka-python has no setting {name!r} (as {keyword!r}); use a name from "
                "its KafkaProducer/KafkaConsumer documentation"
            )
        out[keyword] = value
    return out


def _field(described: Mapping[str, Any], *names: str) -> Any:
    """A field of a Metadata answer as kafka-python gives it, by Kafka's name for it (its
    older releases used shorter ones)."""
    for name in names:
        if name in described:
            return described[name]
    raise KeyError(f"no field {' or '.join(names)} in {sorted(described)}")


def _error_of(err: BaseException, *, definite: bool = False) -> OperationError:
    return OperationError(type(err).__name__, str(err) or repr(err), definite=definite)


def _code(err: BaseException) -> int | None:
    errno = getattr(err, "errno", None)
    return errno if isinstance(errno, int) else None


class KafkaPythonProducer:
    """A KafkaProducer whose futures complete a DeliveryFuture on its I/O thread."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._retries = int(settings.get("retries", 0))
        try:
            self._producer = kafka.KafkaProducer(**settings)
        except kerrors.KafkaError as err:
            raise _error_of(err, definite=True) from err

    def send(self, topic: str, partition: int, value: bytes) -> DeliveryFuture:
        future = DeliveryFuture()
        try:
            sent: FutureRecordMetadata = self._producer.send(topic, value, partition=partition)
        except (kerrors.KafkaError, AssertionError) as err:  # refused before sending
            raise _error_of(err, definite=True) from err

        def delivered(metadata: Any) -> None:
            offset = metadata.offset
            future.succeed(SendResult(offset if offset is not None and offset >= 0 else None))

        def failed(err: BaseException) -> None:
            code = _code(err)
            definite = code is not None and send_definite(code, retries=self._retries)
            future.fail(_error_of(err, definite=definite))

        sent.add_callback(delivered)
        sent.add_errback(failed)
        return future

    def flush(self, timeout_s: float | None = None) -> None:
        try:
            self._producer.flush(timeout_s)
        except kerrors.KafkaTimeoutError as err:
            raise TimeoutError(str(err)) from err

    def close(self, timeout_s: float | None = None) -> None:
        """Close; sends still in flight after `timeout_s` are ended (their futures fail)."""
        try:
            self._producer.close(timeout_s)
        except kerrors.KafkaTimeoutError:
            # kafka-python's close() stops at its flush while sends are pending, leaving the
            # producer open; end them as its own close would have, after the timeout.
            sender = getattr(self._producer, "_sender", None)
            if sender is not None:
                sender.force_close()
                sender.join(5)
        except kerrors.KafkaError as err:
            raise _error_of(err) from err


class KafkaPythonConsumer:
    """A KafkaConsumer that assigns; positions resolved at once, from the group's commits."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._timeout_ms = int(settings.get("request_timeout_ms", _DEFAULT_REQUEST_TIMEOUT_MS))
        try:
            self._consumer = kafka.KafkaConsumer(**settings)
        except kerrors.KafkaError as err:
            raise _error_of(err, definite=True) from err

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        tps = [kafka.TopicPartition(t, p) for t, p in partitions]
        try:
            self._consumer.assign(tps)
            for tp in tps:  # looks up each starting offset now (committed, else the reset)
                self._consumer.position(tp, timeout_ms=self._timeout_ms)
        except kerrors.KafkaError as err:
            raise _error_of(err) from err

    def position(self, tp: TopicPartition) -> int:
        try:
            offset = self._consumer.position(kafka.TopicPartition(*tp), timeout_ms=self._timeout_ms)
        except kerrors.KafkaError as err:
            raise _error_of(err) from err
        if offset is None:
            raise OperationError("KafkaTimeoutError", f"no position for {tp} yet")
        return int(offset)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        try:
            self._consumer.seek(kafka.TopicPartition(*tp), offset)
        except (kerrors.KafkaError, AssertionError) as err:
            raise _error_of(err, definite=True) from err

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        try:
            self._consumer.seek_to_beginning(kafka.TopicPartition(*tp))
        except (kerrors.KafkaError, AssertionError) as err:
            raise _error_of(err, definite=True) from err

    def poll(self, timeout_ms: int) -> list[Record]:
        try:
            batches = self._consumer.poll(timeout_ms=timeout_ms, max_records=_MAX_POLL_RECORDS)
        except kerrors.KafkaError as err:
            raise _error_of(err) from err
        return [
            Record(r.topic, r.partition, r.offset, r.value)
            for records in batches.values()
            for r in records
        ]

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        asked = {
            kafka.TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
            for (t, p), o in offsets.items()
        }
        try:
            self._consumer.commit(asked, timeout_ms=self._timeout_ms)
        except kerrors.KafkaError as err:
            raise _error_of(err, definite=_code(err) in COMMIT_REFUSED) from err

    def close(self) -> None:
        try:
            self._consumer.close(autocommit=False, timeout_ms=self._timeout_ms)
        except kerrors.KafkaError as err:
            raise _error_of(err) from err


class KafkaPythonGroupConsumer(KafkaPythonConsumer):
    """A KafkaConsumer that subscribes: a member of its group, whose coordinator assigns it
    partitions at each rebalance (kafka-python's eager protocol: all revoked, then given)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        self._assignments = 0
        self._generation = -1

    def subscribe(self, topic: str) -> None:
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: object) -> None:
                pass

            def on_partitions_assigned(self, assigned: object) -> None:
                member._assignments += 1
                member._generation = member._consumer.group_metadata().generation_id

        try:
            self._consumer.subscribe([topic], listener=Listener())
        except (kerrors.KafkaError, AssertionError, ValueError) as err:
            raise _error_of(err, definite=True) from err

    def assignment(self) -> list[TopicPartition]:
        return sorted((tp.topic, tp.partition) for tp in self._consumer.assignment())

    def assignments(self) -> int:
        return self._assignments

    def generation(self) -> int:
        return self._generation


class KafkaPythonAdmin:
    """KafkaAdminClient, and a consumer of no group for the high watermarks."""

    def __init__(self, bootstrap: str, *, request_timeout_ms: int) -> None:
        self._bootstrap = bootstrap
        self._timeout_ms = request_timeout_ms
        try:
            self._admin = kafka.KafkaAdminClient(
                bootstrap_servers=bootstrap, request_timeout_ms=request_timeout_ms
            )
        except kerrors.KafkaError as err:
            raise _error_of(err) from err
        self._offsets: kafka.KafkaConsumer | None = None

    def create_topic(
        self, name: str, partitions: int, *, replication_factor: int, config: Mapping[str, str]
    ) -> bool:
        topic = NewTopic(name, partitions, replication_factor, topic_configs=dict(config))
        try:
            self._admin.create_topics([topic], timeout_ms=self._timeout_ms, raise_errors=True)
        except kerrors.TopicAlreadyExistsError:
            return False
        except TOPIC_REFUSED as err:
            raise TopicRefusedError(type(err).__name__, str(err), definite=True) from err
        except kerrors.KafkaError as err:
            raise _error_of(err) from err
        return True

    def describe_topic(self, name: str) -> TopicState | None:
        try:
            described = self._admin.describe_topics([name])
        except kerrors.UnknownTopicOrPartitionError:
            return None
        except kerrors.KafkaError as err:
            raise _error_of(err) from err
        topic = next((t for t in described if _field(t, "name", "topic") == name), None)
        code = _field(topic, "error_code") if topic is not None else None
        if topic is None or code == kerrors.UnknownTopicOrPartitionError.errno:
            return None
        if code:
            error = kerrors.for_code(code)
            raise OperationError(error.__name__, f"describing topic {name}: {error.description}")
        partitions = [
            PartitionState(
                _field(p, "partition_index", "partition"),
                leader if (leader := _field(p, "leader_id", "leader")) >= 0 else None,
                list(_field(p, "replica_nodes", "replicas")),
                list(_field(p, "isr_nodes", "isr")),
            )
            for p in topic["partitions"]
        ]
        return TopicState(name, sorted(partitions, key=lambda p: p.partition))

    def end_offset(self, tp: TopicPartition) -> int:
        try:
            if self._offsets is None:
                self._offsets = kafka.KafkaConsumer(
                    bootstrap_servers=self._bootstrap,
                    group_id=None,
                    enable_auto_commit=False,
                    request_timeout_ms=self._timeout_ms,
                )
            partition = kafka.TopicPartition(*tp)
            ends = self._offsets.end_offsets([partition], timeout_ms=self._timeout_ms)
        except kerrors.KafkaError as err:
            raise _error_of(err) from err
        return int(ends[partition])

    def close(self) -> None:
        with contextlib.suppress(kerrors.KafkaError):
            if self._offsets is not None:
                self._offsets.close(autocommit=False)
            self._admin.close()


class KafkaPythonClientFactory:
    """Opens kafka-python's producer, consumer and admin client behind the workload's
    protocol, against the brokers' Kafka listeners."""

    name = "kafka-python"

    def producer(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: Literal["sync", "async"],
        settings: Mapping[str, object],
        client_id: str,
    ) -> KafkaPythonProducer:
        return KafkaPythonProducer(
            producer_settings(
                bootstrap, acks=acks, mode=mode, settings=settings, client_id=client_id
            )
        )

    def consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> KafkaPythonConsumer:
        return KafkaPythonConsumer(consumer_settings(bootstrap, settings, client_id=client_id))

    def group_consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> KafkaPythonGroupConsumer:
        return KafkaPythonGroupConsumer(consumer_settings(bootstrap, settings, client_id=client_id))

    def admin(self, bootstrap: str, *, request_timeout_ms: int) -> KafkaPythonAdmin:
        return KafkaPythonAdmin(bootstrap, request_timeout_ms=request_timeout_ms)


def producer_settings(
    bootstrap: str,
    *,
    acks: int,
    mode: Literal["sync", "async"],
    settings: Mapping[str, object],
    client_id: str,
) -> dict[str, Any]:
    """KafkaProducer's keyword arguments for the workload's settings."""
    out: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "client_id": client_id,
        "acks": "all" if acks == -1 else acks,
        "enable_idempotence": False,
        "linger_ms": 0,
        "retries": 0,
        **keyword_settings(settings, kafka.KafkaProducer.DEFAULT_CONFIG),
    }
    if mode == "sync":
        out["linger_ms"] = 0
    request_timeout_ms = int(out.get("request_timeout_ms", _DEFAULT_REQUEST_TIMEOUT_MS))
    if "delivery.timeout.ms" not in settings:
        out["delivery_timeout_ms"] = (
            request_timeout_ms * (int(out["retries"]) + 1) + int(out["linger_ms"]) + 1_000
        )
    if "max.block.ms" not in settings:  # send() waits this long for a topic's metadata
        out["max_block_ms"] = request_timeout_ms
    return out


def consumer_settings(
    bootstrap: str, settings: Mapping[str, object], *, client_id: str
) -> dict[str, Any]:
    """KafkaConsumer's keyword arguments for the workload's settings (no group: none)."""
    return {
        "bootstrap_servers": bootstrap,
        "client_id": client_id,
        "group_id": None,
        **keyword_settings(settings, kafka.KafkaConsumer.DEFAULT_CONFIG),
        "enable_auto_commit": False,
    }
