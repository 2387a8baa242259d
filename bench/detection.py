"""Detection by configuration: how often and how soon squall finds what the bug zoo's
configurations lose, and whether the safe configuration raises false alarms.

    .venv/bin/python bench/detection.py [--runs 10] [--safe-runs 20] [--time-limit 120]
        [--configs acks1,safe] [--seed N] [--store DIR] [--out FILE] [--campaign FILE]

Runs each configuration of campaigns/bug-zoo.toml (acks0, acks1, unclean, hw-truncation,
safe; or of another campaign, such as campaigns/disks-bench.toml: safe-flush1,
rack-power-loss, misr1, safe) with fresh seeds through squall's TestRunner, in this
process, one run at a time, and prints per configuration:
- runs that found what the configuration exists to show (`FINDS`): losses of its own
  allowance (acks=0/1 losses for acks0/acks1, unclean-loss windows for unclean, an ISR of
  one's losses for misr1, the flush policy's for rack-power-loss), or, for a configuration
  that promises no loss (hw-truncation), an invalid verdict;
- runs found invalid (a false alarm where the configuration exists to show an allowance,
  or an SUT bug: read the run), and runs that detected something (invalid, or any loss the
  configuration allows);
- the median time to first detection (seconds into the run of the earliest anomaly or
  expected loss: the smallest `time` among results.json's samples; for a sample without
  one, the time in history.jsonl of the last operation it names), the anomaly types seen,
  and leader failovers per run (SUT `leader-election` events, without each partition's
  first election and without elections that left a partition offline);
- for the safe configurations: false alarms (runs found invalid), runs with losses the
  configuration allows (the default mix's storage family: acknowledged writes lost with the
  power of every replica that held them, which Kafka's default flush policy allows) and
  availability (`ok` among completed send/poll/txn, from results.json's stats, else from
  the history).
Each run also records its acknowledged and allowed losses (results.json's summary), its
storage faults applied (faults, not nodes), its samples by the allowance their reason names
(`allowed_by`; results.json keeps a sample of each type's cases, so these are samples, not
cases), how many of its scenario runs reached their state (and, by scenario, how many of
its instances did in some attempt, summed over the configuration's runs), and how much of
its fault-free send rate it kept during faults on partitions with a live leader and an ISR
of at least min.insync.replicas (results.json's live rate; the median and the least over
the runs). An acks=0/1 write lost with power reads as an acks loss (the acks allowance is
named first), so acks0/acks1 runs are not told apart from the flush policy's losses.
A run that fails (infrastructure) is counted as a failed run and the bench goes on. One JSON
line per run on stdout, a table at the end, the whole summary in --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from squall.campaign import CampaignError, load_campaign
from squall.hunt import RunReport, fresh_seeds
from squall.spec import TestSpec
from squall.store import RunStore

ZOO = Path(__file__).resolve().parent.parent / "campaigns" / "bug-zoo.toml"
SAFE = "safe"
"""The safe configuration; ``safe-<variant>`` names are safe ones too (no loss may be judged)."""
CLIENT_FS = frozenset({"send", "poll", "txn"})
ALLOWANCES = (
    ("acks", "sent with acks="),
    ("unclean", "unclean-loss window"),
    ("min-isr-1", "(ISR of one, min.insync.replicas=1)"),
    ("flush-policy", "lost with the power of"),
    ("retries", "producer retries"),
)
"""Which allowance an expected case's reason names (``checkers.losses``), first match."""
FINDS: dict[str, str] = {
    "acks0": "acks",
    "acks1": "acks",
    "unclean": "unclean",
    "misr1": "min-isr-1",
    "rack-power-loss": "flush-policy",
}
"""The allowance whose losses a configuration's run must show to count as found (a loss the
default mix's storage faults cause under the flush policy is no finding of misr1, say); an
invalid run of these is no finding but a false alarm or an SUT bug. A configuration not
named here, such as hw-truncation, is found only when invalid."""
STORAGE_FAULTS = frozenset({"power-loss", "corrupt-file", "truncate-file", "rollback"})
INDEX_FIELDS = ("writer", "reader", "op", "election", "commit")
"""Fields of a sample that name a line of the history (results.md: fields of a case)."""


