"""report.html: the verdict, the checkers, anomaly samples, the faults applied, the plots, and
the statistics with the rate the run achieved."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from squall.report.throughput import AchievedRate, achieved_rate
from squall.report.verdict import describe_faults, explain

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
h1{margin-bottom:0}.valid{color:#2e7d32}.invalid{color:#c62828}.unknown{color:#f9a825}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;
font-size:14px;vertical-align:top}th{background:#f5f5f5}code{font-size:12px}img{max-width:100%}
"""


def _verdict(valid: Any) -> str:
    label = {True: "valid", False: "invalid"}.get(valid, "unknown")
    return f'<span class="{label}">{label.upper()}</span>'


def _json(value: Any) -> str:
    return f"<code>{html.escape(json.dumps(value, default=str))}</code>"


def render_html(
    results: Mapping[str, Any],
    *,
    test: Mapping[str, Any] | None = None,
    faults: Sequence[Mapping[str, Any]] = (),
    images: Sequence[str] = (),
    samples: int = 10,
    elections: int | None = None,
) -> str:
    """The whole report as one HTML document (images referenced by relative path)."""
    name = html.escape(str((test or {}).get("name", "squall run")))
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{name}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{name}: {_verdict(results.get('valid'))}</h1>",
    ]
    if results.get("anomaly_types"):
        out.append(f"<p>anomalies: {html.escape(', '.join(results['anomaly_types']))}</p>")
    out.append(f"<p><strong>{html.escape(explain(results, elections=elections))}</strong></p>")
    out.append(f"<p>{html.escape(describe_faults(test, faults))}</p>")
    if test:
        topic = test.get("topic", {})
        out.append(
            f"<p>seed {test.get('seed')} · runtime {html.escape(str(test.get('runtime')))} · "
            f"{test.get('nodes')} brokers · topic {_json(topic)}</p>"
        )
    out.append(
        "<h2>Checkers</h2><table><tr><th>checker</th><th>verdict</th><th>anomalies</th>"
        "<th>expected losses</th></tr>"
    )
    for checker, found in sorted(results.get("checkers", {}).items()):
        counts = {k: v for k, v in found.get("counts", {}).items() if v}
        expected = {k: v for k, v in found.get("expected_counts", {}).items() if v}
        out.append(
            f"<tr><td>{html.escape(checker)}</td><td>{_verdict(found.get('valid'))}</td>"
            f"<td>{_json(counts) if counts else '-'}</td>"
            f"<td>{_json(expected) if expected else '-'}</td></tr>"
        )
    out.append("</table>")
    for note in results.get("notes", []):
        out.append(f"<p><em>{html.escape(str(note))}</em></p>")
    for group, counts_of, title in (
        ("anomalies", "counts", ""),
        ("expected", "expected_counts", " (expected loss: the configuration allows it)"),
    ):
        for checker, found in sorted(results.get("checkers", {}).items()):
            for anomaly, listed in sorted(found.get(group, {}).items()):
                if not listed:
                    continue
                count = found.get(counts_of, {}).get(anomaly, len(listed))
                out.append(
                    f"<h3>{html.escape(anomaly)} ({count}) from {html.escape(checker)}"
                    f"{html.escape(title)}</h3><ul>"
                )
                out += [f"<li>{_json(sample)}</li>" for sample in listed[:samples]]
                out.append("</ul>")
    for image in images:
        out.append(f"<h2>{html.escape(Path(image).stem)}</h2><img src='{html.escape(image)}'>")
    if faults:
        out.append(
            "<h2>Faults applied</h2><table><tr><th>time (s)</th><th>f</th><th>value</th></tr>"
        )
        for fault in faults:
            out.append(
                f"<tr><td>{fault.get('time', 0) / 1e9:.1f}</td><td>{html.escape(str(fault.get('f')))}</td>"
                f"<td>{_json(fault.get('value'))}</td></tr>"
            )
        out.append("</table>")
    stats = results.get("stats", {})
    if stats:
        out += _statistics(stats, achieved_rate(results, test))
    out.append("</body></html>")
    return "\n".join(out)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    out = [f"<table><tr>{cells}</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>")
    out.append("</table>")
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else str(value)


def _statistics(stats: Mapping[str, Any], rate: AchievedRate | None) -> list[str]:
    """The achieved rate, counts by f, latency percentiles, availability during each fault,
    then the raw JSON."""
    out = [
        "<h2>Statistics</h2>",
        f"<p>{_cell(stats.get('ops'))} operations over {_cell(stats.get('duration_s'))} s; "
        f"ok {_cell(stats.get('ok'))}, fail {_cell(stats.get('fail'))}, info "
        f"{_cell(stats.get('info'))}, pending {_cell(stats.get('pending'))}; availability "
        f"(ok share of send/poll/txn completions) {_cell(stats.get('availability'))}</p>",
    ]
    if rate is not None:
        out.append(
            f"<p class='rate'>achieved <b>{rate.ops_per_s:,.0f} ops/s</b>: "
            f"{rate.completed:,} operations completed in {rate.seconds:,.0f} s "
            f"({html.escape(rate.basis)}); {html.escape(rate.describe_by_f())}</p>"
        )
    by_f = stats.get("by_f", {})
    if by_f:
        per_s = rate.by_f if rate is not None else {}
        out += _table(
            ["f", "ops", "ok", "fail", "info", "pending", "completed/s"],
            [[f, *(c.get(k) for k in ("ops", "ok", "fail", "info", "pending")),
              round(per_s.get(f, 0.0), 1) if rate is not None else None]
             for f, c in sorted(by_f.items())],
        )  # fmt: skip
    latency = stats.get("latency_ms", {})
    rows = [
        [f, kind, p.get("count"), p.get("p50"), p.get("p90"), p.get("p99"), p.get("p999"),
         p.get("max")]
        for f, kinds in sorted(latency.items())
        for kind, p in sorted(kinds.items())
    ]  # fmt: skip
    if rows:
        out.append("<h3>Latency (ms)</h3>")
        out += _table(["f", "outcome", "count", "p50", "p90", "p99", "p99.9", "max"], rows)
    faults = stats.get("faults", [])
    if faults:
        out.append("<h3>Availability during each fault</h3>")
        out += _table(
            ["fault", "targets", "from (s)", "to (s)", "completions", "ok", "availability"],
            [
                [fault.get("fault"), ", ".join(map(str, (fault.get("value") or {}).get("targets", [])))
                 if isinstance(fault.get("value"), Mapping) else "", fault.get("start_s"),
                 fault.get("end_s"), fault.get("completions"), fault.get("ok"),
                 fault.get("availability")]
                for fault in faults
            ],
        )  # fmt: skip
    out.append(f"<details><summary>all statistics (JSON)</summary>{_json(stats)}</details>")
    return out
