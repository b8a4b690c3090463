"""Sources: bytes in, Spark Kafka-source rows out (live Kafka, Parquet dumps, broker log segments)."""

from __future__ import annotations

_REGISTERED: set[int] = set()


def register(spark) -> None:
    """Register the Python Data Sources ``kafka-segments`` and ``kafka-python`` on ``spark`` (idempotent)."""
    key = id(spark)
    if key in _REGISTERED:
        return
    try:
        from offsets_audit.sources.segments_spark import SegmentsDataSource
    except ImportError:  # pragma: no cover - during early development
        SegmentsDataSource = None
    try:
        from offsets_audit.sources.kafka_spark import KafkaPythonDataSource
    except ImportError:  # pragma: no cover
        KafkaPythonDataSource = None
    for source in (SegmentsDataSource, KafkaPythonDataSource):
        if source is not None:
            spark.dataSource.register(source)
    _REGISTERED.add(key)
