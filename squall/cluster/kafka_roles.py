"""Observing roles through Kafka's own Metadata API, for clusters squall did not deploy: an
implementation of ``nemesis.protocols.RoleObserver`` that needs nothing but the bootstrap
servers (Kafka with ZooKeeper or KRaft, Redpanda, our brokers' Kafka listeners).

Kafka's metadata names each partition's leader, replicas and ISR, the live brokers and a
controller (under KRaft, a broker the client may use for admin requests, not the quorum's
leader). It carries no leader epoch through librdkafka's API, so epochs are -1.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from nemesis.errors import TargetError
from nemesis.grudge import sorted_nodes
from nemesis.targets import ClusterView, PartitionView, parse_key

if TYPE_CHECKING:  # the type list_topics returns; confluent_kafka.admin does not export it
    from confluent_kafka.admin._metadata import ClusterMetadata

log = logging.getLogger(__name__)


class KafkaRoles:
    """Reads roles from the cluster's Metadata, through one librdkafka admin client."""

    def __init__(self, *, brokers: Collection[str], zookeeper: str, bootstrap: str) -> None:
        self.brokers = tuple(sorted_nodes(brokers))
        self.zookeeper = zookeeper
        self.bootstrap = bootstrap
        self._admin: AdminClient | None = None

    def _client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(
                {"bootstrap.servers": self.bootstrap, "socket.nagle.disable": True}, logger=log
            )
        return self._admin

    def _metadata(self, timeout_s: float, *, hint: str = "") -> ClusterMetadata:
        """The cluster's Metadata (every topic); TargetError when no broker answers."""
        try:
            return self._client().list_topics(timeout=timeout_s)
        except KafkaException as err:
            raise TargetError(
                f"no broker of {self.bootstrap} answered a Metadata request in "
                f"{timeout_s:.0f} s ({err.args[0].str()}){hint}"
            ) from None

    def observe(
        self, keys: Collection[str], *, controller: bool, timeout_s: float = 5.0
    ) -> ClusterView:
        """Partition leadership of ``keys`` and the live brokers, with the controller the
        metadata names; TargetError when no broker answers in ``timeout_s``."""
        if not keys and not controller:
            return ClusterView(self.brokers, self.zookeeper)
        metadata = self._metadata(timeout_s, hint="; target nodes by name instead")
        partitions: dict[str, PartitionView] = {}
        for key in keys:
            topic, partition = parse_key(key)
            found = metadata.topics.get(topic)
            state = found.partitions.get(partition) if found is not None else None
            if state is None:
                continue
            partitions[key] = PartitionView(
                leader=int(state.leader),
                leader_epoch=-1,
                replicas=tuple(int(b) for b in state.replicas),
                isr=tuple(int(b) for b in state.isrs),
            )
        controller_id = metadata.controller_id if controller else None
        return ClusterView(
            self.brokers,
            self.zookeeper,
            partitions,
            controller_id if controller_id is not None and controller_id >= 0 else None,
            source="kafka-metadata",
            live=tuple(sorted(int(b) for b in metadata.brokers)),
        )

    def listener(self, broker: int, timeout_s: float = 5.0) -> tuple[str, int] | None:
        """The host and port the cluster's metadata advertises for ``broker``; None when it
        does not list it (TargetError when no broker answers)."""
        found = self._metadata(timeout_s).brokers.get(broker)
        return None if found is None else (str(found.host), int(found.port))

    def status(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """The controller, the live brokers and every partition's leader, replicas and ISR,
        as ``squall cluster status`` shows them; TargetError when no broker answers."""
        metadata = self._metadata(timeout_s)
        return {
            "controller": metadata.controller_id,
            "registered_brokers": sorted(int(b) for b in metadata.brokers),
            "partitions": [
                {
                    "topic": name,
                    "partition": number,
                    "replicas": list(state.replicas),
                    "leader": state.leader,
                    "leader_epoch": -1,
                    "isr": list(state.isrs),
                }
                for name, topic in sorted(metadata.topics.items())
                for number, state in sorted(topic.partitions.items())
            ],
        }
