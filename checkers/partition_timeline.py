"""A key's partition states in order, from its `leader-election` and `isr-change` events
(see `checkers.conformance` for how they are ordered)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from checkers.key_log import ReplicationEvent

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionTimeline:
    """A key's partition states in order: the event that set each (`events`), from when
    each holds (`starts`, nanoseconds, never decreasing), its leader and ISR."""

    events: tuple[ReplicationEvent, ...]
    starts: np.ndarray

    @classmethod
    def of(cls, events: Sequence[ReplicationEvent]) -> PartitionTimeline:
        """The timeline of a key's `leader-election` and `isr-change` events."""
        states = [e for e in events if e.f in ("leader-election", "isr-change")]
        if all(e.leader_epoch is not None for e in states):
            states.sort(key=lambda e: (e.leader_epoch, e.f != "leader-election", e.time, e.index))
        else:
            states.sort(key=lambda e: (e.time, e.index))
        times = np.array([e.time for e in states], dtype=np.int64)
        starts = np.maximum.accumulate(times) if len(times) else times
        return cls(tuple(states), starts)

    def __len__(self) -> int:
        return len(self.events)

    def isr_sizes(self) -> np.ndarray:
        """Each state's ISR size; -1 where the partition had no leader or no known ISR."""
        return np.array(
            [
                -1 if e.isr is None or e.leader is None or e.leader == NO_LEADER else len(e.isr)
                for e in self.events
            ],
            dtype=np.int64,
        )

    def state_at(self, times: np.ndarray) -> np.ndarray:
        """The position of the state holding at each of `times` (-1: before the first)."""
        at: np.ndarray = np.searchsorted(self.starts, times, side="right") - 1
        return at
