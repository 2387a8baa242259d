"""Observing the roles faults target (partition leaders and ISRs, the controller) on the
live cluster: squall's implementation of ``nemesis.protocols.RoleObserver``.

ZooKeeper is read first, the controller's own record, because it answers even when brokers
are paused (a broker-first read would wait out a request timeout per paused broker); the
brokers' metadata is the fallback when ZooKeeper does not answer (paused, killed, cut off).
Only what is asked for is read.
"""

from __future__ import annotations

from collections.abc import Collection

from kazoo.exceptions import KazooException

from nemesis.errors import TargetError
from nemesis.grudge import sorted_nodes
from nemesis.targets import ClusterView, PartitionView, parse_key
from system_under_test.client import AdminClient, BrokerError, ClientError
from system_under_test.client.metadata import ClusterMetadata
from system_under_test.zookeeper import ClusterMetadataStore, MetadataError


class ClusterRoles:
    """Reads roles through the cluster's bootstrap brokers and its ZooKeeper."""

    def __init__(
        self, *, brokers: Collection[str], zookeeper: str, bootstrap: str, zookeeper_connect: str
    ) -> None:
        self.brokers = tuple(sorted_nodes(brokers))
        self.zookeeper = zookeeper
        self.bootstrap = bootstrap
        self.zookeeper_connect = zookeeper_connect

    def observe(
        self, keys: Collection[str], *, controller: bool, timeout_s: float = 5.0
    ) -> ClusterView:
        """Partition leadership of ``keys`` and, if asked, the controller; TargetError when
        neither ZooKeeper nor any broker answers."""
        if not keys and not controller:
            return ClusterView(self.brokers, self.zookeeper)
        try:
            partitions, controller_id, live = self._from_zookeeper(keys, min(timeout_s, 3.0))
            return ClusterView(
                self.brokers, self.zookeeper, partitions, controller_id, "zookeeper", live
            )
        except (MetadataError, KazooException, OSError) as zk_error:
            try:
                return ClusterView(
                    self.brokers,
                    self.zookeeper,
                    self._partitions_from_brokers(keys, timeout_s),
                    self._controller_from_brokers(timeout_s) if controller else None,
                    source="brokers",
                )
            except (ClientError, BrokerError, OSError) as broker_error:
                raise TargetError(
                    f"cannot observe roles: ZooKeeper did not answer ({zk_error}) and no broker "
                    f"either ({broker_error}); target nodes by name instead"
                ) from None

    def _partitions_from_brokers(
        self, keys: Collection[str], timeout_s: float
    ) -> dict[str, PartitionView]:
        if not keys:
            return {}
        topics = sorted({parse_key(key)[0] for key in keys})
        with AdminClient(self.bootstrap, request_timeout_ms=int(timeout_s * 1000)) as admin:
            descriptions = admin.describe_topics(topics)
        return {
            f"{topic.name}-{p.partition}": PartitionView(
                p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr)
            )
            for topic in descriptions
            for p in topic.partitions
            if f"{topic.name}-{p.partition}" in keys
        }

    def _controller_from_brokers(self, timeout_s: float) -> int | None:
        metadata = ClusterMetadata(
            self.bootstrap,
            client_id="squall-nemesis",
            request_timeout_s=timeout_s,
            connect_timeout_s=timeout_s,
        )
        try:
            controller_id = metadata.refresh([]).controller_id
        finally:
            metadata.close()
        return controller_id if controller_id >= 0 else None

    def _from_zookeeper(
        self, keys: Collection[str], timeout_s: float
    ) -> tuple[dict[str, PartitionView], int | None, tuple[int, ...]]:
        store = ClusterMetadataStore(
            self.zookeeper_connect,
            session_timeout_ms=int(max(timeout_s, 4.0) * 1000),
            connection_timeout_ms=int(timeout_s * 1000),
        )
        store.start(create_layout=False)
        try:
            partitions: dict[str, PartitionView] = {}
            for key in keys:
                topic, partition = parse_key(key)
                found = store.partition_state(topic, partition)
                if found is None:
                    continue
                state, _version = found
                assignment = store.topic_assignment(topic) or {}
                partitions[key] = PartitionView(
                    state.leader,
                    state.leader_epoch,
                    tuple(assignment.get(partition, [])),
                    tuple(state.isr),
                )
            return partitions, store.controller_id(), tuple(store.broker_ids())
        finally:
            store.close()
