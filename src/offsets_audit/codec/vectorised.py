"""Vectorised decode of coordinator records straight from Arrow buffers (numpy + Arrow compute), for Spark.

About nine records in ten of ``__consumer_offsets`` are offset commits (``OffsetCommitKey`` /
``OffsetCommitValue`` v0-v4, and the legacy type 0): a few strings and fixed-width integers, the same
shape as Kafka's generated ``OffsetCommitValue.read``. Decoding them one Python call at a time costs more
than Kafka's whole Java decoder, so this module reads whole columns instead:

* the layouts come from ``schemas/`` (nothing here names a record): a message version is *flat* when its
  fields are integers, bools, uuids, strings (nullable allowed), arrays of integers or strings, and
  non-nullable structs / arrays of structs built the same way; in flexible versions tagged fields that
  are fixed-width, arrays of integers or a null struct are read, any other tagged field only when
  absent. Records whose key and value (or tombstone) are flat are read over the
  Arrow ``BinaryArray`` offsets and data buffers with numpy, one field at a time for all rows (arrays of
  strings or structs one element index at a time), and their JSON text is assembled with Arrow's
  ``binary_join_element_wise``;
* every row that is not provably simple goes back to the generic per-record decoder
  (``offsets_audit.codec.spark.decode_columns``): any length out of range or null where the layout has no
  null, trailing bytes, a string needing JSON escaping or holding non-ASCII bytes (UTF-8 is then decoded
  by the generic path), a varint over two bytes, an unknown, repeated or non-null struct tagged field,
  arrays longer than ``_MAX_ROUNDS`` elements of strings/structs, bytes/float fields, unknown types
  and versions, control records and rows the source could not read. The output therefore equals the
  generic decoder's in every column of every row, errors and error messages included
  (``tests/test_codec_vectorised.py``). Every condition that gives a record ``decode_warnings`` (trailing
  bytes, malformed UTF-8, a length below -1, a varint over two bytes, a tag whose size does not match) is
  among those sent back, so rows decoded here have none (the column is null for them).

Without JSON texts (``json_text=False``: a run that never writes them) the layouts whose fields are integers, bools
and strings, with fixed-width or uuid tagged fields (offset commit keys and values of every version, most group
records' keys), are read by the compiled ``_flat_kernel`` where setup.py built it: the same rows ok, the same values,
faster than numpy (``tests/test_codec_vectorised.py`` compares the three readers).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offsets_audit.codec.compiler import default_value
from offsets_audit.codec.offset_commits import OFFSET_COMMIT_RECORD_TYPES, OFFSET_COMMIT_VALUE_SOURCES
from offsets_audit.codec.records import codecs
from offsets_audit.codec.schema import MessageSpec

_FIXED_DTYPES = {"bool": "i1", "int8": "i1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
                 "int64": "i8"}
_WIDTHS = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uuid": 16}
#: key fields copied to identifier columns (same as the generic path's ``_KEY_IDENTIFIERS``)
_KEY_COLUMNS = {"group": "group_id", "groupId": "group_id", "memberId": "member_id", "topic": "topic_name",
                "partition": "topic_partition"}
_PAD = 16
#: the input columns the generic path reads (the rest of the batch passes through untouched)
_GENERIC_INPUTS = ("key", "value", "is_control", "read_error_code", "read_error_message", "topic", "partition",
                   "offset")
#: arrays of strings or structs are read one element index at a time; longer arrays go to the generic path
_MAX_ROUNDS = 64
_MAX_TAGS = 8
#: per unit of layout_weight, the rows a group needs before column-wise decoding beats the generic path
#: (set from where OffsetCommit and assignment record groups break even)
_ROWS_PER_WEIGHT = 8
_B64URL = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8)

try:  # setup.py builds it where it can; without it every layout is read with numpy (the same values)
    import offsets_audit.codec._flat_kernel as _KERNEL  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - a pure-Python install (the --py-files zip, a py3-none-any wheel)
    _KERNEL = None
#: ``_flat_kernel.read_flat``'s field codes
_KERNEL_CODES = {"int8": "b", "bool": "?", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q"}


@dataclass(frozen=True)
class FlatField:
    """One field of a flat message: a scalar, string, array or struct; ``tag`` when it is a tagged field."""

    name: str
    type: str
    tag: int | None = None
    default: object = None
    nullable: bool = False
    array: bool = False
    element: FlatLayout | None = None

    @property
    def struct_layout(self) -> FlatLayout:
        """The layout of a struct field, or of a struct array's elements (``_flat_struct`` sets it for both)."""
        if self.element is None:
            raise ValueError(f"field {self.name} holds no struct")
        return self.element

    @property
    def width(self) -> int:
        return _WIDTHS.get(self.type, 0)


