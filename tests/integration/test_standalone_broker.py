"""A real standalone broker on 127.0.0.1 with the client library: produce, fetch, metadata,
topics, offsets, restarts, bad input and a SIGKILL while producing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from system_under_test.client import (
    AdminClient,
    BrokerError,
    BrokerUnavailableError,
    ClientConfigError,
    Consumer,
    ErrorCode,
    NoOffsetForPartitionError,
    ProduceError,
    Producer,
    QueueFullError,
)
from system_under_test.client.connection import REQUEST_VERSIONS, decode_response
from system_under_test.config import BrokerConfig
from system_under_test.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
)
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.api_versions import ApiVersionsResponse
from system_under_test.kafka.apis import APIS
from system_under_test.kafka.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from system_under_test.kafka.schema import Body, encode_body
from system_under_test.log.record import decode_records, encode_records, iter_batches
from system_under_test.replication.partition import Partition
from system_under_test.server import Broker

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


# --- an in-process broker on its own event loop thread ---------------------------------------


class BrokerThread:
    """A Broker running on an event loop in a background thread."""

    def __init__(self, log_dir: Path, **overrides: object) -> None:
        self.log_dir = log_dir
        self.overrides = {"log.dirs": str(log_dir), "listeners": "127.0.0.1:0", **overrides}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.broker: Broker | None = None

    def start(self) -> BrokerThread:
        self.broker = Broker(BrokerConfig(self.overrides))
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(30)
        return self

    def stop(self) -> None:
        if self.broker is not None:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(60)
            self.broker = None

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None
        return f"127.0.0.1:{self.broker.port}"

    @property
    def port(self) -> int:
        assert self.broker is not None
        return self.broker.port

    def call(self, fn: Callable[[], T]) -> T:
        """Run fn on the broker's loop (logs belong to it) and return its result."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def log_state(self) -> dict[tuple[str, int], tuple[int, int, str]]:
        """(log start, log end, sha256 of the segment files) of every partition."""

        def state() -> dict[tuple[str, int], tuple[int, int, str]]:
            assert self.broker is not None
            out = {}
            for key, partition in self.broker.partitions.items():
                digest = hashlib.sha256()
                for path in sorted(partition.log.dir.glob("*.log")):
                    digest.update(path.read_bytes())
                out[key] = (
                    partition.log_start_offset,
                    partition.log_end_offset,
                    digest.hexdigest(),
                )
            return out

        return self.call(state)


@pytest.fixture
def broker_thread(tmp_path: Path) -> Iterator[BrokerThread]:
    broker = BrokerThread(tmp_path / "logs").start()
    yield broker
    broker.close()


@pytest.fixture
def admin(broker_thread: BrokerThread) -> Iterator[AdminClient]:
    client = AdminClient(broker_thread.bootstrap)
    yield client
    client.close()


