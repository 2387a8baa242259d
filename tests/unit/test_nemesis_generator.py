"""The generator language and the scenarios: laid out deterministically, around the
cluster's detectors, within the runtime's capabilities, linked so that a replay and the
runner hit the right nodes."""

from __future__ import annotations

import json
import random

import pytest

from nemesis import Fault, ScheduleRunner
from nemesis.errors import FaultError
from nemesis.fault import MEMBER_FAULTS
from nemesis.generator import parse_generator
from nemesis.layout import Layout
from nemesis.scenarios import (
    DEFAULT_FAMILIES,
    DEFAULT_MIX,
    DISKS_FAMILY,
    SCENARIOS,
    turn_scenarios,
)
from nemesis.schedule import Schedule, ScheduleSpec, generate_schedule, not_applicable
from nemesis.timing import Detectors, Span

DETECTORS = Detectors(session_timeout_s=6.0, replica_lag_s=10.0, fetch_wait_s=0.5)


def spec(generator: object, **changes: object) -> ScheduleSpec:
    fields: dict[str, object] = {
        "generator": generator,
        "time_limit_s": 120.0,
        "seed": 3,
        "detectors": DETECTORS,
    }
    fields.update(changes)
    return ScheduleSpec(**fields)  # type: ignore[arg-type]


def test_spans_are_drawn_around_the_detectors() -> None:
    rng = random.Random(0)
    assert Span.parse("1.5-2.5 session").unit == "session"
    draws = [Span.parse("1.5-2.5 session").draw(DETECTORS, rng) for _ in range(200)]
    assert all(9.0 <= d <= 15.0 for d in draws)
    assert Span.parse([4, 8]) == Span(4, 8) == Span.parse("4-8 s")
    assert Span.parse(6) == Span(6, 6)
    with pytest.raises(FaultError, match="unit 'weeks'"):
        Span.parse("1-2 weeks")
    with pytest.raises(FaultError, match="min <= max"):
        Span.parse("3-1 lag")


def test_the_default_mix_covers_every_family_in_each_round() -> None:
    family_of: dict[str | None, str] = {
        name: family
        for family, turns in DEFAULT_FAMILIES.items()
        for turn in turns
        for name in turn_scenarios(turn)
    }
    seen_over_seeds: set[str | None] = set()
    for seed in range(20):
        schedule = generate_schedule(spec("default", seed=seed))
        scenarios = {s.scenario for s in schedule.faults if s.fault.f not in MEMBER_FAULTS}
        seen_over_seeds |= scenarios
        assert {family_of[s] for s in scenarios} == set(DEFAULT_FAMILIES), seed
        assert all(s.at_s <= 120.0 for s in schedule.faults)
        starts = [s.scenario for s in schedule.faults if s.scenario]
        runs = [name for i, name in enumerate(starts) if i == 0 or starts[i - 1] != name]
        families = [family_of[name] for name in runs]
        assert len(set(families[:3])) == 3, (seed, families)  # the first round: one of each
    assert seen_over_seeds == set(DEFAULT_MIX) - {"isr-shrink-leader-loss"}
    without = {
        s.scenario
        for s in generate_schedule(spec("default-without-disks")).faults
        if s.fault.f not in MEMBER_FAULTS
    }
    assert {family_of[s] for s in without} == set(DEFAULT_FAMILIES) - {DISKS_FAMILY}
    assert "isr-shrink-leader-loss" in without


def test_an_isr_of_one_loses_its_power_where_the_runtime_can_cut_it() -> None:
    for seed in range(10):
        scenarios = {s.scenario for s in generate_schedule(spec("default", seed=seed)).faults}
        assert "isr-shrink-leader-power-loss" in scenarios, seed
        assert "isr-shrink-leader-loss" not in scenarios, seed
    no_power = frozenset({"partitions", "disks"})
    schedule = generate_schedule(spec("default", capabilities=no_power))
    assert "isr-shrink-leader-loss" in {s.scenario for s in schedule.faults}
    assert "isr-shrink-leader-power-loss" in not_applicable(spec("default", capabilities=no_power))


def test_first_takes_the_first_the_runtime_can_apply() -> None:
    doc = {"first": ["rack-power-loss", {"fault": "kill"}]}
    generator = parse_generator(doc)
    assert generator.to_json()["first"][0] == "rack-power-loss"
    with_power = generate_schedule(spec(doc))
    assert [s.fault.f for s in with_power.faults] == ["power-loss", "start"]
    without = generate_schedule(spec(doc, capabilities=frozenset({"partitions"})))
    assert [s.fault.f for s in without.faults] == ["kill", "start"]
    with pytest.raises(FaultError, match="first"):
        parse_generator({"first": []})


def test_the_same_spec_gives_the_same_schedule_and_survives_json() -> None:
    first = generate_schedule(spec("default"))
    assert generate_schedule(spec("default")) == first
    again = Schedule.from_json(json.loads(json.dumps(first.to_json())))
    assert again == first
    assert generate_schedule(spec("default", seed=4)) != first


