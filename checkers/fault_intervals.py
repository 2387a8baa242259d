"""Fault intervals: the nemesis events of a history paired into the spans a fault was in
force, from the event that started it to the one that healed it (`kill`, `power-loss`, and
`corrupt-file` or `truncate-file` that crashed the broker .. `start`; `pause` .. `resume`;
`start-X` .. `stop-X`), and the events that are instantaneous. A paused process that is
killed (or loses power, or is crashed to damage its files) is paused no more: that ends its
pause (a pause of several nodes, once every one of them is killed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NS_PER_S = 1_000_000_000
_PAIRED_STOPS = {
    "kill": "start",
    "power-loss": "start",
    "corrupt-file": "start",
    "truncate-file": "start",
    "pause": "resume",
}
"""Faults that last until a later event heals them, by that event."""
_ENDS_PAUSES = frozenset({"kill", "power-loss", "corrupt-file", "truncate-file"})


@dataclass(frozen=True)
class FaultInterval:
    """A fault from the event that started it to the one that healed it (None: never)."""

    fault: str
    start: int
    end: int | None
    start_index: int
    end_index: int | None
    value: Any


def _stop_of(f: str, value: Any = None) -> str | None:
    """The event that heals fault `f`, None when `f` lasts an instant (a file damaged under a
    running broker, `crash: false`, leaves nothing to heal)."""
    damaged_live = isinstance(value, dict) and value.get("crash") is False
    if f in ("corrupt-file", "truncate-file") and damaged_live:
        return None
    if f in _PAIRED_STOPS:
        return _PAIRED_STOPS[f]
    if f.startswith("start-"):
        return "stop-" + f[len("start-") :]
    return None


def _targets(value: Any) -> frozenset[str] | None:
    targets = value.get("targets") if isinstance(value, dict) else None
    return frozenset(map(str, targets)) if isinstance(targets, list) and targets else None


def _heals(heal: frozenset[str] | None, fault: frozenset[str] | None) -> bool:
    """Whether a heal on `heal` targets ends a fault on `fault` targets (None: all)."""
    return heal is None or fault is None or bool(heal & fault)


def fault_intervals(
    events: list[tuple[int, int, str, str | None]],
) -> tuple[list[FaultInterval], list[dict[str, Any]]]:
    """Pair nemesis events (index, time, f, value JSON) in time order into intervals.

    A start while the same kind is open on the same targets extends it; a stop closes the
    open intervals of its kind on the targets it names (all of them when it names none);
    another stop right after moves the end (Jepsen logs both the invocation and the
    completion of a fault). Events that are neither, or stops without a start, are
    instantaneous.
    """
    starts_of: dict[str, set[str]] = {}
    for _, _, f, _ in events:
        if (stop := _stop_of(f)) is not None:
            starts_of.setdefault(stop, set()).add(f)
    opened: list[FaultInterval] = []
    closed: list[FaultInterval] = []
    just_closed: dict[str, list[int]] = {}
    instants: list[dict[str, Any]] = []
    for index, time, f, value in sorted(events, key=lambda event: (event[1], event[0])):
        decoded = _decode(value)
        targets = _targets(decoded)
        if f in _ENDS_PAUSES and targets is not None and _stop_of(f, decoded) is not None:
            for interval in [o for o in opened if o.fault == "pause"]:
                paused = _targets(interval.value)
                if paused is not None and paused <= targets:
                    opened.remove(interval)
                    closed.append(
                        FaultInterval("pause", interval.start, time, interval.start_index, index,
                                      interval.value)
                    )  # fmt: skip
        stop = _stop_of(f, decoded)
        if stop is not None:
            if not any(o.fault == f and _targets(o.value) == targets for o in opened):
                opened.append(FaultInterval(f, time, None, index, None, decoded))
            just_closed.pop(stop, None)
            continue
        started = starts_of.get(f)
        if started is None:
            instants.append({"fault": f, "time_s": round(time / NS_PER_S, 3), "index": index,
                             "value": decoded})  # fmt: skip
            continue
        healed = [o for o in opened if o.fault in started and _heals(targets, _targets(o.value))]
        if healed:
            just_closed[f] = []
            for interval in healed:
                opened.remove(interval)
                closed.append(
                    FaultInterval(interval.fault, interval.start, time, interval.start_index,
                                  index, interval.value)
                )  # fmt: skip
                just_closed[f].append(len(closed) - 1)
        elif f in just_closed:
            for at in just_closed[f]:
                previous = closed[at]
                closed[at] = FaultInterval(
                    previous.fault, previous.start, time, previous.start_index, index,
                    previous.value,
                )  # fmt: skip
        else:
            instants.append({"fault": f, "time_s": round(time / NS_PER_S, 3), "index": index,
                             "value": decoded})  # fmt: skip
    closed.extend(opened)
    closed.sort(key=lambda interval: (interval.start, interval.start_index))
    return closed, instants


def _decode(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value
