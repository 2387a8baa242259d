"""The live panel of a running test (squall.report.live.RunView) at 80 columns: every phase
shows its time, the strip fits, and an interrupted run says so instead of "40/40 s"."""

from __future__ import annotations

from rich.console import Console

from squall.report.live import PHASES, RunView, clock
from workloads import CounterSnapshot


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def render(view: RunView, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(view)
    return console.export_text().splitlines()


def snapshot() -> CounterSnapshot:
    big = 12_345_678
    return CounterSnapshot(
        elapsed_s=40.0,
        invoked=big,
        ok=big,
        fail=big,
        info=big,
        ops_per_s=123_456.0,
        mean_ops_per_s=123_456.0,
    )


def run_through(view: RunView, now: Clock, phases: dict[str, float]) -> None:
    """Enter each phase in turn and spend its seconds in it."""
    for name, seconds in phases.items():
        view.phase = name
        now.advance(seconds)


def test_every_phase_shows_its_time_and_the_panel_fits_80_columns() -> None:
    now = Clock()
    view = RunView(
        "a-rather-long-test-name-acks1-unclean",
        "store/a-rather-long-test-name-acks1-unclean/20250101T000000",
        time_limit_s=3600,
        now=now,
    )
    # the longest timers (six characters) in every phase: the widest the strip gets
    run_through(view, now, {name: 3599 for name in PHASES[:-2]})
    view.counters = snapshot
    view.faults = ["partition n1|n2,n3 (majorities-ring)", "kill n2", "netem n3 100 ms"]
    view.phase, view.phase_detail = "check", "Spark checkers"
    now.advance(3599)
    lines = render(view)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    for name in PHASES[:-1]:  # the report phase comes after the panel is gone
        assert f"{name} 59m59s" in text, text
    assert "check: Spark checkers" in text
    assert "12,345,678" in text


def test_the_check_phase_has_a_running_timer() -> None:
    now = Clock()
    view = RunView("t", "store/t/1", time_limit_s=40, now=now)
    run_through(view, now, {"provision": 5, "deploy": 1, "run": 40, "heal": 2, "final read": 3})
    run_through(view, now, {"collect": 1, "check": 75})
    assert "check 1m15s" in "\n".join(render(view))
    now.advance(10)
    assert "check 1m25s" in "\n".join(render(view))


def test_a_phase_passed_over_is_marked_and_untimed() -> None:
    now = Clock()
    view = RunView("t", "store/t/1", time_limit_s=40, now=now)
    run_through(view, now, {"provision": 5, "deploy": 1, "run": 10, "heal": 2, "final read": 3})
    text = "\n".join(render(view))
    assert "recover -" in text
    assert "final read 3s" in text
    assert "collect" in text and "collect -" not in text  # still to come


def test_the_workload_line_counts_up_to_the_time_limit() -> None:
    now = Clock()
    view = RunView("t", "store/t/1", time_limit_s=40, now=now)
    run_through(view, now, {"provision": 5, "deploy": 1, "run": 12})
    assert "workload 12 of 40 s" in "\n".join(render(view))
    now.advance(30)  # a little over the limit (stopping, joining the nemesis)
    view.phase = "heal"
    text = "\n".join(render(view))
    assert "workload ran 40 of 40 s" in text
    assert "interrupted" not in text


def test_an_interrupted_run_shows_how_long_it_ran_and_says_so() -> None:
    now = Clock()
    view = RunView("t", "store/t/1", time_limit_s=40, now=now)
    run_through(view, now, {"provision": 5, "deploy": 1, "run": 12})
    view.interrupted = True
    run_through(view, now, {"heal": 2, "final read": 60})
    lines = render(view)
    text = "\n".join(lines)
    assert "workload ran 12 of 40 s" in text
    assert "40 of 40" not in text and "40/40" not in text
    assert "interrupted" in text
    assert all(len(line) <= 80 for line in lines)


def test_interrupted_may_be_a_callable_the_runner_answers() -> None:
    stopped = {"yes": False}
    view = RunView("t", "store/t/1", time_limit_s=40, interrupted=lambda: stopped["yes"])
    assert not view.was_interrupted
    assert "interrupted" not in "\n".join(render(view))
    stopped["yes"] = True
    assert view.was_interrupted
    assert "interrupted" in "\n".join(render(view))


def test_names_and_faults_are_not_read_as_markup() -> None:
    view = RunView("[bold]odd[/]", "store/[x]/1")
    view.faults = ["partition [n1] | [n2]"]
    text = "\n".join(render(view))
    assert "[bold]odd[/]" in text
    assert "partition [n1] | [n2]" in text


def test_clock() -> None:
    assert [clock(s) for s in (0, 7.9, 59, 60, 245, 3599, 3600, 3720, -1)] == [
        "0s",
        "7s",
        "59s",
        "1m00s",
        "4m05s",
        "59m59s",
        "1h00m",
        "1h02m",
        "0s",
    ]
