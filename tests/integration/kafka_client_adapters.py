"""Three real Kafka clients behind one small interface, for the tests that run each of them
against our brokers' Kafka listeners: kafka-python, confluent-kafka (librdkafka) and aiokafka,
each with its own defaults except where a test says otherwise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiokafka
import confluent_kafka
import kafka

Acks = int | str


@dataclass(frozen=True)
class Sent:
    """What a producer was told of each record: its offset, or the error that failed it."""

    offsets: list[int | None]
    errors: list[str]


@dataclass(frozen=True)
class KafkaClient:
    """One client library: sends values to partition 0 of a topic and reads it back;
    commits a group's offset of it, and resumes a new consumer of the group from there
    (the first offset it reads, or None)."""

    name: str
    produce: Callable[[str, str, Sequence[bytes], Acks, dict[str, Any]], Sent]
    read: Callable[[str, str, int, float], list[tuple[int, bytes]]]
    commit: Callable[[str, str, str, int], None]
    resume: Callable[[str, str, str, float], tuple[int | None, int | None]]
    """(committed offset as the client reads it, first offset a new member polls)."""


def _kafka_python_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], acks: Acks, extra: dict[str, Any]
) -> Sent:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=acks, **extra)
    offsets: list[int | None] = []
    errors: list[str] = []
    try:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(timeout=60)
        for future in futures:
            try:
                offsets.append(future.get(timeout=60).offset)
            except kafka.errors.KafkaError as err:
                offsets.append(None)
                errors.append(repr(err))
    finally:
        producer.close(timeout=10)
    return Sent(offsets, errors)


def _kafka_python_read(
    bootstrap: str, topic: str, count: int, timeout: float
) -> list[tuple[int, bytes]]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
    )
    partition = kafka.TopicPartition(topic, 0)
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records]
    finally:
        consumer.close()
    return got


def _kafka_python_commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    partition = kafka.TopicPartition(topic, 0)
    try:
        consumer.assign([partition])
        consumer.commit({partition: kafka.OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def _kafka_python_resume(
    bootstrap: str, group: str, topic: str, timeout: float
) -> tuple[int | None, int | None]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    partition = kafka.TopicPartition(topic, 0)
    try:
        consumer.assign([partition])
        committed = consumer.committed(partition)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                return committed, records[0].offset
        return committed, None
    finally:
        consumer.close()


def _confluent_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], acks: Acks, extra: dict[str, Any]
) -> Sent:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": str(acks), **extra}
    )
    offsets: list[int | None] = [None] * len(values)
    errors: list[str] = []

    def delivered(at: int) -> Callable[[Any, Any], None]:
        def report(err: Any, message: Any) -> None:
            offset = message.offset()  # None under acks=0
            if err is not None:
                errors.append(str(err))
            elif offset is not None and offset >= 0:
                offsets[at] = offset

        return report

    for at, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=delivered(at))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(60)
    assert left == 0, f"{left} records still queued after 60 s"
    return Sent(offsets, errors)


def _confluent_read(
    bootstrap: str, topic: str, count: int, timeout: float
) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "squall-tests", "enable.auto.commit": False}
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    got.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return got


def _confluent_commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[confluent_kafka.TopicPartition(topic, 0, offset)], asynchronous=False
        )
    finally:
        consumer.close()


def _confluent_resume(
    bootstrap: str, group: str, topic: str, timeout: float
) -> tuple[int | None, int | None]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        (known,) = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
        committed = known.offset if known.offset >= 0 else None
        consumer.assign([confluent_kafka.TopicPartition(topic, 0)])  # from the group's commit
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return committed, message.offset()
        return committed, None
    finally:
        consumer.close()


def _aiokafka_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], acks: Acks, extra: dict[str, Any]
) -> Sent:
    async def run() -> Sent:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, **extra)
        await producer.start()
        offsets: list[int | None] = []
        errors: list[str] = []
        try:
            futures = [await producer.send(topic, value, partition=0) for value in values]
            for future in futures:
                try:
                    metadata = await future  # None under acks=0
                    offsets.append(None if metadata is None else metadata.offset)
                except aiokafka.errors.KafkaError as err:
                    offsets.append(None)
                    errors.append(repr(err))
        finally:
            await producer.stop()
        return Sent([o if o is not None and o >= 0 else None for o in offsets], errors)

    return asyncio.run(asyncio.wait_for(run(), 120))


def _aiokafka_read(
    bootstrap: str, topic: str, count: int, timeout: float
) -> list[tuple[int, bytes]]:
    async def run() -> list[tuple[int, bytes]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        got: list[tuple[int, bytes]] = []
        try:
            partition = aiokafka.TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    got += [(r.offset, r.value) for r in records if r.value is not None]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _aiokafka_commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    async def run() -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.commit({partition: offset})
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(run(), 60))


def _aiokafka_resume(
    bootstrap: str, group: str, topic: str, timeout: float
) -> tuple[int | None, int | None]:
    async def run() -> tuple[int | None, int | None]:
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition(topic, 0)
            consumer.assign([partition])
            committed = await consumer.committed(partition)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    return committed, records[0].offset
            return committed, None
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), timeout + 30))


CLIENTS = (
    KafkaClient(
        "kafka-python",
        _kafka_python_produce,
        _kafka_python_read,
        _kafka_python_commit,
        _kafka_python_resume,
    ),
    KafkaClient(
        "confluent-kafka", _confluent_produce, _confluent_read, _confluent_commit, _confluent_resume
    ),
    KafkaClient("aiokafka", _aiokafka_produce, _aiokafka_read, _aiokafka_commit, _aiokafka_resume),
)
