"""Findings of the per-key pass as data: a `FindingRow` per anomaly found on a key, a
`KeyFacts` per key for a checker's details, both written as rows of the finding frame
(`checkers.findings`; a facts row has no anomaly). Each key's function keeps only the
first rows of each (checker, anomaly, expected) in sample order, with their count
(`sampled_rows`), so the pass's rows are few; they are collected once into `KeyFindings`
and read back per checker.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from checkers.errors import CheckerDefinitionError
from checkers.findings import Finding, FindingSlot, SampledRows, sample_order
from checkers.key_log import SharedFacts

FrameRow = tuple[str, str | None, str, int | None, bool, str]
"""checker, anomaly, key, order, expected, detail (JSON): `FINDING_COLUMNS`."""
PassRow = tuple[str, str | None, str, int | None, bool, str, int | None]
"""A row of the pass's frame: a `FrameRow` and `count`, the number of findings of its slot
on its key on the slot's first row (0 on the others, null on a facts row)."""


@dataclass(frozen=True)
class FindingRow:
    """One anomaly found on one key: a row of the finding frame, `detail` as a mapping."""

    checker: str
    anomaly: str
    key: str
    order: int | None
    expected: bool
    detail: Mapping[str, Any]

    def as_row(self) -> FrameRow:
        """The row of the finding frame."""
        return (
            self.checker,
            self.anomaly,
            self.key,
            self.order,
            self.expected,
            detail_json(self.detail),
        )


@dataclass(frozen=True)
class KeyFacts:
    """What a checker learnt of one key for its details (no anomaly)."""

    checker: str
    key: str
    facts: Mapping[str, Any]

    def as_row(self) -> FrameRow:
        """The row of the finding frame: no anomaly, the facts as its detail."""
        return (self.checker, None, self.key, None, False, detail_json(self.facts))


def _plain(item: Any) -> Any:
    """`item` as JSON sees it: numpy and pandas scalars as Python ones, missing as None."""
    if item is None or item is pd.NA:
        return None
    if isinstance(item, float) and math.isnan(item):
        return None
    if hasattr(item, "item") and not isinstance(item, (list, dict, str)):
        return item.item()
    if isinstance(item, (list, tuple)):
        return [_plain(element) for element in item]
    if isinstance(item, dict):
        fields = {name: _plain(element) for name, element in item.items()}
        return {name: element for name, element in fields.items() if element is not None}
    return item


def detail_json(detail: Mapping[str, Any]) -> str:
    """`detail` as Spark's `to_json` writes a struct: compact, in order, nulls left out."""
    return json.dumps(_plain(dict(detail)), separators=(",", ":"), ensure_ascii=False)


def same_named(fields: Sequence[str]) -> list[tuple[str, str]]:
    """`rows_of`'s `detail` where each field is the frame's column of the same name, as an
    anomaly's catalogue entry lists them (`checkers.catalogue.AnomalyInfo.fields`)."""
    return [(name, name) for name in fields]


