"""WorkloadSpec: defaults, derived values and validation with messages that say what to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from squall.config import ConfigurationError
from workloads import OpMix, WorkloadSpec, WorkloadSpecError, key_name, partition_of
from workloads.spec import IDEMPOTENT_RETRIES


def test_defaults_are_valid_and_name_keys_topic_dash_partition() -> None:
    spec = WorkloadSpec(topic="orders", partitions=3)
    assert spec.keys == ["orders-0", "orders-1", "orders-2"]
    assert spec.key(2) == "orders-2"
    assert spec.group == "squall-orders"
    assert partition_of(key_name("a-b", 7)) == 7


def test_rate_is_split_between_producers_and_consumers_by_the_mix() -> None:
    mix = OpMix(send=1.9, poll=1, commit=0.5, crash=0.5, producer_crash=0.1)
    spec = WorkloadSpec(rate=100.0, mix=mix)
    assert spec.producer_rate == pytest.approx(50.0)
    assert spec.consumer_rate == pytest.approx(50.0)
    assert WorkloadSpec(rate=None).producer_rate is None
    # Without producers their crash weight means nothing: the consumers get the whole rate.
    alone = WorkloadSpec(rate=100.0, producers=0, mix=OpMix(send=0, producer_crash=0.5))
    assert alone.consumer_rate == pytest.approx(100.0)


def test_subscribe_assigns_every_partition_and_assign_shares_them_out() -> None:
    member = WorkloadSpec(partitions=5, consumers=2, subscription="subscribe")
    assert member.group_membership and member.assignment(0) == member.assignment(1) == []
    subscribe = WorkloadSpec(
        partitions=5, consumers=2, subscription="subscribe", group_membership=False
    )
    assert subscribe.assignment(0) == subscribe.assignment(1) == [0, 1, 2, 3, 4]
    assign = WorkloadSpec(partitions=5, consumers=2, subscription="assign")
    assert not assign.group_membership and assign.assignment(0) == [0, 2, 4]
    # Members crash less often: each crash and each join rebalances the whole group.
    assert member.consumer_crash_interval_s == 60.0
    assert subscribe.consumer_crash_interval_s == assign.consumer_crash_interval_s == 5.0
    chosen = WorkloadSpec(consumer_crash_interval_s=2.0)
    assert chosen.group_membership and chosen.consumer_crash_interval_s == 2.0
    assert WorkloadSpec(consumer_crash_interval_s=None).consumer_crash_interval_s is None
    assert WorkloadSpec.model_validate(member.to_dict()) == member
    assert assign.assignment(1) == [1, 3]
    many = WorkloadSpec(partitions=2, consumers=3, subscription="assign")
    assert [many.assignment(i) for i in range(3)] == [[0], [1], [0]]


def test_client_settings_layer_the_workload_defaults_and_the_group() -> None:
    spec = WorkloadSpec(
        producer_mode="async",
        producer_config={"request.timeout.ms": 2000},
        consumer_config={"fetch.max.wait.ms": 50},
        group_id="g1",
    )
    assert spec.producer_settings() == {
        "queue.buffering.max.ms": 5,
        "request.timeout.ms": 2000,
        "message.send.max.retries": 0,
    }
    settings = spec.consumer_settings("127.0.0.1:2181")
    assert settings["group.id"] == "g1"
    assert settings["zookeeper.connect"] == "127.0.0.1:2181"
    assert settings["auto.offset.reset"] == "earliest"
    assert settings["fetch.max.wait.ms"] == 50
    assert "group.id" not in spec.consumer_settings(None)


def test_round_trips_through_a_dict() -> None:
    spec = WorkloadSpec(
        topic="t", acks=1, mix=OpMix(send=1, poll=2, commit=0, crash=0), topic_config={}
    )
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec


def problem(call: Callable[[], object], model: type[BaseModel] = WorkloadSpec) -> str:
    """The message a user reads for what `call` rejects (as squall reports it)."""
    with pytest.raises(ValidationError) as caught:
        call()
    return str(ConfigurationError.from_validation(caught.value, source="t.toml", model=model))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"topic": "a/b"}, "topic = \"a/b\": must match pattern '^[A-Za-z0-9._-]{1,249}$'"),
        ({"topic": ".."}, "reserved"),
        ({"partitions": 0}, "partitions = 0: must be greater than or equal to 1"),
        ({"partitions": True}, "partitions = true: must be a valid integer"),
        ({"acks": 2}, "acks = 2: must be -1, 0 or 1"),
        ({"acks": True}, "acks = true: expected -1 (all), 0 or 1"),
        ({"producer_mode": "batch"}, "producer_mode = \"batch\": must be 'sync' or 'async'"),
        ({"producer_mode": "asyn"}, 'did you mean "async"?'),
        ({"rate": 0}, "rate = 0: must be greater than 0"),
        ({"rate": float("nan")}, "rate = NaN: must be a finite number"),
        ({"value_size": -1}, "value_size = -1"),
        ({"value_size": 2 << 20}, "value_size = 2097152: must be less than or equal to 1048576"),
        ({"consumer_mode": "exactly-once"}, 'consumer_mode = "exactly-once"'),
        ({"subscription": "both"}, 'subscription = "both"'),
        ({"producers": 0, "consumers": 0}, "producers and consumers are both 0"),
        ({"producers": 0}, "mix.send is positive but producers is 0"),
        (
            {"mix": OpMix(send=0, poll=1)},
            "producers is 2 but mix.send is 0; give sends a weight or set producers=0",
        ),
        ({"consumers": 0}, "consumers is 0; add a consumer or set those weights to 0"),
        ({"topic_config": {"min.insync": "2"}}, "[topic_config]: unknown topic key(s) min.insync"),
        (
            {"topic_config": {"min.insync.replicas": "3"}, "replication_factor": 2},
            "min.insync.replicas=3 exceeds replication_factor=2",
        ),
        ({"consumer_config": {"group.id": "x"}}, "[consumer_config]: sets group.id"),
        ({"consumer_config": {"auto.offset.reset": "sideways"}}, "auto.offset.reset"),
        ({"producer_config": {"linger": 5}}, "unknown producer config key(s) linger"),
        ({"group_id": "a/b"}, "group_id = \"a/b\": expected a non-empty name without '/'"),
        ({"final_read_deadline_s": 0}, "final_read_deadline_s = 0"),
    ],
)
def test_invalid_fields_are_named_with_what_would_be_valid(
    changes: dict[str, Any], message: str
) -> None:
    assert message in problem(lambda: WorkloadSpec(**changes))


def test_mix_weights_must_be_finite_non_negative_and_not_all_zero() -> None:
    assert "crash = -1: must be greater than or equal to 0" in problem(
        lambda: OpMix(crash=-1), OpMix
    )
    assert "every weight of the op mix is 0" in problem(
        lambda: OpMix(send=0, poll=0, commit=0, crash=0), OpMix
    )


def test_unknown_fields_are_named_with_the_closest_valid_one() -> None:
    assert 'ackz: unknown key; did you mean "acks"?' in problem(
        lambda: WorkloadSpec.from_dict({"ackz": 1})
    )
    assert (
        "[mix].read: unknown key. Valid keys: send, poll, commit, crash, producer_crash."
        in problem(lambda: WorkloadSpec.from_dict({"mix": {"read": 1}}))
    )
    spec = WorkloadSpec.from_dict({"mix": {"send": 1, "poll": 1}, "rate": None})
    assert spec.mix == OpMix(send=1, poll=1) and spec.rate is None


def test_a_key_that_is_not_topic_dash_partition() -> None:
    with pytest.raises(WorkloadSpecError, match="is not '<topic>-<partition>'"):
        partition_of("orders")


def test_the_default_workload_is_intense_async_and_bounded() -> None:
    spec = WorkloadSpec()
    assert spec.producer_mode == "async" and spec.in_flight > 1
    assert spec.rate == 1000.0
    assert spec.producers * spec.in_flight >= 16
    # Consumers crash in time, not per operation, and some never crash.
    assert spec.mix.crash == 0 and spec.consumer_crash_interval_s is not None
    assert 0 < spec.long_lived_consumers < spec.consumers
    assert spec.mix.producer_crash > 0
    # About one producer crash every 20-30 s at the default rate.
    producer_steps = spec.producer_rate or 0.0
    crash_interval_s = 1 / (producer_steps * spec.mix.producer_crash / spec.mix.producer_total)
    assert 15 < crash_interval_s < 40
    assert WorkloadSpec(producer_mode="sync").producer_mode == "sync"
    assert WorkloadSpec(rate=None).rate is None


def test_the_producer_never_retries_by_itself_unless_told_and_test_json_says_so() -> None:
    spec = WorkloadSpec()
    assert spec.producer_retries == 0
    assert spec.producer_settings()["message.send.max.retries"] == 0
    assert spec.to_dict()["producer_retries"] == 0
    from_config = WorkloadSpec(producer_config={"message.send.max.retries": "3"})
    assert from_config.producer_retries == 3
    assert from_config.to_dict()["producer_retries"] == 3
    assert from_config.producer_settings()["message.send.max.retries"] == 3
    direct = WorkloadSpec(producer_retries=2)
    assert direct.producer_settings()["message.send.max.retries"] == 2
    # test.json's workload reads back as the same spec.
    for spec in (WorkloadSpec(), from_config, direct):
        assert WorkloadSpec.from_dict(spec.to_dict()) == spec


def test_test_json_carries_the_effective_producer_retries() -> None:
    from squall.spec import TestDocument, TestSpec

    spec = TestSpec(name="t", workload=WorkloadSpec(producer_config={"retry.backoff.ms": 5}))
    document = spec.to_json()
    assert document["workload"]["producer_retries"] == 0
    assert isinstance(document["workload"]["producer_retries"], int)
    again = TestDocument.model_validate(document)
    assert again.workload == spec.workload


def test_idempotence_needs_acks_all_and_retries() -> None:
    assert "needs acks = -1" in problem(
        lambda: WorkloadSpec(idempotence=True, acks=1, producer_retries=3)
    )
    spec = WorkloadSpec(idempotence=True, producer_retries=3)  # squall's own client
    assert spec.producer_settings()["enable.idempotence"] is True
    assert "the workload owns" in problem(
        lambda: WorkloadSpec(producer_config={"enable.idempotence": True})
    )
    assert "needs acks = -1" in problem(
        lambda: WorkloadSpec(idempotence=True, client="kafka-python", acks=1, producer_retries=3)
    )
    assert "producer_retries >= 1" in problem(
        lambda: WorkloadSpec(idempotence=True, client="confluent-kafka")
    )
    assert "the workload owns" in problem(
        lambda: WorkloadSpec(client="kafka-python", producer_config={"enable.idempotence": True})
    )
    spec = WorkloadSpec(idempotence=True, client="kafka-python", producer_retries=3)
    assert spec.producer_settings()["enable.idempotence"] is True
    assert spec.to_dict()["idempotence"] is True
    assert "enable.idempotence" not in WorkloadSpec().producer_settings()


def test_half_the_producers_are_idempotent_by_default_where_acks_is_minus_one() -> None:
    spec = WorkloadSpec()
    assert (spec.producers, spec.idempotent_producers) == (2, 1)
    assert spec.to_dict()["idempotent_producers"] == 1
    first, second = (
        spec.producer_settings(idempotent=spec.is_idempotent_producer(i)) for i in (0, 1)
    )
    assert first["enable.idempotence"] is True
    assert first["message.send.max.retries"] == IDEMPOTENT_RETRIES
    assert "enable.idempotence" not in second and second["message.send.max.retries"] == 0
    assert WorkloadSpec(producers=5).idempotent_producers == 2
    assert WorkloadSpec(producers=1).idempotent_producers == 0
    assert WorkloadSpec(acks=1).idempotent_producers == 0
    assert WorkloadSpec(acks=0, producers=4).idempotent_producers == 0
    assert WorkloadSpec(idempotence=True, producer_retries=2, producers=3).idempotent_producers == 3
    own = WorkloadSpec(idempotent_producers=2, producer_retries=5)
    assert own.producer_settings(idempotent=True)["message.send.max.retries"] == 5
    assert own.producer_settings(idempotent=False)["message.send.max.retries"] == 5
    assert WorkloadSpec.from_dict(own.to_dict()) == own
    for client in ("confluent-kafka", "kafka-python"):
        assert WorkloadSpec(client=client).idempotent_producers == 1


def test_idempotent_producers_must_fit_the_producers_and_the_acks() -> None:
    assert "idempotent_producers=3 exceeds producers=2" in problem(
        lambda: WorkloadSpec(idempotent_producers=3)
    )
    assert "needs acks = -1" in problem(lambda: WorkloadSpec(acks=1, idempotent_producers=1))
    assert "idempotence makes every producer idempotent" in problem(
        lambda: WorkloadSpec(idempotence=True, producer_retries=1, idempotent_producers=1)
    )
    assert "idempotent_producers = -1" in problem(lambda: WorkloadSpec(idempotent_producers=-1))


def test_producer_retries_set_twice_must_agree() -> None:
    message = problem(
        lambda: WorkloadSpec(producer_retries=1, producer_config={"message.send.max.retries": 2})
    )
    assert "producer_retries=1 but producer_config sets message.send.max.retries=2" in message
    assert "producer_retries = -1" in problem(lambda: WorkloadSpec(producer_retries=-1))
    same = WorkloadSpec(producer_retries=2, producer_config={"message.send.max.retries": 2})
    assert same.producer_retries == 2


def test_the_clients_time_out_requests_per_the_workload_unless_their_config_says_otherwise() -> (
    None
):
    spec = WorkloadSpec(request_timeout_ms=2500)
    assert spec.producer_settings()["request.timeout.ms"] == 2500
    assert spec.consumer_settings("zk:2181")["request.timeout.ms"] == 2500
    own = WorkloadSpec(
        producer_config={"request.timeout.ms": 9000}, consumer_config={"request.timeout.ms": 7000}
    )
    assert own.producer_settings()["request.timeout.ms"] == 9000
    assert own.consumer_settings(None)["request.timeout.ms"] == 7000


def test_poll_backoff_bounds_are_checked_and_named() -> None:
    with pytest.raises(ValidationError, match="poll_backoff_max_ms=50 is below poll_backoff_ms"):
        WorkloadSpec(poll_backoff_ms=100, poll_backoff_max_ms=50)
    with pytest.raises(ValidationError, match="consumer_crash_interval_s"):
        WorkloadSpec(consumer_crash_interval_s=0)
    with pytest.raises(ValidationError, match="long_lived_consumers"):
        WorkloadSpec(long_lived_consumers=-1)


def test_group_membership_is_a_subscribing_at_least_once_consumer() -> None:
    spec = WorkloadSpec(client="kafka-python", group_membership=True)
    assert spec.assignment(0) == [] and spec.to_dict()["group_membership"] is True
    assert WorkloadSpec(client="confluent-kafka", group_membership=True).group_membership
    assert WorkloadSpec(group_membership=True).group_membership  # squall's own client
    member = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
    assert WorkloadSpec(group_membership=True, consumer_config=member).group_membership
    with pytest.raises(ValidationError, match="unknown consumer config key"):
        WorkloadSpec(consumer_config=member, group_membership=False)  # for no member
    with pytest.raises(ValidationError, match='needs subscription = "subscribe"'):
        WorkloadSpec(client="kafka-python", group_membership=True, subscription="assign")
    spec = WorkloadSpec(group_membership=True, consumer_mode="at-most-once")
    assert spec.consumer_mode == "at-most-once"
