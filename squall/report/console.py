"""The terminal report of a checked history: verdict, checkers, anomalies with samples, stats
and the rate the run achieved."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from checkers.catalogue import ANOMALIES, describe_case
from squall.report.causes import cause_summary, cause_text
from squall.report.scenarios import describe_scenarios, unreached_runs
from squall.report.throughput import achieved_rate, describe_live_rate
from squall.report.verdict import (
    describe_faults,
    describe_lost,
    explain,
    group_summary,
    history_events,
    lost_counts,
    replica_reads_summary,
)

VERDICT_STYLE = {
    True: ("VALID", "bold green"),
    False: ("INVALID", "bold red"),
    "unknown": ("UNKNOWN", "bold yellow"),
}


def _verdict(valid: Any) -> Text:
    label, style = VERDICT_STYLE.get(valid, ("UNKNOWN", "bold yellow"))
    return Text(label, style=style)


WRITE_CASES = frozenset({"lost-write", "unseen", "lost-acked-write"})
"""Types whose case `time` is the write's acknowledgement."""


def _seconds(cases: Sequence[Any]) -> str:
    """The span of the cases' `time` (nanoseconds since the history's start) in seconds,
    "-" when none has one."""
    times = [
        case["time"] / 1e9
        for case in cases
        if isinstance(case, Mapping) and isinstance(case.get("time"), int | float)
    ]
    if not times:
        return "-"
    low, high = f"{min(times):.1f}", f"{max(times):.1f}"
    return f"{low} s" if low == high else f"{low}-{high} s"


def _because(cases: Sequence[Any]) -> str:
    """The reasons the cases are allowed (`expected_because`), each once."""
    reasons = dict.fromkeys(
        str(case["expected_because"])
        for case in cases
        if isinstance(case, Mapping) and case.get("expected_because")
    )
    return "; ".join(reasons) or "-"


def allowed_losses(name: str, checker: Mapping[str, Any], samples: int) -> Group | None:
    """A checker's losses the configuration allows as a short table: each type with its
    count, when its first cases were acknowledged (seconds since the start) and why; then
    its first cases in a sentence each. None: it found none."""
    counts = {k: v for k, v in (checker.get("expected_counts") or {}).items() if v}
    if not counts:
        return None
    cases_of: Mapping[str, Any] = checker.get("expected") or {}
    table = Table(
        "type",
        "cases",
        "first at",
        "allowed because",
        title=f"losses the configuration allows ({name})",
        title_justify="left",
        box=None,
        padding=(0, 1),
    )
    first: list[str] = []
    for anomaly, count in sorted(counts.items()):
        cases = cases_of.get(anomaly) or []
        listed = cases if isinstance(cases, list) else [cases]
        table.add_row(anomaly, f"{count:,}", _seconds(listed), _because(listed))
        for case in listed[:1]:
            cause = cause_text(case)
            bare = (  # the table above says why it is allowed
                {k: v for k, v in case.items() if k != "expected_because"}
                if isinstance(case, Mapping)
                else case
            )
            said = f"{anomaly}: {describe_case(anomaly, bare)['text']}"
            first.append(said if cause is None else f"{said}; cause: {cause}")
    cases = Table.grid(padding=(0, 1))
    cases.add_column(width=2, justify="right")
    cases.add_column()
    for line in first[:samples]:
        cases.add_row("•", Text(line, style="dim"))
    return Group(table, cases)


