"""The async producer's I/O thread: drains due batches, pipelines produce requests to the
leaders over non-blocking sockets, and settles each batch when its response arrives.

One thread does all network I/O (as Kafka's Sender), so in-flight bookkeeping needs no
locks. Responses on one connection arrive in request order; a request whose response does
not come within request.timeout.ms closes its connection, and every batch on it is then
retried or failed as indeterminate. Nothing the thread does waits on one broker: connections
are opened without blocking, and metadata is refreshed on a thread of its own, so a broker
that is down, paused or cut off holds up only the partitions it leads.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import selectors
import socket
import threading
import time
from collections import deque

from system_under_test.client.accumulator import RecordAccumulator
from system_under_test.client.batch import METADATA_REFRESH_CODES, ProduceBatch, RetryPolicy
from system_under_test.client.config import ProducerConfig
from system_under_test.client.connection import (
    Address,
    decode_response,
    describe_socket_error,
    encode_request,
    response_size,
)
from system_under_test.client.exceptions import BrokerUnavailableError, ClientError, produce_answer
from system_under_test.client.idempotence import ProducerIdentity
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.errors import BrokerError, ErrorCode, KafkaCodecError
from system_under_test.kafka.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from system_under_test.log.record import encode_records

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8 << 20
"""Batches beyond this many bytes wait for the next produce request."""
MAX_PARTITION_BYTES = 1 << 20
"""Batches of one partition are merged into the request's one record batch of that
partition up to this size (the default message.max.bytes), beyond which they wait for the
next request."""

MAX_IDEMPOTENT_IN_FLIGHT = 5
"""An idempotent producer's batches of one partition on their way at once: as Kafka's, the
broker remembers a producer's last five batches, so a retry of any of them is recognised."""

TopicPartition = tuple[str, int]


class _Request:
    """One produce request on its way: its batches per partition and when it went out."""

    __slots__ = ("correlation_id", "deadline", "entries", "frame", "written")

    def __init__(
        self,
        correlation_id: int,
        entries: dict[TopicPartition, list[ProduceBatch]],
        frame: bytes,
    ) -> None:
        self.correlation_id = correlation_id
        self.entries = entries
        self.frame = memoryview(frame)
        self.written = 0
        self.deadline = 0.0

    def batches(self) -> list[ProduceBatch]:
        return [batch for group in self.entries.values() for batch in group]


class _Channel:
    """A non-blocking connection to one broker carrying pipelined produce requests."""

    def __init__(self, broker_id: int, address: Address, sock: socket.socket) -> None:
        self.broker_id = broker_id
        self.address = address
        self.sock = sock
        self.outgoing: deque[_Request] = deque()
        self.in_flight: deque[_Request] = deque()
        self.inbuf = bytearray()
        self.wants_write = True
        self.connecting = True
        """Until the selector says the non-blocking connect ended."""
        self.connect_deadline = 0.0

    def pending(self) -> int:
        return len(self.outgoing) + len(self.in_flight)


