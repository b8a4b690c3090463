"""The one row shape every source produces: Spark's Kafka-source columns plus record-batch attributes.

``key``/``value``/``topic``/``partition``/``offset``/``timestamp``/``timestampType`` are exactly the
columns of Spark's built-in ``kafka`` source, so a DataFrame read with ``spark.read.format("kafka")``
is already a valid input. The batch attributes are null where a source cannot see them (a consumer never
sees control batches or producer ids).
"""

from pyspark.sql.types import (
    BinaryType, BooleanType, IntegerType, LongType, ShortType, StringType, StructField, StructType,
    TimestampType,
)

#: Spark Kafka source's columns, in its order.
KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]

#: Record-batch attributes that log segments (and partly kafka-python) can see.
BATCH_COLUMNS = [
    "producer_id", "producer_epoch", "is_transactional", "is_control", "control_type",
    "coordinator_epoch", "batch_base_offset", "batch_last_offset", "batch_magic", "compression",
    "source_file", "file_position", "read_error_code", "read_error_message", "records_lost", "raw_bytes",
]

# The column tables below are data: one StructField per column.
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
])

BATCH_SCHEMA = StructType([
    StructField("producer_id", LongType(), True),
    StructField("producer_epoch", ShortType(), True),
    StructField("is_transactional", BooleanType(), True),
    StructField("is_control", BooleanType(), True),
    StructField("control_type", StringType(), True),
    StructField("coordinator_epoch", IntegerType(), True),
    StructField("batch_base_offset", LongType(), True),
    StructField("batch_last_offset", LongType(), True),
    StructField("batch_magic", ShortType(), True),
    StructField("compression", StringType(), True),
    StructField("source_file", StringType(), True),
    StructField("file_position", LongType(), True),
    # Set only on a quarantine row a source emits for bytes it could not read (key/value/offset null then):
    # e.g. read_error_code "crc_mismatch", read_error_message naming file, byte position, the offsets lost and
    # the fix. On such a row batch_base_offset/batch_last_offset are the offsets it cost (null when none),
    # records_lost how many, and raw_bytes the bytes it covers (at most segments.RAW_BYTES_CAP, 64 KiB).
    StructField("read_error_code", StringType(), True),
    StructField("read_error_message", StringType(), True),
    StructField("records_lost", LongType(), True),
    StructField("raw_bytes", BinaryType(), True),
])

#: What every source returns: Kafka columns then batch attributes.
SOURCE_SCHEMA = StructType(KAFKA_SCHEMA.fields + BATCH_SCHEMA.fields)

#: Spark's timestampType codes (Kafka's TimestampType ids).
TIMESTAMP_TYPE_IDS = {"NoTimestampType": -1, "CreateTime": 0, "LogAppendTime": 1}


def with_batch_columns(df):
    """Add any missing batch attribute as a typed null column, so every source has SOURCE_SCHEMA's columns."""
    from offsets_audit.plans import quoted, sql_type

    present = set(df.columns)
    missing = [f"CAST(NULL AS {sql_type(f.dataType)}) AS {quoted(f.name)}" for f in BATCH_SCHEMA.fields
               if f.name not in present]
    return df.selectExpr("*", *missing) if missing else df


def as_source_schema(df):
    """SOURCE_SCHEMA's columns in order (batch columns added as nulls), extra columns after them."""
    from offsets_audit.plans import cast_to

    present, batch = set(df.columns), set(BATCH_SCHEMA.fieldNames())
    missing = [n for n in SOURCE_SCHEMA.fieldNames() if n not in present and n not in batch]
    if missing:  # a source's own frame: a programming error, not the user's
        raise ValueError(f"a source's rows lack the record columns {missing}")
    names = set(SOURCE_SCHEMA.fieldNames())
    return cast_to(df, SOURCE_SCHEMA, [c for c in df.columns if c not in names])
