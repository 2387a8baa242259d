"""Consumer groups through real Kafka clients and squall's own: members in their own
processes (so that a test can SIGKILL one) subscribing to a 6-partition topic on a 3-broker
cluster, the group coordinated by the leader of the group's partition of
``__consumer_offsets``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidTopicError

from squall.cluster.zookeeper_server import ZooKeeperServer
from system_under_test.client.offset_store import ZooKeeperOffsetStore
from system_under_test.kafka import find_coordinator
from system_under_test.kafka.group_metadata import OFFSETS_TOPIC, OffsetRecord, decode_record
from tests.integration.test_kafka_clients import HOST, KafkaCluster, _ask

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6
CLIENT_NAMES = ("kafka-python", "confluent-kafka", "aiokafka", "squall")
T = TypeVar("T")


def wait_until(check: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Member:
    """A group member's process and what it printed, with when."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, log: Path) -> None:
        self.name = log.stem
        self._stderr = log.open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.group_member",
                client,
                bootstrap,
                group,
                topic,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.assigned: list[int] = []
        self.assigned_at = 0.0
        self.read: list[tuple[float, int, int]] = []
        self.committed: dict[int, int] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            said: dict[str, Any] = json.loads(line)
            now = time.monotonic()
            with self._lock:
                if "assigned" in said:
                    self.assigned, self.assigned_at = said["assigned"], now
                for partition, offset in said.get("read", []):
                    self.read.append((now, partition, offset))
                for partition, offset in said.get("committed", {}).items():
                    self.committed[int(partition)] = offset

    def offsets_read(self, partition: int, *, after: float = 0.0) -> list[int]:
        with self._lock:
            return [o for t, p, o in self.read if p == partition and t > after]

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)
        self._stderr.close()


def owned_once(members: list[Member]) -> dict[int, Member] | None:
    """Each partition's owner, if every partition has exactly one among the members."""
    owners: dict[int, Member] = {}
    for member in members:
        for partition in member.assigned:
            if partition in owners:
                return None
            owners[partition] = member
    return owners if sorted(owners) == list(range(PARTITIONS)) else None


def produce(cluster: KafkaCluster, topic: str, start: int, count: int) -> None:
    with KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap(),
        acks="all",
        enable_idempotence=False,
        retries=20,
        retry_backoff_ms=200,
    ) as sender:
        futures = [
            sender.send(topic, b"%d" % i, partition=i % PARTITIONS)
            for i in range(start, start + count)
        ]
        for future in futures:
            future.get(timeout=60)


def read_by_anyone(members: list[Member], partition: int) -> set[int]:
    return {o for m in members for o in m.offsets_read(partition)}


def all_read(members: list[Member], per_partition: int) -> bool:
    return all(read_by_anyone(members, p) >= set(range(per_partition)) for p in range(PARTITIONS))


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(tmp_path, zookeeper_server)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.stop()


