"""Which losses (and duplicates) the tested configuration allows: they are counted as
expected, not invalid.

A lost write is expected when it was sent with acks=0 or acks=1 (the operation's `acks`
field, else `workload.acks` of `test.json`, else the one declared with `--expect-loss
acks0|acks1`), or when it was lost in an unclean-loss window while unclean leader election
was allowed (`topic.unclean_leader_election` true, or `--expect-loss unclean`).

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

from dataclasses import dataclass
from typing import Any

import pandas as pd

from checkers.config import ExpectedLoss, TestSettings


@dataclass(frozen=True)
class LossRules:
    """The allowances of one check: the tested configuration and the losses declared."""

    settings: TestSettings
    expect_loss: frozenset[ExpectedLoss]

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
        if "retries" in self.expect_loss or self.settings.producer_retries is None:
            return None
        return self.settings.producer_retries + 1

    @property
    def duplicate_reason(self) -> str:
        """Why a duplicate a retry explains is expected, as its sample says."""
        if self.settings.retries_may_duplicate and "retries" not in self.expect_loss:
            return f"producer retries={self.settings.producer_retries} without idempotence"
        return "producer retries without idempotence (--expect-loss retries)"

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
        if self.retries_may_duplicate:
            bound = self.landings_per_send
            at_most = "" if bound is None else f" (at most {bound} per send of it)"
            notes.append(
                f"{self.duplicate_reason}: a sent value at several offsets of its key{at_most} "
                "is an expected duplicate"
            )
        return notes


@dataclass(frozen=True)
class KeyLosses:
    """The allowances on one key, for the per-key pass (`checkers.key_pass`): the rules,
    and the key's writes lost in allowed-or-not unclean-loss windows (value -> election)."""

    rules: LossRules
    unclean_lost: pd.DataFrame
    """The key's committed writes lost in unclean-loss windows (`key_unclean_lost`)."""

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
        acks = rows["acks"].astype("Int64")
        default = self.rules.default_acks
        rows["effective_acks"] = acks if default is None else acks.fillna(default)
        return rows

    def classify(self, rows: pd.DataFrame) -> pd.DataFrame:
        """`rows` of lost writes (value, acks) plus `effective_acks`, `expected` and
        `expected_reason`, as `LossRules.classify`."""
        if rows.empty:  # most keys lose nothing
            return rows.assign(
                effective_acks=pd.Series(dtype="Int64"),
                expected=pd.Series(dtype=bool),
                expected_reason=pd.Series(dtype=object),
            )
        rows = self.with_acks(rows)
        acks = rows["effective_acks"]
        lossy = acks.isin([0, 1]).fillna(False).astype(bool)
        election = rows["value"].map(self.windows)
        in_window = election.notna()
        acks_reason = "sent with acks=" + acks.astype("string")
        window_reason = (
            "lost in the unclean-loss window of the leader election at index "
            + election.astype("Int64").astype("string")
        )
        rows["expected"] = lossy | in_window
        rows["expected_reason"] = acks_reason.where(lossy, window_reason.where(in_window))
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
