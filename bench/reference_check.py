"""The reference for the checker's speed: a single-threaded, in-memory Python check.

A straightforward checker of the anomalies that bench/check_scale.py injects, as one would
write it without Spark: read history.jsonl line by line into dicts per key, then walk each
key (docs/anomalies.md's definitions, on dense indexes). It is what squall's Spark check
must beat on one machine (issue 34: at least 3x on a 3M-line history over ~1,700 keys);
it handles only what the synthetic histories hold (no txn, no power losses, one consumer
group, acks=-1 under a configuration that promises no loss). Prints one JSON document:
the seconds it took and the anomalies it found, per type.

    .venv/bin/python bench/reference_check.py /tmp/squall-check-scale-3000000-jepsen-1700
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Found = dict[str, set[tuple[Any, ...]]]


@dataclass
class KeyHistory:
    """One key's evidence, in history order."""

    # (op index, process, type, final, [(offset, value), ...]) per completed poll
    polls: list[tuple[int, Any, str, bool, list[tuple[int, Any]]]] = field(default_factory=list)
    # (op index, process, type, value, offset or None, invoke index) per send micro-op
    sends: list[tuple[int, Any, str, Any, int | None, int]] = field(default_factory=list)
    # (op index, process, offset) per ok commit of the group
    commits: list[tuple[int, Any, int]] = field(default_factory=list)
    unclean: list[tuple[int, int]] = field(default_factory=list)  # (line index, time)


@dataclass
class History:
    keys: dict[str, KeyHistory] = field(default_factory=lambda: defaultdict(KeyHistory))
    # (op index, process, keys) per ok/info assign or subscribe
    assignments: list[tuple[int, Any, frozenset[str]]] = field(default_factory=list)
    members: set[Any] = field(default_factory=set)
    send_times: dict[int, int] = field(default_factory=dict)  # completion index -> time


def read_history(path: Path) -> History:
    """Pair each completion with its process's invoke and file its micro-ops by key."""
    history = History()
    invoked: dict[Any, dict[str, Any]] = {}
    with path.open() as lines:
        for line in lines:
            op = json.loads(line)
            process, kind, f = op["process"], op["type"], op["f"]
            if process == "sut":
                value = op["value"]
                if f == "leader-election" and value.get("unclean"):
                    history.keys[value["key"]].unclean.append((op["index"], op["time"]))
                continue
            if process == "nemesis":
                continue
            if kind == "invoke":
                invoked[process] = op
                continue
            invoke = invoked.pop(process, op)
            index = op["index"]
            if f == "send":
                for mop in op["value"] if kind == "ok" else invoke["value"]:
                    _, key, written = mop
                    offset, value = written if isinstance(written, list) else (None, written)
                    history.keys[key].sends.append(
                        (index, process, kind, value, offset, invoke["index"])
                    )
                history.send_times[index] = op["time"]
            elif f == "poll":
                for _, read in op["value"]:
                    for key, records in read.items():
                        history.keys[key].polls.append(
                            (
                                index,
                                process,
                                kind,
                                bool(op.get("final")),
                                [tuple(r) for r in records],
                            )
                        )
            elif f in ("assign", "subscribe") and kind in ("ok", "info"):
                history.assignments.append((index, process, frozenset(op["value"])))
                if f == "subscribe" and kind == "ok":
                    history.members.add(process)
            elif f == "commit" and kind == "ok":
                history.members.add(process)
                for key, offset in op["value"].items():
                    history.keys[key].commits.append((index, process, offset))
    for process, op in invoked.items():  # never completed: indeterminate
        if op["f"] == "send":
            for _, key, value in op["value"]:
                history.keys[key].sends.append(
                    (op["index"], process, "info", value, None, op["index"])
                )
    return history


