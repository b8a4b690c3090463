"""Packed commits: the offset commits the segments reader marks in the middle of a run, one row per key and batch.

About nine in ten records of a healthy ``__consumer_offsets`` are plain commits the reader marks both
``commit_mid_run`` (``codec.commit_runs``: the digest never reads them) and ``commit_after_commit`` (the fold never
reads them). The batch job still held each one as a row of its cached decoded log, for what a few readers take from
them: the record tallies, and the non-owner rule's applied commits. With ``pack_batch`` the reader hands such
commits of one key over as one row: the first one's columns, and in ``PACKED_COLUMN`` what every one has of its
own (its offset, timestamp and ``VALUE_ELEMENTS`` of its value: a list per field, in offset order). Most of a
healthy log's rows become a few per key and batch.

A reader that needs the rows back calls ``unpacked``: the same rows as without packing, column for column (the
packed column null). Who reads packed rows as they are says so (``replay.commit_log.commit_runs``).

``pack_batch`` is pure pyarrow and numpy; ``unpacked`` a Spark transformation.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offsets_audit.codec.spark import COMMIT_AFTER_COMMIT_COLUMN, COMMIT_MID_RUN_COLUMN, PACKED_COLUMN

#: Of ``offset_commit_value``, the fields a packed row keeps per commit (``PACKED_COLUMN``'s name -> the value's):
#: the value's other fields (metadata, expire timestamp, topic id) are the packed row's own on every commit it
#: stands for, which the packer checks.
VALUE_ELEMENTS = {"committed_offset": "offset", "leader_epoch": "leader_epoch", "commit_timestamp": "commit_timestamp"}
#: What makes the commits of one packed row one key's: they share these (and every other column, checked).
_KEY = ("partition", "group_id", "topic_name", "topic_partition")


def packed_type(schema: pa.Schema) -> pa.DataType:
    """``PACKED_COLUMN``'s Arrow type for decoded batches of ``schema``: a struct of one list per thing a packed
    commit keeps of its own (its ``offset`` and ``timestamp``, and ``VALUE_ELEMENTS`` of its value that the schema's
    ``offset_commit_value`` has), each in offset order. One list per field, not a list of structs: Spark caches a
    list of longs as the longs, a list of nested structs as a row object per commit, over twice the memory."""
    value = schema.field("offset_commit_value").type
    fields = [pa.field(name, pa.list_(schema.field(name).type)) for name in ("offset", "timestamp")]
    fields += [pa.field(name, pa.list_(value.field(source).type))
               for name, source in VALUE_ELEMENTS.items() if value.get_field_index(source) >= 0]
    return pa.struct(fields)


def packed_ddl(field_ddl: dict[str, str]) -> str:
    """``PACKED_COLUMN``'s Spark DDL type, given the DDL type of ``offset`` and ``timestamp`` (``field_ddl``): the
    value's elements as the codec types them (``OFFSET_COMMIT_VALUE_FIELDS``)."""
    from offsets_audit.codec.offset_commits import OFFSET_COMMIT_VALUE_FIELDS

    elements = [(name, field_ddl[name]) for name in ("offset", "timestamp")]
    elements += [(name, OFFSET_COMMIT_VALUE_FIELDS[source][1]) for name, source in VALUE_ELEMENTS.items()]
    return "struct<" + ",".join(f"{name}:array<{ddl}>" for name, ddl in elements) + ">"


