"""The controller against a real ZooKeeper; brokers are sessions that register and vanish."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from system_under_test.controller import STALE_STATE_ATTEMPTS, Controller, PartitionLeaderState
from system_under_test.event_log import EventLog
from system_under_test.zookeeper import (
    NO_LEADER,
    BrokerEndpoint,
    ClusterMetadataStore,
    ControllerMovedError,
    LeaderAndIsr,
    partition_state_path,
)
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.integration


class RecordingChannel:
    """Stands in for the brokers' network endpoints: records what the controller sends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.leader_and_isr: list[tuple[int, int, list[PartitionLeaderState]]] = []
        self.broker_epochs: dict[int, int] = {}
        self.update_metadata: list[tuple[int, int]] = []

    def send_leader_and_isr(
        self, broker, controller_id, controller_epoch, partitions, live_brokers, broker_epoch
    ) -> None:
        with self.lock:
            self.leader_and_isr.append((broker.broker_id, controller_epoch, partitions))
            self.broker_epochs[broker.broker_id] = broker_epoch

    def send_update_metadata(
        self, broker, controller_id, controller_epoch, partitions, live_brokers
    ) -> None:
        with self.lock:
            self.update_metadata.append((broker.broker_id, controller_epoch))


class FakeBroker:
    """A broker's ZooKeeper presence: a session, a registration and a controller."""

    def __init__(
        self, broker_id: int, connect: str, channel: RecordingChannel, events: Path
    ) -> None:
        self.store = ClusterMetadataStore(connect, session_timeout_ms=4000)
        self.store.start()
        self.events = EventLog(events, broker_id=broker_id)
        self.controller = Controller(broker_id, self.store, channel, self.events)
        self.store.register_broker(BrokerEndpoint(broker_id, "127.0.0.1", 9000 + broker_id))
        self.controller.startup()
        self.alive = True

    def crash(self) -> None:
        """The session closes: ephemeral znodes vanish at once, as after a kill detected by ZK.
        The broker is dead: its controller thread ends too."""
        self.controller.session_lost()
        self.store.close()
        self.controller.shutdown()
        self.alive = False


def wait_for(
    condition: Callable[[], object], timeout: float = 15.0, what: str = "condition"
) -> Any:
    return _wait_for(condition, timeout, what, interval=0.05, tolerate=())


@pytest.fixture
def cluster(
    zookeeper: str, tmp_path: Path
) -> Iterator[tuple[dict[int, FakeBroker], RecordingChannel, ClusterMetadataStore, Path]]:
    channel = RecordingChannel()
    events = tmp_path / "events.jsonl"
    brokers = {i: FakeBroker(i, zookeeper, channel, events) for i in (1, 2, 3)}
    admin = ClusterMetadataStore(zookeeper)
    admin.start()
    yield brokers, channel, admin, events
    for broker in brokers.values():
        if broker.alive:
            broker.controller.shutdown()
            broker.store.close()
    admin.close()


def active(brokers: dict[int, FakeBroker]) -> list[int]:
    return [i for i, b in brokers.items() if b.alive and b.controller.active]


