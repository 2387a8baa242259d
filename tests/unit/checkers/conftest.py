"""A SparkSession shared by every checker test: local[2], two shuffle partitions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from checkers.session import stop_spark
from tests.spark_session import shared_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = shared_spark()  # the verdict runs' session, if they ran before
    yield session
    stop_spark()