def consume_all(bootstrap: str, topic: str, partitions: int = 1) -> list[Any]:
    with Consumer(bootstrap, config={"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        out = []
        while batch := consumer.poll(300):
            out.extend(batch)
        return out


# --- raw wire helpers -------------------------------------------------------------------------


def raw_connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def raw_frame(
    api_key: int, body: bytes, *, version: int | None = None, correlation_id: int = 7
) -> bytes:
    """A request frame of `body` (at the client's version of its API unless `version`)."""
    if version is None:
        version = REQUEST_VERSIONS[api_key]
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes | None:
    """One response payload, or None if the broker closed the connection."""
    head = b""
    try:
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (size,) = struct.unpack(">i", head)
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    except ConnectionResetError:
        return None


def closed_by_broker(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def request_body(body: Body) -> bytes:
    """A request body alone, at the client's version of its API (for raw_frame)."""
    return bytes(encode_body(body, REQUEST_VERSIONS[body.API_KEY]))


def produce_body(topic: str, partition: int, records: bytes, *, acks: int = 1) -> bytes:
    data = PartitionProduceData(index=partition, records=records)
    request = ProduceRequest(
        acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(name=topic, partition_data=[data])]
    )
    return request_body(request)


def produce_error(port: int, topic: str, records: bytes, *, acks: int = 1) -> ErrorCode:
    with raw_connect(port) as sock:
        sock.sendall(raw_frame(ApiKey.PRODUCE, produce_body(topic, 0, records, acks=acks)))
        payload = read_frame(sock)
    assert payload is not None
    _, body = decode_response(payload, ProduceResponse)
    return ErrorCode(body.responses[0].partition_responses[0].error_code)


def assert_still_serving(port: int) -> None:
    with raw_connect(port) as sock:
        sock.sendall(raw_frame(ApiKey.API_VERSIONS, b""))
        payload = read_frame(sock)
    assert payload is not None
    _, body = decode_response(payload, ApiVersionsResponse)
    assert body.error_code == 0


# --- produce and fetch ------------------------------------------------------------------------


def test_sync_produce_then_consume_round_trip(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("orders", 2)
    sent = [
        (b"k1", b"first", 1_000),
        (None, b"second", 2_000),
        (b"k3", None, 3_000),
        (None, b"x" * 5000, 4_000),
    ]
    with Producer(broker_thread.bootstrap, acks=1) as producer:
        offsets = [
            producer.send("orders", v, key=k, partition=1, timestamp_ms=ts).result(5).offset
            for k, v, ts in sent
        ]
    assert offsets == [0, 1, 2, 3]
    got = consume_all(broker_thread.bootstrap, "orders", 2)
    assert [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in got] == [
        (1, i, k, v, ts) for i, (k, v, ts) in enumerate(sent)
    ]


def test_async_producer_assigns_dense_offsets_matching_the_log(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("events", 3)
    config = {"batch.num.messages": 50, "queue.buffering.max.ms": 20}
    with Producer(broker_thread.bootstrap, acks=1, mode="async", config=config) as producer:
        futures = {f"v{i}".encode(): producer.send("events", f"v{i}".encode()) for i in range(900)}
        producer.flush(30)
        acked = {value: f.result(0) for value, f in futures.items()}
    by_partition: dict[int, list[int]] = {}
    for meta in acked.values():
        by_partition.setdefault(meta.partition, []).append(meta.offset)
    assert sorted(by_partition) == [0, 1, 2], "round-robin spreads records over all partitions"
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    consumed = {
        (r.partition, r.offset): r.value for r in consume_all(broker_thread.bootstrap, "events", 3)
    }
    assert consumed == {(m.partition, m.offset): value for value, m in acked.items()}


def test_an_idempotent_async_producer_writes_each_partition_in_order_once(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("seq", 3)
    config = {"batch.num.messages": 20, "queue.buffering.max.ms": 5, "enable.idempotence": True}
    with Producer(broker_thread.bootstrap, acks=-1, mode="async", config=config) as producer:
        futures = [producer.send("seq", b"%d" % i, partition=i % 3) for i in range(900)]
        producer.flush(30)
        offsets = [f.result(0).offset for f in futures]
    assert offsets == [i // 3 for i in range(900)]
    got = consume_all(broker_thread.bootstrap, "seq", 3)
    assert sorted((r.partition, r.offset, r.value) for r in got) == [
        (i % 3, i // 3, b"%d" % i) for i in sorted(range(900), key=lambda i: (i % 3, i))
    ]
    for partition in range(3):
        stored = broker_thread.call(
            lambda p=partition: partition_of(broker_thread, "seq", p).log.read(0, 1 << 20).records
        )
        batches = list(iter_batches(stored))
        # One producer id; each partition's sequences from 0, batch after batch, no gap.
        assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
        assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


def test_keyed_records_go_to_the_crc32_partition(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("keyed", 4)
    with Producer(broker_thread.bootstrap) as producer:
        for key in (b"a", b"b", b"c", b"d", b"a"):
            meta = producer.send("keyed", b"v", key=key).result(5)
            assert meta.partition == zlib.crc32(key) % 4


def test_acks_0_gets_no_response_but_records_arrive(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("fire", 1)
    with Producer(
        broker_thread.bootstrap, acks=0, mode="async", config={"queue.buffering.max.ms": 10}
    ) as producer:
        futures = [producer.send("fire", b"%d" % i) for i in range(200)]
        producer.flush(10)
    assert {f.result(0).offset for f in futures} == {-1}
    deadline = time.monotonic() + 10
    while admin.list_offsets("fire", 0, "latest") < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r.value for r in consume_all(broker_thread.bootstrap, "fire")] == [
        b"%d" % i for i in range(200)
    ]
    # On the wire: an acks=0 produce is never answered; the next request's response comes first.
    with raw_connect(broker_thread.port) as sock:
        sock.sendall(
            raw_frame(
                ApiKey.PRODUCE,
                produce_body("fire", 0, encode_records([(None, b"z", 1)]), acks=0),
                correlation_id=1,
            )
        )
        sock.sendall(raw_frame(ApiKey.API_VERSIONS, b"", correlation_id=2))
        payload = read_frame(sock)
    assert payload is not None and struct.unpack_from(">i", payload)[0] == 2


def test_acks_0_error_closes_the_connection(broker_thread: BrokerThread) -> None:
    with raw_connect(broker_thread.port) as sock:
        sock.sendall(
            raw_frame(
                ApiKey.PRODUCE,
                produce_body("missing", 0, encode_records([(None, b"z", 1)]), acks=0),
            )
        )
        assert closed_by_broker(sock)


def test_acks_all_standalone_and_min_insync_replicas(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("safe", 1)
    admin.create_topic("strict", 1, config={"min.insync.replicas": "2"})
    with Producer(broker_thread.bootstrap, acks=-1) as producer:
        assert producer.send("safe", b"ok").result(5).offset == 0
        before = broker_thread.log_state()
        error = producer.send("strict", b"refused").exception(30)
    assert isinstance(error, ProduceError)
    assert error.error is ErrorCode.NOT_ENOUGH_REPLICAS
    assert error.definite and error.retriable
    assert "min.insync.replicas" in str(error)
    assert broker_thread.log_state() == before


def test_invalid_required_acks(broker_thread: BrokerThread, admin: AdminClient) -> None:
    admin.create_topic("acks", 1)
    before = broker_thread.log_state()
    records = encode_records([(None, b"v", 1)])
    assert (
        produce_error(broker_thread.port, "acks", records, acks=2)
        is ErrorCode.INVALID_REQUIRED_ACKS
    )
    assert broker_thread.log_state() == before


def test_fetch_long_poll_waits_for_data_then_returns_at_once(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("poll", 1)
    with Consumer(broker_thread.bootstrap) as consumer:
        started = time.monotonic()
        empty = consumer.fetch("poll", 0, 0, max_wait_ms=400)
        assert empty.records == [] and empty.error is ErrorCode.NONE
        assert time.monotonic() - started >= 0.35, "an empty fetch waits max_wait_ms"

        def produce_later() -> None:
            time.sleep(0.3)
            with Producer(broker_thread.bootstrap) as producer:
                producer.send("poll", b"late").result(5)

        thread = threading.Thread(target=produce_later)
        started = time.monotonic()
        thread.start()
        result = consumer.fetch("poll", 0, 0, max_wait_ms=5000)
        elapsed = time.monotonic() - started
        thread.join()
    assert [r.value for r in result.records] == [b"late"]
    assert result.high_watermark == 1
    assert 0.25 <= elapsed < 3, f"the fetch should return when data arrives, took {elapsed:.2f}s"


def test_fetch_respects_max_bytes_but_returns_at_least_one_record(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("sizes", 1)
    with Producer(
        broker_thread.bootstrap, mode="async", config={"queue.buffering.max.ms": 1}
    ) as producer:
        for i in range(20):
            producer.send("sizes", bytes([i]) * 1000).result(5)  # a batch each
    with Consumer(broker_thread.bootstrap) as consumer:
        small = consumer.fetch("sizes", 0, 0, max_bytes=3500, max_wait_ms=0)
        tiny = consumer.fetch("sizes", 0, 5, max_bytes=10, max_wait_ms=0)
    assert [r.offset for r in small.records] == [0, 1, 2]
    assert [r.offset for r in tiny.records] == [5]
    assert small.high_watermark == 20 and small.log_start_offset == 0


def test_consumer_offset_out_of_range(broker_thread: BrokerThread, admin: AdminClient) -> None:
    admin.create_topic("range", 1)
    with Producer(broker_thread.bootstrap) as producer:
        producer.send("range", b"only").result(5)
    with Consumer(broker_thread.bootstrap) as consumer:
        consumer.assign([("range", 0)])
        with pytest.raises(NoOffsetForPartitionError, match="seek"):
            consumer.poll(100)
        consumer.seek("range", 0, 50)
        with pytest.raises(OffsetOutOfRangeError, match=r"offset 50 .* outside"):
            consumer.poll(100)
        consumer.seek_to_end("range", 0)
        assert consumer.position("range", 0) == 1
        assert consumer.poll(50) == []
        consumer.seek_to_beginning()
        assert consumer.position("range", 0) == 0
        assert [r.value for r in consumer.poll(1000)] == [b"only"]
    with Consumer(broker_thread.bootstrap, config={"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([("range", 0)])
        consumer.seek("range", 0, 50)
        assert [r.value for r in consumer.poll(1000)] == [b"only"]
        assert consumer.position("range", 0) == 1


# --- metadata, topics, offsets ------------------------------------------------------------------


def test_metadata_describes_brokers_and_topics(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("a", 2)
    admin.create_topic("b", 1)
    assert [(b.id, b.host, b.port) for b in admin.brokers()] == [
        (0, "127.0.0.1", broker_thread.port)
    ]
    topics = admin.describe_topics()
    assert [t.name for t in topics] == ["a", "b"]
    assert [
        (p.partition, p.leader, p.leader_epoch, p.replicas, p.isr) for p in topics[0].partitions
    ] == [
        (0, 0, 0, [0], [0]),
        (1, 0, 0, [0], [0]),
    ]
    with pytest.raises(BrokerError) as err:
        admin.describe_topics(["nope"])
    assert err.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert {v.api_key for v in admin.api_versions()} == {
        0,
        1,
        2,
        3,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        18,
        19,
        22,
    }


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"name": "dup", "partitions": 1}, TopicAlreadyExistsError, "already exists"),
        ({"name": "bad/name", "partitions": 1}, InvalidTopicError, "invalid"),
        ({"name": "x" * 250, "partitions": 1}, InvalidTopicError, "249"),
        ({"name": "..", "partitions": 1}, InvalidTopicError, "invalid"),
        ({"name": "zero", "partitions": 0}, InvalidPartitionsError, "at least|between"),
        (
            {"name": "rf", "partitions": 1, "replication_factor": 3},
            InvalidReplicationFactorError,
            "standalone",
        ),
        (
            {"name": "cfg", "partitions": 1, "config": {"no.such.key": "1"}},
            InvalidConfigError,
            "no.such.key",
        ),
        (
            {"name": "cfg2", "partitions": 1, "config": {"segment.bytes": "lots"}},
            InvalidConfigError,
            "segment.bytes",
        ),
    ],
)
def test_create_topic_errors_carry_the_brokers_reason(
    admin: AdminClient, kwargs: dict[str, Any], error: type[BrokerError], message: str
) -> None:
    admin.create_topic("dup", 1)
    with pytest.raises(error, match=message):
        admin.create_topic(**kwargs)
    if kwargs["name"] != "dup":
        assert kwargs["name"] not in [t.name for t in admin.describe_topics()]


def test_list_offsets_earliest_latest_and_by_time(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("times", 1)
    assert admin.list_offsets("times", 0, "earliest") == 0
    assert admin.list_offsets("times", 0, "latest") == 0
    with Producer(broker_thread.bootstrap) as producer:
        for ts in (1000, 2000, 3000):
            producer.send("times", b"v", timestamp_ms=ts).result(5)
    assert admin.list_offsets("times", 0, "earliest") == 0
    assert admin.list_offsets("times", 0, "latest") == 3
    assert admin.list_offsets("times", 0, 0) == 0
    assert admin.list_offsets("times", 0, 1500) == 1
    assert admin.list_offsets("times", 0, 3000) == 2
    assert admin.list_offsets("times", 0, 3001) == -1
    with pytest.raises(BrokerError) as err:
        admin.list_offsets("times", 7, "latest")
    assert err.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_background_retention_deletes_old_segments(tmp_path: Path) -> None:
    broker = BrokerThread(tmp_path / "logs", **{"log.retention.check.interval.ms": 50}).start()
    try:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic("old", 1, config={"segment.bytes": "1024", "retention.ms": "60000"})
            with Producer(broker.bootstrap) as producer:
                for _ in range(10):  # timestamps from 1970: every closed segment is expired
                    producer.send("old", b"v" * 400, timestamp_ms=1000).result(5)
            deadline = time.monotonic() + 10
            while admin.list_offsets("old", 0, "earliest") == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            start = admin.list_offsets("old", 0, "earliest")
            assert 0 < start < 10, "retention removed the old segments but not the active one"
        config = {"auto.offset.reset": "earliest"}
        with Consumer(broker.bootstrap, config=config) as consumer:
            consumer.assign([("old", 0)])
            consumer.seek("old", 0, 0)
            assert consumer.poll(1000)[0].offset == start
    finally:
        broker.close()


def test_restart_keeps_topics_configs_and_data(tmp_path: Path) -> None:
    broker = BrokerThread(tmp_path / "logs").start()
    try:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic("kept", 2, config={"retention.ms": "-1", "segment.bytes": "4096"})
        with Producer(
            broker.bootstrap, mode="async", config={"queue.buffering.max.ms": 5}
        ) as producer:
            for i in range(100):
                producer.send("kept", b"value-%d" % i, partition=i % 2)
            producer.flush(10)
        before = broker.log_state()
        broker.stop()
        stored = json.loads((tmp_path / "logs" / "standalone-topics.json").read_text())
        assert stored["topics"]["kept"] == {
            "partitions": 2,
            "config": {"retention.ms": "-1", "segment.bytes": "4096"},
        }
        broker.start()
        assert broker.log_state() == before
        assert broker.call(lambda: partition_of(broker, "kept", 0).config.segment_bytes) == 4096
        values = sorted(r.value for r in consume_all(broker.bootstrap, "kept", 2))
        assert values == sorted(b"value-%d" % i for i in range(100))
        with AdminClient(broker.bootstrap) as admin, pytest.raises(TopicAlreadyExistsError):
            admin.create_topic("kept", 2)
    finally:
        broker.close()


# --- client errors --------------------------------------------------------------------------------


def test_connection_errors_are_clear_and_definite(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(
        BrokerUnavailableError,
        match=rf"cannot connect to broker 127.0.0.1:{port}: connection refused; is a broker running there\?",
    ):
        AdminClient(f"127.0.0.1:{port}").brokers()
    with Producer(f"127.0.0.1:{port}") as producer:
        error = producer.send("t", b"v").exception(10)
    assert isinstance(error, ProduceError) and error.definite
    assert error.error is ErrorCode.NETWORK_EXCEPTION


def test_async_producer_gives_up_on_a_dead_broker_definitely(tmp_path: Path) -> None:
    broker = BrokerThread(tmp_path / "logs").start()
    try:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic("gone", 1)
        config = {"queue.buffering.max.ms": 1, "retry.backoff.ms": 50}
        with Producer(broker.bootstrap, mode="async", config=config) as producer:
            assert producer.send("gone", b"first").result(5).offset == 0
            broker.stop()
            time.sleep(0.2)  # the sender sees its connection close
            started = time.monotonic()
            error = producer.send("gone", b"never").exception(10)
            assert time.monotonic() - started < 5, "retries are bounded"
        assert isinstance(error, ProduceError)
        assert error.error is ErrorCode.NETWORK_EXCEPTION
        assert error.definite, "no attempt reached the broker"
        assert "connection refused" in str(error)
    finally:
        broker.close()


def test_full_queue_drops_the_record_definitely(
    broker_thread: BrokerThread, admin: AdminClient
) -> None:
    admin.create_topic("q", 1)
    config = {
        "queue.buffering.max.messages": 5,
        "queue.enqueue.timeout.ms": 0,
        "queue.buffering.max.ms": 60000,
        "batch.num.messages": 1000,
    }
    with Producer(broker_thread.bootstrap, mode="async", config=config) as producer:
        queued = [producer.send("q", b"%d" % i) for i in range(5)]
        dropped = producer.send("q", b"dropped")
        assert dropped.done()
        error = dropped.exception(0)
        assert isinstance(error, QueueFullError) and error.definite
        assert error.error is ErrorCode.QUEUE_FULL
        producer.flush(10)
        assert [f.result(0).offset for f in queued] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("idempotent", [True, False])
def test_a_retry_of_a_write_whose_answer_was_lost_lands_once_when_idempotent(
    tmp_path: Path, mode: Literal["sync", "async"], idempotent: bool
) -> None:
    """The broker is paused past the request timeout with a produce unread: the client gives
    up on it and retries on a new connection; the broker, resumed, reads and writes the
    first attempt, then the retry. Idempotent: the retry is recognised (answered with the
    first attempt's offset, nothing written twice). Not: the record is there twice."""
    process, port = start_broker_process(tmp_path / "logs")
    try:
        with AdminClient(f"127.0.0.1:{port}") as admin:
            admin.create_topic("once", 1)
        config = {
            "request.timeout.ms": 1000,
            "message.send.max.retries": 5,
            "retry.backoff.ms": 200,
            "enable.idempotence": idempotent,
            "queue.buffering.max.ms": 0,
        }
        with Producer(f"127.0.0.1:{port}", acks=-1, mode=mode, config=config) as producer:
            assert producer.send("once", b"warm-up").result(10).offset == 0
            process.send_signal(signal.SIGSTOP)
            # Resumed past the request timeout: the first attempt is given up by then.
            resume = threading.Timer(1.5, process.send_signal, (signal.SIGCONT,))
            resume.start()
            future = producer.send("once", b"retried")  # a sync send returns when done
            resume.join()
            # Not idempotent: the retry is written after the first attempt, and answered.
            assert future.result(30).offset == (1 if idempotent else 2)
            assert producer.send("once", b"after").result(10).offset == (2 if idempotent else 3)
        values = [r.value for r in consume_all(f"127.0.0.1:{port}", "once")]
        expected = [b"warm-up", b"retried", b"after"]
        assert values == (
            expected if idempotent else [b"warm-up", b"retried", b"retried", b"after"]
        )
    finally:
        stop_broker_process(process)


def test_an_idempotent_async_producer_with_batches_in_flight_through_a_pause_writes_each_once(
    tmp_path: Path,
) -> None:
    """Several batches of each partition on their way when the broker stops past the request
    timeout: every one is retried, in its partition's sequence, and each record is stored
    once, in the order it was sent."""
    process, port = start_broker_process(tmp_path / "logs")
    try:
        with AdminClient(f"127.0.0.1:{port}") as admin:
            admin.create_topic("many", 2)
        config = {
            "request.timeout.ms": 800,
            "message.send.max.retries": 10,
            "retry.backoff.ms": 100,
            "batch.num.messages": 5,
            "queue.buffering.max.ms": 0,
            "enable.idempotence": True,
        }
        with Producer(f"127.0.0.1:{port}", acks=-1, mode="async", config=config) as producer:
            futures = [producer.send("many", b"%d" % i, partition=i % 2) for i in range(200)]
            process.send_signal(signal.SIGSTOP)
            futures += [producer.send("many", b"%d" % i, partition=i % 2) for i in range(200, 400)]
            time.sleep(1.5)
            process.send_signal(signal.SIGCONT)
            producer.flush(60)
            offsets = [f.result(0).offset for f in futures]
        assert offsets == [i // 2 for i in range(400)]
        got = consume_all(f"127.0.0.1:{port}", "many", 2)
        assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
            (i % 2, i // 2, b"%d" % i) for i in range(400)
        )
    finally:
        stop_broker_process(process)


def test_an_idempotent_producer_needs_acks_all_and_retries() -> None:
    with pytest.raises(ClientConfigError, match="needs acks=-1"):
        Producer("127.0.0.1:1", acks=1, config={"enable.idempotence": "true"})
    with pytest.raises(ClientConfigError, match=r"message\.send\.max\.retries >= 1"):
        Producer(
            "127.0.0.1:1",
            acks=-1,
            config={"enable.idempotence": True, "message.send.max.retries": 0},
        )


def test_timeout_after_sending_is_indeterminate(tmp_path: Path) -> None:
    process, port = start_broker_process(tmp_path / "logs")
    try:
        with AdminClient(f"127.0.0.1:{port}") as admin:
            admin.create_topic("slow", 1)
        config = {"request.timeout.ms": 300, "message.send.max.retries": 0}
        with Producer(f"127.0.0.1:{port}", config=config) as producer:
            producer.send("slow", b"warm-up").result(5)
            process.send_signal(signal.SIGSTOP)
            try:
                error = producer.send("slow", b"maybe").exception(10)
            finally:
                process.send_signal(signal.SIGCONT)
        assert isinstance(error, ProduceError)
        assert error.error is ErrorCode.REQUEST_TIMED_OUT
        assert not error.definite
    finally:
        stop_broker_process(process)


# --- bad input ------------------------------------------------------------------------------------


@pytest.fixture
def busy_broker(broker_thread: BrokerThread, admin: AdminClient) -> BrokerThread:
    admin.create_topic("data", 1)
    with Producer(broker_thread.bootstrap) as producer:
        for i in range(3):
            producer.send("data", b"record-%d" % i).result(5)
    return broker_thread


def test_oversized_frame_closes_only_that_connection(tmp_path: Path) -> None:
    broker = BrokerThread(tmp_path / "logs", **{"socket.request.max.bytes": 4096}).start()
    try:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic("data", 1)
        before = broker.log_state()
        bystander = raw_connect(broker.port)
        with raw_connect(broker.port) as sock:
            sock.sendall(struct.pack(">i", 4097) + b"\x00" * 100)
            assert closed_by_broker(sock)
        with raw_connect(broker.port) as sock:
            sock.sendall(struct.pack(">i", -5))
            assert closed_by_broker(sock)
        records = encode_records([(None, b"v" * 5000, 1)])
        with raw_connect(broker.port) as sock:
            sock.sendall(raw_frame(ApiKey.PRODUCE, produce_body("data", 0, records)))
            assert closed_by_broker(sock)
        bystander.sendall(raw_frame(ApiKey.API_VERSIONS, b""))
        assert read_frame(bystander) is not None
        bystander.close()
        assert broker.log_state() == before
    finally:
        broker.close()


def test_large_frames_within_the_limit_are_accepted(busy_broker: BrokerThread) -> None:
    # ~3 MB (several buffer growths) in one batch, on a topic whose max.message.bytes allows it
    with AdminClient(busy_broker.bootstrap) as admin:
        admin.create_topic("large", 1, config={"max.message.bytes": str(4 << 20)})
    records = encode_records([(None, os.urandom(500), 1)] * 6000)
    assert len(records) > 3 * (1 << 20) - 300_000
    with raw_connect(busy_broker.port) as sock:
        frame = raw_frame(ApiKey.PRODUCE, produce_body("large", 0, records))
        sock.sendall(frame[:10])
        time.sleep(0.05)
        sock.sendall(frame[10:])
        payload = read_frame(sock)
    assert payload is not None
    _, body = decode_response(payload, ProduceResponse)
    part = body.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (0, 0)


def test_undecodable_body_closes_the_connection(busy_broker: BrokerThread) -> None:
    before = busy_broker.log_state()
    with raw_connect(busy_broker.port) as sock:
        sock.sendall(raw_frame(ApiKey.PRODUCE, b"\x00\x01\x00", correlation_id=99))
        assert read_frame(sock) is None, "as Kafka: no answer, the connection closed"
    assert busy_broker.log_state() == before
    assert_still_serving(busy_broker.port)


def test_unknown_api_or_version_closes_the_connection_but_api_versions_is_answered(
    busy_broker: BrokerThread,
) -> None:
    for api_key, version in ((77, 0), (5, 0), (ApiKey.FETCH, 12), (ApiKey.PRODUCE, 2)):
        with raw_connect(busy_broker.port) as sock:
            sock.sendall(raw_frame(api_key, b"whatever", version=version))
            assert read_frame(sock) is None, (api_key, version)
    with raw_connect(busy_broker.port) as sock:
        sock.sendall(raw_frame(ApiKey.API_VERSIONS, b"", version=9, correlation_id=5))
        payload = read_frame(sock)
        assert payload is not None
        correlation_id, body = decode_response(payload, ApiVersionsResponse)
        assert (correlation_id, body.error_code) == (5, ErrorCode.UNSUPPORTED_VERSION)
        assert {v.api_key for v in body.api_keys} >= {ApiKey.PRODUCE, ApiKey.FETCH}


def test_undecodable_header_closes_the_connection(busy_broker: BrokerThread) -> None:
    with raw_connect(busy_broker.port) as sock:
        sock.sendall(struct.pack(">i", 5) + b"\x00\x03\x00\x00\x00")
        assert closed_by_broker(sock)
    assert_still_serving(busy_broker.port)


def test_truncated_frame_then_hang_up(busy_broker: BrokerThread) -> None:
    before = busy_broker.log_state()
    records = encode_records([(None, b"never", 1)])
    frame = raw_frame(ApiKey.PRODUCE, produce_body("data", 0, records))
    with raw_connect(busy_broker.port) as sock:
        sock.sendall(frame[:-3])
    assert_still_serving(busy_broker.port)
    assert busy_broker.log_state() == before


def test_corrupt_or_oversized_records_never_reach_the_log(tmp_path: Path) -> None:
    broker = BrokerThread(tmp_path / "logs", **{"message.max.bytes": 2000}).start()
    try:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic("data", 1)
        before = broker.log_state()
        good = encode_records([(b"k", b"value", 1), (None, b"other", 2)])
        flipped = bytearray(good)
        flipped[-1] ^= 0xFF
        cases = {
            "crc": bytes(flipped),
            "truncated": good[:-4],
            "garbage": b"\x01" * 40,
            "empty": b"",
            "bad size": good[:8] + struct.pack(">i", 10**6) + good[12:],
        }
        for name, records in cases.items():
            refused = {ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD}
            assert produce_error(broker.port, "data", records) in refused, name
        big = encode_records([(None, b"v" * 3000, 1)])
        assert produce_error(broker.port, "data", big) is ErrorCode.MESSAGE_TOO_LARGE
        assert produce_error(broker.port, "nope", good) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert broker.log_state() == before
        with Producer(broker.bootstrap) as producer:
            error = producer.send("data", b"v" * 3000).exception(10)
        assert isinstance(error, ProduceError) and error.definite
        assert error.error is ErrorCode.MESSAGE_TOO_LARGE and "max.message.bytes" in str(error)
        assert broker.log_state() == before
    finally:
        broker.close()


_HEADERS = st.builds(
    lambda key, version, cid: struct.pack(">hhih", key, version, cid, -1),
    st.sampled_from([*sorted(APIS), 4, 6, 23, 99]),
    st.sampled_from([0, 0, 1, 3, 7, 11]),
    st.integers(-(2**31), 2**31 - 1),
)


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@st.composite
def hostile_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["raw", "framed", "header+body", "mutated produce"]))
    if kind == "raw":
        return draw(st.binary(max_size=300))
    if kind == "framed":
        return _framed(draw(st.binary(max_size=300)))
    if kind == "header+body":
        return _framed(draw(_HEADERS) + draw(st.binary(max_size=300)))
    records = encode_records([(None, b"hostile", 1)])
    payload = bytearray(raw_frame(ApiKey.PRODUCE, produce_body("data", 0, records))[4:])
    for _ in range(draw(st.integers(1, 3))):
        payload[draw(st.integers(0, len(payload) - 1))] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(payload)))
    return _framed(bytes(payload[:cut]))


def test_random_bytes_never_break_the_broker_or_its_log(busy_broker: BrokerThread) -> None:
    before = busy_broker.log_state()
    bystander = raw_connect(busy_broker.port)

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=hostile_bytes())
    def send_garbage(data: bytes) -> None:
        with raw_connect(busy_broker.port) as sock:
            try:  # the broker may hang up before everything is sent
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(5)
                while sock.recv(65536):
                    pass
            except OSError as err:
                assert not isinstance(err, TimeoutError), "the broker neither answered nor hung up"
        after = busy_broker.log_state()
        changed = {k: (before[k], v) for k, v in after.items() if k in before and before[k] != v}
        if changed:
            # A mutation may leave a valid produce request (the record's CRC does not cover
            # the request around it): then the records must be the ones we encoded.
            records = decode_records(_read_partition(busy_broker, "data", before[("data", 0)][1]))
            assert all(r.value == b"hostile" for r in records), changed
            before.update(after)

    send_garbage()
    bystander.sendall(raw_frame(ApiKey.API_VERSIONS, b""))
    assert read_frame(bystander) is not None
    bystander.close()
    assert_still_serving(busy_broker.port)
    assert [r.value for r in consume_all(busy_broker.bootstrap, "data")][:3] == [
        b"record-0",
        b"record-1",
        b"record-2",
    ]


def _read_partition(broker: BrokerThread, topic: str, offset: int) -> bytes:
    return broker.call(lambda: partition_of(broker, topic, 0).log.read(offset, 1 << 20).records)


def partition_of(broker: BrokerThread, topic: str, number: int) -> Partition:
    assert broker.broker is not None
    return broker.broker.partitions[(topic, number)]


# --- broker processes -------------------------------------------------------------------------------


def start_broker_process(log_dir: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """``python -m system_under_test broker`` with only the SUT package on the path."""
    command = [
        sys.executable,
        "-m",
        "system_under_test",
        "broker",
        "--set",
        f"log.dirs={log_dir}",
        "--set",
        "listeners=127.0.0.1:0",
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        command, cwd=log_dir.parent, env=env, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    lines = []
    for line in process.stderr:
        lines.append(line)
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # type: ignore[union-attr]
            return process, int(match.group(1))
    raise AssertionError("broker did not start:\n" + "".join(lines))


def stop_broker_process(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_main_entry_point_rejects_bad_config_with_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "system_under_test",
            "broker",
            "--set",
            "log.dirs=/tmp/x",
            "--set",
            "no.such.key=1",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "no.such.key" in result.stderr and "known keys" in result.stderr


def test_sigterm_shuts_down_cleanly(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    process, port = start_broker_process(log_dir)
    try:
        with AdminClient(f"127.0.0.1:{port}") as admin:
            admin.create_topic("t", 1)
        process.terminate()
        assert process.wait(30) == 0
        assert (log_dir / ".squall_cleanshutdown").exists()
    finally:
        stop_broker_process(process)


def test_sigkill_while_producing_loses_no_acknowledged_record(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    flush_every = ("--set", "log.flush.interval.messages=1")
    process, port = start_broker_process(log_dir, *flush_every)
    acked: dict[int, bytes] = {}
    lock = threading.Lock()
    stop = threading.Event()
    try:
        with AdminClient(f"127.0.0.1:{port}") as admin:
            admin.create_topic("crash", 1)

        def on_done(value: bytes) -> Callable[[Any], None]:
            def record(future: Any) -> None:
                if future.exception(0) is None:
                    with lock:
                        acked[future.result(0).offset] = value

            return record

        def produce() -> None:
            config = {
                "batch.num.messages": 20,
                "queue.buffering.max.ms": 2,
                "request.timeout.ms": 2000,
            }
            producer = Producer(f"127.0.0.1:{port}", acks=1, mode="async", config=config)
            i = 0
            while not stop.is_set():
                value = b"value-%d" % i
                producer.send("crash", value).add_callback(on_done(value))
                i += 1
                if i % 100 == 0:
                    time.sleep(0.001)
            producer.close(timeout=5)

        thread = threading.Thread(target=produce)
        thread.start()
        deadline = time.monotonic() + 20
        while len(acked) < 2000 and time.monotonic() < deadline:
            time.sleep(0.02)
        process.kill()
        process.wait()
        stop.set()
        thread.join(30)
        assert len(acked) >= 2000, "the producer should have been acknowledged before the kill"

        process, port = start_broker_process(log_dir, *flush_every)
        with Consumer(f"127.0.0.1:{port}") as consumer:
            stored: dict[int, bytes | None] = {}
            offset = 0
            while True:
                result = consumer.fetch("crash", 0, offset, max_bytes=1 << 20, max_wait_ms=0)
                if not result.records:
                    break
                for record in result.records:  # the consumer checked every CRC
                    stored[record.offset] = record.value
                offset = result.records[-1].offset + 1
        assert offset == result.high_watermark
        assert sorted(stored) == list(range(len(stored))), "offsets are dense after recovery"
        missing = {o: v for o, v in acked.items() if stored.get(o) != v}
        assert not missing, (
            f"{len(missing)} acknowledged records lost or changed, e.g. {list(missing.items())[:3]}"
        )
    finally:
        stop.set()
        stop_broker_process(process)
