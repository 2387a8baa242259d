"""A consumer group's committed offsets in ZooKeeper, as Kafka 0.8's high-level consumer kept them.

One znode per partition, ``/consumers/<group>/offsets/<topic>/<partition>``, holding the next
offset to read (docs/history.md: a commit's offset is the next offset the group reads). Partitions
are written one at a time, as Kafka 0.8 did, so a commit of several partitions can land in
part; OffsetCommitError says what is known to have landed and whether anything may have. The
same session reads a partition's leader and epoch as the controller wrote them, which the
consumer checks before it believes a broker that says its position is out of range.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

from kazoo.exceptions import (
    BadArgumentsError,
    InvalidACLError,
    KazooException,
    NoAuthError,
)

from system_under_test.client.exceptions import OffsetCommitError, OffsetStoreError
from system_under_test.zookeeper import ClusterMetadataStore, MetadataError

TopicPartition = tuple[str, int]

# ZooKeeper refused these requests without applying them: the write certainly did not land.
_REJECTED = (NoAuthError, BadArgumentsError, InvalidACLError)


class ZooKeeperOffsetStore:
    """The committed offsets of one consumer group, over one ZooKeeper session."""

    def __init__(
        self,
        group: str,
        connect: str,
        *,
        session_timeout_ms: int = 6000,
        connection_timeout_ms: int = 6000,
    ) -> None:
        self.group = group
        self.connect = connect
        self._store = ClusterMetadataStore(
            connect,
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms,
        )
        self._started = False

    def start(self) -> None:
        """Open the ZooKeeper session; OffsetStoreError naming the connect string if it fails."""
        if self._started:
            return
        try:
            self._store.start()
        except MetadataError as err:
            raise OffsetStoreError(f"consumer group {self.group!r}: {err}") from None
        except KazooException as err:
            self._store.close()
            raise OffsetStoreError(
                f"consumer group {self.group!r}: ZooKeeper at {self.connect} refused to set up "
                f"its znodes ({type(err).__name__}); does the chroot exist and may this client "
                "write there? (zookeeper.connect)"
            ) from None
        self._started = True

    def close(self) -> None:
        """Close the ZooKeeper session; safe to call twice."""
        if self._started:
            self._started = False
            # A deliberate close is not a lost session: keep the store from warning about it.
            self._store.client.remove_listener(self._store._state_changed)
            self._store.close()

    def __enter__(self) -> ZooKeeperOffsetStore:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._started and self._store.connected

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Record each partition's next offset to read; OffsetCommitError if not all landed."""
        checked = {_checked_partition(tp): _checked_offset(tp, o) for tp, o in offsets.items()}
        done: dict[TopicPartition, int] = {}
        for (topic, partition), offset in checked.items():
            if not self.connected:
                # Nothing for this partition was sent: only the earlier writes stand.
                outcome = f"only {_describe(done)} was written" if done else "nothing was written"
                raise OffsetCommitError(
                    f"commit of {_describe(checked)} for group {self.group!r} failed, "
                    f"{outcome}: {self._not_connected()}",
                    definite=not done,
                    committed=done,
                )
            try:
                self._store.commit_offset(self.group, topic, partition, offset)
            except (KazooException, MetadataError) as err:
                definite = not done and isinstance(err, _REJECTED)
                outcome = "was not written" if definite else "may or may not have been written"
                raise OffsetCommitError(
                    f"commit of {topic}-{partition} at {offset} for group {self.group!r} to "
                    f"ZooKeeper at {self.connect} {outcome} ({_reason(err)})" + _landed(done),
                    definite=definite,
                    committed=done,
                ) from None
            done[(topic, partition)] = offset

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset (next to read) of a partition, None if never committed."""
        topic, partition = _checked_partition((topic, partition))
        if not self.connected:
            raise OffsetStoreError(
                f"reading the committed offset of {topic}-{partition} for group {self.group!r} "
                f"failed: {self._not_connected()}"
            )
        try:
            return self._store.committed_offset(self.group, topic, partition)
        except (KazooException, MetadataError) as err:
            raise OffsetStoreError(
                f"reading the committed offset of {topic}-{partition} for group {self.group!r} "
                f"from ZooKeeper at {self.connect} failed ({_reason(err)}); "
                "retry when ZooKeeper is reachable"
            ) from None

    def partition_leader(self, topic: str, partition: int) -> tuple[int, int] | None:
        """The partition's leader and leader epoch as the controller last wrote them to
        ZooKeeper (what every broker's metadata follows); None when ZooKeeper holds no state
        for it (its brokers keep their state elsewhere). OffsetStoreError when ZooKeeper
        cannot be read."""
        topic, partition = _checked_partition((topic, partition))
        if not self.connected:
            raise OffsetStoreError(
                f"reading the state of {topic}-{partition} failed: {self._not_connected()}"
            )
        try:
            found = self._store.partition_state(topic, partition)
        except (KazooException, MetadataError) as err:
            raise OffsetStoreError(
                f"reading the state of {topic}-{partition} from ZooKeeper at {self.connect} "
                f"failed ({_reason(err)})"
            ) from None
        return None if found is None else (found[0].leader, found[0].leader_epoch)

    def _not_connected(self) -> str:
        if not self._started:
            return "the offset store is not open (call start(), or the consumer was closed)"
        return (
            f"not connected to ZooKeeper at {self.connect} (reconnecting, or the session "
            "expired); retry when ZooKeeper is reachable"
        )


def _checked_partition(tp: TopicPartition) -> TopicPartition:
    topic, partition = tp
    if not topic or "/" in topic or isinstance(partition, bool) or not isinstance(partition, int):
        raise ValueError(f"not a topic-partition: {tp!r}")
    if partition < 0:
        raise ValueError(f"partition {topic}-{partition}: partitions start at 0")
    return topic, partition


def _checked_offset(tp: TopicPartition, offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(
            f"offset {offset!r} for {tp[0]}-{tp[1]}: commit the next offset to read, an int >= 0"
        )
    return offset


def _describe(offsets: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{t}-{p} at {o}" for (t, p), o in offsets.items()) or "no offsets"


def _landed(done: Mapping[TopicPartition, int]) -> str:
    return f"; already written: {_describe(done)}" if done else ""


def _reason(err: Exception) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