@dataclass(frozen=True)
class FlatLayout:
    """A message (or struct) version the vectorised path can read (see the module docstring)."""

    name: str
    version: int
    flexible: bool
    fields: tuple[FlatField, ...]

    @property
    def tagged(self) -> tuple[FlatField, ...]:
        return tuple(f for f in self.fields if f.tag is not None)


def _flat_struct(msg: MessageSpec, fields, version: int, name: str, depth: int) -> FlatLayout | None:
    flexible = version in msg.flexible_versions
    out = []
    for f in fields:
        if version not in f.versions:
            continue
        if f.flexible_versions is not None:
            return None
        tagged = flexible and version in f.tagged_versions
        nullable = version in f.nullable_versions
        if tagged:
            # readable when present: fixed-width scalars, arrays of integers and a null struct; any other
            # tagged field sends its row to the generic path when present (absent, it is not printed)
            default = default_value(f, version, lambda *_: {})
            if f.is_array:
                kind = f.element_type if f.element_type in _FIXED_DTYPES and default == [] else "other"
            elif f.is_struct:
                kind = "struct" if nullable else "other"
            else:
                kind = f.type if f.type in _WIDTHS else "other"
            out.append(FlatField(f.name, kind, f.tag, default, nullable, f.is_array))
            continue
        element = None
        if f.is_struct:
            if depth >= 3 or (nullable and not f.is_array):
                return None
            element = _flat_struct(msg, msg.structs[f.element_type], version, f.element_type, depth + 1)
            if element is None:
                return None
        elif f.element_type not in _WIDTHS and f.element_type != "string":
            return None
        elif f.is_array and f.element_type not in _FIXED_DTYPES and f.element_type != "string":
            return None
        out.append(FlatField(f.name, "struct" if f.is_struct else f.element_type, None, None, nullable,
                             f.is_array, element))
    if out and out[0].tag is not None:
        return None  # the first JSON member must always be present (commas are placed after it)
    return FlatLayout(name, version, flexible, tuple(out))


def flat_layout(msg: MessageSpec, version: int) -> FlatLayout | None:
    """The FlatLayout of ``msg`` at ``version``, or None when it holds bytes, floats or nullable structs."""
    return _flat_struct(msg, msg.fields, version, msg.name, 0)


@dataclass(frozen=True)
class _TypeLayouts:
    name: str
    key: FlatLayout
    values: dict[int, FlatLayout]

    def min_rows(self, version: int | None) -> int:
        """Fewer rows than this decode faster one by one (the vectorised path pays a cost per field)."""
        weight = layout_weight(self.key) + (0 if version is None else layout_weight(self.values[version]))
        return _ROWS_PER_WEIGHT * weight


def layout_weight(layout: FlatLayout) -> int:
    """Rough count of column operations to read ``layout``; arrays of strings/structs count ~3 rounds."""
    weight = 2 if layout.flexible else 0
    for f in layout.fields:
        if f.element is not None:
            weight += (3 if f.array else 1) * layout_weight(f.element)
        else:
            weight += 3 if f.array and f.type == "string" else 1
    return weight


