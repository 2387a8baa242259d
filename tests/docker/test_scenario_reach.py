"""Every scenario, run as a test run runs it (aimed at one of the workload's partitions,
watched, judged from the SUT's events as the nodes log them), reaches its state on real
containers, and says so; and a scenario that cannot reach its state says that too.

One run per scenario: its judge's verdict is checked, and where a scenario's state means
more than its judge looks at (the KIP-101 sequences), the SUT's own events of the run are
checked for that too. One cluster with quick detectors (3 s sessions, 3 s replica lag) and
a topic of three partitions serves every scenario; a producer keeps acks=1 writes in flight
to every partition, so that leader changes have something to lose and returning replicas
something to truncate.
"""

from __future__ import annotations

import json
import random
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nemesis import (
    Fault,
    Nemesis,
    Schedule,
    ScheduleRunner,
    ScheduleSpec,
    generate_schedule,
    heal_all,
)
from nemesis.scenario_watch import ScenarioWatch
from nemesis.scenarios import SCENARIOS
from nemesis.timing import Detectors
from squall.cluster.cluster import Cluster
from squall.cluster.docker import DockerRuntime
from squall.cluster.event_tail import EventTail
from system_under_test.client import AdminClient, Producer
from system_under_test.group_metadata_manager import partition_for
from tests.support import QUICK_DETECTORS
from tests.support import wait_for as _wait_for

pytestmark = pytest.mark.docker
TOPIC = "reach"
KEYS = [f"{TOPIC}-{p}" for p in range(3)]
DETECTORS = Detectors(session_timeout_s=3.0, replica_lag_s=3.0, fetch_wait_s=0.2)
SETTINGS = QUICK_DETECTORS


def wait_for(condition: Callable[[], Any], *, timeout: float = 60.0, what: str) -> Any:
    return _wait_for(condition, timeout, what, interval=0.3)


def full_isrs(cluster: Cluster) -> bool:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        partitions = admin.describe_topics([TOPIC])[0].partitions
        return all(p.leader >= 0 and len(p.isr) == 3 for p in partitions)


class Writer:
    """Sends acks=1 records to every partition in turn until stopped; failures are expected."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            bootstrap, acks=1, mode="async", config={"queue.buffering.max.ms": 2}
        )
        self.stopped = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, name="reach-writer", daemon=True)

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                try:
                    self.producer.send(TOPIC, str(self.sent).encode(), partition=self.sent % 3)
                    self.sent += 1
                except Exception:
                    time.sleep(0.05)
                time.sleep(0.004)
        finally:
            self.producer.close(timeout=5)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)
        assert self.sent > 100, f"the writer sent only {self.sent} records"


class RecordedEvents:
    """The cluster's event tail, keeping every SUT event it read for the test to look at."""

    def __init__(self, cluster: Cluster) -> None:
        self.tail = EventTail(cluster)
        self.seen: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        events = self.tail.read()
        self.seen += events
        return events


@dataclass(frozen=True)
class Watched:
    """The judged runs of one scenario, and every SUT event logged while they ran."""

    outcomes: list[dict[str, Any]]
    events: list[dict[str, Any]]
    started_ns: int
    """Wall time at which the schedule runner started (its ``started_s`` count from here)."""

    def reached(self) -> dict[str, Any]:
        """The first run that reached its state (the test fails when none did)."""
        assert any(o["reached"] for o in self.outcomes), self.outcomes
        return next(o for o in self.outcomes if o["reached"])

    def events_of(self, outcome: dict[str, Any]) -> list[dict[str, Any]]:
        """The events logged from that run's first fault on, in time order."""
        since = self.started_ns + int(outcome["started_s"] * 1e9)
        return sorted(
            (e for e in self.events if e["wall_time_ns"] >= since),
            key=lambda e: e["wall_time_ns"],
        )


