"""A campaign's report.html, from run directories the run store makes and the results the
report tests use: one row per case with its verdict, counts and a link to its run's report;
a crashed case says why, from its run.log; the campaign's verdict, interrupted or not."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from histories import HistoryWriter
from squall.campaign import CaseResult, write_campaign_outputs
from squall.campaign_listing import list_campaigns, read_campaign, why_no_verdict
from squall.run_log import run_log
from squall.runner import write_reports
from squall.store import RunDirectory, RunStore
from tests.unit.test_report import RESULTS as INVALID
from tests.unit.test_report import TEST_JSON
from tests.unit.test_report_allowed_losses import ACKS1

VALID: dict[str, Any] = {
    "valid": True,
    "anomaly_types": [],
    "expected_anomaly_types": [],
    "summary": {"acknowledged_lost": 0, "allowed_lost": 0, "keys": {}},
    "checkers": {"delivery": {"valid": True, "anomalies": {}, "counts": {"lost-write": 0}}},
    "stats": {"duration_s": 6.0},
}


def _checked_run(store: RunStore, name: str, results: dict[str, Any]) -> RunDirectory:
    """A run directory as a checked run leaves it: test.json, results.json, the reports."""
    run = store.new_run(name)
    run.write_test({**TEST_JSON, "name": name})
    HistoryWriter(run.history).close()
    run.write_json(run.results, results)
    write_reports(run, results)
    return run


def _crashed_run(store: RunStore, name: str) -> RunDirectory:
    """A run that ended without a verdict: run.log says why, as the runner logs it."""
    run = store.new_run(name)
    with run_log(run.path):
        log = logging.getLogger("squall.runner")
        log.info("run %s of test %s on local", run.path, name)
        log.error("no verdict: %s", "infrastructure failure: <zk1> did not start in 30 s")
    return run


def _case(
    name: str, run: RunDirectory | None, results: dict[str, Any] | None, **kw: Any
) -> CaseResult:
    found = results or {}
    return CaseResult(
        name,
        {"workload/acks": -1 if "safe" in name else 1},
        kw.pop("exit_code", 0 if found.get("valid") is not False else 1),
        found.get("valid", "unknown"),
        list(found.get("anomaly_types", [])),
        str(run.path) if run is not None else None,
        kw.pop("seconds", 61.4),
        expected_anomaly_types=list(found.get("expected_anomaly_types", [])),
        acknowledged_lost=(found.get("summary") or {}).get("acknowledged_lost"),
        allowed_lost=(found.get("summary") or {}).get("allowed_lost"),
        **kw,
    )


@pytest.fixture()
def campaign(tmp_path: Path) -> Path:
    """A campaign of five cases: valid, allowed losses, invalid, crashed, failed to start."""
    root = tmp_path / "store"
    store = RunStore(root)
    results = [
        _case("zoo-safe", _checked_run(store, "zoo-safe", VALID), VALID),
        _case("zoo-acks1", _checked_run(store, "zoo-acks1", ACKS1), ACKS1),
        _case("zoo-invalid", _checked_run(store, "zoo-invalid", INVALID), INVALID),
        _case("zoo-crashed", _crashed_run(store, "zoo-crashed"), None, exit_code=3),
        _case("zoo-never", None, None, exit_code=3, error="SpecError: <b>no inventory</b>"),
    ]
    out_dir = RunStore(root / "campaigns").new_run("zoo").path
    write_campaign_outputs(
        out_dir, "zoo", Path("campaigns/zoo.toml"), "2026-11-27T18:00:00+00:00", 5, results,
        ended=True,
    )  # fmt: skip
    return out_dir


def _rows(page: str) -> list[str]:
    table = page.split("<h2 id='cases'>Cases</h2>", 1)[1]
    return re.findall(r"<tr><td>.*?</tr>", table, flags=re.S)


def test_a_row_per_case_with_verdict_counts_and_a_link_to_its_report(campaign: Path) -> None:
    page = (campaign / "report.html").read_text()
    assert '<h1>campaign zoo: <span class="invalid">INVALID</span></h1>' in page
    assert "5 cases: 1 INVALID, 2 NO VERDICT, 2 VALID" in page
    assert "761 acknowledged writes lost (761 allowed)" in page
    assert "<th>spec file</th><td>campaigns/zoo.toml</td>" in page
    assert "<th>started</th><td>2026-11-27 18:00:00 UTC</td>" in page
    rows = _rows(page)
    assert [re.match(r"<tr><td>([^<]*)</td>", row).group(1) for row in rows] == [  # type: ignore[union-attr]
        "zoo-safe", "zoo-acks1", "zoo-invalid", "zoo-crashed", "zoo-never",
    ]  # fmt: skip
    safe, acks1, invalid = rows[:3]
    assert "workload/acks = -1" in safe and "topic t (2 partitions, RF 3, min.insync 2)" in safe
    assert '<span class="valid">VALID</span>' in safe and "<td>0 / 0</td>" in safe
    assert "<td>761 / 761</td>" in acks1
    assert "allowed: at-least-once-violation 761, lost-write 761, unseen 761" in acks1
    assert '<span class="invalid">INVALID</span>' in invalid and "<td>lost-write 1</td>" in invalid
    assert "<td>61 s</td>" in invalid
    # Every link of a run row leads to a file or directory of the store.
    for row in (safe, acks1, invalid):
        links = re.findall(r"href='([^']*)'", row)
        assert links[0].endswith("/report.html") and links[0].startswith("../../../")
        assert all((campaign / link).exists() for link in links), links
    assert (campaign / re.findall(r"href='([^']*)'", acks1)[0]).parent.parent.name == "zoo-acks1"


def test_a_case_without_a_verdict_says_why(campaign: Path) -> None:
    rows = _rows((campaign / "report.html").read_text())
    crashed, never = rows[3], rows[4]
    assert (
        "NO VERDICT</span><br><span class='cause'>infrastructure failure: &lt;zk1&gt; " in crashed
    )
    links = re.findall(r"href='([^']*)'", crashed)
    assert [link.rsplit("/", 1)[-1] for link in links] == ["run.log", ""]  # no report.html
    assert all((campaign / link).exists() for link in links)
    assert "SpecError: &lt;b&gt;no inventory&lt;/b&gt;" in never and "href" not in never


def test_everything_is_escaped(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = RunStore(root)
    hostile = "<script>alert(1)</script>"
    run = _checked_run(store, "x", {**VALID, "anomaly_types": [hostile]})
    case = _case("x", run, VALID, explanation=hostile)
    case.parameters = {hostile: hostile}
    out_dir = RunStore(root / "campaigns").new_run("x").path
    write_campaign_outputs(out_dir, hostile, Path(hostile), "x", 1, [case], ended=True)
    page = (out_dir / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_the_campaign_verdict_interrupted_unfinished_or_from_an_older_summary(
    campaign: Path,
) -> None:
    summary = json.loads((campaign / "summary.json").read_text())
    valid_only = {**summary, "cases": summary["cases"][:1]}
    (campaign / "summary.json").write_text(json.dumps(valid_only))
    assert read_campaign(campaign).verdict == "UNKNOWN"  # type: ignore[union-attr] # 1 of 5 ran
    (campaign / "summary.json").write_text(json.dumps({**valid_only, "case_count": 1}))
    assert read_campaign(campaign).verdict == "VALID"  # type: ignore[union-attr]
    (campaign / "summary.json").write_text(json.dumps({**valid_only, "interrupted": True}))
    assert read_campaign(campaign).verdict == "INTERRUPTED"  # type: ignore[union-attr]
    (campaign / "summary.json").write_text(json.dumps({**valid_only, "ended": None}))
    running = read_campaign(campaign)
    assert running is not None and running.verdict == "NO VERDICT" and not running.finished
    # A summary.json from before campaigns recorded their times: finished, started from its
    # directory's name.
    older = {"campaign": "zoo", "file": "z.toml", "cases": summary["cases"][:1]}
    (campaign / "summary.json").write_text(json.dumps(older))
    listed = list_campaigns(campaign.parent.parent.parent)
    assert [(c.name, c.verdict) for c in listed] == [("zoo", "VALID")]
    assert listed[0].started == datetime_of(campaign.name)


def datetime_of(stamp: str) -> str:
    return (
        f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}+00:00"
    )


def test_the_reason_is_read_from_run_log(tmp_path: Path) -> None:
    run = _crashed_run(RunStore(tmp_path), "c")
    assert why_no_verdict(run.path) == "infrastructure failure: <zk1> did not start in 30 s"
    assert why_no_verdict(tmp_path) is None


def test_an_interrupted_campaign_reports_what_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C between cases (the runner itself turns one during a case into an interrupted
    run): the cases that ran are reported and the campaign is marked interrupted."""
    import squall.campaign

    root = tmp_path / "store"
    finished = [_case("demo-safe", _checked_run(RunStore(root), "demo-safe", VALID), VALID)]

    def run_case(case: Any, *_args: Any, **_kwargs: Any) -> tuple[CaseResult, bool]:
        if finished:
            return finished.pop(), False
        raise KeyboardInterrupt

    monkeypatch.setattr(squall.campaign, "_run_case", run_case)
    demo = Path(__file__).resolve().parents[2] / "campaigns" / "demo.toml"
    with pytest.raises(KeyboardInterrupt):
        squall.campaign.run_campaign(demo, store=root, overrides={"runtime": "local"})
    (campaign,) = (root / "campaigns" / "demo").glob("2*")
    summary = json.loads((campaign / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["ended"] and summary["case_count"] == 2
    page = (campaign / "report.html").read_text()
    assert '<h1>campaign demo: <span class="unknown">INTERRUPTED</span></h1>' in page
    assert "1 of 2 cases: 1 VALID" in page and "The campaign was interrupted" in page
    assert [row.split("</td>")[0] for row in _rows(page)] == ["<tr><td>demo-safe"]
