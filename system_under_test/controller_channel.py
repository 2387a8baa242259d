"""How the controller reaches brokers: a queue and a sender thread per broker.

As in Kafka's ControllerChannelManager, one slow or unreachable broker never holds up the
controller or the other brokers: requests to it wait in its own queue, are retried with a
backoff while it stays registered, and are dropped once it has been unreachable for longer
than ``give_up_s`` (it gets the full state again when it registers anew).
"""

from __future__ import annotations

import itertools
import logging
import queue
import socket
import threading
import time
from typing import TypeVar

from system_under_test import protocol
from system_under_test.controller import PartitionLeaderState
from system_under_test.errors import ErrorCode, ProtocolError
from system_under_test.metadata_cache import BrokerEndpoint

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.2
_R = TypeVar("_R", bound=protocol.Response)


def _state_data(p: PartitionLeaderState) -> protocol.PartitionLeaderStateData:
    return protocol.PartitionLeaderStateData(
        p.topic,
        p.partition,
        p.state.controller_epoch,
        p.state.leader,
        p.state.leader_epoch,
        list(p.state.isr),
        p.zk_version,
        list(p.replicas),
        list(p.state.elr),
    )


def _live(brokers: list[BrokerEndpoint]) -> list[protocol.LiveBroker]:
    return [protocol.LiveBroker(b.broker_id, b.host, b.port) for b in brokers]


class _BrokerSender:
    """Sends one broker's requests in order, on its own thread."""

    def __init__(
        self, controller_id: int, endpoint: BrokerEndpoint, *, timeout_s: float, give_up_s: float
    ) -> None:
        self.controller_id = controller_id
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self.queue: queue.Queue[protocol.Request | None] = queue.Queue()
        self._socket: socket.socket | None = None
        self._correlation = itertools.count(1)
        self._thread = threading.Thread(
            target=self._run, name=f"controller-to-broker-{endpoint.broker_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.queue.put(None)

    def _run(self) -> None:
        while True:
            request = self.queue.get()
            if request is None:
                self._close()
                return
            self._deliver(request)

    def _deliver(self, request: protocol.Request) -> None:
        started = time.monotonic()
        while True:
            try:
                self._send(request)
                return
            except (OSError, ProtocolError) as err:
                self._close()
                if time.monotonic() - started > self.give_up_s:
                    log.warning(
                        "controller %d: giving up %s to broker %d at %s:%d after %.0fs: %s",
                        self.controller_id,
                        type(request).__name__,
                        self.endpoint.broker_id,
                        self.endpoint.host,
                        self.endpoint.port,
                        self.give_up_s,
                        err,
                    )
                    return
                time.sleep(RETRY_BACKOFF_S)

    def _send(self, request: protocol.Request) -> None:
        if self._socket is None:
            self._socket = socket.create_connection(
                (self.endpoint.host, self.endpoint.port), timeout=self.timeout_s
            )
            self._socket.settimeout(self.timeout_s)
        correlation_id = next(self._correlation)
        frame = protocol.encode_request(
            request, correlation_id=correlation_id, client_id=f"controller-{self.controller_id}"
        )
        self._socket.sendall(frame)
        size = protocol.FRAME_SIZE.unpack(_read_exactly(self._socket, 4))[0]
        payload = _read_exactly(self._socket, size)
        got, body = protocol.decode_response(payload, _RESPONSES[type(request)])
        if got != correlation_id:
            raise ProtocolError(f"correlation id {got}, expected {correlation_id}")
        code = getattr(body, "error_code", ErrorCode.NONE)
        if code != ErrorCode.NONE:
            log.warning(
                "broker %d answered %s with %s",
                self.endpoint.broker_id,
                type(request).__name__,
                ErrorCode.from_wire(code).name,
            )

    def _close(self) -> None:
        if self._socket is not None:
            try:
                self._socket.close()
            finally:
                self._socket = None


def request_once(
    endpoint: BrokerEndpoint,
    request: protocol.Request,
    expected: type[_R],
    *,
    client_id: str,
    timeout_s: float,
) -> _R:
    """One request to a broker on a connection of its own, and its answer; OSError when it
    cannot be reached, ProtocolError when it answers something else."""
    with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s) as conn:
        conn.settimeout(timeout_s)
        conn.sendall(protocol.encode_request(request, correlation_id=1, client_id=client_id))
        size = protocol.FRAME_SIZE.unpack(_read_exactly(conn, 4))[0]
        got, body = protocol.decode_response(_read_exactly(conn, size), expected)
    if got != 1:
        raise ProtocolError(f"correlation id {got}, expected 1")
    if isinstance(body, protocol.ErrorResponse):
        raise ProtocolError(
            f"broker {endpoint.broker_id} refused {type(request).__name__}: "
            f"{ErrorCode.from_wire(body.error_code).name} {body.error_message or ''}"
        )
    return body


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


_RESPONSES: dict[type[protocol.Request], type[protocol.Response]] = {
    protocol.LeaderAndIsrRequest: protocol.LeaderAndIsrResponse,
    protocol.UpdateMetadataRequest: protocol.UpdateMetadataResponse,
}


class BrokerRequestChannel:
    """The controller's ControllerChannel over the broker protocol."""

    def __init__(
        self, controller_id: int, *, timeout_s: float = 10.0, give_up_s: float = 30.0
    ) -> None:
        self.controller_id = controller_id
        self.timeout_s = timeout_s
        self.give_up_s = give_up_s
        self._senders: dict[int, _BrokerSender] = {}
        self._lock = threading.Lock()

    def _sender(self, endpoint: BrokerEndpoint) -> _BrokerSender:
        with self._lock:
            sender = self._senders.get(endpoint.broker_id)
            if sender is not None and sender.endpoint != endpoint:
                sender.stop()
                sender = None
            if sender is None:
                sender = _BrokerSender(
                    self.controller_id, endpoint, timeout_s=self.timeout_s, give_up_s=self.give_up_s
                )
                self._senders[endpoint.broker_id] = sender
            return sender

    def send_leader_and_isr(
        self,
        broker: BrokerEndpoint,
        controller_id: int,
        controller_epoch: int,
        partitions: list[PartitionLeaderState],
        live_brokers: list[BrokerEndpoint],
        broker_epoch: int,
    ) -> None:
        """`broker_epoch`: the addressee's registration as the controller knows it, so that a
        broker that restarted since (and may have lost what it held) refuses orders meant for
        its previous run (KIP-380)."""
        request = protocol.LeaderAndIsrRequest(
            controller_id,
            controller_epoch,
            [_state_data(p) for p in partitions],
            _live(live_brokers),
            broker_epoch,
        )
        self._sender(broker).queue.put(request)

    def send_update_metadata(
        self,
        broker: BrokerEndpoint,
        controller_id: int,
        controller_epoch: int,
        partitions: list[PartitionLeaderState],
        live_brokers: list[BrokerEndpoint],
    ) -> None:
        request = protocol.UpdateMetadataRequest(
            controller_id,
            controller_epoch,
            [_state_data(p) for p in partitions],
            _live(live_brokers),
        )
        self._sender(broker).queue.put(request)

    def close(self) -> None:
        with self._lock:
            for sender in self._senders.values():
                sender.stop()
            self._senders.clear()
