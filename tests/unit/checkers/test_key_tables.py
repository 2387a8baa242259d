"""The per-key pass picks each key's rows out of a partition as a filter per key would:
the same keys in the same order, each with its rows in their order, whether it scans the
partition once a key or sorts it once (many keys)."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from checkers.key_pass import SORTED_FROM, key_tables


def filtered(table: pa.Table) -> list[pa.Table]:
    column = table.column("key")
    return [table.filter(pc.equal(column, key)) for key in pc.unique(column).to_pylist()]


@pytest.mark.parametrize("keys", [1, SORTED_FROM - 1, SORTED_FROM, 3 * SORTED_FROM])
def test_each_keys_rows_are_a_filters(keys: int) -> None:
    rng = random.Random(keys)
    names = [f"t-{rng.randrange(10 * keys)}-{i}" for i in range(keys)]
    rows = 40 * keys
    table = pa.table(
        {
            "index": pa.array(range(rows), pa.int64()),
            "key": pa.array([rng.choice(names) for _ in range(rows)]),
            "value": pa.array([None if i % 7 == 0 else str(i) for i in range(rows)]),
        }
    )
    # received as several batches, as a partition arrives
    table = pa.Table.from_batches(table.to_batches(max_chunksize=97))
    found = list(key_tables(table))
    expected = filtered(table)
    assert [t.column("key")[0].as_py() for t in found] == [
        t.column("key")[0].as_py() for t in expected
    ]
    assert all(got.equals(want) for got, want in zip(found, expected, strict=True))
    assert sum(t.num_rows for t in found) == rows
