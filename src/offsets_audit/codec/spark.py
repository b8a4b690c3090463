"""Spark edge of the codec: decode Spark Kafka-source rows with ``mapInArrow``.

``decode(df)`` keeps every input row and column and adds the decoded columns; bad bytes never raise, they
set ``error_code`` / ``error_message`` and ``split`` sends those rows to quarantine. A record Kafka applies
although its bytes are not as Kafka writes them (docs/decoding.md) is decoded, not quarantined, and lists
what was tolerated in ``decode_warnings`` (null when there is nothing to say). Control records
(``EndTransactionMarker`` batches, ``is_control`` = true) are not coordinator records: they pass through as
``record_name = "ControlRecord"`` so replay can apply transaction markers.
"""

from __future__ import annotations

import functools
import json
import marshal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offsets_audit.codec.commit_runs import MARKER_COLUMN, READ_COLUMNS, thin_runs
from offsets_audit.codec.errors import DecodeError
from offsets_audit.codec.offset_commits import (
    OFFSET_COMMIT_RECORD_TYPES,
    OFFSET_COMMIT_TYPE_IDS,
    OFFSET_COMMIT_VALUE_FIELDS,
    OFFSET_COMMIT_VALUE_SOURCES,
)
from offsets_audit.codec.records import DecodedRecord, decode_record

CONTROL_RECORD_NAME = "ControlRecord"

#: column -> (Arrow type, Spark DDL type), one row per column of the decoded table.
DECODED_COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "record_type": (pa.int32(), "int"),
    "record_name": (pa.string(), "string"),
    "key_version": (pa.int32(), "int"),
    "value_version": (pa.int32(), "int"),
    "is_tombstone": (pa.bool_(), "boolean"),
    "group_id": (pa.string(), "string"),
    "member_id": (pa.string(), "string"),
    "topic_name": (pa.string(), "string"),
    "topic_partition": (pa.int32(), "int"),
    "key_json": (pa.string(), "string"),
    "value_json": (pa.string(), "string"),
    "error_code": (pa.string(), "string"),
    "error_message": (pa.string(), "string"),
    "decode_warnings": (pa.list_(pa.struct([("code", pa.string()), ("part", pa.string()), ("position", pa.int32())])),
                        "array<struct<code:string,part:string,position:int>>"),
    "offset_commit_value": (pa.struct([(name, t) for name, (t, _) in OFFSET_COMMIT_VALUE_FIELDS.items()]),
                            "struct<" + ",".join(f"{name}:{ddl}" for name, (_, ddl)
                                                 in OFFSET_COMMIT_VALUE_FIELDS.items()) + ">"),
}

#: Opt-in column (``decode(df, with_decoded_record=True)``) for the replay: a group record's decoded key and
#: value dicts, ``marshal``-ed, so that the fold takes the record as this stage decoded it instead of decoding
#: its bytes again (``marshal.loads`` costs a fifth of a decode). Null for offset commits (the fold never
#: reads their values), control records, errors, and the records the vectorised path decodes (flat ones:
#: cheap to decode again). Not one of the decoded table's columns: the job drops it before writing, and
#: ``marshal``'s format is only for the same Python (which PySpark asks of driver and executors anyway).
DECODED_RECORD_COLUMN = "decoded_record"
_DECODED_RECORD_TYPE = pa.binary()

_KEY_IDENTIFIERS = (("group", "group_id"), ("groupId", "group_id"), ("memberId", "member_id"),
                    ("topic", "topic_name"), ("partition", "topic_partition"))

_FIXES = {
    "unknown_record_type": "if a newer Kafka wrote it, add the record type to schemas/record_types.json",
    "unknown_version": "if a newer Kafka wrote it, add the version to the value schema in schemas/",
}

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _where(topic, partition, offset) -> str:
    if partition is None and offset is None:
        return ""
    return f" (record at {topic or '__consumer_offsets'}-{partition} offset {offset})"


