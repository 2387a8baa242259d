"""Findings of the per-key pass as data: a `FindingRow` per anomaly found on a key, a
`KeyFacts` per key for a checker's details, both written as rows of the finding frame
(`checkers.findings`; a facts row has no anomaly), and read back per checker.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers.errors import CheckerDefinitionError
from checkers.findings import FINDING_COLUMNS, Finding

FrameRow = tuple[str, str | None, str, int | None, bool, str]
"""checker, anomaly, key, order, expected, detail (JSON): `FINDING_COLUMNS`."""


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
    if isinstance(anomaly, str):
        kinds = pd.Series(anomaly, index=frame.index, dtype=object)
    else:
        kinds = pd.Series(None, index=frame.index, dtype=object)
        for name, mask in reversed(list(anomaly.items())):
            kinds = kinds.mask(mask.fillna(False).astype(bool), name)
    out = []
    for kind, record in zip(kinds, frame.to_dict("records"), strict=True):
        if not isinstance(kind, str):  # no type's mask held
            continue
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


def key_finding(
    frame: DataFrame | None,
    checker: str,
    anomalies: tuple[str, ...],
    *,
    json_fields: tuple[str, ...] = ("value",),
    allowed: frozenset[str] = frozenset(),
) -> Finding:
    """The findings of `checker` in the pass's frame, as a `Finding`."""
    if frame is None:
        raise CheckerDefinitionError(
            f"checker {checker!r} finds per key, but the per-key pass did not run: give "
            "its CheckContext the frame of checkers.key_pass.key_pass"
        )
    return Finding(
        checker,
        anomalies,
        frame.filter((F.col("checker") == checker) & F.col("anomaly").isNotNull()).select(
            *FINDING_COLUMNS
        ),
        json_fields,
        allowed,
    )


def key_facts(frame: DataFrame | None) -> dict[str, dict[str, dict[str, Any]]]:
    """The facts each checker learnt of each key in the pass: checker -> key -> facts
    (collected in one job)."""
    if frame is None:
        return {}
    rows = frame.filter(F.col("anomaly").isNull()).select("checker", "key", "detail").collect()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(str(row["checker"]), {})[str(row["key"])] = json.loads(row["detail"])
    return out
