"""squall's own client library (`system_under_test.client`) as the workload's client protocol.

The one workload module that talks to squall's client. Its errors and its broker's become
`OperationError`, named by the broker's error code (a ProduceError's, a BrokerError's) or
else by the exception's class, with the message unchanged. What is definite depends on the
call: a ProduceError says so itself and a closed producer sent nothing; an OffsetCommitError
says so itself and names what it committed; nothing else is. Other exceptions (a
TimeoutError waiting for a send, an OSError) pass through unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeVar

from system_under_test.client import (
    AdminClient,
    ClientError,
    Consumer,
    OffsetCommitError,
    ProduceError,
    Producer,
    ProducerClosedError,
)
from system_under_test.client import GroupConsumer as SquallMember
from system_under_test.client import SendFuture as SquallFuture
from system_under_test.client.group_consumer import MEMBER_KEYS
from system_under_test.errors import (
    BrokerError,
    InvalidConfigError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from workloads.client import (
    GroupConsumer,
    OperationError,
    PartitionState,
    Record,
    SendFuture,
    SendResult,
    TopicPartition,
    TopicRefusedError,
    TopicState,
)

log = logging.getLogger(__name__)

ZOOKEEPER_GROUP_KEYS = ("zookeeper.connect", "auto.commit.enable")
"""Settings of a group whose offsets ZooKeeper keeps, which a member of a coordinated group
does not take."""
SQUALL_ERRORS = (ClientError, BrokerError)
"""The exceptions squall's client raises for its own and its brokers' failures."""


def error_code(err: BaseException) -> str:
    """The broker's error code of `err`, else its class name."""
    if isinstance(err, ProduceError):
        return err.error.name
    if isinstance(err, BrokerError):
        return err.code.name
    return type(err).__name__


def operation_error(err: BaseException, *, definite: bool = False) -> BaseException:
    """`err` as the workload sees it: a squall error becomes an OperationError."""
    if isinstance(err, SQUALL_ERRORS):
        return OperationError(error_code(err), str(err), definite=definite)
    return err


def send_error(err: BaseException) -> BaseException:
    """A failed send: definite if the ProduceError says so or the producer was closed."""
    if isinstance(err, ProduceError):
        return operation_error(err, definite=err.definite)
    return operation_error(err, definite=isinstance(err, ProducerClosedError))


def commit_error(err: BaseException) -> BaseException:
    """A failed commit: definite, and what was committed, as the OffsetCommitError says."""
    if isinstance(err, OffsetCommitError):
        return OperationError(
            error_code(err), str(err), definite=err.definite, committed=err.committed
        )
    return operation_error(err)


class SquallSendFuture:
    """A squall SendFuture giving a SendResult (offset None for acks=0)."""

    __slots__ = ("_future",)

    def __init__(self, future: SquallFuture) -> None:
        self._future = future

    def result(self, timeout_s: float | None = None) -> SendResult:
        try:
            metadata = self._future.result(timeout_s)
        except SQUALL_ERRORS as err:
            raise send_error(err) from err
        return SendResult(metadata.offset if metadata.offset >= 0 else None)

    def add_callback(self, fn: Callable[[SendFuture], None]) -> None:
        self._future.add_callback(lambda _: fn(self))


class SquallProducer:
    """A squall Producer behind the workload's Producer protocol."""

    __slots__ = ("_producer",)

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    def send(self, topic: str, partition: int, value: bytes) -> SquallSendFuture:
        try:
            future = self._producer.send(topic, value, partition=partition)
        except SQUALL_ERRORS as err:
            raise send_error(err) from err
        return SquallSendFuture(future)

    def flush(self, timeout_s: float | None = None) -> None:
        try:
            self._producer.flush(timeout_s)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err

    def close(self, timeout_s: float | None = None) -> None:
        try:
            self._producer.close(timeout_s)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err