@lru_cache(maxsize=1)
def flat_record_types() -> dict[int, _TypeLayouts]:
    """Record types whose key is flat, with their flat value versions (tombstones need only the key)."""
    out = {}
    for record_type, codec in codecs().by_type.items():
        key = flat_layout(codec.spec.key, 0)
        if key is None or not key.fields:
            continue
        values = {}
        for version in codec.values:
            layout = flat_layout(codec.spec.value, version)
            if layout is not None:
                values[version] = layout
        out[record_type] = _TypeLayouts(codec.spec.name, key, values)
    return out


# ---------------------------------------------------------------- Arrow buffers as numpy


class _Binary:
    """A binary Arrow array as numpy: per-row start/end into a zero-padded copy of the data buffer."""

    def __init__(self, array: pa.Array):
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        n = len(array)
        offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
        buffers = array.buffers()
        offsets = np.frombuffer(buffers[1], dtype=offset_type, count=n + 1, offset=array.offset
                                * np.dtype(offset_type).itemsize).astype(np.int64)
        self.start, self.end = offsets[:-1], offsets[1:]
        raw = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
        self.size = int(offsets[-1]) if n else 0
        self.data = np.zeros(self.size + _PAD, dtype=np.uint8)
        self.data[:self.size] = raw[:self.size]
        self.valid = (np.ones(n, dtype=bool) if array.null_count == 0
                      else pc.is_valid(array).to_numpy(zero_copy_only=False))

    def read(self, pos: np.ndarray, type_: str) -> np.ndarray:
        """Big-endian scalars of ``type_`` at ``pos`` (out-of-range positions read zeros, callers mask)."""
        width = _WIDTHS[type_]
        at = np.clip(pos, 0, self.size)
        if width == 1:
            return self.data[at].view(np.int8).astype(np.int64) if type_ != "bool" else self.data[at]
        raw = self.data[at[:, None] + np.arange(width)]
        if type_ == "uuid":
            return raw
        return np.ascontiguousarray(raw).view(">" + _FIXED_DTYPES[type_]).ravel().astype(np.int64)

    def byte(self, pos: np.ndarray) -> np.ndarray:
        return self.data[np.clip(pos, 0, self.size)].astype(np.int64)


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the byte ranges ``[start, start + length)``: (offsets int32, bytes)."""
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    return offsets.astype(np.int32), data[index]


def _plain_strings(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Strings as an Arrow array and a per-row flag: True when JSON prints the bytes unescaped as ASCII."""
    offsets, chars = _gather(data, starts, lengths)
    bad = (chars < 0x20) | (chars >= 0x80) | (chars == 0x22) | (chars == 0x5C)
    if bad.any():
        counts = np.zeros(len(chars) + 1, dtype=np.int64)
        np.cumsum(bad, out=counts[1:])
        plain = counts[offsets[1:]] == counts[offsets[:-1]]
    else:
        plain = np.ones(len(starts), dtype=bool)
    array = pa.StringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(chars))
    return array, plain


def _uuid_strings(raw: np.ndarray) -> pa.Array:
    """Kafka ``Uuid.toString`` of (m, 16) bytes: URL-safe base64 without padding (22 characters)."""
    m = len(raw)
    padded = np.zeros((m, 18), dtype=np.uint32)
    padded[:, :16] = raw
    triples = padded.reshape(m, 6, 3)
    bits = (triples[:, :, 0] << 16) | (triples[:, :, 1] << 8) | triples[:, :, 2]
    sextets = np.stack([(bits >> 18) & 63, (bits >> 12) & 63, (bits >> 6) & 63, bits & 63], axis=2)
    chars = _B64URL[sextets.reshape(m, 24)[:, :22]]
    offsets = np.arange(0, 22 * (m + 1), 22, dtype=np.int32)
    return pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(chars)))


def _join(*pieces) -> pa.Array:
    return pc.binary_join_element_wise(*[p for p in pieces if not (isinstance(p, str) and p == "")], "")


def _scalar_pieces(type_: str, value: np.ndarray) -> list:
    """JSON text of fixed-width scalars, as ``json.dumps`` prints the decoded Python values (join pieces)."""
    if type_ == "uuid":
        return ['"', _uuid_strings(value), '"']
    if type_ == "bool":
        return [pc.if_else(pa.array(value != 0), "true", "false")]
    return [pc.cast(pa.array(value), pa.string())]


