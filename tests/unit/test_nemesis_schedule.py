"""Seeded fault schedules: determinism, the shape of a schedule, and the JSON round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis.errors import FaultError
from nemesis.fault import Fault
from nemesis.grudge import SHAPES
from nemesis.netem import NetemSpec
from nemesis.schedule import (
    KINDS,
    Schedule,
    ScheduledFault,
    ScheduleSpec,
    _with_healed_targets,
    generate_schedule,
)
from squall.config.errors import ConfigurationError
from squall.store import RunDirectory, load_schedule

SPEC = ScheduleSpec(
    faults={"kill": 1, "partition": 1, "pause": 1, "bounce": 0.5, "netem": 0.5},
    interval_s=(2, 6),
    duration_s=(3, 12),
    targets={"kill": ["leader:t-0", "minority"], "partition": ["controller", "n1"]},
    time_limit_s=300,
    seed=42,
)

positive = st.floats(min_value=0.5, max_value=30, allow_nan=False)


@st.composite
def specs(draw: st.DrawFn) -> ScheduleSpec:
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, unique=True))
    low, high = sorted(draw(st.lists(positive, min_size=2, max_size=2)))
    dlow, dhigh = sorted(draw(st.lists(positive, min_size=2, max_size=2)))
    return ScheduleSpec(
        faults={k: draw(st.floats(min_value=0.1, max_value=10)) for k in kinds},
        interval_s=(low, high),
        duration_s=(dlow, dhigh),
        targets={
            k: draw(
                st.lists(
                    st.sampled_from(["n1", "random", "leader:t-0", "zk"]), min_size=1, max_size=3
                )
            )
            for k in kinds
            if k != "netem"
        },
        shapes=draw(st.lists(st.sampled_from(SHAPES), min_size=1, unique=True)),
        partition_among=draw(st.sampled_from(["all", "brokers"])),
        netem=NetemSpec(
            delay_ms=draw(st.floats(min_value=1, max_value=500)),
            loss_pct=draw(st.floats(min_value=0, max_value=50)),
        ),
        time_limit_s=draw(st.floats(min_value=1, max_value=400)),
        seed=draw(st.integers(min_value=0, max_value=2**63)),
        allow_overlap=frozenset(
            draw(st.lists(st.sampled_from(["kill", "pause", "netem"]), unique=True))
        ),
    )


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    assert generate_schedule(SPEC) == generate_schedule(SPEC)
    assert generate_schedule(SPEC).to_json() == generate_schedule(SPEC).to_json()
    other = ScheduleSpec(**{**SPEC.__dict__, "seed": 43})
    assert generate_schedule(other).faults != generate_schedule(SPEC).faults


@given(specs())
def test_schedule_json_round_trip(spec: ScheduleSpec) -> None:
    schedule = generate_schedule(spec)
    assert ScheduleSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert Schedule.from_json(json.loads(schedule.dumps())) == schedule


@given(specs())
def test_every_fault_is_healed_after_it_and_kinds_do_not_overlap(spec: ScheduleSpec) -> None:
    schedule = generate_schedule(spec)
    by_id = {s.id: s for s in schedule.faults}
    heals = {s.heals: s for s in schedule.faults if s.heals is not None}
    open_until: dict[str, list[tuple[float, float]]] = {}
    for entry in schedule.faults:
        assert 0 <= entry.at_s <= spec.time_limit_s
        if entry.heals is not None:
            started = by_id[entry.heals]
            assert KINDS_BY_START[started.fault.f][1] == entry.fault.f
            assert entry.at_s >= started.at_s
            continue
        assert entry.at_s < spec.time_limit_s
        kind = KINDS_BY_START[entry.fault.f][0]
        healer = KINDS[kind][1]
        if healer is None:
            assert entry.id not in heals
            continue
        end = heals[entry.id].at_s
        if kind not in spec.allow_overlap:
            for start, stop in open_until.get(kind, []):
                assert entry.at_s >= stop or end <= start, (kind, entry)
        open_until.setdefault(kind, []).append((entry.at_s, end))
    assert [s.at_s for s in schedule.faults] == sorted(s.at_s for s in schedule.faults)


KINDS_BY_START = {start: (kind, heal) for kind, (start, heal) in KINDS.items()}


def test_drawn_faults_use_the_spec() -> None:
    schedule = generate_schedule(SPEC)
    starts = [s.fault for s in schedule.faults if s.heals is None]
    assert {f.f for f in starts} == {"kill", "start-partition", "pause", "bounce", "start-netem"}
    for fault in starts:
        if fault.f == "kill":
            assert fault.targets is not None and fault.targets[0] in ("leader:t-0", "minority")
        if fault.f == "start-partition":
            assert fault.value["shape"] in SPEC.shapes
            if fault.value["shape"] == "isolate":
                assert fault.targets is not None and fault.targets[0] in ("controller", "n1")
        if fault.f == "start-netem":
            assert NetemSpec.from_value(fault.value) == SPEC.netem
    healing = [s.fault for s in schedule.faults if s.heals is not None]
    assert all(f.value == {} for f in healing)


def test_save_and_load(tmp_path: Path) -> None:
    schedule = generate_schedule(SPEC)
    run = RunDirectory(tmp_path)
    run.write_schedule(schedule)
    path = tmp_path / "schedule.json"
    assert load_schedule(tmp_path) == schedule
    assert load_schedule(path) == schedule
    assert not list(tmp_path.glob("*.tmp*"))
    path.write_text('{"version": 9, "faults": []}')
    with pytest.raises(ConfigurationError, match="version = 9: must be 1"):
        load_schedule(path)
    path.write_text("{")
    with pytest.raises(FaultError, match="cannot read schedule"):
        load_schedule(path)


def test_a_healing_fault_gets_the_resolved_targets_of_its_fault() -> None:
    heal = ScheduledFault(10, Fault("start"), 1, heals=0)
    killed = Fault("kill", {"targets": ["n2"], "requested": {"targets": ["leader:t-0"]}})
    assert _with_healed_targets(heal, {0: killed}) == Fault("start", {"targets": ["n2"]})
    unresolved = Fault("kill", {"targets": ["leader:t-0"], "error": "TargetError: no leader"})
    assert _with_healed_targets(heal, {0: unresolved}) == Fault("start", {"targets": []})
    explicit = ScheduledFault(10, Fault("start", {"targets": ["n3"]}), 1, heals=0)
    assert _with_healed_targets(explicit, {0: killed}) == explicit.fault
    assert _with_healed_targets(heal, {}) == heal.fault


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"faults": {}}, "at least one kind"),
        ({"faults": {"meteor": 1}}, "unknown kind"),
        ({"faults": {"kill": -1}}, ">= 0"),
        ({"interval_s": (5, 1)}, "min <= max"),
        ({"interval_s": (0, 0)}, "positive interval"),
        ({"targets": {"kill": ["boss:n1"]}}, "expected node:NAME"),
        ({"shapes": ["circle"]}, "unknown partition shape"),
        ({"allow_overlap": frozenset({"partition"})}, "cannot overlap"),
        ({"time_limit_s": 0}, "positive"),
    ],
)
def test_invalid_specs(changes: dict[str, object], message: str) -> None:
    with pytest.raises(FaultError, match=message):
        ScheduleSpec(**{**SPEC.__dict__, **changes})


def test_schedule_validation() -> None:
    with pytest.raises(FaultError, match="share an id"):
        Schedule(
            (
                ScheduledFault(1, Fault("stop-partition"), 0),
                ScheduledFault(2, Fault("stop-partition"), 0),
            )
        )
    with pytest.raises(FaultError, match="heals unknown fault"):
        Schedule((ScheduledFault(1, Fault("start"), 0, heals=5),))
    with pytest.raises(FaultError, match="at_s"):
        ScheduledFault.from_json({"id": 0, "at_s": -1, "f": "start", "value": {}})
