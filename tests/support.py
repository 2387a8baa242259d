"""Helpers every kind of test uses: waiting for a condition, running the `squall` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from system_under_test.client.exceptions import ClientError
from system_under_test.errors import BrokerError

REPO = Path(__file__).resolve().parents[1]
TRANSIENT: tuple[type[BaseException], ...] = (ClientError, BrokerError, OSError)
"""Errors a condition may raise while a cluster settles: retried, and named on timeout."""
QUICK_DETECTORS = {
    "zookeeper.session.timeout.ms": "3000",
    "zookeeper.connection.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "default.replication.factor": "3",
}
"""Broker settings of a 3-broker test cluster whose failures are noticed within 3 s."""


def wait_for(
    condition: Callable[[], Any],
    timeout: float = 30.0,
    what: str = "condition",
    *,
    interval: float = 0.1,
    tolerate: tuple[type[BaseException], ...] = TRANSIENT,
) -> Any:
    """Poll until condition() is truthy and return its value; AssertionError naming `what`
    (and the last tolerated error) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except tolerate as err:
            last_error = err
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what} (last error: {last_error})"
    )


def run_squall(
    *args: str,
    cwd: Path | None = None,
    home: Path | None = None,
    stdin: str | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m squall ARGS` as a user runs it, in `env` (default: this process's);
    `home` sets SQUALL_HOME (cluster state)."""
    env = dict(os.environ if env is None else env)
    if home is not None:
        env["SQUALL_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "squall", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