def _text(pieces: list) -> pa.Array:
    return pieces[0] if len(pieces) == 1 else _join(*pieces)


def _list_text(texts: pa.Array, counts: np.ndarray, order: np.ndarray | None = None) -> pa.Array:
    """``[a,b,...]`` per instance from the element texts (instance-major, or put so by ``order``)."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    if order is not None:
        texts = texts.take(pa.array(order))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), texts), ",")
    return _join("[", joined, "]")


# ---------------------------------------------------------------- reading a layout


class _Reader:
    """Reads one layout at per-instance positions; ``ok`` turns False where a row must go to the generic path."""

    def __init__(self, col: _Binary, end: np.ndarray):
        self.col = col
        self.end = end

    def uvarint(self, pos, ok):
        """An unsigned varint of one or two bytes: (value, ok, pos); longer ones are not ok."""
        b0, b1 = self.col.byte(pos), self.col.byte(pos + 1)
        two = b0 >= 0x80
        size = np.where(two, 2, 1)
        ok = ok & (pos + size <= self.end) & ~(two & (b1 >= 0x80))
        return np.where(two, (b0 & 0x7F) | (b1 << 7), b0), ok, pos + size

    def length(self, pos, ok, compact: bool, width: int):
        """An array/string length: (n, ok, pos); null (-1) and varints over two bytes are not ok."""
        if compact:
            b, ok, pos = self.uvarint(pos, ok)
            ok &= b >= 1
            return np.where(ok, b - 1, 0), ok, pos
        n = self.col.read(pos, "int16" if width == 2 else "int32")
        ok = ok & (pos + width <= self.end) & (n >= 0)
        return np.where(ok, n, 0), ok, pos + width

    def int_list(self, type_: str, pos, count) -> pa.Array:
        """``[1,2,3]`` text of ``count`` big-endian integers at ``pos`` per instance."""
        width = _WIDTHS[type_]
        starts = np.repeat(pos, count) + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)) \
            * width
        return _list_text(_text(_scalar_pieces(type_, self.col.read(starts, type_))), count)

    def string(self, pos, ok, compact: bool, nullable: bool):
        """(JSON text pieces, raw string array, is-null, ok, pos) of a string field."""
        is_null = np.zeros(len(pos), dtype=bool)
        if nullable:
            if compact:
                is_null = (self.col.byte(pos) == 0) & (pos + 1 <= self.end)  # compact length 0 is null
            else:
                is_null = (self.col.read(pos, "int16") == -1) & (pos + 2 <= self.end)
        n, good, after = self.length(pos, ok, compact, 2)
        good = good & (after + n <= self.end)
        n = np.where(good, n, 0)
        strings, plain = _plain_strings(self.col.data, after, n)
        ok = (good & plain) | (ok & is_null)
        text = ['"', strings, '"']
        if is_null.any():
            text = [pc.if_else(pa.array(is_null), "null", _join(*text))]
        pos = np.where(is_null, pos + (1 if compact else 2), after + n)
        return text, strings, is_null, ok, pos

    def struct(self, layout: FlatLayout, pos, ok):
        """Read ``layout``: (JSON text per instance, top-level values by field name, ok, pos)."""
        members: list[tuple[FlatField, pa.Array, np.ndarray | None]] = []
        values: dict[str, tuple] = {}
        col = self.col
        for f in layout.fields:
            if f.tag is not None:
                continue
            if f.array:
                count, ok, pos = self.length(pos, ok, layout.flexible, 4)
                if f.type not in _FIXED_DTYPES:
                    ok &= count <= _MAX_ROUNDS
                count = np.where(ok, count, 0)
                if f.type in _FIXED_DTYPES:
                    ok &= pos + count * f.width <= self.end
                    count = np.where(ok, count, 0)
                    text = [self.int_list(f.type, pos, count)]
                    pos = pos + count * f.width
                else:
                    texts, owners = [], []
                    for r in range(int(count.max()) if len(count) else 0):
                        active = np.flatnonzero(count > r)
                        sub_end = _Reader(col, self.end[active])
                        if f.type == "string":
                            item, _, is_null, sub_ok, sub_pos = sub_end.string(pos[active], ok[active],
                                                                               layout.flexible, False)
                        else:
                            item, _, sub_ok, sub_pos = sub_end.struct(f.struct_layout, pos[active], ok[active])
                        ok[active] = sub_ok
                        pos[active] = sub_pos
                        texts.append(_text(item))
                        owners.append(active)
                    if texts:
                        owner = np.concatenate(owners)
                        text = [_list_text(pa.concat_arrays(texts), count, np.argsort(owner, kind="stable"))]
                    else:
                        text = ["[]"]
                members.append((f, text, None))
            elif f.type == "struct":
                text, _, ok, pos = self.struct(f.struct_layout, pos, ok)
                members.append((f, [_text(text)] if len(text) > 1 else text, None))
            elif f.type == "string":
                text, strings, is_null, ok, pos = self.string(pos, ok, layout.flexible, f.nullable)
                members.append((f, text, None))
                values[f.name] = ("string", strings, is_null)
            else:
                ok &= pos + f.width <= self.end
                value = col.read(pos, f.type)
                members.append((f, _scalar_pieces(f.type, value), None))
                values[f.name] = (f.type, value, None)
                pos = pos + f.width
        if layout.flexible:
            pos, ok = self._tags(layout, pos, ok, members, values)
        return self._object(members), values, ok, pos

    def _tags(self, layout, pos, ok, members, values):
        """The tagged-field section: where each known tag's content sits, then each tag read at once."""
        col = self.col
        count, ok, pos = self.uvarint(pos, ok)
        ok &= count <= _MAX_TAGS
        count = np.where(ok, count, 0)
        n = len(pos)
        content = {f.name: np.full(n, -1, dtype=np.int64) for f in layout.tagged}
        sizes = {f.name: np.zeros(n, dtype=np.int64) for f in layout.tagged}
        for r in range(int(count.max()) if n else 0):
            active = count > r
            tag, tag_ok, after_tag = self.uvarint(pos, ok)
            size, size_ok, start = self.uvarint(after_tag, tag_ok)
            ok = np.where(active, size_ok & (start + size <= self.end), ok)
            matched = np.zeros(n, dtype=bool)
            for f in layout.tagged:
                here = active & ok & (tag == f.tag)
                ok &= ~(here & (content[f.name] >= 0))  # the same tag twice: the generic path decides
                content[f.name] = np.where(here, start, content[f.name])
                sizes[f.name] = np.where(here, size, sizes[f.name])
                matched |= here
            ok &= ~active | matched  # an unknown tag: kept raw by the generic path
            pos = np.where(active, start + size, pos)
        for f in layout.tagged:
            at, size = content[f.name], sizes[f.name]
            present = at >= 0
            if not present.any():
                continue
            if f.type == "other":
                ok &= ~present
            elif f.type == "struct":
                # only a null struct is read: printed as null unless null is also its default
                ok &= ~present | ((size == 1) & (col.byte(at) == 0))
                if f.default is not None:
                    members.append((f, ["null"], present))
            elif f.array:
                n_items, good, first = self.length(at, ok & present, True, 4)
                ok &= ~present | (good & (first + n_items * f.width == at + size))
                n_items = np.where(present & ok, n_items, 0)
                members.append((f, [self.int_list(f.type, first, n_items)], present & (n_items > 0)))
            else:
                ok &= ~present | (size == f.width)
                value = col.read(at, f.type)
                if f.type == "uuid":
                    printed = present & value.any(axis=1)
                    members.append((f, _scalar_pieces("uuid", value), printed))
                    values[f.name] = ("uuid", _uuid_strings(value), ~printed)
                else:
                    default = int(f.default)
                    value = np.where(present, value, default)
                    if f.type == "bool":
                        value = (value != 0).astype(np.int64)
                        default = int(bool(default))
                    members.append((f, _scalar_pieces(f.type, value), value != default))
        members.sort(key=lambda m: layout.fields.index(m[0]))
        return pos, ok

    @staticmethod
    def _object(members) -> list:
        """Compact JSON object text (join pieces), members in field order, as ``json.dumps`` of the dict."""
        pieces: list = ["{"]
        for i, (f, text, present) in enumerate(members):
            comma = "," if i else ""
            if present is not None:
                pieces.append(pc.if_else(pa.array(present), _join(f'{comma}"{f.name}":', *text), ""))
            else:
                pieces += [f'{comma}"{f.name}":', *text]
        pieces.append("}")
        merged: list = []
        for piece in pieces:
            if isinstance(piece, str) and merged and isinstance(merged[-1], str):
                merged[-1] += piece
            else:
                merged.append(piece)
        return merged


