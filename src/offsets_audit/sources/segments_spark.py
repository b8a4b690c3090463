"""``spark.read.format("kafka-segments").load(path)``: broker log segments as a Spark Python Data Source.

Returns ``SOURCE_SCHEMA`` rows (Spark Kafka-source columns plus batch attributes), one per record, control
records included, plus one quarantine row per unreadable stretch of bytes (``read_error_code`` set, key/value
and offset null, ``batch_base_offset``/``batch_last_offset`` as the bad header claimed them).

Options:

* ``path``: a ``.log`` file, a ``__consumer_offsets-N`` folder or a broker log dir (``load(path)`` sets it).
* ``partition``: force this partition number (default: from the ``<topic>-N`` folder name, else 0, which a
  note on stderr states: a lone segment file outside a partition folder still gets a partition).
* ``topic``: value of the ``topic`` column (default ``__consumer_offsets``); in a whole broker log dir only
  ``<topic>-N`` folders are read when there are any.
* ``segmentNames``: ``kafka`` (default) reads only files named as Kafka names segments (20-digit base offset +
  ``.log``) and says on stderr which other ``*.log`` files it skipped; ``any`` reads every ``*.log``. Two
  files of one partition holding the same offsets (two replicas' copies) are refused, naming both.
* ``maxBytesPerPartition``: files larger than this are split at batch boundaries into several input
  partitions (default 128 MiB). The driver finds the boundaries by walking 12-byte batch headers only.
* ``rowsPerBatch``: rows per Arrow record batch handed to Spark (default 10000).
* ``minPartitions``: pack small segments (or ranges) into input partitions of about total bytes / this many,
  capped at ``maxBytesPerPartition``, as Spark packs small files (``FilePartition``: each file also costs
  ``OPEN_COST_BYTES``); ``sources.read`` sets it to four times the session's default parallelism. Default 0: one input
  partition per segment range.

The driver plans the byte ranges (one per segment, or per byte range of a large segment) and packs consecutive
ones into input partitions; each task decodes its ranges one after another with
``offsets_audit.sources.segments.iter_batches`` and yields ``pyarrow.RecordBatch`` es. A task per small
segment was most of the read's time: each task pays a Python worker round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from offsets_audit.errors import UserError
from offsets_audit.sources.options import int_option as _int_option
from offsets_audit.sources.schema import SOURCE_SCHEMA, TIMESTAMP_TYPE_IDS

if TYPE_CHECKING:
    from offsets_audit.sources.segments import SegmentScan

DEFAULT_TOPIC = "__consumer_offsets"
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
DEFAULT_ROWS_PER_BATCH = 10_000
#: A kernel run of fewer records joins the rows around it (``_Columns.add_run``) instead of becoming its own Arrow
#: batch: where plain and compressed batches alternate, runs are one Kafka batch long, and an Arrow batch of a few
#: rows costs about as much to build as one of thousands (the mixed-codec log of ``bench/read.py``).
SHORT_RUN = 512
#: What opening one more segment costs, in bytes to read (Spark's ``spark.sql.files.openCostInBytes``).
OPEN_COST_BYTES = 4 * 1024 * 1024


#: Options the source understands (lower-case, as Spark hands them over); ``plan`` is set by ``sources.read``.
OPTIONS = ("path", "partition", "topic", "segmentnames", "maxbytesperpartition", "rowsperbatch", "minpartitions",
           "plan")


class SegmentRange(InputPartition):
    """Bytes ``[start, end)`` of one segment file (``end`` None: to the end of the file), with what the reader
    needs to count lost offsets across range and file ends (see ``segments.iter_batches``)."""

    def __init__(self, path: str, partition: int | None, start: int, end: int | None,
                 previous_batch: int | None = None, next_base_offset: int | None = None):
        super().__init__((path, partition, start, end, previous_batch, next_base_offset))
        self.path, self.partition, self.start, self.end = path, partition, start, end
        self.previous_batch, self.next_base_offset = previous_batch, next_base_offset


class PackedRanges(InputPartition):
    """Consecutive ``SegmentRange`` s read by one task, in plan order (``pack_ranges``)."""

    def __init__(self, ranges: list[SegmentRange]):
        super().__init__(tuple(r.value for r in ranges))
        self.ranges = ranges


def pack_ranges(ranges: list[SegmentRange], *, max_bytes: int, min_partitions: int) -> list[PackedRanges]:
    """Consecutive ranges packed into input partitions the way Spark packs small files: at most
    ``min(max_bytes, max(OPEN_COST_BYTES, total / min_partitions))`` bytes each, a range costing its bytes plus
    ``OPEN_COST_BYTES``; a range is never split here (``plan`` split large segments already)."""
    sizes = [range_bytes(r) + OPEN_COST_BYTES for r in ranges]
    limit = min(max_bytes, max(OPEN_COST_BYTES, sum(sizes) // max(1, min_partitions)))
    packed: list[PackedRanges] = []
    current: list[SegmentRange] = []
    filled = 0
    for r, n in zip(ranges, sizes):
        if current and filled + n > limit:
            packed.append(PackedRanges(current))
            current, filled = [], 0
        current.append(r)
        filled += n
    if current:
        packed.append(PackedRanges(current))
    return packed


def plan(path: str, *, topic: str = DEFAULT_TOPIC, names: str = "kafka", partition: int | None = None,
         max_bytes: int = DEFAULT_MAX_BYTES_PER_PARTITION) -> tuple[list[SegmentRange], SegmentScan]:
    """The input partitions for ``path`` and the ``SegmentScan`` behind them (skipped files, notes).

    Pure Python on the driver: ``sources.read`` calls it before any Spark work, so a wrong path, two copies of a
    partition or an unknown option is one line, not a failed Spark job.
    """
    from offsets_audit.sources.segments import check_overlaps, plan_ranges, scan_segments

    scan = scan_segments(path, topic, names=names, partition=partition)
    ranges, ends = [], {}
    for f in scan.files:
        file_ranges, ends[f.path] = plan_ranges(f.path, max_bytes)
        for start, end, previous in file_ranges:
            ranges.append(SegmentRange(f.path, f.partition, start, end, previous, f.next_base_offset))
    check_overlaps(scan.files, ends)
    return ranges, scan


def range_bytes(r: SegmentRange) -> int:
    """The bytes range ``r`` reads (to the end of its file: the file's size now; none of a file gone)."""
    import os

    end = r.end
    if end is None:
        try:
            end = os.path.getsize(r.path)
        except OSError:
            end = r.start
    return max(0, end - r.start)


def planned_bytes(ranges: list[SegmentRange]) -> int:
    """The bytes ``ranges`` read, in all."""
    return sum(range_bytes(r) for r in ranges)


def plan_to_option(ranges: list[SegmentRange]) -> str:
    import json

    return json.dumps([[r.path, r.partition, r.start, r.end, r.previous_batch, r.next_base_offset] for r in ranges])


def _plan_from_option(text: str) -> list[SegmentRange]:
    import json

    return [SegmentRange(*entry) for entry in json.loads(text)]


class SegmentsReader(DataSourceReader):
    def __init__(self, options: dict):
        options = {str(k).lower(): v for k, v in options.items()}
        if not options.get("path"):
            raise UserError("the kafka-segments source needs a path",
                            fix='use spark.read.format("kafka-segments").load("/path/to/log-dir")')
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UserError(f"kafka-segments has no option {unknown[0]!r}",
                            fix=f"use one of: {', '.join(o for o in OPTIONS if o != 'plan')}")
        self.path = str(options["path"])
        self.topic = str(options.get("topic", DEFAULT_TOPIC))
        self.partition_override = _int_option(options, "partition", None, minimum=0)
        self.max_bytes = _int_option(options, "maxbytesperpartition", DEFAULT_MAX_BYTES_PER_PARTITION, minimum=1)
        self.rows_per_batch = _int_option(options, "rowsperbatch", DEFAULT_ROWS_PER_BATCH, minimum=1)
        self.min_partitions = _int_option(options, "minpartitions", 0, minimum=0)
        self.names = str(options.get("segmentnames") or "kafka").lower()
        self.plan = options.get("plan")

    def partitions(self) -> list[SegmentRange] | list[PackedRanges]:
        if self.plan:
            ranges = _plan_from_option(self.plan)
        else:
            ranges, _ = plan(self.path, topic=self.topic, names=self.names, partition=self.partition_override,
                             max_bytes=self.max_bytes)
        if not ranges:
            return [SegmentRange("", None, 0, 0)]
        if self.min_partitions:
            return pack_ranges(ranges, max_bytes=self.max_bytes, min_partitions=self.min_partitions)
        return ranges

    def read(self, partition: SegmentRange | PackedRanges) -> Iterator:
        for batches, _ in self.read_ranges(partition):
            yield from batches

    def read_ranges(self, partition: SegmentRange | PackedRanges) -> Iterator[tuple[Iterator, bool]]:
        """Per range of ``partition``: its Arrow batches (``read_arrow``), and whether no other range can hold an
        offset of its partition between its first and last (``alone``)."""
        for r in partition.ranges if isinstance(partition, PackedRanges) else [partition]:
            if r.path:
                yield (read_arrow(r.path, r.partition, self.topic, r.start, r.end, self.rows_per_batch,
                                  previous_batch=r.previous_batch, next_base_offset=r.next_base_offset),
                       self.names == "kafka" and alone(r))


def alone(r: SegmentRange) -> bool:
    """Whether no other range of the log can hold an offset of ``r``'s partition between ``r``'s first and last.

    True for a whole segment named by its base offset, of a source reading only such names: the reader quarantines
    a batch outside ``[base offset, next segment's base offset)`` (``segments._walk_batches``; ``plan`` refuses two
    segments of a partition with the same base offset), so what is read of two segments never interleaves. Two
    ranges of one segment can (two swapped batches across the cut are read as they are)."""
    import os

    from offsets_audit.sources.segments import segment_base_offset

    if r.partition is None or r.start != 0 or segment_base_offset(r.path) is None:
        return False
    try:
        return r.end is None or r.end >= os.path.getsize(r.path)
    except OSError:
        return False


def source_arrow_schema():
    """SOURCE_SCHEMA as the Arrow schema Spark checks Python data source batches against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


def read_arrow(path: str, partition: int | None, topic: str = DEFAULT_TOPIC, start: int = 0, end: int | None = None,
               rows_per_batch: int = DEFAULT_ROWS_PER_BATCH, *, previous_batch: int | None = None,
               next_base_offset: int | None = None, kernel: bool = True, short_run: int = SHORT_RUN) -> Iterator:
    """Decode ``[start, end)`` of a segment into ``pyarrow.RecordBatch`` es of ``SOURCE_SCHEMA`` rows.

    ``kernel``: read plain batches with the compiled kernel where it is built (``segments.BatchRun``); the rows
    are the same without it. A run of fewer than ``short_run`` records joins the rows around it."""
    from offsets_audit.sources.segments import BatchRun, iter_batch_runs

    columns = _Columns(path, partition, topic)
    pending: list[dict] = []
    for batch in iter_batch_runs(path, pending.append, start, end, partition, rows_per_batch if kernel else 0,
                                 previous_batch=previous_batch, next_base_offset=next_base_offset):
        if pending:
            columns.add_quarantine(pending)
            pending.clear()
        if isinstance(batch, BatchRun) and batch.records >= short_run:
            if columns.rows:  # rows before the run first, in log order
                yield columns.flush()
            yield columns.run_batch(batch)
            continue
        if isinstance(batch, BatchRun):
            columns.add_run(batch)
        else:
            columns.add_batch(batch)
        if columns.rows >= rows_per_batch:
            yield columns.flush()
    if pending:
        columns.add_quarantine(pending)
    if columns.rows:
        yield columns.flush()


class _Columns:
    """Column data for one Arrow record batch, filled a whole Kafka batch at a time.

    Per-record columns are extended from the decoded record tuples; batch attributes are stored once per Kafka
    batch and expanded with an Arrow ``take`` at flush, so the per-record Python work stays small.
    """

    _RECORD_COLUMNS = ("key", "value", "offset", "control_type", "coordinator_epoch")
    _BATCH_COLUMNS = (
        "timestampType", "producer_id", "producer_epoch", "is_transactional", "is_control", "batch_base_offset",
        "batch_last_offset", "batch_magic", "compression", "file_position", "read_error_code", "read_error_message",
        "records_lost", "raw_bytes",
    )

    def __init__(self, path: str, partition: int | None, topic: str):
        self.path, self.partition, self.topic = path, partition, topic
        self.schema = source_arrow_schema()
        self._reset()

    def _reset(self) -> None:
        self.records: dict[str, list] = {name: [] for name in self._RECORD_COLUMNS}
        self.timestamps: list[int] = []
        self.batches: dict[str, list] = {name: [] for name in self._BATCH_COLUMNS}
        self.counts: list[int] = []
        self.rows = 0

    def add_batch(self, batch) -> None:
        count = len(batch.records)
        if not count:
            return
        offsets, timestamps, keys, values, _ = zip(*batch.records)
        records = self.records
        records["key"].extend(keys)
        records["value"].extend(values)
        records["offset"].extend(offsets)
        self.timestamps.extend(timestamps)
        if batch.controls is not None:
            control_types, coordinator_epochs = zip(*batch.controls)
            records["control_type"].extend(control_types)
            records["coordinator_epoch"].extend(coordinator_epochs)
        else:
            nulls = [None] * count
            records["control_type"].extend(nulls)
            records["coordinator_epoch"].extend(nulls)
        self._add_batch_values(count, TIMESTAMP_TYPE_IDS[batch.timestamp_type], batch.producer_id,
                               batch.producer_epoch, batch.is_transactional, batch.is_control, batch.base_offset,
                               batch.last_offset, batch.magic, batch.compression, batch.position, None, None,
                               None, None)

    def add_run(self, run) -> None:
        """The rows of a short ``segments.BatchRun`` added as ``add_batch`` adds the same batches' rows."""
        records = self.records
        for name, lengths, data in (("key", run.key_lengths, run.key_data), ("value", run.value_lengths, run.value_data)):
            column, pos = records[name], 0
            for length in lengths.tolist():
                if length < 0:
                    column.append(None)
                else:
                    column.append(data[pos:pos + length])
                    pos += length
        records["offset"].extend(run.offsets.tolist())
        self.timestamps.extend(run.timestamps.tolist())
        names = _control_type_names()
        records["control_type"].extend(names[i] for i in run.control_types.tolist())
        records["coordinator_epoch"].extend(None if e == run.NO_EPOCH else e for e in run.coordinator_epochs.tolist())
        log_append, create = TIMESTAMP_TYPE_IDS["LogAppendTime"], TIMESTAMP_TYPE_IDS["CreateTime"]
        for count, attributes, producer_id, producer_epoch, base, last, position in zip(
                run.counts.tolist(), run.attributes.tolist(), run.producer_ids.tolist(), run.producer_epochs.tolist(),
                run.base_offsets.tolist(), run.last_offsets.tolist(), run.positions.tolist()):
            self._add_batch_values(count, log_append if attributes & 0x08 else create, producer_id, producer_epoch,
                                   bool(attributes & 0x10), bool(attributes & 0x20), base, last, 2, "none", position,
                                   None, None, None, None)

    def add_quarantine(self, entries: list[dict]) -> None:
        for entry in entries:
            for name in self._RECORD_COLUMNS:
                self.records[name].append(None)
            self.timestamps.append(-1)
            # batch_base_offset/batch_last_offset: the offsets the stretch cost (the header's claim is in the message)
            self._add_batch_values(1, None, None, None, None, None, entry["lost_from"], entry["lost_to"], None,
                                   None, entry["position"], entry["error_code"], entry["message"],
                                   entry["records_lost"], entry["raw_bytes"])

    def _add_batch_values(self, count: int, *values) -> None:
        for name, value in zip(self._BATCH_COLUMNS, values):
            self.batches[name].append(value)
        self.counts.append(count)
        self.rows += count

    def _file_values(self) -> dict:
        """The columns every row of this file range holds alike."""
        return {"topic": self.topic, "partition": self.partition, "source_file": self.path}

    def run_batch(self, run):
        """The Arrow batch of a ``segments.BatchRun`` (plain magic-2 batches): the rows ``add_batch`` would make of
        the same batches, built from the kernel's arrays without a Python object per record."""
        import numpy as np
        import pyarrow as pa

        rows = run.records
        take, file_values = _batch_rows(run.counts), self._file_values()
        timestamp_types = np.where(run.attributes & 0x08, TIMESTAMP_TYPE_IDS["LogAppendTime"],
                                   TIMESTAMP_TYPE_IDS["CreateTime"]).astype(np.int32)
        per_batch = {
            "timestampType": timestamp_types, "producer_id": run.producer_ids,
            "producer_epoch": run.producer_epochs.astype(np.int16), "is_transactional": (run.attributes & 0x10) != 0,
            "batch_base_offset": run.base_offsets, "batch_last_offset": run.last_offsets,
            "file_position": run.positions,
        }
        columns = {}
        for field in self.schema:
            name = field.name
            if name in ("key", "value"):
                lengths = run.key_lengths if name == "key" else run.value_lengths
                data = run.key_data if name == "key" else run.value_data
                valid = lengths >= 0
                offsets = np.zeros(rows + 1, dtype=np.int32)
                np.cumsum(np.where(valid, lengths, 0), out=offsets[1:])
                columns[name] = pa.Array.from_buffers(
                    field.type, rows, [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(offsets),
                                       pa.py_buffer(data)], null_count=int(rows - valid.sum()))
            elif name in per_batch:
                columns[name] = pa.array(per_batch[name], type=field.type).take(take)
            elif name == "offset":
                columns[name] = pa.array(run.offsets, type=field.type)
            elif name == "timestamp":
                columns[name] = pa.array(run.timestamps * 1000, type=field.type, mask=run.timestamps == -1)
            elif name == "is_control":
                columns[name] = pa.array((run.attributes & 0x20) != 0, type=field.type).take(take)
            elif name == "control_type":
                # The kernel's ids index the names, the two negative ones from the end (``_control_type_names``).
                names = _control_type_names()
                columns[name] = pa.array(names, type=field.type).take(run.control_types % len(names))
            elif name == "coordinator_epoch":
                epochs = run.coordinator_epochs
                columns[name] = pa.array(epochs.astype(np.int32), type=field.type, mask=epochs == run.NO_EPOCH)
            elif name == "batch_magic":
                columns[name] = pa.array(np.full(rows, 2, dtype=np.int16), type=field.type)
            elif name == "compression":
                columns[name] = pa.repeat(pa.scalar("none", type=field.type), rows)
            elif name in file_values:
                # One value repeated, not a list of ``rows`` Python strings to convert.
                columns[name] = pa.repeat(pa.scalar(file_values[name], type=field.type), rows)
            else:  # the read-error columns: null on a readable record
                columns[name] = pa.nulls(rows, type=field.type)
        return pa.RecordBatch.from_arrays([columns[field.name] for field in self.schema], schema=self.schema)

    def flush(self):
        import numpy as np
        import pyarrow as pa

        take, file_values = _batch_rows(self.counts), self._file_values()
        timestamps = np.array(self.timestamps, dtype=np.int64)
        rows = self.rows
        columns = {}
        for field in self.schema:
            name = field.name
            if name in self.records:
                columns[name] = pa.array(self.records[name], type=field.type)
            elif name in self.batches:
                columns[name] = pa.array(self.batches[name], type=field.type).take(take)
            elif name == "timestamp":
                columns[name] = pa.array(timestamps * 1000, type=field.type, mask=timestamps == -1)
            elif name in file_values:
                columns[name] = pa.repeat(pa.scalar(file_values[name], type=field.type), rows)
        self._reset()
        return pa.RecordBatch.from_arrays([columns[field.name] for field in self.schema], schema=self.schema)


def _control_type_names() -> list:
    """A control record's type name by the kernel's id (``BatchRun.control_types``): ids 0-6 index the names,
    NOT_CONTROL (-2) and CONTROL_UNKNOWN (-1) index from the end (no name, "UNKNOWN")."""
    from offsets_audit.sources.segments import CONTROL_TYPE_NAMES

    return [*CONTROL_TYPE_NAMES.values(), None, "UNKNOWN"]


def _batch_rows(counts):
    """For ``take``: each Kafka batch's index repeated once per row it holds (batch attributes are kept once per
    batch and expanded to rows at the end)."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
