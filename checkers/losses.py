"""Which losses (and duplicates) the tested configuration allows: they are counted as
expected, not invalid.

A lost write is expected when it was sent with acks=0 or acks=1 (the operation's `acks`
field, else `workload.acks` of `test.json`, else the one declared with `--expect-loss
acks0|acks1`), or when it was lost in an unclean-loss window while unclean leader election
was allowed (`topic.unclean_leader_election` true, or `--expect-loss unclean`), or when it
was an `ok` write lost with the power of every replica that held it (`checkers.power_losses`)
while test.json's flush policy did not fsync each message before it counted
(`topic.flush_messages` > 1, the default): then its reason names the nodes, when they lost
power and the flush setting, and a write that an ISR of one acknowledged under
`min.insync.replicas=1` says so. With `flush_messages` 1 (or no flush policy in test.json)
such a loss stays an anomaly: nothing here excuses a loss while a replica that held the
write kept its power (a minority's power loss, a corrupted file, a rollback).

A consumer group's state on the offsets topic (its generations, its commits) is written
under the same flush policy: where it does not fsync, a power loss of every broker may take
what the group had acknowledged, and so may one of any broker where the offsets topic's
`min.insync.replicas` is 1 (an ISR of one acknowledges it): `LossRules.group_state_losses`,
with which the group checkers explain generations handed out again and commits gone
backwards.

Such a loss truncates the log: offsets are handed out again, so a producer's next send or a
consumer's next read may land at or before where it was (`checkers.order` explains such a
step back by the lost position).

`LossRules` holds the rules of a check; `KeyLosses` applies them to one key in the per-key
pass (`checkers.key_pass`).

A `duplicate` (one value at several offsets of a key) is expected when the producer may
have retried a send without idempotence (`workload.producer_retries` > 0 in `test.json`, or
`--expect-loss retries`) and such a retry explains it: the value was sent, and it sits at
no more offsets than its sends could land at (retries + 1 each; any number when declared
by hand, as the count of retries is then not known). Nothing else is excused by retries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from checkers.config import ExpectedLoss, TestSettings
from checkers.disk_faults import DiskFault
from checkers.empty_frames import made_once
from checkers.power_losses import POWER_LOST_COLUMNS, PowerLoss


@dataclass(frozen=True)
class LossRules:
    """The allowances of one check: the tested configuration, the losses declared, and the
    history's power losses (which may have taken writes the flush policy allows to lose)."""

    settings: TestSettings
    expect_loss: frozenset[ExpectedLoss]
    power_losses: tuple[PowerLoss, ...] = ()
    disk_faults: tuple[DiskFault, ...] = ()
    """Every fault that changed what a broker's disk holds (`checkers.disk_faults`)."""

    @property
    def power_loss_allowed(self) -> bool:
        """The flush policy does not fsync a message before it counts: an acknowledged write
        lost with the power of all its holders is allowed."""
        return self.settings.fsyncs_before_ack is False

    def power_reason(
        self, lost_with: str, isr: list[int], alone: bool, acknowledged: bool = True
    ) -> str:
        """Why a write lost with power (`checkers.power_losses`) is expected."""
        flush = f"{self.settings.flush_policy} does not fsync before acknowledging"
        if alone and self.settings.min_insync_replicas == 1:
            node = self._node(isr[0])
            verb = "acknowledged" if acknowledged else "committed"
            return (
                f"{verb} by {node} alone (ISR of one, min.insync.replicas=1); lost with "
                f"the power of {lost_with} ({flush})"
            )
        return f"lost with the power of {lost_with}; {flush}"

    def group_state_losses(self) -> tuple[tuple[PowerLoss, str], ...]:
        """The power losses that may have taken the consumer group's acknowledged state on
        the offsets topic, each with the reason: under a flush policy that does not fsync
        before acknowledging, one of every broker; or, where the offsets topic's
        min.insync.replicas is 1, one of any broker (which may have been the ISR of one of
        the group's offsets partition: squall does not place the group's partition)."""
        if not self.power_loss_allowed:
            return ()
        flush = f"{self.settings.flush_policy} does not fsync before acknowledging"
        every = set(self.settings.brokers or {})
        alone = self.settings.offsets_min_insync_replicas == 1
        found: list[tuple[PowerLoss, str]] = []
        for loss in self.power_losses:
            if every and every <= set(loss.nodes):
                found.append(
                    (
                        loss,
                        f"a power loss of every broker at index {loss.index} came between "
                        "(the group's generations and commits on the offsets topic that no "
                        f"replica had fsynced are gone; {flush})",
                    )
                )
            elif alone:
                nodes = ", ".join(loss.nodes)
                found.append(
                    (
                        loss,
                        f"a power loss of {nodes} at index {loss.index} came between "
                        "(offsets.topic.min.insync.replicas=1 lets an ISR of one acknowledge "
                        f"the group's generations and commits; {flush})",
                    )
                )
        return tuple(found)

    def _node(self, broker: int) -> str:
        names = {b: n for n, b in (self.settings.brokers or {}).items()}
        return names.get(broker, f"broker {broker}")

    @property
    def unclean_allowed(self) -> bool:
        return self.settings.unclean_leader_election is True or "unclean" in self.expect_loss

    @property
    def default_acks(self) -> int | None:
        """The acks of a write whose operation does not say: test.json's, else declared."""
        if self.settings.acks is not None:
            return self.settings.acks
        if "acks0" in self.expect_loss:
            return 0
        if "acks1" in self.expect_loss:
            return 1
        return None

    @property
    def retries_may_duplicate(self) -> bool:
        """The producer may have retried without idempotence: test.json's or declared."""
        return self.settings.retries_may_duplicate or "retries" in self.expect_loss

    @property
    def landings_per_send(self) -> int | None:
        """How often one send may land: test.json's producer retries + 1; None: no bound
        known (retries declared by hand, or test.json silent on them)."""
        if "retries" in self.expect_loss:
            return None
        if self.settings.every_producer_idempotent:
            return 1
        if self.settings.producer_retries is None:
            return None
        if self.settings.client_resends is not None:
            return None  # as often as leaders are deposed under it
        return self.settings.producer_retries + 1

    @property
    def duplicate_reason(self) -> str:
        """Why a duplicate a retry explains is expected, as its sample says."""
        if not self.settings.retries_may_duplicate or "retries" in self.expect_loss:
            return "producer retries without idempotence (--expect-loss retries)"
        resends = self.settings.client_resends
        retries = f"producer retries={self.settings.producer_retries} without idempotence"
        if resends is None:
            return retries
        client = f"{self.settings.client} without idempotence: {resends}"
        return f"{retries}; {client}" if self.settings.producer_retries else client

    def describe(self) -> list[str]:
        """The allowances in words, for results.json."""
        notes = []
        if self.default_acks in (0, 1):
            notes.append(
                f"writes without an acks field count as acks={self.default_acks}; losses of "
                "acks=0/1 writes are expected"
            )
        else:
            notes.append("losses of writes whose operation says acks=0 or acks=1 are expected")
        if self.unclean_allowed:
            source = (
                "test.json allows unclean leader election"
                if self.settings.unclean_leader_election
                else "--expect-loss unclean"
            )
            notes.append(f"{source}: losses in unclean-loss windows are expected")
        flush = self.settings.flush_policy
        if self.power_loss_allowed:
            notes.append(
                f"test.json's flush policy ({flush}) does not fsync before acknowledging: "
                "writes lost with the power of every replica that held them are expected"
            )
        elif flush is not None:
            notes.append(
                f"test.json's flush policy ({flush}) fsyncs every message before it counts: "
                "a write lost with power is an anomaly"
            )
        if self.retries_may_duplicate:
            bound = self.landings_per_send
            at_most = "" if bound is None else f" (at most {bound} per send of it)"
            notes.append(
                f"{self.duplicate_reason}: a sent value at several offsets of its key{at_most} "
                "is an expected duplicate"
            )
        if self.settings.consumer_mode == "at-most-once":
            notes.append(
                "test.json's consumer_mode is at-most-once: consumers commit what they fetched "
                "before delivering it, so an at-least-once violation is expected"
            )
        return notes


