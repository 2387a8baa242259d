"""The control socket of a mounted filesystem: one JSON request per connection, one JSON
answer.

Requests: ``{"op": "status"}`` (the mount, the daemon's pid and what is unsynced),
``{"op": "drop"}`` (forget everything not fsynced; what was dropped). Answers carry
``"ok": true`` and the fields, or ``"ok": false`` and an ``"error"``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client side runs without mfusepy
    from .filesystem import LazyFilesystem

log = logging.getLogger("lazyfs")
MAX_REQUEST = 4096
SUN_PATH_MAX = 108
"""Bytes of an AF_UNIX address on Linux, its terminating NUL included."""


@contextlib.contextmanager
def addressable(path: str) -> Iterator[str]:
    """`path` as an AF_UNIX address: itself, or, where it is longer than the kernel takes
    (a deep SQUALL_HOME), the same file named through a descriptor of its directory."""
    if len(os.fsencode(path)) < SUN_PATH_MAX:
        yield path
        return
    directory = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{os.path.basename(path)}"
    finally:
        os.close(directory)


class ControlError(RuntimeError):
    """The control socket did not answer, or answered with an error."""


class ControlServer:
    """Serves the control socket of one mounted filesystem on a daemon thread."""

    def __init__(self, filesystem: LazyFilesystem, path: str, mountpoint: str) -> None:
        self.filesystem = filesystem
        self.path = path
        self.mountpoint = mountpoint
        if os.path.exists(path):
            os.unlink(path)  # a socket left by a daemon that died
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with addressable(path) as address:
            self._socket.bind(address)
        os.chmod(path, 0o600)
        self._socket.listen(8)

    def start(self) -> None:
        threading.Thread(target=self._serve, name="lazyfs-control", daemon=True).start()

    def _serve(self) -> None:
        while True:
            connection, _ = self._socket.accept()
            with connection:
                try:
                    answer = self.answer(_read_line(connection))
                except Exception as err:  # one bad request must not stop the control
                    log.exception("control request failed")
                    answer = {"ok": False, "error": f"{type(err).__name__}: {err}"}
                connection.sendall(json.dumps(answer).encode() + b"\n")

    def answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            op = request["op"]
        except (ValueError, KeyError, TypeError):
            return {"ok": False, "error": f"not a request: {line[:200]!r}"}
        if op == "status":
            unsynced = asdict(self.filesystem.unsynced())
            return {
                "ok": True,
                "pid": os.getpid(),
                "mountpoint": self.mountpoint,
                "backing": self.filesystem.backing,
                "unsynced": unsynced,
            }
        if op == "drop":
            return {"ok": True, "dropped": asdict(self.filesystem.drop())}
        return {"ok": False, "error": f"unknown op {op!r}; use status or drop"}

    def close(self) -> None:
        self._socket.close()
        if os.path.exists(self.path):
            os.unlink(self.path)


def _read_line(connection: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < MAX_REQUEST:
        chunk = connection.recv(MAX_REQUEST)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def request(path: str, op: str, *, timeout: float = 60.0) -> dict[str, Any]:
    """Send one request to the control socket at ``path``; the answer (``ok`` true)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            with addressable(path) as address:
                connection.connect(address)
            connection.sendall(json.dumps({"op": op}).encode() + b"\n")
            data = b""
            while chunk := connection.recv(65536):
                data += chunk
    except OSError as err:
        raise ControlError(
            f"the lazyfs control socket {path} does not answer ({err}); is the filesystem "
            "mounted and its daemon alive?"
        ) from None
    try:
        answer: dict[str, Any] = json.loads(data)
    except ValueError:
        raise ControlError(f"the lazyfs control socket {path} answered {data[:200]!r}") from None
    if not answer.get("ok"):
        raise ControlError(f"lazyfs {op}: {answer.get('error', answer)}")
    return answer
