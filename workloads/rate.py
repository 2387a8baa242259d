"""RateLimiter: spreads operations of several threads at a target total rate.

Like Jepsen's `stagger`, the gaps between operations are random with the target mean
(uniform in [0, 2/rate)), so operations do not march in lockstep with faults. Slots are
handed out from one shared schedule; a worker that falls behind does not earn a burst.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable


class RateLimiter:
    """Hands out time slots at `rate` per second over all callers (None: no limit)."""

    def __init__(
        self,
        rate: float | None,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate is not None and not rate > 0:
            raise ValueError(f"rate is {rate!r}, expected a number > 0 or None (no limit)")
        self.rate = rate
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock
        self._lock = threading.Lock()
        self._next = clock()

    def reserve(self) -> float:
        """Claim the next slot; the clock time at which it begins."""
        now = self._clock()
        if self.rate is None:
            return now
        with self._lock:
            slot = max(now, self._next)
            self._next = slot + 2.0 * self._rng.random() / self.rate
        return slot

    def acquire(self, stop: threading.Event) -> bool:
        """Wait for the next slot; False (at once) if `stop` is set before it comes."""
        slot = self.reserve()
        delay = slot - self._clock()
        if delay > 0:
            return not stop.wait(delay)
        return not stop.is_set()
