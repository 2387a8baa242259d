"""The producer: sync (one request per record, answered before send() returns) or async
(records batched per partition by a background I/O thread, requests pipelined).

Delivery is at least once: retriable errors are retried, so a record may be written twice,
unless the producer is idempotent (``enable.idempotence=true``, with acks=-1: idempotence.py),
when the broker recognises a retry of what it wrote and answers it without writing it again.
A failure is a ProduceError whose ``definite`` says whether the record certainly was not
written (PROTOCOL.md, "Classifying a produce failure").
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Literal

from system_under_test.client.batch import (
    METADATA_REFRESH_CODES,
    ProduceBatch,
    RetryPolicy,
    SendFuture,
    failed_future,
)
from system_under_test.client.config import ProducerConfig
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ClientConfigError,
    ClientError,
    ConnectionLostError,
    ProduceError,
    ProducerClosedError,
    QueueFullError,
    RequestTimeoutError,
    produce_answer,
)
from system_under_test.client.idempotence import ProducerIdentity
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.client.sender import Sender
from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.kafka.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from system_under_test.log.record import encode_records

VALID_ACKS = (-1, 0, 1)
_BYTES = (bytes, bytearray)


class Partitioner:
    """Explicit partition, else crc32(key) % partitions, else round-robin per topic."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def partition(self, topic: str, key: bytes | None, partitions: int) -> int:
        if key is not None:
            return zlib.crc32(key) % partitions
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters.setdefault(topic, itertools.count())
        return next(counter) % partitions


