"""The one SparkSession every checker shares.

`local[*]` by default, or any master URL (`spark://host:7077`, `yarn`, ...) for a real
cluster, or a Spark Connect server (`sc://host:15002`, `SparkSettings.remote`) that runs the
checks in its own JVM; on a cluster or a server the history's Parquet directory must be on
storage the executors or the server can read. The session is quiet (no UI, no progress
bars, only errors logged) and sized for checking histories: few shuffle partitions and no
adaptive execution locally, adaptive execution on a cluster. A session is started once per
process and reused by every check until `stop_spark`; a master or server that nothing
answers at is reported (`SparkUnavailableError`) within seconds, not after Spark's own
minute-long retries.

Where a run directory is known (`spark_log`, `SparkSettings.log_file`), log4j2 writes the
JVM's warnings and errors to a log file there (`spark.log`) instead of the terminal. The log4j2
configuration is written into the user's cache directory (`private_cache_dir`), never to a
predictable path in a shared temporary directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from checkers.cache_dir import private_cache_dir
from checkers.connect_state import connect_address, renew_session
from checkers.errors import SparkSessionConflictError, SparkUnavailableError
from checkers.jvm_archive import archive_options, record_jvm
from checkers.spark_urls import spark_endpoints

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "4g"
PROBE_TIMEOUT_S = 5.0
"""How long a master or Connect server has to accept a TCP connection."""
ANSWER_TIMEOUT_S = 20.0
"""How long a Connect server that accepted the connection has to answer."""

SPARK_LOG = "spark.log"
"""The name of the Spark log written into a run directory."""

# Both configurations quieten Spark's own startup notice ("Setting default log level to ...",
# which it prints to the terminal, not through log4j2, when the logger of the class that
# starts PySpark's JVM has no level of its own) by giving that logger the root level.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""

_LOG4J2_FILE = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.append = true
appender.file.createOnDemand = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = warn
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""

# Characters a log4j2 properties value would read as an escape, a line end or a lookup.
_UNSAFE_IN_PROPERTIES = re.compile(r"[\\\n\r$]")


def log4j2_config(log_file: Path | None) -> str:
    """The log4j2 configuration: errors to the terminal, or (given a log file whose path a
    properties file can spell) warnings and errors to that file and nothing to the terminal."""
    if log_file is None or _UNSAFE_IN_PROPERTIES.search(str(log_file)):
        return _LOG4J2
    return _LOG4J2_FILE.format(path=log_file)


_lock = threading.Lock()
_LOCAL = re.compile(r"^local(\[(\*|\d+)(,\d+)?\])?$")


@dataclass(frozen=True)
class SparkSettings:
    """How to start the shared session; `None` fields take defaults suited to the master."""

    master: str = DEFAULT_MASTER
    remote: str | None = None
    """A Spark Connect URL (`sc://host:port`): the checks run in that server, whose own
    settings (master, memory, logging) then apply instead of the fields below."""
    shuffle_partitions: int | None = None
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    app_name: str = "squall-check"
    java_options: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    log_file: Path | None = None
    """Where the JVM's warnings and errors go instead of the terminal (default: the log file
    `spark_log` names, if any)."""
    short_lived: bool = False
    """A local session for small histories: its JVM compiles hot code once, quickly (C1),
    rather than again, optimised (C2), which costs a short check more than it saves."""

    @property
    def target(self) -> str:
        """Where the checks run: the Connect URL, else the master."""
        return self.remote or self.master

    @property
    def is_local(self) -> bool:
        return self.remote is None and bool(_LOCAL.match(self.master))

    def local_cores(self) -> int:
        """The cores of a local master: `local` 1, `local[N]` N, `local[*]` the machine's."""
        match = _LOCAL.match(self.master)
        if match is None or match.group(2) == "*":
            return os.cpu_count() or 1
        return 1 if match.group(2) is None else int(match.group(2))

    def conf(self, log_file: Path | None = None) -> dict[str, str]:
        """The Spark configuration this session is started with (logging to `log_file`, or
        to the settings' own)."""
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
                    "-Dlog4j2.configurationFile="
                    + _log4j2_file(log4j2_config(log_file or self.log_file)).as_uri(),
                    # A local master's tasks run in the driver. G1's concurrent threads
                    # compete with them for few cores: measured on 3M lines with local[2],
                    # the parallel collector checks in 70 s instead of 79 s.
                    "-XX:+UseParallelGC" if self.is_local else "",
                    "-XX:TieredStopAtLevel=1" if self.is_local and self.short_lived else "",
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

    def connect_conf(self) -> dict[str, str]:
        """The settings a Spark Connect session sets for itself: the SQL settings results
        depend on (the server sizes the rest)."""
        conf = {
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.requireAllClusterKeysForCoPartition": "false",
        }
        conf.update((k, v) for k, v in self.extra.items() if k.startswith("spark.sql."))
        return conf


