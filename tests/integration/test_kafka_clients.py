"""Real Kafka clients (kafka-python, confluent-kafka, aiokafka) against a real cluster's
Kafka-protocol listeners (ZooKeeper and 3 brokers).

Each broker listens twice, Kafka's protocol on both: ``listeners`` (which the cluster fixtures
and squall's client use) and ``kafka.listeners``, which it advertises in Metadata answers
there. Each client
runs with its own defaults (kafka-python's idempotent producer on, with acks=all), and with
idempotence turned on where a test says so.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
)
from kafka.admin import NewTopic
from kafka.errors import (
    KafkaTimeoutError,
    NotEnoughReplicasError,
    UnsupportedCompressionTypeError,
)

from squall.cluster.broker_process import BrokerStartError
from squall.cluster.zookeeper_server import ZooKeeperServer, free_port
from system_under_test.errors import ErrorCode
from system_under_test.kafka import find_coordinator, offset_commit, offset_fetch
from system_under_test.kafka import produce as produce_api
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.api_versions import ApiVersionsResponse
from system_under_test.kafka.framing import decode_response, encode_request
from system_under_test.kafka.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from system_under_test.kafka.schema import Body
from system_under_test.log.record import encode_records
from tests.integration.cluster import LocalCluster
from tests.integration.kafka_client_adapters import CLIENTS, KafkaClient
from tests.integration.test_standalone_broker import BrokerThread
from tests.unit.kafka.test_produced_batches import ADVERTISED

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
RECORDS = 500
RETRYING: dict[str, dict[str, object]] = {
    "kafka-python": {"retries": 20, "retry_backoff_ms": 200, "request_timeout_ms": 5000},
    "confluent-kafka": {"retries": 20, "retry.backoff.ms": 200, "request.timeout.ms": 5000},
    "aiokafka": {"retry_backoff_ms": 200, "request_timeout_ms": 5000},
}
"""What each client needs to ride out a leader's death (their own retry settings)."""
IDEMPOTENT: dict[str, dict[str, object]] = {
    "kafka-python": {"enable_idempotence": True},
    "confluent-kafka": {"enable.idempotence": True},
    "aiokafka": {"enable_idempotence": True},
}


class KafkaCluster(LocalCluster):
    """A LocalCluster whose brokers also serve Kafka's protocol, each on its own port."""

    def __init__(self, root: Path, zookeeper: ZooKeeperServer, **settings: str) -> None:
        """``settings``: broker settings for every broker (``offsets_storage`` is
        ``offsets.storage``)."""
        self.kafka_ports = {i: free_port(HOST) for i in (1, 2, 3)}
        common = {k.replace("_", "."): v for k, v in settings.items()}
        super().__init__(
            root,
            zookeeper,
            3,
            per_broker=lambda i: {"kafka.listeners": f"{HOST}:{self.kafka_ports[i]}", **common},
        )

    def kafka_bootstrap(self) -> list[str]:
        """The Kafka listeners of the running brokers."""
        return [f"{HOST}:{self.kafka_ports[i]}" for i, b in self.brokers.items() if b.is_running()]


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(tmp_path, zookeeper_server)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[KafkaCluster]:
    """One cluster for the tests that neither kill nor pause a broker."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-shared"), zookeeper_server)
    cluster.start()
    yield cluster
    cluster.stop()


def create_topic(cluster: KafkaCluster, name: str) -> None:
    """Through kafka-python's admin client: RF 3, min.insync.replicas=2."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap(), api_version=None)
    try:
        topic = NewTopic(name, 1, 3, topic_configs={"min.insync.replicas": "2"})
        response = admin.create_topics([topic])
        assert [t["error_code"] for t in response["topics"]] == [0]
    finally:
        admin.close()


def producer(cluster: KafkaCluster, **config: object) -> KafkaProducer:
    settings: dict[str, object] = {
        "acks": "all",
        "enable_idempotence": False,  # InitProducerId is not served yet
        "api_version": None,
        **config,
    }
    return KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap(), **settings)


