"""``squall serve``: the run store over HTTP, as Jepsen's ``serve``: an index at ``/`` of the
campaigns and then the runs (newest first, verdicts coloured, links to each report) and
every file of the store beneath it. Read-only; nothing outside the store is served, even through a symbolic link."""

from __future__ import annotations

import html
import os
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

from squall.campaign_listing import CampaignSummary, list_campaigns
from squall.store_listing import RunSummary, describe_findings, list_runs

_COLOURS = {
    "VALID": "#1a7f37",
    "INVALID": "#cf222e",
    "UNKNOWN": "#9a6700",
    "INTERRUPTED": "#9a6700",
    "NO VERDICT": "#57606a",
}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>squall runs and campaigns: {store}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #1f2328; }}
table {{ border-collapse: collapse; }}
th, td {{ padding: 0.3em 0.8em; border-bottom: 1px solid #d0d7de; text-align: left; }}
th {{ background: #f6f8fa; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
</style></head><body>
<h1>squall runs and campaigns</h1>
{campaigns}<h2>Runs</h2>
<p>{count} run(s) in <code>{store}</code>, newest first.</p>
<table>
<tr><th>test</th><th>started (UTC)</th><th>verdict</th><th>found</th>
<th>duration</th><th>files</th></tr>
{rows}
</table></body></html>
"""


def _row(run: RunSummary) -> str:
    base = f"{quote(run.test)}/{quote(run.stamp)}/"
    anomalies = describe_findings(run)
    duration = f"{run.duration_s:.0f} s" if run.duration_s is not None else ""
    return (
        f"<tr><td>{html.escape(run.test)}</td>{_started_and_verdict(run.started, run.stamp, run.verdict)}"
        f"<td>{html.escape(anomalies)}</td><td class=num>{duration}</td>"
        f"{_links(base, run.has_report)}</tr>"
    )


def _started_and_verdict(started: str | None, stamp: str, verdict: str) -> str:
    """The start (UTC) and verdict cells of a run's or a campaign's row."""
    when = (started or stamp).replace("+00:00", "").replace("T", " ")
    colour = _COLOURS.get(verdict, "#57606a")
    return (
        f"<td>{html.escape(when)}</td>"
        f'<td style="color:{colour};font-weight:bold">{html.escape(verdict)}</td>'
    )


def _links(base: str, has_report: bool) -> str:
    """The files cell: the report (where there is one) and the directory."""
    report = f'<a href="{base}report.html">report</a> · ' if has_report else ""
    return f'<td>{report}<a href="{base}">files</a></td>'


_CAMPAIGNS = """<h2>Campaigns</h2>
<p>{count} campaign(s), newest first; each case is also a run below.</p>
<table>
<tr><th>campaign</th><th>started (UTC)</th><th>verdict</th><th>cases</th><th>found</th>
<th>files</th></tr>
{rows}
</table>
"""


def _campaign_row(campaign: CampaignSummary) -> str:
    base = f"campaigns/{quote(campaign.path.parent.name)}/{quote(campaign.stamp)}/"
    cells = _started_and_verdict(campaign.started, campaign.stamp, campaign.verdict)
    return (
        f"<tr><td>{html.escape(campaign.name)}</td>{cells}"
        f"<td>{html.escape(campaign.tally())}</td><td>{html.escape(campaign.lost())}</td>"
        f"{_links(base, (campaign.path / 'report.html').is_file())}</tr>"
    )


def index_page(store: Path) -> str:
    """The HTML index of the store's campaigns (when it has any) and runs."""
    runs = list_runs(store)
    campaigns = list_campaigns(store)
    return _PAGE.format(
        store=html.escape(str(store)),
        count=len(runs),
        rows="\n".join(_row(run) for run in runs),
        campaigns=_CAMPAIGNS.format(
            count=len(campaigns), rows="\n".join(_campaign_row(c) for c in campaigns)
        )
        if campaigns
        else "",
    )


class StoreRequestHandler(SimpleHTTPRequestHandler):
    """Files of the store, the index at ``/``; quiet unless asked to log."""

    def __init__(self, *args: object, directory: str, verbose: bool = False, **kw: object) -> None:
        self._root = Path(directory).resolve()
        self._verbose = verbose
        super().__init__(*args, directory=directory, **kw)  # type: ignore[arg-type]

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] in ("/", "/index.html"):
            self._send_index(head=False)
            return
        if not self._inside_store():
            self.send_error(HTTPStatus.NOT_FOUND, "not in the store")
            return
        super().do_GET()

    def do_HEAD(self) -> None:
        if self.path.split("?", 1)[0] in ("/", "/index.html"):
            self._send_index(head=True)
            return
        if not self._inside_store():
            self.send_error(HTTPStatus.NOT_FOUND, "not in the store")
            return
        super().do_HEAD()

    def _inside_store(self) -> bool:
        target = Path(self.translate_path(self.path)).resolve()
        return target == self._root or self._root in target.parents

    def _send_index(self, *, head: bool) -> None:
        body = index_page(self._root).encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        if self._verbose:
            super().log_message(format, *args)


def make_server(store: Path, host: str, port: int, *, verbose: bool = False) -> ThreadingHTTPServer:
    """A server of the store on host:port (port 0: any free port); call serve_forever()."""
    handler = partial(StoreRequestHandler, directory=os.fspath(store), verbose=verbose)
    return ThreadingHTTPServer((host, port), handler)
