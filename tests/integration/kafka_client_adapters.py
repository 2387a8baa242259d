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
    """One client library: sends values to partition 0 of a topic and reads it back."""

    name: str
    produce: Callable[[str, str, Sequence[bytes], Acks, dict[str, Any]], Sent]
    read: Callable[[str, str, int, float], list[tuple[int, bytes]]]


def _kafka_python_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], acks: Acks, extra: dict[str, Any]
) -> Sent:
    settings: dict[str, Any] = {"enable_idempotence": False, **extra}
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=acks, **settings)
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


def _confluent_produce(
    bootstrap: str, topic: str, values: Sequence[bytes], acks: Acks, extra: dict[str, Any]
) -> Sent:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": str(acks), "enable.idempotence": False, **extra}
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


CLIENTS = (
    KafkaClient("kafka-python", _kafka_python_produce, _kafka_python_read),
    KafkaClient("confluent-kafka", _confluent_produce, _confluent_read),
    KafkaClient("aiokafka", _aiokafka_produce, _aiokafka_read),
)
