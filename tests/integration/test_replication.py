"""The seeds' replication scenarios on a real cluster: ZooKeeper and three broker processes.

Faults are real: SIGKILL, SIGSTOP/SIGCONT of broker processes. Timing that must be exact is
driven by configuration, not luck: a long ``replica.fetch.wait.max.ms`` keeps a follower
from learning the leader's high watermark for as long as the test needs.
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from squall.cluster.zookeeper_server import ZooKeeperServer
from system_under_test import protocol
from system_under_test.client import AdminClient, Producer
from system_under_test.client.exceptions import ProduceError
from system_under_test.errors import ErrorCode
from tests.integration.cluster import LocalCluster
from tests.integration.test_standalone_broker import read_frame
from tests.support import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def make_cluster(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[type[LocalCluster]]:
    clusters: list[LocalCluster] = []

    class _Cluster(LocalCluster):
        def __init__(self, brokers: int = 3, **settings: object) -> None:
            super().__init__(tmp_path / f"c{len(clusters)}", zookeeper_server, brokers, **settings)
            clusters.append(self)

    yield _Cluster
    for cluster in clusters:
        cluster.stop()


def send(producer: Producer, topic: str, values: list[bytes]) -> dict[bytes, int | ProduceError]:
    """Send values; value -> offset, or the ProduceError."""
    futures = [(v, producer.send(topic, v, partition=0)) for v in values]
    producer.flush()
    out: dict[bytes, int | ProduceError] = {}
    for value, future in futures:
        error = future.exception()
        out[value] = error if error is not None else future.result().offset
    return out


def acked(results: dict[bytes, int | ProduceError]) -> dict[bytes, int]:
    return {v: r for v, r in results.items() if isinstance(r, int)}


def test_stuck_follower_holds_back_commit_until_it_leaves_the_isr(make_cluster) -> None:
    # The session timeout exceeds the lag time: the leader, not the controller, drops it.
    cluster = make_cluster(replica_lag_time_max_ms=3000, zookeeper_session_timeout_ms=15000).start()
    state = cluster.create_topic("stuck", min_insync_replicas=2)
    stuck = next(b for b in state.replicas if b != state.leader)
    # A stopped broker takes connections but answers nothing: clients bootstrapped from it
    # would wait out their request timeout before asking another broker.
    others = ",".join(b.bootstrap for n, b in cluster.brokers.items() if n != stuck)
    cluster.brokers[stuck].signal(signal.SIGSTOP)
    try:
        with Producer(others, acks=-1, config={"request.timeout.ms": 30000}) as producer:
            started = time.monotonic()
            result = send(producer, "stuck", [b"held-back"])
            waited = time.monotonic() - started
        assert isinstance(result[b"held-back"], int)
        # Not acknowledged before the stuck follower was dropped after replica.lag.time.max.ms.
        assert waited >= 2.5, f"acknowledged after {waited:.2f}s, before the lag time"

        def isr_seen() -> list[int]:
            with AdminClient(others) as admin:
                return list(admin.describe_topics(["stuck"])[0].partitions[0].isr)

        # The other brokers learn the leader's ISR change from the controller a moment later.
        isr = wait_for(
            lambda: stuck not in (seen := isr_seen()) and seen,
            what="the ISR without the stuck follower in the brokers' metadata",
        )
        assert len(isr) == 2
        shrinks = wait_for(
            lambda: [
                e for e in cluster.events() if e["type"] == "isr-change" and stuck not in e["isr"]
            ],
            what="the leader's event of the shrink",
        )
        assert "shrink" in shrinks[0]["reason"]
        # What the leader knew when it decided (the conformance checker's facts).
        assert stuck in shrinks[0]["previous_isr"]
        assert set(shrinks[0]["log_end_offsets"]) == {str(b) for b in state.replicas}
        assert isinstance(shrinks[0]["high_watermark"], int)
    finally:
        cluster.brokers[stuck].signal(signal.SIGCONT)
    cluster.wait_for_leader("stuck", lambda d: stuck in d.isr, "the stuck follower to rejoin")

    def joins() -> list[dict[str, Any]]:
        return [
            e
            for e in cluster.events()
            if e["type"] == "isr-change"
            and stuck in e["isr"]
            and stuck not in e.get("previous_isr", e["isr"])
        ]

    # The leader logs the change once ZooKeeper holds it, a moment after others can see it.
    joined = wait_for(joins, what="the leader's event of the rejoin")[-1]
    assert joined["log_end_offsets"][str(stuck)] >= joined["high_watermark"]


def test_leader_kill_under_acks_all_loses_nothing(make_cluster) -> None:
    cluster = make_cluster().start()
    state = cluster.create_topic("safe", min_insync_replicas=2)
    values = [f"v{i}".encode() for i in range(3000)]
    with Producer(
        cluster.bootstrap,
        acks=-1,
        mode="async",
        config={
            "batch.num.messages": 50,
            "queue.buffering.max.ms": 1,
            "message.send.max.retries": 50,
            "retry.backoff.ms": 200,
        },
    ) as producer:
        futures = []
        for i, value in enumerate(values):
            futures.append((value, producer.send("safe", value, partition=0)))
            if i == 1000:
                cluster.brokers[state.leader].kill()
            if i % 100 == 0:
                time.sleep(0.01)
        producer.flush()
    ok = {v: f.result().offset for v, f in futures if f.exception() is None}
    assert len(ok) > 1000
    new = cluster.wait_for_leader(
        "safe", lambda d: d.leader not in (-1, state.leader), "a new leader"
    )
    assert new.leader in state.isr
    elections = [
        e for e in cluster.events() if e["type"] == "leader-election" and e["key"] == "safe-0"
    ]
    assert elections[-1]["previous_leader"] == state.leader and elections[-1]["unclean"] is False
    read = cluster.read_all("safe")
    lost = {v: o for v, o in ok.items() if read.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {list(lost.items())[:3]}"


def test_two_of_three_down_refuses_writes_but_serves_reads(make_cluster) -> None:
    cluster = make_cluster().start()
    state = cluster.create_topic("quorum", min_insync_replicas=2)
    with Producer(cluster.bootstrap, acks=-1) as producer:
        assert all(isinstance(r, int) for r in send(producer, "quorum", [b"a", b"b"]).values())
    for broker in state.replicas:
        if broker != state.leader:
            cluster.brokers[broker].kill()
    cluster.wait_for_leader(
        "quorum", lambda d: d.isr == [state.leader], "the ISR to shrink to the leader"
    )
    with Producer(
        cluster.live_bootstrap(), acks=-1, config={"message.send.max.retries": 0}
    ) as producer:
        refused = send(producer, "quorum", [b"c"])[b"c"]
    assert isinstance(refused, ProduceError)
    assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS and refused.definite
    assert list(cluster.read_all("quorum").values()) == [b"a", b"b"]


def test_no_live_isr_member_means_offline_until_one_returns(make_cluster) -> None:
    cluster = make_cluster().start()
    state = cluster.create_topic("offline", min_insync_replicas=1)
    followers = [b for b in state.replicas if b != state.leader]
    for broker in followers:
        cluster.brokers[broker].kill()
    cluster.wait_for_leader("offline", lambda d: d.isr == [state.leader], "the ISR to shrink")
    with Producer(cluster.live_bootstrap(), acks=-1) as producer:
        assert isinstance(send(producer, "offline", [b"only-on-leader"])[b"only-on-leader"], int)
    cluster.brokers[state.leader].kill()
    for broker in followers:
        cluster.brokers[broker].start()
    time.sleep(4)  # session timeouts pass; an unclean election would have happened by now
    offline = cluster.describe("offline")
    assert offline.leader == -1 and offline.isr == [state.leader]
    cluster.brokers[state.leader].start()
    back = cluster.wait_for_leader(
        "offline", lambda d: d.leader == state.leader, "the ISR member to lead"
    )
    assert back.leader_epoch > state.leader_epoch
    assert list(cluster.read_all("offline").values()) == [b"only-on-leader"]


def test_unclean_election_loses_what_the_out_of_sync_replica_lacked(make_cluster) -> None:
    cluster = make_cluster(replica_lag_time_max_ms=2000).start()
    state = cluster.create_topic(
        "unclean", min_insync_replicas=1, unclean_leader_election_enable=True
    )
    laggard = state.replicas[-1] if state.replicas[-1] != state.leader else state.replicas[1]
    with Producer(cluster.bootstrap, acks=-1) as producer:
        early = acked(send(producer, "unclean", [f"early-{i}".encode() for i in range(10)]))
    assert len(early) == 10
    cluster.brokers[laggard].signal(signal.SIGSTOP)
    cluster.wait_for_leader(
        "unclean", lambda d: laggard not in d.isr, "the laggard to leave the ISR"
    )
    with Producer(cluster.live_bootstrap(), acks=-1) as producer:
        late = acked(send(producer, "unclean", [f"late-{i}".encode() for i in range(10)]))
    assert len(late) == 10
    for broker in state.replicas:
        if broker != laggard:
            cluster.brokers[broker].kill()
    cluster.brokers[laggard].signal(signal.SIGCONT)
    elected = cluster.wait_for_leader(
        "unclean", lambda d: d.leader == laggard, "an unclean election"
    )
    assert elected.isr == [laggard]
    read = cluster.read_all("unclean")
    # The seeds' prediction: the new leader has exactly what it had fetched when it fell out
    # of the ISR; every record acknowledged after that is gone.
    assert {v: o for v, o in early.items() if read.get(o) == v} == early
    assert all(read.get(o) != v for v, o in late.items())
    election = [
        e for e in cluster.events() if e["type"] == "leader-election" and e["leader"] == laggard
    ][-1]
    assert election["unclean"] is True


@pytest.mark.parametrize(("lag_messages", "shuttles"), [(200, True), (0, False)])
def test_legacy_lag_by_messages_shuttles_the_isr_under_a_burst(
    make_cluster, lag_messages: int, shuttles: bool
) -> None:
    cluster = make_cluster(
        replica_lag_max_messages=lag_messages, replica_lag_time_max_ms=10000
    ).start()
    cluster.create_topic("burst", min_insync_replicas=1)
    value = b"x" * 1024

    def shrinks() -> list[dict[str, Any]]:
        changes = [
            e for e in cluster.events() if e["type"] == "isr-change" and e["key"] == "burst-0"
        ]
        return [e for e in changes if "shrink" in e["reason"]]

    # The leader checks its ISR once a second: bursts of 30,000 records until one check
    # lands mid-burst while a follower is more than 200 records behind (a few bursts on a
    # busy machine, more where followers keep up quickly; a minute at most), and six
    # bursts where no shrink is expected.
    deadline = time.monotonic() + 60
    bursts = 0
    with Producer(
        cluster.bootstrap,
        acks=1,
        mode="async",
        config={"batch.num.messages": 1000, "queue.buffering.max.ms": 1},
    ) as producer:
        while bursts < 6 or (shuttles and time.monotonic() < deadline):
            for _ in range(30_000):
                producer.send("burst", value, partition=0)
            producer.flush()
            bursts += 1
            time.sleep(0.2)
            if shuttles and shrinks():
                break
    time.sleep(1.0)
    if shuttles:
        assert shrinks(), (
            f"{bursts} bursts far above replica.lag.max.messages did not shrink the ISR"
        )
        cluster.wait_for_leader("burst", lambda d: len(d.isr) == 3, "followers to rejoin the ISR")
    else:
        assert not shrinks(), f"time-based lag shrank the ISR under a burst: {shrinks()}"


@pytest.mark.parametrize(
    ("truncation", "loses_m2"), [("high-watermark", True), ("leader-epoch", False)]
)
def test_kip_101_truncation(make_cluster, truncation: str, loses_m2: bool) -> None:
    """KIP-101: the leader acknowledges m2 while the follower still has the old high watermark;
    the follower becomes follower again (a third replica dies) and truncates, then the leader
    dies and the follower is elected. High-watermark truncation loses m2; leader epochs don't
    (read once the third replica is back in the ISR: below min.insync.replicas the high
    watermark stands still)."""
    cluster = make_cluster(
        replica_truncation=truncation,
        replica_fetch_wait_max_ms=25000,  # followers learn the HW only when a long poll returns
        replica_lag_time_max_ms=60000,
        replica_high_watermark_checkpoint_interval_ms=600000,
    ).start()
    state = cluster.create_topic("kip101", min_insync_replicas=2)
    leader = state.leader
    survivor, victim = [b for b in state.replicas if b != leader]
    with Producer(cluster.bootstrap, acks=-1, config={"request.timeout.ms": 20000}) as producer:
        m1 = send(producer, "kip101", [b"m1"])[b"m1"]
        m2 = send(producer, "kip101", [b"m2"])[b"m2"]
    assert (m1, m2) == (0, 1)
    cluster.brokers[victim].kill()  # the controller shrinks the ISR: a LeaderAndIsr to all
    shrunk = cluster.wait_for_leader(
        "kip101",
        lambda d: victim not in d.isr and d.leader == leader,
        "the victim to leave the ISR",
    )
    # The survivor logs this once it has handled the shrink's LeaderAndIsr (and, under the
    # high-watermark rule, truncated before it): the leader must not die before.
    following = f"kip101-0: follower of {leader} in epoch {shrunk.leader_epoch},"
    wait_for(
        lambda: following in cluster.brokers[survivor].log_tail(100_000),
        what="the survivor to become follower again in the shrink's epoch",
    )
    cluster.brokers[leader].kill()
    cluster.wait_for_leader("kip101", lambda d: d.leader == survivor, "the survivor to lead")
    # An ISR of one below min.insync.replicas=2 does not advance the high watermark (KIP-966):
    # the victim comes back and rejoins, so that the survivor's whole log becomes readable.
    cluster.brokers[victim].start()
    cluster.wait_for_leader("kip101", lambda d: len(d.isr) == 2, "the victim to rejoin")
    read = cluster.read_all("kip101")
    assert read.get(0) == b"m1"
    if loses_m2:
        assert read.get(1) != b"m2", "high-watermark truncation should have lost acknowledged m2"
    else:
        assert read.get(1) == b"m2", "leader-epoch truncation must keep acknowledged m2"


def test_preferred_leader_election_moves_leadership_back(make_cluster) -> None:
    import subprocess
    import sys

    cluster = make_cluster().start()
    state = cluster.create_topic("preferred", min_insync_replicas=1)
    preferred = state.replicas[0]
    assert state.leader == preferred
    cluster.brokers[preferred].kill()
    cluster.wait_for_leader("preferred", lambda d: d.leader not in (-1, preferred), "a failover")
    cluster.brokers[preferred].start()
    cluster.wait_for_leader(
        "preferred", lambda d: preferred in d.isr, "the preferred replica to rejoin"
    )
    assert cluster.describe("preferred").leader != preferred
    zk = cluster.brokers[1].zookeeper_connect
    assert zk is not None
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "squall",
            "topic",
            "elect-leaders",
            "--zookeeper",
            str(zk),
            "--topic",
            "preferred",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    back = cluster.wait_for_leader(
        "preferred", lambda d: d.leader == preferred, "the preferred leader"
    )
    assert back.leader_epoch > state.leader_epoch
    reasons = [e.get("reason") for e in cluster.events() if e["type"] == "leader-election"]
    assert "preferred leader election" in reasons


def test_the_controller_moves_leadership_back_to_a_restarted_preferred_replica(
    make_cluster,
) -> None:
    cluster = make_cluster(
        auto_leader_rebalance_enable="true",
        leader_imbalance_check_interval_seconds=1,
        leader_imbalance_per_broker_percentage=0,
    ).start()
    state = cluster.create_topic("balance", min_insync_replicas=1)
    preferred = state.replicas[0]
    assert state.leader == preferred
    cluster.brokers[preferred].kill()
    moved = cluster.wait_for_leader(
        "balance", lambda d: d.leader not in (-1, preferred), "a failover"
    )
    with Producer(cluster.live_bootstrap(), acks=-1) as producer:
        assert isinstance(
            send(producer, "balance", [b"while it was away"])[b"while it was away"], int
        )
    cluster.brokers[preferred].start()
    back = cluster.wait_for_leader(
        "balance", lambda d: d.leader == preferred, "the preferred replica to lead again"
    )
    assert back.leader_epoch > moved.leader_epoch
    assert preferred in back.isr
    elections = [e for e in cluster.events() if e["type"] == "leader-election"]
    rebalanced = [e for e in elections if e.get("reason") == "auto leader rebalance"]
    assert rebalanced and rebalanced[-1]["leader"] == preferred
    assert rebalanced[-1]["previous_leader"] == moved.leader
    assert cluster.read_all("balance").get(0) == b"while it was away"


def test_no_rebalance_when_the_preferred_replica_is_out_of_the_isr(make_cluster) -> None:
    cluster = make_cluster(
        auto_leader_rebalance_enable="true",
        leader_imbalance_check_interval_seconds=1,
        leader_imbalance_per_broker_percentage=0,
    ).start()
    state = cluster.create_topic("stays", min_insync_replicas=1)
    preferred = state.replicas[0]
    cluster.brokers[preferred].kill()
    moved = cluster.wait_for_leader(
        "stays", lambda d: d.leader not in (-1, preferred), "a failover"
    )
    time.sleep(3)  # three checks while the preferred replica is dead: nothing to move
    assert cluster.describe("stays").leader == moved.leader
    reasons = [e.get("reason") for e in cluster.events() if e["type"] == "leader-election"]
    assert "auto leader rebalance" not in reasons


def test_zookeeper_session_loss_fences_then_the_cluster_recovers(
    tmp_path: Path, zookeeper_server_factory
) -> None:
    zookeeper = zookeeper_server_factory()
    cluster = LocalCluster(tmp_path / "c", zookeeper, 3).start()
    try:
        state = cluster.create_topic("session", min_insync_replicas=2)
        with Producer(cluster.bootstrap, acks=-1) as producer:
            before = acked(send(producer, "session", [b"before"]))
        elections = lambda: [e for e in cluster.events() if e["type"] == "controller-elected"]  # noqa: E731
        controller = elections()[-1]["controller"]
        elected_before = len(elections())
        zookeeper.pause()
        time.sleep(5)  # longer than zookeeper.session.timeout.ms: sessions are due to expire
        zookeeper.resume()
        log_of = lambda broker: cluster.brokers[broker].log_tail(100_000)  # noqa: E731
        # On resume ZooKeeper races its session expirer against the clients' reconnections:
        # each broker's session is either expired (it fences and registers again) or kept,
        # independently of the others'.
        lost = "ZooKeeper session lost"
        kept = "session kept"
        wait_for(
            lambda: lost in log_of(state.leader) or kept in log_of(state.leader),
            what="the leader to lose or keep its session",
        )
        cluster.wait_for_leader(
            "session", lambda d: d.leader >= 0 and len(d.isr) >= 2, "a leader again"
        )
        with Producer(
            cluster.bootstrap, acks=-1, config={"message.send.max.retries": 20}
        ) as producer:
            after = acked(send(producer, "session", [b"after"]))
        assert after, "writes work again once the cluster has recovered"
        read = cluster.read_all("session")
        assert all(read.get(o) == v for v, o in {**before, **after}.items())
        # ZooKeeper may still expire a session it first let the broker keep: judge by what
        # each broker has logged by now. A broker logs the loss on kazoo's thread before it
        # reconnects, so "lost" precedes both its fencing and its registering again.
        log = log_of(state.leader)
        if lost in log:
            wait_for(
                lambda: "fenced (ZooKeeper session lost)" in log_of(state.leader),
                what="the leader to fence",
            )
            wait_for(
                lambda: "registered again" in log_of(state.leader),
                what="the leader to register again",
            )
        else:
            assert "registered again" not in log
        # A new controller is elected only when the controller's own session expired (its
        # /controller znode goes with it); the leader's expiry alone does not force one.
        if lost in log_of(controller):
            wait_for(
                lambda: len(elections()) > elected_before,
                what="a controller elected again after the controller's session expired",
            )
    finally:
        cluster.stop()


def test_a_restarted_broker_refuses_orders_meant_for_its_previous_run(make_cluster) -> None:
    """KIP-380. A broker that restarts within its previous ZooKeeper session listens before
    it can register (that session's registration stands until it expires), so a controller
    that has not seen the restart may still send it orders for the previous run: making it
    leader with a log that a power loss or a restored backup may have cut, from which the
    followers would truncate what was committed (found by the storage bench, safe
    configuration with log.flush.interval.messages=1: a follower rolled back to a snapshot
    led again, and 804 acknowledged writes were truncated away). Orders carry the broker
    epoch (its registration's czxid) they were meant for; a run that has not registered, or
    registered since, refuses them."""
    cluster = make_cluster(**{"zookeeper.session.timeout.ms": 6000}).start()
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start()
    try:
        previous = zk.get("/brokers/ids/2")[1].czxid
        broker = cluster.brokers[2]
        broker.kill()
        broker.start()  # listening; the previous session's registration still stands
        assert zk.get("/brokers/ids/2")[1].czxid == previous
        host, port = broker.bootstrap.rsplit(":", 1)
        state = protocol.PartitionLeaderStateData("t", 0, 99, 2, 7, [2], 0, [2, 1, 3], [])
        live = [protocol.LiveBroker(2, host, int(port))]

        def order(broker_epoch: int) -> protocol.LeaderAndIsrResponse:
            request = protocol.LeaderAndIsrRequest(1, 99, [state], live, broker_epoch)
            frame = protocol.encode_request(request, correlation_id=1, client_id="kip-380")
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                # it waits for this run's own registration before it answers
                sock.sendall(frame)
                payload = read_frame(sock)
            assert payload is not None
            _, response = protocol.decode_response(payload, protocol.LeaderAndIsrResponse)
            assert isinstance(response, protocol.LeaderAndIsrResponse), response
            return response

        assert order(previous).error_code == ErrorCode.STALE_BROKER_EPOCH
        current = wait_for(
            lambda: (czxid := zk.get("/brokers/ids/2")[1].czxid) != previous and czxid,
            what="broker 2 to register again",
        )
        assert order(previous).error_code == ErrorCode.STALE_BROKER_EPOCH
        assert current > previous
    finally:
        zk.stop()
        zk.close()


def test_a_clean_stop_moves_leadership_and_isr_membership_away_first(make_cluster) -> None:
    cluster = make_cluster(
        controlled_shutdown_enable="true", controlled_shutdown_retry_backoff_ms=200
    ).start()
    state = cluster.create_topic("handover", min_insync_replicas=2)
    leader = state.leader
    with Producer(cluster.bootstrap, acks=-1) as producer:
        sent = send(producer, "handover", [b"before"])
    assert isinstance(sent[b"before"], int)
    cluster.brokers[leader].stop(timeout=30)
    after = cluster.wait_for_leader(
        "handover", lambda d: d.leader not in (-1, leader), "the new leader's metadata"
    )
    assert leader not in after.isr
    moved = [
        e
        for e in cluster.events()
        if e["type"] == "leader-election"
        and e.get("reason") == f"controlled shutdown of broker {leader}"
    ]
    assert len(moved) == 1 and moved[0]["previous_leader"] == leader
    assert moved[0]["leader"] == after.leader and not moved[0]["unclean"]
    log_text = cluster.brokers[leader].log_path.read_text()
    assert "controlled shutdown succeeded" in log_text
    # A follower's clean stop takes it out of the ISR before it goes.
    follower = next(r for r in after.isr if r != after.leader)
    cluster.brokers[follower].stop(timeout=30)
    shrunk = cluster.wait_for_leader(
        "handover", lambda d: follower not in d.isr, "the follower to leave the ISR"
    )
    assert shrunk.leader == after.leader
    reasons = [e.get("reason") for e in cluster.events() if e["type"] == "isr-change"]
    assert f"controlled shutdown of broker {follower}" in reasons
    assert cluster.read_all("handover").get(0) == b"before"


def test_the_last_in_sync_replica_keeps_leading_through_a_failed_controlled_shutdown(
    make_cluster,
) -> None:
    cluster = make_cluster(
        controlled_shutdown_enable="true",
        controlled_shutdown_retry_backoff_ms=100,
        controlled_shutdown_max_retries=2,
    ).start()
    state = cluster.create_topic("alone", min_insync_replicas=1)
    for broker in state.replicas:
        if broker != state.leader:
            cluster.brokers[broker].kill()
    cluster.wait_for_leader("alone", lambda d: d.isr == [state.leader], "an ISR of the leader")
    cluster.brokers[state.leader].stop(timeout=30)
    log_text = cluster.brokers[state.leader].log_path.read_text()
    assert "attempt 2 of 2: still leads alone-0" in log_text
    assert "stopping without a complete controlled shutdown" in log_text
    reasons = [e.get("reason") for e in cluster.events() if e["type"] == "leader-election"]
    assert not any("controlled shutdown" in str(r) for r in reasons)
