"""SendSlots: the idle logical clients of one async producer client, per partition.

An async producer pipelines sends, and each send in flight needs a logical client (a
process of the history) of its own. The clients are kept per partition, as in-flight
limits per partition: sends stuck on one partition's dead or deposed leader hold only that
partition's slots, and the producer keeps sending to the partitions whose leaders answer.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Mapping, Sequence

from workloads.recorder import Client

_WAKE_S = 0.05


class SendSlots:
    """Idle clients per partition; `take` hands out one of a partition that has any."""

    def __init__(self, clients: Mapping[int, Sequence[Client]]) -> None:
        if not clients or not all(clients.values()):
            raise ValueError("every partition needs at least one client")
        self._idle: dict[int, deque[Client]] = {p: deque(c) for p, c in sorted(clients.items())}
        self._changed = threading.Condition()

    @property
    def partitions(self) -> list[int]:
        return list(self._idle)

    def take(self, rng: random.Random, stop: threading.Event) -> tuple[int, Client] | None:
        """An idle client of a partition drawn uniformly from those that have one, waiting
        until one has; None once `stop` is set while waiting."""
        with self._changed:
            while True:
                open_partitions = [p for p, idle in self._idle.items() if idle]
                if open_partitions:
                    partition = rng.choice(open_partitions)
                    return partition, self._idle[partition].popleft()
                if stop.is_set():
                    return None
                self._changed.wait(_WAKE_S)

    def take_any(self) -> Client | None:
        """Any idle client (of the lowest partition that has one), or None if all are busy."""
        with self._changed:
            for idle in self._idle.values():
                if idle:
                    return idle.popleft()
        return None

    def give_back(self, partition: int, client: Client) -> None:
        """`client`'s send to `partition` has its outcome: it may send again."""
        with self._changed:
            self._idle[partition].append(client)
            self._changed.notify()

    def idle(self, partition: int) -> int:
        """How many of `partition`'s clients have no send in flight."""
        with self._changed:
            return len(self._idle[partition])
