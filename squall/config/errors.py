"""One error for configuration files, and the one translation of pydantic's errors into it.

Every message names the file, the field path as the file spells it (``nodes``,
``[workload].rate``, ``[broker]."log.dirs"``, ``brokers[1].port``), the value given and what
is valid; an unknown key comes with the closest valid key, found with difflib.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

Model = TypeVar("Model", bound=BaseModel)
Location = tuple[int | str, ...]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SHOULD = re.compile(r"^(Input|String|List|Tuple|Dictionary|Value|Object) should ")
_PREFIXES = ("Value error, ", "Assertion failed, ")
_MAX_VALUE_CHARS = 80
_TABLE_TYPES = frozenset({"model_type", "model_attributes_type", "dict_type", "mapping_type"})


class ConfigurationError(ValueError):
    """A configuration file (spec, campaign, inventory, schedule) that cannot be used.

    The message names the file, the field, the value given and what would be valid.
    """

    @classmethod
    def from_validation(
        cls, error: ValidationError, *, source: str, model: type[BaseModel] | None = None
    ) -> Self:
        """The error for pydantic's `error` about `source`; `model` (the model validated)
        lets the message list the valid keys and suggest the closest one."""
        schema = _schema(model) if model is not None else {}
        lines = list(dict.fromkeys(_line(details, schema) for details in error.errors()))
        if len(lines) == 1:
            return cls(f"{source}: {lines[0]}")
        listing = "\n  ".join(lines)
        return cls(f"{source}: {len(lines)} problems:\n  {listing}")


def validate(
    model: type[Model],
    data: object,
    *,
    source: str,
    error: type[ConfigurationError] = ConfigurationError,
) -> Model:
    """`data` validated as `model`; `error` (naming `source`) when it is not valid."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise error.from_validation(err, source=source, model=model) from None


@functools.cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def _line(details: ErrorDetails, schema: Mapping[str, Any]) -> str:
    loc: Location = tuple(details["loc"])
    kind = details["type"]
    unknown_key = kind == "extra_forbidden" or (bool(loc) and loc[-1] == "[key]")
    if loc and loc[-1] == "[key]":
        loc = loc[:-1]
    given = details.get("input")
    is_table = kind != "missing" and isinstance(given, Mapping | BaseModel)
    path = field_path(loc, table=is_table and not unknown_key)
    if kind == "missing":
        description = _node(schema, loc).get("description")
        problem = "missing (required)" + (f": {_sentence(description)}" if description else "")
        return f"{path}: {problem}"
    if unknown_key:
        problem = _unknown_key(str(loc[-1]), _keys(schema, loc[:-1]))
    else:
        problem = _problem(details, schema, loc)
    if unknown_key or is_table or not path:
        return f"{path}: {problem}" if path else problem
    return f"{path} = {_value(given)}: {problem}"


def field_path(loc: Sequence[int | str], *, table: bool = False) -> str:
    """``("workload", "rate")`` as ``[workload].rate``: the table, then its keys; a top-level
    key alone is written bare, or as ``[workload]`` when it names a `table`."""
    text = ""
    for number, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        key = part if _BARE_KEY.match(part) else json.dumps(part)
        if number == 0:
            descends = len(loc) > 1 and isinstance(loc[1], str)
            text = f"[{key}]" if descends or (table and len(loc) == 1) else key
        else:
            text += f".{key}"
    return text


def _problem(details: ErrorDetails, schema: Mapping[str, Any], loc: Location) -> str:
    if details["type"] in _TABLE_TYPES:
        return "must be a table"
    message = details["msg"]
    for prefix in _PREFIXES:
        message = message.removeprefix(prefix)
    message = _SHOULD.sub("must ", message).replace(" after validation", "")
    given = details.get("input")
    if details["type"] == "literal_error" and isinstance(given, str):
        choices = [str(c) for c in _node(schema, loc).get("enum", [])]
        close = difflib.get_close_matches(given, choices, n=1)
        if close:
            message += f" (did you mean {json.dumps(close[0])}?)"
    return message


def _unknown_key(key: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {json.dumps(close[0])}?" if close else ""
    valid = f" Valid keys: {', '.join(known)}." if known else ""
    return f"unknown key{hint}{valid}" if hint else f"unknown key.{valid}"


def _keys(schema: Mapping[str, Any], loc: Location) -> list[str]:
    node = _node(schema, loc)
    names = node.get("propertyNames", {}).get("enum")
    return [str(n) for n in names] if names else [str(k) for k in node.get("properties", {})]


def _node(schema: Mapping[str, Any], loc: Location) -> Mapping[str, Any]:
    """The part of a JSON schema that describes the value at `loc` ({} where unknown)."""
    definitions = schema.get("$defs", {})
    node: Mapping[str, Any] = schema
    for part in loc:
        node = _structure(node, definitions)
        if isinstance(part, int):
            prefix = node.get("prefixItems", [])
            child = prefix[part] if part < len(prefix) else node.get("items")
        else:
            child = node.get("properties", {}).get(part, node.get("additionalProperties"))
        if not isinstance(child, Mapping):
            return {}
        node = child
    described = node.get("description")
    resolved = _structure(node, definitions)
    return {**resolved, "description": described} if described else resolved


def _structure(node: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow ``$ref`` and pick the table or array branch of an ``anyOf`` (X or null)."""
    while True:
        if "$ref" in node:
            node = definitions.get(str(node["$ref"]).rsplit("/", 1)[-1], {})
        elif "anyOf" in node:
            branches = [b for b in node["anyOf"] if b.get("type") != "null"]
            node = branches[0] if len(branches) == 1 else {}
        else:
            return node


def _value(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def _sentence(text: str) -> str:
    """A field's description as part of a message: first line, no final full stop."""
    first = text.strip().splitlines()[0].rstrip(".")
    word = first.split(" ", 1)[0]
    return first[:1].lower() + first[1:] if word[1:] == word[1:].lower() else first
