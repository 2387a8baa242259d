"""A blocking connection to one broker: one request, then its response."""

from __future__ import annotations

import contextlib
import errno
import itertools
import socket
import threading
from collections.abc import Sequence
from typing import TypeVar

from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ClientConfigError,
    ConnectionLostError,
    CorruptResponseError,
    RequestTimeoutError,
)
from system_under_test.errors import KafkaCodecError
from system_under_test.kafka import framing
from system_under_test.kafka.api_keys import ApiKey
from system_under_test.kafka.schema import Body

MAX_RESPONSE_BYTES = 1 << 30
"""A response frame claiming more than this is treated as garbage."""

REQUEST_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 7,
    ApiKey.FETCH: 11,
    ApiKey.LIST_OFFSETS: 5,
    ApiKey.METADATA: 8,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 5,
    ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.OFFSET_COMMIT: 7,
    ApiKey.OFFSET_FETCH: 5,
}
"""The version of each API the client sends: the newest non-flexible one, which every
Kafka from 2.3 to 4.0 serves, as our brokers do (PROTOCOL.md)."""

Address = tuple[str, int]
_R = TypeVar("_R", bound=Body)


def encode_request(body: Body, correlation_id: int, client_id: str) -> bytes:
    """A whole request frame for `body` at the client's version of its API."""
    return framing.encode_request(body, REQUEST_VERSIONS[body.API_KEY], correlation_id, client_id)


def decode_response(payload: bytes | bytearray, response_type: type[_R]) -> tuple[int, _R]:
    """The correlation id and body of a response frame's payload (KafkaCodecError if it is
    not a `response_type` at the client's version)."""
    api_key = response_type.API_KEY
    correlation_id, body = framing.decode_response(payload, api_key, REQUEST_VERSIONS[api_key])
    if not isinstance(body, response_type):
        raise KafkaCodecError(f"expected a {response_type.__name__}", "response")
    return correlation_id, body


def response_size(prefix: bytes | bytearray) -> int:
    """The payload size a response frame's 4-byte prefix announces (KafkaCodecError if it is
    negative or over MAX_RESPONSE_BYTES)."""
    return framing.frame_size(prefix, MAX_RESPONSE_BYTES)


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[Address]:
    """``host:port[,host:port...]`` (or a list of them) to addresses."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out: list[Address] = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        host, sep, port_text = text.rpartition(":")
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ClientConfigError(
                f"bootstrap address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9092"
            )
        out.append((host.strip("[]"), int(port_text)))
    if not out:
        raise ClientConfigError(
            f"bootstrap {bootstrap!r} names no broker; expected HOST:PORT[,HOST:PORT]"
        )
    return out


def connect(address: Address, timeout_s: float) -> socket.socket:
    """A connected TCP socket with Nagle off; BrokerUnavailableError with a clear reason."""
    host, port = address
    try:
        sock = socket.create_connection(address, timeout=timeout_s)
    except OSError as err:
        raise BrokerUnavailableError(
            f"cannot connect to broker {host}:{port}: {describe_socket_error(err)}; "
            "is a broker running there?"
        ) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def describe_socket_error(err: OSError) -> str:
    """'connection refused', 'timed out', ... for an OSError from a socket call."""
    if isinstance(err, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(err, socket.gaierror):
        return f"cannot resolve host ({err.strerror})"
    if err.errno == errno.ECONNREFUSED:
        return "connection refused"
    return (err.strerror or str(err)).lower()


class BrokerConnection:
    """One TCP connection to a broker, used by one request at a time (thread-safe)."""

    def __init__(
        self,
        address: Address,
        *,
        client_id: str,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.address = address
        self.client_id = client_id
        self._sock: socket.socket | None = connect(address, connect_timeout_s)
        self._lock = threading.Lock()
        self._correlation = itertools.count(1)

    @property
    def closed(self) -> bool:
        return self._sock is None

    @property
    def busy(self) -> bool:
        """Whether a request is waiting for its response on this connection now."""
        return self._lock.locked()

    def __repr__(self) -> str:
        return f"BrokerConnection({self.address[0]}:{self.address[1]})"

    def request(self, request: Body, response_type: type[_R], *, timeout_s: float) -> _R:
        """Send request and wait for its response.

        Raises RequestTimeoutError, ConnectionLostError or CorruptResponseError, closing the
        connection. Errors the broker answers are in the response, as Kafka puts them.
        """
        with self._lock:
            sock = self._require_open()
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            frame = encode_request(request, correlation_id, self.client_id)
            self._send(sock, frame, timeout_s)
            payload = self._receive(sock, timeout_s)
        try:
            got_id, body = decode_response(payload, response_type)
        except KafkaCodecError as err:
            self.close()
            raise CorruptResponseError(
                f"{self}: undecodable {response_type.__name__}: {err}"
            ) from None
        if got_id != correlation_id:
            self.close()
            raise CorruptResponseError(
                f"{self}: response for request {got_id}, expected {correlation_id}"
            )
        return body

    def send_only(self, request: Body, *, timeout_s: float) -> None:
        """Send a request that gets no response (a produce with acks=0)."""
        with self._lock:
            sock = self._require_open()
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            self._send(sock, encode_request(request, correlation_id, self.client_id), timeout_s)

    def close(self) -> None:
        """Close the connection; a request waiting on it (in another thread) ends at once."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _require_open(self) -> socket.socket:
        if self._sock is None:
            raise ConnectionLostError(f"{self} is closed", request_sent=False)
        return self._sock

    def _send(self, sock: socket.socket, frame: bytes, timeout_s: float) -> None:
        try:
            sock.settimeout(timeout_s)
            sock.sendall(frame)
        except OSError as err:
            # A frame the broker did not receive whole is never processed.
            self.close()
            raise ConnectionLostError(
                f"{self}: sending failed ({describe_socket_error(err)})", request_sent=False
            ) from None

    def _receive(self, sock: socket.socket, timeout_s: float) -> bytearray:
        try:
            sock.settimeout(timeout_s)
            size = response_size(_recv_exactly(sock, 4))
            return _recv_exactly(sock, size)
        except TimeoutError:
            self.close()
            raise RequestTimeoutError(f"{self}: no response within {timeout_s:g} s") from None
        except KafkaCodecError as err:
            self.close()
            raise CorruptResponseError(f"{self}: {err}") from None
        except OSError as err:
            self.close()
            raise ConnectionLostError(
                f"{self}: connection lost while waiting for a response ({describe_socket_error(err)})",
                request_sent=True,
            ) from None


def _recv_exactly(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionResetError(errno.ECONNRESET, "closed by the broker")
        got += n
    return buf
