"""What of a test's nemesis settings took part in its run, for the report's Configuration
section: test.json records every setting of the spec, also those of a way of scheduling
faults the run did not use, and those of kinds of fault it never applied."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

KINDS_SCHEDULE = ("faults", "interval_s", "duration_s", "allow_overlap")
"""Settings of the weighted-kinds schedule (a fault every interval, healed after a
duration); a generator lays faults out its own way."""
BY_FAULT = {
    "shapes": "start-partition",
    "partition_among": "start-partition",
    "netem": "start-netem",
}
"""Settings that shape one kind of fault: in force only when that fault was applied."""


def nemesis_as_run(
    nemesis: Mapping[str, Any], applied: Collection[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """test.json's `nemesis` split into the settings that took part in the run and the ones
    that did not; `applied`: the `f` of every nemesis operation of the history."""
    unused: set[str] = set()
    if nemesis.get("generator") is not None:
        unused.update(KINDS_SCHEDULE)
    else:
        weights = nemesis.get("faults")
        if isinstance(weights, Mapping):
            ran = {kind: weight for kind, weight in weights.items() if weight}
            if ran != dict(weights):
                unused.add("faults")  # shown below with only the kinds that had a weight
    unused.update(name for name, fault in BY_FAULT.items() if fault not in applied)
    targets = nemesis.get("targets")
    if not targets:
        unused.add("targets")
    used = {name: value for name, value in nemesis.items() if name not in unused}
    if "faults" in unused and nemesis.get("generator") is None:
        used["faults"] = {k: w for k, w in (nemesis.get("faults") or {}).items() if w}
    return used, {name: nemesis[name] for name in sorted(unused) if name in nemesis}