def print_results(
    results: Mapping[str, Any],
    *,
    console: Console | None = None,
    run_dir: Path | None = None,
    samples: int = 3,
) -> None:
    """Render results.json for a person."""
    console = console or Console()
    header = Text.assemble("verdict: ", _verdict(results.get("valid")))
    lost = describe_lost(results)
    if lost is not None:
        counted = lost_counts(results) or (0, 0)
        header.append(f"   {lost}", style="yellow" if counted[0] == counted[1] else "red")
        if counted[0] == counted[1]:
            header.append(", every one allowed", style="yellow")
    parts: list[Any] = [header]
    if results.get("anomaly_types"):
        parts.append(Text(f"anomalies: {', '.join(results['anomaly_types'])}", style="red"))

    checkers = Table(
        "checker", "verdict", "anomalies", "allowed", title="checkers", title_justify="left"
    )
    for name, checker in sorted(results.get("checkers", {}).items()):
        counts = checker.get("counts", {})
        shown = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()) if v) or "-"
        expected = checker.get("expected_counts") or {}
        allowed = ", ".join(f"{k} {v:,}" for k, v in sorted(expected.items()) if v) or "-"
        checkers.add_row(name, _verdict(checker.get("valid")), shown, allowed)
    parts.append(checkers)
    for summary in (replica_reads_summary(results), group_summary(results)):
        if summary is not None:
            parts.append(Text(summary, style="dim"))

    for name, checker in sorted(results.get("checkers", {}).items()):
        for anomaly, found in sorted(checker.get("anomalies", {}).items()):
            if not found:
                continue
            count = checker.get("counts", {}).get(anomaly, len(found))
            table = Table(show_header=False, box=None, padding=(0, 1))
            for sample in found[:samples]:  # their causes: one line per type, below
                table.add_row("•", describe_case(anomaly, sample)["text"])
            about = ANOMALIES.get(anomaly)
            body: list[Any] = []
            if about is not None:
                body.append(Text(about.meaning, style="italic"))
                body.append(Text(f"allowed by: {about.allowed_by}; see {about.doc}", style="dim"))
            at = _seconds(found)
            if at != "-":
                done = "acknowledged at" if anomaly in WRITE_CASES else "at"
                body.append(Text(f"its first cases: {done} {at} since the start"))
            cause = cause_summary(found)
            if cause is not None:
                body.append(Text(f"cause: {cause}", style="bold"))
            parts.append(
                Panel(
                    Group(*body, table),
                    title=f"{anomaly} ({count:,}) from {name}",
                    title_align="left",
                    border_style="red" if checker.get("valid") is False else "yellow",
                )
            )
        losses = allowed_losses(name, checker, samples)
        if losses is not None:
            parts.append(losses)

    stats = results.get("stats", {})
    if stats:
        grid = Table.grid(padding=(0, 3))
        grid.add_row(*(f"{k} [bold]{v:,}[/]" for k, v in stats.items() if isinstance(v, int)))
        parts.append(grid)
    rate = achieved_rate(results, _test_of(run_dir))
    if rate is not None:
        parts.append(
            Text.from_markup(
                f"achieved [bold]{rate.ops_per_s:,.0f}[/] ops/s ({rate.completed:,} completed "
                f"in {rate.seconds:,.0f} s, {rate.basis}): {rate.describe_by_f()}"
            )
        )
    live = describe_live_rate(stats) if isinstance(stats, Mapping) else None
    if live is not None:
        parts.append(Text(live))
    test = _test_of(run_dir)
    events = history_events(run_dir / "history.jsonl") if run_dir is not None else None
    elections, applied = events if events is not None else (None, [])
    parts.append(Text(describe_faults(test, applied)))
    reached = describe_scenarios(results)
    if reached:
        parts.append(Text("\n".join(reached)))
        parts += [
            Text(f"  not reached: {line}", style="yellow") for line in unreached_runs(results)[:5]
        ]
    parts.append(Text(explain(results, elections=elections), style="bold"))
    console.print(Panel(Group(*parts), title="squall results", title_align="left"))
    if run_dir is not None:
        console.print(report_pointer(run_dir), highlight=False, soft_wrap=True)


def report_pointer(run_dir: Path) -> str:
    """The last lines of a run's output: where its report is, and how to browse it."""
    report = run_dir / "report.html"
    store = run_dir.parent.parent
    lines = [f"run directory: {run_dir}"]
    results = run_dir / "results.json"
    if report.is_file():
        if results.is_file() and results.stat().st_mtime > report.stat().st_mtime:
            lines.append(f"report (older than results.json; `squall report {run_dir}`): {report}")
        else:
            lines.append(f"report: {report}")
    if (run_dir / "run.log").is_file():
        lines.append(f"squall's own log: {run_dir / 'run.log'}")
    lines.append(f"browse every run: squall serve --store {store}")
    return "\n".join(lines)


def _test_of(run_dir: Path | None) -> Mapping[str, Any] | None:
    """The run's test.json, if there is a readable one."""
    if run_dir is None:
        return None
    try:
        test = json.loads((run_dir / "test.json").read_text())
    except (OSError, ValueError):
        return None
    return test if isinstance(test, Mapping) else None