def keyed(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """`frame` with its `key` column for `rows_of`; an empty frame (most keys find nothing)
    as it is, uncopied: `rows_of` makes nothing of it."""
    return frame if frame.empty else frame.assign(key=key)


def rows_of(
    checker: str,
    anomaly: str | Mapping[str, pd.Series],
    frame: pd.DataFrame,
    *,
    order: str,
    detail: Sequence[tuple[str, str]],
    expected: str | None = None,
) -> list[FindingRow]:
    """One `FindingRow` per row of `frame` (with a `key` column): `detail` names (field,
    column) pairs; with `expected` (a boolean column), an expected row's `expected_reason`
    is its `expected_because`. `anomaly` is a type name, or types with the boolean mask
    over `frame` that makes a row one of them (the first that holds; rows matching none
    are left out), as `checkers.findings.finding` takes them."""
    if frame.empty:
        return []
    if isinstance(anomaly, str):
        kinds = np.full(len(frame), anomaly, dtype=object)
    else:
        kinds = np.full(len(frame), None, dtype=object)
        for name, mask in reversed(list(anomaly.items())):
            kinds[mask.to_numpy(dtype=bool, na_value=False)] = name
    held = kinds != None  # noqa: E711 (elementwise): rows where no type's mask held are left out
    if not held.any():
        return []
    out = []
    for kind, record in zip(kinds[held], frame[held].to_dict("records"), strict=True):
        is_expected = bool(_plain(record[expected])) if expected is not None else False
        fields = {name: record[column] for name, column in detail}
        if expected is not None:
            fields["expected_because"] = record["expected_reason"] if is_expected else None
        out.append(
            FindingRow(
                checker,
                kind,
                str(record["key"]),
                _plain(record[order]),
                is_expected,
                fields,
            )
        )
    return out


def sampled_rows(rows: Sequence[FindingRow | KeyFacts], sample: int) -> list[PassRow]:
    """The rows one key gives the pass: of each (checker, anomaly, expected), the first
    `max(sample, 1)` findings in sample order (order, nulls first, then detail), the first
    carrying the slot's count; and every facts row."""
    slots: dict[tuple[str, str | None, bool], list[FrameRow]] = {}
    out: list[PassRow] = []
    for row in rows:
        shaped = row.as_row()
        if shaped[1] is None:
            out.append((*shaped, None))
        else:
            slots.setdefault((shaped[0], shaped[1], shaped[4]), []).append(shaped)
    for found in slots.values():
        found.sort(key=lambda r: sample_order(r[3], r[2], r[5]))
        out.extend((*r, len(found) if i == 0 else 0) for i, r in enumerate(found[: max(sample, 1)]))
    return out


@dataclass(frozen=True)
class KeyFindings:
    """What the per-key pass found, collected: per (checker, anomaly, expected) the count
    and first rows (`SampledRows`), the facts each checker learnt of each key, and what
    the pass told every key (`shared`)."""

    sampled: Mapping[FindingSlot, SampledRows]
    facts: Mapping[str, Mapping[str, Mapping[str, Any]]]
    shared: SharedFacts

    @classmethod
    def from_rows(cls, rows: Iterable[PassRow], shared: SharedFacts) -> KeyFindings:
        """From the pass's rows (`sampled_rows` of every key)."""
        counts: dict[FindingSlot, int] = {}
        found: dict[FindingSlot, list[tuple[int | None, str, str]]] = {}
        facts: dict[str, dict[str, Mapping[str, Any]]] = {}
        for checker, anomaly, key, order, expected, detail, count in rows:
            if anomaly is None:
                facts.setdefault(checker, {})[key] = json.loads(detail)
                continue
            slot = (checker, anomaly, bool(expected))
            counts[slot] = counts.get(slot, 0) + (count or 0)
            found.setdefault(slot, []).append((order, key, detail))
        sampled = {slot: SampledRows(counts[slot], tuple(rows)) for slot, rows in found.items()}
        return cls(sampled, facts, shared)


def pass_ran(found: KeyFindings | None, checker: str) -> KeyFindings:
    """`found`; CheckerDefinitionError if the per-key pass did not run (None)."""
    if found is None:
        raise CheckerDefinitionError(
            f"checker {checker!r} finds per key, but the per-key pass did not run: give "
            "its CheckContext the KeyFindings of checkers.key_pass.key_pass"
        )
    return found


def key_finding(
    found: KeyFindings | None,
    checker: str,
    anomalies: tuple[str, ...],
    *,
    json_fields: tuple[str, ...] = ("value",),
    allowed: frozenset[str] = frozenset(),
) -> Finding:
    """The findings of `checker` in the per-key pass, as a `Finding`."""
    found = pass_ran(found, checker)
    return Finding(
        checker,
        anomalies,
        None,
        json_fields,
        allowed,
        sampled={
            (anomaly, expected): rows
            for (name, anomaly, expected), rows in found.sampled.items()
            if name == checker
        },
    )
