"""A SparkSession shared by every checker test: local[2], two shuffle partitions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from checkers.session import SparkSettings, get_spark, stop_spark

TEST_SPARK = SparkSettings(
    master="local[2]",
    shuffle_partitions=2,
    driver_memory="2g",
    java_options="-XX:TieredStopAtLevel=1",  # short-lived: skip the slow optimising JIT
    # Tiny data: adaptive execution only adds a job per stage.
    extra={"spark.sql.adaptive.enabled": "false"},
)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    stop_spark()  # a session another test left (a real run checks with local[*])
    session = get_spark(TEST_SPARK)
    yield session
    stop_spark()
