"""The anomaly catalogue (checkers.catalogue) and its pages (docs/anomalies/*.md).

No Spark session: the checkers are imported only to read the anomaly types they declare.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from checkers import catalogue
from checkers.catalogue import ANOMALIES, OPERATION_FIELDS, describe_case, history_line
from checkers.order import ALLOWED
from checkers.registry import default_checkers
from histories import HistoryFormatError, iter_history

ROOT = Path(__file__).resolve().parents[3]
CHECKER_SOURCES = sorted((ROOT / "checkers").glob("*.py"))
KEY = "squall-queue-0"


def declared_types() -> dict[str, str]:
    """Every anomaly type squall's checkers declare, with its checker's name."""
    return {name: checker.name for checker in default_checkers() for name in checker.anomalies}


FINDERS = ("finding", "rows_of")


def emitted_types() -> set[str]:
    """The anomaly types of every `finding(checker, anomaly, ...)` call in checkers/ (and
    `rows_of`, its per-key counterpart): the string, or the keys of the {type: condition}
    dict, passed as `anomaly`."""
    found: set[str] = set()
    for path in CHECKER_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in FINDERS):
                continue
            anomaly = node.args[1] if len(node.args) > 1 else None
            if isinstance(anomaly, ast.Constant) and isinstance(anomaly.value, str):
                found.add(anomaly.value)
            elif isinstance(anomaly, ast.Dict):
                found.update(
                    key.value
                    for key in anomaly.keys
                    if isinstance(key, ast.Constant) and isinstance(key.value, str)
                )
    return found


def test_the_catalogue_covers_exactly_the_types_the_checkers_declare() -> None:
    declared = declared_types()
    assert set(ANOMALIES) == set(declared)
    for name, checker in declared.items():
        assert ANOMALIES[name].checker == checker, name
        assert ANOMALIES[name].name == name


def test_every_type_a_finding_emits_is_catalogued() -> None:
    emitted = emitted_types()
    assert len(emitted) >= 15  # the scan found the checkers' calls
    assert emitted <= set(ANOMALIES)


def test_allowances_match_the_checkers() -> None:
    always = {name for name, info in ANOMALIES.items() if info.allowance == "always"}
    assert always == set(ALLOWED)
    for info in ANOMALIES.values():
        if info.allowance == "never":
            assert info.allowed_by.startswith("no configuration"), info.name
        assert set(info.operation_fields) <= set(OPERATION_FIELDS)
        assert set(info.operation_fields) <= set(info.fields)
        assert info.doc == f"docs/anomalies/{info.name}.md"


def test_meanings_are_one_sentence() -> None:
    for info in ANOMALIES.values():
        assert info.meaning[0].isupper() and info.meaning.endswith("."), info.name
        assert info.meaning.count(". ") == 0, info.name
        assert info.allowed_by and info.shows


def test_as_dict_is_json() -> None:
    data = json.loads(json.dumps({name: info.as_dict() for name, info in ANOMALIES.items()}))
    assert data["lost-write"]["operation_fields"] == ["writer"]
    assert data["G1a"]["operation_fields"] == ["writer", "reader"]


def pages() -> Iterator[tuple[str, str]]:
    for name, info in ANOMALIES.items():
        yield name, (ROOT / info.doc).read_text(encoding="utf-8")


def test_every_page_exists_and_states_its_name_and_meaning() -> None:
    index = (ROOT / "docs" / "anomalies.md").read_text(encoding="utf-8")
    for name, text in pages():
        assert text.startswith(f"# `{name}`\n"), name
        assert ANOMALIES[name].meaning in text, name
        assert "](../anomalies.md" in text, name
        assert 40 <= text.count("\n") <= 90, name
        assert f"](anomalies/{name}.md)" in index, name


def page_example(text: str) -> tuple[dict[str, Any], str]:
    """A page's results.json case (the JSON block that is one object and no history line)
    and the sentence it quotes as squall's explanation."""
    cases = []
    for block in re.findall(r"```json\n(.*?)```", text, flags=re.S):
        try:
            parsed = json.loads(block)
        except ValueError:
            continue
        if isinstance(parsed, dict) and "f" not in parsed:
            cases.append(parsed)
    quoted = re.search(
        r"squall\s+explains\s+(?:the\s+case\s+|it\s+)?as:\s*\"(.*?)\"", text, flags=re.S
    )
    assert len(cases) == 1 and quoted is not None
    return cases[0], " ".join(quoted.group(1).split())


