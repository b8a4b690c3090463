"""Coordinator record framing: ``__consumer_offsets`` key/value bytes <-> DecodedRecord.

Mirrors Kafka's ``CoordinatorRecordSerde`` (group coordinator):

* key = int16 record type + key message at version 0;
* value = int16 value version + value message at that version; a null value is a tombstone;
* a value version outside the schema's valid versions is ``UnknownRecordVersionException`` in Kafka,
  ``DecodeError("unknown_version")`` here.

Unlike the current broker, the removed types 9 (ShareGroupPartitionMetadata) and 18
(StreamsGroupPartitionMetadata) still decode: schemas/ keeps their last specs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from offsets_audit.codec.errors import DecodeError
from offsets_audit.codec.json import jackson_dumps
from offsets_audit.codec.reader import CompiledMessage, Compiler
from offsets_audit.codec.schema import RecordTypeSpec, load_schemas

_INT16 = struct.Struct(">h")
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass
class _RecordCodec:
    spec: RecordTypeSpec
    key: CompiledMessage
    values: dict[int, CompiledMessage]


class Codecs:
    """Every record type compiled once per process (see ``codecs()``)."""

    def __init__(self, directory: str | None = None):
        schemas = load_schemas(directory)
        compiler = Compiler()
        self.by_type: dict[int, _RecordCodec] = {}
        for record_type, spec in sorted(schemas.record_types.items()):
            key = compiler.compile(spec.key, 0)
            values = {v: compiler.compile(spec.value, v) for v in spec.value.valid_versions}
            self.by_type[record_type] = _RecordCodec(spec, key, values)
        self.consumer_protocol: dict[str, dict[int, CompiledMessage]] = {
            kind: {v: compiler.compile(msg, v) for v in msg.valid_versions}
            for kind, msg in schemas.consumer_protocol.items()
        }
        self.schemas = schemas


@lru_cache(maxsize=1)
def codecs() -> Codecs:
    return Codecs()


class DecodedRecord:
    """One coordinator record: type, versions, and key/value as plain dicts (Kafka's camelCase names)."""

    __slots__ = ("record_type", "record_name", "key_version", "value_version", "key", "value")

    def __init__(self, record_type: int, record_name: str, key_version: int, value_version: int | None,
                 key: dict, value: dict | None):
        self.record_type = record_type
        self.record_name = record_name
        self.key_version = key_version
        self.value_version = value_version
        self.key = key
        self.value = value

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    def kafka_json(self) -> tuple[dict, dict | None]:
        """``CoordinatorRecordJsonConverters.writeRecordKeyAsJson`` / ``writeRecordValueAsJson`` output."""
        codec = codecs().by_type[self.record_type]
        key_json = codec.key.to_json(self.key)
        if self.value is None:
            return key_json, None
        return key_json, codec.values[self.value_version].to_json(self.value)

    def __repr__(self) -> str:
        return (f"DecodedRecord({self.record_name}, type={self.record_type}, value_version={self.value_version}, "
                f"key={self.key!r}, value={self.value!r})")

    def __eq__(self, other) -> bool:
        return isinstance(other, DecodedRecord) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)


def _prefix(data: bytes, part: str, record_type: int | None) -> int:
    if len(data) < 2:
        raise DecodeError("truncated", f"{part} has {len(data)} bytes, fewer than the int16 prefix",
                          position=0, record_type=record_type, part=part)
    return _INT16.unpack_from(data, 0)[0]


def _read_message(compiled: CompiledMessage, data: bytes, part: str, record_type: int | None,
                  version: int, strict: bool = True) -> dict:
    try:
        message, pos = compiled.read(data, 2)
    except DecodeError as exc:
        exc.record_type, exc.part, exc.version = record_type, part, version
        raise
    except RecursionError:
        raise DecodeError("truncated", "message nests too deep", record_type=record_type, part=part,
                          version=version) from None
    if strict and pos != len(data):
        raise DecodeError("trailing_bytes", f"{len(data) - pos} bytes left after {compiled.message.name}",
                          position=pos, record_type=record_type, part=part, version=version)
    return message


def decode_record(key: bytes, value: bytes | None) -> DecodedRecord:
    """Decode one ``__consumer_offsets`` record (Kafka ``CoordinatorRecordSerde.deserialize``)."""
    if not key:
        raise DecodeError("empty_key", "a coordinator record needs a key", position=0, part="key")
    if not isinstance(key, bytes):
        key = bytes(key)
    record_type = _prefix(key, "key", None)
    codec = codecs().by_type.get(record_type)
    if codec is None:
        raise DecodeError("unknown_record_type", f"schemas/record_types.json has no record type {record_type}",
                          position=0, record_type=record_type, part="key")
    key_dict = _read_message(codec.key, key, "key", record_type, 0)
    if value is None:
        return DecodedRecord(record_type, codec.spec.name, 0, None, key_dict, None)
    if not isinstance(value, bytes):
        value = bytes(value)
    version = _prefix(value, "value", record_type)
    compiled = codec.values.get(version)
    if compiled is None:
        raise DecodeError("unknown_version",
                          f"schemas/{codec.spec.value.file} has no value version {version} for {codec.spec.name}",
                          position=0, record_type=record_type, part="value", version=version)
    value_dict = _read_message(compiled, value, "value", record_type, version)
    if record_type == 2 and value_dict.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member in value_dict["members"]:
            member["subscription_decoded"] = _decode_embedded("subscription", member.get("subscription"))
            member["assignment_decoded"] = _decode_embedded("assignment", member.get("assignment"))
    return DecodedRecord(record_type, codec.spec.name, 0, version, key_dict, value_dict)


