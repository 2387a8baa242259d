"""The workload's consumer-group members by name, as the nemesis faults them
(``nemesis.protocols.GroupMembers``, which this implements without importing it).

Each member is a consumer worker's open client in a process of its own
(`workloads.member_process`), named after the worker (``consumer-0``...): a pause stops
that process, a kill crashes it (the worker notices, records the crash and opens a new
member), a leave asks the worker to close its member cleanly (a LeaveGroup) and retire it.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Protocol


class MemberHost(Protocol):
    """A consumer worker whose members run in processes of their own."""

    @property
    def name(self) -> str: ...

    def member_pid(self) -> int | None:
        """The pid of its open member's process; None when none is open."""
        ...

    def kill_member(self) -> bool:
        """SIGKILL its open member's process; True if one was running."""
        ...

    def leave(self, timeout_s: float) -> bool:
        """Have its open member leave the group cleanly; True if it did within
        ``timeout_s``."""
        ...


class GroupMembers:
    """The members of the workload's group, by their workers' names; thread-safe."""

    def __init__(self) -> None:
        self._hosts: dict[str, MemberHost] = {}
        self._paused: dict[str, int] = {}
        """Paused members and the pid paused (a later member of the same name is new)."""
        self._lock = threading.Lock()
        self._closed = False
        self._released: set[str] = set()
        """Members the workload resumed as it stopped, which a heal will ask to resume."""

    def start(self) -> None:
        """A run begins: no member yet, and members may be paused."""
        with self._lock:
            self._hosts, self._paused, self._closed = {}, {}, False
            self._released = set()

    def add(self, host: MemberHost) -> None:
        with self._lock:
            self._hosts[host.name] = host

    def running(self) -> list[str]:
        with self._lock:
            hosts = list(self._hosts.values())
        return sorted(host.name for host in hosts if host.member_pid() is not None)

    def pause(self, member: str) -> bool:
        with self._lock:
            host = None if self._closed else self._hosts.get(member)
            pid = None if host is None else host.member_pid()
            if pid is None or not _signal(pid, signal.SIGSTOP):
                return False
            self._paused[member] = pid
        return True

    def resume(self, member: str) -> bool:
        with self._lock:
            if member in self._released:  # resumed already, as the workload stopped
                self._released.discard(member)
                return True
            pid = self._paused.pop(member, None)
        return pid is not None and _signal(pid, signal.SIGCONT)

    def kill(self, member: str) -> bool:
        with self._lock:
            host = self._hosts.get(member)
            self._paused.pop(member, None)
        return host is not None and host.kill_member()

    def leave(self, member: str, *, timeout_s: float) -> bool:
        with self._lock:
            host = self._hosts.get(member)
            paused = member in self._paused
        if host is None or paused:  # a paused member cannot leave until it is resumed
            return False
        return host.leave(timeout_s)

    def close(self) -> list[str]:
        """The workload is stopping: resume every paused member and pause none from now
        on; the names of those resumed."""
        with self._lock:
            self._closed = True
            paused, self._paused = self._paused, {}
            self._released = set(paused)
        for pid in paused.values():
            _signal(pid, signal.SIGCONT)
        return sorted(paused)


def _signal(pid: int, signum: signal.Signals) -> bool:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True
