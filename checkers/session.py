"""The one SparkSession every checker shares.

`local[*]` by default, or any master URL (`spark://host:7077`, `yarn`, ...) for a real
cluster; on a cluster the history's Parquet directory must be on storage the executors
can read. The session is quiet (no UI, no progress bars, only errors logged) and sized for
checking histories: few shuffle partitions and no adaptive execution locally, adaptive
execution on a cluster.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.errors import SparkSessionConflictError, SparkUnavailableError

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""

_lock = threading.Lock()
_LOCAL = re.compile(r"^local(\[(\*|\d+)(,\d+)?\])?$")


@dataclass(frozen=True)
class SparkSettings:
    """How to start the shared session; `None` fields take defaults suited to the master."""

    master: str = DEFAULT_MASTER
    shuffle_partitions: int | None = None
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    app_name: str = "squall-check"
    java_options: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return bool(_LOCAL.match(self.master))

    def local_cores(self) -> int:
        """The cores of a local master: `local` 1, `local[N]` N, `local[*]` the machine's."""
        match = _LOCAL.match(self.master)
        if match is None or match.group(2) == "*":
            return os.cpu_count() or 1
        return 1 if match.group(2) is None else int(match.group(2))

    def conf(self) -> dict[str, str]:
        """The Spark configuration this session is started with."""
        partitions = self.shuffle_partitions
        if partitions is None:
            partitions = 2 * self.local_cores() if self.is_local else 200
        conf = {
            "spark.app.name": self.app_name,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(partitions),
            # Adaptive execution re-plans after every shuffle. On a cluster that pays (it
            # coalesces 200 partitions, and joins by hashing where a side turns out to be
            # small); locally it does not: measured on 3M lines with local[2], the check
            # spends 10% more time and CPU with it.
            "spark.sql.adaptive.enabled": str(not self.is_local).lower(),
            "spark.sql.adaptive.coalescePartitions.enabled": "true",
            # The evidence is partitioned by key once (`checkers.evidence`); a join on
            # (value, key) of two frames partitioned by key then needs no shuffle.
            "spark.sql.requireAllClusterKeysForCoPartition": "false",
            "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": str(256 << 20),
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": self.driver_memory,
            "spark.driver.extraJavaOptions": " ".join(
                option
                for option in (
                    f"-Dlog4j2.configurationFile=file:{_log4j2_file()}",
                    # A local master's tasks run in the driver. G1's concurrent threads
                    # compete with them for few cores: measured on 3M lines with local[2],
                    # the parallel collector checks in 70 s instead of 79 s.
                    "-XX:+UseParallelGC" if self.is_local else "",
                    self.java_options,
                )
                if option
            ),
            # Row groups of our Parquet files are small (about 2 MB); split files finely
            # enough that every core gets a share of each scan.
            "spark.sql.files.maxPartitionBytes": str((16 if self.is_local else 64) << 20),
        }
        if self.is_local:
            # Runtime Bloom filters add a job per filtered join; on few cores they cost more
            # than they save (measured: 3 of 56 jobs, no faster).
            conf["spark.sql.optimizer.runtime.bloomFilter.enabled"] = "false"
            conf["spark.driver.host"] = "127.0.0.1"
            conf["spark.driver.bindAddress"] = "127.0.0.1"
            # Python workers (if any) run on the driver's interpreter, not the first
            # python3 on PATH, whose version may differ.
            conf["spark.pyspark.python"] = sys.executable
        conf.update(self.extra)
        return conf


def _log4j2_file() -> Path:
    """A log4j2 configuration that logs only errors, written once per machine user."""
    path = Path(tempfile.gettempdir()) / f"squall-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(_LOG4J2)
        os.replace(temporary, path)
    return path


def get_spark(settings: SparkSettings | None = None) -> Any:
    """The shared SparkSession: the active one if any, else a new one from `settings`.

    An active session is reused as it is when `settings` is None or names its master;
    asking for another master raises `SparkSessionConflictError`. Raises
    `SparkUnavailableError` when Spark cannot start (no Java, master unreachable).
    """
    with _lock:
        try:
            from pyspark.sql import SparkSession
        except ImportError as err:  # pragma: no cover - pyspark is a dependency
            raise SparkUnavailableError(
                f"pyspark cannot be imported ({err}); install squall's dependencies"
            ) from err
        active = SparkSession.getActiveSession()
        if active is not None:
            running = active.sparkContext.master
            if settings is not None and settings.master != running:
                raise SparkSessionConflictError(
                    f"a SparkSession with master {running} is already running in this "
                    f"process; stop it (checkers.stop_spark()) before asking for {settings.master}"
                )
            return active
        chosen = settings or SparkSettings()
        builder = SparkSession.builder.master(chosen.master)
        for name, value in chosen.conf().items():
            builder = builder.config(name, value)
        try:
            session = builder.getOrCreate()
        except Exception as err:
            raise SparkUnavailableError(
                f"Spark could not start with master {chosen.master}: {_first_line(err)}; "
                "check that Java 17 or newer is installed (java on PATH or JAVA_HOME) and "
                "that the master URL is reachable"
            ) from err
        session.sparkContext.setLogLevel("ERROR")
        return session


def stop_spark() -> None:
    """Stop the shared session, if one is running."""
    with _lock:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:300]
