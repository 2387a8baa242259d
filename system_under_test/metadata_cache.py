"""The broker's view of the cluster, as it answers Metadata requests.

A standalone broker fills it itself (one broker, leader of everything); in ZooKeeper mode
the controller's UpdateMetadata requests will fill it. Request handlers only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker and the address clients use."""

    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leadership of one partition."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class MetadataCache:
    """Brokers, controller and partition states; replaced piecewise, read by handlers."""

    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    controller_id: int = NO_LEADER
    topics: dict[str, dict[int, PartitionState]] = field(default_factory=dict)

    def set_broker(self, endpoint: BrokerEndpoint) -> None:
        self.brokers[endpoint.broker_id] = endpoint

    def set_topic(self, topic: str, partitions: dict[int, PartitionState]) -> None:
        self.topics[topic] = dict(partitions)

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def partitions(self, topic: str) -> dict[int, PartitionState] | None:
        """The partitions of topic, or None if the cluster has no such topic."""
        return self.topics.get(topic)

    def alive_brokers(self) -> list[BrokerEndpoint]:
        return [self.brokers[b] for b in sorted(self.brokers)]
