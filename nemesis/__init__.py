"""Faults as data, and the code that applies, schedules, replays and heals them.

A fault is ``Fault(f, value)``, e.g. ``Fault("kill", {"targets": ["leader:t-0"]})``; a
``Nemesis`` applies it to a cluster and returns it as applied (node names, grudge, outcome)
for the history; ``heal_all`` heals any cluster; ``generate_schedule`` and
``ScheduleRunner`` run seeded, replayable schedules of faults.
"""

from nemesis.errors import (
    FaultApplicationError,
    FaultError,
    HealError,
    NemesisError,
    TargetError,
)
from nemesis.fault import FAULT_NAMES, Fault
from nemesis.grudge import SHAPES, PartitionGrudge, shape_grudge
from nemesis.nemesis import ActiveFaults, Nemesis, heal_all
from nemesis.netem import NetemSpec
from nemesis.process_faults import NodeFreezer
from nemesis.schedule import (
    Schedule,
    ScheduledFault,
    ScheduleRunner,
    ScheduleSpec,
    generate_schedule,
    replay,
)
from nemesis.targets import ClusterView, PartitionView, parse_target, resolve_targets

__all__ = [
    "FAULT_NAMES",
    "SHAPES",
    "ActiveFaults",
    "ClusterView",
    "Fault",
    "FaultApplicationError",
    "FaultError",
    "HealError",
    "Nemesis",
    "NemesisError",
    "NetemSpec",
    "NodeFreezer",
    "PartitionGrudge",
    "PartitionView",
    "Schedule",
    "ScheduleRunner",
    "ScheduleSpec",
    "ScheduledFault",
    "TargetError",
    "generate_schedule",
    "heal_all",
    "parse_target",
    "replay",
    "resolve_targets",
    "shape_grudge",
]
