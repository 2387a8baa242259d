"""squall hunt's logic without a cluster: the hunt loop over an injected run, the shrink
candidates of a fault schedule and the greedy shrink over an injected predicate."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nemesis import Fault, Schedule, ScheduledFault
from squall.cli import app, main
from squall.config.schedule_file import schedule_from_json
from squall.exit_codes import ExitCode
from squall.hunt import (
    HuntResult,
    RunReport,
    fresh_seeds,
    hunt,
    new_hunt_dir,
    scenario_instances,
    shrink,
    shrink_candidates,
    with_dependents,
)
from squall.store import StoreError


def _entry(
    ident: int,
    at_s: float,
    f: str,
    value: dict[str, Any] | None = None,
    *,
    heals: int | None = None,
    same_as: int | None = None,
    scenario: str | None = None,
) -> ScheduledFault:
    return ScheduledFault(at_s, Fault(f, value or {}), ident, heals, same_as, scenario)


def schedule_like_the_default_mix() -> Schedule:
    """Scenario instances as the default generator lays them out, as a run applied them."""
    n1, leader = {"targets": ["n1"]}, {"targets": ["n2"]}
    faults = (
        _entry(0, 2.0, "bounce", n1, scenario="rolling-bounce"),
        _entry(1, 5.0, "bounce", leader, scenario="rolling-bounce"),
        _entry(2, 10.0, "kill", leader, scenario="failover-during-truncation"),
        _entry(3, 18.0, "start", leader, heals=2, scenario="failover-during-truncation"),
        _entry(4, 19.0, "kill", n1, scenario="failover-during-truncation"),
        _entry(5, 27.0, "start", n1, heals=4, scenario="failover-during-truncation"),
        _entry(
            6,
            30.0,
            "start-partition",
            {"shape": "isolate", "among": "brokers", "targets": ["n1"]},
            scenario="isr-shrink-leader-loss",
        ),
        _entry(7, 42.0, "kill", n1, same_as=6, scenario="isr-shrink-leader-loss"),
        _entry(8, 42.5, "stop-partition", heals=6, scenario="isr-shrink-leader-loss"),
        _entry(9, 50.0, "start", n1, heals=7, scenario="isr-shrink-leader-loss"),
        _entry(10, 52.0, "pause", {"targets": ["n3"]}),
        _entry(11, 55.0, "resume", {"targets": ["n3"]}, heals=10),
        _entry(12, 60.0, "pause", leader, scenario="zombie-leader"),
        _entry(13, 68.0, "resume", leader, heals=12, scenario="zombie-leader"),
        _entry(14, 70.0, "pause", n1, scenario="zombie-leader"),
        _entry(15, 78.0, "resume", n1, heals=14, scenario="zombie-leader"),
    )
    return Schedule(faults, seed=7, resolved=True)


def _ids(schedule: Schedule) -> set[int]:
    return {e.id for e in schedule.faults}


# --- shrink candidates --------------------------------------------------------------------


def test_consecutive_faults_of_one_scenario_form_an_instance() -> None:
    assert scenario_instances(schedule_like_the_default_mix()) == [
        ("rolling-bounce", (0, 1)),
        ("failover-during-truncation", (2, 3, 4, 5)),
        ("isr-shrink-leader-loss", (6, 7, 8, 9)),
        ("zombie-leader", (12, 13, 14, 15)),
    ]


def test_a_fault_goes_with_what_heals_it_and_what_hits_its_nodes_transitively() -> None:
    schedule = schedule_like_the_default_mix()
    # the partition takes the kill that hits its nodes, their heals, and the kill's start
    assert with_dependents(schedule, [6]) == {6, 7, 8, 9}
    assert with_dependents(schedule, [7]) == {7, 9}
    assert with_dependents(schedule, [0]) == {0}


def test_candidates_remove_scenario_instances_whole_then_single_faults() -> None:
    candidates = shrink_candidates(schedule_like_the_default_mix())
    removed = [c.removed for c in candidates]
    assert removed[:4] == [(0, 1), (2, 3, 4, 5), (6, 7, 8, 9), (12, 13, 14, 15)]
    singles = removed[4:]
    # each fault that heals nothing, with its dependents; the partition's removal equals its
    # scenario instance's and is not tried twice
    assert singles == [(0,), (1,), (2, 3), (4, 5), (7, 9), (10, 11), (12, 13), (14, 15)]
    assert len(set(removed)) == len(removed)
    assert all(c.what for c in candidates)
    # a healing fault is never removed without the fault it heals
    heals = {e.id: e.heals for e in schedule_like_the_default_mix().faults if e.heals is not None}
    for ids in removed:
        for healer, healed in heals.items():
            assert healed not in ids or healer in ids


def test_every_candidate_is_a_valid_schedule_with_its_ids_and_links_kept() -> None:
    original = schedule_like_the_default_mix()
    for candidate in shrink_candidates(original):
        smaller = candidate.schedule
        assert _ids(smaller) == _ids(original) - set(candidate.removed)
        kept = _ids(smaller)
        for entry in smaller.faults:
            assert entry.heals is None or entry.heals in kept
            assert entry.same_as is None or entry.same_as in kept
        # what shrunk-schedule.json holds reads back through replay's loader, unchanged
        doc = smaller.to_json()
        assert schedule_from_json(doc, source="shrunk-schedule.json") == smaller
        assert smaller.resolved and smaller.seed == original.seed


# --- the greedy shrink --------------------------------------------------------------------


def _fails_with(needed: set[int], calls: list[set[int]]) -> Callable[[Schedule], bool]:
    def run_candidate(schedule: Schedule) -> bool:
        calls.append(_ids(schedule))
        return needed <= _ids(schedule)

    return run_candidate


def test_the_shrink_converges_on_the_minimal_failing_schedule() -> None:
    original = schedule_like_the_default_mix()
    calls: list[set[int]] = []
    # the failure needs the kill of failover-during-truncation's second step and the pause
    result = shrink(original, _fails_with({4, 10}, calls))
    assert result.complete
    # what is left: the two faults and their heals, nothing else
    assert _ids(result.schedule) == {4, 5, 10, 11}
    assert len(calls) == len(result.tries)
    assert result.tries[-1].failed is False
    # 1-minimal: no candidate of the result fails any more
    assert not any({4, 10} <= _ids(c.schedule) for c in shrink_candidates(result.schedule))
    assert result.to_json()["removed"] == sorted(_ids(original) - {4, 5, 10, 11})


def test_a_failure_that_needs_no_fault_shrinks_to_the_empty_schedule() -> None:
    result = shrink(schedule_like_the_default_mix(), lambda _schedule: True)
    assert len(result.schedule) == 0
    assert result.complete


def test_a_schedule_that_no_longer_fails_without_any_fault_stays_whole() -> None:
    original = schedule_like_the_default_mix()
    result = shrink(original, lambda _schedule: False)
    assert result.schedule == original
    assert len(result.tries) == len(shrink_candidates(original))


def test_the_shrink_stops_when_told_and_keeps_the_smallest_so_far() -> None:
    calls: list[set[int]] = []
    result = shrink(
        schedule_like_the_default_mix(),
        _fails_with({4}, calls),
        should_stop=lambda: len(calls) >= 2,
    )
    assert not result.complete
    assert len(calls) == 2
    assert {4, 5} <= _ids(result.schedule)
    assert len(result.schedule) < 16


# --- the hunt loop ------------------------------------------------------------------------


class FakeClock:
    """Time that passes only when a run says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _runs(
    clock: FakeClock, verdicts: list[dict[str, Any] | Exception], seconds: float = 100.0
) -> tuple[Callable[[int], RunReport], list[int]]:
    seeds: list[int] = []
    pending: Iterator[dict[str, Any] | Exception] = iter(verdicts)

    def run_once(seed: int) -> RunReport:
        seeds.append(seed)
        clock.now += seconds
        verdict = next(pending)
        if isinstance(verdict, Exception):
            raise verdict
        return RunReport.of(seed, f"store/q/{len(seeds)}", verdict, exit_code=0, seconds=seconds)

    return run_once, seeds


