"""Finding a history, converting it once, reading the tested configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from checkers import CheckConfig, HistoryNotFoundError, TestConfigError, load, load_history
from checkers.config import Loader, TestSettings, find_test_settings, read_test_settings
from checkers.load import convert_history, locate_history
from histories import HistoryFormatError, HistoryWriter, write_parquet
from histories.bulk_parquet import BulkOutcome

FIXTURE = Path(__file__).parent.parent / "data" / "histories" / "jepsen_kafka_history.edn"


def _history(path: Path) -> Path:
    with HistoryWriter(path) as writer:
        invoke = writer.invoke(0, "send", [["send", "k", 1]])
        writer.complete(invoke, "ok", [["send", "k", [0, 1]]])
    return path


def test_locate_every_kind_of_path(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    jsonl = _history(run / "history.jsonl")
    located = locate_history(run)
    assert (located.kind, located.source, located.parquet) == (
        "run", jsonl, run / "history.parquet")  # fmt: skip
    assert locate_history(jsonl).parquet == run / "history.parquet"
    other = _history(tmp_path / "other.jsonl")
    assert locate_history(other).parquet == tmp_path / "other.parquet"
    write_parquet(jsonl, run / "history.parquet")
    assert locate_history(run / "history.parquet").kind == "parquet"
    edn_run = tmp_path / "jepsen"
    edn_run.mkdir()
    (edn_run / "history.edn").write_text(FIXTURE.read_text())
    assert locate_history(edn_run).kind == "edn"
    assert locate_history(edn_run / "history.edn").parquet == edn_run / "history.parquet"


@pytest.mark.parametrize("name", ["empty", "missing", "broken.parquet"])
def test_paths_without_a_history_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name != "missing":
        path.mkdir()
    with pytest.raises(HistoryNotFoundError, match=str(path)):
        locate_history(path)


def test_converted_once_then_reused_until_the_history_changes(spark: Any, tmp_path: Path) -> None:
    jsonl = _history(tmp_path / "history.jsonl")
    assert load_history(spark, tmp_path).loader == "bulk"
    loaded = load_history(spark, tmp_path)
    assert loaded.loader == "existing"
    assert loaded.mops.count() == 2
    with HistoryWriter(jsonl) as writer:
        writer.invoke(1, "poll", [["poll"]])
    later = os.stat(jsonl).st_mtime_ns + 1_000_000
    os.utime(jsonl, ns=(later, later))
    again = load_history(spark, tmp_path, loader="exact")
    assert again.loader == "exact"
    assert again.ops.count() == 3


def test_what_the_bulk_converter_leaves_is_converted_exactly_and_noted(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(tmp_path / "history.jsonl")

    def declines(source: Path, target: Path) -> BulkOutcome:
        return BulkOutcome(None, "line 2: a shape it does not know")

    monkeypatch.setattr(load, "write_parquet_bulk", declines)
    loaded = load_history(spark, tmp_path)
    assert loaded.loader == "exact"
    assert loaded.ops.count() == 2
    assert any("a shape it does not know" in note for note in loaded.notes), loaded.notes


def test_malformed_history_is_reported_before_spark_starts(tmp_path: Path) -> None:
    path = _history(tmp_path / "history.jsonl")
    with open(path, "a") as fh:
        fh.write('{"index": 2, "time": 5, "process": 0, "type": "bogus", "f": "send"}\n')

    def no_spark() -> Any:
        raise AssertionError("Spark must not start for a malformed history")

    with pytest.raises(HistoryFormatError, match=r"history.jsonl, line 3"):
        load_history(no_spark, tmp_path)


def test_torn_last_line_is_noted(spark: Any, tmp_path: Path) -> None:
    path = _history(tmp_path / "history.jsonl")
    with open(path, "a") as fh:
        fh.write('{"index": 2, "ti')
    loaded = load_history(spark, tmp_path)
    assert any("torn" in note for note in loaded.notes)
    assert loaded.ops.count() == 2


@pytest.mark.parametrize("loader", ["auto", "exact"])
def test_jepsen_leniency_is_noted_each_time_the_tables_are_read(
    tmp_path: Path, loader: Loader
) -> None:
    (tmp_path / "history.jsonl").write_text(
        '{"index":0,"time":0,"process":0,"type":"invoke","f":"poll","value":[["poll"]]}\n'
        '{"index":1,"time":1,"process":0,"type":"info","f":"poll","value":null}\n'
        '{"index":2,"time":2,"process":0,"type":"fail","f":"poll","value":null}\n'
    )
    parquet, how, notes = convert_history(locate_history(tmp_path), loader=loader)
    assert how == ("bulk" if loader == "auto" else "exact")
    expected = [
        "1 operation came from a process after its info completion (line 3); the process "
        "went on, its next completion pairing with its next invoke, as Jepsen does",
        "1 completion had no invoke (line 3); it was taken as invoked at its own time, as "
        "Jepsen does",
    ]
    assert notes == expected
    # Reused tables, or the tables themselves: the note comes from ops.parquet's footer.
    assert convert_history(locate_history(tmp_path)) == (parquet, "existing", expected)
    assert convert_history(locate_history(parquet))[2] == expected


def test_test_json(tmp_path: Path) -> None:
    path = tmp_path / "test.json"
    path.write_text(
        json.dumps(
            {
                "name": "x",
                "topic": {"replication_factor": 3, "min_insync_replicas": 2,
                          "unclean_leader_election": False},
                "workload": {"acks": "all"},
            }
        )
    )  # fmt: skip
    settings = read_test_settings(path)
    assert settings.acks == -1 and settings.promises_no_loss
    assert find_test_settings(tmp_path) == settings
    assert find_test_settings(tmp_path / "nowhere") == TestSettings()
    assert not TestSettings(min_insync_replicas=1, unclean_leader_election=False).promises_no_loss
    assert not TestSettings(min_insync_replicas=2).promises_no_loss
    path.write_text('{"topic": {"min_insync_replicas": "two"}}')
    with pytest.raises(TestConfigError, match="min_insync_replicas is 'two'"):
        read_test_settings(path)
    path.write_text('{"workload": {"acks": 2}}')
    with pytest.raises(TestConfigError, match=r"workload\.acks"):
        read_test_settings(path)
    path.write_text('{"broker_in_force": {"offsets.topic.min.insync.replicas": "1"}}')
    assert read_test_settings(path).offsets_min_insync_replicas == 1
    path.write_text('{"broker_in_force": {"offsets.topic.min.insync.replicas": "0"}}')
    with pytest.raises(TestConfigError, match=r"offsets\.topic\.min\.insync\.replicas is 0"):
        read_test_settings(path)
    path.write_text('{"broker_in_force": {"replica.lag.time.max.ms": "soon"}}')
    with pytest.raises(TestConfigError, match=r"replica\.lag\.time\.max\.ms is 'soon'"):
        read_test_settings(path)
    path.write_text("{not json")
    with pytest.raises(TestConfigError, match="cannot be read as JSON"):
        read_test_settings(path)


def test_check_config_is_validated() -> None:
    with pytest.raises(ValueError, match="sample"):
        CheckConfig(sample=-1)
    with pytest.raises(ValueError, match="expect_loss"):
        CheckConfig(expect_loss=frozenset({"acks2"}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="loader"):
        CheckConfig(loader="fast")  # type: ignore[arg-type]
