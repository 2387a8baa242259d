"""SquallClientFactory's adapters: squall's results and errors in the client protocol's terms."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest

from system_under_test.client import (
    AdminClient,
    BrokerUnavailableError,
    ConsumedRecord,
    Consumer,
    OffsetCommitError,
    PartitionDescription,
    ProduceError,
    SendFuture,
    TopicDescription,
)
from system_under_test.client.batch import ProduceBatch
from system_under_test.errors import (
    ErrorCode,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from workloads.client import OperationError, Record, SendResult, TopicRefusedError
from workloads.squall_client import SquallAdmin, SquallConsumer, SquallSendFuture


def future(offset: int | None = None, error: ProduceError | None = None) -> SendFuture:
    batch = ProduceBatch("t", 0, time.monotonic())
    batch.items.append((None, b"1", 0))
    if error is not None:
        batch.fail(error)
    elif offset is not None:
        batch.complete(offset)
    return SendFuture(batch, 0)


def test_a_send_gives_its_offset_or_none_for_acks_zero() -> None:
    assert SquallSendFuture(future(7)).result() == SendResult(7)
    assert SquallSendFuture(future(-1)).result() == SendResult(None)
    with pytest.raises(TimeoutError):
        SquallSendFuture(future()).result(0)  # not squall's: passes through


def test_a_failed_send_keeps_its_code_message_and_definiteness() -> None:
    error = ProduceError(
        ErrorCode.NOT_LEADER_FOR_PARTITION, "moved", definite=False, topic="t", partition=0
    )
    adapted = SquallSendFuture(future(error=error))
    with pytest.raises(OperationError) as raised:
        adapted.result()
    assert raised.value.code == "NOT_LEADER_FOR_PARTITION" and not raised.value.definite
    assert str(raised.value) == str(error) and raised.value.__cause__ is error
    called: list[Any] = []
    adapted.add_callback(called.append)
    assert called == [adapted]  # done already: called at once, with the adapter


class FakeConsumer:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail

    def poll(self, timeout_ms: int) -> list[ConsumedRecord]:
        if self.fail is not None:
            raise self.fail
        return [ConsumedRecord("t", 1, 4, 0, b"k", b"12")]

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        if self.fail is not None:
            raise self.fail
        return dict(offsets)


def consumer(fail: BaseException | None = None) -> SquallConsumer:
    return SquallConsumer(cast(Consumer, FakeConsumer(fail)))


def test_poll_gives_records_and_errors_become_operation_errors() -> None:
    assert consumer().poll(0) == [Record("t", 1, 4, b"12")]
    broken = consumer(BrokerUnavailableError("refused"))
    with pytest.raises(OperationError) as raised:
        broken.poll(0)
    assert raised.value.code == "BrokerUnavailableError" and str(raised.value) == "refused"
    other = consumer(ValueError("a bug"))
    with pytest.raises(ValueError):
        other.poll(0)


def test_a_failed_commit_says_what_it_committed() -> None:
    error = OffsetCommitError("lost session", definite=False, committed={("t", 0): 7})
    with pytest.raises(OperationError) as raised:
        consumer(error).commit({("t", 0): 7, ("t", 1): 2})
    assert raised.value.code == "OffsetCommitError"
    assert not raised.value.definite and raised.value.committed == {("t", 0): 7}


class FakeAdmin:
    def __init__(self, create_error: BaseException | None = None) -> None:
        self.create_error = create_error

    def create_topic(self, name: str, partitions: int, **_: Any) -> None:
        if self.create_error is not None:
            raise self.create_error

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        partitions = [
            PartitionDescription(0, 2, 1, [1, 2, 3], [2, 3]),
            PartitionDescription(1, -1, 1, [2, 3, 1], []),
        ]
        return [TopicDescription("t", partitions)]


def admin(create_error: BaseException | None = None) -> SquallAdmin:
    return SquallAdmin(cast(AdminClient, FakeAdmin(create_error)))


def test_create_topic_says_whether_it_existed_and_when_it_never_will() -> None:
    assert admin().create_topic("t", 3, replication_factor=3, config={})
    existed = admin(TopicAlreadyExistsError(ErrorCode.TOPIC_ALREADY_EXISTS))
    assert existed.create_topic("t", 3, replication_factor=3, config={}) is False
    refused = admin(InvalidTopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "bad"))
    with pytest.raises(TopicRefusedError, match="bad"):
        refused.create_topic("t", 3, replication_factor=3, config={})
    early = admin(InvalidReplicationFactorError(ErrorCode.INVALID_REPLICATION_FACTOR, "1 broker"))
    with pytest.raises(OperationError) as raised:
        early.create_topic("t", 3, replication_factor=3, config={})
    assert (
        type(raised.value) is OperationError and raised.value.code == "INVALID_REPLICATION_FACTOR"
    )


def test_describe_topic_gives_leaders_by_broker_id_and_none_when_leaderless() -> None:
    described = admin()
    topic = described.describe_topic("t")
    assert topic is not None
    assert [(p.partition, p.leader, p.isr) for p in topic.partitions] == [
        (0, 2, [2, 3]),
        (1, None, []),
    ]
    assert described.describe_topic("other") is None