def _classified_empty(rows: pd.DataFrame) -> pd.DataFrame:
    """`KeyLosses.classify` of the empty `rows`."""
    return rows.assign(
        effective_acks=pd.Series(dtype="Int64"),
        expected=pd.Series(dtype=bool),
        expected_reason=pd.Series(dtype=object),
    )


@dataclass(frozen=True)
class KeyLosses:
    """The allowances on one key, for the per-key pass (`checkers.key_pass`): the rules,
    and the key's writes lost in allowed-or-not unclean-loss windows (value -> election)."""

    rules: LossRules
    unclean_lost: pd.DataFrame
    """The key's committed writes lost in unclean-loss windows (`key_unclean_lost`)."""
    power_lost: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(POWER_LOST_COLUMNS))
    )
    """The key's `ok` writes (and indeterminate ones a read saw) lost with the power of all
    their holders (`key_power_lost`)."""

    @property
    def power_reasons(self) -> dict[Any, str]:
        """Value -> why its loss with power is expected, where the flush policy allows it."""
        if not self.rules.power_loss_allowed or self.power_lost.empty:
            return {}
        return {
            value: self.rules.power_reason(lost_with, isr, bool(alone), bool(acknowledged))
            for value, lost_with, isr, alone, acknowledged in zip(
                self.power_lost["value"],
                self.power_lost["lost_with"],
                self.power_lost["isr"],
                self.power_lost["alone"],
                self.power_lost["acknowledged"],
                strict=True,
            )
        }

    @property
    def power_indexes(self) -> dict[Any, int]:
        """Value -> the power loss (history index) that took it, where that is allowed."""
        if not self.rules.power_loss_allowed or self.power_lost.empty:
            return {}
        return dict(
            zip(
                self.power_lost["value"].tolist(),
                self.power_lost["power_index"].astype("int64").tolist(),
                strict=True,
            )
        )

    def powered_off(self, offsets: pd.Series, since: pd.Series, until: pd.Series) -> pd.Series:
        """Per finding: an allowed loss with power, of a write at an offset below
        `offsets`, between `since` and `until` (times), in words (None: none). A read at
        `since` before the key was led again after the power loss came from a deposed
        leader: the loss still falls after it."""
        found = pd.Series([None] * len(offsets), index=offsets.index, dtype=object)
        if not self.rules.power_loss_allowed or self.power_lost.empty:
            return found
        lost = self.power_lost
        for at, (above, start, end) in enumerate(zip(offsets, since, until, strict=True)):
            hit = lost[
                (lost["offset"].astype("float64") < float(above))
                & (lost["led_again"].astype("float64") >= float(start))
                & (lost["power_time"].astype("float64") <= float(end))
            ]
            if not hit.empty:
                first = hit.iloc[0]
                found.iloc[at] = (
                    f"offset {int(first['offset'])} lost with the power of "
                    f"{first['lost_with']} (allowed)"
                )
        return found

    @property
    def windows(self) -> dict[Any, int]:
        """Value -> the election in whose window it was lost, where unclean is allowed."""
        if not self.rules.unclean_allowed or self.unclean_lost.empty:
            return {}
        return dict(
            zip(
                self.unclean_lost["value"].tolist(),
                self.unclean_lost["election_index"].tolist(),
                strict=True,
            )
        )

    def with_acks(self, rows: pd.DataFrame) -> pd.DataFrame:
        """`rows` (with an `acks` column) plus `effective_acks`."""
        rows = rows.copy()
        rows["effective_acks"] = self.effective_acks(rows["acks"])
        return rows

    def effective_acks(self, acks: Any) -> Any:
        """The acks each write of `acks` (a Series or an array of its operation's acks, null:
        not said) was sent with: the operation's, else the default (`LossRules.default_acks`),
        as pandas' nullable integers."""
        acks = acks.astype("Int64")
        default = self.rules.default_acks
        return acks if default is None else acks.fillna(default)

    def classify(self, rows: pd.DataFrame) -> pd.DataFrame:
        """`rows` of lost writes (value, acks) plus `effective_acks`, `expected` and
        `expected_reason`, as `LossRules.classify`."""
        if rows.empty:  # most keys lose nothing
            return made_once("classify", rows, _classified_empty)
        rows = self.with_acks(rows)
        acks = rows["effective_acks"]
        lossy = acks.isin([0, 1]).fillna(False).astype(bool)
        election = rows["value"].map(self.windows)
        in_window = election.notna()
        power = rows["value"].map(self.power_reasons)
        with_power = power.notna()
        acks_reason = "sent with acks=" + acks.astype("string")
        window_reason = (
            "lost in the unclean-loss window of the leader election at index "
            + election.astype("Int64").astype("string")
        )
        rows["expected"] = lossy | in_window | with_power
        rows["expected_reason"] = acks_reason.where(
            lossy, window_reason.where(in_window, power.astype("string"))
        )
        return rows

    def classify_duplicates(self, duplicates: pd.DataFrame) -> pd.DataFrame:
        """`duplicates` (value, offset_count, `sends`: a list, or None) plus `expected` and
        `expected_reason`: a retry without idempotence explains the duplicate (see the
        module's docstring)."""
        duplicates = duplicates.copy()
        if not self.rules.retries_may_duplicate:
            duplicates["expected"] = False
            duplicates["expected_reason"] = None
            return duplicates
        sends = duplicates["sends"].map(lambda items: len(items) if isinstance(items, list) else 0)
        explained = sends > 0
        bound = self.rules.landings_per_send
        if bound is not None:
            explained &= duplicates["offset_count"] <= sends * bound
        duplicates["expected"] = explained
        duplicates["expected_reason"] = pd.Series(
            [self.rules.duplicate_reason if e else None for e in explained],
            index=duplicates.index,
            dtype=object,
        )
        return duplicates