# ---------------------------------------------------------------- one batch


def _materialise(pieces: list, m: int) -> pa.Array:
    if len(pieces) == 1 and isinstance(pieces[0], str):
        return pa.repeat(pa.scalar(pieces[0]), m)
    return _text(pieces)


def _decode_group(record_type: int, layouts: _TypeLayouts, version: int | None, rows: np.ndarray,
                  keys: _Binary, values: _Binary, columns: dict,
                  json_text: bool = True) -> tuple[np.ndarray, dict] | None:
    """Decode rows of one (record type, value version or tombstone); returns (decoded rows, columns). Without
    ``json_text`` the JSON columns stay null (their pieces are read, never joined into text)."""
    value_layout = None if version is None else layouts.values[version]
    compiled = _kernel_layouts(layouts.key, value_layout) if not json_text and len(rows) else None
    if compiled is not None:
        # Values only, in C (no JSON text was asked for): the same rows ok, the same values (``_kernel_struct``).
        key_values, ok = _kernel_struct(layouts.key, compiled[0], keys, keys.start[rows] + 2, keys.end[rows])
        if value_layout is not None:
            value_values, value_ok = _kernel_struct(value_layout, compiled[1], values, values.start[rows] + 2,
                                                    values.end[rows])
            ok &= value_ok
    else:
        ok = np.ones(len(rows), dtype=bool)
        key_end = keys.end[rows]
        key_json, key_values, ok, key_pos = _Reader(keys, key_end).struct(layouts.key, keys.start[rows] + 2, ok)
        ok &= key_pos == key_end
        if value_layout is not None:
            value_end = values.end[rows]
            value_json, value_values, ok, value_pos = _Reader(values, value_end).struct(
                value_layout, values.start[rows] + 2, ok)
            ok &= value_pos == value_end
    if not ok.any():
        return None
    out = {"key_json": _materialise(key_json, len(rows)) if json_text else pa.nulls(len(rows), pa.string())}
    if value_layout is not None:
        out["value_json"] = _materialise(value_json, len(rows)) if json_text else pa.nulls(len(rows), pa.string())
        if record_type in OFFSET_COMMIT_RECORD_TYPES:
            out["offset_commit_value"] = _typed_struct(value_values, columns["offset_commit_value"], len(rows))
    for name, column in _KEY_COLUMNS.items():
        if name not in key_values:
            continue
        kind, value, is_null = key_values[name]
        if kind == "string":
            out[column] = pc.if_else(pa.array(is_null), pa.scalar(None, pa.string()), value) if is_null.any() \
                else value
        elif kind in _FIXED_DTYPES and kind != "bool":
            out[column] = pa.array(value.astype(np.int32)) if columns[column] == pa.int32() else pa.array(value)
    if not ok.all():
        rows, mask = rows[ok], pa.array(ok)
        out = {name: array.filter(mask) for name, array in out.items()}
    m = len(rows)
    out.update({
        "record_type": pa.array(np.full(m, record_type, dtype=np.int32)),
        "record_name": pa.repeat(pa.scalar(layouts.name, pa.string()), m),
        "key_version": pa.array(np.zeros(m, dtype=np.int32)),
        "value_version": (pa.nulls(m, pa.int32()) if version is None
                          else pa.array(np.full(m, version, dtype=np.int32))),
        "is_tombstone": pa.array(np.full(m, version is None)),
    })
    if value_layout is None:
        out["value_json"] = pa.nulls(m, pa.string())
    for name, type_ in columns.items():
        if name not in out:
            out[name] = pa.nulls(m, type_)
        elif out[name].type != type_:
            out[name] = out[name].cast(type_)
    return rows, out


