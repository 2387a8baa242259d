"""A run's own log, ``run.log`` in its run directory (as Jepsen keeps ``jepsen.log``): what
squall, the workload and the queue's client say while the run lasts (connection drops,
consumer resets, why a run ended without a verdict), kept rather than printed.

While it is attached, every record of squall's own packages at INFO or above, and any
other library's warnings, go to the file and not to the terminal: Python prints records
through its last-resort handler only when no handler is configured.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

RUN_LOG = "run.log"
OWN_LOGGERS = ("squall", "workloads", "nemesis", "checkers", "histories", "system_under_test")
"""The packages whose INFO records go to run.log (others' from WARNING on)."""
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s"


@contextlib.contextmanager
def run_log(run_dir: Path) -> Iterator[Path]:
    """Send log records to ``run_dir/run.log`` (appended) while the block runs."""
    path = run_dir / RUN_LOG
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    own = [logging.getLogger(name) for name in OWN_LOGGERS]
    levels = [logger.level for logger in own]
    for logger in own:
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()
        for logger, level in zip(own, levels, strict=True):
            logger.setLevel(level)
