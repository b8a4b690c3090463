"""``spark.read.format("kafka-python")``: the live Kafka source as a Spark Python Data Source.

Stands in for Spark's built-in ``kafka`` source where its jar is not on the classpath, with the same
options and columns (plus SOURCE_SCHEMA's batch columns, null for a consumer). The driver plans the
offset ranges once (:func:`offsets_audit.sources.kafka.plan_ranges`); each input partition reads one range
with its own consumer and hands Spark Arrow record batches of bounded size.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

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