def pack_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` (decoded, marked, ``compact_batch``-ed) with ``PACKED_COLUMN``: the commits marked both mid-run and
    after a commit, of one key (``_KEY``), with a value, equal in every column but their offset, timestamp and
    ``VALUE_ELEMENTS`` of their value, at least two, become one row (the first by offset, ``PACKED_COLUMN`` listing
    each one's by offset, ``packed_type``); every other row stays as it is, ``PACKED_COLUMN`` null. Rows come out
    in no particular order (the readers sort what they need sorted). Anything unexpected leaves the batch unpacked:
    packing only saves work."""
    n = batch.num_rows
    names = batch.schema.names
    if PACKED_COLUMN in names:
        return batch
    try:
        list_type = packed_type(batch.schema)
    except KeyError:
        return batch  # not a decoded batch: nothing to pack, and no column to add
    unpacked_batch = pa.RecordBatch.from_arrays([*batch.columns, pa.nulls(n, list_type)],
                                                names=[*names, PACKED_COLUMN])
    if n < 2 or not {COMMIT_AFTER_COMMIT_COLUMN, COMMIT_MID_RUN_COLUMN, *_KEY} <= set(names):
        return unpacked_batch
    try:
        groups = _packable(batch)
    except (pa.ArrowException, ValueError, TypeError):
        return unpacked_batch
    if groups is None:
        return unpacked_batch
    rows, starts = groups
    packed_rows = np.zeros(n, dtype=bool)
    packed_rows[rows] = True
    firsts = rows[starts]
    single = np.flatnonzero(~packed_rows)
    taken = pa.array(rows)
    value = batch.column(names.index("offset_commit_value"))
    bounds = pa.array(np.r_[starts, rows.size].astype(np.int32))
    lists = []
    for field in list_type:
        source = VALUE_ELEMENTS.get(field.name)
        column = batch.column(names.index(field.name)) if source is None else pc.struct_field(value, source)
        values = column.take(taken)
        lists.append(pa.ListArray.from_arrays(bounds, values).cast(field.type))
    packs = pa.StructArray.from_arrays(lists, fields=list(list_type))
    kept = batch.take(pa.array(np.r_[single, firsts]))
    packed = pa.concat_arrays([pa.nulls(single.size, list_type), packs])
    return pa.RecordBatch.from_arrays([*kept.columns, packed], names=[*names, PACKED_COLUMN])


def _packable(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows to pack, ordered by key and offset, and where each key's rows start in them (None: none to pack)."""
    names = batch.schema.names

    def column(name):
        return batch.column(names.index(name))

    # A packed commit keeps VALUE_ELEMENTS of its value: one with none (a tombstone) stays a row of its own.
    marked = pc.and_(pc.and_(pc.fill_null(column(COMMIT_MID_RUN_COLUMN), False),
                             pc.fill_null(column(COMMIT_AFTER_COMMIT_COLUMN), False)),
                     pc.is_valid(column("offset_commit_value")))
    rows = np.flatnonzero(marked.to_numpy(zero_copy_only=False))
    if rows.size < 2:
        return None
    take = pa.array(rows)
    codes = [pc.fill_null(pc.dictionary_encode(column(name).take(take)).indices, -1)
             .to_numpy(zero_copy_only=False).astype(np.int64) for name in _KEY]
    offsets = pc.fill_null(column("offset").take(take), -1).to_numpy(zero_copy_only=False)
    order = np.lexsort((offsets, *reversed(codes)))
    rows, codes = rows[order], [c[order] for c in codes]
    new_key = np.ones(rows.size, dtype=bool)
    new_key[1:] = np.any([c[1:] != c[:-1] for c in codes], axis=0)
    # A row differing from its key's first row in what a packed row shares (``_compared``) stays a row of its own.
    key_first = rows[np.maximum.accumulate(np.where(new_key, np.arange(rows.size), 0))]
    at_rows, at_firsts = pa.array(rows), pa.array(key_first)
    alike = np.ones(rows.size, dtype=bool)
    for whole in _compared(batch):
        here = whole.take(at_rows)
        if pa.types.is_nested(here.type):
            if here.null_count != len(here):
                return None  # a nested column set on a commit: not a row the reader makes
            continue
        if here.null_count == len(here) or (here.null_count == 0 and pc.all(pc.equal(here, here[0])).as_py()):
            continue  # one value (or none) on every row to pack: each is alike with its key's first row
        there = whole.take(at_firsts)
        same = pc.or_(pc.fill_null(pc.equal(here, there), False), pc.and_(pc.is_null(here), pc.is_null(there)))
        alike &= same.to_numpy(zero_copy_only=False)
    rows, new_key = rows[alike], new_key[alike]  # a key's first row is alike with itself: every key keeps it
    if rows.size < 2:
        return None
    starts = np.flatnonzero(new_key)
    sizes = np.diff(np.r_[starts, rows.size])
    rows = rows[np.repeat(sizes >= 2, sizes)]  # a key left with one row stays a row of its own
    sizes = sizes[sizes >= 2]
    if not sizes.size:
        return None
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    return rows, starts


def _compared(batch: pa.RecordBatch):
    """The arrays a packed commit must share with its key's first: every column but ``_KEY``, the
    offset and timestamp and those null on every row, and of ``offset_commit_value`` the fields a packed row does not
    keep per commit (``VALUE_ELEMENTS``)."""
    for name, whole in zip(batch.schema.names, batch.columns):
        if name in _KEY or name in ("offset", "timestamp") or whole.null_count == batch.num_rows:
            continue
        if name == "offset_commit_value":
            kept = set(VALUE_ELEMENTS.values())
            for field in whole.type:
                if field.name not in kept:
                    yield pc.struct_field(whole, field.name)
            continue
        yield whole


def elements(packed):
    """The commits a packed row stands for, from ``PACKED_COLUMN`` (a column): an array of one struct per commit,
    its fields named as ``PACKED_COLUMN``'s lists, to explode."""
    from pyspark.sql import functions as F

    return F.arrays_zip(*[packed[name].alias(name) for name in ("offset", "timestamp", *VALUE_ELEMENTS)])


def unpacked(df):
    """``df`` (a decoded log, packed or not) with each packed row replaced by the rows it stands for: the rows as the
    reader would have handed them over unpacked, ``PACKED_COLUMN`` null on all."""
    from pyspark.sql import functions as F

    if PACKED_COLUMN not in df.columns:
        return df
    packed = F.col(PACKED_COLUMN)
    element = "_packed_commit"
    spread = df.filter(packed.isNotNull()).select(*df.columns, F.explode(elements(packed)).alias(element))
    commit = F.col(element)
    value_type = df.schema["offset_commit_value"].dataType
    sources = {source: name for name, source in VALUE_ELEMENTS.items()}
    value = F.struct(*[(commit[sources[f.name]] if f.name in sources else F.col("offset_commit_value")[f.name])
                       .alias(f.name) for f in value_type.fields])
    own = {"offset": commit["offset"], "timestamp": commit["timestamp"], "offset_commit_value": value,
           PACKED_COLUMN: F.lit(None).cast(df.schema[PACKED_COLUMN].dataType)}
    spread = spread.select(*[own[c].alias(c) if c in own else F.col(c) for c in df.columns])
    return df.filter(packed.isNull()).unionByName(spread)
