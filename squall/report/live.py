"""The live view of a running test: phase, operation rates and outcomes, faults in force."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
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


@dataclass
class RunView:
    """What the live display shows; the runner updates it, rich re-renders it."""

    name: str
    run_dir: str
    phase: str = "clean"
    phase_detail: str = ""
    started: float = field(default_factory=time.monotonic)
    time_limit_s: float = 0.0
    run_started: float | None = None
    counters: Callable[[], CounterSnapshot] | None = None
    faults: list[str] = field(default_factory=list)
    applied: int = 0

    def __rich__(self) -> RenderableType:
        phases = Text()
        for name in PHASES:
            style = (
                "bold reverse"
                if name == self.phase
                else ("dim" if PHASES.index(name) > PHASES.index(self.phase) else "green")
            )
            phases.append(f" {name} ", style=style)
        rows: list[RenderableType] = [phases]
        if self.phase_detail:
            rows.append(Text(self.phase_detail, style="dim"))
        if self.counters is not None:
            snap = self.counters()
            table = Table.grid(padding=(0, 2))
            table.add_row(
                f"ops/s [bold]{snap.ops_per_s:,.0f}[/] (mean {snap.mean_ops_per_s:,.0f})",
                f"ok [green]{snap.ok:,}[/]",
                f"fail [yellow]{snap.fail:,}[/]",
                f"info [red]{snap.info:,}[/]",
                f"in flight {snap.in_flight:,}",
            )
            rows.append(table)
        if self.run_started is not None and self.time_limit_s:
            elapsed = time.monotonic() - self.run_started
            rows.append(
                Text(f"run {min(elapsed, self.time_limit_s):.0f}/{self.time_limit_s:.0f} s")
            )
        faults = ", ".join(self.faults) if self.faults else "none"
        rows.append(
            Text.from_markup(f"faults in force: [magenta]{faults}[/]  (applied {self.applied})")
        )
        return Panel(Group(*rows), title=f"squall run [bold]{self.name}[/]", subtitle=self.run_dir)
