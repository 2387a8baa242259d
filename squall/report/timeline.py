"""The timeline of a run, as Jepsen draws it: the faults in force on each node, the scenarios
they belonged to, and the SUT's leader elections, ISR changes, controller moves and
truncations, from the history's nemesis operations and SUT events (docs/history.md).

Pure data: `build_timeline` pairs the faults into intervals per node and places every event
on the lane of the node it concerns; `event_rows` describes each event for the report's
table. `squall.report.plots` draws the timeline. Events are taken as the history's JSON
objects, and any of an unexpected shape is skipped (plot) or shown as it is (table).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ZOOKEEPER = "zk1"

OPENS = {
    "kill": "start",
    "pause": "resume",
    "freeze": "unfreeze",
    "start-partition": "stop-partition",
    "start-netem": "stop-netem",
    "start-slow": "stop-slow",
}
"""A fault that opens an interval on its nodes, and the fault that closes it."""
CLOSES = {heal: fault for fault, heal in OPENS.items()}
ENDS = {"kill": ("pause",), "bounce": ("pause",)}
"""Faults that also end others on their nodes: a killed or restarted process is no longer
paused."""
CRASHES = frozenset({"corrupt-file", "truncate-file", "power-loss"})
"""Storage faults that crash the broker (marked where they strike) and leave it down until a
``start``, as a kill does: they open a ``kill`` interval on the nodes they crashed."""
FAULT_NAMES = {
    "kill": "killed",
    "pause": "paused",
    "freeze": "frozen",
    "start-partition": "partitioned",
    "start-netem": "netem",
    "start-slow": "slowed",
}
"""How a bar of each kind is named in the plot's legend."""

MARK_KINDS = (
    "election",
    "unclean-election",
    "offline",
    "isr-change",
    "controller",
    "truncation",
    "instant-fault",
    "acknowledged",
    "lost",
)


@dataclass(frozen=True, slots=True)
class FaultBar:
    """A fault in force on one node, in seconds since the history began (`end_s` None:
    never healed)."""

    node: str
    fault: str
    start_s: float
    end_s: float | None
    scenario: str | None = None


@dataclass(frozen=True, slots=True)
class Mark:
    """One event on one node's lane: `kind` is one of `MARK_KINDS`; `size` of a truncation:
    the records it removed. `acknowledged` and `lost` mark where a lost write was
    acknowledged and where its cause lost it (`squall.report.causes`)."""

    kind: str
    node: str
    time_s: float
    key: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class ScenarioSpan:
    """Consecutive nemesis operations of one scenario, from the first to the last."""

    name: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    """Everything the timeline plot draws."""

    nodes: tuple[str, ...]
    bars: tuple[FaultBar, ...]
    marks: tuple[Mark, ...]
    scenarios: tuple[ScenarioSpan, ...]
    end_s: float

    @property
    def keys(self) -> list[str]:
        """The keys of the marks, in natural order."""
        return sorted({m.key for m in self.marks if m.key is not None}, key=natural_key)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting numbers in numeric order: ``q-2`` before ``q-10``, ``n2`` before
    ``n10``."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part
    )


def lane_order(nodes: Iterable[str]) -> list[str]:
    """Brokers in natural order, then ZooKeeper and any other node."""
    return sorted(set(nodes), key=lambda n: (not re.fullmatch(r"n\d+", n), natural_key(n)))


def broker_node(broker: Any) -> str | None:
    """The node of a broker id (``2`` -> ``n2``); None for -1, null or anything else."""
    if isinstance(broker, int) and not isinstance(broker, bool) and broker >= 0:
        return f"n{broker}"
    return None


def nodes_of_test(test: Mapping[str, Any] | None) -> list[str]:
    """The nodes a test.json names: its nemesis' brokers, else n1..n<nodes>; and zk1."""
    if not isinstance(test, Mapping):
        return []
    nemesis = test.get("nemesis")
    brokers = nemesis.get("brokers") if isinstance(nemesis, Mapping) else None
    if isinstance(brokers, list) and all(isinstance(b, str) for b in brokers) and brokers:
        return [*brokers, ZOOKEEPER]
    count = test.get("nodes")
    if isinstance(count, int) and not isinstance(count, bool) and 0 < count <= 1000:
        return [*(f"n{i}" for i in range(1, count + 1)), ZOOKEEPER]
    return []


def _seconds(time: Any) -> float | None:
    if isinstance(time, int | float) and not isinstance(time, bool):
        seconds = time / 1e9
        if seconds == seconds and abs(seconds) != float("inf"):  # not NaN or infinite
            return float(seconds)
    return None


