"""Checking a history: load it, build the evidence once, compose the registered checkers
(`checkers.registry`) on one SparkSession, assemble results.json.

    results = check_history("store/latest", config=CheckConfig(sample=5))

Malformed histories raise the `histories` errors (`HistoryFormatError` names the file and
line); a path without a history raises `HistoryNotFoundError`; a malformed test.json
`TestConfigError`; Spark that cannot start `SparkUnavailableError`.

Every check of a process shares one SparkSession (`checkers.session.get_spark`): a
campaign's or a hunt's checks start Spark once; `stop_spark` ends it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession

from checkers.causes import explain_samples
from checkers.checker import CheckContext, Checker
from checkers.config import CheckConfig, TestSettings, find_test_settings
from checkers.disk_faults import disk_faults
from checkers.events import collect_events
from checkers.evidence import Evidence
from checkers.fault_intervals import fault_intervals
from checkers.key_pass import KeyCheck, key_pass, pass_partitions, shared_facts
from checkers.load import HistoryLocation, LoadedHistory, load_history, locate_history
from checkers.losses import LossRules
from checkers.power_losses import power_losses
from checkers.registry import REGISTRY, compose
from checkers.results import assemble_results, collect_findings
from checkers.session import (
    SparkSettings,
    cancel_jobs,
    connect_running,
    get_spark,
    session_running,
    spark_settings,
)
from checkers.stats import DATA_FS, history_stats
from checkers.unclean import unclean_lost_frame


def check_history(
    path: str | os.PathLike[str],
    *,
    spark_master: str | None = None,
    spark_remote: str | None = None,
    config: CheckConfig | None = None,
    checkers: Iterable[Checker] | None = None,
) -> dict[str, Any]:
    """Check the history at `path` (run directory, history.jsonl, history.parquet, .edn)
    with `checkers`, by default the registered ones, on the running SparkSession, else one
    on `spark_master` (default local[*]) or the Spark Connect server `spark_remote`."""
    config = config or CheckConfig()
    settings = spark_settings(spark_master, spark_remote)
    if spark_remote is not None or (settings is None and connect_running()):
        path = os.path.abspath(path)  # the server resolves a relative path against its own
    started = time.monotonic()
    location = locate_history(path)
    tested = config.test if config.test is not None else find_test_settings(location.run_dir)
    loaded = load_history(
        lambda: get_spark(_sized(settings, location)),
        path,
        loader=config.loader,
    )
    spark = get_spark()
    loaded_at = time.monotonic()
    results = check_loaded(spark, loaded, tested, config, checkers=checkers)
    results["history"]["seconds"] = {
        "load": round(loaded_at - started, 3),
        "check": round(time.monotonic() - loaded_at, 3),
    }
    return results


SHORT_LIVED_BYTES = 256 << 20
"""A history smaller than this (about a million lines of JSON) is checked by a local JVM that
compiles quickly rather than well (`SparkSettings.short_lived`)."""


def _sized(settings: SparkSettings | None, location: HistoryLocation) -> SparkSettings | None:
    """The settings of a session for the history at `location`: a local one started now for
    a small history is short-lived. None where a running session serves as it is."""
    if settings is None:
        if session_running():
            return None
        settings = SparkSettings()
    if settings.remote is not None or _history_bytes(location) >= SHORT_LIVED_BYTES:
        return settings
    return replace(settings, short_lived=True)


def _history_bytes(location: HistoryLocation) -> int:
    """The size of the history's source, or of its Parquet tables."""
    if location.source is not None and location.source.is_file():
        return location.source.stat().st_size
    return sum(f.stat().st_size for f in location.parquet.rglob("*") if f.is_file())


def check_loaded(
    spark: SparkSession,
    loaded: LoadedHistory,
    settings: TestSettings,
    config: CheckConfig,
    *,
    checkers: Iterable[Checker] | None = None,
) -> dict[str, Any]:
    """Run `checkers` (by default the registered ones) over loaded tables and assemble
    results.json; their sections follow their order."""
    evidence = Evidence(loaded.ops, loaded.mops)
    rules = LossRules(settings, config.expect_loss)
    chosen = tuple(REGISTRY if checkers is None else checkers)
    per_key = [checker for checker in chosen if isinstance(checker, KeyCheck)]
    small = _history_bytes(loaded.location) < SHORT_LIVED_BYTES
    # On a small history a job waits more than it computes: the shared facts, the events
    # and the statistics are asked for side by side, and the statistics run beside the
    # pass. On a large one all compute, and compete (measured at 10M lines, 69 s side by
    # side against 65 s one after the other): the statistics then run after the pass, on a
    # JVM it has warmed (10M lines: 10.6 s after it, 12.1 s before).
    pool = ThreadPoolExecutor(max_workers=2 if small else 1, thread_name_prefix="squall-check")
    try:
        shared_done = pool.submit(shared_facts, loaded.ops, loaded.mops, loaded.assign)
        events = collect_events(loaded.events)
        rules = replace(
            rules,
            power_losses=power_losses(events.nemesis, settings.brokers),
            disk_faults=disk_faults(events.nemesis, settings.brokers),
        )

        def statistics() -> dict[str, Any]:
            return history_stats(
                spark,
                loaded.ops,
                events.nemesis,
                window_s=config.stats_window_s,
                replication=events.replication,
                mops=loaded.mops,
                min_isr=settings.min_insync_replicas if settings.acks == -1 else None,
            )

        stats_done = pool.submit(statistics) if small else None
        found = key_pass(
            loaded.ops,
            loaded.mops,
            loaded.assign,
            shared_done.result(),
            events.replication,
            rules,
            per_key,
            config.sample,
            partitions=None if small else pass_partitions(spark),
        )
        stats = statistics() if stats_done is None else stats_done.result()
    except BaseException:
        cancel_jobs(spark)  # the other threads' too, rather than wait for them
        raise
    finally:
        pool.shutdown(cancel_futures=True)
    has_ok = any(stats["by_f"].get(f, {}).get("ok", 0) for f in DATA_FS)
    try:
        context = CheckContext(
            evidence=evidence,
            assign=loaded.assign,
            events=loaded.events,
            losses=rules,
            unclean_lost=unclean_lost_frame(spark, found),
            elections=events.elections,
            config=config,
            key_findings=found,
            nemesis=events.nemesis,
            replication=events.replication,
        )
        reports = compose(chosen, context)
        collected = collect_findings(
            [item for report in reports for item in report.findings], config.sample
        )
        explain_samples(
            collected,
            events.replication,
            settings.brokers,
            fault_intervals(events.nemesis)[0],
            settings.event_tolerance_ns,
        )
    finally:
        evidence.release()
    notes = list(loaded.notes)
    if settings.source is None and config.test is None:
        notes.append(
            "no test.json beside the history: the configuration promised nothing, so "
            "lost-acked-write is not judged and only losses of writes marked acks=0/1 (or "
            "declared with --expect-loss) are expected"
        )
    return assemble_results(
        reports,
        collected,
        has_ok=has_ok,
        stats=stats,
        config={
            "test": settings.as_dict(),
            "expect_loss": sorted(config.expect_loss),
            "allowances": rules.describe(),
            "sample": config.sample,
        },
        history=loaded.describe(),
        notes=notes,
    )
