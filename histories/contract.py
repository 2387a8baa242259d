"""The history contract of docs/history.md as code: field names, types and value shapes.

`check_operation` is the precise check: it raises `OperationError` naming the first field
that breaks the contract and why. `histories.validation` has the fast checks that the hot
paths run first.
"""

from __future__ import annotations

from typing import Any, Literal

from histories.errors import OperationError

OpType = Literal["invoke", "ok", "fail", "info"]
Process = int | str
"""A client's number, or "nemesis" or "sut"."""

OP_TYPES: tuple[OpType, ...] = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"
SUT = "sut"
REQUIRED_FIELDS = ("index", "time", "process", "type", "f", "value")
OPTIONAL_FIELDS = ("error", "node", "acks", "final", "key")
KNOWN_FIELDS = frozenset(REQUIRED_FIELDS + OPTIONAL_FIELDS)
MICRO_OP_FS = frozenset({"send", "poll", "txn"})
KEY_LIST_FS = frozenset({"assign", "subscribe"})

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
ACKS = (0, 1, -1)


def show(value: Any, limit: int = 80) -> str:
    """A short repr of `value` for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_key(value: Any) -> bool:
    kind = type(value)
    return kind is str or kind is int


def is_scalar(value: Any) -> bool:
    """Sent values are ints or strings."""
    kind = type(value)
    return kind is int or kind is str


def _describe(op_type: str, f: str) -> str:
    article = "an" if op_type in ("ok", "info", "invoke") else "a"
    return f"{article} {op_type} {f}"


def _micro_op_forms(op_type: str, f: str) -> str:
    send = '["send", key, value]' if op_type == "invoke" else '["send", key, [offset, value]]'
    poll = '["poll"]' if op_type == "invoke" else '["poll", {key: [[offset, value], ...]}]'
    return {"send": send, "poll": poll}.get(f, f"{send} or {poll}")


def _check_records(where: str, key: str, records: Any) -> None:
    if type(records) is not list:
        raise OperationError(
            f"{where}: the records of key {key!r} are {show(records)}, "
            "expected a list of [offset, value]"
        )
    for record in records:
        if (
            type(record) is not list
            or len(record) != 2
            or type(record[0]) is not int
            or not 0 <= record[0] <= INT64_MAX
            or not is_scalar(record[1])
        ):
            raise OperationError(
                f"{where}: record {show(record)} of key {key!r} is not [offset, value] "
                "with an integer offset >= 0 and an int or string value"
            )


def _check_micro_ops(op_type: str, f: str, value: Any) -> None:
    """send / poll / txn values: lists of micro-operations (docs/history.md)."""
    if value is None and (op_type == "fail" or op_type == "info"):
        return
    desc = _describe(op_type, f)
    if type(value) is not list or not value:
        raise OperationError(
            f"field 'value' of {desc} is {show(value)}, expected a non-empty list of "
            f"micro-operations {_micro_op_forms(op_type, f)}"
        )
    invoke = op_type == "invoke"
    for position, mop in enumerate(value):
        where = f"field 'value' of {desc}: micro-op {position}"
        kind = mop[0] if type(mop) is list and mop else None
        if kind == "send" and f != "poll":
            if len(mop) == 3 and is_key(mop[1]):
                sent = mop[2]
                if is_scalar(sent):
                    continue
                if (
                    not invoke
                    and type(sent) is list
                    and len(sent) == 2
                    and type(sent[0]) is int
                    and 0 <= sent[0] <= INT64_MAX
                    and is_scalar(sent[1])
                ):
                    continue
            raise OperationError(
                f"{where} is {show(mop)}, expected {_micro_op_forms(op_type, 'send')} "
                "(key: string or int; value: int or string; offset: int >= 0)"
            )
        if kind == "poll" and f != "send":
            if len(mop) == 1:
                if op_type == "ok":
                    raise OperationError(
                        f"{where} is {show(mop)}: an ok poll must carry its results, "
                        '["poll", {key: [[offset, value], ...]}]'
                    )
                continue
            results = mop[1] if len(mop) == 2 else None
            if invoke or type(results) is not dict:
                raise OperationError(
                    f"{where} is {show(mop)}, expected {_micro_op_forms(op_type, 'poll')}"
                )
            for key, records in results.items():
                if type(key) is not str:
                    raise OperationError(
                        f"{where}: poll result key {show(key)} is not a string "
                        "(keys of poll results are JSON object keys: write them as strings)"
                    )
                _check_records(where, key, records)
            continue
        allowed = {"send": '"send"', "poll": '"poll"'}.get(f, '"send" or "poll"')
        raise OperationError(
            f"{where} is {show(mop)}, expected a list starting with {allowed} "
            f"(a {f} operation holds {_micro_op_forms(op_type, f)})"
        )


def check_key_list(op_type: str, f: str, value: Any) -> None:
    if value is None and (op_type == "fail" or op_type == "info"):
        return
    if type(value) is not list or not all(is_key(key) for key in value):
        raise OperationError(
            f"field 'value' of {_describe(op_type, f)} is {show(value)}, "
            "expected the list of keys now consumed (strings or ints)"
        )


def check_commit(op_type: str, value: Any) -> None:
    if value is None and (op_type == "fail" or op_type == "info"):
        return
    if type(value) is not dict or not all(
        type(key) is str and type(offset) is int and 0 <= offset <= INT64_MAX
        for key, offset in value.items()
    ):
        raise OperationError(
            f"field 'value' of {_describe(op_type, 'commit')} is {show(value)}, "
            "expected {key: offset} with string keys and integer offsets >= 0"
        )


SUT_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "leader-election": (
        ("leader", "int"),
        ("leader_epoch", "int"),
        ("isr", "ints"),
        ("previous_leader", "int"),
        ("unclean", "bool"),
    ),
    "isr-change": (("isr", "ints"), ("leader", "int")),
}
_KIND_TEXT = {
    "int": "a 64-bit int or null",
    "ints": "a list of 64-bit ints or null",
    "bool": "a boolean",
}


def _int64(item: Any) -> bool:
    """An int the history's tables can hold (Parquet int64)."""
    return type(item) is int and -(2**63) <= item < 2**63


