"""Fuzzing the readers of outside input: histories (JSON lines, exact and bulk; Jepsen EDN),
test specs and inventories.

Random and mutated inputs must end either in a result or in the documented error of the
reader (which the CLI turns into exit 2 naming the file and line): never another exception,
never a hang (inputs are small), and nothing written but a converter's own output.
`RECEIVED` counts the inputs each target was given (printed when the module ends: run with
``-s`` to see them).
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.load import convert_history, locate_history
from histories import HistoryError, HistoryFormatError, TruncatedHistoryWarning, read_history
from histories.bulk_parquet import write_parquet_bulk
from histories.edn import EdnError, decode_edn, iter_edn
from histories.parquet import write_parquet
from squall.cluster.inventory import InventoryError, load_inventory
from squall.spec import SpecError, TestSpec

RECEIVED: Counter[str] = Counter()
KNOWN: Counter[str] = Counter()
"""Inputs that hit a known, reported defect outside the readers under test (see below)."""

FUZZ = settings(
    max_examples=int(os.environ.get("SQUALL_FUZZ_EXAMPLES", "500")),  # more to search longer
    deadline=timedelta(seconds=10),  # a hang, not a slow machine
    database=None,  # write nothing into the working tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

JSONL_SEED = b"".join(
    (json.dumps(line, separators=(",", ":")) + "\n").encode()
    for line in [
        {"index": 0, "time": 10, "process": 0, "type": "invoke", "f": "send",
         "value": [["send", "t-0", 1]], "acks": -1, "node": "n1", "key": "t-0"},
        {"index": 1, "time": 20, "process": 0, "type": "ok", "f": "send",
         "value": [["send", "t-0", [0, 1]]], "acks": -1, "node": "n1", "key": "t-0"},
        {"index": 2, "time": 30, "process": 1, "type": "invoke", "f": "poll",
         "value": [["poll"]]},
        {"index": 3, "time": 40, "process": 1, "type": "ok", "f": "poll",
         "value": [["poll", {"t-0": [[0, 1]]}]]},
        {"index": 4, "time": 45, "process": "nemesis", "type": "info", "f": "kill",
         "value": {"targets": ["n1"]}},
        {"index": 5, "time": 50, "process": "sut", "type": "info", "f": "leader-election",
         "value": {"key": "t-0", "leader": 2, "leader_epoch": 1, "isr": [2], "unclean": False}},
        {"index": 6, "time": 60, "process": 1, "type": "invoke", "f": "commit",
         "value": {"t-0": 1}},
        {"index": 7, "time": 70, "process": 1, "type": "fail", "f": "commit", "value": None,
         "error": "timeout"},
        {"index": 8, "time": 80, "process": 2, "type": "invoke", "f": "assign",
         "value": ["t-0"]},
        {"index": 9, "time": 90, "process": 2, "type": "info", "f": "assign", "value": None,
         "error": "lost \u00e9 \U0001f600"},
    ]
)  # fmt: skip
EDN_SEED = (Path(__file__).parent / "data" / "histories" / "jepsen_kafka_history.edn").read_bytes()
SPEC_SEED = b"""name = "acks-all"
runtime = "local"
nodes = 3
seed = 42
time_limit_s = 60
recovery_wait_s = 10

[broker]
"replica.truncation" = "leader-epoch"

[workload]
acks = -1
partitions = 3
replication_factor = 3
topic_config = { "min.insync.replicas" = "2" }

[nemesis]
faults = { kill = 1, partition = 1 }
interval_s = [5, 10]
duration_s = [3, 6]
"""
INVENTORY_SEED = b"""[defaults]
key_file = "id_test"
port = 2222

[[brokers]]
name = "n1"
host = "192.0.2.11"
host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq2bJlzVQSyRRvN6ytBVPGQe7Tqk5uIJXWeGmrK5xxo"

[[brokers]]
name = "n2"
host = "192.0.2.12"
host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq2bJlzVQSyRRvN6ytBVPGQe7Tqk5uIJXWeGmrK5xxo"
user = "squall"
root = "/srv/squall"

[zookeeper]
host = "192.0.2.20"
host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq2bJlzVQSyRRvN6ytBVPGQe7Tqk5uIJXWeGmrK5xxo"
"""

# Fragments that stress readers: structure, escapes, numbers, encodings, line ends.
TOKENS = [
    b"\n", b"\r\n", b"\r", b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b" ",
    b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"\\u0000", b"\\n", b"\x00", b"\xff",
    b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"NaN", b"Infinity", b"-Infinity", b"1e999",
    b"-0", b"1.5", b"9" * 30, b"9" * 5000, b"-" + b"9" * 19, b"null", b"true", b"[" * 3000,
    b"{}", b"[]", b'"nemesis"', b'"sut"', b'"ok"', b'"info"', b'"invoke"', b'"send"',
    b'"poll"', b'"txn"', b'"index"', b'"time"', b'"value"',
    # EDN and TOML
    b":ok", b":nemesis", b"#{", b"#_", b"#inst", b"##Inf", b"##NaN", b"\\u", b"\\o777",
    b"1/0", b"3/4", b"1N", b"2.5M", b"0x", b"0xFFFFFFFFFFFFFFFFFFFFFF", b";", b"(", b")",
    b"nil", b"= ", b"[[", b"]]", b'"""', b"'''", b"inf", b"nan", b"1979-05-27T07:32:00Z",
    b"\\U0001F600", b"\\uD800", b"\t",
]  # fmt: skip
# tomllib recurses once per nesting level and squall.config.toml_file does not catch the
# RecursionError (a known defect, `test_known_toml_defects`): no deep nesting for TOML.
TOML_TOKENS = [token for token in TOKENS if len(token) < 100]


