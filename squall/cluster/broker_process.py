"""A broker of the system under test as a process on this machine.

It is the broker service of ``squall.cluster.services`` (the one launcher) on a
``LocalNode`` rooted at ``data_dir``, for the console tools, the integration tests and the
benches: the same configuration file, command line and readiness check as on a cluster node.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from squall.cluster.local import LocalNode
from squall.cluster.services import BrokerService, ServiceError
from squall.cluster.zookeeper_server import free_port


class BrokerStartError(RuntimeError):
    """The broker process exited or did not listen in time."""


class BrokerProcess:
    """``python -m system_under_test broker`` on this machine, standalone unless the settings
    name ``zookeeper.connect`` and ``standalone`` is False."""

    def __init__(
        self,
        data_dir: Path,
        *,
        broker_id: int = 0,
        host: str = "127.0.0.1",
        port: int | None = None,
        settings: Mapping[str, object] | None = None,
        standalone: bool = True,
        python: str = sys.executable,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.broker_id = broker_id
        self.host = host
        self.port = port or free_port(host)
        options = dict(settings or {})
        zookeeper_connect = options.pop("zookeeper.connect", None)
        if not standalone and zookeeper_connect is None:
            raise ValueError("a broker with a controller needs zookeeper.connect in its settings")
        self.service = BrokerService(
            LocalNode(f"broker-{broker_id}", host, self.data_dir),
            broker_id=broker_id,
            zookeeper_connect=None if standalone else str(zookeeper_connect),
            root=str(self.data_dir),
            python=python,
            port=self.port,
            settings=options,
        )
        self._installed = False

    @property
    def bootstrap(self) -> str:
        return self.service.bootstrap

    @property
    def zookeeper_connect(self) -> str | None:
        """Where the broker finds ZooKeeper; None when it runs standalone."""
        return self.service.zookeeper_connect

    @property
    def log_path(self) -> Path:
        return Path(self.service.logfile)

    @property
    def event_log(self) -> Path:
        return Path(self.service.event_log)

    @property
    def pid(self) -> int | None:
        try:
            return int(Path(self.service.pidfile).read_text().strip())
        except (OSError, ValueError):
            return None

    def command(self) -> list[str]:
        """The command line that starts this broker."""
        return self.service.command()

    def start(self, timeout: float = 30.0) -> None:
        """Start the process; return once it accepts connections."""
        if self.is_running():
            return
        try:
            if not self._installed:
                # The SUT of the tree this runs from, not whatever the interpreter finds: the
                # broker's PYTHONPATH is its own `sut/` directory.
                self.service.install()
                self._installed = True
            self.service.configure()
            self.service.start(timeout=timeout)
        except ServiceError as err:
            raise BrokerStartError(f"broker {self.broker_id}: {err}") from None

    def is_running(self) -> bool:
        return self.service.is_running()

    def signal(self, signum: int) -> None:
        """Send a signal to the broker process, if it runs."""
        pid = self.pid
        if pid is not None and self.is_running():
            os.kill(pid, signum)

    def kill(self) -> None:
        """SIGKILL, and wait for the process to go."""
        self.service.kill()

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL if it lingers."""
        self.service.stop(timeout=timeout)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