def read_back(cluster: KafkaCluster, topic: str, count: int) -> list[tuple[int, bytes, bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.kafka_bootstrap(),
        group_id=None,
        enable_auto_commit=False,
        api_version=None,
    )
    partition = TopicPartition(topic, 0)
    got: list[tuple[int, bytes, bytes]] = []
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.key, r.value) for r in records]
        ends = consumer.end_offsets([partition])
        starts = consumer.beginning_offsets([partition])
        assert ends == {partition: count}
        assert starts == {partition: 0}
    finally:
        consumer.close()
    return got


def test_kafka_python_writes_and_reads_back_through_the_kafka_listeners(
    shared_cluster: KafkaCluster,
) -> None:
    cluster = shared_cluster
    create_topic(cluster, "kafka-python")
    state = cluster.describe("kafka-python")
    assert len(state.replicas) == 3 and len(state.isr) == 3

    with producer(cluster) as sender:
        # api_version=None: negotiated through ApiVersions (Produce 7, Fetch 11, Metadata 8).
        assert sender.config["api_version"] == (2, 3)
        futures = [
            sender.send("kafka-python", key=b"key-%d" % i, value=b"value-%d" % i, partition=0)
            for i in range(RECORDS)
        ]
        sender.flush()
        offsets = [f.get(timeout=30).offset for f in futures]
    assert offsets == list(range(RECORDS))

    got = read_back(cluster, "kafka-python", RECORDS)
    assert got == [(i, b"key-%d" % i, b"value-%d" % i) for i in range(RECORDS)]
    # The same records through the brokers' first listeners, by squall's client.
    assert cluster.read_all("kafka-python") == {i: b"value-%d" % i for i in range(RECORDS)}


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_each_client_writes_and_reads_back_exactly(
    shared_cluster: KafkaCluster, client: KafkaClient, acks: int | str
) -> None:
    topic = f"{client.name}-acks-{acks}"
    create_topic(shared_cluster, topic)
    bootstrap = ",".join(shared_cluster.kafka_bootstrap())
    values = [b"%s %d" % (topic.encode(), i) for i in range(RECORDS)]
    sent = client.produce(bootstrap, topic, values, acks, {})
    assert sent.errors == []
    if acks != 0:  # acks=0: no one tells the producer an offset
        assert sent.offsets == list(range(RECORDS))
    assert client.read(bootstrap, topic, RECORDS, 30) == list(enumerate(values))


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_each_client_commits_a_groups_offset_and_a_new_member_resumes_there(
    shared_cluster: KafkaCluster, client: KafkaClient
) -> None:
    """Offsets committed through the Kafka listener by a consumer that `assign`s (no
    generation) are kept by the group's coordinator and found by the next one."""
    topic, group = f"commits-{client.name}", f"group-{client.name}"
    create_topic(shared_cluster, topic)
    bootstrap = ",".join(shared_cluster.kafka_bootstrap())
    values = [b"%d" % i for i in range(20)]
    assert client.produce(bootstrap, topic, values, "all", {}).errors == []
    assert client.resume(bootstrap, group, topic, 30) == (None, 0)  # nothing committed yet
    client.commit(bootstrap, group, topic, 12)
    assert client.resume(bootstrap, group, topic, 30) == (12, 12)


