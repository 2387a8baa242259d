"""Reading a log directory's partitions as they lie on disk, as Kafka's ``kafka-dump-log.sh``.

``python -m system_under_test dump-log --log-dir DIR [--topic T] [--partition N]`` prints,
per partition, its checkpoints (high watermark, recovery point, leader epochs), its
segments, every record batch (offsets, position, size, partition leader epoch, producer id,
epoch and base sequence, CRC validity) and every record in it (offset, timestamp, key,
value), and where a full recovery would cut the log (the first batch whose length, CRC or
offset is wrong; every later segment goes too, as in `recovery.load_segments`).

It only reads: files are opened read-only, nothing is locked, rebuilt or truncated, so it
may run beside a live broker (a record appended meanwhile may show as a partial tail). It is
built on the log's own readers (`record.iter_batches`, `record.decode_records`,
the checkpoint files), so it sees exactly what the broker's recovery would.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from system_under_test.kafka.record_batch import split_batches
from system_under_test.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from system_under_test.log.record import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    CorruptRecordError,
    Record,
    decode_records,
    iter_batches,
    validate_records,
)

READ_CHUNK = 1 << 20
"""Bytes read from a segment file at a time."""

_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_SEGMENT_LOG = re.compile(r"(\d{20})\.log")


class DumpError(ValueError):
    """The log directory cannot be dumped as asked (missing, not a directory, no match)."""


@dataclass(frozen=True, slots=True)
class PartitionDir:
    """One partition's directory in a log dir."""

    topic: str
    partition: int
    path: Path


def partition_dirs(
    log_dir: Path, *, topic: str | None = None, partition: int | None = None
) -> list[PartitionDir]:
    """The partition directories of `log_dir` (filtered), in (topic, partition) order."""
    if not log_dir.exists():
        raise DumpError(f"log dir {log_dir} does not exist; give the broker's log.dirs")
    if not log_dir.is_dir():
        raise DumpError(f"log dir {log_dir} is not a directory; give the broker's log.dirs")
    found: list[PartitionDir] = []
    for entry in os.scandir(log_dir):
        match = _PARTITION_DIR.fullmatch(entry.name)
        if not entry.is_dir() or match is None:
            continue
        name, number = match[1], int(match[2])
        if (topic is None or name == topic) and (partition is None or number == partition):
            found.append(PartitionDir(name, number, Path(entry.path)))
    return sorted(found, key=lambda p: (p.topic, p.partition))


