"""Checker scale: a synthetic history with known anomalies, through Parquet to results.json.

Generates a Kafka-workload history of N lines (16 keys; 8 producers; assign-mode consumers
on keys 0-11; a two-member consumer group on keys 12-15 with commits and rebalances;
nemesis partitions; a final read; `--shape jepsen --keys K`: Jepsen's shape, the assign
consumers' keys rotating through K keys and sends of one to four keys an operation), written as JSON lines directly (fast), with a few
anomalies of every type injected at known places. The generator keeps the ground truth,
including the anomalies an injection causes as a side effect (a lost record makes every
reader that crosses its offset skip an index). Then it times each stage with `local[2]`:
Spark start, history.jsonl -> history.parquet (the bulk converter; `--loader exact`: the
line-by-line one), checking; reports peak memory (this process, the JVM and its Python
workers, from /proc) and precision/recall
per anomaly type against the truth, and the check's time per line and per key (so that
both growths show). `--reference` times bench/reference_check.py, a single-threaded
in-memory Python check, on the same history and scores it too. Prints one JSON document.

    .venv/bin/python bench/check_scale.py --lines 1000000 [--loader auto|exact] [--dir /tmp]
    .venv/bin/python bench/check_scale.py --lines 3000000 --shape jepsen --keys 1700 --reference

`--keep` keeps the run directory (history.jsonl, truth.json, history.parquet/); `--reuse`
checks a kept run again, converting it anew (or not, with `--reuse-parquet`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from checkers import CheckConfig, check_history

SHAPES = ("squall", "jepsen")
"""`squall`: squall's own runs (16 keys for the whole history, one send a produce
operation). `jepsen`: Jepsen's Kafka workload (keys rotate: the assign consumers move to
fresh keys in fours through the history, and a produce operation sends to one to four
keys)."""
HOLE = None
TEST_JSON = {
    "topic": {"replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"acks": -1},
}
Truth = dict[str, set[tuple[Any, ...]]]


class SyntheticHistory:
    """Writes a history line by line and remembers every anomaly it makes."""

    def __init__(
        self, path: Path, lines: int, seed: int, *, keys: int = 16, shape: str = "squall"
    ) -> None:
        if keys < 16 or (shape == "squall" and keys != 16):
            raise ValueError(f"keys: {keys}; the squall shape has 16, the jepsen shape 16 or more")
        self.rng = random.Random(seed)
        self.shape = shape
        names = [f"t-{i}" for i in range(keys)]
        # The group's keys are the last four; the assign consumers' keys the rest, the first
        # twelve active from the start, the others taken in fours as keys rotate.
        self.group_keys = names[-4:]
        self.fresh_keys = names[12:-4]
        self.assign_keys = names[:12]
        self.out = open(path, "w", buffering=1 << 20)  # noqa: SIM115
        self.target = lines
        self.index = 0
        self.time = 0
        self.value = 0
        self.next_process = 0
        self.log: dict[str, list[int | None]] = {k: [] for k in names}
        self.truth: Truth = defaultdict(set)
        # Generic trackers, so that side effects are in the truth too.
        self.last_read_end: dict[tuple[int, str], int] = {}
        self.last_send: dict[tuple[int, str], int | None] = {}
        self.producers = [self.new_process() for _ in range(8)]
        self.consumers: list[tuple[int, list[str]]] = []
        self.position: dict[tuple[int, str], int] = {}
        self.group: dict[int, list[str]] = {}
        self.committed: dict[str, int] = {k: 0 for k in self.group_keys}
        self.elections = 0
        self.rotations = 0

    # -- writing ---------------------------------------------------------------------
    def new_process(self) -> int:
        self.next_process += 1
        return self.next_process

    def line(self, process: int | str, op_type: str, f: str, value: str, extra: str = "") -> int:
        self.time += self.rng.randrange(200_000, 2_000_000)
        proc = process if isinstance(process, int) else f'"{process}"'
        self.out.write(
            f'{{"index":{self.index},"time":{self.time},"process":{proc},"type":"{op_type}",'
            f'"f":"{f}","value":{value}{extra}}}\n'
        )
        self.index += 1
        return self.index - 1

    def op(
        self, process: int, f: str, invoke: str, op_type: str, done: str, extra: str = ""
    ) -> int:
        self.line(process, "invoke", f, invoke, extra)
        return self.line(process, op_type, f, done, extra)

    def fresh_value(self) -> int:
        self.value += 1
        return self.value

    # -- sends -----------------------------------------------------------------------
    def append(self, key: str, value: int | None) -> int:
        self.log[key].append(value)
        return len(self.log[key]) - 1

    def note_send(self, process: int, key: str, position: int | None, op: int) -> None:
        """Generic nonmonotonic-send truth: a send at or before the process's previous one."""
        previous = self.last_send.get((process, key))
        if previous is not None and position is not None and position <= previous:
            self.truth["nonmonotonic-send"].add((process, key, op))
        self.last_send[(process, key)] = position

    def send(self, process: int, key: str, *, result: str = "ok", in_log: bool = True) -> int:
        value = self.fresh_value()
        offset = self.append(key, value) if in_log else None
        invoke = f'[["send","{key}",{value}]]'
        done = f'[["send","{key}",[{offset},{value}]]]' if result == "ok" else invoke
        op = self.op(process, "send", invoke, result, done)
        if result in ("ok", "info"):
            self.note_send(process, key, offset, op)
        return value

    def send_many(self, process: int, keys: list[str]) -> None:
        """One operation that sends a value to each of `keys`, acknowledged."""
        sent = [(key, self.fresh_value()) for key in keys]
        located = [(key, self.append(key, value), value) for key, value in sent]
        invoke = ",".join(f'["send","{key}",{value}]' for key, value in sent)
        done = ",".join(f'["send","{key}",[{offset},{value}]]' for key, offset, value in located)
        op = self.op(process, "send", f"[{invoke}]", "ok", f"[{done}]")
        for key, offset, _ in located:
            self.note_send(process, key, offset, op)

    def rotate(self) -> None:
        """Jepsen's keys rotate: the next assign consumer (in turn) moves to fresh keys, and
        producers send to them from now on; the old keys are written no more."""
        if not self.fresh_keys:
            return
        slot = self.rotations % len(self.consumers)
        self.rotations += 1
        process, old = self.consumers[slot]
        new, self.fresh_keys = self.fresh_keys[:4], self.fresh_keys[4:]
        text = ",".join(f'"{k}"' for k in new)
        self.op(process, "assign", f"[{text}]", "ok", f"[{text}]")
        for key in old:
            self.last_read_end.pop((process, key), None)
        for key in new:
            self.position[(process, key)] = 0
        self.consumers[slot] = (process, new)
        self.assign_keys = [k for k in self.assign_keys if k not in old] + new

    def produce(self) -> None:
        slot = self.rng.randrange(len(self.producers))
        process = self.producers[slot]
        key = self.rng.choice([*self.assign_keys, *self.group_keys])
        roll = self.rng.random()
        if self.shape == "jepsen" and roll >= 0.02:
            self.send_many(
                process,
                self.rng.sample([*self.assign_keys, *self.group_keys], self.rng.randrange(1, 5)),
            )
        elif roll < 0.01:
            self.send(process, key, result="fail", in_log=False)
        elif roll < 0.02:
            self.send(process, key, result="info", in_log=self.rng.random() < 0.5)
            self.producers[slot] = self.new_process()
        else:
            self.send(process, key)

    # -- polls -----------------------------------------------------------------------
    def read(self, key: str, start: int, count: int) -> tuple[list[tuple[int, int]], int]:
        """Up to `count` records from offset `start`, skipping holes; and the next offset."""
        log = self.log[key]
        records: list[tuple[int, int]] = []
        offset = start
        while offset < len(log) and len(records) < count:
            item = log[offset]
            if item is not HOLE:
                records.append((offset, item))
            offset += 1
        return records, offset

    def emit_poll(
        self,
        process: int,
        results: dict[str, list[tuple[int, int]]],
        *,
        op_type: str = "ok",
        final: bool = False,
    ) -> int:
        body = ",".join(
            f'"{k}":[' + ",".join(f"[{o},{v}]" for o, v in recs) + "]"
            for k, recs in results.items()
        )
        extra = ',"final":true' if final else ""
        op = self.op(process, "poll", '[["poll"]]', op_type, f'[["poll",{{{body}}}]]', extra)
        for key, records in results.items():
            self.note_reads(process, key, records, op, ok=op_type == "ok")
        return op

    def note_reads(
        self, process: int, key: str, records: list[tuple[int, int]], op: int, *, ok: bool
    ) -> None:
        """Generic truth for poll ordering: every offset below the log end has evidence."""
        if not records:
            return
        for (a, _), (b, _) in itertools.pairwise(records):
            if b > a + 1:
                self.truth["int-poll-skip"].add((op, key))
            elif b <= a:
                self.truth["int-nonmonotonic-poll"].add((op, key))
        previous = self.last_read_end.get((process, key))
        if previous is not None:
            first = records[0][0]
            if first > previous + 1:
                self.truth["poll-skip"].add((process, key, op))
            elif first <= previous:
                self.truth["nonmonotonic-poll"].add((process, key, op))
        if ok:
            self.last_read_end[(process, key)] = records[-1][0]

    def add_consumer(self, keys: list[str]) -> int:
        process = self.new_process()
        text = ",".join(f'"{k}"' for k in keys)
        self.op(process, "assign", f"[{text}]", "ok", f"[{text}]")
        for key in keys:
            self.position.setdefault((process, key), 0)
        self.consumers.append((process, keys))
        return process

    def consume(self, slot: int | None = None) -> None:
        if slot is None:
            slot = self.rng.randrange(len(self.consumers))
        process, keys = self.consumers[slot]
        results = {}
        for key in keys:
            records, after = self.read(key, self.position[(process, key)], self.rng.randrange(1, 6))
            results[key] = records
            self.position[(process, key)] = after
        if self.rng.random() < 0.002:
            self.emit_poll(process, results, op_type="info")
            replacement = self.new_process()
            text = ",".join(f'"{k}"' for k in keys)
            self.op(replacement, "assign", f"[{text}]", "ok", f"[{text}]")
            for key in keys:
                self.position[(replacement, key)] = self.position[(process, key)]
            self.consumers[slot] = (replacement, keys)
        else:
            self.emit_poll(process, results)

    # -- the consumer group ---------------------------------------------------------
    def subscribe(self, process: int, keys: list[str]) -> None:
        text = ",".join(f'"{k}"' for k in keys)
        self.op(process, "subscribe", f"[{text}]", "ok", f"[{text}]")
        for key in self.group.get(process, []):
            if key not in keys:
                self.last_read_end.pop((process, key), None)
        for key in keys:
            if key not in self.group.get(process, []):
                self.position[(process, key)] = self.committed[key]
        self.group[process] = keys

    def commit(self, process: int, offsets: dict[str, int]) -> None:
        text = ",".join(f'"{k}":{o}' for k, o in offsets.items())
        self.op(process, "commit", f"{{{text}}}", "ok", f"{{{text}}}")
        self.committed.update(offsets)

    def group_poll(self) -> None:
        process = self.rng.choice(list(self.group))
        keys = self.group[process]
        if not keys:
            return
        results = {}
        for key in keys:
            records, after = self.read(key, self.position[(process, key)], self.rng.randrange(1, 6))
            results[key] = records
            self.position[(process, key)] = after
        self.emit_poll(process, results)
        self.commit(process, {k: self.position[(process, k)] for k in keys})

    def rebalance(self, *, commit_ahead: bool = False) -> None:
        """Move one key from one member to the other (the new owner starts at the commit)."""
        giver, taker = sorted(self.group, key=lambda p: -len(self.group[p]))[:2]
        if not self.group[giver]:
            return
        key = self.rng.choice(self.group[giver])
        position = self.position[(giver, key)]
        if commit_ahead:
            self.send(self.producers[0], key)
            records, _ = self.read(key, position, 1)
            if not records:
                return
            offset, value = records[0]
            self.commit(giver, {key: offset + 1})
            self.truth["at-least-once-violation"].add((key, value))
        self.subscribe(giver, [k for k in self.group[giver] if k != key])
        self.subscribe(taker, [*self.group[taker], key])

    # -- injections -----------------------------------------------------------------
    def inject(self, kind: str) -> None:
        getattr(self, "inject_" + kind.replace("-", "_"))()

    def quiet_key(self) -> str:
        return self.rng.choice(self.assign_keys)

    def inject_inconsistent_offsets(self) -> None:
        key = self.quiet_key()
        readable = [o for o, v in enumerate(self.log[key]) if v is not HOLE]
        if not readable:
            return
        offset = readable[-1]
        process = self.new_process()
        self.emit_poll(process, {key: [(offset, self.fresh_value())]}, op_type="info")
        self.truth["inconsistent-offsets"].add((key, offset))

    def inject_duplicate(self) -> None:
        key = self.quiet_key()
        value = self.send(self.producers[0], key)
        self.append(key, value)
        self.truth["duplicate"].add((key, value))

    def inject_g1a(self) -> None:
        key = self.quiet_key()
        process = self.producers[1]
        value = self.fresh_value()
        self.append(key, value)
        self.op(process, "send", f'[["send","{key}",{value}]]', "fail",
                f'[["send","{key}",{value}]]')  # fmt: skip
        self.truth["G1a"].add((key, value))

    def inject_lost_write(self) -> None:
        key = self.quiet_key()
        process = self.producers[2]
        value = self.fresh_value()
        offset = self.append(key, HOLE)
        invoke = f'[["send","{key}",{value}]]'
        op = self.op(process, "send", invoke, "ok", f'[["send","{key}",[{offset},{value}]]]')
        self.note_send(process, key, offset, op)
        for kind in ("lost-write", "unseen", "lost-acked-write"):
            self.truth[kind].add((key, value))

    def inject_unseen(self) -> None:
        key = self.quiet_key()
        value = self.fresh_value()
        invoke = f'[["send","{key}",{value}]]'
        self.op(self.producers[3], "send", invoke, "ok", invoke)
        self.truth["unseen"].add((key, value))

    def _consumer_of(self, key: str) -> int:
        for slot, (_, keys) in enumerate(self.consumers):
            if key in keys:
                return slot
        raise AssertionError(key)

    def _ready(self, key: str) -> tuple[int, int]:
        """(slot, process) of the consumer of `key`, which has read it and has 4 records
        ahead without holes."""
        slot = self._consumer_of(key)
        process, _ = self.consumers[slot]
        for _ in range(2):
            self.send(self.producers[0], key)
        if (process, key) not in self.last_read_end:
            self.consume(slot)
            process, _ = self.consumers[slot]
        for _ in range(4):
            self.send(self.producers[0], key)
        return slot, process

    def _move(self, delta: int) -> None:
        key = self.quiet_key()
        slot, process = self._ready(key)
        position = self.position[(process, key)]
        self.position[(process, key)] = position + delta
        self.consume(slot)

    def inject_poll_skip(self) -> None:
        self._move(+1)

    def inject_nonmonotonic_poll(self) -> None:
        self._move(-1)

    def _inner_poll(self, records_of: Any) -> None:
        key = self.quiet_key()
        _, process = self._ready(key)
        position = self.position[(process, key)]
        log = self.log[key]
        if any(v is HOLE for v in log[position : position + 3]):
            return
        records, after = records_of(position, log)
        self.position[(process, key)] = after
        self.emit_poll(process, {key: records})

    def inject_int_poll_skip(self) -> None:
        self._inner_poll(lambda p, log: ([(p, log[p]), (p + 2, log[p + 2])], p + 3))

    def inject_int_nonmonotonic_poll(self) -> None:
        self._inner_poll(lambda p, log: ([(p, log[p]), (p + 1, log[p + 1]), (p, log[p])], p + 2))

    def inject_nonmonotonic_send(self) -> None:
        key = self.quiet_key()
        process = self.producers[4]
        first, second = self.fresh_value(), self.fresh_value()
        base = len(self.log[key])
        self.log[key].extend([second, first])
        for value, offset in ((first, base + 1), (second, base)):
            invoke = f'[["send","{key}",{value}]]'
            op = self.op(process, "send", invoke, "ok", f'[["send","{key}",[{offset},{value}]]]')
            self.note_send(process, key, offset, op)

    def _double_send(self, offsets: tuple[int, int], between: bool) -> tuple[int, str]:
        key = self.quiet_key()
        process = self.producers[5]
        a, b = self.fresh_value(), self.fresh_value()
        base = len(self.log[key])
        slots: list[int | None] = [None] * (3 if between else 2)
        slots[offsets[0]], slots[offsets[1]] = a, b
        other = self.fresh_value()
        if between:
            slots[1] = other
        self.log[key].extend(slots)
        invoke = f'[["send","{key}",{a}],["send","{key}",{b}]]'
        done = f'[["send","{key}",[{base + offsets[0]},{a}]],["send","{key}",[{base + offsets[1]},{b}]]]'
        op = self.op(process, "send", invoke, "ok", done)
        self.note_send(process, key, base + offsets[1], op)
        if between:
            q = self.producers[6]
            inv = f'[["send","{key}",{other}]]'
            o2 = self.op(q, "send", inv, "ok", f'[["send","{key}",[{base + 1},{other}]]]')
            self.note_send(q, key, base + 1, o2)
        return op, key

    def inject_int_send_skip(self) -> None:
        self.truth["int-send-skip"].add(self._double_send((0, 2), between=True))

    def inject_int_nonmonotonic_send(self) -> None:
        self.truth["int-nonmonotonic-send"].add(self._double_send((1, 0), between=False))

    def inject_at_least_once_violation(self) -> None:
        self.rebalance(commit_ahead=True)

    def inject_unclean_loss_window(self) -> None:
        key = self.quiet_key()
        process = self.new_process()
        start = len(self.log[key])
        lost = [self.send(process, key) for _ in range(3)]
        self.elections += 1
        election = self.line(
            "sut",
            "info",
            "leader-election",
            f'{{"key":"{key}","leader":2,"leader_epoch":{self.elections},"isr":[2],'
            f'"previous_leader":1,"unclean":true}}',
        )
        # The old leader truncates and rejoins, as in a real cluster: the key's acks=-1
        # writes go on after, and an ISR left below min.insync.replicas (2) would say the
        # leader acknowledged every one of them against its configuration (each an
        # ack-below-min-isr), which no consistent history says.
        self.line("sut", "info", "isr-change", f'{{"key":"{key}","isr":[2,1,3],"leader":2}}')
        del self.log[key][start:]
        self.truth["unclean-loss-window"].add((key, election))
        for offset, value in enumerate(lost, start):
            for kind in ("lost-write", "unseen", "lost-acked-write"):
                self.truth[kind].add((key, value))
            self.truth["inconsistent-offsets"].add((key, offset))
        for _ in range(3):
            self.send(self.producers[7], key)

    # -- the run ---------------------------------------------------------------------
    def final_read(self) -> None:
        process = self.new_process()
        text = ",".join(f'"{k}"' for k in self.log)
        self.op(process, "assign", f"[{text}]", "ok", f"[{text}]", ',"final":true')
        for key in self.log:
            start = 0
            while start < len(self.log[key]):
                records, start = self.read(key, start, 5000)
                self.emit_poll(process, {key: records}, final=True)

    def run(self, injections_per_type: int) -> Truth:
        for i in range(3):
            self.add_consumer(self.assign_keys[4 * i : 4 * i + 4])
        members = [self.new_process(), self.new_process()]
        self.subscribe(members[0], self.group_keys[:2])
        self.subscribe(members[1], self.group_keys[2:])
        kinds = [
            "inconsistent-offsets", "duplicate", "g1a", "lost-write", "unseen", "poll-skip",
            "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-send",
            "int-send-skip", "int-nonmonotonic-send", "at-least-once-violation",
            "unclean-loss-window",
        ]  # fmt: skip
        reserve = self.target // 50 + 1000  # the final read
        body = self.target - reserve
        plan = sorted(
            (self.rng.randrange(body // 10, body - body // 10), kind)
            for kind in kinds
            for _ in range(injections_per_type)
        )
        faulted = False
        # Rotations spread evenly over the body, as Jepsen's keys rotate at a steady rate.
        every = body // (len(self.fresh_keys) // 4 + 2)
        rotate_at = every
        while self.index < body:
            while plan and plan[0][0] <= self.index:
                self.inject(plan.pop(0)[1])
            if self.fresh_keys and self.index >= rotate_at:
                self.rotate()
                rotate_at += every
            roll = self.rng.random()
            if roll < 0.5:
                self.produce()
            elif roll < 0.9:
                self.consume()
            elif roll < 0.995:
                self.group_poll()
            elif roll < 0.996:
                self.rebalance()
            elif roll < 0.997:
                f = "stop-partition" if faulted else "start-partition"
                self.line("nemesis", "info", f, '{"n1":["n2","n3"]}' if not faulted else "null")
                faulted = not faulted
        self.final_read()
        self.out.close()
        return self.truth


# -- measuring -------------------------------------------------------------------------
def _rss_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(entry))
    return out


def _descendants(pid: int) -> list[int]:
    out = []
    for child in _children(pid):
        out += [child, *_descendants(child)]
    return out


def _pss_kb(pid: int) -> int:
    """Proportional set size: a page shared by n processes counts 1/n in each (the Python
    workers are forked from one daemon and share much of it)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _is_jvm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"java" in fh.read().split(b"\0")[0]
    except OSError:
        return False


class MemorySampler(threading.Thread):
    """Peak memory of this process and of every process under it, sampled 4x a second:
    RSS of this process (the driver's Python), of the JVM, and of all of them summed (the
    Python workers' shared pages counted in each), and their PSS summed (shared pages
    counted once)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_driver_kb = 0
        self.peak_jvm_kb = 0
        self.peak_total_kb = 0
        self.peak_pss_kb = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.stopped.wait(0.25):
            pids = [me, *_descendants(me)]
            driver = _rss_kb(me, "VmRSS")
            total = sum(_rss_kb(pid, "VmRSS") for pid in pids)
            jvm = sum(_rss_kb(pid, "VmRSS") for pid in pids if _is_jvm(pid))
            self.peak_driver_kb = max(self.peak_driver_kb, driver)
            self.peak_jvm_kb = max(self.peak_jvm_kb, jvm)
            self.peak_total_kb = max(self.peak_total_kb, total)
            self.peak_pss_kb = max(self.peak_pss_kb, sum(_pss_kb(pid) for pid in pids))


def _identity(kind: str, sample: dict[str, Any]) -> tuple[Any, ...]:
    key = sample["key"]
    if kind in ("inconsistent-offsets",):
        return (key, sample["offset"])
    if kind in ("poll-skip", "nonmonotonic-poll", "nonmonotonic-send"):
        return (sample["process"], key, sample["ops"][1])
    if kind.startswith("int-"):
        return (sample["op"], key)
    if kind == "unclean-loss-window":
        return (key, sample["election"])
    return (key, sample["value"])


def save_truth(truth: Truth, path: Path) -> None:
    path.write_text(
        json.dumps({kind: [list(item) for item in found] for kind, found in truth.items()})
    )


def load_truth(path: Path) -> Truth:
    saved = json.loads(path.read_text())
    return defaultdict(
        set, {kind: {tuple(item) for item in found} for kind, found in saved.items()}
    )


def score(results: dict[str, Any], truth: Truth) -> dict[str, Any]:
    """Precision and recall per anomaly type of the samples of `results` (results.json)."""
    found: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    for section in results["checkers"].values():
        for group in ("anomalies", "expected"):
            for kind, samples in section.get(group, {}).items():
                for sample in samples:
                    found[kind].add(_identity(kind, sample))
    return score_found(found, truth)


def score_found(found: Truth, truth: Truth) -> dict[str, Any]:
    """Precision and recall per anomaly type of `found` (identities as `_identity`'s)."""
    found = defaultdict(set, found)
    out = {}
    for kind in sorted(set(found) | set(truth)):
        hits = len(found[kind] & truth[kind])
        out[kind] = {
            "injected": len(truth[kind]),
            "reported": len(found[kind]),
            "precision": round(hits / len(found[kind]), 4) if found[kind] else None,
            "recall": round(hits / len(truth[kind]), 4) if truth[kind] else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="history lines (1M, 10M, 30M)")
    parser.add_argument("--loader", choices=("auto", "exact"), default="auto")
    parser.add_argument("--injections", type=int, default=3, help="per anomaly type")
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument(
        "--reuse", action="store_true", help="check a kept run of this size again (implies --keep)"
    )
    parser.add_argument(
        "--reuse-parquet", action="store_true", help="with --reuse: keep its history.parquet too"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--shape", choices=SHAPES, default="squall", help="see SHAPES")
    parser.add_argument(
        "--keys", type=int, default=None, help="keys in the history (jepsen shape; default 1700)"
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="time the single-threaded Python check (bench/reference_check.py) too",
    )
    args = parser.parse_args()
    keys = args.keys or (1700 if args.shape == "jepsen" else 16)
    if args.shape == "squall" and keys != 16:
        parser.error("--keys: the squall shape has 16 keys; --shape jepsen for more")
    if keys < 16:
        parser.error("--keys: at least 16")

    name = f"squall-check-scale-{args.lines}"
    run = args.dir / (name if args.shape == "squall" else f"{name}-jepsen-{keys}")
    figures: dict[str, Any] = {
        "lines": args.lines,
        "shape": args.shape,
        "keys": keys,
        "loader": args.loader,
        "master": args.master,
    }
    if args.reuse and (run / "truth.json").is_file():
        # The kept history is converted again unless --reuse-parquet.
        if not args.reuse_parquet:
            shutil.rmtree(run / "history.parquet", ignore_errors=True)
        truth = load_truth(run / "truth.json")
    else:
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        (run / "test.json").write_text(json.dumps(TEST_JSON))
        started = time.perf_counter()
        history = SyntheticHistory(
            run / "history.jsonl", args.lines, args.seed, keys=keys, shape=args.shape
        )
        truth = history.run(args.injections)
        figures["generate_s"] = round(time.perf_counter() - started, 2)
        save_truth(truth, run / "truth.json")
    figures["history_bytes"] = (run / "history.jsonl").stat().st_size

    sampler = MemorySampler()
    sampler.start()
    begin = time.perf_counter()
    config = CheckConfig(sample=100_000, loader=args.loader)
    # As `squall check --spark-master MASTER` does: convert, start Spark, check.
    results = check_history(run, spark_master=args.master, config=config)
    figures["end_to_end_s"] = round(time.perf_counter() - begin, 2)
    figures["load_s"] = results["history"]["seconds"]["load"]
    figures["check_s"] = results["history"]["seconds"]["check"]
    figures["loaded_by"] = results["history"]["loader"]
    sampler.stopped.set()
    sampler.join()
    figures["peak_rss_mb"] = {
        "driver_python": round(sampler.peak_driver_kb / 1024),
        "jvm": round(sampler.peak_jvm_kb / 1024),
        "driver_jvm_and_workers": round(sampler.peak_total_kb / 1024),
        "driver_jvm_and_workers_pss": round(sampler.peak_pss_kb / 1024),
    }
    figures["ops_per_s_end_to_end"] = round(args.lines / figures["end_to_end_s"])
    # Both growths: a check's time per history line and per key.
    figures["check_us_per_line"] = round(figures["check_s"] * 1e6 / args.lines, 2)
    figures["check_ms_per_key"] = round(figures["check_s"] * 1e3 / keys, 2)
    figures["valid"] = results["valid"]
    figures["scores"] = score(results, truth)
    if args.reference:
        from reference_check import check  # beside this script

        started = time.perf_counter()
        found = check(run)
        figures["reference_s"] = round(time.perf_counter() - started, 2)
        figures["speedup_over_reference"] = round(
            figures["reference_s"] / figures["end_to_end_s"], 2
        )
        figures["reference_scores"] = score_found(found, truth)
    figures["notes"] = results["notes"]
    print(json.dumps(figures, indent=2))
    if not (args.keep or args.reuse):
        shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
