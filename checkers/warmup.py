"""A small history that exercises every checker, to warm a Spark Connect server.

`squall spark start` checks it a few times in the server's shared session before it
returns. A fresh JVM interprets Spark's planner and compiles each generated query on its
first run; a user's first checks would pay for both. Every check of a history runs the
same queries, so the warm-up's cover the user's. Standard library only.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

KEYS = tuple(f"w-{n}" for n in range(4))
PRODUCERS = (0, 1)
ASSIGNED, SUBSCRIBED, FINAL = 2, 3, 4
TEST_JSON = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"acks": -1},
}


class _Writer:
    """Lines of history.jsonl, indexed and timed in the order they are written."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def op(self, process: Any, kind: str, f: str, value: Any, **extra: Any) -> None:
        line: dict[str, Any] = {"index": len(self.lines), "time": 1_000_000 * (len(self.lines) + 1)}
        line |= {"process": process, "type": kind, "f": f, "value": value, **extra}
        self.lines.append(json.dumps(line, separators=(",", ":")))

    def pair(self, process: Any, f: str, invoked: Any, completed: Any, **extra: Any) -> None:
        self.op(process, "invoke", f, invoked, **extra)
        self.op(process, "ok", f, completed, **extra)


def write_warmup_history(directory: Path, sends: int = 120, seed: int = 7) -> Path:
    """A run directory in `directory` (history.jsonl and test.json) with sends, polls of
    an assigned and a subscribed consumer, commits, indeterminate and failed sends, a fault
    and an election; the directory's path."""
    rng = random.Random(seed)
    out = _Writer()
    logs: dict[str, list[int]] = {key: [] for key in KEYS}
    read_to = {process: dict.fromkeys(KEYS, 0) for process in (ASSIGNED, SUBSCRIBED)}
    out.pair(ASSIGNED, "assign", list(KEYS), list(KEYS))
    out.pair(SUBSCRIBED, "subscribe", list(KEYS[:2]), list(KEYS[:2]))
    out.op("nemesis", "info", "start-partition", {"n1": ["n2", "n3"]})
    for value in range(sends):
        key, process = KEYS[value % len(KEYS)], PRODUCERS[value % len(PRODUCERS)]
        out.op(process, "invoke", "send", [["send", key, value]])
        if rng.random() < 0.05:
            out.op(process, "fail", "send", [["send", key, value]], error="timeout")
            continue
        logs[key].append(value)
        outcome = "info" if rng.random() < 0.05 else "ok"
        if outcome == "info":
            out.op(process, "info", "send", [["send", key, value]], error="timeout")
        else:
            out.op(process, "ok", "send", [["send", key, [len(logs[key]) - 1, value]]])
        if value % 10 == 9:
            _poll(out, ASSIGNED, KEYS, logs, read_to)
            _poll(out, SUBSCRIBED, KEYS[:2], logs, read_to)
            committed = {key: read_to[SUBSCRIBED][key] for key in KEYS[:2]}
            out.pair(SUBSCRIBED, "commit", committed, committed)
        if value == sends // 2:
            out.op("nemesis", "info", "stop-partition", None)
            election = {"key": KEYS[0], "leader": 2, "leader_epoch": 1, "isr": [2, 3]}
            out.op("sut", "info", "leader-election", election | {"previous_leader": 1})
    out.pair(FINAL, "assign", list(KEYS), list(KEYS), final=True)
    final = {FINAL: dict.fromkeys(KEYS, 0)}
    _poll(out, FINAL, KEYS, logs, final, final=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "history.jsonl").write_text("\n".join(out.lines) + "\n")
    (directory / "test.json").write_text(json.dumps(TEST_JSON))
    return directory


def _poll(
    out: _Writer,
    process: int,
    keys: tuple[str, ...],
    logs: dict[str, list[int]],
    read_to: dict[int, dict[str, int]],
    **extra: Any,
) -> None:
    """An `ok` poll of `process` reading each of `keys` from where it last stopped."""
    records = {}
    for key in keys:
        start = read_to[process][key]
        records[key] = [[offset, logs[key][offset]] for offset in range(start, len(logs[key]))]
        read_to[process][key] = len(logs[key])
    out.pair(process, "poll", [["poll"]], [["poll", records]], **extra)
