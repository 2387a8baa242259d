"""Leader-side state of one partition: its Log, replicas, ISR and high watermark.

The high watermark (HW) is the minimum log end offset over the ISR; consumers read only
below it. In a cluster it advances only while the ISR has at least min.insync.replicas
members (KIP-966), so the replicas that left the ISR as it fell below (the eligible leader
replicas, ELR) hold everything committed. A standalone broker is the only replica, so its
HW follows its LEO. Fetches that
wait for data (long polls) and acks=-1 produces that wait for the HW register asyncio
futures here and are woken when the partition's offsets move.

Like the Log, a Partition belongs to the broker's event loop and is not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from enum import Enum

from system_under_test.errors import BrokerError, ErrorCode
from system_under_test.event_log import EventLog
from system_under_test.log.log import (
    AppendInfo,
    FetchData,
    Log,
    LogConfig,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from system_under_test.log.record import (
    CorruptRecordError,
    decode_records,
    read_base_offset,
    records_from,
)
from system_under_test.replication.eligible_leader_replicas import (
    effective_min_isr,
    elr_after_isr_change,
)
from system_under_test.replication.isr import IsrTracker
from system_under_test.replication.leader_epoch_cache import LeaderEpochCache

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2


class Role(Enum):
    """What this broker is for a partition."""

    LEADER = "leader"
    FOLLOWER = "follower"
    FENCED = "fenced"
    """Was leader, but lost its ZooKeeper session: it must not act until told again."""


@dataclass(frozen=True)
class IsrChange:
    """An ISR (and the ELR that goes with it) this leader wants written to ZooKeeper, and
    why; with what the leader knew when it decided (logged with the change): its ISR then,
    its high watermark, and each replica's log end offset as it knew it (its own included;
    -1: not fetched yet)."""

    isr: tuple[int, ...]
    reason: str
    elr: tuple[int, ...] = ()
    previous_isr: tuple[int, ...] = ()
    high_watermark: int | None = None
    log_end_offsets: dict[int, int] = field(default_factory=dict)


class Partition:
    """One partition hosted by this broker: its log, role, ISR and high watermark."""

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
        epoch_cache: LeaderEpochCache | None = None,
        events: EventLog | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.local_broker_id = local_broker_id
        self.role = Role.LEADER
        self.leaderships_ended = 0
        """How often this replica stopped leading (made a follower, or fenced): while it
        leads with the same count it has led without a break, whatever its epoch became."""
        self.leader_id = local_broker_id
        self.leader_epoch = leader_epoch
        self.zk_version = 0
        self.controller_epoch = 0
        self.replicas = list(replicas) if replicas is not None else [local_broker_id]
        self.isr = set(isr) if isr is not None else {local_broker_id}
        self.elr: tuple[int, ...] = ()
        self.epoch_cache = epoch_cache or LeaderEpochCache(None)
        self.events = events
        self.tracker: IsrTracker | None = None
        self.isr_update_pending = False
        if high_watermark is None:
            # The sole replica: everything in the local log is committed.
            high_watermark = log.log_end_offset if self.isr == {local_broker_id} else 0
        self._high_watermark = min(high_watermark, log.log_end_offset)
        # Recovery may have cut the log's tail after the cache was written: the cache must not
        # claim epochs for offsets the log no longer has (Kafka truncates it on load too).
        self.epoch_cache.truncate_from_end(log.log_end_offset)
        self._waiters: set[asyncio.Future[None]] = set()

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, {self.role.value}, "
            f"epoch={self.leader_epoch}, hw={self._high_watermark}, "
            f"leo={self.log.log_end_offset}, isr={sorted(self.isr)}, elr={list(self.elr)})"
        )

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

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

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def min_isr(self) -> int:
        """The ISR size below which acks=-1 is refused and the high watermark stands still."""
        return effective_min_isr(self.log.config.min_insync_replicas, len(self.replicas))

    # --- role changes (LeaderAndIsr) ------------------------------------------------------

    def make_leader(
        self,
        *,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        zk_version: int,
        elr: tuple[int, ...] = (),
        lag_time_max_ms: int,
        lag_max_messages: int,
        now_ms: int,
    ) -> None:
        """Become leader in ``leader_epoch``; followers start out unknown."""
        self.role = Role.LEADER
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.isr = set(isr)
        self.elr = tuple(elr)
        self.replicas = list(replicas)
        self.zk_version = zk_version
        self.isr_update_pending = False
        self.epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        self.tracker = IsrTracker(
            self.local_broker_id,
            replicas,
            isr,
            lag_time_max_ms=lag_time_max_ms,
            lag_max_messages=lag_max_messages,
            now_ms=now_ms,
        )
        self._maybe_advance_high_watermark()
        self._wake_waiters()

    def make_follower(
        self,
        *,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        zk_version: int,
        elr: tuple[int, ...] = (),
    ) -> None:
        """Follow ``leader`` (-1: no leader yet); waiting acks=-1 produces learn it at once."""
        if self.role is Role.LEADER:
            self.leaderships_ended += 1
        self.role = Role.FOLLOWER
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        self.isr = set(isr)
        self.elr = tuple(elr)
        self.replicas = list(replicas)
        self.zk_version = zk_version
        self.tracker = None
        self.isr_update_pending = False
        self._wake_waiters()

    def fence(self) -> None:
        """Stop acting as leader (the ZooKeeper session was lost) until told again."""
        if self.role is Role.LEADER:
            self.leaderships_ended += 1
            self.role = Role.FENCED
            self.tracker = None
            self._wake_waiters()

    def truncate_to(self, offset: int, *, reason: str = "diverged") -> None:
        """Drop everything at and after ``offset`` (a follower diverged from its leader);
        ``reason`` names the rule that chose the offset, for the event log."""
        if offset < self.log.log_end_offset:
            end = self.log.log_end_offset
            log.info("%s: truncating from %d to %d (%s)", self.name, end, offset, reason)
            self.log.truncate_to(offset)
            if self.events is not None:
                self.events.truncation(
                    key=self.name,
                    from_offset=end,
                    to_offset=self.log.log_end_offset,
                    requested_offset=offset,
                    leader_epoch=self.leader_epoch,
                    reason=reason,
                )
        self.epoch_cache.truncate_from_end(self.log.log_end_offset)
        if self._high_watermark > self.log.log_end_offset:
            self._high_watermark = self.log.log_end_offset

    def _require_leader(self) -> None:
        if self.role is not Role.LEADER:
            leader = self.leader_id if self.role is Role.FOLLOWER else -1
            raise BrokerError(
                ErrorCode.NOT_LEADER_FOR_PARTITION,
                f"broker {self.local_broker_id} is not the leader of {self.name} "
                f"(leader: {leader}); refresh metadata",
            )

    # --- producing -----------------------------------------------------------------------

    def append_as_leader(self, batch: bytearray | memoryview, *, required_acks: int) -> AppendInfo:
        """Validate and append a producer's batch, assigning its offsets.

        Raises BrokerError with a definite code (nothing written) when the batch is refused;
        KAFKA_STORAGE_ERROR (indeterminate) when the disk fails mid-append.
        """
        self._require_leader()
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
            info = self.log.append(batch, assign_offsets=True, leader_epoch=self.leader_epoch)
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
        """For an acks=-1 produce: NONE once the HW passed last_offset, None while still
        waiting; NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas
        meanwhile (then the HW stands still: not waited for)."""
        if self.role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_FOR_PARTITION
        if self._high_watermark <= last_offset:
            # Below the minimum the high watermark stands still (KIP-966): no use waiting.
            if self.tracker is not None and len(self.isr) < self.min_isr:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
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
        if replica_id != DEBUG_REPLICA_ID:
            self._require_leader()
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
        stamps = [r.timestamp for r in decode_records(found.records) if r.offset == offset]
        return (stamps[0] if stamps else -1), offset

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

    def _maybe_advance_high_watermark(self) -> bool:
        """HW = min LEO over the ISR, while the ISR has min.insync.replicas members; it never
        goes back. True if it moved."""
        if self.role is not Role.LEADER:
            return False
        leader_end = self.log.log_end_offset
        if self.tracker is None:  # standalone: the only replica
            new_hw = leader_end if self.isr <= {self.local_broker_id} else self._high_watermark
        elif len(self.isr) < self.min_isr:
            return False
        else:
            new_hw = self.tracker.high_watermark(leader_end)
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            return True
        return False

    # --- replication: the leader's side ----------------------------------------------------

    def on_follower_fetch(self, follower: int, fetch_offset: int, now_ms: int) -> IsrChange | None:
        """A follower fetched from ``fetch_offset``; an ISR expansion to write, if due."""
        self._require_leader()
        assert self.tracker is not None
        self.tracker.on_fetch(follower, fetch_offset, self.log.log_end_offset, now_ms)
        if self._maybe_advance_high_watermark():
            self._wake_waiters()
        if self.isr_update_pending or follower in self.isr:
            return None
        epoch_start = self.epoch_cache.start_offset_of_latest_epoch()
        if self.tracker.ready_to_join(follower, self._high_watermark, max(epoch_start, 0)):
            return self._isr_change(
                tuple(sorted(self.isr | {follower})),
                f"expand: broker {follower} caught up to offset {fetch_offset}",
            )
        return None

    def _isr_change(self, isr: tuple[int, ...], reason: str) -> IsrChange:
        """`isr` to write, with what this leader knows now."""
        assert self.tracker is not None
        ends = {b: state.log_end_offset for b, state in self.tracker.followers.items()}
        ends[self.local_broker_id] = self.log.log_end_offset
        return IsrChange(
            isr,
            reason,
            elr_after_isr_change(self.isr, isr, self.elr, self.min_isr),
            tuple(sorted(self.isr)),
            self._high_watermark,
            dict(sorted(ends.items())),
        )

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """An ISR without the followers that fell behind, if any did."""
        if self.role is not Role.LEADER or self.tracker is None or self.isr_update_pending:
            return None
        lagging = self.tracker.out_of_sync(self.log.log_end_offset, now_ms)
        if not lagging:
            return None
        details = ", ".join(
            f"{b} ({self.tracker.lag_messages(b, self.log.log_end_offset)} behind)" for b in lagging
        )
        return self._isr_change(
            tuple(sorted(self.isr - set(lagging))), f"shrink: lagging follower(s) {details}"
        )

    def apply_isr(self, isr: tuple[int, ...], elr: tuple[int, ...], zk_version: int) -> None:
        """The ISR change (and its ELR) was written to ZooKeeper: adopt it."""
        self.isr = set(isr)
        self.elr = tuple(elr)
        self.zk_version = zk_version
        if self.tracker is not None:
            self.tracker.isr = tuple(isr)
        self._maybe_advance_high_watermark()
        self._wake_waiters()

    def epoch_starts_from(self, offset: int) -> list[tuple[int, int]]:
        """(epoch, start offset) of the epoch holding ``offset`` and every later one."""
        entries = self.epoch_cache.entries
        out = [(self.epoch_cache.epoch_for_offset(offset), offset)]
        out += [(e, o) for e, o in entries if o > offset]
        return [(e, o) for e, o in out if e >= 0]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch, answered by the leader."""
        self._require_leader()
        return self.epoch_cache.end_offset_for(epoch, self.log.log_end_offset)

    # --- replication: the follower's side --------------------------------------------------

    def append_as_follower(
        self,
        records: bytes | bytearray | memoryview,
        leader_hw: int,
        epoch_starts: list[tuple[int, int]],
    ) -> int:
        """Append what the leader sent (offsets as the leader gave them); the new LEO.

        The leader sends whole batches from the one holding the fetch offset: where this log
        ends inside one of them (it was cut at a point the leader's batches do not share),
        only the records from the log end on are kept, re-encoded as a batch of their own.
        """
        if records and read_base_offset(records) < self.log.log_end_offset:
            records = records_from(records, self.log.log_end_offset)
        if records:
            self.log.append(records, assign_offsets=False)
        end = self.log.log_end_offset
        for epoch, start in epoch_starts:
            if start < end:
                self.epoch_cache.assign(epoch, start)
        new_hw = min(leader_hw, end)
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
        if records:
            self._wake_waiters()
        return end