_KERNEL_SPECS: dict[int, tuple] = {}


def _kernel_spec(layout: FlatLayout) -> tuple | None:
    """``layout`` as ``_flat_kernel.read_flat`` takes it (untagged field codes, tagged field codes, tag numbers), or
    None when it has a field the kernel does not read (an array, a struct, a uuid outside the tagged fields, a
    tagged string ...): then numpy reads it."""
    cached = _KERNEL_SPECS.get(id(layout))
    if cached is not None and cached[0] is layout:
        return cached[1]
    untagged, tag_codes, tag_numbers = [], [], []
    spec: tuple | None = None
    for f in layout.fields:
        if f.array or f.element is not None:
            break
        if f.tag is not None:
            code = "u" if f.type == "uuid" else _KERNEL_CODES.get(f.type)
            if code is None:
                break
            tag_codes.append(code)
            tag_numbers.append(int(f.tag))
        elif f.type == "string":
            untagged.append("S" if f.nullable else "s")
        elif f.type in _KERNEL_CODES:
            untagged.append(_KERNEL_CODES[f.type])
        else:
            break
    else:
        spec = ("".join(untagged).encode(), "".join(tag_codes).encode(), tuple(tag_numbers))
    _KERNEL_SPECS[id(layout)] = (layout, spec)
    return spec


