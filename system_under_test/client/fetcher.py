"""Fetcher: the consumer's fetch requests, one in flight per leader, answered in parallel.

As Kafka's consumer fetcher: a poll sends a fetch to every leader of the assigned
partitions that has none in flight, and takes whatever answers arrive within its wait. A
fetch that is still waiting (a paused or cut-off leader) stays in flight and is collected by
a later poll, while the other leaders are read meanwhile; a leader that could not be reached
(refused, timed out, connection lost) is left alone for reconnect.backoff.ms, doubling with
each failure in a row up to reconnect.backoff.max.ms. Each partition is fetched with the
leader epoch of the consumer's metadata (KIP-320), so a replica in another epoch fences it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from system_under_test.client.config import ConsumerConfig
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ConnectionLostError,
    RequestTimeoutError,
)
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.kafka.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic

TopicPartition = tuple[str, int]
UNREACHABLE = (BrokerUnavailableError, ConnectionLostError, RequestTimeoutError)
"""Fetch failures that say a leader cannot be reached now."""
_MAX_THREADS = 16


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """One fetch that ended: to which leader, at which offsets and leader epochs, and its
    response or error."""

    leader: int
    offsets: dict[TopicPartition, int]
    response: FetchResponse | None
    error: BaseException | None
    leader_epochs: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class _InFlight:
    offsets: dict[TopicPartition, int]
    leader_epochs: dict[TopicPartition, int]
    future: Future[FetchResponse]


class Fetcher:
    """Fetches for one consumer; used from the consumer's thread only (the requests
    themselves run on a small pool of I/O threads)."""

    def __init__(self, metadata: ClusterMetadata, config: ConsumerConfig, client_id: str) -> None:
        self._metadata = metadata
        self._config = config
        self._pool = ThreadPoolExecutor(_MAX_THREADS, thread_name_prefix=f"{client_id}-fetch")
        self._in_flight: dict[int, _InFlight] = {}
        self._unreachable: dict[int, tuple[int, float]] = {}

    def in_flight(self) -> bool:
        """Whether any fetch is still waiting for its answer."""
        return bool(self._in_flight)

    def ready(self, leader: int, now: float) -> bool:
        """Whether a new fetch may go to `leader`: none in flight and no backoff."""
        return leader not in self._in_flight and self._unreachable.get(leader, (0, 0.0))[1] <= now

    def backing_off(self, leader: int, now: float) -> bool:
        return self._unreachable.get(leader, (0, 0.0))[1] > now

    def send(self, leader: int, offsets: Mapping[TopicPartition, int], max_wait_ms: int) -> None:
        """Fetch `offsets` (partition: position) from `leader` in the background."""
        config = self._config
        topics: dict[str, list[FetchPartition]] = {}
        epochs = {tp: self._metadata.leader_epoch(*tp) for tp in offsets}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                FetchPartition(
                    partition=partition,
                    current_leader_epoch=epochs[(topic, partition)],
                    fetch_offset=offset,
                    partition_max_bytes=config.max_partition_fetch_bytes,
                )
            )
        request = fetch_request(max_wait_ms, config.fetch_min_bytes, config.fetch_max_bytes, topics)
        timeout_s = (config.request_timeout_ms + max_wait_ms) / 1000
        future = self._pool.submit(self._request, leader, request, timeout_s)
        self._in_flight[leader] = _InFlight(dict(offsets), epochs, future)

    def collect(self, timeout_s: float) -> list[FetchOutcome]:
        """The fetches that end within `timeout_s` (at least one, unless none does)."""
        if not self._in_flight:
            return []
        futures = [pending.future for pending in self._in_flight.values()]
        wait(futures, timeout=max(0.0, timeout_s), return_when=FIRST_COMPLETED)
        out: list[FetchOutcome] = []
        for leader, pending in list(self._in_flight.items()):
            if not pending.future.done():
                continue
            del self._in_flight[leader]
            error = pending.future.exception()
            if error is None:
                self._unreachable.pop(leader, None)
                response = pending.future.result()
                out.append(
                    FetchOutcome(leader, pending.offsets, response, None, pending.leader_epochs)
                )
                continue
            if isinstance(error, UNREACHABLE):
                self._back_off(leader)
            out.append(FetchOutcome(leader, pending.offsets, None, error, pending.leader_epochs))
        return out

    def close(self) -> None:
        """Forget every fetch in flight; the pool's threads end once their requests do
        (closing the consumer's connections ends them at once)."""
        self._in_flight.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _request(self, leader: int, request: FetchRequest, timeout_s: float) -> FetchResponse:
        conn = self._metadata.connection(leader)
        return conn.request(request, FetchResponse, timeout_s=timeout_s)

    def _back_off(self, leader: int) -> None:
        failures = self._unreachable.get(leader, (0, 0.0))[0] + 1
        delay_ms = min(
            self._config.reconnect_backoff_ms * (1 << min(failures - 1, 30)),
            self._config.reconnect_backoff_max_ms,
        )
        self._unreachable[leader] = (failures, time.monotonic() + delay_ms / 1000)


def fetch_request(
    max_wait_ms: int, min_bytes: int, max_bytes: int, topics: Mapping[str, list[FetchPartition]]
) -> FetchRequest:
    """A consumer's fetch (read_uncommitted: with no transactions, the same records)."""
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=[FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
    )
