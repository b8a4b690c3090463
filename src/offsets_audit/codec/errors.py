"""The one exception the codec raises for bad bytes, and the warnings it records for bytes Kafka accepts.

Kafka's ``CoordinatorRecordSerde`` throws ``UnknownRecordTypeException`` / ``UnknownRecordVersionException`` or a
``RuntimeException`` from the generated reader; we raise one ``DecodeError`` whose ``code`` says which rule broke,
so quarantine rows can be counted per code. Where Kafka's reader accepts bytes a careful writer would not
produce (trailing bytes, malformed UTF-8, ...), the record decodes as Kafka reads it and carries a
``DecodeWarning`` instead (docs/decoding.md lists every case with the Kafka code it mirrors).
"""

from __future__ import annotations

from typing import NamedTuple

#: Every code a DecodeError can carry (stable strings; quarantine tables group by them).
DECODE_ERROR_CODES = (
    "empty_key",            # the record has no key (every coordinator record has one)
    "unknown_record_type",  # the key's int16 prefix is not a record type in schemas/record_types.json
    "unknown_version",      # the value's int16 prefix is not a valid version of the value schema
    "truncated",            # the bytes end before the schema says they should
    "trailing_bytes",       # strict decoding only (records warn: Kafka ignores bytes after the message)
    "bad_utf8",             # strict decoding only (records warn: Kafka decodes with replacement characters)
    "negative_length",      # a negative length of a non-nullable field (strict: also below -1 on a nullable one)
    "null_not_allowed",     # null in a field that is not nullable at this version
    "invalid_varint",       # a varint longer than 5 (or 10) bytes
    "bad_tagged_field",     # strict decoding only (records warn: Kafka ignores a known tag's size)
    "string_too_long",      # a compact string longer than 32767 bytes (Kafka: "had invalid length")
)

#: Every code a DecodeWarning can carry: the record decoded the way Kafka's reader reads it and is applied.
#: Where the condition is one the codec used to quarantine, the warning keeps that error code's name.
DECODE_WARNING_CODES = (
    "trailing_bytes",                   # bytes after the message; Kafka's reader stops at the last known field
    "bad_utf8",                         # a string is not well-formed UTF-8; decoded with Java's U+FFFD rules
    "negative_length",                  # a nullable length below -1; Kafka reads any negative length as null
    "varint_overflow",                  # a 5-byte varint with bits above bit 31; Kafka drops them
    "bad_tagged_field",                 # a known tagged field's size disagrees with its content; Kafka ignores it
    "consumer_protocol_newer_version",  # a subscription/assignment version above schemas/'s, read as the highest
    "consumer_protocol_undecodable",    # subscription/assignment bytes Kafka's ConsumerProtocol rejects: kept raw
)


class DecodeWarning(NamedTuple):
    """Something Kafka's reader tolerates in a record that decoded: ``code`` (one of DECODE_WARNING_CODES),
    ``part`` (``key``, ``value`` or ``value.members[i].subscription`` / ``.assignment``) and ``position``,
    the byte offset in that part where it starts."""

    code: str
    part: str
    position: int


class DecodeError(Exception):
    """Bytes that do not decode under our schemas; ``code`` is one of DECODE_ERROR_CODES."""

    def __init__(self, code: str, detail: str = "", *, position: int | None = None,
                 record_type: int | None = None, version: int | None = None, part: str | None = None):
        self.code = code
        self.detail = detail
        self.position = position
        self.record_type = record_type
        self.version = version
        self.part = part
        super().__init__(code)

    def __str__(self) -> str:
        where = []
        if self.record_type is not None:
            where.append(f"record type {self.record_type}")
        if self.part is not None:
            where.append(f"{self.part} version {self.version}" if self.version is not None else self.part)
        if self.position is not None:
            where.append(f"byte {self.position}")
        text = f"{self.code}: {self.detail}" if self.detail else self.code
        return f"{text} ({', '.join(where)})" if where else text