@pytest.fixture(scope="module")
def cluster(squall_home: Path, docker_runtime: DockerRuntime) -> Iterator[Cluster]:
    run_id = f"reach-{secrets.token_hex(3)}"
    cluster = docker_runtime.up(run_id, 3, settings=SETTINGS)
    try:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, 3, replication_factor=3)
        wait_for(lambda: full_isrs(cluster), what="full ISRs")
        yield cluster
    finally:
        cluster.close()
        docker_runtime.clean(run_id)


def run_watched(
    cluster: Cluster, generator: Any, *, detectors: Detectors = DETECTORS, seed: int = 5
) -> Watched:
    """Lay the generator out and run it as a test run does, watched; its judged runs."""
    return run_schedule(cluster, generator, detectors=detectors, seed=seed)[1]


def run_schedule(
    cluster: Cluster,
    generator: Any,
    *,
    detectors: Detectors = DETECTORS,
    seed: int = 5,
    group_keys: Sequence[str] = (),
) -> tuple[Schedule, Watched]:
    """Lay the generator out and run it as a test run does, watched; the applied schedule
    and its judged runs. ``group_keys``: the partitions holding the state of a group whose
    members run meanwhile (the runtime then has ``members``)."""
    wait_for(lambda: full_isrs(cluster), what="full ISRs before")
    spec = ScheduleSpec(
        generator=generator,
        time_limit_s=600.0,
        seed=seed,
        detectors=detectors,
        brokers=tuple(cluster.brokers),
        capabilities=frozenset(
            {
                "partitions",
                "disks",
                "zookeeper",
                *(["lazy-disk"] if cluster.capabilities.lazy_disk else []),
                *(["members"] if group_keys else []),
            }
        ),
    )
    nemesis = Nemesis(cluster, rng=random.Random(seed), topic_hint=KEYS[0], partitions=KEYS)
    events = RecordedEvents(cluster)
    watch = ScenarioWatch(
        cluster.roles, events, KEYS, DETECTORS, rng=random.Random(seed), group_keys=group_keys
    )
    try:
        with Writer(cluster.bootstrap):
            started_ns = time.time_ns()
            applied = ScheduleRunner(nemesis, watch=watch).run(generate_schedule(spec))
    finally:
        nemesis.heal(restart_killed=True)
        heal_all(cluster, restart_killed=True)
    wait_for(lambda: full_isrs(cluster), timeout=90, what="full ISRs after")
    assert all("error" not in s.fault.value for s in applied.faults), applied.to_json()
    assert applied.scenarios, "no run of the scenario was judged"
    events.read()  # what was logged after the last judgement
    return applied, Watched(list(applied.scenarios), events.seen, started_ns)


def a_leader_apart_from_the_controller(cluster: Cluster) -> None:
    """Bounce the controller until it leads not every partition: KIP-101's first sequence
    needs a controller that outlives the leader (with the controller on the leader's node,
    the restarted followers are made followers by nobody before the leader is gone)."""
    for _ in range(4):
        view = cluster.roles.observe(KEYS, controller=True)
        if any(p.leader != view.controller for p in view.partitions.values()):
            return
        Nemesis(cluster, rng=random.Random(1)).apply(Fault("bounce", {"targets": ["controller"]}))
        wait_for(lambda: full_isrs(cluster), what="full ISRs after a bounce")
    pytest.fail("the controller stayed the leader of every partition after four bounces")


def kip_101_first_sequence(watched: Watched, reached: dict[str, Any]) -> None:
    """A new controller (the old one was among the followers) made the restarted followers
    followers again and, once the leader's session ended, elected one of them: at its
    failover, where they were the only live ISR members (`restart`), or at the leader's
    death after they rejoined the ISR (`rejoined`)."""
    assert not reached["aim"]["fallback"], reached["aim"]
    elected = reached["evidence"][-1]
    assert elected["type"] == "leader-election", reached
    assert elected["reason"].startswith(("broker change", "controller failover")), elected
    assert any(
        e["type"] == "controller-elected" and e["wall_time_ns"] < elected["wall_time_ns"]
        for e in watched.events_of(reached)
    ), "no new controller between the followers' restart and the election"


