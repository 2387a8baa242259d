"""Import of Jepsen's Kafka-workload histories (`history.edn`) into squall operations.

Jepsen writes one op map per line (or, in older stores, one vector of maps). Keywords become
strings (`:ok` -> "ok", `:nemesis` -> "nemesis"); values keep their shape, with map keys
written as strings as in squall's JSON (`{5 [[1 2]]}` -> `{"5": [[1, 2]]}`) while the key of
a send micro-op keeps its type (`[:send 5 7]` -> `["send", 5, 7]`): readers treat keys as
opaque text, so the two match. Indices are assigned densely in file order; a Jepsen
`:index` that differs is kept as the extra field `jepsen_index`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

from histories.edn import EdnReader
from histories.errors import JepsenImportError, OperationError
from histories.operation import NEMESIS, OP_TYPES, Operation, OpType

_LEADING_FILLER = re.compile(r"(?:[\s,]|;[^\n]*)*")
_FIELDS_TAKEN = frozenset({"index", "time", "process", "type", "f", "value", "error", "node"})


def to_json_value(value: Any) -> Any:
    """An EDN value as JSON data: sets become sorted lists, map keys strings."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return str(value)  # a Symbol becomes a plain string
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (Decimal, Fraction)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    if isinstance(value, frozenset):
        items = [to_json_value(item) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, Mapping):
        return {_json_key(key): to_json_value(item) for key, item in value.items()}
    return str(value)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return str(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    return json.dumps(to_json_value(key), separators=(",", ":"), sort_keys=True)


def jepsen_operation(op: Any, index: int) -> Operation:
    """One Jepsen op map as an `Operation` at `index`; raises `OperationError` or
    `JepsenImportError` saying what does not fit."""
    if not isinstance(op, Mapping):
        raise JepsenImportError(f"expected an op map, got {type(op).__name__} {op!r:.80}")
    fields = {_json_key(key): value for key, value in op.items()}
    for name in ("type", "f", "process", "time"):
        if name not in fields:
            raise JepsenImportError(f"the op has no :{name}: {_brief(fields)}")
    op_type = fields["type"]
    if op_type not in OP_TYPES:
        raise JepsenImportError(f":type is {op_type!r}, expected :invoke, :ok, :fail or :info")
    process = fields["process"]
    if not (isinstance(process, int) and not isinstance(process, bool)) and process != NEMESIS:
        raise JepsenImportError(f":process is {process!r}, expected a client number or :nemesis")
    time = fields["time"]
    if isinstance(time, (float, Decimal, Fraction)) and math.isfinite(time):
        time = int(time)
    if not isinstance(time, int) or isinstance(time, bool):
        raise JepsenImportError(f":time is {time!r}, expected nanoseconds (an integer)")
    extra: dict[str, Any] = {
        name: to_json_value(value) for name, value in fields.items() if name not in _FIELDS_TAKEN
    }
    jepsen_index = fields.get("index")
    if jepsen_index is not None and jepsen_index != index:
        extra["jepsen_index"] = to_json_value(jepsen_index)
    if process == NEMESIS and op_type != "info":
        # squall records nemesis operations as info, as Jepsen's own nemeses do.
        extra["jepsen_type"] = op_type
        op_type = "info"
    error = fields.get("error")
    if error is not None and not isinstance(error, str):
        error = json.dumps(to_json_value(error), separators=(",", ":"))
    node = fields.get("node")
    if node is not None and not isinstance(node, str):
        node = json.dumps(to_json_value(node), separators=(",", ":"))
    return Operation(
        index,
        time,
        process if isinstance(process, int) else NEMESIS,
        cast(OpType, str(op_type)),
        str(fields["f"]),
        to_json_value(fields.get("value")),
        error=None if error is None else str(error),
        node=None if node is None else str(node),
        extra=extra,
    )


def _brief(fields: Mapping[str, Any]) -> str:
    text = repr(dict(fields))
    return text if len(text) <= 120 else text[:117] + "..."


def iter_jepsen_history(path: str | os.PathLike[str]) -> Iterator[Operation]:
    """Stream the operations of a Jepsen `history.edn` (op per line, or one vector)."""
    source = Path(path)
    text = source.read_text(encoding="utf-8")
    start = _LEADING_FILLER.match(text)
    as_vector = start is not None and text.startswith("[", start.end())
    reader = EdnReader(text, source=str(source))
    for index, form in enumerate(reader.forms(unwrap_vector=as_vector)):
        try:
            yield jepsen_operation(form, index)
        except (OperationError, JepsenImportError) as err:
            line, column = reader.line_column(
                reader.element_start if as_vector else reader.top_start
            )
            raise JepsenImportError(
                f"{source}, line {line}, column {column}: op {index} cannot be imported: {err}"
            ) from err


def import_jepsen_history(path: str | os.PathLike[str]) -> list[Operation]:
    """Read a Jepsen Kafka-workload `history.edn` into squall operations (dense indices)."""
    return list(iter_jepsen_history(path))
