"""A small, complete EDN reader (the data notation Jepsen writes histories in).

Maps become dicts, vectors and lists become lists, sets frozensets; keywords become
strings without the colon (`:ok` -> "ok"), symbols `Symbol`s (a str subclass), `nil`,
`true`, `false` None/True/False; integers (`N` suffix, hex) ints, floats (`M` suffix:
Decimal) floats, ratios Fractions, characters one-character strings. A tagged literal
(`#inst "..."`, `#jepsen.history.Op{...}`) becomes its value unless a handler for its tag
is given. Map keys and set elements that are vectors become tuples, so they can be hashed.
Comments (`;`), commas and `#_` discards are skipped. Errors carry line and column: also for
text that is not UTF-8 (`decode_edn`), integers too long to read, strings and characters
that are not Unicode (a lone UTF-16 surrogate escape; a pair of them is one character), and
collections nested more than `MAX_DEPTH` deep.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from histories.errors import EdnError

TagHandler = Callable[[str, Any], Any]

MAX_DEPTH = 200
"""How deep collections and tagged forms may nest (a Jepsen op map needs about 6): deeper
forms are refused, so that no reader of the values recurses past Python's limit."""
MAX_DIGITS = 4300
"""The longest integer read, in decimal digits (Python's own limit for int(text))."""
_TOO_LARGE = 10**MAX_DIGITS


