"""The consumer against a leader change (issue 29): fetches fenced by leader epoch, no reset
on a deposed leader's OFFSET_OUT_OF_RANGE, ListOffsets retried at the new leader. Real
ZooKeeper and three broker processes, one topic of one partition on all three."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from squall.cluster.zookeeper_server import ZooKeeperServer
from system_under_test.client import Consumer, Producer
from system_under_test.client.connection import BrokerConnection, parse_bootstrap
from system_under_test.client.fetcher import fetch_request
from system_under_test.errors import ErrorCode
from system_under_test.kafka.fetch import FetchPartition, FetchResponse
from system_under_test.zookeeper import partition_state_path
from tests.integration.cluster import LocalCluster
from tests.support import wait_for

pytestmark = pytest.mark.integration
TOPIC = "epochs"


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "c", zookeeper_server, 3).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def produce(bootstrap: str, values: range) -> None:
    with Producer(bootstrap, acks=-1, config={"request.timeout.ms": 10000}) as producer:
        for i in values:
            producer.send(TOPIC, str(i).encode(), partition=0).result(30)


def fetch_error(cluster: LocalCluster, broker_id: int, leader_epoch: int) -> ErrorCode:
    """The error of a consumer's fetch of offset 0 at `broker_id` claiming `leader_epoch`."""
    address = parse_bootstrap(cluster.brokers[broker_id].bootstrap)[0]
    conn = BrokerConnection(address, client_id="epoch-test")
    try:
        wanted = FetchPartition(
            partition=0,
            current_leader_epoch=leader_epoch,
            fetch_offset=0,
            partition_max_bytes=1 << 20,
        )
        request = fetch_request(0, 1, 1 << 20, {TOPIC: [wanted]})
        response = conn.request(request, FetchResponse, timeout_s=10)
    finally:
        conn.close()
    return ErrorCode.from_wire(response.responses[0].partitions[0].error_code)


def test_a_replica_fences_fetches_of_another_leader_epoch(cluster: LocalCluster) -> None:
    first = cluster.create_topic(TOPIC, min_insync_replicas=2)
    produce(cluster.bootstrap, range(3))
    assert fetch_error(cluster, first.leader, first.leader_epoch) is ErrorCode.NONE
    assert fetch_error(cluster, first.leader, -1) is ErrorCode.NONE
    assert (
        fetch_error(cluster, first.leader, first.leader_epoch + 1) is ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    cluster.brokers[first.leader].kill()
    second = cluster.wait_for_leader(
        TOPIC, lambda d: d.leader not in (-1, first.leader), "a new leader"
    )
    wait_for(
        lambda: fetch_error(cluster, second.leader, second.leader_epoch) is ErrorCode.NONE,
        what="the new leader to lead in its epoch",
    )
    assert fetch_error(cluster, second.leader, first.leader_epoch) is ErrorCode.FENCED_LEADER_EPOCH


def test_a_deposed_leaders_out_of_range_does_not_reset_the_consumer(
    cluster: LocalCluster,
) -> None:
    # A safe run's consumer jumped back to offset 0: a paused leader, deposed meanwhile,
    # resumed and told it (from its stale metadata) that it still led, then that its offset
    # was out of range, since its log ends where it was paused.
    old = cluster.create_topic(TOPIC, min_insync_replicas=2)
    produce(cluster.bootstrap, range(10))
    stale = cluster.brokers[old.leader]
    stale.signal(signal.SIGSTOP)
    consumer = Consumer(
        stale.bootstrap, config={"auto.offset.reset": "earliest", "request.timeout.ms": 20000}
    )
    try:
        cluster.wait_for_leader(TOPIC, lambda d: d.leader not in (-1, old.leader), "a new leader")
        live = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != old.leader)
        produce(live, range(10, 20))
        consumer.assign([(TOPIC, 0)])
        consumer.seek(TOPIC, 0, 20)
        # Its first metadata request waits on the paused leader, which answers it (and then
        # the fetch) as soon as it resumes, before it hears that it was deposed.
        first: list[int] = []
        polling = threading.Thread(
            target=lambda: first.extend(r.offset for r in consumer.poll(2000)), daemon=True
        )
        polling.start()
        stale.signal(signal.SIGCONT)
        polling.join(60)
        assert not polling.is_alive()
        produce(live, range(20, 25))
        read: list[int] = list(first)
        wait_for(
            lambda: read.extend(r.offset for r in consumer.poll(200)) or len(read) >= 5,
            what="the records written after the position",
        )
        assert read == [20, 21, 22, 23, 24]
        assert consumer.position(TOPIC, 0) == 25
    finally:
        stale.signal(signal.SIGCONT)
        consumer.close()


def test_a_group_consumer_believes_zookeeper_over_every_stale_broker(
    cluster: LocalCluster,
) -> None:
    """Brokers that all still name a deposed leader (cut off from ZooKeeper, or paused past
    their sessions) cannot make a group's consumer reset: before it believes an out-of-range
    answer it reads the partition's state as the controller wrote it. Here ZooKeeper's state
    is a leader epoch ahead of every broker, as after an election they have not heard of:
    the position is kept; once the state agrees with the brokers again, it is reset."""
    current = cluster.create_topic(TOPIC, min_insync_replicas=2)
    produce(cluster.bootstrap, range(5))
    connect = cluster.zookeeper_connect
    zk = KazooClient(hosts=connect)
    zk.start(timeout=15)
    path = partition_state_path(TOPIC, 0)
    written, _stat = zk.get(path)
    ahead = json.loads(written) | {"leader_epoch": current.leader_epoch + 1}
    config = {"group.id": "g", "zookeeper.connect": connect, "auto.offset.reset": "earliest"}
    consumer = Consumer(cluster.bootstrap, config=config)
    try:
        zk.set(path, json.dumps(ahead).encode())
        consumer.assign([(TOPIC, 0)])
        consumer.seek(TOPIC, 0, 50)
        for _ in range(3):
            assert consumer.poll(200) == []
        assert consumer.position(TOPIC, 0) == 50
        zk.set(path, written)
        read: list[int] = []
        wait_for(
            lambda: read.extend(r.offset for r in consumer.poll(200)) or len(read) >= 5,
            what="the reset to the earliest offset",
        )
        assert read == [0, 1, 2, 3, 4]
    finally:
        consumer.close()
        zk.stop()
        zk.close()


def test_list_offsets_retries_at_the_new_leader(cluster: LocalCluster) -> None:
    old = cluster.create_topic(TOPIC, min_insync_replicas=2)
    produce(cluster.bootstrap, range(7))
    consumer = Consumer(cluster.bootstrap, config={"request.timeout.ms": 30000})
    try:
        consumer.assign([(TOPIC, 0)])
        consumer.seek_to_beginning(TOPIC, 0)  # metadata cached: the old leader leads
        cluster.brokers[old.leader].kill()
        consumer.seek_to_end(TOPIC, 0)  # refused by the dead leader, then asked of the next
        assert consumer.position(TOPIC, 0) == 7
    finally:
        consumer.close()
