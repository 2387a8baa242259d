"""SendSlots: the idle logical clients of one async producer client, per partition.

An async producer pipelines sends, and each send in flight needs a logical client (a
process of the history) of its own. The clients are kept per partition, as in-flight
limits per partition: sends stuck on one partition's dead or deposed leader hold only that
partition's slots, and the producer keeps sending to the partitions whose leaders answer.
A client whose send failed may be given back to rest a while first, so that a partition
without a leader, whose sends fail at once, does not take the sends the others could make.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from workloads.recorder import Client

_WAKE_S = 0.05


class SendSlots:
    """Idle clients per partition; `take` hands out one of a partition that has any."""

    def __init__(
        self,
        clients: Mapping[int, Sequence[Client]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not clients or not all(clients.values()):
            raise ValueError("every partition needs at least one client")
        self._idle: dict[int, deque[Client]] = {p: deque(c) for p, c in sorted(clients.items())}
        self._resting: list[tuple[float, int, int, Client]] = []
        self._order = itertools.count()
        self._clock = clock
        self._changed = threading.Condition()

    @property
    def partitions(self) -> list[int]:
        return list(self._idle)

    def take(self, rng: random.Random, stop: threading.Event) -> tuple[int, Client] | None:
        """An idle client of a partition drawn uniformly from those that have one, waiting
        until one has; None once `stop` is set while waiting."""
        with self._changed:
            while True:
                wake = self._wake_rested()
                open_partitions = [p for p, idle in self._idle.items() if idle]
                if open_partitions:
                    partition = rng.choice(open_partitions)
                    return partition, self._idle[partition].popleft()
                if stop.is_set():
                    return None
                self._changed.wait(min(_WAKE_S, wake))

    def take_any(self) -> Client | None:
        """Any idle client (of the lowest partition that has one), or None if all are busy."""
        with self._changed:
            for idle in self._idle.values():
                if idle:
                    return idle.popleft()
            if self._resting:
                return heapq.heappop(self._resting)[3]
        return None

    def give_back(self, partition: int, client: Client, *, rest_s: float = 0.0) -> None:
        """`client`'s send to `partition` has its outcome: it may send again, after
        `rest_s` seconds."""
        with self._changed:
            if rest_s > 0:
                ready = self._clock() + rest_s
                heapq.heappush(self._resting, (ready, next(self._order), partition, client))
            else:
                self._idle[partition].append(client)
            self._changed.notify()

    def _wake_rested(self) -> float:
        """Make the clients whose rest is over idle; seconds until the next one's is."""
        now = self._clock()
        while self._resting and self._resting[0][0] <= now:
            _, _, partition, client = heapq.heappop(self._resting)
            self._idle[partition].append(client)
        return self._resting[0][0] - now if self._resting else _WAKE_S

    def idle(self, partition: int) -> int:
        """How many of `partition`'s clients have no send in flight."""
        with self._changed:
            return len(self._idle[partition])