def is_safe(config: str) -> bool:
    """Whether a configuration promises no loss: judged by false alarms, not detections."""
    return config == SAFE or config.startswith(f"{SAFE}-")


@dataclass
class HistoryFacts:
    """What one pass over history.jsonl tells: times of some lines, elections, availability."""

    times_ns: dict[int, int] = field(default_factory=dict)
    leader_elections: int = 0
    failovers: int = 0
    completions: int = 0
    ok: int = 0
    storage_faults: int = 0
    """Storage faults applied without an error (``STORAGE_FAULTS``)."""


def read_history(path: Path, wanted: set[int]) -> HistoryFacts:
    """The times of the lines `wanted`, the SUT's leader elections and failovers, and the
    completions of send/poll/txn, from one pass over the history."""
    facts = HistoryFacts()
    elected: set[str] = set()
    with path.open() as lines:
        for line in lines:
            try:
                op = json.loads(line)
            except ValueError:
                continue  # a torn last line
            if op.get("index") in wanted:
                facts.times_ns[op["index"]] = op["time"]
            if op.get("process") == "nemesis":
                value = op.get("value") or {}
                facts.storage_faults += op.get("f") in STORAGE_FAULTS and not (
                    isinstance(value, dict) and value.get("error")
                )
                continue
            if op.get("process") == "sut":
                if op.get("f") != "leader-election":
                    continue
                facts.leader_elections += 1
                value = op.get("value") or {}
                key, leader = str(value.get("key")), value.get("leader")
                if key in elected and isinstance(leader, int) and leader >= 0:
                    facts.failovers += 1
                elected.add(key)
            elif op.get("f") in CLIENT_FS and op.get("type") in ("ok", "fail", "info"):
                facts.completions += 1
                facts.ok += op["type"] == "ok"
    return facts


