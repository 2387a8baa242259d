"""OperationRecorder: client calls become invoke/complete pairs in the history.

It owns the two rules of a Jepsen history's clients: a process has at most one operation
in flight, and after an `info` completion the process is retired, so the client's next
operation uses a fresh process number. It also owns the value shapes of docs/history.md (the
Jepsen Kafka queue workload's): a send is ``[["send", key, value]]`` on invocation and
``[["send", key, [offset, value]]]`` when acknowledged, a poll ``[["poll"]]`` and then
``[["poll", {key: [[offset, value], ...]}]]``, a commit ``{key: next_offset}``, an assign
or subscribe the list of keys, a crash ``None``. Whether an error is `fail` or `info` is
decided by `workloads.outcomes`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from histories import Operation
from workloads.client import OperationError, Record, SendResult
from workloads.counters import WorkloadCounters
from workloads.errors import ClientBusyError
from workloads.outcomes import (
    ErrorOutcome,
    assign_outcome,
    commit_outcome,
    describe_error,
    poll_outcome,
    send_outcome,
)
from workloads.spec import key_name
from workloads.values import NumberSequence, decode_value

T = TypeVar("T")
PollValue = dict[str, list[list[int | str]]]


class HistorySink(Protocol):
    """Where operations go: `histories.HistoryWriter`, or a stand-in in benchmarks."""

    def invoke(self, process: int, f: str, value: Any, **fields: Any) -> Operation: ...

    def complete(
        self, invocation: Operation, op_type: str, value: Any, **fields: Any
    ) -> Operation: ...


class ProcessNumbers(NumberSequence):
    """Client process numbers 0, 1, 2, ...: each handed out once, to one logical client."""

    __slots__ = ()


class Client:
    """One logical client: the process number it acts under now, which changes on retirement."""

    __slots__ = ("_numbers", "pending", "process")

    def __init__(self, numbers: ProcessNumbers) -> None:
        self._numbers = numbers
        self.process = numbers.next()
        self.pending: PendingOp | None = None

    def retire(self) -> None:
        """Continue under a new process number (after an `info`, as Jepsen does)."""
        self.process = self._numbers.next()


class PendingOp:
    """An invocation waiting for its completion."""

    __slots__ = ("client", "completed", "invocation")

    def __init__(self, client: Client, invocation: Operation) -> None:
        self.client = client
        self.invocation = invocation
        self.completed = False


class OperationRecorder:
    """Writes client operations to a history sink with correct process numbering.

    `final=True` marks every operation as part of the final read. Completion is
    at-most-once per invocation: `abandon_outstanding` completes whatever is still in flight
    as `info`, and a late completion of an abandoned operation is dropped.
    """

    def __init__(
        self,
        sink: HistorySink,
        *,
        numbers: ProcessNumbers | None = None,
        counters: WorkloadCounters | None = None,
        final: bool = False,
    ) -> None:
        self.sink = sink
        self.numbers = numbers if numbers is not None else ProcessNumbers()
        self.counters = counters
        self._final_fields: dict[str, Any] = {"final": True} if final else {}
        self._lock = threading.Lock()
        self._outstanding: dict[int, PendingOp] = {}

    def new_client(self) -> Client:
        return Client(self.numbers)

    # --- the generic pair --------------------------------------------------------------

    def invoke(self, client: Client, f: str, value: Any, **fields: Any) -> PendingOp:
        """Write the invocation of `f` by `client`; ClientBusyError if one is in flight."""
        if client.pending is not None:
            raise ClientBusyError(
                f"process {client.process} invoked {f} while its {client.pending.invocation.f} "
                "is in flight; a client has one operation at a time (use more clients)"
            )
        if self._final_fields:
            fields = {**self._final_fields, **fields}
        invocation = self.sink.invoke(client.process, f, value, **fields)
        pending = PendingOp(client, invocation)
        client.pending = pending
        with self._lock:
            self._outstanding[id(pending)] = pending
        if self.counters is not None:
            self.counters.invoked(f)
        return pending

    def complete(
        self, pending: PendingOp, op_type: str, value: Any, **fields: Any
    ) -> Operation | None:
        """Write the completion of `pending`; after `info` the client is retired.

        Returns None, writing nothing, if `pending` was completed already (abandoned).
        """
        with self._lock:
            if pending.completed:
                return None
            pending.completed = True
            del self._outstanding[id(pending)]
        client = pending.client
        try:
            op = self.sink.complete(pending.invocation, op_type, value, **fields)
        finally:
            client.pending = None
            if op_type == "info":
                client.retire()
        if self.counters is not None:
            self.counters.completed(pending.invocation.f, op_type)
        return op

    def complete_error(
        self, pending: PendingOp, outcome: ErrorOutcome, value: Any
    ) -> Operation | None:
        return self.complete(pending, outcome.type, value, error=outcome.error)

    def outstanding(self) -> list[PendingOp]:
        with self._lock:
            return list(self._outstanding.values())

    def abandon_outstanding(self, reason: str) -> int:
        """Complete every operation still in flight as `info` with `reason`; how many."""
        count = 0
        for pending in self.outstanding():
            if self.complete(pending, "info", pending.invocation.value, error=reason) is not None:
                count += 1
        return count

    # --- sends -------------------------------------------------------------------------

    def invoke_send(
        self, client: Client, key: str, value: int, *, acks: int, node: str | None = None
    ) -> PendingOp:
        fields: dict[str, Any] = {"acks": acks, "key": key}
        if node is not None:
            fields["node"] = node
        return self.invoke(client, "send", [["send", key, value]], **fields)

    def complete_send(
        self, pending: PendingOp, outcome: SendResult | BaseException
    ) -> Operation | None:
        """Complete a send: ok with its offset (none for acks=0), else per the error."""
        _, key, value = pending.invocation.value[0]
        if isinstance(outcome, BaseException):
            return self.complete_error(pending, send_outcome(outcome), pending.invocation.value)
        if outcome.offset is not None:
            return self.complete(pending, "ok", [["send", key, [outcome.offset, value]]])
        return self.complete(pending, "ok", [["send", key, value]])

    # --- polls -------------------------------------------------------------------------

    def invoke_poll(self, client: Client) -> PendingOp:
        return self.invoke(client, "poll", [["poll"]])

    def complete_poll(
        self, pending: PendingOp, outcome: Sequence[Record] | BaseException
    ) -> Operation | None:
        """Complete a poll: ok with the records read, by key, else fail (see outcomes)."""
        if isinstance(outcome, BaseException):
            return self.complete_error(pending, poll_outcome(outcome), [["poll"]])
        return self.complete(pending, "ok", [["poll", poll_value(outcome)]])

    # --- commits, assignment, crashes ----------------------------------------------------

    def record_commit(
        self,
        client: Client,
        offsets: Mapping[str, int],
        commit: Callable[[], object],
        **fields: Any,
    ) -> Operation | None:
        """Invoke a commit of `offsets` ({key: next offset}), run it, complete it; `fields`
        (a group member's `generation`) go on both."""
        value = dict(offsets)
        pending = self.invoke(client, "commit", value, **fields)
        try:
            commit()
        except Exception as err:
            outcome = commit_outcome(err)
            extra: dict[str, Any] = dict(fields)
            if isinstance(err, OperationError) and err.committed:
                extra["committed"] = {key_name(t, p): o for (t, p), o in err.committed.items()}
            return self.complete(pending, outcome.type, value, error=outcome.error, **extra)
        return self.complete(pending, "ok", value, **fields)

    def record_assign(
        self,
        client: Client,
        f: str,
        keys: Iterable[str],
        action: Callable[[], T],
        *,
        ok_fields: Callable[[Any], Mapping[str, Any]] | None = None,
    ) -> tuple[Operation | None, T | None]:
        """Invoke an assign or subscribe of `keys`, run `action`; its result, or None if it
        failed. `ok_fields` gives extra fields of the `ok` completion from the result."""
        value = list(keys)
        pending = self.invoke(client, f, value)
        try:
            result = action()
        except Exception as err:
            return self.complete_error(pending, assign_outcome(err), value), None
        fields = dict(ok_fields(result)) if ok_fields is not None else {}
        return self.complete(pending, "ok", value, **fields), result

    def record_crash(self, client: Client, discard: Callable[[], object]) -> Operation | None:
        """Invoke a crash, throw the client away with `discard`, complete it as info."""
        pending = self.invoke(client, "crash", None)
        error: dict[str, str] = {}
        try:
            discard()
        except Exception as err:
            error["error"] = describe_error(err)
        return self.complete(pending, "info", None, **error)


def poll_value(records: Iterable[Record]) -> PollValue:
    """``{key: [[offset, value], ...]}`` for the records of one poll, in the order read."""
    out: PollValue = {}
    for record in records:
        key = key_name(record.topic, record.partition)
        found = out.get(key)
        if found is None:
            found = out[key] = []
        found.append([record.offset, decode_value(record.value)])
    return out