def spark_settings(master: str | None = None, remote: str | None = None) -> SparkSettings | None:
    """The settings of a `--spark-master` or a `--spark-remote` (None: neither, whatever
    session runs or the default); ValueError for both, or for a URL that names no host and
    port where it must."""
    if master is not None and remote is not None:
        raise ValueError(
            f"a Spark master ({master}) and a Spark Connect server ({remote}) exclude each "
            "other: give one"
        )
    if remote is not None:
        spark_endpoints(remote)
        return SparkSettings(remote=remote)
    if master is not None:
        spark_endpoints(master)
        return SparkSettings(master=master)
    return None


def probe_spark(settings: SparkSettings, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise `SparkUnavailableError` unless something accepts connections where the settings'
    standalone master or Connect server listens (other masters are not probed). Spark itself
    would retry an absent master for a minute, and a Connect client for ten."""
    url = settings.target
    errors = []
    for host, port in spark_endpoints(url):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as err:
            errors.append(f"{host}:{port}: {err.strerror or err}")
    if not errors:
        return
    why = "; ".join(errors)
    if settings.remote is not None:
        raise SparkUnavailableError(
            f"no Spark Connect server answers at {url} ({why}): start it (`squall spark "
            "start` runs one on this machine), or leave out --spark-remote to check on "
            f"{DEFAULT_MASTER}"
        )
    raise SparkUnavailableError(
        f"no Spark master answers at {url} ({why}): start the master and its workers, or "
        f"leave out --spark-master to check on {DEFAULT_MASTER}"
    )


def is_connect(item: Any) -> bool:
    """Whether a SparkSession or DataFrame is Spark Connect's (no JVM in this process)."""
    return type(item).__module__.startswith("pyspark.sql.connect.")


def cancel_jobs(spark: Any) -> None:
    """Cancel whatever `spark` runs for this process (every thread's jobs); never raises."""
    with suppress(Exception):
        if is_connect(spark):
            spark.interruptAll()
        else:
            spark.sparkContext.cancelAllJobs()


def _log4j2_file(text: str) -> Path:
    """A file holding the log4j2 configuration `text`, in the user's private cache directory
    (named by its content, so concurrent sessions never rewrite each other's); in a new
    private temporary directory when the cache is not safe to use."""
    name = f"log4j2-{hashlib.sha256(text.encode()).hexdigest()[:16]}.properties"
    try:
        directory = private_cache_dir("spark")
    except OSError:
        directory = Path(tempfile.mkdtemp(prefix="squall-spark-"))
    path = directory / name
    try:
        if path.read_text() == text:
            return path
    except OSError:
        pass
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    with os.fdopen(handle, "w") as out:
        out.write(text)
    os.replace(temporary, path)
    return path


_spark_log: ContextVar[Path | None] = ContextVar("squall_spark_log", default=None)
_routing: dict[str, Any] = {"session": None, "log_file": None, "target": None, "env": False}
"""The session squall started, where its JVM logs (None: errors to the terminal), its
master or Connect URL, and whether squall switched pyspark to Spark Connect for it."""

_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
"""Set, pyspark's functions build Spark Connect columns instead of the JVM's."""


@contextmanager
def spark_log(log_file: Path | None) -> Iterator[None]:
    """Within: a session `get_spark` starts, or a running one it started, logs the JVM's
    warnings and errors to `log_file` (a run directory's `spark.log`) instead of the
    terminal. A session started for another log file is switched over to this one."""
    token = _spark_log.set(log_file)
    try:
        yield
    finally:
        _spark_log.reset(token)


def _route_log(session: Any, log_file: Path | None) -> None:
    """Point the running JVM's log4j2 at `log_file`, if squall started it and it logs
    elsewhere."""
    if log_file is None or _routing["session"] is not session:
        return
    if _routing["log_file"] == log_file:
        return
    try:
        jvm = session.sparkContext._jvm
        uri = jvm.java.net.URI(_log4j2_file(log4j2_config(log_file)).as_uri())
        jvm.org.apache.logging.log4j.core.config.Configurator.reconfigure(uri)
    except Exception:  # where warnings go never fails a check (py4j errors)
        return
    _routing["log_file"] = log_file


def get_spark(settings: SparkSettings | None = None) -> Any:
    """The shared SparkSession: the running one if any, else a new one from `settings`.

    A running session is reused as it is when `settings` is None or names its master (or
    Connect URL); asking for another raises `SparkSessionConflictError`. Raises
    `SparkUnavailableError` when Spark cannot start (no Java) or be reached (nothing
    answers at the master or Connect server).
    """
    with _lock:
        try:
            from pyspark.sql import SparkSession
        except ImportError as err:  # pragma: no cover - pyspark is a dependency
            raise SparkUnavailableError(
                f"pyspark cannot be imported ({err}); install squall's dependencies"
            ) from err
        active = _running_session(SparkSession)
        if active is not None:
            running = _target_of(active)
            if settings is not None and settings.target != running:
                raise SparkSessionConflictError(
                    f"a SparkSession on {running} is already running in this process; stop "
                    f"it (checkers.stop_spark()) before asking for {settings.target}"
                )
            if not is_connect(active):
                _route_log(active, (settings and settings.log_file) or _spark_log.get())
            return active
        chosen = settings or SparkSettings()
        probe_spark(chosen)
        if chosen.remote is not None:
            return _connect(chosen)
        log_file = chosen.log_file or _spark_log.get()
        # The per-key pass runs Python workers; the SparkContext reads their interpreter
        # from the environment only (spark.pyspark.python is for spark-submit).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        claim = None
        if chosen.is_local:
            chosen, claim = _with_class_archive(chosen)
        conf = chosen.conf(log_file)  # once: it writes the log4j2 configuration's file
        builder = SparkSession.builder.master(chosen.master)
        for name, value in conf.items():
            builder = builder.config(name, value)
        try:
            _launch_jvm(chosen.master, conf, log_file)
            session = builder.getOrCreate()
        except Exception as err:
            where = f" (Spark's log: {log_file})" if log_file is not None else ""
            raise SparkUnavailableError(
                f"Spark could not start with master {chosen.master}: {_first_line(err)}; "
                "check that Java 17 or newer is installed (java on PATH or JAVA_HOME) and "
                f"that the master URL is reachable{where}"
            ) from err
        if claim is not None:
            record_jvm(claim, _jvm_pid())
        logged = log_file is not None and log4j2_config(log_file) != _LOG4J2
        session.sparkContext.setLogLevel("WARN" if logged else "ERROR")
        _routing.update(
            session=session, log_file=log_file if logged else None, target=chosen.master
        )
        return session


def _with_class_archive(settings: SparkSettings) -> tuple[SparkSettings, Path | None]:
    """`settings` with the JVM options of the class-data archive (`checkers.jvm_archive`),
    and the claim to name the JVM in when it records the archive."""
    try:
        options, claim = archive_options(private_cache_dir("spark", "cds"))
    except OSError:
        return settings, None
    java_options = " ".join(o for o in (settings.java_options, options) if o)
    return replace(settings, java_options=java_options), claim


def _jvm_pid() -> int:
    """The pid of the driver's JVM this process started (0: unknown)."""
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    return int(getattr(process, "pid", 0) or 0)


_JVM_NOTICE = b"WARNING: Using incubator modules"
"""What Spark 4's JVM prints on standard error before log4j2 takes over, on every start."""


def _launch_jvm(master: str, settings: dict[str, str], log_file: Path | None) -> None:
    """Start the driver's JVM for `master` with the Spark configuration `settings`, its
    standard error appended to `log_file`, or, without one, passed on to ours but for its
    start-up notice (`_JVM_NOTICE`): what the JVM prints before log4j2 takes over would
    otherwise land in the terminal (in the middle of the live panel, or before the results
    of `squall check FILE`). Nothing when a JVM runs already."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf().setMaster(master)
    for name, value in settings.items():
        conf.set(name, value)
    if log_file is None:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
        threading.Thread(
            target=_pass_on, args=(gateway.proc.stderr,), name="squall-jvm-stderr", daemon=True
        ).start()
    else:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as jvm_stderr:  # the JVM keeps its own copy of the descriptor
            gateway = launch_gateway(conf, popen_kwargs={"stderr": jvm_stderr})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def _pass_on(stream: IO[bytes]) -> None:
    """Copy the JVM's standard error to ours, line by line, but for its start-up notice."""
    with suppress(OSError, ValueError):
        for line in stream:
            if not line.startswith(_JVM_NOTICE):
                os.write(2, line)


def session_running() -> bool:
    """Whether a session runs that `get_spark()` would return."""
    with _lock:
        from pyspark.sql import SparkSession

        return _running_session(SparkSession) is not None


def connect_running() -> bool:
    """Whether the session squall started in this process is a Spark Connect one."""
    with _lock:
        ours = _routing["session"]
        return ours is not None and is_connect(ours) and _alive(ours)


def _running_session(session_class: Any) -> Any:
    """The session squall started, while it runs; else the active classic session another
    caller started, if any."""
    ours = _routing["session"]
    if ours is not None and _alive(ours):
        return ours
    if ours is not None:
        _forget()
    return None if os.environ.get(_CONNECT_MODE) else session_class.getActiveSession()


def _alive(session: Any) -> bool:
    if is_connect(session):
        return not session.is_stopped
    return getattr(session.sparkContext, "_jsc", None) is not None


def _target_of(session: Any) -> str:
    if session is _routing["session"]:
        return str(_routing["target"])
    return str(session.sparkContext.master)


def import_connect_client() -> None:
    """Import Spark Connect's client now (the first session on a server does otherwise), for
    a caller that times its imports; an import error is left for that session to report."""
    with contextlib.suppress(ImportError):
        import pyspark.sql.connect.session  # noqa: F401  (its client and retries with it)


def _connect(settings: SparkSettings) -> Any:
    """A Spark Connect session on `settings.remote`, which has answered (or
    `SparkUnavailableError` within `ANSWER_TIMEOUT_S`)."""
    url = str(settings.remote)
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as err:
        raise SparkUnavailableError(
            f"the Spark Connect client cannot be imported ({err}); install squall's "
            "dependencies (pyspark[connect]: grpcio, grpcio-status, googleapis-common-protos, "
            "zstandard)"
        ) from err
    switched = _CONNECT_MODE not in os.environ
    os.environ[_CONNECT_MODE] = "1"
    address = connect_address(url)
    session, why = _open(ConnectSession, DefaultPolicy, address, settings)
    if why is not None and "SESSION_CLOSED" in why:  # the shared session was idle too long
        renewed = renew_session(address)
        if renewed is not None:
            session, why = _open(ConnectSession, DefaultPolicy, renewed, settings)
    if why is not None:
        if switched:
            os.environ.pop(_CONNECT_MODE, None)
        raise SparkUnavailableError(
            f"the Spark Connect server at {url} did not answer ({why}); check that it is a "
            "Spark Connect server of Spark 4 (`squall spark status` for squall's own), or "
            f"leave out --spark-remote to check on {DEFAULT_MASTER}"
        )
    _routing.update(session=session, log_file=None, target=url, env=switched)
    return session


def _open(
    builder: Any, policy: Any, address: str, settings: SparkSettings
) -> tuple[Any, str | None]:
    """A Connect session on `address` and, if it did not answer its first request within
    `ANSWER_TIMEOUT_S`, why not (the session is then stopped).

    A session the address names (`;session_id=`) outlives this process: it is not released
    when it stops, so later checks find it, and its Python workers, again."""
    session = builder.builder.remote(address).create()
    if "session_id=" in address:
        session.release_session_on_close = False
    # Spark's default retries a server that does not answer for ten minutes; a server that
    # goes away fails the check within seconds instead.
    session.client.set_retry_policies([policy(max_retries=5, max_backoff=4000)])
    failure: list[BaseException] = []

    def first_contact() -> None:
        try:
            for name, value in settings.connect_conf().items():
                session.conf.set(name, value)
        except BaseException as err:
            failure.append(err)

    contact = threading.Thread(target=first_contact, name="spark-connect-probe", daemon=True)
    started = time.monotonic()
    contact.start()
    contact.join(ANSWER_TIMEOUT_S)
    if not contact.is_alive() and not failure:
        return session, None
    session.release_session_on_close = False  # it cannot be reached to release
    session.stop()
    waited = time.monotonic() - started
    return session, _first_line(failure[0]) if failure else f"no answer in {waited:.0f} s"


def stop_spark() -> None:
    """Stop the shared session, if one is running (of a Connect server, release this
    process's session; the server goes on)."""
    with _lock:
        from pyspark.sql import SparkSession

        active = _running_session(SparkSession)
        if active is not None:
            active.stop()
        _forget()


def _forget() -> None:
    if _routing["env"]:
        os.environ.pop(_CONNECT_MODE, None)
    _routing.update(session=None, log_file=None, target=None, env=False)


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:300]
