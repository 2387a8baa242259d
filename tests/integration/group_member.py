"""One member of a consumer group, through a real Kafka client or squall's, in its own process (so that a
test can SIGKILL it): ``python -m tests.integration.group_member CLIENT BOOTSTRAP GROUP TOPIC``.

It subscribes, and after each poll that returned records commits the positions it reached
(processing before committing: at least once). It prints one JSON object a line, flushed:
``{"assigned": [partitions]}`` whenever its assignment changes, ``{"read": [[partition,
offset], ...]}`` for each poll's records, and ``{"committed": {partition: offset}}`` after
each commit the coordinator took. SIGTERM makes it close cleanly (leaving the group).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
stopping = False


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _stop(*_: object) -> None:
    global stopping
    stopping = True


def kafka_python(bootstrap: str, group: str, topic: str) -> None:
    import kafka

    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        client_id=f"member-{group}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    assigned: list[int] | None = None
    while not stopping:
        polled = consumer.poll(timeout_ms=300)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != assigned:
            assigned = now
            say(assigned=now)
        read = [[r.partition, r.offset] for records in polled.values() for r in records]
        if read:
            say(read=read)
            positions = {tp: consumer.position(tp) for tp in polled}
            try:
                consumer.commit(
                    {tp: kafka.OffsetAndMetadata(o, "", -1) for tp, o in positions.items()}
                )
            except kafka.errors.KafkaError as err:
                say(commit_failed=str(err))
            else:
                say(committed={tp.partition: o for tp, o in positions.items()})
    consumer.close()


def confluent(bootstrap: str, group: str, topic: str) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        }
    )
    consumer.subscribe([topic])
    assigned: list[int] | None = None
    while not stopping:
        messages = [m for m in consumer.consume(num_messages=500, timeout=0.3) if not m.error()]
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != assigned:
            assigned = now
            say(assigned=now)
        if not messages:
            continue
        say(read=[[m.partition(), m.offset()] for m in messages])
        positions: dict[int, int] = {}
        for m in messages:
            positions[m.partition()] = max(positions.get(m.partition(), 0), m.offset() + 1)
        offsets = [confluent_kafka.TopicPartition(topic, p, o) for p, o in positions.items()]
        try:
            done = consumer.commit(offsets=offsets, asynchronous=False)
        except confluent_kafka.KafkaException as err:
            say(commit_failed=str(err))
            continue
        failed = [tp for tp in done or [] if tp.error is not None]
        if failed:
            say(commit_failed=str(failed[0].error))
        else:
            say(committed=positions)
    consumer.close()


def aiokafka_member(bootstrap: str, group: str, topic: str) -> None:
    import aiokafka
    from aiokafka.errors import KafkaError

    async def run() -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        )
        await consumer.start()
        assigned: list[int] | None = None
        try:
            while not stopping:
                polled = await consumer.getmany(timeout_ms=300)
                now = sorted(tp.partition for tp in consumer.assignment())
                if now != assigned:
                    assigned = now
                    say(assigned=now)
                read = [[r.partition, r.offset] for records in polled.values() for r in records]
                if not read:
                    continue
                say(read=read)
                positions = {
                    tp: records[-1].offset + 1 for tp, records in polled.items() if records
                }
                try:
                    await consumer.commit(positions)
                except KafkaError as err:
                    say(commit_failed=str(err))
                else:
                    say(committed={tp.partition: o for tp, o in positions.items()})
        finally:
            await consumer.stop()

    asyncio.run(run())


def squall_member(bootstrap: str, group: str, topic: str) -> None:
    from system_under_test.client import GroupConsumer, OffsetCommitError

    consumer = GroupConsumer(
        bootstrap,
        config={
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        },
        client_id=f"member-{group}",
    )
    consumer.subscribe(topic)
    assigned: list[int] | None = None
    while not stopping:
        records = consumer.poll(300)
        now = sorted(p for _, p in consumer.assignment())
        if now != assigned:
            assigned = now
            say(assigned=now)
        if not records:
            continue
        say(read=[[r.partition, r.offset] for r in records])
        positions = {(topic, r.partition): r.offset + 1 for r in records}
        try:
            consumer.commit(positions)
        except OffsetCommitError as err:
            say(commit_failed=str(err))
        else:
            say(committed={p: o for (_, p), o in positions.items()})
    consumer.close()


MEMBERS = {
    "kafka-python": kafka_python,
    "confluent-kafka": confluent,
    "aiokafka": aiokafka_member,
    "squall": squall_member,
}


def main() -> None:
    client, bootstrap, group, topic = sys.argv[1:5]
    signal.signal(signal.SIGTERM, _stop)
    MEMBERS[client](bootstrap, group, topic)


if __name__ == "__main__":
    main()