@pytest.mark.parametrize("name", list(ANOMALIES))
def test_each_page_quotes_what_describe_case_says_of_its_example(name: str) -> None:
    text = (ROOT / ANOMALIES[name].doc).read_text(encoding="utf-8")
    case, quoted = page_example(text)
    described = describe_case(name, case)
    assert described["text"] == quoted
    assert described["key"] == KEY
    for line in described["lines"]:
        assert f'"index":{line - 1},' in text, (name, line)


def test_lines_are_indices_plus_one_as_the_reader_enforces(tmp_path: Path) -> None:
    lines = [
        {"index": i, "time": i, "process": 0, "type": t, "f": "poll", "value": v}
        for i, (t, v) in enumerate([("invoke", [["poll"]]), ("ok", [["poll", {KEY: [[0, 1]]}]])])
    ]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    for number, op in enumerate(iter_history(path), start=1):
        assert history_line(op.index) == number
    lines[0]["index"] = 1
    path.write_text(json.dumps(lines[0]) + "\n", encoding="utf-8")
    with pytest.raises(HistoryFormatError, match="line 1"):
        list(iter_history(path))


def test_history_line() -> None:
    assert history_line(0) == 1
    assert history_line(9) == 10
    for bad in (-1, True, None, "3", 2.0):
        assert history_line(bad) is None


def test_lost_write() -> None:
    case = {
        "key": KEY,
        "value": 4,
        "offset": 2,
        "writer": 9,
        "status": "ok",
        "acks": -1,
        "time": 160419,
        "index": 2,
        "max_read_index": 3,
    }
    assert describe_case("lost-write", case) == {
        "key": KEY,
        "offsets": [2],
        "lines": [10],
        "text": f"key {KEY}: value 4 written at offset 2 by the operation completed on line 10 "
        "(ok, acks=-1) was never read by an ok poll, although ok polls of the key reached "
        "dense index 3, past the write's 2",
    }


def test_an_info_write_never_completed_and_without_acks_jepsen_style() -> None:
    case = {"key": "7", "value": "v-4", "offset": 2, "status": "info", "index": 2}
    described = describe_case("lost-write", case)
    assert described["lines"] == []
    assert described["text"] == (
        'key 7: value "v-4" written at offset 2 by an operation that never completed (info) '
        "was never read by an ok poll, although ok polls of the key reached its offset or beyond"
    )


def test_an_expected_unseen_write_says_why() -> None:
    case = {"key": KEY, "value": 12, "writer": 61, "status": "ok", "acks": 0, "time": 5}
    case["expected_because"] = "sent with acks=0"
    assert describe_case("unseen", case)["text"] == (
        f"key {KEY}: value 12 written (offset unknown) by the operation completed on line 62 "
        "(ok, acks=0) was never read by an ok poll; expected: sent with acks=0"
    )


def test_g1a_names_the_writer_and_the_reader() -> None:
    case = {"key": KEY, "value": 30, "writer": 21, "reader": 33, "reads": 3}
    described = describe_case("G1a", case)
    assert described["lines"] == [22, 34]
    assert described["offsets"] == []
    assert described["text"].endswith("was read by the ok poll on line 34 (3 ok reads in all)")


def test_steps_between_and_inside_operations() -> None:
    skip = {
        "key": KEY,
        "process": 4,
        "ops": [30, 40],
        "values": [3, 8],
        "offsets": [2, 5],
        "delta": 3,
        "skipped": 2,
    }
    assert describe_case("poll-skip", skip)["lines"] == [31, 41]
    back = {
        "key": KEY,
        "process": 1,
        "ops": [11, 15],
        "values": [12, 13],
        "offsets": [None, 6],
        "delta": 0,
    }
    described = describe_case("nonmonotonic-send", back)
    assert described["offsets"] == [6]
    assert described["text"] == (
        f"key {KEY}: process 1's send completed on line 16 put value 13 at offset 6, but its "
        "previous send to the key, completed on line 12, had put value 12 (offset not "
        "reported): a step of 0 dense indices"
    )
    inside = {
        "key": KEY,
        "process": 2,
        "op": 21,
        "status": "ok",
        "values": [20, 21],
        "offsets": [3, 5],
        "delta": 2,
    }
    assert describe_case("int-send-skip", inside)["lines"] == [22]


