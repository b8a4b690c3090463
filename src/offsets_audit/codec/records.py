"""Coordinator record framing: ``__consumer_offsets`` key/value bytes <-> DecodedRecord.

Mirrors Kafka's ``CoordinatorRecordSerde`` (group coordinator):

* key = int16 record type + key message at version 0;
* value = int16 value version + value message at that version; a null value is a tombstone;
* a value version outside the schema's valid versions is ``UnknownRecordVersionException`` in Kafka,
  ``DecodeError("unknown_version")`` here;
* like Kafka's generated readers, the key and value readers accept what Kafka's loader applies (bytes
  after the message, malformed UTF-8 as Java decodes it, ...): such a record decodes and carries
  ``DecodeWarning``s; what Kafka's loader skips or fails on raises ``DecodeError`` (docs/decoding.md).

Unlike the current broker, the removed types 9 (ShareGroupPartitionMetadata) and 18
(StreamsGroupPartitionMetadata) still decode: schemas/ keeps their last specs.

Kafka once changed a value's layout without bumping its version: 4.1 added ``metadataHash`` to
``ShareGroupMetadataValue`` v0 and ``initializingTopics`` to ``ShareGroupStatePartitionMetadataValue`` v0, both
untagged, so the records a 4.0 broker wrote for its early-access share groups do not read with 4.1's reader.
schemas/ marks such fields with the release that added them (``since``) and such messages with the releases
that did it (``earlier_layouts``); a value the current layout cannot read is read again with each earlier
layout (the fields of later releases left out), newest first, and kept when one reads every byte cleanly, as
the release that wrote it reads it (``DecodedRecord.layout``).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

from offsets_audit.codec.errors import DecodeError, DecodeWarning
from offsets_audit.codec.json import jackson_dumps
from offsets_audit.codec.compiler import CompiledMessage, Compiler
from offsets_audit.codec.record_types import RecordType
from offsets_audit.codec.schema import FieldSpec, MessageSpec, RecordTypeSpec, load_schemas

_INT16 = struct.Struct(">h")
#: strict decoding (the consumer-protocol round trip) refuses what a lenient decode only warns about
_STRICT_ERRORS = {"varint_overflow": "invalid_varint"}  # the other warning codes are error codes too
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass
class _RecordCodec:
    spec: RecordTypeSpec
    key: CompiledMessage
    values: dict[int, CompiledMessage]
    #: per value version, the layouts earlier releases wrote at that same version, newest first:
    #: (layout name, reader), e.g. ("before 4.1", the v0 reader without 4.1's untagged fields)
    earlier: dict[int, list[tuple[str, CompiledMessage]]]


def _release(text: str) -> tuple[int, ...]:
    """``"4.1"`` -> (4, 1); a note after the number (``"4.1-dev (never released)"``) is left out."""
    match = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def _layout_fields(fields: list[FieldSpec], version: int, flexible: bool) -> list[FieldSpec]:
    """The fields of ``version`` that shape its bytes: tagged fields change nothing when absent."""
    return [f for f in fields if version in f.versions and not (flexible and version in f.tagged_versions)]


def _layout_releases(msg: MessageSpec, version: int) -> list[str]:
    """The releases of ``earlier_layouts`` that added an untagged field to ``version``, newest first."""
    flexible = version in msg.flexible_versions
    shaping = [f for fields in [msg.fields, *msg.structs.values()] for f in _layout_fields(fields, version, flexible)]
    return sorted((release for release in msg.earlier_layouts
                   if any(f.since and _release(f.since) >= _release(release) for f in shaping)),
                  key=_release, reverse=True)


def _layout_before(msg: MessageSpec, version: int, release: str) -> MessageSpec:
    """``msg`` as releases before ``release`` wrote ``version``: the untagged fields it added left out."""
    flexible = version in msg.flexible_versions
    cut = _release(release)

    def keep(fields: list[FieldSpec]) -> list[FieldSpec]:
        shaping = _layout_fields(fields, version, flexible)
        return [f for f in fields if not (f in shaping and f.since and _release(f.since) >= cut)]

    return MessageSpec(
        name=f"{msg.name}Before{release.replace('.', '_')}", kind=msg.kind, valid_versions=msg.valid_versions,
        flexible_versions=msg.flexible_versions, fields=keep(msg.fields),
        structs={name: keep(fields) for name, fields in msg.structs.items()}, record_type=msg.record_type,
        since=msg.since, removed_in=msg.removed_in, file=msg.file)


class Codecs:
    """Every record type compiled once per process (see ``codecs()``)."""

    def __init__(self, directory: str | None = None):
        schemas = load_schemas(directory)
        compiler = Compiler()
        self.by_type: dict[int, _RecordCodec] = {}
        for record_type, spec in sorted(schemas.record_types.items()):
            key = compiler.compile(spec.key, 0)
            values = {v: compiler.compile(spec.value, v) for v in spec.value.valid_versions}
            earlier = {v: [(f"before {release}", compiler.compile(_layout_before(spec.value, v, release), v))
                           for release in _layout_releases(spec.value, v)]
                       for v in spec.value.valid_versions}
            self.by_type[record_type] = _RecordCodec(spec, key, values,
                                                     {v: found for v, found in earlier.items() if found})
        self.consumer_protocol: dict[str, dict[int, CompiledMessage]] = {
            kind: {v: compiler.compile(msg, v) for v in msg.valid_versions}
            for kind, msg in schemas.consumer_protocol.items()
        }
        self.schemas = schemas


@lru_cache(maxsize=1)
def codecs() -> Codecs:
    return Codecs()


class DecodedRecord:
    """One coordinator record: type, versions, and key/value as plain dicts (Kafka's camelCase names).

    ``warnings`` lists what Kafka's reader tolerated in the bytes (``DecodeWarning``s, empty for records a
    Kafka broker wrote): the record is decoded and applied as Kafka applies it. ``layout`` names the earlier
    layout of the value version the value was read with (``"before 4.1"``), None for the current one; the value
    then holds the fields that layout has.
    """

    __slots__ = ("record_type", "record_name", "key_version", "value_version", "key", "value", "warnings", "layout")

    def __init__(self, record_type: int, record_name: str, key_version: int, value_version: int | None,
                 key: dict, value: dict | None, warnings: list[DecodeWarning] | None = None,
                 layout: str | None = None):
        self.record_type = record_type
        self.record_name = record_name
        self.key_version = key_version
        self.value_version = value_version
        self.key = key
        self.value = value
        self.warnings = warnings if warnings is not None else []
        self.layout = layout

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    def kafka_json(self) -> tuple[dict, dict | None]:
        """``CoordinatorRecordJsonConverters.writeRecordKeyAsJson`` / ``writeRecordValueAsJson`` output."""
        codec = codecs().by_type[self.record_type]
        key_json = codec.key.to_json(self.key)
        if self.value is None:
            return key_json, None
        if self.value_version is None:
            raise ValueError(f"{self.record_name} has a value but no value version")
        if self.layout is not None:
            compiled = dict(codec.earlier[self.value_version])[self.layout]
            return key_json, compiled.to_json(self.value)
        return key_json, codec.values[self.value_version].to_json(self.value)

    def __repr__(self) -> str:
        warnings = f", warnings={self.warnings!r}" if self.warnings else ""
        layout = f", layout={self.layout!r}" if self.layout else ""
        return (f"DecodedRecord({self.record_name}, type={self.record_type}, value_version={self.value_version}, "
                f"key={self.key!r}, value={self.value!r}{warnings}{layout})")

    def __eq__(self, other) -> bool:
        return isinstance(other, DecodedRecord) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__)


def _prefix(data: bytes, part: str, record_type: int | None) -> int:
    if len(data) < 2:
        raise DecodeError("truncated", f"{part} has {len(data)} bytes, fewer than the int16 prefix",
                          position=0, record_type=record_type, part=part)
    return _INT16.unpack_from(data, 0)[0]


def _read_message(compiled: CompiledMessage, data: bytes, part: str, record_type: int | None,
                  version: int, warnings: list[DecodeWarning] | None) -> dict:
    """``ApiMessage.read`` of the bytes after the int16 prefix.

    With ``warnings`` a list (Kafka's way: ``CoordinatorRecordSerde.readMessage`` never looks at what is
    left), bytes after the message and whatever the reader tolerated are appended to it; with None
    (strict), bytes after the message raise ``trailing_bytes``.
    """
    found: list = []
    try:
        message, pos = compiled.read(data, 2, found)
    except DecodeError as exc:
        exc.record_type, exc.part, exc.version = record_type, part, version
        raise
    except RecursionError:
        raise DecodeError("truncated", "message nests too deep", record_type=record_type, part=part,
                          version=version) from None
    if pos != len(data):
        if warnings is None:
            raise DecodeError("trailing_bytes", f"{len(data) - pos} bytes left after {compiled.message.name}",
                              position=pos, record_type=record_type, part=part, version=version)
        found.append(("trailing_bytes", pos))
    if found:
        if warnings is None:
            code, position = found[0]
            raise DecodeError(_STRICT_ERRORS.get(code, code), f"{code.replace('_', ' ')} in "
                              f"{compiled.message.name}", position=position, record_type=record_type, part=part,
                              version=version)
        warnings.extend(DecodeWarning(code, part, position) for code, position in found)
    return message


def decode_record(key: bytes | None, value: bytes | None) -> DecodedRecord:
    """Decode one ``__consumer_offsets`` record (Kafka ``CoordinatorRecordSerde.deserialize``).

    Raises ``DecodeError`` where Kafka's ``CoordinatorLoaderImpl`` skips or fails on the record; a record
    Kafka applies decodes the way Kafka reads it, with ``DecodeWarning``s for what Kafka tolerated.
    """
    if not key:
        raise DecodeError("empty_key", "a coordinator record needs a key", position=0, part="key")
    if not isinstance(key, bytes):
        key = bytes(key)
    record_type = _prefix(key, "key", None)
    codec = codecs().by_type.get(record_type)
    if codec is None:
        raise DecodeError("unknown_record_type", f"schemas/record_types.json has no record type {record_type}",
                          position=0, record_type=record_type, part="key")
    # the two reads are inlined (not _read_message): this is the per-record hot path of the generic decoder
    found: list = []  # (code, position) from the generated readers, key's first
    try:
        key_dict, end = codec.key.read(key, 2, found)
    except DecodeError as exc:
        exc.record_type, exc.part, exc.version = record_type, "key", 0
        raise
    except RecursionError:
        raise DecodeError("truncated", "message nests too deep", record_type=record_type, part="key",
                          version=0) from None
    if end != len(key):
        found.append(("trailing_bytes", end))  # CoordinatorRecordSerde.readMessage never checks remaining()
    in_key = len(found)
    if value is None:
        warnings = [DecodeWarning(code, "key", at) for code, at in found] if found else []
        return DecodedRecord(record_type, codec.spec.name, 0, None, key_dict, None, warnings)
    if not isinstance(value, bytes):
        value = bytes(value)
    version = _prefix(value, "value", record_type)
    compiled = codec.values.get(version)
    if compiled is None:
        raise DecodeError("unknown_version",
                          f"schemas/{codec.spec.value.file} has no value version {version} for {codec.spec.name}",
                          position=0, record_type=record_type, part="value", version=version)
    layout = None
    try:
        value_dict, end = compiled.read(value, 2, found)
    except DecodeError as exc:
        exc.record_type, exc.part, exc.version = record_type, "value", version
        earlier = _read_earlier_layout(codec, version, value)
        if earlier is None:
            raise
        del found[in_key:]  # what the failed read tolerated is not what the record holds
        layout, value_dict, end = earlier
    except RecursionError:
        raise DecodeError("truncated", "message nests too deep", record_type=record_type, part="value",
                          version=version) from None
    if end != len(value):
        found.append(("trailing_bytes", end))
    warnings = [DecodeWarning(code, "key" if i < in_key else "value", at)
                for i, (code, at) in enumerate(found)] if found else []
    if record_type == RecordType.GROUP_METADATA and value_dict.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for i, member in enumerate(value_dict["members"]):
            for kind in ("subscription", "assignment"):
                member[f"{kind}_decoded"] = _decode_embedded(kind, member.get(kind), warnings,
                                                             f"value.members[{i}].{kind}")
    return DecodedRecord(record_type, codec.spec.name, 0, version, key_dict, value_dict, warnings, layout)


def _read_earlier_layout(codec: _RecordCodec, version: int, value: bytes) -> tuple[str, dict, int] | None:
    """The first earlier layout of ``version`` (newest first) that reads every byte of ``value`` with nothing
    tolerated, as ``(layout, value dict, end)``; None when none does (the current layout's error stands).
    Only bytes the current layout cannot read come here, so a record of the current layout is never read
    with an older one."""
    for layout, compiled in codec.earlier.get(version, ()):
        found: list = []
        try:
            value_dict, end = compiled.read(value, 2, found)
        except (DecodeError, RecursionError):
            continue
        if end == len(value) and not found:
            return layout, value_dict, end
    return None


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
    compiled = None if value_version is None else codec.values.get(value_version)
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


def _decode_consumer_protocol_dict(kind: str, data: bytes, strict: bool,
                                   warnings: list[DecodeWarning] | None = None) -> tuple[int, dict]:
    """``(version read with, message)``.

    Lenient (``strict`` False) is ``ConsumerProtocol.deserializeConsumerProtocolSubscription`` /
    ``...Assignment``: a version below 0 is refused, one above the highest in schemas/ is read with the
    highest (``checkSubscriptionVersion``), and nothing is checked after the last field; the tolerated
    cases go to ``warnings``. Strict takes only the versions of schemas/ and no bytes after the message.
    """
    table = _consumer_protocol(kind)
    if not isinstance(data, bytes):
        data = bytes(data)
    version = _prefix(data, kind, None)
    compiled = table.get(version)
    if compiled is None:
        highest = max(table)
        if strict or version < min(table):
            raise DecodeError("unknown_version", f"ConsumerProtocol {kind} version {version} is not in schemas/",
                              position=0, part=kind, version=version)
        if warnings is not None:
            warnings.append(DecodeWarning("consumer_protocol_newer_version", kind, 0))
        version, compiled = highest, table[highest]
    found: list[DecodeWarning] | None = None if strict else []
    message = _read_message(compiled, data, kind, None, version, found)
    if warnings is not None and found:
        warnings.extend(found)
    return version, message


def decode_consumer_protocol(kind: str, data: bytes, *, warnings: list[DecodeWarning] | None = None) -> dict:
    """Decode a ConsumerProtocolSubscription/Assignment (int16 version + message) to Kafka JSON.

    Reads what Kafka's ``ConsumerProtocol`` deserializers read (a newer version with the highest known,
    bytes after the message ignored, malformed UTF-8 as Java decodes it); pass ``warnings`` (a list) to
    collect what was tolerated (``part`` is ``kind``). Raises ``DecodeError`` where Kafka throws
    ``SchemaException``.
    """
    version, message = _decode_consumer_protocol_dict(kind, data, strict=False, warnings=warnings)
    return _consumer_protocol(kind)[version].to_json(message)


def _decode_embedded(kind: str, data: bytes | None, warnings: list[DecodeWarning], part: str) -> dict | None:
    """A classic consumer member's subscription/assignment as Kafka's ``ConsumerProtocol`` reads it, or None.

    Empty bytes are None without a warning: the coordinator itself stores an empty assignment for a
    member that has not synced yet (``ConsumerGroup.fromClassicGroup`` accepts it). Other bytes the
    deserializer refuses are None too (the raw bytes stay in the member) with a
    ``consumer_protocol_undecodable`` warning at the byte where reading failed. Positions are offsets in
    the member's bytes.
    """
    if not data:
        return None
    found: list[DecodeWarning] = []
    try:
        version, message = _decode_consumer_protocol_dict(kind, data, strict=False, warnings=found)
    except DecodeError as exc:
        warnings.append(DecodeWarning("consumer_protocol_undecodable", part, exc.position or 0))
        return None
    warnings.extend(DecodeWarning(w.code, part, w.position) for w in found)
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
    if record.value is None or value_json is None:
        return dump_key, "<DELETE>"
    if record.record_type == RecordType.GROUP_METADATA and value_json.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member_json, member in zip(value_json["members"], record.value["members"]):
            for kind in ("subscription", "assignment"):
                embedded = _embedded_json(kind, member.get(f"{kind}_decoded"))
                if embedded is not None:
                    member_json[kind] = embedded
    return dump_key, jackson_dumps({"version": str(record.value_version), "data": value_json})
