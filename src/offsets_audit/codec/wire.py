"""Kafka's wire primitives (``ByteUtils``, ``Readable`` / ``Writable``): varints, compact lengths, Java strings,
uuids and fixed-width arrays, as the compiled readers and writers of ``codec.compiler`` call them.

``sources/segments.py`` keeps its own varint loop for record batches: the sources sit below the codec in the
stage layers (they may not import it), a batch's errors are ``ValueError``s that the segment reader turns into
unreadable stretches, and its hot loop inlines one-byte varints.
"""

from __future__ import annotations

import base64
import struct
from typing import Callable

from offsets_audit.codec.errors import DecodeError
from offsets_audit.codec.java_utf8 import decode_java_utf8


def read_java_unsigned_varint(buf: bytes, pos: int, warnings: list) -> tuple[int, int]:
    """Kafka ``ByteUtils.readUnsignedVarint`` to the bit: at most 5 bytes, the result a Java int.

    Bits above bit 31 (a fifth byte over 0x0F) are dropped and the value may come out negative, as the
    Java shift-and-or does; dropping bits appends a ``varint_overflow`` warning. A fifth byte with its
    high bit set is Kafka's "Varint is too long" (``invalid_varint``).
    """
    value = 0
    shift = 0
    start = pos
    while True:
        b = buf[pos]
        pos += 1
        if shift == 28:
            if b >= 0x80:
                raise DecodeError("invalid_varint", "unsigned varint longer than 5 bytes", position=start)
            if b > 0x0F:
                warnings.append(("varint_overflow", start))
            value |= (b & 0x0F) << 28
            return (value ^ 0x80000000) - 0x80000000, pos
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def read_java_compact_length(buf: bytes, pos: int, warnings: list) -> tuple[int, int]:
    """A compact length (unsigned varint minus one) in Java int arithmetic: ``Integer.MIN_VALUE - 1`` wraps
    to ``Integer.MAX_VALUE`` as in the generated ``_readable.readUnsignedVarint() - 1``."""
    value, pos = read_java_unsigned_varint(buf, pos, warnings)
    value -= 1
    return (value + 0x100000000 if value < -0x80000000 else value), pos


def read_java_string(buf: bytes, start: int, end: int, warnings: list) -> str:
    """Kafka ``Readable.readString`` on bytes that are not well-formed UTF-8: Java's replacement characters,
    and a ``bad_utf8`` warning at the first malformed byte."""
    text, first = decode_java_utf8(bytes(buf[start:end]))
    if first is not None:
        warnings.append(("bad_utf8", start + first))
    return text


def write_unsigned_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uuid_to_string(raw: bytes) -> str:
    """Kafka ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw)[:22].decode("ascii")


def uuid_from_string(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid string: {text!r}")
    return raw


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def truncated_error(what: str, pos: int) -> DecodeError:
    return DecodeError("truncated", f"{what} runs past the end of the buffer", position=pos)


def negative_length_error(what: str, n: int, pos: int) -> DecodeError:
    if n == -1:
        return DecodeError("null_not_allowed", f"{what} is null but not nullable at this version", position=pos)
    return DecodeError("negative_length", f"{what} has length {n}", position=pos)


_unpack_cache: dict[str, Callable] = {}


def unpack_array(code: str, n: int, buf: bytes, pos: int) -> list:
    fmt = f">{n}{code}"
    fn = _unpack_cache.get(fmt)
    if fn is None:
        fn = struct.Struct(fmt).unpack_from
        if len(_unpack_cache) < 4096:
            _unpack_cache[fmt] = fn
    return list(fn(buf, pos))


def pack_array(code: str, values) -> bytes:
    return struct.pack(f">{len(values)}{code}", *values)
