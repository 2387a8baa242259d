"""Scenario runs aimed over every partition of the workload, judged from the SUT's events,
retried when they fall short, and the cluster settling between them: the pure parts (aims,
judges, settling) and the schedule runner driven by a cluster made of data."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import pytest

from nemesis.aim import RULES, Aim, aimed, choose_partition
from nemesis.errors import FaultError, TargetError
from nemesis.fault import Fault
from nemesis.generator import parse_generator
from nemesis.layout import Layout
from nemesis.reach import (
    ScenarioRun,
    coordinator_moved,
    election_by_new_controller,
    isr_of_one_then_lost,
    leader_deposed,
    restarted_follower_elected,
    second_failover_to_the_stalled_follower,
    truncation_during_failover,
)
from nemesis.scenario_watch import ScenarioWatch, unsettled
from nemesis.scenarios import DEFAULT_MIX, SCENARIOS
from nemesis.schedule import Schedule, ScheduleRunner, ScheduleSpec, generate_schedule
from nemesis.targets import ClusterView, PartitionView
from nemesis.timing import Detectors, Span
from squall.report.scenarios import describe_scenarios, scenario_section

BROKERS = ("n1", "n2", "n3")
KEYS = ("t-0", "t-1", "t-2")


def view(controller: int | None = 1, **partitions: tuple[int, tuple[int, ...]]) -> ClusterView:
    """A view of t-0..t-2; each given as ``t_N=(leader, isr)``, others led by 1 with all."""
    states = {key: PartitionView(1, 3, (1, 2, 3), (1, 2, 3)) for key in KEYS}
    for name, (leader, isr) in partitions.items():
        states[name.replace("_", "-")] = PartitionView(leader, 3, (1, 2, 3), isr)
    return ClusterView(BROKERS, "zk1", states, controller, "zookeeper")


# --- aims ----------------------------------------------------------------------------------


def test_apart_from_controller_picks_a_partition_led_elsewhere() -> None:
    seen = view(controller=1, t_1=(2, (2, 1, 3)))
    for seed in range(20):
        aim = choose_partition("apart-from-controller", seen, random.Random(seed))
        assert aim.key == "t-1" and aim.leader == 2 and not aim.fallback


def test_with_controller_and_any() -> None:
    seen = view(controller=2, t_2=(2, (1, 2, 3)))
    assert choose_partition("with-controller", seen, random.Random(0)).key == "t-2"
    keys = {choose_partition("any", seen, random.Random(s)).key for s in range(30)}
    assert keys == set(KEYS)  # every partition gets its turn, not only partition 0


def test_a_rule_no_partition_fits_falls_back_and_says_so() -> None:
    aim = choose_partition("apart-from-controller", view(controller=1), random.Random(0))
    assert aim.fallback and aim.rule == "apart-from-controller"


def test_partitions_without_a_follower_in_the_isr_are_not_aimed_at() -> None:
    seen = view(t_0=(1, (1,)), t_1=(-1, (2,)), t_2=(3, (3, 1)))
    assert choose_partition("any", seen, random.Random(0)).key == "t-2"
    with pytest.raises(TargetError, match="no partition"):
        choose_partition("any", view(t_0=(1, (1,)), t_1=(1, (1,)), t_2=(2, (2,))), random.Random(0))


def test_a_full_isr_is_preferred_and_avoided_keys_are_left_for_last() -> None:
    seen = view(t_0=(1, (1, 2)))
    picked = {choose_partition("any", seen, random.Random(s), avoid=["t-1"]).key for s in range(30)}
    assert picked == {"t-2"}
    with pytest.raises(FaultError, match="unknown partition rule"):
        choose_partition("most-leaders", seen, random.Random(0))


def test_idle_follower_picks_a_partition_with_a_follower_that_leads_nothing() -> None:
    # 1 leads t-0 and t-1, 2 leads t-2: only 3 leads nothing, and only t-0 and t-2 have it
    # in their ISR beside another leader
    seen = view(t_1=(1, (1, 2)), t_2=(2, (2, 1, 3)))
    picked = {choose_partition("idle-follower", seen, random.Random(s)) for s in range(30)}
    assert {(a.key, a.idle_followers, a.fallback) for a in picked} == {
        ("t-0", (3,), False),
        ("t-2", (3,), False),
    }
    everyone_leads = view(t_1=(2, (2, 1, 3)), t_2=(3, (3, 1, 2)))
    aim = choose_partition("idle-follower", everyone_leads, random.Random(0))
    assert aim.fallback and aim.idle_followers == ()
    assert aim.to_json()["idle_followers"] == []


def test_group_state_aims_at_the_partition_holding_the_group() -> None:
    group = {"__consumer_offsets-9": PartitionView(3, 1, (3, 1, 2), (3, 1, 2))}
    seen = replace(view(), groups=group)
    aim = choose_partition("group-state", seen, random.Random(0))
    assert (aim.key, aim.leader, aim.fallback) == ("__consumer_offsets-9", 3, False)
    # no group (the workload has no members), or its partition led by its last replica
    # alone: any of the workload's partitions, said
    alone = {"__consumer_offsets-9": PartitionView(3, 1, (3, 1, 2), (3,))}
    for groups in ({}, alone):
        aim = choose_partition("group-state", replace(view(), groups=groups), random.Random(0))
        assert aim.fallback and aim.key in KEYS


def test_aimed_strikes_a_follower_where_the_partition_had_no_idle_one() -> None:
    fault = Fault("start-slow", {"targets": ["idle-follower"]})
    assert aimed(fault, "t-1").value["targets"] == ["idle-follower:t-1"]
    assert aimed(fault, "t-1", idle=False).value["targets"] == ["follower:t-1"]


def test_aimed_rewrites_bare_roles_only() -> None:
    fault = Fault("kill", {"targets": ["leader", "controller", "followers:t-9", "n2"]})
    assert aimed(fault, "t-1").value == {
        "targets": ["leader:t-1", "controller", "followers:t-9", "n2"],
        "aim": "t-1",
    }


# --- judges --------------------------------------------------------------------------------

AIM = Aim("t-1", "any", leader=2, isr=(2, 1, 3), replicas=(1, 2, 3), controller=1)


def event(kind: str, t: int, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "wall_time_ns": t, "key": "t-1", **fields}


def election(t: int, previous: int, leader: int, isr: Sequence[int], **more: Any) -> dict[str, Any]:
    return event(
        "leader-election", t, previous_leader=previous, leader=leader, isr=list(isr), **more
    )


def run_of(name: str, *events: dict[str, Any], faults: Sequence[Fault] = ()) -> ScenarioRun:
    return ScenarioRun(name, AIM, tuple(faults), events)


def test_leader_deposed_needs_an_election_away_from_the_struck_leader() -> None:
    struck = Fault("pause", {"targets": ["n3"], "roles": {"leader:t-1": ["n3"]}})
    other_key = {**election(5, 3, 1, [1]), "key": "t-0"}
    assert not leader_deposed(run_of("zombie-leader", other_key, faults=[struck])).reached
    assert not leader_deposed(
        run_of("zombie-leader", election(5, 2, 1, [1]), faults=[struck])
    ).reached
    reach = leader_deposed(run_of("zombie-leader", election(6, 3, 1, [1, 2]), faults=[struck]))
    assert reach.reached and reach.evidence[0]["previous_leader"] == 3
    missing = leader_deposed(run_of("zombie-leader"))
    assert not missing.reached and "away from broker 2" in missing.missing


def test_isr_of_one_then_its_loss() -> None:
    shrink = event("isr-change", 1, isr=[2], leader=2)
    offline = election(2, 2, -1, [2])
    assert isr_of_one_then_lost(run_of("isr", shrink, offline)).reached
    not_lost = isr_of_one_then_lost(run_of("isr", shrink))
    assert not not_lost.reached and "never replaced" in not_lost.missing
    before = isr_of_one_then_lost(run_of("isr", election(0, 2, -1, [2]), shrink))
    assert not before.reached  # the loss must come after the shrink
    assert "never shrank" in isr_of_one_then_lost(run_of("isr", offline)).missing


def test_kip101_first_case_is_a_clean_election_of_a_restarted_follower() -> None:
    truncated = event("truncation", 1, broker=3, from_offset=10, to_offset=8)
    elected = election(2, 2, 3, [3, 1])
    reach = restarted_follower_elected(run_of("frll", truncated, elected))
    assert reach.reached and [e["type"] for e in reach.evidence] == [
        "truncation",
        "leader-election",
    ]
    unclean = election(2, 2, 3, [3], unclean=True)
    assert not restarted_follower_elected(run_of("frll", {**unclean, "isr": [1]})).reached


def test_kip101_first_case_judges_the_followers_the_restart_struck() -> None:
    # Leadership moved from 2 to 1 between the aim and the strike: the kill of the
    # followers hit 2 and 3, then the pause of the leader hit 1.
    struck = [
        Fault("kill", {"targets": ["n2", "n3"], "roles": {"followers:t-1": ["n2", "n3"]}}),
        Fault("pause", {"targets": ["n1"], "roles": {"leader:t-1": ["n1"]}}),
    ]
    restarted = election(2, 1, 2, [2, 3])
    assert restarted_follower_elected(run_of("frll", restarted, faults=struck)).reached
    never_restarted = restarted_follower_elected(
        run_of("frll", election(2, 2, 1, [1]), faults=struck)
    )
    assert not never_restarted.reached
    assert "restarted follower [2, 3]" in never_restarted.missing
    assert "away from broker 1" in never_restarted.missing


def test_kip101_second_case_needs_a_truncation_between_two_leader_changes() -> None:
    first, second = election(1, 2, 1, [1, 3]), election(4, 1, 3, [3])
    truncated = event("truncation", 3, broker=2, from_offset=9, to_offset=7)
    assert truncation_during_failover(run_of("fdt", first, truncated, second)).reached
    without = truncation_during_failover(run_of("fdt", first, second))
    assert not without.reached and "truncated" in without.missing
    early = event("truncation", 0, broker=2, from_offset=9, to_offset=7)
    assert not truncation_during_failover(run_of("fdt", early, first, second)).reached


def test_a_failover_chain_ends_with_the_follower_that_led_neither_time() -> None:
    first, second = election(1, 2, 1, [1, 3]), election(4, 1, 3, [3, 1])
    truncated = event("truncation", 2, broker=3, from_offset=9, to_offset=7)
    reach = second_failover_to_the_stalled_follower(run_of("chain", first, truncated, second))
    assert reach.reached
    assert [e["type"] for e in reach.evidence] == [
        "leader-election",
        "truncation",
        "leader-election",
    ]
    # the safe protocol need not truncate: two elections are the state
    assert second_failover_to_the_stalled_follower(run_of("chain", first, second)).reached
    back = second_failover_to_the_stalled_follower(run_of("chain", first, election(4, 1, 2, [2])))
    assert not back.reached and "not replaced by the other follower" in back.missing
    offline = election(4, 1, -1, [1])
    assert not second_failover_to_the_stalled_follower(run_of("chain", first, offline)).reached
    early = election(0, 1, 3, [3])
    assert not second_failover_to_the_stalled_follower(run_of("chain", early, first)).reached
    elsewhere = truncated | {"broker": 2}
    reach = second_failover_to_the_stalled_follower(run_of("chain", first, elsewhere, second))
    assert [e["type"] for e in reach.evidence] == ["leader-election", "leader-election"]


def test_a_failover_chain_cuts_the_last_follower_off_one_way_then_from_the_other() -> None:
    layout = Layout(random.Random(3), Detectors(6.0, 10.0, 0.5), BROKERS, 120.0)
    end = SCENARIOS["failover-chain"].lay(layout, 0.0)
    steps = layout.steps
    assert [s.fault.f for s in steps] == [
        "start-slow",
        "start-partition",
        "kill",
        "stop-slow",
        "stop-partition",
        "start-partition",
        "kill",
        "stop-partition",
        "start",
        "start",
    ]
    # a controller that outlives the first kill keeps its connection to the last follower
    assert SCENARIOS["failover-chain"].aim == "apart-from-controller"
    slowed, stale, cut = steps[0].fault.value, steps[1].fault.value, steps[5].fault.value
    assert slowed["targets"] == ["last-follower"]
    assert stale["shape"] == cut["shape"] == "one-way"
    assert (stale["targets"], stale["destinations"]) == (["leader"], ["last-follower"])
    assert (cut["targets"], cut["destinations"]) == (["leader", "last-follower"], ["followers"])
    # a few slowed fetch rounds before the cut
    assert 1.0 <= steps[1].at_s - steps[0].at_s <= 1.5
    first, swap, second = steps[2].at_s, steps[5].at_s, steps[6].at_s
    # the cut changes, and the follower runs at full speed, before the first leader's
    # session can end (2/3 of it: ZooKeeper's last ping may be that old), and the second
    # leader dies after the first election, before the lag time could drop the stalled
    # follower
    assert steps[3].at_s == steps[4].at_s == swap and swap - first < 0.67 * 6.0
    assert steps[3].heals == 0 and steps[4].heals == 1
    assert 1.3 * 6.0 <= second - first <= 1.6 * 6.0 < 6.0 + 10.0
    assert [s.heals for s in steps[7:]] == [5, 2, 6] and end - second >= 1.3 * 6.0


def test_a_coordinator_moved_when_its_partition_elected_another_leader() -> None:
    group = Aim("__consumer_offsets-9", "group-state", 3, (3, 1, 2), (3, 1, 2), controller=1)

    def run(*events: dict[str, Any]) -> ScenarioRun:
        return ScenarioRun("coordinator-failover", group, (), events)

    elected = {**election(2, 3, 1, [1, 2]), "key": "__consumer_offsets-9"}
    load = {
        "type": "group-load",
        "wall_time_ns": 3,
        "topic": "__consumer_offsets",
        "partition": 9,
        "broker": 1,
        "groups": ["g"],
    }
    reach = coordinator_moved(run(elected, load))
    assert reach.reached and [e["type"] for e in reach.evidence] == [
        "leader-election",
        "group-load",
    ]
    # deposed, its members not yet moved (they still reach a cut-off old coordinator)
    assert coordinator_moved(run(elected)).evidence == [elected]
    # a load before the election, by another broker, or of another partition: not its load
    for stale in ({"wall_time_ns": 1}, {"broker": 2}, {"partition": 8}):
        assert coordinator_moved(run(elected, {**load, **stale})).evidence == [elected]
    missing = coordinator_moved(run(load))
    assert not missing.reached and "away from broker 3" in missing.missing


def test_an_election_by_a_new_controller() -> None:
    moved = {"type": "controller-elected", "wall_time_ns": 1, "controller": 3}
    assert election_by_new_controller(run_of("cf", moved, election(2, 2, 3, [3, 1]))).reached
    same = {**moved, "controller": 1}
    assert not election_by_new_controller(run_of("cf", same, election(2, 2, 3, [3]))).reached
    stale = election_by_new_controller(run_of("cf", election(0, 2, 3, [3]), moved))
    assert not stale.reached and "new controller made no election" in stale.missing


def test_every_scenario_has_a_judge_and_a_known_rule() -> None:
    assert "slow-follower-failover" in DEFAULT_MIX
    for scenario in SCENARIOS.values():
        assert callable(scenario.reached)
        assert scenario.aim in RULES and scenario.variants
        assert not scenario.reached(run_of(scenario.name)).reached  # no events: not reached


# --- settling ------------------------------------------------------------------------------


def test_settled_means_a_controller_leaders_and_full_isrs() -> None:
    assert unsettled(view()) == []
    problems = unsettled(view(controller=None, t_0=(-1, (1, 2, 3)), t_2=(3, (3, 1))))
    assert problems == [
        "no controller",
        "t-0 has no leader",
        "t-2: replicas [2] are not in its ISR [3, 1]",
    ]
    # the group's partition too: a group without a coordinator has not settled
    group = {"__consumer_offsets-9": PartitionView(-1, 2, (3, 1, 2), (3,))}
    assert unsettled(replace(view(), groups=group)) == [
        "__consumer_offsets-9 has no leader",
        "__consumer_offsets-9: replicas [1, 2] are not in its ISR [3]",
    ]


def test_the_watch_observes_the_group_s_partition_apart_from_the_workload_s() -> None:
    group = PartitionView(2, 1, (2, 3, 1), (2, 3, 1))

    class Roles:
        def observe(
            self, keys: Collection[str], *, controller: bool, timeout_s: float
        ) -> ClusterView:
            assert set(keys) == {*KEYS, "__consumer_offsets-4"}
            return replace(view(), partitions={**view().partitions, "__consumer_offsets-4": group})

    quick = Detectors(session_timeout_s=0.2, replica_lag_s=0.2, fetch_wait_s=0.01)
    groups = ["__consumer_offsets-4"]
    watch = ScenarioWatch(
        Roles(), Cluster([], {}), KEYS, quick, rng=random.Random(0), group_keys=groups
    )
    seen = watch.view()
    assert set(seen.partitions) == set(KEYS) and dict(seen.groups) == {
        "__consumer_offsets-4": group
    }
    assert watch.aim("group-state").key == "__consumer_offsets-4"


# --- the runner, on a cluster of data ------------------------------------------------------


class Cluster:
    """Applies faults by recording them, answers roles from a list of views, logs events
    that a test scripts by the number of faults applied."""

    def __init__(self, views: list[ClusterView], events: dict[int, list[dict[str, Any]]]) -> None:
        self.views = views
        self.events = events
        self.applied: list[Fault] = []
        self.observed = 0

    def apply(self, fault: Fault) -> Fault:
        self.applied.append(fault)
        roles = {t: [f"n{AIM.leader}"] for t in fault.targets or [] if ":" in t}
        return fault.with_value(roles=roles) if roles else fault

    def observe(self, keys: Collection[str], *, controller: bool, timeout_s: float) -> ClusterView:
        assert set(keys) == set(KEYS) and controller
        self.observed += 1
        return self.views[min(self.observed, len(self.views)) - 1]

    def read(self) -> list[dict[str, Any]]:
        return self.events.pop(len(self.applied), [])


def watch_of(cluster: Cluster, **options: Any) -> ScenarioWatch:
    return ScenarioWatch(
        cluster,
        cluster,
        KEYS,
        Detectors(session_timeout_s=0.2, replica_lag_s=0.2, fetch_wait_s=0.01),
        rng=random.Random(3),
        poll_s=0.001,
        **options,
    )


def zombie_schedule() -> Schedule:
    spec = ScheduleSpec(
        generator={"repeat": "zombie-leader", "times": 2},
        time_limit_s=60,
        seed=1,
        detectors=Detectors(session_timeout_s=0.05, replica_lag_s=0.05, fetch_wait_s=0.01),
        capabilities=frozenset(),
    )
    return generate_schedule(spec)


def test_runs_are_aimed_judged_and_retried_on_another_partition() -> None:
    schedule = zombie_schedule()
    assert [f.instance for f in schedule.faults] == [0, 0, 1, 1]
    cluster = Cluster([view()], {})

    def deposed() -> list[dict[str, Any]]:
        """An election away from the leader on whatever the last fault aimed at."""
        return [{**election(1, 2, 1, [1, 3]), "key": cluster.applied[-1].value["aim"]}]

    # the first run's election shows once its two faults are applied; the second run's
    # never, so it is tried again on another partition, and there it shows
    script = {2: deposed, 6: deposed}
    cluster.read = lambda: script.pop(len(cluster.applied), list)()  # type: ignore[method-assign]
    judged: list[dict[str, Any]] = []
    runner = ScheduleRunner(cluster, watch=watch_of(cluster), on_judged=judged.append)
    applied = runner.run(schedule)
    assert [(o["instance"], o["attempt"], o["reached"]) for o in judged] == [
        (0, 1, True),
        (1, 1, False),
        (1, 2, True),
    ]
    assert judged[2]["aim"]["key"] != judged[1]["aim"]["key"]  # varied: another partition
    assert len(applied.faults) == 6 and applied.scenarios == tuple(judged)
    retried = [f for f in applied.faults if f.fault.value.get("attempt") == 2]
    assert len(retried) == 2 and retried[1].heals == retried[0].id
    assert all(
        f.fault.value["aim"] == f.fault.value["targets"][0].split(":")[1]
        for f in applied.faults
        if f.fault.f == "pause"
    )
    assert Schedule.from_json(applied.to_json()).scenarios == applied.scenarios
    section = scenario_section(applied.scenarios)
    assert section is not None
    assert section["by_name"]["zombie-leader"] == {
        "instances": 2, "reached": 2, "first_attempt": 1, "attempts": 3, "cut_off": 0, "share": 1.0,
        "variants": {"paused": {"attempts": 2, "reached": 1},
                     "paused (longer)": {"attempts": 1, "reached": 1}},
    }  # fmt: skip
    assert (
        describe_scenarios({"scenarios": section})[1]
        == "zombie-leader: reached 2 of 2 (3 attempts; by way: paused 1 of 2, paused (longer) 1 of 1)"
    )


FAST = Detectors(session_timeout_s=0.05, replica_lag_s=0.05, fetch_wait_s=0.01)


def test_a_missed_run_is_tried_again_another_way_and_replays_as_applied() -> None:
    spec = ScheduleSpec(
        generator={"scenario": "zombie-leader", "variant": "cut-off"},
        time_limit_s=60,
        seed=1,
        detectors=FAST,
        capabilities=frozenset({"partitions"}),
    )
    schedule = generate_schedule(spec)
    assert [(f.fault.f, f.variant) for f in schedule.faults] == [
        ("start-partition", "cut-off"),
        ("stop-partition", "cut-off"),
    ]
    cluster = Cluster([view()], {})  # no events: no attempt reaches its state
    applied = ScheduleRunner(cluster, watch=watch_of(cluster)).run(schedule)
    assert [
        (o["attempt"], o["variant"], o["durations"], o["reached"]) for o in applied.scenarios
    ] == [(1, "cut-off", "drawn", False), (2, "paused", "longer", False)]
    second = [f for f in applied.faults if f.fault.value.get("attempt") == 2]
    assert [f.fault.f for f in second] == ["pause", "resume"]
    assert all(f.variant == f.fault.value["variant"] == "paused" for f in second)
    assert second[1].heals == second[0].id and second[0].instance == 0
    held = second[1].at_s - second[0].at_s  # 1.3-2.0 sessions, from the longer half
    assert 1.65 * 0.05 - 0.001 <= held <= 2.0 * 0.05 + 0.001

    from squall.config.schedule_file import schedule_from_json

    saved = schedule_from_json(applied.to_json(), source="schedule.json")
    assert [f.variant for f in saved.faults] == ["cut-off"] * 2 + ["paused"] * 2
    replayer = Cluster([view()], {})
    replayed = ScheduleRunner(replayer, watch=watch_of(replayer)).run(saved)
    assert replayer.observed == 0 and replayed.scenarios == ()  # nothing chosen again

    def what(faults: Sequence[Fault]) -> list[tuple[Any, ...]]:
        return [(f.f, f.targets, f.value.get("aim"), f.value.get("attempt")) for f in faults]

    assert what(replayer.applied) == what([f.fault for f in applied.faults])


@pytest.mark.parametrize(
    ("request_timeout_s", "low", "high"),
    [(5.0, 5.5, 6.5), (30.0, 1.0, 1.5)],  # past the request timeout; else a tenth of the lag
)
def test_the_cut_before_a_failover_during_truncation_outlasts_a_client_request(
    request_timeout_s: float, low: float, high: float
) -> None:
    """A produce the cut leaves waiting holds the requests pipelined behind it, so the leader
    appends a tail of its own only after that produce times out; the followers must stay in
    the ISR, so the cut ends well within the lag time."""
    for seed in range(20):
        detectors = Detectors(6.0, 10.0, 0.5, request_timeout_s)
        layout = Layout(random.Random(seed), detectors, BROKERS, 120.0)
        SCENARIOS["failover-during-truncation"].variant("cut-off").lay(layout, 0.0)
        cut, killed = layout.steps[0], layout.steps[1]
        assert (cut.fault.f, killed.fault.f) == ("start-partition", "kill")
        assert low <= killed.at_s - cut.at_s <= high


def test_the_next_way_is_the_next_variant_the_runtime_can_apply() -> None:
    truncation = SCENARIOS["failover-during-truncation"]
    both = Layout(random.Random(0), FAST, BROKERS, 600)
    assert truncation.after(both, "cut-off").name == "followers-paused"
    assert truncation.after(both, "followers-paused").name == "cut-off"
    drawn = {
        truncation.after(Layout(random.Random(s), FAST, BROKERS, 600), None).name for s in range(20)
    }
    assert drawn == {"cut-off", "followers-paused"}  # a schedule that did not say: any
    processes = Layout(random.Random(0), FAST, BROKERS, 600, capabilities=frozenset())
    assert truncation.after(processes, "followers-paused").name == "followers-paused"
    assert SCENARIOS["rolling-bounce"].after(both, "bounce").name == "bounce"
    with pytest.raises(FaultError, match="no variant 'gc'; its variants: cut-off, paused"):
        SCENARIOS["zombie-leader"].variant("gc")


def test_a_generator_may_name_the_variant() -> None:
    layout = Layout(random.Random(0), FAST, BROKERS, 600)
    parse_generator({"scenario": "zombie-leader", "variant": "paused"}).lay(layout, 0)
    assert [(s.fault.f, s.variant) for s in layout.steps] == [
        ("pause", "paused"),
        ("resume", "paused"),
    ]
    with pytest.raises(
        FaultError, match=r"generator\.scenario: scenario zombie-leader has no variant"
    ):
        parse_generator({"scenario": "zombie-leader", "variant": "gc"})
    no_partitions = Layout(random.Random(0), FAST, BROKERS, 600, capabilities=frozenset())
    cut = parse_generator({"scenario": "zombie-leader", "variant": "cut-off"})
    assert cut.unavailable(no_partitions) == {"zombie-leader": "partitions"}
    assert cut.to_json() == {"scenario": "zombie-leader", "variant": "cut-off"}


def test_slow_follower_failover_slows_a_follower_that_leads_nothing_where_there_is_one() -> None:
    spec = ScheduleSpec(generator="slow-follower-failover", time_limit_s=60, seed=1, detectors=FAST)
    concentrated = Cluster([view(t_2=(2, (2, 1, 3)))], {})  # 3 leads nothing
    applied = ScheduleRunner(concentrated, watch=watch_of(concentrated, attempts=1)).run(
        generate_schedule(spec)
    )
    aim = applied.scenarios[0]["aim"]
    assert aim["rule"] == "idle-follower" and aim["idle_followers"] == [3]
    assert concentrated.applied[0].targets == [f"idle-follower:{aim['key']}"]
    balanced = Cluster([view(t_1=(2, (2, 1, 3)), t_2=(3, (3, 1, 2)))], {})
    applied = ScheduleRunner(balanced, watch=watch_of(balanced, attempts=1)).run(
        generate_schedule(spec)
    )
    aim = applied.scenarios[0]["aim"]
    assert aim["fallback"] and balanced.applied[0].targets == [f"follower:{aim['key']}"]


def test_the_next_run_waits_for_the_cluster_to_settle_up_to_a_bound() -> None:
    unsettled_view = view(t_1=(2, (2,)))
    cluster = Cluster([unsettled_view, unsettled_view, view()], {})
    schedule = zombie_schedule()
    runner = ScheduleRunner(cluster, watch=watch_of(cluster, attempts=1))
    applied = runner.run(schedule)
    first = applied.scenarios[0]
    assert first["settled_before"]["settled"] and cluster.observed >= 3
    # a cluster that never settles: the bound ends the wait, and the run goes on
    stuck = Cluster([unsettled_view], {})
    bounded = ScheduleRunner(
        stuck, watch=watch_of(stuck, attempts=1, settle_bound=Span(0.05, 0.05))
    )
    outcome = bounded.run(schedule).scenarios[0]
    assert not outcome["settled_before"]["settled"]
    assert "t-1: replicas [1, 3] are not in its ISR [2]" in outcome["settled_before"]["unsettled"]


def test_a_run_the_settling_moved_past_the_time_limit_is_not_started() -> None:
    schedule = zombie_schedule()  # two runs, laid out well within its 60 s
    cluster = Cluster([view()], {})
    late = [0.0]

    def clock() -> float:
        return time.monotonic() + late[0]

    def judged(outcome: dict[str, Any]) -> None:
        late[0] = 1000.0  # the first run's settling took the rest of the test

    runner = ScheduleRunner(
        cluster, watch=watch_of(cluster, attempts=1), clock=clock, on_judged=judged
    )
    applied = runner.run(schedule)
    first, second = applied.scenarios
    assert first["reached"] is not None  # judged
    assert second["reached"] is None and "time limit passed" in second["missing"]
    assert {f.instance for f in applied.faults} == {0}  # nothing of the second was applied


def test_a_stopped_run_is_cut_off_not_judged_and_resolved_schedules_are_not_watched() -> None:
    stop = threading.Event()
    cluster = Cluster([view()], {})

    class Stopping(Cluster):
        def apply(self, fault: Fault) -> Fault:
            stop.set()
            return super().apply(fault)

    stopping = Stopping([view()], {})
    outcome = ScheduleRunner(stopping, watch=watch_of(stopping), stop=stop).run(zombie_schedule())
    assert [o["reached"] for o in outcome.scenarios] == [None]
    assert scenario_section(outcome.scenarios)["by_name"]["zombie-leader"]["cut_off"] == 1  # type: ignore[index]
    resolved = Schedule(zombie_schedule().faults, resolved=True)
    replayed = ScheduleRunner(cluster, watch=watch_of(cluster)).run(resolved)
    assert replayed.scenarios == () and cluster.observed == 0


def test_layouts_number_the_runs_of_scenarios() -> None:
    layout = Layout(random.Random(0), Detectors(), BROKERS, 600)
    parse_generator({"sequence": ["zombie-leader", {"fault": "kill"}, "rolling-bounce"]}).lay(
        layout, 0
    )
    assert [s.instance for s in layout.steps] == [0, 0, None, None, 1, 1, 1]


# --- the slow fault ------------------------------------------------------------------------


class Daemons:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def pause(self, node: str) -> bool:
        self.calls.append(("pause", node))
        return True

    def resume(self, node: str) -> bool:
        self.calls.append(("resume", node))
        return True


def test_a_duty_cycle_alternates_and_leaves_the_process_running() -> None:
    from nemesis.duty_cycle import DutyCycle, DutyCycleSpec

    daemons = Daemons()
    held: set[str] = set()
    cycle = DutyCycle(
        daemons, "n2", DutyCycleSpec(10, 10), lock=threading.Lock(), held=lambda: held
    )  # type: ignore[arg-type]
    cycle.start()
    while cycle.cycles < 3:
        threading.Event().wait(0.01)
    held.add("n2")  # paused by another fault: the cycle neither pauses nor resumes it
    calls = len(daemons.calls)
    threading.Event().wait(0.1)
    assert len(daemons.calls) <= calls + 1
    held.clear()
    cycle.stop()
    assert daemons.calls[-1] == ("resume", "n2")
    kinds = [k for k, _ in daemons.calls[:6]]
    assert kinds == ["pause", "resume"] * 3


def test_the_slow_fault_is_data_validated_and_healed_by_stop_slow() -> None:
    fault = Fault("start-slow", {"targets": ["follower"], "stopped_ms": 200, "running_ms": 100})
    assert Fault.from_json(fault.to_json()) == fault
    with pytest.raises(FaultError, match="targets"):
        Fault("start-slow", {})
    with pytest.raises(FaultError, match="stopped_ms must be between"):
        Fault("start-slow", {"targets": ["n1"], "stopped_ms": 0})
    spec = ScheduleSpec(faults={"slow": 1}, interval_s=(1, 2), duration_s=(1, 2), time_limit_s=10)
    drawn = generate_schedule(spec).faults
    assert [f.fault.f for f in drawn[:2]] == ["start-slow", "stop-slow"]
    assert drawn[0].fault.targets == ["follower"] and drawn[1].heals == drawn[0].id


def test_a_watched_schedule_is_a_valid_schedule_json_and_replays_unwatched() -> None:
    from squall.config.schedule_file import schedule_from_json

    cluster = Cluster([view()], {})
    applied = ScheduleRunner(cluster, watch=watch_of(cluster)).run(zombie_schedule())
    doc = applied.to_json()
    assert doc["scenarios"] and all("instance" in f for f in doc["faults"])
    again = schedule_from_json(doc, source="schedule.json")
    assert again.resolved and again.scenarios == applied.scenarios


def test_slow_observations_before_a_run_do_not_shorten_its_first_fault() -> None:
    import time

    class Slow(Cluster):
        def __init__(self) -> None:
            super().__init__([view()], {})
            self.struck: list[float] = []

        def apply(self, fault: Fault) -> Fault:
            self.struck.append(time.monotonic())
            return super().apply(fault)

        def observe(
            self, keys: Collection[str], *, controller: bool, timeout_s: float
        ) -> ClusterView:
            time.sleep(0.05)
            return super().observe(keys, controller=controller, timeout_s=timeout_s)

        def read(self) -> list[dict[str, Any]]:
            time.sleep(0.1)
            return []

    cluster = Slow()
    schedule = zombie_schedule()
    planned = schedule.faults[1].at_s - schedule.faults[0].at_s
    applied = ScheduleRunner(cluster, watch=watch_of(cluster, attempts=1)).run(schedule)
    # waits only ever run long: the pause lasts at least as long as it was laid out
    assert cluster.struck[1] - cluster.struck[0] >= planned - 0.002
    first = applied.scenarios[0]
    assert abs(applied.faults[0].at_s - first["started_s"]) < planned


def test_the_reports_show_which_scenarios_reached_their_state() -> None:
    import io

    from rich.console import Console

    from squall.report.console import print_results
    from squall.report.html import render_html
    from squall.report.junit import render_junit

    outcomes = [
        {"scenario": "zombie-leader", "instance": 0, "attempt": 1, "reached": True,
         "aim": {"key": "t-1"}, "evidence": [election(1, 2, 1, [1])]},
        {"scenario": "failover-during-truncation", "instance": 1, "attempt": 1, "reached": False,
         "aim": {"key": "t-2"}, "missing": "no replica of t-2 truncated after it"},
        {"scenario": "failover-during-truncation", "instance": 1, "attempt": 2, "reached": False,
         "variant": "cut-off", "durations": "longer",
         "aim": {"key": "t-0"}, "missing": "no replica of t-0 truncated after it"},
        {"scenario": "rolling-bounce", "instance": 2, "attempt": 1, "reached": None},
    ]  # fmt: skip
    section = scenario_section(outcomes)
    assert section is not None
    assert (section["instances"], section["reached"], section["share"]) == (2, 1, 0.5)
    assert section["by_name"]["rolling-bounce"]["cut_off"] == 1
    results = {"valid": True, "checkers": {}, "scenarios": section}

    out = io.StringIO()
    print_results(results, console=Console(file=out, width=200))
    text = out.getvalue()
    assert "scenarios reached their state in 1 of 2 runs" in text
    assert (
        "failover-during-truncation #1 attempt 2, cut-off (longer), on t-0: no replica of t-0 "
        "truncated" in text
    )

    junit = render_junit(results, suite="s")
    assert 'skipped="1"' in junit and "reached its state in none of its 1 runs" in junit
    assert '<testcase classname="s" name="scenario zombie-leader"><system-out>' in junit

    page = render_html(results)
    assert "<h2 id='scenarios'>Scenarios</h2>" in page and "no replica of t-0 truncated" in page
    assert "<td>cut-off (longer)</td>" in page
