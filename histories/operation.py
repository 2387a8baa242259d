"""The operation: one line of a history (docs/history.md, "History").

An `Operation` is immutable. Constructing one validates it against the contract
(`histories.contract`), so an invalid operation never exists; the readers build them from
lines that `check_json_dict` accepted, without validating twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from histories.contract import (
    INT64_MAX,
    KNOWN_FIELDS,
    NEMESIS,
    OP_TYPES,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    SUT,
    OpType,
    Process,
    show,
)
from histories.errors import OperationError
from histories.validation import check_json_dict, validate_fields

__all__ = ["NEMESIS", "OP_TYPES", "SUT", "OpType", "Operation", "Process", "make_operation"]


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of a history: an invocation, a completion, or a nemesis/SUT event.

    `extra` holds fields this version does not know; they are written back unchanged.
    """

    index: int
    time: int
    process: Process
    type: OpType
    f: str
    value: Any = field(default=None, hash=False)
    error: str | None = None
    node: str | None = None
    acks: int | None = None
    final: bool | None = None
    key: str | int | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        validate_fields(
            self.index, self.time, self.process, self.type, self.f, self.value, self.error,
            self.node, self.acks, self.final, self.key, self.extra,
        )  # fmt: skip

    @property
    def is_invoke(self) -> bool:
        """True for an invocation."""
        return self.type == "invoke"

    @property
    def is_client(self) -> bool:
        """True for a client operation (a process number), False for nemesis and SUT events."""
        return type(self.process) is int

    def with_index(self, index: int) -> Operation:
        """This operation at another position of a history."""
        if type(index) is not int or not 0 <= index <= INT64_MAX:
            raise OperationError(f"index is {show(index)}, expected an integer >= 0")
        return assemble(
            index, self.time, self.process, self.type, self.f, self.value, self.error,
            self.node, self.acks, self.final, self.key, self.extra,
        )  # fmt: skip

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON object of this operation's history line; absent optional fields are left out."""
        data: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            data["error"] = self.error
        if self.node is not None:
            data["node"] = self.node
        if self.acks is not None:
            data["acks"] = self.acks
        if self.final is not None:
            data["final"] = self.final
        if self.key is not None:
            data["key"] = self.key
        if self.extra:
            data.update(self.extra)
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Operation:
        """Build an operation from a decoded history line; raises `OperationError`."""
        if not isinstance(data, dict):
            data = dict(data) if isinstance(data, Mapping) else data
        check_json_dict(data)
        return cls._unchecked(data)

    @classmethod
    def _unchecked(cls, data: dict[str, Any]) -> Operation:
        """Build from a dict that `check_json_dict` accepted, without validating again."""
        return _build(data)


_new = object.__new__
(
    _set_index,
    _set_time,
    _set_process,
    _set_type,
    _set_f,
    _set_value,
    _set_error,
    _set_node,
    _set_acks,
    _set_final,
    _set_key,
    _set_extra,
) = (getattr(Operation, name).__set__ for name in (*REQUIRED_FIELDS, *OPTIONAL_FIELDS, "extra"))


def assemble(
    index: int,
    time: int,
    process: Process,
    op_type: str,
    f: str,
    value: Any,
    error: str | None,
    node: str | None,
    acks: int | None,
    final: bool | None,
    key: str | int | None,
    extra: dict[str, Any],
) -> Operation:
    """Build an operation from fields `validate_fields` accepted, without validating again."""
    op: Operation = _new(Operation)
    _set_index(op, index)
    _set_time(op, time)
    _set_process(op, process)
    _set_type(op, op_type)
    _set_f(op, f)
    _set_value(op, value)
    _set_error(op, error)
    _set_node(op, node)
    _set_acks(op, acks)
    _set_final(op, final)
    _set_key(op, key)
    _set_extra(op, extra)
    return op


def _build(data: dict[str, Any]) -> Operation:
    # Slot descriptors directly: twice as fast as the frozen dataclass's object.__setattr__,
    # which matters when reading millions of lines.
    op: Operation = _new(Operation)
    _set_index(op, data["index"])
    _set_time(op, data["time"])
    _set_process(op, data["process"])
    _set_type(op, data["type"])
    _set_f(op, data["f"])
    _set_value(op, data["value"])
    if len(data) == 6:
        _set_error(op, None)
        _set_node(op, None)
        _set_acks(op, None)
        _set_final(op, None)
        _set_key(op, None)
        _set_extra(op, {})
        return op
    get = data.get
    _set_error(op, get("error"))
    _set_node(op, get("node"))
    _set_acks(op, get("acks"))
    _set_final(op, get("final"))
    _set_key(op, get("key"))
    if KNOWN_FIELDS.issuperset(data):
        _set_extra(op, {})
    else:
        _set_extra(op, {k: v for k, v in data.items() if k not in KNOWN_FIELDS})
    return op


def make_operation(
    index: int,
    time: int,
    process: Process,
    op_type: str,
    f: str,
    value: Any = None,
    **fields: Any,
) -> Operation:
    """Build an operation, sorting `fields` into the known optional fields and `extra`."""
    known = {name: fields.pop(name) for name in OPTIONAL_FIELDS if name in fields}
    return Operation(index, time, process, cast(OpType, op_type), f, value, **known, extra=fields)