def produce_through_a_leader_kill(
    cluster: KafkaCluster, client: KafkaClient, topic: str, settings: dict[str, object]
) -> tuple[int, dict[int, bytes]]:
    """2,000 values sent with acks=all while the topic's leader is SIGKILLed 0.3 s in, once
    a new leader is elected: the killed leader and what was acknowledged, by offset."""
    create_topic(cluster, topic)
    leader = cluster.describe(topic).leader
    bootstrap = ",".join(cluster.kafka_bootstrap())
    values = [b"%s %d" % (topic.encode(), i) for i in range(2000)]
    timer = threading.Timer(0.3, cluster.brokers[leader].kill)
    timer.start()
    try:
        sent = client.produce(bootstrap, topic, values, "all", settings)
    finally:
        timer.join()
    state = cluster.wait_for_leader(topic, lambda d: d.leader not in (-1, leader), "a new leader")
    assert state.leader != leader
    acknowledged = {o: v for o, v in zip(sent.offsets, values, strict=True) if o is not None}
    assert acknowledged, f"nothing acknowledged: {sent.errors[:3]}"
    return leader, acknowledged


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_a_leader_killed_mid_stream_loses_nothing_acknowledged_with_acks_all(
    cluster: KafkaCluster, client: KafkaClient
) -> None:
    leader, acknowledged = produce_through_a_leader_kill(
        cluster, client, "killed", RETRYING[client.name]
    )
    survivors = [b for i, b in cluster.brokers.items() if i != leader]
    assert all(b.is_running() for b in survivors)
    got = dict(
        client.read(",".join(cluster.kafka_bootstrap()), "killed", max(acknowledged) + 1, 30)
    )
    assert {o: got.get(o) for o in acknowledged} == acknowledged


@pytest.mark.parametrize("client", CLIENTS, ids=lambda c: c.name)
def test_each_idempotent_producer_writes_every_record_once_through_a_leader_kill(
    cluster: KafkaCluster, client: KafkaClient
) -> None:
    """Producer ids from InitProducerId, sequences checked by the leader, and the producer
    state the new leader built as a follower: the retries after the kill land once."""
    settings = {**RETRYING[client.name], **IDEMPOTENT[client.name]}
    _leader, acknowledged = produce_through_a_leader_kill(cluster, client, "once", settings)
    stored = cluster.read_all("once")
    assert {o: stored.get(o) for o in acknowledged} == acknowledged
    written = list(stored.values())
    assert len(written) == len(set(written)), "a record was written twice"


def test_acks_all_below_min_insync_replicas_is_refused(cluster: KafkaCluster) -> None:
    create_topic(cluster, "below-min-isr")
    with producer(cluster, retries=0) as sender:
        assert sender.send("below-min-isr", b"kept", partition=0).get(timeout=30).offset == 0
    state = cluster.describe("below-min-isr")
    for follower in state.replicas:
        if follower != state.leader:
            cluster.brokers[follower].kill()
    cluster.wait_for_leader(
        "below-min-isr", lambda d: d.isr == [state.leader], "the ISR to shrink to the leader"
    )

    with producer(cluster, retries=0) as sender, pytest.raises(NotEnoughReplicasError):
        sender.send("below-min-isr", b"refused", partition=0).get(timeout=30)
    with producer(cluster, retries=0, acks=1) as sender:
        assert sender.send("below-min-isr", b"acks=1", partition=0).get(timeout=30).offset == 1
    # Below min.insync.replicas the high watermark stands still (KIP-966), so the acks=1
    # record is not visible yet: the end offset a consumer sees stays at 1.
    assert [v for _, _, v in read_back(cluster, "below-min-isr", 1)] == [b"kept"]


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _receive(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL)


def test_unknown_versions_get_kafkas_answers(shared_cluster: KafkaCluster) -> None:
    cluster = shared_cluster
    address = (HOST, cluster.kafka_ports[1])
    # ApiVersions v3 (flexible header v2: client id, then an empty tagged-field section).
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 7, 4) + b"test" + b"\x00"
    body = b"\x05squall\x021\x00"  # compact strings: software name and version, no tags
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(_frame(header + body))
        correlation_id, answer = decode_response(_receive(sock), ApiKey.API_VERSIONS, 3)
    assert correlation_id == 7
    assert isinstance(answer, ApiVersionsResponse)
    assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION
    ranges = {v.api_key: (v.min_version, v.max_version) for v in answer.api_keys}
    assert ranges == ADVERTISED

    # Another API at a version the broker does not know: the connection is closed.
    header = struct.pack(">hhih", ApiKey.METADATA, 12, 8, -1)
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(_frame(header + b"\x01\x00\x00\x00"))
        assert sock.recv(4) == b""


