"""Merging SUT events (elections, ISR changes from the brokers' event logs) into a history.

Events are placed by time: after every history operation at or before their time, before
the first one after it (histories are in time order: the writer's clock is monotonic).
History operations keep their order and events with equal times keep theirs; the result is
re-indexed densely from 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from histories.contract import SUT, show
from histories.errors import OperationError
from histories.operation import Operation, make_operation

_EVENT_FIELDS = frozenset({"time", "f", "process", "type", "index", "value", "node", "error"})


def sut_event(event: Operation | Mapping[str, Any]) -> Operation:
    """An event as an operation (index 0 until merged).

    A mapping needs `time` (ns since the test started) and `f` (`leader-election`,
    `isr-change`); the value is its `value`, or else every field that is not an operation
    field but `node` and `error` (`{"time": t, "f": "isr-change", "key": "t-0", "isr": [1, 2],
    "leader": 1}`). `process` defaults to "sut".
    """
    if isinstance(event, Operation):
        return event
    if not isinstance(event, Mapping):
        raise OperationError(f"event {show(event)} is neither an Operation nor a mapping")
    for name in ("time", "f"):
        if name not in event:
            raise OperationError(f"event {show(dict(event))} has no {name!r} field")
    if "value" in event:
        value = event["value"]
        fields = {k: v for k, v in event.items() if k not in _EVENT_FIELDS}
    else:
        value = {k: v for k, v in event.items() if k not in _EVENT_FIELDS}
        fields = {}
    fields.update((name, event[name]) for name in ("node", "error") if name in event)
    return make_operation(
        0,
        event["time"],
        event.get("process", SUT),
        event.get("type", "info"),
        event["f"],
        value,
        **fields,
    )


def iter_merged(
    history_ops: Iterable[Operation], events: Iterable[Operation | Mapping[str, Any]]
) -> Iterator[Operation]:
    """Stream the merge of a history (in its order) and events (sorted by time, stably)."""
    pending = sorted((sut_event(event) for event in events), key=lambda op: op.time)
    position = 0
    index = 0
    for op in history_ops:
        while position < len(pending) and pending[position].time < op.time:
            yield pending[position].with_index(index)
            index += 1
            position += 1
        yield op if op.index == index else op.with_index(index)
        index += 1
    for event in pending[position:]:
        yield event.with_index(index)
        index += 1


def merge_events(
    history_ops: Iterable[Operation], events: Iterable[Operation | Mapping[str, Any]]
) -> list[Operation]:
    """The history with the events placed by time, re-indexed densely from 0."""
    return list(iter_merged(history_ops, events))
