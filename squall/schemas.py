"""The JSON Schemas of squall's files, generated from the models that read them.

``python -m squall.schemas`` writes them to ``docs/schemas/``; ``--check`` only says
which published files differ from what the models generate (exit 1), as the unit tests do.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from squall.cluster.external import ExternalInventoryFile
from squall.cluster.inventory import InventoryFile
from squall.config.schedule_file import ScheduleDocument
from squall.spec import TestDocument, TestSpec

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    "spec.schema.json": (TestSpec, "squall test spec (TOML, `squall run --spec`)"),
    "test.schema.json": (TestDocument, "squall test.json (a run's resolved spec)"),
    "schedule.schema.json": (ScheduleDocument, "squall schedule.json (a fault schedule)"),
    "inventory.schema.json": (InventoryFile, "squall inventory (TOML, the ssh runtime's hosts)"),
    "external-inventory.schema.json": (
        ExternalInventoryFile,
        "squall external inventory (TOML, a running cluster squall did not deploy)",
    ),
}
"""Published file name -> (the model, the schema's title)."""


def schema_text(model: type[BaseModel], title: str) -> str:
    """The JSON Schema of `model`, as published."""
    schema = {"$schema": DIALECT, **model.model_json_schema(), "title": title}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema into `directory`; the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (model, title) in SCHEMAS.items():
        path = directory / name
        path.write_text(schema_text(model, title))
        written.append(path)
    return written


def stale_schemas(directory: Path = SCHEMA_DIR) -> list[str]:
    """The schema files of `directory` that are missing or differ from the models."""
    stale = []
    for name, (model, title) in SCHEMAS.items():
        path = directory / name
        if not path.is_file() or path.read_text() != schema_text(model, title):
            stale.append(name)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m squall.schemas", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="where the schemas go")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_schemas(args.dir)
        for name in stale:
            print(f"{args.dir / name} is stale: run python -m squall.schemas")
        return 1 if stale else 0
    for path in write_schemas(args.dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
