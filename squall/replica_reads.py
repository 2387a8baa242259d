"""The per-replica final read: every replica's log of every key, read off its node's disk.

After the final read (which goes through each key's leader), the runner reads each broker's
log dir with the SUT's own `dump-log` (`BrokerService.dump_log`, as Kafka's
`kafka-dump-log.sh`: read-only, nothing told to the broker), and records, per replica and
key, what the replica holds as `replica-read` operations (docs/history.md): process
`"sut"`, type `info`, `final: true`, the node in `node`, and in `value` the partition's
state as ZooKeeper and its leader gave it at the end (leader, ISR, high watermark) with
the replica's records as `[offset, value]` pairs, cut into chunks of `CHUNK_RECORDS`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from squall.cluster.cluster import Cluster, broker_id_of
from workloads.values import decode_value

log = logging.getLogger(__name__)

REPLICA_READ = "replica-read"
"""The `f` of a replica's final read in the history."""
CHUNK_RECORDS = 10_000
"""Records per `replica-read` line: a 120 s run's replica (about 100k records) takes ten
lines of about 150 kB, not one of 1.5 MB."""


class EventSink(Protocol):
    """Where the reads are recorded (a `histories.HistoryWriter`)."""

    def event(self, f: str, value: Any, *, process: Any = ..., **fields: Any) -> Any: ...


@dataclass
class ReplicaLog:
    """One replica's log of one partition, as `dump-log` read it."""

    topic: str
    partition: int
    records: list[tuple[int, int | str]] = field(default_factory=list)
    invalid_offsets: list[int] = field(default_factory=list)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    checkpoint_high_watermark: int | None = None
    recovery_point: int | None = None
    leader_epochs: list[list[int]] = field(default_factory=list)
    recovery_stop: dict[str, Any] | None = None
    unreadable: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.topic}-{self.partition}"


def _raw(line: Mapping[str, Any], name: str) -> bytes | None:
    if line.get(f"{name}_hex") is not None:
        return bytes.fromhex(line[f"{name}_hex"])
    text = line.get(name)
    return None if text is None else str(text).encode("utf-8")


def parse_dump(lines: Iterable[str]) -> dict[str, ReplicaLog]:
    """The replica logs of a `dump-log --format jsonl` output, by key; ValueError on a line
    that is not one of its objects."""
    logs: dict[str, ReplicaLog] = {}
    current: ReplicaLog | None = None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
            kind = line["type"]
            if kind == "partition":
                current = ReplicaLog(line["topic"], int(line["partition"]))
                current.checkpoint_high_watermark = line.get("high_watermark")
                current.recovery_point = line.get("recovery_point")
                current.leader_epochs = line.get("leader_epochs") or []
                current.problems = line.get("problems") or []
                logs[current.key] = current
            elif current is None:
                raise ValueError("a line before its partition's header")
            elif kind == "record":
                offset = int(line["offset"])
                current.records.append((offset, decode_value(_raw(line, "value"))))
                if not line.get("crc_valid", True):
                    current.invalid_offsets.append(offset)
            elif kind == "unreadable":
                current.unreadable.append(
                    {k: line[k] for k in ("segment", "position", "problem") if k in line}
                )
            elif kind == "end":
                current.log_start_offset = line.get("log_start_offset")
                current.log_end_offset = line.get("log_end_offset")
                current.recovery_stop = line.get("recovery_stop")
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"dump-log line {number} is not what dump-log writes: {err}") from None
    return logs


@dataclass(frozen=True)
class PartitionEnd:
    """A partition's state when the replicas were read: from ZooKeeper (leader, epoch,
    replicas, ISR) and its leader (the high watermark, by ListOffsets); None: unknown."""

    leader: int | None = None
    leader_epoch: int | None = None
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] | None = None
    high_watermark: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": list(self.replicas),
            "isr": None if self.isr is None else list(self.isr),
            "high_watermark": self.high_watermark,
        }


