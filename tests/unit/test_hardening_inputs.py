"""Issue 17, hardening: private cache directories instead of predictable /tmp paths, an
escaped report, histories refused with their file and line, bounded specs."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

import pytest

from checkers.cache_dir import check_private, private_cache_dir
from checkers.load import convert_history, load_history, locate_history
from checkers.session import SPARK_LOG, SparkSettings, log4j2_config
from histories import EdnError, HistoryFormatError, read_history, write_parquet
from histories.edn import loads_edn
from squall.report.html import render_html
from squall.spec import SpecError, TestSpec

INVOKE = '{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send","k",1]]}'
OK = '{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","k",[0,1]]]}'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user cache of the test's own, and a temporary directory of its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    return tmp_path / "cache"


def _history(directory: Path, *lines: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "history.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _read_only_run_dir(monkeypatch: pytest.MonkeyPatch, run: Path) -> None:
    """The run directory cannot be written (os.access, since root may write anywhere)."""
    real = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        if mode == os.W_OK and Path(str(path)).is_relative_to(run):
            return False
        return real(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)


def _plant(directory: Path) -> None:
    """A forged, complete and fresh history.parquet/ (of an empty history) in `directory`."""
    empty = directory.parent / "forged.jsonl"
    directory.parent.mkdir(parents=True, exist_ok=True)
    empty.write_text(INVOKE + "\n")
    write_parquet(empty, directory)


# --- 10: predictable /tmp paths ------------------------------------------------------------


def test_a_parquet_planted_in_the_shared_tmp_is_never_reused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    source = _history(run, INVOKE, OK)
    digest = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16]
    _plant(Path(tempfile.gettempdir()) / f"squall-check-{digest}" / "history.parquet")
    _read_only_run_dir(monkeypatch, run)
    parquet, how, _ = convert_history(locate_history(run))
    assert how == "bulk"  # converted, not the planted "existing" one
    assert parquet.is_relative_to(cache / "squall" / "check")
    for directory in (cache / "squall", cache / "squall" / "check", parquet.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert convert_history(locate_history(run))[1] == "existing"  # its own: reused


@pytest.mark.parametrize("flaw", ["writable by others", "owned by another user"])
def test_a_cache_directory_that_is_not_private_is_refused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, flaw: str
) -> None:
    run = tmp_path / "run"
    source = _history(run, INVOKE, OK)
    digest = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16]
    planted = cache / "squall" / "check" / digest
    _plant(planted / "history.parquet")
    if flaw == "writable by others":
        planted.chmod(0o777)
    else:
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    _read_only_run_dir(monkeypatch, run)
    parquet, how, notes = convert_history(locate_history(run))
    assert how == "bulk" and not parquet.is_relative_to(planted)
    assert parquet.is_relative_to(tempfile.gettempdir())  # a new private temporary directory
    assert stat.S_IMODE(parquet.parent.stat().st_mode) == 0o700
    assert "cannot be trusted" in notes[0]
    with pytest.raises(PermissionError, match=r"writable by other|not to the current user"):
        check_private(planted)


def test_a_symbolic_link_is_not_a_private_directory(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="not a directory"):
        check_private(tmp_path / "link")


def test_the_log4j2_configuration_is_in_the_private_cache(cache: Path) -> None:
    options = SparkSettings().conf()["spark.driver.extraJavaOptions"].split()
    uri = next(o for o in options if o.startswith("-Dlog4j2.configurationFile="))
    path = Path(uri.removeprefix("-Dlog4j2.configurationFile=file://"))
    assert path.is_relative_to(cache / "squall" / "spark")
    assert not path.is_relative_to(tempfile.gettempdir())
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == log4j2_config(None)
    assert private_cache_dir("spark") == path.parent


def test_spark_warnings_go_to_the_run_directory_log(tmp_path: Path, cache: Path) -> None:
    log = tmp_path / "run" / SPARK_LOG
    text = log4j2_config(log)
    assert f"appender.file.fileName = {log}" in text
    assert "rootLogger.level = warn" in text and "console" not in text
    # Spark prints "Setting default log level" unless the gateway's logger has the root level
    assert "logger.gateway.level = warn" in text
    assert "logger.gateway.level = error" in log4j2_config(None)
    assert log4j2_config(tmp_path / "a$b" / SPARK_LOG) == log4j2_config(None)  # a lookup
    options = SparkSettings(log_file=log).conf()["spark.driver.extraJavaOptions"]
    configured = Path(options.split("file://")[1].split()[0])
    assert configured.read_text() == text


def test_load_history_names_the_run_directory_log_to_spark(tmp_path: Path, cache: Path) -> None:
    from checkers import session

    run = tmp_path / "run"
    _history(run, INVOKE, OK)
    seen: list[Path | None] = []

    class Reader:
        def parquet(self, path: str) -> str:
            return path

    class Session:
        read = Reader()

    def start() -> Session:
        seen.append(session._spark_log.get())
        return Session()

    load_history(start, run)
    load_history(start, run / "history.jsonl")  # a bare file: no run directory known
    assert seen == [run / SPARK_LOG, None]


# --- 11: the report escapes test.json and results.json -----------------------------------


def test_report_escapes_test_json_and_results_and_survives_odd_types() -> None:
    evil = "<script>alert(1)</script>"
    results = {
        "valid": False,
        "anomaly_types": [evil, 3],
        "checkers": {
            "delivery": {
                "valid": False,
                "anomalies": {"lost-write": [{"value": evil}]},
                "counts": {"lost-write": evil},
            }
        },
        "stats": {"ops": evil, "duration_s": "long", "faults": "none", "by_f": []},
        "notes": evil,
    }
    test = {"name": "t", "seed": evil, "nodes": "<img src=x onerror=alert(1)>"}
    faults = [{"time": "soon<b>", "f": evil, "value": {}}, {"time": 2_500_000_000, "f": "kill"}]
    page = render_html(results, test=test, faults=faults)
    assert "<script>" not in page and "<img src=x" not in page and "<b>" not in page
    assert "seed &lt;script&gt;" in page and "&lt;img src=x" in page
    assert "<td>soon&lt;b&gt;</td>" in page and "<td>2.5</td>" in page
    assert "lost-write (&lt;script&gt;" in page


# --- 12: history input refused with file and line ----------------------------------------


def test_one_object_over_several_lines_is_refused(tmp_path: Path) -> None:
    spread = INVOKE.replace('"type"', '\n"type"')
    path = _history(tmp_path, spread, OK)
    with pytest.raises(HistoryFormatError, match="spread over lines 1 to 2") as caught:
        read_history(path)
    assert caught.value.line == 1 and caught.value.path == str(path)


@pytest.mark.parametrize(
    "line",
    [
        OK.replace("}", ',"error":"\\ud800"}', 1).replace('"ok"', '"fail"'),
        OK.replace("}", ',"node":"n\\udc00"}', 1),
        OK.replace('"k"', '"\\ud800"'),
        OK.replace('"f":"send"', '"f":"s\\udfff"').replace('"process":0', '"process":"nemesis"')
        .replace('"ok"', '"info"'),
        '{"index":1,"time":2,"process":1,"type":"invoke","f":"assign","value":["\\ud800"]}',
    ],
)  # fmt: skip
def test_lone_surrogates_are_refused_with_the_line(tmp_path: Path, line: str) -> None:
    path = _history(tmp_path, INVOKE, line)
    with pytest.raises(
        HistoryFormatError, match=r"line 2: field '(f|error|node|value)' holds a lone"
    ):
        read_history(path)
    with pytest.raises(HistoryFormatError, match=r"line 2: .*lone surrogate"):
        write_parquet(path, tmp_path / "history.parquet")  # was a UnicodeEncodeError


def test_lone_surrogates_held_as_json_text_are_kept(tmp_path: Path) -> None:
    """Sent and read values and extra fields are held as JSON text (`\\ud800`), as the bulk
    converter holds them: they are read and converted as written."""
    line = OK.replace("[0,1]]]", '[0,"x\\udfff"]]]').replace('"index":1', '"\\udc00":1,"index":1')
    path = _history(tmp_path, INVOKE, line)
    assert read_history(path)[1].value == [["send", "k", [0, "x\udfff"]]]
    write_parquet(path, tmp_path / "history.parquet")


def test_a_surrogate_pair_is_one_character(tmp_path: Path) -> None:
    path = _history(tmp_path, INVOKE, OK.replace("}", ',"error":"\\ud83d\\ude00"}', 1))
    assert read_history(path)[1].error == "\U0001f600"


def test_json_nested_too_deeply_is_refused_with_the_line(tmp_path: Path) -> None:
    deep = INVOKE.replace('"value":', '"x":' + "[" * 5000 + "]" * 5000 + ',"value":')
    for lines in ((INVOKE, deep), (INVOKE, "[" * 5000)):
        path = _history(tmp_path / str(len(lines[1])), *lines)
        with pytest.raises(HistoryFormatError, match=r"line 2: .*(nested too deeply|JSON)"):
            read_history(path)


def _edn(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "history.edn"
    path.write_bytes(data)
    return path


def test_edn_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = _edn(tmp_path, b'{:type :invoke, :f :poll, :process 0, :time 1}\n{:f "\xff"}\n')
    with pytest.raises(EdnError, match=r"history.edn, line 2, column 6: not UTF-8"):
        convert_history(locate_history(path))


def test_edn_huge_integers_name_the_line() -> None:
    with pytest.raises(EdnError, match="line 2, column 6: number 9999"):
        loads_edn("[1\n 2 3 " + "9" * 5000 + "]")
    with pytest.raises(EdnError, match="line 1, column 2: number 0xff"):
        loads_edn("[0x" + "f" * 4000 + "]")
    assert loads_edn("9" * 4300) == int("9" * 4300)


def test_edn_lone_surrogates_and_deep_nesting_name_the_line() -> None:
    assert loads_edn('"\\ud83d\\ude00"') == "\U0001f600"
    with pytest.raises(EdnError, match="line 2, column 1: string holds a lone"):
        loads_edn('[\n"\\ud800"]')
    with pytest.raises(EdnError, match="line 1, column 2: character literal"):
        loads_edn("[\\ud800]")
    with pytest.raises(EdnError, match="nested more than 200 deep"):
        loads_edn("[" * 5000 + "]" * 5000)


# --- 13: spec bounds -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("nodes = 201", "nodes = 201: at most 200 nodes"),
        ("time_limit_s = inf", "time_limit_s = Infinity: must be a finite number"),
        ("time_limit_s = nan", "time_limit_s = NaN: must be a finite number"),
        ("recovery_wait_s = -inf", "recovery_wait_s = -Infinity"),
        ("time_limit_s = 1e300", "time_limit_s = 1e\\+300: must be less than or equal to"),
        ("recovery_wait_s = 1e10", "recovery_wait_s = 10000000000.0: must be less than or"),
    ],
)
def test_spec_bounds(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(f'name = "t"\n{toml}\n')
    with pytest.raises(SpecError, match=message):
        TestSpec.load(path)


def test_two_hundred_nodes_and_thirty_days_are_accepted() -> None:
    spec = TestSpec.from_mapping(
        {"name": "t", "nodes": 200, "time_limit_s": 30 * 86400.0}, source="x"
    )
    assert spec.nodes == 200
    assert TestSpec.model_json_schema()["properties"]["nodes"]["maximum"] == 200
