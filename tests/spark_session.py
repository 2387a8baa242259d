"""The one SparkSession a test session checks in: the checker tests' and the in-process runs'
(tests/verdicts.py), so that Spark's JVM starts once per `pytest`, not once per kind of test."""

from __future__ import annotations

from typing import Any

from checkers.errors import SparkSessionConflictError
from checkers.session import SparkSettings, get_spark, stop_spark

TEST_SPARK = SparkSettings(
    master="local[2]",
    shuffle_partitions=2,
    driver_memory="2g",
    java_options="-XX:TieredStopAtLevel=1",  # short-lived: skip the slow optimising JIT
    # Tiny data: adaptive execution only adds a job per stage.
    extra={"spark.sql.adaptive.enabled": "false"},
)


def shared_spark() -> Any:
    """The running session if it is on TEST_SPARK's master, else a new one on TEST_SPARK
    (a session on another master, such as a real run's local[*], is stopped first)."""
    try:
        return get_spark(TEST_SPARK)
    except SparkSessionConflictError:
        stop_spark()
        return get_spark(TEST_SPARK)
