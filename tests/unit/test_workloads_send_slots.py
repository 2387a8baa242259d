"""SendSlots: idle clients per partition; a busy or resting partition leaves the others."""

from __future__ import annotations

import random
import threading

from workloads.recorder import Client, ProcessNumbers
from workloads.send_slots import SendSlots


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_partition_whose_clients_are_busy_or_resting_leaves_the_sends_to_the_others() -> None:
    numbers = ProcessNumbers()
    clients = {p: [Client(numbers), Client(numbers)] for p in range(3)}
    clock = Clock()
    slots = SendSlots(clients, clock=clock)
    rng, stop = random.Random(1), threading.Event()
    taken = [slots.take(rng, stop) for _ in range(6)]
    assert all(t is not None for t in taken)
    pairs = [t for t in taken if t is not None]
    assert sorted(p for p, _ in pairs) == [0, 0, 1, 1, 2, 2]
    stop.set()
    assert slots.take(rng, stop) is None  # every client busy
    by_partition = dict(pairs)
    # Partition 0's send failed: its client rests 1 s; partition 1's succeeded.
    slots.give_back(0, by_partition[0], rest_s=1.0)
    slots.give_back(1, by_partition[1])
    stop.clear()
    assert [slots.take(rng, stop)] == [(1, by_partition[1])]
    stop.set()
    assert slots.take(rng, stop) is None and slots.idle(0) == 0
    clock.now += 1.0
    assert slots.take(rng, stop) == (0, by_partition[0])