class Producer:
    """Sends records to topic partitions; see the module docstring for the two modes."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: int = 1,
        mode: Literal["sync", "async"] = "sync",
        config: Mapping[str, object] | None = None,
        client_id: str = "squall-producer",
    ) -> None:
        if acks not in VALID_ACKS:
            raise ClientConfigError(f"acks={acks!r} must be -1 (all), 0 or 1")
        if mode not in ("sync", "async"):
            raise ClientConfigError(f"mode={mode!r} must be 'sync' or 'async'")
        self.acks = acks
        self.mode = mode
        self.config = ProducerConfig.from_mapping(config)
        self.client_id = client_id
        self._metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            request_timeout_s=self.config.request_timeout_ms / 1000,
        )
        self._partitioner = Partitioner()
        self._partition_counts: dict[str, int] = {}
        self._policy = RetryPolicy(self.config.retries, self.config.retry_backoff_ms)
        self._closed = False
        self._sync_lock = threading.Lock()
        self._identity: ProducerIdentity | None = None
        if self.config.enable_idempotence:
            if acks != -1:
                raise ClientConfigError(
                    f"enable.idempotence=true needs acks=-1 (all), not acks={acks}: only then "
                    "does a retry find what its first attempt wrote"
                )
            if mode == "sync":
                self._identity = ProducerIdentity(
                    self._metadata,
                    timeout_s=self.config.request_timeout_ms / 1000,
                    backoff_s=self.config.retry_backoff_ms / 1000,
                )
        self._sender: Sender | None = None
        if mode == "async":
            self._sender = Sender(
                metadata=self._metadata, config=self.config, acks=acks, client_id=client_id
            )
            self._sender.start()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> SendFuture:
        """Send one record. Sync mode: done when this returns. Async: queued for batching."""
        if self._closed:
            raise ProducerClosedError("send() on a closed producer; create a new Producer")
        if value is not None and type(value) is not bytes and not isinstance(value, _BYTES):
            raise TypeError(f"value must be bytes or None, not {type(value).__name__}")
        if key is not None and not isinstance(key, _BYTES):
            raise TypeError(f"key must be bytes or None, not {type(key).__name__}")
        timestamp = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        count = self._partition_counts.get(topic)
        if count is not None and partition is None:
            chosen = self._partitioner.partition(topic, key, count)
        else:
            found = self._choose_partition(topic, key, partition)
            if isinstance(found, SendFuture):
                return found
            chosen = found
        item = (key, value, timestamp)
        if self._sender is None:
            return self._send_sync(topic, chosen, item)
        future = self._sender.accumulator.append(topic, chosen, item)
        if future is None:
            limit = self.config.max_queued_messages
            return failed_future(
                topic,
                chosen,
                QueueFullError(
                    topic,
                    chosen,
                    f"{limit} records already wait to be sent (queue.buffering.max.messages); "
                    "the record was dropped. Slow down, raise the limit, or set "
                    "queue.enqueue.timeout.ms=-1 to block instead",
                ),
            )
        return future

    def flush(self, timeout: float | None = None) -> None:
        """Send every queued record now and wait until all are acknowledged or failed."""
        if self._sender is not None and not self._sender.accumulator.wait_until_idle(timeout):
            raise TimeoutError(f"flush did not complete within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Flush, then release threads and connections; records left after timeout fail."""
        if self._closed:
            return
        self._closed = True
        if self._sender is not None:
            self._sender.shutdown(timeout)
        self._metadata.close()

    # --- partitioning --------------------------------------------------------------------

    def _choose_partition(
        self, topic: str, key: bytes | None, partition: int | None
    ) -> int | SendFuture:
        count = self._partition_counts.get(topic)
        if count is None:
            try:
                count = self._metadata.partition_count(topic)
            except (ClientError, BrokerError) as err:
                return self._refused(topic, partition, ErrorCode.NETWORK_EXCEPTION, str(err))
            if count is None or count == 0:
                return self._refused(
                    topic,
                    partition,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {topic!r} does not exist; create it first",
                )
            self._partition_counts[topic] = count
        if partition is None:
            return self._partitioner.partition(topic, key, count)
        if not 0 <= partition < count:
            return self._refused(
                topic,
                partition,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} has partitions 0..{count - 1}, not {partition}",
            )
        return partition

    @staticmethod
    def _refused(topic: str, partition: int | None, code: ErrorCode, message: str) -> SendFuture:
        part = -1 if partition is None else partition
        error = ProduceError(code, message, definite=True, topic=topic, partition=part)
        return failed_future(topic, part, error)

    # --- sync mode -----------------------------------------------------------------------

    def _send_sync(
        self, topic: str, partition: int, item: tuple[bytes | None, bytes | None, int]
    ) -> SendFuture:
        batch = ProduceBatch(topic, partition, time.monotonic())
        batch.items.append(item)
        with self._sync_lock:
            if self._identity is not None and not self._sequence(batch):
                return SendFuture(batch, 0)
            while True:
                code, message, sent, offset = self._attempt(batch)
                retry = self._policy.settle(batch, code, message, sent=sent, base_offset=offset)
                if code in METADATA_REFRESH_CODES:
                    self._try_refresh()  # retried or not: later sends find the new leader
                if not retry:
                    break
                time.sleep(max(0.0, batch.retry_at - time.monotonic()))
            if self._identity is not None and batch.error is not None:
                # Its sequence may be a gap no later send can fill: a new producer id.
                self._identity.reset((batch.producer_id, batch.producer_epoch))
        return SendFuture(batch, 0)

    def _sequence(self, batch: ProduceBatch) -> bool:
        """Give an idempotent producer's batch its producer id and sequence; False (the
        batch failed, definitely) if no producer id could be had."""
        assert self._identity is not None
        try:
            self._identity.ensure()
        except (ClientError, BrokerError) as err:
            code = err.code if isinstance(err, BrokerError) else ErrorCode.NETWORK_EXCEPTION
            batch.fail_with(code, f"no producer id for the idempotent producer: {err}")
            return False
        batch.producer_id, batch.producer_epoch, batch.base_sequence = self._identity.take(
            (batch.topic, batch.partition), len(batch)
        )
        return True

    def _attempt(self, batch: ProduceBatch) -> tuple[ErrorCode, str, bool, int]:
        """One try: (error code, message, whether the request went out whole, base offset)."""
        try:
            conn = self._metadata.leader_connection(batch.topic, batch.partition)
        except BrokerError as err:
            return err.code, err.message, False, -1
        except ClientError as err:
            return ErrorCode.NETWORK_EXCEPTION, str(err), False, -1
        records = encode_records(
            batch.items,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
        )
        request = ProduceRequest(
            acks=self.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[
                TopicProduceData(
                    name=batch.topic,
                    partition_data=[PartitionProduceData(index=batch.partition, records=records)],
                )
            ],
        )
        timeout_s = self.config.request_timeout_ms / 1000
        try:
            if self.acks == 0:
                conn.send_only(request, timeout_s=timeout_s)
                return ErrorCode.NONE, "", True, -1
            response = conn.request(request, ProduceResponse, timeout_s=timeout_s)
        except BrokerError as err:
            return err.code, err.message, True, -1
        except RequestTimeoutError as err:
            return ErrorCode.REQUEST_TIMED_OUT, str(err), True, -1
        except ConnectionLostError as err:
            return ErrorCode.NETWORK_EXCEPTION, str(err), err.request_sent, -1
        except ClientError as err:
            return ErrorCode.NETWORK_EXCEPTION, str(err), True, -1
        for topic in response.responses:
            for part in topic.partition_responses:
                if topic.name == batch.topic and part.index == batch.partition:
                    code = ErrorCode.from_wire(part.error_code)
                    message = produce_answer(f"{conn.address[0]}:{conn.address[1]}", code)
                    return code, message, True, part.base_offset
        return (
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "the response did not mention the partition",
            True,
            -1,
        )

    def _try_refresh(self) -> None:
        with contextlib.suppress(BrokerUnavailableError, ClientError, BrokerError):
            self._metadata.refresh()
