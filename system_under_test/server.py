"""The broker: an asyncio TCP server in front of the request handlers and the logs.

Each connection reads frames straight into a bytearray (no intermediate copies), handles
its requests one at a time in arrival order and writes the responses in that order, as
Kafka does. Whatever one client sends, the others are served: a frame above
socket.request.max.bytes or an undecodable header closes that connection; an undecodable
body gets an INVALID_REQUEST error response and a close; an unknown API or version gets
UNSUPPORTED_VERSION. Logs are only touched from the event loop.

What one client can hold is bounded. At most max.connections connections are open; one more
is closed as soon as it is accepted. A request must arrive whole within
socket.request.read.timeout.ms of its first byte, and a connection with no request being
handled that has sent nothing and taken no answer for connections.max.idle.ms is closed; one
timer per connection checks both. Received requests wait to be handled in memory ("queued" from their last byte until
handled); a connection stops reading while 16 of its requests wait, while it would queue
more than max(socket.request.max.bytes, 4 MiB), or while the whole broker queues more than
queued.max.request.bytes. A connection with nothing queued always reads its next request,
so a client that waits for each answer is never starved by one that does not read them.

Entry points: ``Broker`` (``await start()``, ``await stop()``), ``run_broker`` (blocking,
handles SIGTERM/SIGINT) and ``main`` (``python -m system_under_test broker ...``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

from system_under_test import protocol
from system_under_test.cluster_membership import ClusterMembership
from system_under_test.config import BrokerConfig, ConfigError
from system_under_test.errors import ErrorCode, ProtocolError
from system_under_test.event_log import EventLog
from system_under_test.group_metadata_manager import GroupMetadataManager
from system_under_test.kafka_handler import KafkaEndpoints, KafkaRequestHandler
from system_under_test.log.log import LogConfig, LogError
from system_under_test.log.log_manager import LogManager
from system_under_test.metadata_cache import BrokerEndpoint, MetadataCache
from system_under_test.producer_ids import FileBlockClaim, ProducerIdManager
from system_under_test.replication.partition import Partition
from system_under_test.replication.replica_manager import ReplicaManager
from system_under_test.request_handler import CloseConnection, RequestHandler, TopicCreator
from system_under_test.standalone import StandaloneController, TopicStoreError
from system_under_test.tasks import cancel_and_wait
from system_under_test.zookeeper import MetadataError

log = logging.getLogger("system_under_test.broker")

CHECKPOINT_INTERVAL_S = 60.0
"""How often recovery points are checkpointed (Kafka's log.flush.offset.checkpoint.interval.ms)."""
INITIAL_FRAME_BUFFER = 1 << 20
"""A large frame's buffer starts this big and grows as bytes arrive, so a client that only
announces a huge frame cannot make the broker allocate it."""
MAX_QUEUED_FRAMES = 16
"""Stop reading a connection while this many of its requests wait to be handled."""
MIN_CONNECTION_QUEUED_BYTES = 4 << 20
"""A connection may queue max(socket.request.max.bytes, this) bytes of requests."""
REFUSAL_WARNING_INTERVAL_S = 1.0
"""Connections refused for max.connections are logged at most once per this interval."""
SHUTDOWN_GRACE_S = 10.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
"""How long a controlled shutdown request waits for the controller's answer (Kafka's
controller.socket.timeout.ms)."""
EVENT_LOG_NAME = "squall-events.jsonl"


class BrokerStartupError(RuntimeError):
    """The broker cannot start (bad log dir, port in use, unreadable topic file...)."""


FrameHandler = Callable[[bytearray, str], Awaitable[tuple[bytes | bytearray | None, bool]]]
"""A listener's protocol: a request frame and the peer to (response frame or None, close)."""


class _ClientConnection(asyncio.BufferedProtocol):
    """One client connection: frames in, responses out, one request at a time."""

    def __init__(self, broker: Broker, handle_frame: FrameHandler) -> None:
        self._broker = broker
        self._handle_frame = handle_frame
        self._loop = asyncio.get_running_loop()
        self._max_frame = broker.max_frame_bytes
        self._max_queued = max(self._max_frame, MIN_CONNECTION_QUEUED_BYTES)
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._size_buf = bytearray(4)
        self._frame: bytearray | None = None
        """The frame being received, once its size is known."""
        self._frame_size = 0
        self._filled = 0
        self._frames: deque[bytearray | None] = deque()
        """Complete frames waiting to be handled; None marks the end of input."""
        self._queued_bytes = 0
        """Bytes of this connection's complete frames, from their last byte until handled."""
        self._frame_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._closed = False
        self._reading_paused = False
        self._stopping = False
        self._handling = False
        self._frame_started = 0.0
        """Loop time of the current frame's first byte (or of reading it again after a pause)."""
        self._last_activity = 0.0
        """Loop time of the last frame's first byte, answer or resumed write, the latest."""
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    # --- asyncio callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        broker = self._broker
        if len(broker._connections) >= broker.max_connections:
            self._closed = True
            broker._refused(self._peer)
            transport.abort()
            return
        broker._connections.add(self)
        now = self._loop.time()
        self._last_activity = now
        self._timer = self._loop.call_at(
            now + min(broker.read_timeout_s, broker.idle_timeout_s), self._check_timeouts
        )
        self._task = self._loop.create_task(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._broker._connections.discard(self)
        self._broker._paused.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._frame_ready.set()
        self._can_write.set()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._last_activity = self._loop.time()
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is None:
            return memoryview(self._size_buf)[self._filled :]
        if self._filled == len(frame):
            # Grow a large frame's buffer only as its bytes actually arrive.
            grow = min(max(len(frame), INITIAL_FRAME_BUFFER), self._frame_size - len(frame))
            frame.extend(bytes(grow))
        return memoryview(frame)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._frame is None:
            if self._filled == nbytes:  # the first bytes of a frame
                self._frame_started = self._last_activity = self._loop.time()
            if self._filled < 4:
                return
            (size,) = protocol.FRAME_SIZE.unpack(self._size_buf)
            try:
                protocol.check_frame_size(size, self._max_frame)
            except ProtocolError as err:
                self.abort(f"{err} (socket.request.max.bytes)")
                return
            self._frame_size = size
            self._filled = 0
            self._frame = bytearray()
            if self._must_wait():
                self._pause_reading()  # before the body: its buffer is allocated on resuming
            else:
                self._frame = bytearray(min(size, INITIAL_FRAME_BUFFER))
        if self._filled == self._frame_size:
            self._frames.append(self._frame)
            self._frame = None
            self._filled = 0
            self._queued_bytes += self._frame_size
            self._broker._queue(self._frame_size)
            self._frame_ready.set()
            if self._must_wait():
                self._pause_reading()

    def eof_received(self) -> bool:
        # Answer what was received, then close (handled by _serve once the queue is empty).
        self._frames.append(None)
        self._frame_ready.set()
        return True

    # --- flow control and timeouts -------------------------------------------------------

    def _must_wait(self) -> bool:
        """Whether this connection must not read now (the limits of the module docstring)."""
        if self._queued_bytes == 0:
            return False
        if len(self._frames) >= (
            MAX_QUEUED_FRAMES // 2 if self._reading_paused else MAX_QUEUED_FRAMES
        ):
            return True
        if self._frame is not None and self._queued_bytes + self._frame_size > self._max_queued:
            return True  # the next frame's size is known and it would not fit
        return self._broker.queued_bytes > self._broker.max_queued_bytes

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()
            self._broker._paused.add(self)

    def _resume_reading(self) -> None:
        """Read again, unless a limit still holds this connection back."""
        if not self._reading_paused or self._stopping or self._closed or self._must_wait():
            return
        self._reading_paused = False
        self._broker._paused.discard(self)
        if self._frame is not None:
            self._frame_started = self._loop.time()  # its clock stopped while we did not read
        if self._transport is not None:
            self._transport.resume_reading()

    def _check_timeouts(self) -> None:
        """The connection's one timer: close it if a read timeout passed, else re-arm."""
        self._timer = None
        if self._closed:
            return
        broker = self._broker
        now = self._loop.time()
        # Often enough to see a frame begin or a request end, both of which arm no timer.
        next_check = now + min(broker.read_timeout_s, broker.idle_timeout_s)
        if (self._frame is not None or self._filled) and not self._reading_paused:
            deadline = self._frame_started + broker.read_timeout_s
            if now >= deadline:
                if self._frame is None:
                    received, size = self._filled, 4
                else:
                    received, size = 4 + self._filled, 4 + self._frame_size
                self.abort(
                    f"request not received whole within socket.request.read.timeout.ms="
                    f"{broker.config['socket.request.read.timeout.ms']} "
                    f"({received} of {size} bytes)"
                )
                return
            next_check = min(next_check, deadline)
        elif not self._handling:
            deadline = self._last_activity + broker.idle_timeout_s
            if now >= deadline:
                self._close_idle()
                return
            next_check = min(next_check, deadline)
        self._timer = self._loop.call_at(next_check, self._check_timeouts)

    def _close_idle(self) -> None:
        log.info(
            "closing connection from %s: idle for connections.max.idle.ms=%d",
            self._peer,
            self._broker.config["connections.max.idle.ms"],
        )
        self._closed = True
        if self._transport is not None:
            if self._transport.get_write_buffer_size():
                self._transport.abort()  # the client reads no answers: do not wait for it
            else:
                self._transport.close()

    # --- request processing --------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Close the connection now, dropping anything unanswered."""
        if not self._closed:
            log.warning("closing connection from %s: %s", self._peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.abort()

    def stop_reading(self) -> None:
        """Shutdown: finish what was received, then close."""
        if self._transport is not None and not self._closed:
            self._stopping = True
            self._transport.pause_reading()
            self._frames.append(None)
            self._frame_ready.set()

    async def _serve(self) -> None:
        try:
            while not self._closed:
                if not self._frames:
                    self._frame_ready.clear()
                    await self._frame_ready.wait()
                    continue
                frame = self._frames.popleft()
                if frame is None:  # end of input
                    break
                if self._reading_paused:
                    self._resume_reading()
                self._handling = True
                try:
                    response, close = await self._handle_frame(frame, self._peer)
                finally:
                    self._handling = False
                    self._last_activity = self._loop.time()
                    self._queued_bytes -= len(frame)
                    self._broker._unqueue(len(frame))
                    if self._reading_paused:
                        self._resume_reading()
                if self._closed:
                    break
                if response is not None and self._transport is not None:
                    self._transport.write(response)
                    if not self._can_write.is_set():
                        await self._can_write.wait()
                if close:
                    break
        except Exception:
            log.exception("connection from %s failed", self._peer)
        finally:
            self._broker._paused.discard(self)
            self._broker._unqueue(self._queued_bytes)  # received, never handled
            self._queued_bytes = 0
            if self._transport is not None and not self._transport.is_closing():
                self._transport.close()

    async def wait_closed(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)


class Broker:
    """A broker process's state: logs, partitions, metadata, listener and background work."""

    def __init__(self, config: BrokerConfig, *, standalone: bool = True) -> None:
        if not standalone and config.standalone:
            raise ConfigError(
                "zookeeper.connect is not set: set it (e.g. --set zookeeper.connect="
                "127.0.0.1:2181) to join a cluster, or pass --standalone"
            )
        self.config = config
        self.standalone = standalone
        self.broker_id = config.broker_id
        self.metadata = MetadataCache()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.log_manager = LogManager(
            config.log_dirs, LogConfig.from_mapping(config.topic_defaults(), source="broker config")
        )
        event_path = config["event.log"]
        self.events = EventLog(
            Path(event_path) if event_path else config.log_dirs[0] / EVENT_LOG_NAME,
            broker_id=self.broker_id,
        )
        self.controller: StandaloneController | None = None
        self.membership: ClusterMembership | None = None
        self.replica_manager: ReplicaManager | None = None
        topic_creator: TopicCreator
        if standalone:
            self.controller = StandaloneController(
                config, self.log_manager, self.metadata, self.partitions
            )
            topic_creator = self.controller
        else:
            self.membership = ClusterMembership(config, self.metadata, self.events)
            self.replica_manager = ReplicaManager(
                config,
                self.log_manager,
                self.partitions,
                self.metadata,
                self.events,
                isr_writer=self.membership.store.update_isr,
                topic_config=self.membership.store.topic_config,
            )
            self.membership.replica_manager = self.replica_manager
            topic_creator = self.membership
        self.handler = RequestHandler(
            partitions=self.partitions,
            metadata=self.metadata,
            topic_creator=topic_creator,
            replica_manager=self.replica_manager,
            controller=self.membership.controller if self.membership is not None else None,
        )
        self.groups = GroupMetadataManager(
            config,
            self.handler,
            events=self.events,
            zookeeper=self.membership,
            standalone=standalone,
        )
        producer_ids = ProducerIdManager(self._claim_producer_id_block)

        def kafka_apis(endpoints: KafkaEndpoints) -> KafkaRequestHandler:
            return KafkaRequestHandler(
                self.handler, endpoints=endpoints, groups=self.groups, producer_ids=producer_ids
            )

        self.kafka_handler = kafka_apis(self._listener_endpoints)
        """Kafka's APIs on the broker's listener, which advertises the brokers' listeners."""
        self.second_kafka_handler = (
            kafka_apis(self._kafka_endpoints) if config.kafka_listener is not None else None
        )
        """The same on kafka.listeners, if configured, which advertises those listeners."""
        self._server: asyncio.Server | None = None
        self._kafka_server: asyncio.Server | None = None
        """The Kafka-protocol listener (kafka.listeners), if configured."""
        self.kafka_endpoint: tuple[str, int] | None = None
        """The Kafka listener's advertised address, once bound."""
        self.kafka_port = 0
        """The Kafka listener's bound port (it may ask for port 0)."""
        self._connections: set[_ClientConnection] = set()
        self._paused: set[_ClientConnection] = set()
        """Connections not reading, for a limit of theirs or for the broker's queued bytes."""
        self.max_frame_bytes = int(config["socket.request.max.bytes"])
        self.max_connections = int(config["max.connections"])
        self.idle_timeout_s = config["connections.max.idle.ms"] / 1000
        self.read_timeout_s = config["socket.request.read.timeout.ms"] / 1000
        self.max_queued_bytes = int(config["queued.max.request.bytes"])
        self.queued_bytes = 0
        """Bytes of received requests not yet handled, over all connections."""
        self.queued_bytes_peak = 0
        """The most queued_bytes has been since the broker started."""
        self._refusals_unlogged = 0
        self._last_refusal_warning = -REFUSAL_WARNING_INTERVAL_S
        self._background: asyncio.Task[None] | None = None
        self._started = False
        self.port = 0
        """The port actually bound (listeners may ask for port 0)."""
        self.host = ""

    def _record_recoveries(self) -> None:
        """An event for every log that loading changed (a cut, deleted segments, indexes
        rebuilt), so that a damaged disk shows in the event log, not only in the log file."""
        for (topic, partition), log in sorted(self.log_manager.all_logs().items()):
            report = log.recovery_report
            if not (report.truncated or report.rebuilt_indexes):
                continue
            problems = [r.problem for r in report.recovered if r.problem]
            problems += list(report.rebuilt_indexes.values())
            self.events.log_recovery(
                key=f"{topic}-{partition}",
                log_end_offset=log.log_end_offset,
                clean_shutdown=report.clean_shutdown,
                truncated_bytes=sum(r.truncated_bytes for r in report.recovered),
                deleted_segments=report.deleted_segments,
                rebuilt_indexes=sorted(report.rebuilt_indexes),
                problem=problems[0] if problems else None,
            )

    async def start(self) -> None:
        """Load the logs, bind the listener, join the cluster, start the background tasks."""
        loop = asyncio.get_running_loop()
        try:
            if self.membership is not None:
                await loop.run_in_executor(None, self.membership.connect)
            if self.controller is not None:
                self.controller.startup()
            if self.replica_manager is not None:
                self.replica_manager.startup()
        except MetadataError as err:
            raise BrokerStartupError(
                f"broker {self.broker_id} cannot join the cluster: {err}"
            ) from None
        except (LogError, TopicStoreError, ConfigError, OSError) as err:
            self.log_manager.shutdown()  # releases the log dir locks if loading got that far
            if self.membership is not None:
                self.membership.shutdown()
            raise BrokerStartupError(
                f"broker {self.broker_id} cannot load its logs: {err}"
            ) from None
        self._record_recoveries()
        host, port = self.config.listener
        try:
            serve = self._dispatcher(self.kafka_handler)
            self._server = await loop.create_server(
                lambda: _ClientConnection(self, serve), host, port, reuse_address=True
            )
            kafka, kafka_handler = self.config.kafka_listener, self.second_kafka_handler
            if kafka is not None and kafka_handler is not None:
                serve_second = self._dispatcher(kafka_handler)
                self._kafka_server = await loop.create_server(
                    lambda: _ClientConnection(self, serve_second),
                    kafka[0],
                    kafka[1],
                    reuse_address=True,
                )
        except OSError as err:
            if self._server is not None:
                self._server.close()
            self.log_manager.shutdown()
            if self.membership is not None:
                self.membership.shutdown()
            raise BrokerStartupError(
                f"broker {self.broker_id} cannot listen: {err.strerror}; "
                "is another broker using that port? Change listeners or kafka.listeners"
            ) from None
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]
        adv_host, adv_port = self.config.advertised_listener
        if self.config["advertised.listeners"] is None or adv_port == 0:
            adv_host, adv_port = host, self.port
        self.kafka_endpoint = self._kafka_advertised()
        if self.controller is not None:
            self.controller.register_endpoint(adv_host, adv_port)
        if self.membership is not None:
            endpoint = BrokerEndpoint(self.broker_id, adv_host, adv_port)
            try:
                await loop.run_in_executor(
                    None, self.membership.register, endpoint, loop, self.kafka_endpoint
                )
            except MetadataError as err:
                self._server.close()
                if self._kafka_server is not None:
                    self._kafka_server.close()
                self.log_manager.shutdown()
                self.membership.shutdown()
                raise BrokerStartupError(f"broker {self.broker_id}: {err}") from None
        self._background = loop.create_task(self._run_background())
        self._started = True
        log.info(
            "broker %d listening on %s:%d%s (%s, log dirs %s)",
            self.broker_id,
            host,
            self.port,
            f", Kafka protocol on {self.kafka_endpoint[0]}:{self.kafka_endpoint[1]}"
            if self.kafka_endpoint
            else "",
            "standalone" if self.standalone else f"cluster at {self.config['zookeeper.connect']}",
            ", ".join(map(str, self.config.log_dirs)),
        )

    def _kafka_advertised(self) -> tuple[str, int] | None:
        """The Kafka listener's address for clients: kafka.advertised.listeners, else bound."""
        if self._kafka_server is None:
            return None
        bound = self._kafka_server.sockets[0].getsockname()[1]
        self.kafka_port = int(bound)
        advertised = self.config.kafka_advertised_listener
        if advertised is not None and advertised[1] != 0:
            return advertised
        host = self.config.kafka_listener[0] if self.config.kafka_listener else self.host
        return host, int(bound)

    def _claim_producer_id_block(self, size: int) -> tuple[int, int]:
        """The next block of producer ids for this broker: claimed in ZooKeeper in a cluster,
        in the first log dir's file on a standalone broker."""
        if self.membership is None:
            return FileBlockClaim(self.config.log_dirs[0])(size)
        return self.membership.store.claim_producer_id_block(self.broker_id, size)

    async def _listener_endpoints(
        self, brokers: list[BrokerEndpoint]
    ) -> dict[int, tuple[str, int]]:
        """The advertised listeners of `brokers`, as the controller told this broker."""
        return {b.broker_id: (b.host, b.port) for b in brokers}

    async def _kafka_endpoints(self, brokers: list[BrokerEndpoint]) -> dict[int, tuple[str, int]]:
        """The Kafka listeners of `brokers`: this broker's own; the others' from ZooKeeper."""
        if self.membership is not None:
            found = await self.membership.kafka_endpoints(brokers)
        else:
            found = {}
        if self.kafka_endpoint is not None and any(b.broker_id == self.broker_id for b in brokers):
            found[self.broker_id] = self.kafka_endpoint
        return found

    async def stop(self) -> None:
        """Move leaderships away (controlled shutdown), stop accepting, finish requests in
        flight, close connections, shut the logs down."""
        if not self._started:
            return
        self._started = False
        log.info("broker %d shutting down", self.broker_id)
        await self._controlled_shutdown()
        assert self._server is not None
        self._server.close()
        if self._kafka_server is not None:
            self._kafka_server.close()
        self.handler.stopping = True
        for partition in self.partitions.values():
            partition.wake_all()
        connections = list(self._connections)
        for conn in connections:
            conn.stop_reading()
        if connections:
            await asyncio.wait(
                [asyncio.ensure_future(c.wait_closed()) for c in connections],
                timeout=SHUTDOWN_GRACE_S,
            )
            for conn in connections:
                conn.abort("broker shutting down")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1.0)
        if self._kafka_server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._kafka_server.wait_closed(), 1.0)
        if self._background is not None:
            await cancel_and_wait(self._background)
        if self.groups is not None:
            self.groups.close()
        if self.membership is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.membership.shutdown)
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()
        self.log_manager.shutdown()
        self.events.close()
        log.info("broker %d stopped cleanly", self.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown, while this broker still serves: the controller moves
        its leaderships to other in-sync replicas and its ISR memberships away, then it stops
        following."""
        config = self.config
        if self.membership is None or not config["controlled.shutdown.enable"]:
            return
        membership = self.membership
        attempts = config["controlled.shutdown.max.retries"]
        backoff_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
        asking = asyncio.get_running_loop().run_in_executor(
            None,
            lambda: membership.controlled_shutdown(
                attempts=attempts, backoff_s=backoff_s, timeout_s=CONTROLLED_SHUTDOWN_TIMEOUT_S
            ),
        )
        try:
            # ZooKeeper out of reach can hold a question up: never longer than the attempts.
            answered = await asyncio.wait_for(
                asking, attempts * (CONTROLLED_SHUTDOWN_TIMEOUT_S + backoff_s)
            )
        except TimeoutError:
            log.warning("broker %d: controlled shutdown timed out; stopping", self.broker_id)
            answered = False
        if answered and self.replica_manager is not None:
            await self.replica_manager.stop_replicas()

    def _queue(self, nbytes: int) -> None:
        """A request of nbytes was received whole."""
        self.queued_bytes += nbytes
        self.queued_bytes_peak = max(self.queued_bytes_peak, self.queued_bytes)

    def _unqueue(self, nbytes: int) -> None:
        """Requests of nbytes in all were handled or dropped: wake connections it unblocks."""
        was_over = self.queued_bytes > self.max_queued_bytes
        self.queued_bytes -= nbytes
        if was_over and self.queued_bytes <= self.max_queued_bytes:
            for conn in list(self._paused):
                conn._resume_reading()

    def _refused(self, peer: str) -> None:
        """A connection from peer was closed at once: max.connections are open."""
        now = time.monotonic()
        if now - self._last_refusal_warning < REFUSAL_WARNING_INTERVAL_S:
            self._refusals_unlogged += 1
            return
        more = self._refusals_unlogged
        log.warning(
            "closing connection from %s: max.connections=%d connections are open%s",
            peer,
            self.max_connections,
            f" ({more} more refused since the last warning)" if more else "",
        )
        self._last_refusal_warning = now
        self._refusals_unlogged = 0

    def _dispatcher(self, kafka_handler: KafkaRequestHandler) -> FrameHandler:
        """A listener's frame handler: the brokers' own APIs (by key and version, as both
        share Kafka's framing and request header) here, every other request to Kafka's."""

        async def dispatch(frame: bytearray, peer: str) -> tuple[bytes | bytearray | None, bool]:
            if len(frame) >= 4 and protocol.serves(
                int.from_bytes(frame[0:2], "big", signed=True),
                int.from_bytes(frame[2:4], "big", signed=True),
            ):
                return await self._handle_inter_broker(frame, peer)
            return await kafka_handler.handle_frame(frame, peer)

        return dispatch

    async def _handle_inter_broker(
        self, frame: bytearray, peer: str
    ) -> tuple[bytes | bytearray | None, bool]:
        """A request of the brokers' own APIs: the response frame to send (None: no
        response) and whether to close afterwards."""
        try:
            header, body_start = protocol.decode_request_header(frame)
        except ProtocolError as err:
            log.warning("closing connection from %s: undecodable request header: %s", peer, err)
            return None, True
        correlation_id = header.correlation_id
        try:
            request = protocol.decode_request_body(header, frame, body_start)
        except protocol.UnsupportedApiError as err:
            log.info("%s (client %s at %s)", err, header.client_id, peer)
            body = protocol.ErrorResponse(ErrorCode.UNSUPPORTED_VERSION, str(err))
            return protocol.encode_response(correlation_id, body), False
        except ProtocolError as err:
            log.warning("invalid request from %s (api key %d): %s", peer, header.api_key, err)
            body = protocol.ErrorResponse(
                ErrorCode.INVALID_REQUEST, f"cannot decode request: {err}"
            )
            return protocol.encode_response(correlation_id, body), True
        try:
            response = await self.handler.handle(header, request)
        except CloseConnection as err:
            log.info("closing connection from %s: %s", peer, err)
            return None, True
        except Exception as err:
            log.exception("handling %s from %s failed", type(request).__name__, peer)
            body = protocol.ErrorResponse(ErrorCode.UNKNOWN_SERVER_ERROR, f"internal error: {err}")
            return protocol.encode_response(correlation_id, body), True
        if response is None:
            return None, False
        return protocol.encode_response(correlation_id, response), False

    async def _run_background(self) -> None:
        """Flush scheduler, retention and recovery-point checkpoints."""
        flush_s = self.config["log.flush.scheduler.interval.ms"] / 1000
        retention_s = self.config["log.retention.check.interval.ms"] / 1000
        now = time.monotonic()
        next_flush, next_retention, next_checkpoint = (
            now + flush_s,
            now + retention_s,
            now + CHECKPOINT_INTERVAL_S,
        )
        while True:
            await asyncio.sleep(
                max(0.0, min(next_flush, next_retention, next_checkpoint) - time.monotonic())
            )
            now = time.monotonic()
            now_ms = time.time_ns() // 1_000_000
            try:
                if now >= next_flush:
                    next_flush = now + flush_s
                    self.log_manager.flush_due_logs(now_ms)
                if now >= next_retention:
                    next_retention = now + retention_s
                    deleted = self.log_manager.cleanup_logs(now_ms)
                    if deleted:
                        log.info("retention deleted %d segment(s)", deleted)
                if now >= next_checkpoint:
                    next_checkpoint = now + CHECKPOINT_INTERVAL_S
                    self.log_manager.checkpoint_recovery_points()
            except (LogError, OSError):
                log.exception("background log maintenance failed; retrying at the next interval")


# --- process entry points --------------------------------------------------------------------


def configure_logging(broker_id: int, log_file: Path | None = None) -> None:
    """Log to stderr (and log_file) as ``time level broker-N logger: message``."""
    formatter = logging.Formatter(
        f"%(asctime)s %(levelname)-7s broker-{broker_id} %(name)s: %(message)s"
    )
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    root = logging.getLogger()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(logging.INFO)


async def _serve_until_signalled(broker: Broker) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await broker.start()
    try:
        await stop.wait()
    finally:
        await broker.stop()


def run_broker(config: BrokerConfig, *, standalone: bool, log_file: Path | None = None) -> int:
    """Run a broker until SIGTERM or SIGINT; the process exit code (2: config, 1: startup)."""
    if log_file is not None or not logging.getLogger().handlers:
        configure_logging(config.broker_id, log_file)
    try:
        broker = Broker(config, standalone=standalone)
    except (ConfigError, LogError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve_until_signalled(broker))
    except BrokerStartupError as err:
        log.error("%s", err)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m system_under_test broker --config FILE --set key=value ... [--standalone]``."""
    parser = argparse.ArgumentParser(
        prog="python -m system_under_test broker",
        description="Run one broker of squall's replicated log.",
    )
    parser.add_argument("--config", type=Path, help="properties file (Kafka's server.properties)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one configuration key; repeatable",
    )
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="run without ZooKeeper (the default when zookeeper.connect is unset)",
    )
    parser.add_argument("--log-file", type=Path, help="also write the broker's log here")
    args = parser.parse_args(argv)
    try:
        config = BrokerConfig.load(args.config, args.overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return run_broker(
        config, standalone=args.standalone or config.standalone, log_file=args.log_file
    )
