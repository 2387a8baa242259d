"""From a path to the four Parquet tables of a history, as Spark DataFrames.

Accepted paths: a run directory (its `history.jsonl`, else its `history.parquet/`, else a
Jepsen `history.edn`), a `history.jsonl` (any name), a `history.parquet` directory, or a
Jepsen `history.edn`. A history file is converted once into `history.parquet/` beside it
(`<stem>.parquet/` for other names) and reconverted only when the file is newer; where that
directory cannot be written, into the user's cache directory (`$XDG_CACHE_HOME/squall/check/`,
else `~/.cache/squall/check/`, private: made with mode 0700, and reused only while it belongs
to the user and no one else can write to it), else into a new private temporary directory.

A JSON-lines history is converted by `histories.bulk_parquet` (the `auto` loader: Arrow
and numpy over blocks of lines, 350k to 500k lines a second on two cores) or by
`histories.write_parquet` (the `exact` loader: one line at a time, about 80k lines a
second). Both write the same tables. The bulk converter hands the file to the exact one
whenever it cannot vouch for it, so a malformed line is always reported with its file and
line number. A Jepsen `history.edn` is always converted line by line.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from checkers.cache_dir import private_cache_dir
from checkers.config import Loader
from checkers.errors import HistoryNotFoundError
from checkers.session import SPARK_LOG, spark_log
from histories import TruncatedHistoryWarning, iter_jepsen_history, write_parquet
from histories.bulk_parquet import write_parquet_bulk
from histories.edn import not_utf8
from histories.parquet import pairing_notes
from histories.parquet_schema import TABLES

HistoryKind = Literal["run", "jsonl", "parquet", "edn"]


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


def _writable_target(location: HistoryLocation) -> tuple[Path, str | None]:
    """Where to convert: beside the history, else a private directory; and a note why."""
    target = location.parquet
    if os.access(target.parent, os.W_OK) and (not target.exists() or os.access(target, os.W_OK)):
        return target, None
    assert location.source is not None
    digest = hashlib.sha256(str(location.source.resolve()).encode()).hexdigest()[:16]
    try:
        directory = private_cache_dir("check", digest)
    except OSError as err:
        directory = Path(tempfile.mkdtemp(prefix="squall-check-"))
        return directory / target.name, (
            f"{target.parent} is not writable and the cache directory cannot be trusted "
            f"({err}); converted into {directory / target.name}"
        )
    return directory / target.name, None


def _convert(location: HistoryLocation, target: Path, loader: Loader) -> tuple[str, list[str]]:
    """Convert the history's file into `target`; return how (bulk, exact), and notes."""
    source = location.source
    assert source is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    how = "exact"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncatedHistoryWarning)
        if location.kind == "edn":
            try:
                write_parquet(iter_jepsen_history(source), target)
            except UnicodeDecodeError as err:  # the file is not UTF-8: say where
                raise not_utf8(err, str(source)) from None
        elif loader == "exact":
            write_parquet(source, target)
        elif (fallback := write_parquet_bulk(source, target).fallback) is None:
            how = "bulk"
        else:
            notes.append(f"the bulk converter left {source} to the exact one: {fallback}")
            write_parquet(source, target)
    for warning in caught:
        if issubclass(warning.category, TruncatedHistoryWarning):
            notes.append(str(warning.message))
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return how, notes


def convert_history(
    location: HistoryLocation, *, loader: Loader = "auto"
) -> tuple[Path, str, list[str]]:
    """Make sure `location` has an up-to-date Parquet directory; return it, how, and notes
    (among them what pairing accepted as Jepsen does, recorded in the tables)."""
    notes: list[str] = []
    if _fresh(location.parquet, location.source):
        return location.parquet, "existing", pairing_notes(location.parquet)
    target, why = _writable_target(location)
    if why is not None:
        notes.append(why)
    elif target != location.parquet:
        notes.append(f"{location.parquet.parent} is not writable; converted into {target}")
        if _fresh(target, location.source):
            return target, "existing", notes + pairing_notes(target)
    how, converting = _convert(location, target, loader)
    return target, how, notes + converting + pairing_notes(target)


def _spark_log_file(location: HistoryLocation) -> Path | None:
    """The run directory's Spark log, when a run directory was given and can be written."""
    run_dir = location.run_dir
    if location.kind not in ("run", "edn") or run_dir is None or not location.given.is_dir():
        return None
    return run_dir / SPARK_LOG if os.access(run_dir, os.W_OK) else None


def load_history(
    spark: Any,
    path: str | os.PathLike[str],
    *,
    loader: Loader = "auto",
) -> LoadedHistory:
    """Locate, convert if needed, and read the four tables of the history at `path`.

    `spark` is a SparkSession or a function returning one: a malformed history is then
    reported before Spark starts, and, when `path` is a run directory squall can write to, the
    JVM's warnings go to its `spark.log` instead of the terminal (`checkers.session.spark_log`).
    """
    location = locate_history(path)
    parquet, how, notes = convert_history(location, loader=loader)
    if callable(spark):
        with spark_log(_spark_log_file(location)):
            session = spark()
    else:
        session = spark
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