class Sender(threading.Thread):
    """The I/O thread of an async Producer."""

    def __init__(
        self,
        *,
        metadata: ClusterMetadata,
        config: ProducerConfig,
        acks: int,
        client_id: str,
    ) -> None:
        super().__init__(name=f"{client_id}-sender", daemon=True)
        self._metadata = metadata
        self._config = config
        self._acks = acks
        self._client_id = client_id
        self._policy = RetryPolicy(config.retries, config.retry_backoff_ms)
        self._timeout_s = config.request_timeout_ms / 1000
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._wake_pending = False
        self._channels: dict[int, _Channel] = {}
        self._unsent: list[ProduceBatch] = []
        self._correlation = itertools.count(1)
        self._metadata_stale = False
        self._last_refresh = 0.0
        self._refresher: threading.Thread | None = None
        self._identity: ProducerIdentity | None = None
        """An idempotent producer's id and sequences (enable.idempotence)."""
        if config.enable_idempotence:
            self._identity = ProducerIdentity(
                metadata, timeout_s=self._timeout_s, backoff_s=self._policy.backoff_s
            )
        self._identifier: threading.Thread | None = None
        self._sequenced_batches: dict[TopicPartition, deque[ProduceBatch]] = {}
        """Idempotent: per partition, the batches given sequences and not yet settled for
        good, in sequence order; they are sent in that order."""
        self._flying: set[int] = set()
        """Idempotent: the ids of the sequenced batches in a request not yet answered."""
        self._resequencing: set[TopicPartition] = set()
        """Idempotent: partitions one of whose batches must be sent again: one batch on its
        way at a time until the first of them is written, as Kafka's producer does."""
        self._abort = False
        self.accumulator = RecordAccumulator(
            batch_size=config.batch_num_messages,
            linger_ms=config.linger_ms,
            max_records=config.max_queued_messages,
            enqueue_timeout_ms=config.enqueue_timeout_ms,
            wakeup=self.wakeup,
        )

    # --- called from other threads -------------------------------------------------------

    def wakeup(self) -> None:
        """Make the I/O thread look at the accumulator now."""
        if not self._wake_pending:
            self._wake_pending = True
            with contextlib.suppress(OSError):
                self._wake_w.send(b"\0")

    def shutdown(self, timeout_s: float | None) -> None:
        """Send what is queued, then stop; fail what is left after timeout_s."""
        self.accumulator.closing = True
        self.wakeup()
        self.join(timeout_s)
        if self.is_alive():
            self._abort = True
            self.wakeup()
            self.join()
        self._wake_w.close()

    # --- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self._abort:
                now = time.monotonic()
                self._expire(now)
                if self._metadata_stale:
                    self._refresh_metadata(now)
                due, next_due = self.accumulator.drain(now)
                self._unsent.extend(due)
                if self._unsent:
                    self._send_unsent(now)
                if self.accumulator.closing and self._idle():
                    break
                self._poll(self._select_timeout(now, next_due))
        except Exception:
            log.exception("producer sender thread failed; failing every queued record")
        finally:
            for channel in list(self._channels.values()):
                self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, "producer closed")
            self._fail_everything("the producer was closed before the record was acknowledged")
            self._selector.close()
            self._wake_r.close()

    def _idle(self) -> bool:
        return (
            not self._unsent
            and not self.accumulator.has_queued()
            and not any(c.pending() for c in self._channels.values())
        )

    def _select_timeout(self, now: float, next_due: float | None) -> float:
        deadlines = [1.0 + now]
        if next_due is not None:
            deadlines.append(next_due)
        for channel in self._channels.values():
            if channel.connecting:
                deadlines.append(channel.connect_deadline)
            if channel.in_flight:
                deadlines.append(channel.in_flight[0].deadline)
            if channel.outgoing:
                deadlines.append(channel.outgoing[0].deadline)
        return max(0.0, min(deadlines) - now)

    def _poll(self, timeout: float) -> None:
        for key, mask in self._selector.select(timeout):
            channel = key.data
            if channel is None:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except BlockingIOError:
                    pass
                # Clear only after draining: a wakeup racing with the drain then either leaves
                # a byte behind (one spurious wakeup) or finds the flag still set, and its
                # record is seen by the accumulator drain at the top of the loop.
                self._wake_pending = False
                continue
            assert isinstance(channel, _Channel)
            if mask & selectors.EVENT_WRITE and self._channels.get(channel.broker_id) is channel:
                if channel.connecting:
                    self._connected(channel)
                if self._channels.get(channel.broker_id) is channel:
                    self._write(channel)
            if mask & selectors.EVENT_READ and self._channels.get(channel.broker_id) is channel:
                self._read(channel)

    # --- sending -------------------------------------------------------------------------

    def _send_unsent(self, now: float) -> None:
        """Send unsent batches while connections have room for more requests."""
        while self._unsent:
            before = len(self._unsent)
            self._send_round(now)
            if len(self._unsent) == before:
                return

    def _send_round(self, now: float) -> None:
        """At most one new produce request per broker; batches that do not fit stay unsent."""
        groups: dict[int, dict[TopicPartition, list[ProduceBatch]]] = {}
        request_bytes: dict[int, int] = {}
        partition_bytes: dict[TopicPartition, int] = {}
        waiting: list[ProduceBatch] = []
        for batch in self._unsent:
            channel = self._channel_for(batch)
            if channel is None:
                continue
            broker = channel.broker_id
            key = (batch.topic, batch.partition)
            size = batch.size
            if self._identity is not None and not self._sequenced(batch, key, groups.get(broker)):
                waiting.append(batch)
                continue
            if broker not in groups:
                if channel.pending() >= self._config.max_in_flight:
                    waiting.append(batch)
                    continue
            elif request_bytes[broker] + size > MAX_REQUEST_BYTES or (
                key in partition_bytes and partition_bytes[key] + size > MAX_PARTITION_BYTES
            ):
                waiting.append(batch)
                continue
            groups.setdefault(broker, {}).setdefault(key, []).append(batch)
            request_bytes[broker] = request_bytes.get(broker, 0) + size
            partition_bytes[key] = partition_bytes.get(key, 0) + size
        self._unsent = waiting
        for broker, entries in groups.items():
            self._queue_request(self._channels[broker], entries, now)

    def _channel_for(self, batch: ProduceBatch) -> _Channel | None:
        """The channel to the batch's leader; None after settling the batch for a retry."""
        try:
            leader = self._metadata.leader(batch.topic, batch.partition)
        except ClientError as err:
            self._settle(batch, ErrorCode.NETWORK_EXCEPTION, str(err), sent=False)
            return None
        if leader is None:
            code = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if self._metadata.topics.get(batch.topic) is None
                else ErrorCode.LEADER_NOT_AVAILABLE
            )
            self._settle(
                batch, code, f"no leader known for {batch.topic}-{batch.partition}", sent=False
            )
            return None
        channel = self._channels.get(leader)
        if channel is None:
            address = self._metadata.brokers.get(leader)
            try:
                if address is None:
                    raise ClientError(f"broker {leader} is not in the cluster metadata")
                sock = _start_connect(address)
            except ClientError as err:
                self._settle(batch, ErrorCode.NETWORK_EXCEPTION, str(err), sent=False)
                return None
            channel = _Channel(leader, address, sock)
            channel.connect_deadline = time.monotonic() + min(self._timeout_s, 10.0)
            self._channels[leader] = channel
            self._selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, channel)
        return channel

    def _connected(self, channel: _Channel) -> None:
        """The selector says `channel`'s connect ended: go on, or drop it if it failed."""
        error = channel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            reason = f"cannot connect: {describe_socket_error(OSError(error, os.strerror(error)))}"
            self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, reason)
            return
        channel.connecting = False

    def _queue_request(
        self, channel: _Channel, entries: dict[TopicPartition, list[ProduceBatch]], now: float
    ) -> None:
        if self._identity is not None:
            self._flying.update(id(batch) for batches in entries.values() for batch in batches)
        # One record batch per partition, as Kafka's Produce takes them (an idempotent
        # producer's holds one ProduceBatch, with the sequences it took).
        topics: dict[str, list[PartitionProduceData]] = {}
        for (topic, partition), batches in entries.items():
            first = batches[0]
            records = encode_records(
                (item for batch in batches for item in batch.items),
                producer_id=first.producer_id,
                producer_epoch=first.producer_epoch,
                base_sequence=first.base_sequence,
            )
            topics.setdefault(topic, []).append(
                PartitionProduceData(index=partition, records=records)
            )
        request = ProduceRequest(
            acks=self._acks,
            timeout_ms=self._config.request_timeout_ms,
            topic_data=[
                TopicProduceData(name=name, partition_data=parts) for name, parts in topics.items()
            ],
        )
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(request, correlation_id, self._client_id)
        pending = _Request(correlation_id, entries, frame)
        pending.deadline = now + self._timeout_s
        channel.outgoing.append(pending)
        self._write(channel)

    def _write(self, channel: _Channel) -> None:
        if channel.connecting:
            return
        while channel.outgoing:
            request = channel.outgoing[0]
            try:
                sent = channel.sock.send(request.frame[request.written :])
            except BlockingIOError:
                break
            except OSError as err:
                self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, describe_socket_error(err))
                return
            request.written += sent
            if request.written < len(request.frame):
                break
            channel.outgoing.popleft()
            request.frame = memoryview(b"")
            if self._acks == 0:
                for batch in request.batches():
                    self._settle(batch, ErrorCode.NONE, "", sent=True)
            else:
                request.deadline = time.monotonic() + self._timeout_s
                channel.in_flight.append(request)
        wants_write = bool(channel.outgoing)
        if wants_write != channel.wants_write:
            channel.wants_write = wants_write
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if wants_write else 0)
            self._selector.modify(channel.sock, events, channel)

    # --- receiving -----------------------------------------------------------------------

    def _read(self, channel: _Channel) -> None:
        try:
            data = channel.sock.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError as err:
            self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, describe_socket_error(err))
            return
        if not data:
            self._drop_channel(
                channel, ErrorCode.NETWORK_EXCEPTION, "connection closed by the broker"
            )
            return
        buf = channel.inbuf
        buf += data
        while len(buf) >= 4:
            try:
                size = response_size(buf[:4])
            except KafkaCodecError as err:
                self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, str(err))
                return
            if len(buf) < 4 + size:
                break
            payload = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            if not self._on_response(channel, payload):
                return

    def _on_response(self, channel: _Channel, payload: bytes) -> bool:
        """Settle the batches of the oldest in-flight request; False if the channel was dropped."""
        if not channel.in_flight:
            self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, "response to no request")
            return False
        request = channel.in_flight.popleft()
        try:
            correlation_id, body = decode_response(payload, ProduceResponse)
        except KafkaCodecError as err:
            channel.in_flight.appendleft(request)
            self._drop_channel(channel, ErrorCode.NETWORK_EXCEPTION, f"undecodable response: {err}")
            return False
        if correlation_id != request.correlation_id:
            channel.in_flight.appendleft(request)
            self._drop_channel(
                channel,
                ErrorCode.NETWORK_EXCEPTION,
                f"response for request {correlation_id}, expected {request.correlation_id}",
            )
            return False
        answered: set[TopicPartition] = set()
        for topic in body.responses:
            for part in topic.partition_responses:
                key = (topic.name, part.index)
                batches = request.entries.get(key)
                if batches is None or key in answered:
                    continue
                answered.add(key)
                code = ErrorCode.from_wire(part.error_code)
                offset = part.base_offset
                message = produce_answer(str(channel.broker_id), code)
                for batch in batches:
                    self._settle(batch, code, message, sent=True, base_offset=offset)
                    offset += len(batch)
        for key, batches in request.entries.items():
            if key not in answered:
                for batch in batches:
                    message = f"broker {channel.broker_id} did not answer for {key[0]}-{key[1]}"
                    self._settle(batch, ErrorCode.UNKNOWN_SERVER_ERROR, message, sent=True)
        return True

    # --- failures ------------------------------------------------------------------------

    def _settle(
        self,
        batch: ProduceBatch,
        code: ErrorCode,
        message: str,
        *,
        sent: bool,
        base_offset: int = -1,
    ) -> None:
        # As Kafka's producer: an error that says leadership moved marks the metadata stale
        # whether or not the batch is retried, so later sends find the new leader.
        if code in METADATA_REFRESH_CODES:
            self._metadata_stale = True
        if self._identity is not None and batch.base_sequence >= 0:
            self._settle_sequenced(batch, code, message, sent=sent, base_offset=base_offset)
            return
        if self._policy.settle(batch, code, message, sent=sent, base_offset=base_offset):
            self.accumulator.retry(batch)
            return
        self.accumulator.completed(len(batch))

    def _settle_sequenced(
        self, batch: ProduceBatch, code: ErrorCode, message: str, *, sent: bool, base_offset: int
    ) -> None:
        """Settle an idempotent producer's batch, keeping its partition's sequence whole."""
        assert self._identity is not None
        key = (batch.topic, batch.partition)
        self._flying.discard(id(batch))
        queue = self._sequenced_batches.setdefault(key, deque())
        first = queue[0] if queue else None
        if code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if batch is not first:
                # An earlier batch of the partition is not written yet: this one was not
                # either; it goes again after that one, and the attempt does not count.
                self._again(batch, key)
                return
            if (batch.producer_id, batch.producer_epoch) != self._identity.current:
                # Its producer id was given up (an earlier batch failed for good), so no
                # earlier sequence will ever come: not written, it starts anew under the new id.
                queue.popleft()
                batch.producer_id = batch.producer_epoch = batch.base_sequence = -1
                self._again(batch, key)
                return
        if self._policy.settle(batch, code, message, sent=sent, base_offset=base_offset):
            self._again(batch, key)
            return
        self.accumulator.completed(len(batch))
        if batch in queue:
            queue.remove(batch)
        if batch is first or not queue:
            self._resequencing.discard(key)
        if code is not ErrorCode.NONE:
            # Its sequences may be a gap no later batch can fill: start a new producer id.
            self._identity.reset((batch.producer_id, batch.producer_epoch))

    def _again(self, batch: ProduceBatch, key: TopicPartition) -> None:
        """Send an idempotent producer's batch again, its partition resequencing."""
        self._resequencing.add(key)
        batch.retry_at = max(batch.retry_at, time.monotonic())
        self.accumulator.retry(batch)

    def _expire(self, now: float) -> None:
        for channel in list(self._channels.values()):
            if channel.connecting and channel.connect_deadline <= now:
                self._drop_channel(
                    channel, ErrorCode.NETWORK_EXCEPTION, "cannot connect: timed out"
                )
                continue
            head = channel.in_flight[0] if channel.in_flight else None
            stuck = channel.outgoing[0] if channel.outgoing else None
            if (head is not None and head.deadline <= now) or (
                stuck is not None and stuck.deadline <= now
            ):
                self._drop_channel(
                    channel,
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"no response within request.timeout.ms={self._config.request_timeout_ms}",
                )

    def _drop_channel(self, channel: _Channel, code: ErrorCode, reason: str) -> None:
        """Close a channel; retry or fail everything on it (sent requests indeterminately)."""
        if self._channels.get(channel.broker_id) is channel:
            del self._channels[channel.broker_id]
            self._selector.unregister(channel.sock)
        channel.sock.close()
        host, port = channel.address
        message = f"broker {channel.broker_id} at {host}:{port}: {reason}"
        if channel.in_flight or channel.outgoing:
            log.warning("producer connection to %s dropped: %s", f"{host}:{port}", reason)
        for request in channel.in_flight:
            for batch in request.batches():
                self._settle(batch, code, message, sent=True)
        for request in channel.outgoing:
            for batch in request.batches():
                self._settle(batch, ErrorCode.NETWORK_EXCEPTION, message, sent=False)
        channel.in_flight.clear()
        channel.outgoing.clear()
        self._metadata_stale = True

    # --- idempotence -------------------------------------------------------------------

    def _sequenced(
        self,
        batch: ProduceBatch,
        key: TopicPartition,
        group: dict[TopicPartition, list[ProduceBatch]] | None,
    ) -> bool:
        """Whether an idempotent producer may send `batch` in this round, giving it its
        sequence numbers at its first send: a partition's batches go in sequence order, at
        most MAX_IDEMPOTENT_IN_FLIGHT of them on their way (one while it resequences), one
        per request."""
        assert self._identity is not None
        if group is not None and key in group:
            return False
        queue = self._sequenced_batches.setdefault(key, deque())
        flying = sum(1 for b in queue if id(b) in self._flying)
        if flying >= (1 if key in self._resequencing else MAX_IDEMPOTENT_IN_FLIGHT):
            return False
        next_up = next((b for b in queue if id(b) not in self._flying), None)
        if batch.base_sequence >= 0:
            return next_up is batch
        if next_up is not None:
            return False
        if self._identity.current is None:
            self._identify()
            return False
        batch.producer_id, batch.producer_epoch, batch.base_sequence = self._identity.take(
            key, len(batch)
        )
        queue.append(batch)
        return True

    def _identify(self) -> None:
        """Ask for a producer id on a thread of its own (a broker that does not answer must
        not stop the sends of batches that have one); sends wait for it meanwhile."""
        if self._identifier is not None and self._identifier.is_alive():
            return
        self._identifier = threading.Thread(
            target=self._identify_in_background, name=f"{self.name}-producer-id", daemon=True
        )
        self._identifier.start()

    def _identify_in_background(self) -> None:
        assert self._identity is not None
        try:
            self._identity.ensure()
        except (ClientError, BrokerError) as err:
            log.warning("idempotent producer: no producer id yet: %s", err)
            time.sleep(self._policy.backoff_s)
        finally:
            self.wakeup()

    def _refresh_metadata(self, now: float) -> None:
        """Start a refresh on a thread of its own (a broker that does not answer must not
        stop the sends to the others); sends use the metadata they have meanwhile."""
        if self._refresher is not None and self._refresher.is_alive():
            return
        if now - self._last_refresh < self._policy.backoff_s:
            return
        self._last_refresh = now
        self._metadata_stale = False
        self._refresher = threading.Thread(
            target=self._refresh_in_background, name=f"{self.name}-metadata", daemon=True
        )
        self._refresher.start()

    def _refresh_in_background(self) -> None:
        try:
            self._metadata.refresh()
        except ClientError as err:
            log.warning("producer metadata refresh failed: %s", err)
            self._metadata_stale = True
        finally:
            self.wakeup()

    def _fail_everything(self, message: str) -> None:
        leftovers = [*self._unsent, *self.accumulator.stop()]
        self._unsent = []
        for batch in leftovers:
            if not batch.done:
                batch.fail_with(ErrorCode.REQUEST_TIMED_OUT, message)
                self.accumulator.completed(len(batch))


def _start_connect(address: Address) -> socket.socket:
    """A non-blocking socket whose connect to `address` is under way (Nagle off)."""
    host, port = address
    try:
        family, kind, proto, _, target = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as err:
        raise BrokerUnavailableError(
            f"cannot connect to broker {host}:{port}: {describe_socket_error(err)}"
        ) from None
    sock = socket.socket(family, kind, proto)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    error = sock.connect_ex(target)
    if error not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
        sock.close()
        reason = describe_socket_error(OSError(error, os.strerror(error)))
        raise BrokerUnavailableError(f"cannot connect to broker {host}:{port}: {reason}")
    return sock
