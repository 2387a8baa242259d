"""The Checker protocol, as Jepsen's: a named check of a history that reports anomalies.

A checker has a `name` (its section of results.json), the anomaly types it can report
(docs/anomalies.md's names), and `check`, which reads the evidence every checker shares from a
`CheckContext` and returns its findings as a `CheckerReport`. It returns frames, not rows:
`check_loaded` collects every checker's findings in one Spark job. Checkers are composed
by `checkers.registry`; adding one is writing a module and registering it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark.sql import DataFrame

from checkers.config import CheckConfig, TestSettings
from checkers.events import NemesisEvent
from checkers.evidence import Evidence
from checkers.key_findings import KeyFindings
from checkers.key_log import ReplicationEvent
from checkers.losses import LossRules
from checkers.results import CheckerReport


@dataclass(frozen=True)
class CheckContext:
    """What one check gives every checker, built once.

    `evidence`: reads, writes, commitment and the dense index as DataFrames (with the `ops`
    and `mops` tables), built only for a checker that reads them; `assign` and `events`:
    the history's other two tables; `losses`: what the tested configuration allows;
    `unclean_lost`: (key, value, election_index) of the committed writes lost in
    unclean-loss windows (`checkers.unclean`);
    `elections`: the SUT's leader elections counted (`leader_elections`,
    `unclean_elections`); `config`: the options of the check; `key_findings`: what the
    per-key pass (`checkers.key_pass`) found for every checker that has `check_key`,
    counted and sampled (None: the pass did not run; such checkers cannot report), with
    the facts they learnt of each key for their details (`key_facts`); `nemesis` and
    `replication`: the nemesis events and the SUT's replication events by key
    (`checkers.events.HistoryEvents`), for checks over them on the driver.
    """

    evidence: Evidence
    assign: DataFrame
    events: DataFrame
    losses: LossRules
    unclean_lost: DataFrame
    elections: Mapping[str, int]
    config: CheckConfig
    key_findings: KeyFindings | None = None
    nemesis: Sequence[NemesisEvent] = ()
    replication: Mapping[str, Sequence[ReplicationEvent]] = field(default_factory=dict)

    @property
    def key_facts(self) -> Mapping[str, Mapping[str, Mapping[str, Any]]]:
        """The facts the per-key checkers learnt of each key (checker -> key -> facts)."""
        return {} if self.key_findings is None else self.key_findings.facts

    @property
    def settings(self) -> TestSettings:
        """The tested configuration read from test.json (empty: nothing promised)."""
        return self.losses.settings


class Checker(Protocol):
    """A check of a history: its name, the anomaly types it reports, and the check."""

    @property
    def name(self) -> str:
        """Its section in results.json's `checkers`; unique among the registered ones."""
        ...

    @property
    def anomalies(self) -> tuple[str, ...]:
        """Every anomaly type it can report; its findings report no other."""
        ...

    def check(self, context: CheckContext) -> CheckerReport:
        """Its findings (lazy frames), details and notes, named `name`."""
        ...