def _ask(address: tuple[str, int], body: Body, version: int) -> Body:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(encode_request(body, version, 5, "squall-test"))
        correlation_id, answer = decode_response(_receive(sock), body.API_KEY, version)
    assert correlation_id == 5
    return answer


def test_commits_through_the_coordinator_and_what_it_refuses(shared_cluster: KafkaCluster) -> None:
    """A group's coordinator is the leader of its partition of __consumer_offsets (created on
    the first FindCoordinator); another broker answers NOT_COORDINATOR. A commit outside any
    generation is taken while the group has no members, with its metadata; one naming a
    generation of a group that has none is refused, never half kept; transactions have no
    coordinator; a partition that does not exist is unknown."""
    create_topic(shared_cluster, "coordinated-commits")
    group = "coordinated"

    def coordinator() -> find_coordinator.FindCoordinatorResponse | None:
        address = (HOST, shared_cluster.kafka_ports[2])
        found = _ask(address, find_coordinator.FindCoordinatorRequest(key=group, key_type=0), 2)
        assert isinstance(found, find_coordinator.FindCoordinatorResponse)
        return found if found.error_code == 0 else None

    deadline = time.monotonic() + 30
    while (found := coordinator()) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert found is not None, "no coordinator within 30 s"
    assert found.port == shared_cluster.kafka_ports[found.node_id]
    address = (HOST, found.port)
    other = next(i for i in shared_cluster.kafka_ports if i != found.node_id)
    txn = _ask(address, find_coordinator.FindCoordinatorRequest(key="t", key_type=1), 2)
    assert isinstance(txn, find_coordinator.FindCoordinatorResponse)
    assert txn.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert txn.error_message is not None and "transactions" in txn.error_message

    def commit(
        partition: int,
        *,
        generation: int = -1,
        meta: str = "",
        to: tuple[str, int] = address,
    ) -> int:
        part = offset_commit.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=3, committed_metadata=meta
        )
        request = offset_commit.OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id="",
            topics=[
                offset_commit.OffsetCommitRequestTopic(
                    name="coordinated-commits", partitions=[part]
                )
            ],
        )
        answer = _ask(to, request, 7)
        assert isinstance(answer, offset_commit.OffsetCommitResponse)
        return answer.topics[0].partitions[0].error_code

    def committed() -> list[tuple[str, list[tuple[int, int, str | None]]]]:
        fetched = _ask(address, offset_fetch.OffsetFetchRequest(group_id=group, topics=None), 5)
        assert isinstance(fetched, offset_fetch.OffsetFetchResponse)
        assert fetched.error_code == 0
        return [
            (t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
            for t in fetched.topics
        ]

    assert commit(0, generation=4) == ErrorCode.ILLEGAL_GENERATION
    assert commit(7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(0, to=(HOST, shared_cluster.kafka_ports[other])) == ErrorCode.NOT_COORDINATOR
    assert commit(0, meta="x" * 4097) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert committed() == []  # none of them landed
    assert commit(0, meta="where I was") == ErrorCode.NONE
    assert committed() == [("coordinated-commits", [(0, 3, "where I was")])]


# --- one standalone broker, in process ---------------------------------------------------------


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[BrokerThread]:
    broker = BrokerThread(tmp_path / "logs", **{"kafka.listeners": f"{HOST}:0"}).start()
    yield broker
    broker.close()


def test_a_standalone_broker_serves_kafka_clients_and_refuses_what_its_log_cannot_keep(
    standalone: BrokerThread,
) -> None:
    broker = standalone.broker
    assert broker is not None and broker.kafka_port not in (0, broker.port)
    # Port 0: the bound port is the one advertised.
    assert broker.kafka_endpoint == (HOST, broker.kafka_port)
    bootstrap = f"{HOST}:{broker.kafka_port}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("alone", 1, 1)])
    finally:
        admin.close()

    settings: dict[str, object] = {"enable_idempotence": False, "retries": 0, "max_block_ms": 3000}
    with KafkaProducer(bootstrap_servers=bootstrap, acks=0, **settings) as sender:
        for i in range(20):
            sender.send("alone", b"acks=0 %d" % i, partition=0)
        sender.flush()
    with KafkaProducer(bootstrap_servers=bootstrap, acks=1, **settings) as sender:
        assert sender.send("alone", b"acks=1", partition=0).get(timeout=10).offset == 20
        sent = sender.send("alone", b"headed", partition=0, headers=[("h", b"x")])
        assert sent.get(timeout=10).offset == 21  # the log keeps a batch as it came
        with pytest.raises(KafkaTimeoutError):  # never in Metadata: no auto-creation
            sender.send("missing", b"v", partition=0)
    compressed = {**settings, "compression_type": "gzip"}
    gzip_sender = KafkaProducer(bootstrap_servers=bootstrap, acks=1, **compressed)
    with gzip_sender, pytest.raises(UnsupportedCompressionTypeError):
        gzip_sender.send("alone", b"v" * 100, partition=0).get(timeout=10)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    partition = TopicPartition("alone", 0)
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        got: list[bytes] = []
        headers: list[object] = []
        deadline = time.monotonic() + 20
        while len(got) < 22 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
                headers += [r.headers for r in records]
    finally:
        consumer.close()
    assert got == [b"acks=0 %d" % i for i in range(20)] + [b"acks=1", b"headed"]
    assert headers[-1] == [("h", b"x")]
    # It coordinates every group itself, in its own __consumer_offsets (one replica).
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="alone-group")
    try:
        committer.assign([partition])
        committer.commit({partition: OffsetAndMetadata(7, "", -1)})
    finally:
        committer.close()
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id="alone-group")
    try:
        assert reader.committed(partition) == 7
    finally:
        reader.close()
    # An idempotent producer's retried batch is answered with its first offsets, once.
    address = (HOST, broker.kafka_port)
    init = _ask(address, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0), 1)
    assert isinstance(init, InitProducerIdResponse) and init.error_code == 0
    again = _ask(address, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0), 1)
    assert isinstance(again, InitProducerIdResponse) and again.producer_id != init.producer_id

    def produce(sequence: int) -> tuple[int, int]:
        records = encode_records(
            [(None, b"seq %d" % sequence, 1)],
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=sequence,
        )
        data = produce_api.TopicProduceData(
            name="alone",
            partition_data=[produce_api.PartitionProduceData(index=0, records=records)],
        )
        answer = _ask(
            address, produce_api.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[data]), 7
        )
        assert isinstance(answer, produce_api.ProduceResponse)
        part = answer.responses[0].partition_responses[0]
        return part.error_code, part.base_offset

    first = produce(0)
    assert first[0] == 0
    assert produce(0) == first  # the retry: the same offset, nothing written twice
    assert produce(5) == (int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER), -1)
    assert produce(1) == (0, first[1] + 1)
    found = _ask((HOST, broker.kafka_port), find_coordinator.FindCoordinatorRequest(key="g"), 1)
    assert isinstance(found, find_coordinator.FindCoordinatorResponse)
    assert (found.error_code, found.node_id, found.port) == (0, broker.broker_id, broker.kafka_port)


def test_a_broker_whose_kafka_port_is_taken_says_so(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    """A cluster broker that cannot bind its Kafka listener stops with the reason; its
    controller, never started, does not hide it (it did: "cannot join thread")."""
    cluster = KafkaCluster(tmp_path, zookeeper_server)
    taken = socket.socket()
    try:
        taken.bind((HOST, cluster.kafka_ports[1]))
        taken.listen()
        with pytest.raises(BrokerStartError, match=r"cannot listen: .*another broker"):
            cluster.brokers[1].start(timeout=20)
    finally:
        taken.close()
        cluster.stop()
