"""Failures that leave faults half done: a fault applied on some nodes and not on others,
a heal that failed somewhere. Each carries the faults as far as they went."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nemesis.errors import NemesisError
from nemesis.fault import Fault


class FaultApplicationError(NemesisError):
    """A fault was applied on some nodes and failed on others.

    ``applied`` is the resolved fault as far as it went, with an ``error`` entry in its value;
    record it in the history like any other nemesis operation, since some nodes may be hit.
    """

    def __init__(self, applied: Fault, failures: Mapping[str, BaseException]) -> None:
        lines = "; ".join(f"{node}: {err}" for node, err in sorted(failures.items()))
        super().__init__(f"{applied.f} failed on {len(failures)} node(s): {lines}")
        self.applied = applied
        self.failures = dict(failures)


class HealError(NemesisError):
    """Healing failed somewhere; every node was still tried. ``done`` holds what did work."""

    def __init__(self, failures: Sequence[str], done: Sequence[Fault]) -> None:
        listing = "\n  ".join(failures)
        super().__init__(
            f"healing failed in {len(failures)} place(s); the cluster may still be faulty "
            f"(run `squall clean` to tear it down):\n  {listing}"
        )
        self.failures = list(failures)
        self.done = list(done)
