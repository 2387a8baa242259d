"""Faults as data, and the code that applies, schedules, replays and heals them.

A fault is ``Fault(f, value)``, e.g. ``Fault("kill", {"targets": ["leader:t-0"]})``; a
``Nemesis`` applies it to a cluster and returns it as applied (node names, grudge, outcome)
for the history; ``heal_all`` heals any cluster; ``generate_schedule`` and
``ScheduleRunner`` run seeded, replayable schedules of faults.
"""

from nemesis.errors import (
    ClusterError,
    FaultError,
    NemesisError,
    TargetError,
    UnsupportedFaultError,
)
from nemesis.fault import FAULT_NAMES, Fault
from nemesis.grudge import SHAPES, PartitionGrudge, shape_grudge
from nemesis.nemesis import ActiveFaults, Nemesis, heal_all
from nemesis.netem import NetemSpec
from nemesis.partial_failures import FaultApplicationError, HealError
from nemesis.protocols import Capabilities, Daemons, FaultableCluster, Freezer, RoleObserver
from nemesis.schedule import (
    Schedule,
    ScheduledFault,
    ScheduleRunner,
    ScheduleSpec,
    generate_schedule,
    not_applicable,
    replay,
)
from nemesis.targets import ClusterView, PartitionView, parse_target, resolve_targets

__all__ = [
    "FAULT_NAMES",
    "SHAPES",
    "ActiveFaults",
    "Capabilities",
    "ClusterError",
    "ClusterView",
    "Daemons",
    "Fault",
    "FaultApplicationError",
    "FaultError",
    "FaultableCluster",
    "Freezer",
    "HealError",
    "Nemesis",
    "NemesisError",
    "NetemSpec",
    "PartitionGrudge",
    "PartitionView",
    "RoleObserver",
    "Schedule",
    "ScheduleRunner",
    "ScheduleSpec",
    "ScheduledFault",
    "TargetError",
    "UnsupportedFaultError",
    "generate_schedule",
    "heal_all",
    "not_applicable",
    "parse_target",
    "replay",
    "resolve_targets",
    "shape_grudge",
]
