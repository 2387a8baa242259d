"""The Kafka clients behind the workload's protocol, without a cluster: settings as each
library takes them, which failures are definite, delivery futures, and the spec's checks."""

from __future__ import annotations

import threading

import pytest
from pydantic import ValidationError

from squall.spec import TestSpec
from workloads import WorkloadSpec
from workloads.client import OperationError, SendFuture, SendResult
from workloads.clients import CLIENT_NAMES, client_factory, speaks_kafka
from workloads.confluent_client import consumer_config, producer_config
from workloads.delivery import DeliveryFuture
from workloads.kafka_codes import send_definite
from workloads.kafka_python_client import consumer_settings, keyword_settings, producer_settings


def test_every_client_name_opens_its_factory() -> None:
    assert CLIENT_NAMES == ("squall", "confluent-kafka", "kafka-python")
    for name in CLIENT_NAMES:
        assert client_factory(name) is not None
    assert [speaks_kafka(name) for name in CLIENT_NAMES] == [False, True, True]
    with pytest.raises(ValueError, match="no client 'aiokafka'"):
        client_factory("aiokafka")


def test_a_broker_refusal_is_definite_only_on_a_single_attempt() -> None:
    assert send_definite(19, retries=0)  # NOT_ENOUGH_REPLICAS: refused before the append
    assert not send_definite(19, retries=3)  # an earlier attempt may have landed
    assert not send_definite(6, retries=0)  # NOT_LEADER: may follow the append
    assert not send_definite(20, retries=0)  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert not send_definite(7, retries=0)  # REQUEST_TIMED_OUT


def test_librdkafka_gets_the_workloads_settings_with_a_bounded_delivery_timeout() -> None:
    spec = WorkloadSpec(client="confluent-kafka", producer_retries=2, request_timeout_ms=5000)
    config = producer_config("h:9093", acks=-1, mode="async", settings=spec.producer_settings())
    assert config["bootstrap.servers"] == "h:9093" and config["acks"] == -1
    assert config["enable.idempotence"] is False
    assert config["message.send.max.retries"] == 2
    assert config["message.timeout.ms"] == 5000 * 3 + 1000
    assert config["socket.timeout.ms"] == 5000
    sync = producer_config("h:9093", acks=1, mode="sync", settings={"request.timeout.ms": 100})
    assert sync["linger.ms"] == 0 and sync["message.timeout.ms"] == 1100
    given = producer_config("h", acks=1, mode="async", settings={"message.timeout.ms": 7})
    assert given["message.timeout.ms"] == 7


def test_librdkafka_consumers_never_commit_by_themselves_and_always_have_a_group() -> None:
    spec = WorkloadSpec(client="confluent-kafka")
    member = consumer_config("h", spec.consumer_settings("zk:2181"))
    assert member["group.id"] == spec.group and "zookeeper.connect" not in member
    assert member["enable.auto.commit"] is False
    # librdkafka's consumers time their requests out by socket.timeout.ms, not the
    # producer's request.timeout.ms.
    assert member["socket.timeout.ms"] == spec.request_timeout_ms
    assert "request.timeout.ms" not in member
    assert member["fetch.wait.max.ms"] == 100  # each poll's fresh fetch is not held long
    # and brings little more than a poll returns: the rest is dropped at the next poll.
    assert member["max.partition.fetch.bytes"] == 64 * 1024
    mine = consumer_config("h", {"max.partition.fetch.bytes": 1 << 20})
    assert mine["max.partition.fetch.bytes"] == 1 << 20
    outsider = consumer_config("h", spec.consumer_settings(None))
    assert outsider["group.id"].startswith("squall-reader-")


def test_kafka_python_gets_keywords_and_refuses_names_it_does_not_know() -> None:
    spec = WorkloadSpec(client="kafka-python", request_timeout_ms=4000)
    producer = producer_settings(
        "h", acks=-1, mode="async", settings=spec.producer_settings(), client_id="p"
    )
    assert producer["acks"] == "all" and producer["retries"] == 0
    assert producer["linger_ms"] == 5  # the workload's queue.buffering.max.ms
    assert producer["enable_idempotence"] is False
    assert producer["delivery_timeout_ms"] == 4000 + 5 + 1000
    assert producer["max_block_ms"] == 4000
    consumer = consumer_settings("h", spec.consumer_settings("zk:2181"), client_id="c")
    assert consumer["group_id"] == spec.group and consumer["enable_auto_commit"] is False
    assert "zookeeper_connect" not in consumer
    with pytest.raises(ValueError, match=r"kafka-python has no setting 'fetch\.wait\.max\.ms'"):
        keyword_settings({"fetch.wait.max.ms": 10}, {"fetch_max_wait_ms": 500})


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_the_spec_refuses_a_kafka_clients_settings_that_it_lacks_or_the_workload_owns(
    client: str,
) -> None:
    with pytest.raises(ValidationError, match=r"no-such\.setting"):
        WorkloadSpec(client=client, producer_config={"no-such.setting": 1})
    with pytest.raises(ValidationError, match="which the workload owns"):
        WorkloadSpec(client=client, producer_config={"retries": 3})
    with pytest.raises(ValidationError, match="which the workload owns"):
        WorkloadSpec(client=client, consumer_config={"group.id": "mine"})
    assert WorkloadSpec(client=client, producer_config={"linger.ms": 10}).client == client


def test_a_kafka_client_turns_the_kafka_listeners_on() -> None:
    spec = TestSpec(name="t", workload=WorkloadSpec(client="kafka-python"))
    assert not spec.kafka_listener
    resolved = spec.resolved(runtime="local")
    assert resolved.kafka_listener and resolved.to_json()["workload"]["client"] == "kafka-python"
    assert not TestSpec(name="t").resolved(runtime="local").kafka_listener


def test_a_delivery_future_completes_once_and_calls_back_on_either_side() -> None:
    future = DeliveryFuture()
    seen: list[SendFuture] = []
    future.add_callback(seen.append)
    with pytest.raises(TimeoutError):
        future.result(0.01)
    done = threading.Thread(target=future.succeed, args=(SendResult(7),))
    done.start()
    done.join()
    future.fail(OperationError("X", "too late"))  # ignored: the outcome is known
    assert future.result(1) == SendResult(7) and seen == [future]
    failed = DeliveryFuture()
    failed.fail(OperationError("_MSG_TIMED_OUT", "no answer"))
    late: list[SendFuture] = []
    failed.add_callback(late.append)
    assert late == [failed]
    with pytest.raises(OperationError, match="no answer"):
        failed.result(0)