class SquallConsumer:
    """A squall Consumer behind the workload's Consumer protocol."""

    __slots__ = ("_consumer",)

    def __init__(self, consumer: Consumer | SquallMember) -> None:
        self._consumer = consumer

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        try:
            self._consumer.assign(partitions)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err

    def position(self, tp: TopicPartition) -> int:
        try:
            return self._consumer.position(*tp)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err

    def seek(self, tp: TopicPartition, offset: int) -> None:
        try:
            self._consumer.seek(*tp, offset)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        try:
            self._consumer.seek_to_beginning(*tp)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err

    def poll(self, timeout_ms: int) -> list[Record]:
        try:
            records = self._consumer.poll(timeout_ms)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err
        return [Record(r.topic, r.partition, r.offset, r.value) for r in records]

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            self._consumer.commit(offsets)
        except SQUALL_ERRORS as err:
            raise commit_error(err) from err

    def close(self) -> None:
        try:
            self._consumer.close()
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err


class SquallGroupConsumer(SquallConsumer):
    """A squall GroupConsumer behind the workload's GroupConsumer protocol: a member of its
    group, whose coordinator assigns it partitions at each rebalance (eager)."""

    __slots__ = ("_member",)

    def __init__(self, member: SquallMember) -> None:
        super().__init__(member)
        self._member = member

    def subscribe(self, topic: str) -> None:
        try:
            self._member.subscribe(topic)
        except SQUALL_ERRORS as err:
            raise operation_error(err, definite=True) from err

    def assignment(self) -> list[TopicPartition]:
        return self._member.assignment()

    def assignments(self) -> int:
        return self._member.assignments

    def generation(self) -> int:
        return self._member.generation


class SquallAdmin:
    """A squall AdminClient behind the workload's Admin protocol."""

    __slots__ = ("_admin",)

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin

    def create_topic(
        self, name: str, partitions: int, *, replication_factor: int, config: Mapping[str, str]
    ) -> bool:
        try:
            self._admin.create_topic(
                name, partitions, replication_factor=replication_factor, config=dict(config)
            )
        except TopicAlreadyExistsError:
            return False
        except (InvalidConfigError, InvalidTopicError) as err:
            raise TopicRefusedError(error_code(err), str(err), definite=True) from err
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err
        return True

    def describe_topic(self, name: str) -> TopicState | None:
        try:
            described = self._admin.describe_topics([name])
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err
        topic = next((t for t in described if t.name == name), None)
        if topic is None:
            return None
        return TopicState(
            topic.name,
            [
                PartitionState(
                    p.partition, p.leader if p.leader >= 0 else None, list(p.replicas), list(p.isr)
                )
                for p in topic.partitions
            ],
        )

    def end_offset(self, tp: TopicPartition) -> int:
        try:
            return self._admin.list_offsets(*tp, "latest")
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err

    def close(self) -> None:
        try:
            self._admin.close()
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err


class SquallClientFactory:
    """Opens squall's Producer, Consumer and AdminClient behind the workload's protocol."""

    def producer(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: Literal["sync", "async"],
        settings: Mapping[str, object],
        client_id: str,
    ) -> SquallProducer:
        try:
            producer = Producer(
                bootstrap, acks=acks, mode=mode, config=settings, client_id=client_id
            )
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err
        return SquallProducer(producer)

    def consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> SquallConsumer:
        # A member's own settings (group_membership) are not a plain consumer's.
        return SquallConsumer(_opened(Consumer, bootstrap, settings, MEMBER_KEYS, client_id))

    def group_consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> GroupConsumer:
        # The group's coordinator keeps its offsets: ZooKeeper's are the plain consumer's.
        member = _opened(SquallMember, bootstrap, settings, ZOOKEEPER_GROUP_KEYS, client_id)
        return SquallGroupConsumer(member)

    def admin(self, bootstrap: str, *, request_timeout_ms: int) -> SquallAdmin:
        try:
            admin = AdminClient(bootstrap, request_timeout_ms=request_timeout_ms)
        except SQUALL_ERRORS as err:
            raise operation_error(err) from err
        return SquallAdmin(admin)


_C = TypeVar("_C", Consumer, SquallMember)


def _opened(
    kind: type[_C],
    bootstrap: str,
    settings: Mapping[str, object],
    dropped: Sequence[str],
    client_id: str,
) -> _C:
    """A squall consumer of `kind` with `settings` but the `dropped` keys."""
    config = {k: v for k, v in settings.items() if k not in dropped}
    try:
        return kind(bootstrap, config=config, client_id=client_id)
    except SQUALL_ERRORS as err:
        raise operation_error(err) from err
