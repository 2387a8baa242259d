"""LeaderView: which node leads each partition, as last seen, for the `node` field of sends.

The producer routes a send to the partition's leader but does not say which broker that
was, so the workload keeps its own view from the admin client's `describe_topic`, refreshed
in the background. A send's `node` is therefore the leader the workload believed in when it
invoked the send: during a failover it may name the old leader for up to one refresh.
Brokers are named as the cluster runtimes name them: broker id 3 runs on node ``n3``.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from workloads.client import Admin, ClientFactory, OperationError

log = logging.getLogger(__name__)


def node_name(broker_id: int) -> str:
    """The node a broker runs on: ``n<broker id>``."""
    return f"n{broker_id}"


class LeaderView:
    """The leaders of one topic's partitions, refreshed every `interval_s` by a thread."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        client_factory: ClientFactory,
        interval_s: float = 1.0,
        request_timeout_ms: int = 2000,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_factory = client_factory
        self.interval_s = interval_s
        self._request_timeout_ms = request_timeout_ms
        self._leaders: dict[int, str] = {}
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread: threading.Thread | None = None

    def node(self, partition: int) -> str | None:
        """The node believed to lead `partition`, or None if unknown or leaderless."""
        return self._leaders.get(partition)

    def refresh(self, admin: Admin) -> bool:
        """Describe the topic once; False if no broker answered."""
        try:
            topic = admin.describe_topic(self.topic)
        except (OperationError, OSError) as err:
            log.debug("leader view of %s not refreshed: %s", self.topic, err)
            return False
        leaders: dict[int, str] = {}
        if topic is not None:
            for partition in topic.partitions:
                if partition.leader is not None:
                    leaders[partition.partition] = node_name(partition.leader)
        self._leaders = leaders  # swapped whole: readers need no lock
        return True

    def start(self, *, wait_s: float = 2.0) -> None:
        """Start refreshing; wait up to `wait_s` for the first view so early sends have one."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"leader-view-{self.topic}", daemon=True
        )
        self._thread.start()
        self._first.wait(wait_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._request_timeout_ms / 1000 * 3 + 1)
            self._thread = None

    def _run(self) -> None:
        admin = self.client_factory.admin(
            self.bootstrap, request_timeout_ms=self._request_timeout_ms
        )
        try:
            while True:
                self.refresh(admin)
                self._first.set()
                if self._stop.wait(self.interval_s):
                    return
        finally:
            with contextlib.suppress(Exception):
                admin.close()