def decode_columns(keys: list, values: list, *, is_control: list | None = None,
                   read_error_codes: list | None = None, read_error_messages: list | None = None,
                   topics: list | None = None, partitions: list | None = None,
                   offsets: list | None = None, with_decoded_record: bool = False,
                   json_text: bool = True) -> dict[str, list]:
    """Decode parallel lists of key/value bytes into the DECODED_COLUMNS lists (pure Python, no Spark), and
    the ``DECODED_RECORD_COLUMN`` list too with ``with_decoded_record``. Without ``json_text`` a decoded row's
    ``key_json`` and ``value_json`` stay null (``compact_batch``: a run that never writes them)."""
    n = len(keys)
    out: dict[str, list] = {name: [None] * n for name in DECODED_COLUMNS}
    decoded_records: list | None = None
    if with_decoded_record:
        decoded_records = out[DECODED_RECORD_COLUMN] = [None] * n
    record_type, record_name = out["record_type"], out["record_name"]
    key_version, value_version, is_tombstone = out["key_version"], out["value_version"], out["is_tombstone"]
    key_json, value_json = out["key_json"], out["value_json"]
    error_code, error_message = out["error_code"], out["error_message"]
    decode_warnings, commit_value = out["decode_warnings"], out["offset_commit_value"]
    for i in range(n):
        if read_error_codes is not None and read_error_codes[i] is not None:
            error_code[i] = read_error_codes[i]
            error_message[i] = read_error_messages[i] if read_error_messages is not None else None
            continue
        if is_control is not None and is_control[i]:
            record_name[i] = CONTROL_RECORD_NAME
            continue
        key, value = keys[i], values[i]
        try:
            record = decode_record(key, value)
            is_commit = record.record_type in OFFSET_COMMIT_RECORD_TYPES
            if json_text or is_commit:  # a commit's typed value is read from its JSON form
                k_json, v_json = record.kafka_json()
                if json_text:
                    key_json[i] = _dumps(k_json)
                    if v_json is not None:
                        value_json[i] = _dumps(v_json)
                if v_json is not None and is_commit:
                    commit_value[i] = {name: v_json.get(field) for name, field in OFFSET_COMMIT_VALUE_SOURCES.items()}
            if decoded_records is not None and record.record_type not in OFFSET_COMMIT_RECORD_TYPES:
                decoded_records[i] = marshal.dumps((record.record_type, record.key, record.value))
        except DecodeError as exc:
            error_code[i] = exc.code
            where = _where(topics[i] if topics else None, partitions[i] if partitions else None,
                           offsets[i] if offsets else None)
            fix = _FIXES.get(exc.code)
            error_message[i] = f"{exc}{where}" + (f"; {fix}" if fix else "")
            if exc.record_type is not None:
                record_type[i] = exc.record_type
            continue
        except Exception as exc:  # noqa: BLE001 - the Spark path must never fail on data
            error_code[i] = "internal_error"
            error_message[i] = f"{type(exc).__name__}: {exc}" + _where(
                topics[i] if topics else None, partitions[i] if partitions else None,
                offsets[i] if offsets else None)
            continue
        record_type[i] = record.record_type
        record_name[i] = record.record_name
        key_version[i] = record.key_version
        value_version[i] = record.value_version
        is_tombstone[i] = value is None
        if record.warnings:
            decode_warnings[i] = [{"code": w.code, "part": w.part, "position": w.position} for w in record.warnings]
        k = record.key
        for field, column in _KEY_IDENTIFIERS:
            if field in k:
                out[column][i] = k[field]
    return out


def decoded_record_of(blob: bytes) -> DecodedRecord:
    """The record a ``DECODED_RECORD_COLUMN`` value holds: type, key and value as ``decode_record`` made them
    (no name, versions or warnings: the replay reads none of them)."""
    record_type, key, value = marshal.loads(blob)
    return DecodedRecord(record_type, "", 0, None, key, value)


