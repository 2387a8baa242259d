"""What can go wrong with a fault: invalid data, unresolvable targets, failed application."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemesis.fault import Fault


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


class FaultApplicationError(NemesisError):
    """A fault was applied on some nodes and failed on others.

    ``applied`` is the resolved fault as far as it went, with an ``error`` entry in its value;
    record it in the history like any other nemesis operation, since some nodes may be hit.
    """

    def __init__(self, applied: Fault, failures: Mapping[str, BaseException]) -> None:
        lines = "; ".join(f"{node}: {err}" for node, err in sorted(failures.items()))
        super().__init__(f"{applied.f} failed on {len(failures)} node(s): {lines}")
        self.applied = applied
        self.failures = dict(failures)


class HealError(NemesisError):
    """Healing failed somewhere; every node was still tried. ``done`` holds what did work."""

    def __init__(self, failures: Sequence[str], done: Sequence[Fault]) -> None:
        listing = "\n  ".join(failures)
        super().__init__(
            f"healing failed in {len(failures)} place(s); the cluster may still be faulty "
            f"(run `squall clean` to tear it down):\n  {listing}"
        )
        self.failures = list(failures)
        self.done = list(done)