def _kernel_layouts(key: FlatLayout, value: FlatLayout | None) -> tuple | None:
    """The kernel's specs of a key layout and value layout (None: a tombstone), or None when the kernel is not
    built or cannot read either."""
    if _KERNEL is None:
        return None
    key_spec = _kernel_spec(key)
    value_spec = None if value is None else _kernel_spec(value)
    if key_spec is None or (value is not None and value_spec is None):
        return None
    return key_spec, value_spec


def _kernel_struct(layout: FlatLayout, spec: tuple, col: _Binary, starts: np.ndarray,
                   ends: np.ndarray) -> tuple[dict, np.ndarray]:
    """(values by field name as ``_Reader.struct`` gives them, ok) of ``layout`` read by the kernel: ok where the
    row is read whole and ends at ``ends``, as ``struct`` then ``pos == end`` leave it."""
    fields, tag_codes, tag_numbers = spec
    m = len(starts)
    ok_bytes, untagged, tagged = _KERNEL.read_flat(
        col.data, np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(ends, dtype=np.int64),
        fields, tag_codes, tag_numbers, layout.flexible, _MAX_TAGS)
    ok = np.frombuffer(ok_bytes, dtype=np.uint8).astype(bool)
    values: dict[str, tuple] = {}
    plain = [f for f in layout.fields if f.tag is None]
    for f, out in zip(plain, untagged):
        if f.type == "string":
            offsets, chars, nulls = out
            strings = pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(chars))
            values[f.name] = ("string", strings, np.frombuffer(nulls, dtype=np.uint8).astype(bool))
        else:
            value = np.frombuffer(out, dtype=np.int64)
            values[f.name] = (f.type, value.astype(np.uint8) if f.type == "bool" else value, None)
    for f, (text, flags) in zip([f for f in layout.fields if f.tag is not None], tagged):
        if f.type != "uuid":
            continue
        printed = np.frombuffer(flags, dtype=np.uint8).astype(bool)  # present and not all zero
        if printed.any():  # none printed: no value, all null (as ``_Reader._tags`` gives when no row has the tag)
            offsets = np.arange(0, 22 * (m + 1), 22, dtype=np.int32)
            values[f.name] = ("uuid", pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(text)),
                              ~printed)
    return values, ok


