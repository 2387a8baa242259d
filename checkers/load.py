"""From a path to the four Parquet tables of a history, as Spark DataFrames.

Accepted paths: a run directory (its `history.jsonl`, else its `history.parquet/`, else a
Jepsen `history.edn`), a `history.jsonl` (any name), a `history.parquet` directory, or a
Jepsen `history.edn`. A history file is converted once into `history.parquet/` beside it
(`<stem>.parquet/` for other names) and reconverted only when the file is newer; where that
directory cannot be written, into a temporary directory.

Conversion of a JSON-lines history uses `histories.write_parquet` (exact, 25-40k
operations a second on one core) or Spark's JSON reader (`checkers.spark_import`), which
needs about three times the CPU but uses every core: `auto` picks it for files of at
least `spark_loader_bytes` when Spark has `SPARK_IMPORT_MIN_CORES` cores or more. The
Spark import falls back to the exact converter whenever it cannot vouch for the input, so
a malformed line is always reported with its file and line number.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from checkers.config import Loader
from checkers.errors import HistoryNotFoundError
from histories import TruncatedHistoryWarning, iter_jepsen_history, write_parquet
from histories.parquet_schema import TABLES

HistoryKind = Literal["run", "jsonl", "parquet", "edn"]

SPARK_IMPORT_MIN_CORES = 8
"""The `auto` loader imports with Spark only with this many cores: measured on 1M lines
(116 MB), the Spark import spends about 90 CPU-seconds where the exact converter spends
about 35, so it pays only when spread over many cores."""


@dataclass(frozen=True)
class HistoryLocation:
    """Where a history is: its source file (if any), its Parquet directory, its run directory."""

    given: Path
    kind: HistoryKind
    run_dir: Path | None
    source: Path | None
    parquet: Path


@dataclass
class LoadedHistory:
    """The four tables of a history (DataFrames) and how they were obtained."""

    location: HistoryLocation
    parquet: Path
    loader: str
    ops: Any
    mops: Any
    events: Any
    assign: Any
    notes: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.location.given),
            "kind": self.location.kind,
            "source": None if self.location.source is None else str(self.location.source),
            "parquet": str(self.parquet),
            "loader": self.loader,
        }


def parquet_complete(directory: Path) -> bool:
    """Whether `directory` holds all four tables (files, or Spark's part directories)."""
    return directory.is_dir() and all((directory / f"{n}.parquet").exists() for n in TABLES)


def _parquet_beside(source: Path) -> Path:
    stem = "history" if source.name in ("history.jsonl", "history.edn") else source.stem
    return source.with_name(f"{stem}.parquet")


def locate_history(path: str | os.PathLike[str]) -> HistoryLocation:
    """Resolve a user's path; raises `HistoryNotFoundError` saying what was looked for."""
    given = Path(path)
    if given.is_dir():
        if parquet_complete(given) or given.suffix == ".parquet":
            if not parquet_complete(given):
                raise HistoryNotFoundError(
                    f"{given} is an incomplete history.parquet directory (it needs "
                    f"{', '.join(f'{t}.parquet' for t in TABLES)}); delete it and check the "
                    "history.jsonl again"
                )
            return HistoryLocation(given, "parquet", given.parent, None, given)
        jsonl = given / "history.jsonl"
        if jsonl.is_file():
            return HistoryLocation(given, "run", given, jsonl, given / "history.parquet")
        if parquet_complete(given / "history.parquet"):
            return HistoryLocation(given, "run", given, None, given / "history.parquet")
        edn = given / "history.edn"
        if edn.is_file():
            return HistoryLocation(given, "edn", given, edn, given / "history.parquet")
        raise HistoryNotFoundError(
            f"{given} holds no history: expected history.jsonl, a complete history.parquet/ "
            "or a Jepsen history.edn in it"
        )
    if given.is_file():
        kind: HistoryKind = "edn" if given.suffix == ".edn" else "jsonl"
        return HistoryLocation(given, kind, given.parent, given, _parquet_beside(given))
    raise HistoryNotFoundError(
        f"{given} does not exist: give a run directory, a history.jsonl, a history.parquet "
        "directory or a Jepsen history.edn"
    )


def _fresh(parquet: Path, source: Path | None) -> bool:
    if not parquet_complete(parquet):
        return False
    if source is None:
        return True
    converted = min((parquet / f"{name}.parquet").stat().st_mtime_ns for name in TABLES)
    return converted >= source.stat().st_mtime_ns


def _writable_target(location: HistoryLocation) -> Path:
    target = location.parquet
    if os.access(target.parent, os.W_OK) and (not target.exists() or os.access(target, os.W_OK)):
        return target
    assert location.source is not None
    digest = hashlib.sha256(str(location.source.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"squall-check-{digest}" / target.name


def _convert_python(location: HistoryLocation, target: Path, notes: list[str]) -> None:
    source = location.source
    assert source is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncatedHistoryWarning)
        if location.kind == "edn":
            write_parquet(iter_jepsen_history(source), target)
        else:
            write_parquet(source, target)
    for warning in caught:
        if issubclass(warning.category, TruncatedHistoryWarning):
            notes.append(str(warning.message))
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )


def _session(spark: Any) -> Any:
    """A SparkSession, from a session or from a function that starts one."""
    return spark() if callable(spark) else spark


def convert_history(
    spark: Any,
    location: HistoryLocation,
    *,
    loader: Loader = "auto",
    spark_loader_bytes: int = 64 << 20,
) -> tuple[Path, str, list[str]]:
    """Make sure `location` has an up-to-date Parquet directory; return it, how, and notes.

    `spark` is a SparkSession or a function returning one, called only for the Spark import.
    """
    notes: list[str] = []
    if _fresh(location.parquet, location.source):
        return location.parquet, "existing", notes
    target = _writable_target(location)
    if target != location.parquet:
        notes.append(f"{location.parquet.parent} is not writable; converted into {target}")
        if _fresh(target, location.source):
            return target, "existing", notes
    source = location.source
    assert source is not None
    use_spark = location.kind != "edn" and (
        loader == "spark"
        or (
            loader == "auto"
            and source.stat().st_size >= spark_loader_bytes
            and _session(spark).sparkContext.defaultParallelism >= SPARK_IMPORT_MIN_CORES
        )
    )
    if use_spark:
        from checkers.spark_import import import_jsonl

        outcome = import_jsonl(_session(spark), source, target)
        notes.extend(outcome.notes)
        if outcome.fallback is None:
            return target, "spark", notes
        notes.append(f"the Spark loader fell back to the exact converter: {outcome.fallback}")
    _convert_python(location, target, notes)
    return target, "python", notes


def load_history(
    spark: Any,
    path: str | os.PathLike[str],
    *,
    loader: Loader = "auto",
    spark_loader_bytes: int = 64 << 20,
) -> LoadedHistory:
    """Locate, convert if needed, and read the four tables of the history at `path`.

    `spark` is a SparkSession or a function returning one: a malformed history is then
    reported before Spark starts.
    """
    location = locate_history(path)
    parquet, how, notes = convert_history(
        spark, location, loader=loader, spark_loader_bytes=spark_loader_bytes
    )
    session = _session(spark)
    tables = {name: session.read.parquet(str(parquet / f"{name}.parquet")) for name in TABLES}
    return LoadedHistory(
        location,
        parquet,
        how,
        tables["ops"],
        tables["mops"],
        tables["events"],
        tables["assign"],
        notes,
    )
