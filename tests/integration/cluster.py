"""A real cluster for integration tests: one ZooKeeper and broker processes on this machine."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from squall.cluster.broker_process import BrokerProcess
from squall.cluster.zookeeper_server import ZooKeeperServer
from system_under_test.client import AdminClient, Consumer
from tests.support import wait_for


class LocalCluster:
    """ZooKeeper plus brokers 1..n as processes, each with its own data directory."""

    def __init__(
        self,
        root: Path,
        zookeeper: ZooKeeperServer,
        brokers: int = 3,
        *,
        per_broker: Callable[[int], Mapping[str, object]] | None = None,
        **settings: object,
    ) -> None:
        """``settings`` apply to every broker; ``per_broker(i)`` adds broker i's own."""
        self.root = root
        self.zookeeper = zookeeper
        base: dict[str, object] = {
            "zookeeper.connect": f"{zookeeper.connect_string}/squall-{uuid.uuid4().hex[:12]}",
            "zookeeper.session.timeout.ms": 2000,
            "replica.lag.time.max.ms": 3000,
            "replica.fetch.wait.max.ms": 200,
            "log.flush.interval.messages": 1,
            # Leadership moves only when a test moves it (a test of the rebalance or of the
            # controlled shutdown turns it on); a stop is a plain stop, quick at teardown.
            "auto.leader.rebalance.enable": "false",
            "controlled.shutdown.enable": "false",
        }
        base.update({k.replace("_", "."): v for k, v in settings.items()})
        self.zookeeper_connect = str(base["zookeeper.connect"])
        """The brokers' ZooKeeper, with their chroot."""
        self.brokers = {
            i: BrokerProcess(
                root / f"broker-{i}",
                broker_id=i,
                standalone=False,
                settings={**base, **(per_broker(i) if per_broker else {})},
            )
            for i in range(1, brokers + 1)
        }

    def start(self) -> LocalCluster:
        for broker in self.brokers.values():
            broker.start()
        self.wait_for_brokers(len(self.brokers))
        return self

    def wait_for_brokers(self, count: int) -> None:
        """Until ``count`` brokers are registered and known to the controller."""

        def registered() -> bool:
            admin = self.admin()
            try:
                return len(admin.brokers()) >= count
            finally:
                admin.close()

        # Three brokers' processes start on two cores that a check may be sharing: 60 s.
        wait_for(registered, timeout=60.0, what=f"{count} brokers to register")

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.is_running():
                broker.signal(signal.SIGCONT)
                broker.stop(timeout=10)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.is_running())

    def admin(self) -> AdminClient:
        return AdminClient(self.live_bootstrap())

    def describe(self, topic: str, partition: int = 0) -> Any:
        admin = self.admin()
        try:
            return admin.describe_topics([topic])[0].partitions[partition]
        finally:
            admin.close()

    def create_topic(self, topic: str, *, replication_factor: int = 3, **config: object) -> Any:
        admin = self.admin()
        try:
            admin.create_topic(
                topic,
                1,
                replication_factor=replication_factor,
                config={k.replace("_", "."): str(v).lower() for k, v in config.items()},
            )
        finally:
            admin.close()
        found = wait_for(
            lambda: (
                (d := self.describe(topic)).leader >= 0 and len(d.isr) == replication_factor and d
            ),
            what=f"{topic} to have a leader and a full ISR",
        )
        wait_for(
            lambda: all(self._knows(broker, topic) for broker in self.brokers.values()),
            what=f"every running broker's metadata to name {topic}'s leader",
        )
        return found

    @staticmethod
    def _knows(broker: BrokerProcess, topic: str) -> bool:
        """Whether a stopped broker, or a running one's own metadata, gives topic a leader
        (a client bootstrapped from a broker the controller has not told yet would be told
        the topic does not exist)."""
        if not broker.is_running():
            return True
        with AdminClient(broker.bootstrap) as admin:
            return admin.describe_topics([topic])[0].partitions[0].leader >= 0

    def wait_for_leader(self, topic: str, predicate: Callable[[Any], bool], what: str) -> Any:
        return wait_for(lambda: (d := self.describe(topic)) and predicate(d) and d, what=what)

    def read_all(self, topic: str, *, timeout: float = 10.0) -> dict[int, bytes]:
        """Every visible record of partition 0, offset -> value, read from the leader."""
        consumer = Consumer(self.live_bootstrap(), config={"auto.offset.reset": "earliest"})
        out: dict[int, bytes] = {}
        try:
            consumer.assign([(topic, 0)])
            consumer.seek_to_beginning(topic, 0)
            deadline = time.monotonic() + timeout
            idle = 0
            while time.monotonic() < deadline and idle < 3:
                batch = consumer.poll(300)
                idle = 0 if batch else idle + 1
                for record in batch:
                    out[record.offset] = record.value or b""
        finally:
            consumer.close()
        return out

    def events(self) -> list[dict[str, Any]]:
        """Every broker's and controller's event lines, by time."""
        lines: list[dict[str, Any]] = []
        for broker in self.brokers.values():
            path = broker.event_log
            if path.exists():
                lines += [json.loads(line) for line in path.read_text().splitlines() if line]
        return sorted(lines, key=lambda e: e["wall_time_ns"])
