"""The terminal report of a checked history: verdict, checkers, anomalies with samples, stats
and the rate the run achieved."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from checkers.catalogue import ANOMALIES, describe_case
from squall.report.causes import cause_summary
from squall.report.scenarios import describe_scenarios, unreached_runs
from squall.report.throughput import achieved_rate, describe_live_rate
from squall.report.verdict import (
    describe_faults,
    explain,
    history_events,
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


def _sample_text(sample: Mapping[str, Any]) -> str:
    text = json.dumps(sample, separators=(", ", ": "), default=str)
    return text if len(text) <= 160 else text[:157] + "..."


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
    if results.get("anomaly_types"):
        header.append(f"   anomalies: {', '.join(results['anomaly_types'])}", style="red")
    parts: list[Any] = [header]

    checkers = Table(
        "checker", "verdict", "anomalies (count)", title="checkers", title_justify="left"
    )
    for name, checker in sorted(results.get("checkers", {}).items()):
        counts = checker.get("counts", {})
        shown = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()) if v) or "-"
        checkers.add_row(name, _verdict(checker.get("valid")), shown)
    parts.append(checkers)
    replicas = replica_reads_summary(results)
    if replicas is not None:
        parts.append(Text(replicas, style="dim"))

    for name, checker in sorted(results.get("checkers", {}).items()):
        for anomaly, found in sorted(checker.get("anomalies", {}).items()):
            if not found:
                continue
            count = checker.get("counts", {}).get(anomaly, len(found))
            table = Table(show_header=False, box=None, padding=(0, 1))
            for sample in found[:samples]:
                table.add_row("•", describe_case(anomaly, sample)["text"])
            about = ANOMALIES.get(anomaly)
            body: list[Any] = []
            if about is not None:
                body.append(Text(about.meaning, style="italic"))
                body.append(Text(f"allowed by: {about.allowed_by}; see {about.doc}", style="dim"))
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
        expected = checker.get("expected_losses") or checker.get("expected")
        if expected:
            parts.append(
                Panel(
                    Text(
                        _sample_text(expected) if isinstance(expected, Mapping) else str(expected)
                    ),
                    title=f"expected losses ({name}): allowed by the configuration",
                    title_align="left",
                    border_style="blue",
                )
            )

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
    if run_dir is not None:
        parts.append(Text(f"run directory: {run_dir}", style="dim"))
    console.print(Panel(Group(*parts), title="squall results", title_align="left"))


def _test_of(run_dir: Path | None) -> Mapping[str, Any] | None:
    """The run's test.json, if there is a readable one."""
    if run_dir is None:
        return None
    try:
        test = json.loads((run_dir / "test.json").read_text())
    except (OSError, ValueError):
        return None
    return test if isinstance(test, Mapping) else None
