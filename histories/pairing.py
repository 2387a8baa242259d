"""Pairing invocations with their completions by process, as Jepsen does.

Each client process has at most one outstanding invocation; its next `ok`, `fail` or
`info` completes it. Nemesis and SUT operations are events, not invocations, and are not
paired.

squall's own histories retire a process after an `info` completion (the client goes on
under a new process number). Histories written by hand, as in Jepsen's own tests, are
accepted as Jepsen's checker accepts them, and what was accepted is counted (`Leniency`):

- a process that goes on after an `info` completion: its next invoke starts a new pair,
  completed by its next completion;
- a completion with no outstanding invoke: taken as invoked at its own index and time, so
  the completion is its own invoke (latency 0).

A second invoke while one is outstanding, and a completion whose f differs from its
invoke's, raise `PairingError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from histories.errors import PairingError
from histories.operation import Operation, Process

SHOWN = 5
"""How many positions of each leniency `Leniency` keeps (the first ones in the history)."""


class PendingInvoke(NamedTuple):
    """An invocation still waiting for its completion."""

    op_index: int
    time: int
    f: str


_new_pending = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path


@dataclass(frozen=True, slots=True)
class Leniency:
    """What pairing accepted beyond squall's own rules, as Jepsen accepts it.

    `after_info`: client operations of a process after its `info` completion;
    `uninvoked`: completions with no outstanding invoke. `*_first` hold the indices of the
    first `SHOWN` of each, in history order.
    """

    after_info: int = 0
    after_info_first: tuple[int, ...] = ()
    uninvoked: int = 0
    uninvoked_first: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.after_info or self.uninvoked)

    def notes(self, *, lines: bool) -> list[str]:
        """One sentence per leniency that occurred, for results.json; `lines`: say where as
        lines of a history file (index + 1), else as operation indices."""
        notes = []
        if self.after_info:
            where = _where(self.after_info, self.after_info_first, lines)
            whose = (
                "1 operation came from a process after its info completion"
                if self.after_info == 1
                else f"{self.after_info} operations came from processes after their info completion"
            )
            which = "the process" if self.after_info == 1 else "each process"
            notes.append(
                f"{whose} ({where}); {which} went on, its next completion pairing with its "
                "next invoke, as Jepsen does"
            )
        if self.uninvoked:
            whose = (
                "1 completion had no invoke"
                if self.uninvoked == 1
                else f"{self.uninvoked} completions had no invoke"
            )
            it = "it was" if self.uninvoked == 1 else "each was"
            notes.append(
                f"{whose} ({_where(self.uninvoked, self.uninvoked_first, lines)}); {it} taken "
                "as invoked at its own time, as Jepsen does"
            )
        return notes


def _where(count: int, first: tuple[int, ...], lines: bool) -> str:
    shown = ", ".join(str(index + 1 if lines else index) for index in first)
    if count > len(first):
        shown += f" and {count - len(first)} more"
    if lines:
        return f"line {shown}" if count == 1 else f"lines {shown}"
    return f"operation index {shown}" if count == 1 else f"operation indices {shown}"


class InvocationTracker:
    """Streaming pairing: feed operations in history order, learn each completion's invoke.

    Memory is bounded by the number of processes, so it serves histories of any length.
    With `strict`, the two leniencies raise `PairingError` instead (squall's own rules).
    """

    __slots__ = (
        "_after_info",
        "_after_info_first",
        "_informed",
        "_outstanding",
        "_strict",
        "_uninvoked",
        "_uninvoked_first",
    )

    def __init__(self, *, strict: bool = False) -> None:
        self._outstanding: dict[Process, PendingInvoke] = {}
        self._informed: dict[Process, int] = {}  # process: index of its first info completion
        self._strict = strict
        self._after_info = 0
        self._after_info_first: list[int] = []
        self._uninvoked = 0
        self._uninvoked_first: list[int] = []

    def observe(
        self, index: int, time: int, process: Process, op_type: str, f: str
    ) -> PendingInvoke | None:
        """Record one operation; for a client completion return the invoke it completes.

        A completion with no outstanding invoke completes itself: the invoke returned is
        at its own index and time. Raises `PairingError` for a second invoke while one is
        outstanding and a completion whose f differs from its invoke's.
        """
        if type(process) is not int:
            return None
        if process in self._informed:
            self._went_on(index, op_type, f, process)
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
            pending = self._without_invoke(index, time, process, op_type, f)
        elif pending.f != f:
            raise PairingError(
                f"operation {index} completes {f}, but the outstanding invoke of process "
                f"{process} at index {pending.op_index} is {pending.f}"
            )
        if op_type == "info" and process not in self._informed:
            self._informed[process] = index
        return pending

    def _went_on(self, index: int, op_type: str, f: str, process: int) -> None:
        if self._strict:
            raise PairingError(
                f"operation {index} ({op_type} {f}) belongs to process {process}, which was "
                f"retired by the info completion at index {self._informed[process]}; after an "
                "info a client must continue under a new process number"
            )
        self._after_info += 1
        if len(self._after_info_first) < SHOWN:
            self._after_info_first.append(index)

    def _without_invoke(
        self, index: int, time: int, process: int, op_type: str, f: str
    ) -> PendingInvoke:
        if self._strict:
            raise PairingError(
                f"operation {index} ({op_type} {f}) completes nothing: process {process} has "
                "no outstanding invoke"
            )
        self._uninvoked += 1
        if len(self._uninvoked_first) < SHOWN:
            self._uninvoked_first.append(index)
        return _new_pending(PendingInvoke, (index, time, f))

    def outstanding(self) -> dict[Process, PendingInvoke]:
        """The invocations that have not completed yet, by process."""
        return dict(self._outstanding)

    def leniency(self) -> Leniency:
        """What has been accepted so far beyond squall's own rules."""
        return Leniency(
            self._after_info,
            tuple(self._after_info_first),
            self._uninvoked,
            tuple(self._uninvoked_first),
        )


def pair_operations(
    ops: Iterable[Operation], *, strict: bool = False
) -> list[tuple[Operation, Operation | None]]:
    """Every client invocation with its completion (None if it never completed).

    Pairs are in invocation order; nemesis and SUT events are left out. A completion with
    no invoke is paired with itself, `(completion, completion)`, in its place. With
    `strict`, such a completion and any operation of a process after its `info` raise
    `PairingError` (squall's workload never writes them).
    """
    tracker = InvocationTracker(strict=strict)
    pairs: list[tuple[Operation, Operation | None]] = []
    slot_of_invoke: dict[int, int] = {}
    for op in ops:
        pending = tracker.observe(op.index, op.time, op.process, op.type, op.f)
        if op.type == "invoke" and op.is_client:
            slot_of_invoke[op.index] = len(pairs)
            pairs.append((op, None))
        elif pending is not None:
            if pending.op_index == op.index:
                pairs.append((op, op))
            else:
                slot = slot_of_invoke.pop(pending.op_index)
                pairs[slot] = (pairs[slot][0], op)
    return pairs
