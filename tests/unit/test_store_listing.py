"""``squall runs`` and ``squall serve``: the store listed from each run's test.json and
results.json, and served read-only over HTTP, nothing outside the store."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from squall.cli import app
from squall.serve import make_server
from squall.store_listing import describe_findings, list_runs

runner = CliRunner()


def _run(store: Path, test: str, stamp: str, results: dict | None, **test_doc: object) -> Path:
    path = store / test / stamp
    (path / "nodes").mkdir(parents=True)
    (path / "test.json").write_text(json.dumps({"name": test, **test_doc}))
    if results is not None:
        (path / "results.json").write_text(json.dumps(results))
    return path


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    _run(
        root,
        "queue",
        "20261124T100000",
        {"valid": True, "anomaly_types": [], "stats": {"duration_s": 61.2}},
    )
    invalid = _run(
        root,
        "acks1",
        "20261124T110000",
        {
            "valid": False,
            "anomaly_types": ["lost-write", "unseen"],
            "expected_anomaly_types": [],
            "checkers": {
                "delivery": {"counts": {"lost-write": 3, "unseen": 2, "G1a": 0}},
                "order": {"counts": {"lost-write": 1}},
            },
            "stats": {"duration_s": 120.4},
        },
    )
    (invalid / "report.html").write_text("<html>the report</html>")
    _run(
        root,
        "demo-acks1",
        "20261124T103000",
        {
            "valid": True,
            "anomaly_types": [],
            "expected_anomaly_types": ["lost-write", "unseen"],
            "summary": {"acknowledged_lost": 761, "allowed_lost": 761, "keys": {}},
            "checkers": {
                "delivery": {
                    "counts": {"lost-write": 0, "unseen": 0},
                    "expected_counts": {"lost-write": 761, "unseen": 761},
                }
            },
            "stats": {"duration_s": 60.0},
        },
    )
    _run(root, "queue", "20261124T120000", None, interrupted=True)
    _run(root, "queue", "20261124T130000", None)
    (root / "latest").symlink_to("queue/20261124T130000")
    (root / "queue" / "latest").symlink_to("20261124T130000")
    (root / "campaigns" / "zoo" / "20261124T090000").mkdir(parents=True)
    return root


def test_runs_are_listed_newest_first_with_verdicts_anomalies_and_durations(store: Path) -> None:
    runs = list_runs(store)
    assert [(r.test, r.stamp, r.verdict) for r in runs] == [
        ("queue", "20261124T130000", "NO VERDICT"),
        ("queue", "20261124T120000", "INTERRUPTED"),
        ("acks1", "20261124T110000", "INVALID"),
        ("demo-acks1", "20261124T103000", "VALID"),
        ("queue", "20261124T100000", "VALID"),
    ]
    invalid = runs[2]
    assert invalid.anomalies == {"lost-write": 4, "unseen": 2}
    assert invalid.duration_s == 120.4 and invalid.has_report
    assert invalid.started == "2026-11-24T11:00:00+00:00"
    assert [r.stamp for r in list_runs(store, "queue", limit=2)] == [
        "20261124T130000",
        "20261124T120000",
    ]


def test_allowed_losses_are_listed_with_counts_led_by_the_writes_lost(store: Path) -> None:
    allowed = next(r for r in list_runs(store) if r.test == "demo-acks1")
    assert (allowed.acknowledged_lost, allowed.allowed_lost) == (761, 761)
    assert allowed.expected_counts == {"lost-write": 761, "unseen": 761}
    assert describe_findings(allowed) == (
        "761 acknowledged writes lost (761 allowed); allowed: lost-write 761, unseen 761"
    )
    result = runner.invoke(app, ["runs", "--store", str(store)], env={"COLUMNS": "80"})
    assert "761 acknowledged writes lost" in " ".join(result.output.split())


def test_squall_runs_prints_a_table_or_json_lines(store: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(store)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "INVALID" in result.output and "lost-write 4" in result.output
    assert all(len(line) <= 80 for line in result.output.splitlines())
    result = runner.invoke(app, ["runs", "--store", str(store), "--json", "-n", "1"])
    lines = result.output.splitlines()
    assert result.exit_code == 0 and len(lines) == 1
    assert json.loads(lines[0])["verdict"] == "NO VERDICT"


def test_squall_runs_refuses_a_missing_store_or_test(tmp_path: Path, store: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "not a directory" in result.output
    result = runner.invoke(app, ["runs", "--store", str(store), "--test", "nope"])
    assert result.exit_code == 2 and "no test 'nope'" in result.output


@pytest.fixture()
def served(store: Path) -> Iterator[str]:
    server = make_server(store, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_serve_indexes_the_runs_and_serves_their_files(served: str) -> None:
    status, page = _get(served + "/")
    assert status == 200
    assert page.index("2026-11-24 13:00") < page.index("2026-11-24 11:00")  # newest first
    assert 'href="acks1/20261124T110000/report.html"' in page
    assert "lost-write 4" in page
    assert "761 acknowledged writes lost (761 allowed); allowed: lost-write 761" in page
    assert _get(served + "/acks1/20261124T110000/report.html") == (200, "<html>the report</html>")
    status, _ = _get(served + "/latest/test.json")
    assert status == 200


def test_serve_never_serves_outside_the_store(store: Path, served: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    (store / "queue" / "escape").symlink_to(secret)
    assert _get(served + "/queue/escape")[0] == 404
    assert _get(served + "/../secret.txt")[0] == 404
    assert _get(served + "/%2e%2e/secret.txt")[0] == 404


def test_serve_lists_the_campaigns_and_serves_their_reports(store: Path, served: str) -> None:
    from squall.campaign import CaseResult, write_campaign_outputs

    status, page = _get(served + "/")
    assert status == 200 and "Campaigns" not in page  # a directory without summary.json
    cases = [
        CaseResult("acks1", {"workload/acks": 1}, 1, False, ["lost-write", "unseen"],
                   "elsewhere/acks1/20261124T110000", 120.4),
        CaseResult("demo-acks1", {"workload/acks": 1}, 0, True, [],
                   str(store / "demo-acks1" / "20261124T103000"), 60.0,
                   acknowledged_lost=761, allowed_lost=761),
    ]  # fmt: skip
    campaign = store / "campaigns" / "zoo" / "20261124T090000"
    write_campaign_outputs(
        campaign, "zoo", Path("zoo.toml"), "2026-11-24T09:00:00+00:00", 2, cases, ended=True
    )
    status, page = _get(served + "/")
    assert status == 200
    campaigns, runs = page.split("<h2>Runs</h2>")
    assert "<td>zoo</td><td>2026-11-24 09:00:00</td>" in campaigns
    assert ">INVALID</td><td>2 cases: 1 INVALID, 1 VALID</td>" in campaigns
    assert "761 acknowledged writes lost (761 allowed)" in campaigns
    assert 'href="campaigns/zoo/20261124T090000/report.html"' in campaigns
    assert 'href="acks1/20261124T110000/report.html"' in runs  # the cases are runs too
    status, report = _get(served + "/campaigns/zoo/20261124T090000/report.html")
    assert status == 200 and "<h1>campaign zoo:" in report
    # The campaign report's links to its cases' reports are served (a case's run found in
    # this store however its path was recorded).
    links = re.findall(r"href='(\.\./[^']*report\.html)'", report)
    assert len(links) == 1  # demo-acks1 has no report.html
    base = served + "/campaigns/zoo/20261124T090000/"
    assert _get(urllib.parse.urljoin(base, links[0])) == (200, "<html>the report</html>")
    files = re.findall(r"href='(\.\./[^']*/)'", report)
    assert len(files) == 2 and all(_get(urllib.parse.urljoin(base, f))[0] == 200 for f in files)
