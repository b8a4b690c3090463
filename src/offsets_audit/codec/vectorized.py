"""Vectorised decode of flat coordinator records straight from Arrow buffers (numpy), for the Spark path.

About nine records in ten of ``__consumer_offsets`` are offset commits (``OffsetCommitKey`` /
``OffsetCommitValue`` v0-v4, and the legacy type 0): a few strings and fixed-width integers, the same
shape as Kafka's generated ``OffsetCommitValue.read``. Decoding them one Python call at a time costs more
than Kafka's whole Java decoder, so this module reads them column-wise instead:

* the layouts come from ``schemas/`` (nothing here names a record): a message version is *flat* when every
  field is an integer, bool, uuid or string, with at most fixed-width tagged fields when the version is
  flexible. Record types whose key and value (or tombstone) are flat are decoded over the Arrow
  ``BinaryArray`` offsets and data buffers with numpy;
* every row that is not provably simple goes back to the generic per-record decoder
  (``offsets_audit.codec.spark.decode_columns``): any length out of range, trailing bytes, a null string,
  a string needing JSON escaping or holding non-ASCII bytes (UTF-8 is then checked by the generic path),
  a multi-byte varint, an unknown or unexpected tagged field, unknown types and versions, control records
  and rows the source could not read. The output therefore equals the generic decoder's in every column
  of every row, errors and error messages included (``tests/test_codec_vectorized.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offsets_audit.codec.reader import default_value
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
_B64URL = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8)


@dataclass(frozen=True)
class FlatField:
    """One field of a flat message version: an integer, bool, uuid or string, maybe tagged."""

    name: str
    type: str
    tag: int | None
    default: object

    @property
    def width(self) -> int:
        return _WIDTHS.get(self.type, 0)


@dataclass(frozen=True)
class FlatLayout:
    """A message version whose bytes are a run of fixed-width scalars and strings (see module doc)."""

    name: str
    version: int
    flexible: bool
    fields: tuple[FlatField, ...]

    @property
    def tagged(self) -> tuple[FlatField, ...]:
        return tuple(f for f in self.fields if f.tag is not None)


def flat_layout(msg: MessageSpec, version: int) -> FlatLayout | None:
    """The FlatLayout of ``msg`` at ``version``, or None when it holds arrays, structs, bytes or floats."""
    flexible = version in msg.flexible_versions
    fields = []
    for f in msg.fields:
        if version not in f.versions:
            continue
        if f.is_array or f.is_struct or f.flexible_versions is not None:
            return None
        if f.type not in _WIDTHS and f.type != "string":
            return None
        tagged = flexible and version in f.tagged_versions
        fields.append(FlatField(f.name, f.type, f.tag if tagged else None,
                                default_value(f, version) if tagged else None))
    if fields and fields[0].tag is not None:
        return None  # the first JSON member must always be present (commas are placed after it)
    return FlatLayout(msg.name, version, flexible, tuple(fields))


@dataclass(frozen=True)
class _TypeLayouts:
    name: str
    key: FlatLayout
    values: dict[int, FlatLayout]


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


# ---------------------------------------------------------------- parsing one layout


def _parse(layout: FlatLayout, col: _Binary, rows: np.ndarray) -> tuple[np.ndarray, dict]:
    """Read ``layout`` after the int16 prefix of ``rows``: (ok mask, name -> parsed field)."""
    start, end = col.start[rows], col.end[rows]
    pos = start + 2
    ok = np.ones(len(rows), dtype=bool)
    fields: dict[str, tuple] = {}
    for f in layout.fields:
        if f.tag is not None:
            continue
        if f.type == "string":
            if layout.flexible:
                b = col.byte(pos)
                ok &= (pos + 1 <= end) & (b >= 1) & (b < 0x80)
                length, pos = b - 1, pos + 1
            else:
                length = col.read(pos, "int16")
                ok &= (pos + 2 <= end) & (length >= 0)
                pos = pos + 2
            length = np.maximum(length, 0)
            ok &= pos + length <= end
            fields[f.name] = ("string", pos, length)
            pos = pos + length
        else:
            ok &= pos + f.width <= end
            fields[f.name] = (f.type, col.read(pos, f.type), None)
            pos = pos + f.width
    if layout.flexible:
        count = col.byte(pos)
        ok &= (pos + 1 <= end) & (count <= 1)
        has_tag = count == 1
        tag, size = col.byte(pos + 1), col.byte(pos + 2)
        matched = np.zeros(len(rows), dtype=bool)
        skip = np.ones(len(rows), dtype=np.int64)
        for f in layout.tagged:
            if f.type == "string" or f.tag >= 0x80 or f.width >= 0x80:
                continue
            here = has_tag & (tag == f.tag) & (size == f.width)
            matched |= here
            skip = np.where(here, 3 + f.width, skip)
            value = col.read(pos + 3, f.type)
            if f.type == "uuid":
                fields[f.name] = ("uuid", value, here & value.any(axis=1))
            else:
                default = int(f.default)
                value = np.where(here, value, default)
                if f.type == "bool":
                    value = (value != 0).astype(np.int64)
                    default = int(bool(default))
                fields[f.name] = (f.type, value, value != default)
        ok &= ~has_tag | matched
        pos = pos + skip
    ok &= pos == end
    return ok, fields


def _json_object(layout: FlatLayout, fields: dict, strings: dict, m: int) -> pa.Array:
    """Compact JSON text of the rows, member order and number text as ``json.dumps`` of the decoded dict."""
    pieces: list = []
    literal = "{"
    for i, f in enumerate(layout.fields):
        kind, value, extra = fields[f.name]
        comma = "," if i else ""
        if f.tag is not None:
            text = _json_value(kind, value, strings.get(f.name))
            member = pc.binary_join_element_wise(f'{comma}"{f.name}":', text, "")
            pieces.append(literal)
            pieces.append(pc.if_else(pa.array(extra), member, ""))
            literal = ""
            continue
        literal += f'{comma}"{f.name}":'
        if kind == "string":
            pieces.extend([literal + '"', strings[f.name]])
            literal = '"'
        elif kind == "bool":
            pieces.extend([literal, _json_value(kind, value, None)])
            literal = ""
        else:
            pieces.extend([literal, _json_value(kind, value, None)])
            literal = ""
    pieces.append(literal + "}")
    arrays = [p for p in pieces if not isinstance(p, str)]
    if not arrays:
        return pa.array(["".join(pieces)] * m, pa.string())
    return pc.binary_join_element_wise(*[p for p in pieces if p != ""], "")


def _json_value(kind: str, value, strings) -> pa.Array:
    if kind == "string":
        return pc.binary_join_element_wise('"', strings, '"', "")
    if kind == "uuid":
        return pc.binary_join_element_wise('"', _uuid_strings(value), '"', "")
    if kind == "bool":
        return pc.if_else(pa.array(value != 0), "true", "false")
    return pc.cast(pa.array(value), pa.string())


# ---------------------------------------------------------------- one batch


def _strings_of(layout: FlatLayout, col: _Binary, fields: dict) -> tuple[dict, np.ndarray | None]:
    strings, plain = {}, None
    for f in layout.fields:
        kind, starts, lengths = fields[f.name]
        if kind != "string":
            continue
        array, ok = _plain_strings(col.data, starts, lengths)
        strings[f.name] = array
        plain = ok if plain is None else plain & ok
    return strings, plain


def _select(fields: dict, keep: np.ndarray) -> dict:
    return {name: (kind, value[keep], None if extra is None else extra[keep])
            for name, (kind, value, extra) in fields.items()}


def _decode_group(record_type: int, layouts: _TypeLayouts, version: int | None, rows: np.ndarray,
                  keys: _Binary, values: _Binary, columns: dict) -> tuple[np.ndarray, dict] | None:
    """Decode rows of one (record type, value version or tombstone); returns (decoded rows, columns)."""
    ok, key_fields = _parse(layouts.key, keys, rows)
    value_layout = None if version is None else layouts.values[version]
    if value_layout is not None:
        value_ok, value_fields = _parse(value_layout, values, rows)
        ok &= value_ok
    if not ok.all():
        rows, key_fields = rows[ok], _select(key_fields, ok)
        if value_layout is not None:
            value_fields = _select(value_fields, ok)
    if not len(rows):
        return None
    key_strings, plain = _strings_of(layouts.key, keys, key_fields)
    if value_layout is not None:
        value_strings, value_plain = _strings_of(value_layout, values, value_fields)
        if value_plain is not None:
            plain = value_plain if plain is None else plain & value_plain
    if plain is not None and not plain.all():
        mask = pa.array(plain)
        rows, key_fields = rows[plain], _select(key_fields, plain)
        key_strings = {name: a.filter(mask) for name, a in key_strings.items()}
        if value_layout is not None:
            value_fields = _select(value_fields, plain)
            value_strings = {name: a.filter(mask) for name, a in value_strings.items()}
        if not len(rows):
            return None
    m = len(rows)
    out = {
        "record_type": pa.array(np.full(m, record_type, dtype=np.int32)),
        "record_name": pa.repeat(pa.scalar(layouts.name, pa.string()), m),
        "key_version": pa.array(np.zeros(m, dtype=np.int32)),
        "value_version": (pa.nulls(m, pa.int32()) if version is None
                          else pa.array(np.full(m, version, dtype=np.int32))),
        "is_tombstone": pa.array(np.full(m, version is None)),
        "key_json": _json_object(layouts.key, key_fields, key_strings, m),
        "value_json": (pa.nulls(m, pa.string()) if value_layout is None
                       else _json_object(value_layout, value_fields, value_strings, m)),
    }
    for name, column in _KEY_COLUMNS.items():
        if name not in key_fields:
            continue
        kind, value, _ = key_fields[name]
        if kind == "string":
            out[column] = key_strings[name]
        elif kind in _FIXED_DTYPES and kind != "bool":
            out[column] = pa.array(value.astype(np.int32)) if columns[column] == pa.int32() else pa.array(value)
    for name, type_ in columns.items():
        if name not in out:
            out[name] = pa.nulls(m, type_)
        elif out[name].type != type_:
            out[name] = out[name].cast(type_)
    return rows, out


def _column(batch: pa.RecordBatch, name: str):
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index)


def decode_batch_columns(batch: pa.RecordBatch, columns: dict[str, pa.DataType],
                         generic) -> dict[str, pa.Array]:
    """The decoded columns of one batch: flat records vectorised, every other row through ``generic``.

    ``generic(batch)`` decodes a (sub-)batch of the same schema to a dict of column lists, the way
    ``decode_columns`` does; ``columns`` maps each decoded column to its Arrow type.
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
            shapes = [(None, of_type & tombstone)]
            shapes += [(v, of_type & value_ok & (version == v)) for v in types.values]
            for v, mask in shapes:
                rows = np.flatnonzero(mask)
                if len(rows):
                    decoded = _decode_group(int(rt), types, v, rows, keys, values, columns)
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
    return {name: pa.concat_arrays([out[name] for _, out in groups]).take(take) for name in columns}
