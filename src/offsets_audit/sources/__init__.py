"""Sources: bytes in, Spark Kafka-source rows out (live Kafka, Parquet dumps, broker log segments)."""

from __future__ import annotations

from offsets_audit.sources.options import option_text
from offsets_audit.sources.options import required_path as _required_path
from offsets_audit.sources.options import text_options as _text_options

__all__ = ["option_text", "read", "register", "spark_kafka_available"]

_REGISTERED: set[int] = set()


def register(spark) -> None:
    """Register the Python Data Sources ``kafka-segments`` and ``kafka-python`` on ``spark`` (idempotent)."""
    key = id(spark)
    if key in _REGISTERED:
        return
    from offsets_audit.sources.kafka_spark import KafkaPythonDataSource
    from offsets_audit.sources.segments_source import SegmentsDataSource

    for source in (SegmentsDataSource, KafkaPythonDataSource):
        spark.dataSource.register(source)
    _REGISTERED.add(key)


#: Keys of a source config that choose or locate the source rather than being reader options.
_CONFIG_KEYS = ("kind", "path", "reader")
#: Options only the kafka-python reader understands; Spark's kafka source is not given them.
_PYTHON_ONLY_OPTIONS = ("fetchretries", "retrybackoffms", "polltimeoutms", "rowsperbatch", "isolation.level")
_SPARK_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def read(spark, source_config):
    """The one entry point the jobs use: a DataFrame with SOURCE_SCHEMA's columns from a source config.

    ``source_config`` is a mapping with ``kind`` and the source's options:

    * ``{"kind": "kafka", "kafka.bootstrap.servers": ..., "subscribe": ..., "startingOffsets": ...}``: a live
      read. Spark's own ``kafka`` source when its jar is on the classpath, else ``kafka-python``;
      ``reader: spark|kafka-python`` forces one. Isolation defaults to read_committed.
    * ``{"kind": "parquet", "path": ...}``: a dump written by ``offsets-audit dump`` (or any Kafka-source columns).
    * ``{"kind": "segments", "path": ...}``: broker log segments through the ``kafka-segments`` source.
    """
    from offsets_audit.errors import UserError

    if not hasattr(source_config, "get"):
        raise UserError(f"source config must be a mapping with a kind, got {type(source_config).__name__}",
                        fix="write source: {kind: kafka|parquet|segments, ...}")
    kind = str(source_config.get("kind") or "").strip().lower()
    options = {str(k): v for k, v in source_config.items() if str(k) not in _CONFIG_KEYS and v is not None}
    if kind == "kafka":
        return _read_kafka(spark, options, str(source_config.get("reader") or "auto").lower())
    if kind == "parquet":
        from offsets_audit.sources.parquet import read_parquet

        return read_parquet(spark, _required_path(source_config, kind), options)
    if kind == "segments":
        path = _required_path(source_config, kind)
        register(spark)
        df = spark.read.format("kafka-segments").options(**_text_options(options)).load(path)
        return _as_source_schema(df)
    raise UserError(f"source kind {source_config.get('kind')!r} is unknown",
                    fix="set source kind to kafka, parquet or segments")


def _as_source_schema(df):
    from offsets_audit.sources.schema import as_source_schema  # imports pyspark: only when a read is planned

    return as_source_schema(df)


def spark_kafka_available(spark) -> bool | None:
    """Whether Spark's own ``kafka`` source is on the classpath; None when it cannot be asked (Spark Connect)."""
    try:
        jvm = spark._jvm
    except Exception:
        return None
    if jvm is None:
        return None
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(_SPARK_KAFKA_PROVIDER, False, loader)
        return True
    except Exception:
        return False


def _read_kafka(spark, options: dict, reader: str):
    from offsets_audit.errors import UserError

    if reader not in ("auto", "spark", "kafka-python"):
        raise UserError(f"kafka reader {reader!r} is unknown", fix="set reader to auto, spark or kafka-python")
    available = spark_kafka_available(spark) if reader == "auto" else None
    if reader == "spark" or available:
        return _read_spark_kafka(spark, options)
    if reader == "auto" and available is None:
        try:
            df = _read_spark_kafka(spark, options)
            df.schema  # noqa: B018 - forces analysis, which is where a missing source shows
            return df
        except Exception as exc:
            text = str(exc)
            if "DATA_SOURCE_NOT_FOUND" not in text and "Failed to find data source" not in text:
                raise
    return _read_kafka_python(spark, options)


def _read_spark_kafka(spark, options: dict):
    """Spark's built-in Kafka source with the audit's defaults (``__consumer_offsets``, read_committed)."""
    from offsets_audit.sources.kafka import DEFAULT_TOPIC

    lowered = {k.lower(): k for k in options}
    spark_options = {k: v for k, v in _text_options(options).items() if k.lower() not in _PYTHON_ONLY_OPTIONS}
    if not {"subscribe", "assign", "subscribepattern"} & set(lowered):
        spark_options["subscribe"] = DEFAULT_TOPIC
    if "kafka.isolation.level" not in lowered:
        spark_options["kafka.isolation.level"] = str(options.get(lowered.get("isolation.level", ""), "read_committed"))
    if "fetchretries" in lowered and "fetchoffset.numretries" not in lowered:
        spark_options["fetchOffset.numRetries"] = str(options[lowered["fetchretries"]])
    df = spark.read.format("kafka").options(**spark_options).load()
    from offsets_audit.sources.schema import KAFKA_COLUMNS

    return _as_source_schema(df.select(*KAFKA_COLUMNS))


def _read_kafka_python(spark, options: dict):
    """The kafka-python data source, with offsets resolved here on the driver: the read is one snapshot, and a
    broker that cannot be reached fails now with its one-line message rather than inside a Spark task."""
    from offsets_audit.sources.kafka import parse_options, pinned_options, resolve_offsets

    options = _text_options(options)
    pinned = pinned_options(options, resolve_offsets(parse_options(options)))
    register(spark)
    return spark.read.format("kafka-python").options(**pinned).load()
