"""Consumer groups: committed offsets in a real ZooKeeper, records from a real standalone broker.

Each test gets a fresh ZooKeeper chroot (the `zookeeper` fixture) and its own topic on one
broker process shared by the module.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from squall.cluster.broker_process import BrokerProcess
from squall.cluster.zookeeper_server import ZooKeeperServer, free_port
from system_under_test.client import (
    AdminClient,
    ClientConfigError,
    ConsumedRecord,
    Consumer,
    NoOffsetForPartitionError,
    OffsetCommitError,
    OffsetStoreError,
    Producer,
)
from tests.support import REPO, run_squall

pytestmark = pytest.mark.integration

RECORDS = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("broker")) as process:
        yield process


@pytest.fixture
def topic(broker: BrokerProcess) -> str:
    """A fresh two-partition topic with values v0..v9 at offsets 0..9 of each partition."""
    name = f"groups-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(name, 2)
    with Producer(broker.bootstrap, acks=1) as producer:
        for partition in (0, 1):
            for i in range(RECORDS):
                producer.send(name, f"v{i}".encode(), partition=partition).result()
    return name


def group_config(zookeeper: str, group: str, **extra: object) -> dict[str, object]:
    return {"group.id": group, "zookeeper.connect": zookeeper, **extra}


def poll_until(consumer: Consumer, count: int, timeout_s: float = 10.0) -> list[ConsumedRecord]:
    records: list[ConsumedRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        records.extend(consumer.poll(200))
    return records


def offsets(records: list[ConsumedRecord]) -> list[int]:
    return [r.offset for r in records]


# --- the library ---------------------------------------------------------------------------


def test_a_new_consumer_of_the_group_resumes_at_the_committed_offset(
    broker: BrokerProcess, zookeeper: str, topic: str
) -> None:
    config = group_config(zookeeper, "g", **{"auto.offset.reset": "earliest"})
    with Consumer(broker.bootstrap, config=config) as first:
        first.assign([(topic, 0)])
        assert first.committed(topic, 0) is None
        assert offsets(poll_until(first, RECORDS)) == list(range(RECORDS))
        assert first.commit({(topic, 0): 4}) == {(topic, 0): 4}
        assert first.committed(topic, 0) == 4

    with Consumer(broker.bootstrap, config=config) as second:
        second.assign([(topic, 0)])
        assert second.position(topic, 0) == 4
        records = poll_until(second, RECORDS - 4)
        assert offsets(records) == list(range(4, RECORDS))
        assert records[0].value == b"v4"

    # Kafka 0.8's layout: the next offset to read, as text, under the chroot.
    admin = KazooClient(hosts=zookeeper)
    admin.start(timeout=10)
    try:
        data, _stat = admin.get(f"/consumers/g/offsets/{topic}/0")
    finally:
        admin.stop()
        admin.close()
    assert data == b"4"


def test_groups_are_independent(broker: BrokerProcess, zookeeper: str, topic: str) -> None:
    earliest = {"auto.offset.reset": "earliest"}
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "a", **earliest)) as a:
        a.assign([(topic, 0)])
        a.commit({(topic, 0): 7})
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "b", **earliest)) as b:
        b.assign([(topic, 0)])
        assert b.committed(topic, 0) is None
        assert b.position(topic, 0) == 0
        b.commit({(topic, 0): 2})
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "a")) as a:
        a.assign([(topic, 0)])
        assert a.committed(topic, 0) == 7
        assert a.position(topic, 0) == 7


def test_commit_without_offsets_commits_the_positions_reached_by_poll(
    broker: BrokerProcess, zookeeper: str, topic: str
) -> None:
    config = group_config(zookeeper, "g")
    with Consumer(broker.bootstrap, config=config) as consumer:
        consumer.assign([(topic, 0), (topic, 1)])
        consumer.seek(topic, 0, 0)
        consumer.seek(topic, 1, 6)
        records = poll_until(consumer, RECORDS + RECORDS - 6)
        assert sorted((r.partition, r.offset) for r in records) == [
            *((0, o) for o in range(RECORDS)),
            *((1, o) for o in range(6, RECORDS)),
        ]
        assert consumer.commit() == {(topic, 0): RECORDS, (topic, 1): RECORDS}
    with Consumer(broker.bootstrap, config=config) as again:
        again.assign([(topic, 0), (topic, 1)])
        assert again.committed(topic, 0) == RECORDS
        assert again.committed(topic, 1) == RECORDS
        assert again.poll(300) == []


def test_auto_offset_reset_applies_when_the_group_has_no_committed_offset(
    broker: BrokerProcess, zookeeper: str, topic: str
) -> None:
    for reset, start in (("earliest", 0), ("smallest", 0), ("latest", RECORDS), ("largest", 10)):
        config = group_config(zookeeper, "fresh", **{"auto.offset.reset": reset})
        with Consumer(broker.bootstrap, config=config) as consumer:
            consumer.assign([(topic, 0)])
            assert consumer.position(topic, 0) == start, reset
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "fresh")) as consumer:
        consumer.assign([(topic, 0)])  # auto.offset.reset defaults to none
        with pytest.raises(NoOffsetForPartitionError, match=r"auto\.offset\.reset"):
            consumer.poll(100)
    # A committed offset wins over auto.offset.reset.
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "fresh")) as consumer:
        consumer.assign([(topic, 0)])
        consumer.commit({(topic, 0): 3})
    config = group_config(zookeeper, "fresh", **{"auto.offset.reset": "latest"})
    with Consumer(broker.bootstrap, config=config) as consumer:
        consumer.assign([(topic, 0)])
        assert consumer.position(topic, 0) == 3


def test_auto_commit_commits_on_poll_and_on_close(
    broker: BrokerProcess, zookeeper: str, topic: str
) -> None:
    config = group_config(
        zookeeper,
        "auto",
        **{
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "true",
            "auto.commit.interval.ms": 0,
        },
    )
    with Consumer(broker.bootstrap, config=config) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek(topic, 0, 2)
        assert offsets(poll_until(consumer, RECORDS - 2)) == list(range(2, RECORDS))
        consumer.poll(0)  # commits the positions the earlier polls reached
        assert consumer.committed(topic, 0) == RECORDS
        consumer.seek(topic, 0, 5)
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "auto")) as reader:
        reader.assign([(topic, 0)])
        assert reader.committed(topic, 0) == 5  # committed by close()


def test_commit_outcome_is_typed_when_zookeeper_stops_answering(
    broker: BrokerProcess, zookeeper_server_factory: Callable[..., ZooKeeperServer], topic: str
) -> None:
    server = zookeeper_server_factory()
    config = group_config(server.connect_string, "g", **{"zookeeper.session.timeout.ms": 1500})
    with Consumer(broker.bootstrap, config=config) as consumer:
        consumer.assign([(topic, 0), (topic, 1)])
        consumer.commit({(topic, 0): 1})
        server.pause()
        try:
            # In flight when the connection times out: it may or may not have landed.
            with pytest.raises(OffsetCommitError) as in_flight:
                consumer.commit({(topic, 0): 2, (topic, 1): 2})
            assert not in_flight.value.definite
            assert in_flight.value.committed == {}
            assert server.connect_string in str(in_flight.value)
            # Disconnected: nothing is sent, so it certainly failed.
            with pytest.raises(OffsetCommitError, match="nothing was written") as refused:
                consumer.commit({(topic, 0): 3})
            assert refused.value.definite
            with pytest.raises(OffsetStoreError, match="not connected to ZooKeeper"):
                consumer.committed(topic, 0)
        finally:
            server.resume()
        deadline = time.monotonic() + 15
        while True:
            try:
                consumer.commit({(topic, 0): 4})
                break
            except OffsetCommitError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert consumer.committed(topic, 0) == 4


# --- errors --------------------------------------------------------------------------------


def test_a_group_needs_zookeeper_and_commits_need_a_group(broker: BrokerProcess) -> None:
    with pytest.raises(ClientConfigError, match=r"group\.id='g' needs zookeeper\.connect"):
        Consumer(broker.bootstrap, config={"group.id": "g"})
    with Consumer(broker.bootstrap) as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(ClientConfigError, match=r"needs a consumer group.*group\.id"):
            consumer.commit({("t", 0): 1})
        with pytest.raises(ClientConfigError, match=r"needs a consumer group"):
            consumer.committed("t", 0)


def test_unreachable_zookeeper_is_a_clear_error(broker: BrokerProcess) -> None:
    connect = f"127.0.0.1:{free_port()}/squall"
    config = group_config(connect, "g", **{"zookeeper.connection.timeout.ms": 500})
    with pytest.raises(OffsetStoreError, match=f"cannot reach ZooKeeper at {connect}"):
        Consumer(broker.bootstrap, config=config)


# --- the console consumer ------------------------------------------------------------------


def squall(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_squall(*args, cwd=REPO, timeout=timeout)


def lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_console_consumer_resumes_from_the_committed_offset(
    broker: BrokerProcess, zookeeper: str, topic: str
) -> None:
    group = ("--group", "console", "--zookeeper", zookeeper)
    common = ("consume", "--bootstrap", broker.bootstrap, "--topic", topic, *group)
    first = squall(*common, "--commit", "--max-records", "5")
    assert first.returncode == 0, first.stderr
    assert lines(first.stdout) == [{"offset": i, "value": f"v{i}"} for i in range(5)]
    second = squall(*common, "--commit", "--max-records", "5")
    assert second.returncode == 0, second.stderr
    assert lines(second.stdout) == [{"offset": i, "value": f"v{i}"} for i in range(5, 10)]
    # An explicit --from-offset wins over the committed offset; without --commit nothing moves.
    third = squall(*common, "--from-offset", "8", "--timeout-ms", "300")
    assert third.returncode == 0, third.stderr
    assert [line["offset"] for line in lines(third.stdout)] == [8, 9]
    with Consumer(broker.bootstrap, config=group_config(zookeeper, "console")) as consumer:
        consumer.assign([(topic, 0)])
        assert consumer.committed(topic, 0) == 10


def test_console_consumer_errors(broker: BrokerProcess, topic: str) -> None:
    usage = squall("consume", "--help")
    assert usage.returncode == 0, usage.stderr
    assert "--group" in usage.stdout and "--zookeeper" in usage.stdout
    common = ("consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--max-records", "1")
    no_zookeeper = squall(*common, "--group", "g")
    assert no_zookeeper.returncode == 2
    assert "zookeeper.connect" in no_zookeeper.stderr
    no_group = squall(*common, "--commit")
    assert no_group.returncode == 2
    assert "--commit needs --group" in no_group.stderr

    connect = f"127.0.0.1:{free_port()}"
    unreachable = squall(
        *common,
        "--group",
        "g",
        "--zookeeper",
        connect,
        "--consumer-config",
        "zookeeper.connection.timeout.ms=500",
    )
    assert unreachable.returncode == 3, unreachable.stderr
    assert f"cannot reach ZooKeeper at {connect}" in unreachable.stderr
    assert unreachable.stdout == ""
