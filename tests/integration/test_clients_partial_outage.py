"""squall's clients keep working with the partitions whose leaders answer while another
leader is paused or dead: the async producer's sends to them are acknowledged and the
consumer reads them. Real ZooKeeper and three broker processes, one partition on each
broker (replication factor 1, so a lost broker's partition has no other leader)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.zookeeper_server import ZooKeeperServer
from system_under_test.client import Consumer, Producer
from tests.integration.cluster import LocalCluster
from tests.support import wait_for

pytestmark = pytest.mark.integration
TOPIC = "spread"
PER_PARTITION = 20


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "c", zookeeper_server, 3).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def spread_topic(cluster: LocalCluster) -> dict[int, int]:
    """The topic with one record set per partition; partition -> its only broker."""
    admin = cluster.admin()
    try:
        admin.create_topic(TOPIC, 3, replication_factor=1)
        described = wait_for(
            lambda: (
                (d := admin.describe_topics([TOPIC])[0])
                and all(p.leader >= 0 for p in d.partitions)
                and d
            ),
            what=f"{TOPIC} to have leaders",
        )
    finally:
        admin.close()
    leaders = {p.partition: p.leader for p in described.partitions}
    assert sorted(leaders.values()) == [1, 2, 3], f"expected one partition per broker: {leaders}"
    with Producer(cluster.bootstrap, acks=1, mode="async") as producer:
        futures = [
            producer.send(TOPIC, f"{p}-{i}".encode(), partition=p)
            for p in leaders
            for i in range(PER_PARTITION)
        ]
        producer.flush(30)
    assert all(f.exception() is None for f in futures)
    return leaders


def read_until(consumer: Consumer, wanted: set[int], *, polls: int = 200) -> dict[int, int]:
    """Records read per partition, polling until every partition in `wanted` is read to the
    end (at most `polls` polls)."""
    counts = {0: 0, 1: 0, 2: 0}
    for _ in range(polls):
        for record in consumer.poll(100):
            counts[record.partition] += 1
        if all(counts[p] >= PER_PARTITION for p in wanted):
            break
    return counts


@pytest.mark.parametrize("fault", ["pause", "kill"])
def test_a_poll_reads_the_partitions_whose_leaders_answer(
    cluster: LocalCluster, fault: str
) -> None:
    leaders = spread_topic(cluster)
    lost = leaders[0]
    broker = cluster.brokers[lost]
    consumer = Consumer(
        cluster.bootstrap,
        config={"auto.offset.reset": "earliest", "request.timeout.ms": 3000},
    )
    try:
        consumer.assign([(TOPIC, p) for p in range(3)])
        for p in range(3):  # positions known before the fault (ListOffsets goes to the leader)
            consumer.position(TOPIC, p)
        if fault == "pause":
            broker.signal(signal.SIGSTOP)
        else:
            broker.kill()
        during = read_until(consumer, {1, 2})
        # The other leaders' partitions were read to their end; the lost one's, not at all.
        assert during == {0: 0, 1: PER_PARTITION, 2: PER_PARTITION}
        if fault == "pause":
            broker.signal(signal.SIGCONT)
        else:
            broker.start()
        after = read_until(consumer, {0}, polls=600)
        assert after[0] == PER_PARTITION and after[1] == after[2] == 0
    finally:
        if fault == "pause" and broker.is_running():
            broker.signal(signal.SIGCONT)
        consumer.close()


def test_a_poll_fails_when_no_leader_can_be_reached(cluster: LocalCluster) -> None:
    leaders = spread_topic(cluster)
    consumer = Consumer(cluster.bootstrap, config={"auto.offset.reset": "earliest"})
    try:
        consumer.assign([(TOPIC, 0)])
        consumer.position(TOPIC, 0)
        cluster.brokers[leaders[0]].kill()
        with pytest.raises(Exception, match=r"broker|connect") as raised:
            for _ in range(50):
                consumer.poll(100)
        assert type(raised.value).__name__ in ("BrokerUnavailableError", "ConnectionLostError")
    finally:
        consumer.close()


@pytest.mark.parametrize("fault", ["pause", "kill"])
def test_the_async_producer_goes_on_with_the_partitions_whose_leaders_answer(
    cluster: LocalCluster, fault: str
) -> None:
    leaders = spread_topic(cluster)
    broker = cluster.brokers[leaders[0]]
    producer = Producer(
        cluster.bootstrap,
        acks=1,
        mode="async",
        config={
            "request.timeout.ms": 3000,
            "message.send.max.retries": 0,
            "queue.buffering.max.ms": 5,
        },
    )
    try:
        producer.send(TOPIC, b"warm-up", partition=0).result(10)  # a connection to each leader
        for p in (1, 2):
            producer.send(TOPIC, b"warm-up", partition=p).result(10)
        if fault == "pause":
            broker.signal(signal.SIGSTOP)
        else:
            broker.kill()
        stuck = [producer.send(TOPIC, f"lost-{i}".encode(), partition=0) for i in range(5)]
        # While partition 0's leader is gone, the others' sends are acknowledged one by one.
        for i in range(30):
            for p in (1, 2):
                metadata = producer.send(TOPIC, f"live-{i}".encode(), partition=p).result(10)
                assert metadata.offset >= 0
        for future in stuck:  # every one of them ends, with an error
            future.exception(30)
            assert future.done() and future.exception() is not None
    finally:
        if fault == "pause" and broker.is_running():
            broker.signal(signal.SIGCONT)
        producer.close(5)