@st.composite
def mutated(
    draw: st.DrawFn, seed: bytes, max_steps: int = 6, tokens: list[bytes] = TOKENS
) -> bytes:
    """`seed` with a few random edits: bytes flipped, fragments inserted, spans deleted,
    lines duplicated, swapped or cut."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, max_steps))):
        at = draw(st.integers(0, len(data)))
        step = draw(st.sampled_from(["byte", "token", "delete", "line", "cut"]))
        if step == "byte" and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif step == "token":
            data[at:at] = draw(st.sampled_from(tokens))
        elif step == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif step == "line":
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if draw(st.booleans()):
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        else:
            del data[at:]
    return bytes(data)


def _tokens(tokens: list[bytes] = TOKENS, max_size: int = 40) -> st.SearchStrategy[bytes]:
    return st.lists(st.sampled_from(tokens) | st.binary(max_size=8), max_size=max_size).map(
        b"".join
    )


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["send", "poll", "ok", "t-0", "\ud800", "nemesis", "sut"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@st.composite
def operation_lines(draw: st.DrawFn) -> bytes:
    """Lines of JSON objects shaped like operations, mostly almost valid."""
    out = []
    for index in range(draw(st.integers(0, 8))):
        op: dict[str, Any] = {
            "index": draw(st.just(index) | st.integers(-1, 9) | _SCALARS),
            "time": draw(st.integers(-(2**64), 2**64) | _SCALARS),
            "process": draw(st.integers(-1, 3) | st.sampled_from(["nemesis", "sut"]) | _SCALARS),
            "type": draw(st.sampled_from(["invoke", "ok", "fail", "info"]) | _SCALARS),
            "f": draw(
                st.sampled_from(["send", "poll", "txn", "commit", "assign", "leader-election"])
                | _SCALARS
            ),
            "value": draw(_VALUES),
        }
        for name in draw(st.sets(st.sampled_from(["error", "node", "acks", "final", "key", "x"]))):
            op[name] = draw(_SCALARS)
        for name in draw(st.sets(st.sampled_from(list(op)), max_size=2)):
            del op[name]
        out.append(json.dumps(op, separators=(",", ":"), ensure_ascii=draw(st.booleans())))
    text = "\n".join(out) + draw(st.sampled_from(["\n", ""]))
    return text.encode("utf-8", "surrogatepass")


_KEYS = st.sampled_from(["t-0", "t-1", 0, 7]) | st.text(max_size=3)
_STRINGS = st.text(max_size=4) | st.sampled_from(["\ud800", "\udfff", "\U0001f600", "é", '"', "\\"])
_SENT = st.integers(-(2**64), 2**64) | _STRINGS


@st.composite
def well_formed(draw: st.DrawFn) -> bytes:
    """Histories of paired sends, polls, commits, nemesis and SUT operations as squall writes
    them (or with the fields in another order), with odd keys, values and strings."""
    lines: list[dict[str, Any]] = []
    for process in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["send", "poll", "commit", "nemesis", "sut"]))
        key, sent, offset = draw(_KEYS), draw(_SENT), draw(st.integers(-1, 2**63))
        error = draw(st.none() | _STRINGS)
        if kind == "send":
            done = draw(st.sampled_from(["ok", "fail", "info"]))
            pair = [
                ("invoke", [["send", key, sent]]),
                (done, [["send", key, [offset, sent]]] if done == "ok" else None),
            ]
        elif kind == "poll":
            pair = [("invoke", [["poll"]]), ("ok", [["poll", {str(key): [[offset, sent]]}]])]
        elif kind == "commit":
            pair = [("invoke", {str(key): offset}), ("ok", {str(key): offset})]
        else:
            value = {"key": key, "leader": offset, "isr": [1], "note": draw(_STRINGS)}
            lines.append({"process": kind, "type": "info", "f": "leader-election",
                          "value": value, "error": error})  # fmt: skip
            continue
        for op_type, value in pair:
            lines.append({"process": process, "type": op_type, "f": kind, "value": value,
                          "node": draw(st.none() | _STRINGS), "error": error})  # fmt: skip
    out = []
    for index, line in enumerate(lines):
        line = {
            "index": index,
            "time": index * 10,
            **{k: v for k, v in line.items() if v is not None or k == "value"},
        }
        if draw(st.booleans()):
            line = dict(reversed(line.items()))
        out.append(json.dumps(line, separators=(",", ":"), ensure_ascii=draw(st.booleans())))
    return ("\n".join(out) + "\n").encode("utf-8", "surrogatepass")


JSONL_INPUTS = st.one_of(
    mutated(JSONL_SEED),
    operation_lines(),
    well_formed(),
    well_formed().flatmap(lambda seed: mutated(seed, max_steps=2)),
    _tokens(),
)


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point the user's cache somewhere private to this module, and check it stays empty."""
    cache = tmp_path_factory.mktemp("cache")
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield cache
    if saved is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = saved
    assert list(cache.iterdir()) == []


