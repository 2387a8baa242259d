"""A campaign's report.html, in its own directory: the campaign's verdict, file and times,
then one row per case (its configuration, verdict, acknowledged writes lost and allowed,
anomalies with their counts, duration) linking to the case's own report; a case without a
verdict says why. The run report's style; every value escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from squall.campaign_listing import CampaignSummary, CaseSummary, read_campaign
from squall.report.html import STYLE, compact, describe_topic, html_table
from squall.run_log import RUN_LOG

_CLASSES = {"VALID": "valid", "INVALID": "invalid"}


def verdict_html(verdict: str) -> str:
    """A verdict in the run report's colours."""
    return f'<span class="{_CLASSES.get(verdict, "unknown")}">{html.escape(verdict)}</span>'


def _when(iso: str | None) -> str:
    return (iso or "-").replace("T", " ").replace("+00:00", " UTC")


def _configuration(case: CaseSummary) -> str:
    """The case's parameters, then what its run's test.json says it ran."""
    lines = [
        f"{path} = {compact(value)}" for path, value in case.parameters.items() if path != "name"
    ]
    test = case.test or {}
    workload = test.get("workload")
    ran = []
    if isinstance(workload, Mapping) and "acks" in workload:
        ran.append(f"acks {compact(workload['acks'])}")
    if isinstance(test.get("topic"), Mapping):
        ran.append(f"topic {describe_topic(test['topic'])}")
    if "nodes" in test:
        ran.append(f"{compact(test['nodes'])} brokers")
    if "time_limit_s" in test:
        ran.append(f"{compact(test['time_limit_s'])} s")
    if ran:
        lines.append(", ".join(ran))
    return "<br>".join(html.escape(line) for line in lines) or "-"


def _lost(case: CaseSummary) -> str:
    if case.acknowledged_lost is None:
        return "-"
    return f"{case.acknowledged_lost:,} / {case.allowed_lost or 0:,}"


def _anomalies(case: CaseSummary) -> str:
    run = case.run
    if run is None or case.why_no_verdict:
        return "-"
    lines = [f"{name} {count:,}" for name, count in run.anomalies.items()]
    if run.expected_counts:
        allowed = ", ".join(f"{name} {count:,}" for name, count in run.expected_counts.items())
        lines.append(f"allowed: {allowed}")
    elif run.expected:
        lines.append("allowed: " + ", ".join(run.expected))
    return "<br>".join(html.escape(line) for line in lines) or "none"


def _verdict_cell(case: CaseSummary) -> str:
    cell = verdict_html(case.verdict)
    if case.why_no_verdict:
        cell += f"<br><span class='cause'>{html.escape(case.why_no_verdict)}</span>"
    elif case.explanation:
        cell += f"<br><span class='caption'>{html.escape(case.explanation)}</span>"
    return cell


def _links(campaign: CampaignSummary, case: CaseSummary) -> str:
    run = case.run
    if run is None:
        return "-"
    links = []
    if run.has_report:
        links.append(f"<a href='{_href(campaign.run_link(case, 'report.html'))}'>report</a>")
    if case.why_no_verdict and (Path(run.path) / RUN_LOG).is_file():
        links.append(f"<a href='{_href(campaign.run_link(case, RUN_LOG))}'>{RUN_LOG}</a>")
    links.append(f"<a href='{_href(campaign.run_link(case))}'>files</a>")
    return " · ".join(links)


def _href(link: str | None) -> str:
    return html.escape(quote(link or ""), quote=True)


def _seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:,.0f} s"


def render_campaign_html(campaign: CampaignSummary) -> str:
    """The campaign's report as one HTML document, linking to its cases' runs by relative
    path (from the campaign's directory)."""
    name = html.escape(campaign.name)
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>campaign {name}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>campaign {name}: {verdict_html(campaign.verdict)}</h1>",
        f"<p><strong>{html.escape(campaign.tally())}</strong>"
        + (f"; {html.escape(campaign.lost())}" if campaign.lost() else "")
        + "</p>",
    ]
    if campaign.interrupted:
        out.append("<p>The campaign was interrupted: the cases below are the ones that ran.</p>")
    elif not campaign.finished:
        out.append(
            "<p>The campaign has not ended (it is running, or stopped before it wrote its end): "
            "the cases below are the ones that ran.</p>"
        )
    facts = [
        ("spec file", html.escape(campaign.file or "-")),
        ("started", html.escape(_when(campaign.started))),
        (
            "ended",
            html.escape(
                _when(campaign.ended)
                if campaign.ended
                else "not recorded"
                if campaign.finished
                else "not yet"
            ),
        ),
        ("directory", f"<code>{html.escape(str(campaign.path))}</code>"),
        (
            "files",
            " · ".join(
                f"<a href='{quote(f)}'>{html.escape(f)}</a>"
                for f in ("summary.json", "junit.xml")
                if (campaign.path / f).is_file()
            )
            or "-",
        ),
    ]
    rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
    out.append(f"<table class='kv'>{rows}</table>")
    out.append("<h2 id='cases'>Cases</h2>")
    out.append(
        "<p class='caption'>Acknowledged writes lost: distinct acknowledged writes each "
        "counted once / of them, the ones the case's configuration allows (results.json "
        "<code>summary</code>); anomalies: cases found per type, summed over the checkers.</p>"
    )
    out += html_table(
        [
            "case",
            "configuration",
            "verdict",
            "acknowledged writes lost / allowed",
            "anomalies",
            "duration",
            "run",
        ],
        [
            [
                html.escape(case.name),
                _configuration(case),
                _verdict_cell(case),
                _lost(case),
                _anomalies(case),
                _seconds(case.seconds),
                _links(campaign, case),
            ]
            for case in campaign.cases
        ],
    )
    out.append("</body></html>")
    return "\n".join(out)


def write_campaign_report(campaign_dir: Path) -> Path | None:
    """Write ``report.html`` in the campaign's directory from its summary.json and its
    cases' run directories; its path, or None without a readable summary.json."""
    campaign = read_campaign(campaign_dir)
    if campaign is None:
        return None
    path = campaign_dir / "report.html"
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(render_campaign_html(campaign), encoding="utf-8")
    temp.replace(path)
    return path
