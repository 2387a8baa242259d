"""report.html: the verdict, the checkers, anomaly samples, the faults applied, and the plots."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
    if test:
        topic = test.get("topic", {})
        out.append(
            f"<p>seed {test.get('seed')} · runtime {html.escape(str(test.get('runtime')))} · "
            f"{test.get('nodes')} brokers · topic {_json(topic)}</p>"
        )
    out.append("<h2>Checkers</h2><table><tr><th>checker</th><th>verdict</th><th>counts</th></tr>")
    for checker, found in sorted(results.get("checkers", {}).items()):
        counts = {k: v for k, v in found.get("counts", {}).items() if v}
        out.append(
            f"<tr><td>{html.escape(checker)}</td><td>{_verdict(found.get('valid'))}</td>"
            f"<td>{_json(counts) if counts else '-'}</td></tr>"
        )
    out.append("</table>")
    for checker, found in sorted(results.get("checkers", {}).items()):
        for anomaly, listed in sorted(found.get("anomalies", {}).items()):
            if not listed:
                continue
            out.append(
                f"<h3>{html.escape(anomaly)} ({found.get('counts', {}).get(anomaly, len(listed))}) "
                f"from {html.escape(checker)}</h3><ul>"
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
        out.append(f"<h2>Statistics</h2><p>{_json(stats)}</p>")
    out.append("</body></html>")
    return "\n".join(out)