def _names(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def fault_nodes(f: str, value: Mapping[str, Any]) -> list[str]:
    """The nodes a nemesis operation hit: its targets, or for a partition without targets
    every node its grudge names; less the nodes whose part of it failed."""
    nodes = _names(value.get("targets"))
    grudge = value.get("grudge")
    if not nodes and f == "start-partition" and isinstance(grudge, Mapping):
        cut = {str(dst) for dst, srcs in grudge.items() if srcs}
        cut.update(s for srcs in grudge.values() for s in _names(srcs))
        nodes = lane_order(cut)
    error = value.get("error")
    if isinstance(error, Mapping):
        nodes = [n for n in nodes if n not in error]
    elif error:
        nodes = []  # one message: nothing of it was applied
    return nodes


def _crashed(f: str, value: Mapping[str, Any], hit: Sequence[str]) -> list[str]:
    """The nodes whose broker a storage fault crashed (``killed``; a power loss: every node
    it hit)."""
    killed = value.get("killed")
    if f == "power-loss" or not isinstance(killed, list):
        return list(hit) if f == "power-loss" else []
    return [node for node in killed if isinstance(node, str)]


def build_timeline(
    events: Iterable[Mapping[str, Any]],
    *,
    nodes: Sequence[str] = (),
    end_s: float = 0.0,
    anomalies: Sequence[Mark] = (),
) -> Timeline:
    """The timeline of a history's nemesis operations and SUT events (in history order).

    A fault opens an interval on each node it hit (`OPENS`), which the matching healing
    fault closes on the nodes it names, or on every node when it names none; a fault
    opened again on a node closes the earlier interval there (a partition: every node's,
    since a new grudge replaces the old), and a kill or bounce ends a pause (`ENDS`).
    `end_s` extends the axis; `anomalies` are marks of lost writes to draw too.
    """
    bars: list[FaultBar] = []
    marks: list[Mark] = []
    spans: list[ScenarioSpan] = []
    seen_nodes = set(nodes)
    open_: dict[tuple[str, str], tuple[float, str | None]] = {}  # (fault, node) -> start
    last = end_s

    def close(fault: str, nodes: Iterable[str] | None, time_s: float) -> None:
        """End the intervals of `fault` on `nodes` (None: on every node)."""
        for opened, node in [k for k in open_ if k[0] == fault]:
            if nodes is None or node in nodes:
                start, scenario = open_.pop((opened, node))
                bars.append(FaultBar(node, opened, start, time_s, scenario))

    for event in events:
        if not isinstance(event, Mapping):
            continue
        time_s = _seconds(event.get("time"))
        f = event.get("f")
        value = event.get("value")
        if time_s is None or not isinstance(f, str):
            continue
        last = max(last, time_s)
        value = value if isinstance(value, Mapping) else {}
        if event.get("process") == "nemesis":
            scenario = str(value["scenario"]) if value.get("scenario") else None
            if scenario is not None:
                if spans and spans[-1].name == scenario:
                    spans[-1] = ScenarioSpan(scenario, spans[-1].start_s, time_s)
                else:
                    spans.append(ScenarioSpan(scenario, time_s, time_s))
            hit = fault_nodes(f, value)
            seen_nodes.update(hit)
            for ended in ENDS.get(f, ()):
                close(ended, hit, time_s)
            if f in OPENS:
                # One grudge at a time: a new partition replaces the one in force.
                close(f, None if f == "start-partition" else hit, time_s)
                open_.update({(f, node): (time_s, scenario) for node in hit})
            elif f in CLOSES:
                close(CLOSES[f], set(hit) if "targets" in value else None, time_s)
            if f in CRASHES:
                down = _crashed(f, value, hit)
                close("pause", down, time_s)
                close("kill", down, time_s)
                open_.update({("kill", node): (time_s, scenario) for node in down})
            if f not in OPENS and f not in CLOSES:
                marks += [Mark("instant-fault", node, time_s) for node in hit]
        elif event.get("process") == "sut":
            mark = _sut_mark(f, value, time_s)
            if mark is not None:
                seen_nodes.add(mark.node)
                marks.append(mark)
    marks += anomalies
    seen_nodes.update(m.node for m in anomalies)
    bars += [FaultBar(node, f, start, None, sc) for (f, node), (start, sc) in open_.items()]
    bars.sort(key=lambda b: (b.start_s, natural_key(b.node)))
    return Timeline(tuple(lane_order(seen_nodes)), tuple(bars), tuple(marks), tuple(spans), last)


def _sut_mark(f: str, value: Mapping[str, Any], time_s: float) -> Mark | None:
    key = value.get("key")
    key = None if key is None else str(key)
    writer = broker_node(value.get("broker"))
    if f == "leader-election":
        leader = broker_node(value.get("leader"))
        if leader is None:  # offline: drawn where the leadership was lost
            node = broker_node(value.get("previous_leader")) or writer
            return None if node is None else Mark("offline", node, time_s, key)
        kind = "unclean-election" if value.get("unclean") is True else "election"
        return Mark(kind, leader, time_s, key)
    if f == "isr-change":
        node = broker_node(value.get("leader")) or writer
        return None if node is None else Mark("isr-change", node, time_s, key)
    if f == "controller-elected":
        node = broker_node(value.get("controller")) or writer
        return None if node is None else Mark("controller", node, time_s)
    if f == "truncation":
        start, end = value.get("from_offset"), value.get("to_offset")
        removed = None
        if isinstance(start, int) and isinstance(end, int) and _is_int(start) and _is_int(end):
            removed = start - end if start > end else None
        return None if writer is None else Mark("truncation", writer, time_s, key, removed)
    return None


def _is_int(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool)


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event as the report's table shows it (`time_s` None: the time is not a number,
    and `time` is shown as it is)."""

    time: Any
    source: str
    f: str
    nodes: str
    key: str
    detail: str


def _compact(value: Any, limit: int = 120) -> str:
    if isinstance(value, Mapping):
        text = ", ".join(f"{k}: {_compact(v, limit)}" for k, v in value.items())
    elif isinstance(value, list):
        text = "[" + ", ".join(_compact(v, limit) for v in value) + "]"
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _grudge(grudge: Any) -> str:
    if not isinstance(grudge, Mapping):
        return _compact(grudge)
    return "; ".join(f"{dst} drops {', '.join(_names(srcs))}" for dst, srcs in grudge.items())


def event_rows(events: Iterable[Mapping[str, Any]]) -> list[EventRow]:
    """Each nemesis operation and SUT event described in words (values of any shape)."""
    rows = []
    for event in events:
        if not isinstance(event, Mapping):
            continue
        f = str(event.get("f"))
        raw = event.get("value")
        value: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        source = str(event.get("process", ""))
        if source == "sut":
            nodes, key, detail = _sut_detail(f, value)
        else:
            nodes = ", ".join(fault_nodes(f, value)) if value else ""
            key, detail = "", _nemesis_detail(value, raw)
        rows.append(EventRow(event.get("time"), source, f, nodes, key, detail))
    return rows


def _nemesis_detail(value: Mapping[str, Any], raw: Any) -> str:
    if not value:
        return "" if raw is None else _compact(raw)
    parts = []
    for name in ("scenario", "shape", "among", "requested", "outcome", "error"):
        if value.get(name):
            parts.append(f"{name} {_compact(value[name])}")
    for name in ("grudge", "healed"):
        if value.get(name):
            parts.append(f"{name}: {_grudge(value[name])}")
    netem = [f"{k} {value[k]}" for k in ("delay_ms", "jitter_ms", "loss_pct") if k in value]
    if netem:
        parts.append(", ".join(netem))
    return "; ".join(parts)


def _sut_detail(f: str, value: Mapping[str, Any]) -> tuple[str, str, str]:
    key = "" if value.get("key") is None else str(value.get("key"))
    writer = broker_node(value.get("broker")) or ""
    if f == "leader-election":
        leader = broker_node(value.get("leader"))
        was = broker_node(value.get("previous_leader")) or "none"
        what = f"leader {leader}" if leader else "offline (no leader)"
        detail = (
            f"{what}, epoch {value.get('leader_epoch')}, was {was}; "
            f"ISR {_compact(value.get('isr'))}"
        )
        if value.get("unclean") is True:
            detail = "UNCLEAN: " + detail
        return leader or was, key, _with_reason(detail, value)
    if f == "isr-change":
        leader = broker_node(value.get("leader")) or writer
        detail = f"ISR {_compact(value.get('isr'))}, leader {leader}"
        return leader, key, _with_reason(detail, value)
    if f == "controller-elected":
        node = broker_node(value.get("controller")) or writer
        return node, "", f"controller {node}, epoch {value.get('controller_epoch')}"
    if f == "truncation":
        detail = f"log end {value.get('from_offset')} -> {value.get('to_offset')}"
        return writer, key, _with_reason(detail, value)
    return writer, key, _compact(dict(value))


def _with_reason(detail: str, value: Mapping[str, Any]) -> str:
    reason = value.get("reason")
    return f"{detail} ({reason})" if reason else detail
