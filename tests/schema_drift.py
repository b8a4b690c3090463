"""Schema drift guard: the record schemas a Kafka version's jar defines against the project's ``schemas/``.

Kafka's generated message classes (through the oracle's ``schemas`` command: each record type
``GroupCoordinatorRecordSerde`` knows, each supported version's ``SCHEMAS`` entry) are compared with what
``schemas/`` says that Kafka release writes: a field or tag in ``schemas/`` counts for a release when its
``since`` (or its message's) is not later than the release. Anything Kafka has that ``schemas/`` lacks or dates
wrongly is one line naming the record type, version, field and the fix::

    python tests/schema_drift.py [VERSION ...]          # default: every version of kafka_jars.KAFKA_VERSIONS from 4.0
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_jars  # noqa: E402
import oracle  # noqa: E402

_TYPES = {"INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64", "UINT16": "uint16",
          "UNSIGNED_INT32": "uint32", "BOOLEAN": "bool", "UUID": "uuid", "FLOAT64": "float64",
          "STRING": "string", "COMPACT_STRING": "string", "NULLABLE_STRING": "string",
          "COMPACT_NULLABLE_STRING": "string", "BYTES": "bytes", "COMPACT_BYTES": "bytes",
          "NULLABLE_BYTES": "bytes", "COMPACT_NULLABLE_BYTES": "bytes"}


def release(version: str | None) -> tuple[int, ...]:
    """``4.2.1`` → (4, 2), ``4.1-dev (never released)`` → (4, 1): the release line a ``since`` value names."""
    return tuple(int(p) for p in re.findall(r"\d+", version or "0")[:2])


def snake(name: str) -> str:
    """Our field names are Kafka's spec names (first letter lowered); its generated schemas use snake case."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class _Message:
    """One of our messages compared with one Kafka release's classes; the differences go to ``out``."""

    def __init__(self, message, line: tuple[int, ...], message_since: str | None, struct_nullability: bool,
                 out: list[str]):
        self.structs = message.structs
        self.file = message.file
        self.line = line
        self.message_since = message_since
        self.struct_nullability = struct_nullability
        self.out = out

    def fields_at(self, fields, version: int, tagged: bool) -> list:
        """Our fields of ``version`` that this release has (by their ``since``), tagged or not."""
        return [f for f in fields
                if version in f.versions and (version in f.tagged_versions) == tagged
                and release(f.since or self.message_since) <= self.line]

    def struct(self, kafka: dict, fields, version: int, where: str) -> None:
        out, file = self.out, self.file
        ours = self.fields_at(fields, version, tagged=False)
        kafka_names = [f["name"] for f in kafka["fields"]]
        our_names = [snake(f.name) for f in ours]
        for name in kafka_names:
            if name not in our_names:
                out.append(f"{where}: schemas/{file} lacks field {name!r} (Kafka writes it at version {version}): "
                           f"add it")
        for f in ours:
            if snake(f.name) not in kafka_names:
                out.append(f"{where}: field {f.name!r} of schemas/{file} is not in Kafka's version {version}: set "
                           f"its \"since\" to the release that added it")
        if [n for n in our_names if n in kafka_names] != [n for n in kafka_names if n in our_names]:
            out.append(f"{where}: schemas/{file} orders the fields {our_names}, Kafka {kafka_names}")
        by_name = {snake(f.name): f for f in ours}
        for node in kafka["fields"]:
            f = by_name.get(node["name"])
            if f is not None:
                self.field(node, f, version, f"{where}.{node['name']}")
        kafka_tags = {t["tag"]: t for t in kafka.get("tagged_fields") or ()}
        our_tags = {f.tag: f for f in self.fields_at(fields, version, tagged=True)}
        for tag, node in sorted(kafka_tags.items()):
            f = our_tags.get(tag)
            if f is None:
                out.append(f"{where}: schemas/{file} lacks tagged field {node['name']!r} (tag {tag}) of Kafka's "
                           f"version {version}: add it (or correct its \"since\")")
            elif snake(f.name) != node["name"]:
                out.append(f"{where}: tag {tag} is {node['name']!r} in Kafka, {f.name!r} in schemas/{file}")
            else:
                self.field(node, f, version, f"{where}.{node['name']}")
        for tag, f in sorted(our_tags.items(), key=lambda item: item[0] or 0):
            if tag not in kafka_tags:
                out.append(f"{where}: tagged field {f.name!r} (tag {tag}) of schemas/{file} is not in Kafka's "
                           f"version {version}: set its \"since\" to the release that added it")

    def field(self, node: dict, f, version: int, where: str) -> None:
        if _kafka_type(node) != _our_type(f):
            self.out.append(f"{where}: type {_kafka_type(node)} in Kafka, {f.type} in schemas/{self.file}")
            return
        # Before the protocol types could say a struct is nullable, a nullable struct field's generated schema was
        # its plain struct: that release's jar cannot tell, so only a release that can is compared.
        if (node["type"] != "struct" or self.struct_nullability) and node["nullable"] != (
                version in f.nullable_versions):
            self.out.append(f"{where}: Kafka's version {version} says nullable={node['nullable']}, "
                            f"nullable_versions of schemas/{self.file} disagrees")
        inner = node["array_of"] if node["type"] == "array" else node
        if inner["type"] == "struct":
            sub = f.fields if f.fields is not None else self.structs.get(f.element_type)
            if sub is None:
                self.out.append(f"{where}: schemas/{self.file} has no struct {f.element_type!r}")
            else:
                self.struct(inner["struct"], sub, version, where)


