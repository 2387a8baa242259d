"""The operation model: validation with precise reasons, JSON round trips, pairing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from histories import (
    InvocationTracker,
    Leniency,
    Operation,
    OperationError,
    PairingError,
    check_json_dict,
    pair_operations,
)
from histories.contract import KNOWN_FIELDS, check_operation
from histories.jsonline import encode_line
from histories.operation import make_operation
from histories.pairing import SHOWN
from histories.validation import fields_valid

# ---------------------------------------------------------------- strategies (shared)

keys = st.one_of(st.sampled_from(["t-0", "t-1", "q-3"]), st.integers(0, 5))
values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=6))
offsets = st.integers(0, 2**63 - 1)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False),
)  # fmt: skip
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def send_mop(invoke: bool) -> st.SearchStrategy[list[Any]]:
    if invoke:
        return st.tuples(keys, values).map(lambda kv: ["send", kv[0], kv[1]])
    return st.one_of(
        st.tuples(keys, offsets, values).map(lambda kov: ["send", kov[0], [kov[1], kov[2]]]),
        st.tuples(keys, values).map(lambda kv: ["send", kv[0], kv[1]]),
    )


def poll_mop(op_type: str) -> st.SearchStrategy[list[Any]]:
    results = st.dictionaries(
        keys.map(str), st.lists(st.tuples(offsets, values).map(list), max_size=4), max_size=3
    ).map(lambda result: ["poll", result])
    if op_type == "invoke":
        return st.just(["poll"])
    if op_type == "ok":
        return results
    return st.one_of(st.just(["poll"]), results)


def mop_value(op_type: str, f: str) -> st.SearchStrategy[Any]:
    invoke = op_type == "invoke"
    mop = {"send": send_mop(invoke), "poll": poll_mop(op_type)}.get(
        f, st.one_of(send_mop(invoke), poll_mop(op_type))
    )
    shaped = st.lists(mop, min_size=1, max_size=4)
    return st.one_of(st.none(), shaped) if op_type in ("fail", "info") else shaped


def client_value(op_type: str, f: str) -> st.SearchStrategy[Any]:
    if f in ("send", "poll", "txn"):
        return mop_value(op_type, f)
    if f in ("assign", "subscribe"):
        return st.lists(keys, max_size=4)
    if f == "commit":
        return st.dictionaries(keys.map(str), offsets, max_size=3)
    return json_values


extra_fields = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda name: name not in KNOWN_FIELDS),
    json_values,
    max_size=2,
)
optional_fields = st.fixed_dictionaries(
    {},
    optional={
        "error": st.text(max_size=10),
        "node": st.sampled_from(["n1", "n2"]),
        "acks": st.sampled_from([0, 1, -1]),
        "final": st.booleans(),
        "key": keys,
    },
)


@st.composite
def client_operations(draw: st.DrawFn, index: int = 0) -> Operation:
    op_type = draw(st.sampled_from(["invoke", "ok", "fail", "info"]))
    f = draw(st.sampled_from(["send", "poll", "txn", "assign", "subscribe", "commit", "crash"]))
    return make_operation(
        draw(st.integers(0, 2**63 - 1)),
        draw(st.integers(-(2**63), 2**63 - 1)),
        draw(st.integers(0, 1000)),
        op_type,
        f,
        draw(client_value(op_type, f)),
        **draw(optional_fields),
        **draw(extra_fields),
    )


sut_values = st.fixed_dictionaries(
    {"key": keys},
    optional={
        "leader": st.one_of(st.none(), st.integers(-1, 5)),
        "leader_epoch": st.integers(0, 100),
        "isr": st.lists(st.integers(0, 5), max_size=3),
        "previous_leader": st.integers(-1, 5),
        "unclean": st.booleans(),
    },
)


@st.composite
def event_operations(draw: st.DrawFn) -> Operation:
    if draw(st.booleans()):
        f = draw(st.sampled_from(["kill", "start", "start-partition", "stop-partition"]))
        return Operation(
            draw(st.integers(0, 10**6)), draw(st.integers(0, 10**12)), "nemesis", "info", f,
            draw(json_values),
        )  # fmt: skip
    f = draw(st.sampled_from(["leader-election", "isr-change"]))
    return Operation(
        draw(st.integers(0, 10**6)), draw(st.integers(0, 10**12)), "sut", "info", f,
        draw(sut_values),
    )  # fmt: skip


any_operations = st.one_of(client_operations(), event_operations())


# ---------------------------------------------------------------- tests


@given(any_operations)
def test_json_round_trip_keeps_every_field(op: Operation) -> None:
    line = json.dumps(op.to_json_dict())
    again = Operation.from_json_dict(json.loads(line))
    assert again == op
    assert again.extra == op.extra


def test_unknown_fields_are_kept_in_extra_and_written_back() -> None:
    data = {"index": 0, "time": 5, "process": 1, "type": "invoke", "f": "poll",
            "value": [["poll"]], "trace_id": "abc", "debug": {"fetch_ms": 3}}  # fmt: skip
    op = Operation.from_json_dict(data)
    assert op.extra == {"trace_id": "abc", "debug": {"fetch_ms": 3}}
    assert op.to_json_dict() == data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "okay"}, "field 'type' is 'okay', expected one of invoke, ok, fail, info"),
        ({"index": -1}, "field 'index' is -1, expected an integer >= 0"),
        ({"index": True}, "field 'index' is True"),
        ({"time": 1.5}, "field 'time' is 1.5, expected an integer"),
        ({"process": "client-3"}, "field 'process' is 'client-3'"),
        ({"acks": 2}, "field 'acks' is 2, expected 0, 1 or -1"),
        ({"final": "yes"}, "field 'final' is 'yes', expected true or false"),
        ({"value": []}, "field 'value' of an invoke send is [], expected a non-empty list"),
        (
            {"value": [["send", "k"]]},
            "micro-op 0 is ['send', 'k'], expected [\"send\", key, value]",
        ),
        ({"value": [["send", "k", 1.5]]}, "micro-op 0 is ['send', 'k', 1.5]"),
        ({"value": [["poll"]]}, 'expected a list starting with "send"'),
        ({"value": [["send", "k", [0, 1]]]}, "micro-op 0 is ['send', 'k', [0, 1]]"),
        ({"process": "nemesis", "f": "kill"}, "nemesis operations always have type 'info'"),
    ],
)
def test_invalid_fields_are_named_precisely(change: dict[str, Any], message: str) -> None:
    data = {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "send",
            "value": [["send", "t-0", 1]]}  # fmt: skip
    data.update(change)
    with pytest.raises(OperationError) as caught:
        check_json_dict(data)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("op_type", "f", "value", "message"),
    [
        ("ok", "poll", [["poll"]], "an ok poll must carry its results"),
        ("ok", "poll", [["poll", {5: [[0, 1]]}]], "poll result key 5 is not a string"),
        ("ok", "poll", [["poll", {"k": [[-1, 1]]}]], "record [-1, 1] of key 'k'"),
        ("ok", "poll", [["poll", {"k": [[0, 1, 2]]}]], "record [0, 1, 2] of key 'k'"),
        ("ok", "send", [["send", "k", [None, 1]]], "micro-op 0"),
        ("ok", "commit", {"k": -1}, "expected {key: offset}"),
        ("ok", "assign", "t-0", "expected the list of keys"),
        ("ok", "send", None, "field 'value' of an ok send is None"),
    ],
)
def test_completion_values_are_checked(op_type: str, f: str, value: Any, message: str) -> None:
    with pytest.raises(OperationError) as caught:
        Operation(3, 10, 1, op_type, f, value)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_indeterminate_completions_may_have_no_value_and_txn_mixes_micro_ops() -> None:
    Operation(1, 1, 0, "info", "send", None, error="timeout")
    Operation(1, 1, 0, "fail", "poll", [["poll"]])
    Operation(1, 1, 0, "ok", "txn", [["send", 5, [3, 7]], ["poll", {"5": [[1, 2]]}]])
    Operation(1, 1, 0, "info", "txn", [["send", 5, 7], ["poll"]])


def test_sut_events_are_checked() -> None:
    Operation(0, 1, "sut", "info", "leader-election",
              {"key": "t-0", "leader": 2, "leader_epoch": 4, "isr": [2], "previous_leader": 1,
               "unclean": True})  # fmt: skip
    with pytest.raises(OperationError, match="'isr' is 'n1'"):
        Operation(0, 1, "sut", "info", "isr-change", {"key": "t-0", "isr": "n1"})
    with pytest.raises(OperationError, match='at least "key"'):
        Operation(0, 1, "sut", "info", "leader-election", {"leader": 1})


def test_missing_field_and_non_object() -> None:
    with pytest.raises(OperationError, match="missing field 'f'"):
        check_json_dict({"index": 0, "time": 1, "process": 0, "type": "invoke", "value": None})
    with pytest.raises(OperationError, match="expected a JSON object, got list"):
        check_json_dict([1, 2])


def test_extra_cannot_shadow_a_known_field() -> None:
    with pytest.raises(OperationError, match="extra field 'acks' is a known field"):
        Operation(0, 1, 0, "invoke", "poll", [["poll"]], extra={"acks": 1})


def test_with_index_copies_everything_but_the_index() -> None:
    op = Operation(0, 1, 0, "invoke", "poll", [["poll"]], node="n1", extra={"x": 1})
    moved = op.with_index(9)
    assert moved.index == 9
    assert moved.to_json_dict() == {**op.to_json_dict(), "index": 9}


# The fast validator (used on the hot paths) must agree with the precise one everywhere.
mutations = st.one_of(
    json_values,
    st.sampled_from([["send"], ["poll"], ["poll", {}], ["send", "k", [1, 2]], [[0, 1]], {}]),
)


@given(any_operations, st.sampled_from(["index", "time", "process", "type", "f", "value",
                                        "error", "acks", "final", "key", "node"]),
       mutations, st.integers(0, 3))  # fmt: skip
def test_fast_and_precise_validators_agree(
    op: Operation, field: str, replacement: Any, depth: int
) -> None:
    data = op.to_json_dict()
    target: Any = data
    name: Any = field
    # Mutate the field itself, or something nested inside a value.
    for _ in range(depth):
        inner = target.get(name) if isinstance(target, dict) else None
        if isinstance(inner, list) and inner:
            target, name = inner, len(inner) - 1
        elif isinstance(inner, dict) and inner:
            target, name = inner, next(iter(inner))
        else:
            break
    target[name] = replacement
    args = [data.get(n) for n in ("index", "time", "process", "type", "f", "value",
                                  "error", "node", "acks", "final", "key")]  # fmt: skip
    try:
        check_operation(*args)
        precise = True
    except OperationError:
        precise = False
    assert fields_valid(*args) == precise


# ---------------------------------------------------------------- pairing


def _op(index: int, process: Any, op_type: str, f: str = "poll") -> Operation:
    value: Any = [["poll"]] if op_type in ("invoke", "fail") else [["poll", {}]]
    if process in ("nemesis", "sut"):
        return Operation(index, index, process, "info", "kill", None)
    return Operation(index, index, process, op_type, f, value)  # type: ignore[arg-type]


def test_pairing_by_process() -> None:
    ops = [_op(0, 0, "invoke"), _op(1, 1, "invoke"), _op(2, "nemesis", "info"),
           _op(3, 1, "ok"), _op(4, 0, "info"), _op(5, 2, "invoke")]  # fmt: skip
    pairs = pair_operations(ops)
    assert [(a.index, b.index if b else None) for a, b in pairs] == [(0, 4), (1, 3), (5, None)]


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([_op(0, 0, "invoke"), _op(1, 0, "invoke")], "invoke at index 0 is still outstanding"),
        ([_op(0, 0, "invoke"), _op(1, 0, "info"), _op(2, 0, "invoke"), _op(3, 0, "invoke")],
         "invoke at index 2 is still outstanding"),
        ([_op(0, 0, "invoke"), Operation(1, 1, 0, "ok", "send", [["send", 1, 1]])],
         "operation 1 completes send, but the outstanding invoke"),
    ],
)  # fmt: skip
def test_pairing_errors(ops: list[Operation], message: str) -> None:
    with pytest.raises(PairingError) as caught:
        pair_operations(ops)
    assert message in str(caught.value)


def test_a_process_goes_on_after_info_as_in_jepsen() -> None:
    ops = [_op(0, 0, "invoke"), _op(1, 0, "info"), _op(2, 0, "invoke"), _op(3, 1, "invoke"),
           _op(4, 0, "ok"), _op(5, 1, "ok"), _op(6, 0, "invoke")]  # fmt: skip
    pairs = pair_operations(ops)
    assert [(a.index, b.index if b else None) for a, b in pairs] == [
        (0, 1), (2, 4), (3, 5), (6, None)]  # fmt: skip
    tracker = InvocationTracker()
    for op in ops:
        tracker.observe(op.index, op.time, op.process, op.type, op.f)
    assert tracker.leniency() == Leniency(after_info=3, after_info_first=(2, 4, 6))
    assert tracker.outstanding() == {0: (6, 6, "poll")}


def test_a_completion_without_invoke_is_its_own_invoke() -> None:
    ops = [_op(0, 0, "ok"), _op(1, 1, "invoke"), _op(2, 0, "fail"), _op(3, 1, "ok"),
           _op(4, 1, "info")]  # fmt: skip
    pairs = pair_operations(ops)
    assert [(a.index, b.index if b else None) for a, b in pairs] == [
        (0, 0), (1, 3), (2, 2), (4, 4)]  # fmt: skip
    tracker = InvocationTracker()
    seen = [tracker.observe(op.index, op.time, op.process, op.type, op.f) for op in ops]
    assert seen == [(0, 0, "poll"), None, (2, 2, "poll"), (1, 1, "poll"), (4, 4, "poll")]
    assert tracker.leniency() == Leniency(uninvoked=3, uninvoked_first=(0, 2, 4))


def test_leniency_keeps_the_first_positions_and_counts_all() -> None:
    ops = [_op(i, i, "ok") for i in range(SHOWN + 3)]
    tracker = InvocationTracker()
    for op in ops:
        tracker.observe(op.index, op.time, op.process, op.type, op.f)
    leniency = tracker.leniency()
    assert leniency.uninvoked == SHOWN + 3
    assert leniency.uninvoked_first == tuple(range(SHOWN))
    assert not Leniency() and leniency


def test_leniency_notes() -> None:
    assert Leniency().notes(lines=True) == []
    notes = Leniency(2, (4, 6), 3, (3, 8, 11)).notes(lines=True)
    assert notes == [
        "2 operations came from processes after their info completion (lines 5, 7); each "
        "process went on, its next completion pairing with its next invoke, as Jepsen does",
        "3 completions had no invoke (lines 4, 9, 12); each was taken as invoked at its own "
        "time, as Jepsen does",
    ]
    assert Leniency(1, (4,), 1, (3,)).notes(lines=False) == [
        "1 operation came from a process after its info completion (operation index 4); the "
        "process went on, its next completion pairing with its next invoke, as Jepsen does",
        "1 completion had no invoke (operation index 3); it was taken as invoked at its own "
        "time, as Jepsen does",
    ]
    (note,) = Leniency(uninvoked=7, uninvoked_first=(0, 1, 2, 3, 4)).notes(lines=True)
    assert "7 completions had no invoke (lines 1, 2, 3, 4, 5 and 2 more)" in note


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([_op(0, 0, "ok")], "operation 0 (ok poll) completes nothing: process 0 has no"),
        ([_op(0, 0, "invoke"), _op(1, 0, "info"), _op(2, 0, "invoke")],
         "retired by the info completion at index 1"),
    ],
)  # fmt: skip
def test_strict_pairing_keeps_squalls_own_rules(ops: list[Operation], message: str) -> None:
    with pytest.raises(PairingError) as caught:
        pair_operations(ops, strict=True)
    assert message in str(caught.value)
    assert pair_operations(ops)  # accepted without strict


@given(any_operations)
def test_history_line_is_the_json_of_the_operation(op: Operation) -> None:
    line = encode_line(op)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == op.to_json_dict()
    assert Operation.from_json_dict(json.loads(line)) == op


def test_non_json_values_are_refused_with_the_reason() -> None:
    op = Operation(0, 0, 0, "invoke", "crash", {"when": float("nan")})
    with pytest.raises(OperationError, match="cannot be written as JSON"):
        encode_line(op)
    with pytest.raises(OperationError, match=r"set .* is not JSON data"):
        encode_line(Operation(0, 0, 0, "invoke", "crash", {1, 2}))