def test_consumer_groups_and_unclean_windows() -> None:
    violation = {
        "key": KEY,
        "value": 70,
        "offset": 30,
        "writer": 301,
        "commit": 311,
        "committed": 32,
        "acks": -1,
        "read_by_anyone": True,
    }
    described = describe_case("at-least-once-violation", violation)
    assert described["lines"] == [302, 312]
    assert described["text"].endswith(
        "committed offset 32, past it (a consumer outside the group read it)"
    )
    window = {
        "key": KEY,
        "election": 120,
        "time": 5,
        "leader": 2,
        "previous_leader": 1,
        "leader_epoch": 4,
        "isr": [2],
        "offsets": [20, 20],
        "lost": 7,
        "window": [1, 5],
        "lost_values": [50, 51, 52, 53, 54],
    }
    described = describe_case("unclean-loss-window", window)
    assert described["lines"] == [121]
    assert described["offsets"] == [20, 20]
    assert (
        "lost 7 acknowledged writes at offset 20 (values 50, 51, 52, 53, 54, ...)"
        in (described["text"])
    )


def test_a_duplicate_with_its_sends() -> None:
    case = {
        "key": KEY,
        "value": 5,
        "offsets": [4, 6],
        "count": 2,
        "index": 4,
        "sends": [
            {"invoke_index": 14, "index": 17, "type": "ok", "offset": 6},
            {"invoke_index": 20, "type": "info", "pending": True},
        ],
    }
    described = describe_case("duplicate", case)
    assert described["lines"] == [18, 21]
    assert described["text"] == (
        f"key {KEY}: value 5 sits at 2 offsets (4, 6), sent by the operations on line 18 (ok), "
        "line 21 (never completed)"
    )


class Hostile(Mapping[str, Any]):
    """A mapping every read of which fails."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("no")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no")

    def __len__(self) -> int:
        return 1


GARBAGE: list[Any] = [
    None,
    7,
    "lost-write",
    [1, 2],
    {},
    {"key": None},
    {"value": {"a": [1]}, "offset": "2", "writer": -3, "acks": "all"},
    {"values": 5, "ops": "30,40", "offsets": [True, "x"], "delta": "3"},
    {"values": [1], "ops": [1], "process": None, "op": 2.5},
    {"election": "x", "offsets": None, "lost": -1, "lost_values": "a"},
    {"sends": [None, 3, {"index": "x"}], "value": 1, "offsets": [1]},
    {"key": ["a"], "expected_because": 5},
    Hostile(),
]


@pytest.mark.parametrize("case", GARBAGE, ids=range(len(GARBAGE)))
@pytest.mark.parametrize("name", [*ANOMALIES, "no-such-anomaly", None, 3])
def test_garbage_gets_a_generic_explanation_without_raising(name: Any, case: Any) -> None:
    described = describe_case(name, case)
    assert set(described) == {"key", "offsets", "lines", "text"}
    assert isinstance(described["text"], str) and described["text"]
    assert all(type(line) is int and line >= 1 for line in described["lines"])
    assert all(type(offset) is int for offset in described["offsets"])


def test_a_case_without_its_essential_field_is_described_generically() -> None:
    described = describe_case("lost-write", {"key": KEY, "writer": 9, "offset": 2})
    assert described == {
        "key": KEY,
        "offsets": [2],
        "lines": [10],
        "text": f"lost-write on key {KEY}, offset 2; history line 10",
    }
    assert describe_case("poll-skip", {})["text"] == "poll-skip (key unknown)"
    nothing: Any = None
    assert describe_case("G1a", nothing)["text"] == "G1a: a case of unexpected shape (NoneType)"


def test_the_module_needs_no_spark() -> None:
    source = Path(catalogue.__file__).read_text(encoding="utf-8")
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "json", "collections", "dataclasses", "typing"}