def truncations_go_back(watched: Watched, reached: dict[str, Any]) -> None:
    """Every truncation of the run's partition cut its log back, none forward."""
    key = reached["aim"]["key"]
    truncations = [
        e for e in watched.events_of(reached) if e["type"] == "truncation" and e["key"] == key
    ]
    assert truncations, "no replica truncated after the failover"
    assert all(e["to_offset"] < e["from_offset"] for e in truncations), truncations


STATES: dict[str, Callable[[Watched, dict[str, Any]], None]] = {
    "follower-restart-leader-loss": kip_101_first_sequence,
    "failover-during-truncation": truncations_go_back,
}
"""What a scenario's state means beyond its judge, checked on the SUT's events of the run."""


GROUP_SCENARIOS = ("coordinator-failover",)
"""Scenarios aimed at a consumer group's coordinator: their own test, with members."""


@pytest.mark.parametrize("name", sorted(set(SCENARIOS) - set(GROUP_SCENARIOS)))
def test_the_scenario_reaches_its_state(cluster: Cluster, name: str) -> None:
    if SCENARIOS[name].aim == "apart-from-controller":
        a_leader_apart_from_the_controller(cluster)
    watched = run_watched(cluster, name)
    reached = watched.reached()
    assert reached["aim"]["key"] in KEYS and reached["evidence"], reached
    assert all(e["key"] == reached["aim"]["key"] for e in reached["evidence"] if "key" in e)
    if name in STATES:
        STATES[name](watched, reached)


def test_a_scenario_that_cannot_reach_its_state_says_so(cluster: Cluster) -> None:
    """A zombie leader paused for a small part of the real session (the schedule is drawn
    as if sessions lasted 0.3 s) is never deposed: both attempts say what was missing."""
    short = Detectors(session_timeout_s=0.3, replica_lag_s=0.3, fetch_wait_s=0.2)
    outcomes = run_watched(cluster, "zombie-leader", detectors=short, seed=7).outcomes
    assert [o["attempt"] for o in outcomes] == [1, 2]
    assert all(o["reached"] is False for o in outcomes), outcomes
    assert all("no election" in o["missing"] for o in outcomes)
    assert outcomes[0]["aim"]["key"] != outcomes[1]["aim"]["key"]
    # tried again another way: the other variant, its durations from the longer half
    assert {o["variant"] for o in outcomes} == {"cut-off", "paused"}
    assert [o["durations"] for o in outcomes] == ["drawn", "longer"]


def test_failover_during_truncation_with_the_followers_cut_off(cluster: Cluster) -> None:
    """The partition variant: the leader's traffic to the followers dropped, not the
    followers paused, until it comes back. Their fetches still reach it, so clients keep
    writing and it appends what they never fetch, a tail to truncate: the state is reached
    at the first attempt."""
    watched = run_watched(
        cluster, {"scenario": "failover-during-truncation", "variant": "cut-off"}, seed=3
    )
    first = watched.outcomes[0]
    assert first["variant"] == "cut-off" and first["reached"] is True, first
    reached = watched.reached()
    truncations_go_back(watched, reached)
    assert [e["type"] for e in reached["evidence"]] == [
        "leader-election",
        "truncation",
        "leader-election",
    ]


def leaders(cluster: Cluster) -> set[int]:
    with AdminClient(cluster.bootstrap, request_timeout_ms=3000) as admin:
        return {p.leader for p in admin.describe_topics([TOPIC])[0].partitions}


