"""The one exception the codec raises for bad bytes.

Kafka's ``CoordinatorRecordSerde`` throws ``UnknownRecordTypeException`` / ``UnknownRecordVersionException`` or a
``RuntimeException`` from the generated reader; we raise one ``DecodeError`` whose ``code`` says which rule broke,
so quarantine rows can be counted per code.
"""

from __future__ import annotations

#: Every code a DecodeError can carry (stable strings; quarantine tables group by them).
DECODE_ERROR_CODES = (
    "empty_key",            # the record has no key (every coordinator record has one)
    "unknown_record_type",  # the key's int16 prefix is not a record type in schemas/record_types.json
    "unknown_version",      # the value's int16 prefix is not a valid version of the value schema
    "truncated",            # the bytes end before the schema says they should
    "trailing_bytes",       # bytes are left after the message
    "bad_utf8",             # a string field is not valid UTF-8
    "negative_length",      # a length or count below -1 (or -1 where null is impossible for arrays)
    "null_not_allowed",     # null in a field that is not nullable at this version
    "invalid_varint",       # a varint longer than 5 (or 10) bytes
    "bad_tagged_field",     # a known tagged field whose size does not match its content
)


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