def _typed_struct(values: dict, type_: pa.StructType, m: int) -> pa.StructArray:
    """The typed value columns (``codec.spark.OFFSET_COMMIT_VALUE_FIELDS``) from the fields ``struct`` read:
    a field the version does not have is null, as it is absent from ``value_json``."""
    children = []
    for field in type_:
        read = values.get(OFFSET_COMMIT_VALUE_SOURCES[field.name])
        if read is None:
            children.append(pa.nulls(m, field.type))
            continue
        kind, value, is_null = read
        array = value if isinstance(value, pa.Array) else pa.array(value)
        if is_null is not None and is_null.any():
            array = pc.if_else(pa.array(is_null), pa.scalar(None, array.type), array)
        children.append(array.cast(field.type))
    return pa.StructArray.from_arrays(children, fields=list(type_))


def _column(batch: pa.RecordBatch, name: str):
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index)


def decode_batch_columns(batch: pa.RecordBatch, columns: dict[str, pa.DataType],
                         generic, *, json_text: bool = True) -> dict[str, pa.Array]:
    """The decoded columns of one batch: flat records vectorised, every other row through ``generic``.

    ``generic(batch)`` decodes a (sub-)batch of the same schema to a dict of column lists, the way
    ``decode_columns`` does; ``columns`` maps each decoded column to its Arrow type. Without ``json_text`` the
    vectorised rows' ``key_json`` and ``value_json`` are null (``generic`` is asked the same by its caller).
    """
    n = batch.num_rows
    key_array, value_array = _column(batch, "key"), _column(batch, "value")
    candidate = np.zeros(n, dtype=bool)
    groups: list[tuple[np.ndarray, dict]] = []
    binary = (pa.binary(), pa.large_binary())
    if n and key_array is not None and value_array is not None and key_array.type in binary \
            and value_array.type in binary:
        keys, values = _Binary(key_array), _Binary(value_array)
        candidate = keys.valid & (keys.end - keys.start >= 2)
        read_error = _column(batch, "read_error_code")
        if read_error is not None and read_error.null_count < n:
            candidate &= pc.is_null(read_error).to_numpy(zero_copy_only=False)
        control = _column(batch, "is_control")
        if control is not None and control.null_count < n:
            candidate &= ~pc.fill_null(control, False).to_numpy(zero_copy_only=False)
        record_type = keys.read(keys.start, "int16")
        value_ok = values.valid & (values.end - values.start >= 2)
        version = np.where(value_ok, values.read(values.start, "int16"), -1)
        tombstone = ~values.valid
        layouts = flat_record_types()
        for rt in np.unique(record_type[candidate]):
            types = layouts.get(int(rt))
            if types is None:
                continue
            of_type = candidate & (record_type == rt)
            shapes: list = [(None, of_type & tombstone)]
            shapes += [(v, of_type & value_ok & (version == v)) for v in types.values]
            for v, mask in shapes:
                rows = np.flatnonzero(mask)
                if len(rows) and len(rows) >= types.min_rows(v):
                    decoded = _decode_group(int(rt), types, v, rows, keys, values, columns, json_text)
                    if decoded is not None:
                        groups.append(decoded)
    done = np.zeros(n, dtype=bool)
    for rows, _ in groups:
        done[rows] = True
    rest = np.flatnonzero(~done)
    if len(rest) or not n:
        needed = [name for name in _GENERIC_INPUTS if batch.schema.get_field_index(name) >= 0]
        sub = batch.select(needed)
        sub = sub.take(pa.array(rest)) if len(rest) < n else sub
        lists = generic(sub)
        groups.append((rest, {name: pa.array(lists[name], type=t) for name, t in columns.items()}))
    if len(groups) == 1:
        return groups[0][1]
    order = np.concatenate([rows for rows, _ in groups])
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    take = pa.array(inverse)

    def merged(name: str) -> pa.Array:
        parts = [out[name] for _, out in groups]
        if all(part.null_count == len(part) for part in parts):  # the JSON texts without json_text, warnings ...
            return pa.nulls(n, columns[name])
        return pa.concat_arrays(parts).take(take)

    return {name: merged(name) for name in columns}
