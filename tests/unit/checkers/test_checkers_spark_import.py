"""The Spark import writes what the exact converter writes, or gives up and says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.spark_import import import_jsonl
from histories import read_parquet_tables, write_parquet
from histories.parquet_schema import SCHEMAS
from tests.unit.checkers.history_builder import HistoryBuilder
from tests.unit.checkers.scenarios import DEFAULT_SCENARIOS, build


def _normalised(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted JSON; object values and commit keys compared regardless of order."""
    out = []
    for row in rows:
        row = dict(row)
        if row.get("value_json") is not None:
            row["value_json"] = json.loads(row["value_json"])
        if row.get("keys") is not None and row.get("offsets") is not None:
            pairs = sorted(zip(row["keys"], row["offsets"], strict=True))
            row["keys"], row["offsets"] = [k for k, _ in pairs], [o for _, o in pairs]
        out.append(json.dumps(row, sort_keys=True))
    return sorted(out)


def test_same_tables_as_the_exact_converter(spark: Any, tmp_path: Path) -> None:
    builder = HistoryBuilder(tmp_path / "run")
    build(builder, DEFAULT_SCENARIOS)
    builder.nemesis("start-partition", {"n1": ["n2", "n3"]})
    source = builder.close() / "history.jsonl"
    write_parquet(source, tmp_path / "exact")
    outcome = import_jsonl(spark, source, tmp_path / "spark")
    assert outcome.fallback is None
    exact = read_parquet_tables(tmp_path / "exact")
    fast = read_parquet_tables(tmp_path / "spark")
    for name, table in exact.items():
        assert fast[name].schema.equals(SCHEMAS[name], check_metadata=True)
        assert _normalised(fast[name].to_pylist()) == _normalised(table.to_pylist()), name


GOOD = [
    '{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send","k",1]]}',
    '{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","k",[0,1]]]}',
]


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ([GOOD[0], "", GOOD[1]], "blank lines"),
        ([GOOD[1].replace('"index":1', '"index":0')], "does not pair"),
        ([GOOD[0], GOOD[1].replace('"k",[0,1]', '"k",[-1,1]')], "malformed micro-op"),
        ([GOOD[0], GOOD[1].replace('"process":0', '"process":"0"')], "breaks the history"),
        ([GOOD[1].replace('"index":1', '"index":0'), GOOD[0]], "dense"),
    ],
    ids=["blank-line", "unpaired", "negative-offset", "process-as-text", "order"],
)
def test_gives_up_on_what_it_cannot_vouch_for(
    spark: Any, tmp_path: Path, lines: list[str], reason: str
) -> None:
    source = tmp_path / "history.jsonl"
    source.write_text("\n".join(lines) + "\n")
    outcome = import_jsonl(spark, source, tmp_path / "out")
    assert outcome.fallback is not None and reason in outcome.fallback
    assert not (tmp_path / "out").exists()


def test_torn_last_line_is_ignored(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "history.jsonl"
    source.write_text("\n".join(GOOD) + '\n{"index":2,"ti')
    outcome = import_jsonl(spark, source, tmp_path / "out")
    assert outcome.fallback is None
    assert "torn" in outcome.notes[0]
    assert outcome.rows["ops"] == 2
