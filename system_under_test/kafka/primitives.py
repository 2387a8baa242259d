"""Kafka's primitive types: a strict reader and a writer over byte buffers.

Integers are big-endian two's complement; varints are zigzag-encoded base-128 as in
Protocol Buffers (records only). Strings are UTF-8 with an int16 length, bytes have an
int32 length, arrays an int32 count; -1 is null where the field allows it. The reader is
total: every malformed input raises KafkaCodecError, every length is checked against the
bytes left before anything is allocated.
"""

from __future__ import annotations

import struct

from system_under_test.errors import KafkaCodecError

Buffer = bytes | bytearray | memoryview

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10

INT16_MAX = 0x7FFF
INT32_MAX = 0x7FFF_FFFF


def zigzag(value: int, bits: int) -> int:
    """The zigzag mapping of a signed integer of ``bits`` bits onto an unsigned one."""
    return (value << 1) ^ (value >> (bits - 1))


def unzigzag(value: int) -> int:
    """The inverse of ``zigzag``."""
    return (value >> 1) ^ -(value & 1)


def _check_range(value: int, bits: int, what: str) -> None:
    if not isinstance(value, int):
        raise KafkaCodecError(f"{what} field holds {type(value).__name__}, not an integer")
    low = -(1 << (bits - 1))
    if not low <= value < -low:
        raise KafkaCodecError(f"{what} {value} does not fit in {bits} bits")


def _utf8(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise KafkaCodecError(f"string cannot be encoded as UTF-8: {err.reason}") from None


class Reader:
    """A bounds-checked cursor over a buffer; ``end`` may stop short of the buffer's end."""

    __slots__ = ("_buf", "end", "pos")

    def __init__(self, buf: Buffer, pos: int = 0, end: int | None = None) -> None:
        self._buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self._buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, size: int, what: str) -> memoryview:
        """The next ``size`` bytes, as a view."""
        start = self.pos
        if size > self.end - start:
            raise KafkaCodecError(
                f"{what} needs {size} bytes at byte {start}, only {self.end - start} left"
            )
        self.pos = start + size
        return self._buf[start : start + size]

    def _unpack(self, codec: struct.Struct, what: str) -> int:
        start = self.pos
        if codec.size > self.end - start:
            raise KafkaCodecError(
                f"{what} needs {codec.size} bytes at byte {start}, only {self.end - start} left"
            )
        self.pos = start + codec.size
        return int(codec.unpack_from(self._buf, start)[0])

    def int8(self) -> int:
        return self._unpack(_INT8, "int8")

    def int16(self) -> int:
        return self._unpack(_INT16, "int16")

    def int32(self) -> int:
        return self._unpack(_INT32, "int32")

    def int64(self) -> int:
        return self._unpack(_INT64, "int64")

    def uint32(self) -> int:
        return self._unpack(_UINT32, "uint32")

    def boolean(self) -> bool:
        """Any non-zero byte is true, as Kafka reads it."""
        return self._unpack(_INT8, "boolean") != 0

    def _unsigned_varint(self, max_bytes: int, what: str) -> int:
        result = 0
        shift = 0
        buf = self._buf
        for _ in range(max_bytes):
            if self.pos >= self.end:
                raise KafkaCodecError(f"{what} runs past the end at byte {self.pos}")
            byte = buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
        raise KafkaCodecError(
            f"{what} longer than {max_bytes} bytes at byte {self.pos - max_bytes}"
        )

    def varint(self) -> int:
        """A zigzag varint of at most 32 bits."""
        start = self.pos
        if start < self.end and (byte := self._buf[start]) < 0x80:  # most are one byte
            self.pos = start + 1
            return (byte >> 1) ^ -(byte & 1)
        value = unzigzag(self._unsigned_varint(VARINT_MAX_BYTES, "varint"))
        if not -(1 << 31) <= value < 1 << 31:
            raise KafkaCodecError(f"varint at byte {start} does not fit in 32 bits")
        return value

    def varlong(self) -> int:
        """A zigzag varint of at most 64 bits."""
        start = self.pos
        if start < self.end and (byte := self._buf[start]) < 0x80:
            self.pos = start + 1
            return (byte >> 1) ^ -(byte & 1)
        value = unzigzag(self._unsigned_varint(VARLONG_MAX_BYTES, "varlong"))
        if not -(1 << 63) <= value < 1 << 63:
            raise KafkaCodecError(f"varlong at byte {start} does not fit in 64 bits")
        return value

    def _text(self, length: int, start: int) -> str:
        data = self.take(length, "string")
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as err:
            raise KafkaCodecError(f"string at byte {start} is not UTF-8: {err.reason}") from None

    def string(self, *, nullable: bool) -> str | None:
        """An int16-length UTF-8 string; -1 is null when ``nullable``."""
        start = self.pos
        length = self.int16()
        if length < 0:
            if length == -1 and nullable:
                return None
            raise KafkaCodecError(
                f"string length {length} at byte {start}"
                + (" (null where a string is required)" if length == -1 else "")
            )
        return self._text(length, start)

    def bytes_(self, *, nullable: bool) -> bytes | None:
        """An int32-length byte string; -1 is null when ``nullable``."""
        start = self.pos
        length = self.int32()
        if length < 0:
            if length == -1 and nullable:
                return None
            raise KafkaCodecError(
                f"bytes length {length} at byte {start}"
                + (" (null where bytes are required)" if length == -1 else "")
            )
        return bytes(self.take(length, "bytes"))

    def varint_bytes(self) -> bytes | None:
        """A varint-length byte string (records); -1 is null."""
        start = self.pos
        length = self.varint()
        if length < 0:
            if length == -1:
                return None
            raise KafkaCodecError(f"length {length} at byte {start}")
        return bytes(self.take(length, "bytes"))

    def varint_string(self) -> str:
        """A varint-length UTF-8 string that may not be null (record header keys)."""
        start = self.pos
        length = self.varint()
        if length < 0:
            raise KafkaCodecError(f"string length {length} at byte {start}")
        return self._text(length, start)

    def count(self, element_min_size: int, *, nullable: bool) -> int:
        """An int32 array count, -1 for null when ``nullable``; checked against the bytes left."""
        start = self.pos
        count = self.int32()
        if count < 0:
            if count == -1 and nullable:
                return -1
            raise KafkaCodecError(
                f"array count {count} at byte {start}"
                + (" (null where an array is required)" if count == -1 else "")
            )
        if count * element_min_size > self.end - self.pos:
            raise KafkaCodecError(
                f"array count {count} at byte {start} cannot fit in the "
                f"{self.end - self.pos} bytes left"
            )
        return count

    def expect_end(self) -> None:
        if self.pos != self.end:
            raise KafkaCodecError(f"{self.end - self.pos} bytes left over after the body")


