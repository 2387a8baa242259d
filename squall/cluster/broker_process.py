"""A broker of the system under test as a child process on this machine."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from squall.cluster.zookeeper_server import free_port


class BrokerStartError(RuntimeError):
    """The broker process exited or did not listen in time."""


class BrokerProcess:
    """Starts ``python -m system_under_test broker`` and waits until it listens."""

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
        self.data_dir = data_dir
        self.broker_id = broker_id
        self.host = host
        self.port = port or free_port(host)
        self.settings = dict(settings or {})
        self.standalone = standalone
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    def command(self) -> list[str]:
        """The command line that starts this broker."""
        settings: dict[str, object] = {
            "broker.id": self.broker_id,
            "listeners": f"{self.host}:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
        }
        settings.update(self.settings)
        cmd = [self.python, "-m", "system_under_test", "broker"]
        if self.standalone:
            cmd.append("--standalone")
        for key, value in settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 30.0) -> None:
        """Start the process; return once it accepts connections."""
        if self.is_running():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        (self.data_dir / "broker.pid").write_text(f"{self.process.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerStartError(
                    f"broker {self.broker_id} exited with code {self.process.returncode} while "
                    f"starting; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise BrokerStartError(
            f"broker {self.broker_id} did not listen on {self.bootstrap} within {timeout:.0f}s; "
            f"last lines of {self.log_path}:\n{self.log_tail()}"
        )

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def signal(self, signum: int) -> None:
        """Send a signal to the broker process, if it runs."""
        if self.is_running() and self.process is not None:
            os.kill(self.process.pid, signum)

    def kill(self) -> None:
        """SIGKILL, and wait for the process to go."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (a clean shutdown), then SIGKILL if it lingers; the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode

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
