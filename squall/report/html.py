"""report.html: the verdict, the checkers, anomaly samples, the faults applied, the plots, and
the statistics with the rate the run achieved.

Every value taken from test.json, results.json or the history is escaped, and one of an
unexpected type is shown as text rather than failing the report."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

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


T = TypeVar("T")


def _tolerant(compute: Callable[[], T], otherwise: T) -> T:
    """`compute()`, or `otherwise` when results.json or test.json has an unexpected shape:
    a malformed file must not hide the rest of the report."""
    try:
        return compute()
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError):
        return otherwise


def _text(value: Any) -> str:
    """Any value as escaped text."""
    return html.escape(str(value))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seconds(ns: Any) -> str:
    """A time in nanoseconds as seconds; anything else as the text it is."""
    if isinstance(ns, int | float) and not isinstance(ns, bool):
        try:
            return f"{ns / 1e9:.1f}"
        except (OverflowError, ValueError):
            pass
    return _text(ns)


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
    anomaly_types = results.get("anomaly_types")
    if anomaly_types:
        listing = (
            ", ".join(map(str, anomaly_types))
            if isinstance(anomaly_types, list)
            else str(anomaly_types)
        )
        out.append(f"<p>anomalies: {html.escape(listing)}</p>")
    said = _tolerant(
        lambda: explain(results, elections=elections), "results.json cannot be explained"
    )
    out.append(f"<p><strong>{html.escape(said)}</strong></p>")
    applied = _tolerant(lambda: describe_faults(test, faults), "faults: test.json is malformed")
    out.append(f"<p>{html.escape(applied)}</p>")
    if test:
        topic = test.get("topic", {})
        out.append(
            f"<p>seed {_text(test.get('seed'))} · runtime {_text(test.get('runtime'))} · "
            f"{_text(test.get('nodes'))} brokers · topic {_json(topic)}</p>"
        )
    out.append(
        "<h2>Checkers</h2><table><tr><th>checker</th><th>verdict</th><th>anomalies</th>"
        "<th>expected losses</th></tr>"
    )
    checkers = sorted(
        (str(name), _mapping(found)) for name, found in _mapping(results.get("checkers")).items()
    )
    for checker, found in checkers:
        counts = {k: v for k, v in _mapping(found.get("counts")).items() if v}
        expected = {k: v for k, v in _mapping(found.get("expected_counts")).items() if v}
        out.append(
            f"<tr><td>{html.escape(checker)}</td><td>{_verdict(found.get('valid'))}</td>"
            f"<td>{_json(counts) if counts else '-'}</td>"
            f"<td>{_json(expected) if expected else '-'}</td></tr>"
        )
    out.append("</table>")
    notes = results.get("notes", [])
    for note in notes if isinstance(notes, list) else [notes]:
        out.append(f"<p><em>{_text(note)}</em></p>")
    for group, counts_of, title in (
        ("anomalies", "counts", ""),
        ("expected", "expected_counts", " (expected loss: the configuration allows it)"),
    ):
        for checker, found in checkers:
            for anomaly, listed in sorted(_mapping(found.get(group)).items()):
                if not listed:
                    continue
                if not isinstance(listed, list):
                    listed = [listed]
                count = _mapping(found.get(counts_of)).get(anomaly, len(listed))
                out.append(
                    f"<h3>{_text(anomaly)} ({_text(count)}) from {html.escape(checker)}"
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
                f"<tr><td>{_seconds(fault.get('time', 0))}</td><td>{_text(fault.get('f'))}</td>"
                f"<td>{_json(fault.get('value'))}</td></tr>"
            )
        out.append("</table>")
    stats = _mapping(results.get("stats"))
    if stats:
        out += _statistics(stats, _tolerant(lambda: achieved_rate(results, test), None))
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


def _cell_html(value: Any) -> str:
    return html.escape(_cell(value))


def _statistics(stats: Mapping[str, Any], rate: AchievedRate | None) -> list[str]:
    """The achieved rate, counts by f, latency percentiles, availability during each fault,
    then the raw JSON."""
    out = [
        "<h2>Statistics</h2>",
        f"<p>{_cell_html(stats.get('ops'))} operations over "
        f"{_cell_html(stats.get('duration_s'))} s; ok {_cell_html(stats.get('ok'))}, fail "
        f"{_cell_html(stats.get('fail'))}, info {_cell_html(stats.get('info'))}, pending "
        f"{_cell_html(stats.get('pending'))}; availability (ok share of send/poll/txn "
        f"completions) {_cell_html(stats.get('availability'))}</p>",
    ]
    if rate is not None:
        out.append(
            f"<p class='rate'>achieved <b>{rate.ops_per_s:,.0f} ops/s</b>: "
            f"{rate.completed:,} operations completed in {rate.seconds:,.0f} s "
            f"({html.escape(rate.basis)}); {html.escape(rate.describe_by_f())}</p>"
        )
    by_f = _mapping(stats.get("by_f"))
    if by_f:
        per_s = rate.by_f if rate is not None else {}
        out += _table(
            ["f", "ops", "ok", "fail", "info", "pending", "completed/s"],
            [[f, *(_mapping(c).get(k) for k in ("ops", "ok", "fail", "info", "pending")),
              round(per_s.get(f, 0.0), 1) if rate is not None else None]
             for f, c in sorted(by_f.items())],
        )  # fmt: skip
    latency = _mapping(stats.get("latency_ms"))
    rows = [
        [f, kind, p.get("count"), p.get("p50"), p.get("p90"), p.get("p99"), p.get("p999"),
         p.get("max")]
        for f, kinds in sorted(latency.items())
        for kind, p in sorted((k, _mapping(v)) for k, v in _mapping(kinds).items())
    ]  # fmt: skip
    if rows:
        out.append("<h3>Latency (ms)</h3>")
        out += _table(["f", "outcome", "count", "p50", "p90", "p99", "p99.9", "max"], rows)
    listed = stats.get("faults")
    faults = [f for f in listed if isinstance(f, Mapping)] if isinstance(listed, list) else []
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
