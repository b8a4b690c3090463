"""``spark.read.format("kafka-segments").load(path)``: broker log segments as a Spark Python Data Source.

Returns ``SOURCE_SCHEMA`` rows (Spark Kafka-source columns plus batch attributes), one per record, control
records included, plus one quarantine row per unreadable stretch of bytes (``read_error_code`` set, key/value
and offset null, ``batch_base_offset``/``batch_last_offset`` as the bad header claimed them).

Options:

* ``path``: a ``.log`` file, a ``__consumer_offsets-N`` folder or a broker log dir (``load(path)`` sets it).
* ``partition``: force this partition number (default: from the ``<topic>-N`` folder name, else null).
* ``topic``: value of the ``topic`` column (default ``__consumer_offsets``).
* ``maxBytesPerPartition``: files larger than this are split at batch boundaries into several input
  partitions (default 128 MiB). The driver finds the boundaries by walking 12-byte batch headers only.
* ``rowsPerBatch``: rows per Arrow record batch handed to Spark (default 10000).

The driver plans one input partition per segment (or per byte range of a large segment); each task decodes its
range with ``offsets_audit.sources.segments.iter_batches`` and yields ``pyarrow.RecordBatch`` es.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from offsets_audit.errors import UserError
from offsets_audit.sources.schema import SOURCE_SCHEMA, TIMESTAMP_TYPE_IDS

DEFAULT_TOPIC = "__consumer_offsets"
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
DEFAULT_ROWS_PER_BATCH = 10_000


class SegmentRange(InputPartition):
    """Bytes ``[start, end)`` of one segment file (``end`` None: to the end of the file)."""

    def __init__(self, path: str, partition: int | None, start: int, end: int | None):
        super().__init__((path, partition, start, end))
        self.path, self.partition, self.start, self.end = path, partition, start, end


class SegmentsDataSource(DataSource):
    """Batch reads of Kafka broker log segment files (``*.log``), magic 0/1/2, every codec."""

    @classmethod
    def name(cls) -> str:
        return "kafka-segments"

    def schema(self):
        return SOURCE_SCHEMA

    def reader(self, schema) -> "SegmentsReader":
        return SegmentsReader(dict(self.options))


class SegmentsReader(DataSourceReader):
    def __init__(self, options: dict):
        options = {str(k).lower(): v for k, v in options.items()}
        if not options.get("path"):
            raise UserError("the kafka-segments source needs a path",
                            fix='use spark.read.format("kafka-segments").load("/path/to/log-dir")')
        self.path = str(options["path"])
        self.topic = str(options.get("topic", DEFAULT_TOPIC))
        self.partition_override = _int_option(options, "partition", None, minimum=0)
        self.max_bytes = _int_option(options, "maxbytesperpartition", DEFAULT_MAX_BYTES_PER_PARTITION, minimum=1)
        self.rows_per_batch = _int_option(options, "rowsperbatch", DEFAULT_ROWS_PER_BATCH, minimum=1)

    def partitions(self) -> list[SegmentRange]:
        from offsets_audit.sources.segments import batch_boundaries, list_segments

        ranges = []
        for path, partition in list_segments(self.path):
            if self.partition_override is not None:
                partition = self.partition_override
            for start, end in batch_boundaries(path, self.max_bytes):
                ranges.append(SegmentRange(path, partition, start, end))
        return ranges or [SegmentRange("", None, 0, 0)]

    def read(self, partition: SegmentRange) -> Iterator:
        if not partition.path:
            return
        yield from read_arrow(partition.path, partition.partition, self.topic, partition.start, partition.end,
                              self.rows_per_batch)


def source_arrow_schema():
    """SOURCE_SCHEMA as the Arrow schema Spark checks Python data source batches against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


def read_arrow(path: str, partition: int | None, topic: str = DEFAULT_TOPIC, start: int = 0, end: int | None = None,
               rows_per_batch: int = DEFAULT_ROWS_PER_BATCH) -> Iterator:
    """Decode ``[start, end)`` of a segment into ``pyarrow.RecordBatch`` es of ``SOURCE_SCHEMA`` rows."""
    from offsets_audit.sources.segments import iter_batches

    columns = _Columns(path, partition, topic)
    pending: list[dict] = []
    for batch in iter_batches(path, pending.append, start, end, partition=partition):
        if pending:
            columns.add_quarantine(pending)
            pending.clear()
        columns.add_batch(batch)
        if columns.rows >= rows_per_batch:
            yield columns.flush()
    if pending:
        columns.add_quarantine(pending)
    if columns.rows:
        yield columns.flush()


class _Columns:
    """Column lists for one Arrow record batch, filled a whole Kafka batch at a time."""

    _NAMES = [field.name for field in SOURCE_SCHEMA.fields]

    def __init__(self, path: str, partition: int | None, topic: str):
        self.path, self.partition, self.topic = path, partition, topic
        self.schema = source_arrow_schema()
        self._reset()

    def _reset(self) -> None:
        self.data = {name: [] for name in self._NAMES}
        self.rows = 0

    def add_batch(self, batch) -> None:
        count = len(batch.records)
        if not count:
            return
        offsets, timestamps, keys, values, _ = zip(*batch.records)
        data = self.data
        data["key"].extend(keys)
        data["value"].extend(values)
        data["offset"].extend(offsets)
        data["timestamp"].extend(None if ts == -1 else ts * 1000 for ts in timestamps)
        if batch.controls is not None:
            control_types, coordinator_epochs = zip(*batch.controls)
            data["control_type"].extend(control_types)
            data["coordinator_epoch"].extend(coordinator_epochs)
        else:
            data["control_type"].extend([None] * count)
            data["coordinator_epoch"].extend([None] * count)
        constants = {
            "topic": self.topic, "partition": self.partition,
            "timestampType": TIMESTAMP_TYPE_IDS[batch.timestamp_type], "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch, "is_transactional": batch.is_transactional,
            "is_control": batch.is_control, "batch_base_offset": batch.base_offset,
            "batch_last_offset": batch.last_offset, "batch_magic": batch.magic, "compression": batch.compression,
            "source_file": self.path, "file_position": batch.position, "read_error_code": None,
            "read_error_message": None,
        }
        for name, value in constants.items():
            data[name].extend([value] * count)
        self.rows += count

    def add_quarantine(self, entries: list[dict]) -> None:
        for entry in entries:
            row = dict.fromkeys(self._NAMES)
            row.update(topic=self.topic, partition=self.partition, batch_base_offset=entry["base_offset"],
                       batch_last_offset=entry["last_offset"], source_file=self.path, file_position=entry["position"],
                       read_error_code=entry["error_code"], read_error_message=entry["message"])
            for name, value in row.items():
                self.data[name].append(value)
            self.rows += 1

    def flush(self):
        import pyarrow as pa

        arrays = [pa.array(self.data[field.name], type=field.type) for field in self.schema]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _int_option(options: dict, name: str, default, minimum: int):
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise UserError(f"kafka-segments option {name}={raw!r} is not an integer",
                        fix=f"pass a whole number >= {minimum}") from None
    if value < minimum:
        raise UserError(f"kafka-segments option {name}={value} is below {minimum}", fix=f"pass a value >= {minimum}")
    return value
