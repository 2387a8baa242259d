"""Whether a process still runs, as the checkers' helpers (the Connect server's state, the
class-data archive's claim) need to know of processes they did not start."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def process_runs(pid: int) -> bool:
    """Whether `pid` runs: it exists (another user's counts) and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # the state follows the name, in parentheses
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    return True