def samples(results: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The samples of what made the run detect: anomalies that make it invalid, and losses
    the configuration allows."""
    invalid = set(results.get("anomaly_types") or ())
    expected = set(results.get("expected_anomaly_types") or ())
    for section in (results.get("checkers") or {}).values():
        for part, kinds in (("anomalies", invalid), ("expected", expected)):
            for kind, found in (section.get(part) or {}).items():
                if kind in kinds:
                    yield from (s for s in found if isinstance(s, Mapping))


def sample_indices(sample: Mapping[str, Any]) -> list[int]:
    out = [sample[f] for f in INDEX_FIELDS if isinstance(sample.get(f), int)]
    out += [i for i in sample.get("ops") or () if isinstance(i, int)]
    return out


def first_detection_s(
    found: Iterable[Mapping[str, Any]], times_ns: Mapping[int, int]
) -> float | None:
    """Seconds into the run of the earliest sample: its `time`, else the time of the latest
    history line it names (when its evidence was complete)."""
    earliest: list[float] = []
    for sample in found:
        at = sample.get("time")
        if isinstance(at, int | float) and not isinstance(at, bool):
            earliest.append(at / 1e9)
            continue
        known = [times_ns[i] for i in sample_indices(sample) if i in times_ns]
        if known:  # seen once its last operation completed (the second poll of a skip...)
            earliest.append(max(known) / 1e9)
    return round(min(earliest), 3) if earliest else None


@dataclass
class RunRecord:
    """One run of the bench."""

    config: str
    seed: int
    run_dir: str | None
    verdict: str
    detected: bool
    anomaly_types: list[str]
    expected_anomaly_types: list[str]
    first_detection_s: float | None
    leader_elections: int | None
    failovers: int | None
    availability: float | None
    seconds: float
    error: str | None = None
    acknowledged_lost: int | None = None
    allowed_lost: int | None = None
    allowed_by: dict[str, int] = field(default_factory=dict)
    """Allowed-loss samples by the allowance their reason names (``ALLOWANCES``)."""
    storage_faults: int | None = None
    scenarios_reached: str | None = None
    """Scenario runs that reached their state, of those judged (``reached/judged``)."""
    scenario_instances: dict[str, list[int]] = field(default_factory=dict)
    """By scenario: [instances that reached their state in some attempt, instances judged]."""
    send_kept: float | None = None
    """Acknowledged sends a second per partition with a live leader during faults, as a
    share of the fault-free rate (results.json's ``stats.live_rate.kept.send``)."""
    send_kept_writable: float | None = None
    """The same on partitions whose ISR held at least ``min.insync.replicas``
    (``kept.send_writable``)."""


def run_one(
    config: str, spec: TestSpec, seed: int, store: RunStore, spark_master: str | None
) -> tuple[RunRecord, bool]:
    """Run the configuration once with `seed`; the record, and whether it was interrupted."""
    from squall.runner import TestRunner

    started = time.monotonic()
    try:
        outcome = TestRunner(
            spec.model_copy(update={"seed": seed}), store=store, spark_master=spark_master
        ).run()
    except Exception as err:  # one failed run must not end the bench
        failed = RunReport(seed, None, None, error=f"{type(err).__name__}: {err}")
        return _record(config, failed, None, None, time.monotonic() - started), False
    report = RunReport.of(
        seed,
        str(outcome.run_dir.path),
        outcome.results,
        exit_code=outcome.exit_code,
        seconds=time.monotonic() - started,
        interrupted=outcome.interrupted,
    )
    return _record(config, report, outcome.results, outcome.run_dir.history, report.seconds), (
        outcome.interrupted
    )


def _record(
    config: str,
    report: RunReport,
    results: Mapping[str, Any] | None,
    history: Path | None,
    seconds: float,
) -> RunRecord:
    facts: HistoryFacts | None = None
    found = list(samples(results)) if results else []
    if history is not None and history.exists():
        wanted = {i for s in found if not isinstance(s.get("time"), int) for i in sample_indices(s)}
        facts = read_history(history, wanted)
    stats = (results or {}).get("stats") or {}
    availability = stats.get("availability")
    kept = (stats.get("live_rate") or {}).get("kept") or {}
    if availability is None and facts is not None and facts.completions:
        availability = facts.ok / facts.completions
    return RunRecord(
        config=config,
        seed=report.seed,
        run_dir=report.run_dir,
        verdict=report.verdict,
        detected=report.detected,
        anomaly_types=list(report.anomaly_types),
        expected_anomaly_types=list(report.expected_anomaly_types),
        first_detection_s=first_detection_s(found, facts.times_ns if facts else {})
        if report.detected
        else None,
        leader_elections=facts.leader_elections if facts else None,
        failovers=facts.failovers if facts else None,
        availability=None if availability is None else round(float(availability), 4),
        seconds=round(seconds, 1),
        error=report.error,
        acknowledged_lost=((results or {}).get("summary") or {}).get("acknowledged_lost"),
        allowed_lost=((results or {}).get("summary") or {}).get("allowed_lost"),
        allowed_by=allowed_by(found),
        storage_faults=facts.storage_faults if facts else None,
        scenarios_reached=_reached(results or {}),
        scenario_instances=_instances_reached(results or {}),
        send_kept=kept.get("send"),
        send_kept_writable=kept.get("send_writable"),
    )


def allowed_by(found: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Expected samples among `found` by the allowance their reason names."""
    counts: dict[str, int] = {}
    for sample in found:
        reason = str(sample.get("expected_because") or "")
        kind = next((name for name, words in ALLOWANCES if words in reason), None)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def found_its_bug(config: str, record: RunRecord) -> bool:
    """Whether the run shows what its configuration exists to show (``FINDS``)."""
    target = FINDS.get(config)
    if target is None:
        return record.verdict == "invalid"
    return record.allowed_by.get(target, 0) > 0


def _reached(results: Mapping[str, Any]) -> str | None:
    runs = ((results.get("scenarios") or {}).get("runs")) or []
    judged = [r for r in runs if isinstance(r, Mapping) and r.get("reached") is not None]
    if not judged:
        return None
    return f"{sum(r['reached'] is True for r in judged)}/{len(judged)}"


def _instances_reached(results: Mapping[str, Any]) -> dict[str, list[int]]:
    """By scenario: [instances that reached their state in some attempt, instances judged]."""
    runs = ((results.get("scenarios") or {}).get("runs")) or []
    reached: dict[tuple[str, Any], bool] = {}
    for run in runs:
        if isinstance(run, Mapping) and run.get("reached") is not None:
            key = (str(run.get("scenario")), run.get("instance"))
            reached[key] = reached.get(key, False) or run["reached"] is True
    counts: dict[str, list[int]] = {}
    for (name, _instance), ok in sorted(reached.items(), key=lambda item: str(item[0])):
        counts.setdefault(name, [0, 0])
        counts[name][0] += ok
        counts[name][1] += 1
    return counts


def _median(values: Iterable[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def summarise(config: str, records: list[RunRecord]) -> dict[str, Any]:
    """Per configuration: runs, detections, median time to first detection, types seen,
    failovers; false alarms and availability for the safe one."""
    done = [r for r in records if r.verdict != "failed"]
    detected = [r for r in done if r.detected]
    summary: dict[str, Any] = {
        "config": config,
        "runs": len(records),
        "failed_runs": len(records) - len(done),
        "detected": len(detected),
        "median_first_detection_s": _median(r.first_detection_s for r in detected),
        "anomaly_types_seen": sorted(
            {t for r in done for t in (*r.anomaly_types, *r.expected_anomaly_types)}
        ),
        "median_failovers": _median(r.failovers for r in done),
        "failovers": sum(r.failovers or 0 for r in done),
        "leader_elections": sum(r.leader_elections or 0 for r in done),
    }
    availability = [r.availability for r in done if r.availability is not None]
    summary["availability"] = round(statistics.fmean(availability), 4) if availability else None
    kept = [r.send_kept_writable for r in done if r.send_kept_writable is not None]
    summary["median_send_kept_writable"] = _median(kept)
    summary["min_send_kept_writable"] = min(kept) if kept else None
    instances: dict[str, list[int]] = {}
    for r in done:
        for name, (ok, judged) in r.scenario_instances.items():
            counts = instances.setdefault(name, [0, 0])
            counts[0] += ok
            counts[1] += judged
    summary["scenario_instances_reached"] = dict(sorted(instances.items()))
    summary["found"] = sum(found_its_bug(config, r) for r in done)
    summary["invalid"] = sum(r.verdict == "invalid" for r in done)
    summary["runs_with_isr_of_one_losses"] = sum(r.allowed_by.get("min-isr-1", 0) > 0 for r in done)
    summary["acknowledged_lost"] = sum(r.acknowledged_lost or 0 for r in done)
    summary["allowed_lost"] = sum(r.allowed_lost or 0 for r in done)
    if is_safe(config):
        summary["false_alarms"] = sum(r.verdict == "invalid" for r in done)
        summary["allowed_loss_runs"] = sum(r.verdict == "allowed-losses" for r in done)
    return summary


def table(summaries: list[dict[str, Any]]) -> Table:
    out = Table(
        "config",
        "runs",
        "failed",
        "found",
        "median s",
        "failovers",
        title="detection by configuration",
    )
    out.add_column("types seen", overflow="fold")
    for s in summaries:
        found = (
            f"{s['found']}/{s['runs'] - s['failed_runs']} "
            f"({s['invalid']} invalid, {s['detected']} detected)"
        )
        if "false_alarms" in s:
            availability = "-" if s["availability"] is None else f"{s['availability']:.1%}"
            found = f"{s['false_alarms']} false alarms, {s['allowed_loss_runs']} allowed losses"
            types = f"availability {availability}"
        else:
            types = ", ".join(s["anomaly_types_seen"]) or "-"
        median = s["median_first_detection_s"]
        out.add_row(
            s["config"],
            str(s["runs"]),
            str(s["failed_runs"]),
            found,
            "-" if median is None else f"{median:.1f}",
            "-" if s["median_failovers"] is None else f"{s['median_failovers']:g}/run",
            types,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each unsafe configuration")
    parser.add_argument("--safe-runs", type=int, default=20, help="runs of the safe one")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds of workload")
    parser.add_argument("--configs", help="comma-separated configurations (default: all)")
    parser.add_argument("--campaign", type=Path, default=ZOO, help="the bug zoo campaign file")
    parser.add_argument("--seed", type=int, help="first seed (later ones drawn from it)")
    parser.add_argument("--store", type=Path, default=Path("store"), help="run store")
    parser.add_argument("--spark-master", help="Spark for the checkers (default local[*])")
    parser.add_argument("--out", type=Path, help="JSON summary (default store/bench/...)")
    parser.add_argument(
        "--summarise-only",
        action="store_true",
        help="run nothing: summarise the runs already in --store (<config>/<stamp>/ run dirs)",
    )
    args = parser.parse_args()
    try:
        _name, cases = load_campaign(args.campaign)
    except CampaignError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    configs = {case.spec.name: case.spec for case in cases}
    chosen = args.configs.split(",") if args.configs else list(configs)
    unknown = [c for c in chosen if c not in configs]
    if unknown:
        print(
            f"error: --configs: no configuration {', '.join(unknown)} in {args.campaign}; "
            f"choose among {', '.join(configs)}",
            file=sys.stderr,
        )
        return 2
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out = args.out or args.store / "bench" / f"detection-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    store = RunStore(args.store)
    seeds = fresh_seeds(args.seed)
    records: dict[str, list[RunRecord]] = {name: [] for name in chosen}
    interrupted = False
    started = time.monotonic()
    if args.summarise_only:
        for name in chosen:
            records[name] = [stored_record(name, run) for run in stored_runs(args.store, name)]
        chosen = []
    for name in chosen:
        spec = configs[name].model_copy(update={"time_limit_s": args.time_limit})
        for _ in range(args.safe_runs if is_safe(name) else args.runs):
            try:
                record, interrupted = run_one(name, spec, next(seeds), store, args.spark_master)
            except KeyboardInterrupt:
                interrupted = True
                break
            records[name].append(record)
            print(json.dumps(asdict(record)), flush=True)
            _write(out, args, records, started, interrupted)
            if interrupted:
                break
        if interrupted:
            break
    summaries = _write(out, args, records, started, interrupted)
    console = Console(highlight=False)
    console.width = min(console.width, 80)
    console.print(table(summaries))
    console.print(f"summary: {out}" + (" (interrupted)" if interrupted else ""))
    return 130 if interrupted else 0


def stored_runs(store: Path, config: str) -> list[Path]:
    """The run directories of one configuration in a store, oldest first."""
    return sorted(p for p in (store / config).glob("2*") if p.is_dir())


def stored_record(config: str, run_dir: Path) -> RunRecord:
    """The record of a run already in the store, from its test.json and results.json."""
    test = json.loads((run_dir / "test.json").read_text())
    try:
        results: dict[str, Any] | None = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        results = None
    valid = None if results is None else results.get("valid")
    report = RunReport.of(
        int(test.get("seed") or 0),
        str(run_dir),
        results,
        exit_code=0 if valid is True else 1 if valid is False else 3,
        seconds=0.0,
    )
    return _record(config, report, results, run_dir / "history.jsonl", 0.0)


def _write(
    out: Path,
    args: argparse.Namespace,
    records: dict[str, list[RunRecord]],
    started: float,
    interrupted: bool,
) -> list[dict[str, Any]]:
    summaries = [summarise(name, runs) for name, runs in records.items() if runs]
    doc = {
        "campaign": str(args.campaign),
        "time_limit_s": args.time_limit,
        "runs_per_config": args.runs,
        "safe_runs": args.safe_runs,
        "seconds": round(time.monotonic() - started, 1),
        "interrupted": interrupted,
        "configs": summaries,
        "runs": [asdict(r) for runs in records.values() for r in runs],
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    return summaries


if __name__ == "__main__":
    sys.exit(main())