class Symbol(str):
    """An EDN symbol, such as `java.net.SocketTimeoutException`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str(self)!r})"


_TOKEN = re.compile(
    r"""
      (?P<ws>(?:[\s,]|;[^\n]*)+)
    | (?P<open>[\[({]|\#\{)
    | (?P<close>[\])}])
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<discard>\#_)
    | (?P<special>\#\#[^\s,()\[\]{}"\\;]+)
    | (?P<tag>\#[A-Za-z][^\s,()\[\]{}"\\;#]*)
    | (?P<char>\\(?:newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|o[0-7]{1,3}|.))
    | (?P<atom>[^\s,()\[\]{}"\\;\#][^\s,()\[\]{}"\\;]*)
    """,
    re.VERBOSE | re.DOTALL,
)
_INT = re.compile(r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|(0|[1-9][0-9]*)|0([0-7]+))(N?)")
_FLOAT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?M?")
_RATIO = re.compile(r"([+-]?[0-9]+)/([0-9]+)")
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[0-7]{1,3}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b"}
_CHARS["formfeed"] = "\f"
_SPECIAL = {"##Inf": math.inf, "##-Inf": -math.inf, "##NaN": math.nan}
_CLOSERS = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_NAMES = {"[": "vector", "(": "list", "{": "map", "#{": "set"}


def _position(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, column


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, dict):
        return frozenset((key, _hashable(item)) for key, item in value.items())
    return value


class _Frame:
    """An open collection, or a tag / discard waiting for its form."""

    __slots__ = ("items", "kind", "pos", "tag")

    def __init__(self, kind: str, pos: int, tag: str = "") -> None:
        self.kind = kind
        self.pos = pos
        self.tag = tag
        self.items: list[Any] = []


class EdnReader:
    """Reads the forms of one EDN text, one top-level form at a time."""

    def __init__(
        self,
        text: str,
        *,
        source: str | None = None,
        tag_handlers: Mapping[str, Callable[[Any], Any]] | None = None,
        default_tag: TagHandler | None = None,
    ) -> None:
        self._text = text
        self._source = source
        self._tags = dict(tag_handlers or {})
        self._default_tag = default_tag
        self.top_start = 0
        """Where the last top-level form began (a position in the text)."""
        self.element_start = 0
        """Where the last element of an unwrapped top-level vector began."""

    def line_column(self, pos: int) -> tuple[int, int]:
        """The 1-based line and column of a position in the text."""
        return _position(self._text, pos)

    def error(self, message: str, pos: int) -> EdnError:
        """An `EdnError` at a position in the text."""
        line, column = _position(self._text, pos)
        return EdnError(message, line, column, self._source)

    def forms(self, *, unwrap_vector: bool = False) -> Iterator[Any]:
        """Yield the top-level forms; with `unwrap_vector`, the elements of a top-level
        vector are yielded one by one as they are read (for a history written as one vector).
        """
        text = self._text
        match = _TOKEN.match
        stack: list[_Frame] = []
        pos = 0
        end = len(text)
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise self._bad_token(pos)
            kind = m.lastgroup
            token = m.group()
            start, pos = pos, m.end()
            if kind == "ws":
                continue
            if not stack:
                self.top_start = start
            elif len(stack) == 1 and stack[0].tag == "unwrapped":
                self.element_start = start
            if len(stack) >= MAX_DEPTH and kind in ("open", "tag"):
                raise self.error(
                    f"forms nested more than {MAX_DEPTH} deep (collections and tags)", start
                )
            if kind == "open":
                frame = _Frame(token, start)
                if unwrap_vector and not stack and token == "[":
                    frame.tag = "unwrapped"
                stack.append(frame)
                continue
            if kind == "discard" or kind == "tag":
                stack.append(_Frame(kind, start, token[1:]))
                continue
            if kind == "close":
                form = self._close(stack, token, start)
                if form is _UNWRAPPED:
                    continue
            else:
                form = self._atom(kind, token, start)
            # Deliver the finished form to whatever waits for it.
            while True:
                if not stack:
                    yield form
                    break
                top = stack[-1]
                if top.kind == "tag":
                    stack.pop()
                    form = self._tagged(top.tag, form)
                    continue
                if top.kind == "discard":
                    stack.pop()
                    break
                if top.tag == "unwrapped":
                    yield form
                    break
                top.items.append(form)
                break
        if stack:
            frame = stack[-1]
            if frame.kind in ("tag", "discard"):
                what = f"#{frame.tag}" if frame.kind == "tag" else "#_"
                raise self.error(f"{what} is not followed by a form before the end", frame.pos)
            raise self.error(
                f"{_NAMES[frame.kind]} opened with {frame.kind!r} is never closed "
                f"(expected {_CLOSERS[frame.kind]!r} before the end)",
                frame.pos,
            )

    def _close(self, stack: list[_Frame], token: str, pos: int) -> Any:
        if not stack:
            raise self.error(f"unmatched {token!r}: nothing is open", pos)
        frame = stack.pop()
        if frame.kind in ("tag", "discard"):
            what = f"#{frame.tag}" if frame.kind == "tag" else "#_"
            raise self.error(f"{what} is not followed by a form before {token!r}", frame.pos)
        expected = _CLOSERS[frame.kind]
        if token != expected:
            line, column = _position(self._text, frame.pos)
            raise self.error(
                f"{token!r} closes the {_NAMES[frame.kind]} opened at line {line}, column "
                f"{column}, which needs {expected!r}",
                pos,
            )
        items = frame.items
        if frame.kind == "[" or frame.kind == "(":
            return _UNWRAPPED if frame.tag == "unwrapped" else items
        if frame.kind == "#{":
            try:
                elements = [_hashable(item) for item in items]
                result = frozenset(elements)
            except TypeError as err:
                raise self.error(f"set element cannot be hashed: {err}", frame.pos) from err
            if len(result) != len(elements):
                raise self.error("set literal has a duplicate element", frame.pos)
            return result
        if len(items) % 2:
            raise self.error(
                f"map literal has an odd number of forms ({len(items)}): a key has no value",
                frame.pos,
            )
        result_map: dict[Any, Any] = {}
        for i in range(0, len(items), 2):
            try:
                key = _hashable(items[i])
                duplicate = key in result_map
            except TypeError as err:
                raise self.error(f"map key cannot be hashed: {err}", frame.pos) from err
            if duplicate:
                raise self.error(f"map literal has the key {key!r} twice", frame.pos)
            result_map[key] = items[i + 1]
        return result_map

    def _atom(self, kind: str | None, token: str, pos: int) -> Any:
        if kind == "string":
            body = token[1:-1]
            return self._unescape(body, pos + 1) if "\\" in body else body
        if kind == "atom":
            return self._scalar(token, pos)
        if kind == "char":
            name = token[1:]
            if len(name) == 1:
                return name
            if name in _CHARS:
                return _CHARS[name]
            if name[0] == "u":
                char = chr(int(name[1:], 16))
                if 0xD800 <= ord(char) <= 0xDFFF:
                    raise self.error(
                        f"character literal {token!r} is a lone UTF-16 surrogate, not a "
                        "Unicode character",
                        pos,
                    )
                return char
            return chr(int(name[1:], 8))
        if kind == "special":
            if token in _SPECIAL:
                return _SPECIAL[token]
            raise self.error(f"unknown symbolic value {token!r} (##Inf, ##-Inf, ##NaN)", pos)
        raise self.error(f"unexpected {token!r}", pos)  # pragma: no cover

    def _scalar(self, token: str, pos: int) -> Any:
        first = token[0]
        if first == ":":
            name = token[1:]
            if not name or name.startswith(":") or name.endswith("/"):
                raise self.error(f"invalid keyword {token!r}", pos)
            return name
        if first.isdigit() or (first in "+-" and len(token) > 1 and token[1].isdigit()):
            return self._number(token, pos)
        if token == "nil":
            return None
        if token == "true":
            return True
        if token == "false":
            return False
        return Symbol(token)

    def _number(self, token: str, pos: int) -> Any:
        m = _INT.fullmatch(token)
        if m:
            sign, hexa, decimal, octal, _ = m.groups()
            if len(hexa or decimal or octal) > MAX_DIGITS:
                raise self._too_long(token, pos)
            if hexa is not None:
                number = int(hexa, 16)
            elif octal is not None:
                number = int(octal, 8)
            else:
                number = int(decimal)
            if number >= _TOO_LARGE:
                raise self._too_long(token, pos)
            return -number if sign == "-" else number
        if _FLOAT.fullmatch(token) and any(c in token for c in ".eEM"):
            if token.endswith("M"):
                return Decimal(token[:-1])
            return float(token)
        m = _RATIO.fullmatch(token)
        if m:
            if max(len(m.group(1)), len(m.group(2))) > MAX_DIGITS:
                raise self._too_long(token, pos)
            if int(m.group(2)) == 0:
                raise self.error(f"ratio {token!r} divides by zero", pos)
            ratio = Fraction(int(m.group(1)), int(m.group(2)))
            try:
                float(ratio)
            except OverflowError:
                raise self.error(
                    f"ratio {token[:40]!r} is too large for a number squall can hold", pos
                ) from None
            return ratio
        raise self.error(f"invalid number {token!r}", pos)

    def _too_long(self, token: str, pos: int) -> EdnError:
        return self.error(
            f"number {token[:20]}... ({len(token)} characters) is too large: squall reads "
            f"integers of at most {MAX_DIGITS} decimal digits",
            pos,
        )

    def _unescape(self, body: str, pos: int) -> str:
        def replace(m: re.Match[str]) -> str:
            code = m.group(1)
            if code in _ESCAPES:
                return _ESCAPES[code]
            if code[0] == "u" and len(code) == 5:
                return chr(int(code[1:], 16))
            if code[0] in "01234567":
                return chr(int(code, 8))
            raise self.error(f"invalid escape \\{code} in string", pos + m.start())

        text = _ESCAPE.sub(replace, body)
        try:
            # Java writes a character beyond U+FFFF as two escapes (a surrogate pair): one
            # character. A surrogate that is not half of a pair is not Unicode.
            text.encode("utf-8")
        except UnicodeEncodeError:
            try:
                text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError:
                raise self.error(
                    "string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is "
                    "not Unicode text",
                    pos - 1,
                ) from None
        return text

    def _tagged(self, tag: str, form: Any) -> Any:
        handler = self._tags.get(tag)
        if handler is not None:
            return handler(form)
        if self._default_tag is not None:
            return self._default_tag(tag, form)
        return form

    def _bad_token(self, pos: int) -> EdnError:
        text = self._text
        char = text[pos]
        if char == '"':
            return self.error("string is never closed (missing '\"')", pos)
        if char == "\\":
            return self.error("character literal is missing its character", pos)
        if char == "#":
            following = text[pos + 1 : pos + 2] or "the end"
            return self.error(
                f"unsupported dispatch '#' followed by {following!r} (EDN has #{{, #_ and #tag)",
                pos,
            )
        return self.error(f"unexpected character {char!r}", pos)


_UNWRAPPED = object()


def decode_edn(data: bytes, *, source: str | None = None) -> str:
    """EDN text from bytes (UTF-8); `EdnError` naming the line and column if it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise not_utf8(err, source) from None


def not_utf8(err: UnicodeDecodeError, source: str | None = None) -> EdnError:
    """The `EdnError` for EDN bytes that failed to decode: where, and why."""
    data = bytes(err.object)
    line_start = data.rfind(b"\n", 0, err.start) + 1
    line = data.count(b"\n", 0, err.start) + 1
    column = len(data[line_start : err.start].decode("utf-8", "replace")) + 1
    byte = data[err.start : err.start + 1].hex()
    return EdnError(f"not UTF-8 text: {err.reason} (byte 0x{byte})", line, column, source)


def loads_edn(text: str, **options: Any) -> Any:
    """Read the single form of `text` (EdnError if there is none or more than one)."""
    reader = EdnReader(text, **options)
    forms = reader.forms()
    try:
        form = next(forms)
    except StopIteration:
        raise reader.error("no form: the text is empty", len(text)) from None
    for _extra in forms:
        raise reader.error("more than one top-level form", reader.top_start)
    return form


def iter_edn(text: str, *, unwrap_vector: bool = False, **options: Any) -> Iterator[Any]:
    """Yield every top-level form of `text` (see `EdnReader.forms`)."""
    return EdnReader(text, **options).forms(unwrap_vector=unwrap_vector)
