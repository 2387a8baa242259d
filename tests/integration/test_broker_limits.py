"""What one client can cost a real broker: CreateTopics caps, linear checks, the connection
limit, the read timeouts and the queued-bytes budget (issue 17, item 5).

No assertion here bounds an elapsed time: every wait is generous and every check is on what
the broker answered, closed or held."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from system_under_test.client import AdminClient, ErrorCode
from system_under_test.client.connection import decode_response
from system_under_test.config import BrokerConfig
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from system_under_test.kafka.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from system_under_test.kafka.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from system_under_test.server import MIN_CONNECTION_QUEUED_BYTES, Broker
from system_under_test.topic_spec import (
    MAX_CONFIGS_PER_TOPIC,
    MAX_PARTITIONS_PER_REQUEST,
    MAX_TOPICS_PER_REQUEST,
)
from tests.integration.test_standalone_broker import (
    BrokerThread,
    assert_still_serving,
    closed_by_broker,
    raw_connect,
    raw_frame,
    read_frame,
    request_body,
)
from tests.support import wait_for

pytestmark = pytest.mark.integration

ANSWER_TIMEOUT_S = 60.0
"""How long a test waits for an answer: long enough that only a broker that never answers
(not a slow one) fails."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    started = BrokerThread(tmp_path / "logs").start()
    yield started
    started.close()


def create_topics(port: int, topics: list[CreatableTopic]) -> list[CreatableTopicResult]:
    """One CreateTopics request on a connection of its own; the broker's per-topic results."""
    body = request_body(CreateTopicsRequest(topics=topics, timeout_ms=10_000))
    with raw_connect(port) as sock:
        sock.settimeout(ANSWER_TIMEOUT_S)
        sock.sendall(raw_frame(ApiKey.CREATE_TOPICS, body))
        payload = read_frame(sock)
    assert payload is not None, "the broker closed the connection instead of answering"
    _, response = decode_response(payload, CreateTopicsResponse)
    return response.topics


def topic(
    name: str, partitions: int = 1, configs: list[tuple[str, str]] | None = None
) -> CreatableTopic:
    entries = [CreatableTopicConfig(name=k, value=v) for k, v in configs or []]
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=entries
    )


def metadata_body(names: list[str]) -> bytes:
    return request_body(MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in names]))


def topic_names(bootstrap: str) -> list[str]:
    with AdminClient(bootstrap) as admin:
        return [t.name for t in admin.describe_topics()]


# --- CreateTopics: caps and linear checks -----------------------------------------------------


def test_too_many_topics_in_one_request_are_each_refused_and_none_created(
    broker: BrokerThread,
) -> None:
    count = MAX_TOPICS_PER_REQUEST + 1
    results = create_topics(broker.port, [topic(f"t{i}") for i in range(count)])
    assert [r.name for r in results] == [f"t{i}" for i in range(count)]
    assert {r.error_code for r in results} == {ErrorCode.INVALID_REQUEST}
    message = results[0].error_message or ""
    assert f"{count} topics" in message and f"{MAX_TOPICS_PER_REQUEST} allowed" in message
    assert topic_names(broker.bootstrap) == []
    assert [r.error_code for r in create_topics(broker.port, [topic("after")])] == [0]


def test_a_request_for_too_many_partitions_in_all_is_refused(broker: BrokerThread) -> None:
    half = MAX_PARTITIONS_PER_REQUEST // 2 + 1
    results = create_topics(broker.port, [topic("a", half), topic("b", half)])
    assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST] * 2
    message = results[0].error_message or ""
    assert f"{2 * half} partitions" in message
    assert f"{MAX_PARTITIONS_PER_REQUEST} allowed" in message
    # A count out of range is that topic's own error, not added to the request's total.
    results = create_topics(broker.port, [topic("c", MAX_PARTITIONS_PER_REQUEST + 1), topic("d")])
    assert [r.error_code for r in results] == [ErrorCode.INVALID_PARTITIONS, 0]
    assert topic_names(broker.bootstrap) == ["d"]


