"""The console producer and consumer: JSON lines on stdout, as scripts expect."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple, TextIO

from system_under_test.client import Consumer, Producer, SendFuture
from system_under_test.client.exceptions import (
    BrokerUnavailableError,
    ConnectionLostError,
    ProduceError,
)
from system_under_test.errors import ErrorCode

OffsetSpec = Literal["earliest", "latest"] | int


def _emit(out: TextIO, obj: dict[str, object]) -> None:
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")


class ProduceTally(NamedTuple):
    """What became of the lines sent: acknowledged, failed, and of the failures those
    because no broker could be reached (with the first such error)."""

    acknowledged: int
    failed: int
    unreachable: int = 0
    first_unreachable: str | None = None

    @property
    def cluster_unreachable(self) -> bool:
        """Nothing got through, and every failure was a broker that could not be reached."""
        return self.acknowledged == 0 and self.failed > 0 and self.unreachable == self.failed


def _unreachable(err: BaseException) -> bool:
    if isinstance(err, BrokerUnavailableError | ConnectionLostError):
        return True
    return isinstance(err, ProduceError) and err.error is ErrorCode.NETWORK_EXCEPTION


def _result_line(future: SendFuture) -> tuple[dict[str, object], bool]:
    """The line to print for a send, and whether it failed for want of a reachable broker."""
    try:
        metadata = future.result()
    except Exception as err:
        return {"error": str(err)}, _unreachable(err)
    return {"partition": metadata.partition, "offset": metadata.offset}, False


def produce_lines(
    lines: Iterable[str],
    out: TextIO,
    *,
    bootstrap: str,
    topic: str,
    partition: int | None,
    acks: int,
    mode: Literal["sync", "async"],
    key: str | None = None,
    key_separator: str | None = None,
    window: int = 10_000,
) -> ProduceTally:
    """Send one value per line; print one result line per input line, in input order."""
    ok = failed = unreachable = 0
    first_unreachable: str | None = None
    pending: deque[SendFuture | dict[str, object]] = deque()

    def drain(keep: int) -> None:
        nonlocal ok, failed, unreachable, first_unreachable
        while len(pending) > keep:
            head = pending.popleft()
            line, no_broker = (head, False) if isinstance(head, dict) else _result_line(head)
            if "error" in line:
                failed += 1
                if no_broker:
                    unreachable += 1
                    first_unreachable = first_unreachable or str(line["error"])
            else:
                ok += 1
            _emit(out, line)

    with Producer(bootstrap, acks=acks, mode=mode) as producer:
        for raw in lines:
            text = raw.rstrip("\n").rstrip("\r")
            record_key = key
            if key_separator is not None:
                if key_separator not in text:
                    pending.append(
                        {"error": f"no key separator {key_separator!r} in line {text!r}"}
                    )
                    continue
                record_key, text = text.split(key_separator, 1)
            pending.append(
                producer.send(
                    topic,
                    text.encode(),
                    key=record_key.encode() if record_key is not None else None,
                    partition=partition,
                )
            )
            drain(window)
        producer.flush()
        drain(0)
    out.flush()
    return ProduceTally(ok, failed, unreachable, first_unreachable)


def consume_records(
    out: TextIO,
    *,
    bootstrap: str,
    topic: str,
    partition: int,
    from_offset: OffsetSpec | None,
    max_records: int | None,
    timeout_ms: int | None,
    print_key: bool = False,
    print_timestamp: bool = False,
    group: str | None = None,
    zookeeper: str | None = None,
    commit: bool = False,
    consumer_config: Mapping[str, object] | None = None,
) -> int:
    """Print ``{"offset":O,"value":"..."}`` per record until max_records or an idle timeout.

    Where to start: from_offset when given; else, in a group, the group's committed offset,
    or per auto.offset.reset (earliest unless consumer_config says otherwise) when it has
    none; else earliest. With commit, the offset after the last record printed is committed
    for the group after each batch (printed first, then committed: at least once).
    """
    config: dict[str, object] = dict(consumer_config or {})
    if group is not None:
        config["group.id"] = group
        if from_offset is None:
            config.setdefault("auto.offset.reset", "earliest")
    if zookeeper is not None:
        config["zookeeper.connect"] = zookeeper
    printed = 0
    consumer = Consumer(bootstrap, config=config)
    try:
        consumer.assign([(topic, partition)])  # in a group: at the committed offset
        if from_offset is None:
            if group is None:
                consumer.seek_to_beginning(topic, partition)
        elif from_offset == "earliest":
            consumer.seek_to_beginning(topic, partition)
        elif from_offset == "latest":
            consumer.seek_to_end(topic, partition)
        else:
            consumer.seek(topic, partition, int(from_offset))
        last_record = time.monotonic()
        while max_records is None or printed < max_records:
            batch = consumer.poll(200 if timeout_ms is None else min(200, max(timeout_ms, 1)))
            if not batch:
                if timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                    break
                continue
            last_record = time.monotonic()
            next_offset = batch[0].offset
            for record in batch:
                line: dict[str, object] = {"offset": record.offset}
                if print_key:
                    line["key"] = (
                        None if record.key is None else record.key.decode(errors="replace")
                    )
                if print_timestamp:
                    line["timestamp"] = record.timestamp
                line["value"] = (
                    None if record.value is None else record.value.decode(errors="replace")
                )
                _emit(out, line)
                printed += 1
                next_offset = record.offset + 1
                if max_records is not None and printed >= max_records:
                    break
            out.flush()
            if commit:
                consumer.commit({(topic, partition): next_offset})
    finally:
        consumer.close()
    return printed
