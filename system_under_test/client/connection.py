"""A blocking connection to one broker: one request, then its response."""

from __future__ import annotations

import contextlib
import errno
import itertools
import socket
import threading
from collections.abc import Sequence
from typing import TypeVar

from system_under_test import protocol
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ClientConfigError,
    ConnectionLostError,
    CorruptResponseError,
    RequestTimeoutError,
)
from system_under_test.errors import BrokerError, ProtocolError

MAX_RESPONSE_BYTES = 1 << 30
"""A response frame claiming more than this is treated as garbage."""

Address = tuple[str, int]
_R = TypeVar("_R", bound=protocol.Response)


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

    def request(
        self, request: protocol.Request, response_type: type[_R], *, timeout_s: float
    ) -> _R:
        """Send request and wait for its response.

        Raises BrokerError for a broker's ErrorResponse, RequestTimeoutError,
        ConnectionLostError or CorruptResponseError; on the last three the connection is closed.
        """
        with self._lock:
            sock = self._require_open()
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            frame = protocol.encode_request(
                request, correlation_id=correlation_id, client_id=self.client_id
            )
            self._send(sock, frame, timeout_s)
            payload = self._receive(sock, timeout_s)
        try:
            got_id, body = protocol.decode_response(payload, response_type)
        except ProtocolError as err:
            self.close()
            raise CorruptResponseError(
                f"{self}: undecodable {response_type.__name__}: {err}"
            ) from None
        if got_id != correlation_id:
            self.close()
            raise CorruptResponseError(
                f"{self}: response for request {got_id}, expected {correlation_id}"
            )
        if isinstance(body, protocol.ErrorResponse):
            raise BrokerError.for_code(body.error_code, body.error_message)
        return body

    def send_only(self, request: protocol.Request, *, timeout_s: float) -> None:
        """Send a request that gets no response (a produce with acks=0)."""
        with self._lock:
            sock = self._require_open()
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            frame = protocol.encode_request(
                request, correlation_id=correlation_id, client_id=self.client_id
            )
            self._send(sock, frame, timeout_s)

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

    def _send(self, sock: socket.socket, frame: bytearray, timeout_s: float) -> None:
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
            head = _recv_exactly(sock, 4)
            (size,) = protocol.FRAME_SIZE.unpack(head)
            protocol.check_frame_size(size, MAX_RESPONSE_BYTES)
            return _recv_exactly(sock, size)
        except TimeoutError:
            self.close()
            raise RequestTimeoutError(f"{self}: no response within {timeout_s:g} s") from None
        except ProtocolError as err:
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
