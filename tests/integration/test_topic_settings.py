"""Topic-level settings survive a broker's restart (real ZooKeeper, real broker processes).

A broker loads its logs at start-up with its own defaults, before the controller says which
topics they belong to; a restarted broker once kept those defaults for good, so a topic with
``min.insync.replicas=2`` acknowledged acks=-1 writes with an ISR of one on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.cluster.zookeeper_server import ZooKeeperServer
from system_under_test.client import Producer
from system_under_test.client.exceptions import ProduceError
from system_under_test.errors import ErrorCode
from tests.integration.cluster import LocalCluster

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 2048


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path, zookeeper_server, 3).start()
    yield cluster
    cluster.stop()


def send(bootstrap: str, topic: str, values: list[bytes], *, acks: int) -> list[int | ProduceError]:
    """Each value's offset, or its error; no retries."""
    with Producer(bootstrap, acks=acks, config={"message.send.max.retries": 0}) as producer:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush()
    return [f.exception() or f.result().offset for f in futures]


def segment_files(cluster: LocalCluster, broker: int, topic: str) -> list[Path]:
    partition_dir = cluster.brokers[broker].data_dir / "data" / "logs" / f"{topic}-0"
    return sorted(partition_dir.glob("*.log"))


def test_a_restarted_broker_keeps_the_topic_settings(cluster: LocalCluster) -> None:
    state = cluster.create_topic("kept", min_insync_replicas=2, segment_bytes=SEGMENT_BYTES)
    restarted, other = (b for b in state.replicas if b != state.leader)
    assert isinstance(send(cluster.bootstrap, "kept", [b"before"], acks=-1)[0], int)

    cluster.brokers[restarted].kill()
    cluster.wait_for_leader("kept", lambda d: restarted not in d.isr, "the ISR to shrink")
    cluster.brokers[restarted].start()
    cluster.wait_for_leader("kept", lambda d: len(d.isr) == 3, "the restarted broker to rejoin")

    # Leave the restarted broker alone in the ISR, as the partition's leader.
    cluster.brokers[other].kill()
    cluster.brokers[state.leader].kill()
    cluster.wait_for_leader(
        "kept", lambda d: d.leader == restarted and d.isr == [restarted], "an ISR of one"
    )
    [refused] = send(cluster.live_bootstrap(), "kept", [b"alone"], acks=-1)
    assert isinstance(refused, ProduceError), f"acknowledged at offset {refused} with an ISR of 1"
    assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS and refused.definite

    # segment.bytes too: acks=1 writes roll the restarted leader's segments at the topic's size.
    written = send(cluster.live_bootstrap(), "kept", [b"x" * 200] * 40, acks=1)
    assert all(isinstance(offset, int) for offset in written), written
    assert len(segment_files(cluster, restarted, "kept")) > 1
