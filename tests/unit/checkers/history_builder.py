"""Hand-written histories for the checker tests, one scenario per key.

Keys and processes are independent in every checker, so many small scenarios share one
history (and one Spark run): each scenario writes its own keys with its own processes,
and the tests compare the anomalies found on those keys with what the scenario expects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from histories import HistoryWriter

Record = tuple[int, Any]
NEVER = 2**63 - 1


def unfsynced_test_json(
    min_insync_replicas: int, *, offsets_min_insync_replicas: str | None = None
) -> dict[str, Any]:
    """A test.json of three brokers whose flush policy never fsyncs (Kafka's default), acks
    -1, unclean election off; with `offsets_min_insync_replicas`, the offsets topic's."""
    test: dict[str, Any] = {
        "topic": {
            "replication_factor": 3,
            "min_insync_replicas": min_insync_replicas,
            "unclean_leader_election": False,
            "flush_messages": NEVER,
            "flush_ms": NEVER,
            "flush_setting": "log.flush.interval.messages",
        },
        "workload": {"acks": -1, "producer_retries": 0},
        "brokers": {"n1": 1, "n2": 2, "n3": 3},
    }
    if offsets_min_insync_replicas is not None:
        test["broker_in_force"] = {"offsets.topic.min.insync.replicas": offsets_min_insync_replicas}
    return test


class HistoryBuilder:
    """Writes operations with explicit times (1 ms apart) through `HistoryWriter`."""

    def __init__(self, run_dir: Path, *, test_json: Mapping[str, Any] | None = None) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.path = run_dir / "history.jsonl"
        self.writer = HistoryWriter(self.path)
        self.time = 0
        self._next_process = 0
        self._retired: set[int] = set()
        if test_json is not None:
            (run_dir / "test.json").write_text(json.dumps(test_json))

    def close(self) -> Path:
        self.writer.close()
        return self.run_dir

    def tick(self, ns: int = 1_000_000) -> int:
        self.time += ns
        return self.time

    def process(self) -> int:
        """A fresh client process number."""
        self._next_process += 1
        return self._next_process

    def _op(self, process: int, f: str, invoke_value: Any, result: str, done_value: Any,
            done_fields: Mapping[str, Any] | None = None, **fields: Any) -> None:  # fmt: skip
        """`fields` go on the invocation, `done_fields` on the completion."""
        assert process not in self._retired, f"process {process} was retired by an info"
        invoke = self.writer.write(process, "invoke", f, invoke_value, time=self.tick(), **fields)
        self.writer.complete(invoke, result, done_value, time=self.tick(), **(done_fields or {}))
        if result == "info":
            self._retired.add(process)

    def send(
        self,
        process: int,
        sends: Sequence[tuple[str, Any, int | None]],
        *,
        result: str = "ok",
        acks: int | None = None,
        f: str = "send",
    ) -> None:
        """One send operation: (key, value, offset) per micro-op; offset None: not known."""
        invoke = [["send", key, value] for key, value, _ in sends]
        done = [
            ["send", key, value if offset is None else [offset, value]]
            for key, value, offset in sends
        ]
        fields = {} if acks is None else {"acks": acks}
        self._op(process, f, invoke, result, done, **fields)

    def send1(self, process: int, key: str, value: Any, offset: int | None, **kw: Any) -> None:
        self.send(process, [(key, value, offset)], **kw)

    def poll(
        self,
        process: int,
        results: Mapping[str, Iterable[Record]] | Sequence[Mapping[str, Iterable[Record]]],
        *,
        result: str = "ok",
        final: bool | None = None,
    ) -> None:
        """One poll operation; a list of result maps makes several poll micro-ops."""
        polls = [results] if isinstance(results, Mapping) else list(results)
        done = [["poll", {k: [list(r) for r in recs] for k, recs in m.items()}] for m in polls]
        fields = {} if final is None else {"final": final}
        self._op(process, "poll", [["poll"] for _ in polls], result, done, **fields)

    def assign(self, process: int, keys: Sequence[str], *, f: str = "assign",
               result: str = "ok", generation: int | None = None) -> None:  # fmt: skip
        """`generation`: a group member's, on the completion."""
        done = {} if generation is None else {"generation": generation}
        self._op(process, f, list(keys), result, list(keys), done)

    def subscribe(self, process: int, keys: Sequence[str]) -> None:
        self.assign(process, keys, f="subscribe")

    def commit(self, process: int, offsets: Mapping[str, int], *, result: str = "ok",
               generation: int | None = None) -> None:  # fmt: skip
        """`generation`: a group member's, on the invocation and the completion."""
        member = {} if generation is None else {"generation": generation}
        self._op(process, "commit", dict(offsets), result, dict(offsets), member, **member)

    def log_ends(self, process: int, ends: Mapping[str, int], *, result: str = "ok") -> None:
        """The final read's question of where the logs end (`final: true`), as
        workloads.final_read records it: `ok` with `{key: end}`."""
        keys = list(ends)
        done: Any = dict(ends) if result == "ok" else keys
        self._op(process, "log-ends", keys, result, done, final=True)

    def election(self, key: str, *, unclean: bool, leader: int = 2, epoch: int = 1) -> None:
        self.writer.event(
            "leader-election",
            {
                "key": key,
                "leader": leader,
                "leader_epoch": epoch,
                "isr": [leader],
                "previous_leader": 1,
                "unclean": unclean,
            },
            process="sut",
            time=self.tick(),
        )

    def isr_change(
        self,
        key: str,
        isr: Sequence[int],
        *,
        leader: int = 2,
        previous_isr: Sequence[int] | None = None,
        log_end_offsets: Mapping[int, int] | None = None,
        elr: Sequence[int] | None = None,
    ) -> None:
        """A leader's ISR change, with what it knew when it decided and the eligible leader
        replicas (when given)."""
        value: dict[str, Any] = {"key": key, "isr": list(isr), "leader": leader}
        if elr is not None:
            value["elr"] = list(elr)
        if previous_isr is not None:
            value["previous_isr"] = list(previous_isr)
        if log_end_offsets is not None:
            value["log_end_offsets"] = {str(b): end for b, end in log_end_offsets.items()}
        self.writer.event("isr-change", value, process="sut", time=self.tick())

    def nemesis(self, f: str, value: Any = None) -> None:
        self.writer.event(f, value, time=self.tick())
