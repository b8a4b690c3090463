"""``spark.read.format("kafka-python")``: the live Kafka source as a Spark Python Data Source.

Stands in for Spark's built-in ``kafka`` source where its jar is not on the classpath, with the same
options and columns (plus SOURCE_SCHEMA's batch columns, null for a consumer). The driver plans the
offset ranges once (:func:`offsets_audit.sources.kafka.plan_ranges`); each input partition reads one range
with its own consumer and hands Spark Arrow record batches of bounded size.

``spark.readStream.format("kafka-python")`` reads the same way in micro-batches (``KafkaPythonStreamReader``), so
an incremental run on a live cluster falls back to it as the batch run does: its offset is, as Spark's kafka
source's, the next offset of each topic partition (``{"__consumer_offsets": {"0": 1234, ...}}``), starting at
``startingOffsets``; ``maxOffsetsPerTrigger`` bounds a micro-batch, and ``Trigger.AvailableNow`` reads up to the
offsets the broker reported when the query started.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from offsets_audit.sources.schema import SOURCE_SCHEMA

#: Rows per Arrow record batch handed to Spark (bounds a task's memory with max.partition.fetch.bytes).
DEFAULT_ROWS_PER_BATCH = 10_000


class KafkaRangePartition(InputPartition):
    """One input partition: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaPythonDataSource(DataSource):
    """Batch reads of Kafka topics through kafka-python, with Spark Kafka source options."""

    # name/schema/reader: pyspark's DataSource API.
    @classmethod
    def name(cls) -> str:
        return "kafka-python"

    def schema(self):
        return SOURCE_SCHEMA

    def reader(self, schema) -> KafkaPythonReader:
        return KafkaPythonReader(dict(self.options))

    def streamReader(self, schema) -> KafkaPythonStreamReader:
        return KafkaPythonStreamReader(dict(self.options))


class KafkaPythonReader(DataSourceReader):
    def __init__(self, options: dict):
        from offsets_audit.sources.kafka import parse_options

        self.options = {str(k).lower(): v for k, v in options.items()}
        # Parse now so a bad option fails at planning with its one-line message, not inside a task.
        parse_options(self.options)
        rows = self.options.get("rowsperbatch", DEFAULT_ROWS_PER_BATCH)
        self.rows_per_batch = max(1, int(rows))

    def partitions(self) -> list[KafkaRangePartition]:
        from offsets_audit.sources.kafka import plan_ranges

        ranges = plan_ranges(self.options)
        return [KafkaRangePartition(r.topic, r.partition, r.start, r.end) for r in ranges] or [
            KafkaRangePartition("", -1, 0, 0)]

    def read(self, partition: KafkaRangePartition) -> Iterator:
        import pyarrow as pa

        from offsets_audit.sources.kafka import OffsetRange, read_range

        if partition.end <= partition.start:
            return
        arrow_schema = source_arrow_schema()
        offset_range = OffsetRange(partition.topic, partition.partition, partition.start, partition.end)
        rows: list[dict] = []
        for row in read_range(self.options, offset_range):
            rows.append(row)
            if len(rows) >= self.rows_per_batch:
                yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)
                rows = []
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)


#: Options a stream reads that a batch read does not (lower-case); ``endingOffsets`` is the batch read's only.
STREAM_ONLY_OPTIONS = ("maxoffsetspertrigger",)


class KafkaPythonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a live cluster's new records; the offset is the next offset per topic partition."""

    def __init__(self, options: dict):
        from offsets_audit.sources.kafka import parse_options

        lowered = {str(k).lower(): v for k, v in options.items()}
        self.max_offsets = int(lowered["maxoffsetspertrigger"]) if lowered.get("maxoffsetspertrigger") else None
        self.options = {k: v for k, v in lowered.items() if k not in STREAM_ONLY_OPTIONS + ("endingoffsets",)}
        parse_options(self.options)  # a bad option fails at planning with its one line
        self.batch = KafkaPythonReader(self.options)
        self.target: dict | None = None

    def _bounds(self) -> dict[tuple[str, int], tuple[int, int]]:
        from offsets_audit.sources.kafka import resolve_offsets

        return resolve_offsets(self.options)

    @staticmethod
    def _as_offset(positions: dict[tuple[str, int], int]) -> dict:
        out: dict[str, dict[str, int]] = {}
        for (topic, partition), position in sorted(positions.items()):
            out.setdefault(topic, {})[str(partition)] = int(position)
        return out

    @staticmethod
    def _positions(offset: dict | None) -> dict[tuple[str, int], int]:
        return {(topic, int(p)): int(o) for topic, parts in (offset or {}).items() for p, o in parts.items()}

    def initialOffset(self) -> dict:
        return self._as_offset({tp: start for tp, (start, _) in self._bounds().items()})

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._as_offset({tp: end for tp, (_, end) in self._bounds().items()})

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_offsets) if self.max_offsets else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        done = self._positions(start)
        bounds = self._bounds()
        ends = {tp: end for tp, (_, end) in bounds.items()}
        if self.target is not None:
            target = self._positions(self.target)
            ends = {tp: min(end, target.get(tp, end)) for tp, end in ends.items() if tp in target}
        out = dict(done)
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        for tp in sorted(ends):
            begin = done.get(tp, bounds[tp][0])  # a partition new since the start: from its starting offset
            stop = max(begin, ends[tp])
            if budget is not None:
                stop = min(stop, begin + max(budget, 0))
                budget -= stop - begin
            out[tp] = stop
        return self._as_offset(out)

    def partitions(self, start: dict, end: dict) -> list[KafkaRangePartition]:
        from offsets_audit.sources.kafka import OffsetRange, as_config, split_range

        done = self._positions(start)
        limit = as_config(self.options).max_records_per_partition
        starts: dict | None = None
        out = []
        for tp, stop in sorted(self._positions(end).items()):
            begin = done.get(tp)
            if begin is None:  # a partition new since the start: from its starting offset
                starts = starts if starts is not None else {t: s for t, (s, _) in self._bounds().items()}
                begin = starts.get(tp, stop)
            for piece in split_range(OffsetRange(tp[0], tp[1], begin, stop), limit):
                out.append(KafkaRangePartition(piece.topic, piece.partition, piece.start, piece.end))
        return out

    def read(self, partition: KafkaRangePartition) -> Iterator:
        return self.batch.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the records are only read."""


def source_arrow_schema():
    """SOURCE_SCHEMA as an Arrow schema (timestamps in microseconds, UTC, as Spark expects)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    arrow_types = {
        T.BinaryType: pa.binary(), T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
        T.ShortType: pa.int16(), T.BooleanType: pa.bool_(), T.TimestampType: pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([pa.field(f.name, arrow_types[type(f.dataType)], nullable=f.nullable)
                      for f in SOURCE_SCHEMA.fields])