def state(admin: ClusterMetadataStore, partition: int = 0) -> LeaderAndIsr | None:
    found = admin.partition_state("t", partition)
    return found[0] if found else None


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events logged in full (a line still being written is left out)."""
    return [json.loads(line) for line in path.read_text().split("\n")[:-1]]


def logged(path: Path, kind: str, state: LeaderAndIsr) -> dict[str, Any]:
    """The `kind` event of partition t-0 that wrote `state`, once logged: a controller writes
    the state to ZooKeeper first and logs it after, so a test that saw the state waits."""
    return wait_for(
        lambda: [
            e
            for e in read_events(path)
            if e["type"] == kind and e["key"] == "t-0" and e["leader_epoch"] == state.leader_epoch
        ][-1:],
        what=f"the {kind} event of leader epoch {state.leader_epoch}",
    )[0]


def test_one_controller_and_topic_initialisation(cluster) -> None:
    brokers, channel, admin, events = cluster
    wait_for(lambda: len(active(brokers)) == 1, what="a controller")
    assert admin.controller_id() == active(brokers)[0]
    admin.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]}, {})
    wait_for(lambda: state(admin, 0) is not None and state(admin, 1) is not None, what="states")
    assert state(admin, 0) == LeaderAndIsr(1, 0, (1, 2, 3), 1)
    assert state(admin, 1) == LeaderAndIsr(2, 0, (2, 3, 1), 1)
    wait_for(lambda: {b for b, _e, _p in channel.leader_and_isr} == {1, 2, 3}, what="LeaderAndIsr")
    # each broker's orders name the registration they are meant for (KIP-380)
    registrations = {b: epoch for b, (_e, epoch, _i) in admin.broker_registrations().items()}
    assert channel.broker_epochs == registrations
    elections = [e for e in read_events(events) if e["type"] == "leader-election"]
    assert {(e["key"], e["leader"]) for e in elections} == {("t-0", 1), ("t-1", 2)}


def test_leader_loss_elects_from_the_isr_and_bumps_the_epoch(cluster) -> None:
    brokers, _channel, admin, events = cluster
    wait_for(lambda: len(active(brokers)) == 1, what="a controller")
    admin.create_topic("t", {0: [1, 2, 3]}, {})
    wait_for(lambda: state(admin) is not None, what="state")
    brokers[1].crash()
    wait_for(lambda: state(admin).leader == 2, what="broker 2 to lead")
    assert state(admin).leader_epoch == 1
    assert state(admin).isr == (2, 3)
    last = logged(events, "leader-election", state(admin))
    assert last["previous_leader"] == 1 and last["leader"] == 2 and last["unclean"] is False


def test_no_live_isr_goes_offline_until_an_isr_member_returns(
    cluster, zookeeper: str, tmp_path: Path
) -> None:
    brokers, channel, admin, _events = cluster
    wait_for(lambda: len(active(brokers)) == 1, what="a controller")
    admin.create_topic("t", {0: [3, 1, 2]}, {})
    wait_for(lambda: state(admin) is not None, what="state")
    # Shrink the ISR to the leader alone, as the leader would after its followers lagged.
    current, version = admin.partition_state("t", 0)
    admin.update_isr(
        "t", 0, LeaderAndIsr(3, current.leader_epoch, (3,), current.controller_epoch), version
    )
    wait_for(lambda: state(admin).isr == (3,), what="ISR shrink")
    controller_id = active(brokers)[0]
    brokers[3].crash()
    if controller_id == 3:
        wait_for(lambda: len(active(brokers)) == 1, what="controller failover")
    wait_for(lambda: state(admin).leader == NO_LEADER, what="offline")
    assert state(admin).isr == (3,)  # the last ISR member is kept so that it can lead again
    brokers[3] = FakeBroker(3, zookeeper, channel, tmp_path / "events.jsonl")
    wait_for(lambda: state(admin).leader == 3, what="the ISR member to lead again")


def test_unclean_election_picks_an_out_of_sync_replica(cluster) -> None:
    brokers, _channel, admin, events = cluster
    wait_for(lambda: len(active(brokers)) == 1, what="a controller")
    admin.create_topic("t", {0: [3, 1, 2]}, {"unclean.leader.election.enable": "true"})
    wait_for(lambda: state(admin) is not None, what="state")
    current, version = admin.partition_state("t", 0)
    admin.update_isr(
        "t", 0, LeaderAndIsr(3, current.leader_epoch, (3,), current.controller_epoch), version
    )
    wait_for(lambda: state(admin).isr == (3,), what="ISR shrink")
    brokers[3].crash()
    wait_for(lambda: state(admin).leader == 1, what="unclean election of broker 1")
    assert state(admin).isr == (1,)
    last = logged(events, "leader-election", state(admin))
    assert last["unclean"] is True and last["previous_leader"] == 3


def test_controller_failover_and_fencing(cluster) -> None:
    brokers, _channel, admin, _events = cluster
    wait_for(lambda: len(active(brokers)) == 1, what="a controller")
    first = active(brokers)[0]
    old_store = brokers[first].store
    old_epoch_version = brokers[first].controller.context.epoch_zk_version
    # The old controller's session ends; a new controller takes over with a higher epoch.
    brokers[first].crash()
    wait_for(lambda: len(active(brokers)) == 1, what="a new controller")
    second = active(brokers)[0]
    assert second != first
    assert brokers[second].controller.context.epoch == 2
    # A write fenced by the old epoch's version fails, even through a live session.
    with pytest.raises(ControllerMovedError):
        admin.write_partition_states(
            {("t", 0): (LeaderAndIsr(1, 0, (1,), 1), None)},
            controller_epoch_version=old_epoch_version,
        )
    assert old_store is not None


def test_an_empty_zookeeper_reads_as_no_brokers_and_no_topics(zookeeper: str) -> None:
    store = ClusterMetadataStore(zookeeper, connection_timeout_ms=5000)
    store.start(create_layout=False)
    try:
        fired = threading.Event()
        assert store.broker_ids() == [] and store.topics() == []
        assert store.broker_ids(watch=lambda _event: fired.set()) == []
        assert store.controller_id() is None
        store.client.ensure_path("/brokers/ids")
        wait_for(fired.is_set, what="the watch on /brokers/ids firing when it is created")
    finally:
        store.close()


class Standby:
    """Brokers that start while a stand-in controller (broker 99, the test) holds
    ``/controller``: none of theirs acts until the test resigns it, as while a cluster has
    no live controller."""

    def __init__(self, connect: str, events: Path) -> None:
        self.connect = connect
        self.events = events
        self.channel = RecordingChannel()
        self.admin = ClusterMetadataStore(connect)
        self.admin.start()
        won = self.admin.try_become_controller(99)
        assert won is not None
        self.epoch_version = won[1]
        self.brokers: dict[int, FakeBroker] = {}

    def start(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            self.brokers[broker_id] = FakeBroker(broker_id, self.connect, self.channel, self.events)

    def restart(self, broker_id: int) -> None:
        """The broker dies and comes back: a new registration (a new czxid)."""
        self.brokers[broker_id].crash()
        self.start(broker_id)

    def write_state(self, written: LeaderAndIsr) -> None:
        """Topic t, one partition on brokers 1, 2, 3, in `written` state."""
        self.admin.create_topic("t", {0: [1, 2, 3]}, {})
        self.admin.write_partition_states(
            {("t", 0): (written, None)}, controller_epoch_version=self.epoch_version
        )

    def hand_over(self) -> None:
        """Resign ``/controller`` and wait until a broker's controller has taken over and
        told the brokers (the end of its failover)."""
        self.admin.resign_controller(99)
        wait_for(
            lambda: any(epoch == 2 for _b, epoch in self.channel.update_metadata),
            what="a broker's controller to finish its failover",
        )

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.alive:
                broker.controller.shutdown()
                broker.store.close()
        self.admin.close()


@pytest.fixture
def standby(zookeeper: str, tmp_path: Path) -> Iterator[Standby]:
    cluster = Standby(zookeeper, tmp_path / "events.jsonl")
    yield cluster
    cluster.close()


def test_a_leader_restarted_while_no_controller_acted_is_not_elected_over_a_whole_replica(
    standby: Standby,
) -> None:
    # Found by follower-rollback: the leader restarted with a cut log while no controller
    # was active; the next controller kept it in the ISR and elected it, losing what only
    # the followers still held.
    standby.start(1, 2, 3)
    standby.write_state(LeaderAndIsr(1, 4, (1, 2, 3), 1))
    standby.restart(1)
    standby.hand_over()
    wait_for(lambda: state(standby.admin).leader_epoch > 4, what="the new controller's election")
    assert state(standby.admin).leader == 2 and state(standby.admin).isr == (2, 3)
    last = logged(standby.events, "leader-election", state(standby.admin))
    assert last["previous_leader"] == 1 and last["unclean"] is False
    assert last["previous_isr"] == [1, 2, 3]  # what it elected from, as ZooKeeper held it
    assert "broker 1 restarted since it was last in sync" in str(last["reason"])


def test_a_follower_restarted_while_no_controller_acted_is_shrunk_out_of_the_isr(
    standby: Standby,
) -> None:
    standby.start(1, 2, 3)
    standby.write_state(LeaderAndIsr(1, 4, (1, 2, 3), 1))
    standby.restart(3)
    standby.hand_over()
    wait_for(lambda: state(standby.admin).leader_epoch > 4, what="the new controller's ISR shrink")
    assert state(standby.admin).leader == 1 and state(standby.admin).isr == (1, 2)
    change = logged(standby.events, "isr-change", state(standby.admin))
    assert change["isr"] == [1, 2] and "broker 3 restarted" in str(change["reason"])


def test_restarted_replicas_stay_eligible_when_no_whole_isr_member_is_live(
    standby: Standby,
) -> None:
    # As Kafka: what the restarted ISR kept is all there is; the partition comes back with it
    # (a new leader epoch) rather than staying offline.
    standby.start(1, 2, 3)
    standby.write_state(LeaderAndIsr(2, 4, (2, 3), 1))
    standby.restart(2)
    standby.restart(3)
    standby.hand_over()
    wait_for(lambda: state(standby.admin).leader_epoch > 4, what="the new controller's election")
    assert state(standby.admin).leader == 2 and state(standby.admin).isr == (2, 3)
    last = logged(standby.events, "leader-election", state(standby.admin))
    assert "no other in-sync replica is live" in str(last["reason"])


def test_an_eligible_leader_replica_is_elected_before_the_restarted_isr_of_one(
    standby: Standby,
) -> None:
    # KIP-966: 2 and 3 left the ISR as it fell below min.insync.replicas, holding everything
    # committed; the ISR of one (1) restarted and may have lost its unsynced tail.
    standby.start(1, 2, 3)
    standby.write_state(LeaderAndIsr(1, 4, (1,), 1, (2, 3)))
    standby.restart(1)
    standby.hand_over()
    wait_for(lambda: state(standby.admin).leader_epoch > 4, what="the new controller's election")
    assert state(standby.admin) == LeaderAndIsr(
        2, 5, (2,), state(standby.admin).controller_epoch, (3,)
    )
    last = logged(standby.events, "leader-election", state(standby.admin))
    assert last["unclean"] is False and last["elr"] == [3] and last["previous_elr"] == [2, 3]
    assert "elected from the eligible leader replicas" in str(last["reason"])


def test_an_eligible_leader_replica_that_restarted_is_dropped_and_not_elected(
    standby: Standby,
) -> None:
    standby.start(1, 2, 3)
    standby.write_state(LeaderAndIsr(1, 4, (1,), 1, (2, 3)))
    standby.restart(1)
    standby.restart(2)
    standby.hand_over()
    wait_for(lambda: state(standby.admin).leader_epoch > 4, what="the new controller's election")
    assert state(standby.admin).leader == 3 and state(standby.admin).isr == (3,)
    assert state(standby.admin).elr == ()
    last = logged(standby.events, "leader-election", state(standby.admin))
    assert "broker 2 restarted: no longer an eligible leader replica" in str(last["reason"])


def test_replicas_registered_before_the_state_was_written_are_left_in_sync(
    standby: Standby,
) -> None:
    standby.start(1, 2, 3)
    standby.write_state(LeaderAndIsr(1, 4, (1, 2, 3), 1))
    standby.hand_over()
    assert state(standby.admin) == LeaderAndIsr(1, 4, (1, 2, 3), 1)


def test_a_leaders_isr_writes_racing_a_broker_change_are_read_again(cluster) -> None:
    """A leader shrinks the ISR of each of its partitions in ZooKeeper, and dies before the
    controller has handled the changes' notifications: the controller's write, from the
    states it read before, finds the znodes moved on (ZooKeeper names only the first, and
    there are more of them than the controller's attempts); it reads them all again and
    elects from the ISRs the leader wrote, rather than giving up and leaving the dead
    leader in place."""
    brokers, _channel, admin, events = cluster
    wait_for(lambda: len(active(brokers)) == 1, what="a controller")
    controller = active(brokers)[0]
    leader, follower, dropped = [b for b in (1, 2, 3) if b != controller] + [controller]
    replicas = [leader, follower, dropped]
    partitions = range(STALE_STATE_ATTEMPTS + 1)
    admin.create_topic("t", dict.fromkeys(partitions, replicas), {})
    wait_for(lambda: all(state(admin, p) for p in partitions), what="states")
    wait_for(lambda: logged(events, "leader-election", state(admin)), what="the controller's state")
    versions = {}
    for partition in partitions:
        current, versions[partition] = admin.partition_state("t", partition)
        # The leader's ISR write, its notification not (yet) seen by the controller.
        shrunk = LeaderAndIsr(
            leader, current.leader_epoch, (leader, follower), current.controller_epoch
        )
        path = partition_state_path("t", partition)
        admin.client.set(path, shrunk.to_json(), version=versions[partition])
    brokers[leader].crash()
    for partition in partitions:
        wait_for(
            lambda p=partition: state(admin, p).leader == follower,
            what=f"broker {follower} to lead t-{partition}",
        )
        assert state(admin, partition).isr == (follower,)
    election = logged(events, "leader-election", state(admin))
    assert election["previous_isr"] == [leader, follower]
    assert election["previous_zk_version"] == versions[0] + 1