def test_slow_follower_failover_slows_a_follower_that_leads_nothing(cluster: Cluster) -> None:
    """A broker bounced cleanly comes back leading nothing (nothing moves leadership back):
    the run aims at a partition it follows and slows it, not a follower that leads."""
    wait_for(lambda: full_isrs(cluster), what="full ISRs before")
    nemesis = Nemesis(cluster, rng=random.Random(1), topic_hint=KEYS[0], partitions=KEYS)
    led = sorted(leaders(cluster))
    nemesis.apply(Fault("bounce", {"targets": [f"n{led[0]}"]}))
    wait_for(
        lambda: full_isrs(cluster) and led[0] not in leaders(cluster),
        what=f"broker {led[0]} back in every ISR, leading nothing",
    )
    applied, _ = run_schedule(cluster, "slow-follower-failover")
    first = applied.scenarios[0]
    assert first["aim"]["rule"] == "idle-follower" and not first["aim"]["fallback"], first
    idle = first["aim"]["idle_followers"]
    assert led[0] in idle, first
    slowed = next(f.fault for f in applied.faults if f.fault.f == "start-slow")
    assert slowed.value["requested"]["targets"] == [f"idle-follower:{first['aim']['key']}"]
    hit = slowed.targets or []
    assert len(hit) == 1 and int(hit[0][1:]) in idle, slowed
    assert any(o["reached"] for o in applied.scenarios), applied.scenarios


GROUP = "reach-group"
GROUP_KEY = f"__consumer_offsets-{partition_for(GROUP, 12)}"
"""The partition holding the group's state (the brokers' 12 partitions of the topic)."""


@contextmanager
def members(cluster: Cluster, count: int, out: Path) -> Iterator[list[Path]]:
    """``count`` members of ``GROUP`` reading ``TOPIC`` and committing, through squall's
    client, each in a process of its own that writes what it did to a file of ``out``."""
    logs = [out / f"member-{i}.jsonl" for i in range(count)]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.group_member",
                "squall",
                cluster.bootstrap,
                GROUP,
                TOPIC,
            ],
            stdout=log.open("w"),
            stderr=subprocess.DEVNULL,
        )
        for log in logs
    ]
    try:
        yield logs
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def said(log: Path, what: str) -> list[Any]:
    """What a member printed under ``what``, in order."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [line[what] for line in lines if what in line]


@pytest.mark.parametrize("variant", ["killed", "cut-off", "paused"])
def test_a_coordinator_failover_moves_the_group_to_a_broker_that_loads_it(
    cluster: Cluster, tmp_path: Path, variant: str
) -> None:
    """The group's coordinator (its partition's leader) lost, each way, while two members
    read and commit: the partition's leadership moves, the run says so from the events, and
    the group goes on under a new coordinator, which loaded it from its partition's log."""
    with members(cluster, 2, tmp_path) as logs:

        def assigned() -> bool:
            view = cluster.roles.observe([GROUP_KEY], controller=False)
            state = view.partitions.get(GROUP_KEY)
            held = {p for log in logs for now in said(log, "assigned")[-1:] for p in now}
            return state is not None and len(state.isr) == 3 and held == {0, 1, 2}

        wait_for(assigned, what="the group's partition in full ISR, every partition assigned")
        applied, watched = run_schedule(
            cluster,
            {"scenario": "coordinator-failover", "variant": variant},
            seed=2,
            group_keys=[GROUP_KEY],
        )
        reached = watched.reached()
        assert watched.outcomes[0]["variant"] == variant
        assert reached["aim"]["key"] == GROUP_KEY and not reached["aim"]["fallback"], reached
        assert reached["aim"]["rule"] == "group-state"
        elected = reached["evidence"][0]
        assert elected["previous_leader"] == reached["aim"]["leader"] != elected["leader"]
        # the group goes on under its new coordinator: new records are read and committed
        before = sum(len(said(log, "committed")) for log in logs)
        producer = Producer(cluster.bootstrap, acks=-1)
        try:
            for n in range(30):
                producer.send(TOPIC, f"after-{n}".encode(), partition=n % 3)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=5)
        wait_for(
            lambda: sum(len(said(log, "committed")) for log in logs) > before,
            what="a commit through the new coordinator",
        )
        # which loaded the group from its partition's log
        loads = [
            e
            for e in watched.events + RecordedEvents(cluster).read()
            if e["type"] == "group-load"
            and e["wall_time_ns"] >= elected["wall_time_ns"]
            and f"{e['topic']}-{e['partition']}" == GROUP_KEY
        ]
        assert any(GROUP in e["groups"] for e in loads), loads
    assert all(s.fault.value.get("aim") == GROUP_KEY for s in applied.faults), applied.to_json()
