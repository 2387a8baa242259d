"""Fault timing drawn around the failure detectors of the cluster under test.

A fault that heals before anything notices it tests nothing: a killed broker counts as dead
only once its ZooKeeper session expires, a follower leaves the ISR only after the replica lag
time. So durations are written in units of those detectors (``"1.5-2.5 session"``) and
turned into seconds with the settings in force, read by the caller from the cluster's own
configuration. Plain seconds (``[4, 8]``, ``"4-8 s"``, ``6``) are accepted too.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nemesis.errors import FaultError

UNITS = ("s", "session", "lag", "fetch", "request", "member")
"""Seconds, or multiples of the session timeout, the replica lag time, the fetch wait, the
clients' request timeout, a consumer-group member's session timeout."""
_SPAN = re.compile(
    r"^\s*(?P<low>\d+(?:\.\d+)?)\s*(?:-\s*(?P<high>\d+(?:\.\d+)?))?\s*(?P<unit>[a-z]*)\s*$"
)


_FIELDS = (
    "session_timeout_s",
    "replica_lag_s",
    "fetch_wait_s",
    "request_timeout_s",
    "member_session_s",
)


@dataclass(frozen=True)
class Detectors:
    """What the cluster under test takes to notice a failure, in seconds."""

    session_timeout_s: float = 6.0
    """How long ZooKeeper keeps a silent broker's session: a dead broker's detection time."""
    replica_lag_s: float = 10.0
    """How long a follower may fall behind before the leader drops it from the ISR."""
    fetch_wait_s: float = 0.5
    """The longest a follower's fetch waits: the pace of replication when idle."""
    request_timeout_s: float = 5.0
    """How long a client waits on a request before giving it up: how long a broker that
    cannot complete a request (an acks=-1 produce its followers do not fetch) holds the
    requests the client pipelined behind it on that connection."""
    member_session_s: float = 10.0
    """How long a group's coordinator waits on a silent member before it rebalances the
    group without it: how long a paused member must sleep to wake up a zombie."""

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise FaultError(f"detectors: {name} must be seconds, got {value!r}")
            if not math.isfinite(value) or value < 0 or (value == 0 and name != "fetch_wait_s"):
                raise FaultError(f"detectors: {name} must be a positive number, got {value!r}")
            object.__setattr__(self, name, float(value))

    def unit(self, name: str) -> float:
        """Seconds in one unit: 1 for ``s``, else the detector's time."""
        return {
            "s": 1.0,
            "session": self.session_timeout_s,
            "lag": self.replica_lag_s,
            "fetch": self.fetch_wait_s,
            "request": self.request_timeout_s,
            "member": self.member_session_s,
        }[name]

    def to_json(self) -> dict[str, float]:
        return {
            "session_timeout_s": self.session_timeout_s,
            "replica_lag_s": self.replica_lag_s,
            "fetch_wait_s": self.fetch_wait_s,
            "request_timeout_s": self.request_timeout_s,
            "member_session_s": self.member_session_s,
        }

    @classmethod
    def from_json(cls, doc: object) -> Detectors:
        if not isinstance(doc, Mapping):
            raise FaultError(f"detectors must be an object, got {doc!r}")
        known = set(_FIELDS)
        unknown = set(doc) - known
        if unknown:
            raise FaultError(f"detectors: unknown keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**{key: doc[key] for key in known if key in doc})


@dataclass(frozen=True)
class Span:
    """A duration range: between ``low`` and ``high`` units (``s``, ``session``, ``lag``...)."""

    low: float
    high: float
    unit: str = "s"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise FaultError(f"duration unit {self.unit!r}: use one of {', '.join(UNITS)}")
        if not (
            math.isfinite(self.low) and math.isfinite(self.high) and 0 <= self.low <= self.high
        ):
            raise FaultError(f"a duration needs 0 <= min <= max, got {self.low}-{self.high}")

    def draw(self, detectors: Detectors, rng: random.Random) -> float:
        """Seconds, drawn uniformly in the range; rounded to milliseconds."""
        return round(rng.uniform(self.low, self.high) * detectors.unit(self.unit), 3)

    def longer_half(self) -> Span:
        """The longer half of the range: still within its bounds, and the longer for it."""
        return Span((self.low + self.high) / 2, self.high, self.unit)

    def to_json(self) -> str:
        bounds = f"{self.low:g}" if self.low == self.high else f"{self.low:g}-{self.high:g}"
        return f"{bounds} {self.unit}"

    @classmethod
    def parse(cls, doc: Any, *, where: str = "duration") -> Span:
        """``6``, ``[4, 8]`` (seconds), ``"4-8 s"``, ``"1.5-2.5 session"``, ``"1.3 lag"``."""
        if isinstance(doc, bool):
            raise FaultError(f"{where}: expected seconds or 'MIN-MAX UNIT', got {doc!r}")
        if isinstance(doc, int | float):
            return cls(float(doc), float(doc))
        if (
            isinstance(doc, list | tuple)
            and len(doc) == 2
            and all(isinstance(b, int | float) and not isinstance(b, bool) for b in doc)
        ):
            return cls(float(doc[0]), float(doc[1]))
        if isinstance(doc, str) and (match := _SPAN.match(doc)):
            low = float(match["low"])
            high = float(match["high"]) if match["high"] else low
            unit = match["unit"] or "s"
            if unit not in UNITS:
                raise FaultError(
                    f"{where}: unit {unit!r} in {doc!r}; use one of {', '.join(UNITS)}"
                )
            return cls(low, high, unit)
        raise FaultError(
            f"{where}: expected seconds (6, [4, 8]) or 'MIN-MAX UNIT' with UNIT one of "
            f"{', '.join(UNITS)} ('1.5-2.5 session'), got {doc!r}"
        )