def check_key(key: str, log: KeyHistory, history: History, found: Found) -> None:
    """Every anomaly of one key into `found`."""
    ok_read: set[Any] = set()
    contents: set[tuple[int, Any]] = set()
    highest_ok: int | None = None
    final_read: set[Any] = set()
    for _, _, kind, final, records in log.polls:
        contents.update(records)
        if kind == "ok":
            ok_read.update(value for _, value in records)
            if records:
                top = max(offset for offset, _ in records)
                highest_ok = top if highest_ok is None else max(highest_ok, top)
            if final:
                final_read.update(value for _, value in records)
    read_ops = {invoke for _, _, _, value, _, invoke in log.sends if value in ok_read}
    committed = [
        send for send in log.sends if send[2] == "ok" or (send[2] == "info" and send[5] in read_ops)
    ]
    contents.update(
        (offset, value) for _, _, _, value, offset, _ in committed if offset is not None
    )
    offsets = sorted({offset for offset, _ in contents})
    dense = {offset: i for i, offset in enumerate(offsets)}
    values_at: dict[int, set[Any]] = defaultdict(set)
    offsets_of: dict[Any, set[int]] = defaultdict(set)
    for offset, value in contents:
        values_at[offset].add(value)
        offsets_of[value].add(offset)
    for offset, values in values_at.items():
        if len(values) > 1:
            found["inconsistent-offsets"].add((key, offset))
    for value, held in offsets_of.items():
        if len(held) > 1:
            found["duplicate"].add((key, value))
    failed = {send[3] for send in log.sends if send[2] == "fail"}
    for value in failed & ok_read:
        found["G1a"].add((key, value))
    reached = dense[highest_ok] if highest_ok is not None else -1
    for _, _, kind, value, _, _ in committed:
        if value in ok_read:
            continue
        if kind == "ok":
            found["unseen"].add((key, value))
        last = max(offsets_of[value], default=None)
        if last is not None and dense[last] <= reached:
            found["lost-write"].add((key, value))
    for index, _, kind, value, at, _ in log.sends:
        if kind == "ok" and at is not None and value not in final_read:
            found["lost-acked-write"].add((key, value))
            # The unclean election after its acknowledgement opened its loss window.
            done = history.send_times[index]
            after = [election for election, when in log.unclean if when >= done]
            if after:
                found["unclean-loss-window"].add((key, after[0]))
    _check_order(key, log, history, dense, offsets_of, found)
    _check_group(key, log, history, ok_read, found)


def _check_order(
    key: str,
    log: KeyHistory,
    history: History,
    dense: dict[int, int],
    offsets_of: dict[Any, set[int]],
    found: Found,
) -> None:
    """poll-skip, nonmonotonic-poll, nonmonotonic-send and their in-operation forms."""
    events: list[tuple[int, int, Any, Any]] = [
        (index, 0, process, keys) for index, process, keys in history.assignments
    ]
    events += [(poll[0], 1, poll[1], poll) for poll in log.polls]
    by_op: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for send in log.sends:
        if send[2] in ("ok", "info"):
            by_op[send[0]].append(send)
    events += [(index, 2, sends[0][1], sends) for index, sends in by_op.items()]
    read_end: dict[Any, int] = {}
    sent_end: dict[Any, int] = {}
    for index, what, process, item in sorted(events, key=lambda e: (e[0], e[1])):
        if what == 0:
            if key not in item:
                read_end.pop(process, None)
                sent_end.pop(process, None)
            continue
        if what == 1:
            _, _, kind, _, records = item
            positions = [dense[offset] for offset, _ in records]
            base = "poll"
        else:
            positions = [
                dense[min(offsets_of[value])] for _, _, _, value, _, _ in item if offsets_of[value]
            ]
            kind, base = item[0][2], "send"
        if not positions:
            continue
        for a, b in itertools.pairwise(positions):
            if b > a + 1:
                found[f"int-{base}-skip"].add((index, key))
            elif b <= a:
                found[f"int-nonmonotonic-{base}"].add((index, key))
        ends = read_end if what == 1 else sent_end
        previous = ends.get(process)
        if previous is not None:
            if what == 1 and positions[0] > previous + 1:
                found["poll-skip"].add((process, key, index))
            elif positions[0] <= previous:
                found[f"nonmonotonic-{base}"].add((process, key, index))
        if kind == "ok" or what == 2:
            ends[process] = positions[-1]


def _check_group(
    key: str, log: KeyHistory, history: History, ok_read: set[Any], found: Found
) -> None:
    """at-least-once-violation: an acknowledged value below a committed offset that no
    member of the group read."""
    if not log.commits:
        return
    consumed = {
        value
        for _, process, kind, _, records in log.polls
        if kind == "ok" and process in history.members
        for _, value in records
    }
    committed = max(offset for _, _, offset in log.commits)
    for _, _, kind, value, offset, _ in log.sends:
        if kind == "ok" and offset is not None and offset < committed and value not in consumed:
            found["at-least-once-violation"].add((key, value))


def check(run: Path) -> Found:
    """Every anomaly of the history of `run` (a directory with history.jsonl)."""
    history = read_history(run / "history.jsonl")
    found: Found = defaultdict(set)
    for key, log in history.keys.items():
        check_key(key, log, history, found)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a directory with history.jsonl")
    args = parser.parse_args()
    started = time.perf_counter()
    found = check(args.run)
    figures = {
        "seconds": round(time.perf_counter() - started, 2),
        "counts": {kind: len(items) for kind, items in sorted(found.items())},
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