def _column(batch: pa.RecordBatch, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _required_column(batch: pa.RecordBatch, name: str) -> list:
    values = _column(batch, name)
    if values is None:
        raise ValueError(f"the records to decode have no {name!r} column")
    return values


def _decode_lists(batch: pa.RecordBatch, with_decoded_record: bool = False, json_text: bool = True) -> dict[str, list]:
    return decode_columns(
        _required_column(batch, "key"), _required_column(batch, "value"),
        is_control=_column(batch, "is_control"),
        read_error_codes=_column(batch, "read_error_code"),
        read_error_messages=_column(batch, "read_error_message"),
        topics=_column(batch, "topic"), partitions=_column(batch, "partition"), offsets=_column(batch, "offset"),
        with_decoded_record=with_decoded_record, json_text=json_text,
    )


def _arrow_types(with_decoded_record: bool = False) -> dict[str, pa.DataType]:
    types = {name: t for name, (t, _) in DECODED_COLUMNS.items()}
    if with_decoded_record:
        types[DECODED_RECORD_COLUMN] = _DECODED_RECORD_TYPE
    return types


def _with_decoded(batch: pa.RecordBatch, decoded: dict, with_decoded_record: bool = False) -> pa.RecordBatch:
    types = _arrow_types(with_decoded_record)
    arrays = list(batch.columns) + [decoded[name] if isinstance(decoded[name], pa.Array)
                                    else pa.array(decoded[name], type=t) for name, t in types.items()]
    names = list(batch.schema.names) + list(types)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def decode_batch_generic(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``decode_batch`` one record at a time through ``decode_columns`` (the reference for the fast path)."""
    return _with_decoded(batch, _decode_lists(batch))


def decode_batch(batch: pa.RecordBatch, with_decoded_record: bool = False, json_text: bool = True) -> pa.RecordBatch:
    """Decode one Arrow batch of Kafka-source rows; the input columns come back unchanged.

    Flat records (offset commits, tombstones) are decoded column-wise by ``codec.vectorised``; every other
    row goes through ``decode_columns``. The result equals ``decode_batch_generic(batch)`` (plus
    ``DECODED_RECORD_COLUMN`` with ``with_decoded_record``; with ``key_json`` and ``value_json`` null on decoded
    rows without ``json_text``).
    """
    from offsets_audit.codec.vectorised import decode_batch_columns

    generic = functools.partial(_decode_lists, with_decoded_record=with_decoded_record, json_text=json_text)
    return _with_decoded(batch, decode_batch_columns(batch, _arrow_types(with_decoded_record), generic,
                                                     json_text=json_text), with_decoded_record)


#: Spark hands mapInArrow batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by
#: default); the vectorised path pays a fixed cost per batch, so batches are joined up to these limits.
COALESCE_ROWS = 65_536
COALESCE_BYTES = 64 << 20


def _coalesce(batches, max_rows: int = COALESCE_ROWS, max_bytes: int = COALESCE_BYTES):
    """Join consecutive batches into batches of at most ``max_rows`` rows / ``max_bytes`` bytes (row order kept)."""
    pending: list = []
    rows, size = 0, 0
    for batch in batches:
        if pending and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, rows, size = [], 0, 0
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def decode_batches(batches, with_decoded_record: bool = False, json_text: bool = True):
    """Decoded Arrow batches of an iterator of Kafka-source Arrow batches (``decode_batch``, after joining small
    ones): ``decode``'s ``mapInArrow`` body, and the ``kafka-segments+decoded`` reader's (``codec.source``)."""
    for batch in _coalesce(batches):
        try:
            yield decode_batch(batch, with_decoded_record, json_text)
        except Exception as exc:  # noqa: BLE001 - last resort: quarantine the whole batch, never fail the job
            n = batch.num_rows
            extra = {name: pa.nulls(n, type=t) for name, t in _arrow_types(with_decoded_record).items()}
            extra["error_code"] = pa.array(["internal_error"] * n, type=pa.string())
            extra["error_message"] = pa.array([f"{type(exc).__name__}: {exc}"] * n, type=pa.string())
            yield pa.RecordBatch.from_arrays(list(batch.columns) + list(extra.values()),
                                             names=list(batch.schema.names) + list(extra))


#: The fused segments reader's column (``codec.source``, with the decoded record): an offset commit whose previous
#: record of its group in the same Kafka batch is an offset commit too. The fold needs only the first commit after
#: each group record (``replay.spark._group_inputs``): a commit batch (one OffsetCommit request: one record per
#: partition, all of one group) then crosses the fold's shuffle as one row, not one per partition.
COMMIT_AFTER_COMMIT_COLUMN = "commit_after_commit"
#: The fused segments reader's column for a plain offset commit in the middle of a run of its key, which the commit
#: log's digest never reads (``codec.commit_runs``): ``replay.commit_log.resolve_commits`` leaves it out before its
#: shuffle. Only in a range that is a whole segment (``mark_range``); false everywhere else.
COMMIT_MID_RUN_COLUMN = "commit_mid_run"
#: The marks the fused reader adds with the decoded record, in order.
MARK_COLUMNS = (COMMIT_AFTER_COMMIT_COLUMN, COMMIT_MID_RUN_COLUMN)
#: The fused reader's column when it packs (``codec.packing``): on a row that stands for several commits of one key
#: marked with both marks, each one's offset, timestamp and value; null on every other row.
PACKED_COLUMN = "packed_commits"
_MARK_INPUTS = ("batch_base_offset", "file_position", "group_id", "record_type", "value", "partition", "offset",
                "error_code", "is_control", "topic_name", "topic_partition", "timestamp", "producer_id",
                "offset_commit_value")


def mark_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A decoded batch with ``MARK_COLUMNS``, its commits marked within each Kafka batch (``_commits_after_commits``)
    and none mid-run. Any failure gives all-false marks: an unmarked row is read as it was before the marks."""
    n = batch.num_rows
    try:
        inputs = _mark_inputs(batch)
        after = np.zeros(n, dtype=bool) if inputs is None else _commits_after_commits(inputs, by_batch=True)
    except Exception:  # noqa: BLE001 - an optimisation never fails a read
        after = np.zeros(n, dtype=bool)
    return _with_marks(batch, after, np.zeros(n, dtype=bool))


def mark_range(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """The decoded batches of one whole segment with ``MARK_COLUMNS``, marked across the segment.

    The reader's caller vouches that no other range holds an offset of the partition between this one's first and
    last (``sources.segments_spark.SegmentsReader.read_ranges``: a whole segment named by its base offset, whose
    batches the reader keeps within its offsets). Then a record's predecessors in the segment, in offset order, are
    its predecessors in the log: ``commit_after_commit`` compares a commit with its group's previous record in the
    segment (not only in its Kafka batch), and ``commit_mid_run`` marks what ``codec.commit_runs.thin_runs`` drops.
    Any failure falls back to ``mark_batch`` for each batch."""
    if not batches:
        return []
    try:
        parts = [_mark_inputs(b) for b in batches]
        if any(p is None for p in parts):
            raise ValueError("a batch lacks a column the marks read")
        inputs = pa.concat_batches(parts)
        after = _commits_after_commits(inputs, by_batch=False)
        mid = _commits_mid_run(inputs)
    except Exception:  # noqa: BLE001 - an optimisation never fails a read
        return [mark_batch(b) for b in batches]
    out, at = [], 0
    for b in batches:
        out.append(_with_marks(b, after[at:at + b.num_rows], mid[at:at + b.num_rows]))
        at += b.num_rows
    return out


def _with_marks(batch: pa.RecordBatch, after: np.ndarray, mid: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*batch.columns, pa.array(after), pa.array(mid)],
                                      names=[*batch.schema.names, *MARK_COLUMNS])


def _offset_commit_type(record_type: pa.Array) -> pa.Array:
    """Per row of a decoded batch's ``record_type``: an offset commit's type (false where null)."""
    return pc.fill_null(pc.is_in(record_type, pa.array(OFFSET_COMMIT_TYPE_IDS, record_type.type)), False)


def _mark_inputs(batch: pa.RecordBatch) -> pa.RecordBatch | None:
    """What the marks read of a decoded batch, as ``codec.commit_runs.READ_COLUMNS`` plus ``_commit`` (a decoded
    offset commit), ``MARKER_COLUMN`` (a transaction marker), ``_fold_read`` (a record the fold reads) and the
    Kafka batch's ``batch_base_offset`` and ``file_position``; None when the batch lacks a column."""
    if not set(_MARK_INPUTS) <= set(batch.schema.names):
        return None

    def column(name):
        return batch.column(batch.schema.get_field_index(name))

    control = pc.fill_null(column("is_control"), False)
    decoded = pc.is_null(column("error_code"))
    is_commit = pc.and_(_offset_commit_type(column("record_type")), pc.invert(control))
    is_tombstone = pc.is_null(column("value"))
    fold_read = pc.and_(pc.and_(pc.invert(control), decoded), pc.invert(pc.and_(is_commit, is_tombstone)))
    for name in ("group_id", "batch_base_offset", "file_position", "partition", "offset"):
        fold_read = pc.and_(fold_read, pc.is_valid(column(name)))
    value = column("offset_commit_value")
    arrays = {
        "group_id": column("group_id"), "topic": column("topic_name"),
        "topic_partition": pc.cast(column("topic_partition"), pa.int64()),
        "record_partition": pc.cast(column("partition"), pa.int64()),
        "record_offset": pc.cast(column("offset"), pa.int64()),
        "timestamp": pc.cast(column("timestamp"), pa.int64()),
        "producer_id": pc.cast(column("producer_id"), pa.int64()), "is_tombstone": is_tombstone,
        "committed_offset": pc.cast(pc.struct_field(value, "offset"), pa.int64()),
        "topic_id": pc.struct_field(value, "topic_id"),
        MARKER_COLUMN: pc.and_(control, decoded), "_commit": pc.and_(is_commit, decoded),
        "_fold_read": fold_read, "batch_base_offset": pc.cast(column("batch_base_offset"), pa.int64()),
        "file_position": pc.cast(column("file_position"), pa.int64()),
    }
    return pa.RecordBatch.from_arrays(list(arrays.values()), names=list(arrays))


def _commits_after_commits(inputs: pa.RecordBatch, *, by_batch: bool) -> np.ndarray:
    """``COMMIT_AFTER_COMMIT_COLUMN`` of ``_mark_inputs`` rows (a batch's, or a whole segment's in one batch).

    Among the rows the fold reads, per group and, ``by_batch``, per Kafka batch (partition, base offset, file
    position), else per partition, in offset order: a commit whose predecessor there is a commit at a lower offset.
    Every other record of the partition lies outside the Kafka batch's offsets (a healthy log never interleaves
    batches; docs/replay.md for a damaged one), or outside the segment's (``mark_range``), so that predecessor is the
    record's predecessor in the whole log, and the fold's own test (the previous record of the group is a commit)
    drops it anyway."""
    n = inputs.num_rows
    flags = np.zeros(n, dtype=bool)
    if n < 2:
        return flags

    def column(name):
        return inputs.column(name)

    rows = np.flatnonzero(column("_fold_read").to_numpy(zero_copy_only=False))
    if rows.size < 2:
        return flags
    take = pa.array(rows)

    def values(name):
        return pc.take(column(name), take).to_numpy(zero_copy_only=False)

    group = pc.dictionary_encode(pc.take(column("group_id"), take)).indices.to_numpy(zero_copy_only=False)
    partition, offset = values("record_partition"), values("record_offset")
    if by_batch:
        base, position = values("batch_base_offset"), values("file_position")
    else:
        base = position = np.zeros(rows.size, dtype=np.int64)
    commit = pc.take(column("_commit"), take).to_numpy(zero_copy_only=False)
    order = np.lexsort((offset, group, position, base, partition))
    key = np.stack([partition[order], base[order], position[order], group[order]])
    same = np.all(key[:, 1:] == key[:, :-1], axis=0)
    follows = same & commit[order][1:] & commit[order][:-1] & (offset[order][1:] > offset[order][:-1])
    flags[rows[order[1:][follows]]] = True
    return flags


def _commits_mid_run(inputs: pa.RecordBatch) -> np.ndarray:
    """``COMMIT_MID_RUN_COLUMN`` of a whole segment's ``_mark_inputs`` rows: the commits ``thin_runs`` drops."""
    mid = np.zeros(inputs.num_rows, dtype=bool)
    commit = inputs.column("_commit").to_numpy(zero_copy_only=False)
    # The commits only: a marker no longer ends a run (``thin_runs``), so the markers would only be read and dropped.
    read = np.flatnonzero(commit)
    if read.size < 3:
        return mid
    columns = inputs.select([*READ_COLUMNS, MARKER_COLUMN])
    keep = thin_runs(columns if read.size == inputs.num_rows else columns.take(pa.array(read)))
    mid[read] = ~keep
    return mid


def output_schema(input_schema, with_decoded_record: bool = False):
    from pyspark.sql.types import StructType, _parse_datatype_string

    added = {name: ddl for name, (_, ddl) in DECODED_COLUMNS.items()}
    if with_decoded_record:
        added[DECODED_RECORD_COLUMN] = "binary"
    fields = [f for f in input_schema.fields if f.name not in added]
    schema = StructType(fields)
    for name, ddl in added.items():
        schema = schema.add(name, _parse_datatype_string(ddl), True)
    return schema


def decode(df, *, with_decoded_record: bool = False, json_text: bool = True):
    """Add the decoded columns to a DataFrame of Spark Kafka-source rows (one output row per input row).

    ``with_decoded_record``: also ``DECODED_RECORD_COLUMN``, which ``replay.spark.replay`` folds group records
    from without decoding them again (drop it before writing: ``without_decoded_record``). Without ``json_text``,
    ``key_json`` and ``value_json`` are null on decoded rows (for a caller that ``compact``s the rows)."""
    existing = [c for c in (*DECODED_COLUMNS, DECODED_RECORD_COLUMN) if c in df.columns]
    if existing:
        df = df.drop(*existing)
    body = functools.partial(decode_batches, with_decoded_record=with_decoded_record, json_text=json_text)
    return df.mapInArrow(body, output_schema(df.schema, with_decoded_record))


def without_decoded_record(df):
    """``df`` less the replay's ``DECODED_RECORD_COLUMN``, ``MARK_COLUMNS`` and ``PACKED_COLUMN`` (those it has): what
    the tables hold (of rows that are not packed: ``codec.packing.unpacked``)."""
    extra = [c for c in (DECODED_RECORD_COLUMN, *MARK_COLUMNS, PACKED_COLUMN) if c in df.columns]
    return df.drop(*extra) if extra else df


#: Columns of the decoded log the replay, the audit and the record counts read on every row (``compact``).
#: ``batch_base_offset``: the replay's fold tells from it which records one append (one heartbeat) wrote.
WORKING_COLUMNS = ("key", "value", "partition", "offset", "timestamp", "batch_base_offset", "producer_id",
                   "is_control", "control_type", "read_error_code", "records_lost", "record_type", "record_name",
                   "group_id", "topic_name", "topic_partition", "error_code", "error_message", "offset_commit_value",
                   DECODED_RECORD_COLUMN, *MARK_COLUMNS, PACKED_COLUMN)
#: Of a decoded offset commit, the working columns ``compact`` leaves out: its key and value (its fields are columns)
#: and its Kafka batch, which only the fold reads and only of group records. A commit keeping its batch would differ
#: from the next commit of its key in that column alone, and the reader could no longer pack a run's commits
#: (``codec.packing``), each one an append of its own.
_NOT_KEPT_OF_A_COMMIT = ("key", "value", "batch_base_offset")
#: ``compact``'s struct of the other columns, on quarantine rows only; its metadata keeps the column order.
QUARANTINE_ONLY_COLUMN = "_quarantine_only"


#: ``compact``'s column for "the record's value is null" (a tombstone), kept where it drops an offset commit's bytes.
TOMBSTONE_COLUMN = "tombstone"


def tombstone(decoded_df):
    """The column "this record is a tombstone" (null value) of a decoded log, ``compact`` or not."""
    from pyspark.sql import functions as F

    return F.col(TOMBSTONE_COLUMN) if TOMBSTONE_COLUMN in decoded_df.columns else F.col("value").isNull()


def compact(decoded_df):
    """``decoded_df`` as a run that does not write the ``decoded`` table keeps it in memory: ``WORKING_COLUMNS``
    on every row, every other column (JSON texts, source file and position, batch header fields, warnings) in
    one struct on quarantine rows alone, null on the others. ``split`` gives the quarantine back with every
    column in its order. Caching the JSON texts and file names of the offset commits (most of the log), which
    nothing but the ``decoded`` table reads, was most of the run's caching time.

    A decoded offset commit keeps no key and value bytes either (its fields are columns, ``offset_commit_value``);
    ``TOMBSTONE_COLUMN`` says whether its value was null (``tombstone``). They were a third of the cache."""
    from pyspark.sql import functions as F

    kept = F.col("error_code").isNotNull()
    if "read_error_code" in decoded_df.columns:
        kept = kept | F.col("read_error_code").isNotNull()
    rest = [c for c in decoded_df.columns if c not in WORKING_COLUMNS]
    if not rest or TOMBSTONE_COLUMN in decoded_df.columns:
        return decoded_df
    decoded_commit = ~kept & F.coalesce(F.col("record_type").isin(*OFFSET_COMMIT_TYPE_IDS),
                                        F.lit(False))
    working = [F.when(~decoded_commit, F.col(c)).alias(c) if c in _NOT_KEPT_OF_A_COMMIT else c
               for c in decoded_df.columns if c in WORKING_COLUMNS]
    return decoded_df.select(
        *working, F.col("value").isNull().alias(TOMBSTONE_COLUMN),
        F.when(kept, F.struct(*rest)).alias(QUARANTINE_ONLY_COLUMN, metadata={"columns": decoded_df.columns}))


def compact_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``compact`` where a batch is decoded, as far as the schema stays: every column outside ``WORKING_COLUMNS``
    null on the rows that are not quarantine rows, which is all ``compact`` keeps of them, and a decoded offset
    commit's key and value empty (``compact`` drops both, after reading whether the value was null: a tombstone
    keeps its null). ``compact`` of the result equals ``compact`` of ``batch``; the rows cross to the JVM
    without the JSON texts, file names, batch fields and commit bytes of nearly every record (``codec.source``'s
    ``compact`` option, with the JSON texts never built)."""
    n = batch.num_rows
    names = batch.schema.names
    if not n or not [name for name in names if name not in WORKING_COLUMNS]:
        return batch
    kept = None
    for name in ("error_code", "read_error_code"):
        index = batch.schema.get_field_index(name)
        if index >= 0 and batch.column(index).null_count < n:
            valid = pc.is_valid(batch.column(index))
            kept = valid if kept is None else pc.or_(kept, valid)
    commit = None
    if "record_type" in names:
        commit = _offset_commit_type(batch.column(names.index("record_type")))
        if kept is not None:
            commit = pc.and_(commit, pc.invert(kept))
    arrays = []
    for name, column in zip(names, batch.columns):
        if name in ("key", "value") and commit is not None and column.null_count < n:
            # empty, not null: a tombstone's value stays null, and the array keeps no bytes of the rows emptied
            arrays.append(pc.if_else(pc.and_(commit, pc.is_valid(column)), pa.scalar(b"", column.type), column))
        elif name in _NOT_KEPT_OF_A_COMMIT and commit is not None and column.null_count < n:
            arrays.append(pc.if_else(commit, pa.scalar(None, column.type), column))
        elif name in WORKING_COLUMNS or column.null_count == n:
            arrays.append(column)
        elif kept is None:
            arrays.append(pa.nulls(n, column.type))
        else:
            arrays.append(pc.if_else(kept, column, pa.scalar(None, column.type)))
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)


def split(decoded_df):
    """``(decoded, quarantined)``: rows with an ``error_code`` go to quarantine with raw bytes and position. Of a
    ``compact`` log, ``decoded`` keeps ``WORKING_COLUMNS`` and ``TOMBSTONE_COLUMN``, and ``quarantined`` gets every column
    back, in order."""
    from pyspark.sql import functions as F

    decoded, quarantined = decoded_df.filter(F.col("error_code").isNull()), decoded_df.filter(F.col("error_code").isNotNull())
    if QUARANTINE_ONLY_COLUMN in decoded_df.columns:  # ``compact``: the quarantine's other columns come back
        order = decoded_df.schema[QUARANTINE_ONLY_COLUMN].metadata["columns"]
        decoded = decoded.drop(QUARANTINE_ONLY_COLUMN)
        quarantined = quarantined.select(*[c if c in WORKING_COLUMNS else F.col(f"{QUARANTINE_ONLY_COLUMN}.{c}").alias(c)
                                           for c in order])
    return decoded, quarantined
