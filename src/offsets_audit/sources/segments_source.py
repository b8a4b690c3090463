"""The ``kafka-segments`` Spark Python Data Source: batch reads (``segments_spark``) and streaming reads
(``segments_stream``) of broker log segments, registered by ``offsets_audit.sources.register``."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from offsets_audit.sources.schema import SOURCE_SCHEMA
from offsets_audit.sources.segments_spark import SegmentsReader
from offsets_audit.sources.segments_stream import SegmentsStreamReader


class SegmentsDataSource(DataSource):
    """Batch reads of Kafka broker log segment files (``*.log``), magic 0/1/2, every codec."""

    # name/schema/reader: pyspark's DataSource API.
    @classmethod
    def name(cls) -> str:
        return "kafka-segments"

    def schema(self):
        return SOURCE_SCHEMA

    def reader(self, schema) -> SegmentsReader:
        return SegmentsReader(dict(self.options))

    def streamReader(self, schema) -> SegmentsStreamReader:
        """``spark.readStream.format("kafka-segments")``: see ``offsets_audit.sources.segments_stream``."""
        return SegmentsStreamReader(dict(self.options))