def teardown_module() -> None:
    print("\nfuzz inputs received per target:", dict(sorted(RECEIVED.items())))
    print("inputs that hit known defects:", dict(sorted(KNOWN.items())))


def _in_directory(
    data: bytes, name: str, run: Callable[[Path], Any], allowed: tuple[type[BaseException], ...]
) -> set[str]:
    """Write `data` as `name` in a new directory, `run` on it expecting a result or one of
    `allowed`; return what the directory holds afterwards besides the input."""
    with tempfile.TemporaryDirectory(prefix="squall-fuzz-") as directory:
        path = Path(directory) / name
        path.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TruncatedHistoryWarning)
            try:
                run(path)
            except allowed as err:
                assert str(err)
        return {p.name for p in Path(directory).iterdir()} - {name}


@FUZZ
@given(JSONL_INPUTS)
def test_history_jsonl_exact_reader(data: bytes) -> None:
    RECEIVED["jsonl exact reader (histories.reader)"] += 1
    assert _in_directory(data, "history.jsonl", read_history, (HistoryFormatError,)) == set()


def _convert_bulk(path: Path) -> None:
    out = path.with_name("history.parquet")
    outcome = write_parquet_bulk(path, out)
    if outcome.fallback is None:
        try:  # what the bulk converter vouched for, the exact reader reads too
            read_history(path)
        except HistoryFormatError as err:
            raise AssertionError(
                f"the bulk converter accepted what the exact one refuses: {err}"
            ) from err
        return
    assert not out.exists()  # a fallback wrote nothing
    try:
        write_parquet(path, out)
    except HistoryError:
        assert not out.exists()
        raise
    except OverflowError:  # known: `test_known_sut_event_defect`
        assert not out.exists()
        KNOWN["a sut event's integer beyond int64 passes the contract, fails in Parquet"] += 1


@FUZZ
@given(JSONL_INPUTS)
def test_history_jsonl_bulk_converter(data: bytes) -> None:
    RECEIVED["jsonl bulk converter (histories.bulk_parquet, then exact)"] += 1
    left = _in_directory(data, "history.jsonl", _convert_bulk, (HistoryError,))
    assert left <= {"history.parquet"}


def _read_edn(path: Path) -> None:
    for _form in iter_edn(decode_edn(path.read_bytes(), source=str(path))):
        pass


@FUZZ
@given(st.one_of(mutated(EDN_SEED), _tokens()))
def test_edn_reader(data: bytes) -> None:
    RECEIVED["edn reader (histories.edn)"] += 1
    assert _in_directory(data, "history.edn", _read_edn, (EdnError,)) == set()


def _import_edn(path: Path) -> None:
    convert_history(locate_history(path))


@FUZZ
@given(mutated(EDN_SEED))
def test_jepsen_edn_import(data: bytes) -> None:
    RECEIVED["jepsen edn import (checkers.load, histories.jepsen)"] += 1
    left = _in_directory(data, "history.edn", _import_edn, (HistoryError,))
    assert left <= {"history.parquet"}


def _utf8_text(data: bytes) -> bytes:
    return data.decode("utf-8", "replace").encode("utf-8")


@FUZZ
@given(st.one_of(mutated(SPEC_SEED, tokens=TOML_TOKENS), _tokens(TOML_TOKENS)).map(_utf8_text))
def test_spec_toml(data: bytes) -> None:
    RECEIVED["spec toml (squall.spec.TestSpec.load)"] += 1
    assert _in_directory(data, "spec.toml", TestSpec.load, (SpecError,)) == set()


@FUZZ
@given(st.one_of(mutated(INVENTORY_SEED, tokens=TOML_TOKENS), _tokens(TOML_TOKENS)).map(_utf8_text))
def test_inventory_toml(data: bytes) -> None:
    RECEIVED["inventory toml (squall.cluster.inventory.load_inventory)"] += 1
    assert _in_directory(data, "hosts.toml", load_inventory, (InventoryError,)) == set()


# Defects the fuzzers found outside the files first under test, fixed since.


@pytest.mark.parametrize("data", [b"a = " + b"[" * 1000, b'name = "x"\n\xff'])
def test_toml_nesting_and_bad_utf8_name_the_file_and_line(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(data)
    with pytest.raises(SpecError, match=r"spec\.toml, line [12]: "):
        TestSpec.load(path)


def test_sut_event_ints_beyond_int64_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(
        b'{"index":0,"time":0,"process":"sut","type":"info","f":"leader-election",'
        b'"value":{"key":"t-0","leader":9223372036854775808}}\n'
    )
    with pytest.raises(HistoryFormatError):
        write_parquet(path, tmp_path / "history.parquet")
