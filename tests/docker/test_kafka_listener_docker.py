"""The Kafka listener on docker nodes: a cluster brought up with `kafka_listener` serves real
Kafka clients on port 9093 of every broker's container (crc32c comes with the base image)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from squall.cluster.cluster import Cluster, ClusterState
from squall.cluster.docker import DockerRuntime
from tests.integration.kafka_client_adapters import CLIENTS

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def kafka_cluster(squall_home: Path, docker_runtime: DockerRuntime) -> Iterator[Cluster]:
    run_id = f"test-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(run_id, 3, kafka_listener=True, lazy_disk=False)
    try:
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


def test_every_broker_serves_kafka_clients_on_its_node(kafka_cluster: Cluster) -> None:
    bootstrap = kafka_cluster.kafka_bootstrap
    assert bootstrap is not None
    assert bootstrap.count(":9093") == 3
    assert ClusterState.load(kafka_cluster.run_id).kafka_listener  # reattached, still there
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [NewTopic("docker-kafka", 1, 3, topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        admin.close()
    values = [b"docker %d" % i for i in range(300)]
    for client in CLIENTS:
        topic_values = [client.name.encode() + b" " + v for v in values]
        sent = client.produce(bootstrap, "docker-kafka", topic_values, "all", {})
        assert sent.errors == [], client.name
    got = CLIENTS[1].read(bootstrap, "docker-kafka", 3 * len(values), 60)
    assert [offset for offset, _ in got] == list(range(3 * len(values)))
    assert sorted(v for _, v in got) == sorted(
        c.name.encode() + b" " + v for c in CLIENTS for v in values
    )
    # squall's client, on the brokers' first listeners, sees the same log. (A cluster without the listener has no
    # kafka_bootstrap: test_docker_runtime.py.)
    assert kafka_cluster.bootstrap.count(":9092") == 3
