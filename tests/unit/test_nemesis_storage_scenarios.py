"""The storage scenarios: how they lay their faults out, where the runtime can run them, and
how their runs are judged from the SUT's events (hand-written here)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from nemesis.aim import Aim
from nemesis.fault import Fault
from nemesis.layout import CAPABILITIES, Layout
from nemesis.reach import ScenarioRun, damaged_then_leader_lost, reelected_after_outage
from nemesis.scenarios import DEFAULT_FAMILIES, DEFAULT_MIX, DISK_SCENARIOS, DISKS_FAMILY, SCENARIOS
from nemesis.schedule import ScheduleSpec, generate_schedule, not_applicable
from nemesis.timing import Detectors

AIM = Aim("t-1", "any", 2, (2, 1, 3), (1, 2, 3), 1)
STORAGE = (
    "minority-corruption",
    "follower-rollback",
    "leader-power-loss",
    "paused-followers-leader-power-loss",
    "isr-shrink-leader-power-loss",
    "rack-power-loss",
)


def lay(name: str, seed: int = 0, capabilities: frozenset[str] = CAPABILITIES) -> list[Any]:
    layout = Layout(random.Random(seed), Detectors(), ("n1", "n2", "n3"), 600.0, capabilities)
    SCENARIOS[name].lay(layout, 0.0)
    return [(step.fault.f, step.fault.value.get("targets"), step.heals) for step in layout.steps]


def test_the_storage_scenarios_lay_a_damage_then_a_leader_loss() -> None:
    kinds = {lay("minority-corruption", seed)[0][0] for seed in range(20)}
    assert kinds == {"corrupt-file", "truncate-file"}
    steps = lay("minority-corruption")
    assert [(f, t, h) for f, t, h in steps[1:]] == [
        ("start", None, 0),
        ("kill", ["leader"], None),
        ("start", None, 2),
    ]
    assert lay("follower-rollback") == [
        ("snapshot", ["follower"], None),
        ("rollback", None, 0),
        ("kill", ["leader"], None),
        ("start", None, 2),
    ]
    assert lay("paused-followers-leader-power-loss") == [
        ("pause", ["followers"], None),
        ("power-loss", ["leader"], None),
        ("resume", None, 0),
        ("start", None, 1),
    ]
    assert lay("rack-power-loss") == [("power-loss", ["isr"], None), ("start", None, 0)]
    ways = {repr(lay("isr-shrink-leader-power-loss", seed)) for seed in range(20)}
    assert ways == {
        repr(
            [
                ("start-partition", ["leader"], None),
                ("power-loss", ["leader"], None),
                ("stop-partition", None, 0),
                ("start", None, 1),
            ]
        ),
        repr(
            [
                ("pause", ["followers"], None),
                ("power-loss", ["leader"], None),
                ("resume", None, 0),
                ("start", None, 1),
            ]
        ),
    }


@pytest.mark.parametrize("variant", ["cut-off", "followers-paused"])
def test_an_isr_of_one_loses_power_after_the_lag_time_and_the_cut_heals_after_it(
    variant: str,
) -> None:
    layout = Layout(random.Random(3), Detectors(), ("n1", "n2", "n3"), 600.0, CAPABILITIES)
    SCENARIOS["isr-shrink-leader-power-loss"].variant(variant).lay(layout, 10.0)
    cut, lost, healed, back = layout.steps
    lag, session = Detectors().replica_lag_s, Detectors().session_timeout_s
    assert cut.at_s == 10.0
    assert 10.0 + 1.2 * lag <= lost.at_s <= 10.0 + 1.5 * lag
    assert healed.at_s == lost.at_s + 0.5 and healed.heals == 0
    assert lost.at_s + 1.3 * session <= back.at_s <= lost.at_s + 2.0 * session
    if variant == "cut-off":
        assert cut.fault.f == "start-partition" and lost.same_as == 0
    else:
        assert cut.fault.f == "pause" and cut.fault.targets == ["followers"]
    assert SCENARIOS["isr-shrink-leader-power-loss"].needs == "lazy-disk"


def test_storage_scenarios_run_only_where_the_runtime_can_apply_them() -> None:
    without_lazy = frozenset(CAPABILITIES - {"lazy-disk"})
    spec = ScheduleSpec(
        generator={"mix": [{"weight": 1, "do": name} for name in STORAGE]},
        capabilities=without_lazy,
    )
    assert not_applicable(spec) == {
        "leader-power-loss": "lazy-disk",
        "paused-followers-leader-power-loss": "lazy-disk",
        "isr-shrink-leader-power-loss": "lazy-disk",
        "rack-power-loss": "lazy-disk",
    }
    in_isr_shrink = {"isr-shrink-leader-power-loss"}
    assert set(DISK_SCENARIOS) == set(STORAGE)
    assert set(STORAGE) <= set(DEFAULT_MIX)
    assert DEFAULT_FAMILIES["ISR shrink"] == (
        ("isr-shrink-leader-power-loss", "isr-shrink-leader-loss"),
    )
    assert set(DEFAULT_FAMILIES[DISKS_FAMILY]) == set(STORAGE) - in_isr_shrink

    def scenarios(generator: str, capabilities: frozenset[str]) -> set[str | None]:
        spec = ScheduleSpec(generator=generator, time_limit_s=600.0, capabilities=capabilities)
        return {s.scenario for s in generate_schedule(spec).faults}

    plain_disks = scenarios("default", without_lazy)
    assert {"minority-corruption", "follower-rollback"} <= plain_disks
    assert not plain_disks & {"leader-power-loss", "rack-power-loss"}
    assert plain_disks - set(STORAGE)
    assert not scenarios("default", frozenset()) & set(STORAGE)
    everything = frozenset({"partitions", "disks", "lazy-disk"})
    assert set(STORAGE) <= scenarios("default", everything)
    assert not scenarios("default-without-disks", everything) & set(STORAGE)
    assert scenarios("default-without-disks", everything) - {None} <= set(DEFAULT_MIX)


def test_default_with_disks_is_another_name_of_the_default_mix() -> None:
    for seed in range(5):
        mixes = [
            generate_schedule(ScheduleSpec(generator=name, time_limit_s=300.0, seed=seed)).faults
            for name in ("default", "default-with-disks")
        ]
        assert mixes[0] == mixes[1], seed


def event(kind: str, t: int, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "wall_time_ns": t, "key": "t-1", **fields}


def run_of(name: str, *events: dict[str, Any], faults: Sequence[Fault] = ()) -> ScenarioRun:
    return ScenarioRun(name, AIM, tuple(faults), events)


def test_a_damaged_follower_then_a_leader_change_is_reached() -> None:
    corrupted = Fault(
        "corrupt-file",
        {"targets": ["n3"], "roles": {"follower:t-1": ["n3"]}, "outcome": {"n3": "corrupted"}},
    )
    killed = Fault("kill", {"targets": ["n2"], "roles": {"leader:t-1": ["n2"]}})
    recovered = event("log-recovery", 1, broker=3, log_end_offset=40, truncated_bytes=900)
    elected = event("leader-election", 2, previous_leader=2, leader=3, isr=[3, 1])
    reach = damaged_then_leader_lost(
        run_of("minority-corruption", recovered, elected, faults=[corrupted, killed])
    )
    assert reach.reached
    assert [e["type"] for e in reach.evidence] == ["log-recovery", "leader-election"]
    no_election = damaged_then_leader_lost(run_of("mc", recovered, faults=[corrupted, killed]))
    assert not no_election.reached and "n3 damaged, but no election" in no_election.missing
    failed = Fault("corrupt-file", {"targets": ["n3"], "outcome": {}, "error": "no file"})
    undamaged = damaged_then_leader_lost(run_of("mc", elected, faults=[failed, killed]))
    assert not undamaged.reached and "had its disk damaged" in undamaged.missing
    rolled = Fault("rollback", {"targets": ["n1"], "outcome": {"n1": "rolled-back"}})
    assert damaged_then_leader_lost(run_of("fr", elected, faults=[rolled, killed])).reached


def test_a_rack_outage_is_over_when_a_controller_or_leader_is_elected_again() -> None:
    assert not reelected_after_outage(run_of("rack")).reached
    offline = event("leader-election", 1, previous_leader=2, leader=-1, isr=[2])
    assert not reelected_after_outage(run_of("rack", offline)).reached
    controller = {"type": "controller-elected", "wall_time_ns": 2, "controller": 1}
    assert reelected_after_outage(run_of("rack", offline, controller)).reached
    back = event("leader-election", 3, previous_leader=-1, leader=2, isr=[2])
    assert reelected_after_outage(run_of("rack", offline, back)).evidence == [back]