def _our_type(field) -> str:
    base = field.element_type
    return ("[]" if field.is_array else "") + (base if base in _TYPES.values() else "struct")


def _kafka_type(node: dict) -> str:
    if node["type"] == "array":
        return "[]" + _kafka_type(node["array_of"])
    if node["type"] == "struct":
        return "struct"
    return _TYPES.get(node["type"], node["type"].lower())


def drift(kafka: dict[str, Any], version: str, schemas=None) -> list[str]:
    """Every difference between Kafka ``version``'s record schemas (the oracle's ``schemas`` output) and ours.

    Two things differ by design and are not drift: a key's version is its record type on the wire in every
    release (releases before 4.1 numbered their key classes' versions that way, later ones call it version 0),
    so a key is compared at our key's version; and releases before 4.1 read record type 0 with the
    ``OffsetCommit`` classes, which 4.1 split into ``LegacyOffsetCommit`` classes (value version 0 only), the
    split ``schemas/`` follows, so such a release's type 0 is compared with our ``OffsetCommit``.
    """
    from offsets_audit.codec.schema import load_schemas

    schemas = schemas or load_schemas()
    line = release(version)
    struct_nullability = bool(kafka.get("struct_nullability", True))
    by_message = {getattr(spec, kind).name: spec for spec in schemas.record_types.values() for kind in ("key", "value")}
    out: list[str] = []
    seen = set()
    for entry in kafka["record_types"]:
        rid = entry["record_type"]
        seen.add(rid)
        spec = schemas.record_types.get(rid)
        name = (entry.get("value") or entry.get("key"))["name"]
        if spec is None:
            out.append(f"record type {rid} ({name}): schemas/record_types.json has no such type: add its key and "
                       f"value schemas")
            continue
        if release(spec.since) > line:
            out.append(f"record type {rid} ({spec.name}): Kafka {version} has it, schemas/ says since {spec.since}")
        if spec.value.name != name and name in by_message:
            spec = by_message[name]
        for kind in ("key", "value"):
            node = entry.get(kind)
            message = getattr(spec, kind)
            if node is None:
                continue
            check = _Message(message, line, message.since or spec.since, struct_nullability, out)
            for v in range(node["lowest_version"], node["highest_version"] + 1):
                where = f"{spec.name}{kind.capitalize()} v{v} (Kafka {version})"
                ours = v
                if kind == "key":
                    ours = message.valid_versions.lowest
                elif v not in message.valid_versions:
                    out.append(f"{where}: schemas/{message.file} has no version {v}: add it to valid_versions")
                    continue
                kafka_v = node["versions"].get(str(v))
                if kafka_v is None:
                    continue
                if kafka_v["flexible"] != (ours in message.flexible_versions):
                    out.append(f"{where}: flexible={kafka_v['flexible']} in Kafka, flexible_versions of "
                               f"schemas/{message.file} disagrees")
                check.struct(kafka_v, message.fields, ours, where)
    for rid, spec in sorted(schemas.record_types.items()):
        if rid in seen or release(spec.since) > line:
            continue
        if spec.removed_in is not None and release(spec.removed_in) <= line:
            continue
        out.append(f"record type {rid} ({spec.name}): schemas/ says Kafka {version} has it (since {spec.since}), "
                   f"the jar does not: set since or removed_in")
    return list(dict.fromkeys(out))


def versions_checked() -> list[str]:
    return [v for v in kafka_jars.KAFKA_VERSIONS if release(v) >= (4, 0)]


def main(argv: Sequence[str]) -> int:
    versions = list(argv) or versions_checked()
    failed = 0
    for version in versions:
        lines = drift(oracle.record_schemas(version=version), version)
        print(f"Kafka {version}: {'no drift' if not lines else f'{len(lines)} difference(s)'}")
        for line in lines:
            print("  " + line)
        failed += bool(lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
