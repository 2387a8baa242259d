"""Messages declared as data: dataclasses whose fields carry Kafka's wire type and versions.

A message or nested struct is a frozen, keyword-only dataclass decorated with ``@struct``;
each field is declared with ``field(type, versions, nullable=..., default=...)`` using the
notation of Kafka's message definitions (``"3+"``, ``"0-2"``). One codec, driven by that
table, encodes and decodes every version: a field is on the wire exactly in its versions,
and holds its default when a version lacks it (so decoding an old version yields Kafka's
defaults, and encoding one leaves the field out, refusing a value other than the default
unless Kafka marks the field ignorable).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, dataclass_transform

from system_under_test.errors import KafkaCodecError
from system_under_test.kafka.primitives import Buffer, Reader, Writer

_WIRE = "kafka_wire"
NO_VERSIONS = (1, 0)
"""An empty range, for ``nullable`` of a field that is never null."""


def parse_versions(text: str) -> tuple[int, int]:
    """Kafka's version-range notation: ``"3"``, ``"3+"`` or ``"3-7"``."""
    if text.endswith("+"):
        return int(text[:-1]), 0x7FFF
    low, _, high = text.partition("-")
    return int(low), int(high or low)


class WireType:
    """How one value is read and written at a version, and the fewest bytes it takes."""

    name = "?"

    def min_size(self, version: int) -> int:
        raise NotImplementedError

    def read(self, reader: Reader, version: int, nullable: bool) -> Any:
        raise NotImplementedError

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        raise NotImplementedError


class _Int(WireType):
    def __init__(
        self,
        name: str,
        size: int,
        read: Callable[[Reader], int],
        write: Callable[[Writer, int], None],
    ) -> None:
        self.name = name
        self._size = size
        self._read = read
        self._write = write

    def min_size(self, version: int) -> int:
        return self._size

    def read(self, reader: Reader, version: int, nullable: bool) -> int:
        return self._read(reader)

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        self._write(writer, value)


class _Boolean(WireType):
    name = "bool"

    def min_size(self, version: int) -> int:
        return 1

    def read(self, reader: Reader, version: int, nullable: bool) -> bool:
        return reader.boolean()

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        if type(value) is not bool:
            raise KafkaCodecError(f"bool field holds {type(value).__name__} {value!r}")
        writer.boolean(value)


class _String(WireType):
    name = "string"

    def min_size(self, version: int) -> int:
        return 2

    def read(self, reader: Reader, version: int, nullable: bool) -> str | None:
        return reader.string(nullable=nullable)

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        if value is not None and type(value) is not str:
            raise KafkaCodecError(f"string field holds {type(value).__name__}")
        writer.string(value, nullable=nullable)


class _Bytes(WireType):
    """``bytes`` and ``records``: an int32 length, then that many bytes (records are raw)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def min_size(self, version: int) -> int:
        return 4

    def read(self, reader: Reader, version: int, nullable: bool) -> bytes | None:
        return reader.bytes_(nullable=nullable)

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise KafkaCodecError(f"{self.name} field holds {type(value).__name__}")
        writer.bytes_(value, nullable=nullable)


INT8: WireType = _Int("int8", 1, Reader.int8, Writer.int8)
INT16: WireType = _Int("int16", 2, Reader.int16, Writer.int16)
INT32: WireType = _Int("int32", 4, Reader.int32, Writer.int32)
INT64: WireType = _Int("int64", 8, Reader.int64, Writer.int64)
BOOLEAN: WireType = _Boolean()
STRING: WireType = _String()
BYTES: WireType = _Bytes("bytes")
RECORDS: WireType = _Bytes("records")
"""Record batches carried as bytes, unparsed (record_batch.py reads them)."""


class Array(WireType):
    """An int32 count, then that many elements; -1 is a null array where allowed."""

    def __init__(self, element: WireType) -> None:
        self.element = element
        self.name = f"[]{element.name}"

    def min_size(self, version: int) -> int:
        return 4

    def read(self, reader: Reader, version: int, nullable: bool) -> list[Any] | None:
        element = self.element
        count = reader.count(max(1, element.min_size(version)), nullable=nullable)
        if count == -1:
            return None
        items = []
        for index in range(count):
            try:
                items.append(element.read(reader, version, False))
            except KafkaCodecError as err:
                raise err.within(f"[{index}]") from None
        return items

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        if value is None:
            writer.count(None, nullable=nullable)
            return
        if not isinstance(value, list | tuple):
            raise KafkaCodecError(f"array field holds {type(value).__name__}")
        writer.count(len(value), nullable=nullable)
        element = self.element
        for index, item in enumerate(value):
            try:
                element.write(writer, item, version, False)
            except KafkaCodecError as err:
                raise err.within(f"[{index}]") from None


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a struct: its wire type and the versions it is present (and nullable) in."""

    name: str
    type: WireType
    versions: tuple[int, int]
    nullable: tuple[int, int]
    ignorable: bool
    default: Any
    """Kafka's default (dataclasses.MISSING for a required field)."""

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_at(self, version: int) -> bool:
        return self.nullable[0] <= version <= self.nullable[1]