def test_a_topic_with_too_many_configs_is_refused_and_its_neighbours_created(
    broker: BrokerThread,
) -> None:
    count = MAX_CONFIGS_PER_TOPIC + 1
    crowded = topic("crowded", configs=[(f"key.{i}", "1") for i in range(count)])
    fine = topic("fine", configs=[("segment.bytes", "2048")])
    results = create_topics(broker.port, [crowded, fine])
    assert [(r.name, r.error_code) for r in results] == [
        ("crowded", ErrorCode.INVALID_CONFIG),
        ("fine", 0),
    ]
    message = results[0].error_message or ""
    assert f"{count} config entries" in message and f"{MAX_CONFIGS_PER_TOPIC} allowed" in message
    assert topic_names(broker.bootstrap) == ["fine"]


def test_a_megabyte_of_duplicate_configs_is_answered_and_others_are_served(
    broker: BrokerThread,
) -> None:
    """The 14-second request of the issue: now refused for its size, from a quick check."""
    dups = topic("dups", 1, [("segment.bytes", "1")] * 100_000)
    assert len(request_body(CreateTopicsRequest(topics=[dups], timeout_ms=1000))) > 1_000_000
    bystander = raw_connect(broker.port)
    results = create_topics(broker.port, [dups])
    assert [(r.name, r.error_code) for r in results] == [("dups", ErrorCode.INVALID_CONFIG)]
    assert "100000 config entries" in (results[0].error_message or "")
    bystander.sendall(raw_frame(ApiKey.API_VERSIONS, b""))
    assert read_frame(bystander) is not None
    bystander.close()


