"""Leader-side state of one partition: its Log, replicas, ISR and high watermark.

The high watermark (HW) is the minimum log end offset over the ISR; consumers read only
below it. A standalone broker is the only replica, so its HW follows its LEO. Fetches that
wait for data (long polls) and acks=-1 produces that wait for the HW register asyncio
futures here and are woken when the partition's offsets move.

Like the Log, a Partition belongs to the broker's event loop and is not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging

from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.log.log import (
    AppendInfo,
    FetchData,
    Log,
    LogConfig,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from system_under_test.log.record import CorruptRecordError, read_timestamp

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2


class Partition:
    """One partition hosted by this broker, as its leader."""

    def __init__(
        self,
        topic: str,
        partition: int,
        log: Log,
        *,
        local_broker_id: int,
        leader_epoch: int = 0,
        replicas: list[int] | None = None,
        isr: list[int] | None = None,
        high_watermark: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = local_broker_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas) if replicas is not None else [local_broker_id]
        self.isr = set(isr) if isr is not None else {local_broker_id}
        self._replica_end_offsets: dict[int, int] = {}
        """Followers' LEOs as their fetches report them (replication fills this in)."""
        if high_watermark is None:
            # The sole replica: everything in the local log is committed.
            high_watermark = log.log_end_offset if self.isr == {local_broker_id} else 0
        self._high_watermark = min(high_watermark, log.log_end_offset)
        self._waiters: set[asyncio.Future[None]] = set()

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, hw={self._high_watermark}, "
            f"leo={self.log.log_end_offset}, isr={sorted(self.isr)})"
        )

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # --- producing -----------------------------------------------------------------------

    def append_as_leader(self, batch: bytearray | memoryview, *, required_acks: int) -> AppendInfo:
        """Validate and append a producer's batch, assigning its offsets.

        Raises BrokerError with a definite code (nothing written) when the batch is refused;
        KAFKA_STORAGE_ERROR (indeterminate) when the disk fails mid-append.
        """
        config = self.log.config
        if required_acks == -1 and len(self.isr) < config.min_insync_replicas:
            raise BrokerError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.topic}-{self.partition} has {len(self.isr)} in-sync replica(s), "
                f"min.insync.replicas is {config.min_insync_replicas}; nothing was written",
            )
        if len(batch) > config.segment_bytes:
            raise BrokerError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"batch of {len(batch)} bytes is larger than segment.bytes={config.segment_bytes}; "
                "send smaller batches",
            )
        try:
            info = self.log.append(batch, assign_offsets=True)
        except CorruptRecordError as err:
            raise BrokerError(ErrorCode.CORRUPT_MESSAGE, str(err)) from None
        except RecordTooLargeError as err:
            raise BrokerError(ErrorCode.MESSAGE_TOO_LARGE, str(err)) from None
        except OSError as err:
            log.error("%s-%d: append failed: %s", self.topic, self.partition, err)
            raise BrokerError(ErrorCode.KAFKA_STORAGE_ERROR, f"append failed: {err}") from None
        self._maybe_advance_high_watermark()
        self._wake_waiters()
        return info

    def check_committed(self, last_offset: int) -> ErrorCode | None:
        """For an acks=-1 produce: NONE once the HW passed last_offset (NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if the ISR shrank below min.insync.replicas meanwhile), None while still waiting."""
        if self._high_watermark <= last_offset:
            return None
        if len(self.isr) < self.log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    # --- fetching ------------------------------------------------------------------------

    def fetch_limit(self, replica_id: int) -> int:
        """The offset a fetcher may read up to: the HW for consumers, the LEO for replicas."""
        if replica_id == CONSUMER_REPLICA_ID:
            return self._high_watermark
        return self.log.log_end_offset

    def read(
        self, offset: int, max_bytes: int, *, replica_id: int, min_one_record: bool
    ) -> FetchData:
        """Whole records from offset below the fetcher's limit; OFFSET_OUT_OF_RANGE otherwise."""
        limit = self.fetch_limit(replica_id)
        if replica_id == CONSUMER_REPLICA_ID and limit < offset <= self.log.log_end_offset:
            return FetchData(b"", offset)
        try:
            return self.log.read(offset, max_bytes, max_offset=limit, min_one_record=min_one_record)
        except OffsetOutOfRangeError as err:
            raise BrokerError(ErrorCode.OFFSET_OUT_OF_RANGE, str(err)) from None

    def offset_for(self, timestamp: int, *, replica_id: int) -> tuple[int, int]:
        """ListOffsets: (timestamp, offset) for -1 (latest), -2 (earliest) or a time in ms.

        By time: the first visible offset whose timestamp is >= timestamp and that record's
        timestamp, or (-1, -1) if there is none.
        """
        if timestamp == -1:
            return -1, self.fetch_limit(replica_id)
        if timestamp == -2:
            return -1, self.log.log_start_offset
        if timestamp < 0:
            raise BrokerError(
                ErrorCode.INVALID_REQUEST,
                f"timestamp {timestamp}: use -1 (latest), -2 (earliest) or milliseconds >= 0",
            )
        offset = self.log.offset_for_timestamp(timestamp)
        if offset is None or offset >= self.fetch_limit(replica_id):
            return -1, -1
        found = self.log.read(offset, 1, min_one_record=True)
        return (read_timestamp(found.records) if found.records else -1), offset

    # --- waiting -------------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        """Resolve waiter the next time this partition's offsets move."""
        self._waiters.add(waiter)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake_all(self) -> None:
        """Wake every waiter (used at shutdown so long polls answer at once)."""
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        if self._waiters:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters.clear()

    def _maybe_advance_high_watermark(self) -> None:
        """HW = min LEO over the ISR; it never goes back."""
        ends = [
            self.log.log_end_offset
            if replica == self.local_broker_id
            else self._replica_end_offsets.get(replica, 0)
            for replica in self.isr
        ]
        new_hw = min(ends) if ends else self._high_watermark
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
