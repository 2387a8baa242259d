"""A run whose configuration allows its losses (acks=1): the terminal, junit.xml and the
report lead with the acknowledged writes lost, counted once, and name the allowed types with
their counts; the terminal shows them as short tables in seconds, never as raw JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from rich.console import Console

from squall.report.console import print_results
from squall.report.html import render_html
from squall.report.junit import render_junit

S = 1_000_000_000
KEY = "squall-queue-0"


def _lost(value: int, offset: int, writer: int, seconds: float) -> dict[str, Any]:
    return {
        "key": KEY, "value": value, "offset": offset, "writer": writer, "status": "ok",
        "acks": 1, "time": int(seconds * S), "expected_because": "sent with acks=1",
    }  # fmt: skip


CASES = [_lost(100 + i, 3788 + i, 98628 + i, 76.8 + i / 100) for i in range(3)]
ACKS1: dict[str, Any] = {
    "valid": True,
    "anomaly_types": [],
    "expected_anomaly_types": ["at-least-once-violation", "lost-write", "unseen"],
    "summary": {
        "acknowledged_lost": 761,
        "allowed_lost": 761,
        "keys": {KEY: {"acknowledged_lost": 761, "allowed_lost": 761}},
    },
    "checkers": {
        "delivery": {
            "valid": True,
            "anomalies": {},
            "counts": {"lost-write": 0, "unseen": 0, "G1a": 0},
            "expected": {"lost-write": CASES, "unseen": CASES},
            "expected_counts": {"lost-write": 761, "unseen": 761},
        },
        "consumer_groups": {
            "valid": True,
            "anomalies": {},
            "counts": {"at-least-once-violation": 0},
            "expected": {"at-least-once-violation": CASES},
            "expected_counts": {"at-least-once-violation": 761},
        },
    },
    "config": {
        "test": {
            "source": "test.json", "acks": 1, "replication_factor": 3,
            "min_insync_replicas": 1, "unclean_leader_election": False,
        },
        "allowances": ["losses of acks=0/1 writes are expected"],
    },
    "stats": {"ops": 1000, "ok": 990, "fail": 5, "info": 5, "pending": 0},
}  # fmt: skip


def test_the_terminal_leads_with_the_writes_lost_and_tables_the_allowed_ones(
    tmp_path: Path,
) -> None:
    (tmp_path / "report.html").write_text("<html></html>")
    console = Console(record=True, width=80)
    print_results(ACKS1, console=console, run_dir=tmp_path)
    text = console.export_text()
    panel, pointer = text.split("run directory: ")
    assert all(len(line) <= 80 for line in panel.splitlines())  # paths below are never cut
    flat = " ".join(text.split())
    assert "761 acknowledged writes lost, every one allowed" in flat
    assert "cases by type: at-least-once-violation 761, lost-write 761, unseen 761" in flat
    assert "losses the configuration allows (delivery)" in flat
    assert "76.8-76.8 s" in flat or "76.8 s" in flat  # seconds since the start, not ns
    assert "sent with acks=1" in flat
    assert '{"' not in text and "76800000000" not in text  # no raw JSON, no nanoseconds
    assert "lost-write 761" in flat  # the checkers table's allowed column, not "-"
    # The run ends by naming its report and how to browse every run.
    assert pointer.rstrip().splitlines() == [
        str(tmp_path),
        f"report: {tmp_path / 'report.html'}",
        f"browse every run: squall serve --store {tmp_path.parent.parent}",
    ]


def test_junit_names_the_allowed_losses_with_counts() -> None:
    suite = ElementTree.fromstring(render_junit(ACKS1, suite="demo-acks1", run_dir="/s/d/1"))
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["acknowledged_lost"] == "761"
    assert properties["allowed_lost"] == "761"
    assert properties["allowed_anomalies"] == (
        "at-least-once-violation 761, lost-write 761, unseen 761"
    )
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    lost = cases["acknowledged writes lost"]
    assert lost.find("failure") is None  # allowed: it passes, and says so
    assert "761 acknowledged writes lost, every one allowed" in (lost.findtext("system-out") or "")
    said = cases["delivery"].findtext("system-out") or ""
    assert "lost-write 761 (sent with acks=1)" in said and "unseen 761" in said
    assert suite.get("failures") == "0"


def test_junit_fails_the_writes_lost_that_are_not_allowed() -> None:
    invalid = json.loads(json.dumps(ACKS1))
    invalid["valid"] = False
    invalid["summary"]["allowed_lost"] = 700
    suite = ElementTree.fromstring(render_junit(invalid, suite="t"))
    case = next(c for c in suite.iter("testcase") if c.get("name") == "acknowledged writes lost")
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == (
        "761 acknowledged writes lost (700 of them allowed); 61 of them the configuration "
        "does not allow"
    )


def test_the_html_report_leads_with_the_writes_lost_per_key() -> None:
    page = render_html(ACKS1, test={"name": "demo-acks1"})
    lost = page.index("761 acknowledged writes lost, each counted once")
    assert lost < page.index("<h2 id='checkers'>")
    assert f"<td>{KEY}</td><td>761</td><td>761</td>" in page


def test_a_case_s_cause_is_shown_beside_it_where_results_give_one() -> None:
    caused = json.loads(json.dumps(ACKS1))
    because = "n3 truncated squall-queue-0 from 3833 to 3788 at 81.9 s"
    caused["checkers"]["delivery"]["expected"]["lost-write"][0]["cause"] = {"text": because}
    console = Console(record=True, width=200)
    print_results(caused, console=console)
    assert f"cause: {because}" in console.export_text()
    page = render_html(caused)
    assert f"<p class='cause'><strong>Cause:</strong> {because}</p>" in page
    assert "<span class='cause'>cause: the cause above</span>" in page
