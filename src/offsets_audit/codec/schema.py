"""Load ``schemas/``: the facts of every coordinator record key/value and the classic consumer protocol.

The files mirror what Kafka's message specs say (``group-coordinator/.../common/message/*.json``); see
``schemas/README.md`` for the format. Nothing here knows a particular record: adding a version or a
record type is an edit of the JSON files only.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

PRIMITIVE_TYPES = ("bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "uuid")
VARIABLE_TYPES = ("string", "bytes", "records")
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def schemas_dir():
    """``$OFFSETS_AUDIT_SCHEMAS``, else the copy packaged as ``offsets_audit/schemas`` (in a wheel or a
    ``--py-files`` zip on a cluster's executors, read through importlib.resources), else the repository's
    ``schemas/`` folder."""
    env = os.environ.get("OFFSETS_AUDIT_SCHEMAS")
    if env:
        return Path(env)
    packaged = resources.files("offsets_audit") / "schemas"
    if (packaged / "record_types.json").is_file():
        return packaged
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "schemas" / "record_types.json"
        if candidate.is_file():
            return candidate.parent
    raise FileNotFoundError("schemas/record_types.json not found; set OFFSETS_AUDIT_SCHEMAS to the schemas folder")


@dataclass(frozen=True)
class Versions:
    """A Kafka version range: ``"0+"``, ``"3"``, ``"1-4"`` or ``"none"`` (lowest/highest inclusive)."""

    lowest: int
    highest: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return NO_VERSIONS
        text = str(text).strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), 0x7FFF)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lowest <= version <= self.highest

    def __iter__(self):
        return iter(range(self.lowest, self.highest + 1))


NO_VERSIONS = Versions(0, -1)


@dataclass
class FieldSpec:
    """One field of a message or struct, as written in schemas/."""

    name: str
    type: str
    versions: Versions
    nullable_versions: Versions = NO_VERSIONS
    tagged_versions: Versions = NO_VERSIONS
    tag: int | None = None
    default: object = None
    has_default: bool = False
    ignorable: bool = False
    flexible_versions: Versions | None = None
    fields: list[FieldSpec] | None = None
    since: str | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        base = self.element_type
        return base not in PRIMITIVE_TYPES and base not in VARIABLE_TYPES


@dataclass
class MessageSpec:
    """A whole message (record key, record value or consumer-protocol payload)."""

    name: str
    kind: str
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    structs: dict[str, list[FieldSpec]] = field(default_factory=dict)
    record_type: int | None = None
    since: str | None = None
    removed_in: str | None = None
    file: str = ""
    #: releases that added untagged fields to a version without bumping it: releases before each wrote the
    #: version without the fields whose ``since`` is that release or later
    earlier_layouts: tuple[str, ...] = ()


@dataclass
class RecordTypeSpec:
    """One row of schemas/record_types.json with its key and value message specs."""

    record_type: int
    name: str
    key: MessageSpec
    value: MessageSpec
    since: str | None
    removed_in: str | None


def _parse_field(raw: dict, structs: dict[str, list[FieldSpec]]) -> FieldSpec:
    sub = None
    if "fields" in raw:
        sub = [_parse_field(f, structs) for f in raw["fields"]]
        structs.setdefault(raw["type"][2:] if raw["type"].startswith("[]") else raw["type"], sub)
    return FieldSpec(
        name=raw["name"],
        type=raw["type"],
        versions=Versions.parse(raw["versions"]),
        nullable_versions=Versions.parse(raw.get("nullable_versions")),
        tagged_versions=Versions.parse(raw.get("tagged_versions")),
        tag=raw.get("tag"),
        default=raw.get("default"),
        has_default="default" in raw,
        ignorable=bool(raw.get("ignorable", False)),
        flexible_versions=Versions.parse(raw["flexible_versions"]) if "flexible_versions" in raw else None,
        fields=sub,
        since=raw.get("since"),
    )


def load_message(path: Path) -> MessageSpec:
    raw = json.loads(path.read_text(encoding="utf-8"))
    structs: dict[str, list[FieldSpec]] = {}
    for common in raw.get("common_structs", []):
        structs[common["name"]] = [_parse_field(f, structs) for f in common["fields"]]
    fields = [_parse_field(f, structs) for f in raw["fields"]]
    return MessageSpec(
        name=raw["name"], kind=raw["kind"], valid_versions=Versions.parse(raw["valid_versions"]),
        flexible_versions=Versions.parse(raw.get("flexible_versions")), fields=fields, structs=structs,
        record_type=raw.get("record_type"), since=raw.get("since"), removed_in=raw.get("removed_in"),
        file=path.name, earlier_layouts=tuple(raw.get("earlier_layouts", ())),
    )


@dataclass
class SchemaSet:
    """Every record type and the consumer-protocol messages, loaded from one schemas/ folder."""

    directory: Path
    record_types: dict[int, RecordTypeSpec]
    consumer_protocol: dict[str, MessageSpec]


@lru_cache(maxsize=4)
def load_schemas(directory: str | None = None) -> SchemaSet:
    base = Path(directory) if directory else schemas_dir()
    index = json.loads((base / "record_types.json").read_text(encoding="utf-8"))
    types: dict[int, RecordTypeSpec] = {}
    for row in index["record_types"]:
        types[row["record_type"]] = RecordTypeSpec(
            record_type=row["record_type"], name=row["name"],
            key=load_message(base / row["key_schema"]), value=load_message(base / row["value_schema"]),
            since=row.get("since"), removed_in=row.get("removed_in"),
        )
    protocol = {kind: load_message(base / file) for kind, file in index.get("consumer_protocol", {}).items()}
    return SchemaSet(base, types, protocol)