def encode_record(record_type: int, key: dict, value: dict | None,
                  value_version: int | None) -> tuple[bytes, bytes | None]:
    """Serialise a record the way the coordinator writes it (inverse of decode_record)."""
    codec = codecs().by_type.get(record_type)
    if codec is None:
        raise ValueError(f"unknown record type {record_type}")
    key_out = bytearray(_INT16.pack(record_type))
    codec.key.write(key, key_out)
    if value is None:
        return bytes(key_out), None
    compiled = codec.values.get(value_version)
    if compiled is None:
        raise ValueError(f"{codec.spec.name} has no value version {value_version}")
    value_out = bytearray(_INT16.pack(value_version))
    compiled.write(value, value_out)
    return bytes(key_out), bytes(value_out)


# ---------------------------------------------------------------- classic consumer protocol


def _consumer_protocol(kind: str) -> dict[int, CompiledMessage]:
    table = codecs().consumer_protocol.get(kind)
    if table is None:
        raise ValueError(f"kind must be 'subscription' or 'assignment', not {kind!r}")
    return table


def _decode_consumer_protocol_dict(kind: str, data: bytes, strict: bool) -> tuple[int, dict]:
    table = _consumer_protocol(kind)
    if not isinstance(data, bytes):
        data = bytes(data)
    version = _prefix(data, kind, None)
    compiled = table.get(version)
    if compiled is None:
        raise DecodeError("unknown_version", f"ConsumerProtocol {kind} version {version} is not in schemas/",
                          position=0, part=kind, version=version)
    return version, _read_message(compiled, data, kind, None, version, strict=strict)


def decode_consumer_protocol(kind: str, data: bytes) -> dict:
    """Decode a ConsumerProtocolSubscription/Assignment (int16 version + message) to Kafka JSON."""
    version, message = _decode_consumer_protocol_dict(kind, data, strict=True)
    return _consumer_protocol(kind)[version].to_json(message)


def _decode_embedded(kind: str, data: bytes | None) -> dict | None:
    """What kafka-dump-log manages to decode from a classic member's bytes; None where it keeps the bytes.

    The tool reads the int16 version and the message and ignores bytes after it; any failure (empty
    bytes during a rebalance, an unknown version) keeps the raw bytes.
    """
    if not data:
        return None
    try:
        version, message = _decode_consumer_protocol_dict(kind, data, strict=False)
    except DecodeError:
        return None
    message["_version"] = version
    return message


def encode_consumer_protocol(kind: str, version: int, data: dict) -> bytes:
    """``ConsumerProtocol.serializeSubscription/Assignment``: int16 version + message (never flexible)."""
    compiled = _consumer_protocol(kind).get(version)
    if compiled is None:
        raise ValueError(f"ConsumerProtocol {kind} has no version {version}")
    out = bytearray(_INT16.pack(version))
    compiled.write(data, out)
    return bytes(out)


# ---------------------------------------------------------------- kafka-dump-log


def _embedded_json(kind: str, decoded: dict | None):
    if decoded is None:
        return None
    version = decoded["_version"]
    return _consumer_protocol(kind)[version].to_json(decoded)


def kafka_dump_log(record: DecodedRecord) -> tuple[str, str]:
    """The ``key:`` and ``payload:`` text of ``kafka-dump-log --offsets-decoder`` for this record.

    Mirrors ``DumpLogSegments.OffsetsMessageParser``: ``{"type":"<t>","data":<key>}`` and
    ``{"version":"<v>","data":<value>}`` (``<DELETE>`` for a tombstone); for a classic GroupMetadata with
    protocol type "consumer" each member's subscription/assignment bytes are replaced by their decoded JSON
    when they decode. Removed record types are printed the same way (the current tool skips them).
    """
    key_json, value_json = record.kafka_json()
    dump_key = jackson_dumps({"type": str(record.record_type), "data": key_json})
    if record.value is None:
        return dump_key, "<DELETE>"
    if record.record_type == 2 and value_json.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member_json, member in zip(value_json["members"], record.value["members"]):
            for kind in ("subscription", "assignment"):
                embedded = _embedded_json(kind, member.get(f"{kind}_decoded"))
                if embedded is not None:
                    member_json[kind] = embedded
    return dump_key, jackson_dumps({"version": str(record.value_version), "data": value_json})