def test_without_partitions_scenarios_use_process_faults_or_stand_aside() -> None:
    schedule = generate_schedule(spec("default", capabilities=frozenset()))
    assert schedule.faults
    assert not [s for s in schedule.faults if s.fault.f.endswith("partition")]
    assert "leader-session-loss" not in {s.scenario for s in schedule.faults}
    with pytest.raises(FaultError, match="cannot do"):
        generate_schedule(spec("leader-session-loss", capabilities=frozenset()))


def test_isr_shrink_then_leader_loss_outlasts_the_lag_then_the_session() -> None:
    for seed in range(20):
        layout = Layout(random.Random(seed), DETECTORS, ("n1", "n2", "n3"), 300.0)
        SCENARIOS["isr-shrink-leader-loss"].lay(layout, 0.0)
        cut, kill = layout.steps[0], next(s for s in layout.steps if s.fault.f == "kill")
        start = next(s for s in layout.steps if s.fault.f == "start")
        assert kill.at_s - cut.at_s >= 1.2 * DETECTORS.replica_lag_s
        assert start.at_s - kill.at_s >= 1.3 * DETECTORS.session_timeout_s
        assert kill.fault.targets == ["leader"]
        if cut.fault.f == "start-partition":
            assert kill.same_as == 0  # the node that was cut off, whoever leads by then


def test_composition_forms() -> None:
    doc = {
        "phases": [
            {
                "for_s": 30,
                "do": {"repeat": {"fault": "kill", "targets": ["controller"]}, "times": 2},
            },
            {
                "for_s": 90,
                "do": {
                    "stagger": {
                        "mix": [
                            {"weight": 1, "do": "zombie-leader"},
                            {
                                "weight": 2,
                                "do": {"sequence": ["rolling-bounce", {"fault": "bounce"}]},
                            },
                        ]
                    },
                    "gap": "2-3 s",
                },
            },
        ]
    }
    schedule = generate_schedule(spec(doc))
    first_phase = [s for s in schedule.faults if s.at_s < 30]
    assert [s.fault.f for s in first_phase][:2] == ["kill", "start"]
    assert all(
        s.fault.targets in (["controller"], None) for s in first_phase if s.fault.f == "kill"
    )
    assert parse_generator(doc).to_json()["phases"][0]["for_s"] == 30
    assert any(s.scenario in ("zombie-leader", "rolling-bounce") for s in schedule.faults)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("no-such-scenario", "unknown scenario 'no-such-scenario'"),
        ({"fault": "melt"}, "unknown kind of fault 'melt'"),
        ({"stagger": "zombie-leader", "gap": "1-2 fortnights"}, r"generator\.stagger\.gap"),
        ({"mix": [{"weight": 0, "do": "zombie-leader"}]}, "at least one weight"),
        ({"cycle": []}, "non-empty list"),
        ({"repeat": "zombie-leader", "times": 0}, "times must be an integer >= 1"),
        ({"sequence": ["zombie-leader"], "cycle": ["rolling-bounce"]}, "exactly one of"),
        ({"stagger": "zombie-leader", "gapp": 3}, r"unknown keys \['gapp'\]"),
    ],
)
def test_bad_generators_name_what_is_wrong(doc: object, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_generator(doc)


class LeaderMovingNemesis:
    """Resolves roles to nodes as a cluster would; once the leader is paused, another broker
    leads (as a controller would elect), so ``leader`` names a different node from then on."""

    def __init__(self) -> None:
        self.roles = {"leader": ["n2"], "followers": ["n1", "n3"]}
        self.applied: list[Fault] = []

    def apply(self, fault: Fault) -> Fault:
        targets = [node for t in fault.targets or [] for node in self.roles.get(t, [t])]
        applied = fault.with_value(targets=targets) if fault.targets is not None else fault
        if fault.f == "pause":
            self.roles["leader"] = ["n3"]
        self.applied.append(applied)
        return applied


def test_the_runner_hits_the_nodes_of_the_step_it_is_the_same_as() -> None:
    ticks = iter([0.0])
    schedule = generate_schedule(
        spec("follower-restart-leader-loss", detectors=Detectors(0.01, 0.01, 0.0), time_limit_s=10)
    )
    nemesis = LeaderMovingNemesis()
    applied = ScheduleRunner(nemesis, clock=lambda: next(ticks, 1e9)).run(schedule)
    kills = [f for f in nemesis.applied if f.f == "kill"]
    assert kills[0].targets == ["n1", "n3"]  # the followers
    assert kills[-1].targets == ["n2"]  # the paused leader, not whoever leads now
    starts = [f for f in nemesis.applied if f.f == "start"]
    assert [f.targets for f in starts] == [["n1", "n3"], ["n2"]]
    assert all(s.fault.value["scenario"] == "follower-restart-leader-loss" for s in applied.faults)
