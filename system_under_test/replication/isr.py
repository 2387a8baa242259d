"""The leader's view of its followers: their log end offsets, lag, and ISR membership.

Kafka 2.x rules: a follower is caught up when a fetch asks for the leader's log end offset
(or for the end the leader had at the follower's previous fetch); it leaves the ISR when it
has not been caught up for ``replica.lag.time.max.ms``. The legacy switch
``replica.lag.max.messages`` (> 0) also removes a follower that many messages behind, which
makes followers shuttle in and out of the ISR under bursts, as in Kafka 0.8. A follower
rejoins when its log end offset reaches the high watermark and, with leader epochs, the
start of the leader's epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class FollowerState:
    """What the leader knows of one follower."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_end_offset: int = 0


class IsrTracker:
    """Tracks followers of one partition led by this broker, and decides ISR changes."""

    def __init__(
        self,
        leader_id: int,
        replicas: Iterable[int],
        isr: Iterable[int],
        *,
        lag_time_max_ms: int,
        lag_max_messages: int,
        now_ms: int,
    ) -> None:
        self.leader_id = leader_id
        self.isr: tuple[int, ...] = tuple(isr)
        self.lag_time_max_ms = lag_time_max_ms
        self.lag_max_messages = lag_max_messages
        self.followers = {
            r: FollowerState(r, last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in replicas
            if r != leader_id
        }

    def on_fetch(
        self, follower: int, fetch_offset: int, leader_end_offset: int, now_ms: int
    ) -> None:
        """A follower fetched from ``fetch_offset``: that is its log end offset."""
        state = self.followers.get(follower)
        if state is None:
            state = self.followers[follower] = FollowerState(follower)
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_end_offset:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_end_offset = leader_end_offset
        state.last_fetch_ms = now_ms

    def high_watermark(self, leader_end_offset: int) -> int:
        """The smallest log end offset over the ISR (the leader's own included)."""
        offsets = [leader_end_offset]
        for replica in self.isr:
            if replica != self.leader_id:
                state = self.followers.get(replica)
                offsets.append(state.log_end_offset if state and state.log_end_offset >= 0 else 0)
        return min(offsets)

    def out_of_sync(self, leader_end_offset: int, now_ms: int) -> list[int]:
        """ISR followers that should leave the ISR now."""
        lagging = []
        for replica in self.isr:
            if replica == self.leader_id:
                continue
            state = self.followers.get(replica)
            if state is None:
                lagging.append(replica)
                continue
            if now_ms - state.last_caught_up_ms > self.lag_time_max_ms or (
                self.lag_max_messages > 0
                and leader_end_offset - max(state.log_end_offset, 0) > self.lag_max_messages
            ):
                lagging.append(replica)
        return lagging

    def ready_to_join(self, follower: int, high_watermark: int, epoch_start_offset: int) -> bool:
        """Whether a follower outside the ISR has caught up enough to rejoin it."""
        if follower in self.isr or follower == self.leader_id:
            return False
        state = self.followers.get(follower)
        if state is None:
            return False
        return state.log_end_offset >= high_watermark and state.log_end_offset >= epoch_start_offset

    def lag_messages(self, follower: int, leader_end_offset: int) -> int:
        state = self.followers.get(follower)
        return leader_end_offset - max(state.log_end_offset, 0) if state else leader_end_offset
