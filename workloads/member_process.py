"""A consumer-group member in a process of its own, driven from the workload's process.

A member is its client library's consumer (squall's, librdkafka's, kafka-python's) opened in
a child process, and `MemberProcess` is the workload's side of it: a `GroupConsumer` whose
every call is carried over a pipe to the child and answered there. So a member can be
faulted as a whole, as a process of a real application is: SIGSTOP stops its polls and its
heartbeat threads alike (it sleeps past its session timeout and wakes up a zombie), SIGKILL
crashes it, and nothing of it survives in the workload's process.

A call to a member that died fails with `OperationError` (`member-crashed`, indeterminate:
a commit may have been sent); a call to a paused member waits until it is resumed or killed.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from workloads.client import OperationError, Record, TopicPartition

CRASHED = "member-crashed"
"""The code of the error a call to a member whose process died fails with."""
_CLOSE_TIMEOUT_S = 10.0


class MemberProcess:
    """A member of the group in a child process (see the module); thread-safe, one call at
    a time."""

    def __init__(
        self,
        name: str,
        *,
        client: str,
        bootstrap: str,
        settings: Mapping[str, object],
        client_id: str,
    ) -> None:
        """Start the child and open the member there; OperationError if it cannot be."""
        self.name = name
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=serve,
            args=(child, client, bootstrap, dict(settings), client_id, _log_files()),
            name=f"squall-{name}",
            daemon=True,
        )
        self._lock = threading.Lock()
        self._dead = False
        self._process.start()
        child.close()
        try:
            self._call("open")
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def dead(self) -> bool:
        """Whether the member's process died (killed, or it crashed)."""
        return self._dead or not self._process.is_alive()

    def signal(self, signum: signal.Signals) -> bool:
        """Send the member's process a signal; False if it is not running."""
        pid = self._process.pid
        if pid is None or self.dead:
            return False
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> bool:
        """SIGKILL the member's process, as a crash; True if it was running."""
        killed = self.signal(signal.SIGKILL)
        self._process.join(_CLOSE_TIMEOUT_S)
        self._dead = True
        return killed

    # --- the GroupConsumer protocol --------------------------------------------------------

    def subscribe(self, topic: str) -> None:
        self._call("subscribe", topic)

    def assignment(self) -> list[TopicPartition]:
        return list(self._call("assignment"))

    def assignments(self) -> int:
        return int(self._call("assignments"))

    def generation(self) -> int:
        return int(self._call("generation"))

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._call("assign", list(partitions))

    def position(self, tp: TopicPartition) -> int:
        return int(self._call("position", tp))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call("seek", tp, offset)

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self._call("seek_to_beginning", tp)

    def poll(self, timeout_ms: int) -> Sequence[Record]:
        return list(self._call("poll", timeout_ms))

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._call("commit", dict(offsets))

    def close(self) -> None:
        """Close the member (it leaves its group) and let its process end; a dead or stuck
        one is killed."""
        if not self.dead:
            with contextlib.suppress(OperationError):
                self._call("close")
        self._process.join(_CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            self.kill()
        self._dead = True
        self._conn.close()

    def _call(self, method: str, *args: Any) -> Any:
        with self._lock:
            if self._dead:
                raise OperationError(CRASHED, f"member {self.name}'s process is gone")
            try:
                self._conn.send((method, args))
                reply = self._conn.recv()
            except (EOFError, OSError) as err:
                self._dead = True
                self._process.join(1.0)
                raise OperationError(
                    CRASHED,
                    f"member {self.name}'s process died during {method} "
                    f"(exit code {self._process.exitcode}; {type(err).__name__})",
                ) from None
        kind = reply[0]
        if kind == "ok":
            return reply[1]
        if kind == "operation-error":
            _, code, message, definite, committed = reply
            raise OperationError(code, message, definite=definite, committed=committed)
        _, type_name, message = reply
        raise RuntimeError(f"member {self.name}: {method} raised {type_name}: {message}")


def _log_files() -> list[str]:
    """The files the workload's process logs to (a run's run.log): its members log there
    too."""
    return [
        handler.baseFilename
        for handler in logging.getLogger().handlers
        if isinstance(handler, logging.FileHandler)
    ]


def _log_to(files: Sequence[str], name: str) -> None:
    """The child's records go to the workload's log files (INFO and above of the client
    packages, as the workload's own), else nowhere: never to the terminal."""
    root = logging.getLogger()
    root.addHandler(logging.NullHandler())
    for path in files:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setLevel(logging.INFO)
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)s %(name)s [{name}]: %(message)s")
        )
        root.addHandler(handler)
    for package in ("workloads", "system_under_test"):
        logging.getLogger(package).setLevel(logging.INFO)


def serve(
    conn: Connection,
    client: str,
    bootstrap: str,
    settings: dict[str, object],
    client_id: str,
    log_files: Sequence[str] = (),
) -> None:
    """The child's loop: open the member at the first call, then answer calls until closed
    or the pipe ends."""
    from workloads.clients import client_factory

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the workload's to handle
    _log_to(log_files, client_id)
    member: Any = None
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        try:
            if method == "open":
                member = client_factory(client).group_consumer(
                    bootstrap, settings=settings, client_id=client_id
                )
                result: Any = None
            else:
                result = getattr(member, method)(*args)
            reply: tuple[Any, ...] = ("ok", result)
        except OperationError as err:
            reply = ("operation-error", err.code, str(err), err.definite, err.committed)
        except Exception as err:
            reply = ("error", type(err).__name__, str(err))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            break
        if method == "close":
            break
    conn.close()