VALID: dict[str, Any] = {"valid": True, "anomaly_types": [], "expected_anomaly_types": []}
INVALID: dict[str, Any] = {"valid": False, "anomaly_types": ["lost-write"]}
LOSSES: dict[str, Any] = {"valid": True, "expected_anomaly_types": ["unclean-loss-window"]}


def test_the_hunt_stops_at_the_first_detection() -> None:
    clock = FakeClock()
    run_once, seeds = _runs(clock, [VALID, VALID, INVALID, VALID])
    seen: list[tuple[int, str]] = []
    result = hunt(
        run_once,
        seeds=iter([11, 12, 13, 14]),
        budget_s=1800,
        clock=clock,
        on_run=lambda n, r: seen.append((n, r.verdict)),
    )
    assert result.stopped == "detected"
    assert seeds == [11, 12, 13]
    assert seen == [(1, "valid"), (2, "valid"), (3, "invalid")]
    assert result.detection is not None and result.detection.seed == 13
    assert result.time_to_detection_s == 300.0
    assert result.exit_code == ExitCode.ANOMALIES
    doc = result.to_json()
    assert doc["runs_to_detection"] == 3 and doc["seeds"] == [11, 12, 13]
    assert doc["detection"]["run_dir"] == "store/q/3"


def test_losses_the_configuration_allows_are_a_detection() -> None:
    clock = FakeClock()
    run_once, _ = _runs(clock, [LOSSES])
    result = hunt(run_once, seeds=fresh_seeds(5), budget_s=60, clock=clock)
    assert result.detection is not None
    assert result.detection.verdict == "allowed-losses"
    assert result.exit_code == ExitCode.ANOMALIES


