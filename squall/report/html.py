"""report.html: the verdict; the run (the command that replays it, versions, links to its
files); the checkers and their anomaly samples; the timeline of faults and SUT events; the
plots; failures by error; the statistics with the rate the run achieved; and the resolved
spec. Tables throughout, never raw JSON.

Every value taken from test.json, results.json or the history is escaped, and one of an
unexpected type or shape is shown as text rather than failing the report."""

from __future__ import annotations

import html
import shlex
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from checkers.catalogue import ANOMALIES, SINGLE_OPERATION_FIELDS, describe_case, history_line
from squall.report.causes import cause_lead, cause_lines, cause_summary, cause_text
from squall.report.configuration import nemesis_as_run
from squall.report.failures import FailureGroup
from squall.report.scenarios import way
from squall.report.throughput import AchievedRate, achieved_rate, describe_live_rate
from squall.report.timeline import event_rows, natural_key
from squall.report.verdict import (
    describe_faults,
    describe_lost,
    explain,
    group_summary,
    replica_reads_summary,
)

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
h1{margin-bottom:0}.valid{color:#2e7d32}.invalid{color:#c62828}.unknown{color:#f9a825}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;
font-size:14px;vertical-align:top}th{background:#f5f5f5}code{font-size:12px}img{max-width:100%}
table.kv{margin:0}table.kv th{font-weight:normal;white-space:nowrap}td table.kv td,td table.kv th{font-size:13px}
.caption{color:#555;font-size:14px;margin-top:0}.cause{color:#8e2424}nav a{margin-right:1em}summary{cursor:pointer}
pre{background:#f5f5f5;padding:6px 10px;display:inline-block}
"""

MAX_ROWS = 2000
"""Rows of a table shown at most; the rest are counted."""

CAPTIONS = {
    "latency": (
        "Latency of every send (above) and poll (below) completion, log scale, by outcome. "
        "An ok poll that read nothing waited out its timeout: its latency is the timeout's, "
        "drawn apart in grey."
    ),
    "rate": "Completions per second, by outcome.",
    "lag": (
        "Consumer lag per key: the highest offset acknowledged so far minus the highest offset "
        "the latest poll of the key read (before any read: all of it). It grows while writes "
        "are acknowledged and nobody reads, and jumps when a consumer starts again from an "
        "earlier offset; the final read is left out."
    ),
    "unseen": (
        "Acknowledged writes not yet read by any poll (final read included), per key and in "
        "all: a value counts from its acknowledgement until it is first read; one read before "
        "its acknowledgement never counts; one never read counts to the end."
    ),
    "anomalies": (
        "Every case found per anomaly type (complete counts; hatched: expected losses), and "
        "the acknowledged writes lost per key, each counted once however many types it shows "
        "under (hatched: the ones the configuration allows)."
    ),
    "windows": "Unclean-election loss windows: first lost acknowledgement to last, per key.",
}
"""What each plot shows, under it; fault intervals are shaded on every plot over time."""

RUN_FILES = (
    "history.jsonl",
    "history.parquet/ops.parquet",
    "history.parquet/mops.parquet",
    "history.parquet/events.parquet",
    "history.parquet/assign.parquet",
    "results.json",
    "test.json",
    "schedule.json",
    "junit.xml",
    "run.log",
    "spark.log",
)
"""The files of a run directory the report links to when they exist (and nodes/*/*)."""


def _verdict(valid: Any) -> str:
    label = {True: "valid", False: "invalid"}.get(valid, "unknown")
    return f'<span class="{label}">{label.upper()}</span>'


T = TypeVar("T")


def _tolerant(compute: Callable[[], T], otherwise: T) -> T:
    """`compute()`, or `otherwise` when results.json or test.json has an unexpected shape:
    a malformed file must not hide the rest of the report."""
    try:
        return compute()
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError, IndexError):
        return otherwise


def _text(value: Any) -> str:
    """Any value as escaped text."""
    return html.escape(str(value))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(ns: Any) -> str:
    """A time in nanoseconds as seconds (to the millisecond); anything else as it is."""
    if _number(ns):
        try:
            return f"{ns / 1e9:.3f}".rstrip("0").rstrip(".")
        except (OverflowError, ValueError):
            pass
    return _text(ns)


def compact(value: Any, limit: int = 300, depth: int = 0) -> str:
    """A value as short plain text (not escaped): mappings as ``k: v, ...``, lists as
    ``[a, b]``, at most 20 items of either, 6 levels deep and `limit` characters."""
    if isinstance(value, Mapping | list | tuple) and depth >= 6:
        text = "…"
    elif isinstance(value, Mapping):
        items = [f"{k}: {compact(v, limit, depth + 1)}" for k, v in list(value.items())[:20]]
        more = len(value) - 20
        text = "{" + ", ".join(items) + (f", … {more} more" if more > 0 else "") + "}"
    elif isinstance(value, list | tuple):
        items = [compact(v, limit, depth + 1) for v in value[:20]]
        more = len(value) - 20
        text = "[" + ", ".join(items) + (f", … {more} more" if more > 0 else "") + "]"
    elif value is None:
        text = "-"
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float):
        text = f"{value:.3f}".rstrip("0").rstrip(".")
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:,}" if isinstance(value, int) else compact(value)


def _cell_html(value: Any) -> str:
    return html.escape(_cell(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A table of plain values (escaped here)."""
    return html_table(header, [[_cell_html(v) for v in row] for row in rows])


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A table of cells already in HTML; at most `MAX_ROWS` rows."""
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    out = [f"<table><tr>{cells}</tr>"]
    for row in rows[:MAX_ROWS]:
        out.append("<tr>" + "".join(f"<td>{v}</td>" for v in row) + "</tr>")
    out.append("</table>")
    if len(rows) > MAX_ROWS:
        out.append(f"<p>… and {len(rows) - MAX_ROWS:,} more rows</p>")
    return out


def render_value(value: Any, depth: int = 0) -> str:
    """Any JSON value as HTML: a mapping as a two-column table, a list of mappings as a
    table with a column per field, anything deeper or else as compact text (numbers as
    written: seeds and ports are not quantities)."""
    if isinstance(value, Mapping) and value and depth < 3:
        rows = "".join(
            f"<tr><th>{_text(k)}</th><td>{render_value(v, depth + 1)}</td></tr>"
            for k, v in value.items()
        )
        return f"<table class='kv'>{rows}</table>"
    if (
        isinstance(value, list)
        and value
        and depth < 3
        and all(isinstance(v, Mapping) for v in value)
    ):
        return "\n".join(_records(value))
    if (
        isinstance(value, list)
        and all(isinstance(v, str) for v in value)
        and sum(len(v) for v in value) > 120  # sentences: one per line
    ):
        return "<br>".join(html.escape(v) for v in value)
    if isinstance(value, Mapping | list) and not value:
        return "-"
    return html.escape(compact(value))


def _records(
    records: Sequence[Mapping[str, Any]], cell: Callable[[str, Any], str] | None = None
) -> list[str]:
    """Records as a table, one column per field (in the order fields first appear)."""
    fields: dict[str, None] = {}
    for record in records:
        fields.update((str(k), None) for k in record)
    show = cell or (lambda _field, value: html.escape(_cell(value)))
    return html_table(
        list(fields),
        [[show(f, _lookup(record, f)) for f in fields] for record in records],
    )


def _lookup(record: Mapping[str, Any], field: str) -> Any:
    if field in record:
        return record[field]
    for k, v in record.items():  # a field that is not a string, named by its text
        if str(k) == field:
            return v
    return None


NS_FIELDS = frozenset({"time", "window"})
"""Sample fields in nanoseconds, shown in seconds."""


def _with_cause(text: str, case: Any, lead: str | None) -> str:
    """A case's sentence and, beside it, its cause (HTML): `the cause above` when it is the
    type's `lead` one."""
    cause = cause_text(case)
    if cause is None:
        return html.escape(text)
    said = "the cause above" if cause == lead else html.escape(cause)
    return f"{html.escape(text)}<br><span class='cause'>cause: {said}</span>"


def _sample_cell(field: str, value: Any) -> str:
    if field == "cause" and isinstance(value, Mapping):
        return html.escape(cause_lines(value) or compact(value))
    if field in SINGLE_OPERATION_FIELDS and history_line(value) is not None:
        return f"line {history_line(value)}"  # as the sentences above number operations
    if field in NS_FIELDS:
        if _number(value):
            return f"{_seconds(value)} s"
        if isinstance(value, list) and value and all(_number(v) for v in value):
            return "[" + ", ".join(f"{_seconds(v)} s" for v in value) + "]"
    return html.escape(compact(value))


def _counts(counts: Mapping[str, Any]) -> str:
    return "<br>".join(f"{_text(k)} {_cell_html(v)}" for k, v in counts.items())


def render_html(
    results: Mapping[str, Any],
    *,
    test: Mapping[str, Any] | None = None,
    faults: Sequence[Mapping[str, Any]] = (),
    images: Sequence[str] = (),
    samples: int = 10,
    elections: int | None = None,
    events: Sequence[Mapping[str, Any]] | None = None,
    failures: Sequence[FailureGroup] = (),
    run_dir: Path | None = None,
) -> str:
    """The whole report as one HTML document (images and files referenced by relative path).

    `faults`: the history's nemesis operations; `events`: its nemesis operations and SUT
    events, for the timeline's table (default: `faults`); `failures`: completions that
    failed, by error (`squall.report.failures`); `run_dir`: the run's directory, whose
    files are linked to when they exist."""
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
    out += _tolerant(lambda: _lost_writes(results), [])
    applied = _tolerant(lambda: describe_faults(test, faults), "faults: test.json is malformed")
    out.append(f"<p>{html.escape(applied)}</p>")
    if test:
        out.append(
            f"<p>seed {_text(test.get('seed'))} · runtime {_text(test.get('runtime'))} · "
            f"{_text(test.get('nodes'))} brokers · topic "
            f"{html.escape(_tolerant(lambda: describe_topic(test.get('topic')), '?'))}</p>"
        )
    timeline_image = next((i for i in images if Path(i).stem == "timeline"), None)
    plots = [i for i in images if i != timeline_image]
    listed = events if events is not None else faults
    sections = [("run", "Run"), ("checkers", "Checkers")]
    scenarios = _mapping(results.get("scenarios"))
    sections += [("scenarios", "Scenarios")] if scenarios else []
    sections += [("timeline", "Timeline")] if timeline_image or listed else []
    sections += [("plots", "Plots")] if plots else []
    sections += [("failures", "Failures by error")] if failures else []
    sections += [("statistics", "Statistics")] if _mapping(results.get("stats")) else []
    sections += [("configuration", "Configuration")]
    out.append(
        "<nav>" + "".join(f"<a href='#{a}'>{html.escape(t)}</a>" for a, t in sections) + "</nav>"
    )
    out += _tolerant(
        lambda: _run_section(test, run_dir), ["<p>run: test.json has an unexpected shape</p>"]
    )
    out += _checkers(results, samples)
    if scenarios:
        out += _tolerant(
            lambda: _scenarios(scenarios),
            ["<p>scenarios: results.json has an unexpected shape</p>"],
        )
    if timeline_image or listed:
        out += _tolerant(
            lambda: _timeline_section(timeline_image, listed),
            ["<p>timeline: the history's events have an unexpected shape</p>"],
        )
    if plots:
        out.append("<h2 id='plots'>Plots</h2>")
        for image in plots:
            stem = Path(image).stem
            out.append(f"<h3>{html.escape(stem)}</h3><img src='{html.escape(image)}'>")
            if stem in CAPTIONS:
                out.append(f"<p class='caption'>{html.escape(CAPTIONS[stem])}</p>")
    if failures:
        out += _failures(failures)
    stats = _mapping(results.get("stats"))
    if stats:
        out += _statistics(stats, _tolerant(lambda: achieved_rate(results, test), None))
    out += _tolerant(
        lambda: _configuration(results, test, faults),
        ["<p>configuration: test.json has an unexpected shape</p>"],
    )
    out.append("</body></html>")
    return "\n".join(out)


def _scenarios(section: Mapping[str, Any]) -> list[str]:
    """Each scenario's runs that reached their state, and every attempt with its evidence."""
    out = [
        "<h2 id='scenarios'>Scenarios</h2>",
        f"<p>reached their state in {_cell_html(section.get('reached'))} of "
        f"{_cell_html(section.get('instances'))} runs, as the SUT's events show</p>",
    ]
    by_name = _mapping(section.get("by_name")) or {}
    out += _table(
        ["scenario", "runs", "reached", "first attempt", "attempts", "cut off"],
        [
            [name, e.get("instances"), e.get("reached"), e.get("first_attempt"),
             e.get("attempts"), e.get("cut_off")]
            for name, e in sorted(by_name.items())
        ],
    )  # fmt: skip
    listed = section.get("runs")
    runs: list[Any] = listed if isinstance(listed, list) else []
    out += _table(
        ["scenario", "run", "attempt", "way", "partition", "started s", "reached",
         "evidence / missing"],
        [
            [r.get("scenario"), r.get("instance"), r.get("attempt"), way(r),
             (r.get("aim") or {}).get("key"), r.get("started_s"), r.get("reached"),
             r.get("missing") or [e.get("type") for e in r.get("evidence") or []]]
            for r in runs
        ],
    )  # fmt: skip
    return out


def describe_topic(topic: Any) -> str:
    """test.json's `topic` in one line: its name, partitions, RF, min.insync, unclean
    election and truncation rule."""
    if not isinstance(topic, Mapping):
        return compact(topic)
    unclean = topic.get("unclean_leader_election")
    parts = [
        f"{topic.get('partitions')} partitions" if "partitions" in topic else None,
        f"RF {topic.get('replication_factor')}" if "replication_factor" in topic else None,
        f"min.insync {topic.get('min_insync_replicas')}"
        if "min_insync_replicas" in topic
        else None,
        None if unclean is None else f"unclean election {'on' if unclean else 'off'}",
        f"truncation {topic.get('truncation')}" if topic.get("truncation") else None,
    ]
    described = ", ".join(p for p in parts if p)
    return f"{topic.get('name', '?')}" + (f" ({described})" if described else "")


def _run_section(test: Mapping[str, Any] | None, run_dir: Path | None) -> list[str]:
    """How to replay the run, what it ran on, and its files."""
    out = ["<h2 id='run'>Run</h2>"]
    where = str(run_dir) if run_dir is not None else (test or {}).get("run_dir")
    replay = f"squall replay {shlex.quote(str(where))}" if where else "squall replay RUN_DIR"
    rows: list[tuple[str, str]] = [("replay", f"<code>{html.escape(replay)}</code>")]
    if test:
        for field, label in (
            ("description", "description"),
            ("seed", "seed"),
            ("runtime", "runtime"),
            ("nodes", "brokers"),
            ("profile", "profile"),
            ("time_limit_s", "time limit (s)"),
            ("recovery_wait_s", "recovery wait (s)"),
            ("run_id", "run id"),
            ("bootstrap", "bootstrap"),
            ("zookeeper", "zookeeper"),
            ("git_commit", "git commit"),
            ("interrupted_by", "interrupted by"),
        ):
            if test.get(field) not in (None, ""):
                rows.append((label, _text(test[field])))
        versions = test.get("versions")
        if isinstance(versions, Mapping) and versions:
            listing = " · ".join(f"{k} {v}" for k, v in versions.items())
            rows.append(("versions", html.escape(listing)))
    else:
        rows.append(("test.json", "none: the run's spec is unknown"))
    out.append(
        "<table class='kv'>"
        + "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
        + "</table>"
    )
    if run_dir is not None:
        links = [
            f"<li><a href='{html.escape(quote(path))}'>{html.escape(path)}</a> ({_size(size)})</li>"
            for path, size in run_files(run_dir)
        ]
        if links:
            out.append("<h3>Files</h3><ul>" + "".join(links) + "</ul>")
    return out


def run_files(run_dir: Path) -> list[tuple[str, int]]:
    """The files of a run directory worth a link, as relative paths, with their sizes:
    those of `RUN_FILES` that exist, then every node's files."""
    found = []
    for name in RUN_FILES:
        path = run_dir / name
        if path.is_file():
            found.append((name, path.stat().st_size))
    nodes = run_dir / "nodes"
    if nodes.is_dir():
        for node in sorted(nodes.iterdir(), key=lambda p: natural_key(p.name)):
            if node.is_dir():
                for path in sorted(node.iterdir()):
                    if path.is_file():
                        found.append((path.relative_to(run_dir).as_posix(), path.stat().st_size))
    return found


def _size(size: int) -> str:
    if size < 1024:
        return f"{size:,} bytes"
    return f"{size / 1024:,.1f} KB" if size < 1024**2 else f"{size / 1024**2:,.1f} MB"


def _lost_writes(results: Mapping[str, Any]) -> list[str]:
    """The acknowledged writes lost, each once, and per key (results.json `summary`); the
    anomaly types below count the same losses again under each of their names."""
    said = describe_lost(results)
    if said is None:
        return []
    keys = _mapping(_mapping(results.get("summary")).get("keys"))
    rows = [
        [
            html.escape(str(key)),
            f"{_mapping(lost).get('acknowledged_lost', 0):,}",
            f"{_mapping(lost).get('allowed_lost', 0):,}",
        ]
        for key, lost in keys.items()
    ]
    return [
        f"<p class='lost'>{html.escape(said)}, each counted once; the anomaly types below "
        "count the same writes under each name they show under.</p>",
        *html_table(["key", "acknowledged writes lost", "allowed"], rows),
    ]


def _checkers(results: Mapping[str, Any], samples: int) -> list[str]:
    """The checkers' verdicts and counts, the notes, and each anomaly type's samples."""
    out = [
        "<h2 id='checkers'>Checkers</h2><table><tr><th>checker</th><th>verdict</th>"
        "<th>anomalies</th><th>expected losses</th></tr>"
    ]
    checkers = sorted(
        (str(name), _mapping(found)) for name, found in _mapping(results.get("checkers")).items()
    )
    for checker, found in checkers:
        counts = {k: v for k, v in _mapping(found.get("counts")).items() if v}
        expected = {k: v for k, v in _mapping(found.get("expected_counts")).items() if v}
        out.append(
            f"<tr><td>{html.escape(checker)}</td><td>{_verdict(found.get('valid'))}</td>"
            f"<td>{_counts(counts) if counts else '-'}</td>"
            f"<td>{_counts(expected) if expected else '-'}</td></tr>"
        )
    out.append("</table>")
    for summary in (replica_reads_summary(results), group_summary(results)):
        if summary is not None:
            out.append(f"<p class='caption'>{html.escape(summary)}</p>")
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
                shown = listed[:samples]
                out.append(
                    f"<h3>{_text(anomaly)} ({_text(count)}) from {html.escape(checker)}"
                    f"{html.escape(title)}</h3>"
                )
                about = ANOMALIES.get(str(anomaly))
                if about is not None:
                    out.append(
                        f"<p>{html.escape(about.meaning)} <span class='caption'>Allowed by: "
                        f"{html.escape(about.allowed_by)}; see {html.escape(about.doc)}."
                        "</span></p>"
                    )
                if len(listed) > len(shown) or (_number(count) and count > len(shown)):
                    out.append(f"<p class='caption'>the first {len(shown)} cases</p>")
                summary = cause_summary(listed)
                if summary is not None:
                    out.append(
                        f"<p class='cause'><strong>Cause:</strong> {html.escape(summary)}</p>"
                    )
                lead = cause_lead(listed)
                explained = [
                    _with_cause(describe_case(str(anomaly), s)["text"], s, lead) for s in shown[:5]
                ]
                out.append("<ul>" + "".join(f"<li>{t}</li>" for t in explained) + "</ul>")
                records = [s for s in shown if isinstance(s, Mapping)]
                if records:
                    out += _records(records, _sample_cell)
                others = [s for s in shown if not isinstance(s, Mapping)]
                if others:
                    out.append(
                        "<ul>" + "".join(f"<li>{_text(compact(s))}</li>" for s in others) + "</ul>"
                    )
    return out


def _timeline_section(image: str | None, events: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["<h2 id='timeline'>Timeline</h2>"]
    if image is not None:
        out.append(f"<img src='{html.escape(image)}'>")
        out.append(
            "<p class='caption'>One lane per node. Bars: the faults in force on it (killed, "
            "paused, frozen, partitioned, netem), from the fault to its heal; the top lane "
            "spans each scenario. Markers: a leader elected on its new leader's node (colour: "
            "key; a star: unclean), a partition going offline on its last leader's node, ISR "
            "changes on the leader's node, the controller moving to its node, a truncation on "
            "the replica that truncated, bounces.</p>"
        )
    rows = event_rows(events)
    if not rows:
        return out
    kinds = Counter(r.f for r in rows)
    unclean = sum(1 for r in rows if r.f == "leader-election" and r.detail.startswith("UNCLEAN"))
    faults = sum(n for f, n in kinds.items() if f not in _SUT_EVENTS)
    summary = [f"{faults} faults applied"] if faults else []
    for f, label in _SUT_EVENTS.items():
        if kinds.get(f):
            summary.append(
                f"{kinds[f]} {label}" + (f" ({unclean} unclean)" if f == "leader-election" else "")
            )
    out.append(
        f"<details><summary>the {len(rows)} events: {html.escape(', '.join(summary))}</summary>"
    )
    out += html_table(
        ["time (s)", "source", "event", "node", "key", "details"],
        [
            [
                _seconds(r.time),
                _text(r.source),
                _text(r.f),
                _text(r.nodes),
                _text(r.key),
                _text(r.detail),
            ]
            for r in rows
        ],
    )
    out.append("</details>")
    return out


_SUT_EVENTS = {
    "leader-election": "leader elections",
    "isr-change": "ISR changes",
    "controller-elected": "controller elections",
    "truncation": "truncations",
}


def _failures(failures: Sequence[FailureGroup]) -> list[str]:
    total = sum(g.count for g in failures)
    out = [
        "<h2 id='failures'>Failures by error</h2>",
        f"<p class='caption'>The {total:,} client completions that were <code>fail</code> "
        "(certainly not done) or <code>info</code> (indeterminate), by f and by error, numbers "
        "and addresses replaced by N and &lt;addr&gt;; with the first and last time (s) and "
        "the first message as written.</p>",
    ]
    out += _table(
        ["f", "error", "fail", "info", "first (s)", "last (s)", "first message"],
        [
            [g.f, g.error, g.fail, g.info, round(g.first_s, 3), round(g.last_s, 3),
             g.example if g.example != g.error else ""]
            for g in failures
        ],
    )  # fmt: skip
    return out


SHOWN_STATS = frozenset(
    {"ops", "ok", "fail", "info", "pending", "duration_s", "availability", "by_f",
     "latency_ms", "faults"}
)  # fmt: skip


def _statistics(stats: Mapping[str, Any], rate: AchievedRate | None) -> list[str]:
    """The achieved rate, counts by f, latency percentiles, availability during each fault,
    then the rest of the statistics as tables."""
    out = [
        "<h2 id='statistics'>Statistics</h2>",
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
    live = describe_live_rate(stats)
    if live is not None:
        out.append(f"<p class='rate'>{html.escape(live)}</p>")
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
    rest = {k: v for k, v in stats.items() if k not in SHOWN_STATS}
    if rest:
        out.append(
            "<details><summary>more statistics (events, throughput windows, instant faults, "
            f"...)</summary>{render_value(rest)}</details>"
        )
    return out


def _configuration(
    results: Mapping[str, Any],
    test: Mapping[str, Any] | None,
    faults: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """The resolved spec from test.json (of the nemesis, the settings that took part in the
    run, the others apart), and what the check was told and read."""
    out = ["<h2 id='configuration'>Configuration</h2>"]
    if test:
        for part in ("workload", "topic", "broker", "broker_in_force", "nemesis"):
            if part not in test:
                continue
            out.append(f"<h3>{html.escape(part)}</h3>")
            if part == "nemesis" and isinstance(test[part], Mapping):
                used, unused = nemesis_as_run(test[part], {str(op.get("f")) for op in faults})
                out.append(render_value(used))
                if unused:
                    out.append(
                        "<details><summary>settings of the spec that took no part in this run "
                        f"({html.escape(', '.join(unused))})</summary>{render_value(unused)}"
                        "</details>"
                    )
                continue
            out.append(render_value(test[part]))
    else:
        out.append("<p>no test.json: the spec the history came from is unknown</p>")
    for part, title in (("config", "what the check was told"), ("history", "the history read")):
        value = results.get(part)
        if value:
            out.append(f"<h3>{html.escape(title)} (results.json {part})</h3>")
            out.append(render_value(value))
    return out
