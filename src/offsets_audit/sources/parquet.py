"""Parquet dumps: a copy of ``__consumer_offsets`` taken once (``offsets-audit dump`` or any Spark job that
saved the Kafka source's columns) and audited many times.

A dump needs Spark Kafka-source columns; ``key``, ``value``, ``partition`` and ``offset`` are required,
``topic``/``timestamp``/``timestampType`` and the batch attributes are added as nulls when absent, and any
extra columns are kept after SOURCE_SCHEMA's.
"""

from __future__ import annotations

from typing import Iterable

from offsets_audit.errors import UserError
from offsets_audit.sources.schema import KAFKA_SCHEMA, SOURCE_SCHEMA, with_batch_columns

#: Without these a record cannot be decoded or ordered.
REQUIRED_COLUMNS = ("key", "value", "partition", "offset")


def missing_columns(columns: Iterable[str]) -> list[str]:
    present = set(columns)
    return [name for name in REQUIRED_COLUMNS if name not in present]


def read_parquet(spark, path: str, options: dict | None = None):
    """Read a Parquet dump as a DataFrame with SOURCE_SCHEMA's columns first (typed as SOURCE_SCHEMA)."""
    from pyspark.sql import functions as F

    reader = spark.read
    if options:
        from offsets_audit.sources.options import option_text

        reader = reader.options(**{k: option_text(v) for k, v in options.items()})
    try:
        df = reader.parquet(path)
    except Exception as exc:  # AnalysisException on classic Spark and Spark Connect alike
        text = str(exc)
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            raise UserError(f"Parquet dump {path} does not exist",
                            fix="set path to a directory written by `offsets-audit dump`") from None
        if "UNABLE_TO_INFER_SCHEMA" in text:
            raise UserError(f"{path} holds no Parquet files",
                            fix="point path at a dump directory written by `offsets-audit dump`") from None
        raise
    missing = missing_columns(df.columns)
    if missing:
        raise UserError(
            f"Parquet dump {path} has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            fix="dump the Kafka source's columns (key, value, topic, partition, offset, timestamp, timestampType), "
                "e.g. with `offsets-audit dump`")
    for field in KAFKA_SCHEMA.fields:
        if field.name not in df.columns:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
    df = with_batch_columns(df)
    typed = [F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in SOURCE_SCHEMA.fields]
    extras = [F.col(f"`{name}`") for name in df.columns if name not in SOURCE_SCHEMA.fieldNames()]
    return df.select(*typed, *extras)