def _segment_files(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for entry in os.scandir(directory):
        match = _SEGMENT_LOG.fullmatch(entry.name)
        if match and entry.is_file():
            out.append((int(match[1]), Path(entry.path)))
    return sorted(out)


def _checkpoint(path: Path, key: tuple[str, int], problems: list[str]) -> int | None:
    try:
        return OffsetCheckpointFile(path).read().get(key)
    except (CheckpointError, OSError) as err:
        problems.append(str(err))
        return None


def _text(raw: bytes | None) -> tuple[str | None, str | None]:
    """(text, hex): UTF-8 text when the bytes are such, else their hex digits."""
    if raw is None:
        return None, None
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, raw.hex()


def _batches_of(path: Path) -> Iterator[tuple[int, bytes] | CorruptRecordError]:
    """(position, bytes) of each batch of a segment file whose header holds, read in
    chunks; a `CorruptRecordError` (absolute position) where the headers stop making sense,
    after which nothing more of the file can be walked."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        buf = b""
        base = 0  # file position of buf[0]
        while True:
            chunk = fh.read(READ_CHUNK)
            buf += chunk
            at_eof = not chunk or base + len(buf) >= size
            consumed = 0
            try:
                for batch in iter_batches(buf, check_crc=False):
                    end = batch.position + batch.size
                    yield base + batch.position, buf[batch.position : end]
                    consumed = end
            except CorruptRecordError as err:
                consumed = err.position
                if at_eof or not _runs_past(buf, err.position):
                    yield CorruptRecordError(base + err.position, err.reason)
                    return
            buf = buf[consumed:]
            base += consumed
            if at_eof and not buf:
                return
            if not chunk:
                yield CorruptRecordError(base, f"{len(buf)} bytes at the end are no whole batch")
                return


def _runs_past(buf: bytes, position: int) -> bool:
    """Whether the batch at `position` merely runs past the end of `buf`."""
    if len(buf) - position < LOG_OVERHEAD:
        return True
    size = int.from_bytes(buf[position + 8 : position + 12], "big", signed=True)
    return size >= MIN_BATCH_LENGTH and position + LOG_OVERHEAD + size > len(buf)


def _epoch_of(epochs: Sequence[tuple[int, int]], starts: Sequence[int], offset: int) -> int | None:
    at = bisect_right(starts, offset) - 1
    return epochs[at][0] if at >= 0 else None


def dump_partition(part: PartitionDir, log_dir: Path) -> Iterator[dict[str, Any]]:
    """The lines of one partition: `partition`, then per segment `segment` and, per batch,
    `batch` and its `record`s (and `unreadable` where the headers stop making sense), then
    `end`."""
    key = (part.topic, part.partition)
    problems: list[str] = []
    high_watermark = _checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE, key, problems)
    recovery_point = _checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT_FILE, key, problems)
    try:
        epochs = LeaderEpochCheckpointFile(part.path / LEADER_EPOCH_CHECKPOINT_FILE).read()
    except (CheckpointError, OSError) as err:
        problems.append(str(err))
        epochs = []
    starts = [start for _epoch, start in epochs]
    segments = _segment_files(part.path)
    where = {"topic": part.topic, "partition": part.partition}
    yield {
        "type": "partition",
        **where,
        "directory": str(part.path),
        "high_watermark": high_watermark,
        "recovery_point": recovery_point,
        "leader_epochs": [list(e) for e in epochs],
        "segments": [base for base, _path in segments],
        **({"problems": problems} if problems else {}),
    }
    records = invalid = cut = 0
    log_end: int | None = None
    stop: dict[str, Any] | None = None  # where a full recovery would cut the log
    for base, path in segments:
        yield {
            "type": "segment",
            **where,
            "segment": base,
            "file": path.name,
            "bytes": path.stat().st_size,
        }
        if stop is None and log_end is not None and base != log_end:
            stop = {
                "segment": base,
                "position": 0,
                "offset": log_end,
                "reason": f"segment {base} does not start at the previous one's end {log_end}",
            }
        expected = base
        for item in _batches_of(path):
            if isinstance(item, CorruptRecordError):
                yield {
                    "type": "unreadable",
                    **where,
                    "segment": base,
                    "position": item.position,
                    "problem": item.reason,
                }
                if stop is None:
                    stop = {
                        "segment": base,
                        "position": item.position,
                        "offset": expected,
                        "reason": str(item),
                    }
                break
            position, data = item
            (view,) = split_batches(data).batches
            problem = None
            try:
                validate_records(data)
            except CorruptRecordError as err:
                problem = err.reason
            decoded: list[Record] = []
            try:
                decoded = decode_records(data, check_crc=False)
            except CorruptRecordError as err:
                problem = problem or err.reason
            first, last = view.base_offset, view.last_offset
            if stop is None and problem is None and first != expected:
                reason = f"batch at byte {position} has offset {first}, expected {expected}"
                stop = {"segment": base, "position": position, "offset": expected, "reason": reason}
            if stop is None and problem is not None:
                stop = {
                    "segment": base,
                    "position": position,
                    "offset": expected,
                    "reason": f"corrupt record batch at byte {position}: {problem}",
                }
            stored_epoch = view.partition_leader_epoch
            epoch = stored_epoch if stored_epoch >= 0 else _epoch_of(epochs, starts, first)
            batch_line: dict[str, Any] = {
                "type": "batch",
                **where,
                "base_offset": first,
                "last_offset": last,
                "segment": base,
                "position": position,
                "size": len(data),
                "leader_epoch": epoch,
                "producer_id": view.producer_id,
                "producer_epoch": view.producer_epoch,
                "base_sequence": view.base_sequence,
                "crc_valid": problem is None,
            }
            if problem is not None:
                batch_line["problem"] = problem
                invalid += last - first + 1
            yield batch_line
            for record in decoded:
                key_text, key_hex = _text(record.key)
                value_text, value_hex = _text(record.value)
                line: dict[str, Any] = {
                    "type": "record",
                    **where,
                    "offset": record.offset,
                    "segment": base,
                    "position": position,
                    "timestamp": record.timestamp,
                    "leader_epoch": epoch,
                    "crc_valid": problem is None,
                    "key": key_text,
                    "value": value_text,
                }
                if key_hex is not None:
                    line["key_hex"] = key_hex
                if value_hex is not None:
                    line["value_hex"] = value_hex
                if problem is not None:
                    line["problem"] = problem
                yield line
            records += last - first + 1
            cut += (last - first + 1) if stop is not None else 0
            expected = last + 1
        log_end = expected
    if stop is not None:
        stop["records_cut"] = cut
    yield {
        "type": "end",
        **where,
        "log_start_offset": segments[0][0] if segments else None,
        "log_end_offset": log_end,
        "records": records,
        "invalid_records": invalid,
        "recovery_stop": stop,
    }


def dump_lines(
    log_dir: Path, *, topic: str | None = None, partition: int | None = None
) -> Iterator[dict[str, Any]]:
    """Every line of the dump of `log_dir`; `DumpError` when nothing matches."""
    parts = partition_dirs(log_dir, topic=topic, partition=partition)
    if not parts:
        wanted = " ".join(
            f"{name} {value}"
            for name, value in (("topic", topic), ("partition", partition))
            if value is not None
        )
        raise DumpError(
            f"log dir {log_dir} holds no partition directory (<topic>-<partition>)"
            + (f" for {wanted}" if wanted else "")
            + "; check --log-dir, --topic and --partition"
        )
    for part in parts:
        yield from dump_partition(part, log_dir)


def _text_line(line: dict[str, Any]) -> str:
    """One line as Kafka's dump tool prints it: `name: value` pairs."""
    kind = line["type"]
    fields = " ".join(
        f"{name}: {json.dumps(value) if isinstance(value, (str, list, dict)) else value}"
        for name, value in line.items()
        if name != "type"
    )
    return f"{kind} {fields}"


def write_dump(lines: Iterator[dict[str, Any]], out: TextIO, *, fmt: str) -> None:
    for line in lines:
        out.write(json.dumps(line, separators=(",", ":")) if fmt == "jsonl" else _text_line(line))
        out.write("\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m system_under_test dump-log``; exit 0, or 2 on bad input."""
    parser = argparse.ArgumentParser(
        prog="python -m system_under_test dump-log",
        description=(
            "Print a log dir's partitions as they lie on disk: checkpoints, segments, every "
            "record batch (offsets, position, leader epoch, producer, CRC validity) and record "
            "(offset, timestamp, key, value) and "
            "where a full recovery would cut each log. Read-only; safe beside a live broker."
        ),
    )
    parser.add_argument("--log-dir", type=Path, required=True, help="a directory of log.dirs")
    parser.add_argument("--topic", help="only this topic's partitions")
    parser.add_argument("--partition", type=int, help="only this partition number")
    parser.add_argument(
        "--format",
        choices=("jsonl", "text"),
        default="text",
        help="jsonl: one JSON object per line; text: `name: value` pairs (default)",
    )
    args = parser.parse_args(argv)
    if args.partition is not None and args.partition < 0:
        parser.error(f"--partition is {args.partition}, expected a number >= 0")
    try:
        write_dump(
            dump_lines(args.log_dir, topic=args.topic, partition=args.partition),
            sys.stdout,
            fmt=args.format,
        )
    except DumpError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return 0
