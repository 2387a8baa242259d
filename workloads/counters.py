"""Live counters of a running workload, for a progress display: ops/s and ok/fail/info.

Workers count every invocation and completion; a display thread calls `snapshot()` as often
as it likes. Counting takes one lock and a few integer updates per operation.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

COMPLETION_TYPES = ("ok", "fail", "info")


@dataclass(frozen=True, slots=True)
class CounterSnapshot:
    """The counters at one moment.

    `ops_per_s` is completions per second over the last `window_s` seconds (or since the
    start, if shorter); `mean_ops_per_s` is over the whole run so far, or, once the clock is
    stopped, over the run from its start to the stop (`elapsed_s` then ends there too).
    """

    elapsed_s: float
    invoked: int
    ok: int
    fail: int
    info: int
    ops_per_s: float
    mean_ops_per_s: float
    by_f: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return self.ok + self.fail + self.info

    @property
    def in_flight(self) -> int:
        return self.invoked - self.completed


class WorkloadCounters:
    """Thread-safe counts of invocations and completions, by type and by f."""

    def __init__(
        self, *, window_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s is {window_s}, expected > 0")
        self._clock = clock
        self._window_s = window_s
        self._lock = threading.Lock()
        self._started = clock()
        self._stopped: tuple[float, int] | None = None
        """When the clock stopped, and the completions by then."""
        self._invoked = 0
        self._by_type = dict.fromkeys(COMPLETION_TYPES, 0)
        self._by_f: dict[str, dict[str, int]] = {}
        # Completions per whole second since the start: (second, count), oldest first.
        self._seconds: deque[list[int]] = deque()

    def restart_clock(self) -> None:
        """Measure rates from now on (counts are kept)."""
        with self._lock:
            self._started = self._clock()
            self._stopped = None
            self._seconds.clear()

    def stop_clock(self) -> None:
        """The run is over: its mean rate stays as it is now (later operations, such as the
        final read's, are still counted)."""
        now = self._clock()
        with self._lock:
            self._stopped = (now, sum(self._by_type.values()))

    def invoked(self, f: str) -> None:
        with self._lock:
            self._invoked += 1
            counts = self._by_f.get(f)
            if counts is None:
                counts = self._by_f[f] = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}
            counts["invoke"] += 1

    def completed(self, f: str, op_type: str) -> None:
        now = self._clock()
        with self._lock:
            self._by_type[op_type] += 1
            counts = self._by_f.get(f)
            if counts is None:
                counts = self._by_f[f] = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}
            counts[op_type] += 1
            second = int(now - self._started)
            seconds = self._seconds
            if seconds and seconds[-1][0] == second:
                seconds[-1][1] += 1
            else:
                seconds.append([second, 1])
                horizon = second - int(self._window_s) - 1
                while seconds and seconds[0][0] < horizon:
                    seconds.popleft()

    def snapshot(self) -> CounterSnapshot:
        now = self._clock()
        with self._lock:
            elapsed = max(now - self._started, 1e-9)
            window = min(self._window_s, elapsed)
            # Whole seconds that end inside the window, plus the current partial second.
            since = elapsed - window
            recent = sum(count for second, count in self._seconds if second + 1 > since)
            covered = max(elapsed - max(int(since), 0), 1e-9)
            completed = sum(self._by_type.values())
            run_elapsed, run_completed = elapsed, completed
            if self._stopped is not None:
                run_elapsed = max(self._stopped[0] - self._started, 1e-9)
                run_completed = self._stopped[1]
            return CounterSnapshot(
                elapsed_s=run_elapsed,
                invoked=self._invoked,
                ok=self._by_type["ok"],
                fail=self._by_type["fail"],
                info=self._by_type["info"],
                ops_per_s=recent / covered,
                mean_ops_per_s=run_completed / run_elapsed,
                by_f={f: dict(counts) for f, counts in self._by_f.items()},
            )
