"""FinalRead: after healing, read every key from its start to its end, as Jepsen does.

A fresh consumer outside the group assigns every key, starts at the beginning of each log
and polls until every acknowledged offset has been seen and the end of every log reached,
or the deadline passes. If the logs stop growing short of an acknowledged offset (the data
is gone, not late), it stops after `settle_s` without progress rather than waiting out the
deadline. Each time it asks the brokers where the logs end (their high watermarks) it
records the question as a `log-ends` operation, `ok` with `{key: end}`, so that the checkers
can tell a log that ended short (a lost tail) from a read that stopped early. Every
operation is marked `final: true`; a failed poll is retried from where the read had got
to, a failed assign with a fresh consumer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.acknowledged import AcknowledgedSends
from workloads.client import ClientFactory, Consumer, OperationError, TopicPartition
from workloads.outcomes import describe_error
from workloads.recorder import Client, OperationRecorder
from workloads.spec import WorkloadSpec, key_name

_RETRY_PAUSE_S = 0.2
LOG_ENDS = "log-ends"
"""The `f` of the operation that asks where every log ends (docs/history.md)."""


@dataclass(frozen=True, slots=True)
class FinalReadResult:
    """How the final read ended.

    `complete`: every acknowledged offset was seen and every log read to its end.
    `reached`: per key, the offset after the last record read. `missing`: per key, the
    acknowledged offsets not seen (the checkers decide whether that is a loss).
    `log_ends`: per key, where the brokers last said its log ends (the last `ok`
    `log-ends` operation; empty if none was).
    """

    complete: bool
    reached: dict[str, int]
    missing: dict[str, list[int]] = field(default_factory=dict)
    log_ends: dict[str, int] = field(default_factory=dict)
    polls: int = 0
    records: int = 0
    elapsed_s: float = 0.0
    reason: str = ""


class FinalRead:
    """One final read of a workload's keys, recorded through a `final=True` recorder."""

    def __init__(
        self,
        spec: WorkloadSpec,
        bootstrap: str,
        recorder: OperationRecorder,
        acknowledged: AcknowledgedSends,
        *,
        client_factory: ClientFactory,
        deadline_s: float | None = None,
        settle_s: float | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.bootstrap = bootstrap
        self.client_factory = client_factory
        self.recorder = recorder
        self.acknowledged = acknowledged
        self.deadline_s = spec.final_read_deadline_s if deadline_s is None else deadline_s
        self.settle_s = spec.final_read_settle_s if settle_s is None else settle_s
        self.stop = stop if stop is not None else threading.Event()
        self._clock = clock
        self.partitions: list[TopicPartition] = [(spec.topic, p) for p in range(spec.partitions)]
        self.keys = {tp: key_name(*tp) for tp in self.partitions}

    def run(self) -> FinalReadResult:
        started = self._clock()
        deadline = started + self.deadline_s
        remaining = {tp: set(self.acknowledged.offsets(key)) for tp, key in self.keys.items()}
        client = self.recorder.new_client()
        consumer: Consumer | None = None
        reached: dict[TopicPartition, int] = {}
        log_ends: dict[TopicPartition, int] = {}
        polls = records_read = 0
        last_progress = self._clock()
        reason = "the deadline passed"
        complete = False
        try:
            while self._clock() < deadline and not self.stop.is_set():
                if consumer is None:
                    keys = list(self.keys.values())
                    _, consumer = self.recorder.record_assign(
                        client,
                        "assign",
                        keys,
                        lambda: self._open(reached),
                        ok_fields=self._positions,
                    )
                    if consumer is None:
                        time.sleep(_RETRY_PAUSE_S)
                        continue
                    for tp in self.partitions:
                        reached.setdefault(tp, consumer.position(tp))
                pending = self.recorder.invoke_poll(client)
                polls += 1
                try:
                    records = consumer.poll(self.spec.poll_timeout_ms)
                except Exception as err:
                    for tp, offset in reached.items():
                        consumer.seek(tp, offset)
                    self.recorder.complete_poll(pending, err)
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                for record in records:
                    tp = (record.topic, record.partition)
                    reached[tp] = record.offset + 1
                    remaining[tp].discard(record.offset)
                self.recorder.complete_poll(pending, records)
                if records:
                    records_read += len(records)
                    last_progress = self._clock()
                    continue
                settled = self._clock() - last_progress >= self.settle_s
                if not settled and any(remaining.values()):
                    continue
                ends = self._log_ends(client)
                if ends is not None:
                    log_ends = ends
                if ends is not None and all(
                    reached.get(tp, 0) >= ends[tp] for tp in self.partitions
                ):
                    if not any(remaining.values()):
                        complete, reason = True, ""
                        break
                    if settled:
                        reason = (
                            f"the logs ended short of acknowledged offsets and did not grow "
                            f"for {self.settle_s:g} s"
                        )
                        break
            else:
                if self.stop.is_set():
                    reason = "stopped"
        finally:
            if consumer is not None:
                with contextlib.suppress(Exception):
                    consumer.close()
        return FinalReadResult(
            complete=complete,
            reached={self.keys[tp]: offset for tp, offset in reached.items()},
            missing={self.keys[tp]: sorted(left) for tp, left in remaining.items() if left},
            log_ends={self.keys[tp]: end for tp, end in log_ends.items()},
            polls=polls,
            records=records_read,
            elapsed_s=self._clock() - started,
            reason=reason,
        )

    def _open(self, resume: dict[TopicPartition, int]) -> Consumer:
        """A consumer outside the group at the start of each log (or where a read got to)."""
        consumer = self.client_factory.consumer(
            self.bootstrap,
            settings=self.spec.consumer_settings(None),
            client_id="squall-final-read",
        )
        try:
            consumer.assign(self.partitions)
            for tp in self.partitions:
                if tp in resume:
                    consumer.seek(tp, resume[tp])
                else:
                    consumer.seek_to_beginning(tp)
        except BaseException:
            with contextlib.suppress(Exception):
                consumer.close()
            raise
        return consumer

    def _positions(self, consumer: Consumer) -> dict[str, Any]:
        """The `positions` of the `ok` assign: where the read starts per key."""
        return {"positions": {self.keys[tp]: consumer.position(tp) for tp in self.partitions}}

    def _log_ends(self, client: Client) -> dict[TopicPartition, int] | None:
        """Where every log ends now (its high watermark), None if a broker did not say;
        the question and its answer are recorded as a `log-ends` operation."""
        keys = [self.keys[tp] for tp in self.partitions]
        pending = self.recorder.invoke(client, LOG_ENDS, keys)
        try:
            ends = self._end_offsets()
        except BaseException as err:  # a read changes nothing: fail
            self.recorder.complete(pending, "fail", keys, error=describe_error(err))
            if isinstance(err, OperationError | OSError):
                return None
            raise
        self.recorder.complete(pending, "ok", {self.keys[tp]: ends[tp] for tp in self.partitions})
        return ends

    def _end_offsets(self) -> dict[TopicPartition, int]:
        """Every log's end as its leader tells it (ListOffsets latest: the high watermark)."""
        admin = self.client_factory.admin(self.bootstrap, request_timeout_ms=5000)
        with contextlib.closing(admin):
            return {tp: admin.end_offset(tp) for tp in self.partitions}
