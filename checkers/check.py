"""Checking a history: load it, run every checker on one SparkSession, assemble results.json.

    results = check_history("store/latest", config=CheckConfig(sample=5))

Malformed histories raise the `histories` errors (`HistoryFormatError` names the file and
line); a path without a history raises `HistoryNotFoundError`; a malformed test.json
`TestConfigError`; Spark that cannot start `SparkUnavailableError`.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pyspark.sql import SparkSession

from checkers.config import CheckConfig, TestSettings, find_test_settings
from checkers.consumer_groups import check_consumer_groups, consumption_details
from checkers.delivery import check_delivery, delivery_details
from checkers.evidence import Evidence
from checkers.load import LoadedHistory, load_history, locate_history
from checkers.losses import LossRules
from checkers.offsets import check_offsets
from checkers.order import check_order
from checkers.results import CheckerReport, assemble_results, collect_findings
from checkers.session import SparkSettings, get_spark
from checkers.stats import DATA_FS, history_stats
from checkers.unclean import check_unclean, election_counts, unclean_lost_writes


def check_history(
    path: str | os.PathLike[str],
    *,
    spark_master: str | None = None,
    config: CheckConfig | None = None,
) -> dict[str, Any]:
    """Check the history at `path` (run directory, history.jsonl, history.parquet, .edn)."""
    config = config or CheckConfig()
    settings = None if spark_master is None else SparkSettings(master=spark_master)
    started = time.monotonic()
    location = locate_history(path)
    tested = config.test if config.test is not None else find_test_settings(location.run_dir)
    loaded = load_history(
        lambda: get_spark(settings),
        path,
        loader=config.loader,
    )
    spark = get_spark(settings)
    loaded_at = time.monotonic()
    results = check_loaded(spark, loaded, tested, config)
    results["history"]["seconds"] = {
        "load": round(loaded_at - started, 3),
        "check": round(time.monotonic() - loaded_at, 3),
    }
    return results


def check_loaded(
    spark: SparkSession, loaded: LoadedHistory, settings: TestSettings, config: CheckConfig
) -> dict[str, Any]:
    """Run every checker over loaded tables and assemble results.json."""
    evidence = Evidence(loaded.ops, loaded.mops)
    elections = election_counts(loaded.events)
    try:
        lost = unclean_lost_writes(evidence, loaded.events)
        if not elections["unclean_elections"]:
            lost = lost.limit(0)  # planned as empty: no pass over the reads
        lost_in_windows = evidence.keep("unclean_lost_writes", lambda: lost)
        losses = LossRules(settings, config.expect_loss, lost_in_windows)
        stats = history_stats(spark, loaded.ops, loaded.events, window_s=config.stats_window_s)
        has_ok = any(stats["by_f"].get(f, {}).get("ok", 0) for f in DATA_FS)
        unclean_notes = []
        if elections["unclean_elections"] and settings.unclean_leader_election is False:
            unclean_notes.append(
                f"{elections['unclean_elections']} unclean leader election(s) although "
                "test.json turned unclean leader election off"
            )
        reports = [
            CheckerReport("offsets", check_offsets(evidence, losses)),
            CheckerReport(
                "delivery",
                check_delivery(evidence, losses),
                details=delivery_details(evidence, losses),
            ),
            CheckerReport("order", check_order(evidence, loaded.assign, losses)),
            CheckerReport(
                "consumer_groups",
                check_consumer_groups(evidence, loaded.assign, losses),
                details=consumption_details(evidence, loaded.assign),
            ),
            CheckerReport(
                "unclean",
                check_unclean(lost_in_windows, loaded.events, losses),
                details=elections,
                notes=unclean_notes,
            ),
        ]
        collected = collect_findings(
            [item for report in reports for item in report.findings], config.sample
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
            "allowances": losses.describe(),
            "sample": config.sample,
        },
        history=loaded.describe(),
        notes=notes,
    )