class Writer:
    """Appends Kafka's primitives to one bytearray, checking that each value fits its type."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray | None = None) -> None:
        self.buf = bytearray() if buf is None else buf

    def _pack(self, codec: struct.Struct, value: int, bits: int, what: str) -> None:
        if not isinstance(value, int):
            raise KafkaCodecError(f"{what} field holds {type(value).__name__}, not an integer")
        try:
            self.buf += codec.pack(value)
        except struct.error:
            raise KafkaCodecError(f"{what} {value!r} does not fit in {bits} bits") from None

    def int8(self, value: int) -> None:
        self._pack(_INT8, value, 8, "int8")

    def int16(self, value: int) -> None:
        self._pack(_INT16, value, 16, "int16")

    def int32(self, value: int) -> None:
        self._pack(_INT32, value, 32, "int32")

    def int64(self, value: int) -> None:
        self._pack(_INT64, value, 64, "int64")

    def uint32(self, value: int) -> None:
        self._pack(_UINT32, value, 32, "uint32")

    def boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def _unsigned_varint(self, value: int) -> None:
        while value > 0x7F:
            self.buf.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buf.append(value)

    def varint(self, value: int) -> None:
        _check_range(value, 32, "varint")
        self._unsigned_varint(zigzag(value, 32) & 0xFFFF_FFFF)

    def varlong(self, value: int) -> None:
        _check_range(value, 64, "varlong")
        self._unsigned_varint(zigzag(value, 64) & 0xFFFF_FFFF_FFFF_FFFF)

    def string(self, value: str | None, *, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise KafkaCodecError("null where a string is required")
            self.buf += _INT16.pack(-1)
            return
        data = _utf8(value)
        if len(data) > INT16_MAX:
            raise KafkaCodecError(f"string of {len(data)} bytes is longer than {INT16_MAX}")
        self.buf += _INT16.pack(len(data))
        self.buf += data

    def bytes_(self, value: Buffer | None, *, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise KafkaCodecError("null where bytes are required")
            self.buf += _INT32.pack(-1)
            return
        if len(value) > INT32_MAX:
            raise KafkaCodecError(f"{len(value)} bytes are more than an int32 length can say")
        self.buf += _INT32.pack(len(value))
        self.buf += value

    def varint_bytes(self, value: Buffer | None) -> None:
        if value is None:
            self.varint(-1)
            return
        self.varint(len(value))
        self.buf += value

    def varint_string(self, value: str) -> None:
        data = _utf8(value)
        self.varint(len(data))
        self.buf += data

    def count(self, value: int | None, *, nullable: bool) -> None:
        """An array count; None writes a null array."""
        if value is None:
            if not nullable:
                raise KafkaCodecError("null where an array is required")
            self.buf += _INT32.pack(-1)
            return
        self.buf += _INT32.pack(value)
