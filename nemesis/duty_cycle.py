"""A process slowed, not stopped: its daemon paused and resumed in a duty cycle.

A follower whose process runs only part of the time keeps its ZooKeeper session and, within
the lag time, its place in the ISR, but fetches late: records sit on its leader (and, after
a leader change, on a new leader) longer than they would, and an old leader's answers come
after a new leader's. The kernel here has no ``sch_netem``, so delay is made where every
runtime can make it: SIGSTOP for ``stopped_ms``, SIGCONT for ``running_ms``, again and
again, until healed (healing leaves the process running; ``heal_all`` resumes every daemon).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from nemesis.errors import ClusterError, FaultError
from nemesis.protocols import Daemons

DEFAULT_STOPPED_MS = 200.0
DEFAULT_RUNNING_MS = 100.0


@dataclass(frozen=True)
class DutyCycleSpec:
    """How long the process is stopped, then running, in each cycle."""

    stopped_ms: float = DEFAULT_STOPPED_MS
    running_ms: float = DEFAULT_RUNNING_MS

    def __post_init__(self) -> None:
        for name in ("stopped_ms", "running_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise FaultError(f"start-slow: {name} must be milliseconds, got {value!r}")
            if not math.isfinite(value) or not 10 <= value <= 10_000:
                raise FaultError(
                    f"start-slow: {name} must be between 10 and 10000 ms, got {value!r}"
                )

    def to_value(self) -> dict[str, float]:
        return {"stopped_ms": float(self.stopped_ms), "running_ms": float(self.running_ms)}

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> DutyCycleSpec:
        return cls(
            value.get("stopped_ms", DEFAULT_STOPPED_MS),
            value.get("running_ms", DEFAULT_RUNNING_MS),
        )


class DutyCycle:
    """Pauses and resumes one node's daemon in a thread until ``stop``.

    ``held()`` names the nodes another fault keeps paused or frozen: those are neither paused
    nor resumed by the cycle; ``lock`` is held around each signal so that such a fault and the
    cycle never interleave.
    """

    def __init__(
        self,
        daemons: Daemons,
        node: str,
        spec: DutyCycleSpec,
        *,
        lock: threading.Lock,
        held: Callable[[], Collection[str]],
    ) -> None:
        self.daemons = daemons
        self.node = node
        self.spec = spec
        self.cycles = 0
        self.errors = 0
        self._lock = lock
        self._held = held
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"slow-{node}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """End the cycle and leave the process running (unless another fault holds it)."""
        self._stop.set()
        self._thread.join(timeout_s)
        self._signal(self.daemons.resume)

    def _signal(self, action: Callable[[str], bool]) -> None:
        with self._lock:
            if self.node in self._held():
                return
            try:
                action(self.node)
            except (ClusterError, OSError):
                self.errors += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self._signal(self.daemons.pause)
            self._stop.wait(self.spec.stopped_ms / 1000)
            self._signal(self.daemons.resume)
            self.cycles += 1
            self._stop.wait(self.spec.running_ms / 1000)
