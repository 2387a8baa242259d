"""An ISR of one that loses power must not take acknowledged writes with it (KIP-966).

RF 3, acks=-1, min.insync.replicas=2, unclean election off, no fsync before acknowledging:
both followers stop fetching until the leader shrinks the ISR to itself, then the leader
loses power (killed, its lazy disk drops what was not fsynced). Before eligible leader
replicas, the restarted leader was elected again as the sole ISR member and the followers,
which held every acknowledged write, truncated to its emptied log.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from squall.cluster.cluster import Cluster
from squall.cluster.local import LocalRuntime, fuse_missing
from system_under_test.client import AdminClient, BrokerError, Consumer, Producer
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPIC = "elr"


def events(cluster: Cluster) -> list[dict[str, Any]]:
    """Every broker's event lines, by time."""
    lines: list[dict[str, Any]] = []
    for name in cluster.brokers:
        path = Path(cluster.broker(name).event_log)
        if path.exists():
            lines += [json.loads(line) for line in path.read_text().splitlines() if line]
    return sorted(lines, key=lambda e: e["wall_time_ns"])


def describe(bootstrap: str) -> Any:
    with AdminClient(bootstrap) as admin:
        return admin.describe_topics([TOPIC])[0].partitions[0]


def read_values(bootstrap: str, wanted: set[bytes], timeout: float) -> set[bytes]:
    """The values of partition 0 read from the beginning, until `wanted` are all seen or
    `timeout` seconds passed (the high watermark may wait for a follower to rejoin)."""
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    with Consumer(bootstrap) as consumer:
        consumer.assign([(TOPIC, 0)])
        while True:
            try:
                consumer.seek_to_beginning()
                break
            except BrokerError:
                assert time.monotonic() < deadline, f"no leader of {TOPIC}-0 in {timeout} s"
                time.sleep(0.2)
        while not wanted <= seen and time.monotonic() < deadline:
            try:
                seen |= {r.value for r in consumer.poll(500) if r.value is not None}
            except BrokerError:
                time.sleep(0.2)
    return seen


DETECTORS = {
    # The followers lag past the lag time and the leader shrinks them out; their sessions,
    # longer than their pause, hold (they did not restart).
    "shrunk": {"replica.lag.time.max.ms": "1000", "zookeeper.session.timeout.ms": "12000"},
    # Their sessions end first: the controller removes them as dead, and they register again
    # when resumed, the same processes (seed 60112 of the detection bench: before, they left
    # the ISR without becoming eligible, and the power-lost leader was elected again).
    "fenced": {"replica.lag.time.max.ms": "30000", "zookeeper.session.timeout.ms": "3000"},
}


@pytest.mark.parametrize("how", sorted(DETECTORS))
def test_an_isr_of_one_losing_power_keeps_what_was_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    why = fuse_missing()
    if why is not None:
        pytest.skip(f"FUSE unavailable: {why}")
    monkeypatch.setenv("SQUALL_HOME", str(tmp_path / "home"))
    runtime = LocalRuntime()
    cluster = runtime.up(
        f"elr-{uuid.uuid4().hex[:6]}",
        3,
        # Kafka's default flush policy: nothing is fsynced before it is acknowledged.
        settings={"replica.fetch.wait.max.ms": "200", **DETECTORS[how]},
        lazy_disk=True,
    )
    try:
        disks = cluster.disks
        assert disks is not None
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, 1, replication_factor=3, config={"min.insync.replicas": "2"})
        state = wait_for(
            lambda: (d := describe(cluster.bootstrap)).leader >= 0 and len(d.isr) == 3 and d,
            60,
            "a leader and a full ISR",
        )
        leader = f"n{state.leader}"
        followers = [f"n{b}" for b in state.replicas if b != state.leader]
        acknowledged = [f"v{i}".encode() for i in range(20)]
        with Producer(cluster.bootstrap, acks=-1) as producer:
            for value in acknowledged:
                producer.send(TOPIC, value, partition=0).result()

        for name in followers:
            assert cluster.broker(name).pause()

        def isr_of_one() -> bool:
            return any(
                e["type"] == "isr-change"
                and e["key"] == f"{TOPIC}-0"
                and e["isr"] == [state.leader]
                for e in events(cluster)
            )

        wait_for(isr_of_one, 30, "an ISR of the leader alone")
        shrink = next(
            e for e in events(cluster) if e["type"] == "isr-change" and e["isr"] == [state.leader]
        )

        assert cluster.broker(leader).kill()
        assert disks.lose_unsynced(leader)["bytes"] > 0
        for name in followers:
            cluster.broker(name).resume()
        cluster.broker(leader).start()

        live = cluster.bootstrap
        after = wait_for(
            lambda: (d := describe(live)).leader >= 0 and d.leader_epoch > state.leader_epoch and d,
            90,
            "a leader again",
        )
        elections = [
            e
            for e in events(cluster)
            if e["type"] == "leader-election" and e["leader_epoch"] > state.leader_epoch
        ]
        seen = read_values(live, set(acknowledged), 60)
        lost = sorted(set(acknowledged) - seen)
        assert not lost, f"lost {lost}; elections: {elections}"
        assert after.leader != state.leader, f"the power-lost leader leads again: {elections}"
        assert any("eligible leader replicas" in e["reason"] for e in elections), elections
        # The shrink named the followers eligible, in the same write (a controller that
        # fenced one follower while the other kept the ISR at its minimum names the other).
        named = sorted(shrink.get("elr", []))
        if how == "shrunk":
            assert named == sorted(int(f[1:]) for f in followers)
        else:
            assert named and set(named) <= {int(f[1:]) for f in followers}, shrink
    finally:
        for name in cluster.brokers:
            cluster.broker(name).resume()
        runtime.down(cluster.state)