def test_many_long_duplicate_configs_get_the_duplicate_error_in_a_bounded_message(
    broker: BrokerThread,
) -> None:
    keys = [f"{i:04d}." + "k" * 300 for i in range(MAX_CONFIGS_PER_TOPIC // 2)]
    entries = [(key, "1") for key in keys] * 2  # every key twice: at the cap, not over it
    results = create_topics(broker.port, [topic("twice", 1, entries), topic("once")])
    assert [(r.name, r.error_code) for r in results] == [
        ("twice", ErrorCode.INVALID_CONFIG),
        ("once", 0),
    ]
    message = results[0].error_message or ""
    assert "given more than once" in message
    assert keys[0][:60] in message and f"and {len(keys) - 10} more" in message
    assert len(message) <= 1000


def test_a_topic_named_twice_is_refused_both_times(broker: BrokerThread) -> None:
    results = create_topics(broker.port, [topic("x"), topic("y"), topic("x")])
    assert [r.error_code for r in results] == [
        ErrorCode.INVALID_REQUEST,
        0,
        ErrorCode.INVALID_REQUEST,
    ]
    assert "appears more than once" in (results[0].error_message or "")
    assert topic_names(broker.bootstrap) == ["y"]


def test_metadata_answers_a_topic_named_many_times_once(broker: BrokerThread) -> None:
    assert [r.error_code for r in create_topics(broker.port, [topic("m", 3)])] == [0]
    body = metadata_body(["m"] * 1000 + ["nope"])
    with raw_connect(broker.port) as sock:
        sock.sendall(raw_frame(ApiKey.METADATA, body))
        payload = read_frame(sock)
    assert payload is not None
    _, response = decode_response(payload, MetadataResponse)
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("m", 3), ("nope", 0)]


class ClusterBrokerThread(BrokerThread):
    """A BrokerThread in ZooKeeper mode (give it zookeeper.connect)."""

    def start(self) -> ClusterBrokerThread:
        self.broker = Broker(BrokerConfig(self.overrides), standalone=False)
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(60)
        return self


def test_zookeeper_mode_applies_the_same_request_checks(tmp_path: Path, zookeeper: str) -> None:
    broker = ClusterBrokerThread(
        tmp_path / "logs", **{"zookeeper.connect": zookeeper, "broker.id": 1}
    ).start()
    try:
        count = MAX_TOPICS_PER_REQUEST + 1
        results = create_topics(broker.port, [topic(f"t{i}") for i in range(count)])
        assert {r.error_code for r in results} == {ErrorCode.INVALID_REQUEST}
        assert f"{count} topics" in (results[0].error_message or "")
        results = create_topics(broker.port, [topic("x"), topic("y"), topic("x")])
        assert [r.error_code for r in results] == [
            ErrorCode.INVALID_REQUEST,
            0,
            ErrorCode.INVALID_REQUEST,
        ]

        def led_by_broker_1() -> list[tuple[str, int]]:
            with AdminClient(broker.bootstrap) as admin:
                topics = admin.describe_topics()
            return [(t.name, t.partitions[0].leader) for t in topics]

        wait_for(lambda: led_by_broker_1() == [("y", 1)], ANSWER_TIMEOUT_S, "y led by broker 1")
    finally:
        broker.close()


# --- connections: the limit and the read timeouts ---------------------------------------------


def api_versions_answered(sock: socket.socket) -> bool:
    sock.sendall(raw_frame(ApiKey.API_VERSIONS, b""))
    return read_frame(sock) is not None


def test_a_connection_beyond_max_connections_is_closed_and_a_freed_slot_is_reused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = BrokerThread(tmp_path / "logs", **{"max.connections": 3}).start()
    held = [raw_connect(broker.port) for _ in range(3)]
    try:
        assert all(api_versions_answered(sock) for sock in held)
        with (
            caplog.at_level(logging.WARNING, logger="system_under_test.broker"),
            raw_connect(broker.port) as extra,
        ):
            host, port = extra.getsockname()[:2]
            peer = f"{host}:{port}"
            assert closed_by_broker(extra)
        assert any(
            peer in r.getMessage() and "max.connections=3" in r.getMessage() for r in caplog.records
        ), [r.getMessage() for r in caplog.records]
        assert all(api_versions_answered(sock) for sock in held)
        held.pop().close()

        def accepted() -> bool:
            with raw_connect(broker.port) as sock:
                sock.settimeout(ANSWER_TIMEOUT_S)
                return api_versions_answered(sock)

        wait_for(accepted, ANSWER_TIMEOUT_S, "a connection accepted in the freed slot")
        assert all(api_versions_answered(sock) for sock in held)
    finally:
        for sock in held:
            sock.close()
        broker.close()


def test_a_request_that_stops_arriving_is_closed_after_the_read_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = BrokerThread(tmp_path / "logs", **{"socket.request.read.timeout.ms": 300}).start()
    try:
        bystander = raw_connect(broker.port)
        with caplog.at_level(logging.WARNING, logger="system_under_test.broker"):
            with raw_connect(broker.port) as body_cut:
                body_cut.sendall(struct.pack(">i", 100) + b"\x00" * 10)
                assert closed_by_broker(body_cut)
            with raw_connect(broker.port) as size_cut:
                size_cut.sendall(b"\x00\x00")
                assert closed_by_broker(size_cut)
        messages = [r.getMessage() for r in caplog.records]
        assert any("socket.request.read.timeout.ms=300 (14 of 104 bytes)" in m for m in messages)
        assert any("(2 of 4 bytes)" in m for m in messages), messages
        # Idle without a request begun is not a read timeout: the bystander is still served.
        assert api_versions_answered(bystander)
        bystander.close()
    finally:
        broker.close()


def test_an_idle_connection_is_closed_but_not_one_awaiting_an_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = BrokerThread(tmp_path / "logs", **{"connections.max.idle.ms": 300}).start()
    try:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic("quiet", 1)
        with (
            caplog.at_level(logging.INFO, logger="system_under_test.broker"),
            raw_connect(broker.port) as idle,
        ):
            assert api_versions_answered(idle)
            assert closed_by_broker(idle)
        assert any("connections.max.idle.ms=300" in r.getMessage() for r in caplog.records)
        # A long poll longer than the idle timeout is a request in progress: it is answered.
        wanted = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        fetch = FetchRequest(
            max_wait_ms=1500,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[FetchTopic(topic="quiet", partitions=[wanted])],
        )
        with raw_connect(broker.port) as polling:
            polling.sendall(raw_frame(ApiKey.FETCH, request_body(fetch)))
            payload = read_frame(polling)
            assert payload is not None
            _, response = decode_response(payload, FetchResponse)
            assert response.responses[0].partitions[0].error_code == 0
            assert closed_by_broker(polling)
    finally:
        broker.close()


# --- the queued-bytes budget ------------------------------------------------------------------


def metadata_frame(size: int) -> bytes:
    """A Metadata request frame of about `size` bytes naming unknown topics (so its answer is
    about as big): a request that costs the broker little to handle."""
    names = [f"n{i:06d}" + "x" * 242 for i in range(size // 251)]
    return raw_frame(ApiKey.METADATA, metadata_body(names))


def flood_without_reading(port: int, frame: bytes, limit: int) -> socket.socket:
    """A connection that sends `frame` up to `limit` times, never reading an answer, until
    the broker stops taking them (the socket buffers fill up)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the answers back up soon
    sock.connect(("127.0.0.1", port))
    sock.settimeout(2)
    try:
        for _ in range(limit):
            sock.sendall(frame)
    except TimeoutError:
        pass
    return sock


def queued(broker: BrokerThread) -> tuple[int, int]:
    """The broker's queued bytes and their peak, read on its event loop."""

    def read() -> tuple[int, int]:
        assert broker.broker is not None
        return broker.broker.queued_bytes, broker.broker.queued_bytes_peak

    return broker.call(read)


def test_a_client_that_reads_no_answers_is_held_to_the_budget_and_others_are_served(
    tmp_path: Path,
) -> None:
    budget = 200_000
    settings = {"socket.request.max.bytes": 65536, "queued.max.request.bytes": budget}
    broker = BrokerThread(tmp_path / "logs", **settings).start()
    try:
        frame = metadata_frame(60_000)
        hog = flood_without_reading(broker.port, frame, limit=400)
        wait_for(lambda: queued(broker)[0] > budget, ANSWER_TIMEOUT_S, "the budget reached")
        assert queued(broker)[1] <= budget + len(frame)
        with raw_connect(broker.port) as other:
            other.settimeout(ANSWER_TIMEOUT_S)
            for _ in range(5):
                assert api_versions_answered(other)
        assert_still_serving(broker.port)
        small_request = len(raw_frame(ApiKey.API_VERSIONS, b""))
        assert queued(broker)[1] <= budget + len(frame) + small_request
        hog.close()
        wait_for(lambda: queued(broker)[0] == 0, ANSWER_TIMEOUT_S, "the hog's requests dropped")
    finally:
        broker.close()


def test_one_connection_never_queues_more_than_its_own_cap(tmp_path: Path) -> None:
    max_frame = 1 << 20
    broker = BrokerThread(tmp_path / "logs", **{"socket.request.max.bytes": max_frame}).start()
    try:
        frame = metadata_frame(max_frame - 1000)
        cap = max(max_frame, MIN_CONNECTION_QUEUED_BYTES)
        hog = flood_without_reading(broker.port, frame, limit=40)
        wait_for(lambda: queued(broker)[0] > cap - len(frame), ANSWER_TIMEOUT_S, "the cap reached")
        assert queued(broker)[1] <= cap
        assert_still_serving(broker.port)
        hog.close()
        wait_for(lambda: queued(broker)[0] == 0, ANSWER_TIMEOUT_S, "the hog's requests dropped")
    finally:
        broker.close()
