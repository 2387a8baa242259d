"""Pairing invocations with their completions by process, as Jepsen does.

Each client process has at most one outstanding invocation; its next `ok`, `fail` or
`info` completes it. After an `info` the process is retired: its outcome is unknown, so
it may never invoke again (the workload continues under a new process number). Nemesis
and SUT operations are events, not invocations, and are not paired.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from histories.errors import PairingError
from histories.operation import Operation, Process


class PendingInvoke(NamedTuple):
    """An invocation still waiting for its completion."""

    op_index: int
    time: int
    f: str


_new_pending = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path


class InvocationTracker:
    """Streaming pairing: feed operations in history order, learn each completion's invoke.

    Memory is bounded by the number of processes, so it serves histories of any length.
    """

    __slots__ = ("_outstanding", "_retired")

    def __init__(self) -> None:
        self._outstanding: dict[Process, PendingInvoke] = {}
        self._retired: dict[Process, int] = {}

    def observe(
        self, index: int, time: int, process: Process, op_type: str, f: str
    ) -> PendingInvoke | None:
        """Record one operation; for a client completion return the invoke it completes.

        Raises `PairingError` for a completion without an invoke, a second invoke while one
        is outstanding, a completion whose f differs from its invoke's, and any operation
        of a process retired by an `info`.
        """
        if type(process) is not int:
            return None
        if process in self._retired:
            retired_at = self._retired[process]
            raise PairingError(
                f"operation {index} ({op_type} {f}) belongs to process {process}, which was "
                f"retired by the info completion at index {retired_at}; after an info a "
                "client must continue under a new process number"
            )
        if op_type == "invoke":
            pending = self._outstanding.get(process)
            if pending is not None:
                raise PairingError(
                    f"operation {index}: process {process} invokes {f} while its {pending.f} "
                    f"invoke at index {pending.op_index} is still outstanding; a process has at "
                    "most one operation in flight"
                )
            self._outstanding[process] = _new_pending(PendingInvoke, (index, time, f))
            return None
        pending = self._outstanding.pop(process, None)
        if pending is None:
            raise PairingError(
                f"operation {index} ({op_type} {f}) completes nothing: process {process} has "
                "no outstanding invoke"
            )
        if pending.f != f:
            raise PairingError(
                f"operation {index} completes {f}, but the outstanding invoke of process "
                f"{process} at index {pending.op_index} is {pending.f}"
            )
        if op_type == "info":
            self._retired[process] = index
        return pending

    def outstanding(self) -> dict[Process, PendingInvoke]:
        """The invocations that have not completed yet, by process."""
        return dict(self._outstanding)


def pair_operations(
    ops: Iterable[Operation],
) -> list[tuple[Operation, Operation | None]]:
    """Every client invocation with its completion (None if it never completed).

    Pairs are in invocation order; nemesis and SUT events are left out.
    """
    tracker = InvocationTracker()
    pairs: list[tuple[Operation, Operation | None]] = []
    slot_of_invoke: dict[int, int] = {}
    for op in ops:
        pending = tracker.observe(op.index, op.time, op.process, op.type, op.f)
        if op.type == "invoke" and op.is_client:
            slot_of_invoke[op.index] = len(pairs)
            pairs.append((op, None))
        elif pending is not None:
            slot = slot_of_invoke.pop(pending.op_index)
            pairs[slot] = (pairs[slot][0], op)
    return pairs
