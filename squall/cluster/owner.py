"""Who runs a cluster: the host, user and control process that brought it up.

Every cluster records its owner (in its state, and as a label on docker containers and
networks), so that the clean at the start of a run removes only what crashed runs left
behind, never another run in progress, another user's, or a ``squall cluster up`` that is
still in use. An owner is gone when it ran on this host and its process no longer exists
(a pid reused by another process does not count: the process start time must match); an
owner on another host is never judged gone from here. A cluster brought up by ``squall
cluster up`` is kept: its owner ends at once, but only an explicit ``squall clean`` (or
``squall cluster down``) removes it.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

_LABEL = re.compile(r"^(?P<user>[^@:]+)@(?P<host>[^@:]+):(?P<pid>\d+):(?P<started>\d+)$")


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True)
class Owner:
    """The control process of a run."""

    user: str
    host: str
    pid: int
    started: int

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(getpass.getuser(), socket.gethostname(), pid, _start_ticks(pid) or 0)

    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.pid}:{self.started}"

    @classmethod
    def parse(cls, label: str | None) -> Owner | None:
        """The owner a label names; None for a missing or malformed label."""
        match = _LABEL.match(label or "")
        if match is None:
            return None
        return cls(match["user"], match["host"], int(match["pid"]), int(match["started"]))

    def is_gone(self) -> bool:
        """Whether the owner's process has ended (only decidable on its own host)."""
        if self.host != socket.gethostname():
            return False
        return _start_ticks(self.pid) != self.started


KEPT = "kept:"
"""Prefix of the owner label of a cluster brought up by ``squall cluster up``: it stays up
after its control process ends, until ``squall cluster down`` or an explicit ``squall
clean``."""


def owner_label(*, kept: bool = False) -> str:
    """The label of the current process as a cluster's owner; ``kept`` for a cluster that
    outlives it (``squall cluster up``)."""
    label = Owner.current().label()
    return KEPT + label if kept else label


def is_leftover(label: str | None, *, kept_too: bool = False) -> bool:
    """Whether what carries this owner label was left by a run that ended: no owner recorded
    (an older squall), or an owner that is gone. A kept cluster (``squall cluster up``) is
    never a leftover to a run's start-up clean; with ``kept_too`` (an explicit ``squall
    clean``) it is one once the command that brought it up has ended."""
    if label is not None and label.startswith(KEPT):
        if not kept_too:
            return False
        label = label.removeprefix(KEPT)
    owner = Owner.parse(label)
    return owner is None or owner.is_gone()
