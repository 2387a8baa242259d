"""A real, short campaign on the local runtime (ZooKeeper and three broker processes per
case): `squall campaign` runs both cases, writes the campaign's report.html with a row per
case linking to each run's report, and its output ends by naming that report."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from squall.cli import main
from squall.cluster.cluster import STATE_DIR_ENV

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CAMPAIGN = """
name = "tiny"

[base]
runtime = "local"
nodes = 3
time_limit_s = 5
recovery_wait_s = 1

[base.nemesis]
generator = "none"

[base.workload]
partitions = 1
replication_factor = 3

[[case]]
name = "tiny-acks-all"
"workload/acks" = -1
"workload/topic_config/min.insync.replicas" = "2"

[[case]]
name = "tiny-acks1"
"workload/acks" = 1
"""


def test_a_campaign_writes_its_report_with_a_row_and_a_working_link_per_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / ".squall"))
    monkeypatch.setenv("COLUMNS", "80")
    spec = tmp_path / "tiny.toml"
    spec.write_text(CAMPAIGN)
    store = tmp_path / "store"
    code = main(["campaign", str(spec), "--store", str(store), "--quiet"])
    out = capsys.readouterr().out
    (campaign,) = (store / "campaigns" / "tiny").glob("2*")
    summary = json.loads((campaign / "summary.json").read_text())
    why = out + json.dumps(summary, indent=1)
    assert code == 0, why
    assert summary["ended"] and summary["case_count"] == 2 and not summary["interrupted"], why
    report = campaign / "report.html"
    lines = out.splitlines()
    assert lines[-2:] == [
        f"campaign report: {report}",
        f"browse the campaign's and every run's report: squall serve --store {store}",
    ], why
    page = report.read_text()
    assert '<h1>campaign tiny: <span class="valid">VALID</span></h1>' in page, why
    assert f"<th>spec file</th><td>{spec}</td>" in page
    table = page.split("<h2 id='cases'>Cases</h2>", 1)[1]
    rows = re.findall(r"<tr><td>.*?</tr>", table, flags=re.S)
    assert [re.match(r"<tr><td>([^<]*)</td>", row).group(1) for row in rows] == [  # type: ignore[union-attr]
        "tiny-acks-all",
        "tiny-acks1",
    ]
    for row, case in zip(rows, summary["cases"], strict=True):
        assert '<span class="valid">VALID</span>' in row, row
        assert f"<td>{case['acknowledged_lost']:,} / {case['allowed_lost']:,}</td>" in row, row
        report_link = re.findall(r"href='([^']*)'", row)[0]
        linked = (campaign / report_link).resolve()
        assert linked == (Path(case["run_dir"]) / "report.html").resolve(), row
        assert "<h1>" + case["name"] + ":" in linked.read_text()
        assert waited_to_recover(Path(case["run_dir"]) / "run.log") >= 1.0, row


def waited_to_recover(run_log: Path) -> float:
    """Seconds between the run's recovery phase and its final read, from its run.log: the
    spec's ``recovery_wait_s`` once the workload stopped at its time limit (a regression:
    the schedule's stop at the time limit used to end the wait at once)."""
    stamps: dict[str, datetime] = {}
    for line in run_log.read_text().splitlines():
        for phase in ("phase recover: waiting", "phase final read"):
            if phase in line and phase not in stamps:
                stamps[phase] = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    assert len(stamps) == 2, f"{run_log} lacks a recovery or final-read phase: {stamps}"
    return (stamps["phase final read"] - stamps["phase recover: waiting"]).total_seconds()
