"""How an operation is spelt as one line of `history.jsonl`: compact JSON, ASCII, newline.

The line is assembled from its fields rather than through a dict and `json.dumps`: the
fixed fields need no encoder, and the C encoder is made once, not once per line. That
triples the writer's speed.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

from histories.errors import OperationError
from histories.operation import Operation

_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} {value!r:.40} is not JSON data")


def _make_encoder() -> Callable[[Any], str]:
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is not None:
        try:
            # (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
            #  skipkeys, allow_nan); markers None: values are data, not object graphs.
            chunks = c_make_encoder(None, _not_json, _quote, None, ":", ",", False, False, False)
            if "".join(chunks({"a": [1, "é"]}, 0)) == '{"a":[1,"\\u00e9"]}':
                return lambda value: "".join(chunks(value, 0))
        except TypeError:  # pragma: no cover - another Python's internal signature
            pass
    return json.JSONEncoder(  # pragma: no cover
        separators=(",", ":"), allow_nan=False, check_circular=False, default=_not_json
    ).encode


to_json = _make_encoder()
"""Compact ASCII JSON text of a value; TypeError or ValueError if it is not JSON data."""


def encode_body(
    process: int | str,
    op_type: str,
    f: str,
    value: Any,
    error: str | None,
    node: str | None,
    acks: int | None,
    final: bool | None,
    key: str | int | None,
    extra: dict[str, Any],
) -> str:
    """Everything of a (valid) operation's line after `"index":..,"time":..,`."""
    try:
        body = (
            f'"process":{process if type(process) is int else _quote(str(process))},'
            f'"type":"{op_type}","f":{_quote(f)},"value":{to_json(value)}'
        )
        if error is not None:
            body += f',"error":{_quote(error)}'
        if node is not None:
            body += f',"node":{_quote(node)}'
        if acks is not None:
            body += f',"acks":{acks}'
        if final is not None:
            body += ',"final":true' if final else ',"final":false'
        if key is not None:
            body += f',"key":{key if type(key) is int else _quote(str(key))}'
        for name, item in extra.items():
            body += f",{_quote(name)}:{to_json(item)}"
    except (TypeError, ValueError, RecursionError) as err:
        raise OperationError(
            f"{op_type} {f} by process {process} cannot be written as JSON: {err}; values "
            "must be JSON data (dicts with string keys, lists, strings, ints, finite "
            "floats, booleans, null)"
        ) from err
    return body + "}\n"


def line_of(index: int, time: int, body: str) -> bytes:
    """The complete line, from the index, the time and `encode_body`'s text."""
    return f'{{"index":{index},"time":{time},{body}'.encode("ascii")


def encode_line(op: Operation) -> bytes:
    """The history line of `op`, newline included."""
    body = encode_body(
        op.process, op.type, op.f, op.value, op.error, op.node, op.acks, op.final, op.key,
        op.extra,
    )  # fmt: skip
    return line_of(op.index, op.time, body)
