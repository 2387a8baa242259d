"""Fast validation for the hot paths (reading, writing, converting millions of lines).

The fast checks apply exactly the rules of `histories.contract` (a property test holds them
to it) but only answer yes or no; on a no, the precise check runs to say what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from histories.contract import (
    ACKS,
    INT64_MAX,
    INT64_MIN,
    KEY_LIST_FS,
    MICRO_OP_FS,
    NEMESIS,
    OP_TYPES,
    REQUIRED_FIELDS,
    SUT,
    SUT_FIELDS,
    check_commit,
    check_extra,
    check_key_list,
    check_operation,
    check_sut_event,
    show,
)
from histories.errors import OperationError

_TYPE_SET = frozenset(OP_TYPES)


def _micro_ops_valid(op_type: str, f: str, value: Any) -> bool:
    """Fast path of `_check_micro_ops`: the same rules, inlined, without messages."""
    if value is None:
        return op_type == "fail" or op_type == "info"
    if type(value) is not list or not value:
        return False
    invoke = op_type == "invoke"
    for mop in value:
        if type(mop) is not list or not mop:
            return False
        kind = mop[0]
        if kind == "send":
            if f == "poll" or len(mop) != 3:
                return False
            kind = type(mop[1])
            if kind is not str and kind is not int:
                return False
            sent = mop[2]
            kind = type(sent)
            if kind is int or kind is str:
                continue
            if invoke or kind is not list or len(sent) != 2:
                return False
            offset = sent[0]
            if type(offset) is not int or offset < 0 or offset > INT64_MAX:
                return False
            kind = type(sent[1])
            if kind is not int and kind is not str:
                return False
        elif kind == "poll":
            if f == "send":
                return False
            if len(mop) == 1:
                if op_type == "ok":
                    return False
                continue
            results = mop[1]
            if invoke or len(mop) != 2 or type(results) is not dict:
                return False
            for key, records in results.items():
                if type(key) is not str or type(records) is not list:
                    return False
                for record in records:
                    if type(record) is not list or len(record) != 2:
                        return False
                    offset = record[0]
                    if type(offset) is not int or offset < 0 or offset > INT64_MAX:
                        return False
                    kind = type(record[1])
                    if kind is not int and kind is not str:
                        return False
        else:
            return False
    return True


def fields_valid(
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
) -> bool:
    """Fast path of `check_operation`: the same verdict, without the message."""
    if (
        type(index) is not int
        or index < 0
        or index > INT64_MAX
        or type(time) is not int
        or time < INT64_MIN
        or time > INT64_MAX
        or type(op_type) is not str
        or op_type not in _TYPE_SET
        or type(f) is not str
        or not f
    ):
        return False
    if (
        (error is not None and type(error) is not str)
        or (node is not None and type(node) is not str)
        or (acks is not None and (type(acks) is not int or acks not in ACKS))
        or (final is not None and type(final) is not bool)
        or (key is not None and type(key) is not str and type(key) is not int)
    ):
        return False
    if type(process) is int:
        if process < 0 or process > INT64_MAX:
            return False
        if f in MICRO_OP_FS:
            return _micro_ops_valid(op_type, f, value)
        if f in KEY_LIST_FS:
            return _passes(check_key_list, op_type, f, value)
        return f != "commit" or _passes(check_commit, op_type, value)
    if op_type != "info":
        return False
    if process == SUT:
        return f not in SUT_FIELDS or _passes(check_sut_event, f, value)
    return bool(process == NEMESIS)


def _passes(check: Callable[..., None], *args: Any) -> bool:
    """Whether a precise check passes (for the rare kinds of operation)."""
    try:
        check(*args)
    except OperationError:
        return False
    return True


def check_json_dict(data: Any) -> None:
    """Validate one decoded history line without building an `Operation`."""
    try:
        if len(data) == 6:
            if fields_valid(
                data["index"], data["time"], data["process"], data["type"], data["f"],
                data["value"],
            ):  # fmt: skip
                return
        else:
            get = data.get
            if fields_valid(
                data["index"], data["time"], data["process"], data["type"], data["f"],
                data["value"], get("error"), get("node"), get("acks"), get("final"), get("key"),
            ):  # fmt: skip
                return
    except (KeyError, TypeError, AttributeError):
        pass
    _explain_json_dict(data)


def _explain_json_dict(data: Any) -> None:
    """The slow, precise check behind `check_json_dict`: raises naming what is wrong."""
    if type(data) is not dict:
        raise OperationError(f"expected a JSON object, got {type(data).__name__} {show(data)}")
    for name in REQUIRED_FIELDS:
        if name not in data:
            raise OperationError(f"missing field {name!r}")
    get = data.get
    check_operation(
        data["index"],
        data["time"],
        data["process"],
        data["type"],
        data["f"],
        data["value"],
        get("error"),
        get("node"),
        get("acks"),
        get("final"),
        get("key"),
    )


def validate_fields(
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
    extra: Any = None,
) -> None:
    """Raise `OperationError` unless these fields make a valid operation (fast when they do)."""
    if not fields_valid(index, time, process, op_type, f, value, error, node, acks, final, key):
        check_operation(index, time, process, op_type, f, value, error, node, acks, final, key)
    if extra is not None:
        check_extra(extra)


def _column_strings(record: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The strings of a valid line that the Parquet tables hold as text, by field: `f`,
    `error`, `node`, `key`, and in `value` the keys of micro-ops, poll results, assign,
    subscribe and commit values, and of SUT events. (Sent and read values, nemesis values
    and extra fields are held as JSON text, where any string can be written.)"""
    for name in ("f", "error", "node", "key"):
        yield name, record.get(name)
    value = record.get("value")
    process = record.get("process")
    f = record.get("f")
    if type(process) is int and type(value) is list:
        if f in MICRO_OP_FS:
            for mop in value:
                if mop[0] == "send":
                    yield "value", mop[1]
                elif len(mop) == 2:
                    yield from (("value", key) for key in mop[1])
        elif f in KEY_LIST_FS:
            yield from (("value", key) for key in value)
    elif type(value) is dict:
        if type(process) is int and f == "commit":
            yield from (("value", key) for key in value)
        elif process == SUT:
            yield "value", value.get("key")


def check_text(record: dict[str, Any]) -> None:
    """Raise `OperationError` if a string of a valid line that the Parquet tables hold as text
    is not Unicode: it holds a lone UTF-16 surrogate (`"\\ud800"`, legal JSON, but Unicode
    only as half of a pair), which UTF-8, and so Parquet, cannot hold."""
    for name, text in _column_strings(record):
        if type(text) is str and not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise OperationError(
                    f"field {name!r} holds a lone surrogate {text[err.start]!r} in "
                    f"{show(text)}: an escaped surrogate (\\ud800-\\udfff) must be half of a "
                    "pair, or the text is not Unicode"
                ) from None
