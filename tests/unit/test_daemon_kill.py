"""A crash of a paused process: it dies without running again."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from squall.cluster.local import LocalNode
from squall.cluster.node import DaemonSpec
from squall.cluster.services import Daemon

WAKES_THEN_SLEEPS = (
    "import pathlib, signal, sys, time\n"
    "marker = pathlib.Path(sys.argv[1])\n"
    "signal.signal(signal.SIGCONT, lambda *_: marker.write_text('ran after the pause'))\n"
    "pathlib.Path(sys.argv[2]).write_text('up')\n"
    "while True:\n"
    "    time.sleep(0.01)\n"
)


def test_a_paused_daemon_killed_never_runs_again(tmp_path: Path) -> None:
    node = LocalNode("n1", "127.0.0.1", tmp_path)
    daemon = Daemon(node, str(tmp_path), "sleeper")
    script, marker, up = tmp_path / "sleeper.py", tmp_path / "woke", tmp_path / "up"
    script.write_text(WAKES_THEN_SLEEPS)
    (tmp_path / "run").mkdir()
    (tmp_path / "logs").mkdir()
    node.start_daemon(
        DaemonSpec(
            "sleeper",
            [sys.executable, str(script), str(marker), str(up)],
            daemon.pidfile,
            daemon.logfile,
        )
    )
    deadline = time.monotonic() + 30
    while not up.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert up.exists(), "the daemon did not start"
    assert daemon.pause()
    assert daemon.kill()
    assert not daemon.is_running()
    assert not marker.exists(), "the paused daemon ran again before it died"