def replica_read_values(
    key: str, broker: int, end: PartitionEnd, replica: ReplicaLog | None, *, error: str = ""
) -> Iterator[dict[str, Any]]:
    """The `value`s of one replica's `replica-read` lines: its records in chunks (one line,
    without records, for an empty log; one with `error` when it could not be read)."""
    head: dict[str, Any] = {"key": key, "broker": broker, **end.to_json()}
    if replica is None:
        yield {**head, "error": error or "the replica's log was not read", "chunk": 0, "chunks": 1}
        return
    head |= {
        "log_start_offset": replica.log_start_offset,
        "log_end_offset": replica.log_end_offset,
        "checkpoint_high_watermark": replica.checkpoint_high_watermark,
        "recovery_point": replica.recovery_point,
        "record_count": len(replica.records),
        "invalid_offsets": replica.invalid_offsets,
        "recovery_stop": replica.recovery_stop,
    }
    if replica.unreadable:
        head["unreadable"] = replica.unreadable
    if replica.problems:
        head["problems"] = replica.problems
    records = replica.records
    chunks = max(1, -(-len(records) // CHUNK_RECORDS))
    for chunk in range(chunks):
        part = records[chunk * CHUNK_RECORDS : (chunk + 1) * CHUNK_RECORDS]
        yield {
            **head,
            "chunk": chunk,
            "chunks": chunks,
            "first_offset": part[0][0] if part else None,
            "last_offset": part[-1][0] if part else None,
            "records": [list(r) for r in part],
        }


def partition_ends(cluster: Cluster, topic: str, partitions: int) -> dict[str, PartitionEnd]:
    """Each key's leader, ISR and replicas (ZooKeeper) and high watermark (its leader)."""
    from system_under_test.client import AdminClient

    keys = [f"{topic}-{p}" for p in range(partitions)]
    ends: dict[str, PartitionEnd] = {}
    try:
        views = cluster.roles.observe(keys, controller=False).partitions
    except Exception as err:
        log.warning("partition states not observed for the replica reads: %s", err)
        views = {}
    high_watermarks: dict[str, int] = {}
    with (
        contextlib.suppress(Exception),
        AdminClient(cluster.bootstrap, request_timeout_ms=5000) as admin,
    ):
        for p in range(partitions):
            with contextlib.suppress(Exception):
                high_watermarks[f"{topic}-{p}"] = admin.list_offsets(topic, p, "latest")
    for key in keys:
        view = views.get(key)
        ends[key] = PartitionEnd(
            leader=None if view is None else view.leader,
            leader_epoch=None if view is None else view.leader_epoch,
            replicas=() if view is None else tuple(view.replicas),
            isr=None if view is None else tuple(view.isr),
            high_watermark=high_watermarks.get(key),
        )
    return ends


def record_replica_reads(
    cluster: Cluster, topic: str, partitions: int, sink: EventSink, *, scratch: Path | None = None
) -> int:
    """Read every broker's replicas of `topic` and record them; the number of lines written.

    Every replica the assignment names gets at least one line; one whose node could not be
    read gets a line with `error`."""
    ends = partition_ends(cluster, topic, partitions)
    written = 0
    with tempfile.TemporaryDirectory(dir=scratch, prefix="replica-reads-") as tmp:
        for name in sorted(cluster.brokers, key=broker_id_of):
            broker = broker_id_of(name)
            logs: dict[str, ReplicaLog] = {}
            error = ""
            try:
                path = cluster.broker(name).dump_log(topic, Path(tmp) / f"{name}.jsonl")
                with path.open(encoding="utf-8") as fh:
                    logs = parse_dump(fh)
                path.unlink()
            except Exception as err:
                log.warning("replica read of %s failed: %s", name, err)
                error = f"{type(err).__name__}: {err}"
            for key, end in ends.items():
                replica = logs.get(key)
                assigned = broker in end.replicas
                if replica is None and not assigned and not (error and not end.replicas):
                    continue  # the broker holds no replica of the key
                for value in replica_read_values(key, broker, end, replica, error=error):
                    sink.event(REPLICA_READ, value, process="sut", final=True, node=name)
                    written += 1
    return written
