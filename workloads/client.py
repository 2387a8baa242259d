"""The client protocol: what the queue workload needs from a database's client library.

As a Jepsen workload talks to a `Client` that each database supplies, the workers, the
recorder, the final read, topic set-up and the leader view speak only the protocols and
plain types of this module; a `ClientFactory` opens the producers, consumers and admin
clients of one system. squall's own is `workloads.squall_client.SquallClientFactory`.

Errors: an implementation raises `OperationError` for the failures of its system, with
`definite` true only when the operation certainly had no effect. The workload turns that
into the history's `fail` (certainly did not happen) or `info` (may have happened) per
operation, in `workloads.outcomes`; any other exception is taken as indeterminate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

TopicPartition = tuple[str, int]
"""(topic, partition): one key of the workload (in the history ``"<topic>-<partition>"``)."""


class OperationError(Exception):
    """An operation of a client failed; `str()` is the client's explanation.

    `code` names the failure (an error code or the client's exception class), `definite`
    says the operation certainly had no effect, and `committed` holds, for a commit, the
    offsets known to have been written before it failed.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        definite: bool = False,
        committed: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.definite = definite
        self.committed: dict[TopicPartition, int] = dict(committed or {})


class TopicRefusedError(OperationError):
    """The cluster refused to create a topic as asked (its name or config); retrying will
    not help."""


@dataclass(frozen=True, slots=True)
class SendResult:
    """An acknowledged send: its offset, or None when the client is told none (acks=0)."""

    offset: int | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record a poll returned."""

    topic: str
    partition: int
    offset: int
    value: bytes | None


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as the cluster describes it (brokers by id; `leader` None if none)."""

    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True, slots=True)
class TopicState:
    """One topic as the cluster describes it, partitions in order."""

    name: str
    partitions: list[PartitionState]


class SendFuture(Protocol):
    """The outcome of one send, known once the client has it."""

    def result(self, timeout_s: float | None = None) -> SendResult:
        """Wait for the outcome; raise the send's error, or TimeoutError after `timeout_s`."""
        ...

    def add_callback(self, fn: Callable[[SendFuture], None]) -> None:
        """Call `fn(self)` once the outcome is known, on the thread that learns it (at once
        if it is known already)."""
        ...


class Producer(Protocol):
    """Sends values to partitions; in async mode it batches and pipelines them."""

    def send(self, topic: str, partition: int, value: bytes) -> SendFuture: ...

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every send so far has its outcome."""
        ...

    def close(self, timeout_s: float | None = None) -> None: ...


class Consumer(Protocol):
    """Reads assigned partitions; a member of a group commits the group's offsets."""

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Read these partitions; in a group, each from the group's committed offset."""
        ...

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record `poll` returns for `tp`."""
        ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    def seek_to_beginning(self, tp: TopicPartition) -> None: ...

    def poll(self, timeout_ms: int) -> Sequence[Record]: ...

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit, per partition, the next offset the group is to read."""
        ...

    def close(self) -> None: ...


class GroupConsumer(Consumer, Protocol):
    """A member of a consumer group: the group's coordinator gives it its partitions, and
    takes them back and hands them out again at each rebalance (eager: all at once)."""

    def subscribe(self, topic: str) -> None:
        """Join the group's rebalancing for `topic`; partitions come with later polls."""
        ...

    def assignment(self) -> list[TopicPartition]:
        """The partitions the coordinator gave this member, as of the last poll."""
        ...

    def assignments(self) -> int:
        """How many assignments this member has been given so far (one per rebalance it
        took part in, even one that gave it the same partitions again)."""
        ...

    def generation(self) -> int:
        """The group generation of this member's current assignment (-1 before the first):
        the one its commits are made under."""
        ...


class Admin(Protocol):
    """Topic set-up and the cluster's view of a topic."""

    def create_topic(
        self, name: str, partitions: int, *, replication_factor: int, config: Mapping[str, str]
    ) -> bool:
        """Create a topic; False if it existed already. TopicRefusedError if it never will."""
        ...

    def describe_topic(self, name: str) -> TopicState | None:
        """Leaders, replicas and ISR of a topic's partitions; None if the cluster does not
        list the topic."""
        ...

    def end_offset(self, tp: TopicPartition) -> int:
        """The offset after the last record a consumer can read (the high watermark)."""
        ...

    def close(self) -> None: ...


class ClientFactory(Protocol):
    """Opens the clients of one system. `settings` are client settings by Kafka's names
    (the workload's `producer_settings()` / `consumer_settings()`); a consumer's include its
    group's."""

    def producer(
        self,
        bootstrap: str,
        *,
        acks: int,
        mode: Literal["sync", "async"],
        settings: Mapping[str, object],
        client_id: str,
    ) -> Producer: ...

    def consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> Consumer: ...

    def group_consumer(
        self, bootstrap: str, *, settings: Mapping[str, object], client_id: str
    ) -> GroupConsumer:
        """A consumer that joins its group's rebalancing (`group_membership`); clients
        without it raise OperationError."""
        ...

    def admin(self, bootstrap: str, *, request_timeout_ms: int) -> Admin: ...
