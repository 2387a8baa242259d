"""Faults on the workload's consumer-group members: a member paused past its session
timeout (it wakes up a zombie, its partitions given to others meanwhile), crashed, or made
to leave its group cleanly.

The members are the workload's (``nemesis.protocols.GroupMembers``), named ``consumer-0``...;
a fault names them (``members``) or draws ``count`` of them among those running when it
strikes. Each function returns the outcome by member, short words for the history.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from nemesis.errors import TargetError
from nemesis.protocols import GroupMembers

LEAVE_TIMEOUT_S = 15.0
"""How long a member may take to leave its group (a LeaveGroup, then its client closed)."""


def choose(
    members: GroupMembers, count: int, rng: random.Random, *, exclude: Collection[str] = ()
) -> list[str]:
    """``count`` members drawn among those running (fewer if fewer run), ``exclude`` left
    out; TargetError when none is left to draw."""
    candidates = [name for name in members.running() if name not in exclude]
    if not candidates:
        raise TargetError(
            "no consumer-group member is running to fault now"
            + (f" (besides {', '.join(sorted(exclude))})" if exclude else "")
        )
    return sorted(rng.sample(candidates, min(count, len(candidates))))


def pause(members: GroupMembers, names: Sequence[str]) -> dict[str, str]:
    return {n: "paused" if members.pause(n) else "not-running" for n in names}


def resume(members: GroupMembers, names: Sequence[str]) -> dict[str, str]:
    return {n: "resumed" if members.resume(n) else "not-running" for n in names}


def kill(members: GroupMembers, names: Sequence[str]) -> dict[str, str]:
    return {n: "killed" if members.kill(n) else "not-running" for n in names}


def leave(
    members: GroupMembers, names: Sequence[str], *, timeout_s: float = LEAVE_TIMEOUT_S
) -> dict[str, str]:
    return {n: "left" if members.leave(n, timeout_s=timeout_s) else "not-left" for n in names}
