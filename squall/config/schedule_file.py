"""schedule.json as a model: the shape `nemesis.Schedule.to_json` writes and a replay reads.

It describes the file for its JSON Schema and checks a file before the nemesis package
builds the `Schedule` (whose faults check their own values).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field

from nemesis import FAULT_NAMES, FaultError, Schedule
from squall.config.errors import ConfigurationError, validate
from squall.config.fields import ConfigModel, NonNegative, one_of
from squall.config.nemesis_table import NemesisTable

if TYPE_CHECKING:
    FaultName = str
else:
    FaultName = one_of(sorted(FAULT_NAMES))


class ScheduledFaultEntry(ConfigModel):
    """One fault of the schedule and when it strikes."""

    id: int = Field(strict=True)
    """The fault's number in the schedule."""
    at_s: NonNegative
    """Seconds from the start of the schedule."""
    f: FaultName
    """The nemesis operation."""
    value: dict[str, Any] = Field(default_factory=dict)
    """Targets, grudge, netem setting...; as applied, also the resolved nodes and outcome."""
    heals: int | None = Field(default=None, strict=True)
    """The id of the fault this one heals."""
    same_as: int | None = Field(default=None, strict=True)
    """The id of an earlier fault whose nodes this one hits."""
    scenario: str | None = None
    """The scenario the fault belongs to."""
    instance: int | None = Field(default=None, strict=True)
    """Which run of the scenario the fault belongs to (a retried run keeps its number)."""
    variant: str | None = None
    """The way that attempt of the run was laid out (the scenario's variant)."""


class ScheduleDocument(ConfigModel):
    """A fault schedule (``schedule.json``): replayable; once run, with the faults as applied."""

    model_config = ConfigDict(title="Schedule")

    version: Literal[1] = 1
    """The format's version."""
    seed: int | None = Field(default=None, strict=True)
    """The seed the schedule was drawn from."""
    resolved: bool = False
    """Whether the faults are as applied (node names, grudges): a replay hits the same nodes."""
    spec: NemesisTable | None = None
    """How the schedule was drawn."""
    faults: list[ScheduledFaultEntry]
    """The faults, in time order."""
    scenarios: list[dict[str, Any]] = Field(default_factory=list)
    """Each run of a scenario as judged during the test: ``scenario``, ``instance``,
    ``attempt``, ``variant`` (how it was laid out), ``durations`` (``drawn``, or ``longer``:
    from the longer half of their ranges, a run tried again), ``aim`` (the partition and
    its roles when it began), ``started_s``,
    ``ended_s``, ``settled_before``/``settled_after``, ``reached`` (null: cut off by the end
    of the test), ``evidence`` (the SUT events that show it) and ``missing``."""


def schedule_from_json(doc: object, *, source: str) -> Schedule:
    """The schedule in a schedule.json document; ConfigurationError naming `source`."""
    validate(ScheduleDocument, doc, source=source)
    try:
        return Schedule.from_json(doc)
    except FaultError as err:
        raise ConfigurationError(f"{source}: {err}") from None