def test_the_budget_ends_a_hunt_that_found_nothing() -> None:
    clock = FakeClock()
    run_once, seeds = _runs(clock, [VALID] * 10)
    result = hunt(run_once, seeds=fresh_seeds(), budget_s=250, clock=clock)
    # runs start at 0, 100 and 200 s; at 300 s the budget is spent
    assert len(seeds) == 3
    assert result.stopped == "budget"
    assert result.detection is None and result.time_to_detection_s is None
    assert result.exit_code == ExitCode.SUCCESS


def test_max_runs_ends_a_hunt() -> None:
    clock = FakeClock()
    run_once, seeds = _runs(clock, [VALID] * 10)
    result = hunt(run_once, seeds=fresh_seeds(), budget_s=10_000, max_runs=2, clock=clock)
    assert len(seeds) == 2 and result.stopped == "max-runs"
    assert result.exit_code == ExitCode.SUCCESS


def test_runs_without_a_verdict_are_recorded_and_too_many_in_a_row_end_the_hunt() -> None:
    clock = FakeClock()
    no_verdict: dict[str, Any] = {"valid": "unknown"}
    run_once, _ = _runs(
        clock,
        [RuntimeError("cluster did not come up"), VALID, no_verdict, OSError("gone"), no_verdict],
    )
    result = hunt(run_once, seeds=fresh_seeds(1), budget_s=10_000, clock=clock, max_failures=3)
    assert [r.verdict for r in result.runs] == ["failed", "valid", "unknown", "failed", "unknown"]
    assert result.runs[0].error == "RuntimeError: cluster did not come up"
    assert result.stopped == "failures"
    assert result.exit_code == ExitCode.INFRASTRUCTURE


def test_an_interrupted_run_ends_the_hunt() -> None:
    def run_once(seed: int) -> RunReport:
        return RunReport.of(seed, "d", VALID, exit_code=0, seconds=1, interrupted=True)

    result = hunt(run_once, seeds=fresh_seeds(), budget_s=100)
    assert result.stopped == "interrupted" and len(result.runs) == 1
    assert result.exit_code == ExitCode.INTERRUPTED


def test_seeds_start_from_the_given_one_and_never_repeat() -> None:
    seeds = fresh_seeds(42)
    first = [next(seeds) for _ in range(50)]
    assert first[0] == 42
    assert len(set(first)) == 50
    again = fresh_seeds(42)
    assert [next(again) for _ in range(50)] == first


def test_a_run_reproduces_a_failure_with_the_same_types_or_more() -> None:
    target = RunReport.of(1, "d", INVALID, exit_code=1, seconds=1)
    more = RunReport.of(
        1, "e", {"valid": False, "anomaly_types": ["lost-write", "unseen"]}, exit_code=1, seconds=1
    )
    other = RunReport.of(
        1, "f", {"valid": False, "anomaly_types": ["duplicate"]}, exit_code=1, seconds=1
    )
    assert more.reproduces(target)
    assert not other.reproduces(target)
    assert not RunReport.of(1, "g", VALID, exit_code=0, seconds=1).reproduces(target)
    assert HuntResult([], "budget", 0.0).exit_code == ExitCode.INFRASTRUCTURE


# --- the hunt directory and the command ---------------------------------------------------


def test_hunt_directories_are_stamped_and_linked(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = new_hunt_dir(tmp_path, "queue", now=now)
    second = new_hunt_dir(tmp_path, "queue", now=now)
    assert first == tmp_path / "queue-hunt" / "20260102T030405"
    assert second.name == "20260102T030405-2"
    assert (tmp_path / "queue-hunt" / "latest").resolve() == second.resolve()
    with pytest.raises(StoreError, match="cannot name a hunt directory"):
        new_hunt_dir(tmp_path, "no spaces")


def test_squall_hunt_help_renders() -> None:
    result = CliRunner().invoke(app, ["hunt", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    for option in ("--budget", "--max-runs", "--shrink", "--shrink-replays", "--acks"):
        assert option in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["--budget", "0"],
        ["--replication-factor", "5", "--nodes", "3"],
        ["--name", "no spaces"],
        ["--set", "no.such.key=1"],
    ],
)
def test_bad_hunt_input_is_a_usage_error_before_anything_runs(
    args: list[str], tmp_path: Path
) -> None:
    assert main(["hunt", "--store", str(tmp_path), *args]) == ExitCode.USAGE
    assert not any(tmp_path.iterdir())