def field(
    wire_type: WireType,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    default: Any = dataclasses.MISSING,
    ignorable: bool = False,
) -> Any:
    """Declare a dataclass field's wire type, versions and nullable versions (Kafka's notation).

    Without ``default`` the field is required; a field that some version lacks must have one
    (Kafka's default, which decoding that version yields). A list default is copied per value.
    Encoding a version that lacks the field refuses a value other than the default unless the
    field is ``ignorable``, as Kafka's generated code does.
    """
    spec = (
        wire_type,
        parse_versions(versions),
        parse_versions(nullable) if nullable else NO_VERSIONS,
        ignorable,
    )
    metadata = {_WIRE: spec}
    if isinstance(default, list):
        return dataclasses.field(default_factory=list, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


class StructType(WireType):
    """A nested struct (or a whole message body): its fields in order."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.name = cls.__name__
        self.fields: list[FieldSpec] = []
        self._at: dict[int, tuple[tuple[str, WireType, bool], ...]] = {}
        self._unwritable: dict[int, tuple[FieldSpec, ...]] = {}
        for item in dataclasses.fields(cls):
            wire_type, versions, nullable, ignorable = item.metadata[_WIRE]
            default = item.default
            if item.default_factory is not dataclasses.MISSING:
                default = item.default_factory()
            self.fields.append(
                FieldSpec(item.name, wire_type, versions, nullable, ignorable, default)
            )

    def at(self, version: int) -> tuple[tuple[str, WireType, bool], ...]:
        """The fields on the wire at a version: name, type, nullable."""
        found = self._at.get(version)
        if found is None:
            found = tuple(
                (f.name, f.type, f.nullable_at(version)) for f in self.fields if f.present(version)
            )
            self._at[version] = found
        return found

    def unwritable(self, version: int) -> tuple[FieldSpec, ...]:
        """The fields a version lacks that must hold their defaults to be encoded at it."""
        found = self._unwritable.get(version)
        if found is None:
            found = tuple(f for f in self.fields if not f.present(version) and not f.ignorable)
            self._unwritable[version] = found
        return found

    def min_size(self, version: int) -> int:
        return sum(wire_type.min_size(version) for _, wire_type, _ in self.at(version))

    def read(self, reader: Reader, version: int, nullable: bool) -> Any:
        values = {}
        for name, wire_type, field_nullable in self.at(version):
            try:
                values[name] = wire_type.read(reader, version, field_nullable)
            except KafkaCodecError as err:
                raise err.within(name) from None
        return self.cls(**values)

    def write(self, writer: Writer, value: Any, version: int, nullable: bool) -> None:
        if not isinstance(value, self.cls):
            raise KafkaCodecError(f"expected {self.name}, got {type(value).__name__}")
        for name, wire_type, field_nullable in self.at(version):
            try:
                wire_type.write(writer, getattr(value, name), version, field_nullable)
            except KafkaCodecError as err:
                raise err.within(name) from None
        for spec in self.unwritable(version):
            if getattr(value, spec.name) != spec.default:
                raise KafkaCodecError(
                    f"holds {getattr(value, spec.name)!r}, but version {version} has no such "
                    f"field and only its default {spec.default!r} may be left out",
                    spec.name,
                )


_S = TypeVar("_S")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def struct(cls: type[_S]) -> type[_S]:
    """Make a class a frozen, keyword-only dataclass and compile its codec (``cls.WIRE``)."""
    made = dataclass(frozen=True, slots=True, kw_only=True)(cls)
    wire = StructType(made)
    for spec in wire.fields:
        if spec.versions[0] > 0 and spec.default is dataclasses.MISSING:
            raise TypeError(
                f"{made.__name__}.{spec.name} is absent before version {spec.versions[0]}: "
                "give it a default"
            )
    made.WIRE = wire  # type: ignore[attr-defined]
    return made


def wire_of(cls: type[Any]) -> StructType:
    """The codec ``@struct`` compiled for a class."""
    wire = getattr(cls, "WIRE", None)
    if not isinstance(wire, StructType):
        raise TypeError(f"{cls.__name__} is not a @struct")
    return wire


def array_of(element: WireType | type[Any]) -> Array:
    """An array of a primitive type or of a ``@struct`` class."""
    return Array(element if isinstance(element, WireType) else wire_of(element))


class Body:
    """Base of request and response bodies: which API they belong to, at which versions."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    VERSIONS: ClassVar[tuple[int, int]]


_B = TypeVar("_B", bound=Body)


def encode_body(body: Body, version: int, writer: Writer | None = None) -> bytearray:
    """The bytes of a body at a version (appended to ``writer`` when given)."""
    cls = type(body)
    low, high = cls.VERSIONS
    if not low <= version <= high:
        raise KafkaCodecError(f"version {version} is outside {low}-{high}", cls.__name__)
    out = Writer() if writer is None else writer
    try:
        wire_of(cls).write(out, body, version, False)
    except KafkaCodecError as err:
        raise err.within(cls.__name__) from None
    return out.buf


def decode_body(cls: type[_B], data: Buffer, version: int) -> _B:
    """A body decoded at a version from exactly ``data``: no byte may be left over."""
    low, high = cls.VERSIONS
    try:
        if not low <= version <= high:
            raise KafkaCodecError(f"version {version} is outside {low}-{high}")
        reader = Reader(data)
        body = wire_of(cls).read(reader, version, False)
        reader.expect_end()
    except KafkaCodecError as err:
        raise err.within(cls.__name__) from None
    return body  # type: ignore[no-any-return]
