"""What can go wrong before or around a fault: invalid data, an unsupported kind, a failing
node, unresolvable targets. The failures that carry faults half done are in
``nemesis.partial_failures``."""

from __future__ import annotations


class NemesisError(RuntimeError):
    """Base of every error raised by the nemesis package."""


class FaultError(NemesisError, ValueError):
    """A fault (or a schedule, or a spec) is malformed: fix the data it names."""


class UnsupportedFaultError(NemesisError):
    """The cluster's runtime cannot apply a kind of fault (e.g. partitions on local processes)."""


class ClusterError(RuntimeError):
    """A node or a daemon of the cluster failed.

    Implementations of ``nemesis.protocols`` raise subclasses of it (a node that cannot be
    reached, a command that failed, a daemon that did not start), so that the nemesis can
    record the failure and go on healing without knowing the runtime.
    """


class NodeCommandError(ClusterError):
    """A command the nemesis ran on a node exited non-zero."""

    def __init__(self, node: str, command: str, exit_code: int, output: str) -> None:
        tail = "\n".join(output.splitlines()[-15:])
        super().__init__(f"{node}: `{command}` exited with {exit_code}:\n{tail}")
        self.node = node
        self.command = command
        self.exit_code = exit_code
        self.output = output


class TargetError(NemesisError):
    """A target could not be resolved against the live cluster right now (e.g. no leader)."""
