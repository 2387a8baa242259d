"""The live view of a running test: its phases and how long each took, operation rates and
outcomes, faults in force. It fits an 80-column terminal."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from workloads import CounterSnapshot

PHASES = (
    "clean",
    "provision",
    "deploy",
    "run",
    "heal",
    "recover",
    "final read",
    "collect",
    "check",
    "report",
)
log = logging.getLogger(__name__)

STRIP_COLUMNS = 5
"""The phase strip's columns: two rows of five phases fit 80 columns with their timers."""


def clock(seconds: float) -> str:
    """A duration in at most six characters: ``7s``, ``4m05s``, ``1h02m``."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@dataclass
class RunView:
    """What the live display shows; the runner updates it, rich re-renders it.

    Setting ``phase`` records when each phase started, so every phase shows its time: the
    current one running, the ones done their duration. ``interrupted`` is True (or a
    callable answering it) once Ctrl-C or SIGTERM stopped the run.
    """

    name: str
    run_dir: str
    phase: str = "clean"
    phase_detail: str = ""
    started: float = -1.0
    """When the view was made (monotonic seconds; by default, now)."""
    time_limit_s: float = 0.0
    run_started: float | None = None
    counters: Callable[[], CounterSnapshot] | None = None
    faults: list[str] = field(default_factory=list)
    applied: int = 0
    scenarios: tuple[int, int] = (0, 0)
    """Runs of scenarios judged so far, and how many of them reached their state."""
    interrupted: bool | Callable[[], bool] = False
    now: Callable[[], float] = time.monotonic
    """The clock (monotonic seconds); tests give their own."""
    phase_started: dict[str, float] = field(default_factory=dict)
    phase_ended: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.now()
        self.phase_started.setdefault(self.phase, self.started)

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "phase" and "phase_started" in self.__dict__ and value != self.phase:
            at = self.now()
            self.phase_ended.setdefault(self.phase, at)
            self.phase_started.setdefault(value, at)
            log.info("phase %s", value)  # the run's story in run.log (`squall.run_log`)
        elif key == "phase_detail" and value and "phase" in self.__dict__:
            log.info("phase %s: %s", self.phase, value)
        super().__setattr__(key, value)

    @property
    def was_interrupted(self) -> bool:
        flag = self.interrupted
        return bool(flag() if callable(flag) else flag)

    def phase_seconds(self, name: str) -> float | None:
        """How long a phase took (or, for the current one, has taken so far); None for a
        phase not started."""
        began = self.phase_started.get(name)
        if began is None:
            return None
        ended = self.phase_ended.get(name)
        return (ended if ended is not None else self.now()) - began

    def workload_seconds(self) -> float | None:
        """Seconds of workload so far, or in all once the run phase is over."""
        began = self.run_started if self.run_started is not None else self.phase_started.get("run")
        if began is None:
            return None
        ended = self.phase_ended.get("run")
        return (ended if ended is not None else self.now()) - began

    # --- rendering --------------------------------------------------------------------------

    def _phase_cell(self, name: str, current: int) -> Text:
        index = PHASES.index(name)
        seconds = self.phase_seconds(name)
        cell = Text()
        if name == self.phase:
            cell.append(name, style="bold reverse")
        elif seconds is not None:
            cell.append(name, style="green")
        elif index < current:  # passed over: the run never needed it (or was interrupted)
            cell.append(name, style="dim strike")
        else:
            cell.append(name, style="dim")
        if seconds is not None:
            cell.append(f" {clock(seconds)}", style="bold" if name == self.phase else "")
        elif index < current:
            cell.append(" -", style="dim")
        return cell

    def _strip(self) -> Table:
        current = PHASES.index(self.phase) if self.phase in PHASES else len(PHASES)
        strip = Table.grid(padding=(0, 2))
        for _ in range(STRIP_COLUMNS):
            strip.add_column(no_wrap=True)
        for row in range(0, len(PHASES), STRIP_COLUMNS):
            strip.add_row(
                *(self._phase_cell(n, current) for n in PHASES[row : row + STRIP_COLUMNS])
            )
        return strip

    def _workload_line(self) -> Text | None:
        seconds = self.workload_seconds()
        if seconds is None:
            return None
        limit = self.time_limit_s
        running = "run" not in self.phase_ended
        shown = seconds if self.was_interrupted or not limit else min(seconds, limit)
        of = f" of {limit:.0f} s" if limit else " s"
        return Text(f"workload {shown:.0f}{of}" if running else f"workload ran {shown:.0f}{of}")

    def __rich__(self) -> RenderableType:
        rows: list[RenderableType] = [self._strip()]
        if self.phase_detail:
            rows.append(Text(f"{self.phase}: {self.phase_detail}", style="dim"))
        workload = self._workload_line()
        if workload is not None:
            rows.append(workload)
        if self.was_interrupted:
            rows.append(
                Text(
                    "interrupted: stopped early; history kept, verdict at best unknown",
                    style="bold yellow",
                )
            )
        if self.counters is not None:
            snap = self.counters()
            rows.append(
                Text.from_markup(
                    f"ops/s [bold]{snap.ops_per_s:,.0f}[/] (mean {snap.mean_ops_per_s:,.0f})"
                    f"   in flight {snap.in_flight:,}"
                )
            )
            rows.append(
                Text.from_markup(
                    f"ok [green]{snap.ok:,}[/]   fail [yellow]{snap.fail:,}[/]"
                    f"   info [red]{snap.info:,}[/]"
                )
            )
        faults = escape(", ".join(self.faults)) if self.faults else "none"
        rows.append(
            Text.from_markup(f"faults in force: [magenta]{faults}[/]  (applied {self.applied})")
        )
        judged, reached = self.scenarios
        if judged:
            rows.append(Text(f"scenario attempts that reached their state: {reached} of {judged}"))
        elapsed = clock(self.now() - self.started)
        return Panel(
            Group(*rows),
            title=f"squall run [bold]{escape(self.name)}[/] {elapsed}",
            subtitle=escape(self.run_dir),
        )
