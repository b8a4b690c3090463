"""Compile schemas/ into specialised Python readers, writers and JSON converters (the wire primitives they
call are in ``codec.wire``).

Kafka generates one Java class per message spec (``MessageDataGenerator`` for read/write,
``JsonConverterGenerator`` for JSON). We do the same at load time: for every (message, version) we emit
Python source for three functions and ``exec`` it once, so decoding an OffsetCommitValue is a handful of
``struct.unpack_from`` calls and slices with no per-field interpretation.

* ``read(buf, pos, warnings) -> (dict, pos)``: Kafka's wire format. Non-flexible versions use int16 string
  lengths, int32 bytes/array lengths; flexible versions use compact (unsigned varint length+1) forms and
  end every struct with a tagged-field section. Known tags are decoded; unknown tags are kept raw under
  ``"_unknown_tags"`` (Kafka keeps them as ``_unknownTaggedFields``). Tagged fields that are absent hold
  their default. Where Kafka's generated ``read`` accepts bytes a broker never writes, so does this one,
  appending ``(warning code, byte position)`` to ``warnings``: malformed UTF-8 (Java's replacement
  characters), a nullable length below -1 (null), a varint with bits over 32 (Java int), a known tag
  whose size disagrees with its content (the size is ignored). docs/decoding.md lists them.
* ``write(dict, out: bytearray)``: the inverse; tagged fields equal to their default are not written,
  like Kafka's generated ``write``.
* ``to_json(dict) -> dict``: what Kafka's generated ``*JsonConverter.write`` produces: fields of the
  version only, tagged fields only when not default, bytes as standard base64, uuids as Kafka's string.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable

from offsets_audit.codec.errors import DecodeError
from offsets_audit.codec.schema import ZERO_UUID, FieldSpec, MessageSpec
from offsets_audit.codec.wire import (
    base64_text,
    negative_length_error,
    pack_array,
    read_java_compact_length,
    read_java_string,
    read_java_unsigned_varint,
    truncated_error,
    unpack_array,
    uuid_from_string,
    uuid_to_string,
    write_unsigned_varint,
)

_FIXED = {"bool": ("b", 1), "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
          "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "uuid": ("16s", 16)}
_INT_TYPES = ("int8", "int16", "uint16", "int32", "uint32", "int64")


# ---------------------------------------------------------------- defaults


def default_value(f: FieldSpec, version: int, structs_default: Callable[[str, int], dict] | None = None):
    """Kafka ``FieldSpec.fieldDefault``: the value a field holds when it is absent (or tagged and not sent)."""
    raw: Any = f.default  # a JSON value of the spec: int, str, bool or null
    is_null = f.has_default and (raw is None or raw == "null")
    if f.is_array:
        return None if is_null else []
    t = f.type
    if f.is_struct:
        if is_null:
            return None
        return structs_default(t, version) if structs_default else {}
    if is_null:
        return None
    if t in _INT_TYPES:
        if raw is None or raw == "":
            return 0
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if t == "bool":
        return raw is True or raw == "true"
    if t == "float64":
        return float(raw) if raw not in (None, "") else 0.0
    if t == "uuid":
        return ZERO_UUID
    if t == "string":
        return raw if isinstance(raw, str) else ""
    if t == "bytes":
        return b""
    raise ValueError(f"no default for type {t}")


# ---------------------------------------------------------------- the compiler


class _Source:
    def __init__(self):
        self.lines: list[str] = []

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)


@dataclass
class CompiledMessage:
    """The three functions of one (message, version)."""

    message: MessageSpec
    version: int
    read: Callable
    write: Callable
    to_json: Callable
    default: Callable


class Compiler:
    """Turns MessageSpecs into CompiledMessages; all generated code shares one namespace."""

    def __init__(self):
        self.ns: dict = {
            "DecodeError": DecodeError, "_juv": read_java_unsigned_varint, "_jlen": read_java_compact_length,
            "_jstr": read_java_string, "_wuv": write_unsigned_varint,
            "_uuid": uuid_to_string, "_uuidb": uuid_from_string, "_b64": base64_text, "_trunc": truncated_error,
            "_neg": negative_length_error, "_ua": unpack_array, "_pa": pack_array, "struct": struct,
            "_serr": struct.error, "ZERO_UUID": ZERO_UUID,
        }
        self._consts: dict = {}
        self._done: set[str] = set()
        self._pending = _Source()
        self._counter = 0

    # names -------------------------------------------------------------
    def _const(self, value, prefix="_K") -> str:
        key = (prefix, repr(value))
        name = self._consts.get(key)
        if name is None:
            name = f"{prefix}{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = value
        return name

    def _struct(self, fmt: str, method: str) -> str:
        key = ("_S" + method, fmt)
        name = self._consts.get(key)
        if name is None:
            name = f"_S{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = getattr(struct.Struct(">" + fmt), method)
        return name

    def _var(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    @staticmethod
    def _fname(kind: str, msg: MessageSpec, struct_name: str | None, version: int) -> str:
        return f"{kind}_{msg.name}_{struct_name or 'root'}_{version}"

    # public -----------------------------------------------------------
    def compile(self, msg: MessageSpec, version: int) -> CompiledMessage:
        self._ensure(msg, None, version)
        exec("\n".join(self._pending.lines), self.ns)
        self._pending = _Source()
        return CompiledMessage(
            msg, version,
            self.ns[self._fname("r", msg, None, version)],
            self.ns[self._fname("w", msg, None, version)],
            self.ns[self._fname("j", msg, None, version)],
            self.ns[self._fname("d", msg, None, version)],
        )

    def _fields(self, msg: MessageSpec, struct_name: str | None) -> list[FieldSpec]:
        return msg.fields if struct_name is None else msg.structs[struct_name]

    def _ensure(self, msg: MessageSpec, struct_name: str | None, version: int) -> None:
        key = self._fname("r", msg, struct_name, version)
        if key in self._done:
            return
        self._done.add(key)
        fields = [f for f in self._fields(msg, struct_name) if version in f.versions]
        for f in fields:
            if f.is_struct:
                self._ensure(msg, f.element_type, version)
        flexible = version in msg.flexible_versions
        self._gen_default(msg, struct_name, version, fields)
        self._gen_read(msg, struct_name, version, fields, flexible)
        self._gen_write(msg, struct_name, version, fields, flexible)
        self._gen_json(msg, struct_name, version, fields, flexible)

    # helpers for field properties --------------------------------------
    @staticmethod
    def _tagged(f: FieldSpec, version: int, flexible: bool) -> bool:
        return flexible and version in f.tagged_versions

    @staticmethod
    def _field_flexible(f: FieldSpec, msg: MessageSpec, version: int) -> bool:
        if f.flexible_versions is not None:
            return version in f.flexible_versions
        return version in msg.flexible_versions

    def _default_expr(self, msg: MessageSpec, f: FieldSpec, version: int) -> str:
        if f.is_struct and not f.is_array:
            value = default_value(f, version, lambda *_: {})
            if value is None:
                return "None"
            return f"{self._fname('d', msg, f.element_type, version)}()"
        value = default_value(f, version)
        if isinstance(value, list):
            return "[]"
        return repr(value)

    # ---------------------------------------------------------------- defaults
    def _gen_default(self, msg, struct_name, version, fields):
        src = self._pending
        src.emit(0, f"def {self._fname('d', msg, struct_name, version)}():")
        items = ", ".join(f"{f.name!r}: {self._default_expr(msg, f, version)}" for f in fields)
        src.emit(1, f"return {{{items}}}")

    # ---------------------------------------------------------------- read
    def _gen_read(self, msg, struct_name, version, fields, flexible):
        src = self._pending
        name = self._fname("r", msg, struct_name, version)
        src.emit(0, f"def {name}(buf, pos, w):")
        src.emit(1, "_len = len(buf)")
        src.emit(1, "try:")
        body = 2
        locals_: list[tuple[str, str]] = []
        group: list[tuple[FieldSpec, str]] = []

        def flush():
            if not group:
                return
            fmt = "".join(_FIXED[f.type][0] for f, _ in group)
            size = sum(_FIXED[f.type][1] for f, _ in group)
            targets = ", ".join(v for _, v in group)
            src.emit(body, f"({targets},) = {self._struct(fmt, 'unpack_from')}(buf, pos)")
            src.emit(body, f"pos += {size}")
            for f, v in group:
                if f.type == "bool":
                    src.emit(body, f"{v} = {v} != 0")
                elif f.type == "uuid":
                    src.emit(body, f"{v} = _uuid({v})")
            group.clear()

        tagged: list[tuple[FieldSpec, str]] = []
        for f in fields:
            v = self._var("v")
            locals_.append((f.name, v))
            if self._tagged(f, version, flexible):
                flush()
                src.emit(body, f"{v} = {self._default_expr(msg, f, version)}")
                tagged.append((f, v))
            elif not f.is_array and not f.is_struct and f.type in _FIXED:
                group.append((f, v))
            else:
                flush()
                self._emit_read_value(msg, f, version, v, body, tagged=False)
        flush()
        unk = "unk"
        if flexible:
            src.emit(body, f"{unk} = None")
            self._emit_read_uvarint(body, "nt")
            src.emit(body, "for _i in range(nt):")
            self._emit_read_uvarint(body + 1, "tag")
            self._emit_read_uvarint(body + 1, "size")
            kw = "if"
            for f, v in tagged:
                # Kafka reads a known tag's content and goes on from its end, whatever the size said
                src.emit(body + 1, f"{kw} tag == {f.tag}:")
                src.emit(body + 2, "_tstart = pos")
                self._emit_read_value(msg, f, version, v, body + 2, tagged=True)
                src.emit(body + 2, "if pos - _tstart != size:")
                src.emit(body + 3, "w.append(('bad_tagged_field', _tstart))")
                kw = "elif"
            if tagged:
                src.emit(body + 1, "else:")
                inner = body + 2
            else:
                inner = body + 1
            # an unknown tag is kept raw (Readable.readUnknownTaggedField): its size must fit the buffer
            src.emit(inner, "if size < 0:")
            src.emit(inner + 1, "raise DecodeError('negative_length', 'tagged field %d has size %d' % (tag, size), "
                                "position=pos)")
            src.emit(inner, "te = pos + size")
            src.emit(inner, "if te > _len:")
            src.emit(inner + 1, "raise _trunc('tagged field %d' % tag, pos)")
            src.emit(inner, f"if {unk} is None:")
            src.emit(inner + 1, f"{unk} = {{}}")
            src.emit(inner, f"{unk}[tag] = buf[pos:te]")
            src.emit(inner, "pos = te")
        items = ", ".join(f"{n!r}: {v}" for n, v in locals_)
        src.emit(body, f"r = {{{items}}}")
        if flexible:
            src.emit(body, f"if {unk} is not None:")
            src.emit(body + 1, f"r['_unknown_tags'] = {unk}")
        src.emit(body, "return r, pos")
        src.emit(1, "except (_serr, IndexError):")
        src.emit(2, f"raise _trunc({(msg.name + '.' + struct_name) if struct_name else msg.name!r}, pos) from None")

    def _emit_read_uvarint(self, ind: int, target: str) -> None:
        src = self._pending
        src.emit(ind, f"{target} = buf[pos]")
        src.emit(ind, f"if {target} < 128:")
        src.emit(ind + 1, "pos += 1")
        src.emit(ind, "else:")
        src.emit(ind + 1, f"{target}, pos = _juv(buf, pos, w)")

    def _emit_null_below_minus_one(self, ind: int, n: str, compact: bool, width: int) -> None:
        """Kafka's generated read takes any negative length of a nullable field as null; below -1 we warn.

        A compact length below -1 comes from a 5-byte varint (a Java int over 2^31), so it started 5
        bytes back."""
        src = self._pending
        src.emit(ind, f"if {n} != -1:")
        src.emit(ind + 1, f"w.append(('negative_length', pos - {5 if compact else width}))")

    def _emit_length(self, ind: int, n: str, compact: bool, width: int) -> None:
        src = self._pending
        if compact:
            src.emit(ind, f"{n} = buf[pos]")
            src.emit(ind, f"if {n} < 128:")
            src.emit(ind + 1, "pos += 1")
            src.emit(ind + 1, f"{n} -= 1")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{n}, pos = _jlen(buf, pos, w)")
        else:
            code = {2: "h", 4: "i"}[width]
            src.emit(ind, f"({n},) = {self._struct(code, 'unpack_from')}(buf, pos)")
            src.emit(ind, f"pos += {width}")

    def _emit_read_value(self, msg, f: FieldSpec, version: int, target: str, ind: int, tagged: bool) -> None:
        """Emit code reading field ``f`` (whole value: array, struct or scalar) into ``target``."""
        src = self._pending
        nullable = version in f.nullable_versions
        compact = self._field_flexible(f, msg, version) or tagged
        label = f.name
        if f.is_array:
            n = self._var("n")
            self._emit_length(ind, n, compact, 4)
            src.emit(ind, f"if {n} < 0:")
            if nullable:
                self._emit_null_below_minus_one(ind + 1, n, compact, 4)
                src.emit(ind + 1, f"{target} = None")
            else:
                src.emit(ind + 1, f"raise _neg({label!r}, {n}, pos)")
            src.emit(ind, "else:")
            body = ind + 1
            elem = f.element_type
            minsize = self._min_size(msg, elem, version, compact)
            if minsize:
                src.emit(body, f"if {n} * {minsize} > _len - pos:")
                src.emit(body + 1, f"raise _trunc('array {label} of %d elements' % {n}, pos)")
            if elem in _FIXED and elem not in ("uuid", "bool"):
                code, width = _FIXED[elem]
                src.emit(body, f"{target} = _ua({code!r}, {n}, buf, pos)")
                src.emit(body, f"pos += {n} * {width}")
            else:
                src.emit(body, f"{target} = []")
                x = self._var("x")
                src.emit(body, f"for _ in range({n}):")
                self._emit_read_scalar(msg, elem, f, version, x, body + 1, compact, nullable=False, tagged=False)
                src.emit(body + 1, f"{target}.append({x})")
            return
        self._emit_read_scalar(msg, f.type, f, version, target, ind, compact, nullable, tagged)

    def _emit_read_scalar(self, msg, t: str, f: FieldSpec, version, target, ind, compact, nullable, tagged):
        src = self._pending
        label = f.name
        if t in _FIXED:
            code, width = _FIXED[t]
            src.emit(ind, f"({target},) = {self._struct(code, 'unpack_from')}(buf, pos)")
            src.emit(ind, f"pos += {width}")
            if t == "bool":
                src.emit(ind, f"{target} = {target} != 0")
            elif t == "uuid":
                src.emit(ind, f"{target} = _uuid({target})")
            return
        if t in ("string", "bytes"):
            n = self._var("n")
            self._emit_length(ind, n, compact, 2 if t == "string" else 4)
            src.emit(ind, f"if {n} < 0:")
            if nullable:
                self._emit_null_below_minus_one(ind + 1, n, compact, 2 if t == "string" else 4)
                src.emit(ind + 1, f"{target} = None")
            else:
                src.emit(ind + 1, f"raise _neg({label!r}, {n}, pos)")
            if t == "string" and compact:
                # the generated read's "string field ... had invalid length" (int16 lengths cannot exceed it)
                src.emit(ind, f"elif {n} > 0x7fff:")
                src.emit(ind + 1, f"raise DecodeError('string_too_long', 'string {label} has length %d, over "
                                  f"32767' % {n}, position=pos)")
            src.emit(ind, "else:")
            e = self._var("e")
            src.emit(ind + 1, f"{e} = pos + {n}")
            src.emit(ind + 1, f"if {e} > _len:")
            src.emit(ind + 2, f"raise _trunc('{t} {label} of %d bytes' % {n}, pos)")
            if t == "string":
                src.emit(ind + 1, "try:")
                src.emit(ind + 2, f"{target} = buf[pos:{e}].decode('utf-8')")
                src.emit(ind + 1, "except UnicodeDecodeError:")
                src.emit(ind + 2, f"{target} = _jstr(buf, pos, {e}, w)")
            else:
                src.emit(ind + 1, f"{target} = buf[pos:{e}]")
            src.emit(ind + 1, f"pos = {e}")
            return
        # a struct
        reader = self._fname("r", msg, t, version)
        if nullable and not f.is_array:
            flag = self._var("flag")
            if tagged:
                self._emit_read_uvarint(ind, flag)
                src.emit(ind, f"if {flag} <= 0:")
            else:
                src.emit(ind, f"({flag},) = {self._struct('b', 'unpack_from')}(buf, pos)")
                src.emit(ind, "pos += 1")
                src.emit(ind, f"if {flag} < 0:")
            src.emit(ind + 1, f"{target} = None")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{target}, pos = {reader}(buf, pos, w)")
        else:
            src.emit(ind, f"{target}, pos = {reader}(buf, pos, w)")

    def _min_size(self, msg, elem: str, version: int, compact: bool) -> int:
        if elem in _FIXED:
            return _FIXED[elem][1]
        if elem in ("string", "bytes"):
            return 1 if compact else (2 if elem == "string" else 4)
        # at least 1: Kafka refuses any array longer than the bytes remaining ("Tried to allocate a
        # collection of size ..."), even of elements that take no bytes
        return 1

    # ---------------------------------------------------------------- write
    def _gen_write(self, msg, struct_name, version, fields, flexible):
        src = self._pending
        src.emit(0, f"def {self._fname('w', msg, struct_name, version)}(d, out):")
        group: list[FieldSpec] = []

        def flush():
            if not group:
                return
            fmt = "".join(_FIXED[f.type][0] for f in group)
            args = []
            for f in group:
                value = f"d[{f.name!r}]"
                if f.type == "uuid":
                    value = f"_uuidb({value})"
                elif f.type == "bool":
                    value = f"(1 if {value} else 0)"
                args.append(value)
            src.emit(1, f"out += {self._struct(fmt, 'pack')}({', '.join(args)})")
            group.clear()

        tagged = []
        for f in fields:
            if self._tagged(f, version, flexible):
                tagged.append(f)
            elif not f.is_array and not f.is_struct and f.type in _FIXED:
                group.append(f)
            else:
                flush()
                self._emit_write_value(msg, f, version, f"d[{f.name!r}]", "out", 1, tagged=False)
        flush()
        if flexible:
            src.emit(1, "tags = []")
            for f in tagged:
                x = self._var("t")
                src.emit(1, f"{x} = d.get({f.name!r}, {self._default_expr(msg, f, version)})")
                src.emit(1, f"if {self._non_default_check(msg, f, version, x)}:")
                buf = self._var("tb")
                src.emit(2, f"{buf} = bytearray()")
                self._emit_write_value(msg, f, version, x, buf, 2, tagged=True)
                src.emit(2, f"tags.append(({f.tag}, {buf}))")
            src.emit(1, "unk = d.get('_unknown_tags')")
            src.emit(1, "if unk:")
            src.emit(2, "tags.extend(unk.items())")
            src.emit(2, "tags.sort(key=lambda item: item[0])")
            src.emit(1, "_wuv(out, len(tags))")
            src.emit(1, "for tag, data in tags:")
            src.emit(2, "_wuv(out, tag)")
            src.emit(2, "_wuv(out, len(data))")
            src.emit(2, "out += data")

    def _non_default_check(self, msg, f: FieldSpec, version: int, x: str) -> str:
        """Kafka ``FieldSpec.generateNonDefaultValueCheck``: when a tagged field is written / printed."""
        default = default_value(f, version, lambda *_: {})
        nullable = version in f.nullable_versions
        if f.is_array or f.type == "bytes":
            if default is None:
                return f"{x} is not None"
            return f"({x} is None or len({x}) != 0)" if nullable else f"len({x}) != 0"
        if f.is_struct:
            if default is None:
                return f"{x} is not None"
            return f"{x} != {self._fname('d', msg, f.type, version)}()"
        if default is None:
            return f"{x} is not None"
        return f"{x} != {default!r}"

    def _emit_write_value(self, msg, f: FieldSpec, version, value: str, out: str, ind: int, tagged: bool):
        src = self._pending
        nullable = version in f.nullable_versions
        compact = self._field_flexible(f, msg, version) or tagged
        if f.is_array:
            x = self._var("a")
            src.emit(ind, f"{x} = {value}")
            src.emit(ind, f"if {x} is None:")
            src.emit(ind + 1, f"_wuv({out}, 0)" if compact else f"{out} += b'\\xff\\xff\\xff\\xff'")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"_wuv({out}, len({x}) + 1)" if compact
                     else f"{out} += {self._struct('i', 'pack')}(len({x}))")
            elem = f.element_type
            if elem in _FIXED and elem not in ("uuid", "bool"):
                src.emit(ind + 1, f"{out} += _pa({_FIXED[elem][0]!r}, {x})")
            else:
                y = self._var("y")
                src.emit(ind + 1, f"for {y} in {x}:")
                self._emit_write_scalar(msg, elem, version, y, out, ind + 2, compact, False, False)
            return
        self._emit_write_scalar(msg, f.type, version, value, out, ind, compact, nullable, tagged)

    def _emit_write_scalar(self, msg, t, version, value, out, ind, compact, nullable, tagged):
        src = self._pending
        if t in _FIXED:
            if t == "uuid":
                value = f"_uuidb({value})"
            elif t == "bool":
                value = f"(1 if {value} else 0)"
            src.emit(ind, f"{out} += {self._struct(_FIXED[t][0], 'pack')}({value})")
            return
        if t in ("string", "bytes"):
            x = self._var("s")
            src.emit(ind, f"{x} = {value}")
            src.emit(ind, f"if {x} is None:")
            if compact:
                src.emit(ind + 1, f"_wuv({out}, 0)")
            else:
                null_length = b"\xff\xff" if t == "string" else b"\xff\xff\xff\xff"
                src.emit(ind + 1, f"{out} += {null_length!r}")
            src.emit(ind, "else:")
            if t == "string":
                src.emit(ind + 1, f"{x} = {x}.encode('utf-8')")
            if compact:
                src.emit(ind + 1, f"_wuv({out}, len({x}) + 1)")
            else:
                code = "h" if t == "string" else "i"
                src.emit(ind + 1, f"{out} += {self._struct(code, 'pack')}(len({x}))")
            src.emit(ind + 1, f"{out} += {x}")
            return
        writer = self._fname("w", msg, t, version)
        if nullable:
            x = self._var("st")
            src.emit(ind, f"{x} = {value}")
            src.emit(ind, f"if {x} is None:")
            src.emit(ind + 1, f"_wuv({out}, 0)" if tagged else f"{out}.append(255)")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"_wuv({out}, 1)" if tagged else f"{out}.append(1)")
            src.emit(ind + 1, f"{writer}({x}, {out})")
        else:
            src.emit(ind, f"{writer}({value}, {out})")

    # ---------------------------------------------------------------- json
    def _gen_json(self, msg, struct_name, version, fields, flexible):
        src = self._pending
        src.emit(0, f"def {self._fname('j', msg, struct_name, version)}(d):")
        simple = all(self._json_plain(f, version, flexible) for f in fields)
        if simple and not flexible:
            # the decoded dict holds exactly the JSON fields (no tags possible): a shallow copy is the JSON
            src.emit(1, "return d.copy()")
            return
        if simple:
            items = ", ".join(f"{f.name!r}: d[{f.name!r}]" for f in fields)
            src.emit(1, f"return {{{items}}}")
            return
        src.emit(1, "r = {}")
        for f in fields:
            value = f"d[{f.name!r}]"
            if self._tagged(f, version, flexible):
                x = self._var("t")
                src.emit(1, f"{x} = {value}")
                src.emit(1, f"if {self._non_default_check(msg, f, version, x)}:")
                src.emit(2, f"r[{f.name!r}] = {self._json_expr(msg, f, version, x)}")
            else:
                src.emit(1, f"r[{f.name!r}] = {self._json_expr(msg, f, version, value)}")
        src.emit(1, "return r")

    def _json_plain(self, f: FieldSpec, version: int, flexible: bool) -> bool:
        if self._tagged(f, version, flexible):
            return False
        return not f.is_struct and f.element_type != "bytes"

    def _json_expr(self, msg, f: FieldSpec, version: int, value: str) -> str:
        elem = f.element_type
        if elem == "bytes":
            conv = "_b64({})"
        elif f.is_struct:
            conv = self._fname("j", msg, elem, version) + "({})"
        else:
            return value
        if f.is_array:
            inner = conv.format("_e")
            return f"(None if {value} is None else [{inner} for _e in {value}])"
        return f"(None if {value} is None else {conv.format(value)})"
