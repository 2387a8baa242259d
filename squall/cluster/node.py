"""A node of the cluster under test: somewhere to run commands, keep files and run daemons.

Runtimes provide nodes: ``LocalNode`` (processes on this machine), ``SshNode`` (a container
or a real host reached over SSH with paramiko, as Jepsen's control node does). Everything
above this layer (the services, and the nemesis through ``nemesis.protocols``) speaks only
this protocol, so the same test drives containers, remote hosts and local processes.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from nemesis.errors import ClusterError

DEFAULT_TIMEOUT_S = 60.0
Command = str | Sequence[str]


class NodeError(ClusterError):
    """A node could not be reached or used."""


class CommandFailed(NodeError):
    """A command exited non-zero (with ``check=True``)."""

    def __init__(self, node: str, command: str, exit_code: int, output: str) -> None:
        tail = "\n".join(output.splitlines()[-15:])
        super().__init__(f"{node}: `{command}` exited with {exit_code}:\n{tail}")
        self.node = node
        self.command = command
        self.exit_code = exit_code
        self.output = output


class CommandTimedOut(CommandFailed):
    """A command ran past its deadline and was killed."""


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its exit code and its stdout and stderr, interleaved."""

    command: str
    exit_code: int
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def render(command: Command) -> str:
    """A command as one shell string (argument lists are quoted)."""
    return command if isinstance(command, str) else shlex.join(command)


@dataclass(frozen=True)
class DaemonSpec:
    """A long-running process on a node: how to start it and where its files live."""

    name: str
    command: Sequence[str]
    pidfile: str
    logfile: str
    env: Mapping[str, str] | None = None
    cwd: str | None = None


@runtime_checkable
class Node(Protocol):
    """What every runtime's node can do."""

    @property
    def name(self) -> str:
        """The node's name in the cluster: ``n1``, ``n2``..., ``zk1``."""
        ...

    @property
    def address(self) -> str:
        """The address other nodes and the control machine use to reach it."""
        ...

    def run(
        self, command: Command, *, timeout: float = DEFAULT_TIMEOUT_S, check: bool = True
    ) -> CommandResult:
        """Run a shell command, killed after ``timeout`` seconds; stdout and stderr merged."""
        ...

    def upload(self, local: Path, remote: str) -> None:
        """Copy a file or a directory tree to ``remote`` on the node."""
        ...

    def download(self, remote: str, local: Path) -> None:
        """Copy a file or a directory tree from the node; missing remote paths are skipped."""
        ...

    def start_daemon(self, spec: DaemonSpec) -> int:
        """Start a process detached from the session, record its pid in the pidfile; the pid."""
        ...

    def signal_daemon(self, pidfile: str, signal_name: str) -> bool:
        """Send KILL, TERM, STOP or CONT to the pidfile's process; False if it was not running."""
        ...

    def daemon_running(self, pidfile: str) -> bool:
        """Whether the pidfile's process exists (a stopped process counts as running)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