def create(cluster: KafkaCluster, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap())
    try:
        admin.create_topics(
            [NewTopic(topic, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        admin.close()


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_three_members_share_the_partitions_and_take_over_a_killed_ones_from_its_commits(
    cluster: KafkaCluster, members: list[Member], tmp_path: Path, client: str
) -> None:
    topic, group = "shared", f"group-{client}"
    create(cluster, topic)
    produce(cluster, topic, 0, 50 * PARTITIONS)
    bootstrap = ",".join(cluster.kafka_bootstrap())
    for i in range(3):
        members.append(Member(client, bootstrap, group, topic, tmp_path / f"member-{i}.log"))
    owners = wait_until(lambda: owned_once(members), "each partition owned by one member")
    assert len({id(m) for m in owners.values()}) == 3, "a member was given nothing"
    wait_until(lambda: all_read(members, 50), "every record read")

    victim = owners[0]
    victims = list(victim.assigned)
    survivors = [m for m in members if m is not victim]
    victim.kill()
    killed_at = time.monotonic()
    produce(cluster, topic, 50 * PARTITIONS, 50 * PARTITIONS)
    wait_until(lambda: owned_once(survivors), "the survivors to own every partition", 90)
    taken_over = max(m.assigned_at for m in survivors) - killed_at
    print(
        f"{client}: the killed member's partitions {victims} owned again {taken_over:.1f} s after"
    )
    wait_until(lambda: all_read([*survivors, victim], 100), "every acknowledged record read", 90)

    for partition in victims:
        resumed = min(o for m in survivors for o in m.offsets_read(partition, after=killed_at))
        committed = victim.committed.get(partition, 0)
        last_read = max(victim.offsets_read(partition), default=-1)
        # Where the group's commits say: at or after the last commit the victim saw taken
        # (one it sent just before dying may have been taken too), and never past a record
        # nobody read.
        assert committed <= resumed <= last_read + 1, (partition, committed, resumed, last_read)


def _coordinator(cluster: KafkaCluster, group: str, *, other_than: int = -1) -> int:
    """The group's coordinator as a running broker answers (one other than ``other_than``)."""

    def ask() -> int | None:
        for broker, port in cluster.kafka_ports.items():
            if not cluster.brokers[broker].is_running():
                continue
            found = _ask((HOST, port), find_coordinator.FindCoordinatorRequest(key=group), 2)
            assert isinstance(found, find_coordinator.FindCoordinatorResponse)
            return found.node_id if found.error_code == 0 and found.node_id != other_than else None
        return None

    return wait_until(ask, f"a coordinator for {group}")


def _committed(cluster: KafkaCluster, group: str, topic: str) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap(), group_id=group)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def wait_until_committed(cluster: KafkaCluster, group: str, topic: str, offset: int) -> None:
    """Until the group has committed `offset` on every partition of `topic`."""
    wait_until(
        lambda: _committed(cluster, group, topic) == dict.fromkeys(range(PARTITIONS), offset),
        f"every partition committed to {offset}",
    )


def test_a_new_coordinator_loads_the_groups_commits_and_generation_from_the_offsets_topic(
    cluster: KafkaCluster, members: list[Member], tmp_path: Path
) -> None:
    topic, group = "failover", "group-failover"
    create(cluster, topic)
    produce(cluster, topic, 0, 20 * PARTITIONS)
    bootstrap = ",".join(cluster.kafka_bootstrap())
    for i in range(2):
        members.append(Member("kafka-python", bootstrap, group, topic, tmp_path / f"m{i}.log"))
    wait_until(lambda: owned_once(members), "each partition owned by one member")
    wait_until_committed(cluster, group, topic, 20)
    old = _coordinator(cluster, group)
    generations = [
        e["generation"]
        for e in cluster.events()
        if e["type"] == "group-rebalance" and e["group"] == group
    ]
    assert generations, "no group-rebalance event"
    for member in members:
        member.stop()  # leaving: the group is emptied, a generation that must be stored too
    members.clear()

    cluster.brokers[old].kill()
    new = _coordinator(cluster, group, other_than=old)
    assert _committed(cluster, group, topic) == dict.fromkeys(range(PARTITIONS), 20)

    members.append(Member("kafka-python", bootstrap, group, topic, tmp_path / "m2.log"))
    wait_until(lambda: owned_once(members), "the new member to own every partition")
    produce(cluster, topic, 20 * PARTITIONS, 6)
    wait_until(
        lambda: all(members[0].offsets_read(p) for p in range(PARTITIONS)), "new records read"
    )
    assert all(min(members[0].offsets_read(p)) == 20 for p in range(PARTITIONS))  # resumed
    events = cluster.events()
    loads = [e for e in events if e["type"] == "group-load" and group in e["groups"]]
    assert [e["broker"] for e in loads] == [new], "the new coordinator did not load the group"
    later = [
        e["generation"]
        for e in events
        if e["type"] == "group-rebalance" and e["group"] == group and e["broker"] == new
    ]
    # It goes on from the stored generations (the emptied one counted too), never back.
    assert later and min(later) > max(generations) + 1, (generations, later)


def test_commits_land_as_records_in_the_offsets_topic(
    cluster: KafkaCluster, members: list[Member], tmp_path: Path
) -> None:
    topic, group = "recorded", "group-recorded"
    create(cluster, topic)
    produce(cluster, topic, 0, 6 * PARTITIONS)
    members.append(
        Member(
            "kafka-python", ",".join(cluster.kafka_bootstrap()), group, topic, tmp_path / "m.log"
        )
    )
    wait_until_committed(cluster, group, topic, 6)
    reader = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap(), group_id=None)
    try:
        partitions = [
            TopicPartition(OFFSETS_TOPIC, p) for p in reader.partitions_for_topic(OFFSETS_TOPIC)
        ]
        reader.assign(partitions)
        reader.seek_to_beginning()
        found: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(found) < PARTITIONS and time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=500).values():
                for r in records:
                    decoded = decode_record(r.key, r.value)
                    if isinstance(decoded, OffsetRecord) and decoded.key.group == group:
                        assert decoded.value is not None
                        found[decoded.key.partition] = decoded.value.offset
    finally:
        reader.close()
    assert found == dict.fromkeys(range(PARTITIONS), 6)
    # Only the brokers write it: a client's produce is refused, as Kafka refuses it.
    with (
        KafkaProducer(
            bootstrap_servers=cluster.kafka_bootstrap(), enable_idempotence=False, retries=0
        ) as sender,
        pytest.raises(InvalidTopicError),
    ):
        sender.send(OFFSETS_TOPIC, b"forged", partition=0).get(timeout=30)


def test_offsets_in_zookeeper_with_the_historical_switch(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, members: list[Member]
) -> None:
    """offsets.storage=zookeeper: the group is coordinated as ever, its commits go to
    ZooKeeper (where Kafka 0.8's consumers kept them) and come back from there."""
    cluster = KafkaCluster(tmp_path / "zk-offsets", zookeeper_server, offsets_storage="zookeeper")
    cluster.start()
    try:
        topic, group = "zk-committed", "group-zk"
        create(cluster, topic)
        produce(cluster, topic, 0, 4 * PARTITIONS)
        bootstrap = ",".join(cluster.kafka_bootstrap())
        members.append(Member("kafka-python", bootstrap, group, topic, tmp_path / "m.log"))
        wait_until_committed(cluster, group, topic, 4)
        with ZooKeeperOffsetStore(group, cluster.zookeeper_connect) as offsets:
            assert [offsets.committed(topic, p) for p in range(PARTITIONS)] == [4] * PARTITIONS
    finally:
        for member in members:
            member.stop()
        members.clear()
        cluster.stop()