def check_sut_event(f: str, value: Any) -> None:
    fields = SUT_FIELDS.get(f)
    if fields is None:
        return
    if type(value) is not dict or not is_key(value.get("key")):
        raise OperationError(
            f"field 'value' of a sut {f} event is {show(value)}, expected an object "
            'with at least "key" (a string or int)'
        )
    for name, kind in fields:
        item = value.get(name)
        if item is None and kind != "bool":
            continue
        if kind == "int":
            good = _int64(item)
        elif kind == "ints":
            good = type(item) is list and all(_int64(x) for x in item)
        else:
            good = item is None or type(item) is bool
        if not good:
            raise OperationError(
                f"field 'value' of a sut {f} event: {name!r} is {show(item)}, "
                f"expected {_KIND_TEXT[kind]}"
            )


def check_operation(
    index: Any,
    time: Any,
    process: Any,
    op_type: Any,
    f: Any,
    value: Any,
    error: Any = None,
    node: Any = None,
    acks: Any = None,
    final: Any = None,
    key: Any = None,
) -> None:
    """Raise `OperationError` naming the first field that breaks the contract."""
    if type(index) is not int or not 0 <= index <= INT64_MAX:
        raise OperationError(f"field 'index' is {show(index)}, expected an integer >= 0")
    if type(time) is not int or not INT64_MIN <= time <= INT64_MAX:
        raise OperationError(
            f"field 'time' is {show(time)}, expected an integer (nanoseconds since the test "
            "started)"
        )
    if type(process) is int:
        client = True
        if not 0 <= process <= INT64_MAX:
            raise OperationError(f"field 'process' is {process}, expected an integer >= 0")
    elif process in (NEMESIS, SUT):
        client = False
    else:
        raise OperationError(
            f'field \'process\' is {show(process)}, expected an integer >= 0, "nemesis" or "sut"'
        )
    if op_type != "invoke" and op_type != "ok" and op_type != "fail" and op_type != "info":
        raise OperationError(
            f"field 'type' is {show(op_type)}, expected one of invoke, ok, fail, info"
        )
    if type(f) is not str or not f:
        raise OperationError(f"field 'f' is {show(f)}, expected a non-empty string")
    if error is not None and type(error) is not str:
        raise OperationError(f"field 'error' is {show(error)}, expected a string")
    if node is not None and type(node) is not str:
        raise OperationError(f"field 'node' is {show(node)}, expected a string")
    if acks is not None and (type(acks) is not int or acks not in ACKS):
        raise OperationError(f"field 'acks' is {show(acks)}, expected 0, 1 or -1")
    if final is not None and type(final) is not bool:
        raise OperationError(f"field 'final' is {show(final)}, expected true or false")
    if key is not None and not is_key(key):
        raise OperationError(f"field 'key' is {show(key)}, expected a string or int")
    if client:
        if f in MICRO_OP_FS:
            _check_micro_ops(op_type, f, value)
        elif f in KEY_LIST_FS:
            check_key_list(op_type, f, value)
        elif f == "commit":
            check_commit(op_type, value)
        return
    if op_type != "info":
        raise OperationError(
            f"field 'type' is {show(op_type)}, but {process} operations always have type 'info'"
        )
    if process == SUT:
        check_sut_event(f, value)


def check_extra(extra: Any) -> None:
    if not isinstance(extra, dict):
        raise OperationError(f"field 'extra' is {show(extra)}, expected a dict")
    for name in extra:
        if type(name) is not str:
            raise OperationError(f"extra field name {show(name)} is not a string")
        if name in KNOWN_FIELDS:
            raise OperationError(
                f"extra field {name!r} is a known field: pass it as the keyword {name}="
            )
